/*
 * test_secrets.c: the secret store (opening with the gateway keys,
 * fingerprints, versions, sets, host binding, the folder) and the
 * templates of inject rules.
 */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "conf/config.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "parse/httphead.h"
#include "keys/placeholder.h"
#include "keys/sealed.h"
#include "keys/secrets.h"

struct fx {
	char		 dir[64];
	char		 keydir[96], secdir[96], key[128], pub[128];
	struct config	 cfg;
	char		*keys[1];
	struct secret_store *st;
	uint8_t		 pk[32];
};

static int
setup(void **state)
{
	struct errlist errs = ERRLIST_INIT;
	struct fx *f = calloc(1, sizeof(*f));
	const char *why = NULL;

	assert_non_null(f);
	assert_true(sodium_init() >= 0);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sluice-test-secrets.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->keydir, sizeof(f->keydir), "%s/keys", f->dir);
	snprintf(f->secdir, sizeof(f->secdir), "%s/secrets", f->dir);
	snprintf(f->key, sizeof(f->key), "%s/gateway.key", f->keydir);
	snprintf(f->pub, sizeof(f->pub), "%s/gateway.pub", f->keydir);
	assert_int_equal(mkdir(f->keydir, 0700), 0);
	assert_int_equal(mkdir(f->secdir, 0700), 0);
	assert_int_equal(keys_generate(f->keydir, &why), 0);
	assert_int_equal(gwkey_load_pub(f->pub, f->pk, &why), 0);
	f->keys[0] = f->key;
	f->cfg.path = "test.yaml";
	f->cfg.gateway_keys = f->keys;
	f->cfg.ngateway_keys = 1;
	f->cfg.secret_dir = f->secdir;
	assert_int_equal(secret_store_new(&f->cfg, &f->st, &errs), 0);
	assert_non_null(f->st);
	errlist_free(&errs);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	secret_store_free(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* A sealed blob of name/version/value bound to host (may be NULL). */
static uint8_t *
blob_of(struct fx *f, const char *name, uint64_t version, const char *value,
    const char *host, size_t *len)
{
	const char *hosts[1] = { host }, *why = NULL;
	struct sealed_in in = { name, version, 1700000000, hosts,
	    host ? 1 : 0, (const uint8_t *)value, strlen(value),
	    SEALED_KIND_HEADER };
	uint8_t *blob = NULL;

	assert_int_equal(sealed_seal(f->pk, &in, &blob, len, &why), 0);
	return blob;
}

static struct secret *
open_secret(struct fx *f, const char *name, uint64_t version,
    const char *value, const char *host)
{
	char why[SECRET_WHY_MAX];
	struct secret *s = NULL;
	size_t len;
	uint8_t *b = blob_of(f, name, version, value, host, &len);

	assert_int_equal(secret_open(f->st, b, len, NULL, "file", &s, why), 0);
	free(b);
	return s;
}

static void
write_file(const char *dir, const char *file, const uint8_t *b, size_t len)
{
	char path[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	assert_non_null(fp = fopen(path, "wb"));
	assert_int_equal(fwrite(b, 1, len, fp), len);
	fclose(fp);
}

/* ---- the store ------------------------------------------------------ */

static void
t_open_fields(void **state)
{
	struct fx *f = *state;
	struct secret *s = open_secret(f, "tok", 7, "s3cr3t/+=&?", "api.example");
	size_t i;
	int raw = 0;

	assert_string_equal(s->name, "tok");
	assert_int_equal(s->version, 7);
	assert_int_equal(s->created, 1700000000);
	assert_int_equal(s->nhosts, 1);
	assert_string_equal(s->hosts[0], "api.example");
	assert_int_equal(s->value_len, 11);
	assert_memory_equal(s->value, "s3cr3t/+=&?", 11);
	assert_int_equal(strlen(s->fp), SECRET_FP_HEX);
	assert_int_equal(strlen(s->keyid), 2 * SEALED_KEYID_LEN);
	/* The forms to redact: the value itself among them, and others. */
	assert_true(s->nforms >= 3);
	for (i = 0; i < s->nforms; i++)
		if (s->forms[i].len == 11 &&
		    memcmp(s->forms[i].p, "s3cr3t/+=&?", 11) == 0)
			raw = 1;
	assert_true(raw);
	secret_unref(s);
}

/* A fingerprint names the value under this gateway's key: equal values,
 * equal prints; another value, another print; never the plain hash. */
static void
t_fingerprint(void **state)
{
	struct fx *f = *state;
	struct secret *a = open_secret(f, "a", 1, "value-one", NULL);
	struct secret *b = open_secret(f, "b", 9, "value-one", "x.example");
	struct secret *c = open_secret(f, "c", 1, "value-two", NULL);
	uint8_t plain[16];
	char hex[33];

	assert_string_equal(a->fp, b->fp);
	assert_string_not_equal(a->fp, c->fp);
	crypto_generichash(plain, sizeof(plain), (const uint8_t *)"value-one",
	    9, NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), plain, sizeof(plain));
	assert_string_not_equal(a->fp, hex);
	secret_unref(a);
	secret_unref(b);
	secret_unref(c);
}

static void
t_open_refusals(void **state)
{
	struct fx *f = *state;
	char why[SECRET_WHY_MAX];
	struct secret *s = NULL;
	size_t len;
	uint8_t *b = blob_of(f, "tok", 1, "value", NULL, &len);

	assert_int_equal(secret_open(f->st, b, len, "other", "api", &s, why),
	    SL_ERR_INVALID);
	assert_non_null(strstr(why, "sealed as 'tok', not 'other'"));
	b[len - 1] ^= 1;
	assert_int_equal(secret_open(f->st, b, len, NULL, "api", &s, why),
	    SL_ERR_INVALID);
	assert_non_null(strstr(why, "does not open"));
	assert_null(s);
	free(b);
}

static void
t_admit(void **state)
{
	struct fx *f = *state;
	struct secret *v1 = open_secret(f, "tok", 1, "one", NULL);
	struct secret *v2 = open_secret(f, "tok", 2, "two", NULL);
	struct secret *v2b = open_secret(f, "tok", 2, "other", NULL);
	struct secret *v2c = open_secret(f, "tok", 2, "two", NULL);
	char why[SECRET_WHY_MAX];

	assert_int_equal(secret_admit(NULL, v1, why), 0);
	assert_int_equal(secret_admit(v1, v2, why), 0);
	assert_int_equal(secret_admit(v2, v1, why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "version 1 would replace the newer "
	    "version 2"));
	assert_int_equal(secret_admit(v2, v2b, why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "in force with another value"));
	assert_int_equal(secret_admit(v2, v2c, why), SL_ERR_EXISTS);
	secret_unref(v1);
	secret_unref(v2);
	secret_unref(v2b);
	secret_unref(v2c);
}

static void
t_bound(void **state)
{
	struct fx *f = *state;
	struct secret *any = open_secret(f, "a", 1, "v", NULL);
	struct secret *one = open_secret(f, "b", 1, "v", "api.example");
	struct secret *wild = open_secret(f, "c", 1, "v", "*.example");

	assert_true(secret_bound(any, "whatever.test"));
	assert_true(secret_bound(one, "api.example"));
	assert_false(secret_bound(one, "www.api.example"));
	assert_false(secret_bound(one, "example"));
	assert_true(secret_bound(wild, "api.example"));
	assert_true(secret_bound(wild, "a.b.example"));
	assert_false(secret_bound(wild, "example"));
	assert_false(secret_bound(wild, "badexample"));
	secret_unref(any);
	secret_unref(one);
	secret_unref(wild);
}

static void
t_sets(void **state)
{
	struct fx *f = *state;
	struct secret *b = open_secret(f, "bbb", 1, "1", NULL);
	struct secret *a = open_secret(f, "aaa", 1, "2", NULL);
	struct secret *b2 = open_secret(f, "bbb", 2, "3", NULL);
	struct secret_set *s1 = NULL, *s2 = NULL, *s3 = NULL, *s4 = NULL;

	assert_null(secret_set_find(NULL, "aaa", 3));
	assert_int_equal(secret_set_with(NULL, b, &s1), 0);
	assert_int_equal(secret_set_with(s1, a, &s2), 0);
	assert_int_equal(s2->n, 2);
	assert_string_equal(s2->v[0]->name, "aaa");	/* sorted */
	assert_ptr_equal(secret_set_find(s2, "bbb", 3), b);
	assert_null(secret_set_find(s2, "bb", 2));
	assert_null(secret_set_find(s2, "bbbb", 4));
	assert_ptr_equal(secret_set_find(s2, "aaa-and-more", 3), a);
	assert_int_equal(secret_set_with(s2, b2, &s3), 0);	/* replaces */
	assert_int_equal(s3->n, 2);
	assert_ptr_equal(secret_set_find(s3, "bbb", 3), b2);
	assert_ptr_equal(secret_set_find(s2, "bbb", 3), b);	/* unchanged */
	assert_int_equal(secret_set_without(s3, "aaa", &s4), 0);
	assert_int_equal(s4->n, 1);
	assert_int_equal(secret_set_without(s4, "aaa", &s1), SL_ERR_NOT_FOUND);
	secret_unref(a);
	secret_unref(b);
	secret_unref(b2);
	secret_set_unref(s1);
	secret_set_unref(s2);
	secret_set_unref(s3);
	secret_set_unref(s4);
}

/* The folder: NAME.sealed files; refused ones keep the version in force;
 * a gone file drops its secret; changes are listed. */
static void
t_load_folder(void **state)
{
	struct fx *f = *state;
	struct errlist errs = ERRLIST_INIT;
	struct secret_set *s1 = NULL, *s2 = NULL;
	struct secret_change *ch = NULL;
	size_t nch = 0, len;
	char path[256];
	uint8_t *b;

	b = blob_of(f, "tok", 2, "two", NULL, &len);
	write_file(f->secdir, "tok.sealed", b, len);
	free(b);
	b = blob_of(f, "key", 1, "k", NULL, &len);
	write_file(f->secdir, "key.sealed", b, len);
	write_file(f->secdir, ".key.sealed.tmp", b, len);	/* ignored */
	write_file(f->secdir, "notes.txt", b, len);		/* ignored */
	free(b);
	b = blob_of(f, "tok", 1, "one", NULL, &len);
	write_file(f->secdir, "wrong.sealed", b, len);	/* another name */
	free(b);
	assert_int_equal(secret_store_load(f->st, NULL, &s1, &ch, &nch, &errs),
	    0);
	assert_int_equal(s1->n, 2);
	assert_int_equal(nch, 2);
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msgs[0], "wrong.sealed: refused: it is "
	    "sealed as 'tok', not 'wrong'"));
	errlist_free(&errs);
	free(ch);
	ch = NULL;

	/* A downgrade is refused and v2 stays; key.sealed goes away. */
	b = blob_of(f, "tok", 1, "one", NULL, &len);
	write_file(f->secdir, "tok.sealed", b, len);
	free(b);
	snprintf(path, sizeof(path), "%s/key.sealed", f->secdir);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/wrong.sealed", f->secdir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(secret_store_load(f->st, s1, &s2, &ch, &nch, &errs),
	    0);
	assert_int_equal(s2->n, 1);
	assert_ptr_equal(secret_set_find(s2, "tok", 3),
	    secret_set_find(s1, "tok", 3));	/* the same object */
	assert_int_equal(nch, 1);
	assert_null(ch[0].new);
	assert_string_equal(ch[0].old->name, "key");
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msgs[0], "version 1 would replace"));
	errlist_free(&errs);
	free(ch);
	secret_set_unref(s1);
	secret_set_unref(s2);
}

