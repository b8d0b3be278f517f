/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's alerts and drill-down (paper section 6).
 *
 * An alert is one line of JSON (docs/tem.md, "Alerts"): the event, epoch
 * and group, the value against the threshold, each answering host's
 * value, the hosts missing or incomplete (and, for across=max and
 * atleast, those holding on their own), whether the deadline decided it,
 * whether a late satisfaction (sent again after an outage of the TEM)
 * started or joined it, the detection latency, and its sequence number
 * (1, 2, ... over the TEM's run, so that a reader sees a gap).  It is
 * built by hand into one buffer reused from one alert to the next
 * (json-c objects cost about 10 us an alert); every string written is an
 * event name, host id or group field, whose characters need no JSON
 * escaping.  The alert goes to the 'alert' callback, to the event's ring
 * of recent alerts (event-show) and to the core's history ring
 * ("alerts"); its latency goes to the histogram of the metrics.
 *
 * A late decision that raises no alert could not be decided (tem-decide.c,
 * "Late reports"): tem_alert_late_undecidable() counts it and logs what
 * is known.
 *
 * Drill-down: an event with then=NAME:DURATION makes the standby event
 * NAME wanted, for DURATION, on the hosts that contributed to the alert
 * (a value above zero).  tem-event.c's reconcile installs it there; the
 * events' timers (tem_event_run()) reconcile again when the drill-down
 * ends.
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "json-number.h"

/* ---------------------------------------------------------------------- */
/* Alerts and drill-down. */

static bool
tem_alert_compare_holds(const struct tem_event *e, double v)
{
    const struct tpm_expr *p = e->ev->pred;
    return tpm_compare(p->op, v, e->threshold);
}

/* Returns true if part 'p' holds on its own against the full predicate:
 * it reported a satisfaction, or the predicate is "V cmp constant" and
 * its value satisfies the comparison. */
bool
tem_alert_part_holds(const struct tem_event *e, const struct tem_part *p)
{
    return p->up.state == TPM_PART_VALUE
           && ((p->up.flags & PART_SATISFIED)
               || (e->has_threshold
                   && tem_alert_compare_holds(e, p->up.value)));
}

/* Upper bounds of the detection latency histogram's buckets, seconds:
 * around the poll deadline (100 ms by default) and epochs (10 ms). */
const double tem_alert_latency_bounds[TEM_LATENCY_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};

static void
tem_alert_latency_observe(struct tem_core *core, double secs)
{
    size_t i = 0;
    while (i < TEM_LATENCY_BUCKETS && secs > tem_alert_latency_bounds[i]) {
        i++;
    }
    core->latency_counts[i]++;
    core->latency_sum_s += secs;
}

/* Appends '"s"'. */
static void
tem_alert_put_quoted(struct sbuf *b, const char *s)
{
    sbuf_put(b, "\"", 1);
    sbuf_str(b, s);
    sbuf_put(b, "\"", 1);
}

/* Numbers are written in place (an alert has one per host). */
static void
tem_alert_put_int(struct sbuf *b, int64_t v)
{
    sbuf_reserve(b, TPM_JSON_NUMBER_LEN);
    b->len += tpm_json_int(v, b->s + b->len);
}

/* Appends 'v' by the one JSON number rule (tpm_json_number()). */
static void
tem_alert_put_number(struct sbuf *b, double v)
{
    sbuf_reserve(b, TPM_JSON_NUMBER_LEN);
    char *p = b->s + b->len;
    b->len += (tpm_json_number_is_int(v) ? tpm_json_int(v, p)
               : strlen(tpm_json_number(v, p)));
}

/* Appends '"key":'. */
static void
tem_alert_put_key(struct sbuf *b, const char *key)
{
    tem_alert_put_quoted(b, key);
    sbuf_put(b, ":", 1);
}

/* Appends time 'ns' as "2026-11-22T05:21:15.496845Z" (the formatted
 * second is cached). */
static void
tem_alert_put_time(struct tem_core *core, struct sbuf *b, uint64_t ns)
{
    time_t secs = ns / NS_PER_S;
    if (secs != core->time_cache_secs || !core->time_cache[0]) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(core->time_cache, sizeof core->time_cache,
                 "%Y-%m-%dT%H:%M:%S", &tm);
        core->time_cache_secs = secs;
    }
    char frac[9] = ".000000Z";
    unsigned int us = ns % NS_PER_S / 1000;
    for (int i = 6; i >= 1; i--) {
        frac[i] = '0' + us % 10;
        us /= 10;
    }
    sbuf_put(b, "\"", 1);
    sbuf_str(b, core->time_cache);
    sbuf_put(b, frac, 8);
    sbuf_put(b, "\"", 1);
}

