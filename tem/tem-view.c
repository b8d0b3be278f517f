/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM core's views: the JSON objects of the control socket's commands
 * (docs/tem.md, "tem-ctl": event-list, event-show, hosts, status, alerts)
 * and the Prometheus metrics (docs/tem.md, "Metrics").
 *
 * They read the core and change nothing, at the pace of the control
 * socket and of scrapes, never on the hot path: json-c objects here,
 * where alerts (tem-alert.c) build their JSON by hand.  Each counter of
 * struct tem_stats and struct tem_host_stats is named once in a table
 * for the metrics; the status view lists the same counters by their field
 * names.
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report-json.h"
#include "tem-metrics.h"

static const char *const install_names[] = { "pending", "acked",
                                             "nacked" };

/* ---------------------------------------------------------------------- */
/* Views. */

static struct json_object *
tem_view_prefixes(const struct tpm_prefix *p, size_t n)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        char buf[TPM_PREFIX_BUFSIZE];
        json_object_array_add(a, json_object_new_string(
                                  tpm_prefix_format(&p[i], buf, sizeof buf)));
    }
    return a;
}

/* The event's tenant filter ("tun_id=5001", "tun_id=0x1388/0xfffffc") or
 * JSON null. */
static struct json_object *
tem_view_tun(const struct tem_event *e)
{
    if (!e->ev->filter_tun.on) {
        return NULL;
    }
    char *s = tpm_tun_filter_to_string(&e->ev->filter_tun);
    struct json_object *o = json_object_new_string(s);
    free(s);
    return o;
}

/* Returns true if 'e''s filter names a tenant that 'tun_id' (NULL: any
 * event) is. */
static bool
tem_view_event_of(const struct tem_event *e, const uint32_t *tun_id)
{
    const struct tpm_tun_filter *f = &e->ev->filter_tun;
    return !tun_id || (f->on && (*tun_id & f->mask) == f->vni);
}

/* Returns true if 'h' serves a prefix of tenant 'tun_id' (NULL: any
 * host). */
static bool
tem_view_host_of(const struct tem_host *h, const uint32_t *tun_id)
{
    if (!tun_id) {
        return true;
    }
    for (size_t i = 0; i < h->n_prefixes; i++) {
        if (h->prefixes[i].has_tun && h->prefixes[i].tun_id == *tun_id) {
            return true;
        }
    }
    return false;
}

static const char *
tem_view_across_text(const struct tem_event *e, char *buf, size_t size)
{
    if (e->across == TEM_ACROSS_ATLEAST) {
        snprintf(buf, size, "atleast:%"PRIu32"%s", e->atleast_k,
                 e->atleast_pct ? "%" : "");
        return buf;
    }
    return tem_event_across_names[e->across];
}

static size_t
tem_view_count(const struct tem_event *e, enum tem_install_state s)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n_members; i++) {
        n += e->members[i].state == s;
    }
    return n;
}

struct json_object *
tem_core_event_list_json(const struct tem_core *core, const uint32_t *tun_id)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        if (!tem_view_event_of(e, tun_id)) {
            continue;
        }
        struct json_object *o = json_object_new_object();
        char buf[32];
        json_object_object_add(o, "id", json_object_new_int64(e->id));
        json_object_object_add(o, "name", json_object_new_string(e->name));
        json_object_object_add(o, "definition",
                               json_object_new_string(e->definition));
        json_object_object_add(o, "tun_id", tem_view_tun(e));
        json_object_object_add(o, "across", json_object_new_string(
                                   tem_view_across_text(e, buf, sizeof buf)));
        json_object_object_add(o, "standby",
                               json_object_new_boolean(e->standby));
        json_object_object_add(o, "hosts",
                               json_object_new_int64(e->n_members));
        json_object_object_add(o, "acked", json_object_new_int64(
                                   tem_view_count(e, TEM_INSTALL_ACKED)));
        json_object_object_add(o, "pending", json_object_new_int64(
                                   tem_view_count(e, TEM_INSTALL_PENDING)));
        json_object_object_add(o, "nacked", json_object_new_int64(
                                   tem_view_count(e, TEM_INSTALL_NACKED)));
        json_object_object_add(o, "alerts",
                               json_object_new_int64(e->stats.alerts));
        json_object_array_add(a, o);
    }
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "events", a);
    return r;
}

