/* config.c: the main configuration, sluiced.yaml. */
#include "autoconf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "util/addr.h"
#include "util/err.h"
#include "util/log.h"
#include "util/yamltree.h"
#include "conf/config.h"
#include "conf/policy.h"

#define DEFAULT_CONTROL		"/run/sluice/control.sock"
#define DEFAULT_STATE_DIR	"/var/lib/sluice/state"
#define DEFAULT_UPSTREAM_CA	"/etc/ssl/certs/ca-certificates.crt"
#define MAX_DURATION_MS		(24u * 3600u * 1000u)

/* Replaces *dst (a default or NULL) with map[key] when present and valid. */
static void
get_string(struct ycheck *x, const struct ynode *map, const char *key,
    const char *path, char **dst)
{
	const struct ynode *n;
	char *s;

	if ((n = ynode_get(map, key)) == NULL || !ycheck_string(x, n, path))
		return;
	if ((s = strdup(n->scalar)) == NULL) {
		x->nomem = 1;
		return;
	}
	free(*dst);
	*dst = s;
}

/* map[key] when it is a MAP; an error when it is something else. */
static const struct ynode *
get_map(struct ycheck *x, const struct ynode *map, const char *key,
    const char *path)
{
	const struct ynode *n;

	if ((n = ynode_get(map, key)) == NULL)
		return NULL;
	if (n->kind != YNODE_MAP) {
		ycheck_err(x, n->line, n->col, "'%s' must be a map", path);
		return NULL;
	}
	return n;
}

static const struct ynode *
get_seq(struct ycheck *x, const struct ynode *map, const char *key,
    const char *path)
{
	const struct ynode *n;

	if ((n = ynode_get(map, key)) == NULL)
		return NULL;
	if (n->kind != YNODE_SEQ) {
		ycheck_err(x, n->line, n->col, "'%s' must be a list", path);
		return NULL;
	}
	return n;
}

/*
 * "10s", "500ms", "5m", "1h" or a bare number of seconds, into
 * milliseconds; 1ms to 24h.
 */
