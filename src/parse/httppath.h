/* httppath.h: request targets split and normalised before policy matching. */
#ifndef SLUICE_HTTPPATH_H
#define SLUICE_HTTPPATH_H

#include <stddef.h>

/*
 * Splits an origin-form request target target[0..len) ("/a/b?x=1"; for an
 * absolute-form request pass its origin_target) into a normalised path and
 * the query, and checks both.  target need not be NUL-terminated.
 *
 * The path (everything before the first '?') becomes, in out:
 *  - escapes of unreserved characters (ALPHA DIGIT - . _ ~) decoded, the
 *    hex digits of every other escape in upper case ("%7e%2a" -> "~%2A");
 *  - empty segments collapsed ("/a//b" -> "/a/b"; a trailing '/' stays),
 *    before dot segments go ("/a//../b" -> "/b"), so that whether the
 *    origin merges slashes cannot change the path it serves;
 *  - dot segments removed (RFC 3986 5.2.4), escaped ones ("%2e%2E")
 *    included: "/a/./b/../c/." -> "/a/c/".
 * Nothing else changes: other bytes, case and the trailing '/' are kept.
 *
 * Refused with SL_ERR_INVALID, *why (may be NULL) set to a short static
 * phrase for the 400 body and the audit record:
 *  - an empty target or one not starting with '/' ("*" of OPTIONS
 *    included: it names no path a rule could judge);
 *  - in the path: an encoded '/' (%2F), a '\' raw or encoded (%5C), a dot
 *    segment that climbs above the root ("/a/../.."), and a dot segment
 *    with parameters ("..;" or ".%3B", which Tomcat-like origins read as
 *    "..");
 *  - anywhere: a NUL raw or encoded (%00), other control bytes, space,
 *    DEL or bytes >= 0x80, a '#' (fragment), a malformed escape ('%' not
 *    followed by two hex digits);
 *  - a path that does not fit out ("path too long"): outlen >= len + 1
 *    always suffices; with less, a path may be refused even when its
 *    final form would fit.
 *
 * On success: returns 0; out holds the NUL-terminated path (it starts with
 * '/') and *pathlen its length; *query points into target just after the
 * '?' (NULL when there is none) and *querylen is its length (0 for "/a?").
 * The query is checked but kept as received.  On failure the other
 * out-parameters are untouched and out's contents are unspecified.
 *
 * A caller that sends the request on should send this path (plus '?' and
 * the query, if any), not the target as received, so that the origin sees
 * exactly what was judged.  out must not overlap target.  Pure;
 * thread-safe.
 */
int	http_path_normalize(const char *target, size_t len, char *out,
	    size_t outlen, size_t *pathlen, const char **query,
	    size_t *querylen, const char **why);

/* The value of a hex digit (either case), or -1. */
int	http_hexval(unsigned char c);

#endif
