/* SPDX-License-Identifier: Apache-2.0 */
#include "dos-model.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "event.h"
#include "hugealloc.h"
#include "packet.h"
#include "tpm-private.h"
#include "tpm.h"
#include "util.h"

#define PROFILE_FRAME_MAX 128   /* Room for a 64-byte IPv6/TCP frame. */
#define PROFILE_WIRE_BYTES 64

static uint64_t
rng_next__(uint64_t *s)
{
    /* splitmix64. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Stores in 'key' a random key that matches 'ev''s filter: the filter's
 * fields as given, random values in the others (IPv4 and UDP where the
 * filter leaves the version or protocol open). */
static void
key_from_filter__(struct tpm_key *key, const struct tpm_event *ev,
                  uint64_t *rng)
{
    const struct tpm_match *m = &ev->filter;
    memset(key, 0, sizeof *key);
    key->ipver = m->mask.ipver ? m->key.ipver : 4;
    key->proto = m->mask.proto ? m->key.proto : 17;
    int words = key->ipver == 4 ? 1 : 4;
    for (int w = 0; w < words; w++) {
        uint64_t r = rng_next__(rng);
        key->src[w] = (m->key.src[w] & m->mask.src[w])
                      | ((uint32_t) r & ~m->mask.src[w]);
        key->dst[w] = (m->key.dst[w] & m->mask.dst[w])
                      | ((uint32_t) (r >> 32) & ~m->mask.dst[w]);
    }
    uint64_t r = rng_next__(rng);
    uint16_t sport = (m->key.sport & m->mask.sport)
                     | ((uint16_t) r & ~m->mask.sport);
    uint16_t dport = (m->key.dport & m->mask.dport)
                     | ((uint16_t) (r >> 16) & ~m->mask.dport);
    switch (key->proto) {
    case 6: case 17: case 132:
        key->sport = sport;
        key->dport = dport;
        break;
    case 1: case 58:
        key->sport = sport & 0xff;
        key->dport = dport & 0xff;
        break;
    }
}

struct profile_round {
    double pending, pass, matched, sweep_item, tpf;
    double attack_pass, attack_tpf;
};

static struct tpm *
profile_monitor__(const struct tpm_params *p, uint32_t threshold,
                  struct tpm_event *const *evs, size_t n_evs, char **errp)
{
    struct tpm_params q = *p;
    q.dos_threshold = threshold;
    q.sweep_budget_ns = 0;
    /* Nobody reads this monitor's reports: a sweep that waited for room
     * in the report ring would never end (the caller's knobs may ask for
     * waiting, as ovs-vswitchd's do). */
    q.sweep_waits_for_reports = false;
    struct tpm *tpm = tpm_create(&q, errp);
    if (!tpm) {
        return NULL;
    }
    for (size_t i = 0; i < n_evs; i++) {
        struct tpm_event *copy = tpm_event_clone(evs[i]);
        char *error = tpm_event_add(tpm, copy, i + 1);
        if (error) {
            *errp = xasprintf("event %s: %s", evs[i]->name, error);
            free(error);
            tpm_event_destroy(copy);
            tpm_destroy(tpm);
            return NULL;
        }
    }
    return tpm;
}

/* Feeds 'frames' to 'tpm' in batches of TPM_BATCH_MAX; returns the
 * cycles per frame. */
static double
profile_feed__(struct tpm *tpm, const struct tpm_frame *frames, uint32_t n)
{
    uint64_t cycles = 0;
    for (uint32_t i = 0; i < n; i += TPM_BATCH_MAX) {
        int k = MIN(TPM_BATCH_MAX, n - i);
        uint64_t t0 = tpm_rdtsc();
        tpm_process_batch(tpm, &frames[i], k);
        cycles += tpm_rdtsc() - t0;
    }
    return (double) cycles / n;
}

static int
cmp_double__(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;
    return a < b ? -1 : a > b;
}

static double
median__(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double__);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Builds 'n' frames of new flows into 'bufs' and 'frames': keys drawn
 * from the filter of event 'only', or in turn from every event's if
 * 'only' is SIZE_MAX. */
static void
make_frames__(struct tpm_event *const *evs, size_t n_evs, size_t only,
              uint32_t n, uint64_t *rng, uint8_t *bufs,
              struct tpm_frame *frames)
{
    for (uint32_t i = 0; i < n; i++) {
        struct tpm_key key;
        key_from_filter__(&key, evs[only != SIZE_MAX ? only : i % n_evs],
                          rng);
        uint8_t *b = bufs + (size_t) i * PROFILE_FRAME_MAX;
        uint32_t len = tpm_frame_build(b, PROFILE_FRAME_MAX, &key,
                                       PROFILE_WIRE_BYTES - 4);
        frames[i].data = b;
        frames[i].caplen = len;
        frames[i].wirelen = len + 4;
    }
}

/* Returns true if 'n' more new flows, each matching every event at
 * worst, fit in 'tpm''s trigger instances and flow-list chunks (so the
 * fill leaves room for the flows measured after it). */
static bool
fill_room__(const struct tpm *tpm, uint32_t n)
{
    uint64_t need = (uint64_t) n * tpm->n_evs;
    if (tpm->n_children + need > tpm->p.max_triggers
        || tpm->st.chunks_used + need / 32 + tpm->n_evs
           > tpm->p.max_chunks) {
        return false;
    }
    for (uint32_t i = 0; i < tpm->evs_hwm; i++) {
        if (tpm->evs[i].n_children + n > tpm->p.max_children) {
            return false;
        }
    }
    return true;
}

/* Fills 'tpm''s flow table with new flows (drawn as make_frames__()
 * does) in the epoch before time 't', then moves it to 't' and completes
 * that epoch's sweep: under a flood of new flows the table is full, and
 * every insert probes and evicts as it does then.  The fill stops 'n'
 * flows short of the table, and before it could take the trigger
 * instances or list chunks that 'n' flows measured after it need. */
static void
fill__(struct tpm *tpm, const struct tpm_params *p,
       struct tpm_event *const *evs, size_t n_evs, size_t only, uint32_t n,
       uint64_t *rng, uint8_t *bufs, struct tpm_frame *frames, uint64_t t)
{
    tpm_advance(tpm, t - p->epoch_ns);
    uint32_t step = MAX(n / 4, 1);
    for (uint32_t done = 0; done + n < p->flow_table_size; done += step) {
        if (!fill_room__(tpm, step + n)) {
            break;
        }
        make_frames__(evs, n_evs, only, step, rng, bufs, frames);
        profile_feed__(tpm, frames, step);
    }
    tpm_advance(tpm, t);
    while (tpm_sweep_step(tpm, 0)) {
        continue;
    }
}

/* Feeds new flows 'frames' to 'tpm' (threshold 1: each passes); returns
 * the cycles per flow and stores in '*tpf' the triggers each fed. */
static double
profile_pass__(struct tpm *tpm, const struct tpm_frame *frames, uint32_t n,
               double *tpf)
{
    struct tpm_stats s0, s1;
    tpm_get_stats(tpm, &s0);
    double cycles = profile_feed__(tpm, frames, n);
    tpm_get_stats(tpm, &s1);
    uint64_t passed = s1.dos_passed - s0.dos_passed;
    *tpf = passed ? (double) (s1.matches - s0.matches) / passed : 0;
    return cycles;
}

/* Returns the event whose filter's flows feed the most triggers (the
 * attacker's best aim), from 'n' flows of each on one monitor. */
static size_t
worst_event__(const struct tpm_params *p, struct tpm_event *const *evs,
              size_t n_evs, uint32_t n, uint64_t *rng, uint8_t *bufs,
              struct tpm_frame *frames, char **errp)
{
    struct tpm *tpm = profile_monitor__(p, 1, evs, n_evs, errp);
    if (!tpm) {
        return 0;
    }
    tpm_advance(tpm, 1000 * p->epoch_ns);
    size_t worst = 0;
    double worst_tpf = -1;
    for (size_t e = 0; e < n_evs; e++) {
        double tpf;
        make_frames__(evs, n_evs, e, n, rng, bufs, frames);
        profile_pass__(tpm, frames, n, &tpf);
        if (tpf > worst_tpf) {
            worst_tpf = tpf;
            worst = e;
        }
    }
    tpm_destroy(tpm);
    return worst;
}

/* One round on fresh monitors and fresh flows. */
static char *
profile_round__(const struct tpm_params *p, struct tpm_event *const *evs,
                size_t n_evs, size_t attack_ev, uint32_t n_flows,
                uint64_t *rng, uint8_t *bufs, struct tpm_frame *frames,
                struct profile_round *out, uint32_t *n_patterns)
{
    char *error = NULL;
    struct tpm *below = profile_monitor__(p, UINT32_MAX, evs, n_evs, &error);
    if (!below) {
        return error;
    }
    struct tpm *pass = profile_monitor__(p, 1, evs, n_evs, &error);
    if (!pass) {
        tpm_destroy(below);
        return error;
    }
    *n_patterns = pass->index.n_patterns;

    uint64_t t = 1000 * p->epoch_ns;
    fill__(below, p, evs, n_evs, SIZE_MAX, n_flows, rng, bufs, frames, t);
    fill__(pass, p, evs, n_evs, SIZE_MAX, n_flows, rng, bufs, frames, t);
    make_frames__(evs, n_evs, SIZE_MAX, n_flows, rng, bufs, frames);
    out->pending = profile_feed__(below, frames, n_flows);

    out->pass = profile_pass__(pass, frames, n_flows, &out->tpf);
    out->matched = profile_feed__(pass, frames, n_flows);

    /* The sweep of that epoch, unbounded, timed step by step. */
    tpm_advance(pass, t + p->epoch_ns);
    struct tpm_stats s0, s1;
    tpm_get_stats(pass, &s0);
    uint64_t cycles = 0;
    bool more;
    do {
        uint64_t t0 = tpm_rdtsc();
        more = tpm_sweep_step(pass, 0);
        cycles += tpm_rdtsc() - t0;
    } while (more);
    tpm_get_stats(pass, &s1);
    uint64_t items = s1.sweep_flows - s0.sweep_flows;
    out->sweep_item = items ? (double) cycles / items : 0;
    tpm_destroy(pass);

    /* The attacker's flows: all from the filter of 'attack_ev', on a
     * fresh monitor (the 'below' one is done with). */
    tpm_destroy(below);
    pass = profile_monitor__(p, 1, evs, n_evs, &error);
    if (!pass) {
        return error;
    }
    fill__(pass, p, evs, n_evs, attack_ev, n_flows, rng, bufs, frames, t);
    make_frames__(evs, n_evs, attack_ev, n_flows, rng, bufs, frames);
    out->attack_pass = profile_pass__(pass, frames, n_flows,
                                      &out->attack_tpf);
    tpm_destroy(pass);
    return NULL;
}

char *
tpm_dos_profile(const struct tpm_params *p, struct tpm_event *const *evs,
                size_t n_evs, uint32_t n_flows, int rounds,
                struct tpm_dos_costs *c)
{
    memset(c, 0, sizeof *c);
    if (!n_evs) {
        return xstrdup("no event installed: the profile matches flows "
                       "against the installed events");
    }
    n_flows = MIN(n_flows, p->flow_table_size / 4);
    if (n_flows < 64) {
        return xasprintf("%"PRIu32" flows per round: at least 64 needed "
                         "(at most a quarter of the flow table)", n_flows);
    }
    rounds = MAX(1, MIN(rounds, 15));

    uint8_t *bufs = xmalloc((size_t) n_flows * PROFILE_FRAME_MAX);
    struct tpm_frame *frames = xcalloc(n_flows, sizeof *frames);
    double pending[15], pass[15], matched[15], item[15], tpf[15];
    double a_pass[15], a_tpf[15];
    uint64_t rng = 0x5eed;
    char *error = NULL;
    bool quiet = tpm_huge_set_quiet(true);
    size_t attack_ev = worst_event__(p, evs, n_evs, MIN(n_flows, 64), &rng,
                                     bufs, frames, &error);
    for (int r = 0; r < rounds && !error; r++) {
        struct profile_round pr;
        memset(&pr, 0, sizeof pr);
        error = profile_round__(p, evs, n_evs, attack_ev, n_flows, &rng,
                                bufs, frames, &pr, &c->n_patterns);
        pending[r] = pr.pending;
        pass[r] = pr.pass - pr.pending;
        matched[r] = pr.matched;
        item[r] = pr.sweep_item;
        tpf[r] = pr.tpf;
        a_pass[r] = pr.attack_pass - pr.pending;
        a_tpf[r] = pr.attack_tpf;
    }
    tpm_huge_set_quiet(quiet);
    free(bufs);
    free(frames);
    if (error) {
        return error;
    }

    c->hz = tpm_tsc_per_us() * 1e6;
    c->pkt_pending = median__(pending, rounds);
    c->match = MAX(0, median__(pass, rounds));
    c->pkt_matched = median__(matched, rounds);
    c->sweep_item = median__(item, rounds);
    c->triggers_per_flow = median__(tpf, rounds);
    c->attack_match = MAX(0, median__(a_pass, rounds));
    c->attack_triggers_per_flow = median__(a_tpf, rounds);
    c->attack_event = attack_ev;
    c->n_flows = n_flows;
    c->n_events = n_evs;
    return NULL;
}

void
tpm_dos_traffic_init(struct tpm_dos_traffic *t)
{
    memset(t, 0, sizeof *t);
    t->dos_bytes = 64;
    t->good_bytes = 1500;
    t->pkts_per_flow = 10;
    t->syn = true;
}

/* Returns the expected passes per counter and window for N ~
 * Poisson('lambda') attack packets, g packets' worth of other bytes, and
 * k packets per pass: floor((N + g) / k) if a pass clears the counter,
 * else max(0, N + g - k + 1) (every packet from the k-th on). */
static double
poisson_passes__(double lambda, double g, double k, bool clear)
{
    if (lambda > 1e5) {
        /* N is close to normal; floor() loses (k - 1) / 2k on average. */
        return clear ? MAX(0, (lambda + g) / k - (k - 1) / (2 * k))
                     : MAX(0, lambda + g - k + 1);
    }
    double sum = 0, pmf = exp(-lambda);
    double n_max = lambda + 12 * sqrt(lambda) + 30;
    for (double n = 0; n <= n_max; n++) {
        if (n > 0) {
            pmf *= lambda / n;
        }
        sum += pmf * (clear ? floor((n + g) / k) : MAX(0, n + g - k + 1));
    }
    return sum;
}

/* The fraction of a SYN flood's flows (one packet each, below the
 * threshold 'th') that the filter table lets pass as false positives.  A
 * counter takes N ~ Poisson(lambda) attack packets per window, lambda =
 * attack packets per second * window / counters, plus g packets' worth of
 * bytes that good flows leave there (their bytes up to and including the
 * packet that passes, all of them if they never pass; none if a pass
 * clears the counter and they pass).  A flow passes when its packet takes
 * the counter to k = ceil(th / dos_bytes) packets or more. */
static double
syn_pass_fraction__(const struct tpm_params *p,
                    const struct tpm_dos_traffic *t, double th)
{
    double dos_bytes = MAX(t->dos_bytes, 1);
    double good_bytes = MAX(t->good_bytes, 1);
    double ppf = MAX(t->pkts_per_flow, 1);
    double window_s = (double) p->dos_window * p->epoch_ns / 1e9;
    double lambda = t->rate_dos * window_s / p->dos_table_size;
    if (lambda <= 0) {
        return 0;
    }
    bool good_pass = th <= ppf * good_bytes;
    double g = 0;
    if (!p->dos_clear_on_pass || !good_pass) {
        double counted = good_pass ? ceil(th / good_bytes) : ppf;
        g = t->rate_good / ppf * counted * good_bytes * window_s
            / p->dos_table_size / dos_bytes;
    }
    double passes = poisson_passes__(lambda, g, ceil(th / dos_bytes),
                                     p->dos_clear_on_pass);
    /* Shared by attack and good bytes in proportion. */
    return MIN(1, passes / (lambda + g));
}

void
tpm_dos_predict(const struct tpm_dos_costs *c, const struct tpm_params *p,
                const struct tpm_dos_traffic *t, uint32_t threshold,
                struct tpm_dos_load *out)
{
    double th = threshold;
    double dos_bytes = MAX(t->dos_bytes, 1);
    double good_bytes = MAX(t->good_bytes, 1);
    double ppf = MAX(t->pkts_per_flow, 1);

    memset(out, 0, sizeof *out);

    /* Good flows: pass at packet k = ceil(th / good_bytes). */
    double good_pend = 0, good_matched = t->rate_good;
    out->good_flows_passing = t->rate_good / ppf;
    if (threshold && th > ppf * good_bytes) {
        out->good_unmonitored = true;
        out->good_flows_passing = 0;
        good_pend = t->rate_good;
        good_matched = 0;
    } else if (threshold) {
        double k = ceil(th / good_bytes);
        good_pend = t->rate_good * (k - 1) / ppf;
        good_matched = t->rate_good - good_pend;
    }

    /* Attack flows. */
    double dos_pass;
    if (!threshold || (t->syn && dos_bytes >= th)) {
        dos_pass = t->rate_dos;
    } else if (t->syn) {
        dos_pass = t->rate_dos * syn_pass_fraction__(p, t, th);
    } else {
        dos_pass = t->rate_dos * dos_bytes / MAX(th, dos_bytes);
    }
    /* The packet that passes is processed as matched. */
    double dos_pend = t->rate_dos - dos_pass;
    out->dos_flows_passing = dos_pass;

    double hz = c->hz > 0 ? c->hz : 1;
    out->switch_share = (t->rate_dos * (c->switch_pkt
                                        + c->switch_byte * dos_bytes)
                         + t->rate_good * (c->switch_pkt
                                           + c->switch_byte * good_bytes))
                        / hz;
    out->pending_share = (good_pend + dos_pend) * c->pkt_pending / hz;
    out->matched_share = (good_matched + dos_pass) * c->pkt_matched / hz;
    /* Attack flows cost what flows of the attacker's best aim cost, good
     * flows what the events' mix costs. */
    double a_match = c->attack_triggers_per_flow ? c->attack_match
                                                 : c->match;
    double a_tpf = c->attack_triggers_per_flow ? c->attack_triggers_per_flow
                                               : c->triggers_per_flow;
    out->match_share = (dos_pass * a_match
                        + out->good_flows_passing * c->match) / hz;
    out->sweep_share = 1.5 * (dos_pass * a_tpf
                              + out->good_flows_passing
                                * c->triggers_per_flow)
                       * c->sweep_item / hz;
    out->load = out->switch_share + out->pending_share + out->matched_share
                + out->match_share + out->sweep_share;
}

uint32_t
tpm_dos_min_threshold(const struct tpm_dos_costs *c,
                      const struct tpm_params *p,
                      const struct tpm_dos_traffic *t, double budget,
                      uint32_t max, struct tpm_dos_load *out)
{
    tpm_dos_predict(c, p, t, 0, out);
    if (out->load <= budget) {
        return 0;
    }
    tpm_dos_predict(c, p, t, max, out);
    if (out->load > budget) {
        return UINT32_MAX;
    }
    /* The load does not grow with the threshold: bisect on (lo, hi]. */
    uint32_t lo = 0, hi = max;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        tpm_dos_predict(c, p, t, mid, out);
        if (out->load <= budget) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    tpm_dos_predict(c, p, t, hi, out);
    return hi;
}

int
tpm_dos_switch_fit(const struct tpm_dos_switch_sample *s, size_t n,
                   double *pkt, double *byte)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int points = 0;
    for (size_t b = 0; b < n; b++) {
        if (s[b].packets < TPM_DOS_SWITCH_MIN_PACKETS) {
            continue;
        }
        double w = s[b].packets, x = (double) s[b].bytes / s[b].packets;
        double y = (double) s[b].cycles / s[b].packets;
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
        points++;
    }
    *pkt = 0;
    *byte = 0;
    if (!points) {
        return 0;
    }
    double mx = sx / sw, my = sy / sw;
    double var = sxx / sw - mx * mx, cov = sxy / sw - mx * my;
    *pkt = my;
    if (points > 1 && var > 32 * 32 && cov > 0) {
        *byte = cov / var;
        *pkt = my - *byte * mx;
    }
    return points;
}
