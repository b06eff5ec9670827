/*
 * icpt_ph.c: placeholders in intercepted requests (keys/placeholder.h).
 * An inject rule swaps the placeholders of the secrets it names, and that
 * are bound to the request's host, for their values: in header values, in
 * Basic credentials (decoded, swapped, encoded again) and in the query
 * (percent-encoded).  A placeholder of the sandbox left anywhere in the
 * head after that, in any request, is an attempt to send a credential
 * where it may not go: refused with 403 placeholder-elsewhere and
 * audited.  The swapped values are written to the worker's guarded
 * scratch, after what inject_render wrote there, and the secrets join the
 * request's (audited, redacted, counted against budgets).
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "util/ascii.h"
#include "parse/httphead.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/placeholder.h"
#include "keys/secrets.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

/* What one request's placeholders come to. */
struct phwork {
	struct icpt	*ic;
	const char	*sandbox;
	struct ph_swap	 swaps[PH_MAX_SWAP];
	size_t		 nswaps;
	size_t		 made[PH_MAX_SWAP];	/* swaps of each, so far */
	char		*buf;		/* the scratch, guarded */
	size_t		 off;		/* used of it */
	const struct secret *found;	/* a placeholder left: its secret */
	const char	*where;
};

/* A Basic credential decoded at w->buf[w->off..); its length or -1. */
static long
basic_decode(struct phwork *w, const char *b64, size_t blen)
{
	size_t n = 0;

	if (sodium_base642bin((unsigned char *)w->buf + w->off,
	    INJECT_BUF - w->off, b64, blen, NULL, &n, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0)
		return -1;
	return (long)n;
}

/* Whether s[0..len) holds a placeholder of the sandbox (w->found). */
static int
holds(struct phwork *w, const char *s, size_t len, const char *where)
{
	const struct secret *which = NULL;

	if (memmem(s, len, PH_PREFIX, PH_PREFIX_LEN) == NULL ||
	    placeholder_find(w->ic->c->l->secrets, w->ic->c->l->st->secrets,
	    w->sandbox, s, len, &which) == NULL)
		return 0;
	w->found = which;
	w->where = where;
	return 1;
}

/*
 * s[0..len) swapped into the scratch, NUL-terminated; *out points there.
 * Returns the swaps made, or -1 when the scratch is full.
 */
static long
swap_into(struct phwork *w, const char *s, size_t len, int pct,
    const char **out)
{
	int in[PH_MAX_SWAP], any = 0;
	size_t count = 0, k;
	long n;

	for (k = 0; k < w->nswaps; k++)
		any |= in[k] = memmem(s, len, w->swaps[k].ph, PH_LEN) != NULL;
	if (!any)
		return 0;
	if ((n = placeholder_swap(s, len, w->swaps, w->nswaps, pct,
	    w->buf + w->off, INJECT_BUF - w->off - 1, &count)) < 0)
		return -1;
	for (k = 0; k < w->nswaps; k++)
		w->made[k] += (size_t)in[k];
	*out = w->buf + w->off;
	w->buf[w->off + (size_t)n] = '\0';
	w->off += (size_t)n + 1;
	return (long)count;
}

/* A Basic credential with placeholders swapped, as "Basic <base64>". */
static long
swap_basic(struct phwork *w, const char *b64, size_t blen, const char **out)
{
	const char *plain, *swapped;
	size_t start = w->off, enc;
	long n, made;

	if ((n = basic_decode(w, b64, blen)) < 0)
		return 0;	/* not base64: judged as text */
	plain = w->buf + w->off;
	w->off += (size_t)n;
	if ((made = swap_into(w, plain, (size_t)n, 0, &swapped)) <= 0) {
		sodium_memzero(w->buf + start, w->off - start);
		w->off = start;
		return made;
	}
	enc = sodium_base64_ENCODED_LEN(strlen(swapped),
	    sodium_base64_VARIANT_ORIGINAL);
	if (INJECT_BUF - w->off < PH_BASIC_LEN + enc)
		return -1;
	memcpy(w->buf + w->off, "Basic ", PH_BASIC_LEN);
	sodium_bin2base64(w->buf + w->off + PH_BASIC_LEN, enc,
	    (const unsigned char *)swapped, strlen(swapped),
	    sodium_base64_VARIANT_ORIGINAL);
	*out = w->buf + w->off;
	w->off += PH_BASIC_LEN + enc;
	return made;
}

/* The swaps rule makes for this request: its secrets bound to the host. */
static void
swaps_of(struct phwork *w, const struct intercept_rule *rule)
{
	struct conn *c = w->ic->c;
	const struct secret *s;
	size_t i;

	if (rule->action != ICPT_INJECT)
		return;
	for (i = 0; i < rule->nplaceholders && w->nswaps < PH_MAX_SWAP; i++) {
		s = secret_set_find(c->l->st->secrets, rule->placeholders[i],
		    strlen(rule->placeholders[i]));
		if (s == NULL || s->kind != SEALED_KIND_HEADER ||
		    !secret_bound(s, c->name))
			continue;	/* left as it is: refused below */
		w->swaps[w->nswaps].s = s;
		placeholder_of(c->l->secrets, w->sandbox, s->name,
		    w->swaps[w->nswaps++].ph);
	}
}

/*
 * Whether inj drops or sets name already (the rule sets or removes it, or
 * it is Accept-Encoding: identity): such a header is not the sandbox's.
 */
static int
dropped(const struct inject *inj, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < inj->ndrop; i++)
		if (ascii_eq(name, len, inj->drop[i]))
			return 1;
	for (i = 0; i < inj->nadd; i++)
		if (ascii_eq(name, len, inj->add[i].name))
			return 1;
	return 0;
}

