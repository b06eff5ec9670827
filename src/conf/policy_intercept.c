/* policy_intercept.c: parses and validates a policy's intercept rules. */
#include "autoconf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "util/err.h"
#include "util/yamltree.h"
#include "conf/policy.h"
#include "conf/policy_int.h"


/* ------------------------------------------------------------------ */
/* Small validators                                                    */

/* RFC 9110 tchar. */
static int
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int
token_valid(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!is_tchar((unsigned char)*s))
			return 0;
	return 1;
}

/* A header field value or a glob for one: no control bytes but HTAB. */
static int
field_value_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
			return 0;
	return 1;
}

/* The length of the secret name at s: [A-Za-z0-9._-] (any length). */
static size_t
secret_name_len(const char *s)
{
	size_t n;

	for (n = 0; isalnum((unsigned char)s[n]) || s[n] == '.' ||
	    s[n] == '_' || s[n] == '-'; n++)
		;
	return n;
}

/*
 * Checks {{secret:NAME}}, {{token:NAME}} and their "| base64" forms
 * (spaces allowed inside the braces).  Returns NULL or why the template is bad.
 */
static const char *
template_check(const char *s)
{
	const char *p = s, *q;
	size_t n;

	while (*p != '\0') {
		if (p[0] == '}' && p[1] == '}')
			return "'}}' without '{{'";
		if (p[0] != '{' || p[1] != '{') {
			p++;
			continue;
		}
		q = p + 2;
		while (*q == ' ')
			q++;
		if (strncmp(q, "secret:", 7) == 0) {
			q += 7;
			n = secret_name_len(q);
			if (n == 0 || n > SECRET_NAME_MAX)
				return "a secret name is 1 to 64 of "
				    "[A-Za-z0-9._-]";
		} else if (strncmp(q, "token:", 6) == 0) {
			q += 6;
			n = secret_name_len(q);
			if (n == 0 || n > 63)
				return "a token name is 1 to 63 of "
				    "[A-Za-z0-9._-]";
		} else
			return "'{{' must open {{secret:NAME}} or "
			    "{{token:NAME}}";
		q += n;
		while (*q == ' ')
			q++;
		if (*q == '|') {
			q++;
			while (*q == ' ')
				q++;
			if (strncmp(q, "base64", 6) != 0)
				return "the only filter is '| base64'";
			q += 6;
			while (*q == ' ')
				q++;
		}
		if (q[0] != '}' || q[1] != '}')
			return "a placeholder must end with '}}'";
		p = q + 2;
	}
	return NULL;
}

const char *
policy_template_next(const char *s, struct tmpl_ref *ref)
{
	const char *p = strstr(s, "{{"), *q;

	if (p == NULL)
		return NULL;
	ref->at = p;
	q = p + 2;
	while (*q == ' ')
		q++;
	ref->token = *q == 't';
	q += ref->token ? 6 : 7;	/* "token:" or "secret:", checked */
	ref->name = q;
	ref->len = secret_name_len(q);
	q += ref->len;
	while (*q == ' ')
		q++;
	ref->b64 = *q == '|';
	if (ref->b64) {
		q++;
		while (*q == ' ')
			q++;
		q += 6;			/* "base64" */
		while (*q == ' ')
			q++;
	}
	return q + 2;			/* past "}}" */
}

void
policy_link_tokens(struct ycheck *x, struct policy *p)
{
	const struct mint_source *src;
	struct intercept_rule *r;
	struct tmpl_ref ref;
	const char *t;
	size_t i, j, k;

	for (i = 0; i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		for (j = 0; j < r->ninject_set; j++)
			for (t = r->inject_set[j].value; t != NULL &&
			    (t = policy_template_next(t, &ref)) != NULL;) {
				if (!ref.token)
					continue;
				if ((src = token_find(&p->tokens, ref.name,
				    ref.len)) == NULL) {
					ycheck_err(x, r->line, 1, "intercept "
					    "rule '%s': {{token:%.*s}} names no "
					    "source of 'tokens'", r->name,
					    (int)ref.len, ref.name);
					continue;
				}
				for (k = 0; k < r->ntokens &&
				    r->tokens[k] != src; k++)
					;
				if (k < r->ntokens)
					continue;
				if (r->ntokens == POLICY_MAX_TOKEN_REFS) {
					ycheck_err(x, r->line, 1, "intercept "
					    "rule '%s' names more than %d token "
					    "sources", r->name,
					    POLICY_MAX_TOKEN_REFS);
					break;
				}
				r->tokens[r->ntokens++] = src;
			}
	}
}

