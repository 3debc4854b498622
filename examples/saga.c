/* saga.c - a saga with compensation: book a flight, book a hotel, charge the
 * card. Each step that succeeded pushes its undo action; when a later step
 * fails, the orchestration runs the undo actions in reverse order (cancel
 * hotel, then cancel flight) and ends Failed. Here the card is declined on
 * purpose, through the input. main then lists the steps from the history.
 * Run: ./saga [sqlite:path.db] */
#include <stdio.h>
#include <string.h>

#include "duro.h"

/* ---- activities ---------------------------------------------------------- */

static int book_flight(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    (void)trip;
    return duro_ok(out, "flight FL-1042");
}

static int book_hotel(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    (void)trip;
    return duro_ok(out, "hotel HT-2207");
}

/* Fails when the trip says "card=declined": a deterministic failure for the
 * example. A real one would call the payment provider. */
static int charge_card(duro_activity *a, const char *trip, duro_result *out)
{
    (void)a;
    if (strstr(trip, "card=declined") != NULL)
        return duro_fail(out, "card declined by the bank");
    return duro_ok(out, "charged 640.00 EUR");
}

/* The compensations receive the booking they undo. */
static int cancel_booking(duro_activity *a, const char *booking,
                          duro_result *out)
{
    (void)a;
    char done[128];
    snprintf(done, sizeof(done), "cancelled %s", booking);
    return duro_ok(out, done);
}

/* ---- the orchestration --------------------------------------------------- */

typedef struct compensation {
    const char *activity; /* what undoes the step */
    const char *input;    /* the step's output, borrowed from the context */
} compensation;

static int book_trip(duro_orch *o, const char *trip, duro_result *out)
{
    static const char *const steps[] = {"BookFlight", "BookHotel",
                                        "ChargeCard"};
    static const char *const undo[] = {"CancelFlight", "CancelHotel", NULL};
    compensation done[3];
    size_t n_done = 0;
    const char *error = NULL;

    for (size_t i = 0; i < 3; i++) {
        duro_task *t = duro_call_activity(o, steps[i], trip);
        if (duro_await(o, t) != DURO_OK) {
            error =
                duro_sprintf(o, "%s failed: %s", steps[i], duro_task_error(t));
            break;
        }
        if (undo[i] != NULL)
            done[n_done++] = (compensation){undo[i], duro_task_output(t)};
    }
    if (error == NULL)
        return duro_ok(out, "trip booked");

    /* Undo in reverse order. Compensations must not give up easily, so they
     * are retried (defaults: 3 attempts, exponential backoff from 1 s). */
    duro_retry_policy retry;
    duro_retry_policy_init(&retry);
    const char *undone = "";
    for (size_t i = n_done; i-- > 0;) {
        duro_task *t = duro_call_activity_with_retry(o, done[i].activity,
                                                     done[i].input, &retry);
        if (duro_await(o, t) != DURO_OK)
            return duro_failf(out, "%s; compensation %s failed too: %s", error,
                              done[i].activity, duro_task_error(t));
        undone = duro_sprintf(o, "%s%s%s", undone, *undone ? ", " : "",
                              done[i].activity);
    }
    return duro_failf(out, "%s; compensated: %s", error, undone);
}

/* ---- main ---------------------------------------------------------------- */

/* Prints every ActivityScheduled of the instance's history, in order, with
 * the outcome recorded for it. */
static int print_steps(duro_client *c, const char *id)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(c, id, 0, &h);
    if (rc != DURO_OK)
        return rc;
    printf("steps, from the history:\n");
    int step = 0;
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *s = &h->events[i];
        if (s->kind != DURO_EVENT_ACTIVITY_SCHEDULED)
            continue;
        const char *outcome = "(no result)";
        for (size_t j = i + 1; j < h->count; j++) {
            const duro_event *r = &h->events[j];
            if (r->source_event_id != s->event_id)
                continue;
            if (r->kind == DURO_EVENT_ACTIVITY_COMPLETED)
                outcome = r->payload ? r->payload : "";
            else if (r->kind == DURO_EVENT_ACTIVITY_FAILED)
                outcome = r->error ? r->error : "failed";
        }
        printf("  %d. %-13s -> %s\n", ++step, s->name, outcome);
    }
    duro_history_free(h);
    return DURO_OK;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:saga.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "BookTrip", NULL, book_trip,
                                              NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookFlight", book_flight,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookHotel", book_hotel, NULL)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ChargeCard", charge_card,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "CancelHotel", cancel_booking,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "CancelFlight", cancel_booking,
                                         NULL)) != DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "saga: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1; /* a second run reuses the finished instance */
    rc = duro_client_start(client, "trip-1", "BookTrip",
                           "to=Lisbon nights=3 card=declined", &so);
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "trip-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "saga: trip-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* The expected outcome is Failed, with both bookings undone. */
    printf("trip-1: %s: %s\n", duro_status_name(info->status),
           info->status == DURO_STATUS_COMPLETED ? info->output : info->error);
    if ((rc = print_steps(client, "trip-1")) != DURO_OK) {
        fprintf(stderr, "saga: history: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    if (info->status != DURO_STATUS_FAILED || info->error == NULL ||
        strstr(info->error, "compensated: CancelHotel, CancelFlight") == NULL) {
        fprintf(stderr, "saga: expected Failed with both compensations\n");
        rc = DURO_FAILED;
    }

done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
