/*
 * httppath.c: request targets split into a normalised path and a checked
 * query, so that rules judge one spelling of each path.
 */
#include "autoconf.h"

#include <stddef.h>
#include <string.h>

#include "util/ascii.h"
#include "util/err.h"
#include "parse/httppath.h"

static const char hexdigits[] = "0123456789ABCDEF";

int
http_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Checks the byte at s[i] (raw, or the start of an escape) as any part of
 * a target may hold it.  Returns the decoded byte (0..255) and sets *n to
 * the bytes it takes (1 or 3), or -1 and *why.
 */
static int
target_byte(const char *s, size_t len, size_t i, size_t *n, const char **why)
{
	unsigned char c = (unsigned char)s[i];
	int hi, lo;

	if (c == '\0') {
		*why = "NUL in target";
		return -1;
	}
	if (c <= 0x20 || c >= 0x7f) {
		*why = "control or non-ASCII byte in target";
		return -1;
	}
	if (c == '#') {
		*why = "fragment in target";
		return -1;
	}
	if (c != '%') {
		*n = 1;
		return c;
	}
	if (len - i < 3 || (hi = http_hexval((unsigned char)s[i + 1])) < 0 ||
	    (lo = http_hexval((unsigned char)s[i + 2])) < 0) {
		*why = "malformed percent-escape";
		return -1;
	}
	if (hi == 0 && lo == 0) {
		*why = "encoded NUL in target";
		return -1;
	}
	*n = 3;
	return hi << 4 | lo;
}

/* Whether seg[0..n) is "." or ".." with path parameters (";..." or "%3B..."). */
static int
dot_with_params(const char *seg, size_t n)
{
	size_t dots = 0;

	while (dots < n && dots < 2 && seg[dots] == '.')
		dots++;
	if (dots == 0 || dots == n)
		return 0;
	return seg[dots] == ';' || (n - dots >= 3 && seg[dots] == '%' &&
	    seg[dots + 1] == '3' && seg[dots + 2] == 'B');
}

/*
 * Normalises the path target[0..plen) into out (see httppath.h), writing
 * *olen, or returns SL_ERR_INVALID and *why.  out holds "/" followed by
 * finished segments, each ending in '/', then the segment being written.
 */
static int
path_normalize(const char *target, size_t plen, char *out, size_t outlen,
    size_t *olen, const char **why)
{
	size_t i = 1, o = 1, seg, n;
	int c;

	if (outlen < 2) {
		*why = "path too long";
		return SL_ERR_INVALID;
	}
	out[0] = '/';
	while (i <= plen) {
		seg = o;
		/* One segment: up to the next raw '/' or the end. */
		for (; i < plen && target[i] != '/'; i += n) {
			if (target[i] == '\\') {
				*why = "backslash in path";
				return SL_ERR_INVALID;
			}
			if ((c = target_byte(target, plen, i, &n, why)) < 0)
				return SL_ERR_INVALID;
			if (n == 3 && c == '/') {
				*why = "encoded slash in path";
				return SL_ERR_INVALID;
			}
			if (n == 3 && c == '\\') {
				*why = "encoded backslash in path";
				return SL_ERR_INVALID;
			}
			if (o + (n == 3 && !ascii_unreserved((unsigned char)c) ?
			    3 : 1) >= outlen) {
				*why = "path too long";
				return SL_ERR_INVALID;
			}
			if (n == 1 || ascii_unreserved((unsigned char)c))
				out[o++] = (char)c;
			else {
				out[o++] = '%';
				out[o++] = hexdigits[c >> 4];
				out[o++] = hexdigits[c & 0xf];
			}
		}
		i++;		/* past the '/' (or the end) */
		n = o - seg;
		if (dot_with_params(out + seg, n)) {
			*why = "dot segment with parameters";
			return SL_ERR_INVALID;
		}
		if (n == 0 || (n == 1 && out[seg] == '.')) {
			/* "//" and "/./" leave nothing; at the end, the '/'. */
			o = seg;
		} else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
			if (seg == 1) {
				*why = "dot segment above the root";
				return SL_ERR_INVALID;
			}
			/* Drop the previous segment; out[seg - 1] is its '/'. */
			for (o = seg - 1; out[o - 1] != '/'; o--)
				;
		} else if (i <= plen) {
			if (o + 1 >= outlen) {
				*why = "path too long";
				return SL_ERR_INVALID;
			}
			out[o++] = '/';
		}
	}
	out[o] = '\0';
	*olen = o;
	return 0;
}

int
http_path_normalize(const char *target, size_t len, char *out, size_t outlen,
    size_t *pathlen, const char **query, size_t *querylen, const char **why)
{
	const char *q, *reason = NULL;
	size_t plen, olen, i, n;
	int r = SL_ERR_INVALID;

	if (len == 0 || target[0] != '/') {
		reason = len == 1 && target[0] == '*' ?
		    "asterisk-form target" : "target is not origin-form";
		goto out;
	}
	q = memchr(target, '?', len);
	plen = q != NULL ? (size_t)(q - target) : len;
	/* The query: checked byte by byte, kept as received. */
	for (i = plen + 1; i < len; i += n)
		if (target_byte(target, len, i, &n, &reason) < 0)
			goto out;
	if ((r = path_normalize(target, plen, out, outlen, &olen,
	    &reason)) != 0)
		goto out;
	*pathlen = olen;
	*query = q != NULL ? q + 1 : NULL;
	*querylen = q != NULL ? len - plen - 1 : 0;
	r = 0;
 out:
	if (r != 0 && why != NULL)
		*why = reason;
	return r;
}
