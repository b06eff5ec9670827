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
#endif
