/* worker.c: one event-loop thread with its own listeners and connections. */
#include "autoconf.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <sodium.h>

#include "util/keyfile.h"
#include "util/log.h"
#include "conf/config.h"
#include "keys/inject.h"
#include "audit/audit.h"
#include "loop/resolve.h"
#include "loop/state.h"
#include "loop/h2up.h"
#include "loop/upool.h"
#include "dns/dns.h"
#include "conn/conn.h"
#include "conn/minter.h"
#include "keys/kclient.h"
#include "daemon/daemon.h"
#include "daemon/worker.h"

#define RESOLVER_CACHE	4096

static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct worker_listener *l = arg;

	conn_accept(&l->w->l, fd, l->kind);
}

static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct worker_listener *l = arg;

	loop_pause_listener(&l->w->l, lev, l->resume);
}

static void
stop_listening(struct worker *w)
{
	size_t i;

	for (i = 0; i < w->nlis; i++) {
		if (w->lis[i].resume != NULL)
			event_free(w->lis[i].resume);
		w->lis[i].resume = NULL;
		if (w->lis[i].lev != NULL)
			evconnlistener_free(w->lis[i].lev);	/* closes the fd */
		else if (w->lis[i].fd != -1)
			close(w->lis[i].fd);
		w->lis[i].lev = NULL;
		w->lis[i].fd = -1;
	}
}

/* Applies a new snapshot: new decisions use it, open connections are re-judged. */
static void
swap_state(struct worker *w, struct state *st)
{
	struct conn *c, *next;

	state_unref(w->l.st);
	w->l.st = st;
	for (c = TAILQ_FIRST(&w->l.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, link);
		conn_rejudge(c);
	}
	atomic_store(&w->applied, st->generation);
	event_active(w->d->applied_ev, EV_READ, 0);
}

static void
close_all(struct worker *w, const char *reason)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&w->l.conns)) != NULL)
		conn_close(c, reason);
}

/* Connections that can say they end (HTTP/2: GOAWAY) say it now. */
static void
drain_all(struct worker *w)
{
	struct conn *c, *next;

	for (c = TAILQ_FIRST(&w->l.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, link);	/* c may close */
		conn_drain(c);
	}
}

static void
wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct state *st;
	int cmd;

	pthread_mutex_lock(&w->mtx);
	st = w->pending;
	w->pending = NULL;
	cmd = w->cmd;
	w->cmd = 0;
	pthread_mutex_unlock(&w->mtx);

	if (st != NULL)
		swap_state(w, st);
	if (cmd & WORKER_CMD_DRAIN) {
		w->l.draining = 1;
		stop_listening(w);
		dns_drain(&w->l);	/* the questions in flight are answered */
		drain_all(w);
	}
	if (cmd & WORKER_CMD_STOP) {
		w->l.draining = 1;
		stop_listening(w);
		dns_stop(&w->l);
		close_all(w, "shutdown");
	}
	loop_conn_gone(&w->l);
}

/* Audit records became durable: requests held for theirs go on. */
static void
audit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	uint64_t durable = audit_durable(w->d->audit);
	int failed = audit_failed(w->d->audit);
	struct conn *c, *next;

	for (c = TAILQ_FIRST(&w->l.conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, link);	/* c may close */
		conn_audit_durable(c, durable, failed);
	}
}

