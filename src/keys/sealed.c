/*
 * sealed.c: sealed secrets (libsodium sealed boxes behind a clear header)
 * and the gateway keys that open them, as PEM files OpenSSL writes.
 */
#include "autoconf.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/keyfile.h"
#include "util/names.h"
#include "keys/pemkey.h"
#include "keys/kclient.h"
#include "keys/sealed.h"

#define X25519_LEN	32
#define WHY_BUFSZ	128		/* sealed_open's why_buf, as promised */
#define KEYID_OFF	9		/* in the header */
#define NKEYFILES	4
/* The smallest payload: a 1-byte name, no hosts, a 1-byte value. */
#define PAYLOAD_MIN	(1 + SEALED_KEYID_LEN + 8 + 8 + 1 + 1 + 1 + 2 + 1)
#define BLOB_MIN	(SEALED_HEADER_LEN + crypto_box_SEALBYTES + PAYLOAD_MIN)

/* libsodium is started by the programs; this only makes sure of it. */
static int
sodium_ready(const char **why)
{
	if (sodium_init() < 0) {
		*why = "libsodium cannot start";
		return SL_ERR_INTERNAL;
	}
	return 0;
}

/* Decodes a PEM X25519 key, private (PKCS#8) or public (SPKI). */
static int
pem_x25519(const uint8_t *pem, size_t len, int private, EVP_PKEY **out,
    const char **why)
{
	EVP_PKEY *pkey;
	int r;

	if ((r = keyfile_pem(pem, len, private, &pkey, why)) != 0)
		return r;
	if (!EVP_PKEY_is_a(pkey, "X25519")) {
		EVP_PKEY_free(pkey);
		*why = "not an X25519 key";
		return SL_ERR_INVALID;
	}
	*out = pkey;
	return 0;
}

void
gwkey_id(const uint8_t pk[32], uint8_t id[SEALED_KEYID_LEN])
{
	uint8_t h[32];

	crypto_generichash(h, sizeof(h), pk, X25519_LEN, NULL, 0);
	memcpy(id, h, SEALED_KEYID_LEN);
}

/* Moves the raw key pair out of pkey into k, the private half guarded. */
static int
gwkey_fill(struct gwkey *k, EVP_PKEY *pkey)
{
	size_t n = X25519_LEN;

	if ((k->sk = secmem_alloc(X25519_LEN)) == NULL)
		return SL_ERR_NOMEM;
	if (EVP_PKEY_get_raw_private_key(pkey, k->sk, &n) != 1 ||
	    n != X25519_LEN)
		return SL_ERR_INVALID;
	n = X25519_LEN;
	if (EVP_PKEY_get_raw_public_key(pkey, k->pk, &n) != 1 ||
	    n != X25519_LEN)
		return SL_ERR_INVALID;
	if (sodium_mprotect_noaccess(k->sk) != 0)
		return SL_ERR_INTERNAL;
	gwkey_id(k->pk, k->id);
	sodium_bin2hex(k->idhex, sizeof(k->idhex), k->id, sizeof(k->id));
	return 0;
}

int
gwkey_load(const char *path, struct gwkey **out, const char **why)
{
	struct gwkey *k = NULL;
	EVP_PKEY *pkey = NULL;
	uint8_t *pem = NULL;
	const char *w = NULL;
	size_t len;
	int r;

	if (kclient_remote()) {
		r = SL_ERR_DENIED;
		w = "a worker process holds no gateway key";
		goto out;
	}
	if ((r = sodium_ready(&w)) != 0)
		goto out;
	if ((r = keyfile_read(path, 1, &pem, &len, &w)) != 0)
		goto out;
	if ((r = pem_x25519(pem, len, 1, &pkey, &w)) != 0)
		goto out;
	r = SL_ERR_NOMEM;
	w = "out of memory";
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->path = strdup(path)) == NULL)
		goto out;
	if ((r = gwkey_fill(k, pkey)) != 0) {
		w = r == SL_ERR_NOMEM ? "out of locked memory" :
		    "not a usable X25519 key";
		goto out;
	}
	*out = k;
	k = NULL;	/* transferred */
	r = 0;
 out:
	EVP_PKEY_free(pkey);	/* OpenSSL wipes its copy */
	ERR_clear_error();
	gwkey_free(k);
	secmem_free(pem);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

