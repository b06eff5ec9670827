/* http.h: one HTTP/1.1 request to the daemon over its Unix control socket. */
#ifndef SLUICECTL_HTTP_H
#define SLUICECTL_HTTP_H

#include <stddef.h>

#define HTTP_MAX_BODY	(64u << 20)	/* an answer's body */
#define HTTP_MAX_HEAD	(64u << 10)	/* its status line and headers */
#define HTTP_TIMEOUT_MS	30000		/* connect, send and answer, in all */

struct http_req {
	const char	*method;	/* "GET", "PUT", ... */
	const char	*target;	/* origin form, percent-encoded */
	const char	*content_type;	/* NULL: no Content-Type */
	const char	*body;		/* NULL: no body */
	size_t		 body_len;
};

struct http_resp {
	int		 status;	/* 200 ... 599 */
	char		*reason;	/* reason phrase, may be "" */
	char		*content_type;	/* NULL when the answer has none */
	char		*body;		/* NUL-terminated (not counted) */
	size_t		 body_len;
};

/*
 * Connects to the Unix socket at sock, sends req (Host: sluice, Connection:
 * close, Content-Length when there is a body or the method is POST or PUT),
 * and reads the answer (Content-Length, chunked or until the connection
 * closes) within HTTP_TIMEOUT_MS.  Returns 0 and *out, whatever the status,
 * or a negative SL_ERR_* with one line in err naming what failed (the
 * socket path and strerror when the connection fails).  The socket is
 * closed on every path.
 */
int	http_request(const char *sock, const struct http_req *req,
	    struct http_resp **out, char *err, size_t errlen);
void	http_resp_free(struct http_resp *r);		/* accepts NULL */

#endif
