/* test_tlsup.c: TLS towards upstreams: trust, host names, pins, sessions. */
#include "autoconf.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util/err.h"
#include "keys/pemkey.h"
#include "keys/tlsup.h"

#define DAY	86400L

/* A self-signed P-256 certificate and its pin, computed with openssl(1). */
static const char kat_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfTCCASOgAwIBAgIUEd+E4WDkjf/9WszjlsoIeYt5oMwwCgYIKoZIzj0EAwIw\n"
    "EzERMA8GA1UEAwwIa2F0LnRlc3QwIBcNMjYxMjAxMDMyMjA1WhgPMjEyNjExMDcw\n"
    "MzIyMDVaMBMxETAPBgNVBAMMCGthdC50ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0D\n"
    "AQcDQgAER7sv10Yutn7s0d454S5ubrE/gWS3p5W6tHINJkOLUd+NteUZ1nitbYPF\n"
    "0Qw20N7Mk0CzkTt9Hb9vC+7S2F1fG6NTMFEwHQYDVR0OBBYEFIrM/ZxGd4SdDLPx\n"
    "vcD+Y8cKIPN2MB8GA1UdIwQYMBaAFIrM/ZxGd4SdDLPxvcD+Y8cKIPN2MA8GA1Ud\n"
    "EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgUsy+rHK2J0+fg+JHZQmJIgBY\n"
    "Gp2+8/QUdR5YjteSKdwCIQDPPjRpseUZ8RumTj+rIgfImd/AzLGzI0P/JSTqt/HB\n"
    "tg==\n"
    "-----END CERTIFICATE-----\n";
static const char kat_pin[] = "gwm6usNOQUH9YHL38pWVuw5i4vBjb1NHLMnuRTwujO0=";

/* Everything one test needs: a PKI on disk and a tlsup over it. */
struct fx {
	EVP_PKEY	*root_key, *other_key, *key;
	X509		*root;		/* in ca_path */
	X509		*other_root;	/* in other_path: an unrelated CA */
	X509		*good;		/* SAN DNS:up.test, by root */
	X509		*self;		/* SAN DNS:up.test, self-signed */
	X509		*expired;	/* SAN DNS:up.test, by root, past */
	X509		*wrong;		/* SAN DNS:other.test, by root */
	X509		*ip;		/* SAN IP:127.0.0.1, IP:::1, by root */
	X509		*cn_only;	/* CN=up.test, no SAN, by root */
	char		 ca_path[64];
	char		 other_path[64];
	struct tlsup	*t;
	SSL_CTX		*cctx;		/* t's context for ca_path */
};

/* A server's side of one handshake. */
struct srv {
	const char	*alpn_pick;	/* NULL: no ALPN callback */
	unsigned char	 offered[64];
	unsigned	 offered_len;
};

/* One connection: our client against a test server over a BIO pair. */
struct link {
	SSL		*c, *s;
	unsigned long	 cerr;		/* the client's first error, if failed */
	int		 ok;		/* both ends finished the handshake */
};

static void
add_ext(X509 *x, X509V3_CTX *v3, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, v3, nid, value);

	assert_non_null(ext);
	assert_int_equal(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
}

/*
 * A certificate for key, valid from `from` to `to` seconds from now, signed
 * by issuer (NULL: self-signed); san is an X509V3 config string or NULL.
 */
