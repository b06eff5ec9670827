/*
 * icpt_sigv4.c: an inject rule's sigv4 re-signs the request after it is
 * judged (and its placeholders swapped): the sandbox's Authorization and
 * X-Amz-Date, -Security-Token and -Content-Sha256 go, the ones signed with
 * the sealed AWS credentials come, and the credentials' secret is noted
 * among the request's (audited, counted, its session token redacted).
 * The payload hash: UNSIGNED-PAYLOAD for s3, the empty body's hash for a
 * request without one.  A body of another service would have to be held
 * to be hashed: refused for now (501 sigv4-body-unsupported).
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* The secret rule signs with, or NULL after refusing. */
static const struct secret *
creds_of(struct icpt *ic, const struct intercept_rule *rule, int ka_close)
{
	struct conn *c = ic->c;
	const struct secret *s;
	char detail[160];

	s = c->l->secrets == NULL ? NULL : secret_set_find(c->l->st->secrets,
	    rule->sigv4_secret, strlen(rule->sigv4_secret));
	if (s == NULL) {
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not available", rule->sigv4_secret);
		icpt_refuse(ic, 503, "unavailable", "secret-unavailable", detail,
		    ka_close);
		return NULL;
	}
	if (s->aws == NULL) {
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not AWS credentials", s->name);
		icpt_refuse(ic, 500, "internal", "secret-kind", detail, ka_close);
		return NULL;
	}
	if (!secret_bound(s, c->name)) {
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not bound to this host", s->name);
		icpt_refuse(ic, 403, "denied", "secret-host-binding", detail,
		    ka_close);
		return NULL;
	}
	return s;
}

int
icpt_sigv4(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target,
    struct inject *inj, size_t *wipe, int ka_close)
{
	struct conn *c = ic->c;
	const struct secret *s;
	struct sigv4_headers sh;
	struct sigv4_req rq;
	char host[NAME_BUFSZ + 8], *buf;
	int s3 = strcmp(rule->sigv4_service, "s3") == 0;
	size_t i;
	long n;

	if ((s = creds_of(ic, rule, ka_close)) == NULL)
		return -1;
	if (!s3 && (h->chunked || h->content_length > 0)) {
		icpt_refuse(ic, 501, "refused", "sigv4-body-unsupported",
		    "sluice: a request body is signed for s3 only (as "
		    "UNSIGNED-PAYLOAD) so far", ka_close);
		return -1;
	}
	if (c->dst_port != 443)
		snprintf(host, sizeof(host), "%s:%u", c->name, c->dst_port);
	else
		snprintf(host, sizeof(host), "%s", c->name);
	memset(&rq, 0, sizeof(rq));
	rq.method = h->method;
	rq.target = target;
	rq.host = host;
	rq.service = rule->sigv4_service;
	rq.region = rule->sigv4_region;
	rq.payload_hash = s3 ? SIGV4_UNSIGNED : SIGV4_EMPTY_SHA256;
	rq.now = time(NULL);
	rq.double_encode = !s3;
	if ((buf = loop_scratch(c->l)) == NULL ||
	    inj->nadd + 4 > INJECT_MAX_ADD ||
	    inj->ndrop + NDROP > sizeof(inj->drop) / sizeof(inj->drop[0]) ||
	    (n = sigv4_sign(s->aws, &rq, buf + *wipe, INJECT_BUF - *wipe,
	    &sh)) < 0 || inject_add_used(inj, s) != 0) {
		icpt_refuse(ic, 500, "internal", "secret-too-large", "sluice: "
		    "the request cannot be signed", ka_close);
		return -1;
	}
	*wipe += (size_t)n;
	for (i = 0; i < NDROP; i++)
		inj->drop[inj->ndrop++] = amz_drop[i];
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
