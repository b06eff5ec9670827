/*
 * arec.c: audit records encoded flat, in canonical form, as they are
 * built; sealed by the writer without a JSON tree (arec.h).
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "util/utf8.h"
#include "audit/arec.h"

#define CUT_MARK	"...[cut]"
#define CUT_MARK_LEN	(sizeof(CUT_MARK) - 1)
#define REPLACEMENT	0xfffdu

static const char hexdig[] = "0123456789ABCDEF";

void
arec_ts(char buf[AREC_TS_LEN])
{
	/* The date and time of the last second seen by this thread. */
	static _Thread_local time_t last = -1;
	static _Thread_local char head[AREC_TS_LEN];
	struct timespec ts;
	struct tm tm;
	unsigned ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (unsigned)(ts.tv_nsec / 1000000) % 1000u;
	if (ts.tv_sec == last) {
		/* 2026-12-01T05:40:28. is 20 bytes; then ms and "Z". */
		memcpy(buf, head, 20);
		buf[20] = (char)('0' + ms / 100);
		buf[21] = (char)('0' + ms / 10 % 10);
		buf[22] = (char)('0' + ms % 10);
		buf[23] = 'Z';
		buf[24] = '\0';
		return;
	}
	gmtime_r(&ts.tv_sec, &tm);
	/* The modulos only tell the compiler how wide each field is. */
	snprintf(buf, AREC_TS_LEN, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
	    (unsigned)(tm.tm_year + 1900) % 10000u,
	    (unsigned)(tm.tm_mon + 1) % 100u, (unsigned)tm.tm_mday % 100u,
	    (unsigned)tm.tm_hour % 100u, (unsigned)tm.tm_min % 100u,
	    (unsigned)tm.tm_sec % 100u, ms);
	if (strlen(buf) == 24) {
		memcpy(head, buf, 20);
		last = ts.tv_sec;
	}
}

/* ---- strings ------------------------------------------------------------ */

/* The code point at s[*i..len); a byte that is not UTF-8 is one U+FFFD. */
static uint32_t
next_cp(const unsigned char *s, size_t len, size_t *i)
{
	int32_t cp = utf8_next(s, len, i);

	return cp < 0 ? REPLACEMENT : (uint32_t)cp;
}

