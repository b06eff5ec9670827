/*
 * redact.c: replaces secret values in a byte stream, as it streams
 * (redact.h).
 *
 * The patterns are searched for at once with an Aho-Corasick automaton:
 * a trie of the patterns whose states carry a failure link (the state of
 * the longest proper suffix of their bytes that is in the trie too) and
 * the length of the longest pattern ending there.  After each byte, the
 * state spells the longest suffix of the stream, since the last
 * replacement, that begins some pattern: exactly what must be held back.
 * Those bytes are the first depth bytes of a pattern, so they are emitted
 * from the pattern when the time comes, and the redactor keeps no copy of
 * the input.  Everything built from the patterns is wiped when it goes.
 *
 * While no match is under way the state is the root, and the input is
 * skipped up to the next place where a pattern may begin, to be emitted
 * in one piece later; most bytes of a body are spent there.  A byte may
 * be skipped when no prefix of a pattern that begins there reaches a
 * byte the scan has looked at: the automaton, had it stepped through it,
 * would find the same matches, and be in the same state past that byte,
 * as it does from the root after it.  The scans look at the bytes of
 * this input only, so what is held back at its end is unchanged too.
 * Two scans find such places:
 *
 * - With m, the shortest pattern, at least WM_MIN bytes long, a
 *   multi-pattern Horspool (Wu-Manber) scan looks at windows of m bytes
 *   that may be where a pattern begins, and hashes the last WM_B bytes of
 *   each: a table built with the patterns says how far the window may
 *   move before those bytes could line up with bytes among the first m
 *   of some pattern, and the window moves that far (up to m - WM_B + 1).
 *   Where it may not move, the first two bytes of the window are
 *   checked against the pairs that begin a pattern; only then does the
 *   automaton run.  The scan stops where a whole window no longer fits
 *   in the input, and the pair scan takes the rest: no byte is skipped
 *   on the strength of bytes the next feed has not given yet.
 *
 * - Otherwise (and for the last bytes of an input), the input is tested
 *   pair by pair: a byte that begins no pattern with the next one leads
 *   nowhere the next byte alone would not.
 */
#include "autoconf.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/ascii.h"
#include "util/err.h"
#include "util/redact.h"

#define MARK_LEN	(sizeof(REDACT_MARK) - 1)

/*
 * The Wu-Manber shift table: 2^WM_BITS bytes (16 KiB), indexed by a hash
 * of WM_B bytes.  The window is the shortest pattern's length, but at
 * most WM_MAX_M bytes, so that a shift fits a byte.
 */
#define WM_B		3
#define WM_BITS		14
#define WM_SIZE		((size_t)1 << WM_BITS)
#define WM_MIN		6		/* shorter windows: the pair scan (faster) */
#define WM_TWO		8		/* windows an input needs for two scans */
#define WM_MAX_M	(255 + WM_B - 1)
_Static_assert(WM_B == 3, "wm_hash() takes 3 bytes");

/* A trie state; 0 is the root, which is no state's child. */
struct ac_state {
	uint32_t	child;		/* first child, 0 none */
	uint32_t	sib;		/* next sibling, 0 none */
	uint32_t	fail;		/* longest proper suffix in the trie */
	uint32_t	depth;		/* bytes from the root */
	uint32_t	match;		/* longest pattern ending here, or 0 */
	uint16_t	pat;		/* a pattern this state's bytes begin */
	uint8_t		c;		/* the byte leading here */
};

enum rd_mode {
	RD_UNSET,		/* no successful reset: refuse to feed */
	RD_READY,
	RD_BROKEN,		/* emit said stop: refuse until reset */
};