void
gwkey_free(struct gwkey *k)
{
	if (k == NULL)
		return;
	secmem_free(k->sk);
	free(k->path);
	free(k);
}

int
gwkey_load_pub(const char *path, uint8_t pk[32], const char **why)
{
	EVP_PKEY *pkey = NULL;
	uint8_t *pem = NULL, raw[X25519_LEN];
	const char *w = NULL;
	size_t len, n = sizeof(raw);
	int r;

	/* Guarded memory: the file named may be a private key by mistake. */
	if ((r = keyfile_read(path, 0, &pem, &len, &w)) != 0)
		goto out;
	if ((r = pem_x25519(pem, len, 0, &pkey, &w)) != 0)
		goto out;
	if (EVP_PKEY_get_raw_public_key(pkey, raw, &n) != 1 ||
	    n != sizeof(raw)) {
		r = SL_ERR_INVALID;
		w = "not a usable X25519 key";
		goto out;
	}
	memcpy(pk, raw, sizeof(raw));
	r = 0;
 out:
	EVP_PKEY_free(pkey);
	ERR_clear_error();
	secmem_free(pem);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

/*
 * Key generation.  Every file is encoded in memory first and created
 * with O_EXCL; if any exists or any write fails, the ones made here are
 * removed, so a key set is written whole or not at all.
 */
struct keyfile {
	const char	*name;
	mode_t		 mode;
	BIO		*pem;
	int		 fd;
	int		 created;	/* by us, so ours to remove */
};

/* Frees a memory BIO, wiping what it held. */
static void
bio_wipe_free(BIO *b)
{
	char *p;
	long n;

	if (b == NULL)
		return;
	if ((n = BIO_get_mem_data(b, &p)) > 0)
		OPENSSL_cleanse(p, (size_t)n);
	BIO_free(b);
}

/* PEM of pkey: PKCS#8, unencrypted (private) or SPKI (public). */
static int
pem_encode(EVP_PKEY *pkey, int private, BIO **out)
{
	BIO *b;
	int ok;

	/* secmem: the buffer is cleared as it grows and when freed. */
	if ((b = BIO_new(private ? BIO_s_secmem() : BIO_s_mem())) == NULL)
		return SL_ERR_NOMEM;
	if (private)
		ok = PEM_write_bio_PrivateKey(b, pkey, NULL, NULL, 0, NULL,
		    NULL);
	else
		ok = PEM_write_bio_PUBKEY(b, pkey);
	if (ok != 1) {
		bio_wipe_free(b);
		return SL_ERR_INTERNAL;
	}
	*out = b;
	return 0;
}

static int
write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return SL_ERR_IO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Closes what is open and removes what was created of kf[0..n). */
static void
unlink_created(int dfd, struct keyfile *kf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (kf[i].fd != -1)
			close(kf[i].fd);
		kf[i].fd = -1;
		if (kf[i].created)
			unlinkat(dfd, kf[i].name, 0);
		kf[i].created = 0;
	}
}

/* Creates every file or none; nothing existing is touched. */
static int
create_all(int dfd, struct keyfile *kf, size_t n, const char **why)
{
	size_t i;
	int saved;

	for (i = 0; i < n; i++) {
		kf[i].fd = openat(dfd, kf[i].name, O_WRONLY | O_CREAT |
		    O_EXCL | O_NOFOLLOW | O_CLOEXEC, kf[i].mode);
		if (kf[i].fd == -1) {
			saved = errno;
			unlink_created(dfd, kf, i);
			errno = saved;
			*why = saved == EEXIST ? "a key file is already there" :
			    "cannot create a key file";
			return saved == EEXIST ? SL_ERR_EXISTS : SL_ERR_IO;
		}
		kf[i].created = 1;
	}
	return 0;
}

