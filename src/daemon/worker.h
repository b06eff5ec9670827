/* worker.h: one event-loop thread with its own listeners and connections. */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "conn/conn.h"
#include "util/metrics.h"

struct daemon;
struct event_base;
struct evconnlistener;
struct config;
struct audit;
struct dns_worker;
struct upool;

TAILQ_HEAD(conn_list, conn);

struct worker_listener {
	struct worker		*w;
	int			 fd;
	enum listener_kind	 kind;
	struct evconnlistener	*lev;
	struct event		*resume;	/* re-enables lev after a pause */
};

struct worker {
	struct daemon		*d;
	unsigned		 idx;
	pthread_t		 thread;
	struct event_base	*base;
	struct resolver		*res;
	struct state		*st;		/* the snapshot in force here (ref) */
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
	struct dns_worker	*dns;		/* the DNS filter's state (dns.c) */
	struct upool		*upool;		/* idle intercepted upstreams */
	struct conn_list	 conns;
	size_t			 nconns;
	int			 draining;
	time_t			 last_accept_warn;
	atomic_ullong		 applied;	/* generation in force here */
	struct wmetrics		 metrics;	/* written here, read by scrapes */
	char			*scratch;	/* guarded, INJECT_BUF bytes; on first use */
	uint64_t		 rid_next;	/* injected requests' ids */
};

#define WORKER_CMD_DRAIN	0x1	/* stop accepting, exit when idle */
#define WORKER_CMD_STOP		0x2	/* close every connection and exit */

/* Binds nothing: listener fds were created by the daemon before. */
int	worker_init(struct worker *w, struct daemon *d, unsigned idx);
int	worker_start(struct worker *w);
void	worker_join(struct worker *w);
void	worker_free(struct worker *w);
/*
 * The worker's guarded scratch for rendering injected headers
 * (INJECT_BUF bytes, locked; wiped by its user after each use), made on
 * first use.  NULL when guarded memory is short.
 */
char	*worker_scratch(struct worker *w);
/* From the main thread: hand over a new snapshot (takes a reference). */
void	worker_post_state(struct worker *w, struct state *st);
void	worker_post_cmd(struct worker *w, int cmd);

/*
 * Accepting failed (out of descriptors, say): stop accepting on lev for a
 * moment instead of spinning on the error; resume (from
 * worker_resume_event) turns it back on.
 */
void	worker_pause_listener(struct worker *w, struct evconnlistener *lev,
	    struct event *resume);
struct event *worker_resume_event(struct worker *w, struct evconnlistener *lev);

/* For connections (worker thread only). */
const struct config *worker_config(const struct worker *w);
struct audit *worker_audit(const struct worker *w);
void	worker_conn_gone(struct worker *w);

#endif
