/* test_pg_schedules.c - schedules on a PostgreSQL store (a schema of this
 * process's own): three runtimes, each with its own connection pool as
 * three processes would have, fire an every-250-ms schedule; every fire
 * time from the first to the last has exactly one instance, started by
 * one of them (apply_schedule's compare-and-set under READ COMMITTED).
 * And runtimes in child processes killed with SIGKILL around fire times,
 * then a survivor: no fire lost or doubled. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"
#include "pg_util.h"
#include "test.h"

#define RUNTIMES 3
#define DEADLINE_MS 30000

static int orch_tick(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

static int64_t fires_named(duro_client *c, const char *id)
{
    duro_schedule_description *d = NULL;
    if (duro_client_schedule_describe(c, id, 0, 0, &d) != DURO_OK)
        return -1;
    int64_t n = d->schedules[0].fires;
    duro_schedule_description_free(d);
    return n;
}

static int64_t fires_of(duro_client *c)
{
    return fires_named(c, "every");
}

/* The URL of a schema of this process's own named prefix_<pid>. */
static void schema_url(const char *prefix, char *schema, char *url)
{
    snprintf(schema, 64, "%s_%ld", prefix, (long)getpid());
    snprintf(url, 4200, "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
}

TEST(several_runtimes_on_postgres_start_one_instance_per_fire_time)
{
    char schema[64], url[4200];
    schema_url("pgsched", schema, url);
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "Tick", NULL, orch_tick, NULL));
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.poll_interval_ms = 50;
    o.log_level = DURO_LOG_ERROR;
    duro_runtime *rt[RUNTIMES];
    for (int i = 0; i < RUNTIMES; i++) {
        CHECK_OK(duro_runtime_create(url, r, &o, &rt[i]));
        CHECK_OK(duro_runtime_start(rt[i]));
    }
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 250;
    spec.orchestration = "Tick";
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    CHECK_OK(duro_client_schedule_create(c, "every", &spec));
    WAIT_UNTIL(fires_of(c) >= 16, DEADLINE_MS);
    CHECK_OK(duro_client_schedule_pause(c, "every", NULL));
    uint64_t started = 0;
    for (int i = 0; i < RUNTIMES; i++) {
        CHECK_OK(duro_runtime_shutdown(rt[i], 10000));
        duro_metrics m;
        duro_runtime_metrics(rt[i], &m);
        started += m.schedule_fires;
        duro_runtime_destroy(rt[i]);
    }
    duro_schedule_description *d = NULL;
    CHECK_OK(duro_client_schedule_describe(c, "every", 0,
                                           DURO_SCHEDULE_FIRES_KEPT, &d));
    int64_t fires = d->schedules[0].fires;
    CHECK_EQ(started, (uint64_t)fires);
    CHECK_EQ(d->schedules[0].skips, 0);
    CHECK_EQ((int64_t)d->fire_count, fires);
    for (size_t i = 0; i < d->fire_count; i++) {
        CHECK_EQ(d->fires[i].action, DURO_SCHEDULE_START);
        if (i > 0)
            CHECK_EQ(d->fires[i - 1].time_ms - d->fires[i].time_ms, 250);
        duro_instance_info *info = NULL;
        CHECK_OK(duro_client_get_status(c, d->fires[i].instance_id, &info));
        duro_free(info);
    }
    duro_schedule_description_free(d);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    all.name = "Tick";
    duro_instance_list *list = NULL;
    CHECK_OK(duro_client_list(c, &all, &list));
    CHECK_EQ((int64_t)list->count, fires);
    duro_instance_list_free(list);
    duro_client_destroy(c);
    duro_registry_destroy(r);
    pg_test_drop_schema(schema);
}

/* The environment variable that makes this program a runtime on the
 * store it names instead of the tests (spawn_runtime). */
#define RUNTIME_URL_ENV "DURO_TEST_PG_SCHEDULE_RUNTIME_URL"

/* A runtime on `url` until the process is killed: the child's whole life. */
static int run_runtime(const char *url)
{
    duro_registry *reg = NULL;
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.poll_interval_ms = 50;
    o.log_level = DURO_LOG_ERROR;
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
 * program again (fork, then exec), so the child starts with one thread -
 * the parent's client has threads of its own (its LISTEN connection), and
 * a process forked from threads may not start new ones (POSIX; TSan
 * refuses it). */
static pid_t spawn_runtime(const char *url)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setenv(RUNTIME_URL_ENV, url, 1);
    execl("/proc/self/exe", "test_pg_schedules", (char *)NULL);
    _exit(4);
}

TEST(kill_9_around_fire_times_on_postgres_loses_and_doubles_no_fire)
{
    char schema[64], url[4200];
    schema_url("pgschedkill", schema, url);
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 100;
    spec.orchestration = "Tick";
    spec.overlap = DURO_OVERLAP_ALLOW_ALL;
    CHECK_OK(duro_client_schedule_create(c, "k", &spec));
    unsigned seed = (unsigned)time(NULL);
    fprintf(stderr, "  seed %u\n", seed);
    srand(seed);
    for (int round = 0; round < 5; round++) {
        int64_t before = fires_named(c, "k");
        pid_t pid = spawn_runtime(url);
        CHECK(pid > 0);
        WAIT_UNTIL(fires_named(c, "k") > before, DEADLINE_MS);
        /* the kill instant: the test's chaos, not a synchronisation */
        usleep((useconds_t)(rand() % 150) * 1000);
        CHECK_EQ(kill(pid, SIGKILL), 0);
        int st = 0;
        CHECK_EQ(waitpid(pid, &st, 0), pid);
    }
    /* A survivor makes the fires since the last kill, then some more. */
    int64_t before = fires_named(c, "k");
    pid_t survivor = spawn_runtime(url);
    WAIT_UNTIL(fires_named(c, "k") > before + 3, DEADLINE_MS);
    CHECK_OK(duro_client_schedule_pause(c, "k", NULL));
    kill(survivor, SIGKILL);
    waitpid(survivor, NULL, 0);
    duro_schedule_description *d = NULL;
    CHECK_OK(
        duro_client_schedule_describe(c, "k", 0, DURO_SCHEDULE_FIRES_KEPT, &d));
    int64_t fires = d->schedules[0].fires;
    CHECK_EQ(d->schedules[0].skips, 0);
    CHECK_INT(fires, <, DURO_SCHEDULE_FIRES_KEPT);
    CHECK_EQ((int64_t)d->fire_count, fires);
    for (size_t i = 0; i < d->fire_count; i++) {
        CHECK_EQ(d->fires[i].action, DURO_SCHEDULE_START);
        if (i > 0)
            CHECK_EQ(d->fires[i - 1].time_ms - d->fires[i].time_ms, 100);
    }
    duro_schedule_description_free(d);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    all.name = "Tick";
    duro_instance_list *list = NULL;
    CHECK_OK(duro_client_list(c, &all, &list));
    CHECK_EQ((int64_t)list->count, fires);
    duro_instance_list_free(list);
    duro_client_destroy(c);
    pg_test_drop_schema(schema);
}

int main(int argc, char **argv)
{
    const char *url = getenv(RUNTIME_URL_ENV);
    if (url != NULL)
        return run_runtime(url);
    static const test_case tests[] = {
        T(several_runtimes_on_postgres_start_one_instance_per_fire_time),
        T(kill_9_around_fire_times_on_postgres_loses_and_doubles_no_fire)};
    return test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
