/*
 * fuzz_h2.c: libFuzzer target for HTTP/2 from the sandbox (h2.c and the
 * icpt of each stream), both sides at once.  As in fuzz_icpt.c, a real
 * struct conn runs the real icpt code on a struct loop of our own, and
 * the upstream is a TLS server of ours on 127.77.X.Y:443 (that world, its
 * policies, secrets and minted token: fuzz_world.h); here the
 * sandbox speaks TLS too: an OpenSSL client on the socketpair offers ALPN
 * "h2", trusts the sandbox's CA (made at start) and sends SNI.  Its
 * ClientHello is what the conn starts with (c->peek, SNIFF_TLS); the
 * handshake is pumped before the script, and must choose h2.
 *
 * The sandbox's HTTP/2 is an nghttp2 client session, which both makes
 * the well-formed frames of the script and reads everything sluice sends
 * (after the handshake it sends the preface and SETTINGS by itself).
 *
 * Input: byte 0 holds switches: bit 0 the policy (0: no pass rule, the
 * secret is checked; 1: inject, pass and deny), bit 1 TLS 1.3 tickets
 * from the upstream, bit 2 the client gives window back only by op 3,
 * bit 3 a client stream window of 1 KiB, bit 4 the sandbox resumes the
 * TLS session of an earlier input.  The rest is a script of steps, each
 * an opcode byte (low 4 bits) and its operands; S picks one of the
 * client's streams (0 the newest), U one of the upstreams (0 the newest):
 *
 *   0 M X		HEADERS of a request: method M&7 and path (M>>3)&7 of
 *			the tables below, :authority by M>>6 (ours, in upper
 *			case, another host, none but a host header); X: bit 0
 *			END_STREAM, then gRPC, cookie crumbs, a placeholder
 *			in authorization, content-length 96 (one op 1 of
 *			N 1), 18 KiB of headers (over the list limit),
 *			"connection", expect 100-continue
 *   1 S N		DATA on S: (N&63)*96 bytes (with the placeholder
 *			when N&64), END_STREAM when N&128
 *   2 S C		C < 128: RST_STREAM on S with code C&15; else
 *			(C&63)+1 new GETs, each reset by us (C&64 clear) or
 *			malformed so that sluice resets it (rapid reset,
 *			MadeYouReset)
 *   3 S I		WINDOW_UPDATE of (I+1)*256 on S, or the connection
 *			when S&128
 *   4 K V		SETTINGS: one entry, id K%6+1, a value from V
 *   5 N		N+1 PINGs
 *   6 T F S R L B	a raw frame of type T, flags F, stream S (0: 0;
 *			S&128: S&127; else a client stream), payload
 *			B[0..L), (R&63)+1 times
 *   7 U L B		upstream U sends B[0..L) (queued until its handshake)
 *   8 U N		upstream U sends back N*4 bytes of what it got
 *   9 U H		upstream U resets (H%3 0), closes with close_notify
 *			(1), sends FIN (2)
 *   10 U K		upstream U sends canned answer K%13 (table below;
 *			10: a long body, 11: what it got as the body, 12:
 *			the header lines it got as trailer fields)
 *   11 N		N%16+1 more loop turns
 *   12 K		K&1: the sandbox stops or resumes reading; K&2: the
 *			upstreams do; K&4: the sandbox holds what it sends
 *			(frames of several steps in one TLS write) or lets
 *			it go
 *   13 S		trailers on S (END_STREAM)
 *   14 K		the sandbox: GOAWAY (K%4 0), half-closes (1), sends
 *			close_notify (2), closes (3)
 *   15 L B		raw bytes B[0..L) into the TLS stream
 *
 * "{PH}" in a path or header value, and the placeholder bodies, are the
 * sandbox's real placeholder of the secret, which the fuzzer could never
 * guess.  Every step is followed by a loop turn (EVLOOP_NONBLOCK), the
 * upstreams' server work and the sandbox's (TLS reads into the nghttp2
 * session, its frames out).  Then both sides read what is owed, close,
 * and the loop runs until the conn is freed (forced with conn_close if it
 * waits on a timer: none fires in an input, they are 10 s and more).
 *
 * Checks besides the sanitizers:
 *  - what sluice sends must be valid HTTP/2 to the nghttp2 client: a
 *    fatal error of nghttp2_session_mem_recv, an invalid frame (stream or
 *    connection error, HTTP messaging included: a response head or body
 *    nghttp2 rejects) or a GOAWAY with an error code from the client is a
 *    failure.  Raw frames that change what sluice may send without the
 *    client knowing (HEADERS, CONTINUATION, PUSH_PROMISE, SETTINGS,
 *    WINDOW_UPDATE) and raw bytes end that check for the input: from
 *    then on only fatal errors count;
 *  - with the policy without a pass rule, no form of the injected secret
 *    (nor of the minted token) reaches the sandbox: not in the decrypted
 *    bytes, not in a decoded header, not in a stream's body (whole);
 *  - the conn is freed at the end, no request started a mint
 *    (world_end), and LeakSanitizer finds nothing.
 *
 * FUZZ_H2_NO_SECRET_CHECK (set) leaves the secret check out, and
 * FUZZ_H2_NO_VALIDITY_CHECK the HTTP/2 one (but for fatal errors), to look
 * for other faults past a known one; FUZZ_H2_DEBUG logs at debug level
 * and says what each side got.
 *
 * Not covered: HTTP/2 towards the upstream (h2up.c: l->h2up is NULL, so
 * each stream's icpt speaks HTTP/1.1 upstream), timers (stream and idle
 * timeouts), the audit trail (records are dropped), forward rules, a
 * sandbox that does not offer h2, TLS 1.2 towards the sandbox.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "keys/ca.h"
#include "keys/placeholder.h"
#include "keys/tlsterm.h"
#include "conn/conn.h"
#include "conn/icpt.h"
#include "fuzz_check.h"
#include "fuzz_world.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MAX_STEPS	128
#define HS_TURNS	64	/* turns the sandbox's handshake may take */
#define NUP		8	/* upstreams kept at once */
#define NCS		256	/* client streams followed (bodies, data) */
#define SB_KEEP		(1u << 20)	/* of what the sandbox receives, kept */
#define CS_KEEP		(256u * 1024)	/* of a stream's answer body, kept */

