/* faulty_provider.c - the fault-injecting wrapper provider: forwards every
 * method to an inner provider, counts calls, and fails armed calls either
 * itself (the inner provider never sees them) or after the inner provider
 * committed them (the reply is lost). Any thread: counters are atomic, the
 * fault settings sit behind one mutex. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faulty_provider.h"

typedef struct faulty_provider {
    duro_provider base; /* first member: a faulty_provider is a provider */
    duro_provider *inner;
    int own_inner;                      /* close() closes inner */
    char name[64];                      /* "faulty(<inner name>)" */
    pthread_mutex_t lock;               /* guards the fault settings below */
    faulty_fault plan[FAULTY_PLAN_MAX]; /* armed faults, in order */
    size_t plan_head, plan_tail;        /* plan[plan_head] is current */
    uint64_t countdown; /* matching calls until the current fault fires */
    uint64_t remaining; /* its failures left, the next one included */
    int always[FAULTY_METHOD_COUNT];    /* 0: off, 1: retryable, 2: permanent */
    int understate;                     /* understate the history cache */
    void (*on_work_fetched)(void *arg); /* under lock */
    void *on_work_fetched_arg;
    faulty_hook_fn hooks[FAULTY_METHOD_COUNT]; /* under lock */
    void *hook_args[FAULTY_METHOD_COUNT];
    _Atomic uint64_t calls[FAULTY_METHOD_COUNT];
    _Atomic uint64_t fired;
    _Atomic uint64_t discarded;
    _Atomic uint64_t max_batch;
    _Atomic uint64_t max_next; /* most next items a call asked for */
} faulty_provider;

static const char *const method_names[FAULTY_METHOD_COUNT] = {
    "fetch_orchestration_item",
    "ack_orchestration_item",
    "abandon_orchestration_item",
    "renew_orchestration_item_lock",
    "enqueue_for_orchestrator",
    "fetch_work_item",
    "renew_work_item_lock",
    "ack_work_item",
    "abandon_work_item",
    "read_history",
    "latest_execution_id",
    "get_instance",
    "list_instances",
    "count_messages",
    "delete_instance",
    "prune_executions",
    "wait_for_work",
    "wake",
    "ack_and_fetch_orchestration_item",
    "ack_and_fetch_work_item",
    "read_activity_cancel_reason",
    "set_instance_problem",
    "cancel_instances",
    "cancel_matching",
    "purge_instances",
    "read_store_stats",
    "check_work_item_locks",
    "control_instances",
    "control_matching",
    "ack_and_fetch_orchestration_items",
    "query_instances",
    "list_control_events",
    "next_due",
    "register_runtime",
    "list_runtimes",
    "remove_runtime",
    "pass_orchestration_item",
    "reset_instance",
    "create_schedule",
    "update_schedule",
    "delete_schedule",
    "get_schedule",
    "list_schedules",
    "due_schedules",
    "apply_schedule",
    "list_schedule_fires",
};

const char *faulty_method_name(int method)
{
    if (method < 0 || method >= FAULTY_METHOD_COUNT)
        return "?";
    return method_names[method];
}

static faulty_provider *from(duro_provider *p)
{
    return (faulty_provider *)p;
}

/* ---- the plan of armed faults (under fp->lock) ---- */

/* Makes the next fault of the plan current, if any. */
static void plan_load(faulty_provider *fp)
{
    if (fp->plan_head < fp->plan_tail) {
        const faulty_fault *c = &fp->plan[fp->plan_head];
        fp->countdown = c->nth;
        fp->remaining = c->count ? c->count : 1;
    } else {
        fp->countdown = fp->remaining = 0;
    }
}

static const faulty_fault *plan_current(faulty_provider *fp)
{
    return fp->plan_head < fp->plan_tail ? &fp->plan[fp->plan_head] : NULL;
}

static int plan_matches(const faulty_fault *c, faulty_method method, int ack)
{
    return c->method == FAULTY_ANY_METHOD || c->method == (int)method ||
           (ack >= 0 && c->method == ack);
}

/* One more matching call for the current fault; 1 when it fires now. */
static int plan_tick(faulty_provider *fp)
{
    if (fp->countdown == 0 || --fp->countdown > 0)
        return 0;
    if (--fp->remaining > 0) {
        fp->countdown = 1; /* the next matching call fails too */
    } else {
        fp->plan_head++;
        plan_load(fp);
    }
    return 1;
}

/* Runs the hook of call->method, if any, without the lock held. */
static void run_hook(faulty_provider *fp, faulty_call *call, int after, int rc)
{
    pthread_mutex_lock(&fp->lock);
    faulty_hook_fn fn = fp->hooks[call->method];
    void *arg = fp->hook_args[call->method];
    pthread_mutex_unlock(&fp->lock);
    call->after = after;
    call->rc = rc;
    if (fn != NULL)
        fn(arg, call);
}

/* What decide() and lost() chose for one call. */
typedef struct fault {
    int fire;         /* this call is to fail */
    int retryable;    /* ... with DURO_BUSY (1) or DURO_STORAGE (0) */
    int code;         /* another code to report instead; 0: none */
    faulty_when when; /* before the inner call or after its commit */
    faulty_method method;
    int ack; /* the ack a combined call also counts as; -1: none */
} fault;

/* Counts the call (a combined call also as `ack`, -1: none) and decides
 * whether it fails before reaching the inner provider. */
