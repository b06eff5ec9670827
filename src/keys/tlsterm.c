/* tlsterm.c: the sandbox-facing side of TLS interception. */
#include "autoconf.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/clock.h"
#include "util/err.h"
#include "util/names.h"
#include "conf/policy.h"
#include "keys/ca.h"
#include "keys/tlsterm.h"

#define LEAF_REFRESH_S	600		/* re-mint leaves with less left */
#define LEAFCACHE_MAX	(1u << 20)	/* bound on leafcache_new's max */

#define TK_NAME_LEN	16		/* fixed by OpenSSL's ticket format */
#define TK_AES_LEN	32		/* AES-256-CBC */
#define TK_HMAC_LEN	32		/* HMAC-SHA256 */

/*
 * TLS 1.2 suites: forward secret, AEAD, and ECDSA only since every leaf
 * has an ECDSA key.  TLS 1.3 suites: all three standard AEADs.
 */
#define TLSTERM_CIPHERS	"ECDHE-ECDSA-AES256-GCM-SHA384:" \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"
#define TLSTERM_SUITES	"TLS_AES_256_GCM_SHA384:" \
	"TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"
#define TLSTERM_GROUPS	"X25519:P-256:P-384"

/* One session-ticket key, in its own sodium_malloc'd block. */
struct ticket_key {
	unsigned char	name[TK_NAME_LEN];
	unsigned char	aes[TK_AES_LEN];
	unsigned char	hmac[TK_HMAC_LEN];
	time_t		created;	/* monotonic seconds */
};

/* A cached leaf: in one hash bucket's chain and in the LRU list. */
struct leaf_ent {
	struct leaf_ent	*hnext;
	struct leaf_ent	*newer, *older;
	X509		*cert;		/* the cache's reference */
	time_t		 fresh_until;	/* wall clock: re-mint from then */
	char		 host[];
};

struct leafcache {
	pthread_mutex_t		  mtx;	/* guards everything below */
	size_t			  max, count;
	size_t			  nbuckets;	/* a power of two */
	struct leaf_ent		**buckets;
	struct leaf_ent		 *newest, *oldest;
	unsigned char		  hkey[crypto_shorthash_KEYBYTES];
	EVP_PKEY		 *leaf_key;	/* NULL until first use */
	struct ticket_key	 *tk_cur;	/* never NULL */
	struct ticket_key	 *tk_prev;	/* NULL after a long idle */
	time_t			  rotate_s;
};

/* The SSL ex_data slot holding a connection's leafcache. */
static pthread_once_t	lc_index_once = PTHREAD_ONCE_INIT;
static int		lc_index_val = -1;

static void
lc_index_init(void)
{
	lc_index_val = SSL_get_ex_new_index(0, "sluice leafcache", NULL, NULL,
	    NULL);
}

/* Written once, the first time any thread asks; -1 if OpenSSL failed. */
static int
lc_index(void)
{
	pthread_once(&lc_index_once, lc_index_init);
	return lc_index_val;
}

/* --- Session-ticket keys --- */

static void
ticket_key_free(struct ticket_key *k)
{
	if (k != NULL)
		sodium_free(k);		/* wipes */
}

static int
ticket_key_new(time_t now, struct ticket_key **out)
{
	struct ticket_key *k;

	if ((k = sodium_malloc(sizeof(*k))) == NULL)
		return SL_ERR_NOMEM;
	randombytes_buf(k->name, sizeof(k->name));
	randombytes_buf(k->aes, sizeof(k->aes));
	randombytes_buf(k->hmac, sizeof(k->hmac));
	k->created = now;
	*out = k;
	return 0;
}

/* A new current key; the current one becomes the previous. Locked. */
static int
tickets_rotate(struct leafcache *lc, time_t now)
{
	struct ticket_key *k;
	int r;

	if ((r = ticket_key_new(now, &k)) != 0)
		return r;
	ticket_key_free(lc->tk_prev);
	lc->tk_prev = lc->tk_cur;
	lc->tk_cur = k;
	return 0;
}

/*
 * Rotates lazily, when a ticket is sealed or opened.  After two intervals
 * or more the old current key would itself have been retired as previous
 * by now, so it goes too.  Locked.
 */
static int
tickets_refresh(struct leafcache *lc, time_t now)
{
	time_t age = now - lc->tk_cur->created;
	int r;

	if (age < lc->rotate_s)
		return 0;
	if ((r = tickets_rotate(lc, now)) != 0)
		return r;
	if (age >= 2 * lc->rotate_s) {
		ticket_key_free(lc->tk_prev);
		lc->tk_prev = NULL;
	}
	return 0;
}

