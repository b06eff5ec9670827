/*
 * icpt_req.c: the requests of an intercepted connection.  Each request
 * the sandbox sends is parsed, judged on its own by the policy's
 * intercept rules (judge, the one decision point), and either refused
 * with sluice's own answer or re-serialised and queued, with its body,
 * for the upstream.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/sbuf.h"
#include "util/metrics.h"
#include "parse/httphead.h"
#include "parse/httppath.h"
#include "parse/httpresp.h"
#include "parse/httpwrite.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/pemkey.h"
#include "keys/secrets.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/tstream.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

#define ICPT_HEAD_MAX		(64u * 1024)	/* a re-serialised request head */

/* What observe mode judges a request no rule allows by: as it is. */
static const struct intercept_rule observe_rule = {
	.name = "observe", .label = "observe", .action = ICPT_PASS,
};
#define ICPT_PATH_MAX		(HTTP_MAX_TARGET + 1)	/* a normalised path always fits */

/* ---- judging -------------------------------------------------------- */

void
icpt_secret_refuse(struct icpt *ic, enum inject_result why, const char *name,
    const char *what, int ka_close)
{
	char detail[192];

	switch (why) {
	case INJECT_OK:
		return;
	case INJECT_UNAVAILABLE:
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not available", name);
		icpt_refuse(ic, 503, "unavailable", "secret-unavailable",
		    detail, ka_close);
		return;
	case INJECT_UNBOUND:
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not bound to this host", name);
		icpt_refuse(ic, 403, "denied", "secret-host-binding", detail,
		    ka_close);
		return;
	case INJECT_TOO_BIG:
		icpt_refuse(ic, 500, "internal", "secret-too-large",
		    "sluice: the injected headers do not fit", ka_close);
		return;
	case INJECT_WRONG_KIND:
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not %s", name, what);
		icpt_refuse(ic, 500, "internal", "secret-kind", detail,
		    ka_close);
		return;
	case INJECT_NO_TOKEN:	/* icpt_tokens gave every one */
		icpt_refuse(ic, 500, "internal", "token-unavailable", NULL,
		    ka_close);
		return;
	}
}

/* The refusal of a gateway without a secret store; -1. */
static int
secrets_off(struct icpt *ic, int ka_close)
{
	icpt_refuse(ic, 403, "denied", "secrets-off", "sluice: this gateway "
	    "has no secret store (gateway_key, secret_dir)", ka_close);
	return -1;
}

const struct secret *
icpt_secret_for(struct icpt *ic, const char *name,
    int (*ok)(const struct secret *), const char *what, int ka_close)
{
	struct conn *c = ic->c;
	const struct secret *s;

	if (c->l->secrets == NULL) {
		secrets_off(ic, ka_close);
		return NULL;
	}
	s = secret_set_find(c->l->st->secrets, name, strlen(name));
	if (s == NULL || !ok(s) || !secret_bound(s, c->name)) {
		icpt_secret_refuse(ic, s == NULL ? INJECT_UNAVAILABLE :
		    !ok(s) ? INJECT_WRONG_KIND : INJECT_UNBOUND, name, what,
		    ka_close);
		return NULL;
	}
	return s;
}

/*
 * Renders an inject rule's headers into the worker's guarded scratch
 * (*wipe: how much of it to wipe once the head is written), with the
 * tokens its templates name.  Returns 0; 1 when a token is being minted
 * (the request waits); -1 after refusing the request.
 */
static int
inject_prepare(struct icpt *ic, const struct intercept_rule *rule,
    struct inject *inj, size_t *wipe, int ka_close)
{
	struct conn *c = ic->c;
	struct inject_token toks[INJECT_MAX_TOKENS];
	const struct secret *secs[INJECT_MAX_TOKENS];
	struct inject_src src = { NULL, c->name, toks, 0 };
	enum inject_result r;
	size_t i;
	char *buf;
	int w;

