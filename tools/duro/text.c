/* text.c - output for people: local times with their offset, relative ages,
 * durations, payloads shortened to one line, column padding by display
 * width, and colour (only on a terminal, never with NO_COLOR or TERM=dumb).
 * Single-threaded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *text_local_time(int64_t ms, char *buf, size_t size)
{
    if (ms == 0) {
        snprintf(buf, size, "-");
        return buf;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL ||
        strftime(buf, size, "%Y-%m-%d %H:%M:%S %z", &tm) == 0)
        snprintf(buf, size, "%lld", (long long)ms);
    return buf;
}

/* "3m", "2h5m", "4d" for a non-negative span. */
static void span(int64_t ms, char *buf, size_t size)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, size, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, size, "%lldm", (long long)(s / 60));
    else if (s < 86400)
        snprintf(buf, size, "%lldh%lldm", (long long)(s / 3600),
                 (long long)(s % 3600 / 60));
    else
        snprintf(buf, size, "%lldd%lldh", (long long)(s / 86400),
                 (long long)(s % 86400 / 3600));
}

const char *text_age(int64_t now_ms, int64_t ms, char *buf, size_t size)
{
    if (ms == 0) {
        snprintf(buf, size, "-");
        return buf;
    }
    int64_t d = now_ms - ms;
    char s[32];
    if (d >= -999 && d <= 999) {
        snprintf(buf, size, "just now");
    } else if (d > 0) {
        span(d, s, sizeof(s));
        snprintf(buf, size, "%s ago", s);
    } else {
        span(-d, s, sizeof(s));
        snprintf(buf, size, "in %s", s);
    }
    return buf;
}

const char *text_duration(int64_t ms, char *buf, size_t size)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000)
        snprintf(buf, size, "%lldms", (long long)ms);
    else if (ms < 60000)
        snprintf(buf, size, "%lld.%03llds", (long long)(ms / 1000),
                 (long long)(ms % 1000));
    else
        span(ms, buf, size);
    return buf;
}

const char *text_short(const char *s, size_t max, char *buf, size_t size)
{
    if (s == NULL) {
        snprintf(buf, size, "-");
        return buf;
    }
    size_t o = 0, shown = 0;
    const unsigned char *p = (const unsigned char *)s;
    /* room for "\u009b" (6 bytes), then "…" (3 bytes) and the NUL */
    while (*p != '\0' && o + 10 < size) {
        if (shown == max) {
            break;
        }
        size_t n = utf8_sequence(p);
        if (*p < 0x20 || *p == 0x7f || n == 0) {
            /* a control character, or a byte of invalid UTF-8 (a C1
             * control to an 8-bit terminal) */
            o += (size_t)(*p == '\n'   ? snprintf(buf + o, size - o, "\\n")
                          : *p == '\t' ? snprintf(buf + o, size - o, "\\t")
                          : *p == '\r'
                              ? snprintf(buf + o, size - o, "\\r")
                              : snprintf(buf + o, size - o, "\\x%02x", *p));
            p++;
        } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) {
            /* U+0080..U+009F: C1 controls (CSI is U+009B) */
            o += (size_t)snprintf(buf + o, size - o, "\\u%04x", p[1]);
            p += 2;
        } else {
            memcpy(buf + o, p, n);
            o += n;
            p += n;
        }
        shown++;
    }
    if (*p != '\0') {
        memcpy(buf + o, "\xE2\x80\xA6", 3); /* … */
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

const char *text_escape(const char *s, char *buf, size_t size)
{
    return text_short(s, SIZE_MAX, buf, size);
}

const char *text_quote(const char *s, char *buf, size_t size)
{
    return text_short(s, TEXT_QUOTE_CHARS, buf, size);
}

size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

void text_pad(const char *s, size_t width)
{
    fputs(s, stdout);
    for (size_t w = text_width(s); w < width; w++)
        fputc(' ', stdout);
}

int text_use_color(void)
{
    const char *no = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    if (no != NULL && *no != '\0')
        return 0;
    if (term == NULL || strcmp(term, "dumb") == 0)
        return 0;
    return isatty(STDOUT_FILENO);
}

const char *text_status_color(const cli *c, int status)
{
    if (!c->color)
        return "";
    switch (status) {
    case DURO_STATUS_COMPLETED:
        return "\033[32m";
    case DURO_STATUS_FAILED:
        return "\033[31m";
    case DURO_STATUS_CANCELLED:
        return "\033[33m";
    case DURO_STATUS_RUNNING:
        return "\033[36m";
    case DURO_STATUS_SUSPENDED:
        return "\033[34m";
    case DURO_STATUS_TERMINATED:
        return "\033[35m";
    default:
        return "\033[1m";
    }
}

const char *text_reset(const cli *c)
{
    return c->color ? "\033[0m" : "";
}

const char *text_dim(const cli *c)
{
    return c->color ? "\033[2m" : "";
}

#define BULK_IDS_SHOWN 50

void text_bulk_ids(const duro_bulk_result *r)
{
    char id[TEXT_ESCAPE_SIZE];
    for (size_t i = 0; i < r->id_count && i < BULK_IDS_SHOWN; i++)
        printf("  %s\n", text_escape(r->ids[i], id, sizeof(id)));
    if (r->id_count > BULK_IDS_SHOWN)
        printf("  ... and %zu more (--json lists them all)\n",
               r->id_count - BULK_IDS_SHOWN);
}
