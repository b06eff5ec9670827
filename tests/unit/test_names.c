/* test_names.c: name normalisation, IDN conversion and name sets. */
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
#include "util/names.h"

static void
expect_norm(const char *in, const char *want)
{
	char out[NAME_BUFSZ];

	if (name_normalize(in, strlen(in), out) != 0)
		fail_msg("refused \"%s\"", in);
	assert_string_equal(out, want);
}

static void
expect_refused(const char *in)
{
	char out[NAME_BUFSZ] = "untouched";

	if (name_normalize(in, strlen(in), out) != SL_ERR_INVALID)
		fail_msg("accepted \"%s\" as \"%s\"", in, out);
	assert_string_equal(out, "untouched");
}

/* A name of total characters in labels of at most 63. */
static void
make_name(char *buf, size_t total)
{
	size_t i;

	for (i = 0; i < total; i++)
		buf[i] = (i % 64 == 63) ? '.' : 'a' + (char)(i % 26);
	buf[total] = '\0';
	if (total > 0 && buf[total - 1] == '.')
		buf[total - 1] = 'z';
}

static void
test_case_and_trailing_dot(void **state)
{
	(void)state;
	expect_norm("WwW.Example.COM", "www.example.com");
	expect_norm("example.com.", "example.com");
	expect_norm("EXAMPLE.COM.", "example.com");
	expect_norm("localhost", "localhost");
	expect_norm("a", "a");
	expect_norm("a.", "a");
	expect_refused("example.com..");
	expect_refused(".");
	expect_refused("..");
	expect_refused("");
	expect_refused(".example.com");
	expect_refused("a..example.com");
}

static void
test_length_limits(void **state)
{
	char label[80], name[300], out[NAME_BUFSZ];

	(void)state;
	memset(label, 'x', 63);
	strcpy(label + 63, ".example");
	expect_norm(label, label);
	memset(label, 'x', 64);
	strcpy(label + 64, ".example");
	expect_refused(label);
	memset(label, 'x', 64);
	label[64] = '\0';
	expect_refused(label);

	make_name(name, 253);
	expect_norm(name, name);
	strcat(name, ".");		/* 254 with the trailing dot: fine */
	assert_int_equal(name_normalize(name, strlen(name), out), 0);
	assert_int_equal(strlen(out), 253);
	make_name(name, 254);
	expect_refused(name);
	strcat(name, ".");
	expect_refused(name);
}

static void
test_characters(void **state)
{
	char out[NAME_BUFSZ];

	(void)state;
	expect_norm("_dmarc.Example.com", "_dmarc.example.com");
	expect_norm("a_b-c.example", "a_b-c.example");
	expect_norm("xn--bcher-kva.example", "xn--bcher-kva.example");
	expect_norm("123.example", "123.example");
	expect_norm("1.2.3.4.example", "1.2.3.4.example");
	expect_norm("0x10.example", "0x10.example");
	expect_refused("exa mple.com");
	expect_refused("*.example.com");
	expect_refused("example.com/");
	expect_refused("ex@mple.com");
	expect_refused("b\xc3\xbc" "cher.example");	/* raw UTF-8 */
	expect_refused("\x80.example");
	expect_refused("example.com\r");
	/* A NUL inside len is refused; len bounds what is read. */
	assert_int_equal(name_normalize("a\0b.com", 7, out), SL_ERR_INVALID);
	assert_int_equal(name_normalize("Example.comXYZ", 11, out), 0);
	assert_string_equal(out, "example.com");
	assert_int_equal(name_normalize(NULL, 0, out), SL_ERR_INVALID);
}

static void
test_ip_literals(void **state)
{
	(void)state;
	expect_refused("1.2.3.4");
	expect_refused("1.2.3.4.");
	expect_refused("127.0.0.1");
	expect_refused("127.1");
	expect_refused("2130706433");
	expect_refused("0x7f.0.0.1");
	expect_refused("0x7f000001");
	expect_refused("0177.0.0.1");
	expect_refused("example.0x1f");
	expect_refused("example.123");
	expect_refused("::1");
	expect_refused("[::1]");
	expect_refused("fe80::1");
	expect_refused("::ffff:1.2.3.4");
	expect_refused("example.com:443");
}

static void
expect_policy(const char *in, const char *want)
{
	char out[NAME_BUFSZ];
	const char *why = NULL;

	if (name_from_policy(in, out, &why) != 0)
		fail_msg("refused \"%s\": %s", in, why ? why : "?");
	assert_string_equal(out, want);
}

