/* tlsup.h: the client side of TLS towards upstreams (re-encryption, forward). */
#ifndef SLUICE_TLSUP_H
#define SLUICE_TLSUP_H

#include <stddef.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

struct pemkey;

/* A pin: base64 of SHA-256 over the DER SubjectPublicKeyInfo, and a NUL. */
#define TLSUP_PIN_LEN	44
#define TLSUP_PIN_BUFSZ	(TLSUP_PIN_LEN + 1)
/* Room for any reason text this module writes (longer buffers are fine). */
#define TLSUP_REASON_BUFSZ	128

/*
 * Client SSL_CTXs keyed by CA file path (SPEC, Upstream TLS): the config's
 * upstream_ca by default, or a rule's own upstream.ca.  A context is made
 * on first use and kept: TLS 1.2 or later, SSL_VERIFY_PEER against the
 * certificates of that one PEM file only (never the system default paths),
 * no compression, no renegotiation, ALPN offering only "http/1.1", and a
 * client session cache keyed by sandbox, host and port (see
 * tlsup_ssl_new).  The file is read once; a changed file is seen by a new
 * tlsup (make one per config generation).  All functions are thread-safe: one mutex guards the set of
 * contexts, another each context's sessions.
 */
struct tlsup;

/*
 * default_ca is the config's upstream_ca (copied; not read yet).  Returns
 * 0 with *out, SL_ERR_INVALID for a NULL or empty path, SL_ERR_NOMEM.
 */
int	tlsup_new(const char *default_ca, struct tlsup **out);
/*
 * Drops tlsup's references to its contexts; accepts NULL.  SSLs made from
 * them stay valid (each holds a reference to its SSL_CTX, and the SSL_CTX
 * owns its session cache), but a borrowed SSL_CTX pointer must not be used
 * afterwards unless the holder took its own reference (SSL_CTX_up_ref).
 */
void	tlsup_free(struct tlsup *t);

/*
 * The context for ca_file (NULL: the default), loading the file on first
 * use.  *out is borrowed: it lives as long as t.  The same path always
 * yields the same context; a failed load is not cached (the next call
 * tries again).  On failure err gets a one-line message naming the file,
 * e.g. "upstream CA file /x.pem: No such file or directory", and the
 * result is SL_ERR_IO (cannot open or read), SL_ERR_INVALID (no
 * certificate in it, or not PEM) or SL_ERR_NOMEM.
 */
int	tlsup_ctx(struct tlsup *t, const char *ca_file, SSL_CTX **out,
	    char *err, size_t errlen);

/*
 * A client SSL (connect state) from a tlsup context for host: a DNS name
 * (normalised, lower case; sent as SNI, checked against the certificate's
 * DNS SANs only, never its CN, no partial wildcards) when host_is_ip is 0,
 * or an IPv4/IPv6 literal without brackets (no SNI; checked against IP
 * SANs) when it is 1.  A name that parses as an IP literal, or an IP flag
 * on something that does not, or a port outside 1 to 65535, is
 * SL_ERR_INVALID.  Sessions are kept per (sandbox, host, port): sandbox is
 * the sandbox's id (NULL: the sources no sandbox owns), so one sandbox
 * never resumes, nor lets the upstream link it by, another's session, nor
 * one made for another port.  If the context holds a session for that
 * triple from an earlier connection it is offered for resumption (a TLS
 * 1.3 ticket only once); sessions the server sends on this SSL are stored
 * for the next one (a TLS 1.3 ticket arrives after the handshake, when the
 * caller reads).  The session stays resumable only if SSL_shutdown sent
 * close_notify before SSL_free: OpenSSL marks the session of an SSL freed
 * mid-connection unresumable, and it is then dropped.  The caller owns
 * *out (SSL_free), attaches the BIO or fd, and uses it from one thread at
 * a time.
 */
int	tlsup_ssl_new(SSL_CTX *ctx, const char *sandbox, const char *host,
	    int host_is_ip, unsigned port, SSL **out);

/*
 * A client certificate to present: a pem secret's key, leaf and chain,
 * and id, what tells it from others (its name and fingerprint, so that a
 * rotation is another one).  Sessions are kept per (sandbox, host, port,
 * id): a session made with a certificate is never resumed without it, nor
 * one made without it with it.
 */
struct tlsup_client {
	const char	*id;
	const struct pemkey *pem;	/* with a leaf */
};

/* tlsup_ssl_new that presents client when the server asks (NULL: none). */
int	tlsup_ssl_new_as(SSL_CTX *ctx, const char *sandbox, const char *host,
	    int host_is_ip, unsigned port, const struct tlsup_client *client,
	    SSL **out);

/*
 * The SSL offers ALPN "h2" before "http/1.1" (an upstream for HTTP/2
 * streams: one connection carries them all); 0 or SL_ERR_NOMEM.
 * tlsup_is_h2: the handshake chose h2 (of any SSL, server side too).
 */
int	tlsup_offer_h2(SSL *ssl);
int	tlsup_is_h2(SSL *ssl);
/*
 * After a completed handshake: the chain and host verified, TLS 1.2 or
 * later, ALPN "http/1.1", "h2" (when offered) or none, and when npins > 0, the leaf's pin (see
 * tlsup_pin_of) equal to one of pins.  Returns 0, or SL_ERR_DENIED with
 * reason (cut to len) set to one of
 *   "upstream-handshake-incomplete", "upstream-tls-version",
 *   "upstream-cert-invalid: <X509_verify_cert_error_string>",
 *   "upstream-alpn-mismatch", "upstream-pin-mismatch",
 * or another SL_ERR_* (with reason "upstream-pin-error") when the pin
 * cannot be computed.  A resumed session is checked against the
 * certificate it was first verified with.
 */
int	tlsup_check_peer(SSL *ssl, char *const *pins, size_t npins,
	    char *reason, size_t len);

/*
 * A short reason for a failed handshake, for the audit record and the 502
 * body: err is the first OpenSSL error code of the failure (ERR_peek_error()
 * right after SSL_do_handshake failed, or bufferevent_get_openssl_error()),
 * 0 if none.  Writes one of
 *   "upstream-cert-invalid: <X509_verify_cert_error_string>",
 *   "upstream-tls-version: <OpenSSL reason>"	(protocol version refused),
 *   "upstream-tls-error: <OpenSSL reason>"	(any other protocol error),
 *   "upstream-closed"	(EOF: no OpenSSL error),
 *   "upstream-closed: <strerror>"	(a socket error).
 * Does not touch the thread's error queue.
 */
void	tlsup_handshake_reason(const SSL *ssl, unsigned long err,
	    char *reason, size_t len);

/* Writes cert's pin to out (TLSUP_PIN_BUFSZ bytes).  0 or SL_ERR_*. */
int	tlsup_pin_of(X509 *cert, char *out);
/* Whether pin is a well-formed pin (44 canonical base64 characters). */
int	tlsup_pin_ok(const char *pin);

#endif
