/*
 * icpt_up.c: the upstream of an intercepted connection.  One verified TLS
 * connection a sandbox connection, taken from the pool or opened when the
 * first allowed request needs it; nothing is sent on a new one before its
 * certificate and the rule's pins are checked.  Its answers go back to
 * the sandbox in order, their heads re-serialised and their bodies as
 * they are, until an upgrade makes both sides one byte stream.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/sbuf.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/secrets.h"
#include "keys/tlsup.h"
#include "loop/loop.h"
#include "loop/h2up.h"
#include "loop/resolve.h"
#include "loop/state.h"
#include "loop/tstream.h"
#include "loop/upool.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/h2.h"
#include "conn/icpt_int.h"

/* ---- the upstream side ---------------------------------------------- */

int
icpt_rs_reads(enum icpt_rs s)
{
	return s >= RS_CONNECTING && s <= RS_TUNNEL;
}

/* Whether the upstream is connected and checked (an answer may be under way). */
static int
up_ready(const struct icpt *ic)
{
	return ic->rs >= RS_READY && ic->rs <= RS_TUNNEL;
}

struct evbuffer *
icpt_up_out(struct icpt *ic)
{
	return up_ready(ic) && ic->audit_wait == 0 &&
	    evbuffer_get_length(ic->held) == 0 ?
	    tstream_output(ic->up) : ic->held;
}

void
icpt_up_release(struct icpt *ic)
{
	if (!up_ready(ic) || evbuffer_get_length(ic->held) == 0)
		return;
	if (ic->audit_wait == 0) {
		evbuffer_add_buffer(tstream_output(ic->up), ic->held);
		ic->q_sent = ic->qn;
		ic->held_free = 0;
		return;
	}
	/* Older requests do not wait for a newer one's record. */
	if (ic->held_free > 0) {
		if (loop_evbuffer_move_wiped(ic->held, tstream_output(ic->up),
		    ic->held_free) != 0) {
			icpt_end(ic, "out-of-memory");
			return;
		}
		ic->q_sent = ic->held_free_q;
		ic->held_free = 0;
	}
}

void
icpt_held_mark(struct icpt *ic)
{
	if (ic->audit_wait != 0)
		return;		/* an older one waits: the mark is its */
	ic->held_free = evbuffer_get_length(ic->held);
	ic->held_free_q = ic->qn;
}

size_t
icpt_up_queued(struct icpt *ic)
{
	return evbuffer_get_length(ic->held) + (ic->up != NULL ?
	    evbuffer_get_length(tstream_output(ic->up)) : 0);
}

int
icpt_pins_same(const struct icpt *ic, const struct intercept_rule *rule)
{
	size_t i, j;

	if (rule->npins != ic->npins)
		return 0;
	for (i = 0; i < rule->npins; i++) {
		for (j = 0; j < ic->npins; j++)
			if (strcmp(rule->pins[i], ic->pins[j]) == 0)
				break;
		if (j == ic->npins)
			return 0;
	}
	return 1;
}

/* The rule's pins, if any, against the upstream's key. */
int
icpt_pins_ok(struct icpt *ic)
{
	char reason[TLSUP_REASON_BUFSZ];

	if (ic->npins == 0)
		return 1;
	return tlsup_check_peer(tstream_ssl(ic->up), ic->pins,
	    ic->npins, reason, sizeof(reason)) == 0;
}

void
icpt_pins_set(struct icpt *ic, const struct intercept_rule *rule)
{
	size_t i;

	for (i = 0; i < ic->npins; i++)
		free(ic->pins[i]);
	ic->npins = 0;
	for (i = 0; i < rule->npins && i < ICPT_MAX_PINS; i++)
		if ((ic->pins[ic->npins] = strdup(rule->pins[i])) != NULL)
			ic->npins++;
}

static void up_read_cb(struct tstream *, void *);
static void up_write_cb(struct tstream *, void *);
static void up_event_cb(struct tstream *, short, void *);

static void
up_free_cb(evutil_socket_t fd, short what, void *arg)
{
	tstream_free(arg);
}

void
icpt_up_discard(struct icpt *ic)
{
	resolve_cancel(ic->resolving);
	ic->resolving = NULL;
	ic->up_ev = 0;
	if (ic->up != NULL) {
		tstream_quiet(ic->up);
		/* Next turn: a caller on the stack may still hold its buffers. */
		if (event_base_once(ic->c->l->base, -1, EV_TIMEOUT, up_free_cb,
		    ic->up, NULL) != 0)
			tstream_free(ic->up);
	}
	ic->up = NULL;
	if (ic->rs < RS_FLUSH)
		icpt_rs_set(ic, RS_NONE);
}

