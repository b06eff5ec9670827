/*
 * fuzz_fserve.c: the monitor's file service (daemon/fserve.c) fed what a
 * taken-over worker could send on its channel: paths that climb out of
 * policy_dir, secret_dir and state_dir by ".." or by links, writes in
 * pieces that do not fit together, fields that do not read.
 *
 * fserve writes, renames and removes files, so everything it does happens
 * in a jail: a folder made at start (mkdtemp under $TMPDIR or /tmp) that
 * holds pol/, sec/ and state/ (the three roots: "/pol", "/sec" and
 * "/state" from inside) and outside/, with a canary file, a private key
 * and a certificate bundled with that key.  The roots hold files, links
 * that stay inside them, links that lead out (to outside/ and to the
 * jail's top), a loop, a dangling link, a FIFO, a file of more than two
 * chunks and a sparse one larger than fserve reads.
 *
 * The requests run in one thread that chroot()s into the jail after
 * unshare(CLONE_FS), so that only that thread's root moves: a chroot of
 * the whole process would hide the corpus and artifact folders from
 * libFuzzer, and /proc from LeakSanitizer, which stay in the main thread.
 * The jail has no /proc and no /dev.  The thread leaves the jail only to
 * report a failure (a check here, or a sanitizer's report, through
 * __asan_on_error and __ubsan_on_report), so that libFuzzer writes the
 * input where it was told to.  chroot needs root (CI runs the fuzzers as
 * root): without it this target stops at start rather than run
 * unconfined.  A run that crashes leaves its jail behind, for a look.
 *
 * Input: up to MAX_MSGS records, each
 *   1 byte   bits 0-2: the type: READ, CERTS, LIST, WRITE, UNLINK, then
 *            three fsvc does not have (one past UNLINK, one before READ,
 *            READ with the reply bit); bit 3: build the payload as below
 *            rather than take it as it is; bits 4-7: unused
 *   2 bytes  the payload's length (little-endian; what is left when it
 *            says more)
 *   payload  as it is, or built from [pick][aux][num] and the rest:
 *     the path   paths[(pick & 0x7f) modulo their number]; when pick has
 *                bit 7, the rest is appended to it (but for WRITE)
 *     READ       off = num * 1024 + (aux >> 3), within = withins[aux & 7]
 *     CERTS      off as READ
 *     LIST       first = num
 *     WRITE      flags = aux & 3, and a flag fsvc lacks when aux & 4; mode
 *                0600 | (num & 077), or 01644 (refused) when aux & 8; the
 *                bytes are the rest, or the rest repeated to a whole
 *                chunk when aux & 0x10, one byte over when aux & 0x20
 *     UNLINK     the path
 *   (bytes of [pick][aux][num] past the payload's end are 0; the three
 *   other types take the payload as it is, built or not)
 *
 * Each request is handed to fserve_request in a buffer of exactly its
 * bytes, on a fresh fserve each input (so that a write left half done
 * does not carry over), and its answer read back from a real channel.
 * Checks besides the sanitizers: a request is malformed (-1) exactly when
 * its fields do not read as fsvc.h says, its mode has bits over 0777, or
 * it continues a write that was not begun (modelled here); a malformed
 * one gets no answer and another gets exactly one, of type | FSVC_REPLY
 * and the same id, that reads as fsvc.c says (errno first; READ and
 * CERTS: size, inode, mtime, the chunk at off of min(size - off,
 * FSVC_CHUNK) bytes; LIST: total, n, n plain names; WRITE and UNLINK: the
 * errno alone); a READ that succeeds is of a regular file that, links
 * resolved, is inside the roots (and inside its within folder), never of
 * a file in outside/, and gives that file's bytes, size, inode and mtime;
 * a LIST that succeeds is of a folder inside the roots and gives its
 * names from first on; a WRITE or UNLINK that succeeds changed a folder
 * inside the roots, as asked; a CERTS answer holds certificates and no
 * "PRIVATE KEY"; no answer ever holds the canary's text or a line of the
 * key.  After every input the jail's top holds only its four folders,
 * outside/ holds only its three files, each with its inode and bytes.
 * An input that sent a well-formed UNLINK or last piece of a WRITE (the
 * only requests that touch a file, whatever their answer) has the roots
 * made again, so that every input replays alone.
 *
 * Built with -DFUZZ_FSERVE_SEEDS and without -fsanitize=fuzzer, this file
 * writes the seed corpus instead (checking that each seed's requests
 * succeed as many times as the seed means them to); from the build
 * folder, with s the source folder and the flags the build used (a
 * sanitizer build needs its -fsanitize flags on this line too), as root:
 *
 *   cc -DFUZZ_FSERVE_SEEDS -I. -I$s/src $s/tests/fuzz/fuzz_fserve.c \
 *       libdaemon.a libutil.a -lssl -lcrypto -levent_core -pthread \
 *       -o gen-fserve-seeds
 *   ./gen-fserve-seeds $s/tests/fuzz/corpus/fserve
 *
 * The seeds hold no pid and no key: the same bytes every time.
 */
#include "autoconf.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/fsvc.h"
#include "util/log.h"
#include "util/wire.h"
#include "conf/config.h"
#include "daemon/fserve.h"

#define MAX_MSGS	64
#define NKINDS		8
#define K_BUILT		0x08
#define WRITE_ODD_FLAG	0x100		/* a flag fsvc.h does not define */
#define ERRNO_MAX	4095		/* what the kernel can give */
#define NOUT		3		/* the files in outside/ */
#define BIG_LEN		(2 * FSVC_CHUNK + 1234)	/* /state/big.bin */

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
/* Sanitizer hooks: called as a report begins, in the thread at fault. */
void	__asan_on_error(void);
void	__ubsan_on_report(void);

static void failed(const char *, int, const char *) __attribute__((noreturn));

#define CHECK(c) do { \
	if (!(c)) \
		failed(__FILE__, __LINE__, #c); \
} while (0)

