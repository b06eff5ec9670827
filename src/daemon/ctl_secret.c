/*
 * ctl_secret.c: /v1/secrets.  Answers carry names, versions, fingerprints
 * and bound hosts, never a value.  A PUT takes a sealed blob as it is (the
 * body), opens it, writes it into secret_dir as NAME.sealed and puts it in
 * force; the folder watcher then sees a file it already has.  A DELETE
 * removes the file and the secret.
 */
#include "autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/fsvc.h"
#include "util/names.h"
#include "conf/budget.h"
#include "conf/config.h"
#include "keys/placeholder.h"
#include "keys/sealed.h"
#include "keys/secrets.h"
#include "loop/spend.h"
#include "loop/state.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/publish.h"

/* {"limit", "used"} of one window of b, or NULL when b has no limit there. */
static json_t *
window_json(struct daemon *d, const struct budget_rule *b,
    const char *sandbox, enum spend_window w)
{
	struct spend_item it = { sandbox, b->secret, w,
	    w == SPEND_MINUTE ? b->per_minute : b->per_day };

	if (it.limit == 0)
		return json_null();
	return json_pack("{s:I, s:I}", "limit", (json_int_t)it.limit, "used",
	    (json_int_t)spend_used(d->spend, &it, mono_ms()));
}

static json_t *
budget_json(struct daemon *d, const struct budget_rule *b,
    const char *sandbox)
{
	return json_pack("{s:s, s:o, s:o}", "secret", b->secret,
	    "requests_per_minute", window_json(d, b, sandbox, SPEND_MINUTE),
	    "requests_per_day", window_json(d, b, sandbox, SPEND_DAY));
}

json_t *
ctl_budgets_json(struct daemon *d, const struct budget_list *l,
    const char *sandbox)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr != NULL && i < l->n; i++)
		json_array_append_new(arr, budget_json(d, &l->v[i], sandbox));
	return arr;
}

static json_t *
secret_json(struct daemon *d, const struct secret *s)
{
	const struct budget_rule *b = budget_find(&d->cfg->budgets, s->name);
	json_t *j;

	json_t *hosts = json_array();
	char created[32], loaded[32];
	size_t i;

	for (i = 0; hosts != NULL && i < s->nhosts; i++)
		json_array_append_new(hosts, json_string(s->hosts[i]));
	ctl_fmt_time((time_t)s->created, created, sizeof(created));
	ctl_fmt_time(s->loaded, loaded, sizeof(loaded));
	j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:s, s:s, s:s}",
	    "name", s->name, "kind", sealed_kind_name(s->kind),
	    "version", (json_int_t)s->version,
	    "fingerprint", s->fp, "key_id", s->keyid,
	    "hosts", hosts != NULL ? hosts : json_null(),
	    "created", created, "loaded", loaded, "source", s->source);
	/* The gateway's budget of it, over all sandboxes. */
	if (j != NULL)
		json_object_set_new(j, "budget", b != NULL ?
		    budget_json(d, b, NULL) : json_null());
	return j;
}

static void
list_secrets(struct daemon *d, struct ctl_resp *r)
{
	const struct secret_set *set = d->state->secrets;
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr != NULL && set != NULL && i < set->n; i++)
		if (json_array_append_new(arr, secret_json(d, set->v[i])) != 0) {
			json_decref(arr);
			arr = NULL;
		}
	ctl_reply_json(r, 200, arr == NULL ? NULL : json_pack("{s:I, s:o}",
	    "generation", (json_int_t)d->state->generation, "secrets", arr));
}

static void
put_secret(struct daemon *d, const char *name, const struct ctl_req *q,
    struct ctl_resp *r)
{
	const struct secret *cur = secret_set_find(d->state->secrets, name,
	    strlen(name));
	struct errlist errs = ERRLIST_INIT;
	struct secret_set *set = NULL;
	struct secret *s = NULL, *old = NULL;
	char why[SECRET_WHY_MAX], path[4096];
	uint64_t gen;
	int rc;

	if (q->bodylen > SEALED_MAX_BLOB) {
		ctl_reply_error(r, 413, NULL, "a sealed secret is at most %u "
		    "bytes", SEALED_MAX_BLOB);
		return;
	}
	if (secret_open(d->secrets, (const uint8_t *)q->body, q->bodylen, name,
	    "api", &s, why) != 0) {
		ctl_reply_error(r, 400, NULL, "secret '%s' refused: %s", name,
		    why);
		return;
	}
	if ((rc = secret_admit(cur, s, why)) == SL_ERR_EXISTS) {
		ctl_reply_json(r, 200, secret_json(d, cur));
		goto out;
	}
	if (rc != 0) {
		ctl_reply_error(r, 409, NULL, "secret '%s' refused: %s", name,
		    why);
		goto out;
	}
	if (secret_set_with(d->state->secrets, s, &set) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot build the new state");
		goto out;
	}
	if (state_check_secrets(d->state, set, &errs) != 0) {
		ctl_reply_error(r, 409, NULL, "secret '%s' refused: %s", name,
		    errs.msgs[0]);
		goto out;
	}
	if (secret_store_path(d->secrets, name, path, sizeof(path)) != 0 ||
	    ctl_write_atomic(path, q->body, q->bodylen) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot write %s: %s; nothing "
		    "changed", path, strerror(errno));
		goto out;
	}
	if (cur != NULL)
		old = secret_ref((struct secret *)cur);	/* for its record */
	rc = publish_secrets(d, set, &gen);
	set = NULL;	/* transferred, on failure too */
	if (rc != 0) {
		ctl_reply_error(r, 500, NULL, "cannot build the new state");
		goto out;
	}
	daemon_audit_secret(d, old, s, "api", (long)q->uid);
	ctl_reply_json(r, old == NULL ? 201 : 200, secret_json(d, s));
	r->wait_gen = gen;
 out:
	errlist_free(&errs);
	secret_set_unref(set);
	secret_unref(old);
	secret_unref(s);
}

