/* SPDX-License-Identifier: Apache-2.0 */
#include "tem-auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "tproto.h"
#include "util.h"

static int
entry_cmp(const void *a_, const void *b_)
{
    const struct tem_allow_entry *a = a_, *b = b_;
    return memcmp(a->key, b->key, TPM_CURVE_KEY_LEN);
}

void
tem_allow_free(struct tem_allow *allow)
{
    if (allow) {
        for (size_t i = 0; i < allow->n; i++) {
            free(allow->entries[i].name);
        }
        free(allow->entries);
        free(allow);
    }
}

/* Splits 'line' into its first (at most 'max') blank-separated words. */
static size_t
split_words(char *line, char **words, size_t max)
{
    size_t n = 0;
    for (char *save = NULL, *w = strtok_r(line, " \t\r", &save);
         w && n < max; w = strtok_r(NULL, " \t\r", &save)) {
        words[n++] = w;
    }
    return n;
}

/* The entry of key 'z85' in 'allow' not sorted yet (a linear search), or
 * NULL. */
static const struct tem_allow_entry *
tem_allow_find_unsorted__(const struct tem_allow *allow, const char *z85)
{
    for (size_t i = 0; i < allow->n; i++) {
        if (!memcmp(allow->entries[i].key, z85, TPM_CURVE_KEY_LEN)) {
            return &allow->entries[i];
        }
    }
    return NULL;
}

/* Parses one line (its words in 'w', the first not a comment); returns
 * NULL or an error.  Words after the fields must be a comment: a word
 * starting with '#' and the rest of the line (a key may hold '#', so
 * only the words after the fields can start one). */
static char *
parse_line(char **w, size_t n, struct tem_allow_entry *e)
{
    bool client = n >= 3 && !strcmp(w[0], "client")
                  && tpm_curve_key_valid(w[2]);
    bool subscriber = n >= 3 && !strcmp(w[0], "subscriber")
                      && tpm_curve_key_valid(w[2]);
    size_t fields = client || subscriber ? 3 : 2;
    const char *name = fields == 3 ? w[1] : w[0];
    const char *key = n >= fields ? w[fields - 1] : NULL;

    if (!key || (n > fields && w[fields][0] != '#')) {
        return xstrdup("expected \"HOST-ID KEY\", \"client NAME KEY\" or "
                       "\"subscriber NAME KEY\"");
    }
    if (!tproto_id_valid(name)) {
        return xasprintf("%s is not 1 to %d characters from "
                         "[A-Za-z0-9_.:-]", client ? "client name"
                         : subscriber ? "subscriber name" : "host id",
                         TPROTO_MAX_ID);
    }
    if (!tpm_curve_key_valid(key)) {
        return xasprintf("the key is not %d Z85 characters",
                         TPM_CURVE_KEY_LEN);
    }
    e->kind = (client ? TEM_ALLOW_CLIENT
               : subscriber ? TEM_ALLOW_SUBSCRIBER : TEM_ALLOW_HOST);
    memcpy(e->key, key, TPM_CURVE_KEY_LEN + 1);
    e->name = xstrdup(name);
    return NULL;
}

char *
tem_allow_parse(const char *text, size_t len, const char *origin,
                struct tem_allow **allowp)
{
    struct tem_allow *allow = xzalloc(sizeof *allow);
    size_t allocated = 0;
    char *error = NULL;
    int lineno = 0;

