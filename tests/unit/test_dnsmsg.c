/* test_dnsmsg.c: the DNS query parser, the answer filter, the rate limit. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "util/addr.h"
#include "util/err.h"
#include "parse/dnsmsg.h"
#include "parse/sniff.h"

#define UPID	0x4242		/* the id of our upstream queries */
#define QID	0x1111		/* the sandbox's id */
#define OUTCAP	70000

/*
 * A packet builder.
 */
struct pkt {
	uint8_t	b[OUTCAP];
	size_t	len;
};

static struct pkt *
pkt_new(void)
{
	struct pkt *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	return p;
}

static void
p_u8(struct pkt *p, unsigned v)
{
	assert_true(p->len < sizeof(p->b));
	p->b[p->len++] = (uint8_t)v;
}

static void
p_u16(struct pkt *p, unsigned v)
{
	p_u8(p, v >> 8);
	p_u8(p, v & 0xff);
}

static void
p_u32(struct pkt *p, uint32_t v)
{
	p_u16(p, v >> 16);
	p_u16(p, v & 0xffff);
}

static void
p_bytes(struct pkt *p, const void *d, size_t n)
{
	assert_true(p->len + n <= sizeof(p->b));
	memcpy(p->b + p->len, d, n);
	p->len += n;
}

/* Labels of a dotted name, without the root byte ("" writes nothing). */
static void
p_labels(struct pkt *p, const char *name)
{
	const char *dot;
	size_t n;

	while (*name != '\0') {
		dot = strchr(name, '.');
		n = dot != NULL ? (size_t)(dot - name) : strlen(name);
		p_u8(p, (unsigned)n);
		p_bytes(p, name, n);
		name += n + (dot != NULL);
	}
}

/* A whole name, uncompressed; "" is the root. */
static void
p_name(struct pkt *p, const char *name)
{
	p_labels(p, name);
	p_u8(p, 0);
}

static void
p_ptr(struct pkt *p, size_t off)
{
	p_u16(p, 0xc000 | (unsigned)off);
}

static void
p_hdr(struct pkt *p, unsigned id, unsigned flags, unsigned qd, unsigned an,
    unsigned ns, unsigned ar)
{
	p->len = 0;
	p_u16(p, id);
	p_u16(p, flags);
	p_u16(p, qd);
	p_u16(p, an);
	p_u16(p, ns);
	p_u16(p, ar);
}

static void
p_question(struct pkt *p, const char *name, unsigned type, unsigned class)
{
	p_name(p, name);
	p_u16(p, type);
	p_u16(p, class);
}

/* Type, class, TTL and an RDLENGTH that p_end fills in; returns its offset. */
static size_t
p_fixed(struct pkt *p, unsigned type, uint32_t ttl)
{
	size_t at;

	p_u16(p, type);
	p_u16(p, 1);
	p_u32(p, ttl);
	at = p->len;
	p_u16(p, 0);
	return at;
}

static void
p_end(struct pkt *p, size_t at)
{
	size_t n = p->len - at - 2;

	p->b[at] = (uint8_t)(n >> 8);
	p->b[at + 1] = (uint8_t)n;
}

/* A record owned by the name at off (a pointer); returns the RDATA offset. */
static size_t
p_rr_at(struct pkt *p, size_t off, unsigned type, uint32_t ttl)
{
	p_ptr(p, off);
	return p_fixed(p, type, ttl);
}

static void
p_opt(struct pkt *p, unsigned udp, uint32_t ttl)
{
	p_u8(p, 0);
	p_u16(p, DNS_T_OPT);
	p_u16(p, udp);
	p_u32(p, ttl);
	p_u16(p, 0);
}

static void
p_a(struct pkt *p, size_t owner, const char *text)
{
	size_t at = p_rr_at(p, owner, DNS_T_A, 300);
	uint8_t b[4];

	assert_int_equal(inet_pton(AF_INET, text, b), 1);
	p_bytes(p, b, 4);
	p_end(p, at);
}

static void
p_aaaa(struct pkt *p, size_t owner, const char *text)
{
	size_t at = p_rr_at(p, owner, DNS_T_AAAA, 300);
	uint8_t b[16];

	assert_int_equal(inet_pton(AF_INET6, text, b), 1);
	p_bytes(p, b, 16);
	p_end(p, at);
}

/* A query: RD set, optionally EDNS with udp size and TTL word. */
static void
mkquery(struct pkt *p, const char *name, unsigned type, int edns,
    unsigned udp, uint32_t optttl)
{
	p_hdr(p, QID, DNS_F_RD, 1, 0, 0, edns ? 1 : 0);
	p_question(p, name, type, DNS_C_IN);
	if (edns)
		p_opt(p, udp, optttl);
}

static void
parse_ok(const struct pkt *p, struct dns_query *q)
{
	memset(q, 0x5a, sizeof(*q));
	assert_int_equal(dns_query_parse(p->b, p->len, q), PARSE_COMPLETE);
}

static void
parse_bad(const struct pkt *p)
{
	struct dns_query q, before;

	memset(&q, 0x5a, sizeof(q));
	before = q;
	assert_int_equal(dns_query_parse(p->b, p->len, &q), PARSE_INVALID);
	assert_memory_equal(&q, &before, sizeof(q));
}

/* The query of the filter tests, parsed. */
static void
query_for(struct dns_query *q, const char *name, unsigned type, int edns,
    unsigned udp, uint32_t optttl)
{
	struct pkt *p = pkt_new();

	mkquery(p, name, type, edns, udp, optttl);
	parse_ok(p, q);
	free(p);
}

/*
 * A verifier for what we write: a response to q, no compression, counts
 * that match, records framed, known RDATA well formed, no ech, an OPT
 * exactly when q had EDNS, nothing trailing.  It keeps what it read.
 */
struct orr {
	char		 owner[256];
	uint16_t	 type;
	uint32_t	 ttl;
	const uint8_t	*rd;
	size_t		 rdlen;
};
static struct orr got[128];
static unsigned ngot;

/* An uncompressed name at *pos within end, as dotted text; 0 or -1. */
static int
v_name(const uint8_t *m, size_t end, size_t *pos, char *text)
{
	size_t p = *pos, n = 0, total = 1;
	unsigned c;

	text[0] = '\0';
	while (p < end && (c = m[p]) != 0) {
		if (c > 63 || c >= end - p || (total += c + 1) > 255)
			return -1;
		if (n > 0)
			text[n++] = '.';
		memcpy(text + n, m + p + 1, c);
		n += c;
		text[n] = '\0';
		p += c + 1;
	}
	if (p >= end)
		return -1;
	*pos = p + 1;
	return 0;
}

static int
v_rdata(const uint8_t *m, uint16_t type, size_t p, size_t end)
{
	char t[256];
	long prev = -1;
	unsigned key, vlen;

	switch (type) {
	case DNS_T_A:
		return end - p == 4 ? 0 : -1;
	case DNS_T_AAAA:
		return end - p == 16 ? 0 : -1;
	case DNS_T_MX:
	case DNS_T_SRV:
		p += type == DNS_T_MX ? 2 : 6;
		/* FALLTHROUGH */
	case DNS_T_CNAME:
	case DNS_T_NS:
	case DNS_T_PTR:
		return p <= end && v_name(m, end, &p, t) == 0 && p == end ? 0 : -1;
	case DNS_T_TXT:
		if (p == end)
			return -1;
		while (p < end)
			p += m[p] + 1u;
		return p == end ? 0 : -1;
	case DNS_T_SVCB:
	case DNS_T_HTTPS:
		if (end - p < 2)
			return -1;
		p += 2;
		if (v_name(m, end, &p, t) != 0)
			return -1;
		while (p < end) {
			if (end - p < 4)
				return -1;
			key = (unsigned)m[p] << 8 | m[p + 1];
			vlen = (unsigned)m[p + 2] << 8 | m[p + 3];
			p += 4;
			if ((long)key <= prev || key == 5 || vlen > end - p ||
			    (key == 4 && (vlen == 0 || vlen % 4)) ||
			    (key == 6 && (vlen == 0 || vlen % 16)))
				return -1;
			prev = key;
			p += vlen;
		}
		return 0;
	}
	return -1;
}

