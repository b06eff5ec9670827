/* api.h: the daemon's control API as sluicectl's commands call it. */
#ifndef SLUICECTL_API_H
#define SLUICECTL_API_H

#include <stddef.h>

#include <jansson.h>

#include "sluicectl/http.h"
#include "sluicectl/sluicectl.h"

/*
 * Sends req to the daemon at ctl->socket.  When the daemon cannot be
 * reached or answers other than 2xx, says so on stderr ("sluicectl: CMD:
 * the daemon's error (404 Not Found)", then each of its "errors" on a line
 * of its own) and returns EXIT_FAIL; else EXIT_OK and *out.
 */
int	api_call(const struct ctl *ctl, const struct cmd *c,
	    const struct http_req *req, struct http_resp **out);

/*
 * As api_call with body (NULL: none) sent as JSON, and an answer that must
 * be a JSON object: *out, a new reference.
 */
int	api_json(const struct ctl *ctl, const struct cmd *c, const char *method,
	    const char *target, const json_t *body, json_t **out);

/*
 * The start of a command that shows what GET target answers: parses the
 * command's arguments (none but --json and --help), asks the daemon and,
 * with --json, prints the answer as it is.  Returns CMD_GO with *ans (a
 * new reference) when the caller should format it, else the exit status
 * to return now.
 */
int	api_view(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
	    const char *target, json_t **ans);

/*
 * Writes prefix, seg percent-encoded as one path segment, and suffix to
 * buf.  Returns 0, or SL_ERR_TOO_BIG when it does not fit in len.
 */
int	api_target(char *buf, size_t len, const char *prefix, const char *seg,
	    const char *suffix);

#endif
