/* test_policy.c: policy files and the connection verdicts. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/addr.h"
#include "util/cidr.h"
#include "util/err.h"
#include "util/names.h"
#include "conf/policy.h"

#define FIXTURE(f)	TEST_SRCDIR "/fixtures/policy/" f
#define SHIPPED(f)	TEST_SRCDIR "/../../policy.d/" f

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static int
has_msg(const struct errlist *el, const char *sub)
{
	size_t i;

	for (i = 0; i < el->n; i++)
		if (strstr(el->msgs[i], sub) != NULL)
			return 1;
	return 0;
}

static void
dump(const struct errlist *el)
{
	size_t i;

	for (i = 0; i < el->n; i++)
		print_message("  got: %s\n", el->msgs[i]);
}

static struct policy *
parse_ok(const char *yaml)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	int r;

	r = policy_parse("p.yaml", yaml, strlen(yaml), &p, &el);
	if (r != 0)
		dump(&el);
	assert_int_equal(r, 0);
	assert_non_null(p);
	assert_int_equal(el.n, 0);
	errlist_free(&el);
	return p;
}

static void
expect_error(const char *yaml, const char *want)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	int r;

	r = policy_parse("p.yaml", yaml, strlen(yaml), &p, &el);
	if (r != SL_ERR_INVALID || !has_msg(&el, want)) {
		print_message("want: %s\n", want);
		dump(&el);
	}
	assert_int_equal(r, SL_ERR_INVALID);
	assert_null(p);
	assert_true(has_msg(&el, want));
	errlist_free(&el);
}

/* One intercept rule around the given lines (at column 4, line 4 on). */
#define RULE(body) \
	"name: p\n" \
	"intercept:\n" \
	"  - name: r\n" \
	body

static struct sl_addr
A(const char *s)
{
	struct sl_addr a;

	assert_int_equal(addr_parse(s, &a), 0);
	return a;
}

static void
expect_verdict(const struct decision *d, enum verdict v, const char *reason,
    const char *rule)
{
	if (d->verdict != v || strcmp(d->reason, reason) != 0)
		print_message("got verdict %d reason %s rule %s\n", d->verdict,
		    d->reason ? d->reason : "(null)",
		    d->rule ? d->rule : "(null)");
	assert_int_equal(d->verdict, v);
	assert_string_equal(d->reason, reason);
	if (rule == NULL)
		assert_null(d->rule);
	else
		assert_string_equal(d->rule, rule);
}

static void
name_verdict(const struct policy *p, const char *name, const char *dst,
    uint16_t port, enum verdict v, const char *reason, const char *rule)
{
	struct sl_addr a = A(dst);
	struct decision d;

	memset(&d, 0xa5, sizeof(d));
	policy_check_name(p, name, &a, port, &d);
	expect_verdict(&d, v, reason, rule);
}

static void
opaque_verdict(const struct policy *p, const char *dst, uint16_t port,
    enum verdict v, const char *reason, const char *rule)
{
	struct sl_addr a = A(dst);
	struct decision d;

	memset(&d, 0xa5, sizeof(d));
	policy_check_opaque(p, &a, port, &d);
	expect_verdict(&d, v, reason, rule);
}

static void
dest_verdict(const struct policy *p, const char *dst, uint16_t port,
    enum verdict v, const char *reason, const char *rule)
{
	struct sl_addr a = A(dst);
	struct decision d;

	memset(&d, 0xa5, sizeof(d));
	policy_check_dest(p, &a, port, &d);
	if (v == VERDICT_CONTINUE) {
		assert_int_equal(d.verdict, VERDICT_CONTINUE);
		return;
	}
	expect_verdict(&d, v, reason, rule);
}

/* ------------------------------------------------------------------ */
/* parsing                                                             */

static void
test_spec_example(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	const struct intercept_rule *r;
	uint8_t digest[32];
	char *buf;
	size_t len;
	FILE *f;

	(void)state;
	if (policy_load(FIXTURE("spec-agent.yaml"), &p, &el) != 0)
		dump(&el);
	assert_non_null(p);
	assert_string_equal(p->name, "agent");
	assert_string_equal(p->file, FIXTURE("spec-agent.yaml"));
	assert_int_equal(p->revision, 0);
	assert_int_equal(p->default_allow, 0);

	assert_int_equal(p->nallow, 3);
	assert_int_equal(p->allow[0].kind, EGRESS_DOMAIN);
	assert_string_equal(p->allow[0].name, "api.openai.com");
	assert_string_equal(p->allow[0].label, "allow:api.openai.com");
	assert_null(p->allow[0].ports);
	assert_int_equal(p->allow[0].line, 5);
	assert_string_equal(p->allow[1].name, "*.githubusercontent.com");
	assert_string_equal(p->allow[1].label,
	    "allow:*.githubusercontent.com");
	assert_int_equal(p->allow[2].kind, EGRESS_CIDR);
	assert_string_equal(p->allow[2].label, "allow:203.0.113.0/24");
	assert_int_equal(p->allow[2].plen, 24);
	assert_int_equal(p->allow[2].nports, 2);
	assert_int_equal(p->allow[2].ports[0], 443);
	assert_int_equal(p->allow[2].ports[1], 80);

	assert_int_equal(p->ndeny, 2);
	assert_string_equal(p->deny[0].label, "deny:169.254.0.0/16");
	assert_string_equal(p->deny[1].label, "deny:gist.githubusercontent.com");

	assert_int_equal(p->nintercepts, 3);
	r = &p->intercepts[0];
	assert_string_equal(r->name, "github-read");
	assert_string_equal(r->label, "intercept:github-read");
	assert_string_equal(r->host, "api.github.com");
	assert_int_equal(r->nmethods, 2);
	assert_string_equal(r->methods[0], "GET");
	assert_string_equal(r->methods[1], "HEAD");
	assert_string_equal(r->path, "/repos/acme/**");
	assert_int_equal(r->nquery, 1);
	assert_string_equal(r->query[0].name, "per_page");
	assert_string_equal(r->query[0].value, "*");
	assert_int_equal(r->nheaders, 1);
	assert_string_equal(r->headers[0].name, "accept");
	assert_string_equal(r->headers[0].value, "application/vnd.github+json");
	assert_int_equal(r->action, ICPT_INJECT);
	assert_int_equal(r->ninject_set, 1);
	assert_string_equal(r->inject_set[0].name, "authorization");
	assert_string_equal(r->inject_set[0].value,
	    "Bearer {{secret:github-token}}");
	assert_int_equal(r->ninject_remove, 1);
	assert_string_equal(r->inject_remove[0], "cookie");
	assert_null(r->upstream_ca);
	assert_int_equal(r->npins, 0);

	r = &p->intercepts[1];
	assert_string_equal(r->name, "stripe-charges");
	assert_string_equal(r->host, "api.stripe.com");
	assert_int_equal(r->nmethods, 1);
	assert_string_equal(r->methods[0], "POST");
	assert_string_equal(r->path, "/v1/charges");
	assert_int_equal(r->action, ICPT_FORWARD);
	assert_string_equal(r->forward_to,
	    "https://policy-proxy.internal.example:8443");
	assert_string_equal(r->forward_audience, "stripe-broker");

	r = &p->intercepts[2];
	assert_string_equal(r->name, "github-default");
	assert_int_equal(r->nmethods, 0);
	assert_null(r->path);
	assert_int_equal(r->action, ICPT_DENY);

	assert_int_equal(nameset_count(p->allow_names), 2);
	assert_int_equal(nameset_count(p->deny_names), 1);
	assert_int_equal(cidr_tree_count(p->allow_cidrs), 1);
	assert_int_equal(cidr_tree_count(p->deny_cidrs), 1);

	/* The digest is BLAKE2b-256 of the file's bytes. */
	assert_non_null(f = fopen(FIXTURE("spec-agent.yaml"), "rb"));
	assert_non_null(buf = malloc(65536));
	len = fread(buf, 1, 65536, f);
	fclose(f);
	crypto_generichash(digest, sizeof(digest), (unsigned char *)buf, len,
	    NULL, 0);
	assert_memory_equal(digest, p->digest, 32);
	free(buf);
	policy_free(p);
	policy_free(NULL);
	errlist_free(&el);
}

static void
test_shipped_policies(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	struct sl_addr a = A("93.184.216.34");
	struct decision d;

	(void)state;
	if (policy_load(SHIPPED("default.yaml"), &p, &el) != 0)
		dump(&el);
	assert_non_null(p);
	assert_string_equal(p->name, "default");
	assert_int_equal(p->nallow + p->ndeny + p->nintercepts, 0);
	policy_check_name(p, "example.com", &a, 443, &d);
	assert_int_equal(d.verdict, VERDICT_DENY);
	policy_check_opaque(p, &a, 443, &d);
	assert_int_equal(d.verdict, VERDICT_DENY);
	assert_false(policy_name_allowed(p, "example.com"));
	policy_free(p);
	p = NULL;

	if (policy_load(SHIPPED("example-agent.yaml"), &p, &el) != 0)
		dump(&el);
	assert_non_null(p);
	assert_true(p->nintercepts > 0);
	assert_true(p->nallow > 0 && p->ndeny > 0);
	policy_free(p);
	errlist_free(&el);
}

