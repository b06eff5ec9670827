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

#define SUGGEST_FILES_MAX 64

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
		{ "audit", required_argument, NULL, 'a' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *files[SUGGEST_FILES_MAX], *sandbox = NULL, *since = NULL;
	const char *name = NULL;
	struct errlist el = ERRLIST_INIT;
	struct trail_count tc = { 0, 0 };
	struct suggest *s = NULL;
	struct policy *p = NULL;
	char source[512], *buf = NULL;
	size_t nfiles = 0, len = 0, i, o = 0;
	FILE *mem;
	int ch, rc = EXIT_FAIL;

	(void)ctl;
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			if (nfiles == SUGGEST_FILES_MAX)
				return cmd_usage_err(c, "at most %d --audit "
				    "files", SUGGEST_FILES_MAX);
			files[nfiles++] = optarg;
			break;
		case 's':
			sandbox = optarg;
			break;
		case 'S':
			since = optarg;
			break;
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
	if (nfiles == 0)
		return cmd_usage_err(c, "--audit FILE is required");
	if (sandbox == NULL || *sandbox == '\0')
		return cmd_usage_err(c, "--sandbox ID is required");
	if (name == NULL)
		name = sandbox;
	if (!policy_name_valid(name))
		return cmd_usage_err(c, "'%s' is not a policy name (--name)",
		    name);
	if ((s = suggest_new()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		return EXIT_FAIL;
	}
	source[0] = '\0';
	for (i = 0; i < nfiles; i++) {
		if (trail_walk(c, files[i], sandbox, since, take_one, s,
		    &tc) != 0)
			goto out;
		if (o < sizeof(source))
			o += (size_t)snprintf(source + o, sizeof(source) - o,
			    "%s%s", i ? ", " : "", files[i]);
	}
	if (since != NULL && o < sizeof(source))
		snprintf(source + o, sizeof(source) - o, "; since %s", since);
	if ((mem = open_memstream(&buf, &len)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	suggest_render(mem, s, name, sandbox, source);
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
