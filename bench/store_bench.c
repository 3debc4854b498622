/* store_bench.c - throughput of the storage provider's hot paths: work-item
 * round trips (fetch + ack with completion), orchestration round trips
 * (fetch + ack with a small turn), and the time of one ack that cancels 1000
 * activities, queued or locked by running workers. Prints one JSON object per
 * line. Not a timed test: CTest runs it once with a tiny N as a smoke test.
 *
 * The bulk workload (operations on many instances) times cancel by name of
 * N Pending instances beside N/10 of another name (which must stay
 * untouched), and the purge of N finished instances while another thread
 * writes once a millisecond (its slowest write shows how long a batch holds
 * the writer); each on a fresh store, BULK_RUNS times.
 *
 * store_bench [--workload work_roundtrip|orch_roundtrip|mass_cancel|bulk|all]
 *             [--n N] [--threads T] [--url sqlite:PATH] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro/provider.h"

#define MASS_CANCEL_ACTIVITIES 1000
#define MASS_CANCEL_RUNS 5
#define BULK_RUNS 5
#define BATCH 1000

static const char *provider_name = "sqlite";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc, const duro_error *e)
{
    fprintf(stderr, "store_bench: %s: %s (%s)\n", what, duro_errname(rc),
            e != NULL ? e->message : "");
    exit(1);
}

#define MUST(what, expr, e)                                                    \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != DURO_OK)                                                    \
            die(what, rc_, e);                                                 \
    } while (0)

static duro_provider *open_store(const char *url)
{
    duro_provider *p = NULL;
    duro_error e;
    MUST(url, duro_provider_open(url, &p, &e), &e);
    return p;
}

static duro_orch_item *fetch_one(duro_provider *p)
{
    duro_error e;
    duro_orch_item *item = NULL;
    MUST("fetch_orchestration_item",
         p->fetch_orchestration_item(p, 60000, NULL, &item, &e), &e);
    if (item == NULL) {
        fprintf(stderr, "store_bench: nothing to fetch\n");
        exit(1);
    }
    return item;
}

/* Starts `id` and runs its first turn, scheduling `activities` activities
 * (ids 2..activities+1) in batches of BATCH per turn. */
static void schedule_activities(duro_provider *p, const char *id,
                                size_t activities)
{
    duro_error e;
    duro_work_item start = {
        .kind = DURO_WORK_START, .instance_id = id, .name = "bench"};
    MUST("enqueue start", p->enqueue_for_orchestrator(p, &start, 0, &e), &e);
    duro_event *events = calloc(BATCH + 1, sizeof(*events));
    duro_work_item *work = calloc(BATCH, sizeof(*work));
    uint64_t next_event = 1;
    size_t left = activities;
    int first = 1;
    do {
        if (!first) {
            duro_work_item go = {.kind = DURO_WORK_EXTERNAL_EVENT,
                                 .instance_id = id,
                                 .name = "more"};
            MUST("enqueue event", p->enqueue_for_orchestrator(p, &go, 0, &e),
                 &e);
        }
        duro_orch_item *item = fetch_one(p);
        size_t n_events = 0, n_work = left < BATCH ? left : BATCH;
        if (first)
            events[n_events++] =
                (duro_event){.event_id = next_event++,
                             .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                             .name = "bench"};
        for (size_t i = 0; i < n_work; i++) {
            uint64_t event_id = next_event++;
            events[n_events++] =
                (duro_event){.event_id = event_id,
                             .kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                             .name = "work",
                             .payload = "{\"n\":1}"};
            work[i] = (duro_work_item){.kind = DURO_WORK_ACTIVITY_EXECUTE,
                                       .instance_id = id,
                                       .execution_id = 1,
                                       .source_id = event_id,
                                       .name = "work",
                                       .payload = "{\"n\":1}"};
        }
        duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                                   .name = "bench"};
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = events,
                             .history_delta_count = n_events,
                             .worker_items = work,
                             .worker_item_count = n_work,
                             .meta = &meta};
        MUST("ack (schedule)",
             p->ack_orchestration_item(p, item->lock_token, &ack, &e), &e);
        duro_orch_item_free(item);
        left -= n_work;
        first = 0;
    } while (left > 0);
    free(events);
    free(work);
}

