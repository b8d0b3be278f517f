/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every other glue file stands on, and calls nothing of theirs: the
 * PMD registry, the monitor's clock, the knobs (their values and the
 * readers of other_config), the settings the PMDs read live (the DoS
 * threshold, whether any event is watched) and the counters tpm/stats
 * shows of the hooks in tpm-ovs.c.  tpm-ovs-private.h lists the files in
 * order, this one at the bottom.
 *
 * Thread-safety: the registry is locked (PMDs come and go in any thread)
 * and the live settings are atomics the PMD threads read; the rest is
 * the main thread's.
 */
#include <config.h>

#include "tpm-ovs-private.h"

#include <stdlib.h>
#include <string.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-thread.h"
#include "smap.h"

#include "clock.h"
#include "tpm-parse.h"

/* The module "tpm" (PMDs, clock, knobs): tpm-ovs.c logs in it too. */
VLOG_DEFINE_THIS_MODULE(tpm);

static struct ovs_mutex pmds_mutex = OVS_MUTEX_INITIALIZER;
static struct ovs_list pmds OVS_GUARDED_BY(pmds_mutex)
    = OVS_LIST_INITIALIZER(&pmds);
static uint64_t pmds_gen OVS_GUARDED_BY(pmds_mutex);  /* Bumped on every
                                                        * change. */
static uint64_t pmds_serial OVS_GUARDED_BY(pmds_mutex);

/* The DoS threshold is live: each PMD applies it at its next sweep
 * step.  The last writer wins: other_config:tpm-dos-threshold when its
 * value changes, tpm/dos-threshold, or the TEM. */
atomic_uint32_t tpm_ovs_live_dos_threshold = 0;

/* Host events installed or being installed: with none, the PMDs skip the
 * monitor entirely (no clock read, no parsing). */
atomic_uint32_t tpm_ovs_n_watch = 0;

/* Packets of non-PMD ports, not monitored. */
atomic_uint64_t tpm_ovs_non_pmd_skipped = 0;

/* The main thread's time in tpm_ovs_run(). */
struct tpm_ovs_main_time tpm_ovs_main_time;

/* Main-thread state. */
struct tpm_knobs tpm_ovs_knobs;

/* Who set the live DoS threshold. */
static const char *dos_threshold_by = "default";

/* The monitor's clock.
 *
 * Epoch numbers follow the wall clock, so that hosts whose clocks are
 * synchronised agree on epoch boundaries (the TEM adds up their values per
 * epoch).  The PMDs do not read it: they take OVS's own monotonic time of
 * the batch, 'pmd->ctx.now' (microseconds, read once per received batch
 * for OVS's own use), and add 'tpm_ovs_mono_to_wall_ns', the wall clock's
 * lead over the monotonic clock (tpm_ovs_pmd_now_ns()).  So a packet costs
 * no clock read, and the length of an epoch never depends on the wall
 * clock's steps.
 *
 * The main thread measures the lead again about once a second
 * (tpm_ovs_clock_check()).  It changes only when the wall clock is stepped
 * (settimeofday(), an NTP daemon's step); slewing moves both clocks
 * alike.  A forward step is followed (the epochs it skips are counted as
 * skipped by the monitors, their sweeps forced, nothing lost), so epoch
 * numbers stay those of the other hosts.  A backward step is not: epochs
 * never run backwards, and an epoch stretched until the wall clock caught
 * up would merge many epochs' packets into one.  The monitor's epochs then
 * stay ahead of the wall clock by the step, shown by tpm/stats and
 * logged.  Wall time of the start of epoch E in a report is E times the
 * epoch length, in nanoseconds since the Unix epoch, in either case
 * within the monotonic clock's rate error since the last step. */
atomic_uint64_t tpm_ovs_mono_to_wall_ns = 0;
static uint64_t clock_steps;            /* Forward steps followed. */
static uint64_t clock_steps_back;       /* Backward steps not followed. */
static int64_t clock_ahead_ns;          /* Monitor's lead over the wall
                                         * clock after backward steps. */

