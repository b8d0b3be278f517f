/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dos-feeder: the paced traffic source of tpm/bench/bench-dos.sh (the paper's
 * Fig. 11 in an OVS-DPDK PMD).
 *
 * A DPDK process of its own (own --file-prefix, huge pages) with one
 * virtio-user port connected to the switch's dpdkvhostuser port: the
 * switch's PMD dequeues the frames from the virtio ring as it would from
 * a NIC's rx ring.  The feeder synthesizes the attack and legitimate
 * traffic on the fly and transmits it paced by the TSC at a given line
 * rate; a frame the ring has no room for is dropped, as a NIC would, and
 * counted.
 *
 * Why not a pcap: net_pcap does not pace (it hands over 32 frames at every
 * poll), its infinite_rx keeps the whole file in mbufs (so no millions of
 * distinct flows), and the ingress policer paces by discarding packets,
 * which breaks the attack's flows (a threshold-sized flow that loses one
 * packet is no longer threshold-sized) and, in file mode, would need a
 * file of tens of GB per run (the PMD reads it at full speed and the
 * policer throws most of it away).  Why not a DPDK secondary process of
 * ovs-vswitchd (a ring port): OVS 3.1 calls rte_mp_disable() right after
 * rte_eal_init(), so secondaries are refused.
 *
 * Traffic (all UDP/IPv4, burst 1: consecutive packets belong to different
 * flows):
 *   attack      64-byte frames, 10.64.0.0/10 -> 10.50.0.0/16 port 9;
 *               syn: one packet per flow, every flow new;
 *               threshold: flows of ceil(T / 64) packets (T bytes or just
 *               above), 'pool-size' flows in turn;
 *   legitimate  flows of 10 frames of 1500 bytes, 'pool-size' flows in
 *               turn, 10.1.0.0/16 -> 10.200.K.0/24, K < legit-prefixes.
 * The attack's share of the line's bytes is 'fraction' (bytes on the wire:
 * frame + 20 bytes of preamble and gap), the packet kinds interleaved
 * evenly (Bresenham).
 *
 * Usage: dos-feeder EAL-ARGS -- KEY=VALUE...
 *   rate=BITS/S fraction=F attack=syn|threshold threshold=BYTES seconds=S
 *   stats=FILE legit-prefixes=N pool-size=N
 * EAL-ARGS name the port, e.g. --vdev=net_virtio_user0,path=SOCKET.
 * Once the link is up, every 100 ms it rewrites FILE with one line
 * "tsc hz offered sent ring_drops late_skipped alloc_fail".
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define BURST 32
#define DOS_LEN 64
#define GOOD_LEN 1500
#define GOOD_PKTS 10
#define WIRE_EXTRA 20           /* Preamble, start delimiter, gap. */

static volatile bool stop;

static void
on_signal(int sig)
{
    (void) sig;
    stop = true;
}

struct flow_pool {
    uint32_t *ids;              /* Flow id of each slot. */
    uint32_t *sent;             /* Packets the slot's flow has sent. */
    uint32_t n, next;           /* Slots; next slot to send. */
    uint32_t next_id;           /* Id of the next new flow. */
    uint32_t pkts;              /* Packets per flow. */
};

static void
pool_init(struct flow_pool *p, uint32_t n, uint32_t pkts)
{
    p->ids = calloc(n, sizeof *p->ids);
    p->sent = calloc(n, sizeof *p->sent);
    if (!p->ids || !p->sent) {
        rte_exit(EXIT_FAILURE, "out of memory\n");
    }
    p->n = n;
    p->next = 0;
    p->pkts = pkts;
    for (uint32_t i = 0; i < n; i++) {
        p->ids[i] = p->next_id++;
    }
}

/* Returns the flow id of the pool's next packet. */
static uint32_t
pool_next(struct flow_pool *p)
{
    uint32_t s = p->next;
    uint32_t id = p->ids[s];
    if (++p->sent[s] >= p->pkts) {
        p->sent[s] = 0;
        p->ids[s] = p->next_id++;
    }
    p->next = s + 1 == p->n ? 0 : s + 1;
    return id;
}

static uint16_t
ip_csum(const uint8_t *h)
{
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2) {
        s += (uint32_t) h[i] << 8 | h[i + 1];
    }
    while (s >> 16) {
        s = (s & 0xffff) + (s >> 16);
    }
    return ~s & 0xffff;
}