/* The types of the selector's low bits. */
static const uint32_t kinds[NKINDS] = { FSVC_READ, FSVC_CERTS, FSVC_LIST,
    FSVC_WRITE, FSVC_UNLINK, FSVC_UNLINK + 1, FSVC_READ - 1,
    FSVC_READ | FSVC_REPLY };

/* Paths as the jail sees them; tmp_path is filled in with this pid. */
static char tmp_path[64];
static const char *paths[] = {
	tmp_path,			/* fsvc_local_write's own temporary */
	"/pol/a.yaml", "/pol/b.yaml", "/pol/sub/c.yaml", "/pol/inner.yaml",
	"/pol/escape.yaml", "/pol/out/canary", "/pol/../outside/canary",
	"/outside/canary", "/outside/key.pem", "/outside/bundle.pem",
	"/sec/tok.sealed", "/sec/link", "/sec/ca.pem", "/state/x.json",
	"/state/big.bin", "/state/new.json", "/state/fifo", "/state/loop",
	"/state/up", "/state/dangling", "/pol/..", "/pol", "/sec", "/state",
	"/", "/outside", "pol/a.yaml", "/pol/sub", "/pol/sub/", "/pol/out/new",
	"/state/up/outside/new", "/pol/./a.yaml", "/pol/sub/../b.yaml",
	"/sec/../pol/a.yaml", "/pol//a.yaml", "/pol/a.yaml/", "/polx",
	"/sec/new.sealed", "/pol/out", "a.yaml", "/state/huge.bin",
};
#define NPATHS	(sizeof(paths) / sizeof(paths[0]))

static const char *const withins[8] = { "", "/pol", "/sec", "/state",
    "/pol/sub", "/", "/outside", "/none" };

static const char *const roots[] = { "/pol", "/sec", "/state" };
static char cfg_path[] = "fuzz.yaml", pol[] = "/pol", sec[] = "/sec",
    state[] = "/state";
static const char *const outside_names[NOUT] = { "bundle.pem", "canary",
    "key.pem" };

/* One request as fsvc.h lays it out. */
struct req {
	uint32_t	 type;
	char		 path[PATH_MAX], within[PATH_MAX];
	uint64_t	 off;
	uint32_t	 first, flags, mode;
	const uint8_t	*data;
	size_t		 n;
};

/* The write fserve is gathering, as this file expects it to be. */
struct wmodel {
	int		 on;
	char		 path[PATH_MAX];
	uint8_t		*buf;
	size_t		 len;
};

/* Written once at start, but for the hand-over and the counts. */
static struct {
	char		 top[PATH_MAX];	/* the jail, from outside it */
	int		 rootfd, cwdfd;	/* the main thread's, to leave it */
	pthread_t	 jail;
	int		 jailed;
	int		 sv[2];
	struct config	 cfg;
	uint8_t		*ans;
	char		*out_text[NOUT];	/* outside/'s files, by name */
	size_t		 out_len[NOUT];
	ino_t		 out_ino[NOUT];
	char		 canary[80];
	char		 keyline[80];	/* the key's first base64 line */
	char		*cert_pem;
	uint8_t		*big;		/* /state/big.bin's bytes */
	uint64_t	 id;
	/* The hand-over: one input at a time, to the jail's thread. */
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	const uint8_t	*in;
	size_t		 inlen;
	int		 busy, ready, jail_errno;
	unsigned	 oks[NKINDS];	/* answers with errno 0, by kind */
} G = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
    .rootfd = -1, .cwdfd = -1, .sv = { -1, -1 } };

/* ---- the jail ----------------------------------------------------------- */

/*
 * Back to the main thread's root, so that a report lands where it should.
 * The jail's thread holds that root as an fd for this alone: fserve opens
 * paths, and uses no fd it is not given.
 */
static void
jail_leave(void)
{
	if (!G.jailed || !pthread_equal(pthread_self(), G.jail))
		return;
	if (fchdir(G.rootfd) != 0 || chroot(".") != 0 || fchdir(G.cwdfd) != 0)
		fprintf(stderr, "fuzz_fserve: cannot leave the jail %s: %s\n",
		    G.top, strerror(errno));
	G.jailed = 0;
}

void
__asan_on_error(void)
{
	jail_leave();
}

void
__ubsan_on_report(void)
{
	jail_leave();
}

static void
failed(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	jail_leave();
	abort();
}

/*
 * Byte loops with no coverage (and not inlined where there is some):
 * memcmp and memmem would hand the canary and the key to libFuzzer's
 * dictionary, and an input could then write them into a root and read
 * them back.
 */
