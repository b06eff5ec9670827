/*
 * chan.h: messages between sluiced's processes.  A channel is one end of
 * an AF_UNIX SOCK_SEQPACKET pair, so a message arrives whole or not at
 * all: a 16-byte header (type, payload length, request id) and at most
 * CHAN_MSG_MAX bytes of payload (fields: wire.h), optionally carrying one
 * file descriptor.  Both ends are the same binary on the same host, so
 * the header is in host order.  A message that is cut short, longer than
 * its header says or than the reader's buffer, or that carries an fd it
 * was not asked for, is malformed: the reader's side treats the sender as
 * broken.
 */
#ifndef SLUICE_CHAN_H
#define SLUICE_CHAN_H

#include <stddef.h>
#include <stdint.h>

#define CHAN_MSG_MAX	(96u * 1024)	/* a message's payload */

struct chan_hdr {
	uint32_t	type;
	uint32_t	len;		/* of the payload */
	uint64_t	id;		/* a reply carries its request's */
};

/* A connected pair, close-on-exec.  0, or SL_ERR_IO (errno). */
int	chan_pair(int sv[2]);
/*
 * Sends one message; passfd >= 0 goes with it.  Waits while the peer's
 * queue is full.  0, SL_ERR_TOO_BIG (len over CHAN_MSG_MAX), or SL_ERR_IO
 * (errno; EPIPE when the peer is gone).
 */
int	chan_send(int fd, uint32_t type, uint64_t id, const void *p,
	    size_t len, int passfd);
/*
 * Receives one message into h and buf[0..cap); its fd, if any, into
 * *passfd (NULL: a message with an fd is malformed, and the fd closed).
 * Waits up to timeout_ms (< 0: for ever).  Returns 1 (a message), 0 (the
 * peer closed its end), SL_ERR_IO with errno ETIMEDOUT (nothing came in
 * time) or another errno, or SL_ERR_INVALID (malformed).
 */
int	chan_recv(int fd, struct chan_hdr *h, void *buf, size_t cap,
	    int *passfd, int timeout_ms);

#endif
