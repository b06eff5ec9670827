/*
 * test_kproto.c: the boundary of the keys process, below its handlers:
 * the request table (kproto.h), checked row by row so that a row added
 * later is held to the same promises; the field codec (wire.h); and the
 * channel that carries the messages (chan.h).
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/wire.h"
#include "keys/kproto.h"

#define WHEN_KNOWN	(KPROTO_WHEN_START | KPROTO_WHEN_RUN)

static const enum kproto_phase phases[] = { KPROTO_START, KPROTO_RUN };

static unsigned
when_of(enum kproto_phase p)
{
	return p == KPROTO_START ? KPROTO_WHEN_START : KPROTO_WHEN_RUN;
}

/* A role and a phase row may come from and in (its lowest of each). */
static unsigned
some_role(const struct kproto_row *row)
{
	return row->from & (~row->from + 1);
}

static enum kproto_phase
some_phase(const struct kproto_row *row)
{
	return row->when & KPROTO_WHEN_START ? KPROTO_START : KPROTO_RUN;
}

/* Refused, with a reason. */
static void
assert_refused(uint32_t type, size_t len, unsigned role, enum kproto_phase p)
{
	const char *why = NULL;

	assert_null(kproto_admit(type, len, role, p, &why));
	assert_non_null(why);
	assert_true(strlen(why) > 0);
}

static void
assert_admitted(const struct kproto_row *row, size_t len, unsigned role,
    enum kproto_phase p)
{
	const char *why = NULL;

	assert_ptr_equal(kproto_admit(row->type, len, role, p, &why), row);
}

/* ---- the table -------------------------------------------------------- */

/* Every type below KPROTO_NTYPES has one well-formed row. */
static void
t_rows_well_formed(void **st)
{
	const struct kproto_row *row;
	uint32_t t;
	size_t i;

	for (t = 1; t < KPROTO_NTYPES; t++) {
		row = kproto_row(t);
		assert_non_null(row);
		assert_int_equal(row->type, t);
		assert_non_null(row->name);
		assert_true(strlen(row->name) > 0);
		/* Roles are bits, and a row has at least one. */
		assert_true(row->from != 0);
		assert_true(row->when != 0);
		assert_int_equal(row->when & ~WHEN_KNOWN, 0);
		assert_true(row->min <= row->max);
		/* A row the channel cannot carry would never be admitted. */
		assert_true(row->max <= CHAN_MSG_MAX);
		/* Names tell rows apart in the keys process's log. */
		for (i = 1; i < t; i++)
			assert_string_not_equal(kproto_row((uint32_t)i)->name,
			    row->name);
	}
}

/* Each row admits exactly its bounds: min and max in, one past out. */
static void
t_rows_bounds(void **st)
{
	const struct kproto_row *row;
	enum kproto_phase p;
	unsigned role;
	uint32_t t;

	for (t = 1; t < KPROTO_NTYPES; t++) {
		row = kproto_row(t);
		role = some_role(row);
		p = some_phase(row);
		assert_admitted(row, row->min, role, p);
		assert_admitted(row, row->max, role, p);
		assert_admitted(row, row->min + (row->max - row->min) / 2,
		    role, p);
		if (row->min > 0)
			assert_refused(t, row->min - 1, role, p);
		assert_refused(t, (size_t)row->max + 1, role, p);
		assert_refused(t, CHAN_MSG_MAX + 1, role, p);
		assert_refused(t, SIZE_MAX, role, p);
	}
}

/* Each row admits its roles only: every other bit, alone, is refused. */
static void
t_rows_roles(void **st)
{
	const struct kproto_row *row;
	enum kproto_phase p;
	unsigned bit;
	uint32_t t;
	int i;

	for (t = 1; t < KPROTO_NTYPES; t++) {
		row = kproto_row(t);
		p = some_phase(row);
		assert_refused(t, row->min, 0, p);
		for (i = 0; i < 32; i++) {
			bit = 1u << i;
			if (row->from & bit)
				assert_admitted(row, row->min, bit, p);
			else
				assert_refused(t, row->min, bit, p);
		}
		/* A role with a foreign bit besides its own is no better. */
		if ((row->from & KPROTO_FROM_CTL) == 0)
			assert_refused(t, row->min,
			    KPROTO_FROM_CTL | 0x100, p);
		if ((row->from & KPROTO_FROM_WORKER) == 0)
			assert_refused(t, row->min,
			    KPROTO_FROM_WORKER | 0x100, p);
	}
}

