/*
 * sealed.h: sealed secrets and the gateway keys that open them.
 *
 * A sealed file is a libsodium sealed box (X25519, anonymous sender) with
 * a small clear header in front:
 *
 *   offset  size  what
 *   0       8     magic "SLUICESB"
 *   8       1     format version, 1 or 2
 *   9       8     key id of the gateway public key it is sealed to
 *   17      ...   crypto_box_seal(payload)
 *
 * The payload (big-endian integers), the header bound inside it:
 *
 *   1   format version, as above     8  key id, again
 *   8   version of the secret        8  created (Unix seconds)
 *   1   format 2 only: the kind (1 pem, 2 json); format 1 is header
 *   1   name length (1..64), name ([A-Za-z0-9._-])
 *   1   number of hosts (0..SEALED_MAX_HOSTS), then for each:
 *       1 length (1..253), the host: a normalised name, or "*." and one
 *   2   value length, the value: a header value (1..SEALED_MAX_VALUE, no
 *       control byte but HTAB), or for pem and json a document
 *       (1..SEALED_MAX_DOC, no control byte but HTAB, CR and LF)
 *
 * and nothing after it.  A header secret is sealed in format 1, so that
 * a gateway older than kinds still opens it; the clear format byte must
 * agree with the payload's.  A key id is the first 8 bytes of the
 * BLAKE2b-256 hash of the raw 32-byte X25519 public key; it only says
 * which key to try, the sealed box is what authenticates.
 *
 * Key files are PEM, as OpenSSL writes them: gateway.key an X25519
 * PKCS#8 private key, gateway.pub its SubjectPublicKeyInfo; signing.key
 * an ECDSA P-256 PKCS#8 private key, signing.pub its public key.  Private
 * key files are written 0600 and refused when group or others may read
 * them.
 */
#ifndef SLUICE_SEALED_H
#define SLUICE_SEALED_H

#include <stddef.h>
#include <stdint.h>

#include "util/names.h"

#define SEALED_MAGIC		"SLUICESB"
#define SEALED_FORMAT		1	/* a header value */
#define SEALED_FORMAT_KIND	2	/* any other kind */
#define SEALED_KEYID_LEN	8
#define SEALED_HEADER_LEN	17
#define SEALED_MAX_VALUE	8192	/* a header value */
#define SEALED_MAX_DOC		32768	/* a pem or json value */
#define SEALED_MAX_HOSTS	16
#define SEALED_NAME_MAX		SECRET_NAME_MAX
#define SEALED_MAX_BLOB		(64u * 1024)	/* a whole sealed file */

/* A gateway key: the X25519 pair that opens sealed secrets. */
struct gwkey {
	uint8_t		 pk[32];
	uint8_t		*sk;		/* 32 bytes, sodium_malloc'd, no access at rest */
	uint8_t		 id[SEALED_KEYID_LEN];
	char		 idhex[2 * SEALED_KEYID_LEN + 1];
	char		*path;
};

/*
 * Loads a gateway private key (PEM PKCS#8 X25519).  Refused when group or
 * others may read the file (SL_ERR_DENIED), when it is not such a key
 * (SL_ERR_INVALID), or unreadable (SL_ERR_IO).  *why (may be NULL) gets a
 * static description on failure.  The file's bytes are wiped after use.
 */
int	gwkey_load(const char *path, struct gwkey **out, const char **why);
/* Wipes the private key; accepts NULL. */
void	gwkey_free(struct gwkey *k);
/* Loads a gateway public key (PEM SPKI X25519) into pk[32]. */
int	gwkey_load_pub(const char *path, uint8_t pk[32], const char **why);
/* The key id of a raw X25519 public key. */
void	gwkey_id(const uint8_t pk[32], uint8_t id[SEALED_KEYID_LEN]);

/*
 * Writes a new key set into dir: gateway.key (0600), gateway.pub,
 * signing.key (0600), signing.pub (0644).  Never overwrites an existing
 * file (SL_ERR_EXISTS, nothing written).  *why as above.
 */
int	keys_generate(const char *dir, const char **why);