/*
 * A path glob: starts with '/'; a segment is "**" (any number of
 * segments) or bytes where '*' is any run within the segment ("*" alone:
 * one non-empty segment); no empty or dot segments inside, no query or
 * fragment, no control bytes, '%' only as a valid escape.  Returns NULL
 * or why it is bad.
 */
static const char *
path_glob_check(const char *s)
{
	const char *seg, *end;
	size_t n, i;

	if (s[0] != '/')
		return "a path must start with '/'";
	for (seg = s + 1;; seg = end + 1) {
		end = strchr(seg, '/');
		n = end != NULL ? (size_t)(end - seg) : strlen(seg);
		if (n == 0 && end != NULL)
			return "empty segment ('//')";
		if ((n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return "dot segments are not allowed";
		if (n > 2 && memmem(seg, n, "**", 2) != NULL)
			return "'**' must be a whole segment ('*' is a run "
			    "within one)";
		for (i = 0; i < n; i++) {
			unsigned char c = (unsigned char)seg[i];
			if (c <= 0x20 || c == 0x7f || c == '?' || c == '#' ||
			    c == '\\')
				return "a path may not hold spaces, control "
				    "bytes, '?', '#' or '\\'";
			if (c == '%' && (i + 2 >= n ||
			    !isxdigit((unsigned char)seg[i + 1]) ||
			    !isxdigit((unsigned char)seg[i + 2])))
				return "'%' must start a %XX escape";
			if (c == '%' && (strncasecmp(seg + i, "%2f", 3) == 0 ||
			    strncasecmp(seg + i, "%5c", 3) == 0 ||
			    strncmp(seg + i, "%00", 3) == 0))
				return "an encoded '/', '\\' or NUL never "
				    "matches (such requests get 400)";
		}
		if (end == NULL)
			break;
	}
	return NULL;
}

/* "https://host[:port][/path]" without user info, query or fragment. */
static const char *
https_url_check(const char *s)
{
	const char *host, *p;
	unsigned long long port;
	char digits[8];
	size_t n;

	if (strncmp(s, "https://", 8) != 0)
		return "must start with https://";
	host = s + 8;
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#' ||
		    *p == '?' || *p == '\\')
			return "may not hold spaces, control bytes, '?', '#' "
			    "or '\\'";
	n = strcspn(host, "/");
	if (memchr(host, '@', n) != NULL)
		return "may not hold user information";
	if (n == 0)
		return "needs a host";
	p = host;
	if (*p == '[') {
		if ((p = memchr(host, ']', n)) == NULL)
			return "unterminated '[' in the host";
		p++;
	} else {
		for (; p < host + n && *p != ':'; p++)
			if (!isalnum((unsigned char)*p) && *p != '.' &&
			    *p != '-' && *p != '_')
				return "bad character in the host";
		if (p == host)
			return "needs a host";
	}
	if (p == host + n)
		return NULL;
	if (*p != ':' || (size_t)(host + n - p - 1) >= sizeof(digits) ||
	    host + n - p - 1 == 0)
		return "bad port";
	memcpy(digits, p + 1, (size_t)(host + n - p - 1));
	digits[host + n - p - 1] = '\0';
	if (yparse_uint(digits, 65535, &port) != 0 || port == 0)
		return "bad port";
	return NULL;
}

/*
 * Splits a checked https URL into the rule's forward target: the host (a
 * name, normalised; an address literal is refused, since the proxy's
 * certificate is checked against a name), the port (443 by default) and
 * the path prefix ("" when none or "/").
 */
static const char *
forward_target(const char *url, struct intercept_rule *r)
{
	const char *host = url + 8, *why = NULL;
	size_t n = strcspn(host, ":/");
	unsigned long long port = 443;
	char name[NAME_BUFSZ + 2];

	if (*host == '[' || n >= sizeof(name))
		return "must name the proxy's host, not an address";
	memcpy(name, host, n);
	name[n] = '\0';
	if (name_from_policy(name, r->forward_host, &why) != 0)
		return why != NULL ? why : "bad host";
	if (host[n] == ':') {
		char digits[8];
		size_t d = strcspn(host + n + 1, "/");

		memcpy(digits, host + n + 1, d);
		digits[d] = '\0';
		if (yparse_uint(digits, 65535, &port) != 0)
			return "bad port";
		n += 1 + d;
	}
	r->forward_port = (uint16_t)port;
	snprintf(r->forward_path, sizeof(r->forward_path), "%s",
	    strcmp(host + n, "/") == 0 ? "" : host + n);
	if (strlen(host + n) >= sizeof(r->forward_path))
		return "has a path over 255 bytes";
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* A header name: a token, stored lowercased. */
static int
header_name(struct ycheck *x, unsigned line, unsigned col, const char *s,
    const char *what, char **out)
{
	char e[80], *l;
	size_t i;

	if (!token_valid(s)) {
		ycheck_err(x, line, col, "'%s': '%s' is not a header name", what,
		    yesc(s, e, sizeof(e)));
		return SL_ERR_INVALID;
	}
	if (dup_string(x, s, &l) != 0)
		return SL_ERR_NOMEM;
	for (i = 0; l[i] != '\0'; i++)
		l[i] = (char)tolower((unsigned char)l[i]);
	*out = l;
	return 0;
}

/* Headers whose change would break framing, routing or our own tokens. */
static int
header_reserved(const char *lname)
{
	static const char *const names[] = { "host", "content-length",
	    "transfer-encoding", "connection", "keep-alive", "proxy-connection",
	    "te", "trailer", "upgrade", "sluice-identity", NULL };
	size_t i;

	for (i = 0; names[i] != NULL; i++)
		if (strcmp(lname, names[i]) == 0)
			return 1;
	/* Hop-by-hop too: never sent on, so never set or removed. */
	return strncmp(lname, "proxy-", 6) == 0;
}

/* A MAP of names to globs (match.query, match.headers). */
static void
parse_kv_globs(struct ycheck *x, const struct ynode *m, const char *what,
    int headers, struct kv **out, size_t *nout)
{
	const struct ynode *v;
	struct kv *kv;
	char e[80];
	size_t i, j;

	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'%s' must be a map", what);
		return;
	}
	if (m->n == 0)
		return;
	if ((kv = calloc(m->n, sizeof(*kv))) == NULL) {
		x->nomem = 1;
		return;
	}
	*out = kv;
	*nout = m->n;
	for (i = 0; i < m->n; i++) {
		v = m->items[i];
		if (headers) {
			if (header_name(x, m->key_lines[i], m->key_cols[i],
			    m->keys[i], what, &kv[i].name) != 0)
				continue;
			for (j = 0; j < i; j++)
				if (kv[j].name != NULL &&
				    strcmp(kv[j].name, kv[i].name) == 0)
					ycheck_err(x, m->key_lines[i],
					    m->key_cols[i], "'%s': header "
					    "'%s' is named twice", what,
					    kv[i].name);
		} else {
			if (m->keys[i][0] == '\0') {
				ycheck_err(x, m->key_lines[i], m->key_cols[i],
				    "'%s': empty parameter name", what);
				continue;
			}
			if (dup_string(x, m->keys[i], &kv[i].name) != 0)
				continue;
		}
		if (!ycheck_string(x, v, what))
			continue;
		if (!field_value_ok(v->scalar)) {
			ycheck_err(x, v->line, v->col, "'%s': '%s' holds "
			    "control characters", what,
			    yesc(v->scalar, e, sizeof(e)));
			continue;
		}
		dup_string(x, v->scalar, &kv[i].value);
	}
}

static void
parse_methods(struct ycheck *x, const struct ynode *n,
    struct intercept_rule *r)
{
	const struct ynode *it;
	const char *s;
	char e[80];
	size_t i;

	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col, "'match.methods' must be a "
		    "non-empty list (leave it out for any method)");
		return;
	}
	if ((r->methods = calloc(n->n, sizeof(char *))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->items[i];
		if (!ycheck_string(x, it, "match.methods"))
			continue;
		for (s = it->scalar; *s != '\0'; s++)
			if (islower((unsigned char)*s))
				break;
		if (!token_valid(it->scalar) || *s != '\0') {
			ycheck_err(x, it->line, it->col, "'match.methods': "
			    "'%s' is not an uppercase method name",
			    yesc(it->scalar, e, sizeof(e)));
			continue;
		}
		if (dup_string(x, it->scalar, &r->methods[r->nmethods]) == 0)
			r->nmethods++;
	}
}

