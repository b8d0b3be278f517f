/* SPDX-License-Identifier: Apache-2.0 */
#include "sbuf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void
sbuf_reserve(struct sbuf *b, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = MAX(MAX(2 * b->cap, b->len + n + 1), 256);
        b->s = xrealloc(b->s, b->cap);
    }
}

void
sbuf_put(struct sbuf *b, const char *s, size_t n)
{
    sbuf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void
sbuf_str(struct sbuf *b, const char *s)
{
    sbuf_put(b, s, strlen(s));
}

void
sbuf_clear(struct sbuf *b)
{
    b->len = 0;
    if (b->s) {
        b->s[0] = '\0';
    }
}

void
sbuf_destroy(struct sbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}
