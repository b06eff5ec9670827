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
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "audit.h"
#include "ca.h"
#include "config.h"
#include "conn.h"
#include "daemon.h"
#include "deny.h"
#include "httpfwd.h"
#include "httphead.h"
#include "httppath.h"
#include "httpresp.h"
#include "icpt.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "state.h"
#include "tlsterm.h"
#include "tlsup.h"
#include "upool.h"
#include "worker.h"

#define ICPT_HIGH		(256u * 1024)	/* bytes queued for one side */
#define ICPT_MAX_PENDING	32	/* requests upstream has not answered */
#define ICPT_HEAD_MAX		(64u * 1024)	/* a re-serialised request head */
#define ICPT_PATH_MAX		(HTTP_MAX_TARGET + 1)	/* a normalised path always fits */
#define ICPT_LEAF_VALIDITY	86400u
#define ICPT_LEAVES		256	/* cached leaves a sandbox */
#define ICPT_TICKET_ROTATE	3600u
#define ICPT_MAX_PINS		8

/* A request from its judgement to its audit record. */
struct icpt_req {
	char		 method[24];
	char		 path[256];	/* normalised, cut for the record */
	char		 rule[96];
	const char	*action;	/* static */
	const char	*reason;	/* static */
	int		 status;
	int		 upgrade;	/* asked to switch protocols */
	int		 close;		/* the client asked to close after it */
	uint64_t	 bytes_up, bytes_down;
	uint64_t	 start_ms;
};

enum icpt_phase { IC_HANDSHAKE, IC_REQUESTS, IC_TUNNEL };
enum icpt_body { BODY_NONE, BODY_FORWARD, BODY_DISCARD };
enum icpt_up { UP_NONE, UP_CONNECTING, UP_READY };

struct icpt {
	struct conn	*c;
	enum icpt_phase	 phase;
	struct bufferevent *under;	/* the sandbox's socket */
	struct bufferevent *down;	/* TLS over it, towards the sandbox */
	struct bufferevent *up;		/* TLS to the upstream, once needed */
	enum icpt_up	 up_state;
	char		 up_ca[256];	/* CA file the upstream was verified by */
	struct http_reqs *reqs;
	struct http_resps *resps;
	enum icpt_body	 body;		/* what becomes of the current body */
	int		 hold;		/* request parsing waits */
	int		 upgrade_sent;	/* a passed upgrade awaits upstream's answer */
	char		*refusal;	/* waiting for the answers owed before it */
	size_t		 refusal_len;
	int		 refusal_close;
	int		 closing;	/* close once the sandbox has everything */
	int		 resp_close;	/* the answer in progress ends the connection */
	int		 shut_sent;	/* our close_notify is queued */
	const char	*fail_reason;	/* why the upstream failed (static) */
	int		 starting;	/* icpt_start is still on the stack */
	short		 start_events;	/* events that came meanwhile */
	int		 resp_open;	/* a response head was read, not its end */
	int		 resp_info;	/* and it is informational (1xx) */
	int		 expect_tunnel;	/* an upgrade request: TUNNEL follows END */
	int		 last_request;	/* the client said close: read no more */
	struct evbuffer	*held;		/* for the upstream, until it is checked */
	char		*pins[ICPT_MAX_PINS];	/* of the rule that opened it */
	size_t		 npins;
	struct event	*finish;	/* runs maybe_finish on the next turn */
	struct icpt_req	 cur;		/* the request being read */
	struct icpt_req	 q[ICPT_MAX_PENDING];	/* sent, not yet answered */
	unsigned	 qhead, qn;
	uint64_t	 from_sandbox, from_upstream;
};

static void pump_requests(struct icpt *ic);
static void pump_responses(struct icpt *ic);

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
touch(struct icpt *ic)
{
	ic->c->last_active = now_ms();
}

/* ---- audit ---------------------------------------------------------- */

