/* demo.c - what `make demo` runs: a few instances of different kinds on one
 * runtime, then a summary table, the cleanup of the cancelled order and the
 * history of one instance.
 *   order-1001  chaining + fan-out: validate, reserve 3 items in parallel,
 *               charge, ship                             -> Completed
 *   order-1002  the same order with a declined card      -> Failed
 *   order-1005  the same order, cancelled while the card is charged; its
 *               code cleans up (ProcessOrder observes cancellation): it
 *               puts the reserved items back            -> Cancelled
 *   approval-7  waits for an external event; approved    -> Completed
 *   video-3     cancelled while its activity runs        -> Cancelled
 * Run: ./demo [sqlite:path.db] */
/* nanosleep, clock_gettime and poll are POSIX, not C11 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "duro.h"

#define MAX_ITEMS 16

/* ---- activities (ordinary code, run on worker threads) ------------------ */

/* Checks an order ("order=N card=C items=a,b,c") and returns its items. */
static int validate_order(duro_activity *a, const char *order, duro_result *out)
{
    (void)a;
    const char *items = order ? strstr(order, "items=") : NULL;
    if (items == NULL || items[6] == '\0')
        return duro_fail(out, "order has no items");
    return duro_ok(out, items + 6);
}

static int reserve_item(duro_activity *a, const char *item, duro_result *out)
{
    char reserved[128];
    snprintf(reserved, sizeof(reserved), "%s reserved in bin %c%llu", item,
             'A' + (char)(strlen(item) % 6),
             (unsigned long long)duro_activity_id(a));
    return duro_ok(out, reserved);
}

/* What an activity tells main (activities may do anything): it runs. */
typedef struct activity_signal {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int started;
} activity_signal;

