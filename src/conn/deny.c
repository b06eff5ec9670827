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
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 421: return "Misdirected Request";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return "Error";
}

const char *
deny_proxy_error(int status, const char *reason)
{
	static const struct {
		const char *reason, *type;
	} by_reason[] = {
		{ "upstream-timeout", "connection_timeout" },
		{ "upstream-unreachable", "destination_unavailable" },
		{ "upstream-cert-invalid", "tls_certificate_error" },
		{ "upstream-pin-mismatch", "tls_certificate_error" },
		{ "upstream-tls-error", "tls_protocol_error" },
		{ "upstream-malformed", "http_protocol_error" },
		{ "upstream-closed", "http_response_incomplete" },
		{ "response-not-redactable", "http_response_content_coding" },
		{ "private-address", "destination_ip_prohibited" },
		{ "connection-limit", "connection_limit_reached" },
		{ "header-too-large", "http_request_error" },
		{ "secrets-off", "proxy_configuration_error" },
		{ "upstream-ca-unavailable", "proxy_configuration_error" },
	};
	size_t i;

	for (i = 0; reason != NULL && i < sizeof(by_reason) /
	    sizeof(by_reason[0]); i++)
		if (strcmp(reason, by_reason[i].reason) == 0)
			return by_reason[i].type;
	switch (status) {
	case 403:
	case 421:
	case 429:
		return "http_request_denied";
	case 504:
		return "http_response_timeout";
	case 502:
		return "destination_unavailable";
	case 503:
	case 500:
		return "proxy_internal_error";
	}
	return status >= 400 && status < 500 ? "http_request_error" :
	    "proxy_internal_error";
}

char *
deny_http(const struct deny_what *d, int keep_alive, size_t *len)
{
	json_t *o = NULL;
	char *body = NULL, *out = NULL, retry[40] = "";
	size_t blen, cap;
	int n;

	o = json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?}", "error", d->error,
	    "host", d->host != NULL && d->host[0] != '\0' ? d->host : NULL,
	    "policy", d->policy, "rule", d->rule, "reason", d->reason,
	    "message", d->message);
	if (o != NULL && d->budget != NULL && json_object_update_new(o,
	    json_pack("{s:s?, s:s, s:s?, s:I}", "secret", d->secret, "budget",
	    d->budget, "scope", d->scope, "retry_after",
	    (json_int_t)d->retry_after)) != 0) {
		json_decref(o);
		o = NULL;
	}
	if (o == NULL || (body = json_dumps(o, JSON_COMPACT)) == NULL)
		goto out;
	if (d->retry_after > 0)
		snprintf(retry, sizeof(retry), "Retry-After: %u\r\n",
		    d->retry_after);
	blen = strlen(body);
	cap = blen + 512;
	if ((out = malloc(cap)) == NULL)
		goto out;
	/* The reason is one of our tokens: no quote or backslash in it. */
	n = snprintf(out, cap, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "Proxy-Status: sluice; error=%s%s%s%s\r\n"
	    "%s%s"
	    "\r\n%s\n", d->status, status_text(d->status), blen + 1,
	    deny_proxy_error(d->status, d->reason),
	    d->reason != NULL ? "; details=\"" : "",
	    d->reason != NULL ? d->reason : "", d->reason != NULL ? "\"" : "",
	    retry, keep_alive ? "" : "Connection: close\r\n", body);
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
