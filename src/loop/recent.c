/* recent.c: a sandbox's last decisions (recent.h). */
#include "autoconf.h"

#include <stdlib.h>
#include <string.h>

#include "audit/arec.h"
#include "loop/recent.h"

void
recent_init(struct recent *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mtx, NULL);
}

void
recent_destroy(struct recent *r)
{
	free(r->slots);
	r->slots = NULL;
	pthread_mutex_destroy(&r->mtx);
}

void
recent_add(struct recent *r, const char *type, const struct arec *rec)
{
	char buf[RECENT_BYTES];
	size_t len;

	if ((len = arec_json(rec, type, buf, sizeof(buf))) == 0)
		return;
	pthread_mutex_lock(&r->mtx);
	if (r->slots == NULL &&
	    (r->slots = malloc((size_t)RECENT_MAX * RECENT_BYTES)) == NULL) {
		pthread_mutex_unlock(&r->mtx);
		return;
	}
	memcpy(r->slots + r->next * RECENT_BYTES, buf, len);
	r->len[r->next] = (unsigned short)len;
	r->next = (r->next + 1) % RECENT_MAX;
	if (r->n < RECENT_MAX)
		r->n++;
	pthread_mutex_unlock(&r->mtx);
}

void
recent_each(struct recent *r, void (*fn)(const char *, size_t, void *),
    void *arg)
{
	size_t i, at;

	pthread_mutex_lock(&r->mtx);
	for (i = 0; i < r->n; i++) {
		at = (r->next + RECENT_MAX - r->n + i) % RECENT_MAX;
		fn(r->slots + at * RECENT_BYTES, r->len[at], arg);
	}
	pthread_mutex_unlock(&r->mtx);
}
