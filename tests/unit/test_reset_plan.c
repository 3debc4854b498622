/* test_reset_plan.c - where a reset may cut a history
 * (src/providers/reset_plan.c): turn boundaries and the nearest valid
 * points named when one is refused, the last good point (before the first
 * failure, before an ending, before a terminate's own events), and what
 * the kept events leave pending (activities, timers, children; not what
 * completed, was cancelled or is detached), the suspension refusal and
 * bad histories. */
#include <string.h>

#include "base/base.h"
#include "providers/providers.h"
#include "test.h"

#define MAX_EVENTS 16

typedef struct hist {
    duro_event ev[MAX_EVENTS];
    size_t n;
} hist;

/* Appends an event of `kind` (source `src`, reason `reason`); its id is
 * its position. */
static uint64_t add(hist *h, int kind, uint64_t src, const char *reason)
{
    duro_event *e = &h->ev[h->n];
    memset(e, 0, sizeof(*e));
    e->event_id = ++h->n;
    e->kind = (duro_event_kind)kind;
    e->source_event_id = src;
    e->reason = reason;
    return e->event_id;
}

/* The plan's point for `to`, DURO_OK expected. */
static duro__reset_plan plan_ok(const hist *h, uint64_t to)
{
    duro__reset_plan p;
    duro_error err;
    duro_error_clear(&err);
    int rc = duro__reset_decide(h->ev, h->n, "x", 1, to, &p, &err);
    CHECK_MSG(rc == DURO_OK, "reset to %llu: %s (%s)", (unsigned long long)to,
              duro_errname(rc), err.message);
    return p;
}

/* The refusal of `to`: `code`, and a message that holds `text`. */
static void refused(const hist *h, uint64_t to, int code, const char *text)
{
    duro__reset_plan p;
    duro_error err;
    duro_error_clear(&err);
    int rc = duro__reset_decide(h->ev, h->n, "x", 1, to, &p, &err);
    CHECK_MSG(rc == code, "reset to %llu: %s, expected %s (%s)",
              (unsigned long long)to, duro_errname(rc), duro_errname(code),
              err.message);
    CHECK_MSG(strstr(err.message, text) != NULL, "'%s' does not say '%s'",
              err.message, text);
    CHECK(p.activities == NULL && p.point == 0);
}

/* Started; A and B scheduled; A completes; a timer; A2 scheduled; B
 * fails; the code fails (cancelling A2 first). */
static void failing(hist *h)
{
    h->n = 0;
    add(h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL); /* 1 */
    add(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);    /* 2 A */
    add(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);    /* 3 B */
    add(h, DURO_EVENT_ACTIVITY_COMPLETED, 2, NULL);    /* 4 */
    add(h, DURO_EVENT_TIMER_CREATED, 0, NULL);         /* 5 */
    add(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);    /* 6 A2 */
    add(h, DURO_EVENT_ACTIVITY_FAILED, 3, NULL);       /* 7 */
    add(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 6,    /* 8 */
        DURO_REASON_INSTANCE_FAILED);
    add(h, DURO_EVENT_ORCHESTRATION_FAILED, 0, NULL); /* 9 */
}

TEST(turn_boundaries_and_the_nearest_points)
{
    hist h;
    failing(&h);
    duro__reset_plan p = plan_ok(&h, 3); /* next: a completion */
    CHECK_EQ(p.point, 3);
    CHECK_EQ(p.activity_count, 2); /* A and B */
    CHECK_EQ(p.timer_count, 0);
    duro__reset_plan_free(&p);
    p = plan_ok(&h, 6);            /* next: B's failure */
    CHECK_EQ(p.activity_count, 2); /* B and A2 */
    CHECK_EQ(h.ev[p.activities[0]].event_id, 3);
    CHECK_EQ(h.ev[p.activities[1]].event_id, 6);
    CHECK_EQ(p.timer_count, 1);
    CHECK_EQ(h.ev[p.timers[0]].event_id, 5);
    duro__reset_plan_free(&p);
    refused(&h, 4, DURO_INVALID, "inside a turn (event 5, TimerCreated");
    refused(&h, 4, DURO_INVALID, "events 3 and 6");
    refused(&h, 1, DURO_INVALID,
            "nearest point a reset may keep up to is "
            "event 3");
    refused(&h, 7, DURO_INVALID, "inside a turn");
    refused(&h, 8, DURO_INVALID,
            "part of the execution's ending "
            "(ActivityCancelRequested)");
    refused(&h, 9, DURO_INVALID, "ending (OrchestrationFailed)");
    refused(&h, 10, DURO_NOT_FOUND, "has no event 10 (it has 9)");
}

