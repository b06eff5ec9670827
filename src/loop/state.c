/* state.c: building, sharing and querying the policy/sandbox snapshot. */
#include "autoconf.h"

#include <sys/types.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cidr.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/ca.h"
#include "keys/idkeys.h"
#include "keys/inject.h"
#include "keys/pemkey.h"
#include "keys/secrets.h"
#include "keys/tlsterm.h"
#include "loop/state.h"

/* Used when policy_dir has no default.yaml: the shipped meaning, deny all. */
static const char builtin_default[] =
    "name: default\negress:\n  default: deny\n";

struct sb_counter *
sb_counter_new(void)
{
	struct sb_counter *c;

	static atomic_ullong next_serial = 1;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->serial = atomic_fetch_add(&next_serial, 1);
	atomic_init(&c->refs, 1);
	atomic_init(&c->conns, 0);
	atomic_init(&c->conns_total, 0);
	atomic_init(&c->denied_total, 0);
	pthread_mutex_init(&c->dns_mtx, NULL);
	pthread_mutex_init(&c->ca_mtx, NULL);
	recent_init(&c->recent);
	return c;
}

struct sb_counter *
sb_counter_ref(struct sb_counter *c)
{
	atomic_fetch_add(&c->refs, 1);
	return c;
}

void
sb_counter_unref(struct sb_counter *c)
{
	if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1) {
		ca_free(c->ca);
		leafcache_free(c->leaves);
		pthread_mutex_destroy(&c->dns_mtx);
		pthread_mutex_destroy(&c->ca_mtx);
		recent_destroy(&c->recent);
		free(c);
	}
}

static int
policy_cmp(const void *a, const void *b)
{
	const struct policy *pa = *(struct policy *const *)a;
	const struct policy *pb = *(struct policy *const *)b;

	return strcmp(pa->name, pb->name);
}

int
state_policy_file(const char *n)
{
	size_t l = strlen(n);

	if (n[0] == '.')
		return 0;
	return (l > 5 && strcmp(n + l - 5, ".yaml") == 0) ||
	    (l > 4 && strcmp(n + l - 4, ".yml") == 0);
}

static int
push_policy(struct state *st, struct policy *p)
{
	struct policy **n;

	n = realloc(st->policies, (st->npolicies + 1) * sizeof(*n));
	if (n == NULL)
		return SL_ERR_NOMEM;
	st->policies = n;
	st->policies[st->npolicies++] = p;
	return 0;
}

