/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable string buffer, always NUL-terminated once written to: the
 * TEM's hand-built JSON views and its Prometheus exposition.
 */
#ifndef TPM_SBUF_H
#define TPM_SBUF_H 1

#include <stddef.h>
#include <string.h>

struct sbuf {
    char *s;                    /* NULL until written to. */
    size_t len, cap;
};

#define SBUF_INITIALIZER { NULL, 0, 0 }

void sbuf_grow__(struct sbuf *, size_t n);

/* Makes room for 'n' more bytes and the NUL. */
static inline void
sbuf_reserve(struct sbuf *b, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        sbuf_grow__(b, n);
    }
}

/* Inline, as is sbuf_str(): the TEM writes its alerts a few bytes at a
 * time, and the compiler takes the length of a literal as a constant. */
static inline void
sbuf_put(struct sbuf *b, const char *s, size_t n)
{
    sbuf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static inline void
sbuf_str(struct sbuf *b, const char *s)
{
    sbuf_put(b, s, strlen(s));
}

/* Empties 'b', keeping its memory. */
void sbuf_clear(struct sbuf *);
void sbuf_destroy(struct sbuf *);

#endif /* sbuf.h */