	if (c->l->secrets == NULL)
		return secrets_off(ic, ka_close);
	if ((w = icpt_tokens(ic, rule, toks, secs, &src.ntokens,
	    ka_close)) != 0)
		return w;
	if ((buf = loop_scratch(c->l)) == NULL) {
		icpt_refuse(ic, 503, "unavailable", "secret-unavailable",
		    "sluice: out of guarded memory", 1);
		return -1;
	}
	src.set = c->l->st->secrets;
	r = inject_render(rule, &src, buf, INJECT_BUF, wipe, inj);
	/* What a token was minted from is a secret the request got. */
	for (i = 0; r == INJECT_OK && i < src.ntokens; i++)
		if (inject_add_used(inj, secs[i]) != 0)
			r = INJECT_TOO_BIG;
	if (r == INJECT_OK)
		return 0;
	icpt_secret_refuse(ic, r, inj->secret, "a header value", ka_close);
	inject_release(inj);
	sodium_memzero(buf, *wipe);
	*wipe = 0;
	return -1;
}

/*
 * The one decision point of an intercepted request.  Fills ic->cur and
 * returns the rule that lets it go, or NULL after refusing it, or NULL
 * with *waits set when a token it needs is being minted.
 */
static const struct intercept_rule *
judge(struct icpt *ic, const struct http_head *h, char *target,
    size_t target_len, struct inject *inj, size_t *wipe, int *sign_later,
    int *waits)
{
	struct conn *c = ic->c;
	const struct intercept_rule *rule;
	struct http_request_view rq;
	const char *t = h->absolute_form ? h->origin_target : h->target;
	const char *query = NULL, *why = NULL, *refusal;
	size_t tlen = h->absolute_form ? strlen(h->origin_target) :
	    h->target_len, plen = 0, qlen = 0;
	char path[ICPT_PATH_MAX];
	/* A refusal ends it when asked to, or when this process drains. */
	int ka_close = !h->keep_alive || c->l->draining;

	icpt_req_release(&ic->cur);
	memset(&ic->cur, 0, sizeof(ic->cur));
	str_copy(ic->cur.method, sizeof(ic->cur.method), h->method);
	ic->cur.start_ms = mono_ms();
	log_escape(t, tlen, ic->cur.path, sizeof(ic->cur.path));
	/* Every identity the request carries must be the TLS connection's. */
	if (!h->has_host || h->host_is_ip || strcmp(h->host, c->name) != 0 ||
	    (h->host_port != 0 && h->host_port != c->dst_port) ||
	    (h->has_authority && strcmp(h->authority, c->name) != 0)) {
		icpt_refuse(ic, 421, "misdirected", "host-mismatch", NULL,
		    ka_close);
		return NULL;
	}
	if (h->is_connect) {
		icpt_refuse(ic, 400, "refused", "bad-request",
		    "sluice: CONNECT inside an intercepted connection", 1);
		return NULL;
	}
	if (http_path_normalize(t, tlen, path, sizeof(path), &plen, &query,
	    &qlen, &why) != 0) {
		icpt_refuse(ic, 400, "refused", "bad-target", why, 1);
		return NULL;
	}
	str_copy(ic->cur.path, sizeof(ic->cur.path), path);
	memset(&rq, 0, sizeof(rq));
	rq.method = h->method;
	rq.host = c->name;
	rq.path = path;
	rq.query = query;
	rq.query_len = qlen;
	rq.headers = h->headers;
	rq.nheaders = h->nheaders;
	c->observing = sandbox_observing(c->sb, time(NULL));
	if ((rule = policy_match_request(c->pol, &rq)) == NULL &&
	    c->observing) {
		/* Observe mode: as it is, never with a credential. */
		rule = &observe_rule;
		ic->cur.would_deny = "no-matching-rule";
	}
	if (rule == NULL) {
		icpt_refuse(ic, 403, "denied", "no-matching-rule", NULL,
		    ka_close);
		return NULL;
	}
	str_copy(ic->cur.rule, sizeof(ic->cur.rule), rule->label);
	if ((refusal = policy_request_refusal(rule, &rq)) != NULL) {
		icpt_refuse(ic, 403, "denied", refusal, "sluice: this rule "
		    "does not let a request override its method", ka_close);
		return NULL;
	}
	if (h->upgrade && rule->action == ICPT_PASS &&
	    !http_upgrade_websocket_only(h)) {
		/* An h2c tunnel would carry requests no rule ever judged. */
		icpt_refuse(ic, 403, "denied", "upgrade-not-allowed",
		    "sluice: only an upgrade to websocket is passed", ka_close);
		return NULL;
	}
	switch (rule->action) {
	case ICPT_PASS:
		break;
	case ICPT_DENY:
		icpt_refuse(ic, 403, "denied", "deny-rule", NULL, ka_close);
		return NULL;
	case ICPT_INJECT:
		if (h->upgrade) {
			/* XXX what comes back in a tunnel is not redacted. */
			icpt_refuse(ic, 403, "denied", "inject-upgrade",
			    "sluice: a request that gets a credential may not "
			    "switch protocols", ka_close);
			return NULL;
		}
		if ((*waits = inject_prepare(ic, rule, inj, wipe,
		    ka_close)) != 0) {
			*waits = *waits > 0;
			return NULL;
		}
		break;
	case ICPT_FORWARD:
		if (icpt_fwd_check(ic, h, rule, ka_close) != 0)
			return NULL;
		break;
	}
	if (plen + 1 + qlen + 1 > target_len) {
		icpt_refuse(ic, 400, "refused", "bad-target",
		    "target too long", 1);
		return NULL;
	}
	memcpy(target, path, plen);
	if (query != NULL) {
		target[plen] = '?';
		memcpy(target + plen + 1, query, qlen);
		plen += 1 + qlen;
	}
	target[plen] = '\0';
	ic->cur.action = rule->action == ICPT_INJECT ? "inject" :
	    rule->action == ICPT_FORWARD ? "forward" : "pass";
	ic->cur.reason = rule == &observe_rule ? "observe" : "intercept-rule";
	if (rule == &observe_rule)
		ic->cur.rule[0] = '\0';
	if (icpt_placeholders(ic, h, rule, target, target_len, inj, wipe,
	    ka_close) != 0)
		return NULL;
	if (rule->action == ICPT_INJECT && rule->sigv4_secret != NULL &&
	    (*sign_later = icpt_sigv4(ic, h, rule, target, inj, wipe,
	    ka_close)) < 0)
		return NULL;
	return rule;
}

