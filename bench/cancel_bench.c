/* cancel_bench.c - how fast a cancellation reaches running activities.
 * Prints one JSON object per line:
 *   same_process   client cancel returns -> activity observes its token
 *   cross_process  the same with the activity in another process sharing the
 *                  SQLite file (default options, and a short lock timeout)
 *   select_loser   the timer's turn commits -> the losing activity observes;
 *                  a loser cancelled before it started (its row deleted
 *                  before a worker took it) is counted apart, not timed
 *   mass_cancel    one turn cancels 1,000 outstanding activities; time until
 *                  all running ones observed it
 * Usage: cancel_bench [--workload NAME|all] [--samples N] [--dir PATH]
 *                     [--url postgresql://...]
 * Observation times travel through shared memory (CLOCK_MONOTONIC and
 * CLOCK_REALTIME, same machine). With --url each workload runs on a schema
 * of its own, dropped when the workload ends and, after a failure, at
 * exit (once the activity process is killed). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"
#ifdef DURO_BENCH_POSTGRES
#include <libpq-fe.h>

#include "providers/postgres/pg_internal.h"
#endif

#define MAX_SAMPLES 4096

typedef struct shared {
    _Atomic int started;
    _Atomic int observed;
    _Atomic int stop;
    int64_t observe_ns[MAX_SAMPLES];      /* CLOCK_MONOTONIC */
    int64_t observe_wall_us[MAX_SAMPLES]; /* CLOCK_REALTIME */
    _Atomic int started_flag[MAX_SAMPLES];
    _Atomic int observed_flag[MAX_SAMPLES];
} shared;

static shared *sh;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The activity process of cross_process, if one runs: killed when the
 * parent dies of an error, so a failed run ends instead of leaving it
 * waiting for a stop that never comes. */
static pid_t child_pid;

static void die(const char *what, int rc)
{
    fprintf(stderr, "cancel_bench: %s: %s (%s)\n", what, duro_errname(rc),
            duro_errmsg());
    if (child_pid > 0)
        kill(child_pid, SIGKILL);
    exit(1);
}

/* input: sample index. Waits for its token, records when it saw it. */
static int act_wait(duro_activity *a, const char *in, duro_result *out)
{
    int i = atoi(in);
    atomic_store(&sh->started_flag[i], 1);
    atomic_fetch_add(&sh->started, 1);
    if (duro_activity_wait_cancelled(a, 120000)) {
        sh->observe_ns[i] = mono_ns();
        sh->observe_wall_us[i] = wall_us();
        atomic_store(&sh->observed_flag[i], 1);
        atomic_fetch_add(&sh->observed, 1);
    }
    return duro_fail(out, "cancelled");
}

static int orch_wait(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Wait", in));
    return duro_ok(out, "done");
}

static int orch_select(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "Wait", in);
    duro_task *t = duro_timer(o, 50);
    duro_select(o, a, t);
    return duro_ok(out, "timer won");
}

static int orch_fanout(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    duro_task **t = duro_orch_alloc(o, sizeof(*t) * (size_t)n);
    if (t == NULL)
        return duro_fail(out, "out of memory");
    for (int i = 0; i < n; i++)
        t[i] = duro_call_activity(o, "Wait", duro_sprintf(o, "%d", i));
    duro_join_n(o, t, (size_t)n);
    return duro_ok(out, "joined");
}

