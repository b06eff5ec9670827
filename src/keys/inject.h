/*
 * inject.h: the headers an inject rule sets, rendered from its templates
 * and the secret store.
 *
 * A template is text with placeholders {{secret:NAME}}, {{token:NAME}}
 * and their "| base64" forms (checked when the policy loaded).  Every
 * secret a template names must be in the set and bound to the request's
 * host, and every token source must have its token minted (the caller
 * does that), or nothing is injected at all.
 */
#ifndef SLUICE_INJECT_H
#define SLUICE_INJECT_H

#include <stddef.h>

#include "parse/httpwrite.h"
#include "conf/policy.h"

struct secret;
struct secret_set;

#define INJECT_MAX_SECRETS	4	/* distinct secrets one request gets */
#define INJECT_MAX_TOKENS	POLICY_MAX_TOKEN_REFS	/* sources one rule names */
#define INJECT_MAX_SWAPPED	16	/* header names a placeholder swap sets again */
#define INJECT_MAX_ADD		(POLICY_MAX_INJECT + 1 + 2 * INJECT_MAX_SWAPPED)
#define INJECT_BUF		(64u * 1024)	/* rendered values, together */

enum inject_result {
	INJECT_OK = 0,
	INJECT_UNAVAILABLE,	/* a named secret is not in the store: 503 */
	INJECT_UNBOUND,		/* a secret is not bound to the host: 403 */
	INJECT_TOO_BIG,		/* the values do not fit INJECT_BUF, or too many secrets */
	INJECT_WRONG_KIND,	/* a secret is a pem or json document: 500 */
	INJECT_NO_TOKEN,	/* a token source's token was not given */
};

/* A minted token, for {{token:NAME}}. */
struct inject_token {
	const char	*source;	/* the source's name */
	const char	*value;
	size_t		 len;
};

/* What templates are rendered from. */
struct inject_src {
	const struct secret_set *set;	/* may be NULL */
	const char	*host;		/* the request's, normalised */
	const struct inject_token *tokens;
	size_t		 ntokens;
};

struct inject {
	/* The headers to set (the rule's, then Accept-Encoding: identity). */
	struct http_add	 add[INJECT_MAX_ADD];
	size_t		 nadd;
	/*
	 * The headers to remove: the rule's, Range and If-Range (an
	 * upstream that serves ranges of an echoed credential would hand it
	 * back in pieces too short to redact), and every one set.
	 */
	const char	*drop[POLICY_MAX_INJECT + 2 + INJECT_MAX_SWAPPED];
	size_t		 ndrop;
	/* The secrets used, each with a reference. */
	struct secret	*used[INJECT_MAX_SECRETS];
	size_t		 nused;
	char		 secret[65];	/* on failure: the secret at fault */
};

/*
 * Renders rule's inject.set for src->host into buf (len bytes, the
 * caller's guarded scratch; it holds secret bytes until wiped), with the
 * secrets of src->set and the tokens of src->tokens.  On INJECT_OK, inj->add[] points into
 * buf and the rule, and inj holds references to the secrets used
 * (inject_release drops them); on failure inj holds none, and
 * inj->secret names the secret at fault.
 * *used_len is how much of buf was written, to be wiped (on failure
 * too).
 */
enum inject_result inject_render(const struct intercept_rule *rule,
	    const struct inject_src *src, char *buf, size_t len,
	    size_t *used_len, struct inject *inj);
void	inject_release(struct inject *inj);
/*
 * Notes s as used by the request too (a client certificate), with a
 * reference, once; -1 when inj holds INJECT_MAX_SECRETS already.
 */
int	inject_add_used(struct inject *inj, const struct secret *s);

/*
 * The first secret rule's templates name that set (may be NULL) holds as
 * another kind than a header value, or NULL.  A secret set does not hold
 * is not judged here: it is judged when it comes, and rendering refuses
 * it meanwhile.
 */
const struct secret *inject_wrong_kind(const struct intercept_rule *rule,
	    const struct secret_set *set);


#endif
