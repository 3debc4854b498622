/* engine.c - the replay engine: runs one execution of an orchestration on a
 * fiber, matching every command the code issues against recorded history,
 * feeding recorded and new inputs to the code one at a time in history order,
 * and deciding what each turn appends, enqueues and cancels. Also implements
 * the orchestration-context API (duro_call_activity, duro_select, ...), whose
 * functions run on the engine's fiber. Pure: no threads, no I/O; one thread
 * at a time drives an engine.
 *
 * The rule that makes replay exact: history is the trace of the code's
 * commands and of the inputs it consumed, in order. Inputs (completions,
 * raised events) are consumed only while the code waits, one at a time, and
 * after each the code runs until it waits again. A replay that reaches a
 * different command, or waits where history has a command, or returns while
 * history continues, is nondeterminism. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "core/fiber.h"

enum {
    TASK_ACTIVITY = 1,
    TASK_TIMER = 2,
    TASK_EVENT = 3,
    TASK_CHILD = 4,
    TASK_RETRY = 5,
    TASK_STATIC = 6 /* shared failed task for misuse; never written */
};

enum {
    TASK_PENDING = 0,
    TASK_SUCCEEDED = 1,
    TASK_FAILED = 2,
    TASK_CANCELLED = 3
};

typedef struct retry_state {
    duro_retry_policy policy;
    const char *input;
    uint32_t attempt;           /* attempts started so far */
    struct duro_task *activity; /* the running attempt */
    struct duro_task *timeout;  /* its timeout timer, if any */
    struct duro_task *backoff;  /* the delay before the next attempt */
    int64_t deadline;           /* total timeout, 0 = none */
} retry_state;

struct duro_task {
    uint8_t kind;
    uint8_t state;
    int rc;            /* duro_await code once done */
    uint64_t event_id; /* scheduling event */
    uint64_t done_seq; /* order of completion, 0 = at creation */
    const char *name;  /* activity, child or event name */
    const char *output;
    const char *error;
    int category;
    const char *child_instance;
    struct duro_task *parent; /* retry composite owning this attempt */
    retry_state *retry;
    struct duro_task *next_wait; /* event waits, in order */
};

static struct duro_task misuse_task = {
    .kind = TASK_STATIC,
    .state = TASK_FAILED,
    .rc = DURO_MISUSE,
    .error = "duro API misuse: orchestration functions must be called on "
             "the orchestration's own fiber while it runs",
    .category = DURO_CATEGORY_CONFIGURATION,
};

typedef struct raised_event {
    const char *name;
    const char *payload;
    int consumed;
    struct raised_event *next;
} raised_event;

struct duro_orch {
    duro__engine_config cfg;
    duro_arena *arena; /* lives as long as the engine */
    char *instance_id;
    uint64_t execution_id;
    const char *name;
    const char *version;
    const char *input;
    const char *parent_instance;
    uint64_t parent_execution;
    uint64_t parent_event_id;
    uint32_t start_flags;
    duro__fiber *fiber;
    duro__tracker tracker;

    /* the turn in progress */
    duro__turn *turn;
    const duro_event *replay;
    size_t replay_count;
    size_t replay_pos;
    int64_t turn_now;

    int64_t now;  /* deterministic time */
    uint64_t seq; /* completion order */
    uint64_t guid_counter;

    int code_started;
    int replay_segment; /* the code is re-running what a recorded input (or
                           a recorded start) made it run before */
    int code_done;
    duro_result result;
    int nondet;
    int oom;
    int terminal;

    raised_event *raised_head, *raised_tail;
    /* external-event messages of the batch that were not delivered because
     * the code returned first; carried to the next execution on
     * continue-as-new */
    const duro_work_item **leftover;
    size_t leftover_count, leftover_cap;
    struct duro_task *waits_head, *waits_tail;
    const char *custom_status;
    int custom_status_dirty;
};

int duro__result_set_continue(duro_result *out, const char *input);

/* ------------------------------------------------------------------------
 * small helpers */

static const char *str_or(const char *s, const char *fallback)
{
    return s != NULL ? s : fallback;
}

static int str_eq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static const char *engine_strdup(duro_orch *e, const char *s)
{
    if (s == NULL)
        return NULL;
    const char *d = duro_arena_strdup(e->arena, s);
    if (d == NULL)
        e->oom = 1;
    return d;
}

static const char *turn_strdup(duro_orch *e, const char *s)
{
    if (s == NULL)
        return NULL;
    const char *d = duro_arena_strdup(e->turn->arena, s);
    if (d == NULL)
        e->oom = 1;
    return d;
}

static const char *engine_vsprintf(duro_orch *e, const char *fmt, va_list ap)
{
    char *tmp = duro__vsprintf(fmt, ap);
    if (tmp == NULL) {
        e->oom = 1;
        return NULL;
    }
    const char *s = engine_strdup(e, tmp);
    duro__free(tmp);
    return s;
}

static const char *engine_sprintf(duro_orch *e, const char *fmt, ...)
    DURO_PRINTF(2, 3);
static const char *engine_sprintf(duro_orch *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *s = engine_vsprintf(e, fmt, ap);
    va_end(ap);
    return s;
}

/* Short, single-line rendering of a payload for error messages. */
static void preview(char *buf, size_t size, const char *s)
{
    if (s == NULL) {
        snprintf(buf, size, "(none)");
        return;
    }
    size_t n = strlen(s);
    if (n + 3 <= size)
        snprintf(buf, size, "\"%s\"", s);
    else
        snprintf(buf, size, "\"%.*s...\"", (int)(size - 6), s);
}

/* "ActivityScheduled 'Name'" and similar, for nondeterminism messages. */
static void describe(char *buf, size_t size, const duro_event *ev)
{
    char p[48];
    const char *kind = duro_event_kind_name(ev->kind);
    switch (ev->kind) {
    case DURO_EVENT_ACTIVITY_SCHEDULED:
        preview(p, sizeof(p), ev->payload);
        snprintf(buf, size, "%s '%s' (input %s, attempt %u)", kind,
                 str_or(ev->name, ""), p, ev->attempt);
        break;
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
        preview(p, sizeof(p), ev->payload);
        snprintf(buf, size, "%s '%s' id '%s' (input %s)", kind,
                 str_or(ev->name, ""), str_or(ev->ref_instance, ""), p);
        break;
    case DURO_EVENT_EVENT_SUBSCRIBED:
        snprintf(buf, size, "%s '%s'", kind, str_or(ev->name, ""));
        break;
    case DURO_EVENT_TIMER_CREATED:
        snprintf(buf, size, "%s (fires at %lld)", kind,
                 (long long)ev->fire_at_ms);
        break;
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        snprintf(buf, size, "%s of event %llu (%s)", kind,
                 (unsigned long long)ev->source_event_id,
                 str_or(ev->reason, ""));
        break;
    default:
        snprintf(buf, size, "%s", kind);
        break;
    }
}

static int same_command(const duro_event *h, const duro_event *w)
{
    if (h->kind != w->kind)
        return 0;
    switch (h->kind) {
    case DURO_EVENT_ACTIVITY_SCHEDULED:
        return str_eq(h->name, w->name) && str_eq(h->payload, w->payload) &&
               h->attempt == w->attempt;
    case DURO_EVENT_TIMER_CREATED:
        return h->fire_at_ms == w->fire_at_ms;
    case DURO_EVENT_EVENT_SUBSCRIBED:
        return str_eq(h->name, w->name);
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
        return str_eq(h->name, w->name) && str_eq(h->version, w->version) &&
               str_eq(h->ref_instance, w->ref_instance) &&
               str_eq(h->payload, w->payload) && h->flags == w->flags;
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        return h->source_event_id == w->source_event_id &&
               str_eq(h->reason, w->reason);
    default:
        return 1;
    }
}

