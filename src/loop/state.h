/* state.h: the immutable snapshot of policies and sandboxes the data path reads. */
#ifndef SLUICE_STATE_H
#define SLUICE_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include "util/addr.h"
#include "util/err.h"
#include "parse/dnsmsg.h"
#include "loop/recent.h"

struct config;
struct policy;
struct cidr_tree;
struct secret_set;
struct idkeys;

/*
 * What a sandbox keeps across snapshots: its live counters and its CA.  A
 * new snapshot takes over the one of the sandbox with the same id; a
 * sandbox deleted and registered again gets a fresh one.
 */
struct sb_counter {
	atomic_uint	refs;
	/*
	 * This registration among every one of this process: a sandbox
	 * deleted and registered again under its id is another.
	 */
	uint64_t	serial;
	atomic_uint	conns;		/* open now, against limits.connections */
	atomic_ullong	conns_total;	/* decided connections */
	atomic_ullong	denied_total;	/* of which denied */
	/* DNS: the query rate limit and audit throttles, across workers */
	pthread_mutex_t	dns_mtx;
	struct ratelimit dns_rl;
	int		dns_rl_init;
	unsigned	refused;	/* refusals not yet audited */
	uint64_t	refused_audit_ms;
	uint64_t	audit_sec;
	unsigned	audit_n;
	/* The per-sandbox CA (ca.h); NULL for unregistered sources and once wiped. */
	pthread_mutex_t	ca_mtx;
	struct ca	*ca;
	/* Interception: leaves and ticket keys (tlsterm.h), made on first use. */
	struct leafcache *leaves;
	struct recent	recent;		/* its last decisions, for dry runs */
};

struct sandbox {
	char		*id;		/* NULL for the default sandbox */
	char		*team, *project;	/* may be NULL */
	const struct policy *policy;	/* in force; held by the snapshot */
	char		*policy_name;	/* the named policy it follows, or NULL */
	struct policy	*inline_policy;	/* its own policy (a reference), or NULL */
	struct sl_addr	*sources;	/* canonical prefixes */
	unsigned	*plens;
	size_t		 nsources;
	int		 from_config;	/* declared in sluiced.yaml */
	time_t		 created;
	time_t		 observe_until;	/* observe mode until then; 0: enforce */
	struct sb_counter *counter;	/* shared, refcounted */
};

/*
 * Whether sb is in observe mode at now: policy denials of the default
 * kind are recorded as would_deny and let through.  Its policy's
 * "observe: never" ends it.
 */
int	sandbox_observing(const struct sandbox *sb, time_t now);

/*
 * A snapshot never changes once built.  Workers hold a reference to the one
 * in force and swap it when the main thread posts a new one; a connection
 * holds a reference while it decides, so no snapshot is freed under it.
 * Policies are shared between snapshots by reference, so a connection
 * whose policy did not change carries over to the next snapshot as it is.
 */
struct state {
	atomic_uint	 refs;
	uint64_t	 generation;
	struct policy	**policies;	/* named policies, sorted by name */
	size_t		 npolicies;
	struct sandbox	*sandboxes;	/* sorted by id */
	size_t		 nsandboxes;
	struct sandbox	 unknown;	/* sources no sandbox owns: policy "default" */
	struct cidr_tree *sources;	/* id = index in sandboxes */
	struct sl_addr	*own;		/* the gateway's own addresses */
	size_t		 nown;
	struct secret_set *secrets;	/* (a reference) NULL: none */
	struct idkeys	*idkeys;	/* (a reference) NULL: no signing_key */
};

/*
 * Builds a snapshot from the config and the policy directory.  Revisions
 * carry over from prev (may be NULL) for unchanged policies and are bumped
 * for changed ones; counters carry over by sandbox id, and so do the
 * sandboxes prev got through the control API.  Any error (a policy that
 * does not load, two files with one name, a sandbox naming an unknown
 * policy) is added to errs and fails the whole build: SL_ERR_INVALID.
 */
int	state_build(const struct config *cfg, const struct state *prev,
	    uint64_t generation, struct state **out, struct errlist *errs);
/* Whether policy_dir's file of this name is read: *.yaml, *.yml, no dot. */
int	state_policy_file(const char *name);

/*
 * Editing: state_clone copies prev (sharing its policies, counters, secret
 * set and own addresses' list), the edits below change the copy, and state_seal makes
 * it usable (resolves policy names, sorts, builds the source tree).  Only
 * sealed snapshots are posted to workers.  Every edit leaves the copy
 * unchanged on error.
 */
int	state_clone(const struct state *prev, uint64_t generation,
	    struct state **out);
/* Adds or replaces the named policy p (takes the reference); revision from prev. */
int	state_put_policy(struct state *st, struct policy *p,
	    const struct state *prev);

struct sandbox_spec {
	const char	*id, *team, *project;	/* team, project may be NULL */
	const struct sl_addr *sources;
	const unsigned	*plens;
	size_t		 nsources;
	const char	*policy_name;	/* or */
	struct policy	*inline_policy;	/* borrowed: the edit takes its own ref */
	int		 from_config;
	time_t		 created;	/* a new sandbox's; 0: now */
	time_t		 observe_until;	/* 0: enforce */
};
/*
 * Adds a sandbox, or replaces the one with that id (keeping its counter,
 * CA and creation time).  counter: for a new sandbox, the one to use (the
 * edit takes a reference), or NULL for a fresh one.
 */
int	state_put_sandbox(struct state *st, const struct sandbox_spec *spec,
	    struct sb_counter *counter);
/* SL_ERR_NOT_FOUND when there is no such sandbox. */
int	state_remove_sandbox(struct state *st, const char *id);
/*
 * Resolves each sandbox's policy (an unknown name is added to errs:
 * SL_ERR_INVALID), sorts and indexes.  The inline policies' revisions are
 * assigned from prev here.
 */
int	state_seal(struct state *st, const struct state *prev,
	    struct errlist *errs);

/*
 * Whether set (may be NULL) suits every policy of st, inline ones too: a
 * rule that would render a pem or json secret into a header template, or
 * present as a client certificate a secret that is not a key with its
 * certificate, is an error in errs (SL_ERR_INVALID).  state_seal checks
 * st->secrets so.
 */
int	state_check_secrets(const struct state *st,
	    const struct secret_set *set, struct errlist *errs);

struct state *state_ref(struct state *st);
void	state_unref(struct state *st);		/* accepts NULL */

struct sb_counter *sb_counter_new(void);
struct sb_counter *sb_counter_ref(struct sb_counter *c);
void	sb_counter_unref(struct sb_counter *c);	/* accepts NULL */

/* The sandbox owning src (canonical), or &st->unknown. */
const struct sandbox *state_sandbox_for(const struct state *st,
	    const struct sl_addr *src);
/* The sandbox with that id (sealed snapshots), or NULL. */
const struct sandbox *state_sandbox(const struct state *st, const char *id);
const struct policy *state_policy(const struct state *st, const char *name);
int	state_is_own_addr(const struct state *st, const struct sl_addr *a);
/* How many of st's sandboxes observe now. */
size_t	state_observing(const struct state *st);

struct ca;
/*
 * Mints a sandbox's CA (ca.h) as the config asks: validity
 * ca.validity_days, and with ca.name_constraints the intercepted hosts of
 * policy p (none: the reserved name "invalid", so it certifies nothing).
 */
int	sandbox_mint_ca(const struct config *cfg, const char *id,
	    const struct policy *p, struct ca **out);
/* Gives every sandbox of st that has no CA one (the config's, at start). */
int	state_mint_static_cas(const struct config *cfg, struct state *st);

#endif