static void decide(faulty_provider *fp, faulty_method method, int ack, fault *f)
{
    memset(f, 0, sizeof(*f));
    f->method = method;
    f->ack = ack;
    atomic_fetch_add(&fp->calls[method], 1);
    if (ack >= 0)
        atomic_fetch_add(&fp->calls[ack], 1);
    pthread_mutex_lock(&fp->lock);
    const faulty_fault *c = plan_current(fp);
    if (c != NULL && c->when == FAULTY_BEFORE_CALL &&
        plan_matches(c, method, ack)) {
        int retryable = c->retryable, code = c->code;
        if (plan_tick(fp)) {
            f->fire = 1;
            f->retryable = retryable;
            f->code = code;
            f->when = FAULTY_BEFORE_CALL;
        }
    }
    int always = method == FAULTY_WAKE ? 0 : fp->always[method];
    if (always == 0 && ack >= 0)
        always = fp->always[ack];
    if (!f->fire && always != 0) {
        f->fire = 1;
        f->retryable = always == 1;
        f->when = FAULTY_BEFORE_CALL;
    }
    pthread_mutex_unlock(&fp->lock);
}

/* 1 when the fault strikes before the inner call. */
static int before(const fault *f)
{
    return f->fire && f->when == FAULTY_BEFORE_CALL;
}

/* After the inner call returned rc (and `item`: whether it returned an
 * item): 1 when the current after-commit fault strikes this call. Only
 * calls that succeeded - and returned an item, for
 * FAULTY_AFTER_COMMIT_WITH_ITEM - count toward it. The caller then clears
 * its out-parameters and returns finish(). */
static int lost(faulty_provider *fp, fault *f, int rc, int item)
{
    if (rc != DURO_OK)
        return 0;
    pthread_mutex_lock(&fp->lock);
    const faulty_fault *c = plan_current(fp);
    if (c != NULL && plan_matches(c, f->method, f->ack) &&
        (c->when == FAULTY_AFTER_COMMIT ||
         (c->when == FAULTY_AFTER_COMMIT_WITH_ITEM && item))) {
        int retryable = c->retryable, code = c->code;
        faulty_when when = c->when;
        if (plan_tick(fp)) {
            f->fire = 1;
            f->retryable = retryable;
            f->code = code;
            f->when = when;
        }
    }
    pthread_mutex_unlock(&fp->lock);
    return f->fire;
}

/* Fills err with the injected failure and returns its code. */
static int report(faulty_provider *fp, const fault *f, faulty_method method,
                  duro_error *err)
{
    atomic_fetch_add(&fp->fired, 1);
    duro_error_clear(err);
    return duro_error_set(
        err,
        f->code        ? f->code
        : f->retryable ? DURO_BUSY
                       : DURO_STORAGE,
        f->retryable,
        "faulty_provider: injected %s failure "
        "of %s%s",
        f->retryable ? "retryable" : "permanent", method_names[method],
        f->when != FAULTY_BEFORE_CALL ? " after it committed" : "");
}

/* The result of a call whose inner call returned rc: the injected failure
 * when an after-commit fault `struck` (see lost()), otherwise rc. */
static int finish(faulty_provider *fp, const fault *f, faulty_method method,
                  int rc, int struck, duro_error *err)
{
    return struck ? report(fp, f, method, err) : rc;
}

/* ---- understating the history cache ---- */

static uint64_t understated_events(void *user, const char *instance_id,
                                   uint64_t execution_id)
{
    const duro_history_cache *real = user;
    uint64_t n = real->cached_events(real->user, instance_id, execution_id);
    return n > 0 ? n - 1 : 0;
}

/* The cache to pass on: `cache` itself, or `tmp` wrapping it. */
static const duro_history_cache *pass_cache(faulty_provider *fp,
                                            const duro_history_cache *cache,
                                            duro_history_cache *tmp)
{
    pthread_mutex_lock(&fp->lock);
    int understate = fp->understate;
    pthread_mutex_unlock(&fp->lock);
    if (!understate || cache == NULL || cache->cached_events == NULL)
        return cache;
    tmp->cached_events = understated_events;
    tmp->user = (void *)cache;
    return tmp;
}

/* ---- the methods ---- */

static void faulty_close(duro_provider *p)
{
    faulty_provider *fp = from(p);
    if (fp->own_inner)
        duro_provider_close(fp->inner);
    pthread_mutex_destroy(&fp->lock);
    free(fp);
}

static void discard_orch_item(faulty_provider *fp, duro_orch_item **item)
{
    if (item != NULL && *item != NULL) {
        duro_orch_item_free(*item);
        *item = NULL;
        atomic_fetch_add(&fp->discarded, 1);
    }
}

static void discard_worker_item(faulty_provider *fp, duro_worker_item **item)
{
    if (item != NULL && *item != NULL) {
        duro_worker_item_free(*item);
        *item = NULL;
        atomic_fetch_add(&fp->discarded, 1);
    }
}

static int faulty_fetch_orchestration_item(duro_provider *p,
                                           int64_t lock_timeout_ms,
                                           const duro_history_cache *cache,
                                           duro_orch_item **out,
                                           duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_FETCH_ORCHESTRATION_ITEM, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_FETCH_ORCHESTRATION_ITEM, err);
    }
    faulty_call call = {.method = FAULTY_FETCH_ORCHESTRATION_ITEM};
    run_hook(fp, &call, 0, DURO_OK);
    duro_history_cache tmp;
    int rc = fp->inner->fetch_orchestration_item(
        fp->inner, lock_timeout_ms, pass_cache(fp, cache, &tmp), out, err);
    call.orch_item = rc == DURO_OK && out != NULL ? *out : NULL;
    run_hook(fp, &call, 1, rc);
    int struck = lost(fp, &f, rc, out != NULL && *out != NULL);
    if (struck)
        discard_orch_item(fp, out);
    return finish(fp, &f, FAULTY_FETCH_ORCHESTRATION_ITEM, rc, struck, err);
}

