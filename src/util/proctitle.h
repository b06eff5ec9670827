/*
 * proctitle.h: what ps(1) shows for each of sluiced's processes
 * ("sluiced: keys"), as OpenSSH's setproctitle does on Linux: the title
 * is written over the memory of argv (and of the environment, which is
 * moved away first), and the thread's name (comm) is set too.
 */
#ifndef SLUICE_PROCTITLE_H
#define SLUICE_PROCTITLE_H

/* Once, first thing in main: takes over argv's memory (argv stays valid). */
void	proctitle_init(int argc, char **argv);
/*
 * "sluiced: " and title in the command line; "sluiced-" and title
 * without its spaces, cut to 15 bytes, as comm.  Without proctitle_init, only comm.
 */
void	proctitle_set(const char *title);

#endif