/* ---- templates ------------------------------------------------------ */

static struct intercept_rule *
rule_of(const char *const *set, size_t nset, const char *const *rm,
    size_t nrm)
{
	struct intercept_rule *r = calloc(1, sizeof(*r));
	size_t i;

	assert_non_null(r);
	r->action = ICPT_INJECT;
	r->inject_set = calloc(nset + 1, sizeof(*r->inject_set));
	r->inject_remove = calloc(nrm + 1, sizeof(char *));
	for (i = 0; i < nset; i++) {
		r->inject_set[i].name = (char *)set[2 * i];
		r->inject_set[i].value = (char *)set[2 * i + 1];
	}
	r->ninject_set = nset;
	for (i = 0; i < nrm; i++)
		r->inject_remove[i] = (char *)rm[i];
	r->ninject_remove = nrm;
	return r;
}

static void
rule_free(struct intercept_rule *r)
{
	free(r->inject_set);
	free(r->inject_remove);
	free(r);
}

static struct secret_set *
set_of(struct fx *f, struct secret **out_tok)
{
	struct secret *tok = open_secret(f, "tok", 1, "T0K/+=", "api.example");
	struct secret *basic = open_secret(f, "basic", 1, "user:pass", NULL);
	struct secret *far = open_secret(f, "far", 1, "F", "other.example");
	struct secret_set *s1 = NULL, *s2 = NULL, *s3 = NULL;

	assert_int_equal(secret_set_with(NULL, tok, &s1), 0);
	assert_int_equal(secret_set_with(s1, basic, &s2), 0);
	assert_int_equal(secret_set_with(s2, far, &s3), 0);
	secret_set_unref(s1);
	secret_set_unref(s2);
	secret_unref(basic);
	secret_unref(far);
	*out_tok = tok;		/* the caller's reference */
	return s3;
}

