/*
 * h2_int.h: what the parts of an HTTP/2 session share: the session and
 * its streams (h2.c) and the answers turned into frames (h2_answer.c).
 */
#ifndef SLUICE_H2_INT_H
#define SLUICE_H2_INT_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "parse/dechunk.h"
#include "parse/httphead.h"

struct event;
struct evbuffer;
struct icpt;
struct tstream;

/* Answer bytes held for the sandbox: one stream's, and all of a session's. */
#define H2_STREAM_OUT		(64u * 1024)
#define H2_CONN_OUT		(1024u * 1024)

struct h2_bucket {
	uint64_t	 at;		/* mono ms of the last refill; 0: full */
	unsigned	 tokens;
};

/* The request side of a stream. */
enum h2s_rq {
	H2Q_HEAD,	/* its head is being read */
	H2Q_BODY,	/* its icpt runs; DATA goes into its pipe */
	H2Q_ENDED,	/* END_STREAM came: nothing more from the sandbox */
};

/* The answer side of a stream. */
enum h2s_rs {
	H2R_WAIT,	/* no head yet from its icpt */
	H2R_BODY,	/* HEADERS submitted; DATA as it comes */
	H2R_DROP,	/* answered already (gRPC trailers-only): the rest is dropped */
	H2R_ENDED,	/* the whole answer is with nghttp2 */
	H2R_RESET,	/* reset: nothing more goes */
};

/* How the answer's body is framed in the pipe, as its head said. */
enum h2s_frame {
	H2F_LENGTH,	/* Content-Length bytes */
	H2F_CHUNKED,	/* chunked, maybe with trailers */
	H2F_CLOSE,	/* until its icpt closes the pipe */
};

struct h2s {
	struct h2	*h;
	struct h2s	*next;		/* h->live or h->dead */
	int32_t		 id;
	enum h2s_rq	 rq;
	enum h2s_rs	 rs;
	struct icpt	*ic;		/* from the end of its head */
	struct tstream	*pipe;		/* ic's down (ic owns it) */
	int		 ic_over;	/* its icpt ended (h2_stream_over) */
	int		 closed;	/* nghttp2 closed the stream */
	int		 grpc;		/* content-type application/grpc... */
	int		 chunked;	/* its body goes into the pipe chunked */
	int		 deferred;	/* nghttp2 waits for out */
	/* The head, while it is read. */
	struct evbuffer	*lines;		/* "name: value\r\n" */
	struct evbuffer	*rtrailers;	/* the request's trailer lines, likewise */
	struct evbuffer	*cookie;	/* the cookie crumbs, "; "-joined */
	char		 method[24];
	char		*path;
	char		 authority[HTTP_HOST_BUFSZ + 8];
	char		 host[HTTP_HOST_BUFSZ + 8];	/* a host header */
	size_t		 hsize;		/* the header list's size (RFC 9113 6.5.2) */
	int		 has_length;
	/* DATA bytes whose window was not given back yet. */
	size_t		 unconsumed;
	/* The answer, read back from the pipe (h2_answer.c). */
	enum h2s_frame	 frame;		/* its body's framing, once its head is read */
	uint64_t	 left;		/* H2F_LENGTH: bytes still to come */
	struct dechunk	 dc;		/* H2F_CHUNKED */
	struct evbuffer	*out;		/* body bytes for nghttp2 */
	struct evbuffer	*trailers;	/* its trailer section, as it came */
	struct evbuffer	*gather;	/* chunked: DATA not yet framed */
	uint64_t	 born;		/* mono ms of its first HEADERS */
};

struct h2 {
	struct icpt	*ic;		/* the connection's */
	nghttp2_session	*ng;
	struct h2s	*live;
	struct h2s	*dead;		/* freed on the next loop turn */
	struct event	*reap;
	unsigned	 nlive;
	size_t		 out;		/* every stream's out */
	int		 closed;	/* h2_close ran */
	int		 draining;	/* h2_drain sent GOAWAY */
	const char	*abuse;		/* why we sent ENHANCE_YOUR_CALM */
	int		 upstream_seen;	/* a stream's upstream was ready once */
	unsigned	 nstarting;	/* starting_count(), as of this step */
	struct h2_bucket ctrl, resets, ownrst, empty;
};

/* Resets a stream we can no longer answer (unless it is over). */
void	h2_stream_reset(struct h2s *s, uint32_t code);
/*
 * h2_answer.c: what the stream's icpt answered, moved from its pipe into
 * frames while the stream's and the session's bounds allow.
 */
void	h2_answer_pump(struct h2s *s);

#endif