__attribute__((no_sanitize("coverage"), noinline))
static int
same(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	size_t i;
	uint8_t d = 0;

	for (i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

__attribute__((no_sanitize("coverage"), noinline))
static int
holds(const uint8_t *h, size_t hn, const char *needle)
{
	const uint8_t *nd = (const uint8_t *)needle;
	size_t n = strlen(needle), i;

	/* Two bytes first: answers are up to a chunk, needles long. */
	for (i = 0; n > 1 && i + n <= hn; i++)
		if (h[i] == nd[0] && h[i + 1] == nd[1] && same(h + i, nd, n))
			return 1;
	return 0;
}

static void
put(const char *path, const void *p, size_t len)
{
	int fd;

	CHECK((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) != -1);
	CHECK(write(fd, p, len) == (ssize_t)len);
	CHECK(close(fd) == 0);
}

/* Everything under dir, but dir; links are removed, never followed. */
static void
wipe(const char *dir)
{
	char p[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	DIR *d;

	CHECK((d = opendir(dir)) != NULL);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		CHECK(snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) <
		    (int)sizeof(p));
		CHECK(lstat(p, &sb) == 0);
		if (S_ISDIR(sb.st_mode)) {
			wipe(p);
			CHECK(rmdir(p) == 0);
		} else
			CHECK(unlink(p) == 0);
	}
	closedir(d);
}

/* The roots' contents, from inside the jail. */
static void
build_roots(void)
{
	static const char *const links[][2] = {
		{ "a.yaml", "/pol/inner.yaml" },	/* stays inside */
		{ "/outside/canary", "/pol/escape.yaml" },
		{ "/outside", "/pol/out" },
		{ "/pol/a.yaml", "/sec/link" },	/* another root */
		{ "loop", "/state/loop" },
		{ "..", "/state/up" },		/* the jail's top */
		{ "/outside/new", "/state/dangling" },
	};
	size_t i;

	CHECK(mkdir("/pol/sub", 0700) == 0);
	put("/pol/a.yaml", "name: a\n", 8);
	put("/pol/b.yaml", "name: b\n", 8);
	put("/pol/sub/c.yaml", "name: c\n", 8);
	put("/sec/tok.sealed", "sealed\n", 7);
	put("/sec/ca.pem", G.cert_pem, strlen(G.cert_pem));
	put("/state/x.json", "{}\n", 3);
	put("/state/big.bin", G.big, BIG_LEN);
	/* Over what fserve reads, in no disk space. */
	put("/state/huge.bin", "", 0);
	CHECK(truncate("/state/huge.bin", FSERVE_FILE_MAX + 1) == 0);
	CHECK(mkfifo("/state/fifo", 0600) == 0);
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		CHECK(symlink(links[i][0], links[i][1]) == 0);
}

static void
reset_roots(void)
{
	size_t i;

	for (i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		wipe(roots[i]);
	build_roots();
}

/* dir's names, sorted, each followed by a newline. */
static void
check_names(const char *dir, const char *want)
{
	char **names = NULL, got[256];
	size_t n = 0, i, at = 0;

	CHECK(fsvc_local_list(dir, &names, &n) == 0);
	got[0] = '\0';
	for (i = 0; i < n; i++) {
		CHECK(at + strlen(names[i]) + 2 < sizeof(got));
		at += (size_t)snprintf(got + at, sizeof(got) - at, "%s\n",
		    names[i]);
	}
	fsvc_list_free(names, n);
	CHECK(strcmp(got, want) == 0);
}

/* Nothing new at the top or in outside/, and its files as they were. */
static void
check_outside(void)
{
	char p[64], *buf = NULL;
	struct stat sb;
	size_t len, i;

	check_names("/", "outside\npol\nsec\nstate\n");
	check_names("/outside", "bundle.pem\ncanary\nkey.pem\n");
	for (i = 0; i < NOUT; i++) {
		snprintf(p, sizeof(p), "/outside/%s", outside_names[i]);
		CHECK(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode));
		CHECK(sb.st_ino == G.out_ino[i]);
		CHECK(fsvc_local_read(p, G.out_len[i], &buf, &len) == 0);
		CHECK(len == G.out_len[i] && same(buf, G.out_text[i], len));
		free(buf);
	}
}

/* ---- what an answer must be ------------------------------------------- */

/* 1 when the resolved path real is a root or inside one. */
static int
in_roots(const char *real)
{
	size_t i, n;

	for (i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		n = strlen(roots[i]);
		if (strncmp(real, roots[i], n) == 0 &&
		    (real[n] == '\0' || real[n] == '/'))
			return 1;
	}
	return 0;
}

/* path's folder, resolved, as fserve takes it for a write or an unlink. */
static int
real_dir(const char *path, char *real)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
		    (int)(slash - path), path);
	return realpath(dir, real) != NULL ? 0 : -1;
}

/* No answer gives out a secret of outside/, whatever asked for it. */
static void
check_secrets(uint32_t type, const uint8_t *a, size_t len)
{
	CHECK(!holds(a, len, G.canary));
	CHECK(!holds(a, len, G.keyline));
	if (type == FSVC_CERTS)
		CHECK(!holds(a, len, "PRIVATE KEY"));
}

/* A READ or CERTS that succeeded: of what, and what came back. */
static void
check_file(const struct req *q, uint64_t size, uint64_t ino, uint64_t mtime,
    const uint8_t *chunk, size_t n)
{
	char real[PATH_MAX], rw[PATH_MAX], *buf = NULL;
	struct stat sb;
	size_t len, i, wl;

	CHECK(realpath(q->path, real) != NULL);
	CHECK(stat(real, &sb) == 0 && S_ISREG(sb.st_mode));
	CHECK(ino == (uint64_t)sb.st_ino);
	CHECK(mtime == (uint64_t)sb.st_mtim.tv_sec * 1000000000u +
	    (uint64_t)sb.st_mtim.tv_nsec);
	if (q->type == FSVC_CERTS) {
		if (q->off == 0)
			CHECK(n >= 27 &&
			    memcmp(chunk, "-----BEGIN CERTIFICATE-----", 27) == 0);
		return;
	}
	CHECK(in_roots(real));
	for (i = 0; i < NOUT; i++)
		CHECK(sb.st_ino != G.out_ino[i]);
	if (q->within[0] != '\0') {
		CHECK(realpath(q->within, rw) != NULL);
		wl = strlen(rw);
		CHECK(strncmp(real, rw, wl) == 0 &&
		    (real[wl] == '/' || strcmp(rw, "/") == 0));
	}
	CHECK(fsvc_local_read(real, (size_t)sb.st_size, &buf, &len) == 0);
	CHECK(size == len && same(chunk, buf + q->off, n));
	free(buf);
}

