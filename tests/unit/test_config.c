/* test_config.c: sluiced.yaml and the YAML tree under it. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/addr.h"
#include "util/err.h"
#include "util/log.h"
#include "util/yamltree.h"
#include "conf/config.h"

#define FIXTURE(f)	TEST_SRCDIR "/fixtures/config/" f

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static int
parse(const char *yaml, struct config **c, struct errlist *el)
{
	return config_parse("t.yaml", yaml, strlen(yaml), c, el);
}

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

/* The YAML is refused, and one message holds want. */
static void
expect_error(const char *yaml, const char *want)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	int r;

	r = parse(yaml, &c, &el);
	if (r != SL_ERR_INVALID || !has_msg(&el, want)) {
		print_message("want: %s\n", want);
		dump(&el);
	}
	assert_int_equal(r, SL_ERR_INVALID);
	assert_null(c);
	assert_true(has_msg(&el, want));
	errlist_free(&el);
}

static struct config *
parse_ok(const char *yaml)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	int r;

	r = parse(yaml, &c, &el);
	if (r != 0)
		dump(&el);
	assert_int_equal(r, 0);
	assert_non_null(c);
	assert_int_equal(el.n, 0);
	errlist_free(&el);
	return c;
}

/* An endpoint as "ADDR port". */
static void
expect_ep(const struct endpoint *ep, const char *addr, uint16_t port)
{
	struct sl_addr a;
	char buf[ADDR_STRLEN];
	uint16_t p = 0;

	assert_int_equal(addr_from_sockaddr((const struct sockaddr *)&ep->ss,
	    ep->len, &a, &p), 0);
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), addr);
	assert_int_equal(p, port);
}

#define BASE \
	"listen:\n" \
	"  transparent: [\"0.0.0.0:15001\"]\n" \
	"resolvers: [\"127.0.0.53:53\"]\n" \
	"policy_dir: /p\n"

/* ------------------------------------------------------------------ */
/* valid files                                                         */

static void
test_full_file(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	struct sl_addr a;
	char buf[ADDR_STRLEN];

	(void)state;
	if (config_load(FIXTURE("full.yaml"), &c, &el) != 0)
		dump(&el);
	assert_non_null(c);
	assert_string_equal(c->path, FIXTURE("full.yaml"));

	assert_int_equal(c->ntransparent, 2);
	expect_ep(&c->transparent[0], "0.0.0.0", 15001);
	expect_ep(&c->transparent[1], "::", 15001);
	assert_string_equal(c->transparent[1].text, "[::]:15001");
	assert_int_equal(c->nproxy, 1);
	expect_ep(&c->proxy[0], "127.0.0.1", 3128);
	assert_int_equal(c->ndns, 2);
	expect_ep(&c->dns[0], "0.0.0.0", 15053);
	expect_ep(&c->dns[1], "::", 15053);
	assert_string_equal(c->control, "/tmp/sluice-test/control.sock");
	assert_non_null(c->metrics);
	expect_ep(c->metrics, "127.0.0.1", 9464);

	assert_int_equal(c->nresolvers, 4);
	expect_ep(&c->resolvers[0], "127.0.0.53", 53);
	expect_ep(&c->resolvers[1], "9.9.9.9", 53);
	expect_ep(&c->resolvers[2], "2620:fe::fe", 5353);
	expect_ep(&c->resolvers[3], "2620:fe::9", 53);

	assert_string_equal(c->policy_dir, "/etc/sluice/policy.d");
	assert_string_equal(c->state_dir, "/var/lib/sluice-test/state");
	assert_string_equal(c->secret_dir, "/var/lib/sluice/secrets");
	assert_int_equal(c->ngateway_keys, 2);
	assert_string_equal(c->gateway_keys[0], "/etc/sluice/gateway.key");
	assert_string_equal(c->gateway_keys[1], "/etc/sluice/gateway-old.key");
	assert_string_equal(c->signing_key, "/etc/sluice/signing.key");
	assert_string_equal(c->issuer, "https://sluice.example");
	assert_string_equal(c->upstream_ca, "/etc/ssl/certs/custom.pem");
	assert_string_equal(c->audit_path, "/var/log/sluice/audit.jsonl");
	assert_int_equal(c->audit_fsync, AUDIT_FSYNC_ALWAYS);
	assert_int_equal(c->workers, 4);
	assert_string_equal(c->user, "sluice");

	assert_int_equal(c->limits.connections, 2048);
	assert_int_equal(c->limits.dns_qps, 50);
	assert_int_equal(c->limits.header_bytes, 32768);
	assert_int_equal(c->limits.client_hello_bytes, 8192);

	assert_int_equal(c->timeouts.handshake, 5000);
	assert_int_equal(c->timeouts.idle, 600000);
	assert_int_equal(c->timeouts.connect, 1500);
	assert_int_equal(c->timeouts.first_byte, 250);
	assert_int_equal(c->timeouts.drain, 3600000);

	assert_int_equal(c->nsandboxes, 2);
	assert_string_equal(c->sandboxes[0].id, "sb1");
	assert_string_equal(c->sandboxes[0].policy, "agent");
	assert_string_equal(c->sandboxes[0].team, "t");
	assert_string_equal(c->sandboxes[0].project, "p");
	assert_int_equal(c->sandboxes[0].line, 27);
	assert_int_equal(c->sandboxes[0].nsources, 2);
	assert_string_equal(addr_format(&c->sandboxes[0].sources[0], buf,
	    sizeof(buf)), "198.18.0.2");
	assert_int_equal(c->sandboxes[0].plens[0], 32);
	assert_string_equal(addr_format(&c->sandboxes[0].sources[1], buf,
	    sizeof(buf)), "fd00:5c::1:0");
	assert_int_equal(c->sandboxes[0].plens[1], 112);
	/* An IPv4-mapped source prefix is stored as the IPv4 prefix. */
	assert_string_equal(c->sandboxes[1].id, "sb-2.x");
	assert_null(c->sandboxes[1].team);
	assert_null(c->sandboxes[1].project);
	assert_int_equal(c->sandboxes[1].nsources, 1);
	a = c->sandboxes[1].sources[0];
	assert_int_equal(a.family, AF_INET);
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), "198.18.1.0");
	assert_int_equal(c->sandboxes[1].plens[0], 24);
	config_free(c);
	errlist_free(&el);
}

