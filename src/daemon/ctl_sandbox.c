/*
 * ctl_sandbox.c: /v1/sandboxes, registering, inspecting, re-policing and
 * deleting sandboxes.  Every change is made on a copy of the snapshot in
 * force and published whole, or not at all.
 */
#include "autoconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "conf/config.h"
#include "conf/policy.h"
#include "conf/replay.h"
#include "keys/ca.h"
#include "audit/audit.h"
#include "loop/mintcache.h"
#include "loop/state.h"
#include "dns/dnsmem.h"
#include "daemon/ctl_int.h"
#include "daemon/sbstore.h"
#include "daemon/daemon.h"
#include "daemon/publish.h"


#define SB_TEXT_MAX	128	/* team, project */
#define SB_SOURCES_MAX	64

static int
ctl_sandbox_id_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > SB_ID_MAX || !isalnum((unsigned char)s[0]))
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-' &&
		    s[i] != '_')
			return 0;
	return 1;
}

static int
text_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > SB_TEXT_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

void
ctl_fmt_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *
asn1_time_json(const ASN1_TIME *t)
{
	struct tm tm;
	char buf[32];

	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return json_null();
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(buf);
}

/* The permitted DNS subtrees of the CA's nameConstraints, or null. */
static json_t *
constraints_json(X509 *x)
{
	NAME_CONSTRAINTS *nc;
	GENERAL_SUBTREE *st;
	json_t *arr;
	int i;

	if ((nc = X509_get_ext_d2i(x, NID_name_constraints, NULL, NULL)) == NULL)
		return json_null();
	arr = json_array();
	for (i = 0; arr != NULL && i < sk_GENERAL_SUBTREE_num(
	    nc->permittedSubtrees); i++) {
		st = sk_GENERAL_SUBTREE_value(nc->permittedSubtrees, i);
		if (st->base->type == GEN_DNS)
			json_array_append_new(arr, json_stringn(
			    (const char *)ASN1_STRING_get0_data(st->base->d.dNSName),
			    (size_t)ASN1_STRING_length(st->base->d.dNSName)));
	}
	NAME_CONSTRAINTS_free(nc);
	return arr;
}

static json_t *
ca_json(struct sb_counter *c, int with_pem)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[2 * EVP_MAX_MD_SIZE + 1], *pem;
	unsigned mdlen = 0, i;
	json_t *j = NULL;
	size_t len;
	X509 *x;

	pthread_mutex_lock(&c->ca_mtx);
	if (c->ca == NULL)
		goto out;
	x = ca_cert(c->ca);
	if (X509_digest(x, EVP_sha256(), md, &mdlen) != 1)
		goto out;
	for (i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	j = json_pack("{s:s, s:o, s:o, s:o}", "fingerprint_sha256", hex,
	    "not_before", asn1_time_json(X509_get0_notBefore(x)),
	    "not_after", asn1_time_json(X509_get0_notAfter(x)),
	    "name_constraints", constraints_json(x));
	if (j != NULL && with_pem && (pem = ca_cert_pem(c->ca, &len)) != NULL) {
		json_object_set_new(j, "pem", json_stringn(pem, len));
		free(pem);
	}
 out:
	pthread_mutex_unlock(&c->ca_mtx);
	return j;
}

/* Its sources in canonical form, with lengths. */
json_t *
ctl_sources_json(const struct sandbox *sb)
{
	char a[ADDR_STRLEN], buf[ADDR_STRLEN + 8];
	json_t *srcs;
	size_t i;

	if ((srcs = json_array()) == NULL)
		return NULL;
	for (i = 0; i < sb->nsources; i++) {
		snprintf(buf, sizeof(buf), "%s/%u",
		    addr_format(&sb->sources[i], a, sizeof(a)), sb->plens[i]);
		json_array_append_new(srcs, json_string(buf));
	}
	return srcs;
}

