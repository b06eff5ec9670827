/*
 * icpt_int.h: what the parts of an intercepted connection share: the
 * connection's life and the sandbox's side (icpt.c), its requests
 * (icpt_req.c) and its upstream (icpt_up.c).
 */
#ifndef SLUICE_ICPT_INT_H
#define SLUICE_ICPT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "util/names.h"
#include "util/redact.h"
#include "parse/dechunk.h"
#include "keys/inject.h"
#include "keys/placeholder.h"
#include "loop/mintcache.h"
#include "loop/upool.h"

#include <sodium.h>

struct tstream;
struct conn;
struct event;
struct evbuffer;
struct http_reqs;
struct http_resps;
struct http_resp_head;
struct intercept_rule;
struct redactor;
struct inject;
struct secret;
struct resolve_req;
struct icpt_hold;
struct http_head;

#define ICPT_HIGH		(256u * 1024)	/* bytes queued for one side */
#define ICPT_MAX_PENDING	32	/* requests upstream has not answered */
#define ICPT_MAX_PINS		8
/*
 * An upstream with nothing owed waits this long for the client's next
 * request before it goes to the pool: a keep-alive client keeps its
 * own, an idle one holds none.
 */
#define ICPT_PARK_MS		100
#define ICPT_MAX_SECRETS	4	/* INJECT_MAX_SECRETS */
#define ICPT_TLS_KEY		4352	/* CA path, name@fingerprint */
/*
 * After our FIN, the sandbox's bytes are read and dropped until its own
 * FIN, for this long and this many bytes at most: closing a socket with
 * unread bytes resets it, and a reset takes the answers the sandbox has
 * not read yet with it.
 */
#define ICPT_LINGER_MS		2000
#define ICPT_LINGER_BYTES	(16u * 1024 * 1024)

/* A request from its judgement to its audit record. */
struct icpt_req {
	char		 method[24];
	char		 path[256];	/* normalised, cut for the record */
	char		 rule[96];
	const char	*action;	/* static */
	const char	*reason;	/* static */
	const char	*would_deny;	/* static: observe mode let it through */
	int		 status;
	int		 upgrade;	/* asked to switch protocols */
	int		 close;		/* the client asked to close after it */
	uint64_t	 bytes_up, bytes_down;
	uint64_t	 start_ms;
	/* Injected: the secrets it got (references), and what came back. */
	struct secret	*secrets[ICPT_MAX_SECRETS];
	size_t		 nsecrets;
	/* The minted tokens it got (references), and their sources. */
	struct mtoken	*mtoks[INJECT_MAX_TOKENS];
	const char	*mtok_src[INJECT_MAX_TOKENS];	/* in the policy */
	size_t		 nmtoks;
	int		 drop_cookies;	/* its answer's Set-Cookie goes */
	char		 rid[40];	/* links its request and response records */
	uint64_t	 redacted_head, redacted_body;
	/* Forwarded: its identity token, to take out of the answer. */
	struct icpt_tok	*tok;		/* owned; NULL unless forwarded */
	char		 jti[24];
	char		 to[80];	/* the proxy, host:port, for the record */
};

struct icpt_tok {
	uint8_t		*mem;		/* the token and its forms */
	struct redact_pat pats[REDACT_MAX_FORMS];
	size_t		 npats;
	uint64_t	 pats_key;	/* their name: redact_serial() */
};

/*
 * The sandbox's side: what becomes of what the sandbox sends.  Reading
 * goes on in HANDSHAKE, HEAD, BODY, DISCARD and TUNNEL only.
 */
enum icpt_rq {
	RQ_HANDSHAKE,	/* its TLS handshake */
	RQ_HEAD,	/* between requests, or in a head */
	RQ_BODY,	/* the body of a request that goes upstream */
	RQ_DISCARD,	/* the body of a refused request, read and dropped */
	RQ_REFUSED,	/* a refusal waits for the answers owed before it */
	RQ_TOKEN,	/* its head waits for a token being minted (tok_wait) */
	RQ_UPGRADE,	/* a passed upgrade waits for the upstream's answer */
	RQ_DONE,	/* its last request is read: nothing more is */
	RQ_TUNNEL,	/* after a 101: its bytes go upstream as they are */
	RQ_H2,		/* HTTP/2: the session (h2.c) reads, each stream an icpt */
};

