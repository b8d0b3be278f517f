/* SPDX-License-Identifier: Apache-2.0 */
#include "event.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The event language parser.
 *
 * A definition is split into clauses first (split_clauses__()); each
 * clause value is then copied into a NUL-terminated buffer that remembers
 * its offset in the whole definition ('struct clause'), so that every
 * error can report the 1-based column of the offending token in the text
 * the user typed.  The filter and group clauses are comma-separated lists
 * in ovs-ofctl syntax; the predicate is parsed by recursive descent. */

static const char *const var_names[TPM_N_VARS] = {
    [TPM_VAR_PACKETS] = "packets",
    [TPM_VAR_BYTES] = "bytes",
    [TPM_VAR_VOLUME] = "volume",
    [TPM_VAR_TTL] = "ttl",
    [TPM_VAR_ECN] = "ecn",
    [TPM_VAR_RWND] = "rwnd",
    [TPM_VAR_IS_LOST] = "is_lost",
    [TPM_VAR_IS_BURST] = "is_burst",
    [TPM_VAR_RTT] = "rtt",
    [TPM_VAR_SEQ] = "seq",
    [TPM_VAR_ACK] = "ack",
    [TPM_VAR_DUP] = "dup",
};

static const char *const agg_names[TPM_N_AGGS] = {
    [TPM_AGG_SUM] = "sum",
    [TPM_AGG_COUNT] = "count",
    [TPM_AGG_AVG] = "avg",
    [TPM_AGG_MIN] = "min",
    [TPM_AGG_MAX] = "max",
    [TPM_AGG_STDDEV] = "stddev",
    [TPM_AGG_LAST] = "last",
};

#define LASTEPOCH_SUFFIX "_lastepoch"

/* Returns the name of 'var' as written in the language. */
const char *
tpm_var_name(enum tpm_var var)
{
    return (unsigned) var < TPM_N_VARS ? var_names[var] : "?";
}

/* Returns true if 'var' needs per-flow state. */
bool
tpm_var_needs_tcp_state(enum tpm_var var)
{
    return var >= TPM_VAR_RWND && var < TPM_N_VARS;
}

/* Returns the name of aggregate 'agg' ("last" for TPM_AGG_LAST, which is
 * written as a bare variable). */
const char *
tpm_agg_name(enum tpm_agg agg)
{
    return (unsigned) agg < TPM_N_AGGS ? agg_names[agg] : "?";
}

/* Time. */

struct time_unit {
    const char *name;
    uint64_t ns;
};

static const struct time_unit time_units[] = {
    { "s", UINT64_C(1000000000) },
    { "ms", UINT64_C(1000000) },
    { "us", UINT64_C(1000) },
    { "ns", UINT64_C(1) },
};

/* Parses a time such as "10ms" in 's' into '*ns': a positive decimal
 * integer, optionally followed by white space, then one of the units ns,
 * us, ms and s.  Returns NULL on success, otherwise a malloc()'d message
 * (without clause or column: callers add them) and leaves '*ns'
 * unchanged. */
