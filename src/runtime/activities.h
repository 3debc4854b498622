/* activities.h - what the worker slots (worker.c) and the activity manager
 * (manager.c) share: the in-flight record of a running activity, a slot,
 * the manager's state. Private to src/runtime. Lock order and ownership:
 * worker.c's comment. worker.c calls into manager.c; manager.c calls back
 * only through duro__manager.respawn. */
#ifndef DURO_RUNTIME_ACTIVITIES_H
#define DURO_RUNTIME_ACTIVITIES_H

#include "runtime/runtime.h"

struct duro__inflight {
    _Atomic int refs; /* slot thread + manager list */
    char *lock_token;
    char *instance_id;
    uint64_t execution_id;
    uint64_t activity_id;
    char *name;
    duro_cancel_token *token;
    int64_t next_renew_ms;     /* monotonic; INT64_MAX: stop renewing */
    int64_t locked_ms;         /* monotonic: when the fetch or the last
                                  successful renewal of its lock began */
    int64_t grace_deadline_ms; /* monotonic; 0: not cancelled */
    int renewing;              /* a renewal call is in progress */
    _Atomic int phase;         /* PHASE_*: RUNNING until the function returns
                                  (DONE) or the runtime gives up (ABANDONED);
                                  decided by one compare-and-swap, so an
                                  abandoned thread never takes a runtime lock */
    int in_list;
    struct duro__slot_ctx *slot;
    duro__inflight *next;
};

typedef struct duro__slot_ctx {
    duro_runtime *rt;
    int index;
    pthread_t thread; /* under manager->lock */
    int thread_valid;
    int looked; /* the last ack fetched too, and found nothing: the queue
                   was just looked at, so wait rather than fetch again */
} slot_ctx;

enum { PHASE_RUNNING = 0, PHASE_DONE = 1, PHASE_ABANDONED = 2 };

/* A cancellation decided by a turn of this runtime for an activity that was
 * not registered as running at that moment. A slot may have fetched it just
 * before the turn deleted its row and not registered it yet; when it does,
 * it finds the decision here and fires at once with the real reason instead
 * of learning "lock_lost" at its next renewal. */
#define RECENT_CANCELS 4096

typedef struct recent_cancel {
    char *instance_id; /* NULL: empty entry */
    uint64_t execution_id;
    uint64_t activity_id;
    const char *reason; /* one of the static DURO_REASON_* strings */
} recent_cancel;

struct duro__manager {
    /* starts a slot's replacement thread (worker.c), under lock */
    int (*respawn)(duro_runtime *rt, slot_ctx *s);
    pthread_mutex_t lock;
    pthread_cond_t cond;
    duro__inflight *head;
    /* Earliest renewal due (monotonic ms) among in-flight activities not
     * being renewed, INT64_MAX when none; written under lock, read without
     * it by slots about to fetch (see renew_overdue). */
    _Atomic int64_t next_due_ms;
    int stop;
    pthread_t thread;
    int running;
    int64_t next_check_ms; /* monotonic: the next check_held; manager only */
    int64_t next_heartbeat_ms; /* monotonic: the runtime's next heartbeat
                                  (duro__runtime_heartbeat); manager only */
    _Atomic int check_now;     /* the watcher heard of a cancellation */
    pthread_t watcher;         /* waits on wait_for_cancellations */
    int watching;
    recent_cancel recent[RECENT_CANCELS]; /* ring, oldest overwritten */
    size_t recent_next;
    size_t recent_count;    /* entries in use */
    int64_t sleep_until_ms; /* monotonic: the manager waits until then; 0
                               while it is awake; under lock */
};

typedef struct work_list {
    duro__inflight **items;
    size_t count, cap;
} work_list;

int duro__inflight_running(duro__inflight *f);
/* Claims a running activity for abandonment; 0 when it already returned. */
int duro__inflight_claim_abandon(duro__inflight *f);
void duro__inflight_release(duro__inflight *f);
/* Fires f's token with reason (its grace period runs from now) and stops
 * its renewals; under m->lock. */
void duro__inflight_fire(duro__inflight *f, const char *reason, int64_t now,
                         int64_t grace);
/* After a slot listed f (under m->lock): wakes the manager when it sleeps
 * past f's first renewal or the next check of running rows, so that a
 * slot's activity costs the manager no wake-up when it does not. */
void duro__manager_listed(duro_runtime *rt, const duro__inflight *f);
/* Removes f from the in-flight list; under m->lock. */
void duro__manager_unlist(duro__manager *m, duro__inflight *f);
/* The reason of a remembered cancellation of f (forgetting it), or NULL;
 * under m->lock. */
const char *duro__manager_take_recent_cancel(duro__manager *m,
                                             duro__inflight *f);
int64_t duro__renew_interval(const duro_runtime *rt);
/* Why f's row is gone or no longer held (manager.c says how); 0 when a
 * lookup failed retryably. */
int duro__lost_row_reason(duro_runtime *rt, const duro__inflight *f,
                          char *reason, size_t size);
/* Renews what is overdue before a slot fetches (one atomic load when
 * nothing is). */
void duro__renew_overdue(duro_runtime *rt);
int duro__work_push(work_list *l, duro__inflight *f);
/* Creates the manager and starts its thread and the cancellation watcher;
 * respawn starts a freed slot's new thread. */
int duro__manager_start(duro_runtime *rt,
                        int (*respawn)(duro_runtime *rt, slot_ctx *s));
/* Stops and joins the manager's threads. */
void duro__manager_stop(duro_runtime *rt);
/* Frees what the manager holds (after duro__manager_stop). */
void duro__manager_free(duro_runtime *rt);

#endif
