/*
 * notify.h: telling the service manager how sluiced is: ready, reloading,
 * stopping, still alive (the sd_notify(3) protocol, spoken without
 * libsystemd: one datagram to $NOTIFY_SOCKET per change).
 */
#ifndef SLUICE_NOTIFY_H
#define SLUICE_NOTIFY_H

#include <sys/socket.h>
#include <sys/un.h>

struct event;
struct event_base;

struct notify {
	int		 fd;		/* -1: no manager listens */
	struct sockaddr_un sa;
	socklen_t	 salen;
	int		 connected;	/* else each message names sa */
	struct event	*watchdog;	/* WATCHDOG=1 every half period, or NULL */
};

/*
 * Reads $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace)
 * and $WATCHDOG_USEC (for mainpid, the monitor's, unless $WATCHDOG_PID
 * names another); without them every call is a no-op.  The variables are
 * unset, so no child of the worker inherits them; the monitor keeps them
 * for the next worker.  A socket that cannot be made is
 * logged, and the daemon runs on unnotified.
 */
void	notify_open(struct notify *n, struct event_base *base, long mainpid);
/* Sends msg ("READY=1", "STOPPING=1", ... newline-separated). */
void	notify_send(struct notify *n, const char *msg);
void	notify_close(struct notify *n);

#endif
