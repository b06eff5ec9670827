/* test_tlsterm.c: the sandbox-facing TLS server, by real handshakes in memory. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/err.h"
#include "keys/ca.h"
#include "keys/tlsterm.h"

#define DAY	86400u
#define HOST	"api.example.test"

/* A mint callback's state: counts calls, can fail on demand. */
struct minter {
	struct ca	*ca;
	unsigned	 validity_s;
	int		 calls;
	int		 fail;		/* returned instead of minting if != 0 */
};

/* What the daemon keeps per sandbox, as far as these tests need. */
struct sandbox {
	struct ca		*ca;
	struct leafcache	*lc;
	struct minter		 m;
};

struct fixture {
	SSL_CTX		*sctx;
	struct sandbox	 a, b;
};

/* One in-memory connection; fill the options before conn_open. */
struct conn {
	/* options */
	SSL_CTX			*cctx;
	const unsigned char	*alpn;		/* wire format; NULL: none */
	unsigned		 alpn_len;
	SSL_SESSION		*sess;		/* to resume; NULL: none */
	const char		*verify_host;	/* NULL: the SNI host */
	const unsigned char	*offer;		/* tlsterm_ssl_alpn; NULL: the default */
	size_t			 offer_len;
	/* results */
	SSL		*c, *s;
	int		 c_state, s_state;	/* 1 done, -1 failed, 0 stuck */
	int		 c_reason, s_reason;	/* ERR_GET_REASON on failure */
};

static const unsigned char ALPN_H2[] = "\x02h2";
static const unsigned char ALPN_BOTH[] = "\x02h2\x08http/1.1\x06spdy/3";
static const unsigned char ALPN_H11[] = "\x08http/1.1";

static int
mint_cb(void *arg, const char *host, EVP_PKEY *key, X509 **out)
{
	struct minter *m = arg;

	m->calls++;
	if (m->fail != 0)
		return m->fail;
	return ca_mint_leaf(m->ca, host, key, m->validity_s, out);
}

static void
sandbox_init(struct sandbox *sb, const char *id, size_t max,
    unsigned rotate_s)
{
	memset(sb, 0, sizeof(*sb));
	assert_int_equal(ca_new(id, NULL, 0, 30 * DAY, &sb->ca), 0);
	assert_int_equal(leafcache_new(max, rotate_s, &sb->lc), 0);
	sb->m.ca = sb->ca;
	sb->m.validity_s = DAY;
}

static void
sandbox_fini(struct sandbox *sb)
{
	leafcache_free(sb->lc);
	ca_free(sb->ca);
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	assert_non_null(fx->sctx = tlsterm_ctx_new());
	sandbox_init(&fx->a, "sb-a", 256, 3600);
	sandbox_init(&fx->b, "sb-b", 256, 3600);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	sandbox_fini(&fx->a);
	sandbox_fini(&fx->b);
	SSL_CTX_free(fx->sctx);
	free(fx);
	return 0;
}

/* A client context trusting up to two CAs, for [minv, maxv] (0: any). */
static SSL_CTX *
client_ctx(X509 *trust1, X509 *trust2, int minv, int maxv)
{
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());

	assert_non_null(c);
	if (trust1 != NULL)
		assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(c),
		    trust1), 1);
	if (trust2 != NULL)
		assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(c),
		    trust2), 1);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	assert_int_equal(SSL_CTX_set_min_proto_version(c, minv), 1);
	assert_int_equal(SSL_CTX_set_max_proto_version(c, maxv), 1);
	return c;
}

