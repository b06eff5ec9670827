/* loop.c: the few things a connection asks of its thread's loop. */
#include "autoconf.h"

#include <stdlib.h>

#include <event2/event.h>

#include "util/freelist.h"
#include "util/keyfile.h"
#include "util/redact.h"
#include "parse/httphead.h"
#include "parse/httpresp.h"
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

static void
reqs_destroy(void *p)
{
	http_reqs_free(p);
}

static void
resps_destroy(void *p)
{
	http_resps_free(p);
}

static void
red_destroy(void *p)
{
	redactor_free(p);
}

void
loop_caches_clear(struct loop *l)
{
	freelist_clear(&l->qblocks, free);
	freelist_clear(&l->reqs, reqs_destroy);
	freelist_clear(&l->resps, resps_destroy);
	freelist_clear(&l->reds, red_destroy);
}
