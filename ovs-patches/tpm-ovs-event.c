/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host events: tpm/event-add and the TEM's installs alike (one event
 * whatever the number of PMD threads), the host's satisfactions and their
 * log (tpm/reports), and the local TEM: a split event's threshold shared
 * over the PMDs, and the decision when one reports (lib/decision.h).
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coverage.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/json.h"
#include "openvswitch/vlog.h"
#include "seq.h"
#include "unixctl.h"

#include "json-number.h"
#include "tpm-parse.h"

VLOG_DEFINE_THIS_MODULE(tpm_event);

COVERAGE_DEFINE(tpm_satisfaction);
COVERAGE_DEFINE(tpm_poll_timeout);
COVERAGE_DEFINE(tpm_event_left);

static uint32_t next_event_id = 1;

struct ovs_list tpm_ovs_host_events
    = OVS_LIST_INITIALIZER(&tpm_ovs_host_events);

/* Host satisfactions, newest last (a ring of tpm_ovs_knobs.report_log), each
 * kept as its JSON line (the format of tpm/report-json.h, with keys
 * sorted, plus "pmds" and "missing" when the local TEM combined several
 * PMDs). */
struct host_report {
    char *event;
    char *json;
};
static struct host_report *report_log;
static size_t report_log_size, report_log_n, report_log_next;

/* Where TEM events' satisfactions go (tpm_ovs_event_set_tem_sink()). */
static tpm_ovs_tem_sink *tem_sink;
static void *tem_sink_aux;

/* Local TEM: pending decisions for split events.  Part numbers index the
 * PMD list snapshot taken when the decision started, whose generation
 * (tpm_ovs_snapshot_gen) is the decision's 'aux'. */
static struct tpm_decisions *decisions;

/* Main thread: reports from the PMDs. */

static struct host_event *
host_event_find_id(uint32_t id)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        if (he->id == id) {
            return he;
        }
    }
    return NULL;
}

struct host_event *
tpm_ovs_host_event_find(const char *name)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        if (!strcmp(he->name, name)) {
            return he;
        }
    }
    return NULL;
}

/* Returns the host event named 'name', or replies an error on 'conn' and
 * returns NULL. */
static struct host_event *
host_event_find_or_reply(struct unixctl_conn *conn, const char *name)
{
    struct host_event *he = tpm_ovs_host_event_find(name);
    if (!he) {
        char *msg = xasprintf("no event named %s", name);
        unixctl_command_reply_error(conn, msg);
        free(msg);
    }
    return he;
}

/* Appends '"key":' to 's', after a comma unless it opens an object. */
static void
json_key(struct ds *s, const char *key)
{
    char last = s->length ? s->string[s->length - 1] : '{';
    ds_put_format(s, "%s\"%s\":", last == '{' ? "" : ",", key);
}

/* Appends 'v' by the one JSON number rule (tpm_json_number()). */
static void
json_number(struct ds *s, double v)
{
    char buf[TPM_JSON_NUMBER_LEN];
    ds_put_cstr(s, tpm_json_number(v, buf));
}

/* Stores in 'f' the fields of group 'group' of host event 'he', with
 * "in_port" (the interface's name, "(removed)" after it if no port has it
 * now) first for an event that groups by in_port, whose interface number
 * is 'port'.  Returns their number. */
static int
group_fields(const struct host_event *he, const struct tpm_key *group,
             uint16_t port, struct tpm_key_field f[TPM_KEY_FIELDS_MAX + 1])
{
    int n = 0;

    if (he->def->group_port) {
        uint32_t port_no;
        const char *name = tpm_ovs_port_name(port, &port_no);
        f[0] = (struct tpm_key_field) { .name = "in_port" };
        snprintf(f[0].str_value, sizeof f[0].str_value, "%s%s",
                 name ? name : "(none)",
                 name && port_no == UINT32_MAX ? " (removed)" : "");
        n = 1;
    }
    return n + tpm_key_fields(&he->def->group, group,
                              tpm_ovs_group_vni(group), f + n);
}

/* Reports host event 'he' satisfied: logs it, keeps it in the report log
 * and, for a TEM event, hands it to the TEM sink.  'port' is the group's
 * interface (group=in_port).  'n_pmds' PMDs answered, 'n_missing' did not
 * (local TEM); 'flags' are TPM_REPORT_*. */
