/*
 * monitor.h: sluiced's first process, the monitor.  It opens what must
 * outlive a worker (the listening sockets, the control socket) and then
 * only supervises: it forks the worker process, which starts its own keys
 * process (keyproc.h), and forks it again when it dies, within a second
 * (MONITOR_RESTART_MS).  Meanwhile the sockets stay open and their queues
 * wait: nothing is relayed that no policy judged.  It forwards SIGTERM,
 * SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to the worker.  A keys process
 * that dies makes the worker exit MONITOR_EXIT_FATAL (daemon.c): every
 * key is gone, and the daemon stops.
 *
 * The worker drops every privilege and cannot run a program, so the
 * monitor starts an upgrade's successor for it (MON_SPAWN) with the
 * sockets it holds; the successor is a monitor of its own.  The worker's
 * requests are few and bounded; one the monitor does not know ends the
 * worker.  The monitor reads no byte from a sandbox and holds no key.
 */
#ifndef SLUICE_MONITOR_H
#define SLUICE_MONITOR_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct daemon;

#define MONITOR_RESTART_MS	1000	/* at most this long without a worker */
/*
 * A serving worker that exits 0 has stopped (a signal, an upgrade); one
 * that exits MONITOR_EXIT_FATAL stops the daemon with status 1 (its keys
 * process died).  Any other end is a crash (a sanitizer exits 1): it is
 * replaced.
 */
#define MONITOR_EXIT_FATAL	3

/* Requests of the worker; a reply has MON_REPLY set. */
enum mon_msg {
	MON_KEYS = 1,		/* u32: the keys process's pid (no reply) */
	MON_READY,		/* serving (no reply) */
	MON_SPAWN,		/* fd: the upgrade channel; reply: u32 pid, str why */
	MON_CHILD_END,		/* u32 pid, u32 grace ms; reply: u32 had, u32 status */
	MON_HANDED,		/* the successor serves: its sockets now (no reply) */
	MON_REPLY = 0x100,
};

#define MON_WHY_MAX	256

/*
 * Called once the sockets are open: becomes the monitor.  Returns 0 in
 * each worker process it forks (which goes on to serve, d->mon set), and
 * 1 in the monitor once the daemon is over, its exit status in *status.
 */
int	monitor_run(struct daemon *d, int *status);
/*
 * The signals the monitor passes on.  A worker starts with them blocked
 * and unblocks them once its handlers are in (monitor_signals_ready), so
 * one sent during its start is handled then instead of killing it.
 */
void	monitor_passed_signals(sigset_t *set);
void	monitor_signals_ready(void);

/* ---- the worker's side (monitor_req.c) ---- */

/* A message that needs no reply; 0 or -1 (the monitor is gone). */
int	monitor_tell(struct daemon *d, enum mon_msg type, const void *p,
	    size_t len);
/* Starts the successor with chan as its upgrade channel; 0 with *pid. */
int	monitor_spawn(struct daemon *d, int chan, pid_t *pid, char *why,
	    size_t why_len);
/*
 * Waits up to grace_ms for the successor pid to end, then kills it; its
 * wait status into *status.  0, or -1 (not a child, not reaped).
 */
int	monitor_child_end(struct daemon *d, pid_t pid, unsigned grace_ms,
	    int *status);

#endif
