/*
 * sbstore.h: sandboxes registered through the control API, kept in
 * state_dir so that a restart does not lose them: one file per sandbox,
 * written atomically before the change is answered, its CA key sealed to
 * the gateway key.  Read back at start, before any listener accepts.
 */
#ifndef SLUICE_SBSTORE_H
#define SLUICE_SBSTORE_H

#include <stddef.h>

#include <jansson.h>

struct daemon;
struct sandbox;

/*
 * Opens state_dir, made (0700) when missing.  When it cannot be, a
 * warning says registrations last only as long as the process, and
 * sbstore_put and sbstore_remove do nothing.
 */
void	sbstore_open(struct daemon *d);
/*
 * Writes sb's registration (policy: the name or inline object it was
 * given; NULL: the one written before) to state_dir/ID.json: temporary file, fsync, rename, fsync of
 * the folder.  0, or -1 with why.
 */
int	sbstore_put(struct daemon *d, const struct sandbox *sb,
	    const json_t *policy, char *why, size_t why_len);
/* Removes id's file (none is fine); 0, or -1 with why. */
int	sbstore_remove(struct daemon *d, const char *id, char *why,
	    size_t why_len);
/*
 * Registers every sandbox of state_dir again, with its CA and policy.  A
 * file that does not read, parse or open is reported and left as it is;
 * its sources stay under the default policy.  A sandbox whose named
 * policy is gone gets "default".
 */
void	sbstore_restore(struct daemon *d);
/*
 * The CAs of sluiced.yaml's sandboxes: each is read from state_dir
 * (ID.static-ca) when it is there and opens, else the one minted at
 * start is kept there, sealed like a registration's.
 */
void	sbstore_static_cas(struct daemon *d);

#endif
