/* addr.c: IP addresses, their canonical form and their class. */
#include "autoconf.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "util/addr.h"
#include "util/err.h"

/* Longest text addr_parse() can accept, with its NUL. */
#define ADDR_TEXTMAX	INET6_ADDRSTRLEN

static unsigned
family_bits(sa_family_t family)
{
	return family == AF_INET ? 32 : 128;
}

static unsigned
addr_bit(const uint8_t *bytes, unsigned i)
{
	return (bytes[i / 8] >> (7 - i % 8)) & 1;
}

/* Whether the first plen bits of a and b agree. */
static int
bits_equal(const uint8_t *a, const uint8_t *b, unsigned plen)
{
	unsigned full = plen / 8, rest = plen % 8;
	uint8_t mask;

	if (memcmp(a, b, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rest));
	return ((a[full] ^ b[full]) & mask) == 0;
}

/* Whether bits from..to-1 of bytes are all zero. */
static int
bits_zero(const uint8_t *bytes, unsigned from, unsigned to)
{
	unsigned i;

	for (i = from; i < to; i++)
		if (addr_bit(bytes, i))
			return 0;
	return 1;
}

int
addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
    struct sl_addr *out, uint16_t *port)
{
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;
	struct sl_addr a;
	uint16_t p;

	if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
		return SL_ERR_INVALID;
	memset(&a, 0, sizeof(a));
	switch (sa->sa_family) {
	case AF_INET:
		if (len < (socklen_t)sizeof(*sin))
			return SL_ERR_INVALID;
		sin = (const struct sockaddr_in *)(const void *)sa;
		a.family = AF_INET;
		memcpy(a.bytes, &sin->sin_addr, 4);
		p = ntohs(sin->sin_port);
		break;
	case AF_INET6:
		if (len < (socklen_t)sizeof(*sin6))
			return SL_ERR_INVALID;
		sin6 = (const struct sockaddr_in6 *)(const void *)sa;
		a.family = AF_INET6;
		memcpy(a.bytes, &sin6->sin6_addr, 16);
		p = ntohs(sin6->sin6_port);
		break;
	default:
		return SL_ERR_INVALID;
	}
	*out = a;
	if (port != NULL)
		*port = p;
	return 0;
}

socklen_t
addr_to_sockaddr(const struct sl_addr *a, uint16_t port,
    struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;

	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		sin = (struct sockaddr_in *)(void *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, a->bytes, 4);
		return sizeof(*sin);
	}
	sin6 = (struct sockaddr_in6 *)(void *)ss;
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	memcpy(&sin6->sin6_addr, a->bytes, 16);
	return sizeof(*sin6);
}

int
addr_parse(const char *s, struct sl_addr *out)
{
	struct sl_addr a;

	if (s == NULL)
		return SL_ERR_INVALID;
	memset(&a, 0, sizeof(a));
	/*
	 * inet_pton, unlike inet_aton, takes only the dotted quad: no
	 * "127.1", no octal or hex parts, so a literal means one thing.
	 */
	if (strchr(s, ':') != NULL) {
		if (inet_pton(AF_INET6, s, a.bytes) != 1)
			return SL_ERR_INVALID;
		a.family = AF_INET6;
	} else {
		if (inet_pton(AF_INET, s, a.bytes) != 1)
			return SL_ERR_INVALID;
		a.family = AF_INET;
	}
	*out = a;
	return 0;
}

/*
 * Parses a decimal number of 1 to 5 digits no greater than max.  Leading
 * zeros are refused: some parsers read them as octal, so "/010" or ":053"
 * would mean different things to different tools.
 */
static int
parse_small_uint(const char *s, unsigned max, unsigned *out)
{
	unsigned v = 0;
	size_t i;

	if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
		return SL_ERR_INVALID;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= 5 || s[i] < '0' || s[i] > '9')
			return SL_ERR_INVALID;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return SL_ERR_INVALID;
	*out = v;
	return 0;
}

/* Copies s[0..n-1] into buf as a string; refuses what does not fit. */
static int
copy_part(const char *s, size_t n, char *buf, size_t bufsz)
{
	if (n >= bufsz)
		return SL_ERR_INVALID;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}

