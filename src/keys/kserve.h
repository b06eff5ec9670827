/*
 * kserve.h: what the keys process does with a request (kproto.h).  It
 * holds the gateway keys (and the keys derived from them) and every
 * sandbox's CA key; it opens sealed secrets, keeps and seals CAs and
 * mints leaves, and nothing else.  No I/O here: the caller reads a
 * request off a channel, hands it over, and sends the answer back.
 * Single-threaded.
 */
#ifndef SLUICE_KSERVE_H
#define SLUICE_KSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "util/chan.h"
#include "util/err.h"
#include "keys/kproto.h"

struct config;
struct kserve;

#define KSERVE_CAS_MAX	65536	/* CAs kept at once */

/*
 * Loads cfg's gateway keys (none configured: secrets are off).  0, or
 * SL_ERR_INVALID with errs.  Requires sodium_init().
 */
int	kserve_new(const struct config *cfg, struct kserve **out,
	    struct errlist *errs);
/* Wipes every key and CA; accepts NULL. */
void	kserve_free(struct kserve *ks);
/* The phase requests are admitted in (READY moves it on). */
enum kproto_phase kserve_phase(const struct kserve *ks);
/* How many CAs it keeps. */
size_t	kserve_cas(const struct kserve *ks);

/*
 * Serves one request h (payload p) from a channel of role.  The answer's
 * type and payload go to *type and ans[0..*len) (ans: CHAN_MSG_MAX bytes
 * that the caller wipes once sent, since an opened secret's value is in
 * them); returns 0.  A request the table does not admit, or whose fields
 * do not read, returns -1 with *why: there is no answer, and the sender
 * is to be ended.
 */
int	kserve_handle(struct kserve *ks, unsigned role,
	    const struct chan_hdr *h, const uint8_t *p, uint32_t *type,
	    uint8_t *ans, size_t *len, const char **why);

#endif
