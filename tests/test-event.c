/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the event language parser (lib/event.c). */
#include "event.h"
#include "json-number.h"
#include "util.h"

#include <arpa/inet.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses 'text' as event "e", failing the test on error. */
static struct tpm_event *
parse_ok(const char *text)
{
    struct tpm_event *ev = NULL;
    char *error = tpm_event_parse("e", text, &ev);
    ck_assert_msg(!error, "'%s': unexpected error: %s", text, error);
    ck_assert_ptr_nonnull(ev);
    return ev;
}

/* Parses 'text', expecting an error for 'clause' at column 'col' that
 * contains 'substr'. */
static void
parse_err(const char *text, const char *clause, int col, const char *substr)
{
    struct tpm_event *ev = (struct tpm_event *) 1;
    char *error = tpm_event_parse("e", text, &ev);
    ck_assert_msg(error != NULL, "'%s': parsed without error", text);
    ck_assert_ptr_null(ev);

    char *prefix = xasprintf("%s: column %d: ", clause, col);
    ck_assert_msg(!strncmp(error, prefix, strlen(prefix)),
                  "'%s': error '%s' does not start with '%s'",
                  text, error, prefix);
    ck_assert_msg(strstr(error, substr) != NULL,
                  "'%s': error '%s' does not contain '%s'",
                  text, error, substr);
    free(prefix);
    free(error);
}

/* Returns the predicate of "filter=ip predicate='pred'" as a string. */
static char *
pred_string(const char *pred)
{
    char *text = xasprintf("filter=ip predicate=%s", pred);
    struct tpm_event *ev = parse_ok(text);
    char *s = tpm_expr_to_string(ev->pred);
    tpm_event_destroy(ev);
    free(text);
    return s;
}

static void
check_pred_string(const char *pred, const char *expected)
{
    char *s = pred_string(pred);
    ck_assert_msg(!strcmp(s, expected), "'%s' formats as '%s', not '%s'",
                  pred, s, expected);
    free(s);
}

static uint32_t
ip4(const char *s)
{
    struct in_addr a;
    ck_assert_int_eq(inet_pton(AF_INET, s, &a), 1);
    return a.s_addr;
}

static uint32_t
be32(uint32_t x)
{
    return htonl(x);
}

static bool
words_zero(const uint32_t w[4], int from)
{
    for (int i = from; i < 4; i++) {
        if (w[i]) {
            return false;
        }
    }
    return true;
}

/* Checks that 'group' is the 5-tuple granularity mask. */
static void
check_group_5tuple(const struct tpm_event *ev)
{
    ck_assert(ev->group_5tuple);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(ev->group.src[i], UINT32_MAX);
        ck_assert_uint_eq(ev->group.dst[i], UINT32_MAX);
    }
    ck_assert_uint_eq(ev->group.sport, 0xffff);
    ck_assert_uint_eq(ev->group.dport, 0xffff);
    ck_assert_uint_eq(ev->group.proto, 0xff);
    ck_assert_uint_eq(ev->group.ipver, 0xff);
    ck_assert_uint_eq(ev->group.tun, 0xffff);
    ck_assert(ev->group_tun);
}

static void
check_value_string(const struct tpm_event *ev, const char *expected)
{
    char *s = tpm_expr_to_string(ev->value);
    ck_assert_str_eq(s, expected);
    free(s);
}

static void
check_group_string(const struct tpm_event *ev, const char *expected)
{
    char *s = tpm_group_to_string(&ev->group);
    ck_assert_str_eq(s, expected);
    free(s);
}

/* Paper Table 2. */

START_TEST(test_table2_heavy_flows)
{
    struct tpm_event *ev = parse_ok(
        "filter=ip,nw_dst=10.0.128.0/24 predicate=sum(volume) > 125KB "
        "group=5tuple interval=10ms");
    const struct tpm_match *f = &ev->filter;

    ck_assert_str_eq(ev->name, "e");
    ck_assert_str_eq(ev->text, "filter=ip,nw_dst=10.0.128.0/24 "
                     "predicate=sum(volume) > 125KB group=5tuple "
                     "interval=10ms");
    ck_assert_uint_eq(f->mask.ipver, 0xff);
    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->mask.dst[0], be32(0xffffff00));
    ck_assert_uint_eq(f->key.dst[0], ip4("10.0.128.0"));
    ck_assert(words_zero(f->mask.dst, 1) && words_zero(f->key.dst, 1));
    ck_assert(words_zero(f->mask.src, 0) && words_zero(f->key.src, 0));
    ck_assert_uint_eq(f->mask.proto, 0);
    ck_assert_uint_eq(f->mask.sport, 0);
    ck_assert_uint_eq(f->mask.dport, 0);
    check_group_5tuple(ev);
    check_group_string(ev, "5tuple");
    ck_assert_uint_eq(ev->interval_ns, 10000000);

    ck_assert_int_eq(ev->value->type, TPM_EXPR_AGG);
    ck_assert_int_eq(ev->value->agg, TPM_AGG_SUM);
    ck_assert_int_eq(ev->value->a->type, TPM_EXPR_VAR);
    ck_assert_int_eq(ev->value->a->var, TPM_VAR_VOLUME);
    ck_assert_ptr_eq(ev->value, ev->pred->a);
    ck_assert_ptr_eq(ev->threshold, ev->pred->b);
    ck_assert_double_eq(ev->threshold->num, 125000);
    ck_assert(!tpm_event_needs_tcp_state(ev));
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_table2_burst_loss)
{
    struct tpm_event *ev = parse_ok(
        "filter=ip,nw_src=10.0.128.0/24 "
        "predicate=avg(is_lost && is_burst) > 10% group=5tuple "
        "interval=10ms");
    const struct tpm_match *f = &ev->filter;

    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->mask.ipver, 0xff);
    ck_assert_uint_eq(f->mask.src[0], be32(0xffffff00));
    ck_assert_uint_eq(f->key.src[0], ip4("10.0.128.0"));
    ck_assert(words_zero(f->mask.dst, 0));
    check_group_5tuple(ev);

    const struct tpm_expr *v = ev->value;
    ck_assert_int_eq(v->type, TPM_EXPR_AGG);
    ck_assert_int_eq(v->agg, TPM_AGG_AVG);
    ck_assert_int_eq(v->a->type, TPM_EXPR_BIN);
    ck_assert_int_eq(v->a->op, TPM_OP_AND);
    ck_assert_int_eq(v->a->a->var, TPM_VAR_IS_LOST);
    ck_assert_int_eq(v->a->b->var, TPM_VAR_IS_BURST);
    ck_assert_double_eq_tol(ev->threshold->num, 0.1, 1e-12);
    ck_assert(tpm_event_needs_tcp_state(ev));
    tpm_event_destroy(ev);
}
END_TEST

static void
count_aggs_cb(const struct tpm_expr *agg, bool prev, void *aux)
{
    int *counts = aux;
    ck_assert_int_eq(agg->type, TPM_EXPR_AGG);
    counts[0]++;
    counts[1] += prev;
}

START_TEST(test_table2_congestion)
{
    struct tpm_event *ev = parse_ok(
        "filter=tcp predicate=1 - (ack - ack_lastepoch + dup) / "
        "(seq_lastepoch - ack_lastepoch) > 0.5 group=5tuple "
        "interval=10ms");
    const struct tpm_match *f = &ev->filter;

    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->mask.ipver, 0xff);
    ck_assert_uint_eq(f->key.proto, 6);
    ck_assert_uint_eq(f->mask.proto, 0xff);
    ck_assert(words_zero(f->mask.src, 0) && words_zero(f->mask.dst, 0));
    check_group_5tuple(ev);
    ck_assert_uint_eq(ev->interval_ns, 10000000);

    check_value_string(ev, "(1 - (((ack - ack_lastepoch) + dup) / "
                       "(seq_lastepoch - ack_lastepoch)))");
    ck_assert_int_eq(ev->value->type, TPM_EXPR_BIN);
    ck_assert_int_eq(ev->value->op, TPM_OP_SUB);
    ck_assert_double_eq(ev->threshold->num, 0.5);
    ck_assert(tpm_event_needs_tcp_state(ev));

    /* ack_lastepoch is prev(last(ack)). */
    const struct tpm_expr *sub = ev->value->b->a->a;
    ck_assert_int_eq(sub->type, TPM_EXPR_BIN);
    ck_assert_int_eq(sub->b->type, TPM_EXPR_PREV);
    ck_assert_int_eq(sub->b->a->type, TPM_EXPR_AGG);
    ck_assert_int_eq(sub->b->a->agg, TPM_AGG_LAST);
    ck_assert_int_eq(sub->b->a->a->var, TPM_VAR_ACK);

    int counts[2] = { 0, 0 };
    tpm_expr_for_each_agg(ev->pred, count_aggs_cb, counts);
    ck_assert_int_eq(counts[0], 5);
    ck_assert_int_eq(counts[1], 3);
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_table2_load_spike)
{
    struct tpm_event *ev = parse_ok(
        "filter=tcp,nw_dst=10.0.128.0/24,tp_dst=80 "
        "predicate=sum(volume) > 100MB group=nw_dst/24 interval=10ms");
    const struct tpm_match *f = &ev->filter;

    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->key.proto, 6);
    ck_assert_uint_eq(f->mask.proto, 0xff);
    ck_assert_uint_eq(f->key.dst[0], ip4("10.0.128.0"));
    ck_assert_uint_eq(f->mask.dst[0], be32(0xffffff00));
    ck_assert_uint_eq(f->key.dport, 80);
    ck_assert_uint_eq(f->mask.dport, 0xffff);
    ck_assert_uint_eq(f->mask.sport, 0);

    ck_assert(!ev->group_5tuple);
    ck_assert_uint_eq(ev->group.dst[0], be32(0xffffff00));
    ck_assert(words_zero(ev->group.dst, 1));
    ck_assert(words_zero(ev->group.src, 0));
    ck_assert_uint_eq(ev->group.sport, 0);
    ck_assert_uint_eq(ev->group.dport, 0);
    ck_assert_uint_eq(ev->group.proto, 0);
    ck_assert_uint_eq(ev->group.ipver, 0xff);
    check_group_string(ev, "nw_dst/24");

    check_value_string(ev, "sum(volume)");
    ck_assert_double_eq(ev->threshold->num, 100e6);
    ck_assert(!tpm_event_needs_tcp_state(ev));
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_table2_reachability)
{
    struct tpm_event *ev = parse_ok(
        "filter=ip,nw_src=10.0.128.0/24,nw_dst=10.20.93.0/24 "
        "predicate=sum(is_lost) > 100 group=nw_src,nw_dst interval=10ms");
    const struct tpm_match *f = &ev->filter;

    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->key.src[0], ip4("10.0.128.0"));
    ck_assert_uint_eq(f->mask.src[0], be32(0xffffff00));
    ck_assert_uint_eq(f->key.dst[0], ip4("10.20.93.0"));
    ck_assert_uint_eq(f->mask.dst[0], be32(0xffffff00));

    ck_assert(!ev->group_5tuple);
    ck_assert_uint_eq(ev->group.src[0], UINT32_MAX);
    ck_assert_uint_eq(ev->group.dst[0], UINT32_MAX);
    ck_assert(words_zero(ev->group.src, 1) && words_zero(ev->group.dst, 1));
    ck_assert_uint_eq(ev->group.dport, 0);
    ck_assert_uint_eq(ev->group.ipver, 0xff);
    check_group_string(ev, "nw_src,nw_dst");

    check_value_string(ev, "sum(is_lost)");
    ck_assert_double_eq(ev->threshold->num, 100);
    ck_assert(tpm_event_needs_tcp_state(ev));
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_table2_dependencies)
{
    struct tpm_event *ev = parse_ok(
        "filter=ip,nw_src=10.0.128.0/20 predicate=sum(volume) > 10GB "
        "group=nw_dst/24,nw_src/24 interval=1s");
    const struct tpm_match *f = &ev->filter;

    ck_assert_uint_eq(f->key.ipver, 4);
    ck_assert_uint_eq(f->key.src[0], ip4("10.0.128.0"));
    ck_assert_uint_eq(f->mask.src[0], be32(0xfffff000));
    ck_assert(words_zero(f->mask.dst, 0));

    ck_assert(!ev->group_5tuple);
    ck_assert_uint_eq(ev->group.src[0], be32(0xffffff00));
    ck_assert_uint_eq(ev->group.dst[0], be32(0xffffff00));
    check_group_string(ev, "nw_src/24,nw_dst/24");
    ck_assert_uint_eq(ev->interval_ns, 1000000000);

    check_value_string(ev, "sum(volume)");
    ck_assert_double_eq(ev->threshold->num, 10e9);
    ck_assert(!tpm_event_needs_tcp_state(ev));
    tpm_event_destroy(ev);
}
END_TEST

