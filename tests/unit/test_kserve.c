/*
 * test_kserve.c: the keys process's handlers (kserve.h) and the worker's
 * side of them (kclient.h, ca.h in remote mode).
 *
 * Two groups, in this order.  The first calls kserve_handle directly, as
 * the keys process's loop does, with requests built here: answers,
 * refusals (an error answer) and violations (-1, no answer, the answer
 * buffer wiped).  The second runs a keys server in a child process, over
 * real channels, and turns this process into a worker (kclient_start):
 * remote mode is process-wide and never ends, and ca.c in the server
 * must run in local mode, hence the fork, made before kclient_start.  The
 * remote tests run in order, each after the one before it (hello, the
 * start, READY, the run), as a worker's life does.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <jansson.h>
#include <sodium.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/wire.h"
#include "conf/config.h"
#include "keys/ca.h"
#include "keys/ca_int.h"
#include "keys/jwt.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "keys/kserve.h"
#include "keys/sealed.h"
#include "keys/secrets.h"
#include "keys/signkey.h"

#define DAY		86400u
#define SENTINEL_TYPE	0xdeadbeefu
#define PROBE		0x4242		/* the test server's own request */
#define REQ_MAX		(64 * 1024 + 1024)

/* What every test shares: a key set, two configurations, the server. */
static struct {
	char		 dir[64];
	char		 keydir[96], secdir[96], key[128], pub[128];
	char		 sign[128];
	char		*keys[1], *signs[1];
	struct config	 cfg;		/* secrets on */
	struct config	 off;		/* secrets off */
	uint8_t		 pk[32];
	uint8_t		 fpkey[32], phkey[32];	/* as a local store derives them */
	EVP_PKEY	*leafkey;
	uint8_t		*spki;
	size_t		 spki_len;
	/* The remote group's. */
	pid_t		 child;
	int		 raw, probe;
	struct kchan	*ctl, *worker;
	struct ca	*ca, *ca2;
	uint8_t		*ca_blob;
	size_t		 ca_blob_len;
} F = { .child = -1, .raw = -1, .probe = -1 };

/* ---- building requests ------------------------------------------------ */

static uint8_t *
blob_of(const char *name, const char *value, const char *const *hosts,
    size_t nhosts, enum sealed_kind kind, size_t *len)
{
	struct sealed_in in = { name, 3, 1700000000, hosts, nhosts,
	    (const uint8_t *)value, strlen(value), kind };
	const char *why = NULL;
	uint8_t *blob = NULL;

	assert_int_equal(sealed_seal(F.pk, &in, &blob, len, &why), 0);
	return blob;
}

static size_t
req_sealed(uint8_t *buf, const uint8_t *blob, size_t len)
{
	struct wire_w w;

	wire_w_init(&w, buf, REQ_MAX);
	wire_bytes(&w, blob, len);
	assert_false(w.over);
	return w.len;
}

static size_t
req_ca_new(uint8_t *buf, const char *id, uint32_t validity,
    const char *const *names, uint32_t n)
{
	struct wire_w w;
	uint32_t i;

	wire_w_init(&w, buf, REQ_MAX);
	wire_str(&w, id);
	wire_u32(&w, validity);
	wire_u32(&w, n);
	for (i = 0; i < n; i++)
		wire_str(&w, names[i]);
	assert_false(w.over);
	return w.len;
}

static size_t
req_ca_open(uint8_t *buf, const char *id, const char *pem, size_t plen,
    const uint8_t *blob, size_t blen)
{
	struct wire_w w;

	wire_w_init(&w, buf, REQ_MAX);
	wire_str(&w, id);
	wire_bytes(&w, pem, plen);
	wire_bytes(&w, blob, blen);
	assert_false(w.over);
	return w.len;
}

static size_t
req_u64s(uint8_t *buf, uint64_t a, int two, uint64_t b)
{
	struct wire_w w;

	wire_w_init(&w, buf, REQ_MAX);
	wire_u64(&w, a);
	if (two)
		wire_u64(&w, b);
	return w.len;
}

static size_t
req_leaf(uint8_t *buf, uint64_t handle, uint32_t validity, const char *host,
    size_t hlen, const uint8_t *spki, size_t slen)
{
	struct wire_w w;

	wire_w_init(&w, buf, REQ_MAX);
	wire_u64(&w, handle);
	wire_u32(&w, validity);
	wire_bytes(&w, host, hlen);
	wire_bytes(&w, spki, slen);
	assert_false(w.over);
	return w.len;
}

/* ---- checking answers ------------------------------------------------- */

static X509 *
der_cert(const uint8_t *p, size_t len)
{
	const unsigned char *q = p;
	X509 *x = d2i_X509(NULL, &q, (long)len);

	assert_non_null(x);
	assert_ptr_equal(q, p + len);
	return x;
}

/* x as PEM (malloc'd, NUL-terminated), as a worker keeps a CA's. */
static char *
ca_cert_pem_x(X509 *x, size_t *len)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *pem;
	long n;

	assert_non_null(bio);
	assert_int_equal(PEM_write_bio_X509(bio, x), 1);
	assert_true((n = BIO_get_mem_data(bio, &data)) > 0);
	assert_non_null(pem = malloc((size_t)n + 1));
	memcpy(pem, data, (size_t)n);
	pem[n] = '\0';
	*len = (size_t)n;
	BIO_free(bio);
	return pem;
}

static void
assert_is_ca(X509 *x)
{
	assert_true(X509_check_ca(x) >= 1);
	assert_true(X509_get_extension_flags(x) & EXFLAG_CA);
}

/* Signed by cacert's key, for key, naming host. */
static void
assert_leaf_of(X509 *leaf, X509 *cacert, EVP_PKEY *key, const char *host)
{
	assert_int_equal(X509_verify(leaf, X509_get0_pubkey(cacert)), 1);
	assert_int_equal(X509_check_issued(cacert, leaf), X509_V_OK);
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(leaf), key), 1);
	assert_int_equal(X509_check_host(leaf, host, 0, 0, NULL), 1);
	assert_false(X509_get_extension_flags(leaf) & EXFLAG_CA);
}

/* ---- the handlers, called directly ------------------------------------ */

struct lx {
	struct kserve	*ks;
	uint8_t		*ans;		/* CHAN_MSG_MAX, all zero between calls */
	uint32_t	 type;
	size_t		 len;
	const char	*why;
	uint8_t		 buf[REQ_MAX];	/* a request being built */
};

static int
l_setup_cfg(void **st, const struct config *cfg)
{
	struct errlist errs = ERRLIST_INIT;
	struct lx *x = calloc(1, sizeof(*x));

	if (x == NULL || (x->ans = calloc(1, CHAN_MSG_MAX)) == NULL)
		return -1;
	if (kserve_new(cfg, &x->ks, &errs) != 0)
		return -1;
	errlist_free(&errs);
	*st = x;
	return 0;
}

static int
l_setup(void **st)
{
	return l_setup_cfg(st, &F.cfg);
}

static int
l_setup_off(void **st)
{
	return l_setup_cfg(st, &F.off);
}

static int
l_teardown(void **st)
{
	struct lx *x = *st;

	kserve_free(x->ks);
	free(x->ans);
	free(x);
	return 0;
}

