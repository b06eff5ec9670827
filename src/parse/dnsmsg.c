/* dnsmsg.c: DNS messages from sandboxes and from upstream, parsed strictly. */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"
#include "parse/dnsmsg.h"
#include "parse/sniff.h"

#define NAME_WIRE_MAX	255	/* RFC 1035 3.1, the root byte included */
#define PTR_JUMPS_MAX	32	/* far more than any compressor makes */
#define CHAIN_MAX	16	/* names in a CNAME chain, q's included */
#define RR_FIXED	10	/* type, class, TTL, RDLENGTH */
#define OPT_LEN		11	/* an OPT record without options */
#define EDNS_UDP_MAX	4096
#define OPT_DO		0x8000	/* in the low 16 bits of the OPT TTL */

/* SvcParamKeys (RFC 9460 14.3.2) that the filter acts on. */
#define SVC_MANDATORY	0
#define SVC_IPV4HINT	4
#define SVC_ECH		5
#define SVC_IPV6HINT	6

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* Names. */

/*
 * Reads the name at *pos of msg (msglen bytes); its own bytes, up to the
 * first pointer, must lie before end (a record's or RDATA's end).  Labels
 * are 1..63 bytes.  A compression pointer (only when ptr_ok) must point at
 * or after the header and strictly before the first byte of the label run
 * that holds it: the runs' starts then strictly decrease, so no chain of
 * pointers can loop; at most PTR_JUMPS_MAX jumps all the same.  The name
 * expanded is at most 255 bytes.  Writes it uncompressed to wire
 * (NAME_WIRE_MAX bytes) with its length in *wlen, and moves *pos past the
 * name's own bytes.  Returns 0 or SL_ERR_INVALID.
 */
static int
name_read(const uint8_t *msg, size_t msglen, size_t end, size_t *pos,
    int ptr_ok, uint8_t *wire, size_t *wlen)
{
	size_t p = *pos, run = *pos, lim = end, n = 0, next = 0, t;
	unsigned jumps = 0;
	uint8_t c;

	for (;;) {
		if (p >= lim)
			return SL_ERR_INVALID;
		if ((c = msg[p]) == 0)
			break;
		if ((c & 0xc0) == 0xc0) {
			if (!ptr_ok || lim - p < 2)
				return SL_ERR_INVALID;
			t = (size_t)(c & 0x3f) << 8 | msg[p + 1];
			if (t < DNS_HDR_LEN || t >= run ||
			    ++jumps > PTR_JUMPS_MAX)
				return SL_ERR_INVALID;
			if (next == 0)
				next = p + 2;
			run = p = t;
			lim = msglen;
			continue;
		}
		/* 0x40 and 0x80 are label types nobody uses (RFC 6891 5). */
		if ((c & 0xc0) != 0 || c >= lim - p ||
		    n + c + 2 > NAME_WIRE_MAX)
			return SL_ERR_INVALID;
		memcpy(wire + n, msg + p, (size_t)c + 1);
		n += (size_t)c + 1;
		p += (size_t)c + 1;
	}
	wire[n++] = 0;
	*wlen = n;
	*pos = next != 0 ? next : p + 1;
	return 0;
}

/*
 * The normalised text of a wire name ("" for the root) into out
 * (NAME_BUFSZ bytes), and into raw (may be NULL) the same with its case
 * kept.  SL_ERR_INVALID for a name name_normalize refuses, or with a '.'
 * or NUL inside a label, which text would misread.
 */
static int
name_text(const uint8_t *wire, char *out, char *raw)
{
	char buf[NAME_WIRE_MAX];
	size_t i = 0, n = 0, k;

	while ((k = wire[i++]) != 0) {
		if (n > 0)
			buf[n++] = '.';
		for (; k > 0; k--, i++) {
			if (wire[i] == '.' || wire[i] == '\0')
				return SL_ERR_INVALID;
			buf[n++] = (char)wire[i];
		}
	}
	if (n > 0 && name_normalize(buf, n, out) != 0)
		return SL_ERR_INVALID;
	if (n == 0)
		out[0] = '\0';
	if (raw != NULL) {
		memcpy(raw, buf, n);
		raw[n] = '\0';
	}
	return 0;
}

