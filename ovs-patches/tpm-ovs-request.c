/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests to the PMDs and the operations made of them: see
 * tpm-ovs-private.h, "Requests to the PMDs".
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "openvswitch/poll-loop.h"
#include "seq.h"
#include "unixctl.h"

/* Changed by a PMD that executed commands: their replies wait in its
 * report ring. */
struct seq *tpm_ovs_reply_seq;

static uint64_t next_cookie = 1;
static struct ovs_list ops = OVS_LIST_INITIALIZER(&ops);
static size_t ops_n;
static struct hmap reqs = HMAP_INITIALIZER(&reqs);
static uint64_t reply_seq_seen; /* Read before the latest drain. */
static bool ops_blocked;        /* A command ring was full last time. */

/* Initialises 'op' with 'n_reqs' requests (set them with tpm_ovs_op_req()) and
 * a deadline 'timeout_ns' from now. */
void
tpm_ovs_op_init(struct op *op, void (*finish)(struct op *, struct tpm_pmd **,
                                              size_t),
        const struct op_client *client, size_t n_reqs, uint64_t timeout_ns)
{
    op->finish = finish;
    op->client = client ? *client : (struct op_client) { .conn = NULL };
    op->deadline_ns = tpm_ovs_now_ns() + timeout_ns;
    op->repoll = false;
    op->n_reqs = n_reqs;
    op->reqs = xcalloc(MAX(n_reqs, 1), sizeof *op->reqs);
}

/* Sets request 'i' of 'op': a command to PMD 'p' whose reply is of
 * 'type', for event 'event_id'. */
struct pmd_req *
tpm_ovs_op_req(struct op *op, size_t i, const struct tpm_pmd *p,
               enum tpm_report_type type, uint32_t event_id)
{
    struct pmd_req *rq = &op->reqs[i];
    rq->op = op;
    rq->pmd_serial = p->serial;
    rq->core_id = p->core_id;
    rq->state = REQ_SUBMIT;
    rq->type = type;
    rq->event_id = event_id;
    return rq;
}

/* Queues 'op' after every other; tpm_ovs_run() takes it from there. */
void
tpm_ovs_op_start(struct op *op)
{
    ovs_list_push_back(&ops, &op->node);
    ops_n++;
    poll_immediate_wake();
}

/* Frees what 'op' holds (not 'op' itself, which its finish function
 * embeds). */
void
tpm_ovs_op_destroy(struct op *op)
{
    for (size_t i = 0; i < op->n_reqs; i++) {
        struct pmd_req *rq = &op->reqs[i];
        if (rq->state == REQ_WAITING) {
            hmap_remove(&reqs, &rq->node);
        } else if (rq->state == REQ_DONE) {
            free(rq->r.error);
        }
        tpm_event_destroy(rq->event);
    }
    ovs_list_remove(&op->node);
    ops_n--;
    free(op->reqs);
}

/* Queues 'rq' in monitor 'tpm''s command ring.  Returns false if the ring
 * is full. */
static bool
req_submit(struct pmd_req *rq, struct tpm *tpm)
{
    uint64_t cookie = next_cookie;
    bool ok;

    switch (rq->type) {
    case TPM_REPORT_ADD_DONE:
        ok = tpm_submit_add(tpm, rq->event, rq->event_id, cookie);
        if (ok) {
            rq->event = NULL;   /* The PMD's now. */
        }
        break;
    case TPM_REPORT_DEL_DONE:
        ok = tpm_submit_del(tpm, rq->event_id, cookie);
        break;
    case TPM_REPORT_POLL_REPLY:
        ok = tpm_submit_poll(tpm, rq->event_id, &rq->group,
                             tpm_ovs_group_vni(&rq->group), rq->port,
                             rq->epoch, cookie);
        break;
    case TPM_REPORT_INFO_REPLY:
        ok = tpm_submit_info(tpm, rq->event_id, cookie);
        break;
    case TPM_REPORT_SATISFIED:
    default:
        OVS_NOT_REACHED();
    }
    if (ok) {
        next_cookie++;
        rq->cookie = cookie;
        rq->state = REQ_WAITING;
        hmap_insert(&reqs, &rq->node, hash_uint64(cookie));
    }
    return ok;
}

/* Its PMD left (or, with 'parked', is parked): 'rq' is not waited for. */
static void
req_gone(struct pmd_req *rq, bool parked)
{
    if (rq->state == REQ_WAITING) {
        hmap_remove(&reqs, &rq->node);
    }
    rq->state = REQ_GONE;
    rq->parked = parked;
}

/* If 'r' answers a request, records it and returns true.  A poll that
 * may ask again and was answered "not swept yet" is queued again. */
