/* SPDX-License-Identifier: Apache-2.0 */
/* Rate-limited warnings of the TEM daemon: see tem-warn.h. */
#include "tem-warn.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#include "clock.h"
#include "tpm-log.h"
#include "util.h"

void
tem_warn(struct tem_warn *w, const char *format, ...)
{
    uint64_t now = tpm_clock_mono_ns();

    if (now < w->next_ns) {
        w->suppressed++;
        return;
    }
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);
    if (w->suppressed) {
        tpm_log(TPM_LOG_WARN, "%s (%"PRIu64" more not logged)", msg,
                w->suppressed);
    } else {
        tpm_log(TPM_LOG_WARN, "%s", msg);
    }
    free(msg);
    w->suppressed = 0;
    w->next_ns = now + TEM_WARN_INTERVAL_NS;
}
