/* orch_bench.c - end-to-end throughput and latency of orchestrations on a
 * real runtime (default options) and a fresh SQLite file in WAL mode: many
 * short chains at once (on one runtime process or several), one wide
 * fan-out, one long sequential chain. Each workload runs in its own forked
 * process so its peak RSS is its own. Prints one JSON object per line. Not a
 * timed test: CTest runs it once with a tiny N as a smoke test.
 *
 * orch_bench [--workload chain|fanout|long|long_cold|all] [--n N]
 *            [--url sqlite:PATH|postgresql://...] [--procs P]
 *            [--cpu-cap C]
 *
 * Methods (see bench/RESULTS.md):
 *  chain   N concurrent 5-step chains: N instances (default 1000), each 5
 *          sequential no-op activities.
 *          All N are started through the client first, then the runtime is
 *          started and the clock runs from duro_runtime_start() until the
 *          runtime's completed-orchestrations counter reaches N (polled every
 *          millisecond). orch_per_s = N / wall, act_per_s = 5N / wall.
 *          p50/p99 latency per instance comes from its history: timestamp of
 *          the terminal event minus that of OrchestrationStarted (both are
 *          "when the turn that wrote it began", ms resolution), so it excludes
 *          the time an instance waited in the queue for its first turn.
 *          With --procs P > 1 (chain only) the chains run on P runtime
 *          processes sharing the store (the --url, or the workload's SQLite
 *          file). The workload process starts the N instances through a
 *          client and destroys it, then forks the P processes before it
 *          opens anything else (a provider has threads; a child forked
 *          beside them could inherit a lock one of them held). Each creates
 *          its own registry and runtime (default options), says so in
 *          shared memory and waits; once all have, the clock starts and the
 *          workload process tells them to start their runtimes (so, as with
 *          one process, opening the store is outside the clock). Each runs
 *          until the workload process sets a stop flag in shared memory,
 *          then shuts down and adds its turn counter there (`turns` is the
 *          sum); it also ends when the workload process is gone. Every
 *          millisecond each process copies its runtime's completed, failed
 *          and cancelled counters into shared memory; the clock runs until
 *          their sum of completed reaches N (polled every millisecond, as
 *          with one process), and the store then confirms
 *          that it holds N Completed chains (one duro_client_list() by
 *          status, after the clock). Until then the workload process sends
 *          the server nothing: listing the store every 5 ms cost it about
 *          a quarter of the run's statement time at N = 1000. A Failed or
 *          Cancelled chain, a runtime process that ends early, or
 *          DEADLINE_MS fails the run and kills the runtime processes.
 *          With --cpu-cap C (chain only) the chains run on --procs runtime
 *          processes as above, one included, and each is put in a cgroup of
 *          its own whose CPU time is capped at C CPUs (the cgroup v1 `cpu`
 *          controller, or v2's; root): as if each ran on a machine of its
 *          own with C CPUs while the store keeps the rest. On a machine that
 *          one uncapped process already saturates (2 cores and a local
 *          PostgreSQL server), this is how a second process can be seen
 *          adding throughput - or not, when the store makes processes wait
 *          for each other. The line carries "cpu_cap".
 *          Latency as above. cpu_busy_pct (both forms) is the share of
 *          the machine's CPU time (all cores, /proc/stat) that was busy
 *          while the clock ran: near 100 the machine, server included, was
 *          saturated. peak_rss_kb
 *          is then the largest runtime process's (RUSAGE_CHILDREN), and the
 *          label says how many processes ran. Every chain line carries
 *          "procs".
 *  fanout  one instance joining N (default 1000) no-op activities; wall time
 *          from duro_client_start() (runtime already running) to completion.
 *  long    one instance of N (default 2000) sequential no-op activities.
 *          Each activity records when it began (CLOCK_MONOTONIC, ns); the
 *          interval between consecutive activities is one full step (the turn
 *          that consumes a completion and schedules the next activity, plus
 *          the activity's round trip). first_turn_ms / last_turn_ms are the
 *          mean of the first and last `window` (100) intervals.
 *          step_ms_at_E (E = 10, 100, 1000, 10000, those the run reaches)
 *          is the median of the 10 intervals from step E/2 on, the steps
 *          whose turns read E to E + 20 events of history: flat on a warm
 *          cache (no replay), growing with E without one (long_cold).
 *  long_cold  the same with fiber_cache_size 0: no suspended orchestration
 *          is kept, so every turn replays the whole history so far (turn k
 *          re-executes k steps). Shows what replay costs, and what the fiber
 *          cache saves, when instances outnumber the cache.
 *  peak_rss_kb is getrusage(RUSAGE_SELF).ru_maxrss of the workload's process
 *  at its end (chain with --procs > 1: see above). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

#define CHAIN_STEPS 5
#define LONG_WINDOW 100
#define DEADLINE_MS 600000 /* a workload that takes longer is broken */
#define PROCS_MAX 64