/* Op 0's tables: inject, pass (denied in the inject-only policy), deny, ... */
static const char *const methods[8] = { "GET", "POST", "HEAD", "PUT",
	"DELETE", "OPTIONS", "CONNECT", "PATCH" };
static const char *const paths[8] = { "/v1/a", "/pub/a", "/x/deny", "/t/a",
	"/sig/a", "/v1/q?k={PH}", "/pub/%2e%2e/v1/b", "" };
static const char *const authorities[3] = { HOST, "API.EXAMPLE.COM",
	"other.example.com" };

/*
 * Op 10's answers; the last three are made: a long body, what the
 * upstream got as a body, and the header lines it got as trailer fields.
 */
#define A(s)	{ s, sizeof(s) - 1 }
static const struct canned {
	const char	*p;
	size_t		 len;
} canned[] = {
	A("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	    "Content-Type: text/plain\r\n\r\nhello"),
	A("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\n\r\n"),
	A("HTTP/1.1 204 No Content\r\n\r\n"),
	A("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
	A("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
	    "Content-Length: 2\r\n\r\nok"),
	A("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"),
	A("HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n"
	    "Transfer-Encoding: chunked\r\nTrailer: grpc-status\r\n\r\n"
	    "5\r\n\0\0\0\0\0\r\n0\r\ngrpc-status: 0\r\n\r\n"),
	A("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\n\r\n"),
	A("HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nSet-Cookie: a=b\r\n"
	    "Proxy-Connection: keep-alive\r\nContent-Length: 3\r\n\r\nabc"),
	A("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
};
#define NCANNED		(sizeof(canned) / sizeof(canned[0]) + 3)

/* What lives for the whole run besides W: written once at start. */
struct h2world {
	SSL_CTX		*cli;		/* the sandbox's client context */
	SSL_SESSION	*sess;		/* the sandbox's last session */
	uint8_t		*up_got[NUP];	/* what each upstream received */
	int		 no_validity_check;	/* FUZZ_H2_NO_VALIDITY_CHECK */
};

/* A stream of the sandbox's client: its body to send, its answer's body. */
struct cstream {
	int32_t		 id;
	int		 providing;	/* its data provider is with nghttp2 */
	int		 closed;
	int		 tx_end;	/* END_STREAM once tx is out */
	int		 trail;		/* ... with trailers */
	uint8_t		*tx;
	size_t		 tx_len, tx_cap;
	uint8_t		*got;
	size_t		 got_len, got_cap;
};

/* One input's peers. */
struct run {
	int		 policy;
	/* The sandbox: TLS client over the socketpair, HTTP/2 client on it. */
	int		 sb;		/* its end, -1 once closed */
	SSL		*ssl;
	int		 hs_done;
	int		 sb_reading;
	int		 sb_eof;
	int		 sb_wclosed;	/* it sent FIN or close_notify */
	int		 sb_corked;	/* it holds what it sends */
	uint8_t		*sb_got;	/* what it received, decrypted */
	size_t		 sb_len;
	uint8_t		*cl_tx;		/* what it is to send, in clear */
	size_t		 cl_len, cl_cap;
	nghttp2_session	*ng;
	int		 manual_window;
	int		 small_window;
	int		 desync;	/* raw frames sent: validity unchecked */
	struct cstream	 cs[NCS];
	size_t		 ncs;
	/* The upstreams. */
	struct upc	 up[NUP];
	unsigned	 up_next;	/* the slot of the next accepted */
	int		 up_reading;
	int		 tickets;
};

static struct world W;
static struct h2world H;

/* ---- the sandbox's TLS: its CA, sluice's server side, its client --- */

/* The sandbox's session, kept for a later input to resume. */
static int
new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	SSL_SESSION_free(H.sess);
	H.sess = sess;
	return 1;
}

/*
 * The sandbox's CA (its leaves are minted by the conn, and cached in the
 * counter across inputs), the context sluice serves the sandbox with, and
 * the sandbox's client context: it trusts that CA and offers h2 first.
 */
static void
make_sandbox_tls(void)
{
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";
	X509_STORE *store;

	CHECK(ca_new(W.sb.id, NULL, 0, 30 * 86400, &W.counter->ca) == 0);
	CHECK((W.l.tls_down = tlsterm_ctx_new()) != NULL);
	CHECK((H.cli = SSL_CTX_new(TLS_client_method())) != NULL);
	CHECK((store = SSL_CTX_get_cert_store(H.cli)) != NULL);
	CHECK(X509_STORE_add_cert(store, ca_cert(W.counter->ca)) == 1);
	SSL_CTX_set_verify(H.cli, SSL_VERIFY_PEER, NULL);
	CHECK(SSL_CTX_set_alpn_protos(H.cli, alpn, sizeof(alpn) - 1) == 0);
	SSL_CTX_set_mode(H.cli, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_session_cache_mode(H.cli, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(H.cli, new_session_cb);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int i;

	world_init(&W, "fuzz_h2", "FUZZ_H2", "alpn: [h2, http/1.1]\n");
	H.no_validity_check = getenv("FUZZ_H2_NO_VALIDITY_CHECK") != NULL;
	make_sandbox_tls();
	for (i = 0; i < NUP; i++)
		CHECK((H.up_got[i] = malloc(UP_KEEP)) != NULL);
	world_listen(&W, 64);
	return 0;
}

/* ---- the upstreams' side -------------------------------------------- */

/* Upstream k: 0 the newest accepted, 1 the one before, ... */
static struct upc *
up_pick(struct run *r, unsigned k)
{
	return &r->up[(r->up_next + NUP - 1 - k % NUP) % NUP];
}

/* Accepts (the oldest slot makes room: sluice sees a close), serves. */
static void
up_work(struct run *r)
{
	struct upc *u;
	size_t i;
	int fd;

	while ((fd = accept(W.lfd, NULL, NULL)) != -1) {
		u = &r->up[r->up_next];
		r->up_next = (r->up_next + 1) % NUP;
		upc_take(&W, u, fd, r->tickets);
	}
	for (i = 0; i < NUP; i++)
		upc_serve(&r->up[i], r->up_reading);
}

/*
 * A chunked answer whose trailer section is the header lines the
 * upstream got (those with a colon, after the first line): an echo of the
 * injected credential that only trailers carry.
 */
static void
up_trailers(struct upc *u)
{
	static const char head[] = "HTTP/1.1 200 OK\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n";
	const uint8_t *p = u->got + u->echo_at, *end = u->got + u->len, *eol;

	upc_send(u, head, sizeof(head) - 1);
	if ((eol = memmem(p, (size_t)(end - p), "\r\n", 2)) != NULL)
		p = eol + 2;		/* past the request line */
	while (p < end && (eol = memmem(p, (size_t)(end - p), "\r\n",
	    2)) != NULL && eol > p) {
		if (memchr(p, ':', (size_t)(eol - p)) != NULL)
			upc_send(u, p, (size_t)(eol - p) + 2);
		p = eol + 2;
	}
	upc_send(u, "\r\n", 2);
	u->echo_at = u->len;
}

/* Canned answer k (op 10). */
static void
up_canned(struct upc *u, unsigned k)
{
	char head[96];
	size_t n, i;
	int hl;

	k %= NCANNED;
	if (u->fd == -1)
		return;
	if (k < NCANNED - 3) {
		upc_send(u, canned[k].p, canned[k].len);
		return;
	}
	if (k == NCANNED - 1) {
		up_trailers(u);
		return;
	}
	if (k == NCANNED - 3) {
		/* A body longer than the windows: flow control. */
		uint8_t fill[1024];

		n = 160;
		hl = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n"
		    "Content-Length: %zu\r\n\r\n", n * sizeof(fill));
		upc_send(u, head, (size_t)hl);
		memset(fill, 'f', sizeof(fill));
		for (i = 0; i < n; i++)
			upc_send(u, fill, sizeof(fill));
		return;
	}
	/* What it got, framed as a body (the injected credential among it). */
	n = u->len - u->echo_at;
	hl = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n"
	    "Content-Length: %zu\r\n\r\n", n);
	upc_send(u, head, (size_t)hl);
	upc_echo(u, n);
}

/* ---- the sandbox's side: the HTTP/2 client -------------------------- */

static void
check_no_leak(const struct run *r, const uint8_t *p, size_t n,
    const char *where)
{
	if (r->policy != 0 || W.no_secret_check)
		return;
	world_check_leak(&W, p, n, where);
}

static void	invalid(const struct run *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

/*
 * Sluice sent what the client cannot take: a failure, unless raw frames
 * of ours may have made it so.
 */
static void
invalid(const struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (r->desync || H.no_validity_check)
		return;
	fprintf(stderr, "fuzz_h2: sluice sent invalid HTTP/2: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

static struct cstream *
cs_of(struct run *r, int32_t id)
{
	size_t i;

	for (i = 0; i < r->ncs; i++)
		if (r->cs[i].id == id)
			return &r->cs[i];
	return NULL;
}

/* Client stream k: 0 the newest, 1 the one before, ...; NULL: none yet. */
static struct cstream *
cs_pick(struct run *r, unsigned k)
{
	if (r->ncs == 0)
		return NULL;
	return &r->cs[r->ncs - 1 - k % r->ncs];
}

static int
cl_on_header(nghttp2_session *ng, const nghttp2_frame *f,
    const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen,
    uint8_t flags, void *arg)
{
	struct run *r = arg;

	if (W.debug)
		fprintf(stderr, "fuzz_h2: stream %d: %.*s: %.*s\n",
		    f->hd.stream_id, (int)nlen, name, (int)vlen, value);
	check_no_leak(r, name, nlen, "a header name");
	check_no_leak(r, value, vlen, "a header value");
	return 0;
}

static int
cl_on_data(nghttp2_session *ng, uint8_t flags, int32_t id,
    const uint8_t *data, size_t len, void *arg)
{
	struct run *r = arg;
	struct cstream *cs = cs_of(r, id);

	check_no_leak(r, data, len, "a DATA frame");
	if (cs != NULL && cs->got_len + len <= CS_KEEP)
		buf_add(&cs->got, &cs->got_len, &cs->got_cap, data, len);
	return 0;
}

static int
cl_on_invalid(nghttp2_session *ng, const nghttp2_frame *f, int err,
    void *arg)
{
	invalid(arg, "%s (frame type %d, stream %d)", nghttp2_strerror(err),
	    f != NULL ? f->hd.type : -1, f != NULL ? f->hd.stream_id : -1);
	return 0;
}

static int
cl_on_error(nghttp2_session *ng, int err, const char *msg, size_t len,
    void *arg)
{
	invalid(arg, "%.*s", (int)len, msg);
	return 0;
}

static int
cl_on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
	/* Our own GOAWAY (op 14) says NO_ERROR: any other is the client's. */
	if (f->hd.type == NGHTTP2_GOAWAY &&
	    f->goaway.error_code != NGHTTP2_NO_ERROR)
		invalid(arg, "the client ends the connection with error %u",
		    f->goaway.error_code);
	return 0;
}

static int
cl_on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
	struct cstream *cs = cs_of(arg, id);

	if (cs != NULL) {
		cs->closed = 1;
		cs->providing = 0;
	}
	return 0;
}

static const nghttp2_nv trailers[] = {
	{ (uint8_t *)"x-trail", (uint8_t *)"1", 7, 1, NGHTTP2_NV_FLAG_NONE },
	{ (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1,
	    NGHTTP2_NV_FLAG_NONE },
};

/* A stream's body, as the window allows; deferred while none is waiting. */
static ssize_t
cl_body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct cstream *cs = src->ptr;
	size_t n = cs->tx_len < length ? cs->tx_len : length;

	if (n > 0) {
		memcpy(buf, cs->tx, n);
		memmove(cs->tx, cs->tx + n, cs->tx_len - n);
		cs->tx_len -= n;
	}
	if (cs->tx_len == 0 && cs->tx_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		cs->providing = 0;
		if (cs->trail) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			nghttp2_submit_trailer(ng, id, trailers, 2);
		}
		return (ssize_t)n;
	}
	if (n == 0)
		return NGHTTP2_ERR_DEFERRED;
	return (ssize_t)n;
}

/* The client's frames go into what the TLS client sends. */
static void
cl_flush(struct run *r)
{
	const uint8_t *p;
	ssize_t n;

	if (r->ng == NULL)
		return;
	while ((n = nghttp2_session_mem_send(r->ng, &p)) > 0)
		buf_add(&r->cl_tx, &r->cl_len, &r->cl_cap, p, (size_t)n);
	CHECK(n == 0);
}

/* The session of the sandbox's client, once its TLS chose h2. */
static void
cl_new(struct run *r)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_settings_entry set[2] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1024 },
	};

	CHECK(nghttp2_session_callbacks_new(&cb) == 0);
	CHECK(nghttp2_option_new(&opt) == 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, cl_on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
	    cl_on_data);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb,
	    cl_on_invalid);
	nghttp2_session_callbacks_set_error_callback2(cb, cl_on_error);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb,
	    cl_on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
	    cl_on_close);
	if (r->manual_window)
		nghttp2_option_set_no_auto_window_update(opt, 1);
	CHECK(nghttp2_session_client_new2(&r->ng, cb, r, opt) == 0);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	CHECK(nghttp2_submit_settings(r->ng, NGHTTP2_FLAG_NONE, set,
	    r->small_window ? 2 : 1) == 0);
	cl_flush(r);
}