/* "mode" (observe, enforce) and, observing, "observe_until" (UTC). */
static void
observe_json(json_t *j, const struct sandbox *sb)
{
	char ts[32];
	int obs = sandbox_observing(sb, time(NULL));

	json_object_set_new(j, "mode", json_string(obs ? "observe" :
	    "enforce"));
	if (obs) {
		ctl_fmt_time(sb->observe_until, ts, sizeof(ts));
		json_object_set_new(j, "observe_until", json_string(ts));
	}
}

static json_t *
sandbox_json(struct daemon *d, const struct sandbox *sb, int with_pem)
{
	char ts[32];
	json_t *j, *srcs, *ca;

	ctl_fmt_time(sb->created, ts, sizeof(ts));
	j = json_pack("{s:s, s:s*, s:s*, s:s, s:I, s:b, s:s, s:s, s:I}",
	    "id", sb->id, "team", sb->team, "project", sb->project,
	    "policy", sb->policy->name,
	    "policy_revision", (json_int_t)sb->policy->revision,
	    "policy_inline", sb->inline_policy != NULL,
	    "origin", sb->from_config ? "config" : "api", "created", ts,
	    "connections", (json_int_t)atomic_load(&sb->counter->conns));
	if (j == NULL || (srcs = ctl_sources_json(sb)) == NULL) {
		json_decref(j);
		return NULL;
	}
	json_object_set_new(j, "sources", srcs);
	json_object_set_new(j, "budgets", ctl_budgets_json(d,
	    &sb->policy->budgets, sb->id));
	observe_json(j, sb);
	if ((ca = ca_json(sb->counter, with_pem)) != NULL) {
		if (with_pem)
			json_object_set(j, "ca_pem", json_object_get(ca, "pem"));
		json_object_del(ca, "pem");
		json_object_set_new(j, "ca", ca);
	}
	return j;
}

struct replay_arg {
	const struct policy	*cand;
	struct replay_tally	*t;
	size_t			 n;
	int			 nomem;
};

/* ---- reading a body ------------------------------------------------- */

struct sb_input {
	const char	*id, *team, *project;
	struct sl_addr	 src[SB_SOURCES_MAX];
	unsigned	 plen[SB_SOURCES_MAX];
	size_t		 nsrc;
	const char	*policy_name;
	struct policy	*inline_policy;	/* owned */
	time_t		 observe_until;	/* 0: enforce */
};

/*
 * "mode": "observe" with "until" (a duration: "10m", or seconds, at most
 * OBSERVE_MAX_S), or "enforce"; absent: enforce.  A restored registration
 * (uid < 0) gives "observe_until", the time itself.  The policy must let
 * its sandboxes observe.  -1 with the answer set.
 */
static int
read_mode(const json_t *o, const struct policy *pol, long uid,
    time_t *until, struct ctl_resp *r)
{
	const json_t *m = json_object_get(o, "mode"), *u;
	const char *ms = json_string_value(m);
	unsigned ms_until;

	*until = 0;
	if (uid < 0) {
		u = json_object_get(o, "observe_until");
		if (json_is_integer(u) && json_integer_value(u) > time(NULL))
			*until = (time_t)json_integer_value(u);
		return 0;
	}
	if (m == NULL || (ms != NULL && strcmp(ms, "enforce") == 0)) {
		if (json_object_get(o, "until") != NULL) {
			ctl_reply_error(r, 400, NULL, "'until' goes with "
			    "'mode': 'observe' only");
			return -1;
		}
		return 0;
	}
	if (ms == NULL || strcmp(ms, "observe") != 0) {
		ctl_reply_error(r, 400, NULL, "'mode' must be 'observe' or "
		    "'enforce'");
		return -1;
	}
	u = json_object_get(o, "until");
	if (json_is_integer(u) && json_integer_value(u) > 0 &&
	    json_integer_value(u) <= OBSERVE_MAX_S)
		ms_until = (unsigned)json_integer_value(u) * 1000;
	else if (!json_is_string(u) || config_parse_duration(
	    json_string_value(u), &ms_until) != 0 || ms_until < 1000 ||
	    ms_until > OBSERVE_MAX_S * 1000u) {
		ctl_reply_error(r, 400, NULL, "observe mode needs 'until': how "
		    "long it lasts, 1s to %ds (\"10m\", \"2h\")",
		    OBSERVE_MAX_S);
		return -1;
	}
	if (pol->observe_never) {
		ctl_reply_error(r, 409, NULL, "policy '%s' forbids observe mode "
		    "(observe: never)", pol->name);
		return -1;
	}
	*until = time(NULL) + (time_t)(ms_until / 1000);
	return 0;
}