static void
put16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

static void
put32(uint8_t *p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p + 2, v);
}

/* Writes a UDP/IPv4 frame of 'len' bytes into 'f'. */
static void
build(uint8_t *f, uint16_t len, uint32_t src, uint32_t dst, uint16_t sport,
      uint16_t dport)
{
    static const uint8_t eth[14] = {
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00
    };
    memcpy(f, eth, sizeof eth);
    uint8_t *ip = f + 14;
    memset(ip, 0, 28);
    ip[0] = 0x45;
    put16(ip + 2, len - 14);
    ip[8] = 64;
    ip[9] = 17;
    put32(ip + 12, src);
    put32(ip + 16, dst);
    put16(ip + 10, ip_csum(ip));
    uint8_t *udp = ip + 20;
    put16(udp, sport);
    put16(udp + 2, dport);
    put16(udp + 4, len - 34);
}

struct opts {
    const char *stats, *attack;
    double rate, fraction, seconds;
    uint32_t threshold, legit_prefixes, pool_size;
};

static void
parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts) {
        .attack = "syn",
        .rate = 10e9, .seconds = 5, .legit_prefixes = 4, .pool_size = 256,
    };
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            rte_exit(EXIT_FAILURE, "%s: expected KEY=VALUE\n", argv[i]);
        }
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "stats")) {
            o->stats = v;
        } else if (!strcmp(k, "attack")) {
            if (strcmp(v, "syn") && strcmp(v, "threshold")) {
                rte_exit(EXIT_FAILURE, "attack: syn or threshold\n");
            }
            o->attack = v;
        } else if (!strcmp(k, "rate")) {
            o->rate = atof(v);
        } else if (!strcmp(k, "fraction")) {
            o->fraction = atof(v);
        } else if (!strcmp(k, "seconds")) {
            o->seconds = atof(v);
        } else if (!strcmp(k, "threshold")) {
            o->threshold = strtoul(v, NULL, 10);
        } else if (!strcmp(k, "legit-prefixes")) {
            o->legit_prefixes = strtoul(v, NULL, 10);
        } else if (!strcmp(k, "pool-size")) {
            o->pool_size = strtoul(v, NULL, 10);
        } else {
            rte_exit(EXIT_FAILURE, "unknown option %s\n", k);
        }
    }
    if (o->fraction < 0 || o->fraction > 1 || o->rate <= 0
        || !o->legit_prefixes || o->legit_prefixes > 256 || !o->pool_size) {
        rte_exit(EXIT_FAILURE, "bad option value\n");
    }
}

struct counters {
    uint64_t offered, sent, ring_drops, late_skipped, alloc_fail;
};

static void
write_stats(const char *path, const struct counters *c)
{
    char tmp[4096];
    if (!path) {
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        return;
    }
    fprintf(f, "%"PRIu64" %"PRIu64" %"PRIu64" %"PRIu64" %"PRIu64" %"PRIu64
            " %"PRIu64"\n", rte_rdtsc(), rte_get_tsc_hz(), c->offered,
            c->sent, c->ring_drops, c->late_skipped, c->alloc_fail);
    fclose(f);
    rename(tmp, path);
}

