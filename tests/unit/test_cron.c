/* test_cron.c - time zones from the tz database and cron expressions
 * (src/base/tz.c, src/base/cron.c): offsets checked against the C
 * library's own reading of the same zones (localtime_r with TZ set), local
 * times in gaps and overlaps, the calendar, parsing and its errors, and
 * fire times checked against a second-by-second scan around daylight-saving
 * transitions in zones of both hemispheres, half-hour shifts and
 * abolished daylight time. */
#include <stdlib.h>
#include <time.h>

#include "base/base.h"
#include "base/cron.h"
#include "base/tz.h"
#include "test.h"

static const char *const zones[] = {
    "Europe/Berlin",       "America/New_York", "Australia/Sydney",
    "Australia/Lord_Howe", "Pacific/Chatham",  "America/Sao_Paulo",
    "Africa/Casablanca",   "Asia/Kolkata",     "UTC",
};
#define ZONE_COUNT (sizeof(zones) / sizeof(zones[0]))

/* 2026-03-29T01:00:00Z: Europe/Berlin springs forward (02:00 CET becomes
 * 03:00 CEST); 2026-10-25T01:00:00Z: it falls back (03:00 CEST becomes
 * 02:00 CET). */
#define BERLIN_SPRING 1774746000LL
#define BERLIN_FALL 1792890000LL

static duro__tz *load(const char *name)
{
    duro__tz *z = NULL;
    duro_error err = {0};
    int rc = duro__tz_load(name, &z, &err);
    CHECK_MSG(rc == DURO_OK, "loading %s: %s %s", name, duro_errname(rc),
              err.message);
    return z;
}

/* The C library's offset for zone `name` at t (TZ=":name"). */
static long libc_offset(const char *name, time_t t)
{
    static char current[300];
    char tz[300];
    snprintf(tz, sizeof(tz), ":%s", name);
    if (strcmp(tz, current) != 0) { /* the test is one thread */
        setenv("TZ", tz, 1);
        tzset();
        snprintf(current, sizeof(current), "%s", tz);
    }
    struct tm tm;
    localtime_r(&t, &tm);
    return tm.tm_gmtoff;
}

static int64_t utc(int year, int month, int day, int h, int m, int s)
{
    return duro__days_from_civil(year, month, day) * 86400 + h * 3600 + m * 60 +
           s;
}

TEST(the_calendar_round_trips_and_knows_weekdays)
{
    for (int64_t d = -800000; d <= 800000; d += 37) {
        int64_t y;
        int m, day;
        duro__civil_from_days(d, &y, &m, &day);
        CHECK_EQ(duro__days_from_civil(y, m, day), d);
        time_t t = (time_t)(d * 86400);
        struct tm tm;
        gmtime_r(&t, &tm);
        CHECK_EQ(y, tm.tm_year + 1900);
        CHECK_EQ(m, tm.tm_mon + 1);
        CHECK_EQ(day, tm.tm_mday);
        CHECK_EQ(duro__weekday(d), tm.tm_wday);
        if (test_failed())
            return;
    }
    CHECK_EQ(duro__days_in_month(2024, 2), 29);
    CHECK_EQ(duro__days_in_month(2100, 2), 28);
    CHECK_EQ(duro__days_in_month(2000, 2), 29);
    CHECK_EQ(duro__days_in_month(2026, 4), 30);
}

TEST(offsets_agree_with_the_c_library_from_1900_to_2200)
{
    for (size_t i = 0; i < ZONE_COUNT; i++) {
        duro__tz *z = load(zones[i]);
        if (z == NULL)
            return;
        CHECK_STR(duro__tz_name(z), zones[i]);
        /* every 5 hours 3 minutes, so no two samples share a time of day
         * pattern: over 200 000 instants a zone */
        for (int64_t t = utc(1900, 1, 1, 0, 0, 0); t < utc(2200, 1, 1, 0, 0, 0);
             t += 5 * 3600 + 180) {
            long want = libc_offset(zones[i], (time_t)t);
            int32_t got = duro__tz_offset(z, t);
            if (got != want) {
                CHECK_MSG(0, "%s at %lld: duro %d, libc %ld", zones[i],
                          (long long)t, got, want);
                break;
            }
        }
        duro__tz_free(z);
        if (test_failed())
            return;
    }
}

