/*
 * dechunk.h: the data of a chunked HTTP/1.1 body, taken out of its framing
 * as it streams past in pieces of any size.  The framing was checked by
 * the message's parser already; a framing error here still stops it.
 * Trailers after the last chunk are skipped, or handed on, up to the
 * empty line that ends the body.
 */
#ifndef SLUICE_DECHUNK_H
#define SLUICE_DECHUNK_H

#include <stddef.h>
#include <stdint.h>

/* What gets the data: 0, or -1 to stop the feed. */
typedef int	(*dechunk_cb)(void *arg, const uint8_t *p, size_t n);

struct dechunk {
	int		 state;
	uint64_t	 left;		/* bytes left of the current chunk */
	dechunk_cb	 trailers;	/* NULL: the trailer section is skipped */
};

/* Before the body's first byte. */
void	dechunk_init(struct dechunk *d);
/*
 * After dechunk_init: the bytes after the last chunk (trailer field lines
 * and the final CRLF, as they came) go to cb, with the feed's arg.
 */
void	dechunk_trailers(struct dechunk *d, dechunk_cb cb);
/*
 * Feeds p[0..n) of the body in its framing; cb gets each run of data in
 * order.  0, or -1 on a framing error or when cb said -1.
 */
int	dechunk_feed(struct dechunk *d, const uint8_t *p, size_t n,
	    dechunk_cb cb, void *arg);
/* Whether the last chunk (size 0) was seen. */
int	dechunk_done(const struct dechunk *d);
/*
 * Whether the body is whole: its trailer section's empty line seen too.
 * Bytes fed after it are not the body's, and are ignored.
 */
int	dechunk_ended(const struct dechunk *d);

#endif
