/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm-replay: runs a pcap through libtpm, using the capture's timestamps as
 * the clock, and prints every satisfaction as a JSON line (report-json.h).
 * Also the offline analysis tool an operator points at a capture.
 *
 * Packets are fed in batches of up to 32 that never straddle an epoch; a
 * sweep step runs after every batch.  Reading a file, time is the
 * capture's: each sweep runs to completion (the default --sweep-budget 0),
 * so the output does not depend on the machine's speed; --realtime, which
 * replays at the capture's pace as a switch would see it, bounds each
 * step (the monitor's default, 10us).  At the end of the capture the clock
 * is moved past the end of every open interval so the last intervals are
 * evaluated too.
 *
 * Reading a file, the tables that no option sizes (flow table, trigger
 * instances, flow-list chunks, TCP state pool) are sized from the capture
 * itself, read once before the replay (replay-sizing.h), so that the
 * default run is exact whatever the number of flows and events; a
 * capture whose tables would take more than --max-table-memory is
 * refused.  From a pipe, or with --realtime, the tables keep their
 * defaults, as on a switch.
 *
 * Nothing is lost silently: if any report was dropped, any sweep left
 * unfinished, any flow or match not kept or any value partial, a summary
 * naming the counters (and the option that raises a table that ran out)
 * goes to stderr and the exit status is EXIT_INCOMPLETE (3) rather than 0
 * (1 is a usage or input error).  A table that runs out is also named on
 * stderr as soon as it is noticed, so a long run can be stopped early.
 *
 * Controller mode (--controller): the replay is also a host of a TEM
 * (lib/agent.h).  It installs, removes and polls the TEM's triggers, and
 * takes the TEM's DoS threshold, between batches and while it waits; it
 * sends their satisfactions to the TEM (and prints them, marked
 * "tem":true), and keeps answering polls for --linger after the capture.
 * Local events (-e, -f) keep working beside them; they use event ids from
 * LOCAL_ID_BASE up, which the TEM may not use.  --controller given more
 * than once makes the replay a host of every TEM of a cluster
 * (docs/tem.md, "Past one TEM"): an agent per TEM, each with its own
 * session and outage buffer.  Event ids are the cluster's, so the
 * monitor holds the events of every TEM at once; each event belongs to
 * the TEM that installed it last (a TEM taking over another's event
 * installs it again), which alone gets its satisfactions and polls it;
 * a remove from another TEM is acked and leaves it to its owner.
 * A takeover whose definition and threshold share are those installed
 * keeps the monitor's event (its history answers the new owner's polls
 * of past epochs), and the satisfactions of that event the old owner's
 * agent holds unconfirmed are handed over to the new owner, flagged late
 * (tpm_agent_hand_over()).
 *
 * --realtime paces packets by their timestamps against the wall clock,
 * shifted so that the first packet is "now": the monitor's clock is then
 * the wall clock, as on a switch, and epochs mean the same thing to the
 * replay and to a TEM.  --loop N replays the capture N times, each pass
 * shifted in time after the previous one.
 *
 * The command line is read by replay-options.c (replay-options.h); this
 * file runs the replay from it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1           /* ppoll() */
#endif
#include <errno.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cli.h"
#include "clock.h"
#include "event.h"
#include "replay-options.h"
#include "replay-sizing.h"
#include "report-json.h"
#include "tpm.h"
#include "tproto.h"
#include "util.h"

/* Local events (-e, -f) have ids LOCAL_ID_BASE + index; TEM ids must be
 * below. */
#define LOCAL_ID_BASE 0xc0000000u

/* Commands from the TEM handled per call, so that packets keep flowing
 * under a flood of commands. */
#define CMDS_PER_CALL 256

/* Exit status of a run that completed but lost data (see above). */
#define EXIT_INCOMPLETE 3

#define NS_PER_S UINT64_C(1000000000)
#define NS_PER_MS UINT64_C(1000000)

/* Batches between two looks at the monitor's loss counters: a table that
 * runs out is named within a few thousand packets. */
#define LOSS_WATCH_BATCHES 256

struct replay {
    uint64_t counters_ns;       /* Counters last given to the agent. */
    struct tpm *tpm;
    struct tpm_event **events;  /* Local events, by index. */
    size_t n_events;
    uint64_t epoch_ns;
    uint64_t budget_ns;
    uint64_t n_reports;
    uint64_t n_partial;         /* Local events' reports printed with
                                 * "partial":true. */
    bool realtime;
    uint64_t start_ns;          /* --start-at: earliest wall-clock start. */

    /* The monitor's clock. */
    bool started;
    uint64_t clock_ns;

    /* The batch being filled: frames are copied, libpcap reuses its
     * buffer for the next packet. */
    uint8_t (*bufs)[65536];
    struct tpm_frame batch[TPM_BATCH_MAX];
    uint64_t batch_ts[TPM_BATCH_MAX];  /* Each packet's time. */
    int n;
    uint64_t batch_epoch;
    uint64_t last_ns;           /* Time of the latest packet fed. */
    uint64_t n_packets;

    /* Table sizes (replay-sizing.h), for --stats. */
    struct {
        bool scanned;           /* Sized from the capture. */
        struct replay_census census;
        uint32_t longest_cluster; /* Of the flows in the flow table
                                   * chosen (0: not chosen from the
                                   * capture). */
        uint64_t scan_ns;       /* Time the census took. */
        uint64_t memory;        /* tpm_params_memory() of the sizes. */
        uint64_t limit;         /* --max-table-memory. */
    } sizing;
    uint64_t n_batches;
    bool loss_named[TPM_N_LOSSES]; /* Already named on stderr. */

    /* Controller mode: one link per --controller. */
    struct tem_link *links;
    size_t n_links;
    uint64_t reports_unknown;   /* TEM events' reports after their
                                 * removal. */
};

/* Controller mode: the replay as a host of one TEM. */
struct tem_link {
    struct tpm_agent *agent;
    const char *endpoint;
    uint32_t *ids;              /* The TEM events it installed... */
    char **defs;                /* ...and what each was installed with
                                 * (tem_install_key()). */
    size_t n_ids, allocated_ids;
    struct {
        uint64_t installs, install_errors, removes, remove_errors;
        uint64_t polls, resyncs, reports, reports_dropped;
        uint64_t reports_tenant;    /* Of a tenant's group: not sent (the
                                     * TEM's protocol version is older
                                     * than 4 and would merge tenants). */
        uint64_t configures;
        uint64_t taken_over;    /* Installs of an event another TEM had
                                 * installed (a cluster's takeover)... */
        uint64_t taken_over_kept;   /* ...the same event: kept, with its
                                     * history. */
        uint64_t handed_resent; /* Satisfactions handed over by another
                                 * TEM's agent, sent to this TEM. */
        uint64_t handed_dropped;    /* Handed over by this TEM's agent,
                                     * but the event has no owner now
                                     * (removed), or the new owner's
                                     * agent dropped it. */
    } tem;
};

static void watch_losses(struct replay *);

