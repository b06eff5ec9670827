/*
 * utf8.h: one decoder of UTF-8 as JSON and the audit trail allow it: no
 * overlong forms, no surrogates, nothing past U+10FFFF.
 */
#ifndef SLUICE_UTF8_H
#define SLUICE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * The code point at s[*i..len) (*i < len), moving *i past it; -1 for a
 * byte that does not begin a well-formed character, which *i moves past
 * alone.
 */
static inline int32_t
utf8_next(const unsigned char *s, size_t len, size_t *i)
{
	size_t n, k, at = *i;
	uint32_t cp;

	*i = at + 1;
	if (s[at] < 0x80)
		return s[at];
	if (s[at] >= 0xc2 && s[at] <= 0xdf) {
		n = 1;
		cp = s[at] & 0x1f;
	} else if (s[at] >= 0xe0 && s[at] <= 0xef) {
		n = 2;
		cp = s[at] & 0x0f;
	} else if (s[at] >= 0xf0 && s[at] <= 0xf4) {
		n = 3;
		cp = s[at] & 0x07;
	} else
		return -1;
	if (len - at <= n)
		return -1;
	for (k = 1; k <= n; k++) {
		if ((s[at + k] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[at + k] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*i = at + n + 1;
	return (int32_t)cp;
}

#endif
