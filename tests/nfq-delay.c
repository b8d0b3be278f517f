/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nfq-delay: a delay line and bottleneck for the TCP integration tests.
 *
 * The test machines' kernel has no netem qdisc, so tests/tcp-kernel.sh
 * delays packets with netfilter instead: an nftables rule in the
 * receiving namespace sends the packets to be delayed to an NFQUEUE, and
 * this program, running in that namespace, gives each packet its
 * "accept" verdict DELAY after it arrived.  The delay is constant, so
 * packets leave in arrival order (a FIFO); nothing is reordered or lost
 * unless the queue overflows, which is counted.
 *
 *     nfq-delay --queue N [--delay TIME] [--rate PPS] [--max-queued N]
 *
 * TIME as in the event language (a number and a unit: 20ms, 500us; 0
 * without --delay).  With --rate, it is also a bottleneck: a FIFO served
 * at PPS packets per second (each packet leaves DELAY after the later of
 * its arrival and the previous packet's departure), and a packet that
 * finds --max-queued packets held is dropped (tail drop), as at a
 * router's queue.  Runs until SIGTERM or SIGINT, then accepts what it
 * still holds, prints one JSON line with its counters on stdout and exits
 * 0:
 *
 *     {"packets": N, "late_us_max": U, "overflows": N, "dropped": N}
 *
 * "late_us_max" is the largest lateness of a verdict beyond its due time
 * (scheduling); "overflows" counts packets that found the FIFO full
 * without --rate (they are accepted at once, undelayed); "dropped" those
 * dropped by the bottleneck's full queue.  Exit status 1 on a setup error (no
 * NFQUEUE support, queue already bound), with the reason on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include "event.h"

struct held {
    uint32_t id;                /* Packet id for the verdict. */
    uint64_t due_ns;            /* CLOCK_MONOTONIC. */
};

static struct held *fifo;
static size_t fifo_size, fifo_head, fifo_len;
static uint64_t delay_ns;
static uint64_t service_ns;     /* 1 / rate, or 0 (no bottleneck). */
static uint64_t last_due_ns;    /* Departure of the last packet queued. */
static uint64_t n_packets, n_overflows, n_dropped, late_ns_max;
static volatile sig_atomic_t stopping;

static uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
on_signal(int sig)
{
    (void) sig;
    stopping = 1;
}

static int
on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
          struct nfq_data *nfa, void *aux)
{
    (void) msg;
    (void) aux;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) {
        return 0;
    }
    uint32_t id = ntohl(ph->packet_id);
    n_packets++;
    if (fifo_len == fifo_size) {
        if (service_ns) {
            n_dropped++;
            return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
        }
        n_overflows++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    struct held *h = &fifo[(fifo_head + fifo_len++) % fifo_size];
    uint64_t now = now_ns();
    h->id = id;
    if (service_ns) {
        /* Served after the previous packet, one service time each. */
        last_due_ns = (last_due_ns > now + delay_ns ? last_due_ns
                       : now + delay_ns) + service_ns;
        h->due_ns = last_due_ns;
    } else {
        h->due_ns = now + delay_ns;
    }
    return 0;
}

/* Accepts every held packet due by 'now' (all of them if 'all'). */
static void
release(struct nfq_q_handle *qh, uint64_t now, bool all)
{
    while (fifo_len) {
        struct held *h = &fifo[fifo_head];
        if (!all && h->due_ns > now) {
            break;
        }
        if (now > h->due_ns && now - h->due_ns > late_ns_max) {
            late_ns_max = now - h->due_ns;
        }
        nfq_set_verdict(qh, h->id, NF_ACCEPT, 0, NULL);
        fifo_head = (fifo_head + 1) % fifo_size;
        fifo_len--;
    }
}

static void
usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "nfq-delay: %s%s%s%s (usage: nfq-delay --queue N "
            "[--delay TIME] [--rate PPS] [--max-queued N])\n", msg,
            *arg ? " '" : "", arg, *arg ? "'" : "");
    exit(1);
}