void
icpt_up_failed(struct icpt *ic, int status, const char *reason,
    const char *detail)
{
	const char *rule = ic->cur.rule[0] ? ic->cur.rule : NULL;
	char msg[256], *resp;
	size_t len;

	if (ic->rs >= RS_FLUSH)
		return;		/* one failure ends it; a second event is moot */
	log_debug("icpt", "%p upstream failed: %s", (void *)ic->c, reason);
	/* Nothing more is read from it, nor pumped to the sandbox. */
	icpt_up_discard(ic);
	if (icpt_answer_started(ic)) {
		/* An answer is under way: no answer of ours may follow it. */
		icpt_abort(ic, reason);
		return;
	}
	if (ic->qn > 0) {
		struct icpt_req *r = icpt_q_head(ic);

		r->status = status;
		r->action = "error";
		r->reason = reason;
		icpt_audit_request(ic, r);
		rule = NULL;
		icpt_q_pop(ic);
	}
	snprintf(msg, sizeof(msg), "sluice: the upstream could not be reached "
	    "safely%s%s", detail ? ": " : "", detail ? detail : "");
	{
		struct deny_what dw = { status, status == 504 ?
		    "upstream-timeout" : "bad-gateway", ic->c->name,
		    ic->c->policy_name, rule, reason, msg, NULL, NULL, NULL,
		    0 };

		resp = deny_http(&dw, 0, &len);
	}
	/* Ours: a gRPC client gets it as a status (h2_answer.c). */
	ic->own_answer = status;
	ic->own_reason = reason;
	if (resp != NULL) {
		icpt_send_down(ic, resp, len);
		free(resp);
	}
	icpt_refusal_drop(ic);
	icpt_finish(ic);
}

/* icpt_up_open's failures: the sandbox is answered, the reason returned. */
static const char *
open_failed(struct icpt *ic, int status, const char *reason,
    const char *detail)
{
	icpt_up_failed(ic, status, reason, detail);
	return reason;
}

/* Connects ic->up (made, not yet connected) to a:port. */
static const char *
up_connect(struct icpt *ic, const struct sl_addr *a, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t len;

	len = addr_to_sockaddr(a, (uint16_t)port, &ss);
	if (tstream_connect(ic->up, (struct sockaddr *)&ss, len) != 0)
		return open_failed(ic, 502, "upstream-unreachable", NULL);
	return NULL;
}

/* The proxy's name resolved: connect, or tell the sandbox. */
static void
proxy_resolved_cb(int err, const struct resolve_answer *ans, void *arg)
{
	struct icpt *ic = arg;

	ic->resolving = NULL;
	if (err != 0 || ans->n == 0) {
		log_info("icpt", "%s: cannot resolve the proxy %s", ic->c->name,
		    ic->up_host);
		icpt_up_failed(ic, 502, "upstream-unreachable",
		    "the proxy's name does not resolve");
	} else
		up_connect(ic, &ans->addrs[0], ic->up_port);
	icpt_step(ic);
}

void
icpt_up_tls_key(const struct intercept_rule *rule, const struct secret *cert,
    char out[ICPT_TLS_KEY], uint8_t digest[UPOOL_TLS_LEN])
{
	int n;

	n = snprintf(out, ICPT_TLS_KEY, "%s\n%s%s%s", rule->upstream_ca ?
	    rule->upstream_ca : "", cert != NULL ? cert->name : "",
	    cert != NULL ? "@" : "", cert != NULL ? cert->fp : "");
	crypto_generichash(digest, UPOOL_TLS_LEN, (const uint8_t *)out,
	    n < 0 ? 0 : (size_t)n < ICPT_TLS_KEY ? (size_t)n :
	    ICPT_TLS_KEY - 1, NULL, 0);
}

