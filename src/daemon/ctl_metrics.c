/*
 * ctl_metrics.c: the Prometheus page (text format 0.0.4) of GET /metrics
 * and the metrics listener: every worker's tables summed, the snapshot in
 * force, the control API's own counters.  Main thread.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "util/metrics.h"
#include "conf/policy.h"
#include "keys/secrets.h"
#include "audit/audit.h"
#include "loop/state.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/worker.h"

#define METRICS_SANDBOXES	256	/* sandboxes with their own labels */

struct merged {
	const char	*a, *b;
	unsigned long long n;
};

struct mset {
	struct merged	*v;
	size_t		 n, cap;
};

static int
mset_add(struct mset *s, const char *a, const char *b, unsigned long long n)
{
	struct merged *nv;
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].a, a) == 0 && strcmp(s->v[i].b, b) == 0) {
			s->v[i].n += n;
			return 0;
		}
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		if ((nv = realloc(s->v, s->cap * sizeof(*nv))) == NULL)
			return -1;
		s->v = nv;
	}
	s->v[s->n].a = a;
	s->v[s->n].b = b;
	s->v[s->n++].n = n;
	return 0;
}

/* Label values: backslash, double quote and newline escaped. */
static void
put_label(struct evbuffer *out, const char *name, const char *v)
{
	const char *p;

	evbuffer_add_printf(out, "%s=\"", name);
	for (p = v; *p != '\0'; p++) {
		if (*p == '\\' || *p == '"')
			evbuffer_add_printf(out, "\\%c", *p);
		else if (*p == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, p, 1);
	}
	evbuffer_add(out, "\"", 1);
}

static void
render_table(struct daemon *d, struct evbuffer *out, size_t off,
    const char *metric, const char *help, const char *la, const char *lb)
{
	struct mset s = { NULL, 0, 0 };
	const struct mtable *t;
	size_t i, k;
	unsigned n;

	for (i = 0; i < d->nworkers; i++) {
		t = (const struct mtable *)((const char *)&d->workers[i].l.metrics +
		    off);
		n = atomic_load_explicit(&t->n, memory_order_acquire);
		for (k = 0; k < n; k++)
			mset_add(&s, t->e[k].a, t->e[k].b, atomic_load_explicit(
			    &t->e[k].n, memory_order_relaxed));
	}
	evbuffer_add_printf(out, "# HELP sluice_%s %s\n# TYPE sluice_%s counter\n",
	    metric, help, metric);
	for (i = 0; i < s.n; i++) {
		evbuffer_add_printf(out, "sluice_%s{", metric);
		put_label(out, la, s.v[i].a);
		if (lb != NULL) {
			evbuffer_add(out, ",", 1);
			put_label(out, lb, s.v[i].b);
		}
		evbuffer_add_printf(out, "} %llu\n", s.v[i].n);
	}
	free(s.v);
}

static void
render_hist(struct daemon *d, struct evbuffer *out, size_t off,
    const char *metric, const char *help)
{
	unsigned long long b[METRICS_BUCKETS + 1] = { 0 }, sum = 0, cum = 0;
	const struct mhist *h;
	size_t i, k;

	for (i = 0; i < d->nworkers; i++) {
		h = (const struct mhist *)((const char *)&d->workers[i].l.metrics +
		    off);
		for (k = 0; k <= METRICS_BUCKETS; k++)
			b[k] += atomic_load_explicit(&h->b[k],
			    memory_order_relaxed);
		sum += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
	}
	evbuffer_add_printf(out, "# HELP sluice_%s %s\n"
	    "# TYPE sluice_%s histogram\n", metric, help, metric);
	for (k = 0; k < METRICS_BUCKETS; k++) {
		cum += b[k];
		evbuffer_add_printf(out, "sluice_%s_bucket{le=\"%g\"} %llu\n",
		    metric, (double)mhist_bound_us[k] / 1e6, cum);
	}
	cum += b[METRICS_BUCKETS];
	evbuffer_add_printf(out, "sluice_%s_bucket{le=\"+Inf\"} %llu\n"
	    "sluice_%s_sum %.6f\nsluice_%s_count %llu\n", metric, cum,
	    metric, (double)sum / 1e6, metric, cum);
}

static void
gauge(struct evbuffer *out, const char *metric, const char *help,
    unsigned long long v)
{
	evbuffer_add_printf(out, "# HELP sluice_%s %s\n# TYPE sluice_%s gauge\n"
	    "sluice_%s %llu\n", metric, help, metric, metric, v);
}

