/* SPDX-License-Identifier: Apache-2.0 */
#include "replay-sizing.h"

#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#include "packet.h"
#include "util.h"

#define NS_PER_S UINT64_C(1000000000)

/* Largest frame the replay copies (tpm-replay.c's batch buffers): the
 * census parses what the monitor will see. */
#define FRAME_MAX 65536

/* A flow seen in the capture. */
struct census_flow {
    struct tpm_key key;
    uint64_t last_epoch;        /* Epoch of its latest packet. */
    uint32_t hash;              /* tpm_key_hash(), as the monitor's. */
    bool used;
};

/* A group of a coarse event (not 5-tuple), with at least one flow. */
struct census_group {
    struct tpm_key gkey;        /* Flow key masked by the event's group. */
    uint32_t event_plus1;       /* Index of the event + 1; 0: empty. */
    uint32_t hash;
    uint64_t flows;             /* Distinct flows of the group. */
    uint64_t activations;       /* Times a flow of it was (re)matched. */
};

struct census_ctx {
    struct tpm_event *const *events;
    size_t n_events;
    uint64_t *instances;        /* Per event. */

    struct census_flow *flows;
    uint64_t flows_mask;
    uint64_t n_flows;
    uint64_t allocated_hashes;

    struct census_group *groups;
    uint64_t groups_mask;
    uint64_t n_groups;
};

/* Open addressing with linear probing for both sets, grown to keep them
 * at most half full: the census costs a lookup per packet. */

static struct census_flow *
flow_slot__(struct census_flow *flows, uint64_t mask,
            const struct tpm_key *key, uint32_t hash)
{
    for (uint64_t i = hash;; i++) {
        struct census_flow *f = &flows[i & mask];
        if (!f->used || (f->hash == hash && tpm_key_equal(&f->key, key))) {
            return f;
        }
    }
}

static void
flows_grow__(struct census_ctx *c)
{
    uint64_t size = 2 * (c->flows_mask + 1);
    struct census_flow *flows = xcalloc(size, sizeof *flows);
    for (uint64_t i = 0; i <= c->flows_mask; i++) {
        const struct census_flow *f = &c->flows[i];
        if (f->used) {
            *flow_slot__(flows, size - 1, &f->key, f->hash) = *f;
        }
    }
    free(c->flows);
    c->flows = flows;
    c->flows_mask = size - 1;
}

static uint32_t
group_hash__(uint32_t event, const struct tpm_key *gkey)
{
    return tpm_key_hash(gkey) ^ (event * 0x9e3779b1u);
}

static struct census_group *
group_slot__(struct census_group *groups, uint64_t mask, uint32_t event_plus1,
             const struct tpm_key *gkey, uint32_t hash)
{
    for (uint64_t i = hash;; i++) {
        struct census_group *g = &groups[i & mask];
        if (!g->event_plus1
            || (g->hash == hash && g->event_plus1 == event_plus1
                && tpm_key_equal(&g->gkey, gkey))) {
            return g;
        }
    }
}

static void
groups_grow__(struct census_ctx *c)
{
    uint64_t size = 2 * (c->groups_mask + 1);
    struct census_group *groups = xcalloc(size, sizeof *groups);
    for (uint64_t i = 0; i <= c->groups_mask; i++) {
        const struct census_group *g = &c->groups[i];
        if (g->event_plus1) {
            *group_slot__(groups, size - 1, g->event_plus1, &g->gkey,
                          g->hash) = *g;
        }
    }
    free(c->groups);
    c->groups = groups;
    c->groups_mask = size - 1;
}

/* Flow 'key' is matched against the events, as the monitor matches it at
 * its first packet ('first') or when it comes back after a pause.
 * Returns true if an event that needs per-flow state matched it. */
