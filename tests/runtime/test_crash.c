/* test_crash.c - crash recovery across processes: runs crash_worker on one
 * SQLite file, SIGKILLs it at random instants many times, lets a last run
 * finish (three_processes_one_killed_mid_activity instead runs three workers
 * at once on the file and kills the one running a given activity), then
 * checks through the client that every instance completed with
 * the expected output and exactly-once history, and through the side-effect
 * log that every scheduled activity ran at least once.
 *
 * The kill instants are random (seeded PRNG; the seed is printed, set
 * DURO_CRASH_SEED to repeat a run, DURO_CRASH_KILLS to change the count):
 * correctness must hold whenever the process dies, so the timing is input,
 * not synchronization. Every wait has a deadline.
 *
 * sequential_turns_do_not_replay (in-process, no kills) pins down a library
 * bug found while benchmarking: see its comment. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_workload.h"
#include "rt_util.h"

#ifndef CRASH_WORKER_PATH
#error "CRASH_WORKER_PATH must name the crash_worker executable"
#endif

#define DEFAULT_KILLS 25
#define FINAL_RUN_DEADLINE_MS 60000

/* ---- randomness ---------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rng_between(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static uint64_t seed_rng(const char *test)
{
    const char *env = getenv("DURO_CRASH_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : (uint64_t)duro_now_ms() ^ ((uint64_t)getpid() << 32);
    rng_state = seed;
    fprintf(stderr, "  %s: seed %llu (DURO_CRASH_SEED=%llu repeats it)\n", test,
            (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

static int kill_count(void)
{
    const char *env = getenv("DURO_CRASH_KILLS");
    int n = env ? atoi(env) : DEFAULT_KILLS;
    return n >= 0 ? n : DEFAULT_KILLS;
}

/* ---- the worker process -------------------------------------------------- */

typedef struct crash_run {
    const char *db;     /* SQLite file */
    const char *log;    /* side-effect log */
    const char *errlog; /* the workers' stderr, appended */
    const char *workload;
} crash_run;

static pid_t spawn_worker(const crash_run *r)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(r->errlog, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execl(CRASH_WORKER_PATH, CRASH_WORKER_PATH, r->db, r->log, r->workload,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Polls for the child's exit until deadline_ms (monotonic, test clock).
 * Returns 1 with *status filled when it exited, 0 on timeout. */
static int wait_child(pid_t pid, int64_t deadline_ms, int *status)
{
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 1;
        if (w < 0 && errno != EINTR) {
            *status = -1; /* no such child: reported as a failed run */
            return 1;
        }
        if (test_now_ms() >= deadline_ms)
            return 0;
        test_sleep_ms(2);
    }
}

static void kill_and_reap(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

static void print_file(const char *path, const char *title)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[1024];
    int n = 0;
    fprintf(stderr, "  --- %s ---\n", title);
    while (fgets(line, sizeof(line), f) != NULL && n++ < 200)
        fprintf(stderr, "  | %s", line);
    fclose(f);
}

/* 1 when the side-effect log holds a line written by process `pid`. */
static int log_has_pid(const char *log, pid_t pid, off_t *scanned)
{
    int fd = open(log, O_RDONLY);
    if (fd < 0)
        return 0;
    char buf[8192];
    char want[32];
    int wn = snprintf(want, sizeof(want), "%ld ", (long)pid);
    int found = 0;
    /* Lines start at *scanned: only new lines are read, whole lines only. */
    off_t at = *scanned;
    ssize_t n;
    while (!found && (n = pread(fd, buf, sizeof(buf) - 1, at)) > 0) {
        buf[n] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            if (strncmp(line, want, (size_t)wn) == 0)
                found = 1;
            at += nl - line + 1;
            line = nl + 1;
        }
        if (line == buf)
            break; /* a partial line longer than the buffer: stop */
    }
    *scanned = at;
    close(fd);
    return found;
}

typedef struct kill_stats {
    int killed;       /* runs ended by SIGKILL */
    int exited_early; /* runs that finished before their kill */
    int no_activity;  /* heavy: runs killed before any activity started */
    int64_t min_ms, max_ms;
} kill_stats;

/* Runs the worker `kills` times, each killed at a random instant. With
 * during_activity, the kill instant is drawn after the run's first activity
 * has started (10..250 ms later), so it lands while activities execute. */
