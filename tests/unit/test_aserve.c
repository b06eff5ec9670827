/*
 * test_aserve.c: the keys process's side of a remote audit trail: what
 * a worker's record must be to be chained (aserve_check_flat), and
 * whole rounds through aserve_handle into a real writer in a temporary
 * folder.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/wire.h"
#include "keys/kproto.h"
#include "audit/arec.h"
#include "audit/aserve.h"
#include "audit/audit.h"

/* A flat record of type with a few members, as a worker builds it. */
static struct aflat *
made(const char *type)
{
	static struct arec r;
	struct aflat *f;

	arec_init(&r);
	arec_str(&r, "sandbox", "box");
	arec_str(&r, "path", "/a,\"type\":\"checkpoint\"");
	arec_int(&r, "status", 200);
	assert_non_null(f = arec_finish(&r, type));
	return f;
}

/* A flat record from its body, offsets at the end unless given. */
static struct aflat *
raw(const char *body)
{
	size_t n = strlen(body);
	struct aflat *f = malloc(sizeof(*f) + n);

	assert_non_null(f);
	memcpy(f->body, body, n);
	f->len = f->at_hash = f->at_prev = f->at_seq = (uint32_t)n;
	return f;
}

static void
expect_refused(struct aflat *f)
{
	const char *why = NULL;

	assert_int_equal(aserve_check_flat(f, &why), -1);
	assert_non_null(why);
	free(f);
}

static void
t_worker_records_pass(void **state)
{
	const char *why = NULL;
	struct aflat *f = made("request");

	/* The path holds ,"type":"checkpoint" inside a string: not a member. */
	assert_int_equal(aserve_check_flat(f, &why), 0);
	free(f);
	f = made("conn");
	assert_int_equal(aserve_check_flat(f, &why), 0);
	free(f);
}

static void
t_reserved_types(void **state)
{
	expect_refused(made("checkpoint"));
	expect_refused(made("start"));
	expect_refused(made("upgrade"));
	expect_refused(made("file_start"));
}

static void
t_own_chain_members(void **state)
{
	expect_refused(raw(",\"hash\":\"00\",\"ts\":\"t\",\"type\":\"conn\""));
	expect_refused(raw(",\"prev\":\"00\",\"ts\":\"t\",\"type\":\"conn\""));
	expect_refused(raw(",\"seq\":1,\"ts\":\"t\",\"type\":\"conn\""));
}

static void
t_bytes(void **state)
{
	expect_refused(raw(",\"ts\":\"t\",\"type\":\"conn\",\"x\":\"a\nb\""));
	expect_refused(raw(",\"ts\":\"t\",\"type\":\"conn\",\"x\":\"\x80\""));
	expect_refused(raw(",\"ts\":\"t\",\"type\":\"conn\",\"x\":\"\x7f\""));
}

static void
t_shape(void **state)
{
	struct aflat *f;

	/* unbalanced, unterminated, a lone member, not a member list */
	expect_refused(raw(",\"a\":{\"b\":1,\"ts\":\"t\",\"type\":\"conn\""));
	expect_refused(raw(",\"ts\":\"t\",\"type\":\"conn\",\"x\":\"open"));
	expect_refused(raw(",\"ts\":\"t\",\"type\":\"conn\"}"));
	expect_refused(raw("\"ts\":\"t\",\"type\":\"conn\""));
	expect_refused(raw(","));
	expect_refused(raw(""));
	/* a nested "type" is not the record's */
	expect_refused(raw(",\"o\":{\"type\":\"conn\"},\"ts\":\"t\""));
	/* no time */
	expect_refused(raw(",\"type\":\"conn\""));
	/* offsets: out of order, past the end, inside a member */
	f = raw(",\"ts\":\"t\",\"type\":\"conn\"");
	f->at_hash = f->len;
	f->at_prev = 0;
	expect_refused(f);
	f = raw(",\"ts\":\"t\",\"type\":\"conn\"");
	f->at_seq = f->len + 1;
	expect_refused(f);
	f = raw(",\"ts\":\"t\",\"type\":\"conn\"");
	f->at_hash = f->at_prev = f->at_seq = 3;
	expect_refused(f);
	/* at a member's start: fine */
	f = raw(",\"ts\":\"t\",\"type\":\"conn\"");
	f->at_hash = f->at_prev = f->at_seq = 0;
	{
		const char *why;

		assert_int_equal(aserve_check_flat(f, &why), 0);
	}
	free(f);
}

/* ---- whole rounds into a writer ------------------------------------- */

struct world {
	char		 dir[64], path[96];
	struct audit	*a;
	uint8_t		*ans;
};

static int
setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct audit_opts o;
	char why[256];

	snprintf(w->dir, sizeof(w->dir), "/tmp/test_aserve.XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	snprintf(w->path, sizeof(w->path), "%s/trail.jsonl", w->dir);
	memset(&o, 0, sizeof(o));
	o.path = w->path;
	o.mode = AUDIT_FSYNC_ALWAYS;
	o.queue = 64;
	o.checkpoint_records = 1000;
	o.checkpoint_ms = 60000;
	o.sink = 1;
	assert_int_equal(audit_open(&o, &w->a, why, sizeof(why)), 0);
	assert_non_null(w->ans = malloc(CHAN_MSG_MAX));
	*state = w;
	/* The writer's own "start" record first, so that counts hold. */
	assert_int_equal(audit_wait_round(w->a, 2000), 0);
	assert_int_equal(audit_wait_round(w->a, 2000), 0);
	return 0;
}

