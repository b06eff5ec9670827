/* kclient.c: requests to the keys process (kclient.h). */
#include "autoconf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "util/chan.h"
#include "util/err.h"
#include "util/keyfile.h"
#include "util/log.h"
#include "util/wire.h"
#include "keys/kclient.h"
#include "keys/sealed.h"

struct kchan {
	int		 fd;
	unsigned	 role;
	pthread_mutex_t	 mtx;
	uint64_t	 next;		/* the last request id */
	int		 broken;	/* a transport error: no more calls */
};

static struct kchan *ctl_chan;
static atomic_int remote;
static atomic_int phase = KPROTO_START;
static _Thread_local struct kchan *bound;

struct kchan *
kchan_new(int fd, unsigned role)
{
	struct kchan *k;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return NULL;
	k->fd = fd;
	k->role = role;
	pthread_mutex_init(&k->mtx, NULL);
	return k;
}

void
kchan_free(struct kchan *k)
{
	if (k == NULL)
		return;
	if (k->fd != -1)
		close(k->fd);
	pthread_mutex_destroy(&k->mtx);
	free(k);
}

void
kclient_start(struct kchan *ctl)
{
	ctl_chan = ctl;
	atomic_store(&remote, 1);
}

void
kclient_stop(void)
{
	ctl_chan = NULL;
}

int
kclient_remote(void)
{
	return atomic_load(&remote);
}

void
kclient_bind(struct kchan *k)
{
	bound = k;
}

/* The answer to id, or a transport error. */
static int
await(struct kchan *k, uint64_t id, struct chan_hdr *h, void *ans,
    size_t cap)
{
	int r;

	for (;;) {
		if ((r = chan_recv(k->fd, h, ans, cap, NULL,
		    KCLIENT_TIMEOUT_MS)) != 1)
			return r == 0 ? SL_ERR_IO : r;
		if (h->id == id && (h->type == KPROTO_OK ||
		    h->type == KPROTO_ERR))
			return 0;
		/* Only answers come this way, each to the call waiting. */
		return SL_ERR_INVALID;
	}
}

int
kclient_call(uint32_t type, const void *req, size_t len, void *ans,
    size_t cap, size_t *anslen, char why[KPROTO_WHY_MAX])
{
	struct kchan *k = bound != NULL ? bound : ctl_chan;
	struct chan_hdr h;
	struct wire_r rd;
	const char *w;
	uint64_t id;
	uint32_t code;
	int r;

	*anslen = 0;
	if (k == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "no keys process");
		return SL_ERR_INTERNAL;
	}
	/* What the table refuses would end this process: never sent. */
	if (kproto_admit(type, len, k->role, (enum kproto_phase)
	    atomic_load(&phase), &w) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "not sent: %s", w);
		log_errx("keys", "%s (%u)", why, type);
		return SL_ERR_INVALID;
	}
	pthread_mutex_lock(&k->mtx);
	if (k->broken) {
		pthread_mutex_unlock(&k->mtx);
		snprintf(why, KPROTO_WHY_MAX, "the keys process is gone");
		return SL_ERR_IO;
	}
	id = ++k->next;
	if ((r = chan_send(k->fd, type, id, req, len, -1)) == 0)
		r = await(k, id, &h, ans, cap);
	if (r != 0)
		k->broken = 1;
	pthread_mutex_unlock(&k->mtx);
	if (r != 0) {
		snprintf(why, KPROTO_WHY_MAX, "the keys process is gone (%s)",
		    r == SL_ERR_IO ? strerror(errno) : "a malformed answer");
		log_errx("keys", "%s", why);
		return SL_ERR_IO;
	}
	if (h.type == KPROTO_OK) {
		*anslen = h.len;
		return 0;
	}
	wire_r_init(&rd, ans, h.len);
	code = wire_get_u32(&rd);
	wire_get_str(&rd, why, KPROTO_WHY_MAX);
	if (rd.bad || code == 0 || code > 64) {
		snprintf(why, KPROTO_WHY_MAX, "a malformed refusal");
		return SL_ERR_INTERNAL;
	}
	return -(int)code;
}

int
kclient_hello(char why[KPROTO_WHY_MAX])
{
	uint8_t ans[64];
	struct wire_r rd;
	size_t n;
	int r;

	if ((r = kclient_call(KPROTO_HELLO, NULL, 0, ans, sizeof(ans), &n,
	    why)) != 0)
		return r;
	wire_r_init(&rd, ans, n);
	if (wire_get_u32(&rd) != KPROTO_VERSION || wire_done(&rd) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "the keys process speaks another "
		    "version");
		return SL_ERR_INVALID;
	}
	return 0;
}

int
kclient_ready(char why[KPROTO_WHY_MAX])
{
	uint8_t ans[16];
	size_t n;
	int r;

	if ((r = kclient_call(KPROTO_READY, NULL, 0, ans, sizeof(ans), &n,
	    why)) == 0)
		atomic_store(&phase, KPROTO_RUN);
	return r;
}

