/* dns.h: the DNS filter, served by every worker. */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

struct worker;

/* Starts serving on the worker's DNS sockets (UDP fds, TCP listeners). */
int	dns_worker_start(struct worker *w);
/* Stops: closes client connections and cancels upstream questions. */
void	dns_worker_stop(struct worker *w);

#endif
