/* monitor.c: the monitor process (monitor.h). */
#include "autoconf.h"

#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/chan.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "util/wire.h"
#include "daemon/ctl.h"
#include "daemon/fserve.h"
#include "daemon/daemon.h"
#include "daemon/monitor.h"
#include "daemon/worker.h"

#define MON_FDS_MAX	1024	/* sockets given to an upgrade's successor */
#define MON_KEYS_WAIT_MS 1000	/* for a dead worker's keys process to end */

/*
 * START: the first worker is starting; SERVING: a worker said ready;
 * GONE: it died, another is forked at restart_at; RESTARTED: that one is
 * starting; STOPPING: a stop signal was passed on; DONE: over.
 */
enum mon_state {
	M_START, M_SERVING, M_GONE, M_RESTARTED, M_STOPPING, M_DONE,
};

struct mon {
	struct daemon	*d;
	enum mon_state	 state;
	pid_t		 worker;	/* -1: none */
	pid_t		 keys;		/* the worker's keys process, -1 */
	pid_t		 successor;	/* an upgrade's new monitor, -1 */
	int		 succ_status;	/* its wait status, once reaped */
	int		 succ_reaped;
	int		 handed;	/* the successor owns the sockets */
	int		 chan;		/* to the worker, -1 */
	int		 sfd;		/* signalfd */
	sigset_t	 old;		/* the mask children get back */
	long long	 started_ms;	/* the last worker's fork */
	long long	 gone_ms;	/* its death */
	int		 status;	/* the daemon's exit status */
	struct fserve	*fs;		/* the worker's files (fserve.h) */
};

static const char *const state_names[] = {
	[M_START] = "start", [M_SERVING] = "serving", [M_GONE] = "gone",
	[M_RESTARTED] = "restarted", [M_STOPPING] = "stopping",
	[M_DONE] = "done",
};

static void
state_set(struct mon *m, enum mon_state s)
{
	log_debug("monitor", "%s -> %s", state_names[m->state], state_names[s]);
	m->state = s;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
done(struct mon *m, int status)
{
	m->status = status;
	state_set(m, M_DONE);
}

/* ---- the worker's end --------------------------------------------- */

static void
worker_gone(struct mon *m, int st)
{
	char how[64];

	if (m->chan != -1)
		close(m->chan);
	m->chan = -1;
	m->worker = -1;
	m->gone_ms = now_ms();
	/* A write it had begun is not the next worker's to finish. */
	fserve_free(m->fs);
	m->fs = fserve_new(m->d->cfg);
	if (WIFEXITED(st))
		snprintf(how, sizeof(how), "exited with status %d",
		    WEXITSTATUS(st));
	else
		snprintf(how, sizeof(how), "was killed by signal %d (%s)",
		    WTERMSIG(st), strsignal(WTERMSIG(st)));
	switch (m->state) {
	case M_START:
		/* A first start that fails says why; no loop of them. */
		done(m, WIFEXITED(st) && WEXITSTATUS(st) != MONITOR_EXIT_FATAL ?
		    WEXITSTATUS(st) : 1);
		return;
	case M_STOPPING:
		done(m, WIFEXITED(st) && WEXITSTATUS(st) != MONITOR_EXIT_FATAL ?
		    WEXITSTATUS(st) : 1);
		return;
	case M_SERVING:
		if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 ||
		    WEXITSTATUS(st) == MONITOR_EXIT_FATAL)) {
			done(m, WEXITSTATUS(st) == 0 ? 0 : 1);	/* its word */
			return;
		}
		break;
	case M_RESTARTED:
		if (WIFEXITED(st) && WEXITSTATUS(st) == MONITOR_EXIT_FATAL) {
			done(m, 1);
			return;
		}
		break;	/* the cause may pass (a full disk): again */
	case M_GONE:
	case M_DONE:
		return;
	}
	log_errx("monitor", "the worker process %s: its connections are "
	    "lost; another starts (%u so far)", how, m->d->restarts + 1);
	state_set(m, M_GONE);
}

static void
reap(struct mon *m)
{
	pid_t p;
	int st;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (p == m->worker)
			worker_gone(m, st);
		else if (p == m->keys)
			m->keys = -1;
		else if (p == m->successor) {
			m->succ_status = st;
			m->succ_reaped = 1;
		} else
			log_debug("monitor", "pid %ld ended", (long)p);
	}
}

/* ---- an upgrade's successor --------------------------------------- */

