/* test_pg_reconnect.c - what a runtime holds when its connections are lost
 * is released as soon as it reconnects, not when its locks expire.
 *
 * The mechanism behind a 30 s tail after server restarts: a turn's ack fails
 * because the server went away (connection lost, nothing committed), the
 * ack retried alone and the abandon that follows fail too (the server is
 * still down), and the instance stayed locked by a token only this runtime
 * knew until orchestration_lock_timeout_ms. Here it is made deterministic:
 * the runtime's role is refused new sessions (ALTER ROLE NOLOGIN) and its
 * sessions are ended while its ack waits for a row lock this test holds;
 * once the runtime has retried the failed ack (the runtime retries a
 * turn's ack in place while its lock may hold; a provider that lost an
 * abandon releases it at its next fetch, test_provider_postgres), the role
 * may log in again. The instance must then complete well within its 120 s
 * lock.
 * Main thread, plus the runtime's threads. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg_util.h"
#include "rt_util.h"

#define LOCK_MS 120000   /* the instance lock: never what releases it here */
#define SETUP_MS 30000   /* the ack waits, the abandon fails */
#define RELEASE_MS 20000 /* the instance completes once the role may log in */

static int orch_one(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* A count from the first column of `sql`'s one row, -1 on failure. */
static long count(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                 ? strtol(PQgetvalue(r, 0, 0), NULL, 10)
                 : -1;
    PQclear(r);
    return n;
}

TEST(a_turn_left_locked_by_a_lost_connection_is_released_on_reconnect)
{
    char schema[64], role[64], app[64], url[4300], role_url[4600], sql[1024];
    snprintf(schema, sizeof(schema), "pgreconn_%ld", (long)getpid());
    snprintf(role, sizeof(role), "duro_reconn_%ld", (long)getpid());
    snprintf(app, sizeof(app), "duro_reconn_%ld", (long)getpid());
    snprintf(url, sizeof(url), "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
    /* the runtime's ack may wait for the test's lock as long as it takes
     * (no lock_timeout), so that it is waiting when its session ends */
    snprintf(role_url, sizeof(role_url),
             "%s&user=%s&application_name=%s"
             "&options=-c%%20lock_timeout%%3D0",
             url, role, app);
    PGconn *admin = pg_test_connect();
    PGconn *locker = pg_test_connect();
    CHECK(admin != NULL && locker != NULL);

    /* the store, made by the test's role; the runtime's role may use it */
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    snprintf(sql, sizeof(sql),
             "DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN; "
             "GRANT USAGE ON SCHEMA \"%s\" TO %s; "
             "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
             "\"%s\" TO %s",
             role, role, schema, role, schema, role);
    CHECK(PG_COMMAND(admin, sql));
    CHECK_OK(duro_client_start(c, "x", "One", "done", NULL));
    /* its first turn's ack will wait for this lock on its instance row */
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM \"%s\".instances WHERE instance_id = 'x' "
             "FOR UPDATE",
             schema);
    CHECK(PG_COMMAND(locker, "BEGIN"));
    PQclear(PG_EXEC(locker, sql, PGRES_TUPLES_OK));

    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(duro_registry_add_orchestration(reg, "One", NULL, orch_one, NULL));
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.orchestration_concurrency = 1;
    o.worker_concurrency = 0;
    o.orchestration_lock_timeout_ms = LOCK_MS;
    o.poll_interval_ms = 50;
    o.log_level = DURO_LOG_DEBUG;
    o.log_fn = rt_log_sink;
    rt_log_reset();
    duro_runtime *rt = NULL;
    CHECK_OK(duro_runtime_create(role_url, reg, &o, &rt));
    CHECK_OK(duro_runtime_start(rt));
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock'",
             app);
    WAIT_UNTIL(count(admin, sql) == 1, SETUP_MS);

    /* the server goes away for this runtime: no new session, and its
     * sessions (the waiting ack's among them) ended */
    snprintf(sql, sizeof(sql), "ALTER ROLE %s NOLOGIN", role);
    CHECK(PG_COMMAND(admin, sql));
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    CHECK(count(admin, sql) >= 1);
    /* the ack failed, and so did its retries: x stays locked by a token
     * only this runtime knows */
    duro_metrics m;
    duro_runtime_metrics(rt, &m);
    uint64_t retries = m.storage_retries;
    WAIT_UNTIL((duro_runtime_metrics(rt, &m), m.storage_retries >= retries + 3),
               SETUP_MS);

    /* the server is back for it */
    CHECK(PG_COMMAND(locker, "ROLLBACK"));
    snprintf(sql, sizeof(sql), "ALTER ROLE %s LOGIN", role);
    CHECK(PG_COMMAND(admin, sql));
    int64_t t0 = test_now_ms();
    duro_instance_info *info = NULL;
    int rc = duro_client_wait(c, "x", RELEASE_MS, &info);
    CHECK_MSG(rc == DURO_OK && info->status == DURO_STATUS_COMPLETED,
              "x not completed %d ms after the runtime could reconnect (%s, "
              "%s): its lock was left to expire",
              RELEASE_MS, duro_errname(rc),
              info != NULL ? duro_status_name(info->status) : "no status");
    fprintf(stderr, "  x completed %lld ms after the runtime could reconnect\n",
            (long long)(test_now_ms() - t0));
    duro_free(info);

    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    duro_client_destroy(c);
    PQfinish(locker);
    if (getenv("DURO_TEST_KEEP") == NULL) {
        snprintf(sql, sizeof(sql),
                 "DROP SCHEMA \"%s\" CASCADE; DROP OWNED BY %s; DROP ROLE %s",
                 schema, role, role);
        CHECK(PG_COMMAND(admin, sql));
    }
    PQfinish(admin);
}

TEST_MAIN(T(a_turn_left_locked_by_a_lost_connection_is_released_on_reconnect))
