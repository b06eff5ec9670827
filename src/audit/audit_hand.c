/*
 * audit_hand.c: an upgrade hands the trail from one process to the next
 * (audit.h says how).  These run on the writer thread, except
 * audit_handover and audit_takeover, which only ask it.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "util/err.h"
#include "util/log.h"
#include "audit/audit_int.h"

/* How long the predecessor waits for the successor to take a round. */
#define HAND_WAIT_S	10

int
aw_await(struct audit *a)
{
	while (!a->takeover && !a->stop)
		pthread_cond_wait(&a->wake, &a->mtx);
	return a->takeover ? 0 : -1;	/* stopped first: none is ours */
}

int
aw_take_file(struct audit *a, char **buf, size_t *cap)
{
	char ts[40], why[512];
	size_t len = 0;
	json_t *start;
	int r;

	aw_format_ts(ts, sizeof(ts));
	if ((start = json_pack("{s:s, s:s, s:s, s:i, s:I}", "ts", ts, "type",
	    "start", "version", PACKAGE_VERSION, "pid", (int)(a->o.pid != 0 ? a->o.pid : getpid()),
	    "upgraded_from", (json_int_t)a->o.await_pid)) == NULL)
		return -1;
	if ((r = aw_open_trail(a, start, why, sizeof(why))) != 0) {
		log_errx("audit", "the upgrade: %s", why);
		a->broke_errno = errno;
		json_decref(start);
		return -1;
	}
	json_object_set_new(start, "continues_seq",
	    json_integer((json_int_t)a->seq));
	r = aw_append_record(a, start, buf, &len, cap);
	json_decref(start);
	if (r != 0 || aw_flush_out(a, *buf, len, 1, 1) != 0) {
		a->broke_errno = errno;
		return -1;
	}
	pthread_mutex_lock(&a->mtx);
	aw_stage_set(a, AUDIT_OWN);
	a->written++;
	a->pub_seq = a->seq;
	memcpy(a->pub_head, a->prev, sizeof(a->pub_head));
	pthread_mutex_unlock(&a->mtx);
	log_info("audit", "%s taken over from pid %ld at seq %" PRIu64,
	    a->path, a->o.await_pid, a->seq);
	return 0;
}

int
aw_release_file(struct audit *a, char **buf, size_t *cap)
{
	size_t len = 0;
	struct mark m;
	char ts[40];
	json_t *up;
	int r;

	aw_mark_take(a, &m);
	aw_format_ts(ts, sizeof(ts));
	if ((up = json_pack("{s:s, s:s, s:I}", "ts", ts, "type", "upgrade",
	    "to_pid", (json_int_t)a->hand_to)) == NULL)
		r = SL_ERR_NOMEM;
	else if ((r = aw_append_record(a, up, buf, &len, cap)) == 0 &&
	    (r = aw_append_checkpoint(a, buf, &len, cap)) == 0)
		r = aw_flush_out(a, *buf, len, 2, 1);
	json_decref(up);
	if (r != 0) {
		a->broke_errno = errno;
		aw_mark_restore(a, &m);
	}
	/* Let go of the file, whatever happened: the successor goes on. */
	if (a->fd != -1)
		close(a->fd);
	a->fd = -1;
	return aw_handed(a, r);
}

int
aw_handed(struct audit *a, int r)
{
	/* A keys process's trail (audit_release): its worker tells it. */
	if (a->hand_fd != -1 && aw_write_all(a->hand_fd, "released\n", 9) != 0) {
		a->broke_errno = errno;
		r = SL_ERR_IO;
	}
	pthread_mutex_lock(&a->mtx);
	aw_stage_set(a, AUDIT_FORWARD);
	pthread_mutex_unlock(&a->mtx);
	/* Said once, by the process whose file it was. */
	if (a->o.chan == NULL)
		log_info("audit", "%s handed to pid %ld after seq %" PRIu64,
		    a->path, a->hand_to, a->seq);
	return r == 0 ? 0 : -1;
}

/* "R" and the record as a JSON object, with its ts and type. */
static int
forward_slot(const struct slot *sl, char **out, size_t *outlen,
    size_t *outcap)
{
	const char *body;
	char *text = NULL;
	size_t len;
	char *nb;

	if (sl->rec != NULL) {
		if ((text = json_dumps(sl->rec, JSON_COMPACT)) == NULL)
			return SL_ERR_NOMEM;
		body = text;
		len = strlen(text);
	} else if (sl->flat != NULL && sl->flat->len > 1) {
		body = sl->flat->body;	/* ,"key":value,...: the ',' a '{' */
		len = sl->flat->len;
	} else
		return 0;
	if (*outlen + len + 4 > *outcap) {
		size_t cap = (*outcap + len + 4) * 2;

		if ((nb = realloc(*out, cap)) == NULL) {
			free(text);
			return SL_ERR_NOMEM;
		}
		*out = nb;
		*outcap = cap;
	}
	nb = *out + *outlen;
	memcpy(nb, "R ", 2);
	if (text != NULL)
		memcpy(nb + 2, body, len);
	else {
		nb[2] = '{';
		memcpy(nb + 3, body + 1, len - 1);
		nb[2 + len] = '}';
		len++;
	}
	nb[2 + len] = '\n';
	*outlen += len + 3;
	free(text);
	return 0;
}

