/*
 * mint.h: short-lived access tokens minted from sealed secrets -- the
 * request that asks a token endpoint for one, and the reading of its
 * answer.  Four kinds of source:
 *
 *   oauth_client_credentials  RFC 6749 4.4: the client secret in HTTP
 *                             Basic, grant_type=client_credentials
 *   oauth_refresh_token       RFC 6749 6: grant_type=refresh_token with
 *                             the sealed refresh token and client_id
 *   jwt_bearer                RFC 7523 2.1: an assertion (iss and sub the
 *                             client id, aud the audience) signed RS256 or
 *                             ES256 with the sealed private key
 *   github_app                an RS256 app JWT (iss the app id) as a
 *                             Bearer credential, POSTed to token_url;
 *                             the answer's token and expires_at
 *
 * No I/O here: the caller sends the request over verified TLS and hands
 * the answer back.  Everything a request or an answer holds is a
 * credential: written only to the caller's guarded buffers, and what
 * jansson parsed is wiped before it is freed.
 */
#ifndef SLUICE_MINT_H
#define SLUICE_MINT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

#include "util/names.h"

struct secret;

enum mint_kind {
	MINT_CLIENT_CREDENTIALS,
	MINT_REFRESH_TOKEN,
	MINT_JWT_BEARER,
	MINT_GITHUB_APP,
};

#define MINT_URL_MAX		2048	/* a token_url */
#define MINT_REQ_MAX		(16u * 1024)	/* a whole request */
#define MINT_ANSWER_MAX		(64u * 1024)	/* an answer's body */
#define MINT_TOKEN_MAX		8192	/* a minted token */
#define MINT_ASSERTION_TTL	300	/* seconds an assertion lives */
#define MINT_DEFAULT_TTL	300	/* an answer without expires_in */

/* A source as the policy declares it (strings NUL-terminated; some NULL). */
struct mint_source {
	enum mint_kind	 kind;
	const char	*token_url;	/* https://host[:port]/path[?query] */
	const char	*client_id;	/* the OAuth kinds */
	const char	*scope;		/* optional */
	const char	*audience;	/* jwt_bearer: aud (default token_url) */
	const char	*app_id;	/* github_app: iss */
};

/* The name of kind k as the policy spells it, or NULL. */
const char *mint_kind_name(enum mint_kind k);
/* The kind named name; -1 when there is none. */
int	mint_kind_of(const char *name);
/* Whether kind k signs with a pem secret (else: a header secret). */
int	mint_kind_signs(enum mint_kind k);

/* What a token_url comes to. */
struct mint_url {
	char		 host[NAME_BUFSZ];	/* a DNS name, normalised */
	unsigned	 port;		/* 443 unless given */
	const char	*target;	/* into the url: path and query */
};

/*
 * Splits url, which must be https://, a DNS name (no IP literal, no
 * userinfo, no fragment) and a path ("/" when none).  0, or -1 with *why.
 */
int	mint_url_parse(const char *url, struct mint_url *out, const char **why);

/*
 * The HTTP/1.1 request (head and body) that mints a token from src with
 * the secret s (a header secret's value, or a pem secret's key), at now,
 * into out (cap bytes, the caller's guarded memory).  Returns its length,
 * or -1 with *why (a bad source, a key that is neither RSA nor P-256,
 * too large).
 */
long	mint_request(const struct mint_source *src, const struct secret *s,
	    time_t now, char *out, size_t cap, const char **why);

/* A token read from an answer. */
struct mint_token {
	size_t		 len;		/* of the token, written to the caller's buffer */
	int64_t		 expires_at;	/* unix seconds */
};

/*
 * Reads the answer to a mint request of kind k: status, and its body
 * body[0..len) (the caller wipes it after).  On success the token goes to
 * tok (MINT_TOKEN_MAX bytes of the caller's guarded memory, NUL-
 * terminated) and *out says how long it is and when it expires; 0.  Else
 * -1 with a description in why (whycap bytes: the status, and the
 * endpoint's OAuth error code when it gave one; never a value).
 */
int	mint_answer(enum mint_kind k, int status, const char *body, size_t len,
	    time_t now, char *tok, struct mint_token *out, char *why,
	    size_t whycap);

/*
 * A compact JWS of the JSON object payload, signed with key: RS256 for
 * an RSA key, ES256 for a P-256 one.  Into out (cap bytes, NUL-
 * terminated); its length, or -1 with *why.
 */
long	mint_jws(EVP_PKEY *key, const char *payload, char *out, size_t cap,
	    const char **why);

#endif
