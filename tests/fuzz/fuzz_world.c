/*
 * fuzz_world.c: the world of fuzz_icpt and fuzz_h2 (fuzz_world.h): its
 * PKI, secrets, policies, minted token and upstream listener, the
 * upstreams' server side, and what both check at the end of an input.
 */
#include "autoconf.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "util/addr.h"
#include "util/err.h"
#include "util/log.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/placeholder.h"
#include "keys/sealed.h"
#include "keys/secrets.h"
#include "keys/tlsup.h"
#include "loop/loop.h"
#include "loop/mintcache.h"
#include "loop/state.h"
#include "loop/upool.h"
#include "conn/conn.h"
#include "conn/conn_int.h"
#include "conn/icpt_int.h"
#include "fuzz_check.h"
#include "fuzz_world.h"

/*
 * pol[0], after its name and ALPN lines: every answer the sandbox gets is
 * to an injected request.  Every inject rule also sets the minted token
 * ({{token:svc}}; rule "tk", /t/ and below, as is and base64'd and no
 * secret of its own); rule "sig" (/sig/ and below) signs with SigV4, so
 * a request with a body there is held until the body is whole.
 */
static const char policy_inject_only[] =
	"egress:\n"
	"  allow: [{domain: " AUTH "}]\n"
	"tokens:\n"
	"  - {name: svc, kind: oauth_client_credentials, client_id: fuzz,\n"
	"     token_url: \"https://" AUTH "/t\", secret: tok}\n"
	"intercept:\n"
	"  - name: tk\n"
	"    match: {host: " HOST ", path: \"/t/**\"}\n"
	"    inject:\n"
	"      set: {authorization: \"Bearer {{token:svc}}\",\n"
	"            x-b: \"{{ token:svc | base64 }}\"}\n"
	"  - name: inj\n"
	"    match: {host: " HOST ", path: \"/v1/**\"}\n"
	"    inject:\n"
	"      set: {authorization: \"Bearer {{secret:tok}}\",\n"
	"            x-t: \"{{token:svc}}\"}\n"
	"      remove: [cookie]\n"
	"      placeholders: [tok]\n"
	"  - name: sig\n"
	"    match: {host: " HOST ", path: \"/sig/**\"}\n"
	"    inject:\n"
	"      set: {x-t: \"{{token:svc}}\"}\n"
	"      sigv4: {secret: aws, service: execute-api, region: us-east-1}\n"
	"  - name: nope\n"
	"    match: {host: " HOST "}\n"
	"    action: deny\n";

/* pol[1], after its name and ALPN lines: inject, pass and deny. */
static const char policy_mixed[] =
	"intercept:\n"
	"  - name: inj\n"
	"    match: {host: " HOST ", path: \"/v1/**\"}\n"
	"    inject:\n"
	"      set: {authorization: \"Bearer {{secret:tok}}\"}\n"
	"      placeholders: [tok]\n"
	"  - name: pub\n"
	"    match: {host: " HOST ", path: \"/pub/**\"}\n"
	"    action: pass\n"
	"  - name: nope\n"
	"    match: {host: " HOST "}\n"
	"    action: deny\n";

void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void
buf_add(uint8_t **b, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (*len + n > *cap) {
		size_t ncap = *cap * 2 + n;

		CHECK((*b = realloc(*b, ncap)) != NULL);
		*cap = ncap;
	}
	memcpy(*b + *len, p, n);
	*len += n;
}

/* ---- the PKI: the upstream's CA and its leaf for HOST --------------- */

static EVP_PKEY *
ec_key(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	CHECK(k != NULL);
	return k;
}

static X509 *
make_cert(EVP_PKEY *key, EVP_PKEY *signer, X509 *issuer, const char *cn,
    int ca)
{
	X509 *x = X509_new();
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	X509_NAME *name;

	CHECK(x != NULL);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), ca ? 1 : 2);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 30);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) :
	    name);
	X509V3_set_ctx(&ctx, issuer != NULL ? issuer : x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints,
	    ca ? "critical,CA:TRUE" : "CA:FALSE");
	CHECK(ext != NULL);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	if (ca)
		ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_key_usage,
		    "critical,keyCertSign,cRLSign");
	else
		ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name,
		    "DNS:" HOST);
	CHECK(ext != NULL);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	CHECK(X509_sign(x, signer, EVP_sha256()) > 0);
	return x;
}

