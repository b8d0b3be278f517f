/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM agent glue: with other_config:tpm-controller set, a host agent
 * (lib/agent.h: its own thread and socket) talks to the TEM, and the main
 * thread executes the TEM's commands here: installs and removes are host
 * events (tpm-ovs-event.c), polls are operations on the PMDs
 * (tpm-ovs-request.c), satisfactions of the TEM's events go back to it.
 * tpm/controller-show shows the session.
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coverage.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/poll-loop.h"
#include "openvswitch/vlog.h"
#include "smap.h"
#include "unixctl.h"

VLOG_DEFINE_THIS_MODULE(tpm_agent);

COVERAGE_DEFINE(tpm_agent_restart);
COVERAGE_DEFINE(tpm_agent_tenant_unsent);
COVERAGE_DEFINE(tpm_agent_create_failed);
COVERAGE_DEFINE(tpm_agent_command);
COVERAGE_DEFINE(tpm_agent_nack);
COVERAGE_DEFINE(tpm_agent_send_dropped);
COVERAGE_DEFINE(tpm_tem_poll);
COVERAGE_DEFINE(tpm_tem_poll_incomplete);
COVERAGE_DEFINE(tpm_tem_poll_not_yet);
COVERAGE_DEFINE(tpm_tem_poll_cancelled);

/* The host agent (other_config:tpm-controller).  'agent_cfg' is the
 * configuration in force (validated); the agent announced the PMDs
 * 'agent_pmd_ids' in its Hello. */
struct agent_cfg {
    char *endpoint;             /* NULL: no agent. */
    char *host_id;              /* NULL: the system's hostname. */
    char *prefixes;             /* As given; "" if unset. */
    uint32_t queue_size;
    uint32_t outage_buffer;
    uint64_t backoff_max_ns;
    uint64_t epoch_ns;
    char *tem_key;              /* tpm-controller-key. */
    char *key_file;             /* tpm-host-key-file. */
    uint32_t insecure;          /* tpm-controller-insecure. */
};
static struct agent_cfg agent_cfg;
static struct tpm_agent *agent;
static uint32_t *agent_pmd_ids;
static size_t agent_n_pmds;
static uint64_t agent_pmds_gen;     /* 'pmds_gen' last compared. */
static uint64_t agent_restarts;     /* Since ovs-vswitchd started. */
static uint64_t agent_pmd_restarts; /* New Hellos for new PMD threads. */
static uint64_t agent_started_ns;

/* What the main thread did for the agent since it (re)started. */
struct agent_counters {
    uint64_t installs, removes, polls, resyncs, configures;
    uint64_t nacks;
    uint64_t satisfactions, satisfactions_dropped;
    uint64_t replies, replies_dropped;  /* Acks, nacks, poll replies. */
    uint64_t polls_incomplete, polls_not_yet, polls_cancelled;
    uint64_t poll_batches;              /* Of 'polls', in batches. */
};
static struct agent_counters actr;
static bool agent_backlog;      /* tpm_ovs_run() left commands queued. */

/* Largest number of agent commands executed per tpm_ovs_run() call (the
 * rest wait for the next, which comes at once). */
#define TPM_AGENT_CMDS_PER_RUN 256

/* The TEM's polls being answered (struct tem_poll), oldest first. */
static struct ovs_list tem_polls = OVS_LIST_INITIALIZER(&tem_polls);
static size_t tem_polls_n;

/* A PollBatch of the TEM (protocol version 3): its entries start as
 * polls of their own while fewer than the agent's queue size are pending
 * (so a batch of any size is bounded like single polls); each answer goes
 * into 'status' and 'values', and the last sends them all in one
 * PollBatchReply. */
struct tem_poll_batch {
    struct ovs_list node;       /* In 'tem_batches' while entries remain
                                 * to start. */
    uint64_t cookie, epoch;
    size_t n;                   /* Entries. */
    size_t next;                /* Next entry to start. */
    size_t left;                /* Entries not answered nor cancelled. */
    bool cancelled;             /* Its session ended: send nothing. */
    uint32_t *event_ids;        /* From the agent's command; 'groups' owns
                                 * the allocation. */
    uint32_t *tun_ids;
    struct tpm_key *groups;
    uint8_t *status;
    double *values;
};

static struct ovs_list tem_batches = OVS_LIST_INITIALIZER(&tem_batches);

/* Sends host-level satisfaction of TEM event 'he' to the TEM: the TEM
 * sink of the host events (tpm_ovs_agent_init()). */
static void
tem_send_satisfaction(void *aux OVS_UNUSED, struct host_event *he,
                      uint64_t epoch, const struct tpm_key *group,
                      double value, uint32_t flags, int n_pmds,
                      int n_missing)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);

    if (group->tun && agent && !tpm_agent_sends_tenants(agent)) {
        /* A TEM of protocol version below 4 names no tenant: sent, the
         * group would merge with the other tenants' there. */
        he->n_send_dropped++;
        actr.satisfactions_dropped++;
        COVERAGE_INC(tpm_agent_tenant_unsent);
        VLOG_WARN_RL(&rl, "%s: satisfaction for epoch %"PRIu64" of tenant "
                     "tun_id=%"PRIu32" not sent: the TEM's protocol version "
                     "is older than 4, which carries tenants", he->name,
                     epoch, tpm_ovs_group_vni(group));
        return;
    }
    if (agent && tpm_agent_send_satisfaction(agent, he->tem_id, epoch,
                                             group, tpm_ovs_group_vni(group),
                                             value, flags,
                                             n_pmds + n_missing,
                                             n_missing)) {
        he->n_sent++;
        actr.satisfactions++;
        return;
    }
    he->n_send_dropped++;
    actr.satisfactions_dropped++;
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s: satisfaction for epoch %"PRIu64" not sent to "
                 "the TEM (%s)", he->name, epoch,
                 agent ? "agent queue full" : "no agent");
}

