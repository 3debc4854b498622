/* retry.c - retry-policy composites: a task that runs an activity attempt
 * after attempt under a duro_retry_policy (backoff timers, attempt and total
 * timeouts) and completes with the last outcome. Owns no memory of its own
 * (its state lives in the engine's arena); runs on the engine's thread. */
#include <stdio.h>

#include "core/engine_internal.h"

/* ------------------------------------------------------------------------
 * retry composites */

static int64_t backoff_delay(const duro_retry_policy *p, uint32_t failed)
{
    double d = (double)p->initial_delay_ms;
    switch (p->backoff) {
    case DURO_BACKOFF_LINEAR:
        d *= failed;
        break;
    case DURO_BACKOFF_FIXED:
        break;
    default:
        for (uint32_t i = 1; i < failed && d < 1e15; i++)
            d *= p->coefficient;
        break;
    }
    if (p->max_delay_ms > 0 && d > (double)p->max_delay_ms)
        d = (double)p->max_delay_ms;
    if (d < 0)
        d = 0;
    /* a delay past what int64_t holds is "never" (converting it is UB) */
    if (d >= (double)INT64_MAX)
        return INT64_MAX;
    return (int64_t)d;
}

static void set_parent(struct duro_task *t, struct duro_task *parent)
{
    if (t->kind != TASK_STATIC)
        t->parent = parent;
}

void duro__retry_start_attempt(duro_orch *e, struct duro_task *rt)
{
    retry_state *r = rt->retry;
    r->attempt++;
    r->timeout = NULL;
    struct duro_task *a =
        duro__engine_schedule_activity(e, rt->name, r->input, r->attempt);
    r->activity = a;
    if (a->state != TASK_PENDING || a == &duro__misuse_task) {
        duro__task_finish(
            e, rt, a->state == TASK_SUCCEEDED ? TASK_SUCCEEDED : TASK_FAILED,
            a->output, a->error, a->category);
        return;
    }
    set_parent(a, rt);
    rt->event_id = a->event_id;
    int64_t timeout = r->policy.attempt_timeout_ms;
    if (r->deadline > 0) {
        int64_t remaining = DURO__MAX(r->deadline - e->now, 0);
        if (timeout <= 0 || remaining < timeout)
            timeout = remaining;
    }
    if (timeout > 0 || r->deadline > 0) {
        r->timeout = duro__engine_schedule_timer(e, timeout);
        set_parent(r->timeout, rt);
    }
}

static void retry_attempt_failed(duro_orch *e, struct duro_task *rt,
                                 const char *error, int category)
{
    retry_state *r = rt->retry;
    if (r->attempt >= r->policy.max_attempts) {
        duro__task_finish(e, rt, TASK_FAILED, NULL, error, category);
        return;
    }
    int64_t delay = backoff_delay(&r->policy, r->attempt);
    if (r->deadline > 0 && duro__add_ms(e->now, delay) >= r->deadline) {
        duro__task_finish(e, rt, TASK_FAILED, NULL,
                          duro__engine_sprintf(
                              e,
                              "activity '%s' exceeded its total timeout "
                              "of %lld ms after %u attempts; last "
                              "error: %s",
                              rt->name, (long long)r->policy.total_timeout_ms,
                              r->attempt, str_or(error, "")),
                          DURO_CATEGORY_TIMEOUT);
        return;
    }
    if (delay > 0) {
        r->backoff = duro__engine_schedule_timer(e, delay);
        set_parent(r->backoff, rt);
    } else {
        duro__retry_start_attempt(e, rt);
    }
}

void duro__retry_on_subtask(duro_orch *e, struct duro_task *rt,
                            struct duro_task *sub)
{
    if (rt->state != TASK_PENDING)
        return;
    retry_state *r = rt->retry;
    if (sub == r->activity) {
        if (r->timeout != NULL) {
            set_parent(r->timeout, NULL);
            duro__task_cancel(e, r->timeout, DURO_REASON_TASK_CANCELLED);
            r->timeout = NULL;
        }
        if (sub->state == TASK_SUCCEEDED) {
            duro__task_finish(e, rt, TASK_SUCCEEDED, sub->output, NULL, 0);
        } else if (sub->category == DURO_CATEGORY_APPLICATION ||
                   sub->category == DURO_CATEGORY_TIMEOUT) {
            retry_attempt_failed(e, rt, sub->error, sub->category);
        } else {
            duro__task_finish(e, rt, TASK_FAILED, NULL, sub->error,
                              sub->category);
        }
    } else if (sub == r->timeout) {
        r->timeout = NULL;
        struct duro_task *a = r->activity;
        set_parent(a, NULL); /* its cancellation must not re-enter */
        duro__task_cancel(e, a, DURO_REASON_SELECT_LOSER);
        int total = r->deadline > 0 && e->now >= r->deadline;
        const char *msg =
            total ? duro__engine_sprintf(
                        e,
                        "activity '%s' exceeded its total timeout "
                        "of %lld ms during attempt %u",
                        rt->name, (long long)r->policy.total_timeout_ms,
                        r->attempt)
                  : duro__engine_sprintf(
                        e,
                        "activity '%s' attempt %u timed out after "
                        "%lld ms",
                        rt->name, r->attempt,
                        (long long)r->policy.attempt_timeout_ms);
        if (total)
            duro__task_finish(e, rt, TASK_FAILED, NULL, msg,
                              DURO_CATEGORY_TIMEOUT);
        else
            retry_attempt_failed(e, rt, msg, DURO_CATEGORY_TIMEOUT);
    } else if (sub == r->backoff) {
        r->backoff = NULL;
        duro__retry_start_attempt(e, rt);
    }
}

void duro_retry_policy_init(duro_retry_policy *p)
{
    if (p == NULL)
        return;
    memset(p, 0, sizeof(*p));
    p->version = 1;
    p->max_attempts = 3;
    p->backoff = DURO_BACKOFF_EXPONENTIAL;
    p->initial_delay_ms = 1000;
    p->coefficient = 2.0;
    p->max_delay_ms = 60000;
}
