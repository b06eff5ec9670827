/*
 * icpt_load.c: the HTTPS load generator of tests/bench/icpt.sh.  One thread,
 * epoll, non-blocking OpenSSL; every connection verifies the server's chain
 * (CAFILE) and name (SNI).  Not part of the build: icpt.sh compiles it into
 * its work directory (cc -O2 icpt_load.c -lssl -lcrypto).
 *
 * usage: icpt_load MODE ADDR PORT SNI PATH CONNS SECONDS CAFILE
 *   MODE  ka      CONNS keep-alive connections, each sends GET PATH, waits
 *                 for the whole answer, sends the next; latency = one request
 *         new     CONNS slots, each a new connection with one request
 *                 (Connection: close), full handshake every time; latency =
 *                 connect to the end of the answer
 *         resume  as new, but offering the latest session ticket received
 *                 (kept and offered again until a newer one comes, as
 *                 openssl s_client -sess_in does; browsers use a TLS 1.3
 *                 ticket once)
 * The first second (a fifth of SECONDS when shorter) is warm-up and not
 * counted.  At the end no new request or connection starts; those under way
 * finish (3 s at most) and every connection ends with close_notify, so the
 * server sees no abrupt ends.  Prints one line of key=value:
 *   reqs rps p50_us p90_us p99_us max_us errors reconnects resumed tickets
 *   cpu_us
 * (tickets: session tickets received, warm-up included; cpu_us: this
 * process's CPU time, the whole run)
 * Every answer must be 200 with a Content-Length, or chunked (sluice
 * re-frames answers it redacts; the end is the last-chunk line, which the
 * small answers benchmarked never hold inside); anything else counts as an
 * error (and ends the connection).  Exits 1 when nothing succeeded.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

enum mode { M_KA, M_NEW, M_RESUME };
enum st { S_CONNECT, S_HANDSHAKE, S_SEND, S_RECV, S_DEAD };

#define RBUF	65536
#define LAT_MAX	(8u * 1024 * 1024)

struct cx {
	int		 fd;
	SSL		*ssl;
	enum st		 st;
	size_t		 sent;
	char		 hbuf[8192];	/* answer head */
	size_t		 hlen;
	long long	 body_left;	/* -1: head not complete */
	int		 chunked;	/* the body ends with its last chunk */
	char		 tail[7];	/* its last bytes */
	uint64_t	 t_conn, t_req;
	int		 reused;	/* the handshake resumed a session */
};

static enum mode mode;
static struct sockaddr_storage dst;
static socklen_t dstlen;
static const char *sni;
static char req[1024];
static size_t reqlen;
static SSL_CTX *ctx;
static unsigned char *last_der;	/* the latest ticket's session, DER */
static int last_derlen;
static int ep;
static uint64_t t_count;	/* counting from here */
static uint64_t t_stop;		/* counting up to here; then draining */
static int draining;
static uint64_t n_ok, n_err, n_reconn, n_resumed, n_tickets;
static uint32_t *lat;
static size_t nlat;

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void
record(uint64_t start)
{
	uint64_t t = now_us();

	if (start < t_count || t > t_stop)
		return;
	n_ok++;
	if (nlat < LAT_MAX)
		lat[nlat++] = (uint32_t)(t - start);
}

