/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm-bench: in-memory benchmarks of libtpm (no NIC, no OVS).
 *
 *   tpm-bench workload   The Trumpet paper's section 7.2 workload: 4096
 *                        events, each packet matching 8 of them, 300 active
 *                        flows with exponential arrivals, burst size 1,
 *                        64-byte frames at 14.88 Mpps of simulated time, 10
 *                        ms epochs.  Measures phase 1 (tpm_process_batch())
 *                        in cycles per packet, the sweep per epoch, and the
 *                        share of a core both need to keep up.
 *   tpm-bench match      Cost of matching a new flow against the trigger
 *                        index (tpm/trig-index.h), which should not depend
 *                        on the number of triggers and should grow
 *                        linearly with the number of patterns.
 *   tpm-bench table      The SOSR'18 comparison: find-or-insert a 5-tuple
 *                        and update a 64-byte counter block in the flow
 *                        table (linear probing) and in a bucketized cuckoo
 *                        table (tpm/bench/cuckoo.h).
 *
 * Every subcommand prints a human-readable table; with --json it prints
 * one JSON object per result line on stdout and the table on stderr.
 * Timings use the TSC (lib/clock.h) and report the median over --runs runs
 * with different seeds.  --instr runs a fixed amount of work with no
 * timing, for instruction counts under callgrind (docs/benchmarks.md).
 *
 * One file per subcommand: bench-workload.c, bench-match.c, bench-table.c;
 * what they share is in bench-common.[ch]; this file holds the dispatcher.
 *
 * The benchmark runs on one thread.  It is meant to be run on an otherwise
 * idle core; on a shared machine, compare medians of side-by-side runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-common.h"
#include "cli.h"
#include "util.h"

static void
usage(void)
{
    printf("usage: tpm-bench COMMAND [OPTIONS]\n"
           "In-memory benchmarks of libtpm (docs/benchmarks.md).\n\n"
           "Commands:\n"
           "  workload   the Trumpet section 7.2 workload: phase-1 "
           "cycles/packet,\n"
           "             sweep time per epoch, utilisation at 14.88 Mpps\n"
           "  match      trigger-index matching cost vs triggers and "
           "patterns\n"
           "  table      flow table (linear probing) vs cuckoo hash, "
           "SOSR'18 style\n\n"
           "Common options: --runs N (5), --seed N (1), --json, --instr, "
           "--help.\n"
           "Timings are TSC cycles (rate printed) and medians over runs; "
           "with --json,\n"
           "one JSON object per result line goes to stdout and the table "
           "to stderr.\n\n");
    wl_usage();
    printf("\n");
    match_usage();
    printf("\n");
    table_usage();
}

int
main(int argc, char *argv[])
{
    bench_tout = stdout;
    cli_init("tpm-bench", EXIT_FAILURE);
    tpm_log_set_hook(bench_log_hook);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")
        || !strcmp(argv[1], "help")) {
        usage();
        return argc < 2 ? EXIT_FAILURE : 0;
    }

    const char *cmd = argv[1];
    if (!strcmp(cmd, "workload")) {
        return cmd_workload(argc - 1, argv + 1);
    } else if (!strcmp(cmd, "match")) {
        return cmd_match(argc - 1, argv + 1);
    } else if (!strcmp(cmd, "table")) {
        return cmd_table(argc - 1, argv + 1);
    }
    cli_die("unknown command '%s' (workload, match, table; try --help)", cmd);
}
