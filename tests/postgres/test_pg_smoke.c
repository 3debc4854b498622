/* test_pg_smoke.c - proves the PostgreSQL test infrastructure end to end,
 * without the provider: a real server (the fixture's throwaway cluster or
 * DURO_TEST_PG_URL) answers, a schema can be made and dropped, and the
 * claim pattern the provider's queues use - FOR UPDATE SKIP LOCKED - lets
 * two connections on two threads claim 1,000 rows with none claimed twice
 * and none left. Also a worked example of libpq: parameters, results,
 * transactions, SQLSTATEs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "pg_util.h"
#include "test.h"

#define ROWS 1000
#define BATCH 7

/* A schema of this process's own, so runs against a shared server
 * (DURO_TEST_PG_URL) do not collide. */
static char schema[64];

static const char *schema_name(void)
{
    if (schema[0] == '\0')
        snprintf(schema, sizeof(schema), "duro_smoke_%ld", (long)getpid());
    return schema;
}

/* Creates the schema afresh with `items`: ROWS unclaimed rows. */
static int make_items(PGconn *conn)
{
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "DROP SCHEMA IF EXISTS %s CASCADE;"
             "CREATE SCHEMA %s;"
             "CREATE TABLE %s.items (id int PRIMARY KEY,"
             " claimed_by int, claims int NOT NULL DEFAULT 0);"
             "INSERT INTO %s.items (id)"
             " SELECT g FROM generate_series(1, %d) g",
             schema_name(), schema_name(), schema_name(), schema_name(), ROWS);
    return PG_COMMAND(conn, sql);
}

static void drop_schema(PGconn *conn)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE",
             schema_name());
    PG_COMMAND(conn, sql);
}

/* One integer from a one-row, one-column result; -1 after a failure. */
static long long query_int(PGconn *conn, const char *sql)
{
    PGresult *res = PG_EXEC(conn, sql, PGRES_TUPLES_OK);
    if (res == NULL)
        return -1;
    long long v = -1;
    if (PQntuples(res) == 1 && PQnfields(res) == 1 && !PQgetisnull(res, 0, 0))
        v = atoll(PQgetvalue(res, 0, 0));
    else
        test_fail(__FILE__, __LINE__, "%s: %d rows of %d columns", sql,
                  PQntuples(res), PQnfields(res));
    PQclear(res);
    return v;
}

TEST(server_answers)
{
    CHECK_MSG(PQisthreadsafe(), "libpq is not built thread-safe");
    PGconn *conn = pg_test_connect();
    PGresult *res = PG_EXEC(conn, "SELECT version()", PGRES_TUPLES_OK);
    CHECK_EQ(PQntuples(res), 1);
    const char *version = PQgetvalue(res, 0, 0);
    CHECK_MSG(strncmp(version, "PostgreSQL ", 11) == 0,
              "SELECT version() said \"%s\"", version);
    fprintf(stderr, "  server: %s\n", version);
    PQclear(res);
    /* SKIP LOCKED is 9.5; the provider will rely on nothing newer than 12. */
    CHECK_INT(PQserverVersion(conn), >=, 120000);
    CHECK_INT(query_int(conn, "SELECT current_setting('server_version_num')"
                              "::int"),
              ==, PQserverVersion(conn));
    PQfinish(conn);
}