/* What sluice sent, decrypted, to the client session. */
static void
cl_recv(struct run *r, const uint8_t *p, size_t n)
{
	ssize_t rv;

	if (r->sb_len + n <= SB_KEEP) {
		memcpy(r->sb_got + r->sb_len, p, n);
		r->sb_len += n;
	}
	if (r->ng == NULL)
		return;
	rv = nghttp2_session_mem_recv(r->ng, p, n);
	if (rv < 0) {
		fprintf(stderr, "fuzz_h2: the client cannot read sluice's "
		    "frames: %s\n", nghttp2_strerror((int)rv));
		abort();
	}
}

/* The TLS client: its handshake, then reads and writes. */
static void
sb_work(struct run *r)
{
	const unsigned char *alpn;
	unsigned alen = 0;
	uint8_t buf[16384];
	int n, e;

	if (r->ssl == NULL)
		return;
	if (!r->hs_done) {
		if (SSL_do_handshake(r->ssl) != 1) {
			e = SSL_get_error(r->ssl, -1);
			if (e != SSL_ERROR_WANT_READ &&
			    e != SSL_ERROR_WANT_WRITE) {
				ERR_print_errors_fp(stderr);
				CHECK(!"the sandbox's handshake failed");
			}
			return;
		}
		SSL_get0_alpn_selected(r->ssl, &alpn, &alen);
		CHECK(alen == 2 && memcmp(alpn, "h2", 2) == 0);
		r->hs_done = 1;
		cl_new(r);
	}
	while (r->sb_reading && !r->sb_eof &&
	    (n = SSL_read(r->ssl, buf, sizeof(buf))) > 0) {
		cl_recv(r, buf, (size_t)n);
		cl_flush(r);
	}
	if (r->sb_reading && !r->sb_eof) {
		e = SSL_get_error(r->ssl, -1);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			r->sb_eof = 1;	/* close_notify, FIN, an alert */
	}
	ERR_clear_error();
	cl_flush(r);
	while (r->cl_len > 0 && !r->sb_wclosed && !r->sb_corked) {
		n = SSL_write(r->ssl, r->cl_tx, (int)(r->cl_len > 16384 ?
		    16384 : r->cl_len));
		if (n <= 0) {
			e = SSL_get_error(r->ssl, n);
			if (e != SSL_ERROR_WANT_WRITE &&
			    e != SSL_ERROR_WANT_READ)
				r->sb_wclosed = 1;	/* sluice went */
			break;
		}
		memmove(r->cl_tx, r->cl_tx + n, r->cl_len - (size_t)n);
		r->cl_len -= (size_t)n;
	}
	if (r->sb_wclosed)
		r->cl_len = 0;
	ERR_clear_error();
}

