/* floor_bench.c - the least SQL a durable chain needs, as a floor for
 * orch_bench's chain workload on the same store, machine and batch size.
 *
 * floor_bench [--url sqlite:PATH|postgresql://...] [--n N] [--steps S]
 *             [--batch B] [--threads T]
 *
 * The model: N instances of S sequential activities (defaults 1000, 5 and
 * 16: orch_bench's chain and SQLite's turn_batch, the runtime's default
 * orchestration_batch there; PostgreSQL's is 64, --batch 64). Each
 * instance, its history and its messages are rows in four tables (instances,
 * history, orch_queue, work_queue); nothing else is kept. One thread
 * alternates between two kinds of transaction until every instance is done:
 *  turn    takes up to B messages from orch_queue (one statement that
 *          deletes them and returns them: a start, or an activity's
 *          completion), and for each appends the history rows the turn
 *          decides (the message's event, then the next activity's
 *          scheduling or the instance's completion), enqueues the next
 *          activity in work_queue or marks the instance completed;
 *  work    takes up to B items from work_queue the same way and, for each
 *          (a no-op activity), appends its completion message to orch_queue.
 * Starting the N instances (the instance row, its start event and its
 * start message, B per transaction) is outside the clock, as it is in
 * orch_bench. Every transaction commits durably as the store is configured
 * for duro: SQLite in WAL mode with synchronous=NORMAL (duro's setting),
 * PostgreSQL with the server's synchronous_commit. On PostgreSQL the
 * statements are set-based (one per table per transaction, arrays
 * unnested, as duro's provider batches) and pipelined (two round trips per
 * transaction), and T connections (--threads, default 1) run the loop
 * side by side, their batches kept apart by SKIP LOCKED: one connection
 * waits for every commit's WAL flush alone, several share them (duro's
 * runtime holds 12). SQLite has one writer: one thread. No
 * locks held across transactions, no leases, no wake-ups, no JSON: this is
 * what a durable chain cannot do without, not a competing runtime.
 *
 * Prints one JSON object: chains_per_s = N / wall, transactions and, on
 * SQLite, pages_written (the connection's SQLITE_DBSTATUS_CACHE_WRITE: pages
 * written to the WAL) per chain. bench/RESULTS.md compares it with
 * orch_bench --workload chain. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef DURO_BENCH_POSTGRES
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#endif

static long n_chains = 1000;
static int steps = 5;
static int batch = 16;
static int threads = 1; /* PostgreSQL: connections */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "floor_bench: %s: %s\n", what, why);
    exit(1);
}

/* An event's text: about the size of duro's small history rows. */
static void event_text(char *buf, size_t cap, const char *kind, long inst,
                       int step)
{
    snprintf(buf, cap,
             "{\"kind\":\"%s\",\"instance\":\"chain-%ld\",\"step\":%d,"
             "\"name\":\"Noop\",\"input\":null}",
             kind, inst, step);
}

/* ------------------------------------------------------------------------
 * SQLite */

enum {
    S_BEGIN,
    S_COMMIT,
    S_TAKE_ORCH,
    S_TAKE_WORK,
    S_HISTORY,
    S_ENQ_WORK,
    S_ENQ_ORCH,
    S_DONE,
    S_INSTANCE,
    S_COUNT
};

static const char *const sqlite_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_TAKE_ORCH] = "DELETE FROM orch_queue WHERE id IN (SELECT id FROM "
                    "orch_queue ORDER BY id LIMIT ?1) RETURNING instance, "
                    "step",
    [S_TAKE_WORK] = "DELETE FROM work_queue WHERE id IN (SELECT id FROM "
                    "work_queue ORDER BY id LIMIT ?1) RETURNING instance, "
                    "step",
    [S_HISTORY] = "INSERT INTO history (instance, seq, payload) VALUES "
                  "(?1, ?2, ?3)",
    [S_ENQ_WORK] = "INSERT INTO work_queue (instance, step) VALUES (?1, ?2)",
    [S_ENQ_ORCH] = "INSERT INTO orch_queue (instance, step) VALUES (?1, ?2)",
    [S_DONE] = "UPDATE instances SET status = 1, output = ?2 WHERE id = ?1",
    [S_INSTANCE] = "INSERT INTO instances (id, status) VALUES (?1, 0)",
};

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *s[S_COUNT];
} lite;

