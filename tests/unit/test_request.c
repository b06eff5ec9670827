/* test_request.c: request targets normalised, and requests matched to rules. */
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

#include "util/err.h"
#include "parse/httphead.h"
#include "parse/httppath.h"
#include "conf/policy.h"

#define OUTSZ	(HTTP_MAX_TARGET + 1)

/* ------------------------------------------------------------------ */
/* normalisation                                                       */

/* target[0..len) normalises to path, with query (NULL: no '?'). */
static void
norm_len(const char *target, size_t len, const char *path, const char *query)
{
	char out[OUTSZ];
	const char *q = NULL, *why = NULL;
	size_t plen = 0, qlen = 0;
	int r;

	r = http_path_normalize(target, len, out, sizeof(out), &plen, &q, &qlen,
	    &why);
	if (r != 0)
		print_message("'%s': refused: %s\n", target, why);
	assert_int_equal(r, 0);
	if (strcmp(out, path) != 0)
		print_message("'%s': got '%s', want '%s'\n", target, out, path);
	assert_string_equal(out, path);
	assert_int_equal(plen, strlen(path));
	if (query == NULL) {
		assert_null(q);
		assert_int_equal(qlen, 0);
	} else {
		assert_non_null(q);
		assert_int_equal(qlen, strlen(query));
		assert_memory_equal(q, query, qlen);
		assert_ptr_equal(q, (const char *)memchr(target, '?', len) + 1);
	}
}

static void
norm(const char *target, const char *path, const char *query)
{
	char again[OUTSZ];
	const char *q, *why;
	size_t plen, qlen;

	norm_len(target, strlen(target), path, query);
	/* Normal forms are fixed points. */
	assert_int_equal(http_path_normalize(path, strlen(path), again,
	    sizeof(again), &plen, &q, &qlen, &why), 0);
	assert_string_equal(again, path);
}

/* target[0..len) is refused, saying why; out-parameters untouched. */
static void
refuse_len(const char *target, size_t len, const char *want)
{
	char out[OUTSZ];
	const char *q = (const char *)1, *why = NULL;
	size_t plen = 7, qlen = 9;
	int r;

	r = http_path_normalize(target, len, out, sizeof(out), &plen, &q, &qlen,
	    &why);
	if (r != SL_ERR_INVALID || why == NULL || strcmp(why, want) != 0)
		print_message("'%s': r %d, why '%s', want '%s'\n", target, r,
		    why != NULL ? why : "(null)", want);
	assert_int_equal(r, SL_ERR_INVALID);
	assert_non_null(why);
	assert_string_equal(why, want);
	assert_ptr_equal(q, (const char *)1);
	assert_int_equal(plen, 7);
	assert_int_equal(qlen, 9);
}

static void
refuse(const char *target, const char *want)
{
	refuse_len(target, strlen(target), want);
}

static void
test_split_and_keep(void **state)
{
	(void)state;
	norm("/", "/", NULL);
	norm("/a/b?x=1", "/a/b", "x=1");
	norm("/a?", "/a", "");
	norm("/?a=b?c", "/", "a=b?c");
	norm("/a/b/", "/a/b/", NULL);		/* trailing slash kept */
	norm("/A/b", "/A/b", NULL);		/* case kept */
	/* The query is checked, never rewritten. */
	norm("/a?x=%2f%2F+b&y&%41=\\", "/a", "x=%2f%2F+b&y&%41=\\");
	/* Reserved and other printable bytes stay as they are. */
	norm("/a!$&'()*+,;=:@b", "/a!$&'()*+,;=:@b", NULL);
	norm("/x\"<>[]^`{|}", "/x\"<>[]^`{|}", NULL);
	norm("/.../.a/a./a..b", "/.../.a/a./a..b", NULL);
	/* target need not be NUL-terminated. */
	norm_len("/a/b?qXXX", 6, "/a/b", "q");
	norm_len("/a/bXXX", 4, "/a/b", NULL);
}

static void
test_escapes(void **state)
{
	(void)state;
	norm("/%61%62%2D%2e%5F%7e%7E", "/ab-._~~", NULL);
	norm("/%41%5A%30%39", "/AZ09", NULL);
	norm("/a%2a%3b%c3%a9", "/a%2A%3B%C3%A9", NULL);
	norm("/%25%20%3F%23", "/%25%20%3F%23", NULL);
	norm("/%2541", "/%2541", NULL);		/* decoded once only */
}