int
config_parse_duration(const char *s, unsigned *ms)
{
	static const struct { const char *unit; unsigned long long mult; } u[] = {
		{ "", 1000 }, { "s", 1000 }, { "ms", 1 }, { "m", 60000 },
		{ "h", 3600000 },
	};
	char digits[16];
	unsigned long long v = 0;
	size_t n, i;

	for (n = 0; s[n] >= '0' && s[n] <= '9'; n++)
		;
	if (n == 0 || n >= sizeof(digits))
		return SL_ERR_INVALID;
	memcpy(digits, s, n);
	digits[n] = '\0';
	for (i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (strcmp(s + n, u[i].unit) == 0)
			break;
	if (i == sizeof(u) / sizeof(u[0]))
		return SL_ERR_INVALID;
	if (yparse_uint(digits, MAX_DURATION_MS, &v) != 0 ||
	    v * u[i].mult > MAX_DURATION_MS)
		return SL_ERR_TOO_BIG;
	if (v == 0)
		return SL_ERR_INVALID;
	*ms = (unsigned)(v * u[i].mult);
	return 0;
}

static void
get_duration(struct ycheck *x, const struct ynode *map, const char *parent,
    const char *key, unsigned *dst)
{
	const struct ynode *n;
	char path[64], e[80];
	unsigned ms;
	int r;

	snprintf(path, sizeof(path), "%s%s%s", parent ? parent : "",
	    parent ? "." : "", key);
	if ((n = ynode_get(map, key)) == NULL || !ycheck_string(x, n, path))
		return;
	if ((r = config_parse_duration(n->scalar, &ms)) == SL_ERR_TOO_BIG) {
		ycheck_err(x, n->line, n->col, "'%s': duration '%s' is over 24h",
		    path, yesc(n->scalar, e, sizeof(e)));
		return;
	}
	if (r != 0) {
		ycheck_err(x, n->line, n->col, "'%s': invalid duration '%s' "
		    "(a positive number with ms, s, m or h; bare is seconds)",
		    path, yesc(n->scalar, e, sizeof(e)));
		return;
	}
	*dst = ms;
}

/*
 * "ADDR:PORT" with IPv6 in brackets; with bare_port53, a bare address (with
 * or without brackets) means port 53.
 */
static int
parse_endpoint(const char *s, int bare_port53, struct endpoint *ep)
{
	struct sl_addr a;
	char inner[ADDR_STRLEN];
	size_t n = strlen(s);
	uint16_t port;

	memset(ep, 0, sizeof(*ep));
	if (n >= sizeof(ep->text))
		return SL_ERR_INVALID;
	if (bare_port53 && addr_parse(s, &a) == 0) {
		ep->len = addr_to_sockaddr(&a, 53, &ep->ss);
	} else if (bare_port53 && n > 2 && s[0] == '[' && s[n - 1] == ']' &&
	    n - 2 < sizeof(inner)) {
		memcpy(inner, s + 1, n - 2);
		inner[n - 2] = '\0';
		if (addr_parse(inner, &a) != 0 || a.family != AF_INET6)
			return SL_ERR_INVALID;
		ep->len = addr_to_sockaddr(&a, 53, &ep->ss);
	} else if (addr_parse_endpoint(s, &ep->ss, &ep->len) != 0)
		return SL_ERR_INVALID;
	if (addr_from_sockaddr((struct sockaddr *)&ep->ss, ep->len, &a,
	    &port) != 0 || port == 0)
		return SL_ERR_INVALID;
	memcpy(ep->text, s, n + 1);
	return 0;
}

static void
endpoint_item(struct ycheck *x, const struct ynode *n, const char *path,
    int bare_port53, struct endpoint *ep, int *ok)
{
	char e[80];

	*ok = 0;
	if (!ycheck_string(x, n, path))
		return;
	if (parse_endpoint(n->scalar, bare_port53, ep) != 0) {
		ycheck_err(x, n->line, n->col, "'%s': bad endpoint '%s' (%s)", path,
		    yesc(n->scalar, e, sizeof(e)), bare_port53 ?
		    "ADDR, ADDR:PORT or [IPv6]:PORT" :
		    "ADDR:PORT, or [IPv6]:PORT");
		return;
	}
	*ok = 1;
}

static void
get_endpoints(struct ycheck *x, const struct ynode *map, const char *key,
    const char *path, int bare_port53, struct endpoint **dst, size_t *ndst)
{
	const struct ynode *seq;
	struct endpoint *eps;
	size_t i, n = 0;
	int ok;

	if ((seq = get_seq(x, map, key, path)) == NULL || seq->n == 0)
		return;
	if ((eps = calloc(seq->n, sizeof(*eps))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < seq->n; i++) {
		endpoint_item(x, seq->items[i], path, bare_port53, &eps[n], &ok);
		if (ok)
			n++;
	}
	*dst = eps;
	*ndst = n;
}

static void
parse_listen(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "transparent", "proxy", "dns",
	    "control", "metrics", "jwks", NULL };
	const struct ynode *l, *n;
	struct sockaddr_un sun;
	struct endpoint ep;
	int ok;

	if ((l = get_map(x, root, "listen", "listen")) == NULL)
		return;
	ycheck_keys(x, l, "listen", keys);
	get_endpoints(x, l, "transparent", "listen.transparent", 0,
	    &c->transparent, &c->ntransparent);
	get_endpoints(x, l, "proxy", "listen.proxy", 0, &c->proxy, &c->nproxy);
	get_endpoints(x, l, "dns", "listen.dns", 0, &c->dns, &c->ndns);
	if ((n = ynode_get(l, "metrics")) != NULL) {
		endpoint_item(x, n, "listen.metrics", 0, &ep, &ok);
		if (ok && (c->metrics = malloc(sizeof(ep))) == NULL)
			x->nomem = 1;
		else if (ok)
			*c->metrics = ep;
	}
	if ((n = ynode_get(l, "jwks")) != NULL) {
		endpoint_item(x, n, "listen.jwks", 0, &ep, &ok);
		if (ok && (c->jwks = malloc(sizeof(ep))) == NULL)
			x->nomem = 1;
		else if (ok)
			*c->jwks = ep;
	}
	get_string(x, l, "control", "listen.control", &c->control);
	if ((n = ynode_get(l, "control")) != NULL && c->control != NULL &&
	    strlen(c->control) >= sizeof(sun.sun_path))
		ycheck_err(x, n->line, n->col, "'listen.control': path longer "
		    "than %zu bytes", sizeof(sun.sun_path) - 1);
}

/* The same address and port may be bound once. */
static void
check_endpoint_clash(struct ycheck *x, const struct ynode *root,
    const struct config *c)
{
	const struct endpoint *all[5] = { c->transparent, c->proxy, c->dns,
	    c->metrics, c->jwks };
	const size_t nall[5] = { c->ntransparent, c->nproxy, c->ndns,
	    c->metrics != NULL, c->jwks != NULL };
	const struct endpoint *a, *b;
	const struct ynode *l = ynode_get(root, "listen");
	size_t i, j, k, m;

	if (l == NULL)
		l = root;

	for (i = 0; i < 5; i++) {
		for (j = 0; j < nall[i]; j++) {
			a = &all[i][j];
			for (k = i; k < 5; k++) {
				for (m = (k == i ? j + 1 : 0); m < nall[k]; m++) {
					b = &all[k][m];
					if (a->len != b->len ||
					    memcmp(&a->ss, &b->ss, a->len) != 0)
						continue;
					ycheck_err(x, l->line, l->col, "listen: "
					    "endpoint %s is used twice", a->text);
				}
			}
		}
	}
}

/* A path, or a non-empty list of paths (gateway_key, signing_key). */
static void
get_paths(struct ycheck *x, const struct ynode *root, const char *key,
    char ***out, size_t *nout)
{
	const struct ynode *n, *it;
	size_t i, cnt = 0;

	if ((n = ynode_get(root, key)) == NULL)
		return;
	if (n->kind == YNODE_SCALAR) {
		if (!ycheck_string(x, n, key))
			return;
		if ((*out = calloc(1, sizeof(char *))) == NULL ||
		    ((*out)[0] = strdup(n->scalar)) == NULL) {
			x->nomem = 1;
			return;
		}
		*nout = 1;
		return;
	}
	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col,
		    "'%s' must be a path or a non-empty list of paths", key);
		return;
	}
	if ((*out = calloc(n->n, sizeof(char *))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->items[i];
		if (!ycheck_string(x, it, key))
			continue;
		if (((*out)[cnt] = strdup(it->scalar)) == NULL) {
			x->nomem = 1;
			break;
		}
		cnt++;
	}
	*nout = cnt;
}