static int faulty_ack_orchestration_item(duro_provider *p,
                                         const char *lock_token,
                                         const duro_orch_ack *ack,
                                         duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_ACK_ORCHESTRATION_ITEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ACK_ORCHESTRATION_ITEM, err);
    faulty_call call = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                        .lock_token = lock_token,
                        .ack = ack};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_orchestration_item(fp->inner, lock_token, ack, err);
    run_hook(fp, &call, 1, rc);
    return finish(fp, &f, FAULTY_ACK_ORCHESTRATION_ITEM, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_abandon_orchestration_item(duro_provider *p,
                                             const char *lock_token,
                                             int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_ABANDON_ORCHESTRATION_ITEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ABANDON_ORCHESTRATION_ITEM, err);
    int rc = fp->inner->abandon_orchestration_item(fp->inner, lock_token,
                                                   delay_ms, err);
    return finish(fp, &f, FAULTY_ABANDON_ORCHESTRATION_ITEM, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_renew_orchestration_item_lock(duro_provider *p,
                                                const char *lock_token,
                                                int64_t extend_ms,
                                                duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK, err);
    int rc = fp->inner->renew_orchestration_item_lock(fp->inner, lock_token,
                                                      extend_ms, err);
    return finish(fp, &f, FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_enqueue_for_orchestrator(duro_provider *p,
                                           const duro_work_item *item,
                                           int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, err);
    int rc =
        fp->inner->enqueue_for_orchestrator(fp->inner, item, delay_ms, err);
    return finish(fp, &f, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_fetch_work_item(duro_provider *p, int64_t lock_timeout_ms,
                                  duro_worker_item **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_FETCH_WORK_ITEM, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_FETCH_WORK_ITEM, err);
    }
    faulty_call call = {.method = FAULTY_FETCH_WORK_ITEM};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->fetch_work_item(fp->inner, lock_timeout_ms, out, err);
    call.work_item = rc == DURO_OK && out != NULL ? *out : NULL;
    run_hook(fp, &call, 1, rc);
    int struck = lost(fp, &f, rc, out != NULL && *out != NULL);
    if (struck)
        discard_worker_item(fp, out);
    rc = finish(fp, &f, FAULTY_FETCH_WORK_ITEM, rc, struck, err);
    pthread_mutex_lock(&fp->lock);
    void (*fn)(void *) = fp->on_work_fetched;
    void *arg = fp->on_work_fetched_arg;
    pthread_mutex_unlock(&fp->lock);
    if (rc == DURO_OK && out != NULL && *out != NULL && fn != NULL)
        fn(arg);
    return rc;
}

static int faulty_renew_work_item_lock(duro_provider *p, const char *lock_token,
                                       int64_t extend_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_RENEW_WORK_ITEM_LOCK, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_RENEW_WORK_ITEM_LOCK, err);
    faulty_call call = {.method = FAULTY_RENEW_WORK_ITEM_LOCK,
                        .lock_token = lock_token};
    run_hook(fp, &call, 0, DURO_OK);
    int rc =
        fp->inner->renew_work_item_lock(fp->inner, lock_token, extend_ms, err);
    run_hook(fp, &call, 1, rc);
    return finish(fp, &f, FAULTY_RENEW_WORK_ITEM_LOCK, rc, lost(fp, &f, rc, 0),
                  err);
}

static int faulty_ack_work_item(duro_provider *p, const char *lock_token,
                                const duro_work_item *completion,
                                duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_ACK_WORK_ITEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ACK_WORK_ITEM, err);
    faulty_call call = {.method = FAULTY_ACK_WORK_ITEM,
                        .lock_token = lock_token,
                        .completion = completion};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_work_item(fp->inner, lock_token, completion, err);
    run_hook(fp, &call, 1, rc);
    return finish(fp, &f, FAULTY_ACK_WORK_ITEM, rc, lost(fp, &f, rc, 0), err);
}

/* The version-2 combined methods count and fail as the ack they start
 * with too, so "fail the n-th ack" holds whichever form the caller uses. An
 * after-commit fault loses the whole reply: the next item the inner call
 * locked is freed unseen and comes back when its lock expires. */
static int faulty_ack_and_fetch_orchestration_item(
    duro_provider *p, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (next != NULL)
        *next = NULL;
    fault f;
    decide(fp, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM,
           FAULTY_ACK_ORCHESTRATION_ITEM, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM, err);
    /* hooks: a combined call uses the hook of the ack it starts with */
    faulty_call call = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                        .lock_token = lock_token,
                        .ack = ack};
    run_hook(fp, &call, 0, DURO_OK);
    duro_history_cache tmp;
    int rc = fp->inner->ack_and_fetch_orchestration_item(
        fp->inner, lock_token, ack, lock_timeout_ms,
        pass_cache(fp, cache, &tmp), next, err);
    call.orch_item = rc == DURO_OK && next != NULL ? *next : NULL;
    run_hook(fp, &call, 1, rc);
    int struck = lost(fp, &f, rc, next != NULL && *next != NULL);
    if (struck)
        discard_orch_item(fp, next);
    return finish(fp, &f, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM, rc, struck,
                  err);
}

/* Version 7: the batch call counts and fails as itself (faults armed on
 * the one-turn acks do not strike it); one without acks is a fetch, and
 * counts and fails as fetch_orchestration_item. An after-commit fault
 * loses the whole reply: every next item is freed unseen. */
