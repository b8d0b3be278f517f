/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's descriptor budget (tem-fd.h): the soft limit raised at start,
 * and accept4()/accept(), which every listener of the process calls,
 * keeping a reserve of descriptors and never letting a listener see
 * EMFILE.
 */
/* For accept4()'s declaration. */
#define _GNU_SOURCE 1
#include "tem-fd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tem-warn.h"
#include "tpm-log.h"
#include "util.h"

/* glibc declares accept()'s address as a transparent union with
 * _GNU_SOURCE, as a plain pointer without it. */
#ifdef __USE_GNU
#define TEM_FD_SOCKADDR(ARG) ((ARG).__sockaddr__)
#else
#define TEM_FD_SOCKADDR(ARG) (ARG)
#endif

/* A TCP connection whose descriptor is at least this is shed (INT_MAX
 * until tem_fd_init()). */
static atomic_int tem_fd_threshold = INT_MAX;
static atomic_int tem_fd_spare = -1;
static atomic_uint_fast64_t tem_fd_n_shed, tem_fd_n_no_fd;

static uint64_t tem_fd_soft, tem_fd_hard, tem_fd_soft0;
static uint32_t tem_fd_reserve;
static uint64_t tem_fd_warned;          /* shed + no_fd when last warned. */
static struct tem_warn tem_fd_warn_rl = TEM_WARN_INITIALIZER;

static int
tem_fd_open_spare__(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

char *
tem_fd_init(uint32_t reserve)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl)) {
        return xasprintf("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    }
    tem_fd_soft0 = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = { rl.rlim_max, rl.rlim_max };
        if (setrlimit(RLIMIT_NOFILE, &raised)) {
            tpm_log(TPM_LOG_WARN, "cannot raise the descriptor limit from "
                    "%"PRIu64" to %"PRIu64": %s", (uint64_t) rl.rlim_cur,
                    (uint64_t) rl.rlim_max, strerror(errno));
        } else {
            rl.rlim_cur = rl.rlim_max;
        }
    }
    /* Descriptors are ints. */
    tem_fd_soft = MIN(rl.rlim_cur, (rlim_t) INT_MAX);
    tem_fd_hard = rl.rlim_max;
    tem_fd_reserve = reserve;
    if (tem_fd_soft < (uint64_t) reserve + TEM_FD_MIN_FREE) {
        return xasprintf("the descriptor limit (%"PRIu64", hard limit "
                         "%"PRIu64") leaves fewer than %d descriptors "
                         "beside the %"PRIu32" of --fd-reserve: raise "
                         "LimitNOFILE (ulimit -Hn) or lower --fd-reserve",
                         tem_fd_soft, tem_fd_hard, TEM_FD_MIN_FREE, reserve);
    }
    atomic_store(&tem_fd_spare, tem_fd_open_spare__());
    atomic_store(&tem_fd_threshold, (int) (tem_fd_soft - reserve));
    if (tem_fd_soft0 != tem_fd_soft) {
        tpm_log(TPM_LOG_INFO, "descriptors: soft limit raised from %"PRIu64
                " to %"PRIu64" (the hard limit); the last %"PRIu32" kept "
                "for the control socket and files (--fd-reserve)",
                tem_fd_soft0, tem_fd_soft, reserve);
    } else {
        tpm_log(TPM_LOG_INFO, "descriptors: limit %"PRIu64"; the last "
                "%"PRIu32" kept for the control socket and files "
                "(--fd-reserve)", tem_fd_soft, reserve);
    }
    return NULL;
}

void
tem_fd_get_stats(struct tem_fd_stats *s)
{
    s->soft = tem_fd_soft;
    s->hard = tem_fd_hard;
    s->soft_at_start = tem_fd_soft0;
    s->reserve = tem_fd_reserve;
    s->shed = atomic_load(&tem_fd_n_shed);
    s->no_fd = atomic_load(&tem_fd_n_no_fd);
}

void
tem_fd_warn(void)
{
    uint64_t shed = atomic_load_explicit(&tem_fd_n_shed,
                                         memory_order_relaxed);
    uint64_t no_fd = atomic_load_explicit(&tem_fd_n_no_fd,
                                          memory_order_relaxed);
    if (shed + no_fd != tem_fd_warned) {
        tem_fd_warned = shed + no_fd;
        tem_warn(&tem_fd_warn_rl, "descriptors: connections refused at "
                 "accept: %"PRIu64" TCP past descriptor %"PRIu64" (limit "
                 "%"PRIu64" less --fd-reserve %"PRIu32"), %"PRIu64" with "
                 "no descriptor left, since start", shed,
                 tem_fd_soft - tem_fd_reserve, tem_fd_soft, tem_fd_reserve,
                 no_fd);
    }
}

/* Returns true if listening socket 'fd' is TCP (IPv4 or IPv6). */
static bool
tem_fd_is_inet__(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    return (!getsockname(fd, (struct sockaddr *) &ss, &len)
            && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6));
}

/* accept4() of listening socket 'fd' with the budget of tem-fd.h. */
static int
tem_fd_accept__(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int s = syscall(SYS_accept4, fd, addr, len, flags);

    if (s >= 0) {
        if (s >= atomic_load_explicit(&tem_fd_threshold,
                                      memory_order_relaxed)
            && tem_fd_is_inet__(fd)) {
            close(s);
            atomic_fetch_add(&tem_fd_n_shed, 1);
            errno = EAGAIN;
            return -1;
        }
        return s;
    }
    if (errno != EMFILE) {
        return -1;
    }
    /* No descriptor at all: free the spare one, take the connection with
     * it and close it, so that the listener does not find it waiting
     * again (and libzmq's ipc listener does not abort on EMFILE). */
    int spare = atomic_exchange(&tem_fd_spare, -1);
    if (spare >= 0) {
        close(spare);
        s = syscall(SYS_accept4, fd, NULL, NULL, SOCK_CLOEXEC);
        if (s >= 0) {
            close(s);
            atomic_fetch_add(&tem_fd_n_no_fd, 1);
        }
        atomic_store(&tem_fd_spare, tem_fd_open_spare__());
    }
    errno = EAGAIN;
    return -1;
}

int
accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len, int flags)
{
    return tem_fd_accept__(fd, TEM_FD_SOCKADDR(addr), len, flags);
}

int
accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
    return tem_fd_accept__(fd, TEM_FD_SOCKADDR(addr), len, 0);
}
