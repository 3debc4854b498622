/* reset.c - reset_instance (provider contract version 13), written once:
 * in one write transaction it reads an ended instance's current execution,
 * decides the point and what stays pending (providers/reset_plan.c), and
 * writes execution n+1 - its history, the instance row (a compare-and-set
 * on the execution), a worker row per pending activity, a message per
 * pending timer, the DEADLINE message of the deadline it runs under, and
 * for each child without a result its rewind (the same steps, one level
 * down) or its ending sent again. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "providers/providers.h"
#include "base/tz.h"
#include "providers/sql/sql.h"

static int check_request(const duro__sql_store *st, const duro_reset_request *r,
                         duro_reset_result *out, duro_error *err)
{
    if (r == NULL || out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s reset_instance: %s",
                              st->dialect->name,
                              r == NULL ? "request is NULL" : "out is NULL");
    if (r->version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s reset_instance: request version %d "
                              "(duro_reset_request starts at 1)",
                              st->dialect->name, r->version);
    int rc = duro__sql_check_id(st, "instance id", r->instance_id, err);
    if (rc == DURO_OK)
        rc = duro__sql_check_name(st, "reason", r->reason, 0, err);
    if (rc == DURO_OK)
        rc = duro__sql_check_name(st, "requested_by", r->requested_by, 0, err);
    if (rc == DURO_OK && r->version >= 2 && r->deadline_ms != 0 &&
        r->deadline_ms != -1 &&
        (r->deadline_ms < 0 || r->deadline_ms > INT64_C(253402300799999) ||
         r->deadline_ms <= duro__wall_ms()))
        rc = duro_error_set(err, DURO_INVALID, 0,
                            "%s reset_instance: deadline_ms %" PRId64
                            " is neither 0 (keep), -1 (none) nor a time "
                            "after now before the year 10000",
                            st->dialect->name, r->deadline_ms);
    if (rc == DURO_OK && r->rewind && r->to_event_id != 0)
        rc = duro_error_set(err, DURO_INVALID, 0,
                            "%s reset_instance: a rewind goes to the last good "
                            "point; to_event_id must be 0 (it is %" PRIu64 ")",
                            st->dialect->name, r->to_event_id);
    return rc;
}

/* PostgreSQL locks the instance's readiness row before its instance row,
 * in the order a turn's ack takes them (pg_internal.h:
 * REQUEST_IDS_LOCK_READY); SQLite's one writer needs nothing. */
static int lock_ready(duro__sql_store *st, duro__sql_conn *c, const char *id,
                      const char *op, duro_error *err)
{
    if (!st->dialect->has(DURO__SQL_REQUEST_IDS_LOCK_READY))
        return DURO_OK;
    duro__strbuf b = {0};
    int json = st->dialect->ids_json;
    duro__strbuf_open(&b, json ? '[' : '{');
    if (json)
        duro__strbuf_json(&b, id);
    else
        duro__strbuf_quoted(&b, id);
    duro__strbuf_add(&b, json ? "]" : "}", 1);
    int rc = DURO_OK;
    if (b.oom) {
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    } else {
        duro__sql_stmt *s =
            duro__sql_prepare(st, c, DURO__SQL_REQUEST_IDS_LOCK_READY, op, err);
        if (s == NULL) {
            rc = err->code;
        } else {
            duro__sql_bind_text(st, c, s, 1, b.s);
            rc = duro__sql_run(st, c, s, op, err);
            if (rc == DURO_OK)
                duro__sql_reset(st, s);
        }
    }
    duro__free(b.s);
    return rc;
}

/* The instance's status, current execution and deadline (0: none);
 * DURO_NOT_FOUND when none. */
static int read_current(duro__sql_store *st, duro__sql_conn *c, const char *id,
                        uint64_t *execution, int *status, int64_t *deadline,
                        const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, id);
    int rc = duro__sql_step(st, c, s);
    if (rc == DURO__SQL_DONE) {
        duro__sql_reset(st, s);
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "instance '%s' does not exist", id);
    }
    if (rc != DURO__SQL_ROW)
        return duro__sql_error(st, c, rc, op, err);
    *execution = (uint64_t)duro__sql_column_int64(st, s, 0);
    *status = duro__sql_column_int(st, s, 1);
    *deadline = duro__sql_column_int64(st, s, 2);
    duro__sql_reset(st, s);
    return DURO_OK;
}

