/*
 * icpt_token.c: the minted tokens ({{token:NAME}}) an inject rule's
 * request gets.  A token is minted per sandbox, policy revision, source
 * and version of the source's secret, once however many requests want it
 * (loop/mintcache.h), by the worker whose request came first
 * (conn/minter.h).  A request whose token is being minted waits in
 * RQ_TOKEN: its head stays in the parser, nothing more of the sandbox's
 * is read, and the head is judged again from the start once the mint
 * ends (the table wakes us through ic->wake, from whichever thread
 * minted).
 *
 * The source's secret is a credential of the request like any other: it
 * must be bound to the request's host (where what is minted from it
 * goes) and to the token endpoint's (where it goes itself); it is
 * listed in the record's "secrets", spends budgets and is redacted.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "util/log.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/pemkey.h"
#include "keys/secrets.h"
#include "audit/arec.h"
#include "loop/loop.h"
#include "loop/mintcache.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"
#include "conn/minter.h"

static int
is_header(const struct secret *s)
{
	return s->kind == SEALED_KIND_HEADER;
}

static int
is_key(const struct secret *s)
{
	return s->pem != NULL && s->pem->key != NULL;
}

/* The mint ended (any thread, the table's mutex held): a step here. */
static void
token_wake(void *arg)
{
	struct icpt *ic = arg;

	event_active(ic->wake, EV_TIMEOUT, 0);
}

int
icpt_token_key(const struct conn *c, const struct mint_source *src,
    const struct secret *s, char out[MINT_KEY_MAX])
{
	int n;

	n = snprintf(out, MINT_KEY_MAX, "%s\n%llu\n%s\n%s\n%s\n%s@%llu:%s",
	    c->sb != NULL && c->sb->id != NULL ? c->sb->id : "",
	    c->counter != NULL ? (unsigned long long)c->counter->serial : 0,
	    c->policy_name, src->digest, src->name, s->name,
	    (unsigned long long)s->version, s->fp);
	return n > 0 && n < MINT_KEY_MAX ? 0 : -1;
}

/* The secret src mints from, for this request; NULL after refusing. */
static const struct secret *
source_secret(struct icpt *ic, const struct mint_source *src, int ka_close)
{
	const struct secret *s;
	char detail[192];

	if ((s = icpt_secret_for(ic, src->secret, mint_kind_signs(src->kind) ?
	    is_key : is_header, mint_kind_signs(src->kind) ? "a private key" :
	    "a header value", ka_close)) == NULL)
		return NULL;
	if (!secret_bound(s, src->host)) {
		snprintf(detail, sizeof(detail), "sluice: the secret '%s' is "
		    "not bound to the token endpoint %s", s->name, src->host);
		icpt_refuse(ic, 403, "denied", "secret-host-binding", detail,
		    ka_close);
		return NULL;
	}
	return s;
}

int
icpt_tokens(struct icpt *ic, const struct intercept_rule *rule,
    struct inject_token *toks, const struct secret **secs, size_t *n,
    int ka_close)
{
	struct conn *c = ic->c;
	const struct mint_source *const *srcs = rule->tokens;
	struct minter_for f;
	struct mtoken *t;
	const struct secret *s;
	char key[MINT_KEY_MAX], why[MINT_WHY_MAX], detail[MINT_WHY_MAX + 64];
	size_t i, k;

	*n = 0;
	if (rule->ntokens == 0)
		return 0;
	if (c->l->mints == NULL) {
		icpt_refuse(ic, 503, "unavailable", "token-unavailable",
		    "sluice: this gateway mints no tokens", ka_close);
		return -1;
	}
	k = rule->ntokens;
	ic->tok_wait.wake = token_wake;
	ic->tok_wait.arg = ic;
	for (i = 0; i < k; i++) {
		if ((s = source_secret(ic, srcs[i], ka_close)) == NULL)
			return -1;
		if (icpt_token_key(c, srcs[i], s, key) != 0) {
			icpt_refuse(ic, 500, "internal", "token-unavailable",
			    "sluice: the token's key is too long", ka_close);
			return -1;
		}
		f = (struct minter_for){ key, c->sb != NULL ? c->sb->id : NULL,
		    c->policy_name, (struct policy *)c->pol, srcs[i], s };
		switch (mintcache_get(c->l->mints, key, (int64_t)time(NULL),
		    &ic->tok_wait, &t, why)) {
		case MINT_HAVE_REFRESH:
			minter_start(c->l, &f);	/* in the background */
			/* FALLTHROUGH */
		case MINT_HAVE:
			ic->cur.mtoks[ic->cur.nmtoks] = t;
			ic->cur.mtok_src[ic->cur.nmtoks++] = srcs[i]->name;
			toks[i] = (struct inject_token){ srcs[i]->name, t->value,
			    t->len };
			secs[i] = s;
			break;
		case MINT_START:
			minter_start(c->l, &f);
			/* FALLTHROUGH */
		case MINT_WAIT:
			return 1;
		case MINT_FAILED:
			snprintf(detail, sizeof(detail), "sluice: no token from "
			    "'%s': %s", srcs[i]->name, why);
			icpt_refuse(ic, 502, "bad-gateway", "token-unavailable",
			    detail, ka_close);
			return -1;
		}
	}
	*n = k;
	return 0;
}

int
icpt_token_ready(struct icpt *ic)
{
	return !mintcache_waiting(ic->c->l->mints, &ic->tok_wait);
}

void
icpt_token_cancel(struct icpt *ic)
{
	if (ic->c->l->mints != NULL)
		mintcache_cancel(ic->c->l->mints, &ic->tok_wait);
}

size_t
icpt_tokens_json(const struct icpt_req *r, char *out, size_t cap)
{
	size_t i, o = 0;

	out[o++] = '[';
	for (i = 0; i < r->nmtoks; i++) {
		if (cap - o < 64)
			return 0;
		o += (size_t)snprintf(out + o, cap - o, "%s{\"fingerprint\":",
		    i > 0 ? "," : "");
		if (arec_json_str(out, cap - 48, &o, r->mtoks[i]->fp,
		    strlen(r->mtoks[i]->fp)) < 0)
			return 0;
		memcpy(out + o, ",\"source\":", 10);
		o += 10;
		if (arec_json_str(out, cap - 4, &o, r->mtok_src[i],
		    strlen(r->mtok_src[i])) < 0)
			return 0;
		out[o++] = '}';
	}
	out[o++] = ']';
	return o;
}
