/* outbuf.c: a growable write queue. */
#include "autoconf.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/outbuf.h"

int
outbuf_reserve(struct outbuf *o, size_t len)
{
	size_t have = o->len - o->off, cap;
	uint8_t *n;

	if (o->off > 0 && (have == 0 || o->off >= o->cap / 2)) {
		memmove(o->buf, o->buf + o->off, have);	/* compact */
		o->len = have;
		o->off = 0;
	}
	if (o->cap - o->len >= len)
		return 0;
	cap = o->cap ? o->cap : 4096;
	while (cap - o->len < len)
		cap *= 2;
	if ((n = realloc(o->buf, cap)) == NULL)
		return SL_ERR_NOMEM;
	o->buf = n;
	o->cap = cap;
	return 0;
}

int
outbuf_append(struct outbuf *o, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	if (outbuf_reserve(o, len) != 0)
		return SL_ERR_NOMEM;
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	return 0;
}

size_t
outbuf_pending(const struct outbuf *o)
{
	return o->len - o->off;
}

void
outbuf_free(struct outbuf *o)
{
	free(o->buf);
	memset(o, 0, sizeof(*o));
}
