/*
 * audit.h: the one writer of the audit trail.  Records are queued by any
 * thread into one bounded queue and written, chained and hashed
 * (auditfmt.h), by one writer thread that also signs checkpoints, syncs
 * as the fsync mode says, and rotates the file.
 *
 * Durability: every queued record gets a ticket, in queue order.  With
 * fsync always, a ticket is durable once its record is on disk
 * (fdatasync done), and an action that must not happen before its record
 * (an injected or forwarded request) waits until audit_durable() reaches
 * its ticket: audit_notify() wakes each worker's event when it moves past
 * a ticket someone waits for.  With batch and never the record is queued
 * before the action and the action does not wait (audit_submit gives
 * ticket 0, durable at once), as sluiced.yaml(5) says: a crash may lose
 * what the writer had not taken yet, as it may lose what was written but
 * not synced (batch syncs at most 100 ms or 1,000 records later).
 */
#ifndef SLUICE_AUDIT_H
#define SLUICE_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"

struct aflat;
struct arec;
struct audit;
struct kchan;
struct event;
struct json_t;
struct signkey;

struct audit_opts {
	const char	*path;		/* NULL: records are dropped */
	enum audit_fsync mode;
	unsigned	 queue;		/* records, at least 16 */
	int		 queue_refuse;	/* audit_submit refuses when full */
	unsigned	 max_mb;	/* rotate past this size; 0: never */
	unsigned	 checkpoint_records, checkpoint_ms;
	int		 syslog;
	const struct signkey *sign;	/* borrowed; NULL: no checkpoints */
	long		 await_pid;	/* an upgrade: this process writes the
					 * file once it lets go (audit_takeover) */
	/*
	 * The trail is the keys process's (kclient.h): no file here; the
	 * writer thread sends each round over chan and the keys process
	 * chains, signs, writes and syncs it (audit_remote.c).  path is
	 * still the file's, for the figures; sign is NULL.
	 */
	struct kchan	*chan;
	/*
	 * The keys process's writer of a worker's trail: after an outage it
	 * tries again with the worker's next round (whose audit_resumed
	 * record says what the outage cost) instead of a record of its own.
	 */
	int		 sink;
	long		 pid;		/* "start" names it; 0: this process */
};

/*
 * Opens (appends to) o->path with mode 0640 and continues its chain from
 * the last record.  A torn last line (a crash mid-write) is cut off, and
 * the first record written says so ("start", torn_bytes and the torn
 * bytes' hash); a last record that does not verify is not chained over:
 * the file is renamed aside (".broken-TIME") and a new trail starts.
 * Starts the writer thread.  Returns 0, or SL_ERR_IO / SL_ERR_NOMEM with
 * why[] saying what failed.
 */
int	audit_open(const struct audit_opts *o, struct audit **out, char *why,
	    size_t why_len);
/*
 * Writes what is queued, a last checkpoint, syncs, stops the thread and
 * frees; accepts NULL.
 */
void	audit_close(struct audit *a);

/*
 * Queues a record of the given type (rec is stolen; "ts" is set now,
 * seq, prev and hash by the writer).  When the queue is full: with
 * queue_full wait, waits; with refuse, the record is dropped and counted
 * (SL_ERR_TOO_BIG), and a "records_dropped" record says how many once
 * there is room.  Safe from any thread.  Returns 0, SL_ERR_TOO_BIG or
 * SL_ERR_NOMEM.
 */
int	audit_write(struct audit *a, const char *type, struct json_t *rec);

/*
 * Queues a record an action must wait for; *ticket gets its ticket.
 * SL_ERR_IO while the writer cannot write (a full disk): the action is
 * refused, never done unaudited, and counted for the "audit_resumed"
 * record that ends the outage; the writer tries again by itself.
 * When the queue is full: with queue_full refuse, SL_ERR_TOO_BIG at once
 * (nothing queued: the caller refuses the action); with wait, it waits.
 * With no file configured the ticket is durable at once.
 */
int	audit_submit(struct audit *a, const char *type, struct json_t *rec,
	    uint64_t *ticket);
/*
 * The same for a record built flat (arec.h): no JSON tree is made, and
 * the record is encoded once, by the caller.  rec is left as it was
 * finished; the caller may reuse it after arec_init.
 */
