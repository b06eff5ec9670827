/* names.h: DNS names and sets of exact and wildcard name patterns. */
#ifndef SLUICE_NAMES_H
#define SLUICE_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define NAME_MAXLEN	253
#define NAME_BUFSZ	(NAME_MAXLEN + 1)

/*
 * Normalises a name from the wire (SNI, Host, DNS): ASCII only (an IDN
 * arrives as A-labels), lowercased, one trailing dot removed; labels of 1 to
 * 63 characters from [a-z0-9_-]; 1 to 253 characters in all.  A name that is
 * an IP literal is refused here (callers test for literals first).
 * Writes out (NAME_BUFSZ bytes) and returns 0, or SL_ERR_INVALID.
 */
int	name_normalize(const char *in, size_t len, char *out);

/*
 * Normalises a name written by an operator (policy files): as
 * name_normalize, but UTF-8 labels are first converted to A-labels with
 * IDNA2008 (libidn2).  On SL_ERR_INVALID *why (may be NULL) names the
 * problem.
 */
int	name_from_policy(const char *in, char *out, const char **why);

/*
 * A set of patterns, each an exact normalised name or "*." followed by
 * one (any depth below, not the apex).  Lookups are O(labels), safe from
 * any number of threads once built, and resist hash flooding.
 */
struct nameset;

struct nameset *nameset_new(void);
void	nameset_free(struct nameset *s);	/* accepts NULL */
/*
 * Adds a normalised pattern with an id.  Adding a pattern already present
 * keeps the lower id.  Returns 0, SL_ERR_INVALID (bad pattern) or
 * SL_ERR_NOMEM.
 */
int	nameset_add(struct nameset *s, const char *pattern, uint32_t id);
/*
 * Matches a normalised name.  An exact entry wins over wildcards, a longer
 * wildcard over a shorter one.  Returns 1 and writes *id, or 0.
 */
int	nameset_match(const struct nameset *s, const char *name, uint32_t *id);
size_t	nameset_count(const struct nameset *s);

#endif