/* ------------------------------------------------------------------------
 * appending and matching */

static void set_nondeterminism(duro_orch *e, const char *fmt, ...)
    DURO_PRINTF(2, 3);
static void set_nondeterminism(duro_orch *e, const char *fmt, ...)
{
    if (e->nondet)
        return;
    va_list ap;
    va_start(ap, fmt);
    const char *msg = engine_vsprintf(e, fmt, ap);
    va_end(ap);
    e->nondet = 1;
    e->result.kind = DURO__RESULT_FAILED;
    duro__free(e->result.error);
    e->result.error = duro__strdup(msg ? msg : "nondeterminism");
    e->result.category = DURO_CATEGORY_CONFIGURATION;
}

/* Adds an event to the turn's delta with the next event id and the turn's
 * time, without applying it. Returns 1, or 0 on OOM. *stored receives the
 * copy (the delta array may move later, so callers keep the copy). */
static int push_delta(duro_orch *e, const duro_event *ev, duro_event *stored)
{
    duro__turn *t = e->turn;
    duro_event *slot = duro__vec_push((void **)&t->delta, &t->delta_count,
                                      &t->delta_cap, sizeof(duro_event));
    if (slot == NULL) {
        e->oom = 1;
        return 0;
    }
    *slot = *ev;
    slot->event_id = e->tracker.count + 1;
    slot->timestamp_ms = e->turn_now;
    *stored = *slot;
    return 1;
}

/* Appends an event to the turn's delta (live) and applies it to the
 * tracker. Returns its id, 0 on OOM. */
static uint64_t append_event(duro_orch *e, const duro_event *ev)
{
    duro_event copy;
    if (!push_delta(e, ev, &copy))
        return 0;
    if (duro__tracker_apply(&e->tracker, &copy, e->arena) != DURO_OK) {
        e->turn->delta_count--;
        e->oom = 1;
        return 0;
    }
    e->now = e->turn_now;
    return copy.event_id;
}

/* Issues a command: during replay it must equal the next history event;
 * live it is appended. Returns the event id (0 on nondeterminism or OOM) and
 * sets *live when it was appended, so the caller enqueues its side effects
 * only once. */
static uint64_t issue(duro_orch *e, const duro_event *want, int *live)
{
    *live = 0;
    if (e->nondet || e->oom)
        return 0;
    if (e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        char a[160], b[160];
        if (!duro__event_is_command(h->kind)) {
            describe(a, sizeof(a), want);
            describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration issued %s but history has %s",
                               (unsigned long long)h->event_id, a, b);
            return 0;
        }
        if (!same_command(h, want)) {
            describe(a, sizeof(a), want);
            describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration issued %s but history has %s",
                               (unsigned long long)h->event_id, a, b);
            return 0;
        }
        if (duro__tracker_apply(&e->tracker, h, e->arena) != DURO_OK) {
            e->oom = 1;
            return 0;
        }
        e->replay_pos++;
        e->now = h->timestamp_ms;
        return h->event_id;
    }
    uint64_t id = append_event(e, want);
    *live = id != 0;
    e->replay_segment = 0;
    return id;
}

/* Issues task t's scheduling command and binds the task to its event.
 * Returns 1 when the command was appended live, so the caller enqueues its
 * side effects; 0 when it was replayed from history or the engine stopped
 * (nondeterminism, out of memory). */
static int issue_task(duro_orch *e, struct duro_task *t, const duro_event *ev)
{
    int live = 0;
    uint64_t id = issue(e, ev, &live);
    if (id == 0)
        return 0;
    t->event_id = id;
    e->tracker.slots[id].task = t;
    return live;
}

static duro_work_item *push_worker_item(duro_orch *e)
{
    duro__turn *t = e->turn;
    duro_work_item *w =
        duro__vec_push((void **)&t->worker_items, &t->worker_count,
                       &t->worker_cap, sizeof(duro_work_item));
    if (w == NULL)
        e->oom = 1;
    return w;
}

static duro_outbound *push_outbound(duro_orch *e)
{
    duro__turn *t = e->turn;
    duro_outbound *o = duro__vec_push((void **)&t->outbound, &t->outbound_count,
                                      &t->outbound_cap, sizeof(duro_outbound));
    if (o == NULL)
        e->oom = 1;
    return o;
}

static void push_cancelled(duro_orch *e, uint64_t activity_id,
                           const char *reason)
{
    duro__turn *t = e->turn;
    const char **why =
        duro__vec_push((void **)&t->cancel_reasons, &t->reasons_count,
                       &t->reasons_cap, sizeof(const char *));
    if (why == NULL) {
        e->oom = 1;
        return;
    }
    *why = reason;
    duro_activity_ref *r =
        duro__vec_push((void **)&t->cancelled, &t->cancelled_count,
                       &t->cancelled_cap, sizeof(duro_activity_ref));
    if (r == NULL) {
        t->reasons_count--;
        e->oom = 1;
        return;
    }
    r->instance_id = e->instance_id;
    r->execution_id = e->execution_id;
    r->activity_id = activity_id;
}

/* ------------------------------------------------------------------------
 * tasks */

static struct duro_task *new_task(duro_orch *e, int kind)
{
    struct duro_task *t = duro_arena_alloc(e->arena, sizeof(*t));
    if (t == NULL) {
        e->oom = 1;
        return &misuse_task;
    }
    t->kind = (uint8_t)kind;
    t->state = TASK_PENDING;
    return t;
}

static struct duro_task *failed_task(duro_orch *e, int rc, int category,
                                     const char *error)
{
    struct duro_task *t = new_task(e, TASK_ACTIVITY);
    if (t == &misuse_task)
        return t;
    t->state = TASK_FAILED;
    t->rc = rc;
    t->category = category;
    t->error = error;
    return t;
}

static void retry_on_subtask(duro_orch *e, struct duro_task *rt,
                             struct duro_task *sub);

static void finish_task(duro_orch *e, struct duro_task *t, int state,
                        const char *output, const char *error, int category)
{
    if (t == NULL || t->state != TASK_PENDING || t->kind == TASK_STATIC)
        return;
    t->state = (uint8_t)state;
    t->output = engine_strdup(e, output);
    t->error = engine_strdup(e, error);
    t->category = state == TASK_SUCCEEDED ? DURO_CATEGORY_NONE : category;
    t->rc = state == TASK_SUCCEEDED   ? DURO_OK
            : state == TASK_CANCELLED ? DURO_CANCELLED
                                      : DURO_FAILED;
    t->done_seq = ++e->seq;
    if (t->parent != NULL)
        retry_on_subtask(e, t->parent, t);
}

static void remove_wait(duro_orch *e, struct duro_task *t)
{
    struct duro_task **pp = &e->waits_head;
    struct duro_task *prev = NULL;
    while (*pp != NULL) {
        if (*pp == t) {
            *pp = t->next_wait;
            if (e->waits_tail == t)
                e->waits_tail = prev;
            t->next_wait = NULL;
            return;
        }
        prev = *pp;
        pp = &(*pp)->next_wait;
    }
}

/* Cancels a pending task: activities and children durably (an event in
 * history plus the row deletion or cancel message), timers and event waits
 * by dropping them. */
