/* test_pg_pool.c - the PostgreSQL provider's connection pool is sized from
 * the runtime's concurrency: one connection per turn thread and worker slot
 * plus one for the activity manager, so no thread waits for another's
 * connection; a pool= in the URL overrides it, and a client keeps the
 * default. Counted on the server (pg_stat_activity) by application_name;
 * each provider also holds one listener connection outside its pool. The
 * schema is dropped when the test passes. */
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
    /* 3 + 10 + 1 pooled, and the listener */
    check_runtime_pool(c, "duro_pool_rt", "", 15);
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

TEST_MAIN(T(pool_sized_from_runtime_concurrency))