/* inject_render with the secrets of ss and no token. */
static enum inject_result
render_in(const struct intercept_rule *r, const struct secret_set *ss,
    const char *host, char *buf, size_t len, size_t *used, struct inject *inj)
{
	struct inject_src src = { ss, host, NULL, 0 };

	return inject_render(r, &src, buf, len, used, inj);
}

static void
t_render(void **state)
{
	static const char *const set[] = {
		"authorization", "Bearer {{secret:tok}}",
		"x-basic", "Basic {{ secret:basic | base64 }}!",
		"x-two", "{{secret:tok}}-{{secret:tok|base64}}-{{secret:basic}}",
		"x-plain", "no placeholder",
	};
	static const char *const rm[] = { "cookie" };
	struct intercept_rule *r = rule_of(set, 4, rm, 1);
	struct secret *tok;
	struct secret_set *ss = set_of(*state, &tok);
	struct inject inj;
	char buf[1024];
	size_t used = 0;

	assert_int_equal(render_in(r, ss, "api.example", buf, sizeof(buf),
	    &used, &inj), INJECT_OK);
	assert_int_equal(inj.nadd, 5);
	assert_string_equal(inj.add[0].name, "authorization");
	assert_string_equal(inj.add[0].value, "Bearer T0K/+=");
	assert_string_equal(inj.add[1].value, "Basic dXNlcjpwYXNz!");
	assert_string_equal(inj.add[2].value, "T0K/+=-VDBLLys9-user:pass");
	assert_string_equal(inj.add[3].value, "no placeholder");
	assert_string_equal(inj.add[4].name, "accept-encoding");
	assert_string_equal(inj.add[4].value, "identity");
	assert_int_equal(inj.ndrop, 3);
	assert_string_equal(inj.drop[0], "cookie");
	assert_string_equal(inj.drop[1], "range");
	assert_string_equal(inj.drop[2], "if-range");
	assert_int_equal(inj.nused, 2);		/* tok and basic, once each */
	assert_true(used > 0 && used <= sizeof(buf));
	assert_int_equal(atomic_load(&tok->refs), 3);	/* ours, set's, inj's */
	inject_release(&inj);
	assert_int_equal(atomic_load(&tok->refs), 2);
	secret_unref(tok);
	secret_set_unref(ss);
	rule_free(r);
}