struct redactor {
	struct redact_pat pats[REDACT_MAX_PATTERNS];
	size_t		 npats;
	struct ac_state	*st;
	uint32_t	*queue;		/* breadth-first, while building */
	size_t		 nroot;		/* root's children, first in queue */
	size_t		 nst;		/* states in use */
	size_t		 cap;		/* states allocated */
	uint32_t	 root[256];	/* the root's child by byte, 0 none */
	uint8_t		 start[256];	/* 1 for a byte that begins a pattern */
	size_t		 nstart;	/* such bytes */
	uint8_t		 pair[8192];	/* bit c0 << 8 | c1: c0 c1 begins one */
	/*
	 * By wm_hash() of its last WM_B bytes, how far a window of wm_m
	 * bytes may move: wm_m - WM_B + 1 at most, less where those bytes
	 * (or bytes of the same hash) are among the first wm_m of a
	 * pattern.  In use while wm_m != 0, and all zero otherwise: a zero
	 * shift sends the window to the pair test, slow but never wrong.
	 */
	uint8_t		 shift[WM_SIZE];
	size_t		 wm_m;		/* the window; 0: the pair scan only */
	uint32_t	 cur;		/* held back: the bytes of this state */
	int		 same_len;	/* redactor_same_length() */
	uint64_t	 count;
	enum rd_mode	 mode;
	/* What the build is of, when its caller named it; nkeys 0: unnamed. */
	uint64_t	 keys[REDACT_MAX_KEYS];
	size_t		 nkeys;
};

/* ---- forms of a value ---------------------------------------------------- */

static const char b64_std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hex_upper[] = "0123456789ABCDEF";
static const char hex_lower[] = "0123456789abcdef";

/* Patterns being written into the caller's storage. */
struct forms {
	uint8_t			*store;
	size_t			 used;
	struct redact_pat	*pats;
	size_t			 n;
};

size_t
redact_forms_size(size_t len)
{
	size_t n;

	if (len == 0 || len > REDACT_MAX_VALUE)
		return 0;
	/* As is; six base64 cores of at most 4/3 len; three %XX forms. */
	n = len + 6 * (4 * len / 3) + 3 * (3 * len);
	/*
	 * Up to REDACT_MAX_ESCAPED: two hex forms (2 len), two cases (len),
	 * four JSON escapings and two HTML ones (at most 6 bytes a byte),
	 * three HTML numeric ones (at most 6: "&#255;", "&#xff;").
	 */
	if (len <= REDACT_MAX_ESCAPED)
		n += 2 * (2 * len) + 2 * len + 6 * (6 * len) + 3 * (6 * len);
	return n;
}

/*
 * Lists the form just written at the end of the storage, unless it is
 * shorter than min or a repeat, in which case its bytes are wiped: the
 * storage beyond what is listed is then as it was.
 */
static void
forms_add(struct forms *f, size_t len, size_t min)
{
	uint8_t *p = f->store + f->used;
	size_t i;

	if (len < min)
		goto drop;
	for (i = 0; i < f->n; i++)
		if (f->pats[i].len == len && memcmp(f->pats[i].p, p, len) == 0)
			goto drop;
	f->pats[f->n].p = p;
	f->pats[f->n].len = len;
	f->n++;
	f->used += len;
	return;
drop:
	sodium_memzero(p, len);
}

/* Byte i of the value preceded by a zero bytes and followed by zeros. */
static unsigned
shifted_byte(const uint8_t *v, size_t len, size_t a, size_t i)
{
	return i < a || i - a >= len ? 0 : v[i - a];
}

/*
 * Writes the base64 characters of the value at alignment a (after a
 * bytes, mod 3) whose six bits all come from the value: those from bit
 * 8a to bit 8(a + len) of the text.  The zeros standing in for the
 * unknown neighbours fall only in the characters left out.
 */
static size_t
b64_core(const uint8_t *v, size_t len, size_t a, const char *alpha,
    uint8_t *out)
{
	size_t from = (8 * a + 5) / 6, to = 8 * (a + len) / 6, k, bit;
	unsigned w;

	for (k = from; k < to; k++) {
		bit = 6 * k;
		w = shifted_byte(v, len, a, bit / 8) << 8 |
		    shifted_byte(v, len, a, bit / 8 + 1);
		out[k - from] = (uint8_t)alpha[(w >> (10 - bit % 8)) & 0x3f];
	}
	return to - from;
}

/* Percent-encodes the value; plus: space as '+' (form encoding). */
static size_t
pct_encode(const uint8_t *v, size_t len, const char *hex, int plus,
    uint8_t *out)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (ascii_unreserved(v[i]))
			out[o++] = v[i];
		else if (plus && v[i] == ' ')
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = (uint8_t)hex[v[i] >> 4];
			out[o++] = (uint8_t)hex[v[i] & 0xf];
		}
	}
	return o;
}