char *
tpm_parse_time(const char *s, uint64_t *ns)
{
    const char *p = s;
    uint64_t n = 0;
    bool overflow = false;

    if (!isdigit((unsigned char) *p)) {
        goto syntax;
    }
    for (; isdigit((unsigned char) *p); p++) {
        unsigned d = *p - '0';
        if (n > (UINT64_MAX - d) / 10) {
            overflow = true;
        } else {
            n = n * 10 + d;
        }
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    for (size_t i = 0; i < ARRAY_SIZE(time_units); i++) {
        const struct time_unit *u = &time_units[i];
        if (!strcmp(p, u->name)) {
            if (overflow || n > UINT64_MAX / u->ns) {
                return xasprintf("'%s' is too long: expected at most "
                                 "%"PRIu64"s", s,
                                 UINT64_MAX / UINT64_C(1000000000));
            }
            if (!n) {
                return xasprintf("'%s' is not positive: expected a time "
                                 "greater than zero, such as 10ms", s);
            }
            *ns = n * u->ns;
            return NULL;
        }
    }

syntax:
    return xasprintf("'%s' is not a time: expected a number with a unit "
                     "ns, us, ms or s, such as 10ms", s);
}

/* Formats 'ns' into 'buf' of 'size' bytes in the largest unit that
 * represents it exactly ("10ms", "1s", "250us", "7ns").  Returns 'buf'. */
char *
tpm_time_format(uint64_t ns, char *buf, int size)
{
    const struct time_unit *u = &time_units[ARRAY_SIZE(time_units) - 1];
    if (ns) {
        for (size_t i = 0; i < ARRAY_SIZE(time_units); i++) {
            if (ns % time_units[i].ns == 0) {
                u = &time_units[i];
                break;
            }
        }
    }
    snprintf(buf, size, "%"PRIu64"%s", ns / u->ns, u->name);
    return buf;
}

/* Expressions. */

static struct tpm_expr *
expr_new__(enum tpm_expr_type type, int pos)
{
    struct tpm_expr *e = xzalloc(sizeof *e);
    e->type = type;
    e->pos = pos;
    return e;
}

static void
expr_free__(struct tpm_expr *e)
{
    if (e) {
        expr_free__(e->a);
        expr_free__(e->b);
        free(e);
    }
}

static struct tpm_expr *
expr_clone__(const struct tpm_expr *e)
{
    if (!e) {
        return NULL;
    }
    struct tpm_expr *c = xmalloc(sizeof *c);
    *c = *e;
    c->a = expr_clone__(e->a);
    c->b = expr_clone__(e->b);
    return c;
}

static bool
is_comparison__(enum tpm_binop op)
{
    return op >= TPM_OP_LT && op <= TPM_OP_NE;
}

/* Returns the leftmost comparison of 'e', walking left operand first
 * through &&, || and !, or NULL if there is none. */
static struct tpm_expr *
find_comparison__(struct tpm_expr *e)
{
    if (!e) {
        return NULL;
    }
    if (e->type == TPM_EXPR_NOT) {
        return find_comparison__(e->a);
    }
    if (e->type != TPM_EXPR_BIN) {
        return NULL;
    }
    if (is_comparison__(e->op)) {
        return e;
    }
    if (e->op == TPM_OP_AND || e->op == TPM_OP_OR) {
        struct tpm_expr *c = find_comparison__(e->a);
        return c ? c : find_comparison__(e->b);
    }
    return NULL;
}

/* Sets 'event''s 'value' and 'threshold' from its predicate. */
static void
event_set_value__(struct tpm_event *event)
{
    struct tpm_expr *cmp = find_comparison__(event->pred);
    event->value = cmp ? cmp->a : event->pred;
    event->threshold = (cmp && cmp->b->type == TPM_EXPR_NUM
                        ? cmp->b : NULL);
}

/* Returns true if the two expressions are structurally identical, ignoring
 * positions (NULL equals NULL). */
bool
tpm_expr_equal(const struct tpm_expr *a, const struct tpm_expr *b)
{
    if (!a || !b) {
        return a == b;
    }
    if (a->type != b->type) {
        return false;
    }
    switch (a->type) {
    case TPM_EXPR_NUM:
        return a->num == b->num;
    case TPM_EXPR_VAR:
        return a->var == b->var;
    case TPM_EXPR_AGG:
        return a->agg == b->agg && tpm_expr_equal(a->a, b->a);
    case TPM_EXPR_PREV:
    case TPM_EXPR_NEG:
    case TPM_EXPR_NOT:
        return tpm_expr_equal(a->a, b->a);
    case TPM_EXPR_BIN:
        return (a->op == b->op && tpm_expr_equal(a->a, b->a)
                && tpm_expr_equal(a->b, b->b));
    default:
        return false;
    }
}

static const char *
binop_name__(enum tpm_binop op)
{
    static const char *const names[] = {
        [TPM_OP_ADD] = "+", [TPM_OP_SUB] = "-",
        [TPM_OP_MUL] = "*", [TPM_OP_DIV] = "/",
        [TPM_OP_LT] = "<", [TPM_OP_LE] = "<=",
        [TPM_OP_GT] = ">", [TPM_OP_GE] = ">=",
        [TPM_OP_EQ] = "==", [TPM_OP_NE] = "!=",
        [TPM_OP_AND] = "&&", [TPM_OP_OR] = "||",
    };
    return (unsigned) op < ARRAY_SIZE(names) ? names[op] : "?";
}

/* Formats 'x' with the fewest digits that read back as exactly 'x'
 * (integers below 10^15 without an exponent). */
static char *
num_to_string__(double x)
{
    if (x == floor(x) && fabs(x) < 1e15) {
        return xasprintf("%.0f", x);
    }
    for (int prec = 1; prec < 17; prec++) {
        char *s = xasprintf("%.*g", prec, x);
        if (strtod(s, NULL) == x) {
            return s;
        }
        free(s);
    }
    return xasprintf("%.17g", x);
}

/* Formats the expression back into text (fully parenthesised); caller
 * frees.  The result parses back into an equal expression: a bare
 * variable outside an aggregate (TPM_AGG_LAST) is written as the variable,
 * and prev() over one as "VAR_lastepoch". */
char *
tpm_expr_to_string(const struct tpm_expr *e)
{
    char *a, *b, *s;

    if (!e) {
        return xstrdup("");
    }
    switch (e->type) {
    case TPM_EXPR_NUM:
        return num_to_string__(e->num);
    case TPM_EXPR_VAR:
        return xstrdup(tpm_var_name(e->var));
    case TPM_EXPR_AGG:
        if (e->agg == TPM_AGG_LAST && e->a && e->a->type == TPM_EXPR_VAR) {
            return xstrdup(tpm_var_name(e->a->var));
        }
        a = tpm_expr_to_string(e->a);
        s = xasprintf("%s(%s)", tpm_agg_name(e->agg), a);
        free(a);
        return s;
    case TPM_EXPR_PREV:
        if (e->a && e->a->type == TPM_EXPR_AGG && e->a->agg == TPM_AGG_LAST
            && e->a->a && e->a->a->type == TPM_EXPR_VAR) {
            return xasprintf("%s"LASTEPOCH_SUFFIX,
                             tpm_var_name(e->a->a->var));
        }
        a = tpm_expr_to_string(e->a);
        s = xasprintf("prev(%s)", a);
        free(a);
        return s;
    case TPM_EXPR_NEG:
    case TPM_EXPR_NOT:
        a = tpm_expr_to_string(e->a);
        s = xasprintf("(%c%s)", e->type == TPM_EXPR_NEG ? '-' : '!', a);
        free(a);
        return s;
    case TPM_EXPR_BIN:
        a = tpm_expr_to_string(e->a);
        b = tpm_expr_to_string(e->b);
        s = xasprintf("(%s %s %s)", a, binop_name__(e->op), b);
        free(a);
        free(b);
        return s;
    default:
        return xstrdup("?");
    }
}

/* Applies binary operator 'op' to 'a' and 'b'. */
static double
binop_apply__(enum tpm_binop op, double a, double b)
{
    switch (op) {
    case TPM_OP_ADD: return a + b;
    case TPM_OP_SUB: return a - b;
    case TPM_OP_MUL: return a * b;
    case TPM_OP_DIV: return b ? a / b : 0;
    case TPM_OP_LT: case TPM_OP_LE: case TPM_OP_GT: case TPM_OP_GE:
    case TPM_OP_EQ: case TPM_OP_NE:
        return tpm_compare(op, a, b);
    case TPM_OP_AND: return a && b;
    case TPM_OP_OR: return a || b;
    default: return 0;
    }
}

/* Evaluates a per-packet term for 'pkt'.  Comparisons and logic yield 0
 * or 1 (&& and || short-circuit); division by zero yields 0.  Aggregates
 * cannot occur in a term and evaluate to 0. */
double
tpm_expr_eval_pkt(const struct tpm_expr *e, const struct tpm_pkt *pkt)
{
    double a;

    switch (e->type) {
    case TPM_EXPR_NUM:
        return e->num;
    case TPM_EXPR_VAR:
        return tpm_var_value(e->var, pkt);
    case TPM_EXPR_NEG:
        return -tpm_expr_eval_pkt(e->a, pkt);
    case TPM_EXPR_NOT:
        return !tpm_expr_eval_pkt(e->a, pkt);
    case TPM_EXPR_BIN:
        a = tpm_expr_eval_pkt(e->a, pkt);
        if (e->op == TPM_OP_AND && !a) {
            return 0;
        } else if (e->op == TPM_OP_OR && a) {
            return 1;
        }
        return binop_apply__(e->op, a, tpm_expr_eval_pkt(e->b, pkt));
    case TPM_EXPR_AGG:
    case TPM_EXPR_PREV:
    default:
        return 0;
    }
}

static double
expr_eval__(const struct tpm_expr *e, bool prev,
            double (*leaf)(const struct tpm_expr *, bool, void *),
            void *aux)
{
    double a;

    switch (e->type) {
    case TPM_EXPR_NUM:
        return e->num;
    case TPM_EXPR_AGG:
        return leaf(e, prev, aux);
    case TPM_EXPR_PREV:
        return expr_eval__(e->a, true, leaf, aux);
    case TPM_EXPR_NEG:
        return -expr_eval__(e->a, prev, leaf, aux);
    case TPM_EXPR_NOT:
        return !expr_eval__(e->a, prev, leaf, aux);
    case TPM_EXPR_BIN:
        a = expr_eval__(e->a, prev, leaf, aux);
        if (e->op == TPM_OP_AND && !a) {
            return 0;
        } else if (e->op == TPM_OP_OR && a) {
            return 1;
        }
        return binop_apply__(e->op, a, expr_eval__(e->b, prev, leaf, aux));
    case TPM_EXPR_VAR:
    default:
        return 0;
    }
}

/* Evaluates interval-level expression 'e', calling 'leaf' for every
 * TPM_EXPR_AGG node ('prev' is true under a TPM_EXPR_PREV).  Comparisons
 * and logic yield 0 or 1 (&& and || short-circuit, so 'leaf' is not
 * called for an operand that cannot change the result); division by zero
 * yields 0. */
double
tpm_expr_eval(const struct tpm_expr *e,
              double (*leaf)(const struct tpm_expr *agg, bool prev,
                             void *aux),
              void *aux)
{
    return expr_eval__(e, false, leaf, aux);
}

static void
for_each_agg__(const struct tpm_expr *e, bool prev,
               void (*cb)(const struct tpm_expr *, bool, void *), void *aux)
{
    if (!e) {
        return;
    }
    if (e->type == TPM_EXPR_AGG) {
        cb(e, prev, aux);
        return;
    }
    if (e->type == TPM_EXPR_PREV) {
        prev = true;
    }
    for_each_agg__(e->a, prev, cb, aux);
    for_each_agg__(e->b, prev, cb, aux);
}

/* Calls 'cb' once for every TPM_EXPR_AGG node of 'expr', left to right
 * ('prev' is true for those under a TPM_EXPR_PREV). */
void
tpm_expr_for_each_agg(const struct tpm_expr *expr,
                      void (*cb)(const struct tpm_expr *agg, bool prev,
                                 void *aux),
                      void *aux)
{
    for_each_agg__(expr, false, cb, aux);
}

static bool
expr_has_tcp_var__(const struct tpm_expr *e)
{
    if (!e) {
        return false;
    }
    if (e->type == TPM_EXPR_VAR && tpm_var_needs_tcp_state(e->var)) {
        return true;
    }
    return expr_has_tcp_var__(e->a) || expr_has_tcp_var__(e->b);
}

static bool
expr_has_agg__(const struct tpm_expr *e)
{
    return e && (e->type == TPM_EXPR_AGG
                 || expr_has_agg__(e->a) || expr_has_agg__(e->b));
}

/* Clause values and errors. */

/* A clause value: a NUL-terminated copy of part of the definition, which
 * starts at 0-based offset 'base' of the whole definition text. */
struct clause {
    const char *name;           /* "filter", "predicate", ... */
    char *buf;                  /* NUL-terminated value. */
    int base;                   /* Offset of 'buf[0]' in the definition. */
};

/* Returns the 1-based column in the whole definition of 'at', a pointer
 * into 'c->buf'. */
static int
clause_col__(const struct clause *c, const char *at)
{
    return c->base + (int) (at - c->buf) + 1;
}

/* Returns a malloc()'d error "CLAUSE: column N: MESSAGE" for the token at
 * 'at' in 'c->buf'. */
static char * __attribute__((format(printf, 3, 4)))
clause_error__(const struct clause *c, const char *at, const char *format,
               ...)
{
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);

    char *error = xasprintf("%s: column %d: %s", c->name,
                            clause_col__(c, at), msg);
    free(msg);
    return error;
}

static bool
is_ident_start__(int c)
{
    return isalpha((unsigned char) c) || c == '_';
}

static bool
is_ident_char__(int c)
{
    return isalnum((unsigned char) c) || c == '_';
}

static const char *
skip_space__(const char *p)
{
    while (isspace((unsigned char) *p)) {
        p++;
    }
    return p;
}

/* Predicate lexer. */

enum tok_type {
    TOK_END,                    /* End of the predicate. */
    TOK_NUM,                    /* Number with its unit applied. */
    TOK_IDENT,                  /* Name (not "and", "or", "not"). */
    TOK_OP,                     /* Operator, including and/or/not. */
    TOK_LPAREN,
    TOK_RPAREN,
    TOK_BADOP,                  /* Unknown operator such as ">>" or "=". */
    TOK_OTHER,                  /* Any other character. */
};

/* TOK_OP values: an enum tpm_binop or OP_NOT__. */
#define OP_NOT__ (TPM_OP_OR + 1)

struct token {
    enum tok_type type;
    const char *start;          /* In the clause buffer. */
    int len;
    double num;                 /* TOK_NUM. */
    int op;                     /* TOK_OP. */
};

struct pparser {
    const struct clause *c;
    const char *p;              /* Next character to lex. */
    struct token tok;           /* Current token. */
    char *error;
    const char *term_agg;       /* Aggregate whose term is being parsed. */
    bool in_prev;               /* Inside prev(). */
};

struct unit {
    const char *name;
    double factor;
};

static const struct unit units[] = {
    { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 },
    { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 },
    { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
};

#define UNITS_LIST "KB, MB, GB, KiB, MiB, GiB, %%, ns, us, ms or s"
#define VARS_LIST "packets, bytes, volume, ttl, ecn, rwnd, is_lost, " \
    "is_burst, rtt, seq, ack, dup"
#define AGGS_LIST "sum, count, avg, min, max, stddev"

static bool
word_is__(const char *s, int len, const char *word)
{
    return (int) strlen(word) == len && !memcmp(s, word, len);
}

static const struct unit *
lookup_unit__(const char *s, int len)
{
    for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
        if (word_is__(s, len, units[i].name)) {
            return &units[i];
        }
    }
    return NULL;
}

static bool
lookup_var__(const char *s, int len, enum tpm_var *var)
{
    for (int i = 0; i < TPM_N_VARS; i++) {
        if (word_is__(s, len, var_names[i])) {
            *var = i;
            return true;
        }
    }
    return false;
}

/* Looks up an aggregate function name (not "last", which is implicit). */
static bool
lookup_agg__(const char *s, int len, enum tpm_agg *agg)
{
    for (int i = 0; i < TPM_AGG_LAST; i++) {
        if (word_is__(s, len, agg_names[i])) {
            *agg = i;
            return true;
        }
    }
    return false;
}

/* Returns the length of 's' without LASTEPOCH_SUFFIX if it names a
 * variable followed by the suffix, otherwise 0. */
