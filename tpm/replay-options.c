/* SPDX-License-Identifier: Apache-2.0 */
/* tpm-replay's command line: see replay-options.h. */
#include "replay-options.h"
#include "tenants.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "event.h"
#include "tproto.h"

/* Why tpm-replay refuses per-port events (tpm_event_refuse_ports()). */
#define REPLAY_NO_PORTS "a capture replayed has no interfaces"
#include "util.h"

#define NS_PER_S UINT64_C(1000000000)
#define NS_PER_MS UINT64_C(1000000)

/* Default of --max-table-memory: enough for the tables of a few million
 * flows under a handful of events (about 1 KB per flow and event at
 * most), and a clear refusal, naming what the capture needs, beyond. */
#define TABLE_MEMORY_DEFAULT (UINT64_C(4) << 30)

enum {
    OPT_EPOCH = 256, OPT_BUDGET, OPT_FT, OPT_PROBE, OPT_DOS,
    OPT_NO_PRECHECK, OPT_DOS_TABLE, OPT_DOS_WINDOW, OPT_NO_DOS_CLEAR,
    OPT_HIST,
    OPT_RETIRE,
    OPT_TRIG, OPT_STATS, OPT_CONTROLLER, OPT_HOST_ID, OPT_PREFIX,
    OPT_REALTIME, OPT_LINGER, OPT_LOOP, OPT_CONNECT_TIMEOUT, OPT_SETTLE,
    OPT_REQUIRE, OPT_START_AT, OPT_TCP_POOL, OPT_BURST_GAP,
    OPT_TEM_KEY, OPT_HOST_KEY_FILE, OPT_INSECURE, OPT_CHUNKS,
    OPT_TABLE_MEMORY, OPT_OUTAGE_BUFFER, OPT_TUNNEL_PORTS,
    OPT_TENANT_SLOTS,
};