TEST(offsets_change_at_the_transition_second)
{
    duro__tz *z = load("Europe/Berlin");
    if (z == NULL)
        return;
    CHECK_EQ(duro__tz_offset(z, BERLIN_SPRING - 1), 3600);
    CHECK_EQ(duro__tz_offset(z, BERLIN_SPRING), 7200);
    CHECK_EQ(duro__tz_offset(z, BERLIN_FALL - 1), 7200);
    CHECK_EQ(duro__tz_offset(z, BERLIN_FALL), 3600);
    /* far past the file's last transition: the footer's rule */
    CHECK_EQ(duro__tz_offset(z, utc(2150, 7, 1, 0, 0, 0)), 7200);
    CHECK_EQ(duro__tz_offset(z, utc(2150, 1, 1, 0, 0, 0)), 3600);
    duro__tz_free(z);
}

TEST(local_times_in_gaps_and_overlaps)
{
    duro__tz *z = load("Europe/Berlin");
    if (z == NULL)
        return;
    int64_t at[2], gap_end = -1;
    /* 02:30 on 2026-03-29 does not exist: the gap ends at 01:00Z */
    CHECK_EQ(
        duro__tz_local_instants(z, utc(2026, 3, 29, 2, 30, 0), at, &gap_end),
        0);
    CHECK_EQ(gap_end, BERLIN_SPRING);
    gap_end = -1;
    CHECK_EQ(
        duro__tz_local_instants(z, utc(2026, 3, 29, 2, 0, 0), at, &gap_end), 0);
    CHECK_EQ(gap_end, BERLIN_SPRING);
    /* 03:00 is the transition itself, 01:59:59 the second before it */
    CHECK_EQ(
        duro__tz_local_instants(z, utc(2026, 3, 29, 3, 0, 0), at, &gap_end), 1);
    CHECK_EQ(at[0], BERLIN_SPRING);
    CHECK_EQ(
        duro__tz_local_instants(z, utc(2026, 3, 29, 1, 59, 59), at, &gap_end),
        1);
    CHECK_EQ(at[0], BERLIN_SPRING - 1);
    /* 02:30 on 2026-10-25 happens twice: 00:30Z (CEST) and 01:30Z (CET) */
    CHECK_EQ(
        duro__tz_local_instants(z, utc(2026, 10, 25, 2, 30, 0), at, &gap_end),
        2);
    CHECK_EQ(at[0], BERLIN_FALL - 1800);
    CHECK_EQ(at[1], BERLIN_FALL + 1800);
    duro__tz_free(z);
}