/* Relative paths name files beside the configuration, not in the cwd. */
static void
test_relative_paths(void **state)
{
	static const char y[] = "listen: {proxy: [\"127.0.0.1:3128\"], "
	    "control: run/c.sock}\nresolvers: [\"1.1.1.1\"]\n"
	    "policy_dir: policy.d\nstate_dir: ./state\nsecret_dir: /abs/s\n"
	    "gateway_key: [keys/a.key, /abs/b.key]\nsigning_key: keys/s.key\n"
	    "upstream_ca: ../ca.pem\naudit: {path: log/audit.jsonl}\n";
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;

	(void)state;
	if (config_parse("/etc/sluice/sluiced.yaml", y, sizeof(y) - 1, &c,
	    &el) != 0)
		dump(&el);
	assert_non_null(c);
	assert_string_equal(c->control, "/etc/sluice/run/c.sock");
	assert_string_equal(c->policy_dir, "/etc/sluice/policy.d");
	assert_string_equal(c->state_dir, "/etc/sluice/./state");
	assert_string_equal(c->secret_dir, "/abs/s");
	assert_string_equal(c->gateway_keys[0], "/etc/sluice/keys/a.key");
	assert_string_equal(c->gateway_keys[1], "/abs/b.key");
	assert_string_equal(c->signing_key, "/etc/sluice/keys/s.key");
	assert_ptr_equal(c->signing_key, c->signing_keys[0]);
	assert_string_equal(c->upstream_ca, "/etc/sluice/../ca.pem");
	assert_string_equal(c->audit_path, "/etc/sluice/log/audit.jsonl");
	assert_int_equal(c->log_format, -1);	/* absent: as log_init found */
	config_free(c);
	/* A configuration named without a folder: as written (the cwd). */
	assert_int_equal(config_parse("sluiced.yaml", y, sizeof(y) - 1, &c,
	    &el), 0);
	assert_string_equal(c->policy_dir, "policy.d");
	config_free(c);
}

