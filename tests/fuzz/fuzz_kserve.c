/*
 * fuzz_kserve.c: the keys process's handlers (kserve.c) fed what a
 * broken or hostile worker could send on its channels.
 *
 * The gateway key is fixed (made from the seed below and written once,
 * at start, to a file that is unlinked at once and read again through
 * /proc/self/fd, so that not even a crash leaves it behind), so that the
 * corpus can hold blobs sealed to it.  Each input runs on a kserve as
 * kserve_new and the first byte's steps leave it, so that it replays
 * alone: one such kserve a first byte is kept while inputs leave it as
 * they found it, and made again after one that moved its phase or
 * changed its CAs (or sent a request this file does not know, which may
 * change something).  Making one is slow (OpenSSL 3 decodes the key file
 * and makes a CA in milliseconds); most inputs change nothing.
 *
 * Input:
 *   byte 0   bit 0: secrets off (no gateway key); bit 1: a CA first, made
 *            by a CA_NEW built here (handle 1, "sb-fuzz", 1 day, names
 *            example.com and *.example.org); bit 2: READY first (after
 *            the CA)
 *   then up to MAX_MSGS records:
 *            1 byte   the channel's role: 1 << (b & 7) (ctl, worker, and
 *                     roles no channel has)
 *            2 bytes  the type (little-endian)
 *            2 bytes  the payload's length (little-endian; what is left
 *                     when it says more)
 *            the payload, handed over as the loop reads it: in a buffer
 *            of exactly its bytes
 *
 * Every request is handed over, even after a violation (which ends the
 * worker in sluiced): kserve must be whole whatever came before.  Checks
 * besides the sanitizers: a violation (-1) writes no answer, leaves the
 * answer buffer wiped and changes nothing; a request kproto_admit
 * refuses is a violation; an answer is OK or ERR, within CHAN_MSG_MAX;
 * an ERR is u32 code, str why and nothing more, and changes nothing; an
 * OK reads as kproto.h says for its row: READY moves the phase, CA_NEW
 * and CA_OPEN keep one more CA under a new, larger handle whose
 * certificate is a CA's, signed by its key (CA_OPEN refuses one that is
 * not, or is named for another sandbox), CA_DROP keeps one less, a leaf is signed by the key of
 * its handle's CA (and issued by its certificate, when that is a CA's),
 * and an opened secret is never a sandbox's CA key.
 *
 * Built with -DFUZZ_KSERVE_SEEDS and without -fsanitize=fuzzer, this file
 * writes the seed corpus instead (and checks that each seed's requests
 * are answered as the seed means them); from the build folder, with s the
 * source folder and the flags the build used (a sanitizer build needs its
 * -fsanitize flags on this line too):
 *
 *   cc -DFUZZ_KSERVE_SEEDS -I. -I$s/src $s/tests/fuzz/fuzz_kserve.c \
 *       libkeys.a libconf.a libparse.a libutil.a libllhttp.a \
 *       -lssl -lcrypto -lyaml -lsodium -ljansson -lidn2 -pthread \
 *       -o gen-kserve-seeds
 *   ./gen-kserve-seeds $s/tests/fuzz/corpus/kserve
 */
#include "autoconf.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/wire.h"
#include "conf/config.h"
#include "keys/kproto.h"
#include "keys/kserve.h"
#include "keys/sealed.h"
#include "fuzz_check.h"

#define MAX_MSGS	32
#define MAX_CAS		(MAX_MSGS + 1)
#define CA_PREFIX	"sandbox-ca."
#define SENTINEL_TYPE	0xdeadbeefu

#define F_SECRETS_OFF	0x1
#define F_CA		0x2
#define F_READY		0x4

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);


/* Exactly 32 characters: the gateway key's X25519 private key. */
static const uint8_t seed[32] = "sluice fuzz_kserve fixed key 01!";

/* The CAs an input made, as the answers gave them. */
struct cas {
	uint64_t	 handle[MAX_CAS];
	X509		*cert[MAX_CAS];
	int		 proper[MAX_CAS];	/* a CA certificate it signed */
	size_t		 n;
	uint64_t	 last;		/* the largest handle given */
};

