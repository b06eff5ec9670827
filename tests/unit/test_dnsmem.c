/* test_dnsmem.c: what the DNS filter remembers for the firewall. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <cmocka.h>

#include <sodium.h>

#include "dns/dnsmem.h"

static struct sl_addr
A(const char *s)
{
	struct sl_addr a;

	assert_int_equal(addr_parse(s, &a), 0);
	return a;
}

static void
t_add_has_expire(void **st)
{
	struct dnsmem *m = dnsmem_new(1024, 30);
	struct sl_addr a = A("198.18.1.10"), b = A("198.18.1.11");

	dnsmem_add(m, "sb1", "allowed.test", &a, 60, 1000);
	assert_true(dnsmem_has(m, "sb1", "allowed.test", &a, 1000));
	/* TTL plus grace, and not a second more */
	assert_true(dnsmem_has(m, "sb1", "allowed.test", &a, 1090));
	assert_false(dnsmem_has(m, "sb1", "allowed.test", &a, 1091));
	/* another address, name or sandbox was never told */
	assert_false(dnsmem_has(m, "sb1", "allowed.test", &b, 1000));
	assert_false(dnsmem_has(m, "sb1", "other.test", &a, 1000));
	assert_false(dnsmem_has(m, "sb2", "allowed.test", &a, 1000));
	assert_false(dnsmem_has(m, "", "allowed.test", &a, 1000));
	/* renewing extends */
	dnsmem_add(m, "sb1", "allowed.test", &a, 60, 1080);
	assert_true(dnsmem_has(m, "sb1", "allowed.test", &a, 1160));
	assert_int_equal(dnsmem_count(m), 1);
	dnsmem_free(m);
}

static void
t_v6_and_mapped_distinct(void **st)
{
	struct dnsmem *m = dnsmem_new(1024, 0);
	struct sl_addr v6 = A("fd00:5c::2:10"), v4 = A("198.18.1.10");

	dnsmem_add(m, "sb1", "allowed.test", &v6, 10, 0);
	assert_true(dnsmem_has(m, "sb1", "allowed.test", &v6, 5));
	assert_false(dnsmem_has(m, "sb1", "allowed.test", &v4, 5));
	dnsmem_free(m);
}

static void
t_forget(void **st)
{
	struct dnsmem *m = dnsmem_new(1024, 30);
	struct sl_addr a = A("198.18.1.10");

	dnsmem_add(m, "sb1", "x.test", &a, 60, 0);
	dnsmem_add(m, "sb2", "x.test", &a, 60, 0);
	dnsmem_forget(m, "sb1");
	assert_false(dnsmem_has(m, "sb1", "x.test", &a, 1));
	assert_true(dnsmem_has(m, "sb2", "x.test", &a, 1));
	assert_int_equal(dnsmem_count(m), 1);
	dnsmem_free(m);
}

/* Bounded per sandbox: its own oldest go first, others keep theirs. */
static void
t_bounded(void **st)
{
	struct dnsmem *m = dnsmem_new(10, 30);
	struct sl_addr a = A("198.18.1.10");
	char name[64];
	int i, newest_kept = 1;

	dnsmem_add(m, "sb2", "kept.test", &a, 60, 0);
	for (i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		dnsmem_add(m, "sb1", name, &a, 60, 0);
	}
	assert_int_equal(dnsmem_count(m), 11);
	assert_false(dnsmem_has(m, "sb1", "n0.test", &a, 1));
	assert_false(dnsmem_has(m, "sb1", "n19989.test", &a, 1));
	for (i = 19990; i < 20000; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		newest_kept &= dnsmem_has(m, "sb1", name, &a, 1);
	}
	assert_true(newest_kept);
	/* the flood of sb1 did not push out sb2's answer */
	assert_true(dnsmem_has(m, "sb2", "kept.test", &a, 1));
	dnsmem_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_add_has_expire),
		cmocka_unit_test(t_v6_and_mapped_distinct),
		cmocka_unit_test(t_forget),
		cmocka_unit_test(t_bounded),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