static void signal_started(activity_signal *s)
{
    pthread_mutex_lock(&s->lock);
    s->started = 1;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* "card=3ds" waits for the customer to confirm the payment with the bank,
 * which never happens here: a cancel ends the wait at once. */
static int charge_payment(duro_activity *a, const char *order, duro_result *out)
{
    if (strstr(order, "card=declined") != NULL)
        return duro_fail(out, "card declined by the bank");
    if (strstr(order, "card=3ds") != NULL) {
        signal_started(duro_activity_user(a));
        if (duro_activity_wait_cancelled(a, 10000))
            return duro_fail(out, "charge stopped"); /* discarded */
        return duro_fail(out, "no confirmation from the bank in 10 s");
    }
    return duro_ok(out, "charged 249.00 EUR");
}

/* The compensation of ReserveItem: takes its output ("lamp reserved in bin
 * A7") and puts the item back. */
static int release_item(duro_activity *a, const char *reservation,
                        duro_result *out)
{
    (void)a;
    const char *bin = strstr(reservation, " in bin ");
    char released[128];
    snprintf(released, sizeof(released), "%.*s back%s",
             (int)strcspn(reservation, " "), reservation, bin ? bin : "");
    return duro_ok(out, released);
}

static int ship(duro_activity *a, const char *order, duro_result *out)
{
    (void)a;
    int id = 0;
    sscanf(order, "order=%d", &id);
    char tracking[64];
    snprintf(tracking, sizeof(tracking), "TRK-%d", id);
    return duro_ok(out, tracking);
}

/* Transcodes in 20 ms steps (up to 10 s). It waits in poll() on its
 * cancellation descriptor, so a cancel interrupts a step at once. */
static int transcode(duro_activity *a, const char *video, duro_result *out)
{
    (void)video;
    signal_started(duro_activity_user(a));

    struct pollfd pfd = {.fd = duro_activity_cancel_fd(a), .events = POLLIN};
    if (pfd.fd < 0)
        return duro_failf(out, "no cancellation descriptor: %s", duro_errmsg());
    for (int step = 0; step < 500; step++) {
        if (poll(&pfd, 1, 20) > 0) /* readable: cancellation requested */
            return duro_failf(out, "stopped at step %d", step);
    }
    return duro_ok(out, "video.webm");
}

/* Activity of approvals that time out. */
static int escalate(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    (void)input;
    return duro_ok(out, "escalated to a manager");
}

/* ---- orchestrations (deterministic code, replayed from history) --------- */

/* The cleanup after a cancel: puts back every item that was reserved, in
 * parallel. The instance then ends Cancelled with the cancel's reason,
 * whatever this returns. */
static int release_items(duro_orch *o, duro_task *const *reserve, size_t n,
                         duro_result *out)
{
    duro_task *release[MAX_ITEMS] = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (duro_task_output(reserve[i]) != NULL)
            release[k++] = duro_call_activity(o, "ReleaseItem",
                                              duro_task_output(reserve[i]));
    duro_join_n(o, release, k);
    return duro_ok(out, duro_sprintf(o, "%zu items put back", k));
}

/* Registered with observe_cancel: a cancel reaches this code. The pending
 * await returns DURO_CANCELLED (the running activity is cancelled),
 * duro_cancel_requested() turns 1, and the code undoes what it did. */
static int process_order(duro_orch *o, const char *order, duro_result *out)
{
    /* Chaining: the validated item list feeds the fan-out. */
    duro_task *valid = duro_call_activity(o, "ValidateOrder", order);
    if (duro_await(o, valid) != DURO_OK)
        return duro_failf(out, "invalid order: %s", duro_task_error(valid));

    /* Fan-out: one ReserveItem per item, all scheduled in this turn. */
    duro_task *reserve[MAX_ITEMS] = {0};
    size_t n = 0;
    for (const char *p = duro_task_output(valid); *p && n < MAX_ITEMS;) {
        size_t len = strcspn(p, ",");
        reserve[n++] = duro_call_activity(o, "ReserveItem",
                                          duro_sprintf(o, "%.*s", (int)len, p));
        p += len + (p[len] == ',');
    }
    /* Fan-in: wait for every reservation. */
    if (duro_join_n(o, reserve, n) != DURO_OK)
        return duro_cancel_requested(o)
                   ? release_items(o, reserve, n, out)
                   : duro_fail(out, "an item could not be reserved");

    duro_task *paid = duro_call_activity(o, "ChargePayment", order);
    if (duro_await(o, paid) != DURO_OK)
        return duro_cancel_requested(o)
                   ? release_items(o, reserve, n, out)
                   : duro_failf(out, "payment: %s", duro_task_error(paid));

    duro_task *shipped = duro_call_activity(o, "Ship", order);
    if (duro_await(o, shipped) != DURO_OK)
        return duro_failf(out, "shipping: %s", duro_task_error(shipped));
    return duro_ok(out, duro_sprintf(o, "%zu items shipped, tracking %s", n,
                                     duro_task_output(shipped)));
}

static int approval(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *answer = duro_wait_event(o, "approval");
    duro_task *deadline = duro_timer(o, 10000);
    if (duro_select(o, answer, deadline) == answer)
        return duro_ok(
            out, duro_sprintf(o, "approved by %s", duro_task_output(answer)));
    duro_task *esc = duro_call_activity(o, "Escalate", NULL);
    duro_await(o, esc);
    return duro_fail(out, "no answer in 10 s; escalated");
}

static int convert_video(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Transcode", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* ---- main ---------------------------------------------------------------- */

static const char *const ids[] = {"order-1001", "order-1002", "order-1005",
                                  "approval-7", "video-3"};

static int setup(const char *url, activity_signal *video,
                 activity_signal *charge, duro_runtime **rt)
{
    duro_registry *reg = NULL;
    duro_orchestration_options observing;
    duro_orchestration_options_init(&observing);
    observing.observe_cancel = 1; /* cleanup within the runtime's
                                     cleanup_timeout_ms (5 min) */
    int rc;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration_ex(reg, "ProcessOrder", NULL,
                                                 process_order, NULL,
                                                 &observing)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "Approval", NULL, approval,
                                              NULL)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(
             reg, "ConvertVideo", NULL, convert_video, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ValidateOrder", validate_order,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ReserveItem", reserve_item,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ChargePayment", charge_payment,
                                         charge)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ReleaseItem", release_item,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Ship", ship, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Escalate", escalate, NULL)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Transcode", transcode, video)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, rt)) != DURO_OK)
        fprintf(stderr, "demo: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
    duro_registry_destroy(reg); /* the runtime keeps its own copy */
    return rc;
}

