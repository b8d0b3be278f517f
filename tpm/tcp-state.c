/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm's per-flow TCP state: the connection pool (tpm-private.h, "connection
 * pool").
 *
 * Most variables of the event language are read off the packet alone.
 * Those that are not (rwnd, is_lost, is_burst, rtt, seq, ack, dup; see
 * docs/event-language.md) need what earlier packets of the connection
 * said, in both directions: the highest sequence sent, the highest ack
 * received, an RTT sample in flight (Karn's rule: none across a
 * retransmission), the window scale and MSS of each direction's SYN, the
 * time of the previous packet.  That state lives here, outside the flow
 * table's hot lines, in a pool of 'struct tpm_conn' allocated at
 * tpm_create() (tcp_state_pool entries, huge pages): one connection, one
 * half per direction.
 *
 * Phase 1 (match-scatter.c) takes a connection only for a flow matched by
 * an event that needs state (tpm_conn_attach__()), gives a new flow entry
 * the other half of its reverse direction's connection
 * (tpm_conn_join__()), so that the ACKs it carries feed the reverse
 * direction's rtt, ack and dup however the two were matched, and updates
 * the state of every packet of such a flow, filling in the packet's
 * state variables (tpm_conn_update__()).  A half belongs to the flow
 * entry that names it in 'flow_conn', so a reused or freed entry loses
 * its half without any bookkeeping; the scrubber (tpm.c) returns
 * connections whose two halves are orphaned to the pool
 * (tpm_conn_scrub__()).
 *
 * This file calls no other file of libtpm (it reads the flow table).
 *
 * Thread-safety: the monitor's thread only, like phase 1.
 */
#include "tpm-private.h"

#include <netinet/in.h>
#include <string.h>

#include "util.h"

/* Returns true if half 'half' of connection 'ci' belongs to a flow entry
 * that still names it. */
static bool
half_owned__(const struct tpm *tpm, uint32_t ci, int half)
{
    uint32_t fi = tpm->conns[ci].h[half].flow;
    if (fi == TPM_NONE) {
        return false;
    }
    const struct tpm_flow *f = &tpm->ft.flows[fi];
    return f->has_conn
           && (f->state == TPM_FLOW_LIVE || f->state == TPM_FLOW_PENDING)
           && tpm->flow_conn[fi] == TPM_CONN_REF(ci, half);
}

/* Gives flow 'f' half 'half' of connection 'ci'.  The half keeps what an
 * earlier entry of the same flow left in it. */
static void
conn_link__(struct tpm *tpm, struct tpm_flow *f, uint32_t ci, int half)
{
    uint32_t fi = tpm_flow_index(&tpm->ft, f);
    tpm->conns[ci].h[half].flow = fi;
    tpm->flow_conn[fi] = TPM_CONN_REF(ci, half);
    f->has_conn = 1;
}

/* Returns the entry of the reverse direction of TCP flow 'f', or NULL if
 * there is none (or 'f' is its own reverse). */
static struct tpm_flow *
flow_reverse__(const struct tpm *tpm, const struct tpm_flow *f)
{
    if (f->key.proto != IPPROTO_TCP) {
        return NULL;
    }
    struct tpm_key k, r;
    tpm_flow_key(f, &k);
    r = k;
    memcpy(r.src, k.dst, sizeof r.src);
    memcpy(r.dst, k.src, sizeof r.dst);
    r.sport = k.dport;
    r.dport = k.sport;
    struct tpm_flow *rf = tpm_flow_table_find(&tpm->ft, &r,
                                              tpm_key_hash(&r));
    return rf != f ? rf : NULL;
}

/* New flow entry 'f': if its reverse direction keeps state, 'f' takes the
 * other half of that connection, so the ACKs it carries feed the reverse
 * direction's rtt, ack and dup however the two were matched. */
void
tpm_conn_join__(struct tpm *tpm, struct tpm_flow *f)
{
    struct tpm_flow *r = flow_reverse__(tpm, f);
    if (r && r->has_conn) {
        uint32_t ref = tpm->flow_conn[tpm_flow_index(&tpm->ft, r)];
        conn_link__(tpm, f, ref >> 1, !(ref & 1));
    }
}