/*
 * What a value is for.  A header value may be rendered into a header
 * template; a pem value (a private key, and for a client certificate its
 * chain) and a json value (structured credentials) only serve the
 * features made for them, never a template.
 */
enum sealed_kind {
	SEALED_KIND_HEADER = 0,
	SEALED_KIND_PEM = 1,
	SEALED_KIND_JSON = 2,
};
#define SEALED_KIND_MAX	SEALED_KIND_JSON

/* "header", "pem", "json". */
const char *sealed_kind_name(enum sealed_kind k);
/* The kind named s, or -1. */
int	sealed_kind_parse(const char *s);

/*
 * Whether value[0..len) is what its kind promises, beyond its bytes: pem
 * holds a private key OpenSSL reads (and any certificates after it
 * parse), json is one JSON object.  0, or SL_ERR_INVALID with *why (never
 * anything of the value).
 */
int	sealed_kind_check(enum sealed_kind k, const uint8_t *value, size_t len,
	    const char **why);

/* What is sealed. */
struct sealed_in {
	const char	*name;
	uint64_t	 version;
	int64_t		 created;
	const char	*const *hosts;	/* as an operator writes them; normalised here */
	size_t		 nhosts;
	const uint8_t	*value;
	size_t		 value_len;
	enum sealed_kind kind;		/* last: 0, header, when left out */
};

/*
 * Seals in to the gateway public key pk.  *blob (malloc'd, the caller
 * frees it) and *len are written on success.  SL_ERR_INVALID (and *why)
 * for a bad name, host or value (empty, too long, a control byte its
 * kind does not allow, or not what the kind promises).
 */
int	sealed_seal(const uint8_t pk[32], const struct sealed_in *in,
	    uint8_t **blob, size_t *len, const char **why);

/* An opened secret.  Everything but value is public. */
struct sealed_secret {
	char		 name[SEALED_NAME_MAX + 1];
	enum sealed_kind kind;
	uint64_t	 version;
	int64_t		 created;
	char		 hosts[SEALED_MAX_HOSTS][NAME_BUFSZ + 2];	/* normalised */
	size_t		 nhosts;
	uint8_t		 keyid[SEALED_KEYID_LEN];	/* the key that opened it */
	uint8_t		*value;		/* sodium_malloc'd, value_len + 1 bytes, NUL-terminated */
	size_t		 value_len;
};

/*
 * Opens blob[0..len) with whichever of keys[0..nkeys) it names.  Returns
 * 0, or SL_ERR_INVALID with *why: "not a sealed secret" (magic, size),
 * "unsupported format version", "sealed to another gateway key (id ...)"
 * (no key with that id; the id is public), "does not open" (tampered or
 * wrong key), "malformed payload", "header and payload disagree", "bad
 * name", "bad host", "value holds CR, LF or NUL", and so on.  *why is a
 * static string or points into a buffer of at most 128 bytes the caller
 * gives (why_buf, may be NULL).  Never reads past len; the opened bytes
 * are wiped on every path.  A key's protection is switched while it is
 * used, so one key is used by one thread at a time.
 */
int	sealed_open(struct gwkey *const *keys, size_t nkeys, const uint8_t *blob,
	    size_t len, struct sealed_secret **out, char *why_buf,
	    const char **why);
/* Wipes the value; accepts NULL. */
void	sealed_secret_free(struct sealed_secret *s);

/* 1 if host (normalised) is one the secret is bound to (none: any host). */
int	sealed_host_bound(const struct sealed_secret *s, const char *host);
/* The same over a list of normalised hosts (none: any host). */
int	sealed_hosts_match(const char (*hosts)[NAME_BUFSZ + 2], size_t nhosts,
	    const char *host);

/*
 * For tests and fuzzers: the payload parser sealed_open runs on the
 * opened bytes p[0..len), checking them against the header's key id.
 * Returns and reports as sealed_open; never reads past len.
 */
int	sealed_parse_payload(const uint8_t *p, size_t len,
	    const uint8_t keyid[SEALED_KEYID_LEN], struct sealed_secret **out,
	    const char **why);

#endif