/* One handshake step of one side; a side that is done or failed rests. */
static void
step(SSL *ssl, int *st, int *reason)
{
	int rc, e;

	if (*st != 0)
		return;
	if ((rc = SSL_do_handshake(ssl)) == 1) {
		*st = 1;
		return;
	}
	e = SSL_get_error(ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return;
	*st = -1;
	*reason = ERR_GET_REASON(ERR_peek_error());
	ERR_clear_error();
}

/*
 * Makes the server SSL with tlsterm_ssl_new for sb and host, a client
 * from cn's options, joins them by a BIO pair and steps both handshakes
 * until each is done or failed (or stuck, after 64 rounds).
 */
static void
conn_open(struct conn *cn, SSL_CTX *sctx, struct sandbox *sb,
    const char *host)
{
	BIO *bc = NULL, *bs = NULL;
	int i;

	assert_int_equal(tlsterm_ssl_new(sctx, sb->lc, host, mint_cb, &sb->m,
	    ca_cert(sb->ca), &cn->s), 0);
	if (cn->offer != NULL)
		assert_int_equal(tlsterm_ssl_alpn(cn->s, cn->offer,
		    cn->offer_len), 0);
	assert_non_null(cn->c = SSL_new(cn->cctx));
	assert_int_equal(SSL_set_tlsext_host_name(cn->c, host), 1);
	assert_int_equal(SSL_set1_host(cn->c, cn->verify_host != NULL ?
	    cn->verify_host : host), 1);
	if (cn->alpn != NULL)
		assert_int_equal(SSL_set_alpn_protos(cn->c, cn->alpn,
		    cn->alpn_len), 0);
	if (cn->sess != NULL)
		assert_int_equal(SSL_set_session(cn->c, cn->sess), 1);
	SSL_set_connect_state(cn->c);
	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(cn->c, bc, bc);
	SSL_set_bio(cn->s, bs, bs);
	for (i = 0; i < 64 && (cn->c_state == 0 || cn->s_state == 0); i++) {
		step(cn->c, &cn->c_state, &cn->c_reason);
		step(cn->s, &cn->s_state, &cn->s_reason);
	}
}

/*
 * Closes cleanly: the client keeps a session resumable only once it has
 * sent close_notify (SSL_free before that drops it as a bad session).
 */
static void
conn_close(struct conn *cn)
{
	if (cn->c_state == 1)
		(void)SSL_shutdown(cn->c);
	if (cn->s_state == 1)
		(void)SSL_shutdown(cn->s);
	SSL_free(cn->c);
	SSL_free(cn->s);
	cn->c = cn->s = NULL;
}

static void
assert_conn_ok(const struct conn *cn)
{
	assert_int_equal(cn->c_state, 1);
	assert_int_equal(cn->s_state, 1);
	assert_int_equal(SSL_get_verify_result(cn->c), X509_V_OK);
}

/* The client's session, after it has read the server's tickets. */
static SSL_SESSION *
take_session(struct conn *cn)
{
	SSL_SESSION *sess;
	char buf[1];
	int rc;

	rc = SSL_read(cn->c, buf, sizeof(buf));
	assert_true(rc <= 0);
	assert_int_equal(SSL_get_error(cn->c, rc), SSL_ERROR_WANT_READ);
	assert_non_null(sess = SSL_get1_session(cn->c));
	assert_true(SSL_SESSION_is_resumable(sess));
	return sess;
}

/*
 * A connection to host in sb offering sess; returns whether it resumed,
 * and *next (if next is not NULL) gets the client's session after it.
 */
static int
resumes_next(SSL_CTX *sctx, struct sandbox *sb, SSL_CTX *cctx,
    const char *host, SSL_SESSION *sess, SSL_SESSION **next)
{
	struct conn cn = { .cctx = cctx, .sess = sess };
	int reused;

	conn_open(&cn, sctx, sb, host);
	assert_conn_ok(&cn);
	reused = SSL_session_reused(cn.c);
	assert_int_equal(SSL_session_reused(cn.s), reused);
	if (next != NULL)
		*next = take_session(&cn);
	conn_close(&cn);
	return reused;
}

static int
resumes(SSL_CTX *sctx, struct sandbox *sb, SSL_CTX *cctx, const char *host,
    SSL_SESSION *sess)
{
	return resumes_next(sctx, sb, cctx, host, sess, NULL);
}

/* A session from a fresh full handshake with host in sb. */
static SSL_SESSION *
first_session(SSL_CTX *sctx, struct sandbox *sb, SSL_CTX *cctx,
    const char *host)
{
	struct conn cn = { .cctx = cctx };
	SSL_SESSION *sess;

	conn_open(&cn, sctx, sb, host);
	assert_conn_ok(&cn);
	assert_false(SSL_session_reused(cn.c));
	sess = take_session(&cn);
	conn_close(&cn);
	return sess;
}

static void
assert_san_is(X509 *x, const char *host)
{
	GENERAL_NAMES *san;
	const GENERAL_NAME *gn;

	assert_non_null(san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
	    NULL));
	assert_int_equal(sk_GENERAL_NAME_num(san), 1);
	gn = sk_GENERAL_NAME_value(san, 0);
	assert_int_equal(gn->type, GEN_DNS);
	assert_int_equal(ASN1_STRING_length(gn->d.dNSName), strlen(host));
	assert_memory_equal(ASN1_STRING_get0_data(gn->d.dNSName), host,
	    strlen(host));
	GENERAL_NAMES_free(san);
}

