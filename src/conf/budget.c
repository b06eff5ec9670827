/* budget.c: budgets per credential, from YAML (budget.h). */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/names.h"
#include "util/yamltree.h"
#include "conf/budget.h"

/* One item: {secret, requests_per_minute, requests_per_day}. */
static void
parse_item(struct ycheck *x, const struct ynode *m, const char *path,
    struct budget_rule *b)
{
	static const char *const keys[] = { "secret", "requests_per_minute",
	    "requests_per_day", NULL };
	const struct ynode *n;
	char e[80];

	b->line = m->line;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'%s' items must be maps", path);
		return;
	}
	ycheck_keys(x, m, path, keys);
	if ((n = ynode_get(m, "secret")) == NULL)
		ycheck_err(x, m->line, m->col, "'%s' item needs 'secret'", path);
	else if (ycheck_string(x, n, "secret")) {
		if (!secret_name_ok(n->scalar, n->scalar_len))
			ycheck_err(x, n->line, n->col, "'%s': '%s' is not a "
			    "secret name (1 to 64 of [A-Za-z0-9._-])", path,
			    yesc(n->scalar, e, sizeof(e)));
		else if ((b->secret = strdup(n->scalar)) == NULL)
			x->nomem = 1;
	}
	ycheck_uint(x, m, path, "requests_per_minute", 1, BUDGET_MAX_RATE,
	    &b->per_minute);
	ycheck_uint(x, m, path, "requests_per_day", 1, BUDGET_MAX_RATE,
	    &b->per_day);
	if (ynode_get(m, "requests_per_minute") == NULL &&
	    ynode_get(m, "requests_per_day") == NULL)
		ycheck_err(x, m->line, m->col, "'%s' item needs "
		    "'requests_per_minute' or 'requests_per_day'", path);
}

void
budget_list_parse(struct ycheck *x, const struct ynode *seq, const char *path,
    struct budget_list *out)
{
	size_t i, j;

	if (ycheck_seq(x, seq, path, BUDGET_MAX_RULES, "budgets") == 0)
		return;
	if ((out->v = calloc(seq->n, sizeof(*out->v))) == NULL) {
		x->nomem = 1;
		return;
	}
	out->n = seq->n;
	for (i = 0; i < seq->n; i++) {
		parse_item(x, seq->items[i], path, &out->v[i]);
		for (j = 0; out->v[i].secret != NULL && j < i; j++)
			if (out->v[j].secret != NULL &&
			    strcmp(out->v[j].secret, out->v[i].secret) == 0)
				ycheck_err(x, seq->items[i]->line,
				    seq->items[i]->col, "'%s': the secret '%s' "
				    "has two budgets", path, out->v[i].secret);
	}
}

void
budget_list_free(struct budget_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i].secret);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

const struct budget_rule *
budget_find(const struct budget_list *l, const char *secret)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->v[i].secret != NULL && strcmp(l->v[i].secret, secret) == 0)
			return &l->v[i];
	return NULL;
}
