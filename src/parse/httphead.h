/* httphead.h: HTTP/1.x requests from a client stream, parsed strictly. */
#ifndef SLUICE_HTTPHEAD_H
#define SLUICE_HTTPHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "util/names.h"

#define HTTP_MAX_HEADERS	100	/* header lines in one head */
#define HTTP_MAX_TARGET		8192	/* bytes of request-target */

struct http_header {
	const char	*name;		/* as received; NUL-terminated */
	size_t		 name_len;
	const char	*value;		/* leading/trailing spaces trimmed; NUL-terminated */
	size_t		 value_len;
};

#define HTTP_HOST_BUFSZ	(NAME_BUFSZ + 2)	/* a name or an IP literal */

/*
 * One request head.  Owned by the stream that produced it.  Every string
 * is NUL-terminated.  IP literals (host, authority) are written in their
 * canonical text form (inet_ntop) without brackets, so "[2001:DB8::1]"
 * becomes "2001:db8::1".
 */
struct http_head {
	char		 method[24];
	const char	*target;	/* request-target as received */
	size_t		 target_len;
	unsigned	 http_major, http_minor;	/* 1.0 or 1.1 */
	struct http_header *headers;
	size_t		 nheaders;
	size_t		 head_len;	/* bytes from request line to CRLFCRLF */

	int		 is_connect;	/* CONNECT authority-form */
	int		 absolute_form;	/* http://host[:port]/... */
	int		 has_authority;	/* CONNECT or absolute-form */
	char		 authority[HTTP_HOST_BUFSZ];	/* normalised name or IP literal */
	uint16_t	 authority_port;	/* 80 when absent in absolute-form */
	int		 authority_is_ip;
	const char	*origin_target;	/* absolute-form: its path?query ("/" if none) */
	int		 has_host;	/* exactly one Host header */
	char		 host[HTTP_HOST_BUFSZ];	/* normalised, port split off */
	uint16_t	 host_port;	/* 0 when not written */
	int		 host_is_ip;
	int		 upgrade;	/* Upgrade requested (Connection: upgrade) */
	int		 keep_alive;	/* the connection may carry another request */

	/* Additions. */
	int		 chunked;	/* Transfer-Encoding ends in chunked */
	uint64_t	 content_length;	/* when !chunked; 0 if absent */
};

/*
 * A request stream: the client-to-server direction of one connection, fed
 * as bytes arrive.  llhttp underneath without any lenient flag, plus our
 * own checks wherever llhttp (in the mode it is compiled in) is lenient:
 * ambiguous framing (Content-Length with Transfer-Encoding, repeated or
 * invalid Content-Length, repeated Transfer-Encoding, Transfer-Encoding
 * other than a list ending in a single chunked, Transfer-Encoding in
 * HTTP/1.0), obs-fold, bare CR or LF, a NUL or other control byte,
 * whitespace before a colon, a header name that is not a token, more than
 * HTTP_MAX_HEADERS headers, a request-target over HTTP_MAX_TARGET bytes or
 * with a fragment, an HTTP version other than 1.0 and 1.1, bad chunk sizes
 * or chunk framing, trailer fields (see http_reqs_trailers), a body on
 * CONNECT, a head over header_limit bytes (leading empty lines, request
 * line and header lines with their CRLFs), more than one Host header, a
 * Host or target authority that is not a valid name or IP literal
 * (userinfo and https absolute-form included) is INVALID.  Whether a request may go anywhere (a missing Host
 * included) is for the policy to decide, not for this parser.
 *
 * Not thread-safe: one stream belongs to one connection.
 */
struct http_reqs;

/* Returns NULL when out of memory (or header_limit is absurdly large). */
struct http_reqs *http_reqs_new(size_t header_limit);
void	http_reqs_free(struct http_reqs *s);	/* accepts NULL */
/*
 * Whether s is between requests, with nothing of the next one read: it
 * can then be reset and reused, for this connection or another.
 */
int	http_reqs_between(const struct http_reqs *s);
/* Makes s as http_reqs_new(header_limit) would (its memory kept). */
void	http_reqs_reset(struct http_reqs *s, size_t header_limit);
/*
 * From the next request on, a chunked body may end with trailer fields
 * (bounded, checked as header lines are): an HTTP/2 stream's, written
 * by the session; off again after http_reqs_reset.
 */