static void
test_handshake_verifies(void **state)
{
	struct fixture *fx = *state;
	struct conn cn = { .alpn = ALPN_BOTH,
	    .alpn_len = sizeof(ALPN_BOTH) - 1 };
	SSL_CTX *cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_2_VERSION, 0);
	const unsigned char *sel = NULL;
	unsigned sel_len = 0;
	X509 *peer;

	cn.cctx = cctx;
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_conn_ok(&cn);

	assert_non_null(peer = SSL_get1_peer_certificate(cn.c));
	assert_san_is(peer, HOST);
	assert_int_equal(X509_check_issued(ca_cert(fx->a.ca), peer),
	    X509_V_OK);
	assert_int_equal(X509_verify(peer,
	    X509_get0_pubkey(ca_cert(fx->a.ca))), 1);
	assert_int_not_equal(X509_verify(peer,
	    X509_get0_pubkey(ca_cert(fx->b.ca))), 1);
	X509_free(peer);
	/* The CA is sent as the chain: leaf and CA. */
	assert_int_equal(sk_X509_num(SSL_get_peer_cert_chain(cn.c)), 2);

	SSL_get0_alpn_selected(cn.c, &sel, &sel_len);
	assert_int_equal(sel_len, 2);
	assert_memory_equal(sel, "h2", 2);	/* the default prefers it */
	conn_close(&cn);

	/* The leaf names HOST only: a client expecting another name fails. */
	memset(&cn, 0, sizeof(cn));
	cn.cctx = cctx;
	cn.verify_host = "other.example.test";
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_int_equal(cn.c_state, -1);
	assert_int_equal(cn.s_state, -1);
	assert_int_equal(SSL_get_verify_result(cn.c),
	    X509_V_ERR_HOSTNAME_MISMATCH);
	conn_close(&cn);
	SSL_CTX_free(cctx);
}

/* A client trusting only sandbox B's CA rejects sandbox A's leaves. */
static void
test_other_sandbox_ca_fails(void **state)
{
	struct fixture *fx = *state;
	struct conn cn = { 0 };

	cn.cctx = client_ctx(ca_cert(fx->b.ca), NULL, TLS1_2_VERSION, 0);
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_int_equal(cn.c_state, -1);
	assert_int_equal(cn.s_state, -1);
	assert_int_equal(cn.c_reason, SSL_R_CERTIFICATE_VERIFY_FAILED);
	assert_int_not_equal(SSL_get_verify_result(cn.c), X509_V_OK);
	conn_close(&cn);
	SSL_CTX_free(cn.cctx);
}

/*
 * One connection offering alpn (NULL: none) to a server offering offer
 * (NULL: the default, h2 then http/1.1): want (NULL: none) selected, or
 * with want_ok 0 the no_application_protocol alert.
 */
static void
alpn_case(struct fixture *fx, SSL_CTX *cctx, const unsigned char *alpn,
    unsigned alpn_len, const char *offer, const char *want, int want_ok)
{
	struct conn cn = { .cctx = cctx, .alpn = alpn, .alpn_len = alpn_len };
	const unsigned char *sel = NULL;
	unsigned sel_len = 0;

	if (offer != NULL) {
		cn.offer = (const unsigned char *)offer;
		cn.offer_len = strlen(offer);
	}
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	if (want_ok) {
		assert_conn_ok(&cn);
		SSL_get0_alpn_selected(cn.c, &sel, &sel_len);
		if (want == NULL) {
			assert_int_equal(sel_len, 0);
		} else {
			assert_int_equal(sel_len, strlen(want));
			assert_memory_equal(sel, want, sel_len);
		}
	} else {
		assert_int_equal(cn.s_state, -1);
		assert_int_equal(cn.s_reason, SSL_R_NO_APPLICATION_PROTOCOL);
		assert_int_equal(cn.c_state, -1);
		assert_int_equal(cn.c_reason,
		    SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL);
	}
	conn_close(&cn);
}