static void
parse_match(struct ycheck *x, const struct ynode *rule,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "host", "methods", "path", "query",
	    "headers", NULL };
	const struct ynode *m, *n;
	const char *why;
	char e[80];

	if ((m = ynode_get(rule, "match")) == NULL) {
		ycheck_err(x, rule->line, rule->col, "intercept rule needs "
		    "'match'");
		return;
	}
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'match' must be a map");
		return;
	}
	ycheck_keys(x, m, "match", keys);
	if ((n = ynode_get(m, "host")) == NULL)
		ycheck_err(x, m->line, m->col, "'match' needs 'host'");
	else
		parse_pattern(x, n, "match.host", r->host);
	if ((n = ynode_get(m, "methods")) != NULL)
		parse_methods(x, n, r);
	if ((n = ynode_get(m, "path")) != NULL &&
	    ycheck_string(x, n, "match.path")) {
		if ((why = path_glob_check(n->scalar)) != NULL)
			ycheck_err(x, n->line, n->col, "'match.path': '%s': %s",
			    yesc(n->scalar, e, sizeof(e)), why);
		else
			dup_string(x, n->scalar, &r->path);
	}
	if ((n = ynode_get(m, "query")) != NULL)
		parse_kv_globs(x, n, "match.query", 0, &r->query, &r->nquery);
	if ((n = ynode_get(m, "headers")) != NULL)
		parse_kv_globs(x, n, "match.headers", 1, &r->headers,
		    &r->nheaders);
}

