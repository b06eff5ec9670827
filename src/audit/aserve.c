/* aserve.c: a remote trail's requests, in the keys process (aserve.h). */
#include "autoconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/kproto.h"
#include "audit/aserve.h"
#include "audit/arec.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"

#define ROUND_MAX	4096	/* records in one message */
#define FLAT_MAX	(AUDIT_LINE_MAX - 256)	/* room for seq, prev, hash */

/* Types only the writer writes: a worker that sends one lies. */
static int
reserved(const char *type, size_t len)
{
	static const char *const own[] = { "checkpoint", "start", "upgrade",
	    "file_start" };
	size_t i;

	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == len && memcmp(own[i], type, len) == 0)
			return 1;
	return 0;
}

/* Whether off is where a top-level member starts, or the end. */
static int
boundary(const uint32_t *starts, size_t n, uint32_t off, uint32_t len)
{
	size_t i;

	if (off == len)
		return 1;
	for (i = 0; i < n; i++)
		if (starts[i] == off)
			return 1;
	return 0;
}

/*
 * The JSON of a record body, checked as it is written (auditfmt.h's
 * canonical form, which arec.c writes): a value is a string, an integer,
 * true, false, null, an object or an array, nested DEPTH_MAX deep at
 * most; strings are printable ASCII with JSON's escapes.  Each function
 * takes b[*i..len) and moves *i past what it read; -1 when it is not so.
 */
#define DEPTH_MAX	32

static int	value(const char *b, size_t len, size_t *i, int depth);

static int
string(const char *b, size_t len, size_t *i)
{
	const char *q, *e;
	size_t k;

	if (*i >= len || b[*i] != '"')
		return -1;
	for ((*i)++; *i < len; (*i)++) {
		/* A run without an escape at once: most strings are one. */
		if ((q = memchr(b + *i, '"', len - *i)) == NULL)
			return -1;
		if ((e = memchr(b + *i, '\\', (size_t)(q - b) - *i)) == NULL) {
			*i = (size_t)(q - b) + 1;
			return 0;
		}
		*i = (size_t)(e - b);
		if (++(*i) >= len)
			return -1;
		switch (b[*i]) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n':
		case 'r': case 't':
			break;
		case 'u':
			for (k = 1; k <= 4; k++)
				if (*i + k >= len || !isxdigit((unsigned char)b[*i + k]))
					return -1;
			*i += 4;
			break;
		default:
			return -1;
		}
	}
	return -1;
}

static int
integer(const char *b, size_t len, size_t *i)
{
	size_t s;

	if (*i < len && b[*i] == '-')
		(*i)++;
	s = *i;
	while (*i < len && b[*i] >= '0' && b[*i] <= '9' && *i - s < 20)
		(*i)++;
	if (*i == s || (b[s] == '0' && *i - s > 1) || (*i < len &&
	    b[*i] >= '0' && b[*i] <= '9'))
		return -1;
	return 0;
}

static int
word(const char *b, size_t len, size_t *i, const char *w)
{
	size_t n = strlen(w);

	if (len - *i < n || memcmp(b + *i, w, n) != 0)
		return -1;
	*i += n;
	return 0;
}

/* Members of an object after its '{' (or of a body after its ','). */
static int
members(const char *b, size_t len, size_t *i, int depth, char end)
{
	if (*i < len && b[*i] == end) {
		(*i)++;
		return 0;
	}
	for (;;) {
		if (string(b, len, i) != 0 || *i >= len || b[(*i)++] != ':' ||
		    value(b, len, i, depth) != 0 || *i > len)
			return -1;
		if (end == '\0' && *i == len)
			return 0;
		if (*i >= len)
			return -1;
		if (b[*i] == end) {
			(*i)++;
			return 0;
		}
		if (b[(*i)++] != ',')
			return -1;
	}
}

static int
elements(const char *b, size_t len, size_t *i, int depth)
{
	if (*i < len && b[*i] == ']') {
		(*i)++;
		return 0;
	}
	for (;;) {
		if (value(b, len, i, depth) != 0 || *i >= len)
			return -1;
		if (b[*i] == ']') {
			(*i)++;
			return 0;
		}
		if (b[(*i)++] != ',')
			return -1;
	}
}

static int
value(const char *b, size_t len, size_t *i, int depth)
{
	if (*i >= len || depth > DEPTH_MAX)
		return -1;
	switch (b[*i]) {
	case '"':
		return string(b, len, i);
	case '{':
		(*i)++;
		return members(b, len, i, depth + 1, '}');
	case '[':
		(*i)++;
		return elements(b, len, i, depth + 1);
	case 't':
		return word(b, len, i, "true");
	case 'f':
		return word(b, len, i, "false");
	case 'n':
		return word(b, len, i, "null");
	default:
		return integer(b, len, i);
	}
}

