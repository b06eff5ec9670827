/*
 * upgrade.c: the running process's side of an upgrade (upgrade.h): it
 * starts the new binary with the listening sockets, waits for it to
 * serve, then lets go of the sockets and the audit trail, and drains.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "util/log.h"
#include "conf/config.h"
#include "audit/audit.h"
#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "daemon/upgrade.h"
#include "daemon/worker.h"

#define UPGRADE_FDS_MAX	1024	/* listening sockets given to the successor */

extern char **environ;

struct upgrade_out {
	enum upgrade_stage stage;
	pid_t		 child;
	pid_t		 gone;		/* the child reaped, for the log */
	int		 fd;		/* the channel, until the audit takes it */
	struct bufferevent *bev;	/* reads "ready PID" */
	struct event	*timer;		/* UPGRADE_READY_S */
	struct event	*chld;		/* SIGCHLD */
};

static void
stage_set(struct upgrade_out *u, enum upgrade_stage s)
{
	static const char *const names[] = {
		[UPGRADE_NONE] = "none", [UPGRADE_STARTING] = "starting",
		[UPGRADE_HANDED] = "handed",
	};

	log_debug("upgrade", "%s -> %s", names[u->stage], names[s]);
	u->stage = s;
}

enum upgrade_stage
upgrade_stage(const struct daemon *d)
{
	return d->up_out != NULL ? d->up_out->stage : UPGRADE_NONE;
}

long
upgrade_child(const struct daemon *d)
{
	return d->up_out != NULL && d->up_out->stage != UPGRADE_NONE ?
	    (long)d->up_out->child : 0;
}

/* The channel and the wait go; the successor, if it lives, is killed. */
static void
stop_waiting(struct upgrade_out *u, int kill_child)
{
	if (u->bev != NULL)
		bufferevent_free(u->bev);
	u->bev = NULL;
	if (u->fd != -1)
		close(u->fd);
	u->fd = -1;
	if (u->timer != NULL)
		evtimer_del(u->timer);
	if (kill_child && u->child > 0)
		kill(u->child, SIGKILL);
}

static void
fail(struct daemon *d, const char *msg)
{
	struct upgrade_out *u = d->up_out;

	log_errx("upgrade", "the new process (pid %ld) %s; this one goes on "
	    "serving", (long)(u->child > 0 ? u->child : u->gone), msg);
	stop_waiting(u, 1);
	stage_set(u, UPGRADE_NONE);
	d->upgrades_failed++;
	ctl_upgraded(d->ctl, 0, msg);
}

/* The successor serves: it gets everything, this process drains. */
static void
handed(struct daemon *d)
{
	struct upgrade_out *u = d->up_out;
	char msg[128];
	int fd = u->fd;

	bufferevent_free(u->bev);	/* the fd stays: the audit takes it */
	u->bev = NULL;
	u->fd = -1;
	evtimer_del(u->timer);
	stage_set(u, UPGRADE_HANDED);
	snprintf(msg, sizeof(msg), "MAINPID=%ld\nSTATUS=upgraded: pid %ld "
	    "serves, pid %ld drains", (long)u->child, (long)u->child,
	    (long)getpid());
	notify_send(&d->notify, msg);
	ctl_handed_over(d->ctl);
	daemon_drain(d, "upgraded");
	if (audit_handover(d->audit, fd, (long)u->child) != 0)
		log_errx("upgrade", "cannot hand the audit trail over; the "
		    "new process takes it as it is");
	log_info("upgrade", "pid %ld serves now; this process drains and "
	    "exits", (long)u->child);
	ctl_upgraded(d->ctl, (long)u->child, NULL);
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct daemon *d = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line, *end;
	long pid;

	if ((line = evbuffer_readln(in, NULL, EVBUFFER_EOL_LF)) == NULL) {
		if (evbuffer_get_length(in) > 64)
			fail(d, "said something that is not \"ready\"");
		return;
	}
	pid = strncmp(line, "ready ", 6) == 0 ? strtol(line + 6, &end, 10) : 0;
	if (pid != (long)d->up_out->child || *end != '\0')
		fail(d, "said something that is not \"ready\"");
	else
		handed(d);
	free(line);
}

/* The channel ended: the successor is ending too, or is made to. */
static int
reap(pid_t pid, int *st)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (waitpid(pid, st, WNOHANG) == pid)
			return 0;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	return waitpid(pid, st, 0) == pid ? 0 : -1;
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct daemon *d = arg;
	char msg[128];
	int st;

	if (reap(d->up_out->child, &st) == 0) {
		d->up_out->gone = d->up_out->child;
		d->up_out->child = -1;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
			snprintf(msg, sizeof(msg), "could not run %s", d->exe);
		else if (WIFEXITED(st))
			snprintf(msg, sizeof(msg), "exited with status %d before "
			    "it served; its log says why", WEXITSTATUS(st));
		else
			snprintf(msg, sizeof(msg), "was killed by signal %d "
			    "before it served", WTERMSIG(st));
	} else
		snprintf(msg, sizeof(msg), "closed the channel before it "
		    "served");
	fail(d, msg);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	fail(arg, "did not serve within 20 s; it was killed");
}

