/*
 * test_deny.c: sluice's own refusals as an agent reads them: the JSON
 * body names host, policy, rule and reason, Proxy-Status (RFC 9209)
 * carries the error type and the reason, and the framing is exact.
 */
#include "autoconf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "conn/deny.h"

/* The body of resp (after the blank line), as JSON. */
static json_t *
body_of(const char *resp, size_t len, size_t *clen)
{
	const char *b = strstr(resp, "\r\n\r\n");
	const char *cl = strstr(resp, "Content-Length: ");

	assert_non_null(b);
	assert_non_null(cl);
	*clen = strtoul(cl + 16, NULL, 10);
	b += 4;
	assert_int_equal((size_t)(resp + len - b), *clen);
	return json_loadb(b, *clen, 0, NULL);
}

static void
t_denied(void **state)
{
	struct deny_what d = { 403, "denied", "api.example.com", "agent",
	    "intercept:r1", "no-matching-rule", "not allowed", NULL, NULL, NULL,
	    0 };
	size_t len, clen;
	char *resp;
	json_t *o;

	(void)state;
	assert_non_null(resp = deny_http(&d, 1, &len));
	assert_int_equal(strlen(resp), len);
	assert_true(strncmp(resp, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
	assert_non_null(strstr(resp, "\r\nProxy-Status: sluice; "
	    "error=http_request_denied; details=\"no-matching-rule\"\r\n"));
	assert_null(strstr(resp, "Connection: close"));
	assert_non_null(o = body_of(resp, len, &clen));
	assert_string_equal(json_string_value(json_object_get(o, "host")),
	    "api.example.com");
	assert_string_equal(json_string_value(json_object_get(o, "policy")),
	    "agent");
	assert_string_equal(json_string_value(json_object_get(o, "rule")),
	    "intercept:r1");
	assert_string_equal(json_string_value(json_object_get(o, "reason")),
	    "no-matching-rule");
	assert_null(json_object_get(o, "budget"));
	assert_null(strstr(resp, "Retry-After"));
	json_decref(o);
	free(resp);

	/* No host known (an opaque refusal), no rule: left out, and close. */
	d.host = "";
	d.rule = NULL;
	assert_non_null(resp = deny_http(&d, 0, &len));
	assert_non_null(strstr(resp, "\r\nConnection: close\r\n"));
	assert_non_null(o = body_of(resp, len, &clen));
	assert_true(json_is_null(json_object_get(o, "host")));
	assert_true(json_is_null(json_object_get(o, "rule")));
	json_decref(o);
	free(resp);
}

/* A budget used up: 429, Retry-After, and which secret and budget. */
static void
t_budget(void **state)
{
	struct deny_what d = { 429, "refused", "api.example.com", "agent",
	    "intercept:r1", "budget-exceeded", "used up", "gh-token",
	    "requests_per_minute", "sandbox", 7 };
	size_t len, clen;
	char *resp;
	json_t *o;

	(void)state;
	assert_non_null(resp = deny_http(&d, 1, &len));
	assert_true(strncmp(resp, "HTTP/1.1 429 Too Many Requests\r\n", 32) ==
	    0);
	assert_non_null(strstr(resp, "\r\nRetry-After: 7\r\n"));
	assert_non_null(o = body_of(resp, len, &clen));
	assert_string_equal(json_string_value(json_object_get(o, "secret")),
	    "gh-token");
	assert_string_equal(json_string_value(json_object_get(o, "budget")),
	    "requests_per_minute");
	assert_string_equal(json_string_value(json_object_get(o, "scope")),
	    "sandbox");
	assert_int_equal(json_integer_value(json_object_get(o, "retry_after")),
	    7);
	assert_string_equal(json_string_value(json_object_get(o, "reason")),
	    "budget-exceeded");
	json_decref(o);
	free(resp);
}

static void
t_proxy_error(void **state)
{
	(void)state;
	assert_string_equal(deny_proxy_error(403, "deny-rule"),
	    "http_request_denied");
	assert_string_equal(deny_proxy_error(421, "host-mismatch"),
	    "http_request_denied");
	assert_string_equal(deny_proxy_error(400, "bad-request"),
	    "http_request_error");
	assert_string_equal(deny_proxy_error(502, "upstream-cert-invalid"),
	    "tls_certificate_error");
	assert_string_equal(deny_proxy_error(504, "upstream-timeout"),
	    "connection_timeout");
	assert_string_equal(deny_proxy_error(502, "upstream-closed"),
	    "http_response_incomplete");
	assert_string_equal(deny_proxy_error(503, "audit-unavailable"),
	    "proxy_internal_error");
	assert_string_equal(deny_proxy_error(502, NULL),
	    "destination_unavailable");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_denied),
		cmocka_unit_test(t_proxy_error),
		cmocka_unit_test(t_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
