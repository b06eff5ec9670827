/*
 * dirwatch.h: a folder whose files are read again when they change.
 * inotify on the folder; the changes of one update (a write, a rename into
 * place, a Kubernetes volume swapping its ..data link) come as several
 * events, so the callback runs once, DIRWATCH_DELAY_MS after the last.
 */
#ifndef SLUICE_LOOP_DIRWATCH_H
#define SLUICE_LOOP_DIRWATCH_H

#define DIRWATCH_DELAY_MS	50

struct event_base;
struct dirwatch;
typedef void dirwatch_fn(void *arg);
/* Whether a file of this name is one the folder is read for. */
typedef int dirwatch_want(const char *name);

/*
 * Watches dir for the files want accepts and for the ..data link of a
 * Kubernetes Secret or ConfigMap volume.  NULL with errno set when the
 * folder cannot be watched.
 */
struct dirwatch	*dirwatch_new(struct event_base *base, const char *dir,
		    dirwatch_want *want, dirwatch_fn *fn, void *arg);
void		 dirwatch_free(struct dirwatch *w);

#endif
