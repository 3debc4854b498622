/* test_schedules.c - schedules end to end on real runtimes and SQLite files:
 * several runtimes firing one schedule start one instance per fire time,
 * none missing; the overlap policies; catch-up after a downtime and the
 * fires of a named zone across its DST changes (on the process's clock
 * offset, the virtual clock duro_test_env moves); trigger, pause, resume,
 * delete; and bad input for every schedule function. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "core/schedule_spec.h"
#include "rt_util.h"

#define WAIT_MS 20000

static int orch_tick(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* Runs until it gets event "go". */
static int orch_hold(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "released");
}

static void register_all(rt_fixture *f)
{
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Tick", NULL, orch_tick, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Hold", NULL, orch_hold, NULL));
}

/* The stored counters of schedule id. */
static void counters(duro_client *c, const char *id, int64_t *fires,
                     int64_t *skips)
{
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, id, 0, 0, &d));
    *fires = d != NULL ? d->schedules[0].fires : -1;
    if (skips != NULL)
        *skips = d != NULL ? d->schedules[0].skips : -1;
    duro_schedule_description_free(d);
}

static int64_t fires_of(duro_client *c, const char *id)
{
    int64_t n;
    counters(c, id, &n, NULL);
    return n;
}

static int64_t skips_of(duro_client *c, const char *id)
{
    int64_t fires, skips;
    counters(c, id, &fires, &skips);
    return skips;
}

/* The time of the newest fire of schedule id (0: none). */
static int64_t last_fire_time(duro_client *c, const char *id)
{
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, id, 0, 1, &d));
    int64_t t = d != NULL && d->fire_count > 0 ? d->fires[0].time_ms : 0;
    duro_schedule_description_free(d);
    return t;
}

static int status_of(duro_client *c, const char *instance)
{
    duro_instance_info *info = NULL;
    if (duro_client_get_status(c, instance, &info) != DURO_OK)
        return DURO_STATUS_NOT_FOUND;
    int s = info->status;
    duro_free(info);
    return s;
}

/* ---- exactly once ------------------------------------------------------- */

#define RUNTIMES 3

/* Three runtimes on one SQLite file (each its own store handle, as three
 * processes) fire an every-250-ms schedule: every fire time from the
 * first to the last has exactly one instance, and the three started them
 * all between them. */
TEST(several_runtimes_start_one_instance_per_fire_time)
{
    rt_fixture f[RUNTIMES];
    for (int i = 0; i < RUNTIMES; i++) {
        rt_init(&f[i], "once.db");
        register_all(&f[i]);
    }
    for (int i = 0; i < RUNTIMES; i++)
        rt_start(&f[i]);
    duro_client *c = f[0].client;
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 250;
    spec.orchestration = "Tick";
    spec.input = "\"tick\"";
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    CHECK_OK(duro_client_schedule_create(c, "every", &spec));
    WAIT_UNTIL(fires_of(c, "every") >= 16, WAIT_MS);
    /* Paused, it fires no more: a round planned before the pause fails
     * its compare-and-set, so what the log holds now is final. */
    CHECK_OK(duro_client_schedule_pause(c, "every", "test over"));
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, "every", 0,
                                           DURO_SCHEDULE_FIRES_KEPT, &d));
    int64_t fires = d->schedules[0].fires;
    CHECK_EQ(d->schedules[0].skips, 0);
    /* The log, newest first: consecutive fire times, one START each. */
    int64_t first = 0, last = 0;
    size_t starts = 0;
    for (size_t i = 0; i < d->fire_count; i++) {
        const duro_schedule_fire *e = &d->fires[i];
        CHECK_EQ(e->action, DURO_SCHEDULE_START);
        if (i > 0)
            CHECK_EQ(d->fires[i - 1].time_ms - e->time_ms, 250);
        char id[DURO__FIRE_ID_MAX];
        duro__schedule_fire_id("every", e->time_ms, 0, id);
        CHECK_STR(e->instance_id, id);
        if (last == 0)
            last = e->time_ms;
        first = e->time_ms;
        starts++;
    }
    CHECK_EQ((int64_t)starts, fires);
    /* Each fire time from first to last has its instance, which the
     * runtimes run (all of them still up: the last fire's instance may
     * not have had its first turn yet); the instances of the schedule are
     * exactly those. */
    for (int64_t t = first; t <= last; t += 250) {
        char id[DURO__FIRE_ID_MAX];
        duro__schedule_fire_id("every", t, 0, id);
        duro_free(rt_wait(&f[0], id, WAIT_MS));
    }
    /* The runtimes' own counts of the fires they made, once stopped. */
    duro_metrics m[RUNTIMES];
    uint64_t started = 0;
    for (int i = 0; i < RUNTIMES; i++) {
        rt_final_metrics(&f[i], &m[i]);
        started += m[i].schedule_fires;
    }
    CHECK_EQ(started, (uint64_t)fires);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    all.name = "Tick";
    duro_instance_list *list = NULL;
    CHECK_OK(duro_client_list(c, &all, &list));
    CHECK_EQ((int64_t)list->count, fires);
    duro_instance_list_free(list);
    duro_schedule_description_free(d);
    for (int i = 0; i < RUNTIMES; i++)
        rt_done(&f[i]);
}