struct json_object *
tem_core_event_show_json(const struct tem_core *core, const char *name,
                         char **errp)
{
    const struct tem_event *e = tem_event_by_name(core, name);
    uint64_t now = tem_core_now(core);
    char buf[TPM_PREFIX_BUFSIZE];

    if (!e) {
        *errp = xasprintf("no event '%s'", name);
        return NULL;
    }
    *errp = NULL;

    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_int64(e->id));
    json_object_object_add(o, "name", json_object_new_string(e->name));
    json_object_object_add(o, "definition",
                           json_object_new_string(e->definition));
    json_object_object_add(o, "local_definition",
                           json_object_new_string(e->local_def));
    json_object_object_add(o, "scope", e->scope_all
                           ? json_object_new_string("all")
                           : tem_view_prefixes(e->scope, e->n_scope));
    json_object_object_add(o, "filter_prefixes",
                           tem_view_prefixes(e->addr, e->n_addr));
    json_object_object_add(o, "tun_id", tem_view_tun(e));
    json_object_object_add(o, "across", json_object_new_string(
                               tem_view_across_text(e, buf, sizeof buf)));
    json_object_object_add(o, "split", e->split
                           ? json_object_new_string(e->weighted ? "weighted"
                                                    : "equal")
                           : NULL);
    json_object_object_add(o, "threshold", e->has_threshold
                           ? tpm_number_to_json(e->threshold) : NULL);
    json_object_object_add(o, "interval_ns",
                           json_object_new_int64(e->ev->interval_ns));
    json_object_object_add(o, "standby", json_object_new_boolean(e->standby));
    if (e->then_name) {
        struct json_object *t = json_object_new_object();
        json_object_object_add(t, "event",
                               json_object_new_string(e->then_name));
        json_object_object_add(t, "duration_ns",
                               json_object_new_int64(e->then_ns));
        json_object_object_add(o, "then", t);
    } else {
        json_object_object_add(o, "then", NULL);
    }

    struct json_object *hosts = json_object_new_array();
    for (size_t i = 0; i < e->n_members; i++) {
        const struct tem_member *m = &e->members[i];
        struct json_object *h = json_object_new_object();
        json_object_object_add(h, "host", json_object_new_string(
                                   core->hosts[m->host_slot]->id));
        json_object_object_add(h, "state",
                               json_object_new_string(
                                   install_names[m->state]));
        if (m->reason) {
            json_object_object_add(h, "reason",
                                   json_object_new_string(m->reason));
        }
        if (e->split) {
            json_object_object_add(h, "share", tpm_number_to_json(m->share));
        }
        json_object_object_add(h, "history", m->has_ewma
                               ? json_object_new_double(m->ewma) : NULL);
        if (e->standby) {
            uint64_t u = e->drill_until[m->host_slot];
            json_object_object_add(h, "drilldown_remaining_ms",
                                   json_object_new_int64(
                                       u > now ? (u - now) / NS_PER_MS : 0));
        }
        json_object_array_add(hosts, h);
    }
    json_object_object_add(o, "hosts", hosts);

    struct json_object *st = json_object_new_object();
#define STAT(NAME) \
    json_object_object_add(st, #NAME, json_object_new_int64(e->stats.NAME))
    STAT(satisfactions);
    STAT(decisions);
    STAT(alerts);
    STAT(decided_deadline);
    STAT(late);
    STAT(dropped);
    STAT(nacks);
    STAT(drilldowns);
    STAT(reinstalls);
    STAT(undecidable);
#undef STAT
    json_object_object_add(o, "stats", st);

    struct json_object *recent = json_object_new_array();
    size_t cap = core->cfg.recent_alerts;
    for (size_t i = 0; i < e->n_recent; i++) {
        size_t k = (e->recent_next + cap - e->n_recent + i) % cap;
        json_object_array_add(recent, json_tokener_parse(e->recent[k].s));
    }
    json_object_object_add(o, "recent_alerts", recent);
    return o;
}

