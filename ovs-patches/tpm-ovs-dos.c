/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DoS commands (docs/operations.md, "DoS threshold"): tpm/dos-
 * threshold sets the live threshold, tpm/dos-profile measures the model's
 * costs with the installed events, tpm/dos-model answers with the
 * smallest threshold that keeps the PMD within its cycles; the switch's
 * own cost per packet and byte is fitted (tpm_dos_switch_fit()) on the
 * PMDs' samples.
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "timeval.h"
#include "unixctl.h"

#include "clock.h"
#include "tpm-parse.h"

VLOG_DEFINE_THIS_MODULE(tpm_dos);

/* The DoS model's latest profile (tpm/dos-profile). */
static struct tpm_dos_costs dos_costs;
static bool dos_costs_valid;
static uint64_t dos_costs_events;  /* Signature of the events profiled. */
static long long int dos_costs_when;

/* Stores in '*sw' and '*mon' the cycles per packet that PMD 'p' spent in
 * the switch and in the monitor, over its sampled busy iterations, and in
 * '*rx' the part of '*mon' spent on the packets themselves (phase 1; the
 * rest went to sweep steps and commands).  Returns false if none was
 * sampled yet. */
bool
tpm_ovs_pmd_cycles_per_packet(struct tpm_pmd *p, double *sw, double *mon,
                              double *rx)
{
    uint64_t cycles, monitor, in_rx, packets;
    atomic_read_relaxed(&p->busy_cycles, &cycles);
    atomic_read_relaxed(&p->busy_monitor, &monitor);
    atomic_read_relaxed(&p->busy_rx, &in_rx);
    atomic_read_relaxed(&p->busy_packets, &packets);
    if (!packets) {
        return false;
    }
    *mon = (double) monitor / packets;
    *rx = (double) in_rx / packets;
    *sw = cycles > monitor ? (double) (cycles - monitor) / packets : 0;
    return true;
}

/* The switch's cycles per packet, over every PMD's samples (0 if none). */
static double
switch_cycles_per_packet(void)
{
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    uint64_t cycles = 0, monitor = 0, packets = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c, m, k;
        atomic_read_relaxed(&parts[i]->busy_cycles, &c);
        atomic_read_relaxed(&parts[i]->busy_monitor, &m);
        atomic_read_relaxed(&parts[i]->busy_packets, &k);
        cycles += c;
        monitor += m;
        packets += k;
    }
    free(parts);
    return packets && cycles > monitor
           ? (double) (cycles - monitor) / packets : 0;
}

/* How the switch term of the DoS model was obtained. */
static int dos_switch_sizes;    /* Frame-size buckets fitted (0: none). */
static bool dos_switch_given;   /* switch-pkt= or switch-byte= given. */
static char *dos_attack_event;  /* The profile's attacker's aim. */

/* Sets c->switch_pkt and c->switch_byte from the PMDs' samples: the
 * line of tpm_dos_switch_fit() over the saturated iterations' frame-size
 * buckets (the model is about a PMD at its limit, where rx batches are
 * full and the per-iteration costs are spread over them); with no bucket
 * to fit, the figure of all busy iterations.  Main thread. */
static void
switch_cost_fit(struct tpm_dos_costs *c)
{
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    struct tpm_dos_switch_sample s[TPM_DOS_SIZE_BUCKETS];
    memset(s, 0, sizeof s);
    for (size_t b = 0; b < TPM_DOS_SIZE_BUCKETS; b++) {
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            atomic_read_relaxed(&parts[i]->sat[b].cycles, &v);
            s[b].cycles += v;
            atomic_read_relaxed(&parts[i]->sat[b].packets, &v);
            s[b].packets += v;
            atomic_read_relaxed(&parts[i]->sat[b].bytes, &v);
            s[b].bytes += v;
        }
    }
    free(parts);
    dos_switch_sizes = tpm_dos_switch_fit(s, TPM_DOS_SIZE_BUCKETS,
                                          &c->switch_pkt, &c->switch_byte);
    if (!dos_switch_sizes) {
        c->switch_pkt = switch_cycles_per_packet();
    }
}

void
tpm_unixctl_dos_threshold(struct unixctl_conn *conn, int argc,
                          const char *argv[], void *aux OVS_UNUSED)
{
    uint32_t old = tpm_ovs_knobs.params.dos_threshold;
    uint64_t v;
    if (argc > 1) {
        if (!tpm_parse_uint(argv[1], 0, UINT32_MAX, &v)) {
            char *msg = xasprintf("\"%s\": expected bytes, an integer in "
                                  "[0, %"PRIu32"] (0: off)", argv[1],
                                  UINT32_MAX);
            unixctl_command_reply_error(conn, msg);
            free(msg);
            return;
        }
        tpm_ovs_dos_threshold_set(v, "tpm/dos-threshold");
    }
    const char *by;
    tpm_ovs_dos_threshold(&by);
    char *msg = argc > 1
        ? xasprintf("DoS threshold: %"PRIu32" bytes (was %"PRIu32")",
                    tpm_ovs_knobs.params.dos_threshold, old)
        : xasprintf("DoS threshold: %"PRIu32" bytes (set by %s)",
                    tpm_ovs_knobs.params.dos_threshold, by);
    unixctl_command_reply(conn, msg);
    free(msg);
}