static void
sb_close(struct run *r)
{
	SSL_free(r->ssl);
	r->ssl = NULL;
	if (r->sb != -1)
		close(r->sb);
	r->sb = -1;
}

/* One loop turn and both sides' work (a void *: world_end's too). */
static void
turn(void *r)
{
	event_base_loop(W.base, EVLOOP_NONBLOCK);
	up_work(r);
	sb_work(r);
}

/* ---- the client's steps ---------------------------------------------- */

/* "{PH}" in s as the sandbox's placeholder, into out (cap bytes). */
static size_t
with_ph(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	while (*s != '\0' && n + PH_LEN < cap) {
		if (strncmp(s, "{PH}", 4) == 0) {
			memcpy(out + n, W.ph, PH_LEN);
			n += PH_LEN;
			s += 4;
		} else
			out[n++] = *s++;
	}
	out[n] = '\0';
	return n;
}

static void
nv_set(nghttp2_nv *nv, const char *name, const char *value, size_t vlen)
{
	nv->name = (uint8_t *)name;
	nv->namelen = strlen(name);
	nv->value = (uint8_t *)value;
	nv->valuelen = vlen;
	nv->flags = NGHTTP2_NV_FLAG_NONE;
}

static struct cstream *
cs_new(struct run *r, int32_t id)
{
	struct cstream *cs;

	if (id <= 0 || r->ncs == NCS)
		return NULL;
	cs = &r->cs[r->ncs++];
	memset(cs, 0, sizeof(*cs));
	cs->id = id;
	return cs;
}

