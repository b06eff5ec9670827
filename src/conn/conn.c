/*
 * conn.c: one sandbox connection, read top to bottom: accept, sniff the
 * first bytes, decide, check that the name owns the address, connect, relay,
 * close.  conn_step() resumes after every asynchronous completion.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "parse/httphead.h"
#include "conf/config.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "dns/dnsmem.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/icpt.h"
#include "conn/relay.h"

#define PEEK_INITIAL	2048
#define DENY_LINGER_MS	3000	/* a refusal's flush, and earlier answers */

static const char *const state_names[] = {
	[CS_NEW] = "new", [CS_PROXY_HEAD] = "proxy-head", [CS_SNIFF] = "sniff",
	[CS_RESOLVE] = "resolve", [CS_CONNECT] = "connect",
	[CS_RELAY] = "relay", [CS_ICPT] = "intercept", [CS_DENY] = "deny",
	[CS_CLOSED] = "closed",
};

static const char *const proto_names[] = {
	[SNIFF_TLS] = "tls", [SNIFF_HTTP] = "http", [SNIFF_OPAQUE] = "opaque",
};

static void conn_read_cb(evutil_socket_t, short, void *);
static void conn_write_cb(evutil_socket_t, short, void *);
static void conn_timer_cb(evutil_socket_t, short, void *);
static void conn_connect(struct conn *c);

void
conn_set_state(struct conn *c, enum conn_state s)
{
	if (log_level() >= LOG_LVL_DEBUG)
		log_debug("conn", "%p %s -> %s", (void *)c,
		    state_names[c->state], state_names[s]);
	c->state = s;
}

void
conn_arm_timer(struct conn *c, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

unsigned
conn_next_wake(const struct conn *c, uint64_t now)
{
	uint64_t idle_at = c->last_active + c->l->cfg->timeouts.idle;
	uint64_t at = idle_at;

	if (c->head_deadline != 0 && c->head_deadline < at)
		at = c->head_deadline;
	if (c->wake_at != 0 && c->wake_at < at)
		at = c->wake_at;
	return at > now ? (unsigned)(at - now) : 0;
}

void
conn_head_started(struct conn *c)
{
	uint64_t now;

	if (c->head_deadline != 0)
		return;
	now = mono_ms();
	c->head_deadline = now + c->l->cfg->timeouts.handshake;
	conn_arm_timer(c, conn_next_wake(c, now));
}

int
conn_half_init(struct conn *c, struct half *h, int fd)
{
	struct event_base *base = c->l->base;
	int one = 1;

	/*
	 * We relay whatever arrives at once: Nagle would hold a small write
	 * for the peer's delayed ACK, tens of milliseconds a round trip.
	 */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	h->fd = fd;
	h->rev = event_new(base, fd, EV_READ | EV_PERSIST, conn_read_cb, h);
	h->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, conn_write_cb, h);
	return h->rev != NULL && h->wev != NULL ? 0 : SL_ERR_NOMEM;
}

/* The original destination of a redirected connection. */
static int
original_dst(struct conn *c, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int r;

	if (c->src.family == AF_INET)
		r = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len);
	else
		r = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len);
	if (r == -1)
		return SL_ERR_IO;
	return addr_from_sockaddr((struct sockaddr *)&ss, len, &c->dst,
	    &c->dst_port);
}

/* The connection's first verdict: how long the handshake and the decision took. */
static void
conn_observe_verdict(struct conn *c)
{
	uint64_t now, start;

	if (c->observed || c->judging_us == 0)
		return;
	c->observed = 1;
	now = mono_us();
	start = (uint64_t)c->started.tv_sec * 1000000u +
	    (uint64_t)c->started.tv_nsec / 1000u;
	mhist_observe(&c->l->metrics.handshake, now - start);
	mhist_observe(&c->l->metrics.decision, now - c->judging_us);
}

void
conn_take_state(struct conn *c)
{
	struct sl_addr src;

	if (c->st != c->l->st) {
		/* c->dec.rule points into the snapshot we are about to drop. */
		c->dec.rule = NULL;
		state_unref(c->st);
		c->st = state_ref(c->l->st);
	}
	addr_canonical(&c->src, &src);
	c->sb = state_sandbox_for(c->st, &src);
	c->pol = c->sb->policy;
	snprintf(c->policy_name, sizeof(c->policy_name), "%s", c->pol->name);
	c->policy_rev = c->pol->revision;
}

