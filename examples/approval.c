/* approval.c - human approval: the orchestration waits for the external event
 * "approval" and, at the same time, for a durable timer; duro_select() takes
 * whichever comes first. main starts two requests, approves the first from the
 * client and lets the second time out, which escalates it.
 * Run: ./approval [sqlite:path.db] */
/* nanosleep and clock_gettime are POSIX, not C11 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "duro.h"

/* Activity run when nobody answered in time (a real one would page someone). */
static int escalate(duro_activity *a, const char *request, duro_result *out)
{
    (void)a;
    (void)request;
    return duro_ok(out, "escalated");
}

/* Orchestration. Input: the timeout in milliseconds. The timer is durable: it
 * fires at the same moment even if the process restarts while waiting. */
static int approval(duro_orch *o, const char *input, duro_result *out)
{
    long long timeout_ms = atoll(input);
    duro_task *answer = duro_wait_event(o, "approval");
    duro_task *deadline = duro_timer(o, timeout_ms);

    /* The winner is decided by the order of history, so replay agrees. */
    if (duro_select(o, answer, deadline) == answer)
        return duro_ok(
            out, duro_sprintf(o, "approved by %s", duro_task_output(answer)));

    duro_task *esc = duro_call_activity(o, "Escalate", duro_instance_id(o));
    if (duro_await(o, esc) != DURO_OK)
        return duro_failf(out, "timed out, escalation failed: %s",
                          duro_task_error(esc));
    return duro_ok(out,
                   duro_sprintf(o, "timed out: %s", duro_task_output(esc)));
}

/* Polls the status until the instance has run its first turn (it is then
 * waiting for the event), with a deadline. */
static int wait_running(duro_client *c, const char *id, int64_t timeout_ms)
{
    int64_t deadline = duro_now_ms() + timeout_ms;
    for (;;) {
        duro_instance_info *info = NULL;
        int rc = duro_client_get_status(c, id, &info);
        int status = rc == DURO_OK ? info->status : DURO_STATUS_NOT_FOUND;
        duro_free(info);
        if (rc != DURO_OK)
            return rc;
        if (status != DURO_STATUS_PENDING)
            return DURO_OK;
        if (duro_now_ms() >= deadline)
            return DURO_TIMEOUT;
        struct timespec pause = {0, 5 * 1000 * 1000}; /* between two polls */
        nanosleep(&pause, NULL);
    }
}

/* Waits for one instance and prints its outcome; 0 when it completed. */
/* Prints how instance `id` ended; 1 unless it completed with `expected`. */
static int report(duro_client *c, const char *id, const char *expected)
{
    duro_instance_info *info = NULL;
    int rc = duro_client_wait(c, id, 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "approval: %s: %s (%s)\n", id, duro_errname(rc),
                duro_errmsg());
        duro_free(info);
        return 1;
    }
    int ok = info->status == DURO_STATUS_COMPLETED;
    printf("%s: %s: %s\n", id, duro_status_name(info->status),
           ok            ? info->output
           : info->error ? info->error
                         : "(none)");
    if (ok && (info->output == NULL || strcmp(info->output, expected) != 0)) {
        fprintf(stderr, "approval: %s: expected \"%s\"\n", id, expected);
        ok = 0;
    }
    duro_free(info);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:approval.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    int rc, failures = 0;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "Approval", NULL, approval,
                                              NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Escalate", escalate, NULL)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "approval: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the instances. */
    duro_client_delete(client, "request-1", 1, NULL);
    duro_client_delete(client, "request-2", 1, NULL);

    /* request-1 gives its approver 10 s, request-2 only 500 ms. */
    if ((rc = duro_client_start(client, "request-1", "Approval", "10000",
                                NULL)) != DURO_OK ||
        (rc = duro_client_start(client, "request-2", "Approval", "500",
                                NULL)) != DURO_OK) {
        fprintf(stderr, "approval: start: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Alice approves request-1 once it is waiting. (An event raised while
     * the instance is still Pending would be kept for it too.) */
    if ((rc = wait_running(client, "request-1", 10000)) != DURO_OK ||
        (rc = duro_client_raise_event(client, "request-1", "approval",
                                      "alice")) != DURO_OK) {
        fprintf(stderr, "approval: raise: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Nobody answers request-2: its timer fires after 500 ms. */
    failures += report(client, "request-1", "approved by alice");
    failures += report(client, "request-2", "timed out: escalated");
    if (failures)
        rc = DURO_FAILED;

done:
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
