/* test_cidr.c: the prefix tree, checked by hand and against a linear scan. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/addr.h"
#include "util/cidr.h"
#include "util/err.h"

#define MAXSEEN	256

/* What a walk visited, in order. */
struct seen {
	uint32_t	ids[MAXSEEN];
	size_t		n;
	size_t		stop_after;	/* 0: never stop */
};

static int
record(uint32_t id, void *arg)
{
	struct seen *s = arg;

	if (s->n < MAXSEEN)
		s->ids[s->n] = id;
	s->n++;
	if (s->stop_after != 0 && s->n == s->stop_after)
		return 7;
	return 0;
}

static void
add(struct cidr_tree *t, const char *prefix, uint32_t id)
{
	struct sl_addr a;
	unsigned plen;

	assert_int_equal(addr_parse_prefix(prefix, &a, &plen), 0);
	assert_int_equal(cidr_tree_add(t, &a, plen, id), 0);
}

/* Walks t for addr and checks the ids against want[0..nwant-1]. */
static void
expect_walk(const struct cidr_tree *t, const char *addr,
    const uint32_t *want, size_t nwant)
{
	struct seen s;
	struct sl_addr a;
	size_t i;

	memset(&s, 0, sizeof(s));
	assert_int_equal(addr_parse(addr, &a), 0);
	assert_int_equal(cidr_tree_walk(t, &a, record, &s), 0);
	if (s.n != nwant)
		fail_msg("%s: %zu ids, want %zu", addr, s.n, nwant);
	for (i = 0; i < nwant; i++)
		if (s.ids[i] != want[i])
			fail_msg("%s: id[%zu] = %u, want %u", addr, i,
			    s.ids[i], want[i]);
}

#define WALK(t, addr, ...) do {						\
	static const uint32_t want_[] = { __VA_ARGS__ };		\
	expect_walk((t), (addr), want_, sizeof(want_) / sizeof(want_[0])); \
} while (0)
#define WALK_NONE(t, addr)	expect_walk((t), (addr), NULL, 0)

static void
test_empty(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	assert_non_null(t);
	assert_int_equal(cidr_tree_count(t), 0);
	WALK_NONE(t, "1.2.3.4");
	WALK_NONE(t, "::1");
	cidr_tree_free(t);
	cidr_tree_free(NULL);
}

static void
test_default_routes(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	add(t, "0.0.0.0/0", 1);
	WALK(t, "0.0.0.0", 1);
	WALK(t, "255.255.255.255", 1);
	WALK_NONE(t, "2001:db8::1");	/* v4 /0 does not cover IPv6 */
	add(t, "::/0", 2);
	WALK(t, "2001:db8::1", 2);
	WALK(t, "8.8.8.8", 1);
	assert_int_equal(cidr_tree_count(t), 2);
	cidr_tree_free(t);
}

