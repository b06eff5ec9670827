/*
 * audit.c: the audit trail's writer.  Producers (workers, the control
 * thread) put records in one bounded ring under a mutex; one writer
 * thread takes everything queued at once, chains and hashes each record
 * (auditfmt.h), adds checkpoints, writes the batch with one write(2), and
 * syncs as the fsync mode says -- so with fsync always, many records
 * share one fdatasync (group commit).
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/log.h"
#include "keys/kclient.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"
#include "audit/audit_int.h"

#define SYNC_MS		100	/* fsync batch: at most this late */
#define SYNC_RECORDS	1000	/* or after this many records */
/*
 * A record nobody waits for does not wake the writer: it is written with
 * the next one someone waits for, or at most this late.
 */
#define LAZY_MS		20
/* After a write or sync error, the writer tries again this often. */
#define RETRY_FIRST_MS	100
#define RETRY_MAX_MS	2000

/* ---- time ----------------------------------------------------------- */

void
aw_format_ts(char *buf, size_t len)
{
	char ts[AREC_TS_LEN];

	arec_ts(ts);
	snprintf(buf, len, "%s", ts);
}

static long
ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000 +
	    (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* ---- the file ------------------------------------------------------- */

int
aw_write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, buf, len)) == -1) {
			if (errno == EINTR)
				continue;
			return SL_ERR_IO;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The folder of the trail, synced: a new or renamed file survives a crash. */
void
aw_sync_dir(const struct audit *a)
{
	char dir[4096], *slash;
	int fd;

	snprintf(dir, sizeof(dir), "%s", a->path);
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(fd);
		close(fd);
	}
}

/* ---- the writer ----------------------------------------------------- */

/* Room for len more bytes in *out. */
static int
out_reserve(char **out, size_t outlen, size_t *outcap, size_t len)
{
	char *nb;
	size_t cap;

	if (outlen + len <= *outcap)
		return 0;
	cap = (*outcap + len) * 2;
	if ((nb = realloc(*out, cap)) == NULL)
		return SL_ERR_NOMEM;
	*out = nb;
	*outcap = cap;
	return 0;
}

/* The line of len bytes at *out + *outlen is the next record's. */
static void
appended(struct audit *a, const char *line, size_t len,
    const char hash[AUDIT_HASH_HEX + 1])
{
	if (a->o.syslog)
		syslog(LOG_NOTICE, "%.*s", (int)len - 1, line);
	a->seq++;
	memcpy(a->prev, hash, AUDIT_HASH_HEX + 1);
	a->since_cp++;
}

/* Where the chain and the file stand (audit_int.h), and back to it. */
void
aw_mark_take(const struct audit *a, struct mark *m)
{
	m->seq = a->seq;
	m->since_cp = a->since_cp;
	m->size = a->size;
	memcpy(m->prev, a->prev, sizeof(m->prev));
}

void
aw_mark_restore(struct audit *a, const struct mark *m)
{
	a->seq = m->seq;
	a->since_cp = m->since_cp;
	a->size = m->size;
	memcpy(a->prev, m->prev, sizeof(a->prev));
	a->unsynced = 0;
	if (a->fd != -1 && ftruncate(a->fd, (off_t)m->size) != 0)
		log_debug("audit", "cannot cut %s back: %s", a->path,
		    strerror(errno));
}

/* Chains rec as the next record and appends its line to *out. */
int
aw_append_record(struct audit *a, json_t *rec, char **out, size_t *outlen,
    size_t *outcap)
{
	char hash[AUDIT_HASH_HEX + 1], *line = NULL;
	size_t len;
	int r;

	auditfmt_bound(rec);
	if ((r = auditfmt_seal(rec, a->seq + 1, a->prev, hash, &line,
	    &len)) != 0)
		return r;
	if ((r = out_reserve(out, *outlen, outcap, len)) != 0) {
		free(line);
		return r;
	}
	memcpy(*out + *outlen, line, len);
	appended(a, *out + *outlen, len, hash);
	*outlen += len;
	free(line);
	return 0;
}

/* The same for a flat record: sealed straight into *out. */
static int
append_flat(struct audit *a, const struct aflat *f, char **out,
    size_t *outlen, size_t *outcap)
{
	char hash[AUDIT_HASH_HEX + 1];
	size_t len;
	int r;

	if ((r = out_reserve(out, *outlen, outcap, AUDIT_LINE_MAX)) != 0)
		return r;
	if ((len = aflat_seal(f, a->seq + 1, a->prev, hash, *out + *outlen,
	    AUDIT_LINE_MAX)) == 0)
		return SL_ERR_TOO_BIG;
	appended(a, *out + *outlen, len, hash);
	*outlen += len;
	return 0;
}