static void
tem_view_host_stats(struct json_object *o, const struct tem_host_stats *s)
{
#define STAT(NAME) \
    json_object_object_add(o, #NAME, json_object_new_int64(s->NAME))
    STAT(sessions);
    STAT(frames_in);
    STAT(msgs_in);
    STAT(invalid_frames);
    STAT(invalid_msgs);
    STAT(satisfactions);
    STAT(poll_replies);
    STAT(acks);
    STAT(nacks);
    STAT(heartbeats);
    STAT(frames_out);
    STAT(msgs_out);
    STAT(send_drops);
    STAT(reports_late);
    STAT(reports_dup);
    STAT(reports_skipped);
    STAT(epoch_refused);
#undef STAT
}

struct json_object *
tem_core_hosts_json(const struct tem_core *core, const uint32_t *tun_id)
{
    struct json_object *a = json_object_new_array();
    uint64_t now = tem_core_now(core);

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (!h || h->state == TEM_HOST_FREE || !tem_view_host_of(h, tun_id)) {
            continue;
        }
        struct json_object *o = json_object_new_object();
        size_t n_events = 0;
        for (size_t k = 0; k < core->n_events; k++) {
            n_events += core->events[k]->member_of[h->slot] >= 0;
        }
        json_object_object_add(o, "host", json_object_new_string(h->id));
        json_object_object_add(o, "state", json_object_new_string(
                                   tem_out_host_connected(h) ? "connected"
                                                             : "gone"));
        json_object_object_add(o, "prefixes",
                               tem_view_prefixes(h->prefixes, h->n_prefixes));
        json_object_object_add(o, "version",
                               json_object_new_int64(h->version));
        json_object_object_add(o, "monitors",
                               json_object_new_int64(h->n_pmds));
        json_object_object_add(o, "software", h->software
                               ? json_object_new_string(h->software) : NULL);
        json_object_object_add(o, "last_rx_ms", json_object_new_int64(
                                   (now - h->last_rx_ns) / NS_PER_MS));
        json_object_object_add(o, "connected_s", json_object_new_int64(
                                   (now - h->connected_ns) / NS_PER_S));
        json_object_object_add(o, "events",
                               json_object_new_int64(n_events));
        if (!tem_out_host_connected(h)) {
            json_object_object_add(o, "gone_reason",
                                   json_object_new_string(h->gone_reason));
            json_object_object_add(o, "gone_s", json_object_new_int64(
                                       (now - h->gone_ns) / NS_PER_S));
        }
        uint32_t dos;
        bool has_dos = tem_host_dos_wanted(core, h, &dos);
        json_object_object_add(o, "dos_threshold", has_dos
                               ? json_object_new_int64(dos) : NULL);
        json_object_object_add(o, "dos_scope", !has_dos ? NULL
                               : json_object_new_string(h->dos_own ? "host"
                                                        : "all"));
        json_object_object_add(o, "dos_state", json_object_new_string(
                                   tem_host_dos_state_names[h->dos_state]));
        if (h->dos_state == TEM_DOS_NACKED) {
            json_object_object_add(o, "dos_reason",
                                   json_object_new_string(h->dos_reason));
        }
        tem_view_host_stats(o, &h->stats);
        json_object_array_add(a, o);
    }
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "hosts", a);
    return r;
}

void
tem_core_get_stats(const struct tem_core *core, struct tem_stats *s)
{
    *s = core->stats;
}

struct json_object *
tem_core_status_json(const struct tem_core *core)
{
    struct json_object *o = json_object_new_object();
    const struct tem_stats *s = &core->stats;
    uint64_t now = tem_core_now(core);
    size_t connected = 0, known = 0;

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        known += h && h->state != TEM_HOST_FREE;
        connected += tem_out_host_connected(h);
    }
    json_object_object_add(o, "tem_id",
                           json_object_new_string(core->cfg.tem_id));
    json_object_object_add(o, "epoch_ns",
                           json_object_new_int64(core->cfg.epoch_ns));
    json_object_object_add(o, "heartbeat_ms",
                           json_object_new_int64(core->cfg.heartbeat_ms));
    json_object_object_add(o, "poll_deadline_ns",
                           json_object_new_int64(core->cfg.poll_deadline_ns));
    json_object_object_add(o, "uptime_s", json_object_new_int64(
                               (now - core->start_ns) / NS_PER_S));
    json_object_object_add(o, "hosts_connected",
                           json_object_new_int64(connected));
    json_object_object_add(o, "hosts_known", json_object_new_int64(known));
    json_object_object_add(o, "events",
                           json_object_new_int64(core->n_events));
    size_t n_decided = tpm_decisions_count_decided(core->decisions);
    json_object_object_add(o, "decisions_pending", json_object_new_int64(
                               tpm_decisions_count(core->decisions)
                               - n_decided));
    json_object_object_add(o, "decisions_kept",
                           json_object_new_int64(n_decided));
    json_object_object_add(o, "dos_threshold_all", core->dos_all
                           ? json_object_new_int64(core->dos_all_bytes)
                           : NULL);

    struct json_object *c = json_object_new_object();
