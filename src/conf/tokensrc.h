/*
 * tokensrc.h: a policy's token sources -- where a short-lived access token
 * is minted from a sealed secret (keys/mint.h builds the request, the
 * workers send it).  Four kinds:
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
 * In a policy:
 *
 *   tokens:
 *     - name: svc
 *       kind: oauth_client_credentials
 *       token_url: https://auth.example.test/oauth/token
 *       client_id: my-client
 *       secret: svc-client-secret
 *       scope: "read write"
 *
 * and a template names it as {{token:svc}}.
 */
#ifndef SLUICE_TOKENSRC_H
#define SLUICE_TOKENSRC_H

#include <stddef.h>

#include "util/names.h"

struct ycheck;
struct ynode;

enum mint_kind {
	MINT_CLIENT_CREDENTIALS,
	MINT_REFRESH_TOKEN,
	MINT_JWT_BEARER,
	MINT_GITHUB_APP,
};

#define MINT_URL_MAX		2048	/* a token_url */
#define TOKENS_MAX		32	/* sources one policy declares */

/*
 * A source as the policy declares it (strings NUL-terminated; the
 * optional ones NULL).  The first six are what a request needs.
 */
struct mint_source {
	enum mint_kind	 kind;
	const char	*token_url;	/* https://host[:port]/path[?query] */
	const char	*client_id;	/* the OAuth kinds, jwt_bearer */
	const char	*scope;		/* optional */
	const char	*audience;	/* jwt_bearer: aud (default token_url) */
	const char	*app_id;	/* github_app: iss */
	const char	*name;		/* {{token:NAME}} */
	const char	*secret;	/* the sealed secret it is minted from */
	const char	*upstream_ca;	/* the endpoint's CA file; NULL: config's */
	char		 host[NAME_BUFSZ];	/* token_url's, normalised */
	unsigned	 port;
	unsigned	 line;
	/*
	 * What the source is, as 16 hex digits of BLAKE2b over every key but
	 * name and line: a token is minted anew when it changes, not when
	 * another part of the policy does.
	 */
	char		 digest[17];
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

/* A policy's sources. */
struct token_list {
	struct mint_source *v;
	size_t		 n;
};

/*
 * Parses the "tokens" list seq into out: every error goes to x with its
 * line.  github_app may give installation_id instead of token_url (then
 * GitHub's https://api.github.com/app/installations/ID/access_tokens).
 */
void	token_list_parse(struct ycheck *x, const struct ynode *seq,
	    struct token_list *out);
void	token_list_free(struct token_list *l);
/* The source called name[0..len), or NULL. */
const struct mint_source *token_find(const struct token_list *l,
	    const char *name, size_t len);

#endif