/* ---- overlap policies --------------------------------------------------- */

/* A schedule of Hold every 100 ms under `overlap`, on a fresh store. */
static void start_hold(rt_fixture *f, const char *db, int overlap)
{
    rt_init(f, db);
    register_all(f);
    rt_start(f);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 100;
    spec.orchestration = "Hold";
    spec.overlap = overlap;
    CHECK_OK(duro_client_schedule_create(f->client, "h", &spec));
}

/* The instance id of the first START of h (the oldest in its log); ""
 * when none. */
static void first_started(duro_client *c, char *out)
{
    out[0] = '\0';
    duro_schedule_description *d = NULL;
    CHECK_OK(
        duro_client_schedule_describe(c, "h", 0, DURO_SCHEDULE_FIRES_KEPT, &d));
    for (size_t i = 0; i < d->fire_count; i++)
        if (d->fires[i].action == DURO_SCHEDULE_START)
            snprintf(out, DURO__FIRE_ID_MAX, "%s", d->fires[i].instance_id);
    duro_schedule_description_free(d);
}

TEST(overlap_skip_starts_nothing_while_the_last_runs)
{
    rt_fixture f;
    start_hold(&f, "skip.db", DURO_OVERLAP_SKIP);
    WAIT_UNTIL(skips_of(f.client, "h") >= 3, WAIT_MS);
    CHECK_EQ(fires_of(f.client, "h"), 1);
    char first[DURO__FIRE_ID_MAX];
    first_started(f.client, first);
    CHECK_OK(duro_client_raise_event(f.client, first, "go", NULL));
    duro_free(rt_wait(&f, first, WAIT_MS));
    /* Once it ended, the next fire starts one again. */
    WAIT_UNTIL(fires_of(f.client, "h") >= 2, WAIT_MS);
    CHECK_OK(duro_client_schedule_delete(f.client, "h"));
    rt_done(&f);
}

TEST(overlap_buffer_one_starts_one_when_the_last_ends)
{
    rt_fixture f;
    start_hold(&f, "buffer.db", DURO_OVERLAP_BUFFER_ONE);
    /* One buffered, the others skipped. */
    WAIT_UNTIL(skips_of(f.client, "h") >= 2, WAIT_MS);
    CHECK_EQ(fires_of(f.client, "h"), 1);
    char first[DURO__FIRE_ID_MAX];
    first_started(f.client, first);
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(f.client, "h", 0, 0, &d));
    int64_t buffered = d->schedules[0].buffered_ms;
    CHECK(buffered > 0);
    duro_schedule_description_free(d);
    CHECK_OK(duro_client_raise_event(f.client, first, "go", NULL));
    WAIT_UNTIL(fires_of(f.client, "h") >= 2, WAIT_MS);
    /* The buffered fire is the one that started. */
    char id[DURO__FIRE_ID_MAX];
    duro__schedule_fire_id("h", buffered, 0, id);
    WAIT_UNTIL(status_of(f.client, id) == DURO_STATUS_RUNNING, WAIT_MS);
    CHECK_OK(duro_client_schedule_pause(f.client, "h", NULL));
    rt_done(&f);
}

TEST(overlap_allow_all_starts_every_fire)
{
    rt_fixture f;
    start_hold(&f, "all.db", DURO_OVERLAP_ALLOW_ALL);
    WAIT_UNTIL(fires_of(f.client, "h") >= 4, WAIT_MS);
    CHECK_OK(duro_client_schedule_pause(f.client, "h", NULL));
    CHECK_EQ(skips_of(f.client, "h"), 0);
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(f.client, "h", 0, 10, &d));
    size_t live = 0;
    for (size_t i = 0; i < d->fire_count; i++)
        live += d->fires[i].action == DURO_SCHEDULE_START;
    CHECK_INT(live, >=, 4);
    duro_schedule_description_free(d);
    rt_done(&f);
}

static void overlap_stops(const char *db, int overlap, int ended)
{
    rt_fixture f;
    start_hold(&f, db, overlap);
    WAIT_UNTIL(fires_of(f.client, "h") >= 1, WAIT_MS);
    char first[DURO__FIRE_ID_MAX];
    first_started(f.client, first);
    WAIT_UNTIL(fires_of(f.client, "h") >= 2, WAIT_MS);
    CHECK_OK(duro_client_schedule_pause(f.client, "h", NULL));
    duro_instance_info *info = rt_wait(&f, first, WAIT_MS);
    CHECK_EQ(info->status, ended);
    if (ended == DURO_STATUS_CANCELLED)
        CHECK_STR(info->cancelled_by, "schedule:h");
    duro_free(info);
    rt_done(&f);
}