/* ---- requests ------------------------------------------------------- */

/*
 * The record's "secrets": [{"fingerprint":..,"name":..,"version":..},...]
 * in canonical form; its length, or 0 when it does not fit in out.
 */
static size_t
secrets_json(const struct inject *inj, char *out, size_t cap)
{
	size_t i, o = 0;
	int n;

	out[o++] = '[';
	for (i = 0; i < inj->nused; i++) {
		if (cap - o < 64)
			return 0;
		o += (size_t)snprintf(out + o, cap - o, "%s{\"fingerprint\":",
		    i > 0 ? "," : "");
		if (arec_json_str(out, cap - 48, &o, inj->used[i]->fp,
		    strlen(inj->used[i]->fp)) < 0)
			return 0;
		memcpy(out + o, ",\"name\":", 8);
		o += 8;
		if (arec_json_str(out, cap - 40, &o, inj->used[i]->name,
		    strlen(inj->used[i]->name)) < 0)
			return 0;
		n = snprintf(out + o, cap - o, ",\"version\":%llu}",
		    (unsigned long long)inj->used[i]->version);
		if (n < 0 || (size_t)n >= cap - o - 1)
			return 0;
		o += (size_t)n;
	}
	out[o++] = ']';
	return o;
}

/*
 * The record of an injected request, with the secrets it gets, queued
 * before a byte of it can go upstream; with fsync always the request is
 * held until the record is on disk (icpt_audit_durable).  -1: the queue is
 * full and queue_full is refuse, or out of memory.
 */
