/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable string buffer, always NUL-terminated once written to: the
 * TEM's hand-built JSON views and its Prometheus exposition.
 */
#ifndef TPM_SBUF_H
#define TPM_SBUF_H 1

#include <stddef.h>

struct sbuf {
    char *s;                    /* NULL until written to. */
    size_t len, cap;
};

#define SBUF_INITIALIZER { NULL, 0, 0 }

/* Makes room for 'n' more bytes and the NUL. */
void sbuf_reserve(struct sbuf *, size_t n);
void sbuf_put(struct sbuf *, const char *s, size_t n);
void sbuf_str(struct sbuf *, const char *s);
/* Empties 'b', keeping its memory. */
void sbuf_clear(struct sbuf *);
void sbuf_destroy(struct sbuf *);

#endif /* sbuf.h */
