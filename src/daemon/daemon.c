/* daemon.c: start-up, listeners, privileges, signals, reload and drain. */
#include "autoconf.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "util/fsvc.h"
#include "util/log.h"
#include "util/proctitle.h"
#include "conf/config.h"
#include "keys/idkeys.h"
#include "keys/secrets.h"
#include "keys/signkey.h"
#include "keys/tlsterm.h"
#include "keys/tlsup.h"
#include "audit/audit.h"
#include "loop/dirwatch.h"
#include "loop/mintcache.h"
#include "loop/spend.h"
#include "loop/state.h"
#include "dns/dnsmem.h"
#include "daemon/confine.h"
#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "daemon/monitor.h"
#include "daemon/observe.h"
#include "daemon/publish.h"
#include "daemon/sbstore.h"
#include "daemon/upgrade.h"
#include "daemon/worker.h"

/* What the DNS filter remembers per sandbox, and for how long past the TTL. */
#define DNSMEM_ENTRIES	4096
#define DNSMEM_GRACE_S	30

static int
listen_socket(struct daemon *d, const struct endpoint *ep, int type)
{
	int fd, one = 1;

	/* An upgrade: the predecessor's socket, with its queue of connections. */
	if ((fd = upgrade_take_inet(d, ep, type)) != -1)
		return fd;
	fd = socket(ep->ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* One socket per worker: the kernel spreads connections, no lock. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (ep->ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&ep->ss, ep->len) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 4096) == -1)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The DNS filter's sockets: UDP and TCP on every listen.dns endpoint. */
static int
open_dns(struct daemon *d, struct worker *w)
{
	const struct config *cfg = d->cfg;
	size_t i;

	if (cfg->ndns == 0)
		return 0;
	w->dns_udp = calloc(cfg->ndns, sizeof(int));
	w->dns_tcp = calloc(cfg->ndns, sizeof(int));
	if (w->dns_udp == NULL || w->dns_tcp == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < cfg->ndns; i++) {
		w->dns_udp[i] = listen_socket(d, &cfg->dns[i], SOCK_DGRAM);
		w->ndns_udp += w->dns_udp[i] != -1;
		if (w->dns_udp[i] == -1)
			goto fail;
		w->dns_tcp[i] = listen_socket(d, &cfg->dns[i], SOCK_STREAM);
		w->ndns_tcp += w->dns_tcp[i] != -1;
		if (w->dns_tcp[i] == -1)
			goto fail;
	}
	return 0;
 fail:
	log_errx("daemon", "cannot listen on %s (dns): %s", cfg->dns[i].text,
	    strerror(errno));
	return SL_ERR_IO;
}

static int
open_listeners(struct daemon *d, struct worker *w)
{
	const struct config *cfg = d->cfg;
	size_t i, n = cfg->ntransparent + cfg->nproxy;

	if ((w->lis = calloc(n ? n : 1, sizeof(*w->lis))) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		const struct endpoint *ep = i < cfg->ntransparent ?
		    &cfg->transparent[i] : &cfg->proxy[i - cfg->ntransparent];

		w->lis[i].kind = i < cfg->ntransparent ? LISTEN_TRANSPARENT :
		    LISTEN_PROXY;
		if ((w->lis[i].fd = listen_socket(d, ep, SOCK_STREAM)) == -1) {
			log_errx("daemon", "cannot listen on %s: %s", ep->text,
			    strerror(errno));
			w->nlis = i;
			return SL_ERR_IO;
		}
		w->nlis = i + 1;
	}
	return open_dns(d, w);
}

