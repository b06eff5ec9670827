/*
 * ascii.h: comparisons that ignore ASCII case and nothing else (header
 * names, tokens): no locale, no other bytes folded.
 */
#ifndef SLUICE_ASCII_H
#define SLUICE_ASCII_H

#include <stddef.h>
#include <string.h>

/* c in lower case if it is an ASCII capital letter. */
static inline int
ascii_lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* s[0..len) equals the lower-case word, ignoring ASCII case. */
static inline int
ascii_eq(const char *s, size_t len, const char *word)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (word[i] == '\0' || ascii_lower((unsigned char)s[i]) != word[i])
			return 0;
	return word[len] == '\0';
}

/* s[0..len) starts with the lower-case prefix, ignoring ASCII case. */
static inline int
ascii_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && ascii_eq(s, n, prefix);
}

/* RFC 3986 unreserved: A-Za-z0-9 - . _ ~, whatever the locale. */
static inline int
ascii_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* a[0..len) equals b[0..len), ignoring ASCII case on both sides. */
static inline int
ascii_caseeq(const char *a, const char *b, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (ascii_lower((unsigned char)a[i]) !=
		    ascii_lower((unsigned char)b[i]))
			return 0;
	return 1;
}

#endif