/*
 * The upstream's side: what goes to the sandbox, and the connection's
 * end.  From FLUSH on there is no upstream.
 */
enum icpt_rs {
	RS_NONE,	/* no upstream: none needed yet, or it went to the pool */
	RS_CONNECTING,	/* one connects; nothing goes to it before it is checked */
	RS_READY,	/* checked; no answer under way */
	RS_INFO,	/* a 1xx answer's head went to the sandbox, its end is due */
	RS_BODY,	/* a final answer is under way; the connection stays */
	RS_LAST,	/* a final answer is under way that ends the connection */
	RS_TUNNEL,	/* after a 101: its bytes go to the sandbox as they are */
	RS_FLUSH,	/* the end: the sandbox gets what is queued, then close_notify */
	RS_DRAIN,	/* close_notify is queued: the socket's queue drains */
	RS_LINGER,	/* our FIN is out; what the sandbox still sends is dropped */
	RS_DONE,	/* over: the step closes the connection (end_reason) */
	RS_CLOSED,	/* conn_close ran; the memory waits for the next loop turn */
};

/* How the body of the answer under way reaches the sandbox. */
enum icpt_red {
	RED_OFF,	/* as it is */
	RED_CHUNKED,	/* de-chunked, redacted, re-chunked */
	RED_LENGTH,	/* length given: redacted, re-framed as chunked */
	RED_CLOSE,	/* close-delimited: redacted, ended by the close */
};

/*
 * The first ICPT_SCAN_MAX bytes of a request body, read for the sandbox's
 * placeholders as they go by (icpt_scan.c).
 */
#define ICPT_SCAN_MAX		(64u * 1024)

enum icpt_scan_mode {
	SCAN_OFF,	/* no body, nothing to look for, or read far enough */
	SCAN_PLAIN,	/* a body with a Content-Length */
	SCAN_CHUNKED,	/* a chunked one, read out of its framing */
};

struct icpt_scan {
	enum icpt_scan_mode mode;
	uint32_t	 seen;		/* data bytes read */
	uint8_t		 ncarry;
	char		 carry[PH_LEN - 1];	/* the last bytes read */
	struct dechunk	 dc;
	const struct secret *found;	/* the placeholder found: its secret */
};

/* sluice's own answer, held until the answers owed before it are out. */
struct icpt_refusal {
	char		*buf;		/* NULL: none */
	size_t		 len;
	int		 close;		/* the connection ends after it */
};

struct h2;
struct h2s;

