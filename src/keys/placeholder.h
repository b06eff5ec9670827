/*
 * placeholder.h: stand-ins for secrets that a sandbox may hold.  An SDK
 * that will not start without a key gets "sluice-ph-" and 32 hex digits,
 * a keyed BLAKE2b of the sandbox's id and the secret's name under a key
 * derived from the first gateway key: the same for that sandbox and
 * secret across restarts, another for every other pair, and worth
 * nothing to whoever holds it.  A rule that names the secret swaps it for
 * the value on hosts the secret is bound to; anywhere else it is an
 * attempt to send the credential where it may not go.
 */
#ifndef SLUICE_PLACEHOLDER_H
#define SLUICE_PLACEHOLDER_H

#include <stddef.h>

struct secret;
struct secret_set;
struct secret_store;

#define PH_PREFIX	"sluice-ph-"
#define PH_PREFIX_LEN	10
#define PH_LEN		(PH_PREFIX_LEN + 32)
#define PH_MAX_SWAP	8		/* secrets one rule swaps */

/* The placeholder of (sandbox, secret) into out; sandbox NULL: "". */
void	placeholder_of(const struct secret_store *st, const char *sandbox,
	    const char *secret, char out[PH_LEN + 1]);

/* A placeholder to swap: the secret and its placeholder for the sandbox. */
struct ph_swap {
	const struct secret *s;
	char		 ph[PH_LEN + 1];
};

/*
 * The secret of set whose placeholder for sandbox is p[0..PH_LEN) (p
 * starts with PH_PREFIX), or NULL.  O(secrets in set).
 */
const struct secret *placeholder_owner(const struct secret_store *st,
	    const struct secret_set *set, const char *sandbox, const char *p);

/*
 * The first placeholder of sandbox for a secret of set in s[0..len), its
 * secret in *which, or NULL.
 */
const char *placeholder_find(const struct secret_store *st,
	    const struct secret_set *set, const char *sandbox, const char *s,
	    size_t len, const struct secret **which);

/* Whether v[0..len) is "Basic <base64>" (any case); *b64 its credential. */
#define PH_BASIC_LEN	6
int	placeholder_basic_of(const char *v, size_t len, const char **b64,
	    size_t *blen);

/*
 * The secret of the first placeholder of sandbox in h as it goes: its
 * target (target, or h's own when NULL), its header values but those skip
 * (may be NULL) says go, and their Basic credentials, decoded into buf
 * (cap bytes; wiped after).  *where: "target" or "header".  NULL: none.
 */
struct http_head;
const struct secret *placeholder_in_head(const struct secret_store *st,
	    const struct secret_set *set, const char *sandbox,
	    const struct http_head *h, const char *target,
	    int (*skip)(void *, const char *, size_t), void *arg, char *buf,
	    size_t cap, const char **where);

/*
 * Writes s[0..len) to out (cap bytes) with every placeholder of swaps[]
 * replaced by its secret's value, percent-encoded (all but A-Za-z0-9-._~)
 * when pct.  Returns the length written and adds to *count the swaps
 * made, or -1 when out is too small.  out is the caller's guarded memory.
 */
long	placeholder_swap(const char *s, size_t len,
	    const struct ph_swap *swaps, size_t nswaps, int pct, char *out,
	    size_t cap, size_t *count);

#endif