static duro_registry *make_registry(int orchestrations, int activities)
{
    duro_registry *r;
    duro_registry_create(&r);
    if (activities)
        duro_registry_add_activity(r, "Wait", act_wait, NULL);
    if (orchestrations) {
        duro_registry_add_orchestration(r, "OneWait", NULL, orch_wait, NULL);
        duro_registry_add_orchestration(r, "Select", NULL, orch_select, NULL);
        duro_registry_add_orchestration(r, "Fanout", NULL, orch_fanout, NULL);
    }
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --url: a PostgreSQL server to run on instead of SQLite files; each
 * workload gets a schema of its own. */
static const char *base_url;

/* The schemas of the workloads that have not ended (--url): a workload's
 * is dropped when it ends; what a failure left is dropped at exit. */
#define MAX_SCHEMAS 8
static char schemas[MAX_SCHEMAS][64];

static const char *provider_name(void)
{
    return base_url != NULL ? "postgres" : "sqlite";
}

static void report(const char *workload, const char *variant, double *ms, int n)
{
    qsort(ms, (size_t)n, sizeof(double), cmp_double);
    double p50 = n ? ms[n / 2] : 0, p99 = n ? ms[(n * 99) / 100] : 0,
           max = n ? ms[n - 1] : 0;
    printf("{\"bench\":\"cancel\",\"workload\":\"%s\",%s\"provider\":"
           "\"%s\",\"samples\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"max_ms\":%.3f}\n",
           workload, variant, provider_name(), n, p50, p99, max);
    fflush(stdout);
}

static void reset_shared(void)
{
    memset(sh, 0, sizeof(*sh));
}

static const char *db_path(const char *dir, const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

/* The store URL of a workload: its SQLite file, or a fresh schema
 * ("bench_<pid>_<name without .db>") on the --url server. */
static void store_url(const char *path, char *out, size_t size)
{
    if (base_url == NULL) {
        snprintf(out, size, "sqlite:%s", path);
        return;
    }
    const char *name = strrchr(path, '/');
    name = name != NULL ? name + 1 : path;
    char schema[64];
    int n =
        snprintf(schema, sizeof(schema), "bench_%ld_%s", (long)getpid(), name);
    char *dot = strstr(schema, ".db");
    if (dot != NULL)
        *dot = '\0';
    (void)n;
    snprintf(out, size, "%s%cschema=%s", base_url,
             strchr(base_url, '?') ? '&' : '?', schema);
    int free_slot = -1, known = 0;
    for (int i = 0; i < MAX_SCHEMAS; i++) {
        known |= strcmp(schemas[i], schema) == 0;
        if (schemas[i][0] == '\0' && free_slot < 0)
            free_slot = i;
    }
    if (!known && free_slot >= 0)
        snprintf(schemas[free_slot], sizeof(schemas[free_slot]), "%s", schema);
}

static void drop_schema(char *schema)
{
    if (schema[0] == '\0')
        return;
#ifdef DURO_BENCH_POSTGRES
    /* libpq's part of the URL: duro's parameters (schema, pool, ...) out */
    duro__pg_config cfg;
    duro_error e;
    memset(&cfg, 0, sizeof(cfg));
    PGconn *c = NULL;
    if (duro__pg_parse_url(base_url, &cfg, &e) == DURO_OK)
        c = PQconnectdb(cfg.conninfo);
    duro__pg_config_free(&cfg);
    char sql[160];
    /* a runtime of a failed run may still hold a lock: wait for it a
     * while, not for ever */
    snprintf(sql, sizeof(sql),
             "SET lock_timeout = '10s'; SET client_min_messages = warning; "
             "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
             schema);
    PGresult *r =
        c != NULL && PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fprintf(stderr, "cancel_bench: could not drop schema %s: %s\n", schema,
                c != NULL ? PQerrorMessage(c) : "bad URL");
    PQclear(r);
    PQfinish(c);
#else
    fprintf(stderr,
            "cancel_bench: built without libpq: drop schema %s yourself\n",
            schema);
#endif
    schema[0] = '\0';
}

static void drop_schemas_left(void)
{
    if (child_pid > 0) { /* its connections go with it */
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
        child_pid = 0;
    }
    for (int i = 0; i < MAX_SCHEMAS; i++)
        drop_schema(schemas[i]);
}

static void remove_db(const char *path)
{
    if (base_url != NULL) {
        /* a schema of its own (store_url): dropped */
        const char *name = strrchr(path, '/');
        name = name != NULL ? name + 1 : path;
        char schema[64];
        snprintf(schema, sizeof(schema), "bench_%ld_%.*s", (long)getpid(),
                 (int)strcspn(name, "."), name);
        for (int i = 0; i < MAX_SCHEMAS; i++)
            if (strcmp(schemas[i], schema) == 0)
                drop_schema(schemas[i]);
        return;
    }
    char p[600];
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

static void wait_for(_Atomic int *counter, int target, int64_t timeout_ms)
{
    int64_t end = mono_ns() + timeout_ms * 1000000;
    while (atomic_load(counter) < target) {
        if (mono_ns() > end) {
            fprintf(stderr, "cancel_bench: timed out (%d of %d)\n",
                    atomic_load(counter), target);
            if (child_pid > 0)
                kill(child_pid, SIGKILL);
            exit(1);
        }
        usleep(100);
    }
}

/* Starts `batch` instances, waits until their activities run, cancels them
 * all and records cancel-return -> observe latencies. */
static int run_batches(duro_client *c, int samples, int batch, double *ms)
{
    int done = 0;
    char id[64], in[32];
    while (done < samples) {
        int n = samples - done < batch ? samples - done : batch;
        int base_started = atomic_load(&sh->started);
        int base_observed = atomic_load(&sh->observed);
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof(id), "s-%d", done + i);
            snprintf(in, sizeof(in), "%d", done + i);
            int rc = duro_client_start(c, id, "OneWait", in, NULL);
            if (rc != DURO_OK)
                die("start", rc);
        }
        wait_for(&sh->started, base_started + n, 120000);
        int64_t *returned = calloc((size_t)batch, sizeof(int64_t));
        if (returned == NULL)
            die("calloc", DURO_NOMEM);
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof(id), "s-%d", done + i);
            int rc = duro_client_cancel(c, id, "bench", NULL);
            returned[i] = mono_ns();
            if (rc != DURO_OK)
                die("cancel", rc);
        }
        wait_for(&sh->observed, base_observed + n, 120000);
        for (int i = 0; i < n; i++)
            ms[done + i] =
                (double)(sh->observe_ns[done + i] - returned[i]) / 1e6;
        free(returned);
        done += n;
    }
    return done;
}

