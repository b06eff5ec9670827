/* test_replay.c: audit records judged again under a candidate (replay.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "util/err.h"
#include "conf/policy.h"
#include "conf/replay.h"

static const char cand_yaml[] =
	"name: cand\n"
	"egress:\n"
	"  default: deny\n"
	"  allow:\n"
	"    - domain: ok.example\n"
	"    - cidr: 198.51.100.0/24\n"
	"      ports: [7]\n"
	"  deny:\n"
	"    - domain: bad.example\n"
	"intercept:\n"
	"  - name: read\n"
	"    match: {host: api.example, methods: [GET], path: /v1/*.json}\n"
	"    action: pass\n"
	"  - name: tagged\n"
	"    match: {host: api.example, path: /tag, headers: {x-tag: a}}\n"
	"    action: pass\n";

static struct policy *cand;

static int
setup(void **state)
{
	struct errlist el = ERRLIST_INIT;

	(void)state;
	if (policy_parse("cand.yaml", cand_yaml, strlen(cand_yaml), &cand,
	    &el) != 0)
		return -1;
	errlist_free(&el);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	policy_free(cand);
	return 0;
}

static struct rp_result
judge(const char *json)
{
	struct rp_result r;
	json_t *rec = json_loads(json, 0, NULL);

	assert_non_null(rec);
	replay_record(cand, rec, &r);
	/* the result may point into rec only for strings copied below */
	json_decref(rec);
	return r;
}

static void
test_conn(void **state)
{
	struct rp_result r;

	(void)state;
	r = judge("{\"type\":\"conn\",\"sandbox\":\"s\",\"dst\":\"203.0.113.5\","
	    "\"dst_port\":443,\"proto\":\"tls\",\"sni\":\"OK.example.\","
	    "\"action\":\"deny\",\"reason\":\"not-allowed\"}");
	assert_int_equal(r.change, RP_NEWLY_ALLOWED);
	assert_string_equal(r.kind, "conn");
	assert_string_equal(r.what, "ok.example:443");
	assert_string_equal(r.cand.verdict, "pass");
	assert_string_equal(r.cand.reason, "allow-name");
	/* let through by observe mode: enforcing it was refused */
	r = judge("{\"type\":\"conn\",\"dst\":\"203.0.113.5\",\"dst_port\":443,"
	    "\"proto\":\"tls\",\"sni\":\"other.example\",\"action\":\"pass\","
	    "\"reason\":\"observe\",\"would_deny\":\"not-allowed\"}");
	assert_int_equal(r.change, RP_SAME);
	assert_string_equal(r.now.verdict, "deny");
	r = judge("{\"type\":\"conn\",\"dst\":\"203.0.113.5\",\"dst_port\":443,"
	    "\"proto\":\"tls\",\"sni\":\"bad.example\",\"action\":\"pass\","
	    "\"reason\":\"allow-name\"}");
	assert_int_equal(r.change, RP_NEWLY_DENIED);
	assert_string_equal(r.cand.reason, "deny-name");
	/* opaque: the CIDR and its port */
	r = judge("{\"type\":\"conn\",\"dst\":\"198.51.100.9\",\"dst_port\":7,"
	    "\"action\":\"deny\",\"reason\":\"no-cidr-rule\"}");
	assert_int_equal(r.change, RP_NEWLY_ALLOWED);
	assert_string_equal(r.what, "198.51.100.9:7");
	r = judge("{\"type\":\"conn\",\"dst\":\"198.51.100.9\",\"dst_port\":8,"
	    "\"proto\":\"tls\",\"action\":\"deny\",\"reason\":\"no-sni\"}");
	assert_int_equal(r.change, RP_SAME);
	assert_string_equal(r.cand.reason, "no-sni");
	/* forbidden addresses stay forbidden whatever the candidate says */
	r = judge("{\"type\":\"conn\",\"dst\":\"169.254.169.254\",\"dst_port\":80,"
	    "\"host\":\"ok.example\",\"action\":\"deny\",\"reason\":"
	    "\"forbidden-address\"}");
	assert_int_equal(r.change, RP_SAME);
}

