/*
 * audit_remote.c: a trail the keys process writes (audit.h, chan).  The
 * writer thread here keeps the queue, the tickets and the wake-ups; each
 * round it takes goes to the keys process as AUDIT_ROUND messages
 * (kproto.h), which chains, signs, writes and syncs it there, where a
 * worker that is taken over cannot reach the chain or the signing key.
 * With fsync always, the last message asks for the answer once the
 * round is durable, so the promise holds across the boundary.
 */
#include "autoconf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "audit/audit_int.h"

/* The trail's figures the keys process answers with (kproto.h). */
static int
take_figures(struct audit *a, const uint8_t *ans, size_t n)
{
	char head[AUDIT_HASH_HEX + 1];
	uint64_t seq, written, cps, rot, cp_seq, errs, synced;
	struct wire_r rd;
	uint32_t err;

	wire_r_init(&rd, ans, n);
	seq = wire_get_u64(&rd);
	wire_get_str(&rd, head, sizeof(head));
	written = wire_get_u64(&rd);
	cps = wire_get_u64(&rd);
	rot = wire_get_u64(&rd);
	cp_seq = wire_get_u64(&rd);
	errs = wire_get_u64(&rd);
	synced = wire_get_u64(&rd);
	(void)wire_get_u32(&rd);
	err = wire_get_u32(&rd);
	if (wire_done(&rd) != 0) {
		errno = EPROTO;
		return SL_ERR_IO;
	}
	pthread_mutex_lock(&a->mtx);
	a->pub_seq = a->seq = seq;
	memcpy(a->pub_head, head, sizeof(a->pub_head));
	a->written = written;
	a->checkpoints = cps;
	a->rotations = rot;
	a->cp_seq = cp_seq;
	pthread_mutex_unlock(&a->mtx);
	(void)errs;
	atomic_store(&a->synced_at, (long long)synced);
	clock_gettime(CLOCK_MONOTONIC, &a->figures_at);
	if (err != 0) {
		/* Written there, or not: the keys process could not. */
		errno = (int)err;
		return SL_ERR_IO;
	}
	return 0;
}

/* ms since the figures were last answered. */
static long
ms_since_figures(const struct audit *a)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - a->figures_at.tv_sec) * 1000 +
	    (now.tv_nsec - a->figures_at.tv_nsec) / 1000000;
}

/* One call on the writer thread's channel; figures from its answer. */
static int
call(struct audit *a, uint32_t type, const void *req, size_t len)
{
	uint8_t ans[512];
	char why[KPROTO_WHY_MAX];
	size_t n;
	int r;

	if ((r = kclient_call(type, req, len, ans, sizeof(ans), &n,
	    why)) != 0) {
		log_debug("audit", "the keys process: %s", why);
		errno = r == SL_ERR_IO && errno != 0 ? errno : EIO;
		return SL_ERR_IO;
	}
	return take_figures(a, ans, n);
}

/* A record's fields (kproto.h, AUDIT_ROUND), or 0 when it has none. */
static size_t
put_slot(struct wire_w *w, const struct slot *sl, char **text)
{
	size_t at = w->len;

	*text = NULL;
	if (sl->flat != NULL) {
		wire_u32(w, 1);
		wire_u32(w, sl->flat->at_hash);
		wire_u32(w, sl->flat->at_prev);
		wire_u32(w, sl->flat->at_seq);
		wire_bytes(w, sl->flat->body, sl->flat->len);
	} else if (sl->rec != NULL) {
		if ((*text = json_dumps(sl->rec, JSON_COMPACT)) == NULL)
			return 0;
		wire_u32(w, 2);
		wire_str(w, *text);
	} else
		return 0;
	return w->len - at;
}

/* A message of the round: flags, the count, then its records. */
static int
send_part(struct audit *a, uint8_t *msg, size_t len, uint32_t flags,
    uint32_t n)
{
	struct wire_w hd;

	wire_w_init(&hd, msg, 8);
	wire_u32(&hd, flags);
	wire_u32(&hd, n);
	return call(a, KPROTO_AUDIT_ROUND, msg, len);
}