/* The refusals that the instance row alone decides. */
static int check_state(const duro_reset_request *r, uint64_t execution,
                       int status, duro_error *err)
{
    const char *verb = r->rewind ? "rewind" : "reset";
    if (r->rewind && status != DURO_STATUS_FAILED)
        return duro_error_set(err, DURO_INVALID_STATE, 0,
                              "cannot rewind instance '%s': it is %s; only a "
                              "Failed instance can be rewound (reset takes "
                              "any ended one)",
                              r->instance_id, duro_status_name(status));
    if (!duro_status_is_terminal(status))
        return duro_error_set(err, DURO_INVALID_STATE, 0,
                              "cannot %s instance '%s': it is %s; only an "
                              "ended instance (Completed, Failed, Cancelled, "
                              "Terminated) can be %s (terminate it first)",
                              verb, r->instance_id, duro_status_name(status),
                              r->rewind ? "rewound" : "reset");
    if (execution == 0)
        return duro_error_set(err, DURO_INVALID_STATE, 0,
                              "cannot %s instance '%s': it has no execution",
                              verb, r->instance_id);
    if (r->execution_id != 0 && r->execution_id != execution)
        return duro_error_set(err, DURO_INVALID_STATE, 0,
                              "cannot %s instance '%s' execution %" PRIu64
                              ": its current execution is %" PRIu64
                              " (only the current one can be %s; another "
                              "reset may have come first)",
                              verb, r->instance_id, r->execution_id, execution,
                              r->rewind ? "rewound" : "reset");
    return DURO_OK;
}

/* The deadline execution n+1 runs under (0: none) into *out: the
 * request's, else the instance's own `stored`, which must not have
 * passed - a reset would end at its first turn, so the caller chooses. */
static int decide_deadline(const duro_reset_request *r, int64_t stored,
                           int64_t now, int64_t *out, duro_error *err)
{
    int64_t want = r->version >= 2 ? r->deadline_ms : 0;
    *out = want == -1 ? 0 : want > 0 ? want : stored;
    if (want != 0 || stored <= 0 || stored > now)
        return DURO_OK;
    char at[40];
    duro__format_utc(at, sizeof(at), stored);
    return duro_error_set(err, DURO_INVALID_STATE, 0,
                          "cannot %s instance '%s': its deadline (%s) has "
                          "passed, so it would end again at once; give it a "
                          "new deadline or none",
                          r->rewind ? "rewind" : "reset", r->instance_id, at);
}

/* Execution n+1's history: events 1 .. P of `ev` and the ExecutionReset. */
static int write_history(duro__sql_store *st, duro__sql_conn *c,
                         const duro_reset_request *r, const duro_event *ev,
                         uint64_t point, uint64_t from, uint64_t relink,
                         int64_t now, const char *op, duro_error *err)
{
    duro_event *events = duro__malloc(((size_t)point + 1) * sizeof(*events));
    if (events == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    memcpy(events, ev, (size_t)point * sizeof(*events));
    /* a rewound child reports to its parent's new execution: the engine
     * takes the parent link from OrchestrationStarted */
    if (relink != 0)
        events[0].ref_execution = relink;
    events[point] = (duro_event){
        .event_id = point + 1,
        .kind = DURO_EVENT_EXECUTION_RESET,
        .timestamp_ms = now,
        .reason = r->reason,
        .requested_by = r->requested_by,
        .ref_execution = from,
        .ref_event_id = point,
        .flags = r->rewind ? DURO_RESET_REWIND : 0,
    };
    size_t count = (size_t)point + 1;
    int rc = DURO_OK;
    if (st->dialect->insert_events != NULL)
        rc = st->dialect->insert_events(st, c, r->instance_id, from + 1, events,
                                        count, op, err);
    else
        for (size_t i = 0; i < count && rc == DURO_OK; i++)
            rc = duro__sql_insert_history(st, c, r->instance_id, from + 1,
                                          &events[i], op, err);
    duro__free(events);
    return rc;
}

/* The writes of the reset, in order: the instance row (its CAS), the
 * execution row, history, worker rows, timer messages. */
/* How deep rewound children may nest under the instance reset. */
#define RESET_DEPTH_MAX 16

/* One instance's reset inside the transaction (the instance reset, or a
 * child rewound with it, one level deeper). */
typedef struct reset_step {
    const duro_reset_request *r;
    uint64_t relink; /* a child: its parent's new execution; 0: none */
    int depth;
    int64_t now;
    duro_arena *arena;
    const char *op;
} reset_step;

static int reset_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                const reset_step *step, duro_reset_result *out,
                                duro_error *err);

