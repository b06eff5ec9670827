/*
 * test_mint.c: minted tokens' requests and answers (mint.c): token_url
 * checks, each kind's request, the assertions' signatures (RS256 and
 * ES256, verified here), and answers good and bad.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "keys/mint.h"
#include "keys/pemkey.h"
#include "keys/secrets.h"

#define NOW	1800000000

static void
t_url(void **state)
{
	struct mint_url u;
	const char *why, *bad[] = {
		"http://a.test/t", "https://", "https://a.test:0/t",
		"https://a.test:99999/t", "https://u@a.test/t", "https://a.test/t#f",
		"https://198.18.0.1/t", "https://[fd00:5c::1]/t", "https://a.test?x",
		"https://a.test/t x",
	};
	size_t i;

	(void)state;
	assert_int_equal(mint_url_parse("https://Auth.Example.TEST/oauth/token?a=1",
	    &u, &why), 0);
	assert_string_equal(u.host, "auth.example.test");
	assert_int_equal(u.port, 443);
	assert_string_equal(u.target, "/oauth/token?a=1");
	assert_int_equal(mint_url_parse("https://a.test:8443", &u, &why), 0);
	assert_int_equal(u.port, 8443);
	assert_string_equal(u.target, "/");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(mint_url_parse(bad[i], &u, &why), -1);
	assert_int_equal(mint_kind_of("github_app"), MINT_GITHUB_APP);
	assert_int_equal(mint_kind_of("oauth"), -1);
	assert_string_equal(mint_kind_name(MINT_JWT_BEARER), "jwt_bearer");
}

/* The body of request req (after the empty line). */
static const char *
body_of(const char *req)
{
	const char *b = strstr(req, "\r\n\r\n");

	assert_non_null(b);
	return b + 4;
}

static void
t_oauth_requests(void **state)
{
	struct secret s;
	struct mint_source src = { MINT_CLIENT_CREDENTIALS,
	    "https://auth.test/oauth/token", "my client", "read write", NULL,
	    NULL };
	char out[MINT_REQ_MAX], want[256], b64[256];
	const char *why;
	long n;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.kind = SEALED_KIND_HEADER;
	s.value = (const uint8_t *)"s3cr:t";
	s.value_len = 6;
	n = mint_request(&src, &s, NOW, out, sizeof(out), &why);
	assert_true(n > 0);
	assert_int_equal(strlen(out), (size_t)n);
	assert_true(strncmp(out, "POST /oauth/token HTTP/1.1\r\nHost: auth.test\r\n",
	    45) == 0);
	/* RFC 6749 2.3.1: each form-encoded, then Basic */
	sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)
	    "my%20client:s3cr%3At", 20, sodium_base64_VARIANT_ORIGINAL);
	snprintf(want, sizeof(want), "\r\nAuthorization: Basic %s\r\n", b64);
	assert_non_null(strstr(out, want));
	assert_string_equal(body_of(out),
	    "grant_type=client_credentials&scope=read%20write");
	assert_non_null(strstr(out, "\r\nContent-Length: 48\r\n"));

	src.kind = MINT_REFRESH_TOKEN;
	src.scope = NULL;
	n = mint_request(&src, &s, NOW, out, sizeof(out), &why);
	assert_true(n > 0);
	assert_null(strstr(out, "Authorization"));
	assert_string_equal(body_of(out), "grant_type=refresh_token&"
	    "refresh_token=s3cr%3At&client_id=my%20client");
	/* an audience goes as a form parameter of the OAuth kinds */
	src.audience = "https://api.test/";
	assert_true(mint_request(&src, &s, NOW, out, sizeof(out), &why) > 0);
	assert_string_equal(body_of(out), "grant_type=refresh_token&"
	    "refresh_token=s3cr%3At&client_id=my%20client&"
	    "audience=https%3A%2F%2Fapi.test%2F");
	src.audience = NULL;
	/* too small: refused, nothing left behind */
	assert_int_equal(mint_request(&src, &s, NOW, out, 64, &why), -1);
	/* a pem secret cannot be a client secret */
	s.kind = SEALED_KIND_PEM;
	assert_int_equal(mint_request(&src, &s, NOW, out, sizeof(out), &why), -1);
	src.client_id = NULL;
	s.kind = SEALED_KIND_HEADER;
	assert_int_equal(mint_request(&src, &s, NOW, out, sizeof(out), &why), -1);
}

