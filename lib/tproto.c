/* SPDX-License-Identifier: Apache-2.0 */
#include "tproto.h"

#include <ctype.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define XSTR__(X) #X
#define XSTR(X) XSTR__(X)

/* Versions. */

bool
tproto_version_supported(uint32_t v)
{
    return v >= TPROTO_VERSION_MIN && v <= TPROTO_VERSION_MAX;
}

uint32_t
tproto_version_choose(uint32_t min, uint32_t max)
{
    uint32_t hi = MIN(max, (uint32_t) TPROTO_VERSION_MAX);
    uint32_t lo = MAX(min, (uint32_t) TPROTO_VERSION_MIN);
    return min <= max && lo <= hi ? hi : 0;
}

/* Decoding.
 *
 * protobuf-c allocates every submessage, string and byte string of a
 * frame separately (five blocks per Satisfaction); the TEM decodes
 * millions of them per second, so tproto_decode() hands protobuf-c an
 * arena instead: chunks carved in order, nothing freed one by one, all
 * freed by tproto_free().  protobuf-c allocates the top-level message
 * first, so the frame sits at the start of the first chunk and
 * tproto_free() finds the arena from the frame alone. */

struct arena_chunk {
    struct arena_chunk *next;   /* First chunk: the chunks added later. */
    size_t size, used;          /* Bytes in 'data'. */
    max_align_t data[];
};

#define ARENA_ALIGN _Alignof(max_align_t)

/* Guess of the unpacked size per frame byte (a Satisfaction takes about
 * 50 bytes on the wire and 250 unpacked), and the least chunk size. */
#define ARENA_BYTES_PER_WIRE_BYTE 6
#define ARENA_MIN_CHUNK 1024

struct arena {
    struct arena_chunk *first;
    struct arena_chunk *cur;
};