static unsigned
verify_response(const uint8_t *m, size_t len, const struct dns_query *q)
{
	unsigned an, ar, i;
	size_t p = DNS_HDR_LEN, rdlen;
	char name[256];
	uint16_t flags;

	assert_true(len >= DNS_HDR_LEN);
	flags = (uint16_t)(m[2] << 8 | m[3]);
	assert_int_equal(m[0] << 8 | m[1], q->id);
	assert_true(flags & DNS_F_QR);
	assert_true(flags & DNS_F_RA);
	assert_int_equal(flags & (DNS_F_OPCODE | DNS_F_AA | DNS_F_AD), 0);
	assert_int_equal(flags & DNS_F_RD, q->flags & DNS_F_RD);
	assert_int_equal(m[4] << 8 | m[5], 1);
	an = (unsigned)(m[6] << 8 | m[7]);
	assert_int_equal(m[8] << 8 | m[9], 0);
	ar = (unsigned)(m[10] << 8 | m[11]);
	assert_int_equal(ar, q->has_edns ? 1 : 0);
	assert_int_equal(v_name(m, len, &p, name), 0);
	assert_string_equal(name, q->echo_name);
	assert_true(len - p >= 4);
	assert_int_equal(m[p] << 8 | m[p + 1], q->qtype);
	assert_int_equal(m[p + 2] << 8 | m[p + 3], q->qclass);
	p += 4;
	assert_true(an <= sizeof(got) / sizeof(got[0]));
	for (i = 0; i < an; i++) {
		struct orr *o = &got[i];

		assert_int_equal(v_name(m, len, &p, o->owner), 0);
		assert_true(len - p >= 10);
		o->type = (uint16_t)(m[p] << 8 | m[p + 1]);
		assert_int_equal(m[p + 2] << 8 | m[p + 3], DNS_C_IN);
		o->ttl = (uint32_t)m[p + 4] << 24 | (uint32_t)m[p + 5] << 16 |
		    (uint32_t)m[p + 6] << 8 | m[p + 7];
		assert_true(o->ttl < 0x80000000u);
		rdlen = (size_t)(m[p + 8] << 8 | m[p + 9]);
		p += 10;
		assert_true(rdlen <= len - p);
		o->rd = m + p;
		o->rdlen = rdlen;
		if (v_rdata(m, o->type, p, p + rdlen) != 0)
			fail_msg("record %u type %u malformed", i, o->type);
		p += rdlen;
	}
	ngot = an;
	if (q->has_edns) {
		static const uint8_t opt[] = { 0, 0, 41, 0x04, 0xd0, 0, 0 };

		assert_true(len - p == 11);
		assert_memory_equal(m + p, opt, sizeof(opt));
		assert_int_equal(m[p + 7], q->dnssec_ok ? 0x80 : 0);
		assert_int_equal(m[p + 8] | m[p + 9] | m[p + 10], 0);
		p += 11;
	}
	assert_int_equal(p, len);
	return an;
}

/* Policy: public addresses only; no name under evil.example. */
static int
addr_public(const struct sl_addr *a, void *arg)
{
	(void)arg;
	return addr_classify(a, NULL) == ADDR_PUBLIC;
}

static int
name_not_evil(const char *name, void *arg)
{
	size_t n = strlen(name);

	(void)arg;
	return !(n >= 12 && strcmp(name + n - 12, "evil.example") == 0 &&
	    (n == 12 || name[n - 13] == '.'));
}

static const struct dns_filter_ops ops = { name_not_evil, addr_public, NULL };

static uint8_t out[OUTCAP], out2[OUTCAP];
static size_t outlen;
static struct dns_filter_result res;

/*
 * Filters; on success verifies the output, and that filtering the output
 * again (as if upstream had sent it) gives the same bytes.
 */
static int
filter(const struct pkt *p, const struct dns_query *q, int udp)
{
	struct dns_filter_result r2;
	size_t len2;
	int r;

	memset(&res, 0x5a, sizeof(res));
	r = dns_filter_answer(p->b, p->len, q, UPID, udp, &ops, out,
	    sizeof(out), &outlen, &res);
	if (r != 0)
		return r;
	verify_response(out, outlen, q);
	assert_int_equal(ngot, (unsigned)(out[6] << 8 | out[7]));
	assert_true(outlen <= (udp ? q->udp_size : DNS_MSG_MAX));
	assert_int_equal(!!(out[2] & 0x02), res.truncated);
	assert_int_equal(dns_filter_answer(out, outlen, q, q->id, udp, &ops,
	    out2, sizeof(out2), &len2, &r2), 0);
	assert_int_equal(len2, outlen);
	assert_memory_equal(out2, out, outlen);
	/* The verifier's pointers are into out: read it again. */
	verify_response(out, outlen, q);
	return 0;
}

/* A response header and q's question (name as given), 12 + ... bytes. */
static void
resp_start(struct pkt *p, const char *name, unsigned type, unsigned flags,
    unsigned an, unsigned ns, unsigned ar)
{
	p_hdr(p, UPID, DNS_F_QR | DNS_F_RD | DNS_F_RA | flags, 1, an, ns, ar);
	p_question(p, name, type, DNS_C_IN);
}

static void
expect_addr(const struct sl_addr *a, const char *text)
{
	char buf[ADDR_STRLEN];

	assert_string_equal(addr_format(a, buf, sizeof(buf)), text);
}

/*
 * Queries
 */

static void
test_query_plain(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;

	(void)state;
	mkquery(p, "WWW.Example.COM", DNS_T_A, 0, 0, 0);
	parse_ok(p, &q);
	assert_int_equal(q.id, QID);
	assert_int_equal(q.flags, DNS_F_RD);
	assert_string_equal(q.name, "www.example.com");
	assert_string_equal(q.echo_name, "WWW.Example.COM");
	assert_int_equal(q.qtype, DNS_T_A);
	assert_int_equal(q.qclass, DNS_C_IN);
	assert_int_equal(q.has_edns, 0);
	assert_int_equal(q.udp_size, 512);
	assert_int_equal(q.dnssec_ok, 0);
	assert_int_equal(q.question_len, 17 + 4);
	free(p);
}

static void
test_query_edns(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	mkquery(p, "www.example.com", DNS_T_AAAA, 1, 1232, 0x8000);
	parse_ok(p, &q);
	assert_int_equal(q.has_edns, 1);
	assert_int_equal(q.udp_size, 1232);
	assert_int_equal(q.dnssec_ok, 1);
	assert_int_equal(q.question_len, 21);

	mkquery(p, "www.example.com", DNS_T_A, 1, 100, 0);
	parse_ok(p, &q);
	assert_int_equal(q.udp_size, 512);
	assert_int_equal(q.dnssec_ok, 0);
	mkquery(p, "www.example.com", DNS_T_A, 1, 65000, 0);
	parse_ok(p, &q);
	assert_int_equal(q.udp_size, 4096);
	mkquery(p, "www.example.com", DNS_T_A, 1, 4097, 0);
	parse_ok(p, &q);
	assert_int_equal(q.udp_size, 4096);

	/* Options (a cookie, an empty one) are skipped. */
	p_hdr(p, QID, 0, 1, 0, 0, 1);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_OPT, 0);
	p->b[at - 6] = 0x10;	/* class: udp 4096 */
	p->b[at - 5] = 0x00;
	p_u16(p, 10);
	p_u16(p, 8);
	p_bytes(p, "cookie!!", 8);
	p_u16(p, 12);
	p_u16(p, 0);
	p_end(p, at);
	parse_ok(p, &q);
	assert_int_equal(q.udp_size, 4096);
	free(p);
}

/* Every strict prefix of a valid query, and one byte more, is refused. */
static void
test_query_truncated(void **state)
{
	struct pkt *p = pkt_new(), *cut = pkt_new();
	struct dns_query q;
	uint8_t *exact;
	size_t n, at;

	(void)state;
	p_hdr(p, QID, 0, 1, 0, 0, 1);
	p_question(p, "a.example.com", DNS_T_TXT, DNS_C_IN);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_OPT, 0);
	p_u16(p, 10);
	p_u16(p, 3);
	p_bytes(p, "abc", 3);
	p_end(p, at);
	parse_ok(p, &q);
	for (n = 0; n < p->len; n++) {
		memcpy(cut->b, p->b, n);
		cut->len = n;
		parse_bad(cut);
		/* Exactly n bytes, so a sanitizer sees any read past them. */
		exact = malloc(n > 0 ? n : 1);
		assert_non_null(exact);
		memcpy(exact, p->b, n);
		assert_int_equal(dns_query_parse(exact, n, &q), PARSE_INVALID);
		free(exact);
	}
	p_u8(p, 0);
	parse_bad(p);
	free(p);
	free(cut);
}