/* A kserve as a first byte makes it, kept while inputs change nothing. */
struct slot {
	struct kserve	*ks;
	struct cas	 base;		/* the CA of F_CA */
};

/* Written once at start, as the fuzzer has no context to pass. */
static struct {
	char		 dir[64], key[96];	/* key: /proc/self/fd/N */
	char		*keys[1];
	struct config	 on, off;
	uint8_t		 pk[32];
	uint8_t		*ans;		/* CHAN_MSG_MAX, all zero between calls */
	uint8_t		*zero;		/* CHAN_MSG_MAX zero bytes */
	unsigned	 oks[KPROTO_NTYPES];	/* answers OK, by type (seeds) */
	struct slot	 slots[8];	/* by the first byte's three bits */
	int		 dirty;		/* the input changed its kserve */
} G;

static void cas_free(struct cas *);

static void
cleanup(void)
{
	size_t i;

	for (i = 0; i < sizeof(G.slots) / sizeof(G.slots[0]); i++) {
		kserve_free(G.slots[i].ks);
		cas_free(&G.slots[i].base);
	}
}

/* The fixed gateway key, as keys_generate would write it. */
static void
write_key(void)
{
	EVP_PKEY *k;
	size_t n = sizeof(G.pk);
	FILE *f;
	int fd;

	char path[128];
	int keep;

	snprintf(G.dir, sizeof(G.dir), "%s/sluice-fuzz-kserve.XXXXXX",
	    getenv("TMPDIR") != NULL && strlen(getenv("TMPDIR")) < 24 ?
	    getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(G.dir) != NULL);
	snprintf(path, sizeof(path), "%s/gateway.key", G.dir);
	CHECK((k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, seed,
	    sizeof(seed))) != NULL);
	CHECK(EVP_PKEY_get_raw_public_key(k, G.pk, &n) == 1 && n == 32);
	CHECK((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) != -1);
	CHECK((f = fdopen(fd, "w")) != NULL);
	CHECK(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
	CHECK(fclose(f) == 0);
	EVP_PKEY_free(k);
	CHECK((keep = open(path, O_RDONLY | O_CLOEXEC)) != -1);
	CHECK(unlink(path) == 0 && rmdir(G.dir) == 0);
	snprintf(G.key, sizeof(G.key), "/proc/self/fd/%d", keep);
	atexit(cleanup);
}

static void
init(void)
{
	if (G.ans != NULL)
		return;
	CHECK(sodium_init() >= 0);
	write_key();
	G.keys[0] = G.key;
	G.on.path = "fuzz.yaml";
	G.on.gateway_keys = G.keys;
	G.on.ngateway_keys = 1;
	/* Named, as kserve_new needs, but never read there. */
	G.on.secret_dir = G.dir;
	/* The most config.c takes: a seed's CA_OPEN stays valid a year. */
	G.on.ca_validity_days = 365;
	G.off.path = "fuzz-off.yaml";
	G.off.ca_validity_days = 365;
	CHECK((G.ans = calloc(1, CHAN_MSG_MAX)) != NULL);
	CHECK((G.zero = calloc(1, CHAN_MSG_MAX)) != NULL);
}

/* ---- what an answer must be ------------------------------------------- */

static X509 *
der_cert(const uint8_t *p, size_t len)
{
	const unsigned char *q = p;
	X509 *x;

	CHECK((x = d2i_X509(NULL, &q, (long)len)) != NULL);
	CHECK(q == p + len);
	return x;
}

/* A CA certificate, signed by its own key. */
static int
proper_ca(X509 *x)
{
	return X509_check_ca(x) >= 1 &&
	    X509_verify(x, X509_get0_pubkey(x)) == 1;
}

static void
check_error(const uint8_t *a, size_t len)
{
	char why[KPROTO_WHY_MAX];
	struct wire_r r;
	uint32_t code;

	wire_r_init(&r, a, len);
	code = wire_get_u32(&r);
	wire_get_str(&r, why, sizeof(why));
	CHECK(wire_done(&r) == 0);
	CHECK(code >= 1 && code <= 64);
	CHECK(why[0] != '\0');
}

