/* jsonmem.c: jansson's memory, wiped when freed (jsonmem.h). */
#include "autoconf.h"

#include <malloc.h>
#include <stdlib.h>

#include <jansson.h>
#include <sodium.h>

#include "util/jsonmem.h"

/*
 * Plain malloc: what jansson hands out (json_dumps) may still be freed
 * with free(), and the size to wipe is the block's own.
 */
void *
jsonmem_alloc(size_t n)
{
	return malloc(n);
}

void
jsonmem_free(void *p)
{
	if (p == NULL)
		return;
	sodium_memzero(p, malloc_usable_size(p));
	free(p);
}

void
jsonmem_wipe_on_free(void)
{
	json_set_alloc_funcs(jsonmem_alloc, jsonmem_free);
}