/* Op 0: a request's HEADERS (and the stream's data provider). */
static void
cl_request(struct run *r, uint8_t m, uint8_t x)
{
	static char pad[5][3500];
	const char *method = methods[m & 7];
	char path[256], auth[64], ph[PH_LEN + 64];
	nghttp2_nv nv[24];
	nghttp2_data_provider dp;
	struct cstream *cs = NULL;
	size_t n = 0, i;
	int connect = strcmp(method, "CONNECT") == 0, how = m >> 6;
	int32_t id;

	if (r->ng == NULL)
		return;
	if (pad[0][0] == '\0')
		memset(pad, 'p', sizeof(pad));
	with_ph(paths[(m >> 3) & 7], path, sizeof(path));
	if (how < 3)
		snprintf(auth, sizeof(auth), "%s%s", authorities[how],
		    connect ? ":443" : "");
	nv_set(&nv[n++], ":method", method, strlen(method));
	if (!connect) {
		nv_set(&nv[n++], ":scheme", "https", 5);
		nv_set(&nv[n++], ":path", path, strlen(path));
	}
	if (how < 3)
		nv_set(&nv[n++], ":authority", auth, strlen(auth));
	else
		nv_set(&nv[n++], "host", HOST, sizeof(HOST) - 1);
	if (x & 0x02) {
		nv_set(&nv[n++], "content-type", "application/grpc", 16);
		nv_set(&nv[n++], "te", "trailers", 8);
	}
	if (x & 0x04) {
		nv_set(&nv[n++], "cookie", "a=1", 3);
		nv_set(&nv[n++], "cookie", "b=2", 3);
	}
	if (x & 0x08) {
		size_t l = with_ph("Bearer {PH}", ph, sizeof(ph));

		nv_set(&nv[n++], "authorization", ph, l);
	}
	if (x & 0x10)
		nv_set(&nv[n++], "content-length", "96", 2);
	if (x & 0x20)
		for (i = 0; i < 5; i++)
			nv_set(&nv[n++], "x-pad", pad[i], sizeof(pad[i]));
	if (x & 0x40)
		nv_set(&nv[n++], "connection", "keep-alive", 10);
	if (x & 0x80) {
		nv_set(&nv[n++], "expect", "100-continue", 12);
		nv_set(&nv[n++], "accept-encoding", "gzip", 4);
	}
	/* Without END_STREAM, a body may follow: a provider that waits. */
	dp.source.ptr = NULL;
	dp.read_callback = cl_body_cb;
	if (!(x & 0x01)) {
		/* Its slot is taken only once nghttp2 gave it an id. */
		if (r->ncs == NCS)
			return;
		cs = &r->cs[r->ncs];
		memset(cs, 0, sizeof(*cs));
		dp.source.ptr = cs;
	}
	id = nghttp2_submit_request(r->ng, NULL, nv, n, cs ? &dp : NULL,
	    NULL);
	if (id <= 0)
		return;
	if (cs != NULL) {
		r->ncs++;
		cs->id = id;
		cs->providing = 1;
	} else
		cs_new(r, id);
}