static const struct option replay_long_options[] = {
    { "event", required_argument, NULL, 'e' },
    { "events", required_argument, NULL, 'f' },
    { "epoch", required_argument, NULL, OPT_EPOCH },
    { "sweep-budget", required_argument, NULL, OPT_BUDGET },
    { "flow-table-size", required_argument, NULL, OPT_FT },
    { "probe-limit", required_argument, NULL, OPT_PROBE },
    { "dos-threshold", required_argument, NULL, OPT_DOS },
    { "no-dos-precheck", no_argument, NULL, OPT_NO_PRECHECK },
    { "dos-table-size", required_argument, NULL, OPT_DOS_TABLE },
    { "dos-window", required_argument, NULL, OPT_DOS_WINDOW },
    { "no-dos-clear", no_argument, NULL, OPT_NO_DOS_CLEAR },
    { "history", required_argument, NULL, OPT_HIST },
    { "retire-epochs", required_argument, NULL, OPT_RETIRE },
    { "max-triggers", required_argument, NULL, OPT_TRIG },
    { "max-chunks", required_argument, NULL, OPT_CHUNKS },
    { "max-table-memory", required_argument, NULL, OPT_TABLE_MEMORY },
    { "tcp-state-pool", required_argument, NULL, OPT_TCP_POOL },
    { "burst-gap", required_argument, NULL, OPT_BURST_GAP },
    { "tunnel-ports", required_argument, NULL, OPT_TUNNEL_PORTS },
    { "tenant-slots", required_argument, NULL, OPT_TENANT_SLOTS },
    { "stats", no_argument, NULL, OPT_STATS },
    { "controller", required_argument, NULL, OPT_CONTROLLER },
    { "host-id", required_argument, NULL, OPT_HOST_ID },
    { "tem-key", required_argument, NULL, OPT_TEM_KEY },
    { "host-key-file", required_argument, NULL, OPT_HOST_KEY_FILE },
    { "insecure-plaintext", no_argument, NULL, OPT_INSECURE },
    { "prefix", required_argument, NULL, OPT_PREFIX },
    { "realtime", no_argument, NULL, OPT_REALTIME },
    { "start-at", required_argument, NULL, OPT_START_AT },
    { "linger", required_argument, NULL, OPT_LINGER },
    { "loop", required_argument, NULL, OPT_LOOP },
    { "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
    { "settle", required_argument, NULL, OPT_SETTLE },
    { "require-controller", no_argument, NULL, OPT_REQUIRE },
    { "outage-buffer", required_argument, NULL, OPT_OUTAGE_BUFFER },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* What the parser keeps beside the options until the checks. */
struct replay_parse {
    bool auto_epoch;            /* --epoch auto. */
    bool budget_set;            /* --sweep-budget given. */
    bool linger_set;            /* --linger given. */
    uint64_t budget_ns;
    const char *controller_only; /* The last option given that needs
                                  * --controller, or NULL. */
};

static void
replay_options_usage__(void)
{
    printf("usage: tpm-replay [OPTIONS] PCAP\n"
           "Replays PCAP through the Trumpet packet monitor and prints one "
           "JSON line per\nsatisfied trigger.\n\n"
           "Events:\n"
           "  -e, --event 'NAME DEFINITION'  install an event "
           "(repeatable)\n"
           "  -f, --events FILE              install the events of FILE "
           "(one per line)\n"
           "Monitor knobs (defaults as in docs/operations.md).  Reading a "
           "file (not a pipe,\nnot --realtime), the tables marked * that "
           "no option sizes are sized from the\ncapture, read once "
           "before the replay; otherwise they keep the default shown:\n"
           "  --epoch TIME|auto       epoch length (10ms; auto: gcd of "
           "the intervals)\n"
           "  --sweep-budget TIME     bound of one sweep step (0: "
           "unbounded, every sweep\n"
           "                          complete; with --realtime 10us)\n"
           "  --flow-table-size N   * flow entries, a power of two "
           "(65536)\n"
           "  --probe-limit N         linear-probing window (32)\n"
           "  --dos-threshold BYTES   match flows only past BYTES (0: "
           "off)\n"
           "  --no-dos-precheck       count flows that no trigger can "
           "match\n"
           "                          in the filter table too\n"
           "  --dos-table-size N      filter-table counters, a power of "
           "two\n"
           "                          (65536)\n"
           "  --dos-window EPOCHS     filter-table counts restart every "
           "EPOCHS (10)\n"
           "  --no-dos-clear          a flow passing the threshold leaves "
           "its\n"
           "                          counter's bytes to the next flows\n"
           "  --history N             values kept per trigger (8)\n"
           "  --retire-epochs N       epochs without a packet before a flow "
           "leaves its\n"
           "                          triggers (16)\n"
           "  --max-triggers N      * trigger instances, one per event "
           "and group (131072)\n"
           "  --max-chunks N        * 64-flow list chunks of the "
           "instances (16384)\n"
           "  --tcp-state-pool N    * connections with per-flow TCP state "
           "(16384)\n"
           "  --max-table-memory SIZE  most memory for the tables sized "
           "from the capture;\n"
           "                          a capture that needs more is "
           "refused (4GiB)\n"
           "  --tunnel-ports LIST     UDP ports whose VXLAN or Geneve "
           "packets are counted\n"
           "                          under their inner flow and VNI: "
           "vxlan[:PORT],\n"
           "                          geneve[:PORT], ... (none)\n"
           "  --tenant-slots N        VNIs told apart (4096, at most "
           "65535)\n"
           "  --burst-gap TIME        is_burst: largest gap to the flow's "
           "previous packet\n"
           "                          (20us)\n"
           "Timing:\n"
           "  --realtime              pace packets by their timestamps on "
           "the wall clock,\n"
           "                          the first packet being now\n"
           "  --start-at NS           with --realtime: the first packet "
           "not before wall-clock\n"
           "                          NS (ns since 1970), e.g. to start "
           "several hosts together\n"
           "  --loop N                replay the capture N times, each "
           "pass after the\n"
           "                          previous one in time (1)\n"
           "Controller mode (a host of a TEM; events from -e/-f stay "
           "local):\n"
           "  --controller ENDPOINT   the TEM: tcp:HOST:PORT, unix:PATH, "
           "tcp://HOST:PORT\n"
           "                          or ipc://PATH; repeated: every TEM "
           "of a cluster\n"
           "                          (an agent, a session each)\n"
           "  --host-id ID            this host's id (the host name)\n"
           "  --tem-key KEY|FILE      the TEM's CURVE public key (Z85, or "
           "a key file);\n"
           "                          one for all --controller, or one "
           "each in order\n"
           "  --host-key-file FILE    this host's key pair (tem-ctl "
           "keygen), in the TEM's\n"
           "                          allow-list for --host-id\n"
           "  --insecure-plaintext    no keys: anyone can claim this "
           "host's id (tests)\n"
           "  --prefix PREFIXES       addresses this host serves, e.g. "
           "10.99.0.0/24,fd00::/8\n"
           "                          (repeatable; none by default)\n"
           "  --connect-timeout TIME  wait this long for the TEM's session "
           "and first\n"
           "                          installs before the capture (5s)\n"
           "  --settle TIME           the first installs are done when no "
           "command came\n"
           "                          for this long (200ms)\n"
           "  --require-controller    fail (exit 1) if the TEM is not "
           "reached within\n"
           "                          --connect-timeout (default: replay "
           "anyway, retrying)\n"
           "  --linger TIME           after the capture, keep answering "
           "the TEM this long (1s),\n"
           "                          then up to 1s more while reports "
           "await its confirmation\n"
           "  --outage-buffer N       satisfactions kept for the TEM over "
           "an outage (131072)\n"
           "Output:\n"
           "  --stats                 print the monitor's counters and "
           "table sizes as JSON\n"
           "                          on stderr\n"
           "  -h, --help              this help\n"
           "Exit status: 0 complete; 1 usage or input error; 3 complete "
           "but with loss\n"
           "(reports dropped, sweeps unfinished, flows or matches not "
           "kept, partial\n"
           "values: named on stderr, with the option that raises the "
           "table that ran out).\n");
}

static void
replay_options_add_event__(struct replay_options *o, struct tpm_event *ev)
{
    for (size_t i = 0; i < o->n_events; i++) {
        if (!strcmp(o->events[i]->name, ev->name)) {
            cli_die("event %s is defined twice", ev->name);
        }
    }
    o->events = xrealloc(o->events, (o->n_events + 1) * sizeof *o->events);
    o->events[o->n_events++] = ev;
}

static void
replay_options_load_events__(struct replay_options *o, const char *file)
{
    FILE *stream = fopen(file, "r");
    if (!stream) {
        cli_die("%s: %s", file, strerror(errno));
    }

    char *line = NULL;
    size_t size = 0;
    int lineno = 0;
    while (getline(&line, &size, stream) > 0) {
        struct tpm_event *ev;
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        char *error = tpm_event_parse_line(line, &ev);
        if (!error && ev) {
            error = tpm_event_refuse_ports(ev, REPLAY_NO_PORTS);
        }
        if (error) {
            cli_die("%s:%d: %s", file, lineno, error);
        }
        if (ev) {
            replay_options_add_event__(o, ev);
        }
    }
    free(line);
    fclose(stream);
}


/* Parses option 'c' with argument 'arg' if it is one of the monitor's
 * knobs, into 'o' and 'ps'.  Returns false if it is not one. */
static bool
replay_options_monitor__(struct replay_options *o, struct replay_parse *ps,
                         int c, const char *name, const char *arg)
{
    struct tpm_params *params = &o->params;
    struct table_options *set = &o->tables;
    char *error;

    switch (c) {
    case OPT_EPOCH:
        if (!strcmp(arg, "auto")) {
            ps->auto_epoch = true;
        } else if ((error = tpm_parse_time(arg, &params->epoch_ns))) {
            cli_die("--epoch: %s", error);
        }
        break;
    case OPT_BUDGET:
        ps->budget_ns = cli_time(name, arg, true);
        ps->budget_set = true;
        break;
    case OPT_FT:
        params->flow_table_size = cli_uint(name, arg, 0, UINT32_MAX);
        set->flow_table = true;
        break;
    case OPT_PROBE:
        params->flow_probe_limit = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_NO_PRECHECK:
        params->dos_precheck = 0;
        break;
    case OPT_DOS_TABLE:
        params->dos_table_size = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_DOS_WINDOW:
        params->dos_window = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_NO_DOS_CLEAR:
        params->dos_clear_on_pass = 0;
        break;
    case OPT_DOS:
        params->dos_threshold = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_HIST:
        params->history_len = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_RETIRE:
        params->retire_epochs = cli_uint(name, arg, 0, UINT32_MAX);
        break;
    case OPT_TRIG:
        params->max_triggers = cli_uint(name, arg, 0, UINT32_MAX);
        set->triggers = true;
        break;
    case OPT_CHUNKS:
        params->max_chunks = cli_uint(name, arg, 0, UINT32_MAX);
        set->chunks = true;
        break;
    case OPT_TABLE_MEMORY:
        set->memory_limit = cli_bytes(name, arg, 1);
        break;
    case OPT_TCP_POOL:
        params->tcp_state_pool = cli_uint(name, arg, 0, UINT32_MAX);
        set->tcp_state_pool = true;
        break;
    case OPT_BURST_GAP:
        params->burst_gap_ns = cli_time(name, arg, true);
        break;
    case OPT_TUNNEL_PORTS:
        if ((error = tpm_tunnel_ports_parse(arg, &o->tunnel_ports))) {
            cli_die("%s: %s", name, error);
        }
        break;
    case OPT_TENANT_SLOTS:
        params->tenant_slots = cli_uint(name, arg, 1, TPM_TENANT_SLOTS_MAX);
        break;
    default:
        return false;
    }
    return true;
}

/* Parses option 'c' with argument 'arg' if it is one of controller mode's,
 * into 'o' and 'ps'.  Returns false if it is not one. */
static bool
replay_options_controller__(struct replay_options *o,
                            struct replay_parse *ps, int c,
                            const char *name, const char *arg)
{
    char *error;

    switch (c) {
    case OPT_CONTROLLER:
        if (!o->controller) {
            o->controller = arg;
        }
        o->controllers = xrealloc(o->controllers, (o->n_controllers + 1)
                                                  * sizeof *o->controllers);
        o->controllers[o->n_controllers++] = arg;
        return true;
    case OPT_HOST_ID:
        free(o->host_id);
        o->host_id = xstrdup(arg);
        ps->controller_only = "--host-id";
        return true;
    case OPT_TEM_KEY:
        o->tem_keys = xrealloc(o->tem_keys, (o->n_tem_keys + 1)
                                            * sizeof *o->tem_keys);
        o->tem_keys[o->n_tem_keys++] = arg;
        ps->controller_only = "--tem-key";
        return true;
    case OPT_HOST_KEY_FILE:
        o->host_key_file = arg;
        ps->controller_only = "--host-key-file";
        return true;
    case OPT_INSECURE:
        o->insecure = true;
        ps->controller_only = "--insecure-plaintext";
        return true;
    case OPT_PREFIX: {
        struct tpm_prefix *more;
        size_t n_more;
        error = tpm_prefix_parse_list(arg, &more, &n_more);
        if (error) {
            cli_die("--prefix: %s", error);
        }
        o->prefixes = xrealloc(o->prefixes, (o->n_prefixes + n_more)
                                            * sizeof *o->prefixes);
        memcpy(o->prefixes + o->n_prefixes, more, n_more * sizeof *more);
        o->n_prefixes += n_more;
        free(more);
        ps->controller_only = "--prefix";
        return true;
    }
    case OPT_LINGER:
        o->linger_ns = cli_time(name, arg, true);
        ps->linger_set = true;
        ps->controller_only = "--linger";
        return true;
    case OPT_CONNECT_TIMEOUT:
        o->connect_timeout_ns = cli_time(name, arg, true);
        ps->controller_only = "--connect-timeout";
        return true;
    case OPT_SETTLE:
        o->settle_ns = cli_time(name, arg, true);
        ps->controller_only = "--settle";
        return true;
    case OPT_REQUIRE:
        o->require = true;
        ps->controller_only = "--require-controller";
        return true;
    case OPT_OUTAGE_BUFFER:
        o->outage_buffer = cli_uint(name, arg, 1, 1u << 24);
        ps->controller_only = "--outage-buffer";
        return true;
    default:
        return false;
    }
}

/* Checks the options read into 'o' and 'ps' against each other and
 * applies the defaults that depend on others.  'argc' and 'argv' are the
 * command line, with optind at the first operand. */
static void
replay_options_check__(struct replay_options *o,
                       const struct replay_parse *ps, int argc,
                       char *argv[])
{
    struct tpm_params *params = &o->params;

    if (optind != argc - 1) {
        cli_die("exactly one PCAP file expected (try --help)");
    }
    o->pcap = argv[optind];
    if (o->start_ns && !o->realtime) {
        cli_die("--start-at needs --realtime");
    }
    /* Exact from a file; as a switch would run it at the wire's pace. */
    params->sweep_budget_ns = (ps->budget_set ? ps->budget_ns
                               : o->realtime ? params->sweep_budget_ns
                               : 0);
    /* Offline, a full report ring waits for us to drain it. */
    params->sweep_waits_for_reports = !o->realtime;
    if (!o->controller && ps->controller_only) {
        cli_die("%s needs --controller", ps->controller_only);
    }
    if (o->n_tem_keys > 1 && o->n_tem_keys != o->n_controllers) {
        cli_die("--tem-key given %zu times for %zu --controller: give one "
                "for all, or one for each (in the same order)",
                o->n_tem_keys, o->n_controllers);
    }
    if (!o->n_events && !o->controller) {
        cli_die("no events given (use -e or -f, or --controller)");
    }
    if (!ps->linger_set && !o->controller) {
        o->linger_ns = 0;
    }
    if (ps->auto_epoch) {
        if (!o->n_events) {
            cli_die("--epoch auto needs local events (-e or -f) to take the "
                "intervals from");
        }
        uint64_t g = 0;
        for (size_t i = 0; i < o->n_events; i++) {
            g = gcd_u64(g, o->events[i]->interval_ns);
        }
        params->epoch_ns = g;
    }
    params->max_events = MAX(params->max_events, o->n_events);
}

/* Reads tpm-replay's command line 'argc', 'argv' into 'o' (see
 * replay-options.h); exits on an error or after --help. */
void
replay_options_parse(int argc, char *argv[], struct replay_options *o)
{
    struct replay_parse ps = { .auto_epoch = false };
    struct cli_parser parser;
    char *error;

    memset(o, 0, sizeof *o);
    tpm_params_init(&o->params);
    o->tables.memory_limit = TABLE_MEMORY_DEFAULT;
    o->loops = 1;
    o->linger_ns = 1 * NS_PER_S;
    o->connect_timeout_ns = 5 * NS_PER_S;
    o->settle_ns = 200 * NS_PER_MS;

    cli_parser_init(&parser, argc, argv, "e:f:h", replay_long_options);
    for (;;) {
        int c = cli_parser_next(&parser);
        if (c == -1) {
            break;
        }
        if (replay_options_monitor__(o, &ps, c, parser.name, optarg)
            || replay_options_controller__(o, &ps, c, parser.name,
                                           optarg)) {
            continue;
        }
        switch (c) {
        case 'e': {
            struct tpm_event *ev;
            error = tpm_event_parse_line(optarg, &ev);
            if (!error && ev) {
                error = tpm_event_refuse_ports(ev, REPLAY_NO_PORTS);
            }
            if (error) {
                cli_die("%s", error);
            }
            if (!ev) {
                cli_die("-e: empty event definition");
            }
            replay_options_add_event__(o, ev);
            break;
        }
        case 'f':
            replay_options_load_events__(o, optarg);
            break;
        case OPT_STATS:
            o->stats = true;
            break;
        case OPT_REALTIME:
            o->realtime = true;
            break;
        case OPT_START_AT:
            o->start_ns = cli_uint(parser.name, optarg, 0, UINT64_MAX);
            break;
        case OPT_LOOP:
            o->loops = cli_uint(parser.name, optarg, 1, UINT32_MAX);
            break;
        case 'h':
            replay_options_usage__();
            exit(EXIT_SUCCESS);
        default:
            fprintf(stderr, "Try 'tpm-replay --help'.\n");
            exit(EXIT_FAILURE);
        }
    }
    replay_options_check__(o, &ps, argc, argv);
}

void
replay_options_destroy(struct replay_options *o)
{
    if (o) {
        for (size_t i = 0; i < o->n_events; i++) {
            tpm_event_destroy(o->events[i]);
        }
        free(o->events);
        free(o->prefixes);
        free(o->host_id);
        free(o->controllers);
        free(o->tem_keys);
    }
}
