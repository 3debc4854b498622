/* reset_plan.c - where a reset or rewind of an execution may cut its history
 * (provider contract version 13, reset_instance) and what the kept events
 * leave pending: the turn boundaries, the last good point, the refusals
 * with the nearest valid points. Pure and written once, below the stores
 * (sql/reset.c runs it inside its transaction). Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "providers/providers.h"

/* A decision of the code (or of the runtime for it): the events a turn
 * writes after an input, kept or dropped with it. OrchestrationTerminated
 * is not one: it records an operator's request, decided without code. */
static int is_decision(int kind)
{
    switch (kind) {
    case DURO_EVENT_ORCHESTRATION_STARTED:
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_ORCHESTRATION_FAILED:
    case DURO_EVENT_CONTINUED_AS_NEW:
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
    case DURO_EVENT_ACTIVITY_SCHEDULED:
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_TIMER_CREATED:
    case DURO_EVENT_EVENT_SUBSCRIBED:
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
    case DURO_EVENT_PATCH_MARKER:
        return 1;
    default:
        return 0;
    }
}

static int is_terminal(int kind)
{
    return kind == DURO_EVENT_ORCHESTRATION_COMPLETED ||
           kind == DURO_EVENT_ORCHESTRATION_FAILED ||
           kind == DURO_EVENT_CONTINUED_AS_NEW ||
           kind == DURO_EVENT_ORCHESTRATION_CANCELLED ||
           kind == DURO_EVENT_ORCHESTRATION_TERMINATED;
}

/* 1 for an ending the runtime decided without the code, on a request:
 * a terminate, or the instance's deadline (OrchestrationFailed with reason
 * "deadline"; the engine records it since the deadline could be reset
 * past, and an older history's deadline ending reads as a failure). */
static int stopped_without_code(const duro_event *end)
{
    return end->kind == DURO_EVENT_ORCHESTRATION_TERMINATED ||
           (end->kind == DURO_EVENT_ORCHESTRATION_FAILED &&
            end->reason != NULL &&
            strcmp(end->reason, DURO_REASON_DEADLINE) == 0);
}

/* The reason an ending gives the cancel requests it decides (as the
 * engine's duro__engine_end_reason does, and "deadline" for the
 * deadline's); NULL for a kind that ends nothing. */
static const char *end_reason(const duro_event *end)
{
    if (stopped_without_code(end) &&
        end->kind == DURO_EVENT_ORCHESTRATION_FAILED)
        return DURO_REASON_DEADLINE;
    switch (end->kind) {
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
        return DURO_REASON_INSTANCE_COMPLETED;
    case DURO_EVENT_ORCHESTRATION_FAILED:
        return DURO_REASON_INSTANCE_FAILED;
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
        return DURO_REASON_INSTANCE_CANCELLED;
    case DURO_EVENT_ORCHESTRATION_TERMINATED:
        return DURO_REASON_INSTANCE_TERMINATED;
    case DURO_EVENT_CONTINUED_AS_NEW:
        return DURO_REASON_CONTINUED_AS_NEW;
    default:
        return NULL;
    }
}

static int is_cancel_request(int kind)
{
    return kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED ||
           kind == DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED;
}

/* How many events a reset may keep at most: all of a live execution's;
 * of an ended one, those before its ending - the terminal event and the
 * cancel requests of what was outstanding, which the ending decided just
 * before it (with its reason). */
static size_t keepable(const duro_event *ev, size_t n)
{
    if (n == 0 || !is_terminal(ev[n - 1].kind))
        return n;
    const char *reason = end_reason(&ev[n - 1]);
    size_t end = n - 1;
    while (end > 1 && is_cancel_request(ev[end - 1].kind) &&
           ev[end - 1].reason != NULL &&
           strcmp(ev[end - 1].reason, reason) == 0)
        end--;
    return end;
}

/* 1 when events 1 .. p end at a turn boundary: event p + 1 is an input
 * (or there is none). A terminate or a deadline is one: decided without
 * the code, its cancel requests and ending record a request, not the
 * code's answer to the input before them. */
static int boundary(const duro_event *ev, size_t n, uint64_t p)
{
    size_t keep = keepable(ev, n);
    if (p < 1 || p > keep)
        return 0;
    if (p == n || !is_decision(ev[p].kind))
        return 1;
    return p == keep && stopped_without_code(&ev[n - 1]);
}

/* The nearest boundary before p (0: none) and after it (0: none). */
static void nearest(const duro_event *ev, size_t n, uint64_t p,
                    uint64_t *before, uint64_t *after)
{
    *before = *after = 0;
    for (uint64_t q = p; q-- > 1;)
        if (boundary(ev, n, q)) {
            *before = q;
            break;
        }
    for (uint64_t q = p + 1; q <= keepable(ev, n); q++)
        if (boundary(ev, n, q)) {
            *after = q;
            break;
        }
}

/* " (the nearest points: events B and A)" and its variants, into buf. */
static void describe_nearest(char *buf, size_t size, uint64_t before,
                             uint64_t after)
{
    if (before && after)
        snprintf(buf, size,
                 "; the nearest points a reset may keep up to are events "
                 "%" PRIu64 " and %" PRIu64,
                 before, after);
    else if (before || after)
        snprintf(buf, size,
                 "; the nearest point a reset may keep up to is event "
                 "%" PRIu64,
                 before ? before : after);
    else
        snprintf(buf, size, "; no point of this execution can be kept");
}

/* The last good point: the latest boundary before the first failure
 * (ActivityFailed, SubOrchestrationFailed), or before the ending when
 * nothing failed. */
