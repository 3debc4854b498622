/* test_sqlite_group.c - SQLite's group commit (duro__sqlite_write_grouped):
 * writes that queue while another holds the writer share one transaction,
 * and those that queue while a shared transaction runs join it;
 * a write that fails having changed nothing fails alone and the others
 * commit; a write that fails after changing something rolls the group back
 * and every write runs again alone, so each caller learns its own outcome
 * and nothing it did not do. Grouped writes are the store's own (the
 * turns' and activities' acks); here they insert rows into a table of the
 * test's, so what committed is counted exactly. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "duro/provider.h"
#include "providers/sqlite/sqlite_internal.h"
#include "test.h"

#define WRITERS 7
#define DEADLINE_MS 30000

/* What a test write does when it runs. */
enum behaviour {
    INSERT,       /* inserts its row */
    LOST_CLEAN,   /* changes nothing and fails DURO_LOCK_LOST, clean */
    BREAK_ONCE,   /* inserts its row, then fails DURO_STORAGE (not clean)
                     the first time; inserts and succeeds after */
    BLOCK_INSERT, /* waits for the test's release, then inserts */
};

typedef struct test_write {
    duro__sqlite_grouped g; /* first member */
    enum behaviour what;
    int row;
    _Atomic int runs;
    _Atomic int undos;
    int rc;
    duro_error err;
} test_write;

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;
static _Atomic int blocked; /* a BLOCK_INSERT write holds the writer */

static int insert_row(duro__sqlite_conn *c, int row, duro_error *err)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "INSERT INTO group_test(v) VALUES(%d)", row);
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return duro_error_set(err, DURO_STORAGE, 0, "insert: %s",
                              sqlite3_errmsg(c->db));
    return DURO_OK;
}

static int run_write(duro__sqlite_provider *p, duro__sqlite_conn *c,
                     duro__sqlite_grouped *g, int *clean, duro_error *err)
{
    (void)p;
    test_write *w = (test_write *)g;
    int runs = atomic_fetch_add(&w->runs, 1) + 1;
    switch (w->what) {
    case LOST_CLEAN:
        *clean = 1;
        return duro_error_set(err, DURO_LOCK_LOST, 0, "lost (test)");
    case BREAK_ONCE: {
        int rc = insert_row(c, w->row, err);
        if (rc == DURO_OK && runs == 1)
            return duro_error_set(err, DURO_STORAGE, 0, "broken (test)");
        return rc;
    }
    case BLOCK_INSERT:
        atomic_store(&blocked, 1);
        pthread_mutex_lock(&gate_lock);
        while (!gate_open)
            pthread_cond_wait(&gate_cond, &gate_lock);
        pthread_mutex_unlock(&gate_lock);
        return insert_row(c, w->row, err);
    case INSERT:
        break;
    }
    return insert_row(c, w->row, err);
}

static void undo_write(duro__sqlite_grouped *g)
{
    atomic_fetch_add(&((test_write *)g)->undos, 1);
}

static duro__sqlite_provider *provider;

static void *writer_main(void *arg)
{
    test_write *w = arg;
    w->g.run = run_write;
    w->g.undo = undo_write;
    w->g.err = &w->err;
    w->rc = duro__sqlite_write_grouped(provider, "group test", &w->g);
    return NULL;
}