static void
render_sandboxes(const struct state *st, struct evbuffer *out)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
		{ "sandbox_connections_open", "gauge", "open connections",
		    offsetof(struct sb_counter, conns) },
		{ "sandbox_connections_total", "counter", "decided connections",
		    offsetof(struct sb_counter, conns_total) },
		{ "sandbox_denied_total", "counter", "denied connections",
		    offsetof(struct sb_counter, denied_total) },
	};
	const struct sb_counter *c;
	unsigned long long v;
	size_t i, k, n = st->nsandboxes < METRICS_SANDBOXES ?
	    st->nsandboxes : METRICS_SANDBOXES;

	for (k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		evbuffer_add_printf(out, "# HELP sluice_%s %s, per sandbox (the "
		    "first %d by id)\n# TYPE sluice_%s %s\n", m[k].name,
		    m[k].help, METRICS_SANDBOXES, m[k].name, m[k].type);
		for (i = 0; i < n; i++) {
			c = st->sandboxes[i].counter;
			if (k == 0)
				v = atomic_load(&c->conns);
			else
				v = atomic_load((const atomic_ullong *)
				    ((const char *)c + m[k].off));
			evbuffer_add_printf(out, "sluice_%s{", m[k].name);
			put_label(out, "sandbox", st->sandboxes[i].id);
			evbuffer_add_printf(out, "} %llu\n", v);
		}
	}
}

unsigned long long
ctl_open_conns(const struct state *st)
{
	unsigned long long n = atomic_load(&st->unknown.counter->conns);
	size_t i;

	for (i = 0; i < st->nsandboxes; i++)
		n += atomic_load(&st->sandboxes[i].counter->conns);
	return n;
}

/* Each secret's version in force: a rotation shows as a step. */
static void
render_secrets(const struct state *st, struct evbuffer *out)
{
	const struct secret_set *set = st->secrets;
	size_t i;

	evbuffer_add_printf(out, "# HELP sluice_secret_version version of each "
	    "secret in force\n# TYPE sluice_secret_version gauge\n");
	for (i = 0; set != NULL && i < set->n; i++) {
		evbuffer_add_printf(out, "sluice_secret_version{");
		put_label(out, "secret", set->v[i]->name);
		evbuffer_add_printf(out, "} %llu\n",
		    (unsigned long long)set->v[i]->version);
	}
}

/* The control API's own counters. */
static void
render_control(const struct ctl *ctl, struct evbuffer *out)
{
	unsigned long long n;
	int s;

	evbuffer_add_printf(out, "# HELP sluice_control_requests_total control "
	    "API requests by status\n# TYPE sluice_control_requests_total "
	    "counter\n");
	for (s = 100; ctl != NULL && s < 600; s++)
		if ((n = ctl_requests_by_status(ctl, s)) != 0)
			evbuffer_add_printf(out, "sluice_control_requests_total"
			    "{status=\"%d\"} %llu\n", s, n);
}