static uint64_t last_good(const duro_event *ev, size_t n, uint64_t *failure)
{
    uint64_t f = n + 1;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == DURO_EVENT_ACTIVITY_FAILED ||
            ev[i].kind == DURO_EVENT_SUB_ORCHESTRATION_FAILED) {
            f = ev[i].event_id;
            break;
        }
    if (f == n + 1 && keepable(ev, n) < n)
        f = keepable(ev, n) + 1; /* the ending's first event */
    *failure = f;
    for (uint64_t q = f; q-- > 1;)
        if (boundary(ev, n, q))
            return q;
    return 0;
}

void duro__reset_plan_free(duro__reset_plan *plan)
{
    if (plan == NULL)
        return;
    duro__free(plan->activities);
    duro__free(plan->timers);
    duro__free(plan->children);
    memset(plan, 0, sizeof(*plan));
}

/* What events 1 .. p leave pending, into plan (the stores decide what
 * becomes of a child: sql/reset.c); a refusal in err. */
static int pending(const duro_event *ev, uint64_t p, const char *id,
                   uint64_t execution, duro__reset_plan *plan, duro_error *err)
{
    /* open[e]: event e is a scheduling event still without its result */
    unsigned char *open = duro__calloc((size_t)p + 1, 1);
    plan->activities = duro__malloc(((size_t)p + 1) * sizeof(size_t));
    plan->timers = duro__malloc(((size_t)p + 1) * sizeof(size_t));
    plan->children = duro__malloc(((size_t)p + 1) * sizeof(size_t));
    if (open == NULL || plan->activities == NULL || plan->timers == NULL ||
        plan->children == NULL) {
        duro__free(open);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    uint64_t suspended = 0;
    for (uint64_t i = 0; i < p; i++) {
        const duro_event *e = &ev[i];
        switch (e->kind) {
        case DURO_EVENT_ACTIVITY_SCHEDULED:
        case DURO_EVENT_TIMER_CREATED:
            open[e->event_id] = 1;
            break;
        case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
            if ((e->flags & DURO_START_DETACHED) == 0)
                open[e->event_id] = 1;
            break;
        case DURO_EVENT_EXECUTION_SUSPENDED:
            suspended = e->event_id;
            break;
        case DURO_EVENT_EXECUTION_RESUMED:
            suspended = 0;
            break;
        case DURO_EVENT_ACTIVITY_COMPLETED:
        case DURO_EVENT_ACTIVITY_FAILED:
        case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
        case DURO_EVENT_TIMER_FIRED:
        case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
        case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
        case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
            if (e->source_event_id >= 1 && e->source_event_id <= p)
                open[e->source_event_id] = 0;
            break;
        default:
            break;
        }
    }
    int rc = DURO_OK;
    if (suspended != 0)
        rc = duro_error_set(
            err, DURO_INVALID, 0,
            "cannot reset instance '%s' execution %" PRIu64 " to event %" PRIu64
            ": it is inside the suspension of event "
            "%" PRIu64 "; reset to a point before it or after its resume",
            id, execution, p, suspended);
    for (uint64_t e = 1; e <= p && rc == DURO_OK; e++) {
        if (!open[e])
            continue;
        const duro_event *s = &ev[e - 1];
        if (s->kind == DURO_EVENT_ACTIVITY_SCHEDULED)
            plan->activities[plan->activity_count++] = (size_t)(e - 1);
        else if (s->kind == DURO_EVENT_TIMER_CREATED)
            plan->timers[plan->timer_count++] = (size_t)(e - 1);
        else
            plan->children[plan->child_count++] = (size_t)(e - 1);
    }
    duro__free(open);
    return rc;
}

int duro__reset_decide(const duro_event *ev, size_t n, const char *id,
                       uint64_t execution, uint64_t to, duro__reset_plan *plan,
                       duro_error *err)
{
    memset(plan, 0, sizeof(*plan));
    for (size_t i = 0; i < n; i++)
        if (ev[i].event_id != i + 1)
            return duro_error_set(err, DURO_STORAGE, 0,
                                  "instance '%s' execution %" PRIu64
                                  ": event %zu has id %" PRIu64
                                  " (history is not dense)",
                                  id, execution, i + 1, ev[i].event_id);
    char near[160];
    uint64_t before, after;
    if (to == 0) {
        uint64_t failure;
        uint64_t p = last_good(ev, n, &failure);
        if (p == 0)
            return duro_error_set(
                err, DURO_INVALID, 0,
                "cannot reset instance '%s' execution %" PRIu64
                ": no turn boundary before event %" PRIu64
                " (its first failure or its ending)",
                id, execution, failure);
        plan->point = p;
    } else if (to > n) {
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "instance '%s' execution %" PRIu64
                              " has no event %" PRIu64 " (it has %zu)",
                              id, execution, to, n);
    } else if (to > keepable(ev, n)) {
        nearest(ev, n, to, &before, &after);
        describe_nearest(near, sizeof(near), before, after);
        return duro_error_set(
            err, DURO_INVALID, 0,
            "cannot reset instance '%s' execution %" PRIu64 " to event %" PRIu64
            ": it is part of the execution's ending (%s)%s",
            id, execution, to, duro_event_kind_name(ev[to - 1].kind), near);
    } else if (!boundary(ev, n, to)) {
        nearest(ev, n, to, &before, &after);
        describe_nearest(near, sizeof(near), before, after);
        return duro_error_set(
            err, DURO_INVALID, 0,
            "cannot reset instance '%s' execution %" PRIu64 " to event "
            "%" PRIu64 ": it is inside a turn (event %" PRIu64
            ", %s, is a decision of the same turn)%s",
            id, execution, to, to + 1, duro_event_kind_name(ev[to].kind), near);
    } else {
        plan->point = to;
    }
    int rc = pending(ev, plan->point, id, execution, plan, err);
    if (rc != DURO_OK)
        duro__reset_plan_free(plan);
    return rc;
}
