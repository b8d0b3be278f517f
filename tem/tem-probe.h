/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A check that a member of a cluster of TEMs holds the key it advertises
 * (docs/tem.md, "Past one TEM": member keys).
 *
 * A member's /trumpet/members/ID in etcd says where its hosts' socket is
 * and which public key it has; anyone who can write to etcd can write
 * such a key.  Before the leader assigns it an event, and before any
 * member counts it as one, a member checks the claim: it connects a
 * DEALER socket to the advertised endpoint as a CURVE client whose
 * server key is the advertised public key, with its own key pair, and
 * sends one frame, TEM_PROBE_REQUEST.  CURVE's handshake completes only
 * if the server can open the client's Hello, which needs the secret key
 * of that public key, and the member's ZAP handler lets the connection
 * in only if the checker's own key is one of its --cluster-keys
 * (TEM_ALLOW_MEMBER, tem-auth.h).  The member answers, over that
 * encrypted connection, "TEM_PROBE_REPLY ID" with its member id
 * (tem_probe_answer()), which binds the key to the id as well: a member
 * key copying a live member's endpoint and key under another id is
 * answered with the other id.  No answer by the deadline (the peer does
 * not hold the key, is not there, or refused the checker's key) is a
 * failure.
 *
 * The probe never blocks: tem_probe_poll() reads the answer if it is
 * there, the caller polls it again later (the cluster member does so
 * every TEM_PROBE_POLL_NS while a probe is under way).
 *
 * Thread-safety: a probe is used by one thread (its socket's).
 */
#ifndef TEM_PROBE_H
#define TEM_PROBE_H 1

#include <stddef.h>
#include <stdint.h>

#include "curve.h"

#define TEM_PROBE_REQUEST "trumpet-member?"
#define TEM_PROBE_REPLY "trumpet-member"

/* How often a probe under way is polled, and its default deadline. */
#define TEM_PROBE_POLL_NS (20 * 1000000ULL)
#define TEM_PROBE_DEADLINE_NS (2000 * 1000000ULL)

enum tem_probe_state {
    TEM_PROBE_PENDING,          /* No answer yet. */
    TEM_PROBE_ANSWERED,         /* The peer holds the key: its id given. */
    TEM_PROBE_FAILED,           /* Deadline passed, or a bad answer. */
};

struct tem_probe;

/* Starts checking that the TEM at 'endpoint' holds the secret key of
 * 'server_key' (Z85), as the client of key pair 'pub'/'sec' in ZeroMQ
 * context 'zctx', until monotonic time 'deadline_ns'.  Returns NULL and
 * an error (caller frees) in '*errp' if the socket cannot be made. */
struct tem_probe *tem_probe_start(void *zctx, const char *endpoint,
                                  const char *server_key, const char *pub,
                                  const char *sec, uint64_t deadline_ns,
                                  char **errp);

/* Where 'probe' stands at monotonic time 'now_ns'.  When answered, the
 * member id the peer gave is in '*idp' (owned by 'probe'). */
enum tem_probe_state tem_probe_poll(struct tem_probe *probe, uint64_t now_ns,
                                    const char **idp);

void tem_probe_destroy(struct tem_probe *);

/* The answer of member 'member_id' to frame 'body' ('len' bytes) received
 * from a TEM_ALLOW_MEMBER key: NULL if it is not TEM_PROBE_REQUEST, else
 * the reply (caller frees). */
char *tem_probe_answer(const void *body, size_t len, const char *member_id);

#endif /* tem-probe.h */