/*
 * The top-level members of f: where each starts, and the key of each;
 * the record's "type" (a string) into *type and *tlen.  0, or -1.
 */
static int
top_members(const struct aflat *f, uint32_t *starts, size_t max, size_t *n,
    const char **type, size_t *tlen, int *ts, const char **why)
{
	const char *b = f->body, *k;
	size_t i = 1, klen, v;

	*n = 0;
	while (i < f->len) {
		if (*n == max)
			return -1;
		starts[(*n)++] = (uint32_t)(i - 1);
		k = b + i + 1;
		if (string(b, f->len, &i) != 0)
			return -1;
		klen = (size_t)(b + i - k) - 1;
		if (i >= f->len || b[i++] != ':')
			return -1;
		if ((klen == 3 && memcmp(k, "seq", 3) == 0) ||
		    (klen == 4 && (memcmp(k, "prev", 4) == 0 ||
		    memcmp(k, "hash", 4) == 0))) {
			*why = "a record with its own seq, prev or hash";
			return -2;
		}
		/* Keys are the writer's constants: an escape hides one. */
		if (memchr(k, '\\', klen) != NULL)
			return -1;
		*ts |= klen == 2 && memcmp(k, "ts", 2) == 0;
		v = i;
		if (value(b, f->len, &i, 1) != 0)
			return -1;
		if (klen == 4 && memcmp(k, "type", 4) == 0) {
			if (b[v] != '"' || memchr(b + v, '\\', i - v) != NULL)
				return -1;
			*type = b + v + 1;
			*tlen = i - v - 2;
		}
		if (i == f->len)
			return 0;
		if (b[i++] != ',')
			return -1;
	}
	return -1;
}

int
aserve_check_flat(const struct aflat *f, const char **why)
{
	uint32_t starts[AREC_MEMBERS + 8];
	const char *type = NULL;
	size_t i, n = 0, tlen = 0;
	int ts = 0, r;
	unsigned bad;

	if (f->len < 2 || f->len > FLAT_MAX || f->body[0] != ',' ||
	    f->at_hash > f->at_prev || f->at_prev > f->at_seq ||
	    f->at_seq > f->len) {
		*why = "a record out of shape";
		return -1;
	}
	/* One pass without a branch a byte (the compiler vectorises it). */
	for (i = 0, bad = 0; i < f->len; i++)
		bad |= (unsigned char)((unsigned char)f->body[i] - 0x20) > 0x5e;
	if (bad) {
		*why = "a record with a byte that is not printable ASCII";
		return -1;
	}
	if ((r = top_members(f, starts, sizeof(starts) / sizeof(starts[0]),
	    &n, &type, &tlen, &ts, why)) != 0) {
		if (r == -1)
			*why = "a record that is not one JSON object";
		return -1;
	}
	if (type == NULL || !ts) {
		*why = "a record without its type or time";
		return -1;
	}
	if (reserved(type, tlen)) {
		*why = "a record of a type only the writer writes";
		return -1;
	}
	if (!boundary(starts, n, f->at_hash, f->len) ||
	    !boundary(starts, n, f->at_prev, f->len) ||
	    !boundary(starts, n, f->at_seq, f->len)) {
		*why = "a record whose chain members go inside another";
		return -1;
	}
	return 0;
}

