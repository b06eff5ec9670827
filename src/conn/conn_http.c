/*
 * conn_http.c: plain HTTP on a passed-through connection, judged request by
 * request.  Client bytes are held until the head they belong to is judged;
 * a body follows its allowed head; the next head is held again.
 */
#include "autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "util/log.h"
#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "keys/inject.h"
#include "keys/placeholder.h"
#include "conf/config.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/relay.h"

#define HBUF_SLACK	(64 * 1024)	/* body bytes held beyond a head's limit */

static size_t
hbuf_cap(const struct conn *c)
{
	return c->l->cfg->limits.header_bytes + HBUF_SLACK;
}

/*
 * The name a request head gives, or a refusal: Host and an absolute-form
 * target must agree; an IP literal names nothing (CIDR rules decide).
 */
static int
head_name(struct conn *c, const struct http_head *h)
{
	if (h->has_authority && h->has_host &&
	    (strcmp(h->authority, h->host) != 0 ||
	    (h->host_port != 0 && h->host_port != h->authority_port))) {
		conn_deny(c, "identity-mismatch", NULL);
		return -1;
	}
	if (h->has_host && !h->host_is_ip)
		snprintf(c->name, sizeof(c->name), "%s", h->host);
	else if (h->has_authority && !h->authority_is_ip)
		snprintf(c->name, sizeof(c->name), "%s", h->authority);
	else
		c->name[0] = '\0';
	if (c->tunnel && c->name[0] != '\0' && !c->authority_is_ip &&
	    strcmp(c->name, c->authority) != 0) {
		conn_deny(c, "identity-mismatch", NULL);
		return -1;
	}
	return 0;
}

/*
 * XXX Upgrades on passed-through plain HTTP are refused: the bytes after
 * the head may only be tunnelled once upstream answered 101, and this path
 * does not read upstream's answers.  Interception (issue 5) judges them.
 */
static int
refuse_upgrade(struct conn *c, const struct http_head *h)
{
	if (!h->upgrade && !h->is_connect)
		return 0;
	c->detail = "protocol upgrades over plain HTTP are not passed through";
	conn_deny(c, "upgrade-unsupported", NULL);
	return -1;
}

int
conn_http_placeholder(struct conn *c, const struct http_head *h)
{
	const struct secret *s;
	const char *where;
	char path[256], *buf;

	if (c->l->secrets == NULL || c->l->st->secrets == NULL)
		return 0;
	if ((buf = loop_scratch(c->l)) == NULL) {
		conn_deny(c, "secret-unavailable", NULL);
		return 1;
	}
	/* A placeholder is only ever swapped on intercepted HTTPS. */
	s = placeholder_in_head(c->l->secrets, c->l->st->secrets,
	    c->sb != NULL ? c->sb->id : NULL, h, NULL, NULL, NULL, buf,
	    INJECT_BUF, &where);
	if (s == NULL)
		return 0;
	log_escape(h->target, h->target_len, path, sizeof(path));
	conn_ph_audit(c, path, NULL, s, where);
	c->detail = "a placeholder of a secret may not go here";
	conn_deny(c, "placeholder-elsewhere", NULL);
	return 1;
}

static void
refuse_malformed(struct conn *c, enum http_ev ev, const char *reason)
{
	c->detail = reason;
	conn_deny(c, ev == HTTP_EV_INVALID && reason != NULL &&
	    strcmp(reason, "header too large") == 0 ? "header-too-large" :
	    "bad-request", NULL);
}

/*
 * Feeds the peek buffer's bytes not yet parsed to the request parser,
 * made on first use.  Returns the event; SL_ERR_NOMEM as -1 after closing.
 */
int
conn_peek_feed(struct conn *c, const struct http_head **h,
    const char **reason)
{
	const struct config *cfg = c->l->cfg;
	size_t used = 0;
	enum http_ev ev;

	if (c->http == NULL &&
	    (c->http = http_reqs_new(cfg->limits.header_bytes)) == NULL) {
		conn_close(c, "out-of-memory");
		return -1;
	}
	c->head = NULL;		/* the feed reuses the head's memory */
	ev = http_reqs_feed(c->http, c->peek + c->hparsed,
	    c->peeklen - c->hparsed, &used, h, reason);
	c->hparsed += used;
	return (int)ev;
}