/* A true/false key; *dst is left alone when absent. */
static void
get_bool(struct ycheck *x, const struct ynode *map, const char *parent,
    const char *key, int *dst)
{
	const struct ynode *n;
	char path[64];

	if (parent != NULL)
		snprintf(path, sizeof(path), "%s.%s", parent, key);
	else
		snprintf(path, sizeof(path), "%s", key);
	if ((n = ynode_get(map, key)) == NULL || !ycheck_string(x, n, path))
		return;
	if (strcmp(n->scalar, "true") == 0)
		*dst = 1;
	else if (strcmp(n->scalar, "false") == 0)
		*dst = 0;
	else
		ycheck_err(x, n->line, n->col, "'%s' must be true or false", path);
}

static void
parse_audit(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "path", "fsync", "max_size_mb",
	    "queue", "queue_full", "checkpoint_records", "checkpoint_interval",
	    "syslog", NULL };
	const struct ynode *a, *n;
	char e[80];

	if ((a = get_map(x, root, "audit", "audit")) == NULL)
		return;
	ycheck_keys(x, a, "audit", keys);
	get_string(x, a, "path", "audit.path", &c->audit_path);
	ycheck_uint(x, a, "audit", "max_size_mb", 0, 1u << 20, &c->audit.max_mb);
	ycheck_uint(x, a, "audit", "queue", 16, 1u << 22, &c->audit.queue);
	ycheck_uint(x, a, "audit", "checkpoint_records", 1, 1u << 30,
	    &c->audit.checkpoint_records);
	get_duration(x, a, "audit", "checkpoint_interval",
	    &c->audit.checkpoint_ms);
	get_bool(x, a, "audit", "syslog", &c->audit.syslog);
	if ((n = ynode_get(a, "queue_full")) != NULL &&
	    ycheck_string(x, n, "audit.queue_full")) {
		if (strcmp(n->scalar, "wait") == 0)
			c->audit.queue_refuse = 0;
		else if (strcmp(n->scalar, "refuse") == 0)
			c->audit.queue_refuse = 1;
		else
			ycheck_err(x, n->line, n->col, "'audit.queue_full': '%s' "
			    "is not one of wait, refuse",
			    yesc(n->scalar, e, sizeof(e)));
	}
	if ((n = ynode_get(a, "fsync")) == NULL ||
	    !ycheck_string(x, n, "audit.fsync"))
		return;
	if (strcmp(n->scalar, "always") == 0)
		c->audit_fsync = AUDIT_FSYNC_ALWAYS;
	else if (strcmp(n->scalar, "batch") == 0)
		c->audit_fsync = AUDIT_FSYNC_BATCH;
	else if (strcmp(n->scalar, "never") == 0)
		c->audit_fsync = AUDIT_FSYNC_NEVER;
	else
		ycheck_err(x, n->line, n->col, "'audit.fsync': '%s' is not one of "
		    "always, batch, never", yesc(n->scalar, e, sizeof(e)));
}

