/* conn.h: one sandbox connection, from accept to close. */
#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/addr.h"
#include "parse/sniff.h"
#include "conf/policy.h"
#include "loop/half.h"
#include "loop/resolve.h"

struct event;
struct loop;
struct state;
struct sandbox;
struct http_reqs;
struct icpt;

enum listener_kind { LISTEN_TRANSPARENT, LISTEN_PROXY };

/* One state per connection, changed only by conn_set_state(). */
enum conn_state {
	CS_NEW,			/* accepted, not yet set up */
	CS_PROXY_HEAD,		/* proxy: reading the CONNECT or first request head */
	CS_SNIFF,		/* reading the first bytes (ClientHello, request head) */
	CS_RESOLVE,		/* checking that the name owns the address */
	CS_CONNECT,		/* connecting upstream */
	CS_RELAY,		/* passing bytes both ways */
	CS_ICPT,		/* intercepted: TLS ends here, requests judged (icpt.c) */
	CS_DENY,		/* flushing a refusal, then closing */
	CS_CLOSED,		/* waiting for the deferred free */
};

struct conn {
	TAILQ_ENTRY(conn) link;		/* in the worker's list */
	struct loop	*l;
	enum listener_kind kind;
	enum conn_state	 state;
	struct half	 down, up;
	struct event	*timer;
	struct timespec	 started;	/* monotonic */
	uint64_t	 judging_us;	/* first bytes complete (monotonic us) */
	int		 observed;	/* verdict latency recorded */
	uint64_t	 last_active;	/* monotonic milliseconds */
	uint64_t	 head_deadline;	/* a later head must be whole by then; 0: none */
	uint64_t	 wake_at;	/* the interception's own deadline; 0: none */

	struct sl_addr	 src, dst;	/* dst: the original destination */
	uint16_t	 src_port, dst_port;
	struct sl_addr	 updst;		/* where we connect */
	uint16_t	 upport;

	struct state	*st;		/* snapshot of the current decision (ref) */
	const struct sandbox *sb;
	const struct policy *pol;
	struct sb_counter *counter;	/* counted against its limit (ref) */

	uint8_t		*peek;		/* first bytes, replayed upstream */
	size_t		 peeklen, peekcap;
	int		 proto;		/* enum sniff_proto, or -1 */
	char		 name[NAME_BUFSZ + 2];	/* SNI or Host */
	struct tls_hello hello;
	struct decision	 dec;
	const char	*would_deny;	/* observe mode let a denial through */
	int		 observing;	/* its sandbox observed at the decision */
	struct resolve_req *rreq;
	int		 fresh_tried;	/* binding re-checked with a fresh lookup */
	int		 upstream_used;	/* connected upstream: audit says where */
	int		 late_sniff;	/* judged opaque in silence: check its first bytes */

	/* explicit proxy */
	char		 authority[NAME_BUFSZ + 2];
	uint16_t	 authority_port;
	int		 authority_is_ip;
	int		 tunnel;	/* CONNECT accepted: sniff inside */

	/* plain HTTP, judged request by request */
	struct http_reqs *http;
	uint8_t		*hbuf;		/* client bytes not yet forwarded */
	size_t		 hlen, hcap;
	size_t		 hparsed;	/* of hbuf (or peek), bytes the parser consumed */
	size_t		 hfwd;		/* of hbuf, bytes judged and ready to forward */
	int		 in_body;	/* between an allowed head and its end */
	int		 http_hold;	/* a request head awaits its decision */
	int		 in_pump;	/* the request loop is running (no recursion) */
	const struct http_head *head;	/* the head being judged (parser-owned) */
	unsigned	 nrequests;
	const char	*detail;	/* static: why a request was malformed */

	struct icpt	*icpt;		/* CS_ICPT: the interception */

	const char	*close_reason;
	char		 policy_name[64];
	uint64_t	 policy_rev;
};

/* Takes ownership of fd (accepted).  Closes it on any failure. */
void	conn_accept(struct loop *l, int fd, enum listener_kind kind);
/*
 * The only way out: writes the audit record, closes both sides and frees
 * the connection on the next loop turn.  Safe to call twice.
 */
void	conn_close(struct conn *c, const char *reason);
/* Re-judges an open connection after a policy swap; closes it if denied. */
void	conn_rejudge(struct conn *c);

/*
 * Audit records up to ticket durable are on disk (failed: the trail cannot
 * be written): a request of c held for its record goes on, or is refused.
 * May close c.
 */
void	conn_audit_durable(struct conn *c, uint64_t durable, int failed);

/*
 * The worker drains (no new connection is taken): an HTTP/2 connection
 * says GOAWAY (NO_ERROR) so that its client opens no new stream there;
 * the streams under way finish, and then it ends.
 */
void	conn_drain(struct conn *c);

#endif