static int faulty_ack_and_fetch_orchestration_items(
    duro_provider *p, size_t n, const char *const *lock_tokens,
    const duro_orch_ack *acks, int64_t lock_timeout_ms,
    const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
    size_t *next_count, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (next_count != NULL)
        *next_count = 0;
    uint64_t seen = atomic_load(&fp->max_batch);
    while (n > seen &&
           !atomic_compare_exchange_weak(&fp->max_batch, &seen, (uint64_t)n))
        ;
    seen = atomic_load(&fp->max_next);
    while (max_next > seen && !atomic_compare_exchange_weak(
                                  &fp->max_next, &seen, (uint64_t)max_next))
        ;
    faulty_method method = n > 0 ? FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS
                                 : FAULTY_FETCH_ORCHESTRATION_ITEM;
    fault f;
    decide(fp, method, -1, &f);
    if (before(&f))
        return report(fp, &f, method, err);
    duro_history_cache tmp;
    int rc = fp->inner->ack_and_fetch_orchestration_items(
        fp->inner, n, lock_tokens, acks, lock_timeout_ms,
        pass_cache(fp, cache, &tmp), max_next, next, next_count, err);
    size_t got = rc == DURO_OK && next_count != NULL ? *next_count : 0;
    int struck = lost(fp, &f, rc, got > 0);
    if (struck) {
        for (size_t i = 0; i < got; i++)
            discard_orch_item(fp, &next[i]);
        *next_count = 0;
    }
    return finish(fp, &f, method, rc, struck, err);
}

static int faulty_ack_and_fetch_work_item(
    duro_provider *p, const char *lock_token, const duro_work_item *completion,
    int64_t lock_timeout_ms, duro_worker_item **next, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (next != NULL)
        *next = NULL;
    fault f;
    decide(fp, FAULTY_ACK_AND_FETCH_WORK_ITEM, FAULTY_ACK_WORK_ITEM, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ACK_AND_FETCH_WORK_ITEM, err);
    /* hooks: a combined call uses the hook of the ack it starts with */
    faulty_call call = {.method = FAULTY_ACK_WORK_ITEM,
                        .lock_token = lock_token,
                        .completion = completion};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_and_fetch_work_item(
        fp->inner, lock_token, completion, lock_timeout_ms, next, err);
    call.work_item = rc == DURO_OK && next != NULL ? *next : NULL;
    run_hook(fp, &call, 1, rc);
    int struck = lost(fp, &f, rc, next != NULL && *next != NULL);
    if (struck)
        discard_worker_item(fp, next);
    return finish(fp, &f, FAULTY_ACK_AND_FETCH_WORK_ITEM, rc, struck, err);
}

static int faulty_abandon_work_item(duro_provider *p, const char *lock_token,
                                    int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_ABANDON_WORK_ITEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_ABANDON_WORK_ITEM, err);
    faulty_call call = {.method = FAULTY_ABANDON_WORK_ITEM,
                        .lock_token = lock_token};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->abandon_work_item(fp->inner, lock_token, delay_ms, err);
    run_hook(fp, &call, 1, rc);
    return finish(fp, &f, FAULTY_ABANDON_WORK_ITEM, rc, lost(fp, &f, rc, 0),
                  err);
}

static int faulty_read_history(duro_provider *p, const char *instance_id,
                               uint64_t execution_id, duro_history **out,
                               duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_READ_HISTORY, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_READ_HISTORY, err);
    }
    int rc =
        fp->inner->read_history(fp->inner, instance_id, execution_id, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_history_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_READ_HISTORY, rc, struck, err);
}

static int faulty_latest_execution_id(duro_provider *p, const char *instance_id,
                                      uint64_t *out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_LATEST_EXECUTION_ID, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_LATEST_EXECUTION_ID, err);
    int rc = fp->inner->latest_execution_id(fp->inner, instance_id, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL)
        *out = 0;
    return finish(fp, &f, FAULTY_LATEST_EXECUTION_ID, rc, struck, err);
}

static int faulty_get_instance(duro_provider *p, const char *instance_id,
                               duro_instance_list **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_GET_INSTANCE, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_GET_INSTANCE, err);
    }
    int rc = fp->inner->get_instance(fp->inner, instance_id, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_instance_list_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_GET_INSTANCE, rc, struck, err);
}

static int faulty_list_instances(duro_provider *p,
                                 const duro_instance_filter *filter,
                                 duro_instance_list **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_LIST_INSTANCES, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_LIST_INSTANCES, err);
    }
    int rc = fp->inner->list_instances(fp->inner, filter, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_instance_list_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_LIST_INSTANCES, rc, struck, err);
}

static int faulty_count_messages(duro_provider *p, duro_queue queue,
                                 const char *instance_id, uint64_t *out,
                                 duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_COUNT_MESSAGES, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_COUNT_MESSAGES, err);
    int rc = fp->inner->count_messages(fp->inner, queue, instance_id, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL)
        *out = 0;
    return finish(fp, &f, FAULTY_COUNT_MESSAGES, rc, struck, err);
}

static int faulty_delete_instance(duro_provider *p, const char *instance_id,
                                  int force, size_t *deleted, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_DELETE_INSTANCE, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_DELETE_INSTANCE, err);
    int rc =
        fp->inner->delete_instance(fp->inner, instance_id, force, deleted, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && deleted != NULL)
        *deleted = 0;
    return finish(fp, &f, FAULTY_DELETE_INSTANCE, rc, struck, err);
}

static int faulty_prune_executions(duro_provider *p, const char *instance_id,
                                   uint64_t keep_last, size_t *pruned,
                                   duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_PRUNE_EXECUTIONS, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_PRUNE_EXECUTIONS, err);
    int rc = fp->inner->prune_executions(fp->inner, instance_id, keep_last,
                                         pruned, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && pruned != NULL)
        *pruned = 0;
    return finish(fp, &f, FAULTY_PRUNE_EXECUTIONS, rc, struck, err);
}

static int faulty_wait_for_work(duro_provider *p, duro_queue queue,
                                int64_t max_wait_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_WAIT_FOR_WORK, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_WAIT_FOR_WORK, err);
    int rc = fp->inner->wait_for_work(fp->inner, queue, max_wait_ms, err);
    return finish(fp, &f, FAULTY_WAIT_FOR_WORK, rc, lost(fp, &f, rc, 0), err);
}