/* The value as hex digits. */
static size_t
hex_encode(const uint8_t *v, size_t len, const char *hex, uint8_t *out)
{
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = (uint8_t)hex[v[i] >> 4];
		out[2 * i + 1] = (uint8_t)hex[v[i] & 0xf];
	}
	return 2 * len;
}

/* The value with ASCII letters in one case. */
static size_t
case_fold(const uint8_t *v, size_t len, int upper, uint8_t *out)
{
	size_t i;

	for (i = 0; i < len; i++) {
		out[i] = v[i];
		if (upper && v[i] >= 'a' && v[i] <= 'z')
			out[i] = (uint8_t)(v[i] - 'a' + 'A');
		else if (!upper && v[i] >= 'A' && v[i] <= 'Z')
			out[i] = (uint8_t)(v[i] - 'A' + 'a');
	}
	return len;
}

/*
 * How JSON encoders write a string: the escapes every encoder makes ('"'
 * and '\\' with a backslash, control bytes as \u00XX), and the bytes
 * each escapes beyond them, as \u00XX with hex (or '/' as "\/").
 */
struct json_style {
	const char	*also;		/* bytes written as \u00XX */
	const char	*hex;
	int		 slash;		/* '/' as "\/" (PHP) */
};
static const struct json_style json_styles[] = {
	{ "", hex_lower, 1 },			/* PHP json_encode */
	{ "<>&", hex_lower, 0 },		/* Go encoding/json */
	{ "<>&'+`", hex_upper, 0 },		/* .NET System.Text.Json */
	{ NULL, hex_lower, 0 },			/* all but unreserved */
};

static size_t
json_escape(const uint8_t *v, size_t len, const struct json_style *js,
    uint8_t *out)
{
	size_t i, o = 0;
	uint8_t c;

	for (i = 0; i < len; i++) {
		c = v[i];
		if (js->also == NULL ? !ascii_unreserved(c) : c < 0x20 || c == 0x7f ||
		    (c != 0 && strchr(js->also, c) != NULL)) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = (uint8_t)js->hex[c >> 4];
			out[o + 5] = (uint8_t)js->hex[c & 0xf];
			o += 6;
		} else if (c == '"' || c == '\\' || (js->slash && c == '/')) {
			out[o++] = '\\';
			out[o++] = c;
		} else
			out[o++] = c;
	}
	return o;
}

/* HTML escaping of & < > " and ', the quote as apos ("&#x27;" or "&#39;"). */
static size_t
html_escape(const uint8_t *v, size_t len, const char *apos, uint8_t *out)
{
	static const char special[] = "&<>\"'";
	static const char *const named[] = { "&amp;", "&lt;", "&gt;",
	    "&quot;" };
	const char *e, *at;
	size_t i, o = 0, n;

	for (i = 0; i < len; i++) {
		if (v[i] == 0 || (at = strchr(special, v[i])) == NULL) {
			out[o++] = v[i];
			continue;
		}
		e = v[i] == '\'' ? apos : named[at - special];
		n = strlen(e);
		memcpy(out + o, e, n);
		o += n;
	}
	return o;
}

/* Every byte but the unreserved as an HTML numeric reference. */
static size_t
html_numeric(const uint8_t *v, size_t len, const char *hex, uint8_t *out)
{
	size_t i, o = 0;
	int n;

	for (i = 0; i < len; i++) {
		if (ascii_unreserved(v[i])) {
			out[o++] = v[i];
			continue;
		}
		if (hex == NULL)
			n = snprintf((char *)out + o, 7, "&#%u;", v[i]);
		else {
			memcpy(out + o, "&#x", 3);
			out[o + 3] = (uint8_t)hex[v[i] >> 4];
			out[o + 4] = (uint8_t)hex[v[i] & 0xf];
			out[o + 5] = ';';
			n = 6;
		}
		o += (size_t)n;
	}
	return o;
}

