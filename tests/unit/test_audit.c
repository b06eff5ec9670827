/*
 * test_audit.c: the audit writer when its file cannot be written.  A
 * file size limit (RLIMIT_FSIZE) stands in for a full disk: the writer
 * must refuse what needs a record, leave no half record behind, and
 * take records again by itself once the limit is lifted, its first
 * record saying how long and how many were refused.
 *
 * And an upgrade's handover (audit.h): two writers of one trail in one
 * process, the test playing the new daemon's side of the channel.
 */
#include "autoconf.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include <jansson.h>

#include "util/err.h"
#include "util/log.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"

/* Waits up to ms for cond(a) to hold; its last value. */
static int
wait_for(struct audit *a, int (*cond)(struct audit *), int ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	while (!cond(a) && ms > 0) {
		nanosleep(&ts, NULL);
		ms -= 10;
	}
	return cond(a);
}

static int
failed(struct audit *a)
{
	return audit_failed(a);
}

static int
working(struct audit *a)
{
	return !audit_failed(a);
}

/* Waits up to ms for ticket t to be durable; whether it is. */
static int
durable_within(struct audit *a, uint64_t t, int ms)
{
	struct timespec ts = { 0, 5 * 1000 * 1000 };

	while (audit_durable(a) < t && ms > 0) {
		nanosleep(&ts, NULL);
		ms -= 5;
	}
	return audit_durable(a) >= t;
}

/* A record an action waits for; its ticket, once durable (or 0). */
static uint64_t
submit(struct audit *a, const char *path, int *rc)
{
	uint64_t t = 0;

	*rc = audit_submit(a, "request", json_pack("{s:s}", "path", path), &t);
	if (*rc == 0 && t != 0)
		durable_within(a, t, 3000);
	return t;
}

/* The records of path of the given type. */
static size_t
count_type(const char *path, const char *type, json_t **last)
{
	char line[8192];
	size_t n = 0;
	FILE *f = fopen(path, "r");
	json_t *r;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if ((r = json_loads(line, 0, NULL)) == NULL)
			continue;
		if (strcmp(json_string_value(json_object_get(r, "type")),
		    type) == 0) {
			n++;
			if (last != NULL) {
				json_decref(*last);
				*last = json_incref(r);
			}
		}
		json_decref(r);
	}
	fclose(f);
	return n;
}

static void
t_recovers(void **state)
{
	char dir[] = "/tmp/sluice-audit-XXXXXX", path[256], why[512];
	struct audit_opts o;
	struct audit_verify_stats st;
	struct audit_verifier *v;
	struct audit *a;
	struct rlimit old, rl;
	struct stat sb;
	json_t *res = NULL;
	uint64_t t;
	int rc, i;

	(void)state;
	if (getenv("TEST_DEBUG") != NULL)
		log_init("test_audit", LOG_LVL_DEBUG);
	signal(SIGXFSZ, SIG_IGN);	/* past the limit: EFBIG, not death */
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.mode = AUDIT_FSYNC_ALWAYS;
	o.queue = 64;
	o.checkpoint_records = 1000;
	o.checkpoint_ms = 600000;
	assert_int_equal(audit_open(&o, &a, why, sizeof(why)), 0);
	t = submit(a, "/before", &rc);
	assert_int_equal(rc, 0);
	assert_true(audit_durable(a) >= t);

	/* The disk is full: a few bytes more fit, not a record. */
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	rl = old;
	rl.rlim_cur = (rlim_t)sb.st_size + 10;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
	t = 0;
	rc = audit_submit(a, "request", json_pack("{s:s}", "path", "/lost"),
	    &t);
	assert_true(wait_for(a, failed, 3000));
	assert_true(rc != 0 || audit_durable(a) < t);
	for (i = 0; i < 3; i++) {
		submit(a, "/refused", &rc);
		assert_int_equal(rc, SL_ERR_IO);
	}
	/* Nothing of the failed round stays: the file is cut back. */
	assert_int_equal(stat(path, &sb), 0);
	assert_true((uint64_t)sb.st_size <= (uint64_t)rl.rlim_cur - 10);

	/* Room again: it takes records by itself, no reopen, no restart. */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_true(wait_for(a, working, 5000));
	t = submit(a, "/after", &rc);
	assert_int_equal(rc, 0);
	assert_true(audit_durable(a) >= t);
	audit_close(a);

	assert_int_equal(count_type(path, "audit_resumed", &res), 1);
	assert_true(json_integer_value(json_object_get(res, "refused")) >= 3);
	assert_true(json_integer_value(json_object_get(res, "refused_ms")) >
	    0);
	json_decref(res);
	/* The trail verifies whole, and says what the outage cost. */
	assert_non_null(v = audit_verifier_new(NULL, 0, AUDIT_VERIFY_OPEN));
	assert_int_equal(audit_verifier_file(v, path, why, sizeof(why)), 0);
	assert_int_equal(audit_verifier_finish(v, why, sizeof(why)), 0);
	audit_verifier_stats(v, &st);
	assert_int_equal(st.outages, 1);
	assert_true(st.outage_refused >= 3);
	audit_verifier_free(v);
	unlink(path);
	rmdir(dir);
}