/* The key named name, or NULL. Locked. */
static const struct ticket_key *
tickets_find(const struct leafcache *lc, const unsigned char *name)
{
	if (sodium_memcmp(lc->tk_cur->name, name, TK_NAME_LEN) == 0)
		return lc->tk_cur;
	if (lc->tk_prev != NULL &&
	    sodium_memcmp(lc->tk_prev->name, name, TK_NAME_LEN) == 0)
		return lc->tk_prev;
	return NULL;
}

/* Keys the ticket's cipher and MAC with k. */
static int
ticket_key_apply(const struct ticket_key *k, const unsigned char *iv,
    EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[3];
	int ok;

	params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY,
	    (void *)k->hmac, sizeof(k->hmac));
	params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[2] = OSSL_PARAM_construct_end();
	if (enc)
		ok = EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes,
		    iv);
	else
		ok = EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes,
		    iv);
	if (ok != 1 || EVP_MAC_CTX_set_params(hctx, params) != 1)
		return SL_ERR_INTERNAL;
	return 0;
}

/*
 * OpenSSL's ticket-key callback: seals (enc) or opens a ticket with the
 * keys of the connection's own leafcache.  Returns 1 (go on), 2 (opened
 * with the previous key, or in TLS 1.3, whose clients use a ticket once:
 * issue a fresh ticket), 0 (no ticket issued, or
 * a full handshake instead of resumption) or -1 (a fatal error).
 */
static int
ticket_key_cb(SSL *ssl, unsigned char name[TK_NAME_LEN], unsigned char *iv,
    EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
	struct leafcache *lc;
	const struct ticket_key *k;
	int idx, r = 0;

	/* Without its sandbox's keys a connection gets no ticket at all. */
	if ((idx = lc_index()) < 0 ||
	    (lc = SSL_get_ex_data(ssl, idx)) == NULL)
		return 0;
	pthread_mutex_lock(&lc->mtx);
	if (tickets_refresh(lc, mono_s()) != 0)
		goto out;
	if (enc) {
		k = lc->tk_cur;
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(
		    EVP_aes_256_cbc())) != 1)
			goto out;
		memcpy(name, k->name, TK_NAME_LEN);
		r = ticket_key_apply(k, iv, cctx, hctx, 1) == 0 ? 1 : -1;
	} else {
		if ((k = tickets_find(lc, name)) == NULL)
			goto out;
		if (ticket_key_apply(k, iv, cctx, hctx, 0) != 0)
			r = -1;
		else if (k == lc->tk_cur && SSL_version(ssl) != TLS1_3_VERSION)
			r = 1;
		else
			r = 2;	/* TLS 1.3 tickets are single-use: renew */
	}
 out:
	pthread_mutex_unlock(&lc->mtx);
	return r;
}

/* --- The leaf cache --- */

static void
leaf_ent_free(struct leaf_ent *e)
{
	if (e == NULL)
		return;
	X509_free(e->cert);
	free(e);
}

int
leafcache_new(size_t max, unsigned ticket_rotate_s, struct leafcache **out)
{
	struct leafcache *lc = NULL;
	size_t nb;
	int r = SL_ERR_NOMEM;

	if (out == NULL || max == 0 || max > LEAFCACHE_MAX ||
	    ticket_rotate_s == 0)
		return SL_ERR_INVALID;
	if ((lc = calloc(1, sizeof(*lc))) == NULL)
		return SL_ERR_NOMEM;
	if (pthread_mutex_init(&lc->mtx, NULL) != 0) {
		free(lc);
		return SL_ERR_NOMEM;
	}
	/* Chains average under one entry: at least max buckets. */
	for (nb = 1; nb < max; nb <<= 1)
		;
	lc->nbuckets = nb;
	lc->max = max;
	lc->rotate_s = (time_t)ticket_rotate_s;
	/* Hosts come from sandboxes: a keyed hash keeps chains short. */
	crypto_shorthash_keygen(lc->hkey);
	if ((lc->buckets = calloc(nb, sizeof(*lc->buckets))) == NULL)
		goto out;
	if ((r = ticket_key_new(mono_s(), &lc->tk_cur)) != 0)
		goto out;
	*out = lc;
	lc = NULL;	/* transferred */
	r = 0;
 out:
	leafcache_free(lc);
	return r;
}

