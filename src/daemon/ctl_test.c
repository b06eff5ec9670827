/*
 * ctl_test.c: test-only routes (ctl_int.h), built with
 * --enable-test-hooks.  A production build has none of them: the paths
 * are 404 like any other unknown one.
 *
 *   POST /v1/test/keys-violation   sends the keys process a request
 *                                  that is not in kproto.h's table
 *   POST /v1/test/forbidden-syscall  makes a system call the worker's
 *                                  filter forbids (confine.h)
 */
#include "autoconf.h"

#include <string.h>

#include "keys/kclient.h"
#include "daemon/confine.h"
#include "daemon/ctl.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"

#ifdef SLUICE_TEST_HOOKS

int
ctl_test(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	if (strncmp(q->path, "/v1/test/", 9) != 0)
		return 0;
	if (strcmp(q->method, "POST") != 0) {
		ctl_reply_method(r, "POST");
		return 1;
	}
	if (strcmp(q->path, "/v1/test/keys-violation") == 0) {
		/* The keys process ends us: the answer may never go out. */
		if (kclient_test_violation() != 0)
			ctl_reply_error(r, 500, NULL, "cannot send it");
		else
			ctl_reply_error(r, 500, NULL, "sent, and still alive");
		return 1;
	}
	if (strcmp(q->path, "/v1/test/forbidden-syscall") == 0) {
		confine_test_forbidden();	/* killed here, if all is well */
		ctl_reply_error(r, 500, NULL, "made it, and still alive");
		return 1;
	}
	ctl_reply_error(r, 404, NULL, "no such test hook");
	return 1;
}

#else

int
ctl_test(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	return 0;
}

#endif
