/* SPDX-License-Identifier: Apache-2.0 */
#include "fuzz-tem-util.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "util.h"

static uint64_t
fake_clock(void *aux)
{
    return ((struct fuzz_tem *) aux)->now;
}

static int
peer_index(const void *peer, size_t len)
{
    const char *p = peer;
    return (len == 2 && p[0] == 'p' && p[1] >= '0'
            && p[1] < '0' + FUZZ_TEM_PEERS) ? p[1] - '0' : -1;
}

static void
remember(struct fuzz_tem *ft, int peer, const Trumpet__Message *m)
{
    struct fuzz_tem_cmd c;

    memset(&c, 0, sizeof c);
    c.kind = m->body_case;
    switch (m->body_case) {
    case TRUMPET__MESSAGE__BODY_INSTALL:
        c.cookie = m->install->cookie;
        c.event_id = m->install->event_id;
        break;
    case TRUMPET__MESSAGE__BODY_REMOVE:
        c.cookie = m->remove->cookie;
        c.event_id = m->remove->event_id;
        break;
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
        c.cookie = m->configure->cookie;
        break;
    case TRUMPET__MESSAGE__BODY_POLL:
        c.cookie = m->poll->cookie;
        c.event_id = m->poll->event_id;
        c.epoch = m->poll->epoch;
        tproto_key_from_msg(m->poll->group, &c.group, NULL);
        break;
    case TRUMPET__MESSAGE__BODY_POLL_BATCH:
        c.cookie = m->poll_batch->cookie;
        c.epoch = m->poll_batch->epoch;
        c.n_entries = m->poll_batch->n_event_ids;
        break;
    default:
        return;
    }
    ft->cmds[peer][ft->n_cmds[peer]++ % FUZZ_TEM_RECENT] = c;
}

/* The core's 'send': every frame it sends decodes, with the version
 * asked for, and every message in it is valid. */
static bool
checked_send(void *aux, const void *peer, size_t peer_len, uint32_t version,
             const struct tproto_batch *batch)
{
    struct fuzz_tem *ft = aux;
    uint8_t *data;
    const char *why;
    size_t len = tproto_batch_encode(batch, version, &data);
    Trumpet__Frame *f = tproto_decode(data, len, &why);

    FUZZ_CHECK(peer_len >= 1 && peer_len <= 255, "peer of %zu bytes",
               peer_len);
    FUZZ_CHECK(f, "the TEM sent a frame that does not decode: %s", why);
    FUZZ_CHECK(!version || f->version == version, "version %u, asked %u",
               f->version, version);
    int idx = peer_index(peer, peer_len);
    for (size_t i = 0; i < f->n_messages; i++) {
        const Trumpet__Message *m = f->messages[i];
        const char *invalid = tproto_validate(m);
        FUZZ_CHECK(!invalid, "the TEM sent an invalid %s: %s",
                   tproto_body_name(m->body_case), invalid);
        if (m->body_case == TRUMPET__MESSAGE__BODY_CONFIGURE) {
            FUZZ_CHECK(f->version >= TPROTO_VERSION_CONFIGURE,
                       "Configure in a frame of version %u", f->version);
        }
        if (idx >= 0) {
            remember(ft, idx, m);
        }
    }
    tproto_free(f);
    free(data);
    ft->frames_out++;
    return true;
}

/* The core's 'alert': one JSON object, naming its event. */
static void
checked_alert(void *aux, const char *event, const char *json)
{
    struct fuzz_tem *ft = aux;
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, json, strlen(json));
    struct json_object *v;

    FUZZ_CHECK(o && json_tokener_get_error(tok) == json_tokener_success
               && json_object_is_type(o, json_type_object),
               "alert is not a JSON object: %s", json);
    FUZZ_CHECK(json_object_object_get_ex(o, "event", &v)
               && !strcmp(json_object_get_string(v), event),
               "alert of event %s names another: %s", event, json);
    FUZZ_CHECK(!strchr(json, '\n'), "alert on several lines: %s", json);
    json_object_put(o);
    json_tokener_free(tok);
    ft->alerts++;
}

