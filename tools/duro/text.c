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

const char *text_zone_time(const char *zone, int64_t ms, char *buf, size_t size)
{
    int32_t offset;
    buf[0] = '\0';
    if (duro_time_zone_offset(zone, ms, &offset) != DURO_OK)
        return buf;
    int64_t s = (ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)) + offset;
    time_t t = (time_t)s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
        return buf;
    char clock[48];
    strftime(clock, sizeof(clock),
             tm.tm_sec != 0 ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d %H:%M", &tm);
    int32_t a = offset < 0 ? -offset : offset;
    snprintf(buf, size, "%s %c%02d:%02d", clock, offset < 0 ? '-' : '+',
             (int)(a / 3600), (int)(a / 60 % 60));
    return buf;
}

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

/* 1 when code point @p cp must not reach a terminal as it is: a C1
 * control (U+009B is CSI to some terminals), a bidirectional control that
 * reorders what follows it (U+061C, U+200E, U+200F, U+202A..U+202E,
 * U+2066..U+2069: "Trojan Source"), or a line or paragraph separator
 * (U+2028, U+2029). C0 controls and DEL are single bytes, handled apart. */
static int escaped_code_point(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e ||
           cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* The code point of the valid @p n-byte UTF-8 sequence at @p p. */
static uint32_t code_point(const unsigned char *p, size_t n)
{
    static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = p[0] & lead_mask[n];
    for (size_t i = 1; i < n; i++)
        cp = (cp << 6) | (p[i] & 0x3f);
    return cp;
}

const char *text_short(const char *s, size_t max, char *buf, size_t size)
{
    if (s == NULL) {
        snprintf(buf, size, "-");
        return buf;
    }
    size_t o = 0, shown = 0;
    const unsigned char *p = (const unsigned char *)s;
    /* room for "\u202e" (6 bytes), then "…" (3 bytes) and the NUL */
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
        } else if (n > 1 && escaped_code_point(code_point(p, n))) {
            o += (size_t)snprintf(buf + o, size - o, "\\u%04x",
                                  (unsigned)code_point(p, n));
            p += n;
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

const char *text_count(uint64_t n, char *buf, size_t size)
{
    char digits[32];
    int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
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