bool
tpm_ovs_req_reply(const struct tpm_report *r)
{
    struct pmd_req *rq;
    HMAP_FOR_EACH_WITH_HASH (rq, node, hash_uint64(r->cookie), &reqs) {
        if (rq->cookie == r->cookie) {
            hmap_remove(&reqs, &rq->node);
            if (rq->op->repoll && r->type == TPM_REPORT_POLL_REPLY
                && r->status == TPM_POLL_NOT_YET) {
                rq->state = REQ_SUBMIT;
                rq->not_yet = true;
                free(r->error);
            } else {
                rq->state = REQ_DONE;
                rq->r = *r;
            }
            return true;
        }
    }
    return false;
}

static struct tpm_pmd *
pmd_by_serial(struct tpm_pmd **parts, size_t n, uint64_t serial,
              size_t *idx)
{
    for (size_t i = 0; i < n; i++) {
        if (parts[i]->serial == serial) {
            *idx = i;
            return parts[i];
        }
    }
    return NULL;
}

/* Queues the requests that are due, oldest operation first, and finishes
 * the operations that are complete or past their deadline. */
void
tpm_ovs_ops_run(struct tpm_pmd **parts, size_t n)
{
    ops_blocked = false;
    if (ovs_list_is_empty(&ops)) {
        return;                 /* Every main-loop turn, mostly this. */
    }

    uint64_t now = tpm_ovs_now_ns();
    bool *full = xcalloc(MAX(n, 1), sizeof *full);
    struct op *op;

    LIST_FOR_EACH_SAFE (op, node, &ops) {
        bool complete = true;
        for (size_t i = 0; i < op->n_reqs; i++) {
            struct pmd_req *rq = &op->reqs[i];
            size_t k;
            if (rq->state == REQ_DONE || rq->state == REQ_GONE) {
                continue;
            }
            struct tpm_pmd *p = pmd_by_serial(parts, n, rq->pmd_serial, &k);
            if (!p) {
                req_gone(rq, false);
                continue;
            }
            if (rq->state == REQ_SUBMIT
                && (full[k] || !req_submit(rq, p->tpm))) {
                full[k] = ops_blocked = true;
            } else if (rq->state == REQ_WAITING && tpm_ovs_pmd_parked(p,
                                                                      now)) {
                req_gone(rq, true);
                continue;
            }
            complete = false;
        }
        if (complete || now >= op->deadline_ns) {
            op->finish(op, parts, n);
        }
    }
    free(full);
}

/* Wakes the main thread when a PMD ran commands, a deadline passes, a PMD
 * may have parked, or a full command ring may have room. */
void
tpm_ovs_ops_wait(void)
{
    if (ovs_list_is_empty(&ops)) {
        return;
    }
    seq_wait(tpm_ovs_reply_seq, reply_seq_seen);
    if (ops_blocked) {
        poll_timer_wait(1);
        return;
    }
    uint64_t now = tpm_ovs_now_ns();
    uint64_t wait_ns = TPM_PMD_PARKED_NS / 2;
    const struct op *op;
    LIST_FOR_EACH (op, node, &ops) {
        wait_ns = MIN(wait_ns, op->deadline_ns > now
                               ? op->deadline_ns - now : 0);
    }
    poll_timer_wait(DIV_ROUND_UP(wait_ns, 1000 * 1000));
}


/* Answers 'c': 'error', or success with 'text' (NULL: none).  The TEM
 * gets an ack or a nack through the client's 'reply' callback. */
void
tpm_ovs_op_answer(const struct op_client *c, const char *error,
                  const char *text)
{
    if (c->conn) {
        if (error) {
            unixctl_command_reply_error(c->conn, error);
        } else {
            unixctl_command_reply(c->conn, text);
        }
    }
    if (c->reply) {
        c->reply(c, error);
    }
}


/* A cookie no request used before. */
uint64_t
tpm_ovs_cookie(void)
{
    return next_cookie++;
}

/* Called before the main thread drains the PMDs' reports: a PMD that
 * executes commands from now on wakes the next poll. */
void
tpm_ovs_ops_begin(void)
{
    reply_seq_seen = seq_read(tpm_ovs_reply_seq);
}

/* The operations pending and the requests queued in the PMDs' rings. */
void
tpm_ovs_ops_count(size_t *n_ops, size_t *n_reqs)
{
    *n_ops = ops_n;
    *n_reqs = hmap_count(&reqs);
}

/* The session of the TEM of agent 'link' is over: nobody waits for the
 * operations it asked for any more (they still complete).  The other
 * TEMs' operations are left alone. */
void
tpm_ovs_ops_forget_tem(const struct tem_link *link)
{
    struct op *op;
    LIST_FOR_EACH (op, node, &ops) {
        if (op->client.tem_link == link) {
            op->client.reply = NULL;
        }
    }
}
