/*
 * minter.c: a worker's mints (minter.h).  One mint's life, in order:
 * RESOLVING the endpoint's name, CONNECTING (TCP and TLS), READING its
 * answer, then DONE: the table is told, the record written, and the
 * memory goes on the next loop turn.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "util/addr.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"
#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/mint.h"
#include "keys/secrets.h"
#include "keys/tlsup.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/mintcache.h"
#include "loop/resolve.h"
#include "conn/minter.h"

#define MINTER_HEAD_MAX	(16u * 1024)	/* the endpoint's answer head */

enum minter_state {
	M_RESOLVING,
	M_CONNECTING,
	M_READING,
	M_DONE,		/* told the table; freed on the next loop turn */
};

struct minter {
	struct minter	*next, **prevp;	/* l->minters */
	struct loop	*l;
	enum minter_state st;
	char		 key[MINT_KEY_MAX];
	char		 sandbox[NAME_BUFSZ];	/* "" for none */
	char		 policy[NAME_BUFSZ];
	struct policy	*pol;		/* ref */
	const struct mint_source *src;	/* in pol */
	struct secret	*s;		/* ref */
	struct resolve_req *resolving;
	struct bufferevent *bev;
	struct event	*deadline;
	struct event	*reap;
	struct http_resps *resp;
	int		 status;
	int		 chunked;
	struct dechunk	 dc;
	uint8_t		*body;		/* guarded, MINT_ANSWER_MAX */
	size_t		 blen;
	uint64_t	 start_ms;
};

static const char *const state_names[] = {
	"resolving", "connecting", "reading", "done",
};

static void
set_state(struct minter *m, enum minter_state st)
{
	log_debug("mint", "%s: %s -> %s", m->src->name, state_names[m->st],
	    state_names[st]);
	m->st = st;
}

static void
minter_free(struct minter *m)
{
	if (m->prevp != NULL) {
		*m->prevp = m->next;
		if (m->next != NULL)
			m->next->prevp = m->prevp;
	}
	resolve_cancel(m->resolving);
	if (m->bev != NULL)
		bufferevent_free(m->bev);
	if (m->deadline != NULL)
		event_free(m->deadline);
	if (m->reap != NULL)
		event_free(m->reap);
	http_resps_free(m->resp);
	sodium_free(m->body);		/* wipes */
	secret_unref(m->s);
	policy_free(m->pol);
	free(m);
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
	minter_free(arg);
}

/* The token_mint record and the metric of a mint that ended. */
static void
record(struct minter *m, const struct mtoken *t, const char *why)
{
	struct arec rec;

	arec_init(&rec);
	arec_str(&rec, "sandbox", m->sandbox[0] != '\0' ? m->sandbox : NULL);
	arec_str(&rec, "policy", m->policy);
	arec_str(&rec, "source", m->src->name);
	arec_str(&rec, "kind", mint_kind_name(m->src->kind));
	arec_str(&rec, "host", m->src->host);
	arec_str(&rec, "secret", m->s->name);
	arec_str(&rec, "result", t != NULL ? "ok" : "failed");
	if (t != NULL) {
		arec_str(&rec, "fingerprint", t->fp);
		arec_int(&rec, "expires_at", t->expires_at);
	} else
		arec_str(&rec, "reason", why);
	arec_int(&rec, "ms", (int64_t)(mono_ms() - m->start_ms));
	if (m->l->audit != NULL)
		audit_write_rec(m->l->audit, "token_mint", &rec);
	mtable_add(&m->l->metrics.mints, m->src->name, t != NULL ? "ok" :
	    "failed");
}

/* The one way out: the table gets tok (its reference) or why. */
static void
finish(struct minter *m, struct mtoken *tok, const char *why)
{
	if (m->st == M_DONE) {
		mtoken_unref(tok);
		return;
	}
	if (tok == NULL)
		log_info("mint", "token '%s' of policy %s%s%s: %s", m->src->name,
		    m->policy, m->sandbox[0] != '\0' ? " for " : "", m->sandbox,
		    why);
	record(m, tok, why);
	set_state(m, M_DONE);
	mintcache_done(m->l->mints, m->key, tok, why, (int64_t)time(NULL));
	resolve_cancel(m->resolving);
	m->resolving = NULL;
	if (m->bev != NULL) {
		bufferevent_setcb(m->bev, NULL, NULL, NULL, NULL);
		bufferevent_disable(m->bev, EV_READ | EV_WRITE);
	}
	event_del(m->deadline);
	event_active(m->reap, EV_TIMEOUT, 0);
}

