/*
 * test_relay.c: a connection built on a struct loop of the test's own (no
 * worker, no daemon), relaying through the splice path between two
 * socketpairs: bytes both ways, a megabyte against the back-pressure
 * bound, half-close each way, a peer that closes, the one way out and its
 * deferred free.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "conf/config.h"
#include "loop/loop.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/relay.h"

struct world {
	struct event_base *base;
	struct config	 cfg;
	struct loop	 l;
	int		 sb;	/* the sandbox's end */
	int		 up;	/* the upstream's end */
	struct conn	*c;
};

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int
setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	int a[2], b[2];

	assert_non_null(w);
	assert_non_null(w->base = event_base_new());
	w->cfg.timeouts.idle = 30000;
	w->cfg.timeouts.first_byte = 30000;
	w->cfg.timeouts.handshake = 30000;
	w->l.base = w->base;
	w->l.cfg = &w->cfg;
	TAILQ_INIT(&w->l.conns);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
	w->sb = a[0];
	w->up = b[1];
	nonblock(a[1]);
	nonblock(b[0]);
	nonblock(w->sb);
	nonblock(w->up);
	assert_non_null(w->c = conn_new(&w->l, a[1], LISTEN_TRANSPARENT));
	assert_int_equal(conn_half_init(w->c, &w->c->up, b[0]), 0);
	w->c->dec.verdict = VERDICT_PASS;
	w->c->dec.reason = "allow-name";
	assert_int_equal(relay_start(w->c), 0);
	assert_int_equal(w->c->state, CS_RELAY);
	assert_int_equal(w->l.nconns, 1);
	*state = w;
	return 0;
}

static int
teardown(void **state)
{
	struct world *w = *state;

	if (w->l.nconns > 0)
		conn_close(w->c, "test-end");
	event_base_loop(w->base, EVLOOP_NONBLOCK);	/* the deferred free */
	assert_int_equal(w->l.nconns, 0);
	loop_caches_clear(&w->l);
	assert_int_equal(w->l.npipes, 0);
	close(w->sb);
	close(w->up);
	event_base_free(w->base);
	free(w);
	return 0;
}

static void
turn(struct world *w)
{
	event_base_loop(w->base, EVLOOP_NONBLOCK);
}

/* Reads what fd has now, after a few loop turns; -1 at end of stream. */
static ssize_t
drain(struct world *w, int fd, uint8_t *buf, size_t cap)
{
	ssize_t n, got = 0;
	int i;

	for (i = 0; i < 20; i++) {
		turn(w);
		while ((size_t)got < cap &&
		    (n = read(fd, buf + got, cap - (size_t)got)) > 0)
			got += n;
		if (n == 0)
			return got > 0 ? got : -1;
		if (got > 0 && i > 2)
			break;
	}
	return got;
}

static void
t_both_ways(void **state)
{
	struct world *w = *state;
	uint8_t buf[64];
	ssize_t n;

	assert_int_equal(write(w->sb, "GET / HTTP/1.1\r\n", 16), 16);
	n = drain(w, w->up, buf, sizeof(buf));
	assert_int_equal(n, 16);
	assert_memory_equal(buf, "GET / HTTP/1.1\r\n", 16);
	assert_int_equal(write(w->up, "HTTP/1.1 200 OK\r\n", 17), 17);
	n = drain(w, w->sb, buf, sizeof(buf));
	assert_int_equal(n, 17);
	assert_memory_equal(buf, "HTTP/1.1 200 OK\r\n", 17);
	assert_int_equal(w->c->down.bytes, 16);
	assert_int_equal(w->c->up.bytes, 17);
}

/*
 * A closed relay's pipes are empty: the loop keeps them, and the next
 * relay takes them instead of making new ones (no pipe2, no close).
 */
