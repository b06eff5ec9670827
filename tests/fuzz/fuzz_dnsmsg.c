/*
 * fuzz_dnsmsg.c: libFuzzer target for the DNS query parser and the answer
 * filter.
 *
 * The whole input is parsed as a sandbox's query; one that parses must be
 * in normal form, and what dns_build_query and dns_build_error write for
 * it must parse back to the same question.  Then byte 0 picks a fixed
 * query for "www.example.com" (bits 0-2 the type, 3 EDNS, 4 UDP, 5 DO,
 * 6-7 the udp size) and the rest is filtered as upstream's response to
 * it, under a policy that refuses non-public addresses and names under
 * evil.example.  An output must be a well-formed message without
 * compression, with counts that match, no ech, only addresses the policy
 * accepts and every one of them in kept[], no CNAME target it refuses,
 * within the size limit; filtering it again must give the same bytes;
 * one byte less of room must give SL_ERR_TOO_BIG.
 *
 * The whole input also gets dns_build_formerr's answer: only to a header
 * with QR clear, never longer than the input, with the input's id, FORMERR
 * or NOTIMP by opcode, no record, and a question that is the input's own
 * bytes and framed.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/addr.h"
#include "util/err.h"
#include "util/names.h"
#include "parse/dnsmsg.h"
#include "parse/sniff.h"
#include "fuzz_check.h"

#define UPID	0x4242
#define QID	0x1111
#define CAP	(DNS_MSG_MAX + 1)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


static uint8_t out[CAP], out2[CAP];

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

static unsigned
get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* An uncompressed name within end, as normal-form text ("" the root). */
static void
v_name(const uint8_t *m, size_t end, size_t *pos, char *text)
{
	size_t p = *pos, n = 0, total = 1;
	unsigned c;

	while (p < end && (c = m[p]) != 0) {
		CHECK(c <= 63 && c < end - p);
		total += c + 1;
		CHECK(total <= 255);
		if (n > 0)
			text[n++] = '.';
		memcpy(text + n, m + p + 1, c);
		n += c;
		p += c + 1;
	}
	CHECK(p < end);
	text[n] = '\0';
	*pos = p + 1;
}

/* Whether the result kept a for owner. */
static int
in_kept(const struct dns_filter_result *res, const char *owner,
    const uint8_t *b, size_t n)
{
	struct sl_addr a;
	size_t i;

	memset(&a, 0, sizeof(a));
	a.family = n == 4 ? AF_INET : AF_INET6;
	memcpy(a.bytes, b, n);
	addr_canonical(&a, &a);
	if (!addr_public(&a, NULL))
		return 0;
	for (i = 0; i < res->nkept; i++)
		if (strcmp(res->kept[i].name, owner) == 0 &&
		    addr_equal(&res->kept[i].addr, &a))
			return 1;
	return 0;
}

/* SvcParams: increasing keys, no ech, hints the policy accepts and kept. */
static void
v_svc(const uint8_t *m, size_t p, size_t end, const char *owner,
    const struct dns_filter_result *res)
{
	unsigned key, vlen, alen;
	long prev = -1;
	char t[256];
	size_t i;

	CHECK(end - p >= 2);
	p += 2;
	v_name(m, end, &p, t);
	CHECK(t[0] == '\0' || name_not_evil(t, NULL));
	while (p < end) {
		CHECK(end - p >= 4);
		key = get16(m + p);
		vlen = get16(m + p + 2);
		p += 4;
		CHECK((long)key > prev && key != 5 && vlen <= end - p);
		prev = key;
		if (key == 4 || key == 6) {
			alen = key == 4 ? 4 : 16;
			CHECK(vlen > 0 && vlen % alen == 0);
			for (i = 0; i < vlen; i += alen)
				CHECK(in_kept(res, owner, m + p + i, alen));
		}
		p += vlen;
	}
}

static void
v_rdata(const uint8_t *m, unsigned type, size_t p, size_t end,
    const char *owner, const struct dns_filter_result *res)
{
	char t[256];

	switch (type) {
	case DNS_T_A:
	case DNS_T_AAAA:
		CHECK(end - p == (type == DNS_T_A ? 4u : 16u));
		CHECK(in_kept(res, owner, m + p, end - p));
		break;
	case DNS_T_MX:
	case DNS_T_SRV:
		CHECK(end - p >= (type == DNS_T_MX ? 2u : 6u));
		p += type == DNS_T_MX ? 2 : 6;
		/* FALLTHROUGH */
	case DNS_T_CNAME:
	case DNS_T_NS:
	case DNS_T_PTR:
		v_name(m, end, &p, t);
		CHECK(p == end);
		CHECK(type != DNS_T_CNAME || (t[0] != '\0' &&
		    name_not_evil(t, NULL)));
		break;
	case DNS_T_TXT:
		CHECK(p < end);
		while (p < end)
			p += m[p] + 1u;
		CHECK(p == end);
		break;
	case DNS_T_SVCB:
	case DNS_T_HTTPS:
		v_svc(m, p, end, owner, res);
		break;
	default:
		CHECK(!"a type the filter does not write");
	}
}

