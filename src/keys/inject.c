/*
 * inject.c: renders an inject rule's header templates with secrets.  The
 * values are written into the caller's guarded scratch buffer, never into
 * ordinary heap memory, and every secret is checked against the request's
 * host before a byte of it is written.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "keys/inject.h"
#include "keys/secrets.h"

/* Notes s as used (once), taking a reference. */
static int
note_used(struct inject *inj, const struct secret *s)
{
	size_t i;

	for (i = 0; i < inj->nused; i++)
		if (inj->used[i] == s)
			return 0;
	if (inj->nused == INJECT_MAX_SECRETS)
		return -1;
	inj->used[inj->nused++] = secret_ref((struct secret *)s);
	return 0;
}

/* The value of the token source name[0..nlen) among toks, or NULL. */
static const struct inject_token *
token_of(const struct inject_token *toks, size_t ntoks, const char *name,
    size_t nlen)
{
	size_t i;

	for (i = 0; i < ntoks; i++)
		if (strlen(toks[i].source) == nlen &&
		    memcmp(toks[i].source, name, nlen) == 0)
			return &toks[i];
	return NULL;
}

/* v[0..n), base64'd or not, at buf[*o..len). */
static enum inject_result
put_value(const uint8_t *v, size_t n, int b64, char *buf, size_t len,
    size_t *o)
{
	size_t e;

	if (b64) {
		e = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
		if (e > len - *o)
			return INJECT_TOO_BIG;
		sodium_bin2base64(buf + *o, e, v, n,
		    sodium_base64_VARIANT_ORIGINAL);
		*o += e - 1;
	} else {
		if (n >= len - *o)
			return INJECT_TOO_BIG;
		memcpy(buf + *o, v, n);
		*o += n;
	}
	return INJECT_OK;
}

/* Renders one template at buf[*off..len), NUL-terminated. */
static enum inject_result
render(const char *t, const struct inject_src *src, char *buf, size_t len,
    size_t *off, struct inject *inj)
{
	const struct inject_token *tk;
	const struct secret *s;
	struct tmpl_ref ref;
	const char *p = t, *next;
	enum inject_result res;
	size_t n, o = *off;

	while (*p != '\0') {
		next = policy_template_next(p, &ref);
		n = next != NULL ? (size_t)(ref.at - p) : strlen(p);
		if (n >= len - o)
			return INJECT_TOO_BIG;
		memcpy(buf + o, p, n);
		o += n;
		if (next == NULL)
			break;
		p = next;
		snprintf(inj->secret, sizeof(inj->secret), "%.*s",
		    (int)(ref.len < sizeof(inj->secret) ? ref.len :
		    sizeof(inj->secret) - 1), ref.name);
		if (ref.token) {
			if ((tk = token_of(src->tokens, src->ntokens, ref.name,
			    ref.len)) == NULL)
				return INJECT_NO_TOKEN;
			res = put_value((const uint8_t *)tk->value, tk->len,
			    ref.b64, buf, len, &o);
		} else {
			if ((s = secret_set_find(src->set, ref.name,
			    ref.len)) == NULL)
				return INJECT_UNAVAILABLE;
			if (s->kind != SEALED_KIND_HEADER)
				return INJECT_WRONG_KIND;
			if (!secret_bound(s, src->host))
				return INJECT_UNBOUND;
			if (note_used(inj, s) != 0)
				return INJECT_TOO_BIG;
			res = put_value(s->value, s->value_len, ref.b64, buf,
			    len, &o);
		}
		if (res != INJECT_OK)
			return res;
	}
	if (o >= len)
		return INJECT_TOO_BIG;
	buf[o++] = '\0';
	*off = o;
	return INJECT_OK;
}

enum inject_result
inject_render(const struct intercept_rule *rule, const struct inject_src *src,
    char *buf, size_t len, size_t *used_len, struct inject *inj)
{
	enum inject_result res = INJECT_OK;
	size_t i, off = 0;

	memset(inj, 0, sizeof(*inj));
	if (rule->ninject_set > POLICY_MAX_INJECT ||
	    rule->ninject_remove > POLICY_MAX_INJECT) {
		*used_len = 0;
		return INJECT_TOO_BIG;
	}
	for (i = 0; i < rule->ninject_set; i++) {
		inj->add[inj->nadd].name = rule->inject_set[i].name;
		inj->add[inj->nadd].value = buf + off;
		if ((res = render(rule->inject_set[i].value, src, buf, len,
		    &off, inj)) != INJECT_OK)
			break;
		inj->nadd++;
	}
	if (res != INJECT_OK) {
		*used_len = len;	/* a value may be cut anywhere in it */
		inject_release(inj);
		return res;
	}
	*used_len = off;
	/* A response the redactor can read: no content coding. */
	for (i = 0; i < inj->nadd; i++)
		if (strcmp(inj->add[i].name, "accept-encoding") == 0)
			break;
	if (i == inj->nadd) {
		inj->add[inj->nadd].name = "accept-encoding";
		inj->add[inj->nadd++].value = "identity";
	}
	for (i = 0; i < rule->ninject_remove; i++)
		inj->drop[inj->ndrop++] = rule->inject_remove[i];
	inj->drop[inj->ndrop++] = "range";
	inj->drop[inj->ndrop++] = "if-range";
	return INJECT_OK;
}

int
inject_add_used(struct inject *inj, const struct secret *s)
{
	return note_used(inj, s);
}

void
inject_release(struct inject *inj)
{
	while (inj->nused > 0)
		secret_unref(inj->used[--inj->nused]);
}

const struct secret *
inject_wrong_kind(const struct intercept_rule *rule,
    const struct secret_set *set)
{
	const struct secret *s;
	struct tmpl_ref ref;
	const char *p;
	size_t i;

	for (i = 0; i < rule->ninject_set; i++)
		for (p = rule->inject_set[i].value; p != NULL &&
		    (p = policy_template_next(p, &ref)) != NULL;) {
			if (ref.token)
				continue;
			s = secret_set_find(set, ref.name, ref.len);
			if (s != NULL && s->kind != SEALED_KIND_HEADER)
				return s;
		}
	return NULL;
}
