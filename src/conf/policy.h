/* policy.h: one named policy, loaded from YAML, and the connection verdicts. */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/err.h"
#include "util/names.h"
#include "conf/budget.h"
#include "conf/tokensrc.h"

#define POLICY_MAX_TOKEN_REFS	4	/* token sources one rule names */

struct cidr_tree;
struct nameset;

enum egress_kind { EGRESS_DOMAIN, EGRESS_CIDR };

struct egress_rule {
	enum egress_kind kind;
	char		*label;		/* "allow:api.openai.com", for audit */
	char		 name[NAME_BUFSZ + 2];	/* DOMAIN: normalised pattern */
	struct sl_addr	 prefix;	/* CIDR: canonical */
	unsigned	 plen;
	uint16_t	*ports;		/* NULL: any port */
	size_t		 nports;
	unsigned	 line;
};

struct kv {				/* a name and a glob or template */
	char	*name;
	char	*value;
};

enum intercept_action {
	ICPT_PASS, ICPT_DENY, ICPT_INJECT, ICPT_FORWARD,
};

/*
 * What ALPN offers a sandbox whose host is intercepted, in the order of
 * preference, as the TLS wire list ("\x02h2\x08http/1.1"); len 0: not
 * set.  Only "h2" and "http/1.1" exist.
 */
#define ALPN_WIRE_MAX	16
struct alpn_list {
	unsigned char	 wire[ALPN_WIRE_MAX];
	unsigned char	 len;
};

struct intercept_rule {
	char		*name;
	char		*label;		/* "intercept:github-read" */
	char		 host[NAME_BUFSZ + 2];	/* normalised pattern */
	char		**methods;	size_t nmethods;	/* uppercase; 0: any */
	char		*path;		/* glob; NULL: any.  Segments are
					 * literal, "*" (one segment) or "**"
					 * (any number of segments) */
	struct kv	*query;		size_t nquery;	/* value globs: '*'
							 * any run of bytes */
	struct kv	*headers;	size_t nheaders;	/* names lowercased */
	enum intercept_action action;
	struct kv	*inject_set;	size_t ninject_set;	/* names lowercased;
				 * values are templates: text with
				 * {{secret:NAME}} or {{secret:NAME | base64}} */
	char		**inject_remove; size_t ninject_remove;	/* lowercased */
	char		**placeholders; size_t nplaceholders;	/* inject: secrets
				 * whose placeholders are swapped for them */
	char		*sigv4_secret;	/* inject: re-sign with AWS SigV4 */
	char		*sigv4_service, *sigv4_region;
	int		 keep_cookies;	/* inject: the answer's Set-Cookie
					 * reaches the sandbox (else dropped) */
	char		*forward_to;	/* https URL */
	char		*forward_audience;	/* default: to's origin */
	char		 forward_host[NAME_BUFSZ + 2];	/* of to, normalised */
	uint16_t	 forward_port;
	char		 forward_path[256];	/* to's path: a prefix, or "" */
	int		 forward_body_hash;	/* the token carries the body's hash */
	char		*upstream_ca;	/* NULL: config's upstream_ca */
	char		**pins;		size_t npins;	/* base64 SPKI SHA-256 */
	char		*client_cert;	/* pass, inject: the pem secret whose
					 * key and chain are presented to the
					 * upstream; NULL: none */
	/*
	 * inject: the token sources its templates name, each once, in the
	 * policy's tokens (linked when it loads).
	 */
	const struct mint_source *tokens[POLICY_MAX_TOKEN_REFS];
	size_t		 ntokens;
	struct alpn_list alpn;		/* offered to the sandbox; n 0: the policy's */
	int		 allow_method_override;	/* pass, inject: a request may
					 * carry X-HTTP-Method-Override and
					 * the like (policy_request_refusal) */
	unsigned	 line;
};

/*
 * Immutable once parsed and shared by reference: every snapshot that holds
 * it (and a sandbox's inline policy) counts one reference.
 */
struct policy {
	atomic_uint	 refs;
	char		*name;
	char		*file;		/* where it came from, or "inline" */
	uint8_t		 digest[32];	/* BLAKE2b-256 of the source bytes */
	uint64_t	 revision;	/* set by whoever installs it; 0 here */
	int		 default_allow;
	int		 observe_never;	/* observe: never (sandbox mode) */
	struct alpn_list alpn;		/* its intercepted hosts' default */
	struct egress_rule *allow;	size_t nallow;
	struct egress_rule *deny;	size_t ndeny;
	struct intercept_rule *intercepts; size_t nintercepts;
	struct budget_list budgets;	/* per sandbox, per credential */
	struct token_list tokens;	/* where {{token:NAME}} is minted */
	struct nameset	*allow_names, *deny_names, *intercept_names;
	struct cidr_tree *allow_cidrs, *deny_cidrs;
	/*
	 * Private to policy*.c: the wildcard patterns alone, and for each
	 * rule the next one with the same pattern (UINT32_MAX: none), so that
	 * every rule matching a name is seen, not only the most specific.
	 */
	struct nameset	*allow_wild, *deny_wild;
	uint32_t	*allow_next, *deny_next;
};