/* Predicates. */

/* Returns the threshold of "sum(bytes) > 'number'". */
static double
threshold_of(const char *number)
{
    char *text = xasprintf("filter=ip predicate=sum(bytes) > %s", number);
    struct tpm_event *ev = parse_ok(text);
    ck_assert_msg(ev->threshold != NULL, "'%s' has no threshold", text);
    double x = ev->threshold->num;
    tpm_event_destroy(ev);
    free(text);
    return x;
}

START_TEST(test_units)
{
    static const struct {
        const char *s;
        double value;
    } cases[] = {
        { "125", 125 }, { "125KB", 125e3 }, { "125 KB", 125e3 },
        { "2MB", 2e6 }, { "3GB", 3e9 }, { "1KiB", 1024 },
        { "1MiB", 1048576 }, { "2GiB", 2147483648.0 }, { "10%", 0.1 },
        { "5 %", 0.05 }, { "1ns", 1 }, { "2us", 2e3 }, { "3ms", 3e6 },
        { "4s", 4e9 }, { "4 s", 4e9 }, { "1.5e3", 1500 }, { ".5", 0.5 },
        { "2.5MB", 2.5e6 }, { "1e-2MB", 1e4 }, { "1E+2", 100 },
        { "-5", -5 }, { "- 2KB", -2000 }, { "0.5", 0.5 },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double x = threshold_of(cases[i].s);
        ck_assert_msg(fabs(x - cases[i].value) <= 1e-9 * fabs(x) + 1e-12,
                      "'%s' is %.17g, not %.17g", cases[i].s, x,
                      cases[i].value);
    }

    /* A keyword or a name after a number is not a unit. */
    check_pred_string("count() > 5 and count() < 7",
                      "((count() > 5) && (count() < 7))");
    check_pred_string("count() > 5 or count() < 7",
                      "((count() > 5) || (count() < 7))");
    check_pred_string("sum(volume * 8) > 1 KiB",
                      "(sum((volume * 8)) > 1024)");
    check_pred_string("max(rtt) > 2 ms", "(max(rtt) > 2000000)");
}
END_TEST

START_TEST(test_precedence)
{
    check_pred_string("1 + 2 * 3 - 4 / 2 > 0",
                      "(((1 + (2 * 3)) - (4 / 2)) > 0)");
    check_pred_string("1 - 2 - 3 > 0", "(((1 - 2) - 3) > 0)");
    check_pred_string("8 / 4 / 2 > 0", "(((8 / 4) / 2) > 0)");
    check_pred_string("(1 + 2) * 3 > 0", "(((1 + 2) * 3) > 0)");
    check_pred_string("count() > 1 || count() > 2 && count() > 3",
                      "((count() > 1) || ((count() > 2) && (count() > 3)))");
    check_pred_string("count() > 1 && count() > 2 || count() > 3",
                      "(((count() > 1) && (count() > 2)) || (count() > 3))");
    check_pred_string("count() > 1 & count() < 2",
                      "((count() > 1) && (count() < 2))");
    check_pred_string("count() > 1 and count() < 2 or sum(bytes) >= 3",
                      "(((count() > 1) && (count() < 2)) || "
                      "(sum(bytes) >= 3))");
    check_pred_string("-count() * 2 > 1", "(((-count()) * 2) > 1)");
    check_pred_string("!count() == 0", "((!count()) == 0)");
    check_pred_string("not (count() > 1)", "(!(count() > 1))");
    check_pred_string("!!(count() > 1)", "(!(!(count() > 1)))");
    check_pred_string("count() > 1&&!(sum(bytes) < 2)",
                      "((count() > 1) && (!(sum(bytes) < 2)))");
    check_pred_string("count() <= 1 || count() != 2 || count() == 3",
                      "(((count() <= 1) || (count() != 2)) || "
                      "(count() == 3))");
    check_pred_string("(count() > 1) < 2", "((count() > 1) < 2)");
    check_pred_string("count()>-1", "(count() > -1)");
    check_pred_string("- -3 < count()", "(3 < count())");
    check_pred_string("sum(volume) / count() > min(ttl) + max(ttl)",
                      "((sum(volume) / count()) > (min(ttl) + max(ttl)))");
    check_pred_string("stddev(bytes) > avg(bytes) * 2",
                      "(stddev(bytes) > (avg(bytes) * 2))");
    check_pred_string("count(ttl < 64 || ecn) > 0",
                      "(count(((ttl < 64) || ecn)) > 0)");
    check_pred_string("ttl > ttl_lastepoch",
                      "(ttl > ttl_lastepoch)");
    check_pred_string("sum(bytes) > 2 * prev(sum(bytes))",
                      "(sum(bytes) > (2 * prev(sum(bytes))))");
    check_pred_string("prev(ttl) > 0", "(ttl_lastepoch > 0)");
    check_pred_string("sum(-bytes) < 0", "(sum((-bytes)) < 0)");
}
END_TEST

/* Formats, reparses and compares predicates. */
START_TEST(test_to_string_round_trip)
{
    static const char *const preds[] = {
        "1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) "
        "> 0.5",
        "avg(is_lost && is_burst) > 10%",
        "!(sum(volume) > 1e10) || max(ttl) < -2.25 && count(!ecn) != 3",
        "prev(sum(bytes) / count()) * 2 < sum(bytes) / count()",
        "stddev(rwnd * 2 - bytes / 3) >= 0.001",
    };

    for (size_t i = 0; i < sizeof preds / sizeof preds[0]; i++) {
        char *s1 = pred_string(preds[i]);
        char *s2 = pred_string(s1);
        ck_assert_str_eq(s1, s2);

        char *t1 = xasprintf("filter=ip predicate=%s", preds[i]);
        char *t2 = xasprintf("filter=ip predicate=%s", s1);
        struct tpm_event *e1 = parse_ok(t1);
        struct tpm_event *e2 = parse_ok(t2);
        ck_assert(tpm_expr_equal(e1->pred, e2->pred));
        tpm_event_destroy(e1);
        tpm_event_destroy(e2);
        free(t1);
        free(t2);
        free(s1);
        free(s2);
    }
}
END_TEST

/* Leaf callback: sum() is 10, count() is 4, max() is 0, anything else 1;
 * values over the previous interval are 100 times larger.  Counts the
 * calls in '*aux'. */
static double
leaf_cb(const struct tpm_expr *agg, bool prev, void *aux)
{
    int *calls = aux;
    double x;

    (*calls)++;
    ck_assert_int_eq(agg->type, TPM_EXPR_AGG);
    switch (agg->agg) {
    case TPM_AGG_SUM: x = 10; break;
    case TPM_AGG_COUNT: x = 4; break;
    case TPM_AGG_MAX: x = 0; break;
    default: x = 1; break;
    }
    return prev ? 100 * x : x;
}

/* Evaluates predicate 'pred' and its value with leaf_cb(). */
static void
check_eval(const char *pred, double pred_value, double value)
{
    char *text = xasprintf("filter=ip predicate=%s", pred);
    struct tpm_event *ev = parse_ok(text);
    int calls = 0;
    double p = tpm_expr_eval(ev->pred, leaf_cb, &calls);
    double v = tpm_expr_eval(ev->value, leaf_cb, &calls);
    ck_assert_msg(p == pred_value && v == value,
                  "'%s' evaluates to %g with value %g, not %g and %g",
                  pred, p, v, pred_value, value);
    tpm_event_destroy(ev);
    free(text);
}

START_TEST(test_eval)
{
    check_eval("sum(bytes) / count() > 2", 1, 2.5);
    check_eval("sum(bytes) / count() > 3", 0, 2.5);
    check_eval("sum(bytes) / max(ttl) > 3", 0, 0);       /* x / 0 = 0. */
    check_eval("1 + 2 * 3 - 4 / 2 == 5", 1, 5);
    check_eval("(1 + 2) * 3 == 9", 1, 9);
    check_eval("-count() < -3", 1, -4);
    check_eval("!count() == 0", 1, 0);
    check_eval("count() > 1 && sum(bytes) < 5", 0, 4);
    check_eval("count() > 1 || sum(bytes) < 5", 1, 4);
    check_eval("count() > 9 || !(sum(bytes) < 5)", 1, 4);
    check_eval("count() >= 4 && count() <= 4 && count() != 5", 1, 4);
    check_eval("prev(sum(bytes)) > 999", 1, 1000);
    check_eval("sum(bytes) - bytes_lastepoch > 0", 0, -90);
}
END_TEST

START_TEST(test_eval_prev)
{
    struct tpm_event *ev = parse_ok("filter=ip predicate=sum(bytes) > "
                                    "prev(sum(bytes) + count()) + "
                                    "ttl_lastepoch");
    int calls = 0;
    /* 10 > (1000 + 400) + 100 is false. */
    ck_assert_double_eq(tpm_expr_eval(ev->pred, leaf_cb, &calls), 0);
    ck_assert_int_eq(calls, 4);
    tpm_event_destroy(ev);
}
END_TEST

/* Returns the term of the first aggregate of "filter=ip predicate='pred'"
 * in '*evp' (the caller destroys the event). */
static const struct tpm_expr *
first_term(const char *pred, struct tpm_event **evp)
{
    char *text = xasprintf("filter=ip predicate=%s", pred);
    struct tpm_event *ev = parse_ok(text);
    const struct tpm_expr *e = ev->value;
    free(text);
    while (e->type != TPM_EXPR_AGG) {
        e = e->a;
    }
    *evp = ev;
    return e->a;
}

static double
eval_term(const char *pred, const struct tpm_pkt *pkt)
{
    struct tpm_event *ev;
    const struct tpm_expr *term = first_term(pred, &ev);
    double x = tpm_expr_eval_pkt(term, pkt);
    tpm_event_destroy(ev);
    return x;
}

START_TEST(test_eval_pkt)
{
    struct tpm_pkt pkt;
    memset(&pkt, 0, sizeof pkt);
    pkt.key.ipver = 4;
    pkt.key.proto = 6;
    pkt.bytes = 100;
    pkt.volume = 60;
    pkt.ttl = 64;
    pkt.tos = 3;                /* ECN CE. */
    pkt.rwnd = 5;               /* Raw window: terms read the scaled one. */
    pkt.seq = 7;
    pkt.ack = 9;
    pkt.v.rwnd = 0;
    pkt.v.seq = 5000000000ULL;  /* Unwrapped: above 2^32. */
    pkt.v.ack = 4999999000ULL;
    pkt.v.rtt = 250000;
    pkt.v.dup = 2920;
    pkt.v.is_lost = 1;
    pkt.v.is_burst = 0;

    ck_assert_double_eq(eval_term("sum(packets) > 0", &pkt), 1);
    ck_assert_double_eq(eval_term("sum(bytes) > 0", &pkt), 100);
    ck_assert_double_eq(eval_term("sum(volume * 2 + bytes / 4 - (ttl > 63))"
                                  " > 0", &pkt), 144);
    ck_assert_double_eq(eval_term("sum(bytes / rwnd) > 0", &pkt), 0);
    ck_assert_double_eq(eval_term("sum(-ttl) > 0", &pkt), -64);
    ck_assert_double_eq(eval_term("sum(!ecn) > 0", &pkt), 0);
    ck_assert_double_eq(eval_term("count(ecn && ttl == 64) > 0", &pkt), 1);
    ck_assert_double_eq(eval_term("count(rwnd || ttl != 64) > 0", &pkt), 0);
    ck_assert_double_eq(eval_term("count(rwnd && ttl) > 0", &pkt), 0);
    ck_assert_double_eq(eval_term("count(ecn || rwnd) > 0", &pkt), 1);
    ck_assert_double_eq(eval_term("count(rwnd || ttl >= 64) > 0", &pkt), 1);
    ck_assert_double_eq(eval_term("count(ttl <= 63 || volume < 61) > 0",
                                  &pkt), 1);
    ck_assert_double_eq(eval_term("max(volume * 10KB) > 0", &pkt), 600000);
    /* Variables that need per-flow state read what the monitor filled in
     * 'pkt.v', not the raw header fields. */
    ck_assert_double_eq(eval_term("sum(is_lost + is_burst + rtt + dup) > 0",
                                  &pkt), 1 + 0 + 250000 + 2920);
    ck_assert_double_eq(eval_term("sum(seq - ack) > 0", &pkt), 1000);
    ck_assert_double_eq(eval_term("count(is_lost && !is_burst) > 0", &pkt),
                        1);
}
END_TEST

