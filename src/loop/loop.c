/* loop.c: the few things a connection asks of its thread's loop. */
#include "autoconf.h"

#include <sys/ioctl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <sodium.h>

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
	if (l->draining && l->nconns == 0 && l->ndns == 0)
		event_base_loopexit(l->base, NULL);
}

char *
loop_scratch(struct loop *l)
{
	if (l->scratch == NULL)
		l->scratch = secmem_alloc(INJECT_BUF);
	return l->scratch;
}

void
loop_evbuffer_wipe_free(struct evbuffer *b)
{
	struct evbuffer_iovec v[16];
	int i, n;

	/* Drained chain by chain: each one's bytes wiped before it goes. */
	while ((n = evbuffer_peek(b, -1, NULL, v, 16)) > 0) {
		size_t len = 0;

		for (i = 0; i < n && i < 16; i++) {
			sodium_memzero(v[i].iov_base, v[i].iov_len);
			len += v[i].iov_len;
		}
		evbuffer_drain(b, len);
	}
	evbuffer_free(b);
}

void
loop_reqs_destroy(void *p)
{
	http_reqs_free(p);
}

void
loop_resps_destroy(void *p)
{
	http_resps_free(p);
}

int
loop_pipe_get(struct loop *l, int p[2])
{
	if (l->npipes > 0) {
		l->npipes--;
		p[0] = l->pipes[l->npipes][0];
		p[1] = l->pipes[l->npipes][1];
		return 0;
	}
	return pipe2(p, O_NONBLOCK | O_CLOEXEC);
}

void
loop_pipe_put(struct loop *l, int p[2])
{
	int n = -1;

	if (p[0] == -1)
		return;
	/* Only an empty pipe is as good as new. */
	if (p[1] != -1 && l->npipes < LOOP_PIPES &&
	    ioctl(p[0], FIONREAD, &n) == 0 && n == 0) {
		l->pipes[l->npipes][0] = p[0];
		l->pipes[l->npipes][1] = p[1];
		l->npipes++;
	} else {
		close(p[0]);
		if (p[1] != -1)
			close(p[1]);
	}
	p[0] = p[1] = -1;
}

void
loop_caches_clear(struct loop *l)
{
	while (l->npipes > 0) {
		l->npipes--;
		close(l->pipes[l->npipes][0]);
		close(l->pipes[l->npipes][1]);
	}
	freelist_clear(&l->qblocks, free);
	freelist_clear(&l->reqs, loop_reqs_destroy);
	freelist_clear(&l->resps, loop_resps_destroy);
	redpool_clear(&l->reds);
}