static void kill_loop(const crash_run *r, int kills, int during_activity,
                      kill_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->min_ms = INT64_MAX;
    off_t scanned = 0;
    for (int i = 0; i < kills; i++) {
        pid_t pid = spawn_worker(r);
        CHECK_MSG(pid > 0, "fork failed: %s", strerror(errno));
        int64_t t0 = test_now_ms();
        int status = 0, exited = 0;
        if (during_activity) {
            int64_t deadline = t0 + 3000;
            while (!log_has_pid(r->log, pid, &scanned)) {
                if (test_now_ms() >= deadline) {
                    st->no_activity++;
                    break;
                }
                if (waitpid(pid, &status, WNOHANG) == pid) {
                    exited = 1;
                    break;
                }
                test_sleep_ms(1);
            }
            if (!exited)
                exited = wait_child(pid, test_now_ms() + rng_between(10, 250),
                                    &status);
        } else {
            exited = wait_child(pid, t0 + rng_between(30, 400), &status);
        }
        if (exited) {
            /* Finished on its own: it must have succeeded. */
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "run %d: worker ended with status 0x%x before its kill",
                      i, status);
            st->exited_early++;
            continue;
        }
        int64_t ran = test_now_ms() - t0;
        kill_and_reap(pid);
        st->killed++;
        if (ran < st->min_ms)
            st->min_ms = ran;
        if (ran > st->max_ms)
            st->max_ms = ran;
    }
}

/* The last run, left to finish; fails the test if it does not exit 0 within
 * FINAL_RUN_DEADLINE_MS. */