static int
read_sources(const json_t *arr, struct sb_input *in, struct ctl_resp *r)
{
	struct sl_addr a;
	unsigned plen;
	const char *s;
	size_t i, k;

	if (!json_is_array(arr) || json_array_size(arr) == 0 ||
	    json_array_size(arr) > SB_SOURCES_MAX) {
		ctl_reply_error(r, 400, NULL, "'sources' must be a list of 1 to "
		    "%d addresses or prefixes", SB_SOURCES_MAX);
		return -1;
	}
	for (i = 0; i < json_array_size(arr); i++) {
		if ((s = json_string_value(json_array_get(arr, i))) == NULL ||
		    addr_parse_prefix(s, &a, &plen) != 0 ||
		    policy_prefix_canonical(&a, plen, &in->src[i],
		    &in->plen[i]) != 0) {
			ctl_reply_error(r, 400, NULL, "'sources'[%zu]: not an "
			    "address or prefix (host bits must be zero)", i);
			return -1;
		}
		if (in->plen[i] < (in->src[i].family == AF_INET ? 8u : 16u)) {
			ctl_reply_error(r, 400, NULL, "'sources'[%zu]: prefix "
			    "too broad (at least /8 for IPv4, /16 for IPv6)", i);
			return -1;
		}
		for (k = 0; k < i; k++)
			if (in->plen[k] == in->plen[i] &&
			    addr_equal(&in->src[k], &in->src[i])) {
				ctl_reply_error(r, 400, NULL, "'sources'[%zu]: "
				    "listed twice", i);
				return -1;
			}
	}
	in->nsrc = i;
	return 0;
}

/* A policy by name (it must exist) or inline (parsed here). */
static int
read_policy(struct daemon *d, const json_t *v, const char *id,
    struct sb_input *in, struct ctl_resp *r)
{
	struct errlist errs = ERRLIST_INIT;
	char file[96];
	json_t *copy;
	char *text;
	int rc;