static void
check_read(const struct req *q, const uint8_t *a, size_t len, int32_t *e)
{
	uint64_t size, ino, mtime;
	const uint8_t *chunk;
	struct wire_r r;
	size_t n;

	wire_r_init(&r, a, len);
	*e = (int32_t)wire_get_u32(&r);
	if (*e != 0) {
		CHECK(wire_done(&r) == 0);
		return;
	}
	size = wire_get_u64(&r);
	ino = wire_get_u64(&r);
	mtime = wire_get_u64(&r);
	chunk = wire_get_bytes(&r, FSVC_CHUNK, &n);
	CHECK(wire_done(&r) == 0);
	CHECK(q->off <= size && size <= FSERVE_FILE_MAX);
	CHECK(n == (size - q->off > FSVC_CHUNK ? FSVC_CHUNK : size - q->off));
	check_file(q, size, ino, mtime, chunk, n);
}

static void
check_list(const struct req *q, const uint8_t *a, size_t len, int32_t *e)
{
	char real[PATH_MAX], **names = NULL;
	const uint8_t *s;
	struct wire_r r;
	uint32_t total, k, i;
	size_t n = 0, sl;

	wire_r_init(&r, a, len);
	*e = (int32_t)wire_get_u32(&r);
	if (*e != 0) {
		CHECK(wire_done(&r) == 0);
		return;
	}
	CHECK(realpath(q->path, real) != NULL && in_roots(real));
	CHECK(fsvc_local_list(real, &names, &n) == 0);
	total = wire_get_u32(&r);
	k = wire_get_u32(&r);
	CHECK(!r.bad && total == n && q->first <= total);
	CHECK(k <= total - q->first && (k > 0 || q->first == total));
	for (i = 0; i < k; i++) {
		s = wire_get_bytes(&r, 255, &sl);
		CHECK(!r.bad && sl > 0 && memchr(s, '/', sl) == NULL &&
		    memchr(s, '\0', sl) == NULL);
		CHECK(strlen(names[q->first + i]) == sl &&
		    memcmp(names[q->first + i], s, sl) == 0);
	}
	CHECK(wire_done(&r) == 0);
	fsvc_list_free(names, n);
}

/* A WRITE or UNLINK: the errno alone; what a success changed. */
static void
check_change(const struct req *q, const struct wmodel *w, const uint8_t *a,
    size_t len, int32_t *e)
{
	char real[PATH_MAX], p[PATH_MAX + 256], *buf = NULL;
	const char *name = strrchr(q->path, '/');
	struct wire_r r;
	struct stat sb;
	size_t blen;

	wire_r_init(&r, a, len);
	*e = (int32_t)wire_get_u32(&r);
	CHECK(wire_done(&r) == 0);
	if (q->type == FSVC_WRITE && !(q->flags & FSVC_WRITE_LAST)) {
		/* A piece kept for later, or too much of them. */
		CHECK(*e == 0 || *e == EFBIG || *e == ENOMEM);
		return;
	}
	if (*e != 0)
		return;
	name = name != NULL ? name + 1 : q->path;
	CHECK(real_dir(q->path, real) == 0 && in_roots(real));
	snprintf(p, sizeof(p), "%s/%s", real, name);
	if (q->type == FSVC_UNLINK) {
		CHECK(lstat(p, &sb) == -1 && errno == ENOENT);
		return;
	}
	CHECK(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode));
	CHECK(fsvc_local_read(p, (size_t)sb.st_size, &buf, &blen) == 0);
	CHECK(blen == w->len && same(buf, w->buf, blen));
	free(buf);
}

/* ---- the requests ------------------------------------------------------- */

/* q from payload p as fserve reads it; -1 when fserve must refuse it. */
static int
parse_req(uint32_t type, const uint8_t *p, size_t len, const struct wmodel *w,
    struct req *q)
{
	struct wire_r r;

	q->type = type;
	q->path[0] = q->within[0] = '\0';
	q->off = 0;
	q->first = q->flags = q->mode = 0;
	q->data = NULL;
	q->n = 0;
	wire_r_init(&r, p, len);
	switch (type) {
	case FSVC_READ:
	case FSVC_CERTS:
		wire_get_str(&r, q->path, sizeof(q->path));
		q->off = wire_get_u64(&r);
		if (type == FSVC_READ)
			wire_get_str(&r, q->within, sizeof(q->within));
		return wire_done(&r);
	case FSVC_LIST:
		wire_get_str(&r, q->path, sizeof(q->path));
		q->first = wire_get_u32(&r);
		return wire_done(&r);
	case FSVC_WRITE:
		q->flags = wire_get_u32(&r);
		q->mode = wire_get_u32(&r);
		wire_get_str(&r, q->path, sizeof(q->path));
		q->data = wire_get_bytes(&r, FSVC_CHUNK, &q->n);
		if (wire_done(&r) != 0 || (q->mode & ~0777u) != 0)
			return -1;
		/* A piece that begins nothing must continue the write begun. */
		if (!(q->flags & FSVC_WRITE_FIRST) &&
		    (!w->on || strcmp(w->path, q->path) != 0))
			return -1;
		return 0;
	case FSVC_UNLINK:
		wire_get_str(&r, q->path, sizeof(q->path));
		return wire_done(&r);
	}
	return -1;
}

/* The model after an accepted WRITE piece; 0, or the errno it expects. */
static int
wmodel_add(struct wmodel *w, const struct req *q)
{
	uint8_t *nb;

	if (q->flags & FSVC_WRITE_FIRST) {
		w->on = 1;
		snprintf(w->path, sizeof(w->path), "%s", q->path);
		w->len = 0;
	}
	if (w->len + q->n > FSERVE_FILE_MAX) {
		w->on = 0;
		return EFBIG;
	}
	CHECK((nb = realloc(w->buf, w->len + q->n + 1)) != NULL);
	w->buf = nb;
	if (q->n > 0)
		memcpy(w->buf + w->len, q->data, q->n);
	w->len += q->n;
	return 0;
}

/*
 * One request, as the monitor's loop hands it over, and its answer; 1
 * when it may have changed a root (fserve refuses the others untouched).
 */
