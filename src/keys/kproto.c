/* kproto.c: the table of requests to the keys process (kproto.h). */
#include "autoconf.h"

#include "util/chan.h"
#include "keys/kproto.h"
#include "keys/sealed.h"

/* A string field of 1..n bytes, and a byte field of 1..n bytes. */
#define STR(n)		(4u + (n))
#define U32		4u
#define U64		8u

static const struct kproto_row rows[] = {
	{ KPROTO_HELLO, "hello", KPROTO_FROM_CTL, KPROTO_WHEN_START, 0, 0 },
	{ KPROTO_STORE_KEYS, "store_keys", KPROTO_FROM_CTL, KPROTO_WHEN_START,
	    0, 0 },
	{ KPROTO_READY, "ready", KPROTO_FROM_CTL, KPROTO_WHEN_START, 0, 0 },
	{ KPROTO_SEALED_OPEN, "sealed_open", KPROTO_FROM_CTL,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN,
	    STR(SEALED_HEADER_LEN), STR(SEALED_MAX_BLOB) },
	{ KPROTO_CA_NEW, "ca_new", KPROTO_FROM_CTL,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN,
	    STR(1) + U32 + U32,
	    STR(KPROTO_ID_MAX) + U32 + U32 +
	    KPROTO_NAMES_MAX * STR(KPROTO_HOST_MAX) },
	{ KPROTO_CA_OPEN, "ca_open", KPROTO_FROM_CTL,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN,
	    STR(1) + STR(1) + STR(SEALED_HEADER_LEN),
	    STR(KPROTO_ID_MAX) + STR(KPROTO_CERT_MAX) +
	    STR(KPROTO_SEALED_CA_MAX) },
	{ KPROTO_CA_SEAL, "ca_seal", KPROTO_FROM_CTL,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN, U64 + U64, U64 + U64 },
	{ KPROTO_CA_DROP, "ca_drop", KPROTO_FROM_CTL | KPROTO_FROM_WORKER,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN, U64, U64 },
	{ KPROTO_LEAF_MINT, "leaf_mint", KPROTO_FROM_CTL | KPROTO_FROM_WORKER,
	    KPROTO_WHEN_RUN, U64 + U32 + STR(1) + STR(1),
	    U64 + U32 + STR(KPROTO_HOST_MAX) + STR(KPROTO_SPKI_MAX) },
	{ KPROTO_IDKEYS_LOAD, "idkeys_load", KPROTO_FROM_CTL,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN, 0, 0 },
	/* kid, iss, sandbox, aud, then five optional claims; now, ttl. */
	{ KPROTO_JWT_SIGN, "jwt_sign", KPROTO_FROM_CTL | KPROTO_FROM_WORKER,
	    KPROTO_WHEN_RUN, 4 * STR(1) + 5 * STR(0) + U64 + U32,
	    9 * STR(KPROTO_CLAIM_MAX) + U64 + U32 },
	{ KPROTO_AUDIT_ROUND, "audit_round", KPROTO_FROM_AUDIT,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN, U32 + U32, CHAN_MSG_MAX },
	{ KPROTO_AUDIT_TAKEOVER, "audit_takeover", KPROTO_FROM_AUDIT,
	    KPROTO_WHEN_START | KPROTO_WHEN_RUN, 0, 0 },
	{ KPROTO_AUDIT_RELEASE, "audit_release", KPROTO_FROM_AUDIT,
	    KPROTO_WHEN_RUN, U64, U64 },
};

const struct kproto_row *
kproto_row(uint32_t type)
{
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].type == type)
			return &rows[i];
	return NULL;
}

const struct kproto_row *
kproto_admit(uint32_t type, size_t len, unsigned role,
    enum kproto_phase phase, const char **why)
{
	const struct kproto_row *row = kproto_row(type);
	unsigned when = phase == KPROTO_START ? KPROTO_WHEN_START :
	    KPROTO_WHEN_RUN;

	if (row == NULL)
		*why = "a request that is not in the table";
	else if ((row->from & role) == 0)
		*why = "a request this channel may not send";
	else if ((row->when & when) == 0)
		*why = phase == KPROTO_START ? "a request before ready" :
		    "a request of the start after ready";
	else if (len < row->min || len > row->max)
		*why = "a request out of its bounds";
	else
		return row;
	return NULL;
}