/* Frees what a slot holds. */
void
aw_slot_free(struct slot *sl)
{
	json_decref(sl->rec);
	free(sl->flat);
	sl->rec = NULL;
	sl->flat = NULL;
}

/* A signed checkpoint covering the chain head, appended like a record. */
int
aw_append_checkpoint(struct audit *a, char **out, size_t *outlen,
    size_t *outcap)
{
	char ts[40];
	json_t *cp;
	int r;

	if (a->o.sign == NULL)
		return 0;
	aw_format_ts(ts, sizeof(ts));
	cp = json_pack("{s:s, s:s, s:I, s:s, s:I}", "ts", ts,
	    "type", "checkpoint", "seq", (json_int_t)(a->seq + 1),
	    "prev", a->prev, "records", (json_int_t)a->since_cp);
	if (cp == NULL)
		return SL_ERR_NOMEM;
	if ((r = auditfmt_checkpoint_sign(cp, a->o.sign)) == 0 &&
	    (r = aw_append_record(a, cp, out, outlen, outcap)) == 0) {
		a->since_cp = 0;
		clock_gettime(CLOCK_MONOTONIC, &a->last_cp);
		pthread_mutex_lock(&a->mtx);
		a->checkpoints++;
		a->cp_seq = a->seq;
		pthread_mutex_unlock(&a->mtx);
	}
	json_decref(cp);
	return r;
}

/* The batch goes to the file; synced as the mode says (force: now). */
int
aw_flush_out(struct audit *a, const char *buf, size_t len, uint64_t nrec,
    int force)
{
	int r;

	if (len > 0 && (r = aw_write_all(a->fd, buf, len)) != 0)
		return r;
	a->size += len;
	a->unsynced += nrec;
	if (a->unsynced == 0 || a->o.mode == AUDIT_FSYNC_NEVER)
		return 0;
	if (force || a->o.mode == AUDIT_FSYNC_ALWAYS ||
	    a->unsynced >= SYNC_RECORDS || ms_since(&a->last_sync) >= SYNC_MS) {
		if (fdatasync(a->fd) != 0)
			return SL_ERR_IO;
		a->unsynced = 0;
		clock_gettime(CLOCK_MONOTONIC, &a->last_sync);
		atomic_store(&a->synced_at, (long long)time(NULL));
	}
	return 0;
}

void
aw_mark_durable(struct audit *a, uint64_t ticket, int force)
{
	uint64_t was = atomic_exchange(&a->durable, ticket);
	size_t i;

	/* Workers are woken only when an action waits for these records. */
	if (!force && atomic_load(&a->wanted) <= was)
		return;
	pthread_mutex_lock(&a->mtx);
	for (i = 0; i < a->nnotify; i++)
		event_active(a->notify[i], EV_READ, 0);
	pthread_cond_broadcast(&a->moved);
	pthread_mutex_unlock(&a->mtx);
}

/* Whether the path still names the file we write (not moved away). */
static int
path_is_ours(const struct audit *a)
{
	struct stat ps, fs;

	return stat(a->path, &ps) == 0 && fstat(a->fd, &fs) == 0 &&
	    ps.st_dev == fs.st_dev && ps.st_ino == fs.st_ino;
}

/*
 * Ends the file with a checkpoint and goes on in a new one at the path,
 * whose first record names the old one; its prev is the old file's last
 * hash, so the chain runs on across files.  The old file is moved aside
 * first, unless someone moved it already (logrotate's mv, then SIGUSR1):
 * then the path is only opened again.  When no new file can be opened,
 * the trail goes on in the old one.
 */