int
kclient_store_keys(uint8_t *fpkey, uint8_t *phkey, char why[KPROTO_WHY_MAX])
{
	const uint8_t *a, *b;
	struct wire_r rd;
	uint8_t *ans;
	size_t n, la, lb;
	int r;

	if ((ans = secmem_alloc(256)) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "out of locked memory");
		return SL_ERR_NOMEM;
	}
	if ((r = kclient_call(KPROTO_STORE_KEYS, NULL, 0, ans, 256, &n,
	    why)) == 0) {
		wire_r_init(&rd, ans, n);
		a = wire_get_bytes(&rd, 32, &la);
		b = wire_get_bytes(&rd, 32, &lb);
		if (wire_done(&rd) != 0 || la != 32 || lb != 32) {
			snprintf(why, KPROTO_WHY_MAX, "a malformed answer");
			r = SL_ERR_INTERNAL;
		} else {
			memcpy(fpkey, a, 32);
			memcpy(phkey, b, 32);
		}
	}
	secmem_free(ans);
	return r;
}

/* The fields of an opened secret (kproto.h, SEALED_OPEN) into s. */
static int
read_opened(struct wire_r *rd, struct sealed_secret *s)
{
	const uint8_t *keyid, *value;
	size_t klen, vlen, i;
	uint32_t kind, n;

	wire_get_str(rd, s->name, sizeof(s->name));
	kind = wire_get_u32(rd);
	s->version = wire_get_u64(rd);
	s->created = (int64_t)wire_get_u64(rd);
	keyid = wire_get_bytes(rd, SEALED_KEYID_LEN, &klen);
	n = wire_get_u32(rd);
	if (rd->bad || kind > SEALED_KIND_MAX || klen != SEALED_KEYID_LEN ||
	    n > SEALED_MAX_HOSTS)
		return SL_ERR_INVALID;
	s->kind = (enum sealed_kind)kind;
	memcpy(s->keyid, keyid, klen);
	for (i = 0; i < n; i++)
		wire_get_str(rd, s->hosts[i], sizeof(s->hosts[i]));
	s->nhosts = n;
	value = wire_get_bytes(rd, SEALED_MAX_DOC, &vlen);
	if (wire_done(rd) != 0)
		return SL_ERR_INVALID;
	if ((s->value = secmem_alloc(vlen + 1)) == NULL)
		return SL_ERR_NOMEM;
	memcpy(s->value, value, vlen);
	s->value[vlen] = '\0';
	s->value_len = vlen;
	return 0;
}

int
kclient_sealed_open(const uint8_t *blob, size_t len,
    struct sealed_secret **out, char why[KPROTO_WHY_MAX])
{
	struct sealed_secret *s = NULL;
	uint8_t *req = NULL, *ans = NULL;
	struct wire_w wr;
	struct wire_r rd;
	size_t n = 0;
	int r = SL_ERR_NOMEM;

	if (len < SEALED_HEADER_LEN || len > SEALED_MAX_BLOB) {
		snprintf(why, KPROTO_WHY_MAX, "not a sealed secret (size)");
		return SL_ERR_INVALID;
	}
	if ((req = malloc(len + 8)) == NULL ||
	    (ans = secmem_alloc(CHAN_MSG_MAX)) == NULL ||
	    (s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(why, KPROTO_WHY_MAX, "out of memory");
		goto out;
	}
	wire_w_init(&wr, req, len + 8);
	wire_bytes(&wr, blob, len);
	if ((r = kclient_call(KPROTO_SEALED_OPEN, req, wr.len, ans,
	    CHAN_MSG_MAX, &n, why)) != 0)
		goto out;
	wire_r_init(&rd, ans, n);
	if ((r = read_opened(&rd, s)) != 0) {
		snprintf(why, KPROTO_WHY_MAX, "a malformed answer");
		goto out;
	}
	*out = s;
	s = NULL;	/* transferred */
 out:
	secmem_free(ans);	/* wipes the value */
	free(req);
	sealed_secret_free(s);
	return r;
}

#ifdef SLUICE_TEST_HOOKS
int
kclient_test_violation(void)
{
	struct chan_hdr h;
	uint8_t ans[64];
	int r;

	if (ctl_chan == NULL)
		return -1;
	pthread_mutex_lock(&ctl_chan->mtx);
	r = chan_send(ctl_chan->fd, 0x7777, ++ctl_chan->next, "x", 1, -1);
	/* No answer comes: the keys process kills this one. */
	if (r == 0)
		r = chan_recv(ctl_chan->fd, &h, ans, sizeof(ans), NULL, 5000);
	pthread_mutex_unlock(&ctl_chan->mtx);
	return r < 0 ? -1 : 0;
}
#endif
