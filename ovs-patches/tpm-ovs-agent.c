/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM agent glue: with other_config:tpm-controller set, host agents
 * (lib/agent.h: each its own thread and socket) talk to the TEMs, and
 * the main thread executes the TEMs' commands here: installs and removes
 * are host events (tpm-ovs-event.c), polls are operations on the PMDs
 * (tpm-ovs-request.c), satisfactions of a TEM's events go back to it.
 * tpm/controller-show shows the sessions.
 *
 * tpm-controller is a list of endpoints, one "link" each (struct
 * tem_link): an agent with its own session, outage buffer, pending polls
 * and counters.  One endpoint is one TEM; several are the members of a
 * TEM cluster (docs/tem.md, "Past one TEM"), to each of which the host
 * connects.  A cluster's event ids are the cluster's, so an id is one
 * host event whichever TEM installs it, and each TEM event belongs to
 * the link whose TEM installed it last (host_event 'tem_link'):
 *
 *   - An install of an id another link owns takes it over (the cluster
 *     moved the event to that TEM, which installs it on its hosts):
 *     counted ('taken_over' of the new owner, 'lost' of the old),
 *     logged.  The same definition and share keep the event on the PMDs
 *     as it is (its history too), and the old owner's agent hands over
 *     the event's satisfactions its TEM never confirmed, which go to the
 *     new owner flagged late (tpm_agent_hand_over(); the new owner
 *     decides them from the hosts' history); a different one replaces
 *     it.
 *   - A remove from a link that does not own the id is acked and leaves
 *     the event: the TEM that sent it no longer has the event here,
 *     which is all it asked for, while the owner still wants it.  A nack
 *     would report an error for the ordinary order of a cluster's
 *     rebalance (the new owner's install reaching the host before the old
 *     owner's remove).  An id no link owns is nacked, as ever.
 *   - Satisfactions go to the owner's agent; a poll finds the event only
 *     if it comes from the owner (another link's gets POLL_NO_EVENT).
 *   - A link's new session (resync), or its agent stopped, removes the
 *     events that link owns, drops its pending polls and forgets its
 *     operations' answers, and touches no other link's.  A link whose
 *     TEM went away keeps its events (its agent reconnects) until another
 *     TEM takes them over or its next session resyncs.
 *
 * A change of the endpoint list restarts only the links whose endpoint
 * or key changed (and starts or stops those added or removed); a change
 * of any other agent knob restarts them all.
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
COVERAGE_DEFINE(tpm_agent_takeover);
COVERAGE_DEFINE(tpm_agent_remove_not_owner);
COVERAGE_DEFINE(tpm_tem_poll);
COVERAGE_DEFINE(tpm_tem_poll_incomplete);
COVERAGE_DEFINE(tpm_tem_poll_not_yet);
COVERAGE_DEFINE(tpm_tem_poll_cancelled);

/* The agents' configuration in force (other_config, validated):
 * 'n_links' endpoints, each with its TEM's key, and the settings all
 * share. */
struct agent_cfg {
    size_t n_links;             /* 0: no agent. */
    char **endpoints;           /* As given (trimmed). */
    char **keys;                /* tpm-controller-key of each (NULL:
                                 * unset). */
    char *host_id;              /* NULL: the system's hostname. */
    char *prefixes;             /* As given; "" if unset. */
    uint32_t queue_size;
    uint32_t outage_buffer;
    uint64_t backoff_max_ns;
    uint64_t epoch_ns;
    char *key_file;             /* tpm-host-key-file. */
    uint32_t insecure;          /* tpm-controller-insecure. */
};
static struct agent_cfg agent_cfg;

/* What the main thread did for a link since its agent (re)started. */
struct agent_counters {
    uint64_t installs, removes, polls, resyncs, configures;
    uint64_t nacks;
    uint64_t satisfactions, satisfactions_dropped;
    uint64_t replies, replies_dropped;  /* Acks, nacks, poll replies. */
    uint64_t polls_incomplete, polls_not_yet, polls_cancelled;
    uint64_t poll_batches;              /* Of 'polls', in batches. */
    uint64_t taken_over;        /* Installs of an event another link
                                 * owned. */
    uint64_t lost;              /* Its events another link took over. */
    uint64_t removes_not_owned; /* Removes of an event another link owns:
                                 * acked, event left. */
    uint64_t handed_in;         /* Satisfactions another link's agent
                                 * handed over, sent to this TEM. */
    uint64_t handed_dropped;    /* Handed over by this link's agent, but
                                 * the event has no other owner now, or
                                 * its agent dropped them. */
};

/* One agent: the host's session with one TEM. */
struct tem_link {
    char *endpoint;             /* As configured. */
    char *tem_key;              /* Its TEM's key (NULL: unset). */
    struct tpm_agent *agent;
    uint32_t *pmd_ids;          /* Announced in its Hello. */
    size_t n_pmds;
    uint64_t restarts;          /* Of this endpoint's agent, for new
                                 * settings. */
    uint64_t pmd_restarts;      /* New Hellos for new PMD threads. */
    uint64_t started_ns;
    struct agent_counters ctr;
    bool backlog;               /* tpm_ovs_run() left commands queued. */

    /* The TEM's polls being answered (struct tem_poll), oldest first,
     * and its PollBatches whose entries remain to start. */
    struct ovs_list polls;
    size_t n_polls;
    struct ovs_list batches;
};

/* The links, in the order of other_config:tpm-controller. */
static struct tem_link **links;
static size_t n_links;
static uint64_t agent_pmds_gen;     /* 'pmds_gen' last compared. */
static uint64_t agent_restarts;     /* Agents restarted for new settings,
                                     * since ovs-vswitchd started. */

/* Largest number of agent commands executed per tpm_ovs_run() call and
 * link (the rest wait for the next, which comes at once). */
#define TPM_AGENT_CMDS_PER_RUN 256

/* A PollBatch of the TEM (protocol version 3): its entries start as
 * polls of their own while fewer than the agent's queue size are pending
 * (so a batch of any size is bounded like single polls); each answer goes
 * into 'status' and 'values', and the last sends them all in one
 * PollBatchReply. */
struct tem_poll_batch {
    struct ovs_list node;       /* In its link's 'batches' while entries
                                 * remain to start. */
    struct tem_link *link;
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

/* Sends host-level satisfaction of TEM event 'he' to its owner's TEM:
 * the TEM sink of the host events (tpm_ovs_agent_init()). */
static void
tem_send_satisfaction(void *aux OVS_UNUSED, struct host_event *he,
                      uint64_t epoch, const struct tpm_key *group,
                      double value, uint32_t flags, int n_pmds,
                      int n_missing)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    struct tem_link *l = he->tem_link;

    if (group->tun && l && !tpm_agent_sends_tenants(l->agent)) {
        /* A TEM of protocol version below 4 names no tenant: sent, the
         * group would merge with the other tenants' there. */
        he->n_send_dropped++;
        l->ctr.satisfactions_dropped++;
        COVERAGE_INC(tpm_agent_tenant_unsent);
        VLOG_WARN_RL(&rl, "%s: satisfaction for epoch %"PRIu64" of tenant "
                     "tun_id=%"PRIu32" not sent: the TEM's protocol version "
                     "is older than 4, which carries tenants", he->name,
                     epoch, tpm_ovs_group_vni(group));
        return;
    }
    if (l && tpm_agent_send_satisfaction(l->agent, he->tem_id, epoch,
                                         group, tpm_ovs_group_vni(group),
                                         value, flags, n_pmds + n_missing,
                                         n_missing)) {
        he->n_sent++;
        l->ctr.satisfactions++;
        return;
    }
    he->n_send_dropped++;
    if (l) {
        l->ctr.satisfactions_dropped++;
    }
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s: satisfaction for epoch %"PRIu64" not sent to "
                 "the TEM (%s)", he->name, epoch,
                 l ? "agent queue full" : "no agent");
}

/* The TEMs. */

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

/* The TEM event 'tem_id' if link 'l' owns it, else NULL. */
static struct host_event *
tem_event_find_owned(const struct tem_link *l, uint32_t tem_id)
{
    struct host_event *he = tem_event_find(tem_id);
    return he && he->tem_link == l ? he : NULL;
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

/* Counts a message link 'l''s agent did not take: its queue is full, or,
 * for one of the session only ('session': an ack, nack or poll batch
 * reply), no session is open.  (A PollReply is kept over an outage.) */
static void
agent_send_dropped(const struct tem_link *l, const char *what,
                   uint32_t tem_id, bool session)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s for TEM event id %"PRIu32" not sent to %s: agent "
                 "queue full%s", what, tem_id, l->endpoint,
                 session ? " or no session" : "");
}

/* Acks the command ('type', 'cookie', 'event_id') of link 'l''s TEM, or
 * nacks it with 'error' (cut to what the protocol carries). */
static void
tem_reply(struct tem_link *l, enum tpm_agent_cmd_type type, uint64_t cookie,
          uint32_t event_id, const char *error)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    bool sent;

    if (error) {
        char reason[TPROTO_MAX_REASON + 1];
        ovs_strlcpy(reason, error, sizeof reason);
        l->ctr.nacks++;
        COVERAGE_INC(tpm_agent_nack);
        VLOG_WARN_RL(&rl, "TEM %s of event id %"PRIu32" refused: %s",
                     agent_cmd_name(type), event_id, error);
        sent = tpm_agent_send_nack(l->agent, cookie, event_id, reason);
    } else {
        sent = tpm_agent_send_ack(l->agent, cookie, event_id);
    }
    if (sent) {
        l->ctr.replies++;
    } else {
        l->ctr.replies_dropped++;
        agent_send_dropped(l, error ? "nack" : "ack", event_id, true);
    }
}