static int
rotate_file(struct audit *a)
{
	char aside[4096], *buf = NULL, ts[40];
	size_t len = 0, cap = 0;
	const char *base = NULL;
	struct stat sb;
	json_t *fs;
	struct mark m;
	int r, nfd, moved;

	aw_mark_take(a, &m);
	if ((r = aw_append_checkpoint(a, &buf, &len, &cap)) != 0 ||
	    (r = aw_flush_out(a, buf, len, 0, 1)) != 0) {
		a->broke_errno = errno;
		aw_mark_restore(a, &m);
		goto out;
	}
	len = 0;
	if (!(moved = !path_is_ours(a))) {
		if (aw_aside_name(a, "", aside, sizeof(aside)) != 0 ||
		    rename(a->path, aside) != 0) {
			/* Not fatal: the trail goes on in this file. */
			log_warnx("audit", "cannot rotate %s: %s; it goes on",
			    a->path, strerror(errno));
			goto out;
		}
		base = strrchr(aside, '/') != NULL ? strrchr(aside, '/') + 1 :
		    aside;
	}
	if ((nfd = open(a->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC,
	    0640)) == -1 || fstat(nfd, &sb) != 0 || sb.st_size != 0) {
		/* Not ours, or none: the trail goes on where it was. */
		log_warnx("audit", "cannot start a new %s: %s; the trail goes "
		    "on in the file it was in", a->path, nfd == -1 ?
		    strerror(errno) : "another file, not empty, is there");
		if (nfd != -1)
			close(nfd);
		goto out;
	}
	close(a->fd);
	a->fd = nfd;
	if (a->o.mode != AUDIT_FSYNC_NEVER)
		aw_sync_dir(a);
	a->size = 0;
	aw_format_ts(ts, sizeof(ts));
	fs = moved ? json_pack("{s:s, s:s, s:b}", "ts", ts, "type",
	    "file_start", "reopened", 1) : json_pack("{s:s, s:s, s:s}", "ts",
	    ts, "type", "file_start", "previous_file", base);
	if (fs == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	aw_mark_take(a, &m);
	r = aw_append_record(a, fs, &buf, &len, &cap);
	json_decref(fs);
	if (r == 0 && (r = aw_flush_out(a, buf, len, 1, 1)) != 0) {
		a->broke_errno = errno;
		aw_mark_restore(a, &m);
	}
	pthread_mutex_lock(&a->mtx);
	a->rotations++;
	pthread_mutex_unlock(&a->mtx);
	if (moved)
		log_info("audit", "%s was moved away: a new one goes on", a->path);
	else
		log_info("audit", "rotated: %s, then %s", aside, a->path);
 out:
	free(buf);
	return r;
}

/* When the writer must look again without new records: ms from now. */
static long
next_deadline(const struct audit *a)
{
	long w = LAZY_MS, t;

	if (a->unsynced > 0 && a->o.mode == AUDIT_FSYNC_BATCH &&
	    (t = SYNC_MS - ms_since(&a->last_sync)) < w)
		w = t;
	if (a->o.sign != NULL && a->since_cp > 0 &&
	    (t = (long)a->o.checkpoint_ms - ms_since(&a->last_cp)) < w)
		w = t;
	return w < 1 ? 1 : w;
}

static void
wait_for_work(struct audit *a)
{
	struct timespec until;
	long ms = next_deadline(a);

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&a->wake, &a->mtx, &until);
}

/* One round: everything queued, then checkpoints, sync, rotation. */
static int
write_round(struct audit *a, struct slot *batch, size_t n, int rotate,
    char **buf, size_t *cap)
{
	size_t len = 0, i;
	uint64_t last = 0, nrec = 0;
	struct mark m;
	int r = 0;

	aw_mark_take(a, &m);
	for (i = 0; i < n; i++) {
		if (batch[i].rec != NULL && r == 0 && (r = aw_append_record(a,
		    batch[i].rec, buf, &len, cap)) == 0)
			nrec++;
		if (batch[i].flat != NULL && r == 0 && (r = append_flat(a,
		    batch[i].flat, buf, &len, cap)) == 0)
			nrec++;
		aw_slot_free(&batch[i]);
		if (batch[i].ticket != 0)
			last = batch[i].ticket;
		if (r == 0 && a->since_cp >= a->o.checkpoint_records &&
		    (r = aw_append_checkpoint(a, buf, &len, cap)) == 0)
			nrec++;
	}
	if (r == 0 && a->o.sign != NULL && a->since_cp > 0 &&
	    ms_since(&a->last_cp) >= (long)a->o.checkpoint_ms &&
	    (r = aw_append_checkpoint(a, buf, &len, cap)) == 0)
		nrec++;
	if (r == 0)
		r = aw_flush_out(a, *buf, len, nrec, 0);
	if (r != 0) {
		a->broke_errno = errno;
		aw_mark_restore(a, &m);	/* none of the round counts */
		atomic_fetch_add(&a->out_lost, n);
		return r;
	}
	pthread_mutex_lock(&a->mtx);
	a->written += nrec;
	a->pub_seq = a->seq;
	memcpy(a->pub_head, a->prev, sizeof(a->pub_head));
	pthread_mutex_unlock(&a->mtx);
	if (last > 0 && (a->o.mode != AUDIT_FSYNC_ALWAYS || a->unsynced == 0))
		aw_mark_durable(a, last, 0);
	if (rotate || (a->o.max_mb > 0 &&
	    a->size >= (uint64_t)a->o.max_mb << 20))
		r = rotate_file(a);
	return r;
}