/* Appends the ids of the parts of 'd' for which 'pred' is true as a JSON
 * array. */
static void
tem_alert_put_hosts(const struct tem_core *core, struct sbuf *b,
                    const struct tem_event *e, const struct tpm_decision *d,
                    bool (*pred)(const struct tem_event *,
                                 const struct tem_part *))
{
    const struct tem_part *parts = tem_parts(d);
    bool first = true;
    sbuf_put(b, "[", 1);
    for (uint32_t i = 0; i < d->n_parts; i++) {
        if (pred(e, &parts[i])) {
            if (!first) {
                sbuf_put(b, ",", 1);
            }
            first = false;
            tem_alert_put_quoted(b, core->hosts[parts[i].host_slot]->id);
        }
    }
    sbuf_put(b, "]", 1);
}

static bool
tem_alert_part_missing(const struct tem_event *e, const struct tem_part *p)
{
    return p->up.state != TPM_PART_VALUE;
}

static bool
tem_alert_part_incomplete(const struct tem_event *e, const struct tem_part *p)
{
    return p->up.state == TPM_PART_VALUE && (p->up.flags & PART_INCOMPLETE);
}

/* Copies 'len' bytes of 's' into ring slot 'slot'.  Alerts of one event
 * are about the same length: the slot's buffer is reused while it is
 * large enough (no realloc per alert). */
static void
tem_alert_ring_put(struct sbuf *slot, const char *s, size_t len)
{
    sbuf_clear(slot);
    sbuf_put(slot, s, len);
}

static void
tem_alert_ring_advance(size_t cap, size_t *n, size_t *next)
{
    *next = (*next + 1) % cap;
    if (*n < cap) {
        (*n)++;
    }
}

static void tem_alert_drilldown(struct tem_core *, struct tem_event *,
                                const struct tpm_decision *, uint64_t now);