/* The 'reply' callback of the TEMs' operations (tem_client()). */
static void
tem_client_reply(const struct op_client *c, const char *error)
{
    tem_reply(c->tem_link, c->tem_type, c->tem_cookie, c->tem_event_id,
              error);
}

static struct op_client
tem_client(struct tem_link *l, const struct tpm_agent_cmd *cmd)
{
    return (struct op_client) {
        .reply = tem_client_reply,
        .tem_link = l,
        .tem_type = cmd->type,
        .tem_cookie = cmd->cookie,
        .tem_event_id = cmd->event_id,
    };
}

/* Link 'l''s TEM installs 'he', which another link owns: it takes it
 * over.  With 'same' (the event stays as it is), what the other link's
 * agent holds unconfirmed of it is handed over to 'l''s. */
static void
tem_take_over(struct tem_link *l, struct host_event *he, bool same)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    struct tem_link *from = he->tem_link;

    l->ctr.taken_over++;
    if (from) {
        from->ctr.lost++;
        if (same) {
            tpm_agent_hand_over(from->agent, he->tem_id, true);
        }
    }
    COVERAGE_INC(tpm_agent_takeover);
    VLOG_INFO_RL(&rl, "TEM event id %"PRIu32" (%s) taken over by the TEM "
                 "at %s from the TEM at %s", he->tem_id, he->name,
                 l->endpoint, from ? from->endpoint : "-");
    he->tem_link = l;
}

/* Installs the event of 'cmd' from link 'l''s TEM on the PMDs 'parts',
 * and acks or nacks it (once every PMD answered).  An install for an id
 * already installed with the same name, definition and threshold share
 * changes nothing on the PMDs (a retried install, or another TEM taking
 * the event over); with anything different it replaces it.  Either way
 * 'l' owns it from now on. */
static void
tem_install(struct tem_link *l, const struct tpm_agent_cmd *cmd,
            struct tpm_pmd **parts, size_t n)
{
    struct op_client client = tem_client(l, cmd);
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
    }
    bool same = (old && old == other && !strcmp(old->def->text, ev->text)
                 && old->has_share == cmd->has_threshold
                 && (!cmd->has_threshold || old->share == cmd->threshold));
    if (old && old->tem_link != l) {
        tem_take_over(l, old, same);
    }
    /* A hand-over of this event by 'l''s agent, if one is under way, is
     * called off: its TEM owns the event again. */
    tpm_agent_hand_over(l->agent, cmd->event_id, false);
    if (same) {
        /* Installed already, as asked. */
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
    he->tem_link = l;
    he->has_share = cmd->has_threshold;
    he->share = cmd->threshold;
    tpm_ovs_host_event_add(he, parts, n, &client);
    return;

refuse:
    tpm_ovs_op_answer(&client, error, NULL);
    free(error);
}

/* Removes TEM event 'cmd->event_id' if link 'l' owns it.  One that
 * another link owns is acked and left (see the top of the file). */