/* The forms a value takes in JSON, HTML, hex and either case. */
static void
escaped_forms(struct forms *f, const uint8_t *value, size_t len)
{
	size_t i;

	forms_add(f, hex_encode(value, len, hex_lower, f->store + f->used), 1);
	forms_add(f, hex_encode(value, len, hex_upper, f->store + f->used), 1);
	forms_add(f, case_fold(value, len, 1, f->store + f->used), 1);
	forms_add(f, case_fold(value, len, 0, f->store + f->used), 1);
	for (i = 0; i < sizeof(json_styles) / sizeof(json_styles[0]); i++)
		forms_add(f, json_escape(value, len, &json_styles[i],
		    f->store + f->used), 1);
	forms_add(f, html_escape(value, len, "&#x27;", f->store + f->used), 1);
	forms_add(f, html_escape(value, len, "&#39;", f->store + f->used), 1);
	forms_add(f, html_numeric(value, len, NULL, f->store + f->used), 1);
	forms_add(f, html_numeric(value, len, hex_lower, f->store + f->used),
	    1);
	forms_add(f, html_numeric(value, len, hex_upper, f->store + f->used),
	    1);
}

int
redact_forms(const uint8_t *value, size_t len, uint8_t *store,
    size_t store_len, struct redact_pat *pats, size_t max_pats)
{
	struct forms f = { store, 0, pats, 0 };
	size_t a, min;

	if (len == 0 || len > REDACT_MAX_VALUE ||
	    store_len < redact_forms_size(len) || max_pats < REDACT_MAX_FORMS)
		return SL_ERR_INVALID;
	memcpy(store, value, len);
	forms_add(&f, len, 1);
	for (a = 0; a < 3; a++) {
		min = a == 0 ? 1 : REDACT_MIN_SHIFTED;
		forms_add(&f, b64_core(value, len, a, b64_std,
		    store + f.used), min);
		forms_add(&f, b64_core(value, len, a, b64_url,
		    store + f.used), min);
	}
	forms_add(&f, pct_encode(value, len, hex_upper, 0, store + f.used), 1);
	forms_add(&f, pct_encode(value, len, hex_lower, 0, store + f.used), 1);
	forms_add(&f, pct_encode(value, len, hex_upper, 1, store + f.used), 1);
	if (len <= REDACT_MAX_ESCAPED)
		escaped_forms(&f, value, len);
	return (int)f.n;
}

/* ---- the automaton ------------------------------------------------------- */

/* Forgets the automaton and the stream: both are made of secrets. */
static void
wipe(struct redactor *r)
{
	if (r->st != NULL)
		sodium_memzero(r->st, r->nst * sizeof(*r->st));
	if (r->queue != NULL)
		sodium_memzero(r->queue, r->nst * sizeof(*r->queue));
	sodium_memzero(r->pats, sizeof(r->pats));
	sodium_memzero(r->root, sizeof(r->root));
	sodium_memzero(r->start, sizeof(r->start));
	sodium_memzero(r->pair, sizeof(r->pair));
	if (r->wm_m != 0)
		sodium_memzero(r->shift, sizeof(r->shift));
	r->wm_m = 0;
	r->npats = r->nst = r->nroot = r->nstart = 0;
	r->cur = 0;
	r->nkeys = 0;
}

/* Room for need states; what was there is already wiped. */
static int
reserve(struct redactor *r, size_t need)
{
	if (need <= r->cap)
		return 0;
	sodium_free(r->st);
	sodium_free(r->queue);
	r->st = NULL;
	r->queue = NULL;
	r->cap = 0;
	if ((r->st = sodium_allocarray(need, sizeof(*r->st))) == NULL ||
	    (r->queue = sodium_allocarray(need, sizeof(*r->queue))) == NULL)
		return SL_ERR_NOMEM;
	r->cap = need;
	return 0;
}

static void
pair_set(struct redactor *r, uint8_t c0, uint8_t c1)
{
	unsigned bit = (unsigned)c0 << 8 | c1;

	r->pair[bit >> 3] |= (uint8_t)(1u << (bit & 7));
}

static int
pair_has(const struct redactor *r, uint8_t c0, uint8_t c1)
{
	unsigned bit = (unsigned)c0 << 8 | c1;

	return (r->pair[bit >> 3] >> (bit & 7)) & 1;
}