/* ---- the answer ----------------------------------------------------- */

static int
body_cb(void *arg, const uint8_t *p, size_t n)
{
	struct minter *m = arg;

	if (n > MINT_ANSWER_MAX - m->blen)
		return -1;
	memcpy(m->body + m->blen, p, n);
	m->blen += n;
	return 0;
}

/*
 * What mt says, checked: its expiry, kept a day at most (a token is
 * minted again at least that often), and long enough to be used at all;
 * NULL with why.
 */
static struct mtoken *
token_of(struct minter *m, const char *tok, struct mint_token *mt,
    time_t now, char *why, size_t whycap)
{
	struct mtoken *t;
	int64_t exp = mt->expires_at;

	if (exp - (int64_t)now > MINT_MAX_KEEP_S)
		exp = (int64_t)now + MINT_MAX_KEEP_S;
	if (exp - (int64_t)now <= MINT_SKEW_S) {
		/* It would never be used: every request would mint again. */
		snprintf(why, whycap, "the token endpoint gave a token that "
		    "lives %d s or less", MINT_SKEW_S);
		return NULL;
	}
	if ((t = mtoken_new(tok, mt->len, (int64_t)now, exp)) == NULL) {
		snprintf(why, whycap, "out of guarded memory");
		return NULL;
	}
	if (mt->rotated)
		log_warnx("mint", "token '%s' of policy %s: the endpoint gave a "
		    "new refresh token, which sluice does not keep: seal it, or "
		    "turn rotation off for this client", m->src->name,
		    m->policy);
	return t;
}

/* The answer is whole: its token, or why not. */
static void
answered(struct minter *m)
{
	char *tok, why[MINT_WHY_MAX];
	struct mint_token mt;
	struct mtoken *t = NULL;
	time_t now = time(NULL);

	if ((tok = sodium_malloc(MINT_TOKEN_MAX)) == NULL) {
		finish(m, NULL, "out of guarded memory");
		return;
	}
	if (mint_answer(m->src->kind, m->status, (const char *)m->body,
	    m->blen, now, tok, &mt, why, sizeof(why)) == 0)
		t = token_of(m, tok, &mt, now, why, sizeof(why));
	sodium_free(tok);
	sodium_memzero(m->body, m->blen);
	m->blen = 0;
	finish(m, t, why);
}

/*
 * Whether h's body is chunked: the parser takes no Transfer-Encoding
 * but one that ends in chunked.
 */
static int
framed_chunked(const struct http_resp_head *h)
{
	size_t i;

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == 17 &&
		    strncasecmp(h->headers[i].name, "transfer-encoding", 17) == 0)
			return 1;
	return 0;
}

/* Body bytes p[0..n), in the answer's framing; -1 after finishing. */
static int
body(struct minter *m, const uint8_t *p, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	r = m->chunked ? dechunk_feed(&m->dc, p, n, body_cb, m) :
	    body_cb(m, p, n);
	if (r != 0) {
		finish(m, NULL, "the token endpoint's answer is too large or "
		    "badly framed");
		return -1;
	}
	return 0;
}

/* Reads what came: the head, then the body, then the end. */
static void
read_answer(struct minter *m)
{
	struct evbuffer *in = bufferevent_get_input(m->bev);
	const struct http_resp_head *h;
	const char *why;
	enum http_resp_ev ev;
	uint8_t *data;
	size_t len, used;

	while (m->st == M_READING && (len = evbuffer_get_contiguous_space(in))
	    > 0) {
		data = evbuffer_pullup(in, (ssize_t)len);
		ev = http_resps_feed(m->resp, data, len, &used, &h, &why);
		switch (ev) {
		case HTTP_RESP_HEAD:
			/* A 1xx has no body: only the final answer's counts. */
			m->status = (int)h->status;
			m->chunked = framed_chunked(h);
			dechunk_init(&m->dc);
			sodium_memzero(m->body, m->blen);
			m->blen = 0;
			break;
		case HTTP_RESP_NEED_MORE:
			if (m->status >= 200 && body(m, data, used) != 0)
				return;
			break;
		case HTTP_RESP_END:
			if (body(m, data, used) != 0)
				return;
			if (m->status >= 200)	/* not a 1xx */
				answered(m);
			break;
		case HTTP_RESP_TUNNEL:
		case HTTP_RESP_INVALID:
			finish(m, NULL, "the token endpoint's answer is not "
			    "valid HTTP");
			return;
		}
		sodium_memzero(data, used);
		evbuffer_drain(in, used);
	}
}

