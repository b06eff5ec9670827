/* sluicectl.h: what sluicectl's commands share. */
#ifndef SLUICECTL_SLUICECTL_H
#define SLUICECTL_SLUICECTL_H

#include <stdio.h>

#include <jansson.h>

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
	/* Gets its own name as argv[0]; returns an exit status. */
	int		(*run)(struct ctl *, const struct cmd *, int, char **);
};

/* Prints "sluicectl: GROUP VERB: " (or "sluicectl: VERB: ") to f. */
void	cmd_prefix(const struct cmd *c, FILE *f);
/* Prints the prefix and the message, on one line of stderr. */
void	cmd_err(const struct cmd *c, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Prints the message as cmd_err (fmt NULL: none) and the command's usage
 * line; returns EXIT_USAGE. */
int	cmd_usage_err(const struct cmd *c, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
void	cmd_usage(const struct cmd *c, FILE *f);

/*
 * Reports what getopt_long (run with opterr 0 and an optstring starting
 * with ':') refused: ch is '?' or ':'.  Returns EXIT_USAGE.
 */
int	cmd_badopt(const struct cmd *c, int ch, char **argv);

#define CMD_GO	(-1)
/*
 * Parses the options of a command that has none but --json and --help
 * and checks that it got min to max operands.  Returns CMD_GO with the
 * first operand's index in *first, or the exit status to return now
 * (EXIT_OK after --help, EXIT_USAGE).
 */
int	cmd_args(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
	    int min, int max, int *first);

/* cmd_policy.c */
int	cmd_policy_ls(struct ctl *, const struct cmd *, int, char **);
int	cmd_policy_put(struct ctl *, const struct cmd *, int, char **);
int	cmd_policy_check(struct ctl *, const struct cmd *, int, char **);
/* cmd_suggest.c */
int	cmd_policy_suggest(struct ctl *, const struct cmd *, int, char **);
/* cmd_replay.c */
int	cmd_policy_replay(struct ctl *, const struct cmd *, int, char **);
/* A replay's summary (replay_tally_json) as a table, or JSON with --json. */
int	replay_show(const struct ctl *, const struct cmd *, const json_t *sum);
/*
 * A --policy or set-policy argument as the API's "policy" value: the
 * inline document when arg names a regular file (or contains a '/'),
 * else the name.  Reports problems; returns EXIT_OK and *out, or
 * EXIT_FAIL.
 */
int	policy_arg(const struct cmd *c, const char *arg, json_t **out);

/* cmd_sandbox.c */
int	cmd_sandbox_add(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_ls(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_show(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_ca(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_set_policy(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_set_mode(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_rm(struct ctl *, const struct cmd *, int, char **);
int	cmd_sandbox_placeholder(struct ctl *, const struct cmd *, int, char **);

/* cmd_daemon.c */
int	cmd_secret_ls(struct ctl *, const struct cmd *, int, char **);
int	cmd_token_ls(struct ctl *, const struct cmd *, int, char **);
int	cmd_secret_put(struct ctl *, const struct cmd *, int, char **);
int	cmd_secret_rm(struct ctl *, const struct cmd *, int, char **);
int	cmd_reload(struct ctl *, const struct cmd *, int, char **);
int	cmd_daemon_upgrade(struct ctl *, const struct cmd *, int, char **);
int	cmd_audit_rotate(struct ctl *, const struct cmd *, int, char **);
int	cmd_stats(struct ctl *, const struct cmd *, int, char **);

/* cmd_audit.c: verify is offline; tail asks the daemon for the file */
int	cmd_audit_verify(struct ctl *, const struct cmd *, int, char **);
int	cmd_audit_tail(struct ctl *, const struct cmd *, int, char **);

/* cmd_keys.c: offline */
int	cmd_keygen(struct ctl *, const struct cmd *, int, char **);
int	cmd_seal(struct ctl *, const struct cmd *, int, char **);

#endif