static void cancel_task(duro_orch *e, struct duro_task *t, const char *reason)
{
    if (t == NULL || t->state != TASK_PENDING || t->kind == TASK_STATIC)
        return;
    int live = 0;
    switch (t->kind) {
    case TASK_ACTIVITY: {
        duro_event ev = {.kind = DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                         .source_event_id = t->event_id,
                         .reason = reason};
        if (issue(e, &ev, &live) == 0)
            return;
        if (live)
            push_cancelled(e, t->event_id, reason);
        break;
    }
    case TASK_CHILD: {
        duro_event ev = {.kind = DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED,
                         .source_event_id = t->event_id,
                         .reason = reason};
        if (issue(e, &ev, &live) == 0)
            return;
        if (live) {
            duro_outbound *o = push_outbound(e);
            if (o == NULL)
                return;
            o->item.kind = DURO_WORK_CANCEL_INSTANCE;
            o->item.instance_id = t->child_instance;
            o->item.reason = reason;
            o->item.requested_by =
                engine_sprintf(e, "parent:%s", e->instance_id);
        }
        break;
    }
    case TASK_EVENT:
        remove_wait(e, t);
        break;
    case TASK_RETRY: {
        retry_state *r = t->retry;
        cancel_task(e, r->activity, reason);
        cancel_task(e, r->timeout, reason);
        cancel_task(e, r->backoff, reason);
        break;
    }
    default: /* timers are simply dropped */
        break;
    }
    /* A subtask's cancellation must not advance its composite: detach
     * first. */
    struct duro_task *parent = t->parent;
    t->parent = NULL;
    char buf[96];
    snprintf(buf, sizeof(buf), "cancelled: %s", reason);
    finish_task(e, t, TASK_CANCELLED, NULL, buf, DURO_CATEGORY_CANCELLED);
    t->parent = parent;
}

/* ------------------------------------------------------------------------
 * issuing the primitive tasks (used by the API and by retry composites) */

static int over_limit(duro_orch *e, const char *s)
{
    return s != NULL && e->cfg.max_payload > 0 &&
           strlen(s) > e->cfg.max_payload;
}

static struct duro_task *schedule_activity(duro_orch *e, const char *name,
                                           const char *input, uint32_t attempt)
{
    if (name == NULL || name[0] == '\0')
        return failed_task(e, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                           "activity name is empty");
    if (strlen(name) > 1024)
        return failed_task(e, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
                           "activity name is longer than 1024 bytes");
    if (over_limit(e, input))
        return failed_task(
            e, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
            engine_sprintf(e,
                           "input of activity '%s' is %zu bytes, over the "
                           "limit of %zu",
                           name, strlen(input), e->cfg.max_payload));
    struct duro_task *t = new_task(e, TASK_ACTIVITY);
    if (t == &misuse_task)
        return t;
    t->name = engine_strdup(e, name);
    duro_event ev = {.kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                     .name = name,
                     .payload = input,
                     .attempt = attempt};
    if (e->replay_pos >= e->replay_count) {
        /* live: the event's strings must outlive the caller's */
        ev.name = t->name;
        ev.payload = turn_strdup(e, input);
    }
    /* Not live: replayed, or the engine stopped (the task stays pending
     * and the code is not resumed). */
    if (issue_task(e, t, &ev)) {
        uint64_t id = t->event_id;
        duro_work_item *w = push_worker_item(e);
        if (w != NULL) {
            w->kind = DURO_WORK_ACTIVITY_EXECUTE;
            w->instance_id = e->instance_id;
            w->execution_id = e->execution_id;
            w->source_id = id;
            w->name = t->name;
            w->payload = ev.payload;
            w->attempt = attempt;
        }
    }
    return t;
}

static struct duro_task *schedule_timer(duro_orch *e, int64_t delay_ms)
{
    if (delay_ms < 0)
        delay_ms = 0;
    struct duro_task *t = new_task(e, TASK_TIMER);
    if (t == &misuse_task)
        return t;
    duro_event ev = {.kind = DURO_EVENT_TIMER_CREATED,
                     .fire_at_ms = e->now + delay_ms};
    if (issue_task(e, t, &ev)) {
        duro_outbound *o = push_outbound(e);
        if (o != NULL) {
            o->item.kind = DURO_WORK_TIMER_FIRED;
            o->item.instance_id = e->instance_id;
            o->item.execution_id = e->execution_id;
            o->item.source_id = t->event_id;
            o->item.fire_at_ms = ev.fire_at_ms;
            o->delay_ms = DURO__MAX(ev.fire_at_ms - e->turn_now, 0);
        }
    }
    return t;
}

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
    return (int64_t)d;
}

static void set_parent(struct duro_task *t, struct duro_task *parent)
{
    if (t->kind != TASK_STATIC)
        t->parent = parent;
}