static void
test_query_counts(void **state)
{
	struct pkt *p = pkt_new();
	size_t at;

	(void)state;
	p_hdr(p, QID, 0, 0, 0, 0, 0);		/* QDCOUNT 0 */
	parse_bad(p);
	p_hdr(p, QID, 0, 0, 0, 0, 0);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 2, 0, 0, 0);		/* QDCOUNT 2 */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_question(p, "example.org", DNS_T_A, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 1, 0, 0);		/* ANCOUNT 1 */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_a(p, 12, "192.0.2.1");
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 1, 0);		/* NSCOUNT 1, record uncompressed */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_name(p, "example.com");
	at = p_fixed(p, DNS_T_A, 1);
	p_u32(p, 0xc0000201);
	p_end(p, at);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* additional that is not OPT */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_name(p, "example.com");
	at = p_fixed(p, DNS_T_A, 1);
	p_u32(p, 0xc0000201);
	p_end(p, at);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* root-owned, but TSIG */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_u8(p, 0);
	p_fixed(p, 250, 0);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 1, 0, 0);		/* counts with nothing behind */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 1, 0);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 2);		/* two OPTs */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_opt(p, 1232, 0);
	p_opt(p, 1232, 0);
	parse_bad(p);
	free(p);
}

static void
test_query_header_bits(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	unsigned opcode;

	(void)state;
	p_hdr(p, QID, DNS_F_QR | DNS_F_RD, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_bad(p);
	for (opcode = 1; opcode < 16; opcode++) {
		p_hdr(p, QID, opcode << 11, 1, 0, 0, 0);
		p_question(p, "example.com", DNS_T_A, DNS_C_IN);
		parse_bad(p);
	}
	/* Other bits are kept as they came. */
	p_hdr(p, QID, DNS_F_RD | DNS_F_CD | DNS_F_AD, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(q.flags, DNS_F_RD | DNS_F_CD | DNS_F_AD);
	free(p);
}

/* A name of wire bytes in all (>= 3): labels of 63, then the rest. */
static void
p_long_name(struct pkt *p, size_t wire)
{
	size_t left = wire - 1, n;
	char label[64];

	memset(label, 'a', sizeof(label));
	while (left > 0) {
		n = left - 1 > 63 ? 63 : left - 1;
		if (left - 1 - n == 1)		/* no room for a 0 label */
			n--;
		p_u8(p, (unsigned)n);
		p_bytes(p, label, n);
		left -= n + 1;
	}
	p_u8(p, 0);
}

static void
test_query_name_limits(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	char label[64];

	(void)state;
	memset(label, 'x', sizeof(label));
	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* 63-byte label */
	p_u8(p, 63);
	p_bytes(p, label, 63);
	p_name(p, "com");
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(strlen(q.name), 63 + 4);

	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* 64-byte label */
	p_u8(p, 64);
	p_bytes(p, label, 64);
	p_name(p, "com");
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_bad(p);

	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* 255 wire bytes */
	p_long_name(p, 255);
	assert_int_equal(p->len, 12 + 255);
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(strlen(q.name), 253);
	assert_int_equal(q.question_len, 259);

	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* 256 wire bytes */
	p_long_name(p, 256);
	assert_int_equal(p->len, 12 + 256);
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_bad(p);
	free(p);
}

static void
test_query_compression(void **state)
{
	struct pkt *p = pkt_new();

	(void)state;
	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* "www" + pointer to itself */
	p_labels(p, "www");
	p_ptr(p, 12);
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* OPT owner: pointer to a root */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_ptr(p, 12 + 12);
	p_fixed(p, DNS_T_OPT, 0);
	parse_bad(p);
	free(p);
}

static void
test_query_bad_opt(void **state)
{
	struct pkt *p = pkt_new();
	size_t at;

	(void)state;
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* not the root name */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_name(p, "a");
	p_fixed(p, DNS_T_OPT, 0);
	parse_bad(p);
	mkquery(p, "example.com", DNS_T_A, 1, 1232, 0x00010000); /* version 1 */
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* option longer than RDATA */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_OPT, 0);
	p_u16(p, 10);
	p_u16(p, 9);
	p_bytes(p, "12345678", 8);
	p_end(p, at);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* half an option header */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_OPT, 0);
	p_u16(p, 10);
	p_u8(p, 0);
	p_end(p, at);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 1);		/* RDLENGTH past the end */
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_OPT, 0);
	p_u16(p, 10);
	p_u16(p, 0);
	p_end(p, at);
	p->b[at + 1] += 1;
	parse_bad(p);
	free(p);
}

static void
test_query_class_type(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;

	(void)state;
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_question(p, "version.bind", 16, 3);	/* CH */
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_A, 255);	/* ANY */
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_question(p, "example.com", 0, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_OPT, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* types are the caller's call */
	p_question(p, "example.com", DNS_T_ANY, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(q.qtype, DNS_T_ANY);
	free(p);
}

static void
test_query_names(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	static const char *const bad[] = {
		"a b.example", "a\xc3\xa9.example", "a*.example", "1.2.3.4",
		"example.0x10", "a:b.example",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mkquery(p, bad[i], DNS_T_A, 0, 0, 0);
		parse_bad(p);
	}
	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* a '.' inside a label */
	p_u8(p, 3);
	p_bytes(p, "a.b", 3);
	p_name(p, "example");
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_bad(p);
	p_hdr(p, QID, 0, 1, 0, 0, 0);		/* a NUL inside a label */
	p_u8(p, 3);
	p_bytes(p, "a\0b", 3);
	p_name(p, "example");
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	parse_bad(p);

	mkquery(p, "4.3.2.1.in-addr.arpa", DNS_T_PTR, 0, 0, 0);
	parse_ok(p, &q);
	assert_string_equal(q.name, "4.3.2.1.in-addr.arpa");
	mkquery(p, "_xmpp._tcp.Example.com", DNS_T_SRV, 0, 0, 0);
	parse_ok(p, &q);
	assert_string_equal(q.name, "_xmpp._tcp.example.com");
	mkquery(p, "", DNS_T_NS, 0, 0, 0);	/* the root */
	parse_ok(p, &q);
	assert_string_equal(q.name, "");
	assert_int_equal(q.question_len, 5);
	free(p);
}

/*
 * Builders
 */

/* A denial says why (RFC 8914), in the OPT record, only when there is one. */
static void
test_build_error_ede(void **state)
{
	static const uint8_t want[] = {
		0x11, 0x11, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 1,
		7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
		0, 1, 0, 1,
		0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 11,	/* OPT, RDLENGTH 11 */
		0, 15, 0, 7, 0, 15, 'n', 'o', '?', ' ', 'x',	/* EDE 15 "no? x" */
	};
	char text[DNS_EDE_TEXT_MAX + 50];
	struct dns_query q;
	struct pkt *p = pkt_new();

	(void)state;
	p_hdr(p, QID, DNS_F_RD, 1, 0, 0, 1);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	p_opt(p, 1232, 0);
	parse_ok(p, &q);
	assert_int_equal(dns_build_error_ede(&q, DNS_RCODE_NXDOMAIN,
	    DNS_EDE_BLOCKED, "no\n x", out, sizeof(out), &outlen), 0);
	assert_int_equal(outlen, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	assert_int_equal(dns_build_error_ede(&q, DNS_RCODE_NXDOMAIN,
	    DNS_EDE_BLOCKED, "no\n x", out, sizeof(want) - 1, &outlen),
	    SL_ERR_TOO_BIG);
	/* The text is cut at DNS_EDE_TEXT_MAX bytes. */
	memset(text, 'a', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	assert_int_equal(dns_build_error_ede(&q, DNS_RCODE_NXDOMAIN,
	    DNS_EDE_BLOCKED, text, out, sizeof(out), &outlen), 0);
	assert_int_equal(outlen, sizeof(want) - 5 + DNS_EDE_TEXT_MAX);

	/* Without EDNS the answer may carry no OPT: the plain NXDOMAIN. */
	p_hdr(p, QID, DNS_F_RD, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_A, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(dns_build_error_ede(&q, DNS_RCODE_NXDOMAIN,
	    DNS_EDE_BLOCKED, "no", out, sizeof(out), &outlen), 0);
	assert_int_equal(outlen, 12 + 17);
	assert_int_equal(out[11], 0);	/* ARCOUNT */
	verify_response(out, outlen, &q);
	free(p);
}

static void
test_build_error(void **state)
{
	static const uint8_t want[] = {
		0x11, 0x11, 0x81, 0x93, 0, 1, 0, 0, 0, 0, 0, 1,
		3, 'W', 'w', 'W', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e',
		3, 'c', 'o', 'm', 0, 0, 1, 0, 1,
		0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0,
	};
	struct dns_query q;
	struct pkt *p = pkt_new();

	(void)state;
	p_hdr(p, QID, DNS_F_RD | DNS_F_CD, 1, 0, 0, 1);
	p_question(p, "WwW.example.com", DNS_T_A, DNS_C_IN);
	p_opt(p, 4096, 0x8000);
	parse_ok(p, &q);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_NXDOMAIN, out,
	    sizeof(out), &outlen), 0);
	assert_int_equal(outlen, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	verify_response(out, outlen, &q);
	assert_int_equal(ngot, 0);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_NXDOMAIN, out,
	    sizeof(want) - 1, &outlen), SL_ERR_TOO_BIG);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_NXDOMAIN, out,
	    sizeof(want), &outlen), 0);
	assert_int_equal(dns_build_error(&q, 6, out, sizeof(out), &outlen),
	    SL_ERR_INVALID);
	assert_int_equal(dns_build_error(&q, -1, out, sizeof(out), &outlen),
	    SL_ERR_INVALID);

	/* Without EDNS: no OPT; REFUSED; RD clear stays clear. */
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_TXT, DNS_C_IN);
	parse_ok(p, &q);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, out,
	    sizeof(out), &outlen), 0);
	assert_int_equal(outlen, 12 + 13 + 4);
	assert_int_equal(out[2], 0x80);
	assert_int_equal(out[3], 0x85);
	verify_response(out, outlen, &q);

	/* A q that is not in normal form is refused. */
	strcpy(q.name, "Example.com");
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, out,
	    sizeof(out), &outlen), SL_ERR_INVALID);
	free(p);
}