/* Whether b[0..n) is all zero. */
static int
all_zero(const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

/*
 * One request, as the keys process's loop hands it over: the payload in
 * a buffer of exactly its bytes (ASan sees a read past them).  On -1:
 * no answer was written, and the answer buffer holds nothing.
 */
static int
call(struct lx *x, unsigned role, uint32_t type, const void *p, size_t len)
{
	struct chan_hdr h = { type, (uint32_t)len, 7 };
	size_t cas = kserve_cas(x->ks);
	enum kproto_phase phase = kserve_phase(x->ks);
	uint8_t *req;
	int r;

	/* The caller wipes each answer once sent. */
	sodium_memzero(x->ans, x->len);
	req = malloc(len > 0 ? len : 1);
	assert_non_null(req);
	if (len > 0)
		memcpy(req, p, len);
	x->type = SENTINEL_TYPE;
	x->len = SIZE_MAX;
	x->why = NULL;
	r = kserve_handle(x->ks, role, &h, req, &x->type, x->ans, &x->len,
	    &x->why);
	free(req);
	if (r == -1) {
		assert_non_null(x->why);
		assert_int_equal(x->type, SENTINEL_TYPE);
		assert_true(x->len == SIZE_MAX);
		assert_true(all_zero(x->ans, CHAN_MSG_MAX));
		/* A violation changes nothing. */
		assert_int_equal(kserve_cas(x->ks), cas);
		assert_int_equal(kserve_phase(x->ks), phase);
		x->len = 0;
		return -1;
	}
	assert_int_equal(r, 0);
	assert_true(x->type == KPROTO_OK || x->type == KPROTO_ERR);
	assert_true(x->len <= CHAN_MSG_MAX);
	return 0;
}

/* Answered (OK or ERR), or the test fails saying why it was not. */
static void
answered(struct lx *x, unsigned role, uint32_t type, const void *p,
    size_t len)
{
	if (call(x, role, type, p, len) != 0)
		fail_msg("request %u: a violation: %s", type, x->why);
}

/* An answer: its fields in x->ans[0..x->len). */
static void
ok(struct lx *x, unsigned role, uint32_t type, const void *p, size_t len)
{
	answered(x, role, type, p, len);
	assert_int_equal(x->type, KPROTO_OK);
}

/* The refusal in x->ans: its code (an SL_ERR_*), with words that say why. */
static int
err_code(struct lx *x)
{
	char why[KPROTO_WHY_MAX];
	struct wire_r r;
	uint32_t code;

	assert_int_equal(x->type, KPROTO_ERR);
	wire_r_init(&r, x->ans, x->len);
	code = wire_get_u32(&r);
	wire_get_str(&r, why, sizeof(why));
	assert_int_equal(wire_done(&r), 0);
	assert_true(code >= 1 && code <= 64);
	assert_true(strlen(why) > 0);
	return -(int)code;
}

/* A refusal: its code. */
static int
refused(struct lx *x, unsigned role, uint32_t type, const void *p,
    size_t len)
{
	answered(x, role, type, p, len);
	return err_code(x);
}

static void
violation(struct lx *x, unsigned role, uint32_t type, const void *p,
    size_t len)
{
	assert_int_equal(call(x, role, type, p, len), -1);
}

/* CA_NEW from ctl: its handle, and its certificate into *cert. */
static uint64_t
l_ca_new(struct lx *x, const char *id, X509 **cert)
{
	static const char *const names[] = { "example.com", "*.example.org" };
	const uint8_t *der;
	struct wire_r r;
	uint64_t handle;
	size_t n;

	ok(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, id, DAY, names, 2));
	wire_r_init(&r, x->ans, x->len);
	handle = wire_get_u64(&r);
	der = wire_get_bytes(&r, KPROTO_CERT_MAX, &n);
	assert_int_equal(wire_done(&r), 0);
	assert_true(handle != 0);
	if (cert != NULL)
		*cert = der_cert(der, n);
	return handle;
}

static void
l_ready(struct lx *x)
{
	ok(x, KPROTO_FROM_CTL, KPROTO_READY, NULL, 0);
	assert_int_equal(x->len, 0);
	assert_int_equal(kserve_phase(x->ks), KPROTO_RUN);
}

/* LEAF_MINT of host with the shared leaf key: the leaf, or a refusal. */
static int
l_mint(struct lx *x, unsigned role, uint64_t handle, uint32_t validity,
    const char *host, X509 **leaf)
{
	const uint8_t *der;
	struct wire_r r;
	size_t n;

	n = req_leaf(x->buf, handle, validity, host, strlen(host), F.spki,
	    F.spki_len);
	answered(x, role, KPROTO_LEAF_MINT, x->buf, n);
	if (x->type == KPROTO_ERR)
		return err_code(x);
	wire_r_init(&r, x->ans, x->len);
	der = wire_get_bytes(&r, KPROTO_CERT_MAX, &n);
	assert_int_equal(wire_done(&r), 0);
	*leaf = der_cert(der, n);
	return 0;
}

static void
t_hello(void **st)
{
	struct lx *x = *st;
	struct wire_r r;

	assert_int_equal(kserve_phase(x->ks), KPROTO_START);
	assert_int_equal(kserve_cas(x->ks), 0);
	ok(x, KPROTO_FROM_CTL, KPROTO_HELLO, NULL, 0);
	wire_r_init(&r, x->ans, x->len);
	assert_int_equal(wire_get_u32(&r), KPROTO_VERSION);
	assert_int_equal(wire_done(&r), 0);
	/* Said twice is fine: it is the start's. */
	ok(x, KPROTO_FROM_CTL, KPROTO_HELLO, NULL, 0);
	/* Not a worker thread's, and never with a payload. */
	violation(x, KPROTO_FROM_WORKER, KPROTO_HELLO, NULL, 0);
	violation(x, KPROTO_FROM_CTL, KPROTO_HELLO, "x", 1);
}

/* The keys derived from the gateway key are the ones a store derives. */
static void
t_store_keys(void **st)
{
	struct lx *x = *st;
	const uint8_t *a, *b;
	struct wire_r r;
	size_t la, lb;

	ok(x, KPROTO_FROM_CTL, KPROTO_STORE_KEYS, NULL, 0);
	wire_r_init(&r, x->ans, x->len);
	a = wire_get_bytes(&r, 64, &la);
	b = wire_get_bytes(&r, 64, &lb);
	assert_int_equal(wire_done(&r), 0);
	assert_int_equal(la, 32);
	assert_int_equal(lb, 32);
	assert_memory_equal(a, F.fpkey, 32);
	assert_memory_equal(b, F.phkey, 32);
	assert_memory_not_equal(a, b, 32);
}

/* READY moves the phase on: the start's requests end, leaves begin. */
static void
t_phases(void **st)
{
	struct lx *x = *st;
	X509 *cert, *leaf = NULL;
	uint64_t h = l_ca_new(x, "sb-1", &cert);
	size_t n;

	n = req_leaf(x->buf, h, DAY, "a.example.com", 13, F.spki, F.spki_len);
	violation(x, KPROTO_FROM_CTL, KPROTO_LEAF_MINT, x->buf, n);
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, x->buf, n);
	violation(x, KPROTO_FROM_CTL, KPROTO_READY, "", 1);
	l_ready(x);
	violation(x, KPROTO_FROM_CTL, KPROTO_HELLO, NULL, 0);
	violation(x, KPROTO_FROM_CTL, KPROTO_STORE_KEYS, NULL, 0);
	violation(x, KPROTO_FROM_CTL, KPROTO_READY, NULL, 0);
	assert_int_equal(l_mint(x, KPROTO_FROM_CTL, h, DAY, "a.example.com",
	    &leaf), 0);
	assert_leaf_of(leaf, cert, F.leafkey, "a.example.com");
	X509_free(leaf);
	/* What is for any phase still is. */
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, x->buf,
	    req_u64s(x->buf, h, 1, 1700000000));
	X509_free(cert);
}

/* Who may send what: a worker thread mints and drops, nothing more. */
static void
t_roles(void **st)
{
	struct lx *x = *st;
	static const char *const none[1] = { NULL };
	X509 *cert, *leaf = NULL;
	uint64_t h;
	size_t n;

	n = req_ca_new(x->buf, "sb-w", DAY, none, 0);
	violation(x, KPROTO_FROM_WORKER, KPROTO_CA_NEW, x->buf, n);
	assert_int_equal(kserve_cas(x->ks), 0);
	h = l_ca_new(x, "sb-w", &cert);
	assert_int_equal(kserve_cas(x->ks), 1);
	violation(x, KPROTO_FROM_WORKER, KPROTO_CA_SEAL, x->buf,
	    req_u64s(x->buf, h, 1, 0));
	violation(x, KPROTO_FROM_WORKER, KPROTO_STORE_KEYS, NULL, 0);
	violation(x, KPROTO_FROM_WORKER, KPROTO_READY, NULL, 0);
	l_ready(x);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, 3600,
	    "api.example.com", &leaf), 0);
	assert_leaf_of(leaf, cert, F.leafkey, "api.example.com");
	X509_free(leaf);
	/* A role that is no channel's. */
	n = req_leaf(x->buf, h, DAY, "a.example.com", 13, F.spki, F.spki_len);
	violation(x, 0, KPROTO_LEAF_MINT, x->buf, n);
	violation(x, 0x80, KPROTO_LEAF_MINT, x->buf, n);
	ok(x, KPROTO_FROM_WORKER, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, h, 0, 0));
	assert_int_equal(x->len, 0);
	assert_int_equal(kserve_cas(x->ks), 0);
	X509_free(cert);
}

