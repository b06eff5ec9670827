/* sluicectl: the operator CLI.  Offline commands run here; the rest talk
 * to the daemon's control socket. */
#include "autoconf.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "err.h"
#include "policy.h"

#define DEFAULT_SOCKET	"/run/sluice/control.sock"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* What every command gets: the global options. */
struct ctl {
	const char	*socket;	/* --socket, $SLUICE_SOCKET, default */
	int		 json;		/* --json */
};

struct cmd {
	const char	*group;		/* "policy", or NULL for a bare verb */
	const char	*verb;
	const char	*usage;
	int		(*run)(struct ctl *, const struct cmd *, int, char **);
};

static int cmd_policy_check(struct ctl *, const struct cmd *, int, char **);
static int cmd_needs_api(struct ctl *, const struct cmd *, int, char **);
static int cmd_not_yet(struct ctl *, const struct cmd *, int, char **);

/* SPEC's commands, in the order --help lists them. */
static const struct cmd cmds[] = {
	{ "sandbox", "add", "ID --source ADDR[/LEN]... --policy NAME|FILE "
	    "[--team T] [--project P]", cmd_needs_api },
	{ "sandbox", "ls", "", cmd_needs_api },
	{ "sandbox", "show", "ID", cmd_needs_api },
	{ "sandbox", "ca", "ID", cmd_needs_api },
	{ "sandbox", "set-policy", "ID NAME|FILE", cmd_needs_api },
	{ "sandbox", "rm", "ID", cmd_needs_api },
	{ "policy", "ls", "", cmd_needs_api },
	{ "policy", "put", "FILE", cmd_needs_api },
	{ "policy", "check", "FILE...", cmd_policy_check },
	{ "secret", "ls", "", cmd_needs_api },
	{ "secret", "put", "FILE.sealed", cmd_needs_api },
	{ "secret", "rm", "NAME", cmd_needs_api },
	{ NULL, "reload", "", cmd_needs_api },
	{ NULL, "stats", "", cmd_needs_api },
	{ "audit", "tail", "[-f]", cmd_needs_api },
	{ "audit", "verify", "FILE... --pub signing.pub", cmd_not_yet },
	{ NULL, "keygen", "--out DIR", cmd_not_yet },
	{ NULL, "seal", "--pub gateway.pub --name NAME [--host H]...",
	    cmd_not_yet },
};
#define NCMDS	(sizeof(cmds) / sizeof(cmds[0]))

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sluicectl [--socket PATH] [--json] COMMAND [ARGS]\n"
	    "       sluicectl --help | --version\n\ncommands:\n");
	for (i = 0; i < NCMDS; i++)
		fprintf(f, "  %s%s%s %s\n", cmds[i].group ? cmds[i].group : "",
		    cmds[i].group ? " " : "", cmds[i].verb, cmds[i].usage);
	fprintf(f, "\nThe socket is --socket, else $SLUICE_SOCKET, else "
	    DEFAULT_SOCKET ".\n");
}

static void
cmd_name(const struct cmd *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", c->group ? c->group : "",
	    c->group ? " " : "", c->verb);
}

static int
cmd_needs_api(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char name[64];

	(void)ctl;
	(void)argc;
	(void)argv;
	cmd_name(c, name, sizeof(name));
	fprintf(stderr, "sluicectl: '%s' needs the control API, which this "
	    "build does not have yet\n", name);
	return EXIT_FAIL;
}

/* Offline commands of SPEC that this build does not carry yet. */
static int
cmd_not_yet(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char name[64];

	(void)ctl;
	(void)argc;
	(void)argv;
	cmd_name(c, name, sizeof(name));
	fprintf(stderr, "sluicectl: '%s' is not implemented in this build "
	    "yet\n", name);
	return EXIT_FAIL;
}

static json_t *
check_json(const char *file, const struct policy *p,
    const struct errlist *el, int r)
{
	json_t *o, *errs;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	json_object_set_new(o, "file", json_string(file));
	json_object_set_new(o, "ok", json_boolean(r == 0));
	if (r == 0) {
		json_object_set_new(o, "name", json_string(p->name));
		json_object_set_new(o, "allow", json_integer((json_int_t)p->nallow));
		json_object_set_new(o, "deny", json_integer((json_int_t)p->ndeny));
		json_object_set_new(o, "intercept",
		    json_integer((json_int_t)p->nintercepts));
		return o;
	}
	errs = json_array();
	for (i = 0; errs != NULL && i < el->n; i++)
		json_array_append_new(errs, json_string(el->msgs[i]));
	if (errs != NULL && el->n == 0)
		json_array_append_new(errs, json_string(err_str(r)));
	json_object_set_new(o, "errors", errs);
	return o;
}

