/* dnsmsg.h: DNS messages from sandboxes and from upstream, parsed strictly. */
#ifndef SLUICE_DNSMSG_H
#define SLUICE_DNSMSG_H

#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/names.h"

#define DNS_HDR_LEN	12
#define DNS_UDP_MIN	512	/* what a query without EDNS allows */
#define DNS_MSG_MAX	65535
#define DNS_EDNS_UDP	1232	/* the udp size our OPT records advertise */

/* Header flag bits (the second 16-bit word). */
#define DNS_F_QR	0x8000
#define DNS_F_OPCODE	0x7800
#define DNS_F_AA	0x0400
#define DNS_F_TC	0x0200
#define DNS_F_RD	0x0100
#define DNS_F_RA	0x0080
#define DNS_F_AD	0x0020
#define DNS_F_CD	0x0010
#define DNS_F_RCODE	0x000f

enum {
	DNS_RCODE_NOERROR = 0, DNS_RCODE_FORMERR = 1, DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3, DNS_RCODE_NOTIMP = 4, DNS_RCODE_REFUSED = 5,
};

enum {
	DNS_T_A = 1, DNS_T_NS = 2, DNS_T_CNAME = 5, DNS_T_SOA = 6,
	DNS_T_PTR = 12, DNS_T_MX = 15, DNS_T_TXT = 16, DNS_T_AAAA = 28,
	DNS_T_SRV = 33, DNS_T_OPT = 41, DNS_T_SVCB = 64, DNS_T_HTTPS = 65,
	DNS_T_ANY = 255,
};

#define DNS_C_IN	1

/* A query from a sandbox. */
struct dns_query {
	uint16_t	id;
	uint16_t	flags;		/* as received (RD, CD, ...) */
	char		name[NAME_BUFSZ];	/* lowercased, no trailing dot; "" for the root */
	char		echo_name[NAME_BUFSZ];	/* name as received (case kept, for 0x20) */
	uint16_t	qtype, qclass;
	int		has_edns;
	uint16_t	udp_size;	/* what the answer may fill: 512 .. 4096 */
	int		dnssec_ok;	/* EDNS DO bit */
	size_t		question_len;	/* bytes of the question section on the wire */
};

/*
 * Parses a query (pure; the contract of sniff.h's parsers): QR=0, opcode
 * QUERY, QDCOUNT 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 0 or 1 and then only an
 * OPT record of the root name (version 0; its options are skipped with
 * their lengths checked); class IN; a type other than 0 and OPT; a name of
 * at most 255 wire bytes whose labels are 1..63 bytes; no compression
 * pointer anywhere (queries never need one); nothing after the last
 * record.  Names with bytes outside [A-Za-z0-9_-] or a numeric last label
 * are refused (name_normalize); the root name is accepted as "".  EDNS
 * udp sizes below 512 count as 512, above 4096 as 4096; without EDNS the
 * size is 512.  Other header bits (RD, CD, ...) are kept in flags,
 * unjudged.  Returns PARSE_COMPLETE with *out written, or PARSE_INVALID.
 */
int	dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *out);

/*
 * Writes a response to q carrying only the question and rcode (NOERROR
 * for an empty NODATA answer, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP or
 * REFUSED), RA set, AA, AD and TC clear, RD and CD copied from the query,
 * and an OPT record (udp size DNS_EDNS_UDP, DO echoed) when the query had
 * one.  The question echoes echo_name when it equals name but for case.
 * Returns 0 with *outlen, SL_ERR_INVALID (another rcode, a bad q) or
 * SL_ERR_TOO_BIG (cap too small).
 */
int	dns_build_error(const struct dns_query *q, int rcode, uint8_t *out,
	    size_t cap, size_t *outlen);

