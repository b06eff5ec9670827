/*
 * dechunk.c: chunked bodies taken out of their framing (RFC 9112 7.1),
 * one byte of framing at a time and runs of data at once.
 */
#include "autoconf.h"

#include "parse/dechunk.h"
#include "parse/httppath.h"

enum { D_SIZE, D_EXT, D_SIZE_LF, D_DATA, D_DATA_CR, D_DATA_LF, D_DONE };

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
	return d->state == D_DONE;
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
			if (d->trailers != NULL && d->trailers(arg, p + i,
			    n - i) != 0)
				return -1;
			i = n;
			break;
		}
	}
	return 0;
}