static void retry_start_attempt(duro_orch *e, struct duro_task *rt)
{
    retry_state *r = rt->retry;
    r->attempt++;
    r->timeout = NULL;
    struct duro_task *a = schedule_activity(e, rt->name, r->input, r->attempt);
    r->activity = a;
    if (a->state != TASK_PENDING || a == &misuse_task) {
        finish_task(e, rt,
                    a->state == TASK_SUCCEEDED ? TASK_SUCCEEDED : TASK_FAILED,
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
        r->timeout = schedule_timer(e, timeout);
        set_parent(r->timeout, rt);
    }
}

static void retry_attempt_failed(duro_orch *e, struct duro_task *rt,
                                 const char *error, int category)
{
    retry_state *r = rt->retry;
    if (r->attempt >= r->policy.max_attempts) {
        finish_task(e, rt, TASK_FAILED, NULL, error, category);
        return;
    }
    int64_t delay = backoff_delay(&r->policy, r->attempt);
    if (r->deadline > 0 && e->now + delay >= r->deadline) {
        finish_task(e, rt, TASK_FAILED, NULL,
                    engine_sprintf(e,
                                   "activity '%s' exceeded its total timeout "
                                   "of %lld ms after %u attempts; last "
                                   "error: %s",
                                   rt->name,
                                   (long long)r->policy.total_timeout_ms,
                                   r->attempt, str_or(error, "")),
                    DURO_CATEGORY_TIMEOUT);
        return;
    }
    if (delay > 0) {
        r->backoff = schedule_timer(e, delay);
        set_parent(r->backoff, rt);
    } else {
        retry_start_attempt(e, rt);
    }
}

static void retry_on_subtask(duro_orch *e, struct duro_task *rt,
                             struct duro_task *sub)
{
    if (rt->state != TASK_PENDING)
        return;
    retry_state *r = rt->retry;
    if (sub == r->activity) {
        if (r->timeout != NULL) {
            set_parent(r->timeout, NULL);
            cancel_task(e, r->timeout, DURO_REASON_TASK_CANCELLED);
            r->timeout = NULL;
        }
        if (sub->state == TASK_SUCCEEDED) {
            finish_task(e, rt, TASK_SUCCEEDED, sub->output, NULL, 0);
        } else if (sub->category == DURO_CATEGORY_APPLICATION ||
                   sub->category == DURO_CATEGORY_TIMEOUT) {
            retry_attempt_failed(e, rt, sub->error, sub->category);
        } else {
            finish_task(e, rt, TASK_FAILED, NULL, sub->error, sub->category);
        }
    } else if (sub == r->timeout) {
        r->timeout = NULL;
        struct duro_task *a = r->activity;
        set_parent(a, NULL); /* its cancellation must not re-enter */
        cancel_task(e, a, DURO_REASON_SELECT_LOSER);
        int total = r->deadline > 0 && e->now >= r->deadline;
        const char *msg =
            total ? engine_sprintf(e,
                                   "activity '%s' exceeded its total timeout "
                                   "of %lld ms during attempt %u",
                                   rt->name,
                                   (long long)r->policy.total_timeout_ms,
                                   r->attempt)
                  : engine_sprintf(e,
                                   "activity '%s' attempt %u timed out after "
                                   "%lld ms",
                                   rt->name, r->attempt,
                                   (long long)r->policy.attempt_timeout_ms);
        if (total)
            finish_task(e, rt, TASK_FAILED, NULL, msg, DURO_CATEGORY_TIMEOUT);
        else
            retry_attempt_failed(e, rt, msg, DURO_CATEGORY_TIMEOUT);
    } else if (sub == r->backoff) {
        r->backoff = NULL;
        retry_start_attempt(e, rt);
    }
}

/* ------------------------------------------------------------------------
 * inputs */

static void deliver_raised(duro_orch *e, const char *name, const char *payload)
{
    raised_event *r = duro_arena_alloc(e->arena, sizeof(*r));
    if (r == NULL) {
        e->oom = 1;
        return;
    }
    r->name = engine_strdup(e, name);
    r->payload = engine_strdup(e, payload);
    if (e->raised_tail != NULL)
        e->raised_tail->next = r;
    else
        e->raised_head = r;
    e->raised_tail = r;
    for (struct duro_task *w = e->waits_head; w != NULL; w = w->next_wait) {
        if (str_eq(w->name, name)) {
            r->consumed = 1;
            remove_wait(e, w);
            finish_task(e, w, TASK_SUCCEEDED, payload, NULL, 0);
            return;
        }
    }
}

/* Applies an input event (recorded or new) and resolves the task it
 * completes. The tracker has not seen it yet. */
static void consume_input(duro_orch *e, const duro_event *ev)
{
    int cls = duro__tracker_classify(&e->tracker, ev);
    if (duro__tracker_apply(&e->tracker, ev, e->arena) != DURO_OK) {
        e->oom = 1;
        return;
    }
    e->now = ev->timestamp_ms;
    if (ev->kind == DURO_EVENT_EVENT_RAISED) {
        deliver_raised(e, ev->name, ev->payload);
        return;
    }
    if (cls != DURO__MSG_APPLY)
        return;
    struct duro_task *t = e->tracker.slots[ev->source_event_id].task;
    switch (ev->kind) {
    case DURO_EVENT_ACTIVITY_COMPLETED:
    case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_TIMER_FIRED:
        finish_task(e, t, TASK_SUCCEEDED, ev->payload, NULL, 0);
        break;
    case DURO_EVENT_ACTIVITY_FAILED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
        finish_task(e, t, TASK_FAILED, NULL, str_or(ev->error, "failed"),
                    ev->category ? ev->category : DURO_CATEGORY_APPLICATION);
        break;
    default:
        break;
    }
}

/* Turns a message into the input event it records, or returns 0 when the
 * message must be dropped (stale execution, duplicate, unknown source). */
static int message_event(const duro_orch *e, const duro_work_item *m,
                         duro_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    switch (m->kind) {
    case DURO_WORK_ACTIVITY_COMPLETED:
        ev->kind = DURO_EVENT_ACTIVITY_COMPLETED;
        break;
    case DURO_WORK_ACTIVITY_FAILED:
        ev->kind = DURO_EVENT_ACTIVITY_FAILED;
        break;
    case DURO_WORK_TIMER_FIRED:
        ev->kind = DURO_EVENT_TIMER_FIRED;
        ev->fire_at_ms = m->fire_at_ms;
        break;
    case DURO_WORK_CHILD_COMPLETED:
        ev->kind = DURO_EVENT_SUB_ORCHESTRATION_COMPLETED;
        break;
    case DURO_WORK_CHILD_FAILED:
        ev->kind = DURO_EVENT_SUB_ORCHESTRATION_FAILED;
        break;
    case DURO_WORK_EXTERNAL_EVENT:
        if (m->name == NULL)
            return 0;
        ev->kind = DURO_EVENT_EVENT_RAISED;
        ev->name = m->name;
        ev->payload = m->payload;
        return 1;
    default:
        return 0;
    }
    if (m->execution_id != e->execution_id)
        return 0;
    ev->source_event_id = m->source_id;
    ev->payload = m->payload;
    ev->error = m->error;
    ev->category = m->category;
    int cls = duro__tracker_classify(&e->tracker, ev);
    return cls == DURO__MSG_APPLY || cls == DURO__MSG_LATE;
}

static void note_leftover(duro_orch *e, const duro_work_item *m)
{
    const duro_work_item **slot =
        duro__vec_push((void **)&e->leftover, &e->leftover_count,
                       &e->leftover_cap, sizeof(*slot));
    if (slot == NULL)
        e->oom = 1;
    else
        *slot = m;
}

/* ------------------------------------------------------------------------
 * running the code */

static void fiber_main(void *arg)
{
    duro_orch *e = arg;
    int rc = e->cfg.fn(e, e->input, &e->result);
    duro__result_finish(&e->result, rc);
    e->code_done = 1;
}

/* The engine whose code runs on this thread right now. API functions compare
 * their context against it before touching it, so a stale or foreign
 * context is refused without being dereferenced. Accessed only through
 * these non-inlined functions: code on a fiber may continue on another
 * thread after a wait, and must read the thread-local afresh. */
static _Thread_local duro_orch *running_engine;

__attribute__((noinline)) static duro_orch *running_get(void)
{
    __asm__ volatile("" ::: "memory");
    return running_engine;
}

__attribute__((noinline)) static void running_set(duro_orch *e)
{
    __asm__ volatile("" ::: "memory");
    running_engine = e;
}

static int can_run(const duro_orch *e)
{
    return e->code_started && !e->code_done && !e->nondet && !e->oom;
}

static void resume_code(duro_orch *e)
{
    if (!can_run(e))
        return;
    e->turn->ran_code = 1;
    duro_orch *outer = running_get();
    running_set(e);
    duro__fiber_resume(e->fiber);
    running_set(outer);
    if (duro__fiber_done(e->fiber))
        e->code_done = 1;
}

/* Called by API functions: 1 when called correctly on the engine's fiber. */
static int on_fiber(duro_orch *o)
{
    return o != NULL && o == running_get() && !o->code_done &&
           duro__fiber_current() == o->fiber;
}

/* Suspends the code until the engine has consumed another input. */
static void wait_once(duro_orch *o)
{
    (void)o;
    duro__fiber_yield();
}

/* ------------------------------------------------------------------------
 * ending an execution */

static const char *cancel_reason_for(int status)
{
    switch (status) {
    case DURO_STATUS_COMPLETED:
        return DURO_REASON_INSTANCE_COMPLETED;
    case DURO_STATUS_CANCELLED:
        return DURO_REASON_INSTANCE_CANCELLED;
    case DURO_STATUS_CONTINUED_AS_NEW:
        return DURO_REASON_CONTINUED_AS_NEW;
    default:
        return DURO_REASON_INSTANCE_FAILED;
    }
}

/* Ends the execution: cancels every outstanding activity and child, records
 * the terminal event, tells the parent, and for continue-as-new enqueues the
 * next execution with the events this one did not consume. */
static void terminate(duro_orch *e, int status, const char *output,
                      const char *error, int category)
{
    const char *reason = cancel_reason_for(status);
    uint64_t count = e->tracker.count;
    for (uint64_t id = 1; id <= count && !e->oom; id++) {
        duro__slot s = e->tracker.slots[id];
        if (s.state != DURO__SLOT_PENDING)
            continue;
        if (s.kind == DURO__SLOT_ACTIVITY) {
            duro_event ev = {.kind = DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                             .source_event_id = id,
                             .reason = reason};
            if (append_event(e, &ev) != 0)
                push_cancelled(e, id, reason);
        } else if (s.kind == DURO__SLOT_CHILD) {
            duro_event ev = {.kind =
                                 DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED,
                             .source_event_id = id,
                             .reason = reason};
            if (append_event(e, &ev) == 0)
                break;
            duro_outbound *o = push_outbound(e);
            if (o == NULL)
                break;
            o->item.kind = DURO_WORK_CANCEL_INSTANCE;
            o->item.instance_id = s.child_instance;
            o->item.reason = reason;
            o->item.requested_by =
                engine_sprintf(e, "parent:%s", e->instance_id);
        }
        if (s.task != NULL && s.task->state == TASK_PENDING) {
            s.task->parent = NULL;
            finish_task(e, s.task, TASK_CANCELLED, NULL, reason,
                        DURO_CATEGORY_CANCELLED);
        }
    }
    duro_event term = {0};
    switch (status) {
    case DURO_STATUS_COMPLETED:
        term.kind = DURO_EVENT_ORCHESTRATION_COMPLETED;
        term.payload = output;
        break;
    case DURO_STATUS_CONTINUED_AS_NEW:
        term.kind = DURO_EVENT_CONTINUED_AS_NEW;
        term.payload = output;
        break;
    case DURO_STATUS_CANCELLED:
        term.kind = DURO_EVENT_ORCHESTRATION_CANCELLED;
        term.reason = error;
        break;
    default:
        term.kind = DURO_EVENT_ORCHESTRATION_FAILED;
        term.error = str_or(error, "failed");
        term.category = category ? category : DURO_CATEGORY_APPLICATION;
        break;
    }
    append_event(e, &term);

    duro__turn *t = e->turn;
    t->status = status;
    t->meta.output = (status == DURO_STATUS_COMPLETED ||
                      status == DURO_STATUS_CONTINUED_AS_NEW)
                         ? output
                         : NULL;
    t->meta.error =
        status == DURO_STATUS_FAILED || status == DURO_STATUS_CANCELLED
            ? str_or(error, status == DURO_STATUS_CANCELLED ? "" : "failed")
            : NULL;
    t->meta.category = status == DURO_STATUS_FAILED ? term.category
                       : status == DURO_STATUS_CANCELLED
                           ? DURO_CATEGORY_CANCELLED
                           : DURO_CATEGORY_NONE;

    if (e->parent_instance != NULL && !(e->start_flags & DURO_START_DETACHED) &&
        status != DURO_STATUS_CONTINUED_AS_NEW) {
        duro_outbound *o = push_outbound(e);
        if (o != NULL) {
            o->item.instance_id = e->parent_instance;
            o->item.execution_id = e->parent_execution;
            o->item.source_id = e->parent_event_id;
            if (status == DURO_STATUS_COMPLETED) {
                o->item.kind = DURO_WORK_CHILD_COMPLETED;
                o->item.payload = output;
            } else {
                o->item.kind = DURO_WORK_CHILD_FAILED;
                o->item.category = t->meta.category;
                o->item.error =
                    status == DURO_STATUS_CANCELLED
                        ? engine_sprintf(e, "child '%s' was cancelled: %s",
                                         e->instance_id, str_or(error, ""))
                        : t->meta.error;
            }
        }
    }
    if (status == DURO_STATUS_CONTINUED_AS_NEW) {
        duro_outbound *o = push_outbound(e);
        if (o != NULL) {
            o->item.kind = DURO_WORK_CONTINUE_AS_NEW;
            o->item.instance_id = e->instance_id;
            o->item.execution_id = e->execution_id + 1;
            o->item.name = e->name;
            o->item.version = e->version;
            o->item.payload = output;
            o->item.parent_instance = e->parent_instance;
            o->item.parent_execution = e->parent_execution;
            o->item.parent_event_id = e->parent_event_id;
            o->item.flags = e->start_flags;
        }
        /* Events this execution received but did not consume go to the
         * next one, in the order they were raised: first those already in
         * history, then those of this batch not yet delivered. Marked
         * CARRIED, they are delivered before anything else in the new
         * execution's batch (which may hold events raised during this
         * turn, queued ahead of these). */
        for (raised_event *r = e->raised_head; r != NULL; r = r->next) {
            if (r->consumed)
                continue;
            o = push_outbound(e);
            if (o == NULL)
                break;
            o->item.kind = DURO_WORK_EXTERNAL_EVENT;
            o->item.instance_id = e->instance_id;
            o->item.execution_id = e->execution_id + 1;
            o->item.name = r->name;
            o->item.payload = r->payload;
            o->item.flags = DURO_EVENT_CARRIED;
        }
        for (size_t i = 0; i < e->leftover_count; i++) {
            o = push_outbound(e);
            if (o == NULL)
                break;
            o->item = *e->leftover[i];
            o->item.execution_id = e->execution_id + 1;
            o->item.flags = DURO_EVENT_CARRIED;
        }
    }
    e->terminal = 1;
}

static void finish_from_code(duro_orch *e)
{
    duro_result *r = &e->result;
    if (r->oom) {
        e->oom = 1;
        return;
    }
    const char *output = turn_strdup(e, r->output);
    if (r->kind == DURO__RESULT_OK) {
        if (over_limit(e, output)) {
            terminate(e, DURO_STATUS_FAILED, NULL,
                      engine_sprintf(e,
                                     "orchestration output is %zu bytes, over "
                                     "the limit of %zu",
                                     strlen(output), e->cfg.max_payload),
                      DURO_CATEGORY_CONFIGURATION);
            return;
        }
        terminate(e, DURO_STATUS_COMPLETED, output, NULL, 0);
    } else if (r->kind == DURO__RESULT_CONTINUE_AS_NEW) {
        if (over_limit(e, output)) {
            terminate(e, DURO_STATUS_FAILED, NULL,
                      "continue-as-new input over the payload limit",
                      DURO_CATEGORY_CONFIGURATION);
            return;
        }
        terminate(e, DURO_STATUS_CONTINUED_AS_NEW, output, NULL, 0);
    } else {
        const char *err = turn_strdup(e, r->error);
        if (err != NULL && over_limit(e, err))
            err = "orchestration error message over the payload limit";
        terminate(e, DURO_STATUS_FAILED, NULL, err, r->category);
    }
}

/* Applies the rest of the recorded history to the tracker without running
 * code, so decisions taken without the code see everything outstanding. */
static int absorb_history(duro_orch *e)
{
    while (e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        if (duro__tracker_apply(&e->tracker, h, e->arena) != DURO_OK)
            return DURO_INVALID;
        if (h->kind == DURO_EVENT_EVENT_RAISED)
            deliver_raised(e, h->name, h->payload);
        e->now = h->timestamp_ms;
        e->replay_pos++;
    }
    return DURO_OK;
}

static int load_started(duro_orch *e, const duro_event *ev)
{
    e->name = engine_strdup(e, ev->name);
    e->version = engine_strdup(e, ev->version);
    e->input = engine_strdup(e, ev->payload);
    e->parent_instance = engine_strdup(e, ev->ref_instance);
    e->parent_execution = ev->ref_execution;
    e->parent_event_id = ev->ref_event_id;
    e->start_flags = ev->flags;
    return e->oom ? DURO_NOMEM : DURO_OK;
}

/* ------------------------------------------------------------------------
 * engine lifecycle and the turn */

int duro__engine_create(const duro__engine_config *cfg, const char *instance_id,
                        uint64_t execution_id, duro_orch **out)
{
    *out = NULL;
    duro_orch *e = duro__calloc(1, sizeof(*e));
    if (e == NULL)
        return DURO_NOMEM;
    e->cfg = *cfg;
    e->arena = duro_arena_create();
    e->instance_id = e->arena ? duro_arena_strdup(e->arena, instance_id) : NULL;
    if (e->instance_id == NULL) {
        duro_arena_destroy(e->arena);
        duro__free(e);
        return DURO_NOMEM;
    }
    e->execution_id = execution_id;
    duro__tracker_init(&e->tracker);
    duro__result_init(&e->result);
    *out = e;
    return DURO_OK;
}

void duro__engine_destroy(duro_orch *e)
{
    if (e == NULL)
        return;
    duro__fiber_destroy(e->fiber);
    duro__tracker_free(&e->tracker);
    duro__free(e->leftover);
    duro__result_clear(&e->result);
    duro_arena_destroy(e->arena);
    duro__free(e);
}

uint64_t duro__engine_events(const duro_orch *e)
{
    return e->tracker.count;
}

int duro__engine_terminal(const duro_orch *e)
{
    return e->terminal;
}

uint64_t duro__engine_execution(const duro_orch *e)
{
    return e->execution_id;
}

const char *duro__engine_instance(const duro_orch *e)
{
    return e->instance_id;
}

/* Copies every string the turn's output points at into the turn's arena,
 * so the output outlives the engine and the fetched item: the runtime may
 * put the engine back in its cache (where another thread may take or evict
 * it) before the ack reads the output. */
static void own(duro_orch *e, const char **p)
{
    if (*p != NULL && !e->oom)
        *p = turn_strdup(e, *p);
}

static void own_item(duro_orch *e, duro_work_item *w)
{
    own(e, &w->instance_id);
    own(e, &w->name);
    own(e, &w->version);
    own(e, &w->payload);
    own(e, &w->error);
    own(e, &w->reason);
    own(e, &w->requested_by);
    own(e, &w->parent_instance);
}

static void own_turn_strings(duro_orch *e)
{
    duro__turn *t = e->turn;
    for (size_t i = 0; i < t->delta_count; i++) {
        duro_event *ev = &t->delta[i];
        own(e, &ev->name);
        own(e, &ev->version);
        own(e, &ev->payload);
        own(e, &ev->error);
        own(e, &ev->reason);
        own(e, &ev->requested_by);
        own(e, &ev->ref_instance);
    }
    for (size_t i = 0; i < t->worker_count; i++)
        own_item(e, &t->worker_items[i]);
    for (size_t i = 0; i < t->outbound_count; i++)
        own_item(e, &t->outbound[i].item);
    for (size_t i = 0; i < t->cancelled_count; i++)
        own(e, &t->cancelled[i].instance_id);
    own(e, &t->meta.name);
    own(e, &t->meta.version);
    own(e, &t->meta.output);
    own(e, &t->meta.error);
    own(e, &t->meta.custom_status);
    own(e, &t->meta.parent_instance);
}

static void fill_meta(duro_orch *e)
{
    duro__turn *t = e->turn;
    if (t->status != DURO_STATUS_RUNNING || e->custom_status_dirty ||
        (t->delta_count > 0 &&
         t->delta[0].kind == DURO_EVENT_ORCHESTRATION_STARTED))
        t->meta_changed = 1;
    t->meta.status = t->status;
    t->meta.name = e->name;
    t->meta.version = e->version;
    t->meta.parent_instance = e->parent_instance;
    t->meta.parent_execution = e->parent_execution;
    t->meta.parent_event_id = e->parent_event_id;
    if (e->custom_status_dirty) {
        t->meta.custom_status = e->custom_status;
        t->meta.custom_status_set = 1;
        e->custom_status_dirty = 0;
    }
    own_turn_strings(e);
}

static int begin_execution(duro_orch *e, const duro__turn_input *in)
{
    if (in->history_count > 0) {
        const duro_event *first = &in->history[0];
        if (first->kind != DURO_EVENT_ORCHESTRATION_STARTED)
            return DURO_INVALID;
        if (load_started(e, first) != DURO_OK)
            return DURO_NOMEM;
        if (duro__tracker_apply(&e->tracker, first, e->arena) != DURO_OK)
            return DURO_NOMEM;
        e->now = first->timestamp_ms;
        e->replay_pos = 1;
        return DURO_OK;
    }
    const duro_work_item *s = in->start;
    duro_event ev = {.kind = DURO_EVENT_ORCHESTRATION_STARTED};
    if (s != NULL) {
        ev.name = s->name;
        ev.version = s->version;
        ev.payload = s->payload;
        ev.ref_instance = s->parent_instance;
        ev.ref_execution = s->parent_execution;
        ev.ref_event_id = s->parent_event_id;
        ev.flags = s->flags & DURO_START_DETACHED;
    }
    if (load_started(e, &ev) != DURO_OK)
        return DURO_NOMEM;
    ev.name = e->name;
    ev.version = e->version;
    ev.payload = e->input;
    ev.ref_instance = e->parent_instance;
    if (append_event(e, &ev) == 0)
        return DURO_NOMEM;
    return DURO_OK;
}

int duro__engine_turn(duro_orch *e, const duro__turn_input *in, duro__turn *out)
{
    if (e->terminal)
        return DURO_INVALID;
    e->turn = out;
    e->turn_now = DURO__MAX(in->now_ms, e->now);
    e->replay = in->history;
    e->replay_count = in->history_count;
    e->replay_pos = 0;
    e->leftover_count = 0;
    out->status = DURO_STATUS_RUNNING;
    if (in->history_count > 0 &&
        in->history[0].event_id != e->tracker.count + 1)
        return DURO_INVALID;
    if (e->tracker.count == 0) {
        int rc = begin_execution(e, in);
        if (rc != DURO_OK)
            return rc;
    }

    const duro_work_item *cancel = NULL;
    for (size_t i = 0; i < in->message_count && cancel == NULL; i++)
        if (in->messages[i].kind == DURO_WORK_CANCEL_INSTANCE)
            cancel = &in->messages[i];

    if (cancel != NULL || in->terminate_status != 0) {
        /* Decided without running code: everything outstanding in history
         * (and in this batch) is cancelled. */
        if (absorb_history(e) != DURO_OK)
            return DURO_INVALID;
        if (cancel != NULL) {
            for (const duro_work_item *m = in->messages; m < cancel; m++) {
                duro_event ev;
                if (message_event(e, m, &ev))
                    append_event(e, &ev);
            }
            duro_event req = {.kind = DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                              .reason = cancel->reason,
                              .requested_by = cancel->requested_by};
            append_event(e, &req);
            terminate(e, DURO_STATUS_CANCELLED, NULL,
                      str_or(cancel->reason, ""), DURO_CATEGORY_CANCELLED);
        } else {
            terminate(e, in->terminate_status, NULL, in->terminate_error,
                      in->terminate_category);
        }
        if (e->oom)
            return DURO_NOMEM;
        fill_meta(e);
        return DURO_OK;
    }

    if (e->replay_pos < e->replay_count)
        out->replayed = 1;
    if (!e->code_started) {
        if (e->cfg.fn == NULL)
            return DURO_INVALID;
        int rc =
            duro__fiber_create(e->cfg.stack_size, fiber_main, e, &e->fiber);
        if (rc != DURO_OK)
            return rc;
        e->code_started = 1;
        e->replay_segment = in->history_count > 0;
        resume_code(e);
    }
    while (!e->nondet && !e->oom && e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        char b[160];
        if (e->code_done) {
            describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration returned but history continues "
                               "with %s",
                               (unsigned long long)h->event_id, b);
            break;
        }
        if (duro__event_is_command(h->kind)) {
            describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration is waiting but history has %s",
                               (unsigned long long)h->event_id, b);
            break;
        }
        e->replay_pos++;
        consume_input(e, h);
        e->replay_segment = 1;
        resume_code(e);
    }
    e->replay_segment = 0;
    if (e->oom)
        return DURO_NOMEM;
    if (e->nondet) {
        if (absorb_history(e) != DURO_OK)
            return DURO_INVALID;
        out->nondeterminism = 1;
        terminate(e, DURO_STATUS_FAILED, NULL, e->result.error,
                  DURO_CATEGORY_CONFIGURATION);
        if (e->oom)
            return DURO_NOMEM;
        fill_meta(e);
        return DURO_OK;
    }
    /* A new execution takes events carried over from the previous one
     * first, then the rest of the batch in order. */
    int carried_first =
        in->start != NULL && in->start->kind == DURO_WORK_CONTINUE_AS_NEW;
    for (int pass = carried_first ? 0 : 1; pass < 2; pass++) {
        for (size_t i = 0; i < in->message_count && !e->oom; i++) {
            const duro_work_item *m = &in->messages[i];
            int carried = carried_first &&
                          m->kind == DURO_WORK_EXTERNAL_EVENT &&
                          (m->flags & DURO_EVENT_CARRIED);
            if (carried != (pass == 0))
                continue;
            if (e->code_done) {
                if (m->kind == DURO_WORK_EXTERNAL_EVENT)
                    note_leftover(e, m);
                continue;
            }
            duro_event ev, stored;
            if (!message_event(e, m, &ev))
                continue;
            if (!push_delta(e, &ev, &stored))
                break;
            consume_input(e, &stored);
            resume_code(e);
        }
    }
    if (e->oom)
        return DURO_NOMEM;
    if (e->code_done)
        finish_from_code(e);
    if (e->oom)
        return DURO_NOMEM;
    fill_meta(e);
    return DURO_OK;
}