/* Polls until the instance has run its first turn, with a deadline. */
static int wait_running(duro_client *c, const char *id)
{
    int64_t deadline = duro_now_ms() + 10000;
    for (;;) {
        duro_instance_info *info = NULL;
        int rc = duro_client_get_status(c, id, &info);
        int pending = rc == DURO_OK && info->status == DURO_STATUS_PENDING;
        duro_free(info);
        if (rc != DURO_OK || !pending)
            return rc;
        if (duro_now_ms() >= deadline)
            return DURO_TIMEOUT;
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* Waits until the activity runs, up to 10 s. */
static int wait_started(activity_signal *s)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (!s->started && rc == 0)
        rc = pthread_cond_timedwait(&s->changed, &s->lock, &deadline);
    int started = s->started;
    pthread_mutex_unlock(&s->lock);
    return started ? DURO_OK : DURO_TIMEOUT;
}

/* Prints s cut to width characters (with "..." when cut). */
static void print_cut(const char *s, int width)
{
    if (s == NULL)
        s = "";
    size_t len = strcspn(s, "\n");
    if (len > (size_t)width)
        printf("%.*s...", width - 3, s);
    else
        printf("%.*s", (int)len, s);
}

static int print_summary(duro_client *c)
{
    int expected[] = {DURO_STATUS_COMPLETED, DURO_STATUS_FAILED,
                      DURO_STATUS_CANCELLED, DURO_STATUS_COMPLETED,
                      DURO_STATUS_CANCELLED};
    /* output when completed, error or cancel reason otherwise */
    const char *expected_text[] = {"3 items shipped, tracking TRK-1001",
                                   "payment: card declined by the bank",
                                   "customer cancelled the order",
                                   "approved by alice", "user pressed Cancel"};
    int failures = 0;
    printf("\n%-11s %-13s %-10s %6s  %s\n", "INSTANCE", "ORCHESTRATION",
           "STATUS", "EVENTS", "OUTPUT / ERROR");
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        duro_instance_info *info = NULL;
        int rc = duro_client_wait(c, ids[i], 10000, &info);
        if (rc != DURO_OK) {
            printf("%-11s %s (%s)\n", ids[i], duro_errname(rc), duro_errmsg());
            duro_free(info);
            failures++;
            continue;
        }
        printf("%-11s %-13s %-10s %6" PRIu64 "  ", ids[i], info->name,
               duro_status_name(info->status), info->history_count);
        print_cut(info->status == DURO_STATUS_COMPLETED ? info->output
                                                        : info->error,
                  60);
        const char *text =
            info->status == DURO_STATUS_COMPLETED ? info->output : info->error;
        if (info->status != expected[i]) {
            printf("  <- expected %s", duro_status_name(expected[i]));
            failures++;
        } else if (text == NULL || strcmp(text, expected_text[i]) != 0) {
            printf("  <- expected \"%s\"", expected_text[i]);
            failures++;
        }
        printf("\n");
        duro_free(info);
    }
    return failures;
}

static int print_history(duro_client *c, const char *id)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(c, id, 0, &h);
    if (rc != DURO_OK)
        return rc;
    printf("\nhistory of %s (execution %" PRIu64 "):\n", id, h->execution_id);
    printf("%4s %-22s %-14s %4s  %s\n", "ID", "KIND", "NAME", "OF",
           "PAYLOAD / ERROR / REASON");
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        printf("%4" PRIu64 " %-22s %-14s ", e->event_id,
               duro_event_kind_name(e->kind), e->name ? e->name : "");
        if (e->source_event_id != 0) /* a completion: of which event */
            printf("%4" PRIu64 "  ", e->source_event_id);
        else
            printf("%4s  ", "");
        print_cut(e->error ? e->error : e->reason ? e->reason : e->payload, 40);
        printf("\n");
    }
    duro_history_free(h);
    return DURO_OK;
}

/* Prints what happened after the instance's cancel, from its history: the
 * activities it cancelled and those its cleanup ran. Returns how many
 * things differ from the expected: the cancel delivered to the code,
 * ChargePayment cancelled (instance_cancelled), every reserved item put
 * back. */