struct icpt {
	struct conn	*c;
	/*
	 * HTTP/2: the session (in RQ_H2), on the connection's icpt; or, on a
	 * stream's, the stream it serves (its down is a pipe, its end is the
	 * stream's, not the connection's) and its id, for the records.
	 */
	struct h2	*h2;
	struct h2s	*h2s;
	int32_t		 stream_id;
	/*
	 * A stream's: the status of the answer it made itself (a refusal, an
	 * error), and why (static); 0 while none.
	 */
	int		 own_answer;
	const char	*own_reason;
	uint64_t	 active;	/* a stream's last progress (mono ms) */
	size_t		 high;		/* what ICPT_HIGH bounds, for this one */
	enum icpt_rq	 rq;		/* icpt_rq_set only */
	enum icpt_rs	 rs;		/* icpt_rs_set only */
	/*
	 * 0 while no step runs; in a step, 1 plus the state changes and
	 * callbacks since its round began: another round follows.
	 */
	unsigned	 busy;
	short		 down_ev, up_ev;	/* events of each side, not yet handled */
	const char	*end_reason;	/* why it ends (static), in DONE */
	struct tstream	*down;		/* the sandbox's socket (TLS, or plain) */
	struct tstream	*up;		/* TLS to the upstream, once needed */
	uint8_t		 up_tls[UPOOL_TLS_LEN];	/* the digest of what it was made with */
	struct http_reqs *reqs;
	struct http_resps *resps;
	struct icpt_refusal refusal;
	struct evbuffer	*held;		/* for the upstream, until it is checked */
	uint64_t	 audit_wait;	/* the audit ticket it waits for, or 0 */
	char		*pins[ICPT_MAX_PINS];	/* of the rule that opened it */
	size_t		 npins;
	struct event	*wake;		/* a step on the next loop turn */
	struct event	*linger;	/* LINGER: the socket, read and dropped */
	uint64_t	 linger_until;	/* LINGER ends then (mono ms) */
	size_t		 lingered;	/* bytes dropped in LINGER */
	struct icpt_req	 cur;		/* the request being read */
	/*
	 * Sent, not yet answered: ICPT_MAX_PENDING slots from the loop's
	 * qblocks while any request is under way, NULL when idle.
	 */
	struct icpt_req	*q;
	unsigned	 qhead, qn;
	/*
	 * How many of the oldest queued requests have bytes on their way to
	 * the upstream; the newer ones wait in held (their records, the
	 * upstream's handshake) and can still fail alone.
	 */
	unsigned	 q_sent;
	/*
	 * The bytes of held (and the requests) before the first request
	 * that waits for its record: they need not wait with it.
	 */
	size_t		 held_free;
	unsigned	 held_free_q;
	uint64_t	 from_sandbox, from_upstream;
	/* The response in progress is redacted (icpt_redact.c). */
	struct redactor	*red;		/* from the loop while an answer is redacted */
	struct evbuffer	*red_buf;	/* what it let go, before framing */
	enum icpt_red	 red_mode;
	struct dechunk	 red_dechunk;	/* RED_CHUNKED: its framing */
	struct evbuffer	*red_trailers;	/* RED_CHUNKED: its trailer section */
	uint64_t	 red_base;	/* replacements in the head */
	/* The upstream's host and port (a forward rule's proxy, or c's). */
	char		 up_host[NAME_BUFSZ + 2];
	unsigned	 up_port;
	struct resolve_req *resolving;	/* the proxy's name, being resolved */
	struct icpt_hold *hold;		/* a body its head waits for */
	struct icpt_scan scan;		/* the body read for placeholders */
	/*
	 * RQ_TOKEN: the head judged again once the mint it waits for ends
	 * (the parser is not fed meanwhile, so the head stays).
	 */
	struct mint_waiter tok_wait;
	const struct http_head *tok_head;
};

/* The request queue: sent, not yet answered, oldest first. */

/* The oldest request in the queue (qn > 0). */
static inline struct icpt_req *
icpt_q_head(struct icpt *ic)
{
	return &ic->q[ic->qhead];
}

/* The newest request in the queue (qn > 0). */
static inline struct icpt_req *
icpt_q_tail(struct icpt *ic)
{
	return &ic->q[(ic->qhead + ic->qn - 1) % ICPT_MAX_PENDING];
}

/* The slot after the newest (qn < ICPT_MAX_PENDING). */
static inline struct icpt_req *
icpt_q_next(struct icpt *ic)
{
	return &ic->q[(ic->qhead + ic->qn) % ICPT_MAX_PENDING];
}

/*
 * Whether the sandbox got the final head of the oldest request's answer
 * already (its status is set then): past that, no answer of ours fits.
 */
static inline int
icpt_answer_started(struct icpt *ic)
{
	return ic->qn > 0 && ic->q[ic->qhead].status != 0;
}

/* Drops the oldest request (qn > 0); its record was written. */
static inline void
icpt_q_pop(struct icpt *ic)
{
	ic->qhead = (ic->qhead + 1) % ICPT_MAX_PENDING;
	ic->qn--;
	if (ic->q_sent > 0)
		ic->q_sent--;
}

#define ICPT_QBLOCK	(ICPT_MAX_PENDING * sizeof(struct icpt_req))

/* The queue's slots, taken when the first request is queued; -1: no memory. */
int	icpt_q_take(struct icpt *ic);
/* Nothing queued: the slots go back to the loop. */
void	icpt_q_idle(struct icpt *ic);
/*
 * The HTTP parsers of both directions, from the loop's or new, before
 * the sandbox's bytes are read; -1 when out of memory.  They go back when
 * both are between messages with nothing owed (NULL while idle).
 */
int	icpt_parsers_take(struct icpt *ic);
void	icpt_parsers_idle(struct icpt *ic);