/* ========================================================================
 * The orchestration-context API (on the engine's fiber)
 * ======================================================================== */

duro_task *duro_call_activity(duro_orch *o, const char *name, const char *input)
{
    if (!on_fiber(o))
        return &misuse_task;
    return schedule_activity(o, name, input, 1);
}

void duro_retry_policy_init(duro_retry_policy *p)
{
    memset(p, 0, sizeof(*p));
    p->version = 1;
    p->max_attempts = 3;
    p->backoff = DURO_BACKOFF_EXPONENTIAL;
    p->initial_delay_ms = 1000;
    p->coefficient = 2.0;
    p->max_delay_ms = 60000;
}

duro_task *duro_call_activity_with_retry(duro_orch *o, const char *name,
                                         const char *input,
                                         const duro_retry_policy *policy)
{
    if (!on_fiber(o))
        return &misuse_task;
    if (policy == NULL || policy->max_attempts < 1 ||
        policy->initial_delay_ms < 0 || policy->attempt_timeout_ms < 0 ||
        policy->total_timeout_ms < 0 ||
        (policy->backoff == DURO_BACKOFF_EXPONENTIAL &&
         !(policy->coefficient >= 1.0)))
        return failed_task(o, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                           "invalid retry policy (max_attempts >= 1, "
                           "delays and timeouts >= 0, exponential "
                           "coefficient >= 1)");
    struct duro_task *rt = new_task(o, TASK_RETRY);
    if (rt == &misuse_task)
        return rt;
    retry_state *r = duro_arena_alloc(o->arena, sizeof(*r));
    if (r == NULL) {
        o->oom = 1;
        return &misuse_task;
    }
    rt->retry = r;
    r->policy = *policy;
    rt->name = engine_strdup(o, name);
    r->input = engine_strdup(o, input);
    if (policy->total_timeout_ms > 0)
        r->deadline = o->now + policy->total_timeout_ms;
    retry_start_attempt(o, rt);
    return rt;
}

