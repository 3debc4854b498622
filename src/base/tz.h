/* tz.h - time zones by name from the system's tz database (TZif files,
 * RFC 8536), and the civil calendar: what UTC offset a zone has at an
 * instant, and which instants a zone's local wall-clock time names (none in
 * a spring-forward gap, two in a fall-back overlap). For schedules, whose
 * cron expressions are wall-clock times in a named zone. Times are seconds
 * since the Unix epoch (UTC, no leap seconds). A loaded zone is immutable:
 * any thread may read it. */
#ifndef DURO_BASE_TZ_H
#define DURO_BASE_TZ_H

#include <stdint.h>

#include "duro/provider.h"

/* Zone names are at most this many bytes. */
#define DURO__TZ_NAME_MAX 255

typedef struct duro__tz duro__tz;

/* Loads zone `name` ("Europe/Berlin", "UTC") from the directory in the
 * TZDIR environment variable, else /usr/share/zoneinfo. "UTC" and
 * "Etc/UTC" load without a file (offset 0) when the database has none.
 * DURO_OK with *out (free with duro__tz_free); else *out NULL and err says
 * why: DURO_INVALID for a NULL or empty name, one over DURO__TZ_NAME_MAX
 * bytes, or one that is not a path below the directory ('/' first, an
 * empty, "." or ".." component, a character outside [A-Za-z0-9/_+.-]);
 * DURO_NOT_FOUND when no such zone exists; DURO_INVALID when the file is
 * not a TZif file duro reads (malformed, truncated, over 1 MiB, with leap
 * seconds - the "right/" zones - or a footer rule it cannot parse);
 * DURO_NOMEM. Any thread. */
int duro__tz_load(const char *name, duro__tz **out, duro_error *err);

/* NULL is a no-op. */
void duro__tz_free(duro__tz *z);

/* The zone's name as loaded. */
const char *duro__tz_name(const duro__tz *z);

/* The UTC offset in seconds (east positive) in effect at instant t. */
int32_t duro__tz_offset(const duro__tz *z, int64_t t);

/* The instants whose local time in z is `local` (seconds since the epoch
 * of the local wall clock, as if it were UTC): returns how many (0, 1 or
 * 2) and stores them ascending in at[]. 0: `local` falls in a gap (a
 * spring-forward transition skips it); *gap_end then holds the transition
 * instant, the first one whose local time is past `local`. 2: an overlap
 * (a fall-back transition repeats it). */
int duro__tz_local_instants(const duro__tz *z, int64_t local, int64_t at[2],
                            int64_t *gap_end);

/* The civil calendar (proleptic Gregorian). Days since 1970-01-01 of a
 * date (month 1..12, day 1..31), and back; weekday of a day count (0
 * Sunday .. 6 Saturday). */
int64_t duro__days_from_civil(int64_t year, int month, int day);
void duro__civil_from_days(int64_t days, int64_t *year, int *month, int *day);
int duro__weekday(int64_t days);
int duro__days_in_month(int64_t year, int month);

/* ms since the epoch as RFC 3339 UTC with milliseconds (24 characters
 * for years 0 to 9999), into b[size] (the civil calendar above: no time
 * zone, no locale, the same on every host). */
void duro__format_utc(char *b, size_t size, int64_t ms);

#endif
