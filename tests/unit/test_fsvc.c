/*
 * test_fsvc.c: a confined worker's files (util/fsvc.c) as the monitor
 * serves them (daemon/fserve.c), over a real channel to a thread that
 * plays the monitor: what is inside policy_dir, secret_dir and state_dir
 * is read, listed, written and removed; what resolves outside them (by
 * "..", by a link) is refused; a CA bundle gives out its certificates
 * and nothing else; files larger than a message come in chunks.
 */
#include "autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "util/chan.h"
#include "util/fsvc.h"
#include "conf/config.h"
#include "daemon/fserve.h"

static char top[PATH_MAX];
static char pol[PATH_MAX + 8], sec[PATH_MAX + 8], state[PATH_MAX + 8];
static char outside[PATH_MAX + 8];
static int sv[2] = { -1, -1 };
static pthread_t server;
static struct config cfg;
static int malformed;		/* requests the server found malformed */

static void *
serve(void *arg)
{
	static uint8_t buf[CHAN_MSG_MAX];
	struct fserve *fs = arg;
	struct chan_hdr h;

	while (chan_recv(sv[1], &h, buf, sizeof(buf), NULL, -1) == 1)
		if (fserve_request(fs, sv[1], &h, buf, h.len) != 0)
			malformed++;
	fserve_free(fs);
	return NULL;
}