static int
lastepoch_var__(const char *s, int len, enum tpm_var *var)
{
    int sfx = strlen(LASTEPOCH_SUFFIX);
    if (len > sfx && !memcmp(s + len - sfx, LASTEPOCH_SUFFIX, sfx)
        && lookup_var__(s, len - sfx, var)) {
        return len - sfx;
    }
    return 0;
}

/* Returns true if the word 's' of 'len' bytes may follow a number
 * separated by white space without being its unit. */
static bool
is_known_word__(const char *s, int len)
{
    enum tpm_var var;
    enum tpm_agg agg;
    return (word_is__(s, len, "and") || word_is__(s, len, "or")
            || word_is__(s, len, "not") || word_is__(s, len, "prev")
            || lookup_var__(s, len, &var) || lookup_agg__(s, len, &agg)
            || lastepoch_var__(s, len, &var));
}

static int
ident_len__(const char *p)
{
    int n = 0;
    if (is_ident_start__(p[0])) {
        for (n = 1; is_ident_char__(p[n]); n++) {
            continue;
        }
    }
    return n;
}

/* Describes the current token for an error message: "'>>'" or "end of
 * predicate".  Caller frees. */
static char *
tok_desc__(const struct token *tok)
{
    if (tok->type == TOK_END) {
        return xstrdup("end of predicate");
    } else if (tok->type == TOK_OTHER && !isprint((unsigned char)
                                                   *tok->start)) {
        return xasprintf("character 0x%02x", (unsigned char) *tok->start);
    }
    return xasprintf("'%.*s'", tok->len, tok->start);
}

/* Sets an error "unexpected TOKEN: expected 'expected'" at the current
 * token, unless an error is already set. */
static void
pp_unexpected__(struct pparser *pp, const char *expected)
{
    if (!pp->error) {
        char *desc = tok_desc__(&pp->tok);
        pp->error = clause_error__(pp->c, pp->tok.start,
                                   "unexpected %s: expected %s",
                                   desc, expected);
        free(desc);
    }
}

/* Lexes a number with its optional unit at 'pp->p' into 'pp->tok'.
 * Returns false on error. */
static bool
lex_number__(struct pparser *pp)
{
    const char *start = pp->p;
    const char *p = start;

    while (isdigit((unsigned char) *p)) {
        p++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char) *p)) {
            p++;
        }
    }
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') {
            q++;
        }
        if (isdigit((unsigned char) *q)) {
            for (p = q; isdigit((unsigned char) *p); p++) {
                continue;
            }
        }
    }

    char *copy = xstrndup(start, p - start);
    double num = strtod(copy, NULL);
    free(copy);

    /* Unit: attached, or after white space. */
    const char *q = skip_space__(p);
    int len = ident_len__(q);
    if (*q == '%') {
        num /= 100;
        p = q + 1;
    } else if (len) {
        const struct unit *u = lookup_unit__(q, len);
        if (u) {
            num *= u->factor;
            p = q + len;
        } else if (q == p || !is_known_word__(q, len)) {
            pp->error = clause_error__(pp->c, q, "unknown unit '%.*s' after "
                                       "'%.*s': expected "UNITS_LIST,
                                       len, q, (int) (p - start), start);
            return false;
        }
    }
    if (!isfinite(num)) {
        pp->error = clause_error__(pp->c, start, "'%.*s' is out of range: "
                                   "expected a finite number",
                                   (int) (p - start), start);
        return false;
    }

    pp->tok.type = TOK_NUM;
    pp->tok.num = num;
    pp->tok.len = p - start;
    pp->p = p;
    return true;
}

/* Lexes an operator made of the characters <>=!&| at 'pp->p'. */
static void
lex_relop__(struct pparser *pp)
{
    static const struct {
        const char *s;
        int op;
    } ops[] = {
        { "<=", TPM_OP_LE }, { ">=", TPM_OP_GE }, { "==", TPM_OP_EQ },
        { "!=", TPM_OP_NE }, { "&&", TPM_OP_AND }, { "||", TPM_OP_OR },
        { "<", TPM_OP_LT }, { ">", TPM_OP_GT }, { "!", OP_NOT__ },
        { "&", TPM_OP_AND },
    };
    const char *p = pp->p;

    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        int len = strlen(ops[i].s);
        if (!strncmp(p, ops[i].s, len)) {
            if (p[len] && strchr("<>=&|", p[len])) {
                /* ">>", "<>", "===", "&&&", ...: not an operator. */
                break;
            }
            pp->tok.type = TOK_OP;
            pp->tok.op = ops[i].op;
            pp->tok.len = len;
            pp->p = p + len;
            return;
        }
    }

    int len = strspn(p, "<>=!&|");
    pp->tok.type = TOK_BADOP;
    pp->tok.len = len;
    pp->p = p + len;
}

/* Lexes the next token into 'pp->tok'.  Returns false on error. */
static bool
advance__(struct pparser *pp)
{
    const char *p = skip_space__(pp->p);
    struct token *tok = &pp->tok;

    memset(tok, 0, sizeof *tok);
    tok->start = p;
    pp->p = p;
    if (!*p) {
        tok->type = TOK_END;
    } else if (isdigit((unsigned char) *p)
               || (*p == '.' && isdigit((unsigned char) p[1]))) {
        return lex_number__(pp);
    } else if (is_ident_start__(*p)) {
        int len = ident_len__(p);
        tok->len = len;
        if (word_is__(p, len, "and")) {
            tok->type = TOK_OP;
            tok->op = TPM_OP_AND;
        } else if (word_is__(p, len, "or")) {
            tok->type = TOK_OP;
            tok->op = TPM_OP_OR;
        } else if (word_is__(p, len, "not")) {
            tok->type = TOK_OP;
            tok->op = OP_NOT__;
        } else {
            tok->type = TOK_IDENT;
        }
        pp->p = p + len;
    } else if (strchr("<>=!&|", *p)) {
        lex_relop__(pp);
    } else {
        tok->len = 1;
        pp->p = p + 1;
        switch (*p) {
        case '+': tok->type = TOK_OP; tok->op = TPM_OP_ADD; break;
        case '-': tok->type = TOK_OP; tok->op = TPM_OP_SUB; break;
        case '*': tok->type = TOK_OP; tok->op = TPM_OP_MUL; break;
        case '/': tok->type = TOK_OP; tok->op = TPM_OP_DIV; break;
        case '(': tok->type = TOK_LPAREN; break;
        case ')': tok->type = TOK_RPAREN; break;
        default: tok->type = TOK_OTHER; break;
        }
    }
    return true;
}

static bool
tok_is_op__(const struct pparser *pp, int op)
{
    return pp->tok.type == TOK_OP && pp->tok.op == op;
}

/* Predicate parser (recursive descent).  Each function returns a new
 * expression, or NULL with 'pp->error' set. */

static struct tpm_expr *parse_or__(struct pparser *);

static int
pp_col__(const struct pparser *pp)
{
    return clause_col__(pp->c, pp->tok.start);
}