/* Children that end after the handover are reaped here. */
static void
chld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	pid_t p;
	int st;

	if (d->up_out->stage == UPGRADE_STARTING)
		return;		/* event_cb reaps it with the channel's end */
	siginfo_t si;

	/* The keys process is daemon.c's to reap: looked at, left alone. */
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
		    si.si_pid == 0 || keyproc_is(&d->keys, si.si_pid))
			break;
		if ((p = waitpid(si.si_pid, &st, WNOHANG)) <= 0)
			break;
		log_info("upgrade", "pid %ld ended (status %d)", (long)p,
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
}

/* Every listening socket, the workers' and the control API's. */
static size_t
listen_fds(struct daemon *d, int *fds, size_t max)
{
	size_t n = 0, i, j;

	for (i = 0; i < d->nworkers; i++) {
		const struct worker *w = &d->workers[i];

		for (j = 0; j < w->nlfds && n < max; j++)
			fds[n++] = w->lfds[j];
	}
	return n + ctl_listen_fds(d->ctl, fds + n, max - n);
}

/* The environment of the successor: ours, and what it inherits. */
static char **
child_env(const char *chan, const char *fdlist)
{
	size_t n = 0, i, k = 0;
	char **env;

	while (environ[n] != NULL)
		n++;
	if ((env = calloc(n + 3, sizeof(*env))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "SLUICE_UPGRADE=", 15) != 0 &&
		    strncmp(environ[i], "SLUICE_FDS=", 11) != 0)
			env[k++] = environ[i];
	env[k++] = (char *)chan;
	env[k++] = (char *)fdlist;
	return env;
}

static int
start_child(struct daemon *d, int sv[2], char *why, size_t why_len)
{
	static char fdlist[11 + UPGRADE_FDS_MAX * 8];
	char chan[64], **env;
	int fds[UPGRADE_FDS_MAX];
	size_t n, i, o;
	pid_t pid;

	n = listen_fds(d, fds, UPGRADE_FDS_MAX);
	o = (size_t)snprintf(fdlist, sizeof(fdlist), "SLUICE_FDS=");
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(fdlist + o, sizeof(fdlist) - o, "%s%d",
		    i > 0 ? "," : "", fds[i]);
	snprintf(chan, sizeof(chan), "SLUICE_UPGRADE=%d:%ld", sv[1],
	    (long)getpid());
	if ((env = child_env(chan, fdlist)) == NULL) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		free(env);
		return -1;
	}
	if (pid == 0) {
		/* Only what is async-signal-safe, until the exec. */
		for (i = 0; i < n; i++)
			fcntl(fds[i], F_SETFD, 0);
		fcntl(sv[1], F_SETFD, 0);
		execve(d->exe, d->argv, env);
		_exit(127);
	}
	free(env);
	d->up_out->child = pid;
	log_info("upgrade", "started %s as pid %ld with %zu listening sockets",
	    d->exe, (long)pid, n);
	return 0;
}

int
upgrade_begin(struct daemon *d, char *why, size_t why_len)
{
	static const struct timeval ready = { UPGRADE_READY_S, 0 };
	struct upgrade_out *u;
	int sv[2];

	if (d->up_out == NULL) {
		if ((u = calloc(1, sizeof(*u))) == NULL) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		u->fd = -1;
		u->timer = evtimer_new(d->base, timer_cb, d);
		u->chld = evsignal_new(d->base, SIGCHLD, chld_cb, d);
		d->up_out = u;
		if (u->timer == NULL || u->chld == NULL ||
		    evsignal_add(u->chld, NULL) != 0) {
			snprintf(why, why_len, "out of memory");
			return -1;
		}
	}
	u = d->up_out;
	if (u->stage != UPGRADE_NONE) {
		snprintf(why, why_len, "an upgrade is under way already (pid "
		    "%ld)", (long)u->child);
		return -1;
	}
	if (d->draining) {
		snprintf(why, why_len, "sluiced is draining");
		return -1;
	}
	if (upgrade_taking_over(d)) {
		snprintf(why, why_len, "this process is still taking over from "
		    "pid %ld", upgrade_from(d));
		return -1;
	}
	if (access(d->exe, X_OK) != 0) {
		snprintf(why, why_len, "cannot run %s: %s", d->exe,
		    strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(why, why_len, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (start_child(d, sv, why, why_len) != 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	close(sv[1]);
	u->fd = sv[0];
	if ((u->bev = bufferevent_socket_new(d->base, u->fd, 0)) == NULL) {
		stop_waiting(u, 1);
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	bufferevent_setcb(u->bev, read_cb, NULL, event_cb, d);
	bufferevent_enable(u->bev, EV_READ);
	evtimer_add(u->timer, &ready);
	stage_set(u, UPGRADE_STARTING);
	return 0;
}

void
upgrade_free(struct daemon *d)
{
	struct upgrade_out *u = d->up_out;

	if (u == NULL)
		return;
	stop_waiting(u, u->stage == UPGRADE_STARTING);
	if (u->timer != NULL)
		event_free(u->timer);
	if (u->chld != NULL)
		event_free(u->chld);
	free(u);
	d->up_out = NULL;
}