/* Checks a compact JWS of key; its payload into *claims. */
static void
verify_jws(EVP_PKEY *key, const char *tok, size_t len, json_t **claims)
{
	const char *d1 = memchr(tok, '.', len), *d2;
	uint8_t sig[1024], der[128], pl[2048];
	size_t slen = 0, plen = 0, dl;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rsa = EVP_PKEY_is_a(key, "RSA");

	assert_non_null(d1);
	d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok));
	assert_non_null(d2);
	assert_int_equal(sodium_base642bin(sig, sizeof(sig), d2 + 1,
	    len - (size_t)(d2 + 1 - tok), NULL, &slen, NULL,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	dl = slen;
	if (!rsa) {
		/* r||s back to DER */
		ECDSA_SIG *es = ECDSA_SIG_new();
		uint8_t *p = der;

		assert_int_equal(slen, 64);
		ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL),
		    BN_bin2bn(sig + 32, 32, NULL));
		dl = (size_t)i2d_ECDSA_SIG(es, &p);
		ECDSA_SIG_free(es);
		memcpy(sig, der, dl);
	}
	assert_int_equal(EVP_DigestVerifyInit_ex(ctx, NULL, "SHA256", NULL,
	    NULL, key, NULL), 1);
	assert_int_equal(EVP_DigestVerify(ctx, sig, dl, (const uint8_t *)tok,
	    (size_t)(d2 - tok)), 1);
	EVP_MD_CTX_free(ctx);
	assert_int_equal(sodium_base642bin(pl, sizeof(pl), d1 + 1,
	    (size_t)(d2 - d1 - 1), NULL, &plen, NULL,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING), 0);
	assert_non_null(*claims = json_loadb((const char *)pl, plen, 0, NULL));
}

static void
t_signed_requests(void **state)
{
	EVP_PKEY *keys[2];
	struct pemkey pk;
	struct secret s;
	struct mint_source src;
	char out[MINT_REQ_MAX], *a;
	const char *why, *auth;
	json_t *cl;
	size_t i;
	long n;

	(void)state;
	assert_non_null(keys[0] = EVP_PKEY_Q_keygen(NULL, NULL, "RSA",
	    (size_t)2048));
	assert_non_null(keys[1] = EVP_PKEY_Q_keygen(NULL, NULL, "EC",
	    "P-256"));
	for (i = 0; i < 2; i++) {
		memset(&s, 0, sizeof(s));
		memset(&pk, 0, sizeof(pk));
		pk.key = keys[i];
		s.kind = SEALED_KIND_PEM;
		s.pem = &pk;
		src = (struct mint_source){ MINT_JWT_BEARER,
		    "https://auth.test:8443/token", "cid", NULL, "api://x",
		    NULL };
		assert_true((n = mint_request(&src, &s, NOW, out, sizeof(out),
		    &why)) > 0);
		assert_non_null(strstr(out, "Host: auth.test:8443\r\n"));
		a = strstr(out, "&assertion=");
		assert_non_null(a);
		assert_true(strncmp(body_of(out), "grant_type=urn%3Aietf%3Aparams"
		    "%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=", 67) == 0);
		a += 11;
		verify_jws(keys[i], a, strlen(a), &cl);
		assert_string_equal(json_string_value(json_object_get(cl, "iss")),
		    "cid");
		assert_string_equal(json_string_value(json_object_get(cl, "aud")),
		    "api://x");
		assert_int_equal(json_integer_value(json_object_get(cl, "exp")),
		    NOW + MINT_ASSERTION_TTL);
		assert_int_equal(strlen(json_string_value(json_object_get(cl,
		    "jti"))), 22);
		json_decref(cl);

		src = (struct mint_source){ MINT_GITHUB_APP,
		    "https://api.test/app/installations/7/access_tokens", NULL,
		    NULL, NULL, "123" };
		if (i == 1) {
			/* GitHub takes RS256 alone: a P-256 key is refused. */
			assert_int_equal(mint_request(&src, &s, NOW, out,
			    sizeof(out), &why), -1);
			assert_non_null(strstr(why, "RS256"));
			continue;
		}
		assert_true(mint_request(&src, &s, NOW, out, sizeof(out),
		    &why) > 0);
		auth = strstr(out, "\r\nAuthorization: Bearer ");
		assert_non_null(auth);
		auth += 24;
		verify_jws(keys[i], auth, strcspn(auth, "\r"), &cl);
		assert_string_equal(json_string_value(json_object_get(cl, "iss")),
		    "123");
		assert_int_equal(json_integer_value(json_object_get(cl, "iat")),
		    NOW - 60);
		json_decref(cl);
		assert_string_equal(body_of(out), "");
	}
	/* a header secret cannot sign */
	s.pem = NULL;
	assert_int_equal(mint_request(&src, &s, NOW, out, sizeof(out), &why), -1);
	EVP_PKEY_free(keys[0]);
	EVP_PKEY_free(keys[1]);
	/* RSA under 2048 bits is refused */
	assert_non_null(keys[0] = EVP_PKEY_Q_keygen(NULL, NULL, "RSA",
	    (size_t)1024));
	assert_int_equal(mint_jws(keys[0], "{}", out, sizeof(out), &why), -1);
	EVP_PKEY_free(keys[0]);
}