static struct tpm_expr *
bin_new__(enum tpm_binop op, struct tpm_expr *a, struct tpm_expr *b,
          int pos)
{
    struct tpm_expr *e = expr_new__(TPM_EXPR_BIN, pos);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

/* Sets an error for the current token where an operator, 'expected' or
 * the end of the predicate may come. */
static void
pp_expected_operator__(struct pparser *pp, const char *expected)
{
    if (pp->tok.type == TOK_BADOP && !pp->error) {
        pp->error = clause_error__(pp->c, pp->tok.start,
                                   "unknown operator '%.*s': expected one "
                                   "of + - * / < <= > >= == != && || and "
                                   "or", pp->tok.len, pp->tok.start);
    } else {
        pp_unexpected__(pp, expected);
    }
}

/* Expects ')' closing the '(' at column 'open_col'; consumes it. */
static bool
pp_close_paren__(struct pparser *pp, int open_col)
{
    if (pp->tok.type != TOK_RPAREN) {
        char *expected = xasprintf("')' to close '(' at column %d",
                                   open_col);
        pp_expected_operator__(pp, expected);
        free(expected);
        return false;
    }
    return advance__(pp);
}

/* Parses "AGG(term)" or "count()", the current token being the name. */
static struct tpm_expr *
parse_agg__(struct pparser *pp, enum tpm_agg agg)
{
    const char *name = tpm_agg_name(agg);
    struct tpm_expr *e = expr_new__(TPM_EXPR_AGG, pp_col__(pp));
    e->agg = agg;

    if (!advance__(pp)) {
        goto error;
    }
    if (pp->tok.type != TOK_LPAREN) {
        char *expected = xasprintf("'(' after '%s'", name);
        pp_unexpected__(pp, expected);
        free(expected);
        goto error;
    }
    int open_col = pp_col__(pp);
    if (!advance__(pp)) {
        goto error;
    }
    if (pp->tok.type == TOK_RPAREN) {
        if (agg != TPM_AGG_COUNT) {
            char *expected = xasprintf("the per-packet term to aggregate, "
                                       "such as %s(volume)", name);
            pp_unexpected__(pp, expected);
            free(expected);
            goto error;
        }
    } else {
        pp->term_agg = name;
        e->a = parse_or__(pp);
        pp->term_agg = NULL;
        if (!e->a) {
            goto error;
        }
    }
    if (!pp_close_paren__(pp, open_col)) {
        goto error;
    }
    return e;

error:
    expr_free__(e);
    return NULL;
}

/* Parses "prev(expr)", the current token being "prev". */
static struct tpm_expr *
parse_prev__(struct pparser *pp)
{
    const char *start = pp->tok.start;
    struct tpm_expr *e = expr_new__(TPM_EXPR_PREV, pp_col__(pp));

    if (!advance__(pp)) {
        goto error;
    }
    if (pp->tok.type != TOK_LPAREN) {
        pp_unexpected__(pp, "'(' after 'prev'");
        goto error;
    }
    int open_col = pp_col__(pp);
    if (!advance__(pp)) {
        goto error;
    }
    pp->in_prev = true;
    e->a = parse_or__(pp);
    pp->in_prev = false;
    if (!e->a) {
        goto error;
    }
    if (pp->tok.type != TOK_RPAREN) {
        pp_close_paren__(pp, open_col);
        goto error;
    }
    if (!expr_has_agg__(e->a)) {
        pp->error = clause_error__(pp->c, start, "'%.*s' has no aggregate: "
                                   "expected an expression over aggregates "
                                   "or variables, such as "
                                   "prev(sum(volume))",
                                   (int) (pp->tok.start + 1 - start), start);
        goto error;
    }
    if (!advance__(pp)) {
        goto error;
    }
    return e;

error:
    expr_free__(e);
    return NULL;
}

/* Sets an error for the current token, a name that may not appear inside
 * an aggregate's term (an aggregate, prev or VAR_lastepoch). */
static void
pp_not_in_term__(struct pparser *pp)
{
    pp->error = clause_error__(pp->c, pp->tok.start,
                               "unexpected '%.*s' inside %s(): expected "
                               "per-packet variables, numbers and "
                               "operators", pp->tok.len, pp->tok.start,
                               pp->term_agg);
}

/* Parses a name: aggregate, prev(), variable or VAR_lastepoch. */
static struct tpm_expr *
parse_name__(struct pparser *pp)
{
    const char *s = pp->tok.start;
    int len = pp->tok.len;
    int pos = pp_col__(pp);
    enum tpm_agg agg;
    enum tpm_var var;

    if (lookup_agg__(s, len, &agg)) {
        if (pp->term_agg) {
            pp_not_in_term__(pp);
            return NULL;
        }
        return parse_agg__(pp, agg);
    } else if (word_is__(s, len, "prev")) {
        if (pp->term_agg) {
            pp_not_in_term__(pp);
            return NULL;
        } else if (pp->in_prev) {
            pp->error = clause_error__(pp->c, s, "unexpected 'prev' inside "
                                       "prev(): expected an expression "
                                       "without prev() or _lastepoch "
                                       "(prev() may not nest)");
            return NULL;
        }
        return parse_prev__(pp);
    } else if (lookup_var__(s, len, &var)) {
        struct tpm_expr *v = expr_new__(TPM_EXPR_VAR, pos);
        v->var = var;
        if (!pp->term_agg) {
            struct tpm_expr *last = expr_new__(TPM_EXPR_AGG, pos);
            last->agg = TPM_AGG_LAST;
            last->a = v;
            v = last;
        }
        if (!advance__(pp)) {
            expr_free__(v);
            return NULL;
        }
        return v;
    } else if (lastepoch_var__(s, len, &var)) {
        if (pp->term_agg) {
            pp_not_in_term__(pp);
            return NULL;
        } else if (pp->in_prev) {
            pp->error = clause_error__(pp->c, s, "unexpected '%.*s' inside "
                                       "prev(): expected an expression "
                                       "without prev() or _lastepoch "
                                       "(prev() may not nest)", len, s);
            return NULL;
        }
        struct tpm_expr *v = expr_new__(TPM_EXPR_VAR, pos);
        v->var = var;
        struct tpm_expr *last = expr_new__(TPM_EXPR_AGG, pos);
        last->agg = TPM_AGG_LAST;
        last->a = v;
        struct tpm_expr *prev = expr_new__(TPM_EXPR_PREV, pos);
        prev->a = last;
        if (!advance__(pp)) {
            expr_free__(prev);
            return NULL;
        }
        return prev;
    }

    pp->error = clause_error__(pp->c, s, "unknown name '%.*s': expected a "
                               "variable ("VARS_LIST"), an aggregate ("
                               AGGS_LIST") or prev", len, s);
    return NULL;
}

static struct tpm_expr *
parse_primary__(struct pparser *pp)
{
    struct tpm_expr *e;
    int pos = pp_col__(pp);

    switch (pp->tok.type) {
    case TOK_NUM:
        e = expr_new__(TPM_EXPR_NUM, pos);
        e->num = pp->tok.num;
        if (!advance__(pp)) {
            expr_free__(e);
            return NULL;
        }
        return e;

    case TOK_LPAREN:
        if (!advance__(pp)) {
            return NULL;
        }
        e = parse_or__(pp);
        if (e && !pp_close_paren__(pp, pos)) {
            expr_free__(e);
            return NULL;
        }
        return e;

    case TOK_IDENT:
        return parse_name__(pp);

    case TOK_END:
    case TOK_OP:
    case TOK_RPAREN:
    case TOK_BADOP:
    case TOK_OTHER:
    default:
        pp_unexpected__(pp, "an operand");
        return NULL;
    }
}

static struct tpm_expr *
parse_unary__(struct pparser *pp)
{
    if (tok_is_op__(pp, TPM_OP_SUB) || tok_is_op__(pp, OP_NOT__)) {
        bool neg = pp->tok.op == TPM_OP_SUB;
        int pos = pp_col__(pp);
        if (!advance__(pp)) {
            return NULL;
        }
        struct tpm_expr *a = parse_unary__(pp);
        if (!a) {
            return NULL;
        }
        if (neg && a->type == TPM_EXPR_NUM) {
            /* A negative number is a number, so that it can be a
             * threshold. */
            a->num = -a->num;
            a->pos = pos;
            return a;
        }
        struct tpm_expr *e = expr_new__(neg ? TPM_EXPR_NEG : TPM_EXPR_NOT,
                                        pos);
        e->a = a;
        return e;
    }
    return parse_primary__(pp);
}

/* Parses a left-associative chain of the binary operators in 'ops' (a
 * list of 'n_ops' TOK_OP values) over operands parsed by 'sub'. */
static struct tpm_expr *
parse_chain__(struct pparser *pp, const int *ops, int n_ops,
              struct tpm_expr *(*sub)(struct pparser *))
{
    struct tpm_expr *e = sub(pp);

    while (e && pp->tok.type == TOK_OP) {
        int i;
        for (i = 0; i < n_ops; i++) {
            if (pp->tok.op == ops[i]) {
                break;
            }
        }
        if (i >= n_ops) {
            break;
        }
        int pos = pp_col__(pp);
        struct tpm_expr *b = advance__(pp) ? sub(pp) : NULL;
        if (!b) {
            expr_free__(e);
            return NULL;
        }
        e = bin_new__(ops[i], e, b, pos);
    }
    return e;
}

static struct tpm_expr *
parse_mul__(struct pparser *pp)
{
    static const int ops[] = { TPM_OP_MUL, TPM_OP_DIV };
    return parse_chain__(pp, ops, ARRAY_SIZE(ops), parse_unary__);
}

static struct tpm_expr *
parse_add__(struct pparser *pp)
{
    static const int ops[] = { TPM_OP_ADD, TPM_OP_SUB };
    return parse_chain__(pp, ops, ARRAY_SIZE(ops), parse_mul__);
}

static bool
tok_is_comparison__(const struct pparser *pp)
{
    return (pp->tok.type == TOK_OP && pp->tok.op >= TPM_OP_LT
            && pp->tok.op <= TPM_OP_NE);
}

static struct tpm_expr *
parse_cmp__(struct pparser *pp)
{
    struct tpm_expr *e = parse_add__(pp);

    if (e && tok_is_comparison__(pp)) {
        int op = pp->tok.op;
        int pos = pp_col__(pp);
        struct tpm_expr *b = advance__(pp) ? parse_add__(pp) : NULL;
        if (!b) {
            expr_free__(e);
            return NULL;
        }
        e = bin_new__(op, e, b, pos);
        if (tok_is_comparison__(pp)) {
            pp->error = clause_error__(pp->c, pp->tok.start,
                                       "unexpected '%.*s': comparisons do "
                                       "not chain: expected && or || "
                                       "between comparisons, or "
                                       "parentheses", pp->tok.len,
                                       pp->tok.start);
            expr_free__(e);
            return NULL;
        }
    }
    return e;
}

static struct tpm_expr *
parse_and__(struct pparser *pp)
{
    static const int ops[] = { TPM_OP_AND };
    return parse_chain__(pp, ops, ARRAY_SIZE(ops), parse_cmp__);
}

static struct tpm_expr *
parse_or__(struct pparser *pp)
{
    static const int ops[] = { TPM_OP_OR };
    return parse_chain__(pp, ops, ARRAY_SIZE(ops), parse_and__);
}

/* Parses predicate clause 'c' into '*exprp'.  Returns NULL or an error. */
static char *
parse_predicate__(const struct clause *c, struct tpm_expr **exprp)
{
    struct pparser pp = { .c = c, .p = c->buf };
    struct tpm_expr *e = NULL;

    *exprp = NULL;
    if (advance__(&pp)) {
        e = parse_or__(&pp);
    }
    if (e && pp.tok.type != TOK_END) {
        pp_expected_operator__(&pp, "an operator or the end of the "
                               "predicate");
    }
    if (e && !pp.error && !find_comparison__(e)) {
        pp.error = clause_error__(c, c->buf, "'%s' is not a condition: "
                                  "expected a comparison such as "
                                  "sum(volume) > 125KB", c->buf);
    }
    if (pp.error) {
        expr_free__(e);
        return pp.error;
    }
    *exprp = e;
    return NULL;
}

/* Comma-separated lists (filter= and group=). */

/* Splits the next item off the list at '*p' (a pointer into a clause
 * buffer, which is modified): stores the item, NUL-terminated and
 * stripped of white space, in '*itemp', and whether a ',' followed it in
 * '*commap'.  Advances '*p' past the comma. */
static void
next_item__(char **p, char **itemp, bool *commap)
{
    char *s = (char *) skip_space__(*p);
    char *comma = strchr(s, ',');
    char *end = comma ? comma : s + strlen(s);

    while (end > s && isspace((unsigned char) end[-1])) {
        end--;
    }
    *end = '\0';
    *itemp = s;
    *commap = comma != NULL;
    *p = comma ? comma + 1 : s + strlen(s);
}

/* Returns an error for the empty item at 's' of list clause 'c'. */
static char *
empty_item_error__(const struct clause *c, const char *s, bool comma,
                   const char *expected)
{
    if (comma) {
        return clause_error__(c, s, "unexpected ',': expected %s",
                              expected);
    }
    return clause_error__(c, s, "unexpected end of %s: expected %s",
                          c->name, expected);
}

/* Parses 's' as an unsigned integer, decimal or hexadecimal with "0x",
 * of at most 'max', into '*valuep'. */
static bool
parse_uint__(const char *s, unsigned long max, unsigned long *valuep)
{
    uint64_t v;
    if (!tpm_parse_uint_hex(s, max, &v)) {
        return false;
    }
    *valuep = v;
    return true;
}

/* Stores in 'mask' the network-order mask of a 'len'-bit prefix over four
 * 32-bit words. */
static void
prefix_mask__(int len, uint32_t mask[4])
{
    for (int i = 0; i < 4; i++) {
        int bits = len - 32 * i;
        mask[i] = (bits <= 0 ? 0
                   : bits >= 32 ? UINT32_MAX
                   : htonl(UINT32_MAX << (32 - bits)));
    }
}

/* Parses a prefix length 's' of at most 'max' bits into '*lenp'.  Returns
 * NULL or an error. */
static char *
parse_prefix__(const struct clause *c, const char *s, int max, int *lenp)
{
    unsigned long len;
    if (!isdigit((unsigned char) *s) || !parse_uint__(s, max, &len)
        || (s[0] == '0' && s[1])) {
        return clause_error__(c, s, "'%s' is not a prefix length: expected "
                              "0 to %d", s, max);
    }
    *lenp = len;
    return NULL;
}

/* Filter. */

struct filter_shorthand {
    const char *name;
    int ipver;
    int proto;                  /* -1: none. */
};

static const struct filter_shorthand filter_shorthands[] = {
    { "ip", 4, -1 }, { "ipv6", 6, -1 },
    { "tcp", 4, 6 }, { "udp", 4, 17 }, { "sctp", 4, 132 }, { "icmp", 4, 1 },
    { "tcp6", 6, 6 }, { "udp6", 6, 17 }, { "sctp6", 6, 132 },
    { "icmp6", 6, 58 },
};

enum filter_field {
    FF_DL_TYPE, FF_NW_PROTO, FF_NW_SRC, FF_NW_DST, FF_IPV6_SRC,
    FF_IPV6_DST, FF_TP_SRC, FF_TP_DST, FF_TUN_ID, FF_IN_PORT, FF_N
};

static const char *const filter_fields[FF_N] = {
    [FF_DL_TYPE] = "dl_type", [FF_NW_PROTO] = "nw_proto",
    [FF_NW_SRC] = "nw_src", [FF_NW_DST] = "nw_dst",
    [FF_IPV6_SRC] = "ipv6_src", [FF_IPV6_DST] = "ipv6_dst",
    [FF_TP_SRC] = "tp_src", [FF_TP_DST] = "tp_dst",
    [FF_TUN_ID] = "tun_id", [FF_IN_PORT] = "in_port",
};

struct fparser {
    const struct clause *c;
    struct tpm_match m;
    struct tpm_tun_filter tun;
    char *in_port;              /* The in_port= item's name, or NULL. */
    const char *ipver_by;       /* Item that set the IP version. */
    const char *proto_by;       /* Item that set the protocol. */
    const char *seen[FF_N];     /* Name of each field given, or NULL. */
    const char *underlay_by;    /* The 'underlay' item, or NULL. */
};

/* Requires IP version 'ipver' because of item 'name'. */
static char *
filter_set_ipver__(struct fparser *fp, const char *name, int ipver)
{
    if (fp->m.mask.ipver && fp->m.key.ipver != ipver) {
        return clause_error__(fp->c, name, "'%s' (IPv%d) conflicts with "
                              "'%s' (IPv%d): expected a single IP version",
                              name, ipver, fp->ipver_by, fp->m.key.ipver);
    }
    if (!fp->m.mask.ipver) {
        fp->ipver_by = name;
    }
    fp->m.mask.ipver = 0xff;
    fp->m.key.ipver = ipver;
    return NULL;
}

/* Requires IP protocol 'proto' because of item 'name'. */
static char *
filter_set_proto__(struct fparser *fp, const char *name, int proto)
{
    if (fp->m.mask.proto && fp->m.key.proto != proto) {
        return clause_error__(fp->c, name, "'%s' (protocol %d) conflicts "
                              "with '%s' (protocol %d): expected a single "
                              "protocol", name, proto, fp->proto_by,
                              fp->m.key.proto);
    }
    if (!fp->m.mask.proto) {
        fp->proto_by = name;
    }
    fp->m.mask.proto = 0xff;
    fp->m.key.proto = proto;
    return NULL;
}

/* Parses IPv4 'value' ("a.b.c.d", "a.b.c.d/len", "a.b.c.d/m.m.m.m") into
 * 'key' and 'mask' (word 0). */
static char *
filter_parse_ipv4__(const struct clause *c, char *value, uint32_t key[4],
                    uint32_t mask[4])
{
    char *slash = strchr(value, '/');
    struct in_addr addr, netmask;

    if (slash) {
        *slash = '\0';
    }
    if (inet_pton(AF_INET, value, &addr) != 1) {
        return clause_error__(c, value, "'%s' is not an IPv4 address: "
                              "expected a.b.c.d, a.b.c.d/LEN or "
                              "a.b.c.d/m.m.m.m", value);
    }
    if (!slash) {
        netmask.s_addr = UINT32_MAX;
    } else if (strchr(slash + 1, '.')) {
        if (inet_pton(AF_INET, slash + 1, &netmask) != 1) {
            return clause_error__(c, slash + 1, "'%s' is not an IPv4 "
                                  "netmask: expected m.m.m.m or a prefix "
                                  "length 0 to 32", slash + 1);
        }
    } else {
        int len;
        char *error = parse_prefix__(c, slash + 1, 32, &len);
        if (error) {
            return error;
        }
        uint32_t m[4];
        prefix_mask__(len, m);
        netmask.s_addr = m[0];
    }
    memcpy(&key[0], &addr, sizeof addr);
    memcpy(&mask[0], &netmask, sizeof netmask);
    return NULL;
}

/* Parses IPv6 'value' ("addr" or "addr/len") into 'key' and 'mask'. */
static char *
filter_parse_ipv6__(const struct clause *c, char *value, uint32_t key[4],
                    uint32_t mask[4])
{
    char *slash = strchr(value, '/');
    struct in6_addr addr;
    int len = 128;

    if (slash) {
        *slash = '\0';
    }
    if (inet_pton(AF_INET6, value, &addr) != 1) {
        return clause_error__(c, value, "'%s' is not an IPv6 address: "
                              "expected an address such as 2001:db8::1 or "
                              "2001:db8::/32", value);
    }
    if (slash) {
        char *error = parse_prefix__(c, slash + 1, 128, &len);
        if (error) {
            return error;
        }
    }
    memcpy(key, &addr, sizeof addr);
    prefix_mask__(len, mask);
    return NULL;
}

/* Parses port 'value' ("N" or "N/MASK") into '*key' and '*mask'. */
static char *
filter_parse_port__(const struct clause *c, char *value, uint16_t *key,
                    uint16_t *mask)
{
    char *slash = strchr(value, '/');
    unsigned long port, m = 0xffff;

    if (slash) {
        *slash = '\0';
    }
    if (!parse_uint__(value, 0xffff, &port)) {
        return clause_error__(c, value, "'%s' is not a port: expected 0 to "
                              "65535 (decimal or 0x hex), optionally "
                              "followed by /MASK", value);
    }
    if (slash && !parse_uint__(slash + 1, 0xffff, &m)) {
        return clause_error__(c, slash + 1, "'%s' is not a port mask: "
                              "expected 0 to 0xffff", slash + 1);
    }
    *key = port;
    *mask = m;
    return NULL;
}

/* Parses tun_id 'value' ("N" or "N/MASK", each at most TPM_VNI_MAX) into
 * 'tun'. */
static char *
filter_parse_tun_id__(const struct clause *c, char *value,
                      struct tpm_tun_filter *tun)
{
    char *slash = strchr(value, '/');
    unsigned long vni, m = TPM_VNI_MAX;

    if (slash) {
        *slash = '\0';
    }
    if (!parse_uint__(value, TPM_VNI_MAX, &vni)) {
        return clause_error__(c, value, "'%s' is not a VNI: expected 0 to "
                              "16777215 (0xffffff, decimal or 0x hex), "
                              "optionally followed by /MASK", value);
    }
    if (slash && !parse_uint__(slash + 1, TPM_VNI_MAX, &m)) {
        return clause_error__(c, slash + 1, "'%s' is not a VNI mask: "
                              "expected 0 to 0xffffff", slash + 1);
    }
    tun->on = true;
    tun->vni = vni & m;
    tun->mask = m;
    return NULL;
}

char *
tpm_tun_filter_to_string(const struct tpm_tun_filter *f)
{
    if (f->underlay) {
        return xstrdup("underlay");
    } else if (!f->on) {
        return xstrdup("");
    } else if (f->mask == TPM_VNI_MAX) {
        return xasprintf("tun_id=%"PRIu32, f->vni);
    }
    return xasprintf("tun_id=%#"PRIx32"/%#"PRIx32, f->vni, f->mask);
}

/* Parses filter item 'name'='value' ('value' is NULL if there was no
 * '='). */
static char *
filter_parse_item__(struct fparser *fp, char *name, char *value,
                    const char *eq)
{
    const struct clause *c = fp->c;
    struct tpm_key *key = &fp->m.key;
    struct tpm_key *mask = &fp->m.mask;
    unsigned long n;
    char *error;
    int field;

    if (!strcmp(name, "any")) {
        field = -1;
    } else if (!strcmp(name, "underlay")) {
        if (value) {
            return clause_error__(c, eq, "unexpected '=' after 'underlay': "
                                  "expected 'underlay' alone");
        } else if (fp->underlay_by) {
            return clause_error__(c, name, "duplicate item 'underlay': "
                                  "expected it at most once");
        }
        fp->underlay_by = name;
        fp->tun.underlay = true;
        return NULL;
    } else {
        for (size_t i = 0; i < ARRAY_SIZE(filter_shorthands); i++) {
            const struct filter_shorthand *sh = &filter_shorthands[i];
            if (strcmp(name, sh->name)) {
                continue;
            }
            if (value) {
                return clause_error__(c, eq, "unexpected '=' after '%s': "
                                      "expected '%s' alone (protocol "
                                      "shorthands take no value)",
                                      name, name);
            }
            error = filter_set_ipver__(fp, name, sh->ipver);
            if (!error && sh->proto >= 0) {
                error = filter_set_proto__(fp, name, sh->proto);
            }
            return error;
        }
        for (field = 0; field < FF_N; field++) {
            if (!strcmp(name, filter_fields[field])) {
                break;
            }
        }
        if (field >= FF_N) {
            return clause_error__(c, name, "unknown field '%s': expected "
                                  "one of ip, ipv6, tcp, udp, sctp, icmp, "
                                  "tcp6, udp6, sctp6, icmp6, dl_type, "
                                  "nw_proto, nw_src, nw_dst, ipv6_src, "
                                  "ipv6_dst, tp_src, tp_dst, tun_id, "
                                  "in_port, underlay or any", name);
        }
    }
    if (field < 0) {
        if (value) {
            return clause_error__(c, eq, "unexpected '=' after 'any': "
                                  "expected 'any' alone");
        }
        return NULL;
    }

    if (!value || !*value) {
        return clause_error__(c, name, "field '%s' needs a value: expected "
                              "%s=VALUE", name, name);
    }
    if (fp->seen[field]) {
        return clause_error__(c, name, "duplicate field '%s': expected each "
                              "field at most once", name);
    }
    fp->seen[field] = name;

    switch (field) {
    case FF_DL_TYPE:
        if (!parse_uint__(value, 0xffff, &n)
            || (n != 0x0800 && n != 0x86dd)) {
            return clause_error__(c, value, "'%s' is not a supported "
                                  "dl_type: expected 0x0800 (IPv4) or "
                                  "0x86dd (IPv6)", value);
        }
        return filter_set_ipver__(fp, name, n == 0x0800 ? 4 : 6);

    case FF_NW_PROTO:
        if (!parse_uint__(value, 255, &n)) {
            return clause_error__(c, value, "'%s' is not an IP protocol "
                                  "number: expected 0 to 255", value);
        }
        return filter_set_proto__(fp, name, n);

    case FF_NW_SRC:
    case FF_NW_DST:
        error = filter_parse_ipv4__(c, value,
                                    field == FF_NW_SRC ? key->src : key->dst,
                                    field == FF_NW_SRC
                                    ? mask->src : mask->dst);
        return error ? error : filter_set_ipver__(fp, name, 4);

    case FF_IPV6_SRC:
    case FF_IPV6_DST:
        error = filter_parse_ipv6__(c, value,
                                    field == FF_IPV6_SRC
                                    ? key->src : key->dst,
                                    field == FF_IPV6_SRC
                                    ? mask->src : mask->dst);
        return error ? error : filter_set_ipver__(fp, name, 6);

    case FF_TP_SRC:
        return filter_parse_port__(c, value, &key->sport, &mask->sport);

    case FF_TP_DST:
        return filter_parse_port__(c, value, &key->dport, &mask->dport);

    case FF_TUN_ID:
        return filter_parse_tun_id__(c, value, &fp->tun);

    case FF_IN_PORT:
        if (!tpm_port_name_valid(value)) {
            return clause_error__(c, value, "'%s' is not an interface name: "
                                  "expected 1 to %d characters, no white "
                                  "space, ',' or '='", value,
                                  TPM_PORT_NAME_MAX);
        }
        fp->in_port = xstrdup(value);
        return NULL;

    default:
        return NULL;
    }
}

/* Parses filter clause 'c' into 'match', 'tun' and '*in_portp' (the
 * in_port= item's name, or NULL; the caller frees it).  Returns NULL or an
 * error. */
static char *
parse_filter__(const struct clause *c, struct tpm_match *match,
               struct tpm_tun_filter *tun, char **in_portp)
{
    struct fparser fp = { .c = c };
    char *p = c->buf;
    char *error = NULL;

    memset(match, 0, sizeof *match);
    memset(tun, 0, sizeof *tun);
    *in_portp = NULL;
    if (!*skip_space__(p)) {
        return NULL;
    }
    for (;;) {
        char *item;
        bool comma;

        next_item__(&p, &item, &comma);
        if (!*item) {
            free(fp.in_port);
            return empty_item_error__(c, item, comma, "a field such as tcp "
                                      "or nw_dst=10.0.0.0/8");
        }

        /* Split "name=value", allowing white space around '='. */
        char *eq = strchr(item, '=');
        char *value = NULL;
        if (eq) {
            char *end = eq;
            while (end > item && isspace((unsigned char) end[-1])) {
                end--;
            }
            value = (char *) skip_space__(eq + 1);
            *end = '\0';
            if (!*item) {
                free(fp.in_port);
                return clause_error__(c, eq, "unexpected '=': expected a "
                                      "field name before it");
            }
        }
        error = filter_parse_item__(&fp, item, value, eq);
        if (error) {
            free(fp.in_port);
            return error;
        }
        if (!comma) {
            break;
        }
    }

    /* ovs-ofctl prerequisites: ports need a protocol that has them. */
    for (int f = FF_TP_SRC; f <= FF_TP_DST; f++) {
        uint8_t proto = fp.m.key.proto;
        if (fp.seen[f] && !(fp.m.mask.proto
                            && (proto == 6 || proto == 17 || proto == 132))) {
            free(fp.in_port);
            return clause_error__(c, fp.seen[f], "'%s' needs a protocol "
                                  "with ports: expected tcp, udp, sctp, "
                                  "tcp6, udp6, sctp6 or nw_proto=6, 17 or "
                                  "132 in the same filter", fp.seen[f]);
        }
    }

    if (fp.underlay_by && fp.tun.on) {
        const char *later = (fp.underlay_by > fp.seen[FF_TUN_ID]
                             ? fp.underlay_by : fp.seen[FF_TUN_ID]);
        free(fp.in_port);
        return clause_error__(c, later, "'tun_id' and 'underlay' exclude "
                              "each other: an underlay event sees tunnels "
                              "by their outer headers, of no tenant");
    }

    tpm_key_and(&match->key, &fp.m.key, &fp.m.mask);
    match->mask = fp.m.mask;
    *tun = fp.tun;
    *in_portp = fp.in_port;
    return NULL;
}

/* Group (flow granularity). */

enum group_field {
    GF_NW_SRC, GF_NW_DST, GF_IPV6_SRC, GF_IPV6_DST, GF_TP_SRC, GF_TP_DST,
    GF_NW_PROTO, GF_TUN_ID, GF_IN_PORT, GF_N
};

static const char *const group_fields[GF_N] = {
    [GF_NW_SRC] = "nw_src", [GF_NW_DST] = "nw_dst",
    [GF_IPV6_SRC] = "ipv6_src", [GF_IPV6_DST] = "ipv6_dst",
    [GF_TP_SRC] = "tp_src", [GF_TP_DST] = "tp_dst",
    [GF_NW_PROTO] = "nw_proto", [GF_TUN_ID] = "tun_id",
    [GF_IN_PORT] = "in_port",
};

#define GROUP_EXPECTED "5tuple or a list of nw_src, nw_dst, ipv6_src, " \
    "ipv6_dst, tp_src, tp_dst, nw_proto, tun_id and in_port, such as " \
    "nw_dst/24,tp_dst (in_port,5tuple: the 5-tuple per port)"

/* Stores the granularity mask of the full 5-tuple in 'mask': with the
 * tenant slot, so that two tenants' identical 5-tuples are two groups. */
static void
group_5tuple_mask__(struct tpm_key *mask)
{
    memset(mask, 0, sizeof *mask);
    memset(mask->src, 0xff, sizeof mask->src);
    memset(mask->dst, 0xff, sizeof mask->dst);
    mask->sport = mask->dport = 0xffff;
    mask->proto = mask->ipver = 0xff;
    mask->tun = 0xffff;
}

/* Parses group clause 'c' into 'group', '*is_5tuplep' and '*by_portp'
 * (in_port is in the list).  "5tuple" is alone or with in_port.  Returns
 * NULL or an error. */
static char *
parse_group__(const struct clause *c, struct tpm_key *group,
              bool *is_5tuplep, bool *by_portp)
{
    const char *by[GF_N] = { NULL };  /* Item that set each part. */
    const char *five = NULL;          /* The '5tuple' item, if any. */
    struct tpm_key m5;
    char *p = c->buf;

    group_5tuple_mask__(&m5);
    memset(group, 0, sizeof *group);
    group->ipver = 0xff;
    *by_portp = false;
    for (;;) {
        char *item;
        bool comma;

        next_item__(&p, &item, &comma);
        if (!*item) {
            return empty_item_error__(c, item, comma, GROUP_EXPECTED);
        }
        if (!strcmp(item, "5tuple")) {
            bool others = five != NULL;
            for (int f = 0; f < GF_N; f++) {
                others |= by[f] && f != GF_IN_PORT;
            }
            five = item;
            if (others) {
                return clause_error__(c, item, "unexpected '5tuple' in a "
                                      "list: expected 5tuple alone or with "
                                      "in_port, or a list of fields");
            }
            if (!comma) {
                break;
            }
            continue;
        }

        char *slash = strchr(item, '/');
        if (slash) {
            *slash = '\0';
        }
        int f;
        for (f = 0; f < GF_N; f++) {
            if (!strcmp(item, group_fields[f])) {
                break;
            }
        }
        if (f >= GF_N) {
            return clause_error__(c, item, "unknown field '%s': expected "
                                  GROUP_EXPECTED, item);
        }
        if (five && f != GF_IN_PORT) {
            return clause_error__(c, item, "unexpected '%s' after '5tuple': "
                                  "expected 5tuple alone or with in_port, "
                                  "or a list of fields", item);
        }

        /* nw_src and ipv6_src both group on the source address, ... */
        int part = (f == GF_IPV6_SRC ? GF_NW_SRC
                    : f == GF_IPV6_DST ? GF_NW_DST
                    : f);
        if (by[part]) {
            if (!strcmp(by[part], item)) {
                return clause_error__(c, item, "duplicate field '%s': "
                                      "expected each field at most once",
                                      item);
            }
            return clause_error__(c, item, "'%s' conflicts with '%s': "
                                  "expected one of them", item, by[part]);
        }
        by[part] = item;

        bool v4 = f == GF_NW_SRC || f == GF_NW_DST;
        bool v6 = f == GF_IPV6_SRC || f == GF_IPV6_DST;
        int len = v4 ? 32 : 128;
        if (slash && !v4 && !v6) {
            return clause_error__(c, slash, "unexpected '/%s' after '%s': "
                                  "expected no prefix length (only "
                                  "addresses take one)", slash + 1, item);
        }
        if (slash) {
            char *error = parse_prefix__(c, slash + 1, v4 ? 32 : 128, &len);
            if (error) {
                return error;
            }
        }

        switch (f) {
        case GF_NW_SRC:
        case GF_IPV6_SRC:
            prefix_mask__(len, group->src);
            break;
        case GF_NW_DST:
        case GF_IPV6_DST:
            prefix_mask__(len, group->dst);
            break;
        case GF_TP_SRC:
            group->sport = 0xffff;
            break;
        case GF_TP_DST:
            group->dport = 0xffff;
            break;
        case GF_NW_PROTO:
            group->proto = 0xff;
            break;
        case GF_TUN_ID:
            group->tun = 0xffff;
            break;
        case GF_IN_PORT:
            *by_portp = true;
            break;
        default:
            break;
        }
        if (!comma) {
            break;
        }
    }
    if (five) {
        *group = m5;
        *is_5tuplep = true;
        return NULL;
    }
    static const uint32_t no_addr[4];
    if (!memcmp(group->src, no_addr, sizeof no_addr)
        && !memcmp(group->dst, no_addr, sizeof no_addr)) {
        /* No address: IPv4 and IPv6 packets of a port, protocol or
         * tenant are one group (a group prints no IP version). */
        group->ipver = 0;
    }
    *is_5tuplep = tpm_key_equal(group, &m5);
    return NULL;
}

/* Appends to 's' the group item for address mask 'mask' of direction
 * 'dir' ("src" or "dst"), if any. */
static void
group_addr_to_string__(char **s, const uint32_t mask[4], const char *dir)
{
    if (!(mask[0] | mask[1] | mask[2] | mask[3])) {
        return;
    }

    int len = tpm_mask_prefix_len(mask, 4);
    bool v4 = !(mask[1] | mask[2] | mask[3]) && len <= 32;
    char *old = *s;
    char suffix[16] = "";
    if (len != (v4 ? 32 : 128)) {
        snprintf(suffix, sizeof suffix, "/%d", len);
    }
    *s = xasprintf("%s%s%s_%s%s", old, *old ? "," : "",
                   v4 ? "nw" : "ipv6", dir, suffix);
    free(old);
}

static void
group_append__(char **s, bool cond, const char *name)
{
    if (cond) {
        char *old = *s;
        *s = xasprintf("%s%s%s", old, *old ? "," : "", name);
        free(old);
    }
}

/* Formats a granularity mask as the group= clause would: "5tuple", or a
 * list in the order tun_id, nw_src, nw_dst, tp_src, tp_dst, nw_proto
 * ("nw_dst/24,tp_dst"; IPv6-wide address masks as ipv6_src/ipv6_dst).  A
 * mask that groups on no field at all is written "nw_src/0".  Caller
 * frees. */
char *
tpm_group_to_string(const struct tpm_key *group)
{
    struct tpm_key m5;
    group_5tuple_mask__(&m5);
    if (tpm_key_equal(group, &m5)) {
        return xstrdup("5tuple");
    }

    char *s = xstrdup("");
    group_append__(&s, group->tun, "tun_id");
    group_addr_to_string__(&s, group->src, "src");
    group_addr_to_string__(&s, group->dst, "dst");
    group_append__(&s, group->sport, "tp_src");
    group_append__(&s, group->dport, "tp_dst");
    group_append__(&s, group->proto, "nw_proto");
    group_append__(&s, !*s, "nw_src/0");
    return s;
}

/* Formats event 'ev''s group= clause: tpm_group_to_string() of its mask,
 * after "in_port," if it groups by port ("in_port" alone if by nothing
 * else).  Caller frees. */
char *
tpm_event_group_to_string(const struct tpm_event *ev)
{
    char *s = tpm_group_to_string(&ev->group);
    if (ev->group_port) {
        char *old = s;
        s = (strcmp(old, "nw_src/0") ? xasprintf("in_port,%s", old)
             : xstrdup("in_port"));
        free(old);
    }
    return s;
}

/* Ports. */

char *
tpm_event_refuse_ports(const struct tpm_event *ev, const char *front)
{
    if (!ev->in_port && !ev->group_port) {
        return NULL;
    }
    return xasprintf("%s: %s names an interface, which only the switch "
                     "that has it knows: %s", ev->in_port ? "filter"
                     : "group", ev->in_port ? "in_port=" : "in_port",
                     front);
}

bool
tpm_port_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (!n || n > TPM_PORT_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = name[i];
        if (ch <= ' ' || ch >= 0x7f || ch == ',' || ch == '=') {
            return false;
        }
    }
    return true;
}