TEST(zone_names_and_files_are_checked)
{
    duro__tz *z = (duro__tz *)1;
    duro_error err = {0};
    CHECK_RC(duro__tz_load(NULL, &z, &err), DURO_INVALID);
    CHECK(z == NULL);
    CHECK_RC(duro__tz_load("", &z, &err), DURO_INVALID);
    CHECK_RC(duro__tz_load("Europe/Berlin", NULL, &err), DURO_INVALID);
    static const char *const bad[] = {
        "/etc/passwd",    "../etc/passwd",   "Europe/../../etc/passwd",
        "Europe//Berlin", "Europe/",         "./UTC",
        "Europe/Ber lin", "Europe/Berlin\n", "Éurope/Berlin"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        z = (duro__tz *)1;
        CHECK_RC(duro__tz_load(bad[i], &z, &err), DURO_INVALID);
        CHECK(z == NULL);
        CHECK(strstr(err.message, "not a zone of the tz database") != NULL);
    }
    char longname[DURO__TZ_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK_RC(duro__tz_load(longname, &z, &err), DURO_INVALID);
    CHECK_RC(duro__tz_load("Mars/Olympus_Mons", &z, &err), DURO_NOT_FOUND);
    CHECK(strstr(err.message, "Mars/Olympus_Mons") != NULL);
    CHECK(strstr(err.message, "not found") != NULL);

    /* files that are not zones, in a TZDIR of our own */
    const char *dir = test_path("zoneinfo");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/Bad && printf 'not a zone' > %s/Bad/Text && "
             "head -c 60 /usr/share/zoneinfo/Europe/Berlin > %s/Bad/Cut && "
             "head -c 3000000 /dev/zero > %s/Bad/Huge && "
             "cp /usr/share/zoneinfo/Europe/Berlin %s/Bad/Good",
             dir, dir, dir, dir, dir);
    CHECK_EQ(system(cmd), 0);
    char *old = getenv("TZDIR") ? strdup(getenv("TZDIR")) : NULL;
    setenv("TZDIR", dir, 1);
    CHECK_RC(duro__tz_load("Bad/Text", &z, &err), DURO_INVALID);
    CHECK(strstr(err.message, "not a TZif file") != NULL);
    CHECK_RC(duro__tz_load("Bad/Cut", &z, &err), DURO_INVALID);
    CHECK(strstr(err.message, "truncated") != NULL);
    CHECK_RC(duro__tz_load("Bad/Huge", &z, &err), DURO_INVALID);
    CHECK(strstr(err.message, "over 1 MiB") != NULL);
    CHECK_RC(duro__tz_load("Bad", &z, &err), DURO_INVALID); /* a folder */
    /* UTC needs no file, even where the database has none */
    CHECK_RC(duro__tz_load("UTC", &z, &err), DURO_OK);
    CHECK_EQ(duro__tz_offset(z, BERLIN_SPRING), 0);
    duro__tz_free(z);
    CHECK_RC(duro__tz_load("Bad/Good", &z, &err), DURO_OK);
    CHECK_EQ(duro__tz_offset(z, BERLIN_SPRING), 7200);
    duro__tz_free(z);
    if (old != NULL) {
        setenv("TZDIR", old, 1);
        free(old);
    } else {
        unsetenv("TZDIR");
    }
}

/* ---- parsing --------------------------------------------------------- */

static duro__cron parse_ok(const char *text)
{
    duro__cron c;
    char why[256];
    int rc = duro__cron_parse(text, &c, why, sizeof(why));
    CHECK_MSG(rc == DURO_OK, "'%s': %s %s", text, duro_errname(rc), why);
    return c;
}

static void parse_fails(const char *text, int code, const char *words)
{
    duro__cron c;
    char why[256];
    int rc = duro__cron_parse(text, &c, why, sizeof(why));
    CHECK_MSG(rc == code, "'%s': %s, expected %s", text, duro_errname(rc),
              duro_errname(code));
    CHECK_MSG(strstr(why, words) != NULL, "'%s': '%s' lacks '%s'", text, why,
              words);
}

TEST(cron_text_is_parsed_into_sets)
{
    duro__cron c = parse_ok("*/15 9-17 * * MON-FRI");
    CHECK(c.seconds == 1);
    CHECK(c.minutes ==
          ((1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45)));
    CHECK_EQ(c.hours, 0x3fe00);
    CHECK_EQ(c.weekdays, 0x3e);
    CHECK(c.days_any && !c.weekdays_any);
    c = parse_ok("30 0 12 1,15 jan,Jul ?");
    CHECK_EQ(c.seconds, 1ull << 30);
    CHECK_EQ(c.minutes, 1);
    CHECK_EQ(c.hours, 1u << 12);
    CHECK_EQ(c.days, (1u << 1) | (1u << 15));
    CHECK_EQ(c.months, (1u << 1) | (1u << 7));
    CHECK(c.weekdays_any && !c.days_any);
    c = parse_ok("0 0 * * 5-7"); /* 7 is Sunday */
    CHECK_EQ(c.weekdays, (1u << 5) | (1u << 6) | 1u);
    c = parse_ok("  10/20\t* * * *  "); /* a/n runs to the end */
    CHECK(c.minutes == ((1ull << 10) | (1ull << 30) | (1ull << 50)));
    c = parse_ok("@hourly");
    CHECK(c.seconds == 1 && c.minutes == 1 && c.hours == 0xffffff);
    c = parse_ok("@weekly");
    CHECK_EQ(c.weekdays, 1);
    c = parse_ok("@annually");
    CHECK(c.days == 2 && c.months == 2);
}

