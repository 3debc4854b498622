/* orch_api.c - the public orchestration-context API (duro_call_activity,
 * duro_await, duro_select_n, duro_now, ...) and the waits a driver asks
 * without blocking (duro_task_state, duro_first_done, duro_select_done,
 * duro_all_done). Every function checks that it runs on its engine's fiber,
 * or inside its driver's step, before touching the engine; it owns nothing
 * and runs on whichever turn thread resumed the code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/engine_internal.h"

/* duro__engine_on_fiber(o); when not, duro_errmsg() names the call and
 * the misuse (DURO_MISUSE). */
static int entered(duro_orch *o, const char *fn)
{
    if (duro__engine_on_fiber(o))
        return 1;
    duro__fail(DURO_MISUSE, "%s: %s%s", fn, duro__misuse_task.error,
               o == NULL ? " (the context is NULL)" : "");
    return 0;
}

/* entered(), for the calls that wait: inside a driver's step they would
 * block the turn thread, so they refuse (DURO_MISUSE). */
static int entered_to_wait(duro_orch *o, const char *fn)
{
    if (!entered(o, fn))
        return 0;
    if (!duro__engine_in_step(o))
        return 1;
    duro__fail(DURO_MISUSE,
               "%s: duro API misuse: a driver's step must not wait; ask "
               "duro_task_state(), duro_first_done(), duro_select_done() or "
               "duro_all_done() and return DURO_STEP_WAITING instead",
               fn);
    return 0;
}

duro_task *duro_call_activity(duro_orch *o, const char *name, const char *input)
{
    if (!entered(o, __func__))
        return &duro__misuse_task;
    return duro__engine_schedule_activity(o, name, input, 1);
}

/* What is wrong with a retry policy, or NULL when it is valid. */
static const char *retry_policy_problem(const duro_retry_policy *p)
{
    if (p == NULL)
        return "retry policy is NULL";
    if (p->version < 1)
        return "invalid retry policy: version is not set (call "
               "duro_retry_policy_init() first)";
    if (p->max_attempts < 1)
        return "invalid retry policy: max_attempts must be >= 1";
    if (p->backoff != DURO_BACKOFF_EXPONENTIAL &&
        p->backoff != DURO_BACKOFF_LINEAR && p->backoff != DURO_BACKOFF_FIXED)
        return "invalid retry policy: backoff must be "
               "DURO_BACKOFF_EXPONENTIAL, _LINEAR or _FIXED";
    if (p->initial_delay_ms < 0 || p->max_delay_ms < 0 ||
        p->attempt_timeout_ms < 0 || p->total_timeout_ms < 0)
        return "invalid retry policy: initial_delay_ms, max_delay_ms, "
               "attempt_timeout_ms and total_timeout_ms must be >= 0";
    if (p->backoff == DURO_BACKOFF_EXPONENTIAL && !(p->coefficient >= 1.0))
        return "invalid retry policy: an exponential backoff's coefficient "
               "must be >= 1";
    return NULL;
}

duro_task *duro_call_activity_with_retry(duro_orch *o, const char *name,
                                         const char *input,
                                         const duro_retry_policy *policy)
{
    if (!entered(o, __func__))
        return &duro__misuse_task;
    /* Checked here, as duro_call_activity does, so that a bad name fails
     * the task with DURO_INVALID rather than as a failed first attempt. */
    if (name == NULL || name[0] == '\0')
        return duro__task_new_failed(o, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "activity name is empty");
    const char *bad = duro__engine_bad_text(o, "activity", NULL, "name", name);
    if (bad == NULL)
        bad = duro__engine_bad_text(o, "activity", name, "input", input);
    duro_event first = {.kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                        .name = name,
                        .payload = input,
                        .attempt = 1};
    if (bad != NULL && !duro__engine_recorded(o, &first))
        return duro__engine_refuse_text(o, bad);
    const char *problem = retry_policy_problem(policy);
    if (problem != NULL)
        return duro__task_new_failed(o, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION, problem);
    struct duro_task *rt = duro__task_new(o, TASK_RETRY);
    if (rt == &duro__misuse_task)
        return rt;
    retry_state *r = duro_arena_alloc(o->arena, sizeof(*r));
    if (r == NULL) {
        o->oom = 1;
        return &duro__misuse_task;
    }
    rt->retry = r;
    r->policy = *policy;
    rt->name = duro__engine_strdup(o, name);
    r->input = duro__engine_strdup(o, input);
    if (policy->total_timeout_ms > 0)
        r->deadline = duro__add_ms(o->now, policy->total_timeout_ms);
    duro__retry_start_attempt(o, rt);
    return rt;
}

