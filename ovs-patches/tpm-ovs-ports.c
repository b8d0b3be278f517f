/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The datapath's ports as the monitor sees them.
 *
 * dpif-netdev tells this file of every port it adds or deletes and of
 * every Interface other_config it applies (the patch's do_add_port(),
 * do_del_port() and dpif_netdev_port_set_config()).  From them the main
 * thread keeps a table of the ports: each port's name, the UDP port and
 * type of a tunnel vport (OVS's "vxlan_sys_4789", "genev_sys_6081": one
 * datapath port per UDP port, whatever the number of tunnel ports in the
 * bridges), and the tenant of a VM's port (other_config:tpm-tun-id).
 *
 * The monitor needs two things from it, on the PMD, per rx batch:
 *
 *   - the UDP ports of the tunnels (lib/packet.h, "Tunnels"): a frame
 *     received on any port whose UDP destination is one of them is parsed
 *     as the inner frame it carries, under its VNI; never hard-coded, they
 *     follow the tunnel ports configured in OVS;
 *
 *   - the tenant of the port the batch came from: a VM's frames are
 *     received before OVS pushes the tunnel header in its actions, so the
 *     VNI the monitor counts them under is the one the operator gives the
 *     VM's port (ovs-vsctl set Interface vm1 other_config:tpm-tun-id=5001),
 *     the same as its replies from the tunnel carry;
 *
 *   - the number of the port's name (tpm_set_rx_port()), which per-port
 *     events (in_port=NAME, group=in_port) compare.
 *
 * Names, not datapath port numbers, are what an event names and what a
 * flow keeps: OVS gives a deleted port's number to the next port added,
 * while a VM's interface keeps its name.  Every name an event or a port
 * uses gets a number from 1 to TPM_OVS_NAMES_MAX, kept while an event
 * names it or a port has it (a reference each) and after, until the
 * numbers run out: a new name then takes the unreferenced number that
 * was allocated longest ago (round robin), so a flow that still carries
 * an old number is long gone when it is reused.  An event on a port not
 * yet added counts from the moment it is: the port gets the number the
 * event's name already has.
 *
 * After every change, the main thread publishes an immutable snapshot of
 * both by RCU (ovs-rcu.h); a PMD reads the pointer once per rx batch (an
 * atomic load), copies the tunnel ports into its monitor when the
 * snapshot's generation changed, and sets the monitor's tenant of
 * untunnelled frames when the batch's port differs from the previous
 * batch's (a PMD polls few ports: binary search in the snapshot).
 *
 * Thread-safety: the table and the snapshot's publication are the main
 * thread's (dpif-netdev calls the hooks with its port lock held);
 * tpm_ovs_ports_get() and tpm_ovs_ports_find() are for any thread that is
 * not quiescent (the PMDs), whose snapshot stays valid until it quiesces.
 */
#include <config.h>
#include "tpm-ovs-private.h"

#include <stdlib.h>
#include <string.h>

#include "netdev.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "openvswitch/shash.h"
#include "ovs-rcu.h"
#include "smap.h"
#include "tpm-ovs.h"
#include "tpm-parse.h"
#include "unixctl.h"

VLOG_DEFINE_THIS_MODULE(tpm_ports);

/* A datapath port, in the main thread's table. */
struct tpm_ovs_port {
    struct hmap_node node;      /* In 'ports', by 'port_no'. */
    uint32_t port_no;
    char *name;
    uint16_t name_slot;         /* The number of 'name' (a reference), 0
                                 * if none was left. */
    uint8_t tnl_type;           /* enum tpm_tun_type: a tunnel vport... */
    uint16_t tnl_udp;           /* ...and its UDP port; 0 if not. */
    bool has_tun;               /* other_config:tpm-tun-id given: */
    uint32_t tun_id;            /* the VNI of the port's frames. */
};

static struct hmap ports = HMAP_INITIALIZER(&ports);
static uint64_t ports_gen;

/* The snapshot of no port, until the first is added. */
static struct tpm_ovs_ports ports_empty;
static OVSRCU_TYPE(struct tpm_ovs_ports *) ports_snap
    = OVSRCU_INITIALIZER(&ports_empty);

