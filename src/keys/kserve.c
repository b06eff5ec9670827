/*
 * kserve.c: the keys process's side of kproto.h: the table's requests,
 * one handler each.  A handler reads its fields, then acts; fields that
 * do not read (or bytes left over) make the request malformed, which
 * ends the sender like a request outside the table.
 */
#include "autoconf.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <sodium.h>

#include "util/err.h"
#include "util/keyfile.h"
#include "util/wire.h"
#include "conf/config.h"
#include "keys/ca.h"
#include "keys/idkeys.h"
#include "keys/jwt.h"
#include "keys/kproto.h"
#include "keys/kserve.h"
#include "keys/sealed.h"
#include "keys/secrets.h"
#include "keys/signkey.h"

#define KS_BAD		1	/* a handler's "malformed" */
#define CA_PREFIX	"sandbox-ca."
#define LEAF_VALIDITY_MAX (30u * 86400)

struct kca {
	uint64_t	 handle;
	char		 id[KPROTO_ID_MAX + 1];
	struct ca	*ca;
};

struct kserve {
	const struct config *cfg;
	struct secret_store *store;	/* NULL: secrets are off */
	enum kproto_phase phase;
	struct idkeys	*ids, *ids_prev;	/* identity tokens' keys: now, before the last load */
	struct kca	*cas;		/* sorted by handle */
	size_t		 ncas, cap;
	uint64_t	 next;		/* the last handle given */
};

int
kserve_new(const struct config *cfg, struct kserve **out,
    struct errlist *errs)
{
	struct kserve *ks;

	if ((ks = calloc(1, sizeof(*ks))) == NULL)
		return SL_ERR_NOMEM;
	ks->cfg = cfg;
	ks->phase = KPROTO_START;
	if (secret_store_new(cfg, &ks->store, errs) != 0) {
		free(ks);
		return SL_ERR_INVALID;
	}
	*out = ks;
	return 0;
}

void
kserve_free(struct kserve *ks)
{
	size_t i;

	if (ks == NULL)
		return;
	for (i = 0; i < ks->ncas; i++)
		ca_free(ks->cas[i].ca);
	free(ks->cas);
	idkeys_unref(ks->ids);
	idkeys_unref(ks->ids_prev);
	secret_store_free(ks->store);
	free(ks);
}

enum kproto_phase
kserve_phase(const struct kserve *ks)
{
	return ks->phase;
}

size_t
kserve_cas(const struct kserve *ks)
{
	return ks->ncas;
}

/* The index of handle in ks->cas, or of where it would go. */
static size_t
ca_slot(const struct kserve *ks, uint64_t handle)
{
	size_t lo = 0, hi = ks->ncas, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ks->cas[mid].handle < handle)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct kca *
ca_find(struct kserve *ks, uint64_t handle)
{
	size_t i = ca_slot(ks, handle);

	return i < ks->ncas && ks->cas[i].handle == handle ? &ks->cas[i] : NULL;
}

/* Keeps ca (taken) under a new handle, the largest so far. */
static int
ca_keep(struct kserve *ks, const char *id, struct ca *ca, uint64_t *handle)
{
	struct kca *v;
	size_t cap;

	if (ks->ncas >= KSERVE_CAS_MAX) {
		ca_free(ca);
		return SL_ERR_TOO_BIG;
	}
	if (ks->ncas == ks->cap) {
		cap = ks->cap ? ks->cap * 2 : 16;
		if ((v = realloc(ks->cas, cap * sizeof(*v))) == NULL) {
			ca_free(ca);
			return SL_ERR_NOMEM;
		}
		ks->cas = v;
		ks->cap = cap;
	}
	v = &ks->cas[ks->ncas++];
	v->handle = ++ks->next;
	snprintf(v->id, sizeof(v->id), "%s", id);
	v->ca = ca;
	*handle = v->handle;
	return 0;
}