/* Returns the index of TEM event 'id' in the events of link 'l', or
 * SIZE_MAX. */
static size_t
tem_find(const struct tem_link *l, uint32_t id)
{
    for (size_t i = 0; i < l->n_ids; i++) {
        if (l->ids[i] == id) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* Returns the link that installed TEM event 'id' and its index there in
 * '*ip', or NULL. */
static struct tem_link *
tem_owner(const struct replay *r, uint32_t id, size_t *ip)
{
    for (size_t i = 0; i < r->n_links; i++) {
        size_t j = tem_find(&r->links[i], id);
        if (j != SIZE_MAX) {
            *ip = j;
            return &r->links[i];
        }
    }
    return NULL;
}

/* Iterates over the TEM events installed, of every link: link L, its
 * event L->ids[I]. */
#define TEM_FOR_EACH_EVENT(R, L, I) \
    for (struct tem_link *L = (R)->links; L < (R)->links + (R)->n_links; \
         L++) \
        for (size_t I = 0; I < L->n_ids; I++)

static void
print_json(struct json_object *obj)
{
    puts(json_object_to_json_string_ext(
        obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(obj);
}

static void
drain_reports(struct replay *r)
{
    struct tpm_report rep;
    bool printed = false;

    while (tpm_pop_report(r->tpm, &rep)) {
        if (rep.type != TPM_REPORT_SATISFIED) {
            free(rep.error);
            continue;
        }
        if (rep.event_id >= LOCAL_ID_BASE) {
            print_json(tpm_report_to_json(
                           r->events[rep.event_id - LOCAL_ID_BASE], &rep));
        } else {
            /* A TEM event: to the TEM, and printed.  It may have been
             * removed since the sweep queued the report. */
            const struct tpm_event *ev = tpm_event_get(r->tpm, rep.event_id);
            size_t idx;
            struct tem_link *l = tem_owner(r, rep.event_id, &idx);
            if (!ev || !l) {
                r->reports_unknown++;
                continue;
            }
            l->tem.reports++;
            if (rep.group.tun && !tpm_agent_sends_tenants(l->agent)) {
                l->tem.reports_tenant++;
            } else if (!tpm_agent_send_satisfaction(l->agent,
                                                    rep.event_id, rep.epoch,
                                                    &rep.group, rep.tun_id,
                                                    rep.value, rep.flags, 1,
                                                    0)) {
                l->tem.reports_dropped++;
            }
            struct json_object *obj = tpm_report_to_json(ev, &rep);
            json_object_object_add(obj, "tem",
                                   json_object_new_boolean(true));
            print_json(obj);
        }
        r->n_reports++;
        if (rep.event_id >= LOCAL_ID_BASE) {
            /* Installed before the capture: only a loss makes one
             * partial.  (The TEM installs its events when it chooses, so
             * their first intervals are partial by design.) */
            r->n_partial += (rep.flags & TPM_REPORT_PARTIAL) != 0;
        }
        printed = true;
    }
    if (printed && (r->realtime || r->n_links)) {
        fflush(stdout);
    }
}

/* A sweep step, and the reports it made.  Without a budget (reading a
 * file) the sweep runs to completion, waiting for the report ring to be
 * drained whenever it fills. */
static void
sweep(struct replay *r)
{
    while (tpm_sweep_step(r->tpm, r->budget_ns) && !r->budget_ns) {
        drain_reports(r);
    }
    drain_reports(r);
}

/* Moves the monitor's clock forward to 'ns' (never back). */
static void
advance(struct replay *r, uint64_t ns)
{
    if (r->started && ns <= r->clock_ns) {
        return;
    }
    uint64_t epoch_ns = tpm_get_params(r->tpm)->epoch_ns;
    uint64_t from = r->clock_ns / epoch_ns, to = ns / epoch_ns;
    if (r->started && !r->budget_ns && to > from + 1) {
        /* Offline, across a gap in the capture: one epoch at a time, each
         * sweep run to completion while the reports are drained, until
         * every interval open at the last packet has closed; then the
         * jump, whose sweeps (forced inside tpm_advance(), which cannot
         * wait for a reader) have nothing left to report. */
        uint64_t longest = 1;
        for (size_t i = 0; i < r->n_events; i++) {
            longest = MAX(longest, r->events[i]->interval_ns / epoch_ns);
        }
        TEM_FOR_EACH_EVENT (r, l, i) {
            const struct tpm_event *ev = tpm_event_get(r->tpm, l->ids[i]);
            if (ev) {
                longest = MAX(longest, ev->interval_ns / epoch_ns);
            }
        }
        for (uint64_t e = from + 1; e < to && e <= from + 2 * longest + 2;
             e++) {
            tpm_advance(r->tpm, e * epoch_ns);
            sweep(r);
        }
    }
    r->started = true;
    r->clock_ns = ns;
    tpm_advance(r->tpm, ns);
}

/* Controller mode: TEM commands. */

/* What an install installs: two installs of an id with the same key
 * make the same event in the monitor. */
static char *
tem_install_key(const struct tpm_agent_cmd *cmd)
{
    return xasprintf("%s\n%s\n%d %.17g", cmd->name, cmd->definition,
                     cmd->has_threshold, cmd->has_threshold
                                         ? cmd->threshold : 0.0);
}

static void
tem_install(struct replay *r, struct tem_link *link,
            const struct tpm_agent_cmd *cmd)
{
    struct tpm_event *ev = NULL;
    char *error = NULL;

    link->tem.installs++;
    if (cmd->event_id >= LOCAL_ID_BASE) {
        error = xasprintf("event id %"PRIu32" is reserved for local events "
                          "on this host (TEM ids must be below %u)",
                          cmd->event_id, LOCAL_ID_BASE);
    } else {
        error = tpm_event_parse(cmd->name, cmd->definition, &ev);
        if (!error) {
            error = tpm_event_refuse_ports(ev, TEM_NO_PORTS);
        }
    }
    if (!error && cmd->has_threshold
        && !tpm_event_set_threshold(ev, cmd->threshold)) {
        error = xasprintf("event %s: no constant threshold to replace with "
                          "this host's share %.17g", cmd->name,
                          cmd->threshold);
    }
    char *key = NULL;
    if (!error) {
        /* Installing an id again replaces it: the TEM's latest word wins,
         * and of a cluster's TEMs the one that installed it last (it took
         * the event over).  Another TEM's event installed the same way is
         * kept, with its history, and what that TEM's agent holds
         * unconfirmed of it is handed over to this one. */
        size_t i = 0;
        struct tem_link *owner = tem_owner(r, cmd->event_id, &i);
        key = tem_install_key(cmd);
        bool same = owner && owner != link && !strcmp(owner->defs[i], key);
        if (owner) {
            if (!same) {
                tpm_event_del(r->tpm, cmd->event_id);
            }
            free(owner->defs[i]);
            owner->ids[i] = owner->ids[--owner->n_ids];
            owner->defs[i] = owner->defs[owner->n_ids];
            if (owner != link) {
                link->tem.taken_over++;
                link->tem.taken_over_kept += same;
                tpm_agent_hand_over(owner->agent, cmd->event_id, true);
            }
        }
        tpm_agent_hand_over(link->agent, cmd->event_id, false);
        if (same) {
            tpm_event_destroy(ev);
            ev = NULL;
        } else {
            error = tpm_event_add(r->tpm, ev, cmd->event_id);
        }
    }
    if (error) {
        link->tem.install_errors++;
        free(key);
        tpm_event_destroy(ev);
        cli_warn("TEM install of event %"PRIu32" (%s) refused: %s",
             cmd->event_id, cmd->name, error);
        tpm_agent_send_nack(link->agent, cmd->cookie, cmd->event_id, error);
        free(error);
        return;
    }
    if (link->n_ids >= link->allocated_ids) {
        link->allocated_ids = link->allocated_ids ? 2 * link->allocated_ids
                                                  : 16;
        link->ids = xrealloc(link->ids,
                             link->allocated_ids * sizeof *link->ids);
        link->defs = xrealloc(link->defs,
                              link->allocated_ids * sizeof *link->defs);
    }
    link->defs[link->n_ids] = key;
    link->ids[link->n_ids++] = cmd->event_id;
    tpm_agent_send_ack(link->agent, cmd->cookie, cmd->event_id);
}

/* Removes TEM event 'cmd->event_id' if 'link' installed it.  One that
 * another TEM of the cluster installed since (took over) is acked and
 * left: the TEM asking no longer has it here, which is what it asks, and
 * the owner still wants it (a nack would report an error for the
 * ordinary order of a rebalance, the new owner's install first). */
static void
tem_remove(struct replay *r, struct tem_link *link,
           const struct tpm_agent_cmd *cmd)
{
    size_t i = tem_find(link, cmd->event_id), j;

    link->tem.removes++;
    if (i == SIZE_MAX && tem_owner(r, cmd->event_id, &j)) {
        tpm_agent_send_ack(link->agent, cmd->cookie, cmd->event_id);
        return;
    }
    if (i == SIZE_MAX || tpm_event_del(r->tpm, cmd->event_id)) {
        link->tem.remove_errors++;
        tpm_agent_send_nack(link->agent, cmd->cookie, cmd->event_id,
                            "no such trigger");
        return;
    }
    free(link->defs[i]);
    link->ids[i] = link->ids[--link->n_ids];
    link->defs[i] = link->defs[link->n_ids];
    tpm_agent_send_ack(link->agent, cmd->cookie, cmd->event_id);
}

static Trumpet__PollStatus
poll_status_to_msg(enum tpm_poll_status status)
{
    switch (status) {
    case TPM_POLL_OK: return TRUMPET__POLL_STATUS__POLL_OK;
    case TPM_POLL_NOT_YET: return TRUMPET__POLL_STATUS__POLL_NOT_YET;
    case TPM_POLL_EXPIRED: return TRUMPET__POLL_STATUS__POLL_EXPIRED;
    case TPM_POLL_NO_GROUP: return TRUMPET__POLL_STATUS__POLL_NO_GROUP;
    case TPM_POLL_NO_EVENT: return TRUMPET__POLL_STATUS__POLL_NO_EVENT;
    default: return TRUMPET__POLL_STATUS__POLL_NO_EVENT;
    }
}

static void
tem_poll(struct replay *r, struct tem_link *link,
         const struct tpm_agent_cmd *cmd)
{
    enum tpm_poll_status status = TPM_POLL_NO_EVENT;
    double value = 0;

    link->tem.polls++;
    if (tem_find(link, cmd->event_id) != SIZE_MAX) {
        status = tpm_poll(r->tpm, cmd->event_id, &cmd->group, cmd->tun_id,
                          0, cmd->epoch, &value);
    }
    tpm_agent_send_poll_reply(link->agent, cmd->cookie, cmd->event_id,
                              cmd->epoch, poll_status_to_msg(status),
                              value);
}

/* A PollBatch: every entry answered from the monitor, in one reply. */
static void
tem_poll_batch(struct replay *r, struct tem_link *link,
               const struct tpm_agent_cmd *cmd)
{
    uint8_t *status = xmalloc(cmd->n_entries);
    double *values = xcalloc(cmd->n_entries, sizeof *values);

    link->tem.polls += cmd->n_entries;
    for (size_t i = 0; i < cmd->n_entries; i++) {
        enum tpm_poll_status st = TPM_POLL_NO_EVENT;
        if (tem_find(link, cmd->event_ids[i]) != SIZE_MAX) {
            st = tpm_poll(r->tpm, cmd->event_ids[i], &cmd->groups[i],
                          cmd->tun_ids[i], 0, cmd->epoch, &values[i]);
        }
        status[i] = poll_status_to_msg(st);
    }
    tpm_agent_send_poll_batch_reply(link->agent, cmd->cookie, cmd->epoch,
                                    status, values, cmd->n_entries);
    free(status);
    free(values);
}

/* Applies the TEM's settings to the monitor (this thread owns it: the
 * replay has no other) and acks. */
static void
tem_configure(struct replay *r, struct tem_link *link,
              const struct tpm_agent_cmd *cmd)
{
    link->tem.configures++;
    if (cmd->has_dos_threshold) {
        tpm_set_dos_threshold(r->tpm, cmd->dos_threshold);
        /* What the monitor now uses. */
        cli_warn("DoS threshold: %"PRIu32" bytes (set by TEM)",
             tpm_get_params(r->tpm)->dos_threshold);
    }
    tpm_agent_send_ack(link->agent, cmd->cookie, cmd->event_id);
}

/* A new session: forget the TEM's events, it installs them again (those
 * another TEM took over since are that TEM's). */
static void
tem_resync(struct replay *r, struct tem_link *link)
{
    link->tem.resyncs++;
    for (size_t i = 0; i < link->n_ids; i++) {
        tpm_event_del(r->tpm, link->ids[i]);
        free(link->defs[i]);
    }
    link->n_ids = 0;
}

/* Sends what link 'l''s agent handed over to the events' owners now. */
static void
tem_take_handed(struct replay *r, struct tem_link *l)
{
    struct tpm_agent_report h[64];
    size_t n;

    while ((n = tpm_agent_take_handed(l->agent, h, ARRAY_SIZE(h)))) {
        for (size_t i = 0; i < n; i++) {
            size_t idx;
            struct tem_link *owner = tem_owner(r, h[i].event_id, &idx);
            if (owner && owner != l
                && tpm_agent_send_handed(owner->agent, &h[i])) {
                owner->tem.handed_resent++;
            } else {
                l->tem.handed_dropped++;
            }
        }
    }
}

/* Handles up to CMDS_PER_CALL commands from each TEM.  Returns the
 * number handled. */
static int
handle_commands(struct replay *r)
{
    struct tpm_agent_cmd cmd;
    int n = 0;

    if (!r->n_links) {
        return 0;
    }
    uint64_t now = tpm_clock_mono_ns();
    if (now - r->counters_ns >= 100 * 1000 * 1000) {
        /* The monitor's counters, for the heartbeats (the TEM's
         * metrics). */
        struct tpm_stats st;
        tpm_get_stats(r->tpm, &st);
        struct tproto_host_counters c = {
            .packets = st.packets, .bytes = st.bytes,
            .sweeps = st.sweeps_done,
            .sweeps_unfinished = st.sweeps_unfinished,
            .reports = st.reports, .reports_dropped = st.reports_dropped,
            .dos_skipped = st.dos_skipped_pkts, .dos_passed = st.dos_passed,
        };
        for (size_t i = 0; i < r->n_links; i++) {
            tpm_agent_set_counters(r->links[i].agent, &c);
        }
        r->counters_ns = now;
    }
    for (size_t i = 0; i < r->n_links; i++) {
        struct tem_link *l = &r->links[i];
        for (int k = 0; k < CMDS_PER_CALL && tpm_agent_recv(l->agent, &cmd);
             k++) {
            switch (cmd.type) {
            case TPM_AGENT_INSTALL:
                tem_install(r, l, &cmd);
                break;
            case TPM_AGENT_REMOVE:
                tem_remove(r, l, &cmd);
                break;
            case TPM_AGENT_POLL:
                tem_poll(r, l, &cmd);
                break;
            case TPM_AGENT_POLL_BATCH:
                tem_poll_batch(r, l, &cmd);
                break;
            case TPM_AGENT_RESYNC:
                tem_resync(r, l);
                break;
            case TPM_AGENT_CONFIGURE:
                tem_configure(r, l, &cmd);
                break;
            default:
                break;
            }
            tpm_agent_cmd_free(&cmd);
            n++;
        }
        tem_take_handed(r, l);
    }
    return n;
}

/* Sleeps up to 'ns', waking early when a TEM command arrives. */
static void
wait_ns(const struct replay *r, uint64_t ns)
{
    struct timespec ts = { ns / NS_PER_S, ns % NS_PER_S };
    if (r->n_links) {
        struct pollfd *pfds = xcalloc(r->n_links, sizeof *pfds);
        for (size_t i = 0; i < r->n_links; i++) {
            pfds[i].fd = tpm_agent_fd(r->links[i].agent);
            pfds[i].events = POLLIN;
        }
        ppoll(pfds, r->n_links, &ts, NULL);
        free(pfds);
    } else {
        nanosleep(&ts, NULL);
    }
}

/* Serves the TEM and runs background work (sweeps) until the wall clock
 * reaches 'until'.  The monitor's clock follows the wall clock, but not
 * past 'cap' (the next packet's time, or the clock itself when the capture
 * sets the clock). */
static void
idle_until(struct replay *r, uint64_t until, uint64_t cap)
{
    for (;;) {
        handle_commands(r);
        uint64_t now = tpm_clock_real_ns();
        if (r->started) {
            advance(r, MIN(now, cap));
        }
        bool more = r->started && tpm_sweep_step(r->tpm, r->budget_ns);
        drain_reports(r);
        if (now >= until) {
            return;
        }
        if (more) {
            continue;
        }
        /* Nothing to do before the next epoch (which starts a sweep), the
         * deadline, or a command. */
        uint64_t wake = until;
        if (r->started && r->clock_ns < cap) {
            uint64_t next_epoch = (r->clock_ns / r->epoch_ns + 1)
                                  * r->epoch_ns;
            wake = MIN(wake, MAX(next_epoch, now));
        }
        if (wake > now) {
            wait_ns(r, wake - now);
        }
    }
}

static void
flush_batch(struct replay *r)
{
    if (r->n) {
        tpm_process_batch_at(r->tpm, r->batch, r->batch_ts, r->n);
        r->n = 0;
        sweep(r);
        if (!(++r->n_batches % LOSS_WATCH_BATCHES)) {
            watch_losses(r);
        }
    }
    handle_commands(r);
}

/* Feeds one packet at time 'ns'. */
static void
feed(struct replay *r, uint64_t ns, const struct pcap_pkthdr *hdr,
     const u_char *data)
{
    if (ns < r->last_ns) {
        ns = r->last_ns;        /* Out-of-order capture: hold the clock. */
    }
    uint64_t epoch = ns / r->epoch_ns;
    if (r->n && (r->n == TPM_BATCH_MAX || epoch != r->batch_epoch)) {
        flush_batch(r);
    }
    if (!r->n) {
        advance(r, ns);
        r->batch_epoch = epoch;
    }
    uint32_t caplen = MIN(hdr->caplen, sizeof r->bufs[r->n]);
    memcpy(r->bufs[r->n], data, caplen);
    r->batch[r->n].data = r->bufs[r->n];
    r->batch[r->n].caplen = caplen;
    r->batch[r->n].wirelen = hdr->len;
    r->batch_ts[r->n] = ns;
    r->n++;
    r->last_ns = ns;
    r->n_packets++;
}

/* Longest shift of a capture in time (real time, --loop) that is rounded
 * to keep the intervals' phase; beyond, only epochs keep it. */
#define ALIGN_MAX_NS (10 * NS_PER_S)

/* Returns the least common multiple of the epoch and of the installed
 * events' intervals, or the epoch if that exceeds ALIGN_MAX_NS: shifting
 * the capture by a multiple of it changes no interval's contents. */
static uint64_t
interval_lcm(const struct replay *r)
{
    uint64_t l = r->epoch_ns;
    for (size_t i = 0; i < r->n_events; i++) {
        uint64_t iv = r->events[i]->interval_ns;
        l = l / gcd_u64(l, iv) * iv;
        if (l > ALIGN_MAX_NS) {
            return r->epoch_ns;
        }
    }
    TEM_FOR_EACH_EVENT (r, link, i) {
        uint64_t iv = tpm_event_get(r->tpm, link->ids[i])->interval_ns;
        l = l / gcd_u64(l, iv) * iv;
        if (l > ALIGN_MAX_NS) {
            return r->epoch_ns;
        }
    }
    return l;
}

/* Replays 'file' once, its timestamps shifted by 'shift' ns (when
 * 'have_shift'; in real time the first pass sets it so that its first
 * packet is now).  Stores the capture's first and latest timestamps. */
static void
replay_pass(struct replay *r, const char *file, int64_t *shift,
            bool *have_shift, uint64_t *first_ns, uint64_t *last_ns)
{
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t *pcap = pcap_open_offline_with_tstamp_precision(
        file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!pcap) {
        cli_die("%s", errbuf);
    }
    if (pcap_datalink(pcap) != DLT_EN10MB) {
        cli_die("%s: link type %s, expected Ethernet", file,
            pcap_datalink_val_to_name(pcap_datalink(pcap)));
    }

    struct pcap_pkthdr *hdr;
    const u_char *data;
    bool first = true;
    int rc;
    while ((rc = pcap_next_ex(pcap, &hdr, &data)) == 1) {
        uint64_t cap_ns = (uint64_t) hdr->ts.tv_sec * NS_PER_S
                          + hdr->ts.tv_usec;
        if (first) {
            *first_ns = *last_ns = cap_ns;
            first = false;
        }
        *last_ns = MAX(*last_ns, cap_ns);
        if (!*have_shift) {
            /* Now (or --start-at, if later), rounded up so that intervals
             * keep their phase: hosts given the same --start-at and
             * captures with the same first timestamp start in the same
             * interval. */
            uint64_t align = interval_lcm(r);
            uint64_t start = MAX(tpm_clock_real_ns(), r->start_ns);
            *shift = r->realtime
                     ? (int64_t) (ROUND_UP(start - cap_ns, align))
                     : 0;
            *have_shift = true;
        }
        uint64_t ns = cap_ns + *shift;
        if (r->realtime && ns > tpm_clock_real_ns()) {
            flush_batch(r);
            idle_until(r, ns, ns);
        }
        feed(r, ns, hdr, data);
    }
    if (rc == -1) {
        cli_die("%s: %s", file, pcap_geterr(pcap));
    }
    pcap_close(pcap);
    flush_batch(r);
}

/* Returns the first link of 'r' whose agent is not in state 'state' (or,
 * 'refused', is refused), or NULL; its status in '*s'. */
static struct tem_link *
tem_link_not(const struct replay *r, enum tpm_agent_state state,
             bool refused, struct tpm_agent_status *s)
{
    for (size_t i = 0; i < r->n_links; i++) {
        tpm_agent_get_status(r->links[i].agent, s);
        if (refused ? s->state == TPM_AGENT_REFUSED : s->state != state) {
            return &r->links[i];
        }
    }
    return NULL;
}

/* Controller mode, before the capture: waits for the session with every
 * TEM and their first installs. */
static void
wait_for_tem(struct replay *r, uint64_t timeout_ns, uint64_t settle_ns,
             bool required)
{
    uint64_t start = tpm_clock_mono_ns();
    uint64_t deadline = start + timeout_ns;
    uint64_t last_cmd = 0;
    struct tpm_agent_status s;

    for (;;) {
        uint64_t now = tpm_clock_mono_ns();
        if (handle_commands(r)) {
            last_cmd = now;
        }
        bool all = !tem_link_not(r, TPM_AGENT_CONNECTED, false, &s);
        if (all && last_cmd && now - last_cmd >= settle_ns) {
            return;             /* Welcomed, installs settled. */
        }
        if (now >= deadline) {
            break;
        }
        if (required && tem_link_not(r, 0, true, &s)) {
            break;
        }
        uint64_t wake = now + 10 * NS_PER_MS;
        if (last_cmd && last_cmd + settle_ns > now) {
            wake = MIN(wake, last_cmd + settle_ns);
        }
        wait_ns(r, MIN(wake, deadline) - now);
    }

    char timeout[32];
    tpm_time_format(timeout_ns, timeout, sizeof timeout);
    /* Those welcomed may still be installing: go on. */
    for (size_t i = 0; i < r->n_links; i++) {
        const struct tem_link *l = &r->links[i];
        tpm_agent_get_status(l->agent, &s);
        if (s.state == TPM_AGENT_CONNECTED) {
            continue;
        }
        if (required) {
            cli_die("TEM at %s not reached within %s (%s): %s", l->endpoint,
                    timeout, tpm_agent_state_name(s.state),
                    s.last_error[0] ? s.last_error : "no connection yet");
        }
        cli_warn("TEM at %s not reached within %s (%s%s%s); replaying "
                 "anyway, still trying", l->endpoint, timeout,
                 tpm_agent_state_name(s.state), s.last_error[0] ? ": " : "",
                 s.last_error);
    }
}

/* The option that raises the table behind loss counter 'l' (one of
 * tpm_losses), and that table's size now; NULL for the losses that no
 * table size causes. */
static const char *
loss_option(const struct replay *r, const struct tpm_loss *l,
            uint32_t *size)
{
    const struct tpm_params *p = tpm_get_params(r->tpm);
    static const struct {
        const char *loss;
        const char *option;
        size_t offset;
    } tables[] = {
        { "flow_evictions", "--flow-table-size",
          offsetof(struct tpm_params, flow_table_size) },
        { "children_dropped", "--max-triggers",
          offsetof(struct tpm_params, max_triggers) },
        { "chunks_exhausted", "--max-chunks",
          offsetof(struct tpm_params, max_chunks) },
        { "tcp_state_exhausted", "--tcp-state-pool",
          offsetof(struct tpm_params, tcp_state_pool) },
        { "tun_slots_full", "--tenant-slots",
          offsetof(struct tpm_params, tenant_slots) },
    };
    for (size_t i = 0; i < ARRAY_SIZE(tables); i++) {
        if (!strcmp(l->name, tables[i].loss)) {
            memcpy(size, (const char *) p + tables[i].offset, sizeof *size);
            return tables[i].option;
        }
    }
    return NULL;
}

/* Names on stderr, once each, the tables that have run out so far: the
 * run goes on (its output will say what it saw), but an operator learns
 * early that its exit status will be EXIT_INCOMPLETE. */
static void
watch_losses(struct replay *r)
{
    struct tpm_stats s;
    tpm_get_stats(r->tpm, &s);
    for (size_t i = 0; i < TPM_N_LOSSES; i++) {
        const struct tpm_loss *l = &tpm_losses[i];
        uint32_t size;
        const char *option = loss_option(r, l, &size);
        if (option && !r->loss_named[i] && tpm_loss_get(&s, l)) {
            r->loss_named[i] = true;
            cli_warn("%s, after %"PRIu64" packets: the output will miss "
                     "data (exit status %d); raise %s (now %"PRIu32")",
                     l->what, r->n_packets, EXIT_INCOMPLETE, option, size);
        }
    }
}

/* If the run lost anything, names the counters on stderr, with the option
 * that raises each table that ran out, and returns true. */
static bool
report_loss(const struct replay *r)
{
    struct tpm_stats s;
    tpm_get_stats(r->tpm, &s);
    struct tpm_agent_status a;
    memset(&a, 0, sizeof a);
    for (size_t i = 0; i < r->n_links; i++) {
        struct tpm_agent_status b;
        tpm_agent_get_status(r->links[i].agent, &b);
        a.dropped_outage += b.dropped_outage;
        a.pending += b.pending;
        a.dropped_tenant += b.dropped_tenant;
    }
    const struct {
        const char *what;
        uint64_t n;
    } ours[] = {
        { "values partial (local events)", r->n_partial },
        { "satisfactions and poll replies the agent dropped (outage "
          "buffer or queue full)", a.dropped_outage },
        { "satisfactions and poll replies the TEM had not confirmed at "
          "exit", a.pending },
        { "satisfactions of tenants' groups the agent dropped (kept for "
          "a TEM of protocol version older than 4)", a.dropped_tenant },
    };
    bool lossy = false;
    for (size_t i = 0; i < TPM_N_LOSSES + ARRAY_SIZE(ours); i++) {
        const char *what, *option = NULL;
        uint32_t size = 0;
        uint64_t n;
        if (i < TPM_N_LOSSES) {
            what = tpm_losses[i].what;
            n = tpm_loss_get(&s, &tpm_losses[i]);
            option = loss_option(r, &tpm_losses[i], &size);
        } else {
            what = ours[i - TPM_N_LOSSES].what;
            n = ours[i - TPM_N_LOSSES].n;
        }
        if (n) {
            if (!lossy) {
                cli_warn("incomplete: the output misses data (exit status "
                         "%d):", EXIT_INCOMPLETE);
            }
            fprintf(stderr, "  %s: %"PRIu64, what, n);
            if (option) {
                fprintf(stderr, " (raise %s, now %"PRIu32")", option, size);
            }
            fputc('\n', stderr);
            lossy = true;
        }
    }
    return lossy;
}

static void
print_stats(const struct replay *r)
{
    struct tpm_stats s;
    tpm_get_stats(r->tpm, &s);
    struct json_object *o = json_object_new_object();
#define STAT(F) json_object_object_add(o, #F, json_object_new_int64(s.F))
    STAT(packets); STAT(bytes); STAT(non_ip); STAT(batches);
    STAT(lastflow_hits); STAT(flow_inserts); STAT(flow_reuses);
    STAT(flow_evictions); STAT(flows_freed); STAT(flows_retired);
    STAT(flows_live);
    STAT(matches); STAT(match_overflow); STAT(summary_overflow);
    STAT(dos_skipped_pkts); STAT(dos_passed); STAT(dos_precheck_pkts);
    STAT(dos_removed_collision);
    STAT(dos_removed_sweep);
    json_object_object_add(o, "dos_threshold", json_object_new_int64(
                               tpm_get_params(r->tpm)->dos_threshold));
    STAT(children_created); STAT(children_dropped);
    STAT(children_expired); STAT(chunks_exhausted); STAT(backfilled);
    STAT(sweeps_started); STAT(sweeps_done); STAT(sweeps_unfinished);
    STAT(sweeps_forced); STAT(sweep_steps); STAT(sweep_flows);
    STAT(sweep_stale_items); STAT(sweep_skipped); STAT(epochs);
    STAT(epochs_skipped);
    STAT(reports); STAT(reports_dropped); STAT(sweep_waits);
    STAT(triggers); STAT(events);
    STAT(sweep_ns_p50); STAT(sweep_ns_p99); STAT(sweep_ns_max);
    STAT(tcp_states); STAT(tcp_state_exhausted); STAT(tcp_state_freed);
    STAT(not_parsed);
    for (int i = 0; i < TPM_PARSE_N_REASONS; i++) {
        if (i != TPM_PARSE_NON_IP) {    /* Already there as non_ip. */
            json_object_object_add(o, tpm_parse_reason_name(i),
                                   json_object_new_int64(
                                       s.parse.not_parsed[i]));
        }
    }
    json_object_object_add(o, "l4_truncated",
                           json_object_new_int64(s.parse.l4_truncated));
    json_object_object_add(o, "ip_len_from_frame",
                           json_object_new_int64(s.parse.ip_len_from_frame));
    json_object_object_add(o, "tun_decapsulated",
                           json_object_new_int64(s.parse.tun_decapsulated));
    json_object_object_add(o, "tun_not_decapsulated",
                           json_object_new_int64(
                               s.parse.tun_not_decapsulated));
    STAT(tun_slots_full); STAT(tenants); STAT(tun_underlay);
#undef STAT

    /* The table sizes in force, and what the capture's census counted
     * when they were sized from it. */
    const struct tpm_params *p = tpm_get_params(r->tpm);
    const struct replay_census *c = &r->sizing.census;
    struct json_object *z = json_object_new_object();
#define ZST(NAME, V) \
    json_object_object_add(z, NAME, json_object_new_int64(V))
    json_object_object_add(z, "from_capture",
                           json_object_new_boolean(r->sizing.scanned));
    if (r->sizing.scanned) {
        ZST("capture_packets", c->packets);
        ZST("capture_flows", c->flows);
        ZST("capture_instances", c->instances);
        ZST("capture_max_instances", c->max_instances);
        ZST("capture_chunks", c->chunks);
        ZST("capture_state_flows", c->state_flows);
        ZST("longest_cluster", r->sizing.longest_cluster);
        ZST("census_ms", r->sizing.scan_ns / NS_PER_MS);
    }
    ZST("flow_table_size", p->flow_table_size);
    ZST("probe_limit", p->flow_probe_limit);
    ZST("max_triggers", p->max_triggers);
    ZST("max_children", p->max_children);
    ZST("max_chunks", p->max_chunks);
    ZST("tcp_state_pool", p->tcp_state_pool);
    ZST("table_memory", r->sizing.memory);
    ZST("max_table_memory", r->sizing.limit);
#undef ZST
    json_object_object_add(o, "sizing", z);

    /* "tem": the first TEM's; "tems": every TEM's, in the order of
     * --controller. */
    struct json_object *tems = json_object_new_array();
    for (size_t li = 0; li < r->n_links; li++) {
        const struct tem_link *l = &r->links[li];
        struct tpm_agent_status a;
        tpm_agent_get_status(l->agent, &a);
        struct json_object *t = json_object_new_object();
        json_object_object_add(t, "endpoint",
                               json_object_new_string(l->endpoint));
        json_object_object_add(t, "state", json_object_new_string(
                                   tpm_agent_state_name(a.state)));
        json_object_object_add(t, "tem_id", json_object_new_string(
                                   a.tem_id));
#define AST(F) json_object_object_add(t, #F, json_object_new_int64(a.F))
        AST(version); AST(sessions); AST(reconnects); AST(frames_in);
        AST(frames_out); AST(msgs_in); AST(msgs_out); AST(invalid_in);
        AST(drops_in); AST(drops_out);
        json_object_object_add(t, "agent_reports",
                               json_object_new_int64(a.reports));
        AST(acked); AST(unconfirmed); AST(dropped_outage);
        AST(dropped_tenant); AST(handed_over); AST(pending);
        AST(late_sent);
#undef AST
#define TST(F) json_object_object_add(t, #F, \
                                      json_object_new_int64(l->tem.F))
        TST(installs); TST(install_errors); TST(removes);
        TST(remove_errors); TST(polls); TST(resyncs); TST(reports);
        TST(reports_dropped); TST(reports_tenant);
        TST(configures); TST(taken_over); TST(taken_over_kept);
        TST(handed_resent); TST(handed_dropped);
#undef TST
        json_object_object_add(t, "reports_unknown",
                               json_object_new_int64(r->reports_unknown));
        json_object_object_add(t, "last_error", json_object_new_string(
                                   a.last_error));
        if (!li) {
            json_object_object_add(o, "tem", json_object_get(t));
        }
        json_object_array_add(tems, t);
    }
    if (r->n_links) {
        json_object_object_add(o, "tems", tems);
    } else {
        json_object_put(tems);
    }
    fprintf(stderr, "%s\n",
            json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
}

/* Returns true if 'file' can be read twice: a regular file, not standard
 * input ("-") nor a pipe. */
static bool
is_regular_file(const char *file)
{
    struct stat st;
    return strcmp(file, "-") && !stat(file, &st) && S_ISREG(st.st_mode);
}

/* Returns the bytes of memory that one more flow-table entry takes (the
 * entry and, with a connection pool, its connection reference). */
static uint64_t
flow_entry_bytes(const struct tpm_params *params)
{
    struct tpm_params a = *params, b = *params;
    a.flow_table_size = 1u << 20;
    b.flow_table_size = 1u << 21;
    return (tpm_params_memory(&b) - tpm_params_memory(&a)) >> 20;
}

/* Formats 'bytes' as mebibytes, one decimal, into 'buf'. */
static char *
format_mib(uint64_t bytes, char *buf, int size)
{
    snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

/* Refuses to size the tables for capture 'file' because of 'what': over
 * the memory limit ('memory'), or over one of the monitor's limits. */
static void __attribute__((noreturn))
refuse_sizes(const char *file, const char *what,
             const struct table_options *set, bool memory)
{
    char raise[64] = "", limit[32];
    if (memory) {
        snprintf(raise, sizeof raise, "raise --max-table-memory (now %s), "
                 "or ", cli_format_bytes(set->memory_limit, limit,
                                         sizeof limit));
    }
    cli_die("%s: %s; %sgive the table sizes (--flow-table-size, "
            "--max-triggers, --max-chunks, --tcp-state-pool): a table that "
            "then runs out is named on stderr and the exit status is %d",
            file, what, raise, EXIT_INCOMPLETE);
}

/* Sizes the tables of 'params' that no option in 'set' sized, from the
 * capture 'file' when it is a regular file read at the monitor's own pace
 * (replay-sizing.h says what is counted and why each bound holds), and
 * refuses (exit 1) a capture whose tables would exceed the memory limit.
 * From a pipe or with --realtime, the defaults stay, as on a switch.  The
 * per-event bound on instances follows --max-triggers: a replay has one
 * monitor, and one event may need every instance. */
static void
size_tables(struct replay *r, const char *file, struct tpm_params *params,
            const struct table_options *set, uint64_t loops, bool controller)
{
    struct tpm_params defaults;
    tpm_params_init(&defaults);
    r->sizing.limit = set->memory_limit;

    bool any_state = false;
    for (size_t i = 0; i < r->n_events; i++) {
        any_state |= tpm_event_needs_tcp_state(r->events[i]);
    }
    if (!r->realtime && is_regular_file(file)
        && (!set->flow_table || !set->triggers || !set->chunks
            || (!set->tcp_state_pool && any_state))) {
        struct replay_census *c = &r->sizing.census;
        char what[512], mib[32];

        /* No capture whose flows alone would take the flow table over
         * the limit (two entries per flow at least) is read to its end. */
        uint64_t max_flows = set->memory_limit / flow_entry_bytes(params)
                             / 2;
        uint64_t start = tpm_clock_mono_ns();
        char *error = replay_census(file, r->events, r->n_events,
                                    params->epoch_ns, loops, max_flows, c);
        if (error) {
            cli_die("%s", error);
        }
        r->sizing.scan_ns = tpm_clock_mono_ns() - start;
        r->sizing.scanned = true;
        if (c->truncated) {
            snprintf(what, sizeof what, "it holds more than %"PRIu64
                     " flows, whose flow table alone would take more than "
                     "the memory limit", max_flows);
            refuse_sizes(file, what, set, true);
        }

        if (!set->flow_table) {
            uint32_t size = replay_flow_table_size(
                c, params->flow_probe_limit, defaults.flow_table_size,
                1u << 28, &r->sizing.longest_cluster);
            if (!size) {
                snprintf(what, sizeof what, "no flow table of up to 2^28 "
                         "entries keeps its %"PRIu64" flows within "
                         "--probe-limit %"PRIu32, c->flows,
                         params->flow_probe_limit);
                refuse_sizes(file, what, set, false);
            }
            params->flow_table_size = size;
        }
        /* At most one instance per event and group at once: the count is
         * exact, no margin.  A TEM's events (controller mode) are not
         * known yet: they keep the default room on top. */
        uint64_t tem_room = controller ? defaults.max_triggers : 0;
        if (!set->triggers) {
            params->max_triggers = MAX(defaults.max_triggers,
                                       c->instances + tem_room);
        }
        /* The chunk bound may miss the items of a flow matched again
         * before the sweep dropped its previous entry's (within the same
         * epoch): an eighth more covers them. */
        if (!set->chunks) {
            params->max_chunks = MAX(defaults.max_chunks,
                                     c->chunks + c->chunks / 8
                                     + (controller ? defaults.max_chunks
                                        : 0));
        }
        /* A connection whose flows have gone waits for the scrubber to
         * come back to the pool: an eighth more. */
        if (!set->tcp_state_pool && c->state_flows) {
            params->tcp_state_pool = MAX(defaults.tcp_state_pool,
                                         c->state_flows
                                         + c->state_flows / 8);
        }

        static const struct {
            const char *what;
            size_t offset;
            uint64_t max;
        } limits[] = {
            { "trigger instances",
              offsetof(struct tpm_params, max_triggers), 1u << 26 },
            { "flow-list chunks",
              offsetof(struct tpm_params, max_chunks), 1u << 26 },
            { "connections with TCP state",
              offsetof(struct tpm_params, tcp_state_pool), 1u << 24 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
            uint32_t v;
            memcpy(&v, (const char *) params + limits[i].offset, sizeof v);
            if (v > limits[i].max) {
                snprintf(what, sizeof what, "its %"PRIu64" flows need "
                         "%"PRIu32" %s, more than the monitor's limit of "
                         "%"PRIu64, c->flows, v, limits[i].what,
                         limits[i].max);
                refuse_sizes(file, what, set, false);
            }
        }
        r->sizing.memory = tpm_params_memory(params);
        if (r->sizing.memory > set->memory_limit) {
            snprintf(what, sizeof what, "the tables for its %"PRIu64
                     " flows (a flow table of %"PRIu32" entries, %"PRIu32
                     " trigger instances, %"PRIu32" flow-list chunks, "
                     "%"PRIu32" TCP states) would take %s", c->flows,
                     params->flow_table_size, params->max_triggers,
                     params->max_chunks, params->tcp_state_pool,
                     format_mib(r->sizing.memory, mib, sizeof mib));
            refuse_sizes(file, what, set, true);
        }
    }
    params->max_children = params->max_triggers;
    r->sizing.memory = tpm_params_memory(params);
}

/* Returns a host id made from the host name. */
static char *
default_host_id(void)
{
    char name[256];
    if (gethostname(name, sizeof name) || !name[0]) {
        return xstrdup("tpm-replay");
    }
    name[sizeof name - 1] = '\0';
    name[TPROTO_MAX_ID] = '\0';
    for (char *p = name; *p; p++) {
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    "0123456789_.:-", *p)) {
            *p = '-';
        }
    }
    return xstrdup(name);
}

/* Creates the monitor of 'r' with the options 'o' (the tables sized from
 * the capture, replay-sizing.h) and installs the local events. */
static void
replay_start(struct replay *r, struct replay_options *o)
{
    struct tpm_params *params = &o->params;
    char *error;

    r->events = o->events;
    r->n_events = o->n_events;
    r->budget_ns = params->sweep_budget_ns;
    r->realtime = o->realtime;
    r->start_ns = o->start_ns;
    r->epoch_ns = params->epoch_ns;
    size_tables(r, o->pcap, params, &o->tables, o->loops,
                o->controller != NULL);

    r->tpm = tpm_create(params, &error);
    if (!r->tpm) {
        cli_die("%s", error);
    }
    tpm_set_tunnel_ports(r->tpm, &o->tunnel_ports);
    for (size_t i = 0; i < r->n_events; i++) {
        /* The monitor takes ownership of a copy; 'r->events' keeps the
         * original for names and group masks. */
        struct tpm_event *copy = tpm_event_clone(r->events[i]);
        error = tpm_event_add(r->tpm, copy, LOCAL_ID_BASE + (uint32_t) i);
        if (error) {
            tpm_event_destroy(copy);
            cli_die("%s", error);
        }
    }
    r->bufs = xmalloc(TPM_BATCH_MAX * sizeof *r->bufs);
}

/* Controller mode: connects 'r' to the TEMs of 'o' as a host (an agent
 * each) and waits for their first installs. */
static void
replay_connect(struct replay *r, struct replay_options *o)
{
    struct tpm_agent_config ac;
    static const uint32_t pmd_ids[] = { 0 };
    char *error;

    tpm_agent_config_init(&ac);
    if (!o->host_id) {
        o->host_id = default_host_id();
    }
    ac.host_id = o->host_id;
    ac.prefixes = o->prefixes;
    ac.n_prefixes = o->n_prefixes;
    ac.epoch_ns = o->params.epoch_ns;
    ac.pmd_ids = pmd_ids;
    ac.n_pmds = ARRAY_SIZE(pmd_ids);
    ac.software = "tpm-replay";
    ac.key_file = o->host_key_file;
    ac.insecure_plaintext = o->insecure;
    if (o->outage_buffer) {
        ac.outage_buffer = o->outage_buffer;
    }
    r->links = xcalloc(o->n_controllers, sizeof *r->links);
    for (size_t i = 0; i < o->n_controllers; i++) {
        struct tem_link *l = &r->links[i];
        ac.endpoint = o->controllers[i];
        ac.tem_public_key = (!o->n_tem_keys ? NULL
                             : o->tem_keys[o->n_tem_keys > 1 ? i : 0]);
        l->endpoint = o->controllers[i];
        l->agent = tpm_agent_create(&ac, &error);
        if (!l->agent) {
            cli_die("--controller %s: %s", l->endpoint, error);
        }
        r->n_links++;
    }
    wait_for_tem(r, o->connect_timeout_ns, o->settle_ns, o->require);
}

/* Replays capture 'file' 'loops' times, then moves past the end of every
 * interval that saw packets and finishes the sweeps. */
static void
replay_run(struct replay *r, const char *file, uint64_t loops)
{
    /* Each pass after the previous one, a whole number of intervals
     * later. */
    int64_t shift = 0;
    bool have_shift = false;
    uint64_t first_ns = 0, last_ns = 0;
    for (uint64_t pass = 0; pass < loops; pass++) {
        replay_pass(r, file, &shift, &have_shift, &first_ns, &last_ns);
        if (!r->n_packets) {
            break;
        }
        shift += ROUND_UP(last_ns - first_ns + 1, interval_lcm(r));
    }

    /* Move past the end of every interval that saw packets and finish
     * the sweeps. */
    if (r->n_packets) {
        uint64_t end = 0;
        for (size_t i = 0; i < r->n_events; i++) {
            uint64_t iv = r->events[i]->interval_ns;
            end = MAX(end, (r->last_ns / iv + 1) * iv);
        }
        TEM_FOR_EACH_EVENT (r, l, i) {
            const struct tpm_event *ev = tpm_event_get(r->tpm, l->ids[i]);
            uint64_t iv = ev->interval_ns;
            end = MAX(end, (r->last_ns / iv + 1) * iv);
        }
        if (r->realtime) {
            /* The wall clock gets there: serve the TEM meanwhile. */
            idle_until(r, end, end);
        }
        advance(r, end);
        while (tpm_sweep_step(r->tpm, 0)) {
            drain_reports(r);
        }
        drain_reports(r);
    }
}

/* Controller mode, after the capture: keeps answering the TEM's polls for
 * 'linger_ns'; then gives the TEM a moment to confirm the last reports
 * (it does within a loop turn). */
static void
replay_linger(struct replay *r, uint64_t linger_ns)
{
    idle_until(r, tpm_clock_real_ns() + linger_ns,
               r->realtime ? UINT64_MAX : r->clock_ns);
    uint64_t until = tpm_clock_real_ns() + NS_PER_S;
    for (;;) {
        bool waiting = false;
        for (size_t i = 0; i < r->n_links; i++) {
            struct tpm_agent_status a;
            tpm_agent_get_status(r->links[i].agent, &a);
            waiting |= a.pending && a.state == TPM_AGENT_CONNECTED;
        }
        uint64_t now = tpm_clock_real_ns();
        if (!waiting || now >= until) {
            break;
        }
        idle_until(r, now + 10 * NS_PER_MS,
                   r->realtime ? UINT64_MAX : r->clock_ns);
    }
}

int
main(int argc, char *argv[])
{
    struct replay_options o;
    struct replay r;

    memset(&r, 0, sizeof r);
    cli_init("tpm-replay", EXIT_FAILURE);
    replay_options_parse(argc, argv, &o);
    replay_start(&r, &o);
    if (o.controller) {
        replay_connect(&r, &o);
    }
    replay_run(&r, o.pcap, o.loops);
    if (r.n_links) {
        replay_linger(&r, o.linger_ns);
    }
    fflush(stdout);
    if (o.stats) {
        print_stats(&r);
    }
    bool lossy = report_loss(&r);

    for (size_t i = 0; i < r.n_links; i++) {
        tpm_agent_destroy(r.links[i].agent);
        for (size_t j = 0; j < r.links[i].n_ids; j++) {
            free(r.links[i].defs[j]);
        }
        free(r.links[i].ids);
        free(r.links[i].defs);
    }
    free(r.links);
    tpm_destroy(r.tpm);
    replay_options_destroy(&o);
    free(r.bufs);
    replay_census_destroy(&r.sizing.census);
    return lossy ? EXIT_INCOMPLETE : 0;
}