static void
cx_close(struct cx *c, int clean)
{
	if (c->ssl != NULL) {
		if (clean)
			(void)SSL_shutdown(c->ssl);	/* close_notify, once */
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->st = S_DEAD;
}

static int
cx_open(struct cx *c)
{
	struct epoll_event ev;
	int one = 1;

	c->fd = socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->t_conn = now_us();
	if (connect(c->fd, (struct sockaddr *)&dst, dstlen) != 0 &&
	    errno != EINPROGRESS) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	if ((c->ssl = SSL_new(ctx)) == NULL ||
	    SSL_set_fd(c->ssl, c->fd) != 1 ||
	    SSL_set_tlsext_host_name(c->ssl, sni) != 1 ||
	    SSL_set1_host(c->ssl, sni) != 1)
		return -1;
	if (mode == M_RESUME && last_der != NULL) {
		/*
		 * A fresh copy each time: OpenSSL does not offer again a
		 * session object that a TLS 1.3 resumption used (single-use
		 * tickets); the same ticket decoded anew is offered.
		 */
		const unsigned char *q = last_der;
		SSL_SESSION *f = d2i_SSL_SESSION(NULL, &q, last_derlen);

		if (f != NULL) {
			SSL_set_session(c->ssl, f);
			SSL_SESSION_free(f);
		}
	}
	SSL_set_connect_state(c->ssl);
	c->st = S_CONNECT;
	c->sent = 0;
	c->hlen = 0;
	c->body_left = -1;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
	ev.data.ptr = c;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
		return -1;
	return 0;
}

/* The answer head in c->hbuf[0..end): 200 with a Content-Length? */
static int
parse_head(struct cx *c, size_t end)
{
	char *p, *e = c->hbuf + end;
	long long cl = -1;

	c->hbuf[end - 1] = '\0';
	if (strncmp(c->hbuf, "HTTP/1.1 200 ", 13) != 0 &&
	    strncmp(c->hbuf, "HTTP/1.0 200 ", 13) != 0) {
		static int shown;
		if (shown++ < 3) {
			char *nl = strchr(c->hbuf, '\r');
			if (nl)
				*nl = '\0';
			fprintf(stderr, "icpt_load: answer '%s'\n", c->hbuf);
		}
		return -1;
	}
	c->chunked = 0;
	for (p = c->hbuf; p < e && (p = strstr(p, "\r\n")) != NULL; p += 2) {
		if (strncasecmp(p + 2, "content-length:", 15) == 0)
			cl = strtoll(p + 17, NULL, 10);
		else if (strncasecmp(p + 2, "transfer-encoding: chunked", 26) == 0)
			c->chunked = 1;
		else if (strncasecmp(p + 2, "transfer-encoding:", 18) == 0)
			return -1;
	}
	if (c->chunked) {
		memset(c->tail, 0, sizeof(c->tail));
		c->body_left = 1;	/* until the last chunk */
		return 0;
	}
	if (cl < 0)
		return -1;
	c->body_left = cl;
	return 0;
}

/* Drives c until it would block; 0 while it lives, -1 when it ended. */
static int
cx_run(struct cx *c)
{
	char buf[RBUF];
	int r, e;

	for (;;) {
		switch (c->st) {
		case S_CONNECT:
		case S_HANDSHAKE:
			c->st = S_HANDSHAKE;
			r = SSL_do_handshake(c->ssl);
			if (r == 1) {
				c->reused = SSL_session_reused(c->ssl);
				c->st = S_SEND;
				c->t_req = now_us();
				break;
			}
			e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			{
				static int shown;
				if (shown++ < 3) {
					fprintf(stderr, "icpt_load: handshake failed (%d, verify %ld): ",
					    e, SSL_get_verify_result(c->ssl));
					ERR_print_errors_fp(stderr);
					fputc('\n', stderr);
				}
			}
			ERR_clear_error();
			n_err++;
			cx_close(c, 0);
			return -1;
		case S_SEND:
			r = SSL_write(c->ssl, req + c->sent, (int)(reqlen - c->sent));
			if (r > 0) {
				c->sent += (size_t)r;
				if (c->sent == reqlen) {
					c->st = S_RECV;
					c->hlen = 0;
					c->body_left = -1;
				}
				break;
			}
			e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			ERR_clear_error();
			n_err++;
			cx_close(c, 0);
			return -1;
		case S_RECV:
			r = SSL_read(c->ssl, buf, sizeof(buf));
			if (r <= 0) {
				e = SSL_get_error(c->ssl, r);
				if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
					return 0;
				ERR_clear_error();
				/* the server closed: between answers only a reconnect */
				if (mode == M_KA && c->hlen == 0 && c->body_left < 0) {
					n_reconn++;
				} else
					n_err++;
				cx_close(c, 0);
				return -1;
			} else {
				size_t off = 0, n = (size_t)r;

				if (c->body_left < 0) {
					size_t take = n, i;
					char *end;

					if (take > sizeof(c->hbuf) - c->hlen)
						take = sizeof(c->hbuf) - c->hlen;
					memcpy(c->hbuf + c->hlen, buf, take);
					i = c->hlen >= 3 ? c->hlen - 3 : 0;
					c->hlen += take;
					end = memmem(c->hbuf + i, c->hlen - i, "\r\n\r\n", 4);
					if (end == NULL) {
						if (c->hlen == sizeof(c->hbuf)) {
							n_err++;
							cx_close(c, 0);
							return -1;
						}
						break;
					}
					size_t hend = (size_t)(end - c->hbuf) + 4;
					if (parse_head(c, hend) != 0) {
						n_err++;
						cx_close(c, 0);
						return -1;
					}
					off = hend - (c->hlen - take);
				}
				if (c->chunked) {
					size_t k, m = n - off;

					for (k = 0; k < m; k++) {
						memmove(c->tail, c->tail + 1, sizeof(c->tail) - 1);
						c->tail[sizeof(c->tail) - 1] = buf[off + k];
					}
					if (memcmp(c->tail, "\r\n0\r\n\r\n", 7) != 0)
						break;
					c->body_left = 0;
				} else
					c->body_left -= (long long)(n - off);
				if (c->body_left > 0)
					break;
				if (c->body_left < 0) {	/* more than announced */
					n_err++;
					cx_close(c, 0);
					return -1;
				}
				/* one whole answer */
				if (mode == M_KA && !draining) {
					record(c->t_req);
					c->st = S_SEND;
					c->sent = 0;
					c->t_req = now_us();
					break;
				}
				if (mode == M_KA) {	/* draining: end it cleanly */
					record(c->t_req);
					cx_close(c, 1);
					return -1;
				}
				if (c->t_conn >= t_count && now_us() <= t_stop && c->reused)
					n_resumed++;
				record(c->t_conn);
				cx_close(c, 1);
				return -1;
			}
			break;
		case S_DEAD:
			return -1;
		}
	}
}

/* A ticket arrived: the next connection offers it (resume mode). */
static int
new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	(void)ssl;
	unsigned char *der = NULL;
	int len;

	n_tickets++;
	if (mode != M_RESUME || !SSL_SESSION_is_resumable(sess) ||
	    (len = i2d_SSL_SESSION(sess, &der)) <= 0)
		return 0;
	OPENSSL_free(last_der);
	last_der = der;
	last_derlen = len;
	return 0;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	struct epoll_event evs[256];
	struct cx *cxs;
	int conns, secs, i, n;
	uint64_t t0, t_end, warm;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&dst;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&dst;

	if (argc != 9) {
		fprintf(stderr, "usage: icpt_load ka|new|resume ADDR PORT SNI PATH CONNS SECONDS CAFILE\n");
		return 2;
	}
	if (strcmp(argv[1], "ka") == 0)
		mode = M_KA;
	else if (strcmp(argv[1], "new") == 0)
		mode = M_NEW;
	else if (strcmp(argv[1], "resume") == 0)
		mode = M_RESUME;
	else
		return 2;
	memset(&dst, 0, sizeof(dst));
	if (inet_pton(AF_INET, argv[2], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)atoi(argv[3]));
		dstlen = sizeof(*s4);
	} else if (inet_pton(AF_INET6, argv[2], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)atoi(argv[3]));
		dstlen = sizeof(*s6);
	} else
		return 2;
	sni = argv[4];
	conns = atoi(argv[6]);
	secs = atoi(argv[7]);
	if (conns < 1 || secs < 1)
		return 2;
	reqlen = (size_t)snprintf(req, sizeof(req),
	    "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: icpt_load\r\nAccept: */*\r\n%s\r\n",
	    argv[5], sni, mode == M_KA ? "" : "Connection: close\r\n");

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_load_verify_locations(ctx, argv[8], NULL) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, new_session_cb);

	if ((lat = malloc(sizeof(*lat) * LAT_MAX)) == NULL ||
	    (cxs = calloc((size_t)conns, sizeof(*cxs))) == NULL ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return 1;
	t0 = now_us();
	warm = secs >= 5 ? 1000000 : (uint64_t)secs * 200000;
	t_count = t0 + warm;
	t_end = t0 + (uint64_t)secs * 1000000;
	t_stop = t_end;
	for (i = 0; i < conns; i++) {
		cxs[i].fd = -1;
		if (cx_open(&cxs[i]) != 0) {
			n_err++;
			cx_close(&cxs[i], 0);
		} else
			(void)cx_run(&cxs[i]);
	}
	for (;;) {
		uint64_t t = now_us();

		if (t >= t_end && !draining) {
			/* stop: let answers owed arrive, end connections cleanly */
			draining = 1;
		}
		if (draining) {
			for (i = 0; i < conns && cxs[i].st == S_DEAD; i++)
				;
			if (i == conns || t >= t_end + 3000000)
				break;
		}
		n = epoll_wait(ep, evs, 256, 100);
		for (i = 0; i < n; i++) {
			struct cx *c = evs[i].data.ptr;

			if (c->st == S_DEAD)
				continue;
			(void)cx_run(c);
		}
		/* refill: dead slots open a new connection */
		for (i = 0; i < conns; i++) {
			while (cxs[i].st == S_DEAD && !draining) {
				if (cx_open(&cxs[i]) != 0) {
					n_err++;
					cx_close(&cxs[i], 0);
					if (n_err > 100000)
						goto out;
					continue;
				}
				(void)cx_run(&cxs[i]);
			}
		}
		if (n_err > 100000)
			break;
	}
out:
	for (i = 0; i < conns; i++)	/* still owed an answer after 3 s */
		if (cxs[i].st != S_DEAD) {
			n_err++;
			cx_close(&cxs[i], 0);
		}
	{
		double dur = (double)(t_stop - t_count) / 1e6;
		uint32_t p50 = 0, p90 = 0, p99 = 0, mx = 0;
		struct rusage ru;
		uint64_t cpu = 0;

		if (getrusage(RUSAGE_SELF, &ru) == 0)
			cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
			    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);

		if (nlat > 0) {
			qsort(lat, nlat, sizeof(*lat), cmp_u32);
			p50 = lat[nlat * 50 / 100];
			p90 = lat[nlat * 90 / 100];
			p99 = lat[nlat * 99 / 100];
			mx = lat[nlat - 1];
		}
		printf("reqs=%llu rps=%.0f p50_us=%u p90_us=%u p99_us=%u max_us=%u "
		    "errors=%llu reconnects=%llu resumed=%llu tickets=%llu cpu_us=%llu\n",
		    (unsigned long long)n_ok, dur > 0 ? (double)n_ok / dur : 0.0,
		    p50, p90, p99, mx, (unsigned long long)n_err,
		    (unsigned long long)n_reconn, (unsigned long long)n_resumed,
		    (unsigned long long)n_tickets, (unsigned long long)cpu);
	}
	return n_ok > 0 ? 0 : 1;
}
