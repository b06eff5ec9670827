/*
 * icpt.c: an intercepted connection.  The sandbox's TLS ends here, with a
 * leaf the sandbox's own CA signed for the SNI host; each request it sends
 * is judged on its own by the policy's intercept rules; allowed requests
 * go on, re-serialised, over one verified TLS connection to the upstream;
 * answers come back in order, their heads re-serialised and their bodies
 * as they are.  A refusal waits for the answers owed before it, so a
 * pipelining client sees its responses in order.
 *
 * Its life is two states, each with one setter: the request side (rq:
 * what becomes of the sandbox's bytes) and the upstream side (rs: what
 * goes to the sandbox, then the end).  Every callback records what
 * happened and calls icpt_step, the one place that decides what comes
 * next; the step is the one way out (conn_close), and c with ic is freed
 * on the next loop turn, so nothing is freed under a caller.
 *
 * Both sides are streams (loop/tstream.h): TLS right on the socket, the
 * ClientHello we peeked read first.  Each side's buffered output is
 * bounded: past ICPT_HIGH the other side is no longer read (flow).
 *
 * This file has the connection's life and the sandbox's side; the
 * requests are judged in icpt_req.c, the upstream is in icpt_up.c.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "util/clock.h"
#include "util/freelist.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/redact.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "conf/config.h"
#include "keys/ca.h"
#include "keys/secrets.h"
#include "keys/tlsterm.h"
#include "keys/tlsup.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/half.h"
#include "loop/loop.h"
#include "loop/resolve.h"
#include "loop/state.h"
#include "loop/tstream.h"
#include "loop/upool.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/h2.h"
#include "conn/icpt.h"
#include "conn/icpt_int.h"

#define ICPT_LEAF_VALIDITY	86400u
#define ICPT_LEAVES		256	/* cached leaves a sandbox */
#define ICPT_TICKET_ROTATE	3600u

void
icpt_touch(struct icpt *ic)
{
	ic->active = mono_ms();
	ic->c->last_active = ic->active;
}

/* ---- audit ---------------------------------------------------------- */

void
icpt_req_release(struct icpt_req *r)
{
	while (r->nsecrets > 0)
		secret_unref(r->secrets[--r->nsecrets]);
	while (r->nmtoks > 0)
		mtoken_unref(r->mtoks[--r->nmtoks]);
	if (r->tok != NULL) {
		sodium_free(r->tok->mem);	/* wipes the token */
		free(r->tok);
		r->tok = NULL;
	}
}

int
icpt_req_redacts(const struct icpt_req *r)
{
	size_t i;

	/* A client certificate's secret has no form to look for. */
	for (i = 0; i < r->nsecrets; i++)
		if (r->secrets[i]->nforms > 0)
			return 1;
	return r->tok != NULL || r->nmtoks > 0;
}

/* ---- what only a request under way holds ---------------------------- */

int
icpt_q_take(struct icpt *ic)
{
	if (ic->q == NULL && (ic->q = freelist_get(&ic->c->l->qblocks)) ==
	    NULL && (ic->q = malloc(ICPT_QBLOCK)) == NULL)
		return -1;
	return 0;
}

void
icpt_q_idle(struct icpt *ic)
{
	if (ic->qn > 0 || ic->q == NULL)
		return;
	freelist_put(&ic->c->l->qblocks, ic->q, free);
	ic->q = NULL;
	ic->qhead = 0;
}

int
icpt_parsers_take(struct icpt *ic)
{
	struct loop *l = ic->c->l;
	size_t limit = l->cfg->limits.header_bytes;

	if (ic->reqs == NULL) {
		if ((ic->reqs = freelist_get(&l->reqs)) != NULL)
			http_reqs_reset(ic->reqs, limit);
		else if ((ic->reqs = http_reqs_new(limit)) == NULL)
			return -1;
	}
	if (ic->resps == NULL) {
		if ((ic->resps = freelist_get(&l->resps)) != NULL)
			http_resps_reset(ic->resps, limit);
		else if ((ic->resps = http_resps_new(limit)) == NULL)
			return -1;
	}
	/* An HTTP/2 stream's bodies may end with trailers (gRPC's status). */
	if (ic->h2s != NULL) {
		http_reqs_trailers(ic->reqs, 1);
		http_resps_trailers(ic->resps, 1);
	}
	return 0;
}

