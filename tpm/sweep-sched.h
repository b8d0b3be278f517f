/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Queue-adaptive scheduling of sweep steps (paper section 5.5, algorithm
 * 2): when a polling loop that feeds a monitor gives it a sweep step, and
 * with what budget.  The loop is a switch's PMD thread (ovs-patches/
 * tpm-ovs.c, tpm_ovs_pmd_iteration()); each of its iterations polls every
 * rx queue once.
 *
 *   - An iteration in which every queue came back short ("drained": no
 *     full rx batch) has time to spare: it always gets a step, with the
 *     fixed budget (tpm_params.sweep_budget_ns).
 *   - A saturated PMD never drains, but its sweep must still finish
 *     within its epoch: it gets a step every 'every' busy iterations, or
 *     as soon as the last step is 'gap_ns' old (iterations that transmit
 *     to kernel devices can take milliseconds).
 *   - Such a forced step whose sweep is behind its pace
 *     (tpm_sweep_lateness() > 0: the pace ends the sweep when 'pace' % of
 *     the epoch is gone) gets up to 'catchup' % of the time since the
 *     last step (capped at one epoch), that is of the core, rather than
 *     the fixed budget, when that is more; a fixed budget of 0
 *     ("unbounded") or a 'catchup' of 0 disables it.  A pace of 100
 *     aims to end the sweep with its epoch, so a step that comes late at
 *     the end (a long iteration) leaves it unfinished; a lower pace
 *     catches up sooner and keeps the rest of the epoch as a margin,
 *     for the same work.
 *
 * A step is counted by its kind (enum tpm_sched_kind) only if a sweep is
 * pending; the monitor is still called (tpm_sweep_step() returns at once
 * without a sweep).
 *
 * The decision is split in two so that the loop pays only for what it
 * needs: tpm_sched_due() on every iteration (a compare or two), and
 * tpm_sched_step() only for an iteration that steps.  The lateness, which
 * takes divisions, is asked (through the caller's function, normally
 * tpm_sweep_lateness()) only when it can change the budget.  Both are
 * static inline and pure: they read their arguments and the state, and
 * write only the state.
 *
 * Thread-safety: a 'struct tpm_sched' belongs to one thread, like its
 * monitor.
 */
#ifndef TPM_SWEEP_SCHED_H
#define TPM_SWEEP_SCHED_H 1

#include <stdbool.h>
#include <stdint.h>

struct tpm;

/* One polling loop's scheduling state.  Zero-initialise. */
struct tpm_sched {
    uint32_t busy_iterations;   /* Saturated iterations since the last
                                 * step. */
    uint64_t last_step_ns;      /* Time of the last step. */
};

enum tpm_sched_kind {
    TPM_SCHED_NO_SWEEP,         /* A step, no sweep pending: not counted. */
    TPM_SCHED_IDLE,             /* A step in a drained iteration. */
    TPM_SCHED_FORCED,           /* A step forced while saturated. */
    TPM_SCHED_CATCHUP,          /* A forced step, lengthened to catch up
                                 * (counts as forced too). */
};

/* Whether the iteration at 'now_ns', drained or not, gets a sweep step,
 * with a forced step every 'every' saturated iterations or once the last
 * step is 'gap_ns' old.  Counts the saturated iterations in 's'. */
static inline bool
tpm_sched_due(struct tpm_sched *s, bool drained, uint64_t now_ns,
              uint32_t every, uint64_t gap_ns)
{
    return (drained || ++s->busy_iterations >= every
            || now_ns - s->last_step_ns >= gap_ns);
}

/* The step of a due iteration (tpm_sched_due()) at 'now_ns': restarts
 * 's' at 'now_ns', stores the step's budget in '*budget_ns' ('fixed_ns',
 * or the catch-up budget) and returns its kind.  'pending' says whether a
 * sweep is pending (tpm_sweep_pending()); 'lateness' (normally
 * tpm_sweep_lateness()) is called with 'tpm', 'now_ns' and 'pace' only
 * for a forced step whose catch-up budget would exceed 'fixed_ns'.
 * 'epoch_ns' caps the time since the last step. */
static inline enum tpm_sched_kind
tpm_sched_step(struct tpm_sched *s, bool drained, uint64_t now_ns,
               uint64_t epoch_ns, uint64_t fixed_ns, uint32_t catchup,
               uint32_t pace, bool pending,
               double (*lateness)(const struct tpm *, uint64_t now_ns,
                                  uint32_t pace),
               const struct tpm *tpm, uint64_t *budget_ns)
{
    uint64_t since = now_ns - s->last_step_ns;
    if (since > epoch_ns) {
        since = epoch_ns;
    }
    s->busy_iterations = 0;
    s->last_step_ns = now_ns;
    *budget_ns = fixed_ns;
    if (!pending) {
        return TPM_SCHED_NO_SWEEP;
    } else if (drained) {
        return TPM_SCHED_IDLE;
    } else if (fixed_ns && catchup && since * catchup / 100 > fixed_ns
               && lateness(tpm, now_ns, pace) > 0) {
        *budget_ns = since * catchup / 100;
        return TPM_SCHED_CATCHUP;
    } else {
        return TPM_SCHED_FORCED;
    }
}

#endif /* sweep-sched.h */
