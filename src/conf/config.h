/* config.h: the main configuration, sluiced.yaml. */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

/*
 * The worker's user when 'user' is absent and sluiced starts as root;
 * the fallback when no such user exists (a warning says so).  Started
 * as another user, sluiced stays that user.
 */
#define CONFIG_USER_DEFAULT	"sluice"
#define CONFIG_USER_FALLBACK	"nobody"

#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/err.h"
#include "conf/budget.h"

struct endpoint {
	struct sockaddr_storage	ss;
	socklen_t		len;
	char			text[64];	/* as written */
};

enum audit_fsync { AUDIT_FSYNC_ALWAYS, AUDIT_FSYNC_BATCH, AUDIT_FSYNC_NEVER };

/* A sandbox declared in the file (extension: static sandboxes). */
struct config_sandbox {
	char		*id;
	char		*team, *project;	/* may be NULL */
	char		*policy;		/* a policy name */
	struct sl_addr	*sources;		/* canonical prefixes */
	unsigned	*plens;
	size_t		 nsources;
	unsigned	 line;
};

struct config {
	char		*path;
	struct endpoint	*transparent;	size_t ntransparent;
	struct endpoint	*proxy;		size_t nproxy;
	struct endpoint	*dns;		size_t ndns;
	char		*control;	/* default /run/sluice/control.sock */
	struct endpoint	*metrics;	/* NULL when absent */
	struct endpoint	*resolvers;	size_t nresolvers;
	char		*policy_dir;
	int		 watch_policies;	/* reload when policy_dir changes */
	struct budget_list budgets;	/* per credential, over all sandboxes */
	char		*state_dir;	/* sandboxes of the API: /var/lib/sluice/state */
	/* Where some keys were written (0: not set), for config_check_system. */
	struct {
		unsigned	 user, control_group, upstream_ca, secret_dir;
	} lines;
	char		*secret_dir;	/* NULL: secrets off */
	char		**gateway_keys;	size_t ngateway_keys;	/* scalar or list */
	char		*signing_key;	/* signing_keys[0]; NULL: signing off */
	char		**signing_keys;	size_t nsigning_keys;	/* scalar or list:
				 * the first signs, all are in the JWKS */
	unsigned	 token_ttl_ms;	/* identity tokens' lifetime: 60s */
	struct endpoint	*jwks;		/* listen.jwks, or NULL */
	char		*issuer;
	char		*upstream_ca;	/* default /etc/ssl/certs/ca-certificates.crt */
	char		*audit_path;	/* NULL: audit to stderr is not done; off */
	enum audit_fsync audit_fsync;	/* default batch */
	struct {			/* the rest of audit: */
		unsigned max_mb;	/* rotate past this size; 0: never */
		unsigned queue;		/* records queued for the writer: 65536 */
		int	 queue_refuse;	/* queue_full: refuse (else wait) */
		unsigned checkpoint_records;	/* 1000 */
		unsigned checkpoint_ms;	/* checkpoint_interval: 60s */
		int	 syslog;	/* a copy of each record to syslog */
	} audit;
	unsigned	 workers;	/* 0 = auto (one per core) */
	int		 log_format;	/* enum log_format; -1: as log_init found */
	char		*user;		/* NULL: CONFIG_USER_DEFAULT when root */
	struct {
		unsigned connections;		/* 1024 */
		unsigned dns_qps;		/* 200 */
		unsigned header_bytes;		/* 65536 */
		unsigned client_hello_bytes;	/* 16384 */
	} limits;
	struct {			/* all in milliseconds */
		unsigned handshake;	/* 10s: first bytes + decision */
		unsigned idle;		/* 300s */
		unsigned connect;	/* 10s */
		unsigned first_byte;	/* 1s: silent client judged opaque (extension) */
		unsigned drain;		/* 10s: SIGTERM grace (extension) */
	} timeouts;
	struct config_sandbox *sandboxes; size_t nsandboxes;	/* extension */
	char		*control_group;	/* extension: may use the control socket */
	unsigned	 ca_validity_days;	/* extension: ca.validity_days, 7 */
	int		 ca_name_constraints;	/* extension: ca.name_constraints */
};

/*
 * Loads and validates path.  Unknown keys, wrong types, bad addresses and
 * durations ("10s", "500ms", "5m", "1h"; a bare number is seconds), and
 * missing required keys (listen.transparent or listen.proxy, resolvers,
 * policy_dir) are errors.  Every problem is added to errs as
 * "file:line:col: message" naming the key; returns 0 or SL_ERR_INVALID.
 */
#define CONFIG_MAX_BYTES	(1u << 20)

int	config_load(const char *path, struct config **out, struct errlist *errs);
/* The same from a buffer; file names the source in messages. */
int	config_parse(const char *file, const char *buf, size_t len,
	    struct config **out, struct errlist *errs);
void	config_free(struct config *c);		/* accepts NULL */

/*
 * A duration as the file writes it ("10s", "500ms", "5m", "1h", a bare
 * number of seconds) in milliseconds, 1ms to 24h.  Returns 0,
 * SL_ERR_INVALID (syntax or zero) or SL_ERR_TOO_BIG (over 24h).
 */
int	config_parse_duration(const char *s, unsigned *ms);

/*
 * What the configuration names on this host, as the start would find it:
 * "user" and "control_group" exist, "upstream_ca" can be read (an error
 * when set, a warning for the default); warnings for running as root
 * without "user" and for a secret_dir others may write.  Problems go to
 * errs, warnings to warns, as "file:line: message".  0 or SL_ERR_INVALID.
 */
int	config_check_system(const struct config *c, struct errlist *errs,
	    struct errlist *warns);

#endif