static void
conn_reject_now(struct loop *l, int fd)
{
	struct linger lg = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

struct conn *
conn_new(struct loop *l, int fd, enum listener_kind kind)
{
	struct conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		conn_reject_now(l, fd);
		return NULL;
	}
	c->l = l;
	c->kind = kind;
	c->proto = -1;
	c->down.c = c->up.c = c;
	c->down.peer = &c->up;
	c->up.peer = &c->down;
	c->down.name = "down";
	c->up.name = "up";
	c->up.fd = c->up.pipe[0] = c->up.pipe[1] = -1;
	c->down.pipe[0] = c->down.pipe[1] = -1;
	clock_gettime(CLOCK_MONOTONIC, &c->started);
	c->last_active = mono_ms();
	TAILQ_INSERT_TAIL(&l->conns, c, link);
	l->nconns++;

	if (conn_half_init(c, &c->down, fd) != 0 ||
	    (c->timer = evtimer_new(l->base, conn_timer_cb, c)) == NULL) {
		if (c->down.fd == -1)
			close(fd);
		conn_close(c, "out-of-memory");
		return NULL;
	}
	return c;
}

void
conn_accept(struct loop *l, int fd, enum listener_kind kind)
{
	const struct config *cfg = l->cfg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct conn *c;

	if ((c = conn_new(l, fd, kind)) == NULL)
		return;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == -1 ||
	    addr_from_sockaddr((struct sockaddr *)&ss, len, &c->src,
	    &c->src_port) != 0) {
		conn_close(c, "no-peer-address");
		return;
	}
	if (kind == LISTEN_TRANSPARENT && original_dst(c, fd) != 0) {
		conn_close(c, "no-original-destination");
		return;
	}
	conn_take_state(c);
	c->counter = c->sb->counter;
	atomic_fetch_add(&c->counter->refs, 1);
	if (atomic_fetch_add(&c->counter->conns, 1) >= cfg->limits.connections) {
		struct linger lg = { 1, 0 };

		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		c->dec.verdict = VERDICT_DENY;
		conn_close(c, "connection-limit");
		return;
	}
	conn_set_state(c, kind == LISTEN_PROXY ? CS_PROXY_HEAD : CS_SNIFF);
	conn_arm_timer(c, kind == LISTEN_PROXY ? cfg->timeouts.handshake :
	    cfg->timeouts.first_byte);
	half_want_read(&c->down, 1);
}

/* Reads more of the client's first bytes into the peek buffer. */
int
conn_peek_read(struct conn *c, size_t cap)
{
	uint8_t *n;
	size_t want;
	ssize_t got;

	if (c->peeklen == c->peekcap) {
		want = c->peekcap ? c->peekcap * 2 : PEEK_INITIAL;
		if (want > cap)
			want = cap;
		if (want <= c->peeklen)
			return SL_ERR_TOO_BIG;
		if ((n = realloc(c->peek, want)) == NULL)
			return SL_ERR_NOMEM;
		c->peek = n;
		c->peekcap = want;
	}
	got = read(c->down.fd, c->peek + c->peeklen, c->peekcap - c->peeklen);
	if (got == -1)
		return errno == EAGAIN || errno == EINTR ? 1 : SL_ERR_IO;
	if (got == 0)
		return SL_ERR_NOT_FOUND;	/* end of stream */
	c->peeklen += (size_t)got;
	c->down.bytes += (uint64_t)got;
	return 0;
}

/*
 * Observe mode: a denial that only says no rule allows it yet is recorded
 * as would_deny and let through, the name still bound to the address.
 * Deny rules, forbidden and private addresses, the binding, limits and
 * every malformed input stay refused.
 */
static void
observe_apply(struct conn *c, struct decision *d)
{
	c->observing = sandbox_observing(c->sb, time(NULL));
	if (d->verdict != VERDICT_DENY || !c->observing ||
	    (strcmp(d->reason, "not-allowed") != 0 &&
	    strcmp(d->reason, "no-cidr-rule") != 0 &&
	    strcmp(d->reason, "no-sni") != 0))
		return;
	c->would_deny = d->reason;
	d->verdict = VERDICT_PASS;
	d->reason = "observe";
	d->rule = NULL;
	d->need_binding = c->name[0] != '\0';
}

