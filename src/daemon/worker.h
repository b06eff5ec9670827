/* worker.h: one event-loop thread with its own listeners and connections. */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "loop/loop.h"
#include "conn/conn.h"

struct daemon;
struct evconnlistener;
struct event;
struct state;

struct worker_listener {
	struct worker		*w;
	int			 fd;
	enum listener_kind	 kind;
	struct evconnlistener	*lev;
	struct event		*resume;	/* re-enables lev after a pause */
};

struct worker {
	struct loop		 l;		/* what its connections use */
	struct daemon		*d;
	pthread_t		 thread;
	struct event		*wake;		/* posted by the main thread */
	struct event		*audit_ev;	/* audit records became durable */
	pthread_mutex_t		 mtx;		/* guards the two fields below */
	struct state		*pending;	/* next snapshot (ref), or NULL */
	int			 cmd;		/* WORKER_CMD_* bits */
	struct worker_listener	*lis;
	size_t			 nlis;
	int			*dns_udp;	/* DNS sockets, made by the daemon */
	size_t			 ndns_udp;
	int			*dns_tcp;
	size_t			 ndns_tcp;
	atomic_ullong		 applied;	/* generation in force here */
};

#define WORKER_CMD_DRAIN	0x1	/* stop accepting, exit when idle */
#define WORKER_CMD_STOP		0x2	/* close every connection and exit */

/* Binds nothing: listener fds were created by the daemon before. */
int	worker_init(struct worker *w, struct daemon *d, unsigned idx);
int	worker_start(struct worker *w);
void	worker_join(struct worker *w);
void	worker_free(struct worker *w);
/*
 * From the main thread: hand over a new snapshot (takes a reference), or
 * a command.  Before worker_init both do nothing.
 */
void	worker_post_state(struct worker *w, struct state *st);
void	worker_post_cmd(struct worker *w, int cmd);



#endif
