/* http.c: one HTTP/1.1 request to the daemon over its Unix control socket. */
#include "autoconf.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <llhttp.h>

#include "util/clock.h"
#include "util/err.h"
#include "sluicectl/http.h"

/* What llhttp's callbacks fill while the answer comes in. */
struct reader {
	llhttp_t	 parser;
	struct http_resp *resp;
	size_t		 cap;		/* of resp->body */
	size_t		 head_bytes;	/* status line and headers so far */
	char		 field[32];	/* current header name */
	size_t		 field_len;	/* > sizeof(field): too long, ignored */
	char		 value[256];	/* current header value */
	size_t		 value_len;	/* > sizeof(value): too long */
	int		 done;		/* the final answer is complete */
	int		 err;		/* why a callback refused, SL_ERR_* */
};

/*
 * Waits until fd has one of events or the deadline passes.  Returns 0 with
 * *revents, or SL_ERR_IO with errno (ETIMEDOUT when the time is up).
 */
static int
wait_fd(int fd, short events, int64_t deadline, short *revents)
{
	struct pollfd pfd;
	int64_t left;
	int n;

	for (;;) {
		if ((left = deadline - ((int64_t)mono_ms())) <= 0) {
			errno = ETIMEDOUT;
			return SL_ERR_IO;
		}
		pfd.fd = fd;
		pfd.events = events;
		pfd.revents = 0;
		n = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return SL_ERR_IO;
		if (n == 0)
			continue;	/* the loop's test says it timed out */
		*revents = pfd.revents;
		return 0;
	}
}

/* ---- llhttp's callbacks ------------------------------------------------- */

static int
head_bytes(struct reader *rd, size_t len)
{
	rd->head_bytes += len;
	if (rd->head_bytes > HTTP_MAX_HEAD) {
		rd->err = SL_ERR_TOO_BIG;
		return -1;
	}
	return 0;
}

/* Appends at most cap bytes (then marks the string too long: *len > cap). */
static void
append_bounded(char *buf, size_t cap, size_t *len, const char *at, size_t n)
{
	if (*len > cap)
		return;
	if (n > cap - *len) {
		*len = cap + 1;
		return;
	}
	memcpy(buf + *len, at, n);
	*len += n;
}

static int
on_status(llhttp_t *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	size_t old;
	char *nr;

	if (head_bytes(rd, len) != 0)
		return -1;
	old = rd->resp->reason != NULL ? strlen(rd->resp->reason) : 0;
	if ((nr = realloc(rd->resp->reason, old + len + 1)) == NULL) {
		rd->err = SL_ERR_NOMEM;
		return -1;
	}
	memcpy(nr + old, at, len);
	nr[old + len] = '\0';
	rd->resp->reason = nr;
	return 0;
}

static int
on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct reader *rd = p->data;

	if (head_bytes(rd, len) != 0)
		return -1;
	append_bounded(rd->field, sizeof(rd->field) - 1, &rd->field_len, at,
	    len);
	return 0;
}

static int
on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct reader *rd = p->data;

	if (head_bytes(rd, len) != 0)
		return -1;
	append_bounded(rd->value, sizeof(rd->value) - 1, &rd->value_len, at,
	    len);
	return 0;
}

/* Keeps Content-Type; every other header is of no use to us. */
static int
on_header_value_complete(llhttp_t *p)
{
	struct reader *rd = p->data;
	size_t flen = rd->field_len, vlen = rd->value_len;
	char *ct;

	rd->field_len = rd->value_len = 0;
	if (flen >= sizeof(rd->field) || vlen >= sizeof(rd->value))
		return 0;
	rd->field[flen] = '\0';
	rd->value[vlen] = '\0';
	if (strcasecmp(rd->field, "content-type") != 0)
		return 0;
	if ((ct = strdup(rd->value)) == NULL) {
		rd->err = SL_ERR_NOMEM;
		return -1;
	}
	free(rd->resp->content_type);
	rd->resp->content_type = ct;
	return 0;
}

static int
on_headers_complete(llhttp_t *p)
{
	struct reader *rd = p->data;

	rd->resp->status = p->status_code;
	return 0;
}

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct reader *rd = p->data;
	struct http_resp *r = rd->resp;
	size_t ncap;
	char *nb;

	if (len > HTTP_MAX_BODY - r->body_len) {
		rd->err = SL_ERR_TOO_BIG;
		return -1;
	}
	if (r->body_len + len + 1 > rd->cap) {
		ncap = rd->cap ? rd->cap : 16384;
		while (ncap < r->body_len + len + 1)
			ncap *= 2;
		if ((nb = realloc(r->body, ncap)) == NULL) {
			rd->err = SL_ERR_NOMEM;
			return -1;
		}
		r->body = nb;
		rd->cap = ncap;
	}
	memcpy(r->body + r->body_len, at, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return 0;
}