static void final_run(const crash_run *r)
{
    int64_t t0 = test_now_ms();
    pid_t pid = spawn_worker(r);
    CHECK_MSG(pid > 0, "fork failed: %s", strerror(errno));
    int status = 0;
    if (!wait_child(pid, t0 + FINAL_RUN_DEADLINE_MS, &status)) {
        kill_and_reap(pid);
        print_file(r->errlog, "worker stderr");
        test_fail(__FILE__, __LINE__,
                  "the final worker run did not finish within %d ms",
                  FINAL_RUN_DEADLINE_MS);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_file(r->errlog, "worker stderr");
        test_fail(__FILE__, __LINE__,
                  "the final worker run ended with status 0x%x (exit %d, "
                  "signal %d)",
                  status, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    fprintf(stderr, "  final run: %lld ms\n", (long long)(test_now_ms() - t0));
}

/* ---- verification -------------------------------------------------------- */

/* One ActivityScheduled seen in history, and how often the log shows it
 * ran. */
typedef struct scheduled {
    char instance[64];
    uint64_t execution, event_id;
    uint32_t attempt;
    int runs;
} scheduled;

typedef struct sched_list {
    scheduled *items;
    size_t count, cap;
} sched_list;

static void sched_add(sched_list *l, const char *id, uint64_t exec,
                      const duro_event *ev)
{
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->items = realloc(l->items, l->cap * sizeof(*l->items));
        CHECK(l->items != NULL);
    }
    scheduled *s = &l->items[l->count++];
    memset(s, 0, sizeof(*s));
    snprintf(s->instance, sizeof(s->instance), "%s", id);
    s->execution = exec;
    s->event_id = ev->event_id;
    s->attempt = ev->attempt ? ev->attempt : 1;
}

static int is_terminal_event(int kind)
{
    return kind == DURO_EVENT_ORCHESTRATION_COMPLETED ||
           kind == DURO_EVENT_ORCHESTRATION_FAILED ||
           kind == DURO_EVENT_CONTINUED_AS_NEW ||
           kind == DURO_EVENT_ORCHESTRATION_CANCELLED;
}

/* The scheduling kind a completion kind must point at; 0 for others. */
static int scheduling_kind_of(int kind)
{
    switch (kind) {
    case DURO_EVENT_ACTIVITY_COMPLETED:
    case DURO_EVENT_ACTIVITY_FAILED:
        return DURO_EVENT_ACTIVITY_SCHEDULED;
    case DURO_EVENT_TIMER_FIRED:
        return DURO_EVENT_TIMER_CREATED;
    case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
        return DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED;
    default:
        return 0;
    }
}

/* Checks one execution's history; collects its ActivityScheduled events and
 * the ids of children it started. */
static void check_execution(duro_client *c, const char *id, uint64_t exec,
                            int last, const crash_shape *shape,
                            sched_list *acts, char (*children)[64],
                            int *nchildren)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(c, id, exec, &h);
    CHECK_MSG(rc == DURO_OK, "history of %s execution %llu: %s (%s)", id,
              (unsigned long long)exec, duro_errname(rc), duro_errmsg());
    size_t n = h->count;
    int *completed = calloc(n + 1, sizeof(int));
    int count[DURO_EVENT_KIND_MAX + 1] = {0};
    char where[128];
    snprintf(where, sizeof(where), "%s execution %llu", id,
             (unsigned long long)exec);
    int ok = 1;
#define HCHECK(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond) && ok) {                                                   \
            ok = 0;                                                            \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                        \
        }                                                                      \
    } while (0)
    HCHECK(n >= 2, "%s: only %zu events", where, n);
    for (size_t i = 0; ok && i < n; i++) {
        const duro_event *ev = &h->events[i];
        HCHECK(ev->event_id == i + 1,
               "%s: event %zu has id %llu (gap or "
               "duplicate)",
               where, i + 1, (unsigned long long)ev->event_id);
        HCHECK(ev->kind >= 1 && ev->kind <= DURO_EVENT_KIND_MAX,
               "%s: event %zu has kind %d", where, i + 1, (int)ev->kind);
        if (!ok)
            break;
        count[ev->kind]++;
        if (ev->kind == DURO_EVENT_ORCHESTRATION_STARTED)
            HCHECK(i == 0, "%s: OrchestrationStarted at event %zu", where,
                   i + 1);
        if (is_terminal_event(ev->kind))
            HCHECK(i == n - 1, "%s: terminal %s at event %zu of %zu", where,
                   duro_event_kind_name(ev->kind), i + 1, n);
        int want = scheduling_kind_of(ev->kind);
        if (want != 0) {
            uint64_t src = ev->source_event_id;
            HCHECK(src >= 1 && src <= i, "%s: %s at %zu refers to event %llu",
                   where, duro_event_kind_name(ev->kind), i + 1,
                   (unsigned long long)src);
            if (!ok)
                break;
            HCHECK((int)h->events[src - 1].kind == want,
                   "%s: %s at %zu refers to event %llu, a %s", where,
                   duro_event_kind_name(ev->kind), i + 1,
                   (unsigned long long)src,
                   duro_event_kind_name(h->events[src - 1].kind));
            HCHECK(completed[src] == 0,
                   "%s: second completion (%s at %zu) of event %llu", where,
                   duro_event_kind_name(ev->kind), i + 1,
                   (unsigned long long)src);
            completed[src]++;
        }
        if (ev->kind == DURO_EVENT_ACTIVITY_SCHEDULED)
            sched_add(acts, id, exec, ev);
        if (ev->kind == DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED &&
            *nchildren < 8 && ev->ref_instance != NULL)
            snprintf(children[(*nchildren)++], 64, "%s", ev->ref_instance);
    }
    if (ok) {
        HCHECK(h->events[0].kind == DURO_EVENT_ORCHESTRATION_STARTED,
               "%s: first event is %s", where,
               duro_event_kind_name(h->events[0].kind));
        HCHECK(count[DURO_EVENT_ORCHESTRATION_STARTED] == 1,
               "%s: %d OrchestrationStarted", where,
               count[DURO_EVENT_ORCHESTRATION_STARTED]);
        int terminal = count[DURO_EVENT_ORCHESTRATION_COMPLETED] +
                       count[DURO_EVENT_ORCHESTRATION_FAILED] +
                       count[DURO_EVENT_CONTINUED_AS_NEW] +
                       count[DURO_EVENT_ORCHESTRATION_CANCELLED];
        HCHECK(terminal == 1, "%s: %d terminal events", where, terminal);
        int want_last = last ? DURO_EVENT_ORCHESTRATION_COMPLETED
                             : DURO_EVENT_CONTINUED_AS_NEW;
        HCHECK((int)h->events[n - 1].kind == want_last,
               "%s: last event is %s, expected %s", where,
               duro_event_kind_name(h->events[n - 1].kind),
               duro_event_kind_name(want_last));
        /* The workload cancels nothing: every scheduling completes once. */
        for (size_t i = 0; ok && i < n; i++) {
            int k = h->events[i].kind;
            if (k == DURO_EVENT_ACTIVITY_SCHEDULED ||
                k == DURO_EVENT_TIMER_CREATED ||
                k == DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED)
                HCHECK(completed[i + 1] == 1,
                       "%s: %s at %zu completed %d times", where,
                       duro_event_kind_name(k), i + 1, completed[i + 1]);
        }
        HCHECK(count[DURO_EVENT_ACTIVITY_SCHEDULED] == shape->activities,
               "%s: %d ActivityScheduled, the workload implies %d", where,
               count[DURO_EVENT_ACTIVITY_SCHEDULED], shape->activities);
        HCHECK(count[DURO_EVENT_ACTIVITY_FAILED] == shape->failures,
               "%s: %d ActivityFailed, expected %d", where,
               count[DURO_EVENT_ACTIVITY_FAILED], shape->failures);
        HCHECK(count[DURO_EVENT_TIMER_CREATED] == shape->timers,
               "%s: %d TimerCreated, expected %d", where,
               count[DURO_EVENT_TIMER_CREATED], shape->timers);
        HCHECK(count[DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED] == shape->children,
               "%s: %d SubOrchestrationScheduled, expected %d", where,
               count[DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED], shape->children);
        int cancels = count[DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED] +
                      count[DURO_EVENT_ACTIVITY_CANCEL_REQUESTED] +
                      count[DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED];
        HCHECK(cancels == 0, "%s: %d cancellation events", where, cancels);
        if (shape->events)
            HCHECK(count[DURO_EVENT_EVENT_RAISED] >= 1, "%s: no EventRaised",
                   where);
    }
