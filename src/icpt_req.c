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

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn.h"
#include "httpfwd.h"
#include "httphead.h"
#include "httppath.h"
#include "httpresp.h"
#include "icpt_int.h"
#include "log.h"
#include "policy.h"

#define ICPT_HEAD_MAX		(64u * 1024)	/* a re-serialised request head */
#define ICPT_PATH_MAX		(HTTP_MAX_TARGET + 1)	/* a normalised path always fits */

/* ---- judging -------------------------------------------------------- */

/*
 * The one decision point of an intercepted request.  Fills ic->cur and
 * returns the rule that lets it go, or NULL after refusing it.
 */
static const struct intercept_rule *
judge(struct icpt *ic, const struct http_head *h, char *target,
    size_t target_len)
{
	struct conn *c = ic->c;
	const struct intercept_rule *rule;
	struct http_request_view rq;
	const char *t = h->absolute_form ? h->origin_target : h->target;
	const char *query = NULL, *why = NULL;
	size_t tlen = h->absolute_form ? strlen(h->origin_target) :
	    h->target_len, plen = 0, qlen = 0;
	char path[ICPT_PATH_MAX];
	int ka_close = !h->keep_alive;	/* a refusal ends it when asked to */

	memset(&ic->cur, 0, sizeof(ic->cur));
	snprintf(ic->cur.method, sizeof(ic->cur.method), "%s", h->method);
	ic->cur.start_ms = icpt_now_ms();
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
	snprintf(ic->cur.path, sizeof(ic->cur.path), "%s", path);
	memset(&rq, 0, sizeof(rq));
	rq.method = h->method;
	rq.host = c->name;
	rq.path = path;
	rq.query = query;
	rq.query_len = qlen;
	rq.headers = h->headers;
	rq.nheaders = h->nheaders;
	if ((rule = policy_match_request(c->pol, &rq)) == NULL) {
		icpt_refuse(ic, 403, "denied", "no-matching-rule", NULL,
		    ka_close);
		return NULL;
	}
	snprintf(ic->cur.rule, sizeof(ic->cur.rule), "%s", rule->label);
	switch (rule->action) {
	case ICPT_PASS:
		break;
	case ICPT_DENY:
		icpt_refuse(ic, 403, "denied", "deny-rule", NULL, ka_close);
		return NULL;
	case ICPT_INJECT:
		/* XXX issue 6: the secret store; until then, fail closed. */
		icpt_refuse(ic, 403, "denied", "injection-unavailable",
		    "sluice: credential injection is not available yet",
		    ka_close);
		return NULL;
	case ICPT_FORWARD:
		/* XXX issue 7: forwarding with identity tokens. */
		icpt_refuse(ic, 403, "denied", "forwarding-unavailable",
		    "sluice: forwarding is not available yet", ka_close);
		return NULL;
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
	ic->cur.action = "pass";
	ic->cur.reason = "intercept-rule";
	return rule;
}

/* ---- requests ------------------------------------------------------- */

/* An allowed head: re-serialised, queued for the upstream. */
static int
forward_head(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target)
{
	struct conn *c = ic->c;
	struct evbuffer_iovec v;
	struct evbuffer *out;
	long n;

	if (ic->qn == ICPT_MAX_PENDING ||
	    http_resps_expect(ic->resps, h->method) != 0) {
		icpt_refuse(ic, 400, "refused", "too-many-pipelined", NULL, 1);
		return -1;
	}
	if (ic->up != NULL && strcmp(ic->up_ca, rule->upstream_ca ?
	    rule->upstream_ca : "") != 0) {
		/* XXX one upstream connection a sandbox connection, for now. */
		icpt_refuse(ic, 502, "bad-gateway", "upstream-ca-conflict",
		    "sluice: rules with different upstream CAs on one "
		    "connection", 1);
		return -1;
	}
	/*
	 * A new connection checks the rule's pins once its handshake is done
	 * (nothing is sent before); one already checked is checked again
	 * against this rule's pins.
	 */
	if (ic->up == NULL) {
		icpt_pins_set(ic, rule);
		if (icpt_up_open(ic, rule) != 0) {
			ic->cur.status = 502;	/* icpt_up_open answered it */
			ic->cur.action = "error";
			ic->cur.reason = ic->fail_reason ? ic->fail_reason :
			    "upstream-failed";
			icpt_audit_request(ic, &ic->cur);
			return -1;
		}
	} else if (rule->npins > 0 && ic->up_state == UP_READY) {
		icpt_pins_set(ic, rule);
		if (!icpt_pins_ok(ic)) {
			icpt_refuse(ic, 502, "bad-gateway",
			    "upstream-pin-mismatch", "sluice: the upstream did "
			    "not present a pinned key", 0);
			return -1;
		}
	}
	/* Written in place at the end of the upstream's queue: no copy. */
	out = icpt_up_out(ic);
	if (evbuffer_reserve_space(out, ICPT_HEAD_MAX, &v, 1) != 1) {
		conn_close(c, "out-of-memory");
		return -1;
	}
	n = http_head_serialize_upstream(h, target, c->name, c->dst_port,
	    h->upgrade, NULL, 0, NULL, 0, v.iov_base, v.iov_len);
	if (n < 0) {
		evbuffer_commit_space(out, &v, 0);
		icpt_refuse(ic, 400, "refused", "header-too-large", NULL, 1);
		return -1;
	}
	v.iov_len = (size_t)n;
	evbuffer_commit_space(out, &v, 1);
	ic->cur.upgrade = h->upgrade;
	ic->cur.close = !h->keep_alive;
	ic->last_request = ic->cur.close;
	ic->q[(ic->qhead + ic->qn) % ICPT_MAX_PENDING] = ic->cur;
	ic->qn++;
	ic->upgrade_sent = h->upgrade;
	return 0;
}

void
icpt_pump_requests(struct icpt *ic)
{
	struct evbuffer *in;
	const struct intercept_rule *rule;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;
	size_t len, used;
	uint8_t *data;
	char target[2 * ICPT_PATH_MAX];	/* path, '?', query */

	if (ic->phase != IC_REQUESTS)
		return;
	in = bufferevent_get_input(ic->down);
	/*
	 * With no bytes left, one more feed while a request is open: a
	 * bodiless request's END comes without a byte.
	 */
	while (!ic->hold && ((len = evbuffer_get_length(in)) > 0 ||
	    ic->body != BODY_NONE || ic->expect_tunnel)) {
		if (ic->up != NULL && icpt_up_queued(ic) > ICPT_HIGH)
			return;		/* up_write_cb resumes */
		len = evbuffer_get_contiguous_space(in);
		data = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
		h = NULL;
		ev = http_reqs_feed(ic->reqs, data, len, &used, &h, &why);
		switch (ev) {
		case HTTP_EV_NEED_MORE:
		case HTTP_EV_END:
			ic->from_sandbox += used;
			if (ic->body == BODY_FORWARD && ic->up != NULL) {
				if (ic->qn > 0)
					ic->q[(ic->qhead + ic->qn - 1) %
					    ICPT_MAX_PENDING].bytes_up += used;
				evbuffer_remove_buffer(in, icpt_up_out(ic),
				    used);
			} else
				evbuffer_drain(in, used);
			if (ev == HTTP_EV_END) {
				ic->body = BODY_NONE;
				if (ic->last_request && !ic->expect_tunnel)
					ic->hold = 1;	/* it said close */
			}
			if (ev == HTTP_EV_NEED_MORE && used == 0)
				return;
			break;
		case HTTP_EV_HEAD:
			ic->from_sandbox += used;
			evbuffer_drain(in, used);
			ic->expect_tunnel = h->upgrade || h->is_connect;
			ic->upgrade_sent = 0;
			rule = judge(ic, h, target, sizeof(target));
			if (rule != NULL && forward_head(ic, h, rule, target) == 0)
				ic->body = BODY_FORWARD;
			else
				ic->body = BODY_DISCARD;
			break;
		case HTTP_EV_TUNNEL:
			ic->expect_tunnel = 0;
			/* After a passed upgrade: wait for upstream's answer. */
			if (ic->upgrade_sent) {
				ic->hold = 1;
				bufferevent_disable(ic->down, EV_READ);
				return;
			}
			/*
			 * We refused the upgrade: the connection stays HTTP (bytes
			 * the client sent optimistically will not parse as such).
			 */
			if (http_reqs_upgrade_refused(ic->reqs) != 0 ||
			    ic->last_request) {
				ic->hold = 1;
				ic->closing = 1;
				icpt_maybe_finish(ic);
				return;
			}
			break;
		case HTTP_EV_INVALID:
			if (ic->body == BODY_FORWARD && ic->qn > 0) {
				/*
				 * Upstream holds a cut request: it is never to be
				 * answered to the client, nor the connection kept.
				 */
				struct icpt_req *bad = &ic->q[(ic->qhead +
				    ic->qn - 1) % ICPT_MAX_PENDING];

				bad->action = "incomplete";
				bad->reason = "client-malformed";
				icpt_audit_request(ic, bad);
				ic->qn--;
				ic->resp_close = 1;
			}
			ic->body = BODY_NONE;
			memset(&ic->cur, 0, sizeof(ic->cur));
			ic->cur.start_ms = icpt_now_ms();
			snprintf(ic->cur.method, sizeof(ic->cur.method), "-");
			icpt_refuse(ic, 400, "refused", strcmp(why ? why : "",
			    "header too large") == 0 ? "header-too-large" :
			    "bad-request", why, 1);
			return;
		}
		if (ic->c->state == CS_CLOSED)
			return;
	}
	if (ic->up != NULL && icpt_up_queued(ic) > ICPT_HIGH)
		bufferevent_disable(ic->down, EV_READ);
}