/* CS_SNIFF: the first request head, from the peek buffer. */
void
conn_http_first(struct conn *c)
{
	const struct config *cfg = c->l->cfg;
	const struct http_head *h = NULL;
	const char *reason = NULL;
	int ev;

	switch ((ev = conn_peek_feed(c, &h, &reason))) {
	case -1:
		return;
	case HTTP_EV_NEED_MORE:
		if (c->peeklen >= cfg->limits.header_bytes)
			refuse_malformed(c, HTTP_EV_INVALID, "header too large");
		return;
	case HTTP_EV_HEAD:
		c->head = h;
		c->nrequests = 1;
		if (head_name(c, h) != 0 || refuse_upgrade(c, h) != 0 ||
		    conn_http_placeholder(c, h) != 0)
			return;
		conn_decided(c);
		return;
	default:
		refuse_malformed(c, (enum http_ev)ev, reason);
		return;
	}
}

/* Sends the judged bytes upstream and keeps the rest. */
static int
flush_judged(struct conn *c)
{
	if (c->hfwd == 0)
		return 0;
	if (half_send(&c->up, c->hbuf, c->hfwd) != 0)
		return SL_ERR_NOMEM;
	memmove(c->hbuf, c->hbuf + c->hfwd, c->hlen - c->hfwd);
	c->hlen -= c->hfwd;
	c->hparsed -= c->hfwd;
	c->hfwd = 0;
	return 0;
}

/*
 * An allowed head goes upstream: as received, or for an explicit proxy
 * rewritten to origin-form without the Proxy-* headers.
 */
static int
forward_head(struct conn *c)
{
	const struct http_head *h = c->head;
	size_t start;
	char *out;
	long n;

	c->in_body = 1;
	if (c->kind != LISTEN_PROXY || c->tunnel) {
		c->hfwd = c->hparsed;
		return 0;
	}
	start = c->hparsed - h->head_len;
	c->hfwd = start;
	if (flush_judged(c) != 0)
		return SL_ERR_NOMEM;
	if ((out = malloc(h->head_len + 64)) == NULL)
		return SL_ERR_NOMEM;
	if ((n = http_head_serialize_origin(h, out, h->head_len + 64)) < 0) {
		free(out);
		return SL_ERR_TOO_BIG;
	}
	if (half_send_owned(&c->up, out, (size_t)n) != 0)
		return SL_ERR_NOMEM;
	/* Drop the raw head: it was replaced by the rewritten one. */
	memmove(c->hbuf, c->hbuf + h->head_len, c->hlen - h->head_len);
	c->hlen -= h->head_len;
	c->hparsed -= h->head_len;
	return 0;
}

/* A later head on a kept-alive connection: judged like the first. */
static void
judge_later(struct conn *c)
{
	const struct http_head *h = c->head;

	c->nrequests++;
	if (c->kind == LISTEN_PROXY && !c->tunnel &&
	    (!h->absolute_form || strcmp(h->authority, c->authority) != 0 ||
	    h->authority_port != c->authority_port)) {
		/* XXX one upstream per proxy connection; a new host needs a new one. */
		conn_deny(c, "proxy-host-change", NULL);
		return;
	}
	if (head_name(c, h) != 0 || refuse_upgrade(c, h) != 0 ||
	    conn_http_placeholder(c, h) != 0)
		return;
	conn_decided(c);	/* may hold the head for a lookup */
}

static void pump(struct conn *c);
static void pump_loop(struct conn *c);

/* The held head was allowed: send it and go on parsing. */
void
conn_http_allowed(struct conn *c)
{
	conn_http_audit(c, "pass", c->dec.reason, c->dec.rule);
	c->http_hold = 0;
	if (forward_head(c) != 0) {
		conn_close(c, "out-of-memory");
		return;
	}
	if (c->in_pump)
		return;		/* the running loop goes on: no recursion */
	pump(c);
	if (c->state != CS_RELAY)
		return;
	if (c->hlen < hbuf_cap(c))
		half_want_read(&c->down, 1);
	if (c->down.eof)
		relay_flush(&c->up);	/* a held request was the last one */
}