static void
conn_decide_named(struct conn *c)
{
	policy_check_name(c->pol, c->name, &c->dst, c->dst_port, &c->dec);
}

/*
 * Decisions 1-6 of SPEC for the connection's first bytes.  c->proto and
 * c->name (may be "") are set; the result is a refusal, a connect, or a
 * name-to-address check first.
 */
int
conn_dest_refused(struct conn *c)
{
	struct sl_addr dst;

	addr_canonical(&c->dst, &dst);
	if (state_is_own_addr(c->st, &dst)) {
		conn_deny(c, "forbidden-address", NULL);
		return 1;
	}
	policy_check_dest(c->pol, &c->dst, c->dst_port, &c->dec);
	if (c->dec.verdict == VERDICT_DENY) {
		conn_deny(c, c->dec.reason, c->dec.rule);
		return 1;
	}
	return 0;
}

void
conn_decided(struct conn *c)
{
	if (c->judging_us == 0)
		c->judging_us = mono_us();
	conn_take_state(c);
	if (conn_dest_refused(c))
		return;
	if (c->tunnel && c->name[0] != '\0' && !c->authority_is_ip &&
	    strcmp(c->name, c->authority) != 0) {
		conn_deny(c, "identity-mismatch", NULL);
		return;
	}
	if (c->name[0] != '\0')
		conn_decide_named(c);
	else {
		policy_check_opaque(c->pol, &c->dst, c->dst_port, &c->dec);
		if (c->dec.verdict == VERDICT_DENY && c->proto == SNIFF_TLS &&
		    strcmp(c->dec.reason, "no-cidr-rule") == 0)
			c->dec.reason = "no-sni";
	}
	c->would_deny = NULL;
	observe_apply(c, &c->dec);
	switch (c->dec.verdict) {
	case VERDICT_PASS:
		break;
	case VERDICT_INTERCEPT:
		if (c->state == CS_RELAY || (c->kind == LISTEN_PROXY &&
		    !c->tunnel)) {
			/*
			 * XXX a later request of a passed-through connection,
			 * or an explicit-proxy request, to an intercepted host
			 * cannot switch to interception: refused.
			 */
			conn_deny(c, "interception-unavailable", c->dec.rule);
			return;
		}
		break;
	default:
		conn_deny(c, c->dec.reason, c->dec.rule);
		return;
	}
	/* Through the explicit proxy we resolved the authority ourselves. */
	if (c->kind == LISTEN_PROXY && !c->authority_is_ip &&
	    strcmp(c->name, c->authority) == 0)
		c->dec.need_binding = 0;
	if (c->dec.need_binding) {
		if (c->state == CS_RELAY) {
			c->http_hold = 1;	/* a later request waits */
			conn_resolve(c, c->name);
		} else {
			conn_set_state(c, CS_RESOLVE);
			conn_step(c);
		}
		return;
	}
	conn_proceed(c);
}

/* Allowed: connect, or let a later request of a kept-alive connection go. */
void
conn_proceed(struct conn *c)
{
	conn_observe_verdict(c);
	if (c->state == CS_RELAY && c->http != NULL)
		conn_http_allowed(c);
	else if (c->dec.verdict == VERDICT_INTERCEPT)
		icpt_start(c);
	else
		conn_connect(c);
}

static void binding_cb(int err, const struct resolve_answer *ans, void *arg);

/* Decision 4's last clause: the name must own the original destination. */
static void
binding_check(struct conn *c, int err, const struct resolve_answer *ans,
    int cached)
{
	struct sl_addr dst;
	int r;

	if (err != 0) {
		conn_deny(c, "resolve-failed", c->dec.rule);
		return;
	}
	addr_canonical(&c->dst, &dst);
	if (resolve_answer_has(ans, &dst)) {
		conn_proceed(c);
		return;
	}
	if (cached && !c->fresh_tried) {
		/* The name may have moved since we cached it: ask again once. */
		c->fresh_tried = 1;
		r = resolve_name(c->l->res, c->name, RESOLVE_FRESH, NULL,
		    binding_cb, c, &c->rreq);
		if (r == 1)
			return;
	}
	conn_deny(c, "destination-mismatch", c->dec.rule);
}