static X509 *
make_cert(EVP_PKEY *key, const char *cn, const char *san, int is_ca,
    X509 *issuer, EVP_PKEY *issuer_key, long from, long to)
{
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX v3;
	unsigned char serial[8];
	BIGNUM *bn;

	assert_non_null(x);
	assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
	assert_int_equal(RAND_bytes(serial, sizeof(serial)), 1);
	serial[0] &= 0x7f;
	assert_non_null(bn = BN_bin2bn(serial, sizeof(serial), NULL));
	assert_non_null(BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)));
	BN_free(bn);
	name = X509_get_subject_name(x);
	assert_int_equal(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0), 1);
	assert_int_equal(X509_set_issuer_name(x, issuer != NULL ?
	    X509_get_subject_name(issuer) : name), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), from));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), to));
	assert_int_equal(X509_set_pubkey(x, key), 1);
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, issuer != NULL ? issuer : x, x, NULL, NULL, 0);
	add_ext(x, &v3, NID_basic_constraints,
	    is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
	add_ext(x, &v3, NID_key_usage, is_ca ?
	    "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
	add_ext(x, &v3, NID_subject_key_identifier, "hash");
	if (!is_ca)
		add_ext(x, &v3, NID_ext_key_usage, "serverAuth");
	if (issuer != NULL)
		add_ext(x, &v3, NID_authority_key_identifier, "keyid:always");
	if (san != NULL)
		add_ext(x, &v3, NID_subject_alt_name, san);
	assert_true(X509_sign(x, issuer_key != NULL ? issuer_key : key,
	    EVP_sha256()) > 0);
	return x;
}

static EVP_PKEY *
make_key(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	assert_non_null(k);
	return k;
}

/* Writes x as PEM to a fresh temporary file named in path. */
static void
write_pem(X509 *x, char *path, size_t len)
{
	FILE *f;
	int fd;

	snprintf(path, len, "/tmp/test_tlsup.XXXXXX");
	assert_true((fd = mkstemp(path)) >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	if (x != NULL)
		assert_int_equal(PEM_write_X509(f, x), 1);
	assert_int_equal(fclose(f), 0);
}

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[256];

	assert_non_null(f);
	f->root_key = make_key();
	f->other_key = make_key();
	f->key = make_key();
	f->root = make_cert(f->root_key, "test root", NULL, 1, NULL, NULL,
	    -DAY, 30 * DAY);
	f->other_root = make_cert(f->other_key, "other root", NULL, 1, NULL,
	    NULL, -DAY, 30 * DAY);
	f->good = make_cert(f->key, "up.test", "DNS:up.test", 0, f->root,
	    f->root_key, -DAY, 7 * DAY);
	f->self = make_cert(f->key, "up.test", "DNS:up.test", 0, NULL, NULL,
	    -DAY, 7 * DAY);
	f->expired = make_cert(f->key, "up.test", "DNS:up.test", 0, f->root,
	    f->root_key, -2 * DAY, -DAY);
	f->wrong = make_cert(f->key, "other.test", "DNS:other.test", 0,
	    f->root, f->root_key, -DAY, 7 * DAY);
	f->ip = make_cert(f->key, "ip", "IP:127.0.0.1,IP:::1", 0, f->root,
	    f->root_key, -DAY, 7 * DAY);
	f->cn_only = make_cert(f->key, "up.test", NULL, 0, f->root,
	    f->root_key, -DAY, 7 * DAY);
	write_pem(f->root, f->ca_path, sizeof(f->ca_path));
	write_pem(f->other_root, f->other_path, sizeof(f->other_path));
	assert_int_equal(tlsup_new(f->ca_path, &f->t), 0);
	assert_int_equal(tlsup_ctx(f->t, NULL, &f->cctx, err, sizeof(err)),
	    0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	tlsup_free(f->t);
	unlink(f->ca_path);
	unlink(f->other_path);
	X509_free(f->root);
	X509_free(f->other_root);
	X509_free(f->good);
	X509_free(f->self);
	X509_free(f->expired);
	X509_free(f->wrong);
	X509_free(f->ip);
	X509_free(f->cn_only);
	EVP_PKEY_free(f->root_key);
	EVP_PKEY_free(f->other_key);
	EVP_PKEY_free(f->key);
	free(f);
	return 0;
}

static int
alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned inlen, void *arg)
{
	struct srv *sv = arg;

	assert_true(inlen <= sizeof(sv->offered));
	memcpy(sv->offered, in, inlen);
	sv->offered_len = inlen;
	*out = (const unsigned char *)sv->alpn_pick;
	*outlen = (unsigned char)strlen(sv->alpn_pick);
	return SSL_TLSEXT_ERR_OK;
}

/* A server context presenting cert; max_ver 0 means no upper bound. */
static SSL_CTX *
server_ctx(X509 *cert, EVP_PKEY *key, int max_ver, struct srv *sv)
{
	SSL_CTX *s = SSL_CTX_new(TLS_server_method());

	assert_non_null(s);
	assert_int_equal(SSL_CTX_use_certificate(s, cert), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(s, key), 1);
	if (max_ver != 0) {
		/* TLS 1.1 needs SHA-1, which security level 1 refuses */
		SSL_CTX_set_security_level(s, 0);
		assert_int_equal(SSL_CTX_set_min_proto_version(s, 0), 1);
		assert_int_equal(SSL_CTX_set_max_proto_version(s, max_ver), 1);
	}
	if (sv != NULL && sv->alpn_pick != NULL)
		SSL_CTX_set_alpn_select_cb(s, alpn_cb, sv);
	return s;
}

static int
wants_io(int e)
{
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/*
 * Steps both ends over a BIO pair until both finish or one fails.  Returns
 * 1 if both finished; on the client's failure, *cerr is its first error.
 */
static int
handshake(SSL *c, SSL *s, unsigned long *cerr)
{
	BIO *bc = NULL, *bs = NULL;
	int i, rc = 0, rs = 0, sdead = 0;

	*cerr = 0;
	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(c, bc, bc);
	SSL_set_bio(s, bs, bs);
	SSL_set_accept_state(s);
	for (i = 0; i < 64; i++) {
		if (rc != 1 && (rc = SSL_do_handshake(c)) != 1 &&
		    !wants_io(SSL_get_error(c, rc))) {
			*cerr = ERR_peek_error();
			ERR_clear_error();
			return 0;
		}
		if (!sdead && rs != 1 && (rs = SSL_do_handshake(s)) != 1 &&
		    !wants_io(SSL_get_error(s, rs))) {
			sdead = 1;	/* the client reads its alert next */
			ERR_clear_error();
		}
		if (rc == 1 && rs == 1)
			return 1;
	}
	return 0;
}

static void
link_open(struct link *l, SSL_CTX *cctx, SSL_CTX *sctx, const char *host,
    int is_ip)
{
	memset(l, 0, sizeof(*l));
	assert_int_equal(tlsup_ssl_new(cctx, "sb1", host, is_ip, 443, &l->c), 0);
	assert_non_null(l->s = SSL_new(sctx));
	l->ok = handshake(l->c, l->s, &l->cerr);
}

/*
 * Closes both ends.  After a handshake the client sends close_notify first:
 * OpenSSL marks the session of an SSL freed without it unresumable.
 */
static void
link_close(struct link *l)
{
	if (l->ok)
		assert_true(SSL_shutdown(l->c) >= 0);
	ERR_clear_error();
	SSL_free(l->c);
	SSL_free(l->s);
	memset(l, 0, sizeof(*l));
}

/* Lets the client take in what the server sent after the handshake. */
static void
client_drain(struct link *l)
{
	char b;
	int n = SSL_read(l->c, &b, 1);

	assert_int_equal(n, -1);
	assert_int_equal(SSL_get_error(l->c, n), SSL_ERROR_WANT_READ);
	ERR_clear_error();
}

/* Connects to a server with cert as host; expects the handshake to fail. */
static void
assert_refused(struct fx *f, X509 *cert, const char *host, int is_ip,
    int verr)
{
	SSL_CTX *s = server_ctx(cert, f->key, 0, NULL);
	struct link l;
	char reason[TLSUP_REASON_BUFSZ], want[TLSUP_REASON_BUFSZ];

	link_open(&l, f->cctx, s, host, is_ip);
	assert_false(l.ok);
	assert_int_not_equal(l.cerr, 0);
	tlsup_handshake_reason(l.c, l.cerr, reason, sizeof(reason));
	snprintf(want, sizeof(want), "upstream-cert-invalid: %s",
	    X509_verify_cert_error_string(verr));
	assert_string_equal(reason, want);
	/* and should a caller ask anyway, the check refuses it too */
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, reason,
	    sizeof(reason)), SL_ERR_DENIED);
	assert_string_equal(reason, "upstream-handshake-incomplete");
	link_close(&l);
	SSL_CTX_free(s);
}