/* {{token:NAME}}: the minted value given, as it is or base64'd. */
static void
t_render_tokens(void **state)
{
	static const char *const set[] = {
		"authorization", "Bearer {{token:svc}}",
		"x-both", "{{ token:svc | base64 }}.{{secret:tok}}",
	};
	static const char *const other[] = { "x", "{{token:nope}}" };
	struct intercept_rule *r = rule_of(set, 2, NULL, 0);
	struct intercept_rule *r2 = rule_of(other, 1, NULL, 0);
	struct secret *tok;
	struct secret_set *ss = set_of(*state, &tok);
	struct inject_token tk = { "svc", "mint/ed+1", 9 };
	struct inject_src src = { ss, "api.example", &tk, 1 };
	struct inject inj;
	char buf[512];
	size_t used = 0;

	assert_int_equal(inject_render(r, &src, buf, sizeof(buf), &used, &inj),
	    INJECT_OK);
	assert_int_equal(inj.nadd, 3);
	assert_string_equal(inj.add[0].value, "Bearer mint/ed+1");
	assert_string_equal(inj.add[1].value, "bWludC9lZCsx.T0K/+=");
	assert_int_equal(inj.nused, 1);		/* tok; a token is no secret of the set */
	inject_release(&inj);
	/* A source whose token was not given renders nothing. */
	assert_int_equal(inject_render(r2, &src, buf, sizeof(buf), &used,
	    &inj), INJECT_NO_TOKEN);
	assert_string_equal(inj.secret, "nope");
	assert_int_equal(inj.nused, 0);
	src.ntokens = 0;
	assert_int_equal(inject_render(r, &src, buf, sizeof(buf), &used, &inj),
	    INJECT_NO_TOKEN);
	assert_int_equal(atomic_load(&tok->refs), 2);
	secret_unref(tok);
	secret_set_unref(ss);
	rule_free(r);
	rule_free(r2);
}