static void
audit_request(struct icpt *ic, const struct icpt_req *r)
{
	struct conn *c = ic->c;
	json_t *rec;

	mtable_add(&c->w->metrics.requests, r->rule[0] ? r->rule : "(none)",
	    r->action);
	rec = json_pack("{s:s?, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s?, s:i,"
	    " s:I, s:I, s:I, s:b}",
	    "sandbox", c->sb ? c->sb->id : NULL,
	    "policy", c->policy_name, "revision", (json_int_t)c->policy_rev,
	    "method", r->method, "host", c->name, "path", r->path,
	    "action", r->action, "reason", r->reason,
	    "rule", r->rule[0] ? r->rule : NULL, "status", r->status,
	    "bytes_up", (json_int_t)r->bytes_up,
	    "bytes_down", (json_int_t)r->bytes_down,
	    "duration_ms", (json_int_t)(now_ms() - r->start_ms),
	    "intercepted", 1);
	audit_write(worker_audit(c->w), "request", rec);
}

/* ---- the sandbox side ----------------------------------------------- */

/*
 * The connection is to end once the sandbox has everything owed: the TLS
 * layer's queue is empty, our close_notify is queued after it, and the
 * socket's queue (under_out_cb watches it) has gone to the kernel.
 */
static void
maybe_finish(struct icpt *ic)
{
	struct bufferevent *under;
	SSL *ssl;

	if (!ic->closing ||
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

static void
finish_cb(evutil_socket_t fd, short what, void *arg)
{
	maybe_finish(arg);
}

/* The socket's queue shrank; once empty, a closing connection may end. */
static void
under_out_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct icpt *ic = arg;

	/* Not from inside libevent's write path: on the next loop turn. */
	if (ic->closing && info->n_deleted > 0 && evbuffer_get_length(buf) == 0)
		event_active(ic->finish, EV_TIMEOUT, 0);
}

static void
send_down(struct icpt *ic, const void *buf, size_t len)
{
	evbuffer_add(bufferevent_get_output(ic->down), buf, len);
}

/*
 * Refuses the current request with sluice's own answer: at once when
 * nothing is owed before it, else once the answers before it are out.
 * close: the connection ends after it (framing can no longer be trusted).
 */
static void
refuse(struct icpt *ic, int status, const char *error, const char *reason,
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
	resp = deny_http_keep(status, error, ic->cur.rule[0] ? ic->cur.rule :
	    NULL, reason, msg, !close, &len);
	ic->cur.status = status;
	ic->cur.action = "deny";
	ic->cur.reason = reason;
	audit_request(ic, &ic->cur);
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
	send_down(ic, resp, len);
	free(resp);
	if (close) {
		ic->closing = 1;
		maybe_finish(ic);
	}
}

/* The answers owed before a held refusal are out: send it. */
static void
release_refusal(struct icpt *ic)
{
	if (ic->refusal == NULL || ic->qn > 0)
		return;
	send_down(ic, ic->refusal, ic->refusal_len);
	free(ic->refusal);
	ic->refusal = NULL;
	if (ic->refusal_close) {
		ic->closing = 1;
		maybe_finish(ic);
		return;
	}
	ic->hold = 0;
	pump_requests(ic);
}

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
	ic->cur.start_ms = now_ms();
	log_escape(t, tlen, ic->cur.path, sizeof(ic->cur.path));
	/* Every identity the request carries must be the TLS connection's. */
	if (!h->has_host || h->host_is_ip || strcmp(h->host, c->name) != 0 ||
	    (h->host_port != 0 && h->host_port != c->dst_port) ||
	    (h->has_authority && strcmp(h->authority, c->name) != 0)) {
		refuse(ic, 421, "misdirected", "host-mismatch", NULL, ka_close);
		return NULL;
	}
	if (h->is_connect) {
		refuse(ic, 400, "refused", "bad-request",
		    "sluice: CONNECT inside an intercepted connection", 1);
		return NULL;
	}
	if (http_path_normalize(t, tlen, path, sizeof(path), &plen, &query,
	    &qlen, &why) != 0) {
		refuse(ic, 400, "refused", "bad-target", why, 1);
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
		refuse(ic, 403, "denied", "no-matching-rule", NULL, ka_close);
		return NULL;
	}
	snprintf(ic->cur.rule, sizeof(ic->cur.rule), "%s", rule->label);
	switch (rule->action) {
	case ICPT_PASS:
		break;
	case ICPT_DENY:
		refuse(ic, 403, "denied", "deny-rule", NULL, ka_close);
		return NULL;
	case ICPT_INJECT:
		/* XXX issue 6: the secret store; until then, fail closed. */
		refuse(ic, 403, "denied", "injection-unavailable",
		    "sluice: credential injection is not available yet",
		    ka_close);
		return NULL;
	case ICPT_FORWARD:
		/* XXX issue 7: forwarding with identity tokens. */
		refuse(ic, 403, "denied", "forwarding-unavailable",
		    "sluice: forwarding is not available yet", ka_close);
		return NULL;
	}
	if (plen + 1 + qlen + 1 > target_len) {
		refuse(ic, 400, "refused", "bad-target", "target too long", 1);
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

/* ---- the upstream side ---------------------------------------------- */

/*
 * Where bytes for the upstream go: held back until its certificate (and
 * the rule's pins) are checked, then the connection's own queue.
 */
static struct evbuffer *
up_out(struct icpt *ic)
{
	return ic->up_state == UP_READY ? bufferevent_get_output(ic->up) :
	    ic->held;
}

static size_t
up_queued(struct icpt *ic)
{
	return evbuffer_get_length(ic->held) + (ic->up != NULL ?
	    evbuffer_get_length(bufferevent_get_output(ic->up)) : 0);
}

/* The rule's pins, if any, against the upstream's key. */
static int
pins_ok(struct icpt *ic)
{
	char reason[TLSUP_REASON_BUFSZ];

	if (ic->npins == 0)
		return 1;
	return tlsup_check_peer(bufferevent_openssl_get_ssl(ic->up), ic->pins,
	    ic->npins, reason, sizeof(reason)) == 0;
}

static void
pins_set(struct icpt *ic, const struct intercept_rule *rule)
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

/* Upstream failed before answering what was sent: tell the sandbox, end. */
/*
 * Upstream failed before answering what was sent: tell the sandbox why
 * (detail, e.g. the certificate problem, may be NULL), end the connection.
 */
static void
up_failed(struct icpt *ic, int status, const char *reason, const char *detail)
{
	const char *rule = ic->cur.rule[0] ? ic->cur.rule : NULL;
	char msg[256], *resp;
	size_t len;

	log_debug("icpt", "%p upstream failed: %s", (void *)ic->c, reason);
	ic->fail_reason = reason;
	if (ic->qn > 0) {
		struct icpt_req *r = &ic->q[ic->qhead];

		r->status = status;
		r->action = "error";
		r->reason = reason;
		audit_request(ic, r);
		rule = NULL;
		ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
		ic->qn--;
	}
	snprintf(msg, sizeof(msg), "sluice: the upstream could not be reached "
	    "safely%s%s", detail ? ": " : "", detail ? detail : "");
	resp = deny_http(status, status == 504 ? "upstream-timeout" :
	    "bad-gateway", rule, reason, msg, &len);
	if (resp != NULL) {
		send_down(ic, resp, len);
		free(resp);
	}
	free(ic->refusal);
	ic->refusal = NULL;
	ic->hold = 1;
	ic->closing = 1;
	maybe_finish(ic);
}

static int
up_open(struct icpt *ic, const struct intercept_rule *rule)
{
	struct conn *c = ic->c;
	struct daemon *d = c->w->d;
	const struct config *cfg = worker_config(c->w);
	struct timeval tv = { cfg->timeouts.connect / 1000,
	    (cfg->timeouts.connect % 1000) * 1000 };
	struct timeval idle = { cfg->timeouts.idle / 1000,
	    (cfg->timeouts.idle % 1000) * 1000 };
	struct sockaddr_storage ss;
	char err[256];
	SSL_CTX *ctx;
	SSL *ssl = NULL;
	socklen_t len;

	if (c->updst.family == 0) {
		c->updst = c->dst;
		c->upport = c->dst_port;
	}
	snprintf(ic->up_ca, sizeof(ic->up_ca), "%s", rule->upstream_ca ?
	    rule->upstream_ca : "");
	/* An idle connection this sandbox verified for this host will do. */
	if ((ic->up = upool_get(c->w->upool, c->counter, c->name, c->upport,
	    ic->up_ca)) != NULL) {
		bufferevent_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb,
		    ic);
		bufferevent_set_timeouts(ic->up, &idle, &idle);
		bufferevent_setwatermark(ic->up, EV_WRITE, ICPT_HIGH / 2, 0);
		bufferevent_enable(ic->up, EV_READ | EV_WRITE);
		ic->up_state = UP_READY;
		c->upstream_used = 1;
		if (!pins_ok(ic)) {
			up_failed(ic, 502, "upstream-pin-mismatch", NULL);
			return -1;
		}
		return 0;
	}
	if (tlsup_ctx(d->tls_up, rule->upstream_ca, &ctx, err, sizeof(err)) != 0) {
		log_warnx("icpt", "%s", err);
		up_failed(ic, 502, "upstream-ca-unavailable", NULL);
		return -1;
	}
	if (tlsup_ssl_new(ctx, c->name, 0, &ssl) != 0) {
		up_failed(ic, 502, "upstream-tls-error", NULL);
		return -1;
	}
	ic->up = bufferevent_openssl_socket_new(c->w->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	if (ic->up == NULL) {
		SSL_free(ssl);
		up_failed(ic, 502, "upstream-tls-error", NULL);
		return -1;
	}
	bufferevent_setcb(ic->up, up_read_cb, up_write_cb, up_event_cb, ic);
	bufferevent_set_timeouts(ic->up, &tv, &tv);
	bufferevent_setwatermark(ic->up, EV_WRITE, ICPT_HIGH / 2, 0);
	len = addr_to_sockaddr(&c->updst, c->upport, &ss);
	ic->up_state = UP_CONNECTING;
	if (bufferevent_socket_connect(ic->up, (struct sockaddr *)&ss,
	    (int)len) != 0) {
		up_failed(ic, 502, "upstream-unreachable", NULL);
		return -1;
	}
	bufferevent_enable(ic->up, EV_READ | EV_WRITE);
	return 0;
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct icpt *ic = arg;
	struct conn *c = ic->c;
	const struct config *cfg = worker_config(c->w);
	struct timeval idle = { cfg->timeouts.idle / 1000,
	    (cfg->timeouts.idle % 1000) * 1000 };
	const struct http_resp_head *rh;
	const char *why;
	char reason[TLSUP_REASON_BUFSZ];
	unsigned long e;

	touch(ic);
	if (what & BEV_EVENT_CONNECTED) {
		/* Chain and name were verified in the handshake; the rest here. */
		if (tlsup_check_peer(bufferevent_openssl_get_ssl(bev), NULL, 0,
		    reason, sizeof(reason)) != 0) {
			up_failed(ic, 502, "upstream-cert-invalid", reason);
			return;
		}
		if (!pins_ok(ic)) {
			up_failed(ic, 502, "upstream-pin-mismatch", NULL);
			return;
		}
		ic->up_state = UP_READY;
		c->upstream_used = 1;
		bufferevent_set_timeouts(bev, &idle, &idle);
		/* Checked: what waited goes now. */
		evbuffer_add_buffer(bufferevent_get_output(bev), ic->held);
		return;
	}
	if (ic->up_state == UP_CONNECTING) {
		e = bufferevent_get_openssl_error(bev);
		tlsup_handshake_reason(bufferevent_openssl_get_ssl(bev), e,
		    reason, sizeof(reason));
		log_info("icpt", "%s: %s", c->name, reason);
		if (what & BEV_EVENT_TIMEOUT)
			up_failed(ic, 504, "upstream-timeout", NULL);
		else
			up_failed(ic, 502, strncmp(reason, "upstream-cert-invalid",
			    21) == 0 ? "upstream-cert-invalid" :
			    "upstream-unreachable", reason);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if (ic->qn > 0) {
			up_failed(ic, 504, "upstream-timeout", NULL);
			return;
		}
		conn_close(c, "idle-timeout");
		return;
	}
	/* EOF or error: a close-delimited answer ends here, anything else is cut. */
	pump_responses(ic);
	if (c->state == CS_CLOSED)
		return;
	if (http_resps_finish(ic->resps, &rh, &why) == HTTP_RESP_END &&
	    ic->qn > 0) {
		struct icpt_req *r = &ic->q[ic->qhead];

		audit_request(ic, r);
		ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
		ic->qn--;
	}
	bufferevent_free(ic->up);
	ic->up = NULL;
	ic->up_state = UP_NONE;
	if (ic->qn > 0) {
		up_failed(ic, 502, "upstream-closed", NULL);
		return;
	}
	if (ic->closing || ic->resp_close) {
		ic->closing = 1;
		maybe_finish(ic);
		return;
	}
	/* Nothing owed: the next request opens a new upstream connection. */
	if (ic->refusal != NULL) {
		release_refusal(ic);
		return;
	}
	ic->hold = 0;
	pump_requests(ic);
}

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	touch(ic);
	pump_responses(ic);
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
		pump_requests(ic);
}

/* ---- responses ------------------------------------------------------ */

static void
tunnel_down_to_up(struct icpt *ic)
{
	struct evbuffer *in = bufferevent_get_input(ic->down);
	size_t n = evbuffer_get_length(in);

	ic->from_sandbox += n;
	evbuffer_remove_buffer(in, up_out(ic), n);
	if (up_queued(ic) > ICPT_HIGH)
		bufferevent_disable(ic->down, EV_READ);
}

static void
pump_responses(struct icpt *ic)
{
	struct evbuffer *in, *out;
	const struct http_resp_head *rh;
	const char *why;
	enum http_resp_ev ev;
	struct icpt_req *r;
	size_t len, used;
	uint8_t *data;

	if (ic->up == NULL)
		return;
	in = bufferevent_get_input(ic->up);
	out = bufferevent_get_output(ic->down);
	/* A response whose head is read may end (or tunnel) without a byte. */
	while ((len = evbuffer_get_length(in)) > 0 || ic->resp_open) {
		if (evbuffer_get_length(out) > ICPT_HIGH) {
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
			maybe_finish(ic);
			return;
		}
		len = evbuffer_get_contiguous_space(in);
		data = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
		ev = http_resps_feed(ic->resps, data, len, &used, &rh, &why);
		ic->resp_open = ev == HTTP_RESP_HEAD || (ev == HTTP_RESP_NEED_MORE &&
		    ic->resp_open);
		r = ic->qn > 0 ? &ic->q[ic->qhead] : NULL;
		switch (ev) {
		case HTTP_RESP_NEED_MORE:	/* body bytes, as they are */
			ic->from_upstream += used;
			if (r != NULL)
				r->bytes_down += used;
			evbuffer_remove_buffer(in, out, used);
			if (used == 0)
				return;		/* more is to come */
			break;
		case HTTP_RESP_HEAD:
			ic->from_upstream += used;
			evbuffer_drain(in, used);
			send_down(ic, rh->out, rh->out_len);
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
			evbuffer_remove_buffer(in, out, used);
			if (r == NULL || ic->resp_info)
				break;		/* an informational answer ended */
			if (r->upgrade) {
				/* Refused by upstream: HTTP goes on as before. */
				http_reqs_upgrade_refused(ic->reqs);
				ic->upgrade_sent = 0;
				ic->hold = 0;
				bufferevent_enable(ic->down, EV_READ);
			}
			audit_request(ic, r);
			ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
			ic->qn--;
			if (ic->refusal != NULL && ic->qn == 0) {
				release_refusal(ic);	/* it was waiting for this */
				if (ic->c->state == CS_CLOSED || ic->closing)
					return;
			}
			if (ic->resp_close || r->close) {
				ic->closing = 1;
				maybe_finish(ic);
				return;
			}
			if (ic->c->state == CS_CLOSED)
				return;
			if (!ic->hold)
				pump_requests(ic);
			break;
		case HTTP_RESP_TUNNEL:
			/* 101: from here on both sides are one byte stream. */
			if (r == NULL || !r->upgrade) {
				up_failed(ic, 502, "upstream-malformed", NULL);
				return;
			}
			if (r != NULL) {
				audit_request(ic, r);
				ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
				ic->qn--;
			}
			ic->phase = IC_TUNNEL;
			bufferevent_enable(ic->down, EV_READ);
			tunnel_down_to_up(ic);
			break;
		case HTTP_RESP_INVALID:
			log_info("icpt", "%s: malformed answer: %s", ic->c->name,
			    why != NULL ? why : "?");
			evbuffer_drain(in, evbuffer_get_length(in));
			up_failed(ic, 502, "upstream-malformed", NULL);
			return;
		}
		if (ic->c->state == CS_CLOSED)
			return;
	}
}

/* ---- requests ------------------------------------------------------- */

/* An allowed head: re-serialised, queued for the upstream. */
static int
forward_head(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, const char *target)
{
	struct conn *c = ic->c;
	char *buf;
	long n;

	if (ic->qn == ICPT_MAX_PENDING ||
	    http_resps_expect(ic->resps, h->method) != 0) {
		refuse(ic, 400, "refused", "too-many-pipelined", NULL, 1);
		return -1;
	}
	if (ic->up != NULL && strcmp(ic->up_ca, rule->upstream_ca ?
	    rule->upstream_ca : "") != 0) {
		/* XXX one upstream connection a sandbox connection, for now. */
		refuse(ic, 502, "bad-gateway", "upstream-ca-conflict",
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
		pins_set(ic, rule);
		if (up_open(ic, rule) != 0) {
			ic->cur.status = 502;	/* up_open answered it */
			ic->cur.action = "error";
			ic->cur.reason = ic->fail_reason ? ic->fail_reason :
			    "upstream-failed";
			audit_request(ic, &ic->cur);
			return -1;
		}
	} else if (rule->npins > 0 && ic->up_state == UP_READY) {
		pins_set(ic, rule);
		if (!pins_ok(ic)) {
			refuse(ic, 502, "bad-gateway", "upstream-pin-mismatch",
			    "sluice: the upstream did not present a pinned key", 0);
			return -1;
		}
	}
	if ((buf = malloc(ICPT_HEAD_MAX)) == NULL) {
		conn_close(c, "out-of-memory");
		return -1;
	}
	n = http_head_serialize_upstream(h, target, c->name, c->dst_port,
	    h->upgrade, NULL, 0, NULL, 0, buf, ICPT_HEAD_MAX);
	if (n < 0) {
		free(buf);
		refuse(ic, 400, "refused", "header-too-large", NULL, 1);
		return -1;
	}
	evbuffer_add(up_out(ic), buf, (size_t)n);
	free(buf);
	ic->cur.upgrade = h->upgrade;
	ic->cur.close = !h->keep_alive;
	ic->last_request = ic->cur.close;
	ic->q[(ic->qhead + ic->qn) % ICPT_MAX_PENDING] = ic->cur;
	ic->qn++;
	ic->upgrade_sent = h->upgrade;
	return 0;
}

static void
pump_requests(struct icpt *ic)
{
	struct evbuffer *in;
	const struct intercept_rule *rule;
	const struct http_head *h;
	const char *why;
	enum http_ev ev;
	size_t len, used;
	uint8_t *data;
	char *target;

	if (ic->phase != IC_REQUESTS)
		return;
	in = bufferevent_get_input(ic->down);
	/*
	 * With no bytes left, one more feed while a request is open: a
	 * bodiless request's END comes without a byte.
	 */
	while (!ic->hold && ((len = evbuffer_get_length(in)) > 0 ||
	    ic->body != BODY_NONE || ic->expect_tunnel)) {
		if (ic->up != NULL && up_queued(ic) > ICPT_HIGH)
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
				evbuffer_remove_buffer(in, up_out(ic), used);
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
			if ((target = malloc(ICPT_PATH_MAX * 2)) == NULL) {
				conn_close(ic->c, "out-of-memory");
				return;
			}
			ic->expect_tunnel = h->upgrade || h->is_connect;
			ic->upgrade_sent = 0;
			rule = judge(ic, h, target, ICPT_PATH_MAX * 2);
			if (rule != NULL && forward_head(ic, h, rule, target) == 0)
				ic->body = BODY_FORWARD;
			else
				ic->body = BODY_DISCARD;
			free(target);
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
				maybe_finish(ic);
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
				audit_request(ic, bad);
				ic->qn--;
				ic->resp_close = 1;
			}
			ic->body = BODY_NONE;
			memset(&ic->cur, 0, sizeof(ic->cur));
			ic->cur.start_ms = now_ms();
			snprintf(ic->cur.method, sizeof(ic->cur.method), "-");
			refuse(ic, 400, "refused", strcmp(why ? why : "",
			    "header too large") == 0 ? "header-too-large" :
			    "bad-request", why, 1);
			return;
		}
		if (ic->c->state == CS_CLOSED)
			return;
	}
	if (ic->up != NULL && up_queued(ic) > ICPT_HIGH)
		bufferevent_disable(ic->down, EV_READ);
}

