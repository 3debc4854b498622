/* test_schedule.c - the schedule planner (src/core/schedule_plan.c): fire times
 * of intervals and cron expressions within start and end, jitter, and the
 * plans of each overlap policy, of the catch-up window after downtime
 * (counted, and beyond counting), of a buffered fire, and of a plan cut at
 * its maximum and continued. */
#include "base/base.h"
#include "core/schedule_plan.h"
#include "test.h"

#define MIN 60000LL
#define HOUR (60 * MIN)
#define T0 1796083200000LL /* 2026-12-01T00:00:00Z */

static duro__schedule_rule every(int64_t interval_ms, int overlap)
{
    duro__schedule_rule r = {0};
    r.id = "every";
    r.interval_ms = interval_ms;
    r.catchup_ms = 365 * 24 * HOUR;
    r.overlap = overlap;
    return r;
}

static size_t plan(const duro__schedule_rule *r, duro__schedule_state *s,
                   int64_t now, duro__fire_action *out, size_t max)
{
    duro__schedule_state after;
    size_t n = duro__schedule_plan(r, s, now, out, max, &after);
    *s = after;
    return n;
}

TEST(interval_fires_follow_the_offset_and_the_bounds)
{
    duro__schedule_rule r = every(HOUR, DURO__OVERLAP_SKIP);
    r.offset_ms = 15 * MIN;
    int64_t next = 0;
    CHECK_RC(duro__schedule_next(&r, T0, &next), DURO_OK);
    CHECK_EQ(next, T0 + 15 * MIN);
    CHECK_RC(duro__schedule_next(&r, T0 + 15 * MIN, &next), DURO_OK);
    CHECK_EQ(next, T0 + 75 * MIN);                         /* strictly after */
    CHECK_RC(duro__schedule_next(&r, -1, &next), DURO_OK); /* before 1970 */
    CHECK_EQ(next, 15 * MIN);
    r.start_ms = T0 + 5 * HOUR;
    CHECK_RC(duro__schedule_next(&r, T0, &next), DURO_OK);
    CHECK_EQ(next, T0 + 5 * HOUR + 15 * MIN);
    r.start_ms = T0 + 5 * HOUR + 15 * MIN; /* a fire at the start counts */
    CHECK_RC(duro__schedule_next(&r, T0, &next), DURO_OK);
    CHECK_EQ(next, T0 + 5 * HOUR + 15 * MIN);
    r.end_ms = T0 + 6 * HOUR + 15 * MIN; /* end is exclusive */
    CHECK_RC(duro__schedule_next(&r, T0 + 5 * HOUR + 15 * MIN, &next),
             DURO_NOT_FOUND);
    r.end_ms = 0;
    CHECK_RC(duro__schedule_next(&r, INT64_MAX - 10, &next), DURO_NOT_FOUND);
}

TEST(cron_fires_are_whole_seconds_in_the_zone)
{
    duro__cron c;
    char why[128];
    CHECK_RC(duro__cron_parse("0 2 * * *", &c, why, sizeof(why)), DURO_OK);
    duro__tz *z = NULL;
    duro_error err = {0};
    CHECK_RC(duro__tz_load("America/New_York", &z, &err), DURO_OK);
    if (z == NULL)
        return;
    duro__schedule_rule r = {0};
    r.id = "nightly";
    r.cron = &c;
    r.zone = z;
    int64_t next = 0;
    /* 02:00 EST is 07:00Z */
    CHECK_RC(duro__schedule_next(&r, T0, &next), DURO_OK);
    CHECK_EQ(next, T0 + 7 * HOUR);
    CHECK_RC(duro__schedule_next(&r, T0 + 7 * HOUR - 1, &next), DURO_OK);
    CHECK_EQ(next, T0 + 7 * HOUR);
    CHECK_RC(duro__schedule_next(&r, T0 + 7 * HOUR, &next), DURO_OK);
    CHECK_EQ(next, T0 + 31 * HOUR);
    r.end_ms = T0 + 31 * HOUR;
    CHECK_RC(duro__schedule_next(&r, T0 + 7 * HOUR, &next), DURO_NOT_FOUND);
    duro__tz_free(z);
}