static void bench_same_process(const char *dir, int samples)
{
    const char *path = db_path(dir, "cancel_same.db");
    remove_db(path);
    char url[600];
    store_url(path, url, sizeof(url));
    reset_shared();
    duro_registry *r = make_registry(1, 1);
    duro_runtime *rt;
    duro_client *c;
    int rc = duro_runtime_create(url, r, NULL, &rt);
    if (rc != DURO_OK || (rc = duro_runtime_start(rt)) != DURO_OK)
        die("runtime", rc);
    if ((rc = duro_client_create(url, &c)) != DURO_OK)
        die("client", rc);
    double *ms = calloc((size_t)samples, sizeof(double));
    /* one at a time: latency without queueing behind other cancels */
    int n = run_batches(c, samples, 1, ms);
    report("same_process", "", ms, n);
    free(ms);
    duro_client_destroy(c);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    remove_db(path);
}

/* Child: an activity-only runtime until told to stop. */
static void activity_process(const char *url, const duro_runtime_options *o)
{
    duro_registry *r = make_registry(0, 1);
    duro_runtime *rt;
    duro_runtime_options opts = *o;
    opts.orchestration_concurrency = 0;
    if (duro_runtime_create(url, r, &opts, &rt) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK)
        _exit(2);
    /* Also ends when the parent is gone (reparented), however it died. */
    pid_t parent = getppid();
    while (!atomic_load(&sh->stop) && getppid() == parent)
        usleep(1000);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    _exit(0);
}