static void
binding_cb(int err, const struct resolve_answer *ans, void *arg)
{
	struct conn *c = arg;

	c->rreq = NULL;
	if (c->state == CS_PROXY_HEAD)
		conn_proxy_resolved(c, err, ans);
	else
		binding_check(c, err, ans, 0);
}

/* Whether the DNS filter told this sandbox that c->name has c->dst. */
static int
dns_told(struct conn *c)
{
	struct sl_addr dst;

	addr_canonical(&c->dst, &dst);
	return dnsmem_has(c->l->dnsmem, c->sb->id ? c->sb->id : "",
	    c->name, &dst, mono_s());
}

/* Looks name up; the answer resumes the connection in its current state. */
void
conn_resolve(struct conn *c, const char *name)
{
	struct resolve_answer ans;
	int r;

	c->fresh_tried = 0;
	if (c->state != CS_PROXY_HEAD && dns_told(c)) {
		conn_proceed(c);	/* our DNS filter gave it this address */
		return;
	}
	r = resolve_name(c->l->res, name, 0, &ans, binding_cb, c, &c->rreq);
	if (r == 1)
		return;		/* binding_cb resumes */
	if (c->state == CS_PROXY_HEAD)
		conn_proxy_resolved(c, r, &ans);
	else if (r == 0)
		binding_check(c, 0, &ans, 1);
	else
		conn_deny(c, "resolve-failed", c->dec.rule);
}

/* CS_SNIFF: what are the first bytes, and what do they name? */
static void
step_sniff(struct conn *c)
{
	const struct config *cfg = c->l->cfg;
	enum sniff_proto p;
	size_t cap, had;
	int r;

	cap = cfg->limits.client_hello_bytes > cfg->limits.header_bytes ?
	    cfg->limits.client_hello_bytes : cfg->limits.header_bytes;
	had = c->peeklen;
	if ((r = conn_peek_read(c, cap)) == 1 && c->peeklen == 0)
		return;
	if (r == SL_ERR_NOT_FOUND) {
		conn_close(c, "client-closed");
		return;
	}
	if (r == SL_ERR_IO || r == SL_ERR_NOMEM) {
		conn_close(c, r == SL_ERR_IO ? "read-error" : "out-of-memory");
		return;
	}
	if (c->proto == -1 && had == 0 && c->peeklen > 0) {
		/*
		 * The first bytes arrived: the first-byte wait becomes the
		 * handshake limit, counted from them (not from each later byte).
		 */
		conn_arm_timer(c, cfg->timeouts.handshake);
	}
	if (sniff_proto(c->peek, c->peeklen, &p) == PARSE_NEED_MORE) {
		if (r == SL_ERR_TOO_BIG)
			conn_deny(c, "first-bytes-too-large", NULL);
		return;
	}
	c->proto = (int)p;
	switch (p) {
	case SNIFF_TLS:
		r = tls_clienthello_parse(c->peek, c->peeklen,
		    cfg->limits.client_hello_bytes, &c->hello);
		if (r == PARSE_NEED_MORE)
			return;
		if (r != PARSE_COMPLETE) {
			conn_deny(c, r == PARSE_TOO_BIG ? "client-hello-too-large" :
			    "bad-client-hello", NULL);
			return;
		}
		snprintf(c->name, sizeof(c->name), "%s", c->hello.sni);
		conn_decided(c);
		return;
	case SNIFF_HTTP:
		conn_http_first(c);
		return;
	case SNIFF_OPAQUE:
		c->name[0] = '\0';
		conn_decided(c);
		return;
	}
}

void
conn_step(struct conn *c)
{
	switch (c->state) {
	case CS_PROXY_HEAD:
		conn_proxy_read_head(c);
		break;
	case CS_SNIFF:
		step_sniff(c);
		break;
	case CS_RESOLVE:
		conn_resolve(c, c->name);
		break;
	default:
		break;
	}
}