/*
 * The WM_B bytes that end at p, as one load puts them in the low 24 bits
 * of a word (from the input: p[-3] goes), or as a pattern's bytes make
 * the same word one by one (nothing before p[-2] need be there).
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define WM_GRAM(a, b, c)	((uint32_t)(a) << 16 | (uint32_t)(b) << 8 | (c))
#define WM_LOAD_GRAM(w)		((w) & 0xffffff)
#else
#define WM_GRAM(a, b, c)	((uint32_t)(a) | (uint32_t)(b) << 8 | \
				    (uint32_t)(c) << 16)
#define WM_LOAD_GRAM(w)		((w) >> 8)
#endif

/* The shift table's index for a word of WM_B bytes. */
static inline uint32_t
wm_index(uint32_t g)
{
	return (g * 0x9e3779b1u) >> (32 - WM_BITS);
}

static inline uint32_t
wm_hash(const uint8_t *p)
{
	uint32_t w;

	memcpy(&w, p - 3, sizeof(w));
	return wm_index(WM_LOAD_GRAM(w));
}

static inline uint32_t
wm_hash_pat(const uint8_t *p)
{
	return wm_index(WM_GRAM(p[-2], p[-1], p[0]));
}

/*
 * Builds the shift table for the patterns installed, when the shortest
 * is long enough (the pair scan does otherwise).  A window of m bytes
 * that ends with the WM_B bytes a pattern has at q < m begins m - 1 - q
 * bytes before that pattern would there: moving it less passes no
 * occurrence of it that holds those bytes, moving it that far may land
 * on one.
 */
static void
wm_build(struct redactor *r)
{
	const struct redact_pat *pat;
	size_t m = SIZE_MAX, k, q, sh;
	uint32_t h;

	for (k = 0; k < r->npats; k++)
		if (r->pats[k].len < m)
			m = r->pats[k].len;
	if (r->npats == 0 || m < WM_MIN)
		return;
	if (m > WM_MAX_M)
		m = WM_MAX_M;
	memset(r->shift, (int)(m - WM_B + 1), sizeof(r->shift));
	for (k = 0; k < r->npats; k++) {
		pat = &r->pats[k];
		for (q = WM_B - 1; q < m; q++) {
			h = wm_hash_pat(pat->p + q);
			sh = m - 1 - q;
			if (r->shift[h] > sh)
				r->shift[h] = (uint8_t)sh;
		}
	}
	r->wm_m = m;
}

/* The child of s by c, 0 none. */
static inline uint32_t
child(const struct redactor *r, uint32_t s, uint8_t c)
{
	uint32_t t;

	if (s == 0)
		return r->root[c];
	for (t = r->st[s].child; t != 0; t = r->st[t].sib)
		if (r->st[t].c == c)
			return t;
	return 0;
}

/* The state after c from s, through failure links; 0 is the root. */
static inline uint32_t
step(const struct redactor *r, uint32_t s, uint8_t c)
{
	uint32_t t;

	while ((t = child(r, s, c)) == 0 && s != 0)
		s = r->st[s].fail;
	return t;
}

static void
insert(struct redactor *r, size_t k)
{
	const struct redact_pat *pat = &r->pats[k];
	uint32_t s = 0, t;
	size_t j;

	for (j = 0; j < pat->len; j++) {
		if ((t = child(r, s, pat->p[j])) == 0) {
			t = (uint32_t)r->nst++;
			memset(&r->st[t], 0, sizeof(r->st[t]));
			r->st[t].depth = (uint32_t)(j + 1);
			r->st[t].pat = (uint16_t)k;
			r->st[t].c = pat->p[j];
			if (s == 0) {
				r->root[pat->p[j]] = t;
				r->start[pat->p[j]] = 1;
				r->nstart++;
				r->queue[r->nroot++] = t;
			} else {
				r->st[t].sib = r->st[s].child;
				r->st[s].child = t;
			}
		}
		s = t;
	}
	r->st[s].match = (uint32_t)pat->len;
	if (pat->len > 1)
		pair_set(r, pat->p[0], pat->p[1]);
	else	/* a match whatever follows: the 256 bits of p[0] */
		memset(r->pair + (pat->p[0] << 5), 0xff, 32);
}

