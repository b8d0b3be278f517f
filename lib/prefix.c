/* SPDX-License-Identifier: Apache-2.0 */
/* Address prefixes: see prefix.h. */
#include "prefix.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Returns true if the first 'len' bits of 'a' and 'b' are equal. */
static bool
bits_equal__(const uint8_t *a, const uint8_t *b, int len)
{
    int bytes = len / 8;
    int rem = len % 8;

    if (memcmp(a, b, bytes)) {
        return false;
    }
    if (rem) {
        uint8_t mask = (uint8_t) (0xff << (8 - rem));
        return !((a[bytes] ^ b[bytes]) & mask);
    }
    return true;
}

void
tpm_prefix_clear_host_bits(uint8_t *a, int n, int len)
{
    for (int i = 0; i < n; i++) {
        int keep = len - i * 8;
        if (keep <= 0) {
            a[i] = 0;
        } else if (keep < 8) {
            a[i] &= (uint8_t) (0xff << (8 - keep));
        }
    }
}

/* Parses address prefix 's' (no tenant) into 'p', which the caller
 * zeroed.  Errors name 'whole', the text 's' is part of. */
static char *
tpm_prefix_parse_addr__(const char *whole, const char *s,
                        struct tpm_prefix *p)
{
    char abuf[INET6_ADDRSTRLEN];
    uint8_t bytes[16];

    if (!*s) {
        return xasprintf("\"%s\": address prefix missing", whole);
    }

    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t) (slash - s) : strlen(s);
    if (!alen) {
        return xasprintf("\"%s\": address missing before '/'", whole);
    }
    if (alen >= sizeof abuf) {
        return xasprintf("\"%s\": address too long", whole);
    }
    memcpy(abuf, s, alen);
    abuf[alen] = '\0';

    int ipver = strchr(abuf, ':') ? 6 : 4;
    memset(bytes, 0, sizeof bytes);
    if (inet_pton(ipver == 4 ? AF_INET : AF_INET6, abuf, bytes) != 1) {
        return xasprintf("\"%s\": \"%s\" is not an IPv%d address", whole,
                         abuf, ipver);
    }

    int max = ipver == 4 ? 32 : 128;
    int len = max;
    if (slash) {
        const char *q = slash + 1;
        if (!*q) {
            return xasprintf("\"%s\": prefix length missing after '/'",
                             whole);
        }
        len = 0;
        for (; *q; q++) {
            if (!isdigit((unsigned char) *q)) {
                return xasprintf("\"%s\": prefix length \"%s\" is not a "
                                 "number", whole, slash + 1);
            }
            len = len * 10 + (*q - '0');
            if (len > max) {
                return xasprintf("\"%s\": prefix length %s exceeds %d for "
                                 "IPv%d", whole, slash + 1, max, ipver);
            }
        }
    }

    uint8_t net[16];
    memcpy(net, bytes, sizeof net);
    tpm_prefix_clear_host_bits(net, tpm_prefix_addr_bytes(ipver), len);
    if (memcmp(net, bytes, sizeof net)) {
        char nbuf[INET6_ADDRSTRLEN];
        inet_ntop(ipver == 4 ? AF_INET : AF_INET6, net, nbuf, sizeof nbuf);
        return xasprintf("\"%s\": host bits set beyond /%d (did you mean "
                         "%s/%d?)", whole, len, nbuf, len);
    }

    p->ipver = ipver;
    p->len = len;
    memcpy(p->addr, bytes, tpm_prefix_addr_bytes(ipver));
    return NULL;
}

/* The tenant qualifier of a prefix: "vni=". */
#define TUN_TAG "vni="
#define TUN_TAG_LEN (sizeof TUN_TAG - 1)

char *
tpm_prefix_parse(const char *s, struct tpm_prefix *p)
{
    memset(p, 0, sizeof *p);
    if (!s || !*s) {
        return xstrdup("empty address prefix");
    }
    if (strncmp(s, TUN_TAG, TUN_TAG_LEN)) {
        return tpm_prefix_parse_addr__(s, s, p);
    }

    const char *vni = s + TUN_TAG_LEN;
    const char *colon = strchr(vni, ':');
    if (!colon) {
        return xasprintf("\"%s\": expected vni=VNI:PREFIX, such as "
                         "vni=5001:10.0.128.0/24", s);
    }
    char *text = xstrndup(vni, colon - vni);
    uint64_t v;
    if (!tpm_parse_uint_hex(text, TPM_PREFIX_MAX_TUN_ID, &v)) {
        char *error = xasprintf("\"%s\": tenant \"%s\" is not a VNI: "
                                "expected 0 to 16777215 (or 0x0 to "
                                "0xffffff)", s, text);
        free(text);
        return error;
    }
    free(text);

    char *error = tpm_prefix_parse_addr__(s, colon + 1, p);
    if (error) {
        memset(p, 0, sizeof *p);
        return error;
    }
    p->has_tun = true;
    p->tun_id = v;
    return NULL;
}

char *
tpm_prefix_parse_list(const char *s, struct tpm_prefix **prefixes,
                      size_t *n)
{
    static const char seps[] = ", \t\r\n";
    struct tpm_prefix *array = NULL;
    size_t count = 0, allocated = 0;

    *prefixes = NULL;
    *n = 0;
    for (const char *p = s + strspn(s, seps); *p; p += strspn(p, seps)) {
        size_t len = strcspn(p, seps);
        if (count >= TPM_PREFIX_LIST_MAX) {
            free(array);
            return xasprintf("more than %d prefixes", TPM_PREFIX_LIST_MAX);
        }
        if (count >= allocated) {
            allocated = allocated ? allocated * 2 : 4;
            array = xrealloc(array, allocated * sizeof *array);
        }

        char *item = xstrndup(p, len);
        char *error = tpm_prefix_parse(item, &array[count]);
        free(item);
        if (error) {
            free(array);
            return error;
        }
        count++;
        p += len;
    }
    *prefixes = array;
    *n = count;
    return NULL;
}

char *
tpm_prefix_format(const struct tpm_prefix *p, char *buf, size_t size)
{
    char abuf[INET6_ADDRSTRLEN];

    if (p->ipver != 4 && p->ipver != 6) {
        snprintf(buf, size, "<bad prefix: ipver %d>", p->ipver);
        return buf;
    }
    inet_ntop(p->ipver == 4 ? AF_INET : AF_INET6, p->addr, abuf, sizeof abuf);
    if (p->has_tun) {
        snprintf(buf, size, TUN_TAG "%"PRIu32":%s/%d", p->tun_id, abuf,
                 p->len);
    } else {
        snprintf(buf, size, "%s/%d", abuf, p->len);
    }
    return buf;
}

bool
tpm_prefix_overlap(const struct tpm_prefix *a, const struct tpm_prefix *b)
{
    return (a->ipver == b->ipver
            && bits_equal__((const uint8_t *) a->addr,
                            (const uint8_t *) b->addr, MIN(a->len, b->len)));
}

bool
tpm_prefix_contains(const struct tpm_prefix *p, int ipver,
                    const uint32_t addr[4])
{
    return (p->ipver == ipver
            && bits_equal__((const uint8_t *) p->addr,
                            (const uint8_t *) addr, p->len));
}