/* Types that are no row: the same violation from anyone. */
static void
t_unknown(void **st)
{
	struct lx *x = *st;
	static const uint32_t bad[] = { 0, KPROTO_NTYPES, 0x7777, KPROTO_OK,
	    KPROTO_ERR, UINT32_MAX };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		violation(x, KPROTO_FROM_CTL, bad[i], NULL, 0);
		violation(x, KPROTO_FROM_WORKER, bad[i], "x", 1);
	}
}

static void
t_sealed_open(void **st)
{
	struct lx *x = *st;
	static const char *const hosts[] = { "API.Example.com",
	    "*.example.org" };
	uint8_t id[SEALED_KEYID_LEN];
	const uint8_t *keyid, *value;
	char s[SEALED_NAME_MAX + 1];
	struct wire_r r;
	uint8_t *blob;
	size_t len, n;

	blob = blob_of("api-token", "s3cr3t value", hosts, 2,
	    SEALED_KIND_HEADER, &len);
	ok(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, x->buf,
	    req_sealed(x->buf, blob, len));
	wire_r_init(&r, x->ans, x->len);
	wire_get_str(&r, s, sizeof(s));
	assert_string_equal(s, "api-token");
	assert_int_equal(wire_get_u32(&r), SEALED_KIND_HEADER);
	assert_true(wire_get_u64(&r) == 3);
	assert_true(wire_get_u64(&r) == 1700000000);
	keyid = wire_get_bytes(&r, 64, &n);
	assert_int_equal(n, SEALED_KEYID_LEN);
	gwkey_id(F.pk, id);
	assert_memory_equal(keyid, id, SEALED_KEYID_LEN);
	assert_int_equal(wire_get_u32(&r), 2);
	wire_get_str(&r, s, sizeof(s));
	assert_string_equal(s, "api.example.com");
	wire_get_str(&r, s, sizeof(s));
	assert_string_equal(s, "*.example.org");
	value = wire_get_bytes(&r, 64, &n);
	assert_int_equal(n, 12);
	assert_memory_equal(value, "s3cr3t value", 12);
	assert_int_equal(wire_done(&r), 0);
	/* In any phase, from ctl only. */
	l_ready(x);
	ok(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, x->buf,
	    req_sealed(x->buf, blob, len));
	violation(x, KPROTO_FROM_WORKER, KPROTO_SEALED_OPEN, x->buf,
	    req_sealed(x->buf, blob, len));
	free(blob);
}

/* A blob that does not open is refused: the sender is not at fault. */
static void
t_sealed_refusals(void **st)
{
	struct lx *x = *st;
	uint8_t *blob, junk[SEALED_HEADER_LEN];
	size_t len;

	blob = blob_of("tok", "value", NULL, 0, SEALED_KIND_HEADER, &len);
	blob[len - 1] ^= 1;
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, len)), SL_ERR_INVALID);
	assert_non_null(strstr((const char *)x->ans + 8, "does not open"));
	free(blob);
	/* The least the table admits: a header and nothing sealed. */
	memset(junk, 0, sizeof(junk));
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, junk, sizeof(junk))), SL_ERR_INVALID);
	/* A sandbox's CA key never leaves, nor anything of its value. */
	blob = blob_of("sandbox-ca.x", "cakeyvalue", NULL, 0,
	    SEALED_KIND_HEADER, &len);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, len)), SL_ERR_DENIED);
	assert_null(memmem(x->ans, x->len, "cakeyvalue", 10));
	free(blob);
	/* Nor the bare prefix, nor a longer id. */
	blob = blob_of("sandbox-ca.", "v", NULL, 0, SEALED_KIND_HEADER, &len);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, len)), SL_ERR_DENIED);
	free(blob);
	blob = blob_of("sandbox-ca.sb-1.two", "v", NULL, 0,
	    SEALED_KIND_HEADER, &len);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, len)), SL_ERR_DENIED);
	free(blob);
	/* A near name is an ordinary secret. */
	blob = blob_of("sandbox-ca", "v", NULL, 0, SEALED_KIND_HEADER, &len);
	ok(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, x->buf,
	    req_sealed(x->buf, blob, len));
	free(blob);
}

/* Without gateway keys: refusals, not violations; CAs still work. */
static void
t_secrets_off(void **st)
{
	struct lx *x = *st;
	uint8_t *blob;
	size_t len;
	uint64_t h;

	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_STORE_KEYS, NULL,
	    0), SL_ERR_NOT_FOUND);
	blob = blob_of("tok", "value", NULL, 0, SEALED_KIND_HEADER, &len);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, len)), SL_ERR_NOT_FOUND);
	h = l_ca_new(x, "sb-off", NULL);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, x->buf,
	    req_u64s(x->buf, h, 1, 0)), SL_ERR_NOT_FOUND);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, x->buf,
	    req_ca_open(x->buf, "sb-off", "pem", 3, blob, len)),
	    SL_ERR_NOT_FOUND);
	assert_int_equal(kserve_cas(x->ks), 1);
	free(blob);
}

/* A CA's life: made, sealed, opened again, dropped; handles are not reused. */
static void
t_ca_life(void **st)
{
	struct lx *x = *st;
	struct sealed_secret *s = NULL;
	struct gwkey *gk = NULL;
	X509 *c1, *c2, *c3, *leaf = NULL;
	const uint8_t *b, *der;
	uint8_t *blob;
	struct wire_r r;
	const char *why;
	char *pem, *pem3;
	size_t blen, plen, plen3, n;
	uint64_t h1, h2, h3;

	h1 = l_ca_new(x, "sb-1", &c1);
	assert_is_ca(c1);
	assert_int_equal(kserve_cas(x->ks), 1);

	/* Sealed to the gateway key, as the secret sandbox-ca.ID. */
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, x->buf,
	    req_u64s(x->buf, h1, 1, 1700000123));
	wire_r_init(&r, x->ans, x->len);
	b = wire_get_bytes(&r, KPROTO_SEALED_CA_MAX, &blen);
	assert_int_equal(wire_done(&r), 0);
	assert_non_null(blob = malloc(blen));
	memcpy(blob, b, blen);
	assert_int_equal(gwkey_load(F.key, &gk, &why), 0);
	assert_int_equal(sealed_open(&gk, 1, blob, blen, &s, NULL, &why), 0);
	assert_string_equal(s->name, "sandbox-ca.sb-1");
	assert_true(s->version == 1);
	assert_true(s->created == 1700000123);
	sealed_secret_free(s);
	gwkey_free(gk);

	/* Opened again: the same certificate, another handle. */
	assert_non_null(pem = ca_cert_pem_x(c1, &plen));
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, x->buf,
	    req_ca_open(x->buf, "sb-1", pem, plen, blob, blen));
	wire_r_init(&r, x->ans, x->len);
	h2 = wire_get_u64(&r);
	der = wire_get_bytes(&r, KPROTO_CERT_MAX, &n);
	assert_int_equal(wire_done(&r), 0);
	c2 = der_cert(der, n);
	assert_int_equal(X509_cmp(c1, c2), 0);
	assert_true(h2 > h1);
	assert_int_equal(kserve_cas(x->ks), 2);

	/* Another sandbox's id, or another CA's certificate: refused. */
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, x->buf,
	    req_ca_open(x->buf, "sb-2", pem, plen, blob, blen)),
	    SL_ERR_INVALID);
	h3 = l_ca_new(x, "sb-3", &c3);
	assert_non_null(pem3 = ca_cert_pem_x(c3, &plen3));
	assert_int_not_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN,
	    x->buf, req_ca_open(x->buf, "sb-1", pem3, plen3, blob, blen)), 0);
	assert_int_not_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN,
	    x->buf, req_ca_open(x->buf, "sb-1", "junk", 4, blob, blen)), 0);
	assert_int_equal(kserve_cas(x->ks), 3);
	/* And the key never goes out as a secret. */
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN,
	    x->buf, req_sealed(x->buf, blob, blen)), SL_ERR_DENIED);

	/* The opened CA signs as the first did. */
	l_ready(x);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h2, DAY,
	    "b.example.com", &leaf), 0);
	assert_leaf_of(leaf, c1, F.leafkey, "b.example.com");
	X509_free(leaf);

	/* Dropped: gone for every request, and its handle is not given again. */
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, h1, 0, 0));
	assert_int_equal(kserve_cas(x->ks), 2);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, h1, 0, 0)), SL_ERR_NOT_FOUND);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, x->buf,
	    req_u64s(x->buf, h1, 1, 0)), SL_ERR_NOT_FOUND);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h1, DAY,
	    "b.example.com", &leaf), SL_ERR_DENIED);
	assert_true(l_ca_new(x, "sb-4", NULL) > h3);
	/* The middle one of three goes; the others stay found. */
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, h3, 0, 0));
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h2, DAY,
	    "c.example.com", &leaf), 0);
	X509_free(leaf);
	assert_int_equal(kserve_cas(x->ks), 2);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, 0, 0, 0)), SL_ERR_NOT_FOUND);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, x->buf,
	    req_u64s(x->buf, UINT64_MAX, 0, 0)), SL_ERR_NOT_FOUND);

	free(pem);
	free(pem3);
	free(blob);
	X509_free(c1);
	X509_free(c2);
	X509_free(c3);
}