TEST(bad_cron_text_says_what_is_wrong)
{
    parse_fails("* * * *", DURO_INVALID, "4 fields");
    parse_fails("* * * * * * *", DURO_INVALID, "7 fields");
    parse_fails("", DURO_INVALID, "0 fields");
    parse_fails("60 * * * *", DURO_INVALID,
                "field 1 (minute): 60 is out of range 0-59");
    parse_fails("0 0 32 * *", DURO_INVALID,
                "field 3 (day of month): 32 is out of range 1-31");
    parse_fails("0 0 0 * 13 *", DURO_INVALID, "field 5 (month)");
    parse_fails("0 0 * * 8", DURO_INVALID, "out of range 0-7");
    parse_fails("5-3 * * * *", DURO_INVALID, "the range 5-3 goes backwards");
    parse_fails("*/0 * * * *", DURO_INVALID, "a step must be 1-59");
    parse_fails("*/ * * * *", DURO_INVALID, "a step must be");
    parse_fails("1,,2 * * * *", DURO_INVALID, "an empty list item");
    parse_fails("? * * * *", DURO_INVALID, "only for the day fields");
    parse_fails("0 0 * * FUN", DURO_INVALID, "'FUN' is not a value");
    parse_fails("0 0 * JANUARY *", DURO_INVALID, "not a value, range or step");
    parse_fails("1-2-3 * * * *", DURO_INVALID, "not a value, range or step");
    parse_fails("99999999999 * * * *", DURO_INVALID, "out of range 0-59");
    parse_fails("@fortnightly", DURO_INVALID, "unknown macro '@fortnightly'");
    parse_fails("@daily 5", DURO_INVALID, "unknown macro");
    char big[DURO__CRON_TEXT_MAX + 2];
    memset(big, '*', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    parse_fails(big, DURO_TOO_LARGE, "at most 256 bytes");
    duro__cron c;
    CHECK_RC(duro__cron_parse(NULL, &c, NULL, 0), DURO_INVALID);
    CHECK_RC(duro__cron_parse("* * * * *", NULL, NULL, 0), DURO_INVALID);
}

/* ---- fire times ------------------------------------------------------ */

static int64_t next_of(const char *text, const char *zone, int64_t after)
{
    duro__cron c = parse_ok(text);
    duro__tz *z = load(zone);
    int64_t next = -1;
    if (z != NULL)
        CHECK_RC(duro__cron_next(&c, z, after, &next), DURO_OK);
    duro__tz_free(z);
    return next;
}

TEST(fire_times_in_utc)
{
    int64_t t = utc(2026, 11, 29, 10, 7, 30);
    CHECK_EQ(next_of("*/15 * * * *", "UTC", t), utc(2026, 11, 29, 10, 15, 0));
    CHECK_EQ(next_of("*/15 * * * *", "UTC", utc(2026, 11, 29, 10, 15, 0)),
             utc(2026, 11, 29, 10, 30, 0)); /* strictly after */
    CHECK_EQ(next_of("*/10 * * * * *", "UTC", t), utc(2026, 11, 29, 10, 7, 40));
    /* 2026-11-29 is a Sunday: the next weekday noon is Monday's */
    CHECK_EQ(next_of("0 12 * * MON-FRI", "UTC", t),
             utc(2026, 11, 30, 12, 0, 0));
    CHECK_EQ(next_of("0 0 29 2 *", "UTC", t), utc(2028, 2, 29, 0, 0, 0));
    CHECK_EQ(next_of("@yearly", "UTC", t), utc(2027, 1, 1, 0, 0, 0));
    CHECK_EQ(next_of("59 23 31 12 *", "UTC", t), utc(2026, 12, 31, 23, 59, 0));
    /* both day fields restricted: either (the 1st, or a Friday) */
    CHECK_EQ(next_of("0 0 1 * FRI", "UTC", t), utc(2026, 12, 1, 0, 0, 0));
    CHECK_EQ(next_of("0 0 1 * FRI", "UTC", utc(2026, 12, 1, 0, 0, 0)),
             utc(2026, 12, 4, 0, 0, 0));
    /* a day field that begins with '*' makes it both */
    CHECK_EQ(next_of("0 0 */2 * MON", "UTC", t), utc(2026, 12, 7, 0, 0, 0));
    /* never: February 30 */
    duro__cron c = parse_ok("0 0 30 2 *");
    duro__tz *z = load("UTC");
    int64_t next = 7;
    CHECK_RC(duro__cron_next(&c, z, t, &next), DURO_NOT_FOUND);
    CHECK_EQ(next, 7);
    duro__tz_free(z);
}

TEST(fire_times_across_daylight_saving_in_berlin)
{
    /* 02:30 daily: the spring day's 02:30 does not exist and fires when
     * the gap ends (03:00 CEST, 01:00Z); the autumn day's happens twice and
     * fires once, at the first (00:30Z) */
    CHECK_EQ(next_of("30 2 * * *", "Europe/Berlin", BERLIN_SPRING - 43200),
             BERLIN_SPRING);
    CHECK_EQ(next_of("30 2 * * *", "Europe/Berlin", BERLIN_SPRING),
             BERLIN_SPRING + 86400 - 1800); /* 02:30 CEST the day after */
    CHECK_EQ(next_of("30 2 * * *", "Europe/Berlin", BERLIN_FALL - 86400),
             BERLIN_FALL - 1800);
    CHECK_EQ(next_of("30 2 * * *", "Europe/Berlin", BERLIN_FALL - 1800),
             BERLIN_FALL + 86400 - 1800 + 3600); /* not 01:30Z */
    /* every half hour: 02:00, 02:30 and 03:00 of the spring day are one
     * fire; the autumn day's second 02:00 and 02:30 are not fires */
    CHECK_EQ(next_of("*/30 * * * *", "Europe/Berlin", BERLIN_SPRING - 1800),
             BERLIN_SPRING);
    CHECK_EQ(next_of("*/30 * * * *", "Europe/Berlin", BERLIN_SPRING),
             BERLIN_SPRING + 1800);
    CHECK_EQ(next_of("*/30 * * * *", "Europe/Berlin", BERLIN_FALL - 1800),
             BERLIN_FALL + 3600);
    /* a time the zone never skips is an hour apart in UTC across a change */
    CHECK_EQ(next_of("0 12 * * *", "Europe/Berlin", BERLIN_SPRING - 43200),
             utc(2026, 3, 29, 10, 0, 0));
    CHECK_EQ(next_of("0 12 * * *", "Europe/Berlin", BERLIN_FALL),
             utc(2026, 10, 25, 11, 0, 0));
}

/* ---- the scan ------------------------------------------------------- */

static const char *scan_zone;

/* The local time at t, by the C library. */
static int64_t libc_local(time_t t)
{
    return (int64_t)t + libc_offset(scan_zone, t);
}

/* Does c match local time `local` (fields by gmtime_r, not duro's
 * calendar)? */
static int matches(const duro__cron *c, int64_t local)
{
    time_t lt = (time_t)local;
    struct tm tm;
    gmtime_r(&lt, &tm);
    if (!((c->seconds >> tm.tm_sec) & 1) || !((c->minutes >> tm.tm_min) & 1) ||
        !((c->hours >> tm.tm_hour) & 1) ||
        !((c->months >> (tm.tm_mon + 1)) & 1))
        return 0;
    int by_day = (c->days >> tm.tm_mday) & 1;
    int by_weekday = (c->weekdays >> tm.tm_wday) & 1;
    return c->days_any || c->weekdays_any ? by_day && by_weekday
                                          : by_day || by_weekday;
}

/* Does c fire at instant t, by the rule: a matching local time fires at
 * its first occurrence; the matching times a jump forward skips fire at
 * the jump. */
static int fires_at(const duro__cron *c, int64_t t)
{
    int64_t local = libc_local((time_t)t), before = libc_local((time_t)t - 1);
    if (matches(c, local)) {
        /* first occurrence: no earlier instant within 27 hours shows it
         * (offsets differ by less) - checked at each offset the zone had */
        int first = 1;
        for (int64_t back = 1; back <= 27 * 3600 && first; back += 900) {
            int64_t e = t - back;
            long off = libc_offset(scan_zone, (time_t)e);
            int64_t cand = local - off; /* an instant showing `local` */
            if (cand < t && libc_local((time_t)cand) == local)
                first = 0;
        }
        if (first)
            return 1;
    }
    for (int64_t m = before + 1; m < local; m++) /* skipped by a jump */
        if (matches(c, m))
            return 1;
    return 0;
}

static void scan(const char *text, const char *zone, int64_t from,
                 int64_t until)
{
    duro__cron c = parse_ok(text);
    duro__tz *z = load(zone);
    if (z == NULL)
        return;
    scan_zone = zone;
    int64_t after = from;
    int fires = 0;
    for (;;) {
        int64_t next = 0;
        int rc = duro__cron_next(&c, z, after, &next);
        int64_t want = -1;
        for (int64_t t = after + 1; t <= until; t++)
            if (fires_at(&c, t)) {
                want = t;
                break;
            }
        if (want < 0) {
            CHECK_MSG(rc != DURO_OK || next > until,
                      "%s in %s after %lld: duro fires at %lld, the scan "
                      "finds nothing",
                      text, zone, (long long)after, (long long)next);
            break;
        }
        CHECK_MSG(rc == DURO_OK && next == want,
                  "%s in %s after %lld: duro %s %lld, the scan %lld", text,
                  zone, (long long)after, duro_errname(rc), (long long)next,
                  (long long)want);
        if (test_failed())
            break;
        fires++;
        after = next;
    }
    CHECK_MSG(fires > 0, "%s in %s: no fires in the window", text, zone);
    duro__tz_free(z);
}

/* The transitions of `zone` between from and until, by the C library. */
static size_t transitions(const char *zone, int64_t from, int64_t until,
                          int64_t *out, size_t max)
{
    size_t n = 0;
    long prev = libc_offset(zone, (time_t)from);
    for (int64_t t = from + 900; t <= until && n < max; t += 900) {
        long off = libc_offset(zone, (time_t)t);
        if (off == prev)
            continue;
        int64_t lo = t - 900, hi = t; /* the exact second */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (libc_offset(zone, (time_t)mid) == prev)
                lo = mid;
            else
                hi = mid;
        }
        out[n++] = hi;
        prev = off;
    }
    return n;
}