static void lite_exec(lite *l, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(l->db, sql, NULL, NULL, &msg) != SQLITE_OK)
        die(sql, msg ? msg : "?");
}

static void lite_step(lite *l, int id)
{
    int rc = sqlite3_step(l->s[id]);
    if (rc != SQLITE_DONE)
        die(sqlite_sql[id], sqlite3_errmsg(l->db));
    sqlite3_reset(l->s[id]);
}

static void lite_history(lite *l, long inst, int seq, const char *kind,
                         int step)
{
    char ev[160];
    event_text(ev, sizeof(ev), kind, inst, step);
    sqlite3_stmt *s = l->s[S_HISTORY];
    sqlite3_bind_int64(s, 1, inst);
    sqlite3_bind_int(s, 2, seq);
    sqlite3_bind_text(s, 3, ev, -1, SQLITE_TRANSIENT);
    lite_step(l, S_HISTORY);
}

static void lite_enqueue(lite *l, int id, long inst, int step)
{
    sqlite3_bind_int64(l->s[id], 1, inst);
    sqlite3_bind_int(l->s[id], 2, step);
    lite_step(l, id);
}

/* Takes up to `batch` rows with statement `id` into inst[]/step[]. */
static int lite_take(lite *l, int id, long *inst, int *step)
{
    sqlite3_stmt *s = l->s[id];
    int n = 0, rc;
    sqlite3_bind_int(s, 1, batch);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        inst[n] = (long)sqlite3_column_int64(s, 0);
        step[n] = sqlite3_column_int(s, 1);
        n++;
    }
    if (rc != SQLITE_DONE)
        die(sqlite_sql[id], sqlite3_errmsg(l->db));
    sqlite3_reset(s);
    return n;
}

static void lite_open(lite *l, const char *path)
{
    char wal[4096];
    unlink(path);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", path);
    unlink(wal);
    if (sqlite3_open(path, &l->db) != SQLITE_OK)
        die(path, sqlite3_errmsg(l->db));
    lite_exec(l, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                 "CREATE TABLE instances (id INTEGER PRIMARY KEY, status "
                 "INTEGER NOT NULL, output TEXT);"
                 "CREATE TABLE history (instance INTEGER NOT NULL, seq "
                 "INTEGER NOT NULL, payload TEXT NOT NULL, PRIMARY KEY "
                 "(instance, seq)) WITHOUT ROWID;"
                 "CREATE TABLE orch_queue (id INTEGER PRIMARY KEY, instance "
                 "INTEGER NOT NULL, step INTEGER NOT NULL);"
                 "CREATE TABLE work_queue (id INTEGER PRIMARY KEY, instance "
                 "INTEGER NOT NULL, step INTEGER NOT NULL);");
    for (int i = 0; i < S_COUNT; i++)
        if (sqlite3_prepare_v2(l->db, sqlite_sql[i], -1, &l->s[i], NULL) !=
            SQLITE_OK)
            die(sqlite_sql[i], sqlite3_errmsg(l->db));
}

