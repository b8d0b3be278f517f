/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's event file: the event definitions (tem-core.h's persistence
 * form) as JSON, written atomically (a temporary file in the same
 * directory, fsync, rename, fsync of the directory) so that a crash leaves
 * either the old file or the new one, never a mix.
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

#endif /* tem-state.h */