static int faulty_read_activity_cancel_reason(
    duro_provider *p, const char *instance_id, uint64_t execution_id,
    uint64_t activity_id, char *reason, size_t reason_size, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_READ_ACTIVITY_CANCEL_REASON, -1, &f);
    if (before(&f)) {
        if (reason != NULL && reason_size > 0)
            reason[0] = '\0';
        return report(fp, &f, FAULTY_READ_ACTIVITY_CANCEL_REASON, err);
    }
    faulty_call call = {.method = FAULTY_READ_ACTIVITY_CANCEL_REASON};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->read_activity_cancel_reason(fp->inner, instance_id,
                                                    execution_id, activity_id,
                                                    reason, reason_size, err);
    run_hook(fp, &call, 1, rc);
    return finish(fp, &f, FAULTY_READ_ACTIVITY_CANCEL_REASON, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_set_instance_problem(duro_provider *p,
                                       const char *instance_id,
                                       const char *problem,
                                       int64_t next_attempt_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_SET_INSTANCE_PROBLEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_SET_INSTANCE_PROBLEM, err);
    int rc = fp->inner->set_instance_problem(fp->inner, instance_id, problem,
                                             next_attempt_ms, err);
    return finish(fp, &f, FAULTY_SET_INSTANCE_PROBLEM, rc, lost(fp, &f, rc, 0),
                  err);
}

/* Calls with one result per id (cancel_instances, control_instances):
 * count results of `size` bytes each, left zero by an injected failure.
 * ids_before reports a fault that struck before the inner call, ids_after
 * finishes one whose inner call returned rc. */
static int ids_before(faulty_provider *fp, const fault *f, void *results,
                      size_t count, size_t size, duro_error *err)
{
    if (results != NULL)
        memset(results, 0, count * size);
    return report(fp, f, f->method, err);
}

static int ids_after(faulty_provider *fp, fault *f, int rc, void *results,
                     size_t count, size_t size, duro_error *err)
{
    int struck = lost(fp, f, rc, 0);
    if (struck && results != NULL)
        memset(results, 0, count * size);
    return finish(fp, f, f->method, rc, struck, err);
}

/* Calls with a bulk result (*_matching, purge_instances), left NULL by an
 * injected failure. */
static int bulk_before(faulty_provider *fp, const fault *f,
                       duro_bulk_result **out, duro_error *err)
{
    if (out != NULL)
        *out = NULL;
    return report(fp, f, f->method, err);
}

static int bulk_after(faulty_provider *fp, fault *f, int rc,
                      duro_bulk_result **out, duro_error *err)
{
    int struck = lost(fp, f, rc, 0);
    if (struck && out != NULL) {
        duro_bulk_result_free(*out);
        *out = NULL;
    }
    return finish(fp, f, f->method, rc, struck, err);
}

static int faulty_cancel_instances(duro_provider *p,
                                   const char *const *instance_ids,
                                   size_t count, const char *reason,
                                   const char *requested_by,
                                   duro_cancel_result *results, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_CANCEL_INSTANCES, -1, &f);
    if (before(&f))
        return ids_before(fp, &f, results, count, sizeof(*results), err);
    int rc = fp->inner->cancel_instances(fp->inner, instance_ids, count, reason,
                                         requested_by, results, err);
    return ids_after(fp, &f, rc, results, count, sizeof(*results), err);
}

static int faulty_cancel_matching(duro_provider *p,
                                  const duro_bulk_filter *filter,
                                  const char *reason, const char *requested_by,
                                  int dry_run, size_t max_ids,
                                  duro_bulk_result **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_CANCEL_MATCHING, -1, &f);
    if (before(&f))
        return bulk_before(fp, &f, out, err);
    int rc = fp->inner->cancel_matching(fp->inner, filter, reason, requested_by,
                                        dry_run, max_ids, out, err);
    return bulk_after(fp, &f, rc, out, err);
}

static int faulty_purge_instances(duro_provider *p,
                                  const duro_bulk_filter *filter, int dry_run,
                                  size_t max_ids, duro_bulk_result **out,
                                  duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_PURGE_INSTANCES, -1, &f);
    if (before(&f))
        return bulk_before(fp, &f, out, err);
    int rc = fp->inner->purge_instances(fp->inner, filter, dry_run, max_ids,
                                        out, err);
    return bulk_after(fp, &f, rc, out, err);
}

static int faulty_control_instances(duro_provider *p, int control,
                                    const char *const *instance_ids,
                                    size_t count, const char *reason,
                                    const char *requested_by,
                                    duro_control_result *results,
                                    duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_CONTROL_INSTANCES, -1, &f);
    if (before(&f))
        return ids_before(fp, &f, results, count, sizeof(*results), err);
    int rc =
        fp->inner->control_instances(fp->inner, control, instance_ids, count,
                                     reason, requested_by, results, err);
    return ids_after(fp, &f, rc, results, count, sizeof(*results), err);
}

static int faulty_control_matching(duro_provider *p, int control,
                                   const duro_bulk_filter *filter,
                                   const char *reason, const char *requested_by,
                                   int dry_run, size_t max_ids,
                                   duro_bulk_result **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_CONTROL_MATCHING, -1, &f);
    if (before(&f))
        return bulk_before(fp, &f, out, err);
    int rc =
        fp->inner->control_matching(fp->inner, control, filter, reason,
                                    requested_by, dry_run, max_ids, out, err);
    return bulk_after(fp, &f, rc, out, err);
}

static int faulty_read_store_stats(duro_provider *p, duro_store_stats **out,
                                   duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_READ_STORE_STATS, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_READ_STORE_STATS, err);
    }
    int rc = fp->inner->read_store_stats(fp->inner, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_READ_STORE_STATS, rc, struck, err);
}