static int
drop_privileges(const char *user)
{
	struct passwd *pw;
	gid_t gid;

	if (user == NULL) {
		if (geteuid() != 0)
			return 0;	/* started as its user (systemd's User=) */
		user = getpwnam(CONFIG_USER_DEFAULT) != NULL ?
		    CONFIG_USER_DEFAULT : CONFIG_USER_FALLBACK;
	}
	if (strcmp(user, "root") == 0)
		return 0;	/* config_check_system warned */
	if ((pw = getpwnam(user)) == NULL) {
		log_errx("daemon", "user '%s': no such user", user);
		return SL_ERR_NOT_FOUND;
	}
	/*
	 * The group it was started with, unless root's (systemd's Group=,
	 * setpriv --regid): a firewall that exempts sluiced's own upstream
	 * connections by it (nftables "meta skgid") keeps matching them.
	 */
	gid = getgid() != 0 ? getgid() : pw->pw_gid;
	if (getuid() == pw->pw_uid && geteuid() == pw->pw_uid &&
	    getegid() == gid && pw->pw_uid != 0)
		return 0;	/* started as that user already */
	if (setgroups(1, &gid) == -1 ||
	    setresgid(gid, gid, gid) == -1 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) == -1) {
		log_errx("daemon", "cannot drop privileges to %s: %s", user,
		    strerror(errno));
		return SL_ERR_IO;
	}
	if (setuid(0) == 0 && pw->pw_uid != 0) {
		log_errx("daemon", "privileges could be regained after the drop");
		return SL_ERR_INTERNAL;
	}
	return 0;
}

static void
harden_process(void)
{
	struct rlimit rl;

	/* Keys and credentials must never land in a core file. */
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Each sandbox's CA key takes a locked page. */
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* A worker runs a new snapshot: answer the control requests that waited. */
static void
applied_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	uint64_t g, min = UINT64_MAX;
	size_t i;

	for (i = 0; i < d->nworkers; i++)
		if ((g = atomic_load(&d->workers[i].applied)) < min)
			min = g;
	if (min > d->generation)
		min = d->generation;
	if (min > d->applied) {
		d->applied = min;
		ctl_applied(d->ctl, min);
	}
}

static void
drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	size_t i;

	log_warnx("daemon", "drain time is up: closing the remaining connections");
	for (i = 0; i < d->nworkers; i++)
		worker_post_cmd(&d->workers[i], WORKER_CMD_STOP);
}

/* The service manager is told: serving, and how. */
static void
notify_ready(struct daemon *d)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving: %zu workers, "
	    "%zu policies, %zu sandboxes", d->nworkers, d->state->npolicies,
	    d->state->nsandboxes);
	notify_send(&d->notify, msg);
}

/* A reload begins (sd_notify(3): RELOADING with the monotonic time). */
static void
notify_reloading(struct daemon *d)
{
	struct timespec ts;
	char msg[96];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000 +
	    (unsigned long long)ts.tv_nsec / 1000);
	notify_send(&d->notify, msg);
}

/* A reload that is not the API's: SIGHUP, policy_dir changed. */
static void
reload_now(struct daemon *d, const char *cause)
{
	notify_reloading(d);
	publish_reload(d, cause, -1, NULL, NULL);
	notify_ready(d);
}

static void
policies_changed(void *arg)
{
	struct daemon *d = arg;

	if (!d->draining)
		reload_now(d, "watch");
}

/* watch_policies: asked for, so a folder that cannot be watched stops us. */
static int
watch_policies(struct daemon *d)
{
	if (!d->cfg->watch_policies)
		return 0;
	if ((d->policy_watch = dirwatch_new(d->base, d->cfg->policy_dir,
	    state_policy_file, policies_changed, d)) == NULL) {
		log_errx("daemon", "watch_policies: cannot watch %s: %s",
		    d->cfg->policy_dir, strerror(errno));
		return -1;
	}
	return 0;
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	if (sig == SIGUSR1) {
		audit_rotate(d->audit);
		return;
	}
	if (sig == SIGHUP) {
		reload_now(d, "sighup");
		return;
	}
	if (sig == SIGUSR2) {
		char why[256];

		if (upgrade_begin(d, why, sizeof(why)) != 0)
			log_errx("upgrade", "SIGUSR2: no upgrade: %s", why);
		return;
	}
	if (d->draining) {
		log_info("daemon", "second signal: closing everything now");
		drain_timeout_cb(-1, 0, d);
		return;
	}
	if (upgrade_stage(d) != UPGRADE_HANDED)
		notify_send(&d->notify, "STOPPING=1\nSTATUS=draining");
	daemon_drain(d, "a signal");
}

