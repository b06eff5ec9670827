/* yamltree.c: a YAML document as a tree of nodes that remember their place. */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "util/err.h"
#include "util/log.h"
#include "util/fsvc.h"
#include "util/yamltree.h"

#define YAML_MAX_DEPTH	32

/* The state of one parse: libyaml's parser and what we found so far. */
struct yparse {
	yaml_parser_t	 parser;
	const char	*file;
	const char	*buf;
	size_t		 len;
	struct errlist	*errs;
	size_t		 nodes;
	size_t		 max_nodes;
	int		 invalid;	/* a problem was reported; keep looking */
	int		 stop;		/* libyaml failed or a limit was hit */
	int		 nomem;
};

static void
yerr(struct yparse *p, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
yerr(struct yparse *p, const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	p->invalid = 1;
	if (p->errs == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errlist_add(p->errs, p->file, (unsigned)m->line + 1,
	    (unsigned)m->column + 1, "%s", msg);
}

/* Reports libyaml's own error (syntax, encoding) and stops the parse. */
static void
yerr_parser(struct yparse *p)
{
	yaml_parser_t *y = &p->parser;
	const char *problem = y->problem != NULL ? y->problem : "syntax error";
	yaml_mark_t m;
	size_t i;

	p->stop = 1;
	if (y->error == YAML_MEMORY_ERROR) {
		p->nomem = 1;
		return;
	}
	if (y->error == YAML_READER_ERROR) {
		/* The reader gives a byte offset, not a mark. */
		memset(&m, 0, sizeof(m));
		for (i = 0; i < y->problem_offset && i < p->len; i++) {
			if (p->buf[i] == '\n') {
				m.line++;
				m.column = 0;
			} else
				m.column++;
		}
		if (y->problem_value != -1)
			yerr(p, &m, "%s (byte 0x%02x)", problem,
			    (unsigned)y->problem_value & 0xff);
		else
			yerr(p, &m, "%s", problem);
		return;
	}
	if (y->context != NULL)
		yerr(p, &y->problem_mark, "%s %s", problem, y->context);
	else
		yerr(p, &y->problem_mark, "%s", problem);
}

static int
next_event(struct yparse *p, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&p->parser, ev)) {
		yerr_parser(p);
		return SL_ERR_INVALID;
	}
	return 0;
}

static void
ynode_free(struct ynode *n)
{
	size_t i;

	if (n == NULL)
		return;
	free(n->scalar);
	for (i = 0; i < n->n; i++) {
		ynode_free(n->items[i]);
		if (n->keys != NULL)
			free(n->keys[i]);
	}
	free(n->items);
	free(n->keys);
	free(n->key_lines);
	free(n->key_cols);
	free(n);
}

/* Counts a node against the limit; stops the parse past it. */
static int
count_node(struct yparse *p, const yaml_mark_t *m)
{
	if (++p->nodes > p->max_nodes) {
		yerr(p, m, "more than %zu nodes", p->max_nodes);
		p->stop = 1;
		return SL_ERR_TOO_BIG;
	}
	return 0;
}

/* Anchors and tags are refused wherever they appear. */
static void
check_props(struct yparse *p, const yaml_mark_t *m, const yaml_char_t *anchor,
    const yaml_char_t *tag)
{
	char esc[80];

	if (anchor != NULL) {
		log_escape((const char *)anchor, strlen((const char *)anchor),
		    esc, sizeof(esc));
		yerr(p, m, "anchors are not allowed (&%s)", esc);
	}
	if (tag != NULL) {
		log_escape((const char *)tag, strlen((const char *)tag), esc,
		    sizeof(esc));
		yerr(p, m, "tags are not allowed (%s)", esc);
	}
}

static struct ynode *
node_new(enum ynode_kind kind, const yaml_mark_t *m)
{
	struct ynode *n;

	if ((n = calloc(1, sizeof(*n))) == NULL)
		return NULL;
	n->kind = kind;
	n->line = (unsigned)m->line + 1;
	n->col = (unsigned)m->column + 1;
	return n;
}

