/*
 * icpt_redact.c: the answers to injected requests.  Whatever the upstream
 * sends back may carry the secret it was given (an echo, an error page
 * quoting the request, a debug header); before it reaches the sandbox,
 * every secret the request got is taken out of the head and the body, in
 * every form redact.h knows.
 *
 * The body changes length, so one whose length was given (Content-Length
 * or chunked) goes to the sandbox re-framed as chunked; a close-delimited
 * body stays close-delimited.  The upstream's chunk framing is taken off
 * first (the response parser checked it already), so a value split across
 * chunks is still found.  Injected requests are sent with
 * "Accept-Encoding: identity"; a response with a content coding anyway
 * cannot be read, and is refused, as is one with a transfer coding other
 * than chunked alone.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "util/ascii.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/redact.h"
#include "parse/httphead.h"
#include "parse/dechunk.h"
#include "parse/httpresp.h"
#include "keys/secrets.h"
#include "audit/audit.h"
#include "loop/loop.h"
#include "loop/tstream.h"
#include "loop/state.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"

/* The patterns one answer is searched for, and the names of their lists. */
struct req_pats {
	struct redact_pat p[REDACT_MAX_PATTERNS];
	size_t		 n;
	uint64_t	 keys[REDACT_MAX_KEYS];
	size_t		 nkeys;		/* over REDACT_MAX_KEYS: unnamed */
};

/* Adds the list forms[0..nforms), named key, to rp; -1 when it does not fit. */
static int
add_forms(struct req_pats *rp, const struct redact_pat *forms, size_t nforms,
    uint64_t key)
{
	if (nforms > REDACT_MAX_PATTERNS - rp->n)
		return -1;
	memcpy(rp->p + rp->n, forms, nforms * sizeof(*forms));
	rp->n += nforms;
	if (rp->nkeys < REDACT_MAX_KEYS)
		rp->keys[rp->nkeys] = key;
	rp->nkeys++;
	return 0;
}

/*
 * The forms of every secret and token r got, as one pattern list; -1
 * when they are more than one redactor searches (never a form left out).
 */
static int
req_patterns(const struct icpt_req *r, struct req_pats *rp)
{
	size_t i;

	rp->n = rp->nkeys = 0;
	for (i = 0; i < r->nsecrets; i++)
		if (add_forms(rp, r->secrets[i]->forms, r->secrets[i]->nforms,
		    r->secrets[i]->forms_key) != 0)
			return -1;
	for (i = 0; i < r->nmtoks; i++)
		if (add_forms(rp, r->mtoks[i]->pats, r->mtoks[i]->npats,
		    r->mtoks[i]->pats_key) != 0)
			return -1;
	if (r->tok != NULL && add_forms(rp, r->tok->pats, r->tok->npats,
	    r->tok->pats_key) != 0)
		return -1;
	if (rp->nkeys > REDACT_MAX_KEYS)
		rp->nkeys = 0;
	return 0;
}

/* The header named name among rh's, or NULL. */
static const struct http_header *
find_header(const struct http_resp_head *rh, const char *name)
{
	size_t i;

	for (i = 0; i < rh->nheaders; i++)
		if (ascii_eq(rh->headers[i].name, rh->headers[i].name_len, name))
			return &rh->headers[i];
	return NULL;
}

/*
 * Whether any Content-Encoding header names a coding but identity, or a
 * grpc-encoding header does (gRPC's messages, compressed one by one).
 */
static int
coded(const struct http_resp_head *rh)
{
	const struct http_header *x;
	size_t i;

	for (i = 0; i < rh->nheaders; i++) {
		x = &rh->headers[i];
		if ((ascii_eq(x->name, x->name_len, "content-encoding") ||
		    ascii_eq(x->name, x->name_len, "grpc-encoding")) &&
		    !ascii_eq(x->value, x->value_len, "identity"))
			return 1;
	}
	return 0;
}

static int
has_body(const struct icpt_req *r, const struct http_resp_head *rh)
{
	return !(rh->status / 100 == 1 || rh->status == 204 ||
	    rh->status == 304 || strcmp(r->method, "HEAD") == 0);
}

static int
emit_cb(void *arg, const uint8_t *p, size_t len)
{
	return evbuffer_add(arg, p, len);
}

/* Whether the head line p[0..n) is one the sandbox does not get. */
static int
line_dropped(const char *p, size_t n, int reframe, int cookies)
{
	if (reframe && (ascii_prefix(p, n, "content-length:") ||
	    ascii_prefix(p, n, "transfer-encoding:")))
		return 1;
	return cookies && (ascii_prefix(p, n, "set-cookie:") ||
	    ascii_prefix(p, n, "set-cookie2:"));
}

