/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv4 and IPv6 address prefixes ("10.99.0.0/24", "fd00::/8"): the
 * addresses a host serves, which its agent announces in its Hello, and
 * the scope of a network-wide event at the TEM.  Parsing, with a message
 * that names the bad text, formatting, and the two tests the TEM places
 * events with (overlap, containment).  The protocol carries prefixes
 * (lib/tproto.h converts them); nothing here depends on it.
 *
 * Thread-safety: none needed (no global state).
 */
#ifndef TPM_PREFIX_H
#define TPM_PREFIX_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most prefixes in a list (tpm_prefix_parse_list()): the protocol's bound
 * on a Hello's prefixes, TPROTO_MAX_PREFIXES, is this. */
#define TPM_PREFIX_LIST_MAX 1024

/* An address prefix (a host's served addresses, or an event filter's). */
struct tpm_prefix {
    uint8_t ipver;              /* 4 or 6. */
    uint8_t len;                /* Prefix length. */
    uint32_t addr[4];           /* Network order, zero beyond 'len'. */
};

/* Parses "10.99.0.0/24", "10.99.0.1" (a /32), "fd00::/8".  Returns NULL
 * or an error message (caller frees) naming the bad text.  Host bits set
 * beyond the length are an error. */
char *tpm_prefix_parse(const char *s, struct tpm_prefix *)
    __attribute__((warn_unused_result));

/* Parses a list separated by commas and/or spaces into a new array
 * '*prefixes' of '*n' entries (caller frees).  An empty string gives
 * none. */
char *tpm_prefix_parse_list(const char *s, struct tpm_prefix **prefixes,
                            size_t *n)
    __attribute__((warn_unused_result));

/* Formats 'p' as "10.99.0.0/24" into 'buf' (at least 64 bytes). */
char *tpm_prefix_format(const struct tpm_prefix *p, char *buf, size_t size);

/* Returns true if the two prefixes share at least one address. */
bool tpm_prefix_overlap(const struct tpm_prefix *, const struct tpm_prefix *);

/* Returns true if the address (4 or 16 bytes per 'ipver') lies in 'p'. */
bool tpm_prefix_contains(const struct tpm_prefix *p, int ipver,
                         const uint32_t addr[4]);

/* Returns the length in bytes of an address of IP version 'ipver' (4 or
 * 6). */
static inline int
tpm_prefix_addr_bytes(int ipver)
{
    return ipver == 4 ? 4 : 16;
}

/* Clears the bits of the 'n'-byte address 'a' beyond the first 'len'. */
void tpm_prefix_clear_host_bits(uint8_t *a, int n, int len);

#endif /* prefix.h */
