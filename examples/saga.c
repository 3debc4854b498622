/* saga.c - a saga with compensation: book a flight, book a hotel, charge the
 * card. Each step that succeeded pushes its undo action; when a later step
 * fails, or the trip is cancelled, the orchestration runs the undo actions
 * in reverse order (cancel hotel, then cancel flight).
 *   trip-1  the card is declined (on purpose, through the input): the
 *           orchestration compensates and ends Failed.
 *   trip-2  the charge waits for the bank's confirmation; main cancels the
 *           trip while it waits. BookTrip is registered with observe_cancel,
 *           so the cancel reaches its code: the running charge is cancelled,
 *           its await returns DURO_CANCELLED, the code compensates, and the
 *           instance ends Cancelled with the cancel's reason.
 * main then lists the steps of both from their histories, and exits
 * non-zero when either did not end as expected.
 * Run: ./saga [sqlite:path.db] */
/* nanosleep and clock_gettime are POSIX, not C11 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* What the charge of trip-2 tells main (activities may do anything). */
typedef struct bank {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int waiting;            /* a charge waits for its confirmation */
    char cancel_reason[64]; /* what its token said when it fired */
} bank;

/* "card=declined" fails at once. "card=3ds" waits for the traveller to
 * confirm the payment with the bank, which in this example never happens:
 * the wait ends as soon as the activity is cancelled. A real one would
 * call the payment provider. */
static int charge_card(duro_activity *a, const char *trip, duro_result *out)
{
    if (strstr(trip, "card=declined") != NULL)
        return duro_fail(out, "card declined by the bank");
    if (strstr(trip, "card=3ds") == NULL)
        return duro_ok(out, "charged 640.00 EUR");

    bank *b = duro_activity_user(a);
    pthread_mutex_lock(&b->lock);
    b->waiting = 1;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    if (!duro_activity_wait_cancelled(a, 30000))
        return duro_fail(out, "no confirmation from the bank in 30 s");
    const char *why = duro_activity_cancel_reason(a);
    pthread_mutex_lock(&b->lock);
    snprintf(b->cancel_reason, sizeof(b->cancel_reason), "%s", why ? why : "?");
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    return duro_fail(out, "charge stopped"); /* discarded: it was cancelled */
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

    /* A step failed, or the trip was cancelled: a cancel makes the pending
     * await return DURO_CANCELLED (the running step is cancelled) and
     * duro_cancel_requested() 1. Either way, undo in reverse order. The
     * compensations run normally after a cancel; they must not give up
     * easily, so they are retried (defaults: 3 attempts, exponential
     * backoff from 1 s). */
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
    if (duro_cancel_requested(o)) {
        /* After a cancel the instance ends Cancelled with the cancel's
         * reason, whatever this returns; the custom status keeps what the
         * cleanup did. */
        duro_set_custom_status(o, duro_sprintf(o, "compensated: %s", undone));
        return duro_ok(out, "cleaned up");
    }
    return duro_failf(out, "%s; compensated: %s", error, undone);
}

/* ---- main ---------------------------------------------------------------- */

/* Prints the instance's activities in history order, each with the outcome
 * recorded for it, and an instance cancel where it came. trace receives the
 * same, one word per step ("ChargeCard:cancelled(instance_cancelled)"), for
 * main to check. */
static int print_steps(duro_client *c, const char *id, char *trace, size_t size)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(c, id, 0, &h);
    if (rc != DURO_OK)
        return rc;
    printf("steps, from the history:\n");
    trace[0] = '\0';
    int step = 0;
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *s = &h->events[i];
        size_t used = strlen(trace);
        if (s->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED) {
            int observed = (s->flags & DURO_CANCEL_OBSERVED) != 0;
            printf("     cancel requested by %s: %s%s\n",
                   s->requested_by ? s->requested_by : "-",
                   s->reason ? s->reason : "-",
                   observed ? " (delivered to the code)" : "");
            snprintf(trace + used, size - used, "%scancel:%s", used ? " " : "",
                     observed ? "observed" : "immediate");
            continue;
        }
        if (s->kind != DURO_EVENT_ACTIVITY_SCHEDULED)
            continue;
        const char *outcome = "(no result)", *word = "none";
        char cancelled[96], why[96];
        for (size_t j = i + 1; j < h->count; j++) {
            const duro_event *r = &h->events[j];
            if (r->source_event_id != s->event_id)
                continue;
            if (r->kind == DURO_EVENT_ACTIVITY_COMPLETED) {
                outcome = r->payload ? r->payload : "";
                word = "ok";
            } else if (r->kind == DURO_EVENT_ACTIVITY_FAILED) {
                outcome = r->error ? r->error : "failed";
                word = "failed";
            } else if (r->kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED) {
                const char *reason = r->reason ? r->reason : "";
                snprintf(why, sizeof(why), "cancelled (%s)", reason);
                snprintf(cancelled, sizeof(cancelled), "cancelled(%s)", reason);
                outcome = why;
                word = cancelled;
                break; /* anything it returns later is discarded */
            }
        }
        printf("  %d. %-13s -> %s\n", ++step, s->name, outcome);
        snprintf(trace + used, size - used, "%s%s:%s", used ? " " : "", s->name,
                 word);
    }
    duro_history_free(h);
    return DURO_OK;
}