/*
 * Writes rh's head for the sandbox into out through the redactor (reset
 * for this response already); with reframe, its Content-Length and
 * Transfer-Encoding give way to "Transfer-Encoding: chunked", and with
 * cookies its Set-Cookie lines go.  A value never holds CR or LF, so the
 * head is one stream.
 */
static int
redact_head(struct redactor *red, const struct http_resp_head *rh,
    int reframe, int cookies, struct evbuffer *out)
{
	const char *p = rh->out, *end = rh->out + rh->out_len, *eol;

	while (p < end && (eol = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		eol++;
		if (eol - p == 2)	/* the empty line */
			break;
		if (!line_dropped(p, (size_t)(eol - p), reframe, cookies) &&
		    redactor_feed(red, (const uint8_t *)p, (size_t)(eol - p),
		    emit_cb, out) != 0)
			return -1;
		p = eol;
	}
	if (redactor_flush(red, emit_cb, out) != 0)
		return -1;
	if (reframe)
		evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
	return evbuffer_add(out, "\r\n", 2);
}

/*
 * The trailer section of a chunked answer (an HTTP/2 stream's: gRPC's
 * status), kept until the body is done: it is redacted as the body is.
 */
static int
keep_trailers(void *arg, const uint8_t *p, size_t n)
{
	struct icpt *ic = arg;

	if (ic->red_trailers == NULL &&
	    (ic->red_trailers = evbuffer_new()) == NULL)
		return -1;
	return evbuffer_add(ic->red_trailers, p, n);
}

int
icpt_redact_head(struct icpt *ic, struct icpt_req *r,
    const struct http_resp_head *rh)
{
	struct req_pats rp;
	int body = has_body(r, rh) && !rh->informational && rh->status != 101;
	int chunked = find_header(rh, "transfer-encoding") != NULL;
	int reframe = body && !rh->close_delimited;
	const struct http_header *ct;

	if (req_patterns(r, &rp) != 0) {
		icpt_up_failed(ic, 502, "response-not-redactable", "the request "
		    "got more credentials than one answer can be searched for");
		return -1;
	}
	if (body && coded(rh)) {
		icpt_up_failed(ic, 502, "response-not-redactable", "the answer "
		    "to a request that got a credential has a content coding");
		return -1;
	}
	/* Unread, "gzip, chunked" would go on re-framed as plain chunked. */
	if (body && rh->transfer_coded) {
		icpt_up_failed(ic, 502, "response-not-redactable", "the answer "
		    "to a request that got a credential has a transfer coding");
		return -1;
	}
	/*
	 * A redactor of the loop's while the answer is under way (built for
	 * these secrets by an earlier answer, mostly), reset for it: head,
	 * then body.
	 */
	if ((ic->red == NULL && (ic->red = redpool_get(&ic->c->l->reds,
	    rp.keys, rp.nkeys)) == NULL) ||
	    (ic->red_buf == NULL && (ic->red_buf = evbuffer_new()) == NULL) ||
	    redactor_reset_keyed(ic->red, rp.p, rp.n, rp.keys, rp.nkeys) != 0 ||
	    redact_head(ic->red, rh, reframe, r->drop_cookies,
	    ic->red_buf) != 0) {
		icpt_end(ic, "out-of-memory");
		return -1;
	}
	evbuffer_add_buffer(tstream_output(ic->down), ic->red_buf);
	ic->red_base = redactor_count(ic->red);
	r->redacted_head += ic->red_base;
	if (!body)
		return 0;
	/*
	 * gRPC messages count their bytes (the length prefix, protobuf's
	 * field lengths): a credential in one is masked byte for byte, and
	 * the call goes on without it.
	 */
	ct = find_header(rh, "content-type");
	redactor_same_length(ic->red, ct != NULL &&
	    http_grpc_type(ct->value, ct->value_len));
	ic->red_mode = chunked ? RED_CHUNKED : reframe ? RED_LENGTH : RED_CLOSE;
	dechunk_init(&ic->red_dechunk);
	dechunk_trailers(&ic->red_dechunk, keep_trailers);
	if (ic->red_trailers != NULL)
		evbuffer_drain(ic->red_trailers,
		    evbuffer_get_length(ic->red_trailers));
	return 0;
}

/* What the redactor let go, to the sandbox: one chunk when re-framed. */
static void
send_redacted(struct icpt *ic)
{
	size_t n = evbuffer_get_length(ic->red_buf);
	struct evbuffer *out = tstream_output(ic->down);

	if (n == 0)
		return;
	if (ic->red_mode != RED_CLOSE)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add_buffer(out, ic->red_buf);
	if (ic->red_mode != RED_CLOSE)
		evbuffer_add(out, "\r\n", 2);
}

/* A run of a chunked body's data, to the redactor. */
static int
redact_run(void *arg, const uint8_t *p, size_t n)
{
	struct icpt *ic = arg;

	return redactor_feed(ic->red, p, n, emit_cb, ic->red_buf);
}

int
icpt_redact_body(struct icpt *ic, struct icpt_req *r, const uint8_t *p,
    size_t n)
{
	int rc;

	if (ic->red_mode == RED_OFF || n == 0)
		return 0;
	if (ic->red_mode == RED_CHUNKED)
		rc = dechunk_feed(&ic->red_dechunk, p, n, redact_run, ic);
	else
		rc = redactor_feed(ic->red, p, n, emit_cb, ic->red_buf);
	if (rc != 0) {
		icpt_end(ic, "redaction-failed");
		return -1;
	}
	send_redacted(ic);
	return 0;
}

/* The secrets of r, for the audit trail: names and versions. */
static json_t *
secrets_json(const struct icpt_req *r)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr != NULL && i < r->nsecrets; i++)
		json_array_append_new(arr, json_pack("{s:s, s:I}",
		    "name", r->secrets[i]->name,
		    "version", (json_int_t)r->secrets[i]->version));
	return arr;
}

