/*
 * icpt.c: an intercepted connection.  The sandbox's TLS ends here, with a
 * leaf the sandbox's own CA signed for the SNI host; each request it sends
 * is judged on its own by the policy's intercept rules; allowed requests
 * go on, re-serialised, over one verified TLS connection to the upstream;
 * answers come back in order, their heads re-serialised and their bodies
 * as they are.  A refusal waits for the answers owed before it, so a
 * pipelining client sees its responses in order.
 *
 * Both sides are libevent bufferevents: the sandbox's an OpenSSL filter
 * over its socket (the ClientHello we peeked is put back in front), the
 * upstream's an OpenSSL socket bufferevent.  Each side's buffered output
 * is bounded: past ICPT_HIGH the other side is no longer read.
 *
 * This file has the connection's life and the sandbox's side; the
 * requests are judged in icpt_req.c, the upstream is in icpt_up.c.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
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
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/resolve.h"
#include "loop/state.h"
#include "loop/upool.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/icpt.h"
#include "conn/icpt_int.h"

#define ICPT_LEAF_VALIDITY	86400u
#define ICPT_LEAVES		256	/* cached leaves a sandbox */
#define ICPT_TICKET_ROTATE	3600u

void
icpt_touch(struct icpt *ic)
{
	ic->c->last_active = mono_ms();
}

/* ---- audit ---------------------------------------------------------- */

void
icpt_req_release(struct icpt_req *r)
{
	while (r->nsecrets > 0)
		secret_unref(r->secrets[--r->nsecrets]);
	if (r->tok != NULL) {
		sodium_free(r->tok->mem);	/* wipes the token */
		free(r->tok);
		r->tok = NULL;
	}
}

int
icpt_req_redacts(const struct icpt_req *r)
{
	return r->nsecrets > 0 || r->tok != NULL;
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
	    ic->phase != IC_REQUESTS || ic->body != BODY_NONE ||
	    ic->resp_open || ic->expect_tunnel ||
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
	if (r->rid[0] != '\0') {
		/* Its request record went before it (injected, forwarded). */
		arec_str(&rec, "rid", r->rid);
		arec_str(&rec, "rule", r->rule);
		arec_int(&rec, "redacted", (int64_t)(r->redacted_head +
		    r->redacted_body));
		audit_write_rec(c->l->audit, "response", &rec);
		icpt_req_release(r);
		return;
	}
	arec_str(&rec, "method", r->method);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "path", r->path);
	arec_str(&rec, "rule", r->rule[0] ? r->rule : NULL);
	arec_bool(&rec, "intercepted", 1);
	audit_write_rec(c->l->audit, "request", &rec);
}

/* ---- the sandbox side ----------------------------------------------- */

/*
 * The connection is to end once the sandbox has everything owed: the TLS
 * layer's queue is empty, our close_notify is queued after it, and the
 * socket's queue (under_out_cb watches it) has gone to the kernel.
 */
void
icpt_maybe_finish(struct icpt *ic)
{
	struct bufferevent *under;
	SSL *ssl;

	if (ic->phase == IC_CLOSED || !ic->closing ||
	    evbuffer_get_length(bufferevent_get_output(ic->down)) > 0)
		return;
	under = bufferevent_get_underlying(ic->down);
	if (!ic->shut_sent && ic->phase != IC_HANDSHAKE &&
	    (ssl = bufferevent_openssl_get_ssl(ic->down)) != NULL) {
		ic->shut_sent = 1;
		SSL_shutdown(ssl);	/* a clean end keeps the session resumable */
	}
	if (under != NULL && evbuffer_get_length(bufferevent_get_output(under)) >
	    0)
		return;
	conn_close(ic->c, "closed");
}

size_t
icpt_down_queued(struct icpt *ic)
{
	struct bufferevent *under = bufferevent_get_underlying(ic->down);
	size_t n = evbuffer_get_length(bufferevent_get_output(ic->down));

	if (under != NULL)
		n += evbuffer_get_length(bufferevent_get_output(under));
	return n;
}

/* The sandbox took some of what was queued: read the upstream again. */
static void
resume_up(struct icpt *ic)
{
	if (ic->up != NULL)
		bufferevent_enable(ic->up, EV_READ);
	icpt_pump_responses(ic);
}

static void
finish_cb(evutil_socket_t fd, short what, void *arg)
{
	struct icpt *ic = arg;

	if (ic->phase == IC_CLOSED)
		return;
	if (ic->closing)
		icpt_maybe_finish(ic);
	else
		resume_up(ic);
}

/*
 * The socket's queue shrank: once empty, a closing connection may end;
 * below half the bound, an upstream paused for it is read again.
 */