static void
test_dot_segments(void **state)
{
	(void)state;
	norm("/a/./b/../c", "/a/c", NULL);
	norm("/a/b/..", "/a/", NULL);
	norm("/a/b/../", "/a/", NULL);
	norm("/a/.", "/a/", NULL);
	norm("/.", "/", NULL);
	norm("/./", "/", NULL);
	norm("/a/..", "/", NULL);
	norm("/a/b/c/../../d", "/a/d", NULL);
	norm("/a/%2e/b/%2E%2e/c", "/a/c", NULL);
	norm("/a/b/.%2e?x=..", "/a/", "x=..");
	norm("/a/b/%2e.", "/a/", NULL);
	norm("/a/..?q", "/", "q");
}

static void
test_empty_segments(void **state)
{
	(void)state;
	norm("//", "/", NULL);
	norm("//a//b//", "/a/b/", NULL);
	norm("/a///b", "/a/b", NULL);
	/* "//" is one '/', so ".." drops "a", not an empty segment. */
	norm("/a//../b", "/b", NULL);
	norm("/a/b//..", "/a/", NULL);
}

static void
test_refusals(void **state)
{
	(void)state;
	refuse("", "target is not origin-form");
	refuse("a/b", "target is not origin-form");
	refuse("http://a.example/", "target is not origin-form");
	refuse("*", "asterisk-form target");
	refuse("/a%2Fb", "encoded slash in path");
	refuse("/a%2fb", "encoded slash in path");
	refuse("/a\\b", "backslash in path");
	refuse("/a%5cb", "encoded backslash in path");
	refuse("/a%5Cb", "encoded backslash in path");
	refuse("/a%00b", "encoded NUL in target");
	refuse_len("/a\0b", 4, "NUL in target");
	refuse_len("/a?b\0", 5, "NUL in target");
	refuse("/a?x=%00", "encoded NUL in target");
	refuse("/..", "dot segment above the root");
	refuse("/../a", "dot segment above the root");
	refuse("/a/../..", "dot segment above the root");
	refuse("/a/../../b", "dot segment above the root");
	refuse("/%2e%2e/a", "dot segment above the root");
	refuse("/a/./../..", "dot segment above the root");
	refuse("/..;/admin", "dot segment with parameters");
	refuse("/a/.;x/b", "dot segment with parameters");
	refuse("/a/..%3b/b", "dot segment with parameters");
	refuse("/a/%2e%2e;/b", "dot segment with parameters");
	refuse("/a%zz", "malformed percent-escape");
	refuse("/a%", "malformed percent-escape");
	refuse("/a%4", "malformed percent-escape");
	refuse("/a%4?", "malformed percent-escape");
	refuse("/a?x=100%", "malformed percent-escape");
	refuse("/a?x=%g1", "malformed percent-escape");
	refuse("/a#f", "fragment in target");
	refuse("/a?x#f", "fragment in target");
	refuse("/a b", "control or non-ASCII byte in target");
	refuse("/a\x01", "control or non-ASCII byte in target");
	refuse("/a\x7f", "control or non-ASCII byte in target");
	refuse("/a\xc3\xa9", "control or non-ASCII byte in target");
	refuse("/a?\t", "control or non-ASCII byte in target");
}