/* Loads each file with the daemon's own parser; prints every problem. */
static int
cmd_policy_check(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	json_t *arr = NULL, *o;
	int ch, i, r, rc = EXIT_OK;
	size_t k;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			printf("usage: sluicectl policy check %s\n", c->usage);
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: sluicectl policy check %s\n", c->usage);
		return EXIT_USAGE;
	}
	if (ctl->json && (arr = json_array()) == NULL) {
		fprintf(stderr, "sluicectl: out of memory\n");
		return EXIT_FAIL;
	}
	for (i = optind; i < argc; i++) {
		r = policy_load(argv[i], &p, &el);
		if (r != 0)
			rc = EXIT_FAIL;
		if (arr != NULL) {
			if ((o = check_json(argv[i], p, &el, r)) != NULL)
				json_array_append_new(arr, o);
		} else if (r == 0) {
			printf("%s: ok (name %s, %zu allow, %zu deny, %zu "
			    "intercept rules)\n", argv[i], p->name, p->nallow,
			    p->ndeny, p->nintercepts);
		} else {
			for (k = 0; k < el.n; k++)
				fprintf(stderr, "%s\n", el.msgs[k]);
			if (el.n == 0)
				fprintf(stderr, "%s: %s\n", argv[i], err_str(r));
		}
		policy_free(p);
		p = NULL;
		errlist_free(&el);
	}
	if (arr != NULL) {
		if (json_dumpf(arr, stdout, JSON_INDENT(2)) != 0)
			rc = EXIT_FAIL;
		putchar('\n');
		json_decref(arr);
	}
	if (fflush(stdout) != 0) {
		perror("sluicectl: stdout");
		rc = EXIT_FAIL;
	}
	return rc;
}

static int
is_group(const char *word)
{
	size_t i;

	for (i = 0; i < NCMDS; i++)
		if (cmds[i].group != NULL && strcmp(cmds[i].group, word) == 0)
			return 1;
	return 0;
}

static const struct cmd *
find_cmd(int argc, char **argv, int *used)
{
	size_t i;

	for (i = 0; i < NCMDS; i++) {
		if (cmds[i].group == NULL && strcmp(argv[0], cmds[i].verb) == 0) {
			*used = 1;
			return &cmds[i];
		}
		if (cmds[i].group != NULL && argc >= 2 &&
		    strcmp(argv[0], cmds[i].group) == 0 &&
		    strcmp(argv[1], cmds[i].verb) == 0) {
			*used = 2;
			return &cmds[i];
		}
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl ctl = { NULL, 0 };
	const struct cmd *c;
	int ch, used = 0;

	/* '+': options after the command belong to the command. */
	while ((ch = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			ctl.socket = optarg;
			break;
		case 'j':
			ctl.json = 1;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("sluicectl %s\n", PACKAGE_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (ctl.socket == NULL)
		ctl.socket = getenv("SLUICE_SOCKET");
	if (ctl.socket == NULL || *ctl.socket == '\0')
		ctl.socket = DEFAULT_SOCKET;
	if (argc == 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if ((c = find_cmd(argc, argv, &used)) == NULL) {
		if (is_group(argv[0]) && argc == 1)
			fprintf(stderr, "sluicectl: '%s' needs a subcommand "
			    "(see sluicectl --help)\n", argv[0]);
		else if (is_group(argv[0]))
			fprintf(stderr, "sluicectl: unknown command '%s %s' "
			    "(see sluicectl --help)\n", argv[0], argv[1]);
		else
			fprintf(stderr, "sluicectl: unknown command '%s' (see "
			    "sluicectl --help)\n", argv[0]);
		return EXIT_USAGE;
	}
	if (sodium_init() < 0) {
		fprintf(stderr, "sluicectl: libsodium failed to initialise\n");
		return EXIT_FAIL;
	}
	/* The command sees its own name as argv[0], as getopt expects. */
	return c->run(&ctl, c, argc - used + 1, argv + used - 1);
}