static void
check_opened(const uint8_t *a, size_t len)
{
	char name[SEALED_NAME_MAX + 1], host[NAME_BUFSZ + 2];
	struct wire_r r;
	uint32_t kind, n, i;
	size_t klen, vlen;

	wire_r_init(&r, a, len);
	wire_get_str(&r, name, sizeof(name));
	kind = wire_get_u32(&r);
	(void)wire_get_u64(&r);
	(void)wire_get_u64(&r);
	(void)wire_get_bytes(&r, SEALED_KEYID_LEN, &klen);
	n = wire_get_u32(&r);
	CHECK(!r.bad && name[0] != '\0' && kind <= SEALED_KIND_MAX &&
	    klen == SEALED_KEYID_LEN && n <= SEALED_MAX_HOSTS);
	for (i = 0; i < n; i++)
		wire_get_str(&r, host, sizeof(host));
	(void)wire_get_bytes(&r, SEALED_MAX_DOC, &vlen);
	CHECK(wire_done(&r) == 0 && vlen >= 1);
	/* A sandbox's CA key stays in the keys process. */
	CHECK(strncmp(name, CA_PREFIX, sizeof(CA_PREFIX) - 1) != 0);
}

static void
cas_add(struct cas *c, const uint8_t *a, size_t len, int made)
{
	const uint8_t *der;
	struct wire_r r;
	uint64_t h;
	size_t n;

	wire_r_init(&r, a, len);
	h = wire_get_u64(&r);
	der = wire_get_bytes(&r, KPROTO_CERT_MAX, &n);
	CHECK(wire_done(&r) == 0);
	/* Handles are never given twice. */
	CHECK(h > c->last);
	c->last = h;
	CHECK(c->n < MAX_CAS);
	c->handle[c->n] = h;
	c->cert[c->n] = der_cert(der, n);
	c->proper[c->n] = proper_ca(c->cert[c->n]);
	/*
	 * CA_NEW makes a CA certificate; CA_OPEN takes only one its key
	 * signed, a CA, named for the sandbox (ca_load, h_ca_open).
	 */
	if (made)
		CHECK(c->proper[c->n]);
	c->n++;
}

static size_t
cas_find(const struct cas *c, uint64_t h)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->handle[i] == h)
			return i;
	return SIZE_MAX;
}

static void
cas_drop(struct cas *c, uint64_t h)
{
	size_t i = cas_find(c, h);

	CHECK(i != SIZE_MAX);
	X509_free(c->cert[i]);
	c->n--;
	c->handle[i] = c->handle[c->n];
	c->cert[i] = c->cert[c->n];
	c->proper[i] = c->proper[c->n];
}

static void
cas_free(struct cas *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		X509_free(c->cert[i]);
	c->n = 0;
}

static uint64_t
first_u64(const uint8_t *p, size_t len)
{
	struct wire_r r;

	wire_r_init(&r, p, len);
	return wire_get_u64(&r);
}