static void
host_report(struct host_event *he, uint64_t epoch,
            const struct tpm_key *group, uint16_t port, double value,
            uint32_t flags, int n_pmds, int n_missing)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(10, 50);
    struct tpm_key_field f[TPM_KEY_FIELDS_MAX + 1];
    int n = group_fields(he, group, port, f);

    /* One JSON line, keys sorted (as tpm-replay's reports). */
    struct ds line = DS_EMPTY_INITIALIZER;
    int order[ARRAY_SIZE(f)];
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && strcmp(f[order[j - 1]].name, f[i].name) > 0; j--) {
            order[j] = order[j - 1];
        }
        order[j] = i;
    }
    ds_put_format(&line, "{\"epoch\":%"PRIu64, epoch);
    json_key(&line, "event");
    json_string_escape(he->name, &line);
    json_key(&line, "group");
    ds_put_char(&line, '{');
    for (int i = 0; i < n; i++) {
        const struct tpm_key_field *fi = &f[order[i]];
        json_key(&line, fi->name);
        if (fi->is_int) {
            ds_put_format(&line, "%u", fi->int_value);
        } else {
            json_string_escape(fi->str_value, &line);
        }
    }
    ds_put_char(&line, '}');
    if (n_missing) {
        json_key(&line, "missing");
        ds_put_format(&line, "%d", n_missing);
    }
    if (n_pmds > 1 || n_missing) {
        json_key(&line, "pmds");
        ds_put_format(&line, "%d", n_pmds);
    }
    if (he->tem) {
        json_key(&line, "tem_id");
        ds_put_format(&line, "%"PRIu32, he->tem_id);
    }
    json_key(&line, "value");
    json_number(&line, value);
    ds_put_char(&line, '}');

    he->n_reports++;
    he->has_last = true;
    he->last_epoch = epoch;
    he->last_group = *group;
    he->last_port = port;
    COVERAGE_INC(tpm_satisfaction);
    VLOG_INFO_RL(&rl, "satisfied: %s", ds_cstr(&line));
    if (he->tem && tem_sink) {
        tem_sink(tem_sink_aux, he, epoch, group, value, flags, n_pmds,
                 n_missing);
    }

    if (!report_log_size) {
        ds_destroy(&line);
        return;
    }
    struct host_report *r = &report_log[report_log_next];
    free(r->event);
    free(r->json);
    r->event = xstrdup(he->name);
    r->json = ds_steal_cstr(&line);
    report_log_next = (report_log_next + 1) % report_log_size;
    report_log_n = MIN(report_log_n + 1, report_log_size);
}

/* Decides 'd' once every PMD answered or its deadline passed: reports
 * the event if the total holds.  A decided entry stays a while so that
 * late satisfactions for the same key are not decided twice. */
static void
decision_finish(struct tpm_decision *d, void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_id(d->key.event);
    uint64_t now = tpm_ovs_now_ns();

    if (!he || (d->decided && now > d->expires_ns)) {
        tpm_decision_remove(decisions, d);
        return;
    }
    if (d->decided
        || (!tpm_decision_complete(d) && now < d->deadline_ns)) {
        return;
    }
    size_t missing;
    double total = tpm_decision_total(d, &missing);
    if (missing) {
        COVERAGE_INC(tpm_poll_timeout);
    }
    if (tpm_split_holds(he->def, total, he->def->threshold->num)) {
        host_report(he, d->key.epoch, &d->key.group, d->key.port, total, 0,
                    d->n_parts - missing, missing);
    }
    tpm_decision_decided(decisions, d,
                         now + MAX(4 * tpm_ovs_knobs.poll_timeout_ns,
                                   4 * he->def->interval_ns));
}