TEST(overlap_cancel_other_cancels_the_last)
{
    overlap_stops("cancel.db", DURO_OVERLAP_CANCEL_OTHER,
                  DURO_STATUS_CANCELLED);
}

TEST(overlap_terminate_other_terminates_the_last)
{
    overlap_stops("terminate.db", DURO_OVERLAP_TERMINATE_OTHER,
                  DURO_STATUS_TERMINATED);
}

/* ---- trigger, pause, resume, delete ------------------------------------- */

TEST(trigger_starts_one_now_and_pause_resume_delete_keep_instances)
{
    rt_fixture f;
    rt_init(&f, "trigger.db");
    register_all(&f);
    rt_start(&f);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.cron = "0 0 1 1 *"; /* once a year: only triggers fire */
    spec.orchestration = "Tick";
    spec.input = "\"manual\"";
    spec.paused = 1;
    spec.note = "set up";
    CHECK_OK(duro_client_schedule_create(f.client, "t", &spec));
    CHECK_RC(duro_client_schedule_create(f.client, "t", &spec),
             DURO_ALREADY_EXISTS);
    char id[DURO__FIRE_ID_MAX];
    CHECK_OK(duro_client_schedule_trigger(f.client, "t", id, sizeof(id)));
    CHECK(strncmp(id, "t@trigger-", 10) == 0);
    duro_instance_info *info = rt_wait(&f, id, WAIT_MS);
    CHECK_STR(info->output, "\"manual\"");
    duro_free(info);

    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(f.client, "t", 3, 5, &d));
    CHECK_EQ(d->schedules[0].spec.paused, 1);
    CHECK_STR(d->schedules[0].spec.note, "set up");
    CHECK_STR(d->schedules[0].spec.cron, "0 0 1 1 *");
    CHECK_EQ(d->next_count, 0); /* paused */
    CHECK_EQ(d->fire_count, 1);
    CHECK_STR(d->fires[0].instance_id, id);
    CHECK_EQ(d->fires[0].instance_status, DURO_STATUS_COMPLETED);
    duro_schedule_description_free(d);

    CHECK_OK(duro_client_schedule_resume(f.client, "t"));
    CHECK_OK(duro_client_schedule_describe(f.client, "t", 3, 0, &d));
    CHECK_EQ(d->schedules[0].spec.paused, 0);
    CHECK_EQ(d->next_count, 3);
    CHECK_INT(d->next_times[1] - d->next_times[0], >=, 365LL * 86400 * 1000);
    duro_schedule_description_free(d);

    CHECK_OK(duro_client_schedule_list(f.client, &d));
    CHECK_EQ(d->count, 1);
    CHECK_STR(d->schedules[0].id, "t");
    duro_schedule_description_free(d);

    CHECK_OK(duro_client_schedule_delete(f.client, "t"));
    CHECK_RC(duro_client_schedule_delete(f.client, "t"), DURO_NOT_FOUND);
    CHECK_EQ(status_of(f.client, id), DURO_STATUS_COMPLETED);
    CHECK_OK(duro_client_schedule_list(f.client, &d));
    CHECK_EQ(d->count, 0);
    duro_schedule_description_free(d);
    rt_done(&f);
}

/* ---- catch-up and DST on a moved clock ---------------------------------- */

#define HOUR_MS (3600LL * 1000)

/* Moves the process's clock to `wall` (ms since the epoch) and wakes the
 * firing threads. */
static void clock_to(int64_t wall)
{
    /* One store of the offset: a firing thread must never read the real
     * time in between (it would plan months of fires). */
    duro__clock_set_offset(wall - (duro__wall_ms() - duro__clock_offset()));
    duro__schedules_poke();
}

/* An hourly schedule missed for ten hours of downtime with a 2.5-hour
 * catch-up window: the fires within the window start when the runtime
 * comes back, the others are skipped and counted. */
TEST(catch_up_after_downtime_makes_the_fires_within_the_window)
{
    rt_fixture f;
    rt_init(&f, "catchup.db");
    register_all(&f);
    CHECK_OK(duro_client_create(f.url, &f.client));
    int64_t t0 = 1798761600000LL + 20 * 60 * 1000; /* 2027-01-01T00:20Z */
    clock_to(t0);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = HOUR_MS;
    spec.orchestration = "Tick";
    spec.catchup_window_ms = 5 * HOUR_MS / 2;
    /* Each fire made starts (under SKIP the first made would skip the
     * others: the catch-up runs while it is live). */
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    CHECK_OK(duro_client_schedule_create(f.client, "c", &spec));
    /* Ten hours later (the runtime was down) it comes back. */
    int64_t back = t0 + 10 * HOUR_MS;
    clock_to(back);
    rt_start(&f);
    /* Fires at 01:00 .. 10:00; back at 10:20: those due 2.5 h before or
     * later (08:00, 09:00, 10:00) start, seven are skipped. */
    WAIT_UNTIL(fires_of(f.client, "c") == 3, WAIT_MS);
    CHECK_EQ(skips_of(f.client, "c"), 7);
    for (int h = 1; h <= 10; h++) {
        char id[DURO__FIRE_ID_MAX];
        duro__schedule_fire_id("c", 1798761600000LL + h * HOUR_MS, 0, id);
        if (h >= 8)
            duro_free(rt_wait(&f, id, WAIT_MS));
        else
            CHECK_EQ(status_of(f.client, id), DURO_STATUS_NOT_FOUND);
    }
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.schedule_fires, 3);
    CHECK_EQ(m.schedule_skips, 7);
    CHECK_INT(m.schedule_lag_max_ms, >=, 2 * HOUR_MS);
    duro__clock_set_offset(0);
    rt_done(&f);
}

