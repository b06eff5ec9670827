/* names.h: DNS names and sets of exact and wildcard name patterns. */
#ifndef SLUICE_NAMES_H
#define SLUICE_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define NAME_MAXLEN	253
#define NAME_BUFSZ	(NAME_MAXLEN + 1)
#define SECRET_NAME_MAX	64

/* Whether s[0..len) is a secret's name: 1 to 64 of [A-Za-z0-9._-]. */
int	secret_name_ok(const char *s, size_t len);

/*
 * Normalises a name from the wire (SNI, Host, DNS): ASCII only (an IDN
 * arrives as A-labels), lowercased, one trailing dot removed; labels of 1 to
 * 63 characters from [a-z0-9_-]; 1 to 253 characters in all (after the
 * trailing dot goes).  A name that is an IP literal is refused here
 * (callers test for literals first): anything with ':', and any name whose
 * last label is a decimal or 0x-hex number, since inet_aton and browsers
 * read "1.2.3.4", "127.1" and "0x7f.1" as IPv4 addresses.  in need not be
 * NUL-terminated; a NUL within len is refused.  Writes out (NAME_BUFSZ
 * bytes) only on success and returns 0, or SL_ERR_INVALID.  Thread-safe.
 */
int	name_normalize(const char *in, size_t len, char *out);

/*
 * Normalises a name written by an operator (policy files): as
 * name_normalize, but a name with any byte >= 0x80 is first converted to
 * A-labels by libidn2 (IDNA2008 with UTS #46 non-transitional mapping, so
 * "Bücher.example" is "xn--bcher-kva.example").  '*' is refused: for a
 * "*.NAME" pattern the caller strips the "*." first, normalises NAME and
 * adds "*." + the result to a nameset.  Returns 0, SL_ERR_INVALID (and
 * *why, which may be NULL, gets a static description of the problem) or
 * SL_ERR_NOMEM.
 */
int	name_from_policy(const char *in, char *out, const char **why);

/*
 * A set of patterns, each an exact normalised name or "*." followed by
 * one (any depth below, not the apex).  Lookups are O(labels), safe from
 * any number of threads once built (adding is not), and resist hash
 * flooding (SipHash under a random key per set).  The set keeps its own
 * copies of the pattern strings.
 */
struct nameset;

/* Returns NULL when out of memory or when libsodium cannot start. */
struct nameset *nameset_new(void);
void	nameset_free(struct nameset *s);	/* accepts NULL */
/*
 * Adds a normalised pattern with an id.  Adding a pattern already present
 * keeps the lower id.  Returns 0, SL_ERR_INVALID (bad pattern, including
 * one not in normal form: upper case, trailing dot, bare "*") or
 * SL_ERR_NOMEM.
 */
int	nameset_add(struct nameset *s, const char *pattern, uint32_t id);
/*
 * Matches a normalised name (one not normalised simply fails to match).
 * An exact entry wins over wildcards, a longer wildcard over a shorter
 * one; "*.c" matches "b.c" and "a.b.c", never "c".  Returns 1 and writes
 * *id, or 0.
 */
int	nameset_match(const struct nameset *s, const char *name, uint32_t *id);
size_t	nameset_count(const struct nameset *s);

#endif