/*
 * Sets failure links and inherited matches, shallowest states first: a
 * state's failure link is shallower than the state, so its own is known.
 * A state that ends no pattern ends the longest one its link ends.
 */
static void
link_failures(struct redactor *r)
{
	size_t head = 0, tail = r->nroot;
	uint32_t u, v, f;

	while (head < tail) {
		u = r->queue[head++];
		for (v = r->st[u].child; v != 0; v = r->st[v].sib) {
			f = step(r, r->st[u].fail, r->st[v].c);
			r->st[v].fail = f;
			if (r->st[v].match == 0)
				r->st[v].match = r->st[f].match;
			r->queue[tail++] = v;
		}
	}
}

struct redactor *
redactor_new(void)
{
	struct redactor *r;

	if ((r = sodium_malloc(sizeof(*r))) != NULL)
		sodium_memzero(r, sizeof(*r));
	return r;
}

void
redactor_free(struct redactor *r)
{
	if (r == NULL)
		return;
	sodium_free(r->st);
	sodium_free(r->queue);
	sodium_free(r);		/* wipes it */
}

uint64_t
redact_serial(void)
{
	static _Atomic uint64_t next = 1;

	return next++;
}

int
redactor_reset_keyed(struct redactor *r, const struct redact_pat *pats,
    size_t n, const uint64_t *keys, size_t nkeys)
{
	int rv;

	if (n == r->npats && redactor_keyed(r, keys, nkeys)) {
		/* The same patterns: only the stream starts again. */
		memcpy(r->pats, pats, n * sizeof(*pats));
		r->cur = 0;
		r->count = 0;
		r->same_len = 0;
		r->mode = RD_READY;
		return 0;
	}
	if ((rv = redactor_reset(r, pats, n)) != 0 || nkeys > REDACT_MAX_KEYS)
		return rv;
	if (nkeys > 0)
		memcpy(r->keys, keys, nkeys * sizeof(*keys));
	r->nkeys = nkeys;
	return 0;
}

int
redactor_keyed(const struct redactor *r, const uint64_t *keys, size_t nkeys)
{
	return r->mode != RD_UNSET && nkeys > 0 && nkeys == r->nkeys &&
	    memcmp(keys, r->keys, nkeys * sizeof(*keys)) == 0;
}

int
redactor_reset(struct redactor *r, const struct redact_pat *pats, size_t n)
{
	size_t need = 1, k;
	int rv;

	wipe(r);
	r->count = 0;
	r->same_len = 0;
	r->mode = RD_UNSET;
	if (n > REDACT_MAX_PATTERNS)
		return SL_ERR_INVALID;
	for (k = 0; k < n; k++) {
		if (pats[k].p == NULL || pats[k].len == 0)
			return SL_ERR_INVALID;
		/* State numbers are 32-bit. */
		if (pats[k].len > UINT32_MAX - need)
			return SL_ERR_NOMEM;
		need += pats[k].len;
	}
	if (need > SIZE_MAX / sizeof(*r->st))
		return SL_ERR_NOMEM;
	if ((rv = reserve(r, need)) != 0)
		return rv;
	if (n > 0)
		memcpy(r->pats, pats, n * sizeof(*pats));
	r->npats = n;
	memset(&r->st[0], 0, sizeof(r->st[0]));
	r->nst = 1;
	for (k = 0; k < n; k++)
		insert(r, k);
	link_failures(r);
	wm_build(r);
	r->mode = RD_READY;
	return 0;
}

/* ---- streaming ----------------------------------------------------------- */

/*
 * What one feed has to emit: the bytes held back before it, then its
 * input, as one sequence; done counts what is out.
 */
struct pending {
	const uint8_t	*held;
	size_t		 hlen;
	const uint8_t	*in;
	size_t		 done;
	redact_emit	 emit;
	void		*arg;
};