int
main(int argc, char **argv)
{
    int n = rte_eal_init(argc, argv);
    if (n < 0) {
        rte_exit(EXIT_FAILURE, "EAL init failed\n");
    }
    struct opts o;
    parse_opts(argc - n - 1, argv + n + 1, &o);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    if (rte_eth_dev_count_avail() < 1) {
        rte_exit(EXIT_FAILURE, "no port (--vdev=net_virtio_user0,...)\n");
    }
    uint16_t port = 0;
    int socket = rte_socket_id();
    struct rte_mempool *mp = rte_pktmbuf_pool_create(
        "feeder", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
    if (!mp) {
        rte_exit(EXIT_FAILURE, "cannot create the mempool\n");
    }
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    if (rte_eth_dev_configure(port, 1, 1, &conf)
        || rte_eth_rx_queue_setup(port, 0, 256, socket, NULL, mp)
        || rte_eth_tx_queue_setup(port, 0, 1024, socket, NULL)
        || rte_eth_dev_start(port)) {
        rte_exit(EXIT_FAILURE, "cannot set up port 0\n");
    }
    /* Wait for the switch's side (up to 30 s). */
    for (int i = 0; i < 3000 && !stop; i++) {
        struct rte_eth_link link;
        if (!rte_eth_link_get_nowait(port, &link) && link.link_status) {
            break;
        }
        rte_delay_ms(10);
    }

    bool syn = !strcmp(o.attack, "syn");
    uint32_t dos_pkts = syn ? 1 : RTE_MAX(1u, (o.threshold + DOS_LEN - 1)
                                          / DOS_LEN);
    struct flow_pool dos, good;
    pool_init(&dos, syn ? 1 : o.pool_size, dos_pkts);
    pool_init(&good, o.pool_size, GOOD_PKTS);

    /* Share of packets that are attack packets, for the byte fraction. */
    double fd = o.fraction / (DOS_LEN + WIRE_EXTRA);
    double fg = (1 - o.fraction) / (GOOD_LEN + WIRE_EXTRA);
    double p_dos = fd / (fd + fg);
    double hz = rte_get_tsc_hz();
    double cyc_per_byte = hz * 8 / o.rate;

    uint8_t dos_tpl[DOS_LEN], good_tpl[GOOD_LEN];
    memset(dos_tpl, 0, sizeof dos_tpl);
    memset(good_tpl, 0, sizeof good_tpl);

    struct counters c = { 0 };
    uint64_t start = rte_rdtsc();
    uint64_t end = start + (uint64_t) (o.seconds * hz);
    uint64_t next_stats = start;
    double due = start;         /* TSC at which the next packet is due. */
    double acc = 0;
    uint64_t max_late = hz / 1000;      /* 1 ms of backlog at most. */

    while (!stop) {
        uint64_t now = rte_rdtsc();
        if (now >= end) {
            break;
        }
        if (now >= next_stats) {
            write_stats(o.stats, &c);
            next_stats = now + hz / 10;
        }
        if (now < due) {
            rte_pause();
            continue;
        }
        if (now - due > max_late) {
            /* Descheduled: what could not be sent in time is not offered
             * (counted), the schedule restarts now. */
            c.late_skipped += (uint64_t) ((now - due)
                / ((p_dos * (DOS_LEN + WIRE_EXTRA)
                    + (1 - p_dos) * (GOOD_LEN + WIRE_EXTRA))
                   * cyc_per_byte));
            due = now;
        }

        struct rte_mbuf *m[BURST];
        int k = 0;
        if (rte_pktmbuf_alloc_bulk(mp, m, BURST)) {
            c.alloc_fail++;
            continue;
        }
        while (k < BURST && due <= now) {
            bool is_dos;
            acc += p_dos;
            if (acc >= 1) {
                acc -= 1;
                is_dos = true;
            } else {
                is_dos = false;
            }
            uint16_t len = is_dos ? DOS_LEN : GOOD_LEN;
            uint8_t *f = rte_pktmbuf_mtod(m[k], uint8_t *);
            if (is_dos) {
                uint32_t id = syn ? dos.next_id++ : pool_next(&dos);
                build(f, len, 0x0a400000 | (id & 0x3fffff),
                      0x0a320000 | ((id * 2654435761u) & 0xffff),
                      1024 + (id >> 22), 9);
            } else {
                uint32_t id = pool_next(&good);
                build(f, len, 0x0a010000 | (id & 0xffff),
                      0x0ac80000 | (id % o.legit_prefixes) << 8
                      | (1 + (id >> 8) % 254),
                      1024 + (id >> 16), 5001);
            }
            m[k]->data_len = len;
            m[k]->pkt_len = len;
            k++;
            due += (len + WIRE_EXTRA) * cyc_per_byte;
        }
        uint16_t q = rte_eth_tx_burst(port, 0, m, k);
        c.offered += k;
        c.sent += q;
        c.ring_drops += k - q;
        for (int i = q; i < BURST; i++) {
            rte_pktmbuf_free(m[i]);
        }
    }
    write_stats(o.stats, &c);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    fprintf(stderr, "dos-feeder: offered %"PRIu64", sent %"PRIu64
            ", ring drops %"PRIu64", late skipped %"PRIu64", alloc "
            "failures %"PRIu64"\n", c.offered, c.sent, c.ring_drops,
            c.late_skipped, c.alloc_fail);
    rte_eal_cleanup();
    return 0;
}