static void
parse_inject_set(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	const struct ynode *v;
	const char *why;
	struct kv *kv;
	char e[80];
	size_t i, j;

	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'inject.set' must be a map");
		return;
	}
	if (m->n == 0)
		return;
	if (m->n > POLICY_MAX_INJECT) {
		ycheck_err(x, m->line, m->col, "'inject.set' sets more than %d "
		    "headers", POLICY_MAX_INJECT);
		return;
	}
	if ((kv = calloc(m->n, sizeof(*kv))) == NULL) {
		x->nomem = 1;
		return;
	}
	r->inject_set = kv;
	r->ninject_set = m->n;
	for (i = 0; i < m->n; i++) {
		v = m->items[i];
		if (header_name(x, m->key_lines[i], m->key_cols[i], m->keys[i],
		    "inject.set", &kv[i].name) != 0)
			continue;
		if (header_reserved(kv[i].name))
			ycheck_err(x, m->key_lines[i], m->key_cols[i],
			    "'inject.set': header '%s' may not be set",
			    kv[i].name);
		for (j = 0; j < i; j++)
			if (kv[j].name != NULL &&
			    strcmp(kv[j].name, kv[i].name) == 0)
				ycheck_err(x, m->key_lines[i], m->key_cols[i],
				    "'inject.set': header '%s' is set twice",
				    kv[i].name);
		if (!ycheck_string(x, v, "inject.set"))
			continue;
		if (strpbrk(v->scalar, "\r\n") != NULL ||
		    !field_value_ok(v->scalar)) {
			ycheck_err(x, v->line, v->col, "'inject.set': the value "
			    "of '%s' holds CR, LF or control characters",
			    kv[i].name);
			continue;
		}
		if ((why = template_check(v->scalar)) != NULL) {
			ycheck_err(x, v->line, v->col, "'inject.set': bad "
			    "template '%s': %s", yesc(v->scalar, e, sizeof(e)),
			    why);
			continue;
		}
		dup_string(x, v->scalar, &kv[i].value);
	}
}

static void
parse_inject_remove(struct ycheck *x, const struct ynode *s,
    struct intercept_rule *r)
{
	const struct ynode *it;
	char *name;
	size_t i, j;

	if (s->kind != YNODE_SEQ) {
		ycheck_err(x, s->line, s->col, "'inject.remove' must be a list");
		return;
	}
	if (s->n == 0)
		return;
	if (s->n > POLICY_MAX_INJECT) {
		ycheck_err(x, s->line, s->col, "'inject.remove' names more than "
		    "%d headers", POLICY_MAX_INJECT);
		return;
	}
	if ((r->inject_remove = calloc(s->n, sizeof(char *))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < s->n; i++) {
		it = s->items[i];
		if (!ycheck_string(x, it, "inject.remove") ||
		    header_name(x, it->line, it->col, it->scalar,
		    "inject.remove", &name) != 0)
			continue;
		r->inject_remove[r->ninject_remove++] = name;
		if (header_reserved(name))
			ycheck_err(x, it->line, it->col, "'inject.remove': "
			    "header '%s' may not be removed", name);
		for (j = 0; j < r->ninject_set; j++)
			if (r->inject_set[j].name != NULL &&
			    strcmp(r->inject_set[j].name, name) == 0)
				ycheck_err(x, it->line, it->col, "'inject': "
				    "header '%s' is both set and removed", name);
	}
}

/* inject.placeholders: the secrets whose placeholders the rule swaps. */
static void
parse_placeholders(struct ycheck *x, const struct ynode *s,
    struct intercept_rule *r)
{
	const struct ynode *it;
	char e[80];
	size_t i, j;

