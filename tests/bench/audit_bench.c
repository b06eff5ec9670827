/*
 * audit_bench.c: how many records a second the audit writer (audit.c)
 * takes, per fsync mode, on the disk of PATH.  THREADS producers queue
 * request-sized records for SECONDS; with "wait", each waits for its
 * record to be durable before the next, as an injected request does under
 * fsync always.  Prints one line of key=value: mode records rps p50_us
 * p99_us (submit to durable) checkpoints bytes.  Not a test.
 *
 * usage: audit_bench PATH always|batch|never SECONDS THREADS [wait]
 *        [SIGNING_KEY]
 */
#include "autoconf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "keys/signkey.h"
#include "audit/audit.h"

static struct audit *a;
static int waiting;
static atomic_int stop;
static atomic_ullong total;

#define MAXLAT	(1u << 20)
static uint32_t lat[MAXLAT];	/* microseconds, per record, while room */
static atomic_uint nlat;

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void *
producer(void *arg)
{
	uint64_t t0, ticket, n = 0;
	unsigned i;
	json_t *rec;
	struct timespec nap = { 0, 20000 };

	while (!atomic_load(&stop)) {
		rec = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s,"
		    " s:s, s:[{s:s, s:I, s:s}], s:b}", "sandbox", "bench",
		    "policy", "icpt", "revision", (json_int_t)1, "method",
		    "GET", "host", "api.example.com", "path",
		    "/v1/repos/acme/widgets/issues", "action", "inject",
		    "reason", "intercept-rule", "rule", "intercept:bench",
		    "rid", "6b0e60ce-0-123456", "secrets", "name", "token",
		    "version", (json_int_t)3, "fingerprint",
		    "9edff345d56b2ace389b8cc7b01f80e9", "intercepted", 1);
		t0 = now_us();
		if (audit_submit(a, "request", rec, &ticket) != 0)
			continue;
		while (waiting && audit_durable(a) < ticket)
			nanosleep(&nap, NULL);
		if ((i = atomic_fetch_add(&nlat, 1)) < MAXLAT)
			lat[i] = (uint32_t)(now_us() - t0);
		n++;
	}
	atomic_fetch_add(&total, n);
	return arg;
}

static int
cmp_u32(const void *x, const void *y)
{
	uint32_t a1 = *(const uint32_t *)x, b1 = *(const uint32_t *)y;

	return a1 < b1 ? -1 : a1 > b1;
}

int
main(int argc, char **argv)
{
	struct audit_opts o;
	struct audit_stats st;
	struct signkey *k = NULL;
	pthread_t th[64];
	const char *why = NULL;
	char err[256];
	struct stat sb;
	unsigned secs, nth, i, n;
	uint64_t t0, t1;

	if (argc < 5) {
		fprintf(stderr, "usage: audit_bench PATH always|batch|never "
		    "SECONDS THREADS [wait] [SIGNING_KEY]\n");
		return 2;
	}
	if (sodium_init() < 0)
		return 1;
	memset(&o, 0, sizeof(o));
	o.path = argv[1];
	o.mode = strcmp(argv[2], "always") == 0 ? AUDIT_FSYNC_ALWAYS :
	    strcmp(argv[2], "batch") == 0 ? AUDIT_FSYNC_BATCH :
	    AUDIT_FSYNC_NEVER;
	secs = (unsigned)atoi(argv[3]);
	nth = (unsigned)atoi(argv[4]);
	if (nth < 1 || nth > 64 || secs < 1)
		return 2;
	waiting = argc > 5 && strcmp(argv[5], "wait") == 0;
	if (argc > 6 && signkey_load(argv[6], &k, &why) != 0) {
		fprintf(stderr, "audit_bench: %s: %s\n", argv[6], why ? why : "?");
		return 1;
	}
	o.queue = 65536;
	o.checkpoint_records = 1000;
	o.checkpoint_ms = 60000;
	o.sign = k;
	if (audit_open(&o, &a, err, sizeof(err)) != 0) {
		fprintf(stderr, "audit_bench: %s\n", err);
		return 1;
	}
	t0 = now_us();
	for (i = 0; i < nth; i++)
		pthread_create(&th[i], NULL, producer, NULL);
	sleep(secs);
	atomic_store(&stop, 1);
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	audit_get_stats(a, &st);
	audit_close(a);		/* the queued rest, and the last checkpoint */
	t1 = now_us();
	n = atomic_load(&nlat) < MAXLAT ? atomic_load(&nlat) : MAXLAT;
	qsort(lat, n, sizeof(lat[0]), cmp_u32);
	stat(argv[1], &sb);
	printf("mode=%s wait=%d threads=%u records=%llu rps=%.0f p50_us=%u "
	    "p99_us=%u checkpoints=%llu bytes=%lld\n", argv[2], waiting, nth,
	    (unsigned long long)atomic_load(&total),
	    (double)atomic_load(&total) * 1e6 / (double)(t1 - t0),
	    n ? lat[n / 2] : 0, n ? lat[n * 99 / 100] : 0,
	    (unsigned long long)st.checkpoints, (long long)sb.st_size);
	signkey_free(k);
	return 0;
}