duro_task *duro_timer(duro_orch *o, int64_t delay_ms)
{
    if (!on_fiber(o))
        return &misuse_task;
    return schedule_timer(o, delay_ms);
}

duro_task *duro_wait_event(duro_orch *o, const char *name)
{
    if (!on_fiber(o))
        return &misuse_task;
    if (name == NULL || name[0] == '\0')
        return failed_task(o, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                           "event name is empty");
    struct duro_task *t = new_task(o, TASK_EVENT);
    if (t == &misuse_task)
        return t;
    t->name = engine_strdup(o, name);
    duro_event ev = {.kind = DURO_EVENT_EVENT_SUBSCRIBED, .name = t->name};
    issue_task(o, t, &ev);
    if (t->event_id == 0)
        return t;
    for (raised_event *r = o->raised_head; r != NULL; r = r->next) {
        if (!r->consumed && str_eq(r->name, name)) {
            r->consumed = 1;
            finish_task(o, t, TASK_SUCCEEDED, r->payload, NULL, 0);
            return t;
        }
    }
    if (o->waits_tail != NULL)
        o->waits_tail->next_wait = t;
    else
        o->waits_head = t;
    o->waits_tail = t;
    return t;
}

static struct duro_task *start_child(duro_orch *o, const char *name,
                                     const char *version,
                                     const char *instance_id, const char *input,
                                     int detached)
{
    if (name == NULL || name[0] == '\0')
        return failed_task(o, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                           "orchestration name is empty");
    if (instance_id != NULL && instance_id[0] == '\0')
        return failed_task(o, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                           "child instance id is empty");
    if (strlen(name) > 1024 ||
        (instance_id != NULL && strlen(instance_id) > 1024))
        return failed_task(o, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
                           "child name or id is longer than 1024 bytes");
    if (over_limit(o, input))
        return failed_task(o, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
                           "child orchestration input over the payload "
                           "limit");
    struct duro_task *t = new_task(o, TASK_CHILD);
    if (t == &misuse_task)
        return t;
    t->name = engine_strdup(o, name);
    t->child_instance =
        instance_id != NULL
            ? engine_strdup(o, instance_id)
            : engine_sprintf(o, "%s:%llu:%llu", o->instance_id,
                             (unsigned long long)o->execution_id,
                             (unsigned long long)(o->tracker.count + 1));
    duro_event ev = {.kind = DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED,
                     .name = t->name,
                     .version = version,
                     .ref_instance = t->child_instance,
                     .payload = input,
                     .flags = detached ? DURO_START_DETACHED : 0};
    if (o->replay_pos >= o->replay_count) {
        ev.version = turn_strdup(o, version);
        ev.payload = turn_strdup(o, input);
    }
    if (issue_task(o, t, &ev)) {
        uint64_t id = t->event_id;
        duro_outbound *ob = push_outbound(o);
        if (ob != NULL) {
            ob->item.kind = DURO_WORK_START;
            ob->item.instance_id = t->child_instance;
            ob->item.name = t->name;
            ob->item.version = ev.version;
            ob->item.payload = ev.payload;
            if (detached) {
                ob->item.flags = DURO_START_DETACHED;
            } else {
                ob->item.parent_instance = o->instance_id;
                ob->item.parent_execution = o->execution_id;
                ob->item.parent_event_id = id;
            }
        }
    }
    if (detached && t->event_id != 0) {
        t->state = TASK_SUCCEEDED;
        t->done_seq = ++o->seq;
    }
    return t;
}