/* Tunnel vports beyond TPM_TUNNEL_PORTS_MAX UDP ports: not decapsulated
 * (shown by tpm/ports). */
static uint32_t tunnels_ignored;

/* Port names: number -> name, references and the port that has it. */
#define TPM_OVS_NAMES_MAX 65535
struct tpm_ovs_name {
    char *name;                 /* NULL: never allocated. */
    uint32_t refs;              /* Events naming it, plus 1 while a port
                                 * has it. */
    uint32_t port_no;           /* The port that has it, or UINT32_MAX. */
};
static struct tpm_ovs_name *names;      /* [TPM_OVS_NAMES_MAX + 1]. */
static struct shash names_by_name = SHASH_INITIALIZER(&names_by_name);
static uint32_t names_next = 1;         /* Where the round robin goes on. */

/* Returns the number of 'name', allocating one if it has none, with one
 * more reference; 0 if every number is referenced. */
uint16_t
tpm_ovs_port_name_ref(const char *name)
{
    void *found = shash_find_data(&names_by_name, name);
    uintptr_t slot = (uintptr_t) found;

    if (!names) {
        names = xcalloc(TPM_OVS_NAMES_MAX + 1, sizeof *names);
    }
    if (!slot) {
        for (uint32_t i = 0; i < TPM_OVS_NAMES_MAX && !slot; i++) {
            uint32_t s = (names_next - 1 + i) % TPM_OVS_NAMES_MAX + 1;
            if (!names[s].refs) {
                slot = s;
            }
        }
        if (!slot) {
            return 0;
        }
        names_next = slot % TPM_OVS_NAMES_MAX + 1;
        struct tpm_ovs_name *nm = &names[slot];
        if (nm->name) {
            shash_find_and_delete(&names_by_name, nm->name);
            free(nm->name);
        }
        nm->name = xstrdup(name);
        nm->port_no = UINT32_MAX;
        shash_add(&names_by_name, name, (void *) slot);
    }
    names[slot].refs++;
    return slot;
}

/* Drops a reference to number 'slot' (0: none). */
void
tpm_ovs_port_name_unref(uint16_t slot)
{
    if (slot && names && names[slot].refs) {
        names[slot].refs--;
    }
}

/* Returns the name of number 'slot', or NULL, and stores in '*port_nop'
 * the datapath port that has it now, or UINT32_MAX. */
const char *
tpm_ovs_port_name(uint16_t slot, uint32_t *port_nop)
{
    *port_nop = slot && names ? names[slot].port_no : UINT32_MAX;
    return slot && names ? names[slot].name : NULL;
}

static struct tpm_ovs_port *
tpm_ovs_port_find__(uint32_t port_no)
{
    struct tpm_ovs_port *p;

    HMAP_FOR_EACH_WITH_HASH (p, node, hash_int(port_no, 0), &ports) {
        if (p->port_no == port_no) {
            return p;
        }
    }
    return NULL;
}

static int
tpm_ovs_port_snap_cmp__(const void *a_, const void *b_)
{
    const struct tpm_ovs_port_snap *a = a_, *b = b_;
    return a->port_no < b->port_no ? -1 : a->port_no > b->port_no;
}

static void
tpm_ovs_ports_free__(struct tpm_ovs_ports *snap)
{
    if (snap != &ports_empty) {
        free(snap);
    }
}

