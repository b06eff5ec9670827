/* keyproc.c: the keys process (keyproc.h). */
#include "autoconf.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/log.h"
#include "util/proctitle.h"
#include "conf/config.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "keys/kserve.h"
#include "keys/signkey.h"
#include "audit/aserve.h"
#include "audit/audit.h"
#include "daemon/confine.h"
#include "daemon/keyproc.h"

#define KEYPROC_STOP_MS	5000	/* to exit once its channels close */

/* The keys process's audit side: its own thread on the audit channel. */
struct atrail {
	struct audit	*a;
	struct signkey	*sign;
	int		 fd;
	pid_t		 worker;
	atomic_int	*phase;
	pthread_t	 thread;
};

#define KEYPROC_FDS_MAX	256	/* channels */

/* Every fd but stdio and keep[0..n): the worker's sockets are not ours. */
static void
close_others(const int *keep, size_t n)
{
	DIR *dir;
	struct dirent *e;
	int fd, dfd;
	size_t i;

	if ((dir = opendir("/proc/self/fd")) == NULL)
		return;
	dfd = dirfd(dir);
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = atoi(e->d_name);
		if (fd <= 2 || fd == dfd)
			continue;
		for (i = 0; i < n && keep[i] != fd; i++)
			;
		if (i == n)
			close(fd);
	}
	closedir(dir);
}

/* The worker broke the protocol: it is ended, and so are we. */
static void
violation(pid_t worker, unsigned role, const char *why)
{
	log_errx("keys", "the %s channel sent %s: ending the worker (pid %ld)",
	    role == KPROTO_FROM_CTL ? "control" : "worker", why, (long)worker);
	kill(worker, SIGKILL);
	_exit(1);
}

/* The audit channel: rounds one at a time, each answered when taken. */
static void *
atrail_main(void *arg)
{
	struct atrail *t = arg;
	const struct kproto_row *row;
	struct chan_hdr h;
	uint8_t *req, *ans;
	const char *why;
	uint32_t type;
	size_t len;
	int r;

	if ((req = malloc(CHAN_MSG_MAX)) == NULL ||
	    (ans = malloc(CHAN_MSG_MAX)) == NULL)
		_exit(1);
	for (;;) {
		r = chan_recv(t->fd, &h, req, CHAN_MSG_MAX, NULL, -1);
		if (r == 0 || (r == SL_ERR_IO && errno != EINTR))
			break;		/* the worker is gone, or going */
		if (r != 1)
			violation(t->worker, KPROTO_FROM_AUDIT,
			    "a malformed message");
		if ((row = kproto_admit(h.type, h.len, KPROTO_FROM_AUDIT,
		    (enum kproto_phase)atomic_load(t->phase), &why)) == NULL ||
		    aserve_handle(t->a, &h, req, &type, ans, &len, &why) != 0)
			violation(t->worker, KPROTO_FROM_AUDIT, why);
		if (chan_send(t->fd, type, h.id, ans, len, -1) != 0)
			break;
	}
	free(req);
	free(ans);
	return NULL;
}

/* The trail, written here: its checkpoints signed by the first signing key. */
static int
atrail_open(const struct config *cfg, long await_pid, long mainpid,
    struct atrail *t)
{
	struct audit_opts o;
	const char *w = NULL;
	char why[512];
	int r;

	if (cfg->signing_key != NULL &&
	    (r = signkey_load(cfg->signing_key, &t->sign, &w)) != 0) {
		log_errx("config", "signing_key %s: %s", cfg->signing_key,
		    w != NULL ? w : err_str(r));
		return -1;
	}
	memset(&o, 0, sizeof(o));
	o.path = cfg->audit_path;
	o.mode = cfg->audit_fsync;
	o.queue = cfg->audit.queue;
	o.queue_refuse = 0;	/* the worker's queue refuses; this one waits */
	o.max_mb = cfg->audit.max_mb;
	o.checkpoint_records = cfg->audit.checkpoint_records;
	o.checkpoint_ms = cfg->audit.checkpoint_ms;
	o.syslog = cfg->audit.syslog;
	o.sign = t->sign;
	o.await_pid = await_pid;
	o.sink = 1;
	o.pid = mainpid;	/* the daemon's, as its service manager knows it */
	if (audit_open(&o, &t->a, why, sizeof(why)) != 0) {
		log_errx("audit", "%s", why);
		return -1;
	}
	if (pthread_create(&t->thread, NULL, atrail_main, t) != 0) {
		log_errx("audit", "cannot start the trail's thread");
		return -1;
	}
	return 0;
}

