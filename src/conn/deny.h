/* deny.h: how a sandbox is told no, in its own protocol. */
#ifndef SLUICE_DENY_H
#define SLUICE_DENY_H

#include <stddef.h>

/* A fatal TLS alert access_denied(49), as one record: 7 bytes. */
#define DENY_TLS_ALERT_LEN 7
extern const unsigned char deny_tls_alert[DENY_TLS_ALERT_LEN];

/*
 * Formats a complete HTTP/1.1 response with "Connection: close" and a JSON
 * body {"error", "rule", "reason", "message"}; rule may be NULL.  Returns a
 * malloc'd buffer and its length in *len, or NULL.
 */
char	*deny_http(int status, const char *error, const char *rule,
	    const char *reason, const char *message, size_t *len);
/* The same, without "Connection: close" when keep_alive is set. */
char	*deny_http_keep(int status, const char *error, const char *rule,
	    const char *reason, const char *message, int keep_alive,
	    size_t *len);

#endif