static void
test_skipped(void **state)
{
	static const char *const recs[] = {
		"{\"type\":\"conn\",\"dst\":\"203.0.113.5\",\"dst_port\":443,"
		"\"action\":\"deny\",\"reason\":\"connection-limit\"}",
		"{\"type\":\"conn\",\"dst\":\"not an address\",\"dst_port\":443,"
		"\"action\":\"deny\",\"reason\":\"not-allowed\"}",
		"{\"type\":\"conn\",\"dst\":\"203.0.113.5\",\"dst_port\":70000,"
		"\"action\":\"deny\",\"reason\":\"not-allowed\"}",
		"{\"type\":\"conn\",\"dst\":\"203.0.113.5\",\"dst_port\":443,"
		"\"sni\":\"bad..name\",\"action\":\"deny\",\"reason\":\"not-allowed\"}",
		"{\"type\":\"dns\",\"name\":\"ok.example\",\"verdict\":\"refused\","
		"\"reason\":\"rate-limit\"}",
		"{\"type\":\"request\",\"method\":\"GET\",\"host\":\"api.example\","
		"\"path\":\"/x\",\"action\":\"deny\",\"reason\":\"host-mismatch\","
		"\"intercepted\":true}",
		"{\"type\":\"request\",\"method\":\"GET\",\"host\":\"api.example\","
		"\"target\":\"/x\",\"action\":\"pass\",\"reason\":\"allow-name\"}",
		"{\"type\":\"checkpoint\"}",
		"{\"type\":7}",
		"{}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		assert_int_equal(judge(recs[i]).change, RP_SKIPPED);
}

static void
test_dns(void **state)
{
	struct rp_result r;

	(void)state;
	r = judge("{\"type\":\"dns\",\"name\":\"ok.example\",\"verdict\":"
	    "\"nxdomain\",\"reason\":\"not-allowed\"}");
	assert_int_equal(r.change, RP_NEWLY_ALLOWED);
	r = judge("{\"type\":\"dns\",\"name\":\"bad.example\",\"verdict\":"
	    "\"answer\",\"reason\":\"allow-name\"}");
	assert_int_equal(r.change, RP_NEWLY_DENIED);
	assert_string_equal(r.cand.reason, "deny-name");
	r = judge("{\"type\":\"dns\",\"name\":\"x.example\",\"verdict\":"
	    "\"answer\",\"reason\":\"observe\",\"would_deny\":\"not-allowed\"}");
	assert_int_equal(r.change, RP_SAME);
}

static void
test_request(void **state)
{
	struct rp_result r;

	(void)state;
	r = judge("{\"type\":\"request\",\"method\":\"GET\",\"host\":"
	    "\"api.example\",\"path\":\"/v1/a.json\",\"action\":\"deny\","
	    "\"reason\":\"no-matching-rule\",\"intercepted\":true}");
	assert_int_equal(r.change, RP_NEWLY_ALLOWED);
	assert_string_equal(r.what, "GET api.example/v1/a.json");
	assert_string_equal(r.cand.rule, "intercept:read");
	assert_int_equal(r.approximate, 1);	/* "tagged" looks at a header */
	r = judge("{\"type\":\"request\",\"method\":\"POST\",\"host\":"
	    "\"api.example\",\"path\":\"/v1/a.json\",\"action\":\"pass\","
	    "\"reason\":\"intercept-rule\",\"rule\":\"intercept:old\","
	    "\"intercepted\":true}");
	assert_int_equal(r.change, RP_NEWLY_DENIED);
	assert_string_equal(r.cand.reason, "no-matching-rule");
	/* the candidate does not intercept the host: its connection says */
	r = judge("{\"type\":\"request\",\"method\":\"GET\",\"host\":"
	    "\"ok.example\",\"path\":\"/\",\"action\":\"pass\",\"reason\":"
	    "\"intercept-rule\",\"rule\":\"intercept:x\",\"intercepted\":true}");
	assert_int_equal(r.change, RP_CHANGED);
	assert_string_equal(r.cand.verdict, "not-intercepted");
	r = judge("{\"type\":\"request\",\"method\":\"GET\",\"host\":"
	    "\"bad.example\",\"path\":\"/\",\"action\":\"inject\",\"reason\":"
	    "\"intercept-rule\",\"rule\":\"intercept:x\",\"intercepted\":true}");
	assert_int_equal(r.change, RP_NEWLY_DENIED);
	/* the same rule and verdict: unchanged */
	r = judge("{\"type\":\"request\",\"method\":\"GET\",\"host\":"
	    "\"api.example\",\"path\":\"/v1/b.json\",\"action\":\"pass\","
	    "\"reason\":\"intercept-rule\",\"rule\":\"intercept:read\","
	    "\"intercepted\":true}");
	assert_int_equal(r.change, RP_SAME);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn),
		cmocka_unit_test(test_skipped),
		cmocka_unit_test(test_dns),
		cmocka_unit_test(test_request),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
