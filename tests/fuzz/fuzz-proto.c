/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the TPM <-> TEM protocol layer (lib/tproto.h).
 *
 * Input: a frame as received from a ZeroMQ socket.  It is also read as
 * text for the address-prefix parser, which shares the file.
 *
 * Checks, on every input:
 *   - tproto_decode() (which reads frames of satisfactions with a decoder
 *     of its own) and protobuf-c alone read the same frame;
 *   - tproto_decode() returns a frame or a reason, and tproto_validate()
 *     a verdict for each message, without touching memory it must not
 *     (AddressSanitizer) on any bytes;
 *   - every valid message, converted to lib/'s types and encoded again
 *     with the tproto_add_*() of its kind, decodes into a valid message
 *     equal to the one received (the fields a sender cannot choose, such
 *     as Hello's version range, set as the encoder does);
 *   - a parsed prefix list formats into text that parses back into it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "tproto.h"
#include "util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tpm_log_set_hook(fuzz_log_quiet);
    return 0;
}

/* Drops the fields protobuf-c did not know from 'm' (they are kept and
 * packed again, the encoder never sends any). */
static void
drop_unknown(ProtobufCMessage *m)
{
    if (m) {
        m->n_unknown_fields = 0;
        m->unknown_fields = NULL;
    }
}

/* Appends to 'b' the message that the encoder writes for valid message
 * 'm', and sets in 'm' the fields that the encoder decides itself (the
 * caller compares the two). */
