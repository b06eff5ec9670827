/*
 * fuzz_aserve.c: the keys process's side of a remote audit trail, fed
 * what a taken-over worker could send on the audit channel.
 *
 * An input is messages, each [u8 selector][u16 length, little-endian]
 * [payload]: the selector 0xff is AUDIT_TAKEOVER, any other AUDIT_ROUND
 * (AUDIT_RELEASE would let go of the file for the rest of the run).
 * Each is admitted by the table as the keys process admits it, then
 * served by aserve_handle into a writer whose file is in a temporary
 * folder (made empty again now and then; a round's rotate flag is
 * cleared, so no file is renamed).
 * Promises checked: nothing crashes or leaks; a refusal gives no answer;
 * and every flat record aserve_check_flat accepts is one JSON object to
 * jansson too (with the '{' its body's first ',' stands for), whose
 * "type" is not one the writer alone writes.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/chan.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/kproto.h"
#include "audit/arec.h"
#include "audit/aserve.h"
#include "audit/audit.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static struct audit *trail;
static uint8_t *ans, *msg;
static char path[64];
static unsigned long inputs;

/* The temporary folder goes with the process. */
static void
cleanup(void)
{
	char dir[64];

	unlink(path);
	snprintf(dir, sizeof(dir), "%s", path);
	if (strrchr(dir, '/') != NULL)
		*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct audit_opts o;
	char why[256];

	if (sodium_init() < 0)
		abort();
	log_init("fuzz_aserve", LOG_LVL_ERR);
	char dir[] = "/tmp/fuzz_aserve.XXXXXX";

	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/trail.jsonl", dir);
	atexit(cleanup);
	memset(&o, 0, sizeof(o));
	o.path = path;
	o.mode = AUDIT_FSYNC_NEVER;
	o.queue = 4096;
	o.checkpoint_records = 1u << 30;
	o.checkpoint_ms = 1u << 30;
	o.sink = 1;
	if (audit_open(&o, &trail, why, sizeof(why)) != 0 ||
	    (ans = malloc(CHAN_MSG_MAX)) == NULL ||
	    (msg = malloc(1u << 16)) == NULL) {
		fprintf(stderr, "fuzz_aserve: %s\n", why);
		abort();
	}
	return 0;
}

/* jansson's view of an accepted flat record. */
static void
oracle(const uint8_t *p, size_t len)
{
	struct wire_r rd;
	struct aflat *f;
	const uint8_t *b;
	const char *why, *t;
	uint32_t n, i, kind;
	size_t blen;
	json_t *o;
	char *text;

	wire_r_init(&rd, p, len);
	(void)wire_get_u32(&rd);
	n = wire_get_u32(&rd);
	for (i = 0; i < n && !rd.bad; i++) {
		kind = wire_get_u32(&rd);
		if (kind == 2) {
			(void)wire_get_bytes(&rd, CHAN_MSG_MAX, &blen);
			continue;
		}
		if (kind != 1)
			return;
		f = malloc(sizeof(*f) + CHAN_MSG_MAX);
		f->at_hash = wire_get_u32(&rd);
		f->at_prev = wire_get_u32(&rd);
		f->at_seq = wire_get_u32(&rd);
		b = wire_get_bytes(&rd, CHAN_MSG_MAX, &blen);
		if (b != NULL) {
			f->len = (uint32_t)blen;
			memcpy(f->body, b, blen);
			if (aserve_check_flat(f, &why) == 0) {
				if ((text = malloc(blen + 2)) == NULL)
					abort();
				text[0] = '{';
				memcpy(text + 1, b + 1, blen - 1);
				text[blen] = '}';
				o = json_loadb(text, blen + 1, 0, NULL);
				if (o == NULL || !json_is_object(o) ||
				    (t = json_string_value(json_object_get(o,
				    "type"))) == NULL ||
				    strcmp(t, "checkpoint") == 0 ||
				    strcmp(t, "start") == 0 ||
				    strcmp(t, "upgrade") == 0 ||
				    strcmp(t, "file_start") == 0) {
					fprintf(stderr, "accepted: %.*s\n",
					    (int)blen, (const char *)b);
					abort();
				}
				json_decref(o);
				free(text);
			}
		}
		free(f);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	const char *why;
	struct chan_hdr h;
	uint32_t type;
	size_t len, alen;

	/* The file is not read: kept small (appends go on at its end). */
	if (++inputs % 4096 == 0 && truncate(path, 0) != 0)
		abort();
	while (n >= 3) {
		/* A takeover waits for a writer's round: seldom, or runs crawl. */
		h.type = d[0] == 0xff ? KPROTO_AUDIT_TAKEOVER : KPROTO_AUDIT_ROUND;
		len = (size_t)d[1] | (size_t)d[2] << 8;
		d += 3;
		n -= 3;
		if (len > n)
			len = n;
		h.len = (uint32_t)len;
		h.id = 1;
		memcpy(msg, d, len);
		if (h.type == KPROTO_AUDIT_ROUND && len >= 4)
			msg[0] &= (uint8_t)~KPROTO_ROUND_ROTATE;
		if (h.type == KPROTO_AUDIT_ROUND)
			oracle(msg, len);
		if (kproto_admit(h.type, len, KPROTO_FROM_AUDIT, KPROTO_RUN,
		    &why) != NULL) {
			type = 0;
			alen = 0;
			if (aserve_handle(trail, &h, msg, &type, ans, &alen,
			    &why) == 0 && type != KPROTO_OK && type != KPROTO_ERR)
				abort();
		}
		d += len;
		n -= len;
	}
	return 0;
}
