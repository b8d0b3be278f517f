/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clocks.
 *
 * Epoch numbers come from wall-clock nanoseconds, so that hosts with
 * synchronised clocks agree on epoch boundaries; inside Open vSwitch they
 * are OVS's monotonic time of the batch plus the wall clock's lead
 * (ovs-patches/tpm-ovs-base.c), replay tools pass their own virtual time.
 * Sweep budgets are measured with the CPU's time-stamp counter, read with
 * rdtsc (about 20-30 cycles, against ~100 for clock_gettime through the
 * vDSO), converted to nanoseconds with a rate calibrated once against
 * CLOCK_MONOTONIC.
 *
 * Thread-safety: thread-safe; tpm_clock_calibrate() runs once, lazily.
 */
#ifndef TPM_CLOCK_H
#define TPM_CLOCK_H 1

#include <stdint.h>

static inline uint64_t
tpm_rdtsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    extern uint64_t tpm_clock_mono_ns(void);
    return tpm_clock_mono_ns();
#endif
}

/* Nanoseconds of CLOCK_REALTIME and CLOCK_MONOTONIC. */
uint64_t tpm_clock_real_ns(void);
uint64_t tpm_clock_mono_ns(void);

/* Returns the number of TSC cycles per microsecond (measured over about
 * 20 ms on the first call, cached afterwards). */
double tpm_tsc_per_us(void);

static inline uint64_t
tpm_ns_to_tsc(uint64_t ns)
{
    return (uint64_t) (ns * tpm_tsc_per_us() / 1000.0);
}

static inline double
tpm_tsc_to_ns(uint64_t cycles)
{
    return cycles * 1000.0 / tpm_tsc_per_us();
}

#endif /* clock.h */