/* A CA's handle and certificate (DER), the answer of CA_NEW and CA_OPEN. */
static int
put_ca(struct wire_w *out, uint64_t handle, const struct ca *ca)
{
	unsigned char *der = NULL;
	int n;

	if ((n = i2d_X509(ca_cert(ca), &der)) <= 0)
		return SL_ERR_INTERNAL;
	wire_u64(out, handle);
	wire_bytes(out, der, (size_t)n);
	OPENSSL_free(der);
	return out->over ? SL_ERR_TOO_BIG : 0;
}

static int
h_hello(struct kserve *ks, struct wire_r *in, struct wire_w *out, char *why)
{
	wire_u32(out, KPROTO_VERSION);
	return 0;
}

static int
h_store_keys(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	if (ks->store == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "secrets are off");
		return SL_ERR_NOT_FOUND;
	}
	wire_bytes(out, ks->store->fpkey, crypto_generichash_KEYBYTES);
	wire_bytes(out, ks->store->phkey, crypto_generichash_KEYBYTES);
	return 0;
}

static int
h_ready(struct kserve *ks, struct wire_r *in, struct wire_w *out, char *why)
{
	ks->phase = KPROTO_RUN;
	return 0;
}

static int
h_sealed_open(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	struct sealed_secret *s = NULL;
	const uint8_t *blob;
	const char *w = NULL;
	char wbuf[128];
	size_t len, i;

	blob = wire_get_bytes(in, SEALED_MAX_BLOB, &len);
	if (wire_done(in) != 0)
		return KS_BAD;
	if (ks->store == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "secrets are off");
		return SL_ERR_NOT_FOUND;
	}
	if (sealed_open(ks->store->keys, ks->store->nkeys, blob, len, &s, wbuf,
	    &w) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "%s", w != NULL ? w :
		    "does not open");
		return SL_ERR_INVALID;
	}
	/* A sandbox's CA key stays here: CA_OPEN loads it. */
	if (strncmp(s->name, CA_PREFIX, sizeof(CA_PREFIX) - 1) == 0) {
		sealed_secret_free(s);
		snprintf(why, KPROTO_WHY_MAX, "a sandbox's CA key is not "
		    "opened for the worker");
		return SL_ERR_DENIED;
	}
	wire_str(out, s->name);
	wire_u32(out, (uint32_t)s->kind);
	wire_u64(out, s->version);
	wire_u64(out, (uint64_t)s->created);
	wire_bytes(out, s->keyid, sizeof(s->keyid));
	wire_u32(out, (uint32_t)s->nhosts);
	for (i = 0; i < s->nhosts; i++)
		wire_str(out, s->hosts[i]);
	wire_bytes(out, s->value, s->value_len);
	sealed_secret_free(s);	/* wipes */
	return out->over ? SL_ERR_TOO_BIG : 0;
}

static int
h_ca_new(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	char id[KPROTO_ID_MAX + 1];
	const char **names = NULL;
	char (*buf)[KPROTO_HOST_MAX + 1] = NULL;
	uint32_t validity, n, i;
	struct ca *ca = NULL;
	uint64_t handle;
	int r;

	wire_get_str(in, id, sizeof(id));
	validity = wire_get_u32(in);
	n = wire_get_u32(in);
	if (in->bad || n > KPROTO_NAMES_MAX)
		return KS_BAD;
	if (n > 0 && ((names = calloc(n, sizeof(*names))) == NULL ||
	    (buf = calloc(n, sizeof(*buf))) == NULL)) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		wire_get_str(in, buf[i], sizeof(buf[i]));
		names[i] = buf[i];
	}
	if (wire_done(in) != 0) {
		r = KS_BAD;
		goto out;
	}
	/* The worker asks; the configuration bounds. */
	if (validity == 0 || validity > ks->cfg->ca_validity_days * 86400u) {
		snprintf(why, KPROTO_WHY_MAX, "a validity over ca.validity_days");
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = ca_new(id, names, n, validity, &ca)) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "cannot mint the CA: %s%s",
		    err_str(r), r == SL_ERR_IO ? " (raise RLIMIT_MEMLOCK)" : "");
		goto out;
	}
	if ((r = ca_keep(ks, id, ca, &handle)) == 0)
		r = put_ca(out, handle, ca);
 out:
	free(names);
	free(buf);
	return r;
}

