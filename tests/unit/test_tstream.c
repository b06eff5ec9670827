/*
 * test_tstream.c: the loop's socket stream (loop/tstream.h) on an event
 * base of the test's own.  Plain over socketpairs: reading, writing and
 * the write mark, the prefix, reading off and on, half-close, a peer that
 * resets.  TLS as the server against an OpenSSL client driven in the same
 * thread (the ClientHello as a prefix, whole or in part, both ways,
 * close_notify, a dirty end, garbage); TLS as the client against a server
 * of the test's on 127.0.0.1 (the handshake, an answer cut short, a
 * refused connect).  The timeout, and quiet.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "loop/loop.h"
#include "loop/tstream.h"

#define MAXEV	16

/* The TLS material, made once for the whole run. */
static EVP_PKEY	*g_key;
static X509	*g_cert;
static SSL_CTX	*g_sctx;	/* a server with g_cert */
static SSL_CTX	*g_cctx;	/* a client that trusts g_cert alone */

struct world {
	struct event_base *base;
	struct event	*guard;		/* bounds each EVLOOP_ONCE */
	struct tstream	*ts;
	int		 peer;		/* the test's end of a plain stream */
	int		 cfd;		/* the test's TLS peer's socket */
	int		 lfd;		/* a listener */
	SSL		*cli;		/* the test's TLS peer */
	/* What the callbacks saw. */
	int		 nread, nwrite, nev;
	size_t		 in_at_read;	/* input length at the last read callback */
	size_t		 wq_max;	/* most queued at a write callback */
	short		 ev[MAXEV];
	size_t		 ev_in[MAXEV];	/* input length at each event */
	int		 ev_nread[MAXEV];	/* read callbacks before each event */
	int		 ev_init_done[MAXEV];	/* the SSL's handshake done then */
};

/* ---- helpers ------------------------------------------------------------ */

static uint64_t
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void
nop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* One loop turn that waits at most 5 ms for something to happen. */
static void
step(struct world *w)
{
	struct timeval tv = { 0, 5000 };

	evtimer_add(w->guard, &tv);
	event_base_loop(w->base, EVLOOP_ONCE);
}

/* Turns the loop until cond holds or ms have gone by. */
#define RUN_UNTIL(w, cond, ms) do {					\
	uint64_t end_ = now_ms() + (ms);				\
	while (!(cond) && now_ms() < end_)				\
		step(w);						\
} while (0)

/* Turns the loop for ms. */
static void
spin(struct world *w, unsigned ms)
{
	RUN_UNTIL(w, 0, ms);
}

static void
nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK),
	    0);
}

static void
on_read(struct tstream *ts, void *arg)
{
	struct world *w = arg;

	assert_ptr_equal(ts, w->ts);
	w->nread++;
	w->in_at_read = evbuffer_get_length(tstream_input(ts));
}

static void
on_write(struct tstream *ts, void *arg)
{
	struct world *w = arg;
	size_t q = tstream_queued(ts);

	assert_ptr_equal(ts, w->ts);
	w->nwrite++;
	if (q > w->wq_max)
		w->wq_max = q;
}

static void
on_event(struct tstream *ts, short what, void *arg)
{
	struct world *w = arg;

	assert_ptr_equal(ts, w->ts);
	if (w->nev < MAXEV) {
		w->ev[w->nev] = what;
		w->ev_in[w->nev] = evbuffer_get_length(tstream_input(ts));
		w->ev_nread[w->nev] = w->nread;
		w->ev_init_done[w->nev] = tstream_ssl(ts) != NULL &&
		    SSL_is_init_finished(tstream_ssl(ts));
	}
	w->nev++;
}

static int
setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	assert_non_null(w->base = event_base_new());
	assert_non_null(w->guard = evtimer_new(w->base, nop_cb, NULL));
	w->peer = w->cfd = w->lfd = -1;
	*state = w;
	return 0;
}

static int
teardown(void **state)
{
	struct world *w = *state;

	tstream_free(w->ts);
	SSL_free(w->cli);
	if (w->peer >= 0)
		close(w->peer);
	if (w->cfd >= 0)
		close(w->cfd);
	if (w->lfd >= 0)
		close(w->lfd);
	event_free(w->guard);
	event_base_free(w->base);
	free(w);
	ERR_clear_error();
	return 0;
}

/* A plain stream on one end of a socketpair, the other end w->peer. */
static void
plain_new(struct world *w)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	assert_non_null(w->ts = tstream_new(w->base, sv[0], NULL,
	    TSTREAM_PLAIN));
	w->peer = sv[1];
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
}

static void
plain_start(struct world *w)
{
	plain_new(w);
	tstream_start(w->ts);
}

/* Reads what fd has now into buf[*got..cap); 1 at its end of stream. */
static int
peer_read(int fd, uint8_t *buf, size_t cap, size_t *got)
{
	ssize_t n;

	while (*got < cap) {
		n = recv(fd, buf + *got, cap - *got, 0);
		if (n == 0)
			return 1;
		if (n < 0) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			return 0;
		}
		*got += (size_t)n;
	}
	return 0;
}

