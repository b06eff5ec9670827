/* dnsmem.h: which addresses the DNS filter gave each sandbox for each name. */
#ifndef SLUICE_DNSMEM_H
#define SLUICE_DNSMEM_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/addr.h"

/*
 * Shared by every worker: the DNS filter adds what it answered, the
 * firewall asks whether a sandbox was told that name has that address
 * (SPEC, decision 4).  Entries live for their TTL plus a grace; each
 * sandbox keeps at most max_per_sandbox of them, its own oldest evicted
 * first, so one sandbox cannot push out another's.  Each call takes one
 * shard's mutex for a hash lookup; nothing else.
 */
struct dnsmem;

struct dnsmem *dnsmem_new(size_t max_per_sandbox, unsigned grace_s);
void	dnsmem_free(struct dnsmem *m);		/* accepts NULL */

/*
 * Remembers that sandbox (its id; "" for sources no sandbox owns) was told
 * that name (normalised) has addr (canonical) for ttl seconds from now.
 */
void	dnsmem_add(struct dnsmem *m, const char *sandbox, const char *name,
	    const struct sl_addr *addr, uint32_t ttl, time_t now);
/* 1 if that answer is remembered and not expired, else 0. */
int	dnsmem_has(struct dnsmem *m, const char *sandbox, const char *name,
	    const struct sl_addr *addr, time_t now);
/* Forgets everything of one sandbox (deleted or re-registered). */
void	dnsmem_forget(struct dnsmem *m, const char *sandbox);
size_t	dnsmem_count(struct dnsmem *m);
/* Bytes one remembered answer takes, for the operator's arithmetic. */
size_t	dnsmem_entry_size(void);

#endif