#define STAT(NAME) \
    json_object_object_add(c, #NAME, json_object_new_int64(s->NAME))
    STAT(frames_in);
    STAT(msgs_in);
    STAT(invalid_frames);
    STAT(invalid_msgs);
    STAT(unknown_peer);
    STAT(auth_mismatch);
    STAT(revoked);
    STAT(hellos);
    STAT(sessions);
    STAT(refused);
    STAT(replaced);
    STAT(hosts_gone);
    STAT(satisfactions);
    STAT(sat_unknown);
    STAT(sat_late);
    STAT(polls_sent);
    STAT(poll_replies);
    STAT(repolls);
    STAT(poll_batches);
    STAT(poll_batches_forgotten);
    STAT(replies_stale);
    STAT(decisions);
    STAT(decided_complete);
    STAT(decided_deadline);
    STAT(decisions_full);
    STAT(missing_parts);
    STAT(tenant_old_hosts);
    STAT(sat_tenants_full);
    STAT(alerts);
    STAT(installs);
    STAT(removes);
    STAT(configures);
    STAT(acks);
    STAT(nacks);
    STAT(drilldowns);
    STAT(drilldown_errors);
    STAT(rebalances);
    STAT(frames_out);
    STAT(msgs_out);
    STAT(send_drops);
    STAT(reports_late);
    STAT(reports_dup);
    STAT(reports_skipped);
    STAT(alerts_late);
    STAT(late_undecidable);
    STAT(epoch_refused);
    STAT(expired_unpolled);
    STAT(host_decisions_full);
    STAT(late_queued);
    STAT(late_unpaced);
    STAT(seq_errors);
    STAT(overruns);
    STAT(overrun_ns);
    STAT(overrun_max_ns);
#undef STAT
    json_object_object_add(o, "counters", c);
    return o;
}

struct json_object *
tem_core_alerts_json(const struct tem_core *core, const char *event,
                     const uint32_t *tun_id, size_t n)
{
    struct json_object *a = json_object_new_array();
    size_t cap = core->cfg.alert_history;
    size_t *picked = xcalloc(core->n_history, sizeof *picked);
    size_t n_picked = 0;

    /* Newest first, then added oldest first. */
    for (size_t i = 0; i < core->n_history && n_picked < n; i++) {
        size_t k = (core->history_next + cap - 1 - i) % cap;
        if ((!event || !strcmp(core->history_event[k], event))
            && (!tun_id || core->history_tun[k] == *tun_id + 1)) {
            picked[n_picked++] = k;
        }
    }
    while (n_picked) {
        json_object_array_add(a, json_tokener_parse(
                                  core->history[picked[--n_picked]].s));
    }
    free(picked);

    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "alerts", a);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Prometheus metrics. */

/* A counter of tem_stats or tem_host_stats: its offset there, its metric
 * name (without the prefix) and help. */
struct stat_metric {
    size_t offset;
    const char *name;
    const char *help;
};

#define SM(FIELD, NAME, HELP) \
    { offsetof(struct tem_stats, FIELD), NAME, HELP }
