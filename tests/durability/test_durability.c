/* test_durability.c - commits that were acknowledged must survive, through
 * the public API and through duro's own provider connections:
 *
 * - kill_after_large_commit_keeps_it: kill_worker (another process) runs an
 *   orchestration that consumes three ~900 KB events and completes; once a
 *   client there has seen Completed it is SIGKILLed, and a new process must
 *   still see Completed with the right output. With default synchronous
 *   (normal) a turn that spills pages to the WAL and changes them again
 *   rewrites its frame headers after the commit frame; a write layer that
 *   held the last of them back lost the commit on kill -9.
 * - rolled_back_spill_*: a provider's ack of several MB fails late (a
 *   duplicate event id) and rolls back beside a second writer, in this
 *   process or another; every later read must work, the file must pass
 *   integrity_check and the second writer's commit must be intact after a
 *   reopen. A write layer that kept the rolled-back frames and wrote them
 *   later put them over the other writer's commit.
 *
 * Every wait has a deadline; nothing depends on a sleep being long enough
 * (kill_worker idles 300 ms as part of the scenario, not to synchronize). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "big_events.h"
#include "duro/provider.h"
#include "test.h"

#ifndef KILL_WORKER_PATH
#error "KILL_WORKER_PATH must name the kill_worker executable"
#endif

#define CHILD_DEADLINE_MS 180000 /* generous: ASan on a loaded machine */

/* ---- child processes ----------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int out; /* read end of its stdout */
    int in;  /* write end of its stdin */
    char buf[256];
    size_t len;
} child;

