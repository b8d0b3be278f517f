/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DoS cost model (paper section 6, "DoS resiliency", equations 1-4),
 * profiled on this machine against this build.
 *
 * tpm_dos_profile() measures, with rdtsc on a private monitor built with
 * the caller's parameters and clones of the caller's events, what each
 * packet-processing operation costs:
 *
 *   pkt_pending   a packet of a flow below the DoS threshold (the paper's
 *                 T_P per packet: parse, hash, probe, insert or find,
 *                 filter-table count); every packet a new flow, as in a
 *                 SYN flood
 *   match         a flow passing the threshold: matching against the
 *                 trigger index and entering the triggers' flow lists
 *                 (the paper's Match(#patterns), for the installed set)
 *   pkt_matched   a packet of a matched flow (T_P plus the paper's Update)
 *   sweep_item    one flow of one trigger's list in a sweep (the paper's
 *                 Sweep)
 *
 * Each monitor's flow table is first filled with other such flows (in
 * the epoch before, swept), because under a flood of new flows the table
 * is full: every insert probes a full window and evicts.  The fill stops
 * short of the trigger instances and list chunks the measured flows
 * need.
 *
 * The calibration flows are drawn from the events' own filters in turn
 * (random values in the wildcarded fields); 'triggers_per_flow' is what
 * they fed on average, the cost of good flows.  An attacker who knows the
 * design (paper section 5.6) aims at the filter whose flows feed the most
 * triggers: the profile finds that event ('attack_event', from 64 flows
 * of each) and measures 'attack_match' and 'attack_triggers_per_flow' on
 * flows drawn from its filter alone; attack flows are costed with those.
 * The switch's own cost per packet (receive, classify, send) is not the
 * monitor's to measure: callers inside a switch pass it
 * as switch(bytes) = switch_pkt + switch_byte * bytes, others leave 0.
 * tpm_dos_switch_fit() fits that line on the switch's samples: the
 * cycles, packets and bytes of its saturated polling iterations, summed
 * per frame-size bucket (tpm_dos_size_bucket()); the OVS glue (ovs-
 * patches/tpm-ovs-dos.c) samples its PMDs' saturated iterations.
 *
 * tpm_dos_predict() turns the costs into the fraction of one core that a
 * given attack and good traffic would take at a given threshold:
 *
 *   load = [ rate_dos * switch(dos_bytes) + rate_good * switch(good_bytes)
 *            + packets below the threshold * pkt_pending
 *            + packets of matched flows * pkt_matched
 *            + flows passing * match
 *            + 1.5 * flows passing * triggers_per_flow * sweep_item ] / hz
 * (match and triggers_per_flow the attack's for attack flows)
 *
 * with, per second, for good flows of 'pkts_per_flow' packets of
 * 'good_bytes' (they pass at packet ceil(threshold / good_bytes), or never
 * if they are smaller than the threshold), and attack packets of
 * 'dos_bytes':
 *   - threshold attack: flows of exactly the threshold (at least one
 *     packet), rate_dos * dos_bytes / max(threshold, dos_bytes) passing;
 *   - SYN attack: one packet per flow, passing only if the packet is the
 *     threshold's size or more, or as a false positive of the filter
 *     table: a counter takes N ~ Poisson(lambda) attack packets per window
 *     of 'dos_window' epochs (lambda = attack packets per second * window
 *     / dos_table_size), plus the bytes good flows leave there, and a flow
 *     passes when its packet takes the counter to the threshold.  With
 *     'dos_clear_on_pass' a pass restarts the counter, so the passes per
 *     window are floor(N / k) for k packets per threshold; without, every
 *     packet from the k-th on passes.  This is why the paper's SYN line
 *     sits above one packet (its section 7.2); tests/test-tpm.c checks the
 *     sum against a monitor.
 * The factor 1.5 is the paper's: a sweep in steps also meets flows of the
 * next epoch.
 *
 * Thread-safety: tpm_dos_profile() uses only its private monitors (their
 * huge-page fallbacks are logged at debug level) and may
 * run in any thread (it takes tens of milliseconds of one CPU); the rest
 * are pure functions.
 */
#ifndef TPM_DOS_MODEL_H
#define TPM_DOS_MODEL_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tpm_event;
struct tpm_params;

struct tpm_dos_costs {
    double hz;                  /* TSC cycles per second. */
    double pkt_pending;         /* Cycles, see above. */
    double pkt_matched;
    double match;
    double sweep_item;
    double triggers_per_flow;
    double attack_match;        /* Matching, and triggers per flow, for */
    double attack_triggers_per_flow;  /* flows aimed as an attacker would
                                 * (0: as the mix above). */
    uint32_t attack_event;      /* Index in 'evs' of that aim. */
    double switch_pkt;          /* Set by the caller (0: not known): the */
    double switch_byte;         /* switch's cycles per packet are
                                 * switch_pkt + switch_byte * bytes. */
    uint32_t n_flows;           /* Calibration flows per round. */
    uint32_t n_events;
    uint32_t n_patterns;        /* Distinct filter masks. */
};

/* Measures 'c' for a monitor with parameters 'p' (the DoS threshold and
 * sweep budget are the profile's own) and the 'n_evs' events 'evs' (at
 * least one), with 'n_flows' flows per round (at most a quarter of the
 * flow table is used) over 'rounds' rounds, keeping the medians.  Leaves
 * c->switch_pkt and c->switch_byte at 0.  Returns NULL, or a malloc()'d
 * error message. */
char *tpm_dos_profile(const struct tpm_params *p,
                      struct tpm_event *const *evs, size_t n_evs,
                      uint32_t n_flows, int rounds,
                      struct tpm_dos_costs *c);

struct tpm_dos_traffic {
    double rate_dos;            /* Attack packets per second. */
    double rate_good;           /* Good packets per second. */
    uint32_t dos_bytes;         /* Attack packet size (64). */
    uint32_t good_bytes;        /* Good packet size (1500). */
    uint32_t pkts_per_flow;     /* Good packets per flow (10). */
    bool syn;                   /* SYN attack, else threshold attack. */
};

/* Fills 't' with the defaults above and no traffic. */
void tpm_dos_traffic_init(struct tpm_dos_traffic *t);

struct tpm_dos_load {
    double load;                /* Fraction of one core: feasible <= 1. */
    double switch_share;        /* Parts of 'load'. */
    double pending_share;
    double matched_share;
    double match_share;
    double sweep_share;
    double dos_flows_passing;   /* Attack flows matched per second. */
    double good_flows_passing;  /* Good flows matched per second. */
    bool good_unmonitored;      /* Good flows are below the threshold. */
};

/* Predicts the load of traffic 't' on a monitor with parameters 'p' (its
 * epoch, dos_window and dos_table_size) and costs 'c' at DoS threshold
 * 'threshold' bytes (0: off). */
void tpm_dos_predict(const struct tpm_dos_costs *c,
                     const struct tpm_params *p,
                     const struct tpm_dos_traffic *t, uint32_t threshold,
                     struct tpm_dos_load *out);

/* Returns the smallest threshold in [0, max] (bytes) whose predicted load
 * is at most 'budget' (1: the whole core), or UINT32_MAX if there is none
 * (the load at 'max', stored in '*out', is still over). */
uint32_t tpm_dos_min_threshold(const struct tpm_dos_costs *c,
                               const struct tpm_params *p,
                               const struct tpm_dos_traffic *t,
                               double budget, uint32_t max,
                               struct tpm_dos_load *out);

/* The switch's cost per frame size.
 *
 * Samples are kept in TPM_DOS_SIZE_BUCKETS buckets by mean frame size:
 * < 128, < 256, < 512, < 1024 bytes, and the rest. */
#define TPM_DOS_SIZE_BUCKETS 5

/* The bucket of a mean frame size of 'bytes'. */
static inline int
tpm_dos_size_bucket(uint64_t bytes)
{
    int b = 0;
    for (uint64_t edge = 128; b < TPM_DOS_SIZE_BUCKETS - 1 && bytes >= edge;
         edge *= 2) {
        b++;
    }
    return b;
}

/* One bucket's samples: the switch's cycles (the monitor's taken out),
 * over 'packets' packets of 'bytes' bytes in all. */
struct tpm_dos_switch_sample {
    uint64_t cycles;
    uint64_t packets;
    uint64_t bytes;
};

/* A bucket with fewer packets is left out of the fit. */
#define TPM_DOS_SWITCH_MIN_PACKETS 1024

/* Fits the line cycles = '*pkt' + '*byte' * bytes per packet to the 'n'
 * buckets 's' (each a point at its mean frame size and mean cycles per
 * packet), by least squares weighted by their packets, over the buckets
 * with at least TPM_DOS_SWITCH_MIN_PACKETS packets.  With one bucket, or
 * sizes too close to tell a slope (a variance of at most 32 * 32 bytes
 * squared), or a slope that is not positive, '*byte' is 0 and '*pkt' the
 * mean.  Returns the number of buckets fitted; with none, both are 0 (the
 * caller knows better, e.g. the mean over every busy iteration). */
int tpm_dos_switch_fit(const struct tpm_dos_switch_sample *s, size_t n,
                       double *pkt, double *byte);

#endif /* dos-model.h */