void
leafcache_free(struct leafcache *lc)
{
	struct leaf_ent *e, *next;

	if (lc == NULL)
		return;
	for (e = lc->newest; e != NULL; e = next) {
		next = e->older;
		leaf_ent_free(e);
	}
	free(lc->buckets);
	EVP_PKEY_free(lc->leaf_key);	/* clears the private scalar */
	ticket_key_free(lc->tk_cur);
	ticket_key_free(lc->tk_prev);
	sodium_memzero(lc->hkey, sizeof(lc->hkey));
	pthread_mutex_destroy(&lc->mtx);
	free(lc);
}

size_t
leafcache_count(struct leafcache *lc)
{
	size_t n;

	pthread_mutex_lock(&lc->mtx);
	n = lc->count;
	pthread_mutex_unlock(&lc->mtx);
	return n;
}

int
leafcache_rotate_tickets(struct leafcache *lc)
{
	int r;

	pthread_mutex_lock(&lc->mtx);
	r = tickets_rotate(lc, mono_s());
	pthread_mutex_unlock(&lc->mtx);
	return r;
}

/* host's bucket. */
static struct leaf_ent **
cache_bucket(struct leafcache *lc, const char *host, size_t len)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v = 0;
	size_t i;

	crypto_shorthash(h, (const unsigned char *)host, len, lc->hkey);
	for (i = 0; i < sizeof(h); i++)
		v = (v << 8) | h[i];
	return &lc->buckets[v & (lc->nbuckets - 1)];
}

static void
lru_unlink(struct leafcache *lc, struct leaf_ent *e)
{
	if (e->newer != NULL)
		e->newer->older = e->older;
	else
		lc->newest = e->older;
	if (e->older != NULL)
		e->older->newer = e->newer;
	else
		lc->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void
lru_push_newest(struct leafcache *lc, struct leaf_ent *e)
{
	e->newer = NULL;
	e->older = lc->newest;
	if (lc->newest != NULL)
		lc->newest->newer = e;
	else
		lc->oldest = e;
	lc->newest = e;
}

/* Takes e out of the cache and frees it. */
static void
cache_remove(struct leafcache *lc, struct leaf_ent *e)
{
	struct leaf_ent **pp;

	pp = cache_bucket(lc, e->host, strlen(e->host));
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(lc, e);
	lc->count--;
	leaf_ent_free(e);
}

static struct leaf_ent *
cache_find(struct leafcache *lc, const char *host, size_t len)
{
	struct leaf_ent *e;

	for (e = *cache_bucket(lc, host, len); e != NULL; e = e->hnext)
		if (strcmp(e->host, host) == 0)
			return e;
	return NULL;
}

/* Whether a cached leaf may still be handed out. */
static int
leaf_usable(const struct leaf_ent *e, X509 *chain_ca, time_t now)
{
	return now < e->fresh_until &&
	    X509_check_issued(chain_ca, e->cert) == X509_V_OK;
}

/* When a leaf stops being handed out: LEAF_REFRESH_S before notAfter. */
static int
leaf_fresh_until(X509 *leaf, time_t now, time_t *out)
{
	int days = 0, secs = 0;

	if (ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(leaf)) != 1)
		return SL_ERR_INTERNAL;
	*out = now + (time_t)days * 86400 + secs - LEAF_REFRESH_S;
	return 0;
}

/* A new entry for host holding leaf (taken over only on success). */
static int
leaf_ent_new(const char *host, size_t len, X509 *leaf, struct leaf_ent **out)
{
	struct leaf_ent *e;
	time_t now = time(NULL);
	int r;

	if ((e = calloc(1, sizeof(*e) + len + 1)) == NULL)
		return SL_ERR_NOMEM;
	if ((r = leaf_fresh_until(leaf, now, &e->fresh_until)) != 0) {
		free(e);
		return r;
	}
	memcpy(e->host, host, len + 1);
	e->cert = leaf;
	*out = e;
	return 0;
}

