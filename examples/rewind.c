/* rewind.c - retrying a failed instance after the cause is fixed. The
 * orchestration books a trip: a flight, then a hotel, then a car. The
 * hotel service is down, so the instance fails after the flight was
 * booked. The operator fixes it (here: a flag) and rewinds the instance:
 * duro starts a new execution that keeps the history before the failure -
 * the flight is not booked a second time - runs the hotel booking again
 * and goes on. The failed execution stays readable, and the new one
 * records who rewound it and why (an ExecutionReset event). The same from
 * the command line: `duro rewind trip-1 --reason "hotel API back"`, or
 * `duro rewind --name Trip --dry-run` for every failed trip.
 * Run: ./rewind [sqlite:path.db] */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "duro.h"

static atomic_int hotel_up;       /* the fix */
static atomic_int flights_booked; /* must stay 1 */

/* ---- activities ---------------------------------------------------------- */

static int book_flight(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&flights_booked, 1);
    char ref[96];
    snprintf(ref, sizeof(ref), "flight %s", trip ? trip : "?");
    return duro_ok(out, ref);
}

static int book_hotel(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    (void)trip;
    if (!atomic_load(&hotel_up))
        return duro_fail(out, "hotel service unavailable");
    return duro_ok(out, "hotel");
}

static int book_car(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    (void)trip;
    return duro_ok(out, "car");
}

/* ---- the orchestration --------------------------------------------------- */

static int trip(duro_orch *o, const char *input, duro_result *out)
{
    const char *steps[] = {"BookFlight", "BookHotel", "BookCar"};
    const char *booked[3];
    for (int i = 0; i < 3; i++) {
        duro_task *t = duro_call_activity(o, steps[i], input);
        if (duro_await(o, t) != DURO_OK)
            return duro_failf(out, "%s: %s", steps[i], duro_task_error(t));
        booked[i] = duro_task_output(t);
    }
    return duro_ok(
        out, duro_sprintf(o, "%s + %s + %s", booked[0], booked[1], booked[2]));
}

/* ---- main ---------------------------------------------------------------- */

static void print_history(duro_client *c, const char *id, uint64_t execution)
{
    duro_history *h = NULL;
    if (duro_client_read_history(c, id, execution, &h) != DURO_OK)
        return;
    printf("execution %llu:\n", (unsigned long long)execution);
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        printf("  %2llu %s", (unsigned long long)e->event_id,
               duro_event_kind_name(e->kind));
        if (e->kind == DURO_EVENT_ACTIVITY_SCHEDULED && e->name)
            printf(" %s", e->name);
        if (e->kind == DURO_EVENT_EXECUTION_RESET)
            printf(" of execution %llu after event %llu, by %s: %s",
                   (unsigned long long)e->ref_execution,
                   (unsigned long long)e->ref_event_id,
                   e->requested_by ? e->requested_by : "-",
                   e->reason ? e->reason : "-");
        printf("\n");
    }
    duro_history_free(h);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:rewind.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc, ok = 0;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "Trip", NULL, trip, NULL)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookFlight", book_flight,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookHotel", book_hotel, NULL)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookCar", book_car, NULL)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "rewind: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the instance. */
    duro_client_delete(client, "trip-1", 1, NULL);
    if ((rc = duro_client_start(client, "trip-1", "Trip", "Lisbon", NULL)) !=
            DURO_OK ||
        (rc = duro_client_wait(client, "trip-1", 10000, &info)) != DURO_OK) {
        fprintf(stderr, "rewind: trip-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("trip-1 %s: %s\n", duro_status_name(info->status),
           info->error ? info->error : "");
    if (info->status != DURO_STATUS_FAILED) {
        fprintf(stderr, "rewind: trip-1 should have failed\n");
        goto done;
    }
    duro_free(info);
    info = NULL;

    /* The operator fixes the hotel service, then rewinds. */
    atomic_store(&hotel_up, 1);
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.reason = "hotel service back";
    o.requested_by = "user:operator";
    duro_reset_result r;
    if ((rc = duro_client_rewind(client, "trip-1", &o, &r)) != DURO_OK ||
        (rc = duro_client_wait(client, "trip-1", 10000, &info)) != DURO_OK) {
        fprintf(stderr, "rewind: rewinding trip-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("rewound to event %llu; %u activity run again\n",
           (unsigned long long)r.to_event_id, r.activities);
    printf("trip-1 %s: %s\n", duro_status_name(info->status),
           info->output ? info->output : "");
    print_history(client, "trip-1", 1);
    print_history(client, "trip-1", 2);
    printf("flights booked: %d\n", atomic_load(&flights_booked));
    ok = info->status == DURO_STATUS_COMPLETED &&
         atomic_load(&flights_booked) == 1;
    if (!ok)
        fprintf(stderr, "rewind: expected a completed trip, one flight\n");

done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return ok ? 0 : 1;
}