static void
t_render_refusals(void **state)
{
	static const char *const missing[] = { "x", "a{{secret:nope}}" };
	static const char *const unbound[] = { "x", "{{secret:tok}}",
	    "y", "{{secret:far}}" };
	static const char *const ae[] = { "accept-encoding", "br" };
	static const char *const longv[] = { "x", "0123456789{{secret:tok}}" };
	struct intercept_rule *r1 = rule_of(missing, 1, NULL, 0);
	struct intercept_rule *r4 = rule_of(longv, 1, NULL, 0);
	struct intercept_rule *r2 = rule_of(unbound, 2, NULL, 0);
	struct intercept_rule *r3 = rule_of(ae, 1, NULL, 0);
	struct secret *tok;
	struct secret_set *ss = set_of(*state, &tok);
	struct inject inj;
	char buf[64];
	size_t used = 0;

	assert_int_equal(render_in(r1, ss, "api.example", buf, sizeof(buf),
	    &used, &inj), INJECT_UNAVAILABLE);
	assert_string_equal(inj.secret, "nope");
	assert_int_equal(inj.nused, 0);
	assert_int_equal(render_in(r1, NULL, "api.example", buf,
	    sizeof(buf), &used, &inj), INJECT_UNAVAILABLE);
	/* tok is bound here, far is not: nothing at all, no reference kept. */
	assert_int_equal(render_in(r2, ss, "api.example", buf, sizeof(buf),
	    &used, &inj), INJECT_UNBOUND);
	assert_string_equal(inj.secret, "far");
	assert_int_equal(inj.nused, 0);
	assert_int_equal(atomic_load(&tok->refs), 2);
	assert_int_equal(used, sizeof(buf));	/* wipe it all */
	assert_int_equal(render_in(r2, ss, "www.api.example", buf,
	    sizeof(buf), &used, &inj), INJECT_UNBOUND);
	assert_string_equal(inj.secret, "tok");
	/* Too long for the buffer. */
	assert_int_equal(render_in(r4, ss, "api.example", buf, 12, &used,
	    &inj), INJECT_TOO_BIG);
	assert_int_equal(inj.nused, 0);
	assert_int_equal(atomic_load(&tok->refs), 2);
	/* A rule that sets Accept-Encoding keeps its own. */
	assert_int_equal(render_in(r3, ss, "api.example", buf, sizeof(buf),
	    &used, &inj), INJECT_OK);
	assert_int_equal(inj.nadd, 1);
	assert_string_equal(inj.add[0].value, "br");
	inject_release(&inj);
	secret_unref(tok);
	secret_set_unref(ss);
	rule_free(r1);
	rule_free(r2);
	rule_free(r3);
	rule_free(r4);
}

