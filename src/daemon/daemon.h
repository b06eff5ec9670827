/* daemon.h: the daemon's process-wide context, written once at start. */
#ifndef SLUICE_DAEMON_H
#define SLUICE_DAEMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/notify.h"

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
struct secret_store;
struct signkey;
struct secret;
struct spend;
struct mintcache;
struct upgrade_out;
struct upgrade_in;

#include "daemon/keyproc.h"

struct daemon {
	struct config		*cfg;
	pid_t			 mainpid;	/* the monitor's (monitor.h) */
	int			 mon;		/* the channel to it, or -1 */
	unsigned		 restarts;	/* workers it forked after the first */
	struct keyproc		 keys;		/* the keys process */
	struct event		*keys_ev;	/* SIGCHLD: did it die? */
	int			 keys_lost;	/* it did: MONITOR_EXIT_FATAL */
	struct audit		*audit;
	struct event_base	*base;		/* main thread: signals, timers */
	struct worker		*workers;
	size_t			 nworkers;
	struct state		*state;		/* main thread's reference */
	struct dnsmem		*dnsmem;	/* what the DNS filter answered */
	struct spend		*spend;		/* what credentials spent */
	struct mintcache	*mints;		/* minted tokens, for every worker */
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
	struct secret_store	*secrets;	/* NULL: secrets are off */
	struct dirwatch		*secret_watch;	/* secret_dir, or NULL */
	struct dirwatch		*policy_watch;	/* watch_policies, or NULL */
	struct event		*observe_ev;	/* observe.h */
	int			 state_ok;	/* state_dir keeps registrations */
	unsigned long long	 reloads_ok, reloads_failed;	/* SIGHUP, /v1/reload */
	unsigned long long	 upgrades_failed;	/* upgrade.c */
	struct notify		 notify;	/* the service manager (notify.h) */
	char *const		*argv;		/* as started, for an upgrade */
	char			 exe[4096];	/* the binary it was started from */
	struct upgrade_out	*up_out;	/* upgrade.c: we hand over */
	struct upgrade_in	*up_in;		/* upgrade_inherit.c: we took over */
};

/* Runs the daemon until SIGTERM; returns the exit status. */
int	daemon_run(struct config *cfg, char *const *argv);
/*
 * Stops accepting and lets the connections end, up to timeouts.drain;
 * the process exits once none is left.
 */
void	daemon_drain(struct daemon *d, const char *why);
/*
 * daemon_secrets.c.  open: loads the gateway keys and secret_dir into the
 * first snapshot (any problem is an error, added to errs).  watch: follows
 * the folder's changes.  load: reads the folder again into *out (NULL
 * when nothing changed; refused files are in errs, their versions in force
 * stay), writing an audit record for each change.  The new set must suit
 * the policies of judge (state_check_secrets): if not, nothing changes
 * and the errors are in errs.
 */
int	daemon_secrets_open(struct daemon *d, struct errlist *errs);
int	daemon_secrets_watch(struct daemon *d);
void	daemon_secrets_close(struct daemon *d);
struct secret_set;
int	daemon_secrets_load(struct daemon *d, const struct state *judge,
	    const char *cause, struct secret_set **out, struct errlist *errs);
/* A secret_rotate (new set) or secret_delete record; uid < 0: none. */
void	daemon_audit_secret(struct daemon *d, const struct secret *old,
	    const struct secret *new, const char *cause, long uid);


#endif