/* Writes what fd takes now of p[*off..len). */
static void
peer_write(int fd, const uint8_t *p, size_t len, size_t *off)
{
	ssize_t n;

	while (*off < len) {
		n = send(fd, p + *off, len - *off, MSG_NOSIGNAL);
		if (n < 0) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			return;
		}
		*off += (size_t)n;
	}
}

static uint8_t *
pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)((i * 31 + seed + i / 251) & 0xff);
	return p;
}

/* Is the input exactly p[0..len)? */
static int
input_is(struct world *w, const void *p, size_t len)
{
	struct evbuffer *in = tstream_input(w->ts);
	unsigned char *q;

	if (evbuffer_get_length(in) != len)
		return 0;
	if (len == 0)
		return 1;
	q = evbuffer_pullup(in, -1);
	return q != NULL && memcmp(q, p, len) == 0;
}

/* A TCP listener on 127.0.0.1, port chosen by the kernel, in *sin. */
static int
listen_tcp(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd, one = 1;

	assert_true((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >=
	    0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)), 0);
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)sin, &len), 0);
	return fd;
}

/* ---- TLS material --------------------------------------------------------- */

static int
group_setup(void **state)
{
	X509_NAME *name;
	X509_STORE *store;

	(void)state;
	if ((g_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL ||
	    (g_cert = X509_new()) == NULL ||
	    X509_set_version(g_cert, X509_VERSION_3) != 1 ||
	    ASN1_INTEGER_set(X509_get_serialNumber(g_cert), 1) != 1 ||
	    (name = X509_get_subject_name(g_cert)) == NULL ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)"tstream.test", -1, -1, 0) != 1 ||
	    X509_set_issuer_name(g_cert, name) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(g_cert), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(g_cert), 86400) == NULL ||
	    X509_set_pubkey(g_cert, g_key) != 1 ||
	    X509_sign(g_cert, g_key, EVP_sha256()) <= 0)
		return -1;
	if ((g_sctx = SSL_CTX_new(TLS_server_method())) == NULL ||
	    SSL_CTX_use_certificate(g_sctx, g_cert) != 1 ||
	    SSL_CTX_use_PrivateKey(g_sctx, g_key) != 1 ||
	    SSL_CTX_check_private_key(g_sctx) != 1)
		return -1;
	if ((g_cctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    (store = SSL_CTX_get_cert_store(g_cctx)) == NULL ||
	    X509_STORE_add_cert(store, g_cert) != 1)
		return -1;
	SSL_CTX_set_verify(g_cctx, SSL_VERIFY_PEER, NULL);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	SSL_CTX_free(g_sctx);
	SSL_CTX_free(g_cctx);
	X509_free(g_cert);
	EVP_PKEY_free(g_key);
	return 0;
}

/* The test's TLS peer, one handshake step: 1 done, 0 not yet. */
static int
peer_handshake(SSL *ssl)
{
	int r, e;

	if (SSL_is_init_finished(ssl))
		return 1;
	ERR_clear_error();
	if ((r = SSL_do_handshake(ssl)) == 1)
		return 1;
	e = SSL_get_error(ssl, r);
	if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
		ERR_print_errors_fp(stderr);
		fail_msg("the test's TLS peer: handshake error %d", e);
	}
	return 0;
}

/*
 * The test's TLS peer reads what it can into buf[*got..cap): the
 * SSL_get_error() of the read that stopped (SSL_ERROR_WANT_READ when it
 * would block, SSL_ERROR_ZERO_RETURN at a close_notify), SSL_ERROR_NONE
 * when buf is full; *last is that read's return.
 */
static int
peer_tls_read(SSL *ssl, uint8_t *buf, size_t cap, size_t *got, int *last)
{
	int r;

	for (;;) {
		if (*got == cap)
			return SSL_ERROR_NONE;
		ERR_clear_error();
		r = SSL_read(ssl, buf + *got, (int)(cap - *got > 16384 ? 16384 :
		    cap - *got));
		if (last != NULL)
			*last = r;
		if (r <= 0)
			return SSL_get_error(ssl, r);
		*got += (size_t)r;
	}
}

/* The test's TLS peer writes what it can of p[*off..len). */
static void
peer_tls_write(SSL *ssl, const uint8_t *p, size_t len, size_t *off)
{
	int r, e;

	while (*off < len) {
		ERR_clear_error();
		r = SSL_write(ssl, p + *off, (int)(len - *off > 16384 ? 16384 :
		    len - *off));
		if (r <= 0) {
			e = SSL_get_error(ssl, r);
			assert_true(e == SSL_ERROR_WANT_WRITE ||
			    e == SSL_ERROR_WANT_READ);
			return;
		}
		*off += (size_t)r;
	}
}

#define PREFIX_NONE	0
#define PREFIX_WHOLE	((size_t)-1)

/*
 * A TSTREAM_ACCEPT stream on a socketpair with the test's client on the
 * other end, handshake done.  prefix: PREFIX_NONE, PREFIX_WHOLE (the
 * ClientHello read by the test, given whole as the prefix) or a length
 * (that much of it as the prefix, the rest left in the socket).
 */