/* A sealed blob of a document of kind k. */
static uint8_t *
doc_blob(struct fx *f, const char *name, uint64_t version,
    enum sealed_kind k, const char *value, size_t *len)
{
	const char *why = NULL;
	struct sealed_in in = { name, version, 1700000000, NULL, 0,
	    (const uint8_t *)value, strlen(value), k };
	uint8_t *blob = NULL;

	if (sealed_seal(f->pk, &in, &blob, len, &why) != 0)
		fail_msg("cannot seal: %s", why);
	return blob;
}

static void
t_kinds(void **state)
{
	static const char *const hdr[] = { "authorization",
	    "Bearer {{secret:doc}}" };
	static const char *const other[] = { "authorization",
	    "Bearer {{secret:tok}}" };
	struct fx *f = *state;
	struct intercept_rule *r = rule_of(hdr, 1, NULL, 0);
	struct intercept_rule *r2 = rule_of(other, 1, NULL, 0);
	struct secret *doc = NULL, *hd, *doc2 = NULL;
	struct secret_set *ss = NULL, *ss2 = NULL;
	struct inject inj;
	char why[SECRET_WHY_MAX], buf[256];
	size_t len, used = 0;
	uint8_t *b;

	b = doc_blob(f, "doc", 3, SEALED_KIND_JSON,
	    "{\"access_key_id\": \"AK\",\n \"secret_access_key\": \"SK\"}", &len);
	assert_int_equal(secret_open(f->st, b, len, NULL, "file", &doc, why), 0);
	free(b);
	assert_int_equal(doc->kind, SEALED_KIND_JSON);
	assert_int_equal(doc->nforms, 0);	/* a document is never sent */
	assert_int_equal(strlen(doc->fp), SECRET_FP_HEX);

	/* Rendering it into a header is refused; the rule is named at load. */
	assert_int_equal(secret_set_with(NULL, doc, &ss), 0);
	assert_int_equal(render_in(r, ss, "api.example", buf, sizeof(buf),
	    &used, &inj), INJECT_WRONG_KIND);
	assert_string_equal(inj.secret, "doc");
	assert_int_equal(inj.nused, 0);
	assert_ptr_equal(inject_wrong_kind(r, ss), doc);
	assert_null(inject_wrong_kind(r2, ss));	/* tok is not in ss */
	assert_null(inject_wrong_kind(r, NULL));

	/* A name keeps its kind: a header version of doc is refused. */
	hd = open_secret(f, "doc", 4, "plain", NULL);
	assert_int_equal(secret_admit(doc, hd, why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "remove the secret first"));
	assert_int_equal(secret_admit(hd, doc, why), SL_ERR_INVALID);
	assert_int_equal(secret_admit(NULL, hd, why), 0);
	b = doc_blob(f, "doc", 5, SEALED_KIND_JSON, "{\"a\": \"b\"}", &len);
	assert_int_equal(secret_open(f->st, b, len, NULL, "file", &doc2, why),
	    0);
	free(b);
	assert_int_equal(secret_admit(doc, doc2, why), 0);
	assert_int_equal(secret_set_with(ss, hd, &ss2), 0);
	assert_null(inject_wrong_kind(r, ss2));

	/* The remedy is named when a version goes back. */
	assert_int_equal(secret_admit(doc2, doc, why), SL_ERR_INVALID);
	assert_non_null(strstr(why, "without --secret-version"));

	secret_set_unref(ss2);
	secret_set_unref(ss);
	secret_unref(doc2);
	secret_unref(hd);
	secret_unref(doc);
	rule_free(r);
	rule_free(r2);
}

