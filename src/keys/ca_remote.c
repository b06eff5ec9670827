/*
 * ca_remote.c: a sandbox's CA whose key the keys process keeps (kclient.h).
 * Here is its certificate and a handle; minting a leaf, sealing the key
 * and dropping it are requests.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "util/err.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/ca.h"
#include "keys/ca_int.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "keys/sealed.h"

/*
 * Whether s fits a string field of at most max bytes: a request out of
 * the table's bounds would end this process, so it is never sent.
 */
static int
field_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n >= 1 && n <= max;
}

/* A CA from an answer of CA_NEW or CA_OPEN: a handle and a DER certificate. */
static int
remote_ca(const uint8_t *ans, size_t n, struct ca **out)
{
	const unsigned char *der;
	struct wire_r rd;
	struct ca *ca;
	uint64_t handle;
	size_t len;

	wire_r_init(&rd, ans, n);
	handle = wire_get_u64(&rd);
	der = wire_get_bytes(&rd, KPROTO_CERT_MAX, &len);
	if (wire_done(&rd) != 0 || handle == 0)
		return SL_ERR_INVALID;
	if ((ca = calloc(1, sizeof(*ca))) == NULL)
		return SL_ERR_NOMEM;
	ca->remote = handle;
	if ((ca->cert = d2i_X509(NULL, &der, (long)len)) == NULL) {
		ca_remote_drop(ca);
		free(ca);
		return SL_ERR_INVALID;
	}
	*out = ca;
	return 0;
}

int
ca_remote_new(const char *sandbox_id, const char *const *names,
    size_t nnames, unsigned validity_s, struct ca **out)
{
	uint8_t *req, ans[KPROTO_CERT_MAX + 64];
	char why[KPROTO_WHY_MAX];
	size_t cap, n, i;
	struct wire_w wr;
	int r;

	if (sandbox_id == NULL || !field_ok(sandbox_id, KPROTO_ID_MAX) ||
	    nnames > KPROTO_NAMES_MAX || (nnames > 0 && names == NULL))
		return SL_ERR_INVALID;
	for (i = 0; i < nnames; i++)
		if (names[i] == NULL || !field_ok(names[i], KPROTO_HOST_MAX))
			return SL_ERR_INVALID;
	cap = 64 + KPROTO_ID_MAX + nnames * (4 + KPROTO_HOST_MAX + 1);
	if ((req = malloc(cap)) == NULL)
		return SL_ERR_NOMEM;
	wire_w_init(&wr, req, cap);
	wire_str(&wr, sandbox_id);
	wire_u32(&wr, validity_s);
	wire_u32(&wr, (uint32_t)nnames);
	for (i = 0; i < nnames; i++)
		wire_str(&wr, names[i]);
	if (wr.over) {
		free(req);
		return SL_ERR_INVALID;
	}
	r = kclient_call(KPROTO_CA_NEW, req, wr.len, ans, sizeof(ans), &n,
	    why);
	free(req);
	if (r != 0) {
		log_warnx("keys", "sandbox %s: %s", sandbox_id, why);
		return r;
	}
	return remote_ca(ans, n, out);
}

void
ca_remote_drop(struct ca *ca)
{
	char why[KPROTO_WHY_MAX];
	uint8_t req[8], ans[KPROTO_WHY_MAX + 16];
	struct wire_w wr;
	size_t n;

	wire_w_init(&wr, req, sizeof(req));
	wire_u64(&wr, ca->remote);
	if (kclient_call(KPROTO_CA_DROP, req, wr.len, ans, sizeof(ans), &n,
	    why) != 0)
		log_warnx("keys", "cannot drop a CA: %s", why);
}