/* Writes, syncs and closes each file; the mode is set whatever umask. */
static int
write_all(int dfd, struct keyfile *kf, size_t n, const char **why)
{
	char *data;
	long len;
	size_t i;
	int fd;

	for (i = 0; i < n; i++) {
		if ((len = BIO_get_mem_data(kf[i].pem, &data)) <= 0) {
			*why = "cannot encode a key";
			return SL_ERR_INTERNAL;
		}
		*why = "cannot write a key file";
		if (fchmod(kf[i].fd, kf[i].mode) != 0 ||
		    write_full(kf[i].fd, data, (size_t)len) != 0 ||
		    fsync(kf[i].fd) != 0)
			return SL_ERR_IO;
	}
	for (i = 0; i < n; i++) {
		fd = kf[i].fd;
		kf[i].fd = -1;
		if (close(fd) != 0)
			return SL_ERR_IO;
	}
	if (fsync(dfd) != 0)
		return SL_ERR_IO;
	return 0;
}

/* The two key pairs as PEM, in kf's order. */
static int
encode_keys(struct keyfile *kf, const char **why)
{
	EVP_PKEY *gw = NULL, *sg = NULL;
	int r = SL_ERR_INTERNAL;

	*why = "cannot generate the keys";
	if ((gw = EVP_PKEY_Q_keygen(NULL, NULL, "X25519")) == NULL ||
	    (sg = EVP_EC_gen("P-256")) == NULL)
		goto out;
	*why = "cannot encode the keys";
	if ((r = pem_encode(gw, 1, &kf[0].pem)) != 0 ||
	    (r = pem_encode(gw, 0, &kf[1].pem)) != 0 ||
	    (r = pem_encode(sg, 1, &kf[2].pem)) != 0 ||
	    (r = pem_encode(sg, 0, &kf[3].pem)) != 0)
		goto out;
	r = 0;
 out:
	EVP_PKEY_free(gw);
	EVP_PKEY_free(sg);
	ERR_clear_error();
	return r;
}

int
keys_generate(const char *dir, const char **why)
{
	struct keyfile kf[NKEYFILES] = {
		{ "gateway.key", 0600, NULL, -1, 0 },
		{ "gateway.pub", 0644, NULL, -1, 0 },
		{ "signing.key", 0600, NULL, -1, 0 },
		{ "signing.pub", 0644, NULL, -1, 0 },
	};
	const char *w = NULL;
	size_t i;
	int dfd = -1, saved, r;

	if ((r = encode_keys(kf, &w)) != 0)
		goto out;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		r = SL_ERR_IO;
		w = "cannot open the directory";
		goto out;
	}
	if ((r = create_all(dfd, kf, NKEYFILES, &w)) != 0)
		goto out;
	r = write_all(dfd, kf, NKEYFILES, &w);
 out:
	saved = errno;
	if (dfd != -1 && r != 0)
		unlink_created(dfd, kf, NKEYFILES);
	for (i = 0; i < NKEYFILES; i++)
		bio_wipe_free(kf[i].pem);
	if (dfd != -1)
		close(dfd);
	errno = saved;
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

/*
 * The payload.  A writer and a reader with bounds: the writer's size is
 * computed first, the reader never looks past its length.
 */
struct wr {
	uint8_t		*p;
	size_t		 len, off;
	int		 over;
};

static void
wr_bytes(struct wr *w, const void *b, size_t n)
{
	if (w->over || n > w->len - w->off) {
		w->over = 1;
		return;
	}
	memcpy(w->p + w->off, b, n);
	w->off += n;
}

static void
wr_uint(struct wr *w, uint64_t v, size_t n)
{
	uint8_t b[8];
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	wr_bytes(w, b, n);
}

struct rd {
	const uint8_t	*p;
	size_t		 len, off;
};