/* Bytes of cp in UTF-8: what AUDIT_STR_MAX counts. */
static size_t
utf8_len(uint32_t cp)
{
	return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* The escaped form of cp, as jansson's JSON_ENSURE_ASCII writes it. */
static size_t
escape_cp(uint32_t cp, char *o)
{
	uint32_t hi, lo;

	switch (cp) {
	case '"':	memcpy(o, "\\\"", 2); return 2;
	case '\\':	memcpy(o, "\\\\", 2); return 2;
	case '\b':	memcpy(o, "\\b", 2); return 2;
	case '\f':	memcpy(o, "\\f", 2); return 2;
	case '\n':	memcpy(o, "\\n", 2); return 2;
	case '\r':	memcpy(o, "\\r", 2); return 2;
	case '\t':	memcpy(o, "\\t", 2); return 2;
	}
	if (cp >= 0x20 && cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x10000) {
		o[0] = '\\';
		o[1] = 'u';
		o[2] = hexdig[cp >> 12];
		o[3] = hexdig[(cp >> 8) & 0xf];
		o[4] = hexdig[(cp >> 4) & 0xf];
		o[5] = hexdig[cp & 0xf];
		return 6;
	}
	cp -= 0x10000;
	hi = 0xd800 | (cp >> 10);
	lo = 0xdc00 | (cp & 0x3ff);
	return escape_cp(hi, o) + escape_cp(lo, o + 6);
}

/* Whether c is written as it is (printable ASCII but " and \\, and DEL). */
static inline int
plain(unsigned char c)
{
	static const uint64_t set[4] = {
		0xfffffffb00000000ull, 0xffffffffefffffffull, 0, 0 };

	return (int)(set[c >> 6] >> (c & 63) & 1);
}

/* Whether s[0..len) is longer than AUDIT_STR_MAX once made UTF-8. */
static int
too_long(const unsigned char *s, size_t len)
{
	size_t i = 0, u = 0;

	if (len <= AUDIT_STR_MAX / 3)
		return 0;	/* even all replaced, it fits */
	while (i < len)
		if ((u += utf8_len(next_cp(s, len, &i))) > AUDIT_STR_MAX)
			return 1;
	return 0;
}

/* The longest escape of one code point, and the two quotes. */
#define ESC_MAX		12

int
arec_json_str(char *out, size_t cap, size_t *off, const char *str,
    size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = *off, i = 0, u = 0, keep, n, run;
	uint32_t cp;
	int cut = too_long(s, len);

	keep = cut ? AUDIT_STR_MAX - CUT_MARK_LEN : (size_t)-1;
	if (cap - o < 2)
		return -1;
	out[o++] = '"';
	while (i < len) {
		/* A run of bytes written as they are, at once. */
		for (run = 0; i + run < len && plain(s[i + run]); run++)
			;
		if (run > 0) {
			n = run < keep - u ? run : keep - u;
			if (n == 0)
				break;		/* cut at keep */
			if (cap - o < n - 1 + ESC_MAX)
				return -1;
			memcpy(out + o, s + i, n);
			o += n;
			u += n;
			i += n;
			if (n < run)
				break;		/* cut at keep */
			continue;
		}
		cp = next_cp(s, len, &i);
		if ((u += utf8_len(cp)) > keep)
			break;
		if (cap - o < ESC_MAX)
			return -1;
		o += escape_cp(cp, out + o);
	}
	if (cut) {
		if (cap - o < CUT_MARK_LEN + 1)
			return -1;
		memcpy(out + o, CUT_MARK, CUT_MARK_LEN);
		o += CUT_MARK_LEN;
	}
	if (cap - o < 1)
		return -1;
	out[o++] = '"';
	*off = o;
	return cut;
}

/* ---- building ----------------------------------------------------------- */

void
arec_init(struct arec *r)
{
	r->len = 0;
	r->n = 0;
	r->dropped = 0;
	r->any_cut = 0;
	r->finishing = 0;
}

/*
 * Room kept for what arec_finish adds: "ts", "type" (a constant of ours)
 * and "cut".
 */
#define RESERVE_MEMBERS	3
#define RESERVE_BYTES	128

/* Starts member key: ,"key": written; 0, or -1 when there is no room. */
static int
member_begin(struct arec *r, const char *key)
{
	size_t klen = strlen(key);
	size_t nmax = AREC_MEMBERS - (r->finishing ? 0 : RESERVE_MEMBERS);
	size_t bmax = AREC_BYTES - (r->finishing ? 0 : RESERVE_BYTES);

	if (r->n >= nmax || bmax - r->len < klen + 4) {
		r->dropped = 1;
		return -1;
	}
	r->m[r->n].key = key;
	r->m[r->n].cut = 0;
	r->m[r->n].off = (uint32_t)r->len;
	r->buf[r->len++] = ',';
	r->buf[r->len++] = '"';
	memcpy(r->buf + r->len, key, klen);
	r->len += klen;
	r->buf[r->len++] = '"';
	r->buf[r->len++] = ':';
	return 0;
}

static void
member_end(struct arec *r)
{
	r->m[r->n].len = (uint32_t)(r->len - r->m[r->n].off);
	r->n++;
}

/* The member begun did not fit: it is left out, the record says cut. */
static void
member_drop(struct arec *r)
{
	r->len = r->m[r->n].off;
	r->dropped = 1;
}

static void
member_lit(struct arec *r, const char *key, const char *lit, size_t n)
{
	if (member_begin(r, key) != 0)
		return;
	if (AREC_BYTES - (r->finishing ? 0 : RESERVE_BYTES) - r->len < n) {
		member_drop(r);
		return;
	}
	memcpy(r->buf + r->len, lit, n);
	r->len += n;
	member_end(r);
}

void
arec_strn(struct arec *r, const char *key, const char *s, size_t len)
{
	int cut;

	if (s == NULL) {
		member_lit(r, key, "null", 4);
		return;
	}
	if (member_begin(r, key) != 0)
		return;
	if ((cut = arec_json_str(r->buf, AREC_BYTES - (r->finishing ? 0 :
	    RESERVE_BYTES), &r->len, s, len)) < 0) {
		member_drop(r);
		return;
	}
	r->m[r->n].cut = cut;
	r->any_cut |= cut;
	member_end(r);
}

void
arec_str(struct arec *r, const char *key, const char *s)
{
	arec_strn(r, key, s, s != NULL ? strlen(s) : 0);
}

void
arec_int(struct arec *r, const char *key, int64_t v)
{
	char num[24], *p = num + sizeof(num);
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

	/* By hand: snprintf was a visible share of a request's CPU. */
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		*--p = '-';
	member_lit(r, key, p, (size_t)(num + sizeof(num) - p));
}

void
arec_bool(struct arec *r, const char *key, int v)
{
	if (v)
		member_lit(r, key, "true", 4);
	else
		member_lit(r, key, "false", 5);
}

void
arec_raw(struct arec *r, const char *key, const char *json, size_t len)
{
	member_lit(r, key, json, len);
}

/* ---- finishing ---------------------------------------------------------- */

/* strcmp, but the first bytes (most often different) inline. */
static inline int
keycmp(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (a[0] != b[0])
		return (unsigned char)a[0] - (unsigned char)b[0];
	return strcmp(a, b);
}

/* Where a member named key would go among the n sorted ones. */
static uint32_t
place_of(const struct arec *r, const size_t *order, size_t n,
    const char *key)
{
	uint32_t at = 0;
	size_t i;

	for (i = 0; i < n && keycmp(r->m[order[i]].key, key) < 0; i++)
		at += r->m[order[i]].len;
	return at;
}

struct aflat *
arec_finish(struct arec *r, const char *type)
{
	char ts[AREC_TS_LEN];
	size_t order[AREC_MEMBERS], n = 0, i, j, total = 0, k;
	struct aflat *f;
	int cut;

	arec_ts(ts);
	r->finishing = 1;
	arec_str(r, "ts", ts);
	arec_str(r, "type", type);
	/* Cut: a member left out, or a value cut that was not set again. */
	cut = r->dropped;
	for (i = 0; i < r->n && !cut && r->any_cut; i++) {
		for (j = i + 1; j < r->n; j++)
			if (strcmp(r->m[j].key, r->m[i].key) == 0)
				break;
		cut = j == r->n && r->m[i].cut;
	}
	if (cut)
		arec_bool(r, "cut", 1);
	/* Sorted by key, the last of a key set twice kept; seal's own out. */
	for (i = 0; i < r->n; i++) {
		const char *key = r->m[i].key;

		if (strcmp(key, "seq") == 0 || strcmp(key, "prev") == 0 ||
		    strcmp(key, "hash") == 0)
			continue;
		for (j = 0; j < n && keycmp(r->m[order[j]].key, key) < 0; j++)
			;
		if (j < n && keycmp(r->m[order[j]].key, key) == 0) {
			order[j] = i;
			continue;
		}
		memmove(order + j + 1, order + j, (n - j) * sizeof(*order));
		order[j] = i;
		n++;
	}
	for (i = 0; i < n; i++)
		total += r->m[order[i]].len;
	if ((f = malloc(sizeof(*f) + total)) == NULL)
		return NULL;
	f->len = (uint32_t)total;
	for (i = 0, k = 0; i < n; i++) {
		memcpy(f->body + k, r->buf + r->m[order[i]].off,
		    r->m[order[i]].len);
		k += r->m[order[i]].len;
	}
	f->at_hash = place_of(r, order, n, "hash");
	f->at_prev = place_of(r, order, n, "prev");
	f->at_seq = place_of(r, order, n, "seq");
	return f;
}

size_t
arec_json(const struct arec *r, const char *type, char *out, size_t cap)
{
	size_t o, i, tlen = strlen(type);

	/* By hand: snprintf was a visible share of a request's CPU. */
	if (cap < tlen + 12)
		return 0;
	memcpy(out, "{\"type\":\"", 9);
	memcpy(out + 9, type, tlen);
	out[9 + tlen] = '"';
	o = tlen + 10;
	for (i = 0; i < r->n; i++) {
		if (cap - o < r->m[i].len + 2)
			return 0;
		memcpy(out + o, r->buf + r->m[i].off, r->m[i].len);
		o += r->m[i].len;
	}
	out[o++] = '}';
	out[o] = '\0';
	return o;
}

/* ---- sealing ------------------------------------------------------------ */

struct seg {
	const char	*p;
	size_t		 len;
};

size_t
aflat_seal(const struct aflat *f, uint64_t seq, const char *prev,
    char hash[AUDIT_HASH_HEX + 1], char *out, size_t cap)
{
	crypto_generichash_state st;
	uint8_t h[crypto_generichash_BYTES];
	char hpart[16 + AUDIT_HASH_HEX], ppart[16 + AUDIT_HASH_HEX];
	char spart[32], *sp = spart + sizeof(spart);
	struct seg s[7];
	size_t i, o = 0, first;
	uint64_t u = seq;

	memcpy(hpart, ",\"hash\":\"", 9);
	memset(hpart + 9, '0', AUDIT_HASH_HEX);
	hpart[9 + AUDIT_HASH_HEX] = '"';
	memcpy(ppart, ",\"prev\":\"", 9);
	memcpy(ppart + 9, prev, AUDIT_HASH_HEX);
	ppart[9 + AUDIT_HASH_HEX] = '"';
	do {
		*--sp = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	sp -= 7;
	memcpy(sp, ",\"seq\":", 7);
	s[0] = (struct seg){ f->body, f->at_hash };
	s[1] = (struct seg){ hpart, 10 + AUDIT_HASH_HEX };
	s[2] = (struct seg){ f->body + f->at_hash, f->at_prev - f->at_hash };
	s[3] = (struct seg){ ppart, 10 + AUDIT_HASH_HEX };
	s[4] = (struct seg){ f->body + f->at_prev, f->at_seq - f->at_prev };
	s[5] = (struct seg){ sp, (size_t)(spart + sizeof(spart) - sp) };
	s[6] = (struct seg){ f->body + f->at_seq, f->len - f->at_seq };
	for (i = 0; i < 7; i++)
		o += s[i].len;
	if (o + 2 > cap)
		return 0;
	/* The canonical bytes: all but "hash", the first ',' a '{'. */
	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	first = 1;
	for (i = 0; i < 7; i++) {
		if (i == 1 || s[i].len == 0)
			continue;
		if (first) {
			crypto_generichash_update(&st,
			    (const unsigned char *)"{", 1);
			crypto_generichash_update(&st,
			    (const unsigned char *)s[i].p + 1, s[i].len - 1);
			first = 0;
		} else
			crypto_generichash_update(&st,
			    (const unsigned char *)s[i].p, s[i].len);
	}
	crypto_generichash_update(&st, (const unsigned char *)"}", 1);
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(hash, AUDIT_HASH_HEX + 1, h, sizeof(h));
	memcpy(hpart + 9, hash, AUDIT_HASH_HEX);
	for (i = 0, o = 0; i < 7; i++) {
		memcpy(out + o, s[i].p, s[i].len);
		o += s[i].len;
	}
	out[0] = '{';
	out[o++] = '}';
	out[o++] = '\n';
	return o;
}