static int
one(struct fserve *fs, struct wmodel *w, unsigned kind, const uint8_t *p,
    size_t len)
{
	struct chan_hdr h, ah;
	struct req q;
	int malformed, r, want = 0;
	int32_t e = -1;
	uint8_t *buf;

	h.type = kinds[kind];
	h.len = (uint32_t)len;
	h.id = ++G.id;
	malformed = parse_req(h.type, p, len, w, &q) != 0;
	CHECK((buf = malloc(len > 0 ? len : 1)) != NULL);
	if (len > 0)
		memcpy(buf, p, len);
	r = fserve_request(fs, G.sv[1], &h, buf, len);
	free(buf);
	CHECK(r == 0 || r == -1);
	CHECK(r == -(malformed));
	if (!malformed && h.type == FSVC_WRITE)
		want = wmodel_add(w, &q);
	r = chan_recv(G.sv[0], &ah, G.ans, CHAN_MSG_MAX, NULL, 0);
	if (malformed) {
		CHECK(r == SL_ERR_IO && errno == ETIMEDOUT);
		return 0;
	}
	CHECK(r == 1);
	CHECK(ah.type == (h.type | FSVC_REPLY) && ah.id == h.id);
	CHECK(ah.len <= CHAN_MSG_MAX);
	check_secrets(h.type, G.ans, ah.len);
	if (h.type == FSVC_READ || h.type == FSVC_CERTS)
		check_read(&q, G.ans, ah.len, &e);
	else if (h.type == FSVC_LIST)
		check_list(&q, G.ans, ah.len, &e);
	else
		check_change(&q, w, G.ans, ah.len, &e);
	CHECK(e >= 0 && e <= ERRNO_MAX);
	if (want != 0)
		CHECK(e == want);
	if (h.type == FSVC_WRITE && (e != 0 || (q.flags & FSVC_WRITE_LAST)))
		w->on = 0;	/* fserve let go of it */
	if (e == 0)
		G.oks[kind]++;
	/* One answer, no more. */
	r = chan_recv(G.sv[0], &ah, G.ans, CHAN_MSG_MAX, NULL, 0);
	CHECK(r == SL_ERR_IO && errno == ETIMEDOUT);
	return h.type == FSVC_UNLINK ||
	    (h.type == FSVC_WRITE && (q.flags & FSVC_WRITE_LAST));
}

/* dst[0..n) of src again and again (zeros when it is empty), by doubling. */
static void
fill(uint8_t *dst, size_t n, const uint8_t *src, size_t len)
{
	size_t have, k;

	if (len == 0) {
		memset(dst, 0, n);
		return;
	}
	have = len < n ? len : n;
	memcpy(dst, src, have);
	while (have < n) {
		k = have < n - have ? have : n - have;
		memcpy(dst + have, dst, k);
		have += k;
	}
}

/* A built payload (see the top) into out; its length. */
static size_t
build(unsigned kind, const uint8_t *p, size_t len, uint8_t *out, size_t cap)
{
	const uint8_t *rest = len > 3 ? p + 3 : p + len;
	size_t rlen = len > 3 ? len - 3 : 0, dn;
	uint8_t pick = len > 0 ? p[0] : 0, aux = len > 1 ? p[1] : 0;
	uint8_t num = len > 2 ? p[2] : 0;
	const char *path = paths[(pick & 0x7f) % NPATHS];
	uint32_t type = kinds[kind];
	struct wire_w w;

	wire_w_init(&w, out, cap);
	if (type == FSVC_WRITE) {
		wire_u32(&w, (aux & 3u) | (aux & 4 ? WRITE_ODD_FLAG : 0));
		wire_u32(&w, aux & 8 ? 01644 : 0600 | (num & 077));
		wire_str(&w, path);
		if (!(aux & 0x30)) {
			wire_bytes(&w, rest, rlen);
			return w.len;
		}
		/* A whole chunk (or one byte more) of the rest, again and again. */
		dn = FSVC_CHUNK + (aux & 0x20 ? 1 : 0);
		wire_u32(&w, (uint32_t)dn);
		CHECK(!w.over && dn <= cap - w.len);
		fill(out + w.len, dn, rest, rlen);
		return w.len + dn;
	}
	/* The path, and the rest after it when pick says so. */
	wire_u32(&w, (uint32_t)(strlen(path) + (pick & 0x80 ? rlen : 0)));
	wire_put(&w, path, strlen(path));
	if (pick & 0x80)
		wire_put(&w, rest, rlen);
	if (type == FSVC_READ || type == FSVC_CERTS)
		wire_u64(&w, (uint64_t)num * 1024 + (aux >> 3));
	if (type == FSVC_READ)
		wire_str(&w, withins[aux & 7]);
	if (type == FSVC_LIST)
		wire_u32(&w, num);
	return w.len;
}

/* One input, in the jail; 1 when it asked to change something. */
static int
run_input(const uint8_t *d, size_t n)
{
	static uint8_t built[CHAN_MSG_MAX];
	struct wmodel w = { 0 };
	struct fserve *fs;
	size_t off, len, msgs;
	unsigned kind;
	int changes = 0;

	CHECK((fs = fserve_new(&G.cfg)) != NULL);
	for (off = 0, msgs = 0; off + 3 <= n && msgs < MAX_MSGS; msgs++) {
		kind = d[off] & 7;
		len = (size_t)d[off + 1] | (size_t)d[off + 2] << 8;
		off += 3;
		if (len > n - off)
			len = n - off;
		if ((d[off - 3] & K_BUILT) && kinds[kind] >= FSVC_READ &&
		    kinds[kind] <= FSVC_UNLINK)
			changes |= one(fs, &w, kind, built, build(kind,
			    d + off, len, built, sizeof(built)));
		else
			changes |= one(fs, &w, kind, d + off, len);
		off += len;
	}
	fserve_free(fs);
	free(w.buf);
	/* What a refused PEM left on this thread's queue. */
	ERR_clear_error();
	return changes;
}

