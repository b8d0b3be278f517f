/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event language: one parser for every front end (tpm-replay,
 * ovs-appctl tpm/event-add, the TEM and its client).
 *
 * An event is (filter, predicate, flow granularity, time interval), as in
 * section 3 of the Trumpet paper.  Its text form is a sequence of
 * "key=value" clauses separated by white space:
 *
 *     filter=tcp,nw_dst=10.0.128.0/24 predicate=sum(volume) > 125KB
 *         group=5tuple interval=10ms
 *
 *   filter=     OVS match syntax (ovs-ofctl field names): protocol
 *               shorthands ip, ipv6, tcp, udp, sctp, icmp, tcp6, udp6,
 *               sctp6, icmp6; fields dl_type, nw_proto, nw_src, nw_dst
 *               (address, address/prefix or address/mask), ipv6_src,
 *               ipv6_dst (address or address/prefix), tp_src, tp_dst
 *               (value or value/mask), tun_id (a VXLAN or Geneve VNI:
 *               value or value/mask, at most 0xffffff; only packets
 *               decapsulated from such a tunnel match it), in_port (the
 *               name of the interface a packet was received on: a
 *               front end that knows interfaces resolves it, see
 *               'in_port' below).  "any" or empty matches all IP.
 *               Without tun_id, a filter matches tunnelled packets on
 *               their inner headers exactly as it matches packets that
 *               are not tunnelled.
 *   predicate=  a boolean expression, see below.  It runs to the next
 *               clause keyword, so it may contain spaces.
 *   group=      "5tuple" (default: the 5-tuple and the tenant, see
 *               tun_id), or a comma-separated list of fields with
 *               optional prefix lengths: nw_src/24,nw_dst/24, tp_dst,
 *               nw_proto, ipv6_src/64, tun_id (the packet's tenant: two
 *               tenants' packets never share a group), in_port (the
 *               interface; "in_port,5tuple" is the 5-tuple per
 *               interface), ...
 *   interval=   a time (ns, us, ms, s); default 10ms.
 *
 * Predicates: numbers with units (KB MB GB = 10^3.., KiB MiB GiB = 2^10..,
 * % = 1/100, ns us ms s = nanoseconds), + - * /, comparisons < <= > >=
 * == !=, && || !, parentheses, and aggregates over the packets of an
 * interval: sum(t) count() count(t) avg(t) min(t) max(t) stddev(t), where
 * the per-packet term t is an expression over per-packet variables
 * (Table 1: packets bytes volume ttl ecn, and those that need per-flow
 * state: rwnd is_lost is_burst rtt seq ack dup), with the same operators
 * ("count(t)" counts packets where t is non-zero).  A variable outside
 * an aggregate means its last value in the interval; "ack_lastepoch"
 * (any variable with the suffix) is its last value in the previous
 * interval, and prev(e) is aggregate expression e over the previous
 * interval.
 *
 * The value an event reports is the left operand of its leftmost
 * comparison ("sum(volume)" in the example), and the threshold is that
 * comparison's right operand when it is a constant: the controller splits
 * it across hosts and PMDs (see 'threshold' below).
 *
 * Thread-safety: parsing and evaluation are thread-safe; an event is not
 * modified after parsing except through tpm_event_set_threshold(), which
 * callers serialise.
 */
#ifndef TPM_EVENT_H
#define TPM_EVENT_H 1

#include <stdbool.h>
#include <stdint.h>

#include "packet.h"

/* Per-packet variables (paper Table 1; docs/event-language.md defines
 * each exactly). */