int
ca_remote_mint(struct ca *ca, const char *host, EVP_PKEY *leaf_key,
    unsigned validity_s, X509 **out)
{
	uint8_t req[64 + KPROTO_HOST_MAX + KPROTO_SPKI_MAX];
	uint8_t ans[KPROTO_CERT_MAX + 64];
	char why[KPROTO_WHY_MAX];
	unsigned char *spki = NULL;
	const unsigned char *der;
	struct wire_w wr;
	struct wire_r rd;
	size_t n, len;
	X509 *x;
	int slen, r;

	if (host == NULL || !field_ok(host, KPROTO_HOST_MAX))
		return SL_ERR_INVALID;
	if ((slen = i2d_PUBKEY(leaf_key, &spki)) <= 0)
		return SL_ERR_INTERNAL;
	wire_w_init(&wr, req, sizeof(req));
	wire_u64(&wr, ca->remote);
	wire_u32(&wr, validity_s);
	wire_str(&wr, host);
	wire_bytes(&wr, spki, (size_t)slen);
	OPENSSL_free(spki);
	if (wr.over)
		return SL_ERR_INVALID;
	if ((r = kclient_call(KPROTO_LEAF_MINT, req, wr.len, ans, sizeof(ans),
	    &n, why)) != 0) {
		log_debug("keys", "no leaf: %s", why);
		return r;
	}
	wire_r_init(&rd, ans, n);
	der = wire_get_bytes(&rd, KPROTO_CERT_MAX, &len);
	if (wire_done(&rd) != 0 ||
	    (x = d2i_X509(NULL, &der, (long)len)) == NULL)
		return SL_ERR_INVALID;
	*out = x;
	return 0;
}

int
ca_seal(struct ca *ca, int64_t created, uint8_t **blob, size_t *len,
    char *why, size_t why_len)
{
	uint8_t req[16], ans[KPROTO_SEALED_CA_MAX + 64];
	char w[KPROTO_WHY_MAX];
	const uint8_t *b;
	struct wire_w wr;
	struct wire_r rd;
	size_t n, blen;
	int r;

	if (ca->remote == 0) {
		snprintf(why, why_len, "a CA kept here is not sealed here");
		return SL_ERR_UNSUPPORTED;
	}
	wire_w_init(&wr, req, sizeof(req));
	wire_u64(&wr, ca->remote);
	wire_u64(&wr, (uint64_t)created);
	if ((r = kclient_call(KPROTO_CA_SEAL, req, wr.len, ans, sizeof(ans), &n,
	    w)) != 0) {
		snprintf(why, why_len, "%s", w);
		return r;
	}
	wire_r_init(&rd, ans, n);
	b = wire_get_bytes(&rd, KPROTO_SEALED_CA_MAX, &blen);
	if (wire_done(&rd) != 0 || (*blob = malloc(blen)) == NULL) {
		snprintf(why, why_len, "a malformed answer");
		return SL_ERR_INVALID;
	}
	memcpy(*blob, b, blen);
	*len = blen;
	return 0;
}

int
ca_open_sealed(const char *sandbox_id, const char *cert_pem, size_t cert_len,
    const uint8_t *blob, size_t blob_len, struct ca **out, char *why,
    size_t why_len)
{
	uint8_t *req, ans[KPROTO_CERT_MAX + 64];
	char w[KPROTO_WHY_MAX];
	struct wire_w wr;
	size_t cap, n;
	int r;

	if (!kclient_remote()) {
		snprintf(why, why_len, "no keys process to open it");
		return SL_ERR_UNSUPPORTED;
	}
	/* Out of the table's bounds, the keys process would end us. */
	if (!field_ok(sandbox_id, KPROTO_ID_MAX) || cert_len == 0 ||
	    cert_len > KPROTO_CERT_MAX || blob_len < SEALED_HEADER_LEN ||
	    blob_len > KPROTO_SEALED_CA_MAX) {
		snprintf(why, why_len, "its id, certificate or sealed key is "
		    "out of bounds");
		return SL_ERR_INVALID;
	}
	cap = 64 + strlen(sandbox_id) + cert_len + blob_len;
	if ((req = malloc(cap)) == NULL)
		return SL_ERR_NOMEM;
	wire_w_init(&wr, req, cap);
	wire_str(&wr, sandbox_id);
	wire_bytes(&wr, cert_pem, cert_len);
	wire_bytes(&wr, blob, blob_len);
	r = kclient_call(KPROTO_CA_OPEN, req, wr.len, ans, sizeof(ans), &n, w);
	free(req);
	if (r != 0) {
		snprintf(why, why_len, "%s", w);
		return r;
	}
	if ((r = remote_ca(ans, n, out)) != 0)
		snprintf(why, why_len, "a malformed answer");
	return r;
}