/* Answers the upstream owes (0 while idle: no parser then). */
size_t	icpt_resps_pending(const struct icpt *ic);

/* icpt.c: the connection's life and the sandbox's side. */

/*
 * A stream's interception (h2.c): requests read from pipe as HTTP/1.1
 * (pipe becomes its down), judged and sent on as on a connection of c's;
 * its end calls h2_stream_over(owner, reason) instead of closing c.  It
 * starts on the next loop turn.  NULL when out of memory (pipe is freed).
 */
struct icpt *icpt_stream_new(struct conn *c, struct tstream *pipe,
	    struct h2s *owner, int32_t id);
/* The idle and upstream timeouts of ic, at now (icpt_timer's part). */
void	icpt_timer_ic(struct icpt *ic, uint64_t now);

/* The one setters of the two states (logged at debug level). */
void	icpt_rq_set(struct icpt *ic, enum icpt_rq s);
void	icpt_rs_set(struct icpt *ic, enum icpt_rs s);
/*
 * The one step: handles what the callbacks recorded, moves requests and
 * answers as far as the states and the bounds let them, and closes the
 * connection when its state says so (the one way out).  A call while a
 * step runs (a libevent callback from inside one) only asks for another
 * round.  Every callback of the interception ends here.
 */
void	icpt_step(struct icpt *ic);
/* The connection is over: the step closes it with reason. */
void	icpt_end(struct icpt *ic, const char *reason);
/*
 * The connection is to end once the sandbox has everything queued for
 * it: the upstream goes to the pool when it is between answers, else it
 * is closed, and nothing more is read from either side.
 */
void	icpt_finish(struct icpt *ic);
/* Something happened: the connection is not idle. */
void	icpt_touch(struct icpt *ic);
/*
 * Writes r's audit record, counts it in the metrics, and lets go of the
 * secrets it got: a request's life ends with its record.  An injected
 * request's record was written before it went upstream; this one is its
 * "response" record.
 */
void	icpt_audit_request(struct icpt *ic, struct icpt_req *r);
/* Lets go of the secrets r holds (without a record). */
void	icpt_req_release(struct icpt_req *r);
/*
 * Bytes queued for the sandbox, in the TLS layer and below it in the
 * socket's buffer: what the bound ICPT_HIGH counts.
 */
size_t	icpt_down_queued(struct icpt *ic);
/* Queues len bytes of buf for the sandbox. */
void	icpt_send_down(struct icpt *ic, const void *buf, size_t len);
/*
 * Refuses the current request (ic->cur) with sluice's own answer and
 * writes its audit record; close: the connection ends after it.  The
 * request side goes to DISCARD (its body is read and dropped), REFUSED
 * (answers are owed before it) or, with close, to the end.
 */
void	icpt_refuse(struct icpt *ic, int status, const char *error,
	    const char *reason, const char *detail, int close);
/*
 * The answer under way cannot be finished (the upstream failed or reset
 * in its middle): its request gets its record, and the sandbox's
 * connection is reset, never ended cleanly, so what it got cannot pass
 * for a whole answer.
 */
void	icpt_abort(struct icpt *ic, const char *reason);
/*
 * Refuses r, a request not in the queue (ic->cur, or one taken out of
 * it), as icpt_refuse: action is "deny" or "error".
 */
void	icpt_refuse_req(struct icpt *ic, struct icpt_req *r, int status,
	    const char *error, const char *action, const char *reason,
	    const char *detail, int close);
/*
 * icpt_refuse_req with a whole answer: dw's status, error, reason,
 * message (NULL: a default) and budget fields; host, policy and rule are
 * filled in here.
 */
struct deny_what;
struct spend_item;
void	icpt_refuse_what(struct icpt *ic, struct icpt_req *r,
	    struct deny_what *dw, const char *action, int close);
/*
 * The n newest queued requests, never sent, cannot be (their records
 * cannot be written, say): they leave the queue, and what held has of
 * theirs (all past its first keep bytes) goes; the oldest of them gets
 * status once the answers owed before it are out, the others an
 * "incomplete" record, and the connection ends there.  What is under way
 * for the older requests goes on.
 */