static void
t_good(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, 0, NULL);
	struct link l;
	char reason[TLSUP_REASON_BUFSZ] = "";

	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, reason,
	    sizeof(reason)), 0);
	assert_string_equal(reason, "");
	assert_true(SSL_version(l.c) >= TLS1_2_VERSION);
	assert_string_equal(SSL_get_servername(l.s, TLSEXT_NAMETYPE_host_name),
	    "up.test");
	assert_int_equal(SSL_get_verify_result(l.c), X509_V_OK);
	link_close(&l);
	SSL_CTX_free(s);
}

static void
t_self_signed(void **state)
{
	struct fx *f = *state;

	assert_refused(f, f->self, "up.test", 0,
	    X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT);
}

static void
t_expired(void **state)
{
	struct fx *f = *state;

	assert_refused(f, f->expired, "up.test", 0,
	    X509_V_ERR_CERT_HAS_EXPIRED);
}

static void
t_wrong_host(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->wrong, f->key, 0, NULL);
	struct link l;

	assert_refused(f, f->wrong, "up.test", 0,
	    X509_V_ERR_HOSTNAME_MISMATCH);
	/* the same certificate is fine for the name it carries */
	link_open(&l, f->cctx, s, "other.test", 0);
	assert_true(l.ok);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, NULL, 0), 0);
	link_close(&l);
	SSL_CTX_free(s);
}

/* A certificate naming the host only in its CN is not accepted. */
static void
t_cn_is_not_a_name(void **state)
{
	struct fx *f = *state;

	assert_refused(f, f->cn_only, "up.test", 0,
	    X509_V_ERR_HOSTNAME_MISMATCH);
}

/* A root the CA file does not hold is not trusted. */
static void
t_other_ca(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, 0, NULL);
	SSL_CTX *other = NULL;
	struct link l;
	char reason[TLSUP_REASON_BUFSZ], want[TLSUP_REASON_BUFSZ];

	assert_int_equal(tlsup_ctx(f->t, f->other_path, &other, NULL, 0), 0);
	link_open(&l, other, s, "up.test", 0);
	assert_false(l.ok);
	tlsup_handshake_reason(l.c, l.cerr, reason, sizeof(reason));
	snprintf(want, sizeof(want), "upstream-cert-invalid: %s",
	    X509_verify_cert_error_string(
	    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY));
	assert_string_equal(reason, want);
	link_close(&l);
	SSL_CTX_free(s);
}

