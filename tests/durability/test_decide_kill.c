/* test_decide_kill.c - a cancel, terminate or suspend that decides
 * instances that have not begun (provider contract version 9) writes each
 * one whole or not at all, whenever its process dies. decide_worker (a
 * separate process on the public API) sends the verb to 1,000 Pending
 * instances of a real SQLite file, 50 per call, and is SIGKILLed at a
 * random instant; the parent then reads the file with a new provider and
 * checks every instance: untouched (Pending, no execution, its START
 * queued, nothing recorded) or decided (the status, the history its first
 * turn would have written, its queue as the verb leaves it), never in
 * between; the file passes integrity_check; and a runtime started on it
 * afterwards completes every untouched instance. Rounds go on until
 * kills have landed in the middle of the work; no time is asserted. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "duro.h"
#include "duro/provider.h"
#include "test.h"

#ifndef DECIDE_WORKER_PATH
#error "DECIDE_WORKER_PATH must name the decide_worker executable"
#endif

#define COUNT 1000            /* coprime with 7: the worker's walk */
#define CHILD_DEADLINE 120000 /* ms; generous for ASan on a loaded machine */

static const char *const verbs[] = {"cancel", "terminate", "suspend"};

/* Starts the child; returns its pid and the read end of its stdout. */
static pid_t spawn(const char *url, const char *verb, const char *prefix,
                   int *out)
{
    int fds[2];
    CHECK_MSG(pipe(fds) == 0, "pipe: %s", strerror(errno));
    char count[16];
    snprintf(count, sizeof(count), "%d", COUNT);
    pid_t pid = fork();
    CHECK_MSG(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(DECIDE_WORKER_PATH, DECIDE_WORKER_PATH, url, verb, prefix, count,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out = fds[0];
    return pid;
}

/* Reads the child's stdout until `want` appears in what it wrote (1) or it
 * closes it, or the deadline (0). */
static int wait_for(int fd, const char *want, int64_t deadline)
{
    char buf[256];
    size_t len = 0;
    while (test_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return 0;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, want) != NULL)
            return 1;
        if (len > sizeof(buf) / 2) { /* keep the tail */
            memmove(buf, buf + len / 2, len - len / 2 + 1);
            len -= len / 2;
        }
    }
    return 0;
}

/* Checks one instance: untouched or decided whole by `verb`. Returns 1
 * when decided. */
static int check_instance(duro_provider *p, const duro_instance_info *in,
                          int verb)
{
    duro_error e;
    uint64_t queued = 0;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, in->instance_id,
                                &queued, &e),
              DURO_OK, &e);
    if (in->status == DURO_STATUS_PENDING) {
        CHECK_MSG(in->execution_id == 0 && in->history_count == 0 &&
                      queued == 1 && in->cancel_requested_ms == 0,
                  "%s: Pending but execution %llu, %llu events, %llu "
                  "queued, cancel at %lld",
                  in->instance_id, (unsigned long long)in->execution_id,
                  (unsigned long long)in->history_count,
                  (unsigned long long)queued,
                  (long long)in->cancel_requested_ms);
        return 0;
    }
    static const int status_of[] = {
        DURO_STATUS_CANCELLED, DURO_STATUS_TERMINATED, DURO_STATUS_SUSPENDED};
    static const int kinds[3][3] = {
        {DURO_EVENT_ORCHESTRATION_STARTED,
         DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
         DURO_EVENT_ORCHESTRATION_CANCELLED},
        {DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_ORCHESTRATION_TERMINATED,
         0},
        {DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_EXECUTION_SUSPENDED, 0}};
    static const size_t events[] = {3, 2, 2};
    CHECK_MSG(in->status == status_of[verb], "%s: %s after %s", in->instance_id,
              duro_status_name(in->status), verbs[verb]);
    CHECK_EQ(in->execution_id, 1);
    CHECK_EQ(queued, 0); /* a suspend dropped the START, the only message */
    CHECK_EQ(in->cancel_requested_ms != 0, verb == 0);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, in->instance_id, 1, &h, &e), DURO_OK, &e);
    CHECK_MSG(h->count == events[verb], "%s: %zu events after %s",
              in->instance_id, h->count, verbs[verb]);
    for (size_t i = 0; i < h->count && i < 3; i++) {
        CHECK_EQ(h->events[i].event_id, i + 1);
        CHECK_EQ(h->events[i].kind, kinds[verb][i]);
    }
    duro_history_free(h);
    return 1;
}

