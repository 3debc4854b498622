/* replay.c - the store-less replayer behind duro_replay_history(): runs one
 * recorded execution through today's code on a fresh engine, as a runtime
 * replays it after a restart, and says whether the code still matches.
 * Owns the engine and turn it makes for the call; pure (no threads, no
 * I/O); the code, C on a fiber or a driver's steps, runs on the caller's
 * thread. */
#include <stdio.h>
#include <string.h>

#include "core/engine_internal.h"

static int status_of(int terminal_kind)
{
    switch (terminal_kind) {
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
        return DURO_STATUS_COMPLETED;
    case DURO_EVENT_CONTINUED_AS_NEW:
        return DURO_STATUS_CONTINUED_AS_NEW;
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
        return DURO_STATUS_CANCELLED;
    case DURO_EVENT_ORCHESTRATION_TERMINATED:
        return DURO_STATUS_TERMINATED;
    default:
        return DURO_STATUS_FAILED;
    }
}

/* Endings only the code makes: the replay must end the same way. A
 * Cancelled, Terminated, or Failed of another category may have been
 * decided by the runtime without running the code (a cancel the code does
 * not observe, a terminate, poison, nondeterminism, the history cap). */
static int ending_from_code(const duro_event *last)
{
    return last->kind == DURO_EVENT_ORCHESTRATION_COMPLETED ||
           last->kind == DURO_EVENT_CONTINUED_AS_NEW ||
           (last->kind == DURO_EVENT_ORCHESTRATION_FAILED &&
            last->category == DURO_CATEGORY_APPLICATION);
}

static int is_cancel_request(int kind)
{
    return kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED ||
           kind == DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED;
}

/* Where the replayed part of the n recorded events ends. The events an
 * ending appends after the code's last command - a cancel request per
 * activity or child still outstanding, with the ending's reason, then the
 * terminal event - are not replayed but compared with what the replay
 * decides. For an ending decided without the code, the inputs its turn
 * recorded before it (same turn time, not commands: the code never saw
 * them) are left out too. A failure of category timeout may be the
 * instance's deadline, whose cancellations say "deadline". */
static size_t replayed_part(const duro_event *ev, size_t n, int from_code)
{
    const duro_event *last = &ev[n - 1];
    if (!duro__event_is_terminal(last->kind))
        return n;
    const char *reason = duro__engine_end_reason(status_of(last->kind));
    const char *deadline = last->kind == DURO_EVENT_ORCHESTRATION_FAILED &&
                                   last->category == DURO_CATEGORY_TIMEOUT
                               ? DURO_REASON_DEADLINE
                               : NULL;
    size_t end = n - 1;
    while (end > 1) {
        const duro_event *e = &ev[end - 1];
        if (is_cancel_request(e->kind) &&
            (str_eq(e->reason, reason) ||
             (deadline != NULL && str_eq(e->reason, deadline))))
            end--;
        else if (!from_code && e->timestamp_ms == last->timestamp_ms &&
                 !duro__event_is_command(e->kind))
            end--;
        else
            break;
    }
    return end;
}

/* A recorded ending event (h) against the replay's (w). */
static int same_ending(const duro_event *h, const duro_event *w)
{
    if (!duro__engine_same_command(h, w))
        return 0;
    switch (h->kind) {
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_CONTINUED_AS_NEW:
        return str_eq(h->payload, w->payload);
    case DURO_EVENT_ORCHESTRATION_FAILED:
        return str_eq(h->error, w->error) && h->category == w->category;
    default:
        return 1;
    }
}

/* Compares the events the replay appended after the replayed part with
 * the recorded ending ev[0..count). DURO_OK, or DURO_NONDETERMINISM with
 * the first difference in msg. */