/*
 * An interim (1xx) answer is forgotten and the next one read; the final
 * answer pauses the parser, so nothing after it is looked at.
 */
static int
on_message_complete(llhttp_t *p)
{
	struct reader *rd = p->data;
	struct http_resp *r = rd->resp;

	if (p->status_code >= 100 && p->status_code < 200) {
		free(r->content_type);
		r->content_type = NULL;
		free(r->reason);
		r->reason = NULL;
		r->body_len = 0;
		rd->head_bytes = 0;
		return 0;
	}
	rd->done = 1;
	return HPE_PAUSED;
}

static const llhttp_settings_t resp_settings = {
	.on_status = on_status,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the request -------------------------------------------------------- */

static int
connect_unix(const char *sock, int64_t deadline, int *out, char *err,
    size_t errlen)
{
	struct sockaddr_un sun;
	int fd = -1, r = SL_ERR_INTERNAL;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(sock) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "cannot connect to %s: %s", sock,
		    strerror(ENAMETOOLONG));
		return SL_ERR_INVALID;
	}
	memcpy(sun.sun_path, sock, strlen(sock));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		r = SL_ERR_IO;
		goto out;
	}
	/* A full backlog answers EAGAIN at once: try again until the end. */
	while (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && ((int64_t)mono_ms()) < deadline) {
			poll(NULL, 0, 20);
			continue;
		}
		snprintf(err, errlen, "cannot connect to %s: %s", sock,
		    errno == EAGAIN ? "the daemon accepts no more connections"
		    : strerror(errno));
		r = SL_ERR_IO;
		goto out;
	}
	*out = fd;
	fd = -1;
	r = 0;
 out:
	if (fd != -1)
		close(fd);
	return r;
}

/*
 * Sends buf.  Stops early, successfully, when the daemon has already
 * answered or closed its side (*answered): it may refuse a request before
 * reading all of it, and what it said is read next.
 */
