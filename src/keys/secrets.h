/*
 * secrets.h: the secret store.  Sealed secrets are opened with the
 * gateway keys (sealed.h) into secret objects whose value, and the forms
 * the redactor looks for, live in guarded, locked memory.  Sets of them
 * are immutable and shared by reference like policies: each snapshot
 * (state.h) holds one, so a request uses the set of the snapshot its
 * worker runs, and a rotation is a new snapshot.
 *
 * Opening, loading and editing run on the main thread; secret objects and
 * sets are then read by any number of workers.
 */
#ifndef SLUICE_SECRETS_H
#define SLUICE_SECRETS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/err.h"
#include "util/redact.h"
#include "keys/sealed.h"

struct config;
struct pemkey;
struct aws_creds;

#define SECRET_FP_HEX	32	/* hex digits of a fingerprint */
#define SECRET_WHY_MAX	192

struct secret {
	atomic_uint	 refs;
	char		 name[SEALED_NAME_MAX + 1];
	enum sealed_kind kind;
	uint64_t	 version;
	int64_t		 created;	/* when it was sealed */
	time_t		 loaded;	/* when this gateway took it */
	const char	*source;	/* "file" or "api" (static) */
	char		 fp[SECRET_FP_HEX + 1];	/* keyed BLAKE2b of the value */
	char		 keyid[2 * SEALED_KEYID_LEN + 1];	/* the key that opened it */
	char		 (*hosts)[NAME_BUFSZ + 2];	/* normalised; none: any host */
	size_t		 nhosts;
	/*
	 * Guarded memory, read-only: the value, a NUL, then its forms (a
	 * header value's; a document has none).
	 */
	uint8_t		*mem;
	const uint8_t	*value;
	size_t		 value_len;
	struct redact_pat forms[REDACT_MAX_FORMS];
	size_t		 nforms;
	uint64_t	 forms_key;	/* their name: redact_serial() */
	struct pemkey	*pem;		/* a pem secret's key and certificates */
	struct aws_creds *aws;		/* a json secret that is AWS credentials */
	uint8_t		*formmem;	/* guarded: its session token's forms */
};

struct secret *secret_ref(struct secret *s);
void	secret_unref(struct secret *s);		/* wipes on the last; accepts NULL */
/* 1 if s may be injected into requests to host (normalised). */
int	secret_bound(const struct secret *s, const char *host);

/* A set: sorted by name, never changed once built. */
struct secret_set {
	atomic_uint	 refs;
	size_t		 n;
	struct secret	**v;
};

struct secret_set *secret_set_ref(struct secret_set *set);
void	secret_set_unref(struct secret_set *set);	/* accepts NULL */
/* The secret named name[0..len), or NULL; set may be NULL. */
const struct secret *secret_set_find(const struct secret_set *set,
	    const char *name, size_t len);
/* A copy of set (may be NULL) with s added or replacing its namesake. */
int	secret_set_with(const struct secret_set *set, struct secret *s,
	    struct secret_set **out);
/* A copy of set without name (SL_ERR_NOT_FOUND when it has none). */
int	secret_set_without(const struct secret_set *set, const char *name,
	    struct secret_set **out);

/* The gateway keys and where sealed files live. */
struct secret_store {
	struct gwkey	**keys;
	size_t		 nkeys;
	uint8_t		*fpkey;		/* guarded: the fingerprint key */
	uint8_t		*phkey;		/* guarded: the placeholders' key */
	char		*dir;		/* NULL: no folder */
};

/*
 * Loads the keys cfg names (gateway_key, secret_dir).  Both absent:
 * *out = NULL and 0 (secrets are off).  Problems go to errs:
 * SL_ERR_INVALID.
 */
int	secret_store_new(const struct config *cfg, struct secret_store **out,
	    struct errlist *errs);
void	secret_store_free(struct secret_store *st);	/* accepts NULL */

/*
 * Opens blob[0..len) into a new secret (one reference).  expect: the name
 * it must carry (NULL: any).  On failure why[] says what is wrong (never
 * anything of the value): SL_ERR_INVALID, SL_ERR_NOMEM.
 */
int	secret_open(const struct secret_store *st, const uint8_t *blob,
	    size_t len, const char *expect, const char *source,
	    struct secret **out, char why[SECRET_WHY_MAX]);

/*
 * Whether s may replace cur (NULL: none in force): a lower version, or
 * the same version with another value, is refused (SL_ERR_INVALID, why);
 * the same version and value is SL_ERR_EXISTS (nothing to do).
 */
int	secret_admit(const struct secret *cur, const struct secret *s,
	    char why[SECRET_WHY_MAX]);

/* A change loading the folder found, for the audit trail. */
struct secret_change {
	const struct secret *old, *new;	/* new NULL: removed */
};

/*
 * Reads every NAME.sealed of the folder (dot files are ignored) into a
 * new set, starting from prev: a file that does not open, names another
 * secret or would not be admitted is reported in errs and the version of
 * prev stays; a secret of prev whose file is gone is dropped.  Unchanged
 * secrets are prev's own objects.  *changes (malloc'd, the caller frees
 * it; may be NULL) lists what changed.  Returns 0 even with errors in
 * errs; SL_ERR_IO when the folder cannot be read (nothing changes).
 */
int	secret_store_load(const struct secret_store *st,
	    const struct secret_set *prev, struct secret_set **out,
	    struct secret_change **changes, size_t *nchanges,
	    struct errlist *errs);

/* The file of name in the folder, into buf; -1 when it does not fit. */
int	secret_store_path(const struct secret_store *st, const char *name,
	    char *buf, size_t len);

#endif
