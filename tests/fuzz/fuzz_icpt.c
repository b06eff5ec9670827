/*
 * fuzz_icpt.c: libFuzzer target for the interception path, both sides at
 * once.  A real struct conn runs the real icpt code (icpt.c, icpt_req.c,
 * icpt_up.c, icpt_redact.c) on a struct loop of our own, as in
 * tests/unit/test_relay.c: the sandbox is a socketpair, the upstream a
 * TLS server of ours on 127.77.X.Y:443 (plain HTTP is intercepted towards
 * port 443 of its destination, icpt_start), verified against a CA made at
 * start.  No worker, no daemon, no audit trail (records are dropped).
 * That world, its policies, secrets and minted token are fuzz_h2's too:
 * fuzz_world.h and fuzz_world.c.
 *
 * Input: byte 0 picks the policy (bit 0: with a pass rule) and whether
 * the upstream sends a TLS 1.3 session ticket (bit 1); the rest is a
 * script of steps, each an opcode byte (low 4 bits) and its operands:
 *
 *   0 LEN BYTES	the sandbox sends BYTES (the first send is what was
 *			peeked: the conn starts with it); "{PH}" in a later
 *			send is the sandbox's placeholder of the secret
 *   1 LEN BYTES	the upstream sends BYTES (queued until its handshake)
 *   2 LEN		the upstream sends back LEN*4 bytes of what it got
 *			(the injected credential among them)
 *   3			the upstream resets (SO_LINGER 0, no close_notify)
 *   4			the upstream closes cleanly (close_notify, close)
 *   5			the upstream sends FIN without close_notify
 *   6			the sandbox half-closes (FIN)
 *   7			the sandbox closes
 *   8 N		N%16+1 more loop turns
 *   9			the sandbox stops or resumes reading
 *   10			the upstream stops or resumes reading
 *   11 N		the upstream sends (N+1) KiB of filler (back-pressure)
 *   12 N		the sandbox sends (N+1) KiB of filler (a body, or junk)
 *   other		one loop turn
 *
 * Every step is followed by a loop turn (EVLOOP_NONBLOCK) and the
 * upstream's server work (accept, handshake, read, queued writes).  Then
 * both peers read everything, close, and the loop runs until the conn is
 * freed (forced with conn_close if it waits on a timer: no timeout fires
 * in an input, they are 10 s).
 *
 * Checks besides the sanitizers: with the policy without a pass rule,
 * every answer the sandbox gets is to an injected request, so no form of
 * the injected secret may appear in what the sandbox receives, however
 * the upstream echoes it, frames it or cuts it off.  Sluice's own answers
 * carry no upstream bytes, and answers to different requests are
 * separated by heads, so a match is a leak, never a false alarm.
 *
 * FUZZ_ICPT_NO_SECRET_CHECK (set) leaves that check out, to look for
 * other faults past a known leak; FUZZ_ICPT_DEBUG logs at debug level
 * and shows what each side got.
 *
 * Every inject rule of the inject-only policy also sets a minted token
 * ({{token:svc}}; rule "tk", /t/ and below, as is and base64'd and no
 * secret of its own), put in the token table at start as if minted: no
 * form of it may reach the sandbox either, and no request may start a
 * mint (world_end).
 *
 * The inject-only policy's rule "sig" (/sig/ and below) signs with SigV4:
 * a request with a body there is held until the body is whole
 * (icpt_hold.c).
 *
 * Not covered: TLS towards the sandbox (SNIFF_TLS; plain HTTP skips it),
 * forward rules, the audit trail's durability waits, timers.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "keys/placeholder.h"
#include "conn/conn.h"
#include "conn/icpt.h"
#include "fuzz_check.h"
#include "fuzz_world.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define MAX_STEPS	96
#define SB_KEEP		(1u << 20)	/* of what the sandbox receives, kept */

