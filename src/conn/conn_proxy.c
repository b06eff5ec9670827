/*
 * conn_proxy.c: the explicit proxy listener.  A CONNECT names the
 * destination; sluice resolves it itself, answers 200, and then judges the
 * tunnel's first bytes exactly as a redirected connection, requiring the
 * SNI or Host inside to agree with the CONNECT authority.  An absolute-form
 * request is judged by its authority and sent on in origin-form.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "parse/httphead.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/relay.h"

static const char connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* Picks the first answered address the policy does not refuse outright. */
static int
pick_address(struct conn *c, const struct resolve_answer *ans)
{
	struct decision d;
	size_t i;
	int pass;

	/* Public addresses first: a private one needs an allow CIDR. */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < ans->n; i++) {
			if (state_is_own_addr(c->st, &ans->addrs[i]))
				continue;
			if (pass == 0 &&
			    addr_classify(&ans->addrs[i], NULL) != ADDR_PUBLIC)
				continue;
			policy_check_dest(c->pol, &ans->addrs[i],
			    c->authority_port, &d);
			if (d.verdict == VERDICT_DENY)
				continue;
			c->dst = ans->addrs[i];
			c->dst_port = c->authority_port;
			return 0;
		}
	return SL_ERR_NOT_FOUND;
}

/* The destination is known: open the tunnel, or judge the request. */
static void
destination_known(struct conn *c)
{
	if (c->tunnel) {
		/* Bytes after the CONNECT head belong to the tunnel. */
		memmove(c->peek, c->peek + c->hparsed, c->peeklen - c->hparsed);
		c->peeklen -= c->hparsed;
		c->hparsed = 0;
		http_reqs_free(c->http);
		c->http = NULL;
		c->head = NULL;
		c->proto = -1;
		conn_set_state(c, CS_SNIFF);
		if (half_send(&c->down, connect_ok, sizeof(connect_ok) - 1) != 0) {
			conn_close(c, "out-of-memory");
			return;
		}
		relay_flush(&c->down);
		/* The client waited for the 200; now its tunnel bytes come. */
		half_want_read(&c->down, 1);
		/* Tunnel bytes that came with the CONNECT started the handshake. */
		conn_arm_timer(c, c->peeklen > 0 ? c->l->cfg->timeouts.handshake :
		    c->l->cfg->timeouts.first_byte);
		if (c->peeklen > 0)
			conn_step(c);
		return;
	}
	conn_set_state(c, CS_SNIFF);
	conn_decided(c);
}

void
conn_proxy_resolved(struct conn *c, int err, const struct resolve_answer *ans)
{
	if (err != 0) {
		conn_deny(c, "resolve-failed", NULL);
		return;
	}
	if (ans->n == 0) {
		conn_deny(c, "no-such-name", NULL);
		return;
	}
	if (pick_address(c, ans) != 0) {
		/* Every address is refused: judge the first, for its reason. */
		c->dst = ans->addrs[0];
		c->dst_port = c->authority_port;
		conn_set_state(c, CS_SNIFF);
		conn_decided(c);
		return;
	}
	destination_known(c);
}

/*
 * What the authority alone decides is decided before any lookup, connect
 * or 200, by the same judgement the transparent path makes: a name the
 * policy does not allow never reaches a resolver (its lookup would carry
 * the name out), and an address refused whatever the tunnel then names is
 * refused now.  -1 after refusing.
 */
static int
precheck(struct conn *c)
{
	struct decision d;

	conn_take_state(c);
	if (c->authority_is_ip) {
		if (addr_parse(c->authority, &c->dst) != 0) {
			c->detail = "bad authority";
			conn_deny(c, "bad-request", NULL);
			return -1;
		}
		c->dst_port = c->authority_port;
		if (conn_dest_refused(c))
			return -1;
		/* Private space needs an allow CIDR, whatever name comes. */
		policy_check_opaque(c->pol, &c->dst, c->dst_port, &d);
		if (d.verdict == VERDICT_DENY &&
		    strcmp(d.reason, "private-address") == 0) {
			conn_deny(c, d.reason, d.rule);
			return -1;
		}
		return 0;
	}
	policy_check_name_alone(c->pol, c->authority, c->authority_port, &d);
	if (d.verdict == VERDICT_DENY) {
		conn_deny(c, d.reason, d.rule);
		return -1;
	}
	return 0;
}

static void
proxy_head(struct conn *c, const struct http_head *h)
{
	if (!h->has_authority) {
		c->detail = "not a proxy request: use CONNECT or an absolute URL";
		conn_deny(c, "bad-request", NULL);
		return;
	}
	snprintf(c->authority, sizeof(c->authority), "%s", h->authority);
	c->authority_port = h->authority_port;
	c->authority_is_ip = h->authority_is_ip;
	c->tunnel = h->is_connect;
	c->head = h;
	if (!c->tunnel) {
		c->proto = SNIFF_HTTP;
		c->nrequests = 1;
		if (h->has_host && (strcmp(h->host, h->authority) != 0 ||
		    (h->host_port != 0 && h->host_port != h->authority_port))) {
			conn_deny(c, "identity-mismatch", NULL);
			return;
		}
		snprintf(c->name, sizeof(c->name), "%s",
		    h->authority_is_ip ? "" : h->authority);
	}
	if (precheck(c) != 0)
		return;
	if (c->authority_is_ip) {
		destination_known(c);
		return;
	}
	conn_resolve(c, c->authority);
}

/* CS_PROXY_HEAD: read until the first request head is complete. */
void
conn_proxy_read_head(struct conn *c)
{
	const struct config *cfg = c->l->cfg;
	const struct http_head *h = NULL;
	const char *reason = NULL;
	int r;

	c->proto = SNIFF_HTTP;	/* refusals here are HTTP responses */
	if ((r = conn_peek_read(c, cfg->limits.header_bytes)) == 1)
		return;
	if (r == SL_ERR_NOT_FOUND || r == SL_ERR_IO || r == SL_ERR_NOMEM) {
		conn_close(c, r == SL_ERR_NOT_FOUND ? "client-closed" : "read-error");
		return;
	}
	switch (conn_peek_feed(c, &h, &reason)) {
	case -1:
		return;
	case HTTP_EV_NEED_MORE:
		if (r == SL_ERR_TOO_BIG) {
			c->detail = "header too large";
			conn_deny(c, "header-too-large", NULL);
		}
		return;
	case HTTP_EV_HEAD:
		half_want_read(&c->down, 0);	/* until the destination is known */
		if (!h->is_connect && conn_http_placeholder(c, h) != 0)
			return;
		proxy_head(c, h);
		return;
	default:
		c->detail = reason;
		conn_deny(c, "bad-request", NULL);
		return;
	}
}