static void bench_cross_process(const char *dir, int samples, int short_lock)
{
    const char *path =
        db_path(dir, short_lock ? "cancel_cross_short.db" : "cancel_cross.db");
    remove_db(path);
    char url[600];
    store_url(path, url, sizeof(url));
    reset_shared();
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    if (short_lock) {
        o.worker_lock_timeout_ms = 1000;
        o.lock_renewal_ms = 50;
    }
    o.worker_concurrency = 64;
    /* Fork before opening anything: a provider has threads, and a child
     * forked beside them could inherit a lock one of them held. Both
     * processes create the schema if needed; its migration is locked. */
    pid_t pid = fork();
    if (pid < 0)
        die("fork", DURO_ERROR);
    if (pid == 0)
        activity_process(url, &o);
    child_pid = pid;
    duro_client *c;
    int rc = duro_client_create(url, &c);
    if (rc != DURO_OK)
        die("client", rc);
    duro_registry *r = make_registry(1, 0);
    duro_runtime_options mine = o;
    mine.worker_concurrency = 0;
    duro_runtime *rt;
    if ((rc = duro_runtime_create(url, r, &mine, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK)
        die("runtime", rc);
    double *ms = calloc((size_t)samples, sizeof(double));
    int n = run_batches(c, samples, 64, ms);
    char variant[160];
    snprintf(variant, sizeof(variant),
             "\"lock_timeout_ms\":%lld,\"renewal_ms\":%lld,",
             (long long)o.worker_lock_timeout_ms, (long long)o.lock_renewal_ms);
    report("cross_process", variant, ms, n);
    atomic_store(&sh->stop, 1);
    int status;
    waitpid(pid, &status, 0);
    child_pid = 0;
    free(ms);
    duro_runtime_destroy(rt);
    duro_client_destroy(c);
    duro_registry_destroy(r);
    remove_db(path);
}

static void wait_flag(_Atomic int *flag, int64_t timeout_ms)
{
    int64_t end = mono_ns() + timeout_ms * 1000000;
    while (!atomic_load(flag)) {
        if (mono_ns() > end) {
            fprintf(stderr, "cancel_bench: timed out waiting for a flag\n");
            if (child_pid > 0)
                kill(child_pid, SIGKILL);
            exit(1);
        }
        usleep(100);
    }
}

static void bench_select_loser(const char *dir, int samples)
{
    const char *path = db_path(dir, "cancel_select.db");
    remove_db(path);
    char url[600];
    store_url(path, url, sizeof(url));
    reset_shared();
    duro_registry *r = make_registry(1, 1);
    duro_runtime *rt;
    duro_client *c;
    int rc = duro_runtime_create(url, r, NULL, &rt);
    if (rc != DURO_OK || (rc = duro_runtime_start(rt)) != DURO_OK)
        die("runtime", rc);
    if ((rc = duro_client_create(url, &c)) != DURO_OK)
        die("client", rc);
    double *turn = calloc((size_t)samples, sizeof(double));
    double *timer = calloc((size_t)samples, sizeof(double));
    int timed = 0, before_start = 0;
    char id[64], in[32];
    int batch = 8;
    for (int done = 0; done < samples; done += batch) {
        int n = samples - done < batch ? samples - done : batch;
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof(id), "sel-%d", done + i);
            snprintf(in, sizeof(in), "%d", done + i);
            if ((rc = duro_client_start(c, id, "Select", in, NULL)) != DURO_OK)
                die("start", rc);
        }
        for (int i = 0; i < n; i++) {
            int k = done + i;
            snprintf(id, sizeof(id), "sel-%d", k);
            duro_instance_info *info;
            if ((rc = duro_client_wait(c, id, 60000, &info)) != DURO_OK)
                die("wait", rc);
            duro_free(info);
            /* The timer's turn has committed. A loser that had started sees
             * its token; one that had not never will. (One that starts at
             * this very instant is counted as not started.) */
            if (!atomic_load(&sh->started_flag[k])) {
                before_start++;
                continue;
            }
            wait_flag(&sh->observed_flag[k], 60000);
            duro_history *h;
            if ((rc = duro_client_read_history(c, id, 0, &h)) != DURO_OK)
                die("history", rc);
            int64_t fire_at = 0, turn_ms = 0;
            for (size_t e = 0; e < h->count; e++) {
                if (h->events[e].kind == DURO_EVENT_TIMER_CREATED)
                    fire_at = h->events[e].fire_at_ms;
                if (h->events[e].kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED)
                    turn_ms = h->events[e].timestamp_ms;
            }
            duro_history_free(h);
            double seen_ms = (double)sh->observe_wall_us[k] / 1000.0;
            turn[timed] = seen_ms - (double)turn_ms;
            timer[timed] = seen_ms - (double)fire_at;
            timed++;
        }
    }
    char variant[160];
    snprintf(variant, sizeof(variant),
             "\"from\":\"turn_start\",\"cancelled_before_start\":%d,",
             before_start);
    report("select_loser", variant, turn, timed);
    snprintf(variant, sizeof(variant),
             "\"from\":\"timer_due\",\"cancelled_before_start\":%d,",
             before_start);
    report("select_loser", variant, timer, timed);
    free(turn);
    free(timer);
    duro_client_destroy(c);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    remove_db(path);
}