static void
test_build_query(void **state)
{
	struct dns_query q, back;
	struct pkt *p = pkt_new();
	size_t len;

	(void)state;
	mkquery(p, "WWW.example.COM", DNS_T_HTTPS, 1, 4096, 0x8000);
	parse_ok(p, &q);
	assert_int_equal(dns_build_query(&q, 0xabcd, 1232, out, sizeof(out),
	    &len), 0);
	assert_int_equal(len, 12 + 17 + 4 + 11);
	assert_int_equal(dns_query_parse(out, len, &back), PARSE_COMPLETE);
	assert_int_equal(back.id, 0xabcd);
	assert_int_equal(back.flags, DNS_F_RD);
	assert_string_equal(back.echo_name, "www.example.com");
	assert_int_equal(back.qtype, DNS_T_HTTPS);
	assert_int_equal(back.has_edns, 1);
	assert_int_equal(back.udp_size, 1232);
	assert_int_equal(back.dnssec_ok, 0);

	assert_int_equal(dns_build_query(&q, 7, 512, out, sizeof(out), &len), 0);
	assert_int_equal(len, 12 + 17 + 4);
	assert_int_equal(dns_query_parse(out, len, &back), PARSE_COMPLETE);
	assert_int_equal(back.has_edns, 0);
	assert_int_equal(dns_build_query(&q, 7, 512, out, len - 1, &len),
	    SL_ERR_TOO_BIG);
	free(p);
}

static void
test_peek_header(void **state)
{
	uint8_t b[12] = { 0x12, 0x34, 0x83, 0x80 };
	uint16_t id, flags;

	(void)state;
	assert_int_equal(dns_peek_header(b, 12, &id, &flags), 0);
	assert_int_equal(id, 0x1234);
	assert_int_equal(flags, 0x8380);
	assert_true(flags & DNS_F_TC);
	assert_int_equal(dns_peek_header(b, 11, &id, &flags), SL_ERR_INVALID);
}

/*
 * Answers to queries the parser refuses
 */

/* The header of a formerr answer to p: id, flags, counts. */
static void
formerr_ok(const struct pkt *p, unsigned flags, unsigned qd)
{
	assert_int_equal(dns_build_formerr(p->b, p->len, out, sizeof(out),
	    &outlen), 0);
	assert_true(outlen <= p->len);
	assert_true(outlen >= DNS_HDR_LEN);
	assert_memory_equal(out, p->b, 2);
	assert_int_equal(out[2] << 8 | out[3], flags);
	assert_int_equal(out[4] << 8 | out[5], qd);
	assert_int_equal(out[6] | out[7] | out[8] | out[9] | out[10] | out[11],
	    0);
}

static void
test_build_formerr(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t qlen, n;

	(void)state;
	/* Header only: a header-only FORMERR, RD and CD kept, AA TC AD Z not. */
	p_hdr(p, QID, DNS_F_RD | DNS_F_CD | DNS_F_AA | DNS_F_TC | DNS_F_AD |
	    0x0040 | 0x7, 0, 0, 0, 0);
	formerr_ok(p, DNS_F_QR | DNS_F_RD | DNS_F_CD | DNS_F_RA |
	    DNS_RCODE_FORMERR, 0);
	assert_int_equal(outlen, DNS_HDR_LEN);

	/* A question the parser refuses (class CH): echoed, case kept. */
	p_hdr(p, QID, DNS_F_RD, 1, 0, 0, 0);
	p_question(p, "Version.BIND", DNS_T_TXT, 3);
	qlen = p->len - DNS_HDR_LEN;
	assert_int_equal(dns_query_parse(p->b, p->len, &q), PARSE_INVALID);
	formerr_ok(p, DNS_F_QR | DNS_F_RD | DNS_F_RA | DNS_RCODE_FORMERR, 1);
	assert_int_equal(outlen, p->len);
	assert_memory_equal(out + DNS_HDR_LEN, p->b + DNS_HDR_LEN, qlen);
	assert_int_equal(dns_build_formerr(p->b, p->len, out, outlen - 1, &n),
	    SL_ERR_TOO_BIG);
	assert_int_equal(dns_build_formerr(p->b, p->len, out, outlen, &n), 0);

	/* Records after the question are not echoed: never longer. */
	p_hdr(p, QID, 0, 1, 1, 0, 1);
	p_question(p, "www.example.com", DNS_T_A, DNS_C_IN);
	qlen = p->len - DNS_HDR_LEN;
	p_a(p, DNS_HDR_LEN, "192.0.2.1");
	p_opt(p, 4096, 0);
	formerr_ok(p, DNS_F_QR | DNS_F_RA | DNS_RCODE_FORMERR, 1);
	assert_int_equal(outlen, DNS_HDR_LEN + qlen);
	assert_true(outlen < p->len);

	/* Another opcode (UPDATE): NOTIMP, the opcode copied. */
	p_hdr(p, QID, 5 << 11 | DNS_F_RD, 1, 0, 0, 0);
	p_question(p, "example.com", DNS_T_SOA, DNS_C_IN);
	formerr_ok(p, DNS_F_QR | 5 << 11 | DNS_F_RD | DNS_F_RA |
	    DNS_RCODE_NOTIMP, 1);

	/* Questions that cannot be read: no question. */
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_name(p, "example.com");
	p_u16(p, DNS_T_A);		/* the class is missing */
	formerr_ok(p, DNS_F_QR | DNS_F_RA | DNS_RCODE_FORMERR, 0);
	assert_int_equal(outlen, DNS_HDR_LEN);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_labels(p, "www");
	p_ptr(p, DNS_HDR_LEN);		/* compressed */
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	formerr_ok(p, DNS_F_QR | DNS_F_RA | DNS_RCODE_FORMERR, 0);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	p_u8(p, 64);			/* a label too long */
	for (n = 0; n < 64; n++)
		p_u8(p, 'a');
	p_u8(p, 0);
	p_u16(p, DNS_T_A);
	p_u16(p, DNS_C_IN);
	formerr_ok(p, DNS_F_QR | DNS_F_RA | DNS_RCODE_FORMERR, 0);
	p_hdr(p, QID, 0, 2, 0, 0, 0);	/* two questions */
	p_question(p, "a.example", DNS_T_A, DNS_C_IN);
	p_question(p, "b.example", DNS_T_A, DNS_C_IN);
	formerr_ok(p, DNS_F_QR | DNS_F_RA | DNS_RCODE_FORMERR, 0);

	/* Not answered: a response, or no whole header. */
	p_hdr(p, QID, DNS_F_QR, 0, 0, 0, 0);
	assert_int_equal(dns_build_formerr(p->b, p->len, out, sizeof(out),
	    &outlen), SL_ERR_INVALID);
	p_hdr(p, QID, 0, 1, 0, 0, 0);
	assert_int_equal(dns_build_formerr(p->b, DNS_HDR_LEN - 1, out,
	    sizeof(out), &outlen), SL_ERR_INVALID);
	assert_int_equal(dns_build_formerr(NULL, 0, out, sizeof(out), &outlen),
	    SL_ERR_INVALID);

	/* Every prefix of a query: never an answer longer than the prefix. */
	p_hdr(p, QID, DNS_F_RD, 1, 0, 0, 1);
	p_question(p, "www.example.com", DNS_T_AAAA, DNS_C_IN);
	p_opt(p, 1232, 0);
	for (n = 0; n <= p->len; n++) {
		int r = dns_build_formerr(p->b, n, out, sizeof(out), &outlen);

		if (n < DNS_HDR_LEN) {
			assert_int_equal(r, SL_ERR_INVALID);
			continue;
		}
		assert_int_equal(r, 0);
		assert_true(outlen <= n);
		assert_int_equal(out[5], n >= DNS_HDR_LEN + 21 ? 1 : 0);
	}
	free(p);
}