static int faulty_check_work_item_locks(duro_provider *p,
                                        const char *const *lock_tokens,
                                        size_t count, unsigned char *held,
                                        duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_CHECK_WORK_ITEM_LOCKS, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_CHECK_WORK_ITEM_LOCKS, err);
    int rc = fp->inner->check_work_item_locks(fp->inner, lock_tokens, count,
                                              held, err);
    return finish(fp, &f, FAULTY_CHECK_WORK_ITEM_LOCKS, rc, lost(fp, &f, rc, 0),
                  err);
}

static int faulty_query_instances(duro_provider *p,
                                  const duro_instance_query *q,
                                  duro_instance_page **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_QUERY_INSTANCES, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_QUERY_INSTANCES, err);
    }
    int rc = fp->inner->query_instances(fp->inner, q, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_instance_page_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_QUERY_INSTANCES, rc, struck, err);
}

static int faulty_list_control_events(duro_provider *p,
                                      const duro_control_event_query *q,
                                      duro_control_event_list **out,
                                      duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_LIST_CONTROL_EVENTS, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_LIST_CONTROL_EVENTS, err);
    }
    int rc = fp->inner->list_control_events(fp->inner, q, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_control_event_list_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_LIST_CONTROL_EVENTS, rc, struck, err);
}

static int faulty_next_due(duro_provider *p, int64_t *due_ms, int *any,
                           duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_NEXT_DUE, -1, &f);
    if (before(&f)) {
        if (any != NULL)
            *any = 0;
        if (due_ms != NULL)
            *due_ms = 0;
        return report(fp, &f, FAULTY_NEXT_DUE, err);
    }
    int rc = fp->inner->next_due(fp->inner, due_ms, any, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && any != NULL && due_ms != NULL) {
        *any = 0;
        *due_ms = 0;
    }
    return finish(fp, &f, FAULTY_NEXT_DUE, rc, struck, err);
}

static int faulty_register_runtime(duro_provider *p,
                                   const duro_runtime_info *info,
                                   duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_REGISTER_RUNTIME, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_REGISTER_RUNTIME, err);
    int rc = fp->inner->register_runtime(fp->inner, info, err);
    return finish(fp, &f, FAULTY_REGISTER_RUNTIME, rc, lost(fp, &f, rc, 0),
                  err);
}

static int faulty_list_runtimes(duro_provider *p, duro_runtime_list **out,
                                duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_LIST_RUNTIMES, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            *out = NULL;
        return report(fp, &f, FAULTY_LIST_RUNTIMES, err);
    }
    int rc = fp->inner->list_runtimes(fp->inner, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL) {
        duro_runtime_list_free(*out);
        *out = NULL;
    }
    return finish(fp, &f, FAULTY_LIST_RUNTIMES, rc, struck, err);
}

static int faulty_remove_runtime(duro_provider *p, const char *runtime_id,
                                 duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_REMOVE_RUNTIME, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_REMOVE_RUNTIME, err);
    int rc = fp->inner->remove_runtime(fp->inner, runtime_id, err);
    return finish(fp, &f, FAULTY_REMOVE_RUNTIME, rc, lost(fp, &f, rc, 0), err);
}

static int faulty_pass_orchestration_item(duro_provider *p,
                                          const char *lock_token,
                                          int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_PASS_ORCHESTRATION_ITEM, -1, &f);
    if (before(&f))
        return report(fp, &f, FAULTY_PASS_ORCHESTRATION_ITEM, err);
    int rc = fp->inner->pass_orchestration_item(fp->inner, lock_token, delay_ms,
                                                err);
    return finish(fp, &f, FAULTY_PASS_ORCHESTRATION_ITEM, rc,
                  lost(fp, &f, rc, 0), err);
}

static int faulty_reset_instance(duro_provider *p, const duro_reset_request *r,
                                 duro_reset_result *out, duro_error *err)
{
    faulty_provider *fp = from(p);
    fault f;
    decide(fp, FAULTY_RESET_INSTANCE, -1, &f);
    if (before(&f)) {
        if (out != NULL)
            memset(out, 0, sizeof(*out));
        return report(fp, &f, FAULTY_RESET_INSTANCE, err);
    }
    int rc = fp->inner->reset_instance(fp->inner, r, out, err);
    int struck = lost(fp, &f, rc, 0);
    if (struck && out != NULL)
        memset(out, 0, sizeof(*out));
    return finish(fp, &f, FAULTY_RESET_INSTANCE, rc, struck, err);
}

/* A write of version 13: the store's answer, or a fault before or after. */
#define FAULTY_WRITE(M, CALL)                                                  \
    faulty_provider *fp = from(p);                                             \
    fault f;                                                                   \
    decide(fp, M, -1, &f);                                                     \
    if (before(&f))                                                            \
        return report(fp, &f, M, err);                                         \
    int rc = CALL;                                                             \
    int struck = lost(fp, &f, rc, 0);                                          \
    return finish(fp, &f, M, rc, struck, err)

/* A read of version 13: an after-commit fault frees the answer. */
#define FAULTY_READ(M, FREE, CALL)                                             \
    faulty_provider *fp = from(p);                                             \
    fault f;                                                                   \
    decide(fp, M, -1, &f);                                                     \
    if (before(&f)) {                                                          \
        if (out != NULL)                                                       \
            *out = NULL;                                                       \
        return report(fp, &f, M, err);                                         \
    }                                                                          \
    int rc = CALL;                                                             \
    int struck = lost(fp, &f, rc, 0);                                          \
    if (struck && out != NULL) {                                               \
        FREE(*out);                                                            \
        *out = NULL;                                                           \
    }                                                                          \
    return finish(fp, &f, M, rc, struck, err)

static int faulty_create_schedule(duro_provider *p,
                                  const duro_schedule_record *r,
                                  duro_error *err)
{
    FAULTY_WRITE(FAULTY_CREATE_SCHEDULE,
                 fp->inner->create_schedule(fp->inner, r, err));
}