static void bench_mass_cancel(const char *dir, int n)
{
    const char *path = db_path(dir, "cancel_mass.db");
    remove_db(path);
    char url[600];
    store_url(path, url, sizeof(url));
    reset_shared();
    duro_registry *r = make_registry(1, 1);
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.worker_concurrency = n;
    duro_runtime *rt;
    duro_client *c;
    int rc = duro_runtime_create(url, r, &o, &rt);
    if (rc != DURO_OK || (rc = duro_runtime_start(rt)) != DURO_OK)
        die("runtime", rc);
    if ((rc = duro_client_create(url, &c)) != DURO_OK)
        die("client", rc);
    char in[32];
    snprintf(in, sizeof(in), "%d", n);
    if ((rc = duro_client_start(c, "mass", "Fanout", in, NULL)) != DURO_OK)
        die("start", rc);
    wait_for(&sh->started, n, 300000);
    int64_t t0 = mono_ns();
    if ((rc = duro_client_cancel(c, "mass", "bench", NULL)) != DURO_OK)
        die("cancel", rc);
    wait_for(&sh->observed, n, 300000);
    int64_t all_observed = mono_ns();
    duro_instance_info *info;
    if ((rc = duro_client_wait(c, "mass", 60000, &info)) != DURO_OK)
        die("wait", rc);
    duro_free(info);
    /* the cancelling turn's own duration: from its timestamp to the first
     * observation is bounded by the spread below; report both ends */
    int64_t first = INT64_MAX;
    for (int i = 0; i < n; i++)
        if (sh->observe_ns[i] < first)
            first = sh->observe_ns[i];
    printf("{\"bench\":\"cancel\",\"workload\":\"mass_cancel\",\"provider\":"
           "\"%s\",\"samples\":%d,\"running\":%d,\"first_observed_ms\":"
           "%.3f,\"ms\":%.3f}\n",
           provider_name(), n, n, (double)(first - t0) / 1e6,
           (double)(all_observed - t0) / 1e6);
    fflush(stdout);
    duro_client_destroy(c);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    remove_db(path);
}

int main(int argc, char **argv)
{
    const char *workload = "all";
    int samples = 1000, mass = 1000;
    char dir[256];
    snprintf(dir, sizeof(dir), "%s",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc)
            workload = argv[++i];
        else if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc)
            samples = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mass") == 0 && i + 1 < argc)
            mass = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            snprintf(dir, sizeof(dir), "%s", argv[++i]);
        else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc)
            base_url = argv[++i];
        else {
            fprintf(stderr, "usage: cancel_bench [--workload same_process|"
                            "cross_process|select_loser|mass_cancel|all] "
                            "[--samples N] [--mass N] [--dir PATH] "
                            "[--url postgresql://...]\n");
            return 2;
        }
    }
    if (samples < 1 || samples > MAX_SAMPLES || mass < 1 ||
        mass > MAX_SAMPLES) {
        fprintf(stderr, "cancel_bench: samples and mass must be 1..%d\n",
                MAX_SAMPLES);
        return 2;
    }
    sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (base_url != NULL)
        atexit(drop_schemas_left); /* after a failure (exit(1)) too */
    int all = strcmp(workload, "all") == 0;
    if (all || strcmp(workload, "same_process") == 0)
        bench_same_process(dir, samples);
    if (all || strcmp(workload, "cross_process") == 0) {
        bench_cross_process(dir, samples, 0);
        bench_cross_process(dir, samples, 1);
    }
    if (all || strcmp(workload, "select_loser") == 0)
        bench_select_loser(dir, samples);
    if (all || strcmp(workload, "mass_cancel") == 0)
        bench_mass_cancel(dir, mass);
    munmap(sh, sizeof(shared));
    return 0;
}
