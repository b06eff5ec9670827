/* yaml2json.c: a policy document, YAML or JSON, as a jansson value. */
#include "autoconf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "util/yamltree.h"
#include "conf/policy.h"
#include "sluicectl/yaml2json.h"

/* Whether s is -?[0-9]+ and fits a json_int_t. */
static int
read_int(const char *s, json_int_t *out)
{
	const char *p = s;
	long long v;
	char *end;

	if (*p == '-')
		p++;
	if (*p == '\0' || strspn(p, "0123456789") != strlen(p))
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return 0;
	*out = (json_int_t)v;
	return 1;
}

static int
is_word(const char *s, const char *lower, const char *title,
    const char *upper)
{
	return strcmp(s, lower) == 0 || strcmp(s, title) == 0 ||
	    strcmp(s, upper) == 0;
}

/* The scalar's JSON value; NULL when jansson refused it. */
static json_t *
scalar2json(const struct ynode *n)
{
	json_int_t v;

	if (!n->quoted) {
		if (ynode_is_null(n))
			return json_null();
		if (is_word(n->scalar, "true", "True", "TRUE"))
			return json_true();
		if (is_word(n->scalar, "false", "False", "FALSE"))
			return json_false();
		if (read_int(n->scalar, &v))
			return json_integer(v);
	}
	return json_stringn(n->scalar, n->scalar_len);
}

/* The node as JSON (ydoc bounds the depth, so recursion is safe). */
static int
node2json(struct ycheck *x, const struct ynode *n, json_t **out)
{
	json_t *v = NULL, *item = NULL;
	size_t i;
	int r = SL_ERR_NOMEM;

	switch (n->kind) {
	case YNODE_SCALAR:
		if ((v = scalar2json(n)) == NULL) {
			ycheck_err(x, n->line, n->col, "a value JSON cannot "
			    "carry");
			r = SL_ERR_INVALID;
			goto out;
		}
		break;
	case YNODE_SEQ:
		if ((v = json_array()) == NULL)
			goto out;
		for (i = 0; i < n->n; i++) {
			if ((r = node2json(x, n->items[i], &item)) != 0)
				goto out;
			if (json_array_append_new(v, item) != 0) {
				item = NULL;	/* consumed even on failure */
				r = SL_ERR_NOMEM;
				goto out;
			}
			item = NULL;
		}
		break;
	case YNODE_MAP:
		if ((v = json_object()) == NULL)
			goto out;
		for (i = 0; i < n->n; i++) {
			if ((r = node2json(x, n->items[i], &item)) != 0)
				goto out;
			if (json_object_set_new(v, n->keys[i], item) != 0) {
				item = NULL;
				ycheck_err(x, n->key_lines[i], n->key_cols[i],
				    "a key JSON cannot carry");
				r = SL_ERR_INVALID;
				goto out;
			}
			item = NULL;
		}
		break;
	default:
		r = SL_ERR_INTERNAL;
		goto out;
	}
	*out = v;
	v = NULL;	/* transferred */
	r = 0;
 out:
	json_decref(item);
	json_decref(v);
	return r;
}

int
yaml2json(const char *file, const char *buf, size_t len, json_t **out,
    struct errlist *errs)
{
	struct ycheck x = { file, errs, 0, 0 };
	struct ydoc *doc = NULL;
	json_t *v = NULL;
	int r;

	if ((r = ydoc_parse_limit(file, buf, len, POLICY_MAX_NODES, &doc,
	    errs)) != 0)
		goto out;
	if (doc->root == NULL)
		v = json_null();
	else if ((r = node2json(&x, doc->root, &v)) != 0)
		goto out;
	*out = v;
	v = NULL;	/* transferred */
	r = 0;
 out:
	json_decref(v);
	ydoc_free(doc);
	return r;
}

int
doc2json(const char *file, const char *buf, size_t len, json_t **out,
    int *is_json, struct errlist *errs)
{
	json_error_t jerr;
	json_t *v;
	int r;

	if ((v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr)) != NULL) {
		*out = v;
		*is_json = 1;
		return 0;
	}
	if ((r = yaml2json(file, buf, len, &v, errs)) != 0)
		return r;
	*out = v;
	*is_json = 0;
	return 0;
}
