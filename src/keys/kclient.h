/*
 * kclient.h: the worker process's side of kproto.h.  Once kclient_start
 * has run, the process holds no gateway, CA or signing key: ca.h's CAs
 * are handles whose leaves the keys process mints, sealed secrets are
 * opened there, and loading a key here is refused.
 *
 * A call is synchronous: one request, its answer.  Each thread that
 * calls binds its own channel (kclient_bind); a thread without one uses
 * the control channel, which a mutex keeps to one call at a time.
 */
#ifndef SLUICE_KCLIENT_H
#define SLUICE_KCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "keys/kproto.h"

struct kchan;
struct sealed_secret;

#define KCLIENT_TIMEOUT_MS	10000	/* an answer that takes longer: the keys process is stuck */

/* A channel over fd (taken) whose requests are role's; NULL: no memory. */
struct kchan *kchan_new(int fd, unsigned role);
void	kchan_free(struct kchan *k);	/* closes its fd; accepts NULL */

/* Remote mode from now on, with ctl as the control channel (kept). */
void	kclient_start(struct kchan *ctl);
/* The control channel is about to go: later calls fail (still remote). */
void	kclient_stop(void);
/* Whether this process is in remote mode. */
int	kclient_remote(void);
/* The calling thread's channel (NULL: the control channel). */
void	kclient_bind(struct kchan *k);

/*
 * One call: request type with req[0..len); the answer's fields into
 * ans[0..cap) (*anslen).  0; the keys process's refusal as its SL_ERR_*
 * with why; or SL_ERR_IO when the keys process cannot be reached (why
 * says so).  ans may be guarded memory: the call copies nothing
 * elsewhere.
 */
int	kclient_call(uint32_t type, const void *req, size_t len, void *ans,
	    size_t cap, size_t *anslen, char why[KPROTO_WHY_MAX]);

/* The requests that only the start sends. */
int	kclient_hello(char why[KPROTO_WHY_MAX]);
int	kclient_ready(char why[KPROTO_WHY_MAX]);
/* The fingerprint and placeholder keys, 32 bytes each, into guarded memory. */
int	kclient_store_keys(uint8_t *fpkey, uint8_t *phkey,
	    char why[KPROTO_WHY_MAX]);
/* Opens a sealed blob there, into a new sealed_secret here. */
int	kclient_sealed_open(const uint8_t *blob, size_t len,
	    struct sealed_secret **out, char why[KPROTO_WHY_MAX]);

#ifdef SLUICE_TEST_HOOKS
/* Sends a request outside the table on the control channel (tests). */
int	kclient_test_violation(void);
#endif

#endif
