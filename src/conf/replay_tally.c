/*
 * replay_tally.c: the results of a replay grouped by what changes, for
 * sluicectl policy replay and the control API's dry runs (replay.h).
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/replay.h"

struct replay_tally {
	json_t		*groups;	/* key -> index in list */
	json_t		*list;		/* [{change, kind, what, now, candidate,
					 *   count, approximate}] */
	unsigned long long judged, skipped;
	unsigned long long nchange[RP_CHANGED + 1];
};

struct replay_tally *
replay_tally_new(void)
{
	struct replay_tally *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	if ((t->groups = json_object()) == NULL ||
	    (t->list = json_array()) == NULL) {
		replay_tally_free(t);
		return NULL;
	}
	return t;
}

void
replay_tally_free(struct replay_tally *t)
{
	if (t == NULL)
		return;
	json_decref(t->groups);
	json_decref(t->list);
	free(t);
}

static json_t *
verdict_json(const struct rp_verdict *v)
{
	return json_pack("{s:s, s:s, s:s?}", "verdict", v->verdict, "reason",
	    v->reason, "rule", v->rule[0] ? v->rule : NULL);
}

int
replay_tally_add(struct replay_tally *t, const struct rp_result *r)
{
	char key[1024];
	json_t *g, *idx;

	if (r->change == RP_SKIPPED) {
		t->skipped++;
		return 0;
	}
	t->judged++;
	t->nchange[r->change]++;
	if (r->change == RP_SAME)
		return 0;
	snprintf(key, sizeof(key), "%d|%s|%s|%s|%s|%s|%s|%s|%s", r->change,
	    r->kind, r->what, r->now.verdict, r->now.reason, r->now.rule,
	    r->cand.verdict, r->cand.reason, r->cand.rule);
	if ((idx = json_object_get(t->groups, key)) != NULL) {
		g = json_array_get(t->list, (size_t)json_integer_value(idx));
		return json_object_set_new(g, "count", json_integer(
		    json_integer_value(json_object_get(g, "count")) + 1));
	}
	g = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:b}", "change",
	    rp_change_name(r->change), "kind", r->kind, "what", r->what,
	    "now", verdict_json(&r->now), "candidate", verdict_json(&r->cand),
	    "count", (json_int_t)1, "approximate", r->approximate);
	if (g == NULL || json_object_set_new(t->groups, key,
	    json_integer((json_int_t)json_array_size(t->list))) != 0 ||
	    json_array_append_new(t->list, g) != 0)
		return -1;
	return 0;
}

/* Newly denied first, then newly allowed, then changed; most seen first. */
static int
group_cmp(const void *a, const void *b)
{
	static const char *const order[] = { "newly-denied", "newly-allowed",
		"changed" };
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *cx = json_string_value(json_object_get(x, "change"));
	const char *cy = json_string_value(json_object_get(y, "change"));
	json_int_t nx, ny;
	int ix = 3, iy = 3, i;

	for (i = 0; i < 3; i++) {
		if (strcmp(cx, order[i]) == 0)
			ix = i;
		if (strcmp(cy, order[i]) == 0)
			iy = i;
	}
	if (ix != iy)
		return ix - iy;
	nx = json_integer_value(json_object_get(x, "count"));
	ny = json_integer_value(json_object_get(y, "count"));
	if (nx != ny)
		return nx > ny ? -1 : 1;
	return strcmp(json_string_value(json_object_get(x, "what")),
	    json_string_value(json_object_get(y, "what")));
}

json_t *
replay_tally_json(struct replay_tally *t, const char *sandbox)
{
	size_t n = json_array_size(t->list), i;
	json_t **v, *sorted, *o;

	if ((sorted = json_array()) == NULL)
		return NULL;
	if (n > 0 && (v = calloc(n, sizeof(*v))) != NULL) {
		for (i = 0; i < n; i++)
			v[i] = json_array_get(t->list, i);
		qsort(v, n, sizeof(*v), group_cmp);
		for (i = 0; i < n; i++)
			json_array_append(sorted, v[i]);
		free(v);
	} else if (n > 0) {
		json_decref(sorted);
		return NULL;
	}
	o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
	    "sandbox", sandbox, "judged", (json_int_t)t->judged,
	    "unchanged", (json_int_t)t->nchange[RP_SAME],
	    "newly_denied", (json_int_t)t->nchange[RP_NEWLY_DENIED],
	    "newly_allowed", (json_int_t)t->nchange[RP_NEWLY_ALLOWED],
	    "changed", (json_int_t)t->nchange[RP_CHANGED],
	    "skipped", (json_int_t)t->skipped, "changes", sorted);
	return o;
}