static void
reencode(struct tproto_batch *b, Trumpet__Message *m)
{
    struct tpm_key key;
    uint32_t tun_id;

    drop_unknown(&m->base);
    drop_unknown((ProtobufCMessage *) m->hello);   /* Any body. */
    switch (m->body_case) {
    case TRUMPET__MESSAGE__BODY_HELLO: {
        Trumpet__Hello *h = m->hello;
        struct tpm_prefix *p = xcalloc(h->n_prefixes + 1, sizeof *p);
        for (size_t i = 0; i < h->n_prefixes; i++) {
            drop_unknown(&h->prefixes[i]->base);
            tproto_prefix_from_msg(h->prefixes[i], &p[i]);
        }
        tproto_add_hello(b, h->host_id, p, h->n_prefixes, h->epoch_ns,
                         h->clock_ns, h->pmd_ids, h->n_pmd_ids,
                         h->software);
        if (h->has_instance) {
            tproto_set_instance(b, h->instance);
        }
        free(p);
        h->version_min = TPROTO_VERSION_MIN;
        h->version_max = TPROTO_VERSION_MAX;
        break;
    }
    case TRUMPET__MESSAGE__BODY_WELCOME: {
        Trumpet__Welcome *w = m->welcome;
        tproto_add_welcome(b, w->version, w->tem_id, w->clock_ns,
                           w->heartbeat_ms);
        break;
    }
    case TRUMPET__MESSAGE__BODY_REFUSE:
        tproto_add_refuse(b, m->refuse->reason);
        m->refuse->has_version_min = m->refuse->has_version_max = true;
        m->refuse->version_min = TPROTO_VERSION_MIN;
        m->refuse->version_max = TPROTO_VERSION_MAX;
        break;
    case TRUMPET__MESSAGE__BODY_INSTALL: {
        Trumpet__Install *in = m->install;
        tproto_add_install(b, in->cookie, in->event_id, in->name,
                           in->definition, in->has_threshold,
                           in->threshold);
        break;
    }
    case TRUMPET__MESSAGE__BODY_REMOVE:
        tproto_add_remove(b, m->remove->cookie, m->remove->event_id);
        break;
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
        tproto_add_configure(b, m->configure->cookie,
                             m->configure->has_dos_threshold,
                             m->configure->dos_threshold);
        break;
    case TRUMPET__MESSAGE__BODY_ACK:
        tproto_add_ack(b, m->ack->cookie, m->ack->event_id);
        break;
    case TRUMPET__MESSAGE__BODY_NACK:
        tproto_add_nack(b, m->nack->cookie, m->nack->event_id,
                        m->nack->reason);
        break;
    case TRUMPET__MESSAGE__BODY_SATISFACTION: {
        Trumpet__Satisfaction *s = m->satisfaction;
        drop_unknown(&s->group->base);
        tproto_key_from_msg(s->group, &key, &tun_id);
        tproto_add_satisfaction(b, s->event_id, s->epoch, &key, s->value,
                                s->flags, s->n_parts, s->n_missing);
        if (key.tun) {
            tproto_set_tun_id(b, tun_id);
        }
        s->has_flags = s->has_n_parts = s->has_n_missing = true;
        if (s->has_seq) {
            /* With a sequence number, the late flag is always written. */
            s->late = s->has_late && s->late;
            s->has_late = true;
            tproto_set_seq(b, s->seq, s->late);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL: {
        Trumpet__Poll *p = m->poll;
        drop_unknown(&p->group->base);
        tproto_key_from_msg(p->group, &key, &tun_id);
        tproto_add_poll(b, p->cookie, p->event_id, p->epoch, &key);
        if (key.tun) {
            tproto_set_tun_id(b, tun_id);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_REPLY: {
        Trumpet__PollReply *r = m->poll_reply;
        tproto_add_poll_reply(b, r->cookie, r->event_id, r->epoch, r->status,
                              r->value);
        r->has_value = true;
        if (r->has_seq) {
            r->late = r->has_late && r->late;
            r->has_late = true;
            tproto_set_seq(b, r->seq, r->late);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_BATCH: {
        const Trumpet__PollBatch *p = m->poll_batch;
        tproto_add_poll_batch(b, p->cookie, p->epoch, p->event_ids,
                              p->n_event_ids, p->keys.data, p->keys.len,
                              p->n_tun_ids ? p->tun_ids : NULL);
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY: {
        const Trumpet__PollBatchReply *r = m->poll_batch_reply;
        tproto_add_poll_batch_reply(b, r->cookie, r->epoch, r->status.data,
                                    r->values, r->n_values);
        break;
    }
    case TRUMPET__MESSAGE__BODY_HEARTBEAT: {
        Trumpet__HostCounters *hc = m->heartbeat->counters;
        struct tproto_host_counters c;
        if (hc) {
            drop_unknown(&hc->base);
            /* The encoder writes every counter, an absent one as 0. */
#define HC(F) \
            c.F = hc->has_##F ? hc->F : 0; hc->has_##F = true; hc->F = c.F;
            HC(packets) HC(bytes) HC(sweeps) HC(sweeps_unfinished)
            HC(reports) HC(reports_dropped) HC(dos_skipped) HC(dos_passed)
#undef HC
        }
        tproto_add_heartbeat_counters(b, m->heartbeat->clock_ns,
                                      m->heartbeat->seq, hc ? &c : NULL);
        if (m->heartbeat->has_received) {
            tproto_set_received(b, m->heartbeat->received);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_BYE:
        tproto_add_bye(b, m->bye->reason);
        break;
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    case _TRUMPET__MESSAGE__BODY__CASE_IS_INT_SIZE:
    default:
        FUZZ_CHECK(false, "valid message of kind %d", m->body_case);
    }
}

/* Packs 'm' into a new buffer '*datap'; returns its length. */
static size_t
pack(const Trumpet__Message *m, uint8_t **datap)
{
    size_t size = trumpet__message__get_packed_size(m);
    *datap = xmalloc(size + 1);
    size_t n = trumpet__message__pack(m, *datap);
    FUZZ_CHECK(n == size, "packed %zu bytes of %zu", n, size);
    return n;
}

static void
check_frame(const uint8_t *data, size_t size)
{
    const char *why;
    Trumpet__Frame *f = tproto_decode(data, size, &why);

    if (!f) {
        FUZZ_CHECK(why, "no frame and no reason");
        return;
    }
    FUZZ_CHECK(f->n_messages >= 1 && f->n_messages <= TPROTO_MAX_BATCH,
               "%zu messages", f->n_messages);

    /* The decoder by hand (frames of satisfactions) and protobuf-c's agree
     * on every frame: byte for byte once packed again. */
    Trumpet__Frame *generic = tproto_decode_generic(data, size);
    FUZZ_CHECK(generic, "tproto_decode() read a frame protobuf-c cannot");
    uint8_t *pf = xmalloc(trumpet__frame__get_packed_size(f));
    uint8_t *pg = xmalloc(trumpet__frame__get_packed_size(generic));
    size_t nf = trumpet__frame__pack(f, pf);
    size_t ng = trumpet__frame__pack(generic, pg);
    FUZZ_CHECK(nf == ng && !memcmp(pf, pg, nf),
               "the two decoders read the frame differently");
    free(pf);
    free(pg);
    tproto_free(generic);

    struct tproto_batch b;
    bool *valid = xcalloc(f->n_messages, sizeof *valid);
    tproto_batch_init(&b);
    for (size_t i = 0; i < f->n_messages; i++) {
        Trumpet__Message *m = f->messages[i];
        const char *invalid = tproto_validate(m);
        FUZZ_CHECK(tproto_body_name(m->body_case), "no body name");
        if (!invalid) {
            valid[i] = true;
            reencode(&b, m);
        }
    }
    if (!tproto_batch_count(&b)) {
        goto out;
    }

    uint8_t *enc;
    size_t len = tproto_batch_encode(&b, f->version, &enc);
    Trumpet__Frame *g = tproto_decode(enc, len, &why);
    FUZZ_CHECK(g, "valid messages encode into a frame that does not "
               "decode: %s", why);
    /* Version 0 (an old peer's session message) is sent as ours. */
    uint32_t version = f->version ? f->version : TPROTO_VERSION_MAX;
    FUZZ_CHECK(g->version == version, "version %u, sent %u", g->version,
               version);
    FUZZ_CHECK(g->n_messages == tproto_batch_count(&b), "%zu messages of %zu",
               g->n_messages, tproto_batch_count(&b));
    size_t j = 0;
    for (size_t i = 0; i < f->n_messages; i++) {
        if (!valid[i]) {
            continue;
        }
        const Trumpet__Message *m = g->messages[j++];
        const char *invalid = tproto_validate(m);
        FUZZ_CHECK(!invalid, "a valid %s encodes into an invalid one: %s",
                   tproto_body_name(m->body_case), invalid);

        uint8_t *a, *c;
        size_t na = pack(f->messages[i], &a);
        size_t nc = pack(m, &c);
        FUZZ_CHECK(na == nc && !memcmp(a, c, na),
                   "a valid %s comes back different from the encoder",
                   tproto_body_name(m->body_case));
        free(a);
        free(c);
    }
    tproto_free(g);
    free(enc);

out:
    tproto_batch_destroy(&b);
    free(valid);
    tproto_free(f);
}

static void
check_prefixes(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size < 512 ? size : 512);
    struct tpm_prefix *p;
    size_t n;
    char *error = tpm_prefix_parse_list(text, &p, &n);

    if (error) {
        free(error);
        free(text);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        struct tpm_prefix q;

        FUZZ_CHECK(p[i].ipver == 4 || p[i].ipver == 6, "IP version %u",
                   p[i].ipver);
        FUZZ_CHECK(p[i].len <= (p[i].ipver == 4 ? 32 : 128), "length %u",
                   p[i].len);
        FUZZ_CHECK(p[i].has_tun ? p[i].tun_id <= TPM_PREFIX_MAX_TUN_ID
                   : !p[i].tun_id, "tenant %u", p[i].tun_id);
        tpm_prefix_format(&p[i], buf, sizeof buf);
        error = tpm_prefix_parse(buf, &q);
        FUZZ_CHECK(!error, "'%s' does not parse back: %s", buf, error);
        FUZZ_CHECK(p[i].ipver == q.ipver && p[i].len == q.len
                   && !memcmp(p[i].addr, q.addr, sizeof q.addr)
                   && p[i].has_tun == q.has_tun && p[i].tun_id == q.tun_id,
                   "'%s' parses into another prefix", buf);
        FUZZ_CHECK(tpm_prefix_overlap(&p[i], &q), "'%s' does not overlap "
                   "itself", buf);
        FUZZ_CHECK(tpm_prefix_contains(&p[i], p[i].ipver, p[i].addr),
                   "'%s' does not contain its address", buf);
        if (i) {
            FUZZ_CHECK(tpm_prefix_overlap(&p[i], &p[i - 1])
                       == tpm_prefix_overlap(&p[i - 1], &p[i]),
                       "overlap not symmetric");
        }
    }
    free(p);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_frame(data, size);
    check_prefixes(data, size);
    return 0;
}