/* The TEM. */

static struct host_event *
tem_event_find(uint32_t tem_id)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        if (he->tem && he->tem_id == tem_id) {
            return he;
        }
    }
    return NULL;
}

static const char *
agent_cmd_name(enum tpm_agent_cmd_type type)
{
    switch (type) {
    case TPM_AGENT_INSTALL:
        return "install";
    case TPM_AGENT_REMOVE:
        return "remove";
    case TPM_AGENT_POLL:
        return "poll";
    case TPM_AGENT_POLL_BATCH:
        return "poll batch";
    case TPM_AGENT_RESYNC:
        return "resync";
    case TPM_AGENT_CONFIGURE:
        return "configure";
    default:
        return "?";
    }
}

/* Counts a message the agent did not take: its queue is full, or, for
 * one of the session only ('session': an ack, nack or poll batch reply),
 * no session is open.  (A PollReply is kept over an outage.) */
static void
agent_send_dropped(const char *what, uint32_t tem_id, bool session)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s for TEM event id %"PRIu32" not sent: agent queue "
                 "full%s", what, tem_id, session ? " or no session" : "");
}

/* Acks the TEM's command ('type', 'cookie', 'event_id'), or nacks it with
 * 'error' (cut to what the protocol carries). */
static void
tem_reply(enum tpm_agent_cmd_type type, uint64_t cookie, uint32_t event_id,
          const char *error)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    bool sent;

    if (error) {
        char reason[TPROTO_MAX_REASON + 1];
        ovs_strlcpy(reason, error, sizeof reason);
        actr.nacks++;
        COVERAGE_INC(tpm_agent_nack);
        VLOG_WARN_RL(&rl, "TEM %s of event id %"PRIu32" refused: %s",
                     agent_cmd_name(type), event_id, error);
        sent = agent && tpm_agent_send_nack(agent, cookie, event_id,
                                            reason);
    } else {
        sent = agent && tpm_agent_send_ack(agent, cookie, event_id);
    }
    if (sent) {
        actr.replies++;
    } else {
        actr.replies_dropped++;
        agent_send_dropped(error ? "nack" : "ack", event_id, true);
    }
}

/* The 'reply' callback of the TEM's operations (tem_client()). */
static void
tem_client_reply(const struct op_client *c, const char *error)
{
    tem_reply(c->tem_type, c->tem_cookie, c->tem_event_id, error);
}

static struct op_client
tem_client(const struct tpm_agent_cmd *cmd)
{
    return (struct op_client) {
        .reply = tem_client_reply,
        .tem_type = cmd->type,
        .tem_cookie = cmd->cookie,
        .tem_event_id = cmd->event_id,
    };
}

/* Installs the TEM's event of 'cmd' on the PMDs 'parts', and acks or
 * nacks it (once every PMD answered).  An install for an id already
 * installed with the same name, definition and threshold share changes
 * nothing; with anything different it replaces it. */
static void
tem_install(const struct tpm_agent_cmd *cmd, struct tpm_pmd **parts,
            size_t n)
{
    struct op_client client = tem_client(cmd);
    struct tpm_event *ev;
    char *error = tpm_event_parse(cmd->name, cmd->definition, &ev);
    if (!error) {
        error = tpm_event_refuse_ports(ev, TEM_NO_PORTS);
        if (error) {
            tpm_event_destroy(ev);
        }
    }
    if (error) {
        goto refuse;
    }
    if (cmd->has_threshold && !tpm_event_set_threshold(ev, cmd->threshold)) {
        tpm_event_destroy(ev);
        error = xstrdup("a threshold share was given but the predicate has "
                        "no constant threshold to replace");
        goto refuse;
    }
    error = tpm_ovs_event_check(ev);
    if (error) {
        tpm_event_destroy(ev);
        goto refuse;
    }

    char *name = xasprintf("tem:%s", cmd->name);
    struct host_event *old = tem_event_find(cmd->event_id);
    struct host_event *other = tpm_ovs_host_event_find(name);
    if (other && other != old) {
        error = xasprintf("event name %s is already used by TEM event id "
                          "%"PRIu32, cmd->name, other->tem_id);
        tpm_event_destroy(ev);
        free(name);
        goto refuse;
    } else if (old && old == other && !strcmp(old->def->text, ev->text)
               && old->has_share == cmd->has_threshold
               && (!cmd->has_threshold || old->share == cmd->threshold)) {
        /* Installed already, as asked (a retried install). */
        tpm_event_destroy(ev);
        free(name);
        tpm_ovs_op_answer(&client, NULL, NULL);
        return;
    }
    if (old) {
        VLOG_INFO("TEM event id %"PRIu32" (%s) replaced by a new install",
                  old->tem_id, old->name);
        tpm_ovs_host_event_remove(old, parts, n, NULL);
    }

    struct host_event *he = tpm_ovs_host_event_create(name, ev);
    free(name);
    he->tem = true;
    he->tem_id = cmd->event_id;
    he->has_share = cmd->has_threshold;
    he->share = cmd->threshold;
    tpm_ovs_host_event_add(he, parts, n, &client);
    return;

refuse:
    tpm_ovs_op_answer(&client, error, NULL);
    free(error);
}