static int compare_ending(const duro_event *ev, size_t count,
                          const duro__turn *turn, char *msg, size_t msg_size)
{
    char a[200], b[200];
    for (size_t i = 0; i < count; i++) {
        const duro_event *want = &ev[i];
        duro__engine_describe(b, sizeof(b), want);
        if (i >= turn->delta_count) {
            snprintf(msg, msg_size,
                     "nondeterminism at event %llu: the orchestration is "
                     "waiting but history has %s",
                     (unsigned long long)want->event_id, b);
            return DURO_NONDETERMINISM;
        }
        const duro_event *got = &turn->delta[i];
        if (same_ending(want, got))
            continue;
        duro__engine_describe(a, sizeof(a), got);
        snprintf(msg, msg_size,
                 "nondeterminism at event %llu: the orchestration %s %s but "
                 "history has %s",
                 (unsigned long long)want->event_id,
                 duro__event_is_terminal(got->kind) ? "ended with" : "issued",
                 a, b);
        return DURO_NONDETERMINISM;
    }
    return DURO_OK;
}

static int check_history(const duro_history *h, char *msg, size_t msg_size)
{
    if (h->instance_id == NULL) {
        snprintf(msg, msg_size, "the history has no instance_id");
        return DURO_INVALID;
    }
    if (h->count == 0 || h->events == NULL) {
        snprintf(msg, msg_size, "the history is empty");
        return DURO_INVALID;
    }
    if (h->events[0].kind != DURO_EVENT_ORCHESTRATION_STARTED) {
        snprintf(msg, msg_size,
                 "the history begins with %s, not OrchestrationStarted",
                 duro_event_kind_name(h->events[0].kind));
        return DURO_INVALID;
    }
    for (size_t i = 0; i < h->count; i++)
        if (h->events[i].event_id != i + 1) {
            snprintf(msg, msg_size,
                     "event %zu of the history has id %llu: a history's "
                     "event ids are 1, 2, 3 ...",
                     i + 1, (unsigned long long)h->events[i].event_id);
            return DURO_INVALID;
        }
    return DURO_OK;
}

int duro__engine_replay(const duro__engine_config *cfg, const duro_history *h,
                        char *msg, size_t msg_size)
{
    msg[0] = '\0';
    int rc = check_history(h, msg, msg_size);
    if (rc != DURO_OK)
        return rc;
    const duro_event *ev = h->events;
    size_t n = h->count;
    const duro_event *last = &ev[n - 1];
    int compare = duro__event_is_terminal(last->kind) && ending_from_code(last);
    size_t end = replayed_part(ev, n, compare);

    duro_orch *e = NULL;
    duro__turn turn;
    if (duro__turn_init(&turn) != DURO_OK) {
        snprintf(msg, msg_size, "out of memory");
        return DURO_NOMEM;
    }
    rc = duro__engine_create(cfg, h->instance_id, h->execution_id, &e);
    if (rc == DURO_OK) {
        duro__turn_input in = {
            .now_ms = last->timestamp_ms, .history = ev, .history_count = end};
        rc = duro__engine_turn(e, &in, &turn);
    }
    if (rc == DURO_ERROR) {
        snprintf(msg, msg_size, "%s",
                 str_or(duro__engine_failure(e), "the driver failed"));
    } else if (rc == DURO_NOMEM) {
        snprintf(msg, msg_size, "out of memory");
    } else if (rc != DURO_OK) {
        snprintf(msg, msg_size,
                 "the history does not fit the engine (%s): its events are "
                 "not in the order a turn writes them",
                 duro_errname(rc));
    } else if (turn.nondeterminism) {
        snprintf(msg, msg_size, "%s", str_or(turn.meta.error, ""));
        rc = DURO_NONDETERMINISM;
    } else if (compare) {
        rc = compare_ending(&ev[end], n - end, &turn, msg, msg_size);
    } else if (e->bad_text != NULL && !duro__event_is_terminal(last->kind)) {
        /* The code itself fails the execution (a change id or a custom
         * status it may not give): a runtime would end the instance. */
        snprintf(msg, msg_size, "the code fails the execution: %s",
                 e->bad_text);
        rc = DURO_INVALID;
    }
    /* The code's destroy hooks and the driver's destroy run here, on the
     * caller's thread. */
    duro__engine_destroy(e);
    duro__turn_free(&turn);
    if (rc == DURO_NONDETERMINISM)
        duro__utf8_scrub(msg); /* parts cut to buffers */
    return rc;
}
