/*
 * dns.c: the DNS filter.  A query is parsed strictly, judged by the
 * sandbox's policy, and either answered by us (NXDOMAIN for a name the
 * policy does not allow: the upstream resolver never sees it) or asked
 * upstream, and the answer filtered (rebinding, CNAME chains, ech) before
 * it is relayed.  Every address relayed is remembered for the firewall.
 */
#include "autoconf.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/outbuf.h"
#include "parse/dnsmsg.h"
#include "parse/sniff.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/dnsup.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "dns/dns.h"
#include "dns/dnsmem.h"

#define UDP_BATCH	32		/* datagrams per wake-up */
#define TCP_MSG_MAX	4096		/* a query never needs more */
#define TCP_IDLE_MS	10000
#define TCP_MAX_INFLIGHT 16		/* questions per TCP client at once */
#define AUDIT_PASS_PER_S 20		/* allowed answers audited per sandbox */

/* A record's "answers": DNS_KEPT_MAX addresses, quoted, with commas. */
#define DNS_ANSWERS_JSON	(DNS_KEPT_MAX * (ADDR_STRLEN + 3) + 4)

/* A client connection over TCP: length-prefixed messages both ways. */
struct dnstcp {
	struct loop	*l;
	TAILQ_ENTRY(dnstcp) link;
	int		 fd;
	struct event	*rev, *wev, *timer;
	struct sb_counter *counter;	/* counted against (ref) */
	struct sockaddr_storage from;
	socklen_t	 fromlen;
	uint8_t		 in[2 + TCP_MSG_MAX];
	size_t		 inlen;
	struct outbuf	 out;		/* answers, each with its length */
	unsigned	 inflight;
	int		 closed;	/* freed when inflight drops to 0 */
	int		 finishing;	/* reads no more; closes once answers are out */
};

/* One question asked upstream on a client's behalf. */
struct dnsq {
	struct loop	*l;
	TAILQ_ENTRY(dnsq) link;
	struct dns_query q;
	struct state	*st;		/* snapshot it is judged under (ref) */
	const struct sandbox *sb;
	const struct policy *pol;
	const char	*would_deny;	/* observe mode let the name through */
	struct sockaddr_storage from;	/* UDP client */
	socklen_t	 fromlen;
	int		 ufd;		/* UDP socket to answer on, or -1 */
	struct dnstcp	*tc;		/* TCP client, or NULL */
	struct dnsup	*up;
};

struct dns_worker {
	struct event	**uev;
	size_t		 nuev;
	struct evconnlistener **tlev;
	struct event	**tresume;
	size_t		 ntlev;
	TAILQ_HEAD(, dnstcp) tcps;
	TAILQ_HEAD(, dnsq) qs;
	unsigned long	 malformed;
	int		 draining;	/* dns_drain: nothing new is read */
};

/* One question or TCP client less in flight: a draining loop may end. */
static void
dns_gone(struct loop *l)
{
	l->ndns--;
	if (l->dns->draining)
		loop_conn_gone(l);
}

static const char *
qtype_name(uint16_t t, char *buf, size_t len)
{
	switch (t) {
	case DNS_T_A: return "A";
	case DNS_T_AAAA: return "AAAA";
	case DNS_T_CNAME: return "CNAME";
	case DNS_T_MX: return "MX";
	case DNS_T_TXT: return "TXT";
	case DNS_T_SRV: return "SRV";
	case DNS_T_PTR: return "PTR";
	case DNS_T_HTTPS: return "HTTPS";
	case DNS_T_SVCB: return "SVCB";
	case DNS_T_ANY: return "ANY";
	}
	snprintf(buf, len, "TYPE%u", t);
	return buf;
}

/* Types relayed for allowed names; others get an empty answer from us. */
static int
qtype_relayed(uint16_t t)
{
	switch (t) {
	case DNS_T_A: case DNS_T_AAAA: case DNS_T_CNAME: case DNS_T_HTTPS:
	case DNS_T_SVCB: case DNS_T_MX: case DNS_T_TXT: case DNS_T_SRV:
		return 1;
	}
	return 0;
}

/*
 * Allowed answers are audited at most AUDIT_PASS_PER_S a second per
 * sandbox; refusals always (the rate limit bounds them).
 */
