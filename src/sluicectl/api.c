/* api.c: the daemon's control API as sluicectl's commands call it. */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "sluicectl/api.h"
#include "sluicectl/http.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"

/* " (404 Not Found)" after a message, or "404 Not Found" alone. */
static void
put_status(const struct http_resp *resp, FILE *f)
{
	fprintf(f, "%d", resp->status);
	if (resp->reason[0] != '\0') {
		fputc(' ', f);
		fput_safe(resp->reason, f);
	}
}

/* Says what a non-2xx answer said: its "error", else its status. */
static void
report_answer(const struct cmd *c, const struct http_resp *resp)
{
	const json_t *errs, *e;
	const char *msg = NULL;
	json_t *body;
	size_t i;

	body = json_loadb(resp->body, resp->body_len, 0, NULL);
	if (json_is_object(body))
		msg = json_string_value(json_object_get(body, "error"));
	cmd_prefix(c, stderr);
	if (msg != NULL) {
		fput_safe(msg, stderr);
		fputs(" (", stderr);
		put_status(resp, stderr);
		fputs(")\n", stderr);
	} else {
		fputs("the daemon answered ", stderr);
		put_status(resp, stderr);
		fputc('\n', stderr);
	}
	errs = json_object_get(body, "errors");
	json_array_foreach(errs, i, e) {
		if (!json_is_string(e))
			continue;
		fput_safe(json_string_value(e), stderr);
		fputc('\n', stderr);
	}
	json_decref(body);
}

int
api_call(const struct ctl *ctl, const struct cmd *c,
    const struct http_req *req, struct http_resp **out)
{
	struct http_resp *resp = NULL;
	char err[512];

	if (http_request(ctl->socket, req, &resp, err, sizeof(err)) != 0) {
		cmd_err(c, "%s", err);
		return EXIT_FAIL;
	}
	if (resp->status < 200 || resp->status > 299) {
		report_answer(c, resp);
		http_resp_free(resp);
		return EXIT_FAIL;
	}
	*out = resp;
	return EXIT_OK;
}

int
api_json(const struct ctl *ctl, const struct cmd *c, const char *method,
    const char *target, const json_t *body, json_t **out)
{
	struct http_req req = { method, target, NULL, NULL, 0 };
	struct http_resp *resp = NULL;
	json_error_t jerr;
	json_t *v = NULL;
	char *text = NULL;
	int rc = EXIT_FAIL;

	if (body != NULL) {
		if ((text = json_dumps(body, JSON_COMPACT)) == NULL) {
			cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
			goto out;
		}
		req.content_type = "application/json";
		req.body = text;
		req.body_len = strlen(text);
	}
	if ((rc = api_call(ctl, c, &req, &resp)) != EXIT_OK)
		goto out;
	rc = EXIT_FAIL;
	if ((v = json_loadb(resp->body, resp->body_len, 0, &jerr)) == NULL ||
	    !json_is_object(v)) {
		cmd_prefix(c, stderr);
		fputs("the daemon's answer is not a JSON object", stderr);
		if (v == NULL) {
			fputs(" (", stderr);
			fput_safe(jerr.text, stderr);
			fputc(')', stderr);
		}
		fputc('\n', stderr);
		goto out;
	}
	*out = v;
	v = NULL;	/* transferred */
	rc = EXIT_OK;
 out:
	json_decref(v);
	http_resp_free(resp);
	free(text);
	return rc;
}

int
api_view(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
    const char *target, json_t **ans)
{
	json_t *v = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 0, &first)) != CMD_GO ||
	    (rc = api_json(ctl, c, "GET", target, NULL, &v)) != EXIT_OK ||
	    json_answered(ctl, v, &rc))
		return rc;
	*ans = v;
	return CMD_GO;
}

int
api_target(char *buf, size_t len, const char *prefix, const char *seg,
    const char *suffix)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0, n;
	unsigned char ch;
	int dots;

	/* "." and ".." would be read as dot segments: encode them too. */
	dots = strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0;
	if ((n = strlen(prefix)) >= len)
		return SL_ERR_TOO_BIG;
	memcpy(buf, prefix, n);
	o = n;
	for (; *seg != '\0'; seg++) {
		ch = (unsigned char)*seg;
		if (!dots && ((ch >= 'A' && ch <= 'Z') ||
		    (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '.' || ch == '_' || ch == '~')) {
			if (o + 1 >= len)
				return SL_ERR_TOO_BIG;
			buf[o++] = (char)ch;
			continue;
		}
		if (o + 3 >= len)
			return SL_ERR_TOO_BIG;
		buf[o++] = '%';
		buf[o++] = hex[ch >> 4];
		buf[o++] = hex[ch & 15];
	}
	if ((n = strlen(suffix)) >= len - o)
		return SL_ERR_TOO_BIG;
	memcpy(buf + o, suffix, n + 1);
	return 0;
}