TEST(jitter_is_stable_bounded_and_spread)
{
    duro__schedule_rule r = every(MIN, DURO__OVERLAP_SKIP);
    CHECK_EQ(duro__schedule_jitter(&r, T0), 0);
    r.jitter_ms = 30000;
    int64_t lo = INT64_MAX, hi = -1;
    for (int64_t i = 0; i < 2000; i++) {
        int64_t j = duro__schedule_jitter(&r, T0 + i * MIN);
        CHECK(j >= 0 && j <= 30000);
        CHECK_EQ(duro__schedule_jitter(&r, T0 + i * MIN), j);
        lo = j < lo ? j : lo;
        hi = j > hi ? j : hi;
    }
    CHECK_INT(lo, <, 3000);
    CHECK_INT(hi, >, 27000);
    duro__schedule_rule other = r;
    other.id = "other";
    int differ = 0;
    for (int64_t i = 0; i < 100; i++)
        differ += duro__schedule_jitter(&r, T0 + i * MIN) !=
                  duro__schedule_jitter(&other, T0 + i * MIN);
    CHECK_INT(differ, >, 90);
    /* due only after its jitter */
    duro__schedule_state s = {.next_ms = T0};
    duro__fire_action a[4];
    int64_t j = duro__schedule_jitter(&r, T0);
    CHECK_EQ(plan(&r, &s, T0 + j - 1, a, 4), 0);
    CHECK_EQ(s.next_ms, T0);
    CHECK_EQ(plan(&r, &s, T0 + j, a, 4), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_START);
    CHECK_EQ(a[0].time_ms, T0);
}

TEST(a_due_fire_starts_and_the_state_moves_on)
{
    duro__schedule_rule r = every(HOUR, DURO__OVERLAP_SKIP);
    duro__schedule_state s = {.next_ms = T0 + HOUR};
    duro__fire_action a[8];
    CHECK_EQ(plan(&r, &s, T0 + HOUR - 1, a, 8), 0);
    CHECK_EQ(s.next_ms, T0 + HOUR);
    CHECK_EQ(s.last_live, 0);
    CHECK_EQ(plan(&r, &s, T0 + HOUR, a, 8), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_START);
    CHECK_EQ(a[0].time_ms, T0 + HOUR);
    CHECK_EQ(s.next_ms, T0 + 2 * HOUR);
    CHECK_EQ(s.last_live, 1);
}

TEST(skip_skips_while_the_last_runs)
{
    duro__schedule_rule r = every(HOUR, DURO__OVERLAP_SKIP);
    duro__schedule_state s = {.next_ms = T0, .last_live = 1};
    duro__fire_action a[8];
    CHECK_EQ(plan(&r, &s, T0, a, 8), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_SKIP);
    CHECK_EQ(a[0].count, 1);
    CHECK(strstr(a[0].why, "has not ended") != NULL);
    CHECK_EQ(s.next_ms, T0 + HOUR);
    s.last_live = 0; /* it ended */
    CHECK_EQ(plan(&r, &s, T0 + HOUR, a, 8), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_START);
}

TEST(buffer_one_keeps_one_fire_for_when_the_last_ends)
{
    duro__schedule_rule r = every(HOUR, DURO__OVERLAP_BUFFER_ONE);
    duro__schedule_state s = {.next_ms = T0, .last_live = 1};
    duro__fire_action a[8];
    CHECK_EQ(plan(&r, &s, T0 + HOUR, a, 8), 2);
    CHECK_EQ(a[0].kind, DURO__FIRE_BUFFER);
    CHECK_EQ(a[0].time_ms, T0);
    CHECK_EQ(a[1].kind, DURO__FIRE_SKIP);
    CHECK_EQ(a[1].time_ms, T0 + HOUR);
    CHECK(strstr(a[1].why, "buffered already") != NULL);
    CHECK_EQ(s.buffered_ms, T0);
    CHECK_EQ(plan(&r, &s, T0 + HOUR + 1, a, 8), 0); /* still running */
    s.last_live = 0;
    CHECK_EQ(plan(&r, &s, T0 + HOUR + 2, a, 8), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_START);
    CHECK_EQ(a[0].time_ms, T0); /* the buffered fire, by its own time */
    CHECK_EQ(s.buffered_ms, 0);
    CHECK_EQ(s.last_live, 1);
    /* and the next is buffered again while it runs */
    CHECK_EQ(plan(&r, &s, T0 + 2 * HOUR, a, 8), 1);
    CHECK_EQ(a[0].kind, DURO__FIRE_BUFFER);
}

TEST(allow_all_starts_every_fire)
{
    duro__schedule_rule r = every(MIN, DURO__OVERLAP_ALLOW_ALL);
    duro__schedule_state s = {.next_ms = T0, .last_live = 1};
    duro__fire_action a[8];
    CHECK_EQ(plan(&r, &s, T0 + 2 * MIN, a, 8), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(a[i].kind, DURO__FIRE_START);
        CHECK_EQ(a[i].time_ms, T0 + i * MIN);
    }
}