static void
delete_secret(struct daemon *d, const char *name, const struct ctl_req *q,
    struct ctl_resp *r)
{
	const struct secret *cur = secret_set_find(d->state->secrets, name,
	    strlen(name));
	struct secret_set *set = NULL;
	struct secret *keep;
	char path[4096];
	uint64_t gen;

	if (cur == NULL) {
		ctl_reply_error(r, 404, NULL, "no secret named '%s'", name);
		return;
	}
	if (secret_store_path(d->secrets, name, path, sizeof(path)) != 0 ||
	    (fsvc_unlink(path) != 0 && errno != ENOENT)) {
		ctl_reply_error(r, 500, NULL, "cannot remove %s: %s; nothing "
		    "changed", path, strerror(errno));
		return;
	}
	keep = secret_ref((struct secret *)cur);	/* for its record */
	if (secret_set_without(d->state->secrets, name, &set) != 0 ||
	    publish_secrets(d, set, &gen) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot build the new state");
		secret_unref(keep);
		return;
	}
	daemon_audit_secret(d, keep, NULL, "api", (long)q->uid);
	secret_unref(keep);
	ctl_reply_json(r, 200, json_pack("{s:s, s:I}", "deleted", name,
	    "generation", (json_int_t)gen));
	r->wait_gen = gen;
}

static int
secret_name_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	/* A dot file would be skipped by the folder's readers. */
	return i > 0 && i <= SEALED_NAME_MAX && s[0] != '.';
}

int
ctl_secrets(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	const struct secret *s;
	const char *name;

	if (strcmp(q->path, "/v1/secrets") != 0 &&
	    strncmp(q->path, "/v1/secrets/", 12) != 0)
		return 0;
	if (d->secrets == NULL) {
		ctl_reply_error(r, 409, NULL, "secrets are off: sluiced.yaml "
		    "sets no gateway_key and secret_dir");
		return 1;
	}
	if (strcmp(q->path, "/v1/secrets") == 0) {
		if (strcmp(q->method, "GET") == 0)
			list_secrets(d, r);
		else
			ctl_reply_method(r, "GET");
		return 1;
	}
	name = q->path + 12;
	if (!secret_name_valid(name)) {
		ctl_reply_error(r, 400, NULL, "bad secret name in the path");
		return 1;
	}
	if (strcmp(q->method, "GET") == 0) {
		if ((s = secret_set_find(d->state->secrets, name,
		    strlen(name))) == NULL)
			ctl_reply_error(r, 404, NULL, "no secret named '%s'",
			    name);
		else
			ctl_reply_json(r, 200, secret_json(d, s));
	} else if (strcmp(q->method, "PUT") == 0)
		put_secret(d, name, q, r);
	else if (strcmp(q->method, "DELETE") == 0)
		delete_secret(d, name, q, r);
	else
		ctl_reply_method(r, "GET, PUT, DELETE");
	return 1;
}

/*
 * POST /v1/sandboxes/ID/placeholders {"secret": NAME}: the placeholder of
 * that sandbox for that secret, the same every time (placeholder.h).  The
 * secret need not be there yet; a rule swaps it only once it is.
 */
void
ctl_placeholder(struct daemon *d, const char *id, const struct ctl_req *q,
    struct ctl_resp *r)
{
	static const char *const keys[] = { "secret", NULL };
	char ph[PH_LEN + 1];
	const json_t *v;
	const char *name;
	json_t *o;

	if ((o = ctl_body_object(q, r, keys)) == NULL)
		return;
	if (d->secrets == NULL) {
		ctl_reply_error(r, 409, NULL, "secrets are off (no gateway_key "
		    "and secret_dir)");
		goto out;
	}
	if (state_sandbox(d->state, id) == NULL) {
		ctl_reply_error(r, 404, NULL, "no sandbox '%s'", id);
		goto out;
	}
	if ((v = json_object_get(o, "secret")) == NULL || !json_is_string(v) ||
	    !secret_name_ok((name = json_string_value(v)),
	    json_string_length(v))) {
		ctl_reply_error(r, 400, NULL, "'secret' must be a secret name "
		    "(1 to 64 of [A-Za-z0-9._-])");
		goto out;
	}
	placeholder_of(d->secrets, id, name, ph);
	ctl_audit(d, "placeholder_issued", q->uid, json_pack("{s:s, s:s}",
	    "sandbox", id, "secret", name));
	ctl_reply_json(r, 200, json_pack("{s:s, s:s, s:s}", "sandbox", id,
	    "secret", name, "placeholder", ph));
 out:
	json_decref(o);
}