static void
conn_connect(struct conn *c)
{
	const struct config *cfg = c->l->cfg;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	if (c->updst.family == 0) {
		c->updst = c->dst;
		c->upport = c->dst_port;
	}
	len = addr_to_sockaddr(&c->updst, c->upport, &ss);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		conn_close(c, "socket-failed");
		return;
	}
	if (conn_half_init(c, &c->up, fd) != 0) {
		conn_close(c, "out-of-memory");
		return;
	}
	half_want_read(&c->down, 0);	/* nothing more until we relay */
	conn_set_state(c, CS_CONNECT);
	if (connect(fd, (struct sockaddr *)&ss, len) == -1 &&
	    errno != EINPROGRESS) {
		conn_deny(c, "upstream-unreachable", c->dec.rule);
		return;
	}
	conn_arm_timer(c, cfg->timeouts.connect);
	half_want_write(&c->up, 1);
}

/* The upstream socket is writable: connected, or failed. */
static void
connect_done(struct conn *c)
{
	const struct config *cfg = c->l->cfg;
	int err = 0;
	socklen_t len = sizeof(err);

	half_want_write(&c->up, 0);
	if (getsockopt(c->up.fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 ||
	    err != 0) {
		errno = err;
		conn_deny(c, "upstream-unreachable", c->dec.rule);
		return;
	}
	c->upstream_used = 1;
	evtimer_del(c->timer);
	conn_arm_timer(c, cfg->timeouts.idle);
	if (c->http != NULL) {
		if (relay_start(c) != 0) {
			conn_close(c, "pipe-failed");
			return;
		}
		conn_http_init_relay(c);
		return;
	}
	/* Replay what we peeked; ownership moves to the upstream queue. */
	if (c->peeklen > 0 &&
	    half_send_owned(&c->up, c->peek, c->peeklen) != 0) {
		c->peek = NULL;
		conn_close(c, "out-of-memory");
		return;
	}
	c->peek = NULL;		/* transferred */
	c->peeklen = c->peekcap = 0;
	if (relay_start(c) != 0) {
		conn_close(c, "pipe-failed");
		return;
	}
	/* A reload while we resolved or connected: judge again under it. */
	if (c->state == CS_RELAY && c->st != c->l->st)
		conn_rejudge(c);
}

void
conn_deny(struct conn *c, const char *reason, const char *rule)
{
	struct linger lg = { 1, 0 };
	char *resp;
	size_t len;
	int status = 403;

	c->dec.verdict = VERDICT_DENY;
	c->dec.reason = reason;
	c->dec.rule = rule;
	conn_observe_verdict(c);
	if (strcmp(reason, "upstream-unreachable") == 0)
		status = 502;
	else if (strcmp(reason, "upstream-timeout") == 0)
		status = 504;
	else if (strncmp(reason, "bad-request", 11) == 0 ||
	    strcmp(reason, "header-too-large") == 0)
		status = 400;
	resolve_cancel(c->rreq);
	c->rreq = NULL;
	if (c->http != NULL)
		conn_http_audit(c, "deny", reason, rule);
	if (c->up.fd != -1 && c->state != CS_RELAY) {
		half_reset(&c->up);	/* nothing was sent upstream */
	}
	if (c->proto == SNIFF_TLS && c->state != CS_RELAY &&
	    strncmp(reason, "upstream-", 9) != 0) {
		conn_set_state(c, CS_DENY);
		half_send(&c->down, deny_tls_alert, DENY_TLS_ALERT_LEN);
	} else if (c->proto == SNIFF_HTTP ||
	    (c->kind == LISTEN_PROXY && !c->tunnel)) {
		/*
		 * A later request: the ones before it still go, upstream
		 * answers them and sees our end of stream, and the refusal
		 * follows its last byte (relay.c, deny_flush).
		 */
		conn_set_state(c, CS_DENY);
		struct deny_what dw = { status, status == 403 ? "denied" :
		    "refused", c->name, c->policy_name, rule, reason,
		    c->detail != NULL ? c->detail : status == 403 ?
		    "sluice: this request is not allowed by the sandbox's egress "
		    "policy; other routes to it are blocked too" :
		    "sluice: the request could not be forwarded", NULL, NULL,
		    NULL, 0 };

		resp = deny_http(&dw, 0, &len);
		if (resp == NULL || half_send_owned(&c->down, resp, len) != 0) {
			conn_close(c, reason);
			return;
		}
	} else {
		/* Opaque TCP (or TLS mid-stream): a reset says it all. */
		setsockopt(c->down.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		conn_close(c, reason);
		return;
	}
	c->close_reason = reason;
	evtimer_del(c->timer);
	conn_arm_timer(c, DENY_LINGER_MS);	/* bounded time to flush the refusal */
	half_want_read(&c->down, 1);	/* drain, so close does not reset */
	if (c->up.fd != -1)
		relay_flush(&c->up);
	relay_flush(&c->down);
}

/* In a refusal the client's further bytes are read and dropped. */
static void
deny_drain(struct conn *c)
{
	uint8_t buf[4096];
	ssize_t n;

	n = read(c->down.fd, buf, sizeof(buf));
	if (n == -1 && errno != EAGAIN && errno != EINTR) {
		conn_close(c, c->close_reason);
		return;
	}
	if (n != 0)
		return;
	/* The client is done sending; what we owe it still goes out. */
	c->down.eof = 1;
	half_want_read(&c->down, 0);
	if (c->down.shut)
		conn_close(c, c->close_reason);
}

static void
conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct half *h = arg;
	struct conn *c = h->c;

	c->last_active = mono_ms();
	switch (c->state) {
	case CS_PROXY_HEAD:
	case CS_SNIFF:
		if (h == &c->down)
			conn_step(c);
		break;
	case CS_RELAY:
		relay_on_read(h);
		break;
	case CS_DENY:
		if (h == &c->down)
			deny_drain(c);
		else
			relay_on_read(h);	/* answers to earlier requests */
		break;
	default:
		half_want_read(h, 0);
		break;
	}
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct half *h = arg;
	struct conn *c = h->c;

	if (c->state == CS_CONNECT && h == &c->up) {
		connect_done(c);
		return;
	}
	relay_flush(h);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	const struct config *cfg = c->l->cfg;
	uint64_t idle, now;

	switch (c->state) {
	case CS_SNIFF:
		if (c->peeklen == 0 && c->proto == -1) {
			/*
			 * A silent client (server speaks first): opaque, and its
			 * first bytes must prove it (relay.c checks them).
			 */
			c->proto = SNIFF_OPAQUE;
			c->late_sniff = 1;
			conn_arm_timer(c, cfg->timeouts.handshake);
			conn_decided(c);
			return;
		}
		conn_close(c, "handshake-timeout");
		return;
	case CS_PROXY_HEAD:
	case CS_RESOLVE:
		conn_close(c, "handshake-timeout");
		return;
	case CS_CONNECT:
		conn_deny(c, "upstream-timeout", c->dec.rule);
		return;
	case CS_RELAY:
		now = mono_ms();
		if (c->head_deadline != 0 && now >= c->head_deadline) {
			conn_close(c, "handshake-timeout");
			return;
		}
		idle = now - c->last_active;
		if (idle >= cfg->timeouts.idle) {
			conn_close(c, "idle-timeout");
			return;
		}
		conn_arm_timer(c, conn_next_wake(c, now));
		return;
	case CS_ICPT:
		icpt_timer(c);
		return;
	case CS_DENY:
		if (c->up.fd != -1 && !c->up.eof) {
			/* Upstream kept quiet too long: refuse now, then close. */
			c->up.eof = 1;
			half_want_read(&c->up, 0);
			conn_arm_timer(c, DENY_LINGER_MS);
			relay_flush(&c->down);
			return;
		}
		conn_close(c, c->close_reason);
		return;
	default:
		conn_close(c, c->close_reason ? c->close_reason : "timeout");
		return;
	}
}

static void
conn_audit(struct conn *c, const char *reason)
{
	char src[ADDR_STRLEN], dst[ADDR_STRLEN], up[ADDR_STRLEN + 8];
	struct timespec now;
	struct arec rec;
	long ms;
	int icpt = c->dec.verdict == VERDICT_INTERCEPT;
	int pass = (c->dec.verdict == VERDICT_PASS || icpt) &&
	    c->close_reason == NULL;
	const char *action = pass ? (icpt ? "intercept" : "pass") :
	    c->dec.verdict == VERDICT_DENY || c->close_reason != NULL ? "deny" :
	    "none";

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (now.tv_sec - c->started.tv_sec) * 1000 +
	    (now.tv_nsec - c->started.tv_nsec) / 1000000;
	addr_format(&c->src, src, sizeof(src));
	addr_format(&c->dst, dst, sizeof(dst));
	up[0] = '\0';
	if (c->updst.family != 0 && c->upstream_used) {
		char a[ADDR_STRLEN];

		addr_format(&c->updst, a, sizeof(a));
		snprintf(up, sizeof(up), c->updst.family == AF_INET6 ?
		    "[%s]:%u" : "%s:%u", a, c->upport);
	}
	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name[0] ? c->policy_name : NULL);
	arec_int(&rec, "revision", (int64_t)c->policy_rev);
	arec_str(&rec, "listener", c->kind == LISTEN_PROXY ? "proxy" :
	    "transparent");
	arec_str(&rec, "src", src);
	arec_int(&rec, "src_port", c->src_port);
	arec_str(&rec, "dst", c->dst.family ? dst : NULL);
	arec_int(&rec, "dst_port", c->dst_port);
	arec_str(&rec, "proto", c->proto >= 0 ? proto_names[c->proto] : NULL);
	arec_str(&rec, "sni", c->proto == SNIFF_TLS && c->hello.has_sni ?
	    c->hello.sni : NULL);
	arec_str(&rec, "host", c->proto == SNIFF_HTTP && c->name[0] ?
	    c->name : NULL);
	arec_str(&rec, "action", action);
	arec_str(&rec, "reason", pass ? c->dec.reason : reason);
	arec_str(&rec, "rule", c->dec.rule);
	if (c->would_deny != NULL)
		arec_str(&rec, "would_deny", c->would_deny);
	if (c->observing)
		arec_bool(&rec, "observe", 1);
	arec_str(&rec, "upstream", up[0] ? up : NULL);
	arec_int(&rec, "bytes_up", (int64_t)c->down.bytes);
	arec_int(&rec, "bytes_down", (int64_t)c->up.bytes);
	arec_int(&rec, "duration_ms", ms);
	if (pass)
		arec_str(&rec, "close", reason);
	/*
	 * ECH hides the real name behind the one we judged.  Browsers send a
	 * GREASE ECH extension that looks the same, so it is recorded, not
	 * refused; the DNS filter withholds real ECH configurations.
	 */
	if (c->proto == SNIFF_TLS && c->hello.has_ech)
		arec_bool(&rec, "ech", 1);
	if (c->detail != NULL)
		arec_str(&rec, "detail", c->detail);
	if (c->kind == LISTEN_PROXY && c->authority[0])
		arec_str(&rec, "authority", c->authority);
	if (c->counter != NULL)
		recent_add(&c->counter->recent, "conn", &rec);
	audit_write_rec(c->l->audit, "conn", &rec);
	mtable_add(&c->l->metrics.conns, action, pass ? c->dec.reason : reason);
	if (c->counter != NULL) {
		atomic_fetch_add(&c->counter->conns_total, 1);
		if (!pass)
			atomic_fetch_add(&c->counter->denied_total, 1);
	}
}

