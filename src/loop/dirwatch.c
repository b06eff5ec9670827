/* dirwatch.c: inotify on one folder, debounced into one callback. */
#include "autoconf.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "loop/dirwatch.h"

#define WATCH_MASK	(IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | \
			 IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)

struct dirwatch {
	int		 ifd;		/* inotify */
	char		*dir;		/* the folder (no fd: a worker holds none) */
	dirwatch_want	*want;
	dirwatch_fn	*fn;
	void		*arg;
	struct event	*read_ev, *delay_ev;
};

/* Whether one event can change what the folder's files say. */
static int
relevant(const struct dirwatch *w, const struct inotify_event *ev)
{
	char path[PATH_MAX];
	struct stat sb;

	if (ev->mask & IN_Q_OVERFLOW)
		return 1;
	if (ev->len == 0)
		return 0;
	if (strcmp(ev->name, "..data") == 0)
		return 1;	/* a Kubernetes volume swapped its contents */
	if (!w->want(ev->name))
		return 0;
	/*
	 * A file being created is read when it is closed or renamed; a new
	 * symbolic link is complete at once.  A worker that may not look
	 * into the folder (its user is not the folder's) cannot tell: it
	 * reads, and reads again at the close.
	 */
	if ((ev->mask & IN_CREATE) && snprintf(path, sizeof(path), "%s/%s",
	    w->dir, ev->name) < (int)sizeof(path) && lstat(path, &sb) == 0 &&
	    !S_ISLNK(sb.st_mode))
		return 0;
	return 1;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dirwatch *w = arg;
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	struct timeval tv = { 0, DIRWATCH_DELAY_MS * 1000 };
	ssize_t n;
	size_t off;
	int changed = 0;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (off = 0; off + sizeof(*ev) <= (size_t)n;
		    off += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)(buf + off);
			changed |= relevant(w, ev);
		}
	if (changed)
		evtimer_add(w->delay_ev, &tv);
}

static void
delay_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dirwatch *w = arg;

	w->fn(w->arg);
}

struct dirwatch *
dirwatch_new(struct event_base *base, const char *dir, dirwatch_want *want,
    dirwatch_fn *fn, void *arg)
{
	struct dirwatch *w;
	int e;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->ifd = -1;
	w->want = want;
	w->fn = fn;
	w->arg = arg;
	if ((w->dir = strdup(dir)) == NULL ||
	    (w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
	    inotify_add_watch(w->ifd, dir, WATCH_MASK) < 0)
		goto fail;
	errno = ENOMEM;
	if ((w->read_ev = event_new(base, w->ifd, EV_READ | EV_PERSIST,
	    read_cb, w)) == NULL ||
	    (w->delay_ev = evtimer_new(base, delay_cb, w)) == NULL ||
	    event_add(w->read_ev, NULL) != 0)
		goto fail;
	return w;
 fail:
	e = errno;
	dirwatch_free(w);
	errno = e;
	return NULL;
}

void
dirwatch_free(struct dirwatch *w)
{
	if (w == NULL)
		return;
	if (w->read_ev != NULL)
		event_free(w->read_ev);
	if (w->delay_ev != NULL)
		event_free(w->delay_ev);
	if (w->ifd >= 0)
		close(w->ifd);
	free(w->dir);
	free(w);
}