static void
test_out_size(void **state)
{
	char out[8];
	const char *q, *why = NULL;
	size_t plen = 0, qlen;

	(void)state;
	/* "/abcdef" and its NUL fill out exactly. */
	assert_int_equal(http_path_normalize("/abcdef?q", 9, out, 8, &plen, &q,
	    &qlen, &why), 0);
	assert_string_equal(out, "/abcdef");
	assert_int_equal(plen, 7);
	assert_int_equal(http_path_normalize("/abcdefg", 8, out, 8, &plen, &q,
	    &qlen, &why), SL_ERR_INVALID);
	assert_string_equal(why, "path too long");
	assert_int_equal(http_path_normalize("/abcdef/", 8, out, 8, &plen, &q,
	    &qlen, &why), SL_ERR_INVALID);
	assert_int_equal(http_path_normalize("/a%20bc", 7, out, 8, &plen, &q,
	    &qlen, &why), 0);
	assert_int_equal(http_path_normalize("/a%20bcd", 8, out, 8, &plen, &q,
	    &qlen, &why), SL_ERR_INVALID);
	assert_int_equal(http_path_normalize("/a", 2, out, 1, &plen, &q,
	    &qlen, &why), SL_ERR_INVALID);
	/* Decoding shrinks: fits although the target does not. */
	assert_int_equal(http_path_normalize("/%61%62%63", 10, out, 8, &plen,
	    &q, &qlen, &why), 0);
	assert_string_equal(out, "/abc");
	/* why may be NULL. */
	assert_int_equal(http_path_normalize("/%2f", 4, out, 8, &plen, &q,
	    &qlen, NULL), SL_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* globs                                                               */

static int
vm(const char *glob, const char *s)
{
	return policy_value_match(glob, s, strlen(s));
}

static int
pm(const char *glob, const char *path)
{
	return policy_path_match(glob, path, strlen(path));
}

static void
test_value_globs(void **state)
{
	(void)state;
	assert_true(vm("", ""));
	assert_false(vm("", "a"));
	assert_true(vm("*", ""));
	assert_true(vm("*", "anything at all"));
	assert_true(vm("**", "abc"));
	assert_true(vm("abc", "abc"));
	assert_false(vm("abc", "abcd"));
	assert_false(vm("abc", "ab"));
	assert_false(vm("abc", "ABC"));		/* case counts */
	assert_true(vm("a*", "a"));
	assert_true(vm("a*", "abc"));
	assert_false(vm("a*", "ba"));
	assert_true(vm("*a", "ba"));
	assert_false(vm("*a", "ab"));
	assert_true(vm("a*b*c", "axxbyyc"));
	assert_true(vm("a*b*c", "abc"));
	assert_false(vm("a*b*c", "axxbyy"));
	assert_false(vm("a*a", "a"));
	assert_true(vm("a*a", "aa"));
	assert_true(vm("*ab", "aab"));		/* needs the backtrack */
	assert_true(vm("*aab", "aaaab"));
	assert_true(vm("application/*+json", "application/vnd.github+json"));
	assert_false(vm("application/*+json", "application/json"));
	/* Bytes, NUL included; '*' takes it, nothing else does. */
	assert_true(policy_value_match("a*", "a\0b", 3));
	assert_false(policy_value_match("ab", "a\0b", 3));
	assert_false(policy_value_match("a", "a\0", 2));
}

static void
test_path_globs(void **state)
{
	(void)state;
	assert_true(pm("/", "/"));
	assert_false(pm("/", "/a"));
	assert_true(pm("/a", "/a"));
	assert_false(pm("/a", "/a/"));		/* trailing slash counts */
	assert_false(pm("/a/", "/a"));
	assert_true(pm("/a/", "/a/"));
	assert_false(pm("/a", "/A"));
	assert_false(pm("/a", "/ab"));
	assert_false(pm("/ab", "/a"));
	/* "*": exactly one non-empty segment. */
	assert_false(pm("/*", "/"));
	assert_true(pm("/*", "/a"));
	assert_false(pm("/*", "/a/"));
	assert_false(pm("/*", "/a/b"));
	assert_true(pm("/v1/*/items", "/v1/x/items"));
	assert_false(pm("/v1/*/items", "/v1//items"));
	assert_false(pm("/v1/*/items", "/v1/items"));
	assert_false(pm("/v1/*/items", "/v1/x/y/items"));
	assert_true(pm("/*/*", "/a/b"));
	assert_false(pm("/*/*", "/a/"));
	/* "**": any number of segments, none included. */
	assert_true(pm("/**", "/"));
	assert_true(pm("/**", "/a/b/c/"));
	assert_true(pm("/repos/acme/**", "/repos/acme"));
	assert_true(pm("/repos/acme/**", "/repos/acme/"));
	assert_true(pm("/repos/acme/**", "/repos/acme/x"));
	assert_true(pm("/repos/acme/**", "/repos/acme/x/y/"));
	assert_false(pm("/repos/acme/**", "/repos/acmex"));
	assert_false(pm("/repos/acme/**", "/repos/acmex/y"));
	assert_false(pm("/repos/acme/**", "/repos"));
	assert_false(pm("/repos/acme/**", "/"));
	assert_true(pm("/a/**/b", "/a/b"));
	assert_true(pm("/a/**/b", "/a/x/y/b"));
	assert_false(pm("/a/**/b", "/a/x/y/bc"));
	assert_false(pm("/a/**/b", "/a/x/y/b/"));
	assert_true(pm("/a/**/b/**/c", "/a/b/c"));
	assert_true(pm("/a/**/b/**/c", "/a/b/b/x/c"));
	assert_false(pm("/a/**/b/**/c", "/a/c/b"));
	assert_true(pm("/**/x", "/a/b/x"));
	assert_true(pm("/**/x", "/x"));
	assert_false(pm("/**/x", "/x/"));
	assert_true(pm("/a/*/**", "/a/x"));
	assert_true(pm("/a/*/**", "/a/x/y"));
	assert_false(pm("/a/*/**", "/a"));
	assert_false(pm("/a/*/**", "/a/"));
	assert_true(pm("/**/**", "/a"));
	/* '*' within a segment: any run of bytes there, none included. */
	assert_true(pm("/reflect-*", "/reflect-"));
	assert_true(pm("/reflect-*", "/reflect-abc"));
	assert_false(pm("/reflect-*", "/reflect"));
	assert_false(pm("/reflect-*", "/reflect-a/b"));	/* never past '/' */
	assert_false(pm("/reflect-*", "/reflect-a/"));
	assert_true(pm("/v1/files/*.json", "/v1/files/a.json"));
	assert_true(pm("/v1/files/*.json", "/v1/files/.json"));
	assert_true(pm("/v1/files/*.json", "/v1/files/a.b.json"));
	assert_false(pm("/v1/files/*.json", "/v1/files/a.json/x"));
	assert_false(pm("/v1/files/*.json", "/v1/files/d/a.json"));
	assert_false(pm("/v1/files/*.json", "/v1/files/a.jsonx"));
	assert_true(pm("/v1/**/*.json", "/v1/a/b/c.json"));
	assert_true(pm("/v1/**/*.json", "/v1/c.json"));
	assert_false(pm("/v1/**/*.json", "/v1/a/b/c.yaml"));
	assert_true(pm("/*a*", "/a"));
	assert_true(pm("/*a*", "/xxaxx"));
	assert_false(pm("/*a*", "/xxbxx"));
	assert_true(pm("/a*b*c", "/abc"));
	assert_true(pm("/a*b*c", "/axxbyyc"));
	assert_false(pm("/a*b*c", "/axxbyy"));
	assert_true(pm("/*ab", "/aab"));		/* needs the backtrack */
	assert_true(pm("/x*/y", "/x/y"));
	assert_false(pm("/x*/y", "/y/y"));
	/* decoded on both sides; "%2A" is a literal '*' */
	assert_true(pm("/a%21*", "/a!b"));
	assert_true(pm("/a!*", "/a%21%21"));
	assert_true(pm("/a%2A", "/a*"));
	assert_false(pm("/a%2A", "/ab"));
	assert_true(pm("/a%2A*", "/a*b"));
	assert_false(pm("/a%2A*", "/ab"));
	/* Escapes compare decoded, on both sides. */
	assert_true(pm("/a%21b", "/a!b"));
	assert_true(pm("/a!b", "/a%21b"));
	assert_true(pm("/a%2a", "/a%2A"));
	assert_true(pm("/a%20b/c", "/a%20b/c"));
	assert_false(pm("/a%20b/c", "/a+b/c"));
	assert_true(pm("/%25", "/%25"));
	assert_false(pm("/%25", "/%2525"));
	/* Not a path at all. */
	assert_false(pm("/**", ""));
	assert_false(pm("/**", "a"));
}

static void
test_pathological_globs(void **state)
{
	char *s, *path;
	size_t i, n = 10240;

	(void)state;
	assert_non_null(s = malloc(n + 1));
	memset(s, 'a', n);
	s[n] = '\0';
	assert_false(policy_value_match("*a*a*a*a*a*b", s, n));
	assert_true(policy_value_match("*a*a*a*a*a*", s, n));
	s[n - 1] = 'b';
	assert_true(policy_value_match("*a*a*a*a*a*b", s, n));
	/* one path segment of 10240 bytes under a glob of its own */
	s[0] = '/';
	s[n - 1] = 'a';
	assert_false(policy_path_match("/*a*a*a*a*a*b", s, n));
	assert_true(policy_path_match("/*a*a*a*a*a*", s, n));
	free(s);

	/* The same for "**" over 5000 segments "/a". */
	assert_non_null(path = malloc(2 * 5000 + 3));
	for (i = 0; i < 5000; i++)
		memcpy(path + 2 * i, "/a", 2);
	assert_false(policy_path_match("/**/a/**/a/**/a/**/a/**/b", path,
	    2 * 5000));
	assert_true(policy_path_match("/**/a/**/a/**/a/**/a/**", path,
	    2 * 5000));
	/* and '*' within segments, under "**" */
	assert_false(policy_path_match("/**/*a*a*a*b/**", path, 2 * 5000));
	memcpy(path + 2 * 5000, "/b", 3);
	assert_true(policy_path_match("/**/a/**/a/**/a/**/a/**/b", path,
	    2 * 5000 + 2));
	free(path);
}

/* ------------------------------------------------------------------ */
/* rules                                                               */

static const char policy_yaml[] =
	"name: p\n"
	"intercept:\n"
	"  - name: deny-admin\n"
	"    match: {host: api.example.com, path: \"/admin/**\"}\n"
	"    action: deny\n"
	"  - name: read\n"
	"    match:\n"
	"      host: api.example.com\n"
	"      methods: [GET, HEAD]\n"
	"      path: /repos/acme/**\n"
	"      query: {per_page: \"*\"}\n"
	"      headers: {Accept: \"application/vnd.github+json\"}\n"
	"    action: pass\n"
	"  - name: items\n"
	"    match: {host: \"*.example.com\", methods: [POST], "
	"path: \"/v1/*/items\"}\n"
	"    action: pass\n"
	"  - name: search\n"
	"    match:\n"
	"      host: api.example.com\n"
	"      path: /search\n"
	"      query: {q: \"a b*\", lang: c}\n"
	"      headers: {x-a: \"1*\", x-b: \"*\"}\n"
	"    action: pass\n"
	"  - name: fallback\n"
	"    match: {host: api.example.com}\n"
	"    action: deny\n";

static struct policy *
parse_policy(const char *yaml)
{
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	size_t i;
	int r;

	r = policy_parse("p.yaml", yaml, strlen(yaml), &p, &el);
	for (i = 0; i < el.n; i++)
		print_message("  got: %s\n", el.msgs[i]);
	assert_int_equal(r, 0);
	errlist_free(&el);
	return p;
}

static int
setup_policy(void **state)
{
	*state = parse_policy(policy_yaml);
	return 0;
}

static int
teardown_policy(void **state)
{
	policy_free(*state);
	return 0;
}

/*
 * The name of the rule that judges a request, "-" when none does, or
 * "400" when the target is refused.  hdrs: "Name: value" strings, then
 * NULL.
 */
static const char *
judge(const struct policy *p, const char *method, const char *host,
    const char *target, const char *const *hdrs)
{
	struct http_header h[16];
	struct http_request_view rq;
	const struct intercept_rule *r;
	char out[OUTSZ], names[16][64];
	const char *why, *colon;
	size_t n = 0, plen;

	memset(&rq, 0, sizeof(rq));
	if (http_path_normalize(target, strlen(target), out, sizeof(out),
	    &plen, &rq.query, &rq.query_len, &why) != 0)
		return "400";
	for (; hdrs != NULL && hdrs[n] != NULL; n++) {
		assert_true(n < 16);
		assert_non_null(colon = strchr(hdrs[n], ':'));
		assert_true((size_t)(colon - hdrs[n]) < sizeof(names[n]));
		memcpy(names[n], hdrs[n], (size_t)(colon - hdrs[n]));
		names[n][colon - hdrs[n]] = '\0';
		h[n].name = names[n];
		h[n].name_len = strlen(names[n]);
		h[n].value = colon + 1 + strspn(colon + 1, " ");
		h[n].value_len = strlen(h[n].value);
	}
	rq.method = method;
	rq.host = host;
	rq.path = out;
	rq.headers = h;
	rq.nheaders = n;
	r = policy_match_request(p, &rq);
	return r != NULL ? r->name : "-";
}

#define HDRS(...)	((const char *const []){ __VA_ARGS__, NULL })
#define GH		"Accept: application/vnd.github+json"

static void
test_first_match_and_host(void **state)
{
	const struct policy *p = *state;

	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?per_page=1", HDRS(GH)), "read");
	/* deny-admin comes first, whatever else matches. */
	assert_string_equal(judge(p, "GET", "api.example.com", "/admin/x",
	    HDRS(GH)), "deny-admin");
	assert_string_equal(judge(p, "GET", "api.example.com", "/admin",
	    NULL), "deny-admin");
	/* Dot segments and escapes cannot walk around it. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/../../admin/x?per_page=1", HDRS(GH)), "deny-admin");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "//admin//x", NULL), "deny-admin");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/%61dmin/x", NULL), "deny-admin");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/admin%2Fx", NULL), "400");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/x/..;/admin", NULL), "400");
	/* Hosts: exact, wildcard below (not the apex), others not at all. */
	assert_string_equal(judge(p, "GET", "other.example.org", "/", NULL),
	    "-");
	assert_string_equal(judge(p, "POST", "x.y.example.com", "/v1/a/items",
	    NULL), "items");
	assert_string_equal(judge(p, "POST", "example.com", "/v1/a/items",
	    NULL), "-");
	assert_string_equal(judge(p, "GET", "x.example.com", "/v1/a/items",
	    NULL), "-");
	assert_string_equal(judge(p, "GET", "api.example.com", "/", NULL),
	    "fallback");
}

static void
test_methods_and_paths(void **state)
{
	const struct policy *p = *state;

	assert_string_equal(judge(p, "HEAD", "api.example.com",
	    "/repos/acme?per_page=1", HDRS(GH)), "read");
	assert_string_equal(judge(p, "get", "api.example.com",
	    "/repos/acme/?per_page=1", HDRS(GH)), "read");
	assert_string_equal(judge(p, "DELETE", "api.example.com",
	    "/repos/acme/x?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GETX", "api.example.com",
	    "/repos/acme/x?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GE", "api.example.com",
	    "/repos/acme/x?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acmex?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/../other?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/%61cme/x/./y?per_page=1", HDRS(GH)), "read");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/Repos/acme/x?per_page=1", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "POST", "api.example.com",
	    "/v1/x/items", NULL), "items");
	assert_string_equal(judge(p, "POST", "api.example.com",
	    "/v1/x/items/", NULL), "fallback");
	assert_string_equal(judge(p, "POST", "api.example.com",
	    "/v1//items", NULL), "fallback");
	assert_string_equal(judge(p, "POST", "api.example.com",
	    "/v1/x/y/items", NULL), "fallback");
}

