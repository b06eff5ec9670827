/*
 * jsonmem.h: jansson's memory, wiped when it is freed.  A parsed answer
 * of a token endpoint, a sealed JSON credential, the control API's
 * bodies: jansson copies what it reads into buffers it grows and frees on
 * its own (its lexer's, a string's), so wiping the values we are handed
 * is not enough.  With these allocators every block it frees is wiped
 * first.  The blocks are plain malloc's (glibc's malloc_usable_size says
 * how much to wipe), so what jansson returns may still go to free().
 */
#ifndef SLUICE_JSONMEM_H
#define SLUICE_JSONMEM_H

#include <stddef.h>

/* Makes jansson use jsonmem_alloc and jsonmem_free: once, before any JSON. */
void	jsonmem_wipe_on_free(void);
void	*jsonmem_alloc(size_t n);
void	jsonmem_free(void *p);		/* wipes; accepts NULL */

#endif
