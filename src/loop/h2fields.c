/* h2fields.c: trailer sections from HTTP/1.1 text to HTTP/2 (h2fields.h). */
#include "autoconf.h"

#include <event2/buffer.h>

#include "parse/httphead.h"
#include "parse/httpwrite.h"
#include "loop/h2fields.h"

int
h2_trailers_keep(struct evbuffer **b, const uint8_t *p, size_t n)
{
	if (*b == NULL && n > 0 && (p[0] == '\r' || p[0] == '\n'))
		return 0;
	if (*b == NULL && (*b = evbuffer_new()) == NULL)
		return -1;
	return evbuffer_add(*b, p, n);
}

/* The fields of b as trailers: 1 when submitted, 0 when none was left, -1. */
static int
trailers_submit(nghttp2_session *ng, int32_t id, struct evbuffer *b,
    uint8_t nv_flags)
{
	struct http_header f[HTTP_MAX_HEADERS];
	nghttp2_nv nv[HTTP_MAX_HEADERS];
	size_t len = evbuffer_get_length(b), i;
	char *p;
	long n;

	if ((p = (char *)evbuffer_pullup(b, (ssize_t)len)) == NULL ||
	    (n = http_trailer_fields(p, len, f, HTTP_MAX_HEADERS)) < 0)
		return -1;
	if (n == 0)
		return 0;
	for (i = 0; i < (size_t)n; i++)
		nv[i] = (nghttp2_nv){ (uint8_t *)f[i].name,
		    (uint8_t *)f[i].value, f[i].name_len, f[i].value_len,
		    nv_flags };
	return nghttp2_submit_trailer(ng, id, nv, (size_t)n) == 0 ? 1 : -1;
}

int
h2_trailers_end(nghttp2_session *ng, int32_t id, struct evbuffer *b,
    uint8_t nv_flags, uint32_t *data_flags)
{
	int r;

	if (b == NULL || (r = trailers_submit(ng, id, b, nv_flags)) == 0)
		return 0;
	if (r < 0)
		return -1;
	*data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	return 0;
}
