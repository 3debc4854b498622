/* words.c - the words the duro command prints for what the store holds:
 * statuses, cancel outcomes, and the length of a UTF-8 sequence. Below
 * args.c, json.c, text.c and the verbs; calls none of them. */
#include <stdint.h>

#include "cli.h"

static const char *const status_words[] = {
    "not_found", "pending",          "running",   "completed", "failed",
    "cancelled", "continued_as_new", "suspended", "terminated"};

const char *status_word(int status)
{
    if (status >= 0 &&
        (size_t)status < sizeof(status_words) / sizeof(status_words[0]))
        return status_words[status];
    return "unknown";
}

int instance_cancelling(const duro_instance_info *info)
{
    return !duro_status_is_terminal(info->status) &&
           info->status != DURO_STATUS_NOT_FOUND &&
           info->cancel_requested_ms != 0;
}

const char *cancel_outcome(const duro_instance_info *info)
{
    if (info->status == DURO_STATUS_CANCELLED)
        return "cancelled";
    if (info->cancel_requested_ms == 0 || info->status == DURO_STATUS_NOT_FOUND)
        return NULL;
    if (!duro_status_is_terminal(info->status))
        return "pending";
    /* the request was recorded while the turn that ended the instance
     * otherwise was running: that turn committed first */
    return info->status == DURO_STATUS_TERMINATED ? "terminated" : "too_late";
}

size_t utf8_sequence(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if ((s[0] & 0xE0) == 0xC0) {
        n = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        n = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}