int
main(int argc, char *argv[])
{
    static const struct option options[] = {
        { "queue", required_argument, NULL, 'q' },
        { "delay", required_argument, NULL, 'd' },
        { "max-queued", required_argument, NULL, 'm' },
        { "rate", required_argument, NULL, 'r' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long queue = 0;
    bool have_delay = false;
    char *end;
    int c;

    fifo_size = 65536;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case 'q':
            queue = strtoul(optarg, &end, 10);
            if (*end || end == optarg || queue > 65535) {
                usage_error("bad queue number", optarg);
            }
            break;
        case 'd': {
            char *error = tpm_parse_time(optarg, &delay_ns);
            if (error) {
                usage_error(error, "");
            }
            have_delay = true;
            break;
        }
        case 'r': {
            unsigned long rate = strtoul(optarg, &end, 10);
            if (*end || end == optarg || !rate || rate > 100000000) {
                usage_error("bad --rate (packets per second, 1 .. 1e8)",
                            optarg);
            }
            service_ns = 1000000000 / rate;
            break;
        }
        case 'm':
            fifo_size = strtoul(optarg, &end, 10);
            if (*end || end == optarg || !fifo_size || fifo_size > 1 << 24) {
                usage_error("bad --max-queued (1 .. 2^24)", optarg);
            }
            break;
        default:
            usage_error("bad option", argv[optind - 1]);
        }
    }
    if ((!have_delay && !service_ns) || optind != argc) {
        usage_error("--delay or --rate is required, and there are no "
                    "arguments", "");
    }
    fifo = calloc(fifo_size, sizeof *fifo);
    if (!fifo) {
        fprintf(stderr, "nfq-delay: out of memory\n");
        return 1;
    }

    struct nfq_handle *h = nfq_open();
    if (!h) {
        fprintf(stderr, "nfq-delay: nfq_open: %s\n", strerror(errno));
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, queue, on_packet, NULL);
    if (!qh) {
        fprintf(stderr, "nfq-delay: cannot bind queue %lu: %s\n", queue,
                strerror(errno));
        return 1;
    }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0
        /* Room beyond the FIFO, so that this program, not the kernel,
         * sees (and counts) the packets that find it full. */
        || nfq_set_queue_maxlen(qh, fifo_size + 64) < 0) {
        fprintf(stderr, "nfq-delay: queue setup: %s\n", strerror(errno));
        return 1;
    }
    nfnl_rcvbufsiz(nfq_nfnlh(h), 8 << 20);

    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* Ready: the test waits for this line before sending. */
    fprintf(stderr, "nfq-delay: queue %lu, delay %"PRIu64" ns\n", queue,
            delay_ns);

    int fd = nfq_fd(h);
    char buf[65536];
    while (!stopping) {
        uint64_t now = now_ns();
        release(qh, now, false);
        uint64_t wait_ns = 100000000;
        if (fifo_len) {
            uint64_t due = fifo[fifo_head].due_ns;
            wait_ns = due > now ? due - now : 0;
        }
        struct timespec ts = { .tv_sec = wait_ns / 1000000000,
                               .tv_nsec = wait_ns % 1000000000 };
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int n = ppoll(&pfd, 1, &ts, NULL);
        if (n > 0) {
            for (;;) {
                ssize_t len = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (len <= 0) {
                    break;
                }
                nfq_handle_packet(h, buf, len);
            }
        }
    }
    release(qh, now_ns(), true);
    printf("{\"packets\": %"PRIu64", \"late_us_max\": %"PRIu64
           ", \"overflows\": %"PRIu64", \"dropped\": %"PRIu64"}\n",
           n_packets, late_ns_max / 1000, n_overflows, n_dropped);
    nfq_destroy_queue(qh);
    nfq_close(h);
    free(fifo);
    return 0;
}
