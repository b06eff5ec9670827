/*
 * fuzz_icpt.c: libFuzzer target for the interception path, both sides at
 * once.  A real struct conn runs the real icpt code (icpt.c, icpt_req.c,
 * icpt_up.c, icpt_redact.c) on a struct loop of our own, as in
 * tests/unit/test_relay.c: the sandbox is a socketpair, the upstream a
 * TLS server of ours on 127.77.X.Y:443 (plain HTTP is intercepted towards
 * port 443 of its destination, icpt_start), verified against a CA made at
 * start.  No worker, no daemon, no audit trail (records are dropped).
 *
 * Input: byte 0 picks the policy (bit 0: with a pass rule) and whether
 * the upstream sends a TLS 1.3 session ticket (bit 1); the rest is a
 * script of steps, each an opcode byte (low 4 bits) and its operands:
 *
 *   0 LEN BYTES	the sandbox sends BYTES (the first send is what was
 *			peeked: the conn starts with it); "{PH}" in a later
 *			send is the sandbox's placeholder of the secret
 *   1 LEN BYTES	the upstream sends BYTES (queued until its handshake)
 *   2 LEN		the upstream sends back LEN*4 bytes of what it got
 *			(the injected credential among them)
 *   3			the upstream resets (SO_LINGER 0, no close_notify)
 *   4			the upstream closes cleanly (close_notify, close)
 *   5			the upstream sends FIN without close_notify
 *   6			the sandbox half-closes (FIN)
 *   7			the sandbox closes
 *   8 N		N%16+1 more loop turns
 *   9			the sandbox stops or resumes reading
 *   10			the upstream stops or resumes reading
 *   11 N		the upstream sends (N+1) KiB of filler (back-pressure)
 *   12 N		the sandbox sends (N+1) KiB of filler (a body, or junk)
 *   other		one loop turn
 *
 * Every step is followed by a loop turn (EVLOOP_NONBLOCK) and the
 * upstream's server work (accept, handshake, read, queued writes).  Then
 * both peers read everything, close, and the loop runs until the conn is
 * freed (forced with conn_close if it waits on a timer: no timeout fires
 * in an input, they are 10 s).
 *
 * Checks besides the sanitizers: with the policy without a pass rule,
 * every answer the sandbox gets is to an injected request, so no form of
 * the injected secret may appear in what the sandbox receives, however
 * the upstream echoes it, frames it or cuts it off.  Sluice's own answers
 * carry no upstream bytes, and answers to different requests are
 * separated by heads, so a match is a leak, never a false alarm.
 *
 * FUZZ_ICPT_NO_SECRET_CHECK (set) leaves that check out, to look for
 * other faults past a known leak; FUZZ_ICPT_DEBUG logs at debug level
 * and shows what each side got.
 *
 * Every inject rule of the inject-only policy also sets a minted token
 * ({{token:svc}}; rule "tk", /t/ and below, as is and base64'd and no
 * secret of its own), put in the token table at start as if minted: no
 * form of it may reach the sandbox either.
 *
 * The inject-only policy's rule "sig" (/sig/ and below) signs with SigV4:
 * a request with a body there is held until the body is whole
 * (icpt_hold.c).
 *
 * Not covered: TLS towards the sandbox (SNIFF_TLS; plain HTTP skips it),
 * forward rules, the audit trail's durability waits, timers.
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
#include "conn/icpt.h"
#include "conn/icpt_int.h"
#include "fuzz_check.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);


#define UP_PORT		443
#define HOST		"api.example.com"
#define AUTH		"auth.example.com"	/* the token endpoint */
#define MAX_STEPS	96
#define MAX_TURNS	48	/* turns to let the conn end by itself */
#define SB_KEEP		(1u << 20)	/* of what the sandbox receives, kept */
#define UP_KEEP		(64u * 1024)	/* of what the upstream gets, kept */

static const char policy_inject_only[] =
	"name: fuzz-inject\n"
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

static const char policy_mixed[] =
	"name: fuzz-mixed\n"
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