size_t
icpt_resps_pending(const struct icpt *ic)
{
	return ic->resps != NULL ? http_resps_pending(ic->resps) : 0;
}

void
icpt_parsers_idle(struct icpt *ic)
{
	struct loop *l = ic->c->l;

	if (ic->reqs == NULL || ic->resps == NULL || ic->qn > 0 ||
	    ic->rq != RQ_HEAD || (ic->rs != RS_NONE && ic->rs != RS_READY) ||
	    !http_reqs_between(ic->reqs) || !http_resps_between(ic->resps))
		return;
	freelist_put(&l->reqs, ic->reqs, loop_reqs_destroy);
	freelist_put(&l->resps, ic->resps, loop_resps_destroy);
	ic->reqs = NULL;
	ic->resps = NULL;
}

void
icpt_audit_request(struct icpt *ic, struct icpt_req *r)
{
	struct conn *c = ic->c;
	struct arec rec;

	mtable_add(&c->l->metrics.requests, r->rule[0] ? r->rule : "(none)",
	    r->action);
	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name);
	arec_int(&rec, "revision", (int64_t)c->policy_rev);
	arec_str(&rec, "action", r->action);
	arec_str(&rec, "reason", r->reason);
	arec_int(&rec, "status", r->status);
	arec_int(&rec, "bytes_up", (int64_t)r->bytes_up);
	arec_int(&rec, "bytes_down", (int64_t)r->bytes_down);
	arec_int(&rec, "duration_ms", (int64_t)(mono_ms() - r->start_ms));
	if (ic->stream_id > 0)
		arec_int(&rec, "stream", ic->stream_id);
	if (r->rid[0] != '\0') {
		/* Its request record went before it (injected, forwarded). */
		arec_str(&rec, "rid", r->rid);
		arec_str(&rec, "rule", r->rule);
		arec_int(&rec, "redacted", (int64_t)(r->redacted_head +
		    r->redacted_body));
		if (c->observing)
			arec_bool(&rec, "observe", 1);
		audit_write_rec(c->l->audit, "response", &rec);
		icpt_req_release(r);
		return;
	}
	arec_str(&rec, "method", r->method);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "path", r->path);
	arec_str(&rec, "rule", r->rule[0] ? r->rule : NULL);
	if (r->would_deny != NULL)
		arec_str(&rec, "would_deny", r->would_deny);
	if (c->observing)
		arec_bool(&rec, "observe", 1);
	arec_bool(&rec, "intercepted", 1);
	if (c->counter != NULL)
		recent_add(&c->counter->recent, "request", &rec);
	audit_write_rec(c->l->audit, "request", &rec);
}

/* ---- the two states ------------------------------------------------ */

static const char *const rq_names[] = {
	[RQ_HANDSHAKE] = "handshake", [RQ_HEAD] = "head", [RQ_BODY] = "body",
	[RQ_DISCARD] = "discard", [RQ_REFUSED] = "refused",
	[RQ_UPGRADE] = "upgrade", [RQ_DONE] = "done", [RQ_TUNNEL] = "tunnel",
	[RQ_H2] = "h2", [RQ_TOKEN] = "token",
};

static const char *const rs_names[] = {
	[RS_NONE] = "none", [RS_CONNECTING] = "connecting",
	[RS_READY] = "ready", [RS_INFO] = "info", [RS_BODY] = "body",
	[RS_LAST] = "last", [RS_TUNNEL] = "tunnel", [RS_FLUSH] = "flush",
	[RS_DRAIN] = "drain", [RS_LINGER] = "linger", [RS_DONE] = "done",
	[RS_CLOSED] = "closed",
};

void
icpt_rq_set(struct icpt *ic, enum icpt_rq s)
{
	if (ic->rq == s)
		return;
	if (log_level() >= LOG_LVL_DEBUG)
		log_debug("icpt", "%p request side %s -> %s", (void *)ic->c,
		    rq_names[ic->rq], rq_names[s]);
	ic->rq = s;
	if (ic->busy > 0)
		ic->busy++;	/* the step takes another round */
}

void
icpt_rs_set(struct icpt *ic, enum icpt_rs s)
{
	if (ic->rs == s)
		return;
	if (log_level() >= LOG_LVL_DEBUG)
		log_debug("icpt", "%p upstream side %s -> %s", (void *)ic->c,
		    rs_names[ic->rs], rs_names[s]);
	ic->rs = s;
	if (ic->busy > 0)
		ic->busy++;
}