static void delete_instance(duro_provider *p, const char *id)
{
    duro_error e;
    MUST("delete_instance", p->delete_instance(p, id, 1, NULL, &e), &e);
}

/* ---- work_roundtrip ------------------------------------------------------ */

typedef struct work_thread {
    duro_provider *p;
    _Atomic long *done;
} work_thread;

static void *work_loop(void *arg)
{
    work_thread *t = arg;
    duro_error e;
    for (;;) {
        duro_worker_item *w = NULL;
        MUST("fetch_work_item", t->p->fetch_work_item(t->p, 60000, &w, &e), &e);
        if (w == NULL)
            break;
        duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                               .instance_id = w->item.instance_id,
                               .execution_id = w->item.execution_id,
                               .source_id = w->item.source_id,
                               .payload = "{\"ok\":true}"};
        MUST("ack_work_item",
             t->p->ack_work_item(t->p, w->lock_token, &done, &e), &e);
        duro_worker_item_free(w);
        atomic_fetch_add(t->done, 1);
    }
    return NULL;
}

static void work_roundtrip(const char *url, long n, int threads)
{
    duro_provider *p = open_store(url);
    const char *id = "bench-work";
    schedule_activities(p, id, (size_t)n);
    _Atomic long done = 0;
    pthread_t tids[64];
    work_thread t = {p, &done};
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&tids[i], NULL, work_loop, &t);
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double elapsed = now_s() - t0;
    if (atomic_load(&done) != n) {
        fprintf(stderr, "store_bench: %ld of %ld work items done\n",
                atomic_load(&done), n);
        exit(1);
    }
    printf("{\"bench\":\"store\",\"workload\":\"work_roundtrip\","
           "\"provider\":\"%s\",\"threads\":%d,\"n\":%ld,"
           "\"ops_per_s\":%.1f}\n",
           provider_name, threads, n, (double)n / elapsed);
    fflush(stdout);
    delete_instance(p, id);
    duro_provider_close(p);
}

/* ---- orch_roundtrip ------------------------------------------------------ */

typedef struct orch_thread {
    duro_provider *p;
    _Atomic long *done;
} orch_thread;

static void *orch_loop(void *arg)
{
    orch_thread *t = arg;
    duro_provider *p = t->p;
    duro_error e;
    for (;;) {
        duro_orch_item *item = NULL;
        MUST("fetch_orchestration_item",
             p->fetch_orchestration_item(p, 60000, NULL, &item, &e), &e);
        if (item == NULL)
            break;
        /* A small first turn: Started, one activity scheduled. */
        duro_event events[2] = {{.event_id = 1,
                                 .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                                 .name = "bench",
                                 .payload = item->messages[0].payload},
                                {.event_id = 2,
                                 .kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                                 .name = "work",
                                 .payload = "{\"n\":1}"}};
        duro_work_item work = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                               .instance_id = item->instance_id,
                               .execution_id = 1,
                               .source_id = 2,
                               .name = "work",
                               .payload = "{\"n\":1}"};
        duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                                   .name = "bench"};
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = events,
                             .history_delta_count = 2,
                             .worker_items = &work,
                             .worker_item_count = 1,
                             .meta = &meta};
        MUST("ack_orchestration_item",
             p->ack_orchestration_item(p, item->lock_token, &ack, &e), &e);
        duro_orch_item_free(item);
        atomic_fetch_add(t->done, 1);
    }
    return NULL;
}

static void orch_roundtrip(const char *url, long n, int threads)
{
    duro_provider *p = open_store(url);
    duro_error e;
    char id[64];
    for (long i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "bench-orch-%ld", i);
        duro_work_item start = {.kind = DURO_WORK_START,
                                .instance_id = id,
                                .name = "bench",
                                .payload = "{\"input\":42}"};
        MUST("enqueue start", p->enqueue_for_orchestrator(p, &start, 0, &e),
             &e);
    }
    _Atomic long done = 0;
    pthread_t tids[64];
    orch_thread t = {p, &done};
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&tids[i], NULL, orch_loop, &t);
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double elapsed = now_s() - t0;
    if (atomic_load(&done) != n) {
        fprintf(stderr, "store_bench: %ld of %ld turns done\n",
                atomic_load(&done), n);
        exit(1);
    }
    printf("{\"bench\":\"store\",\"workload\":\"orch_roundtrip\","
           "\"provider\":\"%s\",\"threads\":%d,\"n\":%ld,"
           "\"ops_per_s\":%.1f}\n",
           provider_name, threads, n, (double)n / elapsed);
    fflush(stdout);
    for (long i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "bench-orch-%ld", i);
        delete_instance(p, id);
    }
    duro_provider_close(p);
}

