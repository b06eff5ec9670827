/*
 * spend.h: what each credential has spent of its budgets (conf/budget.h),
 * shared by every worker: one table of rate cells under one mutex, so
 * that one request's budgets, its sandbox's and the gateway's for each
 * secret it gets, are taken all together or not at all.
 *
 * A cell is GCRA (the generic cell rate algorithm): for a budget of N per
 * window W, each request moves the cell's theoretical arrival time (tat)
 * on by W / N, and a request is allowed while that stays within W of
 * now.  N requests may come at once; then one each W / N.  A cell whose
 * tat is in the past holds nothing and may be forgotten.
 */
#ifndef SLUICE_SPEND_H
#define SLUICE_SPEND_H

#include <stddef.h>
#include <stdint.h>

#define SPEND_MAX_CELLS	65536	/* cells the table keeps at most */
#define SPEND_MAX_TAKE	16	/* budgets one take may hold */

struct spend;

enum spend_window { SPEND_MINUTE, SPEND_DAY };

/* One budget a request would spend: whose, which secret, which window. */
struct spend_item {
	const char	*sandbox;	/* NULL: the gateway's (all sandboxes) */
	const char	*secret;
	enum spend_window window;
	unsigned	 limit;		/* N per window, >= 1 */
};

struct spend	*spend_new(void);
void	spend_free(struct spend *s);		/* accepts NULL */

/*
 * Spends one request of each of items[0..n) at now_ms, or none: returns
 * -1 and, when one is used up, *over (its index) and *retry_ms (how long
 * until it allows one more); 0 when all were taken.  n over
 * SPEND_MAX_TAKE, or a table too full to hold a new cell, refuses with
 * *over = n and *retry_ms = 0 (fail closed).
 */
int	spend_take(struct spend *s, const struct spend_item *items, size_t n,
	    uint64_t now_ms, size_t *over, uint64_t *retry_ms);

/* How much of it is spent at now_ms: 0 to limit (a fresh cell: 0). */
unsigned spend_used(struct spend *s, const struct spend_item *it,
	    uint64_t now_ms);

#endif