static int
make_scalar(struct yparse *p, const yaml_event_t *ev, struct ynode **out)
{
	struct ynode *n = NULL;
	size_t len = ev->data.scalar.length;
	int r = SL_ERR_INTERNAL;

	if ((r = count_node(p, &ev->start_mark)) != 0)
		goto out;
	check_props(p, &ev->start_mark, ev->data.scalar.anchor,
	    ev->data.scalar.tag);
	if ((n = node_new(YNODE_SCALAR, &ev->start_mark)) == NULL ||
	    (n->scalar = malloc(len + 1)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	memcpy(n->scalar, ev->data.scalar.value, len);
	n->scalar[len] = '\0';
	n->scalar_len = len;
	n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
	*out = n;
	n = NULL;
	r = 0;
 out:
	ynode_free(n);
	return r;
}

/* Grows a SEQ's or MAP's arrays to hold one more entry. */
static int
node_grow(struct ynode *n, size_t *cap)
{
	struct ynode **items;
	char **keys;
	unsigned *lines, *cols;
	size_t ncap;

	if (n->n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 4;
	if ((items = realloc(n->items, ncap * sizeof(*items))) == NULL)
		return SL_ERR_NOMEM;
	n->items = items;
	if (n->kind == YNODE_MAP) {
		if ((keys = realloc(n->keys, ncap * sizeof(*keys))) == NULL)
			return SL_ERR_NOMEM;
		n->keys = keys;
		if ((lines = realloc(n->key_lines, ncap * sizeof(*lines))) ==
		    NULL)
			return SL_ERR_NOMEM;
		n->key_lines = lines;
		if ((cols = realloc(n->key_cols, ncap * sizeof(*cols))) == NULL)
			return SL_ERR_NOMEM;
		n->key_cols = cols;
	}
	*cap = ncap;
	return 0;
}

static int parse_node(struct yparse *, yaml_event_t *, unsigned,
    struct ynode **);

static int
parse_seq(struct yparse *p, const yaml_event_t *start, unsigned depth,
    struct ynode *n)
{
	yaml_event_t ev;
	struct ynode *child = NULL;
	size_t cap = 0;
	int r;

	(void)start;
	for (;;) {
		if ((r = next_event(p, &ev)) != 0)
			return r;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if ((r = parse_node(p, &ev, depth + 1, &child)) != 0)
			return r;
		if ((r = node_grow(n, &cap)) != 0) {
			ynode_free(child);
			return r;
		}
		n->items[n->n++] = child;
		child = NULL;
	}
}

struct keyref {
	const char	*key;
	size_t		 idx;
};

static int
keyref_cmp(const void *a, const void *b)
{
	const struct keyref *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c != 0)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Finds duplicate keys of a finished MAP by sorting, so a map with many
 * keys costs n log n rather than n squared.
 */
static int
check_duplicates(struct yparse *p, const struct ynode *n)
{
	struct keyref *refs;
	yaml_mark_t m;
	size_t i, first = 0;
	char esc[80];

	if (n->n < 2)
		return 0;
	if ((refs = calloc(n->n, sizeof(*refs))) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < n->n; i++) {
		refs[i].key = n->keys[i];
		refs[i].idx = i;
	}
	qsort(refs, n->n, sizeof(*refs), keyref_cmp);
	for (i = 1; i < n->n; i++) {
		if (strcmp(refs[i].key, refs[first].key) != 0) {
			first = i;
			continue;
		}
		memset(&m, 0, sizeof(m));
		m.line = n->key_lines[refs[i].idx] - 1;
		m.column = n->key_cols[refs[i].idx] - 1;
		log_escape(refs[i].key, strlen(refs[i].key), esc, sizeof(esc));
		yerr(p, &m, "duplicate key '%s' (first at line %u)", esc,
		    n->key_lines[refs[first].idx]);
	}
	free(refs);
	return 0;
}

static int
parse_map(struct yparse *p, const yaml_event_t *start, unsigned depth,
    struct ynode *n)
{
	yaml_event_t ev;
	yaml_mark_t km;
	struct ynode *key = NULL, *val = NULL;
	size_t cap = 0;
	int r = SL_ERR_INTERNAL;

	(void)start;
	for (;;) {
		if ((r = next_event(p, &ev)) != 0)
			goto out;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		km = ev.start_mark;
		if ((r = parse_node(p, &ev, depth + 1, &key)) != 0)
			goto out;
		if (key->kind != YNODE_SCALAR)
			yerr(p, &km, "mapping keys must be scalars");
		else if (strlen(key->scalar) != key->scalar_len)
			yerr(p, &km, "mapping key contains a NUL byte");
		if ((r = next_event(p, &ev)) != 0)
			goto out;
		if ((r = parse_node(p, &ev, depth + 1, &val)) != 0)
			goto out;
		if (key->kind != YNODE_SCALAR) {
			/* Reported above; drop the entry, keep looking. */
			ynode_free(key);
			ynode_free(val);
			key = val = NULL;
			continue;
		}
		if ((r = node_grow(n, &cap)) != 0)
			goto out;
		n->keys[n->n] = key->scalar;
		key->scalar = NULL;	/* transferred */
		n->key_lines[n->n] = key->line;
		n->key_cols[n->n] = key->col;
		n->items[n->n] = val;
		val = NULL;		/* transferred */
		n->n++;
		ynode_free(key);
		key = NULL;
	}
	r = check_duplicates(p, n);
 out:
	ynode_free(key);
	ynode_free(val);
	return r;
}

/*
 * Builds the node that starts with ev (which this takes over and deletes),
 * reading events up to its end.  Returns 0 with *out set, or an error with
 * the parse stopped.  Problems that do not stop the parse (an alias, a tag)
 * are reported and the walk goes on so that one run reports all of them.
 */
static int
parse_node(struct yparse *p, yaml_event_t *ev, unsigned depth,
    struct ynode **out)
{
	struct ynode *n = NULL;
	const yaml_char_t *anchor = NULL, *tag = NULL;
	enum ynode_kind kind;
	int r = SL_ERR_INTERNAL;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		r = make_scalar(p, ev, &n);
		goto out;
	case YAML_ALIAS_EVENT:
		yerr(p, &ev->start_mark, "aliases are not allowed");
		/* A stand-in null, so the walk can go on. */
		if ((r = count_node(p, &ev->start_mark)) != 0)
			goto out;
		if ((n = node_new(YNODE_SCALAR, &ev->start_mark)) == NULL ||
		    (n->scalar = strdup("")) == NULL) {
			r = SL_ERR_NOMEM;
			goto out;
		}
		r = 0;
		goto out;
	case YAML_SEQUENCE_START_EVENT:
		kind = YNODE_SEQ;
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		kind = YNODE_MAP;
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		yerr(p, &ev->start_mark, "unexpected YAML event");
		p->stop = 1;
		r = SL_ERR_INVALID;
		goto out;
	}

	if ((r = count_node(p, &ev->start_mark)) != 0)
		goto out;
	check_props(p, &ev->start_mark, anchor, tag);
	if (depth > YAML_MAX_DEPTH) {
		yerr(p, &ev->start_mark, "nesting deeper than %d levels",
		    YAML_MAX_DEPTH);
		p->stop = 1;
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((n = node_new(kind, &ev->start_mark)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (kind == YNODE_SEQ)
		r = parse_seq(p, ev, depth, n);
	else
		r = parse_map(p, ev, depth, n);
 out:
	yaml_event_delete(ev);
	if (r == SL_ERR_NOMEM)
		p->nomem = 1;
	if (r != 0) {
		ynode_free(n);
		return r;
	}
	*out = n;
	return 0;
}

/* The stream: at most one document, holding at most one root node. */
static int
parse_stream(struct yparse *p, struct ynode **root)
{
	yaml_event_t ev;
	struct ynode *n = NULL;
	int r = SL_ERR_INTERNAL, seen_doc = 0;

	for (;;) {
		if ((r = next_event(p, &ev)) != 0)
			goto out;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			yaml_event_delete(&ev);
			*root = n;
			n = NULL;
			r = 0;
			goto out;
		case YAML_DOCUMENT_START_EVENT:
			if (seen_doc) {
				yerr(p, &ev.start_mark,
				    "multiple documents are not allowed");
				yaml_event_delete(&ev);
				r = SL_ERR_INVALID;
				goto out;
			}
			seen_doc = 1;
			yaml_event_delete(&ev);
			break;
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			yaml_event_delete(&ev);
			break;
		default:
			/* The document's root node. */
			if ((r = parse_node(p, &ev, 1, &n)) != 0)
				goto out;
			break;
		}
	}
 out:
	ynode_free(n);
	return r;
}

int
ydoc_parse_limit(const char *file, const char *buf, size_t len,
    size_t max_nodes, struct ydoc **out, struct errlist *errs)
{
	struct yparse p;
	struct ydoc *d = NULL;
	struct ynode *root = NULL;
	int r = SL_ERR_INTERNAL;

	memset(&p, 0, sizeof(p));
	p.file = file;
	p.buf = buf;
	p.len = len;
	p.errs = errs;
	p.max_nodes = max_nodes;
	if (!yaml_parser_initialize(&p.parser))
		return SL_ERR_NOMEM;
	yaml_parser_set_input_string(&p.parser, (const unsigned char *)buf,
	    len);
	r = parse_stream(&p, &root);
	if (p.nomem) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (r != 0 || p.invalid) {
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->file = strdup(file)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	d->root = root;
	root = NULL;		/* transferred */
	*out = d;
	d = NULL;
	r = 0;
 out:
	yaml_parser_delete(&p.parser);
	ynode_free(root);
	ydoc_free(d);
	return r;
}

int
ydoc_parse(const char *file, const char *buf, size_t len, struct ydoc **out,
    struct errlist *errs)
{
	return ydoc_parse_limit(file, buf, len, YDOC_MAX_NODES, out, errs);
}

int
ydoc_read_file(const char *path, size_t max_bytes, char **out, size_t *outlen,
    struct errlist *errs)
{
	/* Here, or by the monitor once the worker is confined (fsvc.h). */
	if (fsvc_read(path, max_bytes, out, outlen) == 0)
		return 0;
	if (errno == EFBIG) {
		if (errs != NULL)
			errlist_add(errs, path, 0, 0, "larger than %zu bytes",
			    max_bytes);
		return SL_ERR_TOO_BIG;
	}
	if (errno == ENOMEM)
		return SL_ERR_NOMEM;
	if (errs != NULL)
		errlist_add(errs, path, 0, 0, "%s", strerror(errno));
	return SL_ERR_IO;
}

int
ydoc_load(const char *path, size_t max_bytes, struct ydoc **out,
    struct errlist *errs)
{
	char *buf = NULL;
	size_t len = 0;
	int r = SL_ERR_INTERNAL;

	if ((r = ydoc_read_file(path, max_bytes, &buf, &len, errs)) != 0)
		goto out;
	r = ydoc_parse(path, buf, len, out, errs);
 out:
	free(buf);
	return r;
}

void
ydoc_free(struct ydoc *d)
{
	if (d == NULL)
		return;
	ynode_free(d->root);
	free(d->file);
	free(d);
}

const struct ynode *
ynode_get(const struct ynode *map, const char *key)
{
	size_t i;

	if (map == NULL || map->kind != YNODE_MAP)
		return NULL;
	for (i = 0; i < map->n; i++)
		if (strcmp(map->keys[i], key) == 0)
			return map->items[i];
	return NULL;
}

int
ynode_is_null(const struct ynode *n)
{
	if (n == NULL)
		return 1;
	if (n->kind != YNODE_SCALAR || n->quoted)
		return 0;
	return strcmp(n->scalar, "") == 0 || strcmp(n->scalar, "~") == 0 ||
	    strcmp(n->scalar, "null") == 0 || strcmp(n->scalar, "Null") == 0 ||
	    strcmp(n->scalar, "NULL") == 0;
}

void
ycheck_err(struct ycheck *c, unsigned line, unsigned col, const char *fmt,
    ...)
{
	char msg[512];
	va_list ap;

	c->nerr++;
	if (c->errs == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errlist_add(c->errs, c->file, line, col, "%s", msg);
}

const char *
yesc(const char *s, char *buf, size_t len)
{
	return log_escape(s, strlen(s), buf, len);
}

void
ycheck_keys(struct ycheck *c, const struct ynode *map, const char *where,
    const char *const *allowed)
{
	char e[80];
	size_t i, j;

	for (i = 0; i < map->n; i++) {
		for (j = 0; allowed[j] != NULL; j++)
			if (strcmp(map->keys[i], allowed[j]) == 0)
				break;
		if (allowed[j] != NULL)
			continue;
		if (where == NULL)
			ycheck_err(c, map->key_lines[i], map->key_cols[i],
			    "unknown key '%s'", yesc(map->keys[i], e, sizeof(e)));
		else
			ycheck_err(c, map->key_lines[i], map->key_cols[i],
			    "unknown key '%s' in %s",
			    yesc(map->keys[i], e, sizeof(e)), where);
	}
}

int
ycheck_string(struct ycheck *c, const struct ynode *n, const char *what)
{
	if (n->kind != YNODE_SCALAR) {
		ycheck_err(c, n->line, n->col, "'%s' must be a single value, "
		    "not a %s", what, n->kind == YNODE_SEQ ? "list" : "map");
		return 0;
	}
	if (ynode_is_null(n)) {
		ycheck_err(c, n->line, n->col, "'%s' needs a value", what);
		return 0;
	}
	if (strlen(n->scalar) != n->scalar_len) {
		ycheck_err(c, n->line, n->col, "'%s' contains a NUL byte", what);
		return 0;
	}
	return 1;
}

int
yparse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	unsigned long long v = 0;
	const char *p;

	if (*s == '\0')
		return SL_ERR_INVALID;
	for (p = s; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return SL_ERR_INVALID;
	for (p = s; *p != '\0'; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > max)
			return SL_ERR_TOO_BIG;
	}
	*out = v;
	return 0;
}

struct msgref {
	unsigned	 line, col;
	size_t		 idx;
	char		*msg;
};

static int
msgref_cmp(const void *a, const void *b)
{
	const struct msgref *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void
ycheck_sort(struct ycheck *c, size_t from)
{
	struct msgref *refs;
	size_t i, n, flen = strlen(c->file);
	char *p, *end;

	if (c->errs == NULL || c->errs->n <= from + 1)
		return;
	n = c->errs->n - from;
	if ((refs = calloc(n, sizeof(*refs))) == NULL)
		return;		/* the order is a courtesy */
	for (i = 0; i < n; i++) {
		refs[i].msg = c->errs->msgs[from + i];
		refs[i].idx = i;
		p = refs[i].msg;
		if (strncmp(p, c->file, flen) != 0 || p[flen] != ':')
			continue;
		refs[i].line = (unsigned)strtoul(p + flen + 1, &end, 10);
		if (*end == ':')
			refs[i].col = (unsigned)strtoul(end + 1, NULL, 10);
	}
	qsort(refs, n, sizeof(*refs), msgref_cmp);
	for (i = 0; i < n; i++)
		c->errs->msgs[from + i] = refs[i].msg;
	free(refs);
}

void
ycheck_uint(struct ycheck *x, const struct ynode *map, const char *parent,
    const char *key, unsigned long long lo, unsigned long long hi,
    unsigned *dst)
{
	const struct ynode *n;
	unsigned long long v = 0;
	char path[64], e[80];
	int r;

	snprintf(path, sizeof(path), "%s.%s", parent, key);
	if ((n = ynode_get(map, key)) == NULL || !ycheck_string(x, n, path))
		return;
	if ((r = yparse_uint(n->scalar, hi, &v)) == SL_ERR_INVALID) {
		ycheck_err(x, n->line, n->col, "'%s': '%s' is not a positive integer",
		    path, yesc(n->scalar, e, sizeof(e)));
		return;
	}
	if (r != 0 || v < lo || v > hi) {
		ycheck_err(x, n->line, n->col, "'%s': %s is out of range %llu..%llu",
		    path, yesc(n->scalar, e, sizeof(e)), lo, hi);
		return;
	}
	*dst = (unsigned)v;
}

size_t
ycheck_seq(struct ycheck *x, const struct ynode *seq, const char *path,
    size_t max, const char *what)
{
	if (seq->kind != YNODE_SEQ) {
		ycheck_err(x, seq->line, seq->col, "'%s' must be a list", path);
		return 0;
	}
	if (seq->n > max) {
		ycheck_err(x, seq->line, seq->col, "'%s' holds more than %zu %s",
		    path, max, what);
		return 0;
	}
	return seq->n;
}
