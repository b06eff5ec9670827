/*
 * fserve.h: the monitor's side of fsvc.h.  A confined worker's file
 * requests are done here, inside the folders the configuration names:
 * policy_dir, secret_dir and state_dir, read and written (a path that
 * resolves outside them, through a link or "..", is EACCES).  A CA
 * bundle may be anywhere, but only its certificates come back.
 */
#ifndef SLUICE_FSERVE_H
#define SLUICE_FSERVE_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct fserve;
struct chan_hdr;

#define FSERVE_FILE_MAX	(16u * 1024 * 1024)	/* a file read or written */

struct fserve *fserve_new(const struct config *cfg);
void	fserve_free(struct fserve *fs);
/*
 * Does the request of h (payload p) and answers it on chan.  0, or -1
 * when the request is malformed: the worker is not itself any more.
 */
int	fserve_request(struct fserve *fs, int chan, const struct chan_hdr *h,
	    const uint8_t *p, size_t len);

#endif
