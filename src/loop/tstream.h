/*
 * tstream.h: one socket of an intercepted connection, TLS or plain, with
 * a buffer each way: what interception reads and writes through.
 *
 * SSL sits right on the socket, through a BIO of ours (a few bytes read
 * already come first, then recv and send), so a record costs one system
 * call and decrypted bytes land in the input buffer with no layer
 * between.  Reading is one persistent event, added once and removed only
 * while the owner stops reading; bytes the owner queues are written once
 * the loop turn's callbacks have run (a turn's bytes go in as few records
 * as fit), and writing waits on the socket only when the kernel's buffer
 * is full.  So a request and its answer change nothing in epoll.
 *
 * Callbacks (read: input grew; write: queued bytes went and at most the
 * low mark are left; event: the flags below) run from the loop, never
 * from inside a call of the owner's.  The owner frees a stream on a later
 * loop turn than one of its callbacks, or after tstream_quiet().
 */
#ifndef SLUICE_TSTREAM_H
#define SLUICE_TSTREAM_H

#include <stddef.h>
#include <sys/socket.h>

struct event_base;
struct evbuffer;
struct ssl_st;
struct tstream;

enum tstream_role {
	TSTREAM_PLAIN,		/* no TLS */
	TSTREAM_ACCEPT,		/* the TLS server */
	TSTREAM_CONNECT,	/* the TLS client */
	TSTREAM_PIPE,		/* no socket: another part of sluice is the peer */
};

/* The event callback's flags (as many as apply). */
#define TSTREAM_READING		0x01	/* it happened while reading */
#define TSTREAM_WRITING		0x02	/* ... while writing */
#define TSTREAM_EOF		0x10	/* the peer's end (see tstream_new) */
#define TSTREAM_ERROR		0x20
#define TSTREAM_TIMEOUT		0x40
#define TSTREAM_CONNECTED	0x80	/* connected, the handshake done */

typedef void	(*tstream_cb)(struct tstream *ts, void *arg);
typedef void	(*tstream_event_cb)(struct tstream *ts, short what, void *arg);

/*
 * A stream on fd (non-blocking; -1: tstream_connect makes it) with ssl (NULL for
 * TSTREAM_PLAIN; its BIO is set here).  The stream owns both from here on,
 * on failure too; NULL when out of memory.  A TLS peer's end without its
 * close_notify is TSTREAM_EOF for TSTREAM_ACCEPT (sandboxes do that) and
 * TSTREAM_EOF | TSTREAM_ERROR for TSTREAM_CONNECT (an upstream's answer
 * cut short must not look whole).  Nothing happens before tstream_start.
 */
struct tstream *tstream_new(struct event_base *base, int fd,
	    struct ssl_st *ssl, enum tstream_role role);
/*
 * Bytes read from the socket already: they come before any more of it
 * (TLS: into the handshake; plain: they are in the input at once, for the
 * owner to look at after tstream_start, no read callback).  Once, before
 * tstream_start.  0, or -1 (out of memory, or called again).
 */
int	tstream_prefix(struct tstream *ts, const void *p, size_t len);
/*
 * Connects a stream made with fd -1 (TCP_NODELAY: a request must not wait
 * for the peer's delayed ACK); TSTREAM_CONNECTED follows the handshake.
 * 0, or -1 with errno.  Starts the stream.
 */
int	tstream_connect(struct tstream *ts, const struct sockaddr *sa,
	    socklen_t len);
/* Starts a stream made on a socket: the handshake, or reading. */
void	tstream_start(struct tstream *ts);

void	tstream_setcb(struct tstream *ts, tstream_cb readcb,
	    tstream_cb writecb, tstream_event_cb eventcb, void *arg);
/* Reads on (the default once started) or off. */
void	tstream_read(struct tstream *ts, int on);
int	tstream_reading(const struct tstream *ts);
/*
 * TSTREAM_TIMEOUT after ms without progress while something was awaited
 * (connecting, the handshake, reading while on, writing while bytes are
 * queued); 0 turns it off.  It fires once; set it again to go on.
 */
void	tstream_set_timeout(struct tstream *ts, unsigned ms);
/* The write callback's mark (default 0). */
void	tstream_set_wlow(struct tstream *ts, size_t lowat);

struct evbuffer *tstream_input(struct tstream *ts);
/* Bytes added here are written (sent as TLS records when TLS). */
struct evbuffer *tstream_output(struct tstream *ts);
/* What the kernel has not taken yet (a close_notify owed counts one). */
size_t	tstream_queued(const struct tstream *ts);
/* After what is queued: the TLS close_notify (nothing for plain). */
void	tstream_close_notify(struct tstream *ts);

struct ssl_st *tstream_ssl(const struct tstream *ts);
int	tstream_fd(const struct tstream *ts);
/* The OpenSSL error of the failure reported, or 0. */
unsigned long tstream_ssl_error(const struct tstream *ts);

/*
 * A pipe: a stream whose peer is code of ours, not a socket (an HTTP/2
 * stream seen as an HTTP/1.1 connection).  The owner uses it as any
 * stream; the peer adds to its input (then tstream_pipe_pushed), takes
 * from its output (then tstream_pipe_drained), and is woken by wake(arg),
 * on the loop, when the output grew or the owner asked for the end
 * (tstream_close_notify: tstream_pipe_closing, and once the output is
 * empty and the peer drained it, nothing is queued).  tstream_pipe_end
 * gives the owner TSTREAM_EOF or TSTREAM_ERROR.  The owner's callbacks
 * run on the loop, never from these calls.  NULL when out of memory.
 */
struct tstream *tstream_pipe_new(struct event_base *base,
	    void (*wake)(void *), void (*gone)(void *), void *arg);
void	tstream_pipe_pushed(struct tstream *ts);
void	tstream_pipe_drained(struct tstream *ts);
void	tstream_pipe_end(struct tstream *ts, short what);
int	tstream_pipe_closing(const struct tstream *ts);
/*
 * gone(arg) (may be NULL) runs once, from tstream_quiet or tstream_free,
 * when the owner is done with the pipe: the peer drops it then.  A peer
 * done first calls tstream_pipe_detach: no wake nor gone any more.
 * tstream_pipe_ssl lends the pipe the SSL of the peer's own connection,
 * for tstream_ssl (a pipe never frees it).
 */
void	tstream_pipe_detach(struct tstream *ts);
void	tstream_pipe_ssl(struct tstream *ts, struct ssl_st *ssl);

/* No callback and no I/O any more (freeing is still the owner's). */
void	tstream_quiet(struct tstream *ts);
/* Closes the socket, frees the SSL and the buffers; accepts NULL. */
void	tstream_free(struct tstream *ts);
/*
 * From now on the output is wiped as it goes out (and what is left when
 * the stream is freed): for a stream that carries credentials (an
 * upstream of interception).  It costs a copy of what is written.
 */
void	tstream_wipe(struct tstream *ts);

#endif
