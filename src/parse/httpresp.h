/* httpresp.h: HTTP/1.x responses from an upstream, framed and re-headed. */
#ifndef SLUICE_HTTPRESP_H
#define SLUICE_HTTPRESP_H

#include <stddef.h>
#include <stdint.h>

#include "parse/httphead.h"

#define HTTP_RESPS_MAX_PENDING	64	/* requests awaiting a response */

/*
 * A response stream: the upstream-to-sandbox direction of one intercepted
 * connection, fed as bytes arrive.  It says where each response's head and
 * body end and writes the head to send to the sandbox; body bytes are
 * relayed as they came, in their own framing (chunked included).
 *
 * llhttp underneath without any lenient flag, plus our own checks where
 * it is lenient.  INVALID is: a response when no request is pending; a
 * status line other than "HTTP/1.0" or "HTTP/1.1", SP, three digits from
 * 100 to 599, then SP and a reason phrase or nothing; empty lines before
 * it; a head over header_limit bytes (status line and header lines with
 * their CRLFs) or with more than HTTP_MAX_HEADERS headers; obs-fold, bare
 * CR or LF, a NUL, a control byte in a header, whitespace before a colon,
 * a header name that is not a token; repeated or invalid Content-Length,
 * Content-Length with Transfer-Encoding, repeated Transfer-Encoding,
 * Transfer-Encoding other than a list ending in a single chunked, or in
 * HTTP/1.0; Transfer-Encoding or a Content-Length other than 0 in a 1xx or
 * 204; a 101 without Upgrade and "Connection: upgrade"; bad chunk sizes or
 * chunk framing, trailer fields (we never send "TE: trailers"; see
 * http_resps_trailers); bytes
 * after a response that closes the connection.
 *
 * A response has no body when it answers HEAD or is 1xx, 204 or 304
 * (RFC 9112 6.3), whatever its Content-Length or Transfer-Encoding say;
 * else its body is chunked, Content-Length bytes, or everything until the
 * upstream closes (close_delimited).
 *
 * Not thread-safe: one stream belongs to one connection.
 */
struct http_resps;

/* Returns NULL when out of memory (or header_limit is absurdly large). */
struct http_resps *http_resps_new(size_t header_limit);
void	http_resps_free(struct http_resps *s);	/* accepts NULL */
/* Between responses with none expected: s can be reset and reused. */
int	http_resps_between(const struct http_resps *s);
/* Makes s as http_resps_new(header_limit) would (its memory kept). */
void	http_resps_reset(struct http_resps *s, size_t header_limit);

/*
 * Records the method of a request sent upstream, in order, so that its
 * response is framed right.  Returns 0; SL_ERR_TOO_BIG when
 * HTTP_RESPS_MAX_PENDING requests are pending already; SL_ERR_INVALID when
 * method is not a token of at most 23 bytes; SL_ERR_UNSUPPORTED for
 * CONNECT (never sent upstream by an intercepting relay).
 */
int	http_resps_expect(struct http_resps *s, const char *method);

/*
 * The newest request expected is the client's last (it asked to close):
 * its final response's head for the sandbox says "Connection: close",
 * whatever the upstream's said (the upstream's own connection may stay).
 * Returns 0, or SL_ERR_INVALID when none is expected.
 */
int	http_resps_last(struct http_resps *s);

/*
 * From the next response on, a chunked body may end with trailer fields
 * (name ": " value lines, TRAILER_MAX bytes in all, field bytes checked
 * as in a head): they are body bytes, relayed as they came.  For the
 * upstream of an HTTP/2 stream; off again after http_resps_reset.
 */
void	http_resps_trailers(struct http_resps *s, int on);
/* The requests whose final response has not ended (nor tunnelled). */
size_t	http_resps_pending(const struct http_resps *s);
/*
 * The n newest requests expected were never sent after all: their
 * answers are not expected.  Returns 0, or SL_ERR_INVALID when fewer are
 * pending or one of them is being answered.
 */
int	http_resps_forget(struct http_resps *s, size_t n);

