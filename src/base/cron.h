/* cron.h - cron expressions and their fire times in a time zone, for
 * schedules. Pure; any thread.
 *
 * Text: five fields "minute hour day-of-month month day-of-week", or six
 * with seconds first, separated by spaces or tabs; or a macro: @yearly
 * (@annually), @monthly, @weekly, @daily (@midnight), @hourly. A field is a
 * comma-separated list of items: "*", a value, a range "a-b", each of those
 * with a step "/n" ("a/n" is "a-max/n"); "?" is "*" in the two day fields.
 * Months take JAN..DEC, weekdays SUN..SAT (either case); weekday 7 is
 * Sunday too. As in Vixie cron, when both day fields are restricted (not
 * starting with "*" or "?") a day matches when either does.
 *
 * Wall-clock time in the zone: a time the zone's clock skips (a
 * spring-forward gap) fires once, at the instant the gap ends, however many
 * of the expression's times fall in it; a time the clock shows twice (a
 * fall-back overlap) fires once, at its first occurrence. */
#ifndef DURO_BASE_CRON_H
#define DURO_BASE_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "base/tz.h"

/* Expression text is at most this many bytes. */
#define DURO__CRON_TEXT_MAX 256

typedef struct duro__cron {
    uint64_t seconds;     /* bit n: second n (0..59) */
    uint64_t minutes;     /* 0..59 */
    uint32_t hours;       /* 0..23 */
    uint32_t days;        /* bit n: day of month n (1..31) */
    uint16_t months;      /* bit n: month n (1..12) */
    uint8_t weekdays;     /* bit n: weekday n (0 Sunday .. 6) */
    uint8_t days_any;     /* the day-of-month field began with '*' or '?' */
    uint8_t weekdays_any; /* the day-of-week field did */
} duro__cron;

/* Parses text into *out. DURO_OK, or DURO_INVALID with why[why_size] saying
 * which field and what is wrong ("field 3 (day of month): 32 is out of
 * range 1-31"); DURO_TOO_LARGE over DURO__CRON_TEXT_MAX bytes. */
int duro__cron_parse(const char *text, duro__cron *out, char *why,
                     size_t why_size);

/* The first fire strictly after instant `after` (seconds since the epoch)
 * of c in zone z: DURO_OK with *next; DURO_NOT_FOUND when there is none in
 * the ten years after (a date that never comes: "0 0 30 2 *"). */
int duro__cron_next(const duro__cron *c, const duro__tz *z, int64_t after,
                    int64_t *next);

#endif
