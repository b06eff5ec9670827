/*
 * cmd_sandbox.c: sluicectl sandbox add | ls | show | ca | set-policy |
 * set-mode | rm.
 */
#include "autoconf.h"

#include <getopt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "sluicectl/api.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"

#define TARGET_MAX	512

/* The target for a sandbox, or a usage error when the ID cannot be one. */
static int
sandbox_target(const struct cmd *c, char *buf, const char *id,
    const char *suffix)
{
	if (*id == '\0')
		return cmd_usage_err(c, "the sandbox ID is empty");
	if (api_target(buf, TARGET_MAX, "/v1/sandboxes/", id, suffix) != 0)
		return cmd_usage_err(c, "the sandbox ID is too long");
	return CMD_GO;
}

/* A sandbox as "key: value" lines. */
static int
print_sandbox(const struct cmd *c, const json_t *sb)
{
	const json_t *ca = json_object_get(sb, "ca");
	struct table t;

	table_init(&t, 2);
	table_add(&t, "id:");
	table_addj(&t, json_object_get(sb, "id"), ", ");
	table_add(&t, "team:");
	table_addj(&t, json_object_get(sb, "team"), ", ");
	table_add(&t, "project:");
	table_addj(&t, json_object_get(sb, "project"), ", ");
	table_add(&t, "sources:");
	table_addj(&t, json_object_get(sb, "sources"), ", ");
	table_add(&t, "policy:");
	table_addj(&t, json_object_get(sb, "policy"), ", ");
	table_add(&t, "policy revision:");
	table_addj(&t, json_object_get(sb, "policy_revision"), ", ");
	table_add(&t, "policy inline:");
	table_add(&t, json_is_true(json_object_get(sb, "policy_inline")) ?
	    "yes" : "no");
	table_add(&t, "mode:");
	table_addj(&t, json_object_get(sb, "mode"), ", ");
	if (json_object_get(sb, "observe_until") != NULL) {
		table_add(&t, "observe until:");
		table_addj(&t, json_object_get(sb, "observe_until"), ", ");
	}
	table_add(&t, "origin:");
	table_addj(&t, json_object_get(sb, "origin"), ", ");
	table_add(&t, "created:");
	table_addj(&t, json_object_get(sb, "created"), ", ");
	table_add(&t, "connections:");
	table_addj(&t, json_object_get(sb, "connections"), ", ");
	table_add(&t, "ca fingerprint:");
	table_addj(&t, json_object_get(ca, "fingerprint_sha256"), ", ");
	table_add(&t, "ca not before:");
	table_addj(&t, json_object_get(ca, "not_before"), ", ");
	table_add(&t, "ca not after:");
	table_addj(&t, json_object_get(ca, "not_after"), ", ");
	table_add(&t, "ca name constraints:");
	table_addj(&t, json_object_get(ca, "name_constraints"), ", ");
	return table_show(&t, c);
}

/* Prints a sandbox the daemon answered with, as asked. */
static int
show_answer(const struct ctl *ctl, const struct cmd *c, const json_t *sb)
{
	if (ctl->json)
		return print_json(sb) == 0 ? EXIT_OK : EXIT_FAIL;
	return print_sandbox(c, sb);
}

/* Appends each address of a comma-separated --source value. */
static int
add_sources(const struct cmd *c, json_t *arr, const char *arg)
{
	const char *p = arg;
	size_t n;

	for (;;) {
		n = strcspn(p, ",");
		if (n == 0)
			return cmd_usage_err(c, "empty address in --source "
			    "'%s'", arg);
		if (json_array_append_new(arr, json_stringn(p, n)) != 0) {
			cmd_err(c, "--source '%s': %s", arg,
			    "not a valid address (or out of memory)");
			return EXIT_FAIL;
		}
		if (p[n] == '\0')
			return CMD_GO;
		p += n + 1;
	}
}