int
worker_init(struct worker *w, struct daemon *d, unsigned idx)
{
	const struct config *cfg = d->cfg;
	size_t i;

	w->d = d;
	w->l.idx = idx;
	w->l.started = d->started;
	w->l.cfg = cfg;
	w->l.audit = d->audit;
	w->l.dnsmem = d->dnsmem;
	w->l.spend = d->spend;
	w->l.mints = d->mints;
	w->l.tls_down = d->tls_down;
	w->l.tls_up = d->tls_up;
	w->l.secrets = d->secrets;
	TAILQ_INIT(&w->l.conns);
	pthread_mutex_init(&w->mtx, NULL);
	if ((w->l.base = event_base_new()) == NULL)
		return SL_ERR_NOMEM;
	if ((w->wake = event_new(w->l.base, -1, EV_PERSIST, wake_cb, w)) == NULL ||
	    (w->audit_ev = event_new(w->l.base, -1, EV_PERSIST, audit_cb,
	    w)) == NULL || (w->l.upool = upool_new(w->l.base)) == NULL ||
	    (w->l.h2up = h2up_pool_new(w->l.base)) == NULL ||
	    audit_notify(d->audit, w->audit_ev) != 0)
		return SL_ERR_NOMEM;
	w->l.res = resolver_new(w->l.base, cfg->resolvers, cfg->nresolvers,
	    cfg->timeouts.connect < 5000 ? cfg->timeouts.connect : 5000,
	    RESOLVER_CACHE);
	if (w->l.res == NULL)
		return SL_ERR_INTERNAL;
	w->l.st = state_ref(d->state);
	atomic_init(&w->applied, d->state->generation);
	if (dns_start(&w->l, w->dns_udp, w->ndns_udp, w->dns_tcp,
	    w->ndns_tcp) != 0)
		return SL_ERR_IO;
	for (i = 0; i < w->nlis; i++) {
		w->lis[i].w = w;
		w->lis[i].lev = evconnlistener_new(w->l.base, accept_cb, &w->lis[i],
		    LEV_OPT_CLOSE_ON_FREE, -1, w->lis[i].fd);
		if (w->lis[i].lev == NULL)
			return SL_ERR_IO;
		evconnlistener_set_error_cb(w->lis[i].lev, accept_error_cb);
		w->lis[i].resume = loop_resume_event(&w->l, w->lis[i].lev);
	}
	return 0;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	/* Its own channel to the keys process: no lock shared with others. */
	if (w->l.idx < w->d->keys.nworkers)
		kclient_bind(w->d->keys.workers[w->l.idx]);
	/* The wake event has no fd: keep looping while idle. */
	event_base_loop(w->l.base, EVLOOP_NO_EXIT_ON_EMPTY);
	atomic_store(&w->applied, UINT64_MAX);	/* nobody waits for it now */
	atomic_fetch_add(&w->d->finished, 1);
	event_active(w->d->worker_done, EV_READ, 0);
	event_active(w->d->applied_ev, EV_READ, 0);
	return NULL;
}

int
worker_start(struct worker *w)
{
	sigset_t all, old;
	int r;

	/* Signals belong to the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r == 0 ? 0 : SL_ERR_IO;
}

void
worker_join(struct worker *w)
{
	pthread_join(w->thread, NULL);
}

void
worker_free(struct worker *w)
{
	size_t i;

	close_all(w, "shutdown");
	stop_listening(w);
	dns_stop(&w->l);
	for (i = 0; i < w->ndns_udp; i++)
		if (w->dns_udp[i] != -1)
			close(w->dns_udp[i]);
	for (i = 0; i < w->ndns_tcp; i++)
		if (w->dns_tcp[i] != -1)
			close(w->dns_tcp[i]);
	free(w->dns_udp);
	free(w->dns_tcp);
	free(w->lis);
	if (w->wake != NULL)
		event_free(w->wake);
	if (w->audit_ev != NULL)	/* the daemon cleared audit_notify */
		event_free(w->audit_ev);
	minter_stop_all(&w->l);
	/* Once more, so deferred frees and deferred DNS replies run first. */
	if (w->l.base != NULL)
		event_base_loop(w->l.base, EVLOOP_NONBLOCK);
	upool_free(w->l.upool);	/* after the connections that parked there */
	h2up_pool_free(w->l.h2up);
	resolver_free(w->l.res);
	if (w->l.base != NULL)
		event_base_free(w->l.base);
	state_unref(w->l.st);
	state_unref(w->pending);
	sodium_free(w->l.scratch);
	loop_caches_clear(&w->l);
	pthread_mutex_destroy(&w->mtx);
}

void
worker_post_state(struct worker *w, struct state *st)
{
	if (w->wake == NULL)
		return;		/* worker_init takes d->state */
	pthread_mutex_lock(&w->mtx);
	state_unref(w->pending);
	w->pending = state_ref(st);
	pthread_mutex_unlock(&w->mtx);
	event_active(w->wake, EV_READ, 0);
}

void
worker_post_cmd(struct worker *w, int cmd)
{
	if (w->wake == NULL)
		return;		/* not set up: nothing runs */
	pthread_mutex_lock(&w->mtx);
	w->cmd |= cmd;
	pthread_mutex_unlock(&w->mtx);
	event_active(w->wake, EV_READ, 0);
}
