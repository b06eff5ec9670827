/* fserve.c: the monitor does a confined worker's file requests (fserve.h). */
#include "autoconf.h"

#include <sys/stat.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "util/chan.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "util/wire.h"
#include "conf/config.h"
#include "daemon/fserve.h"

#define ROOTS_MAX	3

struct fserve {
	char		*roots[ROOTS_MAX];	/* as configured */
	size_t		 nroots;
	/* A write in several messages, gathered until the last. */
	char		*wpath;
	uint8_t		*wbuf;
	size_t		 wlen;
	mode_t		 wmode;
};

struct fserve *
fserve_new(const struct config *cfg)
{
	const char *dirs[ROOTS_MAX] = { cfg->policy_dir, cfg->secret_dir,
	    cfg->state_dir };
	struct fserve *fs;
	size_t i;

	if ((fs = calloc(1, sizeof(*fs))) == NULL)
		return NULL;
	for (i = 0; i < ROOTS_MAX; i++)
		if (dirs[i] != NULL && dirs[i][0] != '\0' &&
		    (fs->roots[fs->nroots++] = strdup(dirs[i])) == NULL) {
			fserve_free(fs);
			return NULL;
		}
	return fs;
}

static void
write_reset(struct fserve *fs)
{
	free(fs->wpath);
	free(fs->wbuf);
	fs->wpath = NULL;
	fs->wbuf = NULL;
	fs->wlen = 0;
}

void
fserve_free(struct fserve *fs)
{
	size_t i;

	if (fs == NULL)
		return;
	for (i = 0; i < fs->nroots; i++)
		free(fs->roots[i]);
	write_reset(fs);
	free(fs);
}

/* 1 when the resolved path real is one of the roots or inside one. */
static int
inside(const struct fserve *fs, const char *real)
{
	char root[PATH_MAX];
	size_t i, n;

	for (i = 0; i < fs->nroots; i++) {
		if (realpath(fs->roots[i], root) == NULL)
			continue;
		n = strlen(root);
		if (strncmp(real, root, n) == 0 &&
		    (real[n] == '\0' || real[n] == '/' ||
		    (n == 1 && root[0] == '/')))
			return 1;
	}
	return 0;
}

/* An existing path to read or list: resolved into real, inside the roots. */
static int
resolve_existing(const struct fserve *fs, const char *path, char *real)
{
	if (realpath(path, real) == NULL)
		return errno;
	return inside(fs, real) ? 0 : EACCES;
}

/*
 * A path to write or remove: its folder resolved and inside the roots,
 * its last part a plain name; the whole into real.
 */
static int
resolve_entry(const struct fserve *fs, const char *path, char *real)
{
	const char *slash = strrchr(path, '/'), *name;
	char dir[PATH_MAX], rdir[PATH_MAX];

	name = slash != NULL ? slash + 1 : path;
	if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return EINVAL;
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
	    (int)(slash - path), path) >= (int)sizeof(dir))
		return ENAMETOOLONG;
	if (realpath(dir, rdir) == NULL)
		return errno;
	if (!inside(fs, rdir))
		return EACCES;
	if (snprintf(real, PATH_MAX, "%s/%s", rdir, name) >= PATH_MAX)
		return ENAMETOOLONG;
	return 0;
}

static void
answer(int chan, const struct chan_hdr *h, const struct wire_w *w)
{
	if (chan_send(chan, h->type | FSVC_REPLY, h->id, w->p, w->len, -1) != 0)
		log_warnx("monitor", "cannot answer the worker: %s",
		    strerror(errno));
}

static void
answer_errno(int chan, const struct chan_hdr *h, int e)
{
	uint8_t b[4];
	struct wire_w w;

	wire_w_init(&w, b, sizeof(b));
	wire_u32(&w, (uint32_t)e);
	answer(chan, h, &w);
}