/* Loads every policy file of dir; all errors are collected. */
static int
load_policies(struct state *st, const char *dir, struct errlist *errs)
{
	struct policy *p;
	char path[4096], **names = NULL;
	size_t i, n = 0;
	int r = 0;

	/* Sorted by name; through the monitor once confined (fsvc.h). */
	if (fsvc_list(dir, &names, &n) != 0) {
		errlist_add(errs, dir, 0, 0, "cannot read policy directory: %m");
		return SL_ERR_INVALID;
	}
	for (i = 0; i < n; i++) {
		if (!state_policy_file(names[i]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		p = NULL;
		if (policy_load(path, &p, errs) != 0) {
			r = SL_ERR_INVALID;
			continue;
		}
		if (state_policy(st, p->name) != NULL) {
			errlist_add(errs, path, 0, 0,
			    "policy '%s' is defined by another file too", p->name);
			policy_free(p);
			r = SL_ERR_INVALID;
			continue;
		}
		if (push_policy(st, p) != 0) {
			policy_free(p);
			r = SL_ERR_NOMEM;
			break;
		}
		/* state_policy searches linearly until the sort below. */
	}
	fsvc_list_free(names, n);
	return r;
}

/* The revision p gets when it replaces old (NULL: new). */
static uint64_t
next_revision(const struct policy *old, const struct policy *p)
{
	if (old == NULL)
		return 1;
	if (memcmp(old->digest, p->digest, sizeof(p->digest)) == 0)
		return old->revision;
	return old->revision + 1;
}

/*
 * Carries revisions over, and for content that did not change keeps the
 * very object, so connections judged under it need no new judgement.
 */
static void
carry_policies(struct state *st, const struct state *prev)
{
	const struct policy *old;
	size_t i;

	for (i = 0; i < st->npolicies; i++) {
		struct policy *p = st->policies[i];

		old = prev ? state_policy(prev, p->name) : NULL;
		p->revision = next_revision(old, p);
		if (old != NULL && old->revision == p->revision &&
		    strcmp(old->file, p->file) == 0) {
			st->policies[i] = policy_ref((struct policy *)old);
			policy_free(p);
		}
	}
}

static struct sb_counter *
carried_counter(const struct state *prev, const char *id)
{
	const struct sandbox *sb;

	if (prev == NULL)
		return sb_counter_new();
	if (id == NULL)
		return sb_counter_ref(prev->unknown.counter);
	if ((sb = state_sandbox(prev, id)) != NULL)
		return sb_counter_ref(sb->counter);
	return sb_counter_new();
}

static void
sandbox_clear(struct sandbox *sb)
{
	free(sb->id);
	free(sb->team);
	free(sb->project);
	free(sb->policy_name);
	policy_free(sb->inline_policy);
	free(sb->sources);
	free(sb->plens);
	sb_counter_unref(sb->counter);
	memset(sb, 0, sizeof(*sb));
}

static char *
strdup_null(const char *s, int *nomem)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		*nomem = 1;
	return d;
}

/* Fills sb from spec (no counter yet); on failure sb holds nothing. */
static int
sandbox_fill(struct sandbox *sb, const struct sandbox_spec *spec)
{
	size_t n = spec->nsources ? spec->nsources : 1;
	int nomem = 0;

	memset(sb, 0, sizeof(*sb));
	sb->id = strdup_null(spec->id, &nomem);
	sb->team = strdup_null(spec->team, &nomem);
	sb->project = strdup_null(spec->project, &nomem);
	sb->policy_name = strdup_null(spec->policy_name, &nomem);
	if (spec->inline_policy != NULL)
		sb->inline_policy = policy_ref(spec->inline_policy);
	sb->sources = calloc(n, sizeof(*sb->sources));
	sb->plens = calloc(n, sizeof(*sb->plens));
	if (nomem || sb->sources == NULL || sb->plens == NULL) {
		sandbox_clear(sb);
		return SL_ERR_NOMEM;
	}
	memcpy(sb->sources, spec->sources, spec->nsources * sizeof(*sb->sources));
	memcpy(sb->plens, spec->plens, spec->nsources * sizeof(*sb->plens));
	sb->nsources = spec->nsources;
	sb->from_config = spec->from_config;
	sb->observe_until = spec->observe_until;
	return 0;
}

int
sandbox_observing(const struct sandbox *sb, time_t now)
{
	return sb->observe_until > now && sb->policy != NULL &&
	    !sb->policy->observe_never;
}

size_t
state_observing(const struct state *st)
{
	time_t now = time(NULL);
	size_t i, n = 0;

	for (i = 0; i < st->nsandboxes; i++)
		n += sandbox_observing(&st->sandboxes[i], now) != 0;
	return n;
}

static int
sandbox_copy(struct sandbox *dst, const struct sandbox *src)
{
	struct sandbox_spec spec = {
		src->id, src->team, src->project, src->sources, src->plens,
		src->nsources, src->policy_name, src->inline_policy,
		src->from_config, src->created, src->observe_until,
	};

	if (sandbox_fill(dst, &spec) != 0)
		return SL_ERR_NOMEM;
	dst->created = src->created;
	dst->counter = sb_counter_ref(src->counter);
	return 0;
}

static int
push_sandbox_copy(struct state *st, const struct sandbox *src)
{
	struct sandbox *n;

	n = realloc(st->sandboxes, (st->nsandboxes + 1) * sizeof(*n));
	if (n == NULL)
		return SL_ERR_NOMEM;
	st->sandboxes = n;
	if (sandbox_copy(&st->sandboxes[st->nsandboxes], src) != 0)
		return SL_ERR_NOMEM;
	st->nsandboxes++;
	return 0;
}

static ssize_t
sandbox_index(const struct state *st, const char *id)
{
	size_t i;

	for (i = 0; i < st->nsandboxes; i++)
		if (strcmp(st->sandboxes[i].id, id) == 0)
			return (ssize_t)i;
	return -1;
}

int
state_put_sandbox(struct state *st, const struct sandbox_spec *spec,
    struct sb_counter *counter)
{
	struct sandbox sb, *n;
	ssize_t at = sandbox_index(st, spec->id);

	if (sandbox_fill(&sb, spec) != 0)
		return SL_ERR_NOMEM;
	if (at >= 0) {
		sb.created = st->sandboxes[at].created;
		sb.counter = sb_counter_ref(st->sandboxes[at].counter);
		sandbox_clear(&st->sandboxes[at]);
		st->sandboxes[at] = sb;
		return 0;
	}
	sb.created = spec->created != 0 ? spec->created : time(NULL);
	sb.counter = counter != NULL ? sb_counter_ref(counter) : sb_counter_new();
	n = realloc(st->sandboxes, (st->nsandboxes + 1) * sizeof(*n));
	if (n != NULL)
		st->sandboxes = n;
	if (sb.counter == NULL || n == NULL) {
		sandbox_clear(&sb);
		return SL_ERR_NOMEM;
	}
	st->sandboxes[st->nsandboxes++] = sb;
	return 0;
}

int
state_remove_sandbox(struct state *st, const char *id)
{
	ssize_t at = sandbox_index(st, id);

	if (at < 0)
		return SL_ERR_NOT_FOUND;
	sandbox_clear(&st->sandboxes[at]);
	memmove(&st->sandboxes[at], &st->sandboxes[at + 1],
	    (st->nsandboxes - (size_t)at - 1) * sizeof(*st->sandboxes));
	st->nsandboxes--;
	return 0;
}

int
state_put_policy(struct state *st, struct policy *p, const struct state *prev)
{
	size_t i;

	p->revision = next_revision(prev ? state_policy(prev, p->name) : NULL, p);
	for (i = 0; i < st->npolicies; i++)
		if (strcmp(st->policies[i]->name, p->name) == 0) {
			policy_free(st->policies[i]);
			st->policies[i] = p;
			return 0;
		}
	if (push_policy(st, p) != 0) {
		policy_free(p);
		return SL_ERR_NOMEM;
	}
	return 0;
}

/* The config's sandboxes, then those prev got through the API. */
static int
collect_sandboxes(struct state *st, const struct config *cfg,
    const struct state *prev)
{
	const struct sandbox *old;
	struct sb_counter *c;
	size_t i;
	int r;

	for (i = 0; i < cfg->nsandboxes; i++) {
		const struct config_sandbox *cs = &cfg->sandboxes[i];
		struct sandbox_spec spec = {
			cs->id, cs->team, cs->project, cs->sources, cs->plens,
			cs->nsources, cs->policy, NULL, 1, 0, 0,
		};

		if ((c = carried_counter(prev, cs->id)) == NULL)
			return SL_ERR_NOMEM;
		r = state_put_sandbox(st, &spec, c);
		sb_counter_unref(c);
		if (r != 0)
			return r;
		old = prev ? state_sandbox(prev, cs->id) : NULL;
		if (old != NULL)
			st->sandboxes[st->nsandboxes - 1].created = old->created;
	}
	for (i = 0; prev != NULL && i < prev->nsandboxes; i++) {
		if (prev->sandboxes[i].from_config)
			continue;
		if ((r = push_sandbox_copy(st, &prev->sandboxes[i])) != 0)
			return r;
	}
	return 0;
}

static int
collect_own_addrs(struct state *st)
{
	struct ifaddrs *ifa = NULL, *i;
	struct sl_addr a;
	size_t n = 0;

	if (getifaddrs(&ifa) != 0)
		return SL_ERR_IO;
	for (i = ifa; i != NULL; i = i->ifa_next)
		n++;
	if (n > 0 && (st->own = calloc(n, sizeof(*st->own))) == NULL) {
		freeifaddrs(ifa);
		return SL_ERR_NOMEM;
	}
	for (i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (addr_from_sockaddr(i->ifa_addr, sizeof(struct sockaddr_storage),
		    &a, NULL) != 0)
			continue;
		addr_canonical(&a, &st->own[st->nown++]);
	}
	freeifaddrs(ifa);
	return 0;
}

static struct state *
state_alloc(uint64_t generation)
{
	struct state *st;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	atomic_init(&st->refs, 1);
	st->generation = generation;
	return st;
}

int
state_build(const struct config *cfg, const struct state *prev,
    uint64_t generation, struct state **out, struct errlist *errs)
{
	struct state *st = NULL;
	struct policy *def = NULL;
	int r = SL_ERR_NOMEM;

	if ((st = state_alloc(generation)) == NULL)
		goto out;
	if ((r = load_policies(st, cfg->policy_dir, errs)) != 0)
		goto out;
	if (state_policy(st, "default") == NULL) {
		if ((r = policy_parse("(built-in default)", builtin_default,
		    sizeof(builtin_default) - 1, &def, errs)) != 0)
			goto out;
		if ((r = push_policy(st, def)) != 0)
			goto out;
		def = NULL;	/* transferred */
	}
	carry_policies(st, prev);
	if ((r = collect_sandboxes(st, cfg, prev)) != 0)
		goto out;
	if ((st->unknown.counter = carried_counter(prev, NULL)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((r = collect_own_addrs(st)) != 0) {
		errlist_add(errs, NULL, 0, 0, "cannot list own addresses: %m");
		goto out;
	}
	if (prev != NULL) {
		st->secrets = secret_set_ref(prev->secrets);
		st->idkeys = idkeys_ref(prev->idkeys);
	}
	if ((r = state_seal(st, prev, errs)) != 0)
		goto out;
	*out = st;
	st = NULL;	/* transferred */
	r = 0;
 out:
	policy_free(def);
	state_unref(st);
	return r;
}

int
state_clone(const struct state *prev, uint64_t generation, struct state **out)
{
	struct state *st;
	size_t i;

	if ((st = state_alloc(generation)) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < prev->npolicies; i++) {
		if (push_policy(st, prev->policies[i]) != 0)
			goto fail;
		policy_ref(prev->policies[i]);
	}
	for (i = 0; i < prev->nsandboxes; i++)
		if (push_sandbox_copy(st, &prev->sandboxes[i]) != 0)
			goto fail;
	st->unknown.counter = sb_counter_ref(prev->unknown.counter);
	if (prev->nown > 0) {
		if ((st->own = calloc(prev->nown, sizeof(*st->own))) == NULL)
			goto fail;
		memcpy(st->own, prev->own, prev->nown * sizeof(*st->own));
		st->nown = prev->nown;
	}
	st->secrets = secret_set_ref(prev->secrets);
	st->idkeys = idkeys_ref(prev->idkeys);
	*out = st;
	return 0;
 fail:
	state_unref(st);
	return SL_ERR_NOMEM;
}

static int
sandbox_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sandbox *)a)->id,
	    ((const struct sandbox *)b)->id);
}

