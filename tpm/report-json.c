#include "report-json.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>

#include "util.h"

/* Returns the number of leading one bits of the address mask 'words' of
 * 'n_words' 32-bit words (network byte order). */
static int
prefix_len__(const uint32_t *words, int n_words)
{
    int len = 0;
    for (int i = 0; i < n_words; i++) {
        uint32_t w = ntohl(words[i]);
        if (w == UINT32_MAX) {
            len += 32;
            continue;
        }
        while (w & 0x80000000u) {
            len++;
            w <<= 1;
        }
        break;
    }
    return len;
}

static void
add_addr__(struct json_object *obj, const char *name,
           const uint32_t *mask, const uint32_t *addr, int ipver)
{
    int full = ipver == 6 ? 128 : 32;
    int len = prefix_len__(mask, ipver == 6 ? 4 : 1);
    char addr_s[INET6_ADDRSTRLEN], buf[INET6_ADDRSTRLEN + 16];

    tpm_addr_format(addr, ipver, addr_s, sizeof addr_s);
    if (len != full) {
        snprintf(buf, sizeof buf, "%s/%d", addr_s, len);
    } else {
        snprintf(buf, sizeof buf, "%s", addr_s);
    }
    json_object_object_add(obj, name, json_object_new_string(buf));
}

struct json_object *
tpm_group_to_json(const struct tpm_key *mask, const struct tpm_key *gkey)
{
    struct json_object *obj = json_object_new_object();
    bool v6 = gkey->ipver == 6;

    if (mask->proto) {
        json_object_object_add(obj, "nw_proto",
                               json_object_new_int(gkey->proto));
    }
    if (mask->src[0] || mask->src[1] || mask->src[2] || mask->src[3]) {
        add_addr__(obj, v6 ? "ipv6_src" : "nw_src", mask->src, gkey->src,
                   gkey->ipver);
    }
    if (mask->dst[0] || mask->dst[1] || mask->dst[2] || mask->dst[3]) {
        add_addr__(obj, v6 ? "ipv6_dst" : "nw_dst", mask->dst, gkey->dst,
                   gkey->ipver);
    }
    if (mask->sport) {
        json_object_object_add(obj, "tp_src",
                               json_object_new_int(gkey->sport));
    }
    if (mask->dport) {
        json_object_object_add(obj, "tp_dst",
                               json_object_new_int(gkey->dport));
    }
    return obj;
}

struct json_object *
tpm_number_to_json(double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        return json_object_new_int64((int64_t) v);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.17g", v);
    return json_object_new_double_s(v, buf);
}

struct json_object *
tpm_report_to_json(const struct tpm_event *event, const struct tpm_report *r)
{
    struct json_object *obj = json_object_new_object();

    json_object_object_add(obj, "event",
                           json_object_new_string(event->name));
    json_object_object_add(obj, "epoch", json_object_new_int64(r->epoch));
    json_object_object_add(obj, "group",
                           tpm_group_to_json(&event->group, &r->group));
    json_object_object_add(obj, "value", tpm_number_to_json(r->value));
    if (r->flags & TPM_REPORT_PARTIAL) {
        json_object_object_add(obj, "partial",
                               json_object_new_boolean(true));
    }
    return obj;
}