/* The record of records lost to a full queue (queue_full refuse). */
static struct slot
lost_record(uint64_t n)
{
	struct slot sl = { NULL, NULL, 0 };
	char ts[40];

	aw_format_ts(ts, sizeof(ts));
	sl.rec = json_pack("{s:s, s:s, s:I}", "ts", ts, "type",
	    "records_dropped", "count", (json_int_t)n);
	log_warnx("audit", "the queue was full: %llu record(s) other than "
	    "requests' were dropped", (unsigned long long)n);
	return sl;
}

/* ms from now to t (monotonic); negative once t has passed. */
static long
ms_until(const struct timespec *t)
{
	return -ms_since(t);
}

static void
retry_later(struct audit *a)
{
	clock_gettime(CLOCK_MONOTONIC, &a->retry_at);
	a->retry_at.tv_sec += a->retry_ms / 1000;
	a->retry_at.tv_nsec += (a->retry_ms % 1000) * 1000000;
	if (a->retry_at.tv_nsec >= 1000000000) {
		a->retry_at.tv_sec++;
		a->retry_at.tv_nsec -= 1000000000;
	}
}

/*
 * A write or sync failed: from now on what needs a record is refused,
 * and the writer tries again, less and less often, until the file takes
 * records again (try_resume).
 */
static void
broke(struct audit *a)
{
	if (a->stage == AUDIT_FORWARD)
		log_errx("audit", "the new process (pid %ld) does not take "
		    "records: %s; injected and forwarded requests are refused",
		    a->hand_to, strerror(a->broke_errno));
	else if (a->stage == AUDIT_REMOTE)
		log_errx("audit", "the keys process does not take records for "
		    "%s: %s; injected and forwarded requests are refused until "
		    "it does again", a->path, strerror(a->broke_errno));
	else
		log_errx("audit", "cannot write %s: %s; injected and forwarded "
		    "requests are refused until it can be written again",
		    a->path, strerror(a->broke_errno));
	atomic_store(&a->broken, 1);
	atomic_fetch_add(&a->errors, 1);
	clock_gettime(CLOCK_MONOTONIC, &a->broke_at);
	a->retry_ms = RETRY_FIRST_MS;
	retry_later(a);
	/* Requests held for their records are refused now. */
	aw_mark_durable(a, atomic_load(&a->durable), 1);
}

/*
 * The first record after an outage says how long it lasted and what it
 * cost; once it is on disk, records are taken again.  0, or -1 (and the
 * next try is later).
 */
static int
try_resume(struct audit *a, char **buf, size_t *cap)
{
	uint64_t refused = atomic_load(&a->out_refused);
	uint64_t lost = atomic_load(&a->out_lost);
	long ms = ms_since(&a->broke_at);
	size_t len = 0;
	struct mark m;
	char ts[40];
	json_t *rec;
	int r = SL_ERR_IO;

	aw_mark_take(a, &m);
	if (a->stage == AUDIT_REMOTE ||
	    (a->fd != -1 && ftruncate(a->fd, (off_t)a->size) == 0)) {
		aw_format_ts(ts, sizeof(ts));
		rec = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "ts", ts,
		    "type", "audit_resumed", "refused_ms", (json_int_t)ms,
		    "refused", (json_int_t)refused, "lost", (json_int_t)lost,
		    "error", strerror(a->broke_errno));
		if (rec != NULL && a->stage == AUDIT_REMOTE)
			r = aw_remote_resume(a, rec);
		else if (rec != NULL && (r = aw_append_record(a, rec, buf, &len,
		    cap)) == 0)
			r = aw_flush_out(a, *buf, len, 1, 1);
		json_decref(rec);
	}
	if (r != 0) {
		log_debug("audit", "still cannot write %s: %s", a->path,
		    strerror(errno));
		if (a->stage != AUDIT_REMOTE)
			aw_mark_restore(a, &m);
		a->retry_ms = a->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS :
		    a->retry_ms * 2;
		retry_later(a);
		return -1;
	}
	atomic_store(&a->out_refused, 0);
	atomic_store(&a->out_lost, 0);
	atomic_store(&a->broken, 0);
	pthread_mutex_lock(&a->mtx);
	if (a->stage != AUDIT_REMOTE) {
		a->written++;
		a->pub_seq = a->seq;
		memcpy(a->pub_head, a->prev, sizeof(a->pub_head));
	}
	pthread_mutex_unlock(&a->mtx);
	log_warnx("audit", "%s takes records again, after %ld ms; %llu "
	    "request(s) were refused and %llu other record(s) lost meanwhile",
	    a->path, ms, (unsigned long long)refused,
	    (unsigned long long)lost);
	return 0;
}

/*
 * A sink's try after an outage: the file cut back to its last good
 * record, then the round; 0 once it is written (the outage is over).
 */
