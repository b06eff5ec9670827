/*
 * sslmem.c: what one idle TLS server connection costs OpenSSL itself, the
 * floor under any proxy's memory per idle intercepted connection.
 *
 * Makes N connections over socketpairs with a P-256 certificate (as
 * ../shared/bench does), TLS 1.3 unless -2, SSL_MODE_RELEASE_BUFFERS on
 * both sides, one request and one answer each, then frees the client
 * sides and counts what OpenSSL still holds, by the file and line that
 * allocated it (CRYPTO_set_mem_functions).  Build: make
 * tests/bench/sslmem; run: tests/bench/sslmem [-2] [-n N] CERT KEY.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* A live allocation of OpenSSL's, and where it was made. */
struct rec {
	void		*p;
	size_t		 n;
	const char	*file;
	int		 line;
};

static struct rec *recs;
static size_t nrecs, caprecs;
static int counting;

static void *
count_malloc(size_t n, const char *file, int line)
{
	void *p = malloc(n);

	if (p != NULL && counting) {
		if (nrecs == caprecs) {
			caprecs = caprecs ? 2 * caprecs : 1 << 16;
			if ((recs = realloc(recs, caprecs * sizeof(*recs))) ==
			    NULL)
				abort();
		}
		recs[nrecs++] = (struct rec){ p, n, file, line };
	}
	return p;
}

static struct rec *
rec_of(void *p)
{
	size_t i;

	for (i = nrecs; i-- > 0;)
		if (recs[i].p == p)
			return &recs[i];
	return NULL;
}

static void *
count_realloc(void *p, size_t n, const char *file, int line)
{
	struct rec *r;
	void *q;

	if (p == NULL)
		return count_malloc(n, file, line);
	r = rec_of(p);
	if ((q = realloc(p, n)) != NULL && r != NULL) {
		r->p = q;
		r->n = n;
	}
	return q;
}

static void
count_free(void *p, const char *file, int line)
{
	struct rec *r = p != NULL ? rec_of(p) : NULL;

	(void)file;
	(void)line;
	if (r != NULL)
		r->p = NULL;
	free(p);
}

/* Drives both handshakes over the socketpair until done. */
static int
handshake(SSL *srv, SSL *cli)
{
	int i, a = 0, b = 0;

	for (i = 0; i < 200 && (a != 1 || b != 1); i++) {
		if (b != 1)
			b = SSL_do_handshake(cli);
		if (a != 1)
			a = SSL_do_handshake(srv);
	}
	return a == 1 && b == 1 ? 0 : -1;
}

/* One request and one answer, read whole (tickets too). */
static void
exchange(SSL *srv, SSL *cli)
{
	char buf[256];
	int i;

	SSL_write(cli, "GET / HTTP/1.1\r\n\r\n", 18);
	for (i = 0; i < 20 && SSL_read(srv, buf, sizeof(buf)) <= 0; i++)
		;
	SSL_write(srv, "HTTP/1.1 200 OK\r\n\r\n", 19);
	for (i = 0; i < 20 && SSL_read(cli, buf, sizeof(buf)) <= 0; i++)
		;
}

struct agg {
	const char	*file;
	int		 line;
	size_t		 bytes, count;
};

static int
agg_cmp(const void *a, const void *b)
{
	const struct agg *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

int
main(int argc, char **argv)
{
	int ch, tls12 = 0, sv[2];
	size_t n = 400, i, k, na = 0, total = 0;
	SSL_CTX *sctx, *cctx;
	SSL **srv, **cli;
	struct agg *a;

	while ((ch = getopt(argc, argv, "2n:")) != -1) {
		switch (ch) {
		case '2': tls12 = 1; break;
		case 'n': n = strtoul(optarg, NULL, 10); break;
		default: goto usage;
		}
	}
	if (argc - optind != 2 || n == 0)
		goto usage;
	CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free);
	if ((sctx = SSL_CTX_new(TLS_server_method())) == NULL ||
	    (cctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_use_certificate_file(sctx, argv[optind],
	    SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(sctx, argv[optind + 1],
	    SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_mode(sctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_mode(cctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(sctx, SSL_SESS_CACHE_OFF);
	if (tls12)
		SSL_CTX_set_max_proto_version(sctx, TLS1_2_VERSION);
	if ((srv = calloc(n, sizeof(*srv))) == NULL ||
	    (cli = calloc(n, sizeof(*cli))) == NULL)
		return 1;
	counting = 1;
	for (i = 0; i < n; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 ||
		    (srv[i] = SSL_new(sctx)) == NULL ||
		    (cli[i] = SSL_new(cctx)) == NULL)
			return 1;
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		fcntl(sv[1], F_SETFL, O_NONBLOCK);
		SSL_set_fd(srv[i], sv[0]);
		SSL_set_fd(cli[i], sv[1]);
		SSL_set_accept_state(srv[i]);
		SSL_set_connect_state(cli[i]);
		if (handshake(srv[i], cli[i]) != 0) {
			fprintf(stderr, "sslmem: handshake %zu failed\n", i);
			return 1;
		}
		exchange(srv[i], cli[i]);
	}
	for (i = 0; i < n; i++)
		SSL_free(cli[i]);	/* the server sides alone are left */
	counting = 0;
	if ((a = calloc(nrecs + 1, sizeof(*a))) == NULL)
		return 1;
	for (i = 0; i < nrecs; i++) {
		if (recs[i].p == NULL)
			continue;
		for (k = 0; k < na && (a[k].line != recs[i].line ||
		    strcmp(a[k].file, recs[i].file) != 0); k++)
			;
		if (k == na)
			a[na++] = (struct agg){ recs[i].file, recs[i].line, 0, 0 };
		a[k].bytes += recs[i].n;
		a[k].count++;
		total += recs[i].n;
	}
	qsort(a, na, sizeof(*a), agg_cmp);
	printf("%s, %zu idle server connections: %zu bytes each held by "
	    "OpenSSL\n", tls12 ? "TLS 1.2" : "TLS 1.3", n, total / n);
	for (k = 0; k < na && k < 12; k++)
		printf("%8zu B %5.1f allocs  %s:%d\n", a[k].bytes / n,
		    (double)a[k].count / (double)n, a[k].file, a[k].line);
	return 0;
 usage:
	fprintf(stderr, "usage: sslmem [-2] [-n N] CERT KEY\n");
	return 2;
}