/* Whether q->name is in normal form ("" or what name_normalize makes). */
static int
query_name_ok(const struct dns_query *q)
{
	char tmp[NAME_BUFSZ];
	size_t n = strnlen(q->name, NAME_BUFSZ);

	if (n == NAME_BUFSZ)
		return 0;
	return n == 0 || (name_normalize(q->name, n, tmp) == 0 &&
	    strcmp(tmp, q->name) == 0);
}

/* The name to echo in the question: as received when it is q's name. */
static const char *
echo_name(const struct dns_query *q)
{
	if (memchr(q->echo_name, '\0', NAME_BUFSZ) != NULL &&
	    strcasecmp(q->echo_name, q->name) == 0)
		return q->echo_name;
	return q->name;
}

/*
 * Output: a writer that counts every byte, so sizes come out exact, and
 * stores only what fits cap.  len never shrinks except by a caller
 * rolling back to a length it saw, so once past cap it stays past.
 */
struct wbuf {
	uint8_t	*p;
	size_t	 cap;
	size_t	 len;
};

static void
w_put(struct wbuf *w, const void *d, size_t n)
{
	if (n > 0 && w->len <= w->cap && n <= w->cap - w->len)
		memcpy(w->p + w->len, d, n);
	w->len += n;
}

static void
w_u16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	w_put(w, b, 2);
}

static void
w_u32(struct wbuf *w, uint32_t v)
{
	w_u16(w, (uint16_t)(v >> 16));
	w_u16(w, (uint16_t)v);
}

/* Rewrites two bytes already counted, when they were stored. */
static void
w_set16(struct wbuf *w, size_t at, uint16_t v)
{
	if (at + 2 <= w->len && at + 2 <= w->cap) {
		w->p[at] = (uint8_t)(v >> 8);
		w->p[at + 1] = (uint8_t)v;
	}
}

/* A name in normal form ("" for the root), uncompressed. */
static void
w_name(struct wbuf *w, const char *name)
{
	const char *dot;
	size_t n;
	uint8_t l;

	while (*name != '\0') {
		dot = strchr(name, '.');
		n = dot != NULL ? (size_t)(dot - name) : strlen(name);
		l = (uint8_t)n;
		w_put(w, &l, 1);
		w_put(w, name, n);
		name += n + (dot != NULL);
	}
	w_put(w, "", 1);
}

static void
w_header(struct wbuf *w, uint16_t id, uint16_t flags, uint16_t an,
    uint16_t ar)
{
	w_u16(w, id);
	w_u16(w, flags);
	w_u16(w, 1);
	w_u16(w, an);
	w_u16(w, 0);
	w_u16(w, ar);
}

/* An OPT record of the root: udp size, version 0, DO as given. */
static void
w_opt(struct wbuf *w, uint16_t udp_size, int dnssec_ok)
{
	w_put(w, "", 1);
	w_u16(w, DNS_T_OPT);
	w_u16(w, udp_size);
	w_u32(w, dnssec_ok ? OPT_DO : 0);
	w_u16(w, 0);
}

/* The flags of a response to q: RD and CD as asked, RA, AA and AD clear. */
static uint16_t
resp_flags(const struct dns_query *q, int tc, int rcode)
{
	return (uint16_t)(DNS_F_QR | (q->flags & (DNS_F_RD | DNS_F_CD)) |
	    DNS_F_RA | (tc ? DNS_F_TC : 0) | (rcode & DNS_F_RCODE));
}

/* Header and question of a response to q; ANCOUNT and flags come later. */
static void
w_response_start(struct wbuf *w, const struct dns_query *q, uint16_t flags)
{
	w_header(w, q->id, flags, 0, q->has_edns ? 1 : 0);
	w_name(w, echo_name(q));
	w_u16(w, q->qtype);
	w_u16(w, q->qclass);
}

/* Records. */

struct rr {
	uint8_t		owner[NAME_WIRE_MAX];	/* expanded */
	size_t		owner_len;
	uint16_t	type;
	uint16_t	class;
	uint32_t	ttl;
	size_t		rdata;		/* offset of the RDATA in the message */
	size_t		rdlen;
};

