/*
 * publish.c: putting a new snapshot in force.  Every change of what the
 * workers decide by goes through here: a reload (policies, secrets and
 * signing keys read again), a sandbox or policy changed through the
 * control API, a secret folder that changed.  The new snapshot is built
 * and sealed beside the one in force, then handed to every worker; the
 * old one goes when its last user does.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"
#include "util/log.h"
#include "keys/idkeys.h"
#include "keys/secrets.h"
#include "audit/audit.h"
#include "conf/policy.h"
#include "loop/state.h"
#include "daemon/daemon.h"
#include "daemon/observe.h"
#include "daemon/publish.h"
#include "daemon/worker.h"

uint64_t
publish_state(struct daemon *d, struct state *st)
{
	size_t i;

	d->generation = st->generation;
	state_unref(d->state);
	d->state = st;
	for (i = 0; i < d->nworkers; i++)
		worker_post_state(&d->workers[i], st);
	observe_arm(d);
	return st->generation;
}

static void
audit_policy_change(struct daemon *d, json_t *rec, const char *cause,
    long uid)
{
	if (rec == NULL)
		return;
	json_object_set_new(rec, "cause", json_string(cause));
	json_object_set_new(rec, "generation",
	    json_integer((json_int_t)d->state->generation));
	if (uid >= 0)
		json_object_set_new(rec, "uid", json_integer(uid));
	audit_write(d->audit, "policy_change", rec);
}

/* One policy_change record for each named policy a reload changed. */
static void
audit_reload(struct daemon *d, const struct state *before, const char *cause,
    long uid)
{
	const struct state *now = d->state;
	const struct policy *p, *was;
	size_t i;

	for (i = 0; i < now->npolicies; i++) {
		p = now->policies[i];
		was = state_policy(before, p->name);
		if (was != NULL && was->revision == p->revision)
			continue;
		audit_policy_change(d, json_pack("{s:s, s:I, s:I, s:s}",
		    "policy", p->name, "revision", (json_int_t)p->revision,
		    "previous_revision", (json_int_t)(was ? was->revision : 0),
		    "file", p->file), cause, uid);
	}
	for (i = 0; i < before->npolicies; i++) {
		was = before->policies[i];
		if (state_policy(now, was->name) == NULL)
			audit_policy_change(d, json_pack("{s:s, s:n, s:I}",
			    "policy", was->name, "revision",
			    "previous_revision", (json_int_t)was->revision),
			    cause, uid);
	}
}

int
publish_reload(struct daemon *d, const char *cause, long uid,
    struct errlist *errs, struct errlist *serrs)
{
	struct errlist mine = ERRLIST_INIT, smine = ERRLIST_INIT;
	struct errlist *e = errs != NULL ? errs : &mine;
	struct errlist *se = serrs != NULL ? serrs : &smine;
	struct secret_set *set = NULL;
	struct idkeys *keys = NULL;
	struct state *st = NULL, *before;
	size_t i;

	if (state_build(d->cfg, d->state, d->generation + 1, &st, e) != 0) {
		for (i = 0; errs == NULL && i < e->n; i++)
			log_errx("reload", "%s", e->msgs[i]);
		log_errx("reload", "policies not reloaded (%s): %zu error(s); "
		    "the policies in force stay", cause, e->n);
		errlist_free(&mine);
		d->reloads_failed++;
		return SL_ERR_INVALID;
	}
	if (d->secrets != NULL && daemon_secrets_load(d, st, "reload", &set,
	    se) == 0 && set != NULL) {
		secret_set_unref(st->secrets);
		st->secrets = set;	/* transferred */
	}
	/* The signing keys again: a rotation publishes old and new. */
	if (idkeys_load(d->cfg, &keys, se) == 0) {
		idkeys_unref(st->idkeys);
		st->idkeys = keys;	/* transferred */
	}
	for (i = 0; serrs == NULL && i < se->n; i++)
		log_errx("reload", "%s", se->msgs[i]);
	errlist_free(&smine);
	before = state_ref(d->state);
	publish_state(d, st);
	audit_reload(d, before, cause, uid);
	state_unref(before);
	d->reloads_ok++;
	log_info("reload", "policies reloaded (%s): %zu policies, generation "
	    "%llu", cause, st->npolicies, (unsigned long long)st->generation);
	return 0;
}

int
publish_secrets(struct daemon *d, struct secret_set *set, uint64_t *gen)
{
	struct errlist errs = ERRLIST_INIT;
	struct state *st = NULL;
	int r;

	if ((r = state_clone(d->state, d->generation + 1, &st)) != 0) {
		secret_set_unref(set);
		return r;
	}
	secret_set_unref(st->secrets);
	st->secrets = set;	/* transferred */
	if ((r = state_seal(st, d->state, &errs)) != 0) {
		errlist_free(&errs);
		state_unref(st);
		return r;
	}
	*gen = publish_state(d, st);
	return 0;
}
