/* prom.h: sums over the daemon's metrics (Prometheus text format 0.0.4). */
#ifndef SLUICECTL_PROM_H
#define SLUICECTL_PROM_H

#include <stddef.h>

struct prom_sum {
	char	*key;		/* a label's value */
	double	 value;
};

struct prom_sums {
	struct prom_sum	*v;
	size_t		 n, cap;
};

#define PROM_SUMS_INIT	{ NULL, 0, 0 }

/*
 * For every sample of the metric name in text (len bytes) whose labels
 * include where=is (where NULL: every sample), adds its value to the sum
 * kept under its label by ("" when it has none).  Comments and other
 * metrics are skipped.  Returns 0, SL_ERR_NOMEM, or SL_ERR_INVALID with
 * *bad_line (1-based) when a line is not in the text format.
 */
int	prom_sum_by(const char *text, size_t len, const char *name,
	    const char *by, const char *where, const char *is,
	    struct prom_sums *sums, unsigned *bad_line);
/* Adds each of keys (NULL-terminated) with 0 where it is missing. */
int	prom_sums_ensure(struct prom_sums *sums, const char *const *keys);
/* Orders the sums: largest first, then by key. */
void	prom_sums_sort(struct prom_sums *sums);
void	prom_sums_free(struct prom_sums *sums);

#endif