static int
sink_retry(struct audit *a, struct slot *batch, size_t n, char **buf,
    size_t *cap)
{
	size_t i;

	if (a->fd == -1 || ftruncate(a->fd, (off_t)a->size) != 0) {
		for (i = 0; i < n; i++)
			aw_slot_free(&batch[i]);
		aw_mark_durable(a, atomic_load(&a->durable), 1);
		return -1;
	}
	if (write_round(a, batch, n, 0, buf, cap) != 0) {
		aw_mark_durable(a, atomic_load(&a->durable), 1);
		return -1;
	}
	atomic_store(&a->broken, 0);
	log_warnx("audit", "%s takes records again", a->path);
	return 0;
}

/* One round, wherever the file is now. */
static int
round(struct audit *a, struct slot *batch, size_t n, int rotate, char **buf,
    size_t *cap)
{
	if (a->stage == AUDIT_FORWARD)
		return aw_forward_round(a, batch, n, buf, cap);
	/* REMOTE, and HANDING a remote trail: the keys process has the file. */
	if (a->o.chan != NULL)
		return aw_remote_round(a, batch, n, rotate, buf, cap);
	return write_round(a, batch, n, rotate, buf, cap);
}

static void *
writer_main(void *arg)
{
	struct audit *a = arg;
	struct slot *batch;
	char *buf = NULL;
	size_t cap = 0, n, i;
	uint64_t lost;
	int stop, rotate, handing, failed = 0;

	if ((batch = calloc(a->cap + 1, sizeof(*batch))) == NULL) {
		log_errx("audit", "out of memory: the writer stops");
		return NULL;
	}
	/* A remote trail: this thread's own channel to the keys process. */
	if (a->o.chan != NULL)
		kclient_bind(a->o.chan);
	pthread_mutex_lock(&a->mtx);
	if (a->stage == AUDIT_AWAIT) {
		/* An upgrade: the predecessor writes the file until it lets go. */
		if (aw_await(a) != 0)
			goto stopped;
		pthread_mutex_unlock(&a->mtx);
		if ((a->o.chan != NULL ? aw_remote_take(a) :
		    aw_take_file(a, &buf, &cap)) != 0) {
			failed = 1;
			broke(a);
		}
		pthread_mutex_lock(&a->mtx);
	}
	for (;;) {
		while (a->n == 0 && !a->stop && !a->rotate &&
		    a->stage != AUDIT_HANDING) {
			wait_for_work(a);
			if (a->n == 0 && !a->stop && !a->rotate)
				break;	/* a deadline: sync, checkpoint, retry */
		}
		for (n = 0; a->n > 0; n++) {
			batch[n] = a->ring[a->head];
			a->head = (a->head + 1) % a->cap;
			a->n--;
		}
		stop = a->stop;
		rotate = a->rotate && (a->stage == AUDIT_OWN ||
		    a->stage == AUDIT_REMOTE);
		handing = a->stage == AUDIT_HANDING;
		a->rotate = 0;
		lost = a->dropped - a->dropped_told;
		a->dropped_told = a->dropped;
		pthread_cond_broadcast(&a->room);
		pthread_mutex_unlock(&a->mtx);
		if (lost > 0)		/* batch has one slot more than the ring */
			batch[n++] = lost_record(lost);
		if (failed && a->o.sink && n > 0) {
			/*
			 * A worker's trail: its next round (which says how long
			 * the outage lasted) is the try; the rest waited there.
			 */
			if (sink_retry(a, batch, n, &buf, &cap) == 0)
				failed = 0;
		} else if (failed && a->o.sink) {
			/* Nothing to try with: the worker's next round is. */
		} else if (failed) {
			/* What came before the writer knew is lost too. */
			for (i = 0; i < n; i++)
				aw_slot_free(&batch[i]);
			atomic_fetch_add(&a->out_lost, n);
			if (rotate)
				log_warnx("audit", "not rotated: %s cannot be "
				    "written", a->path);
			if (!stop && ms_until(&a->retry_at) <= 0 &&
			    try_resume(a, &buf, &cap) == 0)
				failed = 0;
		} else if (round(a, batch, n, rotate, &buf, &cap) != 0) {
			failed = 1;
			broke(a);
		}
		/* The successor took over: what comes next goes to it. */
		if (handing && (a->o.chan != NULL ? aw_remote_release(a) :
		    aw_release_file(a, &buf, &cap)) != 0 && !failed) {
			failed = 1;
			broke(a);
		}
		pthread_mutex_lock(&a->mtx);
		a->rounds++;
		pthread_cond_broadcast(&a->moved);
		if (stop && a->n == 0)
			break;
	}
 stopped:
	pthread_mutex_unlock(&a->mtx);
	if (a->stage == AUDIT_FORWARD) {
		close(a->hand_fd);	/* the successor sees the end */
		a->hand_fd = -1;
	} else if (!failed && a->stage == AUDIT_OWN) {
		size_t len = 0;

		/* The trail of a clean stop ends with a checkpoint. */
		if (aw_append_checkpoint(a, &buf, &len, &cap) == 0)
			aw_flush_out(a, buf, len, 1, 1);
		if (a->o.mode != AUDIT_FSYNC_NEVER)
			fdatasync(a->fd);
	}
	free(buf);
	free(batch);
	return NULL;
}