static bool
activate__(struct census_ctx *c, const struct tpm_key *key, bool first)
{
    bool state = false;

    for (size_t e = 0; e < c->n_events; e++) {
        const struct tpm_event *ev = c->events[e];
        if (!tpm_match_key(&ev->filter, key)) {
            continue;
        }
        state |= tpm_event_needs_tcp_state(ev);
        if (ev->group_5tuple) {
            /* One instance per flow, its one flow listed inline. */
            c->instances[e] += first;
            continue;
        }
        struct tpm_key gkey;
        tpm_key_and(&gkey, key, &ev->group);
        uint32_t hash = group_hash__(e, &gkey);
        struct census_group *g = group_slot__(c->groups, c->groups_mask,
                                              e + 1, &gkey, hash);
        if (!g->event_plus1) {
            g->gkey = gkey;
            g->event_plus1 = e + 1;
            g->hash = hash;
            c->instances[e]++;
            if (++c->n_groups > (c->groups_mask + 1) / 2) {
                groups_grow__(c);
                g = group_slot__(c->groups, c->groups_mask, e + 1, &gkey,
                                 hash);
            }
        }
        g->flows += first;
        g->activations++;
    }
    return state;
}

char *
replay_census(const char *file, struct tpm_event *const *events,
              size_t n_events, uint64_t epoch_ns, uint64_t loops,
              uint64_t max_flows, struct replay_census *census)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    struct census_ctx c = {
        .events = events,
        .n_events = n_events,
        .instances = xcalloc(n_events ? n_events : 1, sizeof *c.instances),
        .flows = xcalloc(1024, sizeof *c.flows),
        .flows_mask = 1023,
        .groups = xcalloc(1024, sizeof *c.groups),
        .groups_mask = 1023,
    };
    char *error = NULL;

    memset(census, 0, sizeof *census);
    pcap_t *pcap = pcap_open_offline_with_tstamp_precision(
        file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!pcap) {
        error = xstrdup(errbuf);
        goto out;
    }
    if (pcap_datalink(pcap) != DLT_EN10MB) {
        error = xasprintf("%s: link type %s, expected Ethernet", file,
                          pcap_datalink_val_to_name(pcap_datalink(pcap)));
        goto out;
    }

    struct pcap_pkthdr *hdr;
    const u_char *data;
    uint64_t last_ns = 0;
    int rc;
    while ((rc = pcap_next_ex(pcap, &hdr, &data)) == 1) {
        /* The replay's clock: an out-of-order packet holds it. */
        uint64_t ns = (uint64_t) hdr->ts.tv_sec * NS_PER_S + hdr->ts.tv_usec;
        ns = last_ns = MAX(ns, last_ns);
        uint64_t epoch = ns / epoch_ns;
        struct tpm_pkt pkt;

        census->packets++;
        if (!tpm_packet_parse_hash(data, MIN(hdr->caplen, FRAME_MAX),
                                   hdr->len, &pkt, NULL)) {
            continue;           /* Never in the flow table. */
        }
        struct census_flow *f = flow_slot__(c.flows, c.flows_mask, &pkt.key,
                                            pkt.hash);
        if (f->used) {
            /* The entry may have been retired, freed or (stale) reused
             * since its last packet two or more epochs ago: the monitor
             * may match the flow again. */
            if (epoch - f->last_epoch >= 2) {
                activate__(&c, &pkt.key, false);
            }
            f->last_epoch = epoch;
            continue;
        }
        if (c.n_flows >= max_flows) {
            census->truncated = true;
            break;
        }
        f->key = pkt.key;
        f->hash = pkt.hash;
        f->last_epoch = epoch;
        f->used = true;
        if (c.n_flows >= c.allocated_hashes) {
            c.allocated_hashes = MAX(1024, 2 * c.allocated_hashes);
            census->hashes = xrealloc(census->hashes, c.allocated_hashes
                                      * sizeof *census->hashes);
        }
        census->hashes[c.n_flows] = pkt.hash;
        if (++c.n_flows > (c.flows_mask + 1) / 2) {
            flows_grow__(&c);
        }
        census->state_flows += activate__(&c, &pkt.key, true);
    }
    if (rc == -1) {
        error = xasprintf("%s: %s", file, pcap_geterr(pcap));
        goto out;
    }

    census->flows = c.n_flows;
    for (size_t e = 0; e < n_events; e++) {
        census->instances += c.instances[e];
        census->max_instances = MAX(census->max_instances, c.instances[e]);
    }
    for (uint64_t i = 0; i <= c.groups_mask; i++) {
        const struct census_group *g = &c.groups[i];
        /* Each pass of --loop may match every flow again. */
        uint64_t a = g->activations * loops;
        if (g->event_plus1 && a >= 2) {
            /* The first append is the inline item; then a chunk per 64,
             * and never more chunks than flows. */
            census->chunks += MIN((a - 1 + 63) / 64, g->flows);
        }
    }