/* Emits the pending bytes up to x (counted from the first held byte). */
static int
emit_upto(struct pending *pd, size_t x)
{
	size_t e;

	if (pd->done < pd->hlen && x > pd->done) {
		e = x < pd->hlen ? x : pd->hlen;
		if (pd->emit(pd->arg, pd->held + pd->done, e - pd->done) != 0)
			return SL_ERR_IO;
		pd->done = e;
	}
	if (x > pd->done) {
		if (pd->emit(pd->arg, pd->in + (pd->done - pd->hlen),
		    x - pd->done) != 0)
			return SL_ERR_IO;
		pd->done = x;
	}
	return 0;
}

/*
 * The first byte at or after i that may begin an occurrence, or len: it
 * and the next begin a pattern, or it begins one and is the last byte
 * of the input (the next feed will tell).
 */
static size_t
skip(const struct redactor *r, const uint8_t *in, size_t i, size_t len)
{
	if (r->nstart == 0)
		return len;
	while (len - i >= 5 && !(pair_has(r, in[i], in[i + 1]) |
	    pair_has(r, in[i + 1], in[i + 2]) |
	    pair_has(r, in[i + 2], in[i + 3]) |
	    pair_has(r, in[i + 3], in[i + 4])))
		i += 4;
	while (len - i >= 2 && !pair_has(r, in[i], in[i + 1]))
		i++;
	if (len - i == 1 && !r->start[in[i]])
		return len;
	return i;
}

/*
 * How far the window that ends at e (in[e - m1 .. e], e >= 3 as
 * wm_hash() wants) may move: its shift, 1 if that is 0 but its first two
 * bytes begin no pattern (every pattern has two or more), or 0 if it
 * may begin an occurrence.
 */
static inline size_t
wm_shift(const struct redactor *r, const uint8_t *in, size_t e, size_t m1)
{
	size_t sh = r->shift[wm_hash(in + e)];

	if (sh == 0 && !pair_has(r, in[e - m1], in[e - m1 + 1]))
		sh = 1;
	return sh;
}

/*
 * As skip(), with the shift table first: the first byte at or after i
 * that may begin an occurrence, or len.  A window of m = wm_m bytes moves
 * by its shift, for an occurrence that began in the bytes it passes
 * would have its first m bytes in the window, and so the last WM_B of
 * them.  The scan stops where a window may begin an occurrence or no
 * longer fits in the input: the pair scan takes the last m - 1 bytes or
 * fewer, as what the next feed brings cannot be looked at yet.
 *
 * Each move waits on the loads of the one before, so two scans at once
 * take little longer than one: on a long input, one scans the windows
 * that begin before mid while the other scans on from mid.  The first
 * one's stop comes first; where the second stopped stands once the
 * first has passed mid.
 */
static size_t
skip_wm(const struct redactor *r, const uint8_t *in, size_t i, size_t len)
{
	size_t m1 = r->wm_m - 1, a, b, sh, mid, found = SIZE_MAX;

	if (len - i >= WM_TWO * (m1 + 1)) {
		mid = i + (len - i) / 2;
		for (a = i + m1, b = mid + m1; a - m1 < mid;) {
			if ((sh = wm_shift(r, in, a, m1)) == 0)
				return a - m1;
			a += sh;
			if (found != SIZE_MAX || b >= len)
				continue;
			if ((sh = wm_shift(r, in, b, m1)) == 0)
				found = b - m1;
			b += sh;
		}
		if (found != SIZE_MAX)
			return found;
		i = (a > b ? a : b) - m1;
	}
	for (a = i + m1; a < len; a += sh)
		if ((sh = wm_shift(r, in, a, m1)) == 0)
			return a - m1;
	return skip(r, in, a - m1, len);
}

/* The bytes a state spells, which are the start of a pattern. */
static const uint8_t *
spelling(const struct redactor *r, uint32_t s)
{
	return s == 0 ? NULL : r->pats[r->st[s].pat].p;
}

static int
ready(const struct redactor *r)
{
	switch (r->mode) {
	case RD_READY:
		return 0;
	case RD_BROKEN:
		return SL_ERR_IO;
	default:
		return SL_ERR_INVALID;
	}
}

void
redactor_same_length(struct redactor *r, int on)
{
	r->same_len = on != 0;
}

