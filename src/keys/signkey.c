/*
 * signkey.c: the gateway's ECDSA P-256 signing keys, ES256 signatures in
 * JWS's raw r||s form, and RFC 7638 key ids.
 */
#include "autoconf.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>

#include "util/err.h"
#include "util/keyfile.h"
#include "keys/kclient.h"
#include "keys/signkey.h"

#define COORD_LEN	32		/* a P-256 coordinate, and r and s */
#define COORD_B64	44		/* base64url of 32 bytes, and a NUL */
#define DER_SIG_MAX	80		/* a DER ECDSA-Sig-Value for P-256: <= 72 */
/* {"crv":"P-256","kty":"EC","x":"","y":""} and two coordinates. */
#define THUMB_JSON_MAX	(64 + 2 * COORD_B64)

struct signkey {
	EVP_PKEY	*pkey;		/* private; OpenSSL wipes it when freed */
	char		 kid[SIGNKEY_KID_MAX];
};

struct signpub {
	EVP_PKEY	*pkey;		/* public only */
	char		 x[COORD_B64], y[COORD_B64];	/* base64url */
	char		 kid[SIGNKEY_KID_MAX];
};

/* Whether pkey is an EC key on P-256 by name (explicit curves are not). */
static int
is_p256(EVP_PKEY *pkey)
{
	char group[64];
	int nid;

	if (!EVP_PKEY_is_a(pkey, "EC"))
		return 0;
	if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), NULL) != 1)
		return 0;
	if ((nid = OBJ_sn2nid(group)) == NID_undef)
		nid = EC_curve_nist2nid(group);
	return nid == NID_X9_62_prime256v1;
}

/*
 * The key checks: the public point on the curve and, for a private key,
 * that it is the private key's (a file can carry a public point that is
 * not; then signatures would not verify under the kid's key).
 */
static int
key_checks(EVP_PKEY *pkey, int private)
{
	EVP_PKEY_CTX *ctx;
	int ok;

	if ((ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL)) == NULL)
		return SL_ERR_NOMEM;
	ok = private ? EVP_PKEY_check(ctx) : EVP_PKEY_public_check(ctx);
	EVP_PKEY_CTX_free(ctx);
	return ok == 1 ? 0 : SL_ERR_INVALID;
}

/* Decodes a PEM P-256 key: private (PKCS#8 or SEC1) or public (SPKI). */
static int
pem_p256(const uint8_t *pem, size_t len, int private, EVP_PKEY **out,
    const char **why)
{
	EVP_PKEY *pkey;
	int r;

	if ((r = keyfile_pem(pem, len, private, &pkey, why)) != 0)
		return r;
	if (!is_p256(pkey)) {
		EVP_PKEY_free(pkey);
		*why = "not an ECDSA P-256 key";
		return SL_ERR_INVALID;
	}
	if ((r = key_checks(pkey, private)) != 0) {
		EVP_PKEY_free(pkey);
		ERR_clear_error();
		*why = r == SL_ERR_NOMEM ? "out of memory" :
		    "not a consistent P-256 key";
		return r;
	}
	*out = pkey;
	return 0;
}