	if (s->kind != YNODE_SEQ) {
		ycheck_err(x, s->line, s->col, "'inject.placeholders' must be a "
		    "list");
		return;
	}
	if (s->n > POLICY_MAX_PLACEHOLDERS) {
		ycheck_err(x, s->line, s->col, "'inject.placeholders' names "
		    "more than %d secrets", POLICY_MAX_PLACEHOLDERS);
		return;
	}
	if (s->n == 0)
		return;
	if ((r->placeholders = calloc(s->n, sizeof(char *))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < s->n; i++) {
		it = s->items[i];
		if (!ycheck_string(x, it, "inject.placeholders"))
			continue;
		if (!secret_name_ok(it->scalar, it->scalar_len)) {
			ycheck_err(x, it->line, it->col, "'inject.placeholders': "
			    "'%s' is not a secret name (1 to 64 of "
			    "[A-Za-z0-9._-])", yesc(it->scalar, e, sizeof(e)));
			continue;
		}
		for (j = 0; j < r->nplaceholders; j++)
			if (strcmp(r->placeholders[j], it->scalar) == 0)
				ycheck_err(x, it->line, it->col,
				    "'inject.placeholders': '%s' is named twice",
				    it->scalar);
		if (dup_string(x, it->scalar,
		    &r->placeholders[r->nplaceholders]) == 0)
			r->nplaceholders++;
	}
}

/* An AWS service or region name: 1 to 63 of [a-z0-9-]. */
static int
aws_name_ok(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");

	return n >= 1 && n <= 63 && s[n] == '\0';
}

/* inject.sigv4: {secret, service, region}, all required. */
static void
parse_sigv4(struct ycheck *x, const struct ynode *m, struct intercept_rule *r)
{
	static const char *const keys[] = { "secret", "service", "region",
	    NULL };
	const struct ynode *n;
	char e[80];

	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'inject.sigv4' must be a map");
		return;
	}
	ycheck_keys(x, m, "inject.sigv4", keys);
	if ((n = ynode_get(m, "secret")) == NULL)
		ycheck_err(x, m->line, m->col, "'inject.sigv4' needs 'secret'");
	else if (ycheck_string(x, n, "inject.sigv4.secret")) {
		if (!secret_name_ok(n->scalar, n->scalar_len))
			ycheck_err(x, n->line, n->col, "'inject.sigv4.secret': "
			    "'%s' is not a secret name",
			    yesc(n->scalar, e, sizeof(e)));
		else
			dup_string(x, n->scalar, &r->sigv4_secret);
	}
	if ((n = ynode_get(m, "service")) == NULL)
		ycheck_err(x, m->line, m->col, "'inject.sigv4' needs 'service'");
	else if (ycheck_string(x, n, "inject.sigv4.service")) {
		if (!aws_name_ok(n->scalar))
			ycheck_err(x, n->line, n->col, "'inject.sigv4.service': "
			    "'%s' is not a service name ([a-z0-9-]{1,63})",
			    yesc(n->scalar, e, sizeof(e)));
		else
			dup_string(x, n->scalar, &r->sigv4_service);
	}
	if ((n = ynode_get(m, "region")) == NULL)
		ycheck_err(x, m->line, m->col, "'inject.sigv4' needs 'region'");
	else if (ycheck_string(x, n, "inject.sigv4.region")) {
		if (!aws_name_ok(n->scalar))
			ycheck_err(x, n->line, n->col, "'inject.sigv4.region': "
			    "'%s' is not a region name ([a-z0-9-]{1,63})",
			    yesc(n->scalar, e, sizeof(e)));
		else
			dup_string(x, n->scalar, &r->sigv4_region);
	}
}

/* A true or false at n into *out; 0, or -1 after reporting. */
static int
parse_flag(struct ycheck *x, const struct ynode *n, const char *path,
    int *out)
{
	if (!ycheck_string(x, n, path))
		return -1;
	if (strcmp(n->scalar, "true") == 0 || strcmp(n->scalar, "false") == 0) {
		*out = n->scalar[0] == 't';
		return 0;
	}
	ycheck_err(x, n->line, n->col, "'%s' must be true or false", path);
	return -1;
}

static int
nonempty(const struct ynode *n)
{
	return n != NULL && n->kind != YNODE_SCALAR && n->n > 0;
}

static void
parse_inject(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "set", "remove", "keep_cookies",
	    "placeholders", "sigv4", NULL };
	const struct ynode *n;
	size_t i;