void
tem_alert_raise(struct tem_core *core, struct tem_event *e,
                const struct tpm_decision *d, double value, double threshold,
                bool has_threshold, bool deadline, uint64_t now)
{
    struct sbuf *b = &core->alert_buf;
    struct tpm_key_field fields[TPM_KEY_FIELDS_MAX];
    int n_fields = tpm_key_fields(&e->ev->group, &d->key.group,
                                  tem_core_group_vni(core, &d->key.group),
                                  fields);
    bool first;

    b->len = 0;
    sbuf_put(b, "{", 1);
    tem_alert_put_key(b, "event");
    tem_alert_put_quoted(b, e->name);
    sbuf_str(b, ",\"id\":");
    tem_alert_put_int(b, e->id);
    sbuf_str(b, ",\"epoch\":");
    tem_alert_put_int(b, d->key.epoch);
    sbuf_str(b, ",\"interval_ns\":");
    tem_alert_put_int(b, e->ev->interval_ns);
    sbuf_str(b, ",\"group\":{");
    for (int i = 0; i < n_fields; i++) {
        if (i) {
            sbuf_put(b, ",", 1);
        }
        tem_alert_put_key(b, fields[i].name);
        if (fields[i].is_int) {
            tem_alert_put_int(b, fields[i].int_value);
        } else {
            tem_alert_put_quoted(b, fields[i].str_value);
        }
    }
    sbuf_str(b, "},\"value\":");
    tem_alert_put_number(b, value);
    sbuf_str(b, ",\"threshold\":");
    if (has_threshold) {
        tem_alert_put_number(b, threshold);
    } else {
        sbuf_str(b, "null");
    }
    sbuf_str(b, ",\"across\":");
    tem_alert_put_quoted(b, tem_event_across_names[e->across]);

    sbuf_str(b, ",\"hosts\":{");
    first = true;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &tem_parts(d)[i];
        if (p->up.state == TPM_PART_VALUE) {
            if (!first) {
                sbuf_put(b, ",", 1);
            }
            first = false;
            tem_alert_put_key(b, core->hosts[p->host_slot]->id);
            tem_alert_put_number(b, p->up.value);
        }
    }
    sbuf_str(b, "},\"missing\":");
    tem_alert_put_hosts(core, b, e, d, tem_alert_part_missing);
    sbuf_str(b, ",\"incomplete\":");
    tem_alert_put_hosts(core, b, e, d, tem_alert_part_incomplete);
    if (e->across == TEM_ACROSS_ATLEAST || e->across == TEM_ACROSS_MAX) {
        sbuf_str(b, ",\"holding\":");
        tem_alert_put_hosts(core, b, e, d, tem_alert_part_holds);
    }
    if (e->across == TEM_ACROSS_ATLEAST) {
        sbuf_str(b, ",\"host_threshold\":");
        if (e->has_threshold) {
            tem_alert_put_number(b, e->threshold);
        } else {
            sbuf_str(b, "null");
        }
    }
    sbuf_str(b, deadline ? ",\"deadline\":true" : ",\"deadline\":false");
    bool late = d->aux & DECISION_LATE;
    sbuf_str(b, late ? ",\"late\":true" : ",\"late\":false");
    core->stats.alerts_late += late;
    sbuf_str(b, ",\"latency_us\":");
    tem_alert_put_int(b, (now - d->started_ns) / 1000);
    uint64_t real = tem_core_real(core);
    sbuf_str(b, ",\"time\":");
    tem_alert_put_time(core, b, real);
    sbuf_str(b, ",\"time_ns\":");
    tem_alert_put_int(b, real);
    /* 1, 2, ... over this run's alerts: a gap tells a subscriber what it
     * missed. */
    sbuf_str(b, ",\"seq\":");
    tem_alert_put_int(b, core->stats.alerts + 1);
    sbuf_put(b, "}", 1);

    core->stats.alerts++;
    e->stats.alerts++;
    tem_alert_latency_observe(core, (now - d->started_ns) / 1e9);
    tem_alert_ring_put(&e->recent[e->recent_next], b->s, b->len);
    tem_alert_ring_advance(core->cfg.recent_alerts, &e->n_recent,
                           &e->recent_next);
    tem_alert_ring_put(&core->history[core->history_next], b->s, b->len);
    char *hname = core->history_event[core->history_next];
    size_t nlen = strnlen(e->name, TPROTO_MAX_ID);
    memcpy(hname, e->name, nlen);
    hname[nlen] = '\0';
    core->history_tun[core->history_next]
        = d->key.group.tun ? tem_core_group_vni(core, &d->key.group) + 1 : 0;
    tem_alert_ring_advance(core->cfg.alert_history, &core->n_history,
                           &core->history_next);
    if (core->cfg.alert) {
        core->cfg.alert(core->cfg.aux, e->name, b->s);
    }

    if (e->then_name) {
        tem_alert_drilldown(core, e, d, now);
    }
}

/* Appends to 'b' the ids of the parts of 'd' that are missing, with
 * ('expired') or without PART_EXPIRED, separated by commas; "-" if
 * none. */
static void
tem_alert_late_hosts(const struct tem_core *core, const struct tpm_decision *d,
                     bool expired, struct sbuf *b)
{
    const struct tem_part *parts = tem_parts(d);
    size_t len = b->len;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &parts[i];
        if (p->up.state != TPM_PART_VALUE
            && !(p->up.flags & PART_EXPIRED) == !expired) {
            if (b->len != len) {
                sbuf_put(b, ",", 1);
            }
            sbuf_str(b, core->hosts[p->host_slot]->id);
        }
    }
    if (b->len == len) {
        sbuf_put(b, "-", 1);
    }
}

/* Appends to 'b' "HOST=VALUE" for every part of 'd' with a value, or
 * "-". */
