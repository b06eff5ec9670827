/* err.h: typed errors and error lists. */
#ifndef SLUICE_ERR_H
#define SLUICE_ERR_H

#include <stddef.h>

/*
 * Functions return 0 on success or one of these (negative).  Out-parameters
 * are written only on success.
 */
enum {
	SL_OK = 0,
	SL_ERR_INTERNAL = -1,	/* a bug or an impossible state */
	SL_ERR_NOMEM = -2,
	SL_ERR_INVALID = -3,	/* malformed input */
	SL_ERR_TOO_BIG = -4,	/* input over a configured bound */
	SL_ERR_IO = -5,		/* a system call failed; errno says more */
	SL_ERR_NOT_FOUND = -6,
	SL_ERR_EXISTS = -7,
	SL_ERR_DENIED = -8,	/* refused by policy or permission */
	SL_ERR_UNSUPPORTED = -9,
};

/* A static, human-readable description of an error code. */
const char *err_str(int err);

/*
 * An error list collects every problem found while loading a file, as
 * "file:line:col: message" lines, so that one run reports all of them.
 * Owned by the caller; errlist_free() accepts an empty list.
 */
struct errlist {
	char	**msgs;
	size_t	  n;
	size_t	  cap;
};

#define ERRLIST_INIT { NULL, 0, 0 }

/* Appends "file:line:col: message"; a line or col of 0 is left out. */
void errlist_add(struct errlist *el, const char *file, unsigned line,
    unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void errlist_free(struct errlist *el);

#endif