/* Makes flow 'f' keep per-flow state, together with its reverse direction
 * if TCP.  Returns false if the pool is empty (counted). */
bool
tpm_conn_attach__(struct tpm *tpm, struct tpm_flow *f)
{
    if (f->has_conn) {
        return true;
    }
    struct tpm_flow *r = flow_reverse__(tpm, f);
    if (r && r->has_conn) {
        tpm_conn_join__(tpm, f);
        return true;
    }
    if (!tpm->n_conn_free) {
        TPM_STAT_ADD(tpm, tcp_state_exhausted, 1);
        return false;
    }
    uint32_t ci = tpm->conn_free[--tpm->n_conn_free];
    struct tpm_conn *c = &tpm->conns[ci];
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 2; i++) {
        c->h[i].flow = TPM_NONE;
        c->h[i].wscale = TPM_WSCALE_NONE;
    }
    conn_link__(tpm, f, ci, 0);
    if (r) {
        conn_link__(tpm, r, ci, 1);
    }
    TPM_STAT_SET(tpm, tcp_states, tpm->p.tcp_state_pool - tpm->n_conn_free);
    return true;
}

/* Returns connections whose halves both lost their flow entries to the
 * pool, visiting up to 'n' entries from the reclaim cursor. */
void
tpm_conn_scrub__(struct tpm *tpm, uint32_t n)
{
    uint32_t pool = tpm->p.tcp_state_pool;
    uint32_t freed = 0;

    n = MIN(n, pool);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ci = tpm->conn_scrub_pos;
        struct tpm_conn *c = &tpm->conns[ci];
        tpm->conn_scrub_pos = ci + 1 < pool ? ci + 1 : 0;
        if (c->h[0].flow == TPM_NONE && c->h[1].flow == TPM_NONE) {
            continue;           /* Free. */
        }
        if (!half_owned__(tpm, ci, 0) && !half_owned__(tpm, ci, 1)) {
            c->h[0].flow = c->h[1].flow = TPM_NONE;
            tpm->conn_free[tpm->n_conn_free++] = ci;
            freed++;
        }
    }
    if (freed) {
        TPM_STAT_ADD(tpm, tcp_state_freed, freed);
        TPM_STAT_SET(tpm, tcp_states,
                     tpm->p.tcp_state_pool - tpm->n_conn_free);
    }
}

/* Returns 'raw', a 32-bit sequence number, unwrapped to the 64-bit value
 * nearest to 'ref' (never below 0). */
static inline uint64_t
seq_unwrap__(uint64_t ref, uint32_t raw)
{
    int64_t v = (int64_t) ref + (int32_t) (raw - (uint32_t) ref);
    return v > 0 ? (uint64_t) v : 0;
}

/* Updates the per-flow state of flow 'f' (which has a connection) with
 * 'pkt', received at 'now', and fills in the packet's state variables
 * 'pkt->v' (docs/event-language.md gives their exact meaning). */
void
tpm_conn_update__(struct tpm *tpm, const struct tpm_flow *f,
                  struct tpm_pkt *pkt, uint64_t now)
{
    uint32_t ref = tpm->flow_conn[tpm_flow_index(&tpm->ft, f)];
    struct tpm_conn *c = &tpm->conns[ref >> 1];
    struct tpm_half *h = &c->h[ref & 1], *o = &c->h[!(ref & 1)];
    struct tpm_pkt_vars *v = &pkt->v;

    v->is_burst = (h->flags & TPM_HALF_PKT)
                  && now <= h->last_ns + tpm->p.burst_gap_ns;
    h->last_ns = now;
    if (f->key.proto != IPPROTO_TCP) {
        h->flags |= TPM_HALF_PKT;
        v->seq = v->ack = v->rtt = 0;
        v->rwnd = v->dup = 0;
        v->is_lost = 0;
        return;
    }

