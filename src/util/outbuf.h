/* outbuf.h: a queue of bytes waiting to be written, appended to at its end. */
#ifndef SLUICE_OUTBUF_H
#define SLUICE_OUTBUF_H

#include <stddef.h>
#include <stdint.h>

/* Bytes buf[off..len) are queued; the queue owns buf. */
struct outbuf {
	uint8_t		*buf;
	size_t		 len, off, cap;
};

/*
 * Makes room for len more bytes at the end: the written front is dropped
 * (compacting) before the buffer grows, so appending to a queue that is
 * written as fast as it fills costs no copy of what is queued.  Returns 0
 * or SL_ERR_NOMEM (the queue is unchanged).
 */
int	outbuf_reserve(struct outbuf *o, size_t len);
/* Appends data[0..len). */
int	outbuf_append(struct outbuf *o, const void *data, size_t len);
size_t	outbuf_pending(const struct outbuf *o);
void	outbuf_free(struct outbuf *o);	/* empties it; the struct stays */

#endif