/* Waits up to 10 s until trip-2's charge waits for the bank (cancelled 0)
 * or has seen its token fire (cancelled 1). */
static int wait_for_charge(bank *b, int cancelled)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&b->lock);
    int rc = 0, seen = 0;
    while (!(seen = cancelled ? b->cancel_reason[0] != '\0' : b->waiting) &&
           rc == 0)
        rc = pthread_cond_timedwait(&b->changed, &b->lock, &deadline);
    pthread_mutex_unlock(&b->lock);
    return seen ? DURO_OK : DURO_TIMEOUT;
}

/* Waits for the instance to end, prints its outcome and steps, and checks
 * them. Returns DURO_OK when they are what is expected. */
static int report(duro_client *c, const char *id, int status, const char *text,
                  const char *trace)
{
    duro_instance_info *info = NULL;
    char got[512];
    int rc = duro_client_wait(c, id, 10000, &info);
    if (rc == DURO_OK) {
        printf("\n%s: %s: %s", id, duro_status_name(info->status),
               info->status == DURO_STATUS_COMPLETED ? info->output
                                                     : info->error);
        if (info->custom_status != NULL)
            printf(" (custom status: %s)", info->custom_status);
        printf("\n");
        rc = print_steps(c, id, got, sizeof(got));
    }
    if (rc != DURO_OK) {
        fprintf(stderr, "saga: %s: %s (%s)\n", id, duro_errname(rc),
                duro_errmsg());
    } else if (info->status != status || info->error == NULL ||
               strstr(info->error, text) == NULL || strcmp(got, trace) != 0) {
        fprintf(stderr,
                "saga: %s: expected %s with \"%s\" and the steps\n  %s\n"
                "got the steps\n  %s\n",
                id, duro_status_name(status), text, trace, got);
        rc = DURO_FAILED;
    }
    duro_free(info);
    return rc;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:saga.db";
    bank b = {.lock = PTHREAD_MUTEX_INITIALIZER,
              .changed = PTHREAD_COND_INITIALIZER};
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    int rc;

    /* BookTrip observes cancellation: a cancel is delivered to its code,
     * which may compensate before the instance ends Cancelled (within
     * cleanup_timeout_ms, else it is terminated). */
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    oo.cleanup_timeout_ms = 60000;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration_ex(
             reg, "BookTrip", NULL, book_trip, NULL, &oo)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookFlight", book_flight,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "BookHotel", book_hotel, NULL)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ChargeCard", charge_card, &b)) !=
            DURO_OK ||
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

    /* Start over if an earlier run left these instances. */
    duro_client_delete(client, "trip-1", 1, NULL);
    duro_client_delete(client, "trip-2", 1, NULL);

    if ((rc = duro_client_start(client, "trip-1", "BookTrip",
                                "to=Lisbon nights=3 card=declined", NULL)) !=
            DURO_OK ||
        (rc = duro_client_start(client, "trip-2", "BookTrip",
                                "to=Porto nights=2 card=3ds", NULL)) !=
            DURO_OK ||
        (rc = wait_for_charge(&b, 0)) != DURO_OK ||
        (rc = duro_client_cancel(client, "trip-2",
                                 "traveller cancelled the trip",
                                 "saga-example")) != DURO_OK) {
        fprintf(stderr, "saga: %s (%s)\n", duro_errname(rc), duro_errmsg());
        goto done;
    }
    printf("cancelled trip-2 while ChargeCard waited for the bank\n");

    /* trip-1 fails at the charge and undoes both bookings. */
    int rc1 = report(client, "trip-1", DURO_STATUS_FAILED,
                     "compensated: CancelHotel, CancelFlight",
                     "BookFlight:ok BookHotel:ok ChargeCard:failed "
                     "CancelHotel:ok CancelFlight:ok");
    /* trip-2: the cancel reached the code while the charge ran; the charge
     * was cancelled, then both bookings were undone, after the cancel. */
    int rc2 = report(client, "trip-2", DURO_STATUS_CANCELLED,
                     "traveller cancelled the trip",
                     "BookFlight:ok BookHotel:ok "
                     "ChargeCard:cancelled(instance_cancelled) "
                     "cancel:observed CancelHotel:ok CancelFlight:ok");
    if (wait_for_charge(&b, 1) != DURO_OK ||
        strcmp(b.cancel_reason, "instance_cancelled") != 0) {
        fprintf(stderr, "saga: ChargeCard's token did not fire with "
                        "instance_cancelled\n");
        rc2 = DURO_FAILED;
    } else {
        printf("ChargeCard saw its token fire: %s\n", b.cancel_reason);
    }
    rc = rc1 != DURO_OK ? rc1 : rc2;

done:
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