/* Reads the record at *pos: owner, fixed fields, RDATA bounds. */
static int
rr_read(const uint8_t *m, size_t len, size_t *pos, int ptr_ok, struct rr *rr)
{
	size_t p = *pos;

	if (name_read(m, len, len, &p, ptr_ok, rr->owner, &rr->owner_len) != 0)
		return SL_ERR_INVALID;
	if (len - p < RR_FIXED)
		return SL_ERR_INVALID;
	rr->type = get16(m + p);
	rr->class = get16(m + p + 2);
	rr->ttl = get32(m + p + 4);
	rr->rdlen = get16(m + p + 8);
	p += RR_FIXED;
	if (rr->rdlen > len - p)
		return SL_ERR_INVALID;
	rr->rdata = p;
	*pos = p + rr->rdlen;
	return 0;
}

/* An OPT record (RFC 6891 6.1): root owner, version 0, options framed. */
static int
opt_check(const uint8_t *m, const struct rr *rr)
{
	size_t p = rr->rdata, end = rr->rdata + rr->rdlen, olen;

	if (rr->owner_len != 1 || ((rr->ttl >> 16) & 0xff) != 0)
		return SL_ERR_INVALID;
	while (p < end) {
		if (end - p < 4)
			return SL_ERR_INVALID;
		olen = get16(m + p + 2);
		p += 4;
		if (olen > end - p)
			return SL_ERR_INVALID;
		p += olen;
	}
	return 0;
}

/* Queries. */

int
dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *out)
{
	struct dns_query q;
	uint8_t wire[NAME_WIRE_MAX];
	size_t pos = DNS_HDR_LEN, wlen;
	struct rr opt;

	if (buf == NULL || out == NULL || len < DNS_HDR_LEN || len > DNS_MSG_MAX)
		return PARSE_INVALID;
	memset(&q, 0, sizeof(q));
	q.id = get16(buf);
	q.flags = get16(buf + 2);
	if ((q.flags & (DNS_F_QR | DNS_F_OPCODE)) != 0 || get16(buf + 4) != 1 ||
	    get16(buf + 6) != 0 || get16(buf + 8) != 0 || get16(buf + 10) > 1)
		return PARSE_INVALID;
	if (name_read(buf, len, len, &pos, 0, wire, &wlen) != 0 ||
	    name_text(wire, q.name, q.echo_name) != 0 || len - pos < 4)
		return PARSE_INVALID;
	q.qtype = get16(buf + pos);
	q.qclass = get16(buf + pos + 2);
	pos += 4;
	if (q.qclass != DNS_C_IN || q.qtype == 0 || q.qtype == DNS_T_OPT)
		return PARSE_INVALID;
	q.question_len = pos - DNS_HDR_LEN;
	q.udp_size = DNS_UDP_MIN;
	if (get16(buf + 10) == 1) {
		if (rr_read(buf, len, &pos, 0, &opt) != 0 ||
		    opt.type != DNS_T_OPT || opt_check(buf, &opt) != 0)
			return PARSE_INVALID;
		q.has_edns = 1;
		q.dnssec_ok = (opt.ttl & OPT_DO) != 0;
		if (opt.class > EDNS_UDP_MAX)
			q.udp_size = EDNS_UDP_MAX;
		else if (opt.class > DNS_UDP_MIN)
			q.udp_size = opt.class;
	}
	if (pos != len)
		return PARSE_INVALID;
	*out = q;
	return PARSE_COMPLETE;
}

int
dns_build_error(const struct dns_query *q, int rcode, uint8_t *out,
    size_t cap, size_t *outlen)
{
	return dns_build_error_ede(q, rcode, 0, NULL, out, cap, outlen);
}

#define OPT_EDE		15	/* the EDNS option code of an Extended DNS Error */