void	icpt_fail_unsent(struct icpt *ic, unsigned n, size_t keep,
	    int status, const char *reason, const char *detail);
/* A held refusal is dropped (an error answer replaces it). */
void	icpt_refusal_drop(struct icpt *ic);

/* icpt_req.c: the sandbox's requests. */

/*
 * Reads, judges and forwards requests while the request side reads and
 * the upstream's queue is below its bound (the step's part).
 */
void	icpt_pump_requests(struct icpt *ic);

/*
 * What forward_head and icpt_fwd_head share: the upstream for rule (the
 * proxy for a forward rule) opened, or the one in use kept or dropped;
 * -1 after refusing.  icpt_enqueue: the head is out, ic->cur goes to the
 * queue (with what it owns), returned.
 */
int	icpt_prepare_up(struct icpt *ic, const struct http_head *h,
	    const struct intercept_rule *rule, struct inject *inj);
struct icpt_req *icpt_enqueue(struct icpt *ic, const struct http_head *h);

/*
 * The secret name, for this request: in force, of the kind ok says (what
 * it is not, for the refusal: "AWS credentials"), bound to the host; NULL
 * after refusing (403 secrets-off or secret-host-binding, 503
 * secret-unavailable, 500 secret-kind).
 */
const struct secret *icpt_secret_for(struct icpt *ic, const char *name,
	    int (*ok)(const struct secret *), const char *what, int ka_close);
/* The refusal for why, about the secret name (what: as above). */
void	icpt_secret_refuse(struct icpt *ic, enum inject_result why,
	    const char *name, const char *what, int ka_close);

/* icpt_fwd.c: forward rules. */

/* Whether a forward rule can run here; -1 after refusing. */
int	icpt_fwd_check(struct icpt *ic, const struct http_head *h,
	    const struct intercept_rule *rule, int ka_close);
/* The head for the proxy, with its token (or held for the body's hash). */
int	icpt_fwd_head(struct icpt *ic, const struct http_head *h,
	    const struct intercept_rule *rule, const char *target);
/*
 * The head is whole with the body (icpt_hold_finish): the token, with
 * hd's hash md, signed and written after hd's head, then the body.
 */
int	icpt_fwd_finish(struct icpt *ic, struct icpt_hold *hd,
	    const uint8_t md[32]);
/* Whether r's answer is redacted: it got a secret or a token. */
int	icpt_req_redacts(const struct icpt_req *r);

/* icpt_up.c: the upstream and its answers. */

/*
 * Where bytes for the upstream go: held until it is checked and until the
 * record of an injected request is durable (fsync always); then
 * icpt_up_release() lets them go, in order.
 */
struct evbuffer *icpt_up_out(struct icpt *ic);
void	icpt_up_release(struct icpt *ic);
/*
 * Before the bytes of a request that may wait for its record go into
 * held: what is there already may go without it.
 */
void	icpt_held_mark(struct icpt *ic);
/*
 * Drops the upstream in use whatever its state: no callback of it runs
 * again and nothing more is read from it; freed on the next loop turn.
 */
void	icpt_up_discard(struct icpt *ic);
/* Lets the upstream in use go (idle): to the pool, or closed. */
void	icpt_up_drop(struct icpt *ic);
/*
 * Parks the upstream in the pool when nothing is owed or under way in
 * either direction (else does nothing).
 */
void	icpt_up_park(struct icpt *ic);
/* The same, ICPT_PARK_MS from now unless a request comes first. */
void	icpt_up_park_soon(struct icpt *ic);
/* Bytes queued for the upstream, held or not. */
size_t	icpt_up_queued(struct icpt *ic);
/* Takes rule's pins (up to ICPT_MAX_PINS) for the upstream's key. */
void	icpt_pins_set(struct icpt *ic, const struct intercept_rule *rule);
/* 1 if rule's pins are the ones taken (as a set). */
int	icpt_pins_same(const struct icpt *ic, const struct intercept_rule *rule);
/* 1 if the upstream's key matches the pins taken, or there are none. */
int	icpt_pins_ok(struct icpt *ic);
/*
 * Opens ic->up for rule: an idle one of the pool, its pins checked at
 * once, else a new connection, checked once connected.  Returns NULL, or
 * why it failed after answering the sandbox.
 */
