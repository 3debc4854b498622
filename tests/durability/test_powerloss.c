/* test_powerloss.c - power loss (and process crashes) at hundreds of points
 * of a real workload, after SQLite's own crash tests. powerloss_worker runs
 * turns, activity acks, client starts and raises on a SQLite file through
 * the power-loss VFS (powerloss_vfs.h), which at the N-th write or sync of
 * the database or WAL rewrites both as a power failure could leave them
 * (durable image plus a random subset of the pending writes, some torn at
 * 512-byte sectors) and ends the process. This process then opens the file
 * on SQLite's default VFS and checks:
 *
 *  - always: integrity_check is ok; history is never torn: per execution,
 *    event ids are dense from 1 and start with OrchestrationStarted, every
 *    completion, fire or cancel event points back at an earlier scheduling
 *    event of the right kind, nothing is completed twice; no worker row
 *    lacks its ActivityScheduled or outlives its completion; the rows that
 *    belong together (history, executions, instances, queue and readiness)
 *    do; duro's provider opens the file; every few cuts a new runtime
 *    finishes all the work with the expected outputs;
 *  - with synchronous=full, and for a process crash at normal: every commit
 *    acknowledged before the cut (the worker records each one after its call
 *    returned DURO_OK) is present. With normal and power loss the last
 *    commits may be missing; how many is printed.
 *
 * Cut points are spread over a calibration run's calls. Seeds are printed;
 * DURO_POWERLOSS_SEED repeats the fates (thread timing is not repeatable),
 * DURO_POWERLOSS_CUTS changes the number of cuts per scenario. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "duro/provider.h"
#include "powerloss_vfs.h"
#include "powerloss_workload.h"
#include "test.h"

#ifndef POWERLOSS_WORKER_PATH
#error "POWERLOSS_WORKER_PATH must name the powerloss_worker executable"
#endif

#define WORKER_DEADLINE_MS 120000 /* generous: ASan on a loaded machine */
#define FINISH_EVERY 10           /* run the finish check every n-th cut */

/* ---- randomness ---------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t seed_rng(const char *scenario)
{
    const char *env = getenv("DURO_POWERLOSS_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : (uint64_t)duro_now_ms() ^ ((uint64_t)getpid() << 32);
    rng_state = seed;
    fprintf(stderr, "  %s: seed %llu (DURO_POWERLOSS_SEED=%llu repeats it)\n",
            scenario, (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* ---- files and the worker ------------------------------------------------ */