/* Adds batch[i] to the message in w, sending w first when it is full. */
static int
add_slot(struct audit *a, struct wire_w *w, uint32_t *k,
    const struct slot *sl)
{
	size_t at = w->len, got;
	char *text;
	int r = 0;

	got = put_slot(w, sl, &text);
	if (got > 0 && w->over && *k > 0) {
		/* Full: what came before goes, this one starts the next. */
		w->over = 0;
		w->len = at;
		if ((r = send_part(a, w->p, w->len, 0, *k)) == 0) {
			w->len = 8;
			*k = 0;
			at = w->len;
			free(text);
			got = put_slot(w, sl, &text);
		}
	}
	if (r == 0 && got > 0 && w->over) {
		log_warnx("audit", "a record too long to send is lost");
		w->over = 0;
		w->len = at;
	} else if (r == 0 && got > 0)
		(*k)++;
	free(text);
	return r;
}

static int
remote_round(struct audit *a, struct slot *batch, size_t n, int rotate,
    int sync, char **buf, size_t *cap)
{
	struct wire_w w;
	uint64_t last = 0;
	uint32_t k = 0, flags;
	size_t i;
	int r = 0;

	if (*cap < CHAN_MSG_MAX) {
		char *nb;

		if ((nb = realloc(*buf, CHAN_MSG_MAX)) == NULL) {
			for (i = 0; i < n; i++)
				aw_slot_free(&batch[i]);
			errno = ENOMEM;
			return SL_ERR_NOMEM;
		}
		*buf = nb;
		*cap = CHAN_MSG_MAX;
	}
	wire_w_init(&w, *buf, CHAN_MSG_MAX);
	w.len = 8;		/* flags and count go first */
	for (i = 0; i < n; i++) {
		if (batch[i].ticket != 0)
			last = batch[i].ticket;
		if (r == 0)
			r = add_slot(a, &w, &k, &batch[i]);
		aw_slot_free(&batch[i]);
	}
	if (last > 0 && a->o.mode == AUDIT_FSYNC_ALWAYS)
		sync = 1;
	flags = (rotate ? KPROTO_ROUND_ROTATE : 0) |
	    (sync ? KPROTO_ROUND_SYNC : 0);
	/* Idle, the figures (checkpoints, rotations) are asked for each second. */
	if (r == 0 && (k > 0 || flags != 0 || ms_since_figures(a) >= 1000))
		r = send_part(a, (uint8_t *)*buf, w.len, flags, k);
	if (r != 0) {
		a->broke_errno = errno;
		atomic_fetch_add(&a->out_lost, n);
		return r;
	}
	if (last > 0)
		aw_mark_durable(a, last, 0);
	return 0;
}

int
aw_remote_round(struct audit *a, struct slot *batch, size_t n, int rotate,
    char **buf, size_t *cap)
{
	return remote_round(a, batch, n, rotate, 0, buf, cap);
}

int
aw_remote_take(struct audit *a)
{
	if (call(a, KPROTO_AUDIT_TAKEOVER, NULL, 0) != 0) {
		a->broke_errno = errno;
		return -1;
	}
	pthread_mutex_lock(&a->mtx);
	aw_stage_set(a, AUDIT_REMOTE);
	pthread_mutex_unlock(&a->mtx);
	log_debug("audit", "%s taken over from pid %ld at seq %" PRIu64,
	    a->path, a->o.await_pid, a->seq);
	return 0;
}

int
aw_remote_release(struct audit *a)
{
	uint8_t req[8];
	struct wire_w w;
	int r;

	wire_w_init(&w, req, sizeof(req));
	wire_u64(&w, (uint64_t)a->hand_to);
	if ((r = call(a, KPROTO_AUDIT_RELEASE, req, w.len)) != 0)
		a->broke_errno = errno;
	/* The successor goes on whatever happened here. */
	return aw_handed(a, r);
}

int
aw_remote_resume(struct audit *a, json_t *rec)
{
	struct slot sl = { rec, NULL, 0 };
	char *buf = NULL;
	size_t cap = 0;
	int r;

	json_incref(rec);
	r = remote_round(a, &sl, 1, 0, 1, &buf, &cap);
	free(buf);
	return r;
}