static size_t
listen_fds(const struct daemon *d, int *fds, size_t max)
{
	size_t n = 0, i, j;

	for (i = 0; i < d->nworkers; i++) {
		const struct worker *w = &d->workers[i];

		for (j = 0; j < w->nlis && n < max; j++)
			fds[n++] = w->lis[j].fd;
		for (j = 0; j < w->ndns_udp && n < max; j++)
			fds[n++] = w->dns_udp[j];
		for (j = 0; j < w->ndns_tcp && n < max; j++)
			fds[n++] = w->dns_tcp[j];
	}
	return n + ctl_listen_fds(d->ctl, fds + n, max - n);
}

/*
 * No worker will accept on them again (a stop, or a successor has its
 * own): closed, so new connections are refused rather than queued.
 */
static void
close_listeners(struct daemon *d)
{
	size_t i, j;

	for (i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];

		for (j = 0; j < w->nlis; j++) {
			if (w->lis[j].fd != -1)
				close(w->lis[j].fd);
			w->lis[j].fd = -1;
		}
		for (j = 0; j < w->ndns_udp; j++) {
			if (w->dns_udp[j] != -1)
				close(w->dns_udp[j]);
			w->dns_udp[j] = -1;
		}
		for (j = 0; j < w->ndns_tcp; j++) {
			if (w->dns_tcp[j] != -1)
				close(w->dns_tcp[j]);
			w->dns_tcp[j] = -1;
		}
	}
}

extern char **environ;

/* Ours, without an upgrade's variables, and the two of this one. */
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

static pid_t
spawn(struct mon *m, int chanfd, char *why, size_t why_len)
{
	static char fdlist[11 + MON_FDS_MAX * 8];
	struct daemon *d = m->d;
	int fds[MON_FDS_MAX];
	char chan[64], **env;
	size_t n, i, o;
	pid_t pid;

	if (m->successor != -1) {
		snprintf(why, why_len, "an upgrade is under way already (pid "
		    "%ld)", (long)m->successor);
		return -1;
	}
	if (access(d->exe, X_OK) != 0) {
		snprintf(why, why_len, "cannot run %s: %s", d->exe,
		    strerror(errno));
		return -1;
	}
	n = listen_fds(d, fds, MON_FDS_MAX);
	o = (size_t)snprintf(fdlist, sizeof(fdlist), "SLUICE_FDS=");
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(fdlist + o, sizeof(fdlist) - o, "%s%d",
		    i > 0 ? "," : "", fds[i]);
	snprintf(chan, sizeof(chan), "SLUICE_UPGRADE=%d:%ld", chanfd,
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
		sigprocmask(SIG_SETMASK, &m->old, NULL);
		for (i = 0; i < n; i++)
			fcntl(fds[i], F_SETFD, 0);
		fcntl(chanfd, F_SETFD, 0);
		execve(d->exe, d->argv, env);
		_exit(127);
	}
	free(env);
	m->successor = pid;
	m->succ_reaped = 0;
	log_info("upgrade", "started %s as pid %ld with %zu listening sockets",
	    d->exe, (long)pid, n);
	return pid;
}

/* The successor that did not serve: its status, waiting up to grace. */
static int
child_end(struct mon *m, pid_t pid, unsigned grace_ms, int *st)
{
	unsigned i;

	if (pid != m->successor || pid <= 0)
		return -1;
	for (i = 0; !m->succ_reaped && i < grace_ms / 10; i++) {
		if (waitpid(pid, &m->succ_status, WNOHANG) == pid)
			m->succ_reaped = 1;
		else
			usleep(10000);
	}
	if (!m->succ_reaped) {
		kill(pid, SIGKILL);
		if (waitpid(pid, &m->succ_status, 0) == pid)
			m->succ_reaped = 1;
	}
	m->successor = -1;
	*st = m->succ_status;
	return m->succ_reaped ? 0 : -1;
}

/* ---- the worker's requests ---------------------------------------- */

static void
reply(struct mon *m, const struct chan_hdr *h, const struct wire_w *w)
{
	if (chan_send(m->chan, h->type | MON_REPLY, h->id, w->p, w->len,
	    -1) != 0)
		log_warnx("monitor", "cannot answer the worker: %s",
		    strerror(errno));
}

static void
answer_enomem(struct mon *m, const struct chan_hdr *h)
{
	uint8_t b[4] = { ENOMEM, 0, 0, 0 };

	if (chan_send(m->chan, h->type | MON_REPLY, h->id, b, sizeof(b),
	    -1) != 0)
		log_warnx("monitor", "cannot answer the worker: %s",
		    strerror(errno));
}