static void run_sqlite(const char *path)
{
    lite l;
    lite_open(&l, path);
    for (long i = 0; i < n_chains; i += batch) {
        lite_step(&l, S_BEGIN);
        for (long k = i; k < i + batch && k < n_chains; k++) {
            sqlite3_bind_int64(l.s[S_INSTANCE], 1, k);
            lite_step(&l, S_INSTANCE);
            lite_history(&l, k, 0, "started", 0);
            lite_enqueue(&l, S_ENQ_ORCH, k, 0);
        }
        lite_step(&l, S_COMMIT);
    }
    int cur, hi;
    sqlite3_db_status(l.db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 1);
    long inst[1024];
    int step[1024];
    long done = 0, txns = 0;
    int64_t t0 = mono_ns();
    while (done < n_chains) {
        lite_step(&l, S_BEGIN);
        int n = lite_take(&l, S_TAKE_ORCH, inst, step);
        for (int i = 0; i < n; i++) {
            /* history: [0] started, then per step k (1-based): 2k-1
             * scheduled, 2k completed; the end after the last */
            int s = step[i];
            if (s > 0)
                lite_history(&l, inst[i], 2 * s, "completed", s);
            if (s < steps) {
                lite_history(&l, inst[i], 2 * s + 1, "scheduled", s + 1);
                lite_enqueue(&l, S_ENQ_WORK, inst[i], s + 1);
            } else {
                lite_history(&l, inst[i], 2 * s + 1, "finished", s);
                sqlite3_bind_int64(l.s[S_DONE], 1, inst[i]);
                sqlite3_bind_text(l.s[S_DONE], 2, "\"done\"", -1,
                                  SQLITE_STATIC);
                lite_step(&l, S_DONE);
                done++;
            }
        }
        lite_step(&l, S_COMMIT);
        txns++;
        lite_step(&l, S_BEGIN);
        n = lite_take(&l, S_TAKE_WORK, inst, step);
        for (int i = 0; i < n; i++)
            lite_enqueue(&l, S_ENQ_ORCH, inst[i], step[i]);
        lite_step(&l, S_COMMIT);
        txns++;
    }
    double wall_ms = (double)(mono_ns() - t0) / 1e6;
    sqlite3_db_status(l.db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 0);
    printf("{\"bench\":\"floor\",\"store\":\"sqlite\",\"n\":%ld,\"steps\":%d,"
           "\"batch\":%d,\"wall_ms\":%.1f,\"chains_per_s\":%.0f,"
           "\"transactions_per_chain\":%.2f,\"pages_written_per_chain\":%.2f}"
           "\n",
           n_chains, steps, batch, wall_ms, n_chains / (wall_ms / 1e3),
           (double)txns / n_chains, (double)cur / n_chains);
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(l.s[i]);
    sqlite3_close(l.db);
}

/* ------------------------------------------------------------------------
 * PostgreSQL: set-based, as duro's PostgreSQL provider batches: per
 * transaction one statement takes the batch, then one statement per table
 * writes all its rows (arrays unnested), the writes and COMMIT sent in one
 * pipeline - two round trips per transaction. In a schema of its own,
 * dropped at the end. */

#ifdef DURO_BENCH_POSTGRES
enum {
    P_BEGIN,
    P_COMMIT,
    P_TAKE_ORCH,
    P_TAKE_WORK,
    P_HISTORY,
    P_ENQ_WORK,
    P_ENQ_ORCH,
    P_DONE,
    P_INSTANCE,
    P_COUNT
};

static const char *const pg_sql[P_COUNT] = {
    [P_BEGIN] = "BEGIN",
    [P_COMMIT] = "COMMIT",
    [P_TAKE_ORCH] = "DELETE FROM orch_queue WHERE id IN (SELECT id FROM "
                    "orch_queue ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) "
                    "RETURNING instance, step",
    [P_TAKE_WORK] = "DELETE FROM work_queue WHERE id IN (SELECT id FROM "
                    "work_queue ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) "
                    "RETURNING instance, step",
    [P_HISTORY] = "INSERT INTO history (instance, seq, payload) SELECT * FROM "
                  "unnest($1::bigint[], $2::int[], $3::text[])",
    [P_ENQ_WORK] = "INSERT INTO work_queue (instance, step) SELECT * FROM "
                   "unnest($1::bigint[], $2::int[])",
    [P_ENQ_ORCH] = "INSERT INTO orch_queue (instance, step) SELECT * FROM "
                   "unnest($1::bigint[], $2::int[])",
    [P_DONE] = "UPDATE instances SET status = 1, output = '\"done\"' WHERE id "
               "= ANY($1::bigint[])",
    [P_INSTANCE] = "INSERT INTO instances (id, status) SELECT i, 0 FROM "
                   "unnest($1::bigint[]) AS i",
};

static _Thread_local PGconn *pg;
static char pg_url[4096];
static char pg_schema[64];
static _Atomic long pg_done;
static _Atomic long pg_txns;

