/* tlsup.c: the client side of TLS towards upstreams (re-encryption, forward). */
#include "autoconf.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util/err.h"
#include "util/fsvc.h"
#include "keys/pemkey.h"
#include "keys/tlsup.h"

#define TLSUP_CA_MAX	(16 * 1024 * 1024)	/* a CA bundle's bytes */
#define TLSUP_SESS_MAX	256	/* sandbox, host, port triples with a kept session, per context */
#define TLSUP_SHA256_LEN 32

/* ALPN wire format: the one protocol we speak upstream. */
static const unsigned char alpn_http11[] = "\x08http/1.1";
#define ALPN_HTTP11_LEN	(sizeof(alpn_http11) - 1)

/* One (sandbox, host, port)'s latest resumable session. */
struct sess_ent {
	char		*host;		/* the key (sess_key) */
	SSL_SESSION	*sess;
	uint64_t	 used;		/* clock at the last store or take */
};

/*
 * A context's client session cache.  Owned by the SSL_CTX (ex_data, freed
 * with it), so SSLs that outlive their tlsup still find it.
 */
struct sess_cache {
	pthread_mutex_t	 mu;
	struct sess_ent	 ents[TLSUP_SESS_MAX];
	size_t		 n;
	uint64_t	 clock;
};

struct ctx_ent {
	char		*path;
	SSL_CTX		*ctx;
};

struct tlsup {
	pthread_mutex_t	 mu;		/* guards ents */
	char		*default_ca;
	struct ctx_ent	*ents;
	size_t		 n, cap;
};

/* ex_data indexes: allocated once per process, then only read. */
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;
static int ssl_host_idx = -1;	/* SSL: malloc'd cache key (sess_key) */
static int ctx_cache_idx = -1;	/* SSL_CTX: its struct sess_cache */

static void
seterr(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
seterr(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void
host_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
    void *argp)
{
	free(ptr);
}

/* SSL_dup copies the host rather than sharing it. */
static int
host_ex_dup(CRYPTO_EX_DATA *to, const CRYPTO_EX_DATA *from, void **from_d,
    int idx, long argl, void *argp)
{
	char *h = *from_d;

	if (h != NULL && (*from_d = strdup(h)) == NULL)
		return 0;
	return 1;
}

static void
cache_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
    long argl, void *argp)
{
	struct sess_cache *c = ptr;
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->n; i++) {
		free(c->ents[i].host);
		SSL_SESSION_free(c->ents[i].sess);
	}
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void
init_indexes(void)
{
	ssl_host_idx = SSL_get_ex_new_index(0, NULL, NULL, host_ex_dup,
	    host_ex_free);
	ctx_cache_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL,
	    cache_ex_free);
}

static ssize_t
cache_find(const struct sess_cache *c, const char *host)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (strcmp(c->ents[i].host, host) == 0)
			return (ssize_t)i;
	return -1;
}

static void
cache_drop(struct sess_cache *c, size_t i)
{
	free(c->ents[i].host);
	SSL_SESSION_free(c->ents[i].sess);
	c->ents[i] = c->ents[--c->n];
}

/*
 * Keeps sess (taking the caller's reference) as host's session, evicting
 * the least recently used host when full.  Returns 1 if kept, 0 if not.
 */
static int
cache_put(struct sess_cache *c, const char *host, SSL_SESSION *sess)
{
	struct sess_ent *e;
	ssize_t found;
	size_t i, lru;
	char *key = NULL;
	int kept = 0;

	pthread_mutex_lock(&c->mu);
	if ((found = cache_find(c, host)) >= 0) {
		e = &c->ents[found];
		SSL_SESSION_free(e->sess);
	} else {
		if ((key = strdup(host)) == NULL)
			goto out;
		if (c->n < TLSUP_SESS_MAX)
			e = &c->ents[c->n++];
		else {
			for (lru = 0, i = 1; i < c->n; i++)
				if (c->ents[i].used < c->ents[lru].used)
					lru = i;
			e = &c->ents[lru];
			free(e->host);
			SSL_SESSION_free(e->sess);
		}
		e->host = key;
		key = NULL;	/* transferred */
	}
	e->sess = sess;
	e->used = ++c->clock;
	kept = 1;
 out:
	pthread_mutex_unlock(&c->mu);
	free(key);
	return kept;
}

/*
 * host's session with a reference for the caller, or NULL.  A TLS 1.3
 * ticket is handed out once (RFC 8446, C.4); a TLS 1.2 session stays.
 */