/* What the worker asks for is bounded here, whatever it asks. */
static void
t_ca_refusals(void **st)
{
	struct lx *x = *st;
	static const char *const upper[] = { "Example.COM" };
	static const char *const none[1] = { NULL };
	uint64_t h;
	X509 *leaf = NULL;
	size_t n;

	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "sb-1", 0, none, 0)), SL_ERR_INVALID);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "sb-1", 7 * DAY + 1, none, 0)), SL_ERR_INVALID);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "sb-1", UINT32_MAX, none, 0)), SL_ERR_INVALID);
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "bad/id", DAY, none, 0)), SL_ERR_INVALID);
	/* An empty id is short of the table: not even a refusal. */
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "", DAY, none, 0));
	assert_int_equal(refused(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "sb-1", DAY, upper, 1)), SL_ERR_INVALID);
	assert_int_equal(kserve_cas(x->ks), 0);
	/* The longest validity configured is fine. */
	ok(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, x->buf,
	    req_ca_new(x->buf, "sb-1", 7 * DAY, none, 0));
	h = l_ca_new(x, "sb-2", NULL);

	l_ready(x);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, 0, "a.example.com",
	    &leaf), SL_ERR_INVALID);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, 30 * DAY + 1,
	    "a.example.com", &leaf), SL_ERR_INVALID);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, DAY,
	    "A.example.com", &leaf), SL_ERR_INVALID);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, DAY, "a..example",
	    &leaf), SL_ERR_INVALID);
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h + 100, DAY,
	    "a.example.com", &leaf), SL_ERR_DENIED);
	/* Not a public key; a public key with bytes after it is one. */
	n = req_leaf(x->buf, h, DAY, "a.example.com", 13,
	    (const uint8_t *)"junk", 4);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT,
	    x->buf, n), SL_ERR_INVALID);
	n = req_leaf(x->buf, h, DAY, "a.example.com", 13, F.spki,
	    F.spki_len - 1);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT,
	    x->buf, n), SL_ERR_INVALID);
	/* 30 days is the most. */
	assert_int_equal(l_mint(x, KPROTO_FROM_WORKER, h, 30 * DAY,
	    "a.example.com", &leaf), 0);
	X509_free(leaf);
	assert_int_equal(kserve_cas(x->ks), 2);
}

/* Fields that do not read: violations, never crashes, never answers. */
static void
t_malformed(void **st)
{
	struct lx *x = *st;
	static const char *const one[] = { "example.com" };
	char big[300], id47[48];
	uint8_t *b = x->buf;
	struct wire_w w;
	uint64_t h;

	memset(big, 'a', sizeof(big));
	memset(id47, 'i', sizeof(id47));
	id47[47] = '\0';

	/* SEALED_OPEN: the blob's length says more than there is. */
	wire_w_init(&w, b, REQ_MAX);
	wire_u32(&w, 100);
	wire_put(&w, big, 30);
	violation(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, b, w.len);
	/* A byte after the blob. */
	wire_w_init(&w, b, REQ_MAX);
	wire_bytes(&w, big, 17);
	wire_put(&w, "", 1);
	violation(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, b, w.len);

	/* CA_NEW: an id with a NUL, one too long, cut short. */
	wire_w_init(&w, b, REQ_MAX);
	wire_bytes(&w, "a\0b", 3);
	wire_u32(&w, DAY);
	wire_u32(&w, 0);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b,
	    req_ca_new(b, id47, DAY, NULL, 0));
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-xxxxxxx");
	wire_put(&w, "\x01\x02", 2);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	/* Two names said, one sent; more names than a CA takes. */
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, DAY);
	wire_u32(&w, 2);
	wire_str(&w, "example.com");
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, DAY);
	wire_u32(&w, KPROTO_NAMES_MAX + 1);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, DAY);
	wire_u32(&w, UINT32_MAX);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	/* A name of 254 bytes; a name with a NUL; a byte after the names. */
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, DAY);
	wire_u32(&w, 1);
	wire_bytes(&w, big, KPROTO_HOST_MAX + 1);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, DAY);
	wire_u32(&w, 1);
	wire_bytes(&w, "example.com\0.evil", 17);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	wire_w_init(&w, b, REQ_MAX);
	w.len = req_ca_new(b, "sb-1", DAY, one, 1);
	wire_put(&w, "", 1);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);

	/* CA_OPEN: the certificate's length says more than there is. */
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, 200);
	wire_put(&w, big, 30);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, b, w.len);
	/* A certificate over the table's bound, in a message within it. */
	wire_w_init(&w, b, REQ_MAX);
	wire_str(&w, "sb-1");
	wire_u32(&w, KPROTO_CERT_MAX + 1);
	wire_put(&w, big, 30);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, b, w.len);

	/* CA_SEAL and CA_DROP: only their exact sizes. */
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, big, 15);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, big, 17);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, big, 7);
	violation(x, KPROTO_FROM_CTL, KPROTO_CA_DROP, big, 9);
	violation(x, KPROTO_FROM_CTL, KPROTO_STORE_KEYS, big, 1);

	h = l_ca_new(x, "sb-1", NULL);
	l_ready(x);
	/* LEAF_MINT: a host of 254 bytes, one with a NUL, one cut short. */
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b,
	    req_leaf(b, h, DAY, big, KPROTO_HOST_MAX + 1, F.spki, F.spki_len));
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b,
	    req_leaf(b, h, DAY, "a.example.com\0x", 15, F.spki, F.spki_len));
	wire_w_init(&w, b, REQ_MAX);
	wire_u64(&w, h);
	wire_u32(&w, DAY);
	wire_u32(&w, 40);
	wire_put(&w, "a.example.com", 13);
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b, w.len);
	/* A public key over its bound, and bytes after the key. */
	wire_w_init(&w, b, REQ_MAX);
	wire_u64(&w, h);
	wire_u32(&w, DAY);
	wire_str(&w, "a.example.com");
	wire_u32(&w, KPROTO_SPKI_MAX + 1);
	wire_put(&w, big, 100);
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b, w.len);
	wire_w_init(&w, b, REQ_MAX);
	w.len = req_leaf(b, h, DAY, "a.example.com", 13, F.spki, F.spki_len);
	wire_put(&w, "\0", 1);
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b, w.len);
	/* An empty host and an empty key are cut short of the table. */
	violation(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, b,
	    req_leaf(b, h, DAY, "", 0, NULL, 0));
	assert_int_equal(kserve_cas(x->ks), 1);
}