static int
audit_allowed_now(struct sb_counter *cnt)
{
	uint64_t sec = mono_ms() / 1000;
	int ok;

	pthread_mutex_lock(&cnt->dns_mtx);
	if (cnt->audit_sec != sec) {
		cnt->audit_sec = sec;
		cnt->audit_n = 0;
	}
	ok = cnt->audit_n++ < AUDIT_PASS_PER_S;
	pthread_mutex_unlock(&cnt->dns_mtx);
	return ok;
}

static void
dns_audit(struct loop *l, const struct sandbox *sb, const struct policy *pol,
    const struct dns_query *q, const char *verdict, const char *reason,
    const char *would_deny, const struct dns_filter_result *res)
{
	char tbuf[16], a[ADDR_STRLEN], arr[DNS_ANSWERS_JSON];
	struct arec rec;
	size_t i, o = 0;

	arec_init(&rec);
	arec_str(&rec, "sandbox", sb->id);
	arec_str(&rec, "policy", pol->name);
	arec_int(&rec, "revision", (int64_t)pol->revision);
	arec_str(&rec, "name", q->name);
	arec_str(&rec, "qtype", qtype_name(q->qtype, tbuf, sizeof(tbuf)));
	arec_str(&rec, "verdict", verdict);
	arec_str(&rec, "reason", reason);
	if (would_deny != NULL)
		arec_str(&rec, "would_deny", would_deny);
	if (sb->id != NULL && sandbox_observing(sb, time(NULL)))
		arec_bool(&rec, "observe", 1);
	if (res != NULL) {
		arr[o++] = '[';
		for (i = 0; i < res->nkept; i++) {
			if (i > 0)
				arr[o++] = ',';
			addr_format(&res->kept[i].addr, a, sizeof(a));
			if (arec_json_str(arr, sizeof(arr) - 2, &o, a,
			    strlen(a)) < 0)
				break;
		}
		if (o > 1 && arr[o - 1] == ',')
			o--;
		arr[o++] = ']';
		arec_raw(&rec, "answers", arr, o);
		if (res->removed_addrs)
			arec_int(&rec, "removed", res->removed_addrs);
		if (res->cut_cnames)
			arec_int(&rec, "cname_cut", res->cut_cnames);
		if (res->stripped_ech)
			arec_int(&rec, "ech_stripped", res->stripped_ech);
		if (res->truncated)
			arec_bool(&rec, "truncated", 1);
	}
	if (sb->id != NULL && sb->counter != NULL)
		recent_add(&sb->counter->recent, "dns", &rec);
	audit_write_rec(l->audit, "dns", &rec);
}

/* ---- answering ---------------------------------------------------- */

static void tcp_free(struct dnstcp *t);
static void tcp_maybe_done(struct dnstcp *t);
static void tcp_write_cb(evutil_socket_t, short, void *);

static void
tcp_send(struct dnstcp *t, const uint8_t *msg, size_t len)
{
	uint8_t lenbuf[2] = { (uint8_t)(len >> 8), (uint8_t)len };

	if (t->closed || t->fd == -1)
		return;
	/* Length and message go together, or neither (the stream stays framed). */
	if (outbuf_reserve(&t->out, len + 2) != 0)
		return;
	outbuf_append(&t->out, lenbuf, 2);
	outbuf_append(&t->out, msg, len);
	tcp_write_cb(t->fd, EV_WRITE, t);
}

static void
reply(struct loop *l, int ufd, const struct sockaddr_storage *from,
    socklen_t fromlen, struct dnstcp *tc, const uint8_t *msg, size_t len)
{
	if (tc != NULL)
		tcp_send(tc, msg, len);
	else
		sendto(ufd, msg, len, MSG_DONTWAIT, (const struct sockaddr *)from,
		    fromlen);
}

static void
reply_rcode(struct loop *l, int ufd, const struct sockaddr_storage *from,
    socklen_t fromlen, struct dnstcp *tc, const struct dns_query *q, int rcode)
{
	uint8_t out[DNS_HDR_LEN + NAME_BUFSZ + 32];
	size_t len;

	if (dns_build_error(q, rcode, out, sizeof(out), &len) == 0)
		reply(l, ufd, from, fromlen, tc, out, len);
}

