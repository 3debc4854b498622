/* test_cleanup_crash.c - a cleanup after an observed cancel survives kill -9
 * like any other turn. A forked process runs the runtime; an order is
 * cancelled while it charges, and its compensation starts; the process is
 * SIGKILLed in the middle of the compensation (and, in the second test, at
 * a random instant right after the cancel, which may fall inside the
 * cancelling turn itself). A second process takes over on the same SQLite
 * file. The instance must end Cancelled with its cleanup in history exactly
 * once: one cancel request, one compensation scheduled and completed, no
 * duplicated event; the compensation itself may run twice (at least once).
 * Processes report over a pipe; every wait has a deadline. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_util.h"

#define DEADLINE_MS 60000

static int report_fd = -1;
static int release_hangs; /* the first process's compensation never ends */

static void report(const char *line)
{
    size_t n = strlen(line);
    ssize_t w;
    do
        w = write(report_fd, line, n);
    while (w < 0 && errno == EINTR);
}

static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    report("charging\n");
    if (!duro_activity_wait_cancelled(a, DEADLINE_MS))
        return duro_ok(out, "charged");
    return duro_fail(out, "cancelled");
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_release(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    report("releasing\n");
    if (release_hangs)
        duro_activity_wait_cancelled(a, DEADLINE_MS); /* killed meanwhile */
    report("released\n");
    return duro_ok(out, "released");
}

static int orch_order(duro_orch *o, const char *in, duro_result *out)
{
    if (duro_await(o, duro_call_activity(o, "Echo", in)) != DURO_OK)
        return duro_fail(out, "reserve failed");
    if (duro_await(o, duro_call_activity(o, "Block", in)) == DURO_OK)
        return duro_ok(out, "charged");
    if (!duro_cancel_requested(o))
        return duro_fail(out, "charge failed");
    if (duro_await(o, duro_call_activity(o, "Release",
                                         duro_cancel_reason(o))) != DURO_OK)
        return duro_fail(out, "release failed");
    duro_await(o, duro_timer(o, 5));
    return duro_ok(out, "compensated");
}

/* A runtime process on `url`; it runs until killed, or (hangs == 0) until
 * the instance has ended. */
static void child(const char *url, int fd, int hangs, const char *id)
{
    report_fd = fd;
    release_hangs = hangs;
    duro_registry *r = NULL;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    duro_runtime_options o;
    rt_default_options(&o);
    int ok =
        duro_registry_create(&r) == DURO_OK &&
        duro_registry_add_orchestration_ex(r, "Order", NULL, orch_order, NULL,
                                           &oo) == DURO_OK &&
        duro_registry_add_activity(r, "Block", act_block, NULL) == DURO_OK &&
        duro_registry_add_activity(r, "Echo", act_echo, NULL) == DURO_OK &&
        duro_registry_add_activity(r, "Release", act_release, NULL) ==
            DURO_OK &&
        duro_runtime_create(url, r, &o, &rt) == DURO_OK &&
        duro_runtime_start(rt) == DURO_OK &&
        duro_client_create(url, &c) == DURO_OK;
    if (!ok) {
        report("child failed to start\n");
        _exit(2);
    }
    int64_t until = test_now_ms() + DEADLINE_MS;
    while (test_now_ms() < until) {
        duro_instance_info *info = NULL;
        if (!hangs && duro_client_get_status(c, id, &info) == DURO_OK &&
            duro_status_is_terminal(info->status)) {
            duro_free(info);
            break;
        }
        duro_free(info);
        test_sleep_ms(5);
    }
    duro_client_destroy(c);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    _exit(0);
}

typedef struct proc {
    pid_t pid;
    int fd; /* read end */
    char buf[4096];
    size_t len;
} proc;

static void spawn(proc *p, const char *url, int hangs, const char *id)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    p->pid = fork();
    CHECK(p->pid >= 0);
    if (p->pid == 0) {
        close(fds[0]);
        child(url, fds[1], hangs, id);
    }
    close(fds[1]);
    p->fd = fds[0];
    p->len = 0;
    p->buf[0] = '\0';
}