int
dns_build_error_ede(const struct dns_query *q, int rcode, uint16_t info,
    const char *text, uint8_t *out, size_t cap, size_t *outlen)
{
	struct wbuf w = { out, cap, 0 };
	size_t n = 0, i;
	uint8_t c;

	if (q == NULL || out == NULL || outlen == NULL || !query_name_ok(q) ||
	    rcode < DNS_RCODE_NOERROR || rcode > DNS_RCODE_REFUSED)
		return SL_ERR_INVALID;
	w_response_start(&w, q, resp_flags(q, 0, rcode));
	if (q->has_edns && text != NULL) {
		n = strnlen(text, DNS_EDE_TEXT_MAX);
		w_put(&w, "", 1);
		w_u16(&w, DNS_T_OPT);
		w_u16(&w, DNS_EDNS_UDP);
		w_u32(&w, q->dnssec_ok ? OPT_DO : 0);
		w_u16(&w, (uint16_t)(4 + 2 + n));	/* RDLENGTH */
		w_u16(&w, OPT_EDE);
		w_u16(&w, (uint16_t)(2 + n));
		w_u16(&w, info);
		for (i = 0; i < n; i++) {
			c = (uint8_t)text[i];
			w_put(&w, c >= 0x20 && c < 0x7f ? &c : (const uint8_t *)"?",
			    1);
		}
	} else if (q->has_edns)
		w_opt(&w, DNS_EDNS_UDP, q->dnssec_ok);
	if (w.len > cap)
		return SL_ERR_TOO_BIG;
	*outlen = w.len;
	return 0;
}

int
dns_build_formerr(const uint8_t *buf, size_t len, uint8_t *out, size_t cap,
    size_t *outlen)
{
	struct wbuf w = { out, cap, 0 };
	uint8_t wire[NAME_WIRE_MAX];
	size_t pos = DNS_HDR_LEN, wlen, qlen = 0;
	uint16_t flags;
	int rcode;

	if (buf == NULL || out == NULL || outlen == NULL || len < DNS_HDR_LEN)
		return SL_ERR_INVALID;
	flags = get16(buf + 2);
	if ((flags & DNS_F_QR) != 0)
		return SL_ERR_INVALID;	/* never answer an answer */
	rcode = (flags & DNS_F_OPCODE) != 0 ? DNS_RCODE_NOTIMP :
	    DNS_RCODE_FORMERR;
	if (get16(buf + 4) == 1 &&
	    name_read(buf, len, len, &pos, 0, wire, &wlen) == 0 &&
	    len - pos >= 4)
		qlen = pos + 4 - DNS_HDR_LEN;
	w_u16(&w, get16(buf));
	w_u16(&w, (uint16_t)(DNS_F_QR | (flags & (DNS_F_OPCODE | DNS_F_RD |
	    DNS_F_CD)) | DNS_F_RA | rcode));
	w_u16(&w, qlen > 0 ? 1 : 0);
	w_u16(&w, 0);
	w_u16(&w, 0);
	w_u16(&w, 0);
	w_put(&w, buf + DNS_HDR_LEN, qlen);
	if (w.len > cap)
		return SL_ERR_TOO_BIG;
	*outlen = w.len;
	return 0;
}

int
dns_build_query(const struct dns_query *q, uint16_t id, uint16_t udp_size,
    uint8_t *out, size_t cap, size_t *outlen)
{
	struct wbuf w = { out, cap, 0 };
	int edns = udp_size > DNS_UDP_MIN;

	if (q == NULL || out == NULL || outlen == NULL || !query_name_ok(q))
		return SL_ERR_INVALID;
	w_header(&w, id, DNS_F_RD, 0, edns ? 1 : 0);
	w_name(&w, q->name);
	w_u16(&w, q->qtype);
	w_u16(&w, q->qclass);
	if (edns)
		w_opt(&w, udp_size, 0);
	if (w.len > cap)
		return SL_ERR_TOO_BIG;
	*outlen = w.len;
	return 0;
}

int
dns_peek_header(const uint8_t *buf, size_t len, uint16_t *id,
    uint16_t *flags)
{
	if (buf == NULL || len < DNS_HDR_LEN)
		return SL_ERR_INVALID;
	if (id != NULL)
		*id = get16(buf);
	if (flags != NULL)
		*flags = get16(buf + 2);
	return 0;
}

/* The answer filter. */

/* What a validated upstream response holds. */
struct resp_info {
	size_t		an_at;		/* offset of the answer section */
	unsigned	ancount;
	int		rcode;		/* as relayed */
	int		tc;
};

/*
 * Validates the whole response: header, q's question, the framing of
 * every record of every section, one OPT at most and only as additional.
 */
