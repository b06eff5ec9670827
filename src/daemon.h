/* daemon.h: the daemon's process-wide context, written once at start. */
#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct audit;
struct state;
struct worker;
struct event_base;
struct event;
struct dnsmem;

struct daemon {
	struct config		*cfg;
	struct audit		*audit;
	struct event_base	*base;		/* main thread: signals, timers */
	struct worker		*workers;
	size_t			 nworkers;
	struct state		*state;		/* main thread's reference */
	struct dnsmem		*dnsmem;	/* what the DNS filter answered */
	uint64_t		 generation;
	int			 draining;
	struct event		*worker_done;	/* a worker thread ended */
	struct event		*drain_timer;
	atomic_uint		 finished;	/* worker threads that ended */
};

/* Runs the daemon until SIGTERM; returns the exit status. */
int	daemon_run(struct config *cfg);
/* Re-reads policy_dir; on any error the snapshot in force stays. */
int	daemon_reload(struct daemon *d);

#endif
