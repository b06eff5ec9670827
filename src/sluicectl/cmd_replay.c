/*
 * cmd_replay.c: sluicectl policy replay CANDIDATE --audit FILE...
 * --sandbox ID [--since T]: a sandbox's recorded connections, DNS names
 * and intercepted requests judged again under a candidate policy, and
 * what would change, grouped, as a table or --json.  Offline.
 */
#include "autoconf.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "conf/policy.h"
#include "sluicectl/out.h"
#include "sluicectl/replay.h"
#include "sluicectl/sluicectl.h"
#include "sluicectl/trail.h"

#define REPLAY_FILES_MAX 64

struct tally {
	json_t		*groups;	/* key -> index in list */
	json_t		*list;		/* [{change, kind, what, now, candidate, count}] */
	unsigned long long judged, same, skipped;
	unsigned long long nchange[RP_CHANGED + 1];
};

static json_t *
verdict_json(const struct rp_verdict *v)
{
	return json_pack("{s:s, s:s, s:s?}", "verdict", v->verdict, "reason",
	    v->reason, "rule", v->rule[0] ? v->rule : NULL);
}

static int
tally_add(struct tally *t, const struct rp_result *r)
{
	char key[1024];
	json_t *g, *idx;

	t->judged++;
	t->nchange[r->change]++;
	if (r->change == RP_SAME) {
		t->same++;
		return 0;
	}
	snprintf(key, sizeof(key), "%d|%s|%s|%s|%s|%s|%s|%s|%s", r->change,
	    r->kind, r->what, r->now.verdict, r->now.reason, r->now.rule,
	    r->cand.verdict, r->cand.reason, r->cand.rule);
	if ((idx = json_object_get(t->groups, key)) != NULL) {
		g = json_array_get(t->list, (size_t)json_integer_value(idx));
		json_object_set_new(g, "count", json_integer(
		    json_integer_value(json_object_get(g, "count")) + 1));
		return 0;
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

struct replay_arg {
	const struct policy *cand;
	struct tally	*t;
};

static int
replay_one(const json_t *rec, void *arg)
{
	struct replay_arg *ra = arg;
	struct rp_result r;

	/* r's strings may point into rec: counted before it goes. */
	replay_record(ra->cand, rec, &r);
	if (r.change == RP_SKIPPED) {
		ra->t->skipped++;
		return 0;
	}
	return tally_add(ra->t, &r);
}

static const char *
verdict_text(const json_t *v, char *buf, size_t len)
{
	const char *rule = json_string_value(json_object_get(v, "rule"));

	snprintf(buf, len, "%s %s%s%s", json_string_value(json_object_get(v,
	    "verdict")), json_string_value(json_object_get(v, "reason")),
	    rule != NULL ? " " : "", rule != NULL ? rule : "");
	return buf;
}

static int
show(const struct ctl *ctl, const struct cmd *c, const char *sandbox,
    struct tally *t)
{
	char a[160], b[160];
	json_t *out, *g;
	struct table tab;
	size_t i;

	if (ctl->json) {
		out = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:O}",
		    "sandbox", sandbox, "judged", (json_int_t)t->judged,
		    "unchanged", (json_int_t)t->same,
		    "newly_denied", (json_int_t)t->nchange[RP_NEWLY_DENIED],
		    "newly_allowed", (json_int_t)t->nchange[RP_NEWLY_ALLOWED],
		    "changed", (json_int_t)t->nchange[RP_CHANGED],
		    "skipped", (json_int_t)t->skipped, "changes", t->list);
		i = print_json(out) == 0 ? EXIT_OK : EXIT_FAIL;
		json_decref(out);
		return (int)i;
	}
	table_init(&tab, 6);
	table_add(&tab, "CHANGE");
	table_add(&tab, "KIND");
	table_add(&tab, "WHAT");
	table_add(&tab, "NOW");
	table_add(&tab, "CANDIDATE");
	table_add(&tab, "COUNT");
	json_array_foreach(t->list, i, g) {
		table_addj(&tab, json_object_get(g, "change"), "");
		table_addj(&tab, json_object_get(g, "kind"), "");
		table_addf(&tab, "%s%s", json_string_value(json_object_get(g,
		    "what")), json_is_true(json_object_get(g, "approximate")) ?
		    " (~)" : "");
		table_add(&tab, verdict_text(json_object_get(g, "now"), a,
		    sizeof(a)));
		table_add(&tab, verdict_text(json_object_get(g, "candidate"), b,
		    sizeof(b)));
		table_addj(&tab, json_object_get(g, "count"), "");
	}
	if (json_array_size(t->list) > 0 && table_show(&tab, c) != EXIT_OK)
		return EXIT_FAIL;
	if (json_array_size(t->list) == 0)
		table_free(&tab);
	printf("%llu records of sandbox ", t->judged);
	fput_safe(sandbox, stdout);
	printf(" judged: %llu newly denied, %llu newly allowed, %llu changed, "
	    "%llu unchanged; %llu skipped (no policy decision)\n",
	    t->nchange[RP_NEWLY_DENIED], t->nchange[RP_NEWLY_ALLOWED],
	    t->nchange[RP_CHANGED], t->same, t->skipped);
	return EXIT_OK;
}