int
addr_parse_prefix(const char *s, struct sl_addr *out, unsigned *plen)
{
	char text[ADDR_TEXTMAX];
	const char *slash;
	struct sl_addr a;
	unsigned len, max;
	int r;

	if (s == NULL)
		return SL_ERR_INVALID;
	if ((slash = strchr(s, '/')) == NULL)
		slash = s + strlen(s);
	if ((r = copy_part(s, (size_t)(slash - s), text, sizeof(text))) != 0)
		return r;
	if ((r = addr_parse(text, &a)) != 0)
		return r;
	max = family_bits(a.family);
	if (*slash == '\0')
		len = max;
	else if ((r = parse_small_uint(slash + 1, max, &len)) != 0)
		return r;
	if (!bits_zero(a.bytes, len, max))
		return SL_ERR_INVALID;
	*out = a;
	*plen = len;
	return 0;
}

int
addr_parse_endpoint(const char *s, struct sockaddr_storage *ss,
    socklen_t *len)
{
	char text[ADDR_TEXTMAX];
	const char *host, *end, *colon;
	struct sl_addr a;
	unsigned port;
	int r;

	if (s == NULL)
		return SL_ERR_INVALID;
	if (s[0] == '[') {
		/* An IPv6 host must be bracketed: its colons hide the port. */
		host = s + 1;
		if ((end = strchr(host, ']')) == NULL || end[1] != ':')
			return SL_ERR_INVALID;
		colon = end + 1;
	} else {
		host = s;
		if ((colon = strchr(s, ':')) == NULL ||
		    strchr(colon + 1, ':') != NULL)
			return SL_ERR_INVALID;
		end = colon;
	}
	if ((r = copy_part(host, (size_t)(end - host), text,
	    sizeof(text))) != 0)
		return r;
	if ((r = addr_parse(text, &a)) != 0)
		return r;
	if ((s[0] == '[') != (a.family == AF_INET6))
		return SL_ERR_INVALID;		/* "[1.2.3.4]:53" */
	if ((r = parse_small_uint(colon + 1, 65535, &port)) != 0)
		return r;
	if (port == 0)
		return SL_ERR_INVALID;
	*len = addr_to_sockaddr(&a, (uint16_t)port, ss);
	return 0;
}

char *
addr_format(const struct sl_addr *a, char *buf, size_t len)
{
	int af = a->family == AF_INET ? AF_INET : AF_INET6;

	if (len == 0)
		return buf;
	if (inet_ntop(af, a->bytes, buf, (socklen_t)len) == NULL)
		buf[0] = '\0';	/* only when buf is too small */
	return buf;
}

int
addr_equal(const struct sl_addr *a, const struct sl_addr *b)
{
	if (a->family != b->family)
		return 0;
	return memcmp(a->bytes, b->bytes, family_bits(a->family) / 8) == 0;
}

/*
 * The IPv6 ranges that carry an IPv4 address.  The IPv4 address sits at bit
 * v4_off; bits between plen and v4_off carry nothing we judge by (RFC 8215
 * leaves them to the operator), and neither do bits after the IPv4 address
 * (6to4 subnet and interface id).
 */
struct embedding {
	uint8_t		prefix[16];
	unsigned	plen;
	unsigned	v4_off;
};

static const struct embedding embeddings[] = {
	/* IPv4-mapped ::ffff:0:0/96 */
	{ { 0,0,0,0, 0,0,0,0, 0,0,0xff,0xff }, 96, 96 },
	/* IPv4-compatible ::/96 (deprecated; :: and ::1 excepted below) */
	{ { 0 }, 96, 96 },
	/* NAT64 well-known prefix 64:ff9b::/96 (RFC 6052) */
	{ { 0,0x64,0xff,0x9b }, 96, 96 },
	/* NAT64 local-use 64:ff9b:1::/48 (RFC 8215) */
	{ { 0,0x64,0xff,0x9b, 0,1 }, 48, 96 },
	/* 6to4 2002::/16 (RFC 3056): 2002:AABB:CCDD::/48 */
	{ { 0x20,0x02 }, 16, 16 },
};

/* :: and ::1 sit in ::/96 but are IPv6's own unspecified and loopback. */
static int
is_v6_any_or_loopback(const uint8_t *b)
{
	return bits_zero(b, 0, 127);
}

static const struct embedding *
find_embedding(const uint8_t *bytes)
{
	size_t i;

	for (i = 0; i < sizeof(embeddings) / sizeof(embeddings[0]); i++)
		if (bits_equal(bytes, embeddings[i].prefix, embeddings[i].plen))
			return &embeddings[i];
	return NULL;
}

