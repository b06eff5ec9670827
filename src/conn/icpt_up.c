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
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "util/clock.h"
#include "util/log.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/tlsup.h"
#include "loop/loop.h"
#include "loop/resolve.h"
#include "loop/state.h"
#include "loop/upool.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/icpt_int.h"

/* ---- the upstream side ---------------------------------------------- */

struct evbuffer *
icpt_up_out(struct icpt *ic)
{
	return ic->up_state == UP_READY && ic->audit_wait == 0 &&
	    evbuffer_get_length(ic->held) == 0 ?
	    bufferevent_get_output(ic->up) : ic->held;
}

void
icpt_up_release(struct icpt *ic)
{
	if (ic->up_state != UP_READY || evbuffer_get_length(ic->held) == 0)
		return;
	if (ic->audit_wait == 0) {
		evbuffer_add_buffer(bufferevent_get_output(ic->up), ic->held);
		ic->q_sent = ic->qn;
		ic->held_free = 0;
		return;
	}
	/* Older requests do not wait for a newer one's record. */
	if (ic->held_free > 0) {
		evbuffer_remove_buffer(ic->held, bufferevent_get_output(ic->up),
		    ic->held_free);
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
	    evbuffer_get_length(bufferevent_get_output(ic->up)) : 0);
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
	return tlsup_check_peer(bufferevent_openssl_get_ssl(ic->up), ic->pins,
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

static void up_read_cb(struct bufferevent *, void *);
static void up_write_cb(struct bufferevent *, void *);
static void up_event_cb(struct bufferevent *, short, void *);

static void
bev_free_cb(evutil_socket_t fd, short what, void *arg)
{
	bufferevent_free(arg);
}

void
icpt_up_discard(struct icpt *ic)
{
	resolve_cancel(ic->resolving);
	ic->resolving = NULL;
	if (ic->up != NULL) {
		bufferevent_setcb(ic->up, NULL, NULL, NULL, NULL);
		bufferevent_disable(ic->up, EV_READ | EV_WRITE);
		/* Next turn: a caller on the stack may still hold its buffers. */
		if (event_base_once(ic->c->l->base, -1, EV_TIMEOUT, bev_free_cb,
		    ic->up, NULL) != 0)
			bufferevent_free(ic->up);
	}
	ic->up = NULL;
	ic->up_state = UP_NONE;
}

void
icpt_up_failed(struct icpt *ic, int status, const char *reason,
    const char *detail)
{
	const char *rule = ic->cur.rule[0] ? ic->cur.rule : NULL;
	char msg[256], *resp;
	size_t len;

	if (ic->phase == IC_CLOSED || ic->fail_reason != NULL)
		return;		/* one failure ends it; a second event is moot */
	log_debug("icpt", "%p upstream failed: %s", (void *)ic->c, reason);
	ic->fail_reason = reason;
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
	resp = deny_http(status, status == 504 ? "upstream-timeout" :
	    "bad-gateway", rule, reason, msg, &len);
	if (resp != NULL) {
		icpt_send_down(ic, resp, len);
		free(resp);
	}
	free(ic->refusal);
	ic->refusal = NULL;
	ic->hold = 1;
	ic->closing = 1;
	icpt_maybe_finish(ic);
}

/* Connects ic->up (made, not yet connected) to a:port. */
static int
up_connect(struct icpt *ic, const struct sl_addr *a, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	len = addr_to_sockaddr(a, (uint16_t)port, &ss);
	if (bufferevent_socket_connect(ic->up, (struct sockaddr *)&ss,
	    (int)len) != 0) {
		icpt_up_failed(ic, 502, "upstream-unreachable", NULL);
		return -1;
	}
	/*
	 * A request written right after the handshake must not wait for
	 * the upstream's delayed ACK (Nagle): 40 ms on Linux.
	 */
	setsockopt(bufferevent_getfd(ic->up), IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
	bufferevent_enable(ic->up, EV_READ | EV_WRITE);
	return 0;
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
		return;
	}
	up_connect(ic, &ans->addrs[0], ic->up_port);
}

int
icpt_up_open(struct icpt *ic, const struct intercept_rule *rule)
{
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;
	struct timeval tv = { cfg->timeouts.connect / 1000,
	    (cfg->timeouts.connect % 1000) * 1000 };
	struct timeval idle = { cfg->timeouts.idle / 1000,
	    (cfg->timeouts.idle % 1000) * 1000 };
	struct resolve_answer ans;
	int fwd = rule->action == ICPT_FORWARD, r;
	char err[256];
	SSL_CTX *ctx;
	SSL *ssl = NULL;

	if (c->updst.family == 0) {
		c->updst = c->dst;
		c->upport = c->dst_port;
	}
	/* A forward rule's requests go to its proxy, not to c's host. */
	snprintf(ic->up_host, sizeof(ic->up_host), "%s", fwd ?
	    rule->forward_host : c->name);
	ic->up_port = fwd ? rule->forward_port : c->upport;
	snprintf(ic->up_ca, sizeof(ic->up_ca), "%s", rule->upstream_ca ?
	    rule->upstream_ca : "");
	/* An idle connection this sandbox verified for this host will do. */
	if ((ic->up = upool_get(c->l->upool, c->counter, ic->up_host,
	    (uint16_t)ic->up_port, ic->up_ca)) != NULL) {
		bufferevent_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb,
		    ic);
		bufferevent_set_timeouts(ic->up, &idle, &idle);
		bufferevent_setwatermark(ic->up, EV_WRITE, ICPT_HIGH / 2, 0);
		bufferevent_enable(ic->up, EV_READ | EV_WRITE);
		ic->up_state = UP_READY;
		c->upstream_used = 1;
		if (!icpt_pins_ok(ic)) {
			icpt_up_failed(ic, 502, "upstream-pin-mismatch", NULL);
			return -1;
		}
		return 0;
	}
	if (tlsup_ctx(c->l->tls_up, rule->upstream_ca, &ctx, err, sizeof(err)) != 0) {
		log_warnx("icpt", "%s", err);
		icpt_up_failed(ic, 502, "upstream-ca-unavailable", NULL);
		return -1;
	}
	if (tlsup_ssl_new(ctx, c->sb != NULL ? c->sb->id : NULL,
	    ic->up_host, 0, ic->up_port, &ssl) != 0) {
		icpt_up_failed(ic, 502, "upstream-tls-error", NULL);
		return -1;
	}
	ic->up = bufferevent_openssl_socket_new(c->l->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (ic->up == NULL) {
		SSL_free(ssl);
		icpt_up_failed(ic, 502, "upstream-tls-error", NULL);
		return -1;
	}
	bufferevent_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb, ic);
	bufferevent_set_timeouts(ic->up, &tv, &tv);
	bufferevent_setwatermark(ic->up, EV_WRITE, ICPT_HIGH / 2, 0);
	ic->up_state = UP_CONNECTING;
	if (!fwd)
		return up_connect(ic, &c->updst, c->upport);
	/* The proxy: by name, through the worker's resolver. */
	r = resolve_name(c->l->res, ic->up_host, 0, &ans, proxy_resolved_cb,
	    ic, &ic->resolving);
	if (r == 0) {
		if (ans.n == 0) {
			icpt_up_failed(ic, 502, "upstream-unreachable",
			    "the proxy's name does not resolve");
			return -1;
		}
		return up_connect(ic, &ans.addrs[0], ic->up_port);
	}
	if (r != 1) {
		icpt_up_failed(ic, 502, "upstream-unreachable", NULL);
		return -1;
	}
	return 0;
}

void
icpt_up_drop(struct icpt *ic)
{
	resolve_cancel(ic->resolving);
	ic->resolving = NULL;
	if (ic->up != NULL && ic->up_state == UP_READY &&
	    icpt_resps_pending(ic) == 0 &&
	    evbuffer_get_length(bufferevent_get_input(ic->up)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(ic->up)) == 0) {
		upool_put(ic->c->l->upool, ic->up, ic->c->counter, ic->up_host,
		    (uint16_t)ic->up_port, ic->up_ca);
		ic->up = NULL;
	}
	if (ic->up != NULL)
		bufferevent_free(ic->up);
	ic->up = NULL;
	ic->up_state = UP_NONE;
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
	if (ic->up == NULL || ic->up_state != UP_READY || ic->qn > 0 ||
	    ic->phase != IC_REQUESTS || ic->resp_close || ic->resp_open ||
	    ic->body == BODY_FORWARD || ic->upgrade_sent || ic->fwd != NULL ||
	    ic->audit_wait != 0 || evbuffer_get_length(ic->held) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(ic->up)) > 0)
		return;		/* an answer nobody asked for ends it all */
	icpt_up_drop(ic);
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct icpt *ic = arg;
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;
	struct timeval idle = { cfg->timeouts.idle / 1000,
	    (cfg->timeouts.idle % 1000) * 1000 };
	const struct http_resp_head *rh;
	const char *why;
	char reason[TLSUP_REASON_BUFSZ];
	unsigned long e;

	icpt_touch(ic);
	if (what & BEV_EVENT_CONNECTED) {
		/* Chain and name were verified in the handshake; the rest here. */
		if (tlsup_check_peer(bufferevent_openssl_get_ssl(bev), NULL, 0,
		    reason, sizeof(reason)) != 0) {
			icpt_up_failed(ic, 502, "upstream-cert-invalid", reason);
			return;
		}
		if (!icpt_pins_ok(ic)) {
			icpt_up_failed(ic, 502, "upstream-pin-mismatch", NULL);
			return;
		}
		ic->up_state = UP_READY;
		c->upstream_used = 1;
		bufferevent_set_timeouts(bev, &idle, &idle);
		/* Checked: what waited goes now (unless its record waits). */
		icpt_up_release(ic);
		return;
	}
	if (ic->up_state == UP_CONNECTING) {
		e = bufferevent_get_openssl_error(bev);
		tlsup_handshake_reason(bufferevent_openssl_get_ssl(bev), e,
		    reason, sizeof(reason));
		log_info("icpt", "%s: %s", c->name, reason);
		if (what & BEV_EVENT_TIMEOUT)
			icpt_up_failed(ic, 504, "upstream-timeout", NULL);
		else
			icpt_up_failed(ic, 502, strncmp(reason, "upstream-cert-invalid",
			    21) == 0 ? "upstream-cert-invalid" :
			    "upstream-unreachable", reason);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (ic->qn > 0) {
			icpt_up_failed(ic, 504, "upstream-timeout", NULL);
			return;
		}
		/*
		 * Nothing owed and the upstream idle: it goes, the sandbox's
		 * connection stays (its own idle limit is the connection's
		 * timer); the next request opens another.
		 */
		icpt_up_discard(ic);
		return;
	}
	/* EOF or error: a close-delimited answer ends here, anything else is cut. */
	icpt_pump_responses(ic);
	if (c->state == CS_CLOSED || ic->up != bev)
		return;		/* closed, or failed and dropped, meanwhile */
	if ((what & BEV_EVENT_ERROR) && icpt_answer_started(ic)) {
		/* A reset is no end: a close-delimited answer is cut too. */
		icpt_up_discard(ic);
		icpt_abort(ic, "upstream-reset");
		return;
	}
	if (ic->resps != NULL && ic->qn > 0 &&
	    http_resps_finish(ic->resps, &rh, &why) == HTTP_RESP_END) {
		struct icpt_req *r = icpt_q_head(ic);

		if (icpt_req_redacts(r) && icpt_redact_end(ic, r) != 0)
			return;
		icpt_audit_request(ic, r);
		icpt_q_pop(ic);
	}
	bufferevent_free(ic->up);
	ic->up = NULL;
	ic->up_state = UP_NONE;
	if (ic->qn > 0) {
		icpt_up_failed(ic, 502, "upstream-closed", NULL);
		return;
	}
	if (ic->closing || ic->resp_close) {
		ic->closing = 1;
		icpt_maybe_finish(ic);
		return;
	}
	/* Nothing owed: the next request opens a new upstream connection. */
	if (ic->refusal != NULL) {
		icpt_release_refusal(ic);
		return;
	}
	ic->hold = 0;
	icpt_pump_requests(ic);
}

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	icpt_touch(ic);
	icpt_pump_responses(ic);
}

