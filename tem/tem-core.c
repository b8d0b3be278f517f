/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM core's life (tem-core.h, paper section 6): its configuration and
 * defaults, creation and destruction, and tem_core_run(), the timers' one
 * entry point.
 *
 * Every job of the core has a file of its own (tem-core-private.h lists
 * them: hosts, decisions, alerts, events, outgoing batches, the log,
 * views); this one allocates what they share, sized once from the
 * configuration (hosts, events, the alert history; the decision engine of
 * lib/decision.h grows as far as --max-decisions), and frees it.
 *
 * Timers: tem_core_run() has tem-decide.c send the re-polls that are due,
 * decide the decisions whose poll deadline passed and forget the decided
 * keys kept long enough, then, when they are due, runs the hosts' timers
 * (tem-host.c: heartbeats, host timeouts) and the events' (tem-event.c:
 * drill-down expiry, rebalancing).  It returns when it next needs to run;
 * nothing else keeps time.  Every timer is on the monotonic clock
 * (tem_core_now()), so that a step of the wall clock fires none early and
 * holds none back.  tem_core_overrun() extends the timers that wait for
 * hosts (tem-decide.c's deadlines and kept keys, tem-host.c's silence
 * timeouts) by the time the caller's loop did not run.
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <string.h>

#include "clock.h"

static uint64_t
tem_core_clock_mono__(void *aux)
{
    return tpm_clock_mono_ns();
}

static uint64_t
tem_core_clock_real__(void *aux)
{
    return tpm_clock_real_ns();
}

const struct tem_clock tem_clock_system = {
    .mono = tem_core_clock_mono__,
    .real = tem_core_clock_real__,
};

void
tem_config_init(struct tem_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tem_id = "tem";
    cfg->epoch_ns = 10 * NS_PER_MS;
    cfg->heartbeat_ms = 1000;
    cfg->max_hosts = 1024;
    cfg->max_events = 1024;
    cfg->max_decisions = 1 << 20;
    cfg->poll_deadline_ns = 100 * NS_PER_MS;
    cfg->repoll_ns = NS_PER_MS;
    cfg->decided_keep_ns = 0;
    cfg->rebalance_ns = 10 * NS_PER_S;
    cfg->rebalance_change = 0.2;
    cfg->ewma_alpha = 0.25;
    cfg->weight_floor = 0.1;
    cfg->recent_alerts = 10;
    cfg->alert_history = 100;
    cfg->max_batch_bytes = 256 * 1024;
    cfg->epoch_past_ns = 300 * NS_PER_S;
    cfg->host_decisions = 4096;
    cfg->late_per_turn = 256;
    cfg->late_queue = 65536;
    cfg->max_seq_gap = UINT64_C(1) << 32;
    cfg->clock = tem_clock_system;
}

struct tem_core *
tem_core_create(const struct tem_config *cfg)
{
    struct tem_core *core = xzalloc(sizeof *core);

    core->cfg = *cfg;
    core->cfg.max_hosts = MAX(1, MIN(cfg->max_hosts, 65535));
    core->cfg.max_events = MAX(1, cfg->max_events);
    core->cfg.max_decisions = MAX(16, MIN(cfg->max_decisions, 1u << 24));
    core->cfg.recent_alerts = MAX(1, cfg->recent_alerts);
    core->cfg.alert_history = MAX(1, cfg->alert_history);
    core->cfg.max_batch_bytes = MAX(4096, MIN(cfg->max_batch_bytes,
                                              TPROTO_MAX_FRAME / 2));
    core->start_ns = tem_core_now(core);
    core->start_real_ns = tem_core_real(core);

    core->hosts = xcalloc(core->cfg.max_hosts, sizeof *core->hosts);
    core->peer_mask = pow2_at_least(2 * core->cfg.max_hosts) - 1;
    core->peers = xcalloc(core->peer_mask + 1, sizeof *core->peers);
    core->dirty = xcalloc(core->cfg.max_hosts, sizeof *core->dirty);

    core->events = xcalloc(core->cfg.max_events, sizeof *core->events);
    core->id_mask = pow2_at_least(2 * core->cfg.max_events) - 1;
    core->by_id = xcalloc(core->id_mask + 1, sizeof *core->by_id);
    core->next_id = 1;
    core->next_cookie = 1;

    struct tpm_decisions_config dc;
    tpm_decisions_config_init(&dc);
    dc.capacity = MIN(core->cfg.max_decisions, 1024);
    dc.max = core->cfg.max_decisions;
    dc.part_size = sizeof(struct tem_part);
    core->decisions = tpm_decisions_create(&dc);
    core->tenants = tpm_tenants_create(TPM_TENANT_SLOTS_MAX);

    core->history = xcalloc(core->cfg.alert_history, sizeof *core->history);
    core->history_event = xcalloc(core->cfg.alert_history,
                                  sizeof *core->history_event);
    core->history_tun = xcalloc(core->cfg.alert_history,
                                sizeof *core->history_tun);
    tproto_batch_init(&core->tmp);
    return core;
}

void
tem_core_destroy(struct tem_core *core)
{
    if (!core) {
        return;
    }
    for (size_t i = 0; i < core->n_events; i++) {
        tem_event_free(core->events[i]);
    }
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (h) {
            tproto_batch_destroy(&h->out);
            tem_out_pollq_free(h->pollq);
            free(h->prefixes);
            free(h->software);
            free(h->held);
            free(h);
        }
    }
    tpm_decisions_destroy(core->decisions);
    tpm_tenants_destroy(core->tenants);
    for (size_t i = 0; i < core->cfg.alert_history; i++) {
        sbuf_destroy(&core->history[i]);
    }
    free(core->alert_buf.s);
    free(core->history);
    free(core->history_event);
    free(core->history_tun);
    free(core->repolls);
    free(core->late);
    free(core->dos_saved);
    free(core->by_id);
    free(core->events);
    free(core->dirty);
    free(core->peers);
    free(core->hosts);
    tproto_batch_destroy(&core->tmp);
    free(core);
}

uint64_t
tem_core_run(struct tem_core *core)
{
    uint64_t now = tem_core_now(core);

    tem_decide_run(core, now);
    if (now >= core->next_timers_ns) {
        uint64_t hosts = tem_host_run(core, now);
        uint64_t events = tem_event_run(core, now);
        core->next_timers_ns = MIN(hosts, events);
    }
    return MIN(core->next_timers_ns, tem_decide_next_ns(core));
}

void
tem_core_overrun(struct tem_core *core, uint64_t late_ns, uint64_t grace_ns)
{
    uint64_t ns = late_ns + grace_ns;

    tem_decide_delay(core, ns);
    tem_host_delay(core, ns);
    core->next_timers_ns = 0;
    core->stats.overruns++;
    core->stats.overrun_ns += late_ns;
    core->stats.overrun_max_ns = MAX(core->stats.overrun_max_ns, late_ns);
    uint64_t late_ms = late_ns / NS_PER_MS, ms = ns / NS_PER_MS;
    tem_log_rl(core, &core->rl_overrun, TPM_LOG_WARN, "the loop ran its "
               "timers %"PRIu64".%03"PRIu64" s late (the process was "
               "stopped, starved or held by slow work): poll deadlines and "
               "host timeouts extended by %"PRIu64".%03"PRIu64" s "
               "(%"PRIu64" overruns so far)", late_ms / 1000, late_ms % 1000,
               ms / 1000, ms % 1000, core->stats.overruns);
}