    *allowp = NULL;
    for (size_t pos = 0; pos < len && !error; ) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t) (nl - text) : len;
        char *line = xstrndup(text + pos, end - pos);
        pos = end + 1;
        lineno++;

        char *w[4];
        size_t n = split_words(line, w, 4);
        if (n && w[0][0] != '#') {
            struct tem_allow_entry e;
            memset(&e, 0, sizeof e);
            char *why = parse_line(w, n, &e);
            if (why) {
                error = xasprintf("%s, line %d: %s", origin, lineno, why);
                free(why);
            } else {
                if (allow->n == allocated) {
                    allocated = allocated ? 2 * allocated : 16;
                    allow->entries = xrealloc(allow->entries, allocated
                                              * sizeof *allow->entries);
                }
                allow->entries[allow->n++] = e;
                if (e.kind == TEM_ALLOW_HOST) {
                    allow->n_hosts++;
                } else if (e.kind == TEM_ALLOW_CLIENT) {
                    allow->n_clients++;
                } else {
                    allow->n_subscribers++;
                }
            }
        }
        free(line);
    }

    if (!error && allow->n) {
        qsort(allow->entries, allow->n, sizeof *allow->entries, entry_cmp);
        for (size_t i = 1; i < allow->n; i++) {
            if (!entry_cmp(&allow->entries[i - 1], &allow->entries[i])) {
                error = xasprintf("%s: key %s is listed twice (for %s and "
                                  "%s): a key belongs to one host or "
                                  "client", origin, allow->entries[i].key,
                                  allow->entries[i - 1].name,
                                  allow->entries[i].name);
                break;
            }
        }
    }
    if (error) {
        tem_allow_free(allow);
        return error;
    }
    *allowp = allow;
    return NULL;
}

/* Reads file 'path' (an allow-list, or a list of member keys) into
 * '*textp' and '*lenp'.  Returns NULL or an error. */
static char *
tem_allow_read__(const char *path, char **textp, size_t *lenp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;

    *textp = NULL;
    *lenp = 0;
    if (fd < 0) {
        return xasprintf("cannot open allow-list %s: %s", path,
                         strerror(errno));
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return xasprintf("allow-list %s is not a regular file", path);
    }
    if (st.st_size > TEM_ALLOW_MAX_FILE) {
        close(fd);
        return xasprintf("allow-list %s is larger than %d bytes", path,
                         TEM_ALLOW_MAX_FILE);
    }

    size_t size = st.st_size, len = 0;
    char *text = xmalloc(size + 1);
    while (len < size) {
        ssize_t n = read(fd, text + len, size - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        len += n;
    }
    close(fd);
    *textp = text;
    *lenp = len;
    return NULL;
}

char *
tem_allow_load(const char *path, struct tem_allow **allowp)
{
    char *text;
    size_t len;
    char *error = tem_allow_read__(path, &text, &len);

    *allowp = NULL;
    if (!error) {
        error = tem_allow_parse(text, len, path, allowp);
    }
    free(text);
    return error;
}

void
tem_allow_add(struct tem_allow *allow, enum tem_allow_kind kind,
              const char *name, const char *z85)
{
    struct tem_allow_entry *e;

    allow->entries = xrealloc(allow->entries,
                              (allow->n + 1) * sizeof *allow->entries);
    e = &allow->entries[allow->n++];
    memcpy(e->key, z85, TPM_CURVE_KEY_LEN);
    e->key[TPM_CURVE_KEY_LEN] = '\0';
    e->kind = kind;
    e->name = xstrdup(name);
    *(kind == TEM_ALLOW_HOST ? &allow->n_hosts
      : kind == TEM_ALLOW_CLIENT ? &allow->n_clients
      : kind == TEM_ALLOW_SUBSCRIBER ? &allow->n_subscribers
      : &allow->n_members) += 1;
}

void
tem_allow_sort(struct tem_allow *allow)
{
    if (allow->n) {
        qsort(allow->entries, allow->n, sizeof *allow->entries, entry_cmp);
    }
}

char *
tem_allow_load_members(const char *path, struct tem_allow **allowp)
{
    char *text;
    size_t len;
    char *error = tem_allow_read__(path, &text, &len);
    struct tem_allow *allow;
    int lineno = 0;

    *allowp = NULL;
    if (error) {
        return error;
    }
    allow = xzalloc(sizeof *allow);
    for (size_t pos = 0; pos < len && !error; ) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t) (nl - text) : len;
        char *line = xstrndup(text + pos, end - pos);
        char *w[2];
        size_t n = split_words(line, w, 2);

        pos = end + 1;
        lineno++;
        if (n && w[0][0] != '#') {
            if (!tpm_curve_key_valid(w[0]) || (n > 1 && w[1][0] != '#')) {
                error = xasprintf("%s, line %d: expected one public key "
                                  "(%d Z85 characters)", path, lineno,
                                  TPM_CURVE_KEY_LEN);
            } else if (tem_allow_find_unsorted__(allow, w[0])) {
                error = xasprintf("%s, line %d: key %s is listed twice",
                                  path, lineno, w[0]);
            } else {
                tem_allow_add(allow, TEM_ALLOW_MEMBER, "member", w[0]);
            }
        }
        free(line);
    }
    free(text);
    if (error) {
        tem_allow_free(allow);
        return error;
    }
    tem_allow_sort(allow);
    *allowp = allow;
    return NULL;
}