static void
test_top_level_errors(void **state)
{
	(void)state;
	expect_error("", "p.yaml:1:1: empty policy");
	expect_error("- a\n", "p.yaml:1:1: a policy must be a map of keys");
	expect_error("egress: {}\n", "p.yaml:1:1: missing required key 'name'");
	expect_error("name: p\ncolour: blue\n",
	    "p.yaml:2:1: unknown key 'colour'");
	expect_error("name: \"-x\"\n",
	    "p.yaml:1:7: 'name': '-x' is not a valid policy name");
	expect_error("name: [a]\n",
	    "p.yaml:1:7: 'name' must be a single value, not a list");
	expect_error("name: p\negress: [a]\n",
	    "p.yaml:2:9: 'egress' must be a map");
	expect_error("name: p\negress: {default: maybe}\n",
	    "p.yaml:2:19: 'egress.default': 'maybe' is neither deny nor allow");
	expect_error("name: p\negress: {allows: []}\n",
	    "p.yaml:2:10: unknown key 'allows' in egress");
	expect_error("name: p\negress: {allow: {domain: x.example}}\n",
	    "p.yaml:2:17: 'egress.allow' must be a list");
	expect_error("name: p\nintercept: {name: x}\n",
	    "p.yaml:2:12: 'intercept' must be a list");
	expect_error("name: p\nname: q\n",
	    "p.yaml:2:1: duplicate key 'name' (first at line 1)");
	expect_error("name: &n p\n", "p.yaml:1:7: anchors are not allowed");
}

static void
test_egress_errors(void **state)
{
	(void)state;
	expect_error("name: p\negress:\n  allow:\n    - domain: \"*\"\n",
	    "p.yaml:4:15: 'domain': '*': '*' may only be the whole first label");
	expect_error("name: p\negress:\n  allow:\n    - domain: a.*.example\n",
	    "p.yaml:4:15: 'domain': 'a.*.example': '*' may only be");
	expect_error("name: p\negress:\n  allow:\n    - domain: \"*x.example\"\n",
	    "'*x.example': '*' may only be");
	expect_error("name: p\negress:\n  allow:\n    - domain: \"*.*.example\"\n",
	    "'*.*.example': '*' may only be");
	expect_error("name: p\negress:\n  deny:\n    - domain: \"*.\"\n",
	    "p.yaml:4:15: 'domain': bad name '*.'");
	expect_error("name: p\negress:\n  allow:\n    - domain: 10.0.0.1\n",
	    "p.yaml:4:15: 'domain': bad name '10.0.0.1'");
	expect_error("name: p\negress:\n  allow:\n    - domain: a..b\n",
	    "'domain': bad name 'a..b'");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.1/8\n",
	    "p.yaml:4:13: 'cidr': bad prefix '10.0.0.1/8'");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/33\n",
	    "'cidr': bad prefix '10.0.0.0/33'");
	expect_error("name: p\negress:\n  allow:\n    - cidr: example.com\n",
	    "'cidr': bad prefix 'example.com'");
	expect_error("name: p\negress:\n  allow:\n    - cidr: \"::fffe:0:0/95\"\n",
	    "p.yaml:4:13: 'cidr': '::fffe:0:0/95' covers part of an "
	    "IPv4-embedding range");
	expect_error("name: p\negress:\n  allow:\n    - {domain: a.example, "
	    "cidr: 10.0.0.0/8}\n",
	    "p.yaml:4:7: an egress rule needs exactly one of 'domain' and "
	    "'cidr'");
	expect_error("name: p\negress:\n  allow:\n    - {ports: [1]}\n",
	    "p.yaml:4:7: an egress rule needs exactly one");
	expect_error("name: p\negress:\n  allow:\n    - a.example\n",
	    "p.yaml:4:7: 'egress.allow' items must be maps");
	expect_error("name: p\negress:\n  deny:\n    - {domain: a.example, "
	    "port: 1}\n", "p.yaml:4:27: unknown key 'port' in egress.deny");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/8\n"
	    "      ports: [0, 443, 65536, http]\n",
	    "p.yaml:5:15: 'ports': '0' is not a port (1..65535)");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/8\n"
	    "      ports: [0, 443, 65536, http]\n",
	    "p.yaml:5:23: 'ports': '65536' is not a port");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/8\n"
	    "      ports: [0, 443, 65536, http]\n",
	    "p.yaml:5:30: 'ports': 'http' is not a port");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/8\n"
	    "      ports: []\n",
	    "p.yaml:5:14: 'ports' must be a non-empty list");
	expect_error("name: p\negress:\n  allow:\n    - cidr: 10.0.0.0/8\n"
	    "      ports: 443\n", "p.yaml:5:14: 'ports' must be a non-empty");
}

static void
test_intercept_errors(void **state)
{
	(void)state;
	expect_error("name: p\nintercept:\n  - match: {host: a.example}\n"
	    "    action: pass\n", "p.yaml:3:5: intercept rule needs 'name'");
	expect_error(RULE("    match: {host: a.example}\n"),
	    "p.yaml:3:5: rule needs inject, forward or action");
	expect_error(RULE("    action: pass\n"),
	    "p.yaml:3:5: intercept rule needs 'match'");
	expect_error(RULE("    match: {path: /x}\n    action: pass\n"),
	    "p.yaml:4:12: 'match' needs 'host'");
	expect_error(RULE("    match: {host: \"*\"}\n    action: pass\n"),
	    "p.yaml:4:19: 'match.host': '*': '*' may only be");
	expect_error(RULE("    match: {host: a.example}\n    action: maybe\n"),
	    "p.yaml:5:13: 'action': 'maybe' is neither pass nor deny");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    forward: {to: \"https://x\", audience: a}\n"),
	    "p.yaml:3:5: rule has more than one of inject, forward and action");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    actions: pass\n"),
	    "p.yaml:6:5: unknown key 'actions' in intercept");
	expect_error(RULE("    match: {host: a.example, verb: GET}\n"
	    "    action: pass\n"),
	    "p.yaml:4:30: unknown key 'verb' in match");
	expect_error("name: p\nintercept:\n"
	    "  - {name: r, match: {host: a.example}, action: pass}\n"
	    "  - {name: s, match: {host: b.example}, action: pass}\n"
	    "  - {name: r, match: {host: c.example}, action: deny}\n",
	    "p.yaml:5:12: intercept rule name 'r' is used twice (first at "
	    "line 3)");
	expect_error("name: p\nintercept:\n"
	    "  - {name: \"r r\", match: {host: a.example}, action: pass}\n",
	    "p.yaml:3:12: 'intercept.name': 'r r' is not a valid rule name");
}

