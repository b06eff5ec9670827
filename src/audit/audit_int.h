/*
 * audit_int.h: the writer's insides, shared by audit.c (the queue, the
 * file, the chain) and audit_hand.c (an upgrade's handover of the file
 * from one process to the next).
 */
#ifndef SLUICE_AUDIT_INT_H
#define SLUICE_AUDIT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "audit/arec.h"
#include "audit/audit.h"
#include "audit/auditfmt.h"

#define MAX_NOTIFY	256	/* workers woken when records are durable */

/* Who writes the file (see struct audit). */
enum audit_stage {
	AUDIT_AWAIT,	/* the predecessor still does: records queue */
	AUDIT_OWN,	/* this process */
	AUDIT_HANDING,	/* the successor asked for it: let go next round */
	AUDIT_FORWARD,	/* the successor: records are sent to it */
	AUDIT_REMOTE,	/* the keys process writes it: rounds go there */
};

/* A record queued: a tree (control records) or flat (the data path). */
struct slot {
	json_t		*rec;
	struct aflat	*flat;
	uint64_t	 ticket;
};

struct audit {
	struct audit_opts o;
	char		*path;
	int		 fd;		/* the file; -1: none now */
	pthread_t	 thread;
	int		 started;

	/* The queue, and what the producers and the writer tell each other. */
	pthread_mutex_t	 mtx;
	pthread_cond_t	 wake;		/* the writer: work to do */
	pthread_cond_t	 room;		/* producers: the ring has room */
	pthread_cond_t	 moved;		/* a round ended, durable moved */
	uint64_t	 rounds;	/* rounds ended */
	struct timespec	 figures_at;	/* REMOTE: when the keys process last answered */
	struct slot	*ring;
	size_t		 cap, head, n;
	uint64_t	 tickets;	/* the last one given */
	int		 stop, rotate;
	struct event	*notify[MAX_NOTIFY];
	size_t		 nnotify;
	atomic_ullong	 durable;
	atomic_ullong	 wanted;	/* the newest ticket an action waits for */
	atomic_int	 broken;	/* the writer failed: nothing is written */
	atomic_ullong	 out_refused;	/* while broken: requests refused */
	atomic_ullong	 out_lost;	/* while broken: other records lost */
	atomic_ullong	 errors;	/* outages so far */
	atomic_llong	 synced_at;	/* wall time of the last sync */

	/* The writer's own: the chain and the file. */
	uint64_t	 seq;
	char		 prev[AUDIT_HASH_HEX + 1];
	uint64_t	 since_cp;	/* records after the last checkpoint */
	struct timespec	 last_cp, last_sync;
	uint64_t	 unsynced;	/* records written, not yet synced */
	uint64_t	 size;
	/* While broken: since when, why, and when it tries again. */
	struct timespec	 broke_at, retry_at;
	long		 retry_ms;
	int		 broke_errno;

	/*
	 * Upgrades (audit_hand.c): the stage says who writes the file.  It
	 * changes under mtx: AWAIT to OWN by the writer once the
	 * predecessor let go (takeover), OWN to HANDING by audit_handover,
	 * HANDING to FORWARD by the writer once the file is let go.
	 */
	enum audit_stage stage;
	int		 takeover;	/* AWAIT: the predecessor let go */
	int		 hand_fd;	/* FORWARD: the successor's channel */
	long		 hand_to;	/* its pid */
	char		 ack[64];	/* what it answered, not yet parsed */
	size_t		 acklen;

	/* Figures, under mtx. */
	uint64_t	 written, checkpoints, rotations, refused, cp_seq;
	uint64_t	 dropped, dropped_told;	/* queue_full refuse: lost */
	uint64_t	 pub_seq;	/* a->seq, for other threads */
	char		 pub_head[AUDIT_HASH_HEX + 1];
};

/* audit.c, for audit_hand.c. */
void	aw_format_ts(char *buf, size_t len);
int	aw_write_all(int fd, const char *buf, size_t len);
void	aw_slot_free(struct slot *sl);
int	aw_append_record(struct audit *a, json_t *rec, char **out,
	    size_t *outlen, size_t *outcap);
int	aw_append_checkpoint(struct audit *a, char **out, size_t *outlen,
	    size_t *outcap);
int	aw_flush_out(struct audit *a, const char *buf, size_t len,
	    uint64_t nrec, int force);
void	aw_mark_durable(struct audit *a, uint64_t ticket, int force);
/* audit_trail.c: opens the file and finds where its chain ends. */
int	aw_open_trail(struct audit *a, json_t *start, char *why,
	    size_t why_len);
/* The name a rotated or broken file is moved to: PATH.TAG-TIME[.N]; 0/-1. */
int	aw_aside_name(const struct audit *a, const char *tag, char *buf,
	    size_t len);
/* The trail's folder, synced: a new or renamed file survives a crash. */
void	aw_sync_dir(const struct audit *a);
void	aw_stage_set(struct audit *a, enum audit_stage s);
/*
 * Where the chain and the file stood before a round: a round that fails
 * is taken back whole (the file cut to it), so no record half on disk
 * is ever chained to.
 */
struct mark {
	uint64_t	 seq, since_cp, size;
	char		 prev[AUDIT_HASH_HEX + 1];
};
void	aw_mark_take(const struct audit *a, struct mark *m);
void	aw_mark_restore(struct audit *a, const struct mark *m);

/* audit_remote.c, for the writer thread (mtx not held), REMOTE. */
int	aw_remote_round(struct audit *a, struct slot *batch, size_t n,
	    int rotate, char **buf, size_t *cap);
int	aw_remote_take(struct audit *a);
int	aw_remote_release(struct audit *a);
int	aw_remote_resume(struct audit *a, json_t *rec);

/* audit_hand.c, for the writer thread (mtx not held). */
/* AWAIT: waits for the takeover (mtx held); 0, or -1 when stopped first. */
int	aw_await(struct audit *a);
/* The takeover: opens the file at the path, continues its chain; 0/-1. */
int	aw_take_file(struct audit *a, char **buf, size_t *cap);
/* HANDING: lets go of the file and tells the successor; 0 or -1. */
int	aw_release_file(struct audit *a, char **buf, size_t *cap);
/*
 * The file was let go (r: how that went): the successor is told when
 * this process has its channel, and what comes next goes to it; 0/-1.
 */
int	aw_handed(struct audit *a, int r);
/* FORWARD: one round sent to the successor, durable once it says so. */
int	aw_forward_round(struct audit *a, struct slot *batch, size_t n,
	    char **buf, size_t *cap);

#endif