	if (json_is_string(v)) {
		in->policy_name = json_string_value(v);
		if (state_policy(d->state, in->policy_name) == NULL) {
			ctl_reply_error(r, 404, NULL, "no policy named '%.64s'",
			    in->policy_name);
			return -1;
		}
		return 0;
	}
	if (!json_is_object(v)) {
		ctl_reply_error(r, 400, NULL, "'policy' must be a policy name "
		    "or an inline policy object");
		return -1;
	}
	if ((copy = json_deep_copy(v)) == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		return -1;
	}
	if (json_object_get(copy, "name") == NULL)
		json_object_set_new(copy, "name", json_string(id));
	text = json_dumps(copy, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(copy);
	if (text == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		return -1;
	}
	snprintf(file, sizeof(file), "inline policy of %s", id);
	rc = policy_parse(file, text, strlen(text), &in->inline_policy, &errs);
	free(text);
	if (rc != 0) {
		ctl_reply_error(r, 400, &errs, "the inline policy is invalid");
		errlist_free(&errs);
		return -1;
	}
	free(in->inline_policy->file);
	in->inline_policy->file = strdup("inline");
	if (in->inline_policy->file == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		return -1;
	}
	return 0;
}

static int
prefix_overlap(const struct sl_addr *a, unsigned alen, const struct sl_addr *b,
    unsigned blen)
{
	unsigned n = alen < blen ? alen : blen, i;

	if (a->family != b->family)
		return 0;
	for (i = 0; i < n / 8; i++)
		if (a->bytes[i] != b->bytes[i])
			return 0;
	if (n % 8 == 0)
		return 1;
	return ((a->bytes[i] ^ b->bytes[i]) & (0xff00 >> (n % 8)) & 0xff) == 0;
}

/* The sandbox (other than id) that owns a source overlapping one of in's. */
static const struct sandbox *
source_owner(const struct state *st, const struct sb_input *in)
{
	const struct sandbox *sb;
	size_t i, j, k;

	for (i = 0; i < st->nsandboxes; i++) {
		sb = &st->sandboxes[i];
		if (strcmp(sb->id, in->id) == 0)
			continue;
		for (j = 0; j < sb->nsources; j++)
			for (k = 0; k < in->nsrc; k++)
				if (prefix_overlap(&sb->sources[j], sb->plens[j],
				    &in->src[k], in->plen[k]))
					return sb;
	}
	return NULL;
}

static const char *
opt_text(const json_t *o, const char *key, int *bad)
{
	const json_t *v = json_object_get(o, key);

	if (v == NULL || json_is_null(v))
		return NULL;
	if (!json_is_string(v) || !text_ok(json_string_value(v))) {
		*bad = 1;
		return NULL;
	}
	return json_string_value(v);
}

/* ---- the endpoints -------------------------------------------------- */

/*
 * Registers the sandbox o describes: made durable in state_dir before it
 * is put in force.  cap: a restored sandbox's CA (taken; NULL: mint one)
 * and its first registration time; uid < 0: restored at start.
 */
static void
sandbox_register(struct daemon *d, json_t *o, struct ca **cap,
    time_t created, long uid, struct ctl_resp *r)
{
	struct errlist errs = ERRLIST_INIT;
	struct sb_input in;
	const struct sandbox *other, *sb;
	const struct policy *pol;
	struct sb_counter *cnt = NULL;
	struct state *st = NULL;
	struct ca *ca = NULL;
	char why[256];
	json_t *v;
	int bad = 0, rc;
	uint64_t gen;

	memset(&in, 0, sizeof(in));
	if ((in.id = json_string_value(json_object_get(o, "id"))) == NULL ||
	    !ctl_sandbox_id_ok(in.id)) {
		ctl_reply_error(r, 400, NULL, "'id' must be 1 to %d characters "
		    "of A-Z a-z 0-9 . _ - starting with a letter or digit",
		    SB_ID_MAX);
		goto out;
	}
	in.team = opt_text(o, "team", &bad);
	in.project = opt_text(o, "project", &bad);
	if (bad) {
		ctl_reply_error(r, 400, NULL, "'team' and 'project' must be "
		    "strings of 1 to %d printable characters", SB_TEXT_MAX);
		goto out;
	}
	if (read_sources(json_object_get(o, "sources"), &in, r) != 0)
		goto out;
	if ((v = json_object_get(o, "policy")) == NULL) {
		ctl_reply_error(r, 400, NULL, "'policy' is required");
		goto out;
	}
	if (read_policy(d, v, in.id, &in, r) != 0)
		goto out;
	if (state_sandbox(d->state, in.id) != NULL) {
		ctl_reply_error(r, 409, NULL, "sandbox '%s' exists", in.id);
		goto out;
	}
	if ((other = source_owner(d->state, &in)) != NULL) {
		ctl_reply_error(r, 409, NULL, "a source overlaps one of sandbox "
		    "'%s'", other->id);
		goto out;
	}
	pol = in.inline_policy ? in.inline_policy :
	    state_policy(d->state, in.policy_name);
	if (read_mode(o, pol, uid, &in.observe_until, r) != 0)
		goto out;
	if (cap != NULL && *cap != NULL) {
		ca = *cap;
		*cap = NULL;
	} else if ((rc = sandbox_mint_ca(d->cfg, in.id, pol, &ca)) != 0) {
		if (rc == SL_ERR_IO)
			ctl_reply_error(r, 500, NULL, "cannot lock memory for the "
			    "sandbox's CA key (%s): raise RLIMIT_MEMLOCK "
			    "(LimitMEMLOCK= in a systemd unit)", strerror(errno));
		else
			ctl_reply_error(r, 500, NULL, "cannot mint the sandbox's "
			    "CA: %s", err_str(rc));
		goto out;
	}
	if ((cnt = sb_counter_new()) == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		goto out;
	}
	cnt->ca = ca;
	ca = NULL;	/* the counter owns it */
	{
		struct sandbox_spec spec = { in.id, in.team, in.project, in.src,
		    in.plen, in.nsrc, in.policy_name, in.inline_policy, 0,
		    created, in.observe_until };

		if (state_clone(d->state, d->generation + 1, &st) != 0 ||
		    state_put_sandbox(st, &spec, cnt) != 0 ||
		    state_seal(st, d->state, &errs) != 0) {
			ctl_reply_error(r, 500, &errs, "cannot build the new state");
			goto out;
		}
	}
	/* Durable before it is in force (a restored one is already). */
	if (uid >= 0 && sbstore_put(d, state_sandbox(st, in.id), v, why,
	    sizeof(why)) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot keep the sandbox in "
		    "state_dir: %s; it is not registered", why);
		goto out;
	}
	gen = publish_state(d, st);
	st = NULL;
	sb = state_sandbox(d->state, in.id);
	v = json_pack("{s:s, s:s*, s:s*, s:o?, s:s, s:I, s:I, s:o?}",
	    "sandbox", sb->id, "team", sb->team, "project", sb->project,
	    "sources", ctl_sources_json(sb), "policy", sb->policy->name,
	    "revision", (json_int_t)sb->policy->revision,
	    "generation", (json_int_t)gen, "ca", ca_json(sb->counter, 0));
	if (v != NULL)
		observe_json(v, sb);
	if (uid >= 0)
		ctl_audit(d, "sandbox_add", (uid_t)uid, v);
	else
		audit_write(d->audit, "sandbox_restore", v);	/* no caller */
	ctl_reply_json(r, 201, sandbox_json(d, sb, 1));
	r->wait_gen = gen;
 out:
	sb_counter_unref(cnt);
	ca_free(ca);
	state_unref(st);
	policy_free(in.inline_policy);
	errlist_free(&errs);
}

