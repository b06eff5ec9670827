/*
 * aserve.h: the keys process's side of a remote audit trail (audit.h's
 * chan): the AUDIT_* requests of kproto.h against the writer it owns,
 * which holds the chain, the file and the checkpoint key.  Records come
 * as the worker built them and are checked before they are queued: one
 * line of printable ASCII each, a "type" that is not one the writer
 * alone writes (checkpoint, start, upgrade, file_start), no "seq",
 * "prev" or "hash" of their own.  A record that fails is a request the
 * table does not admit: the worker is ended.
 */
#ifndef SLUICE_ASERVE_H
#define SLUICE_ASERVE_H

#include <stddef.h>
#include <stdint.h>

#include "util/chan.h"

struct audit;
struct aflat;

#define ASERVE_WAIT_MS	8000	/* for a round to be durable (kclient waits 10 s) */

/*
 * Serves h (payload p, admitted by kproto_admit) with a; the answer's
 * type and fields into *type, ans[0..*len) (CHAN_MSG_MAX bytes).  0, or
 * -1 with *why when the request is malformed (no answer: end the sender).
 */
int	aserve_handle(struct audit *a, const struct chan_hdr *h,
	    const uint8_t *p, uint32_t *type, uint8_t *ans, size_t *len,
	    const char **why);
/*
 * Whether f is a record a worker may send (see above): 0, or -1 with
 * *why.  For tests and the fuzzer too.
 */
int	aserve_check_flat(const struct aflat *f, const char **why);

#endif