const char *
icpt_up_open(struct icpt *ic, const struct intercept_rule *rule,
    const struct secret *cert, const char *tls, const uint8_t *tls_d)
{
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;
	struct resolve_answer ans;
	int fwd = rule->action == ICPT_FORWARD, r;
	struct tlsup_client client = { NULL, NULL };
	char err[256];
	SSL_CTX *ctx;
	SSL *ssl = NULL;

	if (c->updst.family == 0) {
		c->updst = c->dst;
		c->upport = c->dst_port;
	}
	/* A forward rule's requests go to its proxy, not to c's host. */
	str_copy(ic->up_host, sizeof(ic->up_host), fwd ? rule->forward_host :
	    c->name);
	ic->up_port = fwd ? rule->forward_port : c->upport;
	memcpy(ic->up_tls, tls_d, UPOOL_TLS_LEN);
	/*
	 * A stream of the sandbox's HTTP/2 session for this host will do;
	 * else an idle connection this sandbox verified for it.
	 */
	if ((ic->h2s != NULL && c->l->h2up != NULL &&
	    (ic->up = h2up_attach(c->l->h2up, c->counter, ic->up_host,
	    (uint16_t)ic->up_port, ic->up_tls)) != NULL) ||
	    (ic->up = upool_get(c->l->upool, c->counter, ic->up_host,
	    (uint16_t)ic->up_port, ic->up_tls)) != NULL) {
		tstream_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb, ic);
		tstream_set_timeout(ic->up, cfg->timeouts.idle);
		tstream_set_wlow(ic->up, ic->high / 2);
		tstream_read(ic->up, 1);
		icpt_rs_set(ic, RS_READY);
		c->upstream_used = 1;
		if (ic->h2s != NULL)
			h2_stream_upstream(ic->h2s);
		if (!icpt_pins_ok(ic))
			return open_failed(ic, 502, "upstream-pin-mismatch",
			    NULL);
		return NULL;
	}
	if (tlsup_ctx(c->l->tls_up, rule->upstream_ca, &ctx, err, sizeof(err)) != 0) {
		log_warnx("icpt", "%s", err);
		return open_failed(ic, 502, "upstream-ca-unavailable", NULL);
	}
	if (cert != NULL) {
		client.id = strchr(tls, '\n') + 1;	/* "name@fingerprint" */
		client.pem = cert->pem;
	}
	if (tlsup_ssl_new_as(ctx, c->sb != NULL ? c->sb->id : NULL,
	    ic->up_host, 0, ic->up_port, cert != NULL ? &client : NULL,
	    &ssl) != 0)
		return open_failed(ic, 502, "upstream-tls-error", NULL);
	/* An HTTP/2 stream's upstream may carry the session's other streams. */
	if (ic->h2s != NULL && c->l->h2up != NULL && tlsup_offer_h2(ssl) != 0) {
		SSL_free(ssl);
		return open_failed(ic, 502, "upstream-tls-error", NULL);
	}
	if ((ic->up = tstream_new(c->l->base, -1, ssl,
	    TSTREAM_CONNECT)) == NULL)
		return open_failed(ic, 502, "upstream-tls-error", NULL);
	/* Injected heads and identity tokens go this way: wiped as they go. */
	tstream_wipe(ic->up);
	tstream_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb, ic);
	tstream_set_timeout(ic->up, cfg->timeouts.connect);
	tstream_set_wlow(ic->up, ic->high / 2);
	icpt_rs_set(ic, RS_CONNECTING);
	if (!fwd)
		return up_connect(ic, &c->updst, c->upport);
	/* The proxy: by name, through the worker's resolver. */
	r = resolve_name(c->l->res, ic->up_host, 0, &ans, proxy_resolved_cb,
	    ic, &ic->resolving);
	if (r == 0 && ans.n == 0)
		return open_failed(ic, 502, "upstream-unreachable",
		    "the proxy's name does not resolve");
	if (r == 0)
		return up_connect(ic, &ans.addrs[0], ic->up_port);
	if (r != 1)
		return open_failed(ic, 502, "upstream-unreachable", NULL);
	return NULL;
}

/* Whether the upstream is between answers with nothing owed on it. */
static int
up_idle(struct icpt *ic)
{
	return ic->up != NULL && ic->rs == RS_READY && ic->qn == 0 &&
	    icpt_resps_pending(ic) == 0 && ic->hold == NULL &&
	    ic->audit_wait == 0 && evbuffer_get_length(ic->held) == 0 &&
	    evbuffer_get_length(tstream_input(ic->up)) == 0 &&
	    evbuffer_get_length(tstream_output(ic->up)) == 0;
}

void
icpt_up_drop(struct icpt *ic)
{
	/* A stream of an HTTP/2 session (a pipe) is done with its one request. */
	if (up_idle(ic) && tstream_fd(ic->up) >= 0) {
		upool_put(ic->c->l->upool, ic->up, ic->c->counter, ic->up_host,
		    (uint16_t)ic->up_port, ic->up_tls);
		ic->up = NULL;
	}
	icpt_up_discard(ic);
}