/* Whether the sandbox's side reads in state s. */
static int
rq_reads(enum icpt_rq s)
{
	return s == RQ_HANDSHAKE || s == RQ_HEAD || s == RQ_BODY ||
	    s == RQ_DISCARD || s == RQ_TUNNEL;
}

void
icpt_end(struct icpt *ic, const char *reason)
{
	if (ic->rs >= RS_DONE)
		return;
	/* Between answers it serves this sandbox's next connection. */
	if (ic->rs == RS_READY)
		icpt_up_park(ic);
	icpt_up_discard(ic);
	ic->end_reason = reason;
	icpt_rs_set(ic, RS_DONE);
}

void
icpt_finish(struct icpt *ic)
{
	if (ic->rs >= RS_FLUSH)
		return;
	/* Between answers it serves this sandbox's next connection. */
	if (ic->rs == RS_READY)
		icpt_up_park(ic);
	icpt_up_discard(ic);
	if (ic->rq != RQ_HANDSHAKE)
		icpt_rq_set(ic, RQ_DONE);
	icpt_rs_set(ic, RS_FLUSH);
}

/* ---- the sandbox side ----------------------------------------------- */

size_t
icpt_down_queued(struct icpt *ic)
{
	return tstream_queued(ic->down);
}

static void linger_cb(evutil_socket_t, short, void *);

/*
 * The socket's queue is out: our FIN follows it, and the sandbox's bytes
 * are read and dropped until its FIN (linger_step).
 */
static void
linger_start(struct icpt *ic)
{
	evutil_socket_t fd = tstream_fd(ic->down);
	struct timeval tv = { ICPT_LINGER_MS / 1000,
	    (ICPT_LINGER_MS % 1000) * 1000 };

	tstream_quiet(ic->down);
	if (fd < 0 || shutdown(fd, SHUT_WR) != 0 ||
	    (ic->linger = event_new(ic->c->l->base, fd, EV_READ | EV_PERSIST,
	    linger_cb, ic)) == NULL || event_add(ic->linger, &tv) != 0) {
		icpt_end(ic, "closed");
		return;
	}
	ic->linger_until = mono_ms() + ICPT_LINGER_MS;
	icpt_rs_set(ic, RS_LINGER);
}

