/* cidr.h: a prefix tree of IPv4 and IPv6 prefixes, each carrying rule ids. */
#ifndef SLUICE_CIDR_H
#define SLUICE_CIDR_H

#include <stdint.h>

#include "util/addr.h"

struct cidr_tree;

struct cidr_tree *cidr_tree_new(void);
void	cidr_tree_free(struct cidr_tree *t);	/* accepts NULL */

/*
 * Adds prefix/plen (plen <= 32 or 128, host bits zero) carrying id.  One
 * prefix may carry several ids.  An IPv6 prefix inside an IPv4-embedding
 * range is stored as its IPv4 prefix (see addr_canonical_prefix), and one
 * that cannot be expressed so is refused.  Not thread-safe: build the
 * tree, then share it.  Returns 0, SL_ERR_INVALID (and the tree is
 * unchanged) or SL_ERR_NOMEM.
 */
int	cidr_tree_add(struct cidr_tree *t, const struct sl_addr *prefix,
	    unsigned plen, uint32_t id);

/*
 * Calls fn for every id whose prefix covers addr (canonicalised here
 * again, so a forgotten addr_canonical does no harm), shortest
 * prefix first and, on one prefix, in the order added.  Stops at the first
 * nonzero return of fn and returns it; 0 when fn never stopped the walk.
 * Lookups are read-only: any number of threads may walk one tree.
 */
typedef int (*cidr_visit_fn)(uint32_t id, void *arg);
int	cidr_tree_walk(const struct cidr_tree *t, const struct sl_addr *addr,
	    cidr_visit_fn fn, void *arg);

/* Number of distinct prefixes held (for tests and metrics). */
size_t	cidr_tree_count(const struct cidr_tree *t);

#endif