static int print_cleanup(duro_client *c, const char *id, size_t items)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(c, id, 0, &h);
    if (rc != DURO_OK) {
        printf("%s: %s (%s)\n", id, duro_errname(rc), duro_errmsg());
        return 1;
    }
    size_t at = h->count, released = 0;
    int charge_cancelled = 0;
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        if (e->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
            at == h->count) {
            at = i;
            printf("\n%s after its cancel%s, from history:\n", id,
                   (e->flags & DURO_CANCEL_OBSERVED) ? " (seen by its code)"
                                                     : "");
        }
        if (i <= at || e->source_event_id == 0 || e->source_event_id > h->count)
            continue;
        /* event ids are dense and 1-based: the scheduling event */
        const duro_event *s = &h->events[e->source_event_id - 1];
        if (e->kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED) {
            printf("  %-14s cancelled (%s)\n", s->name, e->reason);
            charge_cancelled += strcmp(s->name, "ChargePayment") == 0 &&
                                strcmp(e->reason, "instance_cancelled") == 0;
        } else if (e->kind == DURO_EVENT_ACTIVITY_COMPLETED &&
                   s->event_id > at + 1) {
            printf("  %-14s %s\n", s->name, e->payload ? e->payload : "");
            released += strcmp(s->name, "ReleaseItem") == 0;
        }
    }
    int observed =
        at < h->count && (h->events[at].flags & DURO_CANCEL_OBSERVED) != 0;
    duro_history_free(h);
    int failures = !observed + (charge_cancelled != 1) + (released != items);
    if (failures != 0)
        printf("  <- expected the cancel delivered to the code, "
               "ChargePayment cancelled and %zu items put back\n",
               items);
    return failures;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:demo.db";
    activity_signal video = {.lock = PTHREAD_MUTEX_INITIALIZER,
                             .changed = PTHREAD_COND_INITIALIZER};
    activity_signal charge = {.lock = PTHREAD_MUTEX_INITIALIZER,
                              .changed = PTHREAD_COND_INITIALIZER};
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    int rc;

    printf("duro %s demo on %s\n", DURO_VERSION_STRING, url);
    if ((rc = setup(url, &video, &charge, &rt)) != DURO_OK)
        goto done;
    if ((rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "demo: %s (%s)\n", duro_errname(rc), duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run left these instances. */
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        duro_client_delete(client, ids[i], 1, NULL);

    printf("starting 5 instances\n");
    const char *step = "start";
    if ((rc = duro_client_start(
             client, "order-1001", "ProcessOrder",
             "order=1001 card=ok items=keyboard,mouse,monitor", NULL)) !=
            DURO_OK ||
        (rc = duro_client_start(client, "order-1002", "ProcessOrder",
                                "order=1002 card=declined items=laptop,bag",
                                NULL)) != DURO_OK ||
        (rc = duro_client_start(client, "order-1005", "ProcessOrder",
                                "order=1005 card=3ds items=lamp,desk", NULL)) !=
            DURO_OK ||
        (rc = duro_client_start(client, "approval-7", "Approval",
                                "expense report #7", NULL)) != DURO_OK ||
        (rc = duro_client_start(client, "video-3", "ConvertVideo",
                                "holiday.mp4", NULL)) != DURO_OK)
        goto failed;

    step = "approve";
    if ((rc = wait_running(client, "approval-7")) != DURO_OK ||
        (rc = duro_client_raise_event(client, "approval-7", "approval",
                                      "alice")) != DURO_OK)
        goto failed;
    printf("raised event \"approval\" on approval-7\n");

    step = "cancel";
    if ((rc = wait_started(&video)) != DURO_OK ||
        (rc = duro_client_cancel(client, "video-3", "user pressed Cancel",
                                 "demo")) != DURO_OK)
        goto failed;
    printf("cancelled video-3 while Transcode was running\n");
    if ((rc = wait_started(&charge)) != DURO_OK ||
        (rc = duro_client_cancel(client, "order-1005",
                                 "customer cancelled the order", "demo")) !=
            DURO_OK)
        goto failed;
    printf("cancelled order-1005 while ChargePayment was running\n");

    step = "wait";
    if (print_summary(client) + print_cleanup(client, "order-1005", 2) != 0) {
        fprintf(stderr, "demo: an instance did not end as expected\n");
        rc = DURO_FAILED;
        goto done;
    }
    step = "history";
    if ((rc = print_history(client, "order-1001")) != DURO_OK)
        goto failed;
    goto done;

failed:
    fprintf(stderr, "demo: %s: %s (%s)\n", step, duro_errname(rc),
            duro_errmsg());
done:
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    return rc == DURO_OK ? 0 : 1;
}
