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
#include "daemon/monitor.h"
#include "daemon/upgrade.h"
#include "daemon/worker.h"

struct upgrade_out {
	enum upgrade_stage stage;
	pid_t		 child;
	pid_t		 gone;		/* the child reaped, for the log */
	int		 fd;		/* the channel, until the audit takes it */
	struct bufferevent *bev;	/* reads "ready PID" */
	struct event	*timer;		/* UPGRADE_READY_S */
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
stop_waiting(struct daemon *d, struct upgrade_out *u, int kill_child)
{
	int st;

	if (u->bev != NULL)
		bufferevent_free(u->bev);
	u->bev = NULL;
	if (u->fd != -1)
		close(u->fd);
	u->fd = -1;
	if (u->timer != NULL)
		evtimer_del(u->timer);
	if (kill_child && u->child > 0 &&
	    monitor_child_end(d, u->child, 0, &st) == 0) {
		u->gone = u->child;
		u->child = -1;
	}
}

static void
fail(struct daemon *d, const char *msg)
{
	struct upgrade_out *u = d->up_out;

	log_errx("upgrade", "the new process (pid %ld) %s; this one goes on "
	    "serving", (long)(u->child > 0 ? u->child : u->gone), msg);
	stop_waiting(d, u, 1);
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
	    (long)d->mainpid);
	notify_send(&d->notify, msg);
	monitor_tell(d, MON_HANDED, NULL, 0);
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

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct daemon *d = arg;
	char msg[128];
	int st;

	/* The channel ended: the successor is ending too, or is made to. */
	if (monitor_child_end(d, d->up_out->child, 1000, &st) == 0) {
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

static int
start_child(struct daemon *d, int chan, char *why, size_t why_len)
{
	pid_t pid;

	/* The worker cannot run a program: the monitor starts it. */
	if (monitor_spawn(d, chan, &pid, why, why_len) != 0)
		return -1;
	d->up_out->child = pid;
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
		d->up_out = u;
		if (u->timer == NULL) {
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
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(why, why_len, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (start_child(d, sv[1], why, why_len) != 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	close(sv[1]);
	u->fd = sv[0];
	if ((u->bev = bufferevent_socket_new(d->base, u->fd, 0)) == NULL) {
		stop_waiting(d, u, 1);
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
	stop_waiting(d, u, u->stage == UPGRADE_STARTING);
	if (u->timer != NULL)
		event_free(u->timer);
	free(u);
	d->up_out = NULL;
}