/* An OK answer to type, as its row says; what it changed. */
static void
check_ok(struct kserve *ks, struct cas *c, uint32_t type, const uint8_t *p,
    size_t plen, const uint8_t *a, size_t len, size_t cas_before)
{
	const unsigned char *der;
	const uint8_t *b;
	struct wire_r r;
	X509 *leaf;
	size_t n, m, i;

	wire_r_init(&r, a, len);
	switch (type) {
	case KPROTO_HELLO:
		CHECK(wire_get_u32(&r) == KPROTO_VERSION);
		CHECK(wire_done(&r) == 0);
		break;
	case KPROTO_STORE_KEYS:
		(void)wire_get_bytes(&r, 32, &n);
		(void)wire_get_bytes(&r, 32, &m);
		CHECK(wire_done(&r) == 0 && n == 32 && m == 32);
		break;
	case KPROTO_READY:
		CHECK(len == 0);
		CHECK(kserve_phase(ks) == KPROTO_RUN);
		break;
	case KPROTO_SEALED_OPEN:
		check_opened(a, len);
		break;
	case KPROTO_CA_NEW:
	case KPROTO_CA_OPEN:
		CHECK(kserve_cas(ks) == cas_before + 1);
		cas_add(c, a, len, 1);
		break;
	case KPROTO_CA_SEAL:
		b = wire_get_bytes(&r, KPROTO_SEALED_CA_MAX, &n);
		CHECK(wire_done(&r) == 0);
		CHECK(n > SEALED_HEADER_LEN &&
		    memcmp(b, SEALED_MAGIC, 8) == 0);
		break;
	case KPROTO_CA_DROP:
		CHECK(len == 0);
		CHECK(kserve_cas(ks) == cas_before - 1);
		cas_drop(c, first_u64(p, plen));
		break;
	case KPROTO_LEAF_MINT:
		b = wire_get_bytes(&r, KPROTO_CERT_MAX, &n);
		CHECK(wire_done(&r) == 0);
		der = b;
		CHECK((leaf = d2i_X509(NULL, &der, (long)n)) != NULL);
		CHECK((i = cas_find(c, first_u64(p, plen))) != SIZE_MAX);
		/* Signed by the CA's key, whatever certificate came with it. */
		CHECK(X509_verify(leaf, X509_get0_pubkey(c->cert[i])) == 1);
		if (c->proper[i])
			CHECK(X509_check_issued(c->cert[i], leaf) == X509_V_OK);
		CHECK(X509_check_ca(leaf) == 0);
		X509_free(leaf);
		break;
	default:
		/* A row added later: only what every answer is. */
		break;
	}
	if (type != KPROTO_CA_NEW && type != KPROTO_CA_OPEN &&
	    type != KPROTO_CA_DROP)
		CHECK(kserve_cas(ks) == cas_before);
}

/* One request, as the keys process's loop hands it over. */
static void
one(struct kserve *ks, struct cas *c, unsigned role, uint32_t type,
    const uint8_t *p, size_t len)
{
	struct chan_hdr h = { type, (uint32_t)len, 1 };
	enum kproto_phase phase = kserve_phase(ks);
	size_t cas = kserve_cas(ks), alen = SIZE_MAX;
	uint32_t atype = SENTINEL_TYPE;
	const struct kproto_row *row;
	const char *why = NULL, *w;
	uint8_t *req;
	int r;

	CHECK(len <= CHAN_MSG_MAX);
	CHECK((req = malloc(len > 0 ? len : 1)) != NULL);
	if (len > 0)
		memcpy(req, p, len);
	row = kproto_admit(type, len, role, phase, &w);
	r = kserve_handle(ks, role, &h, req, &atype, G.ans, &alen, &why);
	if (r != 0) {
		CHECK(r == -1);
		CHECK(why != NULL);
		CHECK(atype == SENTINEL_TYPE && alen == SIZE_MAX);
		CHECK(memcmp(G.ans, G.zero, CHAN_MSG_MAX) == 0);
		CHECK(kserve_cas(ks) == cas && kserve_phase(ks) == phase);
		free(req);
		return;
	}
	CHECK(row != NULL);
	CHECK(alen <= CHAN_MSG_MAX);
	/* Answered: only these leave a kserve as they found it. */
	if (type != KPROTO_HELLO && type != KPROTO_STORE_KEYS &&
	    type != KPROTO_SEALED_OPEN && type != KPROTO_CA_SEAL &&
	    type != KPROTO_LEAF_MINT)
		G.dirty = 1;
	if (atype == KPROTO_ERR) {
		check_error(G.ans, alen);
		CHECK(kserve_cas(ks) == cas && kserve_phase(ks) == phase);
	} else {
		CHECK(atype == KPROTO_OK);
		check_ok(ks, c, type, req, len, G.ans, alen, cas);
		if (type < KPROTO_NTYPES)
			G.oks[type]++;
	}
	/* Sent: the caller wipes it, an opened secret's value is in it. */
	sodium_memzero(G.ans, alen);
	free(req);
}

/* The CA_NEW of flag F_CA. */
static void
first_ca(struct kserve *ks, struct cas *c)
{
	static const char *const names[] = { "example.com", "*.example.org" };
	uint8_t b[128];
	struct wire_w w;
	size_t i;

	wire_w_init(&w, b, sizeof(b));
	wire_str(&w, "sb-fuzz");
	wire_u32(&w, 86400);
	wire_u32(&w, 2);
	for (i = 0; i < 2; i++)
		wire_str(&w, names[i]);
	CHECK(!w.over);
	one(ks, c, KPROTO_FROM_CTL, KPROTO_CA_NEW, b, w.len);
	CHECK(c->n == 1 && c->handle[0] == 1);
}