/* Publishes a new snapshot of 'ports'. */
static void
tpm_ovs_ports_publish__(void)
{
    size_t n = hmap_count(&ports);
    struct tpm_ovs_ports *snap = xzalloc(sizeof *snap
                                         + n * sizeof snap->port[0]);
    const struct tpm_ovs_port *p;
    uint32_t ignored = 0;

    snap->gen = ++ports_gen;
    tpm_tunnel_ports_init(&snap->tunnels);
    HMAP_FOR_EACH (p, node, &ports) {
        struct tpm_ovs_port_snap *s = &snap->port[snap->n++];
        s->port_no = p->port_no;
        s->name_slot = p->name_slot;
        s->has_tun = p->has_tun;
        s->tun_id = p->tun_id;
        if (p->tnl_udp
            && !tpm_tunnel_ports_add(&snap->tunnels, p->tnl_udp,
                                     p->tnl_type)) {
            ignored++;
        }
    }
    qsort(snap->port, snap->n, sizeof snap->port[0],
          tpm_ovs_port_snap_cmp__);
    if (ignored && ignored != tunnels_ignored) {
        VLOG_WARN("%"PRIu32" tunnel port(s) beyond the monitor's %d UDP "
                  "ports: their frames are counted under the outer flow",
                  ignored, TPM_TUNNEL_PORTS_MAX);
    }
    tunnels_ignored = ignored;

    struct tpm_ovs_ports *old = ovsrcu_get_protected(struct tpm_ovs_ports *,
                                                     &ports_snap);
    ovsrcu_set(&ports_snap, snap);
    ovsrcu_postpone(tpm_ovs_ports_free__, old);
}

/* Gives port 'p' name 'name' (NULL: none, as it goes) and its number,
 * dropping the old one's.  Says so if events name the old one. */
static void
tpm_ovs_port_name_set__(struct tpm_ovs_port *p, const char *name)
{
    if (p->name_slot) {
        struct tpm_ovs_name *nm = &names[p->name_slot];
        nm->port_no = UINT32_MAX;
        tpm_ovs_port_name_unref(p->name_slot);
        if (nm->refs) {
            VLOG_INFO("%s: port %"PRIu32" removed: %"PRIu32" event(s) "
                      "naming it in in_port= count nothing more until an "
                      "interface of that name is added (what they counted "
                      "is kept)", nm->name, p->port_no, nm->refs);
        }
    }
    free(p->name);
    p->name = name ? xstrdup(name) : NULL;
    p->name_slot = name ? tpm_ovs_port_name_ref(name) : 0;
    if (p->name_slot) {
        names[p->name_slot].port_no = p->port_no;
        if (names[p->name_slot].refs > 1) {
            VLOG_INFO("%s: port %"PRIu32" added: %"PRIu32" event(s) name "
                      "it in in_port=", name, p->port_no,
                      names[p->name_slot].refs - 1);
        }
    } else if (name) {
        VLOG_WARN("%s: every one of the monitor's %d port name numbers is "
                  "in use: per-port events do not see this port",
                  name, TPM_OVS_NAMES_MAX);
    }
}

/* The tunnel type of 'netdev', if the monitor decapsulates its frames. */
static enum tpm_tun_type
tpm_ovs_port_tunnel_type__(const struct netdev *netdev)
{
    const char *type = netdev_get_type(netdev);

    return (!strcmp(type, "vxlan") ? TPM_TUN_VXLAN
            : !strcmp(type, "geneve") ? TPM_TUN_GENEVE
            : TPM_TUN_NONE);
}

void
tpm_ovs_port_add(uint32_t port_no, const char *name,
                 const struct netdev *netdev)
{
    struct tpm_ovs_port *p = tpm_ovs_port_find__(port_no);

    if (!p) {
        p = xzalloc(sizeof *p);
        p->port_no = port_no;
        hmap_insert(&ports, &p->node, hash_int(port_no, 0));
    }
    if (!p->name || strcmp(p->name, name)) {
        tpm_ovs_port_name_set__(p, name);
    }
    p->tnl_type = tpm_ovs_port_tunnel_type__(netdev);
    p->tnl_udp = 0;
    if (p->tnl_type != TPM_TUN_NONE) {
        const struct netdev_tunnel_config *cfg
            = netdev_get_tunnel_config(netdev);
        if (cfg) {
            p->tnl_udp = ntohs(cfg->dst_port);
        }
        if (!p->tnl_udp) {
            p->tnl_type = TPM_TUN_NONE;
        }
    }
    tpm_ovs_ports_publish__();
}

