/*
 * fsvc.c: files, here or through the monitor (fsvc.h).
 *
 * The answers: READ and CERTS: i32 errno, u64 size, u64 inode, u64 mtime
 * (ns), bytes (the chunk at off, at most FSVC_CHUNK); a file read in
 * several chunks must keep its size, inode and mtime, or it is read
 * again.  LIST: i32 errno, u32 total, u32 n, n strings (from first on).
 * WRITE and UNLINK: i32 errno.
 */
#include "autoconf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/chan.h"
#include "util/fsvc.h"
#include "util/wire.h"

#define FSVC_TIMEOUT_MS	15000
#define FSVC_TRIES	3	/* reads of a file that changes meanwhile */
#define FSVC_LIST_MAX	65536	/* names in one folder */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int remote_fd = -1;
static uint64_t next_id;

void
fsvc_remote(int fd)
{
	atomic_store(&remote_fd, fd);
}

int
fsvc_is_remote(void)
{
	return atomic_load(&remote_fd) != -1;
}

ssize_t
fsvc_ask(int fd, uint32_t type, const void *req, size_t len, int passfd,
    void *ans, size_t cap, int timeout_ms)
{
	struct chan_hdr h;
	uint64_t id;
	int r;

	if (fd == -1) {
		errno = EIO;
		return -1;
	}
	pthread_mutex_lock(&mu);
	id = ++next_id;
	if (chan_send(fd, type, id, req, len, passfd) != 0 ||
	    (r = chan_recv(fd, &h, ans, cap, NULL, timeout_ms)) != 1 ||
	    h.type != (type | FSVC_REPLY) || h.id != id) {
		pthread_mutex_unlock(&mu);
		errno = EIO;
		return -1;
	}
	pthread_mutex_unlock(&mu);
	return (ssize_t)h.len;
}

/* ---- local -------------------------------------------------------------- */

int
fsvc_local_read(const char *path, size_t max, char **out, size_t *outlen)
{
	struct stat sb;
	char *buf = NULL, *nb;
	size_t len = 0, cap;
	ssize_t got;
	int fd, e;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return -1;
	/* A pipe too (-c /dev/stdin): read to its end, sizes aside. */
	if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
		e = S_ISDIR(sb.st_mode) ? EISDIR : errno;
		goto fail;
	}
	/*
	 * Its size and one byte more, at most max + 1: a file may grow while
	 * it is read, and a pipe says no size.
	 */
	cap = S_ISREG(sb.st_mode) && (uint64_t)sb.st_size < max ?
	    (size_t)sb.st_size + 1 : 4096;
	if (cap > max)
		cap = max + 1;
	if ((buf = malloc(cap + 1)) == NULL) {
		e = ENOMEM;
		goto fail;
	}
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				e = EFBIG;
				goto fail;
			}
			cap = cap > max / 2 ? max + 1 : cap * 2;
			if ((nb = realloc(buf, cap + 1)) == NULL) {
				e = ENOMEM;
				goto fail;
			}
			buf = nb;
		}
		if ((got = read(fd, buf + len, cap - len)) < 0) {
			if (errno == EINTR)
				continue;
			e = errno;
			goto fail;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (len > max) {
		e = EFBIG;
		goto fail;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
 fail:
	close(fd);
	free(buf);
	errno = e;
	return -1;
}

void
fsvc_sync_dir(const char *dir)
{
	int fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(fd);
		close(fd);
	}
}

/* path's folder ("." or "/" when it has none). */
static void
dir_of(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		snprintf(dir, cap, ".");
	else
		snprintf(dir, cap, "%.*s", slash == path ? 1 :
		    (int)(slash - path), path);
}

int
fsvc_local_write(const char *path, const void *buf, size_t len, mode_t mode)
{
	const char *slash = strrchr(path, '/');
	char tmp[4096], dir[4096];
	size_t off = 0;
	ssize_t n;
	int fd, saved;

	if (snprintf(tmp, sizeof(tmp), "%.*s/.%s.tmp.%ld",
	    slash ? (int)(slash - path) : 1, slash ? path : ".",
	    slash ? slash + 1 : path, (long)getpid()) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* A new file: whatever a crash or another hand left there goes. */
	unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, mode)) < 0)
		return -1;
	while (off < len) {
		if ((n = write(fd, (const char *)buf + off, len - off)) < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		off += (size_t)n;
	}
	if (fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	/* The rename itself survives a crash once the folder is synced. */
	dir_of(path, dir, sizeof(dir));
	fsvc_sync_dir(dir);
	return 0;
 fail:
	saved = errno;
	if (fd != -1)
		close(fd);
	unlink(tmp);
	errno = saved;
	return -1;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
fsvc_local_list(const char *dir, char ***names, size_t *n)
{
	DIR *d;
	struct dirent *de;
	char **v = NULL, **nv;
	size_t cnt = 0, cap = 0;
	int e;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (cnt == FSVC_LIST_MAX) {
			e = EFBIG;
			goto fail;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				e = ENOMEM;
				goto fail;
			}
			v = nv;
		}
		if ((v[cnt] = strdup(de->d_name)) == NULL) {
			e = ENOMEM;
			goto fail;
		}
		cnt++;
	}
	closedir(d);
	if (cnt > 0)
		qsort(v, cnt, sizeof(*v), by_name);
	*names = v;
	*n = cnt;
	return 0;
 fail:
	closedir(d);
	fsvc_list_free(v, cnt);
	errno = e;
	return -1;
}

