/* trail.c: a sandbox's records in audit files (trail.h). */
#include "autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluicectl/sluicectl.h"
#include "sluicectl/trail.h"

#define TRAIL_LINE_MAX	(1024 * 1024)	/* longer lines are no records */

int
trail_arg(const struct cmd *c, struct trail_args *a, int ch, const char *arg)
{
	switch (ch) {
	case 'a':
		if (a->nfiles == TRAIL_FILES_MAX)
			return cmd_usage_err(c, "at most %d --audit files",
			    TRAIL_FILES_MAX);
		a->files[a->nfiles++] = arg;
		return CMD_GO;
	case 's':
		a->sandbox = arg;
		return CMD_GO;
	case 'S':
		a->since = arg;
		return CMD_GO;
	}
	return 1;
}

int
trail_args_done(const struct cmd *c, const struct trail_args *a)
{
	if (a->nfiles == 0)
		return cmd_usage_err(c, "--audit FILE is required");
	if (a->sandbox == NULL || *a->sandbox == '\0')
		return cmd_usage_err(c, "--sandbox ID is required");
	return CMD_GO;
}

int
trail_walk_all(const struct cmd *c, const struct trail_args *a, trail_fn *fn,
    void *arg)
{
	struct trail_count n = { 0, 0 };
	size_t i;
	int r;

	for (i = 0; i < a->nfiles; i++)
		if ((r = trail_walk(c, a->files[i], a->sandbox, a->since, fn,
		    arg, &n)) != 0)
			return r;
	return 0;
}

int
trail_walk(const struct cmd *c, const char *path, const char *sandbox,
    const char *since, trail_fn *fn, void *arg, struct trail_count *n)
{
	const char *sb, *ts;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	json_t *rec;
	FILE *f;
	int rc = 0;

	if ((f = fopen(path, "r")) == NULL) {
		cmd_err(c, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
		if ((size_t)len > TRAIL_LINE_MAX || (rec = json_loadb(line,
		    (size_t)len, 0, NULL)) == NULL || !json_is_object(rec)) {
			if (len > 0)
				n->bad++;
			continue;
		}
		sb = json_string_value(json_object_get(rec, "sandbox"));
		ts = json_string_value(json_object_get(rec, "ts"));
		if (sb == NULL || strcmp(sb, sandbox) != 0 ||
		    (since != NULL && (ts == NULL || strcmp(ts, since) < 0)))
			n->other++;
		else
			rc = fn(rec, arg);
		json_decref(rec);
	}
	if (rc == 0 && ferror(f)) {
		cmd_err(c, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	free(line);
	fclose(f);
	return rc;
}