/* Handles one report popped from PMD number 'part' of 'parts'. */
static void
handle_report(struct tpm_pmd **parts, size_t n_parts, size_t part,
              const struct tpm_report *r)
{
    if (r->type != TPM_REPORT_SATISFIED) {
        if (tpm_ovs_req_reply(r)) {
            return;
        }
        if (r->type == TPM_REPORT_ADD_DONE && r->error) {
            /* A parked PMD refused an event it was not waited for. */
            VLOG_WARN("pmd core %u: event id %"PRIu32" not installed: %s",
                      parts[part]->core_id, r->event_id, r->error);
        }
        /* A poll reply for a decision, or a late reply. */
        if (r->type == TPM_REPORT_POLL_REPLY) {
            struct host_event *he = host_event_find_id(r->event_id);
            struct tpm_key g = r->group;
            struct tpm_decision_key k;
            tpm_decision_key_init_port(&k, r->event_id, r->epoch, &g,
                                       r->port);
            struct tpm_decision *d
                = he ? tpm_decision_find(decisions, &k) : NULL;
            if (d && d->aux != tpm_ovs_snapshot_gen) {
                tpm_decision_missing(d, part);
            } else if (d && !d->decided) {
                if (r->status == TPM_POLL_OK) {
                    tpm_decision_set(d, part, r->value);
                } else if (r->status == TPM_POLL_NO_GROUP) {
                    tpm_decision_set(d, part, 0);   /* No such traffic. */
                } else if (r->status == TPM_POLL_NOT_YET) {
                    /* Not swept yet: ask again. */
                    if (!tpm_submit_poll(parts[part]->tpm, r->event_id, &g,
                                         r->tun_id, r->port, r->epoch,
                                         tpm_ovs_cookie())) {
                        tpm_decision_missing(d, part);
                    }
                } else {
                    tpm_decision_missing(d, part);
                }
            }
        }
        free(r->error);
        return;
    }

    struct host_event *he = host_event_find_id(r->event_id);
    if (!he) {
        return;
    }
    if (!he->split || n_parts < 2) {
        host_report(he, r->epoch, &r->group, r->port, r->value, r->flags, 1,
                    0);
        return;
    }
    struct tpm_decision_key k;
    tpm_decision_key_init_port(&k, r->event_id, r->epoch, &r->group,
                               r->port);
    struct tpm_decision *d = tpm_decision_find(decisions, &k);
    if (!d) {
        /* No maximum: a start always finds room. */
        uint64_t now = tpm_ovs_now_ns();
        d = tpm_decision_start(decisions, &k, n_parts, now,
                               now + tpm_ovs_knobs.poll_timeout_ns);
        d->aux = tpm_ovs_snapshot_gen;
        for (size_t i = 0; i < n_parts; i++) {
            struct tpm_stats st;
            if (i == part) {
                continue;
            }
            tpm_get_stats(parts[i]->tpm, &st);
            if (!st.packets && tpm_ovs_pmd_parked(parts[i], now)) {
                /* A parked PMD that never saw a packet (no rx queue):
                 * its share of the total is exactly zero. */
                tpm_decision_set(d, i, 0);
            } else if (!tpm_submit_poll(parts[i]->tpm, r->event_id,
                                        &r->group, r->tun_id, r->port,
                                        r->epoch, tpm_ovs_cookie())) {
                tpm_decision_missing(d, i);
            }
        }
    } else if (d->aux != tpm_ovs_snapshot_gen) {
        /* PMDs came or went since: part numbers no longer match. */
        for (size_t i = 0; i < d->n_parts; i++) {
            tpm_decision_missing(d, i);
        }
    }
    if (!d->decided && d->aux == tpm_ovs_snapshot_gen) {
        tpm_decision_set(d, part, r->value);
    }
}

/* Changed by a PMD whose report ring is half full
 * (tpm_ovs_pmd_iteration()): the main thread drains the rings once an
 * epoch, and at once when this changes. */
struct seq *tpm_ovs_report_seq;
static uint64_t report_seq_seen;

/* Drains every PMD's reports. */
void
tpm_ovs_event_drain(struct tpm_pmd **parts, size_t n_parts)
{
    report_seq_seen = seq_read(tpm_ovs_report_seq);
    for (size_t i = 0; i < n_parts; i++) {
        struct tpm_report r;
        while (tpm_pop_report(parts[i]->tpm, &r)) {
            handle_report(parts, n_parts, i, &r);
        }
    }
    tpm_decisions_for_each(decisions, decision_finish, NULL);
}

/* Wakes the main thread when a PMD's report ring fills. */
void
tpm_ovs_event_wait(void)
{
    seq_wait(tpm_ovs_report_seq, report_seq_seen);
}

static void add_start(struct host_event *, struct tpm_pmd **, size_t n,
                      bool is_new, const struct op_client *);

/* After PMDs came or went, gives every PMD an equal share of each split
 * event's threshold again (delete and re-add: the events' history on the
 * PMDs restarts). */
void
tpm_ovs_event_reshare(struct tpm_pmd **parts, size_t n)
{
    static uint64_t shared_gen;
    if (shared_gen == tpm_ovs_snapshot_gen) {
        return;
    }
    shared_gen = tpm_ovs_snapshot_gen;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        if (he->split) {
            tpm_ovs_event_del_start(&he->id, 1, parts, n, NULL);
            add_start(he, parts, n, false, NULL);
        }
    }
}


/* Commands. */

