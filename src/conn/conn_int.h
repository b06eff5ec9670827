/*
 * conn_int.h: what the files of a connection's life share (conn.c,
 * conn_http.c, conn_proxy.c, relay.c, deny.c and the interception):
 * states, steps, the decision, peeking and resolving.  Not for other
 * folders: they have conn.h.
 */
#ifndef SLUICE_CONN_INT_H
#define SLUICE_CONN_INT_H

#include <stddef.h>

#include "conn/conn.h"

struct http_head;
struct resolve_answer;

/*
 * A new connection of l on fd (its down half), in no state yet; fd is
 * closed on failure (NULL).  conn_accept's first step.
 */
struct conn *conn_new(struct loop *l, int fd, enum listener_kind kind);
void	conn_set_state(struct conn *c, enum conn_state s);
void	conn_arm_timer(struct conn *c, unsigned ms);
/*
 * A head after the first began (its first byte came): it must be whole
 * within timeouts.handshake from now, however slowly its bytes come
 * (each resets the idle limit, not this).  The caller sets
 * c->head_deadline to 0 once the head is whole.
 */
void	conn_head_started(struct conn *c);
/* Milliseconds until the idle limit or the head deadline, whichever is first. */
unsigned conn_next_wake(const struct conn *c, uint64_t now);
void	conn_step(struct conn *c);
void	conn_deny(struct conn *c, const char *reason, const char *rule);
void	conn_decided(struct conn *c);
/*
 * Step 2 for c->dst, the address alone (the gateway's own addresses,
 * forbidden ones, egress.deny CIDRs): 1 after refusing c, else 0 with
 * c->dec CONTINUE.
 */
int	conn_dest_refused(struct conn *c);
/* Takes the worker's current snapshot for a decision about to be made. */
void	conn_take_state(struct conn *c);
int	conn_half_init(struct conn *c, struct half *h, int fd);
void	conn_proceed(struct conn *c);
int	conn_peek_read(struct conn *c, size_t cap);
void	conn_resolve(struct conn *c, const char *name);
void	conn_http_first(struct conn *c);
int	conn_peek_feed(struct conn *c, const struct http_head **h,
	    const char **reason);
void	conn_http_init_relay(struct conn *c);
void	conn_http_read(struct conn *c);
void	conn_http_allowed(struct conn *c);
void	conn_http_audit(struct conn *c, const char *action,
	    const char *reason, const char *rule);
/*
 * A plain-HTTP head that carries a placeholder of the sandbox: refused
 * (403 placeholder-elsewhere, a placeholder_elsewhere record), 1; else 0.
 */
int	conn_http_placeholder(struct conn *c, const struct http_head *h);
/* The placeholder_elsewhere record (icpt_ph.c). */
struct secret;
void	conn_ph_audit(struct conn *c, const char *path, const char *rule,
	    const struct secret *s, const char *where);
void	conn_proxy_read_head(struct conn *c);
void	conn_proxy_resolved(struct conn *c, int err,
	    const struct resolve_answer *ans);

#endif