static const struct stat_metric stat_metrics[] = {
    SM(frames_in, "frames_received_total", "Frames received from hosts."),
    SM(msgs_in, "messages_received_total",
       "Protocol messages in the frames received from hosts."),
    SM(invalid_frames, "invalid_frames_total",
       "Frames from hosts that could not be decoded (or of a wrong "
       "protocol version)."),
    SM(invalid_msgs, "invalid_messages_total",
       "Messages from hosts that were invalid or not valid in their "
       "session's state."),
    SM(unknown_peer, "unknown_peer_frames_total",
       "Frames from a peer without a session."),
    SM(auth_mismatch, "auth_mismatches_total",
       "Hellos or frames for another host id than the one the peer's key "
       "is bound to (refused)."),
    SM(revoked, "sessions_revoked_total",
       "Sessions ended because their key is no longer allowed."),
    SM(hellos, "hellos_total", "Hello messages received."),
    SM(sessions, "sessions_total", "Host sessions opened (Welcome sent)."),
    SM(refused, "sessions_refused_total", "Hellos refused."),
    SM(replaced, "sessions_replaced_total",
       "Sessions replaced by a new Hello of the same host."),
    SM(hosts_gone, "hosts_gone_total",
       "Hosts that said Bye or stayed silent for 3 heartbeat periods."),
    SM(satisfactions, "satisfactions_total",
       "Satisfactions received from hosts."),
    SM(sat_unknown, "satisfactions_unknown_total",
       "Satisfactions for an event not defined or not installed on that "
       "host (dropped)."),
    SM(sat_late, "satisfactions_late_total",
       "Satisfactions for a key decided already."),
    SM(decisions_full, "satisfactions_dropped_total",
       "Satisfactions dropped: no room for a decision (--max-decisions)."),
    SM(polls_sent, "polls_sent_total",
       "Polls sent to hosts (each entry of a PollBatch counts)."),
    SM(poll_batches, "poll_batches_total",
       "PollBatch messages sent (protocol version 3 hosts)."),
    SM(poll_batches_forgotten, "poll_batches_forgotten_total",
       "PollBatches never answered before newer ones took their place."),
    SM(poll_replies, "poll_replies_total", "Poll replies received."),
    SM(repolls, "repolls_total",
       "Polls sent again after a NOT_YET reply."),
    SM(replies_stale, "poll_replies_stale_total",
       "Poll replies for a decided or unknown decision."),
    SM(decisions, "decisions_total", "Decisions made."),
    SM(decided_complete, "decisions_complete_total",
       "Decisions made with every host's answer."),
    SM(decided_deadline, "decisions_deadline_total",
       "Decisions made at the poll deadline: some poll timed out."),
    SM(missing_parts, "poll_timeouts_total",
       "Hosts listed as missing in decisions (their poll timed out or "
       "they were gone)."),
    SM(tenant_old_hosts, "tenant_old_hosts_total",
       "Of the hosts listed as missing, those of a protocol version before "
       "4 in a tenant's decision (they cannot be polled for a tenant)."),
    SM(sat_tenants_full, "satisfactions_tenants_full_total",
       "Satisfactions dropped: a new tenant, and the TEM's table of tenants "
       "is full."),
    SM(alerts, "alerts_total", "Alerts raised."),
    SM(installs, "installs_total", "Install messages sent to hosts."),
    SM(removes, "removes_total", "Remove messages sent to hosts."),
    SM(acks, "acks_total", "Acks received from hosts."),
    SM(nacks, "nacks_total", "Nacks received from hosts."),
    SM(configures, "configures_total", "Configure messages sent to hosts."),
    SM(drilldowns, "drilldowns_total",
       "Standby events installed because of an alert (then=)."),
    SM(drilldown_errors, "drilldown_errors_total",
       "then= targets missing or not standby."),
    SM(rebalances, "rebalances_total", "Threshold re-splits."),
    SM(frames_out, "frames_sent_total", "Frames sent to hosts."),
    SM(msgs_out, "messages_sent_total", "Messages sent to hosts."),
    SM(send_drops, "send_drops_total",
       "Frames to hosts dropped (high-water mark reached)."),
    SM(reports_late, "reports_late_total",
       "Satisfactions and poll replies that hosts flagged late (sent after "
       "an outage of the TEM)."),
    SM(reports_dup, "reports_duplicate_total",
       "Satisfactions and poll replies dropped: received already."),
    SM(reports_skipped, "reports_skipped_total",
       "Satisfactions and poll replies never received: their hosts dropped "
       "them (outage buffer full)."),
    SM(alerts_late, "alerts_late_total",
       "Alerts of decisions that a late satisfaction started or joined."),
    SM(late_undecidable, "decisions_undecidable_total",
       "Late decisions that could not be decided: no alert from the hosts "
       "there now (the others' history of the epoch expired, or they are "
       "not known any more)."),
    SM(epoch_refused, "reports_epoch_refused_total",
       "Satisfactions and poll replies refused: their epoch is outside the "
       "window the TEM takes (--epoch-past, 2 epochs ahead)."),
    SM(expired_unpolled, "parts_expired_unpolled_total",
       "Hosts counted expired in decisions without a poll: their trigger "
       "was installed after the epoch."),
    SM(host_decisions_full, "satisfactions_budget_dropped_total",
       "Satisfactions dropped: their host started --host-decisions "
       "decisions in that loop turn."),
    SM(late_queued, "satisfactions_late_paced_total",
       "Late satisfactions decided in a later loop turn, behind the live "
       "ones."),
    SM(late_unpaced, "satisfactions_late_unpaced_total",
       "Late satisfactions decided at once: the late queue was full."),
    SM(seq_errors, "sessions_seq_errors_total",
       "Sessions ended: a host's report number jumped by more than "
       "--max-seq-gap."),
    SM(overruns, "loop_overruns_total",
       "Times the main loop ran late (stopped, starved or held by slow "
       "work): poll deadlines and host timeouts were extended."),
};
#undef SM