static void
tem_remove(struct tem_link *l, const struct tpm_agent_cmd *cmd,
           struct tpm_pmd **parts, size_t n)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    struct host_event *he = tem_event_find(cmd->event_id);
    struct op_client client = tem_client(l, cmd);

    l->ctr.removes++;
    if (he && he->tem_link == l) {
        tpm_ovs_host_event_remove(he, parts, n, &client);
    } else if (he) {
        l->ctr.removes_not_owned++;
        COVERAGE_INC(tpm_agent_remove_not_owner);
        VLOG_INFO_RL(&rl, "TEM at %s removes event id %"PRIu32" (%s), which "
                     "the TEM at %s installed since: acked, the event "
                     "stays", l->endpoint, he->tem_id, he->name,
                     he->tem_link ? he->tem_link->endpoint : "-");
        tpm_ovs_op_answer(&client, NULL, NULL);
    } else {
        char *error = xasprintf("no event of TEM id %"PRIu32" installed",
                                cmd->event_id);
        tpm_ovs_op_answer(&client, error, NULL);
        free(error);
    }
}

/* Removes every event link 'l''s TEM owns. */
static void
tem_events_remove_owned(const struct tem_link *l, struct tpm_pmd **parts,
                        size_t n)
{
    uint32_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    struct host_event *he;

    LIST_FOR_EACH_SAFE (he, node, &tpm_ovs_host_events) {
        if (he->tem && he->tem_link == l) {
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
        struct tem_link *l = b->link;
        if (tpm_agent_send_poll_batch_reply(l->agent, b->cookie, b->epoch,
                                            b->status, b->values, b->n)) {
            l->ctr.replies++;
        } else {
            l->ctr.replies_dropped++;
            agent_send_dropped(l, "poll batch reply", b->event_ids[0],
                               true);
        }
    }
    free(b->groups);
    free(b->status);
    free(b->values);
    free(b);
}

/* Answers a poll of link 'l''s TEM: on its own, or as entry 'index' of
 * 'batch'. */
static void
tem_poll_answer(struct tem_link *l, struct tem_poll_batch *batch,
                size_t index, uint64_t cookie, uint32_t tem_id,
                uint64_t epoch, Trumpet__PollStatus status, double value)
{
    if (batch) {
        batch->status[index] = status;
        batch->values[index] = value;
        tem_poll_batch_unref(batch);
    } else if (tpm_agent_send_poll_reply(l->agent, cookie, tem_id, epoch,
                                         status, value)) {
        l->ctr.replies++;
    } else {
        l->ctr.replies_dropped++;
        agent_send_dropped(l, "poll reply", tem_id, false);
    }
}

/* A poll of a TEM: one poll request per PMD, asked again while a PMD
 * says it has not swept the epoch yet, answered with the sum. */
struct tem_poll {
    struct op up;
    struct ovs_list node;       /* In its link's 'polls', oldest first. */
    struct tem_link *link;
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
    p->link->n_polls--;
    tpm_ovs_op_destroy(&p->up);
    free(p);
}

/* Forgets every pending poll of link 'l''s TEM without answering (the
 * session they belong to is over).  Late PMD replies to them are
 * ignored. */
static void
tem_polls_cancel_all(struct tem_link *l)
{
    struct tem_poll_batch *b;
    LIST_FOR_EACH_SAFE (b, node, &l->batches) {
        size_t unstarted = b->n - b->next;
        ovs_list_remove(&b->node);
        l->ctr.polls_cancelled += unstarted;
        b->cancelled = true;
        b->left -= unstarted - 1;
        tem_poll_batch_unref(b);
    }

    struct tem_poll *p;
    LIST_FOR_EACH_SAFE (p, node, &l->polls) {
        l->ctr.polls_cancelled++;
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
    struct tem_link *l = p->link;
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
        l->ctr.polls_not_yet++;
        COVERAGE_INC(tpm_tem_poll_not_yet);
        VLOG_DBG_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                    "%"PRIuSIZE" PMDs had not swept it by "
                    "tpm-poll-timeout", p->tem_id, p->epoch, not_yet);
    } else if (missing || no_event) {
        status = TRUMPET__POLL_STATUS__POLL_INCOMPLETE;
        l->ctr.polls_incomplete++;
        COVERAGE_INC(tpm_tem_poll_incomplete);
        VLOG_WARN_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                     "%"PRIuSIZE" of %"PRIuSIZE" PMDs did not answer by "
                     "tpm-poll-timeout or lack the event; answering the sum "
                     "of the others", p->tem_id, p->epoch,
                     missing + no_event, op->n_reqs);
    } else {
        status = TRUMPET__POLL_STATUS__POLL_OK;
    }
    tem_poll_answer(l, p->batch, p->index, p->cookie, p->tem_id, p->epoch,
                    status, sum);
    p->batch = NULL;
    tem_poll_free(p);
}

/* Starts answering the poll of link 'l''s TEM of 'event_id' for 'group'
 * in 'epoch' (with 'cookie', or as entry 'index' of 'batch') over the
 * PMDs 'parts'.  A tenant's group ('group->tun' not 0) is tenant
 * 'tun_id''s (a VNI).  An event 'l' does not own is no event for it. */