enum tpm_var {
    TPM_VAR_PACKETS,            /* 1 for every packet. */
    TPM_VAR_BYTES,              /* Frame length. */
    TPM_VAR_VOLUME,             /* L4 payload bytes. */
    TPM_VAR_TTL,                /* IPv4 TTL / IPv6 hop limit. */
    TPM_VAR_ECN,                /* 1 if CE-marked. */
    /* Variables that need per-flow state (tpm_var_needs_tcp_state()):
     * the monitor keeps it only for flows matched by an event that uses
     * one of them, and fills in 'struct tpm_pkt_vars' for their
     * packets. */
    TPM_VAR_RWND,               /* TCP window, scaled. */
    TPM_VAR_IS_LOST,            /* Retransmission. */
    TPM_VAR_IS_BURST,           /* Close behind the flow's previous
                                 * packet. */
    TPM_VAR_RTT,                /* Latest RTT sample of this direction. */
    TPM_VAR_SEQ,                /* Highest sequence number sent. */
    TPM_VAR_ACK,                /* Highest ack received. */
    TPM_VAR_DUP,                /* Duplicate-ACK byte estimate. */
    TPM_N_VARS
};

/* Returns the name of 'var' as written in the language. */
const char *tpm_var_name(enum tpm_var var);

/* Returns true if 'var' needs per-flow state (rwnd and the TCP-state
 * variables is_lost, is_burst, rtt, seq, ack, dup). */
bool tpm_var_needs_tcp_state(enum tpm_var var);

/* Value of 'var' for packet 'pkt' (for the variables that need per-flow
 * state, as filled in by the monitor in 'pkt->v'). */
static inline uint64_t
tpm_var_value(enum tpm_var var, const struct tpm_pkt *pkt)
{
    switch (var) {
    case TPM_VAR_PACKETS: return 1;
    case TPM_VAR_BYTES: return pkt->bytes;
    case TPM_VAR_VOLUME: return pkt->volume;
    case TPM_VAR_TTL: return pkt->ttl;
    case TPM_VAR_ECN: return tpm_pkt_ce(pkt);
    case TPM_VAR_RWND: return pkt->v.rwnd;
    case TPM_VAR_IS_LOST: return pkt->v.is_lost;
    case TPM_VAR_IS_BURST: return pkt->v.is_burst;
    case TPM_VAR_RTT: return pkt->v.rtt;
    case TPM_VAR_SEQ: return pkt->v.seq;
    case TPM_VAR_ACK: return pkt->v.ack;
    case TPM_VAR_DUP: return pkt->v.dup;
    case TPM_N_VARS:
    default:
        return 0;
    }
}

enum tpm_agg {
    TPM_AGG_SUM,
    TPM_AGG_COUNT,              /* count() has no term: number of packets. */
    TPM_AGG_AVG,
    TPM_AGG_MIN,
    TPM_AGG_MAX,
    TPM_AGG_STDDEV,
    TPM_AGG_LAST,               /* Bare variable outside an aggregate. */
    TPM_N_AGGS
};

const char *tpm_agg_name(enum tpm_agg);

enum tpm_expr_type {
    TPM_EXPR_NUM,               /* Constant 'num'. */
    TPM_EXPR_VAR,               /* Per-packet variable 'var' (in a term). */
    TPM_EXPR_AGG,               /* 'agg' over term 'a' (NULL: count()). */
    TPM_EXPR_PREV,              /* 'a' evaluated over previous interval. */
    TPM_EXPR_NEG,               /* -a */
    TPM_EXPR_NOT,               /* !a */
    TPM_EXPR_BIN,               /* a 'op' b */
};

enum tpm_binop {
    TPM_OP_ADD, TPM_OP_SUB, TPM_OP_MUL, TPM_OP_DIV,
    TPM_OP_LT, TPM_OP_LE, TPM_OP_GT, TPM_OP_GE, TPM_OP_EQ, TPM_OP_NE,
    TPM_OP_AND, TPM_OP_OR,
};

/* Returns 'a op b' for a comparison 'op' (false for the other
 * operators): the test of a predicate "AGG op CONSTANT", on a host and in
 * the TEM. */