#define CLOCK_STEP_NS (100 * 1000)      /* Smaller changes: rounding. */

static uint64_t
mono_to_wall__(void)
{
    uint64_t off;
    atomic_read_relaxed(&tpm_ovs_mono_to_wall_ns, &off);
    return off;
}

/* The monitor's time now, in wall-clock nanoseconds (see above). */
uint64_t
tpm_ovs_now_ns(void)
{
    return tpm_clock_mono_ns() + mono_to_wall__();
}

/* Main thread: sets the wall clock's lead at start, follows forward steps
 * and counts backward ones (see above). */
void
tpm_ovs_clock_check(void)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    uint64_t lead = tpm_clock_real_ns() - tpm_clock_mono_ns();
    uint64_t off = mono_to_wall__();
    int64_t d = (int64_t) (lead - off);
    if (!off) {
        atomic_store_relaxed(&tpm_ovs_mono_to_wall_ns, lead);
    } else if (d >= CLOCK_STEP_NS) {
        atomic_store_relaxed(&tpm_ovs_mono_to_wall_ns, lead);
        clock_steps++;
        clock_ahead_ns = 0;
        VLOG_WARN_RL(&rl, "wall clock stepped forward by %"PRId64" us: "
                     "epochs follow it (the skipped epochs are swept at "
                     "once)", d / 1000);
    } else if (d < 0) {
        if (-d > clock_ahead_ns + CLOCK_STEP_NS) {
            clock_steps_back++;
            VLOG_WARN_RL(&rl, "wall clock stepped back: the monitor's "
                         "epochs now run %"PRId64" us ahead of it (epochs "
                         "never go back)", -d / 1000);
        }
        clock_ahead_ns = -d;
    } else {
        clock_ahead_ns = 0;
    }
}

/* Appends tpm/stats's line on the clock. */
void
tpm_ovs_clock_format(struct ds *s)
{
    ds_put_format(s, "clock: OVS's monotonic time + %"PRIu64" ns "
                  "(wall clock steps followed %"PRIu64", backward steps "
                  "%"PRIu64", epochs ahead of the wall clock by %"PRId64
                  " us)\n", mono_to_wall__(), clock_steps, clock_steps_back,
                  clock_ahead_ns / 1000);
}

/* PMD registry. */

/* Returns the registered PMDs (caller frees the array).  The pointers stay
 * valid while the main thread runs: PMDs are destroyed only after they
 * leave the registry, and the main thread ignores a PMD that left. */
uint64_t tpm_ovs_snapshot_gen;

struct tpm_pmd **
tpm_ovs_pmds_snapshot(size_t *n)
{
    struct tpm_pmd **v = NULL, *p;
    size_t cap = 0;

    *n = 0;
    ovs_mutex_lock(&pmds_mutex);
    tpm_ovs_snapshot_gen = pmds_gen;
    LIST_FOR_EACH (p, node, &pmds) {
        if (*n == cap) {
            v = x2nrealloc(v, &cap, sizeof *v);
        }
        v[(*n)++] = p;
    }
    ovs_mutex_unlock(&pmds_mutex);
    return v;
}

/* Registers 'p', giving it its serial number.  Any thread. */
void
tpm_ovs_pmds_add(struct tpm_pmd *p)
{
    ovs_mutex_lock(&pmds_mutex);
    p->serial = ++pmds_serial;
    ovs_list_push_back(&pmds, &p->node);
    pmds_gen++;
    ovs_mutex_unlock(&pmds_mutex);
}

/* Takes 'p' out of the registry.  Any thread. */
void
tpm_ovs_pmds_remove(struct tpm_pmd *p)
{
    ovs_mutex_lock(&pmds_mutex);
    ovs_list_remove(&p->node);
    pmds_gen++;
    ovs_mutex_unlock(&pmds_mutex);
}

/* The generation of the PMD set: changes whenever a PMD comes or goes. */
uint64_t
tpm_ovs_pmds_gen(void)
{
    ovs_mutex_lock(&pmds_mutex);
    uint64_t gen = pmds_gen;
    ovs_mutex_unlock(&pmds_mutex);
    return gen;
}

