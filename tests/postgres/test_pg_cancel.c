/* test_pg_cancel.c - a cancellation decided in one process reaches an
 * activity running in another through PostgreSQL's notification, not
 * through polling: the activity's runtime polls and renews only once a
 * minute, and the test's deadline is shorter than that. A forked child runs
 * the activity (worker slots only); the parent runs the orchestration and
 * cancels its instance. The child reports over a pipe. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "duro.h"
#include "pg_util.h"
#include "test.h"

#define DEADLINE_MS 30000

static int report_fd = -1;

static void report(const char *line)
{
    size_t n = strlen(line);
    ssize_t w;
    do
        w = write(report_fd, line, n);
    while (w < 0 && errno == EINTR);
}

/* Reports "started", then "cancelled <reason>" when its token fires. */
static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    report("started\n");
    if (!duro_activity_wait_cancelled(a, 120000))
        return duro_ok(out, "not cancelled");
    char line[128];
    snprintf(line, sizeof(line), "cancelled %s\n",
             duro_activity_cancel_reason(a));
    report(line);
    return duro_fail(out, "cancelled");
}

static int orch_one(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Block", in);
    duro_await(o, t);
    return duro_ok(out, "done");
}

/* The child: the activity's runtime, polling and renewing once a minute. */
static void child(const char *url, int fd)
{
    report_fd = fd;
    duro_registry *r = NULL;
    duro_runtime *rt = NULL;
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.orchestration_concurrency = 0;
    o.worker_concurrency = 2;
    o.worker_lock_timeout_ms = 120000;
    o.lock_renewal_ms = 60000;
    o.poll_interval_ms = 60000;
    if (duro_registry_create(&r) != DURO_OK ||
        duro_registry_add_activity(r, "Block", act_block, NULL) != DURO_OK ||
        duro_runtime_create(url, r, &o, &rt) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK) {
        report("setup failed\n");
        _exit(1);
    }
    char buf[8];
    while (read(STDIN_FILENO, buf, sizeof(buf)) < 0 && errno == EINTR)
        ; /* until the parent closes our stdin */
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    _exit(0);
}

/* Reads one line from fd into buf within the deadline; 0 on timeout. */
static int read_line(int fd, char *buf, size_t size, int64_t deadline)
{
    size_t n = 0;
    while (n + 1 < size) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r <= 0)
            return 0;
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return 1;
}

TEST(cancellation_reaches_another_process_through_a_notification)
{
    char url[4200];
    snprintf(url, sizeof(url), "%s%cschema=pgcancel_%ld", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', (long)getpid());
    /* Fork before this process opens anything: a provider has threads (a
     * pool, a listener), and a child forked beside them could inherit a
     * lock one of them held. Both processes open the fresh schema; the
     * migration's advisory lock makes that safe. */
    int report_pipe[2], stdin_pipe[2];
    CHECK(pipe(report_pipe) == 0 && pipe(stdin_pipe) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(120); /* never outlives a parent that failed */
        close(report_pipe[0]);
        close(stdin_pipe[1]);
        dup2(stdin_pipe[0], STDIN_FILENO);
        child(url, report_pipe[1]);
    }
    CHECK(pid > 0);
    close(report_pipe[1]);
    close(stdin_pipe[0]);
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));

    duro_registry *r = NULL;
    duro_runtime *rt = NULL;
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.worker_concurrency = 0; /* orchestrations only */
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "One", NULL, orch_one, NULL));
    CHECK_OK(duro_runtime_create(url, r, &o, &rt));
    CHECK_OK(duro_runtime_start(rt));
    CHECK_OK(duro_client_start(c, "x", "One", "\"in\"", NULL));

    char line[128];
    CHECK_MSG(read_line(report_pipe[0], line, sizeof(line),
                        test_now_ms() + DEADLINE_MS),
              "the child never started the activity");
    CHECK_STR(line, "started");
    int64_t t0 = test_now_ms();
    CHECK_OK(duro_client_cancel(c, "x", "stop", "user:test"));
    /* The child polls and renews once a minute: only the notification can
     * tell it within the deadline. */
    CHECK_MSG(read_line(report_pipe[0], line, sizeof(line),
                        test_now_ms() + DEADLINE_MS),
              "the activity in the other process was not told within %d ms",
              DEADLINE_MS);
    CHECK_STR(line, "cancelled " DURO_REASON_INSTANCE_CANCELLED);
    fprintf(stderr, "  told in %lld ms\n", (long long)(test_now_ms() - t0));
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_wait(c, "x", DEADLINE_MS, &i));
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);

    close(stdin_pipe[1]); /* the child shuts down */
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(report_pipe[0]);
    duro_runtime_destroy(rt);
    duro_registry_destroy(r);
    duro_client_destroy(c);
    char schema[64];
    snprintf(schema, sizeof(schema), "pgcancel_%ld", (long)getpid());
    pg_test_drop_schema(schema);
}

TEST_MAIN(T(cancellation_reaches_another_process_through_a_notification))