/* Events. */

enum clause_id { CL_FILTER, CL_PREDICATE, CL_GROUP, CL_INTERVAL, CL_N };

static const char *const clause_names[CL_N] = {
    [CL_FILTER] = "filter", [CL_PREDICATE] = "predicate",
    [CL_GROUP] = "group", [CL_INTERVAL] = "interval",
};

#define CLAUSES_EXPECTED "filter=, predicate=, group= or interval="

/* A definition being parsed: its clauses, NULL 'buf' if absent.  Clause
 * ids CL_N and up are the front end's extension clauses ('ext'). */
struct definition {
    const char *text;
    struct clause clauses[CL_N];
    const struct tpm_event_ext *ext;    /* NULL: none declared. */
    struct clause *ext_clauses;         /* ext->n of them. */
    char *local;                /* 'text' with extension clauses blanked. */
};

static struct clause *
def_clause__(struct definition *def, int id)
{
    return id < CL_N ? &def->clauses[id] : &def->ext_clauses[id - CL_N];
}

static const char *
def_clause_name__(const struct definition *def, int id)
{
    return id < CL_N ? clause_names[id] : def->ext->names[id - CL_N];
}

/* The clauses 'def' takes, for an error: "filter=, ... or interval=". */
static char *
def_clauses_expected__(const struct definition *def)
{
    size_t n_ext = def->ext ? def->ext->n : 0;
    if (!n_ext) {
        return xstrdup(CLAUSES_EXPECTED);
    }
    size_t n = CL_N + n_ext;
    char *out = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *sep = !i ? "" : i + 1 < n ? ", " : " or ";
        char *next = xasprintf("%s%s%s=", out ? out : "", sep,
                               def_clause_name__(def, i));
        free(out);
        out = next;
    }
    return out;
}

