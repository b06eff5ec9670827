/*
 * sbstore.c: the control API's sandboxes in state_dir.  Each file is
 * one registration as JSON:
 *
 *   {"version": 1, "id": .., "team": .., "project": .., "created": T,
 *    "sources": [..], "policy": NAME or {inline policy},
 *    "ca_cert": PEM, "ca_key": base64 of the sealed key,
 *    "observe_until": T (observe mode; absent: enforce)}
 *
 * The CA key is sealed to the first gateway key (sealed.h; the name
 * "sandbox-ca.ID"), never written in the clear; without a gateway key
 * the file has no ca_key and the sandbox gets a new CA after a restart.
 *
 * A sandbox of sluiced.yaml keeps its CA there too, in ID.static-ca:
 * {"version": 1, "id": .., "ca_cert": PEM, "ca_key": ..} -- so that a
 * restart or an upgrade serves the CA its sandbox already trusts.
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "conf/config.h"
#include "keys/ca.h"
#include "keys/sealed.h"
#include "keys/secrets.h"
#include "loop/state.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/sbstore.h"

#define SB_FILE_MAX	(1024 * 1024)	/* a registration, inline policy and all */
#define SB_FORMAT	1

void
sbstore_open(struct daemon *d)
{
	const char *dir = d->cfg->state_dir;
	struct passwd *pw;
	struct stat sb;

	d->state_ok = 0;
	if (dir == NULL || dir[0] == '\0')
		return;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		log_warnx("state", "cannot make state_dir %s: %s; sandboxes "
		    "registered through the API will not survive a restart",
		    dir, strerror(errno));
		return;
	}
	/* The control thread writes there once privileges are dropped. */
	if (d->cfg->user != NULL && geteuid() == 0 &&
	    (pw = getpwnam(d->cfg->user)) != NULL &&
	    chown(dir, pw->pw_uid, pw->pw_gid) != 0)
		log_warnx("state", "cannot give %s to %s: %s", dir,
		    d->cfg->user, strerror(errno));
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
	    access(dir, W_OK | X_OK) != 0) {
		log_warnx("state", "state_dir %s is not a folder sluiced can "
		    "write; sandboxes registered through the API will not "
		    "survive a restart", dir);
		return;
	}
	d->state_ok = 1;
}

static int
file_path(const struct daemon *d, const char *id, char *buf, size_t len)
{
	return snprintf(buf, len, "%s/%s.json", d->cfg->state_dir, id) <
	    (int)len ? 0 : -1;
}

/* The sandbox's CA key, sealed and base64'd (malloc'd), or NULL. */
static char *
sealed_ca_key(struct daemon *d, const struct sandbox *sb, char *why,
    size_t why_len)
{
	struct sb_counter *cnt = sb->counter;
	uint8_t *blob = NULL;
	size_t blen = 0, cap;
	char *b64;
	int r;

	if (d->secrets == NULL)
		return NULL;	/* no gateway key: nothing to seal to */
	/* Sealed by the keys process: the key never comes here. */
	pthread_mutex_lock(&cnt->ca_mtx);
	r = cnt->ca != NULL ? ca_seal(cnt->ca, (int64_t)sb->created, &blob,
	    &blen, why, why_len) : SL_ERR_NOT_FOUND;
	pthread_mutex_unlock(&cnt->ca_mtx);
	if (r != 0) {
		if (cnt->ca == NULL)
			snprintf(why, why_len, "the sandbox has no CA");
		return NULL;
	}
	cap = sodium_base64_ENCODED_LEN(blen, sodium_base64_VARIANT_ORIGINAL);
	if ((b64 = malloc(cap)) != NULL)
		sodium_bin2base64(b64, cap, blob, blen,
		    sodium_base64_VARIANT_ORIGINAL);
	else
		snprintf(why, why_len, "out of memory");
	free(blob);
	return b64;
}

static char	*read_file(const char *path, size_t *len);