/* Every rule of p that renders a document into a header, into errs. */
static int
policy_secret_kinds(const struct policy *p, const struct secret_set *set,
    struct errlist *errs)
{
	const struct intercept_rule *r;
	const struct secret *s;
	const struct mint_source *t;
	size_t i;
	int bad = 0;

	for (i = 0; i < p->tokens.n; i++) {
		t = &p->tokens.v[i];
		if ((s = secret_set_find(set, t->secret,
		    strlen(t->secret))) == NULL ||
		    (mint_kind_signs(t->kind) ? s->pem != NULL &&
		    s->pem->key != NULL : s->kind == SEALED_KIND_HEADER))
			continue;
		errlist_add(errs, p->file, t->line, 0, "token '%s': the secret "
		    "'%s' is %s secret; kind %s needs %s", t->name, s->name,
		    s->kind == SEALED_KIND_JSON ? "a json" : s->kind ==
		    SEALED_KIND_PEM ? "a pem" : "a header",
		    mint_kind_name(t->kind), mint_kind_signs(t->kind) ?
		    "a private key sealed with --kind pem" :
		    "a value sealed with --kind header");
		bad = 1;
	}
	for (i = 0; i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		if (r->client_cert != NULL && (s = secret_set_find(set,
		    r->client_cert, strlen(r->client_cert))) != NULL &&
		    (s->pem == NULL || s->pem->leaf == NULL)) {
			errlist_add(errs, p->file, r->line, 0, "%s: "
			    "upstream.client_cert: the secret '%s' is %s; seal "
			    "the key and its certificate chain with --kind pem",
			    r->label, s->name, s->pem == NULL ? (s->kind ==
			    SEALED_KIND_JSON ? "a json secret" : "a header "
			    "secret") : "a key without a certificate");
			bad = 1;
		}
		if (r->sigv4_secret != NULL && (s = secret_set_find(set,
		    r->sigv4_secret, strlen(r->sigv4_secret))) != NULL &&
		    s->aws == NULL) {
			errlist_add(errs, p->file, r->line, 0, "%s: inject.sigv4: "
			    "the secret '%s' is not AWS credentials; seal "
			    "{\"access_key_id\", \"secret_access_key\", "
			    "\"session_token\"?} with --kind json", r->label,
			    s->name);
			bad = 1;
		}
		if (r->action != ICPT_INJECT ||
		    (s = inject_wrong_kind(r, set)) == NULL)
			continue;
		errlist_add(errs, p->file, r->line, 0, "%s: the secret '%s' is "
		    "a %s secret, which never goes into a header template; "
		    "seal the header value with --kind header", r->label,
		    s->name, sealed_kind_name(s->kind));
		bad = 1;
	}
	return bad;
}