/* base64url without padding of 32 bytes. */
static void
b64url32(const uint8_t in[COORD_LEN], char out[COORD_B64])
{
	sodium_bin2base64(out, COORD_B64, in, COORD_LEN,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

/* One coordinate of pkey's public point, 32 bytes big-endian. */
static int
coord(EVP_PKEY *pkey, const char *name, uint8_t out[COORD_LEN])
{
	BIGNUM *bn = NULL;
	int r = SL_ERR_INVALID;

	if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1)
		goto out;
	if (BN_bn2binpad(bn, out, COORD_LEN) != COORD_LEN)
		goto out;
	r = 0;
 out:
	BN_free(bn);
	ERR_clear_error();
	return r;
}

/*
 * The public point as base64url x and y, and its RFC 7638 thumbprint:
 * SHA-256 of the required members in lexicographic order, no whitespace.
 */
static int
jwk_ids(EVP_PKEY *pkey, char x[COORD_B64], char y[COORD_B64],
    char kid[SIGNKEY_KID_MAX])
{
	uint8_t xb[COORD_LEN], yb[COORD_LEN], h[32];
	char json[THUMB_JSON_MAX], bx[COORD_B64], by[COORD_B64];
	unsigned hlen = sizeof(h);
	int n;

	if (coord(pkey, OSSL_PKEY_PARAM_EC_PUB_X, xb) != 0 ||
	    coord(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, yb) != 0)
		return SL_ERR_INVALID;
	b64url32(xb, bx);
	b64url32(yb, by);
	n = snprintf(json, sizeof(json),
	    "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}",
	    bx, by);
	if (n < 0 || (size_t)n >= sizeof(json))
		return SL_ERR_INTERNAL;
	if (EVP_Digest(json, (size_t)n, h, &hlen, EVP_sha256(), NULL) != 1 ||
	    hlen != sizeof(h)) {
		ERR_clear_error();
		return SL_ERR_INTERNAL;
	}
	b64url32(h, kid);
	if (x != NULL)
		memcpy(x, bx, sizeof(bx));
	if (y != NULL)
		memcpy(y, by, sizeof(by));
	return 0;
}

int
signkey_load(const char *path, struct signkey **out, const char **why)
{
	struct signkey *k = NULL;
	EVP_PKEY *pkey = NULL;
	uint8_t *pem = NULL;
	const char *w = NULL;
	size_t len;
	int r;

	if (kclient_remote()) {
		r = SL_ERR_DENIED;
		w = "a worker process holds no signing key";
		goto out;
	}
	if ((r = keyfile_read(path, 1, &pem, &len, &w)) != 0)
		goto out;
	if ((r = pem_p256(pem, len, 1, &pkey, &w)) != 0)
		goto out;
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		r = SL_ERR_NOMEM;
		w = "out of memory";
		goto out;
	}
	if ((r = jwk_ids(pkey, NULL, NULL, k->kid)) != 0) {
		w = "not a usable P-256 key";
		goto out;
	}
	k->pkey = pkey;
	pkey = NULL;	/* transferred */
	*out = k;
	k = NULL;	/* transferred */
	r = 0;
 out:
	EVP_PKEY_free(pkey);	/* OpenSSL wipes its copy */
	ERR_clear_error();
	signkey_free(k);
	secmem_free(pem);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

int
signkey_remote(const char *kid, struct signkey **out)
{
	struct signkey *k;

	if (strlen(kid) >= sizeof(k->kid))
		return SL_ERR_INVALID;
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return SL_ERR_NOMEM;
	snprintf(k->kid, sizeof(k->kid), "%s", kid);
	*out = k;
	return 0;
}

int
signkey_is_remote(const struct signkey *k)
{
	return k->pkey == NULL;
}

void
signkey_free(struct signkey *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

const char *
signkey_kid(const struct signkey *k)
{
	return k->kid;
}

int
signkey_der_to_raw(const uint8_t *der, size_t len,
    uint8_t raw[SIGNKEY_SIG_LEN])
{
	const uint8_t *p = der;
	const BIGNUM *r, *s;
	ECDSA_SIG *es;
	int ret = SL_ERR_INTERNAL;

	if ((es = d2i_ECDSA_SIG(NULL, &p, (long)len)) == NULL)
		return SL_ERR_INTERNAL;
	if (p != der + len)
		goto out;
	ECDSA_SIG_get0(es, &r, &s);
	if (BN_bn2binpad(r, raw, COORD_LEN) != COORD_LEN ||
	    BN_bn2binpad(s, raw + COORD_LEN, COORD_LEN) != COORD_LEN)
		goto out;
	ret = 0;
 out:
	ECDSA_SIG_free(es);
	return ret;
}

/* The DER ECDSA-Sig-Value of a raw r||s, into der[0..*len). */
static int
raw_to_der(const uint8_t raw[SIGNKEY_SIG_LEN], uint8_t der[DER_SIG_MAX],
    size_t *len)
{
	BIGNUM *r = NULL, *s = NULL;
	ECDSA_SIG *es = NULL;
	uint8_t *p = der;
	int n, ret = SL_ERR_NOMEM;

	if ((es = ECDSA_SIG_new()) == NULL ||
	    (r = BN_bin2bn(raw, COORD_LEN, NULL)) == NULL ||
	    (s = BN_bin2bn(raw + COORD_LEN, COORD_LEN, NULL)) == NULL)
		goto out;
	if (ECDSA_SIG_set0(es, r, s) != 1)
		goto out;
	r = s = NULL;	/* transferred */
	ret = SL_ERR_INTERNAL;
	if ((n = i2d_ECDSA_SIG(es, NULL)) <= 0 || n > DER_SIG_MAX)
		goto out;
	if (i2d_ECDSA_SIG(es, &p) != n)
		goto out;
	*len = (size_t)n;
	ret = 0;
 out:
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(es);
	return ret;
}

int
signkey_sign(const struct signkey *k, const uint8_t *msg, size_t len,
    uint8_t sig[SIGNKEY_SIG_LEN])
{
	static const uint8_t empty[1];
	uint8_t der[DER_SIG_MAX], raw[SIGNKEY_SIG_LEN];
	size_t dlen = sizeof(der);
	EVP_MD_CTX *ctx;
	int r = SL_ERR_INTERNAL;

	/* The keys process signs whole tokens only, never bytes it is given. */
	if (k->pkey == NULL)
		return SL_ERR_DENIED;
	/* A context a call: the key is shared, nothing else is. */
	if ((ctx = EVP_MD_CTX_new()) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, k->pkey,
	    NULL) != 1)
		goto out;
	if (EVP_DigestSign(ctx, der, &dlen, msg != NULL ? msg : empty,
	    len) != 1)
		goto out;
	if ((r = signkey_der_to_raw(der, dlen, raw)) != 0)
		goto out;
	memcpy(sig, raw, sizeof(raw));
	r = 0;
 out:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return r;
}

/* A signpub around pkey (a public key), on success taking it over. */
static int
signpub_new(EVP_PKEY *pkey, struct signpub **out)
{
	struct signpub *p;
	int r;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return SL_ERR_NOMEM;
	if ((r = jwk_ids(pkey, p->x, p->y, p->kid)) != 0) {
		free(p);
		return r;
	}
	p->pkey = pkey;
	*out = p;
	return 0;
}

int
signkey_public(const struct signkey *k, struct signpub **out)
{
	EVP_PKEY *pub = NULL;
	const uint8_t *q;
	uint8_t *der = NULL;
	int n, r = SL_ERR_INTERNAL;

	/* Through SPKI, so that the copy holds no private half. */
	if ((n = i2d_PUBKEY(k->pkey, &der)) <= 0)
		goto out;
	q = der;
	if ((pub = d2i_PUBKEY(NULL, &q, n)) == NULL)
		goto out;
	if ((r = signpub_new(pub, out)) != 0)
		goto out;
	pub = NULL;	/* transferred */
 out:
	EVP_PKEY_free(pub);
	OPENSSL_free(der);
	ERR_clear_error();
	return r;
}

int
signpub_der(const struct signpub *p, uint8_t **der, size_t *len)
{
	uint8_t *d = NULL;
	int n;

	if ((n = i2d_PUBKEY(p->pkey, &d)) <= 0)
		return SL_ERR_INTERNAL;
	*der = d;
	*len = (size_t)n;
	return 0;
}

int
signpub_from_der(const uint8_t *der, size_t len, struct signpub **out)
{
	EVP_PKEY *pub = NULL;
	const uint8_t *q = der;
	int r;

	if (len > INT_MAX || (pub = d2i_PUBKEY(NULL, &q, (long)len)) == NULL ||
	    q != der + len || !is_p256(pub)) {
		EVP_PKEY_free(pub);
		ERR_clear_error();
		return SL_ERR_INVALID;
	}
	if ((r = signpub_new(pub, out)) != 0)
		EVP_PKEY_free(pub);
	return r;
}

int
signpub_load(const char *path, struct signpub **out, const char **why)
{
	EVP_PKEY *pkey = NULL;
	uint8_t *pem = NULL;
	const char *w = NULL;
	size_t len;
	int r;

	/* Guarded memory: the file named may be a private key by mistake. */
	if ((r = keyfile_read(path, 0, &pem, &len, &w)) != 0)
		goto out;
	if ((r = pem_p256(pem, len, 0, &pkey, &w)) != 0)
		goto out;
	if ((r = signpub_new(pkey, out)) != 0) {
		w = r == SL_ERR_NOMEM ? "out of memory" :
		    "not a usable P-256 key";
		goto out;
	}
	pkey = NULL;	/* transferred */
 out:
	EVP_PKEY_free(pkey);
	ERR_clear_error();
	secmem_free(pem);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

void
signpub_free(struct signpub *p)
{
	if (p == NULL)
		return;
	EVP_PKEY_free(p->pkey);
	free(p);
}

const char *
signpub_kid(const struct signpub *p)
{
	return p->kid;
}

int
signpub_verify(const struct signpub *p, const uint8_t *msg, size_t len,
    const uint8_t sig[SIGNKEY_SIG_LEN])
{
	static const uint8_t empty[1];
	uint8_t der[DER_SIG_MAX];
	size_t dlen;
	EVP_MD_CTX *ctx = NULL;
	int r;

	if ((r = raw_to_der(sig, der, &dlen)) != 0)
		goto out;
	r = SL_ERR_NOMEM;
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		goto out;
	r = SL_ERR_INTERNAL;
	if (EVP_DigestVerifyInit_ex(ctx, NULL, "SHA256", NULL, NULL, p->pkey,
	    NULL) != 1)
		goto out;
	r = EVP_DigestVerify(ctx, der, dlen, msg != NULL ? msg : empty,
	    len) == 1 ? 0 : SL_ERR_INVALID;
 out:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return r;
}

json_t *
signpub_jwk(const struct signpub *p)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
	    "kty", "EC", "crv", "P-256", "x", p->x, "y", p->y,
	    "kid", p->kid, "use", "sig", "alg", "ES256");
}