static SSL_SESSION *
cache_take(struct sess_cache *c, const char *host)
{
	SSL_SESSION *s = NULL;
	ssize_t i;
	time_t now = time(NULL);

	pthread_mutex_lock(&c->mu);
	if ((i = cache_find(c, host)) < 0)
		goto out;
	s = c->ents[i].sess;
	/* OpenSSL marks the session of an SSL freed unshut unresumable */
	if (!SSL_SESSION_is_resumable(s) || (time_t)(SSL_SESSION_get_time(s) +
	    SSL_SESSION_get_timeout(s)) <= now) {
		cache_drop(c, (size_t)i);
		s = NULL;
	} else if (SSL_SESSION_get_protocol_version(s) >= TLS1_3_VERSION) {
		c->ents[i].sess = NULL;	/* transferred */
		cache_drop(c, (size_t)i);
	} else {
		SSL_SESSION_up_ref(s);
		c->ents[i].used = ++c->clock;
	}
 out:
	pthread_mutex_unlock(&c->mu);
	return s;
}

/* OpenSSL's new-session callback: 1 if we kept the reference. */
static int
new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	const char *host = SSL_get_ex_data(ssl, ssl_host_idx);
	struct sess_cache *c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl),
	    ctx_cache_idx);

	if (host == NULL || c == NULL || !SSL_SESSION_is_resumable(sess))
		return 0;
	return cache_put(c, host, sess);
}

/*
 * Adds every certificate of the PEM file at path to ctx's empty store.
 * Read through the monitor once the worker is confined (fsvc.h), which
 * gives out the certificates of a file and nothing else.
 */
static int
load_ca(SSL_CTX *ctx, const char *path, char *err, size_t errlen)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	STACK_OF(X509_INFO) *infos = NULL;
	X509_INFO *xi;
	BIO *bio = NULL;
	char *text = NULL;
	size_t len = 0;
	int i, n = 0, r = SL_ERR_INTERNAL;

	if (fsvc_certs(path, TLSUP_CA_MAX, &text, &len) != 0) {
		int e = errno;

		seterr(err, errlen, "upstream CA file %s: %s", path,
		    e == EISDIR || e == EINVAL ? "not a regular file" :
		    e == ENODATA ? "no certificate in it" : strerror(e));
		r = e == EISDIR || e == EINVAL || e == ENODATA ?
		    SL_ERR_INVALID : SL_ERR_IO;
		goto out;
	}
	if ((bio = BIO_new_mem_buf(text, (int)len)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL)) == NULL) {
		seterr(err, errlen, "upstream CA file %s: not a PEM "
		    "certificate bundle", path);
		r = SL_ERR_INVALID;
		goto out;
	}
	for (i = 0; i < sk_X509_INFO_num(infos); i++) {
		xi = sk_X509_INFO_value(infos, i);
		if (xi->x509 == NULL)
			continue;
		if (X509_STORE_add_cert(store, xi->x509) != 1) {
			r = SL_ERR_NOMEM;
			goto out;
		}
		n++;
	}
	if (n == 0) {
		seterr(err, errlen, "upstream CA file %s: no certificate in it",
		    path);
		r = SL_ERR_INVALID;
		goto out;
	}
	r = 0;
 out:
	if (r == SL_ERR_NOMEM || r == SL_ERR_INTERNAL)
		seterr(err, errlen, "upstream CA file %s: %s", path,
		    err_str(r));
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(bio);
	free(text);
	return r;
}

/* A fresh client context trusting only the certificates in path. */
static int
ctx_new(const char *path, SSL_CTX **out, char *err, size_t errlen)
{
	SSL_CTX *ctx = NULL;
	struct sess_cache *c = NULL;
	int r = SL_ERR_NOMEM;

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		goto out;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		r = SL_ERR_INTERNAL;
		goto out;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION);
	/* Idle upstreams, in the pool or not, hold no record buffers. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* returns 0 on success, unlike its neighbours */
	if (SSL_CTX_set_alpn_protos(ctx, alpn_http11, ALPN_HTTP11_LEN) != 0)
		goto out;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		goto out;
	if (pthread_mutex_init(&c->mu, NULL) != 0) {
		free(c);
		c = NULL;
		goto out;
	}
	if (SSL_CTX_set_ex_data(ctx, ctx_cache_idx, c) != 1)
		goto out;
	c = NULL;	/* transferred: freed with ctx */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
	if ((r = load_ca(ctx, path, err, errlen)) != 0)
		goto out;
	*out = ctx;
	ctx = NULL;	/* transferred */
	r = 0;
 out:
	if (r == SL_ERR_NOMEM || r == SL_ERR_INTERNAL)
		seterr(err, errlen, "upstream CA file %s: %s", path,
		    err_str(r));
	if (c != NULL)
		cache_ex_free(NULL, c, NULL, 0, 0, NULL);
	SSL_CTX_free(ctx);
	return r;
}

