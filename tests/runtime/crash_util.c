/* crash_util.c - the crash-recovery tests' shared parts (crash_util.h):
 * crash_worker processes, the checks of a finished workload against its
 * store and side-effect log, and the three-process scenario. Runs on the
 * test's main thread; a failed check ends the test (longjmp). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_util.h"

#ifndef CRASH_WORKER_PATH
#error "CRASH_WORKER_PATH must name the crash_worker executable"
#endif

/* ---- the worker process -------------------------------------------------- */

pid_t crash_spawn_worker(const crash_run *r)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(r->errlog, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execl(CRASH_WORKER_PATH, CRASH_WORKER_PATH, r->url, r->log, r->workload,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

int crash_wait_child(pid_t pid, int64_t deadline_ms, int *status)
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

void crash_kill_and_reap(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

void crash_print_file(const char *path, const char *title)
{
    test_print_file(path, title, 200);
}

long crash_log_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* ---- verification -------------------------------------------------------- */

/* One ActivityScheduled seen in history, and how often the log shows it
 * ran. */
typedef struct scheduled {
    char instance[64];
    uint64_t execution, event_id;
    uint32_t attempt;
    int runs;
    int may_not_run; /* cancelled before it completed: it may never have
                        started */
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
    int *cancel_requested = calloc(n + 1, sizeof(int));
    size_t first_sched = acts->count; /* this execution's, from here on */
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
        if (ev->kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED) {
            uint64_t src = ev->source_event_id;
            HCHECK(src >= 1 && src <= i &&
                       h->events[src - 1].kind == DURO_EVENT_ACTIVITY_SCHEDULED,
                   "%s: ActivityCancelRequested at %zu refers to event %llu",
                   where, i + 1, (unsigned long long)src);
            HCHECK(ok && cancel_requested[src] == 0 && completed[src] == 0,
                   "%s: ActivityCancelRequested at %zu for event %llu, "
                   "already %s",
                   where, i + 1, (unsigned long long)src,
                   completed[src] ? "completed" : "cancelled");
            if (ok)
                cancel_requested[src]++;
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
        int want_last = shape->cancelled ? DURO_EVENT_ORCHESTRATION_CANCELLED
                        : last           ? DURO_EVENT_ORCHESTRATION_COMPLETED
                                         : DURO_EVENT_CONTINUED_AS_NEW;
        HCHECK((int)h->events[n - 1].kind == want_last,
               "%s: last event is %s, expected %s", where,
               duro_event_kind_name(h->events[n - 1].kind),
               duro_event_kind_name(want_last));
        /* Every scheduling completes once; in an instance that ends
         * cancelled, at most once, and an activity that did not complete
         * was cancelled (its timer never fires: an hour). */
        for (size_t i = 0; ok && i < n; i++) {
            int k = h->events[i].kind;
            if (shape->cancelled && k == DURO_EVENT_ACTIVITY_SCHEDULED)
                HCHECK(completed[i + 1] + cancel_requested[i + 1] == 1,
                       "%s: %s at %zu completed %d times, cancelled %d "
                       "times",
                       where, duro_event_kind_name(k), i + 1, completed[i + 1],
                       cancel_requested[i + 1]);
            else if (shape->cancelled && k == DURO_EVENT_TIMER_CREATED)
                HCHECK(completed[i + 1] == 0, "%s: %s at %zu fired", where,
                       duro_event_kind_name(k), i + 1);
            else if (k == DURO_EVENT_ACTIVITY_SCHEDULED ||
                     k == DURO_EVENT_TIMER_CREATED ||
                     k == DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED)
                HCHECK(completed[i + 1] == 1,
                       "%s: %s at %zu completed %d times", where,
                       duro_event_kind_name(k), i + 1, completed[i + 1]);
        }
        /* A cancelled instance got as far as the cancel let it. */
#define SHAPE_COUNT(kind, want, what)                                          \
    HCHECK(shape->cancelled ? count[kind] <= (want) : count[kind] == (want),   \
           "%s: %d %s, the workload implies %s%d", where, count[kind], what,   \
           shape->cancelled ? "at most " : "", (want))
        SHAPE_COUNT(DURO_EVENT_ACTIVITY_SCHEDULED, shape->activities,
                    "ActivityScheduled");
        SHAPE_COUNT(DURO_EVENT_ACTIVITY_FAILED, shape->failures,
                    "ActivityFailed");
        SHAPE_COUNT(DURO_EVENT_TIMER_CREATED, shape->timers, "TimerCreated");
        SHAPE_COUNT(DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, shape->children,
                    "SubOrchestrationScheduled");
#undef SHAPE_COUNT
        int cancels = count[DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED] +
                      count[DURO_EVENT_ACTIVITY_CANCEL_REQUESTED] +
                      count[DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED];
        if (shape->cancelled)
            HCHECK(count[DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED] == 1,
                   "%s: %d OrchestrationCancelRequested", where,
                   count[DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED]);
        else
            HCHECK(cancels == 0, "%s: %d cancellation events", where, cancels);
        for (size_t i = first_sched; i < acts->count; i++)
            acts->items[i].may_not_run =
                completed[acts->items[i].event_id] == 0;
        if (shape->events)
            HCHECK(count[DURO_EVENT_EVENT_RAISED] >= 1, "%s: no EventRaised",
                   where);
    }
#undef HCHECK
    free(completed);
    free(cancel_requested);
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
    int want = shape.cancelled ? DURO_STATUS_CANCELLED : DURO_STATUS_COMPLETED;
    CHECK_MSG(status == want, "%s is %s (%s), expected %s", id,
              duro_status_name(status), error, duro_status_name(want));
    if (!shape.cancelled)
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
        CHECK_MSG(s->runs >= 1 || s->may_not_run,
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

void crash_check_all(const crash_run *r, const crash_group *groups,
                     size_t ngroups)
{
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(r->url, &c));
    sched_list acts = {0};
    int seen = 0, expected_instances = 0, expected_activities = 0;
    int fewer_activities = 0; /* of cancelled instances: at most */
    char id[64];
    for (size_t g = 0; g < ngroups; g++) {
        crash_shape s = crash_shape_of(groups[g].kind);
        int per = s.activities * s.executions;
        if (s.children)
            per += crash_shape_of(CRASH_CHILD).activities * s.children;
        expected_instances += groups[g].count * (1 + s.children);
        expected_activities += groups[g].count * per;
        if (s.cancelled)
            fewer_activities += groups[g].count * per;
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
    CHECK_INT(acts.count, <=, (size_t)expected_activities);
    CHECK_INT(acts.count, >=, (size_t)(expected_activities - fewer_activities));
    check_log(r->log, &acts);
    /* Queues hold only live work: every instance ended, nothing is left
     * (not even an ended instance's timer). */
    duro_store_stats *st = NULL;
    int rc = duro_client_store_stats(c, &st);
    if (rc != DURO_UNSUPPORTED) {
        CHECK_MSG(rc == DURO_OK, "store stats: %s (%s)", duro_errname(rc),
                  duro_errmsg());
        CHECK_MSG(st->orchestrator_ready + st->orchestrator_delayed +
                          st->orchestrator_locked + st->worker_ready +
                          st->worker_locked ==
                      0,
                  "queues not empty: orchestrator %llu ready, %llu delayed, "
                  "%llu locked; worker %llu ready, %llu locked",
                  (unsigned long long)st->orchestrator_ready,
                  (unsigned long long)st->orchestrator_delayed,
                  (unsigned long long)st->orchestrator_locked,
                  (unsigned long long)st->worker_ready,
                  (unsigned long long)st->worker_locked);
        duro_free(st);
    }
    free(acts.items);
    duro_client_destroy(c);
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

/* Kills and reaps the workers still running (pid > 0), so that none
 * outlives a failed check. */
static void kill_workers(pid_t *pids)
{
    for (int i = 0; i < CRASH_WORKERS; i++) {
        if (pids[i] > 0)
            crash_kill_and_reap(pids[i]);
        pids[i] = 0;
    }
}

/* Unless `cond` holds: kills the workers, prints their stderr and fails the
 * test with the message. */
#define WORKERS_CHECK(cond, pids, errlog, ...)                                 \
    do {                                                                       \
        if (!(cond)) {                                                         \
            kill_workers(pids);                                                \
            crash_print_file((errlog), "worker stderr");                       \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                        \
        }                                                                      \
    } while (0)

/* A worker that has already exited (reaped, its pid cleared, *status
 * filled), or -1. Before the kill none may exit: the Hold instance cannot
 * finish until a re-delivery, and each worker waits for every instance. */
static int exited_worker(pid_t *pids, int *status)
{
    for (int i = 0; i < CRASH_WORKERS; i++) {
        if (pids[i] > 0 && waitpid(pids[i], status, WNOHANG) == pids[i]) {
            pids[i] = 0;
            return i;
        }
    }
    return -1;
}

/* Polls the side-effect log for the Hold activity's first delivery; the
 * pid of the worker running it, or -1 when the deadline passed first or a
 * worker exited (*exited its index, *status its status). */
static long wait_for_holder(const char *log, pid_t *pids, int *exited,
                            int *status)
{
    int64_t deadline = test_now_ms() + CRASH_HOLD_DEADLINE_MS;
    long holder;
    *exited = -1;
    while ((holder = log_find(log, "Hold", 1, -1, NULL)) < 0 &&
           test_now_ms() < deadline) {
        if ((*exited = exited_worker(pids, status)) >= 0)
            return -1;
        test_sleep_ms(5);
    }
    return holder;
}

void crash_three_processes_one_killed(const char *url, const char *log,
                                      const char *errlog)
{
    crash_run r = {
        .url = url, .log = log, .errlog = errlog, .workload = "many"};
    int64_t t0 = test_now_ms();
    pid_t pids[CRASH_WORKERS] = {0};
    for (int i = 0; i < CRASH_WORKERS; i++) {
        pids[i] = crash_spawn_worker(&r);
        WORKERS_CHECK(pids[i] > 0, pids, errlog, "fork failed: %s",
                      strerror(errno));
    }
    /* Wait for the Hold activity's first delivery, and kill its process. */
    int exited, status = 0;
    long holder = wait_for_holder(log, pids, &exited, &status);
    WORKERS_CHECK(exited < 0, pids, errlog,
                  "worker %d exited (status 0x%x) before the kill", exited,
                  status);
    WORKERS_CHECK(holder > 0, pids, errlog,
                  "no process started the Hold activity in %d ms",
                  CRASH_HOLD_DEADLINE_MS);
    int which = -1;
    for (int i = 0; i < CRASH_WORKERS; i++)
        if (pids[i] == (pid_t)holder)
            which = i;
    WORKERS_CHECK(which >= 0, pids, errlog, "pid %ld is not one of the workers",
                  holder);
    crash_kill_and_reap(pids[which]);
    fprintf(stderr, "  killed worker %ld running Hold after %lld ms\n", holder,
            (long long)(test_now_ms() - t0));
    pids[which] = crash_spawn_worker(&r); /* and started again */
    WORKERS_CHECK(pids[which] > 0, pids, errlog, "fork failed: %s",
                  strerror(errno));
    int64_t deadline = test_now_ms() + CRASH_WORKERS_DEADLINE_MS;
    for (int i = 0; i < CRASH_WORKERS; i++) {
        WORKERS_CHECK(crash_wait_child(pids[i], deadline, &status), pids,
                      errlog, "worker %d did not finish within %d ms", i,
                      CRASH_WORKERS_DEADLINE_MS);
        pids[i] = 0;
        WORKERS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, pids,
                      errlog, "worker %d ended with status 0x%x", i, status);
    }
    fprintf(stderr, "  all three finished after %lld ms\n",
            (long long)(test_now_ms() - t0));
    int elsewhere = 0;
    log_find(log, "Hold", 0, holder, &elsewhere);
    CHECK_MSG(elsewhere,
              "the Hold activity was not re-delivered to another process");
    crash_check_all(&r, crash_many, CRASH_COUNT(crash_many));
}