void
tpm_ovs_port_del(uint32_t port_no)
{
    struct tpm_ovs_port *p = tpm_ovs_port_find__(port_no);

    if (p) {
        hmap_remove(&ports, &p->node);
        tpm_ovs_port_name_set__(p, NULL);
        free(p);
        tpm_ovs_ports_publish__();
    }
}

void
tpm_ovs_port_set_config(uint32_t port_no, const struct smap *cfg)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 5);
    struct tpm_ovs_port *p = tpm_ovs_port_find__(port_no);
    const char *s = smap_get(cfg, "tpm-tun-id");
    bool has_tun = false;
    uint64_t vni = 0;

    if (!p) {
        return;
    }
    if (s && !tpm_parse_uint_hex(s, 0xffffff, &vni)) {
        VLOG_WARN_RL(&rl, "%s: other_config:tpm-tun-id=%s is not a tunnel "
                     "id (0 to 16777215, decimal or 0x hexadecimal): "
                     "ignored, the port keeps %s", p->name, s,
                     p->has_tun ? "its tunnel id" : "no tunnel id");
        return;
    }
    has_tun = s != NULL;
    if (has_tun != p->has_tun || vni != p->tun_id) {
        p->has_tun = has_tun;
        p->tun_id = vni;
        if (has_tun) {
            VLOG_INFO("%s: monitored as tunnel id %"PRIu32, p->name,
                      p->tun_id);
        } else {
            VLOG_INFO("%s: monitored as untunnelled", p->name);
        }
        tpm_ovs_ports_publish__();
    }
}

const struct tpm_ovs_ports *
tpm_ovs_ports_get(void)
{
    return ovsrcu_get(struct tpm_ovs_ports *, &ports_snap);
}

const struct tpm_ovs_port_snap *
tpm_ovs_ports_find(const struct tpm_ovs_ports *snap, uint32_t port_no)
{
    size_t lo = 0, hi = snap->n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (snap->port[mid].port_no < port_no) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < snap->n && snap->port[lo].port_no == port_no
           ? &snap->port[lo] : NULL;
}

static int
tpm_ovs_port_cmp__(const void *a_, const void *b_)
{
    const struct tpm_ovs_port *const *a = a_, *const *b = b_;
    return (*a)->port_no < (*b)->port_no ? -1
           : (*a)->port_no > (*b)->port_no;
}

/* tpm/ports: the datapath's ports, their tunnels and tenants. */
void
tpm_unixctl_ports(struct unixctl_conn *conn, int argc OVS_UNUSED,
                  const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    const struct tpm_ovs_ports *snap = tpm_ovs_ports_get();
    size_t n = hmap_count(&ports), i = 0;
    const struct tpm_ovs_port **v = xmalloc((n ? n : 1) * sizeof *v);
    const struct tpm_ovs_port *p;
    struct ds ds = DS_EMPTY_INITIALIZER;
    char buf[TPM_TUNNEL_PORTS_STRLEN];

    HMAP_FOR_EACH (p, node, &ports) {
        v[i++] = p;
    }
    qsort(v, n, sizeof *v, tpm_ovs_port_cmp__);
    ds_put_format(&ds, "tunnel ports decapsulated: %s",
                  tpm_tunnel_ports_format(&snap->tunnels, buf, sizeof buf));
    if (tunnels_ignored) {
        ds_put_format(&ds, " (%"PRIu32" more ignored: at most %d)",
                      tunnels_ignored, TPM_TUNNEL_PORTS_MAX);
    }
    ds_put_char(&ds, '\n');
    for (i = 0; i < n; i++) {
        p = v[i];
        ds_put_format(&ds, "  port %"PRIu32": %s", p->port_no, p->name);
        if (p->tnl_udp) {
            ds_put_format(&ds, " (%s tunnel, UDP port %u)",
                          tpm_tun_type_name(p->tnl_type), p->tnl_udp);
        }
        if (p->has_tun) {
            ds_put_format(&ds, " tun_id=%"PRIu32, p->tun_id);
        }
        ds_put_char(&ds, '\n');
    }
    free(v);
    unixctl_command_reply(conn, ds_cstr(&ds));
    ds_destroy(&ds);
}