static void *
jail_main(void *arg)
{
	sigset_t s;

	/* libFuzzer's timers and stops are the main thread's to take. */
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGUSR1);
	sigaddset(&s, SIGUSR2);
	sigaddset(&s, SIGXFSZ);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	pthread_mutex_lock(&G.mu);
	if (unshare(CLONE_FS) != 0 || chroot(G.top) != 0 || chdir("/") != 0) {
		G.jail_errno = errno;
		G.ready = 1;
		pthread_cond_broadcast(&G.cv);
		pthread_mutex_unlock(&G.mu);
		return NULL;
	}
	G.jailed = 1;
	/* Inside: the jail's folders are here, the jail's own path is not. */
	CHECK(access("/outside/canary", F_OK) == 0 && access(G.top, F_OK) != 0);
	reset_roots();
	check_outside();
	G.ready = 1;
	pthread_cond_broadcast(&G.cv);
	for (;;) {
		while (!G.busy)
			pthread_cond_wait(&G.cv, &G.mu);
		pthread_mutex_unlock(&G.mu);
		if (run_input(G.in, G.inlen))
			reset_roots();
		check_outside();
		pthread_mutex_lock(&G.mu);
		G.busy = 0;
		pthread_cond_broadcast(&G.cv);
	}
	return NULL;
}

/* ---- start -------------------------------------------------------------- */

/* A PEM string of what write puts in a memory BIO. */
static char *
pem_of(BIO *b)
{
	char *data, *s;
	long n;

	CHECK((n = BIO_get_mem_data(b, &data)) > 0);
	CHECK((s = malloc((size_t)n + 1)) != NULL);
	memcpy(s, data, (size_t)n);
	s[n] = '\0';
	BIO_free(b);
	return s;
}

/* A self-signed certificate and its key, as PEM. */
static void
make_pki(char **cert, char **key)
{
	EVP_PKEY *k;
	X509 *x;
	BIO *b;

	CHECK((k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) != NULL);
	CHECK((x = X509_new()) != NULL);
	CHECK(X509_set_version(x, 2) == 1);
	CHECK(ASN1_INTEGER_set(X509_get_serialNumber(x), 1) == 1);
	CHECK(X509_gmtime_adj(X509_getm_notBefore(x), 0) != NULL);
	CHECK(X509_gmtime_adj(X509_getm_notAfter(x), 86400) != NULL);
	CHECK(X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN",
	    MBSTRING_ASC, (const unsigned char *)"fuzz-fserve CA", -1, -1,
	    0) == 1);
	CHECK(X509_set_issuer_name(x, X509_get_subject_name(x)) == 1);
	CHECK(X509_set_pubkey(x, k) == 1);
	CHECK(X509_sign(x, k, EVP_sha256()) > 0);
	CHECK((b = BIO_new(BIO_s_mem())) != NULL);
	CHECK(PEM_write_bio_X509(b, x) == 1);
	*cert = pem_of(b);
	CHECK((b = BIO_new(BIO_s_mem())) != NULL);
	CHECK(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1);
	*key = pem_of(b);
	X509_free(x);
	EVP_PKEY_free(k);
}

/* The jail's folders and outside/'s files, from outside the jail. */
static void
make_jail(void)
{
	static const char *const dirs[] = { "pol", "sec", "state", "outside" };
	const char *tmp = getenv("TMPDIR");
	uint8_t rnd[16];
	char p[PATH_MAX + 64], *key, *bundle;
	struct stat sb;
	size_t i;

	snprintf(G.top, sizeof(G.top), "%s/fuzz_fserve.XXXXXX",
	    tmp != NULL && tmp[0] == '/' && strlen(tmp) < 200 ? tmp : "/tmp");
	CHECK(mkdtemp(G.top) != NULL);
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", G.top, dirs[i]);
		CHECK(mkdir(p, 0700) == 0);
	}
	/* Fresh each run: no input can know it. */
	CHECK(getentropy(rnd, sizeof(rnd)) == 0);
	snprintf(G.canary, sizeof(G.canary), "fuzz_fserve canary ");
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(G.canary + strlen(G.canary), 3, "%02x", rnd[i]);
	make_pki(&G.cert_pem, &key);
	CHECK((G.big = malloc(BIG_LEN)) != NULL);
	for (i = 0; i < BIG_LEN; i++)
		G.big[i] = (uint8_t)(i * 7 + (i >> 8));
	snprintf(G.keyline, sizeof(G.keyline), "%.64s", strchr(key, '\n') + 1);
	CHECK((bundle = malloc(strlen(G.cert_pem) + strlen(key) + 1)) != NULL);
	snprintf(bundle, strlen(G.cert_pem) + strlen(key) + 1, "%s%s",
	    G.cert_pem, key);
	/* By outside_names' order. */
	G.out_text[0] = bundle;
	G.out_text[1] = strdup(G.canary);
	G.out_text[2] = key;
	for (i = 0; i < NOUT; i++) {
		CHECK(G.out_text[i] != NULL);
		G.out_len[i] = strlen(G.out_text[i]);
		snprintf(p, sizeof(p), "%s/outside/%s", G.top,
		    outside_names[i]);
		put(p, G.out_text[i], G.out_len[i]);
		CHECK(lstat(p, &sb) == 0);
		G.out_ino[i] = sb.st_ino;
	}
}