static void
under_out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct icpt *ic = arg;

	if (ic->phase == IC_CLOSED || info->n_deleted == 0)
		return;
	/* Not from inside libevent's write path: on the next loop turn. */
	if (ic->closing ? evbuffer_get_length(buf) == 0 :
	    ic->up != NULL && !(bufferevent_get_enabled(ic->up) & EV_READ) &&
	    icpt_down_queued(ic) <= ICPT_HIGH / 2)
		event_active(ic->finish, EV_TIMEOUT, 0);
}

void
icpt_send_down(struct icpt *ic, const void *buf, size_t len)
{
	evbuffer_add(bufferevent_get_output(ic->down), buf, len);
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
	const char *msg = detail;
	char *resp;
	size_t len;

	if (msg == NULL)
		msg = status == 403 ? "sluice: this request is not allowed by "
		    "the sandbox's egress policy" : status == 421 ?
		    "sluice: the request names another host than the TLS "
		    "connection" : "sluice: the request was refused";
	resp = deny_http_keep(status, error, r->rule[0] ? r->rule : NULL,
	    reason, msg, !close, &len);
	r->status = status;
	r->action = action;
	r->reason = reason;
	icpt_audit_request(ic, r);
	if (resp == NULL) {
		conn_close(ic->c, "out-of-memory");
		return;
	}
	if (close)
		ic->hold = 1;	/* nothing after it is read */
	if (ic->qn > 0) {
		free(ic->refusal);
		ic->refusal = resp;
		ic->refusal_len = len;
		ic->refusal_close = close;
		ic->hold = 1;
		return;
	}
	icpt_send_down(ic, resp, len);
	free(resp);
	if (close) {
		ic->closing = 1;
		icpt_maybe_finish(ic);
	}
}

void
icpt_refuse(struct icpt *ic, int status, const char *error,
    const char *reason, const char *detail, int close)
{
	icpt_refuse_req(ic, &ic->cur, status, error, "deny", reason, detail,
	    close);
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
	/* Their bytes go; those of older requests, before them, stay. */
	if (keep == 0)
		evbuffer_drain(ic->held, evbuffer_get_length(ic->held));
	else if ((older = evbuffer_new()) == NULL ||
	    evbuffer_remove_buffer(ic->held, older, keep) != (int)keep) {
		if (older != NULL)
			evbuffer_free(older);
		conn_close(ic->c, "out-of-memory");
		return;
	} else {
		evbuffer_drain(ic->held, evbuffer_get_length(ic->held));
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
	ic->upgrade_sent = 0;
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
	evutil_socket_t fd = bufferevent_getfd(ic->down);

	log_debug("icpt", "%p answer cut: %s", (void *)ic->c, reason);
	if (ic->qn > 0) {
		struct icpt_req *r = icpt_q_head(ic);

		r->action = "error";
		r->reason = reason;
		icpt_audit_request(ic, r);
		icpt_q_pop(ic);
	}
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	conn_close(ic->c, reason);
}

/* The answers owed before a held refusal are out: send it. */
void
icpt_release_refusal(struct icpt *ic)
{
	if (ic->refusal == NULL || ic->qn > 0)
		return;
	icpt_send_down(ic, ic->refusal, ic->refusal_len);
	free(ic->refusal);
	ic->refusal = NULL;
	if (ic->refusal_close) {
		ic->closing = 1;
		icpt_maybe_finish(ic);
		return;
	}
	ic->hold = 0;
	icpt_pump_requests(ic);
}

/* ---- the sandbox's callbacks ---------------------------------------- */

static void
down_read_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	if (ic->starting)
		return;		/* icpt_start reads when it is done */
	icpt_touch(ic);
	if (ic->phase == IC_TUNNEL) {
		icpt_tunnel_down_to_up(ic);
		return;
	}
	icpt_pump_requests(ic);
}

/* The sandbox took what we queued. */
static void
down_write_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	if (ic->starting)
		return;
	if (ic->closing) {
		icpt_maybe_finish(ic);
		return;
	}
	if (icpt_down_queued(ic) <= ICPT_HIGH / 2)
		resume_up(ic);
}

