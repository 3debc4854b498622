/* engine.c - the replay engine: runs one execution of an orchestration on a
 * fiber (C code) or through a driver's steps on the caller's stack (driven
 * code, duro_driver), matching every command the code issues against
 * recorded history,
 * feeding recorded and new inputs to the code one at a time in history order,
 * and deciding what each turn appends, enqueues and cancels. Owns the engine
 * (its arena, tracker, fiber) and its tasks; the public context API is in
 * orch_api.c, retry composites in retry.c. Pure: no threads, no I/O; one
 * thread at a time drives an engine.
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

#include "base/tz.h"
#include "core/engine_internal.h"

struct duro_task duro__misuse_task = {
    .kind = TASK_STATIC,
    .state = TASK_FAILED,
    .rc = DURO_MISUSE,
    .error = "duro API misuse: orchestration functions must be called on "
             "the orchestration's own fiber while it runs",
    .category = DURO_CATEGORY_CONFIGURATION,
};

struct duro_task duro__foreign_task = {
    .kind = TASK_STATIC,
    .state = TASK_FAILED,
    .rc = DURO_MISUSE,
    .error = "duro API misuse: the task belongs to another orchestration "
             "context (another instance, or an engine that no longer "
             "exists); a task is only valid in the orchestration function "
             "that created it",
    .category = DURO_CATEGORY_CONFIGURATION,
};

/* ------------------------------------------------------------------------
 * small helpers */

const char *duro__engine_strdup(duro_orch *e, const char *s)
{
    if (s == NULL)
        return NULL;
    const char *d = duro_arena_strdup(e->arena, s);
    if (d == NULL)
        e->oom = 1;
    return d;
}

const char *duro__engine_turn_strdup(duro_orch *e, const char *s)
{
    if (s == NULL)
        return NULL;
    const char *d = duro_arena_strdup(e->turn->arena, s);
    if (d == NULL)
        e->oom = 1;
    return d;
}

const char *duro__engine_vsprintf(duro_orch *e, const char *fmt, va_list ap)
{
    char *tmp = duro__vsprintf(fmt, ap);
    if (tmp == NULL) {
        e->oom = 1;
        return NULL;
    }
    const char *s = duro__engine_strdup(e, tmp);
    duro__free(tmp);
    return s;
}

const char *duro__engine_sprintf(duro_orch *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *s = duro__engine_vsprintf(e, fmt, ap);
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
        snprintf(buf, size, "\"%.*s...\"", (int)duro__utf8_cut(s, size - 6), s);
}

/* "ActivityScheduled 'Name'" and similar, for nondeterminism messages. */
void duro__engine_describe(char *buf, size_t size, const duro_event *ev)
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
    case DURO_EVENT_PATCH_MARKER:
        snprintf(buf, size, "%s '%s'", kind, str_or(ev->name, ""));
        break;
    case DURO_EVENT_TIMER_CREATED:
        snprintf(buf, size, "%s (%sfires at %lld)", kind,
                 (ev->flags & DURO_TIMER_CLEANUP_DEADLINE)
                     ? "cleanup deadline, "
                     : "",
                 (long long)ev->fire_at_ms);
        break;
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        snprintf(buf, size, "%s of event %llu (%s)", kind,
                 (unsigned long long)ev->source_event_id,
                 str_or(ev->reason, ""));
        break;
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_CONTINUED_AS_NEW:
        preview(p, sizeof(p), ev->payload);
        snprintf(buf, size, "%s (%s %s)", kind,
                 ev->kind == DURO_EVENT_CONTINUED_AS_NEW ? "input" : "output",
                 p);
        break;
    case DURO_EVENT_ORCHESTRATION_FAILED:
        preview(p, sizeof(p), ev->error);
        snprintf(buf, size, "%s (%s, error %s)", kind,
                 duro_category_name(ev->category), p);
        break;
    default:
        snprintf(buf, size, "%s", kind);
        break;
    }
}