int
state_check_secrets(const struct state *st, const struct secret_set *set,
    struct errlist *errs)
{
	size_t i;
	int bad = 0;

	if (set == NULL)
		return 0;
	for (i = 0; i < st->npolicies; i++)
		bad |= policy_secret_kinds(st->policies[i], set, errs);
	for (i = 0; i < st->nsandboxes; i++)
		if (st->sandboxes[i].inline_policy != NULL)
			bad |= policy_secret_kinds(
			    st->sandboxes[i].inline_policy, set, errs);
	return bad ? SL_ERR_INVALID : 0;
}

int
state_seal(struct state *st, const struct state *prev, struct errlist *errs)
{
	const struct sandbox *old;
	struct sandbox *sb;
	size_t i, j;
	int r = 0;

	qsort(st->policies, st->npolicies, sizeof(*st->policies), policy_cmp);
	if (st->nsandboxes > 1)
		qsort(st->sandboxes, st->nsandboxes, sizeof(*st->sandboxes),
		    sandbox_cmp);
	for (i = 0; i < st->nsandboxes; i++) {
		sb = &st->sandboxes[i];
		if (sb->inline_policy != NULL) {
			sb->policy = sb->inline_policy;
			if (sb->inline_policy->revision != 0)
				continue;	/* carried over as it was */
			old = prev ? state_sandbox(prev, sb->id) : NULL;
			sb->inline_policy->revision = next_revision(
			    old != NULL ? old->inline_policy : NULL,
			    sb->inline_policy);
		} else if ((sb->policy = state_policy(st, sb->policy_name)) ==
		    NULL) {
			errlist_add(errs, NULL, 0, 0, "sandbox '%s': no policy "
			    "named '%s'", sb->id, sb->policy_name);
			r = SL_ERR_INVALID;
		}
	}
	if ((st->unknown.policy = state_policy(st, "default")) == NULL) {
		errlist_add(errs, NULL, 0, 0, "no policy named 'default'");
		r = SL_ERR_INVALID;
	}
	if (state_check_secrets(st, st->secrets, errs) != 0)
		r = SL_ERR_INVALID;
	if (r != 0)
		return r;
	cidr_tree_free(st->sources);
	if ((st->sources = cidr_tree_new()) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < st->nsandboxes; i++) {
		sb = &st->sandboxes[i];
		for (j = 0; j < sb->nsources; j++)
			if (cidr_tree_add(st->sources, &sb->sources[j],
			    sb->plens[j], (uint32_t)i) != 0)
				return SL_ERR_NOMEM;
	}
	return 0;
}