static void child_spawn(child *c, char *const argv[])
{
    int out[2], in[2];
    memset(c, 0, sizeof(*c));
    c->pid = -1;
    CHECK_MSG(pipe(out) == 0 && pipe(in) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    CHECK_MSG(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(in[0], STDIN_FILENO);
        close(out[0]);
        close(out[1]);
        close(in[0]);
        close(in[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    c->pid = pid;
    c->out = out[0];
    c->in = in[1];
}

/* Reads the child's stdout until a line equal to `want` arrives (1), the
 * child closes it (0), or the deadline passes (0). */
static int child_expect(child *c, const char *want, int64_t deadline_ms)
{
    size_t wn = strlen(want);
    for (;;) {
        char *nl;
        while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
            size_t line = (size_t)(nl - c->buf);
            int match = line == wn && memcmp(c->buf, want, wn) == 0;
            memmove(c->buf, nl + 1, c->len - line - 1);
            c->len -= line + 1;
            if (match)
                return 1;
        }
        int64_t left = deadline_ms - test_now_ms();
        if (left <= 0 || c->len == sizeof(c->buf))
            return 0;
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        int r = poll(&p, 1, (int)(left < 1000 ? left : 1000));
        if (r < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        ssize_t n = read(c->out, c->buf + c->len, sizeof(c->buf) - c->len);
        if (n == 0)
            return 0;
        if (n > 0)
            c->len += (size_t)n;
    }
}

/* SIGKILLs the child (when `kill_it`) and reaps it; returns its status. */
static int child_end(child *c, int kill_it)
{
    int status = -1;
    if (c->pid > 0) {
        if (kill_it)
            kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->pid = -1;
    }
    if (c->out >= 0)
        close(c->out);
    if (c->in >= 0)
        close(c->in);
    c->out = c->in = -1;
    return status;
}

/* ---- kill -9 after an acknowledged large turn ---------------------------- */

static void expected_big_output(size_t bytes, char *out, size_t cap)
{
    char *ev[BIG_EVENT_COUNT];
    for (int i = 0; i < BIG_EVENT_COUNT; i++) {
        ev[i] = malloc(bytes + 1);
        CHECK(ev[i] != NULL);
        big_event_fill(ev[i], bytes, i);
    }
    big_output((const char *const *)ev, BIG_EVENT_COUNT, out, cap);
    for (int i = 0; i < BIG_EVENT_COUNT; i++)
        free(ev[i]);
}

/* One run: the worker completes "big" on a fresh file with `sync`, is killed
 * after its client saw Completed (after idling, when `idle`), and a new
 * process must still see it Completed. Returns 1 when it did. */
static int kill_round(const char *name, const char *sync, size_t bytes,
                      int idle)
{
    char path[512], bytes_arg[32];
    snprintf(path, sizeof(path), "%s", test_path(name));
    snprintf(bytes_arg, sizeof(bytes_arg), "%zu", bytes);
    char *argv[] = {KILL_WORKER_PATH, "kill",    path,
                    (char *)sync,     bytes_arg, (char *)NULL};
    child c;
    child_spawn(&c, argv);
    int64_t deadline = test_now_ms() + CHILD_DEADLINE_MS;
    int acked = child_expect(&c, "completed", deadline);
    if (acked && idle)
        acked = child_expect(&c, "idle", deadline);
    int status = child_end(&c, 1);
    CHECK_MSG(acked,
              "%s: the worker never reported Completed (status 0x%x; its "
              "stderr is above)",
              name, status);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "%s: the worker ended with status 0x%x instead of being killed",
              name, status);

    char url[600];
    snprintf(url, sizeof(url), "sqlite:%s?max_payload=%d", path,
             BIG_MAX_PAYLOAD);
    duro_client *client = NULL;
    CHECK_OK(duro_client_create(url, &client));
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(client, "big", &info));
    int survived = info->status == DURO_STATUS_COMPLETED;
    char expected[128];
    expected_big_output(bytes, expected, sizeof(expected));
    fprintf(stderr, "  %s (synchronous %s, 3 x %zu bytes%s): %s\n", name, sync,
            bytes, idle ? ", idle 300 ms" : "", duro_status_name(info->status));
    if (survived)
        CHECK_STR(info->output, expected);
    duro_free(info);
    duro_client_destroy(client);
    return survived;
}

/* Rounds of the kill; every one must keep the commit. Set DURO_KILL_ROUNDS
 * to run more (measuring how often a broken build loses it). */
TEST(kill_after_large_commit_keeps_it)
{
    const char *env = getenv("DURO_KILL_ROUNDS");
    int rounds = env != NULL ? atoi(env) : 3;
    int lost = 0;
    for (int r = 0; r < rounds; r++) {
        char name[64];
        snprintf(name, sizeof(name), "kill-%d.db", r);
        /* Mostly the scenario of the issue (idle, then the kill); every
         * third round kills right after the acknowledgement. */
        lost += !kill_round(name, "default", 900000, r % 3 != 2);
    }
    CHECK_MSG(lost == 0,
              "%d of %d runs lost an acknowledged commit after kill -9", lost,
              rounds);
}

/* The same with larger events and explicit levels: normal must also keep a
 * turn that spills far more than the page cache; full keeps everything. */
TEST(kill_after_larger_commits_keeps_them)
{
    int lost = 0;
    lost += !kill_round("kill-normal-2m.db", "normal", 2000000, 1);
    lost += !kill_round("kill-full.db", "full", 900000, 1);
    CHECK_MSG(lost == 0, "%d runs lost an acknowledged commit after kill -9",
              lost);
}

/* ---- a rolled-back spill beside a second writer -------------------------- */

/* The failing ack writes `events` history events of `bytes` each, then one
 * whose id duplicates the last of them, so it fails at its last statement
 * (DURO_ALREADY_EXISTS) after having spilled part of the transaction to the
 * WAL. Whether a spill happens and how much of it there is depends on the
 * page cache (SQLite's default: 2000 KiB) and the page size (2 KiB), so a
 * few sizes between just above the cache and well past it are tried. */
typedef struct spill_size {
    int events;
    size_t bytes;
} spill_size;

static const spill_size spill_sizes[] = {
    {9, 250000}, /* 2.25 MB */
    {7, 300000}, /* 2.1 MB */
    {4, 900000}, /* 3.6 MB */
};

#define SPILL_EVENTS_MAX 16
#define SECOND_EVENTS 5     /* the second writer's commits: ~4.5 MB */
#define SECOND_BYTES 900000 /* each */
#define SPILL_MAX_PAYLOAD 1000000

static duro_provider *open_provider(const char *url)
{
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url, &p, &e);
    CHECK_MSG(rc == DURO_OK, "open %s: %s (%s)", url, duro_errname(rc),
              e.message);
    return p;
}

static duro_event event(uint64_t id, duro_event_kind kind, const char *name,
                        const char *payload)
{
    duro_event ev = {.event_id = id,
                     .kind = kind,
                     .name = name,
                     .payload = payload,
                     .timestamp_ms = 1};
    return ev;
}

static void enqueue(duro_provider *p, duro_work_kind kind, const char *id,
                    const char *name, const char *payload)
{
    duro_error e;
    duro_work_item it = {
        .kind = kind, .instance_id = id, .name = name, .payload = payload};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);
}

/* Fetches the next item, which must be instance `id`'s; returns its lock
 * token (caller frees). */
static char *fetch_token(duro_provider *p, const char *id)
{
    duro_error e;
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 600000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK_MSG(item != NULL, "nothing to fetch, expected %s", id);
    CHECK_STR(item->instance_id, id);
    char *token = strdup(item->lock_token);
    duro_orch_item_free(item);
    return token;
}