int	audit_write_rec(struct audit *a, const char *type, struct arec *rec);
int	audit_submit_rec(struct audit *a, const char *type, struct arec *rec,
	    uint64_t *ticket);
/* The latest durable ticket (see above). */
uint64_t audit_durable(struct audit *a);
/*
 * 1 while the writer cannot write: no ticket becomes durable until it
 * can again (it retries, 100 ms at first, 2 s at most, apart).
 */
int	audit_failed(struct audit *a);
/* Why it cannot (an errno), for a remote trail's answers. */
int	audit_errno(struct audit *a);
/*
 * Activates ev whenever audit_durable() moves, until audit_notify_clear()
 * (before the events are freed).
 */
int	audit_notify(struct audit *a, struct event *ev);
void	audit_notify_clear(struct audit *a);
/*
 * Asks the writer to rotate the file now (a checkpoint ends the old one);
 * when the file was moved away already, a new one is opened at the path.
 */
void	audit_rotate(struct audit *a);

/*
 * An upgrade hands the trail from the running process (the predecessor)
 * to the new one (the successor) with no record lost and one chain:
 *
 * The successor opens with await_pid set: records queue, none is
 * written, nothing is durable.  The predecessor, once the successor
 * serves, calls audit_handover: its writer writes what is queued, an
 * "upgrade" record naming the successor and a checkpoint, syncs, closes
 * the file and writes "released" on fd.  The successor's daemon then
 * calls audit_takeover: its writer opens the file at the path and goes
 * on from its last record ("start" with upgraded_from).  Records the
 * predecessor still makes while it drains go over fd, one line each
 * ("R" and the record), and, when an action waits for them, "S" and the
 * last ticket; the successor queues them with audit_submit_text and
 * answers "A" and that ticket once they are durable, which makes them
 * durable in the predecessor.  A successor that does not answer within
 * HAND_WAIT_S, or goes, leaves the predecessor's writer failed: what
 * needs a record is refused from then on.
 */
int	audit_handover(struct audit *a, int fd, long to_pid);
void	audit_takeover(struct audit *a);
/*
 * The successor's side: text[0..len) is a record the predecessor sent
 * (a JSON object with its ts and type); queued after what is queued,
 * waiting for room when the queue is full.  Returns 0, SL_ERR_INVALID
 * for what is not a record, or SL_ERR_NOMEM; *ticket as audit_submit.
 */
int	audit_submit_text(struct audit *a, const char *text, size_t len,
	    uint64_t *ticket);

/*
 * The keys process's side of a remote trail (aserve.c): a record taken
 * as it came, f (taken; its bytes checked by aserve.c), queued like
 * audit_submit_text's.
 */
int	audit_submit_flat(struct audit *a, struct aflat *f, uint64_t *ticket);
/*
 * Waits up to ms for ticket to be durable: 0, or SL_ERR_IO when the
 * writer cannot write (or ms passed: errno ETIMEDOUT).
 */
int	audit_wait_durable(struct audit *a, uint64_t ticket, long ms);
/*
 * Waits up to ms for the writer to end a round begun after the call
 * (so a takeover, release or rotation asked for is done); 0 or
 * SL_ERR_IO as above.
 */
int	audit_wait_round(struct audit *a, long ms);
/*
 * An upgrade of a remote trail: the keys process of the predecessor
 * lets go of the file (an "upgrade" record naming to_pid and a
 * checkpoint, then closes it); nothing is written after.
 */
int	audit_release(struct audit *a, long to_pid);

struct audit_stats {
	const char	*path;
	uint64_t	 seq;		/* of the last record written */
	uint64_t	 queued;	/* now */
	uint64_t	 written, checkpoints, rotations, refused, dropped;
	uint64_t	 last_checkpoint_seq;
	char		 head[65];	/* the chain head: hash of seq */
	int		 broken;	/* the writer cannot write now (a full disk) */
	uint64_t	 errors;	/* outages: writes or syncs that failed */
	int64_t		 last_sync;	/* wall time of the last sync, or 0 */
};
void	audit_get_stats(struct audit *a, struct audit_stats *st);

#endif