/* Serves the channels until the control channel closes. */
static void
serve(struct kserve *ks, struct pollfd *pf, const unsigned *roles, size_t n,
    pid_t worker, atomic_int *phase)
{
	struct chan_hdr h;
	uint8_t *req, *ans;
	const char *why;
	uint32_t type;
	size_t i, len;
	int r;

	if ((req = sodium_malloc(CHAN_MSG_MAX)) == NULL ||
	    (ans = sodium_malloc(CHAN_MSG_MAX)) == NULL)
		_exit(1);
	for (;;) {
		if (poll(pf, n, -1) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (i = 0; i < n; i++) {
			if (pf[i].fd == -1 || pf[i].revents == 0)
				continue;
			r = chan_recv(pf[i].fd, &h, req, CHAN_MSG_MAX, NULL, 0);
			if (r == 0 || (r == SL_ERR_IO && errno != ETIMEDOUT &&
			    errno != EAGAIN)) {
				if (roles[i] == KPROTO_FROM_CTL)
					return;		/* the worker is gone */
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			if (r == SL_ERR_IO)
				continue;
			if (r != 1)
				violation(worker, roles[i], "a malformed message");
			if (kserve_handle(ks, roles[i], &h, req, &type, ans,
			    &len, &why) != 0)
				violation(worker, roles[i], why);
			atomic_store(phase, kserve_phase(ks));
			sodium_memzero(req, h.len);
			r = chan_send(pf[i].fd, type, h.id, ans, len, -1);
			sodium_memzero(ans, len);
			if (r != 0 && roles[i] == KPROTO_FROM_CTL)
				return;
		}
	}
}

static void
child(const struct config *cfg, const int *fds, const unsigned *roles,
    size_t n, pid_t worker, int audit_fd, long await_pid, long mainpid)
{
	struct errlist errs = ERRLIST_INIT;
	struct kserve *ks = NULL;
	struct atrail t;
	atomic_int phase = KPROTO_START;
	int keep[KEYPROC_FDS_MAX + 1];
	struct pollfd *pf;
	struct rlimit rl;
	size_t i;

	proctitle_set("keys");
	/* Dies with the worker; stops at its word only, not at a group's signal. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != worker)
		_exit(1);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (i = 0; i < n && i < KEYPROC_FDS_MAX; i++)
		keep[i] = fds[i];
	keep[i] = audit_fd;
	close_others(keep, i + 1);
	if (kserve_new(cfg, &ks, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			log_errx("secrets", "%s", errs.msgs[i]);
		_exit(1);
	}
	errlist_free(&errs);
	memset(&t, 0, sizeof(t));
	t.fd = audit_fd;
	t.worker = worker;
	t.phase = &phase;
	if (atrail_open(cfg, await_pid, mainpid, &t) != 0)
		_exit(1);
	if ((pf = calloc(n, sizeof(*pf))) == NULL)
		_exit(1);
	for (i = 0; i < n; i++) {
		pf[i].fd = fds[i];
		pf[i].events = POLLIN;
	}
	{
		char why[256];

		if (confine_keys(why, sizeof(why)) != 0) {
			log_errx("keys", "%s", why);
			_exit(1);
		}
	}
	serve(ks, pf, roles, n, worker, &phase);
	/* The worker is gone: its last rounds, then the trail's end. */
	shutdown(audit_fd, SHUT_RD);
	pthread_join(t.thread, NULL);
	audit_close(t.a);	/* a last checkpoint */
	signkey_free(t.sign);
	kserve_free(ks);	/* wipes every key */
	_exit(0);
}

int
keyproc_start(const struct config *cfg, size_t nworkers, long await_pid,
    long mainpid, struct keyproc *kp, char *why, size_t why_len)
{
	size_t n = nworkers + 1, i;
	int *mine = NULL, *theirs = NULL, sv[2], av[2] = { -1, -1 };
	unsigned *roles = NULL;
	char w[KPROTO_WHY_MAX];
	pid_t pid, self = getpid();

	memset(kp, 0, sizeof(*kp));
	kp->pid = -1;
	if ((mine = calloc(n, sizeof(int))) == NULL ||
	    (theirs = calloc(n, sizeof(int))) == NULL ||
	    (roles = calloc(n, sizeof(*roles))) == NULL ||
	    (kp->workers = calloc(nworkers ? nworkers : 1,
	    sizeof(*kp->workers))) == NULL) {
		snprintf(why, why_len, "out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++)
		mine[i] = theirs[i] = -1;
	for (i = 0; i < n; i++) {
		if (chan_pair(sv) != 0) {
			snprintf(why, why_len, "socketpair: %s", strerror(errno));
			goto fail;
		}
		mine[i] = sv[0];
		theirs[i] = sv[1];
		roles[i] = i == 0 ? KPROTO_FROM_CTL : KPROTO_FROM_WORKER;
	}
	if (n > KEYPROC_FDS_MAX || chan_pair(av) != 0) {
		snprintf(why, why_len, "socketpair: %s", strerror(errno));
		goto fail;
	}
	if ((pid = fork()) == -1) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		for (i = 0; i < n; i++)
			close(mine[i]);
		close(av[0]);
		child(cfg, theirs, roles, n, self, av[1], await_pid, mainpid);
	}
	kp->pid = pid;
	for (i = 0; i < n; i++) {
		close(theirs[i]);
		theirs[i] = -1;
	}
	close(av[1]);
	av[1] = -1;
	if ((kp->ctl = kchan_new(mine[0], KPROTO_FROM_CTL)) == NULL ||
	    (kp->audit = kchan_new(av[0], KPROTO_FROM_AUDIT)) == NULL)
		goto nomem;
	mine[0] = -1;
	av[0] = -1;
	for (i = 0; i < nworkers; i++) {
		if ((kp->workers[i] = kchan_new(mine[i + 1],
		    KPROTO_FROM_WORKER)) == NULL)
			goto nomem;
		mine[i + 1] = -1;
		kp->nworkers++;
	}
	kclient_start(kp->ctl);
	if (kclient_hello(w) != 0) {
		snprintf(why, why_len, "the keys process did not start: %s", w);
		goto fail;
	}
	free(mine);
	free(theirs);
	free(roles);
	return 0;
 nomem:
	snprintf(why, why_len, "out of memory");
 fail:
	if (av[0] != -1)
		close(av[0]);
	if (av[1] != -1)
		close(av[1]);
	for (i = 0; mine != NULL && i < n; i++)
		if (mine[i] != -1)
			close(mine[i]);
	for (i = 0; theirs != NULL && i < n; i++)
		if (theirs[i] != -1)
			close(theirs[i]);
	free(mine);
	free(theirs);
	free(roles);
	keyproc_stop(kp);
	return -1;
}

int
keyproc_ready(struct keyproc *kp, char *why, size_t why_len)
{
	char w[KPROTO_WHY_MAX];

	if (kclient_ready(w) != 0) {
		snprintf(why, why_len, "%s", w);
		return -1;
	}
	return 0;
}

int
keyproc_is(const struct keyproc *kp, pid_t pid)
{
	return kp->pid > 0 && kp->pid == pid;
}

void
keyproc_stop(struct keyproc *kp)
{
	size_t i;
	int st;

	kclient_bind(NULL);
	kchan_free(kp->audit);		/* the trail's last rounds are in */
	kp->audit = NULL;
	for (i = 0; i < kp->nworkers; i++)
		kchan_free(kp->workers[i]);
	free(kp->workers);
	kp->workers = NULL;
	kp->nworkers = 0;
	if (kp->ctl != NULL) {
		kclient_stop();
		kchan_free(kp->ctl);	/* closed: the keys process exits */
		kp->ctl = NULL;
	}
	if (kp->pid > 0) {
		for (i = 0; i < KEYPROC_STOP_MS / 10; i++) {
			if (waitpid(kp->pid, &st, WNOHANG) != 0)
				break;
			usleep(10000);
		}
		if (i == KEYPROC_STOP_MS / 10) {
			kill(kp->pid, SIGKILL);
			waitpid(kp->pid, &st, 0);
		}
		kp->pid = -1;
	}
}