TEST(cancel_and_terminate_other_stop_the_last_first)
{
    for (int policy = DURO__OVERLAP_CANCEL_OTHER;
         policy <= DURO__OVERLAP_TERMINATE_OTHER; policy++) {
        duro__schedule_rule r = every(MIN, policy);
        duro__schedule_state s = {.next_ms = T0, .last_live = 1};
        duro__fire_action a[8];
        /* a stop and its start need two places: one is not enough */
        CHECK_EQ(plan(&r, &s, T0, a, 1), 0);
        CHECK_EQ(s.next_ms, T0);
        CHECK_EQ(plan(&r, &s, T0 + MIN, a, 8), 4);
        CHECK_EQ(a[0].kind, DURO__FIRE_STOP_LAST);
        CHECK_EQ(a[1].kind, DURO__FIRE_START);
        CHECK_EQ(a[1].time_ms, T0);
        CHECK_EQ(a[2].kind, DURO__FIRE_STOP_LAST);
        CHECK_EQ(a[3].kind, DURO__FIRE_START);
        CHECK_EQ(a[3].time_ms, T0 + MIN);
        /* nothing running: no stop */
        s.last_live = 0;
        CHECK_EQ(plan(&r, &s, T0 + 2 * MIN, a, 8), 1);
        CHECK_EQ(a[0].kind, DURO__FIRE_START);
    }
}

TEST(downtime_beyond_the_catch_up_window_is_skipped_and_counted)
{
    duro__schedule_rule r = every(MIN, DURO__OVERLAP_SKIP);
    r.catchup_ms = 10 * MIN;
    duro__schedule_state s = {.next_ms = T0};
    duro__fire_action a[8];
    /* down an hour: the fires of T0 .. T0+49m are missed (due more than
     * ten minutes before T0+60m), T0+50m starts, the rest overlap it */
    CHECK_EQ(plan(&r, &s, T0 + HOUR, a, 8), 8);
    CHECK_EQ(a[0].kind, DURO__FIRE_SKIP);
    CHECK_EQ(a[0].time_ms, T0);
    CHECK_EQ(a[0].count, 50);
    CHECK(strstr(a[0].why, "catch-up window") != NULL);
    CHECK_EQ(a[1].kind, DURO__FIRE_START);
    CHECK_EQ(a[1].time_ms, T0 + 50 * MIN);
    for (int i = 2; i < 8; i++) {
        CHECK_EQ(a[i].kind, DURO__FIRE_SKIP);
        CHECK_EQ(a[i].count, 1);
    }
    /* the plan stopped at 8; the next goes on where it stopped */
    CHECK_EQ(s.next_ms, T0 + 57 * MIN);
    CHECK_EQ(plan(&r, &s, T0 + HOUR, a, 8), 4);
    CHECK_EQ(a[3].time_ms, T0 + HOUR);
    CHECK_EQ(s.next_ms, T0 + HOUR + MIN);
}

TEST(a_year_of_missed_seconds_is_skipped_without_counting_each)
{
    duro__cron c;
    char why[128];
    CHECK_RC(duro__cron_parse("* * * * * *", &c, why, sizeof(why)), DURO_OK);
    duro__tz *z = NULL;
    duro_error err = {0};
    CHECK_RC(duro__tz_load("UTC", &z, &err), DURO_OK);
    duro__schedule_rule r = {0};
    r.id = "each-second";
    r.cron = &c;
    r.zone = z;
    r.catchup_ms = MIN;
    duro__schedule_state s = {.next_ms = T0};
    duro__fire_action a[2];
    int64_t now = T0 + 365 * 24 * HOUR;
    CHECK_EQ(plan(&r, &s, now, a, 2), 2);
    CHECK_EQ(a[0].kind, DURO__FIRE_SKIP);
    CHECK_EQ(a[0].count, -1);
    CHECK_EQ(a[1].kind, DURO__FIRE_START);
    CHECK_EQ(a[1].time_ms, now - MIN); /* the first inside the window */
    duro__tz_free(z);
}

TEST(a_schedule_ends_after_its_last_fire)
{
    duro__schedule_rule r = every(HOUR, DURO__OVERLAP_ALLOW_ALL);
    r.end_ms = T0 + 2 * HOUR;
    duro__schedule_state s = {.next_ms = T0};
    duro__fire_action a[8];
    CHECK_EQ(plan(&r, &s, T0 + 10 * HOUR, a, 8), 2);
    CHECK_EQ(a[1].time_ms, T0 + HOUR);
    CHECK_EQ(s.next_ms, 0);
    CHECK_EQ(plan(&r, &s, T0 + 20 * HOUR, a, 8), 0);
}

TEST_MAIN(T(interval_fires_follow_the_offset_and_the_bounds),
          T(cron_fires_are_whole_seconds_in_the_zone),
          T(jitter_is_stable_bounded_and_spread),
          T(a_due_fire_starts_and_the_state_moves_on),
          T(skip_skips_while_the_last_runs),
          T(buffer_one_keeps_one_fire_for_when_the_last_ends),
          T(allow_all_starts_every_fire),
          T(cancel_and_terminate_other_stop_the_last_first),
          T(downtime_beyond_the_catch_up_window_is_skipped_and_counted),
          T(a_year_of_missed_seconds_is_skipped_without_counting_each),
          T(a_schedule_ends_after_its_last_fire))