#undef HCHECK
    free(completed);
    duro_history_free(h);
}

/* Checks instance `id` of kind `k`: status, output, every execution. */
static void check_instance(duro_client *c, const char *id, crash_kind k,
                           sched_list *acts, int *instances_seen)
{
    crash_shape shape = crash_shape_of(k);
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(c, id, &info));
    char expected[CRASH_STR_MAX];
    crash_expected(k, id, expected, sizeof(expected));
    int status = info->status;
    uint64_t exec = info->execution_id;
    char output[CRASH_STR_MAX];
    snprintf(output, sizeof(output), "%s", info->output ? info->output : "");
    char error[512];
    snprintf(error, sizeof(error), "%s", info->error ? info->error : "");
    duro_free(info);
    CHECK_MSG(status == DURO_STATUS_COMPLETED, "%s is %s (%s)", id,
              duro_status_name(status), error);
    CHECK_MSG(strcmp(output, expected) == 0,
              "%s output \"%s\", expected \"%s\"", id, output, expected);
    CHECK_MSG(exec == (uint64_t)shape.executions,
              "%s is at execution %llu, expected %d", id,
              (unsigned long long)exec, shape.executions);
    (*instances_seen)++;
    char children[8][64];
    int nchildren = 0;
    for (uint64_t e = 1; e <= exec; e++)
        check_execution(c, id, e, e == exec, &shape, acts, children,
                        &nchildren);
    for (int i = 0; i < nchildren; i++) {
        /* the child's input is its parent's id */
        duro_instance_info *ci = NULL;
        CHECK_OK(duro_client_get_status(c, children[i], &ci));
        int cs = ci->status;
        char cout[CRASH_STR_MAX];
        snprintf(cout, sizeof(cout), "%s", ci->output ? ci->output : "");
        duro_free(ci);
        crash_expected(CRASH_CHILD, id, expected, sizeof(expected));
        CHECK_MSG(cs == DURO_STATUS_COMPLETED, "child %s is %s", children[i],
                  duro_status_name(cs));
        CHECK_MSG(strcmp(cout, expected) == 0,
                  "child %s output \"%s\", expected \"%s\"", children[i], cout,
                  expected);
        crash_shape cshape = crash_shape_of(CRASH_CHILD);
        char none[8][64];
        int nnone = 0;
        check_execution(c, children[i], 1, 1, &cshape, acts, none, &nnone);
        (*instances_seen)++;
    }
}

