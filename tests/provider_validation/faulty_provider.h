/* faulty_provider.h - a duro_provider that wraps another one, forwards every
 * method to it and can be told to fail calls retryably or permanently:
 * either before the call reaches the inner provider (nothing changes), or
 * after the inner provider committed it (the reply is lost: the change
 * stands, the caller sees an error). Counts calls per method and can present
 * an older contract version. Any thread; the fault settings are shared. */
#ifndef DURO_FAULTY_PROVIDER_H
#define DURO_FAULTY_PROVIDER_H

#include <stdint.h>

#include "duro/provider.h"

/* The wrapped methods that can fail, in table order. Append-only. */
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
    /* Version 2. A combined call also counts as the ack it starts with and
     * is failed by faults armed on that ack, so "fail the n-th ack" holds
     * whichever form the caller uses; a fault armed on one of these two
     * matches the combined form only. */
    FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM,
    FAULTY_ACK_AND_FETCH_WORK_ITEM,
    FAULTY_READ_ACTIVITY_CANCEL_REASON, /* version 3 */
    /* version 4 */
    FAULTY_SET_INSTANCE_PROBLEM,
    FAULTY_CANCEL_INSTANCES,
    FAULTY_CANCEL_MATCHING,
    FAULTY_PURGE_INSTANCES,
    FAULTY_READ_STORE_STATS,
    FAULTY_CHECK_WORK_ITEM_LOCKS,
    /* version 5 */
    FAULTY_CONTROL_INSTANCES,
    FAULTY_CONTROL_MATCHING,
    /* version 7: counted and failed as itself, not as the acks it holds;
     * a call without acks counts and fails as FAULTY_FETCH_ORCHESTRATION_ITEM
     */
    FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS,
    /* version 10: reads; an after-commit fault drops the page */
    FAULTY_QUERY_INSTANCES,
    FAULTY_LIST_CONTROL_EVENTS,
    /* version 12: a read; an after-commit fault drops the answer */
    FAULTY_NEXT_DUE,
    FAULTY_REGISTER_RUNTIME,
    FAULTY_LIST_RUNTIMES,
    FAULTY_REMOVE_RUNTIME,
    FAULTY_PASS_ORCHESTRATION_ITEM,
    FAULTY_RESET_INSTANCE,
    /* version 13: schedules; an after-commit fault of a read drops the
     * list, of a write loses the answer (the write stands) */
    FAULTY_CREATE_SCHEDULE,
    FAULTY_UPDATE_SCHEDULE,
    FAULTY_DELETE_SCHEDULE,
    FAULTY_GET_SCHEDULE,
    FAULTY_LIST_SCHEDULES,
    FAULTY_DUE_SCHEDULES,
    FAULTY_APPLY_SCHEDULE,
    FAULTY_LIST_SCHEDULE_FIRES,
    FAULTY_METHOD_COUNT
} faulty_method;

#define FAULTY_ANY_METHOD (-1)

/* When an armed fault strikes. Append-only. */
typedef enum faulty_when {
    /* The call fails without reaching the inner provider: nothing changes. */
    FAULTY_BEFORE_CALL = 0,
    /* The inner provider runs the call; when it succeeds (committed), the
     * caller gets the failure anyway, as when a connection drops after
     * COMMIT was sent. Out-parameters are cleared; an item the call fetched
     * (fetch_*, the next item of ack_and_fetch_*) is freed unseen: its lock
     * is held by a token nobody has, so it comes back only when that lock
     * expires, with its delivery count raised - what a real lost reply
     * does. A call whose inner call fails returns that error and does not
     * count toward the fault. */
    FAULTY_AFTER_COMMIT = 1,
    /* Like FAULTY_AFTER_COMMIT, but only a call that returned an item (a
     * fetch that found one, an ack-and-fetch with a next item) is struck;
     * other matching calls go through and the fault stays armed. For tests
     * that must lose an item, whatever the timing. */
    FAULTY_AFTER_COMMIT_WITH_ITEM = 2
} faulty_when;

/* One armed fault: the nth matching call from the moment it becomes
 * current, and the count - 1 matching calls after it (count 0 counts as
 * 1), fail retryably or permanently, at the moment `when` says. For
 * after-commit faults only calls that succeeded (and returned an item, for
 * FAULTY_AFTER_COMMIT_WITH_ITEM) count as matching. */