static int
teardown(void **state)
{
	struct world *w = *state;
	char cmd[160];

	audit_close(w->a);
	free(w->ans);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", w->dir);
	assert_int_equal(system(cmd), 0);
	free(w);
	return 0;
}

/* The lines of the trail. */
static int
lines(const struct world *w)
{
	FILE *f = fopen(w->path, "r");
	int c, n = 0;

	assert_non_null(f);
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Serves one request; its answer's type, or 0 for a violation. */
static uint32_t
serve(struct world *w, uint32_t type, const uint8_t *p, size_t len,
    size_t *alen)
{
	struct chan_hdr h = { type, (uint32_t)len, 1 };
	const char *why = NULL;
	uint32_t t = 0;

	if (kproto_admit(type, len, KPROTO_FROM_AUDIT, KPROTO_RUN, &why) ==
	    NULL)
		return 0;
	if (aserve_handle(w->a, &h, p, &t, w->ans, alen, &why) != 0) {
		assert_non_null(why);
		return 0;
	}
	return t;
}

static void
put_flat(struct wire_w *wr, const struct aflat *f)
{
	wire_u32(wr, 1);
	wire_u32(wr, f->at_hash);
	wire_u32(wr, f->at_prev);
	wire_u32(wr, f->at_seq);
	wire_bytes(wr, f->body, f->len);
}

static void
t_round(void **state)
{
	struct world *w = *state;
	uint8_t msg[4096];
	struct wire_w wr;
	struct wire_r rd;
	struct aflat *f = made("request");
	size_t alen;
	uint64_t seq;
	int before = lines(w);

	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, KPROTO_ROUND_SYNC);
	wire_u32(&wr, 2);
	put_flat(&wr, f);
	wire_u32(&wr, 2);
	wire_str(&wr, "{\"ts\":\"2026-12-06T00:00:00.000Z\",\"type\":\"policy_change\","
	    "\"policy\":\"p\"}");
	assert_false(wr.over);
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen),
	    KPROTO_OK);
	/* answered once durable: both lines are in the file already */
	assert_int_equal(lines(w), before + 2);
	wire_r_init(&rd, w->ans, alen);
	seq = wire_get_u64(&rd);
	assert_int_equal(before, 1);	/* "start" */
	assert_int_equal(seq, (uint64_t)before + 2);
	free(f);
}

static void
t_round_refused(void **state)
{
	struct world *w = *state;
	uint8_t msg[4096];
	struct wire_w wr;
	struct aflat *f = made("checkpoint");
	size_t alen;
	int before = lines(w);

	/* a checkpoint of the worker's making ends the worker */
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, KPROTO_ROUND_SYNC);
	wire_u32(&wr, 1);
	put_flat(&wr, f);
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen), 0);
	free(f);
	/* a text record of the writer's own type: likewise */
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, 0);
	wire_u32(&wr, 1);
	wire_u32(&wr, 2);
	wire_str(&wr, "{\"ts\":\"x\",\"type\":\"start\"}");
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen), 0);
	/* text that is not JSON, a kind that is not one, a short count */
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, 0);
	wire_u32(&wr, 1);
	wire_u32(&wr, 2);
	wire_str(&wr, "{\"ts\":");
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen), 0);
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, 0);
	wire_u32(&wr, 1);
	wire_u32(&wr, 3);
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen), 0);
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u32(&wr, 0);
	wire_u32(&wr, 2);
	assert_int_equal(serve(w, KPROTO_AUDIT_ROUND, msg, wr.len, &alen), 0);
	/* a release with bytes left over; and from another role */
	wire_w_init(&wr, msg, sizeof(msg));
	wire_u64(&wr, 1);
	wire_u32(&wr, 0);
	assert_int_equal(serve(w, KPROTO_AUDIT_RELEASE, msg, wr.len, &alen), 0);
	{
		const char *why;

		assert_null(kproto_admit(KPROTO_AUDIT_ROUND, 8,
		    KPROTO_FROM_WORKER, KPROTO_RUN, &why));
		assert_null(kproto_admit(KPROTO_AUDIT_ROUND, 8,
		    KPROTO_FROM_CTL, KPROTO_RUN, &why));
	}
	/* nothing of it was written */
	audit_wait_round(w->a, 2000);
	assert_int_equal(lines(w), before);
}

static void
t_release(void **state)
{
	struct world *w = *state;
	uint8_t msg[16];
	struct wire_w wr;
	size_t alen;
	int before = lines(w);
	FILE *f;
	char line[1024], last[1024] = "", prev[1024] = "";

	wire_w_init(&wr, msg, sizeof(msg));
	wire_u64(&wr, 4242);
	assert_int_equal(serve(w, KPROTO_AUDIT_RELEASE, msg, wr.len, &alen),
	    KPROTO_OK);
	/* an "upgrade" record naming the successor (no signing key: no checkpoint) */
	assert_int_equal(lines(w), before + 1);
	assert_non_null(f = fopen(w->path, "r"));
	while (fgets(line, sizeof(line), f) != NULL) {
		memcpy(prev, last, sizeof(prev));
		memcpy(last, line, sizeof(last));
	}
	fclose(f);
	assert_non_null(strstr(last, "\"type\":\"upgrade\""));
	assert_non_null(strstr(last, "\"to_pid\":4242"));
	/* the file is let go: a round after it is not written */
	(void)prev;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_worker_records_pass),
		cmocka_unit_test(t_reserved_types),
		cmocka_unit_test(t_own_chain_members),
		cmocka_unit_test(t_bytes),
		cmocka_unit_test(t_shape),
		cmocka_unit_test_setup_teardown(t_round, setup, teardown),
		cmocka_unit_test_setup_teardown(t_round_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_release, setup, teardown),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