struct tem_allow *
tem_allow_merge(const struct tem_allow *base, const struct tem_allow *extra,
                size_t *n_dupp)
{
    struct tem_allow *allow = xzalloc(sizeof *allow);
    struct tem_allow *x = xzalloc(sizeof *x);

    *n_dupp = 0;
    for (size_t i = 0; extra && i < extra->n; i++) {
        const struct tem_allow_entry *e = &extra->entries[i];
        if (tem_allow_find(base, e->key)) {
            ++*n_dupp;
        } else {
            tem_allow_add(x, e->kind, e->name, e->key);
        }
    }
    tem_allow_sort(x);
    for (size_t i = 0; base && i < base->n; i++) {
        const struct tem_allow_entry *e = &base->entries[i];
        tem_allow_add(allow, e->kind, e->name, e->key);
    }
    /* A key twice in 'extra' is bound to no one: every copy left out. */
    for (size_t i = 0, j; i < x->n; i = j) {
        for (j = i + 1; j < x->n && !entry_cmp(&x->entries[i],
                                              &x->entries[j]); j++) {
            continue;
        }
        if (j - i > 1) {
            *n_dupp += j - i;
        } else {
            tem_allow_add(allow, x->entries[i].kind, x->entries[i].name,
                          x->entries[i].key);
        }
    }
    tem_allow_free(x);
    tem_allow_sort(allow);
    return allow;
}

const struct tem_allow_entry *
tem_allow_find(const struct tem_allow *allow, const char *z85)
{
    struct tem_allow_entry key;

    if (!allow || !allow->n) {
        return NULL;
    }
    memcpy(key.key, z85, TPM_CURVE_KEY_LEN);
    return bsearch(&key, allow->entries, allow->n, sizeof *allow->entries,
                   entry_cmp);
}

int
tem_zap_decide(const struct tem_allow *allow, const char *domain,
               const char *mechanism, const void *key, size_t key_len,
               char user_id[TPM_CURVE_KEY_LEN + 1], const char **whyp)
{
    user_id[0] = '\0';
    if (strcmp(mechanism, "CURVE")) {
        *whyp = "CURVE required";
        return 400;
    }
    if (key_len != 32 || !zmq_z85_encode(user_id, key, 32)) {
        user_id[0] = '\0';
        *whyp = "malformed key";
        return 400;
    }
    const struct tem_allow_entry *e = tem_allow_find(allow, user_id);
    bool hosts = !strcmp(domain, TEM_ZAP_HOSTS);
    bool ctl = !strcmp(domain, TEM_ZAP_CLIENTS);
    bool subs = !strcmp(domain, TEM_ZAP_SUBSCRIBERS);
    if (!e) {
        *whyp = "unknown key";
    } else if (!hosts && !ctl && !subs) {
        *whyp = "unknown domain";
    } else if (hosts ? (e->kind != TEM_ALLOW_HOST
                        && e->kind != TEM_ALLOW_MEMBER)
               : ctl ? e->kind != TEM_ALLOW_CLIENT
               : (e->kind == TEM_ALLOW_HOST
                  || e->kind == TEM_ALLOW_MEMBER)) {
        *whyp = (hosts ? "a client key on the hosts' socket"
                 : e->kind == TEM_ALLOW_HOST ? "a host key on a client socket"
                 : e->kind == TEM_ALLOW_MEMBER ? "a TEM's key on a client "
                                                 "socket"
                 : "a subscriber key on the control socket");
    } else {
        *whyp = "allowed";
        return 200;
    }
    user_id[0] = '\0';
    return 400;
}
