/* out.h: what sluicectl prints: aligned tables, key: value lines, JSON. */
#ifndef SLUICECTL_OUT_H
#define SLUICECTL_OUT_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/*
 * A table is filled cell by cell, row after row, and printed with its
 * columns aligned and two spaces between them.  Every cell is copied with
 * control characters replaced by '?'; an empty or NULL cell prints as "-".
 * An allocation failure is remembered and reported by table_print, so
 * filling needs no checks.
 */
struct table {
	size_t		 ncols;
	char		**cells;	/* row-major */
	size_t		 n, cap;	/* cells */
	unsigned	 right;		/* bit i: column i is right-aligned */
	unsigned	 indent;	/* spaces before each row */
	int		 nomem;
};

void	table_init(struct table *t, size_t ncols);
void	table_add(struct table *t, const char *cell);
void	table_addf(struct table *t, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/*
 * Adds a JSON value as text: a string as it is, a number in decimal,
 * true/false, the items of an array joined by sep; absent or null as "-".
 */
void	table_addj(struct table *t, const json_t *v, const char *sep);
/* Returns 0, or SL_ERR_NOMEM when a cell could not be kept. */
int	table_print(const struct table *t, FILE *f);
void	table_free(struct table *t);
struct cmd;
/*
 * Prints t on stdout and frees it.  Returns EXIT_OK, or EXIT_FAIL when a
 * cell could not be kept (said on stderr as c's error).
 */
int	table_show(struct table *t, const struct cmd *c);

/* Writes s with control characters replaced by '?'. */
void	fput_safe(const char *s, FILE *f);

/* v on stdout, indented by 2, and a newline.  Returns 0 or -1. */
int	print_json(const json_t *v);

/*
 * With --json: prints the daemon's answer as it is, frees it, sets *rc
 * and returns 1; else 0, and the caller formats ans.
 */
struct ctl;
int	json_answered(const struct ctl *ctl, json_t *ans, int *rc);

/* The number of a JSON integer (or integral real) member; 0 if none. */
long long	jnum(const json_t *o, const char *key);

#endif
