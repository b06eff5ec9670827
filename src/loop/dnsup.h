/* dnsup.h: one question asked of the upstream resolvers, asynchronously. */
#ifndef SLUICE_DNSUP_H
#define SLUICE_DNSUP_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct endpoint;
struct dns_query;
struct dnsup;

/*
 * Called exactly once (unless cancelled): err 0 with the response bytes
 * (valid during the call) and the id it was asked with, or SL_ERR_IO when
 * no resolver answered.
 */
typedef void (*dnsup_cb)(int err, const uint8_t *resp, size_t len,
	    uint16_t id, void *arg);

/*
 * Asks q's question: a random id and a fresh UDP socket (so a random source
 * port) per attempt, each resolver in turn, attempts bounded by timeout_ms
 * each; a datagram that does not carry our id and question is ignored; a
 * truncated answer is asked again over TCP.  Returns NULL on a local
 * failure (cb is then not called).
 */
struct dnsup *dnsup_start(struct event_base *base,
	    const struct endpoint *servers, size_t nservers,
	    const struct dns_query *q, unsigned timeout_ms, dnsup_cb cb,
	    void *arg);
/* Stops it; cb is not called.  Accepts NULL. */
void	dnsup_cancel(struct dnsup *u);

#endif