static void check_integrity(const char *path)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* How many instances are still Pending (-1: the list failed). */
static long pending_left(duro_client *c)
{
    duro_instance_filter f;
    memset(&f, 0, sizeof(f));
    f.status_mask = 1u << DURO_STATUS_PENDING;
    duro_instance_list *l = NULL;
    if (duro_client_list(c, &f, &l) != DURO_OK)
        return -1;
    long n = (long)l->count;
    duro_instance_list_free(l);
    return n;
}

static int orch_done(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

TEST(a_killed_request_decides_each_instance_whole_or_not_at_all)
{
    const char *path = test_path("decide_kill.db");
    char url[4200];
    snprintf(url, sizeof(url), "sqlite:%s", path);
    unlink(path);
    srand((unsigned)getpid());
    int64_t full_ms = 0; /* how long a whole run took */
    int middle = 0, rounds = 0;
    int64_t deadline = test_now_ms() + 240000;
    for (; rounds < 3 || (middle < 3 && test_now_ms() < deadline); rounds++) {
        int verb = rounds % 3;
        char name[32], prefix[32];
        snprintf(name, sizeof(name), "R%d", rounds);
        snprintf(prefix, sizeof(prefix), "r%d", rounds);
        duro_provider *p = NULL;
        duro_error e;
        CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
        for (int k = 0; k < COUNT; k++) {
            char id[64];
            snprintf(id, sizeof(id), "%s-%d", prefix, k);
            duro_work_item w = {.kind = DURO_WORK_START,
                                .instance_id = id,
                                .name = name,
                                .payload = id};
            CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
        }
        duro_provider_close(p);

        int out = -1;
        int64_t t0 = test_now_ms();
        pid_t pid = spawn(url, verbs[verb], prefix, &out);
        CHECK_MSG(wait_for(out, "started", t0 + CHILD_DEADLINE),
                  "decide_worker did not start");
        int status = 0;
        if (rounds == 0) { /* the first runs whole: how long it takes */
            CHECK_MSG(wait_for(out, "done", t0 + CHILD_DEADLINE),
                      "decide_worker did not finish");
            full_ms = test_now_ms() - t0;
            CHECK(waitpid(pid, &status, 0) == pid);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "decide_worker exited with status %d", status);
        } else {
            test_sleep_ms(rand() % (int)(full_ms > 1 ? full_ms : 1));
            kill(pid, SIGKILL);
            CHECK(waitpid(pid, &status, 0) == pid);
        }
        close(out);

        check_integrity(path);
        CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
        duro_instance_filter f;
        memset(&f, 0, sizeof(f));
        f.name = name;
        f.limit = COUNT + 1;
        duro_instance_list *l = NULL;
        CHECK_PRC(p->list_instances(p, &f, &l, &e), DURO_OK, &e);
        CHECK_EQ(l->count, COUNT);
        int decided = 0;
        for (size_t i = 0; i < l->count; i++)
            decided += check_instance(p, &l->items[i], verb);
        duro_instance_list_free(l);
        duro_provider_close(p);
        if (rounds == 0)
            CHECK_EQ(decided, COUNT);
        middle += decided > 0 && decided < COUNT;
        fprintf(stderr, "  round %d (%s): %d of %d decided\n", rounds,
                verbs[verb], decided, COUNT);
    }
    CHECK_MSG(middle > 0,
              "in %d rounds no kill landed in the middle of the work", rounds);

    /* What no request reached runs to its end; what was decided stays. */
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    for (int r = 0; r < rounds; r++) {
        char name[32];
        snprintf(name, sizeof(name), "R%d", r);
        CHECK_OK(
            duro_registry_add_orchestration(reg, name, NULL, orch_done, NULL));
    }
    duro_runtime *rt = NULL;
    CHECK_OK(duro_runtime_create(url, reg, NULL, &rt));
    CHECK_OK(duro_runtime_start(rt));
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    WAIT_UNTIL(pending_left(c) == 0, CHILD_DEADLINE);
    duro_client_destroy(c);
    CHECK_OK(duro_runtime_shutdown(rt, 30000));
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
}

TEST_MAIN(T(a_killed_request_decides_each_instance_whole_or_not_at_all))