/*
 * The answer filter
 */

static void
test_filter_rebinding(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 5, 0, 0);
	p_a(p, 12, "93.184.216.34");
	p_a(p, 12, "10.0.0.1");
	p_a(p, 12, "192.168.1.1");
	p_a(p, 12, "127.0.0.1");
	p_a(p, 12, "8.8.8.8");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(out[7], 2);
	assert_int_equal(res.removed_addrs, 3);
	assert_int_equal(res.nkept, 2);
	assert_string_equal(res.kept[0].name, "www.example.com");
	expect_addr(&res.kept[0].addr, "93.184.216.34");
	assert_int_equal(res.kept[0].ttl, 300);
	expect_addr(&res.kept[1].addr, "8.8.8.8");
	assert_memory_equal(got[1].rd, "\x08\x08\x08\x08", 4);
	assert_string_equal(got[0].owner, "www.example.com");
	assert_int_equal(res.truncated, 0);

	/* IPv6, and IPv4 dressed as IPv6, judged canonical. */
	query_for(&q, "www.example.com", DNS_T_AAAA, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_AAAA, 0, 5, 0, 0);
	p_aaaa(p, 12, "2606:4700::1");
	p_aaaa(p, 12, "::ffff:10.0.0.1");
	p_aaaa(p, 12, "64:ff9b::a00:1");
	p_aaaa(p, 12, "fd00::1");
	p_aaaa(p, 12, "::ffff:93.184.216.34");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(res.removed_addrs, 3);
	assert_int_equal(res.nkept, 2);
	expect_addr(&res.kept[0].addr, "2606:4700::1");
	expect_addr(&res.kept[1].addr, "93.184.216.34");
	assert_int_equal(res.kept[1].addr.family, AF_INET);

	/* A and AAAA of the wrong length are dropped. */
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_A, 300);
	p_bytes(p, "\x01\x02\x03\x04\x05", 5);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_AAAA, 300);
	p_bytes(p, "\x01\x02\x03\x04", 4);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 0);
	assert_int_equal(res.dropped, 2);
	assert_int_equal(res.nkept, 0);

	/* All refused: NOERROR/NODATA. */
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	p_a(p, 12, "10.1.2.3");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 0);
	assert_int_equal(out[3] & 0xf, DNS_RCODE_NOERROR);
	assert_int_equal(res.nkept, 0);
	free(p);
}

static void
test_filter_cname_cut(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at, t1, t2;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 3, 0, 0);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	t1 = p->len;
	p_name(p, "cdn.good.example");
	p_end(p, at);
	at = p_rr_at(p, t1, DNS_T_CNAME, 60);
	t2 = p->len;
	p_labels(p, "edge.evil");
	p_ptr(p, t1 + 9);		/* "example" of cdn.good.example */
	p_end(p, at);
	p_a(p, t2, "1.2.3.4");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].type, DNS_T_CNAME);
	assert_string_equal(got[0].owner, "www.example.com");
	assert_int_equal(got[0].rdlen, 18);
	assert_memory_equal(got[0].rd, "\x03" "cdn" "\x04" "good" "\x07"
	    "example", 18);
	assert_int_equal(res.cut_cnames, 1);
	assert_int_equal(res.nkept, 0);
	assert_int_equal(res.dropped, 1);
	assert_int_equal(res.removed_addrs, 0);

	/* Once cut, the chain is closed: a second CNAME is not followed. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 3, 0, 0);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	p_name(p, "x.evil.example");
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	t1 = p->len;
	p_name(p, "ok.example.com");
	p_end(p, at);
	p_a(p, t1, "1.2.3.4");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 0);
	assert_int_equal(res.cut_cnames, 1);
	assert_int_equal(res.dropped, 2);
	free(p);
}

static void
test_filter_cname_chain(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at, t1, other;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 5, 0, 0);
	other = p->len;			/* an unrelated name, first */
	p_name(p, "other.example");
	at = p_fixed(p, DNS_T_A, 5);
	p_u32(p, 0x09090909);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	t1 = p->len;
	p_name(p, "CDN.Good.Example");
	p_end(p, at);
	p_a(p, t1, "1.2.3.4");
	p_a(p, other, "9.9.9.8");
	p_a(p, 12, "5.6.7.8");		/* the question name: in the chain */
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 3);
	assert_int_equal(got[0].type, DNS_T_CNAME);
	assert_memory_equal(got[0].rd, "\x03" "cdn" "\x04" "good" "\x07"
	    "example", 18);
	assert_string_equal(got[1].owner, "cdn.good.example");
	assert_string_equal(got[2].owner, "www.example.com");
	assert_int_equal(res.cut_cnames, 0);
	assert_int_equal(res.dropped, 2);
	assert_int_equal(res.nkept, 2);
	assert_string_equal(res.kept[0].name, "cdn.good.example");
	expect_addr(&res.kept[0].addr, "1.2.3.4");
	assert_string_equal(res.kept[1].name, "www.example.com");
	expect_addr(&res.kept[1].addr, "5.6.7.8");

	/* An address before the CNAME that names its owner is dropped. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	t1 = p->len;
	p_name(p, "cdn.good.example");
	at = p_fixed(p, DNS_T_A, 5);
	p_u32(p, 0x01020304);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	p_ptr(p, t1);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(res.nkept, 0);

	/* A loop back to the question name is cut. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	t1 = p->len;
	p_name(p, "a.example.com");
	p_end(p, at);
	at = p_rr_at(p, t1, DNS_T_CNAME, 60);
	p_ptr(p, 12);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(res.cut_cnames, 1);
	free(p);
}

/* A chain of 20 CNAMEs: 15 links make 16 names, the 16th link is cut. */
static void
test_filter_cname_long(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at, prev = 12;
	char name[32];
	int i;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 20, 0, 0);
	for (i = 0; i < 20; i++) {
		at = p_rr_at(p, prev, DNS_T_CNAME, 60);
		prev = p->len;
		snprintf(name, sizeof(name), "c%d.example.com", i);
		p_name(p, name);
		p_end(p, at);
	}
	assert_int_equal(filter(p, &q, 0), 0);
	assert_int_equal(ngot, 15);
	assert_int_equal(res.cut_cnames, 1);
	assert_int_equal(res.dropped, 4);
	free(p);
}

/* An SvcParam: key, length, value. */
static void
p_param(struct pkt *p, unsigned key, const void *v, size_t n)
{
	p_u16(p, key);
	p_u16(p, (unsigned)n);
	if (n > 0)
		p_bytes(p, v, n);
}