static void
test_log_format(void **state)
{
	static const char base[] = "listen: {proxy: [\"127.0.0.1:3128\"]}\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n";
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	char y[256];

	(void)state;
	snprintf(y, sizeof(y), "%slog: {format: json}\n", base);
	assert_int_equal(config_parse("/e/s.yaml", y, strlen(y), &c, &el), 0);
	assert_int_equal(c->log_format, LOG_FMT_JSON);
	config_free(c);
	snprintf(y, sizeof(y), "%slog: {format: journal}\n", base);
	assert_int_equal(config_parse("/e/s.yaml", y, strlen(y), &c, &el), 0);
	assert_int_equal(c->log_format, LOG_FMT_JOURNAL);
	config_free(c);
	snprintf(y, sizeof(y), "%slog: {format: xml}\n", base);
	assert_int_equal(config_parse("/e/s.yaml", y, strlen(y), &c, &el),
	    SL_ERR_INVALID);
	assert_non_null(strstr(el.msgs[el.n - 1], "/e/s.yaml:4:"));
	assert_non_null(strstr(el.msgs[el.n - 1], "'log.format': 'xml'"));
	errlist_free(&el);
}

/* budgets: per credential, over all sandboxes (conf/budget.h parses). */
static void
test_budgets(void **state)
{
	static const char base[] = "listen: {proxy: [\"127.0.0.1:3128\"]}\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n";
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	const struct budget_rule *b;
	char y[512];

	(void)state;
	snprintf(y, sizeof(y), "%sbudgets:\n  - {secret: aws, "
	    "requests_per_day: 100000}\n", base);
	assert_int_equal(config_parse("/e/s.yaml", y, strlen(y), &c, &el), 0);
	assert_non_null(b = budget_find(&c->budgets, "aws"));
	assert_int_equal(b->per_day, 100000);
	assert_int_equal(b->per_minute, 0);
	config_free(c);
	c = NULL;
	snprintf(y, sizeof(y), "%sbudgets: [{secret: aws}]\n", base);
	assert_int_equal(config_parse("/e/s.yaml", y, strlen(y), &c, &el),
	    SL_ERR_INVALID);
	assert_non_null(strstr(el.msgs[el.n - 1], "/e/s.yaml:4:"));
	assert_non_null(strstr(el.msgs[el.n - 1], "needs 'requests_per_minute'"));
	errlist_free(&el);
}

static void
test_defaults(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;

	(void)state;
	if (config_load(FIXTURE("minimal.yaml"), &c, &el) != 0)
		dump(&el);
	assert_non_null(c);
	assert_int_equal(c->ntransparent, 0);
	assert_null(c->transparent);
	assert_int_equal(c->nproxy, 1);
	assert_int_equal(c->ndns, 0);
	assert_null(c->metrics);
	assert_string_equal(c->control, "/run/sluice/control.sock");
	assert_string_equal(c->state_dir, "/var/lib/sluice/state");
	assert_int_equal(c->nresolvers, 1);
	expect_ep(&c->resolvers[0], "127.0.0.53", 53);	/* bare: port 53 */
	assert_null(c->secret_dir);
	assert_int_equal(c->ngateway_keys, 0);
	assert_null(c->gateway_keys);
	assert_null(c->signing_key);
	assert_null(c->issuer);
	assert_string_equal(c->upstream_ca,
	    "/etc/ssl/certs/ca-certificates.crt");
	assert_null(c->audit_path);
	assert_int_equal(c->audit_fsync, AUDIT_FSYNC_BATCH);
	assert_int_equal(c->workers, 0);
	assert_null(c->user);
	assert_int_equal(c->limits.connections, 1024);
	assert_int_equal(c->limits.dns_qps, 200);
	assert_int_equal(c->limits.header_bytes, 65536);
	assert_int_equal(c->limits.client_hello_bytes, 16384);
	assert_int_equal(c->timeouts.handshake, 10000);
	assert_int_equal(c->timeouts.idle, 300000);
	assert_int_equal(c->timeouts.connect, 10000);
	assert_int_equal(c->timeouts.first_byte, 1000);
	assert_int_equal(c->timeouts.drain, 10000);
	assert_int_equal(c->nsandboxes, 0);
	assert_null(c->sandboxes);
	config_free(c);
	errlist_free(&el);
}

