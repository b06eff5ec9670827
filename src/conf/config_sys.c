/*
 * config_sys.c: what a configuration names on this host (users, groups,
 * files), checked the same way by --check and by the start, so that a
 * configuration --check passes does not fail or misbehave once started.
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "conf/config.h"

int
config_check_system(const struct config *c, struct errlist *errs,
    struct errlist *warns)
{
	size_t before = errs->n;
	struct statvfs vfs;
	struct stat sb;

	if (c->user != NULL && getpwnam(c->user) == NULL)
		errlist_add(errs, c->path, c->lines.user, 0,
		    "'user': no user named '%s' on this host", c->user);
	if (c->user == NULL && geteuid() == 0)
		errlist_add(warns, c->path, 0, 0, "running as root: set 'user' "
		    "to drop privileges after binding");
	if (c->control_group != NULL && getgrnam(c->control_group) == NULL)
		errlist_add(errs, c->path, c->lines.control_group, 0,
		    "'control_group': no group named '%s' on this host",
		    c->control_group);
	if (c->upstream_ca != NULL && access(c->upstream_ca, R_OK) != 0) {
		/* Else the first intercepted request fails, not the start. */
		if (c->lines.upstream_ca != 0)
			errlist_add(errs, c->path, c->lines.upstream_ca, 0,
			    "'upstream_ca': cannot read %s: %s", c->upstream_ca,
			    strerror(errno));
		else
			errlist_add(warns, c->path, 0, 0, "the default "
			    "upstream_ca %s cannot be read (%s): intercepted "
			    "hosts will fail", c->upstream_ca, strerror(errno));
	}
	/* A read-only mount (a Kubernetes Secret volume) is written by none. */
	if (c->secret_dir != NULL && stat(c->secret_dir, &sb) == 0 &&
	    (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
	    (statvfs(c->secret_dir, &vfs) != 0 || !(vfs.f_flag & ST_RDONLY)))
		errlist_add(warns, c->path, c->lines.secret_dir, 0,
		    "secret_dir %s may be written by group or others: whoever "
		    "can write it can put secrets of their own", c->secret_dir);
	return errs->n > before ? SL_ERR_INVALID : 0;
}
