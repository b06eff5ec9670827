/*
 * trail.h: a sandbox's records in audit files, one at a time, for the
 * offline commands that learn from them (policy replay, policy suggest).
 */
#ifndef SLUICE_TRAIL_H
#define SLUICE_TRAIL_H

#include <jansson.h>

struct cmd;

struct trail_count {
	unsigned long long other;	/* records of other sandboxes or older */
	unsigned long long bad;		/* lines that are no record */
};

/* fn gets each record; a nonzero return stops the walk and is returned. */
typedef int trail_fn(const json_t *rec, void *arg);

/*
 * Calls fn for each record of path whose "sandbox" is sandbox and whose
 * "ts" is not before since (NULL: any), in file order.  0, fn's nonzero
 * return, or -1 when the file cannot be read (said on stderr).
 */
int	trail_walk(const struct cmd *c, const char *path, const char *sandbox,
	    const char *since, trail_fn *fn, void *arg, struct trail_count *n);

#endif
