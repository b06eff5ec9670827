/* httphead.h: HTTP/1.x requests from a client stream, parsed strictly. */
#ifndef SLUICE_HTTPHEAD_H
#define SLUICE_HTTPHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

struct http_header {
	const char	*name;		/* as received; NUL-terminated */
	size_t		 name_len;
	const char	*value;		/* leading/trailing spaces trimmed */
	size_t		 value_len;
};

#define HTTP_HOST_BUFSZ	(NAME_BUFSZ + 2)	/* a name or an IP literal */

/* One request head.  Owned by the stream that produced it. */
struct http_head {
	char		 method[24];
	const char	*target;	/* request-target as received */
	size_t		 target_len;
	unsigned	 http_major, http_minor;
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
};

/*
 * A request stream: the client-to-server direction of one connection, fed
 * as bytes arrive.  llhttp in strict mode underneath: ambiguous framing
 * (Content-Length with Transfer-Encoding, repeated or invalid
 * Content-Length, Transfer-Encoding other than a final chunked, obs-fold,
 * bare CR or LF, whitespace before a colon, bad chunk sizes), a head over
 * header_limit bytes, more than one Host header, or a Host that is not a
 * valid name or IP literal is INVALID.
 */
struct http_reqs;

struct http_reqs *http_reqs_new(size_t header_limit);
void	http_reqs_free(struct http_reqs *s);	/* accepts NULL */

enum http_ev {
	HTTP_EV_NEED_MORE,	/* all of buf consumed, nothing to report */
	HTTP_EV_HEAD,		/* a request head ended at buf[*used] */
	HTTP_EV_END,		/* a whole request (head and body) ended at buf[*used] */
	HTTP_EV_TUNNEL,		/* after CONNECT or an upgrade: the rest is not HTTP */
	HTTP_EV_INVALID,	/* refused; *reason says why; the stream is dead */
};

/*
 * Feeds buf[0..len) and stops at the first event.  *used is the number of
 * bytes consumed (feed the rest again after handling the event).  On
 * HTTP_EV_HEAD, *head describes the request and stays valid until the next
 * feed.  On HTTP_EV_INVALID, *reason is a static phrase such as
 * "content-length with transfer-encoding".  For a request that has no body
 * HTTP_EV_END follows HTTP_EV_HEAD with *used == 0.
 */
enum http_ev http_reqs_feed(struct http_reqs *s, const uint8_t *buf,
	    size_t len, size_t *used, const struct http_head **head,
	    const char **reason);

/* The first header called name (case-insensitive), or NULL. */
const struct http_header *http_head_get(const struct http_head *h,
	    const char *name);

/*
 * Writes the head for an origin server: request line in origin-form (for
 * absolute-form requests), every header as received but the Proxy-*
 * headers.  Returns the length written, or SL_ERR_TOO_BIG if out_len is
 * too small.
 */
long	http_head_serialize_origin(const struct http_head *h, char *out,
	    size_t out_len);

#endif
