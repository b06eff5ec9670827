/* sniff.c: what a client's first bytes are, and its TLS ClientHello. */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/err.h"
#include "util/names.h"
#include "parse/sniff.h"

#define TLS_CT_HANDSHAKE	22
#define TLS_HS_CLIENT_HELLO	1
#define TLS_RECORD_HDR		5
#define TLS_RECORD_MAX		16384	/* RFC 8446 5.1 */

#define EXT_SERVER_NAME		0
#define EXT_ALPN		16
#define EXT_SUPPORTED_VERSIONS	43
#define EXT_ECH			0xfe0d

static const char *const http_methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE",
	"PATCH",
};

/*
 * Judges the first bytes of a record header, as many as have arrived:
 * a handshake record of SSL 3.0 to TLS 1.3 (TLS 1.3 still writes 0x0301
 * or 0x0303 here; 0x0304 is tolerated).
 */
static int
tls_header_prefix(const uint8_t *b, size_t avail)
{
	if (avail >= 1 && b[0] != TLS_CT_HANDSHAKE)
		return PARSE_INVALID;
	if (avail >= 2 && b[1] != 0x03)
		return PARSE_INVALID;
	if (avail >= 3 && b[2] > 0x04)
		return PARSE_INVALID;
	return avail >= 3 ? PARSE_COMPLETE : PARSE_NEED_MORE;
}

/* Compares against "METHOD " for every method; a prefix keeps us waiting. */
static int
sniff_http(const uint8_t *buf, size_t len)
{
	int r = PARSE_INVALID;
	size_t i, mlen;

	for (i = 0; i < sizeof(http_methods) / sizeof(http_methods[0]); i++) {
		mlen = strlen(http_methods[i]);
		if (len > mlen) {
			if (memcmp(buf, http_methods[i], mlen) == 0 &&
			    buf[mlen] == ' ')
				return PARSE_COMPLETE;
		} else if (memcmp(buf, http_methods[i], len) == 0)
			r = PARSE_NEED_MORE;
	}
	return r;
}

int
sniff_proto(const uint8_t *buf, size_t len, enum sniff_proto *out)
{
	int tls, r;

	if (len == 0)
		return PARSE_NEED_MORE;
	tls = buf[0] == TLS_CT_HANDSHAKE;
	r = tls ? tls_header_prefix(buf, len) : sniff_http(buf, len);
	if (r == PARSE_NEED_MORE)
		return r;
	if (r != PARSE_COMPLETE)
		*out = SNIFF_OPAQUE;
	else
		*out = tls ? SNIFF_TLS : SNIFF_HTTP;
	return PARSE_COMPLETE;
}

/*
 * A reader over the handshake bytes carried by a run of TLS records, so
 * that the hello is parsed where it lies, without a reassembly buffer.
 * Positions inside the handshake message (off, and the end of every
 * vector) count handshake bytes, not stream bytes.
 */
struct hs_reader {
	const uint8_t	*buf;
	size_t		 len;	/* stream bytes available */
	size_t		 limit;	/* stream bytes allowed */
	size_t		 pos;	/* stream offset of the next byte */
	size_t		 rec_left; /* bytes left in the current record */
	size_t		 off;	/* handshake bytes consumed */
};

/*
 * Steps over the next record header.  Called only when more handshake
 * bytes are needed, so whatever follows the hello is never judged.  The
 * limit is tested only on a whole, valid header, so that a longer stream
 * never turns TOO_BIG into INVALID.
 */
static int
record_open(struct hs_reader *rd)
{
	size_t avail = rd->len - rd->pos, rlen, room;
	const uint8_t *b;
	int r;

	if (avail == 0)
		return PARSE_NEED_MORE;
	b = rd->buf + rd->pos;
	if ((r = tls_header_prefix(b, avail)) != PARSE_COMPLETE)
		return r;
	if (avail < TLS_RECORD_HDR)
		return PARSE_NEED_MORE;
	rlen = (size_t)b[3] << 8 | b[4];
	/* An empty handshake record is forbidden (RFC 8446 5.1). */
	if (rlen == 0 || rlen > TLS_RECORD_MAX)
		return PARSE_INVALID;
	/* pos <= limit holds: every earlier record fitted. */
	room = rd->limit - rd->pos;
	if (room < TLS_RECORD_HDR || room - TLS_RECORD_HDR < rlen)
		return PARSE_TOO_BIG;
	rd->pos += TLS_RECORD_HDR;
	rd->rec_left = rlen;
	return PARSE_COMPLETE;
}

