/*
 * redact_bench.c: how fast the response redactor (redact.c) streams a
 * body that holds no secret.  For each kind of body (random bytes,
 * printable base64 text in 76-column lines, JSON text; on demand hex
 * digests and form-encoded text) and each number of secrets (random
 * printable values, searched for in all the forms redact_forms() gives),
 * a redactor is reset and fed the body, SIZE MiB, in pieces of PIECE
 * bytes, then flushed, REPS times.  Prints the best MB/s of those runs
 * (by the CPU time of the feeds), the occurrences replaced and a
 * checksum of what was emitted (the same for two builds that redact
 * alike); then the cost of a reset.  A body of 1 MiB stays in the
 * caches, as one just decrypted does; one of 64 MiB is read from memory.
 * Not a test.
 *
 * usage: redact_bench [-s SIZE_MIB] [-r REPS] [-p PIECE] [-l VALUE_LEN]
 *        [-k KINDS] [-n COUNTS] [-P EVERY]
 *   SIZE    64 unless told; REPS 3; PIECE 16384; VALUE_LEN 40
 *   KINDS   letters of r (random), b (base64 text), j (JSON), h (hex
 *           digests), u (form-encoded text); default rbj
 *   COUNTS  digits: the numbers of secrets; default 124
 *   EVERY   plants a form of a secret every EVERY bytes (0, the
 *           default: none), to compare counts across builds
 */
#include "autoconf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "util/redact.h"

#define MAXSECRETS	9

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* splitmix64: the same bodies and secrets every run. */
static uint64_t
next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * CPU time of this thread: what the redactor costs, less the noise of a
 * busy machine taking the CPU away now and then.
 */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct sink {
	uint64_t	bytes;
	uint64_t	sum;		/* FNV-1a of the bytes, if hash */
	int		hash;
};

static int
emit(void *arg, const uint8_t *p, size_t len)
{
	struct sink *k = arg;
	size_t i;

	k->bytes += len;
	if (k->hash)
		for (i = 0; i < len; i++)
			k->sum = (k->sum ^ p[i]) * 0x100000001b3ull;
	return 0;
}

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void
fill_random(uint8_t *b, size_t len)
{
	uint64_t v;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		v = next();
		memcpy(b + i, &v, 8);
	}
	for (; i < len; i++)
		b[i] = (uint8_t)next();
}

/* Base64 text as MIME writes it: 76 characters a line, CRLF. */
static void
fill_base64(uint8_t *b, size_t len)
{
	size_t i, col = 0;
	uint64_t v = 0;
	int left = 0;

	for (i = 0; i < len; i++) {
		if (col == 76) {
			b[i] = '\r';
			if (++i < len)
				b[i] = '\n';
			col = 0;
			continue;
		}
		if (left == 0) {
			v = next();
			left = 10;
		}
		b[i] = (uint8_t)b64[v & 63];
		v >>= 6;
		left--;
		col++;
	}
}

/* Lower-case hex digests, 64 digits a line, as in a list of hashes. */
static void
fill_hex(uint8_t *b, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, col = 0;
	uint64_t v = 0;
	int left = 0;

	for (i = 0; i < len; i++) {
		if (col == 64) {
			b[i] = '\n';
			col = 0;
			continue;
		}
		if (left == 0) {
			v = next();
			left = 16;
		}
		b[i] = (uint8_t)hex[v & 15];
		v >>= 4;
		left--;
		col++;
	}
}

/*
 * A form-encoded body: random printable text, percent-encoded the way
 * redact_forms() does it, in key=value pairs.
 */
static void
fill_urlenc(uint8_t *b, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i = 0, n;
	uint8_t c;

	while (i < len) {
		n = 8 + next() % 64;
		while (n-- > 0 && i < len) {
			c = (uint8_t)(0x20 + next() % 95);
			if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
			    c == '_' || c == '~')
				b[i++] = c;
			else {
				b[i++] = '%';
				if (i < len)
					b[i++] = (uint8_t)hex[c >> 4];
				if (i < len)
					b[i++] = (uint8_t)hex[c & 15];
			}
		}
		if (i < len)
			b[i++] = next() % 2 ? '&' : '=';
	}
}

/* Appends s to b[*o..len), as much as fits. */
static void
put(uint8_t *b, size_t *o, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n > len - *o)
		n = len - *o;
	memcpy(b + *o, s, n);
	*o += n;
}

