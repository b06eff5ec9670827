/* test_addr.c: parsing, formatting, canonical form and classes of addresses. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "util/addr.h"
#include "util/err.h"

static struct sl_addr
must_parse(const char *s)
{
	struct sl_addr a;

	assert_int_equal(addr_parse(s, &a), 0);
	return a;
}

/* Formats s's canonical form. */
static const char *
canon_str(const char *s, char *buf)
{
	struct sl_addr a = must_parse(s), c;

	addr_canonical(&a, &c);
	return addr_format(&c, buf, ADDR_STRLEN);
}

static void
test_parse_format_roundtrip(void **state)
{
	static const char *ok[] = {
		"0.0.0.0", "198.18.0.1", "255.255.255.255", "::", "::1",
		"fd00:5c::1", "2001:db8::8:800:200c:417a", "::ffff:1.2.3.4",
		"64:ff9b::c000:201", "fe80::1",
	};
	char buf[ADDR_STRLEN];
	struct sl_addr a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		a = must_parse(ok[i]);
		assert_string_equal(addr_format(&a, buf, sizeof(buf)), ok[i]);
	}
	a = must_parse("10.1.2.3");
	assert_int_equal(a.family, AF_INET);
	assert_memory_equal(a.bytes, "\x0a\x01\x02\x03", 4);
	/* IPv4 keeps the other twelve bytes zero, so whole-struct compares work. */
	assert_memory_equal(a.bytes + 4, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
	/* Non-canonical IPv6 text formats in the RFC 5952 form. */
	a = must_parse("2001:DB8:0:0:0:0:0:1");
	assert_int_equal(a.family, AF_INET6);
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), "2001:db8::1");
}

static void
test_parse_refusals(void **state)
{
	static const char *bad[] = {
		"", " 1.2.3.4", "1.2.3.4 ", "1.2.3", "127.1", "1.2.3.4.5",
		"256.1.1.1", "01.2.3.4", "0x7f.0.0.1", "2130706433", "[::1]",
		"fe80::1%eth0", ":::", "1::2::3", "example.com", "1.2.3.4/32",
		"g::1",
	};
	struct sl_addr a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(addr_parse(bad[i], &a), SL_ERR_INVALID);
	assert_int_equal(addr_parse(NULL, &a), SL_ERR_INVALID);
}

static void
test_format_small_buffer(void **state)
{
	struct sl_addr a = must_parse("198.18.0.1");
	char buf[4] = "xyz";

	(void)state;
	/* Too small: an empty string, never an overrun or garbage. */
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), "");
}

static void
test_prefix(void **state)
{
	char buf[ADDR_STRLEN];
	struct sl_addr a;
	unsigned plen = 99;

	(void)state;
	assert_int_equal(addr_parse_prefix("10.0.0.0/8", &a, &plen), 0);
	assert_int_equal(plen, 8);
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), "10.0.0.0");
	assert_int_equal(addr_parse_prefix("0.0.0.0/0", &a, &plen), 0);
	assert_int_equal(plen, 0);
	assert_int_equal(addr_parse_prefix("1.2.3.4", &a, &plen), 0);
	assert_int_equal(plen, 32);
	assert_int_equal(addr_parse_prefix("1.2.3.4/32", &a, &plen), 0);
	assert_int_equal(plen, 32);
	assert_int_equal(addr_parse_prefix("2001:db8::/32", &a, &plen), 0);
	assert_int_equal(plen, 32);
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(addr_parse_prefix("::/0", &a, &plen), 0);
	assert_int_equal(plen, 0);
	assert_int_equal(addr_parse_prefix("::1", &a, &plen), 0);
	assert_int_equal(plen, 128);
	assert_int_equal(addr_parse_prefix("fe80::/10", &a, &plen), 0);
	assert_int_equal(plen, 10);
	assert_int_equal(addr_parse_prefix("172.16.0.0/12", &a, &plen), 0);
	assert_int_equal(plen, 12);
}