/* Drops what the sandbox sent; its FIN, an error or the limits end it. */
static void
linger_step(struct icpt *ic)
{
	uint8_t buf[16384];
	ssize_t n;

	for (;;) {
		if (mono_ms() >= ic->linger_until ||
		    ic->lingered > ICPT_LINGER_BYTES) {
			icpt_end(ic, "closed");
			return;
		}
		n = recv(event_get_fd(ic->linger), buf, sizeof(buf), 0);
		if (n > 0) {
			ic->lingered += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		icpt_end(ic, "closed");		/* its FIN, or it is gone */
		return;
	}
}

/*
 * The end, once the sandbox has everything owed: the TLS layer's queue
 * is empty, our close_notify is queued after it (a clean end keeps the
 * session resumable), and the socket's queue has gone to the kernel.
 */
static void
flush_step(struct icpt *ic)
{
	if (ic->rs == RS_FLUSH && tstream_queued(ic->down) == 0) {
		if (ic->rq != RQ_HANDSHAKE)
			tstream_close_notify(ic->down);
		icpt_rs_set(ic, RS_DRAIN);
	}
	if (ic->rs == RS_DRAIN && tstream_queued(ic->down) == 0)
		linger_start(ic);
}

/*
 * Back-pressure, from the states and the two bounds: a side is read
 * while its state reads and what waits for the other side is below
 * ICPT_HIGH.
 */
static void
flow(struct icpt *ic)
{
	if (ic->rq == RQ_H2) {
		tstream_read(ic->down, ic->rs < RS_FLUSH &&
		    h2_reads(ic->h2) && icpt_down_queued(ic) <= ic->high);
		return;
	}
	tstream_read(ic->down, rq_reads(ic->rq) && ic->rs < RS_FLUSH &&
	    icpt_up_queued(ic) <= ic->high);
	if (ic->up != NULL)
		tstream_read(ic->up, icpt_rs_reads(ic->rs) &&
		    icpt_down_queued(ic) <= ic->high);
}

/* The sandbox's events, as down_event_cb recorded them. */
static void
down_events(struct icpt *ic)
{
	struct conn *c = ic->c;
	short what = ic->down_ev;
	unsigned long e;

	ic->down_ev = 0;
	if (what & TSTREAM_CONNECTED) {
		evtimer_del(c->timer);
		conn_arm_timer(c, c->l->cfg->timeouts.idle);
		what &= ~TSTREAM_CONNECTED;
		if (!tlsup_is_h2(tstream_ssl(ic->down)))	/* ALPN chose h2 */
			icpt_rq_set(ic, RQ_HEAD);
		else if ((ic->h2 = h2_new(ic)) == NULL) {
			icpt_end(ic, "out-of-memory");
			return;
		} else {
			icpt_rq_set(ic, RQ_H2);
			if (ic->c->l->draining)
				h2_drain(ic->h2);	/* came in as the worker began */
		}
	}
	if (what == 0)
		return;
	if (ic->rq == RQ_HANDSHAKE) {
		e = tstream_ssl_error(ic->down);
		log_debug("icpt", "%p handshake with the sandbox failed: %s",
		    (void *)c, e ? ERR_reason_error_string(e) : "closed");
		icpt_end(ic, "client-tls-failed");
		return;
	}
	if ((what & TSTREAM_EOF) && ic->qn > 0 && (ic->rq == RQ_HEAD ||
	    ic->rq == RQ_UPGRADE || ic->rq == RQ_DONE)) {
		/*
		 * Half-closed after whole requests: they are answered, then
		 * it ends.
		 */
		icpt_q_tail(ic)->close = 1;
		icpt_rq_set(ic, RQ_DONE);
		return;
	}
	if ((what & TSTREAM_EOF) && ic->rq == RQ_REFUSED) {
		ic->refusal.close = 1;	/* the answers, the refusal, the end */
		return;
	}
	if ((what & TSTREAM_EOF) && (ic->rq == RQ_HEAD ||
	    ic->rq == RQ_DONE) && icpt_down_queued(ic) > 0) {
		icpt_finish(ic);	/* answered already: what is queued goes */
		return;
	}
	/* The sandbox is gone or done: nothing more can reach it. */
	icpt_end(ic, (what & TSTREAM_EOF) ? "client-closed" : "read-error");
}

void
icpt_send_down(struct icpt *ic, const void *buf, size_t len)
{
	evbuffer_add(tstream_output(ic->down), buf, len);
}

void
icpt_refusal_drop(struct icpt *ic)
{
	free(ic->refusal.buf);
	ic->refusal.buf = NULL;
}

/*
 * Refuses the current request with sluice's own answer: at once when
 * nothing is owed before it, else once the answers before it are out.
 * close: the connection ends after it (framing can no longer be trusted).
 */
void
icpt_refuse_req(struct icpt *ic, struct icpt_req *r, int status,
    const char *error, const char *action, const char *reason,
    const char *detail, int close)
{
	struct deny_what dw = { status, error, NULL, NULL, NULL, reason,
	    detail, NULL, NULL, NULL, 0 };

	icpt_refuse_what(ic, r, &dw, action, close);
}

void
icpt_refuse_what(struct icpt *ic, struct icpt_req *r, struct deny_what *dw,
    const char *action, int close)
{
	char *resp;
	size_t len;

	if (dw->message == NULL)
		dw->message = dw->status == 403 ? "sluice: this request is not "
		    "allowed by the sandbox's egress policy" :
		    dw->status == 421 ? "sluice: the request names another "
		    "host than the TLS connection" :
		    "sluice: the request was refused";
	dw->host = ic->c->name;
	dw->policy = ic->c->policy_name;
	dw->rule = r->rule[0] ? r->rule : NULL;
	resp = deny_http(dw, !close, &len);
	ic->own_answer = dw->status;
	ic->own_reason = dw->reason;
	r->status = dw->status;
	r->action = action;
	r->reason = dw->reason;
	icpt_audit_request(ic, r);
	if (resp == NULL) {
		icpt_end(ic, "out-of-memory");
		return;
	}
	if (ic->qn > 0) {
		icpt_refusal_drop(ic);
		ic->refusal.buf = resp;
		ic->refusal.len = len;
		ic->refusal.close = close;
		icpt_rq_set(ic, RQ_REFUSED);
		return;
	}
	icpt_send_down(ic, resp, len);
	free(resp);
	if (close)
		icpt_finish(ic);
	else
		icpt_rq_set(ic, RQ_DISCARD);	/* its body is read, dropped */
}

void
icpt_refuse(struct icpt *ic, int status, const char *error,
    const char *reason, const char *detail, int close)
{
	icpt_refuse_req(ic, &ic->cur, status, error, "deny", reason, detail,
	    close);
}

/* The answers owed before a held refusal are out: it goes. */
static void
release_refusal(struct icpt *ic)
{
	icpt_send_down(ic, ic->refusal.buf, ic->refusal.len);
	icpt_refusal_drop(ic);
	if (ic->refusal.close)
		icpt_finish(ic);
	else
		icpt_rq_set(ic, RQ_DISCARD);
}

void
icpt_fail_unsent(struct icpt *ic, unsigned n, size_t keep, int status,
    const char *reason, const char *detail)
{
	struct evbuffer *older;
	struct icpt_req first;
	char msg[256];
	unsigned i, at;

	if (n == 0 || n > ic->qn - ic->q_sent ||
	    keep > evbuffer_get_length(ic->held) ||
	    http_resps_forget(ic->resps, n) != 0) {
		icpt_up_failed(ic, status, reason, detail);	/* all of it */
		return;
	}
	/* Their bytes go (wiped: a credential may be in them); older ones stay. */
	if (keep == 0)
		loop_evbuffer_wipe_drain(ic->held, evbuffer_get_length(ic->held));
	else if ((older = evbuffer_new()) == NULL ||
	    loop_evbuffer_move_wiped(ic->held, older, keep) != 0) {
		if (older != NULL)
			loop_evbuffer_wipe_free(older);
		icpt_end(ic, "out-of-memory");
		return;
	} else {
		loop_evbuffer_wipe_drain(ic->held, evbuffer_get_length(ic->held));
		evbuffer_add_buffer(ic->held, older);
		evbuffer_free(older);
	}
	ic->held_free = 0;
	at = (ic->qhead + ic->qn - n) % ICPT_MAX_PENDING;
	first = ic->q[at];
	for (i = 1; i < n; i++) {
		struct icpt_req *r = &ic->q[(at + i) % ICPT_MAX_PENDING];

		r->action = "incomplete";
		r->reason = reason;
		icpt_audit_request(ic, r);
	}
	ic->qn -= n;
	snprintf(msg, sizeof(msg), "sluice: the request could not be sent: %s",
	    detail);
	icpt_refuse_req(ic, &first, status, "unavailable", "error", reason, msg,
	    1);
	/* The older ones may go now, if they only waited for it. */
	icpt_up_release(ic);
}

void
icpt_abort(struct icpt *ic, const char *reason)
{
	struct linger lg = { 1, 0 };
	evutil_socket_t fd = tstream_fd(ic->down);

	log_debug("icpt", "%p answer cut: %s", (void *)ic->c, reason);
	if (ic->qn > 0) {
		struct icpt_req *r = icpt_q_head(ic);

		r->action = "error";
		r->reason = reason;
		icpt_audit_request(ic, r);
		icpt_q_pop(ic);
	}
	icpt_up_discard(ic);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	icpt_end(ic, reason);
}

/* ---- the step ------------------------------------------------------- */

/* One round: each part acts on what the states let it. */
static void
step_round(struct icpt *ic)
{
	if (ic->down_ev != 0)
		down_events(ic);
	if (ic->up_ev != 0)
		icpt_up_events(ic);
	if (ic->rq == RQ_H2 && ic->rs < RS_FLUSH)
		h2_step(ic->h2);
	else if (ic->rq == RQ_TUNNEL && ic->rs == RS_TUNNEL)
		icpt_tunnel_down_to_up(ic);
	else
		icpt_pump_requests(ic);
	icpt_pump_responses(ic);
	if (ic->rq == RQ_REFUSED && ic->qn == 0 && ic->rs < RS_FLUSH)
		release_refusal(ic);
	if (ic->rs == RS_FLUSH || ic->rs == RS_DRAIN)
		flush_step(ic);
	if (ic->rs == RS_LINGER)
		linger_step(ic);
	if (ic->rs < RS_LINGER)
		flow(ic);
}

void
icpt_step(struct icpt *ic)
{
	unsigned seen;

	if (ic->rs == RS_CLOSED)
		return;
	if (ic->busy > 0) {
		ic->busy++;	/* from inside a round: one more follows */
		return;
	}
	ic->busy = 1;
	do {
		seen = ic->busy;
		step_round(ic);
	} while (ic->busy != seen && ic->rs < RS_DONE);
	ic->busy = 0;
	if (ic->rs != RS_DONE)
		return;
	if (ic->h2s != NULL) {
		/* A stream's: its session closes it, on its own step. */
		h2_stream_over(ic->h2s, ic->end_reason);
	} else
		conn_close(ic->c, ic->end_reason);	/* the one way out */
}

/* ---- the sandbox's callbacks: they only dispatch -------------------- */

static void
wake_cb(evutil_socket_t fd, short what, void *arg)
{
	icpt_step(arg);
}

static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
	icpt_step(arg);
}