static void
add_sandbox(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	static const char *const keys[] = { "id", "team", "project", "sources",
	    "policy", "mode", "until", NULL };
	json_t *o;

	if ((o = ctl_body_object(q, r, keys)) == NULL)
		return;
	sandbox_register(d, o, NULL, 0, (long)q->uid, r);
	json_decref(o);
}

int
ctl_sandbox_restore(struct daemon *d, json_t *body, struct ca **ca,
    time_t created, char *why, size_t why_len)
{
	struct ctl_resp r;
	json_t *ans, *e;

	memset(&r, 0, sizeof(r));
	sandbox_register(d, body, ca, created, -1, &r);
	if (r.status == 201) {
		free(r.body);
		return 0;
	}
	ans = r.body != NULL ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	e = json_object_get(ans, "error");
	snprintf(why, why_len, "%s", json_is_string(e) ? json_string_value(e) :
	    "refused");
	json_decref(ans);
	free(r.body);
	return -1;
}

/*
 * old's registration again with another policy or mode: kept in
 * state_dir first (policy: what sbstore keeps, NULL: what it kept), then
 * in force.  0 and *gen, or -1 with the answer set ("the WHAT in force
 * stays").
 */
static int
replace_sandbox(struct daemon *d, const struct sandbox *old,
    const char *policy_name, struct policy *inline_policy, time_t until,
    const json_t *policy, const char *what, uint64_t *gen,
    struct ctl_resp *r)
{
	struct sandbox_spec spec = { old->id, old->team, old->project,
	    old->sources, old->plens, old->nsources, policy_name,
	    inline_policy, 0, 0, until };
	struct errlist errs = ERRLIST_INIT;
	struct state *st = NULL;
	char why[256];

	if (state_clone(d->state, d->generation + 1, &st) != 0 ||
	    state_put_sandbox(st, &spec, NULL) != 0 ||
	    state_seal(st, d->state, &errs) != 0) {
		ctl_reply_error(r, 500, &errs, "cannot build the new state");
		goto fail;
	}
	if (sbstore_put(d, state_sandbox(st, old->id), policy, why,
	    sizeof(why)) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot keep the change in "
		    "state_dir: %s; the %s in force stays", why, what);
		goto fail;
	}
	*gen = publish_state(d, st);
	errlist_free(&errs);
	return 0;
 fail:
	state_unref(st);
	errlist_free(&errs);
	return -1;
}

