/* sniff.h: what a client's first bytes are, and its TLS ClientHello. */
#ifndef SLUICE_SNIFF_H
#define SLUICE_SNIFF_H

#include <stddef.h>
#include <stdint.h>

#include "util/names.h"

/* Results of the pure parsers: need more bytes, complete, or refused. */
enum parse_status {
	PARSE_COMPLETE = 0,
	PARSE_NEED_MORE = 1,
	PARSE_INVALID = -1,
	PARSE_TOO_BIG = -2,
};

enum sniff_proto { SNIFF_TLS, SNIFF_HTTP, SNIFF_OPAQUE };

/*
 * Tells from the first bytes of a client stream what it speaks.  TLS: a
 * handshake record header (0x16 0x03 0x0X).  HTTP: an uppercase method
 * token from a fixed list followed by a space.  Returns PARSE_COMPLETE
 * with *out set, or PARSE_NEED_MORE while the bytes so far are a prefix of
 * something TLS or HTTP could still be.  Never reads past len.
 */
int	sniff_proto(const uint8_t *buf, size_t len, enum sniff_proto *out);

#define TLS_ALPN_MAX	8

struct tls_hello {
	int		has_sni;
	char		sni[NAME_BUFSZ];	/* normalised; "" when absent */
	int		has_ech;	/* encrypted_client_hello (0xfe0d) */
	int		offers_tls13;	/* supported_versions lists 0x0304 */
	uint16_t	legacy_version;
	size_t		nalpn;		/* protocols offered, first TLS_ALPN_MAX */
	char		alpn[TLS_ALPN_MAX][32];	/* printable ones only, cut */
	size_t		hello_len;	/* bytes of the stream that held it */
};

/*
 * Parses the ClientHello at the start of a client stream.  It may be split
 * over any number of TLS records (each of type handshake) and those over
 * any number of reads: call again with the whole stream so far.  Reads no
 * byte past len and none past a length it has not checked.
 *
 * PARSE_COMPLETE: *out filled.  PARSE_NEED_MORE: the stream so far is a
 * valid prefix.  PARSE_TOO_BIG: the records needed exceed limit bytes.
 * PARSE_INVALID: not a ClientHello, malformed lengths, a duplicate
 * extension, an SNI extension that is empty, holds a zero-length name,
 * several host names or an invalid name, or a record that is not
 * handshake.  *out is written only on COMPLETE.
 */
int	tls_clienthello_parse(const uint8_t *buf, size_t len, size_t limit,
	    struct tls_hello *out);

#endif