static int
rd_bytes(struct rd *r, size_t n, const uint8_t **out)
{
	if (n > r->len - r->off)
		return -1;
	*out = r->p + r->off;
	r->off += n;
	return 0;
}

static int
rd_uint(struct rd *r, size_t n, uint64_t *v)
{
	const uint8_t *b;
	uint64_t x = 0;
	size_t i;

	if (rd_bytes(r, n, &b) != 0)
		return -1;
	for (i = 0; i < n; i++)
		x = x << 8 | b[i];
	*v = x;
	return 0;
}

static const char *const kind_names[] = { "header", "pem", "json" };

const char *
sealed_kind_name(enum sealed_kind k)
{
	return (unsigned)k <= SEALED_KIND_MAX ? kind_names[k] : "unknown";
}

int
sealed_kind_parse(const char *s)
{
	int k;

	for (k = 0; k <= SEALED_KIND_MAX; k++)
		if (strcmp(s, kind_names[k]) == 0)
			return k;
	return -1;
}

/*
 * Whether v holds a control byte its kind does not allow: a header value
 * none but HTAB (it would split or end a header line), a document CR and
 * LF as well.
 */
static int
value_has_ctl(enum sealed_kind k, const uint8_t *v, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (v[i] >= 0x20 && v[i] != 0x7f)
			continue;
		if (v[i] == '\t' ||
		    (k != SEALED_KIND_HEADER && (v[i] == '\n' || v[i] == '\r')))
			continue;
		return 1;
	}
	return 0;
}

static size_t
value_max(enum sealed_kind k)
{
	return k == SEALED_KIND_HEADER ? SEALED_MAX_VALUE : SEALED_MAX_DOC;
}

/* The refusals of a value's bytes, by kind: the same words on both ends. */
static const char *
value_refusal(enum sealed_kind k, const uint8_t *v, size_t len)
{
	if (len == 0)
		return "empty value";
	if (len > value_max(k))
		return k == SEALED_KIND_HEADER ? "value longer than 8192 bytes" :
		    "value longer than 32768 bytes";
	if (value_has_ctl(k, v, len))
		return k == SEALED_KIND_HEADER ?
		    "value holds CR, LF or NUL, or another control byte" :
		    "value holds NUL or a control byte other than TAB, CR, LF";
	return NULL;
}

/* A key, and if there are certificates, one of them the key's. */
static int
pem_check(const uint8_t *v, size_t len, const char **why)
{
	struct pemkey *k = NULL;
	int r;

	if ((r = pemkey_parse(v, len, &k, why)) == SL_ERR_INVALID)
		*why = *why != NULL && strcmp(*why, "no unencrypted private "
		    "key") == 0 ? "a pem value must hold an unencrypted "
		    "private key" : *why;
	pemkey_free(k);
	return r;
}

static int
json_check(const uint8_t *v, size_t len, const char **why)
{
	json_error_t e;
	json_t *j;
	int ok;

	j = json_loadb((const char *)v, len, JSON_REJECT_DUPLICATES, &e);
	ok = j != NULL && json_is_object(j);
	json_decref(j);
	sodium_memzero(&e, sizeof(e));	/* its text may quote the value */
	if (!ok) {
		*why = "a json value must be one JSON object";
		return SL_ERR_INVALID;
	}
	return 0;
}

int
sealed_kind_check(enum sealed_kind k, const uint8_t *value, size_t len,
    const char **why)
{
	switch (k) {
	case SEALED_KIND_HEADER:
		return 0;
	case SEALED_KIND_PEM:
		return pem_check(value, len, why);
	case SEALED_KIND_JSON:
		return json_check(value, len, why);
	}
	*why = "unknown kind";
	return SL_ERR_INVALID;
}

/*
 * Whether b[0..len) is a host in normal form, a name or "*." and one,
 * of at most 253 characters (a wildcard over a longer name could match
 * nothing); copies it to out, NUL-terminated.
 */
