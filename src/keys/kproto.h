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
	KPROTO_NTYPES,			/* one past the last request */
	KPROTO_OK = 0x8000,		/* answers */
	KPROTO_ERR = 0x8001,
};

/* Who sends on a channel: its role, fixed when the channel is made. */
#define KPROTO_FROM_CTL		0x1	/* the control thread */
#define KPROTO_FROM_WORKER	0x2	/* a worker thread */

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