static void
tls_accept_open(struct world *w, size_t prefix)
{
	uint8_t hello[16384];
	ssize_t n = 0;
	int sv[2], r;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	w->cfd = sv[1];
	assert_non_null(w->cli = SSL_new(g_cctx));
	assert_int_equal(SSL_set_fd(w->cli, w->cfd), 1);
	SSL_set_connect_state(w->cli);
	if (prefix != PREFIX_NONE) {
		ERR_clear_error();
		r = SSL_do_handshake(w->cli);	/* the ClientHello */
		assert_int_equal(SSL_get_error(w->cli, r), SSL_ERROR_WANT_READ);
		n = recv(sv[0], hello, prefix == PREFIX_WHOLE ? sizeof(hello) :
		    prefix, 0);
		assert_true(n > 5);
		assert_int_equal(hello[0], 0x16);	/* a handshake record */
		if (prefix == PREFIX_WHOLE) {
			uint8_t more;

			assert_int_equal(recv(sv[0], &more, 1, 0), -1);
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		} else
			assert_int_equal(n, (ssize_t)prefix);
	}
	assert_non_null(w->ts = tstream_new(w->base, sv[0], SSL_new(g_sctx),
	    TSTREAM_ACCEPT));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	if (n > 0)
		assert_int_equal(tstream_prefix(w->ts, hello, (size_t)n), 0);
	tstream_start(w->ts);
	assert_int_equal(w->nev, 0);	/* never from inside the owner's call */
	RUN_UNTIL(w, peer_handshake(w->cli) && w->nev > 0, 5000);
	assert_true(SSL_is_init_finished(w->cli));
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_CONNECTED);
	assert_true(w->ev_init_done[0]);
	assert_int_equal(SSL_get_verify_result(w->cli), X509_V_OK);
}

/* Client to stream and stream to client, small and large. */
static void
tls_both_ways(struct world *w)
{
	const size_t big = 300 * 1024, up = 200 * 1024;
	uint8_t *down = pattern(big, 7), *upb = pattern(up, 11);
	uint8_t *got = malloc(4 + big), *want = malloc(4 + up);
	size_t off = 0, n = 0;

	assert_non_null(got);
	assert_non_null(want);
	peer_tls_write(w->cli, (const uint8_t *)"ping", 4, &off);
	assert_int_equal(off, 4);
	RUN_UNTIL(w, input_is(w, "ping", 4), 3000);
	assert_true(input_is(w, "ping", 4));
	assert_true(w->nread >= 1);
	assert_int_equal(w->in_at_read, 4);

	/* Stream to client: more than a record, more than a socket buffer. */
	tstream_set_wlow(w->ts, 0);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "pong", 4), 0);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), down, big), 0);
	assert_int_equal(tstream_queued(w->ts), big + 4);
	RUN_UNTIL(w, (peer_tls_read(w->cli, got, 4 + big, &n, NULL),
	    n == 4 + big && w->nwrite > 0), 5000);
	assert_int_equal(n, 4 + big);
	assert_memory_equal(got, "pong", 4);
	assert_memory_equal(got + 4, down, big);
	assert_int_equal(tstream_queued(w->ts), 0);
	assert_true(w->nwrite >= 1);
	assert_int_equal(w->wq_max, 0);

	/* Client to stream: the stream reads it all. */
	memcpy(want, "ping", 4);
	memcpy(want + 4, upb, up);
	off = 0;
	RUN_UNTIL(w, (peer_tls_write(w->cli, upb, up, &off),
	    evbuffer_get_length(tstream_input(w->ts)) == 4 + up), 5000);
	assert_int_equal(off, up);
	assert_true(input_is(w, want, 4 + up));
	assert_int_equal(w->in_at_read, 4 + up);
	assert_int_equal(w->nev, 1);		/* CONNECTED only */
	free(down);
	free(upb);
	free(got);
	free(want);
}

/* ---- wiping --------------------------------------------------------- */

static int g_ref_freed;

static void
ref_cleanup(const void *data, size_t len, void *arg)
{
	g_ref_freed++;
}