static int
resp_check(const uint8_t *m, size_t len, const struct dns_query *q,
    uint16_t id, struct resp_info *ri)
{
	uint8_t wire[NAME_WIRE_MAX];
	char name[NAME_BUFSZ];
	size_t pos = DNS_HDR_LEN, wlen;
	unsigned an, total, i, nopt = 0;
	uint16_t flags;
	struct rr rr;
	int rcode;

	if (len < DNS_HDR_LEN || len > DNS_MSG_MAX)
		return SL_ERR_INVALID;
	flags = get16(m + 2);
	if (get16(m) != id || (flags & DNS_F_QR) == 0 ||
	    (flags & DNS_F_OPCODE) != 0 || get16(m + 4) != 1)
		return SL_ERR_INVALID;
	an = get16(m + 6);
	total = an + get16(m + 8) + get16(m + 10);
	if (name_read(m, len, len, &pos, 1, wire, &wlen) != 0 ||
	    name_text(wire, name, NULL) != 0 || strcmp(name, q->name) != 0 ||
	    len - pos < 4 || get16(m + pos) != q->qtype ||
	    get16(m + pos + 2) != q->qclass)
		return SL_ERR_INVALID;
	pos += 4;
	ri->an_at = pos;
	rcode = flags & DNS_F_RCODE;
	for (i = 0; i < total; i++) {
		if (rr_read(m, len, &pos, 1, &rr) != 0)
			return SL_ERR_INVALID;
		if (rr.type != DNS_T_OPT)
			continue;
		if (i < total - get16(m + 10) || nopt++ > 0 ||
		    opt_check(m, &rr) != 0)
			return SL_ERR_INVALID;
		rcode |= (int)(rr.ttl >> 24) << 4;
	}
	if (pos != len)
		return SL_ERR_INVALID;
	ri->ancount = an;
	ri->tc = (flags & DNS_F_TC) != 0;
	ri->rcode = rcode == DNS_RCODE_NOERROR || rcode == DNS_RCODE_NXDOMAIN ||
	    rcode == DNS_RCODE_SERVFAIL ? rcode : DNS_RCODE_SERVFAIL;
	return 0;
}

/* The state of one filtering run. */
struct fctx {
	const uint8_t	*m;		/* the upstream response */
	size_t		 len;
	const struct dns_filter_ops *ops;
	struct wbuf	 w;
	size_t		 limit;		/* the message may not grow past this */
	size_t		 tail;		/* bytes that follow the answers (OPT) */
	uint16_t	 ancount;	/* records written */
	char		 chain[CHAIN_MAX][NAME_BUFSZ];
	size_t		 nchain;
	int		 closed;	/* the chain was cut */
	const char	*owner;		/* of the record being written */
	uint32_t	 ttl;		/* of the record being written */
	struct sl_addr	 pend[DNS_KEPT_MAX];	/* its addresses, to keep */
	size_t		 npend;
	struct dns_filter_result res;
};

/* Writes the RDATA of rr; 0 written, 1 to drop the record, < 0 an error. */
typedef int (*rdata_fn)(struct fctx *, const struct rr *);

static int
chain_find(const struct fctx *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nchain; i++)
		if (strcmp(c->chain[i], name) == 0)
			return (int)i;
	return -1;
}

/* Whether the owner of the record being written already keeps a. */
static int
kept_has(const struct fctx *c, const struct sl_addr *a)
{
	size_t i;

	for (i = 0; i < c->res.nkept; i++)
		if (strcmp(c->res.kept[i].name, c->owner) == 0 &&
		    addr_equal(&c->res.kept[i].addr, a))
			return 1;
	for (i = 0; i < c->npend; i++)
		if (addr_equal(&c->pend[i], a))
			return 1;
	return 0;
}

/* Notes an address to keep with the record; -1 when kept[] is full. */
static int
pend_add(struct fctx *c, const struct sl_addr *a)
{
	if (kept_has(c, a))
		return 0;
	if (c->res.nkept + c->npend >= DNS_KEPT_MAX)
		return -1;
	c->pend[c->npend++] = *a;
	return 0;
}

/* The canonical form of n (4 or 16) address bytes. */
static void
addr_from_bytes(const uint8_t *b, size_t n, struct sl_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = n == 4 ? AF_INET : AF_INET6;
	memcpy(a->bytes, b, n);
	addr_canonical(a, a);
}

/*
 * Writes a record with rr's type, class and TTL for the owner, its RDATA
 * from fn, then keeps it if it fits the limit, else rolls it back and
 * marks the answer truncated (no later record is written then).
 */