/* Takes n handshake bytes (copied to out unless NULL) across records. */
static int
hs_take(struct hs_reader *rd, uint8_t *out, size_t n)
{
	size_t chunk;
	int r;

	while (n > 0) {
		if (rd->rec_left == 0 &&
		    (r = record_open(rd)) != PARSE_COMPLETE)
			return r;
		chunk = n < rd->rec_left ? n : rd->rec_left;
		/* The stream ends inside this record: nothing follows. */
		if (rd->len - rd->pos < chunk)
			return PARSE_NEED_MORE;
		if (out != NULL) {
			memcpy(out, rd->buf + rd->pos, chunk);
			out += chunk;
		}
		rd->pos += chunk;
		rd->rec_left -= chunk;
		rd->off += chunk;
		n -= chunk;
	}
	return PARSE_COMPLETE;
}

/* Takes n bytes of a vector ending at handshake offset end. */
static int
vec_take(struct hs_reader *rd, size_t end, uint8_t *out, size_t n)
{
	if (end < rd->off || end - rd->off < n)
		return PARSE_INVALID;
	return hs_take(rd, out, n);
}

/* Reads a big-endian integer of nbytes (1 to 3). */
static int
vec_uint(struct hs_reader *rd, size_t end, size_t nbytes, size_t *v)
{
	uint8_t b[3];
	size_t i;
	int r;

	if ((r = vec_take(rd, end, b, nbytes)) != PARSE_COMPLETE)
		return r;
	*v = 0;
	for (i = 0; i < nbytes; i++)
		*v = *v << 8 | b[i];
	return PARSE_COMPLETE;
}

/*
 * Opens a vector with an nbytes length prefix inside the one ending at
 * end; its own end goes to *sub.  Lengths below min are refused.
 */
static int
vec_open(struct hs_reader *rd, size_t end, size_t nbytes, size_t min,
    size_t *sub)
{
	size_t vlen;
	int r;

	if ((r = vec_uint(rd, end, nbytes, &vlen)) != PARSE_COMPLETE)
		return r;
	if (vlen < min || end - rd->off < vlen)
		return PARSE_INVALID;
	*sub = rd->off + vlen;
	return PARSE_COMPLETE;
}

/* Steps over the rest of a vector. */
static int
vec_skip(struct hs_reader *rd, size_t end)
{
	return vec_take(rd, end, NULL, end - rd->off);
}

/* server_name (RFC 6066 3): exactly one host_name, a valid DNS name. */
static int
parse_sni(struct hs_reader *rd, size_t end, struct tls_hello *h)
{
	char raw[NAME_MAXLEN + 1];	/* room for one trailing dot */
	size_t list_end, name_end, type, nlen;
	int r;

	if ((r = vec_open(rd, end, 2, 1, &list_end)) != PARSE_COMPLETE ||
	    (r = vec_uint(rd, list_end, 1, &type)) != PARSE_COMPLETE)
		return r;
	if (type != 0)
		return PARSE_INVALID;
	if ((r = vec_open(rd, list_end, 2, 1, &name_end)) != PARSE_COMPLETE)
		return r;
	/*
	 * A second entry is refused, whatever its type: a client that names
	 * two hosts leaves us to guess which one it talks to.
	 */
	if (name_end != list_end)
		return PARSE_INVALID;
	nlen = name_end - rd->off;
	if (nlen > sizeof(raw))
		return PARSE_INVALID;
	if ((r = vec_take(rd, name_end, (uint8_t *)raw, nlen)) !=
	    PARSE_COMPLETE)
		return r;
	/*
	 * name_normalize also refuses IP literals, which RFC 6066 forbids
	 * here, in the inet_aton forms ("127.1", "0x7f.1") too.
	 */
	if (name_normalize(raw, nlen, h->sni) != SL_OK)
		return PARSE_INVALID;
	h->has_sni = 1;
	return PARSE_COMPLETE;
}

