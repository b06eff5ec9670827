/*
 * test_resolve.c: the worker's resolver against fake DNS servers.
 *
 * The fakes are UDP (and, for truncated answers, TCP) sockets on
 * 127.0.0.1, served on the resolver's own event base; what they answer
 * depends on the name's last labels (see fake_reply).  Every name a fake
 * receives is recorded and, at the end of each test, compared with the
 * names the test asked: the resolver must never ask one of its own.
 * Timing is asserted by the order of events, never by the clock; the
 * only clock is a guard that fails a test which hangs.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "util/addr.h"
#include "util/err.h"
#include "parse/dnsmsg.h"
#include "parse/sniff.h"
#include "conf/config.h"
#include "loop/resolve.h"

#define GUARD_S		30	/* a test that hangs this long fails */
#define MAX_SEEN	8192
#define MAX_ASKED	2048

/* One query a fake received and holds, to answer on release. */
struct held {
	uint8_t			 buf[512];
	size_t			 len;
	struct sockaddr_storage	 from;
	socklen_t		 fromlen;
};

struct seen {
	char		name[NAME_BUFSZ];
	uint16_t	type;
};

struct fake_tcp;

struct fake {
	struct event_base *base;
	int		 fd, tfd;
	struct event	*ev, *tev;
	struct endpoint	 ep;
	int		 silent;	/* answers nothing at all */
	int		 hold;		/* keeps queries until fake_release */
	struct held	*held;
	size_t		 nheld;
	struct seen	*seen;		/* every query received, UDP and TCP */
	size_t		 nseen;
	size_t		 ntcp;		/* queries received over TCP */
	struct fake_tcp	*conns[16];	/* TCP connections open */
};

struct ctx {
	struct event_base *base;
	struct fake	 fk[2];
	size_t		 nfk;
	struct endpoint	 eps[2];
	struct resolver	*r;
	struct event	*guard;
	int		 stuck;
	int		 seq;		/* callbacks so far */
	char		 (*asked)[NAME_BUFSZ];
	size_t		 nasked;
};

/* A lookup the test made, and what its callback got. */
struct look {
	struct ctx	*c;
	struct resolve_req *req;
	int		 called;
	int		 order;		/* ctx seq when called */
	int		 err;
	struct resolve_answer ans;
	struct look	*cancel;	/* the callback cancels this one */
	const char	**then;		/* names the callback looks up */
	struct look	*then_looks;
};

/* ---- the fake server ---------------------------------------------- */

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static int
under(const char *name, const char *zone)
{
	size_t n = strlen(name), z = strlen(zone);

	return n == z ? strcmp(name, zone) == 0 : n > z &&
	    name[n - z - 1] == '.' && strcmp(name + n - z, zone) == 0;
}

/* A response header and q's question, copied from the query's bytes. */
static size_t
r_start(uint8_t *out, const uint8_t *qb, const struct dns_query *q,
    unsigned flags, unsigned an)
{
	size_t qlen = q->question_len;

	put16(out, get16(qb));
	put16(out + 2, DNS_F_QR | DNS_F_RD | DNS_F_RA | flags);
	put16(out + 4, 1);
	put16(out + 6, an);
	put16(out + 8, 0);
	put16(out + 10, 0);
	memcpy(out + DNS_HDR_LEN, qb + DNS_HDR_LEN, qlen);
	return DNS_HDR_LEN + qlen;
}

/* A record owned by the question's name (a pointer to it). */
static size_t
r_rr(uint8_t *out, size_t at, unsigned type, uint32_t ttl, const void *rd,
    size_t rdlen)
{
	put16(out + at, 0xc00c);
	put16(out + at + 2, type);
	put16(out + at + 4, DNS_C_IN);
	put16(out + at + 6, ttl >> 16);
	put16(out + at + 8, ttl & 0xffff);
	put16(out + at + 10, (unsigned)rdlen);
	memcpy(out + at + 12, rd, rdlen);
	return at + 12 + rdlen;
}

static size_t
r_addr(uint8_t *out, size_t at, unsigned type, const char *text, uint32_t ttl)
{
	uint8_t b[16];

	assert_int_equal(inet_pton(type == DNS_T_A ? AF_INET : AF_INET6, text,
	    b), 1);
	return r_rr(out, at, type, ttl, b, type == DNS_T_A ? 4 : 16);
}

