/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's descriptor budget.
 *
 * Every connection the TEM accepts takes a descriptor: hosts, alert
 * subscribers and tem-ctl clients through ZeroMQ, scrapes through
 * libmicrohttpd.  Past the soft RLIMIT_NOFILE the kernel refuses new ones
 * (EMFILE), and libzmq copes badly: its TCP listener tries again at once,
 * forever (the TEM at 100% CPU), and its ipc listener aborts the process.
 * So a peer that opens enough idle TCP connections (each held until
 * ZMQ_HANDSHAKE_IVL, --handshake-timeout) would stop tem-ctl first and the
 * TEM next.
 *
 * tem_fd_init() raises the soft limit to the hard one (trumpet-tem.service
 * sets LimitNOFILE) and keeps the last 'reserve' descriptors below the
 * limit (--fd-reserve) for the TEM's own use: tem-ctl's connections on an
 * ipc:// control socket, the state file being saved, the alert files.
 * It does so where every accepted connection passes: this file defines
 * accept4() and accept(), so that libzmq's and libmicrohttpd's calls reach
 * them first (the executable's definition precedes libc's for every
 * library, by ELF symbol interposition), and they call the kernel
 * themselves.
 *
 *   - A TCP connection (a listener of family AF_INET or AF_INET6) whose
 *     descriptor falls in the reserve is closed at once, and the call
 *     fails with EAGAIN, as if no connection were waiting: the peer sees
 *     its connection closed, the listener waits for the next one.
 *     Counted in 'shed'.
 *   - A connection of any family that finds no descriptor at all
 *     (EMFILE) is taken with a spare descriptor kept for the purpose and
 *     closed (libev's trick), and the call fails with EAGAIN: no listener
 *     ever sees EMFILE.  Counted in 'no_fd'.
 *
 * The limits per source that keep one peer from taking every TCP slot
 * belong in the firewall (docs/operations.md, "Descriptors and
 * connections").
 *
 * Thread-safety: accept4() and accept() run in libzmq's I/O thread and in
 * the main thread (libmicrohttpd); their counters are atomic and the spare
 * descriptor is taken by atomic exchange.  tem_fd_init() runs once, in
 * the main thread, before the first socket is opened; the other
 * functions are the main thread's.
 */
#ifndef TEM_FD_H
#define TEM_FD_H 1

#include <stdint.h>

/* The least descriptors left for connections beside the reserve. */
#define TEM_FD_MIN_FREE 32

struct tem_fd_stats {
    uint64_t soft, hard;        /* RLIMIT_NOFILE in force. */
    uint64_t soft_at_start;     /* The soft limit the TEM was given. */
    uint32_t reserve;           /* --fd-reserve. */
    uint64_t shed;              /* TCP connections closed at accept:
                                 * their descriptor fell in the reserve. */
    uint64_t no_fd;             /* Connections closed at accept: no
                                 * descriptor left (EMFILE). */
};

/* Raises the soft RLIMIT_NOFILE to the hard limit, keeps 'reserve'
 * descriptors below it, and logs both.  Returns NULL, or an error if the
 * limit leaves fewer than TEM_FD_MIN_FREE descriptors beside the reserve
 * (caller frees). */
char *tem_fd_init(uint32_t reserve) __attribute__((warn_unused_result));

void tem_fd_get_stats(struct tem_fd_stats *);

/* Warns (tem-warn.h) if connections were refused since the last call. */
void tem_fd_warn(void);

#endif /* tem-fd.h */
