/* policy.c: one named policy, loaded from YAML, and the connection verdicts. */
#include "autoconf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "addr.h"
#include "cidr.h"
#include "err.h"
#include "names.h"
#include "policy.h"
#include "yamltree.h"

#define NO_RULE		UINT32_MAX
#define SECRET_NAME_MAX	64

/* ------------------------------------------------------------------ */
/* Small validators                                                    */

int
policy_name_valid(const char *s)
{
	size_t i;

	if (!isalnum((unsigned char)s[0]))
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (i > 62)
			return 0;
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return 0;
	}
	return 1;
}

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

/*
 * Checks {{secret:NAME}} and {{secret:NAME | base64}} placeholders (spaces
 * allowed inside the braces).  Returns NULL or why the template is bad.
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
		if (strncmp(q, "secret:", 7) != 0)
			return "'{{' must open {{secret:NAME}}";
		q += 7;
		for (n = 0; isalnum((unsigned char)q[n]) || q[n] == '.' ||
		    q[n] == '_' || q[n] == '-'; n++)
			;
		if (n == 0 || n > SECRET_NAME_MAX)
			return "a secret name is 1 to 64 of [A-Za-z0-9._-]";
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

/*
 * A path glob: starts with '/'; segments are literal, "*" or "**"; no
 * empty or dot segments inside, no query or fragment, no control bytes,
 * '%' only as a valid escape.  Returns NULL or why it is bad.
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
		if (memchr(seg, '*', n) != NULL &&
		    !(n == 1 || (n == 2 && seg[0] == '*' && seg[1] == '*')))
			return "'*' and '**' must be whole segments";
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

/* ------------------------------------------------------------------ */
/* Prefixes                                                            */

static uint32_t
v4_u32(const struct sl_addr *a)
{
	return (uint32_t)a->bytes[0] << 24 | (uint32_t)a->bytes[1] << 16 |
	    (uint32_t)a->bytes[2] << 8 | a->bytes[3];
}

