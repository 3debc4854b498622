/* cron.c - cron expressions (cron.h): parsing into bit sets, and the next
 * fire time: the next matching wall-clock time, field by field, mapped to
 * an instant in the zone. Pure; any thread. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/cron.h"

/* ---- parsing --------------------------------------------------------- */

typedef struct field_spec {
    const char *name;
    int lo, hi;
    const char *const *names; /* three-letter names of lo, lo+1, ... */
} field_spec;

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY",
                                          "JUN", "JUL", "AUG", "SEP", "OCT",
                                          "NOV", "DEC", NULL};
static const char *const weekday_names[] = {"SUN", "MON", "TUE", "WED",
                                            "THU", "FRI", "SAT", NULL};

enum { F_SECOND, F_MINUTE, F_HOUR, F_DAY, F_MONTH, F_WEEKDAY };

static const field_spec specs[] = {
    [F_SECOND] = {"second", 0, 59, NULL},
    [F_MINUTE] = {"minute", 0, 59, NULL},
    [F_HOUR] = {"hour", 0, 23, NULL},
    [F_DAY] = {"day of month", 1, 31, NULL},
    [F_MONTH] = {"month", 1, 12, month_names},
    [F_WEEKDAY] = {"day of week", 0, 7, weekday_names},
};

typedef struct parser {
    char *why;
    size_t why_size;
    int position; /* 1-based field number as written, for messages */
    const field_spec *spec;
} parser;

static int fail(parser *ps, const char *fmt, ...) DURO_PRINTF(2, 3);

static int fail(parser *ps, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (ps->why != NULL && ps->why_size > 0)
        snprintf(ps->why, ps->why_size, "field %d (%s): %s", ps->position,
                 ps->spec->name, what);
    return DURO_INVALID;
}

/* A value at *p: digits, or one of the field's names. */
static int parse_value(parser *ps, const char **p, const char *end, int *out)
{
    const char *s = *p;
    if (s < end && isdigit((unsigned char)*s)) {
        long v = 0;
        for (; s < end && isdigit((unsigned char)*s); s++)
            v = v > 100000 ? v : v * 10 + (*s - '0');
        if (v < ps->spec->lo || v > ps->spec->hi)
            return fail(ps, "%ld is out of range %d-%d", v, ps->spec->lo,
                        ps->spec->hi);
        *out = (int)v;
        *p = s;
        return DURO_OK;
    }
    if (ps->spec->names != NULL && end - s >= 3)
        for (int i = 0; ps->spec->names[i] != NULL; i++)
            if (toupper((unsigned char)s[0]) == ps->spec->names[i][0] &&
                toupper((unsigned char)s[1]) == ps->spec->names[i][1] &&
                toupper((unsigned char)s[2]) == ps->spec->names[i][2]) {
                *out = ps->spec->lo + i;
                *p = s + 3;
                return DURO_OK;
            }
    char item[24];
    snprintf(item, sizeof(item), "%.*s", (int)(end - s > 20 ? 20 : end - s), s);
    return fail(ps, "'%s' is not a value", item);
}

/* One comma-separated item s[0..end) into *bits. */
static int parse_item(parser *ps, const char *s, const char *end,
                      uint64_t *bits)
{
    int lo, hi, step = 1;
    const char *p = s;
    if (p == end)
        return fail(ps, "an empty list item");
    if (*p == '*' || *p == '?') {
        if (*p == '?' && ps->spec != &specs[F_DAY] &&
            ps->spec != &specs[F_WEEKDAY])
            return fail(ps, "'?' is only for the day fields");
        lo = ps->spec->lo;
        hi = ps->spec->hi;
        p++;
    } else {
        int rc = parse_value(ps, &p, end, &lo);
        if (rc != DURO_OK)
            return rc;
        hi = lo;
        if (p < end && *p == '-') {
            p++;
            if ((rc = parse_value(ps, &p, end, &hi)) != DURO_OK)
                return rc;
            if (hi < lo)
                return fail(ps, "the range %d-%d goes backwards", lo, hi);
        } else if (p < end && *p == '/') {
            hi = ps->spec->hi; /* "a/n": from a to the end */
        }
    }
    if (p < end && *p == '/') {
        p++;
        long v = 0;
        const char *digits = p;
        for (; p < end && isdigit((unsigned char)*p); p++)
            v = v > 100000 ? v : v * 10 + (*p - '0');
        if (p == digits || v < 1 || v > ps->spec->hi)
            return fail(ps, "a step must be 1-%d", ps->spec->hi);
        step = (int)v;
    }
    if (p != end) {
        char item[24];
        snprintf(item, sizeof(item), "%.*s", (int)(end - s > 20 ? 20 : end - s),
                 s);
        return fail(ps, "'%s' is not a value, range or step", item);
    }
    for (int v = lo; v <= hi; v += step)
        *bits |= (uint64_t)1
                 << (ps->spec == &specs[F_WEEKDAY] && v == 7 ? 0 : v);
    return DURO_OK;
}