/* ---- mass_cancel --------------------------------------------------------- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Locks every visible worker row, as running workers would, for ten
 * minutes; returns how many it locked. With `tokens`, keeps the tokens. */
static size_t lock_all_work(duro_provider *p, char **tokens, size_t max)
{
    duro_error e;
    size_t locked = 0;
    for (;;) {
        duro_worker_item *w = NULL;
        MUST("fetch_work_item", p->fetch_work_item(p, 600000, &w, &e), &e);
        if (w == NULL)
            return locked;
        if (tokens != NULL && locked < max)
            tokens[locked] = strdup(w->lock_token);
        locked++;
        duro_worker_item_free(w);
    }
}

/* One ack that records the cancellation of an instance with 1000
 * outstanding activities and deletes their worker rows; `n` rows of another
 * instance stay in the queue around them. With `locked`, every row was
 * first fetched (locked by a "running worker", as in a real cancel of busy
 * work), and the bench checks that their workers' renewals then fail. */
static void mass_cancel_runs(duro_provider *p, long n, int locked,
                             duro_event *events, duro_activity_ref *refs)
{
    duro_error e;
    const size_t k = MASS_CANCEL_ACTIVITIES;
    double ms[MASS_CANCEL_RUNS];
    char id[64];
    char **tokens = locked ? calloc(k, sizeof(*tokens)) : NULL;
    for (int run = 0; run < MASS_CANCEL_RUNS; run++) {
        snprintf(id, sizeof(id), "bench-mass-%s-%d", locked ? "l" : "q", run);
        schedule_activities(p, id, k);
        if (locked && lock_all_work(p, tokens, k) != k) {
            fprintf(stderr, "store_bench: expected to lock %zu rows\n", k);
            exit(1);
        }
        duro_work_item cancel = {.kind = DURO_WORK_CANCEL_INSTANCE,
                                 .instance_id = id,
                                 .reason = "bench",
                                 .requested_by = "store_bench"};
        MUST("enqueue cancel", p->enqueue_for_orchestrator(p, &cancel, 0, &e),
             &e);
        duro_orch_item *item = fetch_one(p);
        /* Events 1..k+1 exist (Started + k scheduled). */
        uint64_t next = k + 2;
        size_t m = 0;
        events[m++] =
            (duro_event){.event_id = next++,
                         .kind = DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                         .reason = "bench",
                         .requested_by = "store_bench"};
        for (size_t i = 0; i < k; i++) {
            events[m++] =
                (duro_event){.event_id = next++,
                             .kind = DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                             .source_event_id = i + 2,
                             .reason = "instance_cancelled"};
            refs[i] = (duro_activity_ref){id, 1, i + 2};
        }
        events[m++] = (duro_event){.event_id = next++,
                                   .kind = DURO_EVENT_ORCHESTRATION_CANCELLED,
                                   .reason = "bench"};
        duro_instance_meta meta = {.status = DURO_STATUS_CANCELLED,
                                   .error = "bench",
                                   .category = DURO_CATEGORY_CANCELLED};
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = events,
                             .history_delta_count = m,
                             .meta = &meta,
                             .cancelled_activities = refs,
                             .cancelled_activity_count = k};
        double t0 = now_s();
        MUST("ack (mass cancel)",
             p->ack_orchestration_item(p, item->lock_token, &ack, &e), &e);
        ms[run] = (now_s() - t0) * 1000.0;
        duro_orch_item_free(item);
        uint64_t left = 1;
        MUST("count_messages",
             p->count_messages(p, DURO_QUEUE_WORKER, id, &left, &e), &e);
        if (left != 0) {
            fprintf(stderr, "store_bench: %llu activities survived\n",
                    (unsigned long long)left);
            exit(1);
        }
        for (size_t i = 0; locked && i < k; i++) {
            /* the worker that held the row learns it is gone */
            if (p->renew_work_item_lock(p, tokens[i], 60000, &e) == DURO_OK) {
                fprintf(stderr, "store_bench: a cancelled row renewed\n");
                exit(1);
            }
            free(tokens[i]);
            tokens[i] = NULL;
        }
        delete_instance(p, id);
    }
    free(tokens);
    qsort(ms, MASS_CANCEL_RUNS, sizeof(ms[0]), compare_double);
    printf("{\"bench\":\"store\",\"workload\":\"mass_cancel\","
           "\"provider\":\"%s\",\"rows\":\"%s\",\"threads\":1,"
           "\"n\":%ld,\"activities\":%zu,\"runs\":%d,\"ms\":%.3f,"
           "\"min_ms\":%.3f,\"max_ms\":%.3f}\n",
           provider_name, locked ? "locked" : "queued", n, k, MASS_CANCEL_RUNS,
           ms[MASS_CANCEL_RUNS / 2], ms[0], ms[MASS_CANCEL_RUNS - 1]);
    fflush(stdout);
}