struct state *
state_ref(struct state *st)
{
	atomic_fetch_add(&st->refs, 1);
	return st;
}

void
state_unref(struct state *st)
{
	size_t i;

	if (st == NULL || atomic_fetch_sub(&st->refs, 1) != 1)
		return;
	for (i = 0; i < st->npolicies; i++)
		policy_free(st->policies[i]);
	free(st->policies);
	for (i = 0; i < st->nsandboxes; i++)
		sandbox_clear(&st->sandboxes[i]);
	free(st->sandboxes);
	sb_counter_unref(st->unknown.counter);
	cidr_tree_free(st->sources);
	free(st->own);
	secret_set_unref(st->secrets);
	idkeys_unref(st->idkeys);
	free(st);
}

static int
first_id(uint32_t id, void *arg)
{
	*(uint32_t *)arg = id;
	return 0;	/* keep walking: the longest prefix is visited last */
}

const struct sandbox *
state_sandbox_for(const struct state *st, const struct sl_addr *src)
{
	uint32_t id = UINT32_MAX;

	cidr_tree_walk(st->sources, src, first_id, &id);
	if (id < st->nsandboxes)
		return &st->sandboxes[id];
	return &st->unknown;
}

const struct sandbox *
state_sandbox(const struct state *st, const char *id)
{
	struct sandbox key;

	if (st->nsandboxes == 0)
		return NULL;
	memset(&key, 0, sizeof(key));
	key.id = (char *)id;
	return bsearch(&key, st->sandboxes, st->nsandboxes,
	    sizeof(*st->sandboxes), sandbox_cmp);
}

