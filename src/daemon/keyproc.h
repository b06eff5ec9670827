/*
 * keyproc.h: the keys process.  Each worker process (monitor.h) starts
 * its own before it loads any key, so nothing a dead worker asked for
 * outlives it; it alone loads the gateway keys and keeps every sandbox's CA key
 * (kserve.h), has no network socket and reads no byte from a sandbox.
 * It also writes the audit trail: the hash chain, the signed checkpoints
 * and the file are here, where a worker that is taken over cannot forge
 * them (aserve.h).  The process that serves sandboxes (here: the one
 * that started it) talks to it over channels of kproto.h: one for the
 * control thread, one for the audit writer thread and one a worker
 * thread, and nothing else.  A request outside the table
 * ends that process: the keys process kills it and exits (and the
 * monitor starts another pair).  The keys process exits when the control
 * channel closes, and dies with the worker; when it dies, the worker
 * stops and the daemon with it.
 */
#ifndef SLUICE_KEYPROC_H
#define SLUICE_KEYPROC_H

#include <stddef.h>
#include <sys/types.h>

struct config;
struct kchan;

struct keyproc {
	pid_t		 pid;
	struct kchan	*ctl;		/* the control thread's channel */
	struct kchan	*audit;		/* the audit writer thread's */
	struct kchan	**workers;	/* one a worker thread */
	size_t		 nworkers;
};

/*
 * Starts it with nworkers worker channels and says hello.  It opens the
 * audit trail (audit.path; await_pid: an upgrade's predecessor writes it
 * until it lets go; mainpid: the daemon's pid its "start" record names)
 * with the first signing key for its checkpoints: the worker's writer
 * sends its rounds over kp->audit.  0, or -1 with why
 * (it could not start, or its keys or trail did not open: its own log
 * says which).
 */
int	keyproc_start(const struct config *cfg, size_t nworkers, long await_pid,
	    long mainpid, struct keyproc *kp, char *why, size_t why_len);
/* Tells it the start is over: from now on only the serving requests. */
int	keyproc_ready(struct keyproc *kp, char *why, size_t why_len);
/* 1 when pid was the keys process (reaped by the caller). */
int	keyproc_is(const struct keyproc *kp, pid_t pid);
/* Closes the channels and waits for it to exit; accepts a zeroed kp. */
void	keyproc_stop(struct keyproc *kp);

#endif