static void
test_alpn(void **state)
{
	struct fixture *fx = *state;
	static const int versions[] = { TLS1_2_VERSION, TLS1_3_VERSION };
	static const char H11[] = "\x08http/1.1", H2[] = "\x02h2",
	    H11_H2[] = "\x08http/1.1\x02h2";
	SSL_CTX *cctx;
	size_t i;
	SSL *ssl;

	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		cctx = client_ctx(ca_cert(fx->a.ca), NULL, versions[i],
		    versions[i]);
		/* The default: h2, then http/1.1. */
		alpn_case(fx, cctx, ALPN_H11, sizeof(ALPN_H11) - 1, NULL,
		    "http/1.1", 1);
		alpn_case(fx, cctx, ALPN_BOTH, sizeof(ALPN_BOTH) - 1, NULL,
		    "h2", 1);
		alpn_case(fx, cctx, ALPN_H2, sizeof(ALPN_H2) - 1, NULL, "h2", 1);
		alpn_case(fx, cctx, NULL, 0, NULL, NULL, 1);
		/* http/1.1 alone: an h2-only client fails the handshake. */
		alpn_case(fx, cctx, ALPN_BOTH, sizeof(ALPN_BOTH) - 1, H11,
		    "http/1.1", 1);
		alpn_case(fx, cctx, ALPN_H2, sizeof(ALPN_H2) - 1, H11, NULL, 0);
		alpn_case(fx, cctx, NULL, 0, H11, NULL, 1);
		/* The server's order decides. */
		alpn_case(fx, cctx, ALPN_BOTH, sizeof(ALPN_BOTH) - 1, H11_H2,
		    "http/1.1", 1);
		/* h2 alone: an http/1.1-only client fails. */
		alpn_case(fx, cctx, ALPN_H11, sizeof(ALPN_H11) - 1, H2, NULL, 0);
		alpn_case(fx, cctx, ALPN_BOTH, sizeof(ALPN_BOTH) - 1, H2, "h2",
		    1);
		SSL_CTX_free(cctx);
	}
	/* Lists other than the four are refused. */
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, HOST, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), 0);
	assert_int_equal(tlsterm_ssl_alpn(ssl, (const unsigned char *)
	    "\x06spdy/3", 7), SL_ERR_INVALID);
	assert_int_equal(tlsterm_ssl_alpn(ssl, (const unsigned char *)
	    "\x02h2\x02h2", 6), SL_ERR_INVALID);
	SSL_free(ssl);
}

static void
test_versions(void **state)
{
	struct fixture *fx = *state;
	struct conn cn = { 0 };
	const SSL_CIPHER *ciph;

	/* TLS 1.2: an ECDHE-ECDSA AEAD suite. */
	cn.cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_2_VERSION,
	    TLS1_2_VERSION);
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_conn_ok(&cn);
	assert_int_equal(SSL_version(cn.c), TLS1_2_VERSION);
	assert_non_null(ciph = SSL_get_current_cipher(cn.c));
	assert_int_equal(SSL_CIPHER_get_kx_nid(ciph), NID_kx_ecdhe);
	assert_int_equal(SSL_CIPHER_get_auth_nid(ciph), NID_auth_ecdsa);
	assert_true(SSL_CIPHER_is_aead(ciph));
	conn_close(&cn);
	SSL_CTX_free(cn.cctx);

	memset(&cn, 0, sizeof(cn));
	cn.cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_3_VERSION,
	    TLS1_3_VERSION);
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_conn_ok(&cn);
	assert_int_equal(SSL_version(cn.c), TLS1_3_VERSION);
	conn_close(&cn);
	SSL_CTX_free(cn.cctx);

	/* A TLS 1.1 client (allowed to offer it at all) is refused. */
	memset(&cn, 0, sizeof(cn));
	cn.cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_VERSION,
	    TLS1_1_VERSION);
	assert_int_equal(SSL_CTX_set_cipher_list(cn.cctx,
	    "DEFAULT:@SECLEVEL=0"), 1);
	conn_open(&cn, fx->sctx, &fx->a, HOST);
	assert_int_equal(cn.s_state, -1);
	assert_int_equal(cn.s_reason, SSL_R_UNSUPPORTED_PROTOCOL);
	assert_int_equal(cn.c_state, -1);
	assert_int_equal(cn.c_reason, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION);
	conn_close(&cn);
	SSL_CTX_free(cn.cctx);
}

