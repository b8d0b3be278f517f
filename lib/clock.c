/* SPDX-License-Identifier: Apache-2.0 */
#include "clock.h"

#include "util.h"

#include <stdatomic.h>
#include <time.h>

static uint64_t
clock_ns__(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

uint64_t
tpm_clock_real_ns(void)
{
    return clock_ns__(CLOCK_REALTIME);
}

uint64_t
tpm_clock_mono_ns(void)
{
    return clock_ns__(CLOCK_MONOTONIC);
}

static _Atomic double tsc_per_us;

double
tpm_tsc_per_us(void)
{
    double rate = atomic_load_explicit(&tsc_per_us, memory_order_relaxed);
    if (rate > 0) {
        return rate;
    }

    /* Measure three times over ~7 ms each and keep the median, so that one
     * preemption in the middle of a measurement does not skew the rate. */
    double r3[3];
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = tpm_clock_mono_ns(), c0 = tpm_rdtsc();
        uint64_t t1;
        do {
            t1 = tpm_clock_mono_ns();
        } while (t1 - t0 < 7000000);
        uint64_t c1 = tpm_rdtsc();
        r3[i] = (double) (c1 - c0) * 1000.0 / (double) (t1 - t0);
    }
    double best = MAX(MIN(r3[0], r3[1]), MIN(MAX(r3[0], r3[1]), r3[2]));
    if (best <= 0) {
        best = 1000.0;          /* No TSC: fall back to 1 cycle per ns. */
    }
    atomic_store_explicit(&tsc_per_us, best, memory_order_relaxed);
    return best;
}