#define DNS_EDE_BLOCKED		15	/* RFC 8914: blocked by the operator's policy */
#define DNS_EDE_PROHIBITED	18	/* RFC 8914: the client may not ask */
#define DNS_EDE_TEXT_MAX	200	/* bytes of EXTRA-TEXT written */
/*
 * The same with an Extended DNS Error (RFC 8914) in the OPT record:
 * info (an INFO-CODE) and text as EXTRA-TEXT (cut at DNS_EDE_TEXT_MAX
 * bytes, bytes outside printable ASCII written as '?').  Only when the
 * query had an OPT record: a response may not carry one otherwise, so
 * without it this is dns_build_error.
 */
int	dns_build_error_ede(const struct dns_query *q, int rcode,
	    uint16_t info, const char *text, uint8_t *out, size_t cap,
	    size_t *outlen);

/*
 * Writes the answer to a query that dns_query_parse refused (pure), so the
 * client need not wait out its timeout.  buf must hold at least the
 * DNS_HDR_LEN-byte header with QR clear, else SL_ERR_INVALID (a response,
 * or too short to answer: drop it).  The answer has buf's id, QR and RA
 * set, the opcode, RD and CD copied, AA, TC, AD and Z clear, and rcode
 * NOTIMP when the opcode is not QUERY, else FORMERR.  Its question is
 * buf's own bytes, case kept, when QDCOUNT is 1 and the question is framed
 * (labels of 1..63 bytes, no compression pointer, at most 255 bytes, then
 * type and class); otherwise there is none (QDCOUNT 0).  No other record,
 * no OPT.  So the answer is never longer than buf: *outlen <= len (a
 * reflector gains nothing).  Returns 0 with *outlen, SL_ERR_INVALID or
 * SL_ERR_TOO_BIG (cap too small).
 */
int	dns_build_formerr(const uint8_t *buf, size_t len, uint8_t *out,
	    size_t cap, size_t *outlen);

/*
 * Writes a query for q's (lowercased) name, type and class with the given
 * id (for upstream), RD set, with an OPT record (version 0, DO clear, no
 * options) advertising udp_size when udp_size > 512.  Returns 0 with
 * *outlen, SL_ERR_INVALID or SL_ERR_TOO_BIG.
 */
int	dns_build_query(const struct dns_query *q, uint16_t id,
	    uint16_t udp_size, uint8_t *out, size_t cap, size_t *outlen);

/*
 * Reads the id and flags of a message of at least DNS_HDR_LEN bytes, so a
 * listener can match an upstream answer to its query and see TC (retry
 * over TCP) before filtering it.  Returns 0, or SL_ERR_INVALID.
 */
int	dns_peek_header(const uint8_t *buf, size_t len, uint16_t *id,
	    uint16_t *flags);

/* An address kept in a filtered answer, with the name that owns it. */
struct dns_kept {
	char		name[NAME_BUFSZ];
	struct sl_addr	addr;		/* canonical */
	uint32_t	ttl;
};
#define DNS_KEPT_MAX	32

/* Policy hooks for the answer filter; return 1 to keep. */
struct dns_filter_ops {
	int	(*name_ok)(const char *name, void *arg);	/* CNAME, SVCB targets */
	int	(*addr_ok)(const struct sl_addr *a, void *arg);	/* A/AAAA data */
	void	*arg;
};

struct dns_filter_result {
	size_t		nkept;
	struct dns_kept	kept[DNS_KEPT_MAX];
	unsigned	removed_addrs;	/* A/AAAA and SVCB hints dropped by addr_ok */
	unsigned	cut_cnames;	/* chains cut: target refused, unreadable,
					   a loop or past 16 names */
	unsigned	stripped_ech;	/* HTTPS/SVCB records that lost ech */
	unsigned	dropped;	/* other answer records (and hints) not
					   relayed: see dns_filter_answer */
	int		truncated;	/* TC set: did not fit, or upstream TC */
	int		upstream_tc;	/* upstream had TC set: retry over TCP */
};