void
daemon_drain(struct daemon *d, const char *why)
{
	struct timeval tv;
	size_t i;

	if (d->draining)
		return;
	d->draining = 1;
	log_info("daemon", "draining (%s): no new connections, waiting up to "
	    "%u ms", why, d->cfg->timeouts.drain);
	for (i = 0; i < d->nworkers; i++)
		worker_post_cmd(&d->workers[i], WORKER_CMD_DRAIN);
	tv.tv_sec = d->cfg->timeouts.drain / 1000;
	tv.tv_usec = (d->cfg->timeouts.drain % 1000) * 1000;
	if ((d->drain_timer = evtimer_new(d->base, drain_timeout_cb, d)) != NULL)
		evtimer_add(d->drain_timer, &tv);
}

static void
worker_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	/* An answer on its way (the upgrade's, say) goes out first. */
	static const struct timeval flush = { 0, 200000 };

	if (atomic_load(&d->finished) == d->nworkers)
		event_base_loopexit(d->base, d->ctl != NULL &&
		    ctl_answering(d->ctl) ? &flush : NULL);
}

/*
 * A child ended: when it is the keys process, every key is gone with it
 * and nothing could be served safely: the daemon stops.
 */
static void
keys_died_cb(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	int st;

	if (d->keys.pid <= 0 || waitpid(d->keys.pid, &st, WNOHANG) !=
	    d->keys.pid)
		return;
	d->keys.pid = -1;
	log_errx("keys", "the keys process ended (%s %d): stopping",
	    WIFEXITED(st) ? "status" : "signal",
	    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	d->keys_lost = 1;
	if (d->nworkers > 0 && d->workers != NULL) {
		size_t i;

		for (i = 0; i < d->nworkers; i++)
			worker_post_cmd(&d->workers[i], WORKER_CMD_STOP);
	} else
		event_base_loopexit(d->base, NULL);
}

/*
 * The audit queue: the keys process writes the trail (keyproc.h), this
 * process queues records and waits for them as audit.h says.
 */
static int
daemon_open_audit(struct daemon *d)
{
	const struct config *cfg = d->cfg;
	struct audit_opts o;
	char why[512];
	int r;

	memset(&o, 0, sizeof(o));
	o.path = cfg->audit_path;
	o.mode = cfg->audit_fsync;
	o.queue = cfg->audit.queue;
	o.queue_refuse = cfg->audit.queue_refuse;
	o.max_mb = cfg->audit.max_mb;
	o.checkpoint_records = cfg->audit.checkpoint_records;
	o.checkpoint_ms = cfg->audit.checkpoint_ms;
	o.syslog = cfg->audit.syslog;
	/* Chained, signed and written by the keys process: rounds go there. */
	o.chan = d->keys.audit;
	o.await_pid = upgrade_from(d);	/* its predecessor writes it for now */
	if ((r = audit_open(&o, &d->audit, why, sizeof(why))) != 0)
		log_errx("audit", "%s", why);
	return r;
}

static unsigned
worker_count(const struct daemon *d)
{
	const struct config *cfg = d->cfg;
	const struct endpoint *ep = cfg->ntransparent > 0 ?
	    &cfg->transparent[0] : cfg->nproxy > 0 ? &cfg->proxy[0] : NULL;
	size_t up = ep != NULL ? upgrade_count(d, ep, SOCK_STREAM) : 0;
	long n;

	/* Every inherited socket needs a worker, or its queue is lost. */
	if (up > 0) {
		if (cfg->workers != 0 && cfg->workers != up)
			log_warnx("upgrade", "workers: %zu, as the process this "
			    "one took over from had; a restart makes it %u",
			    up, cfg->workers);
		return (unsigned)(up > 64 ? 64 : up);
	}
	if (cfg->workers != 0)
		return cfg->workers;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

/*
 * libevent makes the BIO method of its OpenSSL filter bufferevents on
 * first use, unguarded: two workers' first interceptions at once could
 * both make it, and one copy leaks.  One filter made and freed here,
 * before any worker runs, makes it once.
 */
static int
prime_ssl_filter(struct event_base *base, SSL_CTX *ctx)
{
	struct bufferevent *under, *f;
	SSL *ssl;

	if ((ssl = SSL_new(ctx)) == NULL)
		return -1;
	if ((under = bufferevent_socket_new(base, -1, 0)) == NULL) {
		SSL_free(ssl);
		return -1;
	}
	if ((f = bufferevent_openssl_filter_new(base, under, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		bufferevent_free(under);
		return -1;
	}
	bufferevent_free(f);	/* with under and ssl */
	return 0;
}

int
daemon_run(struct config *cfg, char *const *argv)
{
	struct errlist errs = ERRLIST_INIT;
	struct daemon d;
	struct event *sigs[6] = { NULL };
	const int signums[6] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, 0 };
	ssize_t n;
	size_t i, started = 0;
	char why[512];
	int status = 1, r;

	memset(&d, 0, sizeof(d));
	d.cfg = cfg;
	d.argv = argv;
	d.mon = -1;
	/* An upgrade runs the binary now at this path (a package replaced it). */
	if ((n = readlink("/proc/self/exe", d.exe, sizeof(d.exe) - 1)) <= 0)
		snprintf(d.exe, sizeof(d.exe), "%s", argv[0]);
	else
		d.exe[n] = '\0';
	d.generation = 1;
	d.applied = 1;
	d.started = time(NULL);
	harden_process();
	if (upgrade_inherit(&d) != 0)
		goto out;
	/* What --check checks on this host stops the start too. */
	{
		struct errlist warns = ERRLIST_INIT;

		r = config_check_system(cfg, &errs, &warns);
		for (i = 0; i < warns.n; i++)
			log_warnx("config", "%s", warns.msgs[i]);
		for (i = 0; i < errs.n; i++)
			log_errx("config", "%s", errs.msgs[i]);
		errlist_free(&warns);
		if (r != 0)
			goto out;
	}
	/* What outlives a worker process is the monitor's (monitor.h). */
	d.nworkers = worker_count(&d);
	if ((d.workers = calloc(d.nworkers, sizeof(*d.workers))) == NULL)
		goto out;
	for (i = 0; i < d.nworkers; i++)
		if (open_listeners(&d, &d.workers[i]) != 0)
			goto out;
	if (ctl_open(&d, &d.ctl) != 0)
		goto out;
	if (monitor_run(&d, &status) != 0)
		goto out;	/* the monitor, once the daemon is over */
	/* The worker process, forked by the monitor. */
	proctitle_set("worker 0");
	if ((d.base = event_base_new()) == NULL)
		goto out;
	notify_open(&d.notify, d.base, (long)d.mainpid);
	/* Before any key is loaded: from here on they are the keys process's. */
	if (keyproc_start(cfg, d.nworkers, upgrade_from(&d), (long)d.mainpid,
	    &d.keys, why, sizeof(why)) != 0) {
		log_errx("keys", "%s", why);
		goto out;
	}
	{
		uint8_t kp[4] = { (uint8_t)d.keys.pid, (uint8_t)(d.keys.pid >> 8),
		    (uint8_t)(d.keys.pid >> 16), (uint8_t)(d.keys.pid >> 24) };

		monitor_tell(&d, MON_KEYS, kp, sizeof(kp));
	}
	d.keys_ev = evsignal_new(d.base, SIGCHLD, keys_died_cb, &d);
	if (d.keys_ev == NULL || evsignal_add(d.keys_ev, NULL) != 0)
		goto out;
	if (state_build(cfg, NULL, d.generation, &d.state, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			log_errx("config", "%s", errs.msgs[i]);
		goto out;
	}
	if (idkeys_load(cfg, &d.state->idkeys, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			log_errx("config", "%s", errs.msgs[i]);
		goto out;
	}
	if ((r = state_mint_static_cas(cfg, d.state)) != 0) {
		log_errx("config", "cannot mint the CAs of the sandboxes in %s: "
		    "%s%s", cfg->path, err_str(r), r == SL_ERR_IO ?
		    " (raise RLIMIT_MEMLOCK)" : "");
		goto out;
	}
	/* Interception's TLS contexts; a CA bundle is read when first needed. */
	if ((d.tls_down = tlsterm_ctx_new()) == NULL ||
	    tlsup_new(cfg->upstream_ca, &d.tls_up) != 0 ||
	    prime_ssl_filter(d.base, d.tls_down) != 0) {
		log_openssl("daemon", "cannot set up TLS for interception");
		goto out;
	}
	if (daemon_open_audit(&d) != 0)
		goto out;
	if (daemon_secrets_open(&d, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			log_errx("secrets", "%s", errs.msgs[i]);
		goto out;
	}
	if ((d.dnsmem = dnsmem_new(DNSMEM_ENTRIES, DNSMEM_GRACE_S)) == NULL ||
	    (d.spend = spend_new()) == NULL ||
	    (d.mints = mintcache_new()) == NULL)
		goto out;
	/* The API's sandboxes, CAs and all, before any listener accepts. */
	sbstore_open(&d);
	sbstore_static_cas(&d);
	sbstore_restore(&d);
	/* The folders are watched as root: the user may not read them. */
	if (daemon_secrets_watch(&d) != 0 || watch_policies(&d) != 0)
		goto out;
	confine_drop_bounding();
	if (drop_privileges(cfg->user) != 0)
		goto out;
	/* A change of uid resets it (to fs.suid_dumpable): again. */
#ifndef SLUICE_SANITIZERS
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#else
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);	/* LeakSanitizer traces itself */
#endif
	/* The monitor gone, no one would restart or stop this process. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != d.mainpid)
		goto out;
	d.worker_done = event_new(d.base, -1, EV_PERSIST, worker_done_cb, &d);
	d.applied_ev = event_new(d.base, -1, EV_PERSIST, applied_cb, &d);
	if (d.worker_done == NULL || d.applied_ev == NULL)
		goto out;
	for (i = 0; signums[i] != 0; i++) {
		sigs[i] = evsignal_new(d.base, signums[i], signal_cb, &d);
		evsignal_add(sigs[i], NULL);
	}
	monitor_signals_ready();	/* one that came meanwhile is handled now */
	for (i = 0; i < d.nworkers; i++)
		if (worker_init(&d.workers[i], &d, (unsigned)i) != 0) {
			log_errx("daemon", "cannot set up worker %zu", i);
			goto out;
		}
	/* The start's requests are over: the keys process admits no more. */
	if (keyproc_ready(&d.keys, why, sizeof(why)) != 0) {
		log_errx("keys", "%s", why);
		goto out;
	}
	if (ctl_start(d.ctl) != 0)
		goto out;
	/*
	 * Set up: from here on only the data path's system calls, and files
	 * through the monitor (fsvc.h).
	 */
	fsvc_remote(d.mon);
	if (confine_worker(why, sizeof(why)) != 0) {
		log_errx("daemon", "cannot confine the worker process: %s", why);
		goto out;
	}
	for (started = 0; started < d.nworkers; started++)
		if (worker_start(&d.workers[started]) != 0)
			goto out;
	log_info("daemon", "sluiced %s running: %zu workers, %zu policies",
	    PACKAGE_VERSION, d.nworkers, d.state->npolicies);
	notify_ready(&d);
	monitor_tell(&d, MON_READY, NULL, 0);
	if (upgrade_announce(&d) != 0)
		goto out;
	event_base_loop(d.base, EVLOOP_NO_EXIT_ON_EMPTY);
	status = d.keys_lost ? MONITOR_EXIT_FATAL : 0;
	log_info("daemon", "stopped");
 out:
	if (status != 0 && started > 0)
		for (i = 0; i < started; i++)
			worker_post_cmd(&d.workers[i], WORKER_CMD_STOP);
	for (i = 0; i < started; i++)
		worker_join(&d.workers[i]);
	audit_notify_clear(d.audit);
	for (i = 0; d.workers != NULL && i < d.nworkers; i++)
		worker_free(&d.workers[i]);
	free(d.workers);
	for (i = 0; i < 6; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	if (d.worker_done != NULL)
		event_free(d.worker_done);
	if (d.drain_timer != NULL)
		event_free(d.drain_timer);
	upgrade_free(&d);
	upgrade_inherit_free(&d);
	ctl_free(d.ctl);
	notify_close(&d.notify);
	daemon_secrets_close(&d);
	dirwatch_free(d.policy_watch);
	observe_close(&d);
	SSL_CTX_free(d.tls_down);
	tlsup_free(d.tls_up);
	if (d.applied_ev != NULL)
		event_free(d.applied_ev);
	audit_close(d.audit);
	dnsmem_free(d.dnsmem);
	spend_free(d.spend);
	mintcache_free(d.mints);
	state_unref(d.state);		/* drops the CAs there */
	if (d.keys_ev != NULL)
		event_free(d.keys_ev);
	keyproc_stop(&d.keys);
	errlist_free(&errs);
	if (d.base != NULL)
		event_base_free(d.base);
	if (d.mon != -1)
		close(d.mon);
	return status;
}