/* The ending of an ended child, from its last event, as its parent gets
 * it (engine.c's duro__engine_finish sends the same). */
static int child_ending(const duro_event *last, const char *child,
                        const char *parent, uint64_t execution, uint64_t source,
                        duro_arena *a, duro_work_item *it)
{
    memset(it, 0, sizeof(*it));
    it->instance_id = parent;
    it->execution_id = execution;
    it->source_id = source;
    char buf[DURO__SQL_NAME_MAX + 128];
    switch (last->kind) {
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
        it->kind = DURO_WORK_CHILD_COMPLETED;
        it->payload = last->payload;
        return 1;
    case DURO_EVENT_ORCHESTRATION_FAILED:
        it->kind = DURO_WORK_CHILD_FAILED;
        it->error = last->error ? last->error : "failed";
        it->category =
            last->category ? last->category : DURO_CATEGORY_APPLICATION;
        return 1;
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
    case DURO_EVENT_ORCHESTRATION_TERMINATED:
        snprintf(buf, sizeof(buf), "child '%s' was %s: %s", child,
                 last->kind == DURO_EVENT_ORCHESTRATION_CANCELLED
                     ? "cancelled"
                     : "terminated",
                 last->reason ? last->reason : "");
        it->kind = DURO_WORK_CHILD_FAILED;
        it->error = duro_arena_strdup(a, buf);
        it->category = DURO_CATEGORY_CANCELLED;
        return it->error != NULL;
    default:
        return 0;
    }
}

/* A child scheduled at `sched` (of the parent step->r, execution `from`)
 * without a result in the kept events: rewound with a rewind when it
 * Failed, else its ending sent to the parent's new execution. */
static int settle_child(duro__sql_store *st, duro__sql_conn *c,
                        const reset_step *step, const duro_event *sched,
                        uint64_t from, duro_error *err)
{
    const duro_reset_request *r = step->r;
    const char *kid = sched->ref_instance ? sched->ref_instance : "";
    uint64_t kid_execution = 0;
    int kid_status = 0;
    int64_t kid_deadline = 0;
    int rc = kid[0] == '\0'
                 ? DURO_NOT_FOUND
                 : read_current(st, c, kid, &kid_execution, &kid_status,
                                &kid_deadline, step->op, err);
    if (rc == DURO_NOT_FOUND)
        return duro_error_set(
            err, DURO_INVALID, 0,
            "cannot reset instance '%s' execution %" PRIu64
            ": sub-orchestration '%s' (event %" PRIu64
            ") has no result in the kept events and no longer exists",
            r->instance_id, from, kid, sched->event_id);
    if (rc != DURO_OK)
        return rc;
    if (!duro_status_is_terminal(kid_status) || kid_execution == 0)
        return duro_error_set(
            err, DURO_INVALID, 0,
            "cannot reset instance '%s' execution %" PRIu64
            ": sub-orchestration '%s' (event %" PRIu64
            ") has no result in the kept events and is %s, so its result "
            "would go to execution %" PRIu64
            "; wait for it to end (or terminate it), or reset to a point "
            "before event %" PRIu64,
            r->instance_id, from, kid, sched->event_id,
            duro_status_name(kid_status), from, sched->event_id);
    if (r->rewind && kid_status == DURO_STATUS_FAILED) {
        if (step->depth + 1 > RESET_DEPTH_MAX)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "cannot rewind instance '%s': its failed "
                                  "sub-orchestrations nest more than %d deep",
                                  r->instance_id, RESET_DEPTH_MAX);
        duro_reset_request kr = *r;
        kr.instance_id = kid;
        kr.execution_id = 0;
        kr.to_event_id = 0;
        reset_step ks = *step;
        ks.r = &kr;
        ks.relink = from + 1;
        ks.depth = step->depth + 1;
        duro_reset_result ignored;
        return reset_in_transaction(st, c, &ks, &ignored, err);
    }
    duro_event *kev = NULL;
    size_t kn = 0;
    rc = duro__sql_read_events(st, c, step->arena, kid, kid_execution, 0, &kev,
                               &kn, step->op, err);
    if (rc != DURO_OK)
        return rc;
    duro_work_item it;
    if (kn == 0 || !child_ending(&kev[kn - 1], kid, r->instance_id, from + 1,
                                 sched->event_id, step->arena, &it))
        return duro_error_set(err, DURO_INVALID, 0,
                              "cannot reset instance '%s' execution %" PRIu64
                              ": sub-orchestration '%s' (event %" PRIu64
                              ") is %s but its history holds no ending",
                              r->instance_id, from, kid, sched->event_id,
                              duro_status_name(kid_status));
    if (r->dry_run)
        return DURO_OK;
    return duro__sql_insert_message(st, c, &it, step->now, step->now, step->op,
                                    err);
}