/* What lives for the whole run: written once in LLVMFuzzerInitialize. */
struct world {
	char		 dir[64];
	struct event_base *base;
	struct config	 cfg;
	struct loop	 l;
	struct policy	*pol[2];
	struct state	*st;
	struct secret_store *store;
	struct secret	*secret;
	struct mtoken	*token;		/* the inject-only policy's, minted */
	char		 ph[PH_LEN + 1];	/* the sandbox's placeholder of it */
	struct sb_counter *counter;
	struct sandbox	 sb;
	SSL_CTX		*srv;		/* the upstream's server context */
	int		 lfd;		/* the upstream's listener */
	char		 up_addr[INET_ADDRSTRLEN];	/* its address */
	int		 no_secret_check;	/* FUZZ_ICPT_NO_SECRET_CHECK */
	int		 skip;		/* port 443 is not ours to bind */
};

/* One input's peers. */
struct run {
	int		 sb;		/* the sandbox's end, -1 once closed */
	int		 sb_reading;
	int		 sb_eof;
	uint8_t		*sb_got;	/* what the sandbox received */
	size_t		 sb_len;
	int		 up;		/* the upstream's socket, -1: none */
	SSL		*ssl;
	int		 up_ready;	/* handshake done */
	int		 tickets;	/* TLS 1.3 tickets the upstream sends */
	int		 up_reading;
	uint8_t		 up_got[UP_KEEP];	/* what the upstream received */
	size_t		 up_len, echo_at;
	uint8_t		*tx;		/* for the upstream to send */
	size_t		 tx_len, tx_cap;
};

static struct world W;