/*
 * One valid request of each row: every proper prefix of it and it with
 * one byte more are violations; it whole is answered.
 */
static void
each_cut(struct lx *x, unsigned role, uint32_t type, const uint8_t *m,
    size_t len)
{
	uint8_t *more;
	size_t k;

	for (k = 0; k < len; k++)
		violation(x, role, type, m, k);
	assert_non_null(more = malloc(len + 1));
	if (len > 0)
		memcpy(more, m, len);
	more[len] = 0;
	violation(x, role, type, more, len + 1);
	free(more);
	answered(x, role, type, m, len);
}

static void
t_cuts(void **st)
{
	struct lx *x = *st;
	static const char *const names[] = { "example.com", "*.example.org" };
	const uint8_t *b;
	uint8_t *m, *blob, *cablob;
	struct wire_r r;
	X509 *cert;
	char *pem;
	size_t len, blen, cablen, plen, n;
	uint64_t h;

	assert_non_null(m = malloc(REQ_MAX));
	each_cut(x, KPROTO_FROM_CTL, KPROTO_HELLO, NULL, 0);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_STORE_KEYS, NULL, 0);
	blob = blob_of("tok", "value", names, 1, SEALED_KIND_HEADER, &blen);
	len = req_sealed(m, blob, blen);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_SEALED_OPEN, m, len);
	assert_int_equal(x->type, KPROTO_OK);
	len = req_ca_new(m, "sb-1", DAY, names, 2);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_CA_NEW, m, len);
	assert_int_equal(x->type, KPROTO_OK);
	assert_int_equal(kserve_cas(x->ks), 1);
	h = l_ca_new(x, "sb-2", &cert);
	len = req_u64s(m, h, 1, 1700000000);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_CA_SEAL, m, len);
	assert_int_equal(x->type, KPROTO_OK);
	wire_r_init(&r, x->ans, x->len);
	b = wire_get_bytes(&r, KPROTO_SEALED_CA_MAX, &cablen);
	assert_int_equal(wire_done(&r), 0);
	assert_non_null(cablob = malloc(cablen));
	memcpy(cablob, b, cablen);
	assert_non_null(pem = ca_cert_pem_x(cert, &plen));
	len = req_ca_open(m, "sb-2", pem, plen, cablob, cablen);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_CA_OPEN, m, len);
	assert_int_equal(x->type, KPROTO_OK);
	assert_int_equal(kserve_cas(x->ks), 3);
	each_cut(x, KPROTO_FROM_CTL, KPROTO_READY, NULL, 0);
	assert_int_equal(kserve_phase(x->ks), KPROTO_RUN);
	n = req_leaf(m, h, DAY, "a.example.com", 13, F.spki, F.spki_len);
	each_cut(x, KPROTO_FROM_WORKER, KPROTO_LEAF_MINT, m, n);
	assert_int_equal(x->type, KPROTO_OK);
	len = req_u64s(m, h, 0, 0);
	each_cut(x, KPROTO_FROM_WORKER, KPROTO_CA_DROP, m, len);
	assert_int_equal(x->type, KPROTO_OK);
	assert_int_equal(kserve_cas(x->ks), 2);
	free(pem);
	free(blob);
	free(cablob);
	free(m);
	X509_free(cert);
}

/* A CA kept here (no keys process) is neither sealed nor opened there. */
/* A JWT_SIGN request: kid, the claims (NULL: ""), now, ttl. */
static size_t
req_jwt(uint8_t *buf, size_t cap, const char *kid, const char *sandbox,
    const char *htu, int64_t now, uint32_t ttl)
{
	struct wire_w w;

	wire_w_init(&w, buf, cap);
	wire_str(&w, kid);
	wire_str(&w, "https://sluice.test");
	wire_str(&w, sandbox);
	wire_str(&w, "broker");
	wire_str(&w, "team-a");
	wire_str(&w, "");
	wire_str(&w, "POST");
	wire_str(&w, htu != NULL ? htu : "");
	wire_str(&w, "");
	wire_u64(&w, (uint64_t)now);
	wire_u32(&w, ttl);
	assert_false(w.over);
	return w.len;
}

/*
 * IDKEYS_LOAD gives the signer's kid and public keys; JWT_SIGN builds and
 * signs a whole token from the claims, which verifies with that key; a
 * time or life out of bounds, another kid, or a token before the keys
 * are loaded is refused; the audit role may not ask.
 */
static void
t_tokens(void **st)
{
	struct lx *x = *st;
	uint8_t req[2048];
	char kid[64], tok[8192], jti[64];
	const uint8_t *der, *t;
	struct signpub *pub = NULL;
	struct wire_r r;
	json_t *claims = NULL;
	size_t n, dlen, tlen;
	time_t now = time(NULL);

	l_ready(x);
	/* Not loaded yet: no key has that kid. */
	n = req_jwt(req, sizeof(req), "nokid", "box", NULL, now, 60);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_NOT_FOUND);
	ok(x, KPROTO_FROM_CTL, KPROTO_IDKEYS_LOAD, NULL, 0);
	wire_r_init(&r, x->ans, x->len);
	wire_get_str(&r, kid, sizeof(kid));
	assert_int_equal(wire_get_u32(&r), 1);
	der = wire_get_bytes(&r, KPROTO_SPKI_MAX, &dlen);
	assert_int_equal(wire_done(&r), 0);
	assert_int_equal(signpub_from_der(der, dlen, &pub), 0);
	assert_string_equal(signpub_kid(pub), kid);
	/* A whole token, signed by that key, saying what was asked. */
	n = req_jwt(req, sizeof(req), kid, "box", "https://api.test/x", now, 60);
	ok(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req, n);
	wire_r_init(&r, x->ans, x->len);
	t = wire_get_bytes(&r, KPROTO_TOKEN_MAX, &tlen);
	wire_get_str(&r, jti, sizeof(jti));
	assert_int_equal(wire_done(&r), 0);
	assert_true(tlen < sizeof(tok));
	memcpy(tok, t, tlen);
	tok[tlen] = '\0';
	assert_int_equal(jwt_verify(pub, tok, tlen, &claims), 0);
	assert_string_equal(json_string_value(json_object_get(claims, "sub")),
	    "sandbox:box");
	assert_string_equal(json_string_value(json_object_get(claims, "htu")),
	    "https://api.test/x");
	assert_string_equal(json_string_value(json_object_get(claims, "jti")),
	    jti);
	assert_null(json_object_get(claims, "project"));	/* "" is absent */
	assert_int_equal(json_integer_value(json_object_get(claims, "exp")) -
	    json_integer_value(json_object_get(claims, "iat")), 60);
	json_decref(claims);
	/* Bounds: a life over token_ttl, a time far from now, none at all. */
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now, 61);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_INVALID);
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now + 3600, 60);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_INVALID);
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now - 3600, 60);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_INVALID);
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now, 0);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_INVALID);
	/* A required claim empty: jwt_sign refuses it. */
	n = req_jwt(req, sizeof(req), kid, "", NULL, now, 60);
	assert_int_equal(refused(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req,
	    n), SL_ERR_INVALID);
	/* The audit channel asks for no token; a worker loads no keys. */
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now, 60);
	violation(x, KPROTO_FROM_AUDIT, KPROTO_JWT_SIGN, req, n);
	violation(x, KPROTO_FROM_WORKER, KPROTO_IDKEYS_LOAD, NULL, 0);
	/* A reload: the kid of the set before still signs, once. */
	ok(x, KPROTO_FROM_CTL, KPROTO_IDKEYS_LOAD, NULL, 0);
	n = req_jwt(req, sizeof(req), kid, "box", NULL, now, 60);
	ok(x, KPROTO_FROM_WORKER, KPROTO_JWT_SIGN, req, n);
	signpub_free(pub);
}