/* Removes every event the TEM installed. */
static void
tem_events_remove_all(struct tpm_pmd **parts, size_t n)
{
    uint32_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    struct host_event *he;

    LIST_FOR_EACH_SAFE (he, node, &tpm_ovs_host_events) {
        if (he->tem) {
            if (n_ids == cap) {
                ids = x2nrealloc(ids, &cap, sizeof *ids);
            }
            ids[n_ids++] = he->id;
            ovs_list_remove(&he->node);
            tpm_ovs_host_event_free(he);
        }
    }
    if (n_ids) {
        tpm_ovs_event_del_start(ids, n_ids, parts, n, NULL);
        tpm_ovs_watch(ovs_list_size(&tpm_ovs_host_events));
    }
    free(ids);
}

/* One entry of 'b' is done (answered, or cancelled if 'b->cancelled');
 * the last one sends the reply, if any, and frees 'b'. */
static void
tem_poll_batch_unref(struct tem_poll_batch *b)
{
    if (--b->left) {
        return;
    }
    if (!b->cancelled) {
        if (agent && tpm_agent_send_poll_batch_reply(agent, b->cookie,
                                                     b->epoch, b->status,
                                                     b->values, b->n)) {
            actr.replies++;
        } else {
            actr.replies_dropped++;
            agent_send_dropped("poll batch reply", b->event_ids[0], true);
        }
    }
    free(b->groups);
    free(b->status);
    free(b->values);
    free(b);
}

/* Answers a poll: on its own, or as entry 'index' of 'batch'. */
static void
tem_poll_answer(struct tem_poll_batch *batch, size_t index, uint64_t cookie,
                uint32_t tem_id, uint64_t epoch, Trumpet__PollStatus status,
                double value)
{
    if (batch) {
        batch->status[index] = status;
        batch->values[index] = value;
        tem_poll_batch_unref(batch);
    } else if (agent && tpm_agent_send_poll_reply(agent, cookie, tem_id,
                                                  epoch, status, value)) {
        actr.replies++;
    } else {
        actr.replies_dropped++;
        agent_send_dropped("poll reply", tem_id, false);
    }
}

/* A poll of the TEM: one poll request per PMD, asked again while a PMD
 * says it has not swept the epoch yet, answered with the sum. */
struct tem_poll {
    struct op up;
    struct ovs_list node;       /* In 'tem_polls', oldest first. */
    uint64_t cookie;            /* The TEM's. */
    uint32_t tem_id;
    uint64_t epoch;
    struct tem_poll_batch *batch;   /* NULL: a poll on its own. */
    size_t index;               /* In 'batch'. */
};

static void
tem_poll_free(struct tem_poll *p)
{
    if (p->batch) {             /* Not answered: cancelled. */
        p->batch->cancelled = true;
        tem_poll_batch_unref(p->batch);
    }
    ovs_list_remove(&p->node);
    tem_polls_n--;
    tpm_ovs_op_destroy(&p->up);
    free(p);
}

/* Forgets every pending poll of the TEM without answering (the session
 * they belong to is over).  Late PMD replies to them are ignored. */
static void
tem_polls_cancel_all(void)
{
    struct tem_poll_batch *b;
    LIST_FOR_EACH_SAFE (b, node, &tem_batches) {
        size_t unstarted = b->n - b->next;
        ovs_list_remove(&b->node);
        actr.polls_cancelled += unstarted;
        b->cancelled = true;
        b->left -= unstarted - 1;
        tem_poll_batch_unref(b);
    }

    struct tem_poll *p;
    LIST_FOR_EACH_SAFE (p, node, &tem_polls) {
        actr.polls_cancelled++;
        COVERAGE_INC(tpm_tem_poll_cancelled);
        tem_poll_free(p);
    }
}

/* Answers the TEM's poll from what the PMDs said, and frees it. */
static void
tem_poll_finish(struct op *op, struct tpm_pmd **parts OVS_UNUSED,
                size_t n OVS_UNUSED)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    struct tem_poll *p = CONTAINER_OF(op, struct tem_poll, up);
    size_t expired = 0, no_event = 0, not_yet = 0, missing = 0;
    double sum = 0;

    for (size_t i = 0; i < op->n_reqs; i++) {
        const struct pmd_req *rq = &op->reqs[i];
        if (rq->state == REQ_DONE) {
            if (rq->r.status == TPM_POLL_OK) {
                sum += rq->r.value;
            } else if (rq->r.status == TPM_POLL_EXPIRED) {
                expired++;
            } else if (rq->r.status == TPM_POLL_NO_EVENT) {
                no_event++;
            }
        } else if (rq->state != REQ_GONE && rq->not_yet) {
            not_yet++;
        } else {
            missing++;
        }
    }

    Trumpet__PollStatus status;
    if (expired) {
        status = TRUMPET__POLL_STATUS__POLL_EXPIRED;
    } else if (op->n_reqs && no_event == op->n_reqs) {
        status = TRUMPET__POLL_STATUS__POLL_NO_EVENT;
    } else if (not_yet) {
        status = TRUMPET__POLL_STATUS__POLL_NOT_YET;
        actr.polls_not_yet++;
        COVERAGE_INC(tpm_tem_poll_not_yet);
        VLOG_DBG_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                    "%"PRIuSIZE" PMDs had not swept it by "
                    "tpm-poll-timeout", p->tem_id, p->epoch, not_yet);
    } else if (missing || no_event) {
        status = TRUMPET__POLL_STATUS__POLL_INCOMPLETE;
        actr.polls_incomplete++;
        COVERAGE_INC(tpm_tem_poll_incomplete);
        VLOG_WARN_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                     "%"PRIuSIZE" of %"PRIuSIZE" PMDs did not answer by "
                     "tpm-poll-timeout or lack the event; answering the sum "
                     "of the others", p->tem_id, p->epoch,
                     missing + no_event, op->n_reqs);
    } else {
        status = TRUMPET__POLL_STATUS__POLL_OK;
    }
    tem_poll_answer(p->batch, p->index, p->cookie, p->tem_id, p->epoch,
                    status, sum);
    p->batch = NULL;
    tem_poll_free(p);
}

