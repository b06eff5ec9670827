/* cidr.c: a prefix tree of IPv4 and IPv6 prefixes, each carrying rule ids. */
#include "autoconf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/addr.h"
#include "util/cidr.h"
#include "util/err.h"

/*
 * A path-compressed binary trie, one root per family.  Every node holds a
 * whole prefix (key/plen), so a chain of single-child nodes collapses into
 * one edge; a node added only to branch two prefixes apart carries no ids.
 * Nodes and ids live in two pools addressed by index, so growing a pool
 * never leaves a dangling pointer inside the tree, and freeing is two
 * free() calls.  Every loop is bounded by the depth (at most 129 nodes).
 */
#define NIL	UINT32_MAX

struct node {
	uint8_t		key[16];	/* bits beyond plen are zero */
	uint32_t	child[2];	/* by the bit after the prefix */
	uint32_t	ids_head;	/* into ids[], in the order added */
	uint32_t	ids_tail;
	uint8_t		plen;
};

struct id_entry {
	uint32_t	id;
	uint32_t	next;
};

struct cidr_tree {
	struct node	*nodes;
	size_t		 nnodes, capnodes;
	struct id_entry	*ids;
	size_t		 nids, capids;
	uint32_t	 root[2];	/* IPv4, IPv6: /0 nodes */
	size_t		 nprefixes;
};

static unsigned
key_bit(const uint8_t *key, unsigned i)
{
	return (key[i / 8] >> (7 - i % 8)) & 1;
}