static void
test_match_errors(void **state)
{
	(void)state;
	expect_error(RULE("    match: {host: a.example, methods: [get]}\n"
	    "    action: pass\n"),
	    "p.yaml:4:40: 'match.methods': 'get' is not an uppercase method");
	expect_error(RULE("    match: {host: a.example, methods: [\"GE T\"]}\n"
	    "    action: pass\n"), "'GE T' is not an uppercase method");
	expect_error(RULE("    match: {host: a.example, methods: []}\n"
	    "    action: pass\n"),
	    "p.yaml:4:39: 'match.methods' must be a non-empty list");
	expect_error(RULE("    match: {host: a.example, path: x/y}\n"
	    "    action: pass\n"),
	    "p.yaml:4:36: 'match.path': 'x/y': a path must start with '/'");
	/* observe: never | allowed (observe mode of the sandboxes) */
	{
		struct policy *p = parse_ok("name: p\nobserve: never\n");

		assert_int_equal(p->observe_never, 1);
		policy_free(p);
		p = parse_ok("name: p\nobserve: allowed\n");
		assert_int_equal(p->observe_never, 0);
		policy_free(p);
		p = parse_ok("name: p\n");
		assert_int_equal(p->observe_never, 0);
		policy_free(p);
	}
	expect_error("name: p\nobserve: always\n",
	    "p.yaml:2:10: 'observe': 'always' is neither never nor allowed");
	expect_error(RULE("    match: {host: a.example, path: /a/**b}\n"
	    "    action: pass\n"),
	    "'match.path': '/a/**b': '**' must be a whole segment ('*' is a "
	    "run within one)");
	expect_error(RULE("    match: {host: a.example, path: /a/***}\n"
	    "    action: pass\n"), "'**' must be a whole segment");
	expect_error(RULE("    match: {host: a.example, path: /x**/b}\n"
	    "    action: pass\n"), "'/x**/b': '**' must be a whole segment");
	/* '*' within a segment is a glob of that segment. */
	policy_free(parse_ok(RULE("    match: {host: a.example, path: /a/b*}\n"
	    "    action: pass\n")));
	policy_free(parse_ok(RULE("    match: {host: a.example, path: "
	    "\"/v1/files/*.json\"}\n    action: pass\n")));
	policy_free(parse_ok(RULE("    match: {host: a.example, path: /*a*/**}\n"
	    "    action: pass\n")));
	expect_error(RULE("    match: {host: a.example, path: /a/../b}\n"
	    "    action: pass\n"), "dot segments are not allowed");
	expect_error(RULE("    match: {host: a.example, path: //a}\n"
	    "    action: pass\n"), "empty segment");
	expect_error(RULE("    match: {host: a.example, path: \"/a?b=1\"}\n"
	    "    action: pass\n"), "may not hold spaces, control bytes");
	expect_error(RULE("    match: {host: a.example, path: \"/a%zz\"}\n"
	    "    action: pass\n"), "'%' must start a %XX escape");
	expect_error(RULE("    match: {host: a.example, path: \"/a%4\"}\n"
	    "    action: pass\n"), "'%' must start a %XX escape");
	expect_error(RULE("    match: {host: a.example, path: \"/a%2fb\"}\n"
	    "    action: pass\n"), "an encoded '/', '\\' or NUL never matches");
	expect_error(RULE("    match: {host: a.example, query: [a]}\n"
	    "    action: pass\n"),
	    "p.yaml:4:37: 'match.query' must be a map");
	expect_error(RULE("    match: {host: a.example, headers: "
	    "{\"x y\": a}}\n    action: pass\n"),
	    "p.yaml:4:40: 'match.headers': 'x y' is not a header name");
	expect_error(RULE("    match: {host: a.example, headers: "
	    "{Accept: a, accept: b}}\n    action: pass\n"),
	    "p.yaml:4:51: 'match.headers': header 'accept' is named twice");
	expect_error(RULE("    match: {host: a.example, headers: "
	    "{accept: \"a\\nb\"}}\n    action: pass\n"),
	    "'match.headers': 'a\\x0ab' holds control characters");
}

static void
test_inject_errors(void **state)
{
	(void)state;
	expect_error(RULE("    match: {host: a.example}\n    inject: {}\n"),
	    "p.yaml:5:13: 'inject' needs 'set' or 'remove'");
	expect_error(RULE("    match: {host: a.example}\n    inject: [a]\n"),
	    "p.yaml:5:13: 'inject' must be a map");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {add: {a: b}}\n"),
	    "p.yaml:5:14: unknown key 'add' in inject");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {x-a: \"a\\r\\nb: c\"}}\n"),
	    "p.yaml:5:25: 'inject.set': the value of 'x-a' holds CR, LF");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {\"x a\": b}}\n"),
	    "p.yaml:5:20: 'inject.set': 'x a' is not a header name");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {Host: evil.example}}\n"),
	    "p.yaml:5:20: 'inject.set': header 'host' may not be set");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {remove: [Content-Length]}\n"),
	    "p.yaml:5:23: 'inject.remove': header 'content-length' may not be "
	    "removed");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {X-A: a, x-a: b}}\n"),
	    "'inject.set': header 'x-a' is set twice");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {X-A: a}, remove: [x-A]}\n"),
	    "p.yaml:5:38: 'inject': header 'x-a' is both set and removed");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {remove: cookie}\n"),
	    "p.yaml:5:22: 'inject.remove' must be a list");
}

#define A16	"aaaaaaaaaaaaaaaa"
#define A65	A16 A16 A16 A16 "a"

static void
test_template_errors(void **state)
{
	static const char *const bad[][2] = {
		{ "Bearer {{secret:}}", "a secret name is 1 to 64" },
		{ "Bearer {{secret:a b}}", "must end with '}}'" },
		{ "Bearer {{secret:tok", "must end with '}}'" },
		{ "Bearer {{secret:tok}", "must end with '}}'" },
		{ "Bearer {{ token }}", "'{{' must open {{secret:NAME}}" },
		{ "Bearer {{env:HOME}}", "'{{' must open {{secret:NAME}}" },
		{ "Bearer tok}}", "'}}' without '{{'" },
		{ "{{secret:t | hex}}", "the only filter is '| base64'" },
		{ "{{secret:t |}}", "the only filter is '| base64'" },
		{ "{{secret:t/u}}", "must end with '}}'" },
		{ "{{secret:" A65 "}}", "a secret name is 1 to 64" },
	};
	char yaml[512], want[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), RULE("    match: {host: a.example}\n"
		    "    inject:\n      set: {authorization: \"%s\"}\n"),
		    bad[i][0]);
		snprintf(want, sizeof(want), "p.yaml:6:28: 'inject.set': bad "
		    "template");
		expect_error(yaml, want);
		expect_error(yaml, bad[i][1]);
	}
}

static void
test_templates_ok(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    inject:\n      set:\n"
	    "        authorization: \"Basic {{secret:basic | base64}}\"\n"
	    "        x-key: \"{{ secret:a.b_c-d }}{{secret:A1}} tail {x} }\"\n"
	    "        x-plain: \"no placeholders\"\n"
	    "        x-long: \"{{secret:" A16 A16 A16 A16 "}}\"\n"));
	assert_int_equal(p->intercepts[0].ninject_set, 4);
	assert_string_equal(p->intercepts[0].inject_set[0].value,
	    "Basic {{secret:basic | base64}}");
	policy_free(p);
}

static void
test_paths_ok(void **state)
{
	static const char *const paths[] = {
		"/", "/a", "/a/", "/v1/*/items/**", "/**", "/*", "/a%20b/c",
		"/repos/acme/**", "/a.b/c-d_e~f/@x:y",
	};
	char yaml[256];
	struct policy *p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(yaml, sizeof(yaml), RULE("    match: {host: a.example, "
		    "path: \"%s\"}\n    action: pass\n"), paths[i]);
		p = parse_ok(yaml);
		assert_string_equal(p->intercepts[0].path, paths[i]);
		assert_int_equal(p->intercepts[0].action, ICPT_PASS);
		policy_free(p);
	}
}

static void
test_allow_method_override(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\nintercept:\n"
	    "  - name: a\n    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: true\n"
	    "  - name: b\n    match: {host: b.example}\n    action: pass\n"
	    "    allow_method_override: false\n"
	    "  - name: c\n    match: {host: c.example}\n    action: pass\n"
	    "  - name: d\n    match: {host: d.example}\n"
	    "    inject: {remove: [cookie]}\n    allow_method_override: true\n"
	    "  - name: e\n    match: {host: e.example}\n"
	    "    forward: {to: \"https://proxy.example\"}\n"
	    "    allow_method_override: false\n");
	assert_int_equal(p->nintercepts, 5);
	assert_true(p->intercepts[0].allow_method_override);
	assert_false(p->intercepts[1].allow_method_override);
	assert_false(p->intercepts[2].allow_method_override);
	assert_true(p->intercepts[3].allow_method_override);
	assert_int_equal(p->intercepts[3].action, ICPT_INJECT);
	assert_false(p->intercepts[4].allow_method_override);
	policy_free(p);

	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: yes\n"),
	    "p.yaml:6:28: 'allow_method_override' must be true or false");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: 1\n"),
	    "p.yaml:6:28: 'allow_method_override' must be true or false");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: True\n"),
	    "'allow_method_override' must be true or false");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: [true]\n"),
	    "p.yaml:6:28: 'allow_method_override'");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_override: {a: true}\n"),
	    "p.yaml:6:28: 'allow_method_override'");
	/* A forward rule drops the headers, a deny rule refuses anyway. */
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://proxy.example\"}\n"
	    "    allow_method_override: true\n"),
	    "p.yaml:6:28: 'allow_method_override' is for pass and inject "
	    "rules");
	expect_error(RULE("    match: {host: a.example}\n    action: deny\n"
	    "    allow_method_override: true\n"),
	    "p.yaml:6:28: 'allow_method_override' is for pass and inject "
	    "rules");
	/* It belongs to the rule, not to its match. */
	expect_error(RULE("    match: {host: a.example, "
	    "allow_method_override: true}\n    action: pass\n"),
	    "unknown key 'allow_method_override' in match");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    allow_method_overrides: true\n"),
	    "p.yaml:6:5: unknown key 'allow_method_overrides' in intercept");
}