/* Op 1: body bytes for a stream, and maybe its end. */
static void
cl_data(struct run *r, uint8_t s, uint8_t k)
{
	static const char fill[] = "data data data data data data data data ";
	struct cstream *cs = cs_pick(r, s);
	size_t n = (size_t)(k & 0x3f) * 96, i;
	nghttp2_data_provider dp;

	if (r->ng == NULL || cs == NULL || cs->closed)
		return;
	for (i = 0; i < n; i += 32)
		buf_add(&cs->tx, &cs->tx_len, &cs->tx_cap, fill, 32);
	if ((k & 0x40) && cs->tx_len >= PH_LEN)
		memcpy(cs->tx + cs->tx_len - PH_LEN, W.ph, PH_LEN);
	if (k & 0x80)
		cs->tx_end = 1;
	if (cs->providing) {
		nghttp2_session_resume_data(r->ng, cs->id);
		return;
	}
	dp.source.ptr = cs;
	dp.read_callback = cl_body_cb;
	if (nghttp2_submit_data(r->ng, NGHTTP2_FLAG_END_STREAM, cs->id,
	    &dp) == 0)
		cs->providing = 1;
}

/* Op 2: a reset, or a burst of streams reset by us or by sluice. */
static void
cl_resets(struct run *r, uint8_t s, uint8_t c)
{
	struct cstream *cs = cs_pick(r, s);
	nghttp2_nv nv[5];
	int i, k, id;

	if (r->ng == NULL)
		return;
	if (c < 0x80) {
		nghttp2_submit_rst_stream(r->ng, NGHTTP2_FLAG_NONE,
		    cs != NULL ? cs->id : 1, c & 0x0f);
		return;
	}
	nv_set(&nv[0], ":method", "GET", 3);
	nv_set(&nv[1], ":scheme", "https", 5);
	nv_set(&nv[2], ":path", "/pub/a", 6);
	nv_set(&nv[3], ":authority", HOST, sizeof(HOST) - 1);
	nv_set(&nv[4], "connection", "close", 5);
	k = (c & 0x3f) + 1;
	for (i = 0; i < k; i++) {
		id = nghttp2_submit_request(r->ng, NULL, nv,
		    (c & 0x40) ? 5 : 4, NULL, NULL);
		if (id <= 0)
			break;
		/* Its HEADERS go first: else nghttp2 drops the request. */
		cl_flush(r);
		if (!(c & 0x40))
			nghttp2_submit_rst_stream(r->ng, NGHTTP2_FLAG_NONE, id,
			    NGHTTP2_CANCEL);
	}
}

/* Op 4: one SETTINGS entry the client's session accepts to send. */
static void
cl_settings(struct run *r, uint8_t k, uint8_t v)
{
	nghttp2_settings_entry e;

	if (r->ng == NULL)
		return;
	e.settings_id = (int32_t)(k % 6 + 1);
	switch (e.settings_id) {
	case NGHTTP2_SETTINGS_HEADER_TABLE_SIZE:
		e.value = (uint32_t)v * 64;
		break;
	case NGHTTP2_SETTINGS_ENABLE_PUSH:
		e.value = 0;
		break;
	case NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS:
		e.value = v;
		break;
	case NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE:
		e.value = v == 255 ? 0x7fffffff : (uint32_t)v * 257;
		break;
	case NGHTTP2_SETTINGS_MAX_FRAME_SIZE:
		e.value = 16384 + (uint32_t)v * 4096;
		break;
	default:
		e.value = (uint32_t)v * 64;
		break;
	}
	nghttp2_submit_settings(r->ng, NGHTTP2_FLAG_NONE, &e, 1);
}

/* Op 6: a raw frame (its length is its payload's: the framing holds). */
static void
cl_raw(struct run *r, const uint8_t *op, const uint8_t *b, size_t len)
{
	uint8_t type = op[0], flags = op[1], s = op[2], hd[9];
	struct cstream *cs;
	uint32_t id = 0;
	int i, k = (op[3] & 0x3f) + 1;

	if (s & 0x80)
		id = s & 0x7f;
	else if (s != 0 && (cs = cs_pick(r, s)) != NULL)
		id = (uint32_t)cs->id;
	/* What changes what sluice may send, unknown to the client. */
	if (type == NGHTTP2_HEADERS || type == NGHTTP2_CONTINUATION ||
	    type == NGHTTP2_PUSH_PROMISE || type == NGHTTP2_SETTINGS ||
	    type == NGHTTP2_WINDOW_UPDATE)
		r->desync = 1;
	hd[0] = (uint8_t)(len >> 16);
	hd[1] = (uint8_t)(len >> 8);
	hd[2] = (uint8_t)len;
	hd[3] = type;
	hd[4] = flags;
	hd[5] = (uint8_t)(id >> 24);
	hd[6] = (uint8_t)(id >> 16);
	hd[7] = (uint8_t)(id >> 8);
	hd[8] = (uint8_t)id;
	/* The client's frames so far go first. */
	cl_flush(r);
	for (i = 0; i < k; i++) {
		buf_add(&r->cl_tx, &r->cl_len, &r->cl_cap, hd, sizeof(hd));
		buf_add(&r->cl_tx, &r->cl_len, &r->cl_cap, b, len);
	}
}

