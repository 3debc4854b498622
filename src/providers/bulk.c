/* bulk.c - what both built-in providers share about their operations on
 * many instances: which message a cancel, terminate, suspend or resume
 * sends and to which statuses, the input checks of every bulk call, and
 * the outcome each id gets. The SQL stays with each provider. Pure
 * functions; any thread. */
#include <stddef.h>
#include <string.h>

#include "providers/providers.h"

/* One array of decisions is copied out as either result type. */
_Static_assert(sizeof(duro__bulk_decision) == sizeof(duro_cancel_result) &&
                   offsetof(duro__bulk_decision, outcome) ==
                       offsetof(duro_cancel_result, outcome) &&
                   offsetof(duro__bulk_decision, status) ==
                       offsetof(duro_cancel_result, status),
               "duro_cancel_result's layout");
_Static_assert(sizeof(duro__bulk_decision) == sizeof(duro_control_result) &&
                   offsetof(duro__bulk_decision, outcome) ==
                       offsetof(duro_control_result, outcome) &&
                   offsetof(duro__bulk_decision, status) ==
                       offsetof(duro_control_result, status),
               "duro_control_result's layout");
/* A sweep binds every status a mask may hold. */
_Static_assert(__builtin_popcount(DURO__LIVE_STATUSES) <=
                       DURO__BULK_STATUSES_MAX &&
                   __builtin_popcount(DURO__ENDED_STATUSES) <=
                       DURO__BULK_STATUSES_MAX,
               "DURO__BULK_STATUSES_MAX");

static int status_in(uint32_t mask, int status)
{
    return status >= 0 && status < 32 && ((mask >> status) & 1u) != 0;
}

const duro__bulk_request duro__bulk_cancel = {
    .kind = DURO_WORK_CANCEL_INSTANCE,
    .cancel = 1,
    .statuses = DURO__LIVE_STATUSES,
    .default_statuses = DURO__CANCEL_DEFAULT_STATUSES,
    .op_instances = "cancel_instances",
    .op_matching = "cancel_matching"};

duro__bulk_request duro__bulk_control(int control)
{
    duro__bulk_request r = {.control = control,
                            .op_instances = "control_instances",
                            .op_matching = "control_matching"};
    switch (control) {
    case DURO_CONTROL_TERMINATE:
        r.kind = DURO_WORK_TERMINATE_INSTANCE;
        r.statuses = DURO__LIVE_STATUSES;
        r.op_instances = "control_instances (terminate)";
        r.op_matching = "control_matching (terminate)";
        break;
    case DURO_CONTROL_SUSPEND:
        /* a Suspended instance is left out: suspending it changes nothing */
        r.kind = DURO_WORK_SUSPEND_INSTANCE;
        r.statuses = (1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_RUNNING);
        r.op_instances = "control_instances (suspend)";
        r.op_matching = "control_matching (suspend)";
        break;
    case DURO_CONTROL_RESUME:
        r.kind = DURO_WORK_RESUME_INSTANCE;
        r.statuses = 1u << DURO_STATUS_SUSPENDED;
        r.op_instances = "control_instances (resume)";
        r.op_matching = "control_matching (resume)";
        break;
    default:
        break;
    }
    return r;
}

static int check_control(const duro__bulk_request *r, const char *provider,
                         const char *op, duro_error *err)
{
    if (r->kind != 0)
        return DURO_OK;
    return duro_error_set(err, DURO_INVALID, 0,
                          "%s %s: unknown control %d (expected "
                          "DURO_CONTROL_TERMINATE, _SUSPEND or _RESUME)",
                          provider, op, r->control);
}