static int64_t count_rows(duro__sqlite_provider *p)
{
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    pthread_mutex_lock(&p->write_lock);
    if (sqlite3_prepare_v2(p->writer.db, "SELECT COUNT(*) FROM group_test", -1,
                           &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    pthread_mutex_unlock(&p->write_lock);
    return n;
}

static void wait_until(int (*cond)(void), const char *what)
{
    int64_t until = duro__mono_ms() + DEADLINE_MS;
    while (!cond()) {
        CHECK_MSG(duro__mono_ms() < until, "timed out waiting for %s", what);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int is_blocked(void)
{
    return atomic_load(&blocked);
}

static int queued_target;

static int queued(void)
{
    pthread_mutex_lock(&provider->group_lock);
    int n = provider->group_queued;
    pthread_mutex_unlock(&provider->group_lock);
    return n == queued_target;
}

/* One round: the writer is held, by a BLOCK_INSERT grouped write when
 * `grouped` (a shared transaction running), else by the test itself
 * holding write_lock (a writer outside the groups); WRITERS writes of
 * `what[i]` queue behind it; the writer is released. Returns the rows that
 * committed; the writes' outcomes are in w[]. */
static int blocker_urgent; /* the grouped blocker is an urgent write */

static int64_t round_of(const char *name, int grouped,
                        const enum behaviour *what, test_write *w,
                        uint64_t *transactions, uint64_t *writes)
{
    duro_provider *base = NULL;
    duro_error e;
    CHECK_EQ(duro_provider_open(test_sqlite_url(name), &base, &e), DURO_OK);
    provider = (duro__sqlite_provider *)base;
    pthread_mutex_lock(&provider->write_lock);
    CHECK_EQ(sqlite3_exec(provider->writer.db,
                          "CREATE TABLE group_test(v INTEGER)", NULL, NULL,
                          NULL),
             SQLITE_OK);
    pthread_mutex_unlock(&provider->write_lock);
    uint64_t t0 = atomic_load(&provider->group_transactions);
    uint64_t w0 = atomic_load(&provider->group_writes);

    gate_open = 0;
    atomic_store(&blocked, 0);
    test_write blocker;
    memset(&blocker, 0, sizeof(blocker));
    blocker.what = BLOCK_INSERT;
    blocker.row = 100;
    blocker.g.urgent = blocker_urgent;
    pthread_t bt, t[WRITERS];
    if (grouped) {
        CHECK_EQ(pthread_create(&bt, NULL, writer_main, &blocker), 0);
        wait_until(is_blocked, "the blocker to hold the writer");
    } else {
        pthread_mutex_lock(&provider->write_lock);
    }
    /* one at a time, so the queue's order is w[]'s */
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].what = what[i];
        w[i].row = i;
        w[i].g.urgent = i == 1; /* counted while queued (group_urgent) */
        CHECK_EQ(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
        queued_target = i + 1;
        wait_until(queued, "a write to queue behind the blocker");
    }
    if (grouped) {
        pthread_mutex_lock(&gate_lock);
        gate_open = 1;
        pthread_cond_broadcast(&gate_cond);
        pthread_mutex_unlock(&gate_lock);
        CHECK_EQ(pthread_join(bt, NULL), 0);
        CHECK_MSG(blocker.rc == DURO_OK, "blocker: %s", blocker.err.message);
    } else {
        pthread_mutex_unlock(&provider->write_lock);
    }
    for (int i = 0; i < WRITERS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    /* every urgent write taken: no leader is kept from waiting for company */
    CHECK_EQ(atomic_load(&provider->group_urgent), 0);
    *transactions = atomic_load(&provider->group_transactions) - t0;
    *writes = atomic_load(&provider->group_writes) - w0;
    int64_t rows = count_rows(provider);
    duro_provider_close(base);
    return rows;
}

/* A round of seven plain inserts (round_of's `grouped`, `urgent` blocker);
 * each must succeed, run once and not be undone. Returns the rows. */
static int64_t round_of_inserts(const char *name, int grouped, int urgent,
                                uint64_t *transactions, uint64_t *writes)
{
    enum behaviour what[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        what[i] = INSERT;
    test_write w[WRITERS];
    blocker_urgent = urgent;
    int64_t rows = round_of(name, grouped, what, w, transactions, writes);
    blocker_urgent = 0;
    for (int i = 0; i < WRITERS; i++) {
        CHECK_MSG(w[i].rc == DURO_OK, "write %d: %s", i, w[i].err.message);
        CHECK_EQ(atomic_load(&w[i].runs), 1);
        CHECK_EQ(atomic_load(&w[i].undos), 0);
    }
    return rows;
}

/* Seven writes queued behind a held writer share one transaction. */
TEST(writes_queued_together_share_one_commit)
{
    uint64_t transactions, writes;
    int64_t rows =
        round_of_inserts("group_share.db", 0, 0, &transactions, &writes);
    CHECK_EQ(rows, WRITERS);
    CHECK_EQ(transactions, 1);
    CHECK_EQ(writes, WRITERS);
}

/* Seven writes queued while a shared transaction runs join it before its
 * COMMIT: one transaction carries the eight. */
TEST(writes_queued_while_a_group_runs_join_it)
{
    uint64_t transactions, writes;
    int64_t rows =
        round_of_inserts("group_join.db", 1, 0, &transactions, &writes);
    CHECK_EQ(rows, WRITERS + 1);
    CHECK_EQ(transactions, 1);
    CHECK_EQ(writes, WRITERS + 1);
}

/* An urgent write (a turn that cancels activities) commits without the
 * writes queued while it ran: they go in the next transaction. */
TEST(an_urgent_group_commits_without_late_writes)
{
    uint64_t transactions, writes;
    int64_t rows =
        round_of_inserts("group_urgent.db", 1, 1, &transactions, &writes);
    CHECK_EQ(rows, WRITERS + 1);
    CHECK_EQ(transactions, 2); /* the blocker's, then the seven's */
    CHECK_EQ(writes, WRITERS + 1);
}

/* A write that fails having changed nothing (a lost lock) fails alone: the
 * others commit together, and it is not run again. */
TEST(a_clean_failure_fails_alone)
{
    enum behaviour what[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        what[i] = i == 3 ? LOST_CLEAN : INSERT;
    test_write w[WRITERS];
    uint64_t transactions, writes;
    int64_t rows =
        round_of("group_clean.db", 0, what, w, &transactions, &writes);
    for (int i = 0; i < WRITERS; i++) {
        if (i == 3) {
            CHECK_EQ(w[i].rc, DURO_LOCK_LOST);
            CHECK(strstr(w[i].err.message, "lost (test)") != NULL);
        } else {
            CHECK_MSG(w[i].rc == DURO_OK, "write %d: %s", i, w[i].err.message);
        }
        CHECK_EQ(atomic_load(&w[i].runs), 1);
    }
    CHECK_EQ(rows, WRITERS - 1);
    CHECK_EQ(transactions, 1);
    CHECK_EQ(writes, WRITERS - 1);
}

/* A write that fails after changing something breaks the group: nothing
 * of it commits, every write's undo runs, and each runs again alone; the
 * broken one succeeds on its second run here, so every row is there once. */
TEST(a_failure_that_changed_something_reruns_each_alone)
{
    enum behaviour what[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        what[i] = i == 2 ? BREAK_ONCE : INSERT;
    test_write w[WRITERS];
    uint64_t transactions, writes;
    int64_t rows =
        round_of("group_break.db", 0, what, w, &transactions, &writes);
    for (int i = 0; i < WRITERS; i++) {
        CHECK_MSG(w[i].rc == DURO_OK, "write %d: %s", i, w[i].err.message);
        /* writes before the break ran, were undone and ran again; those
         * after it ran only alone */
        int ran_in_group = i <= 2;
        CHECK_EQ(atomic_load(&w[i].runs), ran_in_group ? 2 : 1);
        CHECK_EQ(atomic_load(&w[i].undos), ran_in_group ? 1 : 0);
    }
    CHECK_EQ(rows, WRITERS);   /* each row once: the group rolled back */
    CHECK_EQ(transactions, 0); /* the alone runs are not counted as */
    CHECK_EQ(writes, 0);       /* shared transactions */
}

TEST_MAIN(T(writes_queued_together_share_one_commit),
          T(writes_queued_while_a_group_runs_join_it),
          T(an_urgent_group_commits_without_late_writes),
          T(a_clean_failure_fails_alone),
          T(a_failure_that_changed_something_reruns_each_alone))