/* The "policy" member id's file was written with (a new reference). */
static json_t *
kept_policy(struct daemon *d, const char *id)
{
	char path[4096], *text;
	size_t len = 0;
	json_t *o, *p;

	if (file_path(d, id, path, sizeof(path)) != 0 ||
	    (text = read_file(path, &len)) == NULL)
		return NULL;
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	free(text);
	p = json_incref(json_object_get(o, "policy"));
	json_decref(o);
	return p;
}

int
sbstore_put(struct daemon *d, const struct sandbox *sb, const json_t *policy,
    char *why, size_t why_len)
{
	char path[4096], *pem = NULL, *key = NULL, *text = NULL;
	size_t pemlen = 0;
	json_t *o = NULL, *kept = NULL;
	int r = -1;

	if (!d->state_ok)
		return 0;
	if (policy == NULL && sb != NULL) {
		kept = sb->inline_policy == NULL ?
		    json_string(sb->policy_name) : kept_policy(d, sb->id);
		if ((policy = kept) == NULL) {
			snprintf(why, why_len, "cannot read back the sandbox's "
			    "policy from state_dir");
			return -1;
		}
	}
	if (sb == NULL || file_path(d, sb->id, path, sizeof(path)) != 0) {
		snprintf(why, why_len, "no such sandbox, or the path is too long");
		return -1;
	}
	why[0] = '\0';
	pthread_mutex_lock(&sb->counter->ca_mtx);
	if (sb->counter->ca != NULL)
		pem = ca_cert_pem(sb->counter->ca, &pemlen);
	pthread_mutex_unlock(&sb->counter->ca_mtx);
	key = sealed_ca_key(d, sb, why, why_len);
	if (pem == NULL || why[0] != '\0') {
		if (why[0] == '\0')
			snprintf(why, why_len, "the sandbox has no CA");
		goto out;
	}
	o = json_pack("{s:i, s:s, s:s*, s:s*, s:I, s:o, s:O, s:s, s:s*}",
	    "version", SB_FORMAT, "id", sb->id, "team", sb->team,
	    "project", sb->project, "created", (json_int_t)sb->created,
	    "sources", ctl_sources_json(sb), "policy", policy,
	    "ca_cert", pem, "ca_key", key);
	if (o != NULL && sb->observe_until != 0)
		json_object_set_new(o, "observe_until",
		    json_integer((json_int_t)sb->observe_until));
	if (o == NULL || (text = json_dumps(o, JSON_INDENT(1) |
	    JSON_PRESERVE_ORDER)) == NULL) {
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	if (fsvc_write(path, text, strlen(text), 0600) != 0) {
		snprintf(why, why_len, "cannot write %s: %s", path,
		    strerror(errno));
		goto out;
	}
	r = 0;
 out:
	free(text);
	json_decref(o);
	json_decref(kept);
	free(key);
	free(pem);
	return r;
}

int
sbstore_remove(struct daemon *d, const char *id, char *why, size_t why_len)
{
	char path[4096];

	if (!d->state_ok)
		return 0;
	if (file_path(d, id, path, sizeof(path)) != 0) {
		snprintf(why, why_len, "the path is too long");
		return -1;
	}
	/* Synced with its folder: the removal survives a crash. */
	if (fsvc_unlink(path) != 0 && errno != ENOENT) {
		snprintf(why, why_len, "cannot remove %s: %s", path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- at start ------------------------------------------------------- */

static struct ca *restore_ca(struct daemon *, const json_t *, const char *,
	    char *, size_t);

/* sb's CA into path (ID.static-ca); 0, or -1 with why. */
static int
static_ca_put(struct daemon *d, const struct sandbox *sb, const char *path,
    char *why, size_t why_len)
{
	char *pem = NULL, *key, *text = NULL;
	size_t pemlen = 0;
	json_t *o = NULL;
	int r = -1;

	why[0] = '\0';
	if ((key = sealed_ca_key(d, sb, why, why_len)) == NULL) {
		if (why[0] == '\0')
			snprintf(why, why_len, "no gateway_key to seal it to");
		return -1;
	}
	pthread_mutex_lock(&sb->counter->ca_mtx);
	if (sb->counter->ca != NULL)
		pem = ca_cert_pem(sb->counter->ca, &pemlen);
	pthread_mutex_unlock(&sb->counter->ca_mtx);
	if (pem == NULL || (o = json_pack("{s:i, s:s, s:s, s:s}", "version",
	    SB_FORMAT, "id", sb->id, "ca_cert", pem, "ca_key", key)) == NULL ||
	    (text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER)) ==
	    NULL)
		snprintf(why, why_len, "out of memory");
	else if (fsvc_write(path, text, strlen(text), 0600) != 0)
		snprintf(why, why_len, "cannot write %s: %s", path,
		    strerror(errno));
	else
		r = 0;
	free(text);
	json_decref(o);
	free(pem);
	free(key);
	return r;
}

void
sbstore_static_cas(struct daemon *d)
{
	char path[4096], why[256];
	struct sandbox *sb;
	struct ca *ca;
	json_t *o;
	size_t i, len;
	char *text;

	if (!d->state_ok)
		return;
	for (i = 0; i < d->state->nsandboxes; i++) {
		sb = &d->state->sandboxes[i];
		if (!sb->from_config || snprintf(path, sizeof(path),
		    "%s/%s.static-ca", d->cfg->state_dir, sb->id) >=
		    (int)sizeof(path))
			continue;
		ca = NULL;
		why[0] = '\0';
		if ((text = read_file(path, &len)) != NULL) {
			o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
			free(text);
			if (o == NULL || strcmp(json_string_value(json_object_get(
			    o, "id")) ? json_string_value(json_object_get(o,
			    "id")) : "", sb->id) != 0)
				snprintf(why, sizeof(why), "not sandbox %s's CA",
				    sb->id);
			else
				ca = restore_ca(d, o, sb->id, why, sizeof(why));
			json_decref(o);
		}
		if (ca != NULL) {
			pthread_mutex_lock(&sb->counter->ca_mtx);
			ca_free(sb->counter->ca);	/* minted at start */
			sb->counter->ca = ca;
			pthread_mutex_unlock(&sb->counter->ca_mtx);
			continue;
		}
		if (why[0] != '\0')
			log_warnx("state", "%s: %s: sandbox %s gets a new CA",
			    path, why, sb->id);
		if (static_ca_put(d, sb, path, why, sizeof(why)) != 0)
			log_warnx("state", "sandbox %s: its CA is not kept (%s): "
			    "a restart gives it a new one", sb->id, why);
	}
}

/* The CA of a registration o (id): opened, loaded; NULL with why. */
static struct ca *
restore_ca(struct daemon *d, const json_t *o, const char *id, char *why,
    size_t why_len)
{
	const char *pem = json_string_value(json_object_get(o, "ca_cert"));
	const char *key = json_string_value(json_object_get(o, "ca_key"));
	uint8_t *blob = NULL;
	struct ca *ca = NULL;
	char w[256];
	size_t klen, blen = 0;

	if (pem == NULL || key == NULL) {
		snprintf(why, why_len, "no CA certificate or sealed key");
		return NULL;
	}
	if (d->secrets == NULL) {
		snprintf(why, why_len, "no gateway_key to open its CA key with");
		return NULL;
	}
	klen = strlen(key);
	if ((blob = malloc(klen + 1)) == NULL ||
	    sodium_base642bin(blob, klen + 1, key, klen, NULL, &blen, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0) {
		snprintf(why, why_len, "its CA key is not base64");
		goto out;
	}
	/* Opened and kept by the keys process, which checks whose it is. */
	if (ca_open_sealed(id, pem, strlen(pem), blob, blen, &ca, w,
	    sizeof(w)) != 0)
		snprintf(why, why_len, "%s", w);
 out:
	free(blob);
	return ca;
}

/* The file's text (at most SB_FILE_MAX bytes), malloc'd, or NULL. */
static char *
read_file(const char *path, size_t *len)
{
	char *buf;

	return fsvc_read(path, SB_FILE_MAX, &buf, len) == 0 ? buf : NULL;
}

/* One registration file, ID.json: registered again, or reported. */
static void
restore_one(struct daemon *d, const char *file, const char *id)
{
	char path[4096], why[256] = "";
	const json_t *pol, *cr;
	struct ca *ca = NULL;
	json_t *o = NULL, *body = NULL;
	json_error_t jerr;
	size_t len = 0;
	char *text;

	snprintf(path, sizeof(path), "%s/%s", d->cfg->state_dir, file);
	if ((text = read_file(path, &len)) == NULL) {
		log_errx("state", "%s: cannot read: %s; sandbox %s is not "
		    "restored", path, strerror(errno), id);
		return;
	}
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (o == NULL || json_integer_value(json_object_get(o, "version")) !=
	    SB_FORMAT || strcmp(json_string_value(json_object_get(o, "id")) ?
	    json_string_value(json_object_get(o, "id")) : "", id) != 0) {
		log_errx("state", "%s: not a registration of sandbox %s%s%s; "
		    "not restored: its sources stay under the default policy",
		    path, id, o == NULL ? ": " : "", o == NULL ? jerr.text : "");
		goto out;
	}
	if ((ca = restore_ca(d, o, id, why, sizeof(why))) == NULL)
		log_warnx("state", "%s: %s: sandbox %s gets a new CA", path, why,
		    id);
	pol = json_object_get(o, "policy");
	if (json_is_string(pol) && state_policy(d->state,
	    json_string_value(pol)) == NULL) {
		log_errx("state", "%s: policy '%s' is gone: sandbox %s gets "
		    "'default'", path, json_string_value(pol), id);
		pol = NULL;
	}
	cr = json_object_get(o, "created");
	body = json_pack("{s:O, s:O?, s:O?, s:O?, s:O?, s:O?}", "id",
	    json_object_get(o, "id"), "team", json_object_get(o, "team"),
	    "project", json_object_get(o, "project"),
	    "sources", json_object_get(o, "sources"), "policy", pol,
	    "observe_until", json_object_get(o, "observe_until"));
	if (body != NULL && pol == NULL)
		json_object_set_new(body, "policy", json_string("default"));
	if (body == NULL || ctl_sandbox_restore(d, body, &ca,
	    json_is_integer(cr) ? (time_t)json_integer_value(cr) : 0, why,
	    sizeof(why)) != 0) {
		log_errx("state", "%s: sandbox %s is not restored: %s", path,
		    id, body == NULL ? "out of memory" : why);
		goto out;
	}
	log_info("state", "sandbox %s restored from %s", id, path);
 out:
	ca_free(ca);
	json_decref(body);
	json_decref(o);
}

void
sbstore_restore(struct daemon *d)
{
	char id[SB_ID_MAX + 1];
	struct dirent *de;
	size_t n;
	DIR *dir;

	if (!d->state_ok || (dir = opendir(d->cfg->state_dir)) == NULL)
		return;
	while ((de = readdir(dir)) != NULL) {
		n = strlen(de->d_name);
		if (de->d_name[0] == '.' || n <= 5 ||
		    strcmp(de->d_name + n - 5, ".json") != 0)
			continue;	/* temporaries, and what is not ours */
		if (n - 5 > SB_ID_MAX) {
			log_errx("state", "%s/%s: not a sandbox's file (the name "
			    "is too long)", d->cfg->state_dir, de->d_name);
			continue;
		}
		memcpy(id, de->d_name, n - 5);
		id[n - 5] = '\0';
		restore_one(d, de->d_name, id);
	}
	closedir(dir);
}