/* Op 13: trailers end a stream (after its body, if one is on its way). */
static void
cl_trailers(struct run *r, uint8_t s)
{
	struct cstream *cs = cs_pick(r, s);

	if (r->ng == NULL || cs == NULL || cs->closed)
		return;
	if (cs->providing) {
		cs->trail = 1;
		cs->tx_end = 1;
		nghttp2_session_resume_data(r->ng, cs->id);
	} else
		nghttp2_submit_headers(r->ng, NGHTTP2_FLAG_END_STREAM, cs->id,
		    NULL, trailers, 2, NULL);
}

/* Op 14: the sandbox ends its side. */
static void
sb_end(struct run *r, uint8_t k)
{
	switch (k % 4) {
	case 0:
		if (r->ng != NULL)
			nghttp2_submit_goaway(r->ng, NGHTTP2_FLAG_NONE,
			    nghttp2_session_get_last_proc_stream_id(r->ng),
			    NGHTTP2_NO_ERROR, NULL, 0);
		break;
	case 1:
		sb_work(r);	/* what waits goes first */
		if (r->sb != -1)
			shutdown(r->sb, SHUT_WR);
		r->sb_wclosed = 1;
		break;
	case 2:
		sb_work(r);
		if (r->ssl != NULL && r->hs_done)
			SSL_shutdown(r->ssl);
		r->sb_wclosed = 1;
		ERR_clear_error();
		break;
	default:
		sb_work(r);
		sb_close(r);
		break;
	}
}

/* ---- one input ------------------------------------------------------ */

/*
 * The sandbox's TLS client writes its ClientHello; the conn starts with
 * it read (c->peek), as conn_accept, the sniffer and the decision leave
 * a TLS connection to an intercepted host for icpt_start.
 */
