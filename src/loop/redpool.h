/*
 * redpool.h: the redactors of one loop, kept built between answers.
 *
 * Building a redactor for a secret's forms costs more than redacting a
 * small answer, and the next answer of a sandbox mostly needs the same
 * build.  An answer takes a redactor built for its secrets when one is
 * kept (redactor_reset_keyed() then only starts the stream again), and
 * gives it back built.  A build left unused for REDPOOL_IDLE_S seconds
 * is wiped and freed: what was built from a rotated secret does not
 * outlive it by more than that, and an idle gateway keeps none.
 */
#ifndef SLUICE_REDPOOL_H
#define SLUICE_REDPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define REDPOOL_KEEP	32	/* redactors kept; more are freed */
#define REDPOOL_IDLE_S	10

struct event;
struct event_base;
struct redactor;

struct redpool {
	struct redactor	*r[REDPOOL_KEEP];	/* oldest given back first */
	time_t		 back[REDPOOL_KEEP];	/* when (mono_s) */
	size_t		 n;
	struct event	*sweep;		/* made on the first give-back */
};

/*
 * A redactor for the pattern lists named keys[0..nkeys): one kept that
 * was built for them, else the one kept longest (its build wiped at its
 * next reset), else a new one.  NULL when out of memory.
 */
struct redactor *redpool_get(struct redpool *p, const uint64_t *keys,
	    size_t nkeys);
/* Gives r back, built as it is; base runs the sweep.  Accepts NULL. */
void	redpool_put(struct redpool *p, struct event_base *base,
	    struct redactor *r);
/* Frees every redactor kept, and the sweep. */
void	redpool_clear(struct redpool *p);

#endif
