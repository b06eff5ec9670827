/*
 * ctl_token.c: GET /v1/tokens[?sandbox=ID] -- the minted tokens the
 * gateway holds (loop/mintcache.h), by sandbox, policy, source and the
 * version of the secret they come from: their fingerprints and expiry,
 * a mint under way, the last failure.  Never a token.
 */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "loop/mintcache.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"

struct listing {
	json_t		*arr;
	const char	*sandbox;	/* only this one's; NULL: all */
	int		 nomem;
};

/* The n fields of key (icpt_token.c writes it), split at '\n' in buf. */
static int
split_key(const char *key, char *buf, size_t cap, char **f, size_t n)
{
	size_t i;
	char *p;

	if (strlen(key) >= cap)
		return -1;
	memcpy(buf, key, strlen(key) + 1);
	for (i = 0, p = buf; i < n; i++) {
		f[i] = p;
		if (i + 1 < n) {
			if ((p = strchr(p, '\n')) == NULL)
				return -1;
			*p++ = '\0';
		}
	}
	return 0;
}

static json_t *
time_json(int64_t t)
{
	char ts[32];

	ctl_fmt_time((time_t)t, ts, sizeof(ts));
	return json_string(ts);
}

static void
add_entry(void *arg, const struct mint_info *in)
{
	struct listing *ls = arg;
	char buf[MINT_KEY_MAX], *f[6], *at, *colon;
	json_t *o;

	/* sandbox, serial, policy, source digest, source, secret@version:fp */
	if (ls->nomem || split_key(in->key, buf, sizeof(buf), f, 6) != 0 ||
	    (at = strrchr(f[5], '@')) == NULL ||
	    (colon = strchr(at, ':')) == NULL)
		return;
	*at++ = '\0';
	*colon = '\0';
	if (ls->sandbox != NULL && strcmp(ls->sandbox, f[0]) != 0)
		return;
	o = json_pack("{s:s?, s:s, s:s, s:s, s:s, s:I, s:s, s:I}",
	    "sandbox", f[0][0] != '\0' ? f[0] : NULL, "policy", f[2],
	    "source_digest", f[3], "source", f[4],
	    "secret", f[5], "secret_version",
	    (json_int_t)strtoull(at, NULL, 10), "state", in->minting ?
	    "minting" : in->failed_until != 0 ? "failed" : in->fp != NULL ?
	    "ok" : "expired", "waiting", (json_int_t)in->waiters);
	if (o != NULL && in->fp != NULL) {
		json_object_set_new(o, "fingerprint", json_string(in->fp));
		json_object_set_new(o, "minted_at", time_json(in->minted_at));
		json_object_set_new(o, "expires_at", time_json(in->expires_at));
	}
	if (o != NULL && in->failed_until != 0) {
		json_object_set_new(o, "reason", json_string(in->why));
		json_object_set_new(o, "failed_until",
		    time_json(in->failed_until));
	}
	if (o == NULL || json_array_append_new(ls->arr, o) != 0)
		ls->nomem = 1;
}

int
ctl_tokens(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	struct listing ls = { NULL, NULL, 0 };
	char sb[SB_ID_MAX + 1];

	if (strcmp(q->path, "/v1/tokens") != 0)
		return 0;
	if (strcmp(q->method, "GET") != 0) {
		ctl_reply_method(r, "GET");
		return 1;
	}
	if (q->query != NULL) {
		if (strncmp(q->query, "sandbox=", 8) != 0 ||
		    strlen(q->query + 8) == 0 ||
		    strlen(q->query + 8) > SB_ID_MAX ||
		    strpbrk(q->query + 8, "&%\n") != NULL) {
			ctl_reply_error(r, 400, NULL, "the only query is "
			    "sandbox=ID");
			return 1;
		}
		snprintf(sb, sizeof(sb), "%s", q->query + 8);
		ls.sandbox = sb;
	}
	if ((ls.arr = json_array()) == NULL) {
		ctl_reply_json(r, 500, NULL);
		return 1;
	}
	if (d->mints != NULL)
		mintcache_each(d->mints, (int64_t)time(NULL), add_entry, &ls);
	if (ls.nomem) {
		json_decref(ls.arr);
		ctl_reply_json(r, 500, NULL);
		return 1;
	}
	ctl_reply_json(r, 200, json_pack("{s:o}", "tokens", ls.arr));
	return 1;
}
