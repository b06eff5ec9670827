/*
 * minter.h: a worker's mints -- the HTTPS client that asks a token
 * endpoint (conf/tokensrc.h) for a token on a sandbox's behalf, and puts
 * what it got, or why it got none, into the shared table
 * (loop/mintcache.h), which wakes the requests that wait for it.
 *
 * A mint resolves the endpoint's name with the worker's resolver, takes
 * the first address the sandbox's policy lets it reach (the same
 * judgement as a connection of the sandbox's to that name: forbidden,
 * denied and private addresses stay out), connects over TLS verified
 * against the source's upstream_ca (else sluiced.yaml's), sends the
 * request keys/mint.c builds (from guarded memory, never copied into the
 * heap), and reads one answer of at most MINT_ANSWER_MAX body bytes.  It
 * ends within MINTER_DEADLINE_MS whatever the endpoint does, and always
 * with mintcache_done(), so no request waits longer.  Each mint writes a
 * "token_mint" audit record (result, the token's fingerprint and expiry,
 * or the reason) and counts in sluice_token_mints_total.
 */
#ifndef SLUICE_MINTER_H
#define SLUICE_MINTER_H

#include "conf/tokensrc.h"

struct loop;
struct policy;
struct secret;

#define MINTER_DEADLINE_MS	10000

/* Who a mint is for: the key of the table, and what its record says. */
struct minter_for {
	const char	*key;		/* mintcache key */
	const char	*sandbox;	/* its id; NULL: none */
	const char	*policy;	/* the policy's name */
	struct policy	*pol;		/* a reference is taken: src is in it */
	const struct mint_source *src;
	const struct secret *secret;	/* a reference is taken */
};

/*
 * Starts a mint on l (the caller was told MINT_START or
 * MINT_HAVE_REFRESH).  Whatever happens, the mint ends with
 * mintcache_done(): at once, when it cannot start.
 */
void	minter_start(struct loop *l, const struct minter_for *f);
/* Ends every mint of l (failed: "shutting down"); before l's base goes. */
void	minter_stop_all(struct loop *l);

#endif
