/* tokensrc.c: a policy's token sources (tokensrc.h). */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/names.h"
#include "util/yamltree.h"
#include "conf/policy.h"
#include "conf/tokensrc.h"

static const char *const kinds[] = {
	[MINT_CLIENT_CREDENTIALS] = "oauth_client_credentials",
	[MINT_REFRESH_TOKEN] = "oauth_refresh_token",
	[MINT_JWT_BEARER] = "jwt_bearer",
	[MINT_GITHUB_APP] = "github_app",
};
#define NKINDS	(sizeof(kinds) / sizeof(kinds[0]))

/* What a github_app source's installation_id makes of token_url. */
#define GITHUB_TOKEN_URL \
	"https://api.github.com/app/installations/%s/access_tokens"

const char *
mint_kind_name(enum mint_kind k)
{
	return (unsigned)k < NKINDS ? kinds[k] : NULL;
}

int
mint_kind_of(const char *name)
{
	size_t i;

	for (i = 0; i < NKINDS; i++)
		if (strcmp(name, kinds[i]) == 0)
			return (int)i;
	return -1;
}

int
mint_kind_signs(enum mint_kind k)
{
	return k == MINT_JWT_BEARER || k == MINT_GITHUB_APP;
}

int
mint_url_parse(const char *url, struct mint_url *out, const char **why)
{
	const char *h, *end, *colon;
	size_t hlen, i;
	char *e;
	unsigned long port = 443;

	memset(out, 0, sizeof(*out));
	if (strlen(url) > MINT_URL_MAX || strncmp(url, "https://", 8) != 0) {
		*why = "must be an https:// URL";
		return -1;
	}
	h = url + 8;
	end = h + strcspn(h, "/?#");
	if (*end == '#' || strchr(url, '#') != NULL) {
		*why = "may not have a fragment";
		return -1;
	}
	if (memchr(h, '@', (size_t)(end - h)) != NULL) {
		*why = "may not have userinfo";
		return -1;
	}
	colon = memchr(h, ':', (size_t)(end - h));
	hlen = (size_t)((colon != NULL ? colon : end) - h);
	if (colon != NULL) {
		port = strtoul(colon + 1, &e, 10);
		if (e != end || colon + 1 == end || port == 0 || port > 65535 ||
		    colon[1] < '0' || colon[1] > '9') {
			*why = "has a bad port";
			return -1;
		}
	}
	if (hlen == 0 || hlen >= sizeof(out->host)) {
		*why = "has no host, or one too long";
		return -1;
	}
	if (h[0] == '[' || name_normalize(h, hlen, out->host) != 0) {
		*why = "must name a host by a DNS name";
		return -1;
	}
	out->port = (unsigned)port;
	out->target = *end == '\0' ? "/" : end;
	if (*out->target == '?') {
		*why = "needs a path";
		return -1;
	}
	for (i = 0; out->target[i] != '\0'; i++)
		if ((unsigned char)out->target[i] <= 0x20 ||
		    (unsigned char)out->target[i] >= 0x7f) {
			*why = "has a byte a request target may not";
			return -1;
		}
	return 0;
}

/* ---- parsing -------------------------------------------------------- */

/* A string key of m as a new string in *out (absent: NULL); 0 or -1. */
static int
str_key(struct ycheck *x, const struct ynode *m, const char *key,
    const char **out)
{
	const struct ynode *n;
	char what[48];
	char *s;

	*out = NULL;
	if ((n = ynode_get(m, key)) == NULL)
		return 0;
	snprintf(what, sizeof(what), "tokens.%s", key);
	if (!ycheck_string(x, n, what))
		return -1;
	if (n->scalar_len == 0 || n->scalar_len > 1024) {
		ycheck_err(x, n->line, n->col, "'%s' must be 1 to 1024 bytes",
		    what);
		return -1;
	}
	if ((s = strdup(n->scalar)) == NULL) {
		x->nomem = 1;
		return -1;
	}
	*out = s;
	return 0;
}

/* Printable ASCII, no quote or backslash: it goes into JSON and forms. */
static int
text_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f ||
		    *s == '"' || *s == '\\')
			return 0;
	return 1;
}

