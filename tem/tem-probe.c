/* SPDX-License-Identifier: Apache-2.0 */
/* A check that a cluster member holds its advertised key: see
 * tem-probe.h. */
#include "tem-probe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "tproto.h"
#include "util.h"

struct tem_probe {
    void *sock;
    uint64_t deadline_ns;
    enum tem_probe_state state;
    char id[TPROTO_MAX_ID + 1];
};

struct tem_probe *
tem_probe_start(void *zctx, const char *endpoint, const char *server_key,
                const char *pub, const char *sec, uint64_t deadline_ns,
                char **errp)
{
    void *sock = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    int hwm = 4;

    *errp = NULL;
    if (!sock) {
        *errp = xasprintf("socket: %s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    *errp = tpm_curve_setup(sock, server_key, pub, sec, NULL);
    /* Room for the handshake's commands (ZMQ_MAXMSGSIZE counts them). */
    if (!*errp && tpm_zmq_max_msg(sock, 4096)) {
        *errp = xasprintf("ZMQ_MAXMSGSIZE: %s", zmq_strerror(zmq_errno()));
    }
    if (!*errp && zmq_connect(sock, endpoint)) {
        *errp = xasprintf("connect to %s: %s", endpoint,
                          zmq_strerror(zmq_errno()));
    }
    /* Queued until the handshake completes. */
    if (!*errp && zmq_send(sock, TEM_PROBE_REQUEST,
                           strlen(TEM_PROBE_REQUEST), ZMQ_DONTWAIT) < 0) {
        *errp = xasprintf("send: %s", zmq_strerror(zmq_errno()));
    }
    if (*errp) {
        zmq_close(sock);
        return NULL;
    }

    struct tem_probe *probe = xzalloc(sizeof *probe);
    probe->sock = sock;
    probe->deadline_ns = deadline_ns;
    probe->state = TEM_PROBE_PENDING;
    return probe;
}

enum tem_probe_state
tem_probe_poll(struct tem_probe *probe, uint64_t now_ns, const char **idp)
{
    char buf[64 + TPROTO_MAX_ID];
    size_t n = strlen(TEM_PROBE_REPLY);

    *idp = NULL;
    if (probe->state == TEM_PROBE_PENDING) {
        int len = zmq_recv(probe->sock, buf, sizeof buf - 1, ZMQ_DONTWAIT);
        if (len >= 0) {
            len = MIN(len, (int) sizeof buf - 1);
            buf[len] = '\0';
            if ((size_t) len > n + 1 && !memcmp(buf, TEM_PROBE_REPLY, n)
                && buf[n] == ' ' && strlen(buf) == (size_t) len
                && tproto_id_valid(buf + n + 1)) {
                memcpy(probe->id, buf + n + 1, len - n);
                probe->state = TEM_PROBE_ANSWERED;
            } else {
                probe->state = TEM_PROBE_FAILED;
            }
        } else if (now_ns >= probe->deadline_ns) {
            probe->state = TEM_PROBE_FAILED;
        }
    }
    if (probe->state == TEM_PROBE_ANSWERED) {
        *idp = probe->id;
    }
    return probe->state;
}

void
tem_probe_destroy(struct tem_probe *probe)
{
    if (probe) {
        zmq_close(probe->sock);
        free(probe);
    }
}

char *
tem_probe_answer(const void *body, size_t len, const char *member_id)
{
    if (len != strlen(TEM_PROBE_REQUEST)
        || memcmp(body, TEM_PROBE_REQUEST, len)) {
        return NULL;
    }
    return xasprintf("%s %s", TEM_PROBE_REPLY, member_id);
}