/* Bits off..off+31 of an IPv6 address, as an IPv4 address. */
static void
extract_v4(const uint8_t *bytes, unsigned off, struct sl_addr *out)
{
	struct sl_addr v4;
	unsigned i;

	memset(&v4, 0, sizeof(v4));
	v4.family = AF_INET;
	for (i = 0; i < 32; i++)
		if (addr_bit(bytes, off + i))
			v4.bytes[i / 8] |= (uint8_t)(0x80 >> (i % 8));
	*out = v4;
}

void
addr_canonical(const struct sl_addr *in, struct sl_addr *out)
{
	const struct embedding *e;
	struct sl_addr a = *in;

	if (a.family == AF_INET) {
		memset(a.bytes + 4, 0, sizeof(a.bytes) - 4);
	} else if ((e = find_embedding(a.bytes)) != NULL &&
	    !is_v6_any_or_loopback(a.bytes)) {
		extract_v4(a.bytes, e->v4_off, &a);
	}
	*out = a;
}

int
addr_canonical_prefix(const struct sl_addr *in, unsigned plen,
    struct sl_addr *out, unsigned *out_plen)
{
	const struct embedding *e;
	struct sl_addr a = *in;

	if (plen > family_bits(in->family))
		return SL_ERR_INVALID;
	if (in->family == AF_INET6 && (e = find_embedding(in->bytes)) != NULL &&
	    plen >= e->plen && !(plen == 128 &&
	    is_v6_any_or_loopback(in->bytes))) {
		/*
		 * Addresses here are judged as IPv4, so the prefix must
		 * become an IPv4 prefix; one that constrains bits the
		 * canonical form drops cannot, and is refused rather than
		 * silently widened.
		 */
		if (plen < e->v4_off || plen > e->v4_off + 32 ||
		    !bits_zero(in->bytes, e->plen, e->v4_off))
			return SL_ERR_INVALID;
		extract_v4(in->bytes, e->v4_off, &a);
		plen -= e->v4_off;
	}
	*out = a;
	*out_plen = plen;
	return 0;
}

/* One row of the classification table. */
struct range {
	sa_family_t	family;
	uint8_t		prefix[16];
	unsigned	plen;
	enum addr_class	cls;
	const char	*why;
};

static const struct range ranges[] = {
	{ AF_INET, { 0 }, 8, ADDR_FORBIDDEN, "unspecified" },	/* "this network" */
	{ AF_INET, { 127 }, 8, ADDR_FORBIDDEN, "loopback" },
	{ AF_INET, { 169, 254 }, 16, ADDR_FORBIDDEN, "link-local" },
	{ AF_INET, { 224 }, 4, ADDR_FORBIDDEN, "multicast" },
	{ AF_INET, { 240 }, 4, ADDR_FORBIDDEN, "reserved" },	/* and broadcast */
	{ AF_INET, { 10 }, 8, ADDR_PRIVATE, "private" },
	{ AF_INET, { 172, 16 }, 12, ADDR_PRIVATE, "private" },
	{ AF_INET, { 192, 168 }, 16, ADDR_PRIVATE, "private" },
	{ AF_INET, { 100, 64 }, 10, ADDR_PRIVATE, "cgnat" },
	{ AF_INET6, { 0 }, 128, ADDR_FORBIDDEN, "unspecified" },
	{ AF_INET6, { [15] = 1 }, 128, ADDR_FORBIDDEN, "loopback" },
	{ AF_INET6, { 0xfe, 0x80 }, 10, ADDR_FORBIDDEN, "link-local" },
	{ AF_INET6, { 0xff }, 8, ADDR_FORBIDDEN, "multicast" },
	/*
	 * Teredo 2001::/32 tunnels to an IPv4 server and client that the
	 * address only partly (and obfuscated) names; we cannot judge where
	 * the packets end up, so it is never reachable.
	 */
	{ AF_INET6, { 0x20, 0x01, 0, 0 }, 32, ADDR_FORBIDDEN, "teredo" },
	{ AF_INET6, { 0xfc }, 7, ADDR_PRIVATE, "ula" },
};

enum addr_class
addr_classify(const struct sl_addr *a, const char **why)
{
	struct sl_addr c;
	size_t i;

	/*
	 * Canonicalising again costs little and is idempotent; it keeps a
	 * caller that forgot from passing ::ffff:127.0.0.1 off as public.
	 */
	addr_canonical(a, &c);
	for (i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		if (ranges[i].family == c.family &&
		    bits_equal(c.bytes, ranges[i].prefix, ranges[i].plen)) {
			if (why != NULL)
				*why = ranges[i].why;
			return ranges[i].cls;
		}
	}
	if (why != NULL)
		*why = "public";
	return ADDR_PUBLIC;
}