/* Starts answering the TEM's poll of 'event_id' for 'group' in 'epoch'
 * (with 'cookie', or as entry 'index' of 'batch') over the PMDs
 * 'parts'.  A tenant's group ('group->tun' not 0) is tenant 'tun_id''s
 * (a VNI). */
static void
tem_poll_start(uint64_t cookie, uint32_t event_id, uint64_t epoch,
               const struct tpm_key *group_, uint32_t tun_id,
               struct tem_poll_batch *batch, size_t index,
               struct tpm_pmd **parts, size_t n)
{
    struct host_event *he = tem_event_find(event_id);
    struct tpm_key tenant_group;
    const struct tpm_key *group = group_;
    COVERAGE_INC(tpm_tem_poll);
    if (!he) {
        tem_poll_answer(batch, index, cookie, event_id, epoch,
                        TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
        return;
    }
    if (group_->tun) {
        /* The TEM names the tenant by its VNI; the PMDs share one table
         * of slots, where a VNI no PMD has met has none: no traffic. */
        tenant_group = *group_;
        tenant_group.tun = tpm_tenants_find(tpm_ovs_tenants_get(), tun_id);
        if (!tenant_group.tun) {
            tem_poll_answer(batch, index, cookie, event_id, epoch,
                            TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
            return;
        }
        group = &tenant_group;
    }

    uint64_t now = tpm_ovs_now_ns();
    struct tem_poll *p = xzalloc(sizeof *p);
    tpm_ovs_op_init(&p->up, tem_poll_finish, NULL, n,
                    tpm_ovs_knobs.poll_timeout_ns);
    p->up.repoll = true;
    p->cookie = cookie;
    p->tem_id = event_id;
    p->epoch = epoch;
    p->batch = batch;
    p->index = index;
    for (size_t i = 0; i < n; i++) {
        struct pmd_req *rq = tpm_ovs_op_req(&p->up, i, parts[i],
                                            TPM_REPORT_POLL_REPLY, he->id);
        struct tpm_stats st;
        rq->epoch = epoch;
        rq->group = *group;
        tpm_get_stats(parts[i]->tpm, &st);
        if (!st.packets && tpm_ovs_pmd_parked(parts[i], now)) {
            /* No rx queue ever: its share is exactly zero. */
            rq->state = REQ_DONE;
            rq->r.status = TPM_POLL_NO_GROUP;
        }
    }
    ovs_list_push_back(&tem_polls, &p->node);
    tem_polls_n++;
    tpm_ovs_op_start(&p->up);
}

/* Takes over the PollBatch 'cmd' (its entries). */
static void
tem_poll_batch_queue(struct tpm_agent_cmd *cmd)
{
    struct tem_poll_batch *b = xzalloc(sizeof *b);

    b->cookie = cmd->cookie;
    b->epoch = cmd->epoch;
    b->n = b->left = cmd->n_entries;
    b->event_ids = cmd->event_ids;
    b->tun_ids = cmd->tun_ids;
    b->groups = cmd->groups;
    cmd->event_ids = NULL;
    cmd->tun_ids = NULL;
    cmd->groups = NULL;
    b->status = xzalloc(b->n);
    b->values = xcalloc(b->n, sizeof *b->values);
    ovs_list_push_back(&tem_batches, &b->node);
    actr.polls += b->n;
    actr.poll_batches++;
}

/* Starts the entries of the queued PollBatches, oldest first, while
 * fewer than the agent's queue size of polls are pending.  Returns false
 * if entries remain to start. */
static bool
tem_poll_batches_start(struct tpm_pmd **parts, size_t n)
{
    while (!ovs_list_is_empty(&tem_batches)) {
        struct tem_poll_batch *b = CONTAINER_OF(ovs_list_front(&tem_batches),
                                                struct tem_poll_batch, node);
        while (b->next < b->n) {
            if (tem_polls_n >= agent_cfg.queue_size) {
                return false;
            }
            size_t i = b->next++;
            bool last = b->next == b->n;
            if (last) {
                /* Its last start may answer and free 'b'. */
                ovs_list_remove(&b->node);
            }
            tem_poll_start(b->cookie, b->event_ids[i], b->epoch,
                           &b->groups[i], b->tun_ids[i], b, i, parts, n);
            if (last) {
                break;
            }
        }
    }
    return true;
}

/* Executes the TEM's commands queued by the agent (a bounded number);
 * tpm_ovs_run() then queues what they ask of the PMDs. */
void
tpm_ovs_agent_run(struct tpm_pmd **parts, size_t n)
{
    agent_backlog = false;
    if (!agent) {
        return;
    }
    for (int i = 0; tem_poll_batches_start(parts, n)
                    && tem_polls_n < agent_cfg.queue_size; i++) {
        struct tpm_agent_cmd cmd;

        if (i >= TPM_AGENT_CMDS_PER_RUN) {
            agent_backlog = true;
            break;
        }
        if (!tpm_agent_recv(agent, &cmd)) {
            break;
        }
        COVERAGE_INC(tpm_agent_command);
        switch (cmd.type) {
        case TPM_AGENT_INSTALL:
            actr.installs++;
            tem_install(&cmd, parts, n);
            break;
        case TPM_AGENT_REMOVE: {
            struct host_event *he = tem_event_find(cmd.event_id);
            struct op_client client = tem_client(&cmd);
            actr.removes++;
            if (he) {
                tpm_ovs_host_event_remove(he, parts, n, &client);
            } else {
                char *error = xasprintf("no event of TEM id %"PRIu32
                                        " installed", cmd.event_id);
                tpm_ovs_op_answer(&client, error, NULL);
                free(error);
            }
            break;
        }
        case TPM_AGENT_POLL:
            actr.polls++;
            tem_poll_start(cmd.cookie, cmd.event_id, cmd.epoch, &cmd.group,
                           cmd.tun_id, NULL, 0, parts, n);
            break;
        case TPM_AGENT_POLL_BATCH:
            tem_poll_batch_queue(&cmd);
            break;
        case TPM_AGENT_CONFIGURE:
            /* Every PMD applies it at its next sweep step.  The agent
             * passes on only a Configure that sets something. */
            actr.configures++;
            if (cmd.has_dos_threshold) {
                tpm_ovs_dos_threshold_set(cmd.dos_threshold, "TEM");
            }
            tem_reply(cmd.type, cmd.cookie, cmd.event_id, NULL);
            break;
        case TPM_AGENT_RESYNC:
        default:
            /* A new session: the TEM installs its events again. */
            actr.resyncs++;
            tem_polls_cancel_all();
            tpm_ovs_ops_forget_tem();
            tem_events_remove_all(parts, n);
            VLOG_INFO("TEM session started: its previous events were "
                      "removed, it installs them again");
            break;
        }
        tpm_agent_cmd_free(&cmd);
    }
}

/* The agent's lifecycle. */

static void
agent_cfg_destroy(struct agent_cfg *c)
{
    free(c->endpoint);
    free(c->host_id);
    free(c->prefixes);
    free(c->tem_key);
    free(c->key_file);
    memset(c, 0, sizeof *c);
}

static bool
agent_cfg_equal(const struct agent_cfg *a, const struct agent_cfg *b)
{
    return nullable_string_is_equal(a->endpoint, b->endpoint)
           && nullable_string_is_equal(a->host_id, b->host_id)
           && nullable_string_is_equal(a->prefixes, b->prefixes)
           && a->queue_size == b->queue_size
           && a->outage_buffer == b->outage_buffer
           && a->backoff_max_ns == b->backoff_max_ns
           && a->epoch_ns == b->epoch_ns
           && nullable_string_is_equal(a->tem_key, b->tem_key)
           && nullable_string_is_equal(a->key_file, b->key_file)
           && a->insecure == b->insecure;
}

static int
compare_u32(const void *a_, const void *b_)
{
    uint32_t a = *(const uint32_t *) a_, b = *(const uint32_t *) b_;
    return a < b ? -1 : a > b;
}

/* Returns the core ids of 'parts', sorted (caller frees). */
static uint32_t *
pmd_core_ids(struct tpm_pmd **parts, size_t n)
{
    uint32_t *ids = xmalloc(MAX(n, 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        ids[i] = parts[i]->core_id;
    }
    qsort(ids, n, sizeof *ids, compare_u32);
    return ids;
}

/* Stops the agent, if any, and forgets the TEM's events and polls: a TEM
 * event on a host that cannot report it would only cost. */
static void
agent_stop(struct tpm_pmd **parts, size_t n)
{
    if (!agent) {
        return;
    }
    tem_polls_cancel_all();
    tpm_ovs_ops_forget_tem();
    tem_events_remove_all(parts, n);
    tpm_agent_destroy(agent);
    agent = NULL;
    free(agent_pmd_ids);
    agent_pmd_ids = NULL;
    agent_n_pmds = 0;
}

/* Starts an agent for 'c' that announces the PMDs 'parts'.  Returns NULL
 * or an error (caller frees). */
static char *
agent_start(const struct agent_cfg *c, struct tpm_pmd **parts, size_t n)
{
    struct tpm_agent_config ac;
    char host[256];

    tpm_agent_config_init(&ac);
    if (c->host_id) {
        ac.host_id = c->host_id;
    } else if (gethostname(host, sizeof host)) {
        return xasprintf("cannot read the hostname (%s): set "
                         "other_config:tpm-host-id", ovs_strerror(errno));
    } else {
        host[MIN(sizeof host - 1, TPROTO_MAX_ID)] = '\0';
        ac.host_id = host;
    }

    struct tpm_prefix *prefixes;
    size_t n_prefixes;
    char *error = tpm_prefix_parse_list(c->prefixes, &prefixes,
                                        &n_prefixes);
    if (error) {
        return error;
    }
    uint32_t *ids = pmd_core_ids(parts, n);
    ac.endpoint = c->endpoint;
    ac.prefixes = prefixes;
    ac.n_prefixes = n_prefixes;
    ac.epoch_ns = c->epoch_ns;
    ac.pmd_ids = ids;
    ac.n_pmds = n;
    ac.software = "ovs-vswitchd " VERSION;
    ac.queue_size = c->queue_size;
    ac.outage_buffer = c->outage_buffer;
    ac.backoff_max_ns = c->backoff_max_ns;
    ac.tem_public_key = c->tem_key;
    ac.key_file = c->key_file;
    ac.insecure_plaintext = c->insecure;
    agent = tpm_agent_create(&ac, &error);
    free(prefixes);
    if (!agent) {
        free(ids);
        COVERAGE_INC(tpm_agent_create_failed);
        return error;
    }
    agent_pmd_ids = ids;
    agent_n_pmds = n;
    agent_pmds_gen = tpm_ovs_snapshot_gen;
    agent_started_ns = tpm_ovs_now_ns();
    memset(&actr, 0, sizeof actr);
    VLOG_INFO("TEM agent started: controller %s, host id %s, %"PRIuSIZE
              " prefixes, %"PRIuSIZE" PMD threads", c->endpoint, ac.host_id,
              n_prefixes, n);
    return NULL;
}

/* Restarts the agent with 'agent_cfg' (if one is configured): it says
 * Hello again with the current PMDs. */
static void
agent_restart(struct tpm_pmd **parts, size_t n, const char *why)
{
    agent_stop(parts, n);
    if (agent_cfg.endpoint) {
        VLOG_INFO("restarting the TEM agent: %s", why);
        agent_restarts++;
        COVERAGE_INC(tpm_agent_restart);
        char *error = agent_start(&agent_cfg, parts, n);
        if (error) {
            VLOG_ERR("TEM agent not restarted: %s", error);
            free(error);
        }
    }
}

/* Tells the agent when the PMD threads changed since its Hello: it says
 * Hello again, as the same run, so that the reports the TEM has not
 * confirmed (its outage buffer) reach the next session; the TEM's
 * events are installed again on the new session (TPM_AGENT_RESYNC). */
void
tpm_ovs_agent_check_pmds(struct tpm_pmd **parts, size_t n)
{
    if (!agent || agent_pmds_gen == tpm_ovs_snapshot_gen) {
        return;
    }
    agent_pmds_gen = tpm_ovs_snapshot_gen;
    uint32_t *ids = pmd_core_ids(parts, n);
    if (n == agent_n_pmds && !memcmp(ids, agent_pmd_ids, n * sizeof *ids)) {
        free(ids);
        return;
    }
    VLOG_INFO("the PMD threads changed (%"PRIuSIZE" now): the TEM agent "
              "says Hello again", n);
    agent_pmd_restarts++;
    tpm_agent_set_pmds(agent, ids, n);
    free(agent_pmd_ids);
    agent_pmd_ids = ids;
    agent_n_pmds = n;
}

/* Returns true if 's' is a valid host id (lib/agent.h). */
static bool
host_id_valid(const char *s)
{
    size_t len = strlen(s);
    if (!len || len > TPROTO_MAX_ID) {
        return false;
    }
    for (; *s; s++) {
        if (!isalnum((unsigned char) *s) && !strchr("_.:-", *s)) {
            return false;
        }
    }
    return true;
}

/* Makes the host events hand the satisfactions of the TEM's events to
 * the agent (tpm_ovs_init(), before any event exists). */
void
tpm_ovs_agent_init(void)
{
    tpm_ovs_event_set_tem_sink(tem_send_satisfaction, NULL);
}

/* Reads the agent's knobs.  Any change restarts the agent; an invalid
 * value is logged and the previous settings stay. */
void
tpm_ovs_agent_set_config(const struct smap *cfg)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct tpm_agent_config defaults;
    struct agent_cfg c;
    bool ok = true;

    tpm_agent_config_init(&defaults);
    memset(&c, 0, sizeof c);
    c.queue_size = defaults.queue_size;
    c.outage_buffer = defaults.outage_buffer;
    c.backoff_max_ns = defaults.backoff_max_ns;
    c.epoch_ns = tpm_ovs_knobs.params.epoch_ns;

    const char *endpoint = smap_get(cfg, "tpm-controller");
    size_t max_endpoint = MEMBER_SIZEOF(struct tpm_agent_status,
                                        endpoint) - 1;
    if (endpoint && strlen(endpoint) > max_endpoint) {
        VLOG_WARN_RL(&rl, "other_config:tpm-controller rejected: longer "
                     "than %"PRIuSIZE" characters", max_endpoint);
        ok = false;
    } else if (endpoint && endpoint[0]) {
        c.endpoint = xstrdup(endpoint);
    }

    const char *host_id = smap_get(cfg, "tpm-host-id");
    if (host_id && !host_id_valid(host_id)) {
        VLOG_WARN_RL(&rl, "other_config:tpm-host-id=\"%s\" rejected: "
                     "expected 1 to %d characters from [A-Za-z0-9_.:-]",
                     host_id, TPROTO_MAX_ID);
        ok = false;
    } else if (host_id) {
        c.host_id = xstrdup(host_id);
    }

    const char *prefixes = smap_get_def(cfg, "tpm-prefixes", "");
    struct tpm_prefix *parsed;
    size_t n_parsed;
    char *error = tpm_prefix_parse_list(prefixes, &parsed, &n_parsed);
    if (error) {
        VLOG_WARN_RL(&rl, "other_config:tpm-prefixes=\"%s\" rejected: %s",
                     prefixes, error);
        free(error);
        ok = false;
    } else {
        free(parsed);
        if (n_parsed > TPROTO_MAX_PREFIXES) {
            VLOG_WARN_RL(&rl, "other_config:tpm-prefixes rejected: %"PRIuSIZE
                         " prefixes, at most %d", n_parsed,
                         TPROTO_MAX_PREFIXES);
            ok = false;
        }
        c.prefixes = xstrdup(prefixes);
    }

    /* CURVE keys (docs/operations.md, "Keys"); checked by the agent. */
    c.tem_key = nullable_xstrdup(smap_get(cfg, "tpm-controller-key"));
    c.key_file = nullable_xstrdup(smap_get(cfg, "tpm-host-key-file"));
    ok &= tpm_ovs_knob_bool(cfg, "tpm-controller-insecure", &c.insecure);

    ok &= tpm_ovs_knob_uint(cfg, "tpm-agent-queue", 16, 1u << 20,
                            &c.queue_size);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-agent-outage-buffer", 1, 1u << 24,
                            &c.outage_buffer);
    uint64_t backoff = c.backoff_max_ns;
    ok &= tpm_ovs_knob_time(cfg, "tpm-agent-backoff-max",
                            defaults.backoff_min_ns,
                            3600ULL * 1000 * 1000 * 1000, &backoff);
    c.backoff_max_ns = backoff;

    if (!ok) {
        VLOG_WARN_RL(&rl, "keeping the previous TEM agent settings");
        agent_cfg_destroy(&c);
        return;
    }
    if (agent_cfg_equal(&c, &agent_cfg)) {
        agent_cfg_destroy(&c);
        return;
    }

    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    bool was_running = agent != NULL;
    agent_stop(parts, n);
    error = c.endpoint ? agent_start(&c, parts, n) : NULL;
    if (error) {
        VLOG_ERR("TEM agent for other_config:tpm-controller=\"%s\" not "
                 "started: %s; keeping the previous settings", c.endpoint,
                 error);
        free(error);
        agent_cfg_destroy(&c);
        if (was_running) {
            agent_restart(parts, n, "new settings rejected");
        }
    } else {
        if (was_running && c.endpoint) {
            agent_restarts++;
            COVERAGE_INC(tpm_agent_restart);
        } else if (was_running) {
            VLOG_INFO("TEM agent stopped (other_config:tpm-controller "
                      "unset)");
        }
        agent_cfg_destroy(&agent_cfg);
        agent_cfg = c;
    }
    free(parts);
}

/* Appends to 's' a line on the agent for tpm/stats. */
void
tpm_ovs_agent_format_summary(struct ds *s)
{
    if (!agent) {
        ds_put_cstr(s, "controller: none\n");
        return;
    }
    struct tpm_agent_status st;
    size_t n_tem = 0;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        n_tem += he->tem;
    }
    tpm_agent_get_status(agent, &st);
    ds_put_format(s, "controller: %s, %s; messages in %"PRIu64", out "
                  "%"PRIu64", dropped in %"PRIu64", out %"PRIu64"; reports "
                  "acked %"PRIu64", pending %"PRIu64", dropped %"PRIu64
                  "; TEM events %"PRIuSIZE", polls pending %"PRIuSIZE"\n",
                  st.endpoint, tpm_agent_state_name(st.state), st.msgs_in,
                  st.msgs_out, st.drops_in, st.drops_out, st.acked,
                  st.pending, st.dropped_outage, n_tem, tem_polls_n);
}