/* One input's peers. */
struct run {
	int		 sb;		/* the sandbox's end, -1 once closed */
	int		 sb_reading;
	int		 sb_eof;
	uint8_t		*sb_got;	/* what the sandbox received */
	size_t		 sb_len;
	struct upc	 up;		/* the upstream */
	int		 tickets;	/* TLS 1.3 tickets the upstream sends */
	int		 up_reading;
};

static struct world W;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	world_init(&W, "fuzz_icpt", "FUZZ_ICPT", "");
	/*
	 * The upstream: the address plain HTTP to it on port 80 is sent on
	 * to, on 443.
	 */
	world_listen(&W, 16);
	return 0;
}

/* ---- the upstream's side -------------------------------------------- */

/* Accepts (one upstream at a time: an older one is done with), serves. */
static void
up_work(struct run *r)
{
	int fd;

	while ((fd = accept(W.lfd, NULL, NULL)) != -1)
		upc_take(&W, &r->up, fd, r->tickets);
	upc_serve(&r->up, r->up_reading);
}

/* ---- the sandbox's side --------------------------------------------- */

static void
sb_work(struct run *r)
{
	uint8_t buf[16384];
	ssize_t n;

	if (r->sb == -1 || !r->sb_reading || r->sb_eof)
		return;
	while ((n = read(r->sb, buf, sizeof(buf))) > 0) {
		size_t take = (size_t)n;

		if (take > SB_KEEP - r->sb_len)
			take = SB_KEEP - r->sb_len;
		memcpy(r->sb_got + r->sb_len, buf, take);
		r->sb_len += take;
	}
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK))
		r->sb_eof = 1;
}

/* One loop turn and the peers' work (a void *: world_end's too). */
static void
turn(void *r)
{
	event_base_loop(W.base, EVLOOP_NONBLOCK);
	up_work(r);
	sb_work(r);
}

/* ---- one input ------------------------------------------------------ */

/*
 * A conn as conn_accept and the decision leave it for icpt_start, which
 * takes it over (and may close it at once).
 */