/* A signature of the installed host events, to tell whether the DoS
 * profile is still theirs. */
static uint64_t
host_events_signature(void)
{
    uint64_t sig = ovs_list_size(&tpm_ovs_host_events);
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        sig = sig * 0x100000001b3ULL ^ he->id;
    }
    return sig;
}

/* Profiles the DoS model's costs with the installed events.  Returns NULL
 * or an error (caller frees). */
static char *
dos_profile_run(uint32_t n_flows, int rounds)
{
    size_t n = ovs_list_size(&tpm_ovs_host_events), i = 0;
    struct tpm_event **evs = xcalloc(MAX(n, 1), sizeof *evs);
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        evs[i++] = he->def;
    }
    struct tpm_dos_costs c;
    char *error = tpm_dos_profile(&tpm_ovs_knobs.params, evs, n, n_flows,
                                  rounds,
                                  &c);
    free(evs);
    if (!error) {
        i = 0;
        LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
            if (i++ == c.attack_event) {
                free(dos_attack_event);
                dos_attack_event = xstrdup(he->name);
            }
        }
        dos_switch_given = false;
        switch_cost_fit(&c);
        dos_costs = c;
        dos_costs_valid = true;
        dos_costs_events = host_events_signature();
        dos_costs_when = time_wall_msec();
    }
    return error;
}

static void
format_dos_costs(struct ds *s)
{
    const struct tpm_dos_costs *c = &dos_costs;
    ds_put_format(s, "profile: %"PRIu32" events, %"PRIu32" patterns, "
                  "%"PRIu32" flows per round, taken ", c->n_events,
                  c->n_patterns, c->n_flows);
    ds_put_strftime_msec(s, "%Y-%m-%d %H:%M:%S.###", dos_costs_when, true);
    ds_put_format(s, "\ntsc_hz: %.0f\n", c->hz);
    ds_put_format(s, "switch_cycles_per_packet: %.1f + %.4f per byte (%s)\n",
                  c->switch_pkt, c->switch_byte,
                  dos_switch_given ? "given"
                  : dos_switch_sizes > 1 ? "fitted over frame sizes"
                  : dos_switch_sizes ? "one frame size sampled"
                  : c->switch_pkt ? "no saturated iteration sampled"
                  : "no traffic sampled yet");
    ds_put_format(s, "pending_cycles_per_packet: %.1f\n", c->pkt_pending);
    ds_put_format(s, "matched_cycles_per_packet: %.1f\n", c->pkt_matched);
    ds_put_format(s, "match_cycles_per_flow: %.1f\n", c->match);
    ds_put_format(s, "sweep_cycles_per_item: %.1f\n", c->sweep_item);
    ds_put_format(s, "triggers_per_flow: %.2f\n", c->triggers_per_flow);
    ds_put_format(s, "attack_match_cycles_per_flow: %.1f\n", c->attack_match);
    ds_put_format(s, "attack_triggers_per_flow: %.2f (flows aimed at event "
                  "%s)\n", c->attack_triggers_per_flow,
                  dos_attack_event ? dos_attack_event : "?");
}

/* Parses 'arg' as an unsigned integer in [min, max] into '*v'; on error
 * replies on 'conn' and returns false. */
static bool
unixctl_uint_arg(struct unixctl_conn *conn, const char *what,
                 const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
    if (!tpm_parse_uint(arg, min, max, v)) {
        char *msg = xasprintf("%s \"%s\": expected an integer in "
                              "[%"PRIu64", %"PRIu64"]", what, arg, min, max);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return false;
    }
    return true;
}

static bool
unixctl_double_arg(struct unixctl_conn *conn, const char *what,
                   const char *arg, double min, double max, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(arg, &end);
    if (errno || end == arg || *end || !(x >= min && x <= max)) {
        char *msg = xasprintf("%s \"%s\": expected a number in [%g, %g]",
                              what, arg, min, max);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return false;
    }
    *v = x;
    return true;
}

void
tpm_unixctl_dos_profile(struct unixctl_conn *conn, int argc,
                        const char *argv[], void *aux OVS_UNUSED)
{
    uint64_t flows = 16384, rounds = 5;
    if ((argc > 1 && !unixctl_uint_arg(conn, "FLOWS", argv[1], 64,
                                       1u << 22, &flows))
        || (argc > 2 && !unixctl_uint_arg(conn, "ROUNDS", argv[2], 1, 15,
                                          &rounds))) {
        return;
    }
    char *error = dos_profile_run(flows, rounds);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        return;
    }
    struct ds s = DS_EMPTY_INITIALIZER;
    format_dos_costs(&s);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