/*
 * A name the policy does not allow: NXDOMAIN, and for a client that
 * speaks EDNS an Extended DNS Error saying it was blocked and by what, so
 * an agent does not take it for a broken network.
 */
static void
reply_denied(struct loop *l, int ufd, const struct sockaddr_storage *from,
    socklen_t fromlen, struct dnstcp *tc, const struct dns_query *q,
    const struct policy *pol)
{
	uint8_t out[DNS_HDR_LEN + NAME_BUFSZ + 48 + DNS_EDE_TEXT_MAX];
	char text[DNS_EDE_TEXT_MAX + 1];
	size_t len;

	snprintf(text, sizeof(text), "sluice: not allowed by the egress policy "
	    "%s (not-allowed)", pol->name);
	if (dns_build_error_ede(q, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, text,
	    out, sizeof(out), &len) == 0)
		reply(l, ufd, from, fromlen, tc, out, len);
}

/* ---- policy hooks for the answer filter ---------------------------- */

static int
name_ok(const char *name, void *arg)
{
	struct dnsq *dq = arg;
	const char *why = policy_name_refusal(dq->pol, name);

	/* Observing (the query itself was let through): the same for CNAMEs. */
	return why == NULL || (dq->would_deny != NULL &&
	    strcmp(why, "not-allowed") == 0);
}

static int
addr_ok(const struct sl_addr *a, void *arg)
{
	struct dnsq *dq = arg;
	struct sl_addr c;

	addr_canonical(a, &c);
	if (state_is_own_addr(dq->st, &c))
		return 0;
	return policy_addr_answerable(dq->pol, &c);
}

static void
dnsq_free(struct dnsq *dq)
{
	struct dns_worker *dw = dq->l->dns;

	TAILQ_REMOVE(&dw->qs, dq, link);
	dns_gone(dq->l);
	dnsup_cancel(dq->up);
	if (dq->tc != NULL) {
		dq->tc->inflight--;
		if (dq->tc->closed && dq->tc->inflight == 0)
			tcp_free(dq->tc);
		else
			tcp_maybe_done(dq->tc);
	}
	state_unref(dq->st);
	free(dq);
}

static void
upstream_cb(int err, const uint8_t *resp, size_t len, uint16_t id, void *arg)
{
	struct dnsq *dq = arg;
	struct loop *l = dq->l;
	struct dns_filter_ops ops = { name_ok, addr_ok, dq };
	struct dns_filter_result res;
	uint8_t out[DNS_MSG_MAX];
	size_t outlen, i;
	time_t now = mono_s();
	const char *sbid = dq->sb->id ? dq->sb->id : "";

	dq->up = NULL;		/* it freed itself */
	if (err != 0 || dns_filter_answer(resp, len, &dq->q, id, dq->tc == NULL,
	    &ops, out, sizeof(out), &outlen, &res) != 0) {
		reply_rcode(l, dq->ufd, &dq->from, dq->fromlen, dq->tc, &dq->q,
		    DNS_RCODE_SERVFAIL);
		mtable_add(&l->metrics.dns, "servfail", NULL);
		dns_audit(l, dq->sb, dq->pol, &dq->q, "servfail", err != 0 ?
		    "upstream-unavailable" : "upstream-malformed",
		    dq->would_deny, NULL);
		dnsq_free(dq);
		return;
	}
	/* Remember before answering: the client connects right after. */
	for (i = 0; i < res.nkept; i++) {
		dnsmem_add(l->dnsmem, sbid, dq->q.name, &res.kept[i].addr,
		    res.kept[i].ttl, now);
		if (strcmp(res.kept[i].name, dq->q.name) != 0)
			dnsmem_add(l->dnsmem, sbid, res.kept[i].name,
			    &res.kept[i].addr, res.kept[i].ttl, now);
	}
	reply(l, dq->ufd, &dq->from, dq->fromlen, dq->tc, out, outlen);
	mtable_add(&l->metrics.dns, "answered", NULL);
	if (res.removed_addrs || res.cut_cnames || res.stripped_ech ||
	    audit_allowed_now(dq->sb->counter))
		dns_audit(l, dq->sb, dq->pol, &dq->q, "answer", dq->would_deny ?
		    "observe" : "allow-name", dq->would_deny, &res);
	dnsq_free(dq);
}

/* ---- one query ------------------------------------------------------ */