/* Whether p[0..n) is all zeros. */
static int
zeros(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

/*
 * A wiped stream's output, given as chains that are the test's own memory
 * (a credential's bytes, then more): the peer gets every byte, and each
 * byte of the test's memory is zero once it went out.
 */
static void
t_tls_wipe_output(void **state)
{
	struct world *w = *state;
	const size_t big = 40 * 1024;
	uint8_t head[] = "GET / HTTP/1.1\r\nAuthorization: Bearer s3cr3t\r\n\r\n";
	uint8_t *body = pattern(big, 3), *want = malloc(sizeof(head) + big);
	uint8_t *got = malloc(sizeof(head) + big);
	size_t n = 0, hl = sizeof(head) - 1;

	assert_non_null(want);
	assert_non_null(got);
	memcpy(want, head, hl);
	memcpy(want + hl, body, big);
	tls_accept_open(w, PREFIX_NONE);
	tstream_wipe(w->ts);
	g_ref_freed = 0;
	/* Chains over the test's memory: pullup would have merged them. */
	assert_int_equal(evbuffer_add_reference(tstream_output(w->ts), head, hl,
	    ref_cleanup, NULL), 0);
	assert_int_equal(evbuffer_add_reference(tstream_output(w->ts), body,
	    big, ref_cleanup, NULL), 0);
	RUN_UNTIL(w, (peer_tls_read(w->cli, got, hl + big, &n, NULL),
	    n == hl + big), 5000);
	assert_int_equal(n, hl + big);
	assert_memory_equal(got, want, hl + big);
	assert_int_equal(tstream_queued(w->ts), 0);
	assert_int_equal(g_ref_freed, 2);
	assert_true(zeros(head, hl));
	assert_true(zeros(body, big));
	free(body);
	free(want);
	free(got);
}

/* What is left in a wiped stream's output when it goes is wiped too. */
static void
t_wipe_on_free(void **state)
{
	struct world *w = *state;
	uint8_t secret[] = "Authorization: Bearer never-sent";
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	w->cfd = sv[1];
	assert_non_null(w->ts = tstream_new(w->base, sv[0], NULL,
	    TSTREAM_ACCEPT));
	tstream_wipe(w->ts);
	g_ref_freed = 0;
	assert_int_equal(evbuffer_add_reference(tstream_output(w->ts), secret,
	    sizeof(secret) - 1, ref_cleanup, NULL), 0);
	tstream_free(w->ts);	/* never started: nothing was sent */
	w->ts = NULL;
	assert_int_equal(g_ref_freed, 1);
	assert_true(zeros(secret, sizeof(secret) - 1));
}

/* loop_evbuffer_move_wiped: the bytes move, and where they were is zero. */
static void
t_move_wiped(void **state)
{
	uint8_t a[] = "first-part;", b[] = "second-part-with-a-credential";
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char out[64];
	size_t al = sizeof(a) - 1, bl = sizeof(b) - 1, keep = al + 6;

	assert_non_null(src);
	assert_non_null(dst);
	g_ref_freed = 0;
	assert_int_equal(evbuffer_add_reference(src, a, al, ref_cleanup,
	    NULL), 0);
	assert_int_equal(evbuffer_add_reference(src, b, bl, ref_cleanup,
	    NULL), 0);
	/* A split inside b's chain: what moved of it is zero, the rest stays. */
	assert_int_equal(loop_evbuffer_move_wiped(src, dst, keep), 0);
	assert_int_equal(evbuffer_get_length(dst), keep);
	assert_int_equal(evbuffer_remove(dst, out, sizeof(out)), (int)keep);
	assert_memory_equal(out, "first-part;second", keep);
	assert_true(zeros(a, al));
	assert_true(zeros(b, 6));
	assert_memory_equal(b + 6, "-part-with-a-credential", bl - 6);
	assert_int_equal(evbuffer_get_length(src), bl - 6);
	loop_evbuffer_wipe_drain(src, (size_t)-1);
	assert_int_equal(evbuffer_get_length(src), 0);
	assert_true(zeros(b, bl));
	assert_int_equal(g_ref_freed, 2);
	evbuffer_free(src);
	evbuffer_free(dst);
}

/* ---- plain ------------------------------------------------------------ */

/* A prefix is in the input at start, with no read callback; reads follow it. */
static void
t_plain_prefix_and_read(void **state)
{
	struct world *w = *state;
	const size_t big = 200 * 1024;
	uint8_t *p = pattern(big, 3), *want = malloc(16 + big);
	size_t off = 0;

	assert_non_null(want);
	plain_new(w);
	assert_int_equal(tstream_prefix(w->ts, "GET ", 4), 0);
	tstream_start(w->ts);
	assert_true(input_is(w, "GET ", 4));
	assert_int_equal(w->nread, 0);
	spin(w, 30);
	assert_true(input_is(w, "GET ", 4));
	assert_int_equal(w->nread, 0);		/* the prefix is no read */
	assert_true(tstream_reading(w->ts));

	assert_int_equal(write(w->peer, "/ HTTP/1.1\r\n", 12), 12);
	RUN_UNTIL(w, w->nread > 0, 3000);
	assert_true(input_is(w, "GET / HTTP/1.1\r\n", 16));
	assert_int_equal(w->in_at_read, 16);

	/* More than a turn's reading and more than a socket buffer. */
	memcpy(want, "GET / HTTP/1.1\r\n", 16);
	memcpy(want + 16, p, big);
	RUN_UNTIL(w, (peer_write(w->peer, p, big, &off),
	    evbuffer_get_length(tstream_input(w->ts)) == 16 + big), 5000);
	assert_int_equal(off, big);
	assert_true(input_is(w, want, 16 + big));
	assert_int_equal(w->in_at_read, 16 + big);
	assert_int_equal(w->nev, 0);
	free(p);
	free(want);
}

/* Output reaches the peer; the write callback comes at or under the mark. */
static void
t_plain_write(void **state)
{
	struct world *w = *state;
	const size_t big = 1024 * 1024;
	uint8_t *p = pattern(big, 5), *got = malloc(big);
	size_t n = 0;

	assert_non_null(got);
	plain_start(w);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "abc", 3), 0);
	assert_int_equal(w->nwrite, 0);		/* not from inside the call */
	RUN_UNTIL(w, (peer_read(w->peer, got, 3, &n), n == 3 &&
	    w->nwrite > 0), 3000);
	assert_int_equal(n, 3);
	assert_memory_equal(got, "abc", 3);
	assert_int_equal(w->nwrite, 1);
	assert_int_equal(w->wq_max, 0);
	assert_int_equal(tstream_queued(w->ts), 0);

	/* A megabyte against the socket buffer, with a mark of 4 KiB. */
	w->nwrite = 0;
	tstream_set_wlow(w->ts, 4096);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), p, big), 0);
	assert_int_equal(tstream_queued(w->ts), big);	/* after the turn */
	n = 0;
	RUN_UNTIL(w, (peer_read(w->peer, got, big, &n), n == big &&
	    w->nwrite > 0), 10000);
	assert_int_equal(n, big);
	assert_memory_equal(got, p, big);
	assert_true(w->nwrite >= 1);
	assert_true(w->wq_max <= 4096);
	assert_int_equal(tstream_queued(w->ts), 0);
	assert_int_equal(w->nev, 0);
	free(p);
	free(got);
}