static void
tem_poll_start(struct tem_link *l, uint64_t cookie, uint32_t event_id,
               uint64_t epoch, const struct tpm_key *group_, uint32_t tun_id,
               struct tem_poll_batch *batch, size_t index,
               struct tpm_pmd **parts, size_t n)
{
    struct host_event *he = tem_event_find_owned(l, event_id);
    struct tpm_key tenant_group;
    const struct tpm_key *group = group_;
    COVERAGE_INC(tpm_tem_poll);
    if (!he) {
        tem_poll_answer(l, batch, index, cookie, event_id, epoch,
                        TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
        return;
    }
    if (group_->tun) {
        /* The TEM names the tenant by its VNI; the PMDs share one table
         * of slots, where a VNI no PMD has met has none: no traffic. */
        tenant_group = *group_;
        tenant_group.tun = tpm_tenants_find(tpm_ovs_tenants_get(), tun_id);
        if (!tenant_group.tun) {
            tem_poll_answer(l, batch, index, cookie, event_id, epoch,
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
    p->link = l;
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
    ovs_list_push_back(&l->polls, &p->node);
    l->n_polls++;
    tpm_ovs_op_start(&p->up);
}

/* Takes over the PollBatch 'cmd' (its entries) of link 'l''s TEM. */
static void
tem_poll_batch_queue(struct tem_link *l, struct tpm_agent_cmd *cmd)
{
    struct tem_poll_batch *b = xzalloc(sizeof *b);

    b->link = l;
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
    ovs_list_push_back(&l->batches, &b->node);
    l->ctr.polls += b->n;
    l->ctr.poll_batches++;
}

/* Starts the entries of link 'l''s queued PollBatches, oldest first,
 * while fewer than the agent's queue size of its polls are pending.
 * Returns false if entries remain to start. */
static bool
tem_poll_batches_start(struct tem_link *l, struct tpm_pmd **parts,
                       size_t n)
{
    while (!ovs_list_is_empty(&l->batches)) {
        struct tem_poll_batch *b = CONTAINER_OF(ovs_list_front(&l->batches),
                                                struct tem_poll_batch, node);
        while (b->next < b->n) {
            if (l->n_polls >= agent_cfg.queue_size) {
                return false;
            }
            size_t i = b->next++;
            bool last = b->next == b->n;
            if (last) {
                /* Its last start may answer and free 'b'. */
                ovs_list_remove(&b->node);
            }
            tem_poll_start(l, b->cookie, b->event_ids[i], b->epoch,
                           &b->groups[i], b->tun_ids[i], b, i, parts, n);
            if (last) {
                break;
            }
        }
    }
    return true;
}

/* Link 'l''s session is over, or its agent stops: its pending polls,
 * the answers to its operations and the events it owns go. */
static void
tem_link_forget(struct tem_link *l, struct tpm_pmd **parts, size_t n)
{
    tem_polls_cancel_all(l);
    tpm_ovs_ops_forget_tem(l);
    tem_events_remove_owned(l, parts, n);
}

/* Executes the commands link 'l''s agent queued (a bounded number). */
static void
tem_link_run(struct tem_link *l, struct tpm_pmd **parts, size_t n)
{
    l->backlog = false;
    for (int i = 0; tem_poll_batches_start(l, parts, n)
                    && l->n_polls < agent_cfg.queue_size; i++) {
        struct tpm_agent_cmd cmd;

        if (i >= TPM_AGENT_CMDS_PER_RUN) {
            l->backlog = true;
            break;
        }
        if (!tpm_agent_recv(l->agent, &cmd)) {
            break;
        }
        COVERAGE_INC(tpm_agent_command);
        switch (cmd.type) {
        case TPM_AGENT_INSTALL:
            l->ctr.installs++;
            tem_install(l, &cmd, parts, n);
            break;
        case TPM_AGENT_REMOVE:
            tem_remove(l, &cmd, parts, n);
            break;
        case TPM_AGENT_POLL:
            l->ctr.polls++;
            tem_poll_start(l, cmd.cookie, cmd.event_id, cmd.epoch,
                           &cmd.group, cmd.tun_id, NULL, 0, parts, n);
            break;
        case TPM_AGENT_POLL_BATCH:
            tem_poll_batch_queue(l, &cmd);
            break;
        case TPM_AGENT_CONFIGURE:
            /* Every PMD applies it at its next sweep step.  The agent
             * passes on only a Configure that sets something. */
            l->ctr.configures++;
            if (cmd.has_dos_threshold) {
                tpm_ovs_dos_threshold_set(cmd.dos_threshold, "TEM");
            }
            tem_reply(l, cmd.type, cmd.cookie, cmd.event_id, NULL);
            break;
        case TPM_AGENT_RESYNC:
        default:
            /* A new session: the TEM installs its events again (those
             * another TEM took over since are that TEM's). */
            l->ctr.resyncs++;
            tem_link_forget(l, parts, n);
            VLOG_INFO("TEM session started with %s: its previous events "
                      "were removed, it installs them again", l->endpoint);
            break;
        }
        tpm_agent_cmd_free(&cmd);
    }
}

/* Sends what link 'l''s agent handed over (tem_take_over()) to the
 * events' owners now. */
static void
tem_link_take_handed(struct tem_link *l)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    struct tpm_agent_report h[64];
    size_t n;

    while ((n = tpm_agent_take_handed(l->agent, h, ARRAY_SIZE(h)))) {
        for (size_t i = 0; i < n; i++) {
            struct host_event *he = tem_event_find(h[i].event_id);
            struct tem_link *owner = he ? he->tem_link : NULL;
            if (owner && owner != l
                && tpm_agent_send_handed(owner->agent, &h[i])) {
                owner->ctr.handed_in++;
                continue;
            }
            l->ctr.handed_dropped++;
            COVERAGE_INC(tpm_agent_send_dropped);
            VLOG_WARN_RL(&rl, "satisfaction of TEM event id %"PRIu32" for "
                         "epoch %"PRIu64" handed over by the TEM at %s not "
                         "sent: %s", h[i].event_id, h[i].epoch, l->endpoint,
                         !owner || owner == l ? "no other TEM owns the event"
                                              : "agent queue full");
        }
    }
}

/* Executes the TEMs' commands queued by the agents (a bounded number per
 * agent); tpm_ovs_run() then queues what they ask of the PMDs. */
void
tpm_ovs_agent_run(struct tpm_pmd **parts, size_t n)
{
    for (size_t i = 0; i < n_links; i++) {
        tem_link_run(links[i], parts, n);
        tem_link_take_handed(links[i]);
    }
}

/* The agents' lifecycle. */

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

static void
agent_cfg_destroy(struct agent_cfg *c)
{
    strv_free(c->endpoints, c->n_links);
    strv_free(c->keys, c->n_links);
    free(c->host_id);
    free(c->prefixes);
    free(c->key_file);
    memset(c, 0, sizeof *c);
}

/* True if 'a' and 'b' have the same settings besides their endpoints
 * and keys (those every link shares). */
static bool
agent_cfg_common_equal(const struct agent_cfg *a, const struct agent_cfg *b)
{
    return nullable_string_is_equal(a->host_id, b->host_id)
           && nullable_string_is_equal(a->prefixes, b->prefixes)
           && a->queue_size == b->queue_size
           && a->outage_buffer == b->outage_buffer
           && a->backoff_max_ns == b->backoff_max_ns
           && a->epoch_ns == b->epoch_ns
           && nullable_string_is_equal(a->key_file, b->key_file)
           && a->insecure == b->insecure;
}

static bool
agent_cfg_equal(const struct agent_cfg *a, const struct agent_cfg *b)
{
    if (a->n_links != b->n_links || !agent_cfg_common_equal(a, b)) {
        return false;
    }
    for (size_t i = 0; i < a->n_links; i++) {
        if (strcmp(a->endpoints[i], b->endpoints[i])
            || !nullable_string_is_equal(a->keys[i], b->keys[i])) {
            return false;
        }
    }
    return true;
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

/* Stops link 'l''s agent, forgets its TEM's events and polls (a TEM
 * event on a host that cannot report it would only cost), and frees
 * 'l'. */
static void
tem_link_stop(struct tem_link *l, struct tpm_pmd **parts, size_t n)
{
    tem_link_forget(l, parts, n);
    tpm_agent_destroy(l->agent);
    free(l->pmd_ids);
    free(l->endpoint);
    free(l->tem_key);
    free(l);
}

/* Starts an agent for link 'i' of 'c' that announces the PMDs 'parts'.
 * Returns the link, or NULL and an error in '*errorp' (caller frees). */
static struct tem_link *
tem_link_start(const struct agent_cfg *c, size_t i, struct tpm_pmd **parts,
               size_t n, char **errorp)
{
    struct tpm_agent_config ac;
    char host[256];

    *errorp = NULL;
    tpm_agent_config_init(&ac);
    if (c->host_id) {
        ac.host_id = c->host_id;
    } else if (gethostname(host, sizeof host)) {
        *errorp = xasprintf("cannot read the hostname (%s): set "
                            "other_config:tpm-host-id",
                            ovs_strerror(errno));
        return NULL;
    } else {
        host[MIN(sizeof host - 1, TPROTO_MAX_ID)] = '\0';
        ac.host_id = host;
    }

    struct tpm_prefix *prefixes;
    size_t n_prefixes;
    char *error = tpm_prefix_parse_list(c->prefixes, &prefixes,
                                        &n_prefixes);
    if (error) {
        *errorp = error;
        return NULL;
    }
    uint32_t *ids = pmd_core_ids(parts, n);
    ac.endpoint = c->endpoints[i];
    ac.prefixes = prefixes;
    ac.n_prefixes = n_prefixes;
    ac.epoch_ns = c->epoch_ns;
    ac.pmd_ids = ids;
    ac.n_pmds = n;
    ac.software = "ovs-vswitchd " VERSION;
    ac.queue_size = c->queue_size;
    ac.outage_buffer = c->outage_buffer;
    ac.backoff_max_ns = c->backoff_max_ns;
    ac.tem_public_key = c->keys[i];
    ac.key_file = c->key_file;
    ac.insecure_plaintext = c->insecure;
    struct tpm_agent *agent = tpm_agent_create(&ac, errorp);
    free(prefixes);
    if (!agent) {
        free(ids);
        COVERAGE_INC(tpm_agent_create_failed);
        return NULL;
    }

    struct tem_link *l = xzalloc(sizeof *l);
    l->endpoint = xstrdup(c->endpoints[i]);
    l->tem_key = nullable_xstrdup(c->keys[i]);
    l->agent = agent;
    l->pmd_ids = ids;
    l->n_pmds = n;
    l->started_ns = tpm_ovs_now_ns();
    ovs_list_init(&l->polls);
    ovs_list_init(&l->batches);
    VLOG_INFO("TEM agent started: controller %s, host id %s, %"PRIuSIZE
              " prefixes, %"PRIuSIZE" PMD threads", c->endpoints[i],
              ac.host_id, n_prefixes, n);
    return l;
}

/* Makes the links those of 'c': a link whose endpoint and key 'c' keeps
 * goes on untouched (unless 'restart_all'), the others stop, then those
 * missing start (each stopped before its successor starts, so that two
 * sessions of this host never share a TEM).  On error, returns it
 * (caller frees) with the links that did not start missing: the caller
 * applies the previous settings again. */
static char *
links_apply(const struct agent_cfg *c, bool restart_all,
            struct tpm_pmd **parts, size_t n)
{
    struct tem_link **next = xcalloc(MAX(c->n_links, 1), sizeof *next);
    uint64_t *restarts = xcalloc(MAX(c->n_links, 1), sizeof *restarts);
    bool *fresh = xcalloc(MAX(c->n_links, 1), sizeof *fresh);

    for (size_t i = 0; i < c->n_links; i++) {
        for (size_t j = 0; j < n_links; j++) {
            struct tem_link *l = links[j];
            if (!l || strcmp(l->endpoint, c->endpoints[i])) {
                continue;
            }
            if (!restart_all
                && nullable_string_is_equal(l->tem_key, c->keys[i])) {
                next[i] = l;
            } else {
                /* Restarted with new settings. */
                restarts[i] = l->restarts + 1;
                tem_link_stop(l, parts, n);
            }
            links[j] = NULL;
            break;
        }
    }
    if (n_links == 1 && c->n_links == 1 && links[0]) {
        /* One TEM for another: a restart, as ever. */
        restarts[0] = links[0]->restarts + 1;
        tem_link_stop(links[0], parts, n);
        links[0] = NULL;
    }
    for (size_t j = 0; j < n_links; j++) {
        if (links[j]) {
            VLOG_INFO("TEM agent for %s stopped (no longer in "
                      "other_config:tpm-controller)", links[j]->endpoint);
            tem_link_stop(links[j], parts, n);
        }
    }
    free(links);
    links = next;
    n_links = c->n_links;

    char *error = NULL;
    for (size_t i = 0; i < c->n_links && !error; i++) {
        if (!next[i]) {
            next[i] = tem_link_start(c, i, parts, n, &error);
            fresh[i] = next[i] != NULL;
            if (next[i] && restarts[i]) {
                next[i]->restarts = restarts[i];
                agent_restarts++;
                COVERAGE_INC(tpm_agent_restart);
            }
        }
    }
    if (error) {
        /* Stop what started here; keep the links that went on. */
        size_t k = 0;
        for (size_t i = 0; i < c->n_links; i++) {
            if (next[i] && fresh[i]) {
                tem_link_stop(next[i], parts, n);
            } else if (next[i]) {
                next[k++] = next[i];
            }
        }
        n_links = k;
    }
    free(restarts);
    free(fresh);
    return error;
}

/* Tells the agents when the PMD threads changed since their Hello: each
 * says Hello again, as the same run, so that the reports its TEM has not
 * confirmed (its outage buffer) reach the next session; each TEM's
 * events are installed again on its new session (TPM_AGENT_RESYNC). */
void
tpm_ovs_agent_check_pmds(struct tpm_pmd **parts, size_t n)
{
    if (!n_links || agent_pmds_gen == tpm_ovs_snapshot_gen) {
        return;
    }
    agent_pmds_gen = tpm_ovs_snapshot_gen;
    uint32_t *ids = pmd_core_ids(parts, n);
    for (size_t i = 0; i < n_links; i++) {
        struct tem_link *l = links[i];
        if (n == l->n_pmds && !memcmp(ids, l->pmd_ids, n * sizeof *ids)) {
            continue;
        }
        VLOG_INFO("the PMD threads changed (%"PRIuSIZE" now): the TEM "
                  "agent for %s says Hello again", n, l->endpoint);
        l->pmd_restarts++;
        tpm_agent_set_pmds(l->agent, ids, n);
        free(l->pmd_ids);
        l->pmd_ids = xmemdup(ids, MAX(n, 1) * sizeof *ids);
        l->n_pmds = n;
    }
    free(ids);
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

/* Splits the comma-separated 'list' into its items, each trimmed of
 * white space, in '*itemsp' and '*np' (caller frees with strv_free()).
 * Returns NULL, or an error (caller frees) for an empty item. */
static char *
list_split(const char *list, char ***itemsp, size_t *np)
{
    char **items = NULL;
    size_t n = 0, cap = 0;
    const char *p = list;

    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *b = p, *e = end;
        while (b < e && isspace((unsigned char) *b)) {
            b++;
        }
        while (e > b && isspace((unsigned char) e[-1])) {
            e--;
        }
        if (b == e) {
            strv_free(items, n);
            *itemsp = NULL;
            *np = 0;
            return xasprintf("item %"PRIuSIZE" is empty", n + 1);
        }
        if (n == cap) {
            items = x2nrealloc(items, &cap, sizeof *items);
        }
        items[n++] = xmemdup0(b, e - b);
        if (!comma) {
            break;
        }
        p = comma + 1;
    }
    *itemsp = items;
    *np = n;
    return NULL;
}

/* Reads other_config:tpm-controller ('endpoints') and tpm-controller-key
 * ('keys', NULL if unset) into 'c'.  Returns NULL, or an error (caller
 * frees) that names the key and what is wrong. */
static char *
agent_parse_links(const char *endpoints, const char *keys,
                  struct agent_cfg *c)
{
    size_t max_endpoint = MEMBER_SIZEOF(struct tpm_agent_status,
                                        endpoint) - 1;
    char **eps, **ks = NULL, **zmq;
    size_t n, n_keys = 0;
    char *error = list_split(endpoints, &eps, &n);
    if (error) {
        char *e = xasprintf("other_config:tpm-controller=\"%s\" rejected: "
                            "%s (a comma-separated list of endpoints)",
                            endpoints, error);
        free(error);
        return e;
    }

    /* Each endpoint valid, and none twice (however it is spelled). */
    zmq = xcalloc(n, sizeof *zmq);
    for (size_t i = 0; i < n && !error; i++) {
        char *why;
        if (strlen(eps[i]) > max_endpoint) {
            error = xasprintf("other_config:tpm-controller rejected: "
                              "endpoint %"PRIuSIZE" is longer than "
                              "%"PRIuSIZE" characters", i + 1,
                              max_endpoint);
        } else if ((why = tpm_agent_parse_endpoint(eps[i], &zmq[i]))) {
            error = xasprintf("other_config:tpm-controller rejected: "
                              "endpoint \"%s\": %s", eps[i], why);
            free(why);
        } else {
            for (size_t j = 0; j < i; j++) {
                if (!strcmp(zmq[i], zmq[j])) {
                    error = xasprintf("other_config:tpm-controller "
                                      "rejected: \"%s\" and \"%s\" are "
                                      "the same endpoint", eps[j], eps[i]);
                    break;
                }
            }
        }
    }
    strv_free(zmq, n);

    /* One key for every TEM, or one each in the endpoints' order. */
    if (!error && keys && strchr(keys, ',')) {
        char *why = list_split(keys, &ks, &n_keys);
        if (why) {
            error = xasprintf("other_config:tpm-controller-key rejected: "
                              "%s", why);
            free(why);
        } else if (n_keys != n) {
            error = xasprintf("other_config:tpm-controller-key rejected: "
                              "%"PRIuSIZE" keys for %"PRIuSIZE" endpoints "
                              "(give one key for every TEM, or one per "
                              "endpoint of tpm-controller, in its order)",
                              n_keys, n);
        }
    }
    if (error) {
        strv_free(eps, n);
        strv_free(ks, n_keys);
        return error;
    }
    c->n_links = n;
    c->endpoints = eps;
    c->keys = xcalloc(n, sizeof *c->keys);
    for (size_t i = 0; i < n; i++) {
        c->keys[i] = ks ? xstrdup(ks[i]) : nullable_xstrdup(keys);
    }
    strv_free(ks, n_keys);
    return NULL;
}

/* Makes the host events hand the satisfactions of the TEMs' events to
 * the agents (tpm_ovs_init(), before any event exists). */
void
tpm_ovs_agent_init(void)
{
    tpm_ovs_event_set_tem_sink(tem_send_satisfaction, NULL);
}

/* Reads the agents' knobs.  A change of the endpoint list starts and
 * stops the links that changed; any other change restarts them all; an
 * invalid value is logged and the previous settings stay. */
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

    /* The endpoints and the CURVE keys of their TEMs (docs/operations.md,
     * "Keys"; the keys are checked by the agents). */
    const char *endpoint = smap_get(cfg, "tpm-controller");
    if (endpoint && endpoint[0]) {
        char *error = agent_parse_links(endpoint,
                                        smap_get(cfg, "tpm-controller-key"),
                                        &c);
        if (error) {
            VLOG_WARN_RL(&rl, "%s", error);
            free(error);
            ok = false;
        }
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
    bool was_running = n_links > 0;
    error = links_apply(&c, !agent_cfg_common_equal(&c, &agent_cfg),
                        parts, n);
    if (error) {
        VLOG_ERR("TEM agent for other_config:tpm-controller=\"%s\" not "
                 "started: %s; keeping the previous settings", endpoint,
                 error);
        free(error);
        agent_cfg_destroy(&c);
        if (agent_cfg.n_links) {
            VLOG_INFO("restarting the TEM agent: new settings rejected");
            error = links_apply(&agent_cfg, false, parts, n);
            if (error) {
                VLOG_ERR("TEM agent not restarted: %s", error);
                free(error);
            }
        }
    } else {
        if (was_running && !c.n_links) {
            VLOG_INFO("TEM agent stopped (other_config:tpm-controller "
                      "unset)");
        }
        agent_cfg_destroy(&agent_cfg);
        agent_cfg = c;
    }
    free(parts);
}

/* The number of TEM events link 'l' owns (all of them for NULL). */
static size_t
tem_events_count(const struct tem_link *l)
{
    size_t n = 0;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        n += he->tem && (!l || he->tem_link == l);
    }
    return n;
}

/* Appends to 's' a line on each agent for tpm/stats. */
void
tpm_ovs_agent_format_summary(struct ds *s)
{
    if (!n_links) {
        ds_put_cstr(s, "controller: none\n");
        return;
    }
    for (size_t i = 0; i < n_links; i++) {
        struct tem_link *l = links[i];
        struct tpm_agent_status st;
        tpm_agent_get_status(l->agent, &st);
        ds_put_format(s, "controller: %s, %s; messages in %"PRIu64", out "
                      "%"PRIu64", dropped in %"PRIu64", out %"PRIu64
                      "; reports acked %"PRIu64", pending %"PRIu64
                      ", dropped %"PRIu64"; TEM events %"PRIuSIZE
                      ", polls pending %"PRIuSIZE"\n",
                      st.endpoint, tpm_agent_state_name(st.state),
                      st.msgs_in, st.msgs_out, st.drops_in, st.drops_out,
                      st.acked, st.pending, st.dropped_outage,
                      tem_events_count(l), l->n_polls);
    }
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

/* Appends link 'l''s session and counters, whose agent status is 'st',
 * to 's'. */
static void
tem_link_format(struct ds *s, const struct tem_link *l,
                const struct tpm_agent_status *st, uint64_t now)
{
    const struct agent_counters *c = &l->ctr;
    char t[32];

    ds_put_format(s, "controller: %s\n", st->endpoint);
    ds_put_format(s, "state: %s\n", tpm_agent_state_name(st->state));
    ds_put_format(s, "host id: %s\n", st->host_id);
    ds_put_format(s, "tem id: %s, protocol version: %"PRIu32"\n",
                  st->tem_id[0] ? st->tem_id : "-", st->version);
    ds_put_format(s, "prefixes: %s\n",
                  agent_cfg.prefixes[0] ? agent_cfg.prefixes : "-");
    ds_put_format(s, "epoch: %s, PMD cores:",
                  tpm_time_format(agent_cfg.epoch_ns, t, sizeof t));
    for (size_t i = 0; i < l->n_pmds; i++) {
        ds_put_format(s, " %"PRIu32, l->pmd_ids[i]);
    }
    ds_put_format(s, "%s\n", l->n_pmds ? "" : " none");
    ds_put_format(s, "sessions: %"PRIu64", reconnects: %"PRIu64", agent "
                  "restarts: %"PRIu64", new Hellos for new PMD threads: "
                  "%"PRIu64" (started ", st->sessions, st->reconnects,
                  l->restarts, l->pmd_restarts);
    format_age(s, l->started_ns, now);
    ds_put_cstr(s, ")\n");
    ds_put_format(s, "frames in: %"PRIu64", out: %"PRIu64"\n",
                  st->frames_in, st->frames_out);
    ds_put_format(s, "messages in: %"PRIu64", out: %"PRIu64"\n",
                  st->msgs_in, st->msgs_out);
    ds_put_format(s, "invalid in: %"PRIu64"\n", st->invalid_in);
    ds_put_format(s, "drops in: %"PRIu64" (command queue full), out: "
                  "%"PRIu64" (acks, nacks, poll batch replies: queue full or "
                  "no session)\n",
                  st->drops_in, st->drops_out);
    ds_put_format(s, "reports (satisfactions, PollReplies): %"PRIu64
                  ": acked %"PRIu64", unconfirmed %"PRIu64", dropped "
                  "%"PRIu64" (outage buffer of %"PRIu32" full), dropped "
                  "%"PRIu64" (tenants', TEM older than version 4), pending "
                  "%"PRIu64"; sent late %"PRIu64"\n", st->reports, st->acked,
                  st->unconfirmed, st->dropped_outage,
                  agent_cfg.outage_buffer, st->dropped_tenant, st->pending,
                  st->late_sent);
    ds_put_cstr(s, "last message in: ");
    format_age(s, st->last_rx_ns, now);
    ds_put_cstr(s, "\nlast error: ");
    if (st->last_error[0]) {
        ds_put_format(s, "%s (", st->last_error);
        format_age(s, st->last_error_ns, now);
        ds_put_cstr(s, ")\n");
    } else {
        ds_put_cstr(s, "none\n");
    }
    ds_put_format(s, "commands: installs %"PRIu64", removes %"PRIu64
                  ", polls %"PRIu64", resyncs %"PRIu64", configures %"PRIu64
                  ", refused (nacks) %"PRIu64"\n", c->installs,
                  c->removes, c->polls, c->resyncs, c->configures,
                  c->nacks);
    ds_put_format(s, "sent: satisfactions %"PRIu64" (dropped %"PRIu64
                  "), replies %"PRIu64" (dropped %"PRIu64")\n",
                  c->satisfactions, c->satisfactions_dropped,
                  c->replies, c->replies_dropped);
    ds_put_format(s, "polls: pending %"PRIuSIZE", answered incomplete "
                  "%"PRIu64", not yet %"PRIu64", cancelled %"PRIu64
                  ", batches %"PRIu64"\n",
                  l->n_polls, c->polls_incomplete, c->polls_not_yet,
                  c->polls_cancelled, c->poll_batches);
    if (n_links > 1) {
        ds_put_format(s, "cluster: events owned %"PRIuSIZE", taken over "
                      "%"PRIu64", lost to another TEM %"PRIu64", removes "
                      "of another TEM's events %"PRIu64" (acked, left); "
                      "satisfactions handed over to the new owner %"PRIu64
                      " (dropped %"PRIu64"), handed in %"PRIu64"\n",
                      tem_events_count(l), c->taken_over, c->lost,
                      c->removes_not_owned, st->handed_over,
                      c->handed_dropped, c->handed_in);
    }
}

void
tpm_unixctl_controller_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
                            const char *argv[] OVS_UNUSED,
                            void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;

    if (!n_links) {
        ds_put_cstr(&s, "no controller (other_config:tpm-controller is not "
                    "set)\n");
        unixctl_command_reply(conn, ds_cstr(&s));
        ds_destroy(&s);
        return;
    }

    /* Each TEM's session; with several, their sums. */
    uint64_t now = tpm_ovs_now_ns();
    struct tpm_agent_status tot;
    struct agent_counters ctot;
    uint64_t restarts = 0;
    size_t n_connected = 0, n_polls = 0;
    memset(&tot, 0, sizeof tot);
    memset(&ctot, 0, sizeof ctot);
    for (size_t i = 0; i < n_links; i++) {
        const struct tem_link *l = links[i];
        const struct agent_counters *c = &l->ctr;
        struct tpm_agent_status st;
        tpm_agent_get_status(l->agent, &st);
        if (n_links > 1) {
            ds_put_format(&s, "%s--- TEM %"PRIuSIZE" of %"PRIuSIZE"\n",
                          i ? "\n" : "", i + 1, n_links);
        }
        tem_link_format(&s, l, &st, now);
        n_connected += st.state == TPM_AGENT_CONNECTED;
        tot.sessions += st.sessions;
        tot.reconnects += st.reconnects;
        tot.msgs_in += st.msgs_in;
        tot.msgs_out += st.msgs_out;
        tot.drops_in += st.drops_in;
        tot.drops_out += st.drops_out;
        tot.reports += st.reports;
        tot.acked += st.acked;
        tot.unconfirmed += st.unconfirmed;
        tot.dropped_outage += st.dropped_outage;
        tot.dropped_tenant += st.dropped_tenant;
        tot.pending += st.pending;
        restarts += l->restarts;
        n_polls += l->n_polls;
        ctot.installs += c->installs;
        ctot.removes += c->removes;
        ctot.polls += c->polls;
        ctot.resyncs += c->resyncs;
        ctot.configures += c->configures;
        ctot.nacks += c->nacks;
        ctot.satisfactions += c->satisfactions;
        ctot.satisfactions_dropped += c->satisfactions_dropped;
        ctot.replies += c->replies;
        ctot.replies_dropped += c->replies_dropped;
        ctot.taken_over += c->taken_over;
        ctot.removes_not_owned += c->removes_not_owned;
        ctot.handed_in += c->handed_in;
        ctot.handed_dropped += c->handed_dropped;
    }
    if (n_links > 1) {
        ds_put_format(&s, "\n--- total: %"PRIuSIZE" TEMs, %"PRIuSIZE
                      " connected\n", n_links, n_connected);
        ds_put_format(&s, "sessions: %"PRIu64", reconnects: %"PRIu64
                      ", agent restarts: %"PRIu64" (since ovs-vswitchd "
                      "started: %"PRIu64")\n", tot.sessions, tot.reconnects,
                      restarts, agent_restarts);
        ds_put_format(&s, "messages in: %"PRIu64", out: %"PRIu64"; drops "
                      "in: %"PRIu64", out: %"PRIu64"\n", tot.msgs_in,
                      tot.msgs_out, tot.drops_in, tot.drops_out);
        ds_put_format(&s, "reports: %"PRIu64": acked %"PRIu64
                      ", unconfirmed %"PRIu64", dropped %"PRIu64
                      " (outage buffers full), dropped %"PRIu64
                      " (tenants'), pending %"PRIu64"\n", tot.reports,
                      tot.acked, tot.unconfirmed, tot.dropped_outage,
                      tot.dropped_tenant, tot.pending);
        ds_put_format(&s, "commands: installs %"PRIu64", removes %"PRIu64
                      ", polls %"PRIu64", resyncs %"PRIu64", configures "
                      "%"PRIu64", refused (nacks) %"PRIu64"\n",
                      ctot.installs, ctot.removes, ctot.polls, ctot.resyncs,
                      ctot.configures, ctot.nacks);
        ds_put_format(&s, "sent: satisfactions %"PRIu64" (dropped %"PRIu64
                      "), replies %"PRIu64" (dropped %"PRIu64")\n",
                      ctot.satisfactions, ctot.satisfactions_dropped,
                      ctot.replies, ctot.replies_dropped);
        ds_put_format(&s, "cluster: taken over %"PRIu64", removes of "
                      "another TEM's events %"PRIu64" (acked, left), polls "
                      "pending %"PRIuSIZE"; satisfactions handed over to "
                      "a new owner %"PRIu64" (dropped %"PRIu64")\n",
                      ctot.taken_over, ctot.removes_not_owned, n_polls,
                      ctot.handed_in, ctot.handed_dropped);
        ds_put_cstr(&s, "\n");
    }

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
                      " (dropped %"PRIu64")", he->n_reports, he->n_sent,
                      he->n_send_dropped);
        if (n_links > 1) {
            ds_put_format(&ev, ", owner %s",
                          he->tem_link ? he->tem_link->endpoint : "-");
        }
        ds_put_cstr(&ev, "\n");
    }
    free(parts);
    ds_put_format(&s, "TEM events: %"PRIuSIZE"\n%s", n_tem, ds_cstr(&ev));
    ds_destroy(&ev);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}


/* The main loop's wakeups for the agents: a command queued, or PMDs that
 * came or went (the agents say Hello again). */
void
tpm_ovs_agent_wait(void)
{
    if (!n_links) {
        return;
    }
    for (size_t i = 0; i < n_links; i++) {
        struct tem_link *l = links[i];
        if (l->backlog) {
            poll_immediate_wake();
        } else if (l->n_polls < agent_cfg.queue_size) {
            if (!ovs_list_is_empty(&l->batches)) {
                poll_immediate_wake();
            }
            /* A command from the TEM wakes us at once. */
            poll_fd_wait(tpm_agent_fd(l->agent), POLLIN);
        }
    }
    if (tpm_ovs_pmds_gen() != agent_pmds_gen) {
        poll_immediate_wake();
    }
}

/* Gives the agents the 'n' PMDs' counters 'stats', summed, for their
 * heartbeats (the TEMs' metrics).  About once a second. */
void
tpm_ovs_agent_counters(const struct tpm_stats *stats, size_t n)
{
    struct tproto_host_counters c;

    if (!n_links) {
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
    for (size_t i = 0; i < n_links; i++) {
        tpm_agent_set_counters(links[i]->agent, &c);
    }
}