/* The rate limit; refusals beyond it are audited once a second at most. */
static int
rate_ok(struct loop *l, const struct sandbox *sb, const struct policy *pol,
    const struct dns_query *q)
{
	struct sb_counter *cnt = sb->counter;
	uint64_t t = mono_ms();
	unsigned dropped = 0;
	int ok, audit = 0;

	pthread_mutex_lock(&cnt->dns_mtx);
	if (!cnt->dns_rl_init) {
		double qps = l->cfg->limits.dns_qps;

		ratelimit_init(&cnt->dns_rl, qps, qps, t);
		cnt->dns_rl_init = 1;
	}
	ok = ratelimit_take(&cnt->dns_rl, t);
	if (!ok) {
		cnt->refused++;
		if (t - cnt->refused_audit_ms >= 1000) {
			cnt->refused_audit_ms = t;
			dropped = cnt->refused;
			cnt->refused = 0;
			audit = 1;
		}
	}
	pthread_mutex_unlock(&cnt->dns_mtx);
	if (audit) {
		char tbuf[16];
		struct arec rec;

		arec_init(&rec);
		arec_str(&rec, "sandbox", sb->id);
		arec_str(&rec, "policy", pol->name);
		arec_int(&rec, "revision", (int64_t)pol->revision);
		arec_str(&rec, "name", q->name);
		arec_str(&rec, "qtype", qtype_name(q->qtype, tbuf,
		    sizeof(tbuf)));
		arec_str(&rec, "verdict", "refused");
		arec_str(&rec, "reason", "rate-limit");
		arec_int(&rec, "refused_since_last", (int64_t)dropped);
		audit_write_rec(l->audit, "dns", &rec);
	}
	return ok;
}

/*
 * A query we cannot parse gets FORMERR (NOTIMP for an opcode other than
 * QUERY) at once, so the client does not wait out its timeout.  Only when
 * the header is readable and QR is clear (never an answer to an answer),
 * within the sandbox's rate limit, and never longer than the query: no
 * reflector gains from it.  Not audited: nothing was asked of anyone.
 */
static void
malformed_reply(struct loop *l, const uint8_t *buf, size_t len, int ufd,
    const struct sockaddr_storage *from, socklen_t fromlen, struct dnstcp *tc)
{
	uint8_t out[DNS_HDR_LEN + NAME_BUFSZ + 32];
	const struct sandbox *sb;
	struct dns_query none;
	struct sl_addr src;
	size_t outlen;

	if (dns_build_formerr(buf, len, out, sizeof(out), &outlen) != 0 ||
	    addr_from_sockaddr((const struct sockaddr *)from, fromlen, &src,
	    NULL) != 0) {
		mtable_add(&l->metrics.dns, "dropped", NULL);
		return;
	}
	addr_canonical(&src, &src);
	sb = state_sandbox_for(l->st, &src);
	memset(&none, 0, sizeof(none));	/* for the rate limit's audit record */
	if (!rate_ok(l, sb, sb->policy, &none)) {
		mtable_add(&l->metrics.dns, "ratelimited", NULL);
		return;		/* over the limit: not even an error */
	}
	reply(l, ufd, from, fromlen, tc, out, outlen);
	mtable_add(&l->metrics.dns, "formerr", NULL);
}