static void
collect_aggs_cb(const struct tpm_expr *agg, bool prev, void *aux)
{
    char **s = aux;
    char *a = tpm_expr_to_string(agg);
    char *old = *s;
    *s = xasprintf("%s%s%s%s", old, *old ? " " : "", prev ? "prev:" : "",
                   a);
    free(old);
    free(a);
}

START_TEST(test_for_each_agg)
{
    struct tpm_event *ev = parse_ok(
        "filter=tcp predicate=sum(volume) > 2 * prev(sum(volume)) && "
        "count() - ack_lastepoch > 0 || rwnd < count(ttl < 3)");
    char *s = xstrdup("");
    tpm_expr_for_each_agg(ev->pred, collect_aggs_cb, &s);
    ck_assert_str_eq(s, "sum(volume) prev:sum(volume) count() "
                     "prev:ack rwnd count((ttl < 3))");
    free(s);
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_positions)
{
    /* Columns: sum 21, volume 25, '>' 33, 125KB 35, '&&' 41, '-' 44,
     * ttl_lastepoch 45, '<' 59, 3 61.  Binary and unary nodes sit at
     * their operator. */
    struct tpm_event *ev = parse_ok("filter=ip predicate=sum(volume) > "
                                    "125KB && -ttl_lastepoch < 3");
    const struct tpm_expr *and = ev->pred;
    ck_assert_int_eq(and->type, TPM_EXPR_BIN);
    ck_assert_int_eq(and->op, TPM_OP_AND);
    ck_assert_int_eq(and->pos, 41);

    const struct tpm_expr *gt = and->a;
    ck_assert_int_eq(gt->pos, 33);
    ck_assert_int_eq(gt->a->pos, 21);           /* sum */
    ck_assert_int_eq(gt->a->a->pos, 25);        /* volume */
    ck_assert_int_eq(gt->b->pos, 35);           /* 125KB */

    const struct tpm_expr *lt = and->b;
    ck_assert_int_eq(lt->pos, 59);
    ck_assert_int_eq(lt->a->type, TPM_EXPR_NEG);
    ck_assert_int_eq(lt->a->pos, 44);
    ck_assert_int_eq(lt->a->a->type, TPM_EXPR_PREV);
    ck_assert_int_eq(lt->a->a->pos, 45);
    ck_assert_int_eq(lt->a->a->a->pos, 45);
    ck_assert_int_eq(lt->a->a->a->a->pos, 45);
    ck_assert_int_eq(lt->b->pos, 61);
    tpm_event_destroy(ev);
}
END_TEST

/* Checks the value (as text) and threshold (NAN: none) of 'pred'. */
static void
check_value(const char *pred, const char *value, double threshold)
{
    char *text = xasprintf("filter=ip predicate=%s", pred);
    struct tpm_event *ev = parse_ok(text);
    check_value_string(ev, value);
    if (isnan(threshold)) {
        ck_assert_ptr_null(ev->threshold);
    } else {
        ck_assert_ptr_nonnull(ev->threshold);
        ck_assert_int_eq(ev->threshold->type, TPM_EXPR_NUM);
        ck_assert_double_eq(ev->threshold->num, threshold);
    }
    tpm_event_destroy(ev);
    free(text);
}

START_TEST(test_value_threshold)
{
    check_value("sum(volume) > 125KB", "sum(volume)", 125000);
    check_value("(sum(volume) > 5)", "sum(volume)", 5);
    check_value("count() > 1 && sum(volume) > 3", "count()", 1);
    check_value("count() > 1 || sum(volume) > 3", "count()", 1);
    check_value("!(sum(bytes) < 5) || max(ttl) > 2", "sum(bytes)", 5);
    check_value("!!(sum(bytes) < 5)", "sum(bytes)", 5);
    check_value("sum(volume) > max(bytes)", "sum(volume)", NAN);
    check_value("sum(volume) > 2 * 3", "sum(volume)", NAN);
    check_value("5 < sum(bytes)", "5", NAN);
    check_value("sum(bytes) / count() >= -1", "(sum(bytes) / count())", -1);
    check_value("(count() + 1) * 2 == 4", "((count() + 1) * 2)", 4);
    check_value("ttl != 0", "ttl", 0);
}
END_TEST

/* Filters. */

/* Parses "filter='filter' predicate=count() > 0" into '*m'. */
static void
parse_filter(const char *filter, struct tpm_match *m)
{
    char *text = xasprintf("filter=%s predicate=count() > 0", filter);
    struct tpm_event *ev = parse_ok(text);
    *m = ev->filter;
    tpm_event_destroy(ev);
    free(text);

    /* The key is always already masked. */
    struct tpm_key masked;
    tpm_key_and(&masked, &m->key, &m->mask);
    ck_assert(tpm_key_equal(&masked, &m->key));
}

static bool
match_is_empty(const struct tpm_match *m)
{
    static const struct tpm_match zero;
    return !memcmp(m, &zero, sizeof zero);
}

START_TEST(test_filter_ipv4)
{
    struct tpm_match m;

    parse_filter("", &m);
    ck_assert(match_is_empty(&m));
    parse_filter("any", &m);
    ck_assert(match_is_empty(&m));

    parse_filter("ip", &m);
    ck_assert_uint_eq(m.key.ipver, 4);
    ck_assert_uint_eq(m.mask.ipver, 0xff);
    ck_assert_uint_eq(m.mask.proto, 0);

    static const struct {
        const char *name;
        int proto;
    } protos[] = { { "tcp", 6 }, { "udp", 17 }, { "sctp", 132 },
                   { "icmp", 1 } };
    for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
        parse_filter(protos[i].name, &m);
        ck_assert_uint_eq(m.key.ipver, 4);
        ck_assert_uint_eq(m.mask.ipver, 0xff);
        ck_assert_uint_eq(m.key.proto, protos[i].proto);
        ck_assert_uint_eq(m.mask.proto, 0xff);
    }

    parse_filter("dl_type=0x0800", &m);
    ck_assert_uint_eq(m.key.ipver, 4);
    ck_assert_uint_eq(m.mask.ipver, 0xff);
    parse_filter("dl_type=2048,ip,tcp", &m);
    ck_assert_uint_eq(m.key.ipver, 4);
    ck_assert_uint_eq(m.key.proto, 6);

    /* nw_src implies IPv4, like an ovs-ofctl prerequisite. */
    parse_filter("nw_src=10.1.2.3", &m);
    ck_assert_uint_eq(m.key.ipver, 4);
    ck_assert_uint_eq(m.mask.ipver, 0xff);
    ck_assert_uint_eq(m.key.src[0], ip4("10.1.2.3"));
    ck_assert_uint_eq(m.mask.src[0], UINT32_MAX);
    ck_assert(words_zero(m.mask.src, 1));

    parse_filter("nw_src=10.1.2.3/255.255.0.0", &m);
    ck_assert_uint_eq(m.key.src[0], ip4("10.1.0.0"));
    ck_assert_uint_eq(m.mask.src[0], be32(0xffff0000));

    parse_filter("nw_dst=10.1.2.3/255.0.255.0", &m);
    ck_assert_uint_eq(m.key.dst[0], ip4("10.0.2.0"));
    ck_assert_uint_eq(m.mask.dst[0], be32(0xff00ff00));

    parse_filter("nw_dst=10.1.2.3/0", &m);
    ck_assert_uint_eq(m.key.dst[0], 0);
    ck_assert_uint_eq(m.mask.dst[0], 0);
    ck_assert_uint_eq(m.key.ipver, 4);

    parse_filter("nw_dst=10.1.2.3/1", &m);
    ck_assert_uint_eq(m.mask.dst[0], be32(0x80000000));
    ck_assert_uint_eq(m.key.dst[0], 0);

    parse_filter("nw_dst=10.1.2.3/32", &m);
    ck_assert_uint_eq(m.mask.dst[0], UINT32_MAX);

    /* Protocol numbers, ports with masks, white space after commas. */
    parse_filter("nw_proto=17, tp_src=53, tp_dst=0x1000/0xf000", &m);
    ck_assert_uint_eq(m.key.proto, 17);
    ck_assert_uint_eq(m.mask.proto, 0xff);
    ck_assert_uint_eq(m.mask.ipver, 0);
    ck_assert_uint_eq(m.key.sport, 53);
    ck_assert_uint_eq(m.mask.sport, 0xffff);
    ck_assert_uint_eq(m.key.dport, 0x1000);
    ck_assert_uint_eq(m.mask.dport, 0xf000);

    parse_filter("tp_dst=0x1234/0xff00,sctp", &m);
    ck_assert_uint_eq(m.key.dport, 0x1200);
    ck_assert_uint_eq(m.mask.dport, 0xff00);

    parse_filter("tcp,tcp,ip,nw_proto=6,tp_dst=65535", &m);
    ck_assert_uint_eq(m.key.proto, 6);
    ck_assert_uint_eq(m.key.dport, 65535);

    parse_filter("tcp ,ip", &m);
    ck_assert_uint_eq(m.key.proto, 6);

    parse_filter("ip, nw_dst = 10.0.0.1", &m);
    ck_assert_uint_eq(m.key.dst[0], ip4("10.0.0.1"));
}
END_TEST

START_TEST(test_filter_ipv6)
{
    struct tpm_match m;

    parse_filter("ipv6", &m);
    ck_assert_uint_eq(m.key.ipver, 6);
    ck_assert_uint_eq(m.mask.ipver, 0xff);
    ck_assert_uint_eq(m.mask.proto, 0);

    static const struct {
        const char *name;
        int proto;
    } protos[] = { { "tcp6", 6 }, { "udp6", 17 }, { "sctp6", 132 },
                   { "icmp6", 58 } };
    for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
        parse_filter(protos[i].name, &m);
        ck_assert_uint_eq(m.key.ipver, 6);
        ck_assert_uint_eq(m.key.proto, protos[i].proto);
        ck_assert_uint_eq(m.mask.proto, 0xff);
    }

    parse_filter("dl_type=0x86dd", &m);
    ck_assert_uint_eq(m.key.ipver, 6);
    ck_assert_uint_eq(m.mask.ipver, 0xff);

    parse_filter("ipv6_src=2001:db8::/32,tcp6,tp_dst=443", &m);
    ck_assert_uint_eq(m.key.ipver, 6);
    ck_assert_uint_eq(m.key.proto, 6);
    ck_assert_uint_eq(m.key.src[0], be32(0x20010db8));
    ck_assert_uint_eq(m.mask.src[0], UINT32_MAX);
    ck_assert(words_zero(m.mask.src, 1) && words_zero(m.key.src, 1));
    ck_assert_uint_eq(m.key.dport, 443);

    /* Implies IPv6. */
    parse_filter("ipv6_dst=2001:db8::1", &m);
    ck_assert_uint_eq(m.key.ipver, 6);
    ck_assert_uint_eq(m.mask.ipver, 0xff);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(m.mask.dst[i], UINT32_MAX);
    }
    ck_assert_uint_eq(m.key.dst[0], be32(0x20010db8));
    ck_assert_uint_eq(m.key.dst[1], 0);
    ck_assert_uint_eq(m.key.dst[3], be32(1));

    parse_filter("ipv6_dst=2001:db8:1:2:3:4:5:6/72", &m);
    ck_assert_uint_eq(m.mask.dst[0], UINT32_MAX);
    ck_assert_uint_eq(m.mask.dst[1], UINT32_MAX);
    ck_assert_uint_eq(m.mask.dst[2], be32(0xff000000));
    ck_assert_uint_eq(m.mask.dst[3], 0);
    ck_assert_uint_eq(m.key.dst[1], be32(0x00010002));
    ck_assert_uint_eq(m.key.dst[2], be32(0x00000000));

    parse_filter("ipv6_src=::/0,ipv6", &m);
    ck_assert(words_zero(m.mask.src, 0));
    ck_assert_uint_eq(m.key.ipver, 6);
}
END_TEST