static void
tem_alert_late_values(const struct tem_core *core,
                      const struct tpm_decision *d, struct sbuf *b)
{
    const struct tem_part *parts = tem_parts(d);
    size_t len = b->len;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &parts[i];
        if (p->up.state == TPM_PART_VALUE) {
            if (b->len != len) {
                sbuf_put(b, ",", 1);
            }
            sbuf_str(b, core->hosts[p->host_slot]->id);
            sbuf_put(b, "=", 1);
            tem_alert_put_number(b, p->up.value);
        }
    }
    if (b->len == len) {
        sbuf_put(b, "-", 1);
    }
}

/* Late decision 'd' of 'e' raised no alert: the epoch could not be
 * decided.  Counted, and logged (rate-limited) with the values known and
 * the hosts missing. */
void
tem_alert_late_undecidable(struct tem_core *core, struct tem_event *e,
                           const struct tpm_decision *d)
{
    struct tpm_key_field fields[TPM_KEY_FIELDS_MAX];
    int n_fields = tpm_key_fields(&e->ev->group, &d->key.group,
                                  tem_core_group_vni(core, &d->key.group),
                                  fields);
    struct sbuf b = SBUF_INITIALIZER;

    core->stats.late_undecidable++;
    e->stats.undecidable++;

    for (int i = 0; i < n_fields; i++) {
        sbuf_str(&b, i ? "," : "");
        sbuf_str(&b, fields[i].name);
        sbuf_put(&b, "=", 1);
        if (fields[i].is_int) {
            tem_alert_put_int(&b, fields[i].int_value);
        } else {
            sbuf_str(&b, fields[i].str_value);
        }
    }
    if (!n_fields) {
        sbuf_str(&b, "-");
    }
    sbuf_str(&b, "; values ");
    tem_alert_late_values(core, d, &b);
    sbuf_str(&b, "; history expired on ");
    tem_alert_late_hosts(core, d, true, &b);
    sbuf_str(&b, "; no answer from ");
    tem_alert_late_hosts(core, d, false, &b);
    tem_log_rl(core, &core->rl_late, TPM_LOG_WARN, "event %s: epoch "
               "%"PRIu64" undecidable, history expired or hosts not known "
               "(a late satisfaction, no alert): group %s", e->name,
               d->key.epoch, b.s);
    sbuf_destroy(&b);
}

/* Installs 'e''s then= event on the hosts that contributed to decision
 * 'd' (value > 0), for the then= duration. */
static void
tem_alert_drilldown(struct tem_core *core, struct tem_event *e,
                    const struct tpm_decision *d, uint64_t now)
{
    struct tem_event *t = tem_event_by_name(core, e->then_name);
    if (!t || !t->standby) {
        core->stats.drilldown_errors++;
        tem_log_rl(core, &core->rl_drill, TPM_LOG_WARN,
                   "event %s: drill-down to '%s' impossible: %s", e->name,
                   e->then_name, t ? "it is not a standby event"
                                   : "no such event");
        return;
    }

    uint64_t until = now + e->then_ns;
    size_t n_new = 0, n = 0;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &tem_parts(d)[i];
        struct tem_host *h = core->hosts[p->host_slot];
        if (p->up.state != TPM_PART_VALUE || p->up.value <= 0
            || !tem_out_host_connected(h) || h->session != p->session
            || !tem_event_eligible(t, h)) {
            continue;
        }
        n++;
        if (t->drill_until[h->slot] <= now) {
            n_new++;
        }
        if (t->drill_until[h->slot] < until) {
            t->drill_until[h->slot] = until;
        }
    }
    if (!n) {
        return;
    }
    t->drill_next = t->drill_next && t->drill_next <= until
                    ? t->drill_next : until;
    t->stats.drilldowns++;
    core->stats.drilldowns++;
    if (n_new) {
        char dur[32];
        tpm_time_format(e->then_ns, dur, sizeof dur);
        tem_log_rl(core, &core->rl_drill, TPM_LOG_INFO,
                   "event %s alerted: drill-down installs %s on %zu more "
                   "host(s) for %s", e->name, t->name, n_new, dur);
        tem_event_reconcile(core, t, now);
    }
}