static void
t_local_ca(void **st)
{
	struct ca *ca = NULL, *back = NULL;
	char why[128];
	uint8_t *blob = NULL, junk[32];
	size_t len = 0;

	assert_false(kclient_remote());
	assert_int_equal(ca_new("sb-local", NULL, 0, DAY, &ca), 0);
	assert_int_equal(ca_seal(ca, 0, &blob, &len, why, sizeof(why)),
	    SL_ERR_UNSUPPORTED);
	assert_null(blob);
	memset(junk, 0, sizeof(junk));
	assert_int_equal(ca_open_sealed("sb-local", "pem", 3, junk,
	    sizeof(junk), &back, why, sizeof(why)), SL_ERR_UNSUPPORTED);
	assert_null(back);
	ca_free(ca);
}

/* ---- a keys server in a child, and this process its worker ----------- */

/* The channels' roles, in the child's order. */
enum { CH_CTL, CH_WORKER, CH_RAW, CH_PROBE, CH_N };

/*
 * The keys process's loop (keyproc.c's serve), with what a test needs:
 * a violation on the raw channel ends that channel (not the process),
 * and the probe channel says how many CAs are kept, the phase, and how
 * many violations were seen.  Exits at the control channel's end: 0, or
 * 2 for a violation where none was to be.
 */