/* Mints host's leaf and caches it, evicting the least recently used. */
static int
cache_mint(struct leafcache *lc, const char *host, size_t len,
    leaf_mint_fn mint, void *arg, X509 *chain_ca, struct leaf_ent **out)
{
	struct leaf_ent *e = NULL, **bucket;
	X509 *leaf = NULL;
	int r;

	if ((r = mint(arg, host, lc->leaf_key, &leaf)) != 0) {
		leaf = NULL;	/* written only on success (err.h) */
		if (r > 0)
			r = SL_ERR_INTERNAL;
		goto out;
	}
	r = SL_ERR_INTERNAL;
	if (leaf == NULL || X509_check_issued(chain_ca, leaf) != X509_V_OK)
		goto out;
	if ((r = leaf_ent_new(host, len, leaf, &e)) != 0)
		goto out;
	leaf = NULL;	/* transferred */
	if (lc->count >= lc->max)
		cache_remove(lc, lc->oldest);
	bucket = cache_bucket(lc, host, len);
	e->hnext = *bucket;
	*bucket = e;
	lru_push_newest(lc, e);
	lc->count++;
	*out = e;
	r = 0;
 out:
	X509_free(leaf);
	return r;
}

/* The cached (or minted) entry for host, now the most recently used. */
static int
cache_lookup(struct leafcache *lc, const char *host, size_t len,
    leaf_mint_fn mint, void *arg, X509 *chain_ca, struct leaf_ent **out)
{
	struct leaf_ent *e;
	int r;

	if (lc->leaf_key == NULL && (r = ca_new_leaf_key(&lc->leaf_key)) != 0)
		return r;
	e = cache_find(lc, host, len);
	if (e != NULL && !leaf_usable(e, chain_ca, time(NULL))) {
		cache_remove(lc, e);
		e = NULL;
	}
	if (e == NULL)
		return cache_mint(lc, host, len, mint, arg, chain_ca, out);
	lru_unlink(lc, e);
	lru_push_newest(lc, e);
	*out = e;
	return 0;
}

int
leafcache_get(struct leafcache *lc, const char *host, leaf_mint_fn mint,
    void *arg, X509 *chain_ca, X509 **leaf, EVP_PKEY **key)
{
	struct leaf_ent *e;
	size_t len;
	int r;

	if (lc == NULL || host == NULL || mint == NULL || chain_ca == NULL ||
	    leaf == NULL || key == NULL)
		return SL_ERR_INVALID;
	len = strlen(host);
	if (len == 0 || len > NAME_MAXLEN)
		return SL_ERR_INVALID;
	pthread_mutex_lock(&lc->mtx);
	if ((r = cache_lookup(lc, host, len, mint, arg, chain_ca, &e)) != 0)
		goto out;
	r = SL_ERR_INTERNAL;
	if (X509_up_ref(e->cert) != 1)
		goto out;
	if (EVP_PKEY_up_ref(lc->leaf_key) != 1) {
		X509_free(e->cert);
		goto out;
	}
	*leaf = e->cert;
	*key = lc->leaf_key;
	r = 0;
 out:
	pthread_mutex_unlock(&lc->mtx);
	return r;
}

/* --- The server context --- */

/*
 * The ALPN lists a connection may offer, in the order of preference: an
 * SSL points at one of these (never at a policy's memory, which a reload
 * may free under a live connection).
 */
static const unsigned char alpn_lists[][ALPN_WIRE_MAX] = {
	"\x08http/1.1",
	"\x02h2\x08http/1.1",
	"\x08http/1.1\x02h2",
	"\x02h2",
};
static const unsigned char alpn_lens[] = { 9, 12, 12, 3 };

static pthread_once_t	alpn_index_once = PTHREAD_ONCE_INIT;
static int		alpn_index_val = -1;

static void
alpn_index_init(void)
{
	alpn_index_val = SSL_get_ex_new_index(0, "sluice alpn", NULL, NULL,
	    NULL);
}

int
tlsterm_ssl_alpn(SSL *ssl, const unsigned char *wire, size_t len)
{
	size_t i;

	pthread_once(&alpn_index_once, alpn_index_init);
	if (alpn_index_val < 0)
		return SL_ERR_INTERNAL;
	for (i = 0; i < sizeof(alpn_lens); i++)
		if (len == alpn_lens[i] && memcmp(wire, alpn_lists[i], len) == 0)
			return SSL_set_ex_data(ssl, alpn_index_val,
			    (void *)alpn_lists[i]) == 1 ? 0 : SL_ERR_NOMEM;
	return SL_ERR_INVALID;
}

/*
 * Selects the connection's most preferred protocol that the client offers
 * (its list from tlsterm_ssl_alpn, else h2 then http/1.1), or fails the
 * handshake.
 */