static int
emit(struct fctx *c, const struct rr *rr, const char *owner, rdata_fn fn)
{
	size_t at = c->w.len, rd, i;
	int r;

	c->owner = owner;
	c->ttl = (rr->ttl & 0x80000000u) != 0 ? 0 : rr->ttl;
	c->npend = 0;
	w_name(&c->w, owner);
	w_u16(&c->w, rr->type);
	w_u16(&c->w, rr->class);
	w_u32(&c->w, c->ttl);
	rd = c->w.len;
	w_u16(&c->w, 0);
	if ((r = fn(c, rr)) != 0 || c->w.len - rd - 2 > 0xffff) {
		c->w.len = at;
		return r < 0 ? r : 0;
	}
	w_set16(&c->w, rd, (uint16_t)(c->w.len - rd - 2));
	if (c->res.truncated || c->w.len + c->tail > c->limit) {
		c->w.len = at;
		c->res.truncated = 1;
		return 0;
	}
	if (c->w.len + c->tail > c->w.cap)
		return SL_ERR_TOO_BIG;
	c->ancount++;
	for (i = 0; i < c->npend; i++) {
		struct dns_kept *k = &c->res.kept[c->res.nkept++];

		memcpy(k->name, owner, strlen(owner) + 1);
		k->addr = c->pend[i];
		k->ttl = c->ttl;
	}
	return 0;
}

static int
rd_addr(struct fctx *c, const struct rr *rr)
{
	size_t n = rr->type == DNS_T_A ? 4 : 16;
	struct sl_addr a;

	if (rr->rdlen != n) {
		c->res.dropped++;
		return 1;
	}
	addr_from_bytes(c->m + rr->rdata, n, &a);
	if (!c->ops->addr_ok(&a, c->ops->arg)) {
		c->res.removed_addrs++;
		return 1;
	}
	if (pend_add(c, &a) != 0) {
		c->res.dropped++;
		return 1;
	}
	w_put(&c->w, c->m + rr->rdata, n);
	return 0;
}

/*
 * The name in rr's RDATA after skip fixed bytes, ending exactly where the
 * RDATA ends, as normalised text ("" for the root).
 */
static int
rdata_name(const struct fctx *c, const struct rr *rr, size_t skip,
    int ptr_ok, char *out)
{
	uint8_t wire[NAME_WIRE_MAX];
	size_t p = rr->rdata + skip, end = rr->rdata + rr->rdlen, wlen;

	if (rr->rdlen < skip ||
	    name_read(c->m, c->len, end, &p, ptr_ok, wire, &wlen) != 0 ||
	    p != end || name_text(wire, out, NULL) != 0)
		return SL_ERR_INVALID;
	return 0;
}

/* CNAME, NS, PTR, MX, SRV: fixed fields, then one name, decompressed. */
static int
rd_named(struct fctx *c, const struct rr *rr)
{
	size_t skip = rr->type == DNS_T_MX ? 2 : rr->type == DNS_T_SRV ? 6 : 0;
	char name[NAME_BUFSZ];

	if (rdata_name(c, rr, skip, 1, name) != 0) {
		c->res.dropped++;
		return 1;
	}
	w_put(&c->w, c->m + rr->rdata, skip);
	w_name(&c->w, name);
	return 0;
}

/* TXT: one or more character-strings filling the RDATA exactly. */
static int
rd_txt(struct fctx *c, const struct rr *rr)
{
	size_t p = 0;

	while (p < rr->rdlen)
		p += (size_t)c->m[rr->rdata + p] + 1;
	if (rr->rdlen == 0 || p != rr->rdlen) {
		c->res.dropped++;
		return 1;
	}
	w_put(&c->w, c->m + rr->rdata, rr->rdlen);
	return 0;
}

/*
 * An ipv4hint or ipv6hint value: the entries addr_ok accepts are written
 * under the key; none left writes nothing and sets the key's bit in *gone.
 */
