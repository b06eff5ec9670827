/* metrics.h: counters the workers bump without locks, rendered for Prometheus. */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct daemon;
struct evbuffer;

/*
 * A table of counters keyed by two short strings (an action and a reason,
 * a rule and an action).  One writer, its worker thread, adds keys and
 * bumps counts; any thread may read: a key is written before n counts it.
 * Cardinality is bounded: past METRICS_KEYS keys, counts go to "other".
 */
#define METRICS_KEYS	256
#define METRICS_KEYLEN	80

struct mkey {
	char		a[24];
	char		b[METRICS_KEYLEN];
	atomic_ullong	n;
};

struct mtable {
	atomic_uint	n;
	struct mkey	e[METRICS_KEYS];
};

/* Latency histogram: bucket bounds in microseconds (metrics.c). */
#define METRICS_BUCKETS	14

struct mhist {
	atomic_ullong	b[METRICS_BUCKETS + 1];	/* the last is +Inf */
	atomic_ullong	sum_us;
};

/* One worker's share; the scrape adds every worker's together. */
struct wmetrics {
	struct mtable	conns;		/* action, reason */
	struct mtable	requests;	/* rule, action */
	struct mtable	dns;		/* verdict, "" */
	struct mtable	injections;	/* secret, "" */
	struct mtable	redactions;	/* rule, "head" or "body" */
	struct mhist	handshake;	/* accept to verdict */
	struct mhist	decision;	/* first bytes complete to verdict */
};

void	mtable_add(struct mtable *t, const char *a, const char *b);
void	mhist_observe(struct mhist *h, uint64_t us);

/*
 * Appends the Prometheus text format (0.0.4) of everything to out.  Main
 * thread; reads the workers' tables and the snapshot in force.
 */
int	metrics_render(struct daemon *d, struct evbuffer *out);
struct state;
/* Connections open now, summed over the sandboxes of st. */
unsigned long long metrics_open_conns(const struct state *st);

#endif