static int cmp_sched(const void *a, const void *b)
{
    const scheduled *x = a, *y = b;
    int r = strcmp(x->instance, y->instance);
    if (r != 0)
        return r;
    if (x->execution != y->execution)
        return x->execution < y->execution ? -1 : 1;
    if (x->event_id != y->event_id)
        return x->event_id < y->event_id ? -1 : 1;
    return 0;
}

/* Matches the side-effect log against the scheduled activities: every
 * logged run belongs to a scheduled activity (same attempt), every
 * scheduled activity ran at least once. Prints how many ran more than
 * once. */
static void check_log(const char *log, sched_list *acts)
{
    qsort(acts->items, acts->count, sizeof(*acts->items), cmp_sched);
    FILE *f = fopen(log, "r");
    CHECK_MSG(f != NULL, "cannot open the side-effect log %s", log);
    char line[512];
    long lines = 0, malformed = 0, redelivered = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        long pid;
        unsigned long long exec, event_id;
        unsigned attempt, delivery;
        char name[64];
        scheduled key;
        memset(&key, 0, sizeof(key));
        if (sscanf(line, "%ld %63s %llu %llu %u %u %63s", &pid, key.instance,
                   &exec, &event_id, &attempt, &delivery, name) != 7) {
            malformed++;
            continue;
        }
        lines++;
        redelivered += delivery > 1;
        key.execution = exec;
        key.event_id = event_id;
        scheduled *s = bsearch(&key, acts->items, acts->count,
                               sizeof(*acts->items), cmp_sched);
        CHECK_MSG(s != NULL,
                  "the log shows a run of %s execution %llu activity %llu, "
                  "which history never scheduled",
                  key.instance, exec, event_id);
        CHECK_MSG(s->attempt == attempt,
                  "%s activity %llu ran as attempt %u, scheduled as %u",
                  key.instance, event_id, attempt, s->attempt);
        s->runs++;
    }
    fclose(f);
    size_t more = 0, extra = 0;
    for (size_t i = 0; i < acts->count; i++) {
        scheduled *s = &acts->items[i];
        CHECK_MSG(s->runs >= 1,
                  "%s execution %llu activity %llu was scheduled but never "
                  "ran",
                  s->instance, (unsigned long long)s->execution,
                  (unsigned long long)s->event_id);
        if (s->runs > 1) {
            more++;
            extra += (size_t)s->runs - 1;
        }
    }
    CHECK_MSG(malformed == 0, "%ld malformed log lines", malformed);
    fprintf(stderr,
            "  activities: %zu scheduled, %ld runs logged, %zu ran more than "
            "once (%zu extra runs), %ld runs were re-deliveries\n",
            acts->count, lines, more, extra, redelivered);
}

static void check_all(const crash_run *r, const crash_group *groups,
                      size_t ngroups)
{
    duro_client *c = NULL;
    char url[600];
    snprintf(url, sizeof(url), "sqlite:%s", r->db);
    CHECK_OK(duro_client_create(url, &c));
    sched_list acts = {0};
    int seen = 0, expected_instances = 0, expected_activities = 0;
    char id[64];
    for (size_t g = 0; g < ngroups; g++) {
        crash_shape s = crash_shape_of(groups[g].kind);
        int per = s.activities * s.executions;
        if (s.children)
            per += crash_shape_of(CRASH_CHILD).activities * s.children;
        expected_instances += groups[g].count * (1 + s.children);
        expected_activities += groups[g].count * per;
        for (int k = 0; k < groups[g].count; k++) {
            snprintf(id, sizeof(id), "%s-%d", groups[g].prefix, k);
            check_instance(c, id, groups[g].kind, &acts, &seen);
        }
    }
    duro_instance_list *all = NULL;
    CHECK_OK(duro_client_list(c, NULL, &all));
    CHECK_EQ(all->count, (size_t)expected_instances);
    CHECK_EQ(seen, expected_instances);
    duro_instance_list_free(all);
    CHECK_EQ(acts.count, (size_t)expected_activities);
    check_log(r->log, &acts);
    free(acts.items);
    duro_client_destroy(c);
}