static const char *const words[] = {
	"the", "widget", "acme", "order", "shipped", "pending", "customer",
	"invoice", "north", "warehouse", "blue", "large", "refund", "express",
	"Lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing",
	"elit", "sed", "do", "eiusmod", "tempor", "incididunt", "labore",
	"Zürich", "café", "naïve", "<b>bold</b>", "a/b", "50%",
	"\\\"quoted\\\"",
};
#define NWORDS	(sizeof(words) / sizeof(words[0]))

/* An API answer: an array of records, pretty-printed as many servers do. */
static void
fill_json(uint8_t *b, size_t len)
{
	char tmp[128];
	size_t o = 0, w, i;
	uint64_t id = 1000;

	put(b, &o, len, "{\"items\": [\n");
	while (o < len) {
		snprintf(tmp, sizeof(tmp), "  {\n    \"id\": %" PRIu64 ",\n"
		    "    \"sku\": \"SKU-%06" PRIu64 "\",\n    \"name\": \"",
		    id, next() % 1000000);
		id += 1 + next() % 7;
		put(b, &o, len, tmp);
		for (w = 2 + next() % 3, i = 0; i < w; i++) {
			put(b, &o, len, i ? " " : "");
			put(b, &o, len, words[next() % NWORDS]);
		}
		snprintf(tmp, sizeof(tmp), "\",\n    \"price\": %" PRIu64
		    ".%02" PRIu64 ",\n    \"in_stock\": %s,\n"
		    "    \"created_at\": \"2024-%02" PRIu64 "-%02" PRIu64
		    "T%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "Z\",\n"
		    "    \"description\": \"", next() % 500, next() % 100,
		    next() & 1 ? "true" : "false", 1 + next() % 12,
		    1 + next() % 28, next() % 24, next() % 60, next() % 60);
		put(b, &o, len, tmp);
		for (w = 8 + next() % 24, i = 0; i < w; i++) {
			put(b, &o, len, i ? " " : "");
			put(b, &o, len, words[next() % NWORDS]);
		}
		put(b, &o, len, "\",\n    \"tags\": [\"");
		put(b, &o, len, words[next() % NWORDS]);
		put(b, &o, len, "\", \"");
		put(b, &o, len, words[next() % NWORDS]);
		put(b, &o, len, "\"]\n  },\n");
	}
}

struct secrets {
	struct redact_pat	 pats[REDACT_MAX_PATTERNS];
	size_t			 n;
	uint8_t			*store[MAXSECRETS];
	size_t			 minlen;
};

static void
make_secrets(struct secrets *s, size_t count, size_t vlen)
{
	uint8_t value[REDACT_MAX_VALUE];
	size_t k, i, size;
	int n;

	memset(s, 0, sizeof(*s));
	s->minlen = SIZE_MAX;
	for (k = 0; k < count; k++) {
		for (i = 0; i < vlen; i++)
			value[i] = (uint8_t)(0x20 + next() % 95);
		size = redact_forms_size(vlen);
		if ((s->store[k] = malloc(size)) == NULL ||
		    (n = redact_forms(value, vlen, s->store[k], size,
		    s->pats + s->n, REDACT_MAX_PATTERNS - s->n)) < 0) {
			fprintf(stderr, "redact_bench: forms failed\n");
			exit(1);
		}
		s->n += (size_t)n;
	}
	for (i = 0; i < s->n; i++)
		if (s->pats[i].len < s->minlen)
			s->minlen = s->pats[i].len;
}

/* Copies form (k * 7 + 3) % n of the secrets every `every` bytes. */
static void
plant(uint8_t *b, size_t len, const struct secrets *s, size_t every)
{
	size_t at, k = 0;
	const struct redact_pat *p;

	for (at = every / 2; every > 0 && at < len; at += every, k++) {
		p = &s->pats[(k * 7 + 3) % s->n];
		if (p->len <= len - at)
			memcpy(b + at, p->p, p->len);
	}
}

/* Feeds body in pieces; seconds taken. */
static double
run(struct redactor *r, const struct secrets *s, const uint8_t *body,
    size_t len, size_t piece, struct sink *k)
{
	size_t i, n;
	double t0;

	if (redactor_reset(r, s->pats, s->n) != 0) {
		fprintf(stderr, "redact_bench: reset failed\n");
		exit(1);
	}
	t0 = now();
	for (i = 0; i < len; i += n) {
		n = len - i < piece ? len - i : piece;
		if (redactor_feed(r, body + i, n, emit, k) != 0) {
			fprintf(stderr, "redact_bench: feed failed\n");
			exit(1);
		}
	}
	if (redactor_flush(r, emit, k) != 0) {
		fprintf(stderr, "redact_bench: flush failed\n");
		exit(1);
	}
	return now() - t0;
}