static const char *provider_name = "sqlite";
static double cpu_cap; /* --cpu-cap: CPUs per runtime process; 0: none */

/* chain with --procs > 1: the runtime processes this process forked, which
 * die() kills (and reaps) so a failed run leaves none behind. */
static pid_t proc_pids[PROCS_MAX]; /* 0: not running (reaped or never) */
static int proc_count;

/* Shared with the runtime processes: MAP_SHARED, mapped before the forks. */
typedef struct procs_shared {
    _Atomic int ready; /* runtime processes with a runtime created */
    _Atomic int go;    /* set by the workload process: start the runtimes */
    _Atomic int stop;  /* set by the workload process */
    _Atomic uint64_t turns[PROCS_MAX]; /* each process's, after shutdown */
    /* each process's runtime counters, copied every millisecond */
    _Atomic uint64_t completed[PROCS_MAX];
    _Atomic uint64_t failed[PROCS_MAX]; /* failed or cancelled */
} procs_shared;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_since(int64_t t0_ns)
{
    return (double)(mono_ns() - t0_ns) / 1e6;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000,
                          .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void sleep_ms(int64_t ms)
{
    sleep_us(ms * 1000);
}

/* The machine's busy and total CPU time so far (/proc/stat, clock ticks;
 * busy is all but idle and iowait), both 0 where there is no /proc/stat. */
static void cpu_ticks(unsigned long long *busy, unsigned long long *total)
{
    unsigned long long v[8] = {0};
    *busy = *total = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                     &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got != 8)
        return;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];
}

/* The share of the machine's CPU time that was busy since cpu_ticks()
 * gave busy0, total0 (0..100; -1 when unknown). */
static double cpu_busy_pct(unsigned long long busy0, unsigned long long total0)
{
    unsigned long long busy, total;
    cpu_ticks(&busy, &total);
    if (total <= total0)
        return -1;
    return 100.0 * (double)(busy - busy0) / (double)(total - total0);
}

static void uncap_all(int procs);

/* Kills and reaps the runtime processes, and removes their cgroups
 * (--cpu-cap). */
static void kill_procs(void)
{
    for (int i = 0; i < proc_count; i++) {
        if (proc_pids[i] > 0) {
            kill(proc_pids[i], SIGKILL);
            waitpid(proc_pids[i], NULL, 0);
            proc_pids[i] = 0;
        }
    }
    if (cpu_cap > 0)
        uncap_all(proc_count);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "orch_bench: %s: %s (%s)\n", what, duro_errname(rc),
            duro_errmsg());
    kill_procs();
    exit(1);
}

#define MUST(what, expr)                                                       \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != DURO_OK)                                                    \
            die(what, rc_);                                                    \
    } while (0)

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* ---- user code ----------------------------------------------------------- */

static int act_noop(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    (void)out;
    return DURO_OK;
}

/* long: records when activity number `in` began. */
static int64_t *step_began_ns;
static long step_count;

static int act_stamp(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)out;
    long i = strtol(in ? in : "-1", NULL, 10);
    if (i >= 0 && i < step_count)
        step_began_ns[i] = mono_ns();
    return DURO_OK;
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    for (int i = 0; i < CHAIN_STEPS; i++) {
        duro_task *t = duro_call_activity(o, "Noop", NULL);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
    }
    return DURO_OK;
}

/* The task array lives on the fiber's stack (8 bytes a task; the default
 * stack is 256 KiB): orchestration code must not hold heap memory across an
 * await, and memory shared between engines is unsafe because a runtime may
 * briefly hold two engines of one instance (see bench/RESULTS.md). */
#define FANOUT_MAX 8192

static int orch_fanout(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *tasks[FANOUT_MAX];
    long n = in ? strtol(in, NULL, 10) : 0;
    if (n < 1 || n > FANOUT_MAX)
        return duro_fail(out, "fan-out width out of range");
    for (long i = 0; i < n; i++)
        tasks[i] = duro_call_activity(o, "Noop", NULL);
    if (duro_join_n(o, tasks, (size_t)n) != DURO_OK)
        return duro_fail(out, "a fanned-out activity failed");
    return DURO_OK;
}

