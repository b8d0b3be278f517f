/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the TEM core sends to hosts: the host table's lookups that every
 * file needs and the hosts' outgoing batches.  With tem-log.c this is the
 * bottom of the core (tem-core-private.h): every file above queues its
 * messages here, and this file calls none of them.
 *
 * Hosts.  core->hosts holds every host by slot (tem-host.c opens and ends
 * their sessions); tem_out_host_by_slot() and tem_out_host_connected()
 * are the lookups the other files make.
 *
 * Batches.  Every message to a host goes through tem_out_batch(), which
 * queues it in the host's batch (sending what is queued first when the
 * frame would grow past --max-batch-bytes or TPROTO_MAX_BATCH messages)
 * and marks the host dirty (tem_out_dirty()); tem_core_flush() sends each
 * dirty host's batch as one frame through the 'send' callback
 * (tem_out_send()).  Peers without a session get Refuse or Bye at once
 * (tem_out_refuse(), tem_out_bye()).
 *
 * PollBatches (protocol version 3 on).  A host's polls of one loop turn
 * gather in its struct tem_pollq (tem_out_pollq_add(), called by
 * tem-decide.c), and leave as one PollBatch at the host's flush; the
 * batches out are remembered by cookie for tem-decide.c to match their
 * replies.
 *
 * Confirmations (protocol version 3).  At its flush a host is told, in a
 * heartbeat at the batch's end, which of its reports the TEM has
 * (tem_out_tell_received()): those tem-host.c took, but for the
 * satisfactions tem-decide.c holds until their decision is made
 * (tem-host.c, "Delivery of hosts' reports").
 */
#include "tem-core-private.h"

#include <string.h>

/* ---------------------------------------------------------------------- */
/* Hosts. */

/* Returns the host in slot 'slot', NULL if none was ever there. */
struct tem_host *
tem_out_host_by_slot(const struct tem_core *core, uint32_t slot)
{
    return slot < core->n_host_slots ? core->hosts[slot] : NULL;
}

/* Returns true if 'h' (possibly NULL) is in session. */
bool
tem_out_host_connected(const struct tem_host *h)
{
    return h && h->state == TEM_HOST_CONNECTED;
}

/* ---------------------------------------------------------------------- */
/* Batches. */

/* Hands 'b' to the 'send' callback as one frame of protocol 'version'
 * for 'peer', counts it in the core's stats and in 'hs' (NULL for a peer
 * without a session), and clears it. */
void
tem_out_send(struct tem_core *core, const void *peer, size_t peer_len,
             uint32_t version, struct tproto_batch *b,
             struct tem_host_stats *hs)
{
    size_t n = tproto_batch_count(b);
    if (!n) {
        return;
    }
    bool ok = core->cfg.send(core->cfg.aux, peer, peer_len, version, b);
    core->stats.frames_out++;
    core->stats.msgs_out += n;
    if (hs) {
        hs->frames_out++;
        hs->msgs_out += n;
    }
    if (!ok) {
        core->stats.send_drops += n;
        if (hs) {
            hs->send_drops += n;
        }
    }
    tproto_batch_clear(b);
}

/* What 'h' is told it delivered: the reports taken, but for the
 * satisfactions whose decision is pending, and those after them (the
 * confirmation is cumulative).  A TEM that stops or crashes before
 * deciding them gets them again, late, from the host. */
uint64_t
tem_out_received(const struct tem_host *h)
{
    return h->held_n ? h->held[h->held_head] - 1 : h->seq_recv;
}

/* Before 'h''s batch goes: tells it the reports taken since it was last
 * told, in a heartbeat at the batch's end (after a full batch, in a frame
 * of its own). */
void
tem_out_tell_received(struct tem_core *core, struct tem_host *h)
{
    if (h->version >= TPROTO_VERSION_CONFIRM
        && tem_out_received(h) != h->seq_told) {
        uint64_t now = tem_core_now(core);
        if (tproto_batch_count(&h->out) >= TPROTO_MAX_BATCH) {
            tem_out_send(core, h->peer, h->peer_len, h->version, &h->out,
                         &h->stats);
        }
        h->seq_told = tem_out_received(h);
        tproto_add_heartbeat(&h->out, tem_core_real(core), ++h->hb_seq);
        tproto_set_received(&h->out, h->seq_told);
        h->last_hb_tx_ns = now;
    }
}

static void tem_out_pollq_flush(struct tem_core *, struct tem_host *);

static void
tem_out_flush_host(struct tem_core *core, struct tem_host *h)
{
    if (h->pollq && h->pollq->n) {
        tem_out_pollq_flush(core, h);
    }
    if (tem_out_host_connected(h)) {
        tem_out_tell_received(core, h);
        tem_out_send(core, h->peer, h->peer_len, h->version, &h->out,
                     &h->stats);
    }
    tproto_batch_clear(&h->out);
    h->out_bytes = 0;
}

/* Returns 'h''s outgoing batch for one more message of about 'bytes'
 * bytes, sending what is queued first if the frame would grow too
 * large. */
struct tproto_batch *
tem_out_batch(struct tem_core *core, struct tem_host *h, size_t bytes)
{
    if (tproto_batch_count(&h->out) >= TPROTO_MAX_BATCH
        || h->out_bytes + bytes > core->cfg.max_batch_bytes) {
        tem_out_flush_host(core, h);
    }
    tem_out_dirty(core, h);
    h->out_bytes += bytes + 16;
    return &h->out;
}

/* Puts 'h' on the list of hosts flushed by tem_core_flush(). */
void
tem_out_dirty(struct tem_core *core, struct tem_host *h)
{
    if (!h->dirty) {
        h->dirty = true;
        core->dirty[core->n_dirty++] = h;
    }
}

