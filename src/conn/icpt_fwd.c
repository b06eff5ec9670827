/*
 * icpt_fwd.c: forward rules.  The request goes, over verified TLS, to the
 * operator's policy proxy instead of its host, with the sandbox's
 * identity in a signed token (jwt.h):
 *
 *   <method> <the rule's path prefix><target> HTTP/1.1
 *   Host: <proxy>
 *   ... the request's headers, less hop-by-hop ones and any the sandbox
 *       sent that speak for a gateway (http_header_claim(): Forwarded,
 *       X-Forwarded-*, X-Original-URL, X-Real-IP, X-Envoy-*, the method
 *       overrides, Sluice-*, ...) ...
 *   Forwarded: host="<host>[:<port>]";proto=https
 *   Sluice-Identity: <token>
 *
 * A token is made for one request: its URL (htu), method, the sandbox,
 * team and project, the rule's audience, a short life, a random jti and,
 * when the rule asks (body_hash), the SHA-256 of the body -- then the
 * head waits for the whole body (icpt_hold.c: at most 1 MiB, with a
 * Content-Length).  The request's record, with the jti, is queued before
 * a byte goes to the proxy.  The token never reaches the sandbox: the
 * proxy's answer is redacted for it like a secret.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <sodium.h>

#include "util/keyfile.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/redact.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "parse/httpwrite.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/idkeys.h"
#include "keys/jwt.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

#define FWD_HEAD_MAX	(64u * 1024)
#define FWD_HTU_MAX	(2 * HTTP_MAX_TARGET + NAME_BUFSZ + 16)

/*
 * The names, as received, of h's headers that claim what only sluice may
 * tell the proxy: who sent the request, where to and with which method
 * (http_header_claim()).  The proxy routes and authorises by them, so
 * none of the sandbox's reaches it; sluice's own Forwarded and
 * Sluice-Identity come after.  drop has room for HTTP_MAX_HEADERS.
 */
static size_t
fwd_drop(const struct http_head *h, const char **drop)
{
	size_t i, n = 0;

	for (i = 0; i < h->nheaders && n < HTTP_MAX_HEADERS; i++)
		if (http_header_claim(h->headers[i].name,
		    h->headers[i].name_len) != HTTP_CLAIM_NONE)
			drop[n++] = h->headers[i].name;
	return n;
}

int
icpt_fwd_check(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, int ka_close)
{
	struct conn *c = ic->c;

	if (c->l->st->idkeys == NULL || c->l->cfg->issuer == NULL) {
		icpt_refuse(ic, 403, "denied", "forwarding-off", "sluice: this "
		    "gateway signs no identity tokens (signing_key, issuer)",
		    ka_close);
		return -1;
	}
	if (c->sb == NULL || c->sb->id == NULL) {
		icpt_refuse(ic, 403, "denied", "forwarding-unregistered",
		    "sluice: only a registered sandbox has an identity",
		    ka_close);
		return -1;
	}
	if (h->upgrade) {
		icpt_refuse(ic, 403, "denied", "forward-upgrade", "sluice: a "
		    "forwarded request may not switch protocols", ka_close);
		return -1;
	}
	if (rule->forward_body_hash)
		return icpt_hold_check(ic, h, "hashed into its token", ka_close);
	return 0;
}