static void
test_filter_https_ech(void **state)
{
	static const uint8_t want1[] = {
		0, 1, 0,
		0, 1, 0, 3, 2, 'h', '2',
		0, 3, 0, 2, 0x01, 0xbb,
		0, 4, 0, 4, 1, 2, 3, 4,
	};
	static const uint8_t want2[] = {
		0, 2, 3, 's', 'v', 'c', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e',
		3, 'n', 'e', 't', 0,
		0, 6, 0, 16, 0x26, 0x06, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 1,
	};
	uint8_t v6[16], v6b[16];
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	assert_int_equal(inet_pton(AF_INET6, "fd00::1", v6), 1);
	assert_int_equal(inet_pton(AF_INET6, "2606:4700::1", v6b), 1);
	query_for(&q, "www.example.com", DNS_T_HTTPS, 1, 1232, 0);
	resp_start(p, "www.example.com", DNS_T_HTTPS, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 1, "\x02h2", 3);
	p_param(p, 3, "\x01\xbb", 2);
	p_param(p, 4, "\x01\x02\x03\x04\x0a\x00\x00\x01", 8);
	p_param(p, 5, "\x00\x03\xaa\xbb\xcc", 5);
	p_param(p, 6, v6, 16);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);
	p_u16(p, 2);
	p_name(p, "svc.example.net");
	p_param(p, 4, "\x0a\x01\x01\x01", 4);
	p_param(p, 5, "\x00\x01\x00", 3);
	p_param(p, 6, v6b, 16);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[0].type, DNS_T_HTTPS);
	assert_int_equal(got[0].rdlen, sizeof(want1));
	assert_memory_equal(got[0].rd, want1, sizeof(want1));
	assert_int_equal(got[1].rdlen, sizeof(want2));
	assert_memory_equal(got[1].rd, want2, sizeof(want2));
	assert_int_equal(res.stripped_ech, 2);
	assert_int_equal(res.removed_addrs, 3);
	assert_int_equal(res.nkept, 2);
	assert_string_equal(res.kept[0].name, "www.example.com");
	expect_addr(&res.kept[0].addr, "1.2.3.4");
	expect_addr(&res.kept[1].addr, "2606:4700::1");
	assert_int_equal(res.dropped, 0);
	free(p);
}

/* HTTPS records that are dropped whole; one good one stays. */
static void
test_filter_https_bad(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at, t;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_HTTPS, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_HTTPS, 0, 9, 0, 0);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* good: alpn */
	p_u16(p, 1);
	t = p->len;
	p_name(p, "svc.example.com");
	p_param(p, 1, "\x02h3", 3);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* keys out of order */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 3, "\x01\xbb", 2);
	p_param(p, 1, "\x02h2", 3);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* a key twice */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 1, "\x02h2", 3);
	p_param(p, 1, "\x02h3", 3);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* value past RDATA */
	p_u16(p, 1);
	p_u8(p, 0);
	p_u16(p, 1);
	p_u16(p, 9);
	p_bytes(p, "\x02h2", 3);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* compressed TargetName */
	p_u16(p, 1);
	p_ptr(p, t);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* mandatory lists ech */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 0, "\x00\x05", 2);
	p_param(p, 5, "\x00", 1);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* TargetName not allowed */
	p_u16(p, 1);
	p_name(p, "x.evil.example");
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* mandatory of 3 bytes */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 0, "\x00\x01\x00", 3);
	p_param(p, 1, "\x02h2", 3);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_HTTPS, 300);	/* ipv4hint of 5 bytes */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 4, "\x01\x02\x03\x04\x05", 5);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].rdlen, 26);
	assert_memory_equal(got[0].rd, "\x00\x01\x03svc\x07" "example\x03"
	    "com\x00\x00\x01\x00\x03\x02h3", got[0].rdlen);
	assert_int_equal(res.dropped, 8);
	assert_int_equal(res.stripped_ech, 1);
	free(p);
}

static void
test_filter_ipv4hint(void **state)
{
	static const uint8_t want[] = {
		0, 1, 0,
		0, 1, 0, 3, 2, 'h', '2',
		0, 4, 0, 8, 93, 184, 216, 34, 8, 8, 4, 4,
	};
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_SVCB, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_SVCB, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_SVCB, 300);
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 1, "\x02h2", 3);
	p_param(p, 4, "\x7f\x00\x00\x01\x5d\xb8\xd8\x22\xa9\xfe\xa9\xfe"
	    "\x08\x08\x04\x04", 16);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_SVCB, 300);	/* every hint refused */
	p_u16(p, 1);
	p_u8(p, 0);
	p_param(p, 4, "\x0a\x00\x00\x01", 4);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[0].rdlen, sizeof(want));
	assert_memory_equal(got[0].rd, want, sizeof(want));
	assert_int_equal(got[1].rdlen, 3);
	assert_memory_equal(got[1].rd, "\x00\x01\x00", 3);
	assert_int_equal(res.removed_addrs, 3);
	assert_int_equal(res.nkept, 2);
	expect_addr(&res.kept[0].addr, "93.184.216.34");
	expect_addr(&res.kept[1].addr, "8.8.4.4");
	assert_int_equal(res.stripped_ech, 0);
	free(p);
}

static void
test_filter_mx_txt_srv(void **state)
{
	static const uint8_t mx[] = {
		0, 10, 4, 'm', 'a', 'i', 'l', 7, 'e', 'x', 'a', 'm', 'p', 'l',
		'e', 3, 'c', 'o', 'm', 0,
	};
	static const uint8_t srv[] = {
		0, 10, 0, 5, 0x13, 0xc4, 3, 's', 'i', 'p', 7, 'e', 'x', 'a',
		'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
	};
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "example.com", DNS_T_MX, 0, 0, 0);
	resp_start(p, "example.com", DNS_T_MX, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_MX, 3600);
	p_u16(p, 10);
	p_labels(p, "MAIL");
	p_ptr(p, 12);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_MX, 3600);	/* null MX (RFC 7505) */
	p_u16(p, 0);
	p_u8(p, 0);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[0].rdlen, sizeof(mx));
	assert_memory_equal(got[0].rd, mx, sizeof(mx));
	assert_int_equal(got[0].ttl, 3600);
	assert_int_equal(got[1].rdlen, 3);
	assert_memory_equal(got[1].rd, "\x00\x00\x00", 3);

	query_for(&q, "example.com", DNS_T_TXT, 0, 0, 0);
	resp_start(p, "example.com", DNS_T_TXT, 0, 3, 0, 0);
	at = p_rr_at(p, 12, DNS_T_TXT, 0xffffffffu);
	p_bytes(p, "\x05v=spf\x00\x03" "abc", 11);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_TXT, 60);	/* a string past RDATA */
	p_bytes(p, "\x05" "abc", 4);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_TXT, 60);	/* empty RDATA */
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].rdlen, 11);
	assert_memory_equal(got[0].rd, "\x05v=spf\x00\x03" "abc", 11);
	assert_int_equal(got[0].ttl, 0);	/* top bit set: 0 */
	assert_int_equal(res.dropped, 2);

	query_for(&q, "_sip._tcp.example.com", DNS_T_SRV, 0, 0, 0);
	resp_start(p, "_sip._tcp.example.com", DNS_T_SRV, 0, 2, 0, 0);
	at = p_rr_at(p, 12, DNS_T_SRV, 60);
	p_u16(p, 10);
	p_u16(p, 5);
	p_u16(p, 5060);
	p_labels(p, "sip");
	p_ptr(p, 12 + 10);		/* example.com of the question */
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_SRV, 60);	/* "no service here" */
	p_bytes(p, "\0\0\0\0\0\0", 6);
	p_u8(p, 0);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[0].rdlen, sizeof(srv));
	assert_memory_equal(got[0].rd, srv, sizeof(srv));
	assert_string_equal(got[0].owner, "_sip._tcp.example.com");
	assert_int_equal(got[1].rdlen, 7);
	free(p);
}

/* PTR is rebuilt; SOA, DNAME and RRSIG in the answer are dropped. */
static void
test_filter_other_types(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "4.3.2.1.in-addr.arpa", DNS_T_PTR, 0, 0, 0);
	resp_start(p, "4.3.2.1.in-addr.arpa", DNS_T_PTR, 0, 5, 0, 0);
	at = p_rr_at(p, 12, DNS_T_PTR, 60);
	p_name(p, "host.example.com");
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_SOA, 60);
	p_ptr(p, 12);
	p_ptr(p, 12);
	p_bytes(p, "01234567890123456789", 20);
	p_end(p, at);
	at = p_rr_at(p, 12, 39, 60);		/* DNAME */
	p_name(p, "example.net");
	p_end(p, at);
	at = p_rr_at(p, 12, 46, 60);		/* RRSIG */
	p_bytes(p, "whatever", 8);
	p_end(p, at);
	at = p_rr_at(p, 12, DNS_T_PTR, 60);	/* class CH */
	p->b[at - 5] = 3;
	p_name(p, "other.example.com");
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].type, DNS_T_PTR);
	assert_int_equal(res.dropped, 4);
	free(p);
}