/* Waits until instance `id` exists and has ended: under the default
 * overlap policy (skip) the next fire skips while it runs. */
static void wait_fire(rt_fixture *f, const char *id)
{
    int64_t deadline = test_now_ms() + WAIT_MS;
    while (status_of(f->client, id) == DURO_STATUS_NOT_FOUND &&
           test_now_ms() < deadline)
        test_sleep_ms(1);
    int64_t fires, skips;
    counters(f->client, "dst", &fires, &skips);
    CHECK_MSG(status_of(f->client, id) != DURO_STATUS_NOT_FOUND,
              "no instance '%s' (fires %lld, skips %lld, now %lld)", id,
              (long long)fires, (long long)skips, (long long)duro__wall_ms());
    duro_free(rt_wait(f, id, WAIT_MS));
}

/* "30 2 * * *" in Europe/Berlin across 2026's changes: on 29 March the
 * clock skips 02:00-03:00 CET, so the fire is at the gap's end (03:00
 * CEST, 01:00Z); on 25 October 02:30 happens twice and fires once, at
 * the first (CEST, 00:30Z); the days around fire at 02:30 local. */
TEST(dst_changes_in_a_named_zone_fire_once_a_day)
{
    rt_fixture f;
    rt_init(&f, "dst.db");
    register_all(&f);
    int64_t mar28 = 1774656000000LL; /* 2026-03-28T00:00:00Z */
    clock_to(mar28);
    rt_start(&f);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.cron = "30 2 * * *";
    spec.time_zone = "Europe/Berlin";
    spec.orchestration = "Tick";
    CHECK_OK(duro_client_schedule_create(f.client, "dst", &spec));
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(f.client, "dst", 3, 0, &d));
    CHECK_EQ(d->next_count, 3);
    CHECK_EQ(d->next_times[0], mar28 + 90 * 60 * 1000); /* 01:30Z (CET) */
    CHECK_EQ(d->next_times[1], mar28 + 25 * HOUR_MS);   /* gap end */
    CHECK_EQ(d->next_times[2], mar28 + 48 * HOUR_MS + 30 * 60 * 1000);
    duro_schedule_description_free(d);
    static const char *const spring[] = {"dst@2026-03-28T01:30:00Z",
                                         "dst@2026-03-29T01:00:00Z",
                                         "dst@2026-03-30T00:30:00Z"};
    for (int i = 0; i < 3; i++) {
        clock_to(mar28 + (i + 1) * 24 * HOUR_MS - 60 * 1000);
        wait_fire(&f, spring[i]);
    }
    CHECK_EQ(fires_of(f.client, "dst"), 3);
    /* Autumn: skipping months would make up the fires between (the
     * catch-up window is a year): pause, move, update (its next fire is
     * from the new now, and it resumes), then cross the change. */
    CHECK_OK(duro_client_schedule_pause(f.client, "dst", "moving"));
    int64_t oct24 = 1792800000000LL; /* 2026-10-24T00:00:00Z */
    clock_to(oct24);
    CHECK_OK(duro_client_schedule_update(f.client, "dst", &spec));
    static const char *const autumn[] = {"dst@2026-10-24T00:30:00Z",
                                         "dst@2026-10-25T00:30:00Z",
                                         "dst@2026-10-26T01:30:00Z"};
    for (int i = 0; i < 3; i++) {
        clock_to(oct24 + (i + 1) * 24 * HOUR_MS - 60 * 1000);
        wait_fire(&f, autumn[i]);
    }
    /* 25 October fired once: not again at 01:30Z (02:30 CET). */
    CHECK_EQ(status_of(f.client, "dst@2026-10-25T01:30:00Z"),
             DURO_STATUS_NOT_FOUND);
    CHECK_EQ(fires_of(f.client, "dst"), 6);
    CHECK_EQ(skips_of(f.client, "dst"), 0);
    rt_stop(&f); /* before the clock goes back to now: no catch-up */
    duro__clock_set_offset(0);
    rt_done(&f);
}

