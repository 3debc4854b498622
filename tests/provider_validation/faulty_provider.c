/* faulty_provider.c - the fault-injecting wrapper provider: forwards every
 * method to an inner provider, counts calls, and fails the armed N-th call
 * itself (the inner provider never sees it). Any thread: counters are atomic,
 * the fault settings sit behind one mutex. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "faulty_provider.h"

typedef struct faulty_provider {
    duro_provider base; /* first member: a faulty_provider is a provider */
    duro_provider *inner;
    int own_inner;        /* close() closes inner */
    char name[64];        /* "faulty(<inner name>)" */
    pthread_mutex_t lock; /* guards countdown, fault_method, fault_retryable */
    uint64_t countdown;   /* matching calls until the fault; 0: disarmed */
    int fault_method;     /* faulty_method or FAULTY_ANY_METHOD */
    int fault_retryable;
    int always[FAULTY_METHOD_COUNT];    /* 0: off, 1: retryable, 2: permanent */
    void (*on_work_fetched)(void *arg); /* under lock */
    void *on_work_fetched_arg;
    faulty_hook_fn hooks[FAULTY_METHOD_COUNT]; /* under lock */
    void *hook_args[FAULTY_METHOD_COUNT];
    _Atomic uint64_t calls[FAULTY_METHOD_COUNT];
    _Atomic uint64_t fired;
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
    "read_activity_cancel_reason",
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

/* Counts the call and decides whether it is the one to fail; when it is,
 * fills err and returns 1. */
static int injected(faulty_provider *fp, faulty_method method, duro_error *err)
{
    atomic_fetch_add(&fp->calls[method], 1);
    int fire = 0, retryable = 0;
    pthread_mutex_lock(&fp->lock);
    if (fp->countdown > 0 && (fp->fault_method == FAULTY_ANY_METHOD ||
                              fp->fault_method == (int)method)) {
        if (--fp->countdown == 0) {
            fire = 1;
            retryable = fp->fault_retryable;
        }
    }
    if (!fire && method != FAULTY_WAKE && fp->always[method] != 0) {
        fire = 1;
        retryable = fp->always[method] == 1;
    }
    pthread_mutex_unlock(&fp->lock);
    if (!fire)
        return 0;
    atomic_fetch_add(&fp->fired, 1);
    duro_error_clear(err);
    duro_error_set(err, retryable ? DURO_BUSY : DURO_STORAGE, retryable,
                   "faulty_provider: injected %s failure of %s",
                   retryable ? "retryable" : "permanent", method_names[method]);
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

static void faulty_close(duro_provider *p)
{
    faulty_provider *fp = from(p);
    if (fp->own_inner)
        duro_provider_close(fp->inner);
    pthread_mutex_destroy(&fp->lock);
    free(fp);
}

static int faulty_fetch_orchestration_item(duro_provider *p,
                                           int64_t lock_timeout_ms,
                                           const duro_history_cache *cache,
                                           duro_orch_item **out,
                                           duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_FETCH_ORCHESTRATION_ITEM, err)) {
        if (out != NULL)
            *out = NULL;
        return err->code;
    }
    faulty_call call = {.method = FAULTY_FETCH_ORCHESTRATION_ITEM};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->fetch_orchestration_item(fp->inner, lock_timeout_ms,
                                                 cache, out, err);
    call.orch_item = rc == DURO_OK && out != NULL ? *out : NULL;
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_ack_orchestration_item(duro_provider *p,
                                         const char *lock_token,
                                         const duro_orch_ack *ack,
                                         duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_ACK_ORCHESTRATION_ITEM, err))
        return err->code;
    faulty_call call = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                        .lock_token = lock_token,
                        .ack = ack};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_orchestration_item(fp->inner, lock_token, ack, err);
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_abandon_orchestration_item(duro_provider *p,
                                             const char *lock_token,
                                             int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_ABANDON_ORCHESTRATION_ITEM, err))
        return err->code;
    return fp->inner->abandon_orchestration_item(fp->inner, lock_token,
                                                 delay_ms, err);
}