duro_task *duro_call_sub_orchestration(duro_orch *o, const char *name,
                                       const char *version,
                                       const char *instance_id,
                                       const char *input)
{
    if (!on_fiber(o))
        return &misuse_task;
    return start_child(o, name, version, instance_id, input, 0);
}

int duro_start_orchestration(duro_orch *o, const char *name,
                             const char *version, const char *instance_id,
                             const char *input)
{
    if (!on_fiber(o))
        return duro__fail(DURO_MISUSE, "%s", misuse_task.error);
    struct duro_task *t = start_child(o, name, version, instance_id, input, 1);
    if (t->state == TASK_FAILED)
        return duro__fail(t->rc, "%s", str_or(t->error, "failed"));
    return DURO_OK;
}

int duro_await(duro_orch *o, duro_task *t)
{
    if (t == NULL)
        return duro__fail(DURO_INVALID, "task is NULL");
    if (t->kind == TASK_STATIC)
        return t->rc;
    if (!on_fiber(o))
        return duro__fail(DURO_MISUSE, "%s", misuse_task.error);
    while (t->state == TASK_PENDING)
        wait_once(o);
    return t->rc;
}

/* The done task that completed first in history order; NULL if none. */
static struct duro_task *first_done(duro_task *const *tasks, size_t n)
{
    struct duro_task *best = NULL;
    for (size_t i = 0; i < n; i++) {
        struct duro_task *t = tasks[i];
        if (t == NULL || t->state == TASK_PENDING)
            continue;
        if (best == NULL || t->done_seq < best->done_seq)
            best = t;
    }
    return best;
}