static int
host_ok(const uint8_t *b, size_t len, char out[NAME_BUFSZ + 2])
{
	char norm[NAME_BUFSZ];
	size_t pre = 0;

	if (len < 1 || len > NAME_MAXLEN)
		return 0;
	if (len > 2 && b[0] == '*' && b[1] == '.')
		pre = 2;
	if (name_normalize((const char *)b + pre, len - pre, norm) != 0 ||
	    strlen(norm) != len - pre || memcmp(norm, b + pre, len - pre) != 0)
		return 0;
	memcpy(out, b, len);
	out[len] = '\0';
	return 1;
}

/* An operator's host in normal form: "*." prefix kept, the rest normalised. */
static int
host_normalize(const char *in, char out[NAME_BUFSZ + 2], const char **why)
{
	char norm[NAME_BUFSZ];
	size_t pre = 0, n;
	int r;

	if (in == NULL) {
		*why = "bad host: none";
		return SL_ERR_INVALID;
	}
	if (strncmp(in, "*.", 2) == 0)
		pre = 2;
	if ((r = name_from_policy(in + pre, norm, why)) != 0)
		return r;
	if ((n = strlen(norm)) + pre > NAME_MAXLEN) {
		*why = "bad host: a wildcard longer than 253 characters";
		return SL_ERR_INVALID;
	}
	memcpy(out, in, pre);
	memcpy(out + pre, norm, n + 1);
	return 0;
}

/* The hosts of in, normalised, duplicates dropped. */
static int
seal_hosts(const struct sealed_in *in, char hosts[][NAME_BUFSZ + 2],
    size_t *nhosts, const char **why)
{
	char h[NAME_BUFSZ + 2];
	size_t i, j, n = 0;
	int r;

	if (in->nhosts > 0 && in->hosts == NULL) {
		*why = "bad host: none";
		return SL_ERR_INVALID;
	}
	for (i = 0; i < in->nhosts; i++) {
		if ((r = host_normalize(in->hosts[i], h, why)) != 0)
			return r;
		for (j = 0; j < n && strcmp(hosts[j], h) != 0; j++)
			;
		if (j < n)
			continue;
		if (n == SEALED_MAX_HOSTS) {
			*why = "more than 16 hosts";
			return SL_ERR_INVALID;
		}
		memcpy(hosts[n++], h, sizeof(h));
	}
	*nhosts = n;
	return 0;
}

static int
seal_check(const struct sealed_in *in, const char **why)
{
	if (in->name == NULL ||
	    !secret_name_ok(in->name, strnlen(in->name, SEALED_NAME_MAX + 1))) {
		*why = "bad name: 1 to 64 of [A-Za-z0-9._-]";
		return SL_ERR_INVALID;
	}
	if ((unsigned)in->kind > SEALED_KIND_MAX) {
		*why = "unknown kind";
		return SL_ERR_INVALID;
	}
	if (in->value == NULL) {
		*why = "empty value";
		return SL_ERR_INVALID;
	}
	if ((*why = value_refusal(in->kind, in->value, in->value_len)) != NULL)
		return SL_ERR_INVALID;
	return sealed_kind_check(in->kind, in->value, in->value_len, why);
}

/* The format a kind is sealed in. */
static unsigned
kind_format(enum sealed_kind k)
{
	return k == SEALED_KIND_HEADER ? SEALED_FORMAT : SEALED_FORMAT_KIND;
}

/* Writes the payload for in, hosts and the key id into w. */
static void
encode_payload(struct wr *w, const struct sealed_in *in,
    char hosts[][NAME_BUFSZ + 2], size_t nhosts,
    const uint8_t id[SEALED_KEYID_LEN])
{
	size_t i, n;

	wr_uint(w, kind_format(in->kind), 1);
	wr_bytes(w, id, SEALED_KEYID_LEN);
	wr_uint(w, in->version, 8);
	wr_uint(w, (uint64_t)in->created, 8);
	if (in->kind != SEALED_KIND_HEADER)
		wr_uint(w, in->kind, 1);
	n = strlen(in->name);
	wr_uint(w, n, 1);
	wr_bytes(w, in->name, n);
	wr_uint(w, nhosts, 1);
	for (i = 0; i < nhosts; i++) {
		n = strlen(hosts[i]);
		wr_uint(w, n, 1);
		wr_bytes(w, hosts[i], n);
	}
	wr_uint(w, in->value_len, 2);
	wr_bytes(w, in->value, in->value_len);
}

