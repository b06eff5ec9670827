/*
 * kproto.h: the one boundary between the keys process and the process
 * that reads sandbox bytes (its control thread and its worker threads),
 * in the style of OpenSSH's monitor table.  Every request a channel may
 * carry is a row: who may send it (the channel's role), when (before or
 * after the worker said it is serving), and the bounds of its payload.
 * A message that is not a row, comes from the wrong role or phase, or
 * is out of bounds ends the worker: the keys process does not answer it.
 *
 * Requests and their fields (wire.h), and the answer's:
 *
 *   HELLO        ctl  start  -                                 -> u32 version
 *   STORE_KEYS   ctl  start  -                                 -> bytes fpkey[32], bytes phkey[32]
 *   READY        ctl  start  -                                 -> -
 *   SEALED_OPEN  ctl  any    bytes blob                        -> str name, u32 kind, u64 version,
 *                                                                 u64 created, bytes keyid, u32 nhosts,
 *                                                                 str host..., bytes value
 *   CA_NEW       ctl  any    str id, u32 validity_s, u32 n,    -> u64 handle, bytes cert (DER)
 *                            str name...
 *   CA_OPEN      ctl  any    str id, bytes cert (PEM),         -> u64 handle, bytes cert (DER)
 *                            bytes sealed key
 *   CA_SEAL      ctl  any    u64 handle, u64 created           -> bytes sealed key
 *   CA_DROP      both any    u64 handle                        -> -
 *   LEAF_MINT    both run    u64 handle, u32 validity_s,       -> bytes cert (DER)
 *                            str host, bytes leaf public key (DER SubjectPublicKeyInfo)
 *   IDKEYS_LOAD  ctl  any    -                                 -> str kid (the signer's), u32 n,
 *                                                                 bytes public key (DER SPKI)...
 *   JWT_SIGN     both run    str kid, str iss, str sandbox,    -> str token, str jti
 *                            str aud, str team, str project,
 *                            str htm, str htu, str body_sha256 (each "" when absent),
 *                            u64 now, u32 ttl
 *   AUDIT_ROUND  audit any   u32 flags, u32 n, record...       -> the trail's figures (below)
 *                            record: u32 kind 1 (flat: u32 at_hash, u32 at_prev,
 *                            u32 at_seq, bytes body) or 2 (text: bytes JSON object)
 *   AUDIT_TAKEOVER audit any -                                 -> the figures
 *   AUDIT_RELEASE  audit run u64 to_pid                        -> the figures
 *
 * The trail's figures: u64 seq, str head, u64 written, u64 checkpoints,
 * u64 rotations, u64 last checkpoint's seq, u64 errors, u64 last sync,
 * u32 broken, u32 errno (why this round was not written; 0: it was).
 *
 * An answer is KPROTO_OK with the answer's fields, or KPROTO_ERR with
 * u32 -code (an SL_ERR_*) and str why (public words, never a key or a
 * value); it carries the request's id.
 */
#ifndef SLUICE_KPROTO_H
#define SLUICE_KPROTO_H

#include <stddef.h>
#include <stdint.h>

#define KPROTO_VERSION	1

enum kproto_type {
	KPROTO_HELLO = 1,
	KPROTO_STORE_KEYS,
	KPROTO_READY,
	KPROTO_SEALED_OPEN,
	KPROTO_CA_NEW,
	KPROTO_CA_OPEN,
	KPROTO_CA_SEAL,
	KPROTO_CA_DROP,
	KPROTO_LEAF_MINT,
	KPROTO_IDKEYS_LOAD,
	KPROTO_JWT_SIGN,
	KPROTO_AUDIT_ROUND,
	KPROTO_AUDIT_TAKEOVER,
	KPROTO_AUDIT_RELEASE,
	KPROTO_NTYPES,			/* one past the last request */
	KPROTO_OK = 0x8000,		/* answers */
	KPROTO_ERR = 0x8001,
};

/* Who sends on a channel: its role, fixed when the channel is made. */
#define KPROTO_FROM_CTL		0x1	/* the control thread */
#define KPROTO_FROM_WORKER	0x2	/* a worker thread */
#define KPROTO_FROM_AUDIT	0x4	/* the audit writer thread */

/* AUDIT_ROUND's flags. */
#define KPROTO_ROUND_ROTATE	0x1	/* rotate the file after the round */
#define KPROTO_ROUND_SYNC	0x2	/* answer once the round is durable */

/* The phase of the worker process, as the keys process sees it. */
enum kproto_phase {
	KPROTO_START,		/* before READY */
	KPROTO_RUN,		/* after it */
};
#define KPROTO_WHEN_START	0x1
#define KPROTO_WHEN_RUN		0x2

/* Bounds the rows use. */
#define KPROTO_ID_MAX		46	/* a sandbox id (ca.h) */
#define KPROTO_HOST_MAX		253
#define KPROTO_NAMES_MAX	256	/* a CA's name constraints */
#define KPROTO_CERT_MAX		16384	/* a certificate, PEM or DER */
#define KPROTO_SPKI_MAX		512	/* a leaf's public key */
#define KPROTO_SEALED_CA_MAX	4096	/* a CA key, sealed */
#define KPROTO_CLAIM_MAX	4096	/* a token's claim: htu is the longest */
#define KPROTO_TOKEN_MAX	8192	/* a signed token (jwt.h's JWT_MAX) */
#define KPROTO_SIGNKEYS_MAX	16	/* signing keys published */
#define KPROTO_WHY_MAX		256

struct kproto_row {
	enum kproto_type type;
	const char	*name;
	unsigned	 from;		/* KPROTO_FROM_* that may send it */
	unsigned	 when;		/* KPROTO_WHEN_* it may come in */
	uint32_t	 min, max;	/* payload bytes */
};

/* The row of type, or NULL when there is none. */
const struct kproto_row *kproto_row(uint32_t type);
/*
 * Whether a request of type with len payload bytes may come from role in
 * phase: its row, or NULL with *why (a static string) when it may not.
 */
const struct kproto_row *kproto_admit(uint32_t type, size_t len,
	    unsigned role, enum kproto_phase phase, const char **why);

#endif
