/* policy_load.c: parses and validates a policy file and indexes its rules. */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/addr.h"
#include "util/cidr.h"
#include "util/err.h"
#include "util/names.h"
#include "util/yamltree.h"
#include "conf/policy.h"
#include "conf/policy_int.h"

/* ------------------------------------------------------------------ */
/* Prefixes                                                            */

static uint32_t
v4_u32(const struct sl_addr *a)
{
	return (uint32_t)a->bytes[0] << 24 | (uint32_t)a->bytes[1] << 16 |
	    (uint32_t)a->bytes[2] << 8 | a->bytes[3];
}

static void
set_bit(uint8_t *b, unsigned i, int v)
{
	if (v)
		b[i / 8] |= (uint8_t)(0x80 >> (i % 8));
	else
		b[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
}

int
policy_prefix_canonical(const struct sl_addr *in, unsigned plen,
    struct sl_addr *out, unsigned *out_plen)
{
	struct sl_addr first, last, cf, cl, sib, cs;
	uint64_t lo, hi, size;
	unsigned i, bits;

	if (in->family == AF_INET) {
		if (plen > 32)
			return SL_ERR_INVALID;
		*out = *in;
		*out_plen = plen;
		return 0;
	}
	if (in->family != AF_INET6 || plen > 128)
		return SL_ERR_INVALID;
	first = last = *in;
	for (i = plen; i < 128; i++) {
		set_bit(first.bytes, i, 0);
		set_bit(last.bytes, i, 1);
	}
	addr_canonical(&first, &cf);
	addr_canonical(&last, &cl);
	if (cf.family == AF_INET6 && cl.family == AF_INET6) {
		*out = first;
		*out_plen = plen;
		return 0;
	}
	if (cf.family != cl.family)
		return SL_ERR_INVALID;	/* straddles an embedding range */
	lo = v4_u32(&cf);
	hi = v4_u32(&cl);
	if (hi < lo)
		return SL_ERR_INVALID;
	size = hi - lo + 1;
	if ((size & (size - 1)) != 0 || (lo & (size - 1)) != 0)
		return SL_ERR_INVALID;
	for (bits = 0; ((uint64_t)1 << bits) < size; bits++)
		;
	/* The neighbour prefix must carry other IPv4 addresses. */
	if (plen > 0) {
		sib = first;
		set_bit(sib.bytes, plen - 1,
		    !(first.bytes[(plen - 1) / 8] & (0x80 >> ((plen - 1) % 8))));
		addr_canonical(&sib, &cs);
		if (cs.family == AF_INET && v4_u32(&cs) >= lo &&
		    v4_u32(&cs) <= hi)
			return SL_ERR_INVALID;
	}
	*out = cf;
	*out_plen = 32 - bits;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

static int
parse_ports(struct ycheck *x, const struct ynode *n, struct egress_rule *r)
{
	unsigned long long v;
	const struct ynode *it;
	char e[80];
	size_t i;

	if (n->kind != YNODE_SEQ || n->n == 0) {
		ycheck_err(x, n->line, n->col, "'ports' must be a non-empty list "
		    "of port numbers (leave it out for any port)");
		return SL_ERR_INVALID;
	}
	if ((r->ports = calloc(n->n, sizeof(*r->ports))) == NULL) {
		x->nomem = 1;
		return SL_ERR_NOMEM;
	}
	for (i = 0; i < n->n; i++) {
		it = n->items[i];
		if (!ycheck_string(x, it, "ports"))
			continue;
		if (yparse_uint(it->scalar, 65535, &v) != 0 || v == 0) {
			ycheck_err(x, it->line, it->col, "'ports': '%s' is not "
			    "a port (1..65535)", yesc(it->scalar, e, sizeof(e)));
			continue;
		}
		r->ports[r->nports++] = (uint16_t)v;
	}
	return 0;
}

static void
parse_egress_rule(struct ycheck *x, const struct ynode *m, const char *list,
    struct egress_rule *r)
{
	static const char *const keys[] = { "domain", "cidr", "ports", NULL };
	const struct ynode *dom, *cidr, *ports;
	struct sl_addr a;
	unsigned plen;
	char where[32], text[ADDR_STRLEN + 8], abuf[ADDR_STRLEN], e[80];

	r->line = m->line;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'egress.%s' items must be maps "
		    "with 'domain' or 'cidr'", list);
		return;
	}
	snprintf(where, sizeof(where), "egress.%s", list);
	ycheck_keys(x, m, where, keys);
	dom = ynode_get(m, "domain");
	cidr = ynode_get(m, "cidr");
	if ((dom == NULL) == (cidr == NULL)) {
		ycheck_err(x, m->line, m->col, "an egress rule needs exactly one "
		    "of 'domain' and 'cidr'");
		return;
	}
	if ((ports = ynode_get(m, "ports")) != NULL &&
	    parse_ports(x, ports, r) != 0)
		return;
	if (dom != NULL) {
		r->kind = EGRESS_DOMAIN;
		if (parse_pattern(x, dom, "domain", r->name) != 0)
			return;
		if ((r->label = make_label(list, r->name)) == NULL)
			x->nomem = 1;
		return;
	}
	r->kind = EGRESS_CIDR;
	if (!ycheck_string(x, cidr, "cidr"))
		return;
	if (addr_parse_prefix(cidr->scalar, &a, &plen) != 0) {
		ycheck_err(x, cidr->line, cidr->col, "'cidr': bad prefix '%s' "
		    "(ADDR/LEN with zero host bits)",
		    yesc(cidr->scalar, e, sizeof(e)));
		return;
	}
	if (policy_prefix_canonical(&a, plen, &r->prefix, &r->plen) != 0) {
		ycheck_err(x, cidr->line, cidr->col, "'cidr': '%s' covers part "
		    "of an IPv4-embedding range; write the IPv4 prefix",
		    yesc(cidr->scalar, e, sizeof(e)));
		return;
	}
	snprintf(text, sizeof(text), "%s/%u",
	    addr_format(&r->prefix, abuf, sizeof(abuf)), r->plen);
	if ((r->label = make_label(list, text)) == NULL)
		x->nomem = 1;
}