const struct policy *
state_policy(const struct state *st, const char *name)
{
	size_t i;

	/* Linear: tens of named policies; sandboxes have their own index. */
	for (i = 0; i < st->npolicies; i++)
		if (strcmp(st->policies[i]->name, name) == 0)
			return st->policies[i];
	return NULL;
}

/* With name constraints, the CA may certify only its policy's intercepted hosts. */
int
sandbox_mint_ca(const struct config *cfg, const char *id,
    const struct policy *p, struct ca **out)
{
	static const char *const nothing[] = { "invalid" };
	unsigned validity = cfg->ca_validity_days * 86400u;
	const char **names = NULL;
	size_t i, k, n = 0;
	int r;

	if (!cfg->ca_name_constraints)
		return ca_new(id, NULL, 0, validity, out);
	if (p->nintercepts > 0 &&
	    (names = calloc(p->nintercepts, sizeof(*names))) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < p->nintercepts; i++) {
		for (k = 0; k < n && strcmp(names[k], p->intercepts[i].host) != 0;
		    k++)
			;
		if (k == n)
			names[n++] = p->intercepts[i].host;
	}
	/* Constrained to nothing: a name no certificate may carry. */
	if (n == 0)
		r = ca_new(id, nothing, 1, validity, out);
	else
		r = ca_new(id, names, n, validity, out);
	free(names);
	return r;
}

int
state_mint_static_cas(const struct config *cfg, struct state *st)
{
	struct sandbox *sb;
	size_t i;
	int r;

	for (i = 0; i < st->nsandboxes; i++) {
		sb = &st->sandboxes[i];
		pthread_mutex_lock(&sb->counter->ca_mtx);
		r = 0;
		if (sb->counter->ca == NULL)
			r = sandbox_mint_ca(cfg, sb->id, sb->policy,
			    &sb->counter->ca);
		pthread_mutex_unlock(&sb->counter->ca_mtx);
		if (r != 0)
			return r;
	}
	return 0;
}

int
state_is_own_addr(const struct state *st, const struct sl_addr *a)
{
	size_t i;

	for (i = 0; i < st->nown; i++)
		if (addr_equal(&st->own[i], a))
			return 1;
	return 0;
}