/* Whether ca's certificate is the one ca_new makes for sandbox id. */
static int
named(const struct ca *ca, const char *id)
{
	char cn[128], want[128];
	int n;

	n = X509_NAME_get_text_by_NID(X509_get_subject_name(ca_cert(ca)),
	    NID_commonName, cn, sizeof(cn));
	snprintf(want, sizeof(want), "sluice sandbox %s CA", id);
	return n > 0 && strcmp(cn, want) == 0;
}

static int
h_ca_open(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	char id[KPROTO_ID_MAX + 1], name[SEALED_NAME_MAX + 1], wbuf[128];
	struct sealed_secret *s = NULL;
	const uint8_t *pem, *blob;
	struct ca *ca = NULL;
	const char *w = NULL;
	size_t plen, blen;
	uint64_t handle;
	int r;

	wire_get_str(in, id, sizeof(id));
	pem = wire_get_bytes(in, KPROTO_CERT_MAX, &plen);
	blob = wire_get_bytes(in, KPROTO_SEALED_CA_MAX, &blen);
	if (wire_done(in) != 0)
		return KS_BAD;
	if (ks->store == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no gateway_key to open its CA "
		    "key with");
		return SL_ERR_NOT_FOUND;
	}
	if (sealed_open(ks->store->keys, ks->store->nkeys, blob, blen, &s, wbuf,
	    &w) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "its CA key does not open: %s",
		    w != NULL ? w : "?");
		return SL_ERR_INVALID;
	}
	snprintf(name, sizeof(name), CA_PREFIX "%s", id);
	if (strcmp(s->name, name) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "its CA key is another sandbox's");
		r = SL_ERR_INVALID;
	} else if ((r = ca_load((const char *)pem, plen,
	    (const char *)s->value, s->value_len, &ca)) != 0)
		snprintf(why, KPROTO_WHY_MAX, "its CA does not load: %s%s",
		    err_str(r), r == SL_ERR_IO ? " (raise RLIMIT_MEMLOCK)" : "");
	else if (!named(ca, id)) {
		snprintf(why, KPROTO_WHY_MAX, "its certificate is another "
		    "sandbox's");
		ca_free(ca);
		r = SL_ERR_INVALID;
	} else if ((r = ca_keep(ks, id, ca, &handle)) == 0)
		r = put_ca(out, handle, ca);
	sealed_secret_free(s);
	return r;
}

static int
h_ca_seal(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	char name[SEALED_NAME_MAX + 1], *key = NULL;
	struct sealed_in s;
	struct kca *k;
	uint64_t handle, created;
	uint8_t *blob = NULL;
	const char *w = NULL;
	size_t klen = 0, blen = 0;
	int r;

	handle = wire_get_u64(in);
	created = wire_get_u64(in);
	if (wire_done(in) != 0)
		return KS_BAD;
	if ((k = ca_find(ks, handle)) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no such CA");
		return SL_ERR_NOT_FOUND;
	}
	if (ks->store == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no gateway_key to seal it to");
		return SL_ERR_NOT_FOUND;
	}
	if ((r = ca_key_export(k->ca, &key, &klen)) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "cannot take the CA key: %s",
		    err_str(r));
		return r;
	}
	snprintf(name, sizeof(name), CA_PREFIX "%s", k->id);
	memset(&s, 0, sizeof(s));
	s.name = name;
	s.version = 1;
	s.created = (int64_t)created;
	s.value = (const uint8_t *)key;
	s.value_len = klen;
	r = sealed_seal(ks->store->keys[0]->pk, &s, &blob, &blen, &w);
	sodium_free(key);	/* wipes */
	if (r != 0) {
		snprintf(why, KPROTO_WHY_MAX, "cannot seal the CA key: %s",
		    w != NULL ? w : err_str(r));
		return r;
	}
	wire_bytes(out, blob, blen);
	free(blob);
	return out->over ? SL_ERR_TOO_BIG : 0;
}