/* A second connection to a host gets the cached leaf: one mint. */
static void
test_cache_reuse(void **state)
{
	struct fixture *fx = *state;
	struct conn c1 = { 0 }, c2 = { 0 }, c3 = { 0 };
	SSL_CTX *cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_2_VERSION, 0);
	X509 *p1, *p2;

	c1.cctx = c2.cctx = c3.cctx = cctx;
	conn_open(&c1, fx->sctx, &fx->a, HOST);
	assert_conn_ok(&c1);
	conn_open(&c2, fx->sctx, &fx->a, HOST);
	assert_conn_ok(&c2);
	assert_int_equal(fx->a.m.calls, 1);
	assert_int_equal(leafcache_count(fx->a.lc), 1);
	assert_ptr_equal(SSL_get_certificate(c1.s), SSL_get_certificate(c2.s));
	assert_non_null(p1 = SSL_get1_peer_certificate(c1.c));
	assert_non_null(p2 = SSL_get1_peer_certificate(c2.c));
	assert_int_equal(X509_cmp(p1, p2), 0);
	X509_free(p1);
	X509_free(p2);

	/* Another host is another leaf, with the same key. */
	conn_open(&c3, fx->sctx, &fx->a, "www.example.test");
	assert_conn_ok(&c3);
	assert_int_equal(fx->a.m.calls, 2);
	assert_int_equal(leafcache_count(fx->a.lc), 2);
	assert_ptr_not_equal(SSL_get_certificate(c1.s),
	    SSL_get_certificate(c3.s));
	assert_int_equal(EVP_PKEY_eq(SSL_get_privatekey(c1.s),
	    SSL_get_privatekey(c3.s)), 1);

	/* The sandboxes' caches and keys are their own. */
	assert_int_equal(leafcache_count(fx->b.lc), 0);
	conn_close(&c1);
	conn_close(&c2);
	conn_close(&c3);
	SSL_CTX_free(cctx);
}

/* leafcache_get for host, checking the mint count moves by minted. */
static void
get_host(struct sandbox *sb, const char *host, int minted)
{
	int before = sb->m.calls;
	X509 *leaf = NULL;
	EVP_PKEY *key = NULL;

	assert_int_equal(leafcache_get(sb->lc, host, mint_cb, &sb->m,
	    ca_cert(sb->ca), &leaf, &key), 0);
	assert_int_equal(sb->m.calls - before, minted);
	assert_san_is(leaf, host);
	X509_free(leaf);
	EVP_PKEY_free(key);
}

static void
test_cache_lru(void **state)
{
	struct sandbox sb;
	char host[32];
	size_t i, max = 8;

	(void)state;
	sandbox_init(&sb, "sb-lru", max, 3600);
	for (i = 0; i < max; i++) {
		snprintf(host, sizeof(host), "h%zu.test", i);
		get_host(&sb, host, 1);
	}
	assert_int_equal(leafcache_count(sb.lc), max);
	get_host(&sb, "h0.test", 0);		/* h1 is now the oldest */
	get_host(&sb, "h8.test", 1);		/* evicts h1 */
	assert_int_equal(leafcache_count(sb.lc), max);
	get_host(&sb, "h0.test", 0);
	get_host(&sb, "h1.test", 1);		/* was evicted; evicts h2 */
	get_host(&sb, "h3.test", 0);
	get_host(&sb, "h2.test", 1);

	/* max + 10 distinct hosts: the cache stays at max. */
	for (i = 0; i < max + 10; i++) {
		snprintf(host, sizeof(host), "n%zu.test", i);
		get_host(&sb, host, 1);
		assert_true(leafcache_count(sb.lc) <= max);
	}
	assert_int_equal(leafcache_count(sb.lc), max);
	/* The newest max are cached, the first ten not. */
	get_host(&sb, "n17.test", 0);
	get_host(&sb, "n10.test", 0);
	get_host(&sb, "n9.test", 1);
	sandbox_fini(&sb);
}