/* Reading off: the peer's bytes wait in the socket; on: they come. */
static void
t_plain_read_off_on(void **state)
{
	struct world *w = *state;

	int on;

	plain_start(w);
	/* Off takes the read event out of the loop (tstream.h). */
	evtimer_del(w->guard);
	on = event_base_get_num_events(w->base, EVENT_BASE_COUNT_ADDED);
	tstream_read(w->ts, 0);
	assert_false(tstream_reading(w->ts));
	assert_int_equal(event_base_get_num_events(w->base,
	    EVENT_BASE_COUNT_ADDED), on - 1);
	assert_int_equal(write(w->peer, "late", 4), 4);
	spin(w, 50);
	assert_int_equal(evbuffer_get_length(tstream_input(w->ts)), 0);
	assert_int_equal(w->nread, 0);
	tstream_read(w->ts, 1);
	assert_true(tstream_reading(w->ts));
	assert_int_equal(w->nread, 0);		/* not from inside the call */
	RUN_UNTIL(w, w->nread > 0, 3000);
	assert_true(input_is(w, "late", 4));
	/* Off again after a read: a second write stays in the socket. */
	tstream_read(w->ts, 0);
	assert_int_equal(write(w->peer, "more", 4), 4);
	spin(w, 50);
	assert_true(input_is(w, "late", 4));
	assert_int_equal(w->nread, 1);
	tstream_read(w->ts, 1);
	RUN_UNTIL(w, w->nread > 1, 3000);
	assert_true(input_is(w, "latemore", 8));
	assert_int_equal(w->nev, 0);
}

/* The peer's SHUT_WR: one EOF after its bytes; writing goes on. */
static void
t_plain_half_close(void **state)
{
	struct world *w = *state;
	uint8_t buf[16];
	size_t n = 0;
	int end = 0;

	plain_start(w);
	assert_int_equal(write(w->peer, "last", 4), 4);
	assert_int_equal(shutdown(w->peer, SHUT_WR), 0);
	RUN_UNTIL(w, w->nev > 0, 3000);
	spin(w, 50);
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_EOF | TSTREAM_READING);
	assert_int_equal(w->ev_in[0], 4);
	assert_true(w->ev_nread[0] >= 1);	/* the bytes before the end */
	assert_true(input_is(w, "last", 4));

	assert_int_equal(evbuffer_add(tstream_output(w->ts), "reply", 5), 0);
	RUN_UNTIL(w, (peer_read(w->peer, buf, sizeof(buf), &n), n == 5),
	    3000);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "reply", 5);
	assert_true(w->nwrite >= 1);
	assert_int_equal(tstream_queued(w->ts), 0);
	assert_int_equal(w->nev, 1);

	/* Our end too: the peer reads its end of stream. */
	tstream_free(w->ts);
	w->ts = NULL;
	RUN_UNTIL(w, (end = peer_read(w->peer, buf, sizeof(buf), &n)), 1000);
	assert_true(end);
}

/* A TCP peer that resets (SO_LINGER 0): one error or EOF, nothing more. */
static void
t_plain_reset(void **state)
{
	struct world *w = *state;
	struct sockaddr_in sin;
	struct linger lg = { 1, 0 };
	int a, b = -1;

	w->lfd = listen_tcp(&sin);
	assert_true((a = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(connect(a, (struct sockaddr *)&sin, sizeof(sin)), 0);
	RUN_UNTIL(w, (b = accept(w->lfd, NULL, NULL)) >= 0, 3000);
	assert_true(b >= 0);
	nonblock(a);
	nonblock(b);
	assert_non_null(w->ts = tstream_new(w->base, a, NULL, TSTREAM_PLAIN));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	tstream_start(w->ts);
	spin(w, 20);
	assert_int_equal(w->nev, 0);
	assert_int_equal(setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)),
	    0);
	close(b);
	RUN_UNTIL(w, w->nev > 0, 3000);
	spin(w, 50);
	assert_int_equal(w->nev, 1);
	assert_true(w->ev[0] & (TSTREAM_ERROR | TSTREAM_EOF));
	assert_true(w->ev[0] & TSTREAM_READING);
	assert_false(w->ev[0] & TSTREAM_CONNECTED);
}