static void
down_read_cb(struct tstream *ts, void *arg)
{
	struct icpt *ic = arg;

	icpt_touch(ic);
	icpt_step(ic);
}

/*
 * Queued bytes went out and at most half the bound is left: a paused
 * upstream may be read again, a closing connection end.
 */
static void
down_write_cb(struct tstream *ts, void *arg)
{
	icpt_step(arg);
}

static void
down_event_cb(struct tstream *ts, short what, void *arg)
{
	struct icpt *ic = arg;

	icpt_touch(ic);
	ic->down_ev |= what;
	icpt_step(ic);
}

/* ---- start and end -------------------------------------------------- */

/* Mints a leaf with the sandbox's CA, unless the sandbox was deleted. */
static int
mint_leaf(void *arg, const char *host, EVP_PKEY *key, X509 **out)
{
	struct sb_counter *cnt = arg;
	int r = SL_ERR_DENIED;

	pthread_mutex_lock(&cnt->ca_mtx);
	if (cnt->ca != NULL)
		r = ca_mint_leaf(cnt->ca, host, key, ICPT_LEAF_VALIDITY, out);
	pthread_mutex_unlock(&cnt->ca_mtx);
	return r;
}

/* The sandbox's leaf cache and a reference to its CA certificate. */
static int
sandbox_tls(struct sb_counter *cnt, struct leafcache **lc, X509 **ca)
{
	int r = 0;

	pthread_mutex_lock(&cnt->ca_mtx);
	if (cnt->ca == NULL)
		r = SL_ERR_DENIED;
	else if (cnt->leaves == NULL)
		r = leafcache_new(ICPT_LEAVES, ICPT_TICKET_ROTATE, &cnt->leaves);
	if (r == 0) {
		*lc = cnt->leaves;
		*ca = ca_cert(cnt->ca);
		X509_up_ref(*ca);
	}
	pthread_mutex_unlock(&cnt->ca_mtx);
	return r;
}

