/*
 * wire.h: the fields of a message between sluiced's processes, written
 * and read in order: fixed-size integers (little-endian) and byte strings
 * with a 32-bit length.  The writer works over the caller's buffer and
 * stops at its end (over); the reader never reads past its bytes (bad)
 * and every string it gives points into them.  A message read with bad
 * set, or with bytes left over (wire_done), is malformed.
 */
#ifndef SLUICE_WIRE_H
#define SLUICE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct wire_w {
	uint8_t		*p;
	size_t		 len, cap;
	int		 over;
};

struct wire_r {
	const uint8_t	*p;
	size_t		 len, off;
	int		 bad;
};

static inline void
wire_w_init(struct wire_w *w, void *buf, size_t cap)
{
	w->p = buf;
	w->len = 0;
	w->cap = cap;
	w->over = 0;
}

static inline void
wire_put(struct wire_w *w, const void *v, size_t n)
{
	if (w->over || n > w->cap - w->len) {
		w->over = 1;
		return;
	}
	if (n > 0)
		memcpy(w->p + w->len, v, n);
	w->len += n;
}

static inline void
wire_u64(struct wire_w *w, uint64_t v)
{
	uint8_t b[8];
	int i;

	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	wire_put(w, b, 8);
}

static inline void
wire_u32(struct wire_w *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
	    (uint8_t)(v >> 24) };

	wire_put(w, b, 4);
}

/* Bytes with their length (at most UINT32_MAX: more sets over). */
static inline void
wire_bytes(struct wire_w *w, const void *v, size_t n)
{
	if (n > UINT32_MAX) {
		w->over = 1;
		return;
	}
	wire_u32(w, (uint32_t)n);
	wire_put(w, v, n);
}

static inline void
wire_str(struct wire_w *w, const char *s)
{
	wire_bytes(w, s, strlen(s));
}

static inline void
wire_r_init(struct wire_r *r, const void *buf, size_t len)
{
	r->p = buf;
	r->len = len;
	r->off = 0;
	r->bad = 0;
}

static inline const uint8_t *
wire_take(struct wire_r *r, size_t n)
{
	const uint8_t *v;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	v = r->p + r->off;
	r->off += n;
	return v;
}

static inline uint64_t
wire_get_u64(struct wire_r *r)
{
	const uint8_t *b = wire_take(r, 8);
	uint64_t v = 0;
	int i;

	for (i = 7; b != NULL && i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static inline uint32_t
wire_get_u32(struct wire_r *r)
{
	const uint8_t *b = wire_take(r, 4);

	return b == NULL ? 0 : (uint32_t)b[0] | (uint32_t)b[1] << 8 |
	    (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Bytes written by wire_bytes, at most max of them (more sets bad). */
static inline const uint8_t *
wire_get_bytes(struct wire_r *r, size_t max, size_t *n)
{
	uint32_t len = wire_get_u32(r);

	const uint8_t *v;

	*n = 0;
	if (r->bad || len > max) {
		r->bad = 1;
		return NULL;
	}
	if ((v = wire_take(r, len)) != NULL)
		*n = len;
	return v;
}

/*
 * A string written by wire_str into out[0..cap): at most cap - 1 bytes,
 * no NUL inside; else bad and out is "".
 */
static inline void
wire_get_str(struct wire_r *r, char *out, size_t cap)
{
	size_t n;
	const uint8_t *v = wire_get_bytes(r, cap - 1, &n);

	out[0] = '\0';
	if (v == NULL)
		return;
	if (memchr(v, '\0', n) != NULL) {
		r->bad = 1;
		return;
	}
	memcpy(out, v, n);
	out[n] = '\0';
}

/* 0 when everything was read and nothing is left; else -1. */
static inline int
wire_done(const struct wire_r *r)
{
	return r->bad || r->off != r->len ? -1 : 0;
}

#endif
