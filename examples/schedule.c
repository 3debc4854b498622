/* schedule.c - a schedule: every 200 ms (a cron expression in a time zone
 * works the same way: "30 2 * * *" in "Europe/Berlin") the runtime starts
 * one instance of "Report", named after its fire time
 * ("reports@2026-11-29T19:50:00.200Z"); the example waits for three fires,
 * describes the schedule (its next fire times and its recent fires with
 * their instances' status), then pauses and deletes it - which leaves the
 * instances it started as they are.
 * Run: ./schedule [sqlite:path.db] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "duro.h"

#define FIRES 3

static int report(duro_orch *o, const char *input, duro_result *out)
{
    return duro_ok(out, duro_sprintf(o, "report of %s at %lld",
                                     input != NULL ? input : "?",
                                     (long long)duro_now(o)));
}

/* The schedule's fires so far (newest first); NULL on failure. */
static duro_schedule_description *describe(duro_client *c)
{
    duro_schedule_description *d = NULL;
    if (duro_client_schedule_describe(c, "reports", 3, 10, &d) != DURO_OK)
        return NULL;
    return d;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:schedule.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_schedule_description *d = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "Report", NULL, report,
                                              NULL)) != DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "schedule: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the schedule. */
    duro_client_schedule_delete(client, "reports");
    duro_schedule_spec spec;
    duro_schedule_spec_init(&spec);
    spec.interval_ms = 200;
    spec.orchestration = "Report";
    spec.input = "\"sales\"";
    spec.overlap = DURO_OVERLAP_SKIP; /* never two reports at once */
    if ((rc = duro_client_schedule_create(client, "reports", &spec)) !=
        DURO_OK) {
        fprintf(stderr, "schedule: create: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Wait (10 s at most) until three fires have started their instances,
     * each of which then is waited for. */
    time_t deadline = time(NULL) + 10;
    size_t started = 0;
    while (started < FIRES && time(NULL) < deadline) {
        duro_schedule_description_free(d);
        if ((d = describe(client)) == NULL)
            break;
        started = (size_t)d->schedules[0].fires;
        if (started < FIRES) {
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    if (d == NULL || started < FIRES) {
        fprintf(stderr, "schedule: %zu fires in 10 s\n", started);
        rc = DURO_TIMEOUT;
        goto done;
    }
    for (size_t i = 0; i < d->fire_count; i++) {
        duro_instance_info *info = NULL;
        if (d->fires[i].instance_id == NULL)
            continue; /* a skipped fire */
        rc = duro_client_wait(client, d->fires[i].instance_id, 10000, &info);
        if (rc == DURO_OK)
            printf("%s: %s\n", d->fires[i].instance_id, info->output);
        duro_free(info);
        if (rc != DURO_OK)
            goto done;
    }
    duro_schedule_description_free(d);
    d = describe(client);
    if (d == NULL) {
        rc = DURO_FAILED;
        goto done;
    }
    printf("reports: %lld started, %lld skipped; next fires at",
           (long long)d->schedules[0].fires, (long long)d->schedules[0].skips);
    for (size_t i = 0; i < d->next_count; i++)
        printf(" %lld", (long long)d->next_times[i]);
    printf("\n");

    /* Pausing and deleting leave the instances it started. */
    if ((rc = duro_client_schedule_pause(client, "reports", "example over")) !=
            DURO_OK ||
        (rc = duro_client_schedule_delete(client, "reports")) != DURO_OK) {
        fprintf(stderr, "schedule: pause/delete: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    duro_instance_info *kept = NULL;
    const char *first = d->fires[d->fire_count - 1].instance_id;
    rc = first != NULL ? duro_client_get_status(client, first, &kept)
                       : DURO_NOT_FOUND;
    if (rc == DURO_OK && kept->status != DURO_STATUS_COMPLETED)
        rc = DURO_FAILED;
    duro_free(kept);
    if (rc != DURO_OK)
        fprintf(stderr, "schedule: the first report is gone: %s\n",
                duro_errname(rc));
    else
        printf("deleted the schedule; %s is still there\n", first);

done:
    duro_schedule_description_free(d);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