static size_t
payload_size(const struct sealed_in *in, char hosts[][NAME_BUFSZ + 2],
    size_t nhosts)
{
	size_t i, n;

	n = 1 + SEALED_KEYID_LEN + 8 + 8 + 1 + strlen(in->name) + 1 + 2 +
	    in->value_len + (in->kind != SEALED_KIND_HEADER);
	for (i = 0; i < nhosts; i++)
		n += 1 + strlen(hosts[i]);
	return n;
}

int
sealed_seal(const uint8_t pk[32], const struct sealed_in *in,
    uint8_t **blob, size_t *len, const char **why)
{
	char hosts[SEALED_MAX_HOSTS][NAME_BUFSZ + 2];
	uint8_t id[SEALED_KEYID_LEN], *b = NULL;
	struct wr w = { NULL, 0, 0, 0 };
	const char *msg = NULL;
	size_t nhosts = 0, blen;
	int r;

	if ((r = sodium_ready(&msg)) != 0 ||
	    (r = seal_check(in, &msg)) != 0 ||
	    (r = seal_hosts(in, hosts, &nhosts, &msg)) != 0)
		goto out;
	w.len = payload_size(in, hosts, nhosts);
	blen = SEALED_HEADER_LEN + crypto_box_SEALBYTES + w.len;
	r = SL_ERR_NOMEM;
	msg = "out of memory";
	if ((w.p = secmem_alloc(w.len)) == NULL || (b = malloc(blen)) == NULL)
		goto out;
	gwkey_id(pk, id);
	encode_payload(&w, in, hosts, nhosts, id);
	r = SL_ERR_INTERNAL;
	msg = "payload size miscounted";
	if (w.over || w.off != w.len || blen > SEALED_MAX_BLOB)
		goto out;
	memcpy(b, SEALED_MAGIC, 8);
	b[8] = (uint8_t)kind_format(in->kind);
	memcpy(b + KEYID_OFF, id, SEALED_KEYID_LEN);
	if (crypto_box_seal(b + SEALED_HEADER_LEN, w.p, w.len, pk) != 0) {
		r = SL_ERR_INVALID;
		msg = "not a usable X25519 public key";
		goto out;
	}
	*blob = b;
	b = NULL;	/* transferred */
	*len = blen;
	r = 0;
 out:
	secmem_free(w.p);
	free(b);
	if (r != 0 && why != NULL)
		*why = msg;
	return r;
}

/* A two's complement int64 from its 64 bits, without overflow. */
static int64_t
u64_to_i64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return (int64_t)v;
	return -(int64_t)(UINT64_MAX - v) - 1;
}

/* The name and hosts of the payload at r into s. */
static int
parse_name_hosts(struct rd *r, struct sealed_secret *s, const char **why)
{
	const uint8_t *b;
	uint64_t n, nh, i;

	*why = "malformed payload";
	if (rd_uint(r, 1, &n) != 0 || rd_bytes(r, n, &b) != 0)
		return SL_ERR_INVALID;
	if (!secret_name_ok((const char *)b, n)) {
		*why = "bad name";
		return SL_ERR_INVALID;
	}
	memcpy(s->name, b, n);
	s->name[n] = '\0';
	if (rd_uint(r, 1, &nh) != 0)
		return SL_ERR_INVALID;
	if (nh > SEALED_MAX_HOSTS) {
		*why = "more than 16 hosts";
		return SL_ERR_INVALID;
	}
	for (i = 0; i < nh; i++) {
		if (rd_uint(r, 1, &n) != 0 || rd_bytes(r, n, &b) != 0)
			return SL_ERR_INVALID;
		if (!host_ok(b, n, s->hosts[i])) {
			*why = "bad host";
			return SL_ERR_INVALID;
		}
	}
	s->nhosts = nh;
	return 0;
}

