/* yamltree.h: a YAML document as a tree of nodes that remember their place. */
#ifndef SLUICE_YAMLTREE_H
#define SLUICE_YAMLTREE_H

#include <stddef.h>

#include "err.h"

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
/* Reads path (at most max_bytes) and parses it. */
int	ydoc_load(const char *path, size_t max_bytes, struct ydoc **out,
	    struct errlist *errs);
void	ydoc_free(struct ydoc *d);		/* accepts NULL */

/* A MAP's value for key, or NULL. */
const struct ynode *ynode_get(const struct ynode *map, const char *key);

#endif