/* Answers that are not to our question, or not answers. */
static void
test_filter_mismatch(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	p_a(p, 12, "1.2.3.4");
	assert_int_equal(filter(p, &q, 1), 0);		/* the baseline */
	p->b[1] ^= 1;					/* id */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[1] ^= 1;
	p->b[2] &= 0x7f;				/* QR=0 */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[2] |= 0x80 | 0x10;				/* opcode 2 */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[2] &= (uint8_t)~0x10;
	p->b[13] = 'x';					/* name: xww */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[13] = 'W';					/* case does not matter */
	assert_int_equal(filter(p, &q, 1), 0);
	p->b[12 + 17 + 1] = DNS_T_AAAA;			/* type */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[12 + 17 + 1] = DNS_T_A;
	p->b[12 + 17 + 3] = 3;				/* class */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[12 + 17 + 3] = 1;
	p->b[5] = 0;					/* QDCOUNT 0 */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[5] = 2;					/* QDCOUNT 2 */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[5] = 1;
	p->b[7] = 2;					/* ANCOUNT past the end */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	p->b[7] = 1;
	p_u8(p, 0);					/* trailing garbage */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	free(p);
}

static void
test_filter_truncated_input(void **state)
{
	struct pkt *p = pkt_new(), *cut = pkt_new();
	struct dns_query q;
	uint8_t *exact;
	size_t at, n;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 1, 1232, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 1, 1);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	p_name(p, "a.example.com");
	p_end(p, at);
	p_a(p, at + 2, "1.2.3.4");
	at = p_rr_at(p, 12, DNS_T_NS, 60);
	p_name(p, "ns.example.com");
	p_end(p, at);
	p_opt(p, 1232, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 2);
	for (n = 0; n < p->len; n++) {
		memcpy(cut->b, p->b, n);
		cut->len = n;
		assert_int_equal(filter(cut, &q, 1), SL_ERR_INVALID);
		exact = malloc(n > 0 ? n : 1);
		assert_non_null(exact);
		memcpy(exact, p->b, n);
		assert_int_equal(dns_filter_answer(exact, n, &q, UPID, 1, &ops,
		    out, sizeof(out), &outlen, &res), SL_ERR_INVALID);
		free(exact);
	}
	free(p);
	free(cut);
}

static void
test_filter_pointers(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at, own, i, prev;
	char label[61];

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);

	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	own = p->len;				/* owner: pointer to itself */
	p_ptr(p, own);
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	own = p->len;				/* a label, then back to it */
	p_labels(p, "a");
	p_ptr(p, own);
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	at = p_rr_at(p, p->len + 16, DNS_T_A, 1);	/* forward */
	p_u32(p, 0x01020304);
	p_end(p, at);
	p_a(p, 12, "1.2.3.4");
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	p_a(p, 2, "1.2.3.4");			/* into the header */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	p_u8(p, 0x40);				/* label type 01 */
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	/* Pointers to pointers: 30 jumps pass, 40 do not. */
	for (i = 0; i < 2; i++) {
		size_t n = i == 0 ? 30 : 40, k;

		resp_start(p, "www.example.com", DNS_T_A, 0, (unsigned)n, 0, 0);
		prev = 12;
		for (k = 0; k < n; k++) {
			size_t here = p->len;

			p_a(p, prev, "1.2.3.4");
			prev = here;
		}
		assert_int_equal(filter(p, &q, 0), i == 0 ? 0 : SL_ERR_INVALID);
		if (i == 0)
			assert_int_equal(ngot, 30);
	}

	/* Expanded past 255 bytes through a pointer. */
	memset(label, 'a', 60);
	label[60] = '\0';
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	own = p->len;
	for (i = 0; i < 3; i++) {
		p_u8(p, 60);
		p_bytes(p, label, 60);
	}
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_A, 1);
	p_u32(p, 0x01020304);
	p_end(p, at);
	for (i = 0; i < 2; i++) {
		p_u8(p, 60);
		p_bytes(p, label, 60);
	}
	p_ptr(p, own);
	at = p_fixed(p, DNS_T_A, 1);
	p_u32(p, 0x01020304);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	/* Into the middle of a label of its own run (a 0 byte there). */
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 1, 0);
	own = p->len;
	p_u8(p, 1);
	p_u8(p, 0);
	p_ptr(p, own + 1);
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);

	/* 256 bytes in a section whose names are never read as text. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 1, 0);
	p_long_name(p, 256);
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 1, 0);
	p_long_name(p, 255);
	p_fixed(p, DNS_T_A, 1);
	assert_int_equal(filter(p, &q, 1), 0);

	/* A bad pointer inside a CNAME's RDATA cuts the chain. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	p_labels(p, "x");
	p_ptr(p, at + 2);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 0);
	assert_int_equal(res.cut_cnames, 1);
	free(p);
}

static void
test_filter_bad_opt(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 1, 1232, 0);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 0, 2);
	p_opt(p, 1232, 0);
	p_opt(p, 1232, 0);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 1, 0, 0);
	p_opt(p, 1232, 0);			/* in the answer section */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 0, 1);
	p_opt(p, 1232, 0x00010000);		/* version 1 */
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 0, 1);
	p_name(p, "a");				/* not the root */
	p_fixed(p, DNS_T_OPT, 0);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 0, 1);
	p_u8(p, 0);				/* option overrun */
	at = p_fixed(p, DNS_T_OPT, 0);
	p_u16(p, 10);
	p_u16(p, 20);
	p_bytes(p, "12345678", 8);
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), SL_ERR_INVALID);
	resp_start(p, "www.example.com", DNS_T_A, 0, 0, 0, 1);
	p_opt(p, 1232, 0x01000000);		/* extended rcode 16 */
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(out[3] & 0xf, DNS_RCODE_SERVFAIL);
	free(p);
}

/* 30 addresses of 31 bytes each after 33 bytes of header and question. */
static void
many_a(struct pkt *p, unsigned n)
{
	char text[32];
	unsigned i;

	resp_start(p, "www.example.com", DNS_T_A, 0, n, 0, 0);
	for (i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "1.0.%u.%u", i / 200, i % 200 + 1);
		p_a(p, 12, text);
	}
}

static void
test_filter_truncation(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	many_a(p, 30);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, (512 - 33) / 31);
	assert_int_equal(out[7], (512 - 33) / 31);
	assert_true(outlen <= 512 && outlen + 31 > 512);
	assert_int_equal(res.truncated, 1);
	assert_int_equal(res.upstream_tc, 0);
	assert_true(out[2] & 0x02);
	assert_int_equal(res.nkept, ngot);

	assert_int_equal(filter(p, &q, 0), 0);		/* TCP: all of it */
	assert_int_equal(ngot, 30);
	assert_int_equal(res.truncated, 0);
	assert_false(out[2] & 0x02);

	/* Room for 20 records, but not for 20 and the OPT record. */
	query_for(&q, "www.example.com", DNS_T_A, 1, 33 + 20 * 31 + 5, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 19);
	assert_int_equal(res.truncated, 1);
	query_for(&q, "www.example.com", DNS_T_A, 1, 1232, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 30);
	assert_int_equal(res.truncated, 0);

	/* Nothing is written after the first record that did not fit. */
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	many_a(p, 14);
	p->b[7] = 16;
	at = p_rr_at(p, 12, DNS_T_TXT, 60);
	p_u8(p, 59);
	memset(p->b + p->len, 'x', 59);
	p->len += 59;
	p_end(p, at);
	p_a(p, 12, "1.2.3.4");
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 14);
	assert_int_equal(res.truncated, 1);
	assert_int_equal(res.nkept, 14);

	/* kept[] holds 32: addresses past it are not relayed. */
	query_for(&q, "www.example.com", DNS_T_A, 1, 1232, 0);
	many_a(p, 40);
	assert_int_equal(filter(p, &q, 0), 0);
	assert_int_equal(ngot, DNS_KEPT_MAX);
	assert_int_equal(res.nkept, DNS_KEPT_MAX);
	assert_int_equal(res.dropped, 8);

	/* A duplicate address is kept once and costs no slot. */
	resp_start(p, "www.example.com", DNS_T_A, 0, 2, 0, 0);
	p_a(p, 12, "1.2.3.4");
	p_a(p, 12, "1.2.3.4");
	assert_int_equal(filter(p, &q, 0), 0);
	assert_int_equal(ngot, 2);
	assert_int_equal(res.nkept, 1);

	/* Upstream's TC is passed on. */
	resp_start(p, "www.example.com", DNS_T_A, DNS_F_TC, 0, 0, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(res.truncated, 1);
	assert_int_equal(res.upstream_tc, 1);
	free(p);
}