static void
test_query(void **state)
{
	const struct policy *p = *state;
	const char *const s[] = { "X-A: 1", "X-B: ", NULL };

	/* Present, empty, without '=', repeated: all match "*". */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?per_page=", HDRS(GH)), "read");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?a=1&per_page", HDRS(GH)), "read");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?&&per_page=1&&per_page=2&", HDRS(GH)), "read");
	/* Absent, or only as part of another name or of a value. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?per_pages=1&x=per_page", HDRS(GH)), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?per_page;x=1", HDRS(GH)), "fallback");
	/* Names decoded too. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/repos/acme/x?per%5Fpage=1", HDRS(GH)), "read");

	/* q: "a b*", lang: c; '+' and %20 are spaces, %2B a plus. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", s), "search");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?lang=c&q=a%20bcd", s), "search");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a%2Bb&lang=c", s), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b;lang=c", s), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&%6cang=%63", s), "search");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=C", s), "fallback");
	/* A second value cannot ride along with a good one. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c&lang=d", s), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?lang=d&q=a+b&lang=c", s), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c&q=x", s), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c&q=a+bb", s), "search");
	/* An encoded NUL is refused before any rule. */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b%00&lang=c", s), "400");
}

static void
test_headers(void **state)
{
	const struct policy *p = *state;
	const char *t = "/repos/acme/x?per_page=1";

	assert_string_equal(judge(p, "GET", "api.example.com", t, NULL),
	    "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("ACCEPT: application/vnd.github+json")), "read");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("aCcEpT: application/vnd.github+json", "X-Other: 1")),
	    "read");
	/* Values compare case and all. */
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("Accept: Application/vnd.github+json")), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("Accept: application/vnd.github+json, text/html")),
	    "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("Accepts: application/vnd.github+json")), "fallback");
	/* Every line of a repeated header must match, in either order. */
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS(GH, GH)), "read");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS(GH, "accept: text/html")), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com", t,
	    HDRS("Accept: text/html", GH)), "fallback");

	/* x-a: "1*" and x-b: "*" (present, any value, the empty one too). */
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", HDRS("x-a: 12", "x-b: ")), "search");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", HDRS("x-a: 12")), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", HDRS("x-a: 21", "x-b: 1")), "fallback");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", HDRS("x-b: 1", "x-a: 1", "X-A: 10")),
	    "search");
	assert_string_equal(judge(p, "GET", "api.example.com",
	    "/search?q=a+b&lang=c", HDRS("x-b: 1", "x-a: 1", "X-A: 01")),
	    "fallback");
}

