/*
 * icpt_budget.c: the budgets of the credentials a request gets, its
 * sandbox's (its policy's budgets) and the gateway's (sluiced.yaml's), are
 * spent before a byte of it goes upstream, all of them or none.  A budget
 * used up refuses the request with 429 and Retry-After, an audit record
 * naming the secret and the budget, and a metric.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include "util/clock.h"
#include "util/metrics.h"
#include "conf/budget.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/secrets.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/spend.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/deny.h"
#include "conn/icpt_int.h"

/* The sources no sandbox owns share one budget of their own. */
#define UNKNOWN_SANDBOX	"(unknown)"

static const char *const budget_names[] = {
	"requests_per_minute", "requests_per_day",
};

/* Adds b's windows for secret to items; sandbox NULL: the gateway's. */
static size_t
add_items(struct spend_item *items, size_t n, const struct budget_rule *b,
    const char *sandbox, const char *secret)
{
	if (b == NULL)
		return n;
	if (b->per_minute > 0 && n < SPEND_MAX_TAKE)
		items[n++] = (struct spend_item){ sandbox, secret, SPEND_MINUTE,
		    b->per_minute };
	if (b->per_day > 0 && n < SPEND_MAX_TAKE)
		items[n++] = (struct spend_item){ sandbox, secret, SPEND_DAY,
		    b->per_day };
	return n;
}

size_t
icpt_budget_items(const struct conn *c, const struct secret *s,
    struct spend_item *items, size_t n)
{
	const char *sb = c->sb != NULL ? c->sb->id : UNKNOWN_SANDBOX;

	if (c->pol != NULL)
		n = add_items(items, n, budget_find(&c->pol->budgets, s->name),
		    sb, s->name);
	return add_items(items, n, budget_find(&c->l->cfg->budgets, s->name),
	    NULL, s->name);
}

/* The record and the metric of a budget used up. */
static void
note_over(struct icpt *ic, const struct spend_item *it, unsigned retry_s)
{
	struct conn *c = ic->c;
	struct arec rec;
	char key[24];

	snprintf(key, sizeof(key), "%s/%s", it->sandbox ? "sandbox" : "gateway",
	    it->window == SPEND_MINUTE ? "minute" : "day");
	mtable_add(&c->l->metrics.budget_refusals, key, it->secret);
	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "path", ic->cur.path);
	arec_str(&rec, "rule", ic->cur.rule[0] ? ic->cur.rule : NULL);
	arec_str(&rec, "secret", it->secret);
	arec_str(&rec, "budget", budget_names[it->window]);
	arec_str(&rec, "scope", it->sandbox ? "sandbox" : "gateway");
	arec_int(&rec, "limit", it->limit);
	arec_int(&rec, "retry_after", retry_s);
	audit_write_rec(c->l->audit, "budget_exceeded", &rec);
}

int
icpt_budget_take(struct icpt *ic, const struct inject *inj)
{
	struct conn *c = ic->c;
	struct spend_item items[SPEND_MAX_TAKE];
	struct deny_what dw = { 429, "refused", NULL, NULL, NULL,
	    "budget-exceeded", NULL, NULL, NULL, NULL, 0 };
	char msg[256];
	uint64_t retry_ms;
	size_t i, n = 0, over;

	for (i = 0; i < inj->nused; i++)
		n = icpt_budget_items(c, inj->used[i], items, n);
	if (n == 0 || spend_take(c->l->spend, items, n, mono_ms(), &over,
	    &retry_ms) == 0)
		return 0;
	if (over == n) {
		icpt_refuse(ic, 503, "unavailable", "budget-unavailable",
		    "sluice: the budgets cannot be counted", 0);
		return -1;
	}
	dw.retry_after = (unsigned)((retry_ms + 999) / 1000);
	if (dw.retry_after == 0)
		dw.retry_after = 1;
	dw.secret = items[over].secret;
	dw.budget = budget_names[items[over].window];
	dw.scope = items[over].sandbox ? "sandbox" : "gateway";
	snprintf(msg, sizeof(msg), "sluice: the secret '%s' has used its "
	    "budget of %u requests per %s %s; retry in %u s", dw.secret,
	    items[over].limit, items[over].window == SPEND_MINUTE ? "minute" :
	    "day", items[over].sandbox ? "for this sandbox" :
	    "over all sandboxes", dw.retry_after);
	dw.message = msg;
	note_over(ic, &items[over], dw.retry_after);
	icpt_refuse_what(ic, &ic->cur, &dw, "deny", 0);
	return -1;
}