	r->action = ICPT_INJECT;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'inject' must be a map");
		return;
	}
	ycheck_keys(x, m, "inject", keys);
	if ((n = ynode_get(m, "set")) != NULL)
		parse_inject_set(x, n, r);
	if ((n = ynode_get(m, "remove")) != NULL)
		parse_inject_remove(x, n, r);
	if ((n = ynode_get(m, "keep_cookies")) != NULL)
		parse_flag(x, n, "inject.keep_cookies", &r->keep_cookies);
	if ((n = ynode_get(m, "placeholders")) != NULL)
		parse_placeholders(x, n, r);
	if ((n = ynode_get(m, "sigv4")) != NULL) {
		parse_sigv4(x, n, r);
		for (i = 0; i < r->ninject_set; i++)
			if (r->inject_set[i].name != NULL &&
			    (strcmp(r->inject_set[i].name, "authorization") == 0 ||
			    strncmp(r->inject_set[i].name, "x-amz-", 6) == 0))
				ycheck_err(x, n->line, n->col, "'inject': a "
				    "sigv4 rule may not set '%s' (the signature "
				    "does)", r->inject_set[i].name);
	}
	if (!nonempty(ynode_get(m, "set")) && !nonempty(ynode_get(m, "remove")) &&
	    !nonempty(ynode_get(m, "placeholders")) &&
	    ynode_get(m, "sigv4") == NULL)
		ycheck_err(x, m->line, m->col, "'inject' needs 'set' or "
		    "'remove' with at least one header, 'placeholders' or "
		    "'sigv4'");
}

static void
parse_forward(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "to", "audience", "body_hash",
	    NULL };
	const struct ynode *n;
	const char *why;
	char e[80];

	r->action = ICPT_FORWARD;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'forward' must be a map");
		return;
	}
	ycheck_keys(x, m, "forward", keys);
	if ((n = ynode_get(m, "to")) == NULL)
		ycheck_err(x, m->line, m->col, "'forward' needs 'to'");
	else if (ycheck_string(x, n, "forward.to")) {
		if ((why = https_url_check(n->scalar)) != NULL ||
		    (why = forward_target(n->scalar, r)) != NULL)
			ycheck_err(x, n->line, n->col, "'forward.to': '%s' %s",
			    yesc(n->scalar, e, sizeof(e)), why);
		else
			dup_string(x, n->scalar, &r->forward_to);
	}
	if ((n = ynode_get(m, "body_hash")) != NULL)
		parse_flag(x, n, "forward.body_hash", &r->forward_body_hash);
	if ((n = ynode_get(m, "audience")) == NULL) {
		/* The token's audience: the proxy's origin. */
		char origin[NAME_BUFSZ + 16];

		if (r->forward_to != NULL) {
			if (r->forward_port != 443)
				snprintf(origin, sizeof(origin), "https://%s:%u",
				    r->forward_host, r->forward_port);
			else
				snprintf(origin, sizeof(origin), "https://%s",
				    r->forward_host);
			dup_string(x, origin, &r->forward_audience);
		}
	} else if (ycheck_string(x, n, "forward.audience")) {
		if (!field_value_ok(n->scalar) || strchr(n->scalar, '\t'))
			ycheck_err(x, n->line, n->col, "'forward.audience' "
			    "holds control characters");
		else
			dup_string(x, n->scalar, &r->forward_audience);
	}
}