static int orch_long(duro_orch *o, const char *in, duro_result *out)
{
    long n = in ? strtol(in, NULL, 10) : 0;
    for (long i = 0; i < n; i++) {
        duro_task *t =
            duro_call_activity(o, "Stamp", duro_sprintf(o, "%ld", i));
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
    }
    return DURO_OK;
}

/* ---- harness ------------------------------------------------------------- */

typedef struct bench_env {
    duro_registry *reg;
    duro_runtime *rt;
    duro_client *client;
} bench_env;

static duro_registry *registry_make(void)
{
    duro_registry *reg;
    MUST("registry_create", duro_registry_create(&reg));
    MUST("add Noop", duro_registry_add_activity(reg, "Noop", act_noop, NULL));
    MUST("add Stamp",
         duro_registry_add_activity(reg, "Stamp", act_stamp, NULL));
    MUST("add Chain",
         duro_registry_add_orchestration(reg, "Chain", NULL, orch_chain, NULL));
    MUST("add Fanout", duro_registry_add_orchestration(reg, "Fanout", NULL,
                                                       orch_fanout, NULL));
    MUST("add Long",
         duro_registry_add_orchestration(reg, "Long", NULL, orch_long, NULL));
    return reg;
}

/* fiber_cache_size: -1 keeps the default. */
static void env_init(bench_env *e, const char *url, long fiber_cache_size)
{
    memset(e, 0, sizeof(*e));
    e->reg = registry_make();
    duro_runtime_options o;
    duro_runtime_options_init(&o); /* the defaults are what is measured */
    if (fiber_cache_size >= 0)
        o.fiber_cache_size = (size_t)fiber_cache_size;
    MUST("runtime_create", duro_runtime_create(url, e->reg, &o, &e->rt));
    MUST("client_create", duro_client_create(url, &e->client));
}

static void env_done(bench_env *e)
{
    MUST("runtime_shutdown", duro_runtime_shutdown(e->rt, 10000));
    duro_runtime_destroy(e->rt);
    duro_client_destroy(e->client);
    duro_registry_destroy(e->reg);
}

/* Waits until the runtime has completed `n` orchestrations (polled every
 * millisecond); exits on failures or after DEADLINE_MS. */
static void wait_completed(duro_runtime *rt, uint64_t n)
{
    int64_t t0 = mono_ns();
    for (;;) {
        duro_metrics m;
        duro_runtime_metrics(rt, &m);
        if (m.orchestrations_failed + m.orchestrations_cancelled > 0) {
            fprintf(stderr, "orch_bench: %llu orchestration(s) failed\n",
                    (unsigned long long)m.orchestrations_failed);
            exit(1);
        }
        if (m.orchestrations_completed >= n)
            return;
        if (ms_since(t0) > DEADLINE_MS) {
            fprintf(stderr, "orch_bench: %llu of %llu completed after %d s\n",
                    (unsigned long long)m.orchestrations_completed,
                    (unsigned long long)n, DEADLINE_MS / 1000);
            exit(1);
        }
        sleep_ms(1);
    }
}

/* Confirms completion through the client (the store, not the counter). */
static void expect_completed(duro_client *c, const char *id)
{
    duro_instance_info *info = NULL;
    MUST("get_status", duro_client_get_status(c, id, &info));
    if (info->status != DURO_STATUS_COMPLETED) {
        fprintf(stderr, "orch_bench: %s is %s (%s)\n", id,
                duro_status_name(info->status), info->error ? info->error : "");
        exit(1);
    }
    duro_free(info);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *sorted, long n, double p)
{
    long rank = (long)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

/* ---- workloads ----------------------------------------------------------- */

/* Starts chain-0 .. chain-(n-1); returns how long that took (ms). */
static double chain_enqueue(duro_client *c, long n)
{
    char id[64];
    int64_t t0 = mono_ns();
    for (long i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "chain-%ld", i);
        MUST("client_start", duro_client_start(c, id, "Chain", NULL, NULL));
    }
    return ms_since(t0);
}

/* Checks that every chain completed and takes p50/p99 of their latencies
 * from their histories. */