static void
t_tls11_refused(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, TLS1_1_VERSION, NULL);
	struct link l;
	char reason[TLSUP_REASON_BUFSZ];

	link_open(&l, f->cctx, s, "up.test", 0);
	assert_false(l.ok);
	assert_int_not_equal(l.cerr, 0);
	tlsup_handshake_reason(l.c, l.cerr, reason, sizeof(reason));
	assert_true(strncmp(reason, "upstream-tls-version: ",
	    strlen("upstream-tls-version: ")) == 0);
	link_close(&l);
	SSL_CTX_free(s);
}

/* A TLS 1.2-only server is fine. */
static void
t_tls12_ok(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, TLS1_2_VERSION, NULL);
	struct link l;

	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_int_equal(SSL_version(l.c), TLS1_2_VERSION);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, NULL, 0), 0);
	link_close(&l);
	SSL_CTX_free(s);
}

static void
t_ip_san(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->ip, f->key, 0, NULL);
	struct link l;

	link_open(&l, f->cctx, s, "127.0.0.1", 1);
	assert_true(l.ok);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, NULL, 0), 0);
	assert_null(SSL_get_servername(l.s, TLSEXT_NAMETYPE_host_name));
	link_close(&l);

	link_open(&l, f->cctx, s, "::1", 1);
	assert_true(l.ok);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, NULL, 0), 0);
	link_close(&l);
	SSL_CTX_free(s);

	assert_refused(f, f->ip, "127.0.0.2", 1,
	    X509_V_ERR_IP_ADDRESS_MISMATCH);
	/* a DNS SAN does not cover an address */
	assert_refused(f, f->good, "127.0.0.1", 1,
	    X509_V_ERR_IP_ADDRESS_MISMATCH);
}

/* The pin of key, computed without tlsup. */
static void
pin_of_key(EVP_PKEY *key, char *out)
{
	unsigned char *der = NULL, md[32];
	unsigned mdlen = 0;
	int n;

	assert_true((n = i2d_PUBKEY(key, &der)) > 0);
	assert_int_equal(EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(),
	    NULL), 1);
	assert_int_equal(EVP_EncodeBlock((unsigned char *)out, md, 32),
	    TLSUP_PIN_LEN);
	OPENSSL_free(der);
}

static void
t_pins(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, 0, NULL);
	char good[TLSUP_PIN_BUFSZ], bad[TLSUP_PIN_BUFSZ], got[TLSUP_PIN_BUFSZ];
	char kat[TLSUP_PIN_BUFSZ], reason[TLSUP_REASON_BUFSZ];
	char *one[1], *wrong[1], *several[3];
	struct link l;

	pin_of_key(f->key, good);
	pin_of_key(f->root_key, bad);
	assert_string_not_equal(good, bad);
	assert_true(tlsup_pin_ok(good));
	assert_int_equal(tlsup_pin_of(f->good, got), 0);
	assert_string_equal(got, good);
	one[0] = good;
	wrong[0] = bad;
	several[0] = bad;
	memcpy(kat, kat_pin, sizeof(kat));
	several[1] = kat;
	several[2] = good;

	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_int_equal(tlsup_check_peer(l.c, one, 1, reason, sizeof(reason)),
	    0);
	assert_int_equal(tlsup_check_peer(l.c, wrong, 1, reason,
	    sizeof(reason)), SL_ERR_DENIED);
	assert_string_equal(reason, "upstream-pin-mismatch");
	assert_int_equal(tlsup_check_peer(l.c, several, 3, reason,
	    sizeof(reason)), 0);
	assert_int_equal(tlsup_check_peer(l.c, several, 2, reason,
	    sizeof(reason)), SL_ERR_DENIED);
	assert_string_equal(reason, "upstream-pin-mismatch");
	/* a cut reason buffer still holds a terminated prefix */
	assert_int_equal(tlsup_check_peer(l.c, wrong, 1, reason, 9),
	    SL_ERR_DENIED);
	assert_string_equal(reason, "upstream");
	link_close(&l);
	SSL_CTX_free(s);
}

static void
t_pin_format(void **state)
{
	BIO *b = BIO_new_mem_buf(kat_pem, -1);
	X509 *x;
	char pin[TLSUP_PIN_BUFSZ];
	char bad[TLSUP_PIN_BUFSZ];

	assert_non_null(b);
	assert_non_null(x = PEM_read_bio_X509(b, NULL, NULL, NULL));
	assert_int_equal(tlsup_pin_of(x, pin), 0);
	assert_string_equal(pin, kat_pin);
	assert_int_equal(tlsup_pin_of(NULL, pin), SL_ERR_INVALID);

	assert_true(tlsup_pin_ok(kat_pin));
	assert_false(tlsup_pin_ok(NULL));
	assert_false(tlsup_pin_ok(""));
	assert_false(tlsup_pin_ok("sha256//gwm6usNOQUH9YHL38pWVuw5i4vBjb1NHLMnuRTwujO0="));
	memcpy(bad, kat_pin, sizeof(bad));
	bad[43] = 'A';		/* no padding */
	assert_false(tlsup_pin_ok(bad));
	memcpy(bad, kat_pin, sizeof(bad));
	bad[5] = '-';		/* base64url is not base64 */
	assert_false(tlsup_pin_ok(bad));
	memcpy(bad, kat_pin, sizeof(bad));
	bad[42] = 'P';		/* low bits set: not canonical */
	assert_false(tlsup_pin_ok(bad));
	assert_false(tlsup_pin_ok("gwm6usNOQUH9YHL38pWVuw5i4vBjb1NHLMnuRTwujO=="));
	X509_free(x);
	BIO_free(b);
}