/* Only the certificates of a PEM file, written out again; ENODATA: none. */
static int
certs_only(const char *in, size_t inlen, char **out, size_t *outlen)
{
	STACK_OF(X509_INFO) *infos = NULL;
	BIO *rb = NULL, *wb = NULL;
	BUF_MEM *mem;
	int i, n = 0, e = ENODATA;

	if ((rb = BIO_new_mem_buf(in, (int)inlen)) == NULL ||
	    (wb = BIO_new(BIO_s_mem())) == NULL) {
		e = ENOMEM;
		goto out;
	}
	if ((infos = PEM_X509_INFO_read_bio(rb, NULL, NULL, NULL)) == NULL)
		goto out;
	for (i = 0; i < sk_X509_INFO_num(infos); i++) {
		X509_INFO *xi = sk_X509_INFO_value(infos, i);

		if (xi->x509 == NULL)
			continue;	/* a key, a CRL: not given out */
		if (PEM_write_bio_X509(wb, xi->x509) != 1) {
			e = ENOMEM;
			goto out;
		}
		n++;
	}
	BIO_get_mem_ptr(wb, &mem);
	if (n == 0 || (*out = malloc(mem->length + 1)) == NULL) {
		e = n == 0 ? ENODATA : ENOMEM;
		goto out;
	}
	memcpy(*out, mem->data, mem->length);
	(*out)[mem->length] = '\0';
	*outlen = mem->length;
	e = 0;
 out:
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(rb);
	BIO_free(wb);
	return e;
}

static int
do_read(struct fserve *fs, int chan, const struct chan_hdr *h,
    struct wire_r *r)
{
	char path[PATH_MAX], real[PATH_MAX], within[PATH_MAX] = "";
	char *buf = NULL, *certs = NULL;
	uint8_t *ans = NULL;
	struct stat sb;
	struct wire_w w;
	size_t len = 0, n;
	uint64_t off;
	int e;

	wire_get_str(r, path, sizeof(path));
	off = wire_get_u64(r);
	if (h->type == FSVC_READ)
		wire_get_str(r, within, sizeof(within));
	if (wire_done(r) != 0)
		return -1;
	/* A CA bundle may be anywhere: only its certificates leave. */
	if (h->type == FSVC_CERTS)
		e = realpath(path, real) == NULL ? errno : 0;
	else if (within[0] != '\0') {
		/* A file that must stay in its folder (fsvc_read_in), itself in
		 * the roots: no word of what is elsewhere. */
		char rw[PATH_MAX];

		e = resolve_existing(fs, within, rw);
		if (e == 0)
			e = fsvc_within(within, path, real) == 0 ? 0 : errno;
		if (e == 0 && !inside(fs, real))
			e = EACCES;
	} else
		e = resolve_existing(fs, path, real);
	if (e == 0 && stat(real, &sb) != 0)
		e = errno;
	if (e == 0 && !S_ISREG(sb.st_mode))
		e = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;	/* no pipe either */
	if (e == 0 && fsvc_local_read(real, FSERVE_FILE_MAX, &buf, &len) != 0)
		e = errno;
	if (e == 0 && h->type == FSVC_CERTS) {
		e = certs_only(buf, len, &certs, &len);
		free(buf);
		buf = certs;
	}
	if (e == 0 && off > len)
		e = EINVAL;
	if (e != 0) {
		free(buf);
		answer_errno(chan, h, e);
		return 0;
	}
	n = len - off > FSVC_CHUNK ? FSVC_CHUNK : len - off;
	if ((ans = malloc(n + 64)) == NULL) {
		free(buf);
		answer_errno(chan, h, ENOMEM);
		return 0;
	}
	wire_w_init(&w, ans, n + 64);
	wire_u32(&w, 0);
	wire_u64(&w, len);
	wire_u64(&w, (uint64_t)sb.st_ino);
	wire_u64(&w, (uint64_t)sb.st_mtim.tv_sec * 1000000000u +
	    (uint64_t)sb.st_mtim.tv_nsec);
	wire_bytes(&w, buf + off, n);
	answer(chan, h, &w);
	free(ans);
	free(buf);
	return 0;
}

static int
do_list(struct fserve *fs, int chan, const struct chan_hdr *h,
    struct wire_r *r)
{
	char path[PATH_MAX], real[PATH_MAX], **names = NULL;
	uint8_t *ans;
	struct wire_w w;
	size_t n = 0, i, at;
	uint32_t first, k = 0;
	int e;

