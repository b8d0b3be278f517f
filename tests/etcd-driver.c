/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd-driver: runs the TEM's etcd client (tem/tem-etcd.h) against an
 * etcd for tests/tem-etcd.sh, with the loop a TEM would have: one thread
 * that polls the client's descriptor with zmq_poll() and never waits on
 * etcd.
 *
 *   etcd-driver [OPTIONS] put KEY VALUE
 *   etcd-driver [OPTIONS] get [--prefix] KEY     KEY=VALUE lines, REV N
 *   etcd-driver [OPTIONS] del [--prefix] KEY
 *   etcd-driver [OPTIONS] member ID     holds /trumpet/members/ID on its
 *                                       lease; SIGUSR1 stops renewing it
 *   etcd-driver [OPTIONS] watch [--prefix] KEY REV   PUT/DEL lines
 *   etcd-driver [OPTIONS] elect ID      LEADER/FOLLOWER lines
 *   etcd-driver [OPTIONS] alloc N       N ids from /trumpet/next-id
 *   etcd-driver [OPTIONS] stress SECONDS   requests, a watch and a lease
 *                                       against an etcd that fails: the
 *                                       loop's longest iteration
 *
 * OPTIONS: --endpoints=URLS --ttl=S --connect-timeout=MS
 * --request-timeout=MS --attempts=N --backoff-min=MS --backoff-max=MS.
 * Lines go to stdout, flushed; errors and the client's counters at exit
 * to stderr.
 * Exit status: 0, 1 for an error result, 2 for bad usage, 3 for a
 * compacted watch.  SIGTERM ends the long-running commands (status 0).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "tem-etcd.h"
#include "util.h"

static volatile sig_atomic_t driver_stop;
static volatile sig_atomic_t driver_usr1;

static struct tem_etcd *driver_etcd;
static const char *driver_cmd;
static const char *driver_id;
static char *driver_key;
static int driver_status;
static bool driver_done;

/* elect */
static bool driver_watching;
static bool driver_leader;

/* alloc, stress */
static long driver_n, driver_submitted, driver_answered;
static uint64_t driver_errors;

static void
driver_signal(int sig)
{
    if (sig == SIGUSR1) {
        driver_usr1 = 1;
    } else {
        driver_stop = 1;
    }
}

static uint64_t
driver_now_ms(void)
{
    return tpm_clock_mono_ns() / 1000000;
}

static void
driver_check(int error, const char *what)
{
    if (error) {
        fprintf(stderr, "etcd-driver: %s: %s\n", what, strerror(error));
        exit(1);
    }
}

static void
driver_campaign(void)
{
    driver_check(tem_etcd_put_if_absent(driver_etcd, TEM_ETCD_LEADER,
                                        driver_id, strlen(driver_id),
                                        TEM_ETCD_WITH_LEASE, 2),
                 "campaign");
}

