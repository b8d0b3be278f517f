/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm/stats and tpm/flows: what the monitors counted, per PMD.
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <stdlib.h>

#include "openvswitch/dynamic-string.h"
#include "unixctl.h"

/* Appends tpm/stats's lines on the main thread: packets not monitored,
 * the clock, the operations on the PMDs and tpm_ovs_run()'s time. */
static void
tpm_ovs_format_main(struct ds *s)
{
    const struct tpm_ovs_main_time *m = &tpm_ovs_main_time;
    uint64_t skipped;
    size_t n_ops, n_reqs;
    atomic_read_relaxed(&tpm_ovs_non_pmd_skipped, &skipped);
    tpm_ovs_ops_count(&n_ops, &n_reqs);

    ds_put_format(s, "non-PMD packets skipped (not monitored): %"PRIu64
                  "\n", skipped);
    tpm_ovs_event_format_summary(s);
    tpm_ovs_clock_format(s);
    ds_put_format(s, "main thread: %"PRIuSIZE" operations on the PMDs "
                  "pending, %"PRIuSIZE" requests queued; tpm_ovs_run() "
                  "calls %"PRIu64", mean %.1f us, longest %.1f us (%.1f "
                  "us on the CPU)\n", n_ops, n_reqs, m->calls,
                  m->calls ? m->total_ns / 1e3 / m->calls : 0.0,
                  m->max_ns / 1e3, m->cpu_max_ns / 1e3);
}

