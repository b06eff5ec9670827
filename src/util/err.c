/* err.c: typed errors and error lists. */
#include "autoconf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

const char *
err_str(int err)
{
	switch (err) {
	case SL_OK:		return "success";
	case SL_ERR_INTERNAL:	return "internal error";
	case SL_ERR_NOMEM:	return "out of memory";
	case SL_ERR_INVALID:	return "invalid input";
	case SL_ERR_TOO_BIG:	return "input too large";
	case SL_ERR_IO:		return "system call failed";
	case SL_ERR_NOT_FOUND:	return "not found";
	case SL_ERR_EXISTS:	return "already exists";
	case SL_ERR_DENIED:	return "denied";
	case SL_ERR_UNSUPPORTED: return "not supported";
	}
	return "unknown error";
}

void
errlist_add(struct errlist *el, const char *file, unsigned line,
    unsigned col, const char *fmt, ...)
{
	char msg[512], full[1024];
	va_list ap;
	char **n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (file != NULL && line != 0 && col != 0)
		snprintf(full, sizeof(full), "%s:%u:%u: %s", file, line, col, msg);
	else if (file != NULL && line != 0)
		snprintf(full, sizeof(full), "%s:%u: %s", file, line, msg);
	else if (file != NULL)
		snprintf(full, sizeof(full), "%s: %s", file, msg);
	else
		snprintf(full, sizeof(full), "%s", msg);

	if (el->n == el->cap) {
		size_t cap = el->cap ? el->cap * 2 : 8;
		if ((n = realloc(el->msgs, cap * sizeof(*n))) == NULL)
			return;		/* the list is advisory; keep what we have */
		el->msgs = n;
		el->cap = cap;
	}
	if ((el->msgs[el->n] = strdup(full)) != NULL)
		el->n++;
}

void
errlist_free(struct errlist *el)
{
	size_t i;

	if (el == NULL)
		return;
	for (i = 0; i < el->n; i++)
		free(el->msgs[i]);
	free(el->msgs);
	el->msgs = NULL;
	el->n = el->cap = 0;
}
