/* out.c: what sluicectl prints: aligned tables, key: value lines, JSON. */
#include "autoconf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"

void
table_init(struct table *t, size_t ncols)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
}

/* Takes cell (malloc'd, may be NULL after a failed allocation). */
static void
table_take(struct table *t, char *cell)
{
	char **nc, *p;
	size_t ncap;

	if (cell == NULL) {
		t->nomem = 1;
		return;
	}
	for (p = cell; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (t->n == t->cap) {
		ncap = t->cap ? t->cap * 2 : 32;
		if ((nc = reallocarray(t->cells, ncap, sizeof(*nc))) == NULL) {
			free(cell);
			t->nomem = 1;
			return;
		}
		t->cells = nc;
		t->cap = ncap;
	}
	t->cells[t->n++] = cell;
}

void
table_add(struct table *t, const char *cell)
{
	table_take(t, strdup(cell != NULL && *cell != '\0' ? cell : "-"));
}

void
table_addf(struct table *t, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	table_take(t, s);
}

/* A scalar as text in a new string; NULL for none or no memory. */
static char *
scalar_text(const json_t *v)
{
	char *s = NULL;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return strndup(json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		if (asprintf(&s, "%lld", (long long)json_integer_value(v)) < 0)
			s = NULL;
		return s;
	case JSON_REAL:
		if (asprintf(&s, "%g", json_real_value(v)) < 0)
			s = NULL;
		return s;
	case JSON_TRUE:
		return strdup("true");
	case JSON_FALSE:
		return strdup("false");
	case JSON_NULL:
		return strdup("-");
	default:
		return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	}
}

void
table_addj(struct table *t, const json_t *v, const char *sep)
{
	const json_t *item;
	char *all = NULL, *s, *n;
	size_t i;

	if (v == NULL || json_is_null(v) ||
	    (json_is_string(v) && json_string_length(v) == 0)) {
		table_add(t, NULL);
		return;
	}
	if (!json_is_array(v)) {
		table_take(t, scalar_text(v));
		return;
	}
	if ((all = strdup(json_array_size(v) == 0 ? "-" : "")) == NULL) {
		t->nomem = 1;
		return;
	}
	json_array_foreach(v, i, item) {
		if ((s = scalar_text(item)) == NULL ||
		    asprintf(&n, "%s%s%s", all, i ? sep : "", s) < 0) {
			free(s);
			free(all);
			t->nomem = 1;
			return;
		}
		free(s);
		free(all);
		all = n;
	}
	table_take(t, all);
}

int
table_print(const struct table *t, FILE *f)
{
	size_t *w, i, c, len;

	if (t->nomem)
		return SL_ERR_NOMEM;
	if (t->ncols == 0)
		return 0;
	if ((w = calloc(t->ncols, sizeof(*w))) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < t->n; i++)
		if ((len = strlen(t->cells[i])) > w[i % t->ncols])
			w[i % t->ncols] = len;
	for (i = 0; i < t->n; i++) {
		c = i % t->ncols;
		if (c == 0)
			fprintf(f, "%*s", (int)t->indent, "");
		if (t->right & (1u << c))
			fprintf(f, "%*s", (int)w[c], t->cells[i]);
		else if (c + 1 == t->ncols || i + 1 == t->n)
			fputs(t->cells[i], f);
		else
			fprintf(f, "%-*s", (int)w[c], t->cells[i]);
		fputs(c + 1 == t->ncols || i + 1 == t->n ? "\n" : "  ", f);
	}
	free(w);
	return 0;
}

void
table_free(struct table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->n = t->cap = 0;
}

int
table_show(struct table *t, const struct cmd *c)
{
	int rc = EXIT_OK;

	if (table_print(t, stdout) != 0) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		rc = EXIT_FAIL;
	}
	table_free(t);
	return rc;
}

void
fput_safe(const char *s, FILE *f)
{
	for (; *s != '\0'; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

int
print_json(const json_t *v)
{
	if (json_dumpf(v, stdout, JSON_INDENT(2)) != 0)
		return -1;
	putchar('\n');
	return 0;
}

int
json_answered(const struct ctl *ctl, json_t *ans, int *rc)
{
	if (!ctl->json)
		return 0;
	*rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	json_decref(ans);
	return 1;
}

long long
jnum(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_real(v))
		return (long long)json_real_value(v);
	return 0;
}