int
main(int argc, char **argv)
{
	const char *kinds = "rbj", *counts = "124", *kc, *cc;
	size_t mib = 64, reps = 3, piece = 16384, vlen = 40, every = 0;
	size_t len, rep, count, i, nresets;
	struct redactor *r;
	struct secrets s;
	struct sink k;
	uint8_t *body;
	double t, best, t0;
	int ch;

	if (sodium_init() < 0)		/* the redactor is in guarded memory */
		return 1;
	while ((ch = getopt(argc, argv, "s:r:p:l:k:n:P:")) != -1) {
		switch (ch) {
		case 's': mib = strtoul(optarg, NULL, 10); break;
		case 'r': reps = strtoul(optarg, NULL, 10); break;
		case 'p': piece = strtoul(optarg, NULL, 10); break;
		case 'l': vlen = strtoul(optarg, NULL, 10); break;
		case 'k': kinds = optarg; break;
		case 'n': counts = optarg; break;
		case 'P': every = strtoul(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: redact_bench [-s SIZE_MIB] "
			    "[-r REPS] [-p PIECE] [-l VALUE_LEN] [-k KINDS] "
			    "[-n COUNTS] [-P EVERY]\n");
			return 2;
		}
	}
	if (mib == 0 || reps == 0 || piece == 0 || vlen == 0 ||
	    vlen > REDACT_MAX_VALUE) {
		fprintf(stderr, "redact_bench: bad arguments\n");
		return 2;
	}
	len = mib << 20;
	if ((body = malloc(len)) == NULL || (r = redactor_new()) == NULL) {
		fprintf(stderr, "redact_bench: out of memory\n");
		return 1;
	}
	printf("%-7s %7s %8s %6s %9s %10s %16s\n", "body", "secrets",
	    "patterns", "minlen", "MB/s", "count", "checksum");
	for (kc = kinds; *kc != '\0'; kc++) {
		for (cc = counts; *cc != '\0'; cc++) {
			count = (size_t)(*cc - '0');
			if (count < 1 || count > MAXSECRETS)
				continue;
			rng = 0x9e3779b97f4a7c15ull + (uint64_t)*kc;
			switch (*kc) {
			case 'r': fill_random(body, len); break;
			case 'b': fill_base64(body, len); break;
			case 'j': fill_json(body, len); break;
			case 'h': fill_hex(body, len); break;
			case 'u': fill_urlenc(body, len); break;
			default: continue;
			}
			rng = 0x5eed + count;
			make_secrets(&s, count, vlen);
			plant(body, len, &s, every);
			/* Once with the checksum, untimed. */
			memset(&k, 0, sizeof(k));
			k.hash = 1;
			k.sum = 0xcbf29ce484222325ull;
			run(r, &s, body, len, piece, &k);
			best = 0;
			for (rep = 0; rep < reps; rep++) {
				struct sink q = { 0, 0, 0 };

				t = run(r, &s, body, len, piece, &q);
				if (best == 0 || t < best)
					best = t;
			}
			printf("%-7s %7zu %8zu %6zu %9.0f %10" PRIu64
			    " %016" PRIx64 "\n", *kc == 'r' ? "random" :
			    *kc == 'b' ? "base64" : *kc == 'j' ? "json" :
			    *kc == 'h' ? "hex" : "urlenc", count, s.n,
			    s.minlen, (double)len / best / 1e6,
			    redactor_count(r), k.sum);
			fflush(stdout);
			for (i = 0; i < count; i++)
				free(s.store[i]);
		}
	}
	/* The cost of a reset, with the most secrets asked for. */
	for (cc = counts; *cc != '\0'; cc++) {
		count = (size_t)(*cc - '0');
		if (count < 1 || count > MAXSECRETS)
			continue;
		rng = 0x5eed + count;
		make_secrets(&s, count, vlen);
		/* The best of 200 batches: the least disturbed. */
		nresets = 100;
		best = 0;
		for (rep = 0; rep < 200; rep++) {
			t0 = now();
			for (i = 0; i < nresets; i++)
				if (redactor_reset(r, s.pats, s.n) != 0)
					return 1;
			t = now() - t0;
			if (best == 0 || t < best)
				best = t;
		}
		printf("reset, %zu secret%s (%zu patterns): %.2f us\n", count,
		    count == 1 ? "" : "s", s.n, best / (double)nresets * 1e6);
		for (i = 0; i < count; i++)
			free(s.store[i]);
	}
	redactor_free(r);
	free(body);
	return 0;
}
