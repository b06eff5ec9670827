/*
 * upgrade.h: a new sluiced binary takes over from the running one with no
 * connection refused (SIGUSR2, POST /v1/upgrade).
 *
 * The running process (the predecessor) starts the binary at the path it
 * was started from, with its argv, and gives it every listening socket
 * (inherited across exec: SLUICE_FDS) and one end of a socketpair
 * (SLUICE_UPGRADE).  The new process (the successor) takes the sockets
 * whose addresses its configuration names, restores state_dir, starts
 * its workers (both processes now accept on the same sockets) and says
 * "ready PID".  Then the predecessor stops accepting, hands its audit
 * trail over (audit.h), answers the control requests that waited, and
 * drains its connections up to timeouts.drain before it exits.  A
 * successor that exits or does not say ready within UPGRADE_READY_S
 * fails the upgrade: the predecessor goes on serving as before.
 *
 * While an upgrade is under way, changes through the control API are
 * refused (503): the successor has read state_dir already.
 */
#ifndef SLUICE_UPGRADE_H
#define SLUICE_UPGRADE_H

#include <stddef.h>

struct daemon;
struct endpoint;

#define UPGRADE_READY_S	20	/* within sluicectl's 30 s */

enum upgrade_stage {
	UPGRADE_NONE,		/* serving */
	UPGRADE_STARTING,	/* the successor was started, not ready yet */
	UPGRADE_HANDED,		/* it serves; this process drains */
};

/* ---- the predecessor (upgrade.c) ---- */

/*
 * Starts the successor.  0, or -1 with why[] (an upgrade under way, a
 * drain, no binary at the path, fork).  The result is told later: the
 * control requests that wait (ctl_upgraded) are answered, and it is
 * logged.
 */
int	upgrade_begin(struct daemon *d, char *why, size_t why_len);
enum upgrade_stage upgrade_stage(const struct daemon *d);
/* The successor's pid once started, else 0. */
long	upgrade_child(const struct daemon *d);
void	upgrade_free(struct daemon *d);

/* ---- the successor (upgrade_inherit.c) ---- */

/*
 * At start: takes what the predecessor left in the environment (and
 * clears it).  0 (an upgrade or not), -1 when it is malformed.
 */
int	upgrade_inherit(struct daemon *d);
/* The predecessor's pid when this process is its successor, else 0. */
long	upgrade_from(const struct daemon *d);
/* 1 until the predecessor let go of the audit trail. */
int	upgrade_taking_over(const struct daemon *d);
/* An inherited socket of type bound to ep (or to path), taken; or -1. */
int	upgrade_take_inet(struct daemon *d, const struct endpoint *ep, int type);
int	upgrade_take_unix(struct daemon *d, const char *path);
/* How many sockets bound to ep were inherited. */
size_t	upgrade_count(const struct daemon *d, const struct endpoint *ep,
	    int type);
/*
 * Once serving: closes the inherited sockets no listener took, says
 * ready and receives the audit trail and the predecessor's records.
 */
int	upgrade_announce(struct daemon *d);
void	upgrade_inherit_free(struct daemon *d);

#endif