/* alpn: per policy and per rule, and what a connection's decision offers. */
static void
test_alpn(void **state)
{
	struct sl_addr a = A("198.51.100.7");
	struct policy *p;
	struct decision d;

	(void)state;
	p = parse_ok("name: p\nalpn: [h2, http/1.1]\nintercept:\n"
	    "  - name: a\n    match: {host: a.example}\n    action: pass\n"
	    "  - name: b\n    match: {host: b.example}\n    action: pass\n"
	    "    alpn: [http/1.1]\n"
	    "  - name: b2\n    match: {host: b.example, path: /x}\n"
	    "    action: pass\n    alpn: [h2]\n");
	assert_int_equal(p->alpn.len, 12);
	assert_memory_equal(p->alpn.wire, "\x02h2\x08http/1.1", 12);
	assert_int_equal(p->intercepts[0].alpn.len, 0);
	assert_memory_equal(p->intercepts[1].alpn.wire, "\x08http/1.1", 9);
	assert_memory_equal(p->intercepts[2].alpn.wire, "\x02h2", 3);
	/* A host takes its first rule's list, else the policy's. */
	policy_check_name(p, "a.example", &a, 443, &d);
	assert_int_equal(d.verdict, VERDICT_INTERCEPT);
	assert_ptr_equal(d.alpn, &p->alpn);
	policy_check_name(p, "b.example", &a, 443, &d);
	assert_int_equal(d.verdict, VERDICT_INTERCEPT);
	assert_ptr_equal(d.alpn, &p->intercepts[1].alpn);
	policy_check_name(p, "c.example", &a, 443, &d);
	assert_int_not_equal(d.verdict, VERDICT_INTERCEPT);
	assert_null(d.alpn);
	policy_free(p);

	/* None set: nothing, and the TLS layer offers h2, then http/1.1. */
	p = parse_ok(RULE("    match: {host: a.example}\n    action: pass\n"));
	assert_int_equal(p->alpn.len, 0);
	policy_check_name(p, "a.example", &a, 443, &d);
	assert_int_equal(d.verdict, VERDICT_INTERCEPT);
	assert_non_null(d.alpn);
	assert_int_equal(d.alpn->len, 0);
	policy_free(p);

	expect_error("name: p\nalpn: h2\n",
	    "p.yaml:2:7: 'alpn' must be a list of protocols (h2, http/1.1)");
	expect_error("name: p\nalpn: []\n", "'alpn' must be a list");
	expect_error("name: p\nalpn: [h2, h3]\n",
	    "p.yaml:2:12: 'alpn': 'h3' is neither h2 nor http/1.1");
	expect_error("name: p\nalpn: [http/1.1, h2, http/1.1]\n",
	    "'alpn': 'http/1.1' is named twice");
	expect_error("name: p\nalpn: [H2]\n", "'H2' is neither");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    alpn: [spdy/3]\n"),
	    "p.yaml:6:12: 'intercept.alpn': 'spdy/3' is neither h2 nor "
	    "http/1.1");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    alpn: {h2: true}\n"), "'intercept.alpn' must be a list");
}

static void
test_forward_upstream(void **state)
{
	struct policy *p;
	const struct intercept_rule *r;

	(void)state;
	p = parse_ok(RULE("    match: {host: \"*.Stripe.com\"}\n"
	    "    forward: {to: \"https://Policy.Example:8443/broker\", "
	    "audience: aud, body_hash: true}\n"
	    "    upstream:\n      ca: /etc/ca.pem\n      pin_sha256:\n"
	    "        - \"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\"\n"));
	r = &p->intercepts[0];
	assert_string_equal(r->host, "*.stripe.com");
	assert_int_equal(r->action, ICPT_FORWARD);
	assert_string_equal(r->forward_host, "policy.example");
	assert_int_equal(r->forward_port, 8443);
	assert_string_equal(r->forward_path, "/broker");
	assert_string_equal(r->forward_audience, "aud");
	assert_true(r->forward_body_hash);
	assert_string_equal(r->upstream_ca, "/etc/ca.pem");
	assert_int_equal(r->npins, 1);
	assert_string_equal(r->pins[0],
	    "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
	policy_free(p);

	/* The audience defaults to the proxy's origin. */
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://proxy.example/\"}\n"));
	r = &p->intercepts[0];
	assert_int_equal(r->forward_port, 443);
	assert_string_equal(r->forward_path, "");
	assert_string_equal(r->forward_audience, "https://proxy.example");
	assert_false(r->forward_body_hash);
	policy_free(p);
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://proxy.example:9443\"}\n"));
	assert_string_equal(p->intercepts[0].forward_audience,
	    "https://proxy.example:9443");
	policy_free(p);
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://[2001:db8::1]:8443/b\"}\n"),
	    "p.yaml:5:19: 'forward.to': 'https://[2001:db8::1]:8443/b' must "
	    "name the proxy's host, not an address");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"http://x.example\", audience: a}\n"),
	    "p.yaml:5:19: 'forward.to': 'http://x.example' must start with "
	    "https://");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://u@x.example\", audience: a}\n"),
	    "may not hold user information");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://x.example:0\", audience: a}\n"),
	    "bad port");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https:///path\", audience: a}\n"),
	    "needs a host");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://x.example\", body_hash: yes}\n"),
	    "'forward.body_hash' must be true or false");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {audience: a}\n"),
	    "p.yaml:5:14: 'forward' needs 'to'");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {}\n"),
	    "p.yaml:6:15: 'upstream' needs 'ca', 'pin_sha256' or "
	    "'client_cert'");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {pin_sha256: [\"AAAA\"]}\n"),
	    "p.yaml:6:29: 'upstream.pin_sha256': 'AAAA' is not the base64 of "
	    "32 bytes");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {pin_sha256: "
	    "[\"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=x\"]}\n"),
	    "is not the base64 of 32 bytes");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {pin_sha256: []}\n"),
	    "'upstream.pin_sha256' must be a non-empty list");
}

static void
test_budgets(void **state)
{
	struct policy *p;
	const struct budget_rule *b;

	(void)state;
	p = parse_ok("name: p\nbudgets:\n"
	    "  - {secret: gh-token, requests_per_minute: 60}\n"
	    "  - {secret: aws, requests_per_day: 1000, requests_per_minute: 5}\n");
	assert_int_equal(p->budgets.n, 2);
	assert_non_null(b = budget_find(&p->budgets, "gh-token"));
	assert_int_equal(b->per_minute, 60);
	assert_int_equal(b->per_day, 0);
	assert_int_equal(b->line, 3);
	assert_non_null(b = budget_find(&p->budgets, "aws"));
	assert_int_equal(b->per_minute, 5);
	assert_int_equal(b->per_day, 1000);
	assert_null(budget_find(&p->budgets, "other"));
	policy_free(p);
	p = parse_ok("name: p\n");
	assert_int_equal(p->budgets.n, 0);
	assert_null(budget_find(&p->budgets, "aws"));
	policy_free(p);
	expect_error("name: p\nbudgets: {secret: a}\n",
	    "p.yaml:2:10: 'budgets' must be a list");
	expect_error("name: p\nbudgets: [{requests_per_minute: 1}]\n",
	    "'budgets' item needs 'secret'");
	expect_error("name: p\nbudgets: [{secret: a}]\n",
	    "'budgets' item needs 'requests_per_minute' or 'requests_per_day'");
	expect_error("name: p\nbudgets: [{secret: \"a b\", "
	    "requests_per_day: 1}]\n", "'budgets': 'a b' is not a secret name");
	expect_error("name: p\nbudgets: [{secret: a, requests_per_day: 0}]\n",
	    "'budgets.requests_per_day': 0 is out of range 1..1000000000");
	expect_error("name: p\nbudgets: [{secret: a, requests_per_day: -1}]\n",
	    "'budgets.requests_per_day': '-1' is not a positive integer");
	expect_error("name: p\nbudgets: [{secret: a, requests_per_day: 1}, "
	    "{secret: a, requests_per_minute: 1}]\n",
	    "'budgets': the secret 'a' has two budgets");
	expect_error("name: p\nbudgets: [{secret: a, requests_per_hour: 1}]\n",
	    "unknown key 'requests_per_hour' in budgets");
	expect_error("name: p\nbudgets: [a]\n", "'budgets' items must be maps");
}