/* A request outside the table: the worker is not itself any more. */
static void
refuse(struct mon *m, const char *what)
{
	log_errx("monitor", "the worker sent %s: it is killed", what);
	if (m->worker > 0)
		kill(m->worker, SIGKILL);
	close(m->chan);
	m->chan = -1;
}

static void
request(struct mon *m)
{
	static uint8_t buf[CHAN_MSG_MAX];
	uint8_t out[MON_WHY_MAX + 16];
	struct chan_hdr h;
	struct wire_r r;
	struct wire_w w;
	char why[MON_WHY_MAX] = "";
	int fd = -1, st = 0, got;
	uint32_t pid, grace;
	pid_t child;

	if ((got = chan_recv(m->chan, &h, buf, sizeof(buf),
	    &fd, 0)) <= 0) {
		if (got == 0 || errno != ETIMEDOUT) {
			if (got != 0)
				refuse(m, "a malformed message");
			else {
				close(m->chan);	/* it ends; SIGCHLD says how */
				m->chan = -1;
			}
		}
		return;
	}
	wire_r_init(&r, buf, h.len);
	wire_w_init(&w, out, sizeof(out));
	if (fd != -1 && h.type != MON_SPAWN) {
		close(fd);
		refuse(m, "an fd with a message that takes none");
		return;
	}
	if (h.type >= FSVC_READ && h.type <= FSVC_UNLINK) {
		if (m->fs == NULL)
			answer_enomem(m, &h);
		else if (fserve_request(m->fs, m->chan, &h, buf, h.len) != 0)
			refuse(m, "a malformed file request");
		return;
	}
	switch (h.type) {
	case MON_KEYS:
		pid = wire_get_u32(&r);
		/* Once, during the start: a worker taken over names no pid. */
		if (wire_done(&r) != 0 || m->keys != -1 || pid <= 1 ||
		    (m->state != M_START && m->state != M_RESTARTED))
			break;
		m->keys = (pid_t)pid;
		return;
	case MON_READY:
		if (wire_done(&r) != 0 || (m->state != M_START &&
		    m->state != M_RESTARTED))
			break;
		if (m->state == M_RESTARTED)
			log_info("monitor", "the new worker process (pid %ld) "
			    "serves", (long)m->worker);
		state_set(m, M_SERVING);
		return;
	case MON_SPAWN:
		if (fd == -1 || wire_done(&r) != 0)
			break;
		child = spawn(m, fd, why, sizeof(why));
		close(fd);
		wire_u32(&w, child > 0 ? (uint32_t)child : 0);
		wire_str(&w, why);
		reply(m, &h, &w);
		return;
	case MON_CHILD_END:
		pid = wire_get_u32(&r);
		grace = wire_get_u32(&r);
		if (wire_done(&r) != 0 || grace > 10000)
			break;
		got = child_end(m, (pid_t)pid, grace, &st) == 0;
		wire_u32(&w, (uint32_t)got);
		wire_u32(&w, (uint32_t)st);
		reply(m, &h, &w);
		return;
	case MON_HANDED:
		if (wire_done(&r) != 0 || m->successor == -1)
			break;
		m->handed = 1;
		close_listeners(m->d);
		return;
	}
	if (fd != -1)
		close(fd);
	refuse(m, "a request outside the table");
}

/* ---- signals -------------------------------------------------------- */

static void
signalled(struct mon *m, int sig)
{
	if (sig == SIGCHLD) {
		reap(m);
		return;
	}
	if (m->worker <= 0) {
		if (sig == SIGTERM || sig == SIGINT) {
			log_info("monitor", "stopped while no worker runs");
			done(m, 0);
		} else
			log_warnx("monitor", "signal %d: no worker runs now",
			    sig);
		return;
	}
	kill(m->worker, sig);
	if ((sig == SIGTERM || sig == SIGINT) && m->state != M_STOPPING) {
		state_set(m, M_STOPPING);
		close_listeners(m->d);
	}
}

/* ---- forking a worker ----------------------------------------------- */

void
monitor_passed_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGUSR2);
}