TEST(schema_round_trip)
{
    PGconn *conn = pg_test_connect();
    CHECK(make_items(conn));
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s.items", schema_name());
    CHECK_EQ(query_int(conn, sql), ROWS);

    /* Parameters travel as text, apart from the SQL: no quoting by hand. */
    snprintf(sql, sizeof(sql),
             "UPDATE %s.items SET claimed_by = $1 WHERE id = $2",
             schema_name());
    const char *params[2] = {"42", "17"};
    PGresult *res = PQexecParams(conn, sql, 2, NULL, params, NULL, NULL, 0);
    CHECK_MSG(PQresultStatus(res) == PGRES_COMMAND_OK, "%s: %s", sql,
              PQerrorMessage(conn));
    CHECK_STR(PQcmdTuples(res), "1");
    PQclear(res);
    snprintf(sql, sizeof(sql), "SELECT claimed_by FROM %s.items WHERE id = 17",
             schema_name());
    CHECK_EQ(query_int(conn, sql), 42);

    drop_schema(conn);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_namespace WHERE nspname = '%s'",
             schema_name());
    CHECK_EQ(query_int(conn, sql), 0);
    PQfinish(conn);
}

/* Locks up to `limit` unclaimed rows in the open transaction of `conn`,
 * skipping rows other transactions hold, and stores their ids in ids[]
 * (ascending). Returns how many, or -1 after a failure. */
static int lock_unclaimed(PGconn *conn, int limit, int *ids)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT id FROM %s.items WHERE claimed_by IS NULL"
             " ORDER BY id LIMIT %d FOR UPDATE SKIP LOCKED",
             schema_name(), limit);
    PGresult *res = PG_EXEC(conn, sql, PGRES_TUPLES_OK);
    if (res == NULL)
        return -1;
    int n = PQntuples(res);
    for (int i = 0; i < n; i++)
        ids[i] = atoi(PQgetvalue(res, i, 0));
    PQclear(res);
    return n;
}

/* Two open transactions: the second skips the rows the first has locked
 * instead of waiting for them (the race the claim pattern is for, made to
 * happen rather than hoped for), while a plain NOWAIT lock on those rows
 * fails with lock_not_available. */
TEST(skip_locked_skips_held_rows)
{
    PGconn *a = pg_test_connect();
    PGconn *b = pg_test_connect();
    CHECK(make_items(a));
    CHECK(PG_COMMAND(a, "BEGIN"));
    CHECK(PG_COMMAND(b, "BEGIN"));
    /* Were SKIP LOCKED ignored, b would wait on a's locks: fail instead. */
    CHECK(PG_COMMAND(b, "SET LOCAL lock_timeout = '10s'"));

    int ids_a[10], ids_b[10];
    CHECK_EQ(lock_unclaimed(a, 10, ids_a), 10);
    CHECK_EQ(lock_unclaimed(b, 10, ids_b), 10);
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(ids_a[i], 1 + i);
        CHECK_EQ(ids_b[i], 11 + i);
    }

    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT id FROM %s.items WHERE id = 1 FOR UPDATE NOWAIT",
             schema_name());
    CHECK(PG_COMMAND(b, "SAVEPOINT probe"));
    PGresult *res = PQexec(b, sql);
    CHECK_EQ(PQresultStatus(res), PGRES_FATAL_ERROR);
    CHECK_STR(PQresultErrorField(res, PG_DIAG_SQLSTATE), "55P03");
    PQclear(res);
    CHECK(PG_COMMAND(b, "ROLLBACK TO SAVEPOINT probe"));

    CHECK(PG_COMMAND(a, "COMMIT"));
    CHECK(PG_COMMAND(b, "COMMIT"));
    drop_schema(a);
    PQfinish(a);
    PQfinish(b);
}

typedef struct claimer {
    int id;                       /* written to claimed_by */
    struct claimer *other;        /* the other thread */
    _Atomic int batches;          /* batches this thread has claimed */
    int rows;                     /* rows this thread has claimed */
    unsigned char seen[ROWS + 1]; /* seen[id]: times this thread claimed id */
} claimer;

/* Claims batches in single statements, as the provider will, until no
 * unclaimed row is left. After its first batch it waits until the other
 * thread has claimed one too, so the two really do claim side by side. */