/* tokens: sources, their keys per kind, and what names them. */
static void
test_tokens(void **state)
{
	const struct mint_source *t;
	struct policy *p;
#define TOK_ALLOW "egress:\n  allow:\n  - domain: auth.test\n" \
	"  - domain: api.github.com\n    ports: [443]\n"

	(void)state;
	p = parse_ok("name: p\n" TOK_ALLOW "tokens:\n"
	    "  - name: svc\n"
	    "    kind: oauth_client_credentials\n"
	    "    token_url: https://Auth.Test:8443/oauth/token\n"
	    "    client_id: my-client\n"
	    "    secret: svc-secret\n"
	    "    scope: read write\n"
	    "  - {name: gh, kind: github_app, app_id: \"12\", "
	    "installation_id: \"42\", secret: gh-key}\n"
	    "intercept:\n  - name: r\n    match: {host: api.test}\n"
	    "    inject: {set: {authorization: \"Bearer {{token:svc}}\", "
	    "x-gh: \"{{ token:gh | base64 }}\"}}\n");
	assert_int_equal(p->tokens.n, 2);
	assert_non_null(t = token_find(&p->tokens, "svc", 3));
	assert_int_equal(t->kind, MINT_CLIENT_CREDENTIALS);
	assert_string_equal(t->host, "auth.test");
	assert_int_equal(t->port, 8443);
	assert_string_equal(t->client_id, "my-client");
	assert_string_equal(t->secret, "svc-secret");
	assert_string_equal(t->scope, "read write");
	assert_null(t->audience);
	assert_int_equal(t->line, 8);
	assert_non_null(t = token_find(&p->tokens, "gh", 2));
	assert_string_equal(t->token_url, "https://api.github.com/app/"
	    "installations/42/access_tokens");
	assert_int_equal(t->port, 443);
	assert_null(token_find(&p->tokens, "sv", 2));
	/* the rule knows its sources, each once, when the policy loads */
	assert_int_equal(p->intercepts[0].ntokens, 2);
	assert_ptr_equal(p->intercepts[0].tokens[0],
	    token_find(&p->tokens, "svc", 3));
	assert_ptr_equal(p->intercepts[0].tokens[1],
	    token_find(&p->tokens, "gh", 2));
	/* What the source says, not where it stands: its digest. */
	{
		struct policy *p2, *p3;
		char d[17];

		snprintf(d, sizeof(d), "%s", token_find(&p->tokens, "svc",
		    3)->digest);
		assert_int_equal(strlen(d), 16);
		p2 = parse_ok("name: p\n# another comment\n" TOK_ALLOW
		    "tokens:\n  - {name: svc, kind: oauth_client_credentials, "
		    "token_url: \"https://Auth.Test:8443/oauth/token\", "
		    "client_id: my-client, secret: svc-secret, scope: read write}\n");
		assert_string_equal(token_find(&p2->tokens, "svc", 3)->digest, d);
		p3 = parse_ok("name: p\n" TOK_ALLOW
		    "tokens:\n  - {name: svc, kind: oauth_client_credentials, "
		    "token_url: \"https://Auth.Test:8443/oauth/token\", "
		    "client_id: my-client, secret: svc-secret, scope: read}\n");
		assert_string_not_equal(token_find(&p3->tokens, "svc", 3)->digest,
		    d);
		policy_free(p2);
		policy_free(p3);
	}
	policy_free(p);

	/* What names a source that is not there, or an endpoint not allowed. */
	expect_error(RULE("    match: {host: a.test}\n"
	    "    inject: {set: {x: \"{{token:nope}}\"}}\n"),
	    "{{token:nope}} names no source of 'tokens'");
	expect_error("name: p\ntokens:\n  - {name: t, kind: jwt_bearer, "
	    "client_id: c, secret: k, token_url: \"https://idp.test/t\"}\n",
	    "token 't': this policy does not allow its token_url's host "
	    "idp.test on port 443 (not-allowed)");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "github_app, app_id: \"1\", secret: k, token_url: "
	    "\"https://api.github.com:8443/x\"}\n",
	    "host api.github.com on port 8443");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "saml, secret: k, token_url: \"https://auth.test/\"}\n",
	    "'kind' must be oauth_client_credentials");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "oauth_refresh_token, secret: k, token_url: \"https://auth.test/\"}\n",
	    "token 't': kind oauth_refresh_token needs 'client_id'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "github_app, secret: k, token_url: \"https://auth.test/\"}\n",
	    "needs 'app_id'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "github_app, app_id: \"1\", scope: x, secret: k, token_url: "
	    "\"https://auth.test/\"}\n", "kind github_app has no 'scope'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "oauth_client_credentials, client_id: c, secret: k, token_url: "
	    "\"http://auth.test/\"}\n", "must be an https:// URL");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "oauth_client_credentials, client_id: c, secret: k, token_url: "
	    "\"https://10.0.0.1/\"}\n", "must name a host by a DNS name");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "oauth_client_credentials, client_id: c, token_url: "
	    "\"https://auth.test/\"}\n", "token 't' needs 'secret'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "oauth_client_credentials, client_id: \"a\\\"b\", secret: k, "
	    "token_url: \"https://auth.test/\"}\n", "printable ASCII");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n"
	    "  - {name: t, kind: jwt_bearer, client_id: c, secret: k, "
	    "token_url: \"https://auth.test/\"}\n"
	    "  - {name: t, kind: jwt_bearer, client_id: c, secret: k, "
	    "token_url: \"https://auth.test/\"}\n",
	    "'tokens': two sources are called 't'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "jwt_bearer, client_id: c, secret: k, installation_id: \"3\", "
	    "token_url: \"https://auth.test/\"}\n",
	    "only github_app has 'installation_id'");
	expect_error("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "github_app, app_id: \"1\", secret: k, installation_id: \"4\", "
	    "token_url: \"https://auth.test/app/installations/42/x\"}\n",
	    "token_url does not name installation 4");
	p = parse_ok("name: p\n" TOK_ALLOW "tokens:\n  - {name: t, kind: "
	    "github_app, app_id: \"1\", secret: k, installation_id: \"42\", "
	    "token_url: \"https://auth.test/app/installations/42/x\"}\n");
	assert_int_equal(p->tokens.n, 1);
	policy_free(p);
	expect_error("name: p\n" TOK_ALLOW "tokens:\n"
	    "  - {name: a, kind: jwt_bearer, client_id: c, secret: k, token_url: \"https://auth.test/\"}\n"
	    "  - {name: b, kind: jwt_bearer, client_id: c, secret: k, token_url: \"https://auth.test/\"}\n"
	    "  - {name: c, kind: jwt_bearer, client_id: c, secret: k, token_url: \"https://auth.test/\"}\n"
	    "  - {name: d, kind: jwt_bearer, client_id: c, secret: k, token_url: \"https://auth.test/\"}\n"
	    "  - {name: e, kind: jwt_bearer, client_id: c, secret: k, token_url: \"https://auth.test/\"}\n"
	    "intercept:\n  - name: r\n    match: {host: api.test}\n"
	    "    inject: {set: {x: \"{{token:a}}{{token:b}}{{token:a}}\", "
	    "y: \"{{token:c}}{{token:d}}{{token:e}}\"}}\n",
	    "intercept rule 'r' names more than 4 token sources");
	expect_error("name: p\ntokens: {name: t}\n", "'tokens' must be a list");
	expect_error(RULE("    match: {host: a.test}\n"
	    "    inject: {set: {x: \"{{token:}}\"}}\n"),
	    "a token name is 1 to 63 of");
#undef TOK_ALLOW
}

static void
test_keep_cookies(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {x-k: \"{{secret:k}}\"}, keep_cookies: true}\n"));
	assert_true(p->intercepts[0].keep_cookies);
	policy_free(p);
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {x-k: \"{{secret:k}}\"}, keep_cookies: false}\n"));
	assert_false(p->intercepts[0].keep_cookies);
	policy_free(p);
	p = parse_ok(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {x-k: \"{{secret:k}}\"}}\n"));
	assert_false(p->intercepts[0].keep_cookies);
	policy_free(p);
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {set: {x-k: \"{{secret:k}}\"}, keep_cookies: yes}\n"),
	    "'inject.keep_cookies' must be true or false");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    inject: {keep_cookies: true}\n"),
	    "'inject' needs 'set' or 'remove' with at least one header");
}

static void
test_client_cert(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok(RULE("    match: {host: mtls.example}\n    action: pass\n"
	    "    upstream: {client_cert: partner-cert.v2}\n"));
	assert_string_equal(p->intercepts[0].client_cert, "partner-cert.v2");
	assert_null(p->intercepts[0].upstream_ca);
	policy_free(p);
	p = parse_ok(RULE("    match: {host: mtls.example}\n"
	    "    inject: {set: {x-key: \"{{secret:k}}\"}}\n"
	    "    upstream: {client_cert: c, ca: /etc/ca.pem}\n"));
	assert_string_equal(p->intercepts[0].client_cert, "c");
	assert_string_equal(p->intercepts[0].upstream_ca, "/etc/ca.pem");
	policy_free(p);
	p = parse_ok(RULE("    match: {host: mtls.example}\n    action: pass\n"));
	assert_null(p->intercepts[0].client_cert);
	policy_free(p);
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {client_cert: \"a b\"}\n"),
	    "p.yaml:6:29: 'upstream.client_cert': 'a b' is not a secret name");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {client_cert: \"\"}\n"),
	    "is not a secret name");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {client_cert: "
	    "x1234567890123456789012345678901234567890123456789012345678901234}\n"),
	    "is not a secret name");
	expect_error(RULE("    match: {host: a.example}\n    action: pass\n"
	    "    upstream: {client_cert: [a]}\n"),
	    "'upstream.client_cert' must be a single value, not a list");
	expect_error(RULE("    match: {host: a.example}\n    action: deny\n"
	    "    upstream: {client_cert: c}\n"),
	    "'upstream.client_cert' is for pass and inject rules");
	expect_error(RULE("    match: {host: a.example}\n"
	    "    forward: {to: \"https://proxy.example\"}\n"
	    "    upstream: {client_cert: c}\n"),
	    "'upstream.client_cert' is for pass and inject rules");
}