static void
test_filter_cap(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t full;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 1, 1232, 0);
	many_a(p, 3);
	assert_int_equal(filter(p, &q, 1), 0);
	full = outlen;
	assert_int_equal(full, 33 + 3 * 31 + 11);
	assert_int_equal(dns_filter_answer(p->b, p->len, &q, UPID, 1, &ops,
	    out, full, &outlen, &res), 0);
	assert_int_equal(outlen, full);
	assert_int_equal(dns_filter_answer(p->b, p->len, &q, UPID, 1, &ops,
	    out, full - 1, &outlen, &res), SL_ERR_TOO_BIG);
	assert_int_equal(dns_filter_answer(p->b, p->len, &q, UPID, 1, &ops,
	    out, 20, &outlen, &res), SL_ERR_TOO_BIG);
	assert_int_equal(dns_filter_answer(p->b, p->len, &q, UPID, 1, NULL,
	    out, sizeof(out), &outlen, &res), SL_ERR_INVALID);
	free(p);
}

static void
test_filter_header(void **state)
{
	static const uint8_t opt[] = { 0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0,
	    0, 0 };
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	/* EDNS with DO: our OPT; AA and AD cleared; RD, CD echoed. */
	p_hdr(p, QID, DNS_F_RD | DNS_F_CD, 1, 0, 0, 1);
	p_question(p, "www.Example.com", DNS_T_A, DNS_C_IN);
	p_opt(p, 4096, 0x8000);
	parse_ok(p, &q);
	p_hdr(p, UPID, DNS_F_QR | DNS_F_AA | DNS_F_AD | DNS_F_RA, 1, 1, 1, 2);
	p_question(p, "www.example.com", DNS_T_A, DNS_C_IN);
	p_a(p, 12, "1.2.3.4");
	at = p_rr_at(p, 12 + 4, DNS_T_NS, 60);	/* authority */
	p_name(p, "ns.example.com");
	p_end(p, at);
	p_a(p, at + 2, "1.2.3.5");		/* glue */
	p_opt(p, 1400, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(out[2], 0x81 | 0x00);	/* QR, RD; no AA */
	assert_int_equal(out[3], 0x80 | 0x10);	/* RA, CD; no AD */
	assert_int_equal(ngot, 1);
	assert_memory_equal(out + outlen - 11, opt, 11);
	assert_memory_equal(out + 12, "\x03www\x07" "Example", 12);

	/* No EDNS asked: no OPT, whatever upstream sent. */
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(out[11], 0);
	assert_int_equal(out[2], 0x81);
	free(p);
}

static void
test_filter_rcode(void **state)
{
	static const struct { unsigned in, want; } map[] = {
		{ 0, 0 }, { 1, 2 }, { 2, 2 }, { 3, 3 }, { 4, 2 }, { 5, 2 },
		{ 6, 2 }, { 9, 2 }, { 15, 2 },
	};
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t i, at;

	(void)state;
	query_for(&q, "www.example.com", DNS_T_A, 0, 0, 0);
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		resp_start(p, "www.example.com", DNS_T_A, map[i].in, 0, 0, 0);
		assert_int_equal(filter(p, &q, 1), 0);
		assert_int_equal(out[3] & 0xf, map[i].want);
	}
	/* NXDOMAIN at the end of a chain keeps the chain. */
	resp_start(p, "www.example.com", DNS_T_A, DNS_RCODE_NXDOMAIN, 1, 0, 0);
	at = p_rr_at(p, 12, DNS_T_CNAME, 60);
	p_name(p, "gone.example.com");
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(out[3] & 0xf, DNS_RCODE_NXDOMAIN);
	assert_int_equal(ngot, 1);
	free(p);
}

/* The root as the question; records owned by the root. */
static void
test_filter_root(void **state)
{
	struct pkt *p = pkt_new();
	struct dns_query q;
	size_t at;

	(void)state;
	query_for(&q, "", DNS_T_NS, 0, 0, 0);
	resp_start(p, "", DNS_T_NS, 0, 1, 0, 0);
	p_u8(p, 0);
	at = p_fixed(p, DNS_T_NS, 60);
	p_name(p, "a.root-servers.net");
	p_end(p, at);
	assert_int_equal(filter(p, &q, 1), 0);
	assert_int_equal(ngot, 1);
	assert_string_equal(got[0].owner, "");
	free(p);
}

/*
 * Rate limit
 */

static void
test_ratelimit(void **state)
{
	struct ratelimit rl;
	uint64_t t = 1000000;
	int i;

	(void)state;
	ratelimit_init(&rl, 10, 5, t);
	for (i = 0; i < 5; i++)
		assert_int_equal(ratelimit_take(&rl, t), 1);
	assert_int_equal(ratelimit_take(&rl, t), 0);
	assert_int_equal(ratelimit_take(&rl, t + 99), 0);
	assert_int_equal(ratelimit_take(&rl, t + 100), 1);
	assert_int_equal(ratelimit_take(&rl, t + 100), 0);
	assert_int_equal(ratelimit_take(&rl, t + 150), 0);
	assert_int_equal(ratelimit_take(&rl, t + 200), 1);
	/* One per 100 ms over a long run, from fractions. */
	for (i = 0; i < 100; i++) {
		assert_int_equal(ratelimit_take(&rl, t + 200 + 100 * i + 50), 0);
		assert_int_equal(ratelimit_take(&rl, t + 300 + 100 * i), 1);
	}
	/* A long pause refills up to the burst, no more. */
	t += 1000000;
	for (i = 0; i < 5; i++)
		assert_int_equal(ratelimit_take(&rl, t), 1);
	assert_int_equal(ratelimit_take(&rl, t), 0);
	/* A clock going back refills nothing. */
	assert_int_equal(ratelimit_take(&rl, t - 5000), 0);
	assert_int_equal(ratelimit_take(&rl, t + 100), 1);

	ratelimit_init(&rl, 3, 1, 0);		/* 1/3 token a... 333 ms */
	assert_int_equal(ratelimit_take(&rl, 0), 1);
	assert_int_equal(ratelimit_take(&rl, 333), 0);
	assert_int_equal(ratelimit_take(&rl, 334), 1);

	ratelimit_init(&rl, 1000, 0.5, 0);	/* burst < 1: never */
	assert_int_equal(ratelimit_take(&rl, 0), 0);
	assert_int_equal(ratelimit_take(&rl, 100000), 0);
	ratelimit_init(&rl, 0, 1, 0);		/* no refill */
	assert_int_equal(ratelimit_take(&rl, 0), 1);
	assert_int_equal(ratelimit_take(&rl, 1000000), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_error_ede),
		cmocka_unit_test(test_query_plain),
		cmocka_unit_test(test_query_edns),
		cmocka_unit_test(test_query_truncated),
		cmocka_unit_test(test_query_counts),
		cmocka_unit_test(test_query_header_bits),
		cmocka_unit_test(test_query_name_limits),
		cmocka_unit_test(test_query_compression),
		cmocka_unit_test(test_query_bad_opt),
		cmocka_unit_test(test_query_class_type),
		cmocka_unit_test(test_query_names),
		cmocka_unit_test(test_build_error),
		cmocka_unit_test(test_build_query),
		cmocka_unit_test(test_peek_header),
		cmocka_unit_test(test_build_formerr),
		cmocka_unit_test(test_filter_rebinding),
		cmocka_unit_test(test_filter_cname_cut),
		cmocka_unit_test(test_filter_cname_chain),
		cmocka_unit_test(test_filter_cname_long),
		cmocka_unit_test(test_filter_https_ech),
		cmocka_unit_test(test_filter_https_bad),
		cmocka_unit_test(test_filter_ipv4hint),
		cmocka_unit_test(test_filter_mx_txt_srv),
		cmocka_unit_test(test_filter_other_types),
		cmocka_unit_test(test_filter_mismatch),
		cmocka_unit_test(test_filter_truncated_input),
		cmocka_unit_test(test_filter_pointers),
		cmocka_unit_test(test_filter_bad_opt),
		cmocka_unit_test(test_filter_truncation),
		cmocka_unit_test(test_filter_cap),
		cmocka_unit_test(test_filter_header),
		cmocka_unit_test(test_filter_rcode),
		cmocka_unit_test(test_filter_root),
		cmocka_unit_test(test_ratelimit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