/* ---- the sandbox's callbacks ---------------------------------------- */

static void
down_read_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	if (ic->starting)
		return;		/* icpt_start reads when it is done */
	touch(ic);
	if (ic->phase == IC_TUNNEL) {
		tunnel_down_to_up(ic);
		return;
	}
	pump_requests(ic);
}

/* The sandbox took what we queued. */
static void
down_write_cb(struct bufferevent *bev, void *arg)
{
	struct icpt *ic = arg;

	if (ic->starting)
		return;
	if (ic->closing) {
		maybe_finish(ic);
		return;
	}
	if (ic->up != NULL)
		bufferevent_enable(ic->up, EV_READ);
	pump_responses(ic);
}

static void
down_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct icpt *ic = arg;
	struct conn *c = ic->c;
	const struct config *cfg = worker_config(c->w);

	if (ic->starting) {
		ic->start_events |= what;	/* icpt_start handles them */
		return;
	}
	touch(ic);
	if (what & BEV_EVENT_CONNECTED) {
		ic->phase = IC_REQUESTS;
		evtimer_del(c->timer);
		conn_arm_timer(c, cfg->timeouts.idle);
		pump_requests(ic);
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
	r = tlsterm_ssl_new(c->w->d->tls_down, lc, c->name, mint_leaf,
	    c->counter, ca, &ssl);
	X509_free(ca);
	if (r != 0) {
		log_warnx("icpt", "cannot make a certificate for %s: %s",
		    c->name, err_str(r));
		return r;
	}
	ic->down = bufferevent_openssl_filter_new(c->w->base, ic->under, ssl,
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
	const struct config *cfg = worker_config(c->w);
	int tls = c->proto == SNIFF_TLS, r;
	struct icpt *ic;

	if (c->counter == NULL) {
		conn_deny(c, "no-sandbox-ca", c->dec.rule);
		return;
	}
	if ((ic = calloc(1, sizeof(*ic))) == NULL ||
	    (ic->reqs = http_reqs_new(cfg->limits.header_bytes)) == NULL ||
	    (ic->resps = http_resps_new(cfg->limits.header_bytes)) == NULL ||
	    (ic->finish = event_new(c->w->base, -1, 0, finish_cb, ic)) == NULL ||
	    (ic->held = evbuffer_new()) == NULL) {
		icpt_free(ic);
		conn_close(c, "out-of-memory");
		return;
	}
	ic->c = c;
	ic->under = bufferevent_socket_new(c->w->base, c->down.fd,
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

void
icpt_free(struct icpt *ic)
{
	if (ic == NULL)
		return;
	/* Answers never completed still get their record. */
	while (ic->qn > 0) {
		ic->q[ic->qhead].action = "incomplete";
		ic->q[ic->qhead].reason = "connection-closed";
		audit_request(ic, &ic->q[ic->qhead]);
		ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
		ic->qn--;
	}
	if (ic->up != NULL && ic->up_state == UP_READY &&
	    ic->phase == IC_REQUESTS && ic->qn == 0 && !ic->resp_close &&
	    ic->body != BODY_FORWARD && http_resps_pending(ic->resps) == 0 &&
	    evbuffer_get_length(bufferevent_get_input(ic->up)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(ic->up)) == 0) {
		/* Between requests: the next connection of this sandbox takes it. */
		upool_put(ic->c->w->upool, ic->up, ic->c->counter, ic->c->name,
		    ic->c->upport, ic->up_ca);
		ic->up = NULL;
	}
	if (ic->up != NULL)
		bufferevent_free(ic->up);
	if (ic->down != NULL)
		bufferevent_free(ic->down);
	if (ic->finish != NULL)
		event_free(ic->finish);
	if (ic->under != NULL)
		bufferevent_free(ic->under);
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
icpt_bytes(const struct icpt *ic, uint64_t *from_sandbox,
    uint64_t *from_upstream)
{
	*from_sandbox = ic->from_sandbox;
	*from_upstream = ic->from_upstream;
}

void
icpt_timer(struct conn *c)
{
	const struct config *cfg = worker_config(c->w);
	struct icpt *ic = c->icpt;
	uint64_t idle;

	if (ic->phase == IC_HANDSHAKE) {
		conn_close(c, "handshake-timeout");
		return;
	}
	idle = now_ms() - c->last_active;
	if (idle >= cfg->timeouts.idle) {
		conn_close(c, "idle-timeout");
		return;
	}
	conn_arm_timer(c, cfg->timeouts.idle - (unsigned)idle);
}
