/*
 * trail.h: a sandbox's records in audit files, one at a time, for the
 * offline commands that learn from them (policy replay, policy suggest).
 */
#ifndef SLUICE_TRAIL_H
#define SLUICE_TRAIL_H

#include <jansson.h>

struct cmd;

#define TRAIL_FILES_MAX	64
/* What both commands take, for their option tables. */
#define TRAIL_OPTIONS \
	{ "audit", required_argument, NULL, 'a' }, \
	{ "sandbox", required_argument, NULL, 's' }, \
	{ "since", required_argument, NULL, 'S' }

struct trail_args {
	const char	*files[TRAIL_FILES_MAX];	/* oldest first */
	size_t		 nfiles;
	const char	*sandbox, *since;
};

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
/*
 * Option ch of TRAIL_OPTIONS with its argument: CMD_GO when taken, 1 when
 * ch is none of them, else a usage error's exit status.
 */
int	trail_arg(const struct cmd *c, struct trail_args *a, int ch,
	    const char *arg);
/* After the options: CMD_GO, or a usage error (no --audit, no --sandbox). */
int	trail_args_done(const struct cmd *c, const struct trail_args *a);
/* trail_walk of every file, oldest first. */
int	trail_walk_all(const struct cmd *c, const struct trail_args *a,
	    trail_fn *fn, void *arg);

#endif