/* One record per plain-HTTP request decision. */
void
conn_http_audit(struct conn *c, const char *action, const char *reason,
    const char *rule)
{
	const struct http_head *h = c->head;
	char target[256];
	struct arec rec;

	if (h == NULL)
		return;
	mtable_add(&c->l->metrics.requests, rule != NULL ? rule : "(none)",
	    action);
	log_escape(h->target, h->target_len, target, sizeof(target));
	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name);
	arec_int(&rec, "revision", (int64_t)c->policy_rev);
	arec_str(&rec, "method", h->method);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "target", target);
	arec_str(&rec, "action", action);
	arec_str(&rec, "reason", reason);
	arec_str(&rec, "rule", rule);
	if (c->would_deny != NULL && strcmp(action, "pass") == 0)
		arec_str(&rec, "would_deny", c->would_deny);
	if (c->observing)
		arec_bool(&rec, "observe", 1);
	arec_int(&rec, "n", (int64_t)c->nrequests);
	audit_write_rec(c->l->audit, "request", &rec);
}

/* Runs the request loop once; decisions made inside it do not recurse. */
static void
pump(struct conn *c)
{
	c->in_pump = 1;
	pump_loop(c);
	if (c->state != CS_CLOSED)
		c->in_pump = 0;
}

static void
pump_loop(struct conn *c)
{
	const struct http_head *h;
	const char *reason;
	enum http_ev ev;
	size_t used;

	while (c->state == CS_RELAY && c->http != NULL && !c->http_hold) {
		ev = HTTP_EV_NEED_MORE;
		used = 0;
		if (c->hparsed < c->hlen) {
			c->head = NULL;	/* the feed reuses the head's memory */
			ev = http_reqs_feed(c->http, c->hbuf + c->hparsed,
			    c->hlen - c->hparsed, &used, &h, &reason);
		}
		c->hparsed += used;
		switch (ev) {
		case HTTP_EV_NEED_MORE:
			if (c->in_body)
				c->hfwd = c->hparsed;
			else if (c->hlen > c->hfwd)
				conn_head_started(c);	/* a later head, not whole */
			if (flush_judged(c) != 0)
				conn_close(c, "out-of-memory");
			else
				relay_flush(&c->up);
			return;
		case HTTP_EV_HEAD:
			c->head = h;
			c->head_deadline = 0;
			judge_later(c);
			if (c->state != CS_RELAY || c->http_hold)
				return;
			break;	/* conn_http_allowed already forwarded it */
		case HTTP_EV_END:
			c->in_body = 0;
			c->hfwd = c->hparsed;
			break;
		default:	/* INVALID; TUNNEL cannot follow a refused upgrade */
			refuse_malformed(c, ev, reason);
			return;
		}
		if (flush_judged(c) != 0) {
			conn_close(c, "out-of-memory");
			return;
		}
	}
}

/* Upstream connected: the first request's bytes go, the rest is judged. */
void
conn_http_init_relay(struct conn *c)
{
	c->hbuf = c->peek;	/* transferred */
	c->hlen = c->peeklen;
	c->hcap = c->peekcap;
	c->peek = NULL;
	c->peeklen = c->peekcap = 0;
	conn_http_allowed(c);
}

/* The client sent more: hold it, judge what completes a head. */
void
conn_http_read(struct conn *c)
{
	size_t cap = hbuf_cap(c);
	uint8_t *n;
	ssize_t got;

	if (c->hlen == c->hcap) {
		if (c->hcap >= cap) {
			half_want_read(&c->down, 0);	/* full: wait for a decision */
			return;
		}
		size_t want = c->hcap ? c->hcap * 2 : 4096;
		if (want > cap)
			want = cap;
		if ((n = realloc(c->hbuf, want)) == NULL) {
			conn_close(c, "out-of-memory");
			return;
		}
		c->hbuf = n;
		c->hcap = want;
	}
	got = read(c->down.fd, c->hbuf + c->hlen, c->hcap - c->hlen);
	if (got == -1) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c, "read-error");
		return;
	}
	if (got == 0) {
		c->down.eof = 1;
		half_want_read(&c->down, 0);
		relay_flush(&c->up);
		return;
	}
	c->hlen += (size_t)got;
	c->down.bytes += (uint64_t)got;
	pump(c);
	if (c->state == CS_RELAY && half_pending(&c->up) > RELAY_HIGH_WATER)
		half_want_read(&c->down, 0);
}