static inline bool
tpm_compare(enum tpm_binop op, double a, double b)
{
    switch (op) {
    case TPM_OP_LT: return a < b;
    case TPM_OP_LE: return a <= b;
    case TPM_OP_GT: return a > b;
    case TPM_OP_GE: return a >= b;
    case TPM_OP_EQ: return a == b;
    case TPM_OP_NE: return a != b;
    case TPM_OP_ADD: case TPM_OP_SUB: case TPM_OP_MUL: case TPM_OP_DIV:
    case TPM_OP_AND: case TPM_OP_OR:
    default:
        return false;
    }
}

struct tpm_expr {
    enum tpm_expr_type type;
    int pos;                    /* 1-based column in the definition. */
    double num;                 /* TPM_EXPR_NUM. */
    enum tpm_var var;           /* TPM_EXPR_VAR. */
    enum tpm_agg agg;           /* TPM_EXPR_AGG. */
    enum tpm_binop op;          /* TPM_EXPR_BIN. */
    struct tpm_expr *a, *b;     /* Operands. */
};

/* A filter: a packet matches if (key & mask) == key_of_filter, where the
 * filter's key is already masked.  An all-zero mask with 'ipver' 0 in the
 * mask matches every IP packet (ipver is always matched against non-zero:
 * non-IP frames never match). */
struct tpm_match {
    struct tpm_key key;
    struct tpm_key mask;
};

/* Returns true if the flow key 'key' of a parsed frame matches filter
 * 'm': what the monitor's trigger index decides for a new flow, and what
 * tpm-replay counts when it sizes its tables from a capture.  The key's
 * tenant slot 'tun' is never part of a filter's mask (the VNI is matched
 * by 'struct tpm_tun_filter'). */
static inline bool
tpm_match_key(const struct tpm_match *m, const struct tpm_key *key)
{
    struct tpm_key masked;
    tpm_key_and(&masked, key, &m->mask);
    return tpm_key_equal(&masked, &m->key);
}

/* The filter's tun_id= item: a packet matches if it was decapsulated
 * from a VXLAN or Geneve tunnel whose VNI, masked by 'mask', is 'vni'
 * (already masked).  Kept apart from 'struct tpm_match', whose key holds
 * the monitor's tenant slot rather than the VNI: the monitor tests it
 * once per tenant (tpm_tun_filter_match()).
 *
 * Or the filter's 'underlay' item: the event sees tunnelled frames as
 * the wire carries them, by their outer headers (the tunnel between two
 * hosts, of no tenant), and untunnelled frames as any event does; never a
 * tenant's inner flow.  The two items exclude each other. */
struct tpm_tun_filter {
    bool on;                    /* tun_id= given: tunnelled packets only. */
    bool underlay;              /* 'underlay' given: outer flows. */
    uint32_t vni;               /* 24 bits, masked. */
    uint32_t mask;              /* 24 bits; 0 (tun_id=0/0): any tunnel. */
};

/* The largest VNI (VXLAN and Geneve VNIs are 24 bits). */
#define TPM_VNI_MAX 0xffffff

/* Returns true if a packet decapsulated from 'tunnel' (all zero if it was
 * not tunnelled), as the tenant's inner packet, passes filter 'f'. */
static inline bool
tpm_tun_filter_match(const struct tpm_tun_filter *f,
                     const struct tpm_pkt_tunnel *tunnel)
{
    if (f->underlay) {
        return tunnel->type == TPM_TUN_NONE;
    }
    return !f->on || (tunnel->type != TPM_TUN_NONE
                      && (tunnel->vni & f->mask) == f->vni);
}

/* Returns true if a flow whose key's tenant slot is 'tun' passes filter
 * 'f': 0 (not a tenant's), TPM_TUN_UNDERLAY (a tunnel's outer flow), or a
 * tenant's slot, whose VNI 'vni' (*vni_of)(aux, tun) gives, called only
 * if needed. */
