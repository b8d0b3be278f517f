/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TEM as a member of a cluster of TEMs on etcd (docs/tem.md, "Past one
 * TEM"): trumpet-tem --etcd=URL[,URL...].  Events are partitioned over
 * the members, every host connects to every member, and a member that
 * dies loses its events to the others within the lease's TTL.
 *
 * What a member does, through the etcd client (tem-etcd.h, its own
 * thread; every call here returns at once):
 *
 *   - Membership: a lease (--etcd-ttl) and /trumpet/members/ID on it,
 *     whose value is the member's host-facing endpoint, alerts endpoint,
 *     public key and standby flag (JSON); put again on every new lease.
 *
 *   - Views: it reads /trumpet/members/, /trumpet/events/,
 *     /trumpet/assign/, /trumpet/leader and /trumpet/hosts/, then
 *     watches each from the revision after its read.  A view whose read
 *     fails is read again after a backoff; a watch that etcd compacted
 *     away is read and watched again (a resync); a watch down resumes by
 *     itself.  Until a view is read the member acts on nothing it would
 *     need from it.
 *
 *   - Member keys: a member takes part (is assigned events, and its
 *     assignments followed when it leads) only once its advertised public
 *     key is one of --cluster-keys and a probe (tem-probe.h) over CURVE
 *     to its advertised endpoint proved that it holds that key under its
 *     id; a failed probe is retried every 2 s.  Refused members are
 *     counted and logged rate-limited.  Without a key pair
 *     (--insecure-plaintext) every member takes part.
 *
 *   - Hosts' keys: /trumpet/hosts/HOST-ID holds a host's public keys; the
 *     daemon merges them into its allow-list (tem_cluster_hosts(), called
 *     back through 'hosts_changed'), so every member accepts the same
 *     hosts.  A value that is not keys is ignored and counted.
 *
 *   - Leadership: it campaigns for /trumpet/leader (created only if
 *     absent, on its lease) once its member key is put, and again when
 *     the key is deleted (the leader's lease expired or was revoked).
 *     The leader assigns every event to a live member by rendezvous
 *     hashing (the highest hash of the event id and the member id wins)
 *     and writes /trumpet/assign/EVENT-ID = MEMBER-ID where it differs,
 *     and deletes the assignments of events deleted.  A member started
 *     with --standby is not hashed to as itself while a member without
 *     it lives; it stands in for a lost member instead (its id hashed as
 *     before, its events assigned "STANDBY LOST"; tem-cluster.c,
 *     struct tem_cluster_plan).  A
 *     member joining or leaving moves only the events that hash to it.
 *
 *   - Its own events: the events assigned to it are defined in its core
 *     (tem_core_event_add() with the cluster's id), which installs them on
 *     its hosts; those no longer assigned to it, or deleted, are removed.
 *     Nothing else defines events in its core: the state file's events
 *     are not used with --etcd.
 *
 *   - Control: tem-ctl event-add and event-del reach any member; it
 *     checks the definition, allocates the id from /trumpet/next-id and
 *     puts /trumpet/events/ID (or deletes it), and answers when etcd has
 *     answered: every member applies the change from its watch.  One
 *     request is under way at a time (the control socket is a REP), with
 *     a deadline below tem-ctl's default timeout.
 *
 * When etcd is unreachable or answers garbage nothing here waits: the
 * member keeps deciding the events it holds with what it knows, counts
 * the failures, and resyncs when etcd answers again.  When its lease is
 * lost it stops acting as leader, keeps its events until a leader's
 * assignment moves them, and registers again on the next lease.
 *
 * Thread-safety: a cluster member is used by the daemon's one thread.
 */
#ifndef TEM_CLUSTER_H
#define TEM_CLUSTER_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct tem_allow;
struct tem_core;
struct tem_metrics;

/* The command line's cluster options (tem-options.h). */
struct tem_cluster_options {
    const char *etcd;           /* --etcd: endpoints, NULL: no cluster. */
    uint32_t ttl_s;             /* --etcd-ttl: the lease's TTL (3 s). */
    bool standby;               /* --standby. */
    const char *keys_file;      /* --cluster-keys, NULL: this TEM's key. */
    bool tem_id_given;          /* --tem-id was given (else: host name). */
};

struct tem_cluster_config {
    const struct tem_cluster_options *opt;
    const char *member_id;      /* The TEM's id (--tem-id, or host name). */
    const char *listen;         /* Endpoints the hosts and subscribers */
    const char *pub;            /* reach, and the TEM's key pair (NULL */
    const char *public_key;     /* with --insecure-plaintext: members */
    const char *secret_key;     /* are then not checked). */
    void *zctx;                 /* The probes' ZeroMQ context. */
    const struct tem_allow *member_keys;    /* --cluster-keys: must live
                                             * until replaced. */
    /* Called from tem_cluster_run() when /trumpet/hosts/ changed
     * (tem_cluster_hosts()). */
    void (*hosts_changed)(void *aux);
    void *aux;
};

/* Creates the member and starts its etcd client (lease, reads, watches).
 * Returns NULL and an error (caller frees) in '*errp' if the client cannot
 * start (a bad endpoint list). */
struct tem_cluster *tem_cluster_create(const struct tem_cluster_config *,
                                       struct tem_core *, char **errp);

/* Gives the lease back (so that the other members take over at once,
 * waiting at most 'wait_ms' for etcd's answer) and frees 'cl'. */
void tem_cluster_destroy(struct tem_cluster *cl, uint32_t wait_ms);

/* Readable while etcd's results wait (zmq_poll()). */
int tem_cluster_fd(const struct tem_cluster *);

/* Takes at most 'max' results of the etcd client (input: the loop's first
 * step). */
void tem_cluster_input(struct tem_cluster *, uint32_t max);

/* Acts on what changed: the core's events reconciled with the
 * assignments, the leader's assignments written, reads retried, the
 * control request's deadline.  Returns when (monotonic ns) it must run
 * again, at the latest. */
uint64_t tem_cluster_run(struct tem_cluster *);

/* The control commands event-add and event-del of request 'req'.  Returns
 * the reply, or NULL if it will come later through 'reply' (exactly once,
 * from tem_cluster_input() or tem_cluster_run(); no other request may
 * be given meanwhile). */
typedef void tem_cluster_reply_cb(void *aux, struct json_object *reply);
struct json_object *tem_cluster_ctl(struct tem_cluster *, const char *cmd,
                                    struct json_object *req,
                                    tem_cluster_reply_cb *reply, void *aux);

/* True while a control request waits for etcd. */
bool tem_cluster_ctl_pending(const struct tem_cluster *);

/* "cluster" of tem-ctl status (docs/tem.md). */
struct json_object *tem_cluster_status_json(const struct tem_cluster *);

/* The trumpet_tem_cluster_* metrics. */
void tem_cluster_metrics(const struct tem_cluster *, struct tem_metrics *);

/* Replaces the keys of the members allowed to take part ('keys' must
 * live until replaced again or 'cl' is destroyed): every member is
 * checked again. */
void tem_cluster_set_member_keys(struct tem_cluster *cl,
                                 const struct tem_allow *keys);

/* The hosts' keys of /trumpet/hosts/ as an allow-list (TEM_ALLOW_HOST
 * entries), or NULL until read.  Valid until the next tem_cluster_run(). */
const struct tem_allow *tem_cluster_hosts(const struct tem_cluster *);

/* The answer to frame 'body' of 'len' bytes received on the hosts' socket
 * from a member's key (TEM_ALLOW_MEMBER): the probe's reply (caller
 * frees), or NULL if it is not a probe. */
char *tem_cluster_probe_answer(const struct tem_cluster *, const void *body,
                               size_t len);

/* The rendezvous hash of event 'event_id' on member 'member_id' (the
 * highest wins the event). */
uint64_t tem_cluster_hash(uint32_t event_id, const char *member_id);

#endif /* tem-cluster.h */