/* A message we wrote in answer to q; returns ANCOUNT. */
static unsigned
verify(const uint8_t *m, size_t len, const struct dns_query *q,
    const struct dns_filter_result *res)
{
	unsigned an, i, flags;
	size_t p = DNS_HDR_LEN, rdlen;
	char name[256];

	CHECK(len >= DNS_HDR_LEN);
	flags = get16(m + 2);
	CHECK(get16(m) == q->id);
	CHECK((flags & (DNS_F_QR | DNS_F_RA)) == (DNS_F_QR | DNS_F_RA));
	CHECK((flags & (DNS_F_OPCODE | DNS_F_AA | DNS_F_AD)) == 0);
	CHECK((flags & DNS_F_RD) == (q->flags & DNS_F_RD));
	CHECK((flags & DNS_F_RCODE) <= DNS_RCODE_REFUSED);
	CHECK(get16(m + 4) == 1 && get16(m + 8) == 0);
	CHECK(get16(m + 10) == (q->has_edns ? 1u : 0u));
	an = get16(m + 6);
	v_name(m, len, &p, name);
	CHECK(strcasecmp(name, q->name) == 0);
	CHECK(len - p >= 4 && get16(m + p) == q->qtype &&
	    get16(m + p + 2) == q->qclass);
	p += 4;
	for (i = 0; i < an; i++) {
		v_name(m, len, &p, name);
		CHECK(len - p >= 10);
		CHECK(get16(m + p + 2) == DNS_C_IN);
		CHECK(m[p + 4] < 0x80);
		rdlen = get16(m + p + 8);
		CHECK(rdlen <= len - p - 10);
		if (res != NULL)
			v_rdata(m, get16(m + p), p + 10, p + 10 + rdlen, name,
			    res);
		p += 10 + rdlen;
	}
	if (q->has_edns) {
		CHECK(len - p == 11);
		CHECK(m[p] == 0 && get16(m + p + 1) == DNS_T_OPT);
		CHECK(get16(m + p + 3) == DNS_EDNS_UDP);
		CHECK(get16(m + p + 5) == 0 && get16(m + p + 9) == 0);
		CHECK(get16(m + p + 7) == (q->dnssec_ok ? 0x8000u : 0));
		p += 11;
	}
	CHECK(p == len);
	return an;
}

/* A query that parsed: normal form, and our writers round-trip it. */
static void
query_checks(const struct dns_query *q, size_t len)
{
	struct dns_filter_result res;
	struct dns_query back;
	char norm[NAME_BUFSZ];
	size_t n, olen;
	int rcode;

	n = strlen(q->name);
	CHECK(n == 0 || (name_normalize(q->name, n, norm) == 0 &&
	    strcmp(norm, q->name) == 0));
	CHECK(strcasecmp(q->echo_name, q->name) == 0);
	CHECK(q->udp_size >= 512 && q->udp_size <= 4096);
	CHECK(q->has_edns || q->udp_size == 512);
	CHECK(q->question_len == (n == 0 ? 1 : n + 2) + 4);
	CHECK(DNS_HDR_LEN + q->question_len + (q->has_edns ? 11u : 0) <= len);

	CHECK(dns_build_query(q, 0x7777, q->udp_size, out, CAP, &olen) == 0);
	CHECK(dns_query_parse(out, olen, &back) == PARSE_COMPLETE);
	CHECK(back.id == 0x7777 && back.flags == DNS_F_RD);
	CHECK(strcmp(back.name, q->name) == 0);
	CHECK(back.qtype == q->qtype && back.qclass == q->qclass);
	CHECK(back.has_edns == (q->udp_size > 512));
	CHECK(back.udp_size == q->udp_size);

	for (rcode = 0; rcode <= DNS_RCODE_REFUSED; rcode++) {
		CHECK(dns_build_error(q, rcode, out, CAP, &olen) == 0);
		CHECK(verify(out, olen, q, NULL) == 0);
		CHECK(dns_build_error(q, rcode, out, olen - 1, &n) ==
		    SL_ERR_TOO_BIG);
		/* It passes the filter too, as a response to q. */
		CHECK(dns_filter_answer(out, olen, q, q->id, 1, &ops, out2,
		    CAP, &n, &res) == 0);
		CHECK(n == olen);
		CHECK(memcmp(out, out2, n) == 0 || (rcode != 0 &&
		    rcode != DNS_RCODE_SERVFAIL && rcode != DNS_RCODE_NXDOMAIN));
	}
}

