/*
 * tpm-replay: runs a pcap through libtpm, using the capture's timestamps as
 * the clock, and prints every satisfaction as a JSON line (report-json.h).
 * Also the offline analysis tool an operator points at a capture.
 *
 * Packets are fed in batches of up to 32 that never straddle an epoch; a
 * sweep step runs after every batch, bounded by --sweep-budget (0: each
 * sweep runs to completion, which makes the output independent of the
 * machine's speed).  At the end of the capture the clock is moved past the
 * end of every open interval so the last intervals are evaluated too.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "report-json.h"
#include "tpm.h"
#include "util.h"

struct replay {
    struct tpm *tpm;
    struct tpm_event **events;  /* Indexed by event id. */
    size_t n_events;
    uint64_t budget_ns;
    uint64_t n_reports;
};

static void
usage(void)
{
    printf("usage: tpm-replay [OPTIONS] PCAP\n"
           "Replays PCAP through the Trumpet packet monitor and prints one "
           "JSON line per\nsatisfied trigger.\n\n"
           "Events:\n"
           "  -e, --event 'NAME DEFINITION'  install an event "
           "(repeatable)\n"
           "  -f, --events FILE              install the events of FILE "
           "(one per line)\n"
           "Monitor knobs (defaults as in docs/operations.md):\n"
           "  --epoch TIME|auto       epoch length (10ms; auto: gcd of "
           "the intervals)\n"
           "  --sweep-budget TIME     bound of one sweep step (10us; 0: "
           "unbounded)\n"
           "  --flow-table-size N     flow entries, a power of two "
           "(65536)\n"
           "  --probe-limit N         linear-probing window (32)\n"
           "  --dos-threshold BYTES   match flows only past BYTES (0: "
           "off)\n"
           "  --history N             values kept per trigger (8)\n"
           "  --max-triggers N        trigger instances (131072)\n"
           "Output:\n"
           "  --stats                 print the monitor's counters as "
           "JSON on stderr\n"
           "  -h, --help              this help\n");
}

static void
die(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("tpm-replay: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(EXIT_FAILURE);
}

static uint64_t
parse_uint(const char *opt, const char *s, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-' || v > max) {
        die("%s: '%s' is not an integer in [0, %" PRIu64 "]", opt, s, max);
    }
    return v;
}

static void
add_event(struct replay *r, struct tpm_event *ev)
{
    for (size_t i = 0; i < r->n_events; i++) {
        if (!strcmp(r->events[i]->name, ev->name)) {
            die("event %s is defined twice", ev->name);
        }
    }
    r->events = xrealloc(r->events, (r->n_events + 1) * sizeof *r->events);
    r->events[r->n_events++] = ev;
}

static void
load_events_file(struct replay *r, const char *file)
{
    FILE *stream = fopen(file, "r");
    if (!stream) {
        die("%s: %s", file, strerror(errno));
    }

    char *line = NULL;
    size_t size = 0;
    int lineno = 0;
    while (getline(&line, &size, stream) > 0) {
        struct tpm_event *ev;
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        char *error = tpm_event_parse_line(line, &ev);
        if (error) {
            die("%s:%d: %s", file, lineno, error);
        }
        if (ev) {
            add_event(r, ev);
        }
    }
    free(line);
    fclose(stream);
}

