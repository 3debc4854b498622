/* eternal.c - an eternal orchestration: a periodic job that does one unit of
 * work, sleeps on a durable timer and then continues as new, passing its
 * state to the next execution. Each execution starts with a fresh, short
 * history, so a job that runs forever never grows an endless history. This
 * one stops after 10 generations so the example ends.
 * Run: ./eternal [sqlite:path.db] */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "duro.h"

#define GENERATIONS 10
#define PERIOD_MS 50

/* Activity: one unit of work; returns how many items it processed. */
static int do_work(duro_activity *a, const char *generation, duro_result *out)
{
    (void)a;
    char processed[16];
    snprintf(processed, sizeof(processed), "%d", 10 + atoi(generation));
    return duro_ok(out, processed);
}

/* Orchestration. Input (its whole state): "<generation> <items so far>". */
static int periodic_job(duro_orch *o, const char *input, duro_result *out)
{
    int generation = 1;
    long items = 0;
    if (input != NULL && sscanf(input, "%d %ld", &generation, &items) < 1)
        return duro_failf(out, "bad state '%s'", input);

    duro_task *work =
        duro_call_activity(o, "DoWork", duro_sprintf(o, "%d", generation));
    if (duro_await(o, work) != DURO_OK)
        return duro_failf(out, "work failed: %s", duro_task_error(work));
    items += atol(duro_task_output(work));

    if (generation == GENERATIONS)
        return duro_ok(out, duro_sprintf(o, "%d generations, %ld items",
                                         generation, items));

    /* Wait for the next period, then start over with the new state. */
    duro_await(o, duro_timer(o, PERIOD_MS));
    return duro_continue_as_new(
        o, out, duro_sprintf(o, "%d %ld", generation + 1, items));
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:eternal.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    duro_history *first = NULL, *last = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "PeriodicJob", NULL,
                                              periodic_job, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "DoWork", do_work, NULL)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "eternal: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the instance. */
    duro_client_delete(client, "job-1", 1, NULL);
    rc = duro_client_start(client, "job-1", "PeriodicJob", "1 0", NULL);
    /* duro_client_wait follows the chain to its latest execution. */
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "job-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "eternal: job-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("job-1: %s: %s\n", duro_status_name(info->status),
           info->status == DURO_STATUS_COMPLETED ? info->output : info->error);
    printf("  current execution id: %" PRIu64 "\n", info->execution_id);

    /* Execution 1 ended with ContinuedAsNew, the current one (0 = current)
     * with OrchestrationCompleted: each is a few events long. */
    rc = duro_client_read_history(client, "job-1", 1, &first);
    if (rc == DURO_OK)
        rc = duro_client_read_history(client, "job-1", 0, &last);
    if (rc == DURO_OK && (first->count == 0 || last->count == 0))
        rc = DURO_NOT_FOUND;
    if (rc != DURO_OK) {
        fprintf(stderr, "eternal: history: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("  history of execution 1: %zu events, last %s\n", first->count,
           duro_event_kind_name(first->events[first->count - 1].kind));
    printf("  history of execution %" PRIu64 ": %zu events, last %s\n",
           last->execution_id, last->count,
           duro_event_kind_name(last->events[last->count - 1].kind));

    /* The runtime keeps the last 10 executions of a chain
     * (duro_runtime_options.keep_executions; this one ran 10); older ones
     * are pruned as it goes on. Pruning by hand keeps fewer. */
    size_t pruned = 0;
    if ((rc = duro_client_prune(client, "job-1", 1, &pruned)) != DURO_OK) {
        fprintf(stderr, "eternal: prune: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("  pruned %zu finished executions, kept the last one\n", pruned);

    if (info->status != DURO_STATUS_COMPLETED ||
        info->execution_id != GENERATIONS || info->output == NULL ||
        strcmp(info->output, "10 generations, 155 items") != 0 ||
        pruned != GENERATIONS - 1) {
        fprintf(stderr, "eternal: unexpected outcome\n");
        rc = DURO_FAILED;
    }

done:
    duro_history_free(first);
    duro_history_free(last);
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