static void
set_bit(uint8_t *b, unsigned i, int v)
{
	if (v)
		b[i / 8] |= (uint8_t)(0x80 >> (i % 8));
	else
		b[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
}

int
policy_prefix_canonical(const struct sl_addr *in, unsigned plen,
    struct sl_addr *out, unsigned *out_plen)
{
	struct sl_addr first, last, cf, cl, sib, cs;
	uint64_t lo, hi, size;
	unsigned i, bits;

	if (in->family == AF_INET) {
		if (plen > 32)
			return SL_ERR_INVALID;
		*out = *in;
		*out_plen = plen;
		return 0;
	}
	if (in->family != AF_INET6 || plen > 128)
		return SL_ERR_INVALID;
	first = last = *in;
	for (i = plen; i < 128; i++) {
		set_bit(first.bytes, i, 0);
		set_bit(last.bytes, i, 1);
	}
	addr_canonical(&first, &cf);
	addr_canonical(&last, &cl);
	if (cf.family == AF_INET6 && cl.family == AF_INET6) {
		*out = first;
		*out_plen = plen;
		return 0;
	}
	if (cf.family != cl.family)
		return SL_ERR_INVALID;	/* straddles an embedding range */
	lo = v4_u32(&cf);
	hi = v4_u32(&cl);
	if (hi < lo)
		return SL_ERR_INVALID;
	size = hi - lo + 1;
	if ((size & (size - 1)) != 0 || (lo & (size - 1)) != 0)
		return SL_ERR_INVALID;
	for (bits = 0; ((uint64_t)1 << bits) < size; bits++)
		;
	/* The neighbour prefix must carry other IPv4 addresses. */
	if (plen > 0) {
		sib = first;
		set_bit(sib.bytes, plen - 1,
		    !(first.bytes[(plen - 1) / 8] & (0x80 >> ((plen - 1) % 8))));
		addr_canonical(&sib, &cs);
		if (cs.family == AF_INET && v4_u32(&cs) >= lo &&
		    v4_u32(&cs) <= hi)
			return SL_ERR_INVALID;
	}
	*out = cf;
	*out_plen = 32 - bits;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* Splits a policy pattern into "*." and a name_from_policy() name. */
static int
parse_pattern(struct ycheck *x, const struct ynode *n, const char *what,
    char *out)
{
	char norm[NAME_BUFSZ], e[80];
	const char *body, *why = NULL;
	int wild;

	if (!ycheck_string(x, n, what))
		return SL_ERR_INVALID;
	wild = strncmp(n->scalar, "*.", 2) == 0;
	body = wild ? n->scalar + 2 : n->scalar;
	if (strchr(body, '*') != NULL) {
		ycheck_err(x, n->line, n->col, "'%s': '%s': '*' may only be "
		    "the whole first label, as in '*.example.com'", what,
		    yesc(n->scalar, e, sizeof(e)));
		return SL_ERR_INVALID;
	}
	if (name_from_policy(body, norm, &why) != 0) {
		ycheck_err(x, n->line, n->col, "'%s': bad name '%s': %s", what,
		    yesc(n->scalar, e, sizeof(e)), why != NULL ? why :
		    "invalid");
		return SL_ERR_INVALID;
	}
	snprintf(out, NAME_BUFSZ + 2, "%s%s", wild ? "*." : "", norm);
	return 0;
}

static int
parse_ports(struct ycheck *x, const struct ynode *n, struct egress_rule *r)
{
	unsigned long long v;
	const struct ynode *it;
	char e[80];
	size_t i;

	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col, "'ports' must be a non-empty list "
		    "of port numbers (leave it out for any port)");
		return SL_ERR_INVALID;
	}
	if ((r->ports = calloc(n->n, sizeof(*r->ports))) == NULL) {
		x->nomem = 1;
		return SL_ERR_NOMEM;
	}
	for (i = 0; i < n->n; i++) {
		it = n->items[i];
		if (!ycheck_string(x, it, "ports"))
			continue;
		if (yparse_uint(it->scalar, 65535, &v) != 0 || v == 0) {
			ycheck_err(x, it->line, it->col, "'ports': '%s' is not "
			    "a port (1..65535)", yesc(it->scalar, e, sizeof(e)));
			continue;
		}
		r->ports[r->nports++] = (uint16_t)v;
	}
	return 0;
}

static char *
make_label(const char *kind, const char *what)
{
	size_t n = strlen(kind) + 1 + strlen(what) + 1;
	char *s;

	if ((s = malloc(n)) != NULL)
		snprintf(s, n, "%s:%s", kind, what);
	return s;
}

static void
parse_egress_rule(struct ycheck *x, const struct ynode *m, const char *list,
    struct egress_rule *r)
{
	static const char *const keys[] = { "domain", "cidr", "ports", NULL };
	const struct ynode *dom, *cidr, *ports;
	struct sl_addr a;
	unsigned plen;
	char where[32], text[ADDR_STRLEN + 8], abuf[ADDR_STRLEN], e[80];

	r->line = m->line;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'egress.%s' items must be maps "
		    "with 'domain' or 'cidr'", list);
		return;
	}
	snprintf(where, sizeof(where), "egress.%s", list);
	ycheck_keys(x, m, where, keys);
	dom = ynode_get(m, "domain");
	cidr = ynode_get(m, "cidr");
	if ((dom == NULL) == (cidr == NULL)) {
		ycheck_err(x, m->line, m->col, "an egress rule needs exactly one "
		    "of 'domain' and 'cidr'");
		return;
	}
	if ((ports = ynode_get(m, "ports")) != NULL &&
	    parse_ports(x, ports, r) != 0)
		return;
	if (dom != NULL) {
		r->kind = EGRESS_DOMAIN;
		if (parse_pattern(x, dom, "domain", r->name) != 0)
			return;
		if ((r->label = make_label(list, r->name)) == NULL)
			x->nomem = 1;
		return;
	}
	r->kind = EGRESS_CIDR;
	if (!ycheck_string(x, cidr, "cidr"))
		return;
	if (addr_parse_prefix(cidr->scalar, &a, &plen) != 0) {
		ycheck_err(x, cidr->line, cidr->col, "'cidr': bad prefix '%s' "
		    "(ADDR/LEN with zero host bits)",
		    yesc(cidr->scalar, e, sizeof(e)));
		return;
	}
	if (policy_prefix_canonical(&a, plen, &r->prefix, &r->plen) != 0) {
		ycheck_err(x, cidr->line, cidr->col, "'cidr': '%s' covers part "
		    "of an IPv4-embedding range; write the IPv4 prefix",
		    yesc(cidr->scalar, e, sizeof(e)));
		return;
	}
	snprintf(text, sizeof(text), "%s/%u",
	    addr_format(&r->prefix, abuf, sizeof(abuf)), r->plen);
	if ((r->label = make_label(list, text)) == NULL)
		x->nomem = 1;
}