static void
down_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct icpt *ic = arg;
	struct conn *c = ic->c;
	const struct config *cfg = c->l->cfg;

	if (ic->starting) {
		ic->start_events |= what;	/* icpt_start handles them */
		return;
	}
	icpt_touch(ic);
	if (what & BEV_EVENT_CONNECTED) {
		ic->phase = IC_REQUESTS;
		evtimer_del(c->timer);
		conn_arm_timer(c, cfg->timeouts.idle);
		icpt_pump_requests(ic);
		what &= ~BEV_EVENT_CONNECTED;
		if (what == 0 || c->state == CS_CLOSED)
			return;
	}
	if (ic->phase == IC_HANDSHAKE) {
		unsigned long e = bufferevent_get_openssl_error(bev);

		log_debug("icpt", "%p handshake with the sandbox failed: %s",
		    (void *)c, e ? ERR_reason_error_string(e) : "closed");
		conn_close(c, "client-tls-failed");
		return;
	}
	if ((what & BEV_EVENT_EOF) && ic->phase == IC_REQUESTS &&
	    ic->body == BODY_NONE && ic->qn > 0) {
		/*
		 * Half-closed after its requests (its end came after whole
		 * heads and bodies): they are answered, then it ends.
		 */
		icpt_q_tail(ic)->close = 1;
		ic->last_request = 1;
		ic->hold = 1;
		bufferevent_enable(ic->down, EV_WRITE);
		return;
	}
	if ((what & BEV_EVENT_EOF) && ic->phase == IC_REQUESTS &&
	    ic->body == BODY_NONE && icpt_down_queued(ic) > 0) {
		/* Answered already: what is queued for it still goes. */
		ic->hold = 1;
		ic->closing = 1;
		bufferevent_enable(ic->down, EV_WRITE);
		icpt_maybe_finish(ic);
		return;
	}
	/* The sandbox is gone or done: nothing more can reach it. */
	conn_close(c, (what & BEV_EVENT_EOF) ? "client-closed" : "read-error");
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