/* The value at r into guarded memory, the rest of the payload. */
static int
parse_value(struct rd *r, struct sealed_secret *s, const char **why)
{
	const uint8_t *b;
	uint64_t n;

	*why = "malformed payload";
	if (rd_uint(r, 2, &n) != 0)
		return SL_ERR_INVALID;
	if (n == 0 || n > value_max(s->kind)) {
		*why = value_refusal(s->kind, NULL, n);
		return SL_ERR_INVALID;
	}
	if (rd_bytes(r, n, &b) != 0 || r->off != r->len)
		return SL_ERR_INVALID;
	if ((*why = value_refusal(s->kind, b, n)) != NULL)
		return SL_ERR_INVALID;
	*why = "malformed payload";
	if ((s->value = secmem_alloc(n + 1)) == NULL) {
		*why = "out of locked memory";
		return SL_ERR_NOMEM;
	}
	memcpy(s->value, b, n);
	s->value[n] = '\0';
	s->value_len = n;
	if (sodium_mprotect_readonly(s->value) != 0) {
		*why = "cannot protect the value";
		return SL_ERR_INTERNAL;
	}
	return 0;
}

int
sealed_parse_payload(const uint8_t *p, size_t len,
    const uint8_t keyid[SEALED_KEYID_LEN], struct sealed_secret **out,
    const char **why)
{
	struct rd rd = { p, len, 0 };
	struct sealed_secret *s = NULL;
	const uint8_t *id;
	const char *w = "malformed payload";
	uint64_t fmt, created, kind = SEALED_KIND_HEADER;
	int r = SL_ERR_INVALID;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		r = SL_ERR_NOMEM;
		w = "out of memory";
		goto out;
	}
	if (rd_uint(&rd, 1, &fmt) != 0 ||
	    rd_bytes(&rd, SEALED_KEYID_LEN, &id) != 0)
		goto out;
	/* The header is in the clear; only the payload is authenticated. */
	if ((fmt != SEALED_FORMAT && fmt != SEALED_FORMAT_KIND) ||
	    memcmp(id, keyid, SEALED_KEYID_LEN) != 0) {
		w = "header and payload disagree";
		goto out;
	}
	memcpy(s->keyid, id, SEALED_KEYID_LEN);
	if (rd_uint(&rd, 8, &s->version) != 0 ||
	    rd_uint(&rd, 8, &created) != 0)
		goto out;
	s->created = u64_to_i64(created);
	/* Format 2 is for the other kinds: a header there is malformed. */
	if (fmt == SEALED_FORMAT_KIND && (rd_uint(&rd, 1, &kind) != 0 ||
	    kind == SEALED_KIND_HEADER || kind > SEALED_KIND_MAX)) {
		w = "unknown kind";
		goto out;
	}
	s->kind = (enum sealed_kind)kind;
	if ((r = parse_name_hosts(&rd, s, &w)) != 0 ||
	    (r = parse_value(&rd, s, &w)) != 0)
		goto out;
	*out = s;
	s = NULL;	/* transferred */
	r = 0;
 out:
	sealed_secret_free(s);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

/* The clear header: magic, format and a size that can hold a payload. */
static int
check_header(const uint8_t *blob, size_t len, const char **why)
{
	if (blob == NULL || len < 8 || memcmp(blob, SEALED_MAGIC, 8) != 0) {
		*why = "not a sealed secret";
		return SL_ERR_INVALID;
	}
	if (len > 8 && blob[8] != SEALED_FORMAT && blob[8] != SEALED_FORMAT_KIND) {
		*why = "unsupported format version";
		return SL_ERR_INVALID;
	}
	if (len < BLOB_MIN || len > SEALED_MAX_BLOB) {
		*why = "not a sealed secret";
		return SL_ERR_INVALID;
	}
	return 0;
}