/* The kserve of flags, made as kserve_new and the flags' steps leave it. */
static struct slot *
slot_get(uint8_t flags)
{
	struct slot *sl = &G.slots[flags & 7];
	struct errlist errs = ERRLIST_INIT;

	if (sl->ks != NULL)
		return sl;
	CHECK(kserve_new(flags & F_SECRETS_OFF ? &G.off : &G.on, &sl->ks,
	    &errs) == 0);
	errlist_free(&errs);
	memset(&sl->base, 0, sizeof(sl->base));
	if (flags & F_CA)
		first_ca(sl->ks, &sl->base);
	if (flags & F_READY)
		one(sl->ks, &sl->base, KPROTO_FROM_CTL, KPROTO_READY, NULL, 0);
	return sl;
}

static void
slot_drop(struct slot *sl)
{
	kserve_free(sl->ks);
	sl->ks = NULL;
	cas_free(&sl->base);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	unsigned flags;

	init();
	/* Every kserve now, for the same reason. */
	for (flags = 0; flags < 8; flags++)
		(void)slot_get((uint8_t)flags);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct slot *sl;
	struct cas c;
	size_t off, len, msgs, i;
	unsigned role;
	uint32_t type;

	init();
	if (n < 1)
		return 0;
	sl = slot_get(d[0]);
	/* The input's own copy of the CAs there are. */
	c = sl->base;
	for (i = 0; i < c.n; i++)
		CHECK(X509_up_ref(c.cert[i]) == 1);
	G.dirty = 0;
	for (off = 1, msgs = 0; off + 5 <= n && msgs < MAX_MSGS; msgs++) {
		role = 1u << (d[off] & 7);
		type = (uint32_t)d[off + 1] | (uint32_t)d[off + 2] << 8;
		len = (size_t)d[off + 3] | (size_t)d[off + 4] << 8;
		off += 5;
		if (len > n - off)
			len = n - off;
		one(sl->ks, &c, role, type, d + off, len);
		off += len;
	}
	CHECK(kserve_cas(sl->ks) == c.n);
	cas_free(&c);
	/*
	 * Made again now, not at the next input: libFuzzer runs an input
	 * that mallocs more than it frees again under LeakSanitizer, which
	 * is slow with a heap this size.
	 */
	if (G.dirty) {
		slot_drop(sl);
		(void)slot_get(d[0]);
	}
	/*
	 * The same for what OpenSSL keeps of this thread: errors a refused
	 * request left on the queue (kserve does not clear them; the queue
	 * is bounded) and their strings.
	 */
	OPENSSL_thread_stop();
	return 0;
}

#ifdef FUZZ_KSERVE_SEEDS
/* A seed being built: flags, then records. */
struct sb {
	uint8_t		 b[CHAN_MSG_MAX];
	size_t		 len;
};

static void
sb_start(struct sb *s, uint8_t flags)
{
	s->b[0] = flags;
	s->len = 1;
}

static void
sb_add(struct sb *s, unsigned rolebit, uint32_t type, const void *p,
    size_t len)
{
	CHECK(len <= 0xffff && s->len + 5 + len <= sizeof(s->b));
	s->b[s->len++] = (uint8_t)rolebit;
	s->b[s->len++] = (uint8_t)type;
	s->b[s->len++] = (uint8_t)(type >> 8);
	s->b[s->len++] = (uint8_t)len;
	s->b[s->len++] = (uint8_t)(len >> 8);
	if (len > 0)
		memcpy(s->b + s->len, p, len);
	s->len += len;
}

#define ROLE_CTL	0	/* 1 << 0 */
#define ROLE_WORKER	1	/* 1 << 1 */

/*
 * Runs s through the target, as a fresh process would, and writes it
 * once it got the OK answers to type it was meant to get.
 */
