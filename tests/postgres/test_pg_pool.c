/* test_pg_pool.c - the PostgreSQL provider's connection pool is sized from
 * the runtime's concurrency: one connection per turn thread and worker slot
 * plus one for the activity manager, so no thread waits for another's
 * connection; a pool= in the URL overrides it, and a client keeps the
 * default. Counted on the server (pg_stat_activity) by application_name;
 * each provider also holds one listener connection outside its pool. A
 * pooled connection the server ended while it sat idle is reconnected when
 * taken, before a call uses it, and a reconnect that fails says why. The
 * schema is dropped when the test passes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"
#include "pg_util.h"
#include "test.h"

static char schema[64]; /* this run's; dropped at the end */

/* The test server's URL with this run's schema, an application_name of
 * its own and `extra` ("&pool=4" or ""). */
static const char *url_for(const char *app, const char *extra)
{
    static char url[4300];
    const char *base = pg_test_url();
    snprintf(url, sizeof(url), "%s%cschema=%s&application_name=%s%s", base,
             strchr(base, '?') ? '&' : '?', schema, app, extra);
    return url;
}

static long backends(PGconn *c, const char *app)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    PGresult *r = PG_EXEC(c, sql, PGRES_TUPLES_OK);
    long n = r != NULL ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

static int noop(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    (void)out;
    return DURO_OK;
}

/* Opens a runtime with 3 turn threads and 10 worker slots on `extra`, and
 * checks that `want` backends carry its application name once its listener
 * is up (the pool opens before create returns; the listener connects on a
 * thread of its own). */
static void check_runtime_pool(PGconn *c, const char *app, const char *extra,
                               long want)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(duro_registry_add_activity(reg, "Noop", noop, NULL));
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.orchestration_concurrency = 3;
    o.worker_concurrency = 10;
    duro_runtime *rt = NULL;
    CHECK_OK(duro_runtime_create(url_for(app, extra), reg, &o, &rt));
    WAIT_UNTIL(backends(c, app) == want, 10000);
    CHECK_EQ(backends(c, app), want);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    WAIT_UNTIL(backends(c, app) == 0, 10000);
    CHECK_EQ(backends(c, app), 0);
}

TEST(pool_sized_from_runtime_concurrency)
{
    snprintf(schema, sizeof(schema), "pgpool_%ld", (long)getpid());
    PGconn *c = pg_test_connect();
    if (c == NULL)
        return;
    /* 3 + 8 + 1 pooled (slots past 8 share them), and the listener */
    check_runtime_pool(c, "duro_pool_rt", "", 13);
    /* pool= wins */
    check_runtime_pool(c, "duro_pool_url", "&pool=4", 5);
    /* a client keeps the default pool of 5 */
    duro_client *cl = NULL;
    CHECK_OK(duro_client_create(url_for("duro_pool_client", ""), &cl));
    WAIT_UNTIL(backends(c, "duro_pool_client") == 6, 10000);
    CHECK_EQ(backends(c, "duro_pool_client"), 6);
    duro_client_destroy(cl);
    PQfinish(c);
    pg_test_drop_schema(schema);
}

/* Terminates every backend named `app` (the pool and the listener) and
 * waits until the server shows none of them; 1 when some were found. */