/* Keeps a protocol name for logs and decisions if it is plain ASCII. */
static void
alpn_record(struct tls_hello *h, const uint8_t *name, size_t len)
{
	size_t i;

	if (h->nalpn >= TLS_ALPN_MAX)
		return;
	for (i = 0; i < len; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7f)
			return;
	if (len > sizeof(h->alpn[0]) - 1)
		len = sizeof(h->alpn[0]) - 1;
	memcpy(h->alpn[h->nalpn], name, len);
	h->alpn[h->nalpn][len] = '\0';
	h->nalpn++;
}

/* application_layer_protocol_negotiation (RFC 7301 3.1). */
static int
parse_alpn(struct hs_reader *rd, size_t end, struct tls_hello *h)
{
	uint8_t name[255];
	size_t list_end, name_end, nlen;
	int r;

	if ((r = vec_open(rd, end, 2, 2, &list_end)) != PARSE_COMPLETE)
		return r;
	while (rd->off < list_end) {
		if ((r = vec_open(rd, list_end, 1, 1, &name_end)) !=
		    PARSE_COMPLETE)
			return r;
		nlen = name_end - rd->off;
		if ((r = vec_take(rd, name_end, name, nlen)) != PARSE_COMPLETE)
			return r;
		alpn_record(h, name, nlen);
	}
	return PARSE_COMPLETE;
}

/* supported_versions (RFC 8446 4.2.1), the ClientHello form. */
static int
parse_versions(struct hs_reader *rd, size_t end, struct tls_hello *h)
{
	size_t list_end, v;
	int r;

	if ((r = vec_open(rd, end, 1, 2, &list_end)) != PARSE_COMPLETE)
		return r;
	if ((list_end - rd->off) % 2 != 0)
		return PARSE_INVALID;
	while (rd->off < list_end) {
		if ((r = vec_uint(rd, list_end, 2, &v)) != PARSE_COMPLETE)
			return r;
		if (v == 0x0304)
			h->offers_tls13 = 1;
	}
	return PARSE_COMPLETE;
}

/*
 * One extension's body, ending at end; those we do not judge are skipped.
 * Whatever a body parser leaves unread is refused.
 */
static int
parse_extension(struct hs_reader *rd, size_t type, size_t end,
    struct tls_hello *h)
{
	int r;

	if (type == EXT_SERVER_NAME)
		r = parse_sni(rd, end, h);
	else if (type == EXT_ALPN)
		r = parse_alpn(rd, end, h);
	else if (type == EXT_SUPPORTED_VERSIONS)
		r = parse_versions(rd, end, h);
	else {
		if (type == EXT_ECH)
			h->has_ech = 1;
		r = vec_skip(rd, end);
	}
	if (r == PARSE_COMPLETE && rd->off != end)
		return PARSE_INVALID;
	return r;
}

/*
 * The extensions block, which must fill the message exactly.  Duplicates
 * are refused (RFC 8446 4.2): two SNI extensions would give two names.
 */
static int
parse_extensions(struct hs_reader *rd, size_t msg_end, struct tls_hello *h)
{
	uint8_t seen[65536 / 8];
	size_t exts_end, type, ext_end;
	int r;

	/* Before TLS 1.2 a hello may end without an extensions block. */
	if (rd->off == msg_end)
		return PARSE_COMPLETE;
	if ((r = vec_open(rd, msg_end, 2, 0, &exts_end)) != PARSE_COMPLETE)
		return r;
	if (exts_end != msg_end)
		return PARSE_INVALID;
	memset(seen, 0, sizeof(seen));
	while (rd->off < exts_end) {
		if ((r = vec_uint(rd, exts_end, 2, &type)) != PARSE_COMPLETE)
			return r;
		if (seen[type / 8] & (1U << (type % 8)))
			return PARSE_INVALID;
		seen[type / 8] |= 1U << (type % 8);
		r = vec_open(rd, exts_end, 2, 0, &ext_end);
		if (r == PARSE_COMPLETE)
			r = parse_extension(rd, type, ext_end, h);
		if (r != PARSE_COMPLETE)
			return r;
	}
	return PARSE_COMPLETE;
}