/* Each row admits its phases only. */
static void
t_rows_phases(void **st)
{
	const struct kproto_row *row;
	unsigned role;
	uint32_t t;
	size_t i;
	int b;

	for (t = 1; t < KPROTO_NTYPES; t++) {
		row = kproto_row(t);
		for (b = 0; b < 32; b++) {
			role = 1u << b;
			if ((row->from & role) == 0)
				continue;
			for (i = 0; i < sizeof(phases) / sizeof(phases[0]);
			    i++) {
				if (row->when & when_of(phases[i]))
					assert_admitted(row, row->min, role,
					    phases[i]);
				else
					assert_refused(t, row->min, role,
					    phases[i]);
			}
		}
	}
}

/* What the start does only once: nothing of it after READY. */
static void
t_rows_start_only(void **st)
{
	static const uint32_t start[] = { KPROTO_HELLO, KPROTO_STORE_KEYS,
	    KPROTO_READY };
	size_t i;

	for (i = 0; i < sizeof(start) / sizeof(start[0]); i++) {
		assert_non_null(kproto_row(start[i]));
		assert_int_equal(kproto_row(start[i])->when, KPROTO_WHEN_START);
		assert_int_equal(kproto_row(start[i])->from, KPROTO_FROM_CTL);
		assert_refused(start[i], 0, KPROTO_FROM_CTL, KPROTO_RUN);
	}
	/* A leaf is minted only once the worker serves. */
	assert_refused(KPROTO_LEAF_MINT, kproto_row(KPROTO_LEAF_MINT)->min,
	    KPROTO_FROM_WORKER, KPROTO_START);
	/* A worker thread never makes, opens or seals a CA. */
	assert_refused(KPROTO_CA_NEW, kproto_row(KPROTO_CA_NEW)->min,
	    KPROTO_FROM_WORKER, KPROTO_RUN);
	assert_refused(KPROTO_CA_OPEN, kproto_row(KPROTO_CA_OPEN)->min,
	    KPROTO_FROM_WORKER, KPROTO_RUN);
	assert_refused(KPROTO_CA_SEAL, kproto_row(KPROTO_CA_SEAL)->min,
	    KPROTO_FROM_WORKER, KPROTO_RUN);
	assert_refused(KPROTO_SEALED_OPEN, kproto_row(KPROTO_SEALED_OPEN)->min,
	    KPROTO_FROM_WORKER, KPROTO_RUN);
}

/* A type that is no row is refused from anyone, at any time. */
static void
t_unknown_types(void **st)
{
	static const uint32_t bad[] = { 0, KPROTO_NTYPES, KPROTO_NTYPES + 1,
	    0x7777, KPROTO_OK, KPROTO_ERR, 0xffff, 0x10001, UINT32_MAX };
	unsigned role;
	size_t i, j;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(kproto_row(bad[i]));
		for (role = 0; role <= 0xff; role++)
			for (j = 0; j < 2; j++) {
				assert_refused(bad[i], 0, role, phases[j]);
				assert_refused(bad[i], 16, role, phases[j]);
			}
	}
}

/* ---- wire.h ----------------------------------------------------------- */