/* Who writes the file now (audit_int.h); mtx held, or the writer alone. */
void
aw_stage_set(struct audit *a, enum audit_stage s)
{
	static const char *const names[] = {
		[AUDIT_AWAIT] = "await", [AUDIT_OWN] = "own",
		[AUDIT_HANDING] = "handing", [AUDIT_FORWARD] = "forward",
		[AUDIT_REMOTE] = "remote",
	};

	log_debug("audit", "the file: %s -> %s", names[a->stage], names[s]);
	a->stage = s;
}

/* ---- producers ------------------------------------------------------ */

/*
 * Queues rec.  When the ring is full: with queue_full wait, waits; with
 * refuse, a record an action waits for (ticket) is refused, so the
 * action is; any other record is dropped and counted, and the writer
 * records how many were lost once there is room: the data path never
 * blocks on a stalled disk.
 */
/* Records are dropped (no file), or none can be written any more. */
static int
no_trail(struct audit *a, uint64_t *ticket)
{
	if (a == NULL || a->path == NULL) {
		if (ticket != NULL)
			*ticket = 0;	/* durable at once */
		return 1;
	}
	/* A sink takes rounds while broken: each is a try (sink_retry). */
	if (!atomic_load(&a->broken) || a->o.sink)
		return 0;
	/* Counted for the record that ends the outage. */
	atomic_fetch_add(ticket != NULL ? &a->out_refused : &a->out_lost, 1);
	return SL_ERR_IO;
}

/* Queues sl (its record taken over). */
static int
enqueue(struct audit *a, struct slot sl, int refuse, uint64_t *ticket)
{
	pthread_mutex_lock(&a->mtx);
	while (a->n == a->cap) {
		if (refuse) {
			if (ticket != NULL)
				a->refused++;
			else
				a->dropped++;
			pthread_mutex_unlock(&a->mtx);
			aw_slot_free(&sl);
			return SL_ERR_TOO_BIG;
		}
		pthread_cond_wait(&a->room, &a->mtx);
	}
	sl.ticket = ++a->tickets;
	a->ring[(a->head + a->n) % a->cap] = sl;
	a->n++;
	if (ticket != NULL && a->o.mode == AUDIT_FSYNC_ALWAYS) {
		/* An action waits for it: the writer goes now. */
		*ticket = a->tickets;
		atomic_store(&a->wanted, a->tickets);
		pthread_cond_signal(&a->wake);
	} else {
		/* Queued is enough; the writer takes it within LAZY_MS. */
		if (ticket != NULL)
			*ticket = 0;
		if (a->n >= a->cap / 2)
			pthread_cond_signal(&a->wake);
	}
	pthread_mutex_unlock(&a->mtx);
	return 0;
}

static int
enqueue_tree(struct audit *a, const char *type, json_t *rec,
    uint64_t *ticket)
{
	struct slot sl = { NULL, NULL, 0 };
	char ts[40];
	int r;

	if (rec == NULL)
		return SL_ERR_NOMEM;
	if ((r = no_trail(a, ticket)) != 0) {
		json_decref(rec);
		return r < 0 ? r : 0;
	}
	aw_format_ts(ts, sizeof(ts));
	if (json_object_set_new(rec, "ts", json_string(ts)) != 0 ||
	    json_object_set_new(rec, "type", json_string(type)) != 0) {
		json_decref(rec);
		return SL_ERR_NOMEM;
	}
	sl.rec = rec;
	return enqueue(a, sl, a->o.queue_refuse, ticket);
}

static int
enqueue_flat(struct audit *a, const char *type, struct arec *rec,
    uint64_t *ticket)
{
	struct slot sl = { NULL, NULL, 0 };
	int r;

	if ((r = no_trail(a, ticket)) != 0)
		return r < 0 ? r : 0;
	if ((sl.flat = arec_finish(rec, type)) == NULL)
		return SL_ERR_NOMEM;
	return enqueue(a, sl, a->o.queue_refuse, ticket);
}

