/*
 * icpt_scan.c: the first ICPT_SCAN_MAX bytes of every intercepted request
 * body, read for the sandbox's placeholders as they go by -- out of their
 * chunked framing, and across the pieces they come in, so that a
 * placeholder split between two reads or two chunks is found all the
 * same.  The body is not held for it (a large upload is not slowed): a
 * placeholder is found before the bytes that hold it go on, the upstream,
 * which has a head and part of a body it will never see the end of, is
 * dropped, and the sandbox gets 403 placeholder-elsewhere -- or a reset
 * when answers to older requests are owed on the same connection -- and
 * the connection ends.  What went before it is worth nothing to anyone:
 * a placeholder is not the secret.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include "parse/dechunk.h"
#include "parse/httphead.h"
#include "keys/placeholder.h"
#include "keys/secrets.h"
#include "loop/loop.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

void
icpt_scan_start(struct icpt *ic, const struct http_head *h)
{
	struct icpt_scan *sc = &ic->scan;
	struct conn *c = ic->c;

	sc->mode = SCAN_OFF;
	sc->ncarry = 0;
	sc->seen = 0;
	sc->found = NULL;
	if (c->l->secrets == NULL || c->l->st->secrets == NULL ||
	    (!h->chunked && h->content_length == 0))
		return;
	sc->mode = h->chunked ? SCAN_CHUNKED : SCAN_PLAIN;
	dechunk_init(&sc->dc);
}

/* Whether s[0..len) holds a placeholder of the sandbox (sc->found). */
static int
holds(struct icpt *ic, const char *s, size_t len)
{
	struct conn *c = ic->c;

	return placeholder_find(c->l->secrets, c->l->st->secrets,
	    c->sb != NULL ? c->sb->id : NULL, s, len, &ic->scan.found) != NULL;
}

/* A run of the body's data: -1 when it holds a placeholder. */
static int
scan_run(void *arg, const uint8_t *p, size_t n)
{
	struct icpt *ic = arg;
	struct icpt_scan *sc = &ic->scan;
	char edge[2 * sizeof(sc->carry)];
	size_t take, head, keep;

	if (sc->mode == SCAN_OFF || n == 0)
		return 0;
	take = n < ICPT_SCAN_MAX - sc->seen ? n : ICPT_SCAN_MAX - sc->seen;
	/* One that starts in the last run and ends in this one. */
	if (sc->ncarry > 0) {
		head = take < sizeof(sc->carry) ? take : sizeof(sc->carry);
		memcpy(edge, sc->carry, sc->ncarry);
		memcpy(edge + sc->ncarry, p, head);
		if (holds(ic, edge, sc->ncarry + head))
			return -1;
	}
	if (holds(ic, (const char *)p, take))
		return -1;
	/* The last PH_LEN - 1 bytes seen, for the next run. */
	if (take >= sizeof(sc->carry)) {
		memcpy(sc->carry, p + take - sizeof(sc->carry), sizeof(sc->carry));
		sc->ncarry = sizeof(sc->carry);
	} else {
		keep = sc->ncarry + take > sizeof(sc->carry) ?
		    sizeof(sc->carry) - take : sc->ncarry;
		memmove(sc->carry, sc->carry + sc->ncarry - keep, keep);
		memcpy(sc->carry + keep, p, take);
		sc->ncarry = (uint8_t)(keep + take);
	}
	if ((sc->seen += (uint32_t)take) >= ICPT_SCAN_MAX)
		sc->mode = SCAN_OFF;
	return 0;
}

/* The request under way (the newest queued) carries a placeholder. */
static void
refuse(struct icpt *ic)
{
	struct icpt_req r;
	char detail[160];

	icpt_ph_audit(ic, icpt_q_tail(ic), ic->scan.found, "body");
	snprintf(detail, sizeof(detail), "sluice: a placeholder of the secret "
	    "'%s' may not go here (its body)", ic->scan.found->name);
	ic->scan.mode = SCAN_OFF;
	icpt_hold_free(ic->hold);
	ic->hold = NULL;
	r = *icpt_q_tail(ic);
	ic->qn--;
	if (ic->q_sent > ic->qn)
		ic->q_sent = ic->qn;
	if (ic->qn == 0) {
		/* The upstream has part of it: it goes, and nothing of it. */
		icpt_up_discard(ic);
		icpt_refuse_req(ic, &r, 403, "denied", "deny",
		    "placeholder-elsewhere", detail, 1);
		return;
	}
	r.action = "deny";
	r.reason = "placeholder-elsewhere";
	icpt_audit_request(ic, &r);
	icpt_abort(ic, "placeholder-elsewhere");
}

int
icpt_scan_body(struct icpt *ic, const uint8_t *p, size_t n)
{
	struct icpt_scan *sc = &ic->scan;
	int rc;

	if (sc->mode == SCAN_OFF || ic->qn == 0)
		return 0;
	if (sc->mode == SCAN_CHUNKED)
		rc = dechunk_feed(&sc->dc, p, n, scan_run, ic);
	else
		rc = scan_run(ic, p, n);
	if (rc == 0)
		return 0;
	if (sc->found == NULL) {
		/* The parser checked the framing: cannot happen. */
		icpt_end(ic, "internal");
		return -1;
	}
	refuse(ic);
	return -1;
}