/* A socketpair peer that closes with our bytes unread: error or EOF. */
static void
t_plain_peer_closes_unread(void **state)
{
	struct world *w = *state;

	plain_start(w);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "unread", 6), 0);
	RUN_UNTIL(w, tstream_queued(w->ts) == 0, 3000);
	assert_int_equal(tstream_queued(w->ts), 0);
	close(w->peer);
	w->peer = -1;
	RUN_UNTIL(w, w->nev > 0, 3000);
	spin(w, 50);
	assert_int_equal(w->nev, 1);
	assert_true(w->ev[0] & (TSTREAM_ERROR | TSTREAM_EOF));
	assert_true(w->ev[0] & TSTREAM_READING);
	/* Writing into the closed socket afterwards: at most an error. */
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "late", 4), 0);
	spin(w, 50);
	assert_true(w->nev <= 2);
	if (w->nev == 2)
		assert_true(w->ev[1] & TSTREAM_ERROR);
}

/* A plain stream made by tstream_connect: CONNECTED, then bytes. */
static void
t_plain_connect(void **state)
{
	struct world *w = *state;
	struct sockaddr_in sin;
	uint8_t buf[16];
	size_t n = 0;
	int s = -1;

	w->lfd = listen_tcp(&sin);
	assert_non_null(w->ts = tstream_new(w->base, -1, NULL, TSTREAM_PLAIN));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "hello", 5), 0);
	assert_int_equal(tstream_connect(w->ts, (struct sockaddr *)&sin,
	    sizeof(sin)), 0);
	assert_true(tstream_fd(w->ts) >= 0);
	RUN_UNTIL(w, w->nev > 0, 3000);
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_CONNECTED);
	RUN_UNTIL(w, (s = accept(w->lfd, NULL, NULL)) >= 0, 3000);
	assert_true(s >= 0);
	w->peer = s;
	nonblock(s);
	/* Bytes queued before the connect go once it is made. */
	RUN_UNTIL(w, (peer_read(s, buf, sizeof(buf), &n), n == 5), 3000);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(write(s, "world", 5), 5);
	RUN_UNTIL(w, w->nread > 0, 3000);
	assert_true(input_is(w, "world", 5));
}

/* ---- TLS, the server ---------------------------------------------------- */

static void
t_tls_accept_both_ways(void **state)
{
	struct world *w = *state;

	tls_accept_open(w, PREFIX_NONE);
	tls_both_ways(w);
}

/* The ClientHello read already, given whole as the prefix. */
static void
t_tls_accept_prefix_whole(void **state)
{
	struct world *w = *state;

	tls_accept_open(w, PREFIX_WHOLE);
	tls_both_ways(w);
}

/* A part of the ClientHello as the prefix, the rest still in the socket. */
static void
t_tls_accept_prefix_part(void **state)
{
	struct world *w = *state;

	tls_accept_open(w, 7);
	tls_both_ways(w);
}

/* close_notify after queued bytes: all of them, then the clean end. */
static void
t_tls_close_notify(void **state)
{
	struct world *w = *state;
	const size_t big = 100 * 1024;
	uint8_t *p = pattern(big, 13), *got = malloc(big + 16);
	size_t n = 0;
	int e = 0, last = 1;

	assert_non_null(got);
	tls_accept_open(w, PREFIX_WHOLE);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), p, big), 0);
	tstream_close_notify(w->ts);
	assert_int_equal(tstream_queued(w->ts), big + 1);  /* one owed */
	RUN_UNTIL(w, (e = peer_tls_read(w->cli, got, big + 16, &n, &last)) ==
	    SSL_ERROR_ZERO_RETURN, 5000);
	assert_int_equal(e, SSL_ERROR_ZERO_RETURN);
	assert_int_equal(last, 0);
	assert_int_equal(n, big);
	assert_memory_equal(got, p, big);
	assert_true(SSL_get_shutdown(w->cli) & SSL_RECEIVED_SHUTDOWN);
	RUN_UNTIL(w, tstream_queued(w->ts) == 0, 3000);
	assert_int_equal(tstream_queued(w->ts), 0);
	assert_true(w->nwrite >= 1);
	assert_int_equal(w->nev, 1);		/* CONNECTED only */

	/* The client's close_notify back: a clean EOF, no error. */
	ERR_clear_error();
	assert_true(SSL_shutdown(w->cli) >= 0);
	RUN_UNTIL(w, w->nev > 1, 3000);
	spin(w, 30);
	assert_int_equal(w->nev, 2);
	assert_int_equal(w->ev[1], TSTREAM_EOF | TSTREAM_READING);
	free(p);
	free(got);
}

/* A client that closes its socket without close_notify: EOF (ACCEPT). */
static void
t_tls_accept_dirty_end(void **state)
{
	struct world *w = *state;
	uint8_t buf[64];
	size_t n = 0, off = 0;

	tls_accept_open(w, PREFIX_WHOLE);
	peer_tls_write(w->cli, (const uint8_t *)"hi", 2, &off);
	RUN_UNTIL(w, w->nread > 0, 3000);
	assert_true(input_is(w, "hi", 2));
	/* The client reads all it was sent (tickets): its close is no RST. */
	spin(w, 20);
	assert_int_equal(peer_tls_read(w->cli, buf, sizeof(buf), &n, NULL),
	    SSL_ERROR_WANT_READ);
	assert_int_equal(n, 0);
	SSL_free(w->cli);
	w->cli = NULL;
	close(w->cfd);
	w->cfd = -1;
	RUN_UNTIL(w, w->nev > 1, 3000);
	spin(w, 50);
	assert_int_equal(w->nev, 2);
	assert_int_equal(w->ev[1], TSTREAM_EOF | TSTREAM_READING);
	assert_int_equal(w->ev_in[1], 2);
}