/*
 * The sandbox's socket as a stream, with the server side of its TLS when
 * tls; the bytes read already go first.  On failure c->down keeps the
 * socket unless it is SL_ERR_NOMEM.
 */
static int
down_new(struct icpt *ic, int tls)
{
	struct conn *c = ic->c;
	struct leafcache *lc;
	X509 *ca = NULL;
	SSL *ssl = NULL;
	int r;

	if (!tls) {
		ic->down = tstream_new(c->l->base, c->down.fd, NULL,
		    TSTREAM_PLAIN);
		goto made;
	}
	if (c->sb->id == NULL || (r = sandbox_tls(c->counter, &lc, &ca)) != 0)
		return SL_ERR_DENIED;
	r = tlsterm_ssl_new(c->l->tls_down, lc, c->name, mint_leaf,
	    c->counter, ca, &ssl);
	X509_free(ca);
	if (r == 0 && c->dec.alpn != NULL && c->dec.alpn->len > 0 &&
	    (r = tlsterm_ssl_alpn(ssl, c->dec.alpn->wire,
	    c->dec.alpn->len)) != 0) {
		SSL_free(ssl);
		ssl = NULL;
	}
	if (r != 0) {
		log_warnx("icpt", "cannot make a certificate for %s: %s",
		    c->name, err_str(r));
		return r;
	}
	ic->down = tstream_new(c->l->base, c->down.fd, ssl, TSTREAM_ACCEPT);
made:
	c->down.fd = -1;	/* the stream's, even when it failed */
	if (ic->down == NULL ||
	    tstream_prefix(ic->down, c->peek, c->peeklen) != 0)
		return SL_ERR_NOMEM;
	return 0;
}