static void remove_db(const char *path)
{
    char p[1024];
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK_MSG(in >= 0 && out >= 0, "copy %s -> %s: %s", from, to,
              strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        CHECK_MSG(write(out, buf, (size_t)n) == n, "write %s: %s", to,
                  strerror(errno));
    close(in);
    close(out);
}

/* Runs the worker with argv (stderr appended to errlog) and waits for it
 * with a deadline; returns its exit status, or -1 when it had to be
 * killed. */
static int run_worker(char *const argv[], const char *errlog)
{
    pid_t pid = fork();
    CHECK_MSG(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(errlog, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int64_t deadline = test_now_ms() + WORKER_DEADLINE_MS;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (test_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return -1;
        }
        test_sleep_ms(2);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- records ------------------------------------------------------------- */

typedef struct records {
    char **lines;
    size_t count;
    uint64_t end_calls; /* from "END", 0 when the run was cut */
} records;

static void records_read(const char *path, records *r)
{
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[512];
    size_t cap = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n')
            continue; /* a partial line cannot happen (one write each) */
        line[n - 1] = '\0';
        unsigned long long calls;
        if (sscanf(line, "END %llu", &calls) == 1)
            r->end_calls = calls;
        if (r->count == cap) {
            cap = cap ? cap * 2 : 64;
            r->lines = realloc(r->lines, cap * sizeof(*r->lines));
            CHECK(r->lines != NULL);
        }
        r->lines[r->count++] = strdup(line);
    }
    fclose(f);
}

static void records_free(records *r)
{
    for (size_t i = 0; i < r->count; i++)
        free(r->lines[i]);
    free(r->lines);
    memset(r, 0, sizeof(*r));
}

/* ---- checks -------------------------------------------------------------- */

static const char *where; /* "scenario cut i at call n, seed s" */

static sqlite3 *db_open(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    CHECK_MSG(rc == SQLITE_OK, "%s: open %s: %s", where, path,
              db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    CHECK_MSG(rc == SQLITE_OK, "%s: prepare \"%s\": %s", where, sql,
              sqlite3_errmsg(db));
    return s;
}

static void check_integrity(sqlite3 *db)
{
    sqlite3_stmt *s = prepare(db, "PRAGMA integrity_check");
    int rc = sqlite3_step(s);
    char result[512];
    snprintf(result, sizeof(result), "%s",
             rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0)
                              : sqlite3_errmsg(db));
    sqlite3_finalize(s);
    CHECK_MSG(strcmp(result, "ok") == 0, "%s: integrity_check: %s", where,
              result);
}

/* Fails with the first row of `sql` when it returns any. */
static void expect_no_rows(sqlite3 *db, const char *what, const char *sql)
{
    sqlite3_stmt *s = prepare(db, sql);
    int rc = sqlite3_step(s);
    char row[512] = "";
    size_t used = 0;
    if (rc == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(s) && used < sizeof(row);
             i++) {
            const unsigned char *v = sqlite3_column_text(s, i);
            used +=
                (size_t)snprintf(row + used, sizeof(row) - used, "%s%s",
                                 i ? " | " : "", v ? (const char *)v : "NULL");
        }
    }
    char error[256];
    snprintf(error, sizeof(error), "%s", sqlite3_errmsg(db));
    sqlite3_finalize(s);
    CHECK_MSG(rc != SQLITE_ROW, "%s: %s: %s", where, what, row);
    CHECK_MSG(rc == SQLITE_DONE, "%s: %s: %s", where, what, error);
}

/* History is never torn, and rows that belong together do. Event kinds:
 * 1 Started, 2 Completed, 7 ActivityScheduled, 8/9 Activity Completed/
 * Failed, 10 ActivityCancelRequested, 11 TimerCreated, 12 TimerFired,
 * 14 EventRaised, 15 SubOrchestrationScheduled, 16/17/18 its completion,
 * failure, cancel. Queue kinds 2/3: activity completed/failed, 5: event. */
static void check_structure(sqlite3 *db)
{
    expect_no_rows(db, "event ids are not dense from 1",
                   "SELECT instance_id, execution_id, COUNT(*), "
                   "MIN(event_id), MAX(event_id) FROM history "
                   "GROUP BY instance_id, execution_id "
                   "HAVING COUNT(*) != MAX(event_id) OR MIN(event_id) != 1");
    expect_no_rows(db, "an execution does not start with Started",
                   "SELECT instance_id, execution_id, kind FROM history "
                   "WHERE event_id = 1 AND kind != 1");
    expect_no_rows(
        db, "a completion without its scheduling event",
        "SELECT h.instance_id, h.execution_id, h.event_id, h.kind, "
        "h.source_event_id, s.kind FROM history h LEFT JOIN history s "
        "ON s.instance_id = h.instance_id AND s.execution_id = h.execution_id "
        "AND s.event_id = h.source_event_id "
        "WHERE h.kind IN (8, 9, 10, 12, 16, 17, 18) "
        "AND (h.source_event_id >= h.event_id OR s.kind IS NOT "
        "CASE WHEN h.kind IN (8, 9, 10) THEN 7 WHEN h.kind = 12 THEN 11 "
        "ELSE 15 END)");
    expect_no_rows(db, "a scheduling event completed twice",
                   "SELECT instance_id, execution_id, source_event_id, "
                   "COUNT(*) FROM history WHERE kind IN (8, 9, 12, 16, 17) "
                   "GROUP BY instance_id, execution_id, source_event_id "
                   "HAVING COUNT(*) > 1");
    expect_no_rows(db, "a worker row without its ActivityScheduled",
                   "SELECT w.instance_id, w.execution_id, w.activity_id "
                   "FROM worker_queue w LEFT JOIN history h "
                   "ON h.instance_id = w.instance_id "
                   "AND h.execution_id = w.execution_id "
                   "AND h.event_id = w.activity_id WHERE h.kind IS NOT 7");
    expect_no_rows(db, "a worker row whose completion is in history",
                   "SELECT w.instance_id, w.execution_id, w.activity_id "
                   "FROM worker_queue w JOIN history h "
                   "ON h.instance_id = w.instance_id "
                   "AND h.execution_id = w.execution_id "
                   "AND h.kind IN (8, 9) AND h.source_event_id = "
                   "w.activity_id");
    expect_no_rows(db, "a worker row whose completion is queued",
                   "SELECT w.instance_id, w.execution_id, w.activity_id "
                   "FROM worker_queue w JOIN orchestrator_queue m "
                   "ON m.instance_id = w.instance_id "
                   "AND m.execution_id = w.execution_id "
                   "AND m.kind IN (2, 3) AND m.source_id = w.activity_id");
    expect_no_rows(db, "history without its execution row",
                   "SELECT DISTINCT instance_id, execution_id FROM history h "
                   "WHERE NOT EXISTS (SELECT 1 FROM executions e "
                   "WHERE e.instance_id = h.instance_id "
                   "AND e.execution_id = h.execution_id)");
    expect_no_rows(db, "an execution without its instance row",
                   "SELECT instance_id FROM executions e WHERE NOT EXISTS "
                   "(SELECT 1 FROM instances i "
                   "WHERE i.instance_id = e.instance_id)");
    expect_no_rows(db, "queued messages without a readiness row",
                   "SELECT DISTINCT instance_id FROM orchestrator_queue q "
                   "WHERE NOT EXISTS (SELECT 1 FROM orchestrator_ready r "
                   "WHERE r.instance_id = q.instance_id)");
    expect_no_rows(db, "a Completed instance without OrchestrationCompleted",
                   "SELECT instance_id FROM instances i WHERE status = 3 "
                   "AND NOT EXISTS (SELECT 1 FROM history h "
                   "WHERE h.instance_id = i.instance_id "
                   "AND h.execution_id = i.execution_id AND h.kind = 2)");
}

static int64_t query_int(sqlite3 *db, const char *sql, const char *a,
                         uint64_t b, uint64_t c)
{
    sqlite3_stmt *s = prepare(db, sql);
    sqlite3_bind_text(s, 1, a, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(s) >= 2)
        sqlite3_bind_int64(s, 2, (sqlite3_int64)b);
    if (sqlite3_bind_parameter_count(s) >= 3)
        sqlite3_bind_int64(s, 3, (sqlite3_int64)c);
    int rc = sqlite3_step(s);
    int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    char error[256];
    snprintf(error, sizeof(error), "%s", sqlite3_errmsg(db));
    sqlite3_finalize(s);
    CHECK_MSG(rc == SQLITE_ROW, "%s: \"%s\": %s", where, sql, error);
    return v;
}

/* 1 when the acknowledged commit of record `line` is in the database. */
static int record_present(sqlite3 *db, const char *line)
{
    char id[PL_STR_MAX], output[PL_STR_MAX];
    unsigned long long x, y;
    char kind = line[0] != '\0' && line[1] == ' ' ? line[0] : '?';
    if (kind == 'S' && sscanf(line, "S %127s", id) == 1)
        return query_int(db,
                         "SELECT COUNT(*) FROM instances "
                         "WHERE instance_id = ?1",
                         id, 0, 0) == 1;
    if (kind == 'R' && sscanf(line, "R %127s", id) == 1)
        return query_int(db,
                         "SELECT (SELECT COUNT(*) FROM history "
                         "WHERE instance_id = ?1 AND kind = 14) + "
                         "(SELECT COUNT(*) FROM orchestrator_queue "
                         "WHERE instance_id = ?1 AND kind = 5)",
                         id, 0, 0) > 0;
    if (kind == 'T' && sscanf(line, "T %127s %llu %llu", id, &x, &y) == 3)
        return query_int(db,
                         "SELECT IFNULL(MAX(event_id), 0) FROM history "
                         "WHERE instance_id = ?1 AND execution_id = ?2",
                         id, x, 0) >= (int64_t)y;
    if (kind == 'A' && sscanf(line, "A %127s %llu %llu", id, &x, &y) == 3)
        return query_int(db,
                         "SELECT (SELECT COUNT(*) FROM worker_queue "
                         "WHERE instance_id = ?1 AND execution_id = ?2 "
                         "AND activity_id = ?3) = 0 AND "
                         "(SELECT COUNT(*) FROM history "
                         "WHERE instance_id = ?1 AND execution_id = ?2 "
                         "AND kind IN (8, 9) AND source_event_id = ?3) + "
                         "(SELECT COUNT(*) FROM orchestrator_queue "
                         "WHERE instance_id = ?1 AND execution_id = ?2 "
                         "AND kind IN (2, 3) AND source_id = ?3) > 0",
                         id, x, y) == 1;
    if (kind == 'C' && sscanf(line, "C %127s %127s", id, output) == 2) {
        sqlite3_stmt *s = prepare(db, "SELECT status, output FROM instances "
                                      "WHERE instance_id = ?1");
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        int ok = sqlite3_step(s) == SQLITE_ROW &&
                 sqlite3_column_int(s, 0) == DURO_STATUS_COMPLETED &&
                 sqlite3_column_text(s, 1) != NULL &&
                 strcmp((const char *)sqlite3_column_text(s, 1), output) == 0;
        sqlite3_finalize(s);
        return ok;
    }
    return 1; /* END, CUT: nothing to look for */
}

/* Records whose commit is missing; with `strict` the first one fails. */
static size_t check_records(sqlite3 *db, const records *r, int strict)
{
    size_t missing = 0;
    for (size_t i = 0; i < r->count; i++) {
        if (record_present(db, r->lines[i]))
            continue;
        CHECK_MSG(!strict,
                  "%s: the acknowledged commit \"%s\" (record %zu of %zu) is "
                  "missing",
                  where, r->lines[i], i + 1, r->count);
        missing++;
    }
    return missing;
}

static void check_provider_opens(const char *url)
{
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url, &p, &e);
    CHECK_MSG(rc == DURO_OK, "%s: the provider does not open: %s (%s)", where,
              duro_errname(rc), e.message);
    duro_instance_list *list = NULL;
    rc = p->list_instances(p, NULL, &list, &e);
    duro_instance_list_free(list);
    duro_provider_close(p);
    CHECK_MSG(rc == DURO_OK, "%s: list_instances: %s (%s)", where,
              duro_errname(rc), e.message);
}

/* ---- scenarios ----------------------------------------------------------- */

typedef struct scenario {
    const char *name;
    const char *sync;
    int keep_pending; /* a process crash: all pending writes survive */
    int strict;       /* every acknowledged commit must survive */
    int cuts;
    int cache_pages; /* 0: SQLite's default page cache */
} scenario;

typedef struct paths {
    char dir[512], tmpl[600], db[600], records[600], errlog[600], url[700];
} paths;

static int cut_count(int fallback)
{
    const char *env = getenv("DURO_POWERLOSS_CUTS");
    int n = env != NULL ? atoi(env) : fallback;
    return n > 0 ? n : fallback;
}

/* One worker run on a fresh copy of the template; returns the worker's
 * exit status (POWERLOSS_CUT_EXIT or 0) and fills r. */
static int one_run(const scenario *sc, const paths *p, uint64_t cut,
                   uint64_t seed, records *r)
{
    remove_db(p->db);
    copy_file(p->tmpl, p->db);
    unlink(p->records);
    char cut_arg[32], seed_arg[32], keep_arg[8], cache_arg[16];
    snprintf(cut_arg, sizeof(cut_arg), "%llu", (unsigned long long)cut);
    snprintf(seed_arg, sizeof(seed_arg), "%llu", (unsigned long long)seed);
    snprintf(keep_arg, sizeof(keep_arg), "%d", sc->keep_pending);
    snprintf(cache_arg, sizeof(cache_arg), "%d", sc->cache_pages);
    char *argv[] = {POWERLOSS_WORKER_PATH,
                    "run",
                    (char *)p->db,
                    (char *)p->records,
                    (char *)sc->sync,
                    cut_arg,
                    seed_arg,
                    keep_arg,
                    cache_arg,
                    (char *)NULL};
    int status = run_worker(argv, p->errlog);
    if (status != 0 && status != POWERLOSS_CUT_EXIT) {
        test_print_file(p->errlog, "worker stderr", 100);
        test_fail(__FILE__, __LINE__, "%s: the worker ended with status %d",
                  where, status);
    }
    records_read(p->records, r);
    return status;
}

static void finish(const scenario *sc, const paths *p)
{
    char *argv[] = {POWERLOSS_WORKER_PATH, "finish", (char *)p->db,
                    (char *)sc->sync, (char *)NULL};
    int status = run_worker(argv, p->errlog);
    if (status != 0)
        test_print_file(p->errlog, "worker stderr", 100);
    CHECK_MSG(status == 0,
              "%s: a runtime could not finish the work after the cut "
              "(status %d)",
              where, status);
}

static void run_scenario(const scenario *sc)
{
    uint64_t seed = seed_rng(sc->name);
    paths p;
    snprintf(p.dir, sizeof(p.dir), "%s", test_tmpdir());
    snprintf(p.tmpl, sizeof(p.tmpl), "%s/%s-template.db", p.dir, sc->name);
    snprintf(p.db, sizeof(p.db), "%s/%s.db", p.dir, sc->name);
    snprintf(p.records, sizeof(p.records), "%s/%s.records", p.dir, sc->name);
    snprintf(p.errlog, sizeof(p.errlog), "%s/%s.stderr", p.dir, sc->name);
    snprintf(p.url, sizeof(p.url), "sqlite:%s?synchronous=%s", p.db, sc->sync);
    char ctx[256];
    where = ctx;

    /* The template: an empty duro database (schema, WAL mode), closed. */
    char turl[700];
    snprintf(turl, sizeof(turl), "sqlite:%s?synchronous=%s", p.tmpl, sc->sync);
    remove_db(p.tmpl);
    snprintf(ctx, sizeof(ctx), "%s template", sc->name);
    check_provider_opens(turl);

    /* Calibration: a run without a cut counts the calls. */
    snprintf(ctx, sizeof(ctx), "%s calibration run", sc->name);
    records r;
    int64_t t0 = test_now_ms();
    int status = one_run(sc, &p, 0, seed, &r);
    CHECK_MSG(status == 0 && r.end_calls > 0,
              "%s: the calibration run did not finish (status %d)", where,
              status);
    uint64_t total = r.end_calls;
    sqlite3 *db = db_open(p.db);
    check_integrity(db);
    check_structure(db);
    check_records(db, &r, 1);
    sqlite3_close(db);
    records_free(&r);

    int cuts = cut_count(sc->cuts);
    int was_cut = 0, finishes = 0, lossy = 0;
    size_t lost = 0, lost_max = 0;
    for (int i = 0; i < cuts; i++) {
        /* Spread over the calibration run, jittered within each slice. */
        uint64_t slice = total / (uint64_t)cuts ? total / (uint64_t)cuts : 1;
        uint64_t cut =
            1 + (uint64_t)i * total / (uint64_t)cuts + rng_next() % slice;
        uint64_t cut_seed = seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        snprintf(ctx, sizeof(ctx),
                 "%s cut %d at call %llu of ~%llu (seed %llu)", sc->name, i,
                 (unsigned long long)cut, (unsigned long long)total,
                 (unsigned long long)cut_seed);
        status = one_run(sc, &p, cut, cut_seed, &r);
        was_cut += status == POWERLOSS_CUT_EXIT;

        db = db_open(p.db);
        check_integrity(db);
        check_structure(db);
        size_t missing =
            check_records(db, &r, sc->strict || status != POWERLOSS_CUT_EXIT);
        sqlite3_close(db);
        records_free(&r);
        lost += missing;
        lossy += missing > 0;
        if (missing > lost_max)
            lost_max = missing;

        check_provider_opens(p.url);
        if (i % FINISH_EVERY == FINISH_EVERY - 1) {
            finish(sc, &p);
            finishes++;
            db = db_open(p.db);
            check_integrity(db);
            check_structure(db);
            sqlite3_close(db);
        }
    }
    fprintf(stderr,
            "  %s: %d cuts over ~%llu write/sync calls (%d cut the run, %d "
            "came after its end), %d finished by a new runtime, %lld ms\n",
            sc->name, cuts, (unsigned long long)total, was_cut, cuts - was_cut,
            finishes, (long long)(test_now_ms() - t0));
    if (sc->strict)
        fprintf(stderr, "    every acknowledged commit was present\n");
    else
        fprintf(stderr,
                "    acknowledged commits missing after a cut: %zu in all, "
                "in %d of %d cuts, at most %zu at once\n",
                lost, lossy, cuts, lost_max);
}

/* synchronous=full: power loss anywhere keeps every acknowledged commit. */
TEST(power_loss_full_keeps_acknowledged_commits)
{
    scenario sc = {"full", "full", 0, 1, 100, 0};
    run_scenario(&sc);
}

/* synchronous=normal (the default): power loss may drop the last commits
 * but never tears history or the database. */
TEST(power_loss_normal_is_never_torn)
{
    scenario sc = {"normal", "normal", 0, 0, 100, 0};
    run_scenario(&sc);
}

/* synchronous=normal, the process dies at any write or sync (its pending
 * writes are in the OS, so they survive): every acknowledged commit stays.
 * Connections get a 10-page cache here, so turns spill pages to the WAL
 * before they commit and change them again: then SQLite rewrites frame
 * headers after writing the commit frame, and a layer that held any of
 * that back in the process loses the commit. */
TEST(process_crash_normal_keeps_acknowledged_commits)
{
    scenario sc = {"normal-kill", "normal", 1, 1, 100, 10};
    run_scenario(&sc);
}

TEST_MAIN(T(power_loss_full_keeps_acknowledged_commits),
          T(power_loss_normal_is_never_torn),
          T(process_crash_normal_keeps_acknowledged_commits))