static void
parse_egress_list(struct ycheck *x, const struct ynode *eg, const char *list,
    struct egress_rule **rules, size_t *nrules)
{
	const struct ynode *seq;
	char what[32];
	size_t i;

	if ((seq = ynode_get(eg, list)) == NULL)
		return;
	snprintf(what, sizeof(what), "egress.%s", list);
	if (seq->kind != YNODE_SEQ) {
		ycheck_err(x, seq->line, seq->col, "'%s' must be a list", what);
		return;
	}
	if (seq->n == 0)
		return;
	if ((*rules = calloc(seq->n, sizeof(**rules))) == NULL) {
		x->nomem = 1;
		return;
	}
	*nrules = seq->n;
	for (i = 0; i < seq->n; i++)
		parse_egress_rule(x, seq->items[i], list, &(*rules)[i]);
}

static void
parse_egress(struct ycheck *x, const struct ynode *root, struct policy *p)
{
	static const char *const keys[] = { "default", "allow", "deny", NULL };
	const struct ynode *eg, *d;
	char e[80];

	if ((eg = ynode_get(root, "egress")) == NULL)
		return;
	if (eg->kind != YNODE_MAP) {
		ycheck_err(x, eg->line, eg->col, "'egress' must be a map");
		return;
	}
	ycheck_keys(x, eg, "egress", keys);
	if ((d = ynode_get(eg, "default")) != NULL &&
	    ycheck_string(x, d, "egress.default")) {
		if (strcmp(d->scalar, "allow") == 0)
			p->default_allow = 1;
		else if (strcmp(d->scalar, "deny") != 0)
			ycheck_err(x, d->line, d->col, "'egress.default': '%s' "
			    "is neither deny nor allow",
			    yesc(d->scalar, e, sizeof(e)));
	}
	parse_egress_list(x, eg, "allow", &p->allow, &p->nallow);
	parse_egress_list(x, eg, "deny", &p->deny, &p->ndeny);
}

static int
dup_string(struct ycheck *x, const char *s, char **out)
{
	if ((*out = strdup(s)) == NULL) {
		x->nomem = 1;
		return SL_ERR_NOMEM;
	}
	return 0;
}

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
	return 0;
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

static int
nonempty(const struct ynode *n)
{
	return n != NULL && n->kind != YNODE_SCALAR && n->n > 0;
}

static void
parse_inject(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "set", "remove", NULL };
	const struct ynode *n;

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
	if (!nonempty(ynode_get(m, "set")) && !nonempty(ynode_get(m, "remove")))
		ycheck_err(x, m->line, m->col, "'inject' needs 'set' or "
		    "'remove' with at least one header");
}

