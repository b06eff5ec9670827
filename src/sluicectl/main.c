/* sluicectl: the operator CLI.  Offline commands run here; the rest talk
 * to the daemon's control socket. */
#include "autoconf.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sluicectl/sluicectl.h"

/* SPEC's commands, in the order --help lists them. */
static const struct cmd cmds[] = {
	{ "sandbox", "add", "ID --source ADDR[/LEN]... --policy NAME|FILE "
	    "[--team T] [--project P] [--mode observe --until DUR]",
	    cmd_sandbox_add },
	{ "sandbox", "ls", "", cmd_sandbox_ls },
	{ "sandbox", "show", "ID", cmd_sandbox_show },
	{ "sandbox", "ca", "ID [--bundle [--roots FILE]]", cmd_sandbox_ca },
	{ "sandbox", "set-policy", "[--dry-run] ID NAME|FILE",
	    cmd_sandbox_set_policy },
	{ "sandbox", "set-mode", "ID observe --until DUR | ID enforce",
	    cmd_sandbox_set_mode },
	{ "sandbox", "rm", "ID", cmd_sandbox_rm },
	{ "sandbox", "placeholder", "ID SECRET", cmd_sandbox_placeholder },
	{ "policy", "ls", "", cmd_policy_ls },
	{ "policy", "put", "FILE", cmd_policy_put },
	{ "policy", "check", "FILE...", cmd_policy_check },
	{ "policy", "suggest", "--audit FILE... --sandbox ID [--since T] "
	    "[--name NAME]", cmd_policy_suggest },
	{ "policy", "replay", "CANDIDATE --audit FILE... --sandbox ID "
	    "[--since T]", cmd_policy_replay },
	{ "secret", "ls", "", cmd_secret_ls },
	{ "secret", "put", "FILE.sealed", cmd_secret_put },
	{ "secret", "rm", "NAME", cmd_secret_rm },
	{ "token", "ls", "[SANDBOX]", cmd_token_ls },
	{ NULL, "reload", "", cmd_reload },
	{ "daemon", "upgrade", "", cmd_daemon_upgrade },
	{ NULL, "stats", "", cmd_stats },
	{ "audit", "tail", "[-f] [-n N] [--file PATH] [--sandbox S] "
	    "[--secret NAME] [--rule R] [--action A] [--type T]",
	    cmd_audit_tail },
	{ "audit", "verify", "FILE... [--pub signing.pub]... [--open]",
	    cmd_audit_verify },
	{ "audit", "rotate", "", cmd_audit_rotate },
	{ NULL, "keygen", "--out DIR", cmd_keygen },
	{ NULL, "seal", "--pub gateway.pub --name NAME [--host H]... "
	    "[--kind header|pem|json] [--secret-version N] [--out FILE]",
	    cmd_seal },
};
#define NCMDS	(sizeof(cmds) / sizeof(cmds[0]))

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sluicectl [--socket PATH] [--json] COMMAND [ARGS]\n"
	    "       sluicectl --help | --version\n\ncommands:\n");
	for (i = 0; i < NCMDS; i++)
		fprintf(f, "  %s%s%s%s%s\n", cmds[i].group ? cmds[i].group : "",
		    cmds[i].group ? " " : "", cmds[i].verb,
		    *cmds[i].usage ? " " : "", cmds[i].usage);
	fprintf(f, "\nThe socket is --socket, else $SLUICE_SOCKET, else "
	    DEFAULT_SOCKET ".\n");
}

void
cmd_prefix(const struct cmd *c, FILE *f)
{
	fprintf(f, "sluicectl: %s%s%s: ", c->group ? c->group : "",
	    c->group ? " " : "", c->verb);
}

void
cmd_err(const struct cmd *c, const char *fmt, ...)
{
	va_list ap;

	cmd_prefix(c, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void
cmd_usage(const struct cmd *c, FILE *f)
{
	fprintf(f, "usage: sluicectl %s%s%s%s%s\n", c->group ? c->group : "",
	    c->group ? " " : "", c->verb, *c->usage ? " " : "", c->usage);
}

int
cmd_usage_err(const struct cmd *c, const char *fmt, ...)
{
	va_list ap;

	if (fmt != NULL) {
		cmd_prefix(c, stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	cmd_usage(c, stderr);
	return EXIT_USAGE;
}

/* What getopt_long refused (ch '?' or ':'), as a phrase in buf. */
static const char *
badopt_msg(int ch, char **argv, char *buf, size_t len)
{
	const char *opt = argv[optind - 1];
	const char *eq = strchr(opt, '=');

	if (ch == ':')
		snprintf(buf, len, "option '%s' needs a value", opt);
	else if (strncmp(opt, "--", 2) == 0 && eq != NULL)
		snprintf(buf, len, "option '%.*s' takes no value",
		    (int)(eq - opt), opt);
	else if (strncmp(opt, "--", 2) == 0 || optopt == 0)
		snprintf(buf, len, "unknown option '%s'", opt);
	else
		snprintf(buf, len, "unknown option '-%c'", optopt);
	return buf;
}

int
cmd_badopt(const struct cmd *c, int ch, char **argv)
{
	char msg[256];

	return cmd_usage_err(c, "%s", badopt_msg(ch, argv, msg, sizeof(msg)));
}

/* Names the usage's operand number n (from 0) as missing. */
static int
missing(const struct cmd *c, int n)
{
	const char *p = c->usage;
	size_t len;

	for (;;) {
		p += strspn(p, " ");
		len = strcspn(p, " ");
		if (len == 0 || n-- == 0)
			break;
		p += len;
	}
	if (len > 3 && strncmp(p + len - 3, "...", 3) == 0)
		len -= 3;
	return cmd_usage_err(c, "missing %.*s", (int)len, p);
}

int
cmd_args(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
    int min, int max, int *first)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, n;

	optind = 0;	/* a full restart, permuting again */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
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
	n = argc - optind;
	if (n < min)
		return missing(c, n);
	if (n > max)
		return cmd_usage_err(c, "unexpected argument '%s'",
		    argv[optind + max]);
	*first = optind;
	return CMD_GO;
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
	char msg[256];
	int ch, rc, used = 0;

	/* '+': options after the command belong to the command. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:hV", opts, NULL)) != -1) {
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
			fprintf(stderr, "sluicectl: %s (see sluicectl --help)\n",
			    badopt_msg(ch, argv, msg, sizeof(msg)));
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
	rc = c->run(&ctl, c, argc - used + 1, argv + used - 1);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sluicectl: stdout: %s\n", strerror(errno));
		rc = EXIT_FAIL;
	}
	return rc;
}
