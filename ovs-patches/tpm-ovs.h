/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The glue between Open vSwitch's userspace datapath (lib/dpif-netdev.c)
 * and libtpm.  The patch series in ovs-patches/ adds one call of each of
 * these functions at the matching place in dpif-netdev.c; everything else
 * lives here, in our tree (the build links this file into
 * libopenvswitch).
 *
 * Each PMD thread owns one 'struct tpm_pmd' (one libtpm monitor: flow
 * table, triggers, nothing shared).  Packets that the main thread polls
 * for non-PMD ports are not monitored: they are counted
 * ("non_pmd_skipped" in tpm/stats).  Host-level events, the ovs-appctl tpm/
 * commands, ovsdb knobs and the local TEM (threshold split over the PMDs,
 * polls when one reports) run in the main thread, and so do the commands
 * of the network-wide TEM, which the host agent (lib/agent.h, a thread of
 * its own, started by other_config:tpm-controller) hands over.
 *
 * Thread-safety: tpm_ovs_rx() and tpm_ovs_pmd_iteration() run in the
 * PMD thread that owns the 'struct tpm_pmd'; tpm_ovs_pmd_create() and
 * tpm_ovs_pmd_destroy() in any thread (the registry is locked);
 * everything else in the main thread.
 */
#ifndef TPM_OVS_H
#define TPM_OVS_H 1

#include <stdint.h>

struct dp_packet_batch;
struct netdev;
struct smap;
struct tpm_pmd;

/* dpif_netdev_init(): registers the tpm/ commands. */
void tpm_ovs_init(void);

/* dpif_netdev_set_config(): reads the tpm-* keys of other_config. */
void tpm_ovs_set_config(const struct smap *other_config);

/* dp_netdev_configure_pmd() / dp_netdev_destroy_pmd().  Returns NULL for
 * the non-PMD "thread" (NON_PMD_CORE_ID) or if the monitor cannot be
 * created (logged; the switch runs unmonitored). */
struct tpm_pmd *tpm_ovs_pmd_create(unsigned core_id, unsigned non_pmd_id);
void tpm_ovs_pmd_destroy(struct tpm_pmd *);

/* dp_netdev_process_rxq_port(): a received batch, before OVS classifies
 * it, from datapath port 'port_no', with OVS's time of the batch 'now_us'
 * (pmd->ctx.now: monotonic microseconds).  'pmd' may be NULL (non-PMD
 * port): the packets are counted as skipped. */
void tpm_ovs_rx(struct tpm_pmd *, const struct dp_packet_batch *,
                uint32_t port_no, long long int now_us);

/* do_add_port() / do_del_port() / dpif_netdev_port_set_config(): the
 * datapath's ports (tpm-ovs-ports.c): datapath port 'port_no' named
 * 'name' added with 'netdev' (a VXLAN or Geneve vport's UDP port is
 * decapsulated), deleted, or given the Interface's other_config 'cfg'
 * (tpm-tun-id: the tenant of its frames).  Main thread. */
void tpm_ovs_port_add(uint32_t port_no, const char *name,
                      const struct netdev *);
void tpm_ovs_port_del(uint32_t port_no);
void tpm_ovs_port_set_config(uint32_t port_no, const struct smap *cfg);

/* pmd_thread_main(): once per polling iteration, after the rx queues were
 * polled; 'rx_packets' is what the iteration received, 'now_us' OVS's
 * latest time (pmd->ctx.now).  Runs a bounded sweep step when the queues
 * were drained (or every N iterations when they never are) and executes
 * control commands. */
void tpm_ovs_pmd_iteration(struct tpm_pmd *, uint64_t rx_packets,
                           long long int now_us);

/* dpif_netdev_run() / dpif_netdev_wait(): main-thread work (reports,
 * polls, decisions, knob changes, the TEM's commands and polls) and its
 * wake-up. */
void tpm_ovs_run(void);
void tpm_ovs_wait(void);

#endif /* tpm-ovs.h */