static void
replay_recent(const char *text, size_t len, void *arg)
{
	struct replay_arg *ra = arg;
	struct rp_result res;
	json_t *rec;

	ra->n++;
	if ((rec = json_loadb(text, len, 0, NULL)) == NULL)
		return;
	replay_record(ra->cand, rec, &res);
	if (replay_tally_add(ra->t, &res) != 0)
		ra->nomem = 1;
	json_decref(rec);
}

/*
 * PUT /v1/sandboxes/ID/policy?dry_run=1: the sandbox's last decisions
 * (recent.h) judged under the candidate; nothing changes.
 */
static void
dry_run(struct daemon *d, const struct sandbox *sb, const struct policy *cand,
    struct ctl_resp *r)
{
	struct replay_arg ra = { cand, replay_tally_new(), 0, 0 };
	json_t *sum;

	if (ra.t == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		return;
	}
	recent_each(&sb->counter->recent, replay_recent, &ra);
	if (ra.nomem || (sum = replay_tally_json(ra.t, sb->id)) == NULL) {
		replay_tally_free(ra.t);
		ctl_reply_error(r, 500, NULL, "out of memory");
		return;
	}
	json_object_set_new(sum, "dry_run", json_true());
	json_object_set_new(sum, "policy", json_string(cand->name));
	json_object_set_new(sum, "current_policy",
	    json_string(sb->policy->name));
	json_object_set_new(sum, "records", json_integer((json_int_t)ra.n));
	json_object_set_new(sum, "records_max", json_integer(RECENT_MAX));
	replay_tally_free(ra.t);
	ctl_reply_json(r, 200, sum);
}

static void
set_policy(struct daemon *d, const char *id, const struct ctl_req *q,
    struct ctl_resp *r)
{
	static const char *const keys[] = { "policy", NULL };
	const struct sandbox *old, *sb;
	struct sb_input in;
	char oldname[128];
	uint64_t oldrev, gen;
	json_t *o, *v;

	memset(&in, 0, sizeof(in));
	if ((old = state_sandbox(d->state, id)) == NULL) {
		ctl_reply_error(r, 404, NULL, "no sandbox '%s'", id);
		return;
	}
	if (old->from_config) {
		ctl_reply_error(r, 409, NULL, "sandbox '%s' is declared in %s; "
		    "change it there", id, d->cfg->path);
		return;
	}
	if ((o = ctl_body_object(q, r, keys)) == NULL)
		return;
	if ((v = json_object_get(o, "policy")) == NULL) {
		ctl_reply_error(r, 400, NULL, "'policy' is required");
		goto out;
	}
	if (read_policy(d, v, id, &in, r) != 0)
		goto out;
	if (q->query != NULL && (strcmp(q->query, "dry_run=1") == 0 ||
	    strcmp(q->query, "dry_run=true") == 0)) {
		dry_run(d, old, in.inline_policy ? in.inline_policy :
		    state_policy(d->state, in.policy_name), r);
		goto out;
	}
	if (q->query != NULL) {
		ctl_reply_error(r, 400, NULL, "the only query is dry_run=1");
		goto out;
	}
	snprintf(oldname, sizeof(oldname), "%s", old->policy->name);
	oldrev = old->policy->revision;
	if (replace_sandbox(d, old, in.policy_name, in.inline_policy,
	    old->observe_until, v, "policy", &gen, r) != 0)
		goto out;
	sb = state_sandbox(d->state, id);
	ctl_audit(d, "policy_change", q->uid, json_pack("{s:s, s:s, s:I, s:s,"
	    " s:I, s:b, s:I}", "sandbox", id, "policy", sb->policy->name,
	    "revision", (json_int_t)sb->policy->revision, "previous", oldname,
	    "previous_revision", (json_int_t)oldrev,
	    "inline", sb->inline_policy != NULL, "generation", (json_int_t)gen));
	ctl_reply_json(r, 200, sandbox_json(d, sb, 0));
	r->wait_gen = gen;
 out:
	policy_free(in.inline_policy);
	json_decref(o);
}

