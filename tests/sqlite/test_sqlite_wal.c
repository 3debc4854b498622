/* test_sqlite_wal.c - the SQLite store's WAL under a real runtime: many
 * instances run through a store with a small checkpoint interval
 * (checkpoint_pages), and the -wal file never grows past the bound the
 * checkpoint policy sets; space a reader made the WAL take is given back
 * once the reader lets go (journal_size_limit). One runtime and one client
 * on one provider, each test on its own file. */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "duro/provider.h"
#include "providers/sqlite/sqlite_provider.h"
#include "rt_util.h"

#define CHECKPOINT_PAGES 256
#define PAGE_SIZE 2048 /* a new store's */
#define WAIT_MS 120000

/* The policy's bound, in frames: a writer that finds the WAL past twice
 * the interval waits for a checkpoint that starts it over, so the WAL
 * holds at most 2 x CHECKPOINT_PAGES frames plus the transaction that
 * crossed that cap (a batch of up to 16 turns: under 100 frames in this
 * workload) and the lock renewals that do not wait (a few frames for each
 * of the 8 activities in flight): one more interval covers both. */
#define BOUND_FRAMES (3 * CHECKPOINT_PAGES)

static int64_t wal_bytes(int64_t frames)
{
    return 32 + frames * (24 + PAGE_SIZE); /* header, then frames */
}

/* ------------------------------------------------------------------------
 * workload: chains of three activities; every activity, and the test
 * thread after every start, notes the -wal file's size */

static char wal_path[600];
static _Atomic int64_t wal_largest;
static _Atomic int64_t wal_samples;

static void note_wal_size(void)
{
    struct stat st;
    if (stat(wal_path, &st) != 0)
        return;
    int64_t size = (int64_t)st.st_size;
    int64_t seen = atomic_load(&wal_largest);
    while (size > seen &&
           !atomic_compare_exchange_weak(&wal_largest, &seen, size)) {
    }
    atomic_fetch_add(&wal_samples, 1);
}

static int act_step(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    note_wal_size();
    long long v = in ? strtoll(in, NULL, 10) : 0;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v + 1);
    return duro_ok(out, buf);
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < 3; i++) {
        duro_task *t = duro_call_activity(o, "Step", acc);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        acc = duro_task_output(t);
    }
    return duro_ok(out, acc);
}

/* A runtime and a client on one provider of `db` with the small interval;
 * the provider stays the test's, for its checkpoint counter. */
typedef struct wal_fixture {
    rt_fixture f;
    duro_provider *p;
} wal_fixture;

static void wal_start(wal_fixture *w, const char *db)
{
    rt_init(&w->f, db);
    CHECK_OK(duro_registry_add_orchestration(w->f.reg, "Chain", NULL,
                                             orch_chain, NULL));
    CHECK_OK(duro_registry_add_activity(w->f.reg, "Step", act_step, NULL));
    char url[700];
    snprintf(url, sizeof(url), "%s?checkpoint_pages=%d", w->f.url,
             CHECKPOINT_PAGES);
    snprintf(wal_path, sizeof(wal_path), "%s-wal", test_path(db));
    atomic_store(&wal_largest, 0);
    atomic_store(&wal_samples, 0);
    duro_error e;
    int rc = duro_provider_open(url, &w->p, &e);
    CHECK_MSG(rc == DURO_OK, "open %s: %s (%s)", url, duro_errname(rc),
              e.message);
    CHECK_OK(duro_runtime_create_with_provider(w->p, w->f.reg, &w->f.opts,
                                               &w->f.rt));
    CHECK_OK(duro_runtime_start(w->f.rt));
    CHECK_OK(duro_client_create_with_provider(w->p, &w->f.client));
}

static void wal_done(wal_fixture *w)
{
    rt_done(&w->f);
    duro_provider_close(w->p);
}

/* Starts instances first..first+n-1 and waits for each to complete. */
static void run_chains(wal_fixture *w, int first, int n)
{
    char id[32];
    for (int i = first; i < first + n; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        rt_start_instance(&w->f, id, "Chain", "0");
        note_wal_size();
    }
    for (int i = first; i < first + n; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        duro_instance_info *info = rt_wait(&w->f, id, WAIT_MS);
        CHECK(info != NULL && info->status == DURO_STATUS_COMPLETED);
        CHECK_STR(info ? info->output : NULL, "3");
        duro_free(info);
    }
}

/* ------------------------------------------------------------------------
 * tests */

/* 1,500 chains (6,000 turns, 4,500 activities) on 2 turn threads and 8
 * worker slots, many times the WAL's bound in frames written: the -wal
 * file, sampled at every activity and every start, never passes the
 * bound. Before the policy, checkpoints ran every 10,000 frames and
 * RESTART only past 40,000, and commits never waited for them: the WAL of
 * `chain` reached 87-127 MB beside a 1 MB database. */
TEST(the_wal_stays_under_its_bound_under_a_runtime)
{
    wal_fixture w;
    wal_start(&w, "bound.db");
    run_chains(&w, 0, 1500);
    int64_t largest = atomic_load(&wal_largest);
    uint64_t checkpoints = duro__sqlite_checkpoints(w.p);
    fprintf(stderr,
            "  largest -wal %lld bytes (bound %lld) in %lld samples, %llu "
            "checkpoints\n",
            (long long)largest, (long long)wal_bytes(BOUND_FRAMES),
            (long long)atomic_load(&wal_samples),
            (unsigned long long)checkpoints);
    /* the workload went round the WAL many times */
    CHECK_INT(checkpoints, >=, 20);
    CHECK_INT(atomic_load(&wal_samples), >=, 1500 + 4500);
    CHECK_INT(largest, >, wal_bytes(CHECKPOINT_PAGES));
    CHECK_INT(largest, <=, wal_bytes(BOUND_FRAMES));
    wal_done(&w);
}

/* A reader holding an old snapshot (a bulk sweep of another process, a
 * long read) keeps the WAL from being copied back and starting over, so it
 * grows past the bound and writers do not wait for checkpoints that
 * cannot catch up. Once the reader lets go, the next start-over cuts the
 * file back to the journal_size_limit (twice the interval): the space is
 * given back, not kept for ever. */
TEST(space_a_reader_held_back_is_given_back)
{
    wal_fixture w;
    wal_start(&w, "held.db");
    run_chains(&w, 0, 10); /* the store exists, with its WAL */
    sqlite3 *reader = NULL;
    CHECK_EQ(sqlite3_open_v2(test_path("held.db"), &reader,
                             SQLITE_OPEN_READONLY, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM instances", NULL,
                          NULL, NULL),
             SQLITE_OK);
    run_chains(&w, 10, 100);
    struct stat st;
    CHECK_EQ(stat(wal_path, &st), 0);
    CHECK_INT(st.st_size, >, wal_bytes(BOUND_FRAMES)); /* it was held */
    CHECK_EQ(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(reader);

    /* a few checkpoint intervals of work at most, instance by instance */
    int64_t limit = 32 + 2 * CHECKPOINT_PAGES * (24 + PAGE_SIZE);
    int i = 110;
    for (; i < 710; i++) {
        CHECK_EQ(stat(wal_path, &st), 0);
        if (st.st_size <= limit)
            break;
        run_chains(&w, i, 1);
    }
    CHECK_MSG(st.st_size <= limit,
              "-wal still %lld bytes (limit %lld) after %d more chains",
              (long long)st.st_size, (long long)limit, i - 110);
    wal_done(&w);
}

TEST_MAIN(T(the_wal_stays_under_its_bound_under_a_runtime),
          T(space_a_reader_held_back_is_given_back))
