/* faulty_provider.h - a duro_provider that wraps another one, forwards every
 * method to it and can be told to fail the N-th call from now (of one method
 * or of any) retryably or permanently without reaching the inner provider.
 * Counts calls per method. Any thread; the fault settings are shared. */
#ifndef DURO_FAULTY_PROVIDER_H
#define DURO_FAULTY_PROVIDER_H

#include <stdint.h>

#include "duro/provider.h"

/* The wrapped methods that can fail, in table order. */
typedef enum faulty_method {
    FAULTY_FETCH_ORCHESTRATION_ITEM = 0,
    FAULTY_ACK_ORCHESTRATION_ITEM,
    FAULTY_ABANDON_ORCHESTRATION_ITEM,
    FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK,
    FAULTY_ENQUEUE_FOR_ORCHESTRATOR,
    FAULTY_FETCH_WORK_ITEM,
    FAULTY_RENEW_WORK_ITEM_LOCK,
    FAULTY_ACK_WORK_ITEM,
    FAULTY_ABANDON_WORK_ITEM,
    FAULTY_READ_HISTORY,
    FAULTY_LATEST_EXECUTION_ID,
    FAULTY_GET_INSTANCE,
    FAULTY_LIST_INSTANCES,
    FAULTY_COUNT_MESSAGES,
    FAULTY_DELETE_INSTANCE,
    FAULTY_PRUNE_EXECUTIONS,
    FAULTY_WAIT_FOR_WORK,
    FAULTY_WAKE, /* counted, never failed: wake() cannot report errors */
    FAULTY_READ_ACTIVITY_CANCEL_REASON, /* version 3 */
    FAULTY_METHOD_COUNT
} faulty_method;

#define FAULTY_ANY_METHOD (-1)

/** Wraps @p inner. With @p own_inner, closing the wrapper closes @p inner.
 * @return the wrapper, NULL when out of memory. @note Any thread. */
duro_provider *faulty_provider_wrap(duro_provider *inner, int own_inner);

/** The provider @p wrapper forwards to. */
duro_provider *faulty_provider_inner(duro_provider *wrapper);

/** Makes the @p nth call from now (1 = the next one) of @p method (or of any
 * failable method with FAULTY_ANY_METHOD) fail without calling the inner
 * provider: DURO_BUSY, retryable, when @p retryable, else DURO_STORAGE, not
 * retryable. The fault fires once. @p nth 0 disarms. @note Any thread. */
void faulty_provider_fail_nth(duro_provider *wrapper, uint64_t nth, int method,
                              int retryable);

/** While @p on, fails every call of @p method (not FAULTY_ANY_METHOD)
 * retryably or permanently, like faulty_provider_fail_nth(); @p on 0 turns
 * it off. For "renewal keeps failing" scenarios. @note Any thread. */
void faulty_provider_fail_always(duro_provider *wrapper, int method,
                                 int retryable, int on);

/** Calls @p fn(@p arg) on the calling thread each time fetch_work_item
 * returns an item, before it returns (NULL turns it off). For tests that
 * hold a worker between its fetch and its next step. @note Any thread. */
void faulty_provider_on_work_fetched(duro_provider *wrapper,
                                     void (*fn)(void *arg), void *arg);

/* What a hook sees of one call; only the fields of its method are set. */
typedef struct faulty_call {
    int method;                        /* faulty_method */
    int after;                         /* 0: before it is forwarded; 1: after */
    int rc;                            /* after: what the inner call returned */
    const char *lock_token;            /* acks, renewals, abandons */
    const duro_orch_ack *ack;          /* ack_orchestration_item, both forms */
    const duro_work_item *completion;  /* ack_work_item, both forms */
    const duro_orch_item *orch_item;   /* after: the item fetched (either form),
                                          NULL when none */
    const duro_worker_item *work_item; /* after: likewise for work items */
} faulty_call;

typedef void (*faulty_hook_fn)(void *arg, const faulty_call *call);

/** Calls @p fn(@p arg, call) on the calling thread twice per forwarded call
 * of @p method: before the inner provider is called and after it returned,
 * before the wrapper returns. Calls failed by an injected fault reach no
 * hook. The version-2 combined calls use the hook of the ack they start
 * with. Hooks exist for fetch_orchestration_item, ack_orchestration_item,
 * fetch_work_item, renew_work_item_lock, ack_work_item, abandon_work_item
 * and read_activity_cancel_reason. A hook may block, to hold a thread of
 * the code under test at a chosen point; it runs with no lock of the
 * wrapper held. One hook per method; @p fn NULL removes it.
 * @note Any thread. */
void faulty_provider_set_hook(duro_provider *wrapper, int method,
                              faulty_hook_fn fn, void *arg);

/** Calls of @p method so far, failed ones included (FAULTY_ANY_METHOD: of
 * all methods). */
uint64_t faulty_provider_calls(duro_provider *wrapper, int method);

/** How many injected faults have fired so far. */
uint64_t faulty_provider_faults_fired(duro_provider *wrapper);

/** "fetch_orchestration_item", ...; "?" when out of range. */
const char *faulty_method_name(int method);

#endif
