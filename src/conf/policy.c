/* policy.c: a policy's lifetime and the connection verdicts it gives. */
#include "autoconf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/addr.h"
#include "util/cidr.h"
#include "util/names.h"
#include "conf/policy.h"
#include "conf/policy_int.h"

/* ------------------------------------------------------------------ */
/* Lifetime                                                            */

static void
free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
free_kv(struct kv *kv, size_t n)
{
	size_t i;

	if (kv == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

static void
free_egress(struct egress_rule *rules, size_t n)
{
	size_t i;

	if (rules == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(rules[i].label);
		free(rules[i].ports);
	}
	free(rules);
}

struct policy *
policy_ref(struct policy *p)
{
	atomic_fetch_add(&p->refs, 1);
	return p;
}

void
policy_free(struct policy *p)
{
	struct intercept_rule *r;
	size_t i;

	if (p == NULL || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	free(p->name);
	free(p->file);
	free_egress(p->allow, p->nallow);
	free_egress(p->deny, p->ndeny);
	for (i = 0; p->intercepts != NULL && i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		free(r->name);
		free(r->label);
		free_strv(r->methods, r->nmethods);
		free(r->path);
		free_kv(r->query, r->nquery);
		free_kv(r->headers, r->nheaders);
		free_kv(r->inject_set, r->ninject_set);
		free_strv(r->inject_remove, r->ninject_remove);
		free_strv(r->placeholders, r->nplaceholders);
		free(r->sigv4_secret);
		free(r->sigv4_service);
		free(r->sigv4_region);
		free(r->forward_to);
		free(r->forward_audience);
		free(r->upstream_ca);
		free(r->client_cert);
		free_strv(r->pins, r->npins);
	}
	free(p->intercepts);
	budget_list_free(&p->budgets);
	token_list_free(&p->tokens);
	nameset_free(p->allow_names);
	nameset_free(p->deny_names);
	nameset_free(p->intercept_names);
	nameset_free(p->allow_wild);
	nameset_free(p->deny_wild);
	free(p->allow_next);
	free(p->deny_next);
	cidr_tree_free(p->allow_cidrs);
	cidr_tree_free(p->deny_cidrs);
	free(p);
}

/* ------------------------------------------------------------------ */
/* Decisions                                                           */

/* Which ports a rule must cover to count. */
enum port_need {
	PORT_THIS,	/* the given port */
	PORT_ALL,	/* every port: a rule without ports */
	PORT_ANY,	/* some port: any rule */
};

static int
rule_covers(const struct egress_rule *r, enum port_need need, uint16_t port)
{
	size_t i;

	if (need == PORT_ANY || r->ports == NULL)
		return 1;
	if (need == PORT_ALL)
		return 0;
	for (i = 0; i < r->nports; i++)
		if (r->ports[i] == port)
			return 1;
	return 0;
}

/* The first rule in a same-pattern chain that covers the port. */
static int
chain_hit(const struct egress_rule *rules, const uint32_t *next, uint32_t id,
    enum port_need need, uint16_t port, uint32_t *hit)
{
	for (; id != NO_RULE; id = next[id])
		if (rule_covers(&rules[id], need, port)) {
			*hit = id;
			return 1;
		}
	return 0;
}

/*
 * Whether any domain rule of a list matches name and covers the port: the
 * exact pattern first, then each wildcard from the longest suffix to the
 * shortest (the wildcard-only set, asked again with the suffix it matched,
 * names the next shorter one).
 */
static int
name_hit(const struct egress_rule *rules, const uint32_t *next,
    const struct nameset *all, const struct nameset *wild, const char *name,
    enum port_need need, uint16_t port, uint32_t *hit)
{
	const char *n = name;
	uint32_t id;

	if (all == NULL)
		return 0;
	if (nameset_match(all, name, &id) && rules[id].name[0] != '*' &&
	    chain_hit(rules, next, id, need, port, hit))
		return 1;
	while (nameset_match(wild, n, &id)) {
		if (chain_hit(rules, next, id, need, port, hit))
			return 1;
		n = rules[id].name + 2;
	}
	return 0;
}

struct cidr_arg {
	const struct egress_rule *rules;
	enum port_need	 need;
	uint16_t	 port;
	uint32_t	 hit;
};

static int
cidr_visit(uint32_t id, void *arg)
{
	struct cidr_arg *a = arg;

	if (!rule_covers(&a->rules[id], a->need, a->port))
		return 0;
	a->hit = id;
	return 1;
}

static int
cidr_hit_need(const struct cidr_tree *t, const struct egress_rule *rules,
    const struct sl_addr *a, enum port_need need, uint16_t port, uint32_t *hit)
{
	struct cidr_arg arg = { rules, need, port, NO_RULE };

	if (t == NULL || cidr_tree_walk(t, a, cidr_visit, &arg) == 0)
		return 0;
	*hit = arg.hit;
	return 1;
}

static int
cidr_hit(const struct cidr_tree *t, const struct egress_rule *rules,
    const struct sl_addr *a, uint16_t port, uint32_t *hit)
{
	return cidr_hit_need(t, rules, a, PORT_THIS, port, hit);
}

static void
decide(struct decision *d, enum verdict v, const char *reason,
    const char *rule, int need_binding)
{
	d->verdict = v;
	d->reason = reason;
	d->rule = rule;
	d->need_binding = need_binding;
	d->alpn = NULL;
}

void
policy_check_dest(const struct policy *p, const struct sl_addr *dst,
    uint16_t port, struct decision *d)
{
	struct sl_addr a;
	uint32_t id;

	addr_canonical(dst, &a);
	if (addr_classify(&a, NULL) == ADDR_FORBIDDEN) {
		decide(d, VERDICT_DENY, "forbidden-address", NULL, 0);
		return;
	}
	if (cidr_hit(p->deny_cidrs, p->deny, &a, port, &id)) {
		decide(d, VERDICT_DENY, "deny-cidr", p->deny[id].label, 0);
		return;
	}
	decide(d, VERDICT_CONTINUE, NULL, NULL, 0);
}

/* Step 5 once step 2 said CONTINUE; a is canonical. */
static void
opaque_verdict(const struct policy *p, const struct sl_addr *a,
    uint16_t port, struct decision *d)
{
	uint32_t id;

	if (cidr_hit(p->allow_cidrs, p->allow, a, port, &id))
		decide(d, VERDICT_PASS, "allow-cidr", p->allow[id].label, 0);
	else if (addr_classify(a, NULL) != ADDR_PUBLIC)
		decide(d, VERDICT_DENY, "private-address", NULL, 0);
	else
		decide(d, VERDICT_DENY, "no-cidr-rule", NULL, 0);
}

/*
 * What the name alone says, norm normalised: the deny list, interception,
 * the allow list, the default.  A known port (port_known) is matched as
 * rules give ports; an unknown one counts as refused only by a rule for
 * every port and allowed by a rule for any.
 */
static void
name_verdict(const struct policy *p, const char *norm, int port_known,
    uint16_t port, struct decision *d)
{
	enum port_need deny_need = port_known ? PORT_THIS : PORT_ALL;
	enum port_need allow_need = port_known ? PORT_THIS : PORT_ANY;
	uint32_t id;

	if (name_hit(p->deny, p->deny_next, p->deny_names, p->deny_wild, norm,
	    deny_need, port, &id)) {
		decide(d, VERDICT_DENY, "deny-name", p->deny[id].label, 0);
		return;
	}
	if (p->intercept_names != NULL &&
	    nameset_match(p->intercept_names, norm, &id)) {
		decide(d, VERDICT_INTERCEPT, "intercept",
		    p->intercepts[id].label, 1);
		d->alpn = p->intercepts[id].alpn.len > 0 ?
		    &p->intercepts[id].alpn : &p->alpn;
		return;
	}
	if (name_hit(p->allow, p->allow_next, p->allow_names, p->allow_wild,
	    norm, allow_need, port, &id)) {
		decide(d, VERDICT_PASS, "allow-name", p->allow[id].label, 1);
		return;
	}
	if (p->default_allow) {
		decide(d, VERDICT_PASS, "default-allow", NULL, 1);
		return;
	}
	decide(d, VERDICT_DENY, "not-allowed", NULL, 0);
}

void
policy_check_name_alone(const struct policy *p, const char *name,
    uint16_t port, struct decision *d)
{
	char norm[NAME_BUFSZ];

	if (name == NULL || name_normalize(name, strlen(name), norm) != 0) {
		decide(d, VERDICT_DENY, "invalid-name", NULL, 0);
		return;
	}
	name_verdict(p, norm, 1, port, d);
	if (d->verdict != VERDICT_DENY)
		decide(d, VERDICT_CONTINUE, NULL, NULL, 0);
}

void
policy_check_name(const struct policy *p, const char *name,
    const struct sl_addr *dst, uint16_t port, struct decision *d)
{
	char norm[NAME_BUFSZ];
	struct decision nd;
	struct sl_addr a;
	uint32_t id;
	int cidr;

	/* Step 2 again, so a caller that skipped it still cannot pass. */
	policy_check_dest(p, dst, port, d);
	if (d->verdict != VERDICT_CONTINUE)
		return;
	if (name == NULL) {
		policy_check_opaque(p, dst, port, d);
		return;
	}
	if (name_normalize(name, strlen(name), norm) != 0) {
		decide(d, VERDICT_DENY, "invalid-name", NULL, 0);
		return;
	}
	name_verdict(p, norm, 1, port, &nd);
	if (nd.verdict == VERDICT_DENY && strcmp(nd.reason, "deny-name") == 0) {
		*d = nd;
		return;
	}
	/*
	 * Private space without an allow CIDR is refused whatever the name,
	 * an intercepted one too: its credential must not go there.
	 */
	addr_canonical(dst, &a);
	cidr = cidr_hit(p->allow_cidrs, p->allow, &a, port, &id);
	if (!cidr && addr_classify(&a, NULL) != ADDR_PUBLIC) {
		decide(d, VERDICT_DENY, "private-address", NULL, 0);
		return;
	}
	if (nd.verdict == VERDICT_INTERCEPT) {
		*d = nd;
		return;
	}
	/* An allow CIDR comes before the name's allowance. */
	if (cidr) {
		decide(d, VERDICT_PASS, "allow-cidr", p->allow[id].label, 0);
		return;
	}
	*d = nd;
}

void
policy_check_opaque(const struct policy *p, const struct sl_addr *dst,
    uint16_t port, struct decision *d)
{
	struct sl_addr a;

	policy_check_dest(p, dst, port, d);
	if (d->verdict != VERDICT_CONTINUE)
		return;
	addr_canonical(dst, &a);
	opaque_verdict(p, &a, port, d);
}

int
policy_addr_answerable(const struct policy *p, const struct sl_addr *addr)
{
	struct sl_addr a;
	uint32_t id;

	addr_canonical(addr, &a);
	switch (addr_classify(&a, NULL)) {
	case ADDR_FORBIDDEN:
		return 0;
	case ADDR_PRIVATE:
		/* DNS rebinding: private only where an allow CIDR names it. */
		if (!cidr_hit_need(p->allow_cidrs, p->allow, &a, PORT_ANY, 0, &id))
			return 0;
		break;
	case ADDR_PUBLIC:
		break;
	}
	/* A deny CIDR limited to some ports leaves the address usable. */
	return !cidr_hit_need(p->deny_cidrs, p->deny, &a, PORT_ALL, 0, &id);
}

int
policy_name_allowed(const struct policy *p, const char *name)
{
	return policy_name_refusal(p, name) == NULL;
}

int
policy_intercepts(const struct policy *p, const char *name)
{
	uint32_t id;

	return p->intercept_names != NULL &&
	    nameset_match(p->intercept_names, name, &id);
}

const char *
policy_name_refusal(const struct policy *p, const char *name)
{
	char norm[NAME_BUFSZ];
	struct decision d;

	if (name == NULL || name_normalize(name, strlen(name), norm) != 0)
		return "invalid-name";
	/* A deny rule limited to some ports leaves the name usable. */
	name_verdict(p, norm, 0, 0, &d);
	return d.verdict == VERDICT_DENY ? d.reason : NULL;
}

int
policy_name_valid(const char *s)
{
	size_t i;

	if (!isalnum((unsigned char)s[0]))
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (i > 62)
			return 0;
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return 0;
	}
	return 1;
}

int
policy_pattern_match(const char *pattern, const char *name)
{
	size_t pl, nl;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, name) == 0;
	pl = strlen(pattern + 1);	/* ".suffix" */
	nl = strlen(name);
	return nl > pl && strcmp(name + nl - pl, pattern + 1) == 0;
}