void
icpt_up_park_soon(struct icpt *ic)
{
	uint64_t now;

	if (ic->up == NULL || ic->qn > 0)
		return;
	now = mono_ms();
	ic->c->wake_at = now + ICPT_PARK_MS;
	conn_arm_timer(ic->c, conn_next_wake(ic->c, now));
}

void
icpt_up_park(struct icpt *ic)
{
	ic->c->wake_at = 0;
	/* A request under way in either direction keeps it. */
	if (ic->rq == RQ_BODY || ic->rq == RQ_UPGRADE || !up_idle(ic))
		return;
	icpt_up_drop(ic);
}

/*
 * The upstream chose h2: its connection becomes the sandbox's session
 * for this host (h2up.h), and ic speaks to it through a pipe, its first
 * stream.  0, or -1 after failing.
 */
static int
up_adopt(struct icpt *ic)
{
	struct conn *c = ic->c;
	struct tstream *pipe;

	tstream_setcb(ic->up, NULL, NULL, NULL, NULL);
	pipe = h2up_adopt(c->l->h2up, ic->up, c->counter, ic->up_host,
	    (uint16_t)ic->up_port, ic->up_tls, c->l->cfg->timeouts.idle,
	    c->l->cfg->limits.header_bytes);
	ic->up = pipe;		/* the session owns the connection */
	if (pipe == NULL) {
		icpt_up_failed(ic, 502, "upstream-unreachable",
		    "the HTTP/2 session could not start");
		return -1;
	}
	tstream_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb, ic);
	tstream_set_wlow(ic->up, ic->high / 2);
	return 0;
}

/* The upstream connected: checked before a byte goes to it. */
static void
up_connected(struct icpt *ic)
{
	char reason[TLSUP_REASON_BUFSZ];

	/* Chain and name were verified in the handshake; the rest here. */
	if (tlsup_check_peer(tstream_ssl(ic->up), NULL, 0,
	    reason, sizeof(reason)) != 0) {
		icpt_up_failed(ic, 502, "upstream-cert-invalid", reason);
		return;
	}
	if (!icpt_pins_ok(ic)) {
		icpt_up_failed(ic, 502, "upstream-pin-mismatch", NULL);
		return;
	}
	if (tlsup_is_h2(tstream_ssl(ic->up)) && up_adopt(ic) != 0)
		return;
	icpt_rs_set(ic, RS_READY);
	ic->c->upstream_used = 1;
	if (ic->h2s != NULL)
		h2_stream_upstream(ic->h2s);
	tstream_set_timeout(ic->up, ic->c->l->cfg->timeouts.idle);
	icpt_up_release(ic);	/* what waited goes (unless its record waits) */
}

/* The handshake with the upstream failed (or timed out). */
static void
up_handshake_failed(struct icpt *ic, short what)
{
	char reason[TLSUP_REASON_BUFSZ];
	unsigned long e = tstream_ssl_error(ic->up);

	tlsup_handshake_reason(tstream_ssl(ic->up), e, reason,
	    sizeof(reason));
	log_info("icpt", "%s: %s", ic->c->name, reason);
	if (what & TSTREAM_TIMEOUT)
		icpt_up_failed(ic, 504, "upstream-timeout", NULL);
	else
		icpt_up_failed(ic, 502, strncmp(reason, "upstream-cert-invalid",
		    21) == 0 ? "upstream-cert-invalid" :
		    "upstream-unreachable", reason);
}

/*
 * The upstream ended (EOF, or an error), and what it sent before is
 * relayed: a close-delimited answer ends here, anything else is cut.
 */
static void
up_ended(struct icpt *ic, short what)
{
	const struct http_resp_head *rh;
	const char *why;
	enum icpt_rs was = ic->rs;

	if ((what & TSTREAM_ERROR) && icpt_answer_started(ic)) {
		icpt_abort(ic, "upstream-reset");	/* a reset is no end */
		return;
	}
	if (ic->resps != NULL && ic->qn > 0 &&
	    http_resps_finish(ic->resps, &rh, &why) == HTTP_RESP_END) {
		struct icpt_req *r = icpt_q_head(ic);

		if (icpt_req_redacts(r) && icpt_redact_end(ic, r) != 0)
			return;
		icpt_audit_request(ic, r);
		icpt_q_pop(ic);
		was = RS_LAST;		/* it ended the connection */
	}
	icpt_up_discard(ic);
	if (ic->qn > 0)
		icpt_up_failed(ic, 502, "upstream-closed", NULL);
	else if (was == RS_LAST || was == RS_TUNNEL || ic->rq == RQ_DONE)
		icpt_finish(ic);
	/* Else nothing is owed: the next request opens another. */
}