/* log: {format: text|journal|json}; absent: journal under journald, else text. */
static void
parse_log(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "format", NULL };
	static const char *const names[] = { "text", "journal", "json" };
	const struct ynode *m, *n;
	char e[80];
	int i;

	c->log_format = -1;
	if ((m = get_map(x, root, "log", "log")) == NULL)
		return;
	ycheck_keys(x, m, "log", keys);
	if ((n = ynode_get(m, "format")) == NULL ||
	    !ycheck_string(x, n, "log.format"))
		return;
	for (i = 0; i < 3; i++)
		if (strcmp(n->scalar, names[i]) == 0)
			c->log_format = i;
	if (c->log_format < 0)
		ycheck_err(x, n->line, n->col, "'log.format': '%s' is not one of "
		    "text, journal, json", yesc(n->scalar, e, sizeof(e)));
}

static void
parse_workers(struct ycheck *x, const struct ynode *root, struct config *c)
{
	const struct ynode *n;
	unsigned long long v = 0;
	char e[80];

	if ((n = ynode_get(root, "workers")) == NULL ||
	    !ycheck_string(x, n, "workers"))
		return;
	if (strcmp(n->scalar, "auto") == 0) {
		c->workers = 0;
		return;
	}
	if (yparse_uint(n->scalar, 256, &v) != 0 || v == 0) {
		ycheck_err(x, n->line, n->col,
		    "'workers': '%s' is neither auto nor a number 1..256",
		    yesc(n->scalar, e, sizeof(e)));
		return;
	}
	c->workers = (unsigned)v;
}

static void
parse_limits(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "connections", "dns_qps",
	    "header_bytes", "client_hello_bytes", NULL };
	const struct ynode *l;

	if ((l = get_map(x, root, "limits", "limits")) == NULL)
		return;
	ycheck_keys(x, l, "limits", keys);
	ycheck_uint(x, l, "limits", "connections", 1, 1000000, &c->limits.connections);
	ycheck_uint(x, l, "limits", "dns_qps", 1, 1000000, &c->limits.dns_qps);
	ycheck_uint(x, l, "limits", "header_bytes", 1024, 1048576, &c->limits.header_bytes);
	ycheck_uint(x, l, "limits", "client_hello_bytes", 512, 65536,
	    &c->limits.client_hello_bytes);
}

static void
parse_ca(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "validity_days", "name_constraints",
	    NULL };
	const struct ynode *m;

	if ((m = get_map(x, root, "ca", "ca")) == NULL)
		return;
	ycheck_keys(x, m, "ca", keys);
	ycheck_uint(x, m, "ca", "validity_days", 1, 365, &c->ca_validity_days);
	get_bool(x, m, "ca", "name_constraints", &c->ca_name_constraints);
}

static void
parse_timeouts(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "handshake", "idle", "connect",
	    "first_byte", "drain", NULL };
	const struct ynode *t;

	if ((t = get_map(x, root, "timeouts", "timeouts")) == NULL)
		return;
	ycheck_keys(x, t, "timeouts", keys);
	get_duration(x, t, "timeouts", "handshake", &c->timeouts.handshake);
	get_duration(x, t, "timeouts", "idle", &c->timeouts.idle);
	get_duration(x, t, "timeouts", "connect", &c->timeouts.connect);
	get_duration(x, t, "timeouts", "first_byte", &c->timeouts.first_byte);
	get_duration(x, t, "timeouts", "drain", &c->timeouts.drain);
}