/* Formats an age in seconds ("never" if 'then' is 0). */
static void
format_age(struct ds *s, uint64_t then, uint64_t now)
{
    if (!then) {
        ds_put_cstr(s, "never");
    } else {
        ds_put_format(s, "%.1f s ago",
                      now > then ? (now - then) / 1e9 : 0.0);
    }
}

void
tpm_unixctl_controller_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
                            const char *argv[] OVS_UNUSED,
                            void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;

    if (!agent) {
        ds_put_cstr(&s, "no controller (other_config:tpm-controller is not "
                    "set)\n");
        unixctl_command_reply(conn, ds_cstr(&s));
        ds_destroy(&s);
        return;
    }

    struct tpm_agent_status st;
    uint64_t now = tpm_ovs_now_ns();
    char t[32];
    tpm_agent_get_status(agent, &st);
    ds_put_format(&s, "controller: %s\n", st.endpoint);
    ds_put_format(&s, "state: %s\n", tpm_agent_state_name(st.state));
    ds_put_format(&s, "host id: %s\n", st.host_id);
    ds_put_format(&s, "tem id: %s, protocol version: %"PRIu32"\n",
                  st.tem_id[0] ? st.tem_id : "-", st.version);
    ds_put_format(&s, "prefixes: %s\n",
                  agent_cfg.prefixes[0] ? agent_cfg.prefixes : "-");
    ds_put_format(&s, "epoch: %s, PMD cores:",
                  tpm_time_format(agent_cfg.epoch_ns, t, sizeof t));
    for (size_t i = 0; i < agent_n_pmds; i++) {
        ds_put_format(&s, " %"PRIu32, agent_pmd_ids[i]);
    }
    ds_put_format(&s, "%s\n", agent_n_pmds ? "" : " none");
    ds_put_format(&s, "sessions: %"PRIu64", reconnects: %"PRIu64", agent "
                  "restarts: %"PRIu64", new Hellos for new PMD threads: "
                  "%"PRIu64" (started ", st.sessions, st.reconnects,
                  agent_restarts, agent_pmd_restarts);
    format_age(&s, agent_started_ns, now);
    ds_put_cstr(&s, ")\n");
    ds_put_format(&s, "frames in: %"PRIu64", out: %"PRIu64"\n",
                  st.frames_in, st.frames_out);
    ds_put_format(&s, "messages in: %"PRIu64", out: %"PRIu64"\n",
                  st.msgs_in, st.msgs_out);
    ds_put_format(&s, "invalid in: %"PRIu64"\n", st.invalid_in);
    ds_put_format(&s, "drops in: %"PRIu64" (command queue full), out: "
                  "%"PRIu64" (acks, nacks, poll batch replies: queue full or "
                  "no session)\n",
                  st.drops_in, st.drops_out);
    ds_put_format(&s, "reports (satisfactions, PollReplies): %"PRIu64
                  ": acked %"PRIu64", unconfirmed %"PRIu64", dropped "
                  "%"PRIu64" (outage buffer of %"PRIu32" full), dropped "
                  "%"PRIu64" (tenants', TEM older than version 4), pending "
                  "%"PRIu64"; sent late %"PRIu64"\n", st.reports, st.acked,
                  st.unconfirmed, st.dropped_outage,
                  agent_cfg.outage_buffer, st.dropped_tenant, st.pending,
                  st.late_sent);
    ds_put_cstr(&s, "last message in: ");
    format_age(&s, st.last_rx_ns, now);
    ds_put_cstr(&s, "\nlast error: ");
    if (st.last_error[0]) {
        ds_put_format(&s, "%s (", st.last_error);
        format_age(&s, st.last_error_ns, now);
        ds_put_cstr(&s, ")\n");
    } else {
        ds_put_cstr(&s, "none\n");
    }
    ds_put_format(&s, "commands: installs %"PRIu64", removes %"PRIu64
                  ", polls %"PRIu64", resyncs %"PRIu64", configures %"PRIu64
                  ", refused (nacks) %"PRIu64"\n", actr.installs,
                  actr.removes, actr.polls, actr.resyncs, actr.configures,
                  actr.nacks);
    ds_put_format(&s, "sent: satisfactions %"PRIu64" (dropped %"PRIu64
                  "), replies %"PRIu64" (dropped %"PRIu64")\n",
                  actr.satisfactions, actr.satisfactions_dropped,
                  actr.replies, actr.replies_dropped);
    ds_put_format(&s, "polls: pending %"PRIuSIZE", answered incomplete "
                  "%"PRIu64", not yet %"PRIu64", cancelled %"PRIu64
                  ", batches %"PRIu64"\n",
                  tem_polls_n, actr.polls_incomplete, actr.polls_not_yet,
                  actr.polls_cancelled, actr.poll_batches);

    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    struct ds ev = DS_EMPTY_INITIALIZER;
    size_t n_tem = 0;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        if (!he->tem) {
            continue;
        }
        n_tem++;
        ds_put_format(&ev, "  %s (TEM id %"PRIu32"): ", he->name,
                      he->tem_id);
        if (he->has_share) {
            ds_put_format(&ev, "threshold share %.17g", he->share);
        } else {
            ds_put_cstr(&ev, "whole threshold");
        }
        if (he->split && n > 1) {
            ds_put_format(&ev, ", split over %"PRIuSIZE" PMDs", n);
        } else if (!he->split) {
            ds_put_format(&ev, ", not split (%s)",
                          he->no_split_why ? he->no_split_why : "-");
        }
        ds_put_format(&ev, ", satisfactions %"PRIu64", sent %"PRIu64
                      " (dropped %"PRIu64")\n", he->n_reports, he->n_sent,
                      he->n_send_dropped);
    }
    free(parts);
    ds_put_format(&s, "TEM events: %"PRIuSIZE"\n%s", n_tem, ds_cstr(&ev));
    ds_destroy(&ev);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}