void
icpt_up_events(struct icpt *ic)
{
	short what = ic->up_ev;

	if (ic->up == NULL || ic->rs >= RS_FLUSH) {
		ic->up_ev = 0;
		return;
	}
	if (what & TSTREAM_CONNECTED) {
		ic->up_ev &= ~TSTREAM_CONNECTED;
		what &= ~TSTREAM_CONNECTED;
		up_connected(ic);
		if (what == 0 || ic->up == NULL)
			return;
	}
	if (ic->rs == RS_CONNECTING) {
		ic->up_ev = 0;
		up_handshake_failed(ic, what);
		return;
	}
	if (what & TSTREAM_TIMEOUT) {
		ic->up_ev = 0;
		if (ic->qn > 0)
			icpt_up_failed(ic, 504, "upstream-timeout", NULL);
		else
			icpt_up_discard(ic);	/* idle: the next request opens another */
		return;
	}
	/* What came before the end is relayed first (it may wait for the sandbox). */
	icpt_pump_responses(ic);
	if (ic->up == NULL || ic->rs >= RS_FLUSH ||
	    (evbuffer_get_length(tstream_input(ic->up)) > 0 &&
	    icpt_down_queued(ic) > ic->high))
		return;
	ic->up_ev = 0;
	up_ended(ic, what);
}

/* ---- the upstream's callbacks: they only dispatch ------------------- */

static void
up_event_cb(struct tstream *ts, short what, void *arg)
{
	struct icpt *ic = arg;

	icpt_touch(ic);
	ic->up_ev |= what;
	icpt_step(ic);
}

static void
up_read_cb(struct tstream *ts, void *arg)
{
	struct icpt *ic = arg;

	icpt_touch(ic);
	icpt_step(ic);
}

/* The upstream took our queued bytes: the sandbox may be read again. */
static void
up_write_cb(struct tstream *ts, void *arg)
{
	icpt_step(arg);
}

/* ---- responses ------------------------------------------------------ */

void
icpt_tunnel_down_to_up(struct icpt *ic)
{
	struct evbuffer *in = tstream_input(ic->down);
	size_t n = evbuffer_get_length(in);

	if (ic->up == NULL || n == 0 || icpt_up_queued(ic) > ic->high)
		return;
	ic->from_sandbox += n;
	evbuffer_remove_buffer(in, icpt_up_out(ic), n);
}

/* Body bytes data[0..used) of in: as they are, or redacted. */
static int
relay_body(struct icpt *ic, struct icpt_req *r, struct evbuffer *in,
    struct evbuffer *out, const uint8_t *data, size_t used)
{
	if (ic->red_mode == RED_OFF) {
		evbuffer_remove_buffer(in, out, used);
		return 0;
	}
	if (icpt_redact_body(ic, r, data, used) != 0)
		return -1;
	evbuffer_drain(in, used);
	return 0;
}

/* A head from the upstream, for r: to the sandbox, redacted if need be. */
static void
resp_head(struct icpt *ic, struct icpt_req *r, const struct http_resp_head *rh)
{
	if (icpt_req_redacts(r)) {
		if (icpt_redact_head(ic, r, rh) != 0)
			return;
	} else
		icpt_send_down(ic, rh->out, rh->out_len);
	if (rh->informational) {
		icpt_rs_set(ic, RS_INFO);
		return;
	}
	r->status = (int)rh->status;
	if (rh->keep_alive) {
		icpt_rs_set(ic, RS_BODY);
		return;
	}
	/* It ends the connection: no more requests are read. */
	icpt_rs_set(ic, RS_LAST);
	if (ic->rq == RQ_HEAD || ic->rq == RQ_BODY || ic->rq == RQ_DISCARD)
		icpt_rq_set(ic, RQ_DONE);
}