/* Whether the first plen bits of a and b agree. */
static int
prefix_equal(const uint8_t *a, const uint8_t *b, unsigned plen)
{
	unsigned full = plen / 8, rest = plen % 8;

	if (memcmp(a, b, full) != 0)
		return 0;
	return rest == 0 ||
	    ((a[full] ^ b[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* Number of leading bits a and b share, at most max. */
static unsigned
common_len(const uint8_t *a, const uint8_t *b, unsigned max)
{
	unsigned i, n = 0;

	for (i = 0; i < 16 && n < max; i++) {
		uint8_t x = a[i] ^ b[i];

		if (x != 0) {
			while (!(x & 0x80)) {
				x = (uint8_t)(x << 1);
				n++;
			}
			break;
		}
		n += 8;
	}
	return n < max ? n : max;
}

static int
host_bits_zero(const uint8_t *key, unsigned plen, unsigned maxbits)
{
	unsigned i;

	for (i = plen; i < maxbits; i++)
		if (key_bit(key, i))
			return 0;
	return 1;
}

/* Makes room for want more elements of size sz in *pool. */
static int
pool_reserve(void **pool, size_t *cap, size_t n, size_t want, size_t sz)
{
	size_t ncap;
	void *np;

	if (n + want <= *cap)
		return 0;
	ncap = *cap ? *cap : 64;
	while (ncap < n + want)
		ncap *= 2;
	if (ncap >= NIL || ncap > SIZE_MAX / sz)
		return SL_ERR_NOMEM;
	if ((np = realloc(*pool, ncap * sz)) == NULL)
		return SL_ERR_NOMEM;
	*pool = np;
	*cap = ncap;
	return 0;
}

/* Takes a node from the pool; the caller reserved room. */
static uint32_t
node_take(struct cidr_tree *t, const uint8_t *key, unsigned plen)
{
	struct node *n = &t->nodes[t->nnodes];
	unsigned i;

	memset(n, 0, sizeof(*n));
	for (i = 0; i < plen; i++)
		if (key_bit(key, i))
			n->key[i / 8] |= (uint8_t)(0x80 >> (i % 8));
	n->plen = (uint8_t)plen;
	n->child[0] = n->child[1] = NIL;
	n->ids_head = n->ids_tail = NIL;
	return (uint32_t)t->nnodes++;
}

/* Appends id to a node's list; the caller reserved room. */
static void
node_attach(struct cidr_tree *t, uint32_t ni, uint32_t id)
{
	struct node *n = &t->nodes[ni];
	uint32_t ei = (uint32_t)t->nids++;

	t->ids[ei].id = id;
	t->ids[ei].next = NIL;
	if (n->ids_head == NIL) {
		n->ids_head = ei;
		t->nprefixes++;
	} else
		t->ids[n->ids_tail].next = ei;
	n->ids_tail = ei;
}

struct cidr_tree *
cidr_tree_new(void)
{
	static const uint8_t zero[16];
	struct cidr_tree *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	if (pool_reserve((void **)&t->nodes, &t->capnodes, 0, 2,
	    sizeof(*t->nodes)) != 0) {
		free(t);
		return NULL;
	}
	t->root[0] = node_take(t, zero, 0);
	t->root[1] = node_take(t, zero, 0);
	return t;
}

void
cidr_tree_free(struct cidr_tree *t)
{
	if (t == NULL)
		return;
	free(t->nodes);
	free(t->ids);
	free(t);
}

/*
 * Links a new node for key/plen below node cur, which covers it and has
 * no node of that exact prefix.  Returns the new node; the caller
 * reserved room for two nodes.
 */
static uint32_t
insert_below(struct cidr_tree *t, uint32_t cur, const uint8_t *key,
    unsigned plen)
{
	unsigned bit, common;
	uint32_t child, leaf, glue;

	for (;;) {
		bit = key_bit(key, t->nodes[cur].plen);
		child = t->nodes[cur].child[bit];
		if (child == NIL) {
			leaf = node_take(t, key, plen);
			t->nodes[cur].child[bit] = leaf;
			return leaf;
		}
		common = common_len(key, t->nodes[child].key,
		    plen < t->nodes[child].plen ? plen : t->nodes[child].plen);
		if (common == t->nodes[child].plen) {
			if (common == plen)
				return child;	/* already there */
			cur = child;		/* it covers us: descend */
			continue;
		}
		leaf = node_take(t, key, plen);
		if (common == plen) {
			/* We cover the child: slot in above it. */
			t->nodes[leaf].child[key_bit(t->nodes[child].key,
			    plen)] = child;
			t->nodes[cur].child[bit] = leaf;
			return leaf;
		}
		/* We diverge from the child: branch at the shared prefix. */
		glue = node_take(t, key, common);
		t->nodes[glue].child[key_bit(key, common)] = leaf;
		t->nodes[glue].child[key_bit(t->nodes[child].key,
		    common)] = child;
		t->nodes[cur].child[bit] = glue;
		return leaf;
	}
}

int
cidr_tree_add(struct cidr_tree *t, const struct sl_addr *prefix,
    unsigned plen, uint32_t id)
{
	struct sl_addr p;
	uint32_t root, ni;
	unsigned maxbits;
	int r;

	if (t == NULL || prefix == NULL ||
	    (prefix->family != AF_INET && prefix->family != AF_INET6))
		return SL_ERR_INVALID;
	maxbits = prefix->family == AF_INET ? 32 : 128;
	if (plen > maxbits || !host_bits_zero(prefix->bytes, plen, maxbits))
		return SL_ERR_INVALID;
	/*
	 * Lookups see canonical addresses, so "::ffff:10.0.0.0/104" must sit
	 * in the IPv4 tree as 10.0.0.0/8 or it would never match.
	 */
	if ((r = addr_canonical_prefix(prefix, plen, &p, &plen)) != 0)
		return r;
	/* Reserve first, so nothing below can fail half-way through. */
	if ((r = pool_reserve((void **)&t->nodes, &t->capnodes, t->nnodes, 2,
	    sizeof(*t->nodes))) != 0 ||
	    (r = pool_reserve((void **)&t->ids, &t->capids, t->nids, 1,
	    sizeof(*t->ids))) != 0)
		return r;
	root = t->root[p.family == AF_INET ? 0 : 1];
	ni = plen == 0 ? root : insert_below(t, root, p.bytes, plen);
	node_attach(t, ni, id);
	return 0;
}

int
cidr_tree_walk(const struct cidr_tree *t, const struct sl_addr *addr,
    cidr_visit_fn fn, void *arg)
{
	const struct node *n;
	struct sl_addr a;
	uint32_t ni, ei;
	unsigned maxbits;
	int r;

	if (t == NULL || addr == NULL ||
	    (addr->family != AF_INET && addr->family != AF_INET6))
		return 0;
	/* Cheap and idempotent: a caller that forgot cannot slip past. */
	addr_canonical(addr, &a);
	maxbits = a.family == AF_INET ? 32 : 128;
	for (ni = t->root[a.family == AF_INET ? 0 : 1]; ni != NIL;) {
		n = &t->nodes[ni];
		/* A compressed edge skips bits: check them all. */
		if (!prefix_equal(n->key, a.bytes, n->plen))
			break;
		for (ei = n->ids_head; ei != NIL; ei = t->ids[ei].next)
			if ((r = fn(t->ids[ei].id, arg)) != 0)
				return r;
		if (n->plen >= maxbits)
			break;
		ni = n->child[key_bit(a.bytes, n->plen)];
	}
	return 0;
}

size_t
cidr_tree_count(const struct cidr_tree *t)
{
	return t == NULL ? 0 : t->nprefixes;
}