static void
driver_result(struct tem_etcd_result *r)
{
    const char *cmd = driver_cmd;

    if (r->type == TEM_ETCD_ERROR) {
        driver_errors++;
        if (strcmp(cmd, "stress")) {
            fprintf(stderr, "etcd-driver: error (token %"PRIu64"): %s: %s\n",
                    r->token, strerror(r->error), r->message);
        }
        if (!strcmp(cmd, "stress")) {
            driver_answered++;
        } else if (!strcmp(cmd, "elect") && r->token == 2) {
            driver_campaign();          /* Try again. */
        } else if (!strcmp(cmd, "alloc") || strcmp(cmd, "elect")) {
            driver_status = 1;
            driver_done = true;
        }
        return;
    }
    if (r->type == TEM_ETCD_WATCH_DOWN) {
        fprintf(stderr, "etcd-driver: watch down: %s\n", r->message);
        return;
    }
    if (r->type == TEM_ETCD_WATCH_COMPACTED) {
        printf("COMPACTED %"PRId64"\n", r->compact_revision);
        driver_status = 3;
        driver_done = true;
        return;
    }
    if (r->type == TEM_ETCD_LEASE_LOST) {
        printf("LEASE-LOST %"PRId64"\n", r->lease);
        if (driver_leader) {
            printf("NOT-LEADER\n");
            driver_leader = false;
        }
        return;
    }
    if (r->type == TEM_ETCD_LEASE_GRANTED) {
        if (!strcmp(cmd, "member")) {
            driver_check(tem_etcd_put(driver_etcd, driver_key, driver_id,
                                      strlen(driver_id),
                                      TEM_ETCD_WITH_LEASE, 1), "put");
        } else if (!strcmp(cmd, "elect")) {
            driver_campaign();
        }
        return;
    }
    if (r->type == TEM_ETCD_WATCH_EVENTS) {
        for (size_t i = 0; i < r->n_kvs; i++) {
            const struct tem_etcd_kv *kv = &r->kvs[i];
            if (!strcmp(cmd, "elect")) {
                if (kv->deleted) {
                    driver_campaign();
                }
            } else if (kv->deleted) {
                printf("DEL %s %"PRId64"\n", kv->key, kv->mod_revision);
            } else {
                printf("PUT %s %s %"PRId64"\n", kv->key, kv->value,
                       kv->mod_revision);
            }
        }
        return;
    }

    /* TEM_ETCD_DONE. */
    if (!strcmp(cmd, "put") || !strcmp(cmd, "del")) {
        printf("OK %"PRId64" %"PRId64"\n", r->revision, r->deleted);
        driver_done = true;
    } else if (!strcmp(cmd, "get")) {
        for (size_t i = 0; i < r->n_kvs; i++) {
            printf("%s=%s\n", r->kvs[i].key, r->kvs[i].value);
        }
        printf("REV %"PRId64"\n", r->revision);
        driver_done = true;
    } else if (!strcmp(cmd, "member") && r->token == 1) {
        printf("MEMBER %s %"PRId64"\n", driver_id,
               tem_etcd_lease_id(driver_etcd));
    } else if (!strcmp(cmd, "member") && r->token == 3) {
        printf("STOPPED\n");
    } else if (!strcmp(cmd, "watch") && r->token == 1) {
        printf("WATCHING\n");
    } else if (!strcmp(cmd, "elect") && r->token == 2) {
        if (r->succeeded) {
            if (!driver_leader) {
                printf("LEADER %s\n", driver_id);
            }
            driver_leader = true;
        } else {
            printf("FOLLOWER %s\n", r->n_kvs ? r->kvs[0].value : "?");
            driver_leader = false;
            if (!driver_watching) {
                driver_watching = true;
                driver_check(tem_etcd_watch(driver_etcd, TEM_ETCD_LEADER,
                                            false, r->revision + 1, 3),
                             "watch");
            }
        }
    } else if (!strcmp(cmd, "alloc")) {
        printf("ID %"PRId64"\n", r->id);
        if (++driver_answered == driver_n) {
            driver_done = true;
        }
    } else if (!strcmp(cmd, "stress")) {
        driver_answered++;
    }
}

static void
driver_usage(void)
{
    fprintf(stderr, "usage: etcd-driver [--endpoints=URLS] [--ttl=S] "
            "[--connect-timeout=MS] [--request-timeout=MS] [--attempts=N] "
            "[--backoff-min=MS] [--backoff-max=MS] "
            "put|get|del|member|watch|elect|alloc|stress ARGS...\n");
    exit(2);
}

static uint32_t
driver_u32(const char *s)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || !*s || v > UINT32_MAX) {
        driver_usage();
    }
    return v;
}