static void
test_scalar_forms(void **state)
{
	struct config *c;

	(void)state;
	c = parse_ok(BASE "gateway_key: /k\nworkers: auto\n"
	    "timeouts: {idle: 90, handshake: \"2m\"}\n"
	    "limits: {connections: \"1000000\", header_bytes: 1024,\n"
	    "  client_hello_bytes: 65536, dns_qps: 1000000}\n"
	    "audit: {fsync: never}\n");
	assert_int_equal(c->ngateway_keys, 1);
	assert_string_equal(c->gateway_keys[0], "/k");
	assert_int_equal(c->workers, 0);
	assert_int_equal(c->timeouts.idle, 90000);
	assert_int_equal(c->timeouts.handshake, 120000);
	assert_int_equal(c->limits.connections, 1000000);
	assert_int_equal(c->limits.header_bytes, 1024);
	assert_int_equal(c->limits.client_hello_bytes, 65536);
	assert_int_equal(c->limits.dns_qps, 1000000);
	assert_int_equal(c->audit_fsync, AUDIT_FSYNC_NEVER);
	assert_null(c->audit_path);
	config_free(c);

	c = parse_ok(BASE "workers: 256\ntimeouts: {drain: 24h}\n");
	assert_int_equal(c->workers, 256);
	assert_int_equal(c->timeouts.drain, 86400000);
	config_free(c);
}