/* Both variants: 1000 queued rows, then 1000 rows locked by workers (the
 * background rows are locked too by then, as on a busy store). */
static void mass_cancel(const char *url, long n)
{
    duro_provider *p = open_store(url);
    const size_t k = MASS_CANCEL_ACTIVITIES;
    schedule_activities(p, "bench-background", (size_t)n);
    duro_event *events = calloc(k + 2, sizeof(*events));
    duro_activity_ref *refs = calloc(k, sizeof(*refs));
    mass_cancel_runs(p, n, 0, events, refs);
    if (lock_all_work(p, NULL, 0) != (size_t)n) {
        fprintf(stderr, "store_bench: background rows missing\n");
        exit(1);
    }
    mass_cancel_runs(p, n, 1, events, refs);
    free(events);
    free(refs);
    delete_instance(p, "bench-background");
    duro_provider_close(p);
}

/* ---- bulk -------------------------------------------------------------- */

static void start_instance(duro_provider *p, const char *id, const char *name)
{
    duro_error e;
    duro_work_item start = {
        .kind = DURO_WORK_START, .instance_id = id, .name = name};
    MUST("enqueue start", p->enqueue_for_orchestrator(p, &start, 0, &e), &e);
}

/* Starts `id` and runs one turn that completes it (Started, Completed). */
static void run_to_completion(duro_provider *p, const char *id,
                              const char *name)
{
    start_instance(p, id, name);
    duro_orch_item *item = fetch_one(p);
    duro_event ev[2] = {
        {.event_id = 1, .kind = DURO_EVENT_ORCHESTRATION_STARTED, .name = name},
        {.event_id = 2,
         .kind = DURO_EVENT_ORCHESTRATION_COMPLETED,
         .payload = "{\"ok\":true}"}};
    duro_instance_meta meta = {.status = DURO_STATUS_COMPLETED,
                               .name = name,
                               .output = "{\"ok\":true}"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = 2,
                         .meta = &meta};
    duro_error e;
    MUST("ack (complete)",
         p->ack_orchestration_item(p, item->lock_token, &ack, &e), &e);
    duro_orch_item_free(item);
}

/* Instances of `name` with a cancellation requested, and in all. */
static size_t requested_of(duro_provider *p, const char *name, size_t *total)
{
    duro_instance_filter f = {.name = name};
    duro_instance_list *l = NULL;
    duro_error e;
    MUST("list_instances", p->list_instances(p, &f, &l, &e), &e);
    size_t n = 0;
    for (size_t i = 0; i < l->count; i++)
        n += l->items[i].cancel_requested_ms != 0;
    *total = l->count;
    duro_instance_list_free(l);
    return n;
}

typedef struct writer_thread {
    duro_provider *p;
    _Atomic int stop;
    double max_ms;
    long writes;
} writer_thread;

/* Raises events on a live instance, one a millisecond (a busy runtime's
 * commits, not a saturating loop), until told to stop; keeps its slowest
 * write. */
