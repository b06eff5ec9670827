/* half.c: one side of a spliced connection, its events and its queue. */
#include "autoconf.h"

#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/err.h"
#include "util/outbuf.h"
#include "loop/half.h"

void
half_want_read(struct half *h, int on)
{
	if (h->rev == NULL)
		return;
	if (on && !h->eof)
		event_add(h->rev, NULL);
	else
		event_del(h->rev);
}

void
half_want_write(struct half *h, int on)
{
	if (h->wev == NULL)
		return;
	if (on)
		event_add(h->wev, NULL);
	else
		event_del(h->wev);
}

size_t
half_pending(const struct half *h)
{
	return outbuf_pending(&h->out);
}

int
half_send(struct half *h, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	if (outbuf_append(&h->out, data, len) != 0)
		return SL_ERR_NOMEM;
	half_want_write(h, 1);
	return 0;
}

int
half_send_owned(struct half *h, void *buf, size_t len)
{
	int r;

	if (half_pending(h) == 0) {
		/* Adopt the buffer: the replayed first bytes are not copied. */
		free(h->out.buf);
		h->out.buf = buf;
		h->out.len = h->out.cap = len;
		h->out.off = 0;
		half_want_write(h, 1);
		return 0;
	}
	r = half_send(h, buf, len);
	free(buf);
	return r;
}

void
half_reset(struct half *h)
{
	if (h->rev != NULL)
		event_free(h->rev);
	if (h->wev != NULL)
		event_free(h->wev);
	h->rev = h->wev = NULL;
	if (h->fd != -1)
		close(h->fd);
	if (h->pipe[0] != -1)
		close(h->pipe[0]);
	if (h->pipe[1] != -1)
		close(h->pipe[1]);
	h->fd = h->pipe[0] = h->pipe[1] = -1;
	h->inpipe = 0;
	outbuf_free(&h->out);
}
