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
#include "conf/replay.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"
#include "sluicectl/trail.h"

struct replay_arg {
	const struct policy	*cand;
	struct replay_tally	*t;
};

static int
replay_one(const json_t *rec, void *arg)
{
	struct replay_arg *ra = arg;
	struct rp_result r;

	/* r's strings may point into rec: counted before it goes. */
	replay_record(ra->cand, rec, &r);
	return replay_tally_add(ra->t, &r) != 0 ? 2 : 0;	/* 2: out of memory */
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

int
replay_show(const struct ctl *ctl, const struct cmd *c, const json_t *sum)
{
	const json_t *list = json_object_get(sum, "changes"), *g;
	char a[160], b[160];
	struct table tab;
	size_t i;

	if (ctl->json)
		return print_json(sum) == 0 ? EXIT_OK : EXIT_FAIL;
	if (json_array_size(list) > 0) {
		table_init(&tab, 6);
		table_add(&tab, "CHANGE");
		table_add(&tab, "KIND");
		table_add(&tab, "WHAT");
		table_add(&tab, "NOW");
		table_add(&tab, "CANDIDATE");
		table_add(&tab, "COUNT");
		json_array_foreach(list, i, g) {
			table_addj(&tab, json_object_get(g, "change"), "");
			table_addj(&tab, json_object_get(g, "kind"), "");
			table_addf(&tab, "%s%s", json_string_value(
			    json_object_get(g, "what")), json_is_true(
			    json_object_get(g, "approximate")) ? " (~)" : "");
			table_add(&tab, verdict_text(json_object_get(g, "now"),
			    a, sizeof(a)));
			table_add(&tab, verdict_text(json_object_get(g,
			    "candidate"), b, sizeof(b)));
			table_addj(&tab, json_object_get(g, "count"), "");
		}
		if (table_show(&tab, c) != EXIT_OK)
			return EXIT_FAIL;
	}
	printf("%lld records of sandbox ", (long long)json_integer_value(
	    json_object_get(sum, "judged")));
	fput_safe(json_string_value(json_object_get(sum, "sandbox")), stdout);
	printf(" judged: %lld newly denied, %lld newly allowed, %lld changed, "
	    "%lld unchanged; %lld skipped (no policy decision)\n",
	    (long long)json_integer_value(json_object_get(sum, "newly_denied")),
	    (long long)json_integer_value(json_object_get(sum, "newly_allowed")),
	    (long long)json_integer_value(json_object_get(sum, "changed")),
	    (long long)json_integer_value(json_object_get(sum, "unchanged")),
	    (long long)json_integer_value(json_object_get(sum, "skipped")));
	return EXIT_OK;
}

int
cmd_policy_replay(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		TRAIL_OPTIONS,
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct trail_args ta;
	struct errlist el = ERRLIST_INIT;
	struct replay_tally *t = NULL;
	struct policy *cand = NULL;
	size_t i;
	json_t *sum = NULL;
	int ch, rc = EXIT_FAIL;

	memset(&ta, 0, sizeof(ta));
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if ((rc = trail_arg(c, &ta, ch, optarg)) != 1) {
			if (rc != CMD_GO)
				return rc;
			continue;
		}
		switch (ch) {
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
	if ((rc = trail_args_done(c, &ta)) != CMD_GO)
		return rc;
	rc = EXIT_FAIL;
	if (policy_load(argv[optind], &cand, &el) != 0) {
		for (i = 0; i < el.n; i++)
			cmd_err(c, "%s", el.msgs[i]);
		if (el.n == 0)
			cmd_err(c, "%s: cannot load the candidate", argv[optind]);
		errlist_free(&el);
		return EXIT_FAIL;
	}
	if ((t = replay_tally_new()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	{
		struct replay_arg ra = { cand, t };

		switch (trail_walk_all(c, &ta, replay_one, &ra)) {
		case 0:
			break;
		case -1:
			goto out;
		default:
			cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
			goto out;
		}
	}
	if ((sum = replay_tally_json(t, ta.sandbox)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	rc = replay_show(ctl, c, sum);
 out:
	json_decref(sum);
	replay_tally_free(t);
	policy_free(cand);
	return rc;
}