static void *claim_loop(void *arg)
{
    claimer *c = arg;
    PGconn *conn = pg_test_connect();
    if (conn == NULL)
        return NULL;
    char sql[512], remaining[256], me[16];
    snprintf(sql, sizeof(sql),
             "WITH next AS (SELECT id FROM %s.items"
             " WHERE claimed_by IS NULL ORDER BY id LIMIT %d"
             " FOR UPDATE SKIP LOCKED)"
             " UPDATE %s.items i SET claimed_by = $1, claims = i.claims + 1"
             " FROM next WHERE i.id = next.id RETURNING i.id",
             schema_name(), BATCH, schema_name());
    snprintf(remaining, sizeof(remaining),
             "SELECT count(*) FROM %s.items WHERE claimed_by IS NULL",
             schema_name());
    snprintf(me, sizeof(me), "%d", c->id);
    const char *params[1] = {me};
    int64_t deadline = test_now_ms() + 60000;
    while (!test_failed()) {
        if (test_now_ms() > deadline) {
            test_fail(__FILE__, __LINE__, "claimer %d: not done after 60 s",
                      c->id);
            break;
        }
        PGresult *res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            test_fail(__FILE__, __LINE__, "claimer %d: %s", c->id,
                      PQerrorMessage(conn));
            PQclear(res);
            break;
        }
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) {
            int id = atoi(PQgetvalue(res, i, 0));
            if (id < 1 || id > ROWS)
                test_fail(__FILE__, __LINE__, "claimed id %d", id);
            else
                c->seen[id]++;
        }
        PQclear(res);
        c->rows += n;
        if (n > 0 && atomic_fetch_add(&c->batches, 1) == 0) {
            int64_t wait_deadline = test_now_ms() + 10000;
            while (atomic_load(&c->other->batches) == 0 &&
                   test_now_ms() < wait_deadline)
                test_sleep_ms(1);
        }
        /* Nothing claimable: done when nothing is unclaimed; otherwise the
         * other thread holds the rest and is about to commit them. */
        if (n == 0 && query_int(conn, remaining) == 0)
            break;
    }
    PQfinish(conn);
    return NULL;
}

TEST(skip_locked_two_threads_claim_each_row_once)
{
    PGconn *conn = pg_test_connect();
    CHECK(make_items(conn));
    static claimer claimers[2];
    memset(claimers, 0, sizeof(claimers));
    claimers[0].id = 1;
    claimers[1].id = 2;
    claimers[0].other = &claimers[1];
    claimers[1].other = &claimers[0];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&threads[i], NULL, claim_loop, &claimers[i]),
                 0);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    CHECK(!test_failed());

    /* Both claimed, side by side; together every row exactly once. */
    CHECK_INT(atomic_load(&claimers[0].batches), >, 0);
    CHECK_INT(atomic_load(&claimers[1].batches), >, 0);
    CHECK_EQ(claimers[0].rows + claimers[1].rows, ROWS);
    for (int id = 1; id <= ROWS; id++)
        CHECK_MSG(claimers[0].seen[id] + claimers[1].seen[id] == 1,
                  "row %d claimed %d times by thread 1 and %d by thread 2", id,
                  claimers[0].seen[id], claimers[1].seen[id]);
    fprintf(stderr, "  thread 1: %d rows in %d batches, thread 2: %d in %d\n",
            claimers[0].rows, atomic_load(&claimers[0].batches),
            claimers[1].rows, atomic_load(&claimers[1].batches));

    /* The table agrees: each row once, by the thread that says so. */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM %s.items WHERE claims <> 1"
             " OR claimed_by IS NULL",
             schema_name());
    CHECK_EQ(query_int(conn, sql), 0);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM %s.items WHERE claimed_by = 1",
             schema_name());
    CHECK_EQ(query_int(conn, sql), claimers[0].rows);
    drop_schema(conn);
    PQfinish(conn);
}

TEST_MAIN(T(server_answers), T(schema_round_trip),
          T(skip_locked_skips_held_rows),
          T(skip_locked_two_threads_claim_each_row_once))