static void
test_prefix_refusals(void **state)
{
	static const char *bad[] = {
		"10.0.0.1/8",		/* host bits */
		"172.17.0.0/12",	/* host bit inside the last byte */
		"2001:db8::1/64",
		"fe80::/8",		/* 0xfe80 has bit 8 set */
		"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1",
		"10.0.0.0/+8", "10.0.0.0/08", "10.0.0.0/8x", "10.0.0.0/ 8",
		"10.0.0.0/8/8", "/8", "", "10.0.0/8", "10.0.0.0/99999999999",
		"[::1]/128",
	};
	struct sl_addr a, keep;
	unsigned plen = 77;
	size_t i;

	(void)state;
	memset(&keep, 0x5a, sizeof(keep));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = keep;
		assert_int_equal(addr_parse_prefix(bad[i], &a, &plen),
		    SL_ERR_INVALID);
		/* Out-parameters are written only on success. */
		assert_memory_equal(&a, &keep, sizeof(a));
		assert_int_equal(plen, 77);
	}
}

static void
test_endpoint(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)&ss;
	socklen_t len = 0;
	struct sl_addr a;
	uint16_t port;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_endpoint("1.2.3.4:53", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohs(sin->sin_port), 53);
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, len, &a,
	    &port), 0);
	assert_string_equal(addr_format(&a, buf, sizeof(buf)), "1.2.3.4");
	assert_int_equal(port, 53);

	assert_int_equal(addr_parse_endpoint("[::1]:53", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(sin6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6->sin6_port), 53);

	assert_int_equal(addr_parse_endpoint("[::]:65535", &ss, &len), 0);
	assert_int_equal(ntohs(sin6->sin6_port), 65535);
	assert_int_equal(addr_parse_endpoint("0.0.0.0:1", &ss, &len), 0);
	assert_int_equal(ntohs(sin->sin_port), 1);
}

static void
test_endpoint_refusals(void **state)
{
	static const char *bad[] = {
		"1.2.3.4", "1.2.3.4:", "1.2.3.4:0", "1.2.3.4:65536",
		"1.2.3.4:99999", "1.2.3.4:053", "1.2.3.4:-1", "1.2.3.4:5x",
		"1.2.3.4: 53", "::1:53", "::1", "[::1]", "[::1]53", "[::1]:",
		"[::1]:0", "[1.2.3.4]:53", "[::1:53", "::1]:53", "host:53",
		":53", "", "[]:53", "1.2.3.4:53:53", "[fe80::1%lo]:53",
	};
	struct sockaddr_storage ss;
	socklen_t len = 1234;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(addr_parse_endpoint(bad[i], &ss, &len),
		    SL_ERR_INVALID);
	assert_int_equal(len, 1234);
}

static void
test_sockaddr_roundtrip(void **state)
{
	struct sockaddr_storage ss;
	struct sl_addr a = must_parse("2001:db8::1"), b;
	uint16_t port = 0;
	socklen_t len;

	(void)state;
	len = addr_to_sockaddr(&a, 443, &ss);
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, len, &b,
	    &port), 0);
	assert_true(addr_equal(&a, &b));
	assert_int_equal(port, 443);
	/* Truncated sockaddrs and foreign families are refused. */
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, len - 1,
	    &b, &port), SL_ERR_INVALID);
	ss.ss_family = AF_UNIX;
	assert_int_equal(addr_from_sockaddr((struct sockaddr *)&ss, len, &b,
	    &port), SL_ERR_INVALID);
}

static void
test_equal(void **state)
{
	struct sl_addr a = must_parse("1.2.3.4"), b = must_parse("1.2.3.4");
	struct sl_addr c = must_parse("::ffff:1.2.3.4");

	(void)state;
	assert_true(addr_equal(&a, &b));
	b = must_parse("1.2.3.5");
	assert_false(addr_equal(&a, &b));
	assert_false(addr_equal(&a, &c));	/* only after canonical */
	addr_canonical(&c, &c);			/* in and out alias */
	assert_true(addr_equal(&a, &c));
}