/* A rule without path, methods, query or headers takes every request. */
static void
test_bare_rule_and_empty_policy(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_policy("name: p\nintercept:\n"
	    "  - name: any\n    match: {host: \"*.example.net\"}\n"
	    "    action: pass\n");
	assert_string_equal(judge(p, "PATCH", "a.example.net",
	    "/x/../y//z?k=%41", HDRS("a: b")), "any");
	assert_string_equal(judge(p, "PATCH", "example.net", "/", NULL), "-");
	policy_free(p);

	p = parse_policy("name: p\n");
	assert_string_equal(judge(p, "GET", "a.example.net", "/", NULL), "-");
	policy_free(p);
}

/*
 * What the rule that judges a request still refuses: "ok", the reason,
 * or "-" when no rule matches.  hdrs as for judge().
 */
static const char *
refusal(const struct policy *p, const char *host, const char *const *hdrs)
{
	struct http_header h[16];
	struct http_request_view rq;
	const struct intercept_rule *r;
	const char *colon, *why;
	size_t n = 0;

	memset(&rq, 0, sizeof(rq));
	for (; hdrs != NULL && hdrs[n] != NULL; n++) {
		assert_true(n < 16);
		assert_non_null(colon = strchr(hdrs[n], ':'));
		h[n].name = hdrs[n];
		h[n].name_len = (size_t)(colon - hdrs[n]);
		h[n].value = colon + 1 + strspn(colon + 1, " ");
		h[n].value_len = strlen(h[n].value);
	}
	rq.method = "GET";
	rq.host = host;
	rq.path = "/";
	rq.headers = h;
	rq.nheaders = n;
	if ((r = policy_match_request(p, &rq)) == NULL)
		return "-";
	why = policy_request_refusal(r, &rq);
	return why != NULL ? why : "ok";
}