static int parse_field(parser *ps, const char *s, const char *end,
                       uint64_t *bits)
{
    *bits = 0;
    for (;;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma != NULL ? comma : end;
        int rc = parse_item(ps, s, item_end, bits);
        if (rc != DURO_OK)
            return rc;
        if (comma == NULL)
            return DURO_OK;
        s = comma + 1;
    }
}

static const struct {
    const char *name, *text;
} macros[] = {
    {"@yearly", "0 0 0 1 1 *"},  {"@annually", "0 0 0 1 1 *"},
    {"@monthly", "0 0 0 1 * *"}, {"@weekly", "0 0 0 * * 0"},
    {"@daily", "0 0 0 * * *"},   {"@midnight", "0 0 0 * * *"},
    {"@hourly", "0 0 * * * *"},
};

int duro__cron_parse(const char *text, duro__cron *out, char *why,
                     size_t why_size)
{
    if (why != NULL && why_size > 0)
        why[0] = '\0';
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (text == NULL || out == NULL) {
        if (why != NULL && why_size > 0)
            snprintf(why, why_size, "no cron expression");
        return DURO_INVALID;
    }
    if (strlen(text) > DURO__CRON_TEXT_MAX) {
        if (why != NULL && why_size > 0)
            snprintf(why, why_size, "a cron expression is at most %d bytes",
                     DURO__CRON_TEXT_MAX);
        return DURO_TOO_LARGE;
    }
    while (*text == ' ' || *text == '\t')
        text++;
    if (text[0] == '@') {
        size_t n = strcspn(text, " \t");
        const char *rest = text + n + strspn(text + n, " \t");
        for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
            if (*rest == '\0' && strlen(macros[i].name) == n &&
                strncmp(text, macros[i].name, n) == 0)
                return duro__cron_parse(macros[i].text, out, why, why_size);
        if (why != NULL && why_size > 0)
            snprintf(why, why_size,
                     "unknown macro '%.*s' (@yearly, @annually, @monthly, "
                     "@weekly, @daily, @midnight, @hourly)",
                     (int)(n > 40 ? 40 : n), text);
        return DURO_INVALID;
    }
    const char *starts[7], *ends[7];
    int count = 0;
    for (const char *p = text; *p != '\0';) {
        if (*p == ' ' || *p == '\t') {
            p++;
            continue;
        }
        const char *e = p + strcspn(p, " \t");
        if (count < 7) {
            starts[count] = p;
            ends[count] = e;
        }
        count++;
        p = e;
    }
    if (count != 5 && count != 6) {
        if (why != NULL && why_size > 0)
            snprintf(why, why_size,
                     "%d fields: a cron expression has 5 (minute hour "
                     "day-of-month month day-of-week) or 6 (seconds first)",
                     count);
        return DURO_INVALID;
    }
    duro__cron c = {0};
    uint64_t bits[6] = {1, 0, 0, 0, 0, 0}; /* no seconds field: second 0 */
    int first = count == 6 ? F_SECOND : F_MINUTE;
    for (int f = first; f <= F_WEEKDAY; f++) {
        int i = f - first;
        parser ps = {why, why_size, i + 1, &specs[f]};
        int rc = parse_field(&ps, starts[i], ends[i], &bits[f]);
        if (rc != DURO_OK)
            return rc;
    }
    c.seconds = bits[F_SECOND];
    c.minutes = bits[F_MINUTE];
    c.hours = (uint32_t)bits[F_HOUR];
    c.days = (uint32_t)bits[F_DAY];
    c.months = (uint16_t)bits[F_MONTH];
    c.weekdays = (uint8_t)bits[F_WEEKDAY];
    c.days_any = *starts[F_DAY - first] == '*' || *starts[F_DAY - first] == '?';
    c.weekdays_any =
        *starts[F_WEEKDAY - first] == '*' || *starts[F_WEEKDAY - first] == '?';
    *out = c;
    return DURO_OK;
}