/* The per-host counters (tem_host_stats). */
#define HM(FIELD, NAME, HELP) \
    { offsetof(struct tem_host_stats, FIELD), NAME, HELP }
static const struct stat_metric host_metrics[] = {
    HM(sessions, "host_sessions_total", "Sessions this host opened."),
    HM(frames_in, "host_frames_received_total",
       "Frames received from this host."),
    HM(invalid_frames, "host_invalid_frames_total",
       "Frames from this host that could not be decoded."),
    HM(invalid_msgs, "host_invalid_messages_total",
       "Invalid messages from this host."),
    HM(satisfactions, "host_satisfactions_total",
       "Satisfactions received from this host."),
    HM(poll_replies, "host_poll_replies_total",
       "Poll replies received from this host."),
    HM(nacks, "host_nacks_total", "Nacks received from this host."),
    HM(heartbeats, "host_heartbeats_total",
       "Heartbeats received from this host."),
    HM(frames_out, "host_frames_sent_total", "Frames sent to this host."),
    HM(send_drops, "host_send_drops_total",
       "Frames to this host dropped (high-water mark reached)."),
    HM(reports_late, "host_reports_late_total",
       "Satisfactions and poll replies this host flagged late."),
    HM(reports_dup, "host_reports_duplicate_total",
       "Satisfactions and poll replies of this host dropped: received "
       "already."),
    HM(reports_skipped, "host_reports_skipped_total",
       "Satisfactions and poll replies this host dropped before sending "
       "(sequence numbers never received)."),
    /* The host's own counters, from its heartbeats (restart at 0 when the
     * host restarts). */
    HM(mon_packets, "host_monitor_packets_total",
       "Frames the host's monitors saw."),
    HM(mon_bytes, "host_monitor_bytes_total",
       "Bytes of the frames the host's monitors saw."),
    HM(mon_sweeps, "host_monitor_sweeps_total",
       "Sweeps the host's monitors completed."),
    HM(mon_sweeps_unfinished, "host_monitor_sweeps_unfinished_total",
       "Sweeps the host's monitors abandoned (values flagged partial)."),
    HM(mon_reports, "host_monitor_reports_total",
       "Satisfactions the host's monitors reported."),
    HM(mon_reports_dropped, "host_monitor_reports_dropped_total",
       "Satisfactions the host's monitors dropped (report ring full)."),
    HM(mon_dos_skipped, "host_monitor_dos_skipped_packets_total",
       "Packets of flows below the host's DoS threshold."),
    HM(mon_dos_passed, "host_monitor_dos_passed_flows_total",
       "Flows matched on passing the host's DoS threshold."),
    HM(epoch_refused, "host_reports_epoch_refused_total",
       "Satisfactions and poll replies of this host refused: their epoch "
       "is outside the window the TEM takes."),
};
#undef HM

static bool
tem_view_host_known(const struct tem_host *h)
{
    return h && h->state != TEM_HOST_FREE;
}