/* One sandbox_mode record: the mode now and before, and why. */
void
ctl_audit_mode(struct daemon *d, const struct sandbox *sb, int was_observing,
    const char *cause, long uid)
{
	json_t *v;

	v = json_pack("{s:s, s:s, s:s}", "sandbox", sb->id, "previous",
	    was_observing ? "observe" : "enforce", "cause", cause);
	if (v == NULL)
		return;
	observe_json(v, sb);
	if (uid >= 0)
		json_object_set_new(v, "uid", json_integer(uid));
	audit_write(d->audit, "sandbox_mode", v);
}

static void
set_mode(struct daemon *d, const char *id, const struct ctl_req *q,
    struct ctl_resp *r)
{
	static const char *const keys[] = { "mode", "until", NULL };
	const struct sandbox *old, *sb;
	time_t until;
	uint64_t gen;
	int was;
	json_t *o;

	if ((o = ctl_body_object(q, r, keys)) == NULL)
		return;
	if ((old = state_sandbox(d->state, id)) == NULL) {
		ctl_reply_error(r, 404, NULL, "no sandbox '%s'", id);
		goto out;
	}
	if (old->from_config) {
		ctl_reply_error(r, 409, NULL, "sandbox '%s' is declared in %s: "
		    "change it there", id, d->cfg->path);
		goto out;
	}
	if (json_object_get(o, "mode") == NULL) {
		ctl_reply_error(r, 400, NULL, "'mode' is required");
		goto out;
	}
	if (read_mode(o, old->policy, (long)q->uid, &until, r) != 0)
		goto out;
	was = sandbox_observing(old, time(NULL));
	if (replace_sandbox(d, old, old->policy_name, old->inline_policy,
	    until, NULL, "mode", &gen, r) != 0)
		goto out;
	sb = state_sandbox(d->state, id);
	ctl_audit_mode(d, sb, was, "api", (long)q->uid);
	ctl_reply_json(r, 200, sandbox_json(d, sb, 0));
	r->wait_gen = gen;
 out:
	json_decref(o);
}

static void
delete_sandbox(struct daemon *d, const char *id, const struct ctl_req *q,
    struct ctl_resp *r)
{
	struct errlist errs = ERRLIST_INIT;
	const struct sandbox *old;
	struct sb_counter *cnt;
	struct state *st = NULL;
	char why[256];
	uint64_t gen;

	if ((old = state_sandbox(d->state, id)) == NULL) {
		ctl_reply_error(r, 404, NULL, "no sandbox '%s'", id);
		return;
	}
	if (old->from_config) {
		ctl_reply_error(r, 409, NULL, "sandbox '%s' is declared in %s; "
		    "remove it there", id, d->cfg->path);
		return;
	}
	/* Gone from state_dir first: a restart never brings it back. */
	if (sbstore_remove(d, id, why, sizeof(why)) != 0) {
		ctl_reply_error(r, 500, NULL, "cannot remove the sandbox from "
		    "state_dir: %s; it stays", why);
		return;
	}
	cnt = sb_counter_ref(old->counter);
	if (state_clone(d->state, d->generation + 1, &st) != 0 ||
	    state_remove_sandbox(st, id) != 0 ||
	    state_seal(st, d->state, &errs) != 0) {
		ctl_reply_error(r, 500, &errs, "cannot build the new state");
		state_unref(st);
		sb_counter_unref(cnt);
		errlist_free(&errs);
		return;
	}
	gen = publish_state(d, st);	/* old is gone from here on */
	/* Its key is wiped now; its connections close as workers take gen. */
	pthread_mutex_lock(&cnt->ca_mtx);
	ca_free(cnt->ca);
	cnt->ca = NULL;
	pthread_mutex_unlock(&cnt->ca_mtx);
	/* Its minted tokens too: no later sandbox of that id gets one. */
	snprintf(why, sizeof(why), "%s\n%llu\n", id,
	    (unsigned long long)cnt->serial);
	mintcache_forget(d->mints, why);
	sb_counter_unref(cnt);
	dnsmem_forget(d->dnsmem, id);
	ctl_audit(d, "sandbox_delete", q->uid, json_pack("{s:s, s:I}",
	    "sandbox", id, "generation", (json_int_t)gen));
	ctl_reply_json(r, 200, json_pack("{s:s, s:I}", "deleted", id,
	    "generation", (json_int_t)gen));
	r->wait_gen = gen;
}