/* Installs host event 'he' on monitor 'tpm' with 'threshold' (the share
 * of this monitor, if split), directly (owner-thread API): only for a
 * monitor no thread runs yet.  Returns an error or NULL. */
char *
tpm_ovs_event_install(struct tpm *tpm, const struct host_event *he,
                      double threshold)
{
    struct tpm_event *copy = tpm_event_clone(he->def);
    if (he->split) {
        tpm_event_set_threshold(copy, threshold);
    }
    char *error = tpm_event_add(tpm, copy, he->id);
    if (error) {
        tpm_event_destroy(copy);
    }
    return error;
}

void
tpm_ovs_host_event_free(struct host_event *he)
{
    if (he) {
        tpm_ovs_port_name_unref(he->def->in_port_slot);
        free(he->name);
        tpm_event_destroy(he->def);
        free(he);
    }
}

/* Deleting events from every PMD. */
static void
del_finish(struct op *op, struct tpm_pmd **parts OVS_UNUSED,
           size_t n OVS_UNUSED)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);

    for (size_t i = 0; i < op->n_reqs; i++) {
        const struct pmd_req *rq = &op->reqs[i];
        if (rq->state == REQ_SUBMIT) {
            COVERAGE_INC(tpm_event_left);
            VLOG_WARN_RL(&rl, "pmd core %u: event id %"PRIu32" left "
                         "installed: its command ring stayed full for "
                         "tpm-command-timeout", rq->core_id, rq->event_id);
        }
    }
    tpm_ovs_op_answer(&op->client, NULL, NULL);
    tpm_ovs_op_destroy(op);
    free(op);
}

/* Starts deleting the 'n_ids' events 'ids' from the PMDs 'parts'; answers
 * 'client' (if any) once every PMD did. */
void
tpm_ovs_event_del_start(const uint32_t *ids, size_t n_ids,
                        struct tpm_pmd **parts,
                        size_t n, const struct op_client *client)
{
    struct op *op = xmalloc(sizeof *op);
    tpm_ovs_op_init(op, del_finish, client, n_ids * n,
                    tpm_ovs_knobs.command_timeout_ns);
    for (size_t j = 0; j < n_ids; j++) {
        for (size_t i = 0; i < n; i++) {
            tpm_ovs_op_req(op, j * n + i, parts[i], TPM_REPORT_DEL_DONE,
                           ids[j]);
        }
    }
    tpm_ovs_op_start(op);
}

/* Checks what the PMDs' monitors would refuse about 'ev' beyond its
 * syntax.  Returns NULL or an error message (caller frees). */
char *
tpm_ovs_event_check(const struct tpm_event *ev)
{
    if (tpm_event_needs_tcp_state(ev)
        && !tpm_ovs_knobs.params.tcp_state_pool) {
        return xstrdup("the predicate uses TCP-state variables (rwnd, "
                       "is_lost, is_burst, rtt, seq, ack, dup) and "
                       "other_config:tpm-tcp-state-pool is 0");
    }
    if (ev->interval_ns % tpm_ovs_knobs.params.epoch_ns) {
        char a[32], b[32];
        return xasprintf("interval %s is not a multiple of the epoch %s "
                         "(other_config:tpm-epoch)",
                         tpm_time_format(ev->interval_ns, a, sizeof a),
                         tpm_time_format(tpm_ovs_knobs.params.epoch_ns, b,
                                         sizeof b));
    }
    return NULL;
}

/* Creates host event 'name' (as shown) of definition 'ev' (taken). */
struct host_event *
tpm_ovs_host_event_create(const char *name, struct tpm_event *ev)
{
    struct host_event *he = xzalloc(sizeof *he);
    he->name = xstrdup(name);
    he->id = next_event_id++;
    he->def = ev;
    he->split = tpm_split_supported(ev, &he->no_split_why);
    return he;
}

/* Adds 'he' to 'host_events' and starts adding it on the PMDs 'parts';
 * answers 'client' once every PMD did. */
void
tpm_ovs_host_event_add(struct host_event *he, struct tpm_pmd **parts, size_t n,
                       const struct op_client *client)
{
    ovs_list_push_back(&tpm_ovs_host_events, &he->node);
    /* Wake the PMDs' monitors before the event reaches them. */
    tpm_ovs_watch(ovs_list_size(&tpm_ovs_host_events));
    add_start(he, parts, n, true, client);
}

/* Removes 'he' from 'host_events', frees it and starts deleting it from
 * the PMDs 'parts'; answers 'client' (if any) once every PMD did. */