int
audit_submit_text(struct audit *a, const char *text, size_t len,
    uint64_t *ticket)
{
	struct slot sl = { NULL, NULL, 0 };
	json_error_t e;
	int r;

	if ((sl.rec = json_loadb(text, len, 0, &e)) == NULL ||
	    !json_is_object(sl.rec) ||
	    !json_is_string(json_object_get(sl.rec, "type")) ||
	    !json_is_string(json_object_get(sl.rec, "ts"))) {
		json_decref(sl.rec);
		return SL_ERR_INVALID;
	}
	/* The chain is this writer's to make. */
	json_object_del(sl.rec, "seq");
	json_object_del(sl.rec, "prev");
	json_object_del(sl.rec, "hash");
	if ((r = no_trail(a, ticket)) != 0) {
		json_decref(sl.rec);
		return r < 0 ? r : 0;
	}
	return enqueue(a, sl, 0, ticket);
}

int
audit_submit_flat(struct audit *a, struct aflat *f, uint64_t *ticket)
{
	struct slot sl = { NULL, f, 0 };
	int r;

	if ((r = no_trail(a, ticket)) != 0) {
		free(f);
		return r < 0 ? r : 0;
	}
	return enqueue(a, sl, 0, ticket);
}

/*
 * Waits on moved until done(a, arg) or ms passed; mtx held.  While the
 * writer cannot write, a wait ends once a round that took what came
 * before the call is over (rounds from start: the one under way, the
 * next).
 */
static int
wait_moved(struct audit *a, long ms, int (*done)(struct audit *, uint64_t),
    uint64_t arg)
{
	uint64_t start = a->rounds;
	struct timespec until;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (!done(a, arg) && r == 0 &&
	    !(atomic_load(&a->broken) && a->rounds >= start + 2))
		r = pthread_cond_timedwait(&a->moved, &a->mtx, &until);
	if (done(a, arg))
		return 0;
	errno = r != 0 ? ETIMEDOUT : EIO;
	return SL_ERR_IO;
}

static int
is_durable(struct audit *a, uint64_t ticket)
{
	return atomic_load(&a->durable) >= ticket;
}

static int
round_past(struct audit *a, uint64_t rounds)
{
	return a->rounds > rounds;
}

int
audit_wait_durable(struct audit *a, uint64_t ticket, long ms)
{
	int r;

	if (a == NULL || a->path == NULL || ticket == 0)
		return 0;
	pthread_mutex_lock(&a->mtx);
	r = wait_moved(a, ms, is_durable, ticket);
	pthread_mutex_unlock(&a->mtx);
	return r;
}

int
audit_wait_round(struct audit *a, long ms)
{
	int r;

	if (a == NULL || a->path == NULL)
		return 0;
	pthread_mutex_lock(&a->mtx);
	pthread_cond_signal(&a->wake);
	/* The round under way may have begun before: wait for the next one. */
	r = wait_moved(a, ms, round_past, a->rounds + 1);
	pthread_mutex_unlock(&a->mtx);
	return r;
}

int
audit_write(struct audit *a, const char *type, json_t *rec)
{
	return enqueue_tree(a, type, rec, NULL);
}

int
audit_submit(struct audit *a, const char *type, json_t *rec,
    uint64_t *ticket)
{
	return enqueue_tree(a, type, rec, ticket);
}

int
audit_write_rec(struct audit *a, const char *type, struct arec *rec)
{
	return enqueue_flat(a, type, rec, NULL);
}

int
audit_submit_rec(struct audit *a, const char *type, struct arec *rec,
    uint64_t *ticket)
{
	return enqueue_flat(a, type, rec, ticket);
}

int
audit_errno(struct audit *a)
{
	return a != NULL && a->broke_errno != 0 ? a->broke_errno : EIO;
}

int
audit_failed(struct audit *a)
{
	return a != NULL && atomic_load(&a->broken);
}

uint64_t
audit_durable(struct audit *a)
{
	return a == NULL || a->path == NULL ? UINT64_MAX :
	    (uint64_t)atomic_load(&a->durable);
}

int
audit_notify(struct audit *a, struct event *ev)
{
	int r = SL_ERR_TOO_BIG;

	if (a == NULL)
		return 0;
	pthread_mutex_lock(&a->mtx);
	if (a->nnotify < MAX_NOTIFY) {
		a->notify[a->nnotify++] = ev;
		r = 0;
	}
	pthread_mutex_unlock(&a->mtx);
	return r;
}

void
audit_notify_clear(struct audit *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	a->nnotify = 0;
	pthread_mutex_unlock(&a->mtx);
}

void
audit_rotate(struct audit *a)
{
	if (a == NULL || a->path == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	a->rotate = a->stage == AUDIT_OWN || a->stage == AUDIT_REMOTE;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->mtx);
}