static int terminate_backends(PGconn *c, const char *app)
{
    char sql[1200];
    snprintf(sql, sizeof(sql),
             /* OFFSET 0: the filter runs before any termination */
             "SELECT COALESCE(string_agg(pid::text, ','), '') FROM "
             "(SELECT pid FROM pg_stat_activity WHERE application_name = "
             "'%s' AND pid <> pg_backend_pid() OFFSET 0) s "
             "WHERE pg_terminate_backend(pid)",
             app);
    PGresult *r = PG_EXEC(c, sql, PGRES_TUPLES_OK);
    char pids[1024] = "";
    if (r != NULL)
        snprintf(pids, sizeof(pids), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (pids[0] == '\0')
        return 0;
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE pid IN (%s)", pids);
    long left = -1;
    for (int i = 0; i < 1000 && left != 0; i++) {
        if (i > 0)
            usleep(10000);
        r = PG_EXEC(c, sql, PGRES_TUPLES_OK);
        left = r != NULL ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
        PQclear(r);
    }
    CHECK_EQ(left, 0);
    return 1;
}

static int list_once(duro_client *cl)
{
    duro_instance_list *l = NULL;
    int rc = duro_client_list(cl, NULL, &l);
    duro_instance_list_free(l);
    return rc;
}

typedef struct {
    duro_client *client;
    pthread_barrier_t *start;
    int rc;
    char msg[600];
} lister;

static void *list_in_thread(void *arg)
{
    lister *t = arg;
    pthread_barrier_wait(t->start);
    t->rc = list_once(t->client);
    snprintf(t->msg, sizeof(t->msg), "%s",
             t->rc != DURO_OK ? duro_errmsg() : "");
    return NULL;
}

/* The server ends every pooled connection of a client while they are idle
 * (pg_terminate_backend, as a restart or idle_session_timeout does): the
 * next calls, one after another and then 5 at once (so that every pooled
 * connection is taken), all succeed on their first try. Each used to fail
 * once per dead connection with "connection lost: server closed the
 * connection unexpectedly". */
TEST(connections_ended_while_idle_are_reconnected_before_use)
{
    snprintf(schema, sizeof(schema), "pgpool_idle_%ld", (long)getpid());
    PGconn *c = pg_test_connect();
    if (c == NULL)
        return;
    const char *app = "duro_pool_idle";
    duro_client *cl = NULL;
    CHECK_OK(duro_client_create(url_for(app, ""), &cl));
    CHECK_OK(list_once(cl));
    for (int round = 0; round < 2; round++) {
        CHECK(terminate_backends(c, app));
        for (int i = 0; i < 3; i++) {
            int rc = list_once(cl);
            CHECK_MSG(rc == DURO_OK, "round %d call %d: %s: %s", round, i,
                      duro_errname(rc), duro_errmsg());
        }
        CHECK(terminate_backends(c, app));
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 5);
        lister t[5];
        pthread_t th[5];
        for (int i = 0; i < 5; i++) {
            t[i] = (lister){.client = cl, .start = &start, .rc = -1};
            CHECK_EQ(pthread_create(&th[i], NULL, list_in_thread, &t[i]), 0);
        }
        for (int i = 0; i < 5; i++) {
            pthread_join(th[i], NULL);
            CHECK_MSG(t[i].rc == DURO_OK, "round %d thread %d: %s: %s", round,
                      i, duro_errname(t[i].rc), t[i].msg);
        }
        pthread_barrier_destroy(&start);
    }
    duro_client_destroy(cl);
    PQfinish(c);
    pg_test_drop_schema(schema);
}

/* A reconnect that fails names its own reason, not the failure that broke
 * the connection, and never the password: a role that may no longer log
 * in (ALTER ROLE NOLOGIN, deterministic on a shared server) has its
 * sessions ended; every call then says "cannot reconnect ... not permitted
 * to log in" (it used to say "server closed the connection unexpectedly"
 * through the whole outage), and the calls succeed again once it may. */
