/*
 * sbuf.h: a bounded string builder over the caller's buffer (often
 * guarded memory): what does not fit sets over, and the buffer stays
 * NUL-terminated at what did.
 */
#ifndef SLUICE_SBUF_H
#define SLUICE_SBUF_H

#include <stddef.h>
#include <string.h>

struct sbuf {
	char	*p;
	size_t	 len, cap;
	int	 over;		/* something did not fit */
};

static inline void
sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->over || n >= b->cap - b->len) {
		b->over = 1;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static inline void
sbuf_str(struct sbuf *b, const char *s)
{
	sbuf_add(b, s, strlen(s));
}

/*
 * Copies src into dst[0..cap) (cap > 0) as snprintf(dst, cap, "%s", src)
 * does: cut to fit and NUL-terminated; without its format parsing.
 */
static inline void
str_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* c as %XX, upper-case hex (RFC 3986 2.1). */
static inline void
sbuf_pct(struct sbuf *b, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[3] = { '%', hex[c >> 4], hex[c & 0xf] };

	sbuf_add(b, e, 3);
}

#endif