/* The last chunk, then the trailers (redacted) or the empty line. */
static int
end_chunks(struct icpt *ic)
{
	struct evbuffer *out = tstream_output(ic->down);
	size_t n = ic->red_trailers != NULL ?
	    evbuffer_get_length(ic->red_trailers) : 0;
	uint8_t *p;

	evbuffer_add(out, "0\r\n", 3);
	if (n <= 2)		/* none: the empty line alone */
		return evbuffer_add(out, "\r\n", 2);
	/* Field lines never hold CR or LF: one stream, as a head is. */
	if ((p = evbuffer_pullup(ic->red_trailers, (ssize_t)n)) == NULL ||
	    redactor_feed(ic->red, p, n, emit_cb, ic->red_buf) != 0 ||
	    redactor_flush(ic->red, emit_cb, ic->red_buf) != 0)
		return -1;
	evbuffer_drain(ic->red_trailers, n);
	return evbuffer_add_buffer(out, ic->red_buf);
}

int
icpt_redact_end(struct icpt *ic, struct icpt_req *r)
{
	struct conn *c = ic->c;
	int rc = 0;

	if (ic->red_mode != RED_OFF) {
		if (redactor_flush(ic->red, emit_cb, ic->red_buf) != 0) {
			ic->red_mode = RED_OFF;
			icpt_end(ic, "redaction-failed");
			return -1;
		}
		send_redacted(ic);
		if (ic->red_mode != RED_CLOSE && end_chunks(ic) != 0) {
			ic->red_mode = RED_OFF;
			icpt_end(ic, "redaction-failed");
			return -1;
		}
		ic->red_mode = RED_OFF;
		/* The count runs from the reset: the head's came first. */
		r->redacted_body += redactor_count(ic->red) - ic->red_base;
	}
	/*
	 * The redactor goes back to the loop, built, for the next answer
	 * with these secrets: an idle connection holds none.
	 */
	redpool_put(&c->l->reds, c->l->base, ic->red);
	ic->red = NULL;
	if (r->redacted_head + r->redacted_body == 0)
		return rc;
	if (r->redacted_head > 0)
		mtable_add(&c->l->metrics.redactions, r->rule, "head");
	if (r->redacted_body > 0)
		mtable_add(&c->l->metrics.redactions, r->rule, "body");
	log_info("icpt", "%s: a secret came back in the answer to %s; "
	    "redacted %llu time(s)", c->name, r->rid,
	    (unsigned long long)(r->redacted_head + r->redacted_body));
	audit_write(c->l->audit, "secret_reflected", json_pack("{s:s?,"
	    " s:s, s:I, s:s, s:s, s:s, s:o, s:I, s:I}", "sandbox", c->sb ?
	    c->sb->id : NULL, "policy", c->policy_name,
	    "revision", (json_int_t)c->policy_rev, "rid", r->rid,
	    "rule", r->rule, "host", c->name,
	    "secrets", secrets_json(r), "in_head", (json_int_t)r->redacted_head,
	    "in_body", (json_int_t)r->redacted_body));
	return 0;
}