/* One line from fd (blocking), without its newline, into buf. */
static int
read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;
	char c;

	while (n + 1 < cap && (r = read(fd, &c, 1)) == 1 && c != '\n')
		buf[n++] = c;
	buf[n] = '\0';
	return n > 0 || c == '\n' ? 0 : -1;
}

static uint64_t
submit_nowait(struct audit *a, const char *path)
{
	uint64_t t = 0;

	assert_int_equal(audit_submit(a, "request", json_pack("{s:s}", "path",
	    path), &t), 0);
	return t;
}

static void
wait_durable(struct audit *a, uint64_t t)
{
	assert_true(durable_within(a, t, 5000));
}

static void
t_handover(void **state)
{
	char dir[] = "/tmp/sluice-audit-XXXXXX", path[256], why[512];
	char line[8192], *types[16], *end;
	struct audit_opts o;
	struct audit_verifier *v;
	struct audit *a, *b;
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	struct stat before, after;
	uint64_t ta, tb, tb2 = 0, tr = 0;
	size_t n = 0, i;
	FILE *f;
	json_t *r;
	int sv[2];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.mode = AUDIT_FSYNC_ALWAYS;
	o.queue = 64;
	o.checkpoint_records = 1000;
	o.checkpoint_ms = 600000;
	assert_int_equal(audit_open(&o, &a, why, sizeof(why)), 0);
	wait_durable(a, submit_nowait(a, "/a1"));

	/* The successor: its records wait, nothing of it is written. */
	o.await_pid = 1234;
	assert_int_equal(audit_open(&o, &b, why, sizeof(why)), 0);
	assert_int_equal(stat(path, &before), 0);
	tb = submit_nowait(b, "/b-early");
	assert_true(tb > 0);
	nanosleep(&ts, NULL);
	assert_true(audit_durable(b) < tb);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_size, before.st_size);
	/* What is not a record is refused. */
	assert_int_equal(audit_submit_text(b, "{", 1, NULL), SL_ERR_INVALID);
	assert_int_equal(audit_submit_text(b, "[1]", 3, NULL), SL_ERR_INVALID);
	assert_int_equal(audit_submit_text(b, "{\"type\":\"x\"}", 12, NULL),
	    SL_ERR_INVALID);

	/* The handover: the old writer lets go, the new one takes it. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(audit_handover(a, sv[0], 999), 0);
	assert_int_equal(audit_handover(a, -1, 999), SL_ERR_EXISTS);
	assert_int_equal(read_line(sv[1], line, sizeof(line)), 0);
	assert_string_equal(line, "released");
	audit_takeover(b);
	wait_durable(b, tb);

	/* The old one's next record goes through the new one. */
	ta = submit_nowait(a, "/a2");
	assert_true(ta > 0);
	for (;;) {
		assert_int_equal(read_line(sv[1], line, sizeof(line)), 0);
		if (line[0] == 'R') {
			assert_int_equal(audit_submit_text(b, line + 2,
			    strlen(line + 2), &tr), 0);
			continue;
		}
		assert_int_equal(line[0], 'S');
		assert_int_equal(strtoull(line + 2, &end, 10), ta);
		break;
	}
	assert_true(tr > 0);
	assert_true(audit_durable(a) < ta);	/* not before the new one says */
	wait_durable(b, tr);
	snprintf(line, sizeof(line), "A %llu\n", (unsigned long long)ta);
	assert_int_equal(write(sv[1], line, strlen(line)), (ssize_t)strlen(line));
	wait_durable(a, ta);
	audit_close(a);		/* the channel ends */
	assert_int_equal(read(sv[1], line, 1), 0);
	tb2 = submit_nowait(b, "/b-late");
	wait_durable(b, tb2);
	audit_close(b);
	close(sv[1]);

	/* One chain: the old run, the upgrade, the new run. */
	assert_non_null(f = fopen(path, "r"));
	while (n < 16 && fgets(line, sizeof(line), f) != NULL) {
		assert_non_null(r = json_loads(line, 0, NULL));
		if (strcmp(json_string_value(json_object_get(r, "type")),
		    "request") == 0)
			types[n++] = strdup(json_string_value(json_object_get(r,
			    "path")));
		else if (strcmp(json_string_value(json_object_get(r, "type")),
		    "upgrade") == 0) {
			assert_int_equal(json_integer_value(json_object_get(r,
			    "to_pid")), 999);
			types[n++] = strdup("upgrade");
		} else if (json_object_get(r, "upgraded_from") != NULL) {
			assert_int_equal(json_integer_value(json_object_get(r,
			    "upgraded_from")), 1234);
			types[n++] = strdup("start-b");
		}
		json_decref(r);
	}
	fclose(f);
	assert_int_equal(n, 6);
	assert_string_equal(types[0], "/a1");
	assert_string_equal(types[1], "upgrade");
	assert_string_equal(types[2], "start-b");
	assert_string_equal(types[3], "/b-early");
	assert_string_equal(types[4], "/a2");
	assert_string_equal(types[5], "/b-late");
	for (i = 0; i < n; i++)
		free(types[i]);
	assert_non_null(v = audit_verifier_new(NULL, 0, AUDIT_VERIFY_OPEN));
	assert_int_equal(audit_verifier_file(v, path, why, sizeof(why)), 0);
	assert_int_equal(audit_verifier_finish(v, why, sizeof(why)), 0);
	audit_verifier_free(v);
	unlink(path);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_recovers),
		cmocka_unit_test(t_handover),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