/*
 * What a fake answers, by zone:
 *   *.refused.test, *.servfail.test, *.nx.test: that rcode;
 *   *.nodata.test: NOERROR, no record;
 *   *.silent.test: nothing;
 *   *.garbage.test: junk, then an answer with another id (both ignored);
 *   *.malformed.test: our id and question, ANCOUNT 1 and no record;
 *   *.v4only.test: A 192.0.2.4, AAAA SERVFAIL;
 *   *.ttl0.test: A 192.0.2.5 with TTL 0, AAAA NODATA;
 *   *.mapped.test: A NODATA, AAAA ::ffff:192.0.2.9;
 *   *.big.test: 20 A records, AAAA NODATA;
 *   *.cname.test: a CNAME to the same name under target.test, then its A;
 *   *.tc.test: TC set over UDP; over TCP A 192.0.2.7, AAAA NODATA;
 *   anything else: A 192.0.2.1 and AAAA 2001:db8::1, TTL 300.
 * Returns the response's length (0: say nothing); *junk may get a second
 * datagram to send first.
 */
static size_t
fake_reply(const uint8_t *qb, size_t qlen, int tcp, uint8_t *out,
    uint8_t *junk, size_t *junklen)
{
	struct dns_query q;
	const char *n;
	size_t at, i;
	char b[64];
	int a;

	*junklen = 0;
	if (dns_query_parse(qb, qlen, &q) != PARSE_COMPLETE)
		return 0;
	n = q.name;
	a = q.qtype == DNS_T_A;
	if (under(n, "silent.test"))
		return 0;
	if (under(n, "refused.test"))
		return r_start(out, qb, &q, DNS_RCODE_REFUSED, 0);
	if (under(n, "servfail.test"))
		return r_start(out, qb, &q, DNS_RCODE_SERVFAIL, 0);
	if (under(n, "nx.test"))
		return r_start(out, qb, &q, DNS_RCODE_NXDOMAIN, 0);
	if (under(n, "nodata.test"))
		return r_start(out, qb, &q, 0, 0);
	if (under(n, "malformed.test"))
		return r_start(out, qb, &q, 0, 1);
	if (under(n, "garbage.test")) {
		memcpy(junk, "\x01\x02junk!", 7);
		*junklen = 7;
		at = r_start(out, qb, &q, 0, 1);
		put16(out, get16(qb) ^ 0x5555);
		return r_addr(out, at, DNS_T_A, "192.0.2.66", 300);
	}
	if (under(n, "v4only.test")) {
		if (!a)
			return r_start(out, qb, &q, DNS_RCODE_SERVFAIL, 0);
		at = r_start(out, qb, &q, 0, 1);
		return r_addr(out, at, DNS_T_A, "192.0.2.4", 300);
	}
	if (under(n, "ttl0.test")) {
		if (!a)
			return r_start(out, qb, &q, 0, 0);
		at = r_start(out, qb, &q, 0, 1);
		return r_addr(out, at, DNS_T_A, "192.0.2.5", 0);
	}
	if (under(n, "mapped.test")) {
		if (a)
			return r_start(out, qb, &q, 0, 0);
		at = r_start(out, qb, &q, 0, 1);
		return r_addr(out, at, DNS_T_AAAA, "::ffff:192.0.2.9", 300);
	}
	if (under(n, "big.test")) {
		if (!a)
			return r_start(out, qb, &q, 0, 0);
		at = r_start(out, qb, &q, 0, 20);
		for (i = 1; i <= 20; i++) {
			snprintf(b, sizeof(b), "198.51.100.%zu", i);
			at = r_addr(out, at, DNS_T_A, b, 300);
		}
		return at;
	}
	if (under(n, "cname.test")) {
		uint8_t rd[NAME_BUFSZ + 16];
		size_t rdlen;

		if (!a)
			return r_start(out, qb, &q, 0, 0);
		at = r_start(out, qb, &q, 0, 2);
		/* target: the first label, then target.test */
		rd[0] = qb[DNS_HDR_LEN];
		memcpy(rd + 1, qb + DNS_HDR_LEN + 1, rd[0]);
		rdlen = 1 + rd[0];
		memcpy(rd + rdlen, "\x06target\x04test", 13);
		rdlen += 13;
		at = r_rr(out, at, DNS_T_CNAME, 300, rd, rdlen);
		put16(out + at, 0xc000 | (unsigned)(at - rdlen));
		put16(out + at + 2, DNS_T_A);
		put16(out + at + 4, DNS_C_IN);
		put16(out + at + 6, 0);
		put16(out + at + 8, 300);
		put16(out + at + 10, 4);
		memcpy(out + at + 12, "\xc0\x00\x02\x08", 4);
		return at + 16;
	}
	if (under(n, "tc.test")) {
		if (!tcp)
			return r_start(out, qb, &q, DNS_F_TC, 0);
		if (!a)
			return r_start(out, qb, &q, 0, 0);
		at = r_start(out, qb, &q, 0, 1);
		return r_addr(out, at, DNS_T_A, "192.0.2.7", 300);
	}
	at = r_start(out, qb, &q, 0, 1);
	return r_addr(out, at, q.qtype, a ? "192.0.2.1" : "2001:db8::1", 300);
}