static int
svc_hints(struct fctx *c, uint16_t key, const uint8_t *v, size_t vlen,
    unsigned *gone)
{
	size_t alen = key == SVC_IPV4HINT ? 4 : 16, at = c->w.len, i, n = 0;
	struct sl_addr a;

	if (vlen == 0 || vlen % alen != 0)
		return -1;
	w_u16(&c->w, key);
	w_u16(&c->w, 0);
	for (i = 0; i < vlen; i += alen) {
		addr_from_bytes(v + i, alen, &a);
		if (!c->ops->addr_ok(&a, c->ops->arg))
			c->res.removed_addrs++;
		else if (pend_add(c, &a) != 0)
			c->res.dropped++;
		else {
			w_put(&c->w, v + i, alen);
			n += alen;
		}
	}
	if (n == 0) {
		c->w.len = at;
		*gone |= 1u << key;
	} else
		w_set16(&c->w, at + 2, (uint16_t)n);
	return 0;
}

/*
 * SvcParams (RFC 9460 2.2): key/length pairs, keys strictly increasing,
 * filling the RDATA exactly.  ech goes, hints are filtered, the rest is
 * copied.  Returns 0, or -1 for a malformed list.
 */
static int
svc_params(struct fctx *c, size_t p, size_t end)
{
	size_t vlen, mand = 0, mlen = 0, i;
	unsigned gone = 0;
	long prev = -1;
	uint16_t key;

	while (p < end) {
		if (end - p < 4)
			return -1;
		key = get16(c->m + p);
		vlen = get16(c->m + p + 2);
		p += 4;
		if (vlen > end - p || (long)key <= prev)
			return -1;
		prev = key;
		if (key == SVC_ECH)
			gone |= 1u << SVC_ECH;
		else if (key == SVC_IPV4HINT || key == SVC_IPV6HINT) {
			if (svc_hints(c, key, c->m + p, vlen, &gone) != 0)
				return -1;
		} else {
			if (key == SVC_MANDATORY) {
				if (vlen == 0 || vlen % 2 != 0)
					return -1;
				mand = p;
				mlen = vlen;
			}
			w_u16(&c->w, key);
			w_u16(&c->w, (uint16_t)vlen);
			w_put(&c->w, c->m + p, vlen);
		}
		p += vlen;
	}
	if (gone & (1u << SVC_ECH))
		c->res.stripped_ech++;
	/* A client must ignore a record missing a mandatory key. */
	for (i = 0; i < mlen; i += 2) {
		key = get16(c->m + mand + i);
		if (key < 16 && (gone & (1u << key)) != 0)
			return -1;
	}
	return 0;
}

/* HTTPS, SVCB: priority, TargetName (never compressed), SvcParams. */
static int
rd_svcb(struct fctx *c, const struct rr *rr)
{
	size_t p = rr->rdata + 2, end = rr->rdata + rr->rdlen, wlen;
	uint8_t wire[NAME_WIRE_MAX];
	char target[NAME_BUFSZ];

	if (rr->rdlen < 2 ||
	    name_read(c->m, c->len, end, &p, 0, wire, &wlen) != 0 ||
	    name_text(wire, target, NULL) != 0 ||
	    (target[0] != '\0' && !c->ops->name_ok(target, c->ops->arg))) {
		c->res.dropped++;
		return 1;
	}
	w_put(&c->w, c->m + rr->rdata, 2);
	w_name(&c->w, target);
	if (svc_params(c, p, end) != 0) {
		c->res.dropped++;
		return 1;
	}
	return 0;
}

/* A CNAME of the last chain name: extends the chain, or cuts it. */
static int
answer_cname(struct fctx *c, const struct rr *rr, int idx)
{
	char target[NAME_BUFSZ];

	if (c->closed || (size_t)idx != c->nchain - 1) {
		c->res.dropped++;
		return 0;
	}
	if (rdata_name(c, rr, 0, 1, target) != 0 || target[0] == '\0' ||
	    chain_find(c, target) >= 0 || c->nchain == CHAIN_MAX ||
	    !c->ops->name_ok(target, c->ops->arg)) {
		c->closed = 1;
		c->res.cut_cnames++;
		return 0;
	}
	memcpy(c->chain[c->nchain++], target, strlen(target) + 1);
	return emit(c, rr, c->chain[idx], rd_named);
}