static void
expect_policy_refused(const char *in)
{
	char out[NAME_BUFSZ] = "untouched";
	const char *why = NULL;

	if (name_from_policy(in, out, &why) != SL_ERR_INVALID)
		fail_msg("accepted \"%s\" as \"%s\"", in, out);
	assert_non_null(why);
	assert_true(strlen(why) > 0);
	assert_string_equal(out, "untouched");
	/* why may be NULL. */
	assert_int_equal(name_from_policy(in, out, NULL), SL_ERR_INVALID);
}

static void
test_policy_names(void **state)
{
	(void)state;
	expect_policy("Api.OpenAI.com.", "api.openai.com");
	expect_policy("b\xc3\xbc" "cher.example", "xn--bcher-kva.example");
	expect_policy("B\xc3\x9c" "CHER.Example", "xn--bcher-kva.example");
	/* "ÄÖÜ.example": mapped to lower case before encoding. */
	expect_policy("\xc3\x84\xc3\x96\xc3\x9c.example", "xn--4ca0bs.example");
	/* Decomposed u + U+0308 is the same name once in NFC. */
	expect_policy("bu\xcc\x88" "cher.example", "xn--bcher-kva.example");
	/* Non-transitional: "ß" stays itself, not "ss". */
	expect_policy("fa\xc3\x9f.de", "xn--fa-hia.de");
	expect_policy_refused("");
	expect_policy_refused("a..b");
	expect_policy_refused("*.example.com");	/* caller strips "*." */
	expect_policy_refused("1.2.3.4");
	expect_policy_refused("\xff\xfe.example");	/* not UTF-8 */
	expect_policy_refused("\xe2\x98\x83.example");	/* U+2603 snowman */
	expect_policy_refused("b\xc3\xbc" "cher..example");
	expect_policy_refused("\xcc\x88" "a.example");	/* leading mark */
	expect_policy_refused(NULL);
}

static void
test_policy_long_idn(void **state)
{
	char in[400], out[NAME_BUFSZ];
	size_t i;

	(void)state;
	/* 60 x "ü" encodes to an A-label longer than 63. */
	for (i = 0; i < 60; i++)
		memcpy(in + 2 * i, "\xc3\xbc", 2);
	strcpy(in + 120, ".example");
	assert_int_equal(name_from_policy(in, out, NULL), SL_ERR_INVALID);
}

static struct nameset *
set_of(const char *const *patterns, const uint32_t *ids, size_t n)
{
	struct nameset *s = nameset_new();
	size_t i;

	assert_non_null(s);
	for (i = 0; i < n; i++)
		if (nameset_add(s, patterns[i], ids[i]) != 0)
			fail_msg("refused pattern \"%s\"", patterns[i]);
	return s;
}

static void
expect_match(const struct nameset *s, const char *name, uint32_t want)
{
	uint32_t id = 0xdeadbeef;

	if (!nameset_match(s, name, &id))
		fail_msg("\"%s\" did not match", name);
	if (id != want)
		fail_msg("\"%s\" matched id %u, want %u", name, id, want);
}

static void
expect_no_match(const struct nameset *s, const char *name)
{
	uint32_t id = 0xdeadbeef;

	if (nameset_match(s, name, &id))
		fail_msg("\"%s\" matched id %u", name, id);
	assert_int_equal(id, 0xdeadbeef);
}

static void
test_wildcard_semantics(void **state)
{
	static const char *const p[] = {
		"*.example.com", "api.example.com", "*.deep.example.com",
		"*.com", "exact.org",
	};
	static const uint32_t ids[] = { 1, 2, 3, 4, 5 };
	struct nameset *s = set_of(p, ids, 5);

	(void)state;
	assert_int_equal(nameset_count(s), 5);
	/* Any depth below, never the apex. */
	expect_match(s, "a.example.com", 1);
	expect_match(s, "a.b.c.d.example.com", 1);
	expect_match(s, "example.com", 4);		/* via *.com only */
	expect_no_match(s, "com");
	/* Exact beats wildcard, but covers only itself. */
	expect_match(s, "api.example.com", 2);
	expect_match(s, "v1.api.example.com", 1);
	/* The longest wildcard wins, whatever the order added. */
	expect_match(s, "x.deep.example.com", 3);
	expect_match(s, "y.x.deep.example.com", 3);
	expect_match(s, "deep.example.com", 1);
	expect_match(s, "other.com", 4);
	/* Suffixes match on label boundaries only. */
	expect_match(s, "exact.org", 5);
	expect_no_match(s, "a.exact.org");
	expect_no_match(s, "xexact.org");
	expect_no_match(s, "org");
	expect_no_match(s, "example.net");
	/* Names must come normalised. */
	expect_no_match(s, "EXACT.ORG");
	expect_no_match(s, "");
	expect_no_match(s, NULL);
	nameset_free(s);

	/* Without *.com, "example.com" and "notexample.com" stay out. */
	s = set_of(p, ids, 3);
	expect_no_match(s, "example.com");
	expect_no_match(s, "notexample.com");
	expect_no_match(s, "a.notexample.com");
	expect_no_match(s, "com");
	nameset_free(s);
}