void
tpm_ovs_host_event_remove(struct host_event *he, struct tpm_pmd **parts,
                          size_t n,
                          const struct op_client *client)
{
    tpm_ovs_event_del_start(&he->id, 1, parts, n, client);
    ovs_list_remove(&he->node);
    tpm_ovs_host_event_free(he);
    tpm_ovs_watch(ovs_list_size(&tpm_ovs_host_events));
}

void
tpm_unixctl_event_add(struct unixctl_conn *conn, int argc,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct ds def = DS_EMPTY_INITIALIZER;
    for (int i = 2; i < argc; i++) {
        ds_put_format(&def, "%s%s", i > 2 ? " " : "", argv[i]);
    }

    struct tpm_event *ev;
    char *error = tpm_event_parse(argv[1], ds_cstr(&def), &ev);
    ds_destroy(&def);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        return;
    }
    if (tpm_ovs_host_event_find(argv[1])) {
        char *msg = xasprintf("event %s already exists (tpm/event-del it "
                              "first)", argv[1]);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        tpm_event_destroy(ev);
        return;
    }
    error = tpm_ovs_event_check(ev);
    if (!error && ev->in_port) {
        ev->in_port_slot = tpm_ovs_port_name_ref(ev->in_port);
        if (!ev->in_port_slot) {
            error = xasprintf("filter: in_port=%s: every one of the "
                              "monitor's port name numbers is in use (by "
                              "ports and events)", ev->in_port);
        }
    }
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        tpm_event_destroy(ev);
        return;
    }

    /* The reply waits for every PMD (add_finish()). */
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    tpm_ovs_host_event_add(tpm_ovs_host_event_create(argv[1], ev), parts, n,
                           &(struct op_client) { .conn = conn });
    free(parts);
}

/* Adding an event on every PMD. */
struct add_op {
    struct op up;
    uint32_t event_id;
    char *name;
    bool is_new;                /* Remove the event if a PMD refuses it
                                 * (else, a re-share: warn). */
};

/* Answers an add: what each PMD that refused or did not answer said; then
 * the event has been deleted again wherever it was added (nothing
 * half-applied). */
static void
add_finish(struct op *op, struct tpm_pmd **parts, size_t n)
{
    struct add_op *a = CONTAINER_OF(op, struct add_op, up);
    struct host_event *he = host_event_find_id(a->event_id);
    struct ds err = DS_EMPTY_INITIALIZER;

    for (size_t i = 0; i < op->n_reqs; i++) {
        const struct pmd_req *rq = &op->reqs[i];
        const char *sep = err.length ? "; " : "";
        if (rq->state == REQ_SUBMIT) {
            ds_put_format(&err, "%score %u: command queue full (PMD "
                          "stalled)", sep, rq->core_id);
        } else if (rq->state == REQ_WAITING) {
            ds_put_format(&err, "%score %u did not answer within "
                          "tpm-command-timeout", sep, rq->core_id);
        } else if (rq->state == REQ_DONE && rq->r.error) {
            ds_put_format(&err, "%score %u: %s", sep, rq->core_id,
                          rq->r.error);
        }
    }

    if (!he) {
        /* Deleted meanwhile, and so from the PMDs after this add. */
        char *msg = xasprintf("event %s was deleted while it was being "
                              "added", a->name);
        tpm_ovs_op_answer(&op->client, op->client.conn ? msg : NULL, NULL);
        free(msg);
    } else if (err.length && a->is_new) {
        tpm_ovs_host_event_remove(he, parts, n, NULL);
        tpm_ovs_op_answer(&op->client, ds_cstr(&err), NULL);
    } else if (err.length) {
        tpm_ovs_event_del_start(&he->id, 1, parts, n, NULL);
        VLOG_WARN("event %s: re-sharing its threshold over %"PRIuSIZE
                  " PMDs failed: %s", he->name, op->n_reqs, ds_cstr(&err));
    } else {
        struct ds reply = DS_EMPTY_INITIALIZER;
        size_t m = op->n_reqs;
        ds_put_format(&reply, "event %s added on %"PRIuSIZE" PMD thread%s",
                      he->name, m, m == 1 ? "" : "s");
        if (m > 1 && he->split) {
            ds_put_format(&reply, ", threshold %.17g split %.17g each",
                          he->def->threshold->num,
                          he->def->threshold->num / m);
        } else if (m > 1) {
            ds_put_format(&reply, " (threshold not split: %s)",
                          he->no_split_why);
        }
        uint32_t port_no;
        if (he->def->in_port
            && tpm_ovs_port_name(he->def->in_port_slot, &port_no)
            && port_no == UINT32_MAX) {
            ds_put_format(&reply, "; note: no interface is named %s now: "
                          "the event counts its packets from when one is "
                          "added", he->def->in_port);
        }
        tpm_ovs_op_answer(&op->client, NULL, ds_cstr(&reply));
        ds_destroy(&reply);
    }
    ds_destroy(&err);
    free(a->name);
    tpm_ovs_op_destroy(op);
    free(a);
}