const char *icpt_up_open(struct icpt *ic, const struct intercept_rule *rule,
	    const struct secret *cert, const char *tls, const uint8_t *tls_d);
/*
 * What an upstream connection for rule is made with, as one string: the
 * CA file it is verified by, a newline, and the client certificate it
 * presents (cert: "name@fingerprint"; NULL: none), so that a pooled or
 * kept connection is reused only for the same; and its digest, which is
 * what a connection keeps of it.
 */
void	icpt_up_tls_key(const struct intercept_rule *rule,
	    const struct secret *cert, char out[ICPT_TLS_KEY],
	    uint8_t digest[UPOOL_TLS_LEN]);
/*
 * The upstream failed before answering the oldest request in the queue:
 * the sandbox gets status (detail may be NULL), the request its record,
 * and the connection ends.
 */
void	icpt_up_failed(struct icpt *ic, int status, const char *reason,
	    const char *detail);
/*
 * Handles the upstream's events the callbacks recorded (connected,
 * closed, reset, timed out) once what it sent before them is relayed.
 */
void	icpt_up_events(struct icpt *ic);
/*
 * Relays the upstream's answers, in order, to the sandbox while the
 * sandbox's queue is below its bound (the step's part).
 */
void	icpt_pump_responses(struct icpt *ic);
/* Whether the upstream's side reads in state s. */
int	icpt_rs_reads(enum icpt_rs s);
/* A tunnel: what the sandbox sent goes to the upstream as it is. */
void	icpt_tunnel_down_to_up(struct icpt *ic);

/* icpt_redact.c: answers to injected requests, secrets taken out. */

/*
 * Sends the head of r's response with every secret r got redacted, and
 * sets up the body's redaction (re-framed as chunked when its length was
 * given).  Returns 0, or -1 after answering the sandbox itself (a
 * response that cannot be redacted).
 */
int	icpt_redact_head(struct icpt *ic, struct icpt_req *r,
	    const struct http_resp_head *rh);
/* Body bytes, in the upstream's framing: redacted on to the sandbox. */
int	icpt_redact_body(struct icpt *ic, struct icpt_req *r, const uint8_t *p,
	    size_t n);
/* The body ended: the held-back bytes and the last chunk go. */
int	icpt_redact_end(struct icpt *ic, struct icpt_req *r);

/*
 * icpt_budget.c.  take: spends one request of every budget of the
 * secrets inj holds; 0, or -1 after refusing it (429, or 503 when they
 * cannot be counted).  items: the budgets s has for c's requests, added
 * at items[n..], the new count (at most SPEND_MAX_TAKE).
 */
int	icpt_budget_take(struct icpt *ic, const struct inject *inj);
size_t	icpt_budget_items(const struct conn *c, const struct secret *s,
	    struct spend_item *items, size_t n);

/*
 * icpt_ph.c: the placeholders of rule (an inject rule) swapped in the
 * head and the target, into inj and the scratch after *wipe (moved on);
 * any placeholder of the sandbox left refuses the request (403
 * placeholder-elsewhere).  0, or -1 after refusing.
 */
int	icpt_placeholders(struct icpt *ic, const struct http_head *h,
	    const struct intercept_rule *rule, char *target, size_t target_cap,
	    struct inject *inj, size_t *wipe, int ka_close);
/* The placeholder_elsewhere record: r carried s's placeholder, there. */
void	icpt_ph_audit(struct icpt *ic, const struct icpt_req *r,
	    const struct secret *s, const char *where);

/*
 * icpt_scan.c.  start: h's body, if any, is to be read for placeholders.
 * body: body bytes in their framing, read before they go on; 0, or -1
 * after refusing the request (403 placeholder-elsewhere; the connection
 * ends) or ending the connection.
 */
void	icpt_scan_start(struct icpt *ic, const struct http_head *h);
int	icpt_scan_body(struct icpt *ic, const uint8_t *p, size_t n);