static int faulty_update_schedule(duro_provider *p,
                                  const duro_schedule_record *r,
                                  int64_t expected, int64_t *row_version,
                                  duro_error *err)
{
    FAULTY_WRITE(
        FAULTY_UPDATE_SCHEDULE,
        fp->inner->update_schedule(fp->inner, r, expected, row_version, err));
}

static int faulty_delete_schedule(duro_provider *p, const char *id,
                                  duro_error *err)
{
    FAULTY_WRITE(FAULTY_DELETE_SCHEDULE,
                 fp->inner->delete_schedule(fp->inner, id, err));
}

static int faulty_apply_schedule(duro_provider *p, const char *id,
                                 int64_t expected,
                                 const duro_schedule_action *actions, size_t n,
                                 const duro_schedule_record *after,
                                 int64_t *row_version, duro_error *err)
{
    FAULTY_WRITE(FAULTY_APPLY_SCHEDULE,
                 fp->inner->apply_schedule(fp->inner, id, expected, actions, n,
                                           after, row_version, err));
}

static int faulty_get_schedule(duro_provider *p, const char *id,
                               duro_schedule_list **out, duro_error *err)
{
    FAULTY_READ(FAULTY_GET_SCHEDULE, duro_schedule_list_free,
                fp->inner->get_schedule(fp->inner, id, out, err));
}

static int faulty_list_schedules(duro_provider *p, const char *after_id,
                                 size_t limit, duro_schedule_list **out,
                                 duro_error *err)
{
    FAULTY_READ(
        FAULTY_LIST_SCHEDULES, duro_schedule_list_free,
        fp->inner->list_schedules(fp->inner, after_id, limit, out, err));
}

static int faulty_due_schedules(duro_provider *p, int64_t now_ms, size_t limit,
                                duro_schedule_list **out, duro_error *err)
{
    FAULTY_READ(FAULTY_DUE_SCHEDULES, duro_schedule_list_free,
                fp->inner->due_schedules(fp->inner, now_ms, limit, out, err));
}

static int faulty_list_schedule_fires(duro_provider *p, const char *id,
                                      size_t limit,
                                      duro_schedule_fire_list **out,
                                      duro_error *err)
{
    FAULTY_READ(FAULTY_LIST_SCHEDULE_FIRES, duro_schedule_fire_list_free,
                fp->inner->list_schedule_fires(fp->inner, id, limit, out, err));
}

/* Passed through: the waits it tells of are not faults of their own. */
static int faulty_wait_for_cancellations(duro_provider *p, int64_t max_wait_ms,
                                         duro_error *err)
{
    faulty_provider *fp = from(p);
    return fp->inner->wait_for_cancellations(fp->inner, max_wait_ms, err);
}

static void faulty_wake(duro_provider *p, int sticky)
{
    faulty_provider *fp = from(p);
    atomic_fetch_add(&fp->calls[FAULTY_WAKE], 1);
    fp->inner->wake(fp->inner, sticky);
}

/* Keeps a method NULL when the inner provider leaves it NULL, so callers'
 * "version >= N and the pointer is set" checks see the inner provider. */
#define FORWARD(field) fp->base.field = inner->field ? faulty_##field : NULL

duro_provider *faulty_provider_wrap_version(duro_provider *inner, int own_inner,
                                            int version)
{
    if (inner == NULL)
        return NULL;
    faulty_provider *fp = calloc(1, sizeof(*fp));
    if (fp == NULL)
        return NULL;
    fp->inner = inner;
    fp->own_inner = own_inner;
    pthread_mutex_init(&fp->lock, NULL);
    for (int i = 0; i < FAULTY_METHOD_COUNT; i++)
        atomic_init(&fp->calls[i], 0);
    atomic_init(&fp->fired, 0);
    atomic_init(&fp->discarded, 0);
    atomic_init(&fp->max_batch, 0);
    atomic_init(&fp->max_next, 0);
    snprintf(fp->name, sizeof(fp->name), "faulty(%s)",
             inner->name ? inner->name : "?");
    fp->base.version = version < inner->version ? version : inner->version;
    fp->base.name = fp->name;
    fp->base.close = faulty_close;
    FORWARD(fetch_orchestration_item);
    FORWARD(ack_orchestration_item);
    FORWARD(abandon_orchestration_item);
    FORWARD(renew_orchestration_item_lock);
    FORWARD(enqueue_for_orchestrator);
    FORWARD(fetch_work_item);
    FORWARD(renew_work_item_lock);
    FORWARD(ack_work_item);
    FORWARD(abandon_work_item);
    FORWARD(read_history);
    FORWARD(latest_execution_id);
    FORWARD(get_instance);
    FORWARD(list_instances);
    FORWARD(count_messages);
    FORWARD(delete_instance);
    FORWARD(prune_executions);
    FORWARD(wait_for_work);
    FORWARD(wake);
    /* version 2: only read when the inner struct has those fields */
    if (fp->base.version >= 2) {
        FORWARD(ack_and_fetch_orchestration_item);
        FORWARD(ack_and_fetch_work_item);
    }
    if (inner->version >= 3)
        FORWARD(read_activity_cancel_reason);
    if (fp->base.version >= 4) {
        FORWARD(set_instance_problem);
        FORWARD(cancel_instances);
        FORWARD(cancel_matching);
        FORWARD(purge_instances);
        FORWARD(read_store_stats);
        FORWARD(check_work_item_locks);
        FORWARD(wait_for_cancellations);
    }
    if (fp->base.version >= 5) {
        FORWARD(control_instances);
        FORWARD(control_matching);
    }
    if (fp->base.version >= 7)
        FORWARD(ack_and_fetch_orchestration_items);
    if (fp->base.version >= 10) {
        FORWARD(query_instances);
        FORWARD(list_control_events);
    }
    if (fp->base.version >= 11)
        fp->base.turn_batch = inner->turn_batch;
    if (fp->base.version >= 12)
        FORWARD(next_due);
    if (fp->base.version >= 12) {
        FORWARD(register_runtime);
        FORWARD(list_runtimes);
        FORWARD(remove_runtime);
        FORWARD(pass_orchestration_item);
    }
    if (fp->base.version >= 13)
        FORWARD(reset_instance);
    if (fp->base.version >= 13) {
        FORWARD(create_schedule);
        FORWARD(update_schedule);
        FORWARD(delete_schedule);
        FORWARD(get_schedule);
        FORWARD(list_schedules);
        FORWARD(due_schedules);
        FORWARD(apply_schedule);
        FORWARD(list_schedule_fires);
    }
    return &fp->base;
}

