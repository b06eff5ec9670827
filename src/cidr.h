/* cidr.h: a prefix tree of IPv4 and IPv6 prefixes, each carrying rule ids. */
#ifndef SLUICE_CIDR_H
#define SLUICE_CIDR_H

#include <stdint.h>

#include "addr.h"

struct cidr_tree;

struct cidr_tree *cidr_tree_new(void);
void	cidr_tree_free(struct cidr_tree *t);	/* accepts NULL */

/*
 * Adds prefix/plen (a canonical address; plen <= 32 or 128) carrying id.
 * One prefix may carry several ids.  Returns 0, SL_ERR_INVALID or
 * SL_ERR_NOMEM.
 */
int	cidr_tree_add(struct cidr_tree *t, const struct sl_addr *prefix,
	    unsigned plen, uint32_t id);

/*
 * Calls fn for every id whose prefix covers addr (canonical), shortest
 * prefix first and, on one prefix, in the order added.  Stops at the first
 * nonzero return of fn and returns it; 0 when fn never stopped the walk.
 * Lookups are read-only: any number of threads may walk one tree.
 */
typedef int (*cidr_visit_fn)(uint32_t id, void *arg);
int	cidr_tree_walk(const struct cidr_tree *t, const struct sl_addr *addr,
	    cidr_visit_fn fn, void *arg);

/* Number of prefixes held (for tests and metrics). */
size_t	cidr_tree_count(const struct cidr_tree *t);

#endif