int
tlsup_new(const char *default_ca, struct tlsup **out)
{
	struct tlsup *t = NULL;
	int r = SL_ERR_NOMEM;

	if (default_ca == NULL || *default_ca == '\0')
		return SL_ERR_INVALID;
	if (pthread_once(&idx_once, init_indexes) != 0 ||
	    ssl_host_idx < 0 || ctx_cache_idx < 0)
		return SL_ERR_NOMEM;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		goto out;
	if ((t->default_ca = strdup(default_ca)) == NULL)
		goto out;
	if (pthread_mutex_init(&t->mu, NULL) != 0)
		goto out;
	*out = t;
	t = NULL;	/* transferred */
	r = 0;
 out:
	if (t != NULL) {
		free(t->default_ca);
		free(t);
	}
	return r;
}

void
tlsup_free(struct tlsup *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++) {
		free(t->ents[i].path);
		SSL_CTX_free(t->ents[i].ctx);
	}
	free(t->ents);
	free(t->default_ca);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* The cached context for path, or NULL; t->mu held. */
static SSL_CTX *
ctx_lookup(const struct tlsup *t, const char *path)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->ents[i].path, path) == 0)
			return t->ents[i].ctx;
	return NULL;
}

int
tlsup_ctx(struct tlsup *t, const char *ca_file, SSL_CTX **out, char *err,
    size_t errlen)
{
	const char *path = ca_file != NULL ? ca_file : t->default_ca;
	struct ctx_ent *ents;
	SSL_CTX *found, *ctx = NULL;
	char *key = NULL;
	size_t cap;
	int r;

	if (*path == '\0') {
		seterr(err, errlen, "upstream CA file: empty path");
		return SL_ERR_INVALID;
	}
	pthread_mutex_lock(&t->mu);
	found = ctx_lookup(t, path);
	pthread_mutex_unlock(&t->mu);
	if (found != NULL) {
		*out = found;
		return 0;
	}

	/* Read the file without the lock; the first one to finish wins. */
	if ((r = ctx_new(path, &ctx, err, errlen)) != 0)
		goto out;
	r = SL_ERR_NOMEM;
	if ((key = strdup(path)) == NULL) {
		seterr(err, errlen, "upstream CA file %s: %s", path,
		    err_str(r));
		goto out;
	}
	pthread_mutex_lock(&t->mu);
	if ((found = ctx_lookup(t, path)) != NULL) {
		pthread_mutex_unlock(&t->mu);
		*out = found;
		r = 0;
		goto out;
	}
	if (t->n == t->cap) {
		cap = t->cap == 0 ? 4 : t->cap * 2;
		if ((ents = reallocarray(t->ents, cap, sizeof(*ents))) == NULL) {
			pthread_mutex_unlock(&t->mu);
			seterr(err, errlen, "upstream CA file %s: %s", path,
			    err_str(r));
			goto out;
		}
		t->ents = ents;
		t->cap = cap;
	}
	t->ents[t->n].path = key;
	t->ents[t->n].ctx = ctx;
	t->n++;
	pthread_mutex_unlock(&t->mu);
	*out = ctx;
	key = NULL;	/* transferred */
	ctx = NULL;	/* transferred */
	r = 0;
 out:
	if (r != 0)
		ERR_clear_error();	/* SSL_get_error needs a clean queue */
	free(key);
	SSL_CTX_free(ctx);
	return r;
}

/* Whether s is an IPv4 or IPv6 literal (as X509 IP SANs are matched). */
static int
is_ip_literal(const char *s)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, s, &a4) == 1 ||
	    inet_pton(AF_INET6, s, &a6) == 1;
}

/*
 * The cache key of (sandbox, host, port, client), malloc'd: "port\nhost\n",
 * the client certificate's id and "\n" (nothing for none), then 's' and
 * the sandbox id, or 'u' for the sources no sandbox owns.  Neither a port,
 * a host nor an id holds a newline, so two never share a key.
 */