static void
conn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	icpt_free(c->icpt);	/* closes the sandbox's socket */
	free(c);
}

void
conn_close(struct conn *c, const char *reason)
{
	struct loop *l = c->l;

	if (c->state == CS_CLOSED)
		return;
	if (c->close_reason != NULL && c->state == CS_DENY)
		reason = c->close_reason;
	if (c->icpt != NULL) {
		icpt_bytes(c->icpt, &c->down.bytes, &c->up.bytes);
		icpt_close(c->icpt);	/* freed with c, next turn */
	}
	conn_audit(c, reason);
	log_debug("conn", "%p closed: %s", (void *)c, reason);
	conn_set_state(c, CS_CLOSED);
	resolve_cancel(c->rreq);
	c->rreq = NULL;
	/* Empty pipes serve the loop's next relays. */
	loop_pipe_put(c->l, c->down.pipe);
	loop_pipe_put(c->l, c->up.pipe);
	half_reset(&c->down);
	half_reset(&c->up);
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = NULL;
	free(c->peek);
	free(c->hbuf);
	http_reqs_free(c->http);
	c->peek = c->hbuf = NULL;
	c->http = NULL;
	if (c->counter != NULL) {
		atomic_fetch_sub(&c->counter->conns, 1);
		sb_counter_unref(c->counter);
		c->counter = NULL;
	}
	state_unref(c->st);
	c->st = NULL;
	TAILQ_REMOVE(&l->conns, c, link);
	l->nconns--;
	/* Freed on the next loop turn: our callers may still hold c. */
	event_base_once(l->base, -1, EV_TIMEOUT, conn_free_cb, c, NULL);
	loop_conn_gone(l);
}