static void
t_wire_ints(void **st)
{
	static const uint64_t v64[] = { 0, 1, 0xff, 0x0102030405060708ull,
	    UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX };
	static const uint32_t v32[] = { 0, 1, 0x01020304u, 0x80000000u,
	    UINT32_MAX };
	uint8_t buf[256];
	struct wire_w w;
	struct wire_r r;
	size_t i;

	wire_w_init(&w, buf, sizeof(buf));
	for (i = 0; i < sizeof(v64) / sizeof(v64[0]); i++)
		wire_u64(&w, v64[i]);
	for (i = 0; i < sizeof(v32) / sizeof(v32[0]); i++)
		wire_u32(&w, v32[i]);
	assert_false(w.over);
	assert_int_equal(w.len, 8 * 7 + 4 * 5);
	/* Little-endian, whatever the host. */
	assert_memory_equal(buf + 24, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
	assert_memory_equal(buf + 56 + 8, "\x04\x03\x02\x01", 4);

	wire_r_init(&r, buf, w.len);
	for (i = 0; i < sizeof(v64) / sizeof(v64[0]); i++)
		assert_true(wire_get_u64(&r) == v64[i]);
	for (i = 0; i < sizeof(v32) / sizeof(v32[0]); i++)
		assert_int_equal(wire_get_u32(&r), v32[i]);
	assert_false(r.bad);
	assert_int_equal(wire_done(&r), 0);
}

static void
t_wire_bytes_str(void **st)
{
	uint8_t buf[256], bin[5] = { 0, 1, 0xff, 0, 7 };
	const uint8_t *p;
	char s[32];
	struct wire_w w;
	struct wire_r r;
	size_t n;

	wire_w_init(&w, buf, sizeof(buf));
	wire_bytes(&w, bin, sizeof(bin));
	wire_bytes(&w, NULL, 0);
	wire_str(&w, "api.example.com");
	wire_str(&w, "");
	assert_false(w.over);
	assert_int_equal(w.len, 4 + 5 + 4 + 4 + 15 + 4);
	assert_memory_equal(buf, "\x05\0\0\0", 4);

	wire_r_init(&r, buf, w.len);
	p = wire_get_bytes(&r, 5, &n);
	assert_non_null(p);
	assert_int_equal(n, 5);
	assert_memory_equal(p, bin, 5);
	/* Bytes point into the message. */
	assert_ptr_equal(p, buf + 4);
	p = wire_get_bytes(&r, 0, &n);
	assert_int_equal(n, 0);
	assert_false(r.bad);
	wire_get_str(&r, s, sizeof(s));
	assert_string_equal(s, "api.example.com");
	memset(s, 'x', sizeof(s));
	wire_get_str(&r, s, sizeof(s));
	assert_string_equal(s, "");
	assert_int_equal(wire_done(&r), 0);
}

/* The writer stops at its buffer's end and says so. */
static void
t_wire_writer_over(void **st)
{
	uint8_t buf[16];
	struct wire_w w;

	memset(buf, 0xaa, sizeof(buf));
	wire_w_init(&w, buf, 10);
	wire_u64(&w, 1);
	assert_false(w.over);
	wire_u32(&w, 2);		/* 12 > 10 */
	assert_true(w.over);
	assert_int_equal(w.len, 8);
	wire_u32(&w, 0);		/* would fit 2 bytes, but over stays */
	wire_put(&w, "", 0);
	assert_true(w.over);
	assert_int_equal(w.len, 8);
	/* Nothing past cap was touched. */
	assert_int_equal(buf[10], 0xaa);
	assert_int_equal(buf[8], 0xaa);

	wire_w_init(&w, buf, sizeof(buf));
	wire_bytes(&w, "0123456789abc", 13);	/* 17 > 16 */
	assert_true(w.over);
	assert_int_equal(w.len, 4);
#if SIZE_MAX > UINT32_MAX
	/* A length the field cannot say: never read, never written. */
	wire_w_init(&w, buf, sizeof(buf));
	wire_bytes(&w, buf, (size_t)UINT32_MAX + 1);
	assert_true(w.over);
	assert_int_equal(w.len, 0);
#endif
}

/* A message of every field, and where each ends. */
static size_t
sample(uint8_t *buf, size_t cap)
{
	struct wire_w w;

	wire_w_init(&w, buf, cap);
	wire_u64(&w, 42);
	wire_u32(&w, 7);
	wire_str(&w, "host.example");
	wire_bytes(&w, "\x01\x02\x03", 3);
	assert_false(w.over);
	return w.len;
}

static void
read_sample(struct wire_r *r)
{
	char s[64];
	size_t n;

	(void)wire_get_u64(r);
	(void)wire_get_u32(r);
	wire_get_str(r, s, sizeof(s));
	(void)wire_get_bytes(r, 16, &n);
}

/*
 * Every prefix of a message is bad, read from a buffer of exactly its
 * bytes (so that ASan sees a read past them); and once bad, a reader
 * gives nothing, even where bytes are left.
 */
static void
t_wire_reader_bounds(void **st)
{
	uint8_t full[64], *cut;
	struct wire_r r;
	size_t len = sample(full, sizeof(full)), k, n;

	for (k = 0; k < len; k++) {
		cut = malloc(k > 0 ? k : 1);
		assert_non_null(cut);
		memcpy(cut, full, k);
		wire_r_init(&r, cut, k);
		read_sample(&r);
		assert_true(r.bad);
		assert_true(r.off <= r.len);
		assert_int_equal(wire_done(&r), -1);
		free(cut);
	}
	wire_r_init(&r, full, len);
	read_sample(&r);
	assert_int_equal(wire_done(&r), 0);

	/* Bad sticks: the u32 after a failed u64 is not read. */
	wire_r_init(&r, full, 4);
	assert_true(wire_get_u64(&r) == 0);
	assert_true(r.bad);
	assert_int_equal(wire_get_u32(&r), 0);
	assert_int_equal(r.off, 0);
	assert_null(wire_get_bytes(&r, 100, &n));
	assert_int_equal(n, 0);

	/* A length over max is bad, and nothing is taken. */
	wire_r_init(&r, full + 12, len - 12);	/* the string's field */
	assert_null(wire_get_bytes(&r, 11, &n));
	assert_true(r.bad);
	assert_int_equal(n, 0);
	/* A length of 2^32 - 1 over a short message. */
	wire_r_init(&r, "\xff\xff\xff\xff" "abc", 7);
	assert_null(wire_get_bytes(&r, SIZE_MAX, &n));
	assert_true(r.bad);
	assert_int_equal(wire_done(&r), -1);
}

/* A string: at most cap - 1 bytes, no NUL; else bad and "". */
static void
t_wire_str_refusals(void **st)
{
	uint8_t buf[64];
	char out[8];
	struct wire_w w;
	struct wire_r r;

	/* cap - 1 bytes fit. */
	wire_w_init(&w, buf, sizeof(buf));
	wire_str(&w, "1234567");
	wire_r_init(&r, buf, w.len);
	wire_get_str(&r, out, sizeof(out));
	assert_false(r.bad);
	assert_string_equal(out, "1234567");

	/* cap bytes do not. */
	wire_w_init(&w, buf, sizeof(buf));
	wire_str(&w, "12345678");
	wire_r_init(&r, buf, w.len);
	memset(out, 'x', sizeof(out));
	wire_get_str(&r, out, sizeof(out));
	assert_true(r.bad);
	assert_string_equal(out, "");
	assert_int_equal(wire_done(&r), -1);

	/* A NUL inside, anywhere. */
	wire_w_init(&w, buf, sizeof(buf));
	wire_bytes(&w, "ab\0cd", 5);
	wire_r_init(&r, buf, w.len);
	memset(out, 'x', sizeof(out));
	wire_get_str(&r, out, sizeof(out));
	assert_true(r.bad);
	assert_string_equal(out, "");
	wire_w_init(&w, buf, sizeof(buf));
	wire_bytes(&w, "abc\0", 4);
	wire_r_init(&r, buf, w.len);
	wire_get_str(&r, out, sizeof(out));
	assert_true(r.bad);
	assert_string_equal(out, "");

	/* Cut short. */
	wire_w_init(&w, buf, sizeof(buf));
	wire_str(&w, "abcdef");
	wire_r_init(&r, buf, w.len - 1);
	memset(out, 'x', sizeof(out));
	wire_get_str(&r, out, sizeof(out));
	assert_true(r.bad);
	assert_string_equal(out, "");
}

static void
t_wire_done(void **st)
{
	uint8_t buf[16];
	struct wire_r r;

	memset(buf, 0, sizeof(buf));
	wire_r_init(&r, buf, 5);
	(void)wire_get_u32(&r);
	assert_false(r.bad);
	assert_int_equal(wire_done(&r), -1);	/* one byte left */
	(void)wire_get_u32(&r);			/* past the end */
	assert_true(r.bad);
	assert_int_equal(wire_done(&r), -1);
	wire_r_init(&r, buf, 0);
	assert_int_equal(wire_done(&r), 0);
	wire_r_init(&r, NULL, 0);
	assert_int_equal(wire_done(&r), 0);
	(void)wire_get_u32(&r);
	assert_int_equal(wire_done(&r), -1);
}

/* ---- chan.h ----------------------------------------------------------- */

struct pair {
	int	 sv[2];
};

static int
pair_setup(void **st)
{
	struct pair *p = calloc(1, sizeof(*p));

	if (p == NULL || chan_pair(p->sv) != 0)
		return -1;
	/* Close-on-exec, as promised. */
	if ((fcntl(p->sv[0], F_GETFD) & FD_CLOEXEC) == 0 ||
	    (fcntl(p->sv[1], F_GETFD) & FD_CLOEXEC) == 0)
		return -1;
	*st = p;
	return 0;
}

static int
pair_teardown(void **st)
{
	struct pair *p = *st;

	if (p->sv[0] != -1)
		close(p->sv[0]);
	if (p->sv[1] != -1)
		close(p->sv[1]);
	free(p);
	return 0;
}

static void
t_chan_round_trip(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[64];
	int fd = 1234;

	assert_int_equal(chan_send(p->sv[0], KPROTO_HELLO, 77, "abc", 3, -1),
	    0);
	assert_int_equal(chan_send(p->sv[0], KPROTO_READY, 78, NULL, 0, -1),
	    0);
	/* Messages keep their bounds and their order. */
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), &fd, 1000),
	    1);
	assert_int_equal(h.type, KPROTO_HELLO);
	assert_int_equal(h.len, 3);
	assert_true(h.id == 77);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(fd, -1);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    1);
	assert_int_equal(h.type, KPROTO_READY);
	assert_int_equal(h.len, 0);
	assert_true(h.id == 78);
	/* Both ways. */
	assert_int_equal(chan_send(p->sv[1], KPROTO_OK, 78, "x", 1, -1), 0);
	assert_int_equal(chan_recv(p->sv[0], &h, buf, sizeof(buf), NULL, 1000),
	    1);
	assert_int_equal(h.type, KPROTO_OK);
	assert_int_equal(buf[0], 'x');
}

