/* SPDX-License-Identifier: Apache-2.0 */
#include "curve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "util.h"

bool
tpm_curve_key_valid(const char *z85)
{
    uint8_t raw[32];

    return z85 && strlen(z85) == TPM_CURVE_KEY_LEN
           && zmq_z85_decode(raw, z85) != NULL;
}

bool
tpm_curve_available(void)
{
    return zmq_has("curve");
}

/* Trims blanks at both ends of 's' in place; returns its new start. */
static char *
trim(char *s)
{
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    size_t n = strlen(s);
    while (n && strchr(" \t\r\n", s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* Reads at most TPM_CURVE_MAX_FILE bytes of 'fd' into a string. */
static char *
read_small(int fd, size_t *lenp)
{
    char *text = xmalloc(TPM_CURVE_MAX_FILE + 2);
    size_t len = 0;

    for (;;) {
        ssize_t n = read(fd, text + len, TPM_CURVE_MAX_FILE + 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n < 0) {
                free(text);
                return NULL;
            }
            break;
        }
        len += n;
        if (len > TPM_CURVE_MAX_FILE) {
            break;
        }
    }
    text[len] = '\0';
    *lenp = len;
    return text;
}

/* Parses key file text 'text' (of 'path', for errors). */
static char *
parse_keys(const char *path, char *text, char pub[TPM_CURVE_KEY_LEN + 1],
           char sec[TPM_CURVE_KEY_LEN + 1])
{
    int lineno = 0;

    pub[0] = '\0';
    if (sec) {
        sec[0] = '\0';
    }
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *s = trim(line);
        char *eq = strchr(s, '=');
        if (!*s || *s == '#' || !eq) {
            continue;
        }
        *eq = '\0';
        char *name = trim(s);
        char *value = trim(eq + 1);
        size_t n = strlen(value);
        if (n >= 2 && value[0] == '"' && value[n - 1] == '"') {
            value[n - 1] = '\0';
            value++;
        }
        char *dst = !strcmp(name, "public-key") ? pub
                    : !strcmp(name, "secret-key") ? sec : NULL;
        if (!strcmp(name, "secret-key") && !sec) {
            continue;
        }
        if (!dst) {
            continue;
        }
        if (!tpm_curve_key_valid(value)) {
            return xasprintf("key file %s, line %d: %s is not %d Z85 "
                             "characters", path, lineno, name,
                             TPM_CURVE_KEY_LEN);
        }
        if (dst[0]) {
            return xasprintf("key file %s, line %d: %s given twice", path,
                             lineno, name);
        }
        memcpy(dst, value, TPM_CURVE_KEY_LEN + 1);
    }

    if (sec && !sec[0]) {
        return xasprintf("key file %s has no secret-key (a key pair from "
                         "'tem-ctl keygen' is needed, not a .pub file)",
                         path);
    }
    if (sec) {
        char derived[TPM_CURVE_KEY_LEN + 1];
        if (zmq_curve_public(derived, sec)) {
            return xasprintf("key file %s: cannot derive the public key: "
                             "%s", path, zmq_strerror(errno));
        }
        if (pub[0] && strcmp(pub, derived)) {
            return xasprintf("key file %s: public-key does not match "
                             "secret-key", path);
        }
        memcpy(pub, derived, sizeof derived);
    }
    if (!pub[0]) {
        return xasprintf("key file %s has no public-key line", path);
    }
    return NULL;
}

bool
tpm_curve_secret_mode_ok(mode_t mode, uid_t uid)
{
    return (!(mode & (S_IRWXO | S_IWGRP | S_IXGRP))
            && (!(mode & S_IRGRP) || uid == 0));
}

char *
tpm_curve_read_file(const char *path, char pub[TPM_CURVE_KEY_LEN + 1],
                    char sec[TPM_CURVE_KEY_LEN + 1])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *error = NULL;

    if (fd < 0) {
        return xasprintf("cannot open key file %s: %s", path,
                         strerror(errno));
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return xasprintf("key file %s is not a regular file", path);
    }
    size_t len;
    char *text = read_small(fd, &len);
    close(fd);
    if (!text) {
        return xasprintf("cannot read key file %s: %s", path,
                         strerror(errno));
    }
    if (len > TPM_CURVE_MAX_FILE) {
        error = xasprintf("key file %s is larger than %d bytes", path,
                          TPM_CURVE_MAX_FILE);
    } else {
        error = parse_keys(path, text, pub, sec);
    }
    if (!error && sec && !tpm_curve_secret_mode_ok(st.st_mode, st.st_uid)) {
        memset(sec, 0, TPM_CURVE_KEY_LEN + 1);
        error = xasprintf("key file %s holds a secret key but is open to "
                          "group or others (mode %04o, owner uid %u): chmod "
                          "600 it, or owner root, mode 640 for the group of "
                          "the program that reads it", path,
                          (unsigned int) (st.st_mode & 07777),
                          (unsigned int) st.st_uid);
    }
    memset(text, 0, len);
    free(text);
    return error;
}