/* Returns a malloc()'d error "definition: column N: MESSAGE" for
 * offset 'at' of the definition. */
static char * __attribute__((format(printf, 3, 4)))
def_error__(const struct definition *def, const char *at,
            const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);

    char *error = xasprintf("definition: column %d: %s",
                            (int) (at - def->text) + 1, msg);
    free(msg);
    return error;
}

/* Stores the value of clause 'id', whose keyword is at 'kw' and whose
 * value runs from 'start' to 'end' of the definition, white space
 * trimmed.  An extension clause is blanked out of 'def->local'. */
static void
def_set_clause__(struct definition *def, int id, const char *kw,
                 const char *start, const char *end)
{
    if (id >= CL_N) {
        memset(def->local + (kw - def->text), ' ', end - kw);
    }

    const char *s = skip_space__(start);
    if (s > end) {
        s = end;
    }
    while (end > s && isspace((unsigned char) end[-1])) {
        end--;
    }

    struct clause *c = def_clause__(def, id);
    c->name = def_clause_name__(def, id);
    c->buf = xstrndup(s, end - s);
    c->base = (s < end ? s : start) - def->text;
}

/* Returns the clause id of keyword 's' of 'len' bytes, or -1. */
static int
lookup_clause__(const struct definition *def, const char *s, int len)
{
    for (int i = 0; i < CL_N; i++) {
        if (word_is__(s, len, clause_names[i])) {
            return i;
        }
    }
    for (size_t i = 0; def->ext && i < def->ext->n; i++) {
        if (word_is__(s, len, def->ext->names[i])) {
            return CL_N + i;
        }
    }
    return -1;
}