static void chain_latency(duro_client *c, long n, double *p50, double *p99)
{
    char id[64];
    double *lat = calloc((size_t)n, sizeof(*lat));
    if (lat == NULL)
        die("calloc", DURO_NOMEM);
    for (long i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "chain-%ld", i);
        expect_completed(c, id);
        duro_history *h = NULL;
        MUST("read_history", duro_client_read_history(c, id, 0, &h));
        if (h->count < 2 ||
            h->events[0].kind != DURO_EVENT_ORCHESTRATION_STARTED ||
            h->events[h->count - 1].kind !=
                DURO_EVENT_ORCHESTRATION_COMPLETED) {
            fprintf(stderr, "orch_bench: unexpected history for %s\n", id);
            exit(1);
        }
        lat[i] = (double)(h->events[h->count - 1].timestamp_ms -
                          h->events[0].timestamp_ms);
        duro_history_free(h);
    }
    qsort(lat, (size_t)n, sizeof(*lat), compare_double);
    *p50 = percentile(lat, n, 50);
    *p99 = percentile(lat, n, 99);
    free(lat);
}

static void print_chain(long n, int procs, double wall_ms, double enqueue_ms,
                        double p50, double p99, uint64_t turns, long rss_kb,
                        double busy_pct)
{
    char label[96];
    int len = snprintf(label, sizeof(label), "%ld concurrent %d-step chains", n,
                       CHAIN_STEPS);
    if (procs > 1)
        len += snprintf(label + len, sizeof(label) - (size_t)len,
                        " on %d processes", procs);
    if (cpu_cap > 0)
        snprintf(label + len, sizeof(label) - (size_t)len, ", %.2f CPU each",
                 cpu_cap);
    printf("{\"bench\":\"orch\",\"workload\":\"chain\",\"label\":\"%s\","
           "\"provider\":\"%s\",\"n\":%ld,\"procs\":%d,\"cpu_cap\":%.2f,"
           "\"activities\":%ld,"
           "\"orch_per_s\":%.1f,\"act_per_s\":%.1f,\"p50_ms\":%.1f,"
           "\"p99_ms\":%.1f,\"wall_ms\":%.1f,\"enqueue_ms\":%.1f,"
           "\"turns\":%llu,\"peak_rss_kb\":%ld,\"cpu_busy_pct\":%.1f}\n",
           label, provider_name, n, procs, cpu_cap, n * CHAIN_STEPS,
           (double)n * 1000.0 / wall_ms,
           (double)(n * CHAIN_STEPS) * 1000.0 / wall_ms, p50, p99, wall_ms,
           enqueue_ms, (unsigned long long)turns, rss_kb, busy_pct);
}

static void bench_chain(const char *url, long n)
{
    bench_env e;
    env_init(&e, url, -1);
    double enqueue_ms = chain_enqueue(e.client, n);
    unsigned long long busy0, total0;
    cpu_ticks(&busy0, &total0);
    int64_t t0 = mono_ns();
    MUST("runtime_start", duro_runtime_start(e.rt));
    wait_completed(e.rt, (uint64_t)n);
    double wall_ms = ms_since(t0);
    double busy_pct = cpu_busy_pct(busy0, total0);
    duro_metrics m;
    duro_runtime_metrics(e.rt, &m);
    double p50, p99;
    chain_latency(e.client, n, &p50, &p99);
    env_done(&e);
    print_chain(n, 1, wall_ms, enqueue_ms, p50, p99, m.turns, peak_rss_kb(),
                busy_pct);
}

/* --cpu-cap: the cgroup of runtime process `index` of workload process
 * `parent`, under the cgroup v1 cpu controller or, failing that, under a
 * cgroup v2 root that offers the cpu controller (enabled for its children
 * in cgroup.subtree_control, which this does not do); "" when neither is
 * there. */
static void cap_path(char *out, size_t size, pid_t parent, int index, int *v2)
{
    FILE *f = fopen("/sys/fs/cgroup/cgroup.controllers", "r");
    char line[256] = "";
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    *v2 = access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) != 0 &&
          strstr(line, "cpu") != NULL;
    if (!*v2 && access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) != 0) {
        out[0] = '\0';
        return;
    }
    snprintf(out, size, "/sys/fs/cgroup/%sorch_bench.%ld.%d", *v2 ? "" : "cpu/",
             (long)parent, index);
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Moves this process (no threads yet) into a cgroup of its own capped at
 * cpu_cap CPUs; exits 1 saying why when it cannot. */