/* Reads the successor's answers until one says ticket want is durable. */
static int
await_ack(struct audit *a, uint64_t want)
{
	char *nl, *end;
	ssize_t n;
	uint64_t got;

	for (;;) {
		while ((nl = memchr(a->ack, '\n', a->acklen)) != NULL) {
			if (a->ack[0] != 'A' || a->ack[1] != ' ') {
				errno = EPROTO;
				return SL_ERR_IO;
			}
			*nl = '\0';
			got = strtoull(a->ack + 2, &end, 10);
			a->acklen -= (size_t)(nl + 1 - a->ack);
			memmove(a->ack, nl + 1, a->acklen);
			if (got >= want)
				return 0;
		}
		if (a->acklen == sizeof(a->ack)) {
			errno = EPROTO;
			return SL_ERR_IO;
		}
		n = read(a->hand_fd, a->ack + a->acklen,
		    sizeof(a->ack) - a->acklen);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			else if (errno == EAGAIN)
				errno = ETIMEDOUT;
			return SL_ERR_IO;
		}
		a->acklen += (size_t)n;
	}
}

int
aw_forward_round(struct audit *a, struct slot *batch, size_t n, char **buf,
    size_t *cap)
{
	size_t len = 0, i;
	uint64_t last = 0, nrec = 0;
	int r = 0, wait;
	char sync[32];

	for (i = 0; i < n; i++) {
		if (r == 0 && (batch[i].rec != NULL || batch[i].flat != NULL) &&
		    (r = forward_slot(&batch[i], buf, &len, cap)) == 0)
			nrec++;
		if (batch[i].ticket != 0)
			last = batch[i].ticket;
		aw_slot_free(&batch[i]);
	}
	wait = last > 0 && a->o.mode == AUDIT_FSYNC_ALWAYS;
	if (r == 0 && len > 0)
		r = aw_write_all(a->hand_fd, *buf, len);
	if (r == 0 && wait) {
		snprintf(sync, sizeof(sync), "S %" PRIu64 "\n", last);
		if ((r = aw_write_all(a->hand_fd, sync, strlen(sync))) == 0)
			r = await_ack(a, last);
	}
	if (r != 0) {
		if (errno == EAGAIN)
			errno = ETIMEDOUT;
		a->broke_errno = errno;
		atomic_fetch_add(&a->out_lost, n);
		return r;
	}
	pthread_mutex_lock(&a->mtx);
	a->written += nrec;
	pthread_mutex_unlock(&a->mtx);
	if (last > 0)
		aw_mark_durable(a, last, 0);
	return 0;
}

/* Blocking, but never for long: a stuck successor fails the writer. */
static int
channel_opts(int fd)
{
	struct timeval tv = { HAND_WAIT_S, 0 };
	int fl;

	return (fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ?
	    SL_ERR_IO : 0;
}

int
audit_handover(struct audit *a, int fd, long to_pid)
{
	int r;

	if (a == NULL || a->path == NULL) {
		/* No trail here: the successor may start its own at once. */
		r = channel_opts(fd) == 0 ? aw_write_all(fd, "released\n", 9) :
		    SL_ERR_IO;
		close(fd);
		return r;
	}
	pthread_mutex_lock(&a->mtx);
	if ((a->stage != AUDIT_OWN && a->stage != AUDIT_REMOTE) ||
	    a->hand_fd != -1)
		r = SL_ERR_EXISTS;	/* handed over already, or awaiting */
	else if ((r = channel_opts(fd)) == 0) {
		a->hand_fd = fd;
		a->hand_to = to_pid;
		aw_stage_set(a, AUDIT_HANDING);
		pthread_cond_signal(&a->wake);
	}
	pthread_mutex_unlock(&a->mtx);
	if (r != 0 && fd != -1)
		close(fd);
	return r;
}

int
audit_release(struct audit *a, long to_pid)
{
	int r = 0;

	if (a == NULL || a->path == NULL)
		return 0;
	pthread_mutex_lock(&a->mtx);
	if (a->stage != AUDIT_OWN)
		r = SL_ERR_EXISTS;
	else {
		a->hand_to = to_pid;
		aw_stage_set(a, AUDIT_HANDING);
		pthread_cond_signal(&a->wake);
	}
	pthread_mutex_unlock(&a->mtx);
	return r;
}

void
audit_takeover(struct audit *a)
{
	if (a == NULL || a->path == NULL)
		return;
	pthread_mutex_lock(&a->mtx);
	if (a->stage == AUDIT_AWAIT) {
		a->takeover = 1;
		pthread_cond_signal(&a->wake);
	}
	pthread_mutex_unlock(&a->mtx);
}