/* A pem value must hold a key, whoever seals it. */
static void
t_kind_refused(void **state)
{
	static const char notkey[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n"
	    "-----END PRIVATE KEY-----\n";
	struct fx *f = *state;
	struct sealed_in in = { "k", 1, 1, NULL, 0, (const uint8_t *)notkey,
	    sizeof(notkey) - 1, SEALED_KIND_PEM };
	const char *w = NULL;
	uint8_t *b = NULL;
	size_t len;

	assert_int_equal(sealed_seal(f->pk, &in, &b, &len, &w),
	    SL_ERR_INVALID);
	assert_null(b);
	assert_non_null(strstr(w, "private key"));
	assert_int_equal(sealed_kind_check(SEALED_KIND_PEM, in.value,
	    in.value_len, &w), SL_ERR_INVALID);
	assert_int_equal(sealed_kind_check(SEALED_KIND_JSON,
	    (const uint8_t *)"{}", 2, &w), 0);
	assert_int_equal(sealed_kind_check(SEALED_KIND_HEADER,
	    (const uint8_t *)"x", 1, &w), 0);
}

/* Placeholders: stable, apart per sandbox and secret, found and swapped. */
static void
t_placeholders(void **state)
{
	struct fx *f = *state;
	struct secret *tok = open_secret(f, "tok", 1, "v/+&", NULL);
	struct secret *two = open_secret(f, "two", 1, "second", NULL);
	struct secret_set *s1 = NULL, *set = NULL;
	const struct secret *which = NULL;
	char a[PH_LEN + 1], b[PH_LEN + 1], c[PH_LEN + 1], d[PH_LEN + 1];
	char text[256], out[256];
	struct ph_swap sw[1];
	size_t count = 0;
	long n;

	assert_int_equal(secret_set_with(NULL, tok, &s1), 0);
	assert_int_equal(secret_set_with(s1, two, &set), 0);
	placeholder_of(f->st, "sb1", "tok", a);
	placeholder_of(f->st, "sb1", "tok", b);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), PH_LEN);
	assert_memory_equal(a, PH_PREFIX, PH_PREFIX_LEN);
	placeholder_of(f->st, "sb2", "tok", c);
	assert_string_not_equal(a, c);
	placeholder_of(f->st, "sb1", "two", d);
	assert_string_not_equal(a, d);
	/* ("sb", "1tok") is not ("sb1", "tok") */
	placeholder_of(f->st, "sb", "1tok", b);
	assert_string_not_equal(a, b);

	snprintf(text, sizeof(text), "Bearer %s and %s", a, c);
	assert_ptr_equal(placeholder_find(f->st, set, "sb1", text,
	    strlen(text), &which), text + 7);
	assert_ptr_equal(which, tok);
	/* sb2's is found for sb2 only */
	assert_ptr_equal(placeholder_find(f->st, set, "sb2", text,
	    strlen(text), &which), text + 7 + PH_LEN + 5);
	assert_null(placeholder_find(f->st, set, "sb3", text, strlen(text),
	    &which));
	/* cut short: not found */
	assert_null(placeholder_find(f->st, set, "sb1", text, 7 + PH_LEN - 1,
	    &which));
	assert_null(placeholder_owner(f->st, NULL, "sb1", a));

	sw[0].s = tok;
	memcpy(sw[0].ph, a, sizeof(a));
	snprintf(text, sizeof(text), "x%sy%s", a, c);
	n = placeholder_swap(text, strlen(text), sw, 1, 0, out, sizeof(out),
	    &count);
	assert_int_equal(count, 1);
	assert_int_equal(n, 1 + 4 + 1 + PH_LEN);
	assert_memory_equal(out, "xv/+&y", 6);
	assert_memory_equal(out + 6, c, PH_LEN);	/* another's stays */
	count = 0;
	n = placeholder_swap(text, strlen(text), sw, 1, 1, out, sizeof(out),
	    &count);
	assert_memory_equal(out, "xv%2F%2B%26y", 12);
	/* no room: -1 */
	assert_int_equal(placeholder_swap(text, strlen(text), sw, 1, 1, out, 8,
	    &count), -1);
	sodium_memzero(out, sizeof(out));
	secret_set_unref(set);
	secret_set_unref(s1);
	secret_unref(tok);
	secret_unref(two);
}

