/* cmd_keys.c: sluicectl keygen and seal, offline. */
#include "autoconf.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "util/err.h"
#include "util/names.h"
#include "keys/sealed.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"

/* What keys_generate writes, and what each file is for. */
static const struct {
	const char	*file;
	const char	*json;
	const char	*what;
} keyfiles[] = {
	{ "gateway.key", "gateway_key",
	    "(0600) X25519 private key: sluiced.yaml gateway_key" },
	{ "gateway.pub", "gateway_pub",
	    "(0644) X25519 public key: sluicectl seal --pub" },
	{ "signing.key", "signing_key",
	    "(0600) ECDSA P-256 private key: sluiced.yaml signing_key" },
	{ "signing.pub", "signing_pub",
	    "(0644) ECDSA P-256 public key: sluicectl audit verify --pub" },
};
#define NKEYFILES	(sizeof(keyfiles) / sizeof(keyfiles[0]))

/* Creates dir 0700; an existing directory is used as it is. */
static int
make_dir(const struct cmd *c, const char *dir)
{
	struct stat st;
	int saved;

	if (mkdir(dir, 0700) == 0)
		return EXIT_OK;
	saved = errno;
	if (saved == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return EXIT_OK;
	cmd_prefix(c, stderr);
	fput_safe(dir, stderr);
	fprintf(stderr, ": %s\n", saved == EEXIST ? "not a directory" :
	    strerror(saved));
	return EXIT_FAIL;
}

static void
keygen_text(const char *dir, const char *idhex)
{
	size_t i;

	for (i = 0; i < NKEYFILES; i++) {
		fputs("wrote ", stdout);
		fput_safe(dir, stdout);
		printf("/%s %s\n", keyfiles[i].file, keyfiles[i].what);
	}
	printf("gateway key id: %s\n", idhex);
}

static int
keygen_json(const char *dir, const char *idhex)
{
	json_t *o, *files;
	char path[4096];
	size_t i;
	int r = -1;

	if ((o = json_object()) == NULL ||
	    json_object_set_new(o, "dir", json_string(dir)) != 0 ||
	    (files = json_object()) == NULL ||
	    json_object_set_new(o, "files", files) != 0)
		goto out;
	for (i = 0; i < NKEYFILES; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, keyfiles[i].file);
		if (json_object_set_new(files, keyfiles[i].json,
		    json_string(path)) != 0)
			goto out;
	}
	if (json_object_set_new(o, "gateway_key_id", json_string(idhex)) != 0)
		goto out;
	r = print_json(o);
 out:
	json_decref(o);
	return r;
}

/* The id of the gateway key just written, read back from gateway.pub. */
static int
written_id(const struct cmd *c, const char *dir,
    char idhex[2 * SEALED_KEYID_LEN + 1])
{
	uint8_t pk[32], id[SEALED_KEYID_LEN];
	const char *why = NULL;
	char path[4096];

	if ((size_t)snprintf(path, sizeof(path), "%s/gateway.pub", dir) >=
	    sizeof(path) || gwkey_load_pub(path, pk, &why) != 0) {
		cmd_err(c, "cannot read back gateway.pub: %s",
		    why != NULL ? why : "path too long");
		return EXIT_FAIL;
	}
	gwkey_id(pk, id);
	sodium_bin2hex(idhex, 2 * SEALED_KEYID_LEN + 1, id, sizeof(id));
	return EXIT_OK;
}

int
cmd_keygen(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char idhex[2 * SEALED_KEYID_LEN + 1];
	const char *dir = NULL, *why = NULL;
	int ch, r, rc;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'o':
			dir = optarg;
			break;
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_err(c, "unexpected argument '%s'",
		    argv[optind]);
	if (dir == NULL || *dir == '\0')
		return cmd_usage_err(c, "missing --out DIR");
	if ((rc = make_dir(c, dir)) != EXIT_OK)
		return rc;
	if ((r = keys_generate(dir, &why)) != 0) {
		cmd_prefix(c, stderr);
		fput_safe(dir, stderr);
		if (r == SL_ERR_EXISTS)
			fputs(": already holds gateway.key, gateway.pub, "
			    "signing.key or signing.pub; nothing written\n",
			    stderr);
		else
			fprintf(stderr, ": %s%s%s\n", why ? why : err_str(r),
			    r == SL_ERR_IO ? ": " : "",
			    r == SL_ERR_IO ? strerror(errno) : "");
		return EXIT_FAIL;
	}
	if ((rc = written_id(c, dir, idhex)) != EXIT_OK)
		return rc;
	if (ctl->json)
		return keygen_json(dir, idhex) == 0 ? EXIT_OK : EXIT_FAIL;
	keygen_text(dir, idhex);
	return EXIT_OK;
}