/* Sets up the file: instance "a" has run its first turn (Started) and is
 * locked again over an event, its token in *token_a; instance "b" is
 * Pending. Closes the provider, so the WAL is checkpointed and gone: the
 * next transaction starts on an empty WAL, and its rollback then reads
 * nothing from the WAL. */
static void spill_setup(const char *url, char **token_a)
{
    duro_provider *p = open_provider(url);
    duro_error e;
    enqueue(p, DURO_WORK_START, "a", "orch", "in");
    char *t = fetch_token(p, "a");
    duro_event started =
        event(1, DURO_EVENT_ORCHESTRATION_STARTED, "orch", "in");
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = &started,
                         .history_delta_count = 1,
                         .meta = &meta};
    CHECK_PRC(p->ack_orchestration_item(p, t, &ack, &e), DURO_OK, &e);
    free(t);
    /* The lock outlives the provider: it is a row. */
    enqueue(p, DURO_WORK_EXTERNAL_EVENT, "a", "go", "small");
    *token_a = fetch_token(p, "a");
    enqueue(p, DURO_WORK_START, "b", "orch", "in");
    duro_provider_close(p);
}

/* P1's ack of size `sz`, failing at its last insert. The duplicate is of
 * the event just written, whose b-tree page is still in the cache, so the
 * failing statement reads nothing from the WAL either. */
static void failing_big_ack(duro_provider *p1, const char *token, spill_size sz)
{
    duro_event ev[SPILL_EVENTS_MAX + 1];
    char *payload[SPILL_EVENTS_MAX];
    CHECK(sz.events <= SPILL_EVENTS_MAX);
    for (int i = 0; i < sz.events; i++) {
        payload[i] = malloc(sz.bytes + 1);
        CHECK(payload[i] != NULL);
        big_event_fill(payload[i], sz.bytes, 10 + i);
        ev[i] =
            event((uint64_t)i + 2, DURO_EVENT_EVENT_RAISED, "go", payload[i]);
    }
    ev[sz.events] = event((uint64_t)sz.events + 1, DURO_EVENT_EVENT_RAISED,
                          "go", "duplicate");
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = (size_t)sz.events + 1};
    duro_error e;
    int rc = p1->ack_orchestration_item(p1, token, &ack, &e);
    for (int i = 0; i < sz.events; i++)
        free(payload[i]);
    CHECK_PRC(rc, DURO_ALREADY_EXISTS, &e);
}

/* P1 goes on: a valid ack of the same item, then a read. */
static void first_writer_goes_on(duro_provider *p1, const char *token)
{
    duro_event raised = event(2, DURO_EVENT_EVENT_RAISED, "go", "small");
    duro_orch_ack ack = {
        .execution_id = 1, .history_delta = &raised, .history_delta_count = 1};
    duro_error e;
    CHECK_PRC(p1->ack_orchestration_item(p1, token, &ack, &e), DURO_OK, &e);
    duro_history *h = NULL;
    CHECK_PRC(p1->read_history(p1, "a", 1, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 2);
    CHECK_STR(h->events[1].payload, "small");
    duro_history_free(h);
}

/* Every one of the second writer's events on "b", whole and in order, read
 * through `p` (fetch, then abandon). */
static void check_second_writer(duro_provider *p)
{
    char *want = malloc(SECOND_BYTES + 1);
    CHECK(want != NULL);
    duro_error e;
    duro_orch_item *item = NULL;
    int rc = p->fetch_orchestration_item(p, 600000, NULL, &item, &e);
    if (rc != DURO_OK)
        free(want);
    CHECK_PRC(rc, DURO_OK, &e);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "b");
    size_t events = 0;
    for (size_t i = 0; i < item->message_count; i++) {
        const duro_work_item *m = &item->messages[i];
        if (m->kind != DURO_WORK_EXTERNAL_EVENT)
            continue;
        big_event_fill(want, SECOND_BYTES, (int)events);
        CHECK_MSG(m->payload != NULL && strcmp(m->payload, want) == 0,
                  "event %zu of b differs from what was committed", events);
        events++;
    }
    free(want);
    CHECK_EQ(events, SECOND_EVENTS);
    CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 0, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);
}

