/*
 * daemon_secrets.c: the daemon's side of the secret store.  secret_dir is
 * the one source of secrets: it is read at start and on reload, watched
 * (loop/dirwatch.h: a rename into place is the atomic update), and the control
 * API writes its files too.  Every change becomes a new snapshot with a
 * new secret set, and an audit record.
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "util/log.h"
#include "conf/config.h"
#include "keys/secrets.h"
#include "audit/audit.h"
#include "loop/dirwatch.h"
#include "loop/state.h"
#include "daemon/daemon.h"
#include "daemon/publish.h"

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
daemon_secrets_load(struct daemon *d, const struct state *judge,
    const char *cause, struct secret_set **out, struct errlist *errs)
{
	struct secret_change *ch = NULL;
	struct secret_set *set = NULL;
	size_t nch = 0, i;
	int r;

	if ((r = secret_store_load(d->secrets, d->state->secrets, &set, &ch,
	    &nch, errs)) != 0)
		return r;
	if (nch > 0 && (r = state_check_secrets(judge, set, errs)) != 0) {
		errlist_add(errs, d->secrets->dir, 0, 0, "the secrets in "
		    "force stay");
		free(ch);
		secret_set_unref(set);
		return r;
	}
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
secrets_changed(void *arg)
{
	struct errlist errs = ERRLIST_INIT;
	struct daemon *d = arg;
	struct secret_set *set = NULL;
	uint64_t gen;
	size_t i;

	if (daemon_secrets_load(d, d->state, "file", &set, &errs) == 0 && set != NULL &&
	    publish_secrets(d, set, &gen) != 0)
		log_errx("secrets", "cannot put the changed secrets in force");
	for (i = 0; i < errs.n; i++) {
		log_errx("secrets", "%s", errs.msgs[i]);
		audit_write(d->audit, "secret_refused", json_pack("{s:n, s:s,"
		    " s:s}", "sandbox", "error", errs.msgs[i], "cause", "file"));
	}
	errlist_free(&errs);
}

/* What secret_dir is read for: NAME.sealed, no dot (our temporary files). */
static int
sealed_name(const char *name)
{
	size_t len = strlen(name);

	return name[0] != '.' && len > 7 &&
	    strcmp(name + len - 7, ".sealed") == 0;
}

int
daemon_secrets_open(struct daemon *d, struct errlist *errs)
{
	struct secret_set *set = NULL;
	size_t n;
	int r;

	if ((r = secret_store_new(d->cfg, &d->secrets, errs)) != 0 ||
	    d->secrets == NULL)
		return r;
	n = errs->n;
	if ((r = daemon_secrets_load(d, d->state, "start", &set, errs)) != 0)
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
	if ((d->secret_watch = dirwatch_new(d->base, d->secrets->dir,
	    sealed_name, secrets_changed, d)) == NULL) {
		if (errno == ENOMEM)
			return SL_ERR_NOMEM;
		log_warnx("secrets", "cannot watch %s (%s); changes apply on "
		    "reload only", d->secrets->dir, strerror(errno));
	}
	return 0;
}

void
daemon_secrets_close(struct daemon *d)
{
	dirwatch_free(d->secret_watch);
	d->secret_watch = NULL;
	secret_store_free(d->secrets);
	d->secrets = NULL;
}