/* Groups. */

/* Parses group 'group' and checks that it formats as 'expected' and that
 * the formatted group parses back into the same mask. */
static void
check_group_round_trip(const char *group, const char *expected,
                       bool is_5tuple)
{
    char *text = xasprintf("filter=ip predicate=count() > 0 group=%s",
                           group);
    struct tpm_event *ev = parse_ok(text);
    /* The IP version is part of a group with an address only: IPv4 and
     * IPv6 packets of one port, protocol or tenant are one group. */
    bool addr = !words_zero(ev->group.src, 0)
                || !words_zero(ev->group.dst, 0);
    ck_assert_uint_eq(ev->group.ipver, (addr ? 0xff : 0));
    ck_assert_msg(ev->group_5tuple == is_5tuple, "'%s': group_5tuple %d",
                  group, ev->group_5tuple);

    char *s = tpm_group_to_string(&ev->group);
    ck_assert_msg(!strcmp(s, expected), "'%s' formats as '%s', not '%s'",
                  group, s, expected);

    char *text2 = xasprintf("filter=ip predicate=count() > 0 group=%s", s);
    struct tpm_event *ev2 = parse_ok(text2);
    ck_assert(tpm_key_equal(&ev->group, &ev2->group));
    ck_assert(ev->group_5tuple == ev2->group_5tuple);

    tpm_event_destroy(ev);
    tpm_event_destroy(ev2);
    free(s);
    free(text);
    free(text2);
}

START_TEST(test_group_round_trip)
{
    check_group_round_trip("5tuple", "5tuple", true);
    check_group_round_trip(" 5tuple ", "5tuple", true);
    check_group_round_trip("nw_dst/24", "nw_dst/24", false);
    check_group_round_trip("nw_src,nw_dst", "nw_src,nw_dst", false);
    check_group_round_trip("nw_dst/24,nw_src/24", "nw_src/24,nw_dst/24",
                           false);
    check_group_round_trip("tp_dst,nw_dst/24", "nw_dst/24,tp_dst", false);
    check_group_round_trip("nw_proto, tp_src", "tp_src,nw_proto", false);
    check_group_round_trip("nw_src/32", "nw_src", false);
    check_group_round_trip("nw_src/0", "nw_src/0", false);
    check_group_round_trip("nw_src/0,tp_dst", "tp_dst", false);
    check_group_round_trip("nw_src,nw_dst,tp_src,tp_dst,nw_proto",
                           "nw_src,nw_dst,tp_src,tp_dst,nw_proto", false);
    check_group_round_trip("ipv6_src/128", "ipv6_src", false);
    check_group_round_trip("ipv6_src/64,ipv6_dst/48",
                           "ipv6_src/64,ipv6_dst/48", false);
    check_group_round_trip("ipv6_dst/33", "ipv6_dst/33", false);
    check_group_round_trip("ipv6_src/24", "nw_src/24", false);
    /* The 5-tuple is with the tenant. */
    check_group_round_trip("nw_proto,tp_dst,tp_src,ipv6_dst,ipv6_src",
                           "ipv6_src,ipv6_dst,tp_src,tp_dst,nw_proto", false);
    check_group_round_trip("nw_proto,tp_dst,tun_id,tp_src,ipv6_dst,"
                           "ipv6_src", "5tuple", true);
    check_group_round_trip("tun_id", "tun_id", false);
    check_group_round_trip("nw_dst/24, tun_id", "tun_id,nw_dst/24", false);
    check_group_round_trip("tun_id,nw_src/0", "tun_id", false);
}
END_TEST

/* tun_id in the filter: decimal, hex, masks, the largest VNI; printed
 * back into the same filter; the key's mask untouched. */
static void
check_tun_filter(const char *item, uint32_t vni, uint32_t mask,
                 const char *printed)
{
    char *text = xasprintf("filter=udp,%s,tp_dst=53 predicate=count() > 0",
                           item);
    struct tpm_event *ev = parse_ok(text);
    ck_assert(ev->filter_tun.on);
    ck_assert_uint_eq(ev->filter_tun.vni, vni);
    ck_assert_uint_eq(ev->filter_tun.mask, mask);
    ck_assert_uint_eq(ev->filter.mask.tun, 0);
    ck_assert_uint_eq(ev->filter.key.dport, 53);

    char *s = tpm_tun_filter_to_string(&ev->filter_tun);
    ck_assert_str_eq(s, printed);
    char *text2 = xasprintf("filter=udp,%s,tp_dst=53 predicate=count() > 0",
                            s);
    struct tpm_event *ev2 = parse_ok(text2);
    ck_assert(!memcmp(&ev->filter_tun, &ev2->filter_tun,
                      sizeof ev->filter_tun));
    ck_assert(tpm_key_equal(&ev->filter.key, &ev2->filter.key)
              && tpm_key_equal(&ev->filter.mask, &ev2->filter.mask));
    tpm_event_destroy(ev);
    tpm_event_destroy(ev2);
    free(s);
    free(text);
    free(text2);
}

START_TEST(test_tun_id_filter)
{
    check_tun_filter("tun_id=5000", 5000, 0xffffff, "tun_id=5000");
    check_tun_filter("tun_id=0x1388", 5000, 0xffffff, "tun_id=5000");
    check_tun_filter("tun_id=0", 0, 0xffffff, "tun_id=0");
    check_tun_filter("tun_id=16777215", 0xffffff, 0xffffff,
                     "tun_id=16777215");
    check_tun_filter("tun_id=0xffffff/0xff0000", 0xff0000, 0xff0000,
                     "tun_id=0xff0000/0xff0000");
    check_tun_filter("tun_id = 0x123456/255", 0x56, 0xff,
                     "tun_id=0x56/0xff");
    check_tun_filter("tun_id=7/0", 0, 0, "tun_id=0/0");

    /* Without tun_id= the filter takes any packet, tunnelled or not. */
    struct tpm_event *ev = parse_ok("filter=ip predicate=count() > 0");
    ck_assert(!ev->filter_tun.on);
    char *s = tpm_tun_filter_to_string(&ev->filter_tun);
    ck_assert_str_eq(s, "");
    free(s);
    struct tpm_pkt_tunnel none = { 0 };
    struct tpm_pkt_tunnel vx = { 5000, 50, TPM_TUN_VXLAN, 0 };
    struct tpm_pkt_tunnel gen = { 5001, 58, TPM_TUN_GENEVE, 0 };
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &none));
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &vx));
    tpm_event_destroy(ev);

    /* With it, only the tunnels of its VNIs. */
    ev = parse_ok("filter=ip,tun_id=5000/0xfffffe predicate=count() > 0");
    ck_assert(!tpm_tun_filter_match(&ev->filter_tun, &none));
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &vx));
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &gen));
    gen.vni = 5002;
    ck_assert(!tpm_tun_filter_match(&ev->filter_tun, &gen));
    struct tpm_event *c = tpm_event_clone(ev);
    ck_assert(!memcmp(&c->filter_tun, &ev->filter_tun,
                      sizeof ev->filter_tun));
    tpm_event_destroy(c);
    tpm_event_destroy(ev);

    /* tun_id=0/0: any tunnelled packet. */
    ev = parse_ok("filter=tun_id=0/0 predicate=count() > 0");
    ck_assert(!tpm_tun_filter_match(&ev->filter_tun, &none));
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &gen));
    ck_assert_uint_eq(ev->filter.mask.ipver, 0);
    tpm_event_destroy(ev);
}
END_TEST

static uint32_t
vni_of_slot(const void *aux, uint16_t tun)
{
    (void) aux;
    return 5000 + tun;
}

/* The 'underlay' item: outer flows of tunnels and untunnelled flows,
 * never a tenant's; no tenant in the group; printed back; refused with
 * tun_id= and with a tenant in the group. */
START_TEST(test_underlay_filter)
{
    struct tpm_event *ev = parse_ok("filter=udp,underlay,tp_dst=4789 "
                                    "predicate=count() > 0");
    ck_assert(ev->filter_tun.underlay);
    ck_assert(!ev->filter_tun.on);
    ck_assert_uint_eq(ev->filter.key.dport, 4789);
    ck_assert(ev->group_5tuple);
    ck_assert(!ev->group_tun);
    ck_assert_uint_eq(ev->group.tun, 0);
    ck_assert_uint_eq(ev->group.dport, 0xffff);
    char *str = tpm_tun_filter_to_string(&ev->filter_tun);
    ck_assert_str_eq(str, "underlay");
    free(str);

    struct tpm_pkt_tunnel none = { 0 };
    struct tpm_pkt_tunnel vx = { 5000, 50, TPM_TUN_VXLAN, 0 };
    ck_assert(tpm_tun_filter_match(&ev->filter_tun, &none));
    ck_assert(!tpm_tun_filter_match(&ev->filter_tun, &vx));
    const struct tpm_tun_filter *f = &ev->filter_tun;
    ck_assert(tpm_tun_filter_match_slot(f, 0, vni_of_slot, NULL));
    ck_assert(tpm_tun_filter_match_slot(f, TPM_TUN_UNDERLAY, vni_of_slot,
                                        NULL));
    ck_assert(!tpm_tun_filter_match_slot(f, 1, vni_of_slot, NULL));
    tpm_event_destroy(ev);

    /* Other events never see an outer flow. */
    ev = parse_ok("filter=udp predicate=count() > 0");
    f = &ev->filter_tun;
    ck_assert(tpm_tun_filter_match_slot(f, 0, vni_of_slot, NULL));
    ck_assert(tpm_tun_filter_match_slot(f, 1, vni_of_slot, NULL));
    ck_assert(!tpm_tun_filter_match_slot(f, TPM_TUN_UNDERLAY, vni_of_slot,
                                         NULL));
    tpm_event_destroy(ev);
    ev = parse_ok("filter=udp,tun_id=5001 predicate=count() > 0");
    f = &ev->filter_tun;
    ck_assert(!tpm_tun_filter_match_slot(f, 0, vni_of_slot, NULL));
    ck_assert(tpm_tun_filter_match_slot(f, 1, vni_of_slot, NULL));
    ck_assert(!tpm_tun_filter_match_slot(f, 2, vni_of_slot, NULL));
    ck_assert(!tpm_tun_filter_match_slot(f, TPM_TUN_UNDERLAY, vni_of_slot,
                                         NULL));
    tpm_event_destroy(ev);

    /* A group without the tenant is kept; a 5-tuple loses it. */
    ev = parse_ok("filter=underlay predicate=count() > 0 "
                  "group=nw_dst/24,tp_dst");
    ck_assert_uint_eq(ev->group.tun, 0);
    tpm_event_destroy(ev);

    parse_err("filter=underlay=1 predicate=count() > 0", "filter", 16,
              "unexpected '=' after 'underlay': expected 'underlay' alone");
    parse_err("filter=underlay,ip,underlay predicate=count() > 0", "filter",
              20, "duplicate item 'underlay'");
    parse_err("filter=underlay,tun_id=5 predicate=count() > 0", "filter",
              17, "'tun_id' and 'underlay' exclude each other");
    parse_err("filter=tun_id=5,underlay predicate=count() > 0", "filter",
              17, "'tun_id' and 'underlay' exclude each other");
    parse_err("filter=udp,underlay predicate=count() > 0 group=tun_id,"
              "nw_dst", "group", 49, "'tun_id' in the group of an underlay "
              "event");
}
END_TEST