/* duro_test_env skips to a schedule's fire times as to the queues' due
 * times: a daily schedule fires at each midnight while the test waits for
 * a two-and-a-half-day timer, each fire at its time. */
static int orch_wait_days(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_timer(o, 60 * HOUR_MS));
    return duro_ok(out, "rested");
}

/* A started test environment on a temporary SQLite store whose registry
 * has Tick and Rest. */
static duro_test_env *started_env(void)
{
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "Tick", NULL, orch_tick, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Rest", NULL, orch_wait_days, NULL));
    duro_test_env *env = NULL;
    CHECK_OK(duro_test_env_create(r, NULL, &env));
    duro_registry_destroy(r);
    CHECK_OK(duro_test_env_start(env));
    return env;
}

TEST(the_test_env_skips_to_fire_times)
{
    duro_test_env *env = started_env();
    duro_client *c = duro_test_env_client(env);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.cron = "@daily";
    spec.orchestration = "Tick";
    int64_t created = duro_now_ms();
    CHECK_OK(duro_client_schedule_create(c, "daily", &spec));
    CHECK_OK(duro_client_start(c, "rest", "Rest", NULL, NULL));
    duro_instance_info *info = NULL;
    CHECK_OK(duro_test_env_wait(env, "rest", WAIT_MS, &info));
    CHECK_STR(info->output, "rested");
    duro_free(info);
    CHECK_INT(duro_test_env_skipped_ms(env), >=, 60 * HOUR_MS - WAIT_MS);
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, "daily", 0, 10, &d));
    /* at most one a midnight the clock passed since the schedule was made */
    int64_t midnights =
        duro_now_ms() / (24 * HOUR_MS) - created / (24 * HOUR_MS);
    CHECK_INT(d->fire_count, >=, 2);
    CHECK_INT(d->fire_count, <=, midnights);
    for (size_t i = 0; i < d->fire_count; i++) {
        CHECK_EQ(d->fires[i].action, DURO_SCHEDULE_START);
        CHECK_EQ(d->fires[i].time_ms % (24 * HOUR_MS), 0);
        /* started at its time, not caught up later */
        CHECK_INT(d->fires[i].recorded_ms - d->fires[i].time_ms, <, 5000);
    }
    duro_schedule_description_free(d);
    duro_test_env_destroy(env);
}

/* The instance of the schedule's newest fire that is not a trigger, into
 * buf; 0 while there is none. */
static int fired_instance(duro_client *c, const char *id, char *buf,
                          size_t size)
{
    duro_schedule_description *d = NULL;
    if (duro_client_schedule_describe(c, id, 0, 10, &d) != DURO_OK)
        return 0;
    int found = 0;
    for (size_t k = 0; k < d->fire_count && !found; k++)
        if (d->fires[k].action == DURO_SCHEDULE_START &&
            d->fires[k].instance_id != NULL &&
            strstr(d->fires[k].instance_id, "@trigger-") == NULL) {
            snprintf(buf, size, "%s", d->fires[k].instance_id);
            found = 1;
        }
    duro_schedule_description_free(d);
    return found;
}

/* A schedule's timeout_ms: each instance a fire or a trigger starts has a
 * deadline that long after its start, and ends at it (Failed, timeout);
 * on the virtual clock, so the hours pass at once. */
TEST(a_schedule_timeout_is_each_fired_instance_deadline)
{
    duro_test_env *env = started_env();
    duro_client *c = duro_test_env_client(env);
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 24 * HOUR_MS;
    /* the first fire half a day ahead: none falls in the trigger's two
     * hours, so every fire is planned after the clock's moves below */
    spec.offset_ms = (duro_now_ms() + 12 * HOUR_MS) % (24 * HOUR_MS);
    spec.orchestration = "Rest";
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    spec.timeout_ms = 2 * HOUR_MS;
    CHECK_OK(duro_client_schedule_create(c, "bounded", &spec));
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, "bounded", 0, 0, &d));
    CHECK_EQ(d->schedules[0].spec.timeout_ms, 2 * HOUR_MS);
    duro_schedule_description_free(d);
    char id[DURO_SCHEDULE_ID_MAX + 64];
    int64_t before = duro_now_ms();
    CHECK_OK(duro_client_schedule_trigger(c, "bounded", id, sizeof(id)));
    duro_instance_info *info = NULL;
    CHECK_OK(duro_test_env_wait(env, id, WAIT_MS, &info));
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    CHECK_EQ(info->category, DURO_CATEGORY_TIMEOUT);
    CHECK_INT(info->deadline_ms, >=, before + 2 * HOUR_MS);
    CHECK_INT(info->deadline_ms - info->created_ms, <=, 2 * HOUR_MS + 1000);
    duro_free(info);
    /* the next fire's instance too */
    CHECK_OK(duro_client_schedule_describe(c, "bounded", 0, 0, &d));
    char fire[DURO_SCHEDULE_ID_MAX + 64] = "";
    int64_t next = d->schedules[0].next_ms;
    duro_schedule_description_free(d);
    CHECK_INT(next, >, 0);
    /* the clock moved past the next fire time: its instance appears
     * (the firing thread wakes), found in the fires log */
    CHECK_OK(duro_test_env_advance(env, 25 * HOUR_MS));
    duro_instance_info *last = NULL;
    WAIT_UNTIL(fired_instance(c, "bounded", fire, sizeof(fire)), WAIT_MS);
    CHECK(fire[0] != '\0');
    CHECK_OK(duro_test_env_wait(env, fire, WAIT_MS, &last));
    CHECK_EQ(last->status, DURO_STATUS_FAILED);
    CHECK_EQ(last->category, DURO_CATEGORY_TIMEOUT);
    CHECK_INT(last->deadline_ms - last->created_ms, >=, 2 * HOUR_MS - 1000);
    CHECK_INT(last->deadline_ms - last->created_ms, <=, 2 * HOUR_MS + 1000);
    duro_free(last);
    duro_test_env_destroy(env);
}