static void
parse_forward(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "to", "audience", NULL };
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
		if ((why = https_url_check(n->scalar)) != NULL)
			ycheck_err(x, n->line, n->col, "'forward.to': '%s' %s",
			    yesc(n->scalar, e, sizeof(e)), why);
		else
			dup_string(x, n->scalar, &r->forward_to);
	}
	if ((n = ynode_get(m, "audience")) == NULL)
		ycheck_err(x, m->line, m->col, "'forward' needs 'audience'");
	else if (ycheck_string(x, n, "forward.audience")) {
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
	static const char *const keys[] = { "ca", "pin_sha256", NULL };
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
	if (ynode_get(m, "ca") == NULL && ynode_get(m, "pin_sha256") == NULL)
		ycheck_err(x, m->line, m->col, "'upstream' needs 'ca' or "
		    "'pin_sha256'");
	if ((n = ynode_get(m, "ca")) != NULL && ycheck_string(x, n,
	    "upstream.ca"))
		dup_string(x, n->scalar, &r->upstream_ca);
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

static void
parse_intercept_rule(struct ycheck *x, const struct ynode *m,
    struct intercept_rule *r)
{
	static const char *const keys[] = { "name", "match", "inject",
	    "forward", "action", "upstream", NULL };
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
}

struct nameref {
	const char	*name;
	size_t		 idx;
};

static int
nameref_cmp(const void *a, const void *b)
{
	const struct nameref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
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

static void
parse_intercepts(struct ycheck *x, const struct ynode *root, struct policy *p)
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

static void
policy_walk(struct ycheck *x, const struct ynode *root, struct policy *p)
{
	static const char *const keys[] = { "name", "egress", "intercept",
	    NULL };
	const struct ynode *n;
	char e[80];

	if (root == NULL) {
		ycheck_err(x, 1, 1, "empty policy (it needs at least 'name')");
		return;
	}
	if (root->kind != YNODE_MAP) {
		ycheck_err(x, root->line, root->col,
		    "a policy must be a map of keys");
		return;
	}
	ycheck_keys(x, root, NULL, keys);
	if ((n = ynode_get(root, "name")) == NULL)
		ycheck_err(x, root->line, root->col,
		    "missing required key 'name'");
	else if (ycheck_string(x, n, "name")) {
		if (!policy_name_valid(n->scalar))
			ycheck_err(x, n->line, n->col, "'name': '%s' is not a "
			    "valid policy name ([A-Za-z0-9][A-Za-z0-9._-]{0,62})",
			    yesc(n->scalar, e, sizeof(e)));
		else
			dup_string(x, n->scalar, &p->name);
	}
	parse_egress(x, root, p);
	parse_intercepts(x, root, p);
}

/* ------------------------------------------------------------------ */
/* Indexes                                                             */

/*
 * Adds a list's domain rules to its namesets and links rules that share a
 * pattern, so lookups can visit every rule of a pattern in order.
 */
static int
index_names(const struct egress_rule *rules, size_t n, struct nameset *all,
    struct nameset *wild, uint32_t **nextp)
{
	struct nameref *refs = NULL;
	uint32_t *next = NULL;
	size_t i, cnt = 0;
	int r = SL_ERR_INTERNAL;

	if ((next = calloc(n ? n : 1, sizeof(*next))) == NULL ||
	    (refs = calloc(n ? n : 1, sizeof(*refs))) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		next[i] = NO_RULE;
		if (rules[i].kind != EGRESS_DOMAIN)
			continue;
		refs[cnt].name = rules[i].name;
		refs[cnt++].idx = i;
		if ((r = nameset_add(all, rules[i].name, (uint32_t)i)) != 0)
			goto out;
		if (rules[i].name[0] == '*' &&
		    (r = nameset_add(wild, rules[i].name, (uint32_t)i)) != 0)
			goto out;
	}
	qsort(refs, cnt, sizeof(*refs), nameref_cmp);
	for (i = 1; i < cnt; i++)
		if (strcmp(refs[i - 1].name, refs[i].name) == 0)
			next[refs[i - 1].idx] = (uint32_t)refs[i].idx;
	*nextp = next;
	next = NULL;
	r = 0;
 out:
	free(refs);
	free(next);
	return r;
}

static int
index_cidrs(const struct egress_rule *rules, size_t n, struct cidr_tree *t)
{
	size_t i;
	int r;

	for (i = 0; i < n; i++)
		if (rules[i].kind == EGRESS_CIDR &&
		    (r = cidr_tree_add(t, &rules[i].prefix, rules[i].plen,
		    (uint32_t)i)) != 0)
			return r;
	return 0;
}

static int
policy_index(struct policy *p)
{
	size_t i;
	int r;

	if ((p->allow_names = nameset_new()) == NULL ||
	    (p->deny_names = nameset_new()) == NULL ||
	    (p->intercept_names = nameset_new()) == NULL ||
	    (p->allow_wild = nameset_new()) == NULL ||
	    (p->deny_wild = nameset_new()) == NULL ||
	    (p->allow_cidrs = cidr_tree_new()) == NULL ||
	    (p->deny_cidrs = cidr_tree_new()) == NULL)
		return SL_ERR_NOMEM;
	if ((r = index_names(p->allow, p->nallow, p->allow_names,
	    p->allow_wild, &p->allow_next)) != 0 ||
	    (r = index_names(p->deny, p->ndeny, p->deny_names, p->deny_wild,
	    &p->deny_next)) != 0 ||
	    (r = index_cidrs(p->allow, p->nallow, p->allow_cidrs)) != 0 ||
	    (r = index_cidrs(p->deny, p->ndeny, p->deny_cidrs)) != 0)
		return r;
	for (i = 0; i < p->nintercepts; i++)
		if ((r = nameset_add(p->intercept_names, p->intercepts[i].host,
		    (uint32_t)i)) != 0)
			return r;
	return 0;
}

int
policy_parse(const char *file, const char *buf, size_t len,
    struct policy **out, struct errlist *errs)
{
	struct ydoc *doc = NULL;
	struct policy *p = NULL;
	struct ycheck x = { file, errs, 0, 0 };
	size_t first = errs != NULL ? errs->n : 0;
	int r = SL_ERR_INTERNAL;

	if (len > POLICY_MAX_BYTES) {
		if (errs != NULL)
			errlist_add(errs, file, 0, 0, "larger than %u bytes",
			    POLICY_MAX_BYTES);
		r = SL_ERR_TOO_BIG;
		goto out;
	}
	if ((r = ydoc_parse_limit(file, buf, len, POLICY_MAX_NODES, &doc,
	    errs)) != 0)
		goto out;
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->file = strdup(file)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	crypto_generichash(p->digest, sizeof(p->digest),
	    (const unsigned char *)buf, len, NULL, 0);
	policy_walk(&x, doc->root, p);
	if (x.nomem) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (x.nerr != 0) {
		ycheck_sort(&x, first);
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = policy_index(p)) != 0) {
		if (r != SL_ERR_NOMEM && errs != NULL)
			errlist_add(errs, file, 0, 0, "cannot index rules: %s",
			    err_str(r));
		goto out;
	}
	*out = p;
	p = NULL;
	r = 0;
 out:
	ydoc_free(doc);
	policy_free(p);
	return r;
}

int
policy_load(const char *path, struct policy **out, struct errlist *errs)
{
	char *buf = NULL;
	size_t len = 0;
	int r = SL_ERR_INTERNAL;

	if ((r = ydoc_read_file(path, POLICY_MAX_BYTES, &buf, &len, errs)) != 0)
		goto out;
	r = policy_parse(path, buf, len, out, errs);
 out:
	free(buf);
	return r;
}

static void
free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
free_kv(struct kv *kv, size_t n)
{
	size_t i;

	if (kv == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

static void
free_egress(struct egress_rule *rules, size_t n)
{
	size_t i;

	if (rules == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(rules[i].label);
		free(rules[i].ports);
	}
	free(rules);
}

void
policy_free(struct policy *p)
{
	struct intercept_rule *r;
	size_t i;

	if (p == NULL)
		return;
	free(p->name);
	free(p->file);
	free_egress(p->allow, p->nallow);
	free_egress(p->deny, p->ndeny);
	for (i = 0; p->intercepts != NULL && i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		free(r->name);
		free(r->label);
		free_strv(r->methods, r->nmethods);
		free(r->path);
		free_kv(r->query, r->nquery);
		free_kv(r->headers, r->nheaders);
		free_kv(r->inject_set, r->ninject_set);
		free_strv(r->inject_remove, r->ninject_remove);
		free(r->forward_to);
		free(r->forward_audience);
		free(r->upstream_ca);
		free_strv(r->pins, r->npins);
	}
	free(p->intercepts);
	nameset_free(p->allow_names);
	nameset_free(p->deny_names);
	nameset_free(p->intercept_names);
	nameset_free(p->allow_wild);
	nameset_free(p->deny_wild);
	free(p->allow_next);
	free(p->deny_next);
	cidr_tree_free(p->allow_cidrs);
	cidr_tree_free(p->deny_cidrs);
	free(p);
}

/* ------------------------------------------------------------------ */
/* Decisions                                                           */

/* Which ports a rule must cover to count. */
enum port_need {
	PORT_THIS,	/* the given port */
	PORT_ALL,	/* every port: a rule without ports */
	PORT_ANY,	/* some port: any rule */
};

static int
rule_covers(const struct egress_rule *r, enum port_need need, uint16_t port)
{
	size_t i;

	if (need == PORT_ANY || r->ports == NULL)
		return 1;
	if (need == PORT_ALL)
		return 0;
	for (i = 0; i < r->nports; i++)
		if (r->ports[i] == port)
			return 1;
	return 0;
}

/* The first rule in a same-pattern chain that covers the port. */
static int
chain_hit(const struct egress_rule *rules, const uint32_t *next, uint32_t id,
    enum port_need need, uint16_t port, uint32_t *hit)
{
	for (; id != NO_RULE; id = next[id])
		if (rule_covers(&rules[id], need, port)) {
			*hit = id;
			return 1;
		}
	return 0;
}

/*
 * Whether any domain rule of a list matches name and covers the port: the
 * exact pattern first, then each wildcard from the longest suffix to the
 * shortest (the wildcard-only set, asked again with the suffix it matched,
 * names the next shorter one).
 */
static int
name_hit(const struct egress_rule *rules, const uint32_t *next,
    const struct nameset *all, const struct nameset *wild, const char *name,
    enum port_need need, uint16_t port, uint32_t *hit)
{
	const char *n = name;
	uint32_t id;

	if (all == NULL)
		return 0;
	if (nameset_match(all, name, &id) && rules[id].name[0] != '*' &&
	    chain_hit(rules, next, id, need, port, hit))
		return 1;
	while (nameset_match(wild, n, &id)) {
		if (chain_hit(rules, next, id, need, port, hit))
			return 1;
		n = rules[id].name + 2;
	}
	return 0;
}

struct cidr_arg {
	const struct egress_rule *rules;
	uint16_t	 port;
	uint32_t	 hit;
};

static int
cidr_visit(uint32_t id, void *arg)
{
	struct cidr_arg *a = arg;

	if (!rule_covers(&a->rules[id], PORT_THIS, a->port))
		return 0;
	a->hit = id;
	return 1;
}

static int
cidr_hit(const struct cidr_tree *t, const struct egress_rule *rules,
    const struct sl_addr *a, uint16_t port, uint32_t *hit)
{
	struct cidr_arg arg = { rules, port, NO_RULE };

	if (t == NULL || cidr_tree_walk(t, a, cidr_visit, &arg) == 0)
		return 0;
	*hit = arg.hit;
	return 1;
}

static void
decide(struct decision *d, enum verdict v, const char *reason,
    const char *rule, int need_binding)
{
	d->verdict = v;
	d->reason = reason;
	d->rule = rule;
	d->need_binding = need_binding;
}

void
policy_check_dest(const struct policy *p, const struct sl_addr *dst,
    uint16_t port, struct decision *d)
{
	struct sl_addr a;
	uint32_t id;

	addr_canonical(dst, &a);
	if (addr_classify(&a, NULL) == ADDR_FORBIDDEN) {
		decide(d, VERDICT_DENY, "forbidden-address", NULL, 0);
		return;
	}
	if (cidr_hit(p->deny_cidrs, p->deny, &a, port, &id)) {
		decide(d, VERDICT_DENY, "deny-cidr", p->deny[id].label, 0);
		return;
	}
	decide(d, VERDICT_CONTINUE, NULL, NULL, 0);
}

/* Step 5 once step 2 said CONTINUE; a is canonical. */
static void
opaque_verdict(const struct policy *p, const struct sl_addr *a,
    uint16_t port, struct decision *d)
{
	uint32_t id;

	if (cidr_hit(p->allow_cidrs, p->allow, a, port, &id))
		decide(d, VERDICT_PASS, "allow-cidr", p->allow[id].label, 0);
	else if (addr_classify(a, NULL) != ADDR_PUBLIC)
		decide(d, VERDICT_DENY, "private-address", NULL, 0);
	else
		decide(d, VERDICT_DENY, "no-cidr-rule", NULL, 0);
}

void
policy_check_name(const struct policy *p, const char *name,
    const struct sl_addr *dst, uint16_t port, struct decision *d)
{
	char norm[NAME_BUFSZ];
	struct sl_addr a;
	uint32_t id;

	/* Step 2 again, so a caller that skipped it still cannot pass. */
	policy_check_dest(p, dst, port, d);
	if (d->verdict != VERDICT_CONTINUE)
		return;
	if (name == NULL) {
		policy_check_opaque(p, dst, port, d);
		return;
	}
	if (name_normalize(name, strlen(name), norm) != 0) {
		decide(d, VERDICT_DENY, "invalid-name", NULL, 0);
		return;
	}
	addr_canonical(dst, &a);
	if (name_hit(p->deny, p->deny_next, p->deny_names, p->deny_wild, norm,
	    PORT_THIS, port, &id)) {
		decide(d, VERDICT_DENY, "deny-name", p->deny[id].label, 0);
		return;
	}
	if (p->intercept_names != NULL &&
	    nameset_match(p->intercept_names, norm, &id)) {
		decide(d, VERDICT_INTERCEPT, "intercept",
		    p->intercepts[id].label, 1);
		return;
	}
	if (cidr_hit(p->allow_cidrs, p->allow, &a, port, &id)) {
		decide(d, VERDICT_PASS, "allow-cidr", p->allow[id].label, 0);
		return;
	}
	if (addr_classify(&a, NULL) != ADDR_PUBLIC) {
		decide(d, VERDICT_DENY, "private-address", NULL, 0);
		return;
	}
	if (name_hit(p->allow, p->allow_next, p->allow_names, p->allow_wild,
	    norm, PORT_THIS, port, &id)) {
		decide(d, VERDICT_PASS, "allow-name", p->allow[id].label, 1);
		return;
	}
	if (p->default_allow) {
		decide(d, VERDICT_PASS, "default-allow", NULL, 1);
		return;
	}
	decide(d, VERDICT_DENY, "not-allowed", NULL, 0);
}

void
policy_check_opaque(const struct policy *p, const struct sl_addr *dst,
    uint16_t port, struct decision *d)
{
	struct sl_addr a;

	policy_check_dest(p, dst, port, d);
	if (d->verdict != VERDICT_CONTINUE)
		return;
	addr_canonical(dst, &a);
	opaque_verdict(p, &a, port, d);
}

int
policy_name_allowed(const struct policy *p, const char *name)
{
	char norm[NAME_BUFSZ];
	uint32_t id;

	if (name == NULL || name_normalize(name, strlen(name), norm) != 0)
		return 0;
	/* A deny rule limited to some ports leaves the name usable. */
	if (name_hit(p->deny, p->deny_next, p->deny_names, p->deny_wild, norm,
	    PORT_ALL, 0, &id))
		return 0;
	if (p->intercept_names != NULL &&
	    nameset_match(p->intercept_names, norm, &id))
		return 1;
	if (name_hit(p->allow, p->allow_next, p->allow_names, p->allow_wild,
	    norm, PORT_ANY, 0, &id))
		return 1;
	return p->default_allow;
}

int
policy_pattern_match(const char *pattern, const char *name)
{
	size_t pl, nl;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, name) == 0;
	pl = strlen(pattern + 1);	/* ".suffix" */
	nl = strlen(name);
	return nl > pl && strcmp(name + nl - pl, pattern + 1) == 0;
}
