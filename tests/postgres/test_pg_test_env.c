/* test_pg_test_env.c - duro_test_env on a PostgreSQL store (a schema of
 * this process's own): a 30-day timer and hours of retry backoff complete
 * within a real deadline because the wait skips to next_due, which the
 * PostgreSQL provider answers (provider version 12), through its counted
 * wake-ups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"
#include "pg_util.h"
#include "test.h"

#define HOUR_MS (3600LL * 1000)
#define DAY_MS (24 * HOUR_MS)
#define DEADLINE_MS 30000 /* real time, for what takes milliseconds */

static int orch_month(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    int64_t began = duro_now(o);
    if (duro_await(o, duro_timer(o, 30 * DAY_MS)) != DURO_OK)
        return duro_fail(out, "timer failed");
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 3;
    p.initial_delay_ms = 2 * HOUR_MS;
    p.max_delay_ms = 0;
    duro_task *t = duro_call_activity_with_retry(o, "Flaky", NULL, &p);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out,
                   duro_sprintf(o, "%lld", (long long)(duro_now(o) - began)));
}

static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    if (duro_activity_attempt(a) < 3)
        return duro_fail(out, "not yet");
    return duro_ok(out, "ok");
}

TEST(a_month_and_hours_of_backoff_skip_on_postgres)
{
    char schema[64], url[4200];
    snprintf(schema, sizeof(schema), "pgtestenv_%ld", (long)getpid());
    snprintf(url, sizeof(url), "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Month", NULL, orch_month, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Flaky", act_flaky, NULL));
    duro_test_env_options o;
    duro_test_env_options_init(&o);
    o.url = url;
    duro_test_env *env = NULL;
    CHECK_OK(duro_test_env_create(r, &o, &env));
    duro_registry_destroy(r);
    CHECK_OK(duro_test_env_start(env));
    CHECK_OK(
        duro_client_start(duro_test_env_client(env), "m", "Month", NULL, NULL));
    duro_instance_info *i = NULL;
    CHECK_OK(duro_test_env_wait(env, "m", DEADLINE_MS, &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    /* 30 days, then 2 h and 4 h of backoff */
    CHECK_INT(atoll(i->output), >=, 30 * DAY_MS + 6 * HOUR_MS);
    duro_free(i);
    CHECK_INT(duro_test_env_skipped_ms(env), >=,
              30 * DAY_MS + 6 * HOUR_MS - DEADLINE_MS);
    duro_test_env_destroy(env);
    pg_test_drop_schema(schema);
}

TEST_MAIN(T(a_month_and_hours_of_backoff_skip_on_postgres))