/*
 * The version a seal gets unless told: microseconds since the epoch, so
 * that rotations a script makes one after the other, even within one
 * second, each get a higher one than the last (and than the seconds
 * earlier releases used), and it stays exact in a JSON number.  A clock
 * that steps back can still give a lower one; the daemon then refuses it
 * and says so.
 */
static uint64_t
clock_version(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
		return (uint64_t)time(NULL) * 1000000u;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A --secret-version: decimal digits only, up to 2^64 - 1. */
static int
parse_version(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/* Reads fd into b[0..cap) until it is full or the input ends. */
static int
read_fd(int fd, uint8_t *b, size_t cap, size_t *len)
{
	size_t off = 0;
	ssize_t n;

	while (off < cap) {
		if ((n = read(fd, b + off, cap - off)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	*len = off;
	return 0;
}

/*
 * Reads the value from stdin into guarded memory (wiped by sodium_free):
 * at most the kind's bound + 2 bytes are kept, and one byte more is read
 * only to learn that there is more.  For a header value one trailing
 * "\n" or "\r\n" goes, as echo and editors add it, and any other CR, LF
 * or NUL is refused; a document (pem, json) is kept as it is, for
 * sealed_seal to judge.
 */
static int
read_value(const struct cmd *c, enum sealed_kind kind, uint8_t **buf,
    size_t *len)
{
	const size_t max = kind == SEALED_KIND_HEADER ? SEALED_MAX_VALUE :
	    SEALED_MAX_DOC;
	const size_t cap = max + 2;
	uint8_t *b, more;
	size_t n, extra = 0;
	int rc = EXIT_FAIL;

	if ((b = sodium_malloc(cap)) == NULL) {
		cmd_err(c, "out of memory");
		return EXIT_FAIL;
	}
	if (read_fd(STDIN_FILENO, b, cap, &n) != 0 ||
	    (n == cap && read_fd(STDIN_FILENO, &more, 1, &extra) != 0)) {
		cmd_err(c, "standard input: %s", strerror(errno));
		goto out;
	}
	sodium_memzero(&more, sizeof(more));
	if (kind != SEALED_KIND_HEADER)
		;	/* a document keeps its last newline */
	else if (n >= 2 && b[n - 2] == '\r' && b[n - 1] == '\n')
		n -= 2;
	else if (n >= 1 && b[n - 1] == '\n')
		n--;
	if (n == 0) {
		cmd_err(c, "no value on standard input");
		goto out;
	}
	if (extra > 0 || n > max) {
		cmd_err(c, "the value is longer than %zu bytes", max);
		goto out;
	}
	if (kind == SEALED_KIND_HEADER && (memchr(b, '\r', n) != NULL ||
	    memchr(b, '\n', n) != NULL || memchr(b, '\0', n) != NULL)) {
		cmd_err(c, "the value holds a CR, LF or NUL byte (only one "
		    "trailing newline is dropped; a key or JSON document is "
		    "sealed with --kind pem or --kind json)");
		goto out;
	}
	*buf = b;
	b = NULL;	/* transferred */
	*len = n;
	rc = EXIT_OK;
 out:
	if (b != NULL)
		sodium_free(b);
	return rc;
}

static int
write_full(int fd, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The folder of path and a hidden temporary name next to it. */
static int
tmp_name(const char *path, char *dir, size_t dlen, char *tmp, size_t tlen)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash != NULL ? slash + 1 : path;
	int n;

	if (*base == '\0')
		return -1;
	if (slash == NULL)
		n = snprintf(dir, dlen, ".");
	else if (slash == path)
		n = snprintf(dir, dlen, "/");
	else
		n = snprintf(dir, dlen, "%.*s", (int)(slash - path), path);
	if (n < 0 || (size_t)n >= dlen)
		return -1;
	/* Hidden: a secret_dir watcher takes only NAME.sealed. */
	n = snprintf(tmp, tlen, "%s/.%s.XXXXXX", dir, base);
	return n < 0 || (size_t)n >= tlen ? -1 : 0;
}

/*
 * Writes blob to path, 0644, through a temporary file and a rename, so
 * that whoever watches the folder never sees half a file; an existing
 * path is replaced, which is how a secret is rotated.
 */
static int
write_out(const struct cmd *c, const char *path, const uint8_t *blob,
    size_t len)
{
	char dir[4096], tmp[4096 + 16];
	int fd, dfd, rc = EXIT_FAIL;

	if (tmp_name(path, dir, sizeof(dir), tmp, sizeof(tmp)) != 0) {
		cmd_err(c, "--out %s: not a file name", path);
		return EXIT_FAIL;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		cmd_err(c, "%s: cannot create a file beside it: %s", path,
		    strerror(errno));
		return EXIT_FAIL;
	}
	if (fchmod(fd, 0644) != 0 || write_full(fd, blob, len) != 0 ||
	    fsync(fd) != 0) {
		cmd_err(c, "%s: %s", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	if (close(fd) != 0) {
		cmd_err(c, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, path) != 0) {
		cmd_err(c, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* Best effort: the file is in place whether or not this syncs. */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		(void)fsync(dfd);
		close(dfd);
	}
	rc = EXIT_OK;
 out:
	if (rc != EXIT_OK)
		unlink(tmp);
	return rc;
}

/*
 * A host as sealed_seal stored it ("*." kept, the rest normalised), so
 * that the operator sees the A-labels of an IDN; it was sealed, so it
 * normalises.
 */
static void
print_host(const char *host, FILE *f)
{
	char norm[NAME_BUFSZ];
	size_t pre = strncmp(host, "*.", 2) == 0 ? 2 : 0;

	if (name_from_policy(host + pre, norm, NULL) != 0) {
		fput_safe(host, f);
		return;
	}
	fprintf(f, "%s%s", pre ? "*." : "", norm);
}

/* "sealed NAME (KIND) version N to gateway key ID, hosts ..." on f. */
static void
seal_summary(FILE *f, const struct sealed_in *in, const uint8_t *pk,
    const char *out)
{
	const char *name = in->name;
	const char *const *hosts = in->hosts;
	size_t nhosts = in->nhosts;
	uint8_t id[SEALED_KEYID_LEN];
	char idhex[2 * SEALED_KEYID_LEN + 1];
	size_t i;

	gwkey_id(pk, id);
	sodium_bin2hex(idhex, sizeof(idhex), id, sizeof(id));
	fprintf(f, "sealed %s", name);
	if (in->kind != SEALED_KIND_HEADER)
		fprintf(f, " (%s)", sealed_kind_name(in->kind));
	fprintf(f, " version %" PRIu64 " to gateway key %s, ", in->version,
	    idhex);
	if (nhosts == 0)
		fputs("any host", f);
	for (i = 0; i < nhosts; i++) {
		fputs(i == 0 ? "hosts " : " ", f);
		print_host(hosts[i], f);
	}
	if (out != NULL) {
		fputs(": ", f);
		fput_safe(out, f);
	}
	fputc('\n', f);
}

struct seal_args {
	const char	*pub;
	const char	*out;
	struct sealed_in in;
	const char	**hosts;	/* argc entries */
};

static int
seal_opts(const struct cmd *c, int argc, char **argv, struct seal_args *a)
{
	static const struct option opts[] = {
		{ "pub", required_argument, NULL, 'p' },
		{ "name", required_argument, NULL, 'n' },
		{ "host", required_argument, NULL, 'H' },
		{ "secret-version", required_argument, NULL, 'v' },
		{ "kind", required_argument, NULL, 'k' },
		{ "out", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch, kind, version = 0;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			a->pub = optarg;
			break;
		case 'n':
			a->in.name = optarg;
			break;
		case 'H':
			a->hosts[a->in.nhosts++] = optarg;
			break;
		case 'v':
			if (parse_version(optarg, &a->in.version) != 0)
				return cmd_usage_err(c, "--secret-version: "
				    "'%s' is not a whole number from 0 to "
				    "2^64-1", optarg);
			version = 1;
			break;
		case 'k':
			if ((kind = sealed_kind_parse(optarg)) < 0)
				return cmd_usage_err(c, "--kind: '%s' is not "
				    "header, pem or json", optarg);
			a->in.kind = (enum sealed_kind)kind;
			break;
		case 'o':
			a->out = optarg;
			break;
		case 'j':
			break;	/* taken by every command; the blob is output */
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_err(c, "unexpected argument '%s' (the value "
		    "is read from standard input)", argv[optind]);
	if (a->pub == NULL)
		return cmd_usage_err(c, "missing --pub gateway.pub");
	if (a->in.name == NULL)
		return cmd_usage_err(c, "missing --name NAME");
	a->in.created = (int64_t)time(NULL);
	if (!version)
		a->in.version = clock_version();
	return CMD_GO;
}

/*
 * Refuses a --name or --host that sealed_seal would refuse, naming it,
 * before the value is read.
 */
static int
check_names(const struct cmd *c, const struct seal_args *a)
{
	char norm[NAME_BUFSZ];
	const char *h, *why = NULL;
	size_t i, n = strlen(a->in.name);

	if (n < 1 || n > SEALED_NAME_MAX || strspn(a->in.name,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789._-") != n)
		return cmd_usage_err(c, "--name: a name is 1 to %d of "
		    "[A-Za-z0-9._-]", SEALED_NAME_MAX);
	for (i = 0; i < a->in.nhosts; i++) {
		h = a->hosts[i];
		if (name_from_policy(h + (strncmp(h, "*.", 2) == 0 ? 2 : 0),
		    norm, &why) == 0)
			continue;
		cmd_prefix(c, stderr);
		fputs("--host '", stderr);
		fput_safe(h, stderr);
		fprintf(stderr, "': %s\n", why);
		cmd_usage(c, stderr);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Seals what stdin holds with a's options and writes the blob out. */
static int
seal_run(const struct cmd *c, struct seal_args *a)
{
	uint8_t pk[32], *value = NULL, *blob = NULL;
	const char *why = NULL;
	size_t vlen = 0, blen = 0;
	int rc = EXIT_FAIL;

	a->in.hosts = a->hosts;
	if (gwkey_load_pub(a->pub, pk, &why) != 0) {
		cmd_err(c, "%s: %s", a->pub, why);
		goto out;
	}
	if ((rc = read_value(c, a->in.kind, &value, &vlen)) != EXIT_OK)
		goto out;
	rc = EXIT_FAIL;
	a->in.value = value;
	a->in.value_len = vlen;
	if (sealed_seal(pk, &a->in, &blob, &blen, &why) != 0) {
		cmd_err(c, "cannot seal: %s", why);
		goto out;
	}
	if (a->in.nhosts == 0)
		cmd_err(c, "warning: no --host: the secret may be injected "
		    "into any host a policy names");
	if (a->out != NULL) {
		if ((rc = write_out(c, a->out, blob, blen)) != EXIT_OK)
			goto out;
		seal_summary(stdout, &a->in, pk, a->out);
	} else {
		if (fwrite(blob, 1, blen, stdout) != blen) {
			cmd_err(c, "standard output: %s", strerror(errno));
			goto out;
		}
		seal_summary(stderr, &a->in, pk, NULL);
	}
	rc = EXIT_OK;
 out:
	if (value != NULL)
		sodium_free(value);
	free(blob);
	return rc;
}

int
cmd_seal(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	struct seal_args a;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((a.hosts = calloc((size_t)argc, sizeof(*a.hosts))) == NULL) {
		cmd_err(c, "out of memory");
		return EXIT_FAIL;
	}
	if ((rc = seal_opts(c, argc, argv, &a)) != CMD_GO ||
	    (rc = check_names(c, &a)) != EXIT_OK)
		goto out;
	rc = EXIT_USAGE;
	if (a.out == NULL && isatty(STDOUT_FILENO)) {
		cmd_usage_err(c, "not writing a sealed blob to a terminal: "
		    "redirect standard output or give --out FILE");
		goto out;
	}
	/* Typed at a terminal, the value would echo on the screen. */
	if (isatty(STDIN_FILENO)) {
		cmd_usage_err(c, "the value is read from standard input: pipe "
		    "or redirect it there, not from a terminal");
		goto out;
	}
	rc = seal_run(c, &a);
 out:
	free(a.hosts);
	return rc;
}