    uint8_t fl = pkt->tcp_flags;
    uint32_t seglen = pkt->volume + !!(fl & TPM_TCP_SYN)
                      + !!(fl & TPM_TCP_FIN);
    if (fl & TPM_TCP_SYN) {
        h->flags |= TPM_HALF_SYN;
        h->wscale = pkt->wscale;
        h->mss = pkt->mss;
        /* A SYN-ACK carries the option only if the SYN did (RFC 7323
         * 2.2): the other direction scales, by a shift this state did not
         * see if its SYN came before the state existed. */
        if (fl & TPM_TCP_ACK && pkt->wscale != TPM_WSCALE_NONE
            && o->wscale == TPM_WSCALE_NONE) {
            o->wscale = TPM_WSCALE_UNSEEN;
        }
    }

    /* This direction's data: retransmission, RTT sample (Karn: none
     * across a retransmission), highest sequence. */
    uint64_t seq = (h->flags & TPM_HALF_SEQ ? seq_unwrap__(h->snd_max,
                                                           pkt->seq)
                    : h->flags & TPM_HALF_ACK ? seq_unwrap__(h->ack, pkt->seq)
                    : pkt->seq);
    uint64_t end = seq + seglen;
    bool lost = seglen && (h->flags & TPM_HALF_SEQ) && seq < h->snd_max;
    if (lost) {
        h->flags &= ~TPM_HALF_SAMPLING;
    } else if (seglen && !(h->flags & TPM_HALF_SAMPLING)) {
        h->sample_end = end;
        h->sample_ns = now;
        h->flags |= TPM_HALF_SAMPLING;
    }
    if (!(h->flags & TPM_HALF_SEQ) || end > h->snd_max) {
        h->snd_max = end;
    }
    h->flags |= TPM_HALF_SEQ;

    /* The other direction's data, which this packet acknowledges. */
    if (fl & TPM_TCP_ACK) {
        uint64_t a = (o->flags & TPM_HALF_SEQ ? seq_unwrap__(o->snd_max,
                                                             pkt->ack)
                      : o->flags & TPM_HALF_ACK ? seq_unwrap__(o->ack,
                                                               pkt->ack)
                      : pkt->ack);
        if (!(o->flags & TPM_HALF_ACK)) {
            o->ack = a;
            o->flags |= TPM_HALF_ACK;
        } else if (a > o->ack) {
            uint64_t acked = a - o->ack;
            o->dup = o->dup > acked ? (uint32_t) (o->dup - acked) : 0;
            o->ack = a;
        } else if (a == o->ack && !seglen && (h->flags & TPM_HALF_PKT)
                   && pkt->rwnd == h->win && (o->flags & TPM_HALF_SEQ)
                   && o->snd_max > a) {
            /* Duplicate ACK (RFC 5681): one more segment of the other
             * direction arrived beyond 'ack'. */
            uint32_t mss = h->mss ? h->mss : 1460;
            o->dup = o->dup <= UINT32_MAX - mss ? o->dup + mss : UINT32_MAX;
        }
        if ((o->flags & TPM_HALF_SAMPLING) && a >= o->sample_end) {
            o->rtt = now > o->sample_ns ? now - o->sample_ns : 0;
            o->flags &= ~TPM_HALF_SAMPLING;
        }
    }
    h->win = pkt->rwnd;
    h->flags |= TPM_HALF_PKT;

    /* Window scaling applies once both SYNs carried the option, never to
     * a SYN (RFC 7323); a direction whose own shift was not seen stays
     * unscaled. */
    uint32_t shift = (!(fl & TPM_TCP_SYN) && h->wscale <= TPM_WSCALE_MAX
                      && o->wscale != TPM_WSCALE_NONE) ? h->wscale : 0;
    v->rwnd = (uint32_t) pkt->rwnd << shift;
    v->seq = h->snd_max;
    v->ack = h->flags & TPM_HALF_ACK ? h->ack : 0;
    v->rtt = h->rtt;
    v->dup = h->dup;
    v->is_lost = lost;
}