/* A leaf with less than 10 minutes left is minted again. */
static void
test_cache_near_expiry(void **state)
{
	struct sandbox sb;

	(void)state;
	sandbox_init(&sb, "sb-exp", 16, 3600);
	sb.m.validity_s = 300;
	get_host(&sb, HOST, 1);
	get_host(&sb, HOST, 1);
	assert_int_equal(leafcache_count(sb.lc), 1);
	sb.m.validity_s = 3600;
	get_host(&sb, HOST, 1);
	get_host(&sb, HOST, 0);
	sandbox_fini(&sb);
}

/* A replaced CA: cached leaves of the old one are not handed out. */
static void
test_cache_ca_replaced(void **state)
{
	struct sandbox sb;
	struct ca *other = NULL;
	X509 *leaf = NULL, *xs = (X509 *)&xs, *sentinel = xs;
	EVP_PKEY *key = NULL;

	(void)state;
	sandbox_init(&sb, "sb-re", 16, 3600);
	get_host(&sb, HOST, 1);
	ca_free(sb.ca);
	assert_int_equal(ca_new("sb-re", NULL, 0, DAY, &sb.ca), 0);
	sb.m.ca = sb.ca;
	get_host(&sb, HOST, 1);
	assert_int_equal(leafcache_get(sb.lc, HOST, mint_cb, &sb.m,
	    ca_cert(sb.ca), &leaf, &key), 0);
	assert_int_equal(X509_check_issued(ca_cert(sb.ca), leaf), X509_V_OK);
	X509_free(leaf);
	EVP_PKEY_free(key);

	/* A mint by another CA than the chain's is refused, not cached. */
	assert_int_equal(ca_new("sb-re", NULL, 0, DAY, &other), 0);
	sb.m.ca = other;
	leaf = sentinel;
	assert_int_equal(leafcache_get(sb.lc, "www.example.test", mint_cb,
	    &sb.m, ca_cert(sb.ca), &leaf, &key), SL_ERR_INTERNAL);
	assert_ptr_equal(leaf, sentinel);
	assert_int_equal(leafcache_count(sb.lc), 1);
	ca_free(other);
	sandbox_fini(&sb);
}

static void
test_mint_fails(void **state)
{
	struct fixture *fx = *state;
	SSL *ss = (SSL *)&ss, *sentinel = ss, *ssl = ss;

	fx->a.m.fail = SL_ERR_DENIED;
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, HOST, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), SL_ERR_DENIED);
	assert_ptr_equal(ssl, sentinel);
	assert_int_equal(fx->a.m.calls, 1);
	assert_int_equal(leafcache_count(fx->a.lc), 0);

	/* A positive return is not an error code of ours. */
	fx->a.m.fail = 1;
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, HOST, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), SL_ERR_INTERNAL);
	assert_ptr_equal(ssl, sentinel);

	/* ca_mint_leaf refuses a name that is not normalised. */
	fx->a.m.fail = 0;
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, "API.example.test",
	    mint_cb, &fx->a.m, ca_cert(fx->a.ca), &ssl), SL_ERR_INVALID);
	assert_ptr_equal(ssl, sentinel);

	/* The failures left nothing behind; the next mint works. */
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, HOST, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), 0);
	assert_ptr_not_equal(ssl, sentinel);
	assert_int_equal(leafcache_count(fx->a.lc), 1);
	SSL_free(ssl);
}