/* The token's forms, in guarded memory, for the redactor. */
static struct icpt_tok *
tok_forms(const char *tok, size_t len)
{
	size_t fl = redact_forms_size(len);
	struct icpt_tok *t;
	int n;

	if (fl == 0 || (t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	if ((t->mem = secmem_alloc(fl)) == NULL) {
		free(t);
		return NULL;
	}
	if ((n = redact_forms((const uint8_t *)tok, len, t->mem, fl, t->pats,
	    REDACT_MAX_FORMS)) < 1) {
		sodium_free(t->mem);
		free(t);
		return NULL;
	}
	t->npats = (size_t)n;
	t->pats_key = redact_serial();
	return t;
}

/*
 * Signs the token of the request ic->cur names, writes its record, and
 * gives the queued request q the token's forms.  -1 after refusing.
 */
static int
sign_and_audit(struct icpt *ic, struct icpt_req *q, const char *aud,
    const char *htu, const char *method, const char *body_sha256, char *tok,
    size_t toklen, long *tlen)
{
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;
	struct audit *a = c->l->audit;
	struct jwt_claims cl;
	uint64_t ticket;
	struct arec recbuf, *rec = &recbuf;

	memset(&cl, 0, sizeof(cl));
	cl.iss = cfg->issuer;
	cl.sandbox = c->sb->id;
	cl.aud = aud;
	cl.team = c->sb->team;
	cl.project = c->sb->project;
	cl.htm = method;
	cl.htu = htu;
	cl.body_sha256 = body_sha256;
	cl.now = time(NULL);
	cl.ttl = cfg->token_ttl_ms < 1000 ? 1 : cfg->token_ttl_ms / 1000;
	if ((*tlen = jwt_sign(c->l->st->idkeys->sign, &cl, tok, toklen,
	    q->jti)) < 0 || (q->tok = tok_forms(tok, (size_t)*tlen)) == NULL) {
		log_warnx("icpt", "%s: cannot sign an identity token: %s",
		    c->name, err_str((int)*tlen));
		return -1;
	}
	snprintf(q->rid, sizeof(q->rid), "%llx-%u-%llu",
	    (unsigned long long)c->l->started, c->l->idx,
	    (unsigned long long)++c->l->rid_next);
	arec_init(rec);
	arec_str(rec, "sandbox", c->sb->id);
	arec_str(rec, "policy", c->policy_name);
	arec_int(rec, "revision", (int64_t)c->policy_rev);
	arec_str(rec, "method", q->method);
	arec_str(rec, "host", c->name);
	arec_str(rec, "path", q->path);
	arec_str(rec, "action", "forward");
	arec_str(rec, "reason", "intercept-rule");
	arec_str(rec, "rule", q->rule);
	arec_str(rec, "rid", q->rid);
	if (ic->stream_id > 0)
		arec_int(rec, "stream", ic->stream_id);
	arec_str(rec, "to", q->to);
	arec_str(rec, "jti", q->jti);
	arec_str(rec, "aud", aud);
	arec_bool(rec, "body_hash", body_sha256 != NULL);
	arec_bool(rec, "intercepted", 1);
	if (c->observing)
		arec_bool(rec, "observe", 1);
	if (c->counter != NULL)
		recent_add(&c->counter->recent, "request", rec);
	if (audit_submit_rec(a, "request", rec, &ticket) != 0) {
		q->rid[0] = '\0';
		return -1;
	}
	if (audit_durable(a) < ticket)
		ic->audit_wait = ticket;
	return 0;
}

/* The claims' URL of the request: https://host[:port]target. */
static void
request_url(const struct conn *c, const char *target, char *buf, size_t len)
{
	if (c->dst_port != 443)
		snprintf(buf, len, "https://%s:%u%s", c->name, c->dst_port,
		    target);
	else
		snprintf(buf, len, "https://%s%s", c->name, target);
}

int
icpt_fwd_head(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target)
{
	struct conn *c = ic->c;
	struct http_add add[2];
	struct icpt_req *q;
	struct icpt_hold *hd;
	char fhost[NAME_BUFSZ + 16], forwarded[NAME_BUFSZ + 48];
	char ptarget[2 * HTTP_MAX_TARGET + 256], tok[JWT_MAX], *head = NULL;
	const char *drop[HTTP_MAX_HEADERS];
	size_t ndrop;
	long n, tlen = 0;
	int r = -1;

	if (icpt_prepare_up(ic, h, rule, NULL) != 0)
		return -1;
	snprintf(ic->cur.to, sizeof(ic->cur.to), "%s:%u", rule->forward_host,
	    rule->forward_port);
	if (c->dst_port != 443)
		snprintf(fhost, sizeof(fhost), "%s:%u", c->name, c->dst_port);
	else
		snprintf(fhost, sizeof(fhost), "%s", c->name);
	snprintf(forwarded, sizeof(forwarded), "host=\"%s\";proto=https", fhost);
	if ((size_t)snprintf(ptarget, sizeof(ptarget), "%s%s",
	    rule->forward_path, target) >= sizeof(ptarget) ||
	    (head = malloc(FWD_HEAD_MAX)) == NULL) {
		icpt_refuse(ic, 400, "refused", "bad-target", "target too long",
		    1);
		goto out;
	}
	add[0].name = "forwarded";
	add[0].value = forwarded;
	ndrop = fwd_drop(h, drop);
	if (rule->forward_body_hash && ndrop < HTTP_MAX_HEADERS)
		drop[ndrop++] = "expect";	/* icpt_hold_continue */
	n = http_head_serialize_upstream(h, ptarget, rule->forward_host,
	    rule->forward_port, 0, drop, ndrop, add, 1, head,
	    FWD_HEAD_MAX - JWT_MAX - 32);
	if (n < 2) {
		icpt_refuse(ic, 400, "refused", "header-too-large", NULL, 1);
		goto out;
	}
	n -= 2;		/* the empty line comes after the token */
	if ((q = icpt_enqueue(ic, h)) == NULL)
		goto out;
	if (rule->forward_body_hash) {
		/* The head waits for the body: its hash is in the token. */
		if ((hd = icpt_hold_new(HOLD_TOKEN, head, (size_t)n, h,
		    target)) == NULL) {
			icpt_end(ic, "out-of-memory");
			goto out;
		}
		snprintf(hd->aud, sizeof(hd->aud), "%s", rule->forward_audience);
		ic->hold = hd;
		icpt_hold_continue(ic, h);
		r = 0;
		goto out;
	}
	{
		char htu[FWD_HTU_MAX];

		request_url(c, target, htu, sizeof(htu));
		icpt_held_mark(ic);
		if (sign_and_audit(ic, q, rule->forward_audience, htu, h->method,
		    NULL, tok, sizeof(tok), &tlen) != 0) {
			icpt_fail_unsent(ic, 1, evbuffer_get_length(ic->held),
			    503, "audit-unavailable",
			    "the request could not be signed or audited");
			goto out;
		}
	}
	/* Everything for the proxy waits in held until its record may go. */
	if (evbuffer_add(ic->held, head, (size_t)n) != 0 ||
	    evbuffer_add_printf(ic->held, "Sluice-Identity: %.*s\r\n\r\n",
	    (int)tlen, tok) < 0) {
		icpt_end(ic, "out-of-memory");
		goto out;
	}
	icpt_up_release(ic);
	r = 0;
 out:
	sodium_memzero(tok, sizeof(tok));
	free(head);
	return r;
}

int
icpt_fwd_finish(struct icpt *ic, struct icpt_hold *hd,
    const uint8_t md[crypto_hash_sha256_BYTES])
{
	struct icpt_req *q = icpt_q_tail(ic);
	char b64[64], tok[JWT_MAX], htu[FWD_HTU_MAX];
	long tlen = 0;
	int r = -1;

	request_url(ic->c, hd->target, htu, sizeof(htu));
	if (jwt_b64url(md, crypto_hash_sha256_BYTES, b64, sizeof(b64)) != 0 ||
	    sign_and_audit(ic, q, hd->aud, htu, hd->method, b64, tok,
	    sizeof(tok), &tlen) != 0) {
		icpt_fail_unsent(ic, 1, evbuffer_get_length(ic->held), 503,
		    "audit-unavailable",
		    "the request could not be signed or audited");
		goto out;
	}
	if (evbuffer_add_buffer(ic->held, hd->head) != 0 ||
	    evbuffer_add_printf(ic->held, "Sluice-Identity: %.*s\r\n\r\n",
	    (int)tlen, tok) < 0 || evbuffer_add_buffer(ic->held, hd->body) != 0) {
		icpt_end(ic, "out-of-memory");
		goto out;
	}
	icpt_up_release(ic);
	r = 0;
 out:
	sodium_memzero(tok, sizeof(tok));
	return r;
}
