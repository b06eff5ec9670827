/* test_suggest.c: policies drafted from audit records (suggest.h). */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/err.h"
#include "conf/policy.h"
#include "sluicectl/suggest.h"

static void
take(struct suggest *s, const char *json)
{
	json_t *rec = json_loads(json, 0, NULL);

	assert_non_null(rec);
	suggest_take(s, rec);
	json_decref(rec);
}

static void
conn(struct suggest *s, const char *dst, int port, const char *sni,
    const char *action, const char *reason)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "{\"type\":\"conn\",\"dst\":\"%s\","
	    "\"dst_port\":%d,\"proto\":\"tls\"%s%s%s,\"action\":\"%s\","
	    "\"reason\":\"%s\"}", dst, port, sni ? ",\"sni\":\"" : "",
	    sni ? sni : "", sni ? "\"" : "", action, reason);
	take(s, buf);
}

static void
req(struct suggest *s, const char *method, const char *path)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "{\"type\":\"request\",\"method\":\"%s\","
	    "\"host\":\"api.example\",\"path\":\"%s\",\"action\":\"pass\","
	    "\"reason\":\"observe\",\"would_deny\":\"no-matching-rule\","
	    "\"intercepted\":true}", method, path);
	take(s, buf);
}

/* The draft as text, which must load as a policy. */
static char *
draft(struct suggest *s)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f;

	assert_non_null(f = open_memstream(&buf, &len));
	suggest_render(f, s, "drafted", "sb", "test");
	assert_int_equal(fclose(f), 0);
	if (policy_parse("draft", buf, len, &p, &el) != 0) {
		print_message("%s\n", buf);
		for (i = 0; i < el.n; i++)
			print_message("  %s\n", el.msgs[i]);
	}
	assert_non_null(p);
	policy_free(p);
	errlist_free(&el);
	return buf;
}

static void
test_names(void **state)
{
	struct suggest *s = suggest_new();
	char *d;

	(void)state;
	assert_non_null(s);
	conn(s, "203.0.113.1", 443, "a.cdn.example", "pass", "observe");
	conn(s, "203.0.113.2", 443, "b.cdn.example", "deny", "not-allowed");
	conn(s, "203.0.113.3", 8443, "c.cdn.example", "pass", "allow-name");
	conn(s, "203.0.113.4", 443, "one.example", "pass", "allow-name");
	conn(s, "203.0.113.5", 443, "x.two.example", "pass", "allow-name");
	conn(s, "203.0.113.6", 443, "y.two.example", "pass", "allow-name");
	/* never: private, metadata, a deny rule; no policy decision */
	conn(s, "10.0.0.5", 443, "internal.example", "deny", "private-address");
	conn(s, "169.254.169.254", 80, NULL, "deny", "forbidden-address");
	conn(s, "203.0.113.9", 443, "bad.example", "deny", "deny-name");
	conn(s, "203.0.113.10", 443, "limited.example", "deny",
	    "connection-limit");
	/* address only */
	conn(s, "198.51.100.7", 7, NULL, "deny", "no-cidr-rule");
	conn(s, "198.51.100.7", 9, NULL, "pass", "observe");
	d = draft(s);
	assert_non_null(strstr(d, "- domain: \"*.cdn.example\"  # 3 names"));
	assert_non_null(strstr(d, "ports: [443, 8443]"));
	assert_non_null(strstr(d, "- domain: one.example"));
	/* two siblings stay names */
	assert_non_null(strstr(d, "- domain: x.two.example"));
	assert_null(strstr(d, "*.two.example"));
	assert_non_null(strstr(d, "- cidr: \"198.51.100.7/32\""));
	assert_non_null(strstr(d, "ports: [7, 9]"));
	assert_null(strstr(d, "internal.example\n"));
	assert_null(strstr(d, "domain: internal.example"));
	assert_null(strstr(d, "domain: bad.example"));
	assert_null(strstr(d, "limited.example"));
	assert_null(strstr(d, "cidr: \"10."));
	assert_null(strstr(d, "cidr: \"169.254"));
	assert_non_null(strstr(d, "#   10.0.0.5:443 (internal.example): a "
	    "private address"));
	assert_non_null(strstr(d, "#   169.254.169.254:80: an address never "
	    "open"));
	assert_non_null(strstr(d, "#   203.0.113.9:443 (bad.example): a deny "
	    "rule refuses it"));
	free(d);
	suggest_free(s);
}

