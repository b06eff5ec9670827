/*
 * half.h: one side of a spliced connection (down is the sandbox, up the
 * upstream): its socket, its events, the pipe that holds what it read for
 * its peer, and what is queued in user space for it to write.
 */
#ifndef SLUICE_HALF_H
#define SLUICE_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "util/outbuf.h"

struct conn;
struct event;

/* One side of a connection: down is the sandbox, up the upstream. */
struct half {
	struct conn	*c;
	struct half	*peer;
	const char	*name;		/* "down" or "up" */
	int		 fd;
	struct event	*rev, *wev;
	int		 pipe[2];	/* bytes read from fd, waiting for peer */
	size_t		 inpipe;
	struct outbuf	 out;		/* bytes to write to fd before any pipe */
	int		 eof;		/* read side finished */
	int		 shut;		/* we shut down fd's write side */
	uint64_t	 bytes;		/* bytes read from fd */
};

/*
 * Queues bytes to be written to h's fd before anything spliced; takes a
 * copy.  Returns 0 or SL_ERR_NOMEM.
 */
int	half_send(struct half *h, const void *data, size_t len);
/* As half_send, but takes ownership of a malloc'd buffer. */
int	half_send_owned(struct half *h, void *buf, size_t len);
/* Bytes queued in user space for h's fd. */
size_t	half_pending(const struct half *h);
/* Closes fd, pipes and events of one half; safe on a half never opened. */
void	half_reset(struct half *h);
void	half_want_read(struct half *h, int on);
void	half_want_write(struct half *h, int on);

#endif