/* Starts adding host event 'he' on the PMDs 'parts', each with its share
 * of a split threshold.  'is_new': see struct add_op. */
static void
add_start(struct host_event *he, struct tpm_pmd **parts, size_t n,
          bool is_new, const struct op_client *client)
{
    struct add_op *a = xzalloc(sizeof *a);
    double *shares = xcalloc(MAX(n, 1), sizeof *shares);

    if (he->split) {
        tpm_split_threshold(he->def->threshold->num, n, NULL, shares);
    }
    tpm_ovs_op_init(&a->up, add_finish, client, n,
                    tpm_ovs_knobs.command_timeout_ns);
    a->event_id = he->id;
    a->name = xstrdup(he->name);
    a->is_new = is_new;
    for (size_t i = 0; i < n; i++) {
        struct pmd_req *rq = tpm_ovs_op_req(&a->up, i, parts[i],
                                            TPM_REPORT_ADD_DONE, he->id);
        rq->event = tpm_event_clone(he->def);
        if (he->split) {
            tpm_event_set_threshold(rq->event, shares[i]);
        }
    }
    free(shares);
    tpm_ovs_op_start(&a->up);
}

void
tpm_unixctl_event_del(struct unixctl_conn *conn, int argc OVS_UNUSED,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_or_reply(conn, argv[1]);
    if (!he) {
        return;
    }
    if (he->tem) {
        char *msg = xasprintf("event %s was installed by the TEM (its id "
                              "%"PRIu32"): remove it there", he->name,
                              he->tem_id);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return;
    }
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    tpm_ovs_host_event_remove(he, parts, n,
                              &(struct op_client) { .conn = conn });
    free(parts);
}

/* Appends to 's' which ports event 'def' sees: every one, or its
 * in_port= interface, said if no port has that name now. */
static void
format_event_ports(struct ds *s, const struct tpm_event *def)
{
    uint32_t port_no;

    if (!def->in_port) {
        ds_put_cstr(s, "every port");
    } else if (!tpm_ovs_port_name(def->in_port_slot, &port_no)) {
        ds_put_format(s, "none: no number was left for %s", def->in_port);
    } else if (port_no == UINT32_MAX) {
        ds_put_format(s, "%s, which no port has now (counting starts when "
                      "an interface of that name is added)", def->in_port);
    } else {
        ds_put_format(s, "%s (datapath port %"PRIu32")", def->in_port,
                      port_no);
    }
}

static void
format_event(struct ds *s, const struct host_event *he)
{
    char *group = tpm_event_group_to_string(he->def);
    char iv[32];
    ds_put_format(s, "%s: %s\n", he->name, he->def->text);
    ds_put_format(s, "  group %s, interval %s, threshold %s", group,
                  tpm_time_format(he->def->interval_ns, iv, sizeof iv),
                  he->split ? "split over the PMD threads (when several)"
                            : "not split");
    if (!he->split && he->no_split_why) {
        ds_put_format(s, " (%s)", he->no_split_why);
    }
    ds_put_format(s, ", %"PRIu64" satisfactions\n", he->n_reports);
    ds_put_cstr(s, "  ports seen: ");
    format_event_ports(s, he->def);
    ds_put_char(s, '\n');
    if (he->tem) {
        ds_put_format(s, "  installed by the TEM: id %"PRIu32", ",
                      he->tem_id);
        if (he->has_share) {
            ds_put_format(s, "threshold share %.17g of its split, ",
                          he->share);
        }
        ds_put_format(s, "%"PRIu64" sent to it\n", he->n_sent);
    }
    free(group);
}