/* What kind k needs of t, checked (the keys were read). */
static void
check_kind(struct ycheck *x, const struct ynode *m, struct mint_source *t)
{
	const char *need = NULL, *extra = NULL;

	switch (t->kind) {
	case MINT_CLIENT_CREDENTIALS:
	case MINT_REFRESH_TOKEN:
		if (t->client_id == NULL)
			need = "client_id";
		if (t->app_id != NULL)
			extra = "app_id";
		break;
	case MINT_JWT_BEARER:
		if (t->client_id == NULL)
			need = "client_id";
		if (t->app_id != NULL)
			extra = "app_id";
		break;
	case MINT_GITHUB_APP:
		if (t->app_id == NULL)
			need = "app_id";
		if (t->scope != NULL)
			extra = "scope";
		else if (t->audience != NULL)
			extra = "audience";
		break;
	}
	if (need != NULL)
		ycheck_err(x, m->line, m->col, "token '%s': kind %s needs '%s'",
		    t->name, mint_kind_name(t->kind), need);
	if (extra != NULL)
		ycheck_err(x, m->line, m->col, "token '%s': kind %s has no "
		    "'%s'", t->name, mint_kind_name(t->kind), extra);
}

/* Whether url's path has the segments "installations/ID/". */
static int
names_installation(const char *url, const char *id)
{
	char seg[48];

	snprintf(seg, sizeof(seg), "/installations/%s/", id);
	return strstr(url, seg) != NULL;
}

/* The token_url of t, or the one its installation_id makes; 0 or -1. */
static int
token_url(struct ycheck *x, const struct ynode *m, struct mint_source *t)
{
	const struct ynode *n = ynode_get(m, "installation_id");
	unsigned long long id;
	struct mint_url u;
	const char *why;
	char *s, e[80];

	if (n != NULL) {
		if (t->kind != MINT_GITHUB_APP) {
			ycheck_err(x, n->line, n->col, "token '%s': only "
			    "github_app has 'installation_id'", t->name);
			return -1;
		}
		if (!ycheck_string(x, n, "tokens.installation_id") ||
		    yparse_uint(n->scalar, 1ULL << 53, &id) != 0 || id == 0) {
			ycheck_err(x, n->line, n->col, "token '%s': "
			    "'installation_id' must be a number", t->name);
			return -1;
		}
		if (t->token_url == NULL) {
			if ((s = malloc(sizeof(GITHUB_TOKEN_URL) + 20)) == NULL) {
				x->nomem = 1;
				return -1;
			}
			snprintf(s, sizeof(GITHUB_TOKEN_URL) + 20,
			    GITHUB_TOKEN_URL, n->scalar);
			t->token_url = s;
		} else if (!names_installation(t->token_url, n->scalar)) {
			ycheck_err(x, n->line, n->col, "token '%s': token_url "
			    "does not name installation %s", t->name, n->scalar);
			return -1;
		}
	}
	if (t->token_url == NULL) {
		ycheck_err(x, m->line, m->col, "token '%s' needs 'token_url'",
		    t->name);
		return -1;
	}
	n = ynode_get(m, "token_url");
	if (mint_url_parse(t->token_url, &u, &why) != 0) {
		ycheck_err(x, n != NULL ? n->line : m->line, n != NULL ?
		    n->col : m->col, "token '%s': token_url '%s' %s", t->name,
		    yesc(t->token_url, e, sizeof(e)), why);
		return -1;
	}
	memcpy(t->host, u.host, sizeof(t->host));
	t->port = u.port;
	return 0;
}

/* t->digest, over every key that changes what is minted. */
static void
digest(struct mint_source *t)
{
	const char *f[] = { mint_kind_name(t->kind), t->token_url,
	    t->client_id, t->scope, t->audience, t->app_id, t->secret,
	    t->upstream_ca };
	crypto_generichash_state st;
	uint8_t d[8];
	size_t i;

	crypto_generichash_init(&st, NULL, 0, sizeof(d));
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		/* Absent and empty differ: a byte says which. */
		crypto_generichash_update(&st, (const uint8_t *)(f[i] != NULL ?
		    "+" : "-"), 1);
		if (f[i] != NULL)
			crypto_generichash_update(&st, (const uint8_t *)f[i],
			    strlen(f[i]) + 1);
	}
	crypto_generichash_final(&st, d, sizeof(d));
	sodium_bin2hex(t->digest, sizeof(t->digest), d, sizeof(d));
}

