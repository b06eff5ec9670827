/* ca.h: a sandbox's own certificate authority, and the leaves it signs. */
#ifndef SLUICE_CA_H
#define SLUICE_CA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/x509.h>
#include <openssl/evp.h>

/*
 * One CA per sandbox (SPEC, Per-sandbox CA): ECDSA P-256, a random 128-bit
 * serial, subject "CN=sluice sandbox <id> CA, O=sluice", validity from one
 * hour before now to validity_s after, basicConstraints critical CA:true
 * pathlen:0, keyUsage critical keyCertSign+cRLSign, subject key id; and
 * when names are given, a critical nameConstraints extension permitting
 * exactly those DNS subtrees (a "*.x" pattern permits x's subtree, which
 * includes the apex x itself: RFC 5280 DNS constraints cannot exclude it).
 * sandbox_id is [A-Za-z0-9._-], 1..46 characters; names are plain
 * lower-case DNS names, optionally "*."-prefixed; else SL_ERR_INVALID.  The
 * private key is kept DER-encoded in sodium_malloc'd, locked memory,
 * read-protected (sodium_mprotect_noaccess) except while signing, and
 * wiped by ca_free; when that memory cannot be locked (RLIMIT_MEMLOCK),
 * ca_new fails with SL_ERR_IO and errno set.  Not thread-safe: one owner
 * at a time.
 */
struct ca;

int	ca_new(const char *sandbox_id, const char *const *names, size_t nnames,
	    unsigned validity_s, struct ca **out);
void	ca_free(struct ca *ca);		/* wipes the key; accepts NULL */

/*
 * The CA's private key (DER) in base64, into sodium_malloc'd, locked
 * memory: *out (NUL-terminated, *len without it) is the caller's, to
 * sodium_free (which wipes it).  For sealing it away (state_dir).
 */
int	ca_key_export(struct ca *ca, char **out, size_t *len);
/*
 * A CA again from its certificate (PEM) and its key as ca_key_export
 * gave it: the key must be the certificate's (else SL_ERR_INVALID).  The
 * key is kept as ca_new keeps it.
 */
int	ca_load(const char *cert_pem, size_t cert_len, const char *key_b64,
	    size_t key_len, struct ca **out);

/* The CA certificate (owned by ca; do not free). */
X509	*ca_cert(const struct ca *ca);
/* The CA certificate as PEM, malloc'd, NUL-terminated; *len without NUL. */
char	*ca_cert_pem(const struct ca *ca, size_t *len);

/*
 * Mints a leaf for host (a normalised DNS name): subject CN=host, SAN
 * DNS:host, serverAuth EKU, digitalSignature keyUsage, CA:false, validity
 * from one hour before now to validity_s after but never past the CA's,
 * signed by the CA with SHA-256, for the given public key (the sandbox's
 * one leaf key).  A host longer than 64 characters (too long for a CN)
 * gets an empty subject and a critical SAN.  Returns 0 with *out (caller
 * frees), SL_ERR_INVALID for a host that is not a plain lower-case DNS
 * name, SL_ERR_DENIED once the CA has expired, or another SL_ERR_*.
 */
int	ca_mint_leaf(struct ca *ca, const char *host, EVP_PKEY *leaf_key,
	    unsigned validity_s, X509 **out);

/*
 * A CA the keys process keeps (kclient.h): ca_new gives one in remote
 * mode, and ca_mint_leaf and ca_free ask for the mint and the wipe there.
 * ca_seal asks for its key sealed to the first gateway key (as the
 * secret "sandbox-ca.ID", version 1, created), into *blob (malloc'd);
 * ca_open_sealed gives a CA back from its certificate (PEM) and such a
 * blob, opened and loaded there.  0, or an SL_ERR_* with why; a CA whose
 * key is here (ca_new in a process that is not remote) is neither.
 */
int	ca_seal(struct ca *ca, int64_t created, uint8_t **blob, size_t *len,
	    char *why, size_t why_len);
int	ca_open_sealed(const char *sandbox_id, const char *cert_pem,
	    size_t cert_len, const uint8_t *blob, size_t blob_len,
	    struct ca **out, char *why, size_t why_len);

/* A fresh ECDSA P-256 key (for a sandbox's leaves). */
int	ca_new_leaf_key(EVP_PKEY **out);

#endif