static void
drain_reports(struct replay *r)
{
    struct tpm_report rep;
    while (tpm_pop_report(r->tpm, &rep)) {
        if (rep.type != TPM_REPORT_SATISFIED) {
            free(rep.error);
            continue;
        }
        struct json_object *obj
            = tpm_report_to_json(r->events[rep.event_id], &rep);
        puts(json_object_to_json_string_ext(
            obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(obj);
        r->n_reports++;
    }
}

static void
sweep(struct replay *r)
{
    tpm_sweep_step(r->tpm, r->budget_ns);
    drain_reports(r);
}

static void
print_stats(const struct tpm *tpm)
{
    struct tpm_stats s;
    tpm_get_stats(tpm, &s);
    struct json_object *o = json_object_new_object();
#define STAT(F) json_object_object_add(o, #F, json_object_new_int64(s.F))
    STAT(packets); STAT(bytes); STAT(non_ip); STAT(batches);
    STAT(lastflow_hits); STAT(flow_inserts); STAT(flow_reuses);
    STAT(flow_evictions); STAT(flows_freed); STAT(flows_retired);
    STAT(flows_live);
    STAT(matches); STAT(match_overflow); STAT(summary_overflow);
    STAT(dos_skipped_pkts); STAT(children_created); STAT(children_dropped);
    STAT(children_expired); STAT(chunks_exhausted); STAT(backfilled);
    STAT(sweeps_started); STAT(sweeps_done); STAT(sweeps_unfinished);
    STAT(sweeps_forced); STAT(sweep_steps); STAT(sweep_flows);
    STAT(sweep_stale_items); STAT(epochs); STAT(epochs_skipped);
    STAT(reports); STAT(reports_dropped); STAT(triggers); STAT(events);
    STAT(sweep_ns_p50); STAT(sweep_ns_p99); STAT(sweep_ns_max);
#undef STAT
    fprintf(stderr, "%s\n",
            json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
}

int
main(int argc, char *argv[])
{
    enum {
        OPT_EPOCH = 256, OPT_BUDGET, OPT_FT, OPT_PROBE, OPT_DOS, OPT_HIST,
        OPT_TRIG, OPT_STATS,
    };
    static const struct option options[] = {
        { "event", required_argument, NULL, 'e' },
        { "events", required_argument, NULL, 'f' },
        { "epoch", required_argument, NULL, OPT_EPOCH },
        { "sweep-budget", required_argument, NULL, OPT_BUDGET },
        { "flow-table-size", required_argument, NULL, OPT_FT },
        { "probe-limit", required_argument, NULL, OPT_PROBE },
        { "dos-threshold", required_argument, NULL, OPT_DOS },
        { "history", required_argument, NULL, OPT_HIST },
        { "max-triggers", required_argument, NULL, OPT_TRIG },
        { "stats", no_argument, NULL, OPT_STATS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct replay r = { .budget_ns = UINT64_MAX };
    struct tpm_params params;
    bool auto_epoch = false, stats = false;
    char *error;

    tpm_params_init(&params);
    r.budget_ns = params.sweep_budget_ns;
    for (;;) {
        int c = getopt_long(argc, argv, "e:f:h", options, NULL);
        if (c == -1) {
            break;
        }
        switch (c) {
        case 'e': {
            struct tpm_event *ev;
            error = tpm_event_parse_line(optarg, &ev);
            if (error) {
                die("%s", error);
            }
            if (!ev) {
                die("-e: empty event definition");
            }
            add_event(&r, ev);
            break;
        }
        case 'f':
            load_events_file(&r, optarg);
            break;
        case OPT_EPOCH:
            if (!strcmp(optarg, "auto")) {
                auto_epoch = true;
            } else if ((error = tpm_parse_time(optarg, &params.epoch_ns))) {
                die("--epoch: %s", error);
            }
            break;
        case OPT_BUDGET:
            if (!strcmp(optarg, "0")) {
                r.budget_ns = 0;
            } else if ((error = tpm_parse_time(optarg, &r.budget_ns))) {
                die("--sweep-budget: %s", error);
            }
            params.sweep_budget_ns = r.budget_ns;
            break;
        case OPT_FT:
            params.flow_table_size = parse_uint("--flow-table-size", optarg,
                                                UINT32_MAX);
            break;
        case OPT_PROBE:
            params.flow_probe_limit = parse_uint("--probe-limit", optarg,
                                                 UINT32_MAX);
            break;
        case OPT_DOS:
            params.dos_threshold = parse_uint("--dos-threshold", optarg,
                                              UINT32_MAX);
            break;
        case OPT_HIST:
            params.history_len = parse_uint("--history", optarg,
                                            UINT32_MAX);
            break;
        case OPT_TRIG:
            params.max_triggers = parse_uint("--max-triggers", optarg,
                                             UINT32_MAX);
            params.max_children = MIN(params.max_children,
                                      params.max_triggers);
            break;
        case OPT_STATS:
            stats = true;
            break;
        case 'h':
            usage();
            return 0;
        default:
            fprintf(stderr, "Try 'tpm-replay --help'.\n");
            return EXIT_FAILURE;
        }
    }
    if (optind != argc - 1) {
        die("exactly one PCAP file expected (try --help)");
    }
    if (!r.n_events) {
        die("no events given (use -e or -f)");
    }
    if (auto_epoch) {
        uint64_t g = 0;
        for (size_t i = 0; i < r.n_events; i++) {
            g = gcd_u64(g, r.events[i]->interval_ns);
        }
        params.epoch_ns = g;
    }
    params.max_events = MAX(params.max_events, r.n_events);

    r.tpm = tpm_create(&params, &error);
    if (!r.tpm) {
        die("%s", error);
    }
    for (size_t i = 0; i < r.n_events; i++) {
        /* The monitor takes ownership of a copy; 'r.events' keeps the
         * original for names and group masks. */
        struct tpm_event *copy = tpm_event_clone(r.events[i]);
        error = tpm_event_add(r.tpm, copy, (uint32_t) i);
        if (error) {
            tpm_event_destroy(copy);
            die("%s", error);
        }
    }

    char errbuf[PCAP_ERRBUF_SIZE];
    const char *file = argv[optind];
    pcap_t *pcap = pcap_open_offline_with_tstamp_precision(
        file, PCAP_TSTAMP_PRECISION_NANO, errbuf);
    if (!pcap) {
        die("%s", errbuf);
    }
    if (pcap_datalink(pcap) != DLT_EN10MB) {
        die("%s: link type %s, expected Ethernet", file,
            pcap_datalink_val_to_name(pcap_datalink(pcap)));
    }

    /* Frames are copied: libpcap reuses its buffer for the next packet. */
    static uint8_t bufs[TPM_BATCH_MAX][65536];
    struct tpm_frame batch[TPM_BATCH_MAX];
    int n = 0;
    uint64_t batch_epoch = UINT64_MAX, last_ns = 0;
    struct pcap_pkthdr *hdr;
    const u_char *data;
    int rc;

    while ((rc = pcap_next_ex(pcap, &hdr, &data)) == 1) {
        uint64_t ns = (uint64_t) hdr->ts.tv_sec * 1000000000ULL
                      + hdr->ts.tv_usec;
        uint64_t epoch = ns / params.epoch_ns;
        if (ns < last_ns) {
            ns = last_ns;       /* Out-of-order capture: hold the clock. */
            epoch = ns / params.epoch_ns;
        }
        if (n && (n == TPM_BATCH_MAX || epoch != batch_epoch)) {
            tpm_process_batch(r.tpm, batch, n);
            n = 0;
            sweep(&r);
        }
        if (!n) {
            tpm_advance(r.tpm, ns);
            batch_epoch = epoch;
        }
        uint32_t caplen = MIN(hdr->caplen, sizeof bufs[n]);
        memcpy(bufs[n], data, caplen);
        batch[n].data = bufs[n];
        batch[n].caplen = caplen;
        batch[n].wirelen = hdr->len;
        n++;
        last_ns = ns;
    }
    if (rc == -1) {
        die("%s: %s", file, pcap_geterr(pcap));
    }
    pcap_close(pcap);
    if (n) {
        tpm_process_batch(r.tpm, batch, n);
        sweep(&r);
    }

    /* Move past the end of every interval that saw packets and finish
     * the sweeps. */
    if (last_ns) {
        uint64_t end = 0;
        for (size_t i = 0; i < r.n_events; i++) {
            uint64_t iv = r.events[i]->interval_ns;
            end = MAX(end, (last_ns / iv + 1) * iv);
        }
        tpm_advance(r.tpm, end);
        while (tpm_sweep_step(r.tpm, 0)) {
            continue;
        }
        drain_reports(&r);
    }
    fflush(stdout);
    if (stats) {
        print_stats(r.tpm);
    }

    tpm_destroy(r.tpm);
    for (size_t i = 0; i < r.n_events; i++) {
        tpm_event_destroy(r.events[i]);
    }
    free(r.events);
    return 0;
}