static void
t_alpn(void **state)
{
	struct fx *f = *state;
	struct srv sv = { "http/1.1", { 0 }, 0 };
	SSL_CTX *s = server_ctx(f->good, f->key, 0, &sv);
	SSL_CTX *plain = server_ctx(f->good, f->key, 0, NULL);
	const unsigned char *sel = NULL;
	unsigned sel_len = 0;
	char reason[TLSUP_REASON_BUFSZ];
	struct link l;

	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_int_equal(sv.offered_len, 9);
	assert_memory_equal(sv.offered, "\x08http/1.1", 9);
	SSL_get0_alpn_selected(l.c, &sel, &sel_len);
	assert_int_equal(sel_len, 8);
	assert_memory_equal(sel, "http/1.1", 8);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, reason,
	    sizeof(reason)), 0);
	link_close(&l);

	/* no ALPN at all is fine too */
	link_open(&l, f->cctx, plain, "up.test", 0);
	assert_true(l.ok);
	SSL_get0_alpn_selected(l.c, &sel, &sel_len);
	assert_int_equal(sel_len, 0);
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, reason,
	    sizeof(reason)), 0);
	link_close(&l);

	/* a protocol we did not offer never gets through */
	sv.alpn_pick = "h2";
	link_open(&l, f->cctx, s, "up.test", 0);
	if (l.ok) {
		assert_int_equal(tlsup_check_peer(l.c, NULL, 0, reason,
		    sizeof(reason)), SL_ERR_DENIED);
		assert_string_equal(reason, "upstream-alpn-mismatch");
	} else {
		tlsup_handshake_reason(l.c, l.cerr, reason, sizeof(reason));
		assert_true(strncmp(reason, "upstream-tls-error: ",
		    strlen("upstream-tls-error: ")) == 0);
	}
	link_close(&l);
	SSL_CTX_free(s);
	SSL_CTX_free(plain);
}

static void
t_ca_file_errors(void **state)
{
	struct fx *f = *state;
	char path[64], want[256], err[256];
	SSL_CTX *ctx = NULL;

	/* missing */
	snprintf(path, sizeof(path), "%s.missing", f->ca_path);
	assert_int_equal(tlsup_ctx(f->t, path, &ctx, err, sizeof(err)),
	    SL_ERR_IO);
	assert_null(ctx);
	snprintf(want, sizeof(want), "upstream CA file %s: %s", path,
	    strerror(ENOENT));
	assert_string_equal(err, want);
	assert_int_equal(ERR_peek_error(), 0);

	/* a failure is not remembered: once the file is there, it loads */
	assert_int_equal(link(f->ca_path, path), 0);
	assert_int_equal(tlsup_ctx(f->t, path, &ctx, err, sizeof(err)), 0);
	assert_non_null(ctx);
	assert_ptr_not_equal(ctx, f->cctx);
	unlink(path);

	/* empty */
	write_pem(NULL, path, sizeof(path));
	ctx = NULL;
	assert_int_equal(tlsup_ctx(f->t, path, &ctx, err, sizeof(err)),
	    SL_ERR_INVALID);
	assert_null(ctx);
	snprintf(want, sizeof(want), "upstream CA file %s: no certificate "
	    "in it", path);
	assert_string_equal(err, want);
	unlink(path);

	/* a directory */
	assert_int_equal(tlsup_ctx(f->t, "/tmp", &ctx, err, sizeof(err)),
	    SL_ERR_INVALID);
	assert_string_equal(err, "upstream CA file /tmp: not a regular file");

	/* no error buffer is fine */
	assert_int_equal(tlsup_ctx(f->t, "/nonexistent/ca.pem", &ctx, NULL,
	    0), SL_ERR_IO);
	assert_int_equal(tlsup_ctx(f->t, "", &ctx, err, sizeof(err)),
	    SL_ERR_INVALID);
	assert_null(ctx);
	assert_int_equal(ERR_peek_error(), 0);
}