/* The largest payload goes whole; one byte more is not sent. */
static void
t_chan_max(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t *big, *in;
	size_t i;

	big = malloc(CHAN_MSG_MAX + 1);
	in = malloc(CHAN_MSG_MAX);
	assert_non_null(big);
	assert_non_null(in);
	for (i = 0; i < CHAN_MSG_MAX + 1; i++)
		big[i] = (uint8_t)(i * 7);
	assert_int_equal(chan_send(p->sv[0], 5, 1, big, CHAN_MSG_MAX + 1, -1),
	    SL_ERR_TOO_BIG);
	assert_int_equal(chan_send(p->sv[0], 5, 2, big, CHAN_MSG_MAX, -1), 0);
	assert_int_equal(chan_recv(p->sv[1], &h, in, CHAN_MSG_MAX, NULL, 1000),
	    1);
	assert_int_equal(h.len, CHAN_MSG_MAX);
	assert_true(h.id == 2);
	assert_memory_equal(in, big, CHAN_MSG_MAX);
	/* The refused one left nothing behind. */
	assert_int_equal(chan_recv(p->sv[1], &h, in, CHAN_MSG_MAX, NULL, 0),
	    SL_ERR_IO);
	assert_int_equal(errno, ETIMEDOUT);
	free(big);
	free(in);
}