static void
parse_egress_list(struct ycheck *x, const struct ynode *eg, const char *list,
    struct egress_rule **rules, size_t *nrules)
{
	const struct ynode *seq;
	char what[32];
	size_t i;

	if ((seq = ynode_get(eg, list)) == NULL)
		return;
	snprintf(what, sizeof(what), "egress.%s", list);
	if (seq->kind != YNODE_SEQ) {
		ycheck_err(x, seq->line, seq->col, "'%s' must be a list", what);
		return;
	}
	if (seq->n == 0)
		return;
	if ((*rules = calloc(seq->n, sizeof(**rules))) == NULL) {
		x->nomem = 1;
		return;
	}
	*nrules = seq->n;
	for (i = 0; i < seq->n; i++)
		parse_egress_rule(x, seq->items[i], list, &(*rules)[i]);
}

static void
parse_egress(struct ycheck *x, const struct ynode *root, struct policy *p)
{
	static const char *const keys[] = { "default", "allow", "deny", NULL };
	const struct ynode *eg, *d;
	char e[80];

	if ((eg = ynode_get(root, "egress")) == NULL)
		return;
	if (eg->kind != YNODE_MAP) {
		ycheck_err(x, eg->line, eg->col, "'egress' must be a map");
		return;
	}
	ycheck_keys(x, eg, "egress", keys);
	if ((d = ynode_get(eg, "default")) != NULL &&
	    ycheck_string(x, d, "egress.default")) {
		if (strcmp(d->scalar, "allow") == 0)
			p->default_allow = 1;
		else if (strcmp(d->scalar, "deny") != 0)
			ycheck_err(x, d->line, d->col, "'egress.default': '%s' "
			    "is neither deny nor allow",
			    yesc(d->scalar, e, sizeof(e)));
	}
	parse_egress_list(x, eg, "allow", &p->allow, &p->nallow);
	parse_egress_list(x, eg, "deny", &p->deny, &p->ndeny);
}

