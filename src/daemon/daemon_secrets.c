/*
 * daemon_secrets.c: the daemon's side of the secret store.  secret_dir is
 * the one source of secrets: it is read at start and on reload, watched
 * with inotify (a rename into place is the atomic update), and the control
 * API writes its files too.  Every change becomes a new snapshot with a
 * new secret set, and an audit record.
 */
#include "autoconf.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "util/log.h"
#include "conf/config.h"
#include "keys/secrets.h"
#include "audit/audit.h"
#include "loop/state.h"
#include "daemon/daemon.h"
#include "daemon/publish.h"

#define RESCAN_DELAY_MS	50	/* events of one rename or write come together */

void
daemon_audit_secret(struct daemon *d, const struct secret *old,
    const struct secret *new, const char *cause, long uid)
{
	const struct secret *s = new != NULL ? new : old;
	json_t *rec, *hosts;
	size_t i;

	if ((hosts = json_array()) == NULL)
		return;
	for (i = 0; i < s->nhosts; i++)
		json_array_append_new(hosts, json_string(s->hosts[i]));
	rec = json_pack("{s:n, s:s, s:I, s:s, s:s, s:o, s:s}", "sandbox",
	    "secret", s->name, "version", (json_int_t)s->version,
	    "fingerprint", s->fp, "key_id", s->keyid, "hosts", hosts,
	    "cause", cause);
	if (rec == NULL)
		return;
	if (new != NULL && old != NULL) {
		json_object_set_new(rec, "previous_version",
		    json_integer((json_int_t)old->version));
		json_object_set_new(rec, "previous_fingerprint",
		    json_string(old->fp));
	}
	if (uid >= 0)
		json_object_set_new(rec, "uid", json_integer(uid));
	log_info("secrets", "%s '%s' version %llu (%s)", new == NULL ?
	    "removed" : old == NULL ? "added" : "rotated", s->name,
	    (unsigned long long)s->version, cause);
	audit_write(d->audit, new != NULL ? "secret_rotate" : "secret_delete",
	    rec);
}

int
daemon_secrets_load(struct daemon *d, const char *cause,
    struct secret_set **out, struct errlist *errs)
{
	struct secret_change *ch = NULL;
	struct secret_set *set = NULL;
	size_t nch = 0, i;
	int r;

	if ((r = secret_store_load(d->secrets, d->state->secrets, &set, &ch,
	    &nch, errs)) != 0)
		return r;
	for (i = 0; i < nch; i++)
		daemon_audit_secret(d, ch[i].old, ch[i].new, cause, -1);
	free(ch);
	if (nch == 0) {
		secret_set_unref(set);
		set = NULL;
	}
	*out = set;
	return 0;
}

/* The folder changed: read it again and put what changed in force. */
static void
rescan_cb(evutil_socket_t fd, short what, void *arg)
{
	struct errlist errs = ERRLIST_INIT;
	struct daemon *d = arg;
	struct secret_set *set = NULL;
	uint64_t gen;
	size_t i;

	if (daemon_secrets_load(d, "file", &set, &errs) == 0 && set != NULL &&
	    publish_secrets(d, set, &gen) != 0)
		log_errx("secrets", "cannot put the changed secrets in force");
	for (i = 0; i < errs.n; i++) {
		log_errx("secrets", "%s", errs.msgs[i]);
		audit_write(d->audit, "secret_refused", json_pack("{s:n, s:s,"
		    " s:s}", "sandbox", "error", errs.msgs[i], "cause", "file"));
	}
	errlist_free(&errs);
}

static void
inotify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	struct timeval tv = { 0, RESCAN_DELAY_MS * 1000 };
	ssize_t n;
	size_t off, len;
	int relevant = 0;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (off = 0; off + sizeof(*ev) <= (size_t)n;
		    off += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)(buf + off);
			len = ev->len > 0 ? strlen(ev->name) : 0;
			/* Our own temporary files start with a dot. */
			if ((ev->mask & IN_Q_OVERFLOW) || (len > 7 &&
			    ev->name[0] != '.' &&
			    strcmp(ev->name + len - 7, ".sealed") == 0))
				relevant = 1;
		}
	if (relevant)
		evtimer_add(d->rescan_ev, &tv);
}

int
daemon_secrets_open(struct daemon *d, struct errlist *errs)
{
	struct secret_set *set = NULL;
	size_t n;
	int r;

	d->inotify = -1;
	if ((r = secret_store_new(d->cfg, &d->secrets, errs)) != 0 ||
	    d->secrets == NULL)
		return r;
	n = errs->n;
	if ((r = daemon_secrets_load(d, "start", &set, errs)) != 0)
		return r;
	if (errs->n > n) {
		secret_set_unref(set);
		return SL_ERR_INVALID;
	}
	if (set != NULL) {	/* not yet handed to anyone */
		secret_set_unref(d->state->secrets);
		d->state->secrets = set;
	}
	return 0;
}

int
daemon_secrets_watch(struct daemon *d)
{
	if (d->secrets == NULL)
		return 0;
	if ((d->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
	    inotify_add_watch(d->inotify, d->secrets->dir, IN_CLOSE_WRITE |
	    IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR) < 0) {
		log_warnx("secrets", "cannot watch %s (%s); changes apply on "
		    "reload only", d->secrets->dir, strerror(errno));
		return 0;
	}
	d->inotify_ev = event_new(d->base, d->inotify, EV_READ | EV_PERSIST,
	    inotify_cb, d);
	d->rescan_ev = evtimer_new(d->base, rescan_cb, d);
	if (d->inotify_ev == NULL || d->rescan_ev == NULL ||
	    event_add(d->inotify_ev, NULL) != 0)
		return SL_ERR_NOMEM;
	return 0;
}

void
daemon_secrets_close(struct daemon *d)
{
	if (d->inotify_ev != NULL)
		event_free(d->inotify_ev);
	if (d->rescan_ev != NULL)
		event_free(d->rescan_ev);
	if (d->inotify >= 0)
		close(d->inotify);
	d->inotify = -1;
	secret_store_free(d->secrets);
	d->secrets = NULL;
}
