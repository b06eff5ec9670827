/*
 * icpt_sigv4.c: an inject rule's sigv4 re-signs the request after it is
 * judged (and its placeholders swapped): the sandbox's Authorization and
 * X-Amz-Date, -Security-Token and -Content-Sha256 go, the ones signed with
 * the sealed AWS credentials come, and the credentials' secret is noted
 * among the request's (audited, counted, its session token redacted).
 * The payload hash: UNSIGNED-PAYLOAD for s3, the empty body's hash for a
 * request without one; for another service the head waits for the body
 * (icpt_hold.c: at most 1 MiB, with a Content-Length), signed with its
 * hash once it is whole.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <sodium.h>

#include "parse/httphead.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/secrets.h"
#include "keys/sigv4.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

static const char *const amz_drop[] = {
	"authorization", "x-amz-date", "x-amz-security-token",
	"x-amz-content-sha256",
};
#define NDROP	(sizeof(amz_drop) / sizeof(amz_drop[0]))

static int
is_aws(const struct secret *s)
{
	return s->aws != NULL;
}

/*
 * Signs for the connection's host: the headers in the scratch after
 * *wipe (moved on), pointed to by sh.  -1 when they do not fit.
 */
static int
sign(struct icpt *ic, const struct secret *s, const char *method,
    const char *target, const char *service, const char *region,
    const char *payload_hash, size_t *wipe, struct sigv4_headers *sh)
{
	struct conn *c = ic->c;
	struct sigv4_req rq;
	char host[NAME_BUFSZ + 8], *buf;
	long n;

	if (c->dst_port != 443)
		snprintf(host, sizeof(host), "%s:%u", c->name, c->dst_port);
	else
		snprintf(host, sizeof(host), "%s", c->name);
	memset(&rq, 0, sizeof(rq));
	rq.method = method;
	rq.target = target;
	rq.host = host;
	rq.service = service;
	rq.region = region;
	rq.payload_hash = payload_hash;
	rq.now = time(NULL);
	rq.double_encode = strcmp(service, "s3") != 0;
	if ((buf = loop_scratch(c->l)) == NULL ||
	    (n = sigv4_sign(s->aws, &rq, buf + *wipe, INJECT_BUF - *wipe,
	    sh)) < 0)
		return -1;
	*wipe += (size_t)n;
	return 0;
}

int
icpt_sigv4(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target,
    struct inject *inj, size_t *wipe, int ka_close)
{
	const struct secret *s;
	struct sigv4_headers sh;
	int s3 = strcmp(rule->sigv4_service, "s3") == 0;
	int later = !s3 && (h->chunked || h->content_length > 0);
	size_t i;

	if ((s = icpt_secret_for(ic, rule->sigv4_secret, is_aws,
	    "AWS credentials", ka_close)) == NULL)
		return -1;
	/* Another service signs its body's hash: the head waits for it. */
	if (later && icpt_hold_check(ic, h, "signed (SigV4)", ka_close) != 0)
		return -1;
	if (inj->nadd + 4 > INJECT_MAX_ADD ||
	    inj->ndrop + NDROP + 1 > sizeof(inj->drop) / sizeof(inj->drop[0]) ||
	    strlen(rule->sigv4_service) >= sizeof(((struct icpt_hold *)0)->service) ||
	    strlen(rule->sigv4_region) >= sizeof(((struct icpt_hold *)0)->region) ||
	    (!later && sign(ic, s, h->method, target, rule->sigv4_service,
	    rule->sigv4_region, s3 ? SIGV4_UNSIGNED : SIGV4_EMPTY_SHA256, wipe,
	    &sh) != 0) || inject_add_used(inj, s) != 0) {
		icpt_refuse(ic, 500, "internal", "secret-too-large", "sluice: "
		    "the request cannot be signed", ka_close);
		return -1;
	}
	for (i = 0; i < NDROP; i++)
		inj->drop[inj->ndrop++] = amz_drop[i];
	if (later) {
		inj->drop[inj->ndrop++] = "expect";	/* icpt_hold_continue */
		return 1;
	}
	inj->add[inj->nadd].name = "authorization";
	inj->add[inj->nadd++].value = sh.authorization;
	inj->add[inj->nadd].name = "x-amz-date";
	inj->add[inj->nadd++].value = sh.amz_date;
	inj->add[inj->nadd].name = "x-amz-content-sha256";
	inj->add[inj->nadd++].value = sh.content_sha256;
	if (sh.security_token != NULL) {
		inj->add[inj->nadd].name = "x-amz-security-token";
		inj->add[inj->nadd++].value = sh.security_token;
	}
	return 0;
}

void
icpt_sigv4_hold(struct icpt_hold *hd, const struct intercept_rule *rule,
    const struct inject *inj)
{
	size_t i;

	for (i = 0; i < inj->nused && hd->creds == NULL; i++)
		if (inj->used[i]->aws != NULL &&
		    strcmp(inj->used[i]->name, rule->sigv4_secret) == 0)
			hd->creds = secret_ref(inj->used[i]);
	snprintf(hd->service, sizeof(hd->service), "%s", rule->sigv4_service);
	snprintf(hd->region, sizeof(hd->region), "%s", rule->sigv4_region);
}

int
icpt_sigv4_finish(struct icpt *ic, struct icpt_hold *hd,
    const uint8_t md[32])
{
	struct sigv4_headers sh;
	char hex[65];
	size_t wipe = 0;
	int r = -1;

	sodium_bin2hex(hex, sizeof(hex), md, 32);
	if (hd->creds == NULL || sign(ic, hd->creds, hd->method, hd->target,
	    hd->service, hd->region, hex, &wipe, &sh) != 0) {
		icpt_fail_unsent(ic, 1, evbuffer_get_length(ic->held), 500,
		    "secret-too-large", "the request cannot be signed");
		goto out;
	}
	if (evbuffer_add_buffer(ic->held, hd->head) != 0 ||
	    evbuffer_add_printf(ic->held, "authorization: %s\r\n"
	    "x-amz-date: %s\r\nx-amz-content-sha256: %s\r\n%s%s%s\r\n",
	    sh.authorization, sh.amz_date, sh.content_sha256,
	    sh.security_token ? "x-amz-security-token: " : "",
	    sh.security_token ? sh.security_token : "",
	    sh.security_token ? "\r\n" : "") < 0 ||
	    evbuffer_add_buffer(ic->held, hd->body) != 0) {
		icpt_end(ic, "out-of-memory");
		goto out;
	}
	icpt_up_release(ic);
	r = 0;
 out:
	if (wipe > 0)
		sodium_memzero(loop_scratch(ic->c->l), wipe);
	return r;
}