static void
policy_walk(struct ycheck *x, const struct ynode *root, struct policy *p)
{
	static const char *const keys[] = { "name", "egress", "intercept",
	    "observe", "budgets", "tokens", "alpn", NULL };
	const struct ynode *n;
	char e[80];

	if (root == NULL) {
		ycheck_err(x, 1, 1, "empty policy (it needs at least 'name')");
		return;
	}
	if (root->kind != YNODE_MAP) {
		ycheck_err(x, root->line, root->col,
		    "a policy must be a map of keys");
		return;
	}
	ycheck_keys(x, root, NULL, keys);
	if ((n = ynode_get(root, "name")) == NULL)
		ycheck_err(x, root->line, root->col,
		    "missing required key 'name'");
	else if (ycheck_string(x, n, "name")) {
		if (!policy_name_valid(n->scalar))
			ycheck_err(x, n->line, n->col, "'name': '%s' is not a "
			    "valid policy name ([A-Za-z0-9][A-Za-z0-9._-]{0,62})",
			    yesc(n->scalar, e, sizeof(e)));
		else
			dup_string(x, n->scalar, &p->name);
	}
	if ((n = ynode_get(root, "observe")) != NULL &&
	    ycheck_string(x, n, "observe")) {
		if (strcmp(n->scalar, "never") == 0)
			p->observe_never = 1;
		else if (strcmp(n->scalar, "allowed") != 0)
			ycheck_err(x, n->line, n->col, "'observe': '%s' is "
			    "neither never nor allowed",
			    yesc(n->scalar, e, sizeof(e)));
	}
	parse_egress(x, root, p);
	if ((n = ynode_get(root, "alpn")) != NULL)
		policy_parse_alpn(x, n, "alpn", &p->alpn);
	policy_parse_intercepts(x, root, p);
	if ((n = ynode_get(root, "budgets")) != NULL)
		budget_list_parse(x, n, "budgets", &p->budgets);
	if ((n = ynode_get(root, "tokens")) != NULL)
		token_list_parse(x, n, &p->tokens);
	policy_link_tokens(x, p);
}

/*
 * Every token endpoint must be a destination the policy itself allows by
 * name: sluiced reaches it on the sandbox's behalf.
 */
static void
check_token_hosts(struct ycheck *x, const struct policy *p)
{
	const struct mint_source *t;
	struct decision d;
	size_t i;

	for (i = 0; i < p->tokens.n; i++) {
		t = &p->tokens.v[i];
		policy_check_name_alone(p, t->host, (uint16_t)t->port, &d);
		if (d.verdict == VERDICT_DENY)
			ycheck_err(x, t->line, 1, "token '%s': this policy does "
			    "not allow its token_url's host %s on port %u (%s)",
			    t->name, t->host, t->port, d.reason);
	}
}

/* ------------------------------------------------------------------ */
/* Indexes                                                             */

/*
 * Adds a list's domain rules to its namesets and links rules that share a
 * pattern, so lookups can visit every rule of a pattern in order.
 */
static int
index_names(const struct egress_rule *rules, size_t n, struct nameset *all,
    struct nameset *wild, uint32_t **nextp)
{
	struct nameref *refs = NULL;
	uint32_t *next = NULL;
	size_t i, cnt = 0;
	int r = SL_ERR_INTERNAL;

	if ((next = calloc(n ? n : 1, sizeof(*next))) == NULL ||
	    (refs = calloc(n ? n : 1, sizeof(*refs))) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		next[i] = NO_RULE;
		if (rules[i].kind != EGRESS_DOMAIN)
			continue;
		refs[cnt].name = rules[i].name;
		refs[cnt++].idx = i;
		if ((r = nameset_add(all, rules[i].name, (uint32_t)i)) != 0)
			goto out;
		if (rules[i].name[0] == '*' &&
		    (r = nameset_add(wild, rules[i].name, (uint32_t)i)) != 0)
			goto out;
	}
	qsort(refs, cnt, sizeof(*refs), nameref_cmp);
	for (i = 1; i < cnt; i++)
		if (strcmp(refs[i - 1].name, refs[i].name) == 0)
			next[refs[i - 1].idx] = (uint32_t)refs[i].idx;
	*nextp = next;
	next = NULL;
	r = 0;
 out:
	free(refs);
	free(next);
	return r;
}

