/* dns.h: the DNS filter, served by every worker's loop. */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

#include <stddef.h>

struct loop;

/*
 * Starts serving on l: the UDP sockets udp[0..nudp) (still the caller's)
 * and TCP listeners on tcp[0..ntcp), which become l's (each set to -1).
 */
int	dns_start(struct loop *l, const int *udp, size_t nudp, int *tcp,
	    size_t ntcp);
/*
 * Drains: reads no new question (the UDP sockets stay, for the answers
 * owed), closes the TCP listeners, and lets TCP clients go once their
 * answers are out; l->ndns counts what is left.
 */
void	dns_drain(struct loop *l);
/* Stops: closes client connections and cancels upstream questions. */
void	dns_stop(struct loop *l);

#endif