out:
    if (pcap) {
        pcap_close(pcap);
    }
    free(c.instances);
    free(c.flows);
    free(c.groups);
    if (error) {
        replay_census_destroy(census);
    }
    return error;
}

void
replay_census_destroy(struct replay_census *census)
{
    free(census->hashes);
    census->hashes = NULL;
}

/* Returns the longest cluster (run of consecutive used slots, wrapping
 * around) of a linear-probing table of 'size' slots into which the 'n'
 * flows of 'hashes' are inserted, as tpm_flow_table_insert() places them
 * when every flow is present at once. */
static uint32_t
longest_cluster__(const uint32_t *hashes, uint64_t n, uint64_t size)
{
    uint8_t *used = xcalloc(size / 8, 1);
    uint64_t mask = size - 1;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = hashes[i] & mask;
        while (used[j / 8] & (1u << (j % 8))) {
            j = (j + 1) & mask;
        }
        used[j / 8] |= 1u << (j % 8);
    }

    /* Start after a free slot, so that no cluster is cut in two. */
    uint64_t first = 0;
    while (first < size && used[first / 8] & (1u << (first % 8))) {
        first++;
    }
    uint32_t longest = first < size ? 0 : (uint32_t) MIN(size, UINT32_MAX);
    uint32_t run = 0;
    for (uint64_t k = 1; first < size && k <= size; k++) {
        uint64_t j = (first + k) & mask;
        run = used[j / 8] & (1u << (j % 8)) ? run + 1 : 0;
        longest = MAX(longest, run);
    }
    free(used);
    return longest;
}

/* The flow table keeps a flow within 'probe_limit' slots of its home slot
 * (tpm/flow-table.h); a new flow that finds every slot of its window held
 * by an entry it may not take (a recent one, or one with TCP state) evicts
 * one, losing its statistics.  Only entries of the capture's own flows
 * hold slots so, with every flow present at once, a flow never probes
 * further than the end of the cluster its home slot is in, whatever the
 * order in which the flows arrive and leave: the size is right when the
 * longest cluster of that placement, with the flows' own hashes, fits in
 * the window.  How long clusters get depends on the load: measured with
 * tpm_key_hash() on 10^5 to 10^7 flows, the longest is 44 at a load of
 * 0.48 (10^6 flows: a window of 32 is too short), 18 to 27 at 0.29 to
 * 0.38, 8 to 18 below a quarter.  So the size starts at twice the flows
 * and is doubled until the clusters fit: two and a half to four times
 * the flows with the default window. */
uint32_t
replay_flow_table_size(const struct replay_census *census,
                       uint32_t probe_limit, uint32_t min_size,
                       uint32_t max_size, uint32_t *longest)
{
    uint64_t size = MAX(min_size, 64);

    while (size < 2 * census->flows) {
        size *= 2;
    }
    *longest = 0;
    for (; size <= max_size; size *= 2) {
        *longest = longest_cluster__(census->hashes, census->flows, size);
        if (*longest <= probe_limit) {
            return size;
        }
    }
    return 0;
}