static int faulty_renew_orchestration_item_lock(duro_provider *p,
                                                const char *lock_token,
                                                int64_t extend_ms,
                                                duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK, err))
        return err->code;
    return fp->inner->renew_orchestration_item_lock(fp->inner, lock_token,
                                                    extend_ms, err);
}

static int faulty_enqueue_for_orchestrator(duro_provider *p,
                                           const duro_work_item *item,
                                           int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, err))
        return err->code;
    return fp->inner->enqueue_for_orchestrator(fp->inner, item, delay_ms, err);
}

static int faulty_fetch_work_item(duro_provider *p, int64_t lock_timeout_ms,
                                  duro_worker_item **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_FETCH_WORK_ITEM, err)) {
        if (out != NULL)
            *out = NULL;
        return err->code;
    }
    faulty_call call = {.method = FAULTY_FETCH_WORK_ITEM};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->fetch_work_item(fp->inner, lock_timeout_ms, out, err);
    call.work_item = rc == DURO_OK && out != NULL ? *out : NULL;
    run_hook(fp, &call, 1, rc);
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
    if (injected(fp, FAULTY_RENEW_WORK_ITEM_LOCK, err))
        return err->code;
    faulty_call call = {.method = FAULTY_RENEW_WORK_ITEM_LOCK,
                        .lock_token = lock_token};
    run_hook(fp, &call, 0, DURO_OK);
    int rc =
        fp->inner->renew_work_item_lock(fp->inner, lock_token, extend_ms, err);
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_ack_work_item(duro_provider *p, const char *lock_token,
                                const duro_work_item *completion,
                                duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_ACK_WORK_ITEM, err))
        return err->code;
    faulty_call call = {.method = FAULTY_ACK_WORK_ITEM,
                        .lock_token = lock_token,
                        .completion = completion};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_work_item(fp->inner, lock_token, completion, err);
    run_hook(fp, &call, 1, rc);
    return rc;
}

/* The version-2 combined methods count and fail as the ack they start
 * with, so "fail the n-th ack" holds whichever form the caller uses. */
static int faulty_ack_and_fetch_orchestration_item(
    duro_provider *p, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (next != NULL)
        *next = NULL;
    if (injected(fp, FAULTY_ACK_ORCHESTRATION_ITEM, err))
        return err->code;
    faulty_call call = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                        .lock_token = lock_token,
                        .ack = ack};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_and_fetch_orchestration_item(
        fp->inner, lock_token, ack, lock_timeout_ms, cache, next, err);
    call.orch_item = rc == DURO_OK && next != NULL ? *next : NULL;
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_ack_and_fetch_work_item(
    duro_provider *p, const char *lock_token, const duro_work_item *completion,
    int64_t lock_timeout_ms, duro_worker_item **next, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (next != NULL)
        *next = NULL;
    if (injected(fp, FAULTY_ACK_WORK_ITEM, err))
        return err->code;
    faulty_call call = {.method = FAULTY_ACK_WORK_ITEM,
                        .lock_token = lock_token,
                        .completion = completion};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->ack_and_fetch_work_item(
        fp->inner, lock_token, completion, lock_timeout_ms, next, err);
    call.work_item = rc == DURO_OK && next != NULL ? *next : NULL;
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_abandon_work_item(duro_provider *p, const char *lock_token,
                                    int64_t delay_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_ABANDON_WORK_ITEM, err))
        return err->code;
    faulty_call call = {.method = FAULTY_ABANDON_WORK_ITEM,
                        .lock_token = lock_token};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->abandon_work_item(fp->inner, lock_token, delay_ms, err);
    run_hook(fp, &call, 1, rc);
    return rc;
}

static int faulty_read_history(duro_provider *p, const char *instance_id,
                               uint64_t execution_id, duro_history **out,
                               duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_READ_HISTORY, err)) {
        if (out != NULL)
            *out = NULL;
        return err->code;
    }
    return fp->inner->read_history(fp->inner, instance_id, execution_id, out,
                                   err);
}

static int faulty_latest_execution_id(duro_provider *p, const char *instance_id,
                                      uint64_t *out, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_LATEST_EXECUTION_ID, err))
        return err->code;
    return fp->inner->latest_execution_id(fp->inner, instance_id, out, err);
}