/*
 * Swaps in header values.  A header swapped goes as a whole name: every
 * line of that name is dropped and set again, swapped or as it was.
 */
static int
swap_headers(struct phwork *w, const struct http_head *h, struct inject *inj)
{
	const char *vals[HTTP_MAX_HEADERS], *b64;
	char *lower;
	int swapped[HTTP_MAX_HEADERS];
	size_t i, j, blen, names = 0;
	long made;

	for (i = 0; i < h->nheaders; i++) {
		const struct http_header *x = &h->headers[i];

		vals[i] = x->value;
		swapped[i] = 0;
		if (memmem(x->value, x->value_len, PH_PREFIX,
		    PH_PREFIX_LEN) == NULL && !placeholder_basic_of(x->value,
		    x->value_len, &b64, &blen))
			continue;
		if (dropped(inj, x->name, x->name_len))
			continue;
		if (placeholder_basic_of(x->value, x->value_len, &b64, &blen))
			made = swap_basic(w, b64, blen, &vals[i]);
		else
			made = swap_into(w, x->value, x->value_len, 0, &vals[i]);
		if (made < 0)
			return -1;
		swapped[i] = made > 0;
	}
	for (i = 0; i < h->nheaders; i++) {
		if (!swapped[i])
			continue;
		if (names++ == INJECT_MAX_SWAPPED ||
		    INJECT_BUF - w->off < h->headers[i].name_len + 1)
			return -1;
		/* The name in lower case, as drop[] and ascii_eq() want it. */
		lower = w->buf + w->off;
		for (j = 0; j < h->headers[i].name_len; j++)
			lower[j] = (char)ascii_lower(
			    (unsigned char)h->headers[i].name[j]);
		lower[j] = '\0';
		w->off += j + 1;
		inj->drop[inj->ndrop++] = lower;
		for (j = i; j < h->nheaders; j++) {
			if (!ascii_eq(h->headers[j].name, h->headers[j].name_len,
			    lower))
				continue;
			if (inj->nadd == INJECT_MAX_ADD)
				return -1;
			inj->add[inj->nadd].name = h->headers[j].name;
			inj->add[inj->nadd++].value = vals[j];
			swapped[j] = 0;
		}
	}
	return 0;
}

/* Swaps in the query of target (path '?' query), in place. */
static int
swap_query(struct phwork *w, char *target, size_t cap)
{
	char *q = strchr(target, '?');
	const char *out;
	long made;

	if (q == NULL || w->nswaps == 0)
		return 0;
	q++;
	if ((made = swap_into(w, q, strlen(q), 1, &out)) <= 0)
		return made < 0 ? -1 : 0;
	if ((size_t)(q - target) + strlen(out) + 1 > cap)
		return -1;
	memcpy(q, out, strlen(out) + 1);
	return 0;
}

/* placeholder_in_head's skip: the headers inj drops or sets. */
static int
skip_dropped(void *arg, const char *name, size_t len)
{
	return dropped(arg, name, len);
}