static void cap_self(pid_t parent, int index)
{
    char dir[256], text[64];
    int v2;
    cap_path(dir, sizeof(dir), parent, index, &v2);
    long period = 100000, quota = (long)(cpu_cap * (double)period);
    if (v2)
        snprintf(text, sizeof(text), "%ld %ld\n", quota, period);
    else
        snprintf(text, sizeof(text), "%ld\n", quota);
    char pid[32];
    snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (dir[0] == '\0' || (mkdir(dir, 0755) != 0 && errno != EEXIST) ||
        (!v2 && write_file(dir, "cpu.cfs_period_us", "100000\n") != 0) ||
        write_file(dir, v2 ? "cpu.max" : "cpu.cfs_quota_us", text) != 0 ||
        write_file(dir, "cgroup.procs", pid) != 0) {
        fprintf(stderr,
                "orch_bench: --cpu-cap: cannot cap this process in a cgroup "
                "of its own (%s: %s); it needs root and the cgroup v1 cpu "
                "controller or cgroup v2 with cpu\n",
                dir[0] != '\0' ? dir : "no cpu controller", strerror(errno));
        _exit(1);
    }
}

/* The workload process removes the runtime processes' cgroups (empty once
 * they are reaped). */
static void uncap_all(int procs)
{
    for (int i = 0; i < procs; i++) {
        char dir[256];
        int v2;
        cap_path(dir, sizeof(dir), getpid(), i, &v2);
        if (dir[0] != '\0')
            rmdir(dir);
    }
}

/* One of the chain workload's runtime processes: runs a runtime on the
 * store until the workload process (`parent`) sets sh->stop, then shuts
 * down, records its turns in slot `index` and exits 0. Exits 1 on any
 * failure, and at once when `parent` is gone (however it died). */
static void chain_proc(const char *url, procs_shared *sh, int index,
                       pid_t parent)
{
    if (cpu_cap > 0)
        cap_self(parent, index);
    duro_registry *reg = registry_make();
    duro_runtime_options o;
    duro_runtime_options_init(&o); /* the defaults are what is measured */
    duro_runtime *rt;
    MUST("runtime_create", duro_runtime_create(url, reg, &o, &rt));
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go)) {
        if (getppid() != parent)
            _exit(1);
        sleep_us(50);
    }
    MUST("runtime_start", duro_runtime_start(rt));
    duro_metrics m;
    while (!atomic_load(&sh->stop)) {
        if (getppid() != parent) /* nobody waits for a result */
            _exit(1);
        duro_runtime_metrics(rt, &m);
        atomic_store(&sh->completed[index], m.orchestrations_completed);
        atomic_store(&sh->failed[index],
                     m.orchestrations_failed + m.orchestrations_cancelled);
        sleep_ms(1);
    }
    MUST("runtime_shutdown", duro_runtime_shutdown(rt, 10000));
    duro_runtime_metrics(rt, &m);
    atomic_store(&sh->turns[index], m.turns);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    exit(0);
}

/* Fails the run when a runtime process has ended before it was told to. */
static void check_procs(void)
{
    for (int i = 0; i < proc_count; i++) {
        int status;
        if (proc_pids[i] > 0 &&
            waitpid(proc_pids[i], &status, WNOHANG) == proc_pids[i]) {
            proc_pids[i] = 0;
            fprintf(stderr,
                    "orch_bench: runtime process %d ended early (status "
                    "0x%x)\n",
                    i, status);
            kill_procs();
            exit(1);
        }
    }
}

/* Waits until all `procs` runtime processes have created their runtimes,
 * checking the processes between polls; fails the run after DEADLINE_MS. */
static void wait_ready_procs(procs_shared *sh, int procs)
{
    int64_t t0 = mono_ns();
    while (atomic_load(&sh->ready) < procs) {
        check_procs();
        if (ms_since(t0) > DEADLINE_MS) {
            fprintf(stderr,
                    "orch_bench: %d of %d runtimes created after %d s\n",
                    atomic_load(&sh->ready), procs, DEADLINE_MS / 1000);
            kill_procs();
            exit(1);
        }
        sleep_us(50);
    }
}

/* Waits until the runtime processes' completed counters add up to n
 * (polled every millisecond), checking the processes between polls; fails
 * the run on a Failed or Cancelled chain or after DEADLINE_MS. */
