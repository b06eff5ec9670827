/*
 * h2.h: HTTP/2 from the sandbox on an intercepted connection (nghttp2).
 *
 * The session lives on the connection's icpt (state RQ_H2) and reads and
 * writes its TLS stream.  Each stream the sandbox opens is one request:
 * its head and body become an HTTP/1.1 request in a pipe (tstream.h),
 * read by an icpt of the stream's own, which judges, injects, forwards
 * and redacts it exactly as on an HTTP/1.1 connection; what that icpt
 * answers comes back through the pipe and goes out as the stream's
 * HEADERS and DATA.  A denied stream is answered alone; the others go on.
 *
 * Abuse (floods of resets, control frames or empty frames, resets we are
 * made to send, an oversized header list, a flood nghttp2 detects) ends
 * the connection with GOAWAY ENHANCE_YOUR_CALM and an h2_abuse record.
 */
#ifndef SLUICE_H2_H
#define SLUICE_H2_H

#include <stddef.h>
#include <stdint.h>

struct h2;
struct h2s;
struct icpt;

/* What a stream's icpt holds for one side before it stops reading the other. */
#define H2_STREAM_HIGH		(64u * 1024)
/* Concurrent streams a connection may open (SETTINGS_MAX_CONCURRENT_STREAMS). */
#define H2_MAX_STREAMS		100

/*
 * The session for ic, whose sandbox chose h2 in ALPN: our SETTINGS are
 * queued.  NULL when out of memory.
 */
struct h2	*h2_new(struct icpt *ic);
/* The step's part: frames in, streams moved on, frames out. */
void	h2_step(struct h2 *h);
/* Whether the sandbox's bytes are to be read. */
int	h2_reads(const struct h2 *h);
/* The connection's timer: each stream's timeouts, and the idle session. */
void	h2_timer(struct h2 *h, uint64_t now);
/*
 * A stream's upstream is ready (connected and checked, or a stream of an
 * HTTP/2 upstream session): the session's other streams may now start as
 * many at once as H2_MAX_STARTING, not one by one.
 */
void	h2_stream_upstream(struct h2s *s);
/* A stream's icpt ended (from its step): its session lets it go. */
void	h2_stream_over(struct h2s *s, const char *reason);
/* Audit records up to durable are on disk (icpt_audit_durable), for each stream. */
void	h2_audit_durable(struct h2 *h, uint64_t durable, int failed);
/* The connection ends: every stream's icpt is closed. */
/*
 * The worker drains: GOAWAY (NO_ERROR, the last stream read) goes out, no
 * new stream is read, and the connection ends once the streams under way
 * are done.
 */
void	h2_drain(struct h2 *h);
void	h2_close(struct h2 *h);
/* Frees the session and its streams; accepts NULL. */
void	h2_free(struct h2 *h);

#endif
