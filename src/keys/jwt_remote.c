/*
 * jwt_remote.c: identity tokens signed by the keys process (kclient.h),
 * for jwt_sign with a remote key.  The claims go there as fields, and
 * the whole token comes back: the keys process builds what it signs,
 * so it never signs bytes a worker chose.
 */
#include "autoconf.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "util/err.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/jwt.h"
#include "keys/kclient.h"
#include "keys/kproto.h"
#include "keys/signkey.h"

/* A claim, "" when absent; over the table's bound: not sendable. */
static int
claim(struct wire_w *w, const char *s)
{
	if (s != NULL && strlen(s) > KPROTO_CLAIM_MAX)
		return -1;
	wire_str(w, s != NULL ? s : "");
	return 0;
}

long
jwt_remote_sign(const struct signkey *k, const struct jwt_claims *c,
    char *out, size_t out_len, char jti[JWT_JTI_LEN + 1])
{
	uint8_t req[9 * (4 + KPROTO_CLAIM_MAX) + 16];
	uint8_t ans[KPROTO_TOKEN_MAX + 64];
	char why[KPROTO_WHY_MAX], id[JWT_JTI_LEN + 2];
	const uint8_t *tok;
	struct wire_w w;
	struct wire_r rd;
	size_t n, tlen;
	int r;

	if (c->iss == NULL || c->sandbox == NULL || c->aud == NULL ||
	    c->iss[0] == '\0' || c->sandbox[0] == '\0' || c->aud[0] == '\0' ||
	    c->now < 0 || c->ttl == 0)
		return SL_ERR_INVALID;
	wire_w_init(&w, req, sizeof(req));
	if (claim(&w, signkey_kid(k)) != 0 || claim(&w, c->iss) != 0 ||
	    claim(&w, c->sandbox) != 0 || claim(&w, c->aud) != 0 ||
	    claim(&w, c->team) != 0 || claim(&w, c->project) != 0 ||
	    claim(&w, c->htm) != 0 || claim(&w, c->htu) != 0 ||
	    claim(&w, c->body_sha256) != 0)
		return SL_ERR_TOO_BIG;
	wire_u64(&w, (uint64_t)c->now);
	wire_u32(&w, c->ttl);
	if (w.over)
		return SL_ERR_TOO_BIG;
	if ((r = kclient_call(KPROTO_JWT_SIGN, req, w.len, ans, sizeof(ans),
	    &n, why)) != 0) {
		log_warnx("keys", "no identity token: %s", why);
		return r;
	}
	wire_r_init(&rd, ans, n);
	tok = wire_get_bytes(&rd, KPROTO_TOKEN_MAX, &tlen);
	wire_get_str(&rd, id, sizeof(id));
	if (wire_done(&rd) != 0 || strlen(id) != JWT_JTI_LEN ||
	    memchr(tok, '\0', tlen) != NULL) {
		r = SL_ERR_INVALID;
		goto out;
	}
	if (tlen + 1 > out_len) {
		r = SL_ERR_TOO_BIG;
		goto out;
	}
	memcpy(out, tok, tlen);
	out[tlen] = '\0';
	memcpy(jti, id, JWT_JTI_LEN + 1);
	r = 0;
 out:
	/* A signed token is a bearer credential until it expires. */
	OPENSSL_cleanse(ans, sizeof(ans));
	return r != 0 ? r : (long)tlen;
}