int
main(int argc, char *argv[])
{
    struct tem_etcd_config cfg;
    int i;

    tem_etcd_config_init(&cfg);
    for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *a = argv[i];
        const char *v = strchr(a, '=');
        if (!v) {
            driver_usage();
        }
        v++;
        if (!strncmp(a, "--endpoints=", 12)) {
            cfg.endpoints = v;
        } else if (!strncmp(a, "--ttl=", 6)) {
            cfg.lease_ttl_s = driver_u32(v);
        } else if (!strncmp(a, "--connect-timeout=", 18)) {
            cfg.connect_timeout_ms = driver_u32(v);
        } else if (!strncmp(a, "--request-timeout=", 18)) {
            cfg.request_timeout_ms = driver_u32(v);
        } else if (!strncmp(a, "--attempts=", 11)) {
            cfg.max_attempts = driver_u32(v);
        } else if (!strncmp(a, "--backoff-min=", 14)) {
            cfg.backoff_min_ms = driver_u32(v);
        } else if (!strncmp(a, "--backoff-max=", 14)) {
            cfg.backoff_max_ms = driver_u32(v);
        } else {
            driver_usage();
        }
    }
    if (i >= argc) {
        driver_usage();
    }
    driver_cmd = argv[i++];
    bool prefix = false;
    if (i < argc && !strcmp(argv[i], "--prefix")) {
        prefix = true;
        i++;
    }
    char **args = &argv[i];
    int n_args = argc - i;

    char *error;
    driver_etcd = tem_etcd_create(&cfg, &error);
    if (!driver_etcd) {
        fprintf(stderr, "etcd-driver: %s\n", error);
        free(error);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = driver_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    uint64_t end_ms = UINT64_MAX, next_ms = 0;
    const char *c = driver_cmd;
    if (!strcmp(c, "put") && n_args == 2) {
        driver_check(tem_etcd_put(driver_etcd, args[0], args[1],
                                  strlen(args[1]), 0, 1), "put");
    } else if (!strcmp(c, "get") && n_args == 1) {
        driver_check(tem_etcd_get(driver_etcd, args[0], prefix, 1), "get");
    } else if (!strcmp(c, "del") && n_args == 1) {
        driver_check(tem_etcd_delete(driver_etcd, args[0], prefix, 1),
                     "del");
    } else if (!strcmp(c, "member") && n_args == 1) {
        driver_id = args[0];
        driver_key = xasprintf("%s%s", TEM_ETCD_MEMBERS, driver_id);
        driver_check(tem_etcd_lease_start(driver_etcd), "lease");
    } else if (!strcmp(c, "watch") && n_args == 2) {
        driver_check(tem_etcd_watch(driver_etcd, args[0], prefix,
                                    driver_u32(args[1]), 1), "watch");
    } else if (!strcmp(c, "elect") && n_args == 1) {
        driver_id = args[0];
        driver_check(tem_etcd_lease_start(driver_etcd), "lease");
    } else if (!strcmp(c, "alloc") && n_args == 1) {
        driver_n = driver_u32(args[0]);
        driver_done = !driver_n;
    } else if (!strcmp(c, "stress") && n_args == 1) {
        end_ms = driver_now_ms() + driver_u32(args[0]) * 1000;
        driver_check(tem_etcd_lease_start(driver_etcd), "lease");
        driver_check(tem_etcd_watch(driver_etcd, "/trumpet/", true, 0, 9),
                     "watch");
    } else {
        driver_usage();
    }

    zmq_pollitem_t item = { .fd = tem_etcd_fd(driver_etcd),
                            .events = ZMQ_POLLIN };
    uint64_t max_gap = 0, iterations = 0;
    while (!driver_done && !driver_stop) {
        uint64_t now = driver_now_ms();
        if (now >= end_ms) {
            break;
        }
        iterations++;

        if (driver_usr1) {
            driver_usr1 = 0;
            driver_check(tem_etcd_lease_stop(driver_etcd, false, 3),
                         "lease stop");
        }
        /* alloc: 4 requests in flight; stress: one every 20 ms. */
        if (!strcmp(c, "alloc")) {
            while (driver_submitted < driver_n
                   && driver_submitted - driver_answered < 4) {
                driver_check(tem_etcd_next_id(driver_etcd, TEM_ETCD_NEXT_ID,
                                              1), "alloc");
                driver_submitted++;
            }
        } else if (!strcmp(c, "stress") && now >= next_ms) {
            next_ms = now + 20;
            if (!tem_etcd_put(driver_etcd, "/trumpet/stress", "x", 1, 0,
                              1)) {
                driver_submitted++;
            }
        }

        int rc = zmq_poll(&item, 1, 10);
        if (rc < 0 && errno != EINTR) {
            fprintf(stderr, "etcd-driver: zmq_poll: %s\n",
                    zmq_strerror(errno));
            return 1;
        }
        struct tem_etcd_result *r;
        while ((r = tem_etcd_recv(driver_etcd))) {
            driver_result(r);
            tem_etcd_result_free(r);
        }
        /* An iteration: at most the poll's 10 ms and the results. */
        max_gap = MAX(max_gap, driver_now_ms() - now);
    }

    struct tem_etcd_stats s;
    tem_etcd_stats(driver_etcd, &s);
    if (!strcmp(c, "stress")) {
        printf("STRESS iterations %"PRIu64" max_gap_ms %"PRIu64
               " submitted %ld answered %ld errors %"PRIu64
               " transport_errors %"PRIu64" bad_responses %"PRIu64
               " retries %"PRIu64" refused %"PRIu64" leases_granted %"PRIu64
               "\n", iterations, max_gap, driver_submitted, driver_answered,
               driver_errors, s.transport_errors, s.bad_responses,
               s.retries, s.refused, s.leases_granted);
    }
    fprintf(stderr, "etcd-driver: requests %"PRIu64" transport_errors %"PRIu64
            " bad_responses %"PRIu64" etcd_errors %"PRIu64" retries %"PRIu64
            " failed %"PRIu64" switches %"PRIu64" refused %"PRIu64
            " dropped %"PRIu64" keepalives %"PRIu64" granted %"PRIu64
            " lost %"PRIu64" reconnects %"PRIu64" duplicates %"PRIu64
            " compacted %"PRIu64"\n", s.requests, s.transport_errors,
            s.bad_responses, s.etcd_errors, s.retries, s.failed,
            s.endpoint_switches, s.refused, s.results_dropped, s.keepalives,
            s.leases_granted, s.leases_lost, s.watch_reconnects,
            s.watch_duplicates, s.watch_compacted);
    uint64_t t0 = driver_now_ms();
    tem_etcd_destroy(driver_etcd);
    if (!strcmp(c, "stress")) {
        printf("DESTROY_MS %"PRIu64"\n", driver_now_ms() - t0);
    }
    free(driver_key);
    return driver_status;
}
