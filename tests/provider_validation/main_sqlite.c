/* main_sqlite.c - runs the provider validation suite on the SQLite provider:
 * every test on a fresh database file, faults injected at SQLite steps
 * through the provider's test hook. Adds the checks that depend on SQLite
 * URLs. Main thread. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "providers/sqlite/sqlite_provider.h"
#include "validation.h"

static duro_provider *open_url(const char *test_name, const char *params)
{
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s.db%s", test_path(test_name), params);
    duro_provider *p = NULL;
    duro_error e;
    if (duro_provider_open(url, &p, &e) != DURO_OK) {
        fprintf(stderr, "  cannot open %s: %s (%s)\n", url,
                duro_errname(e.code), e.message);
        return NULL;
    }
    return p;
}

static duro_provider *sqlite_open(void *ctx, const char *test_name)
{
    (void)ctx;
    return open_url(test_name, "");
}

static duro_provider *sqlite_open_with_max_history(void *ctx,
                                                   const char *test_name,
                                                   uint64_t max_history)
{
    (void)ctx;
    char params[64];
    snprintf(params, sizeof(params), "?max_history=%llu",
             (unsigned long long)max_history);
    return open_url(test_name, params);
}

/* The same file again: a second handle, as another process would have. */
static duro_provider *sqlite_open_same(void *ctx, const char *test_name)
{
    (void)ctx;
    return open_url(test_name, "");
}

static void sqlite_close(void *ctx, duro_provider *p)
{
    (void)ctx;
    duro_provider_close(p);
}

static void sqlite_inject_fault(void *ctx, duro_provider *p, uint64_t nth_step,
                                int retryable)
{
    (void)ctx;
    duro__sqlite_inject_fault(p, nth_step, retryable);
}

/* URLs are provider-specific, so this one lives here. */
PV_TEST(malformed_sqlite_urls_fail_bad_url)
{
    const char *bad[] = {
        "sqlite:",
        "sqlite:x.db?",
        "sqlite:x.db?max_history",
        "sqlite:x.db?max_history=ten",
        "sqlite:x.db?max_history=0",
        "sqlite:x.db?no_such_param=1",
        "sqlite:x.db?synchronous=sometimes",
        "sqlite:x.db?max_history=5&max_history=6",
        "sqlite:x.db?busy_timeout_ms=-1",
        "sqlite:x.db?max_payload=",
        "sqlite:x.db?&",
        "sqlitex:x.db",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        duro_provider *p = (duro_provider *)&bad; /* must be reset */
        duro_error e;
        int rc = duro_provider_open(bad[i], &p, &e);
        CHECK_MSG(rc == DURO_BAD_URL,
                  "'%s' opened with %s, expected "
                  "DURO_BAD_URL (%s)",
                  bad[i], duro_errname(rc), e.message);
        CHECK_EQ(e.code, DURO_BAD_URL);
        CHECK_EQ(e.retryable, 0);
        CHECK(p == NULL);
    }
    /* The same path with good parameters opens. */
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s?max_history=5&synchronous=full",
             test_path("good.db"));
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
    CHECK(p != NULL);
    duro_provider_close(p);
}

/* A fetch that waits for the write lock (here another connection holds it
 * longer than the lock timeout) still gets a lock of the full timeout from
 * when it runs. It used to run from when the call began, so such a lock was
 * born expired and the next fetch took the row at once. */
#define WAITED_LOCK_MS 1000

typedef struct waited_fetch {
    duro_provider *p;
    int work; /* 1: fetch_work_item, 0: fetch_orchestration_item */
    _Atomic int done;
    int rc;
    duro_worker_item *w;
    duro_orch_item *o;
} waited_fetch;

static void *fetch_main(void *arg)
{
    waited_fetch *f = arg;
    duro_error e;
    f->rc = f->work ? f->p->fetch_work_item(f->p, WAITED_LOCK_MS, &f->w, &e)
                    : f->p->fetch_orchestration_item(f->p, WAITED_LOCK_MS, NULL,
                                                     &f->o, &e);
    atomic_store(&f->done, 1);
    return NULL;
}

static void fetch_after_a_wait(duro_provider *p, const char *path, int work)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    waited_fetch f = {.p = p, .work = work};
    atomic_init(&f.done, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fetch_main, &f), 0);
    /* Hold the write lock for longer than the lock timeout (a bound, not a
     * guess: if the fetch had not started waiting yet, the test only checks
     * less). */
    int64_t until = test_now_ms() + WAITED_LOCK_MS + 500;
    while (test_now_ms() < until)
        test_sleep_ms(10);
    int64_t released = test_now_ms();
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    pthread_join(t, NULL);
    CHECK_EQ(f.rc, DURO_OK);
    CHECK(work ? f.w != NULL : f.o != NULL);
    /* Locked from when it ran, after the release: nobody else gets it
     * before released + WAITED_LOCK_MS. */
    duro_error e;
    if (work) {
        duro_worker_item *again = NULL;
        CHECK_PRC(p->fetch_work_item(p, 60000, &again, &e), DURO_OK, &e);
        CHECK_MSG(again == NULL ||
                      test_now_ms() >= released + WAITED_LOCK_MS - 2,
                  "work item fetched again %lld ms after its lock was "
                  "taken",
                  (long long)(test_now_ms() - released));
        duro_worker_item_free(again);
        CHECK_PRC(p->ack_work_item(p, f.w->lock_token, NULL, &e), DURO_OK, &e);
        duro_worker_item_free(f.w);
    } else {
        duro_orch_item *again = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &again, &e),
                  DURO_OK, &e);
        CHECK_MSG(again == NULL ||
                      test_now_ms() >= released + WAITED_LOCK_MS - 2,
                  "instance fetched again %lld ms after its lock was taken",
                  (long long)(test_now_ms() - released));
        duro_orch_item_free(again);
        duro_orch_ack consume = {.execution_id = 0};
        CHECK_PRC(p->ack_orchestration_item(p, f.o->lock_token, &consume, &e),
                  DURO_OK, &e);
        duro_orch_item_free(f.o);
    }
}

PV_TEST(a_fetch_that_waited_for_the_write_lock_gets_a_full_lock)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s.db", test_path(pv_test_name));
    duro_provider *p = pv_open();
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "x", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    fetch_after_a_wait(p, path, 0);
    /* a worker row, through an ack of a fresh instance */
    st.instance_id = "y";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "y");
    duro_event ev = {.event_id = 1,
                     .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                     .name = "orch"};
    duro_work_item act = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                          .instance_id = "y",
                          .execution_id = 1,
                          .source_id = 2,
                          .name = "act"};
    duro_instance_meta m = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = &ev,
                         .history_delta_count = 1,
                         .worker_items = &act,
                         .worker_item_count = 1,
                         .meta = &m};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    fetch_after_a_wait(p, path, 1);
}

int main(int argc, char **argv)
{
    static const pv_factory factory = {
        .name = "sqlite",
        .open = sqlite_open,
        .open_with_max_history = sqlite_open_with_max_history,
        .open_same = sqlite_open_same,
        .close = sqlite_close,
        .inject_fault = sqlite_inject_fault,
        .max_payload = 0, /* the default, 1 MiB */
        .ctx = NULL,
    };
    static const test_case extra[] = {
        T(malformed_sqlite_urls_fail_bad_url),
        T(a_fetch_that_waited_for_the_write_lock_gets_a_full_lock)};
    return pv_main(argc, argv, &factory, extra,
                   sizeof(extra) / sizeof(extra[0]));
}
