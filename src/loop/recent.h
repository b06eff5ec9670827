/*
 * recent.h: a sandbox's last decisions, kept in memory for a dry run of
 * a policy change (PUT /v1/sandboxes/ID/policy?dry_run=1).  A ring of
 * RECENT_MAX records of at most RECENT_BYTES each (as arec_json writes
 * them), allocated at the first one; workers add under its lock, the
 * main thread reads a copy.  Longer records are not kept.
 */
#ifndef SLUICE_RECENT_H
#define SLUICE_RECENT_H

#include <pthread.h>
#include <stddef.h>

#define RECENT_MAX	64
#define RECENT_BYTES	640

struct arec;

struct recent {
	pthread_mutex_t	 mtx;
	char		*slots;		/* RECENT_MAX * RECENT_BYTES, or NULL */
	unsigned short	 len[RECENT_MAX];
	size_t		 next, n;
};

void	recent_init(struct recent *r);
void	recent_destroy(struct recent *r);
/* Keeps rec (of type), dropping the oldest when full. */
void	recent_add(struct recent *r, const char *type, const struct arec *rec);
/* fn for each record, oldest first, under the lock (fn must not add). */
void	recent_each(struct recent *r, void (*fn)(const char *text, size_t len,
	    void *arg), void *arg);

#endif