static void
handle_query(struct loop *l, const uint8_t *buf, size_t len, int ufd,
    const struct sockaddr_storage *from, socklen_t fromlen, struct dnstcp *tc)
{
	struct dns_worker *dw = l->dns;
	const struct config *cfg = l->cfg;
	const struct sandbox *sb;
	const struct policy *pol;
	struct dns_query q;
	struct sl_addr src;
	struct dnsq *dq;
	const char *why;

	if (dns_query_parse(buf, len, &q) != PARSE_COMPLETE) {
		dw->malformed++;
		malformed_reply(l, buf, len, ufd, from, fromlen, tc);
		if (tc != NULL)
			tc->finishing = 1;	/* answers owed still go out */
		return;
	}
	if (addr_from_sockaddr((const struct sockaddr *)from, fromlen, &src,
	    NULL) != 0)
		return;
	addr_canonical(&src, &src);
	sb = state_sandbox_for(l->st, &src);
	pol = sb->policy;
	if (!rate_ok(l, sb, pol, &q)) {
		mtable_add(&l->metrics.dns, "ratelimited", NULL);
		reply_rcode(l, ufd, from, fromlen, tc, &q, DNS_RCODE_REFUSED);
		return;
	}
	why = q.name[0] == '\0' ? "invalid-name" :
	    policy_name_refusal(pol, q.name);
	/* Observe mode: a name no rule allows yet is answered, and noted. */
	if (why != NULL && (strcmp(why, "not-allowed") != 0 ||
	    !sandbox_observing(sb, time(NULL)))) {
		reply_denied(l, ufd, from, fromlen, tc, &q, pol);
		mtable_add(&l->metrics.dns, "nxdomain", NULL);
		dns_audit(l, sb, pol, &q, "nxdomain", "not-allowed", NULL, NULL);
		return;
	}
	if (!qtype_relayed(q.qtype)) {
		reply_rcode(l, ufd, from, fromlen, tc, &q, DNS_RCODE_NOERROR);
		mtable_add(&l->metrics.dns, "nodata", NULL);
		dns_audit(l, sb, pol, &q, "nodata", "type-not-relayed", why,
		    NULL);
		return;
	}
	if (tc != NULL && tc->inflight >= TCP_MAX_INFLIGHT) {
		mtable_add(&l->metrics.dns, "refused", NULL);
		reply_rcode(l, ufd, from, fromlen, tc, &q, DNS_RCODE_REFUSED);
		return;
	}
	if ((dq = calloc(1, sizeof(*dq))) == NULL) {
		reply_rcode(l, ufd, from, fromlen, tc, &q, DNS_RCODE_SERVFAIL);
		return;
	}
	dq->l = l;
	dq->q = q;
	dq->st = state_ref(l->st);
	dq->sb = sb;
	dq->pol = pol;
	dq->would_deny = why;
	dq->from = *from;
	dq->fromlen = fromlen;
	dq->ufd = ufd;
	dq->tc = tc;
	if (tc != NULL)
		tc->inflight++;
	TAILQ_INSERT_TAIL(&dw->qs, dq, link);
	l->ndns++;
	dq->up = dnsup_start(l->base, cfg->resolvers, cfg->nresolvers, &q,
	    2000, upstream_cb, dq);
	if (dq->up == NULL) {
		reply_rcode(l, ufd, from, fromlen, tc, &q, DNS_RCODE_SERVFAIL);
		dnsq_free(dq);
	}
}

/* ---- UDP ------------------------------------------------------------ */

static void
udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct loop *l = arg;
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint8_t buf[DNS_MSG_MAX];
	ssize_t n;
	int i;

	for (i = 0; i < UDP_BATCH; i++) {
		fromlen = sizeof(from);
		n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
		    (struct sockaddr *)&from, &fromlen);
		if (n < 0)
			return;
		handle_query(l, buf, (size_t)n, fd, &from, fromlen, NULL);
	}
}

/* ---- TCP ------------------------------------------------------------ */

static void
tcp_free(struct dnstcp *t)
{
	struct dns_worker *dw = t->l->dns;

	if (t->fd != -1) {
		TAILQ_REMOVE(&dw->tcps, t, link);
		dns_gone(t->l);
		event_free(t->rev);
		event_free(t->wev);
		event_free(t->timer);
		close(t->fd);
		t->fd = -1;
		atomic_fetch_sub(&t->counter->conns, 1);
		sb_counter_unref(t->counter);
		t->counter = NULL;
	}
	t->closed = 1;
	if (t->inflight > 0)
		return;		/* the last question frees it */
	outbuf_free(&t->out);
	free(t);
}

static void
tcp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnstcp *t = arg;
	ssize_t n;

	while (outbuf_pending(&t->out) > 0) {
		n = send(t->fd, t->out.buf + t->out.off, outbuf_pending(&t->out),
		    MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				event_add(t->wev, NULL);
				return;
			}
			/* Freed on the next loop turn: a reader may be running. */
			t->closed = 1;
			event_del(t->wev);
			event_active(t->timer, EV_TIMEOUT, 0);
			return;
		}
		t->out.off += (size_t)n;
	}
	event_del(t->wev);
	tcp_maybe_done(t);
}

