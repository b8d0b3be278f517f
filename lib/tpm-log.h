/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging for library code.  Embedders route it to their own logger with
 * tpm_log_set_hook() (ovs-vswitchd sends it to vlog, rate-limited); the
 * default writes to stderr.  libtpm logs only on control paths (creation,
 * installation), never per packet.
 *
 * Thread-safety: set the hook once, before other threads log.
 */
#ifndef TPM_LOG_H
#define TPM_LOG_H 1

enum tpm_log_level { TPM_LOG_ERR, TPM_LOG_WARN, TPM_LOG_INFO, TPM_LOG_DBG };

typedef void tpm_log_hook_func(enum tpm_log_level, const char *message);

/* Routes library log messages to 'hook' (NULL: back to stderr). */
void tpm_log_set_hook(tpm_log_hook_func *hook);

void tpm_log(enum tpm_log_level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* tpm-log.h */