static void
get_ca_pem(struct daemon *d, const char *id, struct ctl_resp *r)
{
	const struct sandbox *sb = state_sandbox(d->state, id);
	char *pem = NULL;
	size_t len = 0;

	if (sb != NULL) {
		pthread_mutex_lock(&sb->counter->ca_mtx);
		if (sb->counter->ca != NULL)
			pem = ca_cert_pem(sb->counter->ca, &len);
		pthread_mutex_unlock(&sb->counter->ca_mtx);
	}
	if (pem == NULL) {
		ctl_reply_error(r, 404, NULL, "no CA for sandbox '%s'", id);
		return;
	}
	r->status = 200;
	r->ctype = "application/x-pem-file";
	r->body = pem;
	r->len = len;
}

static void
list_sandboxes(struct daemon *d, struct ctl_resp *r)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr != NULL && i < d->state->nsandboxes; i++)
		if (json_array_append_new(arr,
		    sandbox_json(d, &d->state->sandboxes[i], 0)) != 0) {
			json_decref(arr);
			arr = NULL;
		}
	ctl_reply_json(r, 200, arr ? json_pack("{s:o}", "sandboxes", arr) : NULL);
}

int
ctl_sandboxes(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	const struct sandbox *sb;
	const char *rest, *m = q->method;
	char id[SB_ID_MAX + 2];
	size_t n;

	if (strcmp(q->path, "/v1/sandboxes") == 0) {
		if (strcmp(m, "GET") == 0)
			list_sandboxes(d, r);
		else if (strcmp(m, "POST") == 0)
			add_sandbox(d, q, r);
		else
			ctl_reply_method(r, "GET, POST");
		return 1;
	}
	if (strncmp(q->path, "/v1/sandboxes/", 14) != 0)
		return 0;
	rest = q->path + 14;
	n = strcspn(rest, "/");
	if (n == 0 || n > SB_ID_MAX) {
		ctl_reply_error(r, 400, NULL, "bad sandbox id in the path");
		return 1;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	if (!ctl_sandbox_id_ok(id)) {
		ctl_reply_error(r, 400, NULL, "bad sandbox id in the path");
		return 1;
	}
	rest += n;
	if (*rest == '\0') {
		if (strcmp(m, "GET") == 0) {
			if ((sb = state_sandbox(d->state, id)) == NULL)
				ctl_reply_error(r, 404, NULL, "no sandbox '%s'", id);
			else
				ctl_reply_json(r, 200, sandbox_json(d, sb, 1));
		} else if (strcmp(m, "DELETE") == 0)
			delete_sandbox(d, id, q, r);
		else
			ctl_reply_method(r, "GET, DELETE");
	} else if (strcmp(rest, "/ca.pem") == 0) {
		if (strcmp(m, "GET") == 0)
			get_ca_pem(d, id, r);
		else
			ctl_reply_method(r, "GET");
	} else if (strcmp(rest, "/policy") == 0) {
		if (strcmp(m, "PUT") == 0)
			set_policy(d, id, q, r);
		else
			ctl_reply_method(r, "PUT");
	} else if (strcmp(rest, "/mode") == 0) {
		if (strcmp(m, "PUT") == 0)
			set_mode(d, id, q, r);
		else
			ctl_reply_method(r, "PUT");
	} else if (strcmp(rest, "/placeholders") == 0) {
		if (strcmp(m, "POST") == 0)
			ctl_placeholder(d, id, q, r);
		else
			ctl_reply_method(r, "POST");
	} else
		ctl_reply_error(r, 404, NULL, "no such path: %.128s", q->path);
	return 1;
}