static int faulty_get_instance(duro_provider *p, const char *instance_id,
                               duro_instance_list **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_GET_INSTANCE, err)) {
        if (out != NULL)
            *out = NULL;
        return err->code;
    }
    return fp->inner->get_instance(fp->inner, instance_id, out, err);
}

static int faulty_list_instances(duro_provider *p,
                                 const duro_instance_filter *filter,
                                 duro_instance_list **out, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_LIST_INSTANCES, err)) {
        if (out != NULL)
            *out = NULL;
        return err->code;
    }
    return fp->inner->list_instances(fp->inner, filter, out, err);
}

static int faulty_count_messages(duro_provider *p, duro_queue queue,
                                 const char *instance_id, uint64_t *out,
                                 duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_COUNT_MESSAGES, err))
        return err->code;
    return fp->inner->count_messages(fp->inner, queue, instance_id, out, err);
}

static int faulty_delete_instance(duro_provider *p, const char *instance_id,
                                  int force, size_t *deleted, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_DELETE_INSTANCE, err))
        return err->code;
    return fp->inner->delete_instance(fp->inner, instance_id, force, deleted,
                                      err);
}

static int faulty_prune_executions(duro_provider *p, const char *instance_id,
                                   uint64_t keep_last, size_t *pruned,
                                   duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_PRUNE_EXECUTIONS, err))
        return err->code;
    return fp->inner->prune_executions(fp->inner, instance_id, keep_last,
                                       pruned, err);
}

static int faulty_wait_for_work(duro_provider *p, duro_queue queue,
                                int64_t max_wait_ms, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_WAIT_FOR_WORK, err))
        return err->code;
    return fp->inner->wait_for_work(fp->inner, queue, max_wait_ms, err);
}

static int faulty_read_activity_cancel_reason(
    duro_provider *p, const char *instance_id, uint64_t execution_id,
    uint64_t activity_id, char *reason, size_t reason_size, duro_error *err)
{
    faulty_provider *fp = from(p);
    if (injected(fp, FAULTY_READ_ACTIVITY_CANCEL_REASON, err)) {
        if (reason != NULL && reason_size > 0)
            reason[0] = '\0';
        return err->code;
    }
    faulty_call call = {.method = FAULTY_READ_ACTIVITY_CANCEL_REASON};
    run_hook(fp, &call, 0, DURO_OK);
    int rc = fp->inner->read_activity_cancel_reason(fp->inner, instance_id,
                                                    execution_id, activity_id,
                                                    reason, reason_size, err);
    run_hook(fp, &call, 1, rc);
    return rc;
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

duro_provider *faulty_provider_wrap(duro_provider *inner, int own_inner)
{
    if (inner == NULL)
        return NULL;
    faulty_provider *fp = calloc(1, sizeof(*fp));
    if (fp == NULL)
        return NULL;
    fp->inner = inner;
    fp->own_inner = own_inner;
    pthread_mutex_init(&fp->lock, NULL);
    fp->fault_method = FAULTY_ANY_METHOD;
    for (int i = 0; i < FAULTY_METHOD_COUNT; i++)
        atomic_init(&fp->calls[i], 0);
    atomic_init(&fp->fired, 0);
    snprintf(fp->name, sizeof(fp->name), "faulty(%s)",
             inner->name ? inner->name : "?");
    fp->base.version = inner->version;
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
    if (inner->version >= 2) {
        FORWARD(ack_and_fetch_orchestration_item);
        FORWARD(ack_and_fetch_work_item);
    }
    if (inner->version >= 3)
        FORWARD(read_activity_cancel_reason);
    return &fp->base;
}

duro_provider *faulty_provider_inner(duro_provider *wrapper)
{
    return from(wrapper)->inner;
}

void faulty_provider_fail_nth(duro_provider *wrapper, uint64_t nth, int method,
                              int retryable)
{
    faulty_provider *fp = from(wrapper);
    pthread_mutex_lock(&fp->lock);
    fp->countdown = nth;
    fp->fault_method = method;
    fp->fault_retryable = retryable != 0;
    pthread_mutex_unlock(&fp->lock);
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
        uint64_t sum = 0;
        for (int i = 0; i < FAULTY_METHOD_COUNT; i++)
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
