/* prom.c: sums over the daemon's metrics (Prometheus text format 0.0.4). */
#include "autoconf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "sluicectl/prom.h"

#define BLANKS	" \t"

static int
is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int
is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static int
sums_add(struct prom_sums *sums, const char *key, double v)
{
	struct prom_sum *nv;
	size_t i, ncap;

	for (i = 0; i < sums->n; i++)
		if (strcmp(sums->v[i].key, key) == 0) {
			sums->v[i].value += v;
			return 0;
		}
	if (sums->n == sums->cap) {
		ncap = sums->cap ? sums->cap * 2 : 8;
		if ((nv = reallocarray(sums->v, ncap, sizeof(*nv))) == NULL)
			return SL_ERR_NOMEM;
		sums->v = nv;
		sums->cap = ncap;
	}
	if ((sums->v[sums->n].key = strdup(key)) == NULL)
		return SL_ERR_NOMEM;
	sums->v[sums->n++].value = v;
	return 0;
}

/*
 * Reads a label set after its '{' at *pp, decoding the values in place;
 * notes the value of by and whether where=is is among them.
 */
static int
parse_labels(char **pp, const char *by, const char *where, const char *is,
    const char **byval, int *matched)
{
	char *p = *pp, *name, *name_end, *val, *q;

	for (;;) {
		p += strspn(p, BLANKS);
		if (*p == '}')
			break;
		if (!is_name_start(*p))
			return SL_ERR_INVALID;
		name = p;
		while (is_name_char(*p))
			p++;
		name_end = p;
		p += strspn(p, BLANKS);
		if (*p++ != '=')
			return SL_ERR_INVALID;
		*name_end = '\0';
		p += strspn(p, BLANKS);
		if (*p++ != '"')
			return SL_ERR_INVALID;
		for (val = q = p; *p != '"'; ) {
			if (*p == '\0')
				return SL_ERR_INVALID;
			if (*p != '\\') {
				*q++ = *p++;
				continue;
			}
			p++;
			if (*p == 'n')
				*q++ = '\n';
			else if (*p == '\\' || *p == '"')
				*q++ = *p;
			else
				return SL_ERR_INVALID;
			p++;
		}
		p++;
		*q = '\0';	/* q is behind the closing quote */
		if (by != NULL && strcmp(name, by) == 0)
			*byval = val;
		if (where != NULL && strcmp(name, where) == 0 &&
		    strcmp(val, is) == 0)
			*matched = 1;
		p += strspn(p, BLANKS);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p != '}')
			return SL_ERR_INVALID;
		break;
	}
	*pp = p + 1;
	return 0;
}

/* One line, NUL-terminated and writable. */
static int
parse_line(char *s, const char *name, const char *by, const char *where,
    const char *is, struct prom_sums *sums)
{
	const char *byval = "";
	char *p = s, *mname, *tok, *end, c;
	int r, matched = where == NULL;
	double v;

	p += strspn(p, BLANKS);
	if (*p == '\0' || *p == '#')
		return 0;
	if (!is_name_start(*p) && *p != ':')
		return SL_ERR_INVALID;
	for (mname = p; is_name_char(*p) || *p == ':'; p++)
		;
	if ((c = *p) != '{' && c != ' ' && c != '\t')
		return SL_ERR_INVALID;
	*p++ = '\0';
	if (c == '{' && (r = parse_labels(&p, by, where, is, &byval,
	    &matched)) != 0)
		return r;
	p += strspn(p, BLANKS);
	tok = p;
	p += strcspn(p, BLANKS);
	if (p == tok)
		return SL_ERR_INVALID;
	if (*p != '\0')
		*p++ = '\0';
	v = strtod(tok, &end);
	if (*end != '\0')
		return SL_ERR_INVALID;
	/* An optional timestamp, in milliseconds. */
	p += strspn(p, BLANKS);
	if (*p == '-')
		p++;
	p += strspn(p, "0123456789");
	if (p[strspn(p, BLANKS)] != '\0')
		return SL_ERR_INVALID;
	if (strcmp(mname, name) != 0 || !matched || isnan(v))
		return 0;
	return sums_add(sums, byval, v);
}

int
prom_sum_by(const char *text, size_t len, const char *name, const char *by,
    const char *where, const char *is, struct prom_sums *sums,
    unsigned *bad_line)
{
	const char *p = text, *end = text + len, *nl;
	char *line = NULL;
	size_t n;
	unsigned lineno = 0;
	int r = 0;

	while (p < end) {
		lineno++;
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if ((line = strndup(p, n)) == NULL)
			return SL_ERR_NOMEM;
		r = parse_line(line, name, by, where, is, sums);
		free(line);
		if (r == SL_ERR_INVALID)
			*bad_line = lineno;
		if (r != 0)
			return r;
		p = nl + 1;
	}
	return 0;
}

int
prom_sums_ensure(struct prom_sums *sums, const char *const *keys)
{
	int r;

	for (; *keys != NULL; keys++)
		if ((r = sums_add(sums, *keys, 0)) != 0)
			return r;
	return 0;
}

static int
by_value(const void *a, const void *b)
{
	const struct prom_sum *x = a, *y = b;

	if (x->value != y->value)
		return x->value > y->value ? -1 : 1;
	return strcmp(x->key, y->key);
}

void
prom_sums_sort(struct prom_sums *sums)
{
	if (sums->n > 1)
		qsort(sums->v, sums->n, sizeof(*sums->v), by_value);
}

void
prom_sums_free(struct prom_sums *sums)
{
	size_t i;

	for (i = 0; i < sums->n; i++)
		free(sums->v[i].key);
	free(sums->v);
	sums->v = NULL;
	sums->n = sums->cap = 0;
}