void	http_reqs_trailers(struct http_reqs *s, int on);

enum http_ev {
	HTTP_EV_NEED_MORE,	/* all of buf consumed, nothing to report */
	HTTP_EV_HEAD,		/* a request head ended at buf[*used] */
	HTTP_EV_END,		/* a whole request (head and body) ended at buf[*used] */
	HTTP_EV_TUNNEL,		/* after CONNECT or an upgrade: the rest is not HTTP */
	HTTP_EV_INVALID,	/* refused; *reason says why; the stream is dead */
};

/*
 * Feeds buf[0..len) and stops at the first event.  *used is the number of
 * bytes consumed (feed the rest again after handling the event); it is 0
 * on HTTP_EV_INVALID and HTTP_EV_TUNNEL.  buf may be NULL when len is 0.
 *
 * The events of one request come in this order:
 *   HEAD (*used = through the CRLFCRLF of the head; *head describes it),
 *   NEED_MORE while body bytes are consumed (buf[0..*used) is body),
 *   END (*used = through the last body byte; 0 for a request without a
 *   body, so "HEAD, END with *used == 0" follows a bodiless request),
 * then the next request's HEAD.  For CONNECT, and for a request with
 * "Connection: upgrade" plus "Upgrade", END is followed by TUNNEL with
 * *used == 0: nothing more is consumed, the bytes from there on belong to
 * the tunnel, and every later feed returns TUNNEL again (unless
 * http_reqs_upgrade_refused() is called).  After the END of a request
 * that is not keep_alive, a feed with bytes is INVALID ("request after
 * connection close").  Once INVALID, every feed returns INVALID with the
 * same reason.
 *
 * *head (may be NULL) is set on HEAD, END and TUNNEL to the current
 * request, NULL otherwise; it stays valid until a feed that consumes the
 * first byte of the next request, or http_reqs_free().  *reason (may be
 * NULL) is set on INVALID to a static phrase such as
 * "content-length with transfer-encoding", NULL otherwise.
 */
enum http_ev http_reqs_feed(struct http_reqs *s, const uint8_t *buf,
	    size_t len, size_t *used, const struct http_head **head,
	    const char **reason);

/*
 * After the END (or TUNNEL) of an upgrade (not CONNECT) that the origin
 * refused (it answered something other than 101), or that was never
 * sent: the stream goes on parsing requests.
 * Returns 0, or SL_ERR_INVALID when the stream is not at such a point.
 */
int	http_reqs_upgrade_refused(struct http_reqs *s);

/* The first header called name (case-insensitive), or NULL. */
const struct http_header *http_head_get(const struct http_head *h,
	    const char *name);

/*
 * What a request header claims on behalf of a gateway in front of the
 * origin, judged by its name name[0..len) ignoring ASCII case:
 *   HTTP_CLAIM_METHOD: X-HTTP-Method-Override, X-HTTP-Method,
 *     X-Method-Override (the method the origin should act as);
 *   HTTP_CLAIM_ROUTE: Forwarded, any X-Forwarded-*, X-Original-URL,
 *     X-Rewrite-URL, X-Real-IP, X-Client-IP, True-Client-IP, any
 *     X-Envoy-* and any Sluice-* (who the client is, where the request
 *     went, what URL it named);
 *   HTTP_CLAIM_NONE: anything else.
 * A sandbox must not make these claims to a broker that trusts sluice
 * to make them.  Prefixes include their dash: "X-Forwarded-" is one,
 * "X-ForwardedFor" and "SluiceX" are not.  Pure; any thread.
 */
enum http_claim {
	HTTP_CLAIM_NONE,
	HTTP_CLAIM_ROUTE,
	HTTP_CLAIM_METHOD,
};
enum http_claim http_header_claim(const char *name, size_t len);

/*
 * Whether h's upgrade asks for WebSocket and nothing else: every element
 * of every Upgrade header is "websocket" (ignoring case, a "/version"
 * suffix refused), and there is at least one.  h2c, TLS/1.x or a list
 * naming anything beside websocket is not.
 */
int	http_upgrade_websocket_only(const struct http_head *h);


#endif
