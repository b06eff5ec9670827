/* tlsterm.h: the sandbox-facing side of TLS interception. */
#ifndef SLUICE_TLSTERM_H
#define SLUICE_TLSTERM_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/*
 * Mints a leaf for host (a normalised DNS name) signed by the sandbox's CA
 * for leaf_key (borrowed), as ca_mint_leaf does.  Returns 0 with *out (the
 * caller, i.e. the leaf cache, owns it) or a negative SL_ERR_*, which the
 * lookup passes on.  It is called with the leaf cache's mutex held, so it
 * must not call back into the same leafcache; it may take its own locks
 * (the daemon's per-sandbox CA mutex, to check the sandbox still exists),
 * which makes the lock order "leafcache, then CA".
 */
typedef int (*leaf_mint_fn)(void *arg, const char *host, EVP_PKEY *leaf_key,
    X509 **out);

/*
 * One per sandbox, shared by all worker threads (it has its own mutex;
 * every function here is thread-safe).  It holds:
 *  - the sandbox's one leaf key (ECDSA P-256), made on first use;
 *  - a bounded LRU cache host -> leaf certificate, at most max entries; a
 *    leaf with less than 10 minutes left, or one not issued by the chain CA
 *    of the lookup (the CA was replaced), is minted again; concurrent
 *    lookups of one host mint once (minting happens under the mutex);
 *  - the session-ticket keys of this sandbox (a 16-byte name, an AES-256
 *    key and an HMAC-SHA256 key, in sodium_malloc'd memory): a current key
 *    that seals new tickets and the previous one, which still opens
 *    tickets (they are then re-issued under the current key).  The current
 *    key is replaced once it is ticket_rotate_s old (monotonic clock);
 *    after 2 * ticket_rotate_s without use both are replaced, so no ticket
 *    lives longer than two intervals.  Replaced keys are wiped.
 * Requires sodium_init() to have run.
 */
struct leafcache;

/* max: 1 .. 1048576; ticket_rotate_s > 0; else SL_ERR_INVALID. */
int	leafcache_new(size_t max, unsigned ticket_rotate_s,
	    struct leafcache **out);
/*
 * Wipes the ticket keys and the leaf key and drops the cache's references
 * to its leaves; accepts NULL.  No SSL made with it may still exist.
 */
void	leafcache_free(struct leafcache *lc);
/* The number of cached leaves. */
size_t	leafcache_count(struct leafcache *lc);

/*
 * The leaf for host, cached or minted by mint(arg, ...), and the leaf key.
 * chain_ca (borrowed, only for the call) is the sandbox's CA certificate:
 * a cached leaf it did not issue is minted again, and a newly minted one
 * it did not issue is refused (SL_ERR_INTERNAL).  Returns 0 with *leaf and
 * *key, each a new reference the caller frees (X509_free, EVP_PKEY_free);
 * SL_ERR_INVALID for a NULL argument or a host that is empty or longer
 * than 253 characters; mint's own error; or another SL_ERR_*.
 */
int	leafcache_get(struct leafcache *lc, const char *host,
	    leaf_mint_fn mint, void *arg, X509 *chain_ca, X509 **leaf,
	    EVP_PKEY **key);

/*
 * Replaces the current ticket key now; the old current one becomes the
 * previous (its tickets still resume) and the old previous is wiped (its
 * tickets no longer do).  For tests, and to cut resumption short on
 * demand.  Returns 0 or SL_ERR_NOMEM (nothing changed).
 */
int	leafcache_rotate_tickets(struct leafcache *lc);

/*
 * The one server context for intercepted connections, shared by all
 * workers (OpenSSL makes it safe to use from many threads once built; do
 * not change it afterwards).  TLS 1.2 and 1.3 only; ECDHE with AEAD
 * ciphers only (the leaves are ECDSA); no compression, no renegotiation,
 * no 0-RTT data (a replayed request could carry an injected credential);
 * ALPN selects the first protocol of the connection's list
 * (tlsterm_ssl_alpn; "h2" then "http/1.1" by default) that the client offers,
 * and fails the handshake with a no_application_protocol alert when it
 * offers none of them (a client offering no ALPN is served HTTP/1.1 all
 * the same).  There is no
 * server-side session cache: resumption is by ticket only, and tickets are
 * sealed with the keys of the connection's leafcache, so a ticket resumes
 * only in the sandbox that it was issued in (and only while that
 * leafcache lives), and only for the same host.  Returns NULL on failure
 * (OpenSSL's error queue says why).  Free with SSL_CTX_free.
 */
SSL_CTX	*tlsterm_ctx_new(void);

/*
 * A server SSL, in accept state and without BIOs, for one connection of
 * the sandbox owning lc whose ClientHello named host (already normalised:
 * lower case, no trailing dot).  It presents host's leaf (leafcache_get
 * with mint, arg and chain_ca) with the leaf key, and chain_ca as the
 * chain.  ctx must come from tlsterm_ctx_new.  chain_ca is borrowed for
 * the call only (the SSL takes its own reference): hold a reference to it
 * (X509_up_ref taken under the daemon's CA lock), not the CA lock itself,
 * across the call, since mint may take that lock.  The SSL refers to lc
 * without owning it: the caller guarantees lc outlives the SSL (e.g. the
 * connection holds a reference to the sandbox that owns lc).  Returns 0
 * with *out (the caller frees it with SSL_free), or an SL_ERR_* as
 * leafcache_get, or SL_ERR_NOMEM / SL_ERR_INTERNAL.
 */
int	tlsterm_ssl_new(SSL_CTX *ctx, struct leafcache *lc, const char *host,
	    leaf_mint_fn mint, void *arg, X509 *chain_ca, SSL **out);
/*
 * What ALPN offers on ssl: wire, a TLS protocol list of "h2" and
 * "http/1.1" (struct alpn_list); 0, SL_ERR_INVALID for any other list.
 */
int	tlsterm_ssl_alpn(SSL *ssl, const unsigned char *wire, size_t len);

#endif