int duro__bulk_check_instances(const duro__bulk_request *r,
                               const char *provider,
                               const char *const *instance_ids, size_t count,
                               const char *reason, const char *requested_by,
                               void *results, duro__check_name_fn check,
                               const void *check_arg, duro_error *err)
{
    if (count > 0 && (instance_ids == NULL || results == NULL))
        return duro_error_set(err, DURO_INVALID, 0,
                              "instance_ids or results is NULL");
    if (count > 0 && count <= SIZE_MAX / sizeof(duro__bulk_decision))
        memset(results, 0, count * sizeof(duro__bulk_decision));
    int rc;
    if ((rc = check_control(r, provider, r->op_instances, err)) != DURO_OK ||
        count == 0)
        return rc;
    if (count > DURO_BULK_BATCH_MAX)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%zu ids in one call; at most %d", count,
                              DURO_BULK_BATCH_MAX);
    if ((rc = check(check_arg, "reason", reason, 0, err)) ||
        (rc = check(check_arg, "requested_by", requested_by, 0, err)))
        return rc;
    for (size_t i = 0; i < count; i++)
        if ((rc = check(check_arg, "instance id", instance_ids[i], 1, err)) !=
            DURO_OK)
            return rc;
    return DURO_OK;
}

/* The statuses of the mask into statuses[] (0: the `defaults`, or every
 * allowed one when those are 0); DURO_INVALID when it holds any outside
 * `allowed`. */
static int pick_statuses(uint32_t mask, uint32_t allowed, uint32_t defaults,
                         int statuses[DURO__BULK_STATUSES_MAX],
                         const char *provider, const char *op, duro_error *err)
{
    if (mask == 0)
        mask = defaults != 0 ? defaults : allowed;
    if ((mask & ~allowed) != 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: status_mask 0x%x holds statuses "
                              "this operation does not take (allowed: 0x%x)",
                              provider, op, (unsigned)mask, (unsigned)allowed);
    int n = 0;
    for (int st = 0; st < 32 && n < DURO__BULK_STATUSES_MAX; st++)
        if (mask & (1u << st))
            statuses[n++] = st;
    for (int i = n; i < DURO__BULK_STATUSES_MAX; i++)
        statuses[i] = statuses[0];
    return DURO_OK;
}

/* What every sweep checks first. */
static int check_sweep(const duro_bulk_filter *f, duro_bulk_result **out,
                       duro__check_name_fn check, const void *check_arg,
                       duro_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || f == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "filter or out is NULL");
    int rc;
    if ((rc = check(check_arg, "name filter", f->name, 0, err)) ||
        (rc = check(check_arg, "version filter", f->version, 0, err)))
        return rc;
    return DURO_OK;
}

int duro__bulk_check_matching(const duro__bulk_request *r, const char *provider,
                              const duro_bulk_filter *filter,
                              const char *reason, const char *requested_by,
                              duro_bulk_result **out,
                              int statuses[DURO__BULK_STATUSES_MAX],
                              duro__check_name_fn check, const void *check_arg,
                              duro_error *err)
{
    const char *op = r->op_matching;
    if (out != NULL)
        *out = NULL;
    int rc;
    if ((rc = check_control(r, provider, op, err)) ||
        (rc = check_sweep(filter, out, check, check_arg, err)) ||
        (rc = check(check_arg, "reason", reason, 0, err)) ||
        (rc = check(check_arg, "requested_by", requested_by, 0, err)))
        return rc;
    if (filter->finished_before_ms != 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: finished_before_ms selects finished "
                              "instances, which take no requests",
                              provider, op);
    return pick_statuses(filter->status_mask, r->statuses, r->default_statuses,
                         statuses, provider, op, err);
}

int duro__bulk_check_purge(const char *provider, const duro_bulk_filter *filter,
                           duro_bulk_result **out,
                           int statuses[DURO__BULK_STATUSES_MAX],
                           duro__check_name_fn check, const void *check_arg,
                           duro_error *err)
{
    static const char op[] = "purge_instances";
    int rc = check_sweep(filter, out, check, check_arg, err);
    if (rc != DURO_OK)
        return rc;
    if (filter->finished_before_ms <= 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: finished_before_ms is required "
                              "(INT64_MAX: any time)",
                              provider, op);
    return pick_statuses(filter->status_mask, DURO__ENDED_STATUSES, 0, statuses,
                         provider, op, err);
}

