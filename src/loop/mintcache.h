/*
 * mintcache.h: minted tokens (keys/mint.h), shared by every worker: one
 * table under one mutex, a token a key (the sandbox, the policy and
 * revision, the source), so that a token is minted once however many
 * requests want it at once (single flight), used until shortly before it
 * expires, and minted again early, in the background, while the old one
 * still serves.  A failed mint is remembered for MINT_FAIL_HOLD_S: the
 * requests of those seconds are refused at once rather than each
 * hammering the endpoint.
 *
 * A request that must wait leaves a waiter; it is woken (wake(arg),
 * called with the table's mutex held: it must only schedule work, as
 * event_active does) when the mint ends, and asks again.  A waiter that
 * goes first cancels itself.  Whoever is told to mint must call done()
 * whatever becomes of the request that asked (its mint has a deadline of
 * its own): until then the key's requests wait.
 */
#ifndef SLUICE_MINTCACHE_H
#define SLUICE_MINTCACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/redact.h"

#define MINT_MAX_ENTRIES	4096	/* tokens the table keeps at most; past
					 * it the one asked for least lately goes */
#define MINT_MAX_KEEP_S		86400	/* a token is kept a day at most */
#define MINT_KEY_MAX		512
#define MINT_FAIL_HOLD_S	5
#define MINT_SKEW_S		10	/* not used within this of its expiry */
#define MINT_EARLY_MIN_S	30	/* minted again at least this early, but
					 * never in the first half of the usable
					 * life (before expiry less the skew) */
#define MINT_WHY_MAX		160

/* A minted token, shared by the requests that carry it. */
struct mtoken {
	atomic_uint	 refs;
	uint8_t		*mem;		/* guarded: the token, a NUL, its forms */
	const char	*value;
	size_t		 len;
	struct redact_pat pats[REDACT_MAX_FORMS];	/* for the redactor */
	size_t		 npats;
	uint64_t	 pats_key;	/* their name: redact_serial() */
	char		 fp[17];	/* BLAKE2b, 8 bytes in hex: for the audit */
	int64_t		 minted_at, expires_at;	/* unix seconds */
};

/* A token of value[0..len); NULL when guarded memory is short. */
struct mtoken *mtoken_new(const char *value, size_t len, int64_t now,
	    int64_t expires_at);
struct mtoken *mtoken_ref(struct mtoken *t);
void	mtoken_unref(struct mtoken *t);		/* wipes on the last; accepts NULL */

struct mint_waiter {
	struct mint_waiter *next, **prevp;	/* prevp NULL: not queued */
	void		(*wake)(void *arg);
	void		*arg;
};

enum mint_look {
	MINT_HAVE,		/* *tok is a reference to a good token */
	MINT_HAVE_REFRESH,	/* the same, and the caller mints anew (done()) */
	MINT_WAIT,		/* w waits for the mint under way */
	MINT_START,		/* w waits, and the caller mints (done()) */
	MINT_FAILED,		/* why says: the last mint failed, or no room */
};

struct mintcache *mintcache_new(void);
void	mintcache_free(struct mintcache *mc);	/* accepts NULL; no waiter left */

/* Looks key up at now (unix seconds); see enum mint_look. */
enum mint_look mintcache_get(struct mintcache *mc, const char *key,
	    int64_t now, struct mint_waiter *w, struct mtoken **tok,
	    char why[MINT_WHY_MAX]);
/*
 * The mint of key that get asked for ended: with tok (its reference is
 * taken over) or, NULL, failed for why.  Every waiter is woken.
 */
void	mintcache_done(struct mintcache *mc, const char *key,
	    struct mtoken *tok, const char *why, int64_t now);
/* What the table holds for one key, as an operator sees it. */
struct mint_info {
	const char	*key;
	int		 minting;	/* a mint is under way */
	size_t		 waiters;	/* requests waiting for it */
	const char	*fp;		/* the token's; NULL: none */
	int64_t		 minted_at, expires_at;	/* with fp */
	int64_t		 failed_until;	/* 0: the last mint did not fail */
	const char	*why;		/* with failed_until */
};

/*
 * Calls cb for every entry at now, the table locked (cb must be quick and
 * take no lock of ours); info's strings live for the call only.
 */
void	mintcache_each(struct mintcache *mc, int64_t now,
	    void (*cb)(void *arg, const struct mint_info *info), void *arg);

/*
 * Drops every token whose key starts with prefix (a sandbox that went),
 * wiped; one being minted is not kept when its mint ends.
 */
void	mintcache_forget(struct mintcache *mc, const char *prefix);

/* Whether w waits (is queued). */
int	mintcache_waiting(struct mintcache *mc, const struct mint_waiter *w);
/* w waits no more (does nothing when it is not queued). */
void	mintcache_cancel(struct mintcache *mc, struct mint_waiter *w);

#endif