static void
test_host_routes(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	add(t, "192.0.2.1/32", 1);
	add(t, "2001:db8::1/128", 2);
	add(t, "255.255.255.255/32", 3);
	add(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", 4);
	WALK(t, "192.0.2.1", 1);
	WALK_NONE(t, "192.0.2.0");
	WALK_NONE(t, "192.0.2.2");
	WALK(t, "2001:db8::1", 2);
	WALK_NONE(t, "2001:db8::");
	WALK_NONE(t, "2001:db8::3");
	WALK(t, "255.255.255.255", 3);
	WALK(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 4);
	WALK_NONE(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe");
	/* A host route right below its one-bit-shorter parent. */
	add(t, "192.0.2.0/31", 5);
	add(t, "2001:db8::/127", 6);
	WALK(t, "192.0.2.1", 5, 1);
	WALK(t, "192.0.2.0", 5);
	WALK(t, "2001:db8::1", 6, 2);
	WALK(t, "2001:db8::", 6);
	cidr_tree_free(t);
}

static void
test_nested_order(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	/* Added longest first, so every insert splits or slots in above. */
	add(t, "10.1.2.0/24", 30);
	add(t, "10.1.3.0/24", 31);
	add(t, "10.1.2.128/25", 40);
	add(t, "10.0.0.0/8", 10);
	add(t, "10.1.0.0/16", 20);
	add(t, "0.0.0.0/0", 1);
	add(t, "10.1.2.0/24", 32);	/* second id on one prefix */
	add(t, "10.1.2.0/24", 29);	/* kept after 30 and 32: order added */
	add(t, "10.1.2.200/32", 50);
	assert_int_equal(cidr_tree_count(t), 7);

	WALK(t, "10.1.2.200", 1, 10, 20, 30, 32, 29, 40, 50);
	WALK(t, "10.1.2.129", 1, 10, 20, 30, 32, 29, 40);
	WALK(t, "10.1.2.1", 1, 10, 20, 30, 32, 29);
	WALK(t, "10.1.3.1", 1, 10, 20, 31);
	WALK(t, "10.1.4.1", 1, 10, 20);
	WALK(t, "10.2.0.0", 1, 10);
	WALK(t, "11.0.0.0", 1);
	cidr_tree_free(t);
}

static void
test_nested_v6(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	add(t, "2001:db8:1:2::/64", 3);
	add(t, "2001:db8::/32", 1);
	add(t, "2001:db8:1::/48", 2);
	add(t, "2001:db8:1:2::5/128", 4);
	add(t, "2001:db8:8000::/33", 5);
	WALK(t, "2001:db8:1:2::5", 1, 2, 3, 4);
	WALK(t, "2001:db8:1:2::6", 1, 2, 3);
	WALK(t, "2001:db8:1:3::", 1, 2);
	WALK(t, "2001:db8:8001::", 1, 5);
	WALK_NONE(t, "2001:db9::");
	cidr_tree_free(t);
}

static void
test_early_stop(void **state)
{
	struct cidr_tree *t = cidr_tree_new();
	struct sl_addr a;
	struct seen s;

	(void)state;
	add(t, "0.0.0.0/0", 1);
	add(t, "10.0.0.0/8", 2);
	add(t, "10.0.0.0/8", 3);
	add(t, "10.1.0.0/16", 4);
	assert_int_equal(addr_parse("10.1.1.1", &a), 0);

	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	assert_int_equal(cidr_tree_walk(t, &a, record, &s), 7);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.ids[1], 2);

	memset(&s, 0, sizeof(s));
	s.stop_after = 3;		/* between two ids of one prefix */
	assert_int_equal(cidr_tree_walk(t, &a, record, &s), 7);
	assert_int_equal(s.n, 3);

	memset(&s, 0, sizeof(s));
	s.stop_after = 5;		/* never reached */
	assert_int_equal(cidr_tree_walk(t, &a, record, &s), 0);
	assert_int_equal(s.n, 4);
	cidr_tree_free(t);
}

static void
test_families_separate(void **state)
{
	struct cidr_tree *t = cidr_tree_new();

	(void)state;
	/* Same leading bytes in both families must not mix. */
	add(t, "10.0.0.0/8", 1);
	add(t, "a00::/8", 2);
	add(t, "::/1", 3);
	WALK(t, "10.1.2.3", 1);
	WALK(t, "a00::1", 3, 2);
	WALK(t, "a01:203::", 3, 2);
	WALK_NONE(t, "8000::");
	cidr_tree_free(t);
}

static void
test_embedded_prefixes(void **state)
{
	struct cidr_tree *t = cidr_tree_new();
	struct sl_addr a;
	unsigned plen;

	(void)state;
	/* An IPv4-mapped rule judges the IPv4 address, as lookups do. */
	add(t, "::ffff:169.254.0.0/112", 1);
	add(t, "64:ff9b::a00:0/104", 2);
	WALK(t, "169.254.169.254", 1);
	WALK(t, "::ffff:169.254.169.254", 1);	/* walk canonicalises */
	WALK(t, "10.9.9.9", 2);
	WALK(t, "2002:a09:909::", 2);
	/* One the IPv4 tree cannot express is refused, not widened. */
	assert_int_equal(addr_parse_prefix("2002:a00:1:1::/64", &a, &plen), 0);
	assert_int_equal(cidr_tree_add(t, &a, plen, 3), SL_ERR_INVALID);
	assert_int_equal(cidr_tree_count(t), 2);
	cidr_tree_free(t);
}

static void
test_add_refusals(void **state)
{
	struct cidr_tree *t = cidr_tree_new();
	struct sl_addr a;

	(void)state;
	assert_int_equal(addr_parse("10.0.0.1", &a), 0);
	assert_int_equal(cidr_tree_add(t, &a, 33, 1), SL_ERR_INVALID);
	assert_int_equal(cidr_tree_add(t, &a, 8, 1), SL_ERR_INVALID);
	assert_int_equal(addr_parse("2001:db8::", &a), 0);
	assert_int_equal(cidr_tree_add(t, &a, 129, 1), SL_ERR_INVALID);
	a.family = AF_UNIX;
	assert_int_equal(cidr_tree_add(t, &a, 0, 1), SL_ERR_INVALID);
	assert_int_equal(cidr_tree_count(t), 0);
	WALK_NONE(t, "10.0.0.1");
	cidr_tree_free(t);
}

/* A deterministic generator, so a failure reproduces. */
static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct entry {
	struct sl_addr	a;
	unsigned	plen;
	uint32_t	id;
};

static int
covers(const struct entry *e, const struct sl_addr *a)
{
	unsigned full = e->plen / 8, rest = e->plen % 8;

	/* Written differently from the tree's own test on purpose. */
	if (e->a.family != a->family || memcmp(e->a.bytes, a->bytes, full))
		return 0;
	return rest == 0 ||
	    (e->a.bytes[full] >> (8 - rest)) == (a->bytes[full] >> (8 - rest));
}

static void
mask_to(struct sl_addr *a, unsigned plen)
{
	unsigned i, bits = a->family == AF_INET ? 32 : 128;

	for (i = plen; i < bits; i++)
		a->bytes[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
}

/*
 * Random prefixes drawn from small spaces (10.0/12 and 2001:db8:XXXX::
 * with a 12-bit XXXX), so they nest and repeat; the families' lengths
 * are /24../32 and /48../128.
 */
static void
random_entry(uint64_t *seed, struct entry *e, uint32_t id)
{
	uint64_t r = rnd(seed);

	memset(e, 0, sizeof(*e));
	e->id = id;
	if (r & 1) {
		e->a.family = AF_INET;
		e->a.bytes[0] = 10;
		e->a.bytes[1] = (uint8_t)((r >> 8) & 0x0f);
		e->a.bytes[2] = (uint8_t)(r >> 16);
		e->a.bytes[3] = (uint8_t)(r >> 24);
		e->plen = 24 + (unsigned)((r >> 32) % 9);
	} else {
		e->a.family = AF_INET6;
		memcpy(e->a.bytes, "\x20\x01\x0d\xb8", 4);
		e->a.bytes[4] = (uint8_t)((r >> 8) & 0x0f);
		e->a.bytes[5] = (uint8_t)(r >> 16);
		r = rnd(seed);
		memcpy(e->a.bytes + 6, &r, 8);
		r = rnd(seed);
		memcpy(e->a.bytes + 14, &r, 2);
		e->plen = 48 + (unsigned)((r >> 32) % 81);
	}
	mask_to(&e->a, e->plen);
}

/* A lookup address: inside a random entry (host bits random), or anywhere. */
static void
random_probe(uint64_t *seed, const struct entry *ents, size_t n,
    struct sl_addr *a)
{
	uint64_t r = rnd(seed), r2 = rnd(seed);
	const struct entry *e = &ents[r % n];
	unsigned i, bits;

	*a = e->a;
	bits = a->family == AF_INET ? 32 : 128;
	for (i = e->plen; i < bits; i++, r2 = r2 >> 1 | r2 << 63)
		if (r2 & 1)
			a->bytes[i / 8] |= (uint8_t)(0x80 >> (i % 8));
	if ((r >> 40) % 8 == 0)
		a->bytes[bits / 8 - 1] ^= (uint8_t)(r >> 48);	/* miss too */
}

static int
by_plen(const void *x, const void *y)
{
	const struct entry *a = *(const struct entry * const *)x;
	const struct entry *b = *(const struct entry * const *)y;

	if (a->plen != b->plen)
		return a->plen < b->plen ? -1 : 1;
	return a < b ? -1 : a > b;	/* insertion order: array order */
}

#define NRANDOM	100000
#define NPROBES	1000

static void
test_random_vs_linear(void **state)
{
	struct cidr_tree *t = cidr_tree_new();
	struct entry *ents, **hits;
	struct sl_addr a;
	struct seen s;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	size_t i, j, nhits, total_hits = 0, multi = 0;

	(void)state;
	ents = calloc(NRANDOM + 2, sizeof(*ents));
	hits = calloc(NRANDOM + 2, sizeof(*hits));
	assert_non_null(ents);
	assert_non_null(hits);
	for (i = 0; i < NRANDOM; i++) {
		random_entry(&seed, &ents[i], (uint32_t)i);
		assert_int_equal(cidr_tree_add(t, &ents[i].a, ents[i].plen,
		    ents[i].id), 0);
	}
	/* Short covering prefixes, added last but walked first. */
	assert_int_equal(addr_parse("10.0.0.0", &ents[i].a), 0);
	ents[i].plen = 12;
	ents[i].id = (uint32_t)i;
	assert_int_equal(cidr_tree_add(t, &ents[i].a, 12, ents[i].id), 0);
	i++;
	assert_int_equal(addr_parse("2001:db8::", &ents[i].a), 0);
	ents[i].plen = 32;
	ents[i].id = (uint32_t)i;
	assert_int_equal(cidr_tree_add(t, &ents[i].a, 32, ents[i].id), 0);

	for (i = 0; i < NPROBES; i++) {
		random_probe(&seed, ents, NRANDOM, &a);
		nhits = 0;
		for (j = 0; j < NRANDOM + 2; j++)
			if (covers(&ents[j], &a))
				hits[nhits++] = &ents[j];
		qsort(hits, nhits, sizeof(*hits), by_plen);

		memset(&s, 0, sizeof(s));
		assert_int_equal(cidr_tree_walk(t, &a, record, &s), 0);
		assert_int_equal(s.n, nhits);
		for (j = 0; j < nhits && j < MAXSEEN; j++)
			assert_int_equal(s.ids[j], hits[j]->id);
		total_hits += nhits;
		multi += nhits > 2;
	}
	print_message("%zu probes, %zu ids visited, %zu with 3+ ids\n",
	    (size_t)NPROBES, total_hits, multi);
	/* The sample exercised nesting, not just the catch-all prefixes. */
	assert_true(total_hits > 2 * NPROBES);
	assert_true(multi > NPROBES / 10);
	cidr_tree_free(t);
	free(hits);
	free(ents);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_default_routes),
		cmocka_unit_test(test_host_routes),
		cmocka_unit_test(test_nested_order),
		cmocka_unit_test(test_nested_v6),
		cmocka_unit_test(test_early_stop),
		cmocka_unit_test(test_families_separate),
		cmocka_unit_test(test_embedded_prefixes),
		cmocka_unit_test(test_add_refusals),
		cmocka_unit_test(test_random_vs_linear),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