static void
sandbox_free_fields(struct config_sandbox *s)
{
	free(s->id);
	free(s->team);
	free(s->project);
	free(s->policy);
	free(s->sources);
	free(s->plens);
}

static void
parse_sources(struct ycheck *x, const struct ynode *m, struct config_sandbox *s)
{
	const struct ynode *seq, *it;
	struct sl_addr a;
	unsigned plen;
	char e[80];
	size_t i;

	if ((seq = get_seq(x, m, "sources", "sandboxes.sources")) == NULL)
		return;
	if (seq->n == 0) {
		ycheck_err(x, seq->line, seq->col, "'sandboxes.sources' is empty");
		return;
	}
	if ((s->sources = calloc(seq->n, sizeof(*s->sources))) == NULL ||
	    (s->plens = calloc(seq->n, sizeof(*s->plens))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < seq->n; i++) {
		it = seq->items[i];
		if (!ycheck_string(x, it, "sandboxes.sources"))
			continue;
		if (addr_parse_prefix(it->scalar, &a, &plen) != 0 ||
		    policy_prefix_canonical(&a, plen, &s->sources[s->nsources],
		    &s->plens[s->nsources]) != 0) {
			ycheck_err(x, it->line, it->col, "'sandboxes.sources': bad "
			    "address or prefix '%s'", yesc(it->scalar, e,
			    sizeof(e)));
			continue;
		}
		s->nsources++;
	}
}

static void
parse_sandbox(struct ycheck *x, const struct ynode *m, struct config_sandbox *s)
{
	static const char *const keys[] = { "id", "sources", "policy", "team",
	    "project", NULL };
	const struct ynode *n;
	char e[80];

	s->line = m->line;
	ycheck_keys(x, m, "sandboxes", keys);
	get_string(x, m, "id", "sandboxes.id", &s->id);
	if ((n = ynode_get(m, "id")) == NULL)
		ycheck_err(x, m->line, m->col, "sandbox needs an 'id'");
	else if (s->id != NULL && !policy_name_valid(s->id))
		ycheck_err(x, n->line, n->col, "'sandboxes.id': '%s' is not a valid "
		    "id ([A-Za-z0-9][A-Za-z0-9._-]{0,62})",
		    yesc(s->id, e, sizeof(e)));
	get_string(x, m, "policy", "sandboxes.policy", &s->policy);
	if ((n = ynode_get(m, "policy")) == NULL)
		ycheck_err(x, m->line, m->col, "sandbox needs a 'policy'");
	else if (s->policy != NULL && !policy_name_valid(s->policy))
		ycheck_err(x, n->line, n->col, "'sandboxes.policy': '%s' is not a "
		    "valid policy name", yesc(s->policy, e, sizeof(e)));
	get_string(x, m, "team", "sandboxes.team", &s->team);
	get_string(x, m, "project", "sandboxes.project", &s->project);
	if (ynode_get(m, "sources") == NULL)
		ycheck_err(x, m->line, m->col, "sandbox needs 'sources'");
	parse_sources(x, m, s);
}

struct srcref {
	const struct sl_addr	*addr;
	unsigned		 plen;
	size_t			 sb;	/* sandbox index */
	size_t			 idx;	/* source index in it */
};

static int
srcref_cmp(const void *a, const void *b)
{
	const struct srcref *x = a, *y = b;
	int c;

	if (x->addr->family != y->addr->family)
		return x->addr->family < y->addr->family ? -1 : 1;
	if ((c = memcmp(x->addr->bytes, y->addr->bytes, 16)) != 0)
		return c;
	if (x->plen != y->plen)
		return x->plen < y->plen ? -1 : 1;
	if (x->sb != y->sb)
		return x->sb < y->sb ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct idref {
	const char	*id;
	size_t		 sb;
};

static int
idref_cmp(const void *a, const void *b)
{
	const struct idref *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	if (c != 0)
		return c;
	return x->sb < y->sb ? -1 : x->sb > y->sb;
}

/*
 * Ids are unique, and no source is listed twice (in one sandbox or two).
 * Sorted rather than compared pairwise, so long lists stay cheap.
 */
static void
check_sandbox_clash(struct ycheck *x, const struct ynode *seq,
    const struct config *c)
{
	struct srcref *srcs = NULL;
	struct idref *ids = NULL;
	const struct config_sandbox *s;
	char e[80], t[ADDR_STRLEN];
	size_t i, k, nsrc = 0, nid = 0, first;

	for (i = 0; i < c->nsandboxes; i++)
		nsrc += c->sandboxes[i].nsources;
	if ((ids = calloc(c->nsandboxes, sizeof(*ids))) == NULL ||
	    (srcs = calloc(nsrc ? nsrc : 1, sizeof(*srcs))) == NULL) {
		x->nomem = 1;
		goto out;
	}
	nsrc = 0;
	for (i = 0; i < c->nsandboxes; i++) {
		s = &c->sandboxes[i];
		if (s->id != NULL) {
			ids[nid].id = s->id;
			ids[nid++].sb = i;
		}
		for (k = 0; k < s->nsources; k++) {
			srcs[nsrc].addr = &s->sources[k];
			srcs[nsrc].plen = s->plens[k];
			srcs[nsrc].sb = i;
			srcs[nsrc++].idx = k;
		}
	}
	qsort(ids, nid, sizeof(*ids), idref_cmp);
	for (i = 1, first = 0; i < nid; i++) {
		if (strcmp(ids[i].id, ids[first].id) != 0) {
			first = i;
			continue;
		}
		ycheck_err(x, c->sandboxes[ids[i].sb].line,
		    seq->items[ids[i].sb]->col, "duplicate sandbox id '%s' "
		    "(first at line %u)", yesc(ids[i].id, e, sizeof(e)),
		    c->sandboxes[ids[first].sb].line);
	}
	qsort(srcs, nsrc, sizeof(*srcs), srcref_cmp);
	for (i = 1, first = 0; i < nsrc; i++) {
		if (srcs[i].plen != srcs[first].plen ||
		    !addr_equal(srcs[i].addr, srcs[first].addr)) {
			first = i;
			continue;
		}
		ycheck_err(x, c->sandboxes[srcs[i].sb].line,
		    seq->items[srcs[i].sb]->col, "source %s/%u is listed twice "
		    "(also at line %u)", addr_format(srcs[i].addr, t, sizeof(t)),
		    srcs[i].plen, c->sandboxes[srcs[first].sb].line);
	}
 out:
	free(ids);
	free(srcs);
}

static void
parse_sandboxes(struct ycheck *x, const struct ynode *root, struct config *c)
{
	const struct ynode *seq, *it;
	size_t i;

	if ((seq = get_seq(x, root, "sandboxes", "sandboxes")) == NULL ||
	    seq->n == 0)
		return;
	if ((c->sandboxes = calloc(seq->n, sizeof(*c->sandboxes))) == NULL) {
		x->nomem = 1;
		return;
	}
	c->nsandboxes = seq->n;
	for (i = 0; i < seq->n; i++) {
		it = seq->items[i];
		c->sandboxes[i].line = it->line;
		if (it->kind != YNODE_MAP) {
			ycheck_err(x, it->line, it->col,
			    "'sandboxes' items must be maps");
			continue;
		}
		parse_sandbox(x, it, &c->sandboxes[i]);
	}
	check_sandbox_clash(x, seq, c);
}

static void
parse_issuer(struct ycheck *x, const struct ynode *root, struct config *c)
{
	const struct ynode *n;

	get_string(x, root, "issuer", "issuer", &c->issuer);
	if ((n = ynode_get(root, "issuer")) != NULL && c->issuer != NULL &&
	    (strncmp(c->issuer, "https://", 8) != 0 || c->issuer[8] == '\0' ||
	    strpbrk(c->issuer, " \t\r\n") != NULL))
		ycheck_err(x, n->line, n->col, "'issuer' must be an https:// URL");
}

static int
absent_or_empty(const struct ynode *n)
{
	return n == NULL || (n->kind == YNODE_SEQ && n->n == 0);
}

/* Missing keys are reported at the map that should hold them. */
static void
check_required(struct ycheck *x, const struct ynode *root)
{
	const struct ynode *l = ynode_get(root, "listen");
	unsigned line = 1, col = 1;

	if (root != NULL) {
		line = root->line;
		col = root->col;
	}
	if (l == NULL)
		ycheck_err(x, line, col, "missing required key 'listen' (with "
		    "'transparent' or 'proxy')");
	else if (l->kind == YNODE_MAP &&
	    absent_or_empty(ynode_get(l, "transparent")) &&
	    absent_or_empty(ynode_get(l, "proxy")))
		ycheck_err(x, l->line, l->col, "missing required key "
		    "'listen.transparent' or 'listen.proxy'");
	if (absent_or_empty(ynode_get(root, "resolvers")))
		ycheck_err(x, line, col, "missing required key 'resolvers'");
	if (ynode_get(root, "policy_dir") == NULL)
		ycheck_err(x, line, col, "missing required key 'policy_dir'");
}

static int
config_defaults(struct config *c, const char *file)
{
	if ((c->path = strdup(file)) == NULL ||
	    (c->control = strdup(DEFAULT_CONTROL)) == NULL ||
	    (c->state_dir = strdup(DEFAULT_STATE_DIR)) == NULL ||
	    (c->upstream_ca = strdup(DEFAULT_UPSTREAM_CA)) == NULL)
		return SL_ERR_NOMEM;
	c->audit_fsync = AUDIT_FSYNC_BATCH;
	c->log_format = -1;
	c->workers = 0;
	c->limits.connections = 1024;
	c->limits.dns_qps = 200;
	c->limits.header_bytes = 65536;
	c->limits.client_hello_bytes = 16384;
	c->timeouts.handshake = 10000;
	c->timeouts.idle = 300000;
	c->timeouts.connect = 10000;
	c->timeouts.first_byte = 1000;
	c->timeouts.drain = 10000;
	c->ca_validity_days = 7;
	c->token_ttl_ms = 60000;
	c->audit.queue = 65536;
	c->audit.checkpoint_records = 1000;
	c->audit.checkpoint_ms = 60000;
	return 0;
}

/* The line of map[key], or 0 when it is not there. */
static unsigned
key_line(const struct ynode *map, const char *key)
{
	const struct ynode *n = ynode_get(map, key);

	return n != NULL ? n->line : 0;
}

static void
config_walk(struct ycheck *x, const struct ynode *root, struct config *c)
{
	static const char *const keys[] = { "listen", "resolvers", "policy_dir",
	    "secret_dir", "gateway_key", "signing_key", "issuer", "upstream_ca",
	    "audit", "workers", "user", "limits", "timeouts", "sandboxes",
	    "control_group", "ca", "token_ttl", "state_dir", "log",
	    "watch_policies", "budgets", NULL };

	if (root != NULL && root->kind != YNODE_MAP) {
		ycheck_err(x, root->line, root->col,
		    "the configuration must be a map of keys");
		return;
	}
	if (root != NULL) {
		ycheck_keys(x, root, NULL, keys);
		parse_listen(x, root, c);
		get_endpoints(x, root, "resolvers", "resolvers", 1,
		    &c->resolvers, &c->nresolvers);
		get_string(x, root, "policy_dir", "policy_dir", &c->policy_dir);
		get_bool(x, root, NULL, "watch_policies", &c->watch_policies);
		if (ynode_get(root, "budgets") != NULL)
			budget_list_parse(x, ynode_get(root, "budgets"),
			    "budgets", &c->budgets);
		get_string(x, root, "state_dir", "state_dir", &c->state_dir);
		get_string(x, root, "secret_dir", "secret_dir", &c->secret_dir);
		get_paths(x, root, "gateway_key", &c->gateway_keys,
		    &c->ngateway_keys);
		get_paths(x, root, "signing_key", &c->signing_keys,
		    &c->nsigning_keys);
		if (c->nsigning_keys > 0)
			c->signing_key = c->signing_keys[0];
		parse_issuer(x, root, c);
		get_duration(x, root, NULL, "token_ttl", &c->token_ttl_ms);
		get_string(x, root, "upstream_ca", "upstream_ca",
		    &c->upstream_ca);
		parse_audit(x, root, c);
		parse_log(x, root, c);
		parse_workers(x, root, c);
		get_string(x, root, "user", "user", &c->user);
		c->lines.user = key_line(root, "user");
		c->lines.control_group = key_line(root, "control_group");
		c->lines.upstream_ca = key_line(root, "upstream_ca");
		c->lines.secret_dir = key_line(root, "secret_dir");
		parse_limits(x, root, c);
		parse_timeouts(x, root, c);
		parse_sandboxes(x, root, c);
		get_string(x, root, "control_group", "control_group",
		    &c->control_group);
		parse_ca(x, root, c);
		check_endpoint_clash(x, root, c);
	}
	check_required(x, root);
}

/*
 * A relative path names a file beside the configuration, not one in the
 * current directory (which a service manager sets, not the operator).
 */
static int
anchor(const char *file, char **p)
{
	const char *slash = strrchr(file, '/');
	size_t dlen, plen;
	char *n;

	if (*p == NULL || (*p)[0] == '/' || (*p)[0] == '\0' || slash == NULL)
		return 0;
	dlen = (size_t)(slash - file) + 1;
	plen = strlen(*p);
	if ((n = malloc(dlen + plen + 1)) == NULL)
		return SL_ERR_NOMEM;
	memcpy(n, file, dlen);
	memcpy(n + dlen, *p, plen + 1);
	free(*p);
	*p = n;
	return 0;
}

static int
anchor_paths(struct config *c)
{
	char **one[] = { &c->control, &c->policy_dir, &c->state_dir,
	    &c->secret_dir, &c->upstream_ca, &c->audit_path };
	size_t i;
	int r = 0;

	for (i = 0; i < sizeof(one) / sizeof(one[0]); i++)
		r |= anchor(c->path, one[i]);
	for (i = 0; i < c->ngateway_keys; i++)
		r |= anchor(c->path, &c->gateway_keys[i]);
	for (i = 0; i < c->nsigning_keys; i++)
		r |= anchor(c->path, &c->signing_keys[i]);
	if (c->nsigning_keys > 0)
		c->signing_key = c->signing_keys[0];
	return r != 0 ? SL_ERR_NOMEM : 0;
}

int
config_parse(const char *file, const char *buf, size_t len,
    struct config **out, struct errlist *errs)
{
	struct ydoc *doc = NULL;
	struct config *c = NULL;
	struct ycheck x = { file, errs, 0, 0 };
	size_t first = errs != NULL ? errs->n : 0;
	int r = SL_ERR_INTERNAL;

	if (len > CONFIG_MAX_BYTES) {
		if (errs != NULL)
			errlist_add(errs, file, 0, 0, "larger than %u bytes",
			    CONFIG_MAX_BYTES);
		r = SL_ERR_TOO_BIG;
		goto out;
	}
	if ((r = ydoc_parse(file, buf, len, &doc, errs)) != 0)
		goto out;
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (r = config_defaults(c, file)) != 0) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	config_walk(&x, doc->root, c);
	if (x.nomem) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (x.nerr != 0) {
		ycheck_sort(&x, first);
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = anchor_paths(c)) != 0)
		goto out;
	*out = c;
	c = NULL;
	r = 0;
 out:
	ydoc_free(doc);
	config_free(c);
	return r;
}

