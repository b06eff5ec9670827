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
struct ctl;
struct errlist;
struct ssl_ctx_st;
struct tlsup;

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
	struct ctl		*ctl;		/* the control socket */
	struct event		*applied_ev;	/* a worker took a snapshot */
	uint64_t		 applied;	/* generation every worker runs */
	time_t			 started;
	struct ssl_ctx_st	*tls_down;	/* interception, towards sandboxes */
	struct tlsup		*tls_up;	/* interception, towards upstreams */
};

/* Runs the daemon until SIGTERM; returns the exit status. */
int	daemon_run(struct config *cfg);
/*
 * Re-reads policy_dir; on any error (added to errs, which may be NULL:
 * logged) the snapshot in force stays.  Returns 0 or SL_ERR_INVALID.
 */
int	daemon_reload(struct daemon *d, struct errlist *errs);
/*
 * Puts st (sealed, generation d->generation + 1; the reference is taken)
 * in force and hands it to every worker.  Returns its generation; it is
 * in force everywhere once d->applied reaches it.
 */
uint64_t daemon_publish(struct daemon *d, struct state *st);

#endif