/*
 * Refuses at once a handshake length whose records could not fit the
 * limit even if every later record were full size.
 */
static int
hs_size_check(const struct hs_reader *rd, size_t hs_len)
{
	size_t rest, nrec, room;

	if (hs_len <= rd->rec_left)
		return PARSE_COMPLETE;	/* this record already fitted */
	rest = hs_len - rd->rec_left;
	nrec = (rest + TLS_RECORD_MAX - 1) / TLS_RECORD_MAX;
	room = rd->limit - rd->pos - rd->rec_left;
	if (rest + nrec * TLS_RECORD_HDR > room)
		return PARSE_TOO_BIG;
	return PARSE_COMPLETE;
}

/* ClientHello body (RFC 8446 4.1.2; RFC 5246 7.4.1.2 for older ones). */
static int
parse_hello_body(struct hs_reader *rd, size_t msg_end, struct tls_hello *h)
{
	size_t v, sub;
	int r;

	if ((r = vec_uint(rd, msg_end, 2, &v)) != PARSE_COMPLETE)
		return r;
	if (v >> 8 != 0x03)
		return PARSE_INVALID;
	h->legacy_version = (uint16_t)v;
	if ((r = vec_take(rd, msg_end, NULL, 32)) != PARSE_COMPLETE ||
	    (r = vec_open(rd, msg_end, 1, 0, &sub)) != PARSE_COMPLETE)
		return r;
	if (sub - rd->off > 32)
		return PARSE_INVALID;
	if ((r = vec_skip(rd, sub)) != PARSE_COMPLETE ||
	    (r = vec_open(rd, msg_end, 2, 2, &sub)) != PARSE_COMPLETE)
		return r;
	if ((sub - rd->off) % 2 != 0)
		return PARSE_INVALID;
	if ((r = vec_skip(rd, sub)) != PARSE_COMPLETE ||
	    (r = vec_open(rd, msg_end, 1, 1, &sub)) != PARSE_COMPLETE ||
	    (r = vec_skip(rd, sub)) != PARSE_COMPLETE)
		return r;
	return parse_extensions(rd, msg_end, h);
}

/* The handshake header, then the body it announces. */
static int
parse_hello(struct hs_reader *rd, struct tls_hello *h)
{
	size_t type, hs_len;
	int r;

	if ((r = vec_uint(rd, 4, 1, &type)) != PARSE_COMPLETE)
		return r;
	if (type != TLS_HS_CLIENT_HELLO)
		return PARSE_INVALID;
	if ((r = vec_uint(rd, 4, 3, &hs_len)) != PARSE_COMPLETE ||
	    (r = hs_size_check(rd, hs_len)) != PARSE_COMPLETE)
		return r;
	return parse_hello_body(rd, 4 + hs_len, h);
}

int
tls_clienthello_parse(const uint8_t *buf, size_t len, size_t limit,
    struct tls_hello *out)
{
	struct hs_reader rd = { buf, len, limit, 0, 0, 0 };
	struct tls_hello h;
	int r;

	memset(&h, 0, sizeof(h));
	if ((r = parse_hello(&rd, &h)) != PARSE_COMPLETE)
		return r;
	/*
	 * Callers forward hello_len bytes as they are, so the record that
	 * ends the hello must have arrived whole; what it holds after the
	 * hello is not ours to judge.
	 */
	if (rd.len - rd.pos < rd.rec_left)
		return PARSE_NEED_MORE;
	h.hello_len = rd.pos + rd.rec_left;
	*out = h;
	return PARSE_COMPLETE;
}