/* Waits until the process has reported `line` (a substring of what it
 * wrote so far); 0 on timeout or end of its output. */
static int wait_report(proc *p, const char *line, int64_t timeout_ms)
{
    int64_t until = test_now_ms() + timeout_ms;
    while (strstr(p->buf, line) == NULL) {
        int64_t left = until - test_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        ssize_t got = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (got <= 0)
            return 0;
        p->len += (size_t)got;
        p->buf[p->len] = '\0';
    }
    return 1;
}

static void kill_and_reap(proc *p)
{
    kill(p->pid, SIGKILL);
    int st;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
        ;
    close(p->fd);
}

static int finish(proc *p)
{
    int st = 0;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
        ;
    close(p->fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The cleanup's trace in history, exactly once, and the end. */
static void check_cleaned_up_once(duro_client *c, const char *id)
{
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_wait(c, id, DEADLINE_MS, &info));
    CHECK_EQ(info->status, DURO_STATUS_CANCELLED);
    CHECK_STR(info->error, "stop the order");
    duro_free(info);
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(c, id, 0, &h));
    for (size_t i = 0; i < h->count; i++)
        CHECK_EQ(h->events[i].event_id, i + 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED), 1);
    int releases = 0, release_done = 0;
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        if (e->kind == DURO_EVENT_ACTIVITY_SCHEDULED &&
            strcmp(e->name, "Release") == 0) {
            releases++;
            for (size_t k = i + 1; k < h->count; k++)
                release_done +=
                    h->events[k].kind == DURO_EVENT_ACTIVITY_COMPLETED &&
                    h->events[k].source_event_id == e->event_id;
        }
    }
    CHECK_EQ(releases, 1);
    CHECK_EQ(release_done, 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCELLED), 1);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    duro_history_free(h);
}

TEST(kill_during_the_compensation_then_it_finishes_once)
{
    const char *url = test_sqlite_url("cleanup_crash.db");
    proc first;
    spawn(&first, url, 1, "order-1");
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    CHECK_OK(duro_client_start(c, "order-1", "Order", "o", NULL));
    CHECK(wait_report(&first, "charging", DEADLINE_MS));
    CHECK_OK(duro_client_cancel(c, "order-1", "stop the order", "test"));
    CHECK(wait_report(&first, "releasing", DEADLINE_MS));
    kill_and_reap(&first); /* mid-compensation */
    CHECK(strstr(first.buf, "released") == NULL);

    proc second;
    spawn(&second, url, 0, "order-1");
    CHECK(wait_report(&second, "released", DEADLINE_MS));
    CHECK_EQ(finish(&second), 0);
    check_cleaned_up_once(c, "order-1");
    duro_client_destroy(c);
}

TEST(kill_at_random_instants_around_the_cancel)
{
    const char *env = getenv("DURO_CRASH_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 0)
                        : (unsigned)(test_now_ms() ^ getpid());
    fprintf(stderr, "  seed %u (DURO_CRASH_SEED repeats it)\n", seed);
    srand(seed);
    for (int round = 0; round < 6; round++) {
        char db[64], id[32];
        snprintf(db, sizeof(db), "cleanup_crash_%d.db", round);
        snprintf(id, sizeof(id), "order-r%d", round);
        const char *url = test_sqlite_url(db);
        proc first;
        spawn(&first, url, 1, id);
        duro_client *c = NULL;
        CHECK_OK(duro_client_create(url, &c));
        CHECK_OK(duro_client_start(c, id, "Order", "o", NULL));
        CHECK(wait_report(&first, "charging", DEADLINE_MS));
        CHECK_OK(duro_client_cancel(c, id, "stop the order", "test"));
        /* before, within or after the cancelling turn (which comes within
         * the poll interval, 50 ms), or during the compensation */
        test_sleep_ms(rand() % 150);
        kill_and_reap(&first);
        proc second;
        spawn(&second, url, 0, id);
        CHECK_EQ(finish(&second), 0);
        check_cleaned_up_once(c, id);
        duro_client_destroy(c);
    }
}

TEST_MAIN(T(kill_during_the_compensation_then_it_finishes_once),
          T(kill_at_random_instants_around_the_cancel))
