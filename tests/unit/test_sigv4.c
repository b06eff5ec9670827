/*
 * test_sigv4.c: AWS SigV4 canonical requests and signatures, against
 * what botocore computes for the same requests (its values below), and
 * the parsing of sealed AWS credentials.
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

#include <sodium.h>

#include "util/err.h"
#include "keys/sigv4.h"

#define NOW	1440938160	/* 2015-08-30T12:36:00Z */

static struct aws_creds *
creds(const char *json)
{
	struct aws_creds *c = NULL;
	const char *why = NULL;

	if (aws_creds_parse((const uint8_t *)json, strlen(json), &c, &why) != 0)
		fail_msg("aws_creds_parse: %s", why);
	return c;
}

static void
t_execute_api(void **st)
{
	struct aws_creds *c = creds("{\"access_key_id\": \"AKIDEXAMPLE\", "
	    "\"secret_access_key\": \"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\","
	    " \"session_token\": \"tok123\"}");
	struct sigv4_req r = { "GET", "/a%20b/c?z=1&a=x%2Fy&a=b&empty",
	    "example.amazonaws.com", "execute-api", "eu-west-1",
	    SIGV4_EMPTY_SHA256, NOW, 1 };
	struct sigv4_headers h;
	char canon[1024], buf[2048];

	(void)st;
	assert_true(sigv4_canonical(&r, "20150830T123600Z", c->token, canon,
	    sizeof(canon)) > 0);
	assert_string_equal(canon, "GET\n/a%2520b/c\na=b&a=x%2Fy&empty=&z=1\n"
	    "host:example.amazonaws.com\nx-amz-content-sha256:"
	    SIGV4_EMPTY_SHA256 "\nx-amz-date:20150830T123600Z\n"
	    "x-amz-security-token:tok123\n\nhost;x-amz-content-sha256;"
	    "x-amz-date;x-amz-security-token\n" SIGV4_EMPTY_SHA256);
	assert_true(sigv4_sign(c, &r, buf, sizeof(buf), &h) > 0);
	assert_string_equal(h.authorization, "AWS4-HMAC-SHA256 Credential="
	    "AKIDEXAMPLE/20150830/eu-west-1/execute-api/aws4_request, "
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
	    "x-amz-security-token, Signature="
	    "d93bbf63354c9f6be87cfcb8f7fdb62fb18e7b5e92753b4089a3d87a1c37d622");
	assert_string_equal(h.amz_date, "20150830T123600Z");
	assert_string_equal(h.security_token, "tok123");
	assert_string_equal(h.content_sha256, SIGV4_EMPTY_SHA256);
	/* too small a buffer: -1, not a cut header */
	assert_int_equal(sigv4_sign(c, &r, buf, 40, &h), -1);
	assert_int_equal(sigv4_canonical(&r, "20150830T123600Z", NULL, canon,
	    20), -1);
	aws_creds_free(c);
}

static void
t_s3(void **st)
{
	struct aws_creds *c = creds("{\"access_key_id\": \"AKIDEXAMPLE\", "
	    "\"secret_access_key\": \"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\"}");
	struct sigv4_req r = { "GET", "/bucket/my%20key.txt?list-type=2&"
	    "prefix=a%2Fb", "example.amazonaws.com", "s3", "us-east-1",
	    SIGV4_UNSIGNED, NOW, 0 };
	struct sigv4_headers h;
	char buf[2048];

	(void)st;
	assert_null(c->token);
	assert_true(sigv4_sign(c, &r, buf, sizeof(buf), &h) > 0);
	assert_non_null(strstr(h.authorization, "SignedHeaders=host;"
	    "x-amz-content-sha256;x-amz-date, Signature="
	    "994394cd099b9bbe008d3603552e2f7247e36499d0713e5d14adf9f689e6a6ec"));
	assert_null(h.security_token);
	aws_creds_free(c);
}

/* Query encoding: decoded, encoded the AWS way, sorted; bad % kept. */
static void
t_query(void **st)
{
	struct sigv4_req r = { "GET", "/?b=%7e+%zz&a=%41&&=v&c", "h", "svc",
	    "r", SIGV4_EMPTY_SHA256, NOW, 1 };
	char canon[1024], *q;

	(void)st;
	assert_true(sigv4_canonical(&r, "D", NULL, canon, sizeof(canon)) > 0);
	assert_non_null(q = strchr(canon, '\n'));
	if (strncmp(q, "\n/\n=v&a=A&b=~%2B%25zz&c=\n", 25) != 0)
		fail_msg("got %s", q);
	aws_creds_free(NULL);
}

static void
t_creds_refused(void **st)
{
	static const char *const bad[] = {
		"[]", "{}", "{\"access_key_id\": \"a\"}",
		"{\"access_key_id\": 1, \"secret_access_key\": \"s\"}",
		"{\"access_key_id\": \"a\", \"secret_access_key\": \"\"}",
		"{\"access_key_id\": \"a b\", \"secret_access_key\": \"s\"}",
		"{\"access_key_id\": \"a\", \"secret_access_key\": \"s\", "
		    "\"session_token\": 5}",
		"{\"access_key_id\": \"a\", \"secret_access_key\": \"s\\r\\n\"}",
		"{\"access_key_id\": \"a\", \"access_key_id\": \"b\", "
		    "\"secret_access_key\": \"s\"}",
	};
	struct aws_creds *c;
	const char *why;
	size_t i;

	(void)st;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = NULL;
		why = NULL;
		assert_int_equal(aws_creds_parse((const uint8_t *)bad[i],
		    strlen(bad[i]), &c, &why), SL_ERR_INVALID);
		assert_null(c);
		assert_non_null(why);
		assert_true(strncmp(why, "not AWS credentials", 19) == 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_execute_api),
		cmocka_unit_test(t_s3),
		cmocka_unit_test(t_query),
		cmocka_unit_test(t_creds_refused),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