/* The verdict the connection's policy gives its destination and name now. */
static void
conn_decide_again(struct conn *c, struct decision *d)
{
	policy_check_dest(c->pol, &c->dst, c->dst_port, d);
	if (d->verdict != VERDICT_CONTINUE)
		return;
	if (c->name[0] != '\0')
		policy_check_name(c->pol, c->name, &c->dst, c->dst_port, d);
	else
		policy_check_opaque(c->pol, &c->dst, c->dst_port, d);
}

/*
 * After a snapshot swap (w->st is the new one).  A connection of a sandbox
 * that is gone, or whose source another sandbox owns now, is closed; one
 * whose policy object did not change moves to the new snapshot as it is;
 * the rest keep going only if the new policy would decide the same again.
 */
void
conn_rejudge(struct conn *c)
{
	const struct sandbox *sb;
	struct sl_addr src;
	struct decision d;
	const char *why, *prev;

	if (c->state == CS_CLOSED || c->counter == NULL)
		return;
	addr_canonical(&c->src, &src);
	sb = state_sandbox_for(c->l->st, &src);
	if (sb->counter != c->counter) {
		if (c->sb->id != NULL && state_sandbox(c->l->st, c->sb->id) == NULL)
			c->close_reason = "sandbox-deleted";
		else
			c->close_reason = "sandbox-changed";
		c->dec.verdict = VERDICT_DENY;
		conn_close(c, c->close_reason);
		return;
	}
	/* Let through by observe mode only: judged again once it ends. */
	if (sb->policy == c->pol && (c->would_deny == NULL ||
	    sandbox_observing(sb, time(NULL)))) {
		state_unref(c->st);
		c->st = state_ref(c->l->st);
		c->sb = sb;
		return;
	}
	switch (c->state) {
	case CS_NEW:
	case CS_PROXY_HEAD:
	case CS_SNIFF:
		/* Nothing decided yet: the decision will take the new policy. */
		conn_take_state(c);
		return;
	case CS_DENY:
		return;		/* refused already; its rule stays for the audit */
	case CS_RESOLVE:
	case CS_CONNECT:
	case CS_RELAY:
		break;
	case CS_ICPT:
		/* Each request takes the new policy; the host must stay intercepted. */
		conn_take_state(c);
		conn_decide_again(c, &d);
		if (d.verdict != VERDICT_INTERCEPT) {
			c->close_reason = "policy-changed";
			conn_close(c, "policy-changed");
			return;
		}
		d.need_binding = c->dec.need_binding;
		c->dec = d;	/* its rule points into the snapshot we hold now */
		return;
	case CS_CLOSED:
		return;
	}
	conn_take_state(c);
	if (c->kind == LISTEN_PROXY && !c->tunnel && c->name[0] == '\0')
		return;		/* proxy requests are each judged anyway */
	conn_decide_again(c, &d);
	why = c->would_deny != NULL ? "observe-ended" : "policy-changed";
	prev = c->would_deny;
	c->would_deny = NULL;
	observe_apply(c, &d);
	if (d.verdict == VERDICT_PASS || (d.verdict == VERDICT_INTERCEPT &&
	    c->dec.verdict == VERDICT_INTERCEPT)) {
		d.need_binding = c->dec.need_binding;
		c->dec = d;	/* its rule points into c->st, which we now hold */
		return;
	}
	c->would_deny = prev;	/* what it was let through as, for the record */
	if (c->state != CS_RELAY) {
		conn_deny(c, why, d.rule);
		return;
	}
	c->dec = d;
	c->dec.verdict = VERDICT_DENY;
	c->close_reason = why;
	conn_close(c, why);
}

void
conn_audit_durable(struct conn *c, uint64_t durable, int failed)
{
	if (c->state == CS_ICPT && c->icpt != NULL)
		icpt_audit_durable(c->icpt, durable, failed);
}

void
conn_drain(struct conn *c)
{
	if (c->state == CS_ICPT && c->icpt != NULL)
		icpt_drain(c->icpt);
}