/* What an operator alerts on: the process, reloads, the audit writer. */
static void
render_daemon(struct daemon *d, struct evbuffer *out)
{
	struct audit_stats as;

	gauge(out, "uptime_seconds", "seconds since start",
	    (unsigned long long)(time(NULL) - d->started));
	evbuffer_add_printf(out, "# HELP sluice_build_info the running build\n"
	    "# TYPE sluice_build_info gauge\nsluice_build_info{version=\"%s\"}"
	    " 1\n", PACKAGE_VERSION);
	evbuffer_add_printf(out, "# HELP process_start_time_seconds start "
	    "time of the process since the epoch\n# TYPE "
	    "process_start_time_seconds gauge\nprocess_start_time_seconds "
	    "%lld\n", (long long)d->started);
	evbuffer_add_printf(out, "# HELP sluice_reloads_total policy reloads "
	    "(SIGHUP, /v1/reload) by result\n# TYPE sluice_reloads_total "
	    "counter\nsluice_reloads_total{result=\"ok\"} %llu\n"
	    "sluice_reloads_total{result=\"failed\"} %llu\n", d->reloads_ok,
	    d->reloads_failed);
	evbuffer_add_printf(out, "# HELP sluice_upgrades_failed_total upgrades "
	    "(SIGUSR2, /v1/upgrade) whose new process did not serve\n# TYPE "
	    "sluice_upgrades_failed_total counter\n"
	    "sluice_upgrades_failed_total %llu\n", d->upgrades_failed);
	evbuffer_add_printf(out, "# HELP sluice_worker_restarts_total worker "
	    "processes the monitor started after the first (each one died)\n"
	    "# TYPE sluice_worker_restarts_total counter\n"
	    "sluice_worker_restarts_total %u\n", d->restarts);
	audit_get_stats(d->audit, &as);
	gauge(out, "audit_queue_depth", "audit records queued for the writer",
	    as.queued);
	evbuffer_add_printf(out, "# HELP sluice_audit_records_total audit "
	    "records written\n# TYPE sluice_audit_records_total counter\n"
	    "sluice_audit_records_total %llu\n", (unsigned long long)as.written);
	evbuffer_add_printf(out, "# HELP sluice_audit_errors_total writes or "
	    "syncs of the audit file that failed (each an outage)\n# TYPE "
	    "sluice_audit_errors_total counter\nsluice_audit_errors_total "
	    "%llu\n", (unsigned long long)as.errors);
	gauge(out, "audit_failing", "1 while the audit file cannot be written "
	    "and what needs a record is refused", (unsigned long long)as.broken);
	evbuffer_add_printf(out, "# HELP sluice_audit_refused_total records "
	    "refused or dropped for a full queue, by kind\n# TYPE "
	    "sluice_audit_refused_total counter\n"
	    "sluice_audit_refused_total{kind=\"refused\"} %llu\n"
	    "sluice_audit_refused_total{kind=\"dropped\"} %llu\n",
	    (unsigned long long)as.refused, (unsigned long long)as.dropped);
	gauge(out, "audit_last_sync_timestamp_seconds", "when the audit file "
	    "was last synced to disk (0: not yet)",
	    (unsigned long long)(as.last_sync > 0 ? as.last_sync : 0));
}

int
ctl_metrics_render(struct daemon *d, struct evbuffer *out)
{
	const struct state *st = d->state;
	size_t i;

	render_table(d, out, offsetof(struct wmetrics, conns),
	    "connections_total", "connections by action and reason",
	    "action", "reason");
	gauge(out, "connections_open", "connections open now",
	    ctl_open_conns(st));
	render_table(d, out, offsetof(struct wmetrics, requests),
	    "requests_total", "judged HTTP requests by rule and action",
	    "rule", "action");
	render_table(d, out, offsetof(struct wmetrics, dns),
	    "dns_queries_total", "DNS queries by verdict", "verdict", NULL);
	render_table(d, out, offsetof(struct wmetrics, injections),
	    "injections_total", "requests that got a secret, by secret",
	    "secret", NULL);
	render_table(d, out, offsetof(struct wmetrics, budget_refusals),
	    "budget_refusals_total", "requests refused for a used-up budget, "
	    "by budget (scope/window) and secret", "budget", "secret");
	render_table(d, out, offsetof(struct wmetrics, mints),
	    "token_mints_total", "tokens minted, by source and result",
	    "source", "result");
	render_table(d, out, offsetof(struct wmetrics, redactions),
	    "redactions_total", "secret values taken out of responses, by "
	    "rule and where", "rule", "where");
	render_secrets(st, out);
	render_hist(d, out, offsetof(struct wmetrics, handshake),
	    "handshake_seconds", "accept until the connection's verdict");
	render_hist(d, out, offsetof(struct wmetrics, decision),
	    "decision_seconds", "first bytes complete until the verdict");
	evbuffer_add_printf(out, "# HELP sluice_policy_revision revision of "
	    "each named policy\n# TYPE sluice_policy_revision gauge\n");
	for (i = 0; i < st->npolicies; i++) {
		evbuffer_add_printf(out, "sluice_policy_revision{");
		put_label(out, "policy", st->policies[i]->name);
		evbuffer_add_printf(out, "} %llu\n",
		    (unsigned long long)st->policies[i]->revision);
	}
	gauge(out, "generation", "snapshot generation", st->generation);
	gauge(out, "sandboxes", "registered sandboxes", st->nsandboxes);
	gauge(out, "sandboxes_observing", "sandboxes in observe mode (their "
	    "policy's denials are let through and recorded as would_deny)",
	    state_observing(st));
	render_sandboxes(st, out);
	render_control(d->ctl, out);
	render_daemon(d, out);
	return 0;
}