int
cmd_sandbox_add(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "source", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' },
		{ "team", required_argument, NULL, 't' },
		{ "project", required_argument, NULL, 'P' },
		{ "mode", required_argument, NULL, 'm' },
		{ "until", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *policy = NULL, *team = NULL, *project = NULL;
	const char *mode = NULL, *until = NULL;
	json_t *sources = NULL, *body = NULL, *pol = NULL, *sb = NULL;
	int ch, rc = EXIT_FAIL;

	if ((sources = json_array()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if ((rc = add_sources(c, sources, optarg)) != CMD_GO)
				goto out;
			break;
		case 'p':
			policy = optarg;
			break;
		case 't':
			team = optarg;
			break;
		case 'P':
			project = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 'u':
			until = optarg;
			break;
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			cmd_usage(c, stdout);
			rc = EXIT_OK;
			goto out;
		default:
			rc = cmd_badopt(c, ch, argv);
			goto out;
		}
	}
	if (optind >= argc)
		rc = cmd_usage_err(c, "missing ID");
	else if (optind + 1 < argc)
		rc = cmd_usage_err(c, "unexpected argument '%s' (give each "
		    "address its own --source)", argv[optind + 1]);
	else if (*argv[optind] == '\0')
		rc = cmd_usage_err(c, "the sandbox ID is empty");
	else if (json_array_size(sources) == 0)
		rc = cmd_usage_err(c, "--source is required");
	else if (policy == NULL || *policy == '\0')
		rc = cmd_usage_err(c, "--policy is required");
	else
		rc = CMD_GO;
	if (rc != CMD_GO)
		goto out;
	if ((rc = policy_arg(c, policy, &pol)) != EXIT_OK)
		goto out;
	rc = EXIT_FAIL;
	if ((body = json_pack("{s:s, s:O, s:O}", "id", argv[optind],
	    "sources", sources, "policy", pol)) == NULL ||
	    (team != NULL && json_object_set_new(body, "team",
	    json_string(team)) != 0) ||
	    (project != NULL && json_object_set_new(body, "project",
	    json_string(project)) != 0) ||
	    (mode != NULL && json_object_set_new(body, "mode",
	    json_string(mode)) != 0) ||
	    (until != NULL && json_object_set_new(body, "until",
	    json_string(until)) != 0)) {
		cmd_err(c, "the ID, --team, --project, --mode or --until is not "
		    "valid UTF-8 (or out of memory)");
		goto out;
	}
	if ((rc = api_json(ctl, c, "POST", "/v1/sandboxes", body, &sb)) !=
	    EXIT_OK)
		goto out;
	rc = show_answer(ctl, c, sb);
 out:
	json_decref(sb);
	json_decref(body);
	json_decref(pol);
	json_decref(sources);
	return rc;
}

int
cmd_sandbox_ls(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	const json_t *list, *sb;
	json_t *ans = NULL;
	struct table t;
	size_t i;
	int rc;

	if ((rc = api_view(ctl, c, argc, argv, "/v1/sandboxes", &ans)) !=
	    CMD_GO)
		return rc;
	table_init(&t, 8);
	t.right = 1u << 4 | 1u << 7;
	table_add(&t, "ID");
	table_add(&t, "TEAM");
	table_add(&t, "PROJECT");
	table_add(&t, "POLICY");
	table_add(&t, "REV");
	table_add(&t, "MODE");
	table_add(&t, "SOURCES");
	table_add(&t, "CONNS");
	list = json_object_get(ans, "sandboxes");
	json_array_foreach(list, i, sb) {
		table_addj(&t, json_object_get(sb, "id"), ",");
		table_addj(&t, json_object_get(sb, "team"), ",");
		table_addj(&t, json_object_get(sb, "project"), ",");
		table_addj(&t, json_object_get(sb, "policy"), ",");
		table_addj(&t, json_object_get(sb, "policy_revision"), ",");
		table_addj(&t, json_object_get(sb, "mode"), ",");
		table_addj(&t, json_object_get(sb, "sources"), ",");
		table_addj(&t, json_object_get(sb, "connections"), ",");
	}
	rc = table_show(&t, c);
	json_decref(ans);
	return rc;
}

int
cmd_sandbox_show(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char target[TARGET_MAX];
	json_t *sb = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 1, 1, &first)) != CMD_GO ||
	    (rc = sandbox_target(c, target, argv[first], "")) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "GET", target, NULL, &sb)) != EXIT_OK)
		return rc;
	rc = show_answer(ctl, c, sb);
	json_decref(sb);
	return rc;
}