static void
put(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static char *
path_in(const char *dir, const char *name)
{
	static char p[2][PATH_MAX * 2];
	static int k;

	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static int
setup(void **state_)
{
	struct fserve *fs;

	snprintf(top, sizeof(top), "/tmp/test_fsvc.XXXXXX");
	assert_non_null(mkdtemp(top));
	snprintf(pol, sizeof(pol), "%s/pol", top);
	snprintf(sec, sizeof(sec), "%s/sec", top);
	snprintf(state, sizeof(state), "%s/state", top);
	snprintf(outside, sizeof(outside), "%s/outside", top);
	assert_int_equal(mkdir(pol, 0700), 0);
	assert_int_equal(mkdir(sec, 0700), 0);
	assert_int_equal(mkdir(state, 0700), 0);
	assert_int_equal(mkdir(outside, 0700), 0);
	put(path_in(pol, "b.yaml"), "name: b\n", 8);
	put(path_in(pol, "a.yaml"), "name: a\n", 8);
	put(path_in(outside, "secret.txt"), "not yours\n", 10);
	put(path_in(sec, "tok.sealed"), "sealed\n", 7);
	assert_int_equal(symlink(path_in(outside, "secret.txt"),
	    path_in(pol, "escape.yaml")), 0);
	assert_int_equal(symlink("a.yaml", path_in(pol, "inner.yaml")), 0);
	assert_int_equal(symlink(path_in(pol, "a.yaml"),
	    path_in(sec, "other.sealed")), 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy_dir = pol;
	cfg.secret_dir = sec;
	cfg.state_dir = state;
	assert_non_null(fs = fserve_new(&cfg));
	assert_int_equal(chan_pair(sv), 0);
	assert_int_equal(pthread_create(&server, NULL, serve, fs), 0);
	fsvc_remote(sv[0]);
	return 0;
}

static int
teardown(void **state_)
{
	char cmd[PATH_MAX + 16];

	fsvc_remote(-1);
	close(sv[0]);
	pthread_join(server, NULL);
	close(sv[1]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void
t_read_inside(void **state_)
{
	char *buf = NULL;
	size_t len = 0;

	assert_true(fsvc_is_remote());
	assert_int_equal(fsvc_read(path_in(pol, "a.yaml"), 1024, &buf, &len),
	    0);
	assert_int_equal(len, 8);
	assert_string_equal(buf, "name: a\n");
	free(buf);
	/* A link that stays in the folders is followed. */
	assert_int_equal(fsvc_read(path_in(pol, "inner.yaml"), 1024, &buf,
	    &len), 0);
	assert_string_equal(buf, "name: a\n");
	free(buf);
}

static void
t_read_outside(void **state_)
{
	char *buf = NULL;
	size_t len = 0;

	assert_int_equal(fsvc_read(path_in(outside, "secret.txt"), 1024, &buf,
	    &len), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(fsvc_read(path_in(pol, "../outside/secret.txt"), 1024,
	    &buf, &len), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(fsvc_read(path_in(pol, "escape.yaml"), 1024, &buf,
	    &len), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(fsvc_read("/etc/passwd", 1 << 20, &buf, &len), -1);
	assert_int_equal(errno, EACCES);
	/* Not a regular file, inside or not. */
	assert_int_equal(fsvc_read(pol, 1024, &buf, &len), -1);
	assert_int_equal(errno, EISDIR);
	assert_int_equal(fsvc_read(path_in(pol, "none.yaml"), 1024, &buf,
	    &len), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(malformed, 0);
}

static void
t_read_in(void **state_)
{
	char *buf = NULL;
	size_t len = 0;

	assert_int_equal(fsvc_read_in(sec, path_in(sec, "tok.sealed"), 1024,
	    &buf, &len), 0);
	assert_string_equal(buf, "sealed\n");
	free(buf);
	/* Inside the roots, but not inside the folder it must stay in. */
	assert_int_equal(fsvc_read_in(sec, path_in(sec, "other.sealed"), 1024,
	    &buf, &len), -1);
	assert_int_equal(errno, ELOOP);
}

static void
t_chunks(void **state_)
{
	size_t n = 3 * FSVC_CHUNK + 123, len = 0, i;
	char *big = malloc(n), *buf = NULL;

	assert_non_null(big);
	for (i = 0; i < n; i++)
		big[i] = (char)('a' + i % 26);
	put(path_in(state, "big.json"), big, n);
	assert_int_equal(fsvc_read(path_in(state, "big.json"), n, &buf, &len),
	    0);
	assert_int_equal(len, n);
	assert_memory_equal(buf, big, n);
	free(buf);
	assert_int_equal(fsvc_read(path_in(state, "big.json"), n - 1, &buf,
	    &len), -1);
	assert_int_equal(errno, EFBIG);
	/* Written in chunks too, whole. */
	big[0] = 'Z';
	assert_int_equal(fsvc_write(path_in(state, "big2.json"), big, n, 0600),
	    0);
	assert_int_equal(fsvc_read(path_in(state, "big2.json"), n, &buf, &len),
	    0);
	assert_int_equal(len, n);
	assert_memory_equal(buf, big, n);
	free(buf);
	free(big);
}

static void
t_list(void **state_)
{
	char **names = NULL;
	size_t n = 0;

	assert_int_equal(fsvc_list(pol, &names, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(names[0], "a.yaml");
	assert_string_equal(names[1], "b.yaml");
	assert_string_equal(names[2], "escape.yaml");
	assert_string_equal(names[3], "inner.yaml");
	fsvc_list_free(names, n);
	assert_int_equal(fsvc_list(outside, &names, &n), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(fsvc_list(top, &names, &n), -1);
	assert_int_equal(errno, EACCES);
}

static void
t_write_unlink(void **state_)
{
	struct stat sb;
	char *buf = NULL;
	size_t len = 0;

	assert_int_equal(fsvc_write(path_in(pol, "new.yaml"), "name: new\n",
	    10, 0600), 0);
	assert_int_equal(stat(path_in(pol, "new.yaml"), &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(fsvc_read(path_in(pol, "new.yaml"), 64, &buf, &len), 0);
	assert_string_equal(buf, "name: new\n");
	free(buf);
	/* Replaced whole. */
	assert_int_equal(fsvc_write(path_in(pol, "new.yaml"), "x", 1, 0644), 0);
	assert_int_equal(fsvc_read(path_in(pol, "new.yaml"), 64, &buf, &len), 0);
	assert_string_equal(buf, "x");
	free(buf);
	assert_int_equal(fsvc_unlink(path_in(pol, "new.yaml")), 0);
	assert_int_equal(stat(path_in(pol, "new.yaml"), &sb), -1);
	assert_int_equal(fsvc_unlink(path_in(pol, "new.yaml")), -1);
	assert_int_equal(errno, ENOENT);
	/* Nowhere else, and nothing that is not a plain name. */
	assert_int_equal(fsvc_write(path_in(outside, "x"), "x", 1, 0644), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(stat(path_in(outside, "x"), &sb), -1);
	assert_int_equal(fsvc_write(path_in(pol, "../outside/y"), "x", 1,
	    0644), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(fsvc_write(path_in(pol, ".."), "x", 1, 0644), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fsvc_unlink(path_in(outside, "secret.txt")), -1);
	assert_int_equal(errno, EACCES);
	assert_int_equal(stat(path_in(outside, "secret.txt"), &sb), 0);
	/* The link itself goes, not what it points to. */
	assert_int_equal(fsvc_unlink(path_in(pol, "escape.yaml")), 0);
	assert_int_equal(stat(path_in(outside, "secret.txt"), &sb), 0);
	assert_int_equal(malformed, 0);
}

/* A self-signed certificate and its key, as PEM, into path. */
static void
cert_and_key(const char *path, int with_cert)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x = X509_new();
	X509_NAME *n;
	FILE *f;

	assert_non_null(k);
	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)"test ca", -1, -1, 0);
	X509_set_issuer_name(x, n);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL),
	    1);
	if (with_cert)
		assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(k);
}

static void
t_certs(void **state_)
{
	char *buf = NULL;
	size_t len = 0;

	/* Anywhere, even outside the folders: certificates are public. */
	cert_and_key(path_in(outside, "bundle.pem"), 1);
	assert_int_equal(fsvc_certs(path_in(outside, "bundle.pem"), 1 << 20,
	    &buf, &len), 0);
	assert_non_null(strstr(buf, "-----BEGIN CERTIFICATE-----"));
	assert_null(strstr(buf, "PRIVATE KEY"));
	free(buf);
	/* A key alone: nothing to give. */
	cert_and_key(path_in(outside, "key.pem"), 0);
	assert_int_equal(fsvc_certs(path_in(outside, "key.pem"), 1 << 20, &buf,
	    &len), -1);
	assert_int_equal(errno, ENODATA);
	assert_int_equal(fsvc_certs(path_in(outside, "secret.txt"), 1 << 20,
	    &buf, &len), -1);
	assert_int_equal(errno, ENODATA);
}

static void
t_malformed(void **state_)
{
	struct fserve *fs = fserve_new(&cfg);
	struct chan_hdr h = { FSVC_READ, 3, 7 };
	int pair[2];

	assert_non_null(fs);
	assert_int_equal(chan_pair(pair), 0);
	/* Fields that do not read, types that are not its. */
	assert_int_equal(fserve_request(fs, pair[0], &h,
	    (const uint8_t *)"abc", 3), -1);
	h.type = FSVC_UNLINK + 1;
	assert_int_equal(fserve_request(fs, pair[0], &h, NULL, 0), -1);
	/* A chunk of a write never begun. */
	{
		uint8_t b[64];
		size_t o = 0;
		const char *p = "/tmp/x";
		uint32_t v[2] = { FSVC_WRITE_LAST, 0644 }, l = (uint32_t)strlen(p),
		    z = 0;

		memcpy(b, v, 8);
		o = 8;
		memcpy(b + o, &l, 4);
		memcpy(b + o + 4, p, l);
		o += 4 + l;
		memcpy(b + o, &z, 4);
		o += 4;
		h.type = FSVC_WRITE;
		h.len = (uint32_t)o;
		assert_int_equal(fserve_request(fs, pair[0], &h, b, o), -1);
	}
	close(pair[0]);
	close(pair[1]);
	fserve_free(fs);
}

static void
t_local(void **state_)
{
	char *buf = NULL, **names = NULL;
	size_t len = 0, n = 0;

	fsvc_remote(-1);
	assert_false(fsvc_is_remote());
	/* Here every path is the process's own to open. */
	assert_int_equal(fsvc_read(path_in(outside, "secret.txt"), 64, &buf,
	    &len), 0);
	assert_string_equal(buf, "not yours\n");
	free(buf);
	assert_int_equal(fsvc_write(path_in(outside, "w"), "w", 1, 0600), 0);
	assert_int_equal(fsvc_list(outside, &names, &n), 0);
	assert_true(n >= 2);
	fsvc_list_free(names, n);
	assert_int_equal(fsvc_unlink(path_in(outside, "w")), 0);
	assert_int_equal(fsvc_read_in(sec, path_in(sec, "other.sealed"), 64,
	    &buf, &len), -1);
	assert_int_equal(errno, ELOOP);
	fsvc_remote(sv[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_read_inside),
		cmocka_unit_test(t_read_outside),
		cmocka_unit_test(t_read_in),
		cmocka_unit_test(t_chunks),
		cmocka_unit_test(t_list),
		cmocka_unit_test(t_write_unlink),
		cmocka_unit_test(t_certs),
		cmocka_unit_test(t_malformed),
		cmocka_unit_test(t_local),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