/*
 * c is intercepted: TLS (its ClientHello in c->peek) is terminated here;
 * plain HTTP (its first request in c->peek) is judged the same way, and
 * what it may send goes to the upstream over TLS, on port 443, so a
 * credential never crosses a cleartext hop.
 */
void
icpt_start(struct conn *c)
{
	int tls = c->proto == SNIFF_TLS, r;
	struct icpt *ic;

	if (c->counter == NULL) {
		conn_deny(c, "no-sandbox-ca", c->dec.rule);
		return;
	}
	if ((ic = calloc(1, sizeof(*ic))) == NULL ||
	    (ic->wake = event_new(c->l->base, -1, 0, wake_cb, ic)) == NULL ||
	    (ic->held = evbuffer_new()) == NULL) {
		icpt_free(ic);
		conn_close(c, "out-of-memory");
		return;
	}
	ic->c = c;
	if ((r = down_new(ic, tls)) != 0) {
		icpt_free(ic);
		if (c->down.fd < 0)
			conn_close(c, "out-of-memory");
		else
			conn_deny(c, r == SL_ERR_DENIED ? "no-sandbox-ca" :
			    "interception-failed", c->dec.rule);
		return;
	}
	/*
	 * The socket is the stream's from here on: c's own events on it go
	 * (an idle connection keeps nothing it no longer uses).
	 */
	half_reset(&c->down);
	c->icpt = ic;
	/* The peeked bytes are the stream's now: the copy goes. */
	free(c->peek);
	c->peek = NULL;
	c->peeklen = c->peekcap = 0;
	if (!tls) {
		ic->rq = RQ_HEAD;
		c->upport = 443;	/* the same server, over TLS */
		c->updst = c->dst;
	}
	conn_set_state(c, CS_ICPT);
	ic->high = ICPT_HIGH;
	tstream_setcb(ic->down, down_read_cb, down_write_cb, down_event_cb,
	    ic);
	tstream_set_wlow(ic->down, ICPT_HIGH / 2);
	/*
	 * The handshake runs on the peeked bytes on the next turn (no more
	 * may come before it answers); plain HTTP's are in the input now.
	 */
	tstream_start(ic->down);
	icpt_step(ic);
}

struct icpt *
icpt_stream_new(struct conn *c, struct tstream *pipe, struct h2s *owner,
    int32_t id)
{
	struct icpt *ic;

	if ((ic = calloc(1, sizeof(*ic))) == NULL ||
	    (ic->wake = event_new(c->l->base, -1, 0, wake_cb, ic)) == NULL ||
	    (ic->held = evbuffer_new()) == NULL) {
		tstream_free(pipe);
		icpt_free(ic);
		return NULL;
	}
	ic->c = c;
	ic->h2s = owner;
	ic->stream_id = id;
	ic->high = H2_STREAM_HIGH;
	ic->down = pipe;
	ic->rq = RQ_HEAD;
	ic->active = mono_ms();
	tstream_setcb(ic->down, down_read_cb, down_write_cb, down_event_cb,
	    ic);
	tstream_set_wlow(ic->down, ic->high / 2);
	tstream_start(ic->down);	/* its callbacks come on the loop */
	return ic;
}

void
icpt_close(struct icpt *ic)
{

	if (ic->rs == RS_CLOSED)
		return;
	/* Answers never completed still get their record. */
	while (ic->qn > 0) {
		icpt_q_head(ic)->action = "incomplete";
		icpt_q_head(ic)->reason = "connection-closed";
		icpt_audit_request(ic, icpt_q_head(ic));
		icpt_q_pop(ic);
	}
	icpt_token_cancel(ic);	/* no mint wakes it any more */
	/* Between requests: the next connection of this sandbox takes it. */
	if (ic->rs == RS_READY)
		icpt_up_park(ic);
	icpt_up_discard(ic);
	if (ic->h2 != NULL)
		h2_close(ic->h2);	/* its streams end with it */
	icpt_rs_set(ic, RS_CLOSED);
	tstream_quiet(ic->down);
	if (ic->wake != NULL)
		event_del(ic->wake);
	if (ic->linger != NULL)
		event_del(ic->linger);
}