/* Judges and writes the answer section, record by record. */
static int
answers(struct fctx *c, size_t pos, unsigned n)
{
	char owner[NAME_BUFSZ];
	unsigned i;
	struct rr rr;
	int idx, r;

	for (i = 0; i < n; i++) {
		if (rr_read(c->m, c->len, &pos, 1, &rr) != 0)
			return SL_ERR_INTERNAL;	/* resp_check read it */
		if (rr.class != DNS_C_IN || name_text(rr.owner, owner, NULL) != 0 ||
		    (idx = chain_find(c, owner)) < 0) {
			c->res.dropped++;
			continue;
		}
		switch (rr.type) {
		case DNS_T_CNAME:
			r = answer_cname(c, &rr, idx);
			break;
		case DNS_T_A:
		case DNS_T_AAAA:
			r = emit(c, &rr, c->chain[idx], rd_addr);
			break;
		case DNS_T_HTTPS:
		case DNS_T_SVCB:
			r = emit(c, &rr, c->chain[idx], rd_svcb);
			break;
		case DNS_T_MX:
		case DNS_T_SRV:
		case DNS_T_NS:
		case DNS_T_PTR:
			r = emit(c, &rr, c->chain[idx], rd_named);
			break;
		case DNS_T_TXT:
			r = emit(c, &rr, c->chain[idx], rd_txt);
			break;
		default:
			c->res.dropped++;
			r = 0;
			break;
		}
		if (r != 0)
			return r;
	}
	return 0;
}

int
dns_filter_answer(const uint8_t *resp, size_t len, const struct dns_query *q,
    uint16_t upstream_id, int udp, const struct dns_filter_ops *ops,
    uint8_t *out, size_t cap, size_t *outlen, struct dns_filter_result *res)
{
	struct resp_info ri;
	struct fctx c;
	int r, tc;

	if (resp == NULL || q == NULL || ops == NULL || ops->name_ok == NULL ||
	    ops->addr_ok == NULL || out == NULL || outlen == NULL ||
	    res == NULL || !query_name_ok(q))
		return SL_ERR_INVALID;
	if ((r = resp_check(resp, len, q, upstream_id, &ri)) != 0)
		return r;
	memset(&c, 0, sizeof(c));
	c.m = resp;
	c.len = len;
	c.ops = ops;
	c.w.p = out;
	c.w.cap = cap;
	c.limit = DNS_MSG_MAX;
	if (udp)
		c.limit = q->udp_size < DNS_UDP_MIN ? DNS_UDP_MIN : q->udp_size;
	c.tail = q->has_edns ? OPT_LEN : 0;
	memcpy(c.chain[0], q->name, strlen(q->name) + 1);
	c.nchain = 1;
	w_response_start(&c.w, q, 0);
	if (c.w.len + c.tail > cap)
		return SL_ERR_TOO_BIG;
	if ((r = answers(&c, ri.an_at, ri.ancount)) != 0)
		return r;
	tc = c.res.truncated || ri.tc;
	w_set16(&c.w, 2, resp_flags(q, tc, ri.rcode));
	w_set16(&c.w, 6, c.ancount);
	if (q->has_edns)
		w_opt(&c.w, DNS_EDNS_UDP, q->dnssec_ok);
	if (c.w.len > cap)
		return SL_ERR_TOO_BIG;
	c.res.truncated = tc;
	c.res.upstream_tc = ri.tc;
	*outlen = c.w.len;
	*res = c.res;
	return 0;
}

/* Rate limit. */

void
ratelimit_init(struct ratelimit *rl, double rate, double burst,
    uint64_t now_ms)
{
	/* Written so that NaN counts as 0. */
	rl->rate = rate > 0 ? rate : 0;
	rl->burst = burst > 0 ? burst : 0;
	rl->tokens = rl->burst;
	rl->last_ms = now_ms;
}

int
ratelimit_take(struct ratelimit *rl, uint64_t now_ms)
{
	if (now_ms > rl->last_ms) {
		rl->tokens += (double)(now_ms - rl->last_ms) * rl->rate / 1000.0;
		if (!(rl->tokens <= rl->burst))
			rl->tokens = rl->burst;
		rl->last_ms = now_ms;
	}
	/* Refills summed from fractions may fall short of 1 by a rounding. */
	if (!(rl->tokens >= 1.0 - 1e-9))
		return 0;
	rl->tokens -= 1.0;
	if (rl->tokens < 0)
		rl->tokens = 0;
	return 1;
}
