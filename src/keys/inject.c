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

/* A placeholder at p ("{{"): its name and whether it is base64'd; the end. */
static const char *
placeholder(const char *p, const char **name, size_t *nlen, int *b64)
{
	const char *q = p + 2;

	while (*q == ' ')
		q++;
	q += 7;				/* "secret:", checked at load */
	*name = q;
	for (*nlen = 0; q[*nlen] != ' ' && q[*nlen] != '|' && q[*nlen] != '}';
	    (*nlen)++)
		;
	q += *nlen;
	while (*q == ' ')
		q++;
	*b64 = *q == '|';
	if (*b64) {
		q++;
		while (*q == ' ')
			q++;
		q += 6;			/* "base64" */
		while (*q == ' ')
			q++;
	}
	return q + 2;			/* past "}}" */
}

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

/* Renders one template at buf[*off..len), NUL-terminated. */
static enum inject_result
render(const char *t, const struct secret_set *set, const char *host,
    char *buf, size_t len, size_t *off, struct inject *inj)
{
	const struct secret *s;
	const char *name, *p = t, *next;
	size_t nlen, n, o = *off;
	int b64;

	while (*p != '\0') {
		if (p[0] != '{' || p[1] != '{') {
			next = strstr(p, "{{");
			n = next != NULL ? (size_t)(next - p) : strlen(p);
			if (n >= len - o)
				return INJECT_TOO_BIG;
			memcpy(buf + o, p, n);
			o += n;
			p += n;
			continue;
		}
		next = placeholder(p, &name, &nlen, &b64);
		snprintf(inj->secret, sizeof(inj->secret), "%.*s",
		    (int)(nlen < sizeof(inj->secret) ? nlen :
		    sizeof(inj->secret) - 1), name);
		if ((s = secret_set_find(set, name, nlen)) == NULL)
			return INJECT_UNAVAILABLE;
		if (s->kind != SEALED_KIND_HEADER)
			return INJECT_WRONG_KIND;
		if (!secret_bound(s, host))
			return INJECT_UNBOUND;
		if (note_used(inj, s) != 0)
			return INJECT_TOO_BIG;
		if (b64) {
			n = sodium_base64_ENCODED_LEN(s->value_len,
			    sodium_base64_VARIANT_ORIGINAL);
			if (n > len - o)
				return INJECT_TOO_BIG;
			sodium_bin2base64(buf + o, n, s->value, s->value_len,
			    sodium_base64_VARIANT_ORIGINAL);
			o += n - 1;
		} else {
			if (s->value_len >= len - o)
				return INJECT_TOO_BIG;
			memcpy(buf + o, s->value, s->value_len);
			o += s->value_len;
		}
		p = next;
	}
	if (o >= len)
		return INJECT_TOO_BIG;
	buf[o++] = '\0';
	*off = o;
	return INJECT_OK;
}

enum inject_result
inject_render(const struct intercept_rule *rule, const struct secret_set *set,
    const char *host, char *buf, size_t len, size_t *used_len,
    struct inject *inj)
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
		if ((res = render(rule->inject_set[i].value, set, host, buf, len,
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
	const char *p, *name;
	size_t i, nlen;
	int b64;

	for (i = 0; i < rule->ninject_set; i++)
		for (p = rule->inject_set[i].value;
		    (p = strstr(p, "{{")) != NULL;) {
			p = placeholder(p, &name, &nlen, &b64);
			s = secret_set_find(set, name, nlen);
			if (s != NULL && s->kind != SEALED_KIND_HEADER)
				return s;
		}
	return NULL;
}
