/* icpt.h: an intercepted connection, from the sandbox's TLS to the upstream's. */
#ifndef SLUICE_ICPT_H
#define SLUICE_ICPT_H

#include <stdint.h>

struct conn;
struct icpt;

/*
 * Takes over c, whose verdict is INTERCEPT and whose name owns its
 * address: terminates the sandbox's TLS with a leaf of the sandbox's CA
 * (its ClientHello is in c->peek), judges every request by the policy's
 * intercept rules, and sends the allowed ones over verified TLS to the
 * upstream.  c's state becomes CS_ICPT; the sandbox's socket belongs to
 * the interception from here on.  On failure c is refused or closed.
 */
void	icpt_start(struct conn *c);
/*
 * The connection ends (conn_close only): answers never completed get
 * their record, an upstream between requests goes to the pool, and no
 * callback of the interception runs again.  Its memory stays until
 * icpt_free, on the next loop turn, so a caller still on the stack reads
 * nothing freed.
 */
void	icpt_close(struct icpt *ic);
/* Frees everything of the interception; accepts NULL. */
void	icpt_free(struct icpt *ic);
/* Bytes read from the sandbox and from the upstream, for the conn record. */
void	icpt_bytes(const struct icpt *ic, uint64_t *from_sandbox,
	    uint64_t *from_upstream);
/* The connection's timer fired: idle or handshake timeout. */
void	icpt_timer(struct conn *c);
/*
 * Audit records up to ticket durable are on disk: a request held for its
 * record goes upstream; failed: the trail cannot be written, and a held
 * request is refused.  May close the connection.
 */
void	icpt_audit_durable(struct icpt *ic, uint64_t durable, int failed);
/* The worker drains: an HTTP/2 session says GOAWAY (conn_drain). */
void	icpt_drain(struct icpt *ic);

#endif
