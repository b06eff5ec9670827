/* relay.h: moving bytes between the two halves of a connection. */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include <stddef.h>

struct conn;
struct half;

/* Output queued in user space past this stops reading from the other side. */
#define RELAY_HIGH_WATER	(256 * 1024)

/* Creates the pipes and starts relaying both ways (zero-copy splice). */
int	relay_start(struct conn *c);
/* fd readable / writable, in the relay or refusal states. */
void	relay_on_read(struct half *h);
void	relay_flush(struct half *h);
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
