/*
 * suggest.h: a minimal policy drafted from a sandbox's audit records, for
 * sluicectl policy suggest.  Feed it records (suggest_take), then write
 * the draft (suggest_render): YAML in the policy format, with comments
 * giving counts and what was not proposed and why.
 */
#ifndef SLUICE_SUGGEST_H
#define SLUICE_SUGGEST_H

#include <stdio.h>

#include <jansson.h>

struct suggest;

struct suggest	*suggest_new(void);
void		 suggest_free(struct suggest *s);
void		 suggest_take(struct suggest *s, const json_t *rec);
/* The draft, named name; sandbox and source (the files) go in a comment. */
void		 suggest_render(FILE *f, struct suggest *s, const char *name,
		    const char *sandbox, const char *source);

#endif