static void
parse_upstream(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "ca", "pin_sha256", "client_cert",
	    NULL };
	const struct ynode *n, *it;
	unsigned char bin[32];
	size_t i, binlen;
	const char *end;
	char e[80];

	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'upstream' must be a map");
		return;
	}
	ycheck_keys(x, m, "upstream", keys);
	if (ynode_get(m, "ca") == NULL && ynode_get(m, "pin_sha256") == NULL &&
	    ynode_get(m, "client_cert") == NULL)
		ycheck_err(x, m->line, m->col, "'upstream' needs 'ca', "
		    "'pin_sha256' or 'client_cert'");
	if ((n = ynode_get(m, "ca")) != NULL && ycheck_string(x, n,
	    "upstream.ca"))
		dup_string(x, n->scalar, &r->upstream_ca);
	if ((n = ynode_get(m, "client_cert")) != NULL &&
	    ycheck_string(x, n, "upstream.client_cert")) {
		if (!secret_name_ok(n->scalar, n->scalar_len))
			ycheck_err(x, n->line, n->col, "'upstream.client_cert': "
			    "'%s' is not a secret name (1 to 64 of "
			    "[A-Za-z0-9._-])", yesc(n->scalar, e, sizeof(e)));
		else if (r->action != ICPT_PASS && r->action != ICPT_INJECT)
			ycheck_err(x, n->line, n->col, "'upstream.client_cert' "
			    "is for pass and inject rules (a forward rule's "
			    "upstream is the proxy, a deny rule has none)");
		else
			dup_string(x, n->scalar, &r->client_cert);
	}
	if ((n = ynode_get(m, "pin_sha256")) == NULL)
		return;
	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col, "'upstream.pin_sha256' must be a "
		    "non-empty list");
		return;
	}
	if ((r->pins = calloc(n->n, sizeof(char *))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->items[i];
		if (!ycheck_string(x, it, "upstream.pin_sha256"))
			continue;
		if (sodium_base642bin(bin, sizeof(bin), it->scalar,
		    it->scalar_len, NULL, &binlen, &end,
		    sodium_base64_VARIANT_ORIGINAL) != 0 ||
		    binlen != sizeof(bin) || *end != '\0') {
			ycheck_err(x, it->line, it->col, "'upstream.pin_sha256': "
			    "'%s' is not the base64 of 32 bytes",
			    yesc(it->scalar, e, sizeof(e)));
			continue;
		}
		if (dup_string(x, it->scalar, &r->pins[r->npins]) == 0)
			r->npins++;
	}
}

/*
 * allow_method_override: true lets a pass or inject rule's requests carry
 * X-HTTP-Method-Override and the like (policy_request_refusal()).  Forward
 * rules drop those headers and deny rules refuse anyway, so there "true"
 * would promise what it cannot do.  After the action is parsed.
 */
static void
parse_allow_override(struct ycheck *x, const struct ynode *n,
    struct intercept_rule *r)
{
	if (parse_flag(x, n, "allow_method_override",
	    &r->allow_method_override) != 0)
		return;
	if (r->allow_method_override && (r->action == ICPT_FORWARD ||
	    r->action == ICPT_DENY))
		ycheck_err(x, n->line, n->col, "'allow_method_override' is for "
		    "pass and inject rules (a forward rule drops method "
		    "overrides, a deny rule refuses)");
}

void
policy_parse_alpn(struct ycheck *x, const struct ynode *n, const char *what,
    struct alpn_list *out)
{
	static const char *const known[] = { "h2", "http/1.1" };
	unsigned seen = 0, k;
	size_t i, len;
	char e[80];

	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col, "'%s' must be a list of "
		    "protocols (h2, http/1.1)", what);
		return;
	}
	for (i = 0; i < n->n; i++) {
		if (!ycheck_string(x, n->items[i], what))
			return;
		for (k = 0; k < 2; k++)
			if (strcmp(n->items[i]->scalar, known[k]) == 0)
				break;
		if (k == 2) {
			ycheck_err(x, n->items[i]->line, n->items[i]->col,
			    "'%s': '%s' is neither h2 nor http/1.1", what,
			    yesc(n->items[i]->scalar, e, sizeof(e)));
			return;
		}
		if (seen & (1u << k)) {
			ycheck_err(x, n->items[i]->line, n->items[i]->col,
			    "'%s': '%s' is named twice", what, known[k]);
			return;
		}
		seen |= 1u << k;
		len = strlen(known[k]);
		out->wire[out->len++] = (unsigned char)len;
		memcpy(out->wire + out->len, known[k], len);
		out->len += (unsigned char)len;
	}
}