duro_provider *faulty_provider_wrap(duro_provider *inner, int own_inner)
{
    if (inner == NULL)
        return NULL;
    return faulty_provider_wrap_version(
        inner, own_inner, inner->version < 6 ? inner->version : 6);
}

uint64_t faulty_provider_max_batch(duro_provider *wrapper)
{
    return atomic_load(&from(wrapper)->max_batch);
}

uint64_t faulty_provider_max_next(duro_provider *wrapper)
{
    return atomic_load(&from(wrapper)->max_next);
}

duro_provider *faulty_provider_inner(duro_provider *wrapper)
{
    return from(wrapper)->inner;
}

void faulty_provider_arm(duro_provider *wrapper, int method, uint64_t nth,
                         uint64_t count, int retryable, faulty_when when)
{
    faulty_provider *fp = from(wrapper);
    pthread_mutex_lock(&fp->lock);
    fp->plan_head = fp->plan_tail = 0;
    pthread_mutex_unlock(&fp->lock);
    if (nth > 0)
        faulty_provider_queue(wrapper, method, nth, count, retryable, when);
}

int faulty_provider_queue(duro_provider *wrapper, int method, uint64_t nth,
                          uint64_t count, int retryable, faulty_when when)
{
    faulty_fault f = {.method = method,
                      .nth = nth,
                      .count = count,
                      .retryable = retryable != 0,
                      .when = when};
    return faulty_provider_queue_fault(wrapper, &f);
}

int faulty_provider_queue_fault(duro_provider *wrapper, const faulty_fault *f)
{
    faulty_provider *fp = from(wrapper);
    if (f->nth == 0)
        return 0;
    pthread_mutex_lock(&fp->lock);
    if (fp->plan_head == fp->plan_tail)
        fp->plan_head = fp->plan_tail = 0; /* all fired: start over */
    int ok = fp->plan_tail < FAULTY_PLAN_MAX;
    if (ok) {
        fp->plan[fp->plan_tail] = *f;
        fp->plan[fp->plan_tail].retryable = f->retryable != 0;
        fp->plan_tail++;
        if (fp->plan_tail - fp->plan_head == 1)
            plan_load(fp);
    }
    pthread_mutex_unlock(&fp->lock);
    return ok;
}

void faulty_provider_fail_nth(duro_provider *wrapper, uint64_t nth, int method,
                              int retryable)
{
    faulty_provider_arm(wrapper, method, nth, 1, retryable, FAULTY_BEFORE_CALL);
}

void faulty_provider_fail_always(duro_provider *wrapper, int method,
                                 int retryable, int on)
{
    faulty_provider *fp = from(wrapper);
    if (method < 0 || method >= FAULTY_METHOD_COUNT)
        return;
    pthread_mutex_lock(&fp->lock);
    fp->always[method] = on ? (retryable ? 1 : 2) : 0;
    pthread_mutex_unlock(&fp->lock);
}

void faulty_provider_understate_cache(duro_provider *wrapper, int on)
{
    faulty_provider *fp = from(wrapper);
    pthread_mutex_lock(&fp->lock);
    fp->understate = on != 0;
    pthread_mutex_unlock(&fp->lock);
}

void faulty_provider_on_work_fetched(duro_provider *wrapper,
                                     void (*fn)(void *arg), void *arg)
{
    faulty_provider *fp = from(wrapper);
    pthread_mutex_lock(&fp->lock);
    fp->on_work_fetched = fn;
    fp->on_work_fetched_arg = arg;
    pthread_mutex_unlock(&fp->lock);
}

void faulty_provider_set_hook(duro_provider *wrapper, int method,
                              faulty_hook_fn fn, void *arg)
{
    faulty_provider *fp = from(wrapper);
    if (method < 0 || method >= FAULTY_METHOD_COUNT)
        return;
    pthread_mutex_lock(&fp->lock);
    fp->hooks[method] = fn;
    fp->hook_args[method] = arg;
    pthread_mutex_unlock(&fp->lock);
}

uint64_t faulty_provider_calls(duro_provider *wrapper, int method)
{
    faulty_provider *fp = from(wrapper);
    if (method == FAULTY_ANY_METHOD) {
        /* combined calls are already counted as their acks */
        uint64_t sum = 0;
        for (int i = 0; i < FAULTY_METHOD_COUNT; i++)
            if (i != FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM &&
                i != FAULTY_ACK_AND_FETCH_WORK_ITEM)
                sum += atomic_load(&fp->calls[i]);
        return sum;
    }
    if (method < 0 || method >= FAULTY_METHOD_COUNT)
        return 0;
    return atomic_load(&fp->calls[method]);
}

uint64_t faulty_provider_faults_fired(duro_provider *wrapper)
{
    return atomic_load(&from(wrapper)->fired);
}

uint64_t faulty_provider_items_discarded(duro_provider *wrapper)
{
    return atomic_load(&from(wrapper)->discarded);
}
