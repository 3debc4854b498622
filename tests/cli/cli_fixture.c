/* cli_fixture.c - puts instances into real states on a SQLite file for the
 * duro command's tests (test_cli.sh), with a real runtime:
 *   cli_fixture populate URL     hello-1, hello-2 completed; boom-1 failed;
 *                                wait-1..3 running (waiting for "go");
 *                                slow-1 cancelled by user:alice while its
 *                                activity ran; later-1 pending (1 h delay)
 *   cli_fixture newer-schema PATH  records schema version 99 in the file
 * Exits 0 when every instance reached its state, 1 otherwise. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "duro.h"

/* Echoes its input: hello-1's output is JSON, hello-2's is not UTF-8. */
static int greet(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    return duro_ok(out, input);
}

static int explode(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    (void)input;
    return duro_fail(out, "the flux capacitor overheated");
}

static int block(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    duro_activity_wait_cancelled(a, 30000);
    return duro_fail(out, "stopped");
}

static int hello(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Greet", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static int boom(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Explode", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_failf(out, "explode: %s", duro_task_error(t));
    return duro_ok(out, NULL);
}

static int waiter(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *t = duro_wait_event(o, "go");
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

static int slow(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Block", input);
    duro_await(o, t);
    return duro_ok(out, NULL);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to 30 s for @p id to reach @p status (and, for Running, to have
 * at least @p events history events). */
static int reach(duro_client *c, const char *id, int status, uint64_t events)
{
    for (int i = 0; i < 3000; i++) {
        duro_instance_info *info = NULL;
        if (duro_client_get_status(c, id, &info) == DURO_OK &&
            info->status == status && info->history_count >= events) {
            duro_free(info);
            return 0;
        }
        duro_free(info);
        sleep_ms(10);
    }
    fprintf(stderr, "cli_fixture: %s never became %s\n", id,
            duro_status_name(status));
    return -1;
}

static int populate(const char *url)
{
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    int failed = 0;
    if (duro_registry_create(&reg) != DURO_OK ||
        duro_registry_add_orchestration(reg, "Hello", NULL, hello, NULL) ||
        duro_registry_add_orchestration(reg, "Boom", NULL, boom, NULL) ||
        duro_registry_add_orchestration(reg, "Waiter", NULL, waiter, NULL) ||
        duro_registry_add_orchestration(reg, "Slow", NULL, slow, NULL) ||
        duro_registry_add_activity(reg, "Greet", greet, NULL) ||
        duro_registry_add_activity(reg, "Explode", explode, NULL) ||
        duro_registry_add_activity(reg, "Block", block, NULL) ||
        duro_runtime_create(url, reg, NULL, &rt) != DURO_OK ||
        duro_client_create(url, &c) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK) {
        fprintf(stderr, "cli_fixture: setup: %s\n", duro_errmsg());
        failed = 1;
    }
    duro_start_options later;
    duro_start_options_init(&later);
    later.delay_ms = 3600 * 1000;
    if (!failed &&
        (duro_client_start(c, "hello-1", "Hello", "{\"greeting\":\"hi\"}",
                           NULL) ||
         duro_client_start(c, "hello-2", "Hello", "not json \xff\xfe bytes",
                           NULL) ||
         duro_client_start(c, "boom-1", "Boom", NULL, NULL) ||
         duro_client_start(c, "wait-1", "Waiter", NULL, NULL) ||
         duro_client_start(c, "wait-2", "Waiter", NULL, NULL) ||
         duro_client_start(c, "wait-3", "Waiter", NULL, NULL) ||
         duro_client_start(c, "slow-1", "Slow", "\"job\"", NULL) ||
         duro_client_start(c, "later-1", "Hello", "\"tomorrow\"", &later))) {
        fprintf(stderr, "cli_fixture: start: %s\n", duro_errmsg());
        failed = 1;
    }
    if (!failed)
        failed = reach(c, "hello-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "hello-2", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "boom-1", DURO_STATUS_FAILED, 0) ||
                 reach(c, "wait-1", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "wait-2", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "wait-3", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "slow-1", DURO_STATUS_RUNNING, 2);
    if (!failed &&
        duro_client_cancel(c, "slow-1", "bad deploy", "user:alice") != DURO_OK)
        failed = 1;
    if (!failed)
        failed = reach(c, "slow-1", DURO_STATUS_CANCELLED, 0);
    if (rt != NULL)
        duro_runtime_shutdown(rt, 10000);
    duro_runtime_destroy(rt);
    duro_client_destroy(c);
    duro_registry_destroy(reg);
    return failed ? 1 : 0;
}

static int newer_schema(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "INSERT INTO duro_schema VALUES(99, 0)", NULL,
                          NULL, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "cli_fixture: %s: %s\n", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "populate") == 0)
        return populate(argv[2]);
    if (argc == 3 && strcmp(argv[1], "newer-schema") == 0)
        return newer_schema(argv[2]);
    fprintf(stderr, "usage: cli_fixture populate URL | newer-schema PATH\n");
    return 2;
}