/* A text record: a JSON object whose type is not the writer's. */
static int
check_text(const uint8_t *p, size_t len, const char **why)
{
	json_t *o;
	const char *t;
	int r = -1;

	if ((o = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL || !json_is_object(o) ||
	    (t = json_string_value(json_object_get(o, "type"))) == NULL)
		*why = "a text record that is not a typed JSON object";
	else if (reserved(t, strlen(t)))
		*why = "a record of a type only the writer writes";
	else
		r = 0;
	json_decref(o);
	return r;
}

/* The trail's figures (kproto.h); err: why the round failed, or 0. */
static void
figures(struct audit *a, struct wire_w *w, int err)
{
	struct audit_stats st;

	audit_get_stats(a, &st);
	wire_u64(w, st.seq);
	wire_str(w, st.head);
	wire_u64(w, st.written);
	wire_u64(w, st.checkpoints);
	wire_u64(w, st.rotations);
	wire_u64(w, st.last_checkpoint_seq);
	wire_u64(w, st.errors);
	wire_u64(w, (uint64_t)st.last_sync);
	wire_u32(w, (uint32_t)st.broken);
	wire_u32(w, (uint32_t)err);
}

/* A record of a round, read: a flat one made, or a text one pointed at. */
struct rec {
	struct aflat	*flat;
	const uint8_t	*text;
	size_t		 len;
};

static int
read_round(struct wire_r *in, struct rec *v, uint32_t n, const char **why)
{
	const uint8_t *b;
	uint32_t i, kind, ah, ap, as;
	size_t len;

	for (i = 0; i < n; i++) {
		kind = wire_get_u32(in);
		if (kind == 1) {
			ah = wire_get_u32(in);
			ap = wire_get_u32(in);
			as = wire_get_u32(in);
			b = wire_get_bytes(in, FLAT_MAX, &len);
			if (in->bad)
				break;
			if ((v[i].flat = malloc(sizeof(*v[i].flat) + len)) ==
			    NULL) {
				*why = "out of memory";
				return SL_ERR_NOMEM;
			}
			v[i].flat->len = (uint32_t)len;
			v[i].flat->at_hash = ah;
			v[i].flat->at_prev = ap;
			v[i].flat->at_seq = as;
			memcpy(v[i].flat->body, b, len);
			if (aserve_check_flat(v[i].flat, why) != 0)
				return -1;
		} else if (kind == 2) {
			v[i].text = wire_get_bytes(in, AUDIT_LINE_MAX, &v[i].len);
			if (in->bad || check_text(v[i].text, v[i].len, why) != 0)
				return -1;
		} else
			break;
	}
	if (i < n || wire_done(in) != 0) {
		*why = "a round whose records do not read";
		return -1;
	}
	return 0;
}

/* A round: checked whole, then queued; answered once durable when asked. */
static int
round_in(struct audit *a, struct wire_r *in, char *why, const char **bad)
{
	uint32_t flags = wire_get_u32(in), n = wire_get_u32(in), i;
	uint64_t ticket = 0;
	struct rec *v;
	int r = 0;

	if (in->bad || n > ROUND_MAX) {
		*bad = "a round out of bounds";
		return 1;
	}
	if ((v = calloc(n ? n : 1, sizeof(*v))) == NULL)
		return SL_ERR_NOMEM;
	if ((r = read_round(in, v, n, bad)) == -1) {
		r = 1;
		goto out;
	}
	if (r != 0)
		goto out;
	/* During an outage only a round that waits is a try (audit.h, sink). */
	if (audit_failed(a) && !(flags & KPROTO_ROUND_SYNC)) {
		errno = audit_errno(a);
		r = SL_ERR_IO;
		goto out;
	}
	for (i = 0; i < n && r == 0; i++) {
		uint64_t *t = i + 1 == n && (flags & KPROTO_ROUND_SYNC) ?
		    &ticket : NULL;

		if (v[i].flat != NULL) {
			r = audit_submit_flat(a, v[i].flat, t);
			v[i].flat = NULL;	/* taken */
		} else
			r = audit_submit_text(a, (const char *)v[i].text,
			    v[i].len, t);
	}
	if (r == 0 && (flags & KPROTO_ROUND_ROTATE))
		audit_rotate(a);
	if (r == 0 && ticket != 0 &&
	    (r = audit_wait_durable(a, ticket, ASERVE_WAIT_MS)) != 0 &&
	    errno != ETIMEDOUT)
		errno = audit_errno(a);
 out:
	for (i = 0; i < n; i++)
		free(v[i].flat);
	free(v);
	return r;
}

int
aserve_handle(struct audit *a, const struct chan_hdr *h, const uint8_t *p,
    uint32_t *type, uint8_t *ans, size_t *len, const char **why)
{
	char whybuf[KPROTO_WHY_MAX] = "";
	struct wire_r in;
	struct wire_w out;
	int r = 0;

	wire_r_init(&in, p, h->len);
	wire_w_init(&out, ans, CHAN_MSG_MAX);
	switch (h->type) {
	case KPROTO_AUDIT_ROUND:
		if ((r = round_in(a, &in, whybuf, why)) == 1)
			return -1;
		break;
	case KPROTO_AUDIT_TAKEOVER:
		if (wire_done(&in) != 0)
			goto bad;
		audit_takeover(a);
		if ((r = audit_wait_round(a, ASERVE_WAIT_MS)) != 0)
			snprintf(whybuf, sizeof(whybuf), "the trail was not "
			    "taken over");
		break;
	case KPROTO_AUDIT_RELEASE: {
		uint64_t pid = wire_get_u64(&in);

		if (wire_done(&in) != 0)
			goto bad;
		if ((r = audit_release(a, (long)pid)) == 0)
			r = audit_wait_round(a, ASERVE_WAIT_MS);
		if (r != 0)
			snprintf(whybuf, sizeof(whybuf), "the trail was not "
			    "let go");
		break;
	}
	default:
		goto bad;
	}
	if (r == 0 || r == SL_ERR_IO) {
		/* A failed write is news, not a refusal: with its errno. */
		figures(a, &out, r == 0 ? 0 : errno != 0 ? errno : EIO);
		*type = KPROTO_OK;
	} else {
		wire_u32(&out, (uint32_t)-r);
		wire_str(&out, whybuf[0] != '\0' ? whybuf : err_str(r));
		*type = KPROTO_ERR;
	}
	*len = out.len;
	return 0;
 bad:
	*why = "a request whose fields do not read";
	return -1;
}