void
tem_core_metrics(const struct tem_core *core, struct tem_metrics *m)
{
    uint64_t now = tem_core_now(core);
    size_t connected = 0, gone = 0;

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        connected += tem_out_host_connected(h);
        gone += tem_view_host_known(h) && !tem_out_host_connected(h);
    }
    tem_metrics_gauge(m, "trumpet_tem_start_time_seconds",
                      "When the TEM started, seconds since the epoch.",
                      core->start_real_ns / 1e9);
    tem_metrics_family(m, "trumpet_tem_hosts", "gauge",
                       "Hosts known, by state: connected, or gone "
                       "(remembered after Bye or silence).");
    tem_metrics_sample(m, "trumpet_tem_hosts", "state", "connected",
                       connected);
    tem_metrics_sample(m, "trumpet_tem_hosts", "state", "gone", gone);
    tem_metrics_gauge(m, "trumpet_tem_events", "Events defined.",
                      core->n_events);
    size_t n_decided = tpm_decisions_count_decided(core->decisions);
    tem_metrics_gauge(m, "trumpet_tem_decisions_pending",
                      "Decisions waiting for polls.",
                      tpm_decisions_count(core->decisions) - n_decided);

    for (size_t i = 0; i < ARRAY_SIZE(stat_metrics); i++) {
        const struct stat_metric *sm = &stat_metrics[i];
        char *name = xasprintf("trumpet_tem_%s", sm->name);
        const uint64_t *v = (const uint64_t *) (const void *)
                            ((const char *) &core->stats + sm->offset);
        tem_metrics_counter(m, name, sm->help, *v);
        free(name);
    }

    /* A counter of seconds, not a whole number. */
    tem_metrics_family(m, "trumpet_tem_loop_overrun_seconds_total",
                       "counter", "Time the main loop ran late, in all "
                       "(its overruns).");
    tem_metrics_sample(m, "trumpet_tem_loop_overrun_seconds_total", NULL,
                       NULL, core->stats.overrun_ns / 1e9);

    tem_metrics_family(m, "trumpet_tem_detection_latency_seconds",
                       "histogram", "Time from the first satisfaction of "
                       "a decision to its alert (an alert's latency_us).");
    tem_metrics_histogram(m, "trumpet_tem_detection_latency_seconds",
                          tem_alert_latency_bounds, core->latency_counts,
                          TEM_LATENCY_BUCKETS, core->latency_sum_s);

    /* Per event. */
    tem_metrics_family(m, "trumpet_tem_event_satisfactions_total",
                       "counter", "Satisfactions received, by event.");
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        tem_metrics_sample(m, "trumpet_tem_event_satisfactions_total",
                           "event", e->name, e->stats.satisfactions);
    }
    tem_metrics_family(m, "trumpet_tem_event_alerts_total", "counter",
                       "Alerts raised, by event.");
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        tem_metrics_sample(m, "trumpet_tem_event_alerts_total", "event",
                           e->name, e->stats.alerts);
    }

    /* Per host (those known: connected or gone). */
    tem_metrics_family(m, "trumpet_tem_host_connected", "gauge",
                       "1 if the host has a session, 0 if it is gone.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (tem_view_host_known(h)) {
            tem_metrics_sample(m, "trumpet_tem_host_connected", "host",
                               h->id, tem_out_host_connected(h));
        }
    }
    tem_metrics_family(m, "trumpet_tem_host_last_receive_age_seconds",
                       "gauge", "Time since the last frame from the "
                       "host.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (tem_view_host_known(h)) {
            tem_metrics_sample(m,
                               "trumpet_tem_host_last_receive_age_seconds",
                               "host", h->id,
                               now > h->last_rx_ns
                               ? (now - h->last_rx_ns) / 1e9 : 0);
        }
    }
    tem_metrics_family(m, "trumpet_tem_host_monitors", "gauge",
                       "Packet monitors (PMD threads) the host said it "
                       "has in Hello.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (tem_view_host_known(h)) {
            tem_metrics_sample(m, "trumpet_tem_host_monitors", "host",
                               h->id, h->n_pmds);
        }
    }
    for (size_t k = 0; k < ARRAY_SIZE(host_metrics); k++) {
        const struct stat_metric *hm = &host_metrics[k];
        char *name = xasprintf("trumpet_tem_%s", hm->name);
        tem_metrics_family(m, name, "counter", hm->help);
        for (uint32_t i = 0; i < core->n_host_slots; i++) {
            const struct tem_host *h = core->hosts[i];
            if (tem_view_host_known(h)) {
                const uint64_t *v = (const uint64_t *) (const void *)
                    ((const char *) &h->stats + hm->offset);
                tem_metrics_sample(m, name, "host", h->id, *v);
            }
        }
        free(name);
    }
}

struct json_object *
tem_reply_error(const char *format, ...)
{
    struct json_object *r = json_object_new_object();
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);
    json_object_object_add(r, "ok", json_object_new_boolean(false));
    json_object_object_add(r, "error", json_object_new_string(msg));
    free(msg);
    return r;
}

struct json_object *
tem_reply_ok(struct json_object *r)
{
    if (!r) {
        r = json_object_new_object();
    }
    json_object_object_add(r, "ok", json_object_new_boolean(true));
    return r;
}