/* The writes of the reset, in order: the instance row (its CAS), the
 * execution row, history, worker rows, timer messages, the wake-up. */
static int write_reset(duro__sql_store *st, duro__sql_conn *c,
                       const reset_step *step, const duro_event *ev,
                       const duro__reset_plan *plan, uint64_t from,
                       int64_t deadline, duro_error *err)
{
    const duro_reset_request *r = step->r;
    const char *op = step->op;
    int64_t now = step->now;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_RESET_INSTANCE, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, r->instance_id);
    duro__sql_bind_u64(st, c, s, 2, from + 1);
    duro__sql_bind_u64(st, c, s, 3, from);
    duro__sql_bind_i64(st, c, s, 4, now);
    duro__sql_bind_u64(st, c, s, 5, step->relink);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_changes(st, c) != 1)
        return duro_error_set(err, DURO_INVALID_STATE, 0,
                              "cannot reset instance '%s' execution %" PRIu64
                              ": it changed while the reset ran (another "
                              "reset came first)",
                              r->instance_id, from);
    duro_instance_meta m = {.status = DURO_STATUS_RUNNING,
                            .name = ev[0].name,
                            .version = ev[0].version};
    rc = duro__sql_create_execution(st, c, r->instance_id, from + 1, &m, now,
                                    op, err);
    if (rc == DURO_OK)
        rc = write_history(st, c, r, ev, plan->point, from, step->relink, now,
                           op, err);
    for (size_t i = 0; i < plan->activity_count && rc == DURO_OK; i++) {
        const duro_event *a = &ev[plan->activities[i]];
        duro_work_item it = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                             .instance_id = r->instance_id,
                             .execution_id = from + 1,
                             .source_id = a->event_id,
                             .name = a->name,
                             .payload = a->payload,
                             .attempt = a->attempt};
        rc = duro__sql_insert_work(st, c, &it, from + 1, now, op, err);
    }
    for (size_t i = 0; i < plan->timer_count && rc == DURO_OK; i++) {
        const duro_event *t = &ev[plan->timers[i]];
        duro_work_item it = {.kind = DURO_WORK_TIMER_FIRED,
                             .instance_id = r->instance_id,
                             .execution_id = from + 1,
                             .source_id = t->event_id,
                             .fire_at_ms = t->fire_at_ms};
        rc = duro__sql_insert_message(st, c, &it, now,
                                      DURO__MAX(now, t->fire_at_ms), op, err);
    }
    /* The deadline: RESET_INSTANCE cleared the row's, and its DEADLINE
     * message (the one a start enqueues; the instance's ending dropped
     * it) sets it again, so status shows what execution n+1 runs under */
    if (rc == DURO_OK && deadline > 0) {
        duro_work_item d = {.kind = DURO_WORK_DEADLINE,
                            .instance_id = r->instance_id,
                            .fire_at_ms = deadline};
        rc = duro__sql_insert_message(st, c, &d, now, DURO__MAX(now, deadline),
                                      op, err);
    }
    /* A turn of n+1 at once, whatever is pending: the code answers there
     * an input the kept events hold unanswered (one a turn decided
     * without code recorded, before a terminate), and a nondeterminism of
     * the current code shows now, not at the next message. A resume of
     * an execution that is not suspended records nothing. */
    if (rc == DURO_OK) {
        duro_work_item wake = {.kind = DURO_WORK_RESUME_INSTANCE,
                               .instance_id = r->instance_id,
                               .reason = r->reason,
                               .requested_by = r->requested_by};
        rc = duro__sql_insert_message(st, c, &wake, now, now, op, err);
    }
    return rc;
}

