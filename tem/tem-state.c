/* SPDX-License-Identifier: Apache-2.0 */
#include "tem-state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Creates directory 'dir' and its parents.  Returns 0 or an errno. */
static int
tem_state_mkdir_p(const char *dir)
{
    char *p = xstrdup(dir);
    int error = 0;

    for (char *s = p + 1; ; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) && errno != EEXIST) {
                error = errno;
                break;
            }
            *s = c;
            if (!c) {
                break;
            }
        }
    }
    free(p);
    return error;
}

static char *
tem_state_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return !slash ? xstrdup(".")
           : slash == path ? xstrdup("/") : xstrndup(path, slash - path);
}

static int
tem_state_write_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t n = write(fd, s, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        s += n;
        len -= n;
    }
    return 0;
}

char *
tem_state_save(const struct tem_core *core, const char *path)
{
    struct json_object *obj = tem_core_events_to_json(core);
    json_object_object_add(obj, "dos_threshold", tem_core_dos_to_json(core));
    const char *text = json_object_to_json_string_ext(
        obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
        | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *dir = tem_state_dir_of(path);
    char *tmp = xasprintf("%s.tmp.%ld", path, (long) getpid());
    char *error = NULL;
    const char *step;
    int fd = -1, err;

    if ((err = tem_state_mkdir_p(dir))) {
        step = "creating its directory";
        goto fail;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        err = errno;
        step = "creating a temporary file";
        goto fail;
    }
    if ((err = tem_state_write_all(fd, text, strlen(text)))
        || (err = tem_state_write_all(fd, "\n", 1))) {
        step = "writing";
        goto fail;
    }
    if (fsync(fd)) {
        err = errno;
        step = "syncing";
        goto fail;
    }
    if (close(fd)) {
        fd = -1;
        err = errno;
        step = "closing";
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path)) {
        err = errno;
        step = "renaming the temporary file over it";
        goto fail;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd)) {
        err = errno;
        if (dfd >= 0) {
            close(dfd);
        }
        step = "syncing its directory";
        goto fail_renamed;
    }
    close(dfd);
    goto out;

fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
fail_renamed:
    error = xasprintf("cannot save events to %s: %s: %s", path, step,
                      strerror(err));
out:
    free(tmp);
    free(dir);
    json_object_put(obj);
    return error;
}

char *
tem_state_load(struct tem_core *core, const char *path)
{
    FILE *f = fopen(path, "r");
    char *error = NULL;

    if (!f) {
        if (errno == ENOENT) {
            tem_core_event_clear(core);
            return NULL;
        }
        return xasprintf("cannot read events from %s: %s", path,
                         strerror(errno));
    }

    size_t size = 0, len = 0;
    char *text = NULL;
    for (;;) {
        if (len + 4096 + 1 > size) {
            size = 2 * size + 4096 + 1;
            text = xrealloc(text, size);
        }
        size_t n = fread(text + len, 1, size - len - 1, f);
        len += n;
        if (!n) {
            break;
        }
    }
    text[len] = '\0';
    bool read_error = ferror(f);
    fclose(f);
    if (read_error) {
        free(text);
        return xasprintf("cannot read events from %s: read error", path);
    }

    struct json_tokener *tok = json_tokener_new();
    struct json_object *obj = json_tokener_parse_ex(tok, text, len + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (!obj || jerr != json_tokener_success) {
        size_t off = json_tokener_get_parse_end(tok);
        int line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (text[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        error = xasprintf("%s: line %d, column %d: not valid JSON: %s", path,
                          line, col, json_tokener_error_desc(jerr));
        tem_core_event_clear(core);
    } else {
        struct json_object *dos = NULL;
        char *e = tem_core_events_from_json(core, obj);
        if (!e && json_object_is_type(obj, json_type_object)) {
            json_object_object_get_ex(obj, "dos_threshold", &dos);
            e = tem_core_dos_from_json(core, dos);
            if (e) {
                tem_core_event_clear(core);
            }
        }
        if (e) {
            error = xasprintf("%s: %s", path, e);
            free(e);
        }
    }
    json_object_put(obj);
    json_tokener_free(tok);
    free(text);
    return error;
}

char *
tem_lock(const char *lock_path, const char *what, int *fdp)
{
    char *dir = tem_state_dir_of(lock_path);
    int err = tem_state_mkdir_p(dir);
    free(dir);
    if (err) {
        return xasprintf("cannot create the directory of %s: %s", lock_path,
                         strerror(err));
    }

    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return xasprintf("cannot open lock file %s: %s", lock_path,
                         strerror(errno));
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        if (e != EWOULDBLOCK) {
            return xasprintf("cannot lock %s: %s", lock_path, strerror(e));
        }
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        return xasprintf("%s is in use by another trumpet-tem (%s%s%s"
                         "lock %s)", what, pid[0] ? "pid " : "", pid,
                         pid[0] ? ", " : "", lock_path);
    }
    char *text = xasprintf("%ld\n", (long) getpid());
    if (ftruncate(fd, 0) || pwrite(fd, text, strlen(text), 0) < 0) {
        /* The lock holds all the same; the pid is for messages. */
    }
    free(text);
    *fdp = fd;
    return NULL;
}

char *
tem_state_lock_path(const char *path)
{
    return xasprintf("%s.lock", path);
}

size_t
tem_state_clean(const char *path)
{
    char *dir = tem_state_dir_of(path);
    const char *slash = strrchr(path, '/');
    char *prefix = xasprintf("%s.tmp.", slash ? slash + 1 : path);
    size_t prefix_len = strlen(prefix);
    size_t n = 0;
    DIR *d = opendir(dir);

    while (d) {
        struct dirent *de = readdir(d);
        if (!de) {
            break;
        }
        const char *pid = de->d_name + prefix_len;
        if (!strncmp(de->d_name, prefix, prefix_len) && *pid
            && strspn(pid, "0123456789") == strlen(pid)
            && !unlinkat(dirfd(d), de->d_name, 0)) {
            n++;
        }
    }
    if (d) {
        closedir(d);
    }
    free(prefix);
    free(dir);
    return n;
}
