/* deny.c: how a sandbox is told no, in its own protocol. */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "conn/deny.h"

const unsigned char deny_tls_alert[DENY_TLS_ALERT_LEN] = {
	0x15,		/* content type: alert */
	0x03, 0x03,	/* legacy record version */
	0x00, 0x02,	/* length */
	0x02,		/* level: fatal */
	0x31,		/* access_denied */
};

static const char *
status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 421: return "Misdirected Request";
	case 429: return "Too Many Requests";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return "Error";
}

char *
deny_http(int status, const char *error, const char *rule, const char *reason,
    const char *message, size_t *len)
{
	return deny_http_keep(status, error, rule, reason, message, 0, len);
}

char *
deny_http_keep(int status, const char *error, const char *rule,
    const char *reason, const char *message, int keep_alive, size_t *len)
{
	json_t *o = NULL;
	char *body = NULL, *out = NULL;
	size_t blen, cap;
	int n;

	o = json_pack("{s:s, s:s?, s:s?, s:s?}", "error", error, "rule", rule,
	    "reason", reason, "message", message);
	if (o == NULL || (body = json_dumps(o, JSON_COMPACT)) == NULL)
		goto out;
	blen = strlen(body);
	cap = blen + 256;
	if ((out = malloc(cap)) == NULL)
		goto out;
	n = snprintf(out, cap, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "%s"
	    "\r\n%s\n", status, status_text(status), blen + 1,
	    keep_alive ? "" : "Connection: close\r\n", body);
	if (n < 0 || (size_t)n >= cap) {
		free(out);
		out = NULL;
		goto out;
	}
	*len = (size_t)n;
 out:
	free(body);
	json_decref(o);
	return out;
}