TEST(a_failed_reconnect_names_its_reason)
{
    snprintf(schema, sizeof(schema), "pgpool_reconn_%ld", (long)getpid());
    PGconn *c = pg_test_connect();
    if (c == NULL)
        return;
    /* the store, made by the test's own role */
    duro_client *owner = NULL;
    CHECK_OK(duro_client_create(url_for("duro_pool_owner", ""), &owner));
    duro_client_destroy(owner);
    char role[64], sql[1024];
    snprintf(role, sizeof(role), "duro_pool_role_%ld", (long)getpid());
    snprintf(sql, sizeof(sql),
             "DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN PASSWORD "
             "'Sekrit_pw_42'; GRANT USAGE ON SCHEMA \"%s\" TO %s; "
             "GRANT SELECT ON ALL TABLES IN SCHEMA \"%s\" TO %s",
             role, role, schema, role, schema, role);
    if (!PG_COMMAND(c, sql)) {
        PQfinish(c);
        return;
    }
    const char *app = "duro_pool_reconn";
    char extra[256];
    snprintf(extra, sizeof(extra), "&user=%s&password=Sekrit_pw_42", role);
    duro_client *cl = NULL;
    CHECK_OK(duro_client_create(url_for(app, extra), &cl));
    CHECK_OK(list_once(cl));
    snprintf(sql, sizeof(sql), "ALTER ROLE %s NOLOGIN", role);
    CHECK(PG_COMMAND(c, sql));
    CHECK(terminate_backends(c, app));
    for (int i = 0; i < 3; i++) {
        int rc = list_once(cl);
        const char *msg = duro_errmsg();
        CHECK_MSG(rc == DURO_STORAGE, "call %d: %s", i, duro_errname(rc));
        CHECK_MSG(strstr(msg, "cannot reconnect to ") != NULL &&
                      strstr(msg, "not permitted to log in") != NULL,
                  "call %d: %s", i, msg);
        CHECK_MSG(strstr(msg, "Sekrit_pw_42") == NULL, "call %d: %s", i, msg);
        CHECK_MSG(strchr(msg, '\n') == NULL, "call %d: %s", i, msg);
    }
    snprintf(sql, sizeof(sql), "ALTER ROLE %s LOGIN", role);
    CHECK(PG_COMMAND(c, sql));
    int rc = -1;
    for (int i = 0; i < 1000 && rc != DURO_OK; i++) {
        if (i > 0)
            usleep(10000);
        rc = list_once(cl);
    }
    CHECK_MSG(rc == DURO_OK, "%s: %s", duro_errname(rc), duro_errmsg());
    duro_client_destroy(cl);
    pg_test_drop_schema(schema);
    snprintf(sql, sizeof(sql), "DROP OWNED BY %s; DROP ROLE %s", role, role);
    CHECK(PG_COMMAND(c, sql));
    PQfinish(c);
}

/* A URL that names no application gets duro's fallback name: the
 * pooled sessions of a client on this run's schema (their last statement
 * set its search_path) show as "duro" in pg_stat_activity. */
TEST(sessions_are_named_duro_unless_the_url_names_them)
{
    snprintf(schema, sizeof(schema), "pgname_%ld", (long)getpid());
    PGconn *c = pg_test_connect();
    if (c == NULL)
        return;
    const char *base = pg_test_url();
    char url[4300];
    snprintf(url, sizeof(url), "%s%cschema=%s", base,
             strchr(base, '?') ? '&' : '?', schema);
    duro_client *cl = NULL;
    CHECK_OK(duro_client_create(url, &cl));
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name "
             "= 'duro' AND query LIKE 'SET search_path TO \"%s\"%%'",
             schema);
    long named = 0;
    for (int64_t end = test_now_ms() + 10000;
         named < 4 && test_now_ms() < end;) {
        PGresult *r = PG_EXEC(c, sql, PGRES_TUPLES_OK);
        named = r != NULL ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
        PQclear(r);
        if (named < 4)
            usleep(10000);
    }
    /* five pooled, one of which ran the schema check after its SET */
    CHECK_INT(named, >=, 4);
    duro_client_destroy(cl);
    PQfinish(c);
    pg_test_drop_schema(schema);
}

TEST_MAIN(T(pool_sized_from_runtime_concurrency),
          T(connections_ended_while_idle_are_reconnected_before_use),
          T(a_failed_reconnect_names_its_reason),
          T(sessions_are_named_duro_unless_the_url_names_them))