static void
test_every_error_reported(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	const char *f = FIXTURE("many-errors.yaml");
	char want[512];
	static const char *const msgs[] = {
		"1:7: 'name': 'bad name' is not a valid policy name",
		"3:12: 'egress.default': 'maybe' is neither",
		"5:15: 'domain': '*'",
		"6:13: 'cidr': bad prefix '10.0.0.1/8'",
		"7:15: 'ports': '0' is not a port",
		"9:7: an egress rule needs exactly one",
		"11:5: rule needs inject, forward or action",
		"12:42: 'match.methods': 'get'",
		"13:11: intercept rule name 'r1' is used twice",
		"14:38: 'match.path': 'relative'",
		"16:1: unknown key 'colour'",
	};
	size_t i;

	(void)state;
	assert_int_equal(policy_load(f, &p, &el), SL_ERR_INVALID);
	assert_null(p);
	for (i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		snprintf(want, sizeof(want), "%s:%s", f, msgs[i]);
		if (!has_msg(&el, want)) {
			print_message("want: %s\n", want);
			dump(&el);
		}
		assert_true(has_msg(&el, want));
	}
	assert_int_equal(el.n, sizeof(msgs) / sizeof(msgs[0]));
	/* Reported in file order. */
	for (i = 0; i < el.n; i++) {
		snprintf(want, sizeof(want), "%s:%s", f, msgs[i]);
		assert_non_null(strstr(el.msgs[i], want));
	}
	errlist_free(&el);
}

static void
test_load_errors(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	char *big;

	(void)state;
	assert_int_equal(policy_load("/nonexistent/p.yaml", &p, &el),
	    SL_ERR_IO);
	assert_true(has_msg(&el, "/nonexistent/p.yaml: No such file or "
	    "directory"));
	assert_null(p);
	errlist_free(&el);

	assert_non_null(big = malloc(POLICY_MAX_BYTES + 1));
	memset(big, '#', POLICY_MAX_BYTES + 1);
	assert_int_equal(policy_parse("big", big, POLICY_MAX_BYTES + 1, &p,
	    &el), SL_ERR_TOO_BIG);
	assert_true(has_msg(&el, "big: larger than 4194304 bytes"));
	assert_null(p);
	errlist_free(&el);
	free(big);
}

static void
test_names(void **state)
{
	(void)state;
	assert_true(policy_name_valid("a"));
	assert_true(policy_name_valid("Agent-1.2_x"));
	assert_true(policy_name_valid("0"));
	assert_true(policy_name_valid(
	    "a23456789012345678901234567890123456789012345678901234567890123"));
	assert_false(policy_name_valid(
	    "a234567890123456789012345678901234567890123456789012345678901234"));
	assert_false(policy_name_valid(""));
	assert_false(policy_name_valid("-a"));
	assert_false(policy_name_valid(".a"));
	assert_false(policy_name_valid("a b"));
	assert_false(policy_name_valid("a/b"));
	assert_false(policy_name_valid("ä"));

	assert_true(policy_pattern_match("a.example", "a.example"));
	assert_false(policy_pattern_match("a.example", "b.a.example"));
	assert_true(policy_pattern_match("*.example", "a.example"));
	assert_true(policy_pattern_match("*.example", "b.a.example"));
	assert_false(policy_pattern_match("*.example", "example"));
	assert_false(policy_pattern_match("*.example", "aexample"));
}

static void
test_prefix_canonical(void **state)
{
	static const struct {
		const char *in;
		const char *out;
		unsigned plen;
	} ok[] = {
		{ "10.0.0.0/8", "10.0.0.0", 8 },
		{ "::ffff:10.0.0.0/104", "10.0.0.0", 8 },
		{ "::ffff:203.0.113.7/128", "203.0.113.7", 32 },
		{ "::ffff:0:0/96", "0.0.0.0", 0 },
		{ "64:ff9b::c000:200/120", "192.0.2.0", 24 },
		{ "2002:c000:200::/40", "192.0.2.0", 24 },
		{ "2002:c000:201::/48", "192.0.2.1", 32 },
		{ "2001:db8::/32", "2001:db8::", 32 },
		{ "::/0", "::", 0 },
		{ "fd00::/8", "fd00::", 8 },
	};
	static const char *const bad[] = {
		"::fffe:0:0/95",		/* straddles the mapped range */
		"2002:c000:201:1::/64",		/* narrower than its IPv4 */
	};
	struct sl_addr a, o;
	unsigned plen, oplen;
	char buf[ADDR_STRLEN];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(addr_parse_prefix(ok[i].in, &a, &plen), 0);
		assert_int_equal(policy_prefix_canonical(&a, plen, &o, &oplen),
		    0);
		assert_string_equal(addr_format(&o, buf, sizeof(buf)),
		    ok[i].out);
		assert_int_equal(oplen, ok[i].plen);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(addr_parse_prefix(bad[i], &a, &plen), 0);
		assert_int_equal(policy_prefix_canonical(&a, plen, &o, &oplen),
		    SL_ERR_INVALID);
	}
}

/* ------------------------------------------------------------------ */
/* decisions                                                           */

static void
test_deny_wins(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  default: allow\n  allow:\n"
	    "    - domain: \"*.example.com\"\n"
	    "    - domain: bad.example.com\n"
	    "    - cidr: 198.51.100.0/24\n"
	    "  deny:\n"
	    "    - domain: bad.example.com\n"
	    "    - domain: \"*.evil.example.com\"\n"
	    "    - cidr: 198.51.100.128/25\n");
	/* Name: deny-listed although allowed exactly and by wildcard. */
	name_verdict(p, "bad.example.com", "93.184.216.34", 443, VERDICT_DENY,
	    "deny-name", "deny:bad.example.com");
	name_verdict(p, "x.evil.example.com", "93.184.216.34", 443,
	    VERDICT_DENY, "deny-name", "deny:*.evil.example.com");
	name_verdict(p, "good.example.com", "93.184.216.34", 443, VERDICT_PASS,
	    "allow-name", "allow:*.example.com");
	/* CIDR: the deny /25 inside the allow /24 wins, for names too. */
	dest_verdict(p, "198.51.100.200", 443, VERDICT_DENY, "deny-cidr",
	    "deny:198.51.100.128/25");
	name_verdict(p, "good.example.com", "198.51.100.200", 443,
	    VERDICT_DENY, "deny-cidr", "deny:198.51.100.128/25");
	opaque_verdict(p, "198.51.100.200", 22, VERDICT_DENY, "deny-cidr",
	    "deny:198.51.100.128/25");
	opaque_verdict(p, "198.51.100.7", 22, VERDICT_PASS, "allow-cidr",
	    "allow:198.51.100.0/24");
	dest_verdict(p, "198.51.100.7", 22, VERDICT_CONTINUE, NULL, NULL);
	assert_false(policy_name_allowed(p, "bad.example.com"));
	assert_false(policy_name_allowed(p, "a.evil.example.com"));
	assert_true(policy_name_allowed(p, "evil.example.com"));
	policy_free(p);
}

