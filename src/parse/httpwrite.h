/*
 * httpwrite.h: every request head sluice writes: for an origin (plain HTTP
 * passed on), for the upstream of an intercepted exchange, and the pieces
 * both are made of.
 */
#ifndef SLUICE_HTTPWRITE_H
#define SLUICE_HTTPWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "parse/httphead.h"

/*
 * Writes the head for an origin server: request line in origin-form (for
 * absolute-form requests; other targets as received), every header as
 * received (name, ": ", trimmed value) but the Proxy-* headers, and the
 * final empty line; no NUL is appended.  Returns the length written, or
 * SL_ERR_TOO_BIG if out_len is too small (out is then left untouched).
 */
long	http_head_serialize_origin(const struct http_head *h, char *out,
	    size_t out_len);

/* A header a rule sets: a token name and a value without CR, LF or NUL. */
struct http_add {
	const char	*name;
	const char	*value;
};

/*
 * Writes the head of an intercepted request for the upstream:
 *   "<method> <target> HTTP/1.1", then "Host: <host>" (":<port>" appended
 *   when port != 443; an IPv6 literal in brackets), then every header of h
 *   as received (name, ": ", trimmed value) except
 *     - Host (rewritten above),
 *     - the hop-by-hop ones (Connection, Keep-Alive, Proxy-Connection, TE,
 *       Trailer, Upgrade) and any header a Connection header names, but
 *       never Content-Length or Transfer-Encoding, since the body is
 *       relayed raw in the framing it came with,
 *     - every Proxy-* header,
 *     - any header whose name, ignoring case, is in drop[] or add[]
 *       (again never Content-Length or Transfer-Encoding);
 *   then one Connection header when needed: "upgrade" when keep_upgrade
 *   is set and h is an HTTP/1.1 upgrade (the Upgrade header is then kept
 *   too) -- never "close", even when h is HTTP/1.0 (sent as 1.1) or asked
 *   to close: the upstream connection outlives the client's, in the pool;
 *   then the add[] headers in order; then the empty line.
 *
 * target is the request-target to send (the caller's normalised path, "?"
 * and the raw query): visible ASCII, no spaces.  host is the SNI host.
 * drop[] and add[] names are matched ignoring case.  Returns the length
 * written (no NUL appended); SL_ERR_TOO_BIG when out_len is too small;
 * SL_ERR_INVALID when target or host is not visible ASCII, or an add[]
 * name is not a token or is Host, Content-Length, Transfer-Encoding or
 * hop-by-hop, or an add[] value holds a control byte.  out is not written
 * to unless it succeeds.
 */
long	http_head_serialize_upstream(const struct http_head *h,
	    const char *target, const char *host, uint16_t port,
	    int keep_upgrade, const char *const *drop, size_t ndrop,
	    const struct http_add *add, size_t nadd, char *out,
	    size_t out_len);

/*
 * Shared by both directions.  http_hop_by_hop: name[0..len) is one of
 * Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade or
 * Proxy-* (ignoring case).  http_conn_names: a Connection header among
 * hdrs[0..n) lists name[0..len) as an option (ignoring case).
 * http_conn_first: the index of the first Connection header in hdrs[0..n)
 * that names more than Keep-Alive (itself hop-by-hop), or n: a caller
 * asking of every header, hop-by-hop ones left out already, starts
 * http_conn_names there.
 */
int	http_hop_by_hop(const char *name, size_t len);
/*
 * A field HTTP/2 forbids in any field section (RFC 9113 8.2.2):
 * Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade,
 * TE (as a response field; a request's "TE: trailers" is the caller's)
 * and Trailer.  Other Proxy-* fields are end-to-end there (Proxy-Status).
 */
int	http2_forbidden(const char *name, size_t len);
/*
 * A field that never passes in a trailer section, either way: what
 * http2_forbidden names, and what RFC 9110 6.5.1 keeps out of trailers
 * (framing, routing, authentication, content handling) or a recipient
 * could merge into the head unjudged (Authorization, Cookie, Proxy-*).
 */
int	http_trailer_dropped(const char *name, size_t len);
/* A Content-Length value: 1 to 19 digits.  0 and *n, or -1. */
int	http_parse_length(const char *v, size_t len, uint64_t *n);
/*
 * A field name p[0..len) as HTTP/2 carries it: a token (RFC 9110 5.6.2),
 * in lower case, into out[0..len).  0, or -1 when it is not a token.
 */
int	http_name_lower(const char *p, size_t len, char *out);
/*
 * Splits a trailer section p[0..len) (field lines a parser checked, then
 * the empty line) into fields: names lower-cased in place, values
 * trimmed (neither NUL-terminated); a name that is not a token, or that
 * http_trailer_dropped names, is left out.  Returns how many went
 * into f[0..max), or -1 when a line is not a field.
 */
long	http_trailer_fields(char *p, size_t len, struct http_header *f,
	    size_t max);
/*
 * Whether a Content-Type value v[0..len) is gRPC's: application/grpc,
 * alone or with a "+proto" or ";" after it, in any case.
 */
int	http_grpc_type(const char *v, size_t len);
int	http_conn_names(const struct http_header *hdrs, size_t n,
	    const char *name, size_t len);
size_t	http_conn_first(const struct http_header *hdrs, size_t n);

/*
 * A chunk's size line for n bytes of data, "%zx\r\n", into out (at
 * least HTTP_CHUNK_HEAD_MAX bytes); its length.  No printf: it is per
 * chunk, on the data path.
 */
#define HTTP_CHUNK_HEAD_MAX	(2 * sizeof(size_t) + 2)
size_t	http_chunk_head(size_t n, char *out);

#endif
