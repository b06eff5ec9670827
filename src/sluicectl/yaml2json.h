/* yaml2json.h: a policy document, YAML or JSON, as a jansson value. */
#ifndef SLUICECTL_YAML2JSON_H
#define SLUICECTL_YAML2JSON_H

#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

/*
 * Converts one YAML document (buf, len bytes) to JSON: mappings become
 * objects, sequences arrays; a plain (unquoted) scalar that reads as a
 * decimal integer becomes a number, true/false (also True, TRUE, ...) a
 * boolean, null, ~ or nothing null; every other scalar, and every quoted
 * or block scalar, stays a string.  An empty document is JSON null.
 * Anchors, aliases and tags are refused, as the daemon's own parser does.
 * file names the document in messages.  Returns 0 and *out (a new
 * reference), SL_ERR_INVALID with "file:line:col: message" lines in errs,
 * or SL_ERR_NOMEM.
 */
int	yaml2json(const char *file, const char *buf, size_t len, json_t **out,
	    struct errlist *errs);

/*
 * A document that is either JSON (an object or array jansson reads, no
 * duplicate keys) or else YAML, converted by yaml2json.  *is_json says
 * which one it was.  Returns as yaml2json.
 */
int	doc2json(const char *file, const char *buf, size_t len, json_t **out,
	    int *is_json, struct errlist *errs);

#endif