static void
test_wildcard_and_case(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - domain: \"*.githubusercontent.com\"\n"
	    "    - domain: API.OpenAI.com.\n");
	assert_string_equal(p->allow[1].name, "api.openai.com");
	/* A wildcard covers any depth below, not the apex. */
	name_verdict(p, "raw.githubusercontent.com", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:*.githubusercontent.com");
	name_verdict(p, "a.b.githubusercontent.com", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:*.githubusercontent.com");
	name_verdict(p, "githubusercontent.com", "93.184.216.34", 443,
	    VERDICT_DENY, "not-allowed", NULL);
	name_verdict(p, "xgithubusercontent.com", "93.184.216.34", 443,
	    VERDICT_DENY, "not-allowed", NULL);
	/* Case and one trailing dot do not matter, on either side. */
	name_verdict(p, "Api.OPENAI.com.", "93.184.216.34", 443, VERDICT_PASS,
	    "allow-name", "allow:api.openai.com");
	name_verdict(p, "RAW.GithubUserContent.COM", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:*.githubusercontent.com");
	name_verdict(p, "x.api.openai.com", "93.184.216.34", 443,
	    VERDICT_DENY, "not-allowed", NULL);
	/* A name that does not normalise is denied. */
	name_verdict(p, "bad name.com", "93.184.216.34", 443, VERDICT_DENY,
	    "invalid-name", NULL);
	assert_true(policy_name_allowed(p, "API.openai.COM."));
	assert_true(policy_name_allowed(p, "x.githubusercontent.com"));
	assert_false(policy_name_allowed(p, "githubusercontent.com"));
	assert_false(policy_name_allowed(p, "bad name"));
	assert_false(policy_name_allowed(p, NULL));
	policy_free(p);
}

static void
test_intercept_verdict(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	struct sl_addr a = A("140.82.112.6");
	struct decision d;

	(void)state;
	assert_int_equal(policy_load(FIXTURE("spec-agent.yaml"), &p, &el), 0);
	policy_check_name(p, "api.github.com", &a, 443, &d);
	expect_verdict(&d, VERDICT_INTERCEPT, "intercept",
	    "intercept:github-read");
	assert_true(d.need_binding);
	policy_check_name(p, "API.Stripe.com", &a, 443, &d);
	expect_verdict(&d, VERDICT_INTERCEPT, "intercept",
	    "intercept:stripe-charges");
	assert_true(d.need_binding);
	/* Not allow-listed, yet resolvable: intercepted hosts are. */
	assert_true(policy_name_allowed(p, "api.github.com"));
	assert_true(policy_name_allowed(p, "api.stripe.com"));
	assert_false(policy_name_allowed(p, "github.com"));
	assert_false(policy_name_allowed(p, "gist.githubusercontent.com"));
	assert_true(policy_name_allowed(p, "raw.githubusercontent.com"));
	/* SPEC's allow-name binds the name to the address. */
	policy_check_name(p, "api.openai.com", &a, 443, &d);
	expect_verdict(&d, VERDICT_PASS, "allow-name", "allow:api.openai.com");
	assert_true(d.need_binding);
	name_verdict(p, "gist.githubusercontent.com", "93.184.216.34", 443,
	    VERDICT_DENY, "deny-name", "deny:gist.githubusercontent.com");
	name_verdict(p, "github.com", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	policy_free(p);

	/* A deny-listed host is denied even when a rule intercepts it. */
	p = parse_ok("name: p\negress:\n  deny: [{domain: \"*.example.com\"}]\n"
	    "intercept:\n  - {name: r, match: {host: a.example.com}, "
	    "action: pass}\n");
	name_verdict(p, "a.example.com", "93.184.216.34", 443, VERDICT_DENY,
	    "deny-name", "deny:*.example.com");
	assert_false(policy_name_allowed(p, "a.example.com"));
	policy_free(p);

	/*
	 * The address rules apply to intercepted hosts as to the others: an
	 * intercepted name in private space is refused unless an allow CIDR
	 * covers it (with the port), and stays intercepted where one does.
	 */
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - {cidr: 10.1.0.0/16, ports: [443]}\n"
	    "intercept:\n  - {name: r, match: {host: a.example.com}, "
	    "action: pass}\n");
	name_verdict(p, "a.example.com", "10.0.0.5", 443, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "a.example.com", "fd00::5", 443, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "a.example.com", "10.1.2.3", 80, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "a.example.com", "10.1.2.3", 443, VERDICT_INTERCEPT,
	    "intercept", "intercept:r");
	name_verdict(p, "a.example.com", "93.184.216.34", 443,
	    VERDICT_INTERCEPT, "intercept", "intercept:r");
	policy_free(p);
}

static void
test_cidr_ports(void **state)
{
	struct policy *p;
	struct sl_addr a = A("203.0.113.9");
	struct decision d;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - cidr: 203.0.113.0/24\n      ports: [443, 80]\n"
	    "    - cidr: 203.0.113.0/28\n      ports: [22]\n"
	    "  deny:\n    - cidr: 203.0.113.8/29\n      ports: [25]\n");
	opaque_verdict(p, "203.0.113.9", 443, VERDICT_PASS, "allow-cidr",
	    "allow:203.0.113.0/24");
	opaque_verdict(p, "203.0.113.9", 80, VERDICT_PASS, "allow-cidr",
	    "allow:203.0.113.0/24");
	/* A longer prefix with other ports is a rule of its own. */
	opaque_verdict(p, "203.0.113.9", 22, VERDICT_PASS, "allow-cidr",
	    "allow:203.0.113.0/28");
	opaque_verdict(p, "203.0.113.100", 22, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	opaque_verdict(p, "203.0.113.9", 8080, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	/* Deny CIDRs respect their ports too. */
	dest_verdict(p, "203.0.113.9", 25, VERDICT_DENY, "deny-cidr",
	    "deny:203.0.113.8/29");
	dest_verdict(p, "203.0.113.9", 443, VERDICT_CONTINUE, NULL, NULL);
	/* With a name: right port passes by the CIDR, wrong port is denied. */
	policy_check_name(p, "svc.example", &a, 443, &d);
	expect_verdict(&d, VERDICT_PASS, "allow-cidr", "allow:203.0.113.0/24");
	assert_false(d.need_binding);
	name_verdict(p, "svc.example", "203.0.113.9", 8443, VERDICT_DENY,
	    "not-allowed", NULL);
	policy_free(p);
}

static void
test_domain_ports(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - domain: \"*.example.com\"\n      ports: [443]\n"
	    "    - domain: api.example.com\n      ports: [8443]\n"
	    "    - domain: api.example.com\n      ports: [9443]\n"
	    "  deny:\n    - domain: \"*.example.com\"\n      ports: [25]\n");
	/* Every matching rule counts, not only the most specific one. */
	name_verdict(p, "api.example.com", "93.184.216.34", 443, VERDICT_PASS,
	    "allow-name", "allow:*.example.com");
	name_verdict(p, "api.example.com", "93.184.216.34", 8443, VERDICT_PASS,
	    "allow-name", "allow:api.example.com");
	name_verdict(p, "api.example.com", "93.184.216.34", 9443, VERDICT_PASS,
	    "allow-name", "allow:api.example.com");
	name_verdict(p, "www.example.com", "93.184.216.34", 8443, VERDICT_DENY,
	    "not-allowed", NULL);
	name_verdict(p, "api.example.com", "93.184.216.34", 25, VERDICT_DENY,
	    "deny-name", "deny:*.example.com");
	/* A deny limited to some ports leaves the name resolvable. */
	assert_true(policy_name_allowed(p, "api.example.com"));
	assert_false(policy_name_allowed(p, "example.com"));
	policy_free(p);

	/* A longer wildcard that does not cover the port hides no shorter one. */
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - domain: \"*.a.example.org\"\n      ports: [443]\n"
	    "    - domain: \"*.example.org\"\n"
	    "  deny:\n"
	    "    - domain: \"*.b.example.org\"\n      ports: [25]\n"
	    "    - domain: \"*.example.org\"\n      ports: [23]\n");
	name_verdict(p, "x.a.example.org", "93.184.216.34", 22, VERDICT_PASS,
	    "allow-name", "allow:*.example.org");
	name_verdict(p, "x.a.example.org", "93.184.216.34", 443, VERDICT_PASS,
	    "allow-name", "allow:*.a.example.org");
	name_verdict(p, "x.b.example.org", "93.184.216.34", 23, VERDICT_DENY,
	    "deny-name", "deny:*.example.org");
	name_verdict(p, "x.b.example.org", "93.184.216.34", 25, VERDICT_DENY,
	    "deny-name", "deny:*.b.example.org");
	policy_free(p);
}

static void
test_private_destinations(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - domain: internal.example.com\n"
	    "    - domain: public.example.com\n"
	    "    - cidr: 10.1.0.0/16\n"
	    "    - cidr: fd00:1::/32\n");
	/* An allowed name on a private address is denied (rebinding)... */
	name_verdict(p, "public.example.com", "10.9.9.9", 443, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "public.example.com", "192.168.1.1", 443,
	    VERDICT_DENY, "private-address", NULL);
	name_verdict(p, "public.example.com", "100.64.0.1", 443, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "public.example.com", "fd00:2::1", 443, VERDICT_DENY,
	    "private-address", NULL);
	name_verdict(p, "public.example.com", "::ffff:172.16.0.1", 443,
	    VERDICT_DENY, "private-address", NULL);
	/* ...unless an allow CIDR names the private range. */
	name_verdict(p, "internal.example.com", "10.1.2.3", 443, VERDICT_PASS,
	    "allow-cidr", "allow:10.1.0.0/16");
	name_verdict(p, "internal.example.com", "fd00:1:2::3", 443,
	    VERDICT_PASS, "allow-cidr", "allow:fd00:1::/32");
	opaque_verdict(p, "10.1.2.3", 5432, VERDICT_PASS, "allow-cidr",
	    "allow:10.1.0.0/16");
	opaque_verdict(p, "::ffff:10.1.2.3", 5432, VERDICT_PASS, "allow-cidr",
	    "allow:10.1.0.0/16");
	opaque_verdict(p, "10.2.0.1", 5432, VERDICT_DENY, "private-address",
	    NULL);
	opaque_verdict(p, "93.184.216.34", 443, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	policy_free(p);
}

static void
test_forbidden_destinations(void **state)
{
	static const char *const forbidden[] = {
		"127.0.0.1", "169.254.169.254", "::ffff:127.0.0.1",
		"64:ff9b::7f00:1", "::1", "0.0.0.0", "224.0.0.1",
		"255.255.255.255", "fe80::1", "2002:7f00:1::", "ff02::1",
		"::ffff:169.254.169.254",
	};
	struct policy *p;
	size_t i;

	(void)state;
	p = parse_ok("name: p\negress:\n  default: allow\n  allow:\n"
	    "    - cidr: 0.0.0.0/0\n    - cidr: ::/0\n"
	    "    - domain: metadata.google.internal\n");
	for (i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++) {
		dest_verdict(p, forbidden[i], 80, VERDICT_DENY,
		    "forbidden-address", NULL);
		name_verdict(p, "metadata.google.internal", forbidden[i], 80,
		    VERDICT_DENY, "forbidden-address", NULL);
		opaque_verdict(p, forbidden[i], 80, VERDICT_DENY,
		    "forbidden-address", NULL);
	}
	/* The same allow-all lets a public address through. */
	opaque_verdict(p, "93.184.216.34", 80, VERDICT_PASS, "allow-cidr",
	    "allow:0.0.0.0/0");
	opaque_verdict(p, "2606:2800:220:1::1", 80, VERDICT_PASS, "allow-cidr",
	    "allow:::/0");
	policy_free(p);
}

static void
test_default_allow_and_empty(void **state)
{
	struct policy *p;
	struct sl_addr a = A("93.184.216.34");
	struct decision d;

	(void)state;
	p = parse_ok("name: p\negress: {default: allow}\n");
	policy_check_name(p, "anything.example", &a, 443, &d);
	expect_verdict(&d, VERDICT_PASS, "default-allow", NULL);
	assert_true(d.need_binding);
	/* default: allow does not open opaque TCP or private addresses. */
	opaque_verdict(p, "93.184.216.34", 443, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	name_verdict(p, "anything.example", "10.0.0.1", 443, VERDICT_DENY,
	    "private-address", NULL);
	assert_true(policy_name_allowed(p, "anything.example"));
	policy_free(p);

	p = parse_ok("name: p\negress: {default: deny}\n");
	name_verdict(p, "anything.example", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	assert_false(policy_name_allowed(p, "anything.example"));
	policy_free(p);

	/* An empty allow list denies; so does no egress at all. */
	p = parse_ok("name: p\negress:\n  allow: []\n  deny: []\n");
	assert_int_equal(p->default_allow, 0);
	name_verdict(p, "anything.example", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	opaque_verdict(p, "93.184.216.34", 443, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	policy_free(p);
	p = parse_ok("name: p\n");
	name_verdict(p, "anything.example", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	policy_check_name(p, NULL, &a, 443, &d);
	expect_verdict(&d, VERDICT_DENY, "no-cidr-rule", NULL);
	policy_free(p);
}

static void
test_opaque_needs_cidr(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - domain: api.example.com\n");
	/* The name is allowed, but opaque TCP to its address is not. */
	name_verdict(p, "api.example.com", "93.184.216.34", 443, VERDICT_PASS,
	    "allow-name", "allow:api.example.com");
	opaque_verdict(p, "93.184.216.34", 443, VERDICT_DENY, "no-cidr-rule",
	    NULL);
	policy_free(p);
}

static void
test_mapped_cidr_rules(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("name: p\negress:\n  allow:\n"
	    "    - cidr: \"::ffff:198.51.100.0/120\"\n"
	    "  deny:\n    - cidr: \"::ffff:198.51.100.64/122\"\n");
	assert_int_equal(p->allow[0].prefix.family, AF_INET);
	assert_int_equal(p->allow[0].plen, 24);
	assert_string_equal(p->allow[0].label, "allow:198.51.100.0/24");
	assert_string_equal(p->deny[0].label, "deny:198.51.100.64/26");
	opaque_verdict(p, "198.51.100.1", 443, VERDICT_PASS, "allow-cidr",
	    "allow:198.51.100.0/24");
	opaque_verdict(p, "::ffff:198.51.100.1", 443, VERDICT_PASS,
	    "allow-cidr", "allow:198.51.100.0/24");
	opaque_verdict(p, "64:ff9b::198.51.100.1", 443, VERDICT_PASS,
	    "allow-cidr", "allow:198.51.100.0/24");
	dest_verdict(p, "198.51.100.65", 443, VERDICT_DENY, "deny-cidr",
	    "deny:198.51.100.64/26");
	dest_verdict(p, "2002:c633:6441::1", 443, VERDICT_DENY, "deny-cidr",
	    "deny:198.51.100.64/26");
	policy_free(p);
}

static void
test_idn(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;

	(void)state;
	if (policy_load(FIXTURE("idn.yaml"), &p, &el) != 0)
		dump(&el);
	assert_non_null(p);
	assert_string_equal(p->allow[0].name, "xn--bcher-kva.example");
	assert_string_equal(p->allow[1].name, "*.xn--mnchen-3ya.example");
	name_verdict(p, "xn--bcher-kva.example", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:xn--bcher-kva.example");
	name_verdict(p, "XN--BCHER-KVA.EXAMPLE.", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:xn--bcher-kva.example");
	name_verdict(p, "www.xn--mnchen-3ya.example", "93.184.216.34", 443,
	    VERDICT_PASS, "allow-name", "allow:*.xn--mnchen-3ya.example");
	name_verdict(p, "buecher.example", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	/* SNI carries A-labels only: a U-label on the wire is refused. */
	name_verdict(p, "bücher.example", "93.184.216.34", 443, VERDICT_DENY,
	    "invalid-name", NULL);
	assert_true(policy_name_allowed(p, "xn--bcher-kva.example"));
	policy_free(p);
	errlist_free(&el);
}

static void
test_many_rules(void **state)
{
	enum { N = 100000 };
	struct policy *p = NULL;
	struct errlist el = ERRLIST_INIT;
	size_t cap = 64 + (size_t)N * 40, len;
	char *y, name[64];
	size_t i;

	(void)state;
	assert_non_null(y = malloc(cap));
	len = (size_t)snprintf(y, cap, "name: big\negress:\n  allow:\n");
	for (i = 0; i < N; i++) {
		if (i % 2 == 0)
			len += (size_t)snprintf(y + len, cap - len,
			    "  - domain: h%zu.example.com\n", i);
		else
			len += (size_t)snprintf(y + len, cap - len,
			    "  - domain: \"*.w%zu.example.net\"\n", i);
	}
	assert_true(len < POLICY_MAX_BYTES);
	if (policy_parse("big.yaml", y, len, &p, &el) != 0)
		dump(&el);
	assert_non_null(p);
	assert_int_equal(p->nallow, N);
	assert_int_equal(nameset_count(p->allow_names), N);
	for (i = 0; i < N; i += 997) {
		snprintf(name, sizeof(name), i % 2 == 0 ? "h%zu.example.com" :
		    "a.b.w%zu.example.net", i);
		name_verdict(p, name, "93.184.216.34", 443, VERDICT_PASS,
		    "allow-name", p->allow[i].label);
		assert_true(policy_name_allowed(p, name));
	}
	name_verdict(p, "h1.example.com", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	name_verdict(p, "w1.example.net", "93.184.216.34", 443, VERDICT_DENY,
	    "not-allowed", NULL);
	name_verdict(p, "h100000.example.com", "93.184.216.34", 443,
	    VERDICT_DENY, "not-allowed", NULL);
	policy_free(p);
	free(y);
	errlist_free(&el);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_example),
		cmocka_unit_test(test_shipped_policies),
		cmocka_unit_test(test_top_level_errors),
		cmocka_unit_test(test_egress_errors),
		cmocka_unit_test(test_intercept_errors),
		cmocka_unit_test(test_match_errors),
		cmocka_unit_test(test_inject_errors),
		cmocka_unit_test(test_template_errors),
		cmocka_unit_test(test_templates_ok),
		cmocka_unit_test(test_paths_ok),
		cmocka_unit_test(test_forward_upstream),
		cmocka_unit_test(test_client_cert),
		cmocka_unit_test(test_keep_cookies),
		cmocka_unit_test(test_budgets),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_allow_method_override),
		cmocka_unit_test(test_alpn),
		cmocka_unit_test(test_every_error_reported),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_prefix_canonical),
		cmocka_unit_test(test_deny_wins),
		cmocka_unit_test(test_wildcard_and_case),
		cmocka_unit_test(test_intercept_verdict),
		cmocka_unit_test(test_cidr_ports),
		cmocka_unit_test(test_domain_ports),
		cmocka_unit_test(test_private_destinations),
		cmocka_unit_test(test_forbidden_destinations),
		cmocka_unit_test(test_default_allow_and_empty),
		cmocka_unit_test(test_opaque_needs_cidr),
		cmocka_unit_test(test_mapped_cidr_rules),
		cmocka_unit_test(test_idn),
		cmocka_unit_test(test_many_rules),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