/* Not TLS at all: an error, with the OpenSSL error kept. */
static void
t_tls_accept_garbage(void **state)
{
	struct world *w = *state;
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	w->peer = sv[1];
	assert_non_null(w->ts = tstream_new(w->base, sv[0], SSL_new(g_sctx),
	    TSTREAM_ACCEPT));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	assert_int_equal(tstream_prefix(w->ts, req, sizeof(req) - 1), 0);
	tstream_start(w->ts);
	RUN_UNTIL(w, w->nev > 0, 3000);
	spin(w, 30);
	assert_int_equal(w->nev, 1);
	assert_true(w->ev[0] & TSTREAM_ERROR);
	assert_false(w->ev[0] & (TSTREAM_CONNECTED | TSTREAM_EOF));
	assert_int_not_equal(tstream_ssl_error(w->ts), 0);
	assert_int_equal(w->nread, 0);
}

/* ---- TLS, the client ---------------------------------------------------- */

static void
t_tls_connect(void **state)
{
	struct world *w = *state;
	struct sockaddr_in sin;
	uint8_t buf[64];
	size_t n = 0, off = 0;
	int s = -1, e;

	w->lfd = listen_tcp(&sin);
	assert_non_null(w->ts = tstream_new(w->base, -1, SSL_new(g_cctx),
	    TSTREAM_CONNECT));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	assert_int_equal(tstream_connect(w->ts, (struct sockaddr *)&sin,
	    sizeof(sin)), 0);
	assert_true(tstream_fd(w->ts) >= 0);
	RUN_UNTIL(w, (s = accept(w->lfd, NULL, NULL)) >= 0, 3000);
	assert_true(s >= 0);
	w->cfd = s;
	nonblock(s);
	/* TCP is up, the ClientHello waits: no CONNECTED yet. */
	spin(w, 50);
	assert_int_equal(w->nev, 0);
	assert_non_null(w->cli = SSL_new(g_sctx));
	assert_int_equal(SSL_set_fd(w->cli, s), 1);
	SSL_set_accept_state(w->cli);
	RUN_UNTIL(w, peer_handshake(w->cli) && w->nev > 0, 5000);
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_CONNECTED);
	assert_true(w->ev_init_done[0]);
	assert_true(SSL_is_init_finished(w->cli));
	assert_int_equal(SSL_get_verify_result(tstream_ssl(w->ts)), X509_V_OK);
	assert_int_equal(X509_cmp(SSL_get0_peer_certificate(
	    tstream_ssl(w->ts)), g_cert), 0);

	/* A request up. */
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "GET /", 5), 0);
	RUN_UNTIL(w, (peer_tls_read(w->cli, buf, sizeof(buf), &n, NULL),
	    n == 5), 3000);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "GET /", 5);

	/* An answer, then the server's end without close_notify. */
	peer_tls_write(w->cli, (const uint8_t *)"answer-body", 11, &off);
	assert_int_equal(off, 11);
	e = peer_tls_read(w->cli, buf, sizeof(buf), &n, NULL);
	assert_int_equal(e, SSL_ERROR_WANT_READ);	/* nothing unread: FIN */
	SSL_free(w->cli);
	w->cli = NULL;
	close(w->cfd);
	w->cfd = -1;
	RUN_UNTIL(w, w->nev > 1, 3000);
	spin(w, 50);
	assert_int_equal(w->nev, 2);
	assert_int_equal(w->ev[1] & (TSTREAM_EOF | TSTREAM_ERROR),
	    TSTREAM_EOF | TSTREAM_ERROR);
	assert_true(w->ev[1] & TSTREAM_READING);
	/* The answer went to the read callback before the end. */
	assert_true(w->ev_nread[1] >= 1);
	assert_int_equal(w->ev_in[1], 11);
	assert_int_equal(w->in_at_read, 11);
	assert_true(input_is(w, "answer-body", 11));
}

/* A connect to a closed port: an error. */
static void
t_connect_refused(void **state)
{
	struct world *w = *state;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int s, r;

	assert_true((s = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sin, &len), 0);
	close(s);		/* bound, never listening, now closed */
	assert_non_null(w->ts = tstream_new(w->base, -1, SSL_new(g_cctx),
	    TSTREAM_CONNECT));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	r = tstream_connect(w->ts, (struct sockaddr *)&sin, sizeof(sin));
	if (r != 0) {
		/* Loopback may refuse at once: -1 with errno (tstream.h). */
		assert_int_equal(errno, ECONNREFUSED);
		spin(w, 30);
		assert_int_equal(w->nev, 0);
		return;
	}
	RUN_UNTIL(w, w->nev > 0, 3000);
	spin(w, 30);
	assert_int_equal(w->nev, 1);
	assert_true(w->ev[0] & TSTREAM_ERROR);
	assert_false(w->ev[0] & TSTREAM_CONNECTED);
	assert_int_equal(w->nread, 0);
}

/* ---- the timeout -------------------------------------------------------- */

