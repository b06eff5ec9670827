/* loop.c: the few things a connection asks of its thread's loop. */
#include "autoconf.h"

#include <event2/event.h>

#include "util/keyfile.h"
#include "keys/inject.h"
#include "loop/loop.h"

void
loop_conn_gone(struct loop *l)
{
	if (l->draining && l->nconns == 0)
		event_base_loopexit(l->base, NULL);
}

char *
loop_scratch(struct loop *l)
{
	if (l->scratch == NULL)
		l->scratch = secmem_alloc(INJECT_BUF);
	return l->scratch;
}