/*
 * icpt_token.c: the tokens rule's templates name, minted for this
 * sandbox, into toks[0..*n) (values borrowed from ic->cur, which holds
 * the references) and their sources' secrets into secs.  0; 1 when one
 * is being minted (ic->tok_wait is queued: the request waits); -1 after
 * refusing (502 token-unavailable, or as icpt_secret_for).
 */
int	icpt_tokens(struct icpt *ic, const struct intercept_rule *rule,
	    struct inject_token *toks, const struct secret **secs, size_t *n,
	    int ka_close);
/*
 * The table's key of src's token, minted from s, for c's sandbox (its id
 * and registration) and policy:
 * "SANDBOX\nSERIAL\nPOLICY\nDIGEST\nSOURCE\nSECRET@VERSION:FP"; 0, or -1
 * when it does not fit.
 */
int	icpt_token_key(const struct conn *c, const struct mint_source *src,
	    const struct secret *s, char out[MINT_KEY_MAX]);
/* Whether the mint the head waits for has ended (RQ_TOKEN). */
int	icpt_token_ready(struct icpt *ic);
/* The head waits no more (the connection ends). */
void	icpt_token_cancel(struct icpt *ic);
/* The record's "tokens": [{"fingerprint","source"}...]; its length or 0. */
size_t	icpt_tokens_json(const struct icpt_req *r, char *out, size_t cap);

/*
 * icpt_sigv4.c: rule's sigv4 signs the request as it will go (target:
 * after placeholders), into inj and the scratch after *wipe (moved on).
 * 0; 1 when the body's hash is signed, once it is whole (the headers to
 * drop are in inj: icpt_sigv4_hold, then icpt_sigv4_finish); -1 after
 * refusing.
 */
int	icpt_sigv4(struct icpt *ic, const struct http_head *h,
	    const struct intercept_rule *rule, const char *target,
	    struct inject *inj, size_t *wipe, int ka_close);
/* hd, held for rule, gets what signing needs (the secret inj got). */
void	icpt_sigv4_hold(struct icpt_hold *hd, const struct intercept_rule *rule,
	    const struct inject *inj);
/* The body is whole: signed with its hash md, written after hd's head. */
int	icpt_sigv4_finish(struct icpt *ic, struct icpt_hold *hd,
	    const uint8_t md[32]);

/*
 * icpt_hold.c: a head that waits for its body (at most HOLD_BODY_MAX
 * bytes, with a Content-Length), the body hashed as it comes.
 */
#define HOLD_BODY_MAX	(1u << 20)

enum icpt_hold_for {
	HOLD_TOKEN,	/* a forward rule's token carries the body's hash */
	HOLD_SIGV4,	/* SigV4 signs it */
};

struct icpt_hold {
	enum icpt_hold_for why;
	struct evbuffer	*head;		/* less its last lines (wiped) */
	struct evbuffer	*body;
	crypto_hash_sha256_state sha;
	uint64_t	 left;		/* body bytes still to come */
	char		 method[24];
	char		*target;	/* guarded: as it goes upstream */
	char		 aud[256];	/* HOLD_TOKEN: the token's audience */
	struct secret	*creds;		/* HOLD_SIGV4: ref */
	char		 service[64], region[64];
};

/*
 * Whether h's body can be held for what (a phrase for the refusal: "hashed
 * into its token"); -1 after refusing (411 chunked, 413 too large).
 */
int	icpt_hold_check(struct icpt *ic, const struct http_head *h,
	    const char *what, int ka_close);
/* A hold of head[0..n) for h, its target as it goes; NULL: no memory. */
struct icpt_hold *icpt_hold_new(enum icpt_hold_for why, const char *head,
	    size_t n, const struct http_head *h, const char *target);
void	icpt_hold_free(struct icpt_hold *hd);	/* accepts NULL */
/*
 * The held request (the only one queued) asked "Expect: 100-continue":
 * the sandbox gets sluice's 100 (the upstream gets no Expect: the
 * caller drops it).
 */
void	icpt_hold_continue(struct icpt *ic, const struct http_head *h);
/* Body bytes of the request held (ic->hold); -1 after ending it. */
int	icpt_hold_body(struct icpt *ic, const uint8_t *p, size_t n);
/* Its body is whole: the rule's part writes the rest, all of it goes. */
int	icpt_hold_finish(struct icpt *ic);

#endif