int duro__engine_same_command(const duro_event *h, const duro_event *w)
{
    if (h->kind != w->kind)
        return 0;
    switch (h->kind) {
    case DURO_EVENT_ACTIVITY_SCHEDULED:
        return str_eq(h->name, w->name) && str_eq(h->payload, w->payload) &&
               h->attempt == w->attempt;
    case DURO_EVENT_TIMER_CREATED:
        return h->fire_at_ms == w->fire_at_ms && h->flags == w->flags;
    case DURO_EVENT_EVENT_SUBSCRIBED:
    case DURO_EVENT_PATCH_MARKER:
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
    const char *msg = duro__engine_vsprintf(e, fmt, ap);
    va_end(ap);
    e->nondet = 1;
    e->result.kind = DURO__RESULT_FAILED;
    duro__free(e->result.error);
    e->result.error = duro__strdup(msg ? msg : "nondeterminism");
    if (e->result.error != NULL) /* its parts were cut to buffers */
        duro__utf8_scrub(e->result.error);
    e->result.category = DURO_CATEGORY_CONFIGURATION;
}

void duro__engine_bad_replay(duro_orch *e, const char *why)
{
    if (e->replay_pos >= e->replay_count)
        return;
    set_nondeterminism(e,
                       "nondeterminism at event %llu: before reaching it the "
                       "code failed: %s",
                       (unsigned long long)e->replay[e->replay_pos].event_id,
                       why);
}

/* What a nondeterminism message adds when history holds a patch marker at
 * position pos where the code had just been told its own change id was
 * not recorded: both ids, so the reader sees the two changes. "" else. */
static const char *patch_note(duro_orch *e, size_t pos)
{
    const duro_event *h = &e->replay[pos];
    if (h->kind != DURO_EVENT_PATCH_MARKER || e->patch_declined == NULL ||
        e->patch_declined_pos != pos)
        return "";
    const char *note = duro__engine_sprintf(
        e, " (at this point the code asked for patch '%s', not '%s')",
        e->patch_declined, str_or(h->name, ""));
    return note != NULL ? note : "";
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

/* Passes the ExecutionReset events at the replay position (provider
 * version 13): a reset cut history there, after a turn boundary, and the
 * code goes on from it - waiting for an input, or, when the kept events
 * end with an input the code never answered (one a turn decided without
 * code recorded), answering it now. So the event is transparent wherever
 * the code stands: it is applied to the tracker and passed before any
 * command is matched, before an input is taken and before the code's
 * return is checked against history. */
static void pass_resets(duro_orch *e)
{
    while (!e->oom && e->replay_pos < e->replay_count &&
           e->replay[e->replay_pos].kind == DURO_EVENT_EXECUTION_RESET) {
        const duro_event *h = &e->replay[e->replay_pos];
        if (duro__tracker_apply(&e->tracker, h, e->arena) != DURO_OK) {
            e->oom = 1;
            return;
        }
        e->now = h->timestamp_ms;
        e->replay_pos++;
    }
}

/* Issues a command: during replay it must equal the next history event;
 * live it is appended. Returns the event id (0 on nondeterminism or OOM) and
 * sets *live when it was appended, so the caller enqueues its side effects
 * only once. */
static uint64_t issue(duro_orch *e, const duro_event *want, int *live)
{
    *live = 0;
    if (e->nondet || e->oom || e->bad_text != NULL)
        return 0;
    pass_resets(e);
    if (e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        char a[160], b[160];
        if (!duro__event_is_command(h->kind)) {
            duro__engine_describe(a, sizeof(a), want);
            duro__engine_describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration issued %s but history has %s%s",
                               (unsigned long long)h->event_id, a, b,
                               patch_note(e, e->replay_pos));
            return 0;
        }
        if (!duro__engine_same_command(h, want)) {
            duro__engine_describe(a, sizeof(a), want);
            duro__engine_describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration issued %s but history has %s%s",
                               (unsigned long long)h->event_id, a, b,
                               patch_note(e, e->replay_pos));
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
int duro__engine_issue_task(duro_orch *e, struct duro_task *t,
                            const duro_event *ev)
{
    int live = 0;
    uint64_t id = issue(e, ev, &live);
    if (id == 0)
        return 0;
    t->event_id = id;
    e->tracker.slots[id].task = t;
    return live;
}

int duro__engine_patch(duro_orch *e, const char *id, int deprecated)
{
    for (const patch_answer *p = e->patches; p != NULL; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p->patched;
    if (e->nondet || e->oom || e->bad_text != NULL)
        return 0;
    int live = 0, patched;
    const char *own = duro__engine_strdup(e, id);
    if (own == NULL)
        return 0;
    pass_resets(e);
    if (e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        patched = h->kind == DURO_EVENT_PATCH_MARKER && str_eq(h->name, id);
        if (patched && issue(e, h, &live) == 0)
            return 0;
        if (!patched) {
            /* Recorded before the change: the old path. */
            e->patch_declined = own;
            e->patch_declined_pos = e->replay_pos;
            if (deprecated)
                return 0;
        }
    } else if (deprecated) {
        return 0; /* no old instance remains: nothing to record */
    } else {
        duro_event ev = {.kind = DURO_EVENT_PATCH_MARKER, .name = own};
        patched = issue(e, &ev, &live) != 0;
        if (!patched)
            return 0;
    }
    patch_answer *p = duro_arena_alloc(e->arena, sizeof(*p));
    if (p == NULL) {
        e->oom = 1;
        return 0;
    }
    p->id = own;
    p->patched = patched;
    p->next = e->patches;
    e->patches = p;
    return patched;
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

duro_outbound *duro__engine_push_outbound(duro_orch *e)
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

struct duro_task *duro__task_new(duro_orch *e, int kind)
{
    task_chunk *c = e->tasks;
    if (c == NULL || c->used == c->cap) {
        size_t cap = c == NULL ? 16 : DURO__MIN(c->cap * 2, (size_t)4096);
        task_chunk *fresh = duro_arena_alloc(
            e->arena, sizeof(task_chunk) + cap * sizeof(struct duro_task));
        if (fresh == NULL) {
            e->oom = 1;
            return &duro__misuse_task;
        }
        fresh->cap = cap;
        fresh->next = c;
        e->tasks = c = fresh;
    }
    struct duro_task *t = &c->tasks[c->used++];
    t->kind = (uint8_t)kind;
    t->state = TASK_PENDING;
    return t;
}

struct duro_task *duro__task_new_failed(duro_orch *e, int rc, int category,
                                        const char *error)
{
    struct duro_task *t = duro__task_new(e, TASK_ACTIVITY);
    if (t == &duro__misuse_task)
        return t;
    t->state = TASK_FAILED;
    t->rc = rc;
    t->category = category;
    t->error = error;
    return t;
}

void duro__task_finish(duro_orch *e, struct duro_task *t, int state,
                       const char *output, const char *error, int category)
{
    if (t == NULL || t->state != TASK_PENDING || t->kind == TASK_STATIC)
        return;
    t->state = (uint8_t)state;
    t->output = duro__engine_strdup(e, output);
    t->error = duro__engine_strdup(e, error);
    t->category = state == TASK_SUCCEEDED ? DURO_CATEGORY_NONE : category;
    t->rc = state == TASK_SUCCEEDED   ? DURO_OK
            : state == TASK_CANCELLED ? DURO_CANCELLED
                                      : DURO_FAILED;
    t->done_seq = ++e->seq;
    if (t->parent != NULL)
        duro__retry_on_subtask(e, t->parent, t);
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
void duro__task_cancel(duro_orch *e, struct duro_task *t, const char *reason)
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
            duro_outbound *o = duro__engine_push_outbound(e);
            if (o == NULL)
                return;
            o->item.kind = DURO_WORK_CANCEL_INSTANCE;
            o->item.instance_id = t->child_instance;
            o->item.reason = reason;
            o->item.requested_by =
                duro__engine_sprintf(e, "parent:%s", e->instance_id);
        }
        break;
    }
    case TASK_EVENT:
        remove_wait(e, t);
        break;
    case TASK_RETRY: {
        retry_state *r = t->retry;
        duro__task_cancel(e, r->activity, reason);
        duro__task_cancel(e, r->timeout, reason);
        duro__task_cancel(e, r->backoff, reason);
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
    const char *why = str_or(reason, "");
    snprintf(buf, sizeof(buf), "cancelled: %.*s",
             (int)duro__utf8_cut(why, sizeof(buf) - 12), why);
    duro__task_finish(e, t, TASK_CANCELLED, NULL, buf, DURO_CATEGORY_CANCELLED);
    t->parent = parent;
}

/* ------------------------------------------------------------------------
 * issuing the primitive tasks (used by the API and by retry composites) */

int duro__engine_over_limit(duro_orch *e, const char *s)
{
    return s != NULL && e->cfg.max_payload > 0 &&
           strlen(s) > e->cfg.max_payload;
}

const char *duro__engine_bad_text(duro_orch *e, const char *what,
                                  const char *name, const char *field,
                                  const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s), at = duro__utf8_check(s, n);
    if (at == n)
        return NULL;
    char problem[64];
    duro__utf8_problem(s, at, problem, sizeof(problem));
    const char *why =
        name != NULL
            ? duro__engine_sprintf(e, "%s '%s' %s %s", what, name, field,
                                   problem)
            : duro__engine_sprintf(e, "%s %s %s", what, field, problem);
    return why != NULL ? why : "text is not valid UTF-8";
}

int duro__engine_recorded(const duro_orch *e, const duro_event *want)
{
    if (e->replay_pos >= e->replay_count)
        return 0;
    const duro_event *h = &e->replay[e->replay_pos];
    return duro__event_is_command(h->kind) &&
           duro__engine_same_command(h, want);
}

struct duro_task *duro__engine_refuse_text(duro_orch *e, const char *why)
{
    duro__fail(DURO_INVALID, "%s", why);
    return duro__task_new_failed(e, DURO_INVALID, DURO_CATEGORY_CONFIGURATION,
                                 why);
}

void duro__engine_fail_text(duro_orch *e, const char *why)
{
    if (e->bad_text == NULL)
        e->bad_text = why;
    duro__fail(DURO_INVALID, "%s", why);
}

struct duro_task *duro__engine_schedule_activity(duro_orch *e, const char *name,
                                                 const char *input,
                                                 uint32_t attempt)
{
    if (name == NULL || name[0] == '\0')
        return duro__task_new_failed(e, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "activity name is empty");
    if (strlen(name) > 1024)
        return duro__task_new_failed(e, DURO_TOO_LARGE,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "activity name is longer than 1024 bytes");
    const char *bad = duro__engine_bad_text(e, "activity", NULL, "name", name);
    if (bad == NULL)
        bad = duro__engine_bad_text(e, "activity", name, "input", input);
    duro_event want = {.kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                       .name = name,
                       .payload = input,
                       .attempt = attempt};
    if (bad != NULL && !duro__engine_recorded(e, &want))
        return duro__engine_refuse_text(e, bad);
    if (duro__engine_over_limit(e, input))
        return duro__task_new_failed(
            e, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
            duro__engine_sprintf(
                e,
                "input of activity '%s' is %zu bytes, over the "
                "limit of %zu",
                name, strlen(input), e->cfg.max_payload));
    struct duro_task *t = duro__task_new(e, TASK_ACTIVITY);
    if (t == &duro__misuse_task)
        return t;
    t->name = duro__engine_strdup(e, name);
    duro_event ev = {.kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                     .name = name,
                     .payload = input,
                     .attempt = attempt};
    if (e->replay_pos >= e->replay_count) {
        /* live: the event's strings must outlive the caller's */
        ev.name = t->name;
        ev.payload = duro__engine_turn_strdup(e, input);
    }
    /* Not live: replayed, or the engine stopped (the task stays pending
     * and the code is not resumed). */
    if (duro__engine_issue_task(e, t, &ev)) {
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

static struct duro_task *schedule_timer_at(duro_orch *e, int64_t fire_at_ms,
                                           uint32_t flags)
{
    struct duro_task *t = duro__task_new(e, TASK_TIMER);
    if (t == &duro__misuse_task)
        return t;
    duro_event ev = {.kind = DURO_EVENT_TIMER_CREATED,
                     .fire_at_ms = fire_at_ms,
                     .flags = flags};
    if (duro__engine_issue_task(e, t, &ev)) {
        duro_outbound *o = duro__engine_push_outbound(e);
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

struct duro_task *duro__engine_schedule_timer(duro_orch *e, int64_t delay_ms)
{
    return schedule_timer_at(e, duro__add_ms(e->now, DURO__MAX(delay_ms, 0)),
                             0);
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
    r->name = duro__engine_strdup(e, name);
    r->payload = duro__engine_strdup(e, payload);
    if (e->raised_tail != NULL)
        e->raised_tail->next = r;
    else
        e->raised_head = r;
    e->raised_tail = r;
    for (struct duro_task *w = e->waits_head; w != NULL; w = w->next_wait) {
        if (str_eq(w->name, name)) {
            r->consumed = 1;
            remove_wait(e, w);
            duro__task_finish(e, w, TASK_SUCCEEDED, payload, NULL, 0);
            return;
        }
    }
}

/* Hands an input event the tracker has applied to the code's tasks: an
 * event to the waits, a completion (cls DURO__MSG_APPLY) to its task. */
static void deliver_input(duro_orch *e, const duro_event *ev, int cls)
{
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
        duro__task_finish(e, t, TASK_SUCCEEDED, ev->payload, NULL, 0);
        break;
    case DURO_EVENT_ACTIVITY_FAILED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
        duro__task_finish(e, t, TASK_FAILED, NULL, str_or(ev->error, "failed"),
                          ev->category ? ev->category
                                       : DURO_CATEGORY_APPLICATION);
        break;
    default:
        break;
    }
    if (t != NULL && t == e->deadline && t->state != TASK_PENDING)
        e->deadline_passed = 1;
}

/* Keeps an input recorded while suspended for the resume. */
static void hold_input(duro_orch *e, const duro_event *ev, int cls)
{
    held_input *h = duro_arena_alloc(e->arena, sizeof(*h));
    if (h == NULL) {
        e->oom = 1;
        return;
    }
    h->ev = *ev;
    h->ev.name = duro__engine_strdup(e, ev->name);
    h->ev.payload = duro__engine_strdup(e, ev->payload);
    h->ev.error = duro__engine_strdup(e, ev->error);
    h->cls = cls;
    if (e->held_tail != NULL)
        e->held_tail->next = h;
    else
        e->held_head = h;
    e->held_tail = h;
}

/* Applies an input event (recorded or new) to the tracker, then hands it
 * to the code, or holds it while the instance is suspended. Returns 1
 * when it was handed over (the caller resumes the code). */
static int take_input(duro_orch *e, const duro_event *ev)
{
    int cls = duro__tracker_classify(&e->tracker, ev);
    if (duro__tracker_apply(&e->tracker, ev, e->arena) != DURO_OK) {
        e->oom = 1;
        return 0;
    }
    e->now = ev->timestamp_ms;
    if (e->suspended) {
        hold_input(e, ev, cls);
        return 0;
    }
    deliver_input(e, ev, cls);
    return 1;
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
    if (ev->kind == DURO_EVENT_ACTIVITY_COMPLETED ||
        ev->kind == DURO_EVENT_ACTIVITY_FAILED) {
        /* when the worker ran it (integers: nothing to own); replay never
         * compares them */
        ev->started_ms = m->started_ms;
        ev->finished_ms = m->finished_ms;
    }
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

static int driven(const duro_orch *e)
{
    return e->cfg.driver.step != NULL;
}

/* The engine has code to run (a C function or a driver); without, its
 * turns are decided from history alone. */
static int has_code(const duro_orch *e)
{
    return e->cfg.fn != NULL || driven(e);
}

static int can_run(const duro_orch *e)
{
    return e->code_started && !e->code_done && !e->nondet && !e->oom &&
           !e->suspended && !e->deadline_passed && !e->terminal &&
           e->bad_text == NULL && !e->driver_error;
}

/* A driver's start or step failed (rc, a duro code; `what` names the
 * callback): the turn is unusable, and the code is not run again. */
static void driver_failed(duro_orch *e, int rc, const char *what)
{
    e->driver_error = rc;
    e->failure = duro__engine_sprintf(
        e, "the driver's %s failed: it returned %d (%s)", what, rc,
        rc > 0 ? duro_errname(rc) : "not a duro code");
}

/* Runs a driver callback as the context's code: the context functions
 * accept `e` on this thread until it returns. */
static void enter_step(duro_orch *e, duro_orch **outer)
{
    *outer = running_get();
    running_set(e);
    e->in_step = 1;
}

static void leave_step(duro_orch *e, duro_orch *outer)
{
    e->in_step = 0;
    running_set(outer);
}

static void resume_code(duro_orch *e)
{
    if (!can_run(e))
        return;
    e->turn->ran_code = 1;
    duro_orch *outer;
    if (driven(e)) {
        enter_step(e, &outer);
        int rc = e->cfg.driver.step(e, e->driver_state, &e->result);
        leave_step(e, outer);
        if (rc == DURO_STEP_DONE) {
            duro__result_finish(&e->result, DURO_OK);
            e->code_done = 1;
        } else if (rc != DURO_STEP_WAITING) {
            driver_failed(e, rc, "step");
        }
        return;
    }
    outer = running_get();
    running_set(e);
    duro__fiber_resume(e->fiber);
    running_set(outer);
    if (duro__fiber_done(e->fiber))
        e->code_done = 1;
}

/* Starts the code - on a fiber of its own, or by the driver's start - and
 * runs it until it first waits (or returns). DURO_ERROR when the driver's
 * start failed. */
static int start_code(duro_orch *e)
{
    if (driven(e)) {
        e->code_started = 1;
        e->turn->ran_code = 1;
        duro_orch *outer;
        void *state = NULL;
        enter_step(e, &outer);
        int rc = e->cfg.driver.start(e, e->input, e->cfg.user, &state);
        leave_step(e, outer);
        if (rc != DURO_OK) {
            /* no state was made: nothing to destroy */
            driver_failed(e, rc, "start");
            return DURO_ERROR;
        }
        e->driver_state = state;
        e->driver_live = 1;
        resume_code(e);
        return DURO_OK;
    }
    if (e->cfg.fn == NULL)
        return DURO_INVALID;
    int rc = duro__fiber_create(e->cfg.stack_size, fiber_main, e, &e->fiber);
    if (rc != DURO_OK)
        return rc;
    e->code_started = 1;
    resume_code(e);
    return DURO_OK;
}

/* Called by API functions: 1 when called correctly on the engine's fiber,
 * or inside its driver's start or step on this thread. */
int duro__engine_on_fiber(duro_orch *o)
{
    if (o == NULL || o != running_get() || o->code_done)
        return 0;
    return driven(o) ? o->in_step : duro__fiber_current() == o->fiber;
}

int duro__engine_in_step(const duro_orch *o)
{
    return o != NULL && driven(o) && o->in_step;
}

int duro__engine_in_code(void)
{
    return duro__fiber_current() != NULL || running_get() != NULL;
}

const char *duro__engine_failure(const duro_orch *e)
{
    return e->driver_error ? e->failure : NULL;
}

duro_orch *duro__engine_current(void)
{
    duro_orch *e = running_get();
    return duro__engine_on_fiber(e) ? e : NULL;
}

int duro__engine_owns_task(const duro_orch *e, const struct duro_task *t)
{
    /* Integer comparisons: relational operators on pointers into different
     * objects are undefined. */
    uintptr_t p = (uintptr_t)t;
    for (const task_chunk *c = e->tasks; c != NULL; c = c->next) {
        uintptr_t base = (uintptr_t)c->tasks;
        if (p >= base && p < base + c->used * sizeof(struct duro_task))
            return (p - base) % sizeof(struct duro_task) == 0;
    }
    return 0;
}

/* Suspends the code until the engine has consumed another input. */
void duro__engine_wait(duro_orch *o)
{
    (void)o;
    duro__fiber_yield();
}

/* ------------------------------------------------------------------------
 * observed cancellation and suspension */

static void note_cancel(duro_orch *e, const char *reason, const char *by)
{
    e->cancel_delivered = 1;
    e->cancel_reason = duro__engine_strdup(e, reason);
    e->cancel_by = duro__engine_strdup(e, by);
    e->cancel_at = e->now;
}

/* Delivers a cancel to code that observes it: every outstanding activity
 * and child is cancelled durably (in event order, each with its retry
 * composite), timers and event waits are dropped, so every pending await
 * reports DURO_CANCELLED; then the cleanup deadline starts (recorded as a
 * flagged TimerCreated, taken from history on replay so a changed option
 * cannot make a recorded cleanup nondeterministic). */
static void observe_cancel(duro_orch *e, const char *reason, const char *by)
{
    note_cancel(e, reason, by);
    for (uint64_t id = 1; id <= e->tracker.count && !e->oom && !e->nondet;
         id++) {
        duro__slot s = e->tracker.slots[id];
        if (s.state != DURO__SLOT_PENDING || s.task == NULL ||
            (s.kind != DURO__SLOT_ACTIVITY && s.kind != DURO__SLOT_CHILD))
            continue;
        struct duro_task *top = s.task;
        while (top->parent != NULL)
            top = top->parent;
        duro__task_cancel(e, top, DURO_REASON_INSTANCE_CANCELLED);
    }
    for (task_chunk *c = e->tasks; c != NULL && !e->oom && !e->nondet;
         c = c->next)
        for (size_t i = 0; i < c->used; i++) {
            struct duro_task *t = &c->tasks[i];
            if (t->state == TASK_PENDING && t->parent == NULL)
                duro__task_cancel(e, t, DURO_REASON_INSTANCE_CANCELLED);
        }
    if (e->oom || e->nondet || e->cfg.cleanup_timeout_ms <= 0)
        return;
    int64_t fire_at = duro__add_ms(e->now, e->cfg.cleanup_timeout_ms);
    pass_resets(e);
    if (e->replay_pos < e->replay_count) {
        const duro_event *h = &e->replay[e->replay_pos];
        if (h->kind == DURO_EVENT_TIMER_CREATED &&
            (h->flags & DURO_TIMER_CLEANUP_DEADLINE))
            fire_at = h->fire_at_ms;
    }
    e->deadline = schedule_timer_at(e, fire_at, DURO_TIMER_CLEANUP_DEADLINE);
}

/* Hands the inputs held while suspended to the code, in the order they
 * arrived, resuming it after each. Once the code has returned, events not
 * consumed stay with the execution (carried over by continue-as-new). */
static void drain_held(duro_orch *e)
{
    while (e->held_head != NULL && !e->oom && !e->nondet && !e->suspended) {
        held_input *h = e->held_head;
        e->held_head = h->next;
        if (e->held_head == NULL)
            e->held_tail = NULL;
        if (e->code_done || e->deadline_passed) {
            if (h->ev.kind == DURO_EVENT_EVENT_RAISED)
                deliver_raised(e, h->ev.name, h->ev.payload);
            continue;
        }
        deliver_input(e, &h->ev, h->cls);
        resume_code(e);
    }
}

/* The registration's deadline (cfg.timeout_ms), from the turn whose code
 * starts execution 1 live: a DEADLINE message like the one a start with a
 * deadline enqueues (execution 0: it spans continue-as-new). Never
 * replayed: the message is queued, not recorded. A store keeps an
 * instance's first deadline only, so a start's own wins. */
static int send_registered_deadline(duro_orch *e)
{
    if (e->cfg.timeout_ms <= 0 || e->execution_id != 1)
        return DURO_OK;
    duro_outbound *o = duro__engine_push_outbound(e);
    if (o == NULL)
        return DURO_NOMEM;
    o->item.kind = DURO_WORK_DEADLINE;
    o->item.instance_id = e->instance_id;
    o->item.fire_at_ms = duro__add_ms(e->turn_now, e->cfg.timeout_ms);
    o->delay_ms = e->cfg.timeout_ms;
    return DURO_OK;
}

/* An input event, recorded (replay) or new (the turn appended it), reaches
 * an engine whose code runs. */
static void take_event(duro_orch *e, const duro_event *ev)
{
    switch (ev->kind) {
    case DURO_EVENT_EXECUTION_RESET:
        /* a reset began this execution here (provider version 13; the
         * replay passes it before this: pass_resets): nothing for the
         * code */
    case DURO_EVENT_EXECUTION_SUSPENDED:
    case DURO_EVENT_EXECUTION_RESUMED:
    case DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED:
        if (duro__tracker_apply(&e->tracker, ev, e->arena) != DURO_OK) {
            e->oom = 1;
            return;
        }
        e->now = ev->timestamp_ms;
        if (ev->kind == DURO_EVENT_EXECUTION_SUSPENDED) {
            e->suspended = 1;
        } else if (ev->kind == DURO_EVENT_EXECUTION_RESUMED) {
            e->suspended = 0;
            if (e->start_deferred && !e->code_started) {
                /* suspended before it began: the code starts here (and
                 * the registration's deadline runs from here, live) */
                if ((!e->replay_segment &&
                     send_registered_deadline(e) != DURO_OK) ||
                    start_code(e) != DURO_OK) {
                    if (!e->driver_error)
                        e->oom = 1;
                    return;
                }
            }
            drain_held(e);
        } else if ((ev->flags & DURO_CANCEL_OBSERVED) && !e->cancel_delivered) {
            observe_cancel(e, ev->reason, ev->requested_by);
            resume_code(e);
        }
        return;
    default:
        if (take_input(e, ev))
            resume_code(e);
        return;
    }
}

/* ------------------------------------------------------------------------
 * ending an execution */

const char *duro__engine_end_reason(int status)
{
    switch (status) {
    case DURO_STATUS_COMPLETED:
        return DURO_REASON_INSTANCE_COMPLETED;
    case DURO_STATUS_CANCELLED:
        return DURO_REASON_INSTANCE_CANCELLED;
    case DURO_STATUS_CONTINUED_AS_NEW:
        return DURO_REASON_CONTINUED_AS_NEW;
    case DURO_STATUS_TERMINATED:
        return DURO_REASON_INSTANCE_TERMINATED;
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
    const char *reason =
        e->end_reason != NULL ? e->end_reason : duro__engine_end_reason(status);
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
            duro_outbound *o = duro__engine_push_outbound(e);
            if (o == NULL)
                break;
            /* a terminated parent terminates its children */
            o->item.kind = status == DURO_STATUS_TERMINATED
                               ? DURO_WORK_TERMINATE_INSTANCE
                               : DURO_WORK_CANCEL_INSTANCE;
            o->item.instance_id = s.child_instance;
            o->item.reason = reason;
            o->item.requested_by =
                duro__engine_sprintf(e, "parent:%s", e->instance_id);
        }
        if (s.task != NULL && s.task->state == TASK_PENDING) {
            s.task->parent = NULL;
            duro__task_finish(e, s.task, TASK_CANCELLED, NULL, reason,
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
    case DURO_STATUS_TERMINATED:
        term.kind = DURO_EVENT_ORCHESTRATION_TERMINATED;
        term.reason = error;
        term.requested_by = e->end_by;
        break;
    default:
        term.kind = DURO_EVENT_ORCHESTRATION_FAILED;
        term.error = str_or(error, "failed");
        term.category = category ? category : DURO_CATEGORY_APPLICATION;
        /* the deadline's ending says so: a reset may cut before it as
         * before a terminate (providers/reset_plan.c) */
        if (e->end_reason != NULL &&
            strcmp(e->end_reason, DURO_REASON_DEADLINE) == 0)
            term.reason = DURO_REASON_DEADLINE;
        break;
    }
    append_event(e, &term);

    duro__turn *t = e->turn;
    t->status = status;
    t->meta.output = (status == DURO_STATUS_COMPLETED ||
                      status == DURO_STATUS_CONTINUED_AS_NEW)
                         ? output
                         : NULL;
    int stopped =
        status == DURO_STATUS_CANCELLED || status == DURO_STATUS_TERMINATED;
    t->meta.error = status == DURO_STATUS_FAILED ? str_or(error, "failed")
                    : stopped                    ? str_or(error, "")
                                                 : NULL;
    t->meta.category = status == DURO_STATUS_FAILED ? term.category
                       : stopped                    ? DURO_CATEGORY_CANCELLED
                                                    : DURO_CATEGORY_NONE;

    if (e->parent_instance != NULL && !(e->start_flags & DURO_START_DETACHED) &&
        status != DURO_STATUS_CONTINUED_AS_NEW) {
        duro_outbound *o = duro__engine_push_outbound(e);
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
                    stopped
                        ? duro__engine_sprintf(
                              e, "child '%s' was %s: %s", e->instance_id,
                              status == DURO_STATUS_CANCELLED ? "cancelled"
                                                              : "terminated",
                              str_or(error, ""))
                        : t->meta.error;
            }
        }
    }
    if (status == DURO_STATUS_CONTINUED_AS_NEW) {
        duro_outbound *o = duro__engine_push_outbound(e);
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
            o = duro__engine_push_outbound(e);
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
            o = duro__engine_push_outbound(e);
            if (o == NULL)
                break;
            o->item = *e->leftover[i];
            o->item.execution_id = e->execution_id + 1;
            if (o->item.kind == DURO_WORK_EXTERNAL_EVENT)
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
    if (e->cancel_delivered) {
        /* The code cleaned up after a cancel: whatever it returned, the
         * instance ends Cancelled with the cancel's reason. */
        terminate(e, DURO_STATUS_CANCELLED, NULL, str_or(e->cancel_reason, ""),
                  DURO_CATEGORY_CANCELLED);
        return;
    }
    if (r->invalid) {
        /* its output, failure message or continue-as-new input is not
         * UTF-8 (result.c) */
        terminate(e, DURO_STATUS_FAILED, NULL,
                  duro__engine_sprintf(e, "orchestration '%s' %s",
                                       str_or(e->name, ""), r->error),
                  DURO_CATEGORY_CONFIGURATION);
        return;
    }
    const char *output = duro__engine_turn_strdup(e, r->output);
    if (r->kind == DURO__RESULT_OK) {
        if (duro__engine_over_limit(e, output)) {
            terminate(
                e, DURO_STATUS_FAILED, NULL,
                duro__engine_sprintf(e,
                                     "orchestration output is %zu bytes, over "
                                     "the limit of %zu",
                                     strlen(output), e->cfg.max_payload),
                DURO_CATEGORY_CONFIGURATION);
            return;
        }
        terminate(e, DURO_STATUS_COMPLETED, output, NULL, 0);
    } else if (r->kind == DURO__RESULT_CONTINUE_AS_NEW) {
        if (duro__engine_over_limit(e, output)) {
            terminate(e, DURO_STATUS_FAILED, NULL,
                      "continue-as-new input over the payload limit",
                      DURO_CATEGORY_CONFIGURATION);
            return;
        }
        terminate(e, DURO_STATUS_CONTINUED_AS_NEW, output, NULL, 0);
    } else {
        const char *err = duro__engine_turn_strdup(e, r->error);
        if (err != NULL && duro__engine_over_limit(e, err))
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
        else if (h->kind == DURO_EVENT_EXECUTION_SUSPENDED)
            e->suspended = 1;
        else if (h->kind == DURO_EVENT_EXECUTION_RESUMED)
            e->suspended = 0;
        else if (h->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
                 (h->flags & DURO_CANCEL_OBSERVED) && !e->cancel_delivered)
            note_cancel(e, h->reason, h->requested_by);
        e->now = h->timestamp_ms;
        e->replay_pos++;
    }
    return DURO_OK;
}

static int load_started(duro_orch *e, const duro_event *ev)
{
    e->name = duro__engine_strdup(e, ev->name);
    /* A store that began the execution (provider version 9) records the
     * version the start asked for, NULL for "the highest": the one that
     * runs it is the registration's, written on the instance with the
     * first meta. */
    e->version = duro__engine_strdup(e, ev->version != NULL ? ev->version
                                                            : e->cfg.version);
    e->input = duro__engine_strdup(e, ev->payload);
    e->parent_instance = duro__engine_strdup(e, ev->ref_instance);
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
    /* Unlinked before each call: a hook runs once whatever it does. */
    while (e->hooks != NULL) {
        destroy_hook *h = e->hooks;
        e->hooks = h->next;
        h->fn(h->arg);
    }
    if (e->driver_live) {
        e->driver_live = 0;
        if (e->cfg.driver.destroy != NULL)
            e->cfg.driver.destroy(e->driver_state, e->cfg.user);
    }
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

size_t duro__engine_bytes(const duro_orch *e)
{
    return sizeof(*e) + duro__arena_bytes(e->arena) +
           e->tracker.cap * sizeof(*e->tracker.slots) +
           e->leftover_cap * sizeof(*e->leftover);
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
        *p = duro__engine_turn_strdup(e, *p);
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
        e->status_dirty ||
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
        e->start_deferred =
            in->history_count > 1 &&
            in->history[1].kind == DURO_EVENT_EXECUTION_SUSPENDED &&
            (in->history[1].flags & DURO_SUSPEND_BEFORE_START) != 0;
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

/* Ends the execution at once, without the code, for the message that
 * stops it: a terminate, the instance's deadline, or a cancel the code
 * does not take part in. */
static void stop_now(duro_orch *e, const duro_work_item *stop)
{
    if (stop->kind == DURO_WORK_TERMINATE_INSTANCE) {
        e->end_by = stop->requested_by;
        terminate(e, DURO_STATUS_TERMINATED, NULL,
                  str_or(stop->reason, "terminated"), DURO_CATEGORY_CANCELLED);
        return;
    }
    if (stop->kind == DURO_WORK_DEADLINE) {
        /* Failed with category timeout: the instance did not finish in
         * time (a cancel or terminate is someone's request); what it left
         * outstanding is cancelled with reason "deadline" */
        char at[40];
        duro__format_utc(at, sizeof(at), stop->fire_at_ms);
        e->end_reason = DURO_REASON_DEADLINE;
        terminate(e, DURO_STATUS_FAILED, NULL,
                  duro__engine_sprintf(e, "deadline of %s passed", at),
                  DURO_CATEGORY_TIMEOUT);
        return;
    }
    const char *reason = stop->reason;
    if (e->cancel_delivered) {
        reason = e->cancel_reason; /* the cancel being cleaned up after */
    } else {
        duro_event req = {.kind = DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                          .reason = stop->reason,
                          .requested_by = stop->requested_by};
        append_event(e, &req);
    }
    terminate(e, DURO_STATUS_CANCELLED, NULL, str_or(reason, ""),
              DURO_CATEGORY_CANCELLED);
}

/* stop_now() for a batch decided without code: first the inputs that came
 * before the stopping message are recorded (a cancel among them as its
 * request). */
static void stop_without_code(duro_orch *e, const duro__turn_input *in,
                              const duro_work_item *stop)
{
    int requested = e->cancel_delivered;
    for (const duro_work_item *m = in->messages; m < stop && !e->oom; m++) {
        duro_event ev;
        int suspend = m->kind == DURO_WORK_SUSPEND_INSTANCE;
        if (m->kind == DURO_WORK_CANCEL_INSTANCE && !requested) {
            duro_event req = {.kind = DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                              .reason = m->reason,
                              .requested_by = m->requested_by};
            append_event(e, &req);
            requested = 1;
        } else if ((suspend || m->kind == DURO_WORK_RESUME_INSTANCE) &&
                   e->suspended != suspend) {
            /* history shows every suspend and resume that came first */
            duro_event sr = {.kind = suspend ? DURO_EVENT_EXECUTION_SUSPENDED
                                             : DURO_EVENT_EXECUTION_RESUMED,
                             .reason = m->reason,
                             .requested_by = m->requested_by};
            append_event(e, &sr);
            e->suspended = suspend;
        } else if (message_event(e, m, &ev)) {
            append_event(e, &ev);
        }
    }
    stop_now(e, stop);
}

/* The cleanup after an observed cancel outlived its deadline. */
static void stop_at_deadline(duro_orch *e)
{
    e->end_by = "duro";
    terminate(e, DURO_STATUS_TERMINATED, NULL,
              duro__engine_sprintf(
                  e,
                  "cleanup deadline passed: the orchestration was still "
                  "cleaning up %lld ms after the cancel (%s)",
                  (long long)(e->now - e->cancel_at),
                  str_or(e->cancel_reason, "no reason given")),
              DURO_CATEGORY_CANCELLED);
}

static int finish_turn(duro_orch *e)
{
    if (e->oom)
        return DURO_NOMEM;
    if (!e->terminal)
        e->turn->status =
            e->suspended ? DURO_STATUS_SUSPENDED : DURO_STATUS_RUNNING;
    fill_meta(e);
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
    e->patch_declined = NULL; /* a position of the last turn's history */
    e->leftover_count = 0;
    e->status_dirty = 0;
    out->status = DURO_STATUS_RUNNING;
    if (in->history_count > 0 &&
        in->history[0].event_id != e->tracker.count + 1)
        return DURO_INVALID;
    int begins = e->tracker.count == 0 && in->history_count == 0;
    if (e->tracker.count == 0) {
        int rc = begin_execution(e, in);
        if (rc != DURO_OK)
            return rc;
    }

    /* What ends the execution without running code: a terminate, the
     * instance's deadline, and a cancel that the code does not take part
     * in - it does not observe cancellation, must not run, the instance is
     * suspended, or the execution only begins in this turn. */
    int codeless_cancel =
        !has_code(e) || !e->cfg.observe_cancel || in->suspended || begins;
    const duro_work_item *stop = NULL;
    int resumes = 0;
    for (size_t i = 0; i < in->message_count && stop == NULL; i++) {
        const duro_work_item *m = &in->messages[i];
        if (m->kind == DURO_WORK_TERMINATE_INSTANCE ||
            m->kind == DURO_WORK_DEADLINE ||
            (m->kind == DURO_WORK_CANCEL_INSTANCE && codeless_cancel))
            stop = m;
        resumes |= m->kind == DURO_WORK_RESUME_INSTANCE;
    }

    if (stop != NULL || in->terminate_status != 0) {
        /* Decided without running code: everything outstanding in history
         * (and in this batch) is cancelled. */
        if (absorb_history(e) != DURO_OK)
            return DURO_INVALID;
        if (stop != NULL)
            stop_without_code(e, in, stop);
        else
            terminate(e, in->terminate_status, NULL, in->terminate_error,
                      in->terminate_category);
        return finish_turn(e);
    }
    /* An instance started without a deadline that begins here, and goes
     * on, gets the registration's (one that ends at once needs none). */
    if (begins && in->start != NULL && in->start->kind == DURO_WORK_START &&
        in->start->fire_at_ms == 0 && send_registered_deadline(e) != DURO_OK)
        return DURO_NOMEM;

    if (in->suspended && !resumes && (!e->code_started || !has_code(e))) {
        /* A suspended instance runs no code: the batch is recorded in
         * history from history alone (the engine is then not kept, its
         * code never having run). */
        if (absorb_history(e) != DURO_OK)
            return DURO_INVALID;
        e->codeless = 1;
        for (size_t i = 0; i < in->message_count && !e->oom; i++) {
            const duro_work_item *m = &in->messages[i];
            duro_event ev = {0};
            if (m->kind == DURO_WORK_SUSPEND_INSTANCE && !e->suspended) {
                ev.kind = DURO_EVENT_EXECUTION_SUSPENDED;
                ev.reason = m->reason;
                ev.requested_by = m->requested_by;
                e->suspended = 1;
                e->status_dirty = 1;
            } else if (!message_event(e, m, &ev)) {
                continue;
            }
            append_event(e, &ev);
        }
        return finish_turn(e);
    }

    if (e->replay_pos < e->replay_count)
        out->replayed = 1;
    if (!e->code_started && !e->start_deferred) {
        e->replay_segment = in->history_count > 0;
        int rc = start_code(e);
        if (rc != DURO_OK)
            return rc;
    }
    while (!e->nondet && !e->oom && !e->driver_error &&
           e->replay_pos < e->replay_count) {
        pass_resets(e);
        if (e->oom || e->replay_pos == e->replay_count)
            break;
        const duro_event *h = &e->replay[e->replay_pos];
        char b[160];
        if (e->code_done || e->deadline_passed) {
            duro__engine_describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration returned but history continues "
                               "with %s%s",
                               (unsigned long long)h->event_id, b,
                               patch_note(e, e->replay_pos));
            break;
        }
        if (duro__event_is_command(h->kind)) {
            duro__engine_describe(b, sizeof(b), h);
            set_nondeterminism(e,
                               "nondeterminism at event %llu: the "
                               "orchestration is waiting but history has %s%s",
                               (unsigned long long)h->event_id, b,
                               patch_note(e, e->replay_pos));
            break;
        }
        e->replay_pos++;
        e->replay_segment = 1;
        take_event(e, h);
    }
    e->replay_segment = 0;
    if (e->oom)
        return DURO_NOMEM;
    if (e->driver_error)
        return DURO_ERROR;
    if (e->nondet) {
        if (absorb_history(e) != DURO_OK)
            return DURO_INVALID;
        const duro_work_item *cancel = NULL;
        for (size_t i = 0; i < in->message_count && cancel == NULL; i++)
            if (in->messages[i].kind == DURO_WORK_CANCEL_INSTANCE)
                cancel = &in->messages[i];
        if (cancel != NULL) {
            /* Code that cannot be replayed can still be cancelled: from
             * history alone, as if it did not observe cancellation. */
            stop_without_code(e, in, cancel);
            return finish_turn(e);
        }
        out->nondeterminism = 1;
        terminate(e, DURO_STATUS_FAILED, NULL, e->result.error,
                  DURO_CATEGORY_CONFIGURATION);
        return finish_turn(e);
    }
    /* A new execution takes events carried over from the previous one
     * first, then the rest of the batch in order. */
    int carried_first =
        in->start != NULL && in->start->kind == DURO_WORK_CONTINUE_AS_NEW;
    for (int pass = carried_first ? 0 : 1; pass < 2; pass++) {
        for (size_t i = 0; i < in->message_count && !e->oom && !e->terminal &&
                           !e->driver_error;
             i++) {
            const duro_work_item *m = &in->messages[i];
            int carried = carried_first &&
                          m->kind == DURO_WORK_EXTERNAL_EVENT &&
                          (m->flags & DURO_EVENT_CARRIED);
            if (carried != (pass == 0))
                continue;
            if (e->code_done || e->deadline_passed) {
                if (m->kind == DURO_WORK_EXTERNAL_EVENT ||
                    m->kind == DURO_WORK_SUSPEND_INSTANCE)
                    note_leftover(e, m);
                else if (m->kind == DURO_WORK_CANCEL_INSTANCE &&
                         !e->cancel_delivered)
                    /* The code returned earlier in this batch, before it
                     * could see the cancel: the cancel still ends the
                     * instance, as it does code that does not observe
                     * cancellation (and the client was told it would). */
                    stop_now(e, m);
                continue;
            }
            duro_event ev = {0}, stored;
            switch (m->kind) {
            case DURO_WORK_SUSPEND_INSTANCE:
            case DURO_WORK_RESUME_INSTANCE: {
                int suspend = m->kind == DURO_WORK_SUSPEND_INSTANCE;
                if (e->suspended == suspend)
                    continue; /* idempotent */
                ev.kind = suspend ? DURO_EVENT_EXECUTION_SUSPENDED
                                  : DURO_EVENT_EXECUTION_RESUMED;
                ev.reason = m->reason;
                ev.requested_by = m->requested_by;
                e->status_dirty = 1;
                break;
            }
            case DURO_WORK_CANCEL_INSTANCE:
                if (e->cancel_delivered)
                    continue; /* a second cancel during the cleanup */
                if (e->suspended) {
                    /* suspended in this very batch: no code runs */
                    stop_now(e, m);
                    continue;
                }
                ev.kind = DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED;
                ev.reason = m->reason;
                ev.requested_by = m->requested_by;
                ev.flags = DURO_CANCEL_OBSERVED;
                break;
            default:
                if (!message_event(e, m, &ev))
                    continue;
                break;
            }
            if (!push_delta(e, &ev, &stored))
                break;
            take_event(e, &stored);
        }
    }
    if (e->oom)
        return DURO_NOMEM;
    if (e->driver_error)
        return DURO_ERROR;
    if (!e->terminal) {
        if (e->deadline_passed)
            stop_at_deadline(e);
        else if (e->bad_text != NULL && !e->cancel_delivered)
            terminate(e, DURO_STATUS_FAILED, NULL, e->bad_text,
                      DURO_CATEGORY_CONFIGURATION);
        else if (e->code_done || e->bad_text != NULL)
            finish_from_code(e);
    }
    return finish_turn(e);
}

int duro__engine_reusable(const duro_orch *e)
{
    return !e->terminal && !e->codeless && e->code_started;
}