TEST(fire_times_match_a_scan_around_every_transition_of_2026)
{
    static const char *const exprs[] = {"*/30 * * * *",    "30 2 * * *",
                                        "15,45 1-3 * * *", "0 0 * * *",
                                        "*/20 * 2 * * *",  "0 30 0 * * SUN"};
    for (size_t i = 0; i < ZONE_COUNT; i++) {
        int64_t at[8];
        size_t n = transitions(zones[i], utc(2026, 1, 1, 0, 0, 0),
                               utc(2027, 1, 1, 0, 0, 0), at, 8);
        for (size_t k = 0; k < n; k++)
            for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++) {
                /* a day either side; per second where the expression has
                 * seconds, which the scan checks one by one */
                scan(exprs[e], zones[i], at[k] - 86400, at[k] + 86400);
                if (test_failed())
                    return;
            }
    }
    /* zones without a transition in 2026 still fire on the scan's terms */
    scan("*/30 * * * *", "Asia/Kolkata", utc(2026, 6, 1, 0, 0, 0),
         utc(2026, 6, 2, 0, 0, 0));
}

TEST_MAIN(T(the_calendar_round_trips_and_knows_weekdays),
          T(offsets_agree_with_the_c_library_from_1900_to_2200),
          T(offsets_change_at_the_transition_second),
          T(local_times_in_gaps_and_overlaps),
          T(zone_names_and_files_are_checked), T(cron_text_is_parsed_into_sets),
          T(bad_cron_text_says_what_is_wrong), T(fire_times_in_utc),
          T(fire_times_across_daylight_saving_in_berlin),
          T(fire_times_match_a_scan_around_every_transition_of_2026))