duro_task *duro_timer(duro_orch *o, int64_t delay_ms)
{
    if (!entered(o, __func__))
        return &duro__misuse_task;
    return duro__engine_schedule_timer(o, delay_ms);
}

duro_task *duro_wait_event(duro_orch *o, const char *name)
{
    if (!entered(o, __func__))
        return &duro__misuse_task;
    if (name == NULL || name[0] == '\0')
        return duro__task_new_failed(o, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "event name is empty");
    if (strlen(name) > DURO__NAME_MAX)
        return duro__task_new_failed(o, DURO_TOO_LARGE,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "event name is longer than 1024 bytes");
    const char *bad = duro__engine_bad_text(o, "event", NULL, "name", name);
    duro_event want = {.kind = DURO_EVENT_EVENT_SUBSCRIBED, .name = name};
    if (bad != NULL && !duro__engine_recorded(o, &want))
        return duro__engine_refuse_text(o, bad);
    struct duro_task *t = duro__task_new(o, TASK_EVENT);
    if (t == &duro__misuse_task)
        return t;
    t->name = duro__engine_strdup(o, name);
    duro_event ev = {.kind = DURO_EVENT_EVENT_SUBSCRIBED, .name = t->name};
    duro__engine_issue_task(o, t, &ev);
    if (t->event_id == 0)
        return t;
    for (raised_event *r = o->raised_head; r != NULL; r = r->next) {
        if (!r->consumed && str_eq(r->name, name)) {
            r->consumed = 1;
            duro__task_finish(o, t, TASK_SUCCEEDED, r->payload, NULL, 0);
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
        return duro__task_new_failed(o, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "orchestration name is empty");
    if (instance_id != NULL && instance_id[0] == '\0')
        return duro__task_new_failed(o, DURO_INVALID,
                                     DURO_CATEGORY_CONFIGURATION,
                                     "child instance id is empty");
    if (strlen(name) > DURO__NAME_MAX ||
        (instance_id != NULL && strlen(instance_id) > DURO__NAME_MAX) ||
        (version != NULL && strlen(version) > DURO__NAME_MAX))
        return duro__task_new_failed(
            o, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
            "child name, version or id is longer than 1024 bytes");
    static const char child[] = "child orchestration";
    const char *bad = duro__engine_bad_text(o, child, NULL, "name", name);
    if (bad == NULL)
        bad = duro__engine_bad_text(o, child, name, "version", version);
    if (bad == NULL)
        bad = duro__engine_bad_text(o, child, name, "instance id", instance_id);
    if (bad == NULL)
        bad = duro__engine_bad_text(o, child, name, "input", input);
    if (bad != NULL) {
        duro_event want = {
            .kind = DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED,
            .name = name,
            .version = version,
            .ref_instance =
                instance_id != NULL
                    ? instance_id
                    : duro__engine_sprintf(
                          o, "%s:%llu:%llu", o->instance_id,
                          (unsigned long long)o->execution_id,
                          (unsigned long long)(o->tracker.count + 1)),
            .payload = input,
            .flags = detached ? DURO_START_DETACHED : 0};
        if (!duro__engine_recorded(o, &want))
            return duro__engine_refuse_text(o, bad);
    }
    if (duro__engine_over_limit(o, input))
        return duro__task_new_failed(
            o, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
            "child orchestration input over the payload "
            "limit");
    /* The default id, "<this id>:<execution>:<event id>", grows with each
     * level of children that take it: past the limit, the code is told
     * here rather than the store refusing the turn on every delivery. */
    char suffix[48] = "";
    if (instance_id == NULL)
        snprintf(suffix, sizeof(suffix), ":%llu:%llu",
                 (unsigned long long)o->execution_id,
                 (unsigned long long)(o->tracker.count + 1));
    if (instance_id == NULL &&
        strlen(o->instance_id) + strlen(suffix) > DURO__NAME_MAX)
        return duro__task_new_failed(
            o, DURO_TOO_LARGE, DURO_CATEGORY_CONFIGURATION,
            "the child's default instance id (this instance's id followed "
            "by ':<execution>:<event>') would be longer than 1024 bytes: "
            "pass an instance id");
    struct duro_task *t = duro__task_new(o, TASK_CHILD);
    if (t == &duro__misuse_task)
        return t;
    t->name = duro__engine_strdup(o, name);
    t->child_instance =
        instance_id != NULL
            ? duro__engine_strdup(o, instance_id)
            : duro__engine_sprintf(o, "%s%s", o->instance_id, suffix);
    duro_event ev = {.kind = DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED,
                     .name = t->name,
                     .version = version,
                     .ref_instance = t->child_instance,
                     .payload = input,
                     .flags = detached ? DURO_START_DETACHED : 0};
    if (o->replay_pos >= o->replay_count) {
        ev.version = duro__engine_turn_strdup(o, version);
        ev.payload = duro__engine_turn_strdup(o, input);
    }
    if (duro__engine_issue_task(o, t, &ev)) {
        uint64_t id = t->event_id;
        duro_outbound *ob = duro__engine_push_outbound(o);
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
    if (!entered(o, __func__))
        return &duro__misuse_task;
    return start_child(o, name, version, instance_id, input, 0);
}

int duro_start_orchestration(duro_orch *o, const char *name,
                             const char *version, const char *instance_id,
                             const char *input)
{
    if (!entered(o, __func__))
        return DURO_MISUSE;
    struct duro_task *t = start_child(o, name, version, instance_id, input, 1);
    if (t->state == TASK_FAILED)
        return duro__fail(t->rc, "%s", str_or(t->error, "failed"));
    return DURO_OK;
}

/* Whether code running on o's fiber may use task t: one of o's own tasks,
 * or one of the static failed tasks. Decided by address alone (see
 * task_chunk), so the task of another engine, even a freed one, is never
 * read. */
static int usable(duro_orch *o, const duro_task *t)
{
    return duro__task_is_static(t) || duro__engine_owns_task(o, t);
}

/* usable(), setting duro_errmsg() when not. */
static int usable_task(duro_orch *o, const duro_task *t, const char *fn)
{
    if (usable(o, t))
        return 1;
    duro__fail(DURO_MISUSE, "%s: %s", fn, duro__foreign_task.error);
    return 0;
}

/* usable_task() for every non-NULL task of an array. */
static int usable_tasks(duro_orch *o, duro_task *const *tasks, size_t n,
                        const char *fn)
{
    for (size_t i = 0; i < n; i++) {
        if (tasks[i] == NULL || usable(o, tasks[i]))
            continue;
        duro__fail(DURO_MISUSE, "%s: tasks[%zu]: %s", fn, i,
                   duro__foreign_task.error);
        return 0;
    }
    return 1;
}

/* t->rc, with duro_errmsg() set to t's error when t did not succeed.
 * Called after the last wait: the fiber may have stopped on one turn thread
 * and continued on another, and the code reads duro_errmsg() on the thread
 * it runs on now. duro__fail, in another file, finds the calling thread's
 * message when it is called, never earlier. */
static int task_rc(const struct duro_task *t)
{
    if (t->rc == DURO_OK)
        return DURO_OK;
    return duro__fail(t->rc, "%s", str_or(t->error, duro_strerror(t->rc)));
}

int duro_await(duro_orch *o, duro_task *t)
{
    if (t == NULL)
        return duro__fail(DURO_INVALID, "duro_await: task is NULL");
    if (duro__task_is_static(t))
        return task_rc(t);
    if (!entered_to_wait(o, __func__))
        return DURO_MISUSE;
    if (!usable_task(o, t, "duro_await"))
        return DURO_MISUSE;
    while (t->state == TASK_PENDING)
        duro__engine_wait(o);
    return task_rc(t);
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

/* A select's losers: every task but the winner, cancelled in argument
 * order (the order of the cancel events in history). */
static void cancel_all_but(duro_orch *o, duro_task *const *tasks, size_t n,
                           const struct duro_task *winner)
{
    for (size_t i = 0; i < n; i++)
        if (tasks[i] != NULL && tasks[i] != winner)
            duro__task_cancel(o, tasks[i], DURO_REASON_SELECT_LOSER);
}

static duro_task *wait_first(duro_orch *o, duro_task *const *tasks, size_t n,
                             int cancel_losers, const char *fn)
{
    if (n == 0)
        return NULL;
    if (tasks == NULL) {
        duro__fail(DURO_INVALID, "%s: tasks is NULL (n is %zu)", fn, n);
        return NULL;
    }
    if (!entered_to_wait(o, fn))
        return &duro__misuse_task;
    /* Checked before waiting or cancelling anything: a foreign task would
     * never complete here, and must not be read. */
    if (!usable_tasks(o, tasks, n, fn))
        return &duro__foreign_task;
    for (;;) {
        struct duro_task *winner = first_done(tasks, n);
        if (winner != NULL) {
            if (cancel_losers)
                cancel_all_but(o, tasks, n, winner);
            return winner;
        }
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= tasks[i] != NULL;
        if (!any)
            return NULL;
        duro__engine_wait(o);
    }
}

duro_task *duro_select_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return wait_first(o, tasks, n, 1, "duro_select_n");
}

duro_task *duro_wait_any_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return wait_first(o, tasks, n, 0, "duro_wait_any_n");
}

int duro_join_n(duro_orch *o, duro_task *const *tasks, size_t n)
{
    if (!entered_to_wait(o, __func__))
        return DURO_MISUSE;
    if (n == 0)
        return DURO_OK;
    if (tasks == NULL)
        return duro__fail(DURO_INVALID, "duro_join_n: tasks is NULL (n is %zu)",
                          n);
    if (!usable_tasks(o, tasks, n, "duro_join_n"))
        return DURO_MISUSE;
    for (;;) {
        int pending = 0;
        for (size_t i = 0; i < n; i++)
            if (tasks[i] != NULL && tasks[i]->state == TASK_PENDING)
                pending = 1;
        if (!pending)
            break;
        duro__engine_wait(o);
    }
    for (size_t i = 0; i < n; i++) {
        if (tasks[i] == NULL)
            return duro__fail(DURO_INVALID, "duro_join_n: tasks[%zu] is NULL",
                              i);
        if (tasks[i]->rc != DURO_OK)
            return task_rc(tasks[i]);
    }
    return DURO_OK;
}

/* duro_first_done() and duro_select_done(): wait_first() without the
 * wait, so a driver's step makes the decision at the same points as the
 * C code's select would (after each input the engine consumed). */
static duro_task *poll_first(duro_orch *o, duro_task *const *tasks, size_t n,
                             int cancel_losers, const char *fn)
{
    if (n == 0)
        return NULL;
    if (tasks == NULL) {
        duro__fail(DURO_INVALID, "%s: tasks is NULL (n is %zu)", fn, n);
        return NULL;
    }
    if (!entered(o, fn))
        return &duro__misuse_task;
    if (!usable_tasks(o, tasks, n, fn))
        return &duro__foreign_task;
    struct duro_task *winner = first_done(tasks, n);
    if (winner != NULL && cancel_losers)
        cancel_all_but(o, tasks, n, winner);
    return winner;
}

duro_task *duro_first_done(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return poll_first(o, tasks, n, 0, "duro_first_done");
}

duro_task *duro_select_done(duro_orch *o, duro_task *const *tasks, size_t n)
{
    return poll_first(o, tasks, n, 1, "duro_select_done");
}

int duro_all_done(duro_orch *o, duro_task *const *tasks, size_t n)
{
    if (!entered(o, __func__))
        return DURO_MISUSE;
    if (n == 0)
        return 1;
    if (tasks == NULL)
        return duro__fail(DURO_INVALID,
                          "duro_all_done: tasks is NULL (n is %zu)", n);
    if (!usable_tasks(o, tasks, n, "duro_all_done"))
        return DURO_MISUSE;
    for (size_t i = 0; i < n; i++)
        if (tasks[i] != NULL && tasks[i]->state == TASK_PENDING)
            return 0;
    return 1;
}

void duro_cancel_task(duro_orch *o, duro_task *t)
{
    if (t == NULL || duro__task_is_static(t))
        return;
    if (!entered(o, __func__))
        return;
    if (!usable_task(o, t, "duro_cancel_task"))
        return;
    duro__task_cancel(o, t, DURO_REASON_TASK_CANCELLED);
}

/* The task an accessor may read: t itself when it is a static task or a
 * task of the orchestration running on this fiber; otherwise, without
 * reading t, duro__foreign_task (failed with DURO_MISUSE), with
 * duro_errmsg() set. NULL stays NULL. */
static const struct duro_task *readable(const duro_task *t, const char *fn)
{
    if (t == NULL || duro__task_is_static(t))
        return t;
    duro_orch *e = duro__engine_current();
    if (e != NULL && duro__engine_owns_task(e, t))
        return t;
    if (e == NULL)
        duro__fail(DURO_MISUSE,
                   "%s: called outside orchestration code; a task can only "
                   "be read by the orchestration function that created it, "
                   "on its fiber, or inside a step of its driver",
                   fn);
    else
        duro__fail(DURO_MISUSE, "%s: %s", fn, duro__foreign_task.error);
    return &duro__foreign_task;
}

int duro_task_done(const duro_task *t)
{
    t = readable(t, "duro_task_done");
    return t != NULL && t->state != TASK_PENDING;
}

int duro_task_failed(const duro_task *t)
{
    t = readable(t, "duro_task_failed");
    return t != NULL && (t->state == TASK_FAILED || t->state == TASK_CANCELLED);
}

const char *duro_task_output(const duro_task *t)
{
    t = readable(t, "duro_task_output");
    return t != NULL && t->state == TASK_SUCCEEDED ? t->output : NULL;
}

const char *duro_task_error(const duro_task *t)
{
    t = readable(t, "duro_task_error");
    return t != NULL && (t->state == TASK_FAILED || t->state == TASK_CANCELLED)
               ? t->error
               : NULL;
}

int duro_task_state(const duro_task *t)
{
    t = readable(t, "duro_task_state");
    /* TASK_* and enum duro_task_state have the same values */
    return t != NULL ? t->state : DURO_TASK_PENDING;
}

int duro_task_category(const duro_task *t)
{
    t = readable(t, "duro_task_category");
    return t != NULL && (t->state == TASK_FAILED || t->state == TASK_CANCELLED)
               ? t->category
               : DURO_CATEGORY_NONE;
}

int duro_continue_as_new(duro_orch *o, duro_result *out, const char *input)
{
    if (!entered(o, __func__))
        return DURO_MISUSE;
    return duro__result_set_continue(out, input);
}

int64_t duro_now(duro_orch *o)
{
    if (!entered(o, __func__))
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
    if (!entered(o, __func__))
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
    return duro__engine_sprintf(
        o, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(a >> 32),
        (unsigned long long)((a >> 16) & 0xFFFF),
        (unsigned long long)(a & 0xFFFF), (unsigned long long)(b >> 48),
        (unsigned long long)(b & 0xFFFFFFFFFFFFull));
}

void duro_set_custom_status(duro_orch *o, const char *status)
{
    if (!entered(o, __func__))
        return;
    const char *bad = duro__engine_bad_text(o, "orchestration", o->name,
                                            "custom status", status);
    if (bad != NULL) {
        /* Replayed, it can only be one an earlier duro stored (set live
         * now, it fails the execution in the turn it is set, which is
         * then never replayed): left as it is. */
        if (duro_is_replaying(o))
            return;
        /* nothing to fail but the execution: at the end of this turn */
        duro__engine_fail_text(o, bad);
        return;
    }
    if (duro__engine_over_limit(o, status))
        status = "(custom status over the payload limit)";
    o->custom_status = duro__engine_strdup(o, status);
    o->custom_status_dirty = 1;
}

/* What is wrong with a change id given to fn, or NULL; in o's arena. */
static const char *change_id_problem(duro_orch *o, const char *fn,
                                     const char *id)
{
    if (id == NULL || id[0] == '\0')
        return duro__engine_sprintf(o, "%s: the change id is empty", fn);
    if (strlen(id) > DURO_PATCH_ID_MAX)
        return duro__engine_sprintf(o,
                                    "%s: the change id is %zu bytes, longer "
                                    "than DURO_PATCH_ID_MAX (%d)",
                                    fn, strlen(id), DURO_PATCH_ID_MAX);
    return duro__engine_bad_text(o, fn, NULL, "change id", id);
}

/* duro_patched() and duro_patch_deprecated(). A bad id is the code's
 * mistake: live, the execution fails with it at the end of the turn; in a
 * replay, the history cannot hold what follows (a bad id is never
 * recorded), so the code changed: nondeterminism naming it. */
static int patch(duro_orch *o, const char *fn, const char *id, int deprecated)
{
    if (!entered(o, fn))
        return 0;
    const char *why = change_id_problem(o, fn, id);
    if (why != NULL) {
        duro__fail(DURO_INVALID, "%s", why);
        if (o->replay_pos < o->replay_count)
            duro__engine_bad_replay(o, why); /* history continues */
        else
            duro__engine_fail_text(o, why);
        return 0;
    }
    return duro__engine_patch(o, id, deprecated);
}

int duro_patched(duro_orch *o, const char *change_id)
{
    return patch(o, __func__, change_id, 0);
}

void duro_patch_deprecated(duro_orch *o, const char *change_id)
{
    (void)patch(o, __func__, change_id, 1);
}

int duro_is_replaying(duro_orch *o)
{
    if (!entered(o, __func__))
        return 0;
    return o->replay_segment || o->replay_pos < o->replay_count;
}

void duro_log(duro_orch *o, int level, const char *fmt, ...)
{
    if (!entered(o, __func__))
        return;
    if (fmt == NULL) {
        duro__fail(DURO_INVALID, "duro_log: fmt is NULL");
        return;
    }
    if (duro_is_replaying(o) || o->cfg.logger == NULL ||
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
    if (!entered(o, __func__))
        return NULL;
    /* A size no allocation can hold is refused the same way on every run,
     * so it must not mark the engine out of memory (that retries the turn). */
    if (size > DURO__ALLOC_MAX) {
        duro__fail(DURO_TOO_LARGE,
                   "duro_orch_alloc: %zu bytes is more than any allocation "
                   "can hold",
                   size);
        return NULL;
    }
    void *p = duro_arena_alloc(o->arena, size);
    if (p == NULL)
        o->oom = 1;
    return p;
}

const char *duro_sprintf(duro_orch *o, const char *fmt, ...)
{
    if (!entered(o, __func__))
        return NULL;
    /* Refused before formatting: a NULL from the formatter means out of
     * memory and fails the turn. */
    if (fmt == NULL) {
        duro__fail(DURO_INVALID, "duro_sprintf: fmt is NULL");
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    const char *s = duro__engine_vsprintf(o, fmt, ap);
    va_end(ap);
    return s;
}

const char *duro_instance_id(duro_orch *o)
{
    return entered(o, __func__) ? o->instance_id : NULL;
}

uint64_t duro_execution_id(duro_orch *o)
{
    return entered(o, __func__) ? o->execution_id : 0;
}

const char *duro_input(duro_orch *o)
{
    return entered(o, __func__) ? o->input : NULL;
}

void *duro_orch_user(duro_orch *o)
{
    return entered(o, __func__) ? o->cfg.user : NULL;
}

int duro_cancel_requested(duro_orch *o)
{
    return entered(o, __func__) ? o->cancel_delivered : 0;
}

const char *duro_cancel_reason(duro_orch *o)
{
    return entered(o, __func__) ? o->cancel_reason : NULL;
}

const char *duro_cancel_requester(duro_orch *o)
{
    return entered(o, __func__) ? o->cancel_by : NULL;
}

int duro_orch_on_destroy(duro_orch *o, void (*fn)(void *arg), void *arg)
{
    if (!entered(o, __func__))
        return DURO_MISUSE;
    if (fn == NULL)
        return duro__fail(DURO_INVALID, "duro_orch_on_destroy: fn is NULL");
    destroy_hook *h = duro_arena_alloc(o->arena, sizeof(*h));
    if (h == NULL)
        return duro__fail(DURO_NOMEM, "duro_orch_on_destroy: out of memory");
    h->fn = fn;
    h->arg = arg;
    h->next = o->hooks;
    o->hooks = h;
    return DURO_OK;
}