/* Sends every dirty host's batch as one frame.  This ends a loop turn:
 * the hosts' budgets of decisions per turn start again (tem-decide.c). */
void
tem_core_flush(struct tem_core *core)
{
    core->turn++;
    for (size_t i = 0; i < core->n_dirty; i++) {
        struct tem_host *h = core->dirty[i];
        tem_out_flush_host(core, h);
        h->dirty = false;
    }
    core->n_dirty = 0;
}

/* Sends one message to a peer without a session, at once. */
void
tem_out_refuse(struct tem_core *core, const void *peer, size_t peer_len,
               const char *reason)
{
    tproto_add_refuse(&core->tmp, reason);
    tem_out_send(core, peer, peer_len, 0, &core->tmp, NULL);
}

/* Sends Bye to a peer without a session, at once. */
void
tem_out_bye(struct tem_core *core, const void *peer, size_t peer_len,
            const char *reason)
{
    tproto_add_bye(&core->tmp, reason);
    tem_out_send(core, peer, peer_len, 0, &core->tmp, NULL);
}

/* ---------------------------------------------------------------------- */
/* PollBatches. */

static struct tem_pollq *
tem_out_pollq_get(struct tem_host *h)
{
    if (!h->pollq) {
        h->pollq = xzalloc(sizeof *h->pollq);
    }
    return h->pollq;
}

void
tem_out_pollq_free(struct tem_pollq *q)
{
    if (q) {
        free(q->ids);
        free(q->keys);
        free(q->tuns);
        free(q->refs);
        for (size_t i = 0; i < TEM_POLL_BATCHES_OUT; i++) {
            free(q->out[i].refs);
        }
        free(q);
    }
}

/* Appends the entries gathered for 'h' as one PollBatch to its outgoing
 * messages and remembers them under its cookie. */
static void
tem_out_pollq_flush(struct tem_core *core, struct tem_host *h)
{
    struct tem_pollq *q = h->pollq;
    uint64_t cookie = ++q->next_cookie;
    struct tem_poll_out *o = &q->out[cookie % TEM_POLL_BATCHES_OUT];
    size_t n = q->n;

    if (o->cookie) {
        /* Never answered: its entries will find no batch. */
        core->stats.poll_batches_forgotten++;
    }
    /* tem_out_batch() may flush the host's messages first, which must not
     * flush this batch again. */
    q->n = 0;
    struct tproto_batch *out = tem_out_batch(core, h,
                                             16 + q->keys_len
                                             + (q->any_tun ? 10 : 5) * n);
    tproto_add_poll_batch(out, cookie, q->epoch, q->ids, n, q->keys,
                          q->keys_len, q->any_tun ? q->tuns : NULL);
    q->any_tun = false;
    core->stats.poll_batches++;

    /* The gathered refs become the batch's; its old buffer gathers the
     * next. */
    struct tem_poll_ref *refs = o->refs;
    size_t cap = o->cap;
    o->cookie = cookie;
    o->epoch = q->epoch;
    o->n = n;
    o->refs = q->refs;
    o->cap = q->cap;
    q->refs = refs;
    q->keys_len = 0;
    if (cap < q->cap) {
        q->refs = xrealloc(q->refs, q->cap * sizeof *q->refs);
    }
}

/* 'h''s session ended: its gathered polls and batches out are void. */
void
tem_out_pollq_reset(struct tem_pollq *q)
{
    if (q) {
        q->n = q->keys_len = 0;
        q->any_tun = false;
        for (size_t i = 0; i < TEM_POLL_BATCHES_OUT; i++) {
            q->out[i].cookie = 0;
        }
    }
}

/* Makes 'pk', the group of 'd' as its polls carry it.  A decision polls
 * up to all of its hosts but one: the record is made once, not once per
 * host. */
void
tem_out_poll_key_init(const struct tem_core *core, struct tem_poll_key *pk,
                      const struct tpm_decision *d)
{
    pk->len = tproto_key_record_put(pk->rec, &d->key.group);
    /* A tenant's: VNI + 1 (PollBatch.tun_ids). */
    pk->tun = (d->key.group.tun
               ? tem_core_group_vni(core, &d->key.group) + 1 : 0);
}

/* Gathers the poll of part 'part' of 'd', whose group is 'pk'
 * (tem_out_poll_key_init()), into the next PollBatch of 'h'. */
void
tem_out_pollq_add(struct tem_core *core, struct tem_host *h,
                  const struct tpm_decision *d, uint32_t part,
                  const struct tem_poll_key *pk)
{
    struct tem_pollq *q = tem_out_pollq_get(h);

    if (q->n && (q->epoch != d->key.epoch
                 || q->n == TPROTO_MAX_POLL_ENTRIES)) {
        tem_out_pollq_flush(core, h);
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->ids = xrealloc(q->ids, q->cap * sizeof *q->ids);
        q->keys = xrealloc(q->keys, q->cap * TPROTO_KEY_RECORD_V6);
        q->tuns = xrealloc(q->tuns, q->cap * sizeof *q->tuns);
        q->refs = xrealloc(q->refs, q->cap * sizeof *q->refs);
    }
    if (!q->n) {
        q->epoch = d->key.epoch;
        tem_out_dirty(core, h);  /* So that tem_core_flush() sends it. */
    }
    q->ids[q->n] = d->key.event;
    /* The whole room of a record: a copy of constant size, with room for
     * it since 'keys' holds 'cap' records of the largest size. */
    memcpy(q->keys + q->keys_len, pk->rec, sizeof pk->rec);
    q->keys_len += pk->len;
    q->tuns[q->n] = pk->tun;
    q->any_tun |= pk->tun != 0;
    q->refs[q->n] = (struct tem_poll_ref) {
        .slot = d->slot, .gen = d->gen, .part = part,
    };
    q->n++;
}