void
monitor_signals_ready(void)
{
	sigset_t set;

	monitor_passed_signals(&set);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* 1 in the new worker process, 0 in the monitor (-1: fork failed). */
static int
fork_worker(struct mon *m)
{
	struct daemon *d = m->d;
	sigset_t set;
	int sv[2];
	pid_t pid;

	monitor_passed_signals(&set);

	if (chan_pair(sv) != 0)
		return -1;
	if ((pid = fork()) == -1) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		close(m->sfd);
		fserve_free(m->fs);
		/*
		 * SIGCHLD back, the signals passed on still blocked: one that
		 * comes during the start waits for the worker's handlers
		 * (monitor_signals_ready) rather than kill it.
		 */
		sigdelset(&set, SIGCHLD);
		sigprocmask(SIG_SETMASK, &m->old, NULL);
		sigprocmask(SIG_BLOCK, &set, NULL);
		d->mon = sv[1];
		d->mainpid = getppid();
		ctl_disown(d->ctl);	/* the socket's file is the monitor's */
		return 1;
	}
	close(sv[1]);
	m->chan = sv[0];
	m->worker = pid;
	m->keys = -1;
	m->started_ms = now_ms();
	return 0;
}

/* The dead worker's keys process has ended (it dies with it). */
static int
keys_gone(struct mon *m)
{
	int st;

	if (m->keys == -1)
		return 1;
	if (now_ms() - m->gone_ms < MON_KEYS_WAIT_MS)
		return 0;
	kill(m->keys, SIGKILL);
	waitpid(m->keys, &st, 0);
	m->keys = -1;
	return 1;
}

static int
restart_wait(const struct mon *m)
{
	long long at = m->started_ms + MONITOR_RESTART_MS, now = now_ms();

	/* A worker that ran for a while is replaced at once. */
	if (at < m->gone_ms)
		at = m->gone_ms;
	return at <= now ? 0 : (int)(at - now);
}

int
monitor_run(struct daemon *d, int *status)
{
	struct mon m;
	sigset_t set;
	struct pollfd pf[2];
	struct signalfd_siginfo si;
	int n, timeout;

	memset(&m, 0, sizeof(m));
	m.d = d;
	m.worker = m.keys = m.successor = -1;
	m.chan = -1;
	d->mainpid = getpid();
	monitor_passed_signals(&set);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, &m.old) != 0 ||
	    (m.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) == -1) {
		log_errx("monitor", "signalfd: %s", strerror(errno));
		*status = 1;
		return 1;
	}
	/* A dead worker's keys process comes here, to be waited for. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	if ((m.fs = fserve_new(d->cfg)) == NULL)
		log_warnx("monitor", "out of memory: the worker will have no "
		    "files once it runs");
	if ((n = fork_worker(&m)) == 1)
		goto forked;
	if (n != 0) {
		log_errx("monitor", "cannot start the worker process: %s", strerror(errno));
		done(&m, 1);
	}
	while (m.state != M_DONE) {
		timeout = -1;
		if (m.state == M_GONE) {
			reap(&m);
			if ((timeout = restart_wait(&m)) == 0 && keys_gone(&m)) {
				d->restarts++;
				if ((n = fork_worker(&m)) == 1)
					goto forked;
				if (n != 0) {
					log_errx("monitor", "fork: %s", strerror(errno));
					timeout = MONITOR_RESTART_MS;
					m.started_ms = now_ms();
				} else
					state_set(&m, M_RESTARTED);
				continue;
			}
			if (timeout == 0)
				timeout = 10;
		}
		pf[0].fd = m.sfd;
		pf[0].events = POLLIN;
		pf[1].fd = m.chan;
		pf[1].events = POLLIN;
		if ((n = poll(pf, m.chan != -1 ? 2 : 1, timeout)) < 0) {
			if (errno == EINTR)
				continue;
			log_errx("monitor", "poll: %s", strerror(errno));
			done(&m, 1);
			break;
		}
		if (n > 0 && (pf[0].revents & POLLIN))
			while (read(m.sfd, &si, sizeof(si)) == sizeof(si))
				signalled(&m, (int)si.ssi_signo);
		if (n > 0 && m.chan != -1 && pf[1].revents != 0)
			request(&m);
	}
	close(m.sfd);
	fserve_free(m.fs);
	sigprocmask(SIG_SETMASK, &m.old, NULL);
	if (m.chan != -1)
		close(m.chan);
	if (m.handed || (m.successor != -1 && !m.succ_reaped))
		ctl_disown(d->ctl);	/* the socket's file is the successor's */
	*status = m.status;
	return 1;
 forked:
	return 0;
}