enum http_resp_ev {
	HTTP_RESP_NEED_MORE,	/* all of buf consumed, nothing to report */
	HTTP_RESP_HEAD,		/* a response head ended at buf[*used] */
	HTTP_RESP_END,		/* a whole response ended at buf[*used] */
	HTTP_RESP_TUNNEL,	/* after 101: the rest is not HTTP */
	HTTP_RESP_INVALID,	/* refused; *reason says why; the stream is dead */
};

/* One response head, as received and as it is to be sent on. */
struct http_resp_head {
	unsigned	 status;	/* 100 to 599 */
	unsigned	 http_major, http_minor;	/* as received: 1.0 or 1.1 */
	int		 informational;	/* 1xx but 101: another head follows */
	int		 keep_alive;	/* the upstream may send another response */
	int		 close_delimited;	/* the body ends when upstream closes */
	/*
	 * Transfer-Encoding names a coding besides the final chunked ("gzip,
	 * chunked"): framed and relayed as received, but whoever must read
	 * the body (redaction) cannot.
	 */
	int		 transfer_coded;
	const struct http_header *headers;	/* as received, all of them */
	size_t		 nheaders;
	/*
	 * The head for the sandbox: "HTTP/1.1 <status> <reason>" (the reason
	 * phrase trimmed, HT as SP, other bytes that are not visible ASCII as
	 * '?'), every header as received (name, ": ", trimmed value) but the
	 * hop-by-hop ones (Connection, Keep-Alive, TE, Trailer, Upgrade,
	 * Proxy-*, and any a Connection header names, but never
	 * Content-Length or Transfer-Encoding); for 101 the Upgrade header
	 * and "Connection: upgrade"; "Connection: close" on a final response
	 * that is not keep_alive, or that answers a request marked with
	 * http_resps_last (the sandbox connection must then close after it);
	 * the empty line.  Not NUL-terminated.
	 */
	const char	*out;
	size_t		 out_len;
};

/*
 * Feeds buf[0..len) and stops at the first event.  *used is the number of
 * bytes consumed (feed the rest again after handling the event); it is 0
 * on HTTP_RESP_INVALID and HTTP_RESP_TUNNEL.  buf may be NULL when len is
 * 0.
 *
 * The events of one response come in this order:
 *   HEAD (*used = through the CRLFCRLF of the head; send (*head)->out),
 *   NEED_MORE while body bytes are consumed (buf[0..*used) is body, to be
 *   sent as is),
 *   END (*used = through the last body byte, to be sent as is; 0 for a
 *   response without a body, so "HEAD, END with *used == 0" follows one),
 * then the next response's HEAD.  An informational response (1xx but 101)
 * is "HEAD, END" too, and the final response to the same request follows.
 * A 101 is "HEAD, TUNNEL": TUNNEL with *used == 0, nothing more is
 * consumed, and every later feed returns TUNNEL again; the caller makes
 * sure it asked for that upgrade (and calls http_reqs_upgrade_refused()
 * when the final response to an upgrade request is not 101).  Head bytes
 * consumed with NEED_MORE before a HEAD are not for the sandbox.  Once
 * INVALID, every feed returns INVALID with the same reason.
 *
 * *head (may be NULL) is set on HEAD, END and TUNNEL to the current
 * response, NULL otherwise; it (out included) stays valid until a feed
 * that consumes the first byte of the next response, or
 * http_resps_free().  *reason (may be NULL) is set on INVALID to a static
 * phrase such as "content-length with transfer-encoding", NULL otherwise.
 */
enum http_resp_ev http_resps_feed(struct http_resps *s, const uint8_t *buf,
	    size_t len, size_t *used, const struct http_resp_head **head,
	    const char **reason);

/*
 * The upstream closed its side.  Returns END for a response that ends
 * there (a close-delimited body, or a response whose END was not yet
 * reported); NEED_MORE between responses with none pending; TUNNEL in a
 * tunnel; INVALID otherwise ("upstream closed mid-response", or "upstream
 * closed before responding" when requests are pending).  Call it again
 * after END: it reports what follows.  *head and *reason as for
 * http_resps_feed().  Every later feed with bytes is INVALID.
 */
enum http_resp_ev http_resps_finish(struct http_resps *s,
	    const struct http_resp_head **head, const char **reason);

#endif