/* The outcome of a cancel for an instance at its first occurrence. */
static int cancel_outcome(int status, int pending)
{
    if (status == DURO_STATUS_NOT_FOUND)
        return DURO_CANCEL_NOT_FOUND;
    if (status_in(DURO__LIVE_STATUSES, status))
        return pending ? DURO_CANCEL_ALREADY_CANCELLED : DURO_CANCEL_REQUESTED;
    /* Terminated, like Completed and Failed, cannot be cancelled */
    return status == DURO_STATUS_CANCELLED ? DURO_CANCEL_ALREADY_CANCELLED
                                           : DURO_CANCEL_NOT_CANCELLABLE;
}

/* The outcome of a control for an instance at its first occurrence. */
static int control_outcome(int status)
{
    if (status == DURO_STATUS_NOT_FOUND)
        return DURO_CONTROL_OUTCOME_NOT_FOUND;
    return status_in(DURO__LIVE_STATUSES, status)
               ? DURO_CONTROL_OUTCOME_REQUESTED
               : DURO_CONTROL_OUTCOME_FINISHED;
}

void duro__bulk_split_open(duro__bulk_split *s, int json)
{
    memset(s, 0, sizeof(*s));
    s->json = json;
    duro__strbuf_open(&s->send, json ? '[' : '{');
    duro__strbuf_open(&s->decide, json ? '[' : '{');
}

void duro__bulk_split_add(duro__bulk_split *s, const char *id, int action)
{
    duro__strbuf *b = action == DURO__BULK_DECIDE ? &s->decide : &s->send;
    duro__strbuf_sep(b);
    if (s->json)
        duro__strbuf_json(b, id);
    else
        duro__strbuf_quoted(b, id);
    if (action == DURO__BULK_DECIDE)
        s->n_decide++;
    else
        s->n_send++;
}

int duro__bulk_split_close(duro__bulk_split *s)
{
    duro__strbuf_add(&s->send, s->json ? "]" : "}", 1);
    duro__strbuf_add(&s->decide, s->json ? "]" : "}", 1);
    return s->send.oom || s->decide.oom ? DURO_NOMEM : DURO_OK;
}

void duro__bulk_split_free(duro__bulk_split *s)
{
    duro__free(s->send.s);
    duro__free(s->decide.s);
}

int duro__bulk_decides_unbegun(const duro__bulk_request *r)
{
    return r->kind == DURO_WORK_CANCEL_INSTANCE ||
           r->kind == DURO_WORK_TERMINATE_INSTANCE ||
           r->kind == DURO_WORK_SUSPEND_INSTANCE;
}

int duro__bulk_decide(const duro__bulk_request *r, duro__bulk_decision *d,
                      int status, int pending, int first, int unbegun)
{
    d->status = status;
    int at_once = unbegun && status == DURO_STATUS_PENDING &&
                  duro__bulk_decides_unbegun(r);
    if (r->cancel) {
        d->outcome =
            first ? cancel_outcome(status, pending) : DURO_CANCEL_DUPLICATE;
        if (d->outcome != DURO_CANCEL_REQUESTED)
            return DURO__BULK_SKIP;
        if (!at_once)
            return DURO__BULK_SEND;
        d->outcome = DURO_CANCEL_CANCELLED;
        return DURO__BULK_DECIDE;
    }
    d->outcome =
        first ? control_outcome(status) : DURO_CONTROL_OUTCOME_DUPLICATE;
    if (d->outcome != DURO_CONTROL_OUTCOME_REQUESTED)
        return DURO__BULK_SKIP;
    if (!at_once)
        return DURO__BULK_SEND;
    d->outcome = DURO_CONTROL_OUTCOME_APPLIED;
    return DURO__BULK_DECIDE;
}