static void
test_durations(void **state)
{
	unsigned ms = 7;

	(void)state;
	assert_int_equal(config_parse_duration("10s", &ms), 0);
	assert_int_equal(ms, 10000);
	assert_int_equal(config_parse_duration("500ms", &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(config_parse_duration("5m", &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(config_parse_duration("1h", &ms), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(config_parse_duration("3", &ms), 0);
	assert_int_equal(ms, 3000);
	assert_int_equal(config_parse_duration("86400", &ms), 0);
	assert_int_equal(ms, 86400000);
	ms = 7;
	assert_int_equal(config_parse_duration("0", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("0ms", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("s", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("-1s", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("1.5s", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("10 s", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("10d", &ms), SL_ERR_INVALID);
	assert_int_equal(config_parse_duration("25h", &ms), SL_ERR_TOO_BIG);
	assert_int_equal(config_parse_duration("86401", &ms), SL_ERR_TOO_BIG);
	assert_int_equal(config_parse_duration("99999999999999999999s", &ms),
	    SL_ERR_INVALID);
	assert_int_equal(ms, 7);	/* untouched on failure */
}

/* ------------------------------------------------------------------ */
/* errors, each with its place                                         */

static void
test_unknown_keys(void **state)
{
	(void)state;
	expect_error("foo: 1\n" BASE, "t.yaml:1:1: unknown key 'foo'");
	expect_error("listen:\n  transparent: [\"0.0.0.0:1\"]\n  foo: 1\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:3:3: unknown key 'foo' in listen");
	expect_error(BASE "limits:\n  conns: 5\n",
	    "t.yaml:6:3: unknown key 'conns' in limits");
	expect_error(BASE "timeouts: {idle: 5s, read: 5s}\n",
	    "t.yaml:5:22: unknown key 'read' in timeouts");
	expect_error(BASE "audit: {path: /a, sync: always}\n",
	    "t.yaml:5:19: unknown key 'sync' in audit");
	expect_error(BASE "sandboxes:\n  - {id: a, sources: [10.0.0.1], "
	    "policy: p, owner: x}\n",
	    "t.yaml:6:45: unknown key 'owner' in sandboxes");
}

static void
test_wrong_types(void **state)
{
	(void)state;
	expect_error("listen: 5\nresolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:1:9: 'listen' must be a map");
	expect_error("listen:\n  transparent: \"0.0.0.0:1\"\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:2:16: 'listen.transparent' must be a list");
	expect_error(BASE "workers: [1]\n",
	    "t.yaml:5:10: 'workers' must be a single value, not a list");
	expect_error(BASE "user: {name: x}\n",
	    "t.yaml:5:7: 'user' must be a single value, not a map");
	expect_error(BASE "secret_dir:\n",
	    "t.yaml:5:12: 'secret_dir' needs a value");
	expect_error(BASE "limits: 5\n", "t.yaml:5:9: 'limits' must be a map");
	expect_error(BASE "sandboxes: {id: x}\n",
	    "t.yaml:5:12: 'sandboxes' must be a list");
	expect_error(BASE "sandboxes: [x]\n",
	    "t.yaml:5:13: 'sandboxes' items must be maps");
	expect_error(BASE "gateway_key: []\n",
	    "t.yaml:5:14: 'gateway_key' must be a path or a non-empty list");
	expect_error(BASE "user: \"a\\0b\"\n",
	    "t.yaml:5:7: 'user' contains a NUL byte");
}

static void
test_bad_endpoints(void **state)
{
	(void)state;
	expect_error("listen:\n  transparent: [\"0.0.0.0\"]\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:2:17: 'listen.transparent': bad endpoint '0.0.0.0'");
	expect_error("listen:\n  transparent: [\"::1:80\"]\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:2:17: 'listen.transparent': bad endpoint '::1:80'");
	expect_error("listen:\n  transparent: [\"1.2.3.4:0\"]\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "bad endpoint '1.2.3.4:0'");
	expect_error("listen:\n  transparent: [\"1.2.3.4:65536\"]\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "bad endpoint '1.2.3.4:65536'");
	expect_error("listen:\n  proxy: [\"localhost:3128\"]\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:2:11: 'listen.proxy': bad endpoint 'localhost:3128'");
	expect_error(BASE "resolvers2: 1\n", "unknown key 'resolvers2'");
	expect_error("listen:\n  transparent: [\"0.0.0.0:1\"]\n"
	    "resolvers: [\"dns.google\"]\npolicy_dir: /p\n",
	    "t.yaml:3:13: 'resolvers': bad endpoint 'dns.google'");
	expect_error("listen:\n  transparent: [\"0.0.0.0:1\"]\n"
	    "  metrics: \"9464\"\nresolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:3:12: 'listen.metrics': bad endpoint '9464'");
	expect_error("listen:\n  transparent: [\"0.0.0.0:1\"]\n"
	    "  proxy: [\"0.0.0.0:1\"]\nresolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:2:3: listen: endpoint 0.0.0.0:1 is used twice");
	expect_error("listen:\n  transparent: [\"0.0.0.0:1\"]\n  control: "
	    "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
	    "resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:3:12: 'listen.control': path longer than 107 bytes");
}

static void
test_bad_durations(void **state)
{
	(void)state;
	expect_error(BASE "timeouts:\n  idle: 10x\n",
	    "t.yaml:6:9: 'timeouts.idle': invalid duration '10x'");
	expect_error(BASE "timeouts:\n  handshake: 0\n",
	    "t.yaml:6:14: 'timeouts.handshake': invalid duration '0'");
	expect_error(BASE "timeouts:\n  connect: 0s\n",
	    "'timeouts.connect': invalid duration '0s'");
	expect_error(BASE "timeouts:\n  drain: 25h\n",
	    "t.yaml:6:10: 'timeouts.drain': duration '25h' is over 24h");
	expect_error(BASE "timeouts:\n  first_byte: -1s\n",
	    "'timeouts.first_byte': invalid duration '-1s'");
}

static void
test_bad_numbers(void **state)
{
	(void)state;
	expect_error(BASE "limits: {header_bytes: 100}\n",
	    "t.yaml:5:24: 'limits.header_bytes': 100 is out of range "
	    "1024..1048576");
	expect_error(BASE "limits: {client_hello_bytes: 70000}\n",
	    "'limits.client_hello_bytes': 70000 is out of range 512..65536");
	expect_error(BASE "limits: {connections: 1000001}\n",
	    "'limits.connections': 1000001 is out of range 1..1000000");
	expect_error(BASE "limits: {dns_qps: 0}\n",
	    "'limits.dns_qps': 0 is out of range 1..1000000");
	expect_error(BASE "limits: {connections: many}\n",
	    "'limits.connections': 'many' is not a positive integer");
	expect_error(BASE "limits: {connections: -5}\n",
	    "'limits.connections': '-5' is not a positive integer");
	expect_error(BASE "workers: 0\n",
	    "t.yaml:5:10: 'workers': '0' is neither auto nor a number 1..256");
	expect_error(BASE "workers: 257\n", "'workers': '257' is neither");
	expect_error(BASE "audit: {fsync: sometimes}\n",
	    "t.yaml:5:16: 'audit.fsync': 'sometimes' is not one of always, "
	    "batch, never");
	expect_error(BASE "issuer: http://x\n",
	    "t.yaml:5:9: 'issuer' must be an https:// URL");
}

static void
test_missing_required(void **state)
{
	(void)state;
	expect_error("", "t.yaml:1:1: missing required key 'listen'");
	expect_error("", "t.yaml:1:1: missing required key 'resolvers'");
	expect_error("", "t.yaml:1:1: missing required key 'policy_dir'");
	expect_error("# just a comment\n",
	    "t.yaml:1:1: missing required key 'policy_dir'");
	expect_error("resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n"
	    "listen:\n  dns: [\"0.0.0.0:53\"]\n",
	    "t.yaml:4:3: missing required key 'listen.transparent' or "
	    "'listen.proxy'");
	expect_error("resolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n"
	    "listen: {transparent: []}\n",
	    "t.yaml:3:9: missing required key 'listen.transparent' or "
	    "'listen.proxy'");
	expect_error("\n\nlisten:\n  proxy: [\"127.0.0.1:1\"]\n"
	    "resolvers: []\npolicy_dir: /p\n",
	    "t.yaml:3:1: missing required key 'resolvers'");
	expect_error("listen:\n  proxy: [\"127.0.0.1:1\"]\n"
	    "resolvers: [\"1.1.1.1\"]\n",
	    "t.yaml:1:1: missing required key 'policy_dir'");
	expect_error("- a\n- b\n",
	    "t.yaml:1:1: the configuration must be a map of keys");
}

static void
test_yaml_refusals(void **state)
{
	(void)state;
	expect_error(BASE "policy_dir: /q\n",
	    "t.yaml:5:1: duplicate key 'policy_dir' (first at line 4)");
	expect_error("x: &a [\"0.0.0.0:1\"]\n" BASE,
	    "t.yaml:1:4: anchors are not allowed (&a)");
	expect_error("listen:\n  transparent: &t [\"0.0.0.0:1\"]\n"
	    "  proxy: *t\nresolvers: [\"1.1.1.1\"]\npolicy_dir: /p\n",
	    "t.yaml:3:10: aliases are not allowed");
	expect_error(BASE "user: !!str root\n",
	    "t.yaml:5:7: tags are not allowed (tag:yaml.org,2002:str)");
	expect_error(BASE "user: !custom root\n", "tags are not allowed");
	expect_error(BASE "---\nuser: x\n",
	    "t.yaml:5:1: multiple documents are not allowed");
	expect_error(BASE "? [a]\n: b\n",
	    "t.yaml:5:3: mapping keys must be scalars");
	expect_error(BASE "user: [unclosed\n", "t.yaml:6:1: ");
}

static void
test_sandbox_errors(void **state)
{
	(void)state;
	expect_error(BASE "sandboxes:\n  - {id: \"-bad\", sources: [10.0.0.1], "
	    "policy: p}\n",
	    "t.yaml:6:10: 'sandboxes.id': '-bad' is not a valid id");
	expect_error(BASE "sandboxes:\n  - {id: \"a b\", sources: [10.0.0.1], "
	    "policy: p}\n", "'sandboxes.id': 'a b' is not a valid id");
	expect_error(BASE "sandboxes:\n  - {id: "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, "
	    "sources: [10.0.0.1], policy: p}\n", "is not a valid id");
	expect_error(BASE "sandboxes:\n  - {sources: [10.0.0.1], policy: p}\n",
	    "t.yaml:6:5: sandbox needs an 'id'");
	expect_error(BASE "sandboxes:\n  - {id: a, policy: p}\n",
	    "t.yaml:6:5: sandbox needs 'sources'");
	expect_error(BASE "sandboxes:\n  - {id: a, sources: [10.0.0.1]}\n",
	    "t.yaml:6:5: sandbox needs a 'policy'");
	expect_error(BASE "sandboxes:\n  - {id: a, sources: [], policy: p}\n",
	    "t.yaml:6:22: 'sandboxes.sources' is empty");
	expect_error(BASE "sandboxes:\n  - {id: a, sources: [10.0.0.1/8], "
	    "policy: p}\n",
	    "t.yaml:6:23: 'sandboxes.sources': bad address or prefix "
	    "'10.0.0.1/8'");
	expect_error(BASE "sandboxes:\n"
	    "  - {id: a, sources: [10.0.0.1], policy: p}\n"
	    "  - {id: a, sources: [10.0.0.2], policy: p}\n",
	    "t.yaml:7:5: duplicate sandbox id 'a' (first at line 6)");
	expect_error(BASE "sandboxes:\n"
	    "  - {id: a, sources: [10.0.0.1], policy: p}\n"
	    "  - {id: b, sources: [\"::ffff:10.0.0.1\"], policy: p}\n",
	    "t.yaml:7:5: source 10.0.0.1/32 is listed twice (also at line 6)");
	expect_error(BASE "sandboxes:\n"
	    "  - {id: a, sources: [\"fd00::/64\", \"fd00:0::/64\"], policy: p}\n",
	    "t.yaml:6:5: source fd00::/64 is listed twice (also at line 6)");
}

static void
test_every_error_reported(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;

	(void)state;
	assert_int_equal(config_load(FIXTURE("many-errors.yaml"), &c, &el),
	    SL_ERR_INVALID);
	assert_null(c);
	assert_true(has_msg(&el, "many-errors.yaml:2:17: 'listen.transparent': "
	    "bad endpoint"));
	assert_true(has_msg(&el, "many-errors.yaml:3:3: unknown key 'bogus' "
	    "in listen"));
	assert_true(has_msg(&el, "many-errors.yaml:4:13: 'resolvers': bad "
	    "endpoint"));
	assert_true(has_msg(&el, "many-errors.yaml:5:13: 'policy_dir' must be"));
	assert_true(has_msg(&el, "many-errors.yaml:6:10: 'workers'"));
	assert_true(has_msg(&el, "many-errors.yaml:7:18: 'timeouts.idle'"));
	assert_int_equal(el.n, 6);
	errlist_free(&el);
}

static void
test_load_errors(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct config *c = NULL;
	char path[] = "/tmp/test_config.XXXXXX";
	char *big;
	FILE *f;
	int fd;

	(void)state;
	assert_int_equal(config_load("/nonexistent/sluiced.yaml", &c, &el),
	    SL_ERR_IO);
	assert_null(c);
	assert_true(has_msg(&el, "/nonexistent/sluiced.yaml: No such file or "
	    "directory"));
	errlist_free(&el);

	/* One byte over 1 MiB: refused before parsing. */
	assert_true((fd = mkstemp(path)) != -1);
	assert_non_null(f = fdopen(fd, "w"));
	assert_non_null(big = malloc(CONFIG_MAX_BYTES + 1));
	memset(big, '#', CONFIG_MAX_BYTES + 1);
	assert_int_equal(fwrite(big, 1, CONFIG_MAX_BYTES + 1, f),
	    CONFIG_MAX_BYTES + 1);
	fclose(f);
	assert_int_equal(config_load(path, &c, &el), SL_ERR_TOO_BIG);
	assert_true(has_msg(&el, "larger than 1048576 bytes"));
	errlist_free(&el);
	assert_int_equal(config_parse("big", big, CONFIG_MAX_BYTES + 1, &c,
	    &el), SL_ERR_TOO_BIG);
	assert_null(c);
	errlist_free(&el);
	unlink(path);
	free(big);

	/* A directory is reported as the read error it gives. */
	assert_int_equal(config_load("/", &c, &el), SL_ERR_IO);
	assert_true(has_msg(&el, "/: Is a directory"));
	errlist_free(&el);
}

/* ------------------------------------------------------------------ */
/* yamltree                                                            */

static void
test_yaml_tree(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct ydoc *d = NULL;
	const struct ynode *r, *n;
	const char *y = "a: 1\nb:\n  - x\n  - 'q'\nc: {d: ~}\n";

	(void)state;
	assert_int_equal(ydoc_parse("y", y, strlen(y), &d, &el), 0);
	r = d->root;
	assert_int_equal(r->kind, YNODE_MAP);
	assert_int_equal(r->n, 3);
	assert_int_equal(r->line, 1);
	assert_int_equal(r->col, 1);
	assert_string_equal(r->keys[1], "b");
	assert_int_equal(r->key_lines[1], 2);
	assert_int_equal(r->key_cols[1], 1);
	n = ynode_get(r, "b");
	assert_int_equal(n->kind, YNODE_SEQ);
	assert_int_equal(n->n, 2);
	assert_int_equal(n->items[1]->line, 4);
	assert_int_equal(n->items[1]->col, 5);
	assert_string_equal(n->items[1]->scalar, "q");
	assert_true(n->items[1]->quoted);
	assert_false(n->items[0]->quoted);
	assert_false(ynode_is_null(n->items[0]));
	assert_true(ynode_is_null(ynode_get(ynode_get(r, "c"), "d")));
	assert_null(ynode_get(r, "zz"));
	assert_null(ynode_get(n, "x"));
	ydoc_free(d);
	d = NULL;

	/* An empty document has no root. */
	assert_int_equal(ydoc_parse("y", "", 0, &d, &el), 0);
	assert_null(d->root);
	ydoc_free(d);
	d = NULL;
	ydoc_free(NULL);
	assert_int_equal(el.n, 0);
}

static char *
nested(unsigned depth)
{
	char *s = malloc(2 * depth + 1);
	unsigned i;

	for (i = 0; i < depth; i++) {
		s[i] = '[';
		s[depth + i] = ']';
	}
	s[2 * depth] = '\0';
	return s;
}

static void
test_yaml_limits(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct ydoc *d = NULL;
	char *s;
	size_t i, n = 100000;

	(void)state;
	s = nested(32);
	assert_int_equal(ydoc_parse("y", s, strlen(s), &d, &el), 0);
	ydoc_free(d);
	d = NULL;
	free(s);
	s = nested(33);
	assert_int_equal(ydoc_parse("y", s, strlen(s), &d, &el), SL_ERR_INVALID);
	assert_null(d);
	assert_true(has_msg(&el, "y:1:33: nesting deeper than 32 levels"));
	errlist_free(&el);
	free(s);

	/* A list of n - 1 scalars is n nodes; one more is refused. */
	s = malloc(2 * n + 3);
	s[0] = '[';
	for (i = 0; i < n; i++) {
		s[1 + 2 * i] = 'a';
		s[2 + 2 * i] = ',';
	}
	s[2 * (n - 1)] = ']';
	s[2 * (n - 1) + 1] = '\0';
	assert_int_equal(ydoc_parse("y", s, strlen(s), &d, &el), 0);
	assert_int_equal(d->root->n, n - 1);
	ydoc_free(d);
	d = NULL;
	s[2 * (n - 1)] = ',';
	s[2 * n - 1] = 'a';
	s[2 * n] = ']';
	s[2 * n + 1] = '\0';
	assert_int_equal(ydoc_parse("y", s, strlen(s), &d, &el), SL_ERR_INVALID);
	assert_true(has_msg(&el, "more than 100000 nodes"));
	errlist_free(&el);
	assert_int_equal(ydoc_parse_limit("y", s, strlen(s), 200000, &d, &el),
	    0);
	ydoc_free(d);
	free(s);
}

static void
test_yaml_errors_collected(void **state)
{
	struct errlist el = ERRLIST_INIT;
	struct ydoc *d = NULL;
	const char *y = "a: &x 1\nb: *x\nc: !t 2\na: 3\n";
	const char *nul = "a: 1\n\0b: 2\n";

	(void)state;
	assert_int_equal(ydoc_parse("y", y, strlen(y), &d, &el), SL_ERR_INVALID);
	assert_null(d);
	assert_true(has_msg(&el, "y:1:4: anchors are not allowed (&x)"));
	assert_true(has_msg(&el, "y:2:4: aliases are not allowed"));
	assert_true(has_msg(&el, "y:3:4: tags are not allowed (!t)"));
	assert_true(has_msg(&el, "y:4:1: duplicate key 'a' (first at line 1)"));
	assert_int_equal(el.n, 4);
	errlist_free(&el);

	assert_int_equal(ydoc_parse("y", nul, 11, &d, &el), SL_ERR_INVALID);
	assert_true(el.n >= 1);
	assert_true(has_msg(&el, "y:2:1: control characters are not allowed "
	    "(byte 0x00)"));
	errlist_free(&el);

	/* NULL errs: still refused, nothing to report to. */
	assert_int_equal(ydoc_parse("y", y, strlen(y), &d, NULL),
	    SL_ERR_INVALID);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_budgets),
		cmocka_unit_test(test_relative_paths),
		cmocka_unit_test(test_log_format),
		cmocka_unit_test(test_scalar_forms),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_bad_endpoints),
		cmocka_unit_test(test_bad_durations),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_missing_required),
		cmocka_unit_test(test_yaml_refusals),
		cmocka_unit_test(test_sandbox_errors),
		cmocka_unit_test(test_every_error_reported),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_yaml_tree),
		cmocka_unit_test(test_yaml_limits),
		cmocka_unit_test(test_yaml_errors_collected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