static void
t_ctx_cached(void **state)
{
	struct fx *f = *state;
	SSL_CTX *a = NULL, *b = NULL, *c = NULL, *o = NULL;
	STACK_OF(X509_OBJECT) *objs;
	X509 *only;
	char err[256];

	assert_int_equal(tlsup_ctx(f->t, f->ca_path, &a, err, sizeof(err)), 0);
	assert_int_equal(tlsup_ctx(f->t, f->ca_path, &b, err, sizeof(err)), 0);
	assert_int_equal(tlsup_ctx(f->t, NULL, &c, err, sizeof(err)), 0);
	assert_ptr_equal(a, b);
	assert_ptr_equal(a, c);
	assert_ptr_equal(a, f->cctx);
	assert_int_equal(tlsup_ctx(f->t, f->other_path, &o, err, sizeof(err)),
	    0);
	assert_ptr_not_equal(a, o);

	/* the settings the SPEC asks for */
	assert_int_equal(SSL_CTX_get_min_proto_version(a), TLS1_2_VERSION);
	assert_int_equal(SSL_CTX_get_verify_mode(a), SSL_VERIFY_PEER);
	assert_true(SSL_CTX_get_options(a) & SSL_OP_NO_COMPRESSION);
	assert_true(SSL_CTX_get_options(a) & SSL_OP_NO_RENEGOTIATION);
	assert_true(SSL_CTX_get_session_cache_mode(a) & SSL_SESS_CACHE_CLIENT);
	/* the trust store is the file's one certificate, nothing else */
	objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(a));
	assert_int_equal(sk_X509_OBJECT_num(objs), 1);
	only = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, 0));
	assert_non_null(only);
	assert_int_equal(X509_cmp(only, f->root), 0);
}

static void
t_ssl_new_args(void **state)
{
	struct fx *f = *state;
	SSL_CTX *foreign = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;

	assert_non_null(foreign);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "", 0, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 0, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 65536,
	    &ssl), SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", NULL, 0, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "1.2.3.4", 0, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "::1", 0, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 1, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "[::1]", 1, 443, &ssl),
	    SL_ERR_INVALID);
	assert_int_equal(tlsup_ssl_new(foreign, "sb1", "up.test", 0, 443, &ssl),
	    SL_ERR_INVALID);
	assert_null(ssl);
	assert_int_equal(ERR_peek_error(), 0);
	SSL_CTX_free(foreign);
}

static void
t_reasons(void **state)
{
	struct fx *f = *state;
	SSL *ssl = NULL;
	char reason[TLSUP_REASON_BUFSZ];

	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 443, &ssl), 0);
	tlsup_handshake_reason(ssl, 0, reason, sizeof(reason));
	assert_string_equal(reason, "upstream-closed");
	tlsup_handshake_reason(ssl, ERR_PACK(ERR_LIB_SSL, 0,
	    SSL_R_TLSV1_ALERT_PROTOCOL_VERSION), reason, sizeof(reason));
	assert_true(strncmp(reason, "upstream-tls-version: ", 22) == 0);
	tlsup_handshake_reason(ssl, ERR_PACK(ERR_LIB_SSL, 0,
	    SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE), reason, sizeof(reason));
	assert_true(strncmp(reason, "upstream-tls-error: ", 20) == 0);
	tlsup_handshake_reason(NULL, 0, reason, sizeof(reason));
	assert_string_equal(reason, "upstream-closed");
	tlsup_handshake_reason(ssl, 0, NULL, 0);
	assert_int_equal(tlsup_check_peer(ssl, NULL, 0, reason,
	    sizeof(reason)), SL_ERR_DENIED);
	assert_string_equal(reason, "upstream-handshake-incomplete");
	SSL_free(ssl);
}

/* Connects twice (thrice) to the same host; later ones resume. */
static void
check_resumption(struct fx *f, int max_ver)
{
	SSL_CTX *s = server_ctx(f->good, f->key, max_ver, NULL);
	char pin[TLSUP_PIN_BUFSZ], *pins[1] = { pin };
	struct link l;
	SSL *other = NULL;
	int i;

	assert_int_equal(tlsup_pin_of(f->good, pin), 0);
	if (max_ver != 0)	/* TLS 1.2 stays at security level 1 here */
		SSL_CTX_set_security_level(s, 1);
	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_false(SSL_session_reused(l.c));
	client_drain(&l);
	link_close(&l);

	/* a session is per sandbox, host and port */
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "other.test", 0, 443,
	    &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb2", "up.test", 0, 443,
	    &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	assert_int_equal(tlsup_ssl_new(f->cctx, NULL, "up.test", 0, 443,
	    &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 8443,
	    &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);

	for (i = 0; i < 2; i++) {
		link_open(&l, f->cctx, s, "up.test", 0);
		assert_true(l.ok);
		assert_true(SSL_session_reused(l.c));
		/* a resumed session still shows the key it was verified with */
		assert_int_equal(tlsup_check_peer(l.c, pins, 1, NULL, 0), 0);
		client_drain(&l);
		link_close(&l);
	}

	/* a TLS 1.3 ticket is offered once; a TLS 1.2 session again */
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 443, &other), 0);
	assert_non_null(SSL_get_session(other));
	SSL_free(other);	/* never started: the session stays good */
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 443, &other), 0);
	if (max_ver == 0)
		assert_null(SSL_get_session(other));
	else
		assert_non_null(SSL_get_session(other));
	SSL_free(other);

	/* a connection dropped without close_notify spoils its session */
	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	client_drain(&l);
	SSL_free(l.c);
	SSL_free(l.s);
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 443, &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	SSL_CTX_free(s);
}