/* Returns true if a "word=" at 'p' of the definition 'text' continues a
 * comma-separated list rather than starting a clause, as in "filter=tcp,
 * tp_dst=80". */
static bool
continues_list__(const char *text, const char *p)
{
    while (p > text && isspace((unsigned char) p[-1])) {
        p--;
    }
    return p > text && p[-1] == ',';
}

/* Splits 'def->text' into clauses.  Returns NULL or an error. */
static char *
split_clauses__(struct definition *def)
{
    const char *text = def->text;
    const char *kw = NULL;      /* Keyword of the current clause. */
    const char *value = NULL;   /* Start of the current clause's value. */
    int cur = -1;               /* Current clause. */

    for (const char *p = text; *p; ) {
        bool at_clause = p == text || isspace((unsigned char) p[-1]);
        int len = at_clause ? ident_len__(p) : 0;

        if (len && p[len] == '=' && p[len + 1] != '=') {
            int id = lookup_clause__(def, p, len);
            if (id >= 0) {
                /* The current clause's value is stored only when the next
                 * clause starts: check it as well. */
                if (def_clause__(def, id)->buf || id == cur) {
                    const char *cn = def_clause_name__(def, id);
                    return xasprintf("%s: column %d: duplicate clause "
                                     "'%s=': expected each clause at most "
                                     "once", cn, (int) (p - text) + 1, cn);
                }
                if (cur >= 0) {
                    def_set_clause__(def, cur, kw, value, p);
                }
                cur = id;
                kw = p;
                value = p + len + 1;
                p = value;
                continue;
            } else if (!continues_list__(text, p)) {
                char *expected = def_clauses_expected__(def);
                char *error = def_error__(def, p, "unknown clause '%.*s=': "
                                          "expected %s", len, p, expected);
                free(expected);
                return error;
            }
        }
        if (cur < 0 && !isspace((unsigned char) *p)) {
            int n = 0;
            while (p[n] && !isspace((unsigned char) p[n])) {
                n++;
            }
            char *expected = def_clauses_expected__(def);
            char *error = def_error__(def, p, "unexpected '%.*s': expected "
                                      "a clause %s", n, p, expected);
            free(expected);
            return error;
        }
        p += len ? len : 1;
    }
    if (cur >= 0) {
        def_set_clause__(def, cur, kw, value, value + strlen(value));
    }

    static const int required[] = { CL_FILTER, CL_PREDICATE };
    for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
        int id = required[i];
        if (!def->clauses[id].buf) {
            return xasprintf("%s: column %d: unexpected end of definition: "
                             "expected a %s= clause, as in filter=tcp "
                             "predicate=sum(volume) > 125KB",
                             clause_names[id], (int) strlen(text) + 1,
                             clause_names[id]);
        }
    }
    return NULL;
}