static int
h_ca_drop(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	uint64_t handle = wire_get_u64(in);
	size_t i;

	if (wire_done(in) != 0)
		return KS_BAD;
	i = ca_slot(ks, handle);
	if (i >= ks->ncas || ks->cas[i].handle != handle) {
		snprintf(why, KPROTO_WHY_MAX, "no such CA");
		return SL_ERR_NOT_FOUND;
	}
	ca_free(ks->cas[i].ca);		/* wipes the key */
	memmove(&ks->cas[i], &ks->cas[i + 1],
	    (ks->ncas - i - 1) * sizeof(ks->cas[0]));
	ks->ncas--;
	return 0;
}

static int
h_leaf_mint(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	char host[KPROTO_HOST_MAX + 1];
	const unsigned char *spki;
	unsigned char *der = NULL;
	EVP_PKEY *pub = NULL;
	X509 *leaf = NULL;
	uint64_t handle;
	uint32_t validity;
	struct kca *k;
	size_t len;
	int r, n;

	handle = wire_get_u64(in);
	validity = wire_get_u32(in);
	wire_get_str(in, host, sizeof(host));
	spki = wire_get_bytes(in, KPROTO_SPKI_MAX, &len);
	if (wire_done(in) != 0)
		return KS_BAD;
	if ((k = ca_find(ks, handle)) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no such CA");
		return SL_ERR_DENIED;
	}
	if (validity == 0 || validity > LEAF_VALIDITY_MAX) {
		snprintf(why, KPROTO_WHY_MAX, "a leaf's validity out of bounds");
		return SL_ERR_INVALID;
	}
	if ((pub = d2i_PUBKEY(NULL, &spki, (long)len)) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "not a public key");
		return SL_ERR_INVALID;
	}
	if ((r = ca_mint_leaf(k->ca, host, pub, validity, &leaf)) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "cannot mint a leaf: %s",
		    err_str(r));
		goto out;
	}
	if ((n = i2d_X509(leaf, &der)) <= 0) {
		r = SL_ERR_INTERNAL;
		goto out;
	}
	wire_bytes(out, der, (size_t)n);
	r = out->over ? SL_ERR_TOO_BIG : 0;
 out:
	OPENSSL_free(der);
	X509_free(leaf);
	EVP_PKEY_free(pub);
	return r;
}

static int
h_idkeys_load(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	struct errlist errs = ERRLIST_INIT;
	struct idkeys *k = NULL;
	uint8_t *der;
	size_t i, len;
	int r;

	if ((r = idkeys_load(ks->cfg, &k, &errs)) != 0 || k == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "%s", errs.n > 0 ? errs.msgs[0] :
		    "no signing_key is configured");
		errlist_free(&errs);
		return r != 0 ? r : SL_ERR_NOT_FOUND;
	}
	errlist_free(&errs);
	wire_str(out, signkey_kid(k->sign));
	wire_u32(out, (uint32_t)k->npubs);
	for (i = 0; i < k->npubs; i++) {
		if ((r = signpub_der(k->pubs[i], &der, &len)) != 0) {
			idkeys_unref(k);
			return r;
		}
		wire_bytes(out, der, len);
		OPENSSL_free(der);
	}
	/* A token of the set before may still be asked for: kept one more load. */
	idkeys_unref(ks->ids_prev);
	ks->ids_prev = ks->ids;
	ks->ids = k;
	return out->over ? SL_ERR_TOO_BIG : 0;
}

/* The signing key of kid, in the set now or the one before. */
static const struct signkey *
signer(const struct kserve *ks, const char *kid)
{
	if (ks->ids != NULL && strcmp(signkey_kid(ks->ids->sign), kid) == 0)
		return ks->ids->sign;
	if (ks->ids_prev != NULL &&
	    strcmp(signkey_kid(ks->ids_prev->sign), kid) == 0)
		return ks->ids_prev->sign;
	return NULL;
}

/* An optional claim: NULL when "". */
static const char *
opt(const char *s)
{
	return s[0] != '\0' ? s : NULL;
}