/* The fixed query byte 0 picks. */
static void
fixed_query(uint8_t sel, struct dns_query *q, int *udp)
{
	static const uint16_t types[] = {
		DNS_T_A, DNS_T_AAAA, DNS_T_CNAME, DNS_T_HTTPS, DNS_T_SVCB,
		DNS_T_MX, DNS_T_TXT, DNS_T_SRV,
	};
	static const uint16_t sizes[] = { 512, 600, 1232, 4096 };

	memset(q, 0, sizeof(*q));
	q->id = QID;
	q->flags = DNS_F_RD;
	strcpy(q->name, "www.example.com");
	strcpy(q->echo_name, "www.Example.com");
	q->qtype = types[sel & 7];
	q->qclass = DNS_C_IN;
	q->has_edns = (sel & 0x08) != 0;
	q->udp_size = q->has_edns ? sizes[sel >> 6] : 512;
	q->dnssec_ok = q->has_edns && (sel & 0x20) != 0;
	q->question_len = 17 + 4;
	*udp = (sel & 0x10) != 0;
}

static void
filter_checks(const uint8_t *resp, size_t len, uint8_t sel)
{
	struct dns_filter_result res, res2;
	struct dns_query q;
	size_t olen, olen2;
	unsigned an;
	int udp, r;

	fixed_query(sel, &q, &udp);
	r = dns_filter_answer(resp, len, &q, UPID, udp, &ops, out, CAP, &olen,
	    &res);
	CHECK(r == 0 || r == SL_ERR_INVALID);
	if (r != 0)
		return;
	CHECK(olen <= (udp ? q.udp_size : DNS_MSG_MAX));
	CHECK(res.nkept <= DNS_KEPT_MAX);
	CHECK(res.truncated == ((out[2] & 0x02) != 0));
	CHECK(!res.upstream_tc || res.truncated);
	an = verify(out, olen, &q, &res);
	CHECK(an > 0 || res.nkept == 0);

	r = dns_filter_answer(out, olen, &q, QID, udp, &ops, out2, CAP, &olen2,
	    &res2);
	CHECK(r == 0 && olen2 == olen && memcmp(out, out2, olen) == 0);
	CHECK(res2.nkept == res.nkept && res2.removed_addrs == 0 &&
	    res2.cut_cnames == 0 && res2.stripped_ech == 0 &&
	    res2.dropped == 0);

	r = dns_filter_answer(resp, len, &q, UPID, udp, &ops, out2, olen - 1,
	    &olen2, &res2);
	CHECK(r == SL_ERR_TOO_BIG);
}

/* The answer to a query the parser may refuse: never larger, framed. */
static void
formerr_checks(const uint8_t *data, size_t size)
{
	size_t olen, n, p = DNS_HDR_LEN;
	unsigned flags;
	char name[256];
	int r;

	r = dns_build_formerr(data, size, out, CAP, &olen);
	if (size < DNS_HDR_LEN || (data[2] & 0x80) != 0) {
		CHECK(r == SL_ERR_INVALID);
		return;
	}
	CHECK(r == 0);
	CHECK(olen >= DNS_HDR_LEN && olen <= size);
	CHECK(get16(out) == get16(data));
	flags = get16(out + 2);
	CHECK((flags & DNS_F_QR) && (flags & DNS_F_RA));
	CHECK((flags & DNS_F_OPCODE) == (get16(data + 2) & DNS_F_OPCODE));
	CHECK((flags & DNS_F_RCODE) == ((flags & DNS_F_OPCODE) != 0 ?
	    DNS_RCODE_NOTIMP : DNS_RCODE_FORMERR));
	CHECK((flags & (DNS_F_AA | DNS_F_TC | DNS_F_AD | 0x0040)) == 0);
	CHECK(get16(out + 6) == 0 && get16(out + 8) == 0 &&
	    get16(out + 10) == 0);
	CHECK(get16(out + 4) <= 1);
	if (get16(out + 4) == 1) {
		CHECK(get16(data + 4) == 1);
		v_name(out, olen, &p, name);
		CHECK(olen - p == 4);
		CHECK(memcmp(out + DNS_HDR_LEN, data + DNS_HDR_LEN,
		    olen - DNS_HDR_LEN) == 0);
	} else
		CHECK(olen == DNS_HDR_LEN);
	CHECK(dns_build_formerr(data, size, out, olen - 1, &n) ==
	    SL_ERR_TOO_BIG);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q;

	if (dns_query_parse(data, size, &q) == PARSE_COMPLETE)
		query_checks(&q, size);
	formerr_checks(data, size);
	if (size >= 1)
		filter_checks(data + 1, size - 1, data[0]);
	return 0;
}