int
cmd_policy_replay(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "audit", required_argument, NULL, 'a' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *files[REPLAY_FILES_MAX], *sandbox = NULL, *since = NULL;
	struct errlist el = ERRLIST_INIT;
	struct tally t;
	struct policy *cand = NULL;
	size_t nfiles = 0, i;
	json_t **v;
	int ch, rc = EXIT_FAIL;

	memset(&t, 0, sizeof(t));
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			if (nfiles == REPLAY_FILES_MAX)
				return cmd_usage_err(c, "at most %d --audit "
				    "files", REPLAY_FILES_MAX);
			files[nfiles++] = optarg;
			break;
		case 's':
			sandbox = optarg;
			break;
		case 'S':
			since = optarg;
			break;
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (argc - optind != 1)
		return cmd_usage_err(c, "want one CANDIDATE policy file");
	if (nfiles == 0)
		return cmd_usage_err(c, "--audit FILE is required");
	if (sandbox == NULL || *sandbox == '\0')
		return cmd_usage_err(c, "--sandbox ID is required");
	if (policy_load(argv[optind], &cand, &el) != 0) {
		for (i = 0; i < el.n; i++)
			cmd_err(c, "%s", el.msgs[i]);
		if (el.n == 0)
			cmd_err(c, "%s: cannot load the candidate", argv[optind]);
		errlist_free(&el);
		return EXIT_FAIL;
	}
	if ((t.groups = json_object()) == NULL ||
	    (t.list = json_array()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	for (i = 0; i < nfiles; i++) {
		struct replay_arg ra = { cand, &t };
		struct trail_count tc = { 0, 0 };

		switch (trail_walk(c, files[i], sandbox, since, replay_one, &ra,
		    &tc)) {
		case 0:
			break;
		case -1:
			goto out;
		default:
			cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
			goto out;
		}
	}
	/* Sorted in place: the array's items, by change then count. */
	if (json_array_size(t.list) > 1) {
		size_t n = json_array_size(t.list);
		json_t *sorted;

		if ((v = calloc(n, sizeof(*v))) == NULL ||
		    (sorted = json_array()) == NULL) {
			free(v);
			cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
			goto out;
		}
		for (i = 0; i < n; i++)
			v[i] = json_array_get(t.list, i);
		qsort(v, n, sizeof(*v), group_cmp);
		for (i = 0; i < n; i++)
			json_array_append(sorted, v[i]);
		free(v);
		json_decref(t.list);
		t.list = sorted;
	}
	rc = show(ctl, c, sandbox, &t);
 out:
	json_decref(t.groups);
	json_decref(t.list);
	policy_free(cand);
	return rc;
}
