/*
 * cmd_suggest.c: sluicectl policy suggest --audit FILE... --sandbox ID
 * [--since T] [--name NAME]: a policy drafted from what the sandbox did
 * (suggest.h), checked by the policy parser before it is printed.
 * Offline.
 */
#include "autoconf.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "conf/policy.h"
#include "sluicectl/suggest.h"
#include "sluicectl/sluicectl.h"
#include "sluicectl/trail.h"

static int
take_one(const json_t *rec, void *arg)
{
	suggest_take(arg, rec);
	return 0;
}

int
cmd_policy_suggest(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	static const struct option opts[] = {
		TRAIL_OPTIONS,
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct trail_args ta;
	const char *name = NULL;
	struct errlist el = ERRLIST_INIT;
	struct suggest *s = NULL;
	struct policy *p = NULL;
	char source[512], *buf = NULL;
	size_t len = 0, i, o = 0;
	FILE *mem;
	int ch, rc = EXIT_FAIL;

	(void)ctl;
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
		case 'n':
			name = optarg;
			break;
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (optind != argc)
		return cmd_usage_err(c, "unexpected argument '%s'", argv[optind]);
	if ((rc = trail_args_done(c, &ta)) != CMD_GO)
		return rc;
	rc = EXIT_FAIL;
	if (name == NULL)
		name = ta.sandbox;
	if (!policy_name_valid(name))
		return cmd_usage_err(c, "'%s' is not a policy name (--name)",
		    name);
	if ((s = suggest_new()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		return EXIT_FAIL;
	}
	source[0] = '\0';
	if (trail_walk_all(c, &ta, take_one, s) != 0)
		goto out;
	for (i = 0; i < ta.nfiles && o < sizeof(source); i++)
		o += (size_t)snprintf(source + o, sizeof(source) - o, "%s%s",
		    i ? ", " : "", ta.files[i]);
	if (ta.since != NULL && o < sizeof(source))
		snprintf(source + o, sizeof(source) - o, "; since %s", ta.since);
	if ((mem = open_memstream(&buf, &len)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	suggest_render(mem, s, name, ta.sandbox, source);
	if (fclose(mem) != 0 || buf == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	/* What we print must load as it is. */
	if (policy_parse("(suggested)", buf, len, &p, &el) != 0) {
		for (i = 0; i < el.n; i++)
			cmd_err(c, "the draft does not load: %s", el.msgs[i]);
		goto out;
	}
	fwrite(buf, 1, len, stdout);
	rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
 out:
	errlist_free(&el);
	policy_free(p);
	free(buf);
	suggest_free(s);
	return rc;
}