static int
alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	const unsigned char *ours = alpn_lists[1];
	unsigned char *sel;
	size_t i;

	pthread_once(&alpn_index_once, alpn_index_init);
	if (alpn_index_val >= 0 && SSL_get_ex_data(ssl, alpn_index_val) != NULL)
		ours = SSL_get_ex_data(ssl, alpn_index_val);
	for (i = 0; i < sizeof(alpn_lens); i++)
		if (ours == alpn_lists[i])
			break;
	if (i == sizeof(alpn_lens) || inlen == 0 ||
	    SSL_select_next_proto(&sel, outlen, ours, alpn_lens[i], in,
	    inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;	/* no_application_protocol */
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *
tlsterm_ctx_new(void)
{
	SSL_CTX *ctx = NULL, *ret = NULL;

	if (lc_index() < 0)
		goto out;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		goto out;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_set_cipher_list(ctx, TLSTERM_CIPHERS) != 1 ||
	    SSL_CTX_set_ciphersuites(ctx, TLSTERM_SUITES) != 1 ||
	    SSL_CTX_set1_groups_list(ctx, TLSTERM_GROUPS) != 1 ||
	    SSL_CTX_set_max_early_data(ctx, 0) != 1 ||
	    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_cb) != 1)
		goto out;
	SSL_CTX_set_security_level(ctx, 2);
	/*
	 * A sandbox that half-closes (FIN without close_notify) after its
	 * requests still gets its answers: its end is an end of reading, not
	 * a fatal error.  HTTP framing, not the TLS end, says whether a
	 * request was whole.
	 */
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	    SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
	/*
	 * An idle connection holds no record buffers (two of about 17 KiB):
	 * most intercepted connections are idle most of the time.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	/* Resumption by the sandbox's own tickets only (ticket_key_cb). */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select_cb, NULL);
	ret = ctx;
	ctx = NULL;	/* transferred */
 out:
	SSL_CTX_free(ctx);
	return ret;
}

/*
 * Binds the SSL's sessions to host, so a ticket resumes only for the name
 * whose leaf the client verified when it got the ticket.
 */
static int
bind_session_to_host(SSL *ssl, const char *host)
{
	unsigned char md[SSL_MAX_SID_CTX_LENGTH];
	unsigned int mdlen = 0;

	/* SHA-256 is exactly SSL_MAX_SID_CTX_LENGTH (32) bytes. */
	if (EVP_Digest(host, strlen(host), md, &mdlen, EVP_sha256(),
	    NULL) != 1 || mdlen != sizeof(md) ||
	    SSL_set_session_id_context(ssl, md, mdlen) != 1)
		return SL_ERR_INTERNAL;
	return 0;
}

/* Sets the leaf, its key and the chain (chain_ca borrowed) on ssl. */
static int
set_identity(SSL *ssl, X509 *leaf, EVP_PKEY *key, X509 *chain_ca)
{
	STACK_OF(X509) *chain;
	int r = SL_ERR_NOMEM;

	if ((chain = sk_X509_new_null()) == NULL)
		return SL_ERR_NOMEM;
	if (sk_X509_push(chain, chain_ca) == 0)
		goto out;
	/* Takes its own references, and checks key against leaf. */
	r = SSL_use_cert_and_key(ssl, leaf, key, chain, 1) == 1 ? 0 :
	    SL_ERR_INTERNAL;
 out:
	sk_X509_free(chain);	/* the stack only, not chain_ca */
	return r;
}

int
tlsterm_ssl_new(SSL_CTX *ctx, struct leafcache *lc, const char *host,
    leaf_mint_fn mint, void *arg, X509 *chain_ca, SSL **out)
{
	SSL *ssl = NULL;
	X509 *leaf = NULL;
	EVP_PKEY *key = NULL;
	int idx, r = SL_ERR_INTERNAL;

	if (ctx == NULL || lc == NULL || out == NULL)
		return SL_ERR_INVALID;
	if ((idx = lc_index()) < 0)
		return SL_ERR_INTERNAL;
	if ((r = leafcache_get(lc, host, mint, arg, chain_ca, &leaf,
	    &key)) != 0)
		goto out;
	if ((ssl = SSL_new(ctx)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((r = set_identity(ssl, leaf, key, chain_ca)) != 0 ||
	    (r = bind_session_to_host(ssl, host)) != 0)
		goto out;
	if (SSL_set_ex_data(ssl, idx, lc) != 1) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	SSL_set_accept_state(ssl);
	*out = ssl;
	ssl = NULL;	/* transferred */
	r = 0;
 out:
	SSL_free(ssl);
	X509_free(leaf);
	EVP_PKEY_free(key);
	return r;
}
