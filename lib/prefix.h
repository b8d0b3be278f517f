/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IPv4 and IPv6 address prefixes ("10.99.0.0/24", "fd00::/8"): the
 * addresses a host serves, which its agent announces in its Hello, and
 * the scope of a network-wide event at the TEM.  Parsing, with a message
 * that names the bad text, formatting, and the two tests the TEM places
 * events with (overlap, containment).  The protocol carries prefixes
 * (lib/tproto.h converts them); nothing here depends on it.
 *
 * Tenants.  In an overlay (VXLAN, Geneve) the same inner addresses may
 * belong to several tenants, told apart by their tunnel id (VNI).  A
 * prefix may therefore be a tenant's: "vni=5001:10.0.128.0/24" is
 * 10.0.128.0/24 inside VNI 5001 (decimal or 0x hex, 0 to 0xffffff), and
 * formats back so.  Overlap and containment compare addresses only; the
 * TEM compares tenants itself (tem/tem-event.c).
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

/* Room for any formatted prefix: "vni=16777215:" and an IPv6 prefix. */
#define TPM_PREFIX_BUFSIZE 64

/* Largest tenant (VXLAN and Geneve VNIs have 24 bits). */
#define TPM_PREFIX_MAX_TUN_ID 0xffffffu

/* An address prefix (a host's served addresses, or an event filter's),
 * possibly a tenant's. */
struct tpm_prefix {
    uint8_t ipver;              /* 4 or 6. */
    uint8_t len;                /* Prefix length. */
    bool has_tun;               /* A tenant's prefix: ... */
    uint32_t tun_id;            /* ... its VNI (0 if !has_tun). */
    uint32_t addr[4];           /* Network order, zero beyond 'len'. */
};

/* Parses "10.99.0.0/24", "10.99.0.1" (a /32), "fd00::/8", each optionally
 * a tenant's: "vni=5001:10.99.0.0/24" (VNI decimal or 0x hex, at most
 * 0xffffff).  Returns NULL or an error message (caller frees) naming the
 * bad text.  Host bits set beyond the length are an error. */
char *tpm_prefix_parse(const char *s, struct tpm_prefix *)
    __attribute__((warn_unused_result));

/* Parses a list separated by commas and/or spaces into a new array
 * '*prefixes' of '*n' entries (caller frees).  An empty string gives
 * none. */
char *tpm_prefix_parse_list(const char *s, struct tpm_prefix **prefixes,
                            size_t *n)
    __attribute__((warn_unused_result));

/* Formats 'p' as "10.99.0.0/24", or "vni=5001:10.99.0.0/24" for a
 * tenant's, into 'buf' (at least TPM_PREFIX_BUFSIZE bytes), which
 * tpm_prefix_parse() reads back. */
char *tpm_prefix_format(const struct tpm_prefix *p, char *buf, size_t size);

/* Returns true if the two prefixes share at least one address (their
 * tenants are not compared). */
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