static char *
sess_key(const char *sandbox, const char *host, unsigned port,
    const char *client)
{
	size_t n = 5 + 1 + strlen(host) + 1 + 1 +
	    (client != NULL ? strlen(client) + 2 : 0) +
	    (sandbox != NULL ? strlen(sandbox) : 0) + 1;
	char *k;

	if ((k = malloc(n)) == NULL)
		return NULL;
	snprintf(k, n, "%u\n%s\n%s%s%c%s", port, host,
	    client != NULL ? client : "", client != NULL ? "\n" : "",
	    sandbox != NULL ? 's' : 'u', sandbox != NULL ? sandbox : "");
	return k;
}

/* The key, leaf and chain of client on ssl. */
static int
present(SSL *ssl, const struct tlsup_client *client)
{
	const struct pemkey *pk = client->pem;

	if (pk == NULL || pk->leaf == NULL)
		return SL_ERR_INVALID;
	if (SSL_use_certificate(ssl, pk->leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, pk->key) != 1 ||
	    (pk->chain != NULL && SSL_set1_chain(ssl, pk->chain) != 1))
		return SL_ERR_INVALID;
	return 0;
}

int
tlsup_ssl_new(SSL_CTX *ctx, const char *sandbox, const char *host,
    int host_is_ip, unsigned port, SSL **out)
{
	return tlsup_ssl_new_as(ctx, sandbox, host, host_is_ip, port, NULL,
	    out);
}

int
tlsup_ssl_new_as(SSL_CTX *ctx, const char *sandbox, const char *host,
    int host_is_ip, unsigned port, const struct tlsup_client *client,
    SSL **out)
{
	struct sess_cache *c;
	SSL_SESSION *sess = NULL;
	SSL *ssl = NULL;
	const char *k;
	char *key = NULL;
	int r = SL_ERR_INVALID;

	if (ctx == NULL || host == NULL || *host == '\0' || port == 0 ||
	    port > 65535 || strchr(host, '\n') != NULL ||
	    is_ip_literal(host) != (host_is_ip != 0) ||
	    (client != NULL && (client->id == NULL ||
	    strchr(client->id, '\n') != NULL)))
		return SL_ERR_INVALID;
	if ((c = SSL_CTX_get_ex_data(ctx, ctx_cache_idx)) == NULL)
		return SL_ERR_INVALID;	/* not a tlsup context */
	r = SL_ERR_NOMEM;
	if ((ssl = SSL_new(ctx)) == NULL ||
	    (key = sess_key(sandbox, host, port, client != NULL ?
	    client->id : NULL)) == NULL ||
	    SSL_set_ex_data(ssl, ssl_host_idx, key) != 1)
		goto out;
	k = key;
	key = NULL;	/* transferred: freed with ssl */
	r = SL_ERR_INVALID;
	if (host_is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    host) != 1)
			goto out;
	} else {
		SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
		    X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
		if (SSL_set_tlsext_host_name(ssl, host) != 1 ||
		    SSL_set1_host(ssl, host) != 1)
			goto out;
	}
	if (client != NULL && present(ssl, client) != 0)
		goto out;
	SSL_set_connect_state(ssl);
	/* A session that cannot be set only costs a full handshake. */
	if ((sess = cache_take(c, k)) != NULL &&
	    SSL_set_session(ssl, sess) != 1)
		ERR_clear_error();
	*out = ssl;
	ssl = NULL;	/* transferred */
	r = 0;
 out:
	if (r != 0)
		ERR_clear_error();
	SSL_SESSION_free(sess);
	free(key);
	SSL_free(ssl);
	return r;
}

int
tlsup_pin_of(X509 *cert, char *out)
{
	unsigned char *der = NULL, md[EVP_MAX_MD_SIZE];
	unsigned char b64[TLSUP_PIN_BUFSZ];
	unsigned mdlen = 0;
	int n, r = SL_ERR_INTERNAL;

	if (cert == NULL)
		return SL_ERR_INVALID;
	if ((n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der)) <= 0) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != TLSUP_SHA256_LEN)
		goto out;
	if (EVP_EncodeBlock(b64, md, TLSUP_SHA256_LEN) != TLSUP_PIN_LEN)
		goto out;
	memcpy(out, b64, TLSUP_PIN_BUFSZ);
	r = 0;
 out:
	if (r != 0)
		ERR_clear_error();
	OPENSSL_free(der);
	return r;
}