/* The server side of the sandbox's TLS, over the socket bufferevent. */
static int
start_tls(struct icpt *ic)
{
	struct conn *c = ic->c;
	struct leafcache *lc;
	X509 *ca = NULL;
	SSL *ssl = NULL;
	int r;

	if (c->sb->id == NULL || (r = sandbox_tls(c->counter, &lc, &ca)) != 0)
		return SL_ERR_DENIED;
	r = tlsterm_ssl_new(c->l->tls_down, lc, c->name, mint_leaf,
	    c->counter, ca, &ssl);
	X509_free(ca);
	if (r != 0) {
		log_warnx("icpt", "cannot make a certificate for %s: %s",
		    c->name, err_str(r));
		return r;
	}
	ic->down = bufferevent_openssl_filter_new(c->l->base, ic->under, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (ic->down == NULL) {
		SSL_free(ssl);
		return SL_ERR_NOMEM;
	}
	ic->under = NULL;	/* the filter frees it */
	if (evbuffer_add_cb(bufferevent_get_output(bufferevent_get_underlying(
	    ic->down)), under_out_cb, ic) == NULL)
		return SL_ERR_NOMEM;
	bufferevent_openssl_set_allow_dirty_shutdown(ic->down, 1);
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
	    (ic->finish = event_new(c->l->base, -1, 0, finish_cb, ic)) == NULL ||
	    (ic->held = evbuffer_new()) == NULL) {
		icpt_free(ic);
		conn_close(c, "out-of-memory");
		return;
	}
	ic->c = c;
	ic->under = bufferevent_socket_new(c->l->base, c->down.fd,
	    BEV_OPT_CLOSE_ON_FREE);
	/*
	 * The bytes we read are put back in front of the socket's (a
	 * bufferevent's input takes no appends from outside; its front does).
	 */
	if (ic->under == NULL || evbuffer_prepend(bufferevent_get_input(
	    ic->under), c->peek, c->peeklen) != 0) {
		icpt_free(ic);
		conn_close(c, "out-of-memory");
		return;
	}
	if (tls && (r = start_tls(ic)) != 0) {
		bufferevent_setfd(ic->under, -1);	/* c->down keeps the socket */
		icpt_free(ic);
		conn_deny(c, r == SL_ERR_DENIED ? "no-sandbox-ca" :
		    "interception-failed", c->dec.rule);
		return;
	}
	/* The socket is libevent's from here on; our own events on it go. */
	event_del(c->down.rev);
	event_del(c->down.wev);
	c->down.fd = -1;
	c->icpt = ic;
	/* The peeked bytes are in the bufferevent now: the copy goes. */
	free(c->peek);
	c->peek = NULL;
	c->peeklen = c->peekcap = 0;
	if (!tls) {
		ic->down = ic->under;
		ic->under = NULL;
		ic->phase = IC_REQUESTS;
		c->upport = 443;	/* the same server, over TLS */
		c->updst = c->dst;
	}
	conn_set_state(c, CS_ICPT);
	/*
	 * Enabling may run the handshake on the peeked bytes at once, and a
	 * failed one would close c under us: events wait until we are done.
	 */
	ic->starting = 1;
	bufferevent_setcb(ic->down, down_read_cb, down_write_cb, down_event_cb,
	    ic);
	bufferevent_setwatermark(ic->down, EV_WRITE, ICPT_HIGH / 2, 0);
	bufferevent_enable(ic->down, EV_READ | EV_WRITE);
	/* What was peeked is in already, and no more may come: start now. */
	bufferevent_trigger(tls ? bufferevent_get_underlying(ic->down) :
	    ic->down, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
	ic->starting = 0;
	if (ic->start_events != 0)
		down_event_cb(ic->down, ic->start_events, ic);	/* may close c */
	else if (!tls)
		down_read_cb(ic->down, ic);
}

/* Clears our callbacks from b and stops it: nothing of ours runs again. */
static void
bev_quiet(struct bufferevent *b)
{
	if (b == NULL)
		return;
	bufferevent_setcb(b, NULL, NULL, NULL, NULL);
	bufferevent_disable(b, EV_READ | EV_WRITE);
}

void
icpt_close(struct icpt *ic)
{
	struct bufferevent *under;

	if (ic->phase == IC_CLOSED)
		return;
	/* Answers never completed still get their record. */
	while (ic->qn > 0) {
		icpt_q_head(ic)->action = "incomplete";
		icpt_q_head(ic)->reason = "connection-closed";
		icpt_audit_request(ic, icpt_q_head(ic));
		icpt_q_pop(ic);
	}
	/* Between requests: the next connection of this sandbox takes it. */
	icpt_up_park(ic);
	ic->phase = IC_CLOSED;
	bev_quiet(ic->up);
	if (ic->down != NULL &&
	    (under = bufferevent_get_underlying(ic->down)) != NULL)
		evbuffer_remove_cb(bufferevent_get_output(under), under_out_cb,
		    ic);
	bev_quiet(ic->down);
	bev_quiet(ic->under);
	if (ic->finish != NULL)
		event_del(ic->finish);
	resolve_cancel(ic->resolving);
	ic->resolving = NULL;
}

void
icpt_free(struct icpt *ic)
{
	if (ic == NULL)
		return;
	if (ic->up != NULL)
		bufferevent_free(ic->up);
	if (ic->down != NULL)
		bufferevent_free(ic->down);
	if (ic->finish != NULL)
		event_free(ic->finish);
	if (ic->under != NULL)
		bufferevent_free(ic->under);
	icpt_req_release(&ic->cur);
	if (ic->q != NULL)
		freelist_put(&ic->c->l->qblocks, ic->q, free);
	resolve_cancel(ic->resolving);
	icpt_fwd_free(ic->fwd);
	redactor_free(ic->red);
	if (ic->red_buf != NULL)
		evbuffer_free(ic->red_buf);
	http_reqs_free(ic->reqs);
	http_resps_free(ic->resps);
	if (ic->held != NULL)
		evbuffer_free(ic->held);
	while (ic->npins > 0)
		free(ic->pins[--ic->npins]);
	free(ic->refusal);
	free(ic);
}

void
icpt_audit_durable(struct icpt *ic, uint64_t durable, int failed)
{
	if (ic->phase == IC_CLOSED || ic->audit_wait == 0)
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
		return;
	}
	if (ic->audit_wait > durable)
		return;
	ic->audit_wait = 0;
	icpt_up_release(ic);
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
	const struct config *cfg = c->l->cfg;
	struct icpt *ic = c->icpt;
	uint64_t idle, now;

	if (ic->phase == IC_HANDSHAKE) {
		conn_close(c, "handshake-timeout");
		return;
	}
	now = mono_ms();
	if (c->head_deadline != 0 && now >= c->head_deadline) {
		conn_close(c, "handshake-timeout");	/* a head too slow */
		return;
	}
	if (c->wake_at != 0 && now >= c->wake_at)
		icpt_up_park(ic);	/* no request came: it may go */
	idle = now - c->last_active;
	if (idle >= cfg->timeouts.idle) {
		/* An answer is owed: the sandbox is told, not left guessing. */
		if (ic->qn > 0 && ic->phase == IC_REQUESTS &&
		    ic->fail_reason == NULL) {
			icpt_up_failed(ic, 504, "upstream-timeout", "no answer "
			    "within timeouts.idle");
			if (c->state != CS_CLOSED)
				conn_arm_timer(c, cfg->timeouts.idle);
			return;
		}
		conn_close(c, "idle-timeout");
		return;
	}
	conn_arm_timer(c, conn_next_wake(c, now));
}