void
tpm_unixctl_dos_model(struct unixctl_conn *conn, int argc,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct tpm_dos_traffic t;
    tpm_dos_traffic_init(&t);
    double budget = 1.0, switch_pkt = -1, switch_byte = -1;
    uint64_t threshold = UINT64_MAX, v;

    if (!unixctl_double_arg(conn, "RATE_DOS", argv[1], 0, 1e12,
                            &t.rate_dos)
        || !unixctl_double_arg(conn, "RATE_GOOD", argv[2], 0, 1e12,
                               &t.rate_good)) {
        return;
    }
    for (int i = 3; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        char *key = eq ? xmemdup0(argv[i], eq - argv[i]) : xstrdup(argv[i]);
        const char *val = eq ? eq + 1 : "";
        bool ok = true;
        if (!strcmp(key, "attack")) {
            if (!strcmp(val, "syn") || !strcmp(val, "threshold")) {
                t.syn = !strcmp(val, "syn");
            } else {
                unixctl_command_reply_error(conn, "attack: expected syn or "
                                            "threshold");
                ok = false;
            }
        } else if (!strcmp(key, "dos-bytes")) {
            ok = unixctl_uint_arg(conn, key, val, 60, 65535, &v);
            t.dos_bytes = v;
        } else if (!strcmp(key, "good-bytes")) {
            ok = unixctl_uint_arg(conn, key, val, 60, 65535, &v);
            t.good_bytes = v;
        } else if (!strcmp(key, "pkts-per-flow")) {
            ok = unixctl_uint_arg(conn, key, val, 1, UINT32_MAX, &v);
            t.pkts_per_flow = v;
        } else if (!strcmp(key, "threshold")) {
            ok = unixctl_uint_arg(conn, key, val, 0, UINT32_MAX - 1,
                                  &threshold);
        } else if (!strcmp(key, "budget")) {
            ok = unixctl_double_arg(conn, key, val, 0.01, 1, &budget);
        } else if (!strcmp(key, "switch-pkt")) {
            ok = unixctl_double_arg(conn, key, val, 0, 1e7, &switch_pkt);
        } else if (!strcmp(key, "switch-byte")) {
            ok = unixctl_double_arg(conn, key, val, 0, 1e4, &switch_byte);
        } else {
            char *msg = xasprintf("unknown option \"%s\": expected attack=, "
                                  "dos-bytes=, good-bytes=, pkts-per-flow=, "
                                  "threshold=, budget=, switch-pkt= or "
                                  "switch-byte=", argv[i]);
            unixctl_command_reply_error(conn, msg);
            free(msg);
            ok = false;
        }
        free(key);
        if (!ok) {
            return;
        }
    }

    if (!dos_costs_valid || dos_costs_events != host_events_signature()) {
        char *error = dos_profile_run(16384, 5);
        if (error) {
            unixctl_command_reply_error(conn, error);
            free(error);
            return;
        }
    } else {
        /* The switch's term from the latest samples. */
        switch_cost_fit(&dos_costs);
    }
    dos_switch_given = switch_pkt >= 0 || switch_byte >= 0;
    if (switch_pkt >= 0) {
        dos_costs.switch_pkt = switch_pkt;
    }
    if (switch_byte >= 0) {
        dos_costs.switch_byte = switch_byte;
    }

    /* The filter table of the running PMDs (the knobs apply to PMDs
     * created from now on). */
    struct tpm_params mp = tpm_ovs_knobs.params;
    size_t n_pmds;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n_pmds);
    if (n_pmds) {
        const struct tpm_params *pp = tpm_get_params(parts[0]->tpm);
        mp.epoch_ns = pp->epoch_ns;
        mp.dos_table_size = pp->dos_table_size;
        mp.dos_window = pp->dos_window;
        mp.dos_clear_on_pass = pp->dos_clear_on_pass;
    }
    free(parts);

    struct tpm_dos_load l;
    uint32_t th;
    if (threshold != UINT64_MAX) {
        th = threshold;
        tpm_dos_predict(&dos_costs, &mp, &t, th, &l);
    } else {
        th = tpm_dos_min_threshold(&dos_costs, &mp, &t, budget,
                                   t.good_bytes * t.pkts_per_flow, &l);
    }
    struct ds s = DS_EMPTY_INITIALIZER;
    format_dos_costs(&s);
    ds_put_format(&s, "attack: %s, %.0f pps of %"PRIu32" bytes; good: %.0f "
                  "pps of %"PRIu32" bytes, %"PRIu32" packets per flow\n",
                  t.syn ? "syn" : "threshold", t.rate_dos, t.dos_bytes,
                  t.rate_good, t.good_bytes, t.pkts_per_flow);
    if (th == UINT32_MAX) {
        ds_put_format(&s, "threshold: none (over budget %.2f even at the "
                      "good flows' size)\n", budget);
    } else {
        ds_put_format(&s, "threshold: %"PRIu32"\n", th);
    }
    ds_put_format(&s, "load: %.3f\n", l.load);
    ds_put_format(&s, "load_parts: switch %.3f, below threshold %.3f, "
                  "matched packets %.3f, matching %.3f, sweep %.3f\n",
                  l.switch_share, l.pending_share, l.matched_share,
                  l.match_share, l.sweep_share);
    ds_put_format(&s, "flows_passing_per_second: attack %.0f, good %.0f%s\n",
                  l.dos_flows_passing, l.good_flows_passing,
                  l.good_unmonitored ? " (good flows below the threshold: "
                  "not monitored)" : "");
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