bool
tpm_event_name_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len < 1 || len > 63) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!isalnum((unsigned char) name[i]) && !strchr("_.-", name[i])) {
            return false;
        }
    }
    return true;
}

/* Parses definition 'text' of event 'name' into a new event stored in
 * '*eventp'.  Returns NULL on success, otherwise a malloc()'d message
 * "CLAUSE: column N: ..." (where CLAUSE is filter, predicate, group or
 * interval, or "definition" for errors outside any clause, and N is the
 * 1-based column in 'text'), or "name: ..." for an invalid 'name', and
 * stores NULL in '*eventp'. */
static char *
event_parse__(const char *name, const char *text,
              struct tpm_event_ext *ext, struct tpm_event **eventp)
{
    struct definition def = { .text = text ? text : "", .ext = ext };
    struct tpm_event *event = NULL;
    char *error;

    *eventp = NULL;
    if (!tpm_event_name_valid(name)) {
        return xasprintf("name: '%s' is not a valid event name: expected 1 "
                         "to 63 characters from A-Z, a-z, 0-9, '_', '.' "
                         "and '-'", name ? name : "");
    }

    if (ext) {
        def.ext_clauses = xcalloc(ext->n ? ext->n : 1,
                                  sizeof *def.ext_clauses);
        def.local = xstrdup(def.text);
    }
    error = split_clauses__(&def);
    if (error) {
        goto out;
    }

    event = xzalloc(sizeof *event);
    event->name = xstrdup(name);
    event->text = xstrdup(def.text);
    event->interval_ns = UINT64_C(10000000);

    error = parse_filter__(&def.clauses[CL_FILTER], &event->filter,
                           &event->filter_tun, &event->in_port);
    if (error) {
        goto out;
    }
    error = parse_predicate__(&def.clauses[CL_PREDICATE], &event->pred);
    if (error) {
        goto out;
    }
    event_set_value__(event);

    if (def.clauses[CL_GROUP].buf) {
        error = parse_group__(&def.clauses[CL_GROUP], &event->group,
                              &event->group_5tuple, &event->group_port);
        if (error) {
            goto out;
        }
    } else {
        group_5tuple_mask__(&event->group);
        event->group_5tuple = true;
    }
    if (event->filter_tun.underlay) {
        /* Outer flows have no tenant: a 5-tuple is the outer one. */
        if (event->group.tun && !event->group_5tuple) {
            const struct clause *gc = &def.clauses[CL_GROUP];
            error = clause_error__(gc, gc->buf, "'tun_id' in the group of "
                                   "an underlay event: its flows have no "
                                   "tenant");
            goto out;
        }
        event->group.tun = 0;
    }
    event->group_tun = event->group.tun != 0;

    const struct clause *ic = &def.clauses[CL_INTERVAL];
    if (ic->buf) {
        char *msg = tpm_parse_time(ic->buf, &event->interval_ns);
        if (msg) {
            error = clause_error__(ic, ic->buf, "%s", msg);
            free(msg);
            goto out;
        }
    }

out:
    for (int i = 0; i < CL_N; i++) {
        free(def.clauses[i].buf);
    }
    if (ext && !error) {
        ext->values = xcalloc(ext->n ? ext->n : 1, sizeof *ext->values);
        ext->cols = xcalloc(ext->n ? ext->n : 1, sizeof *ext->cols);
        for (size_t i = 0; i < ext->n; i++) {
            ext->values[i] = def.ext_clauses[i].buf;
            ext->cols[i] = def.ext_clauses[i].base + 1;
        }
        ext->local = def.local;
    } else if (ext) {
        for (size_t i = 0; i < ext->n; i++) {
            free(def.ext_clauses[i].buf);
        }
        free(def.local);
    }
    free(def.ext_clauses);
    if (error) {
        tpm_event_destroy(event);
        return error;
    }
    *eventp = event;
    return NULL;
}

char *
tpm_event_parse(const char *name, const char *text,
                struct tpm_event **eventp)
{
    return event_parse__(name, text, NULL, eventp);
}

char *
tpm_event_parse_ext(const char *name, const char *text,
                    struct tpm_event_ext *ext, struct tpm_event **eventp)
{
    ext->values = NULL;
    ext->cols = NULL;
    ext->local = NULL;
    return event_parse__(name, text, ext, eventp);
}

void
tpm_event_ext_clear(struct tpm_event_ext *ext)
{
    for (size_t i = 0; ext->values && i < ext->n; i++) {
        free(ext->values[i]);
    }
    free(ext->values);
    free(ext->cols);
    free(ext->local);
    ext->values = NULL;
    ext->cols = NULL;
    ext->local = NULL;
}

/* Parses a line "NAME definition..." as found in event files into
 * '*eventp'.  Blank lines and lines whose first non-blank character is
 * '#' yield NULL error and NULL event.  Error columns are relative to the
 * definition (the text after the name and the white space following it),
 * as if it had been passed to tpm_event_parse(). */
char *
tpm_event_parse_line(const char *line, struct tpm_event **eventp)
{
    const char *p = skip_space__(line);

    *eventp = NULL;
    if (!*p || *p == '#') {
        return NULL;
    }

    const char *name_end = p;
    while (*name_end && !isspace((unsigned char) *name_end)) {
        name_end++;
    }
    const char *def = skip_space__(name_end);
    const char *def_end = def + strlen(def);
    while (def_end > def && isspace((unsigned char) def_end[-1])) {
        def_end--;
    }

    char *name = xstrndup(p, name_end - p);
    char *error;
    if (def_end == def) {
        error = xasprintf("definition: column 1: unexpected end of line: "
                          "expected a definition after event name '%s', "
                          "such as filter=tcp predicate=sum(volume) > "
                          "125KB", name);
    } else {
        char *text = xstrndup(def, def_end - def);
        error = tpm_event_parse(name, text, eventp);
        free(text);
    }
    free(name);
    return error;
}

void
tpm_event_destroy(struct tpm_event *event)
{
    if (event) {
        free(event->name);
        free(event->text);
        free(event->in_port);
        expr_free__(event->pred);
        free(event);
    }
}

/* Returns a deep copy of 'event', whose 'value' and 'threshold' point into
 * the copy's predicate.  'name', 'text' and 'pred' may be NULL. */
struct tpm_event *
tpm_event_clone(const struct tpm_event *event)
{
    struct tpm_event *c = xmalloc(sizeof *c);
    *c = *event;
    c->name = event->name ? xstrdup(event->name) : NULL;
    c->text = event->text ? xstrdup(event->text) : NULL;
    c->in_port = event->in_port ? xstrdup(event->in_port) : NULL;
    c->pred = expr_clone__(event->pred);
    event_set_value__(c);
    return c;
}

/* Returns true if the predicate uses a TCP-state variable. */
bool
tpm_event_needs_tcp_state(const struct tpm_event *event)
{
    return expr_has_tcp_var__(event->pred);
}

/* Replaces the event's threshold with 'value'.  Returns false if the
 * event has no constant threshold. */
bool
tpm_event_set_threshold(struct tpm_event *event, double value)
{
    if (!event->threshold) {
        return false;
    }
    event->threshold->num = value;
    return true;
}

struct tpm_expr *
tpm_expr_clone(const struct tpm_expr *expr)
{
    return expr_clone__(expr);
}

void
tpm_expr_destroy(struct tpm_expr *expr)
{
    expr_free__(expr);
}
