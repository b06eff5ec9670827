/*
 * replay.h: one audit record judged again under a candidate policy, by
 * the daemon's own decision code (conf/policy.h), for sluicectl policy
 * replay and the control API's dry runs.  What the record says was decided ("now") against what the
 * candidate would decide, for connections (name or address), DNS names
 * and intercepted requests.  A record that is not a policy decision (a
 * limit, a malformed request, an upstream failure) is skipped.
 */
#ifndef SLUICE_REPLAY_H
#define SLUICE_REPLAY_H

#include <stddef.h>

#include <jansson.h>

struct policy;

struct rp_verdict {
	const char	*verdict;	/* pass intercept inject forward deny
					 * answer nxdomain not-intercepted */
	const char	*reason;	/* static or the record's */
	char		 rule[96];	/* "" when none */
};

enum rp_change {
	RP_SKIPPED,		/* not a policy decision */
	RP_SAME,
	RP_NEWLY_DENIED,
	RP_NEWLY_ALLOWED,
	RP_CHANGED,		/* allowed both ways, by another rule or means */
};

struct rp_result {
	enum rp_change	 change;
	const char	*kind;		/* conn, dns, request */
	char		 what[320];	/* name:port, addr:port, name, METHOD host/path */
	struct rp_verdict now, cand;
	int		 approximate;	/* rules on query or headers the record
					 * does not keep */
};

/* Judges rec (one parsed audit record) under cand. */
void	replay_record(const struct policy *cand, const json_t *rec,
	    struct rp_result *out);
const char *rp_change_name(enum rp_change c);

/*
 * Results grouped by what changes (replay_tally.c): add each (copied; 0,
 * or -1 out of memory), then the summary as JSON: {sandbox, judged,
 * unchanged, newly_denied, newly_allowed, changed, skipped, changes:
 * [{change, kind, what, now, candidate, count, approximate}]}, newly
 * denied first, most seen first (a new reference, NULL out of memory).
 */
struct replay_tally;
struct replay_tally *replay_tally_new(void);
void	replay_tally_free(struct replay_tally *t);
int	replay_tally_add(struct replay_tally *t, const struct rp_result *r);
json_t	*replay_tally_json(struct replay_tally *t, const char *sandbox);

#endif