char *
tpm_curve_public_arg(const char *arg, char pub[TPM_CURVE_KEY_LEN + 1])
{
    /* A file by that name wins: a path may be 40 Z85 characters too. */
    if (tpm_curve_key_valid(arg) && access(arg, F_OK)) {
        memcpy(pub, arg, TPM_CURVE_KEY_LEN + 1);
        return NULL;
    }
    if (!arg || !arg[0]) {
        return xstrdup("empty public key");
    }
    if (access(arg, F_OK) && strlen(arg) == TPM_CURVE_KEY_LEN) {
        return xasprintf("'%s' is neither 40 Z85 characters nor a key "
                         "file", arg);
    }
    return tpm_curve_read_file(arg, pub, NULL);
}

/* Writes 'text' to a new file 'path' of 'mode' (replacing it if
 * 'force'). */
static char *
write_key_file(const char *path, const char *text, mode_t mode, bool force)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long) getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    char *error = NULL;

    if (fd < 0) {
        error = xasprintf("cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t len = strlen(text);
    bool ok = fchmod(fd, mode) == 0 && write(fd, text, len) == (ssize_t) len
              && fsync(fd) == 0;
    int err = errno;
    if (close(fd) || !ok) {
        error = xasprintf("cannot write %s: %s", tmp, strerror(ok ? errno
                                                               : err));
        unlink(tmp);
        goto out;
    }
    if (!force && link(tmp, path)) {
        error = xasprintf("cannot create %s: %s%s", path, strerror(errno),
                          errno == EEXIST ? " (use --force to replace it)"
                                          : "");
    } else if (force && rename(tmp, path)) {
        error = xasprintf("cannot write %s: %s", path, strerror(errno));
    }
    unlink(tmp);
out:
    free(tmp);
    return error;
}

char *
tpm_curve_keygen(const char *path, bool force,
                 char pub[TPM_CURVE_KEY_LEN + 1])
{
    char sec[TPM_CURVE_KEY_LEN + 1];

    if (!tpm_curve_available()) {
        return xstrdup("this libzmq has no CURVE support (it needs "
                       "libsodium)");
    }
    if (zmq_curve_keypair(pub, sec)) {
        return xasprintf("zmq_curve_keypair: %s", zmq_strerror(errno));
    }
    char *pair = xasprintf("# Trumpet CURVE key pair (tem-ctl keygen).  "
                           "Keep it secret: mode 0600.\n"
                           "# Its public half is in %s.pub.\n"
                           "public-key = \"%s\"\nsecret-key = \"%s\"\n",
                           path, pub, sec);
    char *pubtext = xasprintf("# Trumpet CURVE public key (tem-ctl "
                              "keygen): give it to peers.\n"
                              "public-key = \"%s\"\n", pub);
    char *pub_path = xasprintf("%s.pub", path);
    char *error = NULL;

    if (!force && (!access(path, F_OK) || !access(pub_path, F_OK))) {
        error = xasprintf("%s or %s exists already (use --force to "
                          "replace them)", path, pub_path);
    }
    if (!error) {
        error = write_key_file(path, pair, 0600, force);
    }
    if (!error) {
        error = write_key_file(pub_path, pubtext, 0644, force);
        if (error) {
            unlink(path);
        }
    }
    memset(sec, 0, sizeof sec);
    memset(pair, 0, strlen(pair));
    free(pair);
    free(pubtext);
    free(pub_path);
    return error;
}

char *
tpm_curve_setup(void *sock, const char *server_pub, const char *pub,
                const char *sec, const char *zap_domain)
{
    int one = 1;
    int rc;

    if (server_pub) {
        rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_pub,
                            TPM_CURVE_KEY_LEN)
             || zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub,
                               TPM_CURVE_KEY_LEN)
             || zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec,
                               TPM_CURVE_KEY_LEN);
    } else {
        rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one)
             || zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec,
                               TPM_CURVE_KEY_LEN)
             || zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, zap_domain,
                               strlen(zap_domain));
    }
    return rc ? xasprintf("cannot set up CURVE: %s", zmq_strerror(errno))
              : NULL;
}

int
tpm_zmq_max_msg(void *sock, size_t bytes)
{
    int64_t max = bytes;
    return zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max) ? errno
                                                                  : 0;
}