static void
parse_intercept_rule(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "name", "match", "inject",
	    "forward", "action", "upstream", "allow_method_override", "alpn",
	    NULL };
	const struct ynode *n, *inj, *fwd, *act;
	char e[80];

	r->line = m->line;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'intercept' items must be maps");
		return;
	}
	ycheck_keys(x, m, "intercept", keys);
	if ((n = ynode_get(m, "name")) == NULL)
		ycheck_err(x, m->line, m->col, "intercept rule needs 'name'");
	else if (ycheck_string(x, n, "intercept.name")) {
		if (!policy_name_valid(n->scalar))
			ycheck_err(x, n->line, n->col, "'intercept.name': '%s' "
			    "is not a valid rule name "
			    "([A-Za-z0-9][A-Za-z0-9._-]{0,62})",
			    yesc(n->scalar, e, sizeof(e)));
		else if (dup_string(x, n->scalar, &r->name) == 0 &&
		    (r->label = make_label("intercept", r->name)) == NULL)
			x->nomem = 1;
	}
	parse_match(x, m, r);
	inj = ynode_get(m, "inject");
	fwd = ynode_get(m, "forward");
	act = ynode_get(m, "action");
	if ((inj != NULL) + (fwd != NULL) + (act != NULL) > 1)
		ycheck_err(x, m->line, m->col, "rule has more than one of "
		    "inject, forward and action");
	else if (inj == NULL && fwd == NULL && act == NULL)
		ycheck_err(x, m->line, m->col,
		    "rule needs inject, forward or action");
	else if (inj != NULL)
		parse_inject(x, inj, r);
	else if (fwd != NULL)
		parse_forward(x, fwd, r);
	else if (ycheck_string(x, act, "action")) {
		if (strcmp(act->scalar, "pass") == 0)
			r->action = ICPT_PASS;
		else if (strcmp(act->scalar, "deny") == 0)
			r->action = ICPT_DENY;
		else
			ycheck_err(x, act->line, act->col, "'action': '%s' is "
			    "neither pass nor deny",
			    yesc(act->scalar, e, sizeof(e)));
	}
	if ((n = ynode_get(m, "upstream")) != NULL)
		parse_upstream(x, n, r);
	if ((n = ynode_get(m, "allow_method_override")) != NULL)
		parse_allow_override(x, n, r);
	if ((n = ynode_get(m, "alpn")) != NULL)
		policy_parse_alpn(x, n, "intercept.alpn", &r->alpn);
}

/* Rule names are unique within a policy (sorted, not n squared). */
static void
check_rule_names(struct ycheck *x, const struct ynode *seq,
    const struct policy *p)
{
	const struct ynode *at;
	struct nameref *refs;
	size_t i, n = 0, first = 0;

	if (p->nintercepts < 2)
		return;
	if ((refs = calloc(p->nintercepts, sizeof(*refs))) == NULL) {
		x->nomem = 1;
		return;
	}
	for (i = 0; i < p->nintercepts; i++)
		if (p->intercepts[i].name != NULL) {
			refs[n].name = p->intercepts[i].name;
			refs[n++].idx = i;
		}
	qsort(refs, n, sizeof(*refs), nameref_cmp);
	for (i = 1; i < n; i++) {
		if (strcmp(refs[i].name, refs[first].name) != 0) {
			first = i;
			continue;
		}
		at = ynode_get(seq->items[refs[i].idx], "name");
		ycheck_err(x, at->line, at->col,
		    "intercept rule name '%s' is used twice (first at line %u)",
		    refs[i].name, p->intercepts[refs[first].idx].line);
	}
	free(refs);
}

void
policy_parse_intercepts(struct ycheck *x, const struct ynode *root,
    struct policy *p)
{
	const struct ynode *seq;
	size_t i;

	if ((seq = ynode_get(root, "intercept")) == NULL)
		return;
	if (seq->kind != YNODE_SEQ) {
		ycheck_err(x, seq->line, seq->col, "'intercept' must be a list");
		return;
	}
	if (seq->n == 0)
		return;
	if ((p->intercepts = calloc(seq->n, sizeof(*p->intercepts))) == NULL) {
		x->nomem = 1;
		return;
	}
	p->nintercepts = seq->n;
	for (i = 0; i < seq->n; i++)
		parse_intercept_rule(x, seq->items[i], &p->intercepts[i]);
	check_rule_names(x, seq, p);
}