#define BUNDLE_ROOTS	"/etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_MAX	(8 * 1024 * 1024)	/* a roots file */

/*
 * The roots file, then the sandbox's CA: one bundle a sandbox can point
 * SSL_CERT_FILE or REQUESTS_CA_BUNDLE at without losing the hosts that
 * are passed through (those variables replace the whole trust store).
 */
static int
print_bundle(const struct cmd *c, const char *roots, const char *pem,
    size_t len)
{
	char buf[65536];
	size_t n, total = 0;
	int last = '\n';
	FILE *f;

	if ((f = fopen(roots, "r")) == NULL) {
		cmd_err(c, "cannot read %s: %s", roots, strerror(errno));
		return EXIT_FAIL;
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0 &&
	    (total += n) <= BUNDLE_MAX) {
		fwrite(buf, 1, n, stdout);
		last = buf[n - 1];
	}
	fclose(f);
	if (total > BUNDLE_MAX) {
		cmd_err(c, "%s: larger than %d bytes", roots, BUNDLE_MAX);
		return EXIT_FAIL;
	}
	if (last != '\n')
		putchar('\n');
	fwrite(pem, 1, len, stdout);
	if (len > 0 && pem[len - 1] != '\n')
		putchar('\n');
	return EXIT_OK;
}

int
cmd_sandbox_ca(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bundle", no_argument, NULL, 'b' },
		{ "roots", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char target[TARGET_MAX];
	struct http_req req = { "GET", target, NULL, NULL, 0 };
	struct http_resp *resp = NULL;
	const char *roots = NULL;
	json_t *o = NULL;
	int ch, rc, bundle = 0;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			bundle = 1;
			break;
		case 'r':
			roots = optarg;
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
	if (optind >= argc)
		return cmd_usage_err(c, "missing ID");
	if (optind + 1 < argc)
		return cmd_usage_err(c, "unexpected argument '%s'",
		    argv[optind + 1]);
	if (roots != NULL && !bundle)
		return cmd_usage_err(c, "--roots goes with --bundle");
	if (bundle && ctl->json)
		return cmd_usage_err(c, "--bundle prints PEM, not --json");
	if ((rc = sandbox_target(c, target, argv[optind], "/ca.pem")) !=
	    CMD_GO)
		return rc;
	if ((rc = api_call(ctl, c, &req, &resp)) != EXIT_OK)
		return rc;
	if (bundle)
		rc = print_bundle(c, roots != NULL ? roots : BUNDLE_ROOTS,
		    resp->body, resp->body_len);
	else if (!ctl->json) {
		fwrite(resp->body, 1, resp->body_len, stdout);
		if (resp->body_len > 0 &&
		    resp->body[resp->body_len - 1] != '\n')
			putchar('\n');
		rc = EXIT_OK;
	} else if ((o = json_pack("{s:s, s:s%}", "id", argv[optind], "ca_pem",
	    resp->body, resp->body_len)) == NULL) {
		cmd_err(c, "the daemon's certificate is not text");
		rc = EXIT_FAIL;
	} else
		rc = print_json(o) == 0 ? EXIT_OK : EXIT_FAIL;
	json_decref(o);
	http_resp_free(resp);
	return rc;
}

int
cmd_sandbox_set_policy(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char target[TARGET_MAX];
	json_t *pol = NULL, *body = NULL, *sb = NULL;
	int rc, first, ch, dry = 0;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			dry = 1;
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
	if (argc - optind != 2)
		return cmd_usage_err(c, "want ID and NAME|FILE");
	first = optind;
	if ((rc = sandbox_target(c, target, argv[first], dry ?
	    "/policy?dry_run=1" : "/policy")) != CMD_GO)
		return rc;
	if (*argv[first + 1] == '\0')
		return cmd_usage_err(c, "the policy is empty");
	if ((rc = policy_arg(c, argv[first + 1], &pol)) != EXIT_OK)
		return rc;
	rc = EXIT_FAIL;
	if ((body = json_pack("{s:O}", "policy", pol)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	if ((rc = api_json(ctl, c, "PUT", target, body, &sb)) != EXIT_OK)
		goto out;
	rc = dry ? replay_show(ctl, c, sb) : show_answer(ctl, c, sb);
 out:
	json_decref(sb);
	json_decref(body);
	json_decref(pol);
	return rc;
}

int
cmd_sandbox_set_mode(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	static const struct option opts[] = {
		{ "until", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char target[TARGET_MAX];
	const char *until = NULL, *mode;
	json_t *body = NULL, *sb = NULL;
	int ch, rc;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			until = optarg;
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
	if (argc - optind != 2)
		return cmd_usage_err(c, "want ID and observe or enforce");
	mode = argv[optind + 1];
	if (strcmp(mode, "observe") != 0 && strcmp(mode, "enforce") != 0)
		return cmd_usage_err(c, "the mode is observe or enforce, not "
		    "'%s'", mode);
	if (strcmp(mode, "observe") == 0 && until == NULL)
		return cmd_usage_err(c, "observe needs --until (how long: 10m, "
		    "2h)");
	if (strcmp(mode, "enforce") == 0 && until != NULL)
		return cmd_usage_err(c, "--until goes with observe only");
	if ((rc = sandbox_target(c, target, argv[optind], "/mode")) != CMD_GO)
		return rc;
	rc = EXIT_FAIL;
	if ((body = json_pack("{s:s}", "mode", mode)) == NULL ||
	    (until != NULL && json_object_set_new(body, "until",
	    json_string(until)) != 0)) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	if ((rc = api_json(ctl, c, "PUT", target, body, &sb)) != EXIT_OK)
		goto out;
	rc = show_answer(ctl, c, sb);
 out:
	json_decref(sb);
	json_decref(body);
	return rc;
}

int
cmd_sandbox_rm(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char target[TARGET_MAX];
	json_t *ans = NULL;
	const char *id;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 1, 1, &first)) != CMD_GO ||
	    (rc = sandbox_target(c, target, argv[first], "")) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "DELETE", target, NULL, &ans)) !=
	    EXIT_OK)
		return rc;
	if (ctl->json)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else {
		id = json_string_value(json_object_get(ans, "deleted"));
		fputs("deleted sandbox ", stdout);
		fput_safe(id != NULL ? id : argv[first], stdout);
		fputc('\n', stdout);
	}
	json_decref(ans);
	return rc;
}

/* sandbox placeholder ID SECRET: the placeholder the sandbox may hold. */
int
cmd_sandbox_placeholder(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	char target[TARGET_MAX];
	json_t *ans = NULL, *body;
	const char *ph;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 2, 2, &first)) != CMD_GO ||
	    (rc = sandbox_target(c, target, argv[first], "/placeholders")) !=
	    CMD_GO)
		return rc;
	if ((body = json_pack("{s:s}", "secret", argv[first + 1])) == NULL) {
		cmd_err(c, "out of memory");
		return EXIT_FAIL;
	}
	rc = api_json(ctl, c, "POST", target, body, &ans);
	json_decref(body);
	if (rc != EXIT_OK)
		return rc;
	if (ctl->json)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else if ((ph = json_string_value(json_object_get(ans,
	    "placeholder"))) != NULL) {
		fput_safe(ph, stdout);
		fputc('\n', stdout);
	} else
		rc = EXIT_FAIL;
	json_decref(ans);
	return rc;
}
