/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the TEM's control commands (the JSON requests of tem-ctl,
 * dispatched by tem/tem.c), without sockets.
 *
 * tem/tem.c is included here, its main() renamed, for its static
 * ctl_dispatch(): the daemon's own request handling, with the state file
 * saved after every change as the daemon does (in a directory of its
 * own, on /dev/shm where there is one).
 *
 * Each input runs a fresh TEM core with three hosts in session (protocol
 * versions 1 and 2, with and without prefixes).  The input is lines:
 * each one request, as tem-ctl sends it ({"command":"event-add",
 * "name":..., "definition":...}, event-del, event-list, event-show,
 * hosts, alerts, status, dos-threshold).  A first line "state:JSON" is
 * first written as the state file and loaded, as at the daemon's start.
 *
 * Checks: every reply is a JSON object with a boolean "ok" (and an
 * "error" string when false); every frame sent to the hosts decodes and
 * validates (tests/fuzz/fuzz-tem-util.h); and the state file saved after
 * the last request loads into a new core with the same events, so that
 * whatever the TEM accepted, it can restart with.
 */
#define main trumpet_tem_main
#include "tem.c"
#undef main

#include "fuzz-tem-util.h"
#include "fuzz-util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char state_dir[256];
static char state_file[300];

static void
remove_state_dir(void)
{
    unlink(state_file);
    rmdir(state_dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
    snprintf(state_dir, sizeof state_dir, "%s/fuzz-tem-ctl.XXXXXX", base);
    FUZZ_CHECK(mkdtemp(state_dir), "mkdtemp %s: %s", state_dir,
               strerror(errno));
    snprintf(state_file, sizeof state_file, "%s/tem-events.json",
             state_dir);
    atexit(remove_state_dir);
    return 0;
}

static void
check_reply(struct json_object *r, const char *request, size_t len)
{
    struct json_object *ok, *error;

    FUZZ_CHECK(json_object_is_type(r, json_type_object),
               "reply to '%.*s' is not an object", (int) len, request);
    FUZZ_CHECK(json_object_object_get_ex(r, "ok", &ok)
               && json_object_is_type(ok, json_type_boolean),
               "reply to '%.*s' has no boolean \"ok\"", (int) len, request);
    if (!json_object_get_boolean(ok)) {
        FUZZ_CHECK(json_object_object_get_ex(r, "error", &error)
                   && json_object_is_type(error, json_type_string),
                   "error reply to '%.*s' without \"error\"", (int) len,
                   request);
    }
    const char *text = json_object_to_json_string_ext(
        r, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    FUZZ_CHECK(text && *text == '{', "reply text '%s'", text ? text : "");
}

/* The saved state loads into a new core with the same events. */
static void
check_state(struct fuzz_tem *ft)
{
    struct fuzz_tem again;
    char *error;

    fuzz_tem_init(&again);
    error = tem_state_load(again.core, state_file);
    FUZZ_CHECK(!error, "the TEM cannot restart from its own state file: %s",
               error);
    struct json_object *a = tem_core_events_to_json(ft->core);
    struct json_object *b = tem_core_events_to_json(again.core);
    FUZZ_CHECK(json_object_equal(a, b), "state file reloads as %s, not %s",
               json_object_to_json_string(b), json_object_to_json_string(a));
    json_object_put(a);
    json_object_put(b);
    fuzz_tem_destroy(&again);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_tem ft;
    struct tem_daemon d;
    const char *p = (const char *) data, *end = p + size;

    unlink(state_file);
    fuzz_tem_init(&ft);
    memset(&d, 0, sizeof d);
    d.core = ft.core;
    d.opt.state_file = state_file;
    d.opt.insecure = true;      /* No key pair or allow-list to show. */

    /* A state file to start from. */
    if (size > 6 && !memcmp(p, "state:", 6)) {
        const char *nl = memchr(p, '\n', size);
        const char *json = p + 6, *json_end = nl ? nl : end;
        FILE *f = fopen(state_file, "w");
        FUZZ_CHECK(f, "%s: %s", state_file, strerror(errno));
        fwrite(json, 1, json_end - json, f);
        fclose(f);
        free(tem_state_load(ft.core, state_file));
        unlink(state_file);
        p = nl ? nl + 1 : end;
    }

    fuzz_tem_hello(&ft, 0, "h0", "10.0.0.0/8", 2);
    fuzz_tem_hello(&ft, 1, "h1", "10.1.0.0/16,fd00::/8", 1);
    fuzz_tem_hello(&ft, 2, "h2", NULL, 2);

    /* The state as the daemon saves it at start. */
    char *error = tem_state_save(ft.core, state_file);
    FUZZ_CHECK(!error, "%s", error);

    for (int n = 0; p < end && n < 64; n++) {
        const char *nl = memchr(p, '\n', end - p);
        size_t len = (nl ? nl : end) - p;
        struct json_object *r = ctl_dispatch(&d, p, len);
        check_reply(r, p, len);
        json_object_put(r);
        tem_core_flush(ft.core);
        p += len + (nl != NULL);
    }

    fuzz_tem_advance(&ft, 1000 * 1000 * 1000ULL);
    fuzz_tem_views(&ft);
    check_state(&ft);
    fuzz_tem_destroy(&ft);
    return 0;
}
