/*
 * budget.h: what one credential may spend, as a policy (per sandbox) and
 * sluiced.yaml (over all sandboxes) write it:
 *
 *   budgets:
 *     - {secret: NAME, requests_per_minute: N, requests_per_day: N}
 *
 * Either rate may be left out (no limit of that kind), not both.
 */
#ifndef SLUICE_BUDGET_H
#define SLUICE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

struct ycheck;
struct ynode;

#define BUDGET_MAX_RULES	64	/* budgets one list holds */
#define BUDGET_MAX_RATE		1000000000u

struct budget_rule {
	char		*secret;
	unsigned	 per_minute;	/* 0: no limit */
	unsigned	 per_day;	/* 0: no limit */
	unsigned	 line;
};

struct budget_list {
	struct budget_rule *v;
	size_t		 n;
};

/*
 * Parses the list at seq into out (empty before); problems are reported
 * through x ("PATH[i].key: ..."), and what parsed is kept so that every
 * error is found in one pass.
 */
void	budget_list_parse(struct ycheck *x, const struct ynode *seq,
	    const char *path, struct budget_list *out);
void	budget_list_free(struct budget_list *l);	/* the contents */
/* The budget of secret in l, or NULL. */
const struct budget_rule *budget_find(const struct budget_list *l,
	    const char *secret);

#endif
