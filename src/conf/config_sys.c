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
	if (c->user == NULL && geteuid() == 0 &&
	    getpwnam(CONFIG_USER_DEFAULT) == NULL)
		errlist_add(warns, c->path, 0, 0, "no user '%s' (the default "
		    "'user') on this host: the worker runs as '%s'; create it "
		    "(useradd --system %s) or set 'user'", CONFIG_USER_DEFAULT,
		    CONFIG_USER_FALLBACK, CONFIG_USER_DEFAULT);
	if (c->user != NULL && strcmp(c->user, "root") == 0)
		errlist_add(warns, c->path, c->lines.user, 0, "'user: root': "
		    "the worker that parses every sandbox byte keeps root's "
		    "files if it is taken over (it still has no capability "
		    "and its filter); set an unprivileged user");
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
