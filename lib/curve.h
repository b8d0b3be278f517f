/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CURVE keys (ZeroMQ's CurveZMQ: Curve25519 key pairs, authenticated and
 * encrypted connections) for every socket that crosses the network:
 * hosts -> TEM, tem-ctl -> TEM.  See docs/operations.md, "Keys".
 *
 * A key is 40 characters of Z85 (32 bytes).  A key file is text, one
 * "NAME = VALUE" per line (the value may be quoted; indentation, blank
 * lines and lines starting with '#' are ignored, so a CZMQ certificate
 * reads too):
 *
 *     # Trumpet CURVE key pair (tem-ctl keygen).  Keep it secret.
 *     public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
 *     secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
 *
 * tpm_curve_keygen() writes such a pair to FILE (mode 0600) and its
 * public half alone to FILE.pub (mode 0644), the file handed to peers.
 * A file read for its secret key must not be readable by group or others
 * (the error says to chmod it), like ssh's keys.
 *
 * Thread-safety: none needed (no global state).
 */
#ifndef TPM_CURVE_H
#define TPM_CURVE_H 1

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>

#define TPM_CURVE_KEY_LEN 40    /* Z85 characters of one key. */

/* Largest key file read (bytes). */
#define TPM_CURVE_MAX_FILE 65536

/* True if 'z85' is a key: exactly 40 Z85 characters. */
bool tpm_curve_key_valid(const char *z85);

/* True if this libzmq supports CURVE (built with libsodium). */
bool tpm_curve_available(void);

/* True if a file of mode 'mode' owned by 'uid' may hold a secret key:
 * nothing for others, and for its group nothing, or reading only if its
 * owner is root (root:trumpet 0640: the administrator keeps the key, the
 * service's group reads it). */
bool tpm_curve_secret_mode_ok(mode_t mode, uid_t uid);

/* Reads key file 'path': its public key into 'pub', and if 'sec' is not
 * NULL its secret key into 'sec' (then the file must hold both, they
 * must match, and its mode must pass tpm_curve_secret_mode_ok()).  Returns
 * NULL or an error naming the file (caller frees). */
char *tpm_curve_read_file(const char *path, char pub[TPM_CURVE_KEY_LEN + 1],
                          char sec[TPM_CURVE_KEY_LEN + 1])
    __attribute__((warn_unused_result));

/* A public key given as an argument: 40 Z85 characters, or else the path
 * of a key file holding "public-key".  Returns NULL or an error. */
char *tpm_curve_public_arg(const char *arg, char pub[TPM_CURVE_KEY_LEN + 1])
    __attribute__((warn_unused_result));

/* Writes a new key pair to 'path' (0600) and its public key to
 * 'path'.pub (0644).  An existing file is an error unless 'force'.
 * Stores the public key in 'pub'.  Returns NULL or an error. */
char *tpm_curve_keygen(const char *path, bool force,
                       char pub[TPM_CURVE_KEY_LEN + 1])
    __attribute__((warn_unused_result));

/* Makes ZeroMQ socket 'sock' a CURVE client of the server whose public key
 * is 'server_pub', with key pair 'pub'/'sec'; or a CURVE server (server_pub
 * NULL, 'pub' unused) whose clients are checked by the ZAP handler of
 * domain 'zap_domain'.  Returns NULL or an error. */
char *tpm_curve_setup(void *sock, const char *server_pub, const char *pub,
                      const char *sec, const char *zap_domain)
    __attribute__((warn_unused_result));

/* Sets ZMQ_MAXMSGSIZE of 'sock' to 'bytes'.  Returns 0 or an errno. */
int tpm_zmq_max_msg(void *sock, size_t bytes);

#endif /* curve.h */
