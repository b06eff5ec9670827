/*
 * suggest.c: a policy drafted from what a sandbox did (suggest.h).  The
 * trail's records are gathered into names, addresses and intercepted
 * requests; the draft allows those and nothing else, collapses many
 * siblings into a wildcard or a glob, and never proposes what sluice
 * never opens to a sandbox (private, loopback, metadata addresses) nor
 * what a rule denied: it says so in comments.
 */
#include "autoconf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/addr.h"
#include "util/names.h"
#include "sluicectl/suggest.h"

#define COLLAPSE_MIN	3	/* siblings that make a wildcard or a glob */
#define EXAMPLES	3	/* names a comment lists */

struct suggest {
	json_t	*names;		/* name -> {conns, lookups, ports{}, intercepted} */
	json_t	*addrs;		/* "addr" -> {conns, ports{}} */
	json_t	*hosts;		/* intercepted host -> {path -> {METHOD: n}} */
	json_t	*injected;	/* host -> {rule: n}: requests that got a credential */
	json_t	*refused;	/* "what" -> {why, n}: never proposed */
	unsigned long long records, used;
};

struct suggest *
suggest_new(void)
{
	struct suggest *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->names = json_object();
	s->addrs = json_object();
	s->hosts = json_object();
	s->injected = json_object();
	s->refused = json_object();
	if (s->names == NULL || s->addrs == NULL || s->hosts == NULL ||
	    s->injected == NULL || s->refused == NULL) {
		suggest_free(s);
		return NULL;
	}
	return s;
}

void
suggest_free(struct suggest *s)
{
	if (s == NULL)
		return;
	json_decref(s->names);
	json_decref(s->addrs);
	json_decref(s->hosts);
	json_decref(s->injected);
	json_decref(s->refused);
	free(s);
}