/* The endpoint closed: a close-delimited answer ends there. */
static void
read_eof(struct minter *m)
{
	const struct http_resp_head *h;
	const char *why;

	read_answer(m);
	if (m->st != M_READING)
		return;
	if (http_resps_finish(m->resp, &h, &why) == HTTP_RESP_END &&
	    m->status >= 200)
		answered(m);
	else
		finish(m, NULL, "the token endpoint closed before answering");
}

/* ---- the request ---------------------------------------------------- */

static void
wipe_free_cb(const void *data, size_t len, void *arg)
{
	sodium_free(arg);	/* wipes */
}

/* Connected and verified: the request goes, from guarded memory. */
static void
send_request(struct minter *m)
{
	char reason[128];
	const char *why = NULL;
	char *req;
	long n;

	if (tlsup_check_peer(bufferevent_openssl_get_ssl(m->bev), NULL, 0,
	    reason, sizeof(reason)) != 0) {
		char msg[MINT_WHY_MAX];

		snprintf(msg, sizeof(msg), "the token endpoint's TLS: %s",
		    reason);
		finish(m, NULL, msg);
		return;
	}
	if ((req = sodium_malloc(MINT_REQ_MAX)) == NULL) {
		finish(m, NULL, "out of guarded memory");
		return;
	}
	if ((n = mint_request(m->src, m->s, time(NULL), req, MINT_REQ_MAX,
	    &why)) < 0) {
		sodium_free(req);
		finish(m, NULL, why);
		return;
	}
	/* By reference: the evbuffer never copies it; freed (wiped) after. */
	if (evbuffer_add_reference(bufferevent_get_output(m->bev), req,
	    (size_t)n, wipe_free_cb, req) != 0) {
		sodium_free(req);
		finish(m, NULL, "out of memory");
		return;
	}
	if (http_resps_expect(m->resp, "POST") != 0 ||
	    http_resps_last(m->resp) != 0) {
		finish(m, NULL, "internal");
		return;
	}
	set_state(m, M_READING);
}

/* Callbacks: they only dispatch. */
static void
read_cb(struct bufferevent *bev, void *arg)
{
	read_answer(arg);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct minter *m = arg;
	char msg[MINT_WHY_MAX];
	unsigned long e;

	if (what & BEV_EVENT_CONNECTED) {
		send_request(m);
		return;
	}
	if ((what & BEV_EVENT_EOF) && m->st == M_READING) {
		read_eof(m);
		return;
	}
	e = bufferevent_get_openssl_error(bev);
	snprintf(msg, sizeof(msg), "the token endpoint %s: %s",
	    m->st == M_CONNECTING ? "cannot be reached" : "failed",
	    e != 0 ? ERR_reason_error_string(e) != NULL ?
	    ERR_reason_error_string(e) : "TLS error" :
	    what & BEV_EVENT_EOF ? "closed" : "connection error");
	while (bufferevent_get_openssl_error(bev) != 0)
		;
	finish(m, NULL, msg);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	finish(arg, NULL, "the token endpoint did not answer within 10 s");
}

/* ---- reaching the endpoint ------------------------------------------ */

/* The first of ans the policy lets the sandbox reach on the port, or NULL. */
static const struct sl_addr *
allowed_addr(struct minter *m, const struct resolve_answer *ans,
    const char **reason)
{
	struct decision d;
	size_t i;

	*reason = "no address";
	for (i = 0; i < ans->n; i++) {
		policy_check_dest(m->pol, &ans->addrs[i],
		    (uint16_t)m->src->port, &d);
		if (d.verdict == VERDICT_CONTINUE)
			policy_check_name(m->pol, m->src->host, &ans->addrs[i],
			    (uint16_t)m->src->port, &d);
		if (d.verdict != VERDICT_DENY)
			return &ans->addrs[i];
		*reason = d.reason;
	}
	return NULL;
}