typedef struct faulty_fault {
    int method; /* faulty_method or FAULTY_ANY_METHOD */
    uint64_t nth;
    uint64_t count;
    int retryable;
    faulty_when when;
    int code; /* 0: DURO_BUSY when retryable, else DURO_STORAGE; or the
                 DURO_* code to report (DURO_LOCK_LOST, ...), with
                 `retryable` as its flag */
} faulty_fault;

#define FAULTY_PLAN_MAX 32

/** Wraps @p inner, presenting its contract version but at most 6: the
 * runtime then acks one turn per call, which the hooks and the ack faults
 * of tests observe. The version-7 batch call
 * (ack_and_fetch_orchestration_items) is wrapped only when
 * faulty_provider_wrap_version() asks for version 7 or later. With
 * @p own_inner, closing the wrapper closes @p inner.
 * @return the wrapper, NULL when out of memory. @note Any thread. */
duro_provider *faulty_provider_wrap(duro_provider *inner, int own_inner);

/** Like faulty_provider_wrap(), but the wrapper presents contract version
 * @p version (at most the inner provider's): methods of later versions stay
 * NULL, so callers take their fallback paths (version 1: separate ack and
 * fetch calls; below 4: no bulk operations, no problems recorded; below
 * 5: no terminate, suspend or resume).
 * @note Any thread. */
duro_provider *faulty_provider_wrap_version(duro_provider *inner, int own_inner,
                                            int version);

/** The provider @p wrapper forwards to. */
duro_provider *faulty_provider_inner(duro_provider *wrapper);

/** Makes the @p nth call from now (1 = the next one) of @p method (or of any
 * failable method with FAULTY_ANY_METHOD) fail without calling the inner
 * provider: DURO_BUSY, retryable, when @p retryable, else DURO_STORAGE, not
 * retryable. The fault fires once. @p nth 0 disarms. Replaces any fault
 * armed before. @note Any thread. */
void faulty_provider_fail_nth(duro_provider *wrapper, uint64_t nth, int method,
                              int retryable);

/** The general form of faulty_provider_fail_nth(): arms one fault (see
 * faulty_fault), replacing the plan of faults armed before. @p nth 0 only
 * disarms. @note Any thread. */
void faulty_provider_arm(duro_provider *wrapper, int method, uint64_t nth,
                         uint64_t count, int retryable, faulty_when when);

/** Appends a fault to the plan: it becomes current once every fault armed
 * before it has fired all its failures (at once when none is left). Lets a
 * test arm a whole sequence before the calls start, independent of its own
 * timing. @return 1, or 0 when the plan is full (FAULTY_PLAN_MAX).
 * @note Any thread. */
int faulty_provider_queue(duro_provider *wrapper, int method, uint64_t nth,
                          uint64_t count, int retryable, faulty_when when);

/** faulty_provider_queue() with every field of @p fault (a copy is kept),
 * for faults that report another code. @note Any thread. */
int faulty_provider_queue_fault(duro_provider *wrapper,
                                const faulty_fault *fault);

/** While @p on, fails every call of @p method (not FAULTY_ANY_METHOD)
 * retryably or permanently, before it reaches the inner provider; @p on 0
 * turns it off. Independent of the armed fault. For "renewal keeps failing"
 * scenarios. @note Any thread. */
void faulty_provider_fail_always(duro_provider *wrapper, int method,
                                 int retryable, int on);

/** While @p on, the history-cache callback that fetches pass to the inner
 * provider answers one event less than the caller's cache holds (when it
 * holds any), as if the caller's kept engine had been evicted between the
 * fetch and its use: the caller must then read the whole history itself.
 * @note Any thread. */
void faulty_provider_understate_cache(duro_provider *wrapper, int on);

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
 * all methods, each combined version-2 call counted once, as its ack). */
uint64_t faulty_provider_calls(duro_provider *wrapper, int method);

/** How many injected faults have fired so far (both kinds). */
uint64_t faulty_provider_faults_fired(duro_provider *wrapper);

/** The most acks one ack_and_fetch_orchestration_items call carried. */
uint64_t faulty_provider_max_batch(duro_provider *wrapper);

/** The most next items one ack_and_fetch_orchestration_items call asked
 * for (max_next): the runtime's orchestration_batch. */
uint64_t faulty_provider_max_next(duro_provider *wrapper);

/** How many fetched items after-commit faults have freed unseen. */
uint64_t faulty_provider_items_discarded(duro_provider *wrapper);

/** "fetch_orchestration_item", ...; "?" when out of range. */
const char *faulty_method_name(int method);

#endif
