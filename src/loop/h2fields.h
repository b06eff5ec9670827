/*
 * h2fields.h: a trailer section in HTTP/1.1 text (field lines a parser
 * checked, then the empty line), kept as it streams past and sent as the
 * HEADERS that end an HTTP/2 stream.  The session towards the sandbox
 * (conn/h2_answer.c) sends an answer's, the one towards an upstream
 * (h2up.c) a request's.
 */
#ifndef SLUICE_H2FIELDS_H
#define SLUICE_H2FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

struct evbuffer;

/*
 * Adds p[0..n) of a trailer section to *b, made on its first field byte:
 * a section that is only its end (most are) makes none.  0, or -1.
 */
int	h2_trailers_keep(struct evbuffer **b, const uint8_t *p, size_t n);
/*
 * For a data source's last read: the fields of section b, if any
 * (http_trailer_fields: what never passes is left out), submitted as the
 * trailers of stream id, each with nv_flags; then they, not the DATA, end
 * the stream (NO_END_STREAM in *data_flags).  b may be NULL.  0, or -1.
 */
int	h2_trailers_end(nghttp2_session *ng, int32_t id, struct evbuffer *b,
	    uint8_t nv_flags, uint32_t *data_flags);

#endif
