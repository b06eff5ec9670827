/* deny.h: how a sandbox is told no, in its own protocol. */
#ifndef SLUICE_DENY_H
#define SLUICE_DENY_H

#include <stddef.h>

/* A fatal TLS alert access_denied(49), as one record: 7 bytes. */
#define DENY_TLS_ALERT_LEN 7
extern const unsigned char deny_tls_alert[DENY_TLS_ALERT_LEN];

/* What a refusal says: each member may be NULL but error. */
struct deny_what {
	int		 status;
	const char	*error;		/* "denied", "refused", ... */
	const char	*host;		/* the host the request named */
	const char	*policy;	/* the sandbox's policy */
	const char	*rule;		/* the rule that decided, if any */
	const char	*reason;	/* the audit reason, a token */
	const char	*message;	/* for people */
	/* A budget used up: which secret's, which, and when to come back. */
	const char	*secret;
	const char	*budget;	/* "requests_per_minute", ... */
	const char	*scope;		/* "sandbox" or "gateway" */
	unsigned	 retry_after;	/* seconds; 0: no Retry-After */
};

/*
 * Formats a complete HTTP/1.1 response for d: a JSON body {"error",
 * "host", "policy", "rule", "reason", "message"} an agent can act on
 * (null for what d leaves out, host also when it is empty), with
 * "secret", "budget", "scope" and "retry_after" and a Retry-After header
 * when d names a budget,
 * "Proxy-Status" (RFC 9209) with the error type and the reason, and
 * "Connection: close" unless keep_alive.  Returns a malloc'd buffer and
 * its length in *len, or NULL.
 */
char	*deny_http(const struct deny_what *d, int keep_alive, size_t *len);
/* The RFC 9209 proxy error type for d's status and reason. */
const char *deny_proxy_error(int status, const char *reason);

#endif