bool
tpm_ovs_pmd_parked(const struct tpm_pmd *p, uint64_t now)
{
    uint64_t last;
    atomic_read_relaxed(&CONST_CAST(struct tpm_pmd *, p)->last_iteration_ns,
                        &last);
    /* 'now' may predate the PMD's latest iteration: the caller read it
     * before, and the PMD ran meanwhile (even on the same CPU). */
    return now > last && now - last > TPM_PMD_PARKED_NS;
}

/* Host events installed or being installed: 'n'.  With none, the PMDs
 * skip the monitor; they watch before an event reaches them. */
void
tpm_ovs_watch(size_t n)
{
    atomic_store_relaxed(&tpm_ovs_n_watch, n);
}

/* Made once, never freed: slots live as long as the process. */
static struct tpm_tenants *tenants;

struct tpm_tenants *
tpm_ovs_tenants_get(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        tenants = tpm_tenants_create(tpm_ovs_knobs.params.tenant_slots);
        ovsthread_once_done(&once);
    }
    return tenants;
}

uint32_t
tpm_ovs_group_vni(const struct tpm_key *group)
{
    return group->tun ? tpm_tenants_vni(tpm_ovs_tenants_get(), group->tun)
                      : 0;
}

/* Knobs. */

/* Reads knob 'key' of 'cfg' as a time in ['min', 'max'] into '*ns'.
 * Returns false (and logs) if it is set but invalid. */
bool
tpm_ovs_knob_time(const struct smap *cfg, const char *key, uint64_t min,
                  uint64_t max, uint64_t *ns)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    uint64_t v;
    char *error = tpm_parse_time(s, &v);
    if (!error && (v < min || v > max)) {
        char a[32], b[32];
        error = xasprintf("expected a time in [%s, %s]",
                          tpm_time_format(min, a, sizeof a),
                          tpm_time_format(max, b, sizeof b));
    }
    if (error) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: %s; keeping the "
                  "previous value", key, s, error);
        free(error);
        return false;
    }
    *ns = v;
    return true;
}

/* Reads knob 'key' as an unsigned integer in ['min', 'max']. */
bool
tpm_ovs_knob_uint(const struct smap *cfg, const char *key, uint64_t min,
                  uint64_t max, uint32_t *value)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    uint64_t v;
    if (!tpm_parse_uint(s, min, max, &v)) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: expected an integer "
                  "in [%"PRIu64", %"PRIu64"]; keeping the previous value",
                  key, s, min, max);
        return false;
    }
    *value = v;
    return true;
}

/* Reads knob 'key' as "true" or "false" into 'value' (1 or 0). */
bool
tpm_ovs_knob_bool(const struct smap *cfg, const char *key, uint32_t *value)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    if (strcmp(s, "true") && strcmp(s, "false")) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: expected true or "
                  "false; keeping the previous value", key, s);
        return false;
    }
    *value = !strcmp(s, "true");
    return true;
}

/* Sets the live DoS threshold to 'bytes' on behalf of 'by' (a static
 * string).  Main thread. */
void
tpm_ovs_dos_threshold_set(uint32_t bytes, const char *by)
{
    uint32_t old = tpm_ovs_knobs.params.dos_threshold;
    tpm_ovs_knobs.params.dos_threshold = bytes;
    dos_threshold_by = by;
    atomic_store_relaxed(&tpm_ovs_live_dos_threshold, bytes);
    if (old != bytes) {
        VLOG_INFO("DoS threshold %"PRIu32" bytes (was %"PRIu32"), set by %s",
                  bytes, old, by);
    }
}

/* The live DoS threshold and who set it. */
uint32_t
tpm_ovs_dos_threshold(const char **by)
{
    uint32_t v;
    atomic_read_relaxed(&tpm_ovs_live_dos_threshold, &v);
    *by = dos_threshold_by;
    return v;
}