/* The main loop's wakeups for the agent: a command queued, or PMDs that
 * came or went (the agent says Hello again). */
void
tpm_ovs_agent_wait(void)
{
    if (!agent) {
        return;
    }
    if (agent_backlog) {
        poll_immediate_wake();
    } else if (tem_polls_n < agent_cfg.queue_size) {
        if (!ovs_list_is_empty(&tem_batches)) {
            poll_immediate_wake();
        }
        /* A command from the TEM wakes us at once. */
        poll_fd_wait(tpm_agent_fd(agent), POLLIN);
    }
    if (tpm_ovs_pmds_gen() != agent_pmds_gen) {
        poll_immediate_wake();
    }
}

/* Gives the agent the 'n' PMDs' counters 'stats', summed, for its
 * heartbeats (the TEM's metrics).  About once a second. */
void
tpm_ovs_agent_counters(const struct tpm_stats *stats, size_t n)
{
    struct tproto_host_counters c;

    if (!agent) {
        return;
    }
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < n; i++) {
        const struct tpm_stats *st = &stats[i];
        c.packets += st->packets;
        c.bytes += st->bytes;
        c.sweeps += st->sweeps_done;
        c.sweeps_unfinished += st->sweeps_unfinished;
        c.reports += st->reports;
        c.reports_dropped += st->reports_dropped;
        c.dos_skipped += st->dos_skipped_pkts;
        c.dos_passed += st->dos_passed;
    }
    tpm_agent_set_counters(agent, &c);
}