/* "sealed to another gateway key (id ...)", in why_buf when there is one. */
static const char *
another_key(const uint8_t *id, char *why_buf)
{
	char hex[2 * SEALED_KEYID_LEN + 1];

	if (why_buf == NULL)
		return "sealed to another gateway key";
	sodium_bin2hex(hex, sizeof(hex), id, SEALED_KEYID_LEN);
	snprintf(why_buf, WHY_BUFSZ, "sealed to another gateway key (id %s)",
	    hex);
	return why_buf;
}

/* Opens the sealed box with k, the private key readable only meanwhile. */
static int
open_with(struct gwkey *k, const uint8_t *blob, size_t len, uint8_t *payload)
{
	int r;

	if (sodium_mprotect_readonly(k->sk) != 0)
		return -1;
	r = crypto_box_seal_open(payload, blob + SEALED_HEADER_LEN,
	    len - SEALED_HEADER_LEN, k->pk, k->sk);
	sodium_mprotect_noaccess(k->sk);
	return r;
}

int
sealed_open(struct gwkey *const *keys, size_t nkeys, const uint8_t *blob,
    size_t len, struct sealed_secret **out, char *why_buf, const char **why)
{
	struct sealed_secret *s = NULL;
	uint8_t *payload = NULL;
	const char *w = NULL;
	size_t plen, i;
	int r, tried = 0, opened = 0;

	if ((r = sodium_ready(&w)) != 0 ||
	    (r = check_header(blob, len, &w)) != 0)
		goto out;
	plen = len - SEALED_HEADER_LEN - crypto_box_SEALBYTES;
	if ((payload = secmem_alloc(plen)) == NULL) {
		r = SL_ERR_NOMEM;
		w = "out of locked memory";
		goto out;
	}
	/* Ids may collide: try every key that has this one. */
	for (i = 0; i < nkeys && !opened; i++) {
		if (keys[i] == NULL || memcmp(keys[i]->id, blob + KEYID_OFF,
		    SEALED_KEYID_LEN) != 0)
			continue;
		tried = 1;
		opened = open_with(keys[i], blob, len, payload) == 0;
	}
	r = SL_ERR_INVALID;
	if (!tried) {
		w = another_key(blob + KEYID_OFF, why_buf);
		goto out;
	}
	if (!opened) {
		w = "does not open";
		goto out;
	}
	if ((r = sealed_parse_payload(payload, plen, blob + KEYID_OFF, &s,
	    &w)) != 0)
		goto out;
	if (blob[8] != kind_format(s->kind)) {
		r = SL_ERR_INVALID;
		w = "header and payload disagree";
		goto out;
	}
	*out = s;
	s = NULL;	/* transferred */
	r = 0;
 out:
	secmem_free(payload);
	sealed_secret_free(s);
	if (r != 0 && why != NULL)
		*why = w;
	return r;
}

void
sealed_secret_free(struct sealed_secret *s)
{
	if (s == NULL)
		return;
	secmem_free(s->value);
	free(s);
}

int
sealed_host_bound(const struct sealed_secret *s, const char *host)
{
	return sealed_hosts_match(s->hosts, s->nhosts, host);
}

int
sealed_hosts_match(const char (*hosts)[NAME_BUFSZ + 2], size_t nhosts,
    const char *host)
{
	size_t hl, sl, i;
	const char *p;

	if (host == NULL || *host == '\0')
		return 0;
	if (nhosts == 0)
		return 1;
	hl = strlen(host);
	for (i = 0; i < nhosts; i++) {
		p = hosts[i];
		if (strcmp(p, host) == 0)
			return 1;
		/* "*.example.com": any depth below, not the apex. */
		if (p[0] != '*' || p[1] != '.')
			continue;
		sl = strlen(p + 1);	/* ".example.com" */
		if (hl > sl && strcmp(host + hl - sl, p + 1) == 0)
			return 1;
	}
	return 0;
}