static void *writer_loop(void *arg)
{
    writer_thread *t = arg;
    duro_work_item ev = {.kind = DURO_WORK_EXTERNAL_EVENT,
                         .instance_id = "bulk-live",
                         .name = "tick"};
    while (!atomic_load(&t->stop)) {
        duro_error e;
        double t0 = now_s();
        MUST("enqueue event", t->p->enqueue_for_orchestrator(t->p, &ev, 0, &e),
             &e);
        double ms = (now_s() - t0) * 1000.0;
        if (ms > t->max_ms)
            t->max_ms = ms;
        t->writes++;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void remove_store(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char file[700];
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof(file), "%s%s", path, suffixes[i]);
        unlink(file);
    }
}

static void print_runs(const char *workload, long n, long other, double *ms,
                       const char *extra)
{
    qsort(ms, BULK_RUNS, sizeof(ms[0]), compare_double);
    printf("{\"bench\":\"store\",\"workload\":\"%s\",\"provider\":\"%s\","
           "\"instances\":%ld,\"other\":%ld,\"batch\":%d,\"runs\":%d,"
           "\"ms\":%.3f,\"min_ms\":%.3f,\"max_ms\":%.3f%s}\n",
           workload, provider_name, n, other, DURO_BULK_BATCH_MAX, BULK_RUNS,
           ms[BULK_RUNS / 2], ms[0], ms[BULK_RUNS - 1], extra);
    fflush(stdout);
}

/* Each run on a fresh store file in dir. */
static void bulk(const char *dir, long n)
{
    long other = n / 10 > 0 ? n / 10 : 1;
    double cancel_ms[BULK_RUNS], dry_ms[BULK_RUNS], purge_ms[BULK_RUNS];
    double write_max[BULK_RUNS];
    long writes = 0;
    char path[600], url[640], id[64];
    for (int run = 0; run < BULK_RUNS; run++) {
        /* Cancel by name: n of "bulk-a" beside `other` of "bulk-b". */
        snprintf(path, sizeof(path), "%s/bulk-cancel-%d.db", dir, run);
        snprintf(url, sizeof(url), "sqlite:%s", path);
        duro_provider *p = open_store(url);
        for (long i = 0; i < n; i++) {
            snprintf(id, sizeof(id), "a-%07ld", i);
            start_instance(p, id, "bulk-a");
        }
        for (long i = 0; i < other; i++) {
            snprintf(id, sizeof(id), "b-%07ld", i);
            start_instance(p, id, "bulk-b");
        }
        duro_bulk_filter f = {.name = "bulk-a"};
        duro_bulk_result *r = NULL;
        duro_error e;
        double t0 = now_s();
        MUST("cancel_matching (dry run)",
             p->cancel_matching(p, &f, "bench", "store_bench", 1, 0, &r, &e),
             &e);
        dry_ms[run] = (now_s() - t0) * 1000.0;
        duro_bulk_result_free(r);
        t0 = now_s();
        MUST("cancel_matching",
             p->cancel_matching(p, &f, "bench", "store_bench", 0, 0, &r, &e),
             &e);
        cancel_ms[run] = (now_s() - t0) * 1000.0;
        size_t total = 0;
        if (r->count != (uint64_t)n ||
            requested_of(p, "bulk-a", &total) != (size_t)n) {
            fprintf(stderr, "store_bench: cancelled %llu of %ld\n",
                    (unsigned long long)r->count, n);
            exit(1);
        }
        duro_bulk_result_free(r);
        if (requested_of(p, "bulk-b", &total) != 0 || total != (size_t)other) {
            fprintf(stderr, "store_bench: the other name was touched\n");
            exit(1);
        }
        duro_provider_close(p);
        remove_store(path);

        /* Purge n finished instances while a writer keeps writing. */
        snprintf(path, sizeof(path), "%s/bulk-purge-%d.db", dir, run);
        snprintf(url, sizeof(url), "sqlite:%s", path);
        p = open_store(url);
        for (long i = 0; i < n; i++) {
            snprintf(id, sizeof(id), "d-%07ld", i);
            run_to_completion(p, id, "bulk-done");
        }
        start_instance(p, "bulk-live", "bulk-live");
        writer_thread w = {.p = p};
        pthread_t tid;
        pthread_create(&tid, NULL, writer_loop, &w);
        duro_bulk_filter pf = {.finished_before_ms = INT64_MAX};
        t0 = now_s();
        MUST("purge_instances", p->purge_instances(p, &pf, 0, 0, &r, &e), &e);
        purge_ms[run] = (now_s() - t0) * 1000.0;
        atomic_store(&w.stop, 1);
        pthread_join(tid, NULL);
        write_max[run] = w.max_ms;
        writes += w.writes;
        if (r->count != (uint64_t)n || requested_of(p, "bulk-done", &total) ||
            total != 0) {
            fprintf(stderr, "store_bench: purged %llu of %ld\n",
                    (unsigned long long)r->count, n);
            exit(1);
        }
        duro_bulk_result_free(r);
        if (requested_of(p, "bulk-live", &total) != 0 || total != 1) {
            fprintf(stderr, "store_bench: the live instance was touched\n");
            exit(1);
        }
        duro_provider_close(p);
        remove_store(path);
    }
    print_runs("bulk_cancel_by_name_dry_run", n, other, dry_ms, "");
    print_runs("bulk_cancel_by_name", n, other, cancel_ms,
               ",\"other_untouched\":true");
    qsort(write_max, BULK_RUNS, sizeof(write_max[0]), compare_double);
    char extra[160];
    snprintf(extra, sizeof(extra),
             ",\"concurrent_writes\":%ld,\"slowest_write_ms\":%.3f,"
             "\"slowest_write_max_ms\":%.3f",
             writes, write_max[BULK_RUNS / 2], write_max[BULK_RUNS - 1]);
    print_runs("bulk_purge", n, 0, purge_ms, extra);
}