/* skip: headers named x-skip go, whatever they hold */
static int
skip_x(void *arg, const char *name, size_t len)
{
	(void)arg;
	return len == 6 && strncasecmp(name, "x-skip", 6) == 0;
}

/* A head's placeholders: target, values, Basic credentials; skip honoured. */
static void
t_placeholder_head(void **state)
{
	struct fx *f = *state;
	struct secret *tok = open_secret(f, "tok", 1, "v", NULL);
	struct secret_set *set = NULL;
	struct http_reqs *r;
	const struct http_head *h;
	const char *where, *why;
	char ph[PH_LEN + 1], req[1024], buf[512], cred[128], b64[256];
	size_t used;
	struct {
		const char	*pre, *post;	/* the placeholder between */
		int		 basic;
		const char	*where;	/* NULL: none found */
	} cases[] = {
		{ "GET /a?k=", " HTTP/1.1\r\nHost: h\r\n\r\n", 0, "target" },
		{ "GET /a HTTP/1.1\r\nHost: h\r\nX-Key: a ", " b\r\n\r\n", 0,
		    "header" },
		{ "GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Basic ",
		    "\r\n\r\n", 1, "header" },
		{ "GET /a HTTP/1.1\r\nHost: h\r\nX-Skip: ", "\r\n\r\n", 0, NULL },
		{ "GET /a HTTP/1.1\r\nHost: h\r\nX-Key: ", "\r\n\r\n", 2, NULL },
	};
	size_t i;

	assert_int_equal(secret_set_with(NULL, tok, &set), 0);
	placeholder_of(f->st, "sb1", "tok", ph);
	snprintf(cred, sizeof(cred), "agent:%s", ph);
	sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)cred,
	    strlen(cred), sodium_base64_VARIANT_ORIGINAL);
	assert_non_null(r = http_reqs_new(8192));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* 2: another sandbox's placeholder is only text */
		snprintf(req, sizeof(req), "%s%s%s", cases[i].pre,
		    cases[i].basic == 1 ? b64 : cases[i].basic == 2 ?
		    "sluice-ph-0123456789abcdef0123456789abcdef" : ph,
		    cases[i].post);
		http_reqs_reset(r, 8192);
		h = NULL;
		assert_int_equal(http_reqs_feed(r, (const uint8_t *)req,
		    strlen(req), &used, &h, &why), HTTP_EV_HEAD);
		if (cases[i].where == NULL) {
			assert_null(placeholder_in_head(f->st, set, "sb1", h,
			    NULL, skip_x, NULL, buf, sizeof(buf), &where));
			continue;
		}
		assert_ptr_equal(placeholder_in_head(f->st, set, "sb1", h, NULL,
		    skip_x, NULL, buf, sizeof(buf), &where), tok);
		assert_string_equal(where, cases[i].where);
		/* sb2 has another placeholder */
		assert_null(placeholder_in_head(f->st, set, "sb2", h, NULL,
		    skip_x, NULL, buf, sizeof(buf), &where));
	}
	/* The target given is read instead of h's: a swapped query is clean. */
	snprintf(req, sizeof(req), "%s%s%s", cases[0].pre, ph, cases[0].post);
	http_reqs_reset(r, 8192);
	assert_int_equal(http_reqs_feed(r, (const uint8_t *)req, strlen(req),
	    &used, &h, &why), HTTP_EV_HEAD);
	assert_null(placeholder_in_head(f->st, set, "sb1", h, "/a?k=v", NULL,
	    NULL, buf, sizeof(buf), &where));
	http_reqs_free(r);
	secret_set_unref(set);
	secret_unref(tok);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_open_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(t_fingerprint, setup, teardown),
		cmocka_unit_test_setup_teardown(t_open_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(t_admit, setup, teardown),
		cmocka_unit_test_setup_teardown(t_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(t_sets, setup, teardown),
		cmocka_unit_test_setup_teardown(t_load_folder, setup, teardown),
		cmocka_unit_test_setup_teardown(t_render, setup, teardown),
		cmocka_unit_test_setup_teardown(t_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(t_placeholders, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_placeholder_head, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_kind_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_render_tokens,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_render_refusals, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