/*
 * Parses and validates one policy.  Unknown keys, wrong types, bad names,
 * CIDRs, ports, globs and templates are errors, each added to errs as
 * "file:line:col: message"; a policy with any error is refused whole
 * (SL_ERR_INVALID).  The result is immutable and safe to share between
 * threads.
 */
int	policy_parse(const char *file, const char *buf, size_t len,
	    struct policy **out, struct errlist *errs);
/* Reads path (at most POLICY_MAX_BYTES) and parses it. */
int	policy_load(const char *path, struct policy **out, struct errlist *errs);
struct policy *policy_ref(struct policy *p);
void	policy_free(struct policy *p);	/* drops a reference; accepts NULL */

#define POLICY_MAX_BYTES	(4u << 20)
#define POLICY_MAX_NODES	1000000u	/* YAML nodes of one policy */
#define POLICY_MAX_INJECT	32	/* headers one rule sets, and removes */
#define POLICY_MAX_PLACEHOLDERS	8	/* secrets one rule swaps placeholders of */

/* Whether s names a policy, rule or sandbox: [A-Za-z0-9][A-Za-z0-9._-]{0,62}. */
int	policy_name_valid(const char *s);

/*
 * The canonical form of a prefix (as addr_canonical for addresses): an IPv6
 * prefix inside a range that carries IPv4 addresses (IPv4-mapped, NAT64,
 * 6to4, ...) becomes the IPv4 prefix it covers, so ::ffff:10.0.0.0/104 is
 * 10.0.0.0/8.  Other prefixes are copied.  SL_ERR_INVALID when the prefix
 * straddles such a range in a way no IPv4 prefix expresses, or is narrower
 * than the IPv4 address it carries (2002:a00:1:1::/64).
 */
int	policy_prefix_canonical(const struct sl_addr *in, unsigned plen,
	    struct sl_addr *out, unsigned *out_plen);

enum verdict {
	VERDICT_CONTINUE,	/* not decided by this step */
	VERDICT_DENY,
	VERDICT_PASS,		/* pass through untouched */
	VERDICT_INTERCEPT,	/* terminate TLS and judge each request */
};

struct decision {
	enum verdict	 verdict;
	const char	*reason;	/* static: "deny-cidr", "allow-name", ... */
	const char	*rule;		/* the rule's label, or NULL */
	int		 need_binding;	/* the name must own the address */
	/* INTERCEPT: what ALPN offers the sandbox (the rule's, or the policy's) */
	const struct alpn_list *alpn;
};

/*
 * Step 2 of SPEC, the destination alone: forbidden addresses (reason
 * "forbidden-address") and egress.deny CIDRs ("deny-cidr") give DENY,
 * anything else CONTINUE.  dst need not be canonical.
 */
void	policy_check_dest(const struct policy *p, const struct sl_addr *dst,
	    uint16_t port, struct decision *d);
/*
 * Steps 4 and 6 for a connection that names its host (SNI or Host; name
 * normalised), after policy_check_dest said CONTINUE.  In order: deny-listed
 * name (DENY "deny-name"); private destination that no allow CIDR with the
 * port covers (DENY "private-address", intercepted names too);
 * intercepted host (INTERCEPT "intercept", need_binding); destination in
 * an allow CIDR with the port (PASS "allow-cidr"); allowed name (PASS
 * "allow-name", need_binding); default allow (PASS "default-allow",
 * need_binding); else DENY "not-allowed".
 */
void	policy_check_name(const struct policy *p, const char *name,
	    const struct sl_addr *dst, uint16_t port, struct decision *d);
/*
 * Step 5, opaque TCP or TLS without SNI: PASS "allow-cidr" when an allow
 * CIDR covers dst and port, else DENY ("private-address" or "no-cidr-rule").
 */
void	policy_check_opaque(const struct policy *p, const struct sl_addr *dst,
	    uint16_t port, struct decision *d);
/*
 * Whether the DNS filter may hand out addr for an allowed name: never a
 * forbidden address or one in a port-less deny CIDR; a private one only
 * when an allow CIDR covers it.
 */
int	policy_addr_answerable(const struct policy *p, const struct sl_addr *addr);
/* Whether a name could be allowed at all, on some port (DNS filter). */
int	policy_name_allowed(const struct policy *p, const char *name);
/*
 * Why it could not: NULL (allowed), "invalid-name", "deny-name" (a rule
 * denies it on every port) or "not-allowed" (no rule allows it).
 */