/* ---- kill -9 around fire times ------------------------------------------ */

#define KILL_ROUNDS 6

/* The environment variable that makes this program a runtime on the
 * store it names instead of the tests (spawn_runtime). */
#define RUNTIME_URL_ENV "DURO_TEST_SCHEDULE_RUNTIME_URL"

/* A runtime on `url` until the process is killed: the child's whole life. */
static int run_runtime(const char *url)
{
    duro_registry *reg = NULL;
    duro_runtime_options o;
    rt_default_options(&o);
    duro_runtime *rt = NULL;
    if (duro_registry_create(&reg) != DURO_OK ||
        duro_registry_add_orchestration(reg, "Tick", NULL, orch_tick, NULL) !=
            DURO_OK ||
        duro_runtime_create(url, reg, &o, &rt) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK)
        return 3;
    for (;;)
        pause(); /* until SIGKILL */
}

/* A child process running a runtime on the store until it is killed: this
 * program again (fork, then exec), so the child starts with one thread
 * whatever threads the parent has (a process forked from threads may not
 * start new ones; TSan refuses it). */
static pid_t spawn_runtime(const char *url)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setenv(RUNTIME_URL_ENV, url, 1);
    execl("/proc/self/exe", "test_schedules", (char *)NULL);
    _exit(4);
}

/* Runtimes in child processes killed with SIGKILL at random instants
 * after a fire (mid-apply, mid-turn, while sleeping), one after another,
 * then a survivor: every fire time from the first to the last has
 * exactly one instance, none is lost (the downtimes are well within the
 * catch-up window) and none is counted twice. */
TEST(kill_9_around_fire_times_loses_and_doubles_no_fire)
{
    rt_fixture f;
    rt_init(&f, "kill.db");
    register_all(&f);
    CHECK_OK(duro_client_create(f.url, &f.client));
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 100;
    spec.orchestration = "Tick";
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    CHECK_OK(duro_client_schedule_create(f.client, "k", &spec));
    unsigned seed = (unsigned)time(NULL);
    fprintf(stderr, "  seed %u\n", seed);
    srand(seed);
    for (int round = 0; round < KILL_ROUNDS; round++) {
        int64_t before = fires_of(f.client, "k");
        pid_t pid = spawn_runtime(f.url);
        CHECK(pid > 0);
        WAIT_UNTIL(fires_of(f.client, "k") > before, WAIT_MS);
        /* The kill instant, random within a fire interval and a half:
         * the chaos of the test, not a synchronisation. */
        usleep((useconds_t)(rand() % 150) * 1000);
        CHECK_EQ(kill(pid, SIGKILL), 0);
        int st = 0;
        CHECK_EQ(waitpid(pid, &st, 0), pid);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    /* The survivor makes the fires of the downtime since the last kill,
     * then a few more. */
    int64_t killed_at = duro__wall_ms();
    rt_start(&f);
    WAIT_UNTIL(fires_of(f.client, "k") > 0 &&
                   last_fire_time(f.client, "k") > killed_at + 300,
               WAIT_MS);
    CHECK_OK(duro_client_schedule_pause(f.client, "k", NULL));
    rt_stop(&f);
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(f.client, "k", 0,
                                           DURO_SCHEDULE_FIRES_KEPT, &d));
    int64_t fires = d->schedules[0].fires;
    CHECK_EQ(d->schedules[0].skips, 0);
    CHECK_INT(fires, <, DURO_SCHEDULE_FIRES_KEPT); /* the log holds all */
    CHECK_EQ((int64_t)d->fire_count, fires);
    for (size_t i = 0; i < d->fire_count; i++) {
        CHECK_EQ(d->fires[i].action, DURO_SCHEDULE_START);
        if (i > 0)
            CHECK_EQ(d->fires[i - 1].time_ms - d->fires[i].time_ms, 100);
        char id[DURO__FIRE_ID_MAX];
        duro__schedule_fire_id("k", d->fires[i].time_ms, 0, id);
        CHECK_STR(d->fires[i].instance_id, id);
    }
    duro_schedule_description_free(d);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    all.name = "Tick";
    duro_instance_list *list = NULL;
    CHECK_OK(duro_client_list(f.client, &all, &list));
    CHECK_EQ((int64_t)list->count, fires);
    duro_instance_list_free(list);
    rt_done(&f);
}