static void wait_completed_procs(procs_shared *sh, uint64_t n)
{
    int64_t t0 = mono_ns();
    for (;;) {
        check_procs();
        uint64_t completed = 0, failed = 0;
        for (int i = 0; i < proc_count; i++) {
            completed += atomic_load(&sh->completed[i]);
            failed += atomic_load(&sh->failed[i]);
        }
        if (failed > 0) {
            fprintf(stderr,
                    "orch_bench: %llu chain(s) failed or were cancelled\n",
                    (unsigned long long)failed);
            kill_procs();
            exit(1);
        }
        if (completed >= n)
            return;
        if (ms_since(t0) > DEADLINE_MS) {
            fprintf(stderr, "orch_bench: %llu of %llu completed after %d s\n",
                    (unsigned long long)completed, (unsigned long long)n,
                    DEADLINE_MS / 1000);
            kill_procs();
            exit(1);
        }
        sleep_ms(1);
    }
}

/* Confirms through the store that it holds n Completed chains and no
 * finished chain in another state; exits otherwise. */
static void confirm_completed_in_store(duro_client *c, uint64_t n)
{
    duro_instance_filter finished;
    memset(&finished, 0, sizeof(finished));
    finished.status_mask = (1u << DURO_STATUS_COMPLETED) |
                           (1u << DURO_STATUS_FAILED) |
                           (1u << DURO_STATUS_CANCELLED);
    finished.name = "Chain";
    duro_instance_list *l = NULL;
    MUST("list", duro_client_list(c, &finished, &l));
    uint64_t completed = 0, other = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (l->items[i].status == DURO_STATUS_COMPLETED)
            completed++;
        else
            other++;
    }
    duro_instance_list_free(l);
    if (completed != n || other != 0) {
        fprintf(stderr,
                "orch_bench: the store holds %llu Completed chains and %llu "
                "Failed or Cancelled, not %llu Completed\n",
                (unsigned long long)completed, (unsigned long long)other,
                (unsigned long long)n);
        kill_procs();
        exit(1);
    }
}

/* chain on `procs` runtime processes; see the file's comment. */
static void bench_chain_procs(const char *url, long n, int procs)
{
    duro_client *c;
    MUST("client_create", duro_client_create(url, &c));
    double enqueue_ms = chain_enqueue(c, n);
    duro_client_destroy(c); /* no provider (nor its threads) across fork */
    procs_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    pid_t self = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork", DURO_ERROR);
        if (pid == 0) {
            proc_count = 0; /* the siblings are not this process's */
            chain_proc(url, sh, i, self);
        }
        proc_pids[proc_count++] = pid;
    }
    wait_ready_procs(sh, procs);
    unsigned long long busy0, total0;
    cpu_ticks(&busy0, &total0);
    int64_t t0 = mono_ns();
    atomic_store(&sh->go, 1);
    wait_completed_procs(sh, (uint64_t)n);
    double wall_ms = ms_since(t0);
    double busy_pct = cpu_busy_pct(busy0, total0);
    MUST("client_create", duro_client_create(url, &c));
    confirm_completed_in_store(c, (uint64_t)n);
    atomic_store(&sh->stop, 1);
    int failed = 0;
    uint64_t turns = 0;
    for (int i = 0; i < proc_count; i++) {
        int status = 0;
        if (waitpid(proc_pids[i], &status, 0) != proc_pids[i] ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr,
                    "orch_bench: runtime process %d failed (status 0x%x)\n", i,
                    status);
            failed = 1;
        }
        proc_pids[i] = 0;
        turns += atomic_load(&sh->turns[i]);
    }
    proc_count = 0;
    munmap(sh, sizeof(*sh));
    if (cpu_cap > 0)
        uncap_all(procs);
    if (failed)
        exit(1);
    double p50, p99;
    chain_latency(c, n, &p50, &p99);
    duro_client_destroy(c);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru); /* the largest reaped process's */
    print_chain(n, procs, wall_ms, enqueue_ms, p50, p99, turns, ru.ru_maxrss,
                busy_pct);
}

static void bench_fanout(const char *url, long n)
{
    bench_env e;
    env_init(&e, url, -1);
    MUST("runtime_start", duro_runtime_start(e.rt));
    char input[32];
    snprintf(input, sizeof(input), "%ld", n);
    int64_t t0 = mono_ns();
    MUST("client_start",
         duro_client_start(e.client, "fanout", "Fanout", input, NULL));
    wait_completed(e.rt, 1);
    double wall_ms = ms_since(t0);
    duro_metrics m;
    duro_runtime_metrics(e.rt, &m);
    expect_completed(e.client, "fanout");
    env_done(&e);
    printf("{\"bench\":\"orch\",\"workload\":\"fanout\",\"provider\":\"%s\","
           "\"n\":%ld,\"act_per_s\":%.1f,\"wall_ms\":%.1f,\"turns\":%llu,"
           "\"peak_rss_kb\":%ld}\n",
           provider_name, n, (double)n * 1000.0 / wall_ms, wall_ms,
           (unsigned long long)m.turns, peak_rss_kb());
}

