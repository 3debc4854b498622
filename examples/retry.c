/* retry.c - retries with backoff, and a per-attempt timeout.
 * 1. "Flaky" fails its first two attempts; duro_call_activity_with_retry()
 *    retries it with exponential backoff (100 ms, then 200 ms) and it
 *    succeeds on attempt 3.
 * 2. "SlowOnce" hangs on its first attempt; the policy's attempt_timeout_ms
 *    cancels that attempt (the activity sees its cancellation token fire)
 *    and attempt 2 succeeds at once.
 * The activities note what they saw in a small log, printed by main.
 * Run: ./retry [sqlite:path.db] */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "duro.h"

/* ---- a log the activities write to (activities may do anything) -------- */

typedef struct attempt_log {
    pthread_mutex_t lock;
    int64_t start_ms; /* wall clock of the first line */
    char lines[16][128];
    int count;
    int saw_cancel; /* SlowOnce attempt 1 observed its cancellation */
} attempt_log;

static void note(attempt_log *log, duro_activity *a, const char *what)
{
    pthread_mutex_lock(&log->lock);
    if (log->count == 0)
        log->start_ms = duro_now_ms(); /* times are relative to the first */
    if (log->count < 16)
        snprintf(log->lines[log->count++], sizeof(log->lines[0]),
                 "+%4lld ms  %-8s attempt %u: %s",
                 (long long)(duro_now_ms() - log->start_ms),
                 duro_activity_name(a), duro_activity_attempt(a), what);
    pthread_mutex_unlock(&log->lock);
}

/* ---- activities ---------------------------------------------------------- */

/* Fails attempts 1 and 2, succeeds on attempt 3. duro_activity_attempt()
 * is the retry policy's attempt number. */
static int flaky(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    attempt_log *log = duro_activity_user(a);
    uint32_t attempt = duro_activity_attempt(a);
    if (attempt < 3) {
        note(log, a, "failing (service unavailable)");
        return duro_failf(out, "service unavailable on attempt %u", attempt);
    }
    note(log, a, "succeeding");
    return duro_ok(out, "flaky result after 3 attempts");
}

/* Attempt 1 waits up to 5 s for work that never finishes; the attempt
 * timeout cancels it long before, and duro_activity_wait_cancelled()
 * returns 1 at once. Attempt 2 is quick. */
static int slow_once(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    attempt_log *log = duro_activity_user(a);
    if (duro_activity_attempt(a) == 1) {
        note(log, a, "started, waiting (up to 5 s)");
        if (duro_activity_wait_cancelled(a, 5000)) {
            char seen[96];
            const char *why = duro_activity_cancel_reason(a);
            snprintf(seen, sizeof(seen), "observed cancellation (reason: %s)",
                     why ? why : "?");
            note(log, a, seen);
            pthread_mutex_lock(&log->lock);
            log->saw_cancel = 1;
            pthread_mutex_unlock(&log->lock);
            return duro_fail(out, "cancelled"); /* discarded by duro */
        }
        note(log, a, "was NOT cancelled within 5 s");
        return duro_ok(out, "slow result");
    }
    note(log, a, "succeeding quickly");
    return duro_ok(out, "quick result on attempt 2");
}

/* ---- the orchestration --------------------------------------------------- */

static int retry_demo(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_retry_policy policy;
    duro_retry_policy_init(&policy);
    policy.max_attempts = 5;
    policy.backoff = DURO_BACKOFF_EXPONENTIAL;
    policy.initial_delay_ms = 100; /* then 200, 400, ... */
    policy.coefficient = 2.0;

    duro_task *first = duro_call_activity_with_retry(o, "Flaky", NULL, &policy);
    if (duro_await(o, first) != DURO_OK)
        return duro_failf(out, "Flaky: %s", duro_task_error(first));

    /* The same policy with a per-attempt timeout of 300 ms. */
    policy.attempt_timeout_ms = 300;
    duro_task *second =
        duro_call_activity_with_retry(o, "SlowOnce", NULL, &policy);
    if (duro_await(o, second) != DURO_OK)
        return duro_failf(out, "SlowOnce: %s", duro_task_error(second));

    return duro_ok(out, duro_sprintf(o, "%s; %s", duro_task_output(first),
                                     duro_task_output(second)));
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:retry.db";
    attempt_log log = {.lock = PTHREAD_MUTEX_INITIALIZER};
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "RetryDemo", NULL,
                                              retry_demo, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Flaky", flaky, &log)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "SlowOnce", slow_once, &log)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "retry: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the instance. */
    duro_client_delete(client, "retry-1", 1, NULL);
    rc = duro_client_start(client, "retry-1", "RetryDemo", NULL, NULL);
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "retry-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "retry: retry-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Stopping the runtime waits for activities still running, so the
     * cancelled first attempt of SlowOnce has surely written its line. */
    duro_runtime_shutdown(rt, 5000);

    printf("attempts seen by the activities:\n");
    for (int i = 0; i < log.count; i++)
        printf("  %s\n", log.lines[i]);
    printf("retry-1: %s: %s\n", duro_status_name(info->status),
           info->status == DURO_STATUS_COMPLETED ? info->output : info->error);
    if (info->status != DURO_STATUS_COMPLETED || info->output == NULL ||
        strcmp(info->output, "flaky result after 3 attempts; quick result "
                             "on attempt 2") != 0) {
        fprintf(stderr, "retry: unexpected outcome\n");
        rc = DURO_FAILED;
    } else if (!log.saw_cancel) {
        fprintf(stderr, "retry: SlowOnce attempt 1 did not see its "
                        "cancellation\n");
        rc = DURO_FAILED;
    }

done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