static void
child(const int *fds)
{
	static const unsigned roles[CH_N] = { KPROTO_FROM_CTL,
	    KPROTO_FROM_WORKER, KPROTO_FROM_CTL, 0 };
	struct errlist errs = ERRLIST_INIT;
	struct pollfd pf[CH_N];
	struct kserve *ks = NULL;
	struct chan_hdr h;
	struct wire_w w;
	uint8_t *req, *ans;
	const char *why;
	uint32_t type, violations = 0;
	size_t i, len;
	int r, code = 0;

	if (sodium_init() < 0 || kserve_new(&F.cfg, &ks, &errs) != 0)
		_exit(3);
	errlist_free(&errs);
	if ((req = malloc(CHAN_MSG_MAX)) == NULL ||
	    (ans = calloc(1, CHAN_MSG_MAX)) == NULL)
		_exit(3);
	for (i = 0; i < CH_N; i++) {
		pf[i].fd = fds[i];
		pf[i].events = POLLIN;
	}
	for (;;) {
		if (poll(pf, CH_N, -1) == -1) {
			if (errno == EINTR)
				continue;
			code = 3;
			break;
		}
		for (i = 0; i < CH_N; i++) {
			if (pf[i].fd == -1 || pf[i].revents == 0)
				continue;
			r = chan_recv(pf[i].fd, &h, req, CHAN_MSG_MAX, NULL, 0);
			if (r == SL_ERR_IO && errno == ETIMEDOUT)
				continue;
			if (r == 0 || r == SL_ERR_IO) {
				if (i == CH_CTL)
					goto out;
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			if (r != 1) {
				code = 2;
				goto out;
			}
			if (i == CH_PROBE) {
				wire_w_init(&w, ans, CHAN_MSG_MAX);
				wire_u64(&w, kserve_cas(ks));
				wire_u32(&w, kserve_phase(ks));
				wire_u32(&w, violations);
				type = KPROTO_OK;
				len = w.len;
			} else if (kserve_handle(ks, roles[i], &h, req, &type,
			    ans, &len, &why) != 0) {
				violations++;
				if (i != CH_RAW) {
					code = 2;
					goto out;
				}
				/* Ended, with no answer. */
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			r = chan_send(pf[i].fd, type, h.id, ans, len, -1);
			sodium_memzero(ans, len);
			if (r != 0 && i == CH_CTL)
				goto out;
		}
	}
 out:
	kserve_free(ks);
	free(req);
	free(ans);
	_exit(code);
}

static int
r_setup(void **st)
{
	int mine[CH_N], theirs[CH_N], sv[2];
	size_t i;

	for (i = 0; i < CH_N; i++) {
		if (chan_pair(sv) != 0)
			return -1;
		mine[i] = sv[0];
		theirs[i] = sv[1];
	}
	/* Nothing buffered goes out twice. */
	fflush(stdout);
	fflush(stderr);
	if ((F.child = fork()) == -1)
		return -1;
	if (F.child == 0) {
		for (i = 0; i < CH_N; i++)
			close(mine[i]);
		child(theirs);
	}
	for (i = 0; i < CH_N; i++)
		close(theirs[i]);
	F.raw = mine[CH_RAW];
	F.probe = mine[CH_PROBE];
	if ((F.ctl = kchan_new(mine[CH_CTL], KPROTO_FROM_CTL)) == NULL ||
	    (F.worker = kchan_new(mine[CH_WORKER], KPROTO_FROM_WORKER)) == NULL)
		return -1;
	kclient_start(F.ctl);
	return 0;
}

/* Whatever an earlier failure left: the child ends with its channels. */
static int
r_teardown(void **st)
{
	int status;

	if (F.ctl != NULL) {
		kclient_stop();
		kchan_free(F.ctl);
		F.ctl = NULL;
	}
	kchan_free(F.worker);
	F.worker = NULL;
	if (F.raw != -1)
		close(F.raw);
	if (F.probe != -1)
		close(F.probe);
	F.raw = F.probe = -1;
	if (F.child > 0) {
		kill(F.child, SIGKILL);
		waitpid(F.child, &status, 0);
		F.child = -1;
	}
	return 0;
}

/* What the server says of itself. */
static void
probe(uint64_t *cas, uint32_t *phase, uint32_t *violations)
{
	struct chan_hdr h;
	uint8_t ans[64];
	struct wire_r r;

	assert_int_equal(chan_send(F.probe, PROBE, 1, NULL, 0, -1), 0);
	assert_int_equal(chan_recv(F.probe, &h, ans, sizeof(ans), NULL, 10000),
	    1);
	wire_r_init(&r, ans, h.len);
	*cas = wire_get_u64(&r);
	*phase = wire_get_u32(&r);
	*violations = wire_get_u32(&r);
	assert_int_equal(wire_done(&r), 0);
}

static void
assert_server(uint64_t cas, uint32_t phase, uint32_t violations)
{
	uint64_t c;
	uint32_t p, v;

	probe(&c, &p, &v);
	assert_true(c == cas);
	assert_int_equal(p, phase);
	assert_int_equal(v, violations);
}

static void
t_r_hello(void **st)
{
	char why[KPROTO_WHY_MAX];

	assert_true(kclient_remote());
	assert_int_equal(kclient_hello(why), 0);
	assert_server(0, KPROTO_START, 0);
}

static void
t_r_store_keys(void **st)
{
	char why[KPROTO_WHY_MAX];
	uint8_t fp[32], ph[32];

	assert_int_equal(kclient_store_keys(fp, ph, why), 0);
	assert_memory_equal(fp, F.fpkey, 32);
	assert_memory_equal(ph, F.phkey, 32);
}

/* A worker's secret store: no gateway key here, its secrets open there. */
static void
t_r_store(void **st)
{
	struct errlist errs = ERRLIST_INIT;
	struct secret_store *store = NULL;
	struct secret *s = NULL;
	char why[SECRET_WHY_MAX];
	struct gwkey *gk = NULL;
	const char *w = NULL;
	uint8_t *blob;
	size_t len;

	assert_int_equal(gwkey_load(F.key, &gk, &w), SL_ERR_DENIED);
	assert_null(gk);
	assert_int_equal(secret_store_new(&F.cfg, &store, &errs), 0);
	assert_non_null(store);
	assert_int_equal(store->nkeys, 0);
	assert_memory_equal(store->fpkey, F.fpkey, 32);
	blob = blob_of("tok", "value-one", NULL, 0, SEALED_KIND_HEADER, &len);
	assert_int_equal(secret_open(store, blob, len, "tok", "file", &s,
	    why), 0);
	assert_int_equal(s->value_len, 9);
	assert_memory_equal(s->value, "value-one", 9);
	secret_unref(s);
	free(blob);
	secret_store_free(store);
	errlist_free(&errs);
}

static void
t_r_sealed_open(void **st)
{
	static const char *const hosts[] = { "API.Example.com",
	    "*.example.org" };
	struct sealed_secret *s = NULL;
	char why[KPROTO_WHY_MAX];
	uint8_t id[SEALED_KEYID_LEN];
	uint8_t *blob;
	size_t len;

	blob = blob_of("api-token", "s3cr3t value", hosts, 2,
	    SEALED_KIND_HEADER, &len);
	assert_int_equal(kclient_sealed_open(blob, len, &s, why), 0);
	assert_string_equal(s->name, "api-token");
	assert_int_equal(s->kind, SEALED_KIND_HEADER);
	assert_true(s->version == 3);
	assert_true(s->created == 1700000000);
	assert_int_equal(s->nhosts, 2);
	assert_string_equal(s->hosts[0], "api.example.com");
	assert_string_equal(s->hosts[1], "*.example.org");
	gwkey_id(F.pk, id);
	assert_memory_equal(s->keyid, id, SEALED_KEYID_LEN);
	assert_int_equal(s->value_len, 12);
	assert_memory_equal(s->value, "s3cr3t value", 13);
	sealed_secret_free(s);
	free(blob);

	/* Another kind comes back as itself. */
	blob = blob_of("aws", "{\"a\": 1}", NULL, 0, SEALED_KIND_JSON, &len);
	assert_int_equal(kclient_sealed_open(blob, len, &s, why), 0);
	assert_int_equal(s->kind, SEALED_KIND_JSON);
	assert_int_equal(s->nhosts, 0);
	assert_memory_equal(s->value, "{\"a\": 1}", 9);
	sealed_secret_free(s);
	free(blob);
}

/* Refused with an answer: the channel serves on. */
static void
t_r_sealed_refusals(void **st)
{
	struct sealed_secret *s = NULL;
	char why[KPROTO_WHY_MAX];
	uint8_t *blob;
	size_t len;

	blob = blob_of("tok", "value", NULL, 0, SEALED_KIND_HEADER, &len);
	blob[len - 3] ^= 0x40;
	assert_int_equal(kclient_sealed_open(blob, len, &s, why),
	    SL_ERR_INVALID);
	assert_null(s);
	assert_non_null(strstr(why, "does not open"));
	free(blob);
	/* Too short to be sent at all. */
	assert_int_equal(kclient_sealed_open((const uint8_t *)"SLUICESB", 8,
	    &s, why), SL_ERR_INVALID);

	blob = blob_of("sandbox-ca.x", "cakeyvalue", NULL, 0,
	    SEALED_KIND_HEADER, &len);
	assert_int_equal(kclient_sealed_open(blob, len, &s, why),
	    SL_ERR_DENIED);
	assert_null(s);
	assert_null(strstr(why, "cakeyvalue"));
	free(blob);

	blob = blob_of("tok", "value", NULL, 0, SEALED_KIND_HEADER, &len);
	assert_int_equal(kclient_sealed_open(blob, len, &s, why), 0);
	sealed_secret_free(s);
	free(blob);
	assert_server(0, KPROTO_START, 0);
}

static void
t_r_ca_new(void **st)
{
	static const char *const names[] = { "example.com", "*.example.org" };
	struct ca *ca = NULL;
	char *key = NULL;
	size_t klen;

	assert_int_equal(ca_new("sb-1", names, 2, DAY, &F.ca), 0);
	assert_non_null(F.ca);
	assert_is_ca(ca_cert(F.ca));
	/* Here, a handle and the certificate; the key is there. */
	assert_true(F.ca->remote != 0);
	assert_null(F.ca->key_der);
	assert_int_equal(ca_key_export(F.ca, &key, &klen), SL_ERR_DENIED);
	assert_null(key);
	assert_server(1, KPROTO_START, 0);

	/* Refused there (the configuration bounds it), or here. */
	assert_int_equal(ca_new("sb-2", NULL, 0, 8 * DAY, &ca), SL_ERR_INVALID);
	assert_int_equal(ca_new("bad/id", NULL, 0, DAY, &ca), SL_ERR_INVALID);
	assert_null(ca);
	assert_int_equal(ca_load("pem", 3, "key", 3, &ca), SL_ERR_DENIED);
	assert_server(1, KPROTO_START, 0);
}

static void
t_r_ca_seal_open(void **st)
{
	struct sealed_secret *s = NULL;
	char why[KPROTO_WHY_MAX], *pem;
	struct ca *other = NULL;
	size_t plen;

	assert_int_equal(ca_seal(F.ca, 1700000000, &F.ca_blob, &F.ca_blob_len,
	    why, sizeof(why)), 0);
	assert_true(F.ca_blob_len > SEALED_HEADER_LEN);
	assert_memory_equal(F.ca_blob, SEALED_MAGIC, 8);
	assert_non_null(pem = ca_cert_pem(F.ca, &plen));
	assert_int_equal(ca_open_sealed("sb-1", pem, plen, F.ca_blob,
	    F.ca_blob_len, &F.ca2, why, sizeof(why)), 0);
	assert_non_null(F.ca2);
	assert_int_equal(X509_cmp(ca_cert(F.ca), ca_cert(F.ca2)), 0);
	assert_true(F.ca2->remote != 0);
	assert_true(F.ca2->remote != F.ca->remote);
	assert_server(2, KPROTO_START, 0);

	/* Another sandbox's id does not open it. */
	assert_int_equal(ca_open_sealed("sb-2", pem, plen, F.ca_blob,
	    F.ca_blob_len, &other, why, sizeof(why)), SL_ERR_INVALID);
	assert_null(other);
	assert_non_null(strstr(why, "another sandbox"));
	/* Nor is it a secret the worker may open. */
	assert_int_equal(kclient_sealed_open(F.ca_blob, F.ca_blob_len, &s,
	    why), SL_ERR_DENIED);
	assert_null(s);
	free(pem);
	assert_server(2, KPROTO_START, 0);
}

static void
t_r_ready(void **st)
{
	char why[KPROTO_WHY_MAX];
	uint8_t fp[32], ph[32];

	assert_int_equal(kclient_ready(why), 0);
	assert_server(2, KPROTO_RUN, 0);
	/* The start's requests are refused here, never sent. */
	assert_int_equal(kclient_hello(why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "not sent"));
	assert_int_equal(kclient_store_keys(fp, ph, why), SL_ERR_INVALID);
	assert_int_equal(kclient_ready(why), SL_ERR_INVALID);
	assert_server(2, KPROTO_RUN, 0);
}

/* Sent anyway, on a channel of its own: no answer, the channel ends. */
static void
t_r_raw_violation(void **st)
{
	struct chan_hdr h;
	uint8_t ans[256];

	assert_int_equal(chan_send(F.raw, KPROTO_HELLO, 1, NULL, 0, -1), 0);
	assert_int_equal(chan_recv(F.raw, &h, ans, sizeof(ans), NULL, 10000),
	    0);
	assert_server(2, KPROTO_RUN, 1);
}

static void
t_r_mint(void **st)
{
	X509 *leaf = NULL;

	assert_int_equal(ca_mint_leaf(F.ca, "api.example.com", F.leafkey,
	    3600, &leaf), 0);
	assert_leaf_of(leaf, ca_cert(F.ca), F.leafkey, "api.example.com");
	X509_free(leaf);
	leaf = NULL;
	/* The CA opened from its sealed key signs with the same key. */
	assert_int_equal(ca_mint_leaf(F.ca2, "x.example.org", F.leafkey,
	    3600, &leaf), 0);
	assert_leaf_of(leaf, ca_cert(F.ca), F.leafkey, "x.example.org");
	X509_free(leaf);
	leaf = NULL;
	/* Refused here, before any request. */
	assert_int_equal(ca_mint_leaf(F.ca, "Bad..Host", F.leafkey, 3600,
	    &leaf), SL_ERR_INVALID);
	assert_null(leaf);
}

struct wjob {
	struct ca	*ca;
	int		 mint, make;
	X509		*leaf;
	struct ca	*made;
};

/* A worker thread, on its own channel. */
static void *
worker_main(void *arg)
{
	struct wjob *j = arg;

	kclient_bind(F.worker);
	j->mint = ca_mint_leaf(j->ca, "w.example.com", F.leafkey, 600,
	    &j->leaf);
	/* Not a worker's request: refused before it is sent. */
	j->make = ca_new("sb-w", NULL, 0, DAY, &j->made);
	kclient_bind(NULL);
	return NULL;
}

static void
t_r_worker(void **st)
{
	struct wjob j = { F.ca, -100, -100, NULL, NULL };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, worker_main, &j), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(j.mint, 0);
	assert_non_null(j.leaf);
	assert_leaf_of(j.leaf, ca_cert(F.ca), F.leafkey, "w.example.com");
	X509_free(j.leaf);
	assert_int_equal(j.make, SL_ERR_INVALID);
	assert_null(j.made);
	/* Nothing reached the server that it had to refuse. */
	assert_server(2, KPROTO_RUN, 1);
}

/* ca_free drops the CA there: a copy of its handle mints nothing. */
static void
t_r_drop(void **st)
{
	char why[KPROTO_WHY_MAX];
	struct ca *copy;
	X509 *leaf = NULL;
	uint8_t req[8], ans[KPROTO_WHY_MAX + 16];
	struct wire_w w;
	size_t n;

	assert_non_null(copy = calloc(1, sizeof(*copy)));
	copy->remote = F.ca->remote;
	assert_non_null(copy->cert = X509_dup(ca_cert(F.ca)));
	ca_free(F.ca);
	F.ca = NULL;
	assert_server(1, KPROTO_RUN, 1);
	assert_int_equal(ca_mint_leaf(copy, "api.example.com", F.leafkey,
	    3600, &leaf), SL_ERR_DENIED);
	assert_null(leaf);
	/* Dropped twice: not found, and still no violation. */
	wire_w_init(&w, req, sizeof(req));
	wire_u64(&w, copy->remote);
	assert_int_equal(kclient_call(KPROTO_CA_DROP, req, w.len, ans,
	    sizeof(ans), &n, why), SL_ERR_NOT_FOUND);
	X509_free(copy->cert);
	free(copy);
	/* The other CA still signs. */
	assert_int_equal(ca_mint_leaf(F.ca2, "api.example.com", F.leafkey,
	    3600, &leaf), 0);
	X509_free(leaf);
	ca_free(F.ca2);
	F.ca2 = NULL;
	assert_server(0, KPROTO_RUN, 1);
}

/* The worker's end closes: the server wipes and exits, cleanly. */
static void
t_r_end(void **st)
{
	char why[KPROTO_WHY_MAX];
	uint8_t ans[KPROTO_WHY_MAX + 16];
	struct ca *ca = NULL;
	int status, i;
	size_t n;

	kclient_stop();
	kchan_free(F.ctl);
	F.ctl = NULL;
	/* Still remote, but with no keys process to ask. */
	assert_true(kclient_remote());
	assert_int_not_equal(kclient_call(KPROTO_CA_DROP, "01234567", 8, ans,
	    sizeof(ans), &n, why), 0);
	assert_int_not_equal(ca_new("sb-9", NULL, 0, DAY, &ca), 0);
	assert_null(ca);
	kchan_free(F.worker);
	F.worker = NULL;
	close(F.probe);
	F.probe = -1;
	close(F.raw);
	F.raw = -1;
	for (i = 0; i < 1000; i++) {
		if (waitpid(F.child, &status, WNOHANG) == F.child)
			break;
		usleep(10000);
	}
	assert_true(i < 1000);
	F.child = -1;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the fixture ------------------------------------------------------ */

/* The key set on disk, and what a local store derives from it. */
static void
fixture(void)
{
	struct errlist errs = ERRLIST_INIT;
	struct secret_store *st = NULL;
	unsigned char *der = NULL;
	const char *why = NULL;
	int n;

	if (sodium_init() < 0)
		abort();
	snprintf(F.dir, sizeof(F.dir), "/tmp/sluice-test-kserve.XXXXXX");
	if (mkdtemp(F.dir) == NULL)
		abort();
	snprintf(F.keydir, sizeof(F.keydir), "%s/keys", F.dir);
	snprintf(F.secdir, sizeof(F.secdir), "%s/secrets", F.dir);
	snprintf(F.key, sizeof(F.key), "%s/gateway.key", F.keydir);
	snprintf(F.pub, sizeof(F.pub), "%s/gateway.pub", F.keydir);
	if (mkdir(F.keydir, 0700) != 0 || mkdir(F.secdir, 0700) != 0 ||
	    keys_generate(F.keydir, &why) != 0 ||
	    gwkey_load_pub(F.pub, F.pk, &why) != 0)
		abort();
	F.keys[0] = F.key;
	F.cfg.path = "test.yaml";
	F.cfg.gateway_keys = F.keys;
	F.cfg.ngateway_keys = 1;
	F.cfg.secret_dir = F.secdir;
	F.cfg.ca_validity_days = 7;
	snprintf(F.sign, sizeof(F.sign), "%s/signing.key", F.keydir);
	F.signs[0] = F.sign;
	F.cfg.signing_keys = F.signs;
	F.cfg.nsigning_keys = 1;
	F.cfg.signing_key = F.sign;
	F.cfg.token_ttl_ms = 60000;
	F.off.path = "off.yaml";
	F.off.ca_validity_days = 7;
	if (secret_store_new(&F.cfg, &st, &errs) != 0 || st == NULL)
		abort();
	memcpy(F.fpkey, st->fpkey, 32);
	memcpy(F.phkey, st->phkey, 32);
	secret_store_free(st);
	errlist_free(&errs);
	if (ca_new_leaf_key(&F.leafkey) != 0 ||
	    (n = i2d_PUBKEY(F.leafkey, &der)) <= 0)
		abort();
	F.spki = der;
	F.spki_len = (size_t)n;
}

static void
unfixture(void)
{
	char cmd[128];

	OPENSSL_free(F.spki);
	EVP_PKEY_free(F.leafkey);
	free(F.ca_blob);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", F.dir);
	if (system(cmd) != 0)
		abort();
}

int
main(void)
{
	const struct CMUnitTest local[] = {
		cmocka_unit_test_setup_teardown(t_hello, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_store_keys, l_setup,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_phases, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_roles, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_unknown, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_sealed_open, l_setup,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_sealed_refusals, l_setup,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_secrets_off, l_setup_off,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_ca_life, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_ca_refusals, l_setup,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_malformed, l_setup,
		    l_teardown),
		cmocka_unit_test_setup_teardown(t_cuts, l_setup, l_teardown),
		cmocka_unit_test_setup_teardown(t_tokens, l_setup, l_teardown),
		cmocka_unit_test(t_local_ca),
	};
	/* In order: each is a step of one worker's life. */
	const struct CMUnitTest remote[] = {
		cmocka_unit_test(t_r_hello),
		cmocka_unit_test(t_r_store_keys),
		cmocka_unit_test(t_r_store),
		cmocka_unit_test(t_r_sealed_open),
		cmocka_unit_test(t_r_sealed_refusals),
		cmocka_unit_test(t_r_ca_new),
		cmocka_unit_test(t_r_ca_seal_open),
		cmocka_unit_test(t_r_ready),
		cmocka_unit_test(t_r_raw_violation),
		cmocka_unit_test(t_r_mint),
		cmocka_unit_test(t_r_worker),
		cmocka_unit_test(t_r_drop),
		cmocka_unit_test(t_r_end),
	};
	int fails;

	fixture();
	/* Local first: remote mode, once on, stays on. */
	fails = cmocka_run_group_tests_name("kserve", local, NULL, NULL);
	fails += cmocka_run_group_tests_name("kclient", remote, r_setup,
	    r_teardown);
	unfixture();
	return fails;
}