/* Mean interval between the starts of activities [from, from + count]. */
static double mean_step_ms(long from, long count)
{
    return (double)(step_began_ns[from + count] - step_began_ns[from]) /
           (double)count / 1e6;
}

/* Median of the `count` intervals after activity `from`. */
static double median_step_ms(long from, long count)
{
    double *d = calloc((size_t)count, sizeof(*d));
    if (d == NULL)
        die("calloc", DURO_NOMEM);
    for (long i = 0; i < count; i++)
        d[i] = (double)(step_began_ns[from + i + 1] - step_began_ns[from + i]) /
               1e6;
    qsort(d, (size_t)count, sizeof(*d), compare_double);
    double m = percentile(d, count, 50);
    free(d);
    return m;
}

/* The longest interval between two consecutive activities. */
static double max_step_ms(long n)
{
    double m = 0;
    for (long i = 0; i + 1 < n; i++) {
        double d = (double)(step_began_ns[i + 1] - step_began_ns[i]) / 1e6;
        if (d > m)
            m = d;
    }
    return m;
}

/* long: the median step at history lengths of 10 to 10,000 events. Step i
 * (from 0) is scheduled by the turn that reads 1 + 2i events (the start,
 * then a scheduled and a completed event per step before it), so the
 * AT_WINDOW steps from step E/2 on are those of a history of E to about
 * E + 2 * AT_WINDOW events; a length the run does not reach is left out. */
#define AT_WINDOW 10
#define AT_EVENTS_COUNT 4
static const long at_events[AT_EVENTS_COUNT] = {10, 100, 1000, 10000};

static void bench_long(const char *url, long n, int cold)
{
    step_count = n;
    step_began_ns = calloc((size_t)n, sizeof(*step_began_ns));
    if (step_began_ns == NULL)
        die("calloc", DURO_NOMEM);
    bench_env e;
    env_init(&e, url, cold ? 0 : -1);
    MUST("runtime_start", duro_runtime_start(e.rt));
    char input[32];
    snprintf(input, sizeof(input), "%ld", n);
    int64_t t0 = mono_ns();
    MUST("client_start",
         duro_client_start(e.client, "long", "Long", input, NULL));
    wait_completed(e.rt, 1);
    double wall_ms = ms_since(t0);
    duro_metrics m;
    duro_runtime_metrics(e.rt, &m);
    expect_completed(e.client, "long");
    env_done(&e); /* joins the worker threads: the stamps are complete */
    long window = (n - 1) / 2 < LONG_WINDOW ? (n - 1) / 2 : LONG_WINDOW;
    double first = 0, last = 0, first_p50 = 0, last_p50 = 0;
    if (window > 0) {
        first = mean_step_ms(0, window);
        last = mean_step_ms(n - 1 - window, window);
        first_p50 = median_step_ms(0, window);
        last_p50 = median_step_ms(n - 1 - window, window);
    }
    double max_ms = max_step_ms(n);
    double at_step_ms[AT_EVENTS_COUNT];
    for (int i = 0; i < AT_EVENTS_COUNT; i++) {
        long from = at_events[i] / 2; /* the step whose turn reads E events */
        at_step_ms[i] =
            from + AT_WINDOW < n ? median_step_ms(from, AT_WINDOW) : -1;
    }
    free(step_began_ns);
    step_began_ns = NULL;
    printf(
        "{\"bench\":\"orch\",\"workload\":\"%s\",\"fiber_cache_size\":"
        "%s,\"provider\":\"%s\",\"n\":%ld,\"act_per_s\":%.1f,\"wall_ms\":%.1f,"
        "\"first_turn_ms\":%.3f,\"last_turn_ms\":%.3f,\"window\":%ld,"
        "\"first_turn_p50_ms\":%.3f,\"last_turn_p50_ms\":%.3f,"
        "\"max_turn_ms\":%.3f,\"turns\":%llu,\"replays\":%llu,"
        "\"peak_rss_kb\":%ld",
        cold ? "long_cold" : "long", cold ? "0" : "\"default\"", provider_name,
        n, (double)n * 1000.0 / wall_ms, wall_ms, first, last, window,
        first_p50, last_p50, max_ms, (unsigned long long)m.turns,
        (unsigned long long)m.replays, peak_rss_kb());
    for (int i = 0; i < AT_EVENTS_COUNT; i++)
        if (at_step_ms[i] >= 0)
            printf(",\"step_ms_at_%ld\":%.3f", at_events[i], at_step_ms[i]);
    printf("}\n");
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: orch_bench [--workload chain|fanout|long|"
            "long_cold|all] [--n N] [--url sqlite:PATH|postgresql://...] "
            "[--procs P (chain only, 1..%d)] [--cpu-cap CPUS (chain "
            "only; root)]\n",
            PROCS_MAX);
    exit(2);
}