static void
t_resume_tls13(void **state)
{
	check_resumption(*state, 0);
}

static void
t_resume_tls12(void **state)
{
	check_resumption(*state, TLS1_2_VERSION);
}

/* Accepts any client certificate: the test looks at which one came. */
static int
accept_any(int ok, X509_STORE_CTX *x)
{
	(void)ok;
	(void)x;
	return 1;
}

/* A pemkey of a new key and a certificate for it by root, via PEM text. */
static struct pemkey *
client_pem(struct fx *f, const char *cn)
{
	EVP_PKEY *k = make_key();
	X509 *x = make_cert(k, cn, NULL, 0, f->root, f->root_key, 0, 3600);
	struct pemkey *pk = NULL;
	const char *why = NULL;
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;

	assert_non_null(b);
	/* The chain first, then the leaf, then the key: any order does. */
	assert_int_equal(PEM_write_bio_X509(b, f->root), 1);
	assert_int_equal(PEM_write_bio_X509(b, x), 1);
	assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
	    NULL), 1);
	n = BIO_get_mem_data(b, &data);
	if (pemkey_parse((const uint8_t *)data, (size_t)n, &pk, &why) != 0)
		fail_msg("pemkey_parse: %s", why);
	assert_non_null(pk->leaf);
	assert_int_equal(X509_cmp(pk->leaf, x), 0);
	assert_int_equal(sk_X509_num(pk->chain), 1);
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(k);
	return pk;
}

/* The CN of the certificate the server got, or "" for none. */
static void
peer_cn(SSL *s, char *buf, size_t len)
{
	X509 *x = SSL_get0_peer_certificate(s);

	buf[0] = '\0';
	if (x != NULL)
		X509_NAME_get_text_by_NID(X509_get_subject_name(x),
		    NID_commonName, buf, (int)len);
}

/*
 * A client certificate is presented when the server asks, and sessions
 * made with one are never resumed without it, or with another.
 */
