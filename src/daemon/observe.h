/*
 * observe.h: the end of observe mode.  Every snapshot put in force arms
 * one timer for the earliest observe_until; when it fires, the sandboxes
 * whose time is up go back to enforce in a new snapshot (so connections
 * let through only by observe are judged again and closed), each with a
 * sandbox_mode record (cause "expired") and its file in state_dir.
 */
#ifndef SLUICE_OBSERVE_H
#define SLUICE_OBSERVE_H

struct daemon;

/* After a publish: (re)arms the timer for d->state, or stops it. */
void	observe_arm(struct daemon *d);
void	observe_close(struct daemon *d);

#endif