/* in_port=: the interface's name, kept for the front end to number;
 * group=in_port (alone, in a list, or with 5tuple). */
START_TEST(test_in_port)
{
    struct tpm_event *ev = parse_ok("filter=udp,in_port=vhu-3f.2 "
                                    "predicate=count() > 0");
    ck_assert_str_eq(ev->in_port, "vhu-3f.2");
    ck_assert_uint_eq(ev->in_port_slot, 0);
    ck_assert(!ev->group_port);
    ck_assert(ev->group_5tuple);
    char *msg = tpm_event_refuse_ports(ev, "no interfaces here");
    ck_assert_str_eq(msg, "filter: in_port= names an interface, which only "
                     "the switch that has it knows: no interfaces here");
    free(msg);
    struct tpm_event *c = tpm_event_clone(ev);
    ck_assert_str_eq(c->in_port, "vhu-3f.2");
    ck_assert_ptr_ne(c->in_port, ev->in_port);
    tpm_event_destroy(c);
    tpm_event_destroy(ev);

    static const struct {
        const char *group;
        bool port, five;
        const char *text;
    } groups[] = {
        { "in_port", true, false, "in_port" },
        { "in_port,5tuple", true, true, "in_port,5tuple" },
        { "5tuple,in_port", true, true, "in_port,5tuple" },
        { "nw_dst/24,in_port", true, false, "in_port,nw_dst/24" },
        { "in_port,tun_id", true, false, "in_port,tun_id" },
        { "5tuple", false, true, "5tuple" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(groups); i++) {
        char *text = xasprintf("filter=ip predicate=count() > 0 group=%s",
                               groups[i].group);
        ev = parse_ok(text);
        ck_assert_msg(ev->group_port == groups[i].port, "%s", text);
        ck_assert_msg(ev->group_5tuple == groups[i].five, "%s", text);
        ck_assert_ptr_null(ev->in_port);
        char *g = tpm_event_group_to_string(ev);
        ck_assert_str_eq(g, groups[i].text);
        free(g);
        msg = tpm_event_refuse_ports(ev, "x");
        ck_assert_msg((msg != NULL) == groups[i].port, "%s", text);
        free(msg);
        tpm_event_destroy(ev);
        free(text);
    }
    ev = parse_ok("filter=ip predicate=count() > 0 group=in_port");
    static const uint32_t zero[4];
    ck_assert(!memcmp(ev->group.src, zero, sizeof zero));
    ck_assert_uint_eq(ev->group.ipver, 0);
    tpm_event_destroy(ev);

    char long_name[TPM_PORT_NAME_MAX + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    char *text = xasprintf("filter=in_port=%s predicate=count() > 0",
                           long_name);
    parse_err(text, "filter", 16, "is not an interface name: expected 1 to "
              "63 characters");
    free(text);
    long_name[TPM_PORT_NAME_MAX] = '\0';
    ck_assert(tpm_port_name_valid(long_name));
    ck_assert(!tpm_port_name_valid(""));
    ck_assert(!tpm_port_name_valid("a\tb"));
    ck_assert(!tpm_port_name_valid("caf\xc3\xa9"));
    parse_err("filter=in_port= predicate=count() > 0", "filter", 8,
              "field 'in_port' needs a value");
    parse_err("filter=in_port=a,in_port=b predicate=count() > 0", "filter",
              18, "duplicate field 'in_port'");
    parse_err("filter=ip predicate=count() > 0 group=in_port,in_port",
              "group", 47, "duplicate field 'in_port'");
    parse_err("filter=ip predicate=count() > 0 group=5tuple,nw_dst",
              "group", 46, "unexpected 'nw_dst' after '5tuple'");
    parse_err("filter=ip predicate=count() > 0 group=nw_dst,5tuple",
              "group", 46, "unexpected '5tuple' in a list");
    parse_err("filter=ip predicate=count() > 0 group=5tuple,in_port,5tuple",
              "group", 54, "unexpected '5tuple' in a list");
}
END_TEST

START_TEST(test_tun_id_errors)
{
    parse_err("filter=ip,tun_id=16777216 predicate=count() > 0", "filter",
              18, "'16777216' is not a VNI: expected 0 to 16777215");
    parse_err("filter=ip,tun_id=0x1000000 predicate=count() > 0", "filter",
              18, "'0x1000000' is not a VNI");
    parse_err("filter=ip,tun_id=18446744073709551615 predicate=count() > 0",
              "filter", 18, "is not a VNI");
    parse_err("filter=ip,tun_id=-1 predicate=count() > 0", "filter", 18,
              "'-1' is not a VNI");
    parse_err("filter=ip,tun_id=5x predicate=count() > 0", "filter", 18,
              "'5x' is not a VNI");
    parse_err("filter=ip,tun_id=5/0x1000000 predicate=count() > 0",
              "filter", 20, "'0x1000000' is not a VNI mask: expected 0 to "
              "0xffffff");
    parse_err("filter=ip,tun_id=5/ predicate=count() > 0", "filter", 20,
              "'' is not a VNI mask");
    parse_err("filter=ip,tun_id= predicate=count() > 0", "filter", 11,
              "field 'tun_id' needs a value");
    parse_err("filter=ip,tun_id predicate=count() > 0", "filter", 11,
              "field 'tun_id' needs a value");
    parse_err("filter=tun_id=1,ip,tun_id=2 predicate=count() > 0", "filter",
              20, "duplicate field 'tun_id'");
    parse_err("filter=ip predicate=count() > 0 group=tun_id/24", "group",
              45, "unexpected '/24' after 'tun_id'");
    parse_err("filter=ip predicate=count() > 0 group=tun_id,tun_id", "group",
              46, "duplicate field 'tun_id'");
    parse_err("filter=ip predicate=count() > 0 group=tun_id,5tuple", "group",
              46, "unexpected '5tuple' in a list");
    parse_err("filter=ip predicate=count() > 0 group=tun", "group", 39,
              "unknown field 'tun': expected 5tuple or a list of nw_src, "
              "nw_dst, ipv6_src, ipv6_dst, tp_src, tp_dst, nw_proto, "
              "tun_id and in_port");
}
END_TEST

/* group=tun_id: the tenant slot in the granularity mask, so that two
 * tenants' packets with the same inner fields fall in two groups, and
 * packets that are not tunnelled (slot 0) in a group of their own. */
START_TEST(test_tun_id_group)
{
    struct tpm_event *ev = parse_ok("filter=ip predicate=count() > 0 "
                                    "group=tun_id,nw_dst/24");
    ck_assert(ev->group_tun && !ev->group_5tuple);
    ck_assert_uint_eq(ev->group.tun, 0xffff);
    ck_assert_uint_eq(ev->group.dst[0], htonl(0xffffff00));
    struct tpm_key a, b, ga, gb;
    memset(&a, 0, sizeof a);
    a.ipver = 4;
    a.proto = 6;
    a.dst[0] = htonl(0x0a000001);
    b = a;
    b.tun = 3;
    tpm_key_and(&ga, &a, &ev->group);
    tpm_key_and(&gb, &b, &ev->group);
    ck_assert(!tpm_key_equal(&ga, &gb));
    tpm_event_destroy(ev);

    ev = parse_ok("filter=ip predicate=count() > 0 group=nw_dst/24");
    ck_assert(!ev->group_tun);
    tpm_key_and(&ga, &a, &ev->group);
    tpm_key_and(&gb, &b, &ev->group);
    ck_assert(tpm_key_equal(&ga, &gb));
    tpm_event_destroy(ev);

    ev = parse_ok("filter=ip predicate=count() > 0");
    ck_assert(ev->group_tun && ev->group_5tuple);
    tpm_key_and(&ga, &a, &ev->group);
    tpm_key_and(&gb, &b, &ev->group);
    ck_assert(!tpm_key_equal(&ga, &gb));
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_group_ipv6)
{
    struct tpm_event *ev = parse_ok("filter=ipv6 predicate=count() > 0 "
                                    "group=ipv6_src/64,tp_dst");
    ck_assert(!ev->group_5tuple);
    ck_assert_uint_eq(ev->group.src[0], UINT32_MAX);
    ck_assert_uint_eq(ev->group.src[1], UINT32_MAX);
    ck_assert(words_zero(ev->group.src, 2));
    ck_assert(words_zero(ev->group.dst, 0));
    ck_assert_uint_eq(ev->group.dport, 0xffff);
    ck_assert_uint_eq(ev->group.sport, 0);
    ck_assert_uint_eq(ev->group.ipver, 0xff);
    tpm_event_destroy(ev);

    ev = parse_ok("filter=ipv6 predicate=count() > 0 group=ipv6_dst/100");
    ck_assert_uint_eq(ev->group.dst[2], UINT32_MAX);
    ck_assert_uint_eq(ev->group.dst[3], be32(0xf0000000));
    tpm_event_destroy(ev);

    /* Default granularity. */
    ev = parse_ok("filter=ipv6 predicate=count() > 0");
    check_group_5tuple(ev);
    ck_assert_uint_eq(ev->interval_ns, 10000000);
    tpm_event_destroy(ev);
}
END_TEST

/* Errors. */

/* Every error the parser emits, with the clause and 1-based column it
 * must name and a substring of the message. */
static const struct {
    const char *text;
    const char *clause;
    int col;
    const char *substr;
} error_cases[] = {
    { "filter=ip predicate=sum(volume) >> 125KB",
      "predicate", 33,
      "unknown operator '>>': expected one of" },
    { "filter=ip predicate=sum(volume) > >> 125KB",
      "predicate", 35,
      "unexpected '>>': expected an operand" },
    { "filter=ip predicate=sum(volume) >",
      "predicate", 34,
      "unexpected end of predicate: expected an operand" },
    { "filter=ip predicate=(count() > 1",
      "predicate", 33,
      "unexpected end of predicate: expected ')' to close '(' at column 21" },
    { "filter=ip predicate=sum(volume > 1",
      "predicate", 35,
      "expected ')' to close '(' at column 24" },
    { "filter=ip predicate=sum volume > 1",
      "predicate", 25,
      "unexpected 'volume': expected '(' after 'sum'" },
    { "filter=ip predicate=sum() > 1",
      "predicate", 25,
      "unexpected ')': expected the per-packet term to aggregate, such as su"
      "m(volume)" },
    { "filter=ip predicate=prev 1 > 1",
      "predicate", 26,
      "unexpected '1': expected '(' after 'prev'" },
    { "filter=ip predicate=prev(5) > 1",
      "predicate", 21,
      "'prev(5)' has no aggregate" },
    { "filter=ip predicate=sum(max(ttl)) > 1",
      "predicate", 25,
      "unexpected 'max' inside sum(): expected per-packet variables, numbers"
      " and operators" },
    { "filter=ip predicate=avg(prev(ttl)) > 1",
      "predicate", 25,
      "unexpected 'prev' inside avg()" },
    { "filter=tcp predicate=sum(ack_lastepoch) > 1",
      "predicate", 26,
      "unexpected 'ack_lastepoch' inside sum()" },
    { "filter=ip predicate=prev(prev(sum(bytes))) > 1",
      "predicate", 26,
      "unexpected 'prev' inside prev(): expected an expression without prev("
      ") or _lastepoch" },
    { "filter=tcp predicate=prev(sum(bytes) - ack_lastepoch) > 1",
      "predicate", 40,
      "unexpected 'ack_lastepoch' inside prev()" },
    { "filter=ip predicate=sum(volum) > 1",
      "predicate", 25,
      "unknown name 'volum': expected a variable (packets, bytes," },
    { "filter=ip predicate=count() > 1 > 0",
      "predicate", 33,
      "unexpected '>': comparisons do not chain" },
    { "filter=ip predicate=count() foo > 1",
      "predicate", 29,
      "unexpected 'foo': expected an operator or the end of the predicate" },
    { "filter=ip predicate=count() > 1)",
      "predicate", 32,
      "unexpected ')': expected an operator or the end of the predicate" },
    { "filter=ip predicate=sum(volume) * 2",
      "predicate", 21,
      "'sum(volume) * 2' is not a condition: expected a comparison such as s"
      "um(volume) > 125KB" },
    { "filter=ip predicate=sum(volume) > 125 parsecs",
      "predicate", 39,
      "unknown unit 'parsecs' after '125': expected KB, MB, GB, KiB, MiB, Gi"
      "B, %, ns, us, ms or s" },
    { "filter=ip predicate=sum(volume) > 125kb",
      "predicate", 38,
      "unknown unit 'kb' after '125'" },
    { "filter=ip predicate=sum(volume) > 1e999",
      "predicate", 35,
      "'1e999' is out of range" },
    { "filter=ip predicate=sum 1e999 > 1",
      "predicate", 25,
      "'1e999' is out of range" },
    { "filter=ip predicate=sum(1e999) > 1",
      "predicate", 25,
      "'1e999' is out of range" },
    { "filter=ip predicate=sum(bytes) 1e999 > 1",
      "predicate", 32,
      "'1e999' is out of range" },
    { "filter=ip predicate=count( 1e999) > 1",
      "predicate", 28,
      "'1e999' is out of range" },
    { "filter=ip predicate=prev 1e999 > 1",
      "predicate", 26,
      "'1e999' is out of range" },
    { "filter=ip predicate=prev(1e999) > 1",
      "predicate", 26,
      "'1e999' is out of range" },
    { "filter=ip predicate=prev(count()) 1e999 > 1",
      "predicate", 35,
      "'1e999' is out of range" },
    { "filter=ip predicate=ttl 1e999 > 1",
      "predicate", 25,
      "'1e999' is out of range" },
    { "filter=ip predicate=ttl_lastepoch 1e999 > 1",
      "predicate", 35,
      "'1e999' is out of range" },
    { "filter=ip predicate=5 1e999 > 1",
      "predicate", 23,
      "'1e999' is out of range" },
    { "filter=ip predicate=(1e999 > 1)",
      "predicate", 22,
      "'1e999' is out of range" },
    { "filter=ip predicate=(1 > 1) 1e999",
      "predicate", 29,
      "'1e999' is out of range" },
    { "filter=ip predicate=- 1e999 > 1",
      "predicate", 23,
      "'1e999' is out of range" },
    { "filter=ip predicate=count() > 1 + 1e999",
      "predicate", 35,
      "'1e999' is out of range" },
    { "filter=ip predicate=count() > 1e999",
      "predicate", 31,
      "'1e999' is out of range" },
    { "filter=ip predicate=count() > 1 && 1e999",
      "predicate", 36,
      "'1e999' is out of range" },
    { "filter=ip predicate=1e999",
      "predicate", 21,
      "'1e999' is out of range" },
    { "filter=ip predicate=prev(sum(bytes) > 1",
      "predicate", 40,
      "unexpected end of predicate: expected ')' to close '(' at column 25" },
    { "filter=ip predicate=prev(sum(bytes) >> 1) > 1",
      "predicate", 37,
      "unknown operator '>>'" },
    { "filter=tcp,tp_dst=99999999999999999999999 predicate=count() > 1",
      "filter", 19,
      "is not a port" },
    { "filter=ip predicate=count() > - )",
      "predicate", 33,
      "unexpected ')': expected an operand" },
    { "filter=tcp,tp_src=http predicate=count() > 1",
      "filter", 19,
      "'http' is not a port" },
    { "filter=ip predicate=sum(volume) > 1 @ 2",
      "predicate", 37,
      "unexpected '@': expected an operator or the end" },
    { "filter=ip predicate=count() = 1",
      "predicate", 29,
      "unknown operator '='" },
    { "filter=ip predicate=count() > 1 and or count() < 2",
      "predicate", 37,
      "unexpected 'or': expected an operand" },
    { "filter=ip predicate=count() > \x01",
      "predicate", 31,
      "unexpected character 0x01: expected an operand" },
    { "filter=nw_dest=10.0.0.1 predicate=count() > 1",
      "filter", 8,
      "unknown field 'nw_dest': expected one of ip, ipv6, tcp, " },
    { "filter=nw_dst=10.0.0.300 predicate=count() > 1",
      "filter", 15,
      "'10.0.0.300' is not an IPv4 address" },
    { "filter=nw_dst=10.0.0.0/33 predicate=count() > 1",
      "filter", 24,
      "'33' is not a prefix length: expected 0 to 32" },
    { "filter=nw_dst=10.0.0.0/255.0.255.256 predicate=count() > 1",
      "filter", 24,
      "'255.0.255.256' is not an IPv4 netmask" },
    { "filter=ipv6_src=2001:db8::zz predicate=count() > 1",
      "filter", 17,
      "'2001:db8::zz' is not an IPv6 address" },
    { "filter=ipv6_src=2001:db8::/129 predicate=count() > 1",
      "filter", 28,
      "'129' is not a prefix length: expected 0 to 128" },
    { "filter=tcp,tp_dst=65536 predicate=count() > 1",
      "filter", 19,
      "'65536' is not a port: expected 0 to 65535" },
    { "filter=tcp,tp_dst=80/0x10000 predicate=count() > 1",
      "filter", 22,
      "'0x10000' is not a port mask" },
    { "filter=tcp,tcp=1 predicate=count() > 1",
      "filter", 15,
      "unexpected '=' after 'tcp'" },
    { "filter=any=1 predicate=count() > 1",
      "filter", 11,
      "unexpected '=' after 'any'" },
    { "filter=nw_src predicate=count() > 1",
      "filter", 8,
      "field 'nw_src' needs a value: expected nw_src=VALUE" },
    { "filter=ip,nw_dst= predicate=count() > 1",
      "filter", 11,
      "field 'nw_dst' needs a value" },
    { "filter=nw_src=1.1.1.1,nw_src=2.2.2.2 predicate=count() > 1",
      "filter", 23,
      "duplicate field 'nw_src'" },
    { "filter=dl_type=0x0806 predicate=count() > 1",
      "filter", 16,
      "'0x0806' is not a supported dl_type" },
    { "filter=nw_proto=256 predicate=count() > 1",
      "filter", 17,
      "'256' is not an IP protocol number" },
    { "filter=tcp,=5 predicate=count() > 1",
      "filter", 12,
      "unexpected '=': expected a field name" },
    { "filter=ip,tp_dst=80 predicate=count() > 1",
      "filter", 11,
      "'tp_dst' needs a protocol with ports" },
    { "filter=icmp,tp_src=3 predicate=count() > 1",
      "filter", 13,
      "'tp_src' needs a protocol with ports" },
    { "filter=ip,ipv6 predicate=count() > 1",
      "filter", 11,
      "'ipv6' (IPv6) conflicts with 'ip' (IPv4)" },
    { "filter=ipv6,nw_src=10.0.0.1 predicate=count() > 1",
      "filter", 13,
      "'nw_src' (IPv4) conflicts with 'ipv6' (IPv6)" },
    { "filter=tcp,udp predicate=count() > 1",
      "filter", 12,
      "'udp' (protocol 17) conflicts with 'tcp' (protocol 6)" },
    { "filter=tcp,,ip predicate=count() > 1",
      "filter", 12,
      "unexpected ',': expected a field" },
    { "filter=tcp, predicate=count() > 1",
      "filter", 12,
      "unexpected end of filter: expected a field" },
    { "filter=ip predicate=count() > 1 group=5tuple,tp_dst",
      "group", 46,
      "unexpected 'tp_dst' after '5tuple'" },
    { "filter=ip predicate=count() > 1 group=nw_dest",
      "group", 39,
      "unknown field 'nw_dest': expected 5tuple or a list" },
    { "filter=ip predicate=count() > 1 group=nw_src,nw_src",
      "group", 46,
      "duplicate field 'nw_src'" },
    { "filter=ip predicate=count() > 1 group=nw_src,ipv6_src/64",
      "group", 46,
      "'ipv6_src' conflicts with 'nw_src'" },
    { "filter=ip predicate=count() > 1 group=tp_dst/8",
      "group", 45,
      "unexpected '/8' after 'tp_dst'" },
    { "filter=ip predicate=count() > 1 group=nw_dst/33",
      "group", 46,
      "'33' is not a prefix length: expected 0 to 32" },
    { "filter=ip predicate=count() > 1 group=ipv6_dst/129",
      "group", 48,
      "'129' is not a prefix length: expected 0 to 128" },
    { "filter=ip predicate=count() > 1 group=nw_dst/-1",
      "group", 46,
      "'-1' is not a prefix length" },
    { "filter=ip predicate=count() > 1 group=",
      "group", 39,
      "unexpected end of group: expected 5tuple or a list" },
    { "filter=ip predicate=count() > 1 group=nw_src,,nw_dst",
      "group", 46,
      "unexpected ',': expected 5tuple or a list" },
    { "filter=ip predicate=count() > 1 interval=15 parsecs",
      "interval", 42,
      "'15 parsecs' is not a time: expected a number with a unit ns, us, ms "
      "or s, such as 10ms" },
    { "filter=ip predicate=count() > 1 interval=0ms",
      "interval", 42,
      "'0ms' is not positive" },
    { "filter=ip predicate=count() > 1 interval=18446744074s",
      "interval", 42,
      "'18446744074s' is too long: expected at most 18446744073s" },
    { "filtr=tcp predicate=count() > 1",
      "definition", 1,
      "unknown clause 'filtr=': expected filter=, predicate=, group= or inte"
      "rval=" },
    { "filter=tcp predicate=count() > 1 grp=5tuple",
      "definition", 34,
      "unknown clause 'grp='" },
    { "foo filter=tcp predicate=count() > 1",
      "definition", 1,
      "unexpected 'foo': expected a clause filter=" },
    { "filter=tcp predicate=count() > 1 filter=udp",
      "filter", 34,
      "duplicate clause 'filter=': expected each clause at most once" },
    { "predicate=count() > 1",
      "filter", 22,
      "unexpected end of definition: expected a filter= clause" },
    { "",
      "filter", 1,
      "expected a filter= clause" },
    { "filter=tcp",
      "predicate", 11,
      "expected a predicate= clause" },
    { "filter=tcp predicate= group=5tuple",
      "predicate", 22,
      "unexpected end of predicate: expected an operand" },
};

START_TEST(test_errors)
{
    parse_err(error_cases[_i].text, error_cases[_i].clause,
              error_cases[_i].col, error_cases[_i].substr);
}
END_TEST

/* A clause given twice is refused wherever the repeat stands (next to
 * the first or not), with the clause and the repeat's column, and nothing
 * leaks (valgrind). */
/* Extension clauses: declared by the front end, split off by the one
 * lexer with their columns, blanked out of the local definition. */
START_TEST(test_extension_clauses)
{
    static const char *const names[] = { "scope", "across", "then" };
    const char *text = "filter=udp,nw_dst=10.0.0.0/8 across=sum  "
                       "predicate=sum(volume) > 1MB scope=all group=nw_dst";
    struct tpm_event_ext x = { .n = 3, .names = names };
    struct tpm_event *ev;

    char *error = tpm_event_parse_ext("e", text, &x, &ev);
    ck_assert_msg(!error, "%s", error);
    ck_assert_str_eq(x.values[0], "all");
    ck_assert_int_eq(x.cols[0], (int) (strstr(text, "scope=") - text) + 7);
    ck_assert_str_eq(x.values[1], "sum");
    ck_assert_int_eq(x.cols[1], (int) (strstr(text, "across=") - text) + 8);
    ck_assert_ptr_null(x.values[2]);
    /* Same length, the extension clauses blanked, the rest in place. */
    ck_assert_uint_eq(strlen(x.local), strlen(text));
    ck_assert_ptr_null(strstr(x.local, "across"));
    ck_assert_ptr_null(strstr(x.local, "scope"));
    ck_assert_int_eq(strstr(x.local, "group=") - x.local,
                     strstr(text, "group=") - text);
    ck_assert_int_eq(ev->threshold->num, 1000000);
    ck_assert(!ev->group_5tuple);
    tpm_event_ext_clear(&x);

    /* The local definition parses alone to the same event. */
    struct tpm_event *local;
    error = tpm_event_parse("e", "filter=udp,nw_dst=10.0.0.0/8 "
                            "predicate=sum(volume) > 1MB group=nw_dst",
                            &local);
    ck_assert_msg(!error, "%s", error);
    char *a = tpm_expr_to_string(ev->pred);
    char *b = tpm_expr_to_string(local->pred);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    ck_assert(!memcmp(&ev->filter, &local->filter, sizeof ev->filter));
    ck_assert(!memcmp(&ev->group, &local->group, sizeof ev->group));
    ck_assert_uint_eq(ev->interval_ns, local->interval_ns);
    tpm_event_destroy(local);
    tpm_event_destroy(ev);

    static const struct {
        const char *text;
        const char *error;
    } bad[] = {
        { "filter=ip across=sum predicate=count() > 1 across=max",
          "across: column 44: duplicate clause 'across=': expected each "
          "clause at most once" },
        { "filter=ip across=sum across=max predicate=count() > 1",
          "across: column 22: duplicate clause 'across=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 1 standby=yes",
          "definition: column 33: unknown clause 'standby=': expected "
          "filter=, predicate=, group=, interval=, scope=, across= or "
          "then=" },
        { "scope=all",
          "filter: column 10: unexpected end of definition: expected a "
          "filter= clause, as in filter=tcp predicate=sum(volume) > 125KB" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct tpm_event_ext y = { .n = 3, .names = names };
        error = tpm_event_parse_ext("e", bad[i].text, &y, &ev);
        ck_assert_msg(error && !strcmp(error, bad[i].error),
                      "%s: got '%s', expected '%s'", bad[i].text,
                      error ? error : "(none)", bad[i].error);
        ck_assert_ptr_null(ev);
        ck_assert_ptr_null(y.values);
        ck_assert_ptr_null(y.local);
        free(error);
    }

    /* Without the declaration, the language's own error. */
    error = tpm_event_parse("e", "filter=ip predicate=count() > 1 "
                            "scope=all", &ev);
    ck_assert_str_eq(error, "definition: column 33: unknown clause "
                     "'scope=': expected filter=, predicate=, group= or "
                     "interval=");
    free(error);
}
END_TEST

START_TEST(test_duplicate_clauses)
{
    static const struct {
        const char *text;
        const char *error;
    } cases[] = {
        /* Adjacent. */
        { "filter=ip filter=ipv6 predicate=count() > 1",
          "filter: column 11: duplicate clause 'filter=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 1 predicate=count() > 2",
          "predicate: column 33: duplicate clause 'predicate=': expected "
          "each clause at most once" },
        { "filter=ip predicate=count() > 1 group=5tuple group=nw_src",
          "group: column 46: duplicate clause 'group=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 1 interval=10ms interval=20ms",
          "interval: column 47: duplicate clause 'interval=': expected "
          "each clause at most once" },
        { "filter=ip\tfilter=ip predicate=count() > 1",
          "filter: column 11: duplicate clause 'filter=': expected each "
          "clause at most once" },
        { "filter=ip filter=ip filter=ip predicate=count() > 1",
          "filter: column 11: duplicate clause 'filter=': expected each "
          "clause at most once" },
        { "filter=ip predicate= predicate=count() > 1",
          "predicate: column 22: duplicate clause 'predicate=': expected "
          "each clause at most once" },
        /* Not adjacent. */
        { "filter=tcp predicate=count() > 1 filter=udp",
          "filter: column 34: duplicate clause 'filter=': expected each "
          "clause at most once" },
        { "predicate=count() > 1 filter=ip predicate=count() > 2",
          "predicate: column 33: duplicate clause 'predicate=': expected "
          "each clause at most once" },
        { "group=5tuple filter=ip group=nw_src predicate=count() > 1",
          "group: column 24: duplicate clause 'group=': expected each "
          "clause at most once" },
        { "interval=10ms filter=ip predicate=count() > 1 interval=20ms",
          "interval: column 47: duplicate clause 'interval=': expected "
          "each clause at most once" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tpm_event *ev = (struct tpm_event *) 1;
        char *error = tpm_event_parse("e", cases[i].text, &ev);
        ck_assert_msg(error != NULL, "'%s' accepted", cases[i].text);
        ck_assert_str_eq(error, cases[i].error);
        ck_assert_ptr_null(ev);
        free(error);
    }
}
END_TEST

/* The messages quoted in docs/event-language.md. */
START_TEST(test_error_messages_exact)
{
    static const struct {
        const char *text;
        const char *error;
    } cases[] = {
        { "filter=ip predicate=sum(volume) > >> 125KB",
          "predicate: column 35: unexpected '>>': expected an operand" },
        { "filter=nw_dest=10.0.0.1 predicate=count() > 1",
          "filter: column 8: unknown field 'nw_dest': expected one of ip, "
          "ipv6, tcp, udp, sctp, icmp, tcp6, udp6, sctp6, icmp6, dl_type, "
          "nw_proto, nw_src, nw_dst, ipv6_src, ipv6_dst, tp_src, tp_dst, "
          "tun_id, in_port, underlay or any" },
        { "filter=tcp predicate=sum(volume) > 1MB interval=15 parsecs",
          "interval: column 49: '15 parsecs' is not a time: expected a "
          "number with a unit ns, us, ms or s, such as 10ms" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tpm_event *ev;
        char *error = tpm_event_parse("e", cases[i].text, &ev);
        ck_assert_ptr_nonnull(error);
        ck_assert_str_eq(error, cases[i].error);
        ck_assert_ptr_null(ev);
        free(error);
    }
}
END_TEST

START_TEST(test_names)
{
    static const char *const good[] = {
        "a", "heavy-flows_1.v2", "A-Z.a-z_0-9",
        "123456789012345678901234567890123456789012345678901234567890123",
    };
    static const char *const bad[] = {
        "", "a b", "a/b", "caf\xc3\xa9", "x=1",
        "1234567890123456789012345678901234567890123456789012345678901234",
    };

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct tpm_event *ev;
        char *error = tpm_event_parse(good[i], "filter=ip predicate=count()"
                                      " > 0", &ev);
        ck_assert_msg(!error, "'%s': %s", good[i], error);
        ck_assert_str_eq(ev->name, good[i]);
        tpm_event_destroy(ev);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct tpm_event *ev = (struct tpm_event *) 1;
        char *error = tpm_event_parse(bad[i], "filter=ip predicate=count()"
                                      " > 0", &ev);
        ck_assert_msg(error != NULL, "'%s' accepted", bad[i]);
        ck_assert_ptr_null(ev);
        ck_assert_msg(!strncmp(error, "name: '", 7)
                      && strstr(error, "is not a valid event name: "
                                "expected 1 to 63 characters"),
                      "'%s': %s", bad[i], error);
        free(error);
    }

    struct tpm_event *ev = (struct tpm_event *) 1;
    char *error = tpm_event_parse(NULL, "filter=ip predicate=count() > 0",
                                  &ev);
    ck_assert_ptr_nonnull(error);
    ck_assert_ptr_null(ev);
    free(error);
}
END_TEST

START_TEST(test_parse_line)
{
    static const char *const empty[] = {
        "", "   ", "\n", "\t \n", "# a comment", "   # indented comment",
        "#filter=ip predicate=count() > 0",
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        struct tpm_event *ev = (struct tpm_event *) 1;
        char *error = tpm_event_parse_line(empty[i], &ev);
        ck_assert_ptr_null(error);
        ck_assert_ptr_null(ev);
    }

    struct tpm_event *ev;
    char *error = tpm_event_parse_line(
        "  heavy\tfilter=tcp predicate=sum(volume) > 1MB group=nw_dst/24 \n",
        &ev);
    ck_assert_ptr_null(error);
    ck_assert_str_eq(ev->name, "heavy");
    ck_assert_str_eq(ev->text,
                     "filter=tcp predicate=sum(volume) > 1MB group=nw_dst/24");
    ck_assert_double_eq(ev->threshold->num, 1e6);
    check_group_string(ev, "nw_dst/24");
    tpm_event_destroy(ev);

    /* Columns count from the start of the definition. */
    ev = (struct tpm_event *) 1;
    error = tpm_event_parse_line("ev1   filter=tcp predicate=sum(volume) "
                                 ">> 1", &ev);
    ck_assert_ptr_null(ev);
    ck_assert_str_eq(error, "predicate: column 34: unknown operator '>>': "
                     "expected one of + - * / < <= > >= == != && || and "
                     "or");
    free(error);

    ev = (struct tpm_event *) 1;
    error = tpm_event_parse_line("  lonely  \n", &ev);
    ck_assert_ptr_null(ev);
    ck_assert_ptr_nonnull(error);
    ck_assert(strstr(error, "definition: column 1: unexpected end of line: "
                     "expected a definition after event name 'lonely'"));
    free(error);

    ev = (struct tpm_event *) 1;
    error = tpm_event_parse_line("bad!name filter=ip predicate=count() > 0",
                                 &ev);
    ck_assert_ptr_null(ev);
    ck_assert_ptr_nonnull(error);
    ck_assert(strstr(error, "name: 'bad!name' is not a valid event name"));
    free(error);
}
END_TEST

/* Clauses in any order, white space, defaults. */
START_TEST(test_clauses)
{
    struct tpm_event *ev = parse_ok("  interval=250us\tgroup=tp_dst  "
                                    "predicate=count() > 0 filter=udp  ");
    ck_assert_uint_eq(ev->interval_ns, 250000);
    check_group_string(ev, "tp_dst");
    ck_assert_uint_eq(ev->filter.key.proto, 17);
    check_value_string(ev, "count()");
    tpm_event_destroy(ev);

    /* "==" after a name is not a clause; "word=" after a comma continues
     * a list. */
    ev = parse_ok("filter=tcp, tp_dst=80 predicate=ttl== 5 || ttl!=6");
    ck_assert_uint_eq(ev->filter.key.dport, 80);
    check_value_string(ev, "ttl");
    tpm_event_destroy(ev);

    /* A clause keyword must follow white space. */
    ev = parse_ok("filter=ip predicate=count(ttl>1)>0");
    check_value_string(ev, "count((ttl > 1))");
    tpm_event_destroy(ev);

    ev = parse_ok("filter= predicate=count() > 0 interval=3 s");
    ck_assert(match_is_empty(&ev->filter));
    ck_assert_uint_eq(ev->interval_ns, 3000000000ull);
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_clone)
{
    struct tpm_event *ev = parse_ok(
        "filter=tcp,nw_dst=10.0.128.0/24 predicate=count() > 1 && "
        "1 - (ack - ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) "
        "> 0.5 group=nw_dst/24,tp_dst interval=20ms");
    struct tpm_event *c = tpm_event_clone(ev);

    ck_assert_ptr_ne(c, ev);
    ck_assert_ptr_ne(c->name, ev->name);
    ck_assert_str_eq(c->name, ev->name);
    ck_assert_ptr_ne(c->text, ev->text);
    ck_assert_str_eq(c->text, ev->text);
    ck_assert(!memcmp(&c->filter, &ev->filter, sizeof c->filter));
    ck_assert(tpm_key_equal(&c->group, &ev->group));
    ck_assert(c->group_5tuple == ev->group_5tuple);
    ck_assert_uint_eq(c->interval_ns, 20000000);
    ck_assert_ptr_ne(c->pred, ev->pred);
    ck_assert(tpm_expr_equal(c->pred, ev->pred));

    /* 'value' and 'threshold' point into the clone. */
    ck_assert_ptr_eq(c->value, c->pred->a->a);
    ck_assert_ptr_eq(c->threshold, c->pred->a->b);
    ck_assert_int_eq(c->pred->a->pos, ev->pred->a->pos);

    tpm_event_destroy(ev);
    ck_assert(tpm_event_set_threshold(c, 7));
    ck_assert_double_eq(c->threshold->num, 7);
    check_value_string(c, "count()");
    ck_assert(tpm_event_needs_tcp_state(c));
    tpm_event_destroy(c);

    /* A bare term, as the monitor clones per-packet terms. */
    struct tpm_event *tmp_ev = parse_ok("filter=ip predicate=sum(bytes * 2)"
                                        " > 0");
    struct tpm_event tmp = { .pred = tmp_ev->pred->a->a };
    c = tpm_event_clone(&tmp);
    ck_assert_ptr_null(c->name);
    ck_assert_ptr_null(c->text);
    ck_assert(tpm_expr_equal(c->pred, tmp.pred));
    ck_assert_ptr_eq(c->value, c->pred);
    ck_assert_ptr_null(c->threshold);
    ck_assert(!tpm_event_set_threshold(c, 1));
    tpm_event_destroy(c);
    tpm_event_destroy(tmp_ev);
}
END_TEST

START_TEST(test_set_threshold)
{
    struct tpm_event *ev = parse_ok("filter=ip predicate=sum(volume) > "
                                    "125KB");
    ck_assert(tpm_event_set_threshold(ev, 62500));
    ck_assert_double_eq(ev->threshold->num, 62500);
    char *s = tpm_expr_to_string(ev->pred);
    ck_assert_str_eq(s, "(sum(volume) > 62500)");
    free(s);
    tpm_event_destroy(ev);

    ev = parse_ok("filter=ip predicate=sum(volume) > max(bytes)");
    ck_assert_ptr_null(ev->threshold);
    ck_assert(!tpm_event_set_threshold(ev, 1));
    tpm_event_destroy(ev);
}
END_TEST

START_TEST(test_time)
{
    static const struct {
        const char *s;
        uint64_t ns;
    } good[] = {
        { "10ms", 10000000 }, { "1s", 1000000000 }, { "250us", 250000 },
        { "7ns", 7 }, { "10 ms", 10000000 }, { "1500ms", 1500000000 },
        { "18446744073709551615ns", UINT64_MAX },
        { "18446744073s", 18446744073000000000ull },
    };
    static const struct {
        const char *s;
        const char *error;
    } bad[] = {
        { "", "'' is not a time: expected a number with a unit" },
        { "ms", "'ms' is not a time" },
        { "10", "'10' is not a time" },
        { "10 parsecs", "'10 parsecs' is not a time" },
        { "-1ms", "'-1ms' is not a time" },
        { "1.5ms", "'1.5ms' is not a time" },
        { "10ms ", "'10ms ' is not a time" },
        { "0ms", "'0ms' is not positive: expected a time greater than zero" },
        { "18446744074s", "'18446744074s' is too long: expected at most "
          "18446744073s" },
        { "18446744073709551616ns", "is too long" },
        { "99999999999999999999999us", "is too long" },
    };

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t ns = 0;
        char *error = tpm_parse_time(good[i].s, &ns);
        ck_assert_msg(!error, "'%s': %s", good[i].s, error);
        ck_assert_uint_eq(ns, good[i].ns);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ns = 42;
        char *error = tpm_parse_time(bad[i].s, &ns);
        ck_assert_msg(error && strstr(error, bad[i].error),
                      "'%s': %s", bad[i].s, error);
        ck_assert_uint_eq(ns, 42);
        free(error);
    }

    char buf[32];
    ck_assert_str_eq(tpm_time_format(10000000, buf, sizeof buf), "10ms");
    ck_assert_str_eq(tpm_time_format(1000000000, buf, sizeof buf), "1s");
    ck_assert_str_eq(tpm_time_format(250000, buf, sizeof buf), "250us");
    ck_assert_str_eq(tpm_time_format(7, buf, sizeof buf), "7ns");
    ck_assert_str_eq(tpm_time_format(1500000, buf, sizeof buf), "1500us");
    ck_assert_str_eq(tpm_time_format(60000000000ull, buf, sizeof buf),
                     "60s");
    ck_assert_str_eq(tpm_time_format(0, buf, sizeof buf), "0ns");
}
END_TEST

START_TEST(test_names_tables)
{
    static const char *const vars[] = {
        "packets", "bytes", "volume", "ttl", "ecn", "rwnd", "is_lost",
        "is_burst", "rtt", "seq", "ack", "dup",
    };
    ck_assert_int_eq(sizeof vars / sizeof vars[0], TPM_N_VARS);
    for (int i = 0; i < TPM_N_VARS; i++) {
        ck_assert_str_eq(tpm_var_name(i), vars[i]);
        ck_assert(tpm_var_needs_tcp_state(i) == (i >= TPM_VAR_RWND));

        /* Every variable parses, bare and inside an aggregate. */
        char *text = xasprintf("filter=tcp predicate=%s > 0 && "
                               "max(%s) > %s_lastepoch", vars[i], vars[i],
                               vars[i]);
        struct tpm_event *ev = parse_ok(text);
        ck_assert(tpm_event_needs_tcp_state(ev)
                  == tpm_var_needs_tcp_state(i));
        ck_assert_int_eq(ev->value->agg, TPM_AGG_LAST);
        ck_assert_int_eq(ev->value->a->var, i);
        tpm_event_destroy(ev);
        free(text);
    }

    static const char *const aggs[] = {
        "sum", "count", "avg", "min", "max", "stddev", "last",
    };
    for (int i = 0; i < TPM_N_AGGS; i++) {
        ck_assert_str_eq(tpm_agg_name(i), aggs[i]);
    }
    ck_assert_str_eq(tpm_var_name(TPM_N_VARS), "?");
    ck_assert_str_eq(tpm_agg_name(TPM_N_AGGS), "?");
}
END_TEST

START_TEST(test_expr_equal)
{
    struct tpm_event *a = parse_ok("filter=ip predicate=sum(bytes * 2 + "
                                   "(ttl < 3)) > 0");
    struct tpm_event *b = parse_ok("filter=ip predicate=   sum( bytes*2+"
                                   "(ttl<3) ) > 1");
    struct tpm_event *c = parse_ok("filter=ip predicate=sum(bytes * 2 + "
                                   "(ttl <= 3)) > 0");
    struct tpm_event *d = parse_ok("filter=ip predicate=sum(bytes * 3 + "
                                   "(ttl < 3)) > 0");

    ck_assert(tpm_expr_equal(NULL, NULL));
    ck_assert(!tpm_expr_equal(a->value->a, NULL));
    ck_assert(!tpm_expr_equal(NULL, a->value->a));
    ck_assert(tpm_expr_equal(a->value->a, b->value->a));
    ck_assert(tpm_expr_equal(a->value, b->value));
    ck_assert(!tpm_expr_equal(a->pred, b->pred));
    ck_assert(!tpm_expr_equal(a->value->a, c->value->a));
    ck_assert(!tpm_expr_equal(a->value->a, d->value->a));
    ck_assert(!tpm_expr_equal(a->value->a, a->value));
    tpm_event_destroy(a);
    tpm_event_destroy(b);
    tpm_event_destroy(c);
    tpm_event_destroy(d);
}
END_TEST

START_TEST(test_expr_clone)
{
    struct tpm_event *ev = parse_ok("filter=ip predicate=sum(bytes * 2 + "
                                    "(ttl < 3)) > prev(count())");
    struct tpm_expr *c = tpm_expr_clone(ev->pred);
    ck_assert_ptr_ne(c, ev->pred);
    ck_assert(tpm_expr_equal(c, ev->pred));
    ck_assert_int_eq(c->pos, ev->pred->pos);
    tpm_event_destroy(ev);

    char *s = tpm_expr_to_string(c);
    ck_assert_str_eq(s, "(sum(((bytes * 2) + (ttl < 3))) > prev(count()))");
    free(s);
    tpm_expr_destroy(c);

    ck_assert_ptr_null(tpm_expr_clone(NULL));
    tpm_expr_destroy(NULL);
}
END_TEST

/* lib/json-number.h, the one JSON number rule, against printf: integral
 * values within 2^53 as printf's %lld (written by hand there), others as
 * %.17g, non-finite ones as null. */
START_TEST(test_json_number)
{
    static const double cases[] = {
        0, -0.0, 1, -1, 9, 10, 99, 100, 12345, -987654321, 4294967296.0,
        9007199254740991.0, -9007199254740991.0, 9007199254740992.0,
        1e300, 0.5, -2.25, 1.0 / 3, 125000, 1e-300,
    };
    char buf[TPM_JSON_NUMBER_LEN], want[64];

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        double v = cases[i];
        if (v == floor(v) && fabs(v) < 9007199254740992.0) {
            snprintf(want, sizeof want, "%lld", (long long) v);
        } else {
            snprintf(want, sizeof want, "%.17g", v);
        }
        ck_assert_str_eq(tpm_json_number(v, buf), want);
    }
    /* Every power of ten and its neighbours, both signs. */
    for (long long p = 1; p < 1000000000000000LL; p *= 10) {
        for (long long d = -1; d <= 1; d++) {
            for (int sign = -1; sign <= 1; sign += 2) {
                long long x = sign * (p + d);
                snprintf(want, sizeof want, "%lld", x);
                ck_assert_str_eq(tpm_json_number((double) x, buf), want);
            }
        }
    }
    /* Integers of the whole int64 range, as the TEM's alerts write them. */
    static const int64_t ints[] = { 0, -1, 7, INT64_MAX, INT64_MIN,
                                    -9007199254740993LL };
    for (size_t i = 0; i < ARRAY_SIZE(ints); i++) {
        snprintf(want, sizeof want, "%lld", (long long) ints[i]);
        ck_assert_uint_eq(tpm_json_int(ints[i], buf), strlen(want));
        ck_assert_str_eq(buf, want);
    }
    ck_assert_str_eq(tpm_json_number(NAN, buf), "null");
    ck_assert_str_eq(tpm_json_number(INFINITY, buf), "null");
    ck_assert_str_eq(tpm_json_number(-INFINITY, buf), "null");
}
END_TEST

static Suite *
event_suite(void)
{
    Suite *s = suite_create("event");

    TCase *tc = tcase_create("table2");
    tcase_add_test(tc, test_json_number);
    tcase_add_test(tc, test_table2_heavy_flows);
    tcase_add_test(tc, test_table2_burst_loss);
    tcase_add_test(tc, test_table2_congestion);
    tcase_add_test(tc, test_table2_load_spike);
    tcase_add_test(tc, test_table2_reachability);
    tcase_add_test(tc, test_table2_dependencies);
    suite_add_tcase(s, tc);

    tc = tcase_create("predicate");
    tcase_add_test(tc, test_units);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_to_string_round_trip);
    tcase_add_test(tc, test_eval);
    tcase_add_test(tc, test_eval_prev);
    tcase_add_test(tc, test_eval_pkt);
    tcase_add_test(tc, test_for_each_agg);
    tcase_add_test(tc, test_positions);
    tcase_add_test(tc, test_value_threshold);
    tcase_add_test(tc, test_expr_equal);
    tcase_add_test(tc, test_expr_clone);
    suite_add_tcase(s, tc);

    tc = tcase_create("filter-group");
    tcase_add_test(tc, test_filter_ipv4);
    tcase_add_test(tc, test_filter_ipv6);
    tcase_add_test(tc, test_group_round_trip);
    tcase_add_test(tc, test_tun_id_filter);
    tcase_add_test(tc, test_tun_id_errors);
    tcase_add_test(tc, test_underlay_filter);
    tcase_add_test(tc, test_in_port);
    tcase_add_test(tc, test_tun_id_group);
    tcase_add_test(tc, test_group_ipv6);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_errors, 0,
                        sizeof error_cases / sizeof error_cases[0]);
    tcase_add_test(tc, test_error_messages_exact);
    tcase_add_test(tc, test_duplicate_clauses);
    tcase_add_test(tc, test_extension_clauses);
    tcase_add_test(tc, test_names);
    suite_add_tcase(s, tc);

    tc = tcase_create("event");
    tcase_add_test(tc, test_parse_line);
    tcase_add_test(tc, test_clauses);
    tcase_add_test(tc, test_clone);
    tcase_add_test(tc, test_set_threshold);
    tcase_add_test(tc, test_time);
    tcase_add_test(tc, test_names_tables);
    suite_add_tcase(s, tc);

    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(event_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
