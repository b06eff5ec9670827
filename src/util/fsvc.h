/*
 * fsvc.h: the files a worker process reads and writes once it runs:
 * policy_dir (reloads, PUT /v1/policies), secret_dir, state_dir, CA
 * bundles.  At start the calls are the system's own.  Once the worker is
 * confined (fsvc_remote) it can open no path at all: each call is a
 * request to the monitor (monitor.h), which checks the path against the
 * folders the configuration names and does it there.  A CA bundle comes
 * back as its certificates only, whatever else the file holds.
 *
 * Every function is safe from any thread; requests go one at a time.
 * Each returns 0, or -1 with errno (EACCES: a path outside those folders;
 * EFBIG: larger than max; EIO: the monitor is gone).
 */
#ifndef SLUICE_FSVC_H
#define SLUICE_FSVC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Message types on the monitor's channel (chan.h), after monitor.h's. */
enum fsvc_msg {
	FSVC_READ = 0x40,	/* str path, u64 off, str within; reply: fsvc.c */
	FSVC_CERTS,		/* as READ, of the file's certificates as PEM */
	FSVC_LIST,		/* str dir, u32 first; reply: names */
	FSVC_WRITE,		/* u32 flags, u32 mode, str path, bytes */
	FSVC_UNLINK,		/* str path */
};

#define FSVC_REPLY	0x100		/* set in an answer's type */
#define FSVC_CHUNK	(64u * 1024)	/* bytes of a file a message carries */
#define FSVC_WRITE_FIRST 0x1
#define FSVC_WRITE_LAST	0x2

/*
 * From now on every call goes over fd to the monitor (fd stays the
 * caller's).  fsvc_ask is the request-and-answer both that and
 * monitor.h's requests use: one in flight at a time, over any thread.
 * It returns the answer's payload length, or -1 (EIO).
 */
void	fsvc_remote(int fd);
int	fsvc_is_remote(void);
ssize_t	fsvc_ask(int fd, uint32_t type, const void *req, size_t len,
	    int passfd, void *ans, size_t cap, int timeout_ms);

/* The whole regular file, at most max bytes, NUL-terminated (free()). */
int	fsvc_read(const char *path, size_t max, char **out, size_t *len);
/*
 * The same of a file that, links resolved, is inside the folder dir
 * (ELOOP when it is not): a link may point elsewhere in the folder.
 */
int	fsvc_read_in(const char *dir, const char *path, size_t max, char **out,
	    size_t *len);
/* Its certificates (PEM), read as fsvc_read reads. */
int	fsvc_certs(const char *path, size_t max, char **out, size_t *len);
/* The names in dir but . and .., sorted (free each, and the array). */
int	fsvc_list(const char *dir, char ***names, size_t *n);
void	fsvc_list_free(char **names, size_t n);
/* Replaces path with buf, whole or not at all, and syncs its folder. */
int	fsvc_write(const char *path, const void *buf, size_t len, mode_t mode);
/* Removes path (ENOENT is an error) and syncs its folder. */
int	fsvc_unlink(const char *path);
/* 0 when path, links resolved into real[PATH_MAX], is inside dir. */
int	fsvc_within(const char *dir, const char *path, char *real);
/* The local forms, whatever the mode: the monitor's side. */
int	fsvc_local_read(const char *path, size_t max, char **out, size_t *len);
int	fsvc_local_list(const char *dir, char ***names, size_t *n);
int	fsvc_local_write(const char *path, const void *buf, size_t len,
	    mode_t mode);
int	fsvc_local_unlink(const char *path);
void	fsvc_sync_dir(const char *dir);

#endif