static void
nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---- the PKI: a CA and a leaf for HOST, made once ------------------- */

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
make_pki(void)
{
	EVP_PKEY *cakey = ec_key(), *key = ec_key();
	X509 *ca = make_cert(cakey, cakey, NULL, "sluice fuzz CA", 1);
	X509 *leaf = make_cert(key, cakey, ca, HOST, 0);
	char path[128];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/ca.pem", W.dir);
	CHECK((fp = fopen(path, "w")) != NULL);
	CHECK(PEM_write_X509(fp, ca) == 1);
	fclose(fp);
	CHECK((W.srv = SSL_CTX_new(TLS_server_method())) != NULL);
	CHECK(SSL_CTX_use_certificate(W.srv, leaf) == 1);
	CHECK(SSL_CTX_use_PrivateKey(W.srv, key) == 1);
	/*
	 * No server-side session cache; whether a TLS 1.3 ticket is sent is
	 * the input's choice (one resumes a later input's handshake).
	 */
	SSL_CTX_set_session_cache_mode(W.srv, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(W.srv, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	CHECK(tlsup_new(path, &W.l.tls_up) == 0);
	X509_free(ca);
	X509_free(leaf);
	EVP_PKEY_free(cakey);
	EVP_PKEY_free(key);
}

/* ---- the secret store: a header secret and AWS credentials, bound to HOST */

static void
make_secrets(void)
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

	snprintf(keydir, sizeof(keydir), "%s/keys", W.dir);
	snprintf(secdir, sizeof(secdir), "%s/secrets", W.dir);
	snprintf(key, sizeof(key), "%s/gateway.key", keydir);
	snprintf(pub, sizeof(pub), "%s/gateway.pub", keydir);
	CHECK(mkdir(keydir, 0700) == 0);
	CHECK(mkdir(secdir, 0700) == 0);
	CHECK(keys_generate(keydir, &why) == 0);
	CHECK(gwkey_load_pub(pub, pk, &why) == 0);
	keys[0] = strdup(key);
	W.cfg.gateway_keys = keys;
	W.cfg.ngateway_keys = 1;
	W.cfg.secret_dir = strdup(secdir);
	CHECK(secret_store_new(&W.cfg, &W.store, &errs) == 0 && W.store);
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
	CHECK(secret_open(W.store, blob, len, NULL, "file", &W.secret,
	    why2) == 0);
	free(blob);
	CHECK(secret_set_with(NULL, W.secret, &set) == 0);
	/* AWS credentials for the sigv4 rule: its body is held and hashed. */
	in.name = "aws";
	in.kind = SEALED_KIND_JSON;
	in.value = (const uint8_t *)"{\"access_key_id\": \"AKIDFUZZ\", "
	    "\"secret_access_key\": \"fuzz-secret-access-key\"}";
	in.value_len = strlen((const char *)in.value);
	CHECK(sealed_seal(pk, &in, &blob, &len, &why) == 0);
	CHECK(secret_open(W.store, blob, len, NULL, "file", &aws, why2) == 0);
	free(blob);
	CHECK(secret_set_with(set, aws, &set2) == 0);
	secret_set_unref(set);
	secret_unref(aws);
	set = set2;
	CHECK((W.st = calloc(1, sizeof(*W.st))) != NULL);
	atomic_init(&W.st->refs, 1);
	W.st->secrets = set;
	W.l.secrets = W.store;
	W.l.st = W.st;
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
mint_token(void)
{
	struct mint_waiter w = { NULL, NULL, NULL, NULL };
	char key[MINT_KEY_MAX], why[MINT_WHY_MAX], value[33];
	struct conn c;
	struct mtoken *t;
	uint8_t raw[16];
	size_t i;

	memset(&c, 0, sizeof(c));
	c.sb = &W.sb;
	c.counter = W.counter;		/* the key names the registration */
	snprintf(c.policy_name, sizeof(c.policy_name), "%s", W.pol[0]->name);
	CHECK((W.l.mints = mintcache_new()) != NULL);
	CHECK(icpt_token_key(&c, token_find(&W.pol[0]->tokens, "svc", 3),
	    W.secret, key) == 0);
	randombytes_buf(raw, sizeof(raw));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(value + 2 * i, 3, "%02x", raw[i]);
	CHECK(mintcache_get(W.l.mints, key, time(NULL), &w, &t, why) ==
	    MINT_START);
	mintcache_cancel(W.l.mints, &w);	/* nobody waits: it is ready */
	CHECK((W.token = mtoken_new(value, 32, time(NULL),
	    time(NULL) + 10 * 365 * 86400LL)) != NULL);
	mintcache_done(W.l.mints, key, mtoken_ref(W.token), NULL, time(NULL));
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct errlist errs = ERRLIST_INIT;
	struct sockaddr_in sin;
	char err[256], cmd[128];
	SSL_CTX *ctx;
	int one = 1, i, rc = -1;

	signal(SIGPIPE, SIG_IGN);
	log_init("fuzz_icpt", getenv("FUZZ_ICPT_DEBUG") ? LOG_LVL_DEBUG :
	    LOG_LVL_ERR);
	CHECK(sodium_init() >= 0);
	W.no_secret_check = getenv("FUZZ_ICPT_NO_SECRET_CHECK") != NULL;
	snprintf(W.dir, sizeof(W.dir), "/tmp/sluice-fuzz-icpt.XXXXXX");
	CHECK(mkdtemp(W.dir) != NULL);
	CHECK((W.base = event_base_new()) != NULL);
	W.cfg.path = "fuzz.yaml";
	W.cfg.timeouts.idle = 10000;
	W.cfg.timeouts.first_byte = 10000;
	W.cfg.timeouts.handshake = 10000;
	W.cfg.timeouts.connect = 10000;
	W.cfg.limits.header_bytes = 16384;
	W.cfg.limits.connections = 1000;
	W.l.base = W.base;
	W.l.cfg = &W.cfg;
	W.l.started = 1700000000;
	TAILQ_INIT(&W.l.conns);
	make_pki();
	make_secrets();
	/*
	 * The CA file is read on first use and the keys are loaded: the
	 * folder can go now, so a crash leaves no keys behind.
	 */
	CHECK(tlsup_ctx(W.l.tls_up, NULL, &ctx, err, sizeof(err)) == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", W.dir);
	CHECK(system(cmd) == 0);
	CHECK(policy_parse("inject.yaml", policy_inject_only,
	    sizeof(policy_inject_only) - 1, &W.pol[0], &errs) == 0);
	CHECK(policy_parse("mixed.yaml", policy_mixed,
	    sizeof(policy_mixed) - 1, &W.pol[1], &errs) == 0);
	errlist_free(&errs);
	CHECK((W.counter = sb_counter_new()) != NULL);
	W.sb.id = "fuzz";
	placeholder_of(W.store, W.sb.id, "tok", W.ph);
	W.sb.counter = W.counter;
	mint_token();
	/*
	 * The upstream: the address plain HTTP to it on port 80 is sent on
	 * to, on 443.  One of 127.77/16 a process, so that fuzzers running
	 * side by side (-jobs, -fork) each talk to their own.
	 */
	CHECK((W.lfd = socket(AF_INET, SOCK_STREAM, 0)) != -1);
	setsockopt(W.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(UP_PORT);
	for (i = 0; i < 256; i++) {
		unsigned h = ((unsigned)getpid() + (unsigned)i) % 65024 + 256;

		snprintf(W.up_addr, sizeof(W.up_addr), "127.77.%u.%u", h >> 8,
		    h & 255);
		CHECK(inet_pton(AF_INET, W.up_addr, &sin.sin_addr) == 1);
		if ((rc = bind(W.lfd, (struct sockaddr *)&sin,
		    sizeof(sin))) == 0 || errno != EADDRINUSE)
			break;
	}
	if (rc != 0) {
		/* Not root (make check as a user): say so, test nothing. */
		fprintf(stderr, "fuzz_icpt: SKIPPED, nothing is tested: cannot "
		    "bind %s:%d (%s); run as root or lower "
		    "net.ipv4.ip_unprivileged_port_start\n", W.up_addr, UP_PORT,
		    strerror(errno));
		W.skip = 1;
		return 0;
	}
	CHECK(listen(W.lfd, 16) == 0);
	nonblock(W.lfd);
	return 0;
}

/* ---- the upstream's side -------------------------------------------- */

static void
up_drop(struct run *r, int reset)
{
	struct linger lg = { 1, 0 };

	if (r->up == -1)
		return;
	if (reset)
		setsockopt(r->up, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	SSL_free(r->ssl);
	close(r->up);
	r->ssl = NULL;
	r->up = -1;
	r->up_ready = 0;
	r->tx_len = 0;
}

static void
tx_add(struct run *r, const uint8_t *p, size_t n)
{
	if (n == 0)
		return;
	if (r->tx_len + n > r->tx_cap) {
		size_t cap = r->tx_cap * 2 + n;

		CHECK((r->tx = realloc(r->tx, cap)) != NULL);
		r->tx_cap = cap;
	}
	memcpy(r->tx + r->tx_len, p, n);
	r->tx_len += n;
}

/* Accepts, shakes hands, reads what came and writes what waits. */
static void
up_work(struct run *r)
{
	uint8_t buf[16384];
	int fd, n, one = 1;

	while ((fd = accept(W.lfd, NULL, NULL)) != -1) {
		/* One upstream at a time: an older one is done with. */
		up_drop(r, 0);
		nonblock(fd);
		/* Each step's bytes go at once, not after a delayed ACK. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		CHECK((r->ssl = SSL_new(W.srv)) != NULL);
		SSL_set_fd(r->ssl, fd);
		SSL_set_accept_state(r->ssl);
		SSL_set_num_tickets(r->ssl, r->tickets);
		r->up = fd;
		r->echo_at = r->up_len = 0;
	}
	if (r->up == -1)
		return;
	if (!r->up_ready) {
		if (SSL_do_handshake(r->ssl) != 1) {
			int e = SSL_get_error(r->ssl, -1);

			if (e != SSL_ERROR_WANT_READ &&
			    e != SSL_ERROR_WANT_WRITE)
				up_drop(r, 0);	/* sluice gave up */
			ERR_clear_error();
			return;
		}
		r->up_ready = 1;
	}
	while (r->up_reading && (n = SSL_read(r->ssl, buf, sizeof(buf))) > 0) {
		size_t take = (size_t)n;

		if (take > UP_KEEP - r->up_len)
			take = UP_KEEP - r->up_len;
		memcpy(r->up_got + r->up_len, buf, take);
		r->up_len += take;
	}
	ERR_clear_error();
	while (r->tx_len > 0) {
		n = SSL_write(r->ssl, r->tx, (int)(r->tx_len > 16384 ? 16384 :
		    r->tx_len));
		if (n <= 0) {
			ERR_clear_error();
			break;
		}
		memmove(r->tx, r->tx + n, r->tx_len - (size_t)n);
		r->tx_len -= (size_t)n;
	}
}

/* ---- the sandbox's side --------------------------------------------- */

static void
sb_work(struct run *r)
{
	uint8_t buf[16384];
	ssize_t n;

	if (r->sb == -1 || !r->sb_reading || r->sb_eof)
		return;
	while ((n = read(r->sb, buf, sizeof(buf))) > 0) {
		size_t take = (size_t)n;

		if (take > SB_KEEP - r->sb_len)
			take = SB_KEEP - r->sb_len;
		memcpy(r->sb_got + r->sb_len, buf, take);
		r->sb_len += take;
	}
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK))
		r->sb_eof = 1;
}

static int
conn_alive(void)
{
	return W.l.nconns > 0;
}

static void
turn(struct run *r)
{
	event_base_loop(W.base, EVLOOP_NONBLOCK);
	up_work(r);
	sb_work(r);
}

/* ---- one input ------------------------------------------------------ */

/*
 * A conn as conn_accept and the decision leave it for icpt_start, which
 * takes it over (and may close it at once).
 */
static void
start_conn(struct run *r, int policy, const uint8_t *first, size_t len)
{
	struct conn *c;
	int sp[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	nonblock(sp[0]);
	nonblock(sp[1]);
	r->sb = sp[0];
	CHECK((c = conn_new(&W.l, sp[1], LISTEN_TRANSPARENT)) != NULL);
	CHECK(addr_parse("10.0.0.2", &c->src) == 0);
	c->src_port = 40000;
	CHECK(addr_parse(W.up_addr, &c->dst) == 0);
	c->dst_port = 80;
	c->sb = &W.sb;
	c->pol = W.pol[policy];
	snprintf(c->policy_name, sizeof(c->policy_name), "%s",
	    c->pol->name);
	c->counter = sb_counter_ref(W.counter);
	atomic_fetch_add(&W.counter->conns, 1);
	c->proto = SNIFF_HTTP;
	snprintf(c->name, sizeof(c->name), "%s", HOST);
	c->dec.verdict = VERDICT_INTERCEPT;
	c->dec.reason = "intercept-name";
	/* What the sniffer read (none if the script starts otherwise). */
	c->peekcap = len > 0 ? len : 1;
	CHECK((c->peek = malloc(c->peekcap)) != NULL);
	if (len > 0)
		memcpy(c->peek, first, len);
	c->peeklen = len;
	icpt_start(c);
}

/* Whether a form of the injected secret is in what the sandbox got. */
static void
check_no_secret(const struct run *r)
{
	const struct secret *s = W.secret;
	size_t i;

	CHECK(memmem(r->sb_got, r->sb_len, s->value, s->value_len) == NULL);
	for (i = 0; i < W.token->npats; i++) {
		if (memmem(r->sb_got, r->sb_len, W.token->pats[i].p,
		    W.token->pats[i].len) != NULL) {
			fprintf(stderr, "fuzz_icpt: form %zu of the minted "
			    "token reached the sandbox\n", i);
			abort();
		}
	}
	for (i = 0; i < s->nforms; i++) {
		if (memmem(r->sb_got, r->sb_len, s->forms[i].p,
		    s->forms[i].len) != NULL) {
			fprintf(stderr, "fuzz_icpt: form %zu of the injected "
			    "secret reached the sandbox\n", i);
			abort();
		}
	}
}

/*
 * The sandbox sends b[0..n), each "{PH}" in it as the sandbox's real
 * placeholder, which the fuzzer could never guess.
 */
static void
sb_send(int fd, const uint8_t *b, size_t n)
{
	const uint8_t *p = b, *at;

	while ((at = memmem(p, n - (size_t)(p - b), "{PH}", 4)) != NULL) {
		(void)!write(fd, p, (size_t)(at - p));
		(void)!write(fd, W.ph, PH_LEN);
		p = at + 4;
	}
	if (p < b + n)
		(void)!write(fd, p, n - (size_t)(p - b));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *sb_buf;
	struct run r;
	size_t at = 1, n, steps = 0, entries = 0;
	int policy, started = 0, i, k;

	if (size < 1 || W.skip)
		return 0;
	if (sb_buf == NULL)
		CHECK((sb_buf = malloc(SB_KEEP)) != NULL);
	memset(&r, 0, sizeof(r));
	r.sb = r.up = -1;
	r.sb_reading = r.up_reading = 1;
	r.sb_got = sb_buf;
	policy = data[0] & 1;
	r.tickets = (data[0] >> 1) & 1;
	CHECK((W.l.upool = upool_new(W.base)) != NULL);

	while (at < size && steps++ < MAX_STEPS) {
		uint8_t op = data[at++] & 0x0f;

		if (!started && op != 0) {
			/* The conn starts with what was peeked: nothing. */
			start_conn(&r, policy, NULL, 0);
			started = 1;
		}
		switch (op) {
		case 0:
			n = at < size ? data[at++] : 0;
			if (n > size - at)
				n = size - at;
			if (!started) {
				start_conn(&r, policy, data + at, n);
				started = 1;
			} else if (r.sb != -1 && n > 0)
				sb_send(r.sb, data + at, n);
			at += n;
			break;
		case 1:
			n = at < size ? data[at++] : 0;
			if (n > size - at)
				n = size - at;
			if (r.up != -1)
				tx_add(&r, data + at, n);
			at += n;
			break;
		case 2:
			n = at < size ? (size_t)data[at++] * 4 : 0;
			if (n > r.up_len - r.echo_at)
				n = r.up_len - r.echo_at;
			if (r.up != -1 && n > 0)
				tx_add(&r, r.up_got + r.echo_at, n);
			r.echo_at += n;
			break;
		case 3:
			up_drop(&r, 1);
			break;
		case 4:
			if (r.up != -1 && r.up_ready) {
				up_work(&r);	/* what waits goes first */
				SSL_shutdown(r.ssl);
			}
			up_drop(&r, 0);
			break;
		case 5:
			if (r.up != -1) {
				up_work(&r);
				shutdown(r.up, SHUT_WR);
			}
			break;
		case 6:
			if (r.sb != -1)
				shutdown(r.sb, SHUT_WR);
			break;
		case 7:
			sb_work(&r);
			if (r.sb != -1)
				close(r.sb);
			r.sb = -1;
			break;
		case 8:
			k = at < size ? data[at++] % 16 + 1 : 1;
			for (i = 0; i < k; i++)
				turn(&r);
			break;
		case 9:
			r.sb_reading = !r.sb_reading;
			break;
		case 10:
			r.up_reading = !r.up_reading;
			break;
		case 11:
			n = at < size ? ((size_t)data[at++] + 1) * 1024 : 1024;
			if (r.up != -1) {
				uint8_t fill[1024];

				memset(fill, 'f', sizeof(fill));
				for (i = 0; (size_t)i < n / sizeof(fill); i++)
					tx_add(&r, fill, sizeof(fill));
			}
			break;
		case 12:
			n = at < size ? ((size_t)data[at++] + 1) * 1024 : 1024;
			if (r.sb != -1) {
				uint8_t fill[1024];

				memset(fill, 's', sizeof(fill));
				/* Till the socket is full (back-pressure). */
				for (i = 0; (size_t)i < n / sizeof(fill); i++)
					if (write(r.sb, fill, sizeof(fill)) !=
					    (ssize_t)sizeof(fill))
						break;
			}
			break;
		default:
			break;
		}
		turn(&r);
	}
	if (!started)
		start_conn(&r, policy, NULL, 0);

	if (getenv("FUZZ_ICPT_DEBUG") != NULL)
		fprintf(stderr, "fuzz_icpt: script done, upstream %d ready %d, "
		    "%zu bytes unsent\n", r.up, r.up_ready, r.tx_len);
	/* Both peers read what is owed, then go; the conn must follow. */
	r.sb_reading = r.up_reading = 1;
	for (i = 0; i < 8 && conn_alive(); i++)
		turn(&r);
	sb_work(&r);
	if (r.sb != -1)
		close(r.sb);
	r.sb = -1;
	up_drop(&r, 0);
	for (i = 0; i < MAX_TURNS && conn_alive(); i++)
		turn(&r);
	if (conn_alive())
		conn_close(TAILQ_FIRST(&W.l.conns), "fuzz-end");
	/* The deferred frees: the conn's, and discarded upstreams'. */
	for (i = 0; i < 4; i++)
		turn(&r);
	CHECK(W.l.nconns == 0);
	/* No request started a mint: each found the token put in at start. */
	mintcache_each(W.l.mints, time(NULL), count_entry, &entries);
	CHECK(entries == 1);
	upool_free(W.l.upool);
	W.l.upool = NULL;
	event_base_loop(W.base, EVLOOP_NONBLOCK);
	up_drop(&r, 0);
	/* Whatever was accepted meanwhile (nothing should be). */
	up_work(&r);
	up_drop(&r, 0);
	if (getenv("FUZZ_ICPT_DEBUG") != NULL)
		fprintf(stderr, "fuzz_icpt: upstream got %zu bytes, the "
		    "sandbox %zu:\n%.*s\n", r.up_len, r.sb_len, (int)r.sb_len,
		    (const char *)r.sb_got);
	if (policy == 0 && !W.no_secret_check)
		check_no_secret(&r);
	free(r.tx);
	return 0;
}