static int reset_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                const reset_step *step, duro_reset_result *out,
                                duro_error *err)
{
    const duro_reset_request *r = step->r;
    uint64_t from = 0;
    int status = 0;
    int64_t stored_deadline = 0, deadline = 0;
    duro_event *ev = NULL;
    size_t n = 0;
    duro__reset_plan plan = {0};
    int rc = lock_ready(st, c, r->instance_id, step->op, err);
    if (rc == DURO_OK)
        rc = read_current(st, c, r->instance_id, &from, &status,
                          &stored_deadline, step->op, err);
    if (rc == DURO_OK)
        rc = check_state(r, from, status, err);
    if (rc == DURO_OK)
        rc = decide_deadline(r, stored_deadline, step->now, &deadline, err);
    if (rc == DURO_OK)
        rc = duro__sql_read_events(st, c, step->arena, r->instance_id, from, 0,
                                   &ev, &n, step->op, err);
    if (rc == DURO_OK && n == 0)
        rc = duro_error_set(err, DURO_INVALID_STATE, 0,
                            "cannot reset instance '%s': execution %" PRIu64
                            " has no history",
                            r->instance_id, from);
    if (rc == DURO_OK)
        rc = duro__reset_decide(ev, n, r->instance_id, from, r->to_event_id,
                                &plan, err);
    /* children first: a refusal there is the likelier, and a dry run
     * checks them all the same */
    for (size_t i = 0; i < plan.child_count && rc == DURO_OK; i++)
        rc = settle_child(st, c, step, &ev[plan.children[i]], from, err);
    if (rc == DURO_OK && !r->dry_run)
        rc = write_reset(st, c, step, ev, &plan, from, deadline, err);
    if (rc == DURO_OK)
        *out = (duro_reset_result){.status = status,
                                   .from_execution = from,
                                   .execution_id = from + 1,
                                   .to_event_id = plan.point,
                                   .activities = (uint32_t)plan.activity_count,
                                   .timers = (uint32_t)plan.timer_count,
                                   .children = (uint32_t)plan.child_count};
    duro__reset_plan_free(&plan);
    return rc;
}

int duro__sql_reset_instance(duro_provider *base, const duro_reset_request *r,
                             duro_reset_result *out, duro_error *err)
{
    static const char op[] = "reset_instance";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    int rc = check_request(st, r, out, err);
    if (rc != DURO_OK)
        return rc;
    duro_arena *a = duro_arena_create();
    if (a == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    reset_step step = {.r = r, .now = duro__wall_ms(), .arena = a, .op = op};
    duro_reset_result res;
    memset(&res, 0, sizeof(res));
    rc = reset_in_transaction(st, c, &step, &res, err);
    if (rc != DURO_OK || r->dry_run)
        duro__sql_write_rollback(st, c);
    else
        rc = duro__sql_write_commit(st, c, op, err);
    if (rc == DURO_OK) {
        *out = res;
        /* a wake-up for each queue written (a child's rows included) */
        if (!r->dry_run) {
            duro__sql_signal(st, DURO_QUEUE_WORKER, 1);
            duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, 1);
        }
    }
    duro_arena_destroy(a);
    return rc;
}