/* An array literal under construction: '{a,b,...}'. */
typedef struct {
    char *buf;
    size_t len, cap;
    int count;
} arr;

static void arr_put(arr *a, const char *s, size_t n)
{
    if (a->len + n + 2 > a->cap) {
        a->cap = (a->len + n + 2) * 2;
        a->buf = realloc(a->buf, a->cap);
        if (!a->buf)
            die("realloc", "out of memory");
    }
    memcpy(a->buf + a->len, s, n);
    a->len += n;
    a->buf[a->len] = '\0';
}

static void arr_begin(arr *a)
{
    a->len = 0;
    a->count = 0;
    arr_put(a, "{", 1);
}

static void arr_sep(arr *a)
{
    if (a->count++ > 0)
        arr_put(a, ",", 1);
}

static void arr_long(arr *a, long v)
{
    char b[24];
    arr_sep(a);
    arr_put(a, b, (size_t)snprintf(b, sizeof(b), "%ld", v));
}

/* A text element, quoted, with " and \ escaped. */
static void arr_text(arr *a, const char *s)
{
    arr_sep(a);
    arr_put(a, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            arr_put(a, "\\", 1);
        arr_put(a, s, 1);
    }
    arr_put(a, "\"", 1);
}

static const char *arr_end(arr *a)
{
    arr_put(a, "}", 1);
    return a->buf;
}

typedef struct {
    int id;
    int nparams;
    const char *params[3];
} pg_call;

/* Sends the calls in one pipeline with one sync; returns the result of
 * call `keep` (or NULL) and dies on any failure. */
static PGresult *pg_pipeline(const pg_call *calls, int count, int keep)
{
    PGresult *kept = NULL;
    for (int i = 0; i < count; i++) {
        char name[8];
        snprintf(name, sizeof(name), "p%d", calls[i].id);
        if (!PQsendQueryPrepared(pg, name, calls[i].nparams, calls[i].params,
                                 NULL, NULL, 0))
            die(pg_sql[calls[i].id], PQerrorMessage(pg));
    }
    if (!PQpipelineSync(pg))
        die("sync", PQerrorMessage(pg));
    for (int i = 0; i < count; i++) {
        PGresult *r = PQgetResult(pg);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            die(pg_sql[calls[i].id], PQerrorMessage(pg));
        if (i == keep)
            kept = r;
        else
            PQclear(r);
        if ((r = PQgetResult(pg)) != NULL) /* the end of this query's */
            die(pg_sql[calls[i].id], "more than one result");
    }
    PGresult *r = PQgetResult(pg);
    if (PQresultStatus(r) != PGRES_PIPELINE_SYNC)
        die("sync", PQerrorMessage(pg));
    PQclear(r);
    return kept;
}

static void pg_exec(const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die(sql, PQerrorMessage(pg));
    PQclear(r);
}

/* BEGIN and take up to `batch` rows with statement `id`: one round trip. */
static int pg_take(int id, long *inst, int *step)
{
    char b[24];
    snprintf(b, sizeof(b), "%d", batch);
    pg_call calls[2] = {{P_BEGIN, 0, {NULL}}, {id, 1, {b}}};
    PGresult *r = pg_pipeline(calls, 2, 1);
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        inst[i] = atol(PQgetvalue(r, i, 0));
        step[i] = atoi(PQgetvalue(r, i, 1));
    }
    PQclear(r);
    return n;
}

static void pg_connect(void)
{
    char sql[256];
    pg = PQconnectdb(pg_url);
    if (PQstatus(pg) != CONNECTION_OK)
        die("connect", PQerrorMessage(pg));
    snprintf(sql, sizeof(sql),
             "SET client_min_messages = warning; SET search_path = %s",
             pg_schema);
    pg_exec(sql);
}