static void
test_canonical_embedded(void **state)
{
	char buf[ADDR_STRLEN];

	(void)state;
	assert_string_equal(canon_str("::ffff:1.2.3.4", buf), "1.2.3.4");
	assert_string_equal(canon_str("::ffff:7f00:1", buf), "127.0.0.1");
	assert_string_equal(canon_str("::1.2.3.4", buf), "1.2.3.4");
	assert_string_equal(canon_str("::0.0.0.2", buf), "0.0.0.2");
	assert_string_equal(canon_str("64:ff9b::a9fe:a9fe", buf),
	    "169.254.169.254");
	assert_string_equal(canon_str("64:ff9b::1.2.3.4", buf), "1.2.3.4");
	/* RFC 8215: bits 96..127, whatever sits in bits 48..95. */
	assert_string_equal(canon_str("64:ff9b:1::a00:1", buf), "10.0.0.1");
	assert_string_equal(canon_str("64:ff9b:1:abcd::5:c000:201", buf),
	    "192.0.2.1");
	/* 6to4: bits 16..47; subnet and interface id are ignored. */
	assert_string_equal(canon_str("2002:0a00:0001::", buf), "10.0.0.1");
	assert_string_equal(canon_str("2002:c000:0201:ffff::1", buf),
	    "192.0.2.1");
	assert_string_equal(canon_str("2002:7f00:1::", buf), "127.0.0.1");
	/* IPv4 stays as it is. */
	assert_string_equal(canon_str("8.8.8.8", buf), "8.8.8.8");
}

static void
test_canonical_unchanged(void **state)
{
	static const char *same[] = {
		"::", "::1", "2001:db8::1", "fe80::1", "ff02::1", "fd00::1",
		"64:ff9b:0:1::1",	/* outside 64:ff9b::/96 */
		"64:ff9b:2::1",		/* outside 64:ff9b:1::/48 */
		"::fffe:1.2.3.4",	/* not ::ffff:0:0/96 */
		"0:0:0:0:1:ffff:102:304", "2003::1", "2001::1",
		"::1:0:0:1",		/* not in ::/96 */
	};
	struct sl_addr a, c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		a = must_parse(same[i]);
		addr_canonical(&a, &c);
		assert_int_equal(c.family, AF_INET6);
		assert_memory_equal(&a, &c, sizeof(a));
	}
}

