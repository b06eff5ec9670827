/*
 * fuzz_world.h: the world fuzz_icpt and fuzz_h2 run a real struct conn
 * in, as tests/unit/test_relay.c does: a struct loop of our own (no
 * worker, no daemon, no audit trail: records are dropped) and, made once
 * at start,
 *  - a CA (the loop's tls_up verifies the upstream against it) and its
 *    leaf for HOST, served by the upstream's TLS server on 127.77.X.Y:443;
 *  - a secret store holding "tok", a header secret, and "aws", AWS
 *    credentials, both bound to HOST and AUTH;
 *  - two policies (their texts are in fuzz_world.c): pol[0] inject-only,
 *    no pass rule, and pol[1] with inject, pass and deny rules;
 *  - the sandbox "fuzz" and its placeholder of "tok";
 *  - pol[0]'s token "svc", in the token table as if minted: no request
 *    starts a mint (there is no resolver, no endpoint), world_end checks.
 * Then, for each input, the upstream connections sluice opens (struct
 * upc), served by the fuzzer, and the end of the input.
 *
 * Whatever should not fail is CHECKed (fuzz_check.h): a failure aborts.
 */
#ifndef SLUICE_FUZZ_WORLD_H
#define SLUICE_FUZZ_WORLD_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "conf/config.h"
#include "keys/placeholder.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"

#define UP_PORT		443
#define HOST		"api.example.com"
#define AUTH		"auth.example.com"	/* the token endpoint */
#define UP_KEEP		(64u * 1024)	/* of what an upstream gets, kept */
#define MAX_TURNS	48	/* turns to let the conn end by itself */

/* What lives for the whole run: written once by world_init. */
struct world {
	const char	*name;		/* the fuzzer's, in its messages */
	char		 dir[64];	/* keys and CA, gone after world_init */
	struct event_base *base;
	struct config	 cfg;
	struct loop	 l;
	struct policy	*pol[2];	/* inject-only, mixed */
	struct state	*st;
	struct secret_store *store;
	struct secret	*secret;	/* "tok", the injected one */
	struct mtoken	*token;		/* the inject-only policy's, minted */
	char		 ph[PH_LEN + 1];	/* the sandbox's placeholder */
	struct sb_counter *counter;
	struct sandbox	 sb;
	SSL_CTX		*srv;		/* the upstream's server context */
	int		 lfd;		/* the upstream's listener */
	char		 up_addr[INET_ADDRSTRLEN];	/* its address */
	int		 debug;		/* ENV_DEBUG set */
	int		 no_secret_check;	/* ENV_NO_SECRET_CHECK set */
	int		 skip;		/* port 443 is not ours to bind */
};

/* An upstream connection, as sluice opened it and the fuzzer serves it. */
struct upc {
	int		 fd;		/* -1: none */
	SSL		*ssl;
	int		 ready;		/* handshake done */
	uint8_t		*got;		/* what it received (UP_KEEP bytes) */
	size_t		 len, echo_at;
	uint8_t		*tx;		/* for it to send */
	size_t		 tx_len, tx_cap;
};

/*
 * Makes w, all but its listener; name tags the log and messages, ENV_DEBUG
 * and ENV_NO_SECRET_CHECK (env is the prefix, "FUZZ_ICPT") set w->debug
 * and w->no_secret_check; alpn is a line the policies get after their
 * name ("alpn: [h2]\n"), "" for none.  Ignores SIGPIPE.
 */
void	world_init(struct world *w, const char *name, const char *env,
	    const char *alpn);

/*
 * The upstream's listener, on UP_PORT of one of 127.77/16 a process.
 * Returns 0, or -1 with w->skip set when the port cannot be bound (not
 * root): the fuzzer says it tests nothing.
 */
int	world_listen(struct world *w, int backlog);

/* An input's upstream pool, made by world_begin and freed by world_end. */
void	world_begin(struct world *w);

/*
 * A conn on fd from 10.0.0.2:40000 to the upstream's address, port
 * dst_port, as conn_accept and the sniffer leave it (proto, and
 * peek[0..len) read), under w->pol[policy].  The decision and
 * icpt_start are the caller's.
 */
struct conn *world_conn(struct world *w, int fd, int policy, int proto,
	    uint16_t dst_port, const uint8_t *peek, size_t len);

/* Whether a conn is open. */
int	world_alive(const struct world *w);

/*
 * The end of an input, both peers gone: the conn ends by itself within
 * MAX_TURNS turns (else conn_close: it waits on a timer), the deferred
 * frees run, no request started a mint, and the upstream pool goes.
 * turn(arg) is one of the harness's turns.
 */
void	world_end(struct world *w, void (*turn)(void *), void *arg);

/*
 * Aborts when p[0..n) holds the injected secret, a form of it or of the
 * minted token: it reached the sandbox (in where).
 */
void	world_check_leak(const struct world *w, const uint8_t *p, size_t n,
	    const char *where);

/* u is fd, accepted from w's listener; what u held is done with. */
void	upc_take(const struct world *w, struct upc *u, int fd, int tickets);

/* Shakes hands, reads what came (when reading) and writes what waits. */
void	upc_serve(struct upc *u, int reading);

/* Closes u, with a reset (SO_LINGER 0) or not; what it was to send goes. */
void	upc_drop(struct upc *u, int reset);

/* Queues p[0..n) for u to send, if u is open. */
void	upc_send(struct upc *u, const void *p, size_t n);

/* u sends back up to n more bytes of what it got. */
void	upc_echo(struct upc *u, size_t n);

void	nonblock(int fd);

/* Appends p[0..n) to the buffer *b of *len bytes, *cap allocated. */
void	buf_add(uint8_t **b, size_t *len, size_t *cap, const void *p,
	    size_t n);

#endif