static const char *
str(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

/* o[key] (made an object when missing). */
static json_t *
child(json_t *o, const char *key)
{
	json_t *c = json_object_get(o, key);

	if (c == NULL && (c = json_object()) != NULL &&
	    json_object_set_new(o, key, c) != 0)
		c = NULL;
	return c;
}

static void
bump(json_t *o, const char *key)
{
	json_object_set_new(o, key, json_integer(
	    json_integer_value(json_object_get(o, key)) + 1));
}

static void
refuse(struct suggest *s, const char *what, const char *why)
{
	json_t *r = child(s->refused, what);

	if (r == NULL)
		return;
	json_object_set_new(r, "why", json_string(why));
	bump(r, "n");
}

static void
take_conn(struct suggest *s, const json_t *rec)
{
	const char *dst = str(rec, "dst"), *name = str(rec, "sni");
	const char *reason = str(rec, "reason"), *action = str(rec, "action");
	json_int_t port = json_integer_value(json_object_get(rec, "dst_port"));
	char norm[NAME_BUFSZ], what[NAME_BUFSZ + 64], p[8];
	struct sl_addr a, ca;
	enum addr_class cls;
	json_t *n;

	if (name == NULL)
		name = str(rec, "host");
	if (name == NULL)
		name = str(rec, "authority");
	if (name != NULL && addr_parse(name, &a) == 0)
		name = NULL;	/* an address: judged as one */
	if (dst == NULL || addr_parse(dst, &a) != 0 || port <= 0 ||
	    port > 65535 || reason == NULL || action == NULL ||
	    (name != NULL && name_normalize(name, strlen(name), norm) != 0))
		return;
	snprintf(p, sizeof(p), "%lld", (long long)port);
	snprintf(what, sizeof(what), "%s:%s%s%s%s", dst, p, name ? " (" : "",
	    name ? norm : "", name ? ")" : "");
	addr_canonical(&a, &ca);
	cls = addr_classify(&ca, NULL);
	if (cls != ADDR_PUBLIC) {
		refuse(s, what, cls == ADDR_PRIVATE ? "a private address" :
		    "an address never open to a sandbox (loopback, link-local, "
		    "metadata, the gateway's own)");
		return;
	}
	if (strcmp(reason, "deny-name") == 0 || strcmp(reason, "deny-cidr") == 0) {
		refuse(s, what, "a deny rule refuses it");
		if (name != NULL && (n = child(s->names, norm)) != NULL)
			json_object_set_new(n, "denied", json_true());
		return;
	}
	/* What a decision let through, or refused only for lack of a rule. */
	if (strcmp(action, "deny") == 0 && strcmp(reason, "not-allowed") != 0 &&
	    strcmp(reason, "no-cidr-rule") != 0 && strcmp(reason, "no-sni") != 0)
		return;
	s->used++;
	if (name != NULL) {
		if ((n = child(s->names, norm)) == NULL)
			return;
		bump(n, "conns");
		json_object_set_new(child(n, "ports"), p, json_true());
		if (strcmp(action, "intercept") == 0)
			json_object_set_new(n, "intercepted", json_true());
		return;
	}
	if ((n = child(s->addrs, dst)) == NULL)
		return;
	bump(n, "conns");
	json_object_set_new(child(n, "ports"), p, json_true());
}

static void
take_dns(struct suggest *s, const json_t *rec)
{
	const char *name = str(rec, "name"), *verdict = str(rec, "verdict");
	char norm[NAME_BUFSZ];
	json_t *n;

	if (name == NULL || verdict == NULL || strcmp(verdict, "refused") == 0 ||
	    name_normalize(name, strlen(name), norm) != 0)
		return;
	s->used++;
	if ((n = child(s->names, norm)) == NULL)
		return;
	bump(n, "lookups");
	/* Refused while observing: only a deny rule does that. */
	if (strcmp(verdict, "nxdomain") == 0 &&
	    json_is_true(json_object_get(rec, "observe")))
		json_object_set_new(n, "denied", json_true());
	else if (strcmp(verdict, "nxdomain") == 0)
		bump(n, "refused_lookups");
}

/*
 * Whether p is a path as http_path_normalize() leaves it, so that it can
 * stand in a glob: segments of unreserved and sub-delimiter characters
 * and valid escapes (never an encoded '/', '\\' or NUL), no empty segment
 * but a last one, no dot segment.
 */
static int
normalised_path(const char *p)
{
	const char *seg;
	size_t n;

	if (p[0] != '/')
		return 0;
	for (seg = p + 1;; seg += n + 1) {
		n = strcspn(seg, "/");
		if ((n == 0 && seg[n] == '/') || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return 0;
		for (p = seg; p < seg + n; p++) {
			if (*p == '%') {
				if (!isxdigit((unsigned char)p[1]) ||
				    !isxdigit((unsigned char)p[2]) ||
				    strncasecmp(p, "%2f", 3) == 0 ||
				    strncasecmp(p, "%5c", 3) == 0 ||
				    strncmp(p, "%00", 3) == 0)
					return 0;
				p += 2;
			} else if (!isalnum((unsigned char)*p) &&
			    strchr("-._~!$&'()*+,;=:@", *p) == NULL)
				return 0;
		}
		if (seg[n] == '\0')
			return 1;
	}
}

static void
take_request(struct suggest *s, const json_t *rec)
{
	const char *host = str(rec, "host"), *path = str(rec, "path");
	const char *method = str(rec, "method"), *action = str(rec, "action");
	const char *reason = str(rec, "reason"), *rule = str(rec, "rule");
	char norm[NAME_BUFSZ], what[NAME_BUFSZ + 300];
	json_t *h;
	size_t i;

	if (!json_is_true(json_object_get(rec, "intercepted")) ||
	    host == NULL || path == NULL || path[0] != '/' || method == NULL ||
	    action == NULL || reason == NULL ||
	    name_normalize(host, strlen(host), norm) != 0)
		return;
	for (i = 0; method[i] != '\0'; i++)
		if (!isupper((unsigned char)method[i]))
			return;
	if (!normalised_path(path))
		return;		/* not what the daemon judges requests by */
	if (strcmp(reason, "deny-rule") == 0) {
		snprintf(what, sizeof(what), "%s %s%s", method, norm, path);
		refuse(s, what, "a deny rule refuses it");
		return;
	}
	if (strcmp(reason, "intercept-rule") != 0 &&
	    strcmp(reason, "observe") != 0 &&
	    strcmp(reason, "no-matching-rule") != 0)
		return;		/* malformed, refused for other reasons */
	s->used++;
	if ((h = child(child(s->hosts, norm), path)) != NULL)
		bump(h, method);
	if ((strcmp(action, "inject") == 0 || strcmp(action, "forward") == 0) &&
	    rule != NULL)
		bump(child(s->injected, norm), rule);
}

void
suggest_take(struct suggest *s, const json_t *rec)
{
	const char *type = str(rec, "type");

	s->records++;
	if (type == NULL)
		return;
	if (strcmp(type, "conn") == 0)
		take_conn(s, rec);
	else if (strcmp(type, "dns") == 0)
		take_dns(s, rec);
	else if (strcmp(type, "request") == 0)
		take_request(s, rec);
}

/* ---- the draft ------------------------------------------------------ */

static int
port_cmp(const void *a, const void *b)
{
	return atoi(*(const char *const *)a) - atoi(*(const char *const *)b);
}

/* "ports: [..]", in order. */
static void
out_ports(FILE *f, const json_t *ports, const char *indent)
{
	const char **v, *p;
	size_t n = 0, i;
	json_t *val;

	if (ports == NULL || json_object_size(ports) == 0 ||
	    (v = calloc(json_object_size(ports), sizeof(*v))) == NULL)
		return;
	json_object_foreach((json_t *)ports, p, val)
		v[n++] = p;
	qsort(v, n, sizeof(*v), port_cmp);
	fprintf(f, "%sports: [", indent);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", v[i]);
	fprintf(f, "]\n");
	free(v);
}

/* The name one label up, or NULL for a name of two labels or fewer. */
static const char *
parent_of(const char *name)
{
	const char *dot = strchr(name, '.');

	return dot != NULL && strchr(dot + 1, '.') != NULL ? dot + 1 : NULL;
}

/* Names not intercepted: exact, or "*.parent" for COLLAPSE_MIN siblings. */
static void
out_domains(FILE *f, struct suggest *s)
{
	json_t *parents = json_object(), *kids, *n, *merged, *v;
	const char *name, *par, *k, *p;
	size_t i, shown;

	if (parents == NULL)
		return;
	json_object_foreach(s->names, name, n) {
		if ((json_is_true(json_object_get(n, "intercepted")) &&
		    json_object_get(s->hosts, name) != NULL) ||
		    json_is_true(json_object_get(n, "denied")))
			continue;	/* an intercept rule covers it, or denied */
		if ((par = parent_of(name)) == NULL)
			continue;
		if ((kids = json_object_get(parents, par)) == NULL &&
		    json_object_set_new(parents, par, json_array()) == 0)
			kids = json_object_get(parents, par);
		json_array_append_new(kids, json_string(name));
	}
	json_object_foreach(parents, par, kids) {
		if (json_array_size(kids) < COLLAPSE_MIN)
			continue;
		if ((merged = json_object()) == NULL)
			continue;
		fprintf(f, "    - domain: \"*.%s\"  # %zu names below %s:", par,
		    json_array_size(kids), par);
		shown = 0;
		json_array_foreach(kids, i, v) {
			k = json_string_value(v);
			if (shown++ < EXAMPLES)
				fprintf(f, " %s", k);
			json_object_update(merged, json_object_get(
			    json_object_get(s->names, k), "ports"));
			json_object_set_new(json_object_get(s->names, k),
			    "collapsed", json_true());
		}
		fprintf(f, "%s\n", shown > EXAMPLES ? " ..." : "");
		out_ports(f, merged, "      ");
		json_decref(merged);
	}
	json_object_foreach(s->names, name, n) {
		if (json_is_true(json_object_get(n, "collapsed")) ||
		    json_is_true(json_object_get(n, "denied")) ||
		    (json_is_true(json_object_get(n, "intercepted")) &&
		    json_object_get(s->hosts, name) != NULL))
			continue;
		p = json_object_get(n, "conns") != NULL ? "" :
		    json_integer_value(json_object_get(n, "refused_lookups")) ==
		    json_integer_value(json_object_get(n, "lookups")) ?
		    "; looked up only, and refused: no rule allowed it, or a "
		    "deny rule denies it" : "; looked up only";
		fprintf(f, "    - domain: %s  # connections: %lld, lookups: "
		    "%lld%s\n", name, (long long)json_integer_value(
		    json_object_get(n, "conns")), (long long)json_integer_value(
		    json_object_get(n, "lookups")), p);
		out_ports(f, json_object_get(n, "ports"), "      ");
	}
	json_decref(parents);
}

static void
out_cidrs(FILE *f, struct suggest *s)
{
	struct sl_addr a;
	const char *k;
	json_t *n;

	json_object_foreach(s->addrs, k, n) {
		if (addr_parse(k, &a) != 0)
			continue;
		fprintf(f, "    - cidr: \"%s/%d\"  # connections: %lld, no name\n",
		    k, a.family == AF_INET6 ? 128 : 32,
		    (long long)json_integer_value(json_object_get(n, "conns")));
		out_ports(f, json_object_get(n, "ports"), "      ");
	}
}

/* p[0..len) as glob text that matches only itself: '*' is "%2A". */
static void
esc_path(char *out, size_t cap, const char *p, size_t len)
{
	size_t o = 0, i;

	for (i = 0; i < len && o + 4 < cap; i++)
		if (p[i] == '*') {
			memcpy(out + o, "%2A", 3);
			o += 3;
		} else
			out[o++] = p[i];
	out[o] = '\0';
}

struct pathset {
	const char	**v;
	size_t		 n;
};

static int
path_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Offset just past segment d of p ("/a/b": d 0 -> 2, d 1 -> 4), or 0. */
static size_t
seg_after(const char *p, size_t d)
{
	size_t i = 0;

	for (;;) {
		if (p[i] != '/')
			return 0;
		i++;
		while (p[i] != '\0' && p[i] != '/')
			i++;
		if (d-- == 0)
			return i;
	}
}

struct glob {
	char	 text[600];	/* the glob, as YAML wants it */
	json_t	*methods;	/* METHOD -> n */
	size_t	 paths;
};

static void
glob_methods(struct glob *g, const json_t *perpath)
{
	const char *m;
	json_t *n;

	g->paths++;
	json_object_foreach((json_t *)perpath, m, n)
		json_object_set_new(g->methods, m, json_integer(
		    json_integer_value(json_object_get(g->methods, m)) +
		    json_integer_value(n)));
}

static void	out_rule(FILE *f, const char *host, const struct glob *g,
		    int idx, int is_glob);

/* One rule for p alone. */
static void
out_exact(FILE *f, const char *host, const char *p, const json_t *paths,
    int *idx)
{
	struct glob g;

	memset(&g, 0, sizeof(g));
	if ((g.methods = json_object()) == NULL)
		return;
	esc_path(g.text, sizeof(g.text), p, strlen(p));
	glob_methods(&g, json_object_get(paths, p));
	out_rule(f, host, &g, (*idx)++, 0);
	json_decref(g.methods);
}

/* Where the group of v[i] (by segment d) ends. */
static size_t
group_end(const struct pathset *ps, size_t i, size_t hi, size_t d)
{
	size_t e = seg_after(ps->v[i], d), j;

	for (j = i + 1; j < hi && seg_after(ps->v[j], d) == e &&
	    strncmp(ps->v[j], ps->v[i], e) == 0; j++)
		;
	return j;
}

/*
 * Paths v[lo..hi), sorted and distinct, share their first d segments
 * (the prefix P).  With COLLAPSE_MIN different segments d or more below
 * a P of one segment or more: one glob, P and "/" and "**" (which covers
 * P too), or P and "/" and "*.ext" when each is a last segment with the
 * same extension.  Fewer: P itself when it was seen, each single path as
 * it is, each group deeper.
 */
static void
collapse(FILE *f, const char *host, const struct pathset *ps, size_t lo,
    size_t hi, size_t d, const json_t *paths, int *idx)
{
	size_t i, j, plen, kids = 0, leafs = 0, e;
	const char *ext = NULL, *dot;
	int ends = 0;
	struct glob g;

	plen = d == 0 ? 0 : seg_after(ps->v[lo], d - 1);
	for (i = lo; i < hi; i = j) {
		if ((e = seg_after(ps->v[i], d)) == 0) {
			ends = 1;	/* P itself */
			j = i + 1;
			continue;
		}
		j = group_end(ps, i, hi, d);
		kids++;
		if (j == i + 1 && ps->v[i][e] == '\0') {
			dot = strrchr(ps->v[i] + plen + 1, '.');
			if (leafs++ == 0)
				ext = dot;
			else if (ext != NULL && (dot == NULL ||
			    strcmp(dot, ext) != 0))
				ext = NULL;
		}
	}
	/* Never all of a host: its whole API is not what a sandbox showed. */
	if (d > 0 && kids >= COLLAPSE_MIN) {
		memset(&g, 0, sizeof(g));
		if ((g.methods = json_object()) == NULL)
			return;
		/* P escaped, then the glob's own stars */
		esc_path(g.text, sizeof(g.text) - 80, ps->v[lo], plen);
		if (!ends && leafs == kids && ext != NULL && ext[1] != '\0' &&
		    strchr(ext, '*') == NULL && strlen(ext) < 64) {
			strcat(g.text, "/*");
			strcat(g.text, ext);
		} else
			strcat(g.text, "/**");
		for (i = lo; i < hi; i++)
			glob_methods(&g, json_object_get(paths, ps->v[i]));
		out_rule(f, host, &g, (*idx)++, 1);
		json_decref(g.methods);
		return;
	}
	for (i = lo; i < hi; i = j) {
		if ((e = seg_after(ps->v[i], d)) == 0) {
			out_exact(f, host, ps->v[i], paths, idx);
			j = i + 1;
			continue;
		}
		j = group_end(ps, i, hi, d);
		if (j == i + 1)
			out_exact(f, host, ps->v[i], paths, idx);
		else
			collapse(f, host, ps, i, j, d + 1, paths, idx);
	}
}

static void
out_rule(FILE *f, const char *host, const struct glob *g, int idx,
    int is_glob)
{
	const char *m, *sep = "", **v;
	json_t *n;
	long long total = 0;
	char name[64];
	size_t i, nv = 0;

	/* A rule name starts with a letter or digit; a host may not ("_x"). */
	snprintf(name, sizeof(name), "%s%.48s-%d", isalnum((unsigned char)
	    host[0]) ? "" : "host", host, idx);
	for (i = 0; name[i] != '\0'; i++)
		if (name[i] == '.' || name[i] == '*')
			name[i] = '-';
	fprintf(f, "  - name: %s\n    match: {host: %s, methods: [", name, host);
	if ((v = calloc(json_object_size(g->methods), sizeof(*v))) == NULL)
		return;
	json_object_foreach(g->methods, m, n) {
		v[nv++] = m;
		total += json_integer_value(n);
	}
	qsort(v, nv, sizeof(*v), path_cmp);	/* by name */
	for (i = 0; i < nv; i++) {
		fprintf(f, "%s%s", sep, v[i]);
		sep = ", ";
	}
	free(v);
	fprintf(f, "], path: \"%s", g->text);
	fprintf(f, "\"}\n    action: pass  # requests: %lld", total);
	if (is_glob)
		fprintf(f, ", paths: %zu", g->paths);
	fputc('\n', f);
}

static void
out_intercepts(FILE *f, struct suggest *s)
{
	const char *host, *p, *rule;
	json_t *paths, *v, *inj;
	struct pathset ps;
	int idx = 1;

	if (json_object_size(s->hosts) == 0)
		return;
	fputs("intercept:\n", f);
	/*
	 * One count for every host: a name is made of its host's, cut and
	 * with dots as dashes, so "a.b" and "a-b" would share their own.
	 */
	json_object_foreach(s->hosts, host, paths) {
		ps.n = 0;
		if ((ps.v = calloc(json_object_size(paths), sizeof(*ps.v))) ==
		    NULL)
			continue;
		json_object_foreach(paths, p, v)
			ps.v[ps.n++] = p;
		qsort(ps.v, ps.n, sizeof(*ps.v), path_cmp);
		if ((inj = json_object_get(s->injected, host)) != NULL)
			json_object_foreach(inj, rule, v)
				fprintf(f, "  # %s: %lld requests got a "
				    "credential from rule %s: give the rule\n  "
				    "# that needs it an inject block\n",
				    host, (long long)json_integer_value(v), rule);
		collapse(f, host, &ps, 0, ps.n, 0, paths, &idx);
		free(ps.v);
	}
}

void
suggest_render(FILE *f, struct suggest *s, const char *name,
    const char *sandbox, const char *source)
{
	char *allow = NULL;
	size_t len = 0;
	const char *k;
	FILE *mem;
	json_t *r;

	fprintf(f, "# Drafted by sluicectl policy suggest from %llu records of "
	    "sandbox %s\n# (%s).\n# It allows what was seen and nothing "
	    "else: check it with sluicectl\n# policy replay before it is put "
	    "in force.\n", s->used, sandbox, source);
	fprintf(f, "name: %s\negress:\n  default: deny\n", name);
	/* An allow list only when something is in it. */
	if ((mem = open_memstream(&allow, &len)) != NULL) {
		out_domains(mem, s);
		out_cidrs(mem, s);
		if (fclose(mem) == 0 && len > 0)
			fprintf(f, "  allow:\n%s", allow);
		free(allow);
	}
	out_intercepts(f, s);
	if (json_object_size(s->refused) == 0)
		return;
	fputs("# Not proposed (sluice never opens private, loopback or metadata\n"
	    "# addresses to a sandbox, and a deny rule stays one):\n", f);
	json_object_foreach(s->refused, k, r)
		fprintf(f, "#   %s: %s (times: %lld)\n", k,
		    json_string_value(json_object_get(r, "why")),
		    (long long)json_integer_value(json_object_get(r, "n")));
}
