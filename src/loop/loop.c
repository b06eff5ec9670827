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
loop_evbuffer_wipe_drain(struct evbuffer *b, size_t n)
{
	struct evbuffer_iovec v[16];
	size_t len, m;
	int i, k;

	if (n > evbuffer_get_length(b))
		n = evbuffer_get_length(b);
	/* Chain by chain: each one's bytes wiped before it goes. */
	while (n > 0 && (k = evbuffer_peek(b, (ssize_t)n, NULL, v, 16)) > 0) {
		for (i = 0, len = 0; i < k && i < 16 && len < n; i++) {
			m = v[i].iov_len < n - len ? v[i].iov_len : n - len;
			sodium_memzero(v[i].iov_base, m);
			len += m;
		}
		evbuffer_drain(b, len);
		n -= len;
	}
}

void
loop_evbuffer_wipe_free(struct evbuffer *b)
{
	loop_evbuffer_wipe_drain(b, evbuffer_get_length(b));
	evbuffer_free(b);
}

int
loop_evbuffer_move_wiped(struct evbuffer *src, struct evbuffer *dst,
    size_t n)
{
	struct evbuffer_iovec v[16];
	size_t len = 0, m, done = 0;
	int i, k;

	if (n > evbuffer_get_length(src))
		n = evbuffer_get_length(src);
	if (evbuffer_expand(dst, n) != 0)
		return -1;
	while (done < n) {
		struct evbuffer_ptr at;

		if (evbuffer_ptr_set(src, &at, done, EVBUFFER_PTR_SET) != 0 ||
		    (k = evbuffer_peek(src, (ssize_t)(n - done), &at, v,
		    16)) <= 0)
			return -1;
		for (i = 0, len = 0; i < k && i < 16 && done + len < n; i++) {
			m = v[i].iov_len < n - done - len ? v[i].iov_len :
			    n - done - len;
			if (evbuffer_add(dst, v[i].iov_base, m) != 0)
				return -1;
			len += m;
		}
		done += len;
	}
	loop_evbuffer_wipe_drain(src, n);
	return 0;
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