/* ---- bad input ---------------------------------------------------------- */

static void expect_spec_refused(duro_client *c, const duro_schedule_spec *s,
                                int code, const char *words)
{
    CHECK_RC(duro_client_schedule_create(c, "bad", s), code);
    CHECK_MSG(strstr(duro_errmsg(), words) != NULL, "'%s' lacks '%s'",
              duro_errmsg(), words);
    size_t n = 0;
    int64_t times[2];
    CHECK_RC(duro_schedule_spec_next_times(s, 0, times, 2, &n), code);
}

TEST(every_schedule_function_refuses_bad_input)
{
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(test_sqlite_url("bad.db"), &c));
    duro_schedule_spec ok;
    duro_schedule_spec_init(&ok);
    ok.interval_ms = 1000;
    ok.orchestration = "Tick";
    duro_schedule_spec s = ok;

    CHECK_RC(duro_client_schedule_create(NULL, "x", &ok), DURO_INVALID);
    CHECK_RC(duro_client_schedule_create(c, NULL, &ok), DURO_INVALID);
    CHECK_RC(duro_client_schedule_create(c, "", &ok), DURO_INVALID);
    CHECK_RC(duro_client_schedule_create(c, "a@b", &ok), DURO_INVALID);
    char long_id[DURO_SCHEDULE_ID_MAX + 2];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    CHECK_RC(duro_client_schedule_create(c, long_id, &ok), DURO_TOO_LARGE);
    CHECK_RC(duro_client_schedule_create(c, "x", NULL), DURO_INVALID);
    s.version = 0;
    expect_spec_refused(c, &s, DURO_INVALID, "duro_schedule_spec_init");
    s = ok;
    s.cron = "61 * * * *";
    s.interval_ms = 0;
    expect_spec_refused(c, &s, DURO_INVALID, "field 1");
    s.cron = "* * * * * * *";
    expect_spec_refused(c, &s, DURO_INVALID, "cron expression");
    s = ok;
    s.cron = "@daily";
    expect_spec_refused(c, &s, DURO_INVALID, "both");
    s = ok;
    s.interval_ms = 0;
    expect_spec_refused(c, &s, DURO_INVALID, "neither");
    s.interval_ms = -5;
    expect_spec_refused(c, &s, DURO_INVALID, "negative");
    s = ok;
    s.offset_ms = 1000;
    expect_spec_refused(c, &s, DURO_INVALID, "offset_ms");
    s = ok;
    s.cron = "@hourly";
    s.interval_ms = 0;
    s.time_zone = "Mars/Olympus_Mons";
    expect_spec_refused(c, &s, DURO_NOT_FOUND, "Mars/Olympus_Mons");
    s.time_zone = "../etc/passwd";
    expect_spec_refused(c, &s, DURO_INVALID, "..");
    s = ok;
    s.orchestration = NULL;
    expect_spec_refused(c, &s, DURO_INVALID, "orchestration");
    s = ok;
    s.overlap = 9;
    expect_spec_refused(c, &s, DURO_INVALID, "overlap");
    s = ok;
    s.catchup_window_ms = 999;
    expect_spec_refused(c, &s, DURO_INVALID, "catchup_window_ms");
    s = ok;
    s.jitter_ms = -1;
    expect_spec_refused(c, &s, DURO_INVALID, "negative");
    s = ok;
    s.timeout_ms = -1;
    expect_spec_refused(c, &s, DURO_INVALID, "timeout_ms");
    s.timeout_ms = INT64_MAX;
    expect_spec_refused(c, &s, DURO_INVALID, "year 9999");
    /* a spec of version 1 has no timeout_ms: what lies there is not read */
    s.version = 1;
    s.timeout_ms = -1;
    CHECK_OK(duro_client_schedule_create(c, "v1", &s));
    duro_schedule_description *v1 = NULL;
    CHECK_OK(duro_client_schedule_describe(c, "v1", 0, 0, &v1));
    CHECK_EQ(v1->schedules[0].spec.timeout_ms, 0);
    duro_schedule_description_free(v1);
    CHECK_OK(duro_client_schedule_delete(c, "v1"));
    s = ok;
    s.start_ms = 5000;
    s.end_ms = 4000;
    expect_spec_refused(c, &s, DURO_INVALID, "end_ms");
    s = ok;
    s.paused = 7;
    expect_spec_refused(c, &s, DURO_INVALID, "paused");
    s = ok;
    s.input = "\"caf\xe9\"";
    expect_spec_refused(c, &s, DURO_INVALID, "input is not valid UTF-8");
    s = ok;
    s.orchestration = "T\xff"
                      "ck";
    expect_spec_refused(c, &s, DURO_INVALID, "orchestration name");
    CHECK_RC(duro_client_schedule_create(c, "s\xc3", &ok), DURO_INVALID);
    CHECK_RC(duro_client_schedule_pause(c, "none", "n\xc0te"), DURO_INVALID);
    size_t n = 0;
    CHECK_RC(duro_schedule_spec_next_times(&ok, 0, NULL, 1, &n), DURO_INVALID);
    CHECK_RC(duro_schedule_spec_next_times(&ok, 0, NULL, 0, NULL),
             DURO_INVALID);
    int64_t times[3];
    CHECK_OK(duro_schedule_spec_next_times(&ok, 500, times, 3, &n));
    CHECK_EQ(n, 3);
    CHECK_EQ(times[0], 1000);
    CHECK_EQ(times[2], 3000);

    /* The verbs on a schedule: unknown ids, NULLs. */
    CHECK_RC(duro_client_schedule_update(c, "none", &ok), DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_update(c, "none", NULL), DURO_INVALID);
    CHECK_RC(duro_client_schedule_update(NULL, "none", &ok), DURO_INVALID);
    CHECK_RC(duro_client_schedule_pause(c, "none", NULL), DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_pause(c, NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_schedule_pause(NULL, "x", NULL), DURO_INVALID);
    CHECK_RC(duro_client_schedule_resume(c, "none"), DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_resume(c, ""), DURO_INVALID);
    CHECK_RC(duro_client_schedule_resume(NULL, "x"), DURO_INVALID);
    char id[DURO__FIRE_ID_MAX];
    CHECK_RC(duro_client_schedule_trigger(c, "none", id, sizeof(id)),
             DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_trigger(c, "none", id, 10), DURO_INVALID);
    CHECK_RC(duro_client_schedule_trigger(NULL, "x", NULL, 0), DURO_INVALID);
    CHECK_RC(duro_client_schedule_delete(c, "none"), DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_delete(c, long_id), DURO_TOO_LARGE);
    CHECK_RC(duro_client_schedule_delete(NULL, "x"), DURO_INVALID);
    duro_schedule_description *d = (duro_schedule_description *)&ok;
    CHECK_RC(duro_client_schedule_list(NULL, &d), DURO_INVALID);
    CHECK(d == NULL);
    CHECK_RC(duro_client_schedule_list(c, NULL), DURO_INVALID);
    CHECK_RC(duro_client_schedule_describe(c, "none", 1, 1, &d),
             DURO_NOT_FOUND);
    CHECK_RC(duro_client_schedule_describe(c, "none", 101, 1, &d),
             DURO_INVALID);
    CHECK_RC(duro_client_schedule_describe(c, "none", 1, 1000, &d),
             DURO_INVALID);
    CHECK_RC(duro_client_schedule_describe(c, "none", 1, 1, NULL),
             DURO_INVALID);
    CHECK_RC(duro_client_schedule_describe(NULL, "x", 1, 1, &d), DURO_INVALID);
    duro_schedule_description_free(NULL);
    duro_schedule_spec_init(NULL);
    /* An update with a bad spec changes nothing. */
    CHECK_OK(duro_client_schedule_create(c, "good", &ok));
    s = ok;
    s.cron = "nonsense";
    CHECK_RC(duro_client_schedule_update(c, "good", &s), DURO_INVALID);
    CHECK_OK(duro_client_schedule_describe(c, "good", 1, 0, &d));
    CHECK_EQ(d->schedules[0].spec.interval_ms, 1000);
    CHECK(d->schedules[0].spec.cron == NULL);
    duro_schedule_description_free(d);
    duro_client_destroy(c);
}

int main(int argc, char **argv)
{
    const char *url = getenv(RUNTIME_URL_ENV);
    if (url != NULL)
        return run_runtime(url);
    static const test_case tests[] = {
        T(several_runtimes_start_one_instance_per_fire_time),
        T(overlap_skip_starts_nothing_while_the_last_runs),
        T(overlap_buffer_one_starts_one_when_the_last_ends),
        T(overlap_allow_all_starts_every_fire),
        T(overlap_cancel_other_cancels_the_last),
        T(overlap_terminate_other_terminates_the_last),
        T(trigger_starts_one_now_and_pause_resume_delete_keep_instances),
        T(catch_up_after_downtime_makes_the_fires_within_the_window),
        T(dst_changes_in_a_named_zone_fire_once_a_day),
        T(the_test_env_skips_to_fire_times),
        T(a_schedule_timeout_is_each_fired_instance_deadline),
        T(kill_9_around_fire_times_loses_and_doubles_no_fire),
        T(every_schedule_function_refuses_bad_input)};
    return test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