/* The same from an independent connection on SQLite's default VFS. */
static void check_second_writer_raw(const char *path)
{
    char *want = malloc(SECOND_BYTES + 1);
    CHECK(want != NULL);
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT payload FROM orchestrator_queue "
                                "WHERE instance_id = 'b' AND kind = 5 "
                                "ORDER BY id",
                                -1, &s, NULL);
    CHECK_MSG(rc == SQLITE_OK, "prepare: %s", sqlite3_errmsg(db));
    int events = 0, same = 1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        big_event_fill(want, SECOND_BYTES, events);
        const char *got = (const char *)sqlite3_column_text(s, 0);
        same = same && got != NULL && strcmp(got, want) == 0;
        events++;
    }
    char error[256];
    snprintf(error, sizeof(error), "%s", sqlite3_errmsg(db));
    sqlite3_finalize(s);
    sqlite3_close(db);
    free(want);
    CHECK_MSG(rc == SQLITE_DONE, "reading b's events: %s", error);
    CHECK_MSG(same, "b's events differ from what was committed");
    CHECK_EQ(events, SECOND_EVENTS);
}

static void check_integrity(const char *path)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL);
    char result[512];
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    snprintf(result, sizeof(result), "%s",
             rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0)
                              : sqlite3_errmsg(db));
    sqlite3_finalize(s);
    sqlite3_close(db);
    CHECK_MSG(strcmp(result, "ok") == 0, "integrity_check of %s: %s", path,
              result);
}

/* The second writer raises its events on "b": through provider p2 in this
 * process, or (p2 NULL) through kill_worker in another. */
static void second_writer_commits(duro_provider *p2, const char *path)
{
    if (p2 != NULL) {
        char *payload = malloc(SECOND_BYTES + 1);
        CHECK(payload != NULL);
        for (int i = 0; i < SECOND_EVENTS; i++) {
            big_event_fill(payload, SECOND_BYTES, i);
            enqueue(p2, DURO_WORK_EXTERNAL_EVENT, "b", BIG_EVENT_NAME, payload);
        }
        free(payload);
        return;
    }
    char count[16], bytes[32];
    snprintf(count, sizeof(count), "%d", SECOND_EVENTS);
    snprintf(bytes, sizeof(bytes), "%d", SECOND_BYTES);
    char *argv[] = {KILL_WORKER_PATH, "raise", (char *)path, "b", count, bytes,
                    (char *)NULL};
    child c;
    child_spawn(&c, argv);
    int ok = child_expect(&c, "raised", test_now_ms() + CHILD_DEADLINE_MS);
    int status = child_end(&c, !ok);
    CHECK_MSG(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the second writer process failed (status 0x%x)", status);
}

static void rolled_back_spill(const char *name, int second_in_process,
                              spill_size sz)
{
    char path[512], url[600];
    snprintf(path, sizeof(path), "%s", test_path(name));
    snprintf(url, sizeof(url), "sqlite:%s?max_payload=%d", path,
             SPILL_MAX_PAYLOAD);
    fprintf(stderr,
            "  %s: failing ack of %d x %zu bytes, second writer in %s\n", name,
            sz.events, sz.bytes,
            second_in_process ? "this process" : "another process");
    char *token = NULL;
    spill_setup(url, &token);

    duro_provider *p1 = open_provider(url);
    duro_provider *p2 = second_in_process ? open_provider(url) : NULL;
    failing_big_ack(p1, token, sz);
    second_writer_commits(p2, path);
    first_writer_goes_on(p1, token);
    /* Reads through both providers, then from an independent connection. */
    check_second_writer(p1);
    if (p2 != NULL)
        check_second_writer(p2);
    check_integrity(path);
    duro_provider_close(p1);
    duro_provider_close(p2);
    free(token);

    /* Closed and reopened: the close checkpoint copied the WAL into the
     * database; what the second writer committed is there, whole. */
    check_integrity(path);
    check_second_writer_raw(path);
    duro_provider *p3 = open_provider(url);
    check_second_writer(p3);
    duro_error e;
    duro_history *h = NULL;
    CHECK_PRC(p3->read_history(p3, "a", 1, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 2);
    duro_history_free(h);
    duro_provider_close(p3);
}

TEST(rolled_back_spill_beside_writer_in_process)
{
    for (size_t i = 0; i < sizeof(spill_sizes) / sizeof(spill_sizes[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "spill-in-process-%zu.db", i);
        rolled_back_spill(name, 1, spill_sizes[i]);
    }
}

TEST(rolled_back_spill_beside_writer_in_another_process)
{
    for (size_t i = 0; i < sizeof(spill_sizes) / sizeof(spill_sizes[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "spill-two-processes-%zu.db", i);
        rolled_back_spill(name, 0, spill_sizes[i]);
    }
}

TEST_MAIN(T(kill_after_large_commit_keeps_it),
          T(kill_after_larger_commits_keeps_them),
          T(rolled_back_spill_beside_writer_in_process),
          T(rolled_back_spill_beside_writer_in_another_process))