TEST(the_last_good_point)
{
    hist h;
    failing(&h);
    duro__reset_plan p = plan_ok(&h, 0); /* before the first failure, 7 */
    CHECK_EQ(p.point, 6);
    duro__reset_plan_free(&p);

    /* nothing failed: before the ending (the code's last answer) */
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);
    add(&h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);
    add(&h, DURO_EVENT_ACTIVITY_COMPLETED, 2, NULL);
    add(&h, DURO_EVENT_ORCHESTRATION_COMPLETED, 0, NULL);
    p = plan_ok(&h, 0);
    CHECK_EQ(p.point, 2);
    CHECK_EQ(p.activity_count, 1);
    duro__reset_plan_free(&p);

    /* terminated while A ran: the terminate's cancel request and ending
     * are a request, so the point before them is good, and A runs again */
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);
    add(&h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);
    add(&h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 2,
        DURO_REASON_INSTANCE_TERMINATED);
    add(&h, DURO_EVENT_ORCHESTRATION_TERMINATED, 0, "stop");
    p = plan_ok(&h, 0);
    CHECK_EQ(p.point, 2);
    CHECK_EQ(p.activity_count, 1);
    duro__reset_plan_free(&p);
    refused(&h, 3, DURO_INVALID, "part of the execution's ending");

    /* terminated before it began: its start is a point */
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);
    add(&h, DURO_EVENT_ORCHESTRATION_TERMINATED, 0, "stop");
    p = plan_ok(&h, 0);
    CHECK_EQ(p.point, 1);
    duro__reset_plan_free(&p);

    /* no boundary before the first failure: the code's first answer
     * failed at once */
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);
    add(&h, DURO_EVENT_ORCHESTRATION_FAILED, 0, NULL);
    refused(&h, 0, DURO_INVALID, "no turn boundary before event 2");
}

TEST(what_stays_pending)
{
    hist h;
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);         /* 1 */
    add(&h, DURO_EVENT_ACTIVITY_SCHEDULED, 0, NULL);            /* 2 */
    add(&h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 2, "select"); /* 3 */
    uint64_t kid =
        add(&h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0, NULL); /* 4 */
    h.ev[kid - 1].ref_instance = "kid";
    uint64_t loose = add(&h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0,
                         NULL); /* 5, detached */
    h.ev[loose - 1].flags = DURO_START_DETACHED;
    add(&h, DURO_EVENT_TIMER_CREATED, 0, NULL);     /* 6 */
    add(&h, DURO_EVENT_EVENT_SUBSCRIBED, 0, NULL);  /* 7 */
    add(&h, DURO_EVENT_TIMER_FIRED, 6, NULL);       /* 8 */
    add(&h, DURO_EVENT_EXECUTION_SUSPENDED, 0, ""); /* 9 */
    add(&h, DURO_EVENT_EVENT_RAISED, 0, NULL);      /* 10 */
    add(&h, DURO_EVENT_EXECUTION_RESUMED, 0, "");   /* 11 */
    add(&h, DURO_EVENT_ORCHESTRATION_TERMINATED, 0, "stop");
    duro__reset_plan p = plan_ok(&h, 7);
    CHECK_EQ(p.activity_count, 0); /* its cancel was requested */
    CHECK_EQ(p.timer_count, 1);
    CHECK_EQ(p.child_count, 1); /* the attached one */
    CHECK_EQ(h.ev[p.children[0]].event_id, 4);
    duro__reset_plan_free(&p);
    p = plan_ok(&h, 8); /* the timer fired */
    CHECK_EQ(p.timer_count, 0);
    duro__reset_plan_free(&p);
    refused(&h, 9, DURO_INVALID, "inside the suspension of event 9");
    refused(&h, 10, DURO_INVALID, "inside the suspension of event 9");
    p = plan_ok(&h, 11); /* resumed */
    CHECK_EQ(p.point, 11);
    duro__reset_plan_free(&p);
}

TEST(a_history_that_is_not_dense_is_refused)
{
    hist h;
    h.n = 0;
    add(&h, DURO_EVENT_ORCHESTRATION_STARTED, 0, NULL);
    add(&h, DURO_EVENT_EVENT_RAISED, 0, NULL);
    h.ev[1].event_id = 5;
    refused(&h, 1, DURO_STORAGE, "not dense");
    duro__reset_plan_free(NULL);
}

TEST_MAIN(T(turn_boundaries_and_the_nearest_points), T(the_last_good_point),
          T(what_stays_pending), T(a_history_that_is_not_dense_is_refused))
