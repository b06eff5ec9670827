/* audit.h: the one writer of the audit trail (JSON Lines). */
#ifndef SLUICE_AUDIT_H
#define SLUICE_AUDIT_H

#include "config.h"

struct audit;
struct json_t;

/* Opens (appends to) path with mode 0640; path NULL gives a writer that drops. */
int	audit_open(const char *path, enum audit_fsync mode, struct audit **out);
void	audit_close(struct audit *a);		/* accepts NULL */

/*
 * Writes one record of the given type.  rec is a JSON object (consumed:
 * its reference is stolen) to which ts, seq and type are added.  Safe from
 * any thread.  Returns 0 or SL_ERR_IO.
 *
 * XXX one mutex and a write(2) per record; the writer thread with a bounded
 * queue, the hash chain and the checkpoints are issue 8.
 */
int	audit_write(struct audit *a, const char *type, struct json_t *rec);

#endif
