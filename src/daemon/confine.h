/*
 * confine.h: what a process of sluiced may still do once it is set up.
 *
 * The worker process (monitor.h) reads every byte of every sandbox, so a
 * bug there must not reach further: it keeps no capability, sets
 * PR_SET_NO_NEW_PRIVS, and a seccomp filter (libseccomp) kills it at any
 * system call outside the data path's: no execve, no ptrace, no new
 * process, no socket but TCP/UDP over IPv4 and IPv6, no bind or listen.
 * The keys process (keyproc.h) gets a narrower filter: no network socket
 * at all, no accept or connect but to a local socket.
 *
 * A build with sanitizers (--enable-sanitizers) lets both trace and fork
 * themselves as LeakSanitizer and the symbolizer do at a report; a
 * production build does not.
 */
#ifndef SLUICE_CONFINE_H
#define SLUICE_CONFINE_H

#include <stddef.h>

/*
 * Drops every capability (even as root), sets no_new_privs and loads the
 * worker's filter on every thread.  0, or -1 with why.
 */
int	confine_worker(char *why, size_t why_len);
/* The keys process's, once its keys and trail are open. */
int	confine_keys(char *why, size_t why_len);
/*
 * The bounding set, emptied while CAP_SETPCAP is still there (before the
 * change of user: it keeps its effective capabilities meanwhile).
 */
void	confine_drop_bounding(void);
/* Drops every capability of the calling process; 0 or -1 (errno). */
int	confine_drop_caps(void);

#ifdef SLUICE_TEST_HOOKS
/* A system call no filter allows (execve): the process is killed. */
void	confine_test_forbidden(void);
#endif

#endif