/* Reading with nothing coming: TIMEOUT | READING after about the time. */
static void
t_timeout_idle(void **state)
{
	struct world *w = *state;
	uint64_t t0, el;

	plain_start(w);
	t0 = now_ms();
	tstream_set_timeout(w->ts, 200);
	RUN_UNTIL(w, w->nev > 0, 3000);
	el = now_ms() - t0;
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_TIMEOUT | TSTREAM_READING);
	assert_true(el >= 150);
	assert_true(el < 3000);
	/* It fires once. */
	spin(w, 400);
	assert_int_equal(w->nev, 1);
}

struct poke {
	struct world	*w;
	uint64_t	 at;
};

static void
poke_cb(evutil_socket_t fd, short what, void *arg)
{
	struct poke *pk = arg;

	(void)fd;
	(void)what;
	pk->at = now_ms();
	assert_int_equal(write(pk->w->peer, "x", 1), 1);
}

/* Bytes that arrive in between put the timeout back. */
static void
t_timeout_pushed_back(void **state)
{
	struct world *w = *state;
	struct poke pk = { w, 0 };
	struct timeval tv = { 0, 100000 };
	struct event *ev;
	uint64_t t0, el;

	plain_start(w);
	assert_non_null(ev = evtimer_new(w->base, poke_cb, &pk));
	t0 = now_ms();
	tstream_set_timeout(w->ts, 300);
	evtimer_add(ev, &tv);
	RUN_UNTIL(w, w->nev > 0, 3000);
	el = now_ms();
	event_free(ev);
	assert_int_not_equal(pk.at, 0);
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_TIMEOUT | TSTREAM_READING);
	assert_int_equal(w->ev_nread[0], 1);	/* the byte came before it */
	assert_true(input_is(w, "x", 1));
	/* Counted from the byte: 300 ms from the start would be ~200 here. */
	assert_true(el - pk.at >= 250);
	assert_true(el - t0 < 3000);
}

/* Reading off and nothing queued: nothing is awaited, no timeout. */
static void
t_timeout_nothing_awaited(void **state)
{
	struct world *w = *state;

	plain_start(w);
	tstream_read(w->ts, 0);
	tstream_set_timeout(w->ts, 100);
	spin(w, 350);
	assert_int_equal(w->nev, 0);
	/* Reading on again: the timeout comes. */
	tstream_read(w->ts, 1);
	RUN_UNTIL(w, w->nev > 0, 3000);
	assert_int_equal(w->nev, 1);
	assert_int_equal(w->ev[0], TSTREAM_TIMEOUT | TSTREAM_READING);
}

/* ---- quiet ------------------------------------------------------------- */

static void
t_quiet(void **state)
{
	struct world *w = *state;
	uint8_t buf[16];
	ssize_t n;

	plain_start(w);
	tstream_set_timeout(w->ts, 50);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "queued", 6), 0);
	tstream_quiet(w->ts);
	assert_int_equal(evbuffer_add(tstream_output(w->ts), "after", 5), 0);
	assert_int_equal(write(w->peer, "data", 4), 4);
	spin(w, 100);
	n = recv(w->peer, buf, sizeof(buf), 0);
	assert_int_equal(n, -1);		/* nothing was written */
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	close(w->peer);
	w->peer = -1;
	spin(w, 200);
	assert_int_equal(w->nread, 0);
	assert_int_equal(w->nwrite, 0);
	assert_int_equal(w->nev, 0);
	assert_int_equal(evbuffer_get_length(tstream_input(w->ts)), 0);
}

/* quiet on a TLS stream in the middle of its handshake. */
static void
t_quiet_tls_handshake(void **state)
{
	struct world *w = *state;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
	    sv), 0);
	w->cfd = sv[1];
	assert_non_null(w->cli = SSL_new(g_cctx));
	assert_int_equal(SSL_set_fd(w->cli, w->cfd), 1);
	SSL_set_connect_state(w->cli);
	assert_non_null(w->ts = tstream_new(w->base, sv[0], SSL_new(g_sctx),
	    TSTREAM_ACCEPT));
	tstream_setcb(w->ts, on_read, on_write, on_event, w);
	tstream_start(w->ts);
	tstream_quiet(w->ts);
	RUN_UNTIL(w, peer_handshake(w->cli), 200);
	assert_false(SSL_is_init_finished(w->cli));	/* no ServerHello */
	close(w->cfd);
	w->cfd = -1;
	spin(w, 50);
	assert_int_equal(w->nev, 0);
	assert_int_equal(w->nread, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_plain_prefix_and_read, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_plain_write, setup, teardown),
		cmocka_unit_test_setup_teardown(t_plain_read_off_on, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_plain_half_close, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_plain_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(t_plain_peer_closes_unread,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_plain_connect, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls_accept_both_ways, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls_accept_prefix_whole,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_tls_accept_prefix_part,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_tls_close_notify, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls_accept_dirty_end, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls_accept_garbage, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_tls_connect, setup, teardown),
		cmocka_unit_test_setup_teardown(t_tls_wipe_output, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_wipe_on_free, setup,
		    teardown),
		cmocka_unit_test(t_move_wiped),
		cmocka_unit_test_setup_teardown(t_connect_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_timeout_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(t_timeout_pushed_back, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_timeout_nothing_awaited,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_quiet, setup, teardown),
		cmocka_unit_test_setup_teardown(t_quiet_tls_handshake, setup,
		    teardown),
	};

	signal(SIGPIPE, SIG_IGN);	/* as sluiced does */
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
