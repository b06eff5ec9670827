/*
 * freelist.h: objects of one kind kept for reuse by one thread.  What a
 * connection needs only while a request is under way (its request queue,
 * its HTTP parsers, its redactor) is taken from here and given back when
 * the connection goes idle: an idle connection holds none of it, and the
 * keep-alive path allocates nothing once warm.
 */
#ifndef SLUICE_FREELIST_H
#define SLUICE_FREELIST_H

#include <stddef.h>

#define FREELIST_KEEP	64	/* objects kept; more are destroyed */

struct freelist {
	void	*p[FREELIST_KEEP];
	size_t	 n;
};

/* An object kept (as it was given back), or NULL when none is. */
void	*freelist_get(struct freelist *f);
/*
 * Gives p back, ready for its next user; past FREELIST_KEEP it is
 * destroyed with destroy.  Accepts NULL.
 */
void	 freelist_put(struct freelist *f, void *p, void (*destroy)(void *));
/* Destroys every object kept. */
void	 freelist_clear(struct freelist *f, void (*destroy)(void *));

#endif