static duro_task *wait_first(duro_orch *o, duro_task *const *tasks, size_t n,
                             int cancel_losers)
{
    if (n == 0 || tasks == NULL)
        return NULL;
    if (!on_fiber(o))
        return &misuse_task;
    for (;;) {
        struct duro_task *winner = first_done(tasks, n);
        if (winner != NULL) {
            if (cancel_losers)
                for (size_t i = 0; i < n; i++)
                    if (tasks[i] != NULL && tasks[i] != winner)
                        cancel_task(o, tasks[i], DURO_REASON_SELECT_LOSER);
            return winner;
        }
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= tasks[i] != NULL;
        if (!any)
            return NULL;
        wait_once(o);
    }
}

duro_task *duro_select_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return wait_first(o, tasks, n, 1);
}

duro_task *duro_wait_any_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return wait_first(o, tasks, n, 0);
}

int duro_join_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    if (!on_fiber(o))
        return duro__fail(DURO_MISUSE, "%s", misuse_task.error);
    for (;;) {
        int pending = 0;
        for (size_t i = 0; i < n; i++)
            if (tasks[i] != NULL && tasks[i]->state == TASK_PENDING)
                pending = 1;
        if (!pending)
            break;
        wait_once(o);
    }
    for (size_t i = 0; i < n; i++) {
        if (tasks[i] == NULL)
            return DURO_INVALID;
        if (tasks[i]->rc != DURO_OK)
            return tasks[i]->rc;
    }
    return DURO_OK;
}

void duro_cancel_task(duro_orch *o, duro_task *t)
{
    if (!on_fiber(o) || t == NULL)
        return;
    cancel_task(o, t, DURO_REASON_TASK_CANCELLED);
}

int duro_task_done(const duro_task *t)
{
    return t != NULL && t->state != TASK_PENDING;
}

int duro_task_failed(const duro_task *t)
{
    return t != NULL && (t->state == TASK_FAILED || t->state == TASK_CANCELLED);
}

const char *duro_task_output(const duro_task *t)
{
    return t != NULL && t->state == TASK_SUCCEEDED ? t->output : NULL;
}

const char *duro_task_error(const duro_task *t)
{
    return t != NULL && (t->state == TASK_FAILED || t->state == TASK_CANCELLED)
               ? t->error
               : NULL;
}

int duro_task_category(const duro_task *t)
{
    return duro_task_failed(t) ? t->category : DURO_CATEGORY_NONE;
}

int duro_continue_as_new(duro_orch *o, duro_result *out, const char *input)
{
    if (!on_fiber(o))
        return duro__fail(DURO_MISUSE, "%s", misuse_task.error);
    return duro__result_set_continue(out, input);
}

int64_t duro_now(duro_orch *o)
{
    if (!on_fiber(o))
        return 0;
    return o->now;
}

/* splitmix64 finalizer */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

const char *duro_new_guid(duro_orch *o)
{
    if (!on_fiber(o))
        return NULL;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the instance id */
    for (const char *p = o->instance_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    uint64_t n = ++o->guid_counter;
    uint64_t a = mix64(h ^ mix64(o->execution_id + 0x9E3779B97F4A7C15ull * n));
    uint64_t b = mix64(a ^ (n * 0xD1B54A32D192ED03ull) ^ h);
    /* RFC 9562 version 8 (custom), variant 10 */
    a = (a & ~0xF000ull) | 0x8000ull;
    b = (b & ~(3ull << 62)) | (2ull << 62);
    return engine_sprintf(
        o, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(a >> 32),
        (unsigned long long)((a >> 16) & 0xFFFF),
        (unsigned long long)(a & 0xFFFF), (unsigned long long)(b >> 48),
        (unsigned long long)(b & 0xFFFFFFFFFFFFull));
}

void duro_set_custom_status(duro_orch *o, const char *status)
{
    if (!on_fiber(o))
        return;
    if (over_limit(o, status))
        status = "(custom status over the payload limit)";
    o->custom_status = engine_strdup(o, status);
    o->custom_status_dirty = 1;
}

int duro_is_replaying(duro_orch *o)
{
    if (!on_fiber(o))
        return 0;
    return o->replay_segment || o->replay_pos < o->replay_count;
}

void duro_log(duro_orch *o, int level, const char *fmt, ...)
{
    if (!on_fiber(o) || duro_is_replaying(o) || o->cfg.logger == NULL ||
        level < o->cfg.logger->level)
        return;
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    duro__log(o->cfg.logger, level, "[%s#%llu] %s", o->instance_id,
              (unsigned long long)o->execution_id, buf);
}

void *duro_orch_alloc(duro_orch *o, size_t size)
{
    if (!on_fiber(o))
        return NULL;
    void *p = duro_arena_alloc(o->arena, size);
    if (p == NULL)
        o->oom = 1;
    return p;
}

const char *duro_sprintf(duro_orch *o, const char *fmt, ...)
{
    if (!on_fiber(o))
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    const char *s = engine_vsprintf(o, fmt, ap);
    va_end(ap);
    return s;
}

const char *duro_instance_id(duro_orch *o)
{
    return on_fiber(o) ? o->instance_id : NULL;
}

uint64_t duro_execution_id(duro_orch *o)
{
    return on_fiber(o) ? o->execution_id : 0;
}

const char *duro_input(duro_orch *o)
{
    return on_fiber(o) ? o->input : NULL;
}

void *duro_orch_user(duro_orch *o)
{
    return on_fiber(o) ? o->cfg.user : NULL;
}