int
tlsup_pin_ok(const char *pin)
{
	static const char b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p;
	size_t i;

	if (pin == NULL || strlen(pin) != TLSUP_PIN_LEN ||
	    pin[TLSUP_PIN_LEN - 1] != '=')
		return 0;
	for (i = 0; i < TLSUP_PIN_LEN - 1; i++) {
		if ((p = strchr(b64, pin[i])) == NULL)
			return 0;
		/* 32 bytes leave the last character's two low bits zero */
		if (i == TLSUP_PIN_LEN - 2 && ((p - b64) & 3) != 0)
			return 0;
	}
	return 1;
}

/* h2 first, then http/1.1: for an upstream of HTTP/2 streams. */
static const unsigned char alpn_h2[] = "\x02h2\x08http/1.1";

int
tlsup_offer_h2(SSL *ssl)
{
	return SSL_set_alpn_protos(ssl, alpn_h2, sizeof(alpn_h2) - 1) == 0 ?
	    0 : SL_ERR_NOMEM;
}

int
tlsup_is_h2(SSL *ssl)
{
	const unsigned char *p = NULL;
	unsigned len = 0;

	SSL_get0_alpn_selected(ssl, &p, &len);
	return len == 2 && p[0] == 'h' && p[1] == '2';
}

int
tlsup_check_peer(SSL *ssl, char *const *pins, size_t npins, char *reason,
    size_t len)
{
	const unsigned char *alpn = NULL;
	unsigned alpn_len = 0;
	char pin[TLSUP_PIN_BUFSZ];
	X509 *leaf;
	long vr;
	size_t i;
	int r;

	if (!SSL_is_init_finished(ssl)) {
		seterr(reason, len, "upstream-handshake-incomplete");
		return SL_ERR_DENIED;
	}
	if (SSL_version(ssl) < TLS1_2_VERSION) {
		seterr(reason, len, "upstream-tls-version");
		return SL_ERR_DENIED;
	}
	if ((vr = SSL_get_verify_result(ssl)) != X509_V_OK) {
		seterr(reason, len, "upstream-cert-invalid: %s",
		    X509_verify_cert_error_string(vr));
		return SL_ERR_DENIED;
	}
	if ((leaf = SSL_get0_peer_certificate(ssl)) == NULL) {
		seterr(reason, len, "upstream-cert-invalid: no certificate");
		return SL_ERR_DENIED;
	}
	SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
	if (alpn_len != 0 && (alpn_len != ALPN_HTTP11_LEN - 1 ||
	    memcmp(alpn, alpn_http11 + 1, alpn_len) != 0) &&
	    !tlsup_is_h2(ssl)) {
		seterr(reason, len, "upstream-alpn-mismatch");
		return SL_ERR_DENIED;
	}
	if (npins == 0)
		return 0;
	if ((r = tlsup_pin_of(leaf, pin)) != 0) {
		seterr(reason, len, "upstream-pin-error");
		return r;
	}
	for (i = 0; i < npins; i++)
		if (pins[i] != NULL && strcmp(pins[i], pin) == 0)
			return 0;
	seterr(reason, len, "upstream-pin-mismatch");
	return SL_ERR_DENIED;
}

/* Whether an SSL-library reason code says the protocol version was refused. */
static int
version_refused(int reason)
{
	switch (reason) {
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
	case SSL_R_NO_PROTOCOLS_AVAILABLE:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_UNSUPPORTED_SSL_VERSION:
	case SSL_R_WRONG_SSL_VERSION:
	case SSL_R_BAD_PROTOCOL_VERSION_NUMBER:
	case SSL_R_BAD_LEGACY_VERSION:
		return 1;
	default:
		return 0;
	}
}

void
tlsup_handshake_reason(const SSL *ssl, unsigned long err, char *reason,
    size_t len)
{
	const char *what;
	long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (vr != X509_V_OK) {
		seterr(reason, len, "upstream-cert-invalid: %s",
		    X509_verify_cert_error_string(vr));
		return;
	}
	if (err == 0) {
		seterr(reason, len, "upstream-closed");
		return;
	}
	if ((what = ERR_reason_error_string(err)) == NULL)
		what = "unknown error";
	if (ERR_GET_LIB(err) == ERR_LIB_SYS)
		seterr(reason, len, "upstream-closed: %s", what);
	else if (ERR_GET_LIB(err) == ERR_LIB_SSL &&
	    version_refused(ERR_GET_REASON(err)))
		seterr(reason, len, "upstream-tls-version: %s", what);
	else
		seterr(reason, len, "upstream-tls-error: %s", what);
}
