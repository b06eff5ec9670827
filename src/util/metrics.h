/*
 * metrics.h: counters the workers bump without locks; the Prometheus page
 * that sums them is daemon/ctl_metrics.c.
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A table of counters keyed by two short strings (an action and a reason,
 * a rule and an action).  One writer, its worker thread, adds keys and
 * bumps counts; any thread may read: a key is written before n counts it.
 * Cardinality is bounded: past METRICS_KEYS keys, counts go to "other".
 * A string is kept to METRICS_KEYLEN - 1 bytes (a rule's label, a secret
 * name fit whole).
 */
#define METRICS_KEYS	256
#define METRICS_KEYLEN	80

struct mkey {
	char		a[METRICS_KEYLEN];
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
	struct mtable	budget_refusals;	/* scope/window, secret */
	struct mtable	mints;		/* token source, "ok" or "failed" */
	struct mhist	handshake;	/* accept to verdict */
	struct mhist	decision;	/* first bytes complete to verdict */
};

/* The histograms' upper bucket bounds, in microseconds (+Inf past them). */
extern const uint64_t mhist_bound_us[METRICS_BUCKETS];

void	mtable_add(struct mtable *t, const char *a, const char *b);
void	mhist_observe(struct mhist *h, uint64_t us);

#endif