/* ---- fire times ------------------------------------------------------ */

/* The lowest bit of mask at or above `from` (below 64), or -1. */
static int next_bit(uint64_t mask, int from)
{
    if (from > 63)
        return -1;
    mask &= ~(uint64_t)0 << from;
    return mask == 0 ? -1 : __builtin_ctzll(mask);
}

static int day_matches(const duro__cron *c, int day, int weekday)
{
    int by_day = (c->days >> day) & 1,
        by_weekday = (c->weekdays >> weekday) & 1;
    /* Vixie cron: a day field that began with '*' makes the two an AND;
     * two restricted ones are an OR. */
    return c->days_any || c->weekdays_any ? by_day && by_weekday
                                          : by_day || by_weekday;
}

/* The first matching time of day at or after second `from` of a day, or
 * -1. */
static int64_t time_of_day(const duro__cron *c, int64_t from)
{
    int h0 = (int)(from / 3600), m0 = (int)(from / 60 % 60),
        s0 = (int)(from % 60);
    for (int h = next_bit(c->hours, h0); h >= 0;
         h = next_bit(c->hours, h + 1)) {
        int mfrom = h == h0 ? m0 : 0;
        for (int m = next_bit(c->minutes, mfrom); m >= 0;
             m = next_bit(c->minutes, m + 1)) {
            int s = next_bit(c->seconds, h == h0 && m == m0 ? s0 : 0);
            if (s >= 0)
                return (int64_t)h * 3600 + m * 60 + s;
        }
    }
    return -1;
}

/* The first local time at or after `local` that c matches, no later than
 * day `last_day`; -1 when none. */
static int64_t next_local(const duro__cron *c, int64_t local, int64_t last_day)
{
    int64_t day = local / 86400 - (local % 86400 < 0);
    int64_t from = local - day * 86400;
    while (day <= last_day) {
        int64_t year;
        int month, dom;
        duro__civil_from_days(day, &year, &month, &dom);
        if (!((c->months >> month) & 1)) { /* to the next month's first */
            day += duro__days_in_month(year, month) - dom + 1;
            from = 0;
            continue;
        }
        if (day_matches(c, dom, duro__weekday(day))) {
            int64_t t = time_of_day(c, from);
            if (t >= 0)
                return day * 86400 + t;
        }
        day++;
        from = 0;
    }
    return -1;
}

/* The instant a matching local time fires at: its first occurrence, or the
 * end of the gap it falls in. */
static int64_t fire_instant(const duro__tz *z, int64_t local)
{
    int64_t at[2], gap_end = 0;
    return duro__tz_local_instants(z, local, at, &gap_end) > 0 ? at[0]
                                                               : gap_end;
}

int duro__cron_next(const duro__cron *c, const duro__tz *z, int64_t after,
                    int64_t *next)
{
    /* Local times below after + (the least offset of the last 26 hours)
     * fired at or before `after`; the mapping from local times to fire
     * instants never goes backwards, so the first matching one past
     * `after` is the answer. */
    int32_t least = duro__tz_offset(z, after);
    for (int64_t t = after - 26 * 3600; t < after; t += 1800) {
        int32_t off = duro__tz_offset(z, t);
        least = off < least ? off : least;
    }
    int64_t last_day = (after + least) / 86400 + 3653;
    int64_t local = after + least;
    for (long steps = 0; steps < 200000; steps++) {
        local = next_local(c, local, last_day);
        if (local < 0)
            return DURO_NOT_FOUND;
        int64_t t = fire_instant(z, local);
        if (t > after) {
            *next = t;
            return DURO_OK;
        }
        local++;
    }
    return DURO_NOT_FOUND;
}
