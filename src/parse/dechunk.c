/*
 * dechunk.c: chunked bodies taken out of their framing (RFC 9112 7.1),
 * one byte of framing at a time and runs of data at once.
 */
#include "autoconf.h"

#include "parse/dechunk.h"
#include "parse/httppath.h"

enum {
	D_SIZE, D_EXT, D_SIZE_LF, D_DATA, D_DATA_CR, D_DATA_LF,
	/* After the last chunk: the trailer section, a line at a time. */
	D_DONE,		/* at the start of a line */
	D_TLINE,	/* in a field line */
	D_TLINE_LF,	/* its CR seen */
	D_END_LF,	/* the empty line's CR seen */
	D_END		/* the body is whole: more bytes are not its */
};

void
dechunk_init(struct dechunk *d)
{
	d->state = D_SIZE;
	d->left = 0;
	d->trailers = NULL;
}

void
dechunk_trailers(struct dechunk *d, dechunk_cb cb)
{
	d->trailers = cb;
}

int
dechunk_done(const struct dechunk *d)
{
	return d->state >= D_DONE;
}

int
dechunk_ended(const struct dechunk *d)
{
	return d->state == D_END;
}

/*
 * Bytes of the trailer section, up to its end: where its empty line ends
 * is all that is looked for (the message's parser checked the fields).
 */
static size_t
trailer_section(struct dechunk *d, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n && d->state != D_END; i++) {
		switch (d->state) {
		case D_DONE:
			d->state = p[i] == '\r' ? D_END_LF : D_TLINE;
			break;
		case D_TLINE:
			if (p[i] == '\r')
				d->state = D_TLINE_LF;
			break;
		case D_TLINE_LF:
			if (p[i] != '\r')
				d->state = p[i] == '\n' ? D_DONE : D_TLINE;
			break;
		case D_END_LF:
			d->state = p[i] == '\n' ? D_END : D_TLINE;
			break;
		}
	}
	return i;
}

int
dechunk_feed(struct dechunk *d, const uint8_t *p, size_t n, dechunk_cb cb,
    void *arg)
{
	size_t i = 0, take;
	int c;

	while (i < n) {
		switch (d->state) {
		case D_SIZE:
			c = p[i++];
			if (c == ';' || c == ' ' || c == '\t')
				d->state = D_EXT;
			else if (c == '\r')
				d->state = D_SIZE_LF;
			else if (d->left >> 56 != 0 || http_hexval(c) < 0)
				return -1;
			else
				d->left = d->left * 16 +
				    (uint64_t)http_hexval(c);
			break;
		case D_EXT:
			if (p[i++] == '\r')
				d->state = D_SIZE_LF;
			break;
		case D_SIZE_LF:
			if (p[i++] != '\n')
				return -1;
			d->state = d->left == 0 ? D_DONE : D_DATA;
			break;
		case D_DATA:
			take = n - i < d->left ? n - i : (size_t)d->left;
			if (cb(arg, p + i, take) != 0)
				return -1;
			i += take;
			if ((d->left -= take) == 0)
				d->state = D_DATA_CR;
			break;
		case D_DATA_CR:
			if (p[i++] != '\r')
				return -1;
			d->state = D_DATA_LF;
			break;
		case D_DATA_LF:
			if (p[i++] != '\n')
				return -1;
			d->state = D_SIZE;
			break;
		case D_DONE:		/* trailers and the last CRLF */
		case D_TLINE:
		case D_TLINE_LF:
		case D_END_LF:
			take = trailer_section(d, p + i, n - i);
			if (d->trailers != NULL && d->trailers(arg, p + i,
			    take) != 0)
				return -1;
			i += take;
			break;
		case D_END:
			return 0;	/* not the body's */
		}
	}
	return 0;
}