static void
connect_to(struct minter *m, const struct resolve_answer *ans)
{
	const struct config *cfg = m->l->cfg;
	struct sockaddr_storage ss;
	const struct sl_addr *a;
	const char *reason;
	char err[256], msg[MINT_WHY_MAX];
	SSL_CTX *ctx;
	SSL *ssl = NULL;
	socklen_t len;
	int one = 1;

	if ((a = allowed_addr(m, ans, &reason)) == NULL) {
		snprintf(msg, sizeof(msg), "the token endpoint %s is not "
		    "reachable under the policy (%s)", m->src->host, reason);
		finish(m, NULL, msg);
		return;
	}
	if (tlsup_ctx(m->l->tls_up, m->src->upstream_ca != NULL ?
	    m->src->upstream_ca : cfg->upstream_ca, &ctx, err,
	    sizeof(err)) != 0) {
		log_warnx("mint", "%s", err);
		finish(m, NULL, "the token endpoint's CA cannot be read");
		return;
	}
	if (tlsup_ssl_new(ctx, m->sandbox[0] != '\0' ? m->sandbox : NULL,
	    m->src->host, 0, m->src->port, &ssl) != 0) {
		finish(m, NULL, "TLS error");
		return;
	}
	if ((m->bev = bufferevent_openssl_socket_new(m->l->base, -1, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		finish(m, NULL, "out of memory");
		return;
	}
	bufferevent_setcb(m->bev, read_cb, NULL, event_cb, m);
	set_state(m, M_CONNECTING);
	len = addr_to_sockaddr(a, (uint16_t)m->src->port, &ss);
	if (bufferevent_socket_connect(m->bev, (struct sockaddr *)&ss,
	    (int)len) != 0) {
		finish(m, NULL, "the token endpoint cannot be reached");
		return;
	}
	setsockopt(bufferevent_getfd(m->bev), IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
	bufferevent_enable(m->bev, EV_READ | EV_WRITE);
}

static void
resolved_cb(int err, const struct resolve_answer *ans, void *arg)
{
	struct minter *m = arg;

	m->resolving = NULL;
	if (err != 0 || ans->n == 0)
		finish(m, NULL, "the token endpoint's name does not resolve");
	else
		connect_to(m, ans);
}

void
minter_start(struct loop *l, const struct minter_for *f)
{
	struct timeval tv = { MINTER_DEADLINE_MS / 1000,
	    (MINTER_DEADLINE_MS % 1000) * 1000 };
	struct resolve_answer ans;
	struct minter *m;
	int r;

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		mintcache_done(l->mints, f->key, NULL, "out of memory",
		    (int64_t)time(NULL));
		return;
	}
	m->l = l;
	m->start_ms = mono_ms();
	snprintf(m->key, sizeof(m->key), "%s", f->key);
	snprintf(m->sandbox, sizeof(m->sandbox), "%s", f->sandbox != NULL ?
	    f->sandbox : "");
	snprintf(m->policy, sizeof(m->policy), "%s", f->policy);
	m->pol = policy_ref(f->pol);
	m->src = f->src;
	m->s = secret_ref((struct secret *)f->secret);
	m->st = M_RESOLVING;
	if ((m->next = l->minters) != NULL)
		m->next->prevp = &m->next;
	m->prevp = &l->minters;
	l->minters = m;
	if ((m->deadline = evtimer_new(l->base, deadline_cb, m)) == NULL ||
	    (m->reap = event_new(l->base, -1, 0, reap_cb, m)) == NULL ||
	    (m->resp = http_resps_new(MINTER_HEAD_MAX)) == NULL ||
	    (m->body = sodium_malloc(MINT_ANSWER_MAX)) == NULL) {
		mintcache_done(l->mints, f->key, NULL, "out of memory",
		    (int64_t)time(NULL));
		minter_free(m);
		return;
	}
	evtimer_add(m->deadline, &tv);
	if (l->res == NULL) {
		finish(m, NULL, "this worker has no resolver");
		return;
	}
	r = resolve_name(l->res, m->src->host, 0, &ans, resolved_cb, m,
	    &m->resolving);
	if (r == 0)
		resolved_cb(0, &ans, m);
	else if (r != 1)
		finish(m, NULL, "out of memory");
}

void
minter_stop_all(struct loop *l)
{
	struct minter *m;

	while ((m = l->minters) != NULL) {
		finish(m, NULL, "shutting down");
		minter_free(m);
	}
}
