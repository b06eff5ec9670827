/* state.c: building, sharing and querying the policy/sandbox snapshot. */
#include "autoconf.h"

#include <sys/types.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "config.h"
#include "log.h"
#include "policy.h"
#include "state.h"

/* Used when policy_dir has no default.yaml: the shipped meaning, deny all. */
static const char builtin_default[] =
    "name: default\negress:\n  default: deny\n";

static struct sb_counter *
counter_new(void)
{
	struct sb_counter *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	atomic_init(&c->refs, 1);
	atomic_init(&c->conns, 0);
	pthread_mutex_init(&c->dns_mtx, NULL);
	return c;
}

static struct sb_counter *
counter_ref(struct sb_counter *c)
{
	atomic_fetch_add(&c->refs, 1);
	return c;
}

void
sb_counter_unref(struct sb_counter *c)
{
	if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1) {
		pthread_mutex_destroy(&c->dns_mtx);
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

static int
has_yaml_suffix(const char *n)
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
	struct dirent **ents = NULL;
	struct policy *p;
	char path[4096];
	int i, n, r = 0;

	if ((n = scandir(dir, &ents, NULL, alphasort)) < 0) {
		errlist_add(errs, dir, 0, 0, "cannot read policy directory: %m");
		return SL_ERR_INVALID;
	}
	for (i = 0; i < n; i++) {
		if (!has_yaml_suffix(ents[i]->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
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
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	return r;
}

/* Carries revisions over: unchanged content keeps its revision. */
static void
assign_revisions(struct state *st, const struct state *prev)
{
	const struct policy *old;
	size_t i;

	for (i = 0; i < st->npolicies; i++) {
		struct policy *p = st->policies[i];

		old = prev ? state_policy(prev, p->name) : NULL;
		if (old == NULL)
			p->revision = 1;
		else if (memcmp(old->digest, p->digest, sizeof(p->digest)) == 0)
			p->revision = old->revision;
		else
			p->revision = old->revision + 1;
	}
}

static struct sb_counter *
carried_counter(const struct state *prev, const char *id)
{
	size_t i;

	if (prev == NULL)
		return counter_new();
	if (id == NULL)
		return counter_ref(prev->unknown.counter);
	for (i = 0; i < prev->nsandboxes; i++)
		if (strcmp(prev->sandboxes[i].id, id) == 0)
			return counter_ref(prev->sandboxes[i].counter);
	return counter_new();
}

static int
build_sandboxes(struct state *st, const struct config *cfg,
    const struct state *prev, struct errlist *errs)
{
	size_t i, j;
	int r = 0;

	if ((st->sources = cidr_tree_new()) == NULL)
		return SL_ERR_NOMEM;
	if (cfg->nsandboxes > 0 &&
	    (st->sandboxes = calloc(cfg->nsandboxes, sizeof(*st->sandboxes))) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < cfg->nsandboxes; i++) {
		const struct config_sandbox *cs = &cfg->sandboxes[i];
		struct sandbox *sb = &st->sandboxes[st->nsandboxes];

		if ((sb->policy = state_policy(st, cs->policy)) == NULL) {
			errlist_add(errs, cfg->path, cs->line, 1,
			    "sandbox '%s': no policy named '%s' in %s", cs->id,
			    cs->policy, cfg->policy_dir);
			r = SL_ERR_INVALID;
			continue;
		}
		sb->id = strdup(cs->id);
		sb->team = cs->team ? strdup(cs->team) : NULL;
		sb->project = cs->project ? strdup(cs->project) : NULL;
		sb->counter = carried_counter(prev, cs->id);
		st->nsandboxes++;
		if (sb->id == NULL || sb->counter == NULL)
			return SL_ERR_NOMEM;
		for (j = 0; j < cs->nsources; j++)
			if (cidr_tree_add(st->sources, &cs->sources[j], cs->plens[j],
			    (uint32_t)(st->nsandboxes - 1)) != 0)
				return SL_ERR_NOMEM;
	}
	return r;
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

int
state_build(const struct config *cfg, const struct state *prev,
    uint64_t generation, struct state **out, struct errlist *errs)
{
	struct state *st = NULL;
	struct policy *def = NULL;
	int r = SL_ERR_NOMEM;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		goto out;
	atomic_init(&st->refs, 1);
	st->generation = generation;
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
	qsort(st->policies, st->npolicies, sizeof(*st->policies), policy_cmp);
	assign_revisions(st, prev);
	if ((r = build_sandboxes(st, cfg, prev, errs)) != 0)
		goto out;
	st->unknown.policy = state_policy(st, "default");
	if ((st->unknown.counter = carried_counter(prev, NULL)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((r = collect_own_addrs(st)) != 0) {
		errlist_add(errs, NULL, 0, 0, "cannot list own addresses: %m");
		goto out;
	}
	*out = st;
	st = NULL;	/* transferred */
	r = 0;
 out:
	policy_free(def);
	state_unref(st);
	return r;
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
	for (i = 0; i < st->nsandboxes; i++) {
		free(st->sandboxes[i].id);
		free(st->sandboxes[i].team);
		free(st->sandboxes[i].project);
		sb_counter_unref(st->sandboxes[i].counter);
	}
	free(st->sandboxes);
	sb_counter_unref(st->unknown.counter);
	cidr_tree_free(st->sources);
	free(st->own);
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

const struct policy *
state_policy(const struct state *st, const char *name)
{
	size_t i;

	/* XXX linear; fine for tens of policies, a map when the API adds many. */
	for (i = 0; i < st->npolicies; i++)
		if (strcmp(st->policies[i]->name, name) == 0)
			return st->policies[i];
	return NULL;
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
