/* freelist.c: objects kept for reuse (freelist.h). */
#include "autoconf.h"

#include <stdlib.h>

#include "util/freelist.h"

void *
freelist_get(struct freelist *f)
{
	return f->n > 0 ? f->p[--f->n] : NULL;
}

void
freelist_put(struct freelist *f, void *p, void (*destroy)(void *))
{
	if (p == NULL)
		return;
	if (f->n == FREELIST_KEEP)
		destroy(p);
	else
		f->p[f->n++] = p;
}

void
freelist_clear(struct freelist *f, void (*destroy)(void *))
{
	while (f->n > 0)
		destroy(f->p[--f->n]);
}