static void
start_conn(struct run *r, int resume)
{
	static uint8_t hello[16384];
	struct conn *c;
	size_t len = 0;
	ssize_t n;
	int sp[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	nonblock(sp[0]);
	nonblock(sp[1]);
	r->sb = sp[0];
	CHECK((r->ssl = SSL_new(H.cli)) != NULL);
	SSL_set_fd(r->ssl, sp[0]);
	SSL_set_connect_state(r->ssl);
	CHECK(SSL_set_tlsext_host_name(r->ssl, HOST) == 1);
	CHECK(SSL_set1_host(r->ssl, HOST) == 1);
	if (resume && H.sess != NULL)
		SSL_set_session(r->ssl, H.sess);
	CHECK(SSL_do_handshake(r->ssl) == -1 &&
	    SSL_get_error(r->ssl, -1) == SSL_ERROR_WANT_READ);
	while ((n = read(sp[1], hello + len, sizeof(hello) - len)) > 0)
		len += (size_t)n;
	CHECK(len > 0 && len < sizeof(hello));

	c = world_conn(&W, sp[1], r->policy, SNIFF_TLS, UP_PORT, hello, len);
	c->dec.verdict = VERDICT_INTERCEPT;
	c->dec.reason = "intercept";
	c->dec.alpn = &c->pol->alpn;
	icpt_start(c);
}

/* What the sandbox's streams received, whole, holds no form of the secret. */
static void
check_bodies(const struct run *r)
{
	size_t i;

	check_no_leak(r, r->sb_got, r->sb_len, "the decrypted bytes");
	for (i = 0; i < r->ncs; i++)
		check_no_leak(r, r->cs[i].got, r->cs[i].got_len,
		    "a stream's body");
}

/* Operand i of the step at at, or 0 past the end. */
static uint8_t
arg(const uint8_t *data, size_t size, size_t *at)
{
	return *at < size ? data[(*at)++] : 0;
}

/* Operands L and B[0..L): B, and L cut to what is left. */
static const uint8_t *
arg_bytes(const uint8_t *data, size_t size, size_t *at, size_t *len)
{
	const uint8_t *b;
	size_t n = arg(data, size, at);

	if (n > size - *at)
		n = size - *at;
	b = data + *at;
	*at += n;
	*len = n;
	return b;
}

static void
step(struct run *r, uint8_t op, const uint8_t *data, size_t size,
    size_t *at)
{
	const uint8_t *b;
	uint8_t o[4], a0, a1;
	size_t n;
	int i, k;

	switch (op) {
	case 0:
		a0 = arg(data, size, at);
		a1 = arg(data, size, at);
		cl_request(r, a0, a1);
		break;
	case 1:
		a0 = arg(data, size, at);
		a1 = arg(data, size, at);
		cl_data(r, a0, a1);
		break;
	case 2:
		a0 = arg(data, size, at);
		a1 = arg(data, size, at);
		cl_resets(r, a0, a1);
		break;
	case 3:
		a0 = arg(data, size, at);
		a1 = arg(data, size, at);
		if (r->ng != NULL && (a0 & 0x80 || cs_pick(r, a0) != NULL))
			nghttp2_submit_window_update(r->ng, NGHTTP2_FLAG_NONE,
			    (a0 & 0x80) ? 0 : cs_pick(r, a0)->id,
			    ((int32_t)a1 + 1) * 256);
		break;
	case 4:
		a0 = arg(data, size, at);
		a1 = arg(data, size, at);
		cl_settings(r, a0, a1);
		break;
	case 5:
		k = arg(data, size, at) + 1;
		for (i = 0; i < k && r->ng != NULL; i++)
			nghttp2_submit_ping(r->ng, NGHTTP2_FLAG_NONE, NULL);
		break;
	case 6:
		for (i = 0; i < 4; i++)
			o[i] = arg(data, size, at);
		b = arg_bytes(data, size, at, &n);
		cl_raw(r, o, b, n);
		break;
	case 7:
		a0 = arg(data, size, at);
		b = arg_bytes(data, size, at, &n);
		upc_send(up_pick(r, a0), b, n);
		break;
	case 8:
		a0 = arg(data, size, at);
		upc_echo(up_pick(r, a0), (size_t)arg(data, size, at) * 4);
		break;
	case 9: {
		struct upc *u = up_pick(r, arg(data, size, at));

		a1 = arg(data, size, at);
		if (a1 % 3 == 0)
			upc_drop(u, 1);
		else if (a1 % 3 == 1) {
			if (u->fd != -1 && u->ready) {
				up_work(r);	/* what waits goes first */
				SSL_shutdown(u->ssl);
				ERR_clear_error();
			}
			upc_drop(u, 0);
		} else if (u->fd != -1) {
			up_work(r);
			shutdown(u->fd, SHUT_WR);
		}
		break;
	}
	case 10:
		a0 = arg(data, size, at);
		up_canned(up_pick(r, a0), arg(data, size, at));
		break;
	case 11:
		k = arg(data, size, at) % 16 + 1;
		for (i = 0; i < k; i++)
			turn(r);
		break;
	case 12:
		a0 = arg(data, size, at);
		if (a0 & 1)
			r->sb_reading = !r->sb_reading;
		if (a0 & 2)
			r->up_reading = !r->up_reading;
		if (a0 & 4)
			r->sb_corked = !r->sb_corked;
		break;
	case 13:
		cl_trailers(r, arg(data, size, at));
		break;
	case 14:
		sb_end(r, arg(data, size, at));
		break;
	default:
		b = arg_bytes(data, size, at, &n);
		r->desync = 1;
		cl_flush(r);
		buf_add(&r->cl_tx, &r->cl_len, &r->cl_cap, b, n);
		break;
	}
	cl_flush(r);
}

static void
run_free(struct run *r)
{
	size_t i;

	for (i = 0; i < r->ncs; i++) {
		free(r->cs[i].tx);
		free(r->cs[i].got);
	}
	for (i = 0; i < NUP; i++)
		free(r->up[i].tx);
	nghttp2_session_del(r->ng);
	free(r->cl_tx);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *sb_buf;
	static struct run r;
	size_t at = 1, steps = 0, i;

	if (size < 1 || W.skip)
		return 0;
	if (sb_buf == NULL)
		CHECK((sb_buf = malloc(SB_KEEP)) != NULL);
	memset(&r, 0, sizeof(r));
	r.sb = -1;
	r.sb_reading = r.up_reading = 1;
	r.sb_got = sb_buf;
	for (i = 0; i < NUP; i++) {
		r.up[i].fd = -1;
		r.up[i].got = H.up_got[i];
	}
	r.policy = data[0] & 1;
	r.tickets = (data[0] >> 1) & 1;
	r.manual_window = (data[0] >> 2) & 1;
	r.small_window = (data[0] >> 3) & 1;
	world_begin(&W);

	start_conn(&r, (data[0] >> 4) & 1);
	for (i = 0; i < HS_TURNS && !r.hs_done; i++)
		turn(&r);
	CHECK(r.hs_done);
	while (at < size && steps++ < MAX_STEPS) {
		step(&r, data[at++] & 0x0f, data, size, &at);
		turn(&r);
	}

	if (W.debug)
		fprintf(stderr, "fuzz_h2: script done, %zu streams, %s, "
		    "connection window %d\n", r.ncs, r.desync ?
		    "raw frames sent" : "in step", r.ng != NULL ?
		    nghttp2_session_get_remote_window_size(r.ng) : -1);
	/* Both sides read what is owed, then go; the conn must follow. */
	r.sb_reading = r.up_reading = 1;
	r.sb_corked = 0;
	for (i = 0; i < 8 && world_alive(&W); i++)
		turn(&r);
	sb_work(&r);
	sb_close(&r);
	for (i = 0; i < NUP; i++)
		upc_drop(&r.up[i], 0);
	world_end(&W, turn, &r);
	/* Whatever was accepted meanwhile (nothing should be). */
	up_work(&r);
	for (i = 0; i < NUP; i++)
		upc_drop(&r.up[i], 0);
	if (W.debug) {
		size_t got = 0;

		for (i = 0; i < NUP; i++)
			got += r.up[i].len;
		fprintf(stderr, "fuzz_h2: the upstreams got %zu bytes, the "
		    "sandbox %zu\n", got, r.sb_len);
	}
	check_bodies(&r);
	run_free(&r);
	return 0;
}
