/* keyfile.c: key files and the guarded memory keys live in. */
#include "autoconf.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "util/err.h"
#include "util/keyfile.h"

/*
 * Guarded memory for key and secret bytes.  sodium_malloc tries to lock
 * it and goes on silently when it cannot (RLIMIT_MEMLOCK); a secret must
 * never reach swap, so check.  sodium_free wipes it.
 */
void *
secmem_alloc(size_t len)
{
	void *p;

	if ((p = sodium_malloc(len)) == NULL)
		return NULL;
	if (mlock(p, len) != 0) {
		sodium_free(p);
		return NULL;
	}
	return p;
}

void
secmem_free(void *p)
{
	if (p != NULL)
		sodium_free(p);
}

/*
 * A private key file: regular, neither group nor others may touch it (a
 * key others can write can be replaced), owned by root or by us (relayd's
 * check_file_secrecy).
 */
static int
check_secrecy(const struct stat *st, const char **why)
{
	if (!S_ISREG(st->st_mode)) {
		*why = "not a regular file";
		return SL_ERR_INVALID;
	}
	if ((st->st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		*why = "group or others may access it (chmod 600 it)";
		return SL_ERR_DENIED;
	}
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		*why = "owned by neither root nor this user";
		return SL_ERR_DENIED;
	}
	return 0;
}

/* Reads fd to its end into b[0..max]; *len > max means too big. */
static int
read_upto(int fd, uint8_t *b, size_t max, size_t *len)
{
	size_t off = 0;
	ssize_t n;

	while (off <= max) {
		if ((n = read(fd, b + off, max + 1 - off)) == -1) {
			if (errno == EINTR)
				continue;
			return SL_ERR_IO;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	*len = off;
	return 0;
}

int
keyfile_read(const char *path, int secret, uint8_t **buf, size_t *len,
    const char **why)
{
	struct stat st;
	uint8_t *b = NULL;
	size_t n;
	int fd, saved, r = SL_ERR_IO;

	if (sodium_init() < 0) {
		*why = "libsodium cannot start";
		return SL_ERR_INTERNAL;
	}
	/* Non-blocking: a FIFO in a key's place is refused, not waited on. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) ==
	    -1) {
		*why = "cannot open it";
		return SL_ERR_IO;
	}
	if (fstat(fd, &st) != 0) {
		*why = "cannot stat it";
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		r = SL_ERR_INVALID;
		goto out;
	}
	if (secret && (r = check_secrecy(&st, why)) != 0)
		goto out;
	if ((b = secmem_alloc(KEYFILE_MAX + 1)) == NULL) {
		*why = "out of locked memory";
		r = SL_ERR_NOMEM;
		goto out;
	}
	if ((r = read_upto(fd, b, KEYFILE_MAX, &n)) != 0) {
		*why = "cannot read it";
		goto out;
	}
	if (n > KEYFILE_MAX) {
		*why = "too big for a key file";
		r = SL_ERR_INVALID;
		goto out;
	}
	b[n] = '\0';
	*buf = b;
	b = NULL;	/* transferred */
	*len = n;
	r = 0;
 out:
	saved = errno;
	close(fd);
	secmem_free(b);
	errno = saved;
	return r;
}

/* Never prompts for a passphrase: our key files are not encrypted. */
int
keyfile_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return -1;
}


int
keyfile_pem(const uint8_t *pem, size_t len, int private, EVP_PKEY **out,
    const char **why)
{
	EVP_PKEY *pkey;
	BIO *bio;

	if ((bio = BIO_new_mem_buf(pem, (int)len)) == NULL) {
		*why = "out of memory";
		return SL_ERR_NOMEM;
	}
	if (private)
		pkey = PEM_read_bio_PrivateKey(bio, NULL, keyfile_no_passphrase, NULL);
	else
		pkey = PEM_read_bio_PUBKEY(bio, NULL, keyfile_no_passphrase, NULL);
	BIO_free(bio);
	ERR_clear_error();
	if (pkey == NULL) {
		if (private)
			*why = "not a PEM private key (or an encrypted one)";
		else if (strstr((const char *)pem, "PRIVATE KEY") != NULL)
			*why = "a private key: give the public one";
		else
			*why = "not a PEM public key";
		return SL_ERR_INVALID;
	}
	*out = pkey;
	return 0;
}