/* Instances not yet terminal (-1 before the first run created them). */
static int count_unfinished(const char *db)
{
    char url[600];
    snprintf(url, sizeof(url), "sqlite:%s", db);
    duro_client *c = NULL;
    duro_instance_list *all = NULL;
    int n = -1;
    if (duro_client_create(url, &c) == DURO_OK &&
        duro_client_list(c, NULL, &all) == DURO_OK) {
        n = 0;
        for (size_t i = 0; i < all->count; i++)
            n += !duro_status_is_terminal(all->items[i].status);
    }
    duro_instance_list_free(all);
    duro_client_destroy(c);
    return n;
}

static void run_scenario(const char *name, const char *workload,
                         const crash_group *groups, size_t ngroups,
                         int during_activity)
{
    seed_rng(name);
    char db[64], log[64], errlog[64];
    snprintf(db, sizeof(db), "%s.db", name);
    snprintf(log, sizeof(log), "%s.log", name);
    snprintf(errlog, sizeof(errlog), "%s.stderr", name);
    crash_run r = {.workload = workload};
    char dbp[512], logp[512], errp[512];
    snprintf(dbp, sizeof(dbp), "%s", test_path(db));
    snprintf(logp, sizeof(logp), "%s", test_path(log));
    snprintf(errp, sizeof(errp), "%s", test_path(errlog));
    r.db = dbp;
    r.log = logp;
    r.errlog = errp;

    int kills = kill_count();
    kill_stats st;
    int64_t t0 = test_now_ms();
    kill_loop(&r, kills, during_activity, &st);
    fprintf(stderr,
            "  %d runs: %d killed after %lld..%lld ms, %d finished first",
            kills, st.killed, (long long)(st.killed ? st.min_ms : 0),
            (long long)st.max_ms, st.exited_early);
    if (during_activity)
        fprintf(stderr, ", %d killed before any activity started",
                st.no_activity);
    fprintf(stderr, " (%lld ms)\n", (long long)(test_now_ms() - t0));
    int unfinished = count_unfinished(r.db);
    fprintf(stderr, "  the final run starts with %d instance(s) unfinished\n",
            unfinished);
    final_run(&r);
    check_all(&r, groups, ngroups);
}

/* Mixed workload: chains, fan-out, timers, a child, a retry, an external
 * event and continue-as-new, killed at random instants. */
TEST(random_kills_keep_history_exactly_once)
{
    run_scenario("mixed", "mixed", crash_mixed, CRASH_COUNT(crash_mixed), 0);
}

/* Activities of 50..200 ms killed while they execute: their locks expire
 * and they are re-delivered to the next process. */
TEST(kills_during_activity_execution)
{
    run_scenario("heavy", "heavy", crash_heavy, CRASH_COUNT(crash_heavy), 1);
}

/* ---- many processes ------------------------------------------------------ */

/* The pid of the first log line of activity `name` with delivery
 * `delivery` (0: any), and whether a line of `name` exists with a pid other
 * than `not_pid` and a delivery of at least 2; -1 / 0 when none. */
static long log_find(const char *log, const char *name, unsigned delivery,
                     long not_pid, int *redelivered_elsewhere)
{
    FILE *f = fopen(log, "r");
    long found = -1;
    if (redelivered_elsewhere != NULL)
        *redelivered_elsewhere = 0;
    if (f == NULL)
        return -1;
    char line[512], inst[128], act[128];
    while (fgets(line, sizeof(line), f) != NULL) {
        long pid;
        unsigned long long exec, id;
        unsigned attempt, dlv;
        if (sscanf(line, "%ld %127s %llu %llu %u %u %127s", &pid, inst, &exec,
                   &id, &attempt, &dlv, act) != 7 ||
            strcmp(act, name) != 0)
            continue;
        if (found < 0 && (delivery == 0 || dlv == delivery))
            found = pid;
        if (redelivered_elsewhere != NULL && pid != not_pid && dlv >= 2)
            *redelivered_elsewhere = 1;
    }
    fclose(f);
    return found;
}

/* Three runtime processes share one store and 300 orchestrations; the one
 * running the Hold activity (which only a re-delivery can finish) is
 * SIGKILLed in the middle of it and started again. Every instance completes
 * as it would have, history is exactly-once, and the killed process's
 * activity is picked up by another process once its lock expires. */