/* A finishing connection closes once nothing is owed to the client. */
static void
tcp_maybe_done(struct dnstcp *t)
{
	if (t->finishing && !t->closed && t->inflight == 0 &&
	    outbuf_pending(&t->out) == 0)
		tcp_free(t);
}

/* No more queries are read (end of stream, or a malformed one). */
static void
tcp_finish(struct dnstcp *t)
{
	t->finishing = 1;
	if (t->rev != NULL)
		event_del(t->rev);
	tcp_maybe_done(t);
}

static void
tcp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dnstcp *t = arg;
	struct timeval tv = { TCP_IDLE_MS / 1000, 0 };
	size_t mlen;
	ssize_t n;

	n = recv(fd, t->in + t->inlen, sizeof(t->in) - t->inlen, 0);
	if (n == 0) {
		tcp_finish(t);		/* half-closed: its answers still go */
		return;
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		tcp_free(t);
		return;
	}
	if (n < 0)
		return;
	t->inlen += (size_t)n;
	evtimer_add(t->timer, &tv);
	while (t->inlen >= 2 && !t->closed && !t->finishing) {
		mlen = (size_t)t->in[0] << 8 | t->in[1];
		if (mlen < DNS_HDR_LEN || mlen > TCP_MSG_MAX) {
			t->l->dns->malformed++;
			t->finishing = 1;
			break;
		}
		if (t->inlen < 2 + mlen)
			return;
		handle_query(t->l, t->in + 2, mlen, -1, &t->from, t->fromlen, t);
		memmove(t->in, t->in + 2 + mlen, t->inlen - 2 - mlen);
		t->inlen -= 2 + mlen;
	}
	if (t->closed)
		tcp_free(t);
	else if (t->finishing)
		tcp_finish(t);	/* a malformed query ends the connection */
}

static void
tcp_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	tcp_free(arg);
}

static void
tcp_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct loop *l = arg;
	size_t i;

	for (i = 0; i < l->dns->ntlev; i++)
		if (l->dns->tlev[i] == lev)
			loop_pause_listener(l, lev, l->dns->tresume[i]);
}

/* A sandbox's DNS connections count against its connection limit. */
static struct sb_counter *
tcp_count(struct loop *l, struct sockaddr *sa, int salen)
{
	const struct sandbox *sb;
	struct sb_counter *cnt;
	struct sl_addr src;

	if (addr_from_sockaddr(sa, (socklen_t)salen, &src, NULL) != 0)
		return NULL;
	addr_canonical(&src, &src);
	sb = state_sandbox_for(l->st, &src);
	cnt = sb->counter;
	if (atomic_fetch_add(&cnt->conns, 1) >= l->cfg->limits.connections) {
		atomic_fetch_sub(&cnt->conns, 1);
		return NULL;
	}
	atomic_fetch_add(&cnt->refs, 1);
	return cnt;
}

static void
tcp_audit_refused(struct loop *l, struct sockaddr *sa, int salen)
{
	const struct sandbox *sb;
	char a[ADDR_STRLEN];
	struct sl_addr src;
	uint16_t port;

	if (addr_from_sockaddr(sa, (socklen_t)salen, &src, &port) != 0)
		return;
	addr_canonical(&src, &src);
	sb = state_sandbox_for(l->st, &src);
	audit_write(l->audit, "conn", json_pack(
	    "{s:s?, s:s, s:I, s:s, s:s, s:i, s:s, s:s, s:s}",
	    "sandbox", sb->id, "policy", sb->policy->name,
	    "revision", (json_int_t)sb->policy->revision, "listener", "dns",
	    "src", addr_format(&src, a, sizeof(a)), "src_port", port,
	    "proto", "dns-tcp", "action", "deny", "reason", "connection-limit"));
}