void
fuzz_tem_init(struct fuzz_tem *ft)
{
    struct tem_config cfg;

    tpm_log_set_hook(fuzz_log_quiet);
    memset(ft, 0, sizeof *ft);
    ft->now = 1700000000ULL * 1000000000ULL;
    tem_config_init(&cfg);
    cfg.epoch_ns = FUZZ_TEM_EPOCH_NS;
    cfg.max_hosts = 8;
    cfg.max_events = 16;
    cfg.max_decisions = 64;
    cfg.recent_alerts = 4;
    cfg.alert_history = 8;
    cfg.max_batch_bytes = 4096;
    cfg.clock.mono = cfg.clock.real = fake_clock;
    cfg.clock.aux = ft;
    cfg.send = checked_send;
    cfg.alert = checked_alert;
    cfg.aux = ft;
    ft->core = tem_core_create(&cfg);
    FUZZ_CHECK(ft->core, "tem_core_create failed");
}

void
fuzz_tem_destroy(struct fuzz_tem *ft)
{
    tem_core_destroy(ft->core);
    ft->core = NULL;
}

void
fuzz_tem_input(struct fuzz_tem *ft, int peer, uint32_t version,
               struct tproto_batch *b)
{
    char id[3] = { 'p', (char) ('0' + peer % FUZZ_TEM_PEERS), '\0' };
    uint8_t *data;
    size_t len = tproto_batch_encode(b, version, &data);

    tem_core_input(ft->core, id, 2, data, len);
    free(data);
    tproto_batch_clear(b);
    tem_core_flush(ft->core);
}

void
fuzz_tem_hello(struct fuzz_tem *ft, int peer, const char *id,
               const char *prefixes, uint32_t version)
{
    static const uint32_t pmds[] = { 1, 3 };
    struct tpm_prefix *p = NULL;
    size_t n = 0;
    struct tproto_batch b;

    if (prefixes) {
        char *error = tpm_prefix_parse_list(prefixes, &p, &n);
        FUZZ_CHECK(!error, "%s", error);
    }
    tproto_batch_init(&b);
    tproto_add_hello(&b, id, p, n, FUZZ_TEM_EPOCH_NS, ft->now, pmds,
                     ARRAY_SIZE(pmds), "fuzz");
    b.msgs[0]->hello->version_max = version;
    fuzz_tem_input(ft, peer, version, &b);
    tproto_batch_destroy(&b);
    free(p);
}

void
fuzz_tem_advance(struct fuzz_tem *ft, uint64_t ns)
{
    ft->now += ns;
    tem_core_run(ft->core);
    tem_core_flush(ft->core);
}

static void
render(struct json_object *o)
{
    FUZZ_CHECK(o, "a view returned NULL");
    const char *s = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    FUZZ_CHECK(s && *s == '{', "a view is not an object: %s", s);
    json_object_put(o);
}

void
fuzz_tem_views(struct fuzz_tem *ft)
{
    struct json_object *list = tem_core_event_list_json(ft->core, NULL);
    struct json_object *events;

    FUZZ_CHECK(json_object_object_get_ex(list, "events", &events),
               "event list without events");
    size_t n = json_object_array_length(events);
    FUZZ_CHECK(n == tem_core_n_events(ft->core), "%zu events listed of %zu",
               n, tem_core_n_events(ft->core));
    for (size_t i = 0; i < n; i++) {
        struct json_object *name;
        char *error = NULL;
        json_object_object_get_ex(json_object_array_get_idx(events, i),
                                  "name", &name);
        render(tem_core_event_show_json(ft->core,
                                        json_object_get_string(name),
                                        &error));
        FUZZ_CHECK(!error, "listed event not shown: %s", error);
        render(tem_core_alerts_json(ft->core, json_object_get_string(name),
                                    NULL, 3));
    }
    render(list);
    uint32_t tenant = 5001;
    render(tem_core_hosts_json(ft->core, NULL));
    render(tem_core_hosts_json(ft->core, &tenant));
    render(tem_core_status_json(ft->core));
    render(tem_core_alerts_json(ft->core, NULL, NULL, 100));
    render(tem_core_alerts_json(ft->core, NULL, &tenant, 100));
    render(tem_core_event_list_json(ft->core, &tenant));
    render(tem_core_events_to_json(ft->core));
}
