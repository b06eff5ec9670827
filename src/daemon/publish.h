/* publish.h: putting a new snapshot in force (main thread). */
#ifndef SLUICE_PUBLISH_H
#define SLUICE_PUBLISH_H

#include <stdint.h>

struct daemon;
struct errlist;
struct secret_set;
struct state;

/*
 * Puts st (sealed, generation d->generation + 1; the reference is taken)
 * in force and hands it to every worker.  Returns its generation; it is
 * in force everywhere once d->applied reaches it.
 */
uint64_t publish_state(struct daemon *d, struct state *st);
/*
 * Re-reads policy_dir and secret_dir; on any policy error (added to errs,
 * which may be NULL: logged) the snapshot in force stays and
 * SL_ERR_INVALID is returned.  Secret files that are refused go to serrs
 * (may be NULL: logged); their versions in force stay, the rest applies.
 * Each named policy that changed gets a policy_change record naming cause
 * ("reload": the API, "sighup", "watch") and uid (< 0: none).
 */
int	publish_reload(struct daemon *d, const char *cause, long uid,
	    struct errlist *errs, struct errlist *serrs);
/* Puts set (the reference is taken) in force as a new snapshot. */
int	publish_secrets(struct daemon *d, struct secret_set *set,
	    uint64_t *gen);

#endif