	wire_get_str(r, path, sizeof(path));
	first = wire_get_u32(r);
	if (wire_done(r) != 0)
		return -1;
	if ((e = resolve_existing(fs, path, real)) == 0 &&
	    fsvc_local_list(real, &names, &n) != 0)
		e = errno;
	if (e == 0 && first > n)
		e = EINVAL;
	if (e != 0 || (ans = malloc(CHAN_MSG_MAX)) == NULL) {
		fsvc_list_free(names, n);
		answer_errno(chan, h, e != 0 ? e : ENOMEM);
		return 0;
	}
	/* As many names as the message holds; the count goes in at the end. */
	wire_w_init(&w, ans, CHAN_MSG_MAX);
	wire_u32(&w, 0);
	wire_u32(&w, (uint32_t)n);
	at = w.len;
	wire_u32(&w, 0);
	for (i = first; i < n; i++) {
		size_t l = strlen(names[i]);

		if (l > 255)
			continue;	/* no such name on Linux */
		if (w.len + 4 + l > CHAN_MSG_MAX)
			break;
		wire_bytes(&w, names[i], l);
		k++;
	}
	ans[at] = (uint8_t)k;
	ans[at + 1] = (uint8_t)(k >> 8);
	ans[at + 2] = (uint8_t)(k >> 16);
	ans[at + 3] = (uint8_t)(k >> 24);
	answer(chan, h, &w);
	free(ans);
	fsvc_list_free(names, n);
	return 0;
}

static int
do_write(struct fserve *fs, int chan, const struct chan_hdr *h,
    struct wire_r *r)
{
	char path[PATH_MAX], real[PATH_MAX];
	const uint8_t *data;
	uint32_t flags, mode;
	size_t n;
	uint8_t *nb;
	int e;

	flags = wire_get_u32(r);
	mode = wire_get_u32(r);
	wire_get_str(r, path, sizeof(path));
	data = wire_get_bytes(r, FSVC_CHUNK, &n);
	if (wire_done(r) != 0 || (mode & ~0777u) != 0)
		return -1;
	if (flags & FSVC_WRITE_FIRST) {
		write_reset(fs);
		if ((fs->wpath = strdup(path)) == NULL) {
			answer_errno(chan, h, ENOMEM);
			return 0;
		}
		fs->wmode = (mode_t)mode;
	} else if (fs->wpath == NULL || strcmp(fs->wpath, path) != 0)
		return -1;	/* a chunk of no write begun */
	if (fs->wlen + n > FSERVE_FILE_MAX ||
	    (nb = realloc(fs->wbuf, fs->wlen + n + 1)) == NULL) {
		write_reset(fs);
		answer_errno(chan, h, EFBIG);
		return 0;
	}
	fs->wbuf = nb;
	memcpy(fs->wbuf + fs->wlen, data, n);
	fs->wlen += n;
	if (!(flags & FSVC_WRITE_LAST)) {
		answer_errno(chan, h, 0);
		return 0;
	}
	if ((e = resolve_entry(fs, path, real)) == 0 &&
	    fsvc_local_write(real, fs->wbuf, fs->wlen, fs->wmode) != 0)
		e = errno;
	write_reset(fs);
	answer_errno(chan, h, e);
	return 0;
}

static int
do_unlink(struct fserve *fs, int chan, const struct chan_hdr *h,
    struct wire_r *r)
{
	char path[PATH_MAX], real[PATH_MAX];
	int e;

	wire_get_str(r, path, sizeof(path));
	if (wire_done(r) != 0)
		return -1;
	if ((e = resolve_entry(fs, path, real)) == 0 &&
	    fsvc_local_unlink(real) != 0)
		e = errno;
	answer_errno(chan, h, e);
	return 0;
}

int
fserve_request(struct fserve *fs, int chan, const struct chan_hdr *h,
    const uint8_t *p, size_t len)
{
	struct wire_r r;

	wire_r_init(&r, p, len);
	switch (h->type) {
	case FSVC_READ:
	case FSVC_CERTS:
		return do_read(fs, chan, h, &r);
	case FSVC_LIST:
		return do_list(fs, chan, h, &r);
	case FSVC_WRITE:
		return do_write(fs, chan, h, &r);
	case FSVC_UNLINK:
		return do_unlink(fs, chan, h, &r);
	}
	return -1;
}
