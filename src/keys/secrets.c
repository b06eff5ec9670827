/*
 * secrets.c: opened secrets, their immutable sets, and the store that
 * opens sealed files and blobs with the gateway keys.
 *
 * A secret's value and its redaction forms share one sodium_malloc
 * region: guard pages around it, locked, read-only once filled, wiped
 * and unmapped with the last reference.  Workers only read it, so it is
 * not toggled to no-access between uses: that would take a system call
 * per request and a reader count shared by every thread.
 */
#include "autoconf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "util/fsvc.h"
#include "util/keyfile.h"
#include "util/names.h"
#include "util/redact.h"
#include "conf/config.h"
#include "keys/pemkey.h"
#include "keys/sealed.h"
#include "keys/kclient.h"
#include "keys/secrets.h"
#include "keys/sigv4.h"

#define FP_CONTEXT	"sluice secret fingerprint v1"
#define PH_CONTEXT	"sluice placeholder key v1"

/* ---- secrets -------------------------------------------------------- */

struct secret *
secret_ref(struct secret *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void
secret_unref(struct secret *s)
{
	if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	sodium_free(s->mem);		/* wipes it */
	pemkey_free(s->pem);
	aws_creds_free(s->aws);
	sodium_free(s->formmem);
	free(s->hosts);
	free(s);
}

int
secret_bound(const struct secret *s, const char *host)
{
	return sealed_hosts_match((const char (*)[NAME_BUFSZ + 2])s->hosts,
	    s->nhosts, host);
}

/*
 * An AWS session token is sent upstream: its forms are what the answer
 * is redacted for.  The key id is not secret, the secret key never sent.
 */
static int
token_forms(struct secret *s)
{
	size_t flen;
	int n;

	if (s->aws->token == NULL ||
	    (flen = redact_forms_size(s->aws->token_len)) == 0)
		return 0;
	if ((s->formmem = secmem_alloc(flen)) == NULL)
		return SL_ERR_NOMEM;
	n = redact_forms((const uint8_t *)s->aws->token, s->aws->token_len,
	    s->formmem, flen, s->forms, REDACT_MAX_FORMS);
	if (n < 1)
		return SL_ERR_INVALID;
	s->nforms = (size_t)n;
	s->forms_key = redact_serial();
	sodium_mprotect_readonly(s->formmem);
	return 0;
}

/* Fills s from an opened sealed secret: guarded memory, forms, fingerprint. */
static int
secret_fill(struct secret *s, const struct sealed_secret *o,
    const uint8_t *fpkey)
{
	uint8_t fp[SECRET_FP_HEX / 2];
	const char *w;
	size_t flen = 0, i;
	int n;

	/* A document is never sent as it is: only header values have forms. */
	if (o->kind == SEALED_KIND_HEADER &&
	    (flen = redact_forms_size(o->value_len)) == 0)
		return SL_ERR_INVALID;
	if ((s->mem = secmem_alloc(o->value_len + 1 + flen)) == NULL)
		return SL_ERR_NOMEM;
	memcpy(s->mem, o->value, o->value_len);
	s->mem[o->value_len] = '\0';
	s->value = s->mem;
	s->value_len = o->value_len;
	s->kind = o->kind;
	if (o->kind == SEALED_KIND_HEADER) {
		n = redact_forms(s->value, s->value_len,
		    s->mem + o->value_len + 1, flen, s->forms,
		    REDACT_MAX_FORMS);
		if (n < 1)
			return SL_ERR_INVALID;
		s->nforms = (size_t)n;
		s->forms_key = redact_serial();
	}
	sodium_mprotect_readonly(s->mem);
	if (o->kind == SEALED_KIND_PEM &&
	    pemkey_parse(s->value, s->value_len, &s->pem, &w) != 0)
		return SL_ERR_INVALID;
	if (o->kind == SEALED_KIND_JSON &&
	    aws_creds_parse(s->value, s->value_len, &s->aws, &w) == 0 &&
	    (n = token_forms(s)) != 0)
		return n;
	crypto_generichash(fp, sizeof(fp), s->value, s->value_len, fpkey,
	    crypto_generichash_KEYBYTES);
	sodium_bin2hex(s->fp, sizeof(s->fp), fp, sizeof(fp));
	sodium_bin2hex(s->keyid, sizeof(s->keyid), o->keyid, sizeof(o->keyid));
	snprintf(s->name, sizeof(s->name), "%s", o->name);
	s->version = o->version;
	s->created = o->created;
	if (o->nhosts > 0) {
		if ((s->hosts = calloc(o->nhosts, sizeof(*s->hosts))) == NULL)
			return SL_ERR_NOMEM;
		for (i = 0; i < o->nhosts; i++)
			memcpy(s->hosts[i], o->hosts[i], sizeof(s->hosts[i]));
		s->nhosts = o->nhosts;
	}
	return 0;
}

int
secret_open(const struct secret_store *st, const uint8_t *blob, size_t len,
    const char *expect, const char *source, struct secret **out,
    char why[SECRET_WHY_MAX])
{
	struct sealed_secret *o = NULL;
	struct secret *s = NULL;
	char wbuf[128], kwhy[KPROTO_WHY_MAX];
	const char *w = NULL;
	int r;

	if (kclient_remote()) {
		/* Opened by the keys process, which holds the gateway keys. */
		if ((r = kclient_sealed_open(blob, len, &o, kwhy)) != 0) {
			snprintf(why, SECRET_WHY_MAX, "%s", kwhy);
			return r == SL_ERR_NOMEM ? r : SL_ERR_INVALID;
		}
	} else if (sealed_open(st->keys, st->nkeys, blob, len, &o, wbuf,
	    &w) != 0) {
		snprintf(why, SECRET_WHY_MAX, "%s", w ? w : "does not open");
		return SL_ERR_INVALID;
	}
	if (expect != NULL && strcmp(o->name, expect) != 0) {
		snprintf(why, SECRET_WHY_MAX, "it is sealed as '%s', not '%s'",
		    o->name, expect);
		r = SL_ERR_INVALID;
		goto out;
	}
	if (sealed_kind_check(o->kind, o->value, o->value_len, &w) != 0) {
		snprintf(why, SECRET_WHY_MAX, "%s", w);
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		r = SL_ERR_NOMEM;
		goto nomem;
	}
	atomic_init(&s->refs, 1);
	s->source = source;
	s->loaded = time(NULL);
	if ((r = secret_fill(s, o, st->fpkey)) != 0)
		goto nomem;
	*out = s;
	s = NULL;	/* transferred */
	r = 0;
	goto out;
 nomem:
	snprintf(why, SECRET_WHY_MAX, "%s", err_str(r));
 out:
	secret_unref(s);
	sealed_secret_free(o);
	return r;
}

static int
same_hosts(const struct secret *a, const struct secret *b)
{
	size_t i;

	if (a->nhosts != b->nhosts)
		return 0;
	for (i = 0; i < a->nhosts; i++)
		if (strcmp(a->hosts[i], b->hosts[i]) != 0)
			return 0;
	return 1;
}

int
secret_admit(const struct secret *cur, const struct secret *s,
    char why[SECRET_WHY_MAX])
{
	/* What a name is for stays: a policy may rely on it. */
	if (cur != NULL && s->kind != cur->kind) {
		snprintf(why, SECRET_WHY_MAX, "it is a %s secret and version "
		    "%llu in force is a %s secret; remove the secret first to "
		    "change its kind", sealed_kind_name(s->kind),
		    (unsigned long long)cur->version,
		    sealed_kind_name(cur->kind));
		return SL_ERR_INVALID;
	}
	if (cur == NULL || s->version > cur->version)
		return 0;
	if (s->version == cur->version && strcmp(s->fp, cur->fp) == 0 &&
	    same_hosts(s, cur))
		return SL_ERR_EXISTS;
	if (s->version == cur->version && strcmp(s->fp, cur->fp) == 0) {
		snprintf(why, SECRET_WHY_MAX, "version %llu is in force bound to "
		    "other hosts; seal the change with a higher version",
		    (unsigned long long)cur->version);
		return SL_ERR_INVALID;
	}
	if (s->version == cur->version)
		snprintf(why, SECRET_WHY_MAX, "version %llu is in force with "
		    "another value; seal again without --secret-version, or "
		    "with a higher one",
		    (unsigned long long)cur->version);
	else
		snprintf(why, SECRET_WHY_MAX, "version %llu would replace the "
		    "newer version %llu in force; seal again without "
		    "--secret-version, or with a higher one",
		    (unsigned long long)s->version,
		    (unsigned long long)cur->version);
	return SL_ERR_INVALID;
}

/* ---- sets ----------------------------------------------------------- */

struct secret_set *
secret_set_ref(struct secret_set *set)
{
	if (set != NULL)
		atomic_fetch_add(&set->refs, 1);
	return set;
}

void
secret_set_unref(struct secret_set *set)
{
	size_t i;

	if (set == NULL || atomic_fetch_sub(&set->refs, 1) != 1)
		return;
	for (i = 0; i < set->n; i++)
		secret_unref(set->v[i]);
	free(set->v);
	free(set);
}

const struct secret *
secret_set_find(const struct secret_set *set, const char *name, size_t len)
{
	size_t lo = 0, hi = set != NULL ? set->n : 0, mid;
	int c;

	if (len > SEALED_NAME_MAX)
		return NULL;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((c = strncmp(set->v[mid]->name, name, len)) == 0 &&
		    set->v[mid]->name[len] != '\0')
			c = 1;
		if (c == 0)
			return set->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* A new set of n slots (filled by the caller, which takes the references). */
static struct secret_set *
set_alloc(size_t n)
{
	struct secret_set *set;

	if ((set = calloc(1, sizeof(*set))) == NULL)
		return NULL;
	if (n > 0 && (set->v = calloc(n, sizeof(*set->v))) == NULL) {
		free(set);
		return NULL;
	}
	atomic_init(&set->refs, 1);
	set->n = n;
	return set;
}

int
secret_set_with(const struct secret_set *set, struct secret *s,
    struct secret_set **out)
{
	size_t n = set != NULL ? set->n : 0, i, j = 0;
	int placed = 0, c;
	struct secret_set *ns;

	if ((ns = set_alloc(n + 1)) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		c = strcmp(set->v[i]->name, s->name);
		if (!placed && c >= 0) {
			ns->v[j++] = secret_ref(s);
			placed = 1;
			if (c == 0)
				continue;	/* replaced */
		}
		ns->v[j++] = secret_ref(set->v[i]);
	}
	if (!placed)
		ns->v[j++] = secret_ref(s);
	ns->n = j;
	*out = ns;
	return 0;
}

int
secret_set_without(const struct secret_set *set, const char *name,
    struct secret_set **out)
{
	struct secret_set *ns;
	size_t i, j = 0;

	if (secret_set_find(set, name, strlen(name)) == NULL)
		return SL_ERR_NOT_FOUND;
	if ((ns = set_alloc(set->n - 1)) == NULL)
		return SL_ERR_NOMEM;
	for (i = 0; i < set->n; i++)
		if (strcmp(set->v[i]->name, name) != 0)
			ns->v[j++] = secret_ref(set->v[i]);
	*out = ns;
	return 0;
}

/* ---- the store ------------------------------------------------------ */

void
secret_store_free(struct secret_store *st)
{
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < st->nkeys; i++)
		gwkey_free(st->keys[i]);
	free(st->keys);
	sodium_free(st->fpkey);
	sodium_free(st->phkey);
	free(st->dir);
	free(st);
}

/*
 * The fingerprint key, derived from the first gateway key: fingerprints
 * stay comparable across restarts and reloads while that key stays first,
 * and reveal nothing to whoever lacks it.
 */
static int
derive_key(struct secret_store *st, const char *context, uint8_t **out)
{
	struct gwkey *k = st->keys[0];
	int r;

	if ((*out = sodium_malloc(crypto_generichash_KEYBYTES)) == NULL)
		return SL_ERR_NOMEM;
	sodium_mprotect_readonly(k->sk);
	r = crypto_generichash(*out, crypto_generichash_KEYBYTES,
	    (const uint8_t *)context, strlen(context), k->sk, 32);
	sodium_mprotect_noaccess(k->sk);
	if (r != 0)
		return SL_ERR_INTERNAL;
	sodium_mprotect_readonly(*out);
	return 0;
}

/* The fingerprint key, and the placeholders' (the same way, apart). */
static int
derive_fpkey(struct secret_store *st)
{
	int r;

	if ((r = derive_key(st, FP_CONTEXT, &st->fpkey)) != 0)
		return r;
	return derive_key(st, PH_CONTEXT, &st->phkey);
}

/*
 * A worker process's store: no gateway key, only the keys derived from
 * the first one, which the keys process gives.
 */
static int
remote_keys(struct secret_store *st, const struct config *cfg,
    struct errlist *errs)
{
	char why[KPROTO_WHY_MAX];
	int r;

	if ((st->fpkey = sodium_malloc(crypto_generichash_KEYBYTES)) == NULL ||
	    (st->phkey = sodium_malloc(crypto_generichash_KEYBYTES)) == NULL)
		return SL_ERR_NOMEM;
	if ((r = kclient_store_keys(st->fpkey, st->phkey, why)) != 0) {
		errlist_add(errs, cfg->path, 0, 0, "the keys process: %s", why);
		return r;
	}
	sodium_mprotect_readonly(st->fpkey);
	sodium_mprotect_readonly(st->phkey);
	return 0;
}

int
secret_store_new(const struct config *cfg, struct secret_store **out,
    struct errlist *errs)
{
	struct secret_store *st = NULL;
	const char *why = NULL;
	size_t i;
	int r = SL_ERR_INVALID;

	if (cfg->ngateway_keys == 0 && cfg->secret_dir == NULL) {
		*out = NULL;
		return 0;
	}
	if (cfg->ngateway_keys == 0 || cfg->secret_dir == NULL) {
		errlist_add(errs, cfg->path, 0, 0, "secrets need both "
		    "'gateway_key' and 'secret_dir'");
		return SL_ERR_INVALID;
	}
	if (sodium_init() < 0 || (st = calloc(1, sizeof(*st))) == NULL ||
	    (st->keys = calloc(cfg->ngateway_keys, sizeof(*st->keys))) == NULL ||
	    (st->dir = strdup(cfg->secret_dir)) == NULL) {
		r = SL_ERR_NOMEM;
		errlist_add(errs, cfg->path, 0, 0, "cannot set up secrets: %s",
		    err_str(r));
		goto out;
	}
	if (kclient_remote()) {
		r = remote_keys(st, cfg, errs);
		goto done;
	}
	for (i = 0; i < cfg->ngateway_keys; i++) {
		if ((r = gwkey_load(cfg->gateway_keys[i], &st->keys[st->nkeys],
		    &why)) != 0) {
			errlist_add(errs, cfg->gateway_keys[i], 0, 0,
			    "gateway key: %s", why ? why : err_str(r));
			continue;
		}
		st->nkeys++;
	}
	if (st->nkeys != cfg->ngateway_keys) {
		r = SL_ERR_INVALID;
		goto out;
	}
	if ((r = derive_fpkey(st)) != 0) {
		errlist_add(errs, cfg->path, 0, 0, "cannot derive the "
		    "fingerprint key: %s", err_str(r));
		goto out;
	}
 done:
	if (r != 0)
		goto out;
	*out = st;
	st = NULL;	/* transferred */
	r = 0;
 out:
	secret_store_free(st);
	return r;
}

int
secret_store_path(const struct secret_store *st, const char *name, char *buf,
    size_t len)
{
	int n = snprintf(buf, len, "%s/%s.sealed", st->dir, name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/*
 * Reads a whole sealed file (at most SEALED_MAX_BLOB bytes) of the
 * folder.  A symbolic link is followed only to a file inside the folder
 * itself: the layout of a Kubernetes Secret volume, where NAME.sealed
 * links to ..data/NAME.sealed and an update swaps ..data.  Errors set
 * errno (ELOOP: a link that leaves the folder).
 */
static int
read_blob(const char *dir, const char *path, uint8_t **out, size_t *outlen)
{
	char *buf;

	/* Through the monitor once the worker is confined (fsvc.h). */
	if (fsvc_read_in(dir, path, SEALED_MAX_BLOB, &buf, outlen) != 0)
		return errno == EFBIG ? SL_ERR_TOO_BIG : errno == ENOMEM ?
		    SL_ERR_NOMEM : SL_ERR_IO;
	*out = (uint8_t *)buf;
	return 0;
}

/* Whether ent is NAME.sealed with a valid name; name gets NAME. */
static int
sealed_file_name(const char *ent, char name[SEALED_NAME_MAX + 1])
{
	size_t n = strlen(ent), i;

	if (n <= 7 || strcmp(ent + n - 7, ".sealed") != 0 || ent[0] == '.')
		return 0;
	n -= 7;
	if (n > SEALED_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((ent[i] >= 'a' && ent[i] <= 'z') ||
		    (ent[i] >= 'A' && ent[i] <= 'Z') ||
		    (ent[i] >= '0' && ent[i] <= '9') || ent[i] == '.' ||
		    ent[i] == '_' || ent[i] == '-'))
			return 0;
	memcpy(name, ent, n);
	name[n] = '\0';
	return 1;
}

/* Appends a change; the list is small (secrets a folder). */
static int
add_change(struct secret_change **v, size_t *n, const struct secret *old,
    const struct secret *new)
{
	struct secret_change *nv;

	if ((nv = realloc(*v, (*n + 1) * sizeof(**v))) == NULL)
		return SL_ERR_NOMEM;
	nv[*n].old = old;
	nv[*n].new = new;
	*v = nv;
	(*n)++;
	return 0;
}

/* Loads one file into *set (replacing its namesake when admitted). */
static int
load_one(const struct secret_store *st, const char *name,
    struct secret_set **set, const struct secret_set *prev,
    struct secret_change **ch, size_t *nch, struct errlist *errs)
{
	char path[4096], why[SECRET_WHY_MAX];
	const struct secret *cur = secret_set_find(prev, name, strlen(name));
	struct secret_set *ns = NULL;
	struct secret *s = NULL;
	uint8_t *blob = NULL;
	size_t len = 0;
	int r;

	if (secret_store_path(st, name, path, sizeof(path)) != 0)
		return 0;
	if ((r = read_blob(st->dir, path, &blob, &len)) != 0) {
		errlist_add(errs, path, 0, 0, "%s", r != SL_ERR_IO ? err_str(r) :
		    errno == ELOOP ? "refused: a symbolic link out of the folder" :
		    strerror(errno));
		goto keep;
	}
	r = secret_open(st, blob, len, name, "file", &s, why);
	free(blob);
	if (r != 0) {
		errlist_add(errs, path, 0, 0, "refused: %s%s", why, cur ?
		    "; the version in force stays" : "");
		goto keep;
	}
	if ((r = secret_admit(cur, s, why)) == SL_ERR_EXISTS) {
		secret_unref(s);
		goto keep;		/* unchanged */
	}
	if (r != 0) {
		errlist_add(errs, path, 0, 0, "refused: %s", why);
		secret_unref(s);
		goto keep;
	}
	if ((r = secret_set_with(*set, s, &ns)) != 0 ||
	    (r = add_change(ch, nch, cur, s)) != 0) {
		secret_set_unref(ns);
		secret_unref(s);
		return r;
	}
	secret_set_unref(*set);
	*set = ns;
	secret_unref(s);	/* the set holds it */
	return 0;
 keep:
	if (cur == NULL)
		return 0;
	if ((r = secret_set_with(*set, (struct secret *)cur, &ns)) != 0)
		return r;
	secret_set_unref(*set);
	*set = ns;
	return 0;
}

int
secret_store_load(const struct secret_store *st, const struct secret_set *prev,
    struct secret_set **out, struct secret_change **changes, size_t *nchanges,
    struct errlist *errs)
{
	struct secret_set *set = NULL;
	struct secret_change *ch = NULL;
	size_t nch = 0, i, n = 0;
	char name[SEALED_NAME_MAX + 1], **names = NULL;
	int r = 0;

	if (fsvc_list(st->dir, &names, &n) != 0) {
		errlist_add(errs, st->dir, 0, 0, "cannot read the secret "
		    "folder: %s", strerror(errno));
		return SL_ERR_IO;
	}
	if ((set = set_alloc(0)) == NULL) {
		fsvc_list_free(names, n);
		return SL_ERR_NOMEM;
	}
	for (i = 0; i < n; i++)
		if (sealed_file_name(names[i], name) &&
		    (r = load_one(st, name, &set, prev, &ch, &nch, errs)) != 0)
			break;
	fsvc_list_free(names, n);
	/* Secrets whose file is gone. */
	for (i = 0; r == 0 && prev != NULL && i < prev->n; i++)
		if (secret_set_find(set, prev->v[i]->name,
		    strlen(prev->v[i]->name)) == NULL)
			r = add_change(&ch, &nch, prev->v[i], NULL);
	if (r != 0) {
		secret_set_unref(set);
		free(ch);
		return r;
	}
	*out = set;
	if (changes != NULL) {
		*changes = ch;
		*nchanges = nch;
	} else
		free(ch);
	return 0;
}