static inline bool
tpm_tun_filter_match_slot(const struct tpm_tun_filter *f, uint16_t tun,
                          uint32_t (*vni_of)(const void *aux, uint16_t tun),
                          const void *aux)
{
    if (tun == TPM_TUN_UNDERLAY) {
        return f->underlay;
    } else if (f->underlay) {
        return !tun;
    }
    return !f->on || (tun && (vni_of(aux, tun) & f->mask) == f->vni);
}

/* Formats 'f' as the filter item that parses back into it: "" if it is
 * off, "tun_id=N" (decimal) for a full mask, "tun_id=0xV/0xM" otherwise.
 * Caller frees. */
char *tpm_tun_filter_to_string(const struct tpm_tun_filter *f);

struct tpm_event {
    char *name;
    char *text;                 /* The definition as given. */
    struct tpm_match filter;
    struct tpm_tun_filter filter_tun; /* The filter's tun_id= item. */
    struct tpm_key group;       /* Granularity mask over the key: 'tun'
                                 * 0xffff if the tenant is part of the
                                 * group (tun_id, and 5tuple), else 0. */
    bool group_5tuple;          /* 'group' is the full 5-tuple (with the
                                 * tenant). */
    bool group_tun;             /* 'group' has the tenant (group.tun). */
    bool group_port;            /* The group has the receiving interface
                                 * (group=in_port...), which is not part
                                 * of the key: the monitor keeps it
                                 * beside the group key. */
    char *in_port;              /* The filter's in_port= item: the name of
                                 * the interface whose received packets
                                 * the event sees, or NULL for all. */
    uint16_t in_port_slot;      /* Set by the front end that installs the
                                 * event in a monitor: the monitor's
                                 * number for 'in_port' (tpm.h,
                                 * tpm_set_rx_port()); 0 matches no
                                 * packet. */
    uint64_t interval_ns;
    struct tpm_expr *pred;      /* Whole predicate. */
    const struct tpm_expr *value; /* Reported value: left operand of the
                                   * leftmost comparison (or 'pred'). */
    struct tpm_expr *threshold; /* That comparison's right operand if it
                                 * is a TPM_EXPR_NUM, else NULL. */
};

/* Parses definition 'text' of event 'name' into a new event stored in
 * '*eventp'.  Returns NULL on success.  On error, returns a malloc()'d
 * message that names the clause, the 1-based column, the offending token
 * and what was expected, e.g.
 *     "predicate: column 30: unexpected '>>': expected an operand"
 * and stores NULL in '*eventp'.  'name' must be 1 to 63 characters from
 * [A-Za-z0-9_.-]. */
char *tpm_event_parse(const char *name, const char *text,
                      struct tpm_event **eventp)
    __attribute__((warn_unused_result));

/* Extension clauses: clauses beyond the language's own that a front end
 * declares (the TEM's scope=, across=, split=, then= and standby=).  The
 * one lexer splits them off with the others (same keyword and list rules,
 * duplicates refused, columns counted in the whole definition) and hands
 * their values back; what they mean is the front end's business.
 *
 * The caller sets 'n' and 'names'; tpm_event_parse_ext() sets the rest
 * on success (free with tpm_event_ext_clear()). */
struct tpm_event_ext {
    size_t n;                   /* Clauses declared... */
    const char *const *names;   /* ...their keywords (without '='). */
    char **values;              /* Each value, white space trimmed, or NULL
                                 * where the clause is absent. */
    int *cols;                  /* The 1-based column of each value. */
    char *local;                /* The definition with the extension
                                 * clauses blanked out: the event in the
                                 * language itself, columns unchanged. */
};

/* As tpm_event_parse(), also accepting the clauses 'ext' declares (see
 * above).  Errors name them like the language's own. */
char *tpm_event_parse_ext(const char *name, const char *text,
                          struct tpm_event_ext *ext,
                          struct tpm_event **eventp)
    __attribute__((warn_unused_result));
void tpm_event_ext_clear(struct tpm_event_ext *);

/* Parses a line "NAME definition..." as found in event files; blank lines
 * and lines starting with '#' yield NULL error and NULL event. */