void
tpm_unixctl_event_list(struct unixctl_conn *conn, int argc OVS_UNUSED,
                       const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        format_event(&s, he);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* Appends to 's' the newest 'max' host reports of event 'name' (all
 * events if NULL), oldest first, one JSON line each. */
static void
format_reports(struct ds *s, const char *name, size_t max)
{
    size_t *idx = xcalloc(MAX(report_log_n, 1), sizeof *idx);
    size_t n = 0;

    for (size_t i = 0; i < report_log_n && n < max; i++) {
        size_t k = (report_log_next + report_log_size - 1 - i)
                   % report_log_size;
        if (!name || !strcmp(report_log[k].event, name)) {
            idx[n++] = k;
        }
    }
    while (n--) {
        ds_put_format(s, "%s\n", report_log[idx[n]].json);
    }
    free(idx);
}

/* tpm/event-show: every PMD's trigger instances and flows for the event
 * (asked through its command ring: the monitor is the PMD's), and the
 * values of the latest satisfied group over the last intervals (polled
 * from the PMDs' history). */
struct show_op {
    struct op up;               /* Requests: one info per PMD, then the
                                 * polls of interval j on PMD i at
                                 * n_pmds * (1 + j) + i. */
    char *name;
    struct ds s;                /* The reply, up to the PMDs' answers. */
    size_t n_pmds;
    double *shares;             /* Per PMD, if the threshold is split. */
    uint32_t k;                 /* Intervals polled (0: none)... */
    uint64_t m;                 /* ...of 'm' epochs... */
    uint64_t last_epoch;        /* ...the last ending at this epoch. */
    char *values_title;         /* Names the group (if 'k'). */
};

static void
show_finish(struct op *op, struct tpm_pmd **parts OVS_UNUSED,
            size_t n_parts OVS_UNUSED)
{
    struct show_op *so = CONTAINER_OF(op, struct show_op, up);
    struct ds *s = &so->s;
    size_t n = so->n_pmds;

    for (size_t i = 0; i < n; i++) {
        const struct pmd_req *rq = &op->reqs[i];
        ds_put_format(s, "  pmd core %u: ", rq->core_id);
        if (so->shares) {
            ds_put_format(s, "threshold share %.17g, ", so->shares[i]);
        }
        if (rq->state != REQ_DONE) {
            ds_put_cstr(s, "parked (no answer)\n");
        } else {
            ds_put_format(s, "%"PRIu64" trigger instances, %.0f flows "
                          "matched\n", rq->r.epoch, rq->r.value);
        }
    }
    if (so->k) {
        ds_put_cstr(s, so->values_title);
    }
    for (size_t j = 0; j < so->k; j++) {
        uint64_t epoch = so->last_epoch - (so->k - 1 - j) * so->m;
        double total = 0;
        size_t unknown = 0;
        for (size_t i = 0; i < n; i++) {
            const struct pmd_req *rq = &op->reqs[n * (1 + j) + i];
            if (rq->state != REQ_DONE) {
                unknown++;
            } else if (rq->r.status == TPM_POLL_OK) {
                total += rq->r.value;
            } else if (rq->r.status != TPM_POLL_NO_GROUP) {
                unknown++;
            }
        }
        ds_put_format(s, "    %"PRIu64": %.17g", epoch, total);
        if (unknown) {
            ds_put_format(s, " (%"PRIuSIZE" PMDs: expired or no answer)",
                          unknown);
        }
        ds_put_cstr(s, "\n");
    }

    ds_put_cstr(s, "  latest satisfactions (oldest first):\n");
    struct ds r = DS_EMPTY_INITIALIZER;
    format_reports(&r, so->name, tpm_ovs_knobs.params.history_len);
    if (!r.length) {
        ds_put_cstr(s, "    none\n");
    } else {
        char *save = NULL;
        for (char *line = strtok_r(ds_cstr(&r), "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            ds_put_format(s, "    %s\n", line);
        }
    }
    ds_destroy(&r);
    tpm_ovs_op_answer(&op->client, NULL, ds_cstr(s));
    ds_destroy(s);
    free(so->values_title);
    free(so->shares);
    free(so->name);
    tpm_ovs_op_destroy(op);
    free(so);
}

void
tpm_unixctl_event_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
                       const char *argv[], void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_or_reply(conn, argv[1]);
    if (!he) {
        return;
    }

    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    struct show_op *so = xzalloc(sizeof *so);
    so->name = xstrdup(he->name);
    so->n_pmds = n;
    ds_init(&so->s);
    format_event(&so->s, he);
    if (he->split && n > 1) {
        so->shares = xcalloc(n, sizeof *so->shares);
        tpm_split_threshold(he->def->threshold->num, n, NULL, so->shares);
    }
    if (he->has_last) {
        so->k = tpm_ovs_knobs.params.history_len;
        so->m = he->def->interval_ns / tpm_ovs_knobs.params.epoch_ns;
        so->last_epoch = he->last_epoch;
    }

    tpm_ovs_op_init(&so->up, show_finish, &(struct op_client) { .conn = conn },
                    n * (1 + so->k), tpm_ovs_knobs.command_timeout_ns);
    for (size_t i = 0; i < n; i++) {
        tpm_ovs_op_req(&so->up, i, parts[i], TPM_REPORT_INFO_REPLY, he->id);
    }
    for (size_t j = 0; j < so->k; j++) {
        uint64_t epoch = so->last_epoch - (so->k - 1 - j) * so->m;
        for (size_t i = 0; i < n; i++) {
            struct pmd_req *rq = tpm_ovs_op_req(&so->up, n * (1 + j) + i,
                                                parts[i],
                                                TPM_REPORT_POLL_REPLY, he->id);
            rq->epoch = epoch;
            rq->group = he->last_group;
            rq->port = he->last_port;
            if (epoch > so->last_epoch) {
                rq->state = REQ_GONE;   /* Before epoch 0. */
            }
        }
    }
    if (so->k) {
        struct tpm_key_field f[TPM_KEY_FIELDS_MAX + 1];
        int nf = group_fields(he, &he->last_group, he->last_port, f);
        struct ds t = DS_EMPTY_INITIALIZER;
        ds_put_cstr(&t, "  values of group");
        for (int i = 0; i < nf; i++) {
            if (f[i].is_int) {
                ds_put_format(&t, " %s=%u", f[i].name, f[i].int_value);
            } else {
                ds_put_format(&t, " %s=%s", f[i].name, f[i].str_value);
            }
        }
        ds_put_cstr(&t, " (interval ending at epoch, summed over the "
                    "PMDs):\n");
        so->values_title = ds_steal_cstr(&t);
    }
    tpm_ovs_op_start(&so->up);
    free(parts);
}

void
tpm_unixctl_reports(struct unixctl_conn *conn, int argc, const char *argv[],
                    void *aux OVS_UNUSED)
{
    size_t max = SIZE_MAX;
    if (argc > 1) {
        uint64_t v;
        if (!tpm_parse_uint(argv[1], 0, UINT64_MAX, &v)) {
            unixctl_command_reply_error(conn, "usage: tpm/reports [N]: N "
                                        "must be a non-negative integer");
            return;
        }
        max = v;
    }
    size_t n;                   /* Pick up what is queued now. */
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    tpm_ovs_event_drain(parts, n);
    free(parts);
    struct ds s = DS_EMPTY_INITIALIZER;
    format_reports(&s, NULL, max);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}


/* Appends tpm/stats's line on the host events. */
void
tpm_ovs_event_format_summary(struct ds *s)
{
    ds_put_format(s, "events: %"PRIuSIZE", local-TEM decisions pending: "
                  "%"PRIuSIZE"\n", ovs_list_size(&tpm_ovs_host_events),
                  decisions ? tpm_decisions_count(decisions) : 0);
}

/* Sets where the host-level satisfactions of TEM events go: 'sink', with
 * 'aux'. */
void
tpm_ovs_event_set_tem_sink(tpm_ovs_tem_sink *sink, void *aux)
{
    tem_sink = sink;
    tem_sink_aux = aux;
}

/* Sets up the host events' state: the local TEM's decisions and a report
 * log of 'report_log' satisfactions. */
void
tpm_ovs_event_init(size_t report_log_len)
{
    if (decisions) {
        return;
    }
    decisions = tpm_decisions_create(NULL);
    tpm_ovs_report_seq = seq_create();
    report_log_size = report_log_len;
    report_log = xcalloc(MAX(report_log_size, 1), sizeof *report_log);
}

/* Resizes the report log to 'size' satisfactions, keeping the newest
 * that fit. */
void
tpm_ovs_event_report_log_resize(size_t size)
{
    if (size == report_log_size && report_log) {
        return;
    }
    struct host_report *log = xcalloc(MAX(size, 1), sizeof *log);
    size_t keep = MIN(report_log_n, size);
    for (size_t i = 0; i < report_log_n; i++) {
        size_t k_old = (report_log_next + report_log_size - report_log_n
                        + i) % report_log_size;
        if (i >= report_log_n - keep) {
            log[i - (report_log_n - keep)] = report_log[k_old];
        } else {
            free(report_log[k_old].event);
            free(report_log[k_old].json);
        }
    }
    free(report_log);
    report_log = log;
    report_log_size = size;
    report_log_n = keep;
    report_log_next = size ? keep % size : 0;
}