static struct arena_chunk *
arena_chunk_new__(size_t size)
{
    struct arena_chunk *c = xmalloc(sizeof *c + size);
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

static void *
arena_alloc__(void *arena_, size_t size)
{
    struct arena *arena = arena_;
    struct arena_chunk *c = arena->cur;

    size = ROUND_UP(size ? size : 1, ARENA_ALIGN);
    if (c->size - c->used < size) {
        c = arena_chunk_new__(MAX(size, 2 * c->size));
        /* Chain after the first chunk, which must stay first. */
        c->next = arena->first->next;
        arena->first->next = c;
        arena->cur = c;
    }
    void *p = (char *) c->data + c->used;
    c->used += size;
    return p;
}

static void
arena_free__(void *arena, void *p)
{
    /* Freed with the whole arena. */
}

static void
arena_destroy__(struct arena_chunk *first)
{
    while (first) {
        struct arena_chunk *next = first->next;
        free(first);
        first = next;
    }
}

/* Returns true if 'frame' may be handed to a caller although its version
 * is not one we speak: every message is a Hello, Refuse or Bye. */
static bool
is_session_frame__(const Trumpet__Frame *frame)
{
    for (size_t i = 0; i < frame->n_messages; i++) {
        Trumpet__Message__BodyCase c = frame->messages[i]->body_case;
        if (c != TRUMPET__MESSAGE__BODY_HELLO
            && c != TRUMPET__MESSAGE__BODY_REFUSE
            && c != TRUMPET__MESSAGE__BODY_BYE) {
            return false;
        }
    }
    return true;
}

/* Decodes 'data' with protobuf-c into a new arena.  Returns NULL if it
 * cannot. */
Trumpet__Frame *
tproto_decode_generic(const void *data, size_t len)
{
    struct arena arena;
    arena.first = arena.cur = arena_chunk_new__(
        MAX(ARENA_MIN_CHUNK, len * ARENA_BYTES_PER_WIRE_BYTE));
    ProtobufCAllocator allocator = {
        .alloc = arena_alloc__,
        .free = arena_free__,
        .allocator_data = &arena,
    };
    Trumpet__Frame *frame = trumpet__frame__unpack(&allocator, len, data);
    if (!frame) {
        arena_destroy__(arena.first);
    } else if ((void *) frame != arena.first->data) {
        /* A protobuf-c that allocates something before the message. */
        tpm_log(TPM_LOG_ERR, "tproto: protobuf-c did not allocate the "
                "frame first: cannot use an arena");
        abort();
    }
    return frame;
}

/* A decoder by hand for the frames that make most of a TEM's input:
 * satisfactions only.  protobuf-c's decoder is generic (it walks field
 * descriptors for every field of every message) and took a fifth of the
 * TEM's CPU when every host satisfies.  This one reads exactly the wire
 * format of proto/trumpet.proto's Frame { version, messages { satisfaction
 * { ... group { ... } } } } (version 3's seq and late included: hosts of
 * that version number every satisfaction; and version 4's group tun_id)
 * into the structures protobuf-c
 * would build, in the same arena, and gives up (returns false, having
 * allocated nothing the caller keeps) on anything else: another message
 * kind, a field unknown, repeated or of another wire type, a required
 * field missing, a uint32 above 2^32 - 1, a tag longer than 5 bytes.
 * The caller then decodes with protobuf-c, which decides what such
 * input means, so that both give the same result on every input
 * (tests/test-proto.c and the protocol fuzz target compare them). */

struct wire {
    const uint8_t *p, *end;
};

static inline bool
wire_varint__(struct wire *w, uint64_t *v)
{
    if (OVS_LIKELY(w->p < w->end && !(*w->p & 0x80))) {
        *v = *w->p++;           /* Most fields: one byte. */
        return true;
    }

    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (w->p >= w->end) {
            return false;
        }
        uint8_t b = *w->p++;
        if (shift == 63 && b > 1) {
            return false;
        }
        x |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

static inline bool
wire_u32__(struct wire *w, uint32_t *v)
{
    uint64_t x;
    if (!wire_varint__(w, &x) || x > UINT32_MAX) {
        return false;
    }
    *v = x;
    return true;
}

/* Reads a tag into field number '*field' and wire type '*type'.  A tag
 * longer than 5 bytes (padded with 0x80 bytes) is refused, as protobuf-c
 * refuses it (its parse_tag_and_wiretype() reads 5 bytes at most). */
static inline bool
wire_tag__(struct wire *w, uint32_t *field, uint32_t *type)
{
    const uint8_t *start = w->p;
    uint32_t tag;
    if (!wire_u32__(w, &tag) || w->p - start > 5) {
        return false;
    }
    *field = tag >> 3;
    *type = tag & 7;
    return true;
}

/* Reads a length-delimited field's bytes into '*sub'. */
static inline bool
wire_sub__(struct wire *w, struct wire *sub)
{
    uint64_t n;
    if (!wire_varint__(w, &n) || n > (uint64_t) (w->end - w->p)) {
        return false;
    }
    sub->p = w->p;
    sub->end = w->p + n;
    w->p += n;
    return true;
}

/* Field 'field' seen: false if it was seen before (bit 'field' of
 * '*seen'). */
static inline bool
wire_once__(uint32_t *seen, uint32_t field)
{
    if (*seen & (1u << field)) {
        return false;
    }
    *seen |= 1u << field;
    return true;
}

static bool
fast_bytes__(struct wire *w, struct arena *arena, ProtobufCBinaryData *bd)
{
    struct wire sub;
    if (!wire_sub__(w, &sub)) {
        return false;
    }
    bd->len = sub.end - sub.p;
    bd->data = NULL;
    if (bd->len) {
        bd->data = arena_alloc__(arena, bd->len);
        memcpy(bd->data, sub.p, bd->len);
    }
    return true;
}

static bool
fast_group__(struct wire w, struct arena *arena, Trumpet__GroupKey *k)
{
    uint32_t seen = 0, field, type;

    trumpet__group_key__init(k);
    while (w.p < w.end) {
        if (!wire_tag__(&w, &field, &type) || field < 1 || field > 7
            || !wire_once__(&seen, field)
            || type != (field == 2 || field == 3 ? 2 : 0)) {
            return false;
        }
        bool ok = (field == 1 ? wire_u32__(&w, &k->ipver)
                   : field == 2 ? fast_bytes__(&w, arena, &k->src)
                   : field == 3 ? fast_bytes__(&w, arena, &k->dst)
                   : field == 4 ? wire_u32__(&w, &k->sport)
                   : field == 5 ? wire_u32__(&w, &k->dport)
                   : field == 6 ? wire_u32__(&w, &k->proto)
                   /* Version 4's tun_id, optional. */
                   : (k->has_tun_id = wire_u32__(&w, &k->tun_id)));
        if (!ok) {
            return false;
        }
    }
    return (seen & 0x7e) == 0x7e;   /* Fields 1 to 6 are required. */
}

static bool
fast_satisfaction__(struct wire w, struct arena *arena,
                    Trumpet__Satisfaction *s)
{
    uint32_t seen = 0, field, type;
    struct wire sub = { NULL, NULL };

    trumpet__satisfaction__init(s);
    while (w.p < w.end) {
        if (!wire_tag__(&w, &field, &type) || field < 1 || field > 9
            || !wire_once__(&seen, field)
            || type != (field == 3 ? 2 : field == 4 ? 1 : 0)) {
            return false;
        }
        bool ok;
        uint64_t late = 0;
        switch (field) {
        case 1:
            ok = wire_u32__(&w, &s->event_id);
            break;
        case 2:
            ok = wire_varint__(&w, &s->epoch);
            break;
        case 3:
            s->group = arena_alloc__(arena, sizeof *s->group);
            ok = wire_sub__(&w, &sub) && fast_group__(sub, arena, s->group);
            break;
        case 4: {
            uint64_t bits = 0;
            ok = w.end - w.p >= 8;
            for (int i = 0; ok && i < 8; i++) {
                bits |= (uint64_t) w.p[i] << (8 * i);
            }
            w.p += ok ? 8 : 0;
            memcpy(&s->value, &bits, sizeof s->value);
            break;
        }
        case 5:
            ok = (s->has_flags = wire_u32__(&w, &s->flags));
            break;
        case 6:
            ok = (s->has_n_parts = wire_u32__(&w, &s->n_parts));
            break;
        case 7:
            ok = (s->has_n_missing = wire_u32__(&w, &s->n_missing));
            break;
        case 8:                 /* Version 3: every numbered host's. */
            ok = (s->has_seq = wire_varint__(&w, &s->seq));
            break;
        default:
            /* A bool is true if any bit of its varint is (protobuf-c). */
            ok = (s->has_late = wire_varint__(&w, &late));
            s->late = late != 0;
            break;
        }
        if (!ok) {
            return false;
        }
    }
    return (seen & 0x1e) == 0x1e;   /* Fields 1 to 4 are required. */
}

/* Decodes 'data' as a frame of satisfactions only into a new arena, or
 * returns NULL (having freed what it allocated). */
static Trumpet__Frame *
decode_fast__(const uint8_t *data, size_t len)
{
    struct wire w = { data, data + len }, sub = { NULL, NULL };
    uint32_t field, type, version = 0;
    bool has_version = false;
    size_t n = 0;

    /* Pass 1: the frame's own fields, and how many messages. */
    while (w.p < w.end) {
        if (!wire_tag__(&w, &field, &type)) {
            return NULL;
        } else if (field == 1 && type == 0 && !has_version) {
            if (!wire_u32__(&w, &version)) {
                return NULL;
            }
            has_version = true;
        } else if (field == 2 && type == 2) {
            if (!wire_sub__(&w, &sub)) {
                return NULL;
            }
            n++;
        } else {
            return NULL;
        }
    }
    if (!has_version || !n || n > TPROTO_MAX_BATCH) {
        return NULL;
    }

    struct arena arena;
    arena.first = arena.cur = arena_chunk_new__(
        MAX(ARENA_MIN_CHUNK, len * ARENA_BYTES_PER_WIRE_BYTE));
    Trumpet__Frame *frame = arena_alloc__(&arena, sizeof *frame);
    trumpet__frame__init(frame);
    frame->version = version;
    frame->n_messages = n;
    frame->messages = arena_alloc__(&arena, n * sizeof *frame->messages);

    /* Pass 2: each message, a satisfaction alone. */
    w.p = data;
    n = 0;
    while (w.p < w.end) {
        wire_tag__(&w, &field, &type);
        if (field == 1) {
            wire_u32__(&w, &version);
            continue;
        }
        wire_sub__(&w, &sub);
        struct wire body = { NULL, NULL };
        Trumpet__Message *m = arena_alloc__(&arena, sizeof *m);
        trumpet__message__init(m);
        frame->messages[n++] = m;
        if (!wire_tag__(&sub, &field, &type) || field != 8 || type != 2
            || !wire_sub__(&sub, &body) || sub.p != sub.end) {
            arena_destroy__(arena.first);
            return NULL;
        }
        m->body_case = TRUMPET__MESSAGE__BODY_SATISFACTION;
        m->satisfaction = arena_alloc__(&arena, sizeof *m->satisfaction);
        if (!fast_satisfaction__(body, &arena, m->satisfaction)) {
            arena_destroy__(arena.first);
            return NULL;
        }
    }
    return frame;
}

Trumpet__Frame *
tproto_decode(const void *data, size_t len, const char **why)
{
    const char *error = NULL;
    Trumpet__Frame *frame = NULL;

    if (len > TPROTO_MAX_FRAME) {
        error = "frame larger than " XSTR(TPROTO_MAX_FRAME) " bytes";
        goto out;
    }
    frame = decode_fast__(data, len);
    if (!frame) {
        frame = tproto_decode_generic(data, len);
    }
    if (!frame) {
        error = "frame not decodable (truncated, garbage or a required "
                "field missing)";
    } else if (!frame->n_messages) {
        error = "frame has no messages";
    } else if (frame->n_messages > TPROTO_MAX_BATCH) {
        error = "frame has more than " XSTR(TPROTO_MAX_BATCH) " messages";
    } else if (!tproto_version_supported(frame->version)
               && !is_session_frame__(frame)) {
        error = "frame of an unsupported protocol version (only Hello, "
                "Refuse and Bye are read from those)";
    }

out:
    if (error) {
        tproto_free(frame);
        frame = NULL;
    }
    if (why) {
        *why = error;
    }
    return frame;
}

void
tproto_free(Trumpet__Frame *frame)
{
    if (frame) {
        arena_destroy__(CONTAINER_OF((void *) frame, struct arena_chunk,
                                     data));
    }
}

/* Validation.  Every rejection is a static string naming the message and
 * the field. */

enum str_class {
    STR_ID,                     /* [A-Za-z0-9_.:-]: host and TEM ids. */
    STR_NAME,                   /* [A-Za-z0-9_.-]: event names. */
    STR_TEXT,                   /* No control characters but tab and
                                 * newline: reasons, definitions. */
};

enum str_error {
    STR_OK,
    STR_MISSING,
    STR_EMPTY,
    STR_LONG,
    STR_CHARS,
};

/* The messages for the str_error values of field 'WHAT' whose length is
 * at most 'MAX'. */
#define STR_ERRORS(WHAT, MAX)                                           \
    {                                                                   \
        NULL,                                                           \
        WHAT " missing",                                                \
        WHAT " empty",                                                  \
        WHAT " longer than " XSTR(MAX) " bytes",                        \
        WHAT " has a character not allowed there",                      \
    }

static bool
char_ok__(unsigned char c, enum str_class class)
{
    switch (class) {
    case STR_ID:
        return isalnum(c) || (c && strchr("_.:-", c));
    case STR_NAME:
        return isalnum(c) || (c && strchr("_.-", c));
    case STR_TEXT:
    default:
        return (c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n';
    }
}

static enum str_error
str_check__(const char *s, size_t min, size_t max, enum str_class class)
{
    if (!s) {
        return STR_MISSING;
    }
    size_t i;
    for (i = 0; s[i]; i++) {
        if (i >= max) {
            return STR_LONG;
        }
        if (!char_ok__(s[i], class)) {
            return STR_CHARS;
        }
    }
    return i < min ? STR_EMPTY : STR_OK;
}

bool
tproto_id_valid(const char *id)
{
    return str_check__(id, 1, TPROTO_MAX_ID, STR_ID) == STR_OK;
}

enum key_error {
    KEY_OK,
    KEY_MISSING,
    KEY_IPVER,
    KEY_SRC4,
    KEY_DST4,
    KEY_SRC6,
    KEY_DST6,
    KEY_SPORT,
    KEY_DPORT,
    KEY_PROTO,
    KEY_TUN_ID,
};

#define KEY_ERRORS(WHAT)                                                \
    {                                                                   \
        NULL,                                                           \
        WHAT ": group missing",                                         \
        WHAT ": group: ipver is not 4 or 6",                            \
        WHAT ": group: src is not 4 bytes for IPv4",                    \
        WHAT ": group: dst is not 4 bytes for IPv4",                    \
        WHAT ": group: src is not 16 bytes for IPv6",                   \
        WHAT ": group: dst is not 16 bytes for IPv6",                   \
        WHAT ": group: sport above 65535",                              \
        WHAT ": group: dport above 65535",                              \
        WHAT ": group: proto above 255",                                \
        WHAT ": group: tun_id above 0xffffff",                          \
    }

static enum key_error
key_check__(const Trumpet__GroupKey *k)
{
    if (!k) {
        return KEY_MISSING;
    } else if (k->ipver != 4 && k->ipver != 6) {
        return KEY_IPVER;
    } else if (k->src.len != (size_t) tpm_prefix_addr_bytes(k->ipver)
               || (k->src.len && !k->src.data)) {
        return k->ipver == 4 ? KEY_SRC4 : KEY_SRC6;
    } else if (k->dst.len != (size_t) tpm_prefix_addr_bytes(k->ipver)
               || (k->dst.len && !k->dst.data)) {
        return k->ipver == 4 ? KEY_DST4 : KEY_DST6;
    } else if (k->sport > 65535) {
        return KEY_SPORT;
    } else if (k->dport > 65535) {
        return KEY_DPORT;
    } else if (k->proto > 255) {
        return KEY_PROTO;
    } else if (k->has_tun_id && k->tun_id > TPROTO_MAX_TUN_ID) {
        return KEY_TUN_ID;
    }
    return KEY_OK;
}

BUILD_ASSERT_DECL(TPROTO_MAX_TUN_ID == TPM_PREFIX_MAX_TUN_ID);

static const char *
validate_prefix__(const Trumpet__Prefix *p)
{
    if (!p) {
        return "hello: prefix missing";
    } else if (p->ipver != 4 && p->ipver != 6) {
        return "hello: prefix: ipver is not 4 or 6";
    } else if (p->addr.len != (size_t) tpm_prefix_addr_bytes(p->ipver)
               || !p->addr.data) {
        return (p->ipver == 4 ? "hello: prefix: addr is not 4 bytes for IPv4"
                : "hello: prefix: addr is not 16 bytes for IPv6");
    } else if (p->len > (p->ipver == 4 ? 32u : 128u)) {
        return (p->ipver == 4 ? "hello: prefix: len above 32 for IPv4"
                : "hello: prefix: len above 128 for IPv6");
    } else if (p->has_tun_id && p->tun_id > TPROTO_MAX_TUN_ID) {
        return "hello: prefix: tun_id above 0xffffff";
    }

    uint8_t net[16];
    memcpy(net, p->addr.data, p->addr.len);
    tpm_prefix_clear_host_bits(net, p->addr.len, p->len);
    if (memcmp(net, p->addr.data, p->addr.len)) {
        return "hello: prefix: addr has bits set beyond len";
    }
    return NULL;
}

static const char *
validate_hello__(const Trumpet__Hello *h)
{
    static const char *const host_id[] = STR_ERRORS("hello: host_id",
                                                    TPROTO_MAX_ID);
    static const char *const software[] = STR_ERRORS("hello: software",
                                                     TPROTO_MAX_REASON);
    enum str_error e;

    if (!h->version_min) {
        return "hello: version_min is 0";
    } else if (h->version_min > h->version_max) {
        return "hello: version_min above version_max";
    } else if ((e = str_check__(h->host_id, 1, TPROTO_MAX_ID, STR_ID))) {
        return host_id[e];
    } else if (h->n_prefixes > TPROTO_MAX_PREFIXES) {
        return "hello: prefixes: more than " XSTR(TPROTO_MAX_PREFIXES);
    } else if (!h->epoch_ns) {
        return "hello: epoch_ns is 0";
    } else if (h->epoch_ns > TPROTO_MAX_EPOCH_NS) {
        return "hello: epoch_ns longer than an hour";
    } else if (h->n_pmd_ids > TPROTO_MAX_PMDS) {
        return "hello: pmd_ids: more than " XSTR(TPROTO_MAX_PMDS);
    } else if (h->software
               && (e = str_check__(h->software, 1, TPROTO_MAX_REASON,
                                   STR_TEXT))) {
        return software[e];
    }
    if (h->has_instance && !h->instance) {
        return "hello: instance is 0";
    }
    if (h->n_prefixes && !h->prefixes) {
        return "hello: prefix missing";
    }
    for (size_t i = 0; i < h->n_prefixes; i++) {
        const char *error = validate_prefix__(h->prefixes[i]);
        if (error) {
            return error;
        }
    }
    if (h->n_pmd_ids && !h->pmd_ids) {
        return "hello: pmd_ids missing";
    }
    /* At most TPROTO_MAX_PMDS (1024) entries, in the one Hello of a
     * session: the quadratic check is cheap enough. */
    for (size_t i = 1; i < h->n_pmd_ids; i++) {
        for (size_t j = 0; j < i; j++) {
            if (h->pmd_ids[i] == h->pmd_ids[j]) {
                return "hello: pmd_ids: duplicate id";
            }
        }
    }
    return NULL;
}

static const char *
validate_welcome__(const Trumpet__Welcome *w)
{
    static const char *const tem_id[] = STR_ERRORS("welcome: tem_id",
                                                   TPROTO_MAX_ID);
    enum str_error e;

    if (!w->version) {
        return "welcome: version is 0";
    } else if ((e = str_check__(w->tem_id, 1, TPROTO_MAX_ID, STR_ID))) {
        return tem_id[e];
    } else if (!w->heartbeat_ms) {
        return "welcome: heartbeat_ms is 0";
    } else if (w->heartbeat_ms > TPROTO_MAX_HEARTBEAT_MS) {
        return "welcome: heartbeat_ms above "
               XSTR(TPROTO_MAX_HEARTBEAT_MS);
    }
    return NULL;
}

static const char *
validate_refuse__(const Trumpet__Refuse *r)
{
    static const char *const reason[] = STR_ERRORS("refuse: reason",
                                                   TPROTO_MAX_REASON);
    enum str_error e;

    if ((e = str_check__(r->reason, 1, TPROTO_MAX_REASON, STR_TEXT))) {
        return reason[e];
    } else if (r->has_version_min && r->has_version_max
               && r->version_min > r->version_max) {
        return "refuse: version_min above version_max";
    }
    return NULL;
}

static const char *
validate_install__(const Trumpet__Install *in)
{
    static const char *const name[] = STR_ERRORS("install: name",
                                                 TPROTO_MAX_ID);
    static const char *const definition[] = STR_ERRORS(
        "install: definition", TPROTO_MAX_DEFINITION);
    enum str_error e;

    if (!in->event_id) {
        return "install: event_id is 0";
    } else if ((e = str_check__(in->name, 1, TPROTO_MAX_ID, STR_NAME))) {
        return name[e];
    } else if ((e = str_check__(in->definition, 1, TPROTO_MAX_DEFINITION,
                                STR_TEXT))) {
        return definition[e];
    } else if (in->has_threshold && !isfinite(in->threshold)) {
        return "install: threshold not finite";
    } else if (in->has_threshold && in->threshold < 0) {
        return "install: threshold negative";
    }
    return NULL;
}

static const char *
validate_satisfaction__(const Trumpet__Satisfaction *s)
{
    static const char *const group[] = KEY_ERRORS("satisfaction");
    enum key_error e;

    if (!s->event_id) {
        return "satisfaction: event_id is 0";
    } else if (s->epoch >= TPROTO_MAX_EPOCH) {
        return "satisfaction: epoch not below 2^62";
    } else if ((e = key_check__(s->group))) {
        return group[e];
    } else if (!isfinite(s->value)) {
        return "satisfaction: value not finite";
    } else if (s->has_flags && s->flags & ~TPROTO_SAT_FLAGS) {
        return "satisfaction: flags has unknown bits";
    } else if (s->has_n_parts && s->n_parts > TPROTO_MAX_PMDS) {
        return "satisfaction: n_parts above " XSTR(TPROTO_MAX_PMDS);
    } else if (s->has_n_missing
               && (!s->has_n_parts || s->n_missing > s->n_parts)) {
        return "satisfaction: n_missing above n_parts";
    } else if (s->has_seq && (!s->seq || s->seq >= TPROTO_MAX_SEQ)) {
        return "satisfaction: seq 0 or not below 2^62";
    } else if (s->has_late && !s->has_seq) {
        return "satisfaction: late without seq";
    }
    return NULL;
}

static const char *
validate_poll__(const Trumpet__Poll *p)
{
    static const char *const group[] = KEY_ERRORS("poll");
    enum key_error e;

    if (!p->event_id) {
        return "poll: event_id is 0";
    } else if (p->epoch >= TPROTO_MAX_EPOCH) {
        return "poll: epoch not below 2^62";
    } else if ((e = key_check__(p->group))) {
        return group[e];
    }
    return NULL;
}

static const char *
validate_poll_reply__(const Trumpet__PollReply *r)
{
    if (!r->event_id) {
        return "poll_reply: event_id is 0";
    } else if (r->epoch >= TPROTO_MAX_EPOCH) {
        return "poll_reply: epoch not below 2^62";
    } else if ((unsigned int) r->status
               > TRUMPET__POLL_STATUS__POLL_INCOMPLETE) {
        return "poll_reply: status unknown";
    } else if (r->has_value && !isfinite(r->value)) {
        return "poll_reply: value not finite";
    } else if (!r->has_value
               && (r->status == TRUMPET__POLL_STATUS__POLL_OK
                   || r->status == TRUMPET__POLL_STATUS__POLL_INCOMPLETE)) {
        return "poll_reply: value missing for status OK or INCOMPLETE";
    } else if (r->has_seq && (!r->seq || r->seq >= TPROTO_MAX_SEQ)) {
        return "poll_reply: seq 0 or not below 2^62";
    } else if (r->has_late && !r->has_seq) {
        return "poll_reply: late without seq";
    }
    return NULL;
}

static const char *
validate_poll_batch__(const Trumpet__PollBatch *p)
{
    if (!p->n_event_ids) {
        return "poll_batch: no entries";
    } else if (p->n_event_ids > TPROTO_MAX_POLL_ENTRIES) {
        return "poll_batch: more than " XSTR(TPROTO_MAX_POLL_ENTRIES)
               " entries";
    } else if (p->epoch >= TPROTO_MAX_EPOCH) {
        return "poll_batch: epoch not below 2^62";
    }

    if (p->n_tun_ids && p->n_tun_ids != p->n_event_ids) {
        return "poll_batch: tun_ids: not one per entry";
    }
    for (size_t i = 0; i < p->n_tun_ids; i++) {
        if (p->tun_ids[i] > TPROTO_MAX_TUN_ID + 1) {
            return "poll_batch: tun_ids: above 0xffffff + 1";
        }
    }

    const uint8_t *k = p->keys.data;
    size_t left = p->keys.len;
    for (size_t i = 0; i < p->n_event_ids; i++) {
        struct tpm_key key;
        size_t len = k ? tproto_key_record_get(k, left, &key) : 0;

        if (!p->event_ids[i]) {
            return "poll_batch: event_id is 0";
        } else if (!len) {
            return "poll_batch: keys: not one record (ipver 4 or 6, whole) "
                   "per entry";
        }
        k += len;
        left -= len;
    }
    return left ? "poll_batch: keys: bytes beyond the last entry's" : NULL;
}

static const char *
validate_poll_batch_reply__(const Trumpet__PollBatchReply *r)
{
    if (!r->n_values) {
        return "poll_batch_reply: no entries";
    } else if (r->n_values > TPROTO_MAX_POLL_ENTRIES) {
        return "poll_batch_reply: more than "
               XSTR(TPROTO_MAX_POLL_ENTRIES) " entries";
    } else if (r->status.len != r->n_values || !r->status.data) {
        return "poll_batch_reply: not one status per value";
    } else if (r->epoch >= TPROTO_MAX_EPOCH) {
        return "poll_batch_reply: epoch not below 2^62";
    }
    for (size_t i = 0; i < r->n_values; i++) {
        if (r->status.data[i] > TRUMPET__POLL_STATUS__POLL_INCOMPLETE) {
            return "poll_batch_reply: status unknown";
        } else if (!isfinite(r->values[i])) {
            return "poll_batch_reply: value not finite";
        }
    }
    return NULL;
}

const char *
tproto_validate(const Trumpet__Message *msg)
{
    static const char *const nack_reason[] = STR_ERRORS("nack: reason",
                                                        TPROTO_MAX_REASON);
    static const char *const bye_reason[] = STR_ERRORS("bye: reason",
                                                       TPROTO_MAX_REASON);
    enum str_error e;

    if (!msg) {
        return "message missing";
    }
    /* The body pointers share a union: any of them tells whether the body
     * is there. */
    if (msg->body_case != TRUMPET__MESSAGE__BODY__NOT_SET && !msg->hello) {
        return "message body missing";
    }

    switch (msg->body_case) {
    case TRUMPET__MESSAGE__BODY_HELLO:
        return validate_hello__(msg->hello);
    case TRUMPET__MESSAGE__BODY_WELCOME:
        return validate_welcome__(msg->welcome);
    case TRUMPET__MESSAGE__BODY_REFUSE:
        return validate_refuse__(msg->refuse);
    case TRUMPET__MESSAGE__BODY_INSTALL:
        return validate_install__(msg->install);
    case TRUMPET__MESSAGE__BODY_REMOVE:
        return !msg->remove->event_id ? "remove: event_id is 0" : NULL;
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
        /* Its one setting takes any uint32; a Configure must set
         * something. */
        return (!msg->configure->has_dos_threshold
                ? "configure: no setting given (dos_threshold missing)"
                : NULL);
    case TRUMPET__MESSAGE__BODY_ACK:
        /* event_id 0: the ack of a Configure. */
        return NULL;
    case TRUMPET__MESSAGE__BODY_NACK:
        e = str_check__(msg->nack->reason, 1, TPROTO_MAX_REASON, STR_TEXT);
        return nack_reason[e];
    case TRUMPET__MESSAGE__BODY_SATISFACTION:
        return validate_satisfaction__(msg->satisfaction);
    case TRUMPET__MESSAGE__BODY_POLL:
        return validate_poll__(msg->poll);
    case TRUMPET__MESSAGE__BODY_POLL_REPLY:
        return validate_poll_reply__(msg->poll_reply);
    case TRUMPET__MESSAGE__BODY_POLL_BATCH:
        return validate_poll_batch__(msg->poll_batch);
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY:
        return validate_poll_batch_reply__(msg->poll_batch_reply);
    case TRUMPET__MESSAGE__BODY_HEARTBEAT:
        return (msg->heartbeat->has_received
                && msg->heartbeat->received >= TPROTO_MAX_SEQ
                ? "heartbeat: received not below 2^62" : NULL);
    case TRUMPET__MESSAGE__BODY_BYE:
        if (!msg->bye->reason) {
            return NULL;
        }
        e = str_check__(msg->bye->reason, 0, TPROTO_MAX_REASON, STR_TEXT);
        return bye_reason[e];
    case TRUMPET__MESSAGE__BODY__NOT_SET:
        return "message has no body";
    default:
        return "message of an unknown kind";
    }
}

const char *
tproto_body_name(Trumpet__Message__BodyCase c)
{
    switch (c) {
    case TRUMPET__MESSAGE__BODY__NOT_SET: return "none";
    case TRUMPET__MESSAGE__BODY_HELLO: return "hello";
    case TRUMPET__MESSAGE__BODY_WELCOME: return "welcome";
    case TRUMPET__MESSAGE__BODY_REFUSE: return "refuse";
    case TRUMPET__MESSAGE__BODY_INSTALL: return "install";
    case TRUMPET__MESSAGE__BODY_REMOVE: return "remove";
    case TRUMPET__MESSAGE__BODY_ACK: return "ack";
    case TRUMPET__MESSAGE__BODY_NACK: return "nack";
    case TRUMPET__MESSAGE__BODY_SATISFACTION: return "satisfaction";
    case TRUMPET__MESSAGE__BODY_POLL: return "poll";
    case TRUMPET__MESSAGE__BODY_POLL_REPLY: return "poll_reply";
    case TRUMPET__MESSAGE__BODY_HEARTBEAT: return "heartbeat";
    case TRUMPET__MESSAGE__BODY_BYE: return "bye";
    case TRUMPET__MESSAGE__BODY_CONFIGURE: return "configure";
    case TRUMPET__MESSAGE__BODY_POLL_BATCH: return "poll_batch";
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY: return "poll_batch_reply";
    default: return "unknown";
    }
}

/* Encoding.  Each message lives in one malloc'd block: the Message, its
 * body, then the body's submessages, bytes and strings ("extra"), each
 * piece 8-byte aligned. */

#define ALIGN8(N) ROUND_UP(N, 8)

void
tproto_batch_init(struct tproto_batch *b)
{
    trumpet__frame__init(&b->frame);
    b->frame.version = TPROTO_VERSION_MAX;
    b->msgs = NULL;
    b->n = b->allocated = 0;
}

void
tproto_batch_clear(struct tproto_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->msgs[i]);
    }
    b->n = 0;
    b->frame.n_messages = 0;
}

void
tproto_batch_destroy(struct tproto_batch *b)
{
    if (b) {
        tproto_batch_clear(b);
        free(b->msgs);
        b->msgs = NULL;
        b->allocated = 0;
        b->frame.messages = NULL;
    }
}

size_t
tproto_batch_count(const struct tproto_batch *b)
{
    return b->n;
}

/* Appends a message with body 'body_case' whose body has 'body_size'
 * bytes followed by 'extra' bytes (the sum of ALIGN8'd pieces) at
 * '*extrap'.  Returns the body, not initialized; the body pointer of the
 * message is set. */
static void *
append__(struct tproto_batch *b, Trumpet__Message__BodyCase body_case,
         size_t body_size, size_t extra, char **extrap)
{
    size_t msg_size = ALIGN8(sizeof(Trumpet__Message));
    char *block = xmalloc(msg_size + ALIGN8(body_size) + extra);
    Trumpet__Message *msg = (Trumpet__Message *) block;
    void *body = block + msg_size;

    trumpet__message__init(msg);
    msg->body_case = body_case;
    msg->hello = body;          /* All body pointers share a union. */
    *extrap = block + msg_size + ALIGN8(body_size);

    if (b->n >= b->allocated) {
        b->allocated = b->allocated ? b->allocated * 2 : 16;
        b->msgs = xrealloc(b->msgs, b->allocated * sizeof *b->msgs);
    }
    b->msgs[b->n++] = msg;
    b->frame.messages = b->msgs;
    b->frame.n_messages = b->n;
    return body;
}

/* Takes 'size' bytes from '*extrap'. */
static void *
take__(char **extrap, size_t size)
{
    void *p = *extrap;
    *extrap += ALIGN8(size);
    return p;
}

/* Copies the first 'len' bytes of 's' as a string taken from '*extrap'
 * (which must have ALIGN8(len + 1) bytes). */
static char *
copy_str__(char **extrap, const char *s, size_t len)
{
    char *p = take__(extrap, len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

static size_t
reason_len__(const char *reason)
{
    return reason ? strnlen(reason, TPROTO_MAX_REASON) : 0;
}

/* Extra bytes for a group key: the GroupKey and its two addresses. */
#define KEY_EXTRA (ALIGN8(sizeof(Trumpet__GroupKey)) + 2 * 16)

static Trumpet__GroupKey *
key_to_msg__(char **extrap, const struct tpm_key *key)
{
    Trumpet__GroupKey *k = take__(extrap, sizeof *k);
    size_t n = key->ipver == 4 ? 4 : key->ipver == 6 ? 16 : 0;

    trumpet__group_key__init(k);
    k->ipver = key->ipver;
    k->src.data = take__(extrap, 16);
    k->src.len = n;
    memcpy(k->src.data, key->src, n);
    k->dst.data = take__(extrap, 16);
    k->dst.len = n;
    memcpy(k->dst.data, key->dst, n);
    k->sport = key->sport;
    k->dport = key->dport;
    k->proto = key->proto;
    return k;
}

void
tproto_add_hello(struct tproto_batch *b, const char *host_id,
                 const struct tpm_prefix *prefixes, size_t n_prefixes,
                 uint64_t epoch_ns, uint64_t clock_ns,
                 const uint32_t *pmd_ids, size_t n_pmds,
                 const char *software)
{
    size_t id_len = strlen(host_id);
    size_t sw_len = software ? strlen(software) : 0;
    size_t extra = (ALIGN8(n_prefixes * sizeof(Trumpet__Prefix *))
                    + n_prefixes * (ALIGN8(sizeof(Trumpet__Prefix)) + 16)
                    + ALIGN8(n_pmds * sizeof(uint32_t))
                    + ALIGN8(id_len + 1)
                    + (software ? ALIGN8(sw_len + 1) : 0));
    char *x;
    Trumpet__Hello *h = append__(b, TRUMPET__MESSAGE__BODY_HELLO, sizeof *h,
                                 extra, &x);

    trumpet__hello__init(h);
    h->version_min = TPROTO_VERSION_MIN;
    h->version_max = TPROTO_VERSION_MAX;
    h->host_id = copy_str__(&x, host_id, id_len);
    h->n_prefixes = n_prefixes;
    if (n_prefixes) {
        h->prefixes = take__(&x, n_prefixes * sizeof *h->prefixes);
        for (size_t i = 0; i < n_prefixes; i++) {
            const struct tpm_prefix *p = &prefixes[i];
            Trumpet__Prefix *m = take__(&x, sizeof *m);
            size_t n = p->ipver == 4 ? 4 : p->ipver == 6 ? 16 : 0;

            trumpet__prefix__init(m);
            m->ipver = p->ipver;
            m->len = p->len;
            m->addr.data = take__(&x, 16);
            m->addr.len = n;
            memcpy(m->addr.data, p->addr, n);
            m->has_tun_id = p->has_tun;
            m->tun_id = p->has_tun ? p->tun_id : 0;
            h->prefixes[i] = m;
        }
    }
    h->epoch_ns = epoch_ns;
    h->clock_ns = clock_ns;
    h->n_pmd_ids = n_pmds;
    if (n_pmds) {
        h->pmd_ids = take__(&x, n_pmds * sizeof *h->pmd_ids);
        memcpy(h->pmd_ids, pmd_ids, n_pmds * sizeof *h->pmd_ids);
    }
    if (software) {
        h->software = copy_str__(&x, software, sw_len);
    }
}

void
tproto_add_welcome(struct tproto_batch *b, uint32_t version,
                   const char *tem_id, uint64_t clock_ns,
                   uint32_t heartbeat_ms)
{
    size_t id_len = strlen(tem_id);
    char *x;
    Trumpet__Welcome *w = append__(b, TRUMPET__MESSAGE__BODY_WELCOME,
                                   sizeof *w, ALIGN8(id_len + 1), &x);

    trumpet__welcome__init(w);
    w->version = version;
    w->tem_id = copy_str__(&x, tem_id, id_len);
    w->clock_ns = clock_ns;
    w->heartbeat_ms = heartbeat_ms;
}

void
tproto_add_refuse(struct tproto_batch *b, const char *reason)
{
    size_t len = reason_len__(reason);
    char *x;
    Trumpet__Refuse *r = append__(b, TRUMPET__MESSAGE__BODY_REFUSE,
                                  sizeof *r, ALIGN8(len + 1), &x);

    trumpet__refuse__init(r);
    r->reason = copy_str__(&x, reason ? reason : "", len);
    r->has_version_min = r->has_version_max = true;
    r->version_min = TPROTO_VERSION_MIN;
    r->version_max = TPROTO_VERSION_MAX;
}

void
tproto_add_install(struct tproto_batch *b, uint64_t cookie,
                   uint32_t event_id, const char *name,
                   const char *definition, bool has_threshold,
                   double threshold)
{
    size_t name_len = strlen(name);
    size_t def_len = strlen(definition);
    char *x;
    Trumpet__Install *in = append__(b, TRUMPET__MESSAGE__BODY_INSTALL,
                                    sizeof *in,
                                    ALIGN8(name_len + 1) + ALIGN8(def_len + 1),
                                    &x);

    trumpet__install__init(in);
    in->cookie = cookie;
    in->event_id = event_id;
    in->name = copy_str__(&x, name, name_len);
    in->definition = copy_str__(&x, definition, def_len);
    in->has_threshold = has_threshold;
    in->threshold = has_threshold ? threshold : 0;
}

void
tproto_add_remove(struct tproto_batch *b, uint64_t cookie, uint32_t event_id)
{
    char *x;
    Trumpet__Remove *r = append__(b, TRUMPET__MESSAGE__BODY_REMOVE,
                                  sizeof *r, 0, &x);

    trumpet__remove__init(r);
    r->cookie = cookie;
    r->event_id = event_id;
}

void
tproto_add_configure(struct tproto_batch *b, uint64_t cookie,
                     bool has_dos_threshold, uint32_t dos_threshold)
{
    char *x;
    Trumpet__Configure *c = append__(b, TRUMPET__MESSAGE__BODY_CONFIGURE,
                                     sizeof *c, 0, &x);

    trumpet__configure__init(c);
    c->cookie = cookie;
    c->has_dos_threshold = has_dos_threshold;
    c->dos_threshold = has_dos_threshold ? dos_threshold : 0;
}

void
tproto_add_ack(struct tproto_batch *b, uint64_t cookie, uint32_t event_id)
{
    char *x;
    Trumpet__Ack *a = append__(b, TRUMPET__MESSAGE__BODY_ACK, sizeof *a, 0,
                               &x);

    trumpet__ack__init(a);
    a->cookie = cookie;
    a->event_id = event_id;
}

void
tproto_add_nack(struct tproto_batch *b, uint64_t cookie, uint32_t event_id,
                const char *reason)
{
    size_t len = reason_len__(reason);
    char *x;
    Trumpet__Nack *n = append__(b, TRUMPET__MESSAGE__BODY_NACK, sizeof *n,
                                ALIGN8(len + 1), &x);

    trumpet__nack__init(n);
    n->cookie = cookie;
    n->event_id = event_id;
    n->reason = copy_str__(&x, reason ? reason : "", len);
}

void
tproto_add_satisfaction(struct tproto_batch *b, uint32_t event_id,
                        uint64_t epoch, const struct tpm_key *group,
                        double value, uint32_t flags, uint32_t n_parts,
                        uint32_t n_missing)
{
    char *x;
    Trumpet__Satisfaction *s = append__(b,
                                        TRUMPET__MESSAGE__BODY_SATISFACTION,
                                        sizeof *s, KEY_EXTRA, &x);

    trumpet__satisfaction__init(s);
    s->event_id = event_id;
    s->epoch = epoch;
    s->group = key_to_msg__(&x, group);
    s->value = value;
    s->has_flags = s->has_n_parts = s->has_n_missing = true;
    s->flags = flags;
    s->n_parts = n_parts;
    s->n_missing = n_missing;
}

void
tproto_add_poll(struct tproto_batch *b, uint64_t cookie, uint32_t event_id,
                uint64_t epoch, const struct tpm_key *group)
{
    char *x;
    Trumpet__Poll *p = append__(b, TRUMPET__MESSAGE__BODY_POLL, sizeof *p,
                                KEY_EXTRA, &x);

    trumpet__poll__init(p);
    p->cookie = cookie;
    p->event_id = event_id;
    p->epoch = epoch;
    p->group = key_to_msg__(&x, group);
}

void
tproto_add_poll_reply(struct tproto_batch *b, uint64_t cookie,
                      uint32_t event_id, uint64_t epoch,
                      Trumpet__PollStatus status, double value)
{
    char *x;
    Trumpet__PollReply *r = append__(b, TRUMPET__MESSAGE__BODY_POLL_REPLY,
                                     sizeof *r, 0, &x);

    trumpet__poll_reply__init(r);
    r->cookie = cookie;
    r->event_id = event_id;
    r->epoch = epoch;
    r->status = status;
    r->has_value = true;
    r->value = value;
}

void
tproto_add_poll_batch(struct tproto_batch *b, uint64_t cookie,
                      uint64_t epoch, const uint32_t *event_ids, size_t n,
                      const uint8_t *keys, size_t keys_len,
                      const uint32_t *tun_ids)
{
    char *x;
    Trumpet__PollBatch *p = append__(b, TRUMPET__MESSAGE__BODY_POLL_BATCH,
                                     sizeof *p,
                                     ALIGN8(n * sizeof *event_ids)
                                     + ALIGN8(keys_len)
                                     + (tun_ids
                                        ? ALIGN8(n * sizeof *tun_ids) : 0),
                                     &x);

    trumpet__poll_batch__init(p);
    p->cookie = cookie;
    p->epoch = epoch;
    p->n_event_ids = n;
    p->event_ids = take__(&x, n * sizeof *event_ids);
    memcpy(p->event_ids, event_ids, n * sizeof *event_ids);
    p->keys.len = keys_len;
    p->keys.data = take__(&x, keys_len);
    memcpy(p->keys.data, keys, keys_len);
    if (tun_ids) {
        p->n_tun_ids = n;
        p->tun_ids = take__(&x, n * sizeof *tun_ids);
        memcpy(p->tun_ids, tun_ids, n * sizeof *tun_ids);
    }
}

void
tproto_add_poll_batch_reply(struct tproto_batch *b, uint64_t cookie,
                            uint64_t epoch, const uint8_t *status,
                            const double *values, size_t n)
{
    char *x;
    Trumpet__PollBatchReply *r = append__(
        b, TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY, sizeof *r,
        ALIGN8(n * sizeof *values) + ALIGN8(n), &x);

    trumpet__poll_batch_reply__init(r);
    r->cookie = cookie;
    r->epoch = epoch;
    r->n_values = n;
    r->values = take__(&x, n * sizeof *values);
    memcpy(r->values, values, n * sizeof *values);
    r->status.len = n;
    r->status.data = take__(&x, n);
    memcpy(r->status.data, status, n);
}

void
tproto_add_heartbeat(struct tproto_batch *b, uint64_t clock_ns, uint64_t seq)
{
    tproto_add_heartbeat_counters(b, clock_ns, seq, NULL);
}

void
tproto_add_heartbeat_counters(struct tproto_batch *b, uint64_t clock_ns,
                              uint64_t seq,
                              const struct tproto_host_counters *c)
{
    char *x;
    Trumpet__Heartbeat *h = append__(b, TRUMPET__MESSAGE__BODY_HEARTBEAT,
                                     sizeof *h,
                                     c ? ALIGN8(sizeof *h->counters) : 0,
                                     &x);

    trumpet__heartbeat__init(h);
    h->clock_ns = clock_ns;
    h->seq = seq;
    if (c) {
        Trumpet__HostCounters *hc = (Trumpet__HostCounters *) x;
        trumpet__host_counters__init(hc);
#define HC(FIELD) hc->has_##FIELD = true; hc->FIELD = c->FIELD;
        HC(packets) HC(bytes) HC(sweeps) HC(sweeps_unfinished)
        HC(reports) HC(reports_dropped) HC(dos_skipped) HC(dos_passed)
#undef HC
        h->counters = hc;
    }
}

/* Returns the message last appended to 'b', which must be of kind
 * 'kind'. */
static Trumpet__Message *
last__(struct tproto_batch *b, Trumpet__Message__BodyCase kind)
{
    if (!b->n || b->msgs[b->n - 1]->body_case != kind) {
        tpm_log(TPM_LOG_ERR, "tproto: last message is not a %s",
                tproto_body_name(kind));
        abort();
    }
    return b->msgs[b->n - 1];
}

void
tproto_set_seq(struct tproto_batch *b, uint64_t seq, bool late)
{
    Trumpet__Message *m = b->n ? b->msgs[b->n - 1] : NULL;

    if (m && m->body_case == TRUMPET__MESSAGE__BODY_POLL_REPLY) {
        m->poll_reply->has_seq = m->poll_reply->has_late = true;
        m->poll_reply->seq = seq;
        m->poll_reply->late = late;
    } else {
        m = last__(b, TRUMPET__MESSAGE__BODY_SATISFACTION);
        m->satisfaction->has_seq = m->satisfaction->has_late = true;
        m->satisfaction->seq = seq;
        m->satisfaction->late = late;
    }
}

void
tproto_set_tun_id(struct tproto_batch *b, uint32_t tun_id)
{
    Trumpet__Message *m = b->n ? b->msgs[b->n - 1] : NULL;
    Trumpet__GroupKey *k;

    if (m && m->body_case == TRUMPET__MESSAGE__BODY_POLL) {
        k = m->poll->group;
    } else {
        m = last__(b, TRUMPET__MESSAGE__BODY_SATISFACTION);
        k = m->satisfaction->group;
    }
    k->has_tun_id = true;
    k->tun_id = tun_id;
}

void
tproto_set_instance(struct tproto_batch *b, uint64_t instance)
{
    Trumpet__Hello *h = last__(b, TRUMPET__MESSAGE__BODY_HELLO)->hello;
    h->has_instance = true;
    h->instance = instance;
}

void
tproto_set_received(struct tproto_batch *b, uint64_t received)
{
    Trumpet__Heartbeat *h
        = last__(b, TRUMPET__MESSAGE__BODY_HEARTBEAT)->heartbeat;
    h->has_received = true;
    h->received = received;
}

void
tproto_add_bye(struct tproto_batch *b, const char *reason)
{
    size_t len = reason_len__(reason);
    char *x;
    Trumpet__Bye *bye = append__(b, TRUMPET__MESSAGE__BODY_BYE, sizeof *bye,
                                 reason ? ALIGN8(len + 1) : 0, &x);

    trumpet__bye__init(bye);
    if (reason) {
        bye->reason = copy_str__(&x, reason, len);
    }
}

size_t
tproto_batch_encode(const struct tproto_batch *b, uint32_t version,
                    uint8_t **datap)
{
    Trumpet__Frame frame = TRUMPET__FRAME__INIT;

    frame.version = version ? version : TPROTO_VERSION_MAX;
    frame.n_messages = b->n;
    frame.messages = b->msgs;

    size_t size = trumpet__frame__get_packed_size(&frame);
    uint8_t *data = xmalloc(size);
    size_t packed = trumpet__frame__pack(&frame, data);
    if (packed != size) {
        tpm_log(TPM_LOG_ERR, "tproto: packed %zu bytes, expected %zu",
                packed, size);
        abort();
    }
    *datap = data;
    return size;
}

/* Key records. */

size_t
tproto_key_record_put(uint8_t *p, const struct tpm_key *key)
{
    size_t n = key->ipver == 4 ? 4 : 16;

    p[0] = key->ipver;
    memcpy(p + 1, key->src, n);
    memcpy(p + 1 + n, key->dst, n);
    p += 1 + 2 * n;
    p[0] = key->sport >> 8;
    p[1] = key->sport;
    p[2] = key->dport >> 8;
    p[3] = key->dport;
    p[4] = key->proto;
    return 1 + 2 * n + 5;
}

size_t
tproto_key_record_get(const uint8_t *p, size_t n, struct tpm_key *key)
{
    size_t len = (!n ? 0
                  : p[0] == 4 ? TPROTO_KEY_RECORD_V4
                  : p[0] == 6 ? TPROTO_KEY_RECORD_V6 : 0);
    if (!len || n < len) {
        return 0;
    }

    size_t a = p[0] == 4 ? 4 : 16;
    memset(key, 0, sizeof *key);
    key->ipver = p[0];
    memcpy(key->src, p + 1, a);
    memcpy(key->dst, p + 1 + a, a);
    p += 1 + 2 * a;
    key->sport = (p[0] << 8) | p[1];
    key->dport = (p[2] << 8) | p[3];
    key->proto = p[4];
    return len;
}

/* Conversions. */

void
tproto_key_from_msg(const Trumpet__GroupKey *k, struct tpm_key *key,
                    uint32_t *tun_id)
{
    size_t n = k->ipver == 4 ? 4 : 16;

    memset(key, 0, sizeof *key);
    key->ipver = k->ipver;
    memcpy(key->src, k->src.data, MIN(n, k->src.len));
    memcpy(key->dst, k->dst.data, MIN(n, k->dst.len));
    key->sport = k->sport;
    key->dport = k->dport;
    key->proto = k->proto;
    key->tun = k->has_tun_id;
    if (tun_id) {
        *tun_id = k->has_tun_id ? k->tun_id : 0;
    }
}

void
tproto_prefix_from_msg(const Trumpet__Prefix *p, struct tpm_prefix *prefix)
{
    size_t n = p->ipver == 4 ? 4 : 16;

    memset(prefix, 0, sizeof *prefix);
    prefix->ipver = p->ipver;
    prefix->len = p->len;
    memcpy(prefix->addr, p->addr.data, MIN(n, p->addr.len));
    prefix->has_tun = p->has_tun_id;
    prefix->tun_id = p->has_tun_id ? p->tun_id : 0;
}