/* The upstream took our queued bytes: read the sandbox again. */
static void
up_write_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	if (ic->phase == IC_TUNNEL) {
		bufferevent_enable(ic->down, EV_READ);
		return;
	}
	if (!ic->hold)
		icpt_pump_requests(ic);
}

/* ---- responses ------------------------------------------------------ */

void
icpt_tunnel_down_to_up(struct icpt *ic)
{
	struct evbuffer *in = bufferevent_get_input(ic->down);
	size_t n = evbuffer_get_length(in);

	ic->from_sandbox += n;
	evbuffer_remove_buffer(in, icpt_up_out(ic), n);
	if (icpt_up_queued(ic) > ICPT_HIGH)
		bufferevent_disable(ic->down, EV_READ);
}

/* Body bytes data[0..used) of in: as they are, or redacted. */
static int
relay_body(struct icpt *ic, struct icpt_req *r, struct evbuffer *in,
    struct evbuffer *out, const uint8_t *data, size_t used)
{
	if (!ic->red_on || r == NULL) {
		evbuffer_remove_buffer(in, out, used);
		return 0;
	}
	if (icpt_redact_body(ic, r, data, used) != 0)
		return -1;
	evbuffer_drain(in, used);
	return 0;
}

void
icpt_pump_responses(struct icpt *ic)
{
	struct evbuffer *in, *out;
	const struct http_resp_head *rh;
	const char *why;
	enum http_resp_ev ev;
	struct icpt_req *r;
	struct conn *c = ic->c;		/* outlives ic when it closes */
	size_t len, used;
	uint8_t *data;

	/*
	 * A response whose head is read may end (or tunnel) without a byte.
	 * A step may fail the upstream or close the connection: nothing is
	 * pumped after that.
	 */
	while (ic->up != NULL && ic->fail_reason == NULL &&
	    ic->phase != IC_CLOSED && c->state != CS_CLOSED &&
	    ((len = evbuffer_get_length(bufferevent_get_input(ic->up))) > 0 ||
	    ic->resp_open)) {
		in = bufferevent_get_input(ic->up);
		out = bufferevent_get_output(ic->down);
		if (icpt_down_queued(ic) > ICPT_HIGH) {
			bufferevent_disable(ic->up, EV_READ);	/* the sandbox reads slowly */
			return;
		}
		if (ic->phase == IC_TUNNEL) {
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
			ic->resp_close = 1;
			ic->hold = 1;
			ic->closing = 1;
			icpt_maybe_finish(ic);
			return;
		}
		len = evbuffer_get_contiguous_space(in);
		data = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
		ev = http_resps_feed(ic->resps, data, len, &used, &rh, &why);
		ic->resp_open = ev == HTTP_RESP_HEAD || (ev == HTTP_RESP_NEED_MORE &&
		    ic->resp_open);
		r = ic->qn > 0 ? icpt_q_head(ic) : NULL;
		switch (ev) {
		case HTTP_RESP_NEED_MORE:
			ic->from_upstream += used;
			if (!ic->resp_open) {
				/*
				 * Part of a head: the parser keeps it, and
				 * the sandbox gets the head once it is whole
				 * (redacted), never these bytes as they are.
				 */
				evbuffer_drain(in, used);
				if (used == 0)
					return;
				break;
			}
			/* Body bytes, as they are (or redacted). */
			if (r != NULL)
				r->bytes_down += used;
			if (relay_body(ic, r, in, out, data, used) != 0)
				return;
			if (used == 0)
				return;		/* more is to come */
			break;
		case HTTP_RESP_HEAD:
			ic->from_upstream += used;
			evbuffer_drain(in, used);
			if (r != NULL && icpt_req_redacts(r)) {
				if (icpt_redact_head(ic, r, rh) != 0)
					return;
			} else
				icpt_send_down(ic, rh->out, rh->out_len);
			ic->resp_info = rh->informational;
			if (!rh->informational) {
				if (r != NULL)
					r->status = (int)rh->status;
				ic->resp_close = !rh->keep_alive;
				if (ic->resp_close)
					ic->hold = 1;	/* it ends the connection */
			}
			break;
		case HTTP_RESP_END:
			ic->from_upstream += used;
			if (r != NULL)
				r->bytes_down += used;
			if (relay_body(ic, r, in, out, data, used) != 0)
				return;
			if (r == NULL || ic->resp_info)
				break;		/* an informational answer ended */
			if (icpt_req_redacts(r) && icpt_redact_end(ic, r) != 0)
				return;
			if (r->upgrade) {
				/* Refused by upstream: HTTP goes on as before. */
				http_reqs_upgrade_refused(ic->reqs);
				ic->upgrade_sent = 0;
				ic->hold = 0;
				bufferevent_enable(ic->down, EV_READ);
			}
			icpt_audit_request(ic, r);
			icpt_q_pop(ic);
			if (ic->refusal != NULL && ic->qn == 0) {
				icpt_release_refusal(ic);	/* it was waiting for this */
				if (c->state == CS_CLOSED || ic->closing)
					return;
			}
			if (ic->resp_close || r->close) {
				ic->closing = 1;
				icpt_maybe_finish(ic);
				return;
			}
			if (c->state == CS_CLOSED)
				return;
			/*
			 * Nothing owed: the upstream waits in the pool, where
			 * this sandbox's next request, on this connection or
			 * another, takes it; an idle client holds none.
			 */
			icpt_up_park_soon(ic);
			icpt_q_idle(ic);
			icpt_parsers_idle(ic);
			if (!ic->hold)
				icpt_pump_requests(ic);
			break;
		case HTTP_RESP_TUNNEL:
			/* 101: from here on both sides are one byte stream. */
			if (r == NULL || !r->upgrade) {
				icpt_up_failed(ic, 502, "upstream-malformed", NULL);
				return;
			}
			if (r != NULL) {
				icpt_audit_request(ic, r);
				icpt_q_pop(ic);
			}
			ic->phase = IC_TUNNEL;
			bufferevent_enable(ic->down, EV_READ);
			icpt_tunnel_down_to_up(ic);
			break;
		case HTTP_RESP_INVALID:
			log_info("icpt", "%s: malformed answer: %s", ic->c->name,
			    why != NULL ? why : "?");
			evbuffer_drain(in, evbuffer_get_length(in));
			icpt_up_failed(ic, 502, "upstream-malformed", NULL);
			return;
		}
		if (c->state == CS_CLOSED)
			return;
	}
}
