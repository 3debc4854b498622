/* cancel.c - cancelling an instance while its activity runs. The activity
 * transcodes a video in small steps and checks its cancellation token
 * between steps. main cancels the instance from the client with a reason;
 * duro records the cancellation in history, deletes the activity's queue
 * row and fires the running activity's token, so the activity stops within
 * one step instead of running to the end. Its result is discarded.
 *
 * Other ways for an activity to notice: duro_activity_wait_cancelled() (a
 * sleep that ends at once on cancellation), duro_activity_cancel_fd() (for
 * poll/epoll loops; demo.c uses it) and duro_activity_cancel_token() (for
 * threads the activity starts). An activity that ignores its token has
 * cancel_grace_ms (default 10 s) to return; then its worker slot is freed
 * and its thread abandoned.
 * Run: ./cancel [sqlite:path.db] */
/* nanosleep and clock_gettime are POSIX, not C11 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "duro.h"

#define STEPS 250 /* 250 steps of 20 ms: 5 s when nobody cancels */
#define STEP_MS 20

/* What the activity reports to main (activities may do anything). */
typedef struct progress {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int started;     /* the activity is running */
    int steps_done;  /* when it stopped */
    int saw_cancel;  /* it observed its token */
    char reason[64]; /* duro_activity_cancel_reason() */
    int64_t cancel_seen_ms;
} progress;

/* ---- the activity: cooperates with cancellation -------------------------- */

static int transcode(duro_activity *a, const char *video, duro_result *out)
{
    (void)video;
    progress *p = duro_activity_user(a);
    pthread_mutex_lock(&p->lock);
    p->started = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);

    int step = 0;
    for (; step < STEPS; step++) {
        /* Between two steps: has duro asked us to stop? Non-blocking. */
        if (duro_activity_cancelled(a))
            break;
        struct timespec work = {0, STEP_MS * 1000 * 1000}; /* one step */
        nanosleep(&work, NULL);
    }

    pthread_mutex_lock(&p->lock);
    p->steps_done = step;
    if (duro_activity_cancelled(a)) {
        p->saw_cancel = 1;
        p->cancel_seen_ms = duro_now_ms();
        const char *why = duro_activity_cancel_reason(a); /* NULL: unknown */
        snprintf(p->reason, sizeof(p->reason), "%s", why ? why : "?");
    }
    pthread_mutex_unlock(&p->lock);
    if (step < STEPS)
        return duro_failf(out, "stopped after %d of %d steps", step, STEPS);
    return duro_ok(out, "video.webm");
}

/* ---- the orchestration: nothing special is needed to be cancellable ------ */

static int convert_video(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Transcode", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* ---- main ---------------------------------------------------------------- */

/* Waits until the activity reports it started, up to timeout_ms. */
static int wait_started(progress *p, int64_t timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)(timeout_ms / 1000);
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    while (!p->started && rc == 0)
        rc = pthread_cond_timedwait(&p->changed, &p->lock, &deadline);
    int started = p->started;
    pthread_mutex_unlock(&p->lock);
    return started ? DURO_OK : DURO_TIMEOUT;
}

/* Prints the cancellation events of the instance's history. */
static void print_cancel_events(duro_client *c, const char *id)
{
    duro_history *h = NULL;
    if (duro_client_read_history(c, id, 0, &h) != DURO_OK)
        return;
    printf("history:\n");
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        printf("  %2llu %-28s", (unsigned long long)e->event_id,
               duro_event_kind_name(e->kind));
        if (e->name != NULL)
            printf(" %s", e->name);
        if (e->reason != NULL)
            printf(" reason=\"%s\"", e->reason);
        if (e->requested_by != NULL)
            printf(" requested_by=\"%s\"", e->requested_by);
        printf("\n");
    }
    duro_history_free(h);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:cancel.db";
    progress p = {.lock = PTHREAD_MUTEX_INITIALIZER,
                  .changed = PTHREAD_COND_INITIALIZER};
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(
             reg, "ConvertVideo", NULL, convert_video, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Transcode", transcode, &p)) !=
            DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "cancel: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* Start over if an earlier run of this example left the instance. */
    duro_client_delete(client, "video-1", 1, NULL);
    if ((rc = duro_client_start(client, "video-1", "ConvertVideo",
                                "holiday.mp4", NULL)) != DURO_OK ||
        (rc = wait_started(&p, 10000)) != DURO_OK) {
        fprintf(stderr, "cancel: start: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("video-1: Transcode is running; cancelling the instance\n");

    /* The reason and who asked are recorded in history. */
    int64_t cancel_at = duro_now_ms();
    rc = duro_client_cancel(client, "video-1", "user pressed Cancel",
                            "cancel example");
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "video-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "cancel: video-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("video-1: %s, reason: %s\n", duro_status_name(info->status),
           info->error ? info->error : "(none)");

    /* Stopping the runtime waits for running activities to return, so the
     * activity has written its report by now. */
    duro_runtime_shutdown(rt, 5000);
    if (p.saw_cancel)
        printf("activity: saw its token after %d of %d steps, %lld ms after "
               "the cancel, reason \"%s\"\n",
               p.steps_done, STEPS, (long long)(p.cancel_seen_ms - cancel_at),
               p.reason);
    else
        printf("activity: did NOT see its token (ran %d steps)\n",
               p.steps_done);
    print_cancel_events(client, "video-1");

    if (info->status != DURO_STATUS_CANCELLED || !p.saw_cancel ||
        info->error == NULL ||
        strcmp(info->error, "user pressed Cancel") != 0 ||
        strcmp(p.reason, "instance_cancelled") != 0) {
        fprintf(stderr, "cancel: expected Cancelled (\"user pressed Cancel\") "
                        "seen by the activity as instance_cancelled\n");
        rc = DURO_FAILED;
    }

done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