int
config_load(const char *path, struct config **out, struct errlist *errs)
{
	char *buf = NULL;
	size_t len = 0;
	int r = SL_ERR_INTERNAL;

	if ((r = ydoc_read_file(path, CONFIG_MAX_BYTES, &buf, &len, errs)) != 0)
		goto out;
	r = config_parse(path, buf, len, out, errs);
 out:
	free(buf);
	return r;
}

void
config_free(struct config *c)
{
	size_t i;

	if (c == NULL)
		return;
	free(c->path);
	free(c->transparent);
	free(c->proxy);
	free(c->dns);
	free(c->control);
	free(c->control_group);
	free(c->metrics);
	free(c->resolvers);
	free(c->policy_dir);
	free(c->state_dir);
	free(c->secret_dir);
	for (i = 0; i < c->ngateway_keys; i++)
		free(c->gateway_keys[i]);
	free(c->gateway_keys);
	for (i = 0; i < c->nsigning_keys; i++)
		free(c->signing_keys[i]);
	free(c->signing_keys);
	free(c->issuer);
	free(c->jwks);
	free(c->upstream_ca);
	free(c->audit_path);
	free(c->user);
	budget_list_free(&c->budgets);
	for (i = 0; i < c->nsandboxes; i++)
		sandbox_free_fields(&c->sandboxes[i]);
	free(c->sandboxes);
	free(c);
}