static void
t_chan_pass_fd(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[16];
	char c = 0;
	int pfd[2], got = -1;

	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(chan_send(p->sv[0], 9, 3, "f", 1, pfd[1]), 0);
	close(pfd[1]);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), &got, 1000),
	    1);
	assert_true(got >= 0);
	assert_int_equal(h.len, 1);
	/* Close-on-exec, as it arrives. */
	assert_true(fcntl(got, F_GETFD) & FD_CLOEXEC);
	/* It is the pipe's write end. */
	assert_int_equal(write(got, "z", 1), 1);
	assert_int_equal(read(pfd[0], &c, 1), 1);
	assert_int_equal(c, 'z');
	close(got);
	assert_int_equal(read(pfd[0], &c, 1), 0);	/* no writer left */
	close(pfd[0]);
}

/* An fd nobody asked for: malformed, and closed (the pipe sees EOF). */
static void
t_chan_unwanted_fd(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[16];
	char c;
	int pfd[2];

	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(chan_send(p->sv[0], 9, 4, "f", 1, pfd[1]), 0);
	close(pfd[1]);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    SL_ERR_INVALID);
	assert_int_equal(read(pfd[0], &c, 1), 0);
	close(pfd[0]);
}

/* An fd with a message too long for the buffer: closed as well. */
static void
t_chan_fd_on_malformed(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[4];
	char c;
	int pfd[2], got = 99;

	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(chan_send(p->sv[0], 9, 5, "0123456789", 10, pfd[1]),
	    0);
	close(pfd[1]);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), &got, 1000),
	    SL_ERR_INVALID);
	assert_int_equal(got, -1);
	assert_int_equal(read(pfd[0], &c, 1), 0);
	close(pfd[0]);
}