static void
fake_note(struct fake *f, const uint8_t *qb, size_t qlen)
{
	struct dns_query q;

	/* Every query the resolver sends must parse as one. */
	assert_int_equal(dns_query_parse(qb, qlen, &q), PARSE_COMPLETE);
	assert_true(f->nseen < MAX_SEEN);
	snprintf(f->seen[f->nseen].name, NAME_BUFSZ, "%s", q.name);
	f->seen[f->nseen++].type = q.qtype;
}

static void
fake_answer(struct fake *f, const uint8_t *qb, size_t qlen,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	uint8_t out[1024], junk[16];
	size_t len, jlen;

	len = fake_reply(qb, qlen, 0, out, junk, &jlen);
	if (jlen > 0)
		sendto(f->fd, junk, jlen, 0, (const struct sockaddr *)from,
		    fromlen);
	if (len > 0)
		sendto(f->fd, out, len, 0, (const struct sockaddr *)from,
		    fromlen);
}

static void
fake_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint8_t buf[512];
	ssize_t n;

	for (;;) {
		fromlen = sizeof(from);
		n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
		    (struct sockaddr *)&from, &fromlen);
		if (n < 0)
			return;
		fake_note(f, buf, (size_t)n);
		if (f->silent)
			continue;
		if (f->hold) {
			struct held *h;

			assert_true(f->nheld < MAX_SEEN);
			h = &f->held[f->nheld++];
			memcpy(h->buf, buf, (size_t)n);
			h->len = (size_t)n;
			h->from = from;
			h->fromlen = fromlen;
			continue;
		}
		fake_answer(f, buf, (size_t)n, &from, fromlen);
	}
}

/* Answers what was held, and from now on answers at once. */
static void
fake_release(struct fake *f)
{
	size_t i;

	f->hold = 0;
	for (i = 0; i < f->nheld; i++)
		fake_answer(f, f->held[i].buf, f->held[i].len, &f->held[i].from,
		    f->held[i].fromlen);
	f->nheld = 0;
}

/* TCP: one connection, blocking, one query and its answer at a time. */
struct fake_tcp {
	struct fake	*f;
	int		 fd;
	struct event	*ev;
	uint8_t		 in[2 + 512];
	size_t		 have;
};

static void
fake_tcp_close(struct fake_tcp *t)
{
	size_t i;

	for (i = 0; i < 16; i++)
		if (t->f->conns[i] == t)
			t->f->conns[i] = NULL;
	event_free(t->ev);
	close(t->fd);
	free(t);
}

static void
fake_tcp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_tcp *t = arg;
	uint8_t out[2 + 1024], junk[16];
	size_t mlen, len, jlen;
	ssize_t n;

	n = recv(fd, t->in + t->have, sizeof(t->in) - t->have, 0);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		fake_tcp_close(t);
		return;
	}
	t->have += (size_t)n;
	if (t->have < 2 || t->have < 2 + (mlen = get16(t->in)))
		return;
	fake_note(t->f, t->in + 2, mlen);
	t->f->ntcp++;
	len = fake_reply(t->in + 2, mlen, 1, out + 2, junk, &jlen);
	t->have = 0;
	if (len == 0)
		return;
	put16(out, (unsigned)len);
	assert_int_equal(send(fd, out, len + 2, MSG_NOSIGNAL), (ssize_t)len + 2);
}