static int
index_cidrs(const struct egress_rule *rules, size_t n, struct cidr_tree *t)
{
	size_t i;
	int r;

	for (i = 0; i < n; i++)
		if (rules[i].kind == EGRESS_CIDR &&
		    (r = cidr_tree_add(t, &rules[i].prefix, rules[i].plen,
		    (uint32_t)i)) != 0)
			return r;
	return 0;
}

static int
policy_index(struct policy *p)
{
	size_t i;
	int r;

	if ((p->allow_names = nameset_new()) == NULL ||
	    (p->deny_names = nameset_new()) == NULL ||
	    (p->intercept_names = nameset_new()) == NULL ||
	    (p->allow_wild = nameset_new()) == NULL ||
	    (p->deny_wild = nameset_new()) == NULL ||
	    (p->allow_cidrs = cidr_tree_new()) == NULL ||
	    (p->deny_cidrs = cidr_tree_new()) == NULL)
		return SL_ERR_NOMEM;
	if ((r = index_names(p->allow, p->nallow, p->allow_names,
	    p->allow_wild, &p->allow_next)) != 0 ||
	    (r = index_names(p->deny, p->ndeny, p->deny_names, p->deny_wild,
	    &p->deny_next)) != 0 ||
	    (r = index_cidrs(p->allow, p->nallow, p->allow_cidrs)) != 0 ||
	    (r = index_cidrs(p->deny, p->ndeny, p->deny_cidrs)) != 0)
		return r;
	for (i = 0; i < p->nintercepts; i++)
		if ((r = nameset_add(p->intercept_names, p->intercepts[i].host,
		    (uint32_t)i)) != 0)
			return r;
	return 0;
}

int
policy_parse(const char *file, const char *buf, size_t len,
    struct policy **out, struct errlist *errs)
{
	struct ydoc *doc = NULL;
	struct policy *p = NULL;
	struct ycheck x = { file, errs, 0, 0 };
	size_t first = errs != NULL ? errs->n : 0;
	int r = SL_ERR_INTERNAL;

	if (len > POLICY_MAX_BYTES) {
		if (errs != NULL)
			errlist_add(errs, file, 0, 0, "larger than %u bytes",
			    POLICY_MAX_BYTES);
		r = SL_ERR_TOO_BIG;
		goto out;
	}
	if ((r = ydoc_parse_limit(file, buf, len, POLICY_MAX_NODES, &doc,
	    errs)) != 0)
		goto out;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	atomic_init(&p->refs, 1);
	if ((p->file = strdup(file)) == NULL) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	crypto_generichash(p->digest, sizeof(p->digest),
	    (const unsigned char *)buf, len, NULL, 0);
	policy_walk(&x, doc->root, p);
	if (x.nomem) {
		r = SL_ERR_NOMEM;
		goto out;
	}
	if (x.nerr != 0) {
		ycheck_sort(&x, first);
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = policy_index(p)) != 0) {
		if (r != SL_ERR_NOMEM && errs != NULL)
			errlist_add(errs, file, 0, 0, "cannot index rules: %s",
			    err_str(r));
		goto out;
	}
	check_token_hosts(&x, p);
	if (x.nerr != 0) {
		ycheck_sort(&x, first);
		r = SL_ERR_INVALID;
		goto out;
	}
	*out = p;
	p = NULL;
	r = 0;
 out:
	ydoc_free(doc);
	policy_free(p);
	return r;
}

int
policy_load(const char *path, struct policy **out, struct errlist *errs)
{
	char *buf = NULL;
	size_t len = 0;
	int r = SL_ERR_INTERNAL;

	if ((r = ydoc_read_file(path, POLICY_MAX_BYTES, &buf, &len, errs)) != 0)
		goto out;
	r = policy_parse(path, buf, len, out, errs);
 out:
	free(buf);
	return r;
}