void
audit_get_stats(struct audit *a, struct audit_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	st->path = a->path;
	st->queued = a->n;
	st->written = a->written;
	st->checkpoints = a->checkpoints;
	st->rotations = a->rotations;
	st->refused = a->refused;
	st->dropped = a->dropped;
	st->broken = atomic_load(&a->broken);
	st->errors = atomic_load(&a->errors);
	st->last_sync = atomic_load(&a->synced_at);
	st->last_checkpoint_seq = a->cp_seq;
	st->seq = a->pub_seq;
	memcpy(st->head, a->pub_head, sizeof(st->head));
	pthread_mutex_unlock(&a->mtx);
}

/* ---- life ----------------------------------------------------------- */

static void
audit_free(struct audit *a)
{
	size_t i;

	for (i = 0; a->ring != NULL && i < a->n; i++)
		aw_slot_free(&a->ring[(a->head + i) % a->cap]);
	free(a->ring);
	if (a->fd != -1)
		close(a->fd);
	if (a->hand_fd != -1)
		close(a->hand_fd);
	pthread_cond_destroy(&a->wake);
	pthread_cond_destroy(&a->room);
	pthread_cond_destroy(&a->moved);
	pthread_mutex_destroy(&a->mtx);
	free(a->path);
	free(a);
}

int
audit_open(const struct audit_opts *o, struct audit **out, char *why,
    size_t why_len)
{
	struct audit *a;
	json_t *start = NULL;
	int r = SL_ERR_NOMEM;

	if ((a = calloc(1, sizeof(*a))) == NULL)
		return SL_ERR_NOMEM;
	a->o = *o;
	a->fd = -1;
	a->hand_fd = -1;
	a->stage = AUDIT_OWN;
	a->cap = o->queue < 16 ? 16 : o->queue;
	memcpy(a->prev, AUDIT_ZERO_HASH, sizeof(a->prev));
	pthread_mutex_init(&a->mtx, NULL);
	pthread_cond_init(&a->wake, NULL);
	pthread_cond_init(&a->room, NULL);
	pthread_cond_init(&a->moved, NULL);
	clock_gettime(CLOCK_MONOTONIC, &a->last_cp);
	a->last_sync = a->last_cp;
	if (o->path == NULL) {
		*out = a;
		return 0;
	}
	snprintf(why, why_len, "out of memory");
	if ((a->path = strdup(o->path)) == NULL ||
	    (a->ring = calloc(a->cap, sizeof(*a->ring))) == NULL ||
	    (start = json_pack("{s:s, s:i}", "version", PACKAGE_VERSION,
	    "pid", (int)(a->o.pid != 0 ? a->o.pid : getpid()))) == NULL)
		goto fail;
	if (o->chan != NULL) {
		/* The keys process writes it, and its "start" record. */
		aw_stage_set(a, o->await_pid != 0 ? AUDIT_AWAIT : AUDIT_REMOTE);
		a->o.sign = NULL;
		a->o.syslog = 0;
	} else if (o->await_pid != 0) {
		/* Its predecessor writes it: only see that it can be. */
		aw_stage_set(a, AUDIT_AWAIT);
		if ((a->fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND |
		    O_CLOEXEC, 0640)) == -1) {
			snprintf(why, why_len, "cannot open %s: %s", a->path,
			    strerror(errno));
			r = SL_ERR_IO;
			goto fail;
		}
		close(a->fd);
		a->fd = -1;
	} else if ((r = aw_open_trail(a, start, why, why_len)) != 0)
		goto fail;
	a->o.path = a->path;
	if (a->o.syslog)
		openlog("sluiced-audit", LOG_NDELAY, LOG_DAEMON);
	if (pthread_create(&a->thread, NULL, writer_main, a) != 0) {
		snprintf(why, why_len, "cannot start the writer thread");
		r = SL_ERR_INTERNAL;
		goto fail;
	}
	a->started = 1;
	/* The first record of this run: where it took the chain up. */
	if (a->stage == AUDIT_OWN && o->chan == NULL) {
		json_object_set_new(start, "continues_seq", json_integer(
		    (json_int_t)a->seq));
		audit_write(a, "start", start);
	} else
		json_decref(start);	/* aw_take_file writes it */
	*out = a;
	return 0;
 fail:
	json_decref(start);
	audit_free(a);
	return r;
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->mtx);
		a->stop = 1;
		pthread_cond_signal(&a->wake);
		pthread_mutex_unlock(&a->mtx);
		pthread_join(a->thread, NULL);
	}
	if (a->o.syslog)
		closelog();
	audit_free(a);
}