static void
start_conn(struct run *r, int policy, const uint8_t *first, size_t len)
{
	struct conn *c;
	int sp[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	nonblock(sp[0]);
	nonblock(sp[1]);
	r->sb = sp[0];
	c = world_conn(&W, sp[1], policy, SNIFF_HTTP, 80, first, len);
	c->dec.verdict = VERDICT_INTERCEPT;
	c->dec.reason = "intercept-name";
	icpt_start(c);
}

/*
 * The sandbox sends b[0..n), each "{PH}" in it as the sandbox's real
 * placeholder, which the fuzzer could never guess.
 */
static void
sb_send(int fd, const uint8_t *b, size_t n)
{
	const uint8_t *p = b, *at;

	while ((at = memmem(p, n - (size_t)(p - b), "{PH}", 4)) != NULL) {
		(void)!write(fd, p, (size_t)(at - p));
		(void)!write(fd, W.ph, PH_LEN);
		p = at + 4;
	}
	if (p < b + n)
		(void)!write(fd, p, n - (size_t)(p - b));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *sb_buf, *up_buf;
	struct run r;
	size_t at = 1, n, steps = 0;
	int policy, started = 0, i, k;

	if (size < 1 || W.skip)
		return 0;
	if (sb_buf == NULL)
		CHECK((sb_buf = malloc(SB_KEEP)) != NULL);
	if (up_buf == NULL)
		CHECK((up_buf = malloc(UP_KEEP)) != NULL);
	memset(&r, 0, sizeof(r));
	r.sb = r.up.fd = -1;
	r.sb_reading = r.up_reading = 1;
	r.sb_got = sb_buf;
	r.up.got = up_buf;
	policy = data[0] & 1;
	r.tickets = (data[0] >> 1) & 1;
	world_begin(&W);

	while (at < size && steps++ < MAX_STEPS) {
		uint8_t op = data[at++] & 0x0f;

		if (!started && op != 0) {
			/* The conn starts with what was peeked: nothing. */
			start_conn(&r, policy, NULL, 0);
			started = 1;
		}
		switch (op) {
		case 0:
			n = at < size ? data[at++] : 0;
			if (n > size - at)
				n = size - at;
			if (!started) {
				start_conn(&r, policy, data + at, n);
				started = 1;
			} else if (r.sb != -1 && n > 0)
				sb_send(r.sb, data + at, n);
			at += n;
			break;
		case 1:
			n = at < size ? data[at++] : 0;
			if (n > size - at)
				n = size - at;
			upc_send(&r.up, data + at, n);
			at += n;
			break;
		case 2:
			n = at < size ? (size_t)data[at++] * 4 : 0;
			upc_echo(&r.up, n);
			break;
		case 3:
			upc_drop(&r.up, 1);
			break;
		case 4:
			if (r.up.fd != -1 && r.up.ready) {
				up_work(&r);	/* what waits goes first */
				SSL_shutdown(r.up.ssl);
			}
			upc_drop(&r.up, 0);
			break;
		case 5:
			if (r.up.fd != -1) {
				up_work(&r);
				shutdown(r.up.fd, SHUT_WR);
			}
			break;
		case 6:
			if (r.sb != -1)
				shutdown(r.sb, SHUT_WR);
			break;
		case 7:
			sb_work(&r);
			if (r.sb != -1)
				close(r.sb);
			r.sb = -1;
			break;
		case 8:
			k = at < size ? data[at++] % 16 + 1 : 1;
			for (i = 0; i < k; i++)
				turn(&r);
			break;
		case 9:
			r.sb_reading = !r.sb_reading;
			break;
		case 10:
			r.up_reading = !r.up_reading;
			break;
		case 11:
			n = at < size ? ((size_t)data[at++] + 1) * 1024 : 1024;
			if (r.up.fd != -1) {
				uint8_t fill[1024];

				memset(fill, 'f', sizeof(fill));
				for (i = 0; (size_t)i < n / sizeof(fill); i++)
					upc_send(&r.up, fill, sizeof(fill));
			}
			break;
		case 12:
			n = at < size ? ((size_t)data[at++] + 1) * 1024 : 1024;
			if (r.sb != -1) {
				uint8_t fill[1024];

				memset(fill, 's', sizeof(fill));
				/* Till the socket is full (back-pressure). */
				for (i = 0; (size_t)i < n / sizeof(fill); i++)
					if (write(r.sb, fill, sizeof(fill)) !=
					    (ssize_t)sizeof(fill))
						break;
			}
			break;
		default:
			break;
		}
		turn(&r);
	}
	if (!started)
		start_conn(&r, policy, NULL, 0);

	if (W.debug)
		fprintf(stderr, "fuzz_icpt: script done, upstream %d ready %d, "
		    "%zu bytes unsent\n", r.up.fd, r.up.ready, r.up.tx_len);
	/* Both peers read what is owed, then go; the conn must follow. */
	r.sb_reading = r.up_reading = 1;
	for (i = 0; i < 8 && world_alive(&W); i++)
		turn(&r);
	sb_work(&r);
	if (r.sb != -1)
		close(r.sb);
	r.sb = -1;
	upc_drop(&r.up, 0);
	world_end(&W, turn, &r);
	upc_drop(&r.up, 0);
	/* Whatever was accepted meanwhile (nothing should be). */
	up_work(&r);
	upc_drop(&r.up, 0);
	if (W.debug)
		fprintf(stderr, "fuzz_icpt: upstream got %zu bytes, the "
		    "sandbox %zu:\n%.*s\n", r.up.len, r.sb_len, (int)r.sb_len,
		    (const char *)r.sb_got);
	/*
	 * Without a pass rule, every answer is to an injected request: a
	 * form of the secret or token in any is a leak.
	 */
	if (policy == 0 && !W.no_secret_check)
		world_check_leak(&W, r.sb_got, r.sb_len, "what it received");
	free(r.up.tx);
	return 0;
}