char *tpm_event_parse_line(const char *line, struct tpm_event **eventp)
    __attribute__((warn_unused_result));

/* Returns true if 'name' is a valid event name: 1 to 63 characters from
 * [A-Za-z0-9_.-] (NULL is not). */
bool tpm_event_name_valid(const char *name);

void tpm_event_destroy(struct tpm_event *);

/* Returns a deep copy of 'event'. */
struct tpm_event *tpm_event_clone(const struct tpm_event *);

/* Returns true if the predicate uses a variable that needs per-flow state
 * (tpm_var_needs_tcp_state()). */
bool tpm_event_needs_tcp_state(const struct tpm_event *);

/* Replaces the event's threshold with 'value'.  Returns false if the
 * event has no constant threshold. */
bool tpm_event_set_threshold(struct tpm_event *, double value);

/* Returns a deep copy of 'expr' (NULL for NULL). */
struct tpm_expr *tpm_expr_clone(const struct tpm_expr *expr);

/* Frees 'expr' and its operands (NULL: no-op). */
void tpm_expr_destroy(struct tpm_expr *expr);

/* Formats the expression back into text (fully parenthesised); caller
 * frees. */
char *tpm_expr_to_string(const struct tpm_expr *);

/* Formats a granularity mask as the group= clause would ("5tuple",
 * "nw_dst/24,tp_dst", "tun_id,nw_dst/24"); caller frees. */
char *tpm_group_to_string(const struct tpm_key *group);

/* Formats event 'ev''s group= clause, in_port included ("in_port,5tuple",
 * "in_port"); caller frees. */
char *tpm_event_group_to_string(const struct tpm_event *ev);

/* The longest interface name in_port= takes. */
#define TPM_PORT_NAME_MAX 63

/* Returns true if 'name' can be an in_port= item: 1 to TPM_PORT_NAME_MAX
 * printable ASCII characters other than white space, ',' and '='. */
bool tpm_port_name_valid(const char *name);

/* Why a network-wide event (the TEM's) cannot name an interface. */
#define TEM_NO_PORTS "a network-wide event cannot: install it on that " \
    "host with ovs-appctl tpm/event-add"

/* Returns NULL if event 'ev' names no interface (no in_port= in its
 * filter or group), else an error that says why 'front', a front end
 * without interfaces, cannot take it.  Caller frees. */
char *tpm_event_refuse_ports(const struct tpm_event *ev, const char *front)
    __attribute__((warn_unused_result));

/* Evaluates a per-packet term for 'pkt'.  Comparisons and logic yield 0
 * or 1; division by zero yields 0. */
double tpm_expr_eval_pkt(const struct tpm_expr *, const struct tpm_pkt *);

/* Evaluates an interval-level expression, calling 'leaf' for every
 * TPM_EXPR_AGG node ('prev' tells whether it is under a TPM_EXPR_PREV).
 * Division by zero yields 0. */
double tpm_expr_eval(const struct tpm_expr *,
                     double (*leaf)(const struct tpm_expr *agg, bool prev,
                                    void *aux),
                     void *aux);

/* Calls 'cb' for every TPM_EXPR_AGG node of 'expr' ('prev' as above). */
void tpm_expr_for_each_agg(const struct tpm_expr *expr,
                           void (*cb)(const struct tpm_expr *agg, bool prev,
                                      void *aux),
                           void *aux);

/* Returns true if the two per-packet terms are structurally identical
 * (NULL equals NULL), so that summaries can be shared between
 * triggers. */
bool tpm_expr_equal(const struct tpm_expr *, const struct tpm_expr *);

/* Parses a time such as "10ms" into '*ns'.  Returns NULL or an error. */
char *tpm_parse_time(const char *s, uint64_t *ns)
    __attribute__((warn_unused_result));

/* Formats 'ns' as the shortest exact unit ("10ms", "1s", "250us"). */
char *tpm_time_format(uint64_t ns, char *buf, int size);

#endif /* event.h */
