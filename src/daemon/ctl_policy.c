/*
 * ctl_policy.c: /v1/policies and /v1/reload.  policy_dir stays the one
 * source of named policies: a PUT writes the file, then applies it, so a
 * later reload reads back what the API put.
 */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fsvc.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/secrets.h"
#include "loop/state.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/publish.h"

static json_t *
policy_json(const struct state *st, const struct policy *p)
{
	char hex[2 * sizeof(p->digest) + 1];
	size_t i, users = 0;

	for (i = 0; i < sizeof(p->digest); i++)
		snprintf(hex + 2 * i, 3, "%02x", p->digest[i]);
	for (i = 0; i < st->nsandboxes; i++)
		if (st->sandboxes[i].policy == p)
			users++;
	return json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:b}",
	    "name", p->name, "revision", (json_int_t)p->revision,
	    "file", p->file, "digest", hex, "sandboxes", (json_int_t)users,
	    "intercepts", (json_int_t)p->nintercepts,
	    "default_allow", p->default_allow);
}

static void
list_policies(struct daemon *d, struct ctl_resp *r)
{
	const struct state *st = d->state;
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr != NULL && i < st->npolicies; i++)
		if (json_array_append_new(arr,
		    policy_json(st, st->policies[i])) != 0) {
			json_decref(arr);
			arr = NULL;
		}
	ctl_reply_json(r, 200, arr == NULL ? NULL : json_pack("{s:I, s:o}",
	    "generation", (json_int_t)st->generation, "policies", arr));
}

int
ctl_write_atomic(const char *path, const char *buf, size_t len)
{
	return fsvc_write(path, buf, len, 0644);
}

/* Where the policy named name lives (or will): its own file, else NAME.yaml. */
static char *
policy_path(struct daemon *d, const char *name)
{
	const struct policy *old = state_policy(d->state, name);
	const char *dir = d->cfg->policy_dir;
	size_t dl = strlen(dir);
	char *path;

	if (old != NULL && strncmp(old->file, dir, dl) == 0 &&
	    old->file[dl] == '/' && strchr(old->file + dl + 1, '/') == NULL)
		return strdup(old->file);
	if (asprintf(&path, "%s/%s.yaml", dir, name) < 0)
		return NULL;
	return path;
}

static void
put_policy(struct daemon *d, const char *name, const struct ctl_req *q,
    struct ctl_resp *r)
{
	struct errlist errs = ERRLIST_INIT;
	struct policy *p = NULL;
	struct state *st = NULL;
	const struct policy *old;
	uint64_t oldrev = 0, gen;
	char *path = NULL, label[128];
	int created;

	if (q->bodylen == 0) {
		ctl_reply_error(r, 400, NULL, "the body must be the policy (YAML "
		    "or JSON)");
		return;
	}
	snprintf(label, sizeof(label), "PUT /v1/policies/%s", name);
	if (policy_parse(label, q->body, q->bodylen, &p, &errs) != 0) {
		ctl_reply_error(r, 400, &errs, "the policy is invalid");
		goto out;
	}
	if (strcmp(p->name, name) != 0) {
		ctl_reply_error(r, 400, NULL, "the policy is named '%s', the "
		    "path '%s'", p->name, name);
		goto out;
	}
	old = state_policy(d->state, name);
	created = old == NULL;
	oldrev = old != NULL ? old->revision : 0;
	if ((path = policy_path(d, name)) == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		goto out;
	}
	free(p->file);
	if ((p->file = strdup(path)) == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		goto out;
	}
	if (state_clone(d->state, d->generation + 1, &st) != 0 ||
	    state_put_policy(st, policy_ref(p), d->state) != 0 ||
	    state_seal(st, d->state, &errs) != 0) {
		ctl_reply_error(r, 500, &errs, "cannot build the new state");
		goto out;
	}
	if (ctl_write_atomic(path, q->body, q->bodylen) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot write %s: %s; nothing "
		    "changed", path, strerror(errno));
		goto out;
	}
	gen = publish_state(d, st);
	st = NULL;
	ctl_audit(d, "policy_change", q->uid, json_pack("{s:s, s:I, s:I, s:s,"
	    " s:I}", "policy", name, "revision", (json_int_t)p->revision,
	    "previous_revision", (json_int_t)oldrev, "file", path,
	    "generation", (json_int_t)gen));
	ctl_reply_json(r, created ? 201 : 200, policy_json(d->state, p));
	r->wait_gen = gen;
 out:
	state_unref(st);
	policy_free(p);
	free(path);
	errlist_free(&errs);
}

static void
reload(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	struct errlist errs = ERRLIST_INIT, serrs = ERRLIST_INIT;

	if (publish_reload(d, "reload", (long)q->uid, &errs, &serrs) != 0) {
		ctl_reply_error(r, 409, &errs, "policies not reloaded: %zu "
		    "error(s); the policies in force stay", errs.n);
	} else {
		if (serrs.n > 0)
			ctl_reply_error(r, 409, &serrs, "reloaded, but %zu secret "
			    "file(s) were refused; their versions in force stay",
			    serrs.n);
		else
			ctl_reply_json(r, 200, json_pack("{s:I, s:I, s:I}",
			    "generation", (json_int_t)d->state->generation,
			    "policies", (json_int_t)d->state->npolicies,
			    "secrets", (json_int_t)(d->state->secrets ?
			    d->state->secrets->n : 0)));
		r->wait_gen = d->state->generation;
	}
	errlist_free(&errs);
	errlist_free(&serrs);
}

int
ctl_policies(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	const struct policy *p;
	const char *name;

	if (strcmp(q->path, "/v1/reload") == 0) {
		if (strcmp(q->method, "POST") == 0)
			reload(d, q, r);
		else
			ctl_reply_method(r, "POST");
		return 1;
	}
	if (strcmp(q->path, "/v1/policies") == 0) {
		if (strcmp(q->method, "GET") == 0)
			list_policies(d, r);
		else
			ctl_reply_method(r, "GET");
		return 1;
	}
	if (strncmp(q->path, "/v1/policies/", 13) != 0)
		return 0;
	name = q->path + 13;
	if (!policy_name_valid(name)) {
		ctl_reply_error(r, 400, NULL, "bad policy name in the path");
		return 1;
	}
	if (strcmp(q->method, "GET") == 0) {
		if ((p = state_policy(d->state, name)) == NULL)
			ctl_reply_error(r, 404, NULL, "no policy named '%s'", name);
		else
			ctl_reply_json(r, 200, policy_json(d->state, p));
	} else if (strcmp(q->method, "PUT") == 0)
		put_policy(d, name, q, r);
	else
		ctl_reply_method(r, "GET, PUT");
	return 1;
}