static void pg_prepare(void)
{
    for (int i = 0; i < P_COUNT; i++) {
        char name[8];
        snprintf(name, sizeof(name), "p%d", i);
        PGresult *r = PQprepare(pg, name, pg_sql[i], 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die(pg_sql[i], PQerrorMessage(pg));
        PQclear(r);
    }
    if (!PQenterPipelineMode(pg))
        die("pipeline mode", PQerrorMessage(pg));
}

/* One connection's loop: turns and work batches until every chain is
 * done (SKIP LOCKED keeps the connections' batches apart). */
static void *pg_loop(void *unused)
{
    (void)unused;
    pg_connect();
    pg_prepare();
    arr a1 = {0}, a2 = {0}, a3 = {0}, b1 = {0}, b2 = {0}, d = {0};
    char ev[160];
    long inst[1024];
    int step[1024];
    while (atomic_load(&pg_done) < n_chains) {
        int n = pg_take(P_TAKE_ORCH, inst, step);
        arr_begin(&a1); /* history: instance, seq, payload */
        arr_begin(&a2);
        arr_begin(&a3);
        arr_begin(&b1); /* work: instance, step */
        arr_begin(&b2);
        arr_begin(&d); /* finished instances */
        for (int i = 0; i < n; i++) {
            int s = step[i];
            if (s > 0) {
                event_text(ev, sizeof(ev), "completed", inst[i], s);
                arr_long(&a1, inst[i]);
                arr_long(&a2, 2 * s);
                arr_text(&a3, ev);
            }
            event_text(ev, sizeof(ev), s < steps ? "scheduled" : "finished",
                       inst[i], s < steps ? s + 1 : s);
            arr_long(&a1, inst[i]);
            arr_long(&a2, 2 * s + 1);
            arr_text(&a3, ev);
            if (s < steps) {
                arr_long(&b1, inst[i]);
                arr_long(&b2, s + 1);
            } else {
                arr_long(&d, inst[i]);
            }
        }
        arr_end(&a1);
        arr_end(&a2);
        arr_end(&a3);
        arr_end(&b1);
        arr_end(&b2);
        arr_end(&d);
        pg_call calls[4] = {{P_HISTORY, 3, {a1.buf, a2.buf, a3.buf}},
                            {P_ENQ_WORK, 2, {b1.buf, b2.buf}},
                            {P_DONE, 1, {d.buf}},
                            {P_COMMIT, 0, {NULL}}};
        pg_pipeline(calls, 4, -1);
        atomic_fetch_add(&pg_done, d.count);
        atomic_fetch_add(&pg_txns, 1);
        int m = pg_take(P_TAKE_WORK, inst, step);
        arr_begin(&b1);
        arr_begin(&b2);
        for (int i = 0; i < m; i++) {
            arr_long(&b1, inst[i]);
            arr_long(&b2, step[i]);
        }
        arr_end(&b1);
        arr_end(&b2);
        pg_call wcalls[2] = {{P_ENQ_ORCH, 2, {b1.buf, b2.buf}},
                             {P_COMMIT, 0, {NULL}}};
        pg_pipeline(wcalls, 2, -1);
        atomic_fetch_add(&pg_txns, 1);
        if (n == 0 && m == 0) /* the others hold this moment's work */
            usleep(100);
    }
    free(a1.buf);
    free(a2.buf);
    free(a3.buf);
    free(b1.buf);
    free(b2.buf);
    free(d.buf);
    PQfinish(pg);
    return NULL;
}

static void run_postgres(const char *url, int conns)
{
    char sql[1024];
    snprintf(pg_url, sizeof(pg_url), "%s", url);
    snprintf(pg_schema, sizeof(pg_schema), "floor_%ld", (long)getpid());
    pg = PQconnectdb(url);
    if (PQstatus(pg) != CONNECTION_OK)
        die("connect", PQerrorMessage(pg));
    snprintf(sql, sizeof(sql),
             "SET client_min_messages = warning; "
             "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s; "
             "SET search_path = %s",
             pg_schema, pg_schema, pg_schema);
    pg_exec(sql);
    pg_exec("CREATE TABLE instances (id bigint PRIMARY KEY, status int NOT "
            "NULL, output text);"
            "CREATE TABLE history (instance bigint NOT NULL, seq int NOT "
            "NULL, payload text NOT NULL, PRIMARY KEY (instance, seq));"
            "CREATE TABLE orch_queue (id bigserial PRIMARY KEY, instance "
            "bigint NOT NULL, step int NOT NULL);"
            "CREATE TABLE work_queue (id bigserial PRIMARY KEY, instance "
            "bigint NOT NULL, step int NOT NULL)");
    pg_prepare();
    arr a1 = {0}, a2 = {0}, a3 = {0}, d = {0};
    char ev[160];
    for (long i = 0; i < n_chains; i += batch) {
        arr_begin(&d);
        arr_begin(&a1);
        arr_begin(&a2);
        arr_begin(&a3);
        for (long k = i; k < i + batch && k < n_chains; k++) {
            arr_long(&d, k);
            arr_long(&a1, k);
            arr_long(&a2, 0);
            event_text(ev, sizeof(ev), "started", k, 0);
            arr_text(&a3, ev);
        }
        arr_end(&d);
        arr_end(&a1);
        arr_end(&a2);
        arr_end(&a3);
        pg_call calls[5] = {{P_BEGIN, 0, {NULL}},
                            {P_INSTANCE, 1, {d.buf}},
                            {P_HISTORY, 3, {a1.buf, a2.buf, a3.buf}},
                            {P_ENQ_ORCH, 2, {a1.buf, a2.buf}},
                            {P_COMMIT, 0, {NULL}}};
        /* the start message's step, like the start event's seq, is 0 */
        pg_pipeline(calls, 5, -1);
    }
    free(a1.buf);
    free(a2.buf);
    free(a3.buf);
    free(d.buf);
    pthread_t t[64];
    int64_t t0 = mono_ns();
    for (int i = 0; i < conns; i++)
        if (pthread_create(&t[i], NULL, pg_loop, NULL) != 0)
            die("pthread_create", "failed");
    for (int i = 0; i < conns; i++)
        pthread_join(t[i], NULL);
    double wall_ms = (double)(mono_ns() - t0) / 1e6;
    printf("{\"bench\":\"floor\",\"store\":\"postgres\",\"n\":%ld,\"steps\":%d,"
           "\"batch\":%d,\"threads\":%d,\"wall_ms\":%.1f,"
           "\"chains_per_s\":%.0f,\"transactions_per_chain\":%.2f}\n",
           n_chains, steps, batch, conns, wall_ms, n_chains / (wall_ms / 1e3),
           (double)atomic_load(&pg_txns) / n_chains);
    if (!PQexitPipelineMode(pg))
        die("pipeline mode", PQerrorMessage(pg));
    snprintf(sql, sizeof(sql), "RESET search_path; DROP SCHEMA %s CASCADE",
             pg_schema);
    pg_exec(sql);
    PQfinish(pg);
}
#endif

int main(int argc, char **argv)
{
    const char *url = "sqlite:floor_bench.db";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--url"))
            url = v;
        else if (v && !strcmp(a, "--n"))
            n_chains = atol(v);
        else if (v && !strcmp(a, "--steps"))
            steps = atoi(v);
        else if (v && !strcmp(a, "--batch"))
            batch = atoi(v);
        else if (v && !strcmp(a, "--threads"))
            threads = atoi(v);
        else {
            fprintf(stderr, "usage: floor_bench [--url sqlite:PATH|"
                            "postgresql://...] [--n N] [--steps S] "
                            "[--batch B] [--threads T]\n");
            return 2;
        }
        i++;
    }
    if (n_chains < 1 || steps < 1 || batch < 1 || batch > 1024 || threads < 1 ||
        threads > 64)
        die("arguments", "--n, --steps >= 1; --batch 1..1024; --threads "
                         "1..64");
    if (!strncmp(url, "sqlite:", 7)) {
        if (threads != 1)
            die("--threads", "SQLite has one writer: one thread");
        run_sqlite(url + 7);
        return 0;
    }
#ifdef DURO_BENCH_POSTGRES
    if (!strncmp(url, "postgres", 8)) {
        run_postgres(url, threads);
        return 0;
    }
#endif
    die(url, "not a sqlite: URL (or PostgreSQL, not built in)");
    return 1;
}