static void
cleanup(void)
{
	size_t i;

	/* Only a jail that was made and is not in use. */
	if (G.top[0] == '\0' || G.busy)
		return;
	wipe(G.top);
	rmdir(G.top);
	for (i = 0; i < NOUT; i++)
		free(G.out_text[i]);
	free(G.cert_pem);
	free(G.big);
	free(G.ans);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	if (G.ans != NULL)
		return 0;
	log_init("fuzz_fserve", LOG_LVL_ERR);
	snprintf(tmp_path, sizeof(tmp_path), "/pol/.a.yaml.tmp.%ld",
	    (long)getpid());
	CHECK((G.ans = malloc(CHAN_MSG_MAX)) != NULL);
	CHECK(chan_pair(G.sv) == 0);
	G.cfg.path = cfg_path;
	G.cfg.policy_dir = pol;
	G.cfg.secret_dir = sec;
	G.cfg.state_dir = state;
	make_jail();
	atexit(cleanup);
	CHECK((G.rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) != -1);
	CHECK((G.cwdfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) != -1);
	CHECK(pthread_create(&G.jail, NULL, jail_main, NULL) == 0);
	pthread_mutex_lock(&G.mu);
	while (!G.ready)
		pthread_cond_wait(&G.cv, &G.mu);
	pthread_mutex_unlock(&G.mu);
	if (!G.jailed) {
		fprintf(stderr, "fuzz_fserve: cannot chroot into %s: %s; this "
		    "target runs as root only, never unconfined\n", G.top,
		    strerror(G.jail_errno));
		abort();
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	pthread_mutex_lock(&G.mu);
	G.in = d;
	G.inlen = n;
	G.busy = 1;
	pthread_cond_broadcast(&G.cv);
	while (G.busy)
		pthread_cond_wait(&G.cv, &G.mu);
	pthread_mutex_unlock(&G.mu);
	return 0;
}

#ifdef FUZZ_FSERVE_SEEDS
/* A seed being built: records. */
struct sb {
	uint8_t		 b[1 << 18];
	size_t		 len;
};

enum { K_READ, K_CERTS, K_LIST, K_WRITE, K_UNLINK, K_PAST, K_BEFORE,
    K_REPLY };

static void
sb_rec(struct sb *s, uint8_t sel, const void *p, size_t len)
{
	CHECK(len <= 0xffff && s->len + 3 + len <= sizeof(s->b));
	s->b[s->len++] = sel;
	s->b[s->len++] = (uint8_t)len;
	s->b[s->len++] = (uint8_t)(len >> 8);
	if (len > 0)
		memcpy(s->b + s->len, p, len);
	s->len += len;
}

static uint8_t
path_index(const char *path)
{
	size_t i;

	for (i = 0; i < NPATHS; i++)
		if (strcmp(paths[i], path) == 0)
			return (uint8_t)i;
	fprintf(stderr, "%s: not in the table\n", path);
	exit(1);
}

/* A built record: path (by name), aux, num, the rest. */
static void
sb_built(struct sb *s, unsigned kind, const char *path, int suffix,
    uint8_t aux, uint8_t num, const char *rest)
{
	uint8_t p[512];
	size_t rl = strlen(rest);

	CHECK(3 + rl <= sizeof(p));
	p[0] = path_index(path) | (suffix ? 0x80 : 0);
	p[1] = aux;
	p[2] = num;
	memcpy(p + 3, rest, rl);
	sb_rec(s, (uint8_t)(kind | K_BUILT), p, 3 + rl);
}

static void
sb_read(struct sb *s, const char *path, uint64_t off, const char *within)
{
	uint8_t p[512];
	struct wire_w w;

	wire_w_init(&w, p, sizeof(p));
	wire_str(&w, path);
	wire_u64(&w, off);
	wire_str(&w, within);
	CHECK(!w.over);
	sb_rec(s, K_READ, p, w.len);
}

static void
sb_write(struct sb *s, uint32_t flags, uint32_t mode, const char *path,
    const char *data)
{
	uint8_t p[512];
	struct wire_w w;

	wire_w_init(&w, p, sizeof(p));
	wire_u32(&w, flags);
	wire_u32(&w, mode);
	wire_str(&w, path);
	wire_str(&w, data);
	CHECK(!w.over);
	sb_rec(s, K_WRITE, p, w.len);
}

/*
 * Runs s as the fuzzer would, and writes it once each kind got the
 * answers with errno 0 that want says (-1: any number).
 */
static void
sb_save(const char *dir, const char *name, struct sb *s, const int want[5])
{
	unsigned before[NKINDS];
	char path[PATH_MAX];
	size_t i;
	FILE *f;

	memcpy(before, G.oks, sizeof(before));
	LLVMFuzzerTestOneInput(s->b, s->len);
	for (i = 0; i < 5; i++)
		if (want[i] >= 0 && G.oks[i] - before[i] != (unsigned)want[i]) {
			fprintf(stderr, "%s: %u answers to kind %zu, not %d\n",
			    name, G.oks[i] - before[i], i, want[i]);
			exit(1);
		}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite(s->b, 1, s->len, f) != s->len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	s->len = 0;
}

int
main(int argc, char **argv)
{
	static struct sb s;
	static const uint8_t junk[] = { 0x05, 0, 0, 0, 'a', 'b' };
	uint8_t p[64];
	struct wire_w w;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	LLVMFuzzerInitialize(&argc, &argv);

	/* Inside, by a link inside, by a link to another root; not outside. */
	sb_built(&s, K_READ, "/pol/a.yaml", 0, 0, 0, "");
	sb_built(&s, K_READ, "/pol/inner.yaml", 0, 1, 0, "");
	sb_built(&s, K_READ, "/sec/link", 0, 0, 0, "");
	sb_built(&s, K_READ, "/state/big.bin", 0, 0, 64, "");
	sb_built(&s, K_READ, "/pol/escape.yaml", 0, 0, 0, "");
	sb_built(&s, K_READ, "/pol/../outside/canary", 0, 0, 0, "");
	sb_built(&s, K_READ, "/pol/out/canary", 0, 0, 0, "");
	sb_save(argv[1], "read", &s, (const int[]){ 4, 0, 0, 0, 0 });

	/* fsvc_read_in: a link out of the folder it must stay in. */
	sb_read(&s, "/pol/inner.yaml", 0, "/pol");
	sb_read(&s, "/sec/link", 0, "/sec");
	sb_read(&s, "/sec/tok.sealed", 0, "/sec");
	sb_read(&s, "/pol/sub/c.yaml", 0, "/pol/sub");
	sb_save(argv[1], "read-within", &s, (const int[]){ 3, 0, 0, 0, 0 });

	/* A file in three chunks, and offsets in a small one. */
	sb_read(&s, "/state/big.bin", 0, "");
	sb_read(&s, "/state/big.bin", FSVC_CHUNK, "");
	sb_read(&s, "/state/big.bin", 2 * FSVC_CHUNK, "");
	sb_read(&s, "/pol/a.yaml", 3, "");
	sb_read(&s, "/pol/a.yaml", 8, "");
	sb_read(&s, "/pol/a.yaml", 9, "");
	sb_save(argv[1], "read-off", &s, (const int[]){ 5, 0, 0, 0, 0 });

	/* Certificates from anywhere, never a key; nothing from what has none. */
	sb_built(&s, K_CERTS, "/sec/ca.pem", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/outside/bundle.pem", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/outside/key.pem", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/outside/canary", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/state/fifo", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/sec/ca.pem", 0, 8 << 3, 0, "");
	sb_save(argv[1], "certs", &s, (const int[]){ 0, 3, 0, 0, 0 });

	sb_built(&s, K_LIST, "/pol", 0, 0, 0, "");
	sb_built(&s, K_LIST, "/pol", 0, 0, 2, "");
	sb_built(&s, K_LIST, "/sec", 0, 0, 3, "");
	sb_built(&s, K_LIST, "/pol", 1, 0, 0, "/sub");
	sb_built(&s, K_LIST, "/outside", 0, 0, 0, "");
	sb_built(&s, K_LIST, "/pol/out", 0, 0, 0, "");
	sb_built(&s, K_LIST, "/state/up", 0, 0, 0, "");
	sb_built(&s, K_LIST, "/pol", 0, 0, 99, "");
	sb_save(argv[1], "list", &s, (const int[]){ 0, 0, 4, 0, 0 });

	/* A write in three pieces, read back. */
	sb_write(&s, FSVC_WRITE_FIRST, 0600, "/state/new.json", "{\"a\": 1,");
	sb_write(&s, 0, 0600, "/state/new.json", " \"b\": 2,");
	sb_write(&s, FSVC_WRITE_LAST, 0600, "/state/new.json", " \"c\": 3}\n");
	sb_read(&s, "/state/new.json", 0, "/state");
	sb_save(argv[1], "write", &s, (const int[]){ 1, 0, 0, 3, 0 });

	/* Two whole chunks, built; a write over a root's file; a link. */
	sb_built(&s, K_WRITE, "/sec/new.sealed", 0, 0x10 | FSVC_WRITE_FIRST,
	    0, "sealed!");
	sb_built(&s, K_WRITE, "/sec/new.sealed", 0, 0x10 | FSVC_WRITE_LAST,
	    0, "again");
	sb_built(&s, K_READ, "/sec/new.sealed", 0, 2, 64, "");
	sb_built(&s, K_WRITE, "/pol/b.yaml", 0, 3, 044, "name: bb\n");
	sb_built(&s, K_WRITE, "/state/dangling", 0, 3, 0, "now a file");
	sb_save(argv[1], "write-big", &s, (const int[]){ 1, 0, 0, 4, 0 });

	/* Writes that would land outside the roots. */
	sb_built(&s, K_WRITE, "/pol/out/new", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/state/up/outside/new", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/pol/../outside/canary", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/outside/canary", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/pol", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/pol/sub/", 0, 3, 0, "x");
	sb_built(&s, K_WRITE, "/pol/sub", 0, 3, 0, "x");
	sb_save(argv[1], "write-out", &s, (const int[]){ 0, 0, 0, 0, 0 });

	sb_built(&s, K_UNLINK, "/state/x.json", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/state/x.json", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/pol/escape.yaml", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/pol/out/canary", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/pol/..", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/pol", 0, 0, 0, "");
	sb_built(&s, K_UNLINK, "/state/up", 1, 0, 0, "/outside/canary");
	sb_save(argv[1], "unlink", &s, (const int[]){ 0, 0, 0, 0, 2 });

	/* Certificates of what a worker wrote: a broken one, none. */
	sb_write(&s, FSVC_WRITE_FIRST | FSVC_WRITE_LAST, 0600, "/state/x.json",
	    "-----BEGIN CERTIFICATE-----\nnot base64\n"
	    "-----END CERTIFICATE-----\n");
	sb_built(&s, K_CERTS, "/state/x.json", 0, 0, 0, "");
	sb_built(&s, K_CERTS, "/state/huge.bin", 0, 0, 0, "");
	sb_built(&s, K_READ, "/state/huge.bin", 0, 0, 0, "");
	sb_built(&s, K_WRITE, "a.yaml", 0, 3, 0, "x");
	sb_save(argv[1], "certs-written", &s, (const int[]){ 0, 0, 0, 1, 0 });

	/* Requests fserve must refuse, with no answer. */
	sb_rec(&s, K_PAST, junk, sizeof(junk));
	sb_rec(&s, K_BEFORE, NULL, 0);
	sb_rec(&s, K_REPLY | K_BUILT, junk, sizeof(junk));
	sb_rec(&s, K_READ, junk, sizeof(junk));
	sb_write(&s, 0, 0600, "/state/x.json", "not begun");
	sb_built(&s, K_WRITE, "/state/x.json", 0, 3 | 8, 0, "bad mode");
	sb_built(&s, K_WRITE, "/state/x.json", 0, 3 | 0x30, 0, "too much");
	wire_w_init(&w, p, sizeof(p));
	wire_str(&w, "/pol");
	wire_u32(&w, 0);
	wire_u32(&w, 0);
	sb_rec(&s, K_LIST, p, w.len);
	sb_save(argv[1], "malformed", &s, (const int[]){ 0, 0, 0, 0, 0 });
	return 0;
}
#endif
