/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's allow-list of CURVE public keys (docs/operations.md, "Keys"),
 * and the decision its ZAP handler takes for each connection.
 *
 * Every connection to the TEM over CURVE is authenticated by ZeroMQ's
 * ZAP protocol: the TEM answers each handshake with the client's public
 * key in hand.  The allow-list binds each key to one name:
 *
 *     # host-id  public-key (Z85, 40 characters)
 *     h1  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7
 *     h2  E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6JTKVSB%%)wK0
 *     # control clients (tem-ctl over TCP): "client" NAME KEY
 *     client alice  Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID
 *     # alert subscribers (alerts over TCP only): "subscriber" NAME KEY
 *     subscriber siem  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf8
 *
 * A '#' starts a comment at the start of a line or as a word after the
 * fields ('#' is a Z85 character: it never starts a comment inside
 * them).  A host key opens the hosts' socket only, and only for the host id it
 * is bound to (the TEM refuses a Hello for another id); a client key
 * (an administrator's) opens the control socket and the alerts socket; a
 * subscriber key the alerts socket only, so that a key handed to an
 * alert consumer cannot change the TEM.  A key appears once; a
 * host may have several keys (to rotate: add the new one, reload, move
 * the host to it, remove the old one, reload).  An unknown key is refused
 * during the handshake: it gets no session and holds no host slot.
 *
 * A TEM of a cluster of TEMs (--etcd, tem-cluster.h) also lists the
 * public keys of the cluster's members (--cluster-keys, one key per line,
 * tem_allow_load_members()): such a key completes a handshake on the
 * hosts' socket, which is how one member checks that another holds the
 * secret key it advertises (tem-probe.h), and is never a host: its
 * frames other than that check are dropped.  The hosts' keys kept in
 * etcd (/trumpet/hosts/) are merged into the list in force
 * (tem_allow_merge()), the file's entries first.
 *
 * The ZAP handler gives the connection the key itself as its User-Id
 * (40 characters), and the TEM looks the key up again in the current
 * allow-list for every frame: a key removed by a reload stops working on
 * connections already open too.
 *
 * Thread-safety: none needed (no global state).
 */
#ifndef TEM_AUTH_H
#define TEM_AUTH_H 1

#include <stdbool.h>
#include <stddef.h>

#include "curve.h"

/* Largest allow-list file (bytes). */
#define TEM_ALLOW_MAX_FILE (16 * 1024 * 1024)

enum tem_allow_kind {
    TEM_ALLOW_HOST,             /* Opens the hosts' socket as 'name'. */
    TEM_ALLOW_CLIENT,           /* Opens the control and alerts sockets. */
    TEM_ALLOW_SUBSCRIBER,       /* Opens the alerts socket. */
    TEM_ALLOW_MEMBER,           /* A TEM of the cluster: completes a
                                 * handshake on the hosts' socket. */
};

struct tem_allow_entry {
    char key[TPM_CURVE_KEY_LEN + 1];
    enum tem_allow_kind kind;
    char *name;                 /* Host id or client name. */
};

struct tem_allow {
    struct tem_allow_entry *entries;    /* Sorted by key. */
    size_t n;
    size_t n_hosts, n_clients, n_subscribers, n_members;
};

/* Parses allow-list text 'text' (read from 'origin', for errors).
 * Returns NULL and a new list in '*allowp', or an error naming the line
 * (caller frees) and '*allowp' NULL. */
char *tem_allow_parse(const char *text, size_t len, const char *origin,
                      struct tem_allow **allowp)
    __attribute__((warn_unused_result));

/* Reads and parses file 'path'.  As tem_allow_parse(). */
char *tem_allow_load(const char *path, struct tem_allow **allowp)
    __attribute__((warn_unused_result));

/* Reads file 'path' of the cluster's member keys: one Z85 public key per
 * line, '#' comments as above.  Returns NULL and in '*allowp' a list of
 * TEM_ALLOW_MEMBER entries named "member", or an error (caller frees). */
char *tem_allow_load_members(const char *path, struct tem_allow **allowp)
    __attribute__((warn_unused_result));

/* A new list of the entries of 'base' (may be NULL) and those of 'extra'
 * (may be NULL) whose key 'base' does not hold.  A key listed in both
 * keeps the entry of 'base'; a key listed twice in 'extra' is bound to
 * no one and left out.  The entries of 'extra' left out are counted in
 * '*n_dupp'. */
struct tem_allow *tem_allow_merge(const struct tem_allow *base,
                                  const struct tem_allow *extra,
                                  size_t *n_dupp);

/* Adds host 'name' with key 'z85' (checked by the caller) to 'allow',
 * unsorted: call tem_allow_sort() once every entry is added. */
void tem_allow_add(struct tem_allow *, enum tem_allow_kind,
                   const char *name, const char *z85);
void tem_allow_sort(struct tem_allow *);

void tem_allow_free(struct tem_allow *);

/* The entry of key 'z85' (40 characters, not necessarily terminated), or
 * NULL. */
const struct tem_allow_entry *tem_allow_find(const struct tem_allow *,
                                             const char *z85);

/* The ZAP domains of the TEM's sockets. */
#define TEM_ZAP_HOSTS "trumpet-hosts"
#define TEM_ZAP_CLIENTS "trumpet-clients"          /* Control socket. */
#define TEM_ZAP_SUBSCRIBERS "trumpet-subscribers"  /* Alerts socket. */

/* Answers one ZAP request: 'domain' and 'mechanism' as received, 'key'
 * the client's 32-byte public key ('key_len' bytes as received).  Returns
 * the ZAP status code (200 allowed, 400 refused), and in 'user_id' (41
 * bytes) the User-Id to give the connection ("" if refused) and in
 * '*whyp' a static explanation.  'allow' NULL refuses everything. */
int tem_zap_decide(const struct tem_allow *, const char *domain,
                   const char *mechanism, const void *key, size_t key_len,
                   char user_id[TPM_CURVE_KEY_LEN + 1], const char **whyp);

#endif /* tem-auth.h */