static void
test_paths(void **state)
{
	struct suggest *s = suggest_new();
	char *d;

	(void)state;
	assert_non_null(s);
	/* three files with one extension: "*.json" */
	req(s, "GET", "/v1/files/a.json");
	req(s, "GET", "/v1/files/b.json");
	req(s, "PUT", "/v1/files/c.json");
	/* three below /repos/acme: "**" */
	req(s, "GET", "/repos/acme/x");
	req(s, "GET", "/repos/acme/y/z");
	req(s, "GET", "/repos/acme/w");
	/* two: each as it is, '*' kept literal */
	req(s, "POST", "/graphql");
	req(s, "GET", "/odd*name");
	/* a star in a prefix stays a literal one */
	req(s, "GET", "/st*r/a");
	req(s, "GET", "/st*r/b");
	req(s, "GET", "/st*r/c");
	/* not what the daemon judges by: left out */
	req(s, "GET", "/a//b");
	req(s, "GET", "/bad%zzescape");
	req(s, "GET", "/x/../y");
	req(s, "GET", "/sp ace");
	d = draft(s);
	assert_non_null(strstr(d, "methods: [GET, PUT], path: "
	    "\"/v1/files/*.json\"}"));
	assert_non_null(strstr(d, "path: \"/repos/acme/**\"}"));
	assert_non_null(strstr(d, "methods: [POST], path: \"/graphql\"}"));
	assert_non_null(strstr(d, "path: \"/odd%2Aname\"}"));
	assert_non_null(strstr(d, "action: pass  # requests: 3, paths: 3"));
	assert_non_null(strstr(d, "path: \"/st%2Ar/**\"}"));
	assert_null(strstr(d, "/a//b"));
	assert_null(strstr(d, "zzescape"));
	assert_null(strstr(d, "/x/../y"));
	assert_null(strstr(d, "sp ace"));
	/* never the whole host */
	assert_null(strstr(d, "path: \"/**\""));
	free(d);
	suggest_free(s);
}

static void
test_empty(void **state)
{
	struct suggest *s = suggest_new();
	char *d;

	(void)state;
	assert_non_null(s);
	take(s, "{\"type\":\"checkpoint\"}");
	take(s, "{\"type\":\"conn\",\"dst\":\"nonsense\",\"dst_port\":1,"
	    "\"action\":\"pass\",\"reason\":\"observe\"}");
	d = draft(s);
	assert_non_null(strstr(d, "  default: deny\n"));
	assert_null(strstr(d, "allow:"));
	free(d);
	suggest_free(s);
}

/* Hosts whose names differ only by "." and "-" get rules of their own. */
static void
test_rule_names(void **state)
{
	struct suggest *s = suggest_new();
	const char *hosts[] = { "allowed.test", "allowed-test" };
	char buf[512], *d;
	size_t i;

	(void)state;
	assert_non_null(s);
	for (i = 0; i < 2; i++) {
		snprintf(buf, sizeof(buf), "{\"type\":\"request\",\"method\":"
		    "\"GET\",\"host\":\"%s\",\"path\":\"/x\",\"action\":"
		    "\"pass\",\"reason\":\"observe\",\"intercepted\":true}",
		    hosts[i]);
		take(s, buf);
	}
	d = draft(s);	/* loads: no name used twice */
	assert_non_null(strstr(d, "host: allowed.test"));
	assert_non_null(strstr(d, "host: allowed-test"));
	free(d);
	suggest_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_rule_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