static int
audit_injected(struct icpt *ic, const struct inject *inj)
{
	struct conn *c = ic->c;
	struct audit *a = c->l->audit;
	struct arec recbuf, *rec = &recbuf;
	char arr[INJECT_MAX_SECRETS * 512];
	uint64_t ticket;
	size_t i, alen;

	snprintf(ic->cur.rid, sizeof(ic->cur.rid), "%llx-%u-%llu",
	    (unsigned long long)c->l->started, c->l->idx,
	    (unsigned long long)++c->l->rid_next);
	if ((alen = secrets_json(inj, arr, sizeof(arr))) == 0)
		return -1;
	arec_init(rec);
	arec_str(rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(rec, "policy", c->policy_name);
	arec_int(rec, "revision", (int64_t)c->policy_rev);
	arec_str(rec, "method", ic->cur.method);
	arec_str(rec, "host", c->name);
	arec_str(rec, "path", ic->cur.path);
	arec_str(rec, "action", ic->cur.action);
	arec_str(rec, "reason", ic->cur.reason);
	arec_str(rec, "rule", ic->cur.rule);
	arec_str(rec, "rid", ic->cur.rid);
	if (ic->stream_id > 0)
		arec_int(rec, "stream", ic->stream_id);
	arec_raw(rec, "secrets", arr, alen);
	if (ic->cur.nmtoks > 0) {
		if ((alen = icpt_tokens_json(&ic->cur, arr, sizeof(arr))) == 0)
			return -1;
		arec_raw(rec, "tokens", arr, alen);
	}
	arec_bool(rec, "intercepted", 1);
	if (c->observing)
		arec_bool(rec, "observe", 1);
	if (c->counter != NULL)
		recent_add(&c->counter->recent, "request", rec);
	if (audit_submit_rec(a, "request", rec, &ticket) != 0) {
		ic->cur.rid[0] = '\0';	/* no request record: no response one */
		return -1;
	}
	for (i = 0; i < inj->nused; i++)
		mtable_add(&c->l->metrics.injections, inj->used[i]->name, "");
	if (audit_durable(a) < ticket)
		ic->audit_wait = ticket;
	return 0;
}

static int
is_client_cert(const struct secret *s)
{
	return s->pem != NULL && s->pem->leaf != NULL;
}

/*
 * The client certificate rule presents upstream, in *out (NULL: none),
 * noted in inj as a secret the request gets; -1 after refusing.
 */
static int
client_cert(struct icpt *ic, const struct intercept_rule *rule,
    struct inject *inj, const struct secret **out)
{
	const struct secret *s;

	*out = NULL;
	if (rule->client_cert == NULL)
		return 0;
	if ((s = icpt_secret_for(ic, rule->client_cert, is_client_cert,
	    "a client certificate", 0)) == NULL)
		return -1;
	if (inj == NULL || inject_add_used(inj, s) != 0) {
		icpt_refuse(ic, 500, "internal", "secret-too-large", "sluice: "
		    "too many secrets for one request", 0);
		return -1;
	}
	*out = s;
	return 0;
}

int
icpt_prepare_up(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, struct inject *inj)
{
	int fwd = rule->action == ICPT_FORWARD;
	const char *host = fwd ? rule->forward_host : ic->c->name, *why;
	unsigned port = fwd ? rule->forward_port : ic->c->upport ?
	    ic->c->upport : ic->c->dst_port;
	const struct secret *cert;
	char tls[ICPT_TLS_KEY];
	uint8_t tls_d[UPOOL_TLS_LEN];

	/*
	 * The answer is expected only once the head is committed
	 * (icpt_enqueue): a refusal after this point must not leave the
	 * response parser one answer ahead of the queue.
	 */
	if (ic->qn == ICPT_MAX_PENDING ||
	    icpt_resps_pending(ic) >= HTTP_RESPS_MAX_PENDING) {
		icpt_refuse(ic, 400, "refused", "too-many-pipelined", NULL, 1);
		return -1;
	}
	if (client_cert(ic, rule, inj, &cert) != 0)
		return -1;
	icpt_up_tls_key(rule, cert, tls, tls_d);
	if (ic->up != NULL && (memcmp(ic->up_tls, tls_d, UPOOL_TLS_LEN) != 0 ||
	    strcmp(ic->up_host, host) != 0 || ic->up_port != port)) {
		/*
		 * Another upstream (a forward rule's proxy, another CA or
		 * client certificate, or the certificate rotated): the one in
		 * use goes once nothing is owed on it.
		 * XXX a pipelined request to another upstream is refused.
		 */
		if (ic->qn > 0 || ic->rs != RS_READY ||
		    evbuffer_get_length(ic->held) > 0) {
			icpt_refuse(ic, 502, "bad-gateway", "upstream-conflict",
			    "sluice: pipelined requests for different upstreams "
			    "on one connection", 1);
			return -1;
		}
		icpt_up_drop(ic);
	}
	/*
	 * A new connection checks the rule's pins once its handshake is done
	 * (nothing is sent before); one already checked is checked again
	 * against this rule's pins.
	 */
	if (ic->up == NULL) {
		icpt_pins_set(ic, rule);
		if ((why = icpt_up_open(ic, rule, cert, tls, tls_d)) != NULL) {
			ic->cur.status = 502;	/* icpt_up_open answered it */
			ic->cur.action = "error";
			ic->cur.reason = why;
			icpt_audit_request(ic, &ic->cur);
			return -1;
		}
	} else if (rule->npins > 0 && ic->rs != RS_CONNECTING) {
		icpt_pins_set(ic, rule);
		if (!icpt_pins_ok(ic)) {
			icpt_refuse(ic, 502, "bad-gateway",
			    "upstream-pin-mismatch", "sluice: the upstream did "
			    "not present a pinned key", 0);
			return -1;
		}
	} else if (rule->npins > 0) {
		/*
		 * Still connecting, its key checked once connected: against
		 * this rule's pins too.  Pins of two rules that differ cannot
		 * both hold: one upstream at a time.
		 */
		if (ic->npins == 0)
			icpt_pins_set(ic, rule);
		else if (!icpt_pins_same(ic, rule)) {
			icpt_refuse(ic, 502, "bad-gateway", "upstream-conflict",
			    "sluice: requests with different pins while the "
			    "upstream connects", 1);
			return -1;
		}
	}
	return 0;
}

struct icpt_req *
icpt_enqueue(struct icpt *ic, const struct http_head *h)
{
	struct icpt_req *q;

	ic->cur.upgrade = h->upgrade;
	/* Draining: its answer says "Connection: close", and it ends there. */
	ic->cur.close = !h->keep_alive || ic->c->l->draining;
	if (icpt_q_take(ic) != 0) {
		icpt_end(ic, "out-of-memory");
		return NULL;
	}
	if (http_resps_expect(ic->resps, h->method) != 0 ||
	    (ic->cur.close && http_resps_last(ic->resps) != 0)) {
		/* The parser checked the method and refused CONNECT. */
		icpt_end(ic, "internal");
		return NULL;
	}
	ic->c->wake_at = 0;	/* it keeps its upstream: no parking */
	q = icpt_q_next(ic);
	*q = ic->cur;
	ic->qn++;
	ic->cur.nsecrets = 0;	/* the queue holds them now */
	ic->cur.nmtoks = 0;
	ic->cur.tok = NULL;
	icpt_rq_set(ic, RQ_BODY);	/* its body follows it */
	icpt_scan_start(ic, h);
	return q;
}

/*
 * A gRPC answer to a credential must be readable too: its messages
 * uncompressed, as Accept-Encoding: identity asks of HTTP's (unless the
 * rule sets grpc-accept-encoding itself).
 */
static void
grpc_identity(const struct http_head *h, struct inject *inj)
{
	const struct http_header *ct = http_head_get(h, "content-type");
	size_t i;

	if (ct == NULL || !http_grpc_type(ct->value, ct->value_len) ||
	    inj->nadd == INJECT_MAX_ADD)
		return;
	for (i = 0; i < inj->nadd; i++)
		if (strcmp(inj->add[i].name, "grpc-accept-encoding") == 0)
			return;
	inj->add[inj->nadd].name = "grpc-accept-encoding";
	inj->add[inj->nadd++].value = "identity";
}

/*
 * An allowed head: re-serialised (inj: with its injection), queued for the
 * upstream; sign_later: held (icpt_hold.c) until SigV4 signs its body.
 */
static int
forward_head(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target,
    struct inject *inj, int sign_later)
{
	struct conn *c = ic->c;
	struct evbuffer_iovec v;
	struct evbuffer *out, *tmp = NULL;
	struct icpt_hold *hd;
	struct icpt_req *q;
	size_t i;
	long n;

	if (icpt_prepare_up(ic, h, rule, inj) != 0 ||
	    (inj != NULL && icpt_budget_take(ic, inj) != 0))
		return -1;
	if (inj != NULL)
		grpc_identity(h, inj);
	/*
	 * Written in place at the end of the upstream's queue: no copy.  An
	 * injected head waits in held until its record is queued (and, with
	 * fsync always, durable).
	 */
	if (inj != NULL)
		icpt_held_mark(ic);
	out = sign_later ? (tmp = evbuffer_new()) : inj != NULL ? ic->held :
	    icpt_up_out(ic);
	if (out == NULL || evbuffer_reserve_space(out, ICPT_HEAD_MAX, &v,
	    1) != 1) {
		if (tmp != NULL)
			evbuffer_free(tmp);
		icpt_end(ic, "out-of-memory");
		return -1;
	}
	n = http_head_serialize_upstream(h, target, c->name, c->dst_port,
	    h->upgrade, inj ? inj->drop : NULL, inj ? inj->ndrop : 0,
	    inj ? inj->add : NULL, inj ? inj->nadd : 0, v.iov_base, v.iov_len);
	if (n < 0 || (sign_later && n < 2)) {
		evbuffer_commit_space(out, &v, 0);
		if (tmp != NULL)
			evbuffer_free(tmp);
		if (inj != NULL && n == SL_ERR_INVALID)
			icpt_refuse(ic, 503, "unavailable", "secret-unusable",
			    "sluice: a secret cannot go in a header", 0);
		else
			icpt_refuse(ic, 400, "refused", "header-too-large",
			    NULL, 1);
		return -1;
	}
	if (inj != NULL && audit_injected(ic, inj) != 0) {
		sodium_memzero(v.iov_base, (size_t)n);
		evbuffer_commit_space(out, &v, 0);
		if (tmp != NULL)
			evbuffer_free(tmp);
		icpt_refuse(ic, 503, "unavailable", "audit-unavailable",
		    "sluice: the request could not be audited", 1);
		return -1;
	}
	if (sign_later) {
		/* Less the empty line: the signature's headers come first. */
		hd = icpt_hold_new(HOLD_SIGV4, v.iov_base, (size_t)n - 2, h,
		    target);
		sodium_memzero(v.iov_base, (size_t)n);
		evbuffer_commit_space(out, &v, 0);
		evbuffer_free(tmp);
		if (hd == NULL) {
			icpt_end(ic, "out-of-memory");
			return -1;
		}
		icpt_sigv4_hold(hd, rule, inj);
		if ((q = icpt_enqueue(ic, h)) == NULL) {
			icpt_hold_free(hd);
			return -1;
		}
		ic->hold = hd;
		icpt_hold_continue(ic, h);
	} else {
		v.iov_len = (size_t)n;
		evbuffer_commit_space(out, &v, 1);
		if ((q = icpt_enqueue(ic, h)) == NULL)
			return -1;
	}
	/* Its head went straight to the upstream, not to held: on its way. */
	if (out != ic->held && !sign_later)
		ic->q_sent = ic->qn;
	/* The queued request holds the secrets until its response is out. */
	for (i = 0; inj != NULL && i < inj->nused; i++)
		q->secrets[i] = inj->used[i];
	q->nsecrets = inj != NULL ? inj->nused : 0;
	/* A cookie set in answer to a credential is the credential's. */
	q->drop_cookies = rule->action == ICPT_INJECT && !rule->keep_cookies;
	if (inj != NULL) {
		inj->nused = 0;	/* transferred */
		icpt_up_release(ic);	/* unless it waits for its record */
	}
	return 0;
}

/*
 * Judges a request head and queues it: the request side goes to BODY
 * (its body follows it upstream) or as the refusal says.  An injection's
 * secrets go with the queued request, and the scratch its values were
 * rendered in is wiped.
 */
static void
take_head(struct icpt *ic, const struct http_head *h)
{
	const struct intercept_rule *rule;
	struct inject inj;
	size_t wipe = 0;
	int sign_later = 0, waits = 0;
	char target[2 * ICPT_PATH_MAX];	/* path, '?', query */

	memset(&inj, 0, sizeof(inj));
	target[0] = '\0';
	rule = judge(ic, h, target, sizeof(target), &inj, &wipe, &sign_later,
	    &waits);
	if (waits) {
		/* Judged again, from the start, once its token is minted. */
		ic->tok_head = h;
		icpt_rq_set(ic, RQ_TOKEN);
	}
	/* A client certificate is a credential the request gets, like a header. */
	if (rule != NULL && rule->action == ICPT_FORWARD)
		icpt_fwd_head(ic, h, rule, target);
	else if (rule != NULL)
		forward_head(ic, h, rule, target,
		    rule->action == ICPT_INJECT || rule->client_cert != NULL ?
		    &inj : NULL, sign_later);
	if (wipe > 0) {
		sodium_memzero(loop_scratch(ic->c->l), wipe);
		/* A query may have got a value in place of a placeholder. */
		sodium_memzero(target, strlen(target));
	}
	inject_release(&inj);	/* what forward_head did not take */
}

/* A request ended (h): what the sandbox's side does next. */
static void
request_end(struct icpt *ic, const struct http_head *h)
{
	if (ic->hold != NULL && icpt_hold_finish(ic) != 0)
		return;
	if (h->upgrade && ic->rq == RQ_BODY && ic->qn > 0) {
		icpt_rq_set(ic, RQ_UPGRADE);	/* the upstream's answer decides */
		return;
	}
	/* Answered already (not 101), or refused by us. */
	if (h->upgrade) {
		/*
		 * We refused the upgrade: the connection stays HTTP (bytes the
		 * client sent optimistically will not parse as such).
		 */
		if (http_reqs_upgrade_refused(ic->reqs) != 0 || !h->keep_alive)
			icpt_finish(ic);
		else
			icpt_rq_set(ic, RQ_HEAD);
		return;
	}
	if (ic->rq == RQ_BODY || ic->rq == RQ_DISCARD)
		icpt_rq_set(ic, h->keep_alive && !ic->cur.close ? RQ_HEAD :
		    RQ_DONE);
}

/*
 * The sandbox sent a malformed request: refused, and the connection
 * ends after it.  If the upstream holds part of it, it is never to be
 * answered to the client, nor the upstream kept.
 */
static void
request_invalid(struct icpt *ic, const char *why)
{
	if (ic->rq == RQ_BODY && ic->qn > 0) {
		struct icpt_req *bad = icpt_q_tail(ic);

		bad->action = "incomplete";
		bad->reason = "client-malformed";
		icpt_audit_request(ic, bad);
		ic->qn--;	/* the newest goes; its answer is never relayed */
	}
	icpt_req_release(&ic->cur);
	memset(&ic->cur, 0, sizeof(ic->cur));
	ic->cur.start_ms = mono_ms();
	snprintf(ic->cur.method, sizeof(ic->cur.method), "-");
	icpt_refuse(ic, 400, "refused", strcmp(why ? why : "",
	    "header too large") == 0 ? "header-too-large" : "bad-request", why,
	    1);
}

/* Body bytes data[0..used) of in: to the upstream, hashed, or dropped. */
static int
request_body(struct icpt *ic, struct evbuffer *in, const uint8_t *data,
    size_t used)
{
	if (ic->rq != RQ_BODY || ic->up == NULL) {
		evbuffer_drain(in, used);
		return 0;
	}
	if (icpt_scan_body(ic, data, used) != 0)
		return -1;
	if (ic->qn > 0)
		icpt_q_tail(ic)->bytes_up += used;
	if (ic->hold != NULL) {
		/* The head waits for the body's hash. */
		if (icpt_hold_body(ic, data, used) != 0)
			return -1;
		evbuffer_drain(in, used);
		return 0;
	}
	evbuffer_remove_buffer(in, icpt_up_out(ic), used);
	return 0;
}

/* Whether the pump goes on in state s (END may come without a byte in a body). */
static int
pumps(const struct icpt *ic, size_t len)
{
	if (ic->rs >= RS_FLUSH)
		return 0;
	return (ic->rq == RQ_HEAD && len > 0) || ic->rq == RQ_BODY ||
	    ic->rq == RQ_DISCARD;
}

void
icpt_pump_requests(struct icpt *ic)
{
	struct evbuffer *in = tstream_input(ic->down);
	const struct http_head *h;
	const char *why;
	enum http_ev ev;
	size_t len, used;
	uint8_t *data;

	if (ic->rq == RQ_TOKEN && ic->rs < RS_FLUSH) {
		if (!icpt_token_ready(ic))
			return;
		icpt_touch(ic);
		icpt_rq_set(ic, RQ_HEAD);
		take_head(ic, ic->tok_head);
	}
	while (pumps(ic, evbuffer_get_length(in))) {
		if (icpt_up_queued(ic) > ic->high)
			return;		/* flow() pauses the sandbox */
		if (icpt_parsers_take(ic) != 0) {
			icpt_end(ic, "out-of-memory");
			return;
		}
		len = evbuffer_get_contiguous_space(in);
		data = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
		h = NULL;
		ev = http_reqs_feed(ic->reqs, data, len, &used, &h, &why);
		ic->from_sandbox += used;
		switch (ev) {
		case HTTP_EV_NEED_MORE:
			if (request_body(ic, in, data, used) != 0)
				return;
			if (ic->rq == RQ_HEAD)
				conn_head_started(ic->c);	/* a head, not whole */
			if (used == 0)
				return;
			break;
		case HTTP_EV_END:
			if (request_body(ic, in, data, used) != 0)
				return;
			request_end(ic, h);
			break;
		case HTTP_EV_HEAD:
			ic->c->head_deadline = 0;
			evbuffer_drain(in, used);
			take_head(ic, h);
			break;
		case HTTP_EV_TUNNEL:	/* request_end never feeds past an upgrade */
			icpt_end(ic, "internal");
			return;
		case HTTP_EV_INVALID:
			request_invalid(ic, why);
			return;
		}
	}
}