/* A CA (dir/ca.pem, for tlsup) and its leaf for HOST, the server's. */
static void
make_pki(struct world *w)
{
	EVP_PKEY *cakey = ec_key(), *key = ec_key();
	X509 *ca = make_cert(cakey, cakey, NULL, "sluice fuzz CA", 1);
	X509 *leaf = make_cert(key, cakey, ca, HOST, 0);
	char path[128];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/ca.pem", w->dir);
	CHECK((fp = fopen(path, "w")) != NULL);
	CHECK(PEM_write_X509(fp, ca) == 1);
	fclose(fp);
	CHECK((w->srv = SSL_CTX_new(TLS_server_method())) != NULL);
	CHECK(SSL_CTX_use_certificate(w->srv, leaf) == 1);
	CHECK(SSL_CTX_use_PrivateKey(w->srv, key) == 1);
	/*
	 * No server-side session cache; whether a TLS 1.3 ticket is sent is
	 * the input's choice (one resumes a later input's handshake).
	 */
	SSL_CTX_set_session_cache_mode(w->srv, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(w->srv, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	CHECK(tlsup_new(path, &w->l.tls_up) == 0);
	X509_free(ca);
	X509_free(leaf);
	EVP_PKEY_free(cakey);
	EVP_PKEY_free(key);
}

/* ---- the secret store: a header secret and AWS credentials, bound to HOST */

static void
make_secrets(struct world *w)
{
	struct errlist errs = ERRLIST_INIT;
	char keydir[96], key[128], pub[128], secdir[96], why2[SECRET_WHY_MAX];
	static char *keys[1];
	const char *why = NULL, *hosts[2] = { HOST, AUTH };
	uint8_t pk[32], raw[24], *blob = NULL;
	char value[2 * sizeof(raw) + 1];
	struct sealed_in in;
	struct secret_set *set = NULL, *set2 = NULL;
	struct secret *aws = NULL;
	size_t len, i;

	snprintf(keydir, sizeof(keydir), "%s/keys", w->dir);
	snprintf(secdir, sizeof(secdir), "%s/secrets", w->dir);
	snprintf(key, sizeof(key), "%s/gateway.key", keydir);
	snprintf(pub, sizeof(pub), "%s/gateway.pub", keydir);
	CHECK(mkdir(keydir, 0700) == 0);
	CHECK(mkdir(secdir, 0700) == 0);
	CHECK(keys_generate(keydir, &why) == 0);
	CHECK(gwkey_load_pub(pub, pk, &why) == 0);
	keys[0] = strdup(key);
	w->cfg.gateway_keys = keys;
	w->cfg.ngateway_keys = 1;
	w->cfg.secret_dir = strdup(secdir);
	CHECK(secret_store_new(&w->cfg, &w->store, &errs) == 0 && w->store);
	errlist_free(&errs);
	/* A value the fuzzer cannot guess but may learn from comparisons. */
	randombytes_buf(raw, sizeof(raw));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(value + 2 * i, 3, "%02x", raw[i]);
	memset(&in, 0, sizeof(in));
	in.name = "tok";
	in.version = 1;
	in.created = 1700000000;
	in.hosts = hosts;
	in.nhosts = 2;
	in.value = (const uint8_t *)value;
	in.value_len = strlen(value);
	CHECK(sealed_seal(pk, &in, &blob, &len, &why) == 0);
	CHECK(secret_open(w->store, blob, len, NULL, "file", &w->secret,
	    why2) == 0);
	free(blob);
	CHECK(secret_set_with(NULL, w->secret, &set) == 0);
	/* AWS credentials for the sigv4 rule: its body is held and hashed. */
	in.name = "aws";
	in.kind = SEALED_KIND_JSON;
	in.value = (const uint8_t *)"{\"access_key_id\": \"AKIDFUZZ\", "
	    "\"secret_access_key\": \"fuzz-secret-access-key\"}";
	in.value_len = strlen((const char *)in.value);
	CHECK(sealed_seal(pk, &in, &blob, &len, &why) == 0);
	CHECK(secret_open(w->store, blob, len, NULL, "file", &aws, why2) == 0);
	free(blob);
	CHECK(secret_set_with(set, aws, &set2) == 0);
	secret_set_unref(set);
	secret_unref(aws);
	set = set2;
	CHECK((w->st = calloc(1, sizeof(*w->st))) != NULL);
	atomic_init(&w->st->refs, 1);
	w->st->secrets = set;
	w->l.secrets = w->store;
	w->l.st = w->st;
}

/* ---- the policies and the minted token ------------------------------ */

static struct policy *
parse_policy(const char *file, const char *name, const char *alpn,
    const char *body)
{
	struct errlist errs = ERRLIST_INIT;
	struct policy *p = NULL;
	char text[2048];
	int n;

	n = snprintf(text, sizeof(text), "name: %s\n%s%s", name, alpn, body);
	CHECK(n > 0 && (size_t)n < sizeof(text));
	CHECK(policy_parse(file, text, (size_t)n, &p, &errs) == 0);
	errlist_free(&errs);
	return p;
}

static void
count_entry(void *arg, const struct mint_info *in)
{
	(void)in;
	(*(size_t *)arg)++;
}

/*
 * The inject-only policy's token, as if its worker had minted it: in the
 * table under the key a request of the sandbox looks for, so that no
 * request starts a mint (there is no resolver, no endpoint).
 */
static void
mint_token(struct world *w)
{
	struct mint_waiter mw = { NULL, NULL, NULL, NULL };
	char key[MINT_KEY_MAX], why[MINT_WHY_MAX], value[33];
	struct conn c;
	struct mtoken *t;
	uint8_t raw[16];
	size_t i;

	memset(&c, 0, sizeof(c));
	c.sb = &w->sb;
	c.counter = w->counter;		/* the key names the registration */
	snprintf(c.policy_name, sizeof(c.policy_name), "%s", w->pol[0]->name);
	CHECK((w->l.mints = mintcache_new()) != NULL);
	CHECK(icpt_token_key(&c, token_find(&w->pol[0]->tokens, "svc", 3),
	    w->secret, key) == 0);
	randombytes_buf(raw, sizeof(raw));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(value + 2 * i, 3, "%02x", raw[i]);
	CHECK(mintcache_get(w->l.mints, key, time(NULL), &mw, &t, why) ==
	    MINT_START);
	mintcache_cancel(w->l.mints, &mw);	/* nobody waits: it is ready */
	CHECK((w->token = mtoken_new(value, 32, time(NULL),
	    time(NULL) + 10 * 365 * 86400LL)) != NULL);
	mintcache_done(w->l.mints, key, mtoken_ref(w->token), NULL, time(NULL));
}

/* ---- the world ------------------------------------------------------ */

void
world_init(struct world *w, const char *name, const char *env,
    const char *alpn)
{
	char err[256], cmd[128], var[64];
	SSL_CTX *ctx;

	signal(SIGPIPE, SIG_IGN);
	w->name = name;
	snprintf(var, sizeof(var), "%s_DEBUG", env);
	w->debug = getenv(var) != NULL;
	log_init(name, w->debug ? LOG_LVL_DEBUG : LOG_LVL_ERR);
	CHECK(sodium_init() >= 0);
	snprintf(var, sizeof(var), "%s_NO_SECRET_CHECK", env);
	w->no_secret_check = getenv(var) != NULL;
	snprintf(w->dir, sizeof(w->dir), "/tmp/sluice-%s.XXXXXX", name);
	CHECK(mkdtemp(w->dir) != NULL);
	CHECK((w->base = event_base_new()) != NULL);
	w->cfg.path = "fuzz.yaml";
	w->cfg.timeouts.idle = 10000;
	w->cfg.timeouts.first_byte = 10000;
	w->cfg.timeouts.handshake = 10000;
	w->cfg.timeouts.connect = 10000;
	w->cfg.limits.header_bytes = 16384;
	w->cfg.limits.connections = 1000;
	w->l.base = w->base;
	w->l.cfg = &w->cfg;
	w->l.started = 1700000000;
	TAILQ_INIT(&w->l.conns);
	make_pki(w);
	make_secrets(w);
	/*
	 * The CA file is read on first use and the keys are loaded: the
	 * folder can go now, so a crash leaves no keys behind.
	 */
	CHECK(tlsup_ctx(w->l.tls_up, NULL, &ctx, err, sizeof(err)) == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->dir);
	CHECK(system(cmd) == 0);
	w->pol[0] = parse_policy("inject.yaml", "fuzz-inject", alpn,
	    policy_inject_only);
	w->pol[1] = parse_policy("mixed.yaml", "fuzz-mixed", alpn,
	    policy_mixed);
	CHECK((w->counter = sb_counter_new()) != NULL);
	w->sb.id = "fuzz";
	placeholder_of(w->store, w->sb.id, "tok", w->ph);
	w->sb.counter = w->counter;
	mint_token(w);
}

int
world_listen(struct world *w, int backlog)
{
	struct sockaddr_in sin;
	int one = 1, i, rc = -1;

	/*
	 * One of 127.77/16 a process, so that fuzzers running side by side
	 * (-jobs, -fork) each talk to their own.
	 */
	CHECK((w->lfd = socket(AF_INET, SOCK_STREAM, 0)) != -1);
	setsockopt(w->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(UP_PORT);
	for (i = 0; i < 256; i++) {
		unsigned h = ((unsigned)getpid() + (unsigned)i) % 65024 + 256;

		snprintf(w->up_addr, sizeof(w->up_addr), "127.77.%u.%u", h >> 8,
		    h & 255);
		CHECK(inet_pton(AF_INET, w->up_addr, &sin.sin_addr) == 1);
		if ((rc = bind(w->lfd, (struct sockaddr *)&sin,
		    sizeof(sin))) == 0 || errno != EADDRINUSE)
			break;
	}
	if (rc != 0) {
		/* Not root (make check as a user): say so, test nothing. */
		fprintf(stderr, "%s: SKIPPED, nothing is tested: cannot "
		    "bind %s:%d (%s); run as root or lower "
		    "net.ipv4.ip_unprivileged_port_start\n", w->name,
		    w->up_addr, UP_PORT, strerror(errno));
		w->skip = 1;
		return -1;
	}
	CHECK(listen(w->lfd, backlog) == 0);
	nonblock(w->lfd);
	return 0;
}

void
world_begin(struct world *w)
{
	CHECK((w->l.upool = upool_new(w->base)) != NULL);
}

struct conn *
world_conn(struct world *w, int fd, int policy, int proto, uint16_t dst_port,
    const uint8_t *peek, size_t len)
{
	struct conn *c;

	CHECK((c = conn_new(&w->l, fd, LISTEN_TRANSPARENT)) != NULL);
	CHECK(addr_parse("10.0.0.2", &c->src) == 0);
	c->src_port = 40000;
	CHECK(addr_parse(w->up_addr, &c->dst) == 0);
	c->dst_port = dst_port;
	c->sb = &w->sb;
	c->pol = w->pol[policy];
	snprintf(c->policy_name, sizeof(c->policy_name), "%s",
	    c->pol->name);
	c->counter = sb_counter_ref(w->counter);
	atomic_fetch_add(&w->counter->conns, 1);
	c->proto = proto;
	snprintf(c->name, sizeof(c->name), "%s", HOST);
	/* What the sniffer read (none if the script starts otherwise). */
	c->peekcap = len > 0 ? len : 1;
	CHECK((c->peek = malloc(c->peekcap)) != NULL);
	if (len > 0)
		memcpy(c->peek, peek, len);
	c->peeklen = len;
	return c;
}

int
world_alive(const struct world *w)
{
	return w->l.nconns > 0;
}

void
world_end(struct world *w, void (*turn)(void *), void *arg)
{
	size_t entries = 0;
	int i;

	for (i = 0; i < MAX_TURNS && world_alive(w); i++)
		turn(arg);
	if (world_alive(w))
		conn_close(TAILQ_FIRST(&w->l.conns), "fuzz-end");
	/* The deferred frees: the conn's (its streams'), dropped upstreams'. */
	for (i = 0; i < 4; i++)
		turn(arg);
	CHECK(w->l.nconns == 0);
	/* No request started a mint: each found the token put in at start. */
	mintcache_each(w->l.mints, time(NULL), count_entry, &entries);
	CHECK(entries == 1);
	upool_free(w->l.upool);
	w->l.upool = NULL;
	event_base_loop(w->base, EVLOOP_NONBLOCK);
}

/* What of the injected secret or of the minted token is in p[0..n). */
static const char *
leak_in(const struct world *w, const uint8_t *p, size_t n)
{
	const struct secret *s = w->secret;
	size_t i;

	if (n == 0)
		return NULL;
	if (memmem(p, n, s->value, s->value_len) != NULL)
		return "the injected secret";
	for (i = 0; i < s->nforms; i++)
		if (memmem(p, n, s->forms[i].p, s->forms[i].len) != NULL)
			return "a form of the injected secret";
	for (i = 0; i < w->token->npats; i++)
		if (memmem(p, n, w->token->pats[i].p,
		    w->token->pats[i].len) != NULL)
			return "a form of the minted token";
	return NULL;
}

void
world_check_leak(const struct world *w, const uint8_t *p, size_t n,
    const char *where)
{
	const char *what;

	if ((what = leak_in(w, p, n)) != NULL) {
		fprintf(stderr, "%s: %s reached the sandbox (%s)\n", w->name,
		    what, where);
		abort();
	}
}

/* ---- the upstreams' side -------------------------------------------- */

void
upc_take(const struct world *w, struct upc *u, int fd, int tickets)
{
	int one = 1;

	upc_drop(u, 0);
	nonblock(fd);
	/* Each step's bytes go at once, not after a delayed ACK. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	CHECK((u->ssl = SSL_new(w->srv)) != NULL);
	SSL_set_fd(u->ssl, fd);
	SSL_set_accept_state(u->ssl);
	SSL_set_num_tickets(u->ssl, tickets);
	u->fd = fd;
	u->echo_at = u->len = 0;
}

void
upc_serve(struct upc *u, int reading)
{
	uint8_t buf[16384];
	int n;

	if (u->fd == -1)
		return;
	if (!u->ready) {
		if (SSL_do_handshake(u->ssl) != 1) {
			int e = SSL_get_error(u->ssl, -1);

			if (e != SSL_ERROR_WANT_READ &&
			    e != SSL_ERROR_WANT_WRITE)
				upc_drop(u, 0);	/* sluice gave up */
			ERR_clear_error();
			return;
		}
		u->ready = 1;
	}
	while (reading && (n = SSL_read(u->ssl, buf, sizeof(buf))) > 0) {
		size_t take = (size_t)n;

		if (take > UP_KEEP - u->len)
			take = UP_KEEP - u->len;
		memcpy(u->got + u->len, buf, take);
		u->len += take;
	}
	ERR_clear_error();
	while (u->tx_len > 0) {
		n = SSL_write(u->ssl, u->tx, (int)(u->tx_len > 16384 ? 16384 :
		    u->tx_len));
		if (n <= 0) {
			ERR_clear_error();
			break;
		}
		memmove(u->tx, u->tx + n, u->tx_len - (size_t)n);
		u->tx_len -= (size_t)n;
	}
}

void
upc_drop(struct upc *u, int reset)
{
	struct linger lg = { 1, 0 };

	if (u->fd == -1)
		return;
	if (reset)
		setsockopt(u->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	SSL_free(u->ssl);
	close(u->fd);
	u->ssl = NULL;
	u->fd = -1;
	u->ready = 0;
	u->tx_len = 0;
}

void
upc_send(struct upc *u, const void *p, size_t n)
{
	if (u->fd != -1)
		buf_add(&u->tx, &u->tx_len, &u->tx_cap, p, n);
}

void
upc_echo(struct upc *u, size_t n)
{
	if (n > u->len - u->echo_at)
		n = u->len - u->echo_at;
	upc_send(u, u->got + u->echo_at, n);
	u->echo_at += n;
}