/*
 * Checks and rewrites an upstream response to q for the sandbox (pure).
 *
 * Checked, else SL_ERR_INVALID (drop it): the id is upstream_id, QR=1,
 * opcode QUERY, QDCOUNT 1 with q's question (name compared
 * case-insensitively, type, class); every record of every section is
 * framed within the message (owner names, RDLENGTH), with nothing after
 * the last; compression pointers only point at or after the header and
 * strictly before the label run that holds them (so each jump goes
 * further back and none can loop), at most 32 jumps, 255 bytes once
 * expanded; at most one OPT record, in the additional section, root-owned,
 * version 0, options framed.
 *
 * Written: a new message (never a copy of upstream bytes past what was
 * validated), without compression: the sandbox's id, QR, RD and CD as
 * asked, RA, AA and AD clear; the rcode when NOERROR, NXDOMAIN or SERVFAIL,
 * else SERVFAIL (an extended rcode from upstream's OPT counts); the
 * question as in dns_build_error; then the answer section, in upstream's
 * order, judged record by record against a CNAME chain that starts at
 * q->name:
 *  - records of a class other than IN, or whose owner is not (yet) a
 *    chain name, are dropped: a record that comes before the CNAME that
 *    brings its owner into the chain goes (resolvers write chains in
 *    order);
 *  - a CNAME owned by the last chain name extends the chain when name_ok
 *    accepts its target; otherwise (refused, unreadable, the root, a name
 *    already in the chain, or 16 names reached) it is dropped, the chain
 *    is closed and cut_cnames counts it, so records of later names go;
 *    other CNAMEs of chain names are dropped;
 *  - A/AAAA of any chain name are kept when addr_ok accepts their
 *    canonical address;
 *  - HTTPS/SVCB lose their ech SvcParam (key 5) and the ipv4hint/ipv6hint
 *    entries addr_ok refuses (a hint left empty goes); a record whose
 *    TargetName is compressed or not "." and refused by name_ok, whose
 *    SvcParams are out of order or overrun, or whose mandatory key lists a
 *    removed key, is dropped;
 *  - MX, SRV, NS, PTR: their names are decompressed and written whole;
 *    TXT: character-strings checked and copied;
 *  - every other type (SOA, DNAME, RRSIG, ...) is dropped;
 *  - malformed RDATA (an A of 5 bytes, a bad name, a TXT string past the
 *    end) drops its record, not the message.  All drops but policy ones
 *    count in res->dropped.
 * Owners and names in RDATA are written lowercased; a TTL with the top bit
 * set is written as 0 (RFC 2181 8).  Authority and additional sections
 * are dropped; an OPT record (udp size DNS_EDNS_UDP, DO echoed) is written
 * when q had EDNS.  Records that do not fit q->udp_size (udp; else 65535)
 * are cut at a record boundary and TC is set; TC from upstream is kept.
 * NOERROR with no answer left stays NOERROR/NODATA.
 *
 * res->kept lists every address relayed (A/AAAA data and hints), canonical,
 * with the owner name of its record (a CNAME target for a chain: a caller
 * that binds addresses to names should bind them to q->name as well) and
 * its TTL; at most DNS_KEPT_MAX, and addresses past that are not relayed
 * (counted in dropped).  Returns 0 with *outlen and *res, SL_ERR_INVALID
 * or SL_ERR_TOO_BIG (cap too small for what fits the limit).  ops and
 * both hooks are required.
 */
int	dns_filter_answer(const uint8_t *resp, size_t len,
	    const struct dns_query *q, uint16_t upstream_id, int udp,
	    const struct dns_filter_ops *ops, uint8_t *out, size_t cap,
	    size_t *outlen, struct dns_filter_result *res);

/*
 * A token bucket: rate tokens per second, burst tokens at most, refilled
 * by the milliseconds elapsed (fractions kept); it starts full, so the
 * first take succeeds when burst >= 1.  A clock that goes back refills
 * nothing.  Not thread-safe: one bucket per sandbox and worker.
 */
struct ratelimit {
	double		tokens;
	double		rate, burst;
	uint64_t	last_ms;	/* monotonic milliseconds of the last take */
};
void	ratelimit_init(struct ratelimit *rl, double rate, double burst,
	    uint64_t now_ms);
/* Takes one token at now_ms; returns 1 if there was one, 0 if limited. */
int	ratelimit_take(struct ratelimit *rl, uint64_t now_ms);

#endif