void
icpt_free(struct icpt *ic)
{
	if (ic == NULL)
		return;
	h2_free(ic->h2);
	tstream_free(ic->up);
	tstream_free(ic->down);
	if (ic->wake != NULL)
		event_free(ic->wake);
	if (ic->linger != NULL)
		event_free(ic->linger);
	icpt_req_release(&ic->cur);
	if (ic->q != NULL)
		freelist_put(&ic->c->l->qblocks, ic->q, free);
	resolve_cancel(ic->resolving);
	icpt_hold_free(ic->hold);
	redactor_free(ic->red);
	if (ic->red_buf != NULL)
		evbuffer_free(ic->red_buf);
	if (ic->red_trailers != NULL)
		evbuffer_free(ic->red_trailers);
	/* Reset when taken: an HTTP/2 stream's icpt (one request) reuses them. */
	freelist_put(&ic->c->l->reqs, ic->reqs, loop_reqs_destroy);
	freelist_put(&ic->c->l->resps, ic->resps, loop_resps_destroy);
	if (ic->held != NULL)
		loop_evbuffer_wipe_free(ic->held);
	while (ic->npins > 0)
		free(ic->pins[--ic->npins]);
	icpt_refusal_drop(ic);
	free(ic);
}

void
icpt_drain(struct icpt *ic)
{
	if (ic->h2 != NULL && ic->rs != RS_CLOSED)
		h2_drain(ic->h2);
}

void
icpt_audit_durable(struct icpt *ic, uint64_t durable, int failed)
{
	if (ic->h2 != NULL && ic->rs != RS_CLOSED)
		h2_audit_durable(ic->h2, durable, failed);	/* its streams' */
	if (ic->rs == RS_CLOSED || ic->audit_wait == 0)
		return;
	if (failed && ic->audit_wait > durable) {
		/*
		 * What waits for its record is refused; the answers owed
		 * before it still go out, whole and first.
		 */
		unsigned from = ic->held_free_q > ic->q_sent ?
		    ic->held_free_q : ic->q_sent;

		ic->audit_wait = 0;
		icpt_fail_unsent(ic, ic->qn - from, from > ic->q_sent ?
		    ic->held_free : 0, 503, "audit-unavailable",
		    "the audit trail cannot be written");
	} else if (ic->audit_wait <= durable) {
		ic->audit_wait = 0;
		icpt_up_release(ic);
	}
	icpt_step(ic);
}

void
icpt_bytes(const struct icpt *ic, uint64_t *from_sandbox,
    uint64_t *from_upstream)
{
	*from_sandbox = ic->from_sandbox;
	*from_upstream = ic->from_upstream;
}

void
icpt_timer(struct conn *c)
{
	struct icpt *ic = c->icpt;
	uint64_t now = mono_ms();

	if (ic->rq == RQ_H2)
		h2_timer(ic->h2, now);	/* it arms the timer again */
	else
		icpt_timer_ic(ic, now);
}

void
icpt_timer_ic(struct icpt *ic, uint64_t now)
{
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;
	uint64_t last = ic->h2s != NULL ? ic->active : c->last_active;

	if (ic->h2s == NULL && (ic->rq == RQ_HANDSHAKE ||
	    (c->head_deadline != 0 && now >= c->head_deadline))) {
		icpt_end(ic, "handshake-timeout");	/* a handshake or head too slow */
	} else if (now - last >= cfg->timeouts.idle) {
		/* An answer is owed: the sandbox is told, not left guessing. */
		if (ic->rq == RQ_TOKEN) {
			icpt_token_cancel(ic);
			icpt_refuse(ic, 504, "unavailable", "token-unavailable",
			    "sluice: no token was minted within timeouts.idle",
			    1);
		} else if (ic->qn > 0 && ic->rs < RS_TUNNEL) {
			icpt_up_failed(ic, 504, "upstream-timeout", "no answer "
			    "within timeouts.idle");
			conn_arm_timer(c, cfg->timeouts.idle);
		} else
			icpt_end(ic, "idle-timeout");
	} else {
		if (c->wake_at != 0 && now >= c->wake_at && ic->rs == RS_READY)
			icpt_up_park(ic);	/* no request came: it may go */
		if (c->wake_at != 0 && now >= c->wake_at)
			c->wake_at = 0;
		conn_arm_timer(c, conn_next_wake(c, now));
	}
	icpt_step(ic);
}
