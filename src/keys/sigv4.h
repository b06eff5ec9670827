/*
 * sigv4.h: AWS Signature Version 4 (the "AWS4-HMAC-SHA256" scheme) for
 * requests an inject rule re-signs after judging them.  The credentials
 * are a json secret {"access_key_id", "secret_access_key",
 * "session_token"?}, parsed once into guarded memory.
 */
#ifndef SLUICE_SIGV4_H
#define SLUICE_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SIGV4_UNSIGNED	"UNSIGNED-PAYLOAD"
#define SIGV4_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SIGV4_MAX_FIELD	4096	/* longest access key, secret or token */

struct aws_creds {
	uint8_t		*mem;		/* guarded: the three, NUL-terminated */
	const char	*akid, *secret, *token;	/* token NULL: none */
	size_t		 token_len;
};

/*
 * Parses a json secret's value into *out.  0, or SL_ERR_INVALID with *why
 * ("not AWS credentials: ..."), SL_ERR_NOMEM.
 */
int	aws_creds_parse(const uint8_t *json, size_t len, struct aws_creds **out,
	    const char **why);
void	aws_creds_free(struct aws_creds *c);	/* wipes; accepts NULL */

/* What is signed of a request: as it goes upstream. */
struct sigv4_req {
	const char	*method;
	const char	*target;	/* path, '?' and query, as sent */
	const char	*host;		/* the Host header's value */
	const char	*service, *region;
	const char	*payload_hash;	/* hex SHA-256 or SIGV4_UNSIGNED */
	time_t		 now;
	int		 double_encode;	/* the path's bytes encoded again (all
					 * services but s3) */
};

/* The headers to set, NUL-terminated, in the caller's buffer. */
struct sigv4_headers {
	const char	*authorization;
	const char	*amz_date;		/* 20240102T030405Z */
	const char	*content_sha256;
	const char	*security_token;	/* NULL: none */
};

/*
 * The canonical request of r (signed headers host, x-amz-content-sha256,
 * x-amz-date and, with a token, x-amz-security-token) into out (cap
 * bytes, NUL-terminated); its length, or -1 when it does not fit.  The
 * path is taken as sent, encoded again for double_encode; the query's
 * names and values are decoded (%XX) and encoded as AWS asks (A-Za-z0-9
 * -_.~ as they are, every other byte %XX in upper case) and sorted.
 */
long	sigv4_canonical(const struct sigv4_req *r, const char *amz_date,
	    const char *token, char *out, size_t cap);

/*
 * Signs r with c: the headers in buf (cap bytes, the caller's guarded
 * scratch) and h.  Returns the bytes of buf used, or -1 when they do not
 * fit.
 */
long	sigv4_sign(const struct aws_creds *c, const struct sigv4_req *r,
	    char *buf, size_t cap, struct sigv4_headers *h);

#endif
