/*
 * audit_trail.c: the trail's file as the writer finds it at start: the
 * last record that verifies, where the chain goes on from (a torn tail
 * cut, a file that does not verify moved aside, a new file continuing
 * the newest rotated one), and how many records the next checkpoint
 * covers.  The writer (audit.c) runs it from audit_open and a takeover.
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/log.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"
#include "audit/audit_int.h"

#define TAIL_READ	(2 * AUDIT_LINE_MAX)

static int	count_since_checkpoint(struct audit *);

/*
 * Whether line[0..len) (no newline) is a record as auditfmt writes it:
 * canonical, with a hash that matches.  Fills seq and hash.
 */
static int
line_valid(const char *line, size_t len, uint64_t *seq, char *hash)
{
	uint8_t h[32];
	char hex[AUDIT_HASH_HEX + 1], *canon = NULL, *again = NULL;
	json_t *rec, *jh, *js;
	int ok = 0;

	if ((rec = json_loadb(line, len, JSON_ALLOW_NUL |
	    JSON_REJECT_DUPLICATES, NULL)) == NULL)
		return 0;
	jh = json_object_get(rec, "hash");
	js = json_object_get(rec, "seq");
	if (!json_is_string(jh) || !json_is_integer(js) ||
	    json_integer_value(js) < 1)
		goto out;
	again = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENSURE_ASCII);
	if (again == NULL || strlen(again) != len || memcmp(again, line, len))
		goto out;
	if ((canon = auditfmt_canonical(rec)) == NULL)
		goto out;
	crypto_generichash(h, sizeof(h), (const uint8_t *)canon,
	    strlen(canon), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	if (strcmp(hex, json_string_value(jh)) != 0)
		goto out;
	*seq = (uint64_t)json_integer_value(js);
	memcpy(hash, hex, sizeof(hex));
	ok = 1;
 out:
	free(canon);
	free(again);
	json_decref(rec);
	return ok;
}

/*
 * Where the chain of the open file ends.  Sets a->seq and a->prev from the
 * last complete line; a torn tail is cut off and described in *start
 * (the record that will open this run).  Returns 0, 1 when the last line
 * does not verify (the caller moves the file aside), or SL_ERR_IO.
 */
static int recover_any(struct audit *, json_t *, int);

static int
recover(struct audit *a, json_t *start)
{
	return recover_any(a, start, 0);
}

/* The same, read only (a rotated file): a torn tail is left as it is. */
static int
recover_ro(struct audit *a, json_t *start)
{
	return recover_any(a, start, 1);
}

static int
recover_any(struct audit *a, json_t *start, int ro)
{
	struct stat sb;
	off_t off, end;
	char *buf, *nl, *last;
	size_t got, torn;
	ssize_t n;
	uint8_t th[32];
	char hex[AUDIT_HASH_HEX + 1];
	int r = SL_ERR_IO;

	if (fstat(a->fd, &sb) != 0)
		return SL_ERR_IO;
	end = sb.st_size;
	a->size = (uint64_t)end;
	if (end == 0)
		return 0;		/* a new trail */
	off = end > TAIL_READ ? end - TAIL_READ : 0;
	if ((buf = malloc(TAIL_READ + 1)) == NULL)
		return SL_ERR_NOMEM;
	for (got = 0; got < (size_t)(end - off); got += (size_t)n)
		if ((n = pread(a->fd, buf + got, (size_t)(end - off) - got,
		    off + (off_t)got)) <= 0)
			goto out;
	buf[got] = '\0';
	/* Bytes after the last newline are a line the crash cut short. */
	nl = memrchr(buf, '\n', got);
	torn = nl == NULL ? got : got - (size_t)(nl + 1 - buf);
	if (torn > 0 && !ro) {
		crypto_generichash(th, sizeof(th), (uint8_t *)buf + got - torn,
		    torn, NULL, 0);
		sodium_bin2hex(hex, sizeof(hex), th, sizeof(th));
		if (ftruncate(a->fd, end - (off_t)torn) != 0)
			goto out;
		a->size -= torn;
		json_object_set_new(start, "torn_bytes", json_integer(
		    (json_int_t)torn));
		json_object_set_new(start, "torn_hash", json_string(hex));
		log_warnx("audit", "%s ended with %zu bytes of a torn record "
		    "(a crash mid-write): cut off, and recorded", a->path,
		    torn);
	} else if (torn > 0)
		a->size -= torn;	/* read only: counted as not there */
	if (nl == NULL) {
		r = off == 0 ? 0 : 1;	/* nothing whole, or a line too long */
		goto out;
	}
	*nl = '\0';
	last = memrchr(buf, '\n', (size_t)(nl - buf));
	last = last == NULL ? buf : last + 1;
	if (last == buf && off != 0) {
		r = 1;			/* longer than any line we write */
		goto out;
	}
	r = line_valid(last, (size_t)(nl - last), &a->seq, a->prev) ? 0 : 1;
 out:
	free(buf);
	if (r == 0)
		r = count_since_checkpoint(a);
	return r;
}