/*
 * What replaces an occurrence of len bytes: REDACT_MARK, or with
 * same_len as many bytes: REDACT_MARK followed by '*', or all '*' when
 * the mark is longer.
 */
static int
mark(const struct redactor *r, size_t len, redact_emit emit, void *arg)
{
	uint8_t stars[64];
	size_t n;

	if (!r->same_len)
		return emit(arg, (const uint8_t *)REDACT_MARK, MARK_LEN);
	memset(stars, '*', sizeof(stars));
	if (len >= MARK_LEN) {
		if (emit(arg, (const uint8_t *)REDACT_MARK, MARK_LEN) != 0)
			return -1;
		len -= MARK_LEN;
	}
	for (; len > 0; len -= n) {
		n = len < sizeof(stars) ? len : sizeof(stars);
		if (emit(arg, stars, n) != 0)
			return -1;
	}
	return 0;
}

int
redactor_feed(struct redactor *r, const uint8_t *in, size_t len,
    redact_emit emit, void *arg)
{
	struct pending pd;
	uint32_t s = r->cur, m;
	size_t i = 0;
	int rv;

	if ((rv = ready(r)) != 0)
		return rv;
	pd.held = spelling(r, s);
	pd.hlen = r->st[s].depth;
	pd.in = in;
	pd.done = 0;
	pd.emit = emit;
	pd.arg = arg;
	while (i < len) {
		if (s == 0 && (i = r->wm_m != 0 ? skip_wm(r, in, i, len) :
		    skip(r, in, i, len)) == len)
			break;
		s = step(r, s, in[i++]);
		if ((m = r->st[s].match) == 0)
			continue;
		/* The match lies within what s spells, all pending. */
		if ((rv = emit_upto(&pd, pd.hlen + i - m)) != 0)
			goto out;
		if (mark(r, m, emit, arg) != 0) {
			rv = SL_ERR_IO;
			goto out;
		}
		pd.done = pd.hlen + i;
		r->count++;
		s = 0;
	}
	r->cur = s;
	rv = emit_upto(&pd, pd.hlen + len - r->st[s].depth);
out:
	if (rv != 0) {
		r->cur = 0;
		r->mode = RD_BROKEN;
	}
	return rv;
}

int
redactor_flush(struct redactor *r, redact_emit emit, void *arg)
{
	uint32_t s = r->cur;
	int rv;

	if ((rv = ready(r)) != 0)
		return rv;
	r->cur = 0;
	if (s != 0 && emit(arg, spelling(r, s), r->st[s].depth) != 0) {
		r->mode = RD_BROKEN;
		return SL_ERR_IO;
	}
	return 0;
}

uint64_t
redactor_count(const struct redactor *r)
{
	return r->count;
}

/* ---- one shot ------------------------------------------------------------ */

struct sink {
	uint8_t	*out;
	size_t	 len;
	size_t	 cap;
	int	 full;
};

static int
sink_emit(void *arg, const uint8_t *p, size_t len)
{
	struct sink *k = arg;

	if (len > k->cap - k->len) {
		k->full = 1;
		return -1;
	}
	memcpy(k->out + k->len, p, len);
	k->len += len;
	return 0;
}

long
redact_buf(const struct redact_pat *pats, size_t n, const uint8_t *in,
    size_t len, uint8_t *out, size_t out_len, uint64_t *count)
{
	struct redactor *r;
	struct sink k = { out, 0, out_len, 0 };
	long rv;

	/* The length written must fit the return value. */
	if (k.cap > LONG_MAX)
		k.cap = LONG_MAX;
	if ((r = redactor_new()) == NULL)
		return SL_ERR_NOMEM;
	if ((rv = redactor_reset(r, pats, n)) != 0)
		goto out;
	if ((rv = redactor_feed(r, in, len, sink_emit, &k)) != 0 ||
	    (rv = redactor_flush(r, sink_emit, &k)) != 0) {
		if (k.full)
			rv = SL_ERR_TOO_BIG;
		goto out;
	}
	if (count != NULL)
		*count += redactor_count(r);
	rv = (long)k.len;
out:
	redactor_free(r);
	return rv;
}