const char *policy_name_refusal(const struct policy *p, const char *name);
/* Whether an intercept rule names this (normalised) host. */
int	policy_intercepts(const struct policy *p, const char *name);
/*
 * The name alone, before any address is known (the explicit proxy's
 * authority, judged before it is resolved): DENY ("invalid-name",
 * "deny-name" for port, "not-allowed") or CONTINUE when the policy
 * intercepts the name, allows it by name on port, or allows by default.
 * policy_check_name applies the same judgement of the name; a name that
 * only an allow CIDR would let through needs its address first, which
 * is never looked up for it.
 */
void	policy_check_name_alone(const struct policy *p, const char *name,
	    uint16_t port, struct decision *d);

/*
 * Whether a normalised name matches a pattern as policies write them (an
 * exact name, or "*." and a suffix: any depth below, not the apex).
 */
int	policy_pattern_match(const char *pattern, const char *name);

/*
 * A placeholder in a template that policy_parse checked: {{secret:NAME}}
 * or {{token:NAME}}, "| base64" or not.
 */
struct tmpl_ref {
	const char	*at;		/* its "{{" */
	int		 token;		/* a token source, else a secret */
	const char	*name;
	size_t		 len;
	int		 b64;
};

/*
 * The first placeholder of a checked template at or after s, into *ref;
 * returns where the text after it starts, or NULL when there is none.
 */
const char *policy_template_next(const char *s, struct tmpl_ref *ref);

/* ==== Intercepted requests (policy_request.c) ============================ */

struct http_header;		/* httphead.h: name, name_len, value, value_len */

/*
 * One request on an intercepted connection, as the rules see it.  Every
 * pointer is borrowed for the call; nothing is kept.
 */
struct http_request_view {
	const char	*method;	/* NUL-terminated, as received */
	const char	*host;		/* normalised name: the SNI host */
	const char	*path;		/* NUL-terminated, from
					 * http_path_normalize() */
	const char	*query;		/* from http_path_normalize(): raw,
					 * without '?'; NULL: no query */
	size_t		 query_len;
	const struct http_header *headers;	/* as struct http_head holds
						 * them; values trimmed */
	size_t		 nheaders;
};

/*
 * The first intercept rule, in file order, that matches rq, or NULL (the
 * caller then denies).  A rule matches when every part of its match does:
 *  - host: policy_pattern_match();
 *  - methods: any when none are listed, else one equal to rq->method
 *    ignoring ASCII case (so "get" cannot slip past a GET rule to an
 *    origin that reads methods case-insensitively);
 *  - path: any when absent, else policy_path_match();
 *  - query: each named parameter appears at least once and every
 *    appearance's value matches its glob (policy_value_match()), so a
 *    repeated parameter cannot smuggle a second value past the rule.
 *    The query is split at '&' (not ';'), each pair at its first '=' (a
 *    pair without one has the empty value, empty pairs are skipped); in
 *    names and values "+" is a space and %XX is decoded, as in
 *    application/x-www-form-urlencoded; names compare exactly;
 *  - headers: each named header appears at least once (names ignore ASCII
 *    case) and every appearance's value matches its glob, so a second
 *    header line cannot smuggle a value past the rule.
 * No allocation; the cost is linear in the rules and the request, but for
 * globs, which are O(glob * value) at worst.  Safe from any thread on an
 * immutable policy.  rq->host and rq->path must not be NULL.
 */
const struct intercept_rule *policy_match_request(const struct policy *p,
	    const struct http_request_view *rq);

/*
 * Why the rule r that matched rq still refuses it, or NULL.  A pass or
 * inject rule without allow_method_override refuses a request with any
 * method-override header (http_header_claim() says HTTP_CLAIM_METHOD):
 * "method-override".  The origin would act on another method than the
 * one the rule judged, so its value is not looked at, not even when it
 * names the request's own method.  Forward rules drop such headers
 * instead; deny rules refuse anyway.  Static reason; no allocation.
 */
const char *policy_request_refusal(const struct intercept_rule *r,
	    const struct http_request_view *rq);

/*
 * Whether a normalised path path[0..len) matches a path glob as the policy
 * parser accepts them.  Both are split into segments at '/'; a trailing
 * '/' makes an empty last segment, so "/a/b" and "/a/b/" differ.  A
 * literal segment matches a path segment with the same bytes once escapes
 * on both sides are decoded ("/a!b" and "/a%21b" match each other, hex
 * case aside); "*" matches exactly one non-empty segment; "**" matches any
 * number of segments, none included.  So the glob "/repos/acme/" + "**"
 * matches "/repos/acme", "/repos/acme/" and everything below them, but
 * not "/repos/acmex"; the glob "/" + "*" does not match "/".
 * O(segments of glob * segments of path) unit comparisons at worst; no
 * allocation.
 */
int	policy_path_match(const char *glob, const char *path, size_t len);

/*
 * Whether the bytes s[0..len) match a value glob: '*' matches any run of
 * bytes (the empty one too), every other byte itself, case included.
 * O(strlen(glob) * len) at worst; no allocation.
 */
int	policy_value_match(const char *glob, const char *s, size_t len);

/* ==== End of intercepted requests ======================================== */

#endif