/* Runs one workload in a child process on its own database file (or on the
 * given URL); returns 0 when it succeeded. procs > 1 only for chain. */
static int run_child(const char *workload, const char *url_arg, const char *dir,
                     long n, int procs)
{
    char url[600];
    if (url_arg != NULL)
        snprintf(url, sizeof(url), "%s", url_arg);
    else
        snprintf(url, sizeof(url), "sqlite:%s/%s.db", dir, workload);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        if (strcmp(workload, "chain") == 0 && (procs > 1 || cpu_cap > 0))
            bench_chain_procs(url, n > 0 ? n : 1000, procs);
        else if (strcmp(workload, "chain") == 0)
            bench_chain(url, n > 0 ? n : 1000);
        else if (strcmp(workload, "fanout") == 0)
            bench_fanout(url, n > 0 ? n : 1000);
        else
            bench_long(url, n > 0 ? n : 2000,
                       strcmp(workload, "long_cold") == 0);
        /* exit(), not _exit(): LeakSanitizer checks the child at exit */
        exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "orch_bench: workload %s failed (status 0x%x)\n",
                workload, status);
        return 1;
    }
    return 0;
}

static void remove_db(const char *dir, const char *workload)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char path[600];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s.db%s", dir, workload, suffixes[i]);
        unlink(path);
    }
}

int main(int argc, char **argv)
{
    const char *workload = "all";
    const char *url = NULL;
    long n = 0, procs = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--workload") == 0)
            workload = argv[++i];
        else if (strcmp(argv[i], "--n") == 0)
            n = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--url") == 0)
            url = argv[++i];
        else if (strcmp(argv[i], "--procs") == 0)
            procs = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--cpu-cap") == 0)
            cpu_cap = strtod(argv[++i], NULL);
        else
            usage();
    }
    static const char *const workloads[] = {"chain", "fanout", "long",
                                            "long_cold"};
    const int workload_count = 4;
    int all = strcmp(workload, "all") == 0;
    int known = all;
    for (int i = 0; i < workload_count; i++)
        known |= strcmp(workload, workloads[i]) == 0;
    if (!known || n < 0 ||
        (n > FANOUT_MAX && (all || strcmp(workload, "fanout") == 0))) {
        if (n > FANOUT_MAX)
            fprintf(stderr, "orch_bench: fanout supports --n up to %d\n",
                    FANOUT_MAX);
        usage();
    }
    if (procs < 1 || procs > PROCS_MAX ||
        (procs > 1 && strcmp(workload, "chain") != 0)) {
        fprintf(stderr,
                "orch_bench: --procs is 1..%d, and above 1 only with "
                "--workload chain\n",
                PROCS_MAX);
        usage();
    }
    if (!(cpu_cap >= 0 && cpu_cap <= 1024) ||
        (cpu_cap > 0 && (cpu_cap < 0.01 || strcmp(workload, "chain") != 0))) {
        fprintf(stderr, "orch_bench: --cpu-cap is 0.01..1024 CPUs, and only "
                        "with --workload chain\n");
        usage();
    }
    if (url != NULL && strncmp(url, "postgres", 8) == 0)
        provider_name = "postgres";
    else if (url != NULL && strncmp(url, "sqlite:", 7) != 0)
        provider_name = "other";

    char dir[256] = "";
    if (url == NULL) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/orch-bench-XXXXXX",
                 tmp != NULL ? tmp : "/tmp");
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 1;
        }
    }
    int failed = 0;
    for (int i = 0; i < workload_count; i++) {
        if (!all && strcmp(workload, workloads[i]) != 0)
            continue;
        failed |= run_child(workloads[i], url, dir, n, (int)procs);
        if (dir[0] != '\0')
            remove_db(dir, workloads[i]);
    }
    if (dir[0] != '\0')
        rmdir(dir);
    return failed;
}