static void
t_answers(void **state)
{
	struct mint_token t;
	char tok[MINT_TOKEN_MAX], why[160];
	struct {
		enum mint_kind	 k;
		int		 status;
		const char	*body;
		const char	*tok;		/* NULL: refused */
		int64_t		 exp;
		const char	*why;		/* part of the refusal */
	} c[] = {
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"abc.def\","
		    "\"token_type\":\"Bearer\",\"expires_in\":3600}", "abc.def",
		    NOW + 3600, NULL },
		{ MINT_REFRESH_TOKEN, 200, "{\"access_token\":\"x\"}", "x",
		    NOW + MINT_DEFAULT_TTL, NULL },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"s\","
		    "\"expires_in\":\"3599\"}", "s", NOW + 3599, NULL },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"s\","
		    "\"expires_in\":\"36x\"}", NULL, 0, "expires_in" },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"s\","
		    "\"expires_in\":1.5}", NULL, 0, "expires_in" },
		{ MINT_GITHUB_APP, 201, "{\"token\":\"ghs_1\",\"expires_at\":"
		    "\"2027-01-15T09:00:00Z\"}", "ghs_1", NOW + 3600, NULL },
		{ MINT_CLIENT_CREDENTIALS, 401, "{\"error\":\"invalid_client\"}",
		    NULL, 0, "401 (invalid_client)" },
		{ MINT_CLIENT_CREDENTIALS, 500, "not json", NULL, 0, "500" },
		/* only RFC 6749's codes are repeated: other text may carry anything */
		{ MINT_CLIENT_CREDENTIALS, 400, "{\"error\":\"leaked-s3cret\"}",
		    NULL, 0, "answered 400" },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"a b\"}",
		    NULL, 0, "usable" },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"a\","
		    "\"access_token\":\"b\"}", NULL, 0, "JSON" },
		{ MINT_CLIENT_CREDENTIALS, 200, "{\"access_token\":\"a\","
		    "\"expires_in\":-5}", NULL, 0, "expires_in" },
		{ MINT_GITHUB_APP, 201, "{\"token\":\"t\",\"expires_at\":"
		    "\"2020-01-01T00:00:00Z\"}", NULL, 0, "expired" },
		{ MINT_GITHUB_APP, 201, "{\"token\":\"t\"}", NULL, 0,
		    "expires_at" },
	};
	size_t i;
	char big[MINT_TOKEN_LEN_MAX + 64];

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int r = mint_answer(c[i].k, c[i].status, c[i].body,
		    strlen(c[i].body), NOW, tok, &t, why, sizeof(why));

		if (c[i].tok == NULL) {
			assert_int_equal(r, -1);
			assert_non_null(strstr(why, c[i].why));
			assert_null(strstr(why, "s3cret"));
			continue;
		}
		assert_int_equal(r, 0);
		assert_string_equal(tok, c[i].tok);
		assert_int_equal(t.len, strlen(c[i].tok));
		assert_int_equal(t.expires_at, c[i].exp);	/* NOW is 08:00Z */
		assert_false(t.rotated);
	}
	/* a token every form of which is redacted: 4096 bytes at most */
	for (i = 0; i < 2; i++) {
		size_t n = MINT_TOKEN_LEN_MAX + i;

		snprintf(big, sizeof(big), "{\"access_token\":\"");
		memset(big + strlen(big), 'a', n);
		snprintf(big + 17 + n, sizeof(big) - 17 - n, "\"}");
		assert_int_equal(mint_answer(MINT_CLIENT_CREDENTIALS, 200, big,
		    strlen(big), NOW, tok, &t, why, sizeof(why)), i == 0 ? 0 : -1);
	}
	/* a refresh token rotated by the answer is noticed (not kept) */
	assert_int_equal(mint_answer(MINT_REFRESH_TOKEN, 200, "{\"access_token\":"
	    "\"x\",\"refresh_token\":\"new\"}", 42, NOW, tok, &t, why,
	    sizeof(why)), 0);
	assert_true(t.rotated);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_url),
		cmocka_unit_test(t_oauth_requests),
		cmocka_unit_test(t_signed_requests),
		cmocka_unit_test(t_answers),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