static void
t_pipes_kept(void **state)
{
	struct world *w = *state;
	int p0 = w->c->down.pipe[0], p1 = w->c->up.pipe[0];
	struct conn *c2;
	uint8_t buf[8];
	int a[2], b[2];

	assert_int_equal(write(w->sb, "ping", 4), 4);
	assert_int_equal(drain(w, w->up, buf, sizeof(buf)), 4);
	conn_close(w->c, "test-end");
	turn(w);
	assert_int_equal(w->l.npipes, 2);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
	nonblock(a[1]);
	nonblock(b[0]);
	nonblock(b[1]);
	assert_non_null(c2 = conn_new(&w->l, a[1], LISTEN_TRANSPARENT));
	assert_int_equal(conn_half_init(c2, &c2->up, b[0]), 0);
	c2->dec.verdict = VERDICT_PASS;
	c2->dec.reason = "allow-name";
	assert_int_equal(relay_start(c2), 0);
	assert_int_equal(w->l.npipes, 0);
	assert_true((c2->down.pipe[0] == p0 || c2->down.pipe[0] == p1) &&
	    (c2->up.pipe[0] == p0 || c2->up.pipe[0] == p1));
	assert_int_equal(write(a[0], "pong", 4), 4);
	assert_int_equal(drain(w, b[1], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "pong", 4);
	w->c = c2;	/* the teardown closes it */
	close(a[0]);
	close(w->up);
	w->up = b[1];
}

/*
 * A megabyte from the upstream towards a sandbox that reads it all, in
 * pieces: it arrives whole and in order, and what waits in the relay stays
 * within the pipe (the upstream's writes block while the sandbox lags).
 */
static void
t_megabyte(void **state)
{
	struct world *w = *state;
	size_t total = 1u << 20, sent = 0, got = 0, i;
	uint8_t *src = malloc(total), *dst = malloc(total);
	ssize_t n;
	int rounds = 0, blocked = 0;

	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < total; i++)
		src[i] = (uint8_t)(i * 131 + (i >> 9));
	while (got < total && rounds++ < 200000) {
		if (sent < total) {
			n = write(w->up, src + sent, total - sent);
			if (n > 0)
				sent += (size_t)n;
			else if (n == -1 && errno == EAGAIN)
				blocked = 1;
		}
		turn(w);
		/* the sandbox reads slowly: 16 KiB a turn */
		n = read(w->sb, dst + got, total - got < 16384 ? total - got :
		    16384);
		if (n > 0)
			got += (size_t)n;
	}
	assert_int_equal(got, total);
	assert_memory_equal(src, dst, total);
	assert_true(blocked);	/* the relay pushed back on the upstream */
	assert_int_equal(w->c->up.bytes, total);
	free(src);
	free(dst);
}

/*
 * The sandbox half-closes: the upstream sees the end, the other way still
 * flows; then the upstream ends too and the connection closes, its memory
 * freed on the next loop turn.
 */
static void
t_half_close(void **state)
{
	struct world *w = *state;
	uint8_t buf[64];
	ssize_t n;

	assert_int_equal(write(w->sb, "bye", 3), 3);
	assert_int_equal(shutdown(w->sb, SHUT_WR), 0);
	n = drain(w, w->up, buf, sizeof(buf));
	assert_int_equal(n, 3);
	n = drain(w, w->up, buf, sizeof(buf));
	assert_int_equal(n, -1);	/* end of stream reached the upstream */
	assert_int_equal(w->c->state, CS_RELAY);
	assert_int_equal(write(w->up, "last", 4), 4);
	n = drain(w, w->sb, buf, sizeof(buf));
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "last", 4);
	assert_int_equal(shutdown(w->up, SHUT_WR), 0);
	n = drain(w, w->sb, buf, sizeof(buf));
	assert_int_equal(n, -1);
	turn(w);
	assert_int_equal(w->l.nconns, 0);	/* closed, and gone from the list */
	assert_int_equal(w->l.metrics.conns.n, 1);
	assert_string_equal(w->l.metrics.conns.e[0].a, "pass");
}

/*
 * The upstream closes after its answer: the sandbox gets the answer and
 * the end; the connection waits for the sandbox's side, and ends when the
 * sandbox closes too.
 */
static void
t_upstream_closes(void **state)
{
	struct world *w = *state;
	uint8_t buf[8];
	ssize_t n;

	assert_int_equal(write(w->up, "x", 1), 1);
	close(w->up);
	w->up = open("/dev/null", O_RDONLY);
	n = drain(w, w->sb, buf, sizeof(buf));
	assert_int_equal(n, 1);
	n = drain(w, w->sb, buf, sizeof(buf));
	assert_int_equal(n, -1);
	assert_int_equal(w->l.nconns, 1);	/* the sandbox may still send */
	close(w->sb);
	w->sb = open("/dev/null", O_RDONLY);
	turn(w);
	turn(w);
	assert_int_equal(w->l.nconns, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(t_megabyte, setup, teardown),
		cmocka_unit_test_setup_teardown(t_pipes_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(t_half_close, setup, teardown),
		cmocka_unit_test_setup_teardown(t_upstream_closes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