static int
h_jwt_sign(struct kserve *ks, struct wire_r *in, struct wire_w *out,
    char *why)
{
	char f[9][KPROTO_CLAIM_MAX + 1], tok[JWT_MAX], jti[JWT_JTI_LEN + 1];
	const struct signkey *k;
	struct jwt_claims c;
	time_t now = time(NULL);
	unsigned ttl_max = ks->cfg->token_ttl_ms < 1000 ? 1 :
	    ks->cfg->token_ttl_ms / 1000;
	int64_t at;
	long len;
	size_t i;

	for (i = 0; i < 9; i++)
		wire_get_str(in, f[i], sizeof(f[i]));
	at = (int64_t)wire_get_u64(in);
	memset(&c, 0, sizeof(c));
	c.ttl = wire_get_u32(in);
	if (wire_done(in) != 0)
		return KS_BAD;
	if ((k = signer(ks, f[0])) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no signing key with that kid");
		return SL_ERR_NOT_FOUND;
	}
	/* Short-lived tokens of about now only: a worker cannot stock up. */
	if (c.ttl == 0 || c.ttl > ttl_max || at < (int64_t)now - 300 ||
	    at > (int64_t)now + 300) {
		snprintf(why, KPROTO_WHY_MAX, "a token's time or life out of "
		    "bounds");
		return SL_ERR_INVALID;
	}
	c.now = (time_t)at;
	c.iss = f[1];
	c.sandbox = f[2];
	c.aud = f[3];
	c.team = opt(f[4]);
	c.project = opt(f[5]);
	c.htm = opt(f[6]);
	c.htu = opt(f[7]);
	c.body_sha256 = opt(f[8]);
	if ((len = jwt_sign(k, &c, tok, sizeof(tok), jti)) < 0) {
		snprintf(why, KPROTO_WHY_MAX, "cannot sign: %s", err_str((int)len));
		return (int)len;
	}
	wire_bytes(out, tok, (size_t)len);
	wire_str(out, jti);
	OPENSSL_cleanse(tok, sizeof(tok));
	return out->over ? SL_ERR_TOO_BIG : 0;
}

typedef int (*handler_fn)(struct kserve *, struct wire_r *, struct wire_w *,
    char *);

static handler_fn
handler(enum kproto_type t)
{
	switch (t) {
	case KPROTO_HELLO:	return h_hello;
	case KPROTO_STORE_KEYS:	return h_store_keys;
	case KPROTO_READY:	return h_ready;
	case KPROTO_SEALED_OPEN: return h_sealed_open;
	case KPROTO_CA_NEW:	return h_ca_new;
	case KPROTO_CA_OPEN:	return h_ca_open;
	case KPROTO_CA_SEAL:	return h_ca_seal;
	case KPROTO_CA_DROP:	return h_ca_drop;
	case KPROTO_LEAF_MINT:	return h_leaf_mint;
	case KPROTO_IDKEYS_LOAD: return h_idkeys_load;
	case KPROTO_JWT_SIGN:	return h_jwt_sign;
	default:		return NULL;
	}
}

int
kserve_handle(struct kserve *ks, unsigned role, const struct chan_hdr *h,
    const uint8_t *p, uint32_t *type, uint8_t *ans, size_t *len,
    const char **why)
{
	static char whybuf[KPROTO_WHY_MAX];
	const struct kproto_row *row;
	struct wire_r in;
	struct wire_w out;
	handler_fn fn;
	int r;

	if ((row = kproto_admit(h->type, h->len, role, ks->phase, why)) == NULL)
		return -1;
	if ((fn = handler(row->type)) == NULL) {
		*why = "a request with no handler";
		return -1;
	}
	wire_r_init(&in, p, h->len);
	wire_w_init(&out, ans, CHAN_MSG_MAX);
	whybuf[0] = '\0';
	if ((r = fn(ks, &in, &out, whybuf)) == KS_BAD) {
		sodium_memzero(ans, out.len);
		*why = "a request whose fields do not read";
		return -1;
	}
	if (r == 0) {
		*type = KPROTO_OK;
		*len = out.len;
		return 0;
	}
	sodium_memzero(ans, out.len);
	wire_w_init(&out, ans, CHAN_MSG_MAX);
	wire_u32(&out, (uint32_t)-r);
	wire_str(&out, whybuf[0] != '\0' ? whybuf : err_str(r));
	*type = KPROTO_ERR;
	*len = out.len;
	return 0;
}