/* Method overrides: refused on pass and inject rules unless allowed. */
static void
test_method_override(void **state)
{
	static const char *const names[] = { "X-HTTP-Method-Override",
	    "x-http-method-override", "X-HTTP-Method", "X-METHOD-OVERRIDE",
	    NULL };
	struct policy *p;
	char hdr[64];
	size_t i;

	(void)state;
	p = parse_policy("name: p\nintercept:\n"
	    "  - name: pass\n    match: {host: pass.example}\n"
	    "    action: pass\n"
	    "  - name: inject\n    match: {host: inject.example}\n"
	    "    inject: {set: {authorization: \"Bearer {{secret:t}}\"}}\n"
	    "  - name: allowed\n    match: {host: allowed.example}\n"
	    "    action: pass\n    allow_method_override: true\n"
	    "  - name: allowed-inject\n    match: {host: ai.example}\n"
	    "    inject: {remove: [cookie]}\n    allow_method_override: true\n"
	    "  - name: off\n    match: {host: off.example}\n"
	    "    action: pass\n    allow_method_override: false\n"
	    "  - name: fwd\n    match: {host: fwd.example}\n"
	    "    forward: {to: \"https://proxy.example\"}\n"
	    "  - name: deny\n    match: {host: deny.example}\n"
	    "    action: deny\n");
	for (i = 0; names[i] != NULL; i++) {
		snprintf(hdr, sizeof(hdr), "%s: POST", names[i]);
		assert_string_equal(refusal(p, "pass.example",
		    HDRS("Accept: */*", hdr)), "method-override");
		assert_string_equal(refusal(p, "inject.example", HDRS(hdr)),
		    "method-override");
		assert_string_equal(refusal(p, "off.example", HDRS(hdr)),
		    "method-override");
		assert_string_equal(refusal(p, "allowed.example", HDRS(hdr)),
		    "ok");
		assert_string_equal(refusal(p, "ai.example", HDRS(hdr)), "ok");
		/* Forward rules drop them; deny rules deny whatever. */
		assert_string_equal(refusal(p, "fwd.example", HDRS(hdr)), "ok");
		assert_string_equal(refusal(p, "deny.example", HDRS(hdr)), "ok");
	}
	/* Whatever the value, the request's own method or none at all. */
	assert_string_equal(refusal(p, "pass.example",
	    HDRS("X-HTTP-Method-Override: GET")), "method-override");
	assert_string_equal(refusal(p, "pass.example",
	    HDRS("X-HTTP-Method-Override: ")), "method-override");
	/* After other headers, and among repeated ones. */
	assert_string_equal(refusal(p, "pass.example", HDRS("A: 1", "B: 2",
	    "C: 3", "x-method-override: DELETE", "D: 4")), "method-override");
	/* Nothing else is refused, routing claims included (pass keeps them). */
	assert_string_equal(refusal(p, "pass.example", NULL), "ok");
	assert_string_equal(refusal(p, "pass.example",
	    HDRS("X-Forwarded-For: 1.2.3.4", "X-Original-URL: /admin",
	    "X-HTTP-Method-Overrides: POST", "X-Method: POST")), "ok");
	assert_string_equal(refusal(p, "inject.example",
	    HDRS("Accept: */*")), "ok");
	assert_string_equal(refusal(p, "other.example",
	    HDRS("X-HTTP-Method-Override: POST")), "-");
	policy_free(p);
}