/* Any placeholder of the sandbox left in the head, as it will go. */
static int
left_over(struct phwork *w, const struct http_head *h,
    const struct inject *inj, const char *target)
{
	struct conn *c = w->ic->c;
	size_t i;

	w->found = placeholder_in_head(c->l->secrets, c->l->st->secrets,
	    w->sandbox, h, target, skip_dropped, (void *)inj, w->buf + w->off,
	    INJECT_BUF - w->off, &w->where);
	if (w->found != NULL)
		return 1;
	for (i = 0; i < inj->nadd; i++)
		if (holds(w, inj->add[i].value, strlen(inj->add[i].value),
		    "header"))
			return 1;
	return 0;
}

/* Whether the head has anything to look at: the prefix, or a Basic credential. */
static int
worth_a_look(const struct http_head *h, const char *target)
{
	const char *b64;
	size_t i, blen;

	if (strstr(target, PH_PREFIX) != NULL)
		return 1;
	for (i = 0; i < h->nheaders; i++)
		if (memmem(h->headers[i].value, h->headers[i].value_len,
		    PH_PREFIX, PH_PREFIX_LEN) != NULL ||
		    placeholder_basic_of(h->headers[i].value,
		    h->headers[i].value_len, &b64, &blen))
			return 1;
	return 0;
}

void
conn_ph_audit(struct conn *c, const char *path, const char *rule,
    const struct secret *s, const char *where)
{
	struct arec rec;

	arec_init(&rec);
	arec_str(&rec, "sandbox", c->sb ? c->sb->id : NULL);
	arec_str(&rec, "policy", c->policy_name);
	arec_str(&rec, "host", c->name);
	arec_str(&rec, "path", path);
	arec_str(&rec, "rule", rule);
	arec_str(&rec, "secret", s->name);
	arec_str(&rec, "where", where);
	audit_write_rec(c->l->audit, "placeholder_elsewhere", &rec);
}

void
icpt_ph_audit(struct icpt *ic, const struct icpt_req *r,
    const struct secret *s, const char *where)
{
	conn_ph_audit(ic->c, r->path, r->rule[0] ? r->rule : NULL, s, where);
}

int
icpt_placeholders(struct icpt *ic, const struct http_head *h,
    const struct intercept_rule *rule, char *target, size_t target_cap,
    struct inject *inj, size_t *wipe, int ka_close)
{
	struct conn *c = ic->c;
	struct inject none;
	struct phwork w;
	char detail[160];
	size_t k;

	if (c->l->secrets == NULL || c->l->st->secrets == NULL ||
	    !worth_a_look(h, target))
		return 0;
	memset(&w, 0, sizeof(w));
	w.ic = ic;
	w.sandbox = c->sb != NULL ? c->sb->id : NULL;
	if ((w.buf = loop_scratch(c->l)) == NULL) {
		icpt_refuse(ic, 503, "unavailable", "secret-unavailable",
		    "sluice: out of guarded memory", 1);
		return -1;
	}
	w.off = *wipe;
	if (inj == NULL) {
		memset(&none, 0, sizeof(none));
		inj = &none;	/* nothing is swapped for it */
	} else
		swaps_of(&w, rule);
	if ((w.nswaps > 0 && swap_headers(&w, h, inj) != 0) ||
	    swap_query(&w, target, target_cap) != 0) {
		*wipe = w.off;
		icpt_refuse(ic, 400, "refused", "header-too-large", "sluice: "
		    "the request's placeholders do not fit", ka_close);
		return -1;
	}
	*wipe = w.off;
	if (left_over(&w, h, inj, target)) {
		icpt_ph_audit(ic, &ic->cur, w.found, w.where);
		snprintf(detail, sizeof(detail), "sluice: a placeholder of the "
		    "secret '%s' may not go here (its %s)", w.found->name,
		    w.where);
		icpt_refuse(ic, 403, "denied", "placeholder-elsewhere", detail,
		    ka_close);
		return -1;
	}
	for (k = 0; k < w.nswaps; k++)
		if (w.made[k] > 0 && inject_add_used(inj, w.swaps[k].s) != 0) {
			icpt_refuse(ic, 500, "internal", "secret-too-large",
			    "sluice: too many secrets for one request", 0);
			return -1;
		}
	return 0;
}