/* The seq of a record line (canonical: "seq":N), or 0. */
static uint64_t
line_seq(const char *p, size_t len)
{
	const char *s = memmem(p, len, "\"seq\":", 6);

	return s == NULL ? 0 : strtoull(s + 6, NULL, 10);
}

/*
 * Records since the file's last checkpoint, so that the next checkpoint
 * counts them all: found by reading the file backwards, block by block.
 * With none in the file, every record of it (a rotated file's
 * predecessor ended with one; a new trail starts at seq 1).
 */
static int
count_since_checkpoint(struct audit *a)
{
	static const char cp[] = "\"type\":\"checkpoint\"";
	char *buf = NULL, *nb;
	off_t pos = (off_t)a->size, start;
	size_t partial = 0, blen, len, end, k;
	uint64_t first = 0;

	while (pos > 0) {
		start = pos > (off_t)AUDIT_LINE_MAX ? pos - AUDIT_LINE_MAX : 0;
		blen = (size_t)(pos - start);
		/* The block, then the line the block after it began. */
		if ((nb = malloc(blen + partial)) == NULL) {
			free(buf);
			return SL_ERR_NOMEM;
		}
		if (pread(a->fd, nb, blen, start) != (ssize_t)blen) {
			free(nb);
			free(buf);
			return SL_ERR_IO;
		}
		if (partial > 0)
			memcpy(nb + blen, buf, partial);
		free(buf);
		buf = nb;
		len = blen + partial;
		for (end = len; end > 0; end = k) {
			/* The line ending at end: from after the '\n' before it. */
			for (k = end - 1; k > 0 && buf[k - 1] != '\n'; k--)
				;
			if (k == 0 && start > 0)
				break;		/* it began in an earlier block */
			if (memmem(buf + k, end - k, cp, sizeof(cp) - 1) != NULL) {
				a->since_cp = a->seq - line_seq(buf + k, end - k);
				free(buf);
				return 0;
			}
			first = line_seq(buf + k, end - k);
		}
		partial = end;
		if (partial > AUDIT_LINE_MAX)
			break;		/* no line of ours is that long */
		pos = start;
	}
	free(buf);
	a->since_cp = first > 0 ? a->seq - first + 1 : a->seq;
	return 0;
}

static int
open_file(struct audit *a)
{
	if ((a->fd = open(a->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC,
	    0640)) == -1)
		return SL_ERR_IO;
	if (a->o.mode != AUDIT_FSYNC_NEVER)
		aw_sync_dir(a);
	return 0;
}

/* The name a rotated or broken file is moved to: PATH.TAG-TIME[.N]. */
int
aw_aside_name(const struct audit *a, const char *tag, char *buf, size_t len)
{
	struct tm tm;
	time_t now = time(NULL);
	char ts[32];
	int i;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	for (i = 0; i < 1000; i++) {
		if ((i == 0 ? snprintf(buf, len, "%s.%s%s", a->path, tag, ts) :
		    snprintf(buf, len, "%s.%s%s.%d", a->path, tag, ts, i)) >=
		    (int)len)
			return -1;
		if (access(buf, F_OK) != 0)
			return 0;
	}
	return -1;
}