/* From the wire: an absolute-form request is judged by its origin form. */
static void
test_from_stream(void **state)
{
	static const char req[] =
	    "GET http://api.example.com/repos/acme/./x?per_page=9 HTTP/1.1\r\n"
	    "Host: API.example.com\r\n"
	    "accept: application/vnd.github+json\r\n"
	    "Accept:  application/vnd.github+json \r\n"
	    "\r\n";
	const struct policy *p = *state;
	const struct intercept_rule *r;
	const struct http_head *h;
	struct http_request_view rq;
	struct http_reqs *s;
	const char *target, *why;
	char out[OUTSZ];
	size_t used, plen;

	assert_non_null(s = http_reqs_new(65536));
	assert_int_equal(http_reqs_feed(s, (const uint8_t *)req,
	    sizeof(req) - 1, &used, &h, &why), HTTP_EV_HEAD);
	target = h->absolute_form ? h->origin_target : h->target;
	memset(&rq, 0, sizeof(rq));
	assert_int_equal(http_path_normalize(target, strlen(target), out,
	    sizeof(out), &plen, &rq.query, &rq.query_len, &why), 0);
	assert_string_equal(out, "/repos/acme/x");
	rq.method = h->method;
	rq.host = h->host;
	rq.path = out;
	rq.headers = h->headers;
	rq.nheaders = h->nheaders;
	assert_non_null(r = policy_match_request(p, &rq));
	assert_string_equal(r->label, "intercept:read");
	http_reqs_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_and_keep),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_dot_segments),
		cmocka_unit_test(test_empty_segments),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_out_size),
		cmocka_unit_test(test_value_globs),
		cmocka_unit_test(test_path_globs),
		cmocka_unit_test(test_pathological_globs),
		cmocka_unit_test_setup_teardown(test_first_match_and_host,
		    setup_policy, teardown_policy),
		cmocka_unit_test_setup_teardown(test_methods_and_paths,
		    setup_policy, teardown_policy),
		cmocka_unit_test_setup_teardown(test_query,
		    setup_policy, teardown_policy),
		cmocka_unit_test_setup_teardown(test_headers,
		    setup_policy, teardown_policy),
		cmocka_unit_test(test_bare_rule_and_empty_policy),
		cmocka_unit_test(test_method_override),
		cmocka_unit_test_setup_teardown(test_from_stream,
		    setup_policy, teardown_policy),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