static void
test_canonical_prefix(void **state)
{
	struct sl_addr a, c;
	unsigned plen, out_plen;
	char buf[ADDR_STRLEN];

	(void)state;
	assert_int_equal(addr_parse_prefix("::ffff:10.0.0.0/104", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_int_equal(c.family, AF_INET);
	assert_string_equal(addr_format(&c, buf, sizeof(buf)), "10.0.0.0");
	assert_int_equal(out_plen, 8);

	assert_int_equal(addr_parse_prefix("64:ff9b::a9fe:0/112", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_string_equal(addr_format(&c, buf, sizeof(buf)), "169.254.0.0");
	assert_int_equal(out_plen, 16);

	assert_int_equal(addr_parse_prefix("2002:c0a8::/32", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_string_equal(addr_format(&c, buf, sizeof(buf)), "192.168.0.0");
	assert_int_equal(out_plen, 16);

	assert_int_equal(addr_parse_prefix("64:ff9b:1::a00:0/120", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_string_equal(addr_format(&c, buf, sizeof(buf)), "10.0.0.0");
	assert_int_equal(out_plen, 24);

	/* Prefixes outside the ranges, and :: and ::1, stay IPv6. */
	assert_int_equal(addr_parse_prefix("2001:db8::/32", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_memory_equal(&a, &c, sizeof(a));
	assert_int_equal(out_plen, 32);
	assert_int_equal(addr_parse_prefix("::1/128", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen), 0);
	assert_memory_equal(&a, &c, sizeof(a));
	assert_int_equal(out_plen, 128);

	/* Prefixes the canonical form cannot express are refused. */
	out_plen = 5;
	assert_int_equal(addr_parse_prefix("2002:c000:201:1::/64", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen),
	    SL_ERR_INVALID);
	assert_int_equal(addr_parse_prefix("64:ff9b:1::/48", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen),
	    SL_ERR_INVALID);
	assert_int_equal(addr_parse_prefix("64:ff9b:1:1::/96", &a, &plen), 0);
	assert_int_equal(addr_canonical_prefix(&a, plen, &c, &out_plen),
	    SL_ERR_INVALID);
	assert_int_equal(out_plen, 5);
}

struct class_case {
	const char	*addr;
	enum addr_class	 cls;
	const char	*why;
};

static const struct class_case class_cases[] = {
	{ "0.0.0.0", ADDR_FORBIDDEN, "unspecified" },
	{ "0.255.255.255", ADDR_FORBIDDEN, "unspecified" },
	{ "1.0.0.0", ADDR_PUBLIC, "public" },
	{ "9.255.255.255", ADDR_PUBLIC, "public" },
	{ "10.0.0.0", ADDR_PRIVATE, "private" },
	{ "10.255.255.255", ADDR_PRIVATE, "private" },
	{ "11.0.0.0", ADDR_PUBLIC, "public" },
	{ "100.63.255.255", ADDR_PUBLIC, "public" },
	{ "100.64.0.0", ADDR_PRIVATE, "cgnat" },
	{ "100.127.255.255", ADDR_PRIVATE, "cgnat" },
	{ "100.128.0.0", ADDR_PUBLIC, "public" },
	{ "126.255.255.255", ADDR_PUBLIC, "public" },
	{ "127.0.0.1", ADDR_FORBIDDEN, "loopback" },
	{ "127.255.255.255", ADDR_FORBIDDEN, "loopback" },
	{ "128.0.0.0", ADDR_PUBLIC, "public" },
	{ "169.253.255.255", ADDR_PUBLIC, "public" },
	{ "169.254.0.0", ADDR_FORBIDDEN, "link-local" },
	{ "169.254.169.254", ADDR_FORBIDDEN, "link-local" },
	{ "169.255.0.0", ADDR_PUBLIC, "public" },
	{ "172.15.255.255", ADDR_PUBLIC, "public" },
	{ "172.16.0.0", ADDR_PRIVATE, "private" },
	{ "172.31.255.255", ADDR_PRIVATE, "private" },
	{ "172.32.0.0", ADDR_PUBLIC, "public" },
	{ "192.0.0.1", ADDR_PUBLIC, "public" },
	{ "192.167.255.255", ADDR_PUBLIC, "public" },
	{ "192.168.0.0", ADDR_PRIVATE, "private" },
	{ "192.168.255.255", ADDR_PRIVATE, "private" },
	{ "192.169.0.0", ADDR_PUBLIC, "public" },
	{ "223.255.255.255", ADDR_PUBLIC, "public" },
	{ "224.0.0.0", ADDR_FORBIDDEN, "multicast" },
	{ "239.255.255.255", ADDR_FORBIDDEN, "multicast" },
	{ "240.0.0.0", ADDR_FORBIDDEN, "reserved" },
	{ "255.255.255.255", ADDR_FORBIDDEN, "reserved" },
	{ "::", ADDR_FORBIDDEN, "unspecified" },
	{ "::1", ADDR_FORBIDDEN, "loopback" },
	{ "::2", ADDR_FORBIDDEN, "unspecified" },	/* ::0.0.0.2 */
	{ "fe80::", ADDR_FORBIDDEN, "link-local" },
	{ "fe80::1", ADDR_FORBIDDEN, "link-local" },
	{ "febf:ffff::", ADDR_FORBIDDEN, "link-local" },
	{ "fec0::", ADDR_PUBLIC, "public" },
	{ "fe7f:ffff::", ADDR_PUBLIC, "public" },
	{ "ff02::1", ADDR_FORBIDDEN, "multicast" },
	{ "ff00::", ADDR_FORBIDDEN, "multicast" },
	{ "fbff:ffff::", ADDR_PUBLIC, "public" },
	{ "fc00::", ADDR_PRIVATE, "ula" },
	{ "fd00:5c::1", ADDR_PRIVATE, "ula" },
	{ "fdff:ffff::", ADDR_PRIVATE, "ula" },
	{ "2001::1", ADDR_FORBIDDEN, "teredo" },
	{ "2001:0:ffff:ffff::", ADDR_FORBIDDEN, "teredo" },
	{ "2001:1::", ADDR_PUBLIC, "public" },
	{ "2001:db8::1", ADDR_PUBLIC, "public" },
	{ "2606:4700::1111", ADDR_PUBLIC, "public" },
};

static void
test_classify_edges(void **state)
{
	const char *why;
	struct sl_addr a, c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(class_cases) / sizeof(class_cases[0]); i++) {
		a = must_parse(class_cases[i].addr);
		addr_canonical(&a, &c);
		why = NULL;
		if (addr_classify(&c, &why) != class_cases[i].cls ||
		    why == NULL || strcmp(why, class_cases[i].why) != 0)
			fail_msg("%s: got %s", class_cases[i].addr,
			    why ? why : "(null)");
	}
	/* why may be NULL. */
	a = must_parse("127.0.0.1");
	assert_int_equal(addr_classify(&a, NULL), ADDR_FORBIDDEN);
}

static void
test_classify_after_canonical(void **state)
{
	static const struct class_case cases[] = {
		{ "::ffff:127.0.0.1", ADDR_FORBIDDEN, "loopback" },
		{ "::127.0.0.1", ADDR_FORBIDDEN, "loopback" },
		{ "64:ff9b::a9fe:a9fe", ADDR_FORBIDDEN, "link-local" },
		{ "64:ff9b:1::a9fe:a9fe", ADDR_FORBIDDEN, "link-local" },
		{ "2002:0a00:0001::", ADDR_PRIVATE, "private" },
		{ "2002:6440::", ADDR_PRIVATE, "cgnat" },
		{ "::ffff:224.0.0.1", ADDR_FORBIDDEN, "multicast" },
		{ "::ffff:0.0.0.0", ADDR_FORBIDDEN, "unspecified" },
		{ "::ffff:8.8.8.8", ADDR_PUBLIC, "public" },
		{ "::0.0.0.2", ADDR_FORBIDDEN, "unspecified" },
	};
	const char *why;
	struct sl_addr a, c;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		a = must_parse(cases[i].addr);
		addr_canonical(&a, &c);
		assert_int_equal(c.family, AF_INET);
		why = NULL;
		if (addr_classify(&c, &why) != cases[i].cls ||
		    strcmp(why, cases[i].why) != 0)
			fail_msg("%s: got %s", cases[i].addr, why);
		/* classify also holds when the caller forgot to canonicalise. */
		if (addr_classify(&a, &why) != cases[i].cls ||
		    strcmp(why, cases[i].why) != 0)
			fail_msg("%s (raw): got %s", cases[i].addr, why);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_format_roundtrip),
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_format_small_buffer),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_prefix_refusals),
		cmocka_unit_test(test_endpoint),
		cmocka_unit_test(test_endpoint_refusals),
		cmocka_unit_test(test_sockaddr_roundtrip),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_canonical_embedded),
		cmocka_unit_test(test_canonical_unchanged),
		cmocka_unit_test(test_canonical_prefix),
		cmocka_unit_test(test_classify_edges),
		cmocka_unit_test(test_classify_after_canonical),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
