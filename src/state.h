/* state.h: the immutable snapshot of policies and sandboxes the data path reads. */
#ifndef SLUICE_STATE_H
#define SLUICE_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "addr.h"
#include "dnsmsg.h"
#include "err.h"

struct config;
struct policy;
struct cidr_tree;

/*
 * Per-sandbox live counters.  They outlive any one snapshot: a new snapshot
 * takes over the counters of the sandbox with the same id.
 */
struct sb_counter {
	atomic_uint	refs;
	atomic_uint	conns;
	/* DNS: the query rate limit and audit throttles, across workers */
	pthread_mutex_t	dns_mtx;
	struct ratelimit dns_rl;
	int		dns_rl_init;
	unsigned	refused;	/* refusals not yet audited */
	uint64_t	refused_audit_ms;
	uint64_t	audit_sec;
	unsigned	audit_n;
};

struct sandbox {
	char		*id;		/* NULL for the default sandbox */
	char		*team, *project;
	const struct policy *policy;	/* owned by the snapshot */
	struct sb_counter *counter;	/* shared, refcounted */
};

/*
 * A snapshot never changes once built.  Workers hold a reference to the one
 * in force and swap it when the main thread posts a new one; a connection
 * holds a reference while it decides, so no snapshot is freed under it.
 */
struct state {
	atomic_uint	 refs;
	uint64_t	 generation;
	struct policy	**policies;	/* sorted by name */
	size_t		 npolicies;
	struct sandbox	*sandboxes;
	size_t		 nsandboxes;
	struct sandbox	 unknown;	/* sources no sandbox owns: policy "default" */
	struct cidr_tree *sources;	/* id = index in sandboxes */
	struct sl_addr	*own;		/* the gateway's own addresses */
	size_t		 nown;
};

/*
 * Builds a snapshot from the config and the policy directory.  Revisions
 * carry over from prev (may be NULL) for unchanged policies and are bumped
 * for changed ones; counters carry over by sandbox id.  Any error (a policy
 * that does not load, two files with one name, a sandbox naming an unknown
 * policy) is added to errs and fails the whole build: SL_ERR_INVALID.
 */
int	state_build(const struct config *cfg, const struct state *prev,
	    uint64_t generation, struct state **out, struct errlist *errs);

struct state *state_ref(struct state *st);
void	state_unref(struct state *st);		/* accepts NULL */

void	sb_counter_unref(struct sb_counter *c);	/* accepts NULL */

/* The sandbox owning src (canonical), or &st->unknown. */
const struct sandbox *state_sandbox_for(const struct state *st,
	    const struct sl_addr *src);
const struct policy *state_policy(const struct state *st, const char *name);
int	state_is_own_addr(const struct state *st, const struct sl_addr *a);

#endif