/* r's answer ended: its record, and what comes next. */
static void
resp_end(struct icpt *ic, struct icpt_req *r)
{
	int last = ic->rs == RS_LAST || r->close;

	if (icpt_req_redacts(r) && icpt_redact_end(ic, r) != 0)
		return;
	if (ic->rs == RS_LAST)
		icpt_up_discard(ic);	/* it said close: never pooled */
	else
		icpt_rs_set(ic, RS_READY);
	if (r->upgrade && ic->rq == RQ_UPGRADE) {
		/* Refused by the upstream: HTTP goes on as before. */
		if (http_reqs_upgrade_refused(ic->reqs) != 0) {
			icpt_end(ic, "internal");
			return;
		}
		icpt_rq_set(ic, RQ_HEAD);
	}
	icpt_audit_request(ic, r);
	icpt_q_pop(ic);
	if (last) {
		/* A refusal that waited for this answer goes before the end. */
		if (ic->rq == RQ_REFUSED && ic->qn == 0)
			ic->refusal.close = 1;
		else
			icpt_finish(ic);
		return;
	}
	/*
	 * Nothing owed: the upstream waits in the pool, where this sandbox's
	 * next request, on this connection or another, takes it; an idle
	 * client holds none.
	 */
	icpt_up_park_soon(ic);
	icpt_q_idle(ic);
	icpt_parsers_idle(ic);
}

/* A 101 for r: from here on both sides are one byte stream. */
static void
resp_tunnel(struct icpt *ic, struct icpt_req *r)
{
	if (!r->upgrade || ic->rq != RQ_UPGRADE) {
		icpt_up_failed(ic, 502, "upstream-malformed", NULL);
		return;
	}
	icpt_audit_request(ic, r);
	icpt_q_pop(ic);
	icpt_rs_set(ic, RS_TUNNEL);
	icpt_rq_set(ic, RQ_TUNNEL);
}

void
icpt_pump_responses(struct icpt *ic)
{
	struct evbuffer *in, *out;
	const struct http_resp_head *rh;
	const char *why;
	enum http_resp_ev ev;
	struct icpt_req *r;
	size_t len, used;
	uint8_t *data;

	/*
	 * A response whose head is read may end (or tunnel) without a byte.
	 * A refusal whose turn came goes before anything more is relayed.
	 */
	while (ic->up != NULL && icpt_rs_reads(ic->rs) &&
	    ic->rs != RS_CONNECTING && (ic->rq != RQ_REFUSED || ic->qn > 0) &&
	    ((len = evbuffer_get_length(tstream_input(ic->up))) > 0 ||
	    ic->rs == RS_INFO || ic->rs == RS_BODY || ic->rs == RS_LAST)) {
		in = tstream_input(ic->up);
		out = tstream_output(ic->down);
		if (icpt_down_queued(ic) > ic->high)
			return;		/* the sandbox reads slowly: flow() pauses */
		if (ic->rs == RS_TUNNEL) {
			ic->from_upstream += len;
			evbuffer_remove_buffer(in, out, len);
			continue;
		}
		if (ic->qn == 0) {
			/*
			 * Nothing is owed to the client: an answer now is one it
			 * never asked for (or one to a request cut short).  It is
			 * not relayed, and the connection ends.
			 */
			evbuffer_drain(in, evbuffer_get_length(in));
			icpt_up_discard(ic);
			icpt_finish(ic);
			return;
		}
		r = icpt_q_head(ic);
		len = evbuffer_get_contiguous_space(in);
		data = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
		ev = http_resps_feed(ic->resps, data, len, &used, &rh, &why);
		ic->from_upstream += used;
		switch (ev) {
		case HTTP_RESP_NEED_MORE:
			if (ic->rs == RS_READY) {
				/*
				 * Part of a head: the parser keeps it, and
				 * the sandbox gets the head once it is whole
				 * (redacted), never these bytes as they are.
				 */
				evbuffer_drain(in, used);
			} else {
				r->bytes_down += used;
				if (relay_body(ic, r, in, out, data, used) != 0)
					return;
			}
			if (used == 0)
				return;		/* more is to come */
			break;
		case HTTP_RESP_HEAD:
			evbuffer_drain(in, used);
			resp_head(ic, r, rh);
			break;
		case HTTP_RESP_END:
			r->bytes_down += used;
			if (relay_body(ic, r, in, out, data, used) != 0)
				return;
			if (ic->rs == RS_INFO)
				icpt_rs_set(ic, RS_READY);	/* a 1xx ended */
			else
				resp_end(ic, r);
			break;
		case HTTP_RESP_TUNNEL:
			resp_tunnel(ic, r);
			break;
		case HTTP_RESP_INVALID:
			log_info("icpt", "%s: malformed answer: %s", ic->c->name,
			    why != NULL ? why : "?");
			evbuffer_drain(in, evbuffer_get_length(in));
			icpt_up_failed(ic, 502, "upstream-malformed", NULL);
			return;
		}
	}
}
