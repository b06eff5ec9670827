/* ctl.h: the control socket, HTTP/1.1 and JSON for orchestrators and sluicectl. */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stdint.h>

struct daemon;
struct ctl;
struct evbuffer;

/*
 * Binds listen.control (a Unix socket, mode 0660, group control_group)
 * and listen.metrics (TCP, GET /metrics only); runs before privileges are
 * dropped.  Errors are logged; returns 0 or SL_ERR_*.
 */
int	ctl_open(struct daemon *d, struct ctl **out);
/* Starts serving on d->base (main thread). */
int	ctl_start(struct ctl *ctl);
void	ctl_free(struct ctl *ctl);		/* accepts NULL */

/* Every worker runs with generation gen now: answer the requests that waited. */
void	ctl_applied(struct ctl *ctl, uint64_t gen);

/* 1 while an answer is still being written (the exit waits for it). */
int	ctl_answering(const struct ctl *ctl);
/* Upgrades (upgrade.h).  The listening sockets, into fds[0..max). */
size_t	ctl_listen_fds(const struct ctl *ctl, int *fds, size_t max);
/* The successor serves them: stop accepting, and leave the socket file. */
void	ctl_handed_over(struct ctl *ctl);
/* Another process unlinks the socket's file (the monitor, a successor). */
void	ctl_disown(struct ctl *ctl);
/*
 * The upgrade ended: the POST /v1/upgrade requests that waited are
 * answered (pid: the successor's; or error says why it failed).
 */
void	ctl_upgraded(struct ctl *ctl, long pid, const char *error);

#endif