static void
t_client_cert(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, 0, NULL);
	struct pemkey *a = client_pem(f, "client-a"), *b = client_pem(f, "b");
	struct tlsup_client ca = { "a@1", a }, cb = { "b@1", b };
	struct tlsup_client bad = { "x\ny", a };
	struct link l;
	SSL *other = NULL;
	char cn[64];
	int i;

	SSL_CTX_set_verify(s, SSL_VERIFY_PEER, accept_any);
	/* a server that asks for certificates and resumes must name its sessions */
	assert_int_equal(SSL_CTX_set_session_id_context(s,
	    (const unsigned char *)"t", 1), 1);
	for (i = 0; i < 2; i++) {
		memset(&l, 0, sizeof(l));
		assert_int_equal(tlsup_ssl_new_as(f->cctx, "sb1", "up.test", 0,
		    443, &ca, &l.c), 0);
		assert_non_null(l.s = SSL_new(s));
		l.ok = handshake(l.c, l.s, &l.cerr);
		if (!l.ok)
			fail_msg("handshake: %s", ERR_error_string(l.cerr, NULL));
		assert_int_equal(SSL_session_reused(l.c), i == 1);
		peer_cn(l.s, cn, sizeof(cn));
		/* a resumed session carries the certificate it was made with */
		assert_string_equal(cn, "client-a");
		client_drain(&l);
		link_close(&l);
	}
	/* without a certificate, or with another: no session of a's */
	assert_int_equal(tlsup_ssl_new(f->cctx, "sb1", "up.test", 0, 443,
	    &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	assert_int_equal(tlsup_ssl_new_as(f->cctx, "sb1", "up.test", 0, 443,
	    &cb, &other), 0);
	assert_null(SSL_get_session(other));
	SSL_free(other);
	link_open(&l, f->cctx, s, "up.test", 0);
	assert_true(l.ok);
	assert_false(SSL_session_reused(l.c));
	peer_cn(l.s, cn, sizeof(cn));
	assert_string_equal(cn, "");
	client_drain(&l);
	link_close(&l);
	/* an id with a newline, a pem without a leaf */
	assert_int_equal(tlsup_ssl_new_as(f->cctx, "sb1", "up.test", 0, 443,
	    &bad, &other), SL_ERR_INVALID);
	bad.id = "k";
	bad.pem = NULL;
	assert_int_equal(tlsup_ssl_new_as(f->cctx, "sb1", "up.test", 0, 443,
	    &bad, &other), SL_ERR_INVALID);
	pemkey_free(a);
	pemkey_free(b);
	SSL_CTX_free(s);
}

/* What a pem secret must be to parse. */
static void
t_pemkey_refusals(void **state)
{
	struct fx *f = *state;
	struct pemkey *pk = NULL;
	const char *why = NULL;
	BIO *b;
	char *data;
	long n;
	int i;

	assert_int_equal(pemkey_parse((const uint8_t *)"x", 1, &pk, &why),
	    SL_ERR_INVALID);
	assert_string_equal(why, "no unencrypted private key");
	/* a key alone: no leaf */
	assert_non_null(b = BIO_new(BIO_s_mem()));
	assert_int_equal(PEM_write_bio_PrivateKey(b, f->key, NULL, NULL, 0,
	    NULL, NULL), 1);
	n = BIO_get_mem_data(b, &data);
	assert_int_equal(pemkey_parse((const uint8_t *)data, (size_t)n, &pk,
	    &why), 0);
	assert_null(pk->leaf);
	assert_null(pk->chain);
	pemkey_free(pk);
	/* a certificate that is not the key's */
	assert_int_equal(PEM_write_bio_X509(b, f->root), 1);
	n = BIO_get_mem_data(b, &data);
	assert_int_equal(pemkey_parse((const uint8_t *)data, (size_t)n, &pk,
	    &why), SL_ERR_INVALID);
	assert_string_equal(why, "no certificate is the private key's");
	/* the key's own (good is f->key's), twice */
	assert_int_equal(PEM_write_bio_X509(b, f->good), 1);
	n = BIO_get_mem_data(b, &data);
	assert_int_equal(pemkey_parse((const uint8_t *)data, (size_t)n, &pk,
	    &why), 0);
	assert_int_equal(X509_cmp(pk->leaf, f->good), 0);
	pemkey_free(pk);
	assert_int_equal(PEM_write_bio_X509(b, f->good), 1);
	n = BIO_get_mem_data(b, &data);
	assert_int_equal(pemkey_parse((const uint8_t *)data, (size_t)n, &pk,
	    &why), SL_ERR_INVALID);
	assert_string_equal(why, "two certificates are the private key's");
	BIO_free(b);
	/* more than 8 beside the leaf */
	assert_non_null(b = BIO_new(BIO_s_mem()));
	assert_int_equal(PEM_write_bio_PrivateKey(b, f->key, NULL, NULL, 0,
	    NULL, NULL), 1);
	assert_int_equal(PEM_write_bio_X509(b, f->good), 1);
	for (i = 0; i < PEMKEY_MAX_CHAIN + 1; i++)
		assert_int_equal(PEM_write_bio_X509(b, f->root), 1);
	n = BIO_get_mem_data(b, &data);
	assert_int_equal(pemkey_parse((const uint8_t *)data, (size_t)n, &pk,
	    &why), SL_ERR_INVALID);
	assert_string_equal(why, "more than 8 certificates beside the leaf");
	BIO_free(b);
	pemkey_free(NULL);
}

/* An SSL keeps working after its tlsup is gone (ASan would object). */
static void
t_ssl_outlives_tlsup(void **state)
{
	struct fx *f = *state;
	SSL_CTX *s = server_ctx(f->good, f->key, 0, NULL);
	struct tlsup *t = NULL;
	SSL_CTX *cctx = NULL;
	struct link l;

	assert_int_equal(tlsup_new(f->ca_path, &t), 0);
	assert_int_equal(tlsup_ctx(t, NULL, &cctx, NULL, 0), 0);
	memset(&l, 0, sizeof(l));
	assert_int_equal(tlsup_ssl_new(cctx, "sb1", "up.test", 0, 443, &l.c), 0);
	tlsup_free(t);
	assert_non_null(l.s = SSL_new(s));
	assert_true(handshake(l.c, l.s, &l.cerr));
	assert_int_equal(tlsup_check_peer(l.c, NULL, 0, NULL, 0), 0);
	client_drain(&l);	/* stores tickets in the context's cache */
	link_close(&l);
	SSL_CTX_free(s);
	tlsup_free(NULL);
}

static void
t_new_args(void **state)
{
	struct tlsup *t = NULL;

	assert_int_equal(tlsup_new(NULL, &t), SL_ERR_INVALID);
	assert_int_equal(tlsup_new("", &t), SL_ERR_INVALID);
	assert_null(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_good, setup, teardown),
		cmocka_unit_test_setup_teardown(t_self_signed, setup, teardown),
		cmocka_unit_test_setup_teardown(t_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(t_wrong_host, setup, teardown),
		cmocka_unit_test_setup_teardown(t_cn_is_not_a_name, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_other_ca, setup, teardown),
		cmocka_unit_test_setup_teardown(t_tls11_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls12_ok, setup, teardown),
		cmocka_unit_test_setup_teardown(t_ip_san, setup, teardown),
		cmocka_unit_test_setup_teardown(t_pins, setup, teardown),
		cmocka_unit_test(t_pin_format),
		cmocka_unit_test_setup_teardown(t_alpn, setup, teardown),
		cmocka_unit_test_setup_teardown(t_ca_file_errors, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_ctx_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(t_ssl_new_args, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_reasons, setup, teardown),
		cmocka_unit_test_setup_teardown(t_resume_tls13, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_resume_tls12, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_client_cert, setup, teardown),
		cmocka_unit_test_setup_teardown(t_pemkey_refusals, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_ssl_outlives_tlsup, setup,
		    teardown),
		cmocka_unit_test(t_new_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
