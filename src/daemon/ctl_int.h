/* ctl_int.h: what the control API's handlers share with its transport. */
#ifndef SLUICE_CTL_INT_H
#define SLUICE_CTL_INT_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "util/err.h"

struct ctl;
struct daemon;
struct evbuffer;
struct sandbox;
struct state;

#define SB_ID_MAX	46	/* a sandbox id names its CA: see ca.h */
#define OBSERVE_MAX_S	(7 * 24 * 3600)	/* the longest observe mode */

#define CTL_BODY_MAX	(4u << 20)	/* POLICY_MAX_BYTES */
#define CTL_HEAD_MAX	(16u << 10)

struct ctl_req {
	const char	*method;	/* "GET", ... */
	const char	*path;		/* without the query */
	const char	*query;		/* after '?', or NULL */
	const char	*body;		/* NUL-terminated; bodylen bytes */
	size_t		 bodylen;
	uid_t		 uid;		/* the peer */
};

struct ctl_resp {
	int		 status;
	const char	*ctype;		/* static */
	char		*body;		/* malloc'd */
	size_t		 len;
	const char	*allow;		/* 405: the methods the path takes */
	uint64_t	 wait_gen;	/* answer once every worker runs this */
	int		 wait_upgrade;	/* answer once the upgrade ended */
};

/* Sets r to a JSON answer (steals j; NULL means out of memory: 500). */
void	ctl_reply_json(struct ctl_resp *r, int status, json_t *j);
/* {"error": message}, and "errors" when errs has any. */
void	ctl_reply_error(struct ctl_resp *r, int status,
	    const struct errlist *errs, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
void	ctl_reply_method(struct ctl_resp *r, const char *allow);

/*
 * Parses a JSON object body; on error answers 400 and returns NULL.
 * Every key of the object must be one of keys (NULL-terminated).
 */
json_t	*ctl_body_object(const struct ctl_req *q, struct ctl_resp *r,
	    const char *const *keys);

/* Handlers: each returns 1 when the path is its own (r is set), else 0. */
int	ctl_sandboxes(struct daemon *d, const struct ctl_req *q,
	    struct ctl_resp *r);
int	ctl_policies(struct daemon *d, const struct ctl_req *q,
	    struct ctl_resp *r);

int	ctl_secrets(struct daemon *d, const struct ctl_req *q,
	    struct ctl_resp *r);
int	ctl_tokens(struct daemon *d, const struct ctl_req *q,
	    struct ctl_resp *r);
/*
 * ctl_test.c: routes that make this process misbehave on purpose, for
 * the tests of privilege separation; compiled in with
 * --enable-test-hooks only (else it answers nothing: 0).
 */
int	ctl_test(struct daemon *d, const struct ctl_req *q,
	    struct ctl_resp *r);

/* fsvc_write (the monitor writes it, once confined), mode 0644. */
int	ctl_write_atomic(const char *path, const char *buf, size_t len);

struct ca;
/*
 * A registration read back from state_dir at start (sbstore.c): body as
 * a POST /v1/sandboxes would carry it, ca its CA (taken; NULL: a new one
 * is minted), created when it was first registered.  0, or -1 with why.
 */
int	ctl_sandbox_restore(struct daemon *d, json_t *body, struct ca **ca,
	    time_t created, char *why, size_t why_len);
/* A sandbox's sources as the API shows them: ["198.18.0.2/32", ...]. */
json_t	*ctl_sources_json(const struct sandbox *sb);
/*
 * ctl_secret.c: a budget list as JSON, each budget with what is spent of
 * it now: [{"secret", "requests_per_minute": {"limit", "used"},
 * "requests_per_day": {...}}]; sandbox NULL: the gateway's budgets.
 */
struct budget_list;
void	ctl_placeholder(struct daemon *d, const char *id,
	    const struct ctl_req *q, struct ctl_resp *r);
json_t	*ctl_budgets_json(struct daemon *d, const struct budget_list *l,
	    const char *sandbox);
/* t as "YYYY-MM-DDTHH:MM:SSZ". */
void	ctl_fmt_time(time_t t, char *buf, size_t len);

/* ctl_metrics.c: the Prometheus page, and connections open now. */
int	ctl_metrics_render(struct daemon *d, struct evbuffer *out);
unsigned long long ctl_open_conns(const struct state *st);
/* Control API requests answered with status so far. */
unsigned long long ctl_requests_by_status(const struct ctl *ctl, int status);

/* Lifecycle and change records (audit.c), with the peer's uid. */
void	ctl_audit(struct daemon *d, const char *type, uid_t uid, json_t *rec);
struct sandbox;
/* A sandbox_mode record of sb's mode now (uid < 0: none). */
void	ctl_audit_mode(struct daemon *d, const struct sandbox *sb,
	    int was_observing, const char *cause, long uid);

#endif