void
fsvc_list_free(char **names, size_t n)
{
	size_t i;

	for (i = 0; names != NULL && i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- remote ------------------------------------------------------------- */

/* Buffers of the answers: a chunk and its fields. */
#define ANS_MAX	(FSVC_CHUNK + 256)

static int
remote_read(uint32_t type, const char *path, const char *within, size_t max,
    char **out, size_t *outlen)
{
	uint8_t req[2 * 4096 + 32], *ans;
	uint64_t size = 0, ino = 0, mtime = 0, off;
	struct wire_w w;
	struct wire_r r;
	const uint8_t *chunk;
	char *buf = NULL;
	size_t n;
	ssize_t got;
	int tries, e = EIO;
	int32_t err;

	if ((ans = malloc(ANS_MAX)) == NULL)
		return -1;
	for (tries = 0; tries < FSVC_TRIES; tries++) {
		free(buf);
		buf = NULL;
		for (off = 0;;) {
			wire_w_init(&w, req, sizeof(req));
			wire_str(&w, path);
			wire_u64(&w, off);
			if (type == FSVC_READ)
				wire_str(&w, within);
			if (w.over) {
				e = ENAMETOOLONG;
				goto fail;
			}
			if ((got = fsvc_ask(remote_fd, type, req, w.len, -1, ans, ANS_MAX,
			    FSVC_TIMEOUT_MS)) < 0)
				goto fail;
			wire_r_init(&r, ans, (size_t)got);
			err = (int32_t)wire_get_u32(&r);
			if (err != 0) {
				e = err;
				goto fail;
			}
			if (off == 0) {
				size = wire_get_u64(&r);
				ino = wire_get_u64(&r);
				mtime = wire_get_u64(&r);
				if (size > max) {
					e = EFBIG;
					goto fail;
				}
				if ((buf = malloc((size_t)size + 1)) == NULL) {
					e = ENOMEM;
					goto fail;
				}
			} else if (wire_get_u64(&r) != size ||
			    wire_get_u64(&r) != ino || wire_get_u64(&r) != mtime)
				break;	/* it changed: again */
			chunk = wire_get_bytes(&r, FSVC_CHUNK, &n);
			if (wire_done(&r) != 0 || n > size - off ||
			    (n == 0 && off < size))
				goto fail;
			memcpy(buf + off, chunk, n);
			off += n;
			if (off == size) {
				buf[size] = '\0';
				free(ans);
				*out = buf;
				*outlen = (size_t)size;
				return 0;
			}
		}
	}
	e = EAGAIN;
 fail:
	free(ans);
	free(buf);
	errno = e;
	return -1;
}

static int
remote_list(const char *dir, char ***names, size_t *n)
{
	uint8_t req[4096 + 16], *ans;
	struct wire_w w;
	struct wire_r r;
	char **v = NULL;
	const uint8_t *s;
	uint32_t total = 0, k, i;
	size_t cnt = 0, sl;
	ssize_t got;
	int e = EIO;
	int32_t err;

	if ((ans = malloc(CHAN_MSG_MAX)) == NULL)
		return -1;
	do {
		wire_w_init(&w, req, sizeof(req));
		wire_str(&w, dir);
		wire_u32(&w, (uint32_t)cnt);
		if (w.over) {
			e = ENAMETOOLONG;
			goto fail;
		}
		if ((got = fsvc_ask(remote_fd, FSVC_LIST, req, w.len, -1, ans,
		    CHAN_MSG_MAX, FSVC_TIMEOUT_MS)) < 0)
			goto fail;
		wire_r_init(&r, ans, (size_t)got);
		if ((err = (int32_t)wire_get_u32(&r)) != 0) {
			e = err;
			goto fail;
		}
		k = wire_get_u32(&r);
		if (v == NULL) {
			if (k > FSVC_LIST_MAX)
				goto fail;
			total = k;
			if ((v = calloc(total ? total : 1, sizeof(*v))) == NULL) {
				e = ENOMEM;
				goto fail;
			}
		} else if (k != total)
			goto fail;	/* it changed: a reload comes anyway */
		k = wire_get_u32(&r);
		if (k > total - cnt || (k == 0 && cnt < total))
			goto fail;
		for (i = 0; i < k; i++) {
			s = wire_get_bytes(&r, 255, &sl);
			if (r.bad || sl == 0 || memchr(s, '/', sl) != NULL ||
			    memchr(s, '\0', sl) != NULL ||
			    (v[cnt] = strndup((const char *)s, sl)) == NULL)
				goto fail;
			cnt++;
		}
		if (wire_done(&r) != 0)
			goto fail;
	} while (cnt < total);
	free(ans);
	*names = v;
	*n = cnt;
	return 0;
 fail:
	free(ans);
	fsvc_list_free(v, cnt);
	errno = e;
	return -1;
}

/* A bare errno answer. */
static int
remote_simple(uint32_t type, const void *req, size_t len)
{
	uint8_t ans[16];
	struct wire_r r;
	ssize_t got;
	int32_t err;

	if ((got = fsvc_ask(remote_fd, type, req, len, -1, ans, sizeof(ans),
	    FSVC_TIMEOUT_MS)) < 0)
		return -1;
	wire_r_init(&r, ans, (size_t)got);
	err = (int32_t)wire_get_u32(&r);
	if (wire_done(&r) != 0) {
		errno = EIO;
		return -1;
	}
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

static int
remote_write(const char *path, const void *buf, size_t len, mode_t mode)
{
	struct wire_w w;
	uint8_t *req;
	size_t off = 0, n;
	uint32_t flags = FSVC_WRITE_FIRST;
	int r;

	if ((req = malloc(CHAN_MSG_MAX)) == NULL)
		return -1;
	do {
		n = len - off > FSVC_CHUNK ? FSVC_CHUNK : len - off;
		if (off + n == len)
			flags |= FSVC_WRITE_LAST;
		wire_w_init(&w, req, CHAN_MSG_MAX);
		wire_u32(&w, flags);
		wire_u32(&w, (uint32_t)mode);
		wire_str(&w, path);
		wire_bytes(&w, (const uint8_t *)buf + off, n);
		if (w.over) {
			free(req);
			errno = ENAMETOOLONG;
			return -1;
		}
		r = remote_simple(FSVC_WRITE, req, w.len);
		off += n;
		flags = 0;
	} while (r == 0 && off < len);
	free(req);
	return r;
}

/* ---- the calls ---------------------------------------------------------- */

int
fsvc_read(const char *path, size_t max, char **out, size_t *len)
{
	return fsvc_is_remote() ? remote_read(FSVC_READ, path, "", max, out,
	    len) : fsvc_local_read(path, max, out, len);
}

int
fsvc_within(const char *dir, const char *path, char *real)
{
	char rdir[PATH_MAX];
	size_t n;

	if (realpath(dir, rdir) == NULL || realpath(path, real) == NULL)
		return -1;
	n = strcmp(rdir, "/") == 0 ? 0 : strlen(rdir);
	if (strncmp(real, rdir, n) != 0 || real[n] != '/') {
		errno = ELOOP;
		return -1;
	}
	return 0;
}

int
fsvc_read_in(const char *dir, const char *path, size_t max, char **out,
    size_t *len)
{
	char real[PATH_MAX];

	if (fsvc_is_remote())
		return remote_read(FSVC_READ, path, dir, max, out, len);
	if (fsvc_within(dir, path, real) != 0)
		return -1;
	return fsvc_local_read(real, max, out, len);
}

int
fsvc_certs(const char *path, size_t max, char **out, size_t *len)
{
	/* Here: the caller takes the certificates from the file. */
	return fsvc_is_remote() ? remote_read(FSVC_CERTS, path, "", max, out,
	    len) : fsvc_local_read(path, max, out, len);
}

int
fsvc_list(const char *dir, char ***names, size_t *n)
{
	return fsvc_is_remote() ? remote_list(dir, names, n) :
	    fsvc_local_list(dir, names, n);
}

int
fsvc_write(const char *path, const void *buf, size_t len, mode_t mode)
{
	return fsvc_is_remote() ? remote_write(path, buf, len, mode) :
	    fsvc_local_write(path, buf, len, mode);
}

int
fsvc_unlink(const char *path)
{
	uint8_t req[4096 + 8];
	struct wire_w w;

	if (fsvc_is_remote()) {
		wire_w_init(&w, req, sizeof(req));
		wire_str(&w, path);
		if (w.over) {
			errno = ENAMETOOLONG;
			return -1;
		}
		return remote_simple(FSVC_UNLINK, req, w.len);
	}
	return fsvc_local_unlink(path);
}

int
fsvc_local_unlink(const char *path)
{
	char dir[4096];

	if (unlink(path) != 0)
		return -1;
	dir_of(path, dir, sizeof(dir));
	fsvc_sync_dir(dir);
	return 0;
}