/* ---- main -----------------------------------------------------------------
 */

static void usage(void)
{
    fprintf(stderr,
            "usage: store_bench [--workload work_roundtrip|orch_roundtrip|"
            "mass_cancel|bulk|all] [--n N] [--threads T] "
            "[--url sqlite:PATH]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *workload = "all";
    const char *url = NULL;
    long n = 0;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--workload") == 0)
            workload = argv[++i];
        else if (strcmp(argv[i], "--n") == 0)
            n = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--url") == 0)
            url = argv[++i];
        else
            usage();
    }
    int all = strcmp(workload, "all") == 0;
    if (!all && strcmp(workload, "work_roundtrip") != 0 &&
        strcmp(workload, "orch_roundtrip") != 0 &&
        strcmp(workload, "mass_cancel") != 0 && strcmp(workload, "bulk") != 0)
        usage();
    if (n < 0 || threads < 0 || threads > 64)
        usage();

    char dir[256] = "", url_buf[512];
    if (url == NULL) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/store-bench-XXXXXX",
                 tmp != NULL ? tmp : "/tmp");
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(url_buf, sizeof(url_buf), "sqlite:%s/bench.db", dir);
        url = url_buf;
    }
    if (strncmp(url, "postgres", 8) == 0)
        provider_name = "postgres";

    int thread_counts[2] = {1, 4}, counts = 2;
    if (threads > 0) {
        thread_counts[0] = threads;
        counts = 1;
    }
    if (all || strcmp(workload, "work_roundtrip") == 0)
        for (int i = 0; i < counts; i++)
            work_roundtrip(url, n > 0 ? n : 20000, thread_counts[i]);
    if (all || strcmp(workload, "orch_roundtrip") == 0)
        for (int i = 0; i < counts; i++)
            orch_roundtrip(url, n > 0 ? n : 5000, thread_counts[i]);
    if (all || strcmp(workload, "mass_cancel") == 0)
        mass_cancel(url, n > 0 ? n : 10000);
    if ((all || strcmp(workload, "bulk") == 0) && dir[0] == '\0')
        fprintf(stderr, "store_bench: bulk needs fresh stores of its own; "
                        "run it without --url\n");
    else if (all || strcmp(workload, "bulk") == 0)
        bulk(dir, n > 0 ? n : 10000);

    if (dir[0] != '\0') {
        static const char *const suffixes[] = {"", "-wal", "-shm"};
        char path[600];
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof(path), "%s/bench.db%s", dir, suffixes[i]);
            unlink(path);
        }
        rmdir(dir);
    }
    return 0;
}