static void
fake_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;
	struct fake_tcp *t;
	size_t i;
	int c;

	if ((c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		return;
	assert_non_null(t = calloc(1, sizeof(*t)));
	for (i = 0; i < 16 && f->conns[i] != NULL; i++)
		;
	assert_true(i < 16);
	f->conns[i] = t;
	t->f = f;
	t->fd = c;
	t->ev = event_new(f->base, c, EV_READ | EV_PERSIST, fake_tcp_cb, t);
	assert_non_null(t->ev);
	assert_int_equal(event_add(t->ev, NULL), 0);
}

/* A UDP server and a TCP one on the same 127.0.0.1 port. */
static void
fake_start(struct fake *f, struct event_base *base)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int one = 1, rcvbuf = 4 << 20;

	memset(f, 0, sizeof(*f));
	f->base = base;
	assert_non_null(f->seen = calloc(MAX_SEEN, sizeof(*f->seen)));
	assert_non_null(f->held = calloc(MAX_SEEN, sizeof(*f->held)));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	/* Room for every query of a full window at once (a burst). */
	if (setsockopt(f->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
	    sizeof(rcvbuf)) != 0)
		setsockopt(f->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	assert_int_equal(bind(f->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(f->fd, (struct sockaddr *)&sin, &len), 0);
	f->tfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->tfd >= 0);
	setsockopt(f->tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(f->tfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(f->tfd, 64), 0);
	f->ev = event_new(base, f->fd, EV_READ | EV_PERSIST, fake_udp_cb, f);
	f->tev = event_new(base, f->tfd, EV_READ | EV_PERSIST, fake_accept_cb, f);
	assert_non_null(f->ev);
	assert_non_null(f->tev);
	assert_int_equal(event_add(f->ev, NULL), 0);
	assert_int_equal(event_add(f->tev, NULL), 0);
	memcpy(&f->ep.ss, &sin, sizeof(sin));
	f->ep.len = sizeof(sin);
	snprintf(f->ep.text, sizeof(f->ep.text), "127.0.0.1:%u",
	    ntohs(sin.sin_port));
}

static void
fake_stop(struct fake *f)
{
	size_t i;

	for (i = 0; i < 16; i++)
		if (f->conns[i] != NULL)
			fake_tcp_close(f->conns[i]);
	event_free(f->ev);
	event_free(f->tev);
	close(f->fd);
	close(f->tfd);
	free(f->seen);
	free(f->held);
}

/* How many queries of type for name the fake received. */
static size_t
fake_count(const struct fake *f, const char *name, uint16_t type)
{
	size_t i, n = 0;

	for (i = 0; i < f->nseen; i++)
		if (strcmp(f->seen[i].name, name) == 0 &&
		    (type == 0 || f->seen[i].type == type))
			n++;
	return n;
}

/* ---- the test context --------------------------------------------- */

static void
guard_cb(evutil_socket_t fd, short what, void *arg)
{
	((struct ctx *)arg)->stuck = 1;
}

/* nfk fake servers (the second, if any, answers nothing), one resolver. */
static struct ctx *
ctx_new(size_t nfk, unsigned timeout_ms, size_t max_entries)
{
	struct timeval tv = { GUARD_S, 0 };
	struct ctx *c;
	size_t i;

	assert_non_null(c = calloc(1, sizeof(*c)));
	assert_non_null(c->asked = calloc(MAX_ASKED, sizeof(*c->asked)));
	assert_non_null(c->base = event_base_new());
	c->nfk = nfk;
	for (i = 0; i < nfk; i++) {
		fake_start(&c->fk[i], c->base);
		c->eps[i] = c->fk[i].ep;
	}
	c->r = resolver_new(c->base, c->eps, nfk, timeout_ms, max_entries);
	assert_non_null(c->r);
	/* The resolver keeps its own copy of the servers. */
	memset(c->eps, 0, sizeof(c->eps));
	assert_non_null(c->guard = evtimer_new(c->base, guard_cb, c));
	assert_int_equal(evtimer_add(c->guard, &tv), 0);
	return c;
}

/* Every name a fake received was asked by the test. */
static void
assert_only_asked(const struct ctx *c)
{
	size_t i, j, k;
	int found;

	for (k = 0; k < c->nfk; k++)
		for (i = 0; i < c->fk[k].nseen; i++) {
			found = 0;
			for (j = 0; j < c->nasked && !found; j++)
				found = strcmp(c->fk[k].seen[i].name,
				    c->asked[j]) == 0;
			if (!found)
				fail_msg("the resolver asked for %s on its own",
				    c->fk[k].seen[i].name);
		}
}

static void
ctx_free(struct ctx *c)
{
	size_t i;

	assert_only_asked(c);
	resolver_free(c->r);
	event_free(c->guard);
	for (i = 0; i < c->nfk; i++)
		fake_stop(&c->fk[i]);
	event_base_free(c->base);
	free(c->asked);
	free(c);
}

static void look_cb(int err, const struct resolve_answer *ans, void *arg);

/* Looks name up; returns what resolve_name returned. */
static int
ask(struct ctx *c, struct look *l, const char *name, int flags)
{
	size_t i;
	int r;

	assert_true(c->nasked < MAX_ASKED);
	for (i = 0; name[i] != '\0' && i < NAME_BUFSZ - 1; i++)
		c->asked[c->nasked][i] = (char)(name[i] >= 'A' &&
		    name[i] <= 'Z' ? name[i] + 32 : name[i]);
	c->asked[c->nasked++][i] = '\0';
	l->c = c;
	l->called = 0;
	r = resolve_name(c->r, name, flags, &l->ans, look_cb, l, &l->req);
	assert_true(r == 0 || r == 1);
	if (r == 0)
		l->req = NULL;
	return r;
}

static void
look_cb(int err, const struct resolve_answer *ans, void *arg)
{
	struct look *l = arg;
	size_t i;

	l->req = NULL;
	l->called++;
	l->err = err;
	l->ans = *ans;
	l->order = ++l->c->seq;
	if (l->cancel != NULL) {
		resolve_cancel(l->cancel->req);
		l->cancel->req = NULL;
	}
	for (i = 0; l->then != NULL && l->then[i] != NULL; i++)
		ask(l->c, &l->then_looks[i], l->then[i], 0);
}

static void
run_once(struct ctx *c)
{
	assert_false(c->stuck);
	event_base_loop(c->base, EVLOOP_ONCE);
	assert_false(c->stuck);
}

/* Runs the loop until the lookup's callback came. */
static void
wait_look(struct ctx *c, const struct look *l)
{
	while (!l->called)
		run_once(c);
}

/* Runs the loop until n lookups of ls got their callback. */
static void
wait_looks(struct ctx *c, const struct look *ls, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		wait_look(c, &ls[i]);
}

/* Runs the loop until fake k received n queries in all. */
static void
wait_seen(struct ctx *c, size_t k, size_t n)
{
	while (c->fk[k].nseen < n)
		run_once(c);
}

/* A few turns of the loop for what is ready now, waiting for nothing. */
static void
settle(struct ctx *c)
{
	int i;

	for (i = 0; i < 16; i++)
		event_base_loop(c->base, EVLOOP_NONBLOCK);
}

static void
assert_has(const struct resolve_answer *ans, const char *text)
{
	struct sl_addr a;

	assert_int_equal(addr_parse(text, &a), 0);
	addr_canonical(&a, &a);
	assert_true(resolve_answer_has(ans, &a));
}

/* ---- tests --------------------------------------------------------- */

static void
test_answer_and_cache(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[6];

	(void)state;
	memset(l, 0, sizeof(l));
	assert_int_equal(ask(c, &l[0], "WWW.Ok.Test", 0), 1);
	wait_look(c, &l[0]);
	assert_int_equal(l[0].err, 0);
	assert_int_equal(l[0].ans.n, 2);
	assert_has(&l[0].ans, "192.0.2.1");
	assert_has(&l[0].ans, "2001:db8::1");
	assert_int_equal(fake_count(&c->fk[0], "www.ok.test", DNS_T_A), 1);
	assert_int_equal(fake_count(&c->fk[0], "www.ok.test", DNS_T_AAAA), 1);

	/* Cached per its TTL (300 s), under its normal form. */
	assert_int_equal(ask(c, &l[1], "www.ok.test", 0), 0);
	assert_int_equal(l[1].ans.n, 2);
	assert_has(&l[1].ans, "192.0.2.1");
	assert_int_equal(fake_count(&c->fk[0], "www.ok.test", 0), 2);

	/* RESOLVE_FRESH asks again. */
	assert_int_equal(ask(c, &l[2], "www.ok.test", RESOLVE_FRESH), 1);
	wait_look(c, &l[2]);
	assert_int_equal(l[2].err, 0);
	assert_int_equal(l[2].ans.n, 2);
	assert_int_equal(fake_count(&c->fk[0], "www.ok.test", 0), 4);

	/* A TTL of 0 is cached for the minimum, not asked every time. */
	assert_int_equal(ask(c, &l[3], "a.ttl0.test", 0), 1);
	wait_look(c, &l[3]);
	assert_int_equal(l[3].err, 0);
	assert_int_equal(l[3].ans.n, 1);
	assert_has(&l[3].ans, "192.0.2.5");
	assert_int_equal(ask(c, &l[4], "a.ttl0.test", 0), 0);
	assert_int_equal(l[4].ans.n, 1);
	assert_int_equal(fake_count(&c->fk[0], "a.ttl0.test", 0), 2);
	ctx_free(c);
}

static void
test_negative(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[4];

	(void)state;
	memset(l, 0, sizeof(l));
	/* NXDOMAIN: an answer without an address, and cached. */
	assert_int_equal(ask(c, &l[0], "no.nx.test", 0), 1);
	wait_look(c, &l[0]);
	assert_int_equal(l[0].err, 0);
	assert_int_equal(l[0].ans.n, 0);
	assert_int_equal(ask(c, &l[1], "no.nx.test", 0), 0);
	assert_int_equal(l[1].ans.n, 0);
	assert_int_equal(fake_count(&c->fk[0], "no.nx.test", 0), 2);

	/* NODATA likewise. */
	assert_int_equal(ask(c, &l[2], "x.nodata.test", 0), 1);
	wait_look(c, &l[2]);
	assert_int_equal(l[2].err, 0);
	assert_int_equal(l[2].ans.n, 0);
	assert_int_equal(ask(c, &l[3], "x.nodata.test", 0), 0);
	assert_int_equal(fake_count(&c->fk[0], "x.nodata.test", 0), 2);
	ctx_free(c);
}

/* REFUSED, SERVFAIL, malformed: that name fails, uncached; others do not. */
static void
test_failures_not_cached(void **state)
{
	static const char *bad[] = {
		"a.refused.test", "b.servfail.test", "c.malformed.test",
	};
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[4], good;
	size_t i;

	(void)state;
	for (i = 0; i < 3; i++) {
		memset(l, 0, sizeof(l));
		memset(&good, 0, sizeof(good));
		assert_int_equal(ask(c, &l[0], bad[i], 0), 1);
		assert_int_equal(ask(c, &good, "good.ok.test", RESOLVE_FRESH), 1);
		wait_look(c, &l[0]);
		wait_look(c, &good);
		assert_int_equal(l[0].err, SL_ERR_IO);
		assert_int_equal(l[0].ans.n, 0);
		assert_int_equal(good.err, 0);
		assert_int_equal(good.ans.n, 2);
		/* One question of each type: an answer is an answer. */
		assert_int_equal(fake_count(&c->fk[0], bad[i], DNS_T_A), 1);
		assert_int_equal(fake_count(&c->fk[0], bad[i], DNS_T_AAAA), 1);
		/* Not cached: the next lookup asks again. */
		assert_int_equal(ask(c, &l[1], bad[i], 0), 1);
		wait_look(c, &l[1]);
		assert_int_equal(l[1].err, SL_ERR_IO);
		assert_int_equal(fake_count(&c->fk[0], bad[i], 0), 4);
		/* And right after, a good name still gets its answer. */
		assert_int_equal(ask(c, &l[2], "after.ok.test", RESOLVE_FRESH), 1);
		wait_look(c, &l[2]);
		assert_int_equal(l[2].err, 0);
		assert_int_equal(l[2].ans.n, 2);
	}
	ctx_free(c);
}

/* A name that times out does not hold back one asked with it or after. */
static void
test_timeout_isolated(void **state)
{
	struct ctx *c = ctx_new(1, 200, 64);
	struct look slow, junk, good, after;

	(void)state;
	memset(&slow, 0, sizeof(slow));
	memset(&junk, 0, sizeof(junk));
	memset(&good, 0, sizeof(good));
	memset(&after, 0, sizeof(after));
	assert_int_equal(ask(c, &slow, "a.silent.test", 0), 1);
	assert_int_equal(ask(c, &junk, "b.garbage.test", 0), 1);
	assert_int_equal(ask(c, &good, "c.ok.test", 0), 1);
	wait_look(c, &good);
	/* The good answer came while the others still waited. */
	assert_int_equal(good.err, 0);
	assert_int_equal(good.ans.n, 2);
	assert_false(slow.called);
	assert_false(junk.called);
	wait_look(c, &slow);
	wait_look(c, &junk);
	assert_true(good.order < slow.order && good.order < junk.order);
	assert_int_equal(slow.err, SL_ERR_IO);
	/* Junk and an answer with another id are not answers. */
	assert_int_equal(junk.err, SL_ERR_IO);
	/* Two attempts a question, then it gave up. */
	assert_int_equal(fake_count(&c->fk[0], "a.silent.test", DNS_T_A), 2);
	assert_int_equal(fake_count(&c->fk[0], "a.silent.test", DNS_T_AAAA), 2);

	assert_int_equal(ask(c, &after, "d.ok.test", 0), 1);
	wait_look(c, &after);
	assert_int_equal(after.err, 0);
	assert_int_equal(after.ans.n, 2);
	ctx_free(c);
}

/* Hundreds of failing names of one zone, then a good name. */
static void
many_failures(const char *zone, unsigned timeout_ms, size_t per_name)
{
	struct ctx *c = ctx_new(1, timeout_ms, 4096);
	struct look *l, good;
	char name[64];
	size_t i, n = 300;

	assert_non_null(l = calloc(n, sizeof(*l)));
	memset(&good, 0, sizeof(good));
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%zu.%s", i, zone);
		assert_int_equal(ask(c, &l[i], name, 0), 1);
	}
	wait_looks(c, l, n);
	for (i = 0; i < n; i++)
		assert_int_equal(l[i].err, SL_ERR_IO);
	assert_int_equal(ask(c, &good, "good.ok.test", 0), 1);
	wait_look(c, &good);
	assert_int_equal(good.err, 0);
	assert_int_equal(good.ans.n, 2);
	/* Only the questions asked, each as often as dnsup asks one. */
	assert_int_equal(c->fk[0].nseen - fake_count(&c->fk[0],
	    "good.ok.test", 0), n * per_name);
	free(l);
	ctx_free(c);
}

/*
 * Hundreds of failing names leave nothing behind that fails the next.
 * The answered zones get a timeout no answer can miss, so the counts are
 * exact; the silent one a short one (it waits out every attempt).
 */
static void
test_many_failures(void **state)
{
	(void)state;
	many_failures("refused.test", 5000, 2);
	many_failures("servfail.test", 5000, 2);
	many_failures("silent.test", 50, 4);
}

/* An address of one family is an answer when the other failed. */
static void
test_one_family(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[3];

	(void)state;
	memset(l, 0, sizeof(l));
	assert_int_equal(ask(c, &l[0], "x.v4only.test", 0), 1);
	wait_look(c, &l[0]);
	assert_int_equal(l[0].err, 0);
	assert_int_equal(l[0].ans.n, 1);
	assert_has(&l[0].ans, "192.0.2.4");
	assert_int_equal(ask(c, &l[1], "x.v4only.test", 0), 0);

	/* An IPv4-mapped AAAA is the IPv4 address, as a dialer is seen. */
	assert_int_equal(ask(c, &l[2], "x.mapped.test", 0), 1);
	wait_look(c, &l[2]);
	assert_int_equal(l[2].err, 0);
	assert_int_equal(l[2].ans.n, 1);
	assert_has(&l[2].ans, "192.0.2.9");
	ctx_free(c);
}

/* CNAME chains, more addresses than an answer holds. */
static void
test_answer_shapes(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[2];

	(void)state;
	memset(l, 0, sizeof(l));
	assert_int_equal(ask(c, &l[0], "www.cname.test", 0), 1);
	wait_look(c, &l[0]);
	assert_int_equal(l[0].err, 0);
	assert_int_equal(l[0].ans.n, 1);
	assert_has(&l[0].ans, "192.0.2.8");

	assert_int_equal(ask(c, &l[1], "many.big.test", 0), 1);
	wait_look(c, &l[1]);
	assert_int_equal(l[1].err, 0);
	assert_int_equal(l[1].ans.n, RESOLVE_MAX_ADDRS);
	assert_has(&l[1].ans, "198.51.100.16");
	ctx_free(c);
}

/* A truncated answer is asked again over TCP, and read from there. */
static void
test_truncated(void **state)
{
	struct ctx *c;
	struct look l;

	(void)state;
	c = ctx_new(1, 1000, 64);
	memset(&l, 0, sizeof(l));
	assert_int_equal(ask(c, &l, "t.tc.test", 0), 1);
	wait_look(c, &l);
	assert_int_equal(l.err, 0);
	assert_int_equal(l.ans.n, 1);
	assert_has(&l.ans, "192.0.2.7");
	assert_int_equal(c->fk[0].ntcp, 2);
	ctx_free(c);
}

static void
test_second_server(void **state)
{
	struct ctx *c = ctx_new(2, 100, 64);
	struct look l;

	(void)state;
	/* The first server never answers; the second does. */
	c->fk[0].silent = 1;
	memset(&l, 0, sizeof(l));
	assert_int_equal(ask(c, &l, "www.ok.test", 0), 1);
	wait_look(c, &l);
	assert_int_equal(l.err, 0);
	assert_int_equal(l.ans.n, 2);
	assert_int_equal(fake_count(&c->fk[1], "www.ok.test", 0), 2);
	ctx_free(c);
}

/* Two lookups of one name share its questions; the second waits too. */
static void
test_coalesce(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[3];

	(void)state;
	memset(l, 0, sizeof(l));
	assert_int_equal(ask(c, &l[0], "same.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[1], "Same.OK.test", RESOLVE_FRESH), 1);
	wait_looks(c, l, 2);
	assert_int_equal(l[0].err, 0);
	assert_int_equal(l[1].err, 0);
	assert_int_equal(l[1].ans.n, 2);
	assert_int_equal(fake_count(&c->fk[0], "same.ok.test", DNS_T_A), 1);
	assert_int_equal(fake_count(&c->fk[0], "same.ok.test", DNS_T_AAAA), 1);
	assert_int_equal(ask(c, &l[2], "same.ok.test", 0), 0);
	ctx_free(c);
}

static void
test_cancel(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[6];

	(void)state;
	memset(l, 0, sizeof(l));
	/* One of two waiters cancelled: the other is called, it never. */
	assert_int_equal(ask(c, &l[0], "x.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[1], "x.ok.test", 0), 1);
	resolve_cancel(l[0].req);
	wait_look(c, &l[1]);
	assert_false(l[0].called);
	assert_int_equal(l[1].err, 0);

	/* Cancelled from another waiter's callback. */
	l[4].cancel = &l[3];
	assert_int_equal(ask(c, &l[2], "y.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[4], "y.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[3], "y.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[5], "y.ok.test", 0), 1);
	wait_look(c, &l[5]);
	assert_true(l[2].called && l[4].called);
	assert_false(l[3].called);
	resolve_cancel(NULL);

	/* A lookup in flight with nobody waiting is freed with the resolver. */
	memset(&l[0], 0, sizeof(l[0]));
	assert_int_equal(ask(c, &l[0], "z.silent.test", 0), 1);
	wait_seen(c, 0, c->fk[0].nseen + 2);
	resolve_cancel(l[0].req);
	ctx_free(c);
	assert_false(l[0].called);
}

/* Callbacks that look up other names do not evict the entry they read. */
static void
test_busy(void **state)
{
	static const char *more[] = { "m1.ok.test", "m2.ok.test",
	    "m3.ok.test", "m4.ok.test", "m5.ok.test", NULL };
	struct ctx *c = ctx_new(1, 1000, 1);
	struct look l[2], then[5];

	(void)state;
	memset(l, 0, sizeof(l));
	memset(then, 0, sizeof(then));
	l[0].then = more;
	l[0].then_looks = then;
	assert_int_equal(ask(c, &l[0], "first.ok.test", 0), 1);
	assert_int_equal(ask(c, &l[1], "first.ok.test", 0), 1);
	wait_look(c, &l[1]);
	assert_int_equal(l[1].err, 0);
	assert_int_equal(l[1].ans.n, 2);
	assert_has(&l[1].ans, "2001:db8::1");
	wait_looks(c, then, 5);
	ctx_free(c);
}

/* max_entries bounds the cache: the coldest name is asked again. */
static void
test_lru(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 3);
	struct look l[8];
	char name[32];
	size_t i;

	(void)state;
	memset(l, 0, sizeof(l));
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "e%zu.ok.test", i);
		assert_int_equal(ask(c, &l[i], name, 0), 1);
		wait_look(c, &l[i]);
	}
	assert_int_equal(ask(c, &l[5], "e4.ok.test", 0), 0);
	assert_int_equal(ask(c, &l[6], "e0.ok.test", 0), 1);
	wait_look(c, &l[6]);
	assert_int_equal(l[6].err, 0);
	ctx_free(c);
}

/* Names that are no host name are never asked; their lookups fail. */
static void
test_not_a_name(void **state)
{
	struct ctx *c = ctx_new(1, 1000, 64);
	struct look l[2];

	(void)state;
	memset(l, 0, sizeof(l));
	assert_int_equal(ask(c, &l[0], "192.0.2.1", 0), 1);
	assert_int_equal(ask(c, &l[1], "bad name.test", 0), 1);
	wait_looks(c, l, 2);
	assert_int_equal(l[0].err, SL_ERR_IO);
	assert_int_equal(l[1].err, SL_ERR_IO);
	assert_int_equal(c->fk[0].nseen, 0);
	ctx_free(c);
}

/*
 * Past RESOLVE_INFLIGHT_MAX names, lookups wait rather than fail: the
 * fake holds every query, sees exactly the bound's worth, and once it
 * answers, every lookup succeeds.  One cancelled while queued is never
 * asked.
 */
static void
test_bound_queues(void **state)
{
	struct ctx *c = ctx_new(1, 5000, 4096);
	size_t n = RESOLVE_INFLIGHT_MAX + 50, i;
	struct look *l, gone;
	char name[32];

	(void)state;
	assert_non_null(l = calloc(n, sizeof(*l)));
	memset(&gone, 0, sizeof(gone));
	c->fk[0].hold = 1;
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "q%zu.ok.test", i);
		assert_int_equal(ask(c, &l[i], name, 0), 1);
		if (i == RESOLVE_INFLIGHT_MAX + 10) {
			assert_int_equal(ask(c, &gone, "gone.ok.test", 0), 1);
			resolve_cancel(gone.req);
		}
	}
	wait_seen(c, 0, 2 * RESOLVE_INFLIGHT_MAX);
	settle(c);
	assert_int_equal(c->fk[0].nseen, 2 * RESOLVE_INFLIGHT_MAX);
	for (i = 0; i < n; i++)
		assert_false(l[i].called);
	fake_release(&c->fk[0]);
	wait_looks(c, l, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(l[i].err, 0);
		assert_int_equal(l[i].ans.n, 2);
	}
	/* Started in the order asked. */
	for (i = 0; i < 2 * n; i += 2) {
		snprintf(name, sizeof(name), "q%zu.ok.test", i / 2);
		assert_string_equal(c->fk[0].seen[i].name, name);
	}
	assert_false(gone.called);
	assert_int_equal(fake_count(&c->fk[0], "gone.ok.test", 0), 0);
	assert_int_equal(c->fk[0].nseen, 2 * n);
	free(l);
	ctx_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_and_cache),
		cmocka_unit_test(test_negative),
		cmocka_unit_test(test_failures_not_cached),
		cmocka_unit_test(test_timeout_isolated),
		cmocka_unit_test(test_many_failures),
		cmocka_unit_test(test_one_family),
		cmocka_unit_test(test_answer_shapes),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_second_server),
		cmocka_unit_test(test_coalesce),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_busy),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_not_a_name),
		cmocka_unit_test(test_bound_queues),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