static void
tcp_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct loop *l = arg;
	struct timeval tv = { TCP_IDLE_MS / 1000, 0 };
	struct linger lg = { 1, 0 };
	struct sb_counter *cnt;
	struct dnstcp *t;

	if ((cnt = tcp_count(l, sa, salen)) == NULL) {
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);	/* over its limit: a reset */
		tcp_audit_refused(l, sa, salen);
		return;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		atomic_fetch_sub(&cnt->conns, 1);
		sb_counter_unref(cnt);
		close(fd);
		return;
	}
	t->l = l;
	t->counter = cnt;
	t->fd = fd;
	memcpy(&t->from, sa, (size_t)salen < sizeof(t->from) ? (size_t)salen :
	    sizeof(t->from));
	t->fromlen = (socklen_t)salen;
	t->rev = event_new(l->base, fd, EV_READ | EV_PERSIST, tcp_read_cb, t);
	t->wev = event_new(l->base, fd, EV_WRITE, tcp_write_cb, t);
	t->timer = evtimer_new(l->base, tcp_timer_cb, t);
	TAILQ_INSERT_TAIL(&l->dns->tcps, t, link);
	l->ndns++;
	if (t->rev == NULL || t->wev == NULL || t->timer == NULL) {
		tcp_free(t);
		return;
	}
	event_add(t->rev, NULL);
	evtimer_add(t->timer, &tv);
}

/* ---- the worker's service ------------------------------------------ */

int
dns_start(struct loop *l, const int *udp, size_t nudp, int *tcp, size_t ntcp)
{
	struct dns_worker *dw;
	size_t i;

	if ((dw = calloc(1, sizeof(*dw))) == NULL)
		return SL_ERR_NOMEM;
	TAILQ_INIT(&dw->tcps);
	TAILQ_INIT(&dw->qs);
	l->dns = dw;
	dw->uev = calloc(nudp ? nudp : 1, sizeof(*dw->uev));
	dw->tlev = calloc(ntcp ? ntcp : 1, sizeof(*dw->tlev));
	dw->tresume = calloc(ntcp ? ntcp : 1, sizeof(*dw->tresume));
	if (dw->uev == NULL || dw->tlev == NULL || dw->tresume == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < nudp; i++) {
		dw->uev[i] = event_new(l->base, udp[i], EV_READ | EV_PERSIST,
		    udp_read_cb, l);
		if (dw->uev[i] == NULL || event_add(dw->uev[i], NULL) != 0)
			return SL_ERR_NOMEM;
		dw->nuev++;
	}
	for (i = 0; i < ntcp; i++) {
		dw->tlev[i] = evconnlistener_new(l->base, tcp_accept_cb, l,
		    LEV_OPT_CLOSE_ON_FREE, -1, tcp[i]);
		if (dw->tlev[i] == NULL)
			return SL_ERR_IO;
		tcp[i] = -1;	/* the listener owns it now */
		dw->ntlev++;
		evconnlistener_set_error_cb(dw->tlev[i], tcp_accept_error_cb);
		dw->tresume[i] = loop_resume_event(l, dw->tlev[i]);
	}
	return 0;
}

void
dns_drain(struct loop *l)
{
	struct dns_worker *dw = l->dns;
	struct dnstcp *t, *next;
	size_t i;

	if (dw == NULL || dw->draining)
		return;
	dw->draining = 1;
	for (i = 0; i < dw->nuev; i++)
		event_del(dw->uev[i]);	/* the socket stays: answers go out */
	for (i = 0; i < dw->ntlev; i++) {
		if (dw->tresume[i] != NULL)
			event_free(dw->tresume[i]);
		dw->tresume[i] = NULL;
		evconnlistener_free(dw->tlev[i]);
	}
	dw->ntlev = 0;
	for (t = TAILQ_FIRST(&dw->tcps); t != NULL; t = next) {
		next = TAILQ_NEXT(t, link);
		tcp_finish(t);	/* may free it */
	}
}

void
dns_stop(struct loop *l)
{
	struct dns_worker *dw = l->dns;
	struct dnstcp *t;
	struct dnsq *dq;
	size_t i;

	if (dw == NULL)
		return;
	dw->draining = 0;	/* the loop is told by the caller */
	while ((dq = TAILQ_FIRST(&dw->qs)) != NULL)
		dnsq_free(dq);
	while ((t = TAILQ_FIRST(&dw->tcps)) != NULL)
		tcp_free(t);
	for (i = 0; i < dw->nuev; i++)
		event_free(dw->uev[i]);
	for (i = 0; i < dw->ntlev; i++) {
		if (dw->tresume[i] != NULL)
			event_free(dw->tresume[i]);
		evconnlistener_free(dw->tlev[i]);
	}
	free(dw->uev);
	free(dw->tlev);
	free(dw->tresume);
	free(dw);
	l->dns = NULL;
}