static void
sb_write(const char *dir, const char *name, const struct sb *s,
    uint32_t type, unsigned oks)
{
	unsigned before;
	char path[4096];
	size_t i;
	FILE *f;

	for (i = 0; i < sizeof(G.slots) / sizeof(G.slots[0]); i++)
		slot_drop(&G.slots[i]);
	before = G.oks[type];
	LLVMFuzzerTestOneInput(s->b, s->len);
	if (G.oks[type] - before != oks) {
		fprintf(stderr, "%s: %u answers to %u, not %u\n", name,
		    G.oks[type] - before, type, oks);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite(s->b, 1, s->len, f) != s->len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static size_t
blob_req(uint8_t *b, size_t cap, const char *name, const char *value,
    const char *const *hosts, size_t nhosts, enum sealed_kind kind)
{
	struct sealed_in in = { name, 2, 1700000000, hosts, nhosts,
	    (const uint8_t *)value, strlen(value), kind };
	const char *why = NULL;
	struct wire_w w;
	uint8_t *blob;
	size_t len;

	if (sealed_seal(G.pk, &in, &blob, &len, &why) != 0) {
		fprintf(stderr, "%s: %s\n", name, why);
		exit(1);
	}
	wire_w_init(&w, b, cap);
	wire_bytes(&w, blob, len);
	free(blob);
	CHECK(!w.over);
	return w.len;
}

static size_t
ca_new_req(uint8_t *b, size_t cap, const char *id, uint32_t validity,
    const char *const *names, uint32_t n)
{
	struct wire_w w;
	uint32_t i;

	wire_w_init(&w, b, cap);
	wire_str(&w, id);
	wire_u32(&w, validity);
	wire_u32(&w, n);
	for (i = 0; i < n; i++)
		wire_str(&w, names[i]);
	CHECK(!w.over);
	return w.len;
}

static size_t
u64s_req(uint8_t *b, uint64_t x, int two, uint64_t y)
{
	struct wire_w w;

	wire_w_init(&w, b, 16);
	wire_u64(&w, x);
	if (two)
		wire_u64(&w, y);
	return w.len;
}

static size_t
leaf_req(uint8_t *b, size_t cap, uint64_t h, uint32_t validity,
    const char *host, const uint8_t *spki, size_t slen)
{
	struct wire_w w;

	wire_w_init(&w, b, cap);
	wire_u64(&w, h);
	wire_u32(&w, validity);
	wire_str(&w, host);
	wire_bytes(&w, spki, slen);
	CHECK(!w.over);
	return w.len;
}

/*
 * A CA_OPEN request of a CA made and sealed by a kserve of the fixed key:
 * its certificate as PEM and its sealed key.
 */
static size_t
ca_open_req(uint8_t *out, size_t cap, const char *id)
{
	struct errlist errs = ERRLIST_INIT;
	struct chan_hdr h;
	struct kserve *ks = NULL;
	const uint8_t *der, *blob;
	const unsigned char *q;
	uint8_t req[64], *a1, *a2;
	const char *why;
	struct wire_r r;
	struct wire_w w;
	uint32_t type;
	size_t len, dlen, blen;
	char *pem;
	BIO *bio;
	X509 *x;
	long plen;

	CHECK((a1 = calloc(1, CHAN_MSG_MAX)) != NULL);
	CHECK((a2 = calloc(1, CHAN_MSG_MAX)) != NULL);
	CHECK(kserve_new(&G.on, &ks, &errs) == 0);
	h = (struct chan_hdr){ KPROTO_CA_NEW, 0, 1 };
	h.len = (uint32_t)ca_new_req(req, sizeof(req), id, 365 * 86400, NULL,
	    0);
	CHECK(kserve_handle(ks, KPROTO_FROM_CTL, &h, req, &type, a1, &len,
	    &why) == 0 && type == KPROTO_OK);
	wire_r_init(&r, a1, len);
	CHECK(wire_get_u64(&r) == 1);
	der = wire_get_bytes(&r, KPROTO_CERT_MAX, &dlen);
	CHECK(wire_done(&r) == 0);
	h = (struct chan_hdr){ KPROTO_CA_SEAL, 16, 2 };
	u64s_req(req, 1, 1, 1700000000);
	CHECK(kserve_handle(ks, KPROTO_FROM_CTL, &h, req, &type, a2, &len,
	    &why) == 0 && type == KPROTO_OK);
	wire_r_init(&r, a2, len);
	blob = wire_get_bytes(&r, KPROTO_SEALED_CA_MAX, &blen);
	CHECK(wire_done(&r) == 0);
	q = der;
	CHECK((x = d2i_X509(NULL, &q, (long)dlen)) != NULL);
	CHECK((bio = BIO_new(BIO_s_mem())) != NULL);
	CHECK(PEM_write_bio_X509(bio, x) == 1);
	CHECK((plen = BIO_get_mem_data(bio, &pem)) > 0);
	wire_w_init(&w, out, cap);
	wire_str(&w, id);
	wire_bytes(&w, pem, (size_t)plen);
	wire_bytes(&w, blob, blen);
	CHECK(!w.over);
	BIO_free(bio);
	X509_free(x);
	kserve_free(ks);
	errlist_free(&errs);
	free(a1);
	free(a2);
	return w.len;
}

int
main(int argc, char **argv)
{
	static const char *const one_host[] = { "api.example.com" };
	static const char *const hosts[] = { "API.Example.com",
	    "*.example.org", "b\303\274cher.example" };
	static const char *const names[] = { "example.com", "*.example.org" };
	static const char longhost[] = "a-host-name-longer-than-sixty-four-"
	    "characters-for-a-common-name.example.com";
	static struct sb s;
	uint8_t m[8192], *spki = NULL;
	EVP_PKEY *leafkey;
	size_t len;
	int slen;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	init();
	CHECK((leafkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) !=
	    NULL);
	CHECK((slen = i2d_PUBKEY(leafkey, &spki)) > 0);

	/* The start, then one of the start's requests too late. */
	sb_start(&s, 0);
	sb_add(&s, ROLE_CTL, KPROTO_HELLO, NULL, 0);
	sb_add(&s, ROLE_CTL, KPROTO_STORE_KEYS, NULL, 0);
	sb_add(&s, ROLE_CTL, KPROTO_READY, NULL, 0);
	sb_add(&s, ROLE_CTL, KPROTO_HELLO, NULL, 0);
	sb_write(argv[1], "start", &s, KPROTO_READY, 1);

	sb_start(&s, 0);
	len = blob_req(m, sizeof(m), "api-token", "ghp_0123456789abcdefghij",
	    one_host, 1, SEALED_KIND_HEADER);
	sb_add(&s, ROLE_CTL, KPROTO_SEALED_OPEN, m, len);
	len = blob_req(m, sizeof(m), "gh.pat_2", "Bearer eyJhbGciOiJIUzI1NiJ9",
	    hosts, 3, SEALED_KIND_HEADER);
	sb_add(&s, ROLE_CTL, KPROTO_SEALED_OPEN, m, len);
	sb_write(argv[1], "sealed-open", &s, KPROTO_SEALED_OPEN, 2);

	sb_start(&s, F_READY);
	len = blob_req(m, sizeof(m), "aws", "{\"access_key_id\": \"AKID\"}",
	    NULL, 0, SEALED_KIND_JSON);
	sb_add(&s, ROLE_CTL, KPROTO_SEALED_OPEN, m, len);
	sb_write(argv[1], "sealed-open-json", &s, KPROTO_SEALED_OPEN, 1);

	/* A sandbox's CA key, refused. */
	sb_start(&s, 0);
	len = blob_req(m, sizeof(m), "sandbox-ca.sb-seed", "a2V5", NULL, 0,
	    SEALED_KIND_HEADER);
	sb_add(&s, ROLE_CTL, KPROTO_SEALED_OPEN, m, len);
	sb_write(argv[1], "sealed-open-ca", &s, KPROTO_SEALED_OPEN, 0);

	/* A CA's life from the control thread. */
	sb_start(&s, 0);
	len = ca_new_req(m, sizeof(m), "sb-seed", 86400, names, 2);
	sb_add(&s, ROLE_CTL, KPROTO_CA_NEW, m, len);
	sb_add(&s, ROLE_CTL, KPROTO_CA_SEAL, m, u64s_req(m, 1, 1, 1700000000));
	sb_add(&s, ROLE_CTL, KPROTO_READY, NULL, 0);
	len = leaf_req(m, sizeof(m), 1, 3600, "api.example.com", spki,
	    (size_t)slen);
	sb_add(&s, ROLE_CTL, KPROTO_LEAF_MINT, m, len);
	sb_add(&s, ROLE_CTL, KPROTO_CA_DROP, m, u64s_req(m, 1, 0, 0));
	sb_write(argv[1], "ca-new", &s, KPROTO_CA_NEW, 1);

	/* A CA opened again from its sealed key, then a worker's leaf. */
	sb_start(&s, 0);
	len = ca_open_req(m, sizeof(m), "sb-seed");
	sb_add(&s, ROLE_CTL, KPROTO_CA_OPEN, m, len);
	sb_add(&s, ROLE_CTL, KPROTO_READY, NULL, 0);
	len = leaf_req(m, sizeof(m), 1, 86400, "www.example.com", spki,
	    (size_t)slen);
	sb_add(&s, ROLE_WORKER, KPROTO_LEAF_MINT, m, len);
	sb_write(argv[1], "ca-open", &s, KPROTO_CA_OPEN, 1);

	/* A worker thread's requests: leaves, a long host, a drop. */
	sb_start(&s, F_CA | F_READY);
	len = leaf_req(m, sizeof(m), 1, 600, "api.example.com", spki,
	    (size_t)slen);
	sb_add(&s, ROLE_WORKER, KPROTO_LEAF_MINT, m, len);
	len = leaf_req(m, sizeof(m), 1, 600, longhost, spki, (size_t)slen);
	sb_add(&s, ROLE_WORKER, KPROTO_LEAF_MINT, m, len);
	sb_add(&s, ROLE_WORKER, KPROTO_CA_DROP, m, u64s_req(m, 1, 0, 0));
	len = leaf_req(m, sizeof(m), 1, 600, "api.example.com", spki,
	    (size_t)slen);
	sb_add(&s, ROLE_WORKER, KPROTO_LEAF_MINT, m, len);
	sb_write(argv[1], "leaf-mint", &s, KPROTO_LEAF_MINT, 2);

	/* Sealing a CA kept here; sealing and dropping what is not. */
	sb_start(&s, F_CA);
	sb_add(&s, ROLE_CTL, KPROTO_CA_SEAL, m, u64s_req(m, 1, 1, 0));
	sb_add(&s, ROLE_CTL, KPROTO_CA_SEAL, m, u64s_req(m, 2, 1, 0));
	sb_add(&s, ROLE_CTL, KPROTO_CA_DROP, m, u64s_req(m, 2, 0, 0));
	sb_write(argv[1], "ca-seal", &s, KPROTO_CA_SEAL, 1);

	/* Secrets off: refusals, and a CA all the same. */
	sb_start(&s, F_SECRETS_OFF | F_CA);
	sb_add(&s, ROLE_CTL, KPROTO_STORE_KEYS, NULL, 0);
	len = blob_req(m, sizeof(m), "tok", "value", NULL, 0,
	    SEALED_KIND_HEADER);
	sb_add(&s, ROLE_CTL, KPROTO_SEALED_OPEN, m, len);
	sb_add(&s, ROLE_CTL, KPROTO_CA_SEAL, m, u64s_req(m, 1, 1, 0));
	sb_write(argv[1], "secrets-off", &s, KPROTO_CA_NEW, 1);

	/* Violations: the wrong role, phase and type, fields that do not read. */
	sb_start(&s, F_CA);
	len = ca_new_req(m, sizeof(m), "sb-w", 86400, NULL, 0);
	sb_add(&s, ROLE_WORKER, KPROTO_CA_NEW, m, len);
	len = leaf_req(m, sizeof(m), 1, 600, "api.example.com", spki,
	    (size_t)slen);
	sb_add(&s, ROLE_WORKER, KPROTO_LEAF_MINT, m, len);
	sb_add(&s, ROLE_CTL, 0x7777, "x", 1);
	sb_add(&s, ROLE_CTL, KPROTO_CA_NEW, "\x03\0\0\0a\0b\x80\x51\x01\0\0\0\0\0",
	    15);
	sb_write(argv[1], "violations", &s, KPROTO_CA_NEW, 1);

	OPENSSL_free(spki);
	EVP_PKEY_free(leafkey);
	return 0;
}
#endif
