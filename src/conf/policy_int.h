/*
 * policy_int.h: what policy_load.c and policy_intercept.c share.  Private to
 * src/policy*.c; not installed.
 */
#ifndef SLUICE_POLICY_INT_H
#define SLUICE_POLICY_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/names.h"
#include "util/yamltree.h"
#include "conf/policy.h"

#define NO_RULE		UINT32_MAX

/* Parses the "intercept" list into p->intercepts (policy_intercept.c). */
/* An alpn list (what names the key, for errors) into out. */
void	policy_parse_alpn(struct ycheck *x, const struct ynode *n,
	    const char *what, struct alpn_list *out);
void	policy_parse_intercepts(struct ycheck *x, const struct ynode *root,
	    struct policy *p);
/*
 * Every {{token:NAME}} of p's templates names a source of p->tokens: each
 * rule's distinct sources go to its tokens[] (at most
 * POLICY_MAX_TOKEN_REFS).
 */
void	policy_link_tokens(struct ycheck *x, struct policy *p);

/* Splits a policy pattern into "*." and a name_from_policy() name. */
static inline int
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

/* "kind:what", malloc()ed, or NULL when out of memory. */
static inline char *
make_label(const char *kind, const char *what)
{
	size_t n = strlen(kind) + 1 + strlen(what) + 1;
	char *s;

	if ((s = malloc(n)) != NULL)
		snprintf(s, n, "%s:%s", kind, what);
	return s;
}

/* strdup() into *out; on failure sets x->nomem, returns SL_ERR_NOMEM. */
static inline int
dup_string(struct ycheck *x, const char *s, char **out)
{
	if ((*out = strdup(s)) == NULL) {
		x->nomem = 1;
		return SL_ERR_NOMEM;
	}
	return 0;
}

/* A name and where it was found, for sorting to find repeats. */
struct nameref {
	const char	*name;
	size_t		 idx;
};

/* qsort() order of nameref: by name, then by index. */
static inline int
nameref_cmp(const void *a, const void *b)
{
	const struct nameref *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

#endif
