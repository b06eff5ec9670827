/* yamltree.h: a YAML document as a tree of nodes that remember their place. */
#ifndef SLUICE_YAMLTREE_H
#define SLUICE_YAMLTREE_H

#include <stddef.h>

#include "util/err.h"

enum ynode_kind { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP };

struct ynode {
	enum ynode_kind	 kind;
	unsigned	 line, col;	/* 1-based, where the node starts */
	char		*scalar;	/* SCALAR: value, NUL-terminated */
	size_t		 scalar_len;
	int		 quoted;	/* SCALAR: written in quotes */
	struct ynode	**items;	/* SEQ: items; MAP: values */
	char		**keys;		/* MAP: keys (scalars only) */
	unsigned	*key_lines, *key_cols;
	size_t		 n;
};

struct ydoc {
	char		*file;		/* name used in error messages */
	struct ynode	*root;		/* NULL for an empty document */
};

/*
 * Parses one YAML document from buf.  Anchors, aliases, tags, multiple
 * documents, non-scalar keys, duplicate keys, nesting deeper than 32 and
 * more than 100,000 nodes are refused.  On failure every problem is added
 * to errs as "file:line:col: message" and SL_ERR_INVALID is returned.
 */
int	ydoc_parse(const char *file, const char *buf, size_t len,
	    struct ydoc **out, struct errlist *errs);

#define YDOC_MAX_NODES	100000

/*
 * As ydoc_parse with another bound on the number of nodes (every scalar,
 * mapping key, sequence and mapping counts).  Policies use a higher one so
 * that 100,000 egress rules fit.
 */
int	ydoc_parse_limit(const char *file, const char *buf, size_t len,
	    size_t max_nodes, struct ydoc **out, struct errlist *errs);
/*
 * Reads a whole file of at most max_bytes into a NUL-terminated buffer the
 * caller frees.  Errors go to errs as "path: strerror" or "path: larger
 * than N bytes"; returns 0, SL_ERR_IO, SL_ERR_TOO_BIG or SL_ERR_NOMEM.
 */
int	ydoc_read_file(const char *path, size_t max_bytes, char **out,
	    size_t *outlen, struct errlist *errs);
/* Reads path (at most max_bytes) and parses it. */
int	ydoc_load(const char *path, size_t max_bytes, struct ydoc **out,
	    struct errlist *errs);
void	ydoc_free(struct ydoc *d);		/* accepts NULL */

/* A MAP's value for key, or NULL. */
const struct ynode *ynode_get(const struct ynode *map, const char *key);
/* Whether n is absent or a plain null scalar ("", "~", "null"). */
int	ynode_is_null(const struct ynode *n);

/*
 * Checking a parsed document: helpers shared by config.c and policy.c.  A
 * ycheck counts the problems it reported (errs may be NULL) and whether an
 * allocation failed, so the caller can refuse the whole file at the end.
 */
struct ycheck {
	const char	*file;
	struct errlist	*errs;
	unsigned	 nerr;
	int		 nomem;
};

void	ycheck_err(struct ycheck *c, unsigned line, unsigned col,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Every key of map must be one of allowed (NULL-terminated); where names
 * the map in "unknown key 'k' in WHERE" (NULL: the top level). */
void	ycheck_keys(struct ycheck *c, const struct ynode *map,
	    const char *where, const char *const *allowed);
/* Whether n is a non-null scalar without NUL bytes; reports it if not. */
int	ycheck_string(struct ycheck *c, const struct ynode *n,
	    const char *what);
/* Puts the messages errs got from index from on in file order (line, col). */
void	ycheck_sort(struct ycheck *c, size_t from);
/* A user-written string made safe to quote in a message.  Returns buf. */
const char *yesc(const char *s, char *buf, size_t len);
/* Decimal digits only, at most max: 0, SL_ERR_INVALID or SL_ERR_TOO_BIG. */
int	yparse_uint(const char *s, unsigned long long max,
	    unsigned long long *out);
/*
 * seq as a list of at most max items (what: what they are, for the
 * message): its length, or 0 when it is empty or not such a list (the
 * error reported, as "'PATH' must be a list").
 */
size_t	ycheck_seq(struct ycheck *x, const struct ynode *seq, const char *path,
	    size_t max, const char *what);
/*
 * The integer at key of map (absent: *dst unchanged) into *dst, within
 * lo..hi; errors name it "PARENT.KEY".
 */
void	ycheck_uint(struct ycheck *x, const struct ynode *map,
	    const char *parent, const char *key, unsigned long long lo,
	    unsigned long long hi, unsigned *dst);

#endif