/* One source: a map. */
static void
parse_one(struct ycheck *x, const struct ynode *m, struct mint_source *t)
{
	static const char *const keys[] = { "name", "kind", "token_url",
	    "client_id", "secret", "scope", "audience", "app_id",
	    "installation_id", "upstream_ca", NULL };
	const char *kind = NULL;
	char e[80];
	int k;

	t->line = m->line;
	if (m->kind != YNODE_MAP) {
		ycheck_err(x, m->line, m->col, "'tokens' items must be maps");
		return;
	}
	ycheck_keys(x, m, "tokens", keys);
	if (str_key(x, m, "name", &t->name) != 0 || t->name == NULL) {
		if (t->name == NULL && ynode_get(m, "name") == NULL)
			ycheck_err(x, m->line, m->col, "a token needs 'name'");
		return;
	}
	if (!policy_name_valid(t->name)) {
		ycheck_err(x, m->line, m->col, "token '%s': not a valid name "
		    "([A-Za-z0-9][A-Za-z0-9._-]{0,62})",
		    yesc(t->name, e, sizeof(e)));
		return;
	}
	if (str_key(x, m, "kind", &kind) != 0)
		return;
	if (kind == NULL || (k = mint_kind_of(kind)) < 0) {
		ycheck_err(x, m->line, m->col, "token '%s': 'kind' must be "
		    "oauth_client_credentials, oauth_refresh_token, "
		    "jwt_bearer or github_app", t->name);
		free((char *)kind);
		return;
	}
	free((char *)kind);
	t->kind = (enum mint_kind)k;
	if (str_key(x, m, "token_url", &t->token_url) != 0 ||
	    str_key(x, m, "client_id", &t->client_id) != 0 ||
	    str_key(x, m, "secret", &t->secret) != 0 ||
	    str_key(x, m, "scope", &t->scope) != 0 ||
	    str_key(x, m, "audience", &t->audience) != 0 ||
	    str_key(x, m, "app_id", &t->app_id) != 0 ||
	    str_key(x, m, "upstream_ca", &t->upstream_ca) != 0)
		return;
	if (t->secret == NULL)
		ycheck_err(x, m->line, m->col, "token '%s' needs 'secret'",
		    t->name);
	else if (!secret_name_ok(t->secret, strlen(t->secret)))
		ycheck_err(x, m->line, m->col, "token '%s': '%s' is not a "
		    "secret name (1 to 64 of [A-Za-z0-9._-])", t->name,
		    yesc(t->secret, e, sizeof(e)));
	if ((t->client_id != NULL && !text_ok(t->client_id)) ||
	    (t->scope != NULL && !text_ok(t->scope)) ||
	    (t->audience != NULL && !text_ok(t->audience)) ||
	    (t->app_id != NULL && !text_ok(t->app_id)))
		ycheck_err(x, m->line, m->col, "token '%s': client_id, scope, "
		    "audience and app_id are printable ASCII without '\"' "
		    "or '\\'", t->name);
	check_kind(x, m, t);
	if (token_url(x, m, t) == 0)
		digest(t);
}

void
token_list_parse(struct ycheck *x, const struct ynode *seq,
    struct token_list *out)
{
	size_t i, j;

	if (ycheck_seq(x, seq, "tokens", TOKENS_MAX, "sources") == 0)
		return;
	if ((out->v = calloc(seq->n, sizeof(*out->v))) == NULL) {
		x->nomem = 1;
		return;
	}
	out->n = seq->n;
	for (i = 0; i < seq->n; i++) {
		parse_one(x, seq->items[i], &out->v[i]);
		for (j = 0; out->v[i].name != NULL && j < i; j++)
			if (out->v[j].name != NULL &&
			    strcmp(out->v[j].name, out->v[i].name) == 0)
				ycheck_err(x, seq->items[i]->line,
				    seq->items[i]->col, "'tokens': two sources "
				    "are called '%s'", out->v[i].name);
	}
}

void
token_list_free(struct token_list *l)
{
	size_t i;
	struct mint_source *t;

	for (i = 0; i < l->n; i++) {
		t = &l->v[i];
		free((char *)t->token_url);
		free((char *)t->client_id);
		free((char *)t->scope);
		free((char *)t->audience);
		free((char *)t->app_id);
		free((char *)t->name);
		free((char *)t->secret);
		free((char *)t->upstream_ca);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

const struct mint_source *
token_find(const struct token_list *l, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->v[i].name != NULL && strlen(l->v[i].name) == len &&
		    memcmp(l->v[i].name, name, len) == 0)
			return &l->v[i];
	return NULL;
}