TEST(three_processes_one_killed_mid_activity)
{
    crash_run r = {.workload = "many"};
    char dbp[512], logp[512], errp[512];
    snprintf(dbp, sizeof(dbp), "%s", test_path("many.db"));
    snprintf(logp, sizeof(logp), "%s", test_path("many.log"));
    snprintf(errp, sizeof(errp), "%s", test_path("many.stderr"));
    r.db = dbp;
    r.log = logp;
    r.errlog = errp;
    int64_t t0 = test_now_ms();
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        pids[i] = spawn_worker(&r);
        CHECK_MSG(pids[i] > 0, "fork failed: %s", strerror(errno));
    }
    /* Wait for the Hold activity's first delivery, and kill its process. */
    long holder = -1;
    int64_t deadline = test_now_ms() + 60000;
    while ((holder = log_find(r.log, "Hold", 1, -1, NULL)) < 0 &&
           test_now_ms() < deadline)
        test_sleep_ms(5);
    CHECK_MSG(holder > 0, "no process started the Hold activity in 60 s");
    int which = -1;
    for (int i = 0; i < 3; i++)
        if (pids[i] == (pid_t)holder)
            which = i;
    CHECK_MSG(which >= 0, "pid %ld is not one of the workers", holder);
    kill_and_reap(pids[which]);
    fprintf(stderr, "  killed worker %ld running Hold after %lld ms\n", holder,
            (long long)(test_now_ms() - t0));
    pids[which] = spawn_worker(&r); /* and started again */
    CHECK_MSG(pids[which] > 0, "fork failed: %s", strerror(errno));
    for (int i = 0; i < 3; i++) {
        int status = 0;
        if (!wait_child(pids[i], test_now_ms() + FINAL_RUN_DEADLINE_MS * 2,
                        &status)) {
            for (int j = i; j < 3; j++)
                kill_and_reap(pids[j]);
            print_file(r.errlog, "worker stderr");
            test_fail(__FILE__, __LINE__, "worker %d did not finish", i);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            print_file(r.errlog, "worker stderr");
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "worker %d ended with status 0x%x", i, status);
    }
    fprintf(stderr, "  all three finished after %lld ms\n",
            (long long)(test_now_ms() - t0));
    int elsewhere = 0;
    log_find(r.log, "Hold", 0, holder, &elsewhere);
    CHECK_MSG(elsewhere,
              "the Hold activity was not re-delivered to another process");
    check_all(&r, crash_many, CRASH_COUNT(crash_many));
}

/* ---- no needless replay ---------------------------------------------------
 */

static int act_nothing(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    (void)out;
    return DURO_OK;
}

static int orch_sequence(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    for (int i = 0; i < n; i++)
        if (duro_await(o, duro_call_activity(o, "Nothing", NULL)) != DURO_OK)
            return duro_fail(out, "an activity failed");
    return DURO_OK;
}

/* Library bug (found by orch_bench, see bench/RESULTS.md): with 2 turn
 * threads, run_and_ack() commits the turn (releasing the instance lock)
 * before duro__cache_put() returns the engine to the cache. A completion
 * arriving in between is fetched by the other turn thread, which finds no
 * cached engine, reads the whole history and replays a second engine of the
 * same instance. Nothing here (no crash, no eviction, no lock expiry)
 * justifies a replay, so the count must be 0. */
TEST(sequential_turns_do_not_replay)
{
    rt_fixture f;
    rt_init(&f, "replay.db");
    CHECK_OK(duro_registry_add_activity(f.reg, "Nothing", act_nothing, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Sequence", NULL,
                                             orch_sequence, NULL));
    rt_start(&f);
    rt_start_instance(&f, "seq", "Sequence", "300");
    duro_instance_info *i = rt_wait(&f, "seq", 60000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    rt_done(&f);
    fprintf(stderr, "  %llu turns, %llu replays, %llu fiber cache hits\n",
            (unsigned long long)m.turns, (unsigned long long)m.replays,
            (unsigned long long)m.fiber_cache_hits);
    CHECK_EQ(m.turns, 301);
    CHECK_EQ(m.replays, 0);
}

TEST_MAIN(T(random_kills_keep_history_exactly_once),
          T(kills_during_activity_execution),
          T(three_processes_one_killed_mid_activity),
          T(sequential_turns_do_not_replay))