static int
send_buf(int fd, const char *buf, size_t len, int64_t deadline, int *answered)
{
	short rev;
	ssize_t n;
	int r;

	while (len > 0 && !*answered) {
		if ((r = wait_fd(fd, POLLIN | POLLOUT, deadline, &rev)) != 0)
			return r;
		if (rev & (POLLIN | POLLHUP)) {
			*answered = 1;
			break;
		}
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n == -1 && (errno == EPIPE || errno == ECONNRESET)) {
			*answered = 1;
			break;
		}
		if (n == -1)
			return SL_ERR_IO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
send_request(int fd, const struct http_req *req, int64_t deadline)
{
	char *head = NULL;
	char ctype[160] = "", clen[64] = "";
	int n, answered = 0, r = SL_ERR_INTERNAL;

	if (req->content_type != NULL)
		snprintf(ctype, sizeof(ctype), "Content-Type: %s\r\n",
		    req->content_type);
	if (req->body != NULL || strcmp(req->method, "POST") == 0 ||
	    strcmp(req->method, "PUT") == 0)
		snprintf(clen, sizeof(clen), "Content-Length: %zu\r\n",
		    req->body != NULL ? req->body_len : 0);
	n = asprintf(&head, "%s %s HTTP/1.1\r\nHost: sluice\r\n"
	    "User-Agent: sluicectl/%s\r\nAccept: application/json, */*\r\n"
	    "%s%sConnection: close\r\n\r\n", req->method, req->target,
	    PACKAGE_VERSION, ctype, clen);
	if (n < 0) {
		head = NULL;
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((r = send_buf(fd, head, (size_t)n, deadline, &answered)) != 0)
		goto out;
	if (req->body != NULL && (r = send_buf(fd, req->body, req->body_len,
	    deadline, &answered)) != 0)
		goto out;
	r = 0;
 out:
	free(head);
	return r;
}

/* Reads and parses the answer until it is complete or the daemon closes. */
static int
read_answer(int fd, struct reader *rd, int64_t deadline)
{
	char buf[16384];
	llhttp_errno_t e;
	short rev;
	ssize_t n;
	int r, got = 0;

	while (!rd->done) {
		if ((r = wait_fd(fd, POLLIN, deadline, &rev)) != 0)
			return r;
		n = read(fd, buf, sizeof(buf));
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		/* What the daemon sent before it reset is read before this. */
		if (n == -1 && errno == ECONNRESET && got)
			n = 0;
		if (n == -1)
			return SL_ERR_IO;
		if (n == 0) {
			e = llhttp_finish(&rd->parser);
			if (e == HPE_INVALID_EOF_STATE) {
				errno = EPROTO;
				return SL_ERR_IO;
			}
			if (e != HPE_OK && e != HPE_PAUSED)
				return rd->err ? rd->err : SL_ERR_INVALID;
			if (!rd->done) {
				errno = got ? EPROTO : ECONNRESET;
				return SL_ERR_IO;
			}
			break;
		}
		got = 1;
		e = llhttp_execute(&rd->parser, buf, (size_t)n);
		if (e == HPE_PAUSED && rd->done)
			break;
		if (e != HPE_OK)
			return rd->err ? rd->err : SL_ERR_INVALID;
	}
	return 0;
}

int
http_request(const char *sock, const struct http_req *req,
    struct http_resp **out, char *err, size_t errlen)
{
	struct http_resp *resp = NULL;
	struct reader rd;
	const char *p;
	int64_t deadline = ((int64_t)mono_ms()) + HTTP_TIMEOUT_MS;
	int fd = -1, r = SL_ERR_INTERNAL;

	snprintf(err, errlen, "internal error");
	for (p = req->target; *p != '\0'; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			snprintf(err, errlen, "invalid request target");
			return SL_ERR_INVALID;
		}
	if ((resp = calloc(1, sizeof(*resp))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return SL_ERR_NOMEM;
	}
	memset(&rd, 0, sizeof(rd));
	rd.resp = resp;
	llhttp_init(&rd.parser, HTTP_RESPONSE, &resp_settings);
	rd.parser.data = &rd;

	if ((r = connect_unix(sock, deadline, &fd, err, errlen)) != 0)
		goto out;
	if ((r = send_request(fd, req, deadline)) != 0) {
		if (r == SL_ERR_IO && errno == ETIMEDOUT)
			snprintf(err, errlen, "%s: the daemon took no request "
			    "within %d s", sock, HTTP_TIMEOUT_MS / 1000);
		else if (r == SL_ERR_IO)
			snprintf(err, errlen, "%s: sending the request: %s",
			    sock, strerror(errno));
		else
			snprintf(err, errlen, "%s", err_str(r));
		goto out;
	}
	if ((r = read_answer(fd, &rd, deadline)) != 0) {
		if (r == SL_ERR_IO && errno == ETIMEDOUT)
			snprintf(err, errlen, "%s: no answer within %d s", sock,
			    HTTP_TIMEOUT_MS / 1000);
		else if (r == SL_ERR_IO && errno == ECONNRESET)
			snprintf(err, errlen, "%s: the daemon closed the "
			    "connection without answering", sock);
		else if (r == SL_ERR_IO && errno == EPROTO)
			snprintf(err, errlen, "%s: the answer ended early",
			    sock);
		else if (r == SL_ERR_IO)
			snprintf(err, errlen, "%s: reading the answer: %s",
			    sock, strerror(errno));
		else if (r == SL_ERR_TOO_BIG)
			snprintf(err, errlen, "%s: the answer is larger than "
			    "%u MiB", sock, HTTP_MAX_BODY >> 20);
		else if (r == SL_ERR_INVALID)
			snprintf(err, errlen, "%s: malformed answer (%s)", sock,
			    llhttp_get_error_reason(&rd.parser) != NULL ?
			    llhttp_get_error_reason(&rd.parser) : "?");
		else
			snprintf(err, errlen, "%s", err_str(r));
		goto out;
	}
	if (resp->reason == NULL && (resp->reason = strdup("")) == NULL) {
		r = SL_ERR_NOMEM;
		snprintf(err, errlen, "%s", err_str(r));
		goto out;
	}
	if (resp->body == NULL && (resp->body = calloc(1, 1)) == NULL) {
		r = SL_ERR_NOMEM;
		snprintf(err, errlen, "%s", err_str(r));
		goto out;
	}
	*out = resp;
	resp = NULL;	/* transferred */
	r = 0;
 out:
	if (fd != -1)
		close(fd);
	http_resp_free(resp);
	return r;
}

void
http_resp_free(struct http_resp *r)
{
	if (r == NULL)
		return;
	free(r->reason);
	free(r->content_type);
	free(r->body);
	free(r);
}
