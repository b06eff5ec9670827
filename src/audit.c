/* audit.c: the one writer of the audit trail (JSON Lines). */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "audit.h"
#include "err.h"
#include "log.h"

struct audit {
	int		 fd;		/* -1: records are dropped */
	enum audit_fsync mode;
	pthread_mutex_t	 mtx;		/* orders seq with the file */
	uint64_t	 seq;
	struct timespec	 last_sync;
};

int
audit_open(const char *path, enum audit_fsync mode, struct audit **out)
{
	struct audit *a;

	if ((a = calloc(1, sizeof(*a))) == NULL)
		return SL_ERR_NOMEM;
	a->fd = -1;
	a->mode = mode;
	pthread_mutex_init(&a->mtx, NULL);
	if (path != NULL &&
	    (a->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0640)) == -1) {
		pthread_mutex_destroy(&a->mtx);
		free(a);
		return SL_ERR_IO;
	}
	*out = a;
	return 0;
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	if (a->fd != -1) {
		if (a->mode != AUDIT_FSYNC_NEVER)
			fdatasync(a->fd);
		close(a->fd);
	}
	pthread_mutex_destroy(&a->mtx);
	free(a);
}

static void
format_ts(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

static int
write_all(int fd, const char *buf, size_t len)
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

static void
maybe_sync(struct audit *a)
{
	struct timespec now;
	long ms;

	if (a->mode == AUDIT_FSYNC_ALWAYS) {
		fdatasync(a->fd);
		return;
	}
	if (a->mode != AUDIT_FSYNC_BATCH)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (now.tv_sec - a->last_sync.tv_sec) * 1000 +
	    (now.tv_nsec - a->last_sync.tv_nsec) / 1000000;
	if (ms >= 100) {
		fdatasync(a->fd);
		a->last_sync = now;
	}
}

int
audit_write(struct audit *a, const char *type, json_t *rec)
{
	char ts[64], *line = NULL;
	json_t *full = NULL;
	size_t len;
	int r = SL_ERR_NOMEM;

	if (rec == NULL)
		return SL_ERR_NOMEM;
	if (a == NULL || a->fd == -1) {
		json_decref(rec);
		return 0;
	}
	format_ts(ts, sizeof(ts));
	if ((full = json_object()) == NULL)
		goto out;
	pthread_mutex_lock(&a->mtx);
	json_object_set_new(full, "ts", json_string(ts));
	json_object_set_new(full, "seq", json_integer((json_int_t)++a->seq));
	json_object_set_new(full, "type", json_string(type));
	json_object_update(full, rec);
	if ((line = json_dumps(full, JSON_COMPACT | JSON_ENSURE_ASCII)) != NULL) {
		len = strlen(line);
		line[len] = '\n';	/* the NUL becomes the line's end */
		r = write_all(a->fd, line, len + 1);
		if (r == 0)
			maybe_sync(a);
	}
	pthread_mutex_unlock(&a->mtx);
 out:
	if (r != 0)
		log_warnx("audit", "cannot write audit record: %s", err_str(r));
	free(line);
	json_decref(full);
	json_decref(rec);
	return r;
}
