/*
 * test_audit.c: the audit writer when its file cannot be written.  A
 * file size limit (RLIMIT_FSIZE) stands in for a full disk: the writer
 * must refuse what needs a record, leave no half record behind, and
 * take records again by itself once the limit is lifted, its first
 * record saying how long and how many were refused.
 */
#include "autoconf.h"

#include <sys/resource.h>
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

/* A record an action waits for; its ticket, once durable (or 0). */
static uint64_t
submit(struct audit *a, const char *path, int *rc)
{
	uint64_t t = 0;
	int ms = 3000;
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	*rc = audit_submit(a, "request", json_pack("{s:s}", "path", path), &t);
	while (*rc == 0 && t != 0 && audit_durable(a) < t && ms > 0) {
		nanosleep(&ts, NULL);
		ms -= 10;
	}
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_recovers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