void
tpm_unixctl_stats(struct unixctl_conn *conn, int argc OVS_UNUSED,
                  const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    tpm_ovs_format_main(&s);
    tpm_ovs_agent_format_summary(&s);
    for (size_t i = 0; i < n; i++) {
        const struct tpm_params *pp = tpm_get_params(parts[i]->tpm);
        struct tpm_stats st;
        uint64_t idle, forced, catchup;
        tpm_get_stats(parts[i]->tpm, &st);
        atomic_read_relaxed(&parts[i]->steps_idle, &idle);
        atomic_read_relaxed(&parts[i]->steps_forced, &forced);
        atomic_read_relaxed(&parts[i]->steps_catchup, &catchup);

        ds_put_format(&s, "pmd core %u:\n", parts[i]->core_id);
        ds_put_cstr(&s, "  lost data:");
        bool lost = false;
        for (size_t j = 0; j < TPM_N_LOSSES; j++) {
            uint64_t v = tpm_loss_get(&st, &tpm_losses[j]);
            if (v) {
                ds_put_format(&s, "%s %s %"PRIu64, lost ? "," : "",
                              tpm_losses[j].name, v);
                lost = true;
            }
        }
        ds_put_cstr(&s, lost ? "\n" : " none\n");
        ds_put_format(&s, "  packets: %"PRIu64" (non-IP %"PRIu64"), "
                      "bytes: %"PRIu64"\n", st.packets, st.non_ip,
                      st.bytes);
        ds_put_format(&s, "  not parsed: %"PRIu64" (non-IP %"PRIu64", "
                      "L2 truncated %"PRIu64", too many VLAN tags %"PRIu64
                      ", L3 truncated %"PRIu64", bad IP header %"PRIu64
                      ", ports not captured %"PRIu64"); parsed with the L4 "
                      "header cut %"PRIu64", IPv4 length from the frame %"
                      PRIu64"\n", st.not_parsed,
                      st.parse.not_parsed[TPM_PARSE_NON_IP],
                      st.parse.not_parsed[TPM_PARSE_L2_TRUNCATED],
                      st.parse.not_parsed[TPM_PARSE_TOO_MANY_TAGS],
                      st.parse.not_parsed[TPM_PARSE_L3_TRUNCATED],
                      st.parse.not_parsed[TPM_PARSE_BAD_IP_HEADER],
                      st.parse.not_parsed[TPM_PARSE_PORTS_NOT_CAPTURED],
                      st.parse.l4_truncated, st.parse.ip_len_from_frame);
        ds_put_format(&s, "  tunnels: decapsulated %"PRIu64", not "
                      "decapsulated (Geneve without Ethernet) %"PRIu64
                      ", not parsed: tunnel header cut %"PRIu64", bad "
                      "tunnel header %"PRIu64", inner frame non-IP %"PRIu64
                      ", inner frame malformed %"PRIu64"; tenants %"PRIu64
                      ", frames without a tenant slot %"PRIu64
                      ", counted as outer flows too (underlay events) %"
                      PRIu64"\n",
                      st.parse.tun_decapsulated,
                      st.parse.tun_not_decapsulated,
                      st.parse.not_parsed[TPM_PARSE_TUN_TRUNCATED],
                      st.parse.not_parsed[TPM_PARSE_TUN_BAD_HEADER],
                      st.parse.not_parsed[TPM_PARSE_TUN_INNER_NON_IP],
                      st.parse.not_parsed[TPM_PARSE_TUN_INNER_MALFORMED],
                      st.tenants, st.tun_slots_full, st.tun_underlay);
        ds_put_format(&s, "  flows: %"PRIu64" live, table load %.1f%%, "
                      "inserts %"PRIu64", reuses %"PRIu64", evictions "
                      "%"PRIu64", freed %"PRIu64", retired %"PRIu64"\n",
                      st.flows_live,
                      100.0 * st.flows_live / pp->flow_table_size,
                      st.flow_inserts, st.flow_reuses, st.flow_evictions,
                      st.flows_freed, st.flows_retired);
        ds_put_format(&s, "  matches: %"PRIu64", over max_matches %"PRIu64
                      ", out of summary slots %"PRIu64"\n", st.matches,
                      st.match_overflow, st.summary_overflow);
        ds_put_format(&s, "  dos: threshold %"PRIu32" bytes, skipped packets "
                      "%"PRIu64" (pre-check %"PRIu64"), flows passed "
                      "%"PRIu64", removed on collision %"PRIu64", removed "
                      "by sweep %"PRIu64"; filter table %"PRIu32
                      " counters, window %"PRIu32" epochs, clear on pass "
                      "%s\n", pp->dos_threshold,
                      st.dos_skipped_pkts, st.dos_precheck_pkts,
                      st.dos_passed, st.dos_removed_collision,
                      st.dos_removed_sweep, pp->dos_table_size,
                      pp->dos_window,
                      pp->dos_clear_on_pass ? "yes" : "no");
        double sw_pkt, mon_pkt, rx_pkt;
        if (tpm_ovs_pmd_cycles_per_packet(parts[i], &sw_pkt, &mon_pkt,
                                          &rx_pkt)) {
            ds_put_format(&s, "  cycles per packet (sampled busy "
                          "iterations): switch %.1f, monitor %.1f "
                          "(packets %.1f, sweeps and commands %.1f)\n",
                          sw_pkt, mon_pkt, rx_pkt, mon_pkt - rx_pkt);
        }
        ds_put_format(&s, "  triggers: %"PRIu64" instances, created %"PRIu64
                      ", expired %"PRIu64", refused %"PRIu64", chunks "
                      "exhausted %"PRIu64"\n", st.triggers,
                      st.children_created, st.children_expired,
                      st.children_dropped, st.chunks_exhausted);
        ds_put_format(&s, "  sweeps: done %"PRIu64", unfinished %"PRIu64
                      ", forced %"PRIu64"; steps idle %"PRIu64", steps "
                      "while saturated %"PRIu64" (catch-up %"PRIu64")\n",
                      st.sweeps_done, st.sweeps_unfinished, st.sweeps_forced,
                      idle, forced, catchup);
        ds_put_format(&s, "  sweep time: p50 %"PRIu64" ns, p99 %"PRIu64
                      " ns, max %"PRIu64" ns; quiet instances skipped %"
                      PRIu64"\n", st.sweep_ns_p50, st.sweep_ns_p99,
                      st.sweep_ns_max, st.sweep_skipped);
        ds_put_format(&s, "  reports: %"PRIu64", dropped %"PRIu64
                      "; epochs %"PRIu64", skipped %"PRIu64"\n",
                      st.reports, st.reports_dropped, st.epochs,
                      st.epochs_skipped);
        ds_put_format(&s, "  tcp state: %"PRIu64" connections of %"PRIu32
                      ", pool exhausted %"PRIu64", freed %"PRIu64"\n",
                      st.tcp_states, pp->tcp_state_pool,
                      st.tcp_state_exhausted, st.tcp_state_freed);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
    free(parts);
}

struct flows_ctx {
    struct ds *s;
    struct tpm_match filter;
    struct tpm_tun_filter filter_tun;
    bool has_filter;
    size_t n, max;
};

static uint32_t
flows_vni__(const void *aux OVS_UNUSED, uint16_t tun)
{
    struct tpm_key key = { .tun = tun };
    return tpm_ovs_group_vni(&key);
}

static void
flows_cb(const struct tpm_key *key, uint64_t packets, uint64_t bytes,
         uint32_t n_matched, void *ctx_)
{
    struct flows_ctx *ctx = ctx_;
    if (ctx->has_filter) {
        struct tpm_key m;
        tpm_key_and(&m, key, &ctx->filter.mask);
        if (!tpm_key_equal(&m, &ctx->filter.key)) {
            return;
        }
        if (!tpm_tun_filter_match_slot(&ctx->filter_tun, key->tun,
                                       flows_vni__, NULL)) {
            return;
        }
    }
    if (ctx->n++ < ctx->max) {
        char k[TPM_KEY_STRLEN];
        ds_put_format(ctx->s, "  %s", tpm_key_format(key, k, sizeof k));
        if (key->tun == TPM_TUN_UNDERLAY) {
            ds_put_cstr(ctx->s, " underlay");
        } else if (key->tun) {
            ds_put_format(ctx->s, " tun_id=%"PRIu32, tpm_ovs_group_vni(key));
        }
        ds_put_format(ctx->s, " packets:%"PRIu64" bytes:%"PRIu64
                      " triggers:%"PRIu32"\n", packets, bytes, n_matched);
    }
}

void
tpm_unixctl_flows(struct unixctl_conn *conn, int argc, const char *argv[],
                  void *aux OVS_UNUSED)
{
    struct flows_ctx ctx = { .max = 10000 };
    struct ds s = DS_EMPTY_INITIALIZER;

    if (argc > 1) {
        /* Reuse the event parser for the filter. */
        char *def = xasprintf("filter=%s predicate=count() > 0", argv[1]);
        struct tpm_event *ev;
        char *error = tpm_event_parse("flows", def, &ev);
        free(def);
        if (error) {
            unixctl_command_reply_error(conn, error);
            free(error);
            return;
        }
        ctx.filter = ev->filter;
        ctx.filter_tun = ev->filter_tun;
        ctx.has_filter = true;
        tpm_event_destroy(ev);
    }

    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    ctx.s = &s;
    for (size_t i = 0; i < n; i++) {
        /* Read while the PMD writes: packet and byte counts of the
         * current and previous epochs, possibly a packet behind. */
        ds_put_format(&s, "pmd core %u:\n", parts[i]->core_id);
        tpm_flows_for_each(parts[i]->tpm, flows_cb, &ctx);
    }
    if (ctx.n > ctx.max) {
        ds_put_format(&s, "(%"PRIuSIZE" more not shown)\n",
                      ctx.n - ctx.max);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
    free(parts);
}

