/* idkeys.c: the signing keys of identity tokens and their JWKS. */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/chan.h"
#include "util/wire.h"
#include "conf/config.h"
#include "keys/idkeys.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "keys/jwt.h"
#include "keys/signkey.h"

struct idkeys *
idkeys_ref(struct idkeys *k)
{
	if (k != NULL)
		atomic_fetch_add(&k->refs, 1);
	return k;
}

void
idkeys_unref(struct idkeys *k)
{
	size_t i;

	if (k == NULL || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	signkey_free(k->sign);
	for (i = 0; i < k->npubs; i++)
		signpub_free(k->pubs[i]);
	free(k->pubs);
	free(k->jwks);
	free(k->discovery);
	free(k);
}

/* The JWKS and discovery documents, written once. */
static int
documents(struct idkeys *k, const struct config *cfg)
{
	json_t *j;
	char uri[1024];

	if ((j = jwt_jwks(k->pubs, k->npubs)) == NULL ||
	    (k->jwks = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		return SL_ERR_NOMEM;
	}
	json_decref(j);
	k->jwks_len = strlen(k->jwks);
	snprintf(uri, sizeof(uri), "%s/.well-known/jwks.json",
	    cfg->issuer != NULL ? cfg->issuer : "");
	j = json_pack("{s:s?, s:s, s:[s], s:[s], s:[s]}", "issuer",
	    cfg->issuer, "jwks_uri", uri, "id_token_signing_alg_values_supported",
	    "ES256", "response_types_supported", "id_token",
	    "subject_types_supported", "public");
	if (j == NULL || (k->discovery = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		return SL_ERR_NOMEM;
	}
	json_decref(j);
	k->discovery_len = strlen(k->discovery);
	return 0;
}

/*
 * A worker process's set: the keys process loads the files and gives the
 * public keys and the signer's kid; jwt_sign asks it for tokens.
 */
static int
remote_load(const struct config *cfg, struct idkeys *k, struct errlist *errs)
{
	uint8_t *ans;
	char why[KPROTO_WHY_MAX], kid[SIGNKEY_KID_MAX];
	const uint8_t *der;
	struct wire_r rd;
	size_t n, len, i;
	uint32_t npubs;
	int r;

	if ((ans = malloc(CHAN_MSG_MAX)) == NULL)
		return SL_ERR_NOMEM;
	if ((r = kclient_call(KPROTO_IDKEYS_LOAD, NULL, 0, ans, CHAN_MSG_MAX,
	    &n, why)) != 0) {
		errlist_add(errs, cfg->path, 0, 0, "signing keys: %s", why);
		goto out;
	}
	r = SL_ERR_INVALID;
	wire_r_init(&rd, ans, n);
	wire_get_str(&rd, kid, sizeof(kid));
	npubs = wire_get_u32(&rd);
	if (rd.bad || npubs == 0 || npubs > cfg->nsigning_keys)
		goto bad;
	for (i = 0; i < npubs; i++) {
		der = wire_get_bytes(&rd, KPROTO_SPKI_MAX, &len);
		if (rd.bad || signpub_from_der(der, len, &k->pubs[i]) != 0)
			goto bad;
		k->npubs++;
	}
	if (wire_done(&rd) != 0 || strcmp(signpub_kid(k->pubs[0]), kid) != 0)
		goto bad;
	r = signkey_remote(kid, &k->sign);
	goto out;
 bad:
	errlist_add(errs, cfg->path, 0, 0, "signing keys: a malformed answer "
	    "from the keys process");
 out:
	free(ans);
	return r;
}

int
idkeys_load(const struct config *cfg, struct idkeys **out,
    struct errlist *errs)
{
	struct idkeys *k;
	struct signkey *sk = NULL;
	const char *why = NULL;
	size_t i;
	int r = 0;

	*out = NULL;
	if (cfg->nsigning_keys == 0)
		return 0;
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->pubs = calloc(cfg->nsigning_keys, sizeof(*k->pubs))) == NULL) {
		free(k);
		return SL_ERR_NOMEM;
	}
	atomic_init(&k->refs, 1);
	if (kclient_remote()) {
		r = remote_load(cfg, k, errs);
		goto done;
	}
	for (i = 0; i < cfg->nsigning_keys; i++) {
		if ((r = signkey_load(cfg->signing_keys[i], &sk, &why)) != 0) {
			errlist_add(errs, cfg->signing_keys[i], 0, 0,
			    "signing key: %s", why != NULL ? why : err_str(r));
			break;
		}
		if ((r = signkey_public(sk, &k->pubs[k->npubs])) != 0) {
			signkey_free(sk);
			break;
		}
		k->npubs++;
		if (i == 0)
			k->sign = sk;	/* transferred */
		else
			signkey_free(sk);
		sk = NULL;
	}
 done:
	if (r == 0)
		r = documents(k, cfg);
	if (r != 0) {
		idkeys_unref(k);
		return r == SL_ERR_NOMEM ? r : SL_ERR_INVALID;
	}
	*out = k;
	return 0;
}
