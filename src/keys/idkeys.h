/*
 * idkeys.h: the keys of identity tokens: the first signing_key signs, and
 * every one is published in the JWKS, so a proxy verifies tokens of the
 * old key while a rotation is under way.  A set is immutable and shared
 * by snapshots (state.h) like policies; a reload loads a new one.
 */
#ifndef SLUICE_IDKEYS_H
#define SLUICE_IDKEYS_H

#include <stdatomic.h>
#include <stddef.h>

#include "util/err.h"

struct config;
struct signkey;
struct signpub;

struct idkeys {
	atomic_uint	 refs;
	struct signkey	*sign;		/* the first key */
	struct signpub	**pubs;		/* every key's public half */
	size_t		 npubs;
	char		*jwks;		/* {"keys": [...]}, JSON text */
	size_t		 jwks_len;
	char		*discovery;	/* a minimal OpenID configuration */
	size_t		 discovery_len;
};

/*
 * Loads cfg's signing keys; none configured: *out = NULL and 0.  Problems
 * go to errs: SL_ERR_INVALID.
 */
int	idkeys_load(const struct config *cfg, struct idkeys **out,
	    struct errlist *errs);
struct idkeys *idkeys_ref(struct idkeys *k);	/* accepts NULL */
void	idkeys_unref(struct idkeys *k);		/* accepts NULL */

#endif