/* Opens the file and finds where its chain ends; start gets the news. */
/*
 * The newest rotated file of the trail (PATH.TIME[.N], not .broken-*)
 * into buf; 0, or -1 when there is none.
 */
static int
newest_rotated(const struct audit *a, char *buf, size_t len)
{
	char dir[4096], best[512] = "";
	const char *base;
	struct dirent *de;
	size_t bl;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s", a->path);
	if ((base = strrchr(a->path, '/')) != NULL) {
		dir[base - a->path] = '\0';
		base++;
	} else {
		snprintf(dir, sizeof(dir), ".");
		base = a->path;
	}
	bl = strlen(base);
	if ((d = opendir(dir[0] != '\0' ? dir : "/")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, base, bl) == 0 &&
		    de->d_name[bl] == '.' && de->d_name[bl + 1] >= '0' &&
		    de->d_name[bl + 1] <= '9' && strlen(de->d_name) < sizeof(best) &&
		    strcmp(de->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", de->d_name);
	closedir(d);
	if (best[0] == '\0' || (size_t)snprintf(buf, len, "%s/%s",
	    dir[0] != '\0' ? dir : "", best) >= len)
		return -1;
	return 0;
}

/*
 * A new, empty file whose trail was rotated before (or whose rotation a
 * crash cut short): its chain goes on from the newest rotated file's last
 * record, when that one verifies.
 */
static void
continue_rotated(struct audit *a, json_t *start)
{
	struct audit r;
	struct stat sb;
	json_t *tmp;
	char path[4096];

	if (newest_rotated(a, path, sizeof(path)) != 0)
		return;
	memset(&r, 0, sizeof(r));
	r.path = path;
	if ((r.fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	/* Read only: a torn tail of an old file is not cut here. */
	if (fstat(r.fd, &sb) == 0 && sb.st_size > 0 &&
	    (tmp = json_object()) != NULL) {
		if (recover_ro(&r, tmp) == 0 && r.seq > 0) {
			a->seq = r.seq;
			memcpy(a->prev, r.prev, sizeof(a->prev));
			a->since_cp = r.since_cp;
			json_object_set_new(start, "continues_file", json_string(
			    strrchr(path, '/') ? strrchr(path, '/') + 1 : path));
		}
		json_decref(tmp);
	}
	close(r.fd);
}

int
aw_open_trail(struct audit *a, json_t *start, char *why, size_t why_len)
{
	char aside[4096];
	int r;

	if (open_file(a) != 0) {
		snprintf(why, why_len, "cannot open %s: %s", a->path,
		    strerror(errno));
		return SL_ERR_IO;
	}
	if ((r = recover(a, start)) == 1) {
		/* Its end does not verify: keep it aside, start anew. */
		if (aw_aside_name(a, "broken-", aside, sizeof(aside)) != 0 ||
		    rename(a->path, aside) != 0) {
			snprintf(why, why_len, "the last record of %s does not "
			    "verify and the file cannot be moved aside: %s",
			    a->path, strerror(errno));
			return SL_ERR_IO;
		}
		log_errx("audit", "the last record of %s does not verify: "
		    "moved to %s; a new trail starts", a->path, aside);
		json_object_set_new(start, "broken_file", json_string(
		    strrchr(aside, '/') ? strrchr(aside, '/') + 1 : aside));
		close(a->fd);
		a->seq = 0;
		memcpy(a->prev, AUDIT_ZERO_HASH, sizeof(a->prev));
		if (open_file(a) != 0 || (r = recover(a, start)) != 0) {
			snprintf(why, why_len, "cannot open %s: %s", a->path,
			    strerror(errno));
			return SL_ERR_IO;
		}
	}
	if (r != 0) {
		snprintf(why, why_len, "cannot read %s: %s", a->path,
		    strerror(errno));
		return r;
	}
	if (a->size == 0)
		continue_rotated(a, start);
	return 0;
}
