/* addr.h: IP addresses, their canonical form and their class. */
#ifndef SLUICE_ADDR_H
#define SLUICE_ADDR_H

#include <sys/socket.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stddef.h>

/* An IPv4 or IPv6 address; IPv4 lives in bytes[0..3], the rest zero. */
struct sl_addr {
	sa_family_t	family;		/* AF_INET or AF_INET6 */
	uint8_t		bytes[16];	/* network byte order */
};

#define ADDR_STRLEN	48	/* enough for any formatted address */

/* Reads an AF_INET/AF_INET6 sockaddr.  Returns 0 or SL_ERR_INVALID. */
int	addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
	    struct sl_addr *out, uint16_t *port);
/* Writes a sockaddr for addr:port; returns its length. */
socklen_t addr_to_sockaddr(const struct sl_addr *a, uint16_t port,
	    struct sockaddr_storage *ss);

/*
 * Parses a literal address ("198.18.0.1", "fd00:5c::1"); no brackets, no
 * zone, and IPv4 only as a dotted quad (never "127.1" or octal parts).
 */
int	addr_parse(const char *s, struct sl_addr *out);
/*
 * Parses "ADDR/LEN" or a bare "ADDR" (full length).  LEN is decimal
 * without leading zeros, at most 32 or 128.  Host bits beyond LEN must be
 * zero (SL_ERR_INVALID otherwise, so "10.0.0.1/8" is refused).
 */
int	addr_parse_prefix(const char *s, struct sl_addr *out, unsigned *plen);
/*
 * Parses "HOST:PORT" with HOST an IPv4 literal or "[IPv6]" (brackets
 * required) into a sockaddr; PORT is 1..65535 in decimal without leading
 * zeros.  Returns 0 or SL_ERR_INVALID.
 */
int	addr_parse_endpoint(const char *s, struct sockaddr_storage *ss,
	    socklen_t *len);
/* Formats without brackets into buf (ADDR_STRLEN bytes). Returns buf. */
char	*addr_format(const struct sl_addr *a, char *buf, size_t len);
int	addr_equal(const struct sl_addr *a, const struct sl_addr *b);

/*
 * Canonical form for every policy test: an IPv6 address that carries an
 * IPv4 address (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96 other than
 * :: and ::1, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16) becomes
 * that IPv4 address.  in and out may alias.
 */
void	addr_canonical(const struct sl_addr *in, struct sl_addr *out);
/*
 * The prefix form of addr_canonical, for CIDR rules: an IPv6 prefix inside
 * one of those ranges, long enough to reach the IPv4 part, becomes the IPv4
 * prefix it covers ("::ffff:10.0.0.0/104" is 10.0.0.0/8).  One inside such
 * a range that constrains bits the canonical form drops (6to4 longer than
 * /48, 64:ff9b:1::/48 shorter than /96 or with bits 48..95 set, or any
 * prefix ending before the IPv4 part) is SL_ERR_INVALID, never silently
 * widened.  Other prefixes are copied; note that a prefix merely covering
 * such a range ("2000::/3") does not cover the IPv4 addresses it carries.
 * Host bits are not checked here.  in and out may alias.
 */
int	addr_canonical_prefix(const struct sl_addr *in, unsigned plen,
	    struct sl_addr *out, unsigned *out_plen);

enum addr_class {
	ADDR_PUBLIC,		/* judged by the policy */
	ADDR_PRIVATE,		/* RFC 1918, CGNAT 100.64/10, ULA fc00::/7 */
	ADDR_FORBIDDEN,		/* never reachable from a sandbox */
};

/*
 * Classifies a canonical address (it canonicalises again, so a forgotten
 * addr_canonical cannot pass ::ffff:127.0.0.1 off as public).  FORBIDDEN:
 * 0.0.0.0/8 and ::/128 ("unspecified"), 127/8 and ::1 ("loopback"),
 * 169.254/16 and fe80::/10 ("link-local", cloud metadata included),
 * 224/4 and ff00::/8 ("multicast"), 240/4 with broadcast ("reserved"),
 * Teredo 2001::/32 ("teredo").  PRIVATE: 10/8, 172.16/12, 192.168/16
 * ("private"), 100.64/10 ("cgnat"), fc00::/7 ("ula").  Else PUBLIC
 * ("public").  *why (may be NULL) gets that static word for the audit
 * trail.  Thread-safe.
 */
enum addr_class addr_classify(const struct sl_addr *a, const char **why);

#endif
