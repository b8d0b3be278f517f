/* SPDX-License-Identifier: Apache-2.0 */
#include "sbuf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* sbuf_reserve()'s slow path. */
void
sbuf_grow__(struct sbuf *b, size_t n)
{
    b->cap = MAX(MAX(2 * b->cap, b->len + n + 1), 256);
    b->s = xrealloc(b->s, b->cap);
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