static void
test_invalid_args(void **state)
{
	struct fixture *fx = *state;
	struct leafcache *ls = (struct leafcache *)&ls, *sentinel = ls, *lc = ls;
	char longhost[300];
	SSL *ssl = NULL;
	X509 *leaf = NULL;
	EVP_PKEY *key = NULL;

	assert_int_equal(leafcache_new(0, 3600, &lc), SL_ERR_INVALID);
	assert_int_equal(leafcache_new(16, 0, &lc), SL_ERR_INVALID);
	assert_int_equal(leafcache_new((size_t)1 << 21, 3600, &lc),
	    SL_ERR_INVALID);
	assert_int_equal(leafcache_new(16, 3600, NULL), SL_ERR_INVALID);
	assert_ptr_equal(lc, sentinel);

	memset(longhost, 'a', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	assert_int_equal(leafcache_get(fx->a.lc, "", mint_cb, &fx->a.m,
	    ca_cert(fx->a.ca), &leaf, &key), SL_ERR_INVALID);
	assert_int_equal(leafcache_get(fx->a.lc, longhost, mint_cb, &fx->a.m,
	    ca_cert(fx->a.ca), &leaf, &key), SL_ERR_INVALID);
	assert_int_equal(leafcache_get(fx->a.lc, HOST, NULL, &fx->a.m,
	    ca_cert(fx->a.ca), &leaf, &key), SL_ERR_INVALID);
	assert_int_equal(leafcache_get(fx->a.lc, HOST, mint_cb, &fx->a.m,
	    NULL, &leaf, &key), SL_ERR_INVALID);
	assert_int_equal(tlsterm_ssl_new(fx->sctx, NULL, HOST, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), SL_ERR_INVALID);
	assert_int_equal(tlsterm_ssl_new(fx->sctx, fx->a.lc, NULL, mint_cb,
	    &fx->a.m, ca_cert(fx->a.ca), &ssl), SL_ERR_INVALID);
	assert_null(ssl);
	assert_null(leaf);
	assert_int_equal(fx->a.m.calls, 0);
	leafcache_free(NULL);
}

struct racer {
	struct sandbox	*sb;
	int		 errors;
};

static void *
racer_run(void *arg)
{
	struct racer *r = arg;
	X509 *leaf;
	EVP_PKEY *key;
	int i;

	for (i = 0; i < 50; i++) {
		if (leafcache_get(r->sb->lc, HOST, mint_cb, &r->sb->m,
		    ca_cert(r->sb->ca), &leaf, &key) != 0) {
			r->errors++;
			continue;
		}
		X509_free(leaf);
		EVP_PKEY_free(key);
	}
	return NULL;
}

/* Many threads asking for one host at once: minted once. */
static void
test_concurrent_once(void **state)
{
	struct fixture *fx = *state;
	struct racer rs[8];
	pthread_t th[8];
	size_t i;

	for (i = 0; i < 8; i++) {
		rs[i].sb = &fx->a;
		rs[i].errors = 0;
		assert_int_equal(pthread_create(&th[i], NULL, racer_run,
		    &rs[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(rs[i].errors, 0);
	}
	assert_int_equal(fx->a.m.calls, 1);
	assert_int_equal(leafcache_count(fx->a.lc), 1);
}

static const int both_versions[] = { TLS1_2_VERSION, TLS1_3_VERSION };

/* A ticket resumes in its sandbox for its host, nowhere else. */
static void
test_ticket_isolation(void **state)
{
	struct fixture *fx = *state;
	SSL_CTX *cctx;
	SSL_SESSION *sess;
	size_t i;

	for (i = 0; i < 2; i++) {
		cctx = client_ctx(ca_cert(fx->a.ca), ca_cert(fx->b.ca),
		    both_versions[i], both_versions[i]);
		sess = first_session(fx->sctx, &fx->a, cctx, HOST);
		assert_true(resumes(fx->sctx, &fx->a, cctx, HOST, sess));
		assert_true(resumes(fx->sctx, &fx->a, cctx, HOST, sess));
		assert_false(resumes(fx->sctx, &fx->b, cctx, HOST, sess));
		assert_false(resumes(fx->sctx, &fx->a, cctx,
		    "www.example.test", sess));
		SSL_SESSION_free(sess);

		/* And B's own tickets work in B. */
		sess = first_session(fx->sctx, &fx->b, cctx, HOST);
		assert_true(resumes(fx->sctx, &fx->b, cctx, HOST, sess));
		assert_false(resumes(fx->sctx, &fx->a, cctx, HOST, sess));
		SSL_SESSION_free(sess);
		SSL_CTX_free(cctx);
	}
}

/* Tickets of a freed leafcache die with it, even for the same CA. */
static void
test_ticket_dies_with_cache(void **state)
{
	struct fixture *fx = *state;
	SSL_CTX *cctx;
	SSL_SESSION *sess;
	size_t i;

	for (i = 0; i < 2; i++) {
		cctx = client_ctx(ca_cert(fx->a.ca), NULL, both_versions[i],
		    both_versions[i]);
		sess = first_session(fx->sctx, &fx->a, cctx, HOST);
		leafcache_free(fx->a.lc);
		assert_int_equal(leafcache_new(256, 3600, &fx->a.lc), 0);
		assert_false(resumes(fx->sctx, &fx->a, cctx, HOST, sess));
		SSL_SESSION_free(sess);
		SSL_CTX_free(cctx);
	}
}

/*
 * The previous key still opens tickets, and the client gets a new one
 * under the current key; the key before the previous opens nothing.
 */
static void
test_ticket_rotation(void **state)
{
	struct fixture *fx = *state;
	SSL_CTX *cctx;
	SSL_SESSION *sess, *renewed = NULL;
	size_t i;

	for (i = 0; i < 2; i++) {
		cctx = client_ctx(ca_cert(fx->a.ca), NULL, both_versions[i],
		    both_versions[i]);
		sess = first_session(fx->sctx, &fx->a, cctx, HOST);
		assert_int_equal(leafcache_rotate_tickets(fx->a.lc), 0);
		assert_true(resumes_next(fx->sctx, &fx->a, cctx, HOST, sess,
		    &renewed));
		assert_int_equal(leafcache_rotate_tickets(fx->a.lc), 0);
		assert_false(resumes(fx->sctx, &fx->a, cctx, HOST, sess));
		assert_true(resumes(fx->sctx, &fx->a, cctx, HOST, renewed));
		SSL_SESSION_free(renewed);
		SSL_SESSION_free(sess);
		SSL_CTX_free(cctx);
	}
}

/*
 * TLS 1.3 clients use a ticket once: every resumption must hand out a
 * fresh one, or the next connection falls back to a full handshake.
 */
static void
test_ticket_renewed_tls13(void **state)
{
	struct fixture *fx = *state;
	SSL_CTX *cctx = client_ctx(ca_cert(fx->a.ca), NULL, TLS1_3_VERSION,
	    TLS1_3_VERSION);
	SSL_SESSION *s1, *s2 = NULL, *s3 = NULL;
	const unsigned char *t1, *t2;
	size_t l1, l2;

	s1 = first_session(fx->sctx, &fx->a, cctx, HOST);
	assert_true(resumes_next(fx->sctx, &fx->a, cctx, HOST, s1, &s2));
	SSL_SESSION_get0_ticket(s1, &t1, &l1);
	SSL_SESSION_get0_ticket(s2, &t2, &l2);
	assert_true(l1 > 0 && l2 > 0);
	assert_false(l1 == l2 && memcmp(t1, t2, l1) == 0);
	assert_true(resumes_next(fx->sctx, &fx->a, cctx, HOST, s2, &s3));
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
	SSL_SESSION_free(s3);
	SSL_CTX_free(cctx);
}

/* Rotation by age: two intervals without use retire both keys. */
static void
test_ticket_rotation_by_time(void **state)
{
	struct fixture *fx = *state;
	struct sandbox sb;
	SSL_CTX *cctx;
	SSL_SESSION *s12, *s13;

	sandbox_init(&sb, "sb-time", 16, 1);
	cctx = client_ctx(ca_cert(sb.ca), NULL, TLS1_2_VERSION,
	    TLS1_2_VERSION);
	s12 = first_session(fx->sctx, &sb, cctx, HOST);
	SSL_CTX_free(cctx);
	cctx = client_ctx(ca_cert(sb.ca), NULL, TLS1_3_VERSION,
	    TLS1_3_VERSION);
	s13 = first_session(fx->sctx, &sb, cctx, HOST);
	sleep(2);
	assert_false(resumes(fx->sctx, &sb, cctx, HOST, s13));
	SSL_CTX_free(cctx);
	cctx = client_ctx(ca_cert(sb.ca), NULL, TLS1_2_VERSION,
	    TLS1_2_VERSION);
	assert_false(resumes(fx->sctx, &sb, cctx, HOST, s12));
	SSL_CTX_free(cctx);
	SSL_SESSION_free(s12);
	SSL_SESSION_free(s13);
	sandbox_fini(&sb);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_handshake_verifies,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_sandbox_ca_fails,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_alpn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_cache_reuse, setup,
		    teardown),
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_cache_near_expiry),
		cmocka_unit_test(test_cache_ca_replaced),
		cmocka_unit_test_setup_teardown(test_mint_fails, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_invalid_args, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_once, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ticket_isolation, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ticket_dies_with_cache,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_ticket_renewed_tls13,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_ticket_rotation, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ticket_rotation_by_time,
		    setup, teardown),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
