/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's event file: the event definitions and the DoS thresholds set
 * with tem-ctl dos-threshold (tem-core.h's persistence forms) as JSON,
 * written atomically (a temporary file in the same directory, fsync,
 * rename, fsync of the directory) so that a crash leaves
 * either the old file or the new one, never a mix.
 *
 * One TEM at a time uses a state file: it holds an exclusive lock on
 * 'path'.lock (tem_lock()) while it runs, and cleans up the temporary
 * files of a TEM killed while saving before it starts.
 *
 * Thread-safety: none needed (no global state).
 */
#ifndef TEM_STATE_H
#define TEM_STATE_H 1

#include "tem-core.h"

/* Writes the events of 'core' to 'path', creating its directory (mode
 * 0755) if needed.  Returns NULL or an error naming the path and the
 * failed step (caller frees). */
char *tem_state_save(const struct tem_core *, const char *path)
    __attribute__((warn_unused_result));

/* Loads the events of 'path' into 'core' (replacing its events).  A file
 * that does not exist gives no events and no error.  Returns NULL or an
 * error naming the path and the line and column of a JSON syntax error,
 * or the entry and event at fault (caller frees). */
char *tem_state_load(struct tem_core *, const char *path)
    __attribute__((warn_unused_result));

/* Takes an exclusive lock (flock) on 'lock_path', created if needed
 * (mode 0600), that lasts as long as the process keeps '*fdp' open, and
 * writes the process id into it.  'what' names what it guards, for the
 * error.  Returns NULL, or an error naming the process that holds it
 * (caller frees). */
char *tem_lock(const char *lock_path, const char *what, int *fdp)
    __attribute__((warn_unused_result));

/* The lock of state file 'path': 'path'.lock (caller frees). */
char *tem_state_lock_path(const char *path);

/* Removes the temporary files that tem_state_save() leaves behind when
 * the process dies while writing ('path'.tmp.PID).  Call it holding the
 * state file's lock.  Returns the number removed. */
size_t tem_state_clean(const char *path);

#endif /* tem-state.h */
