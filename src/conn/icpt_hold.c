/*
 * icpt_hold.c: a request whose head waits for its body.  What goes in the
 * head depends on the whole body -- a forward rule's token carries its
 * hash (icpt_fwd.c), SigV4 signs it (icpt_sigv4.c) -- so the head, less
 * its last lines and the empty line, and the body are held here, the body
 * hashed as it comes, at most HOLD_BODY_MAX bytes with a Content-Length.
 * When the body is whole, the rule's part writes the rest and lets it
 * all go.  A client that asks "Expect: 100-continue" waits for a 100
 * before it sends the body: sluice says it (the upstream gets no Expect,
 * the body comes with the head).  The head may hold credentials: it is wiped before it is freed.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <sodium.h>

#include "util/ascii.h"
#include "util/keyfile.h"
#include "parse/httphead.h"
#include "keys/secrets.h"
#include "loop/loop.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

int
icpt_hold_check(struct icpt *ic, const struct http_head *h, const char *what,
    int ka_close)
{
	char detail[160];

	if (h->chunked) {
		snprintf(detail, sizeof(detail), "sluice: this request's body "
		    "is %s: send a Content-Length", what);
		icpt_refuse(ic, 411, "refused", "length-required", detail,
		    ka_close);
		return -1;
	}
	if (h->content_length > HOLD_BODY_MAX) {
		snprintf(detail, sizeof(detail), "sluice: a body %s is at most "
		    "1 MiB", what);
		icpt_refuse(ic, 413, "refused", "body-too-large", detail, 1);
		return -1;
	}
	return 0;
}

void
icpt_hold_continue(struct icpt *ic, const struct http_head *h)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	size_t i;

	/* Only when no answer to an older request is owed before it. */
	if (ic->qn != 1)
		return;
	for (i = 0; i < h->nheaders; i++)
		if (ascii_eq(h->headers[i].name, h->headers[i].name_len,
		    "expect") && ascii_eq(h->headers[i].value,
		    h->headers[i].value_len, "100-continue")) {
			icpt_send_down(ic, cont, sizeof(cont) - 1);
			return;
		}
}

void
icpt_hold_free(struct icpt_hold *hd)
{
	if (hd == NULL)
		return;
	if (hd->head != NULL)
		loop_evbuffer_wipe_free(hd->head);
	if (hd->body != NULL)
		evbuffer_free(hd->body);
	secmem_free(hd->target);
	secret_unref(hd->creds);
	sodium_memzero(&hd->sha, sizeof(hd->sha));
	free(hd);
}

struct icpt_hold *
icpt_hold_new(enum icpt_hold_for why, const char *head, size_t n,
    const struct http_head *h, const char *target)
{
	struct icpt_hold *hd;
	size_t tlen = strlen(target);

	if ((hd = calloc(1, sizeof(*hd))) == NULL)
		return NULL;
	hd->why = why;
	if ((hd->head = evbuffer_new()) == NULL ||
	    (hd->body = evbuffer_new()) == NULL ||
	    evbuffer_add(hd->head, head, n) != 0 ||
	    (hd->target = secmem_alloc(tlen + 1)) == NULL) {
		icpt_hold_free(hd);
		return NULL;
	}
	memcpy(hd->target, target, tlen + 1);
	snprintf(hd->method, sizeof(hd->method), "%s", h->method);
	crypto_hash_sha256_init(&hd->sha);
	hd->left = h->content_length;
	return hd;
}

int
icpt_hold_body(struct icpt *ic, const uint8_t *p, size_t n)
{
	struct icpt_hold *hd = ic->hold;

	if (n > hd->left) {	/* the parser framed it: cannot happen */
		icpt_end(ic, "internal");
		return -1;
	}
	hd->left -= n;
	crypto_hash_sha256_update(&hd->sha, p, n);
	if (evbuffer_add(hd->body, p, n) != 0) {
		icpt_end(ic, "out-of-memory");
		return -1;
	}
	return 0;
}

int
icpt_hold_finish(struct icpt *ic)
{
	struct icpt_hold *hd = ic->hold;
	uint8_t md[crypto_hash_sha256_BYTES];
	int r;

	ic->hold = NULL;
	crypto_hash_sha256_final(&hd->sha, md);
	icpt_held_mark(ic);
	r = hd->why == HOLD_TOKEN ? icpt_fwd_finish(ic, hd, md) :
	    icpt_sigv4_finish(ic, hd, md);
	icpt_hold_free(hd);
	return r;
}
