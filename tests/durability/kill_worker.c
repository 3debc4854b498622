/* kill_worker.c - the child process of test_durability, using only the
 * public API (duro.h):
 *
 *   kill_worker kill DB SYNC BYTES
 *     A client and a runtime on DB (SYNC: "default" leaves synchronous
 *     alone, else off/normal/full/extra). Starts instance "big", whose
 *     orchestration waits for three external events of BYTES bytes each and
 *     completes with a digest of them; raises them, then starts the runtime,
 *     so that one turn consumes all three (a transaction larger than the
 *     page cache); waits until the client sees Completed; writes "completed" on
 * stdout, idles 300 ms, writes "idle", and waits to be killed (the parent
 * SIGKILLs it). The parent then checks from a new process that the instance is
 * still Completed.
 *
 *   kill_worker raise DB INSTANCE COUNT BYTES
 *     A client on DB raises COUNT events of BYTES bytes on INSTANCE, writes
 *     "raised" and exits 0 (the second writer of a test in another process).
 *
 * Exit codes: 0 done, 1 an API call failed (stderr says which), 2 usage,
 * 3 not killed within a minute. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "big_events.h"
#include "duro.h"

static int fail(const char *what, int rc)
{
    fprintf(stderr, "kill_worker[%ld]: %s: %s (%s)\n", (long)getpid(), what,
            duro_errname(rc), duro_errmsg());
    return 1;
}

static void say(const char *line)
{
    size_t n = strlen(line);
    if (write(STDOUT_FILENO, line, n) != (ssize_t)n)
        _exit(1); /* the parent is gone */
}

static int orch_collect(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    const char *events[BIG_EVENT_COUNT];
    for (int i = 0; i < BIG_EVENT_COUNT; i++) {
        duro_task *t = duro_wait_event(o, BIG_EVENT_NAME);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, "event wait failed");
        events[i] = duro_task_output(t);
        if (events[i] == NULL)
            return duro_fail(out, "an event without payload");
    }
    char digest[128];
    big_output(events, BIG_EVENT_COUNT, digest, sizeof(digest));
    return duro_ok(out, digest);
}

static void make_url(char *url, size_t cap, const char *db, const char *sync)
{
    int n = snprintf(url, cap, "sqlite:%s?max_payload=%d", db, BIG_MAX_PAYLOAD);
    if (sync != NULL && strcmp(sync, "default") != 0)
        snprintf(url + n, cap - (size_t)n, "&synchronous=%s", sync);
}

static int raise_all(duro_client *c, const char *id, int count, size_t bytes)
{
    char *payload = malloc(bytes + 1);
    if (payload == NULL)
        return fail("malloc", DURO_NOMEM);
    int result = 0;
    for (int i = 0; i < count && result == 0; i++) {
        big_event_fill(payload, bytes, i);
        int rc = duro_client_raise_event(c, id, BIG_EVENT_NAME, payload);
        if (rc != DURO_OK)
            result = fail("raise_event", rc);
    }
    free(payload);
    return result;
}

static int run_kill(const char *db, const char *sync, size_t bytes)
{
    char url[1024];
    make_url(url, sizeof(url), db, sync);
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.max_payload = BIG_MAX_PAYLOAD;
    /* Work from this process wakes the runtime at once; the fallback poll
     * is pushed past the idle period so that nothing of this process
     * touches the database between the acknowledgement and the kill. */
    o.poll_interval_ms = 10000;
    o.log_level = getenv("DURO_TEST_LOG") ? DURO_LOG_DEBUG : DURO_LOG_ERROR;
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    duro_instance_info *info = NULL;
    int rc, result = 1;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "Collect", NULL,
                                              orch_collect, NULL)) != DURO_OK)
        return fail("registry", rc);
    if ((rc = duro_runtime_create(url, reg, &o, &rt)) != DURO_OK)
        result = fail("runtime_create", rc);
    else if ((rc = duro_client_create(url, &c)) != DURO_OK)
        result = fail("client_create", rc);
    else if ((rc = duro_client_start(c, "big", "Collect", NULL, NULL)) !=
             DURO_OK)
        result = fail("start", rc);
    else if (raise_all(c, "big", BIG_EVENT_COUNT, bytes) != 0)
        result = 1;
    else if ((rc = duro_runtime_start(rt)) != DURO_OK)
        result = fail("runtime_start", rc);
    else if ((rc = duro_client_wait(c, "big", 120000, &info)) != DURO_OK)
        result = fail("wait", rc);
    else if (info->status != DURO_STATUS_COMPLETED)
        fprintf(stderr, "kill_worker: instance big is %s (%s)\n",
                duro_status_name(info->status), info->error ? info->error : "");
    else
        result = 0;
    duro_free(info);
    if (result != 0)
        return result;
    /* Acknowledged: from here on the commit must survive the kill. */
    say("completed\n");
    struct timespec idle = {0, 300 * 1000000L};
    nanosleep(&idle, NULL);
    say("idle\n");
    /* Wait for the kill (stdin is the parent's pipe: EOF when it is gone).
     * The runtime and client are deliberately left open. */
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    poll(&pfd, 1, 60000);
    fprintf(stderr, "kill_worker: not killed\n");
    return 3;
}

static int run_raise(const char *db, const char *id, int count, size_t bytes)
{
    char url[1024];
    make_url(url, sizeof(url), db, NULL);
    duro_client *c = NULL;
    int rc = duro_client_create(url, &c);
    if (rc != DURO_OK)
        return fail("client_create", rc);
    int result = raise_all(c, id, count, bytes);
    duro_client_destroy(c);
    if (result == 0)
        say("raised\n");
    return result;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "kill") == 0)
        return run_kill(argv[2], argv[3], (size_t)strtoull(argv[4], NULL, 10));
    if (argc == 6 && strcmp(argv[1], "raise") == 0)
        return run_raise(argv[2], argv[3], atoi(argv[4]),
                         (size_t)strtoull(argv[5], NULL, 10));
    fprintf(stderr, "usage: kill_worker kill DB SYNC BYTES\n"
                    "       kill_worker raise DB INSTANCE COUNT BYTES\n");
    return 2;
}