static void
t_chan_eof(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[16];

	assert_int_equal(chan_send(p->sv[0], 1, 1, "a", 1, -1), 0);
	close(p->sv[0]);
	p->sv[0] = -1;
	/* What was sent first still comes, then the end. */
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    1);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    0);
	/* Sending to a closed peer: EPIPE, no SIGPIPE. */
	errno = 0;
	assert_int_equal(chan_send(p->sv[1], 1, 2, "a", 1, -1), SL_ERR_IO);
	assert_int_equal(errno, EPIPE);
}

static void
t_chan_timeout(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[16];

	errno = 0;
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 50),
	    SL_ERR_IO);
	assert_int_equal(errno, ETIMEDOUT);
	errno = 0;
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 0),
	    SL_ERR_IO);
	assert_int_equal(errno, ETIMEDOUT);
}

static void
t_chan_short_buffer(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h;
	uint8_t buf[64];

	assert_int_equal(chan_send(p->sv[0], 1, 1, "0123456789", 10, -1), 0);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, 9, NULL, 1000),
	    SL_ERR_INVALID);
	/* The message is gone whole: the next one reads. */
	assert_int_equal(chan_send(p->sv[0], 2, 2, "ok", 2, -1), 0);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    1);
	assert_int_equal(h.type, 2);
	/* A buffer of exactly the payload is enough. */
	assert_int_equal(chan_send(p->sv[0], 3, 3, "0123456789", 10, -1), 0);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, 10, NULL, 1000), 1);
	assert_int_equal(h.len, 10);
}

/* Raw records that are not messages: malformed, never read as one. */
static void
t_chan_raw_malformed(void **st)
{
	struct pair *p = *st;
	struct chan_hdr h, fake;
	uint8_t buf[64], raw[sizeof(fake) + 4];

	/* Shorter than a header. */
	assert_int_equal(send(p->sv[0], "abcdefgh", 8, 0), 8);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    SL_ERR_INVALID);
	/* A header whose length is not what came. */
	memset(&fake, 0, sizeof(fake));
	fake.type = 1;
	fake.len = 8;
	memcpy(raw, &fake, sizeof(fake));
	memcpy(raw + sizeof(fake), "abcd", 4);
	assert_int_equal(send(p->sv[0], raw, sizeof(raw), 0),
	    (ssize_t)sizeof(raw));
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    SL_ERR_INVALID);
	fake.len = 2;
	memcpy(raw, &fake, sizeof(fake));
	assert_int_equal(send(p->sv[0], raw, sizeof(raw), 0),
	    (ssize_t)sizeof(raw));
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    SL_ERR_INVALID);
	/* Then a good one still reads. */
	assert_int_equal(chan_send(p->sv[0], 4, 4, "ok", 2, -1), 0);
	assert_int_equal(chan_recv(p->sv[1], &h, buf, sizeof(buf), NULL, 1000),
	    1);
	assert_int_equal(h.type, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_rows_well_formed),
		cmocka_unit_test(t_rows_bounds),
		cmocka_unit_test(t_rows_roles),
		cmocka_unit_test(t_rows_phases),
		cmocka_unit_test(t_rows_start_only),
		cmocka_unit_test(t_unknown_types),
		cmocka_unit_test(t_wire_ints),
		cmocka_unit_test(t_wire_bytes_str),
		cmocka_unit_test(t_wire_writer_over),
		cmocka_unit_test(t_wire_reader_bounds),
		cmocka_unit_test(t_wire_str_refusals),
		cmocka_unit_test(t_wire_done),
		cmocka_unit_test_setup_teardown(t_chan_round_trip, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_max, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_pass_fd, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_unwanted_fd, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_fd_on_malformed,
		    pair_setup, pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_eof, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_timeout, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_short_buffer, pair_setup,
		    pair_teardown),
		cmocka_unit_test_setup_teardown(t_chan_raw_malformed,
		    pair_setup, pair_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