static void
test_duplicates(void **state)
{
	struct nameset *s = nameset_new();

	(void)state;
	assert_non_null(s);
	assert_int_equal(nameset_add(s, "a.com", 5), 0);
	assert_int_equal(nameset_add(s, "a.com", 3), 0);
	assert_int_equal(nameset_add(s, "a.com", 9), 0);
	assert_int_equal(nameset_add(s, "*.a.com", 8), 0);
	assert_int_equal(nameset_add(s, "*.a.com", 7), 0);
	assert_int_equal(nameset_add(s, "*.a.com", 70), 0);
	/* The exact name and the wildcard on it are different patterns. */
	assert_int_equal(nameset_count(s), 2);
	expect_match(s, "a.com", 3);
	expect_match(s, "b.a.com", 7);
	nameset_free(s);
	nameset_free(NULL);
	assert_int_equal(nameset_count(NULL), 0);
}

static void
test_bad_patterns(void **state)
{
	static const char *const bad[] = {
		"", "*", "*.", "**.a.com", "*a.com", "a.*.com", "*.*.a.com",
		"A.com", "a.com.", "*.A.com", "*.a.com.", ".a.com", "a..com",
		"1.2.3.4", "*.10.0.0.1", "b\xc3\xbc" "cher.example", "a.com:443",
	};
	struct nameset *s = nameset_new();
	size_t i;

	(void)state;
	assert_non_null(s);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (nameset_add(s, bad[i], 1) != SL_ERR_INVALID)
			fail_msg("accepted pattern \"%s\"", bad[i]);
	assert_int_equal(nameset_add(s, NULL, 1), SL_ERR_INVALID);
	assert_int_equal(nameset_add(NULL, "a.com", 1), SL_ERR_INVALID);
	assert_int_equal(nameset_count(s), 0);
	expect_no_match(s, "a.com");
	nameset_free(s);
}

#define NPATTERNS	100000

static void
test_many_patterns(void **state)
{
	struct nameset *s = nameset_new();
	char name[NAME_BUFSZ];
	uint32_t i;

	(void)state;
	assert_non_null(s);
	/* Half exact, half wildcards; ids count down so none is 0. */
	for (i = 0; i < NPATTERNS; i++) {
		if (i % 2)
			snprintf(name, sizeof(name), "h%u.d%u.example", i,
			    i % 997);
		else
			snprintf(name, sizeof(name), "*.w%u.test", i);
		if (nameset_add(s, name, NPATTERNS - i) != 0)
			fail_msg("refused %s", name);
	}
	assert_int_equal(nameset_count(s), NPATTERNS);
	for (i = 0; i < NPATTERNS; i++) {
		if (i % 2) {
			snprintf(name, sizeof(name), "h%u.d%u.example", i,
			    i % 997);
			expect_match(s, name, NPATTERNS - i);
			snprintf(name, sizeof(name), "x.h%u.d%u.example", i,
			    i % 997);
			expect_no_match(s, name);
		} else {
			snprintf(name, sizeof(name), "x.y.w%u.test", i);
			expect_match(s, name, NPATTERNS - i);
			snprintf(name, sizeof(name), "w%u.test", i);
			expect_no_match(s, name);
		}
	}
	nameset_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_case_and_trailing_dot),
		cmocka_unit_test(test_length_limits),
		cmocka_unit_test(test_characters),
		cmocka_unit_test(test_ip_literals),
		cmocka_unit_test(test_policy_names),
		cmocka_unit_test(test_policy_long_idn),
		cmocka_unit_test(test_wildcard_semantics),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_bad_patterns),
		cmocka_unit_test(test_many_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
