/* duro/provider.h - the storage provider interface: a versioned methods table
 * (like sqlite3_vfs) through which the runtime and the client reach queues,
 * locks and history. Everything a provider must guarantee is written here, per
 * method: its transaction, who calls it, and whether it may block. */
#ifndef DURO_PROVIDER_H
#define DURO_PROVIDER_H

#include "duro/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Errors. Every method takes a duro_error out-parameter as its last argument,
 * clears it on entry and fills it on failure. The return value equals
 * err->code. `retryable` tells the caller whether the same call may succeed
 * later (database busy or locked, connection lost) or never will (lock lost,
 * row gone, bad input).
 *
 * A failed call may have committed: a store can commit and fail to say so
 * (a connection lost after COMMIT was sent). Only the failures this header
 * says change nothing (DURO_LOCK_LOST, DURO_ALREADY_EXISTS,
 * DURO_HISTORY_LIMIT, DURO_INVALID_STATE, bad input) are certain; after any
 * other failure of a writing method the change may stand, and the
 * out-parameters are still NULL - an item such a call locked (a fetch, or
 * the next item of an ack-and-fetch) is held by a token nobody has and comes
 * back when its lock expires, its fetch count raised. Retrying a token
 * method is safe: once a commit released a lock or deleted a row, that token
 * never holds again, so the retry (or an abandon with that token) fails
 * DURO_LOCK_LOST and changes nothing; callers read DURO_LOCK_LOST after a
 * failed attempt as "probably committed", not as a lost lock.
 * enqueue_for_orchestrator is not idempotent: a retried START fails
 * DURO_ALREADY_EXISTS (retry with DURO_START_IDEMPOTENT), a retried event or
 * cancel is enqueued twice. */

#define DURO_ERROR_MESSAGE_MAX 512

typedef struct duro_error {
    int code;      /* DURO_OK or a DURO_* code */
    int retryable; /* 1: the same call may succeed later */
    char message[DURO_ERROR_MESSAGE_MAX]; /* detail, "" when none */
} duro_error;

/** Clears @p err (code DURO_OK, not retryable, empty message). NULL is a
 * no-op. @note Any thread. */
DURO_API void duro_error_clear(duro_error *err);

/** Fills @p err (NULL is allowed) and returns @p code. A NULL @p fmt
 * leaves the message empty.
 * @note Any thread. */
DURO_API int duro_error_set(duro_error *err, int code, int retryable,
                            const char *fmt, ...) DURO_PRINTF(4, 5);

/* ------------------------------------------------------------------------
 * Arenas. Every item a provider returns lives in one arena, freed at once
 * with the item's free function. Providers build items with these helpers so
 * the runtime can free them without knowing the provider. */

typedef struct duro_arena duro_arena;

/** A new arena, NULL when out of memory. Free with duro_arena_destroy().
 * @note Any thread; an arena is used by one thread at a time. */
DURO_API duro_arena *duro_arena_create(void);
/** Frees the arena and everything in it; NULL is a no-op.
 * @note One thread at a time per arena. */
DURO_API void duro_arena_destroy(duro_arena *a);
/** Zeroed, 16-byte aligned memory owned by @p a; NULL when out of memory,
 * when @p a is NULL, or when @p size is above PTRDIFF_MAX / 2 (no size
 * arithmetic wraps around). @note One thread at a time per arena. */
DURO_API void *duro_arena_alloc(duro_arena *a, size_t size);
/** A copy of @p s owned by @p a; NULL when @p s or @p a is NULL or out of
 * memory. @note One thread at a time per arena. */
DURO_API char *duro_arena_strdup(duro_arena *a, const char *s);

/* ------------------------------------------------------------------------
 * Work items: messages on the two queues. One struct for every kind; each
 * kind uses the fields its comment names and leaves the rest zero or NULL.
 * Strings are NUL-terminated and borrowed for the duration of a call. */

typedef enum duro_work_kind {
    /* orchestrator queue */
    DURO_WORK_START = 1,              /* instance_id, name, version, payload
                                         (input), parent_*; execution 1;
                                         (version 12) fire_at_ms: the
                                         instance's deadline, 0: none */
    DURO_WORK_ACTIVITY_COMPLETED = 2, /* instance_id, execution_id,
                                         source_id (activity id), payload */
    DURO_WORK_ACTIVITY_FAILED = 3,    /* ... error, category */
    DURO_WORK_TIMER_FIRED = 4,        /* instance_id, execution_id,
                                         source_id (timer id), fire_at_ms */
    DURO_WORK_EXTERNAL_EVENT = 5,     /* instance_id, name, payload; routed
                                         to the current execution */
    DURO_WORK_CHILD_COMPLETED = 6,    /* instance_id = parent, execution_id,
                                         source_id (parent's scheduling
                                         event), payload */
    DURO_WORK_CHILD_FAILED = 7,       /* ... error, category */
    DURO_WORK_CANCEL_INSTANCE = 8,    /* instance_id, reason, requested_by */
    DURO_WORK_CONTINUE_AS_NEW = 9,    /* instance_id, execution_id (the new
                                         one), name, version, payload */
    /* worker queue */
    DURO_WORK_ACTIVITY_EXECUTE = 10, /* instance_id, execution_id,
                                        source_id (activity id), name,
                                        payload (input), attempt */
    /* orchestrator queue, version 5 */
    DURO_WORK_TERMINATE_INSTANCE = 11, /* instance_id, reason,
                                          requested_by */
    DURO_WORK_SUSPEND_INSTANCE = 12,   /* instance_id, reason,
                                          requested_by */
    DURO_WORK_RESUME_INSTANCE = 13,    /* instance_id, reason,
                                          requested_by */
    /* orchestrator queue, version 12 */
    DURO_WORK_DEADLINE = 14 /* instance_id, fire_at_ms (the deadline);
                               execution 0: whatever execution is current
                               when it comes (it spans continue-as-new) */
} duro_work_kind;

/* The largest duro_work_kind; every kind from DURO_WORK_START to it but
 * DURO_WORK_ACTIVITY_EXECUTE belongs on the orchestrator queue. */
#define DURO_WORK_KIND_MAX 14

/* Flags of a DURO_WORK_START item: */
/* an existing instance of the same name is not an error (see
 * enqueue_for_orchestrator) */
#define DURO_START_IDEMPOTENT 0x1u
/* a child started fire-and-forget: no completion goes back to the parent */
#define DURO_START_DETACHED 0x2u
/* Flag of a DURO_WORK_EXTERNAL_EVENT item: carried over by continue-as-new
 * from the previous execution, delivered before the rest of the batch */
#define DURO_EVENT_CARRIED 0x4u

typedef struct duro_work_item {
    duro_work_kind kind;
    const char *instance_id;     /* the instance the item is for */
    uint64_t execution_id;       /* 0: the current execution */
    uint64_t source_id;          /* event id of the scheduling event */
    const char *name;            /* orchestration, activity or event name */
    const char *version;         /* orchestration version, NULL = default */
    const char *payload;         /* input, output or event data, may be NULL */
    const char *error;           /* failure message */
    int category;                /* duro_category of a failure */
    const char *reason;          /* cancel reason */
    const char *requested_by;    /* who asked for a cancel */
    const char *parent_instance; /* start: the parent, NULL if none */
    uint64_t parent_execution;   /* start: the parent's execution */
    uint64_t parent_event_id;    /* start: the parent's scheduling event */
    int64_t fire_at_ms;          /* timer fired: when it was due;
                                    (version 12) START, DEADLINE: the
                                    instance's deadline */
    uint32_t attempt;            /* activity execute: retry-policy attempt */
    uint32_t flags;              /* DURO_START_* */
    /* Appended in version 6 (see the note on version 6 below): on an
     * ACTIVITY_COMPLETED or ACTIVITY_FAILED completion, the wall-clock
     * times (ms since the epoch) at which the worker began running the
     * activity function and at which it returned; 0 = unknown (a failure
     * decided without running it: poison, an unregistered activity). */
    int64_t started_ms;
    int64_t finished_ms;
    /* Appended in version 8: on an EXTERNAL_EVENT given to
     * enqueue_for_orchestrator, the event's id (NULL: none). The provider
     * records (instance_id, event_id) with the message, in its
     * transaction, and enqueues nothing for an id already recorded for the
     * instance: a raise retried after a failure that may have committed is
     * delivered once. The ids go with the instance (delete, purge), not
     * with an execution. Not stored on the message: items read back carry
     * NULL. */
    const char *event_id;
} duro_work_item;

/* An item to put on the orchestrator queue, visible after delay_ms. */
typedef struct duro_outbound {
    duro_work_item item;
    int64_t delay_ms; /* 0: visible at once; timers and delayed retries > 0 */
} duro_outbound;

/* ------------------------------------------------------------------------
 * History events. event_id is the 1-based position in its execution's
 * history; completions point at their scheduling event by source_event_id.
 * Providers store these fields in typed columns. */

typedef enum duro_event_kind {
    DURO_EVENT_ORCHESTRATION_STARTED = 1,          /* name, version, payload
                                                      (input), parent link */
    DURO_EVENT_ORCHESTRATION_COMPLETED = 2,        /* payload (output) */
    DURO_EVENT_ORCHESTRATION_FAILED = 3,           /* error, category */
    DURO_EVENT_CONTINUED_AS_NEW = 4,               /* payload (next input) */
    DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED = 5, /* reason, requested_by */
    DURO_EVENT_ORCHESTRATION_CANCELLED = 6,        /* reason */
    DURO_EVENT_ACTIVITY_SCHEDULED = 7,             /* name, payload (input),
                                                      attempt */
    DURO_EVENT_ACTIVITY_COMPLETED = 8,           /* source, payload (output) */
    DURO_EVENT_ACTIVITY_FAILED = 9,              /* source, error, category */
    DURO_EVENT_ACTIVITY_CANCEL_REQUESTED = 10,   /* source, reason */
    DURO_EVENT_TIMER_CREATED = 11,               /* fire_at_ms */
    DURO_EVENT_TIMER_FIRED = 12,                 /* source, fire_at_ms */
    DURO_EVENT_EVENT_SUBSCRIBED = 13,            /* name */
    DURO_EVENT_EVENT_RAISED = 14,                /* name, payload */
    DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED = 15, /* name, version,
                                                    ref_instance (child id),
                                                    payload (input), flags */
    DURO_EVENT_SUB_ORCHESTRATION_COMPLETED = 16, /* source, payload */
    DURO_EVENT_SUB_ORCHESTRATION_FAILED = 17,    /* source, error, category */
    DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED = 18, /* source, reason */
    /* version 5 */
    DURO_EVENT_ORCHESTRATION_TERMINATED = 19, /* reason, requested_by;
                                                 terminal */
    DURO_EVENT_EXECUTION_SUSPENDED = 20,      /* reason, requested_by */
    DURO_EVENT_EXECUTION_RESUMED = 21,        /* reason, requested_by */
    /* a command with no side effect: the code asked duro_patched() for a
     * change, live, and took its new path */
    DURO_EVENT_PATCH_MARKER = 22, /* name (the change id) */
    /* version 13: the execution was begun by a reset (or rewind) of an
     * earlier one, whose events before it it copies; no effect on the
     * code, which replay passes wherever it stands */
    DURO_EVENT_EXECUTION_RESET = 23 /* reason, requested_by, ref_execution
                                       (the execution reset), ref_event_id
                                       (the last event kept), flags
                                       (DURO_RESET_REWIND) */
} duro_event_kind;

#define DURO_EVENT_KIND_MAX 23

/* Flag of an OrchestrationCancelRequested event: the cancellation was
 * delivered to the code, which may clean up before the instance ends
 * Cancelled (an orchestration registered with observe_cancel). Without
 * it the instance ended at once, without running its code. */
#define DURO_CANCEL_OBSERVED 0x8u
/* Flag of a TimerCreated event: the cleanup deadline that an observed
 * cancellation started; when it fires first, the instance is terminated. */
#define DURO_TIMER_CLEANUP_DEADLINE 0x10u
/* Flag of an ExecutionSuspended event (provider version 9): the instance
 * was suspended before any of its code ran, by the request's own
 * transaction; the event follows OrchestrationStarted, and the code starts
 * at the ExecutionResumed that ends the suspension. */
#define DURO_SUSPEND_BEFORE_START 0x20u
/* Flag of an ExecutionReset event (provider version 13): the reset was a
 * rewind (reset_instance with rewind set). */
#define DURO_RESET_REWIND 0x40u

/** "ActivityScheduled", ...; never NULL. @note Any thread. */
DURO_API const char *duro_event_kind_name(int kind);

/* Reasons recorded in ActivityCancelRequested and
 * SubOrchestrationCancelRequested. A small stable set: tools match on them. */
#define DURO_REASON_SELECT_LOSER "select_loser"
#define DURO_REASON_INSTANCE_CANCELLED "instance_cancelled"
#define DURO_REASON_INSTANCE_FAILED "instance_failed"
#define DURO_REASON_INSTANCE_COMPLETED "instance_completed"
#define DURO_REASON_CONTINUED_AS_NEW "continued_as_new"
#define DURO_REASON_TASK_CANCELLED "task_cancelled"
#define DURO_REASON_INSTANCE_TERMINATED "instance_terminated"
/* the instance's deadline passed (version 12) */
#define DURO_REASON_DEADLINE "deadline"

typedef struct duro_event {
    uint64_t event_id; /* 1-based position in the execution */
    duro_event_kind kind;
    uint64_t source_event_id; /* completions: the scheduling event */
    int64_t timestamp_ms;     /* when the turn that wrote it began */
    const char *name;         /* activity, orchestration or event name */
    const char *version;      /* orchestration version */
    const char *payload;      /* input, output or event data */
    const char *error;        /* failure message */
    int category;             /* duro_category of a failure */
    const char *reason;       /* cancel reason */
    const char *requested_by; /* who asked for an instance cancel */
    const char *ref_instance; /* child id, or the parent on Started */
    uint64_t ref_execution;   /* the parent's execution on Started */
    uint64_t ref_event_id;    /* the parent's scheduling event on Started */
    int64_t fire_at_ms;       /* timers */
    uint32_t attempt;         /* activity scheduled: retry attempt */
    uint32_t flags;           /* sub-orchestration: DURO_START_DETACHED */
    /* Appended in version 6: on ActivityCompleted and ActivityFailed, when
     * the worker really ran the activity function (started_ms, finished_ms
     * of the completion message it came from; timestamp_ms is only when the
     * turn that recorded it began). 0 = unknown: not run (poison,
     * unregistered), or written before version 6. */
    int64_t started_ms;
    int64_t finished_ms;
} duro_event;

/* ------------------------------------------------------------------------
 * Instances. */

typedef struct duro_instance_info {
    const char *instance_id;
    const char *name;
    const char *version;
    int status;            /* duro_status of the current execution */
    uint64_t execution_id; /* current execution, 0 before the first */
    int64_t created_ms;
    int64_t updated_ms;        /* last change of status, output, error or
                                  custom status (not every turn) */
    const char *output;        /* completed */
    const char *error;         /* failed: message; cancelled: reason */
    int category;              /* failed / cancelled: duro_category */
    const char *custom_status; /* NULL when never set */
    const char *parent_instance;
    uint64_t history_count; /* events in the current execution */
    /* Appended in version 4 (see the note on version 4 below). */
    const char *cancel_reason;   /* the first cancellation requested while
                                    the instance was Pending or Running;
                                    NULL when none, or none was given */
    const char *cancelled_by;    /* who asked for it; NULL when not given */
    int64_t cancel_requested_ms; /* when it was requested; 0: never */
    int64_t finished_ms;         /* when the instance became Completed,
                                    Failed, Cancelled or Terminated; 0
                                    before */
    const char *last_problem;    /* why a runtime cannot make progress with
                                    the instance (set_instance_problem);
                                    NULL when nothing is wrong */
    int64_t last_problem_ms;     /* when it was recorded; 0: none */
    int64_t next_attempt_ms;     /* when the runtime tries again; 0: no
                                    retry planned (or no problem) */
    /* Appended in version 12: when the instance times out (wall ms since
     * the epoch; 0: no deadline), from its START or the DEADLINE message
     * a turn enqueued (see version 12). */
    int64_t deadline_ms;
} duro_instance_info;

/* What a turn writes to the instance and execution rows. NULL strings and
 * custom_status_set == 0 keep what is stored. The execution row takes
 * `status` as is; the instance row takes it too, except that
 * DURO_STATUS_CONTINUED_AS_NEW leaves the instance Running (its next
 * execution is on its way). */
typedef struct duro_instance_meta {
    int status;       /* new duro_status of the acked execution */
    const char *name; /* set on the first turn of an execution */
    const char *version;
    const char *output; /* completed / continued-as-new: NULL ok */
    const char *error;  /* failed: message; cancelled: reason */
    int category;
    const char *custom_status;
    int custom_status_set; /* 1: write custom_status (NULL clears it) */
    const char *parent_instance;
    uint64_t parent_execution;
    uint64_t parent_event_id;
    /* Appended in version 4: the instance's last problem, written by the
     * same transaction (no retry planned: next_attempt_ms 0). An ack that
     * ends the execution (Completed, Failed, Cancelled, continue-as-new)
     * replaces the stored problem with this one, clearing it when NULL:
     * a finished instance shows only the failure that ended it (poison,
     * nondeterminism, an orchestration never registered, the history cap)
     * and never a stale retry. Any other ack writes it when not NULL and
     * keeps the stored one when NULL. */
    const char *problem;
} duro_instance_meta;

/* What cancel_matching, control_matching and purge_instances select.
 * Zero / NULL fields do not filter; each method says which statuses it
 * accepts. */
typedef struct duro_bulk_filter {
    uint32_t status_mask;       /* bit (1u << status); 0: the method's
                                   default set */
    const char *name;           /* exact orchestration name */
    const char *version;        /* exact orchestration version as stored:
                                   the one asked for at start, then the one
                                   that ran ("" for the default version) */
    int64_t created_after_ms;   /* inclusive; 0 = no bound */
    int64_t created_before_ms;  /* exclusive; 0 = no bound */
    int64_t finished_before_ms; /* exclusive; purge only (required there) */
} duro_bulk_filter;

/* Instances handled per transaction by cancel_instances and
 * control_instances (their maximum count), cancel_matching,
 * control_matching and purge_instances. */
#define DURO_BULK_BATCH_MAX 500

/* What a cancel request did for one instance (cancel_instances,
 * duro_client_cancel_many). Values are append-only. */
typedef enum duro_cancel_outcome {
    DURO_CANCEL_NONE = 0,              /* not decided: the call failed first */
    DURO_CANCEL_REQUESTED = 1,         /* live: this call recorded the
                                          request; the instance's next turn
                                          decides it. It ends Cancelled
                                          unless a turn already running
                                          finishes it otherwise first (its
                                          status then shows the request
                                          arrived too late) */
    DURO_CANCEL_ALREADY_CANCELLED = 2, /* Cancelled, or live with a
                                          cancellation requested before:
                                          nothing changed, the first reason
                                          stays */
    DURO_CANCEL_NOT_FOUND = 3,         /* no such instance */
    DURO_CANCEL_NOT_CANCELLABLE = 4,   /* Completed, Failed or (version 5)
                                          Terminated (see status) */
    DURO_CANCEL_DUPLICATE = 5,         /* the id came earlier in the same
                                          call; handled once, at its first
                                          occurrence, whose status it
                                          repeats */
    DURO_CANCEL_CANCELLED = 6          /* decided in this call (version 9):
                                          a Pending instance that had not
                                          begun - no history, its START not
                                          held by a runtime - is Cancelled
                                          when the call returns, its
                                          history and queues written in the
                                          request's transaction */
} duro_cancel_outcome;

/** "requested", "cancelled", "already_cancelled", "not_found",
 * "not_cancellable", "duplicate", "none"; "unknown" for any other value. Never
 * NULL.
 * @note Any thread. */
DURO_API const char *duro_cancel_outcome_name(int outcome);

typedef struct duro_cancel_result {
    int outcome; /* duro_cancel_outcome */
    int status;  /* the instance's duro_status when the outcome was decided,
                    before this call changed anything;
                    DURO_STATUS_NOT_FOUND when it does not exist */
} duro_cancel_result;

/* The operator's verbs besides cancel (version 5). Values are
 * append-only. */
typedef enum duro_control {
    DURO_CONTROL_TERMINATE = 1, /* end at once without running code:
                                   DURO_WORK_TERMINATE_INSTANCE */
    DURO_CONTROL_SUSPEND = 2,   /* take no decisions until resumed:
                                   DURO_WORK_SUSPEND_INSTANCE */
    DURO_CONTROL_RESUME = 3     /* DURO_WORK_RESUME_INSTANCE */
} duro_control;

/** "terminate", "suspend", "resume"; "unknown" for any other value.
 * Never NULL. @note Any thread. */
DURO_API const char *duro_control_name(int control);

/* What a terminate, suspend or resume request did for one instance
 * (control_instances, duro_client_control_many). Values are append-only. */
typedef enum duro_control_outcome {
    DURO_CONTROL_OUTCOME_NONE = 0,      /* not decided: the call failed */
    DURO_CONTROL_OUTCOME_REQUESTED = 1, /* live (Pending, Running or
                                           Suspended): the message was
                                           enqueued; the instance's next
                                           turn acts on it */
    DURO_CONTROL_OUTCOME_NOT_FOUND = 3, /* no such instance */
    DURO_CONTROL_OUTCOME_FINISHED = 4,  /* Completed, Failed, Cancelled or
                                           Terminated: nothing enqueued */
    DURO_CONTROL_OUTCOME_DUPLICATE = 5, /* the id came earlier in the same
                                           call; handled there */
    DURO_CONTROL_OUTCOME_APPLIED = 6    /* decided in this call (version 9):
                                           a Pending instance that had not
                                           begun - no history, its START
                                           not held by a runtime - is
                                           Terminated (terminate) or
                                           Suspended before any of its code
                                           ran (suspend) when the call
                                           returns */
} duro_control_outcome;

/** "requested", "applied", "not_found", "finished", "duplicate", "none";
 * "unknown" for any other value. Never NULL. @note Any thread. */
DURO_API const char *duro_control_outcome_name(int outcome);

typedef struct duro_control_result {
    int outcome; /* duro_control_outcome */
    int status;  /* the instance's duro_status when the outcome was decided,
                    before this call changed anything;
                    DURO_STATUS_NOT_FOUND when it does not exist */
} duro_control_result;

/* What cancel_matching, control_matching and purge_instances did (or, in
 * a dry run, would do), in one arena; free with duro_bulk_result_free(). */
typedef struct duro_bulk_result {
    duro_arena *arena;
    uint64_t count;   /* instances cancelled, sent a control or deleted */
    const char **ids; /* the first id_count of them (see each method) */
    size_t id_count;  /* min(count, the caller's max_ids) */
    uint64_t applied; /* (version 9) of count, how many were decided in the
                         call's own transactions instead of sent a
                         request: cancelled or terminated, or suspended
                         before their code ran (see
                         DURO_CANCEL_CANCELLED); 0 for a purge */
} duro_bulk_result;

/* A reset or rewind of one instance (reset_instance, version 13; the
 * client's duro_client_reset() and duro_client_rewind()). */
typedef struct duro_reset_request {
    int version;              /* 1 or 2 (deadline_ms) */
    const char *instance_id;  /* required */
    uint64_t execution_id;    /* the execution to_event_id is in; it must be
                                 the instance's current one when the
                                 transaction runs (a compare-and-set: a
                                 reset that another one overtook fails); 0:
                                 whichever is current */
    uint64_t to_event_id;     /* the last event the new execution keeps; 0:
                                 the last good point, the latest turn
                                 boundary before the execution's first
                                 failure (ActivityFailed,
                                 SubOrchestrationFailed), or before its
                                 ending when nothing failed */
    int rewind;               /* 1: a rewind: only a Failed instance, to the
                                 last good point (to_event_id must be 0) */
    int dry_run;              /* 1: decide and report, change nothing */
    const char *reason;       /* recorded on ExecutionReset; may be NULL */
    const char *requested_by; /* likewise */
    /* version 2 */
    int64_t deadline_ms; /* the deadline execution n+1 runs under: 0 the
                            instance's own (its DEADLINE message enqueued
                            again; refused with DURO_INVALID_STATE when it
                            has passed), > 0 a new one (after now), -1
                            (DURO_DEADLINE_NONE) none; a child rewound
                            with it takes the same */
} duro_reset_request;

/* What a reset did (or, in a dry run, would do). */
typedef struct duro_reset_result {
    int status;              /* the instance's duro_status before */
    uint64_t from_execution; /* the execution reset */
    uint64_t execution_id;   /* the new one: from_execution + 1 */
    uint64_t to_event_id;    /* the last event kept */
    uint32_t activities;     /* activities enqueued again (scheduled in the
                                kept events with no completion there) */
    uint32_t timers;         /* timers armed again (created, not fired) */
    uint32_t children;       /* sub-orchestrations without a result in the
                                kept events: rewound with their parent, or
                                given their result again */
} duro_reset_result;

/** Frees a bulk result; NULL is a no-op.
 * @note One thread, after the last use of the result. */
DURO_API void duro_bulk_result_free(duro_bulk_result *r);

/* Store gauges for monitoring (read_store_stats, duro_client_store_stats):
 * one consistent snapshot, at a cost that does not grow with history.
 *
 * Instances. `instances` holds one entry per (orchestration name, status)
 * that has at least one instance, ordered by name (bytewise), then status;
 * status is a duro_status (Pending 1 .. Terminated 8; an instance row never
 * holds ContinuedAsNew, which names a finished execution). `name` is the
 * name the instance was started with: every instance is created by its
 * START, which carries its name, so it is never NULL; a provider that could
 * hold an instance before its name is known reports it under "" (empty),
 * never NULL. Messages for an instance that does not exist (an event raised
 * before the start) are counted on the queue below, not here. `problems`
 * holds, per name in the same order, how many Pending or Running instances
 * have a last_problem recorded (set_instance_problem); its status fields
 * are 0, and names with none are left out. A problem kept by a finished
 * instance is not counted.
 *
 * Orchestrator queue, counted in messages, each in exactly one of three
 * counts at now_ms (their sum is count_messages(ORCHESTRATOR, NULL) in the
 * same snapshot), by what a fetch at now_ms would do:
 *  - ready: visible (visibility time <= now_ms) and its instance fetchable:
 *    not locked, or locked with an expired lock (a fetch takes it again),
 *    and not held back by an abandon delay;
 *  - locked: visible, and its instance's lock has not expired: the messages
 *    the lock's item holds, and those that arrived since (the instance's
 *    next fetch takes them, after the ack);
 *  - delayed: everything else: not visible yet (a timer, a delayed start
 *    or retry), or visible but its unlocked instance held back until an
 *    abandon delay ends.
 * orchestrator_oldest_ready_ms is the earliest time from which a ready
 * instance has been fetchable without a break: the visibility time of its
 * oldest visible message, or, when it was fetched and that lock expired,
 * the lock's expiry, or the end of an abandon delay; 0 when nothing is
 * ready.
 *
 * Worker queue, counted in activity rows:
 *  - ready: fetchable at now_ms: unlocked and visible (rows are visible
 *    from their insert), or locked with an expired lock;
 *  - locked: the lock has not expired.
 * Worker rows have no delay of their own; the one delay is an abandon's
 * (abandon_work_item with delay_ms > 0): such a row, until the delay ends,
 * is in neither count, so worker_ready + worker_locked is at most
 * count_messages(WORKER, NULL). worker_oldest_ready_ms is the earliest
 * time from which a ready row has been fetchable: its insert, the end of
 * its abandon delay, or its lapsed lock's expiry; 0 when nothing is ready.
 *
 * now_ms is the store's clock, the one it compares visibility and lock
 * expiry with, read in the snapshot; an age is now_ms - oldest. */
typedef struct duro_store_count {
    const char *name; /* orchestration name; never NULL */
    int status;       /* duro_status; 0 in `problems` */
    uint64_t count;
} duro_store_count;

typedef struct duro_store_stats {
    int64_t now_ms;              /* the store's clock when read */
    duro_store_count *instances; /* by orchestration name and status, name
                                    order then status */
    size_t instance_count;
    duro_store_count *problems; /* Pending/Running instances with a
                                   last_problem, by name (status field: 0) */
    size_t problem_count;
    uint64_t orchestrator_ready, orchestrator_delayed, orchestrator_locked;
    uint64_t worker_ready, worker_locked;
    int64_t orchestrator_oldest_ready_ms; /* visible-at time of the oldest
                                             ready orchestrator message; 0:
                                             none */
    int64_t worker_oldest_ready_ms;       /* same for worker items; 0: none */
    int64_t store_size_bytes;             /* -1: unknown */
} duro_store_stats;

/* Filter of list_instances. Zero / NULL fields do not filter. */
typedef struct duro_instance_filter {
    uint32_t status_mask;       /* bit (1u << status); 0 = any */
    const char *name;           /* exact orchestration name */
    int64_t created_after_ms;   /* inclusive; 0 = no bound */
    int64_t created_before_ms;  /* exclusive; 0 = no bound */
    size_t limit;               /* 0 = no limit */
    const char *after_instance; /* paging: ids greater than this */
} duro_instance_filter;

/* ------------------------------------------------------------------------
 * Items handed to the runtime. Each lives in its arena; free it with
 * duro_orch_item_free() / duro_worker_item_free() / duro_history_free(). */

typedef struct duro_orch_item {
    duro_arena *arena;
    const char *instance_id;
    const char *lock_token;
    uint32_t attempt;         /* highest fetch count among the messages,
                                 this fetch included (first fetch = 1) */
    duro_work_item *messages; /* every visible message, oldest first */
    size_t message_count;
    /* metadata of the instance; status is NOT_FOUND when no instance row
       exists (messages for a never-started or deleted instance) */
    int status;
    uint64_t execution_id; /* current execution, 0 if none yet */
    const char *name;
    const char *version;
    const char *parent_instance;
    uint64_t parent_execution;
    uint64_t parent_event_id;
    const char *custom_status;
    /* history of the current execution: events history_offset+1 ..
       history_offset+history_count, where history_offset is what the
       caller's history cache already holds (see duro_history_cache) */
    uint64_t history_total; /* events stored for the execution */
    uint64_t history_offset;
    duro_event *history;
    size_t history_count;
    /* Appended in version 4: what the instance row records, read in the
     * fetch transaction (zero / NULL when there is no instance row). */
    int64_t cancel_requested_ms; /* 0: no cancellation requested */
    const char *cancel_reason;   /* the first request's reason */
    const char *cancelled_by;    /* ... and requester */
    const char *last_problem;    /* NULL: no problem recorded */
} duro_orch_item;

typedef struct duro_worker_item {
    duro_arena *arena;
    duro_work_item item; /* DURO_WORK_ACTIVITY_EXECUTE */
    const char *lock_token;
    uint32_t attempt; /* fetch count, this fetch included */
} duro_worker_item;

typedef struct duro_history {
    duro_arena *arena;
    const char *instance_id;
    uint64_t execution_id;
    duro_event *events;
    size_t count;
} duro_history;

/** Free an item, a history or a list with everything in it; NULL is a
 * no-op. @note One thread, after the last use of the item. */
DURO_API void duro_orch_item_free(duro_orch_item *item);     /* NULL ok */
DURO_API void duro_worker_item_free(duro_worker_item *item); /* NULL ok */
DURO_API void duro_history_free(duro_history *h);            /* NULL ok */

/* A list of instance infos, all in one arena. */
typedef struct duro_instance_list {
    duro_arena *arena;
    duro_instance_info *items;
    size_t count;
} duro_instance_list;

/** Frees the list and its infos; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_instance_list_free(duro_instance_list *list);

/* ------------------------------------------------------------------------
 * Queries for operators (version 10): instances by several filters in one
 * of three orders, a page at a time (query_instances), and the control
 * requests recorded across instances (list_control_events). duro.h's
 * duro_client_query() and duro_client_control_events() call them. */

/* The order of query_instances. Values are append-only. */
typedef enum duro_instance_order {
    DURO_ORDER_ID = 0,           /* instance id ascending (bytewise) */
    DURO_ORDER_CREATED_DESC = 1, /* newest first by created_ms, instance id
                                    descending among equals */
    DURO_ORDER_UPDATED_DESC = 2  /* most recently changed first by
                                    updated_ms, then instance id
                                    descending */
} duro_instance_order;

/* Page sizes of query_instances and list_control_events: a limit of 0
 * asks for the default, one over the maximum is refused. */
#define DURO_QUERY_LIMIT_DEFAULT 100
#define DURO_QUERY_LIMIT_MAX 1000

/* The version of duro_instance_query this header declares. */
#define DURO_INSTANCE_QUERY_VERSION 3

/* What query_instances selects and in which order. Fill it with
 * duro_instance_query_init() (duro.h), which sets version and the
 * defaults - every instance, by id, DURO_QUERY_LIMIT_DEFAULT a page - and
 * set the fields you need: every filter given must hold (they combine
 * with AND). Strings are borrowed for the call. */
typedef struct duro_instance_query {
    int version;             /* set by duro_instance_query_init():
                                DURO_INSTANCE_QUERY_VERSION; fields marked
                                (query version 2) are read only when
                                version >= 2 */
    uint32_t status_mask;    /* bits (1u << status) of the statuses
                                Pending 1 .. Terminated 8 (an instance
                                is never ContinuedAsNew, 6: that bit
                                selects nothing); 0: any */
    const char *name;        /* exact orchestration name; NULL: any
                                ("" is refused) */
    const char *name_prefix; /* names that begin with it, compared
                                bytewise; NULL or "": any */
    const char
        *name_contains;          /* names that hold it as a byte substring
                                    (case-sensitive; '%', '_' and
                                    backslashes are plain characters); NULL or "": any */
    const char *parent_instance; /* only the sub-orchestrations this
                                    instance started; NULL: any ("" is
                                    refused) */
    int with_problem;            /* 1: only instances with a last_problem:
                                    live ones (Pending, Running, Suspended)
                                    a runtime cannot make progress with,
                                    and ended ones whose ending turn
                                    recorded one - a Failed instance that
                                    a runtime failed itself (poison,
                                    nondeterminism, an orchestration never
                                    registered, the history cap); one that
                                    failed by its own code has none. 0:
                                    any. With status_mask (AND): the
                                    live statuses give what is stuck now,
                                    Failed what the runtime gave up on */
    int64_t created_after_ms;    /* created_ms >= it; 0: no bound */
    int64_t created_before_ms;   /* created_ms < it; 0: no bound */
    int order;                   /* duro_instance_order */
    size_t limit;                /* page size, 1 .. DURO_QUERY_LIMIT_MAX;
                                    0: DURO_QUERY_LIMIT_DEFAULT */
    const char *cursor;          /* NULL: the first page; else the
                                    next_cursor of the page before, from a
                                    query of the same order */
    int count_total;             /* 1: also count the matches (total) */
    /* (query version 2) */
    int64_t count_max; /* with count_total: count at most this many
                          matches - a page's total is then the smaller of
                          the matches and count_max, total_capped says
                          which - at a cost bounded by it (see
                          query_instances); 0: count every match */
    /* (query version 3; a provider reads it from contract version 12) */
    const char *orchestration_version; /* exact orchestration version as
                                          stored - the one asked for at
                                          start, then the one that ran
                                          ("" the default version; an
                                          instance started without one
                                          has none until it runs) -
                                          checked row by row; NULL: any */
} duro_instance_query;

/* One page of query_instances, everything in one arena: free with
 * duro_instance_page_free(). */
typedef struct duro_instance_page {
    duro_arena *arena;
    duro_instance_info *items; /* in the query's order, as get_instance
                                  returns each */
    size_t count;              /* at most the query's limit */
    const char *next_cursor;   /* NULL when this is the last page; else
                                  opaque text of [A-Za-z0-9._-] (safe in a
                                  URL), valid across calls, handles and
                                  processes */
    int64_t total;             /* every match, on all pages; -1 when
                                  count_total was 0; the query's count_max
                                  when more than that many match */
    int total_capped;          /* 1: more than total match (the count
                                  stopped at the query's count_max); 0:
                                  total is exact, or not counted */
} duro_instance_page;

/** Frees a page and everything in it; NULL is a no-op.
 * @note One thread, after the last use of the page. */
DURO_API void duro_instance_page_free(duro_instance_page *page);

/* The history events of an operator's request: what list_control_events
 * returns, as a kind_mask. */
#define DURO_CONTROL_EVENT_KINDS                                               \
    ((1u << DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED) |                       \
     (1u << DURO_EVENT_ORCHESTRATION_TERMINATED) |                             \
     (1u << DURO_EVENT_EXECUTION_SUSPENDED) |                                  \
     (1u << DURO_EVENT_EXECUTION_RESUMED))

/* One control request as history recorded it (list_control_events). */
typedef struct duro_control_event {
    const char *instance_id;
    const char *name; /* the instance's orchestration name */
    uint64_t execution_id, event_id;
    int kind;             /* DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                             _ORCHESTRATION_TERMINATED,
                             _EXECUTION_SUSPENDED or _EXECUTION_RESUMED */
    int64_t timestamp_ms; /* when it was recorded (the event's time) */
    const char *reason;   /* NULL when none was given */
    const char *requested_by;
    uint32_t flags; /* DURO_CANCEL_OBSERVED, DURO_SUSPEND_BEFORE_START */
} duro_control_event;

/* What list_control_events selects. Fill it with
 * duro_control_event_query_init() (duro.h): version and the defaults
 * (the four kinds, anyone, any time, DURO_QUERY_LIMIT_DEFAULT a page). */
typedef struct duro_control_event_query {
    int version;
    uint32_t kind_mask;       /* bits (1u << kind) within
                                 DURO_CONTROL_EVENT_KINDS; 0: all four */
    const char *requested_by; /* exactly this requester; NULL: any */
    int64_t since_ms;         /* timestamp_ms >= it; 0: no bound */
    int64_t until_ms;         /* timestamp_ms < it; 0: no bound */
    size_t limit;             /* 1 .. DURO_QUERY_LIMIT_MAX; 0:
                                 DURO_QUERY_LIMIT_DEFAULT */
    const char *cursor;       /* NULL: the first page; else the
                                 next_cursor of the page before */
} duro_control_event_query;

/* One page of list_control_events in one arena: free with
 * duro_control_event_list_free(). */
typedef struct duro_control_event_list {
    duro_arena *arena;
    duro_control_event *items; /* newest first */
    size_t count;
    const char *next_cursor; /* NULL when this is the last page; opaque,
                                as duro_instance_page.next_cursor */
} duro_control_event_list;

/** Frees a list and everything in it; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_control_event_list_free(duro_control_event_list *list);

/* Lets a fetch skip history the caller already holds. The provider calls
 * cached_events() once per fetch, inside its fetch transaction, after it has
 * chosen the instance; it must be fast and must not call the provider. It
 * returns how many leading events of (instance, execution) the caller holds;
 * the provider then returns only later events and sets history_offset. */
typedef struct duro_history_cache {
    uint64_t (*cached_events)(void *user, const char *instance_id,
                              uint64_t execution_id);
    void *user;
} duro_history_cache;

/* An activity to cancel: its worker row is identified by these columns. */
typedef struct duro_activity_ref {
    const char *instance_id;
    uint64_t execution_id;
    uint64_t activity_id; /* event id of its ActivityScheduled */
} duro_activity_ref;

/* Everything one turn commits. */
typedef struct duro_orch_ack {
    uint64_t execution_id;           /* the execution the turn ran; a new
                                        one when it exceeds the current */
    const duro_event *history_delta; /* appended in order */
    size_t history_delta_count;
    const duro_work_item *worker_items; /* DURO_WORK_ACTIVITY_EXECUTE */
    size_t worker_item_count;
    const duro_outbound *orchestrator_items;
    size_t orchestrator_item_count;
    const duro_instance_meta *meta; /* NULL: leave the rows as they are */
    const duro_activity_ref *cancelled_activities;
    size_t cancelled_activity_count;
} duro_orch_ack;

typedef enum duro_queue {
    DURO_QUEUE_ORCHESTRATOR = 0,
    DURO_QUEUE_WORKER = 1
} duro_queue;

/* ------------------------------------------------------------------------
 * The live runtimes (version 12): each runtime records itself in the store
 * - where it runs, since when, and what it registers - and keeps its row
 * fresh with a heartbeat, so an operator (and another runtime) can see
 * which runtimes are live and which orchestration versions they can run
 * (register_runtime, list_runtimes, remove_runtime). */

/* A row is live while its last heartbeat is at most this many of its own
 * periods old: a runtime that missed that many heartbeats (it died, or
 * lost the store for that long) counts as gone, and its row is removed by
 * the next register_runtime or remove_runtime of any runtime. */
#define DURO_RUNTIME_MISSED_HEARTBEATS 3
/* The longest heartbeat period a runtime may record (a day). */
#define DURO_RUNTIME_HEARTBEAT_MAX_MS 86400000

/* An orchestration a runtime registers: its name and version ("" the
 * default version). */
typedef struct duro_runtime_orchestration {
    const char *name;
    const char *version;
} duro_runtime_orchestration;

/* One runtime's row. register_runtime reads every field but heartbeat_ms
 * (the store's time of the call); list_runtimes fills every field. */
typedef struct duro_runtime_info {
    const char *runtime_id;     /* unique per runtime, 1 .. 1024 bytes */
    const char *host;           /* the host it runs on; NULL or "": unknown
                                   (listed as "") */
    int64_t pid;                /* its process id, >= 0 (0: unknown) */
    int64_t started_ms;         /* wall ms it started, >= 0 */
    int64_t heartbeat_ms;       /* wall ms of its last heartbeat */
    int64_t heartbeat_every_ms; /* its period, 1 ..
                                   DURO_RUNTIME_HEARTBEAT_MAX_MS */
    const duro_runtime_orchestration *orchestrations; /* what it runs */
    size_t orchestration_count;
    const char *const *activities; /* the activity names it runs */
    size_t activity_count;
} duro_runtime_info;

/* list_runtimes' answer, everything in one arena: free with
 * duro_runtime_list_free(). */
typedef struct duro_runtime_list {
    duro_arena *arena;
    duro_runtime_info *items; /* the live runtimes, oldest start first */
    size_t count;
    int64_t read_ms; /* the store's time of the read: a runtime's
                        heartbeat age is read_ms - heartbeat_ms */
} duro_runtime_list;

/** Frees the list and its rows; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_runtime_list_free(duro_runtime_list *list);

/* ------------------------------------------------------------------------
 * The methods table. `version` is the first field; methods are only ever
 * appended; callers use a version-N method only when version >= N and the
 * pointer is set. A provider's own struct embeds duro_provider as its first
 * member.
 *
 * Threads: every method may be called from any thread, concurrently, unless
 * it says otherwise; methods block on storage I/O. Strings passed in are
 * borrowed for the call. Times are milliseconds.
 *
 * Outputs: a method that fails leaves its out-parameters NULL / zero.
 *
 * Input rules, for every method: a NULL or empty instance id, lock token or
 * required name fails DURO_INVALID; a payload, error, name or id longer than
 * the provider's configured maximum (payload: max_payload bytes; names and
 * ids: 1024 bytes) fails DURO_TOO_LARGE. Such failures are not retryable and
 * change nothing. A token the provider never issued is DURO_LOCK_LOST.
 * Text: duro stores UTF-8 (README, "Text is UTF-8"); the runtime and the
 * client refuse anything else where it enters. A provider whose store
 * holds UTF-8 only fails text that is not UTF-8 with DURO_INVALID naming
 * the field, before any statement (PostgreSQL, whose server would refuse
 * it with SQLSTATE 22021 however often it was retried); SQLite stores the
 * bytes as given, so that a store written by an earlier duro, which may
 * hold such text, can still be read and worked on. */

/* ---- schedules (version 13) ---------------------------------------------
 * A schedule is a row the store keeps for the client and the runtimes'
 * firing threads: its spec, opaque text to the store (the client's JSON),
 * and the state the planner (src/core/schedule.h) goes on from. Every
 * write of the state is a compare-and-set on row_version, so of the
 * runtimes that plan the same state only one writes its plan; the others
 * get DURO_CONFLICT and read again. See docs/schedules.md. */

/* Bytes of a schedule id: the ids of its fires' instances add about 30. */
#define DURO_SCHEDULE_ID_MAX 200
/* Fires-log entries a store keeps per schedule (the newest). */
#define DURO_SCHEDULE_FIRES_KEPT 100

/* A schedule as stored. Text fields are borrowed from the list's arena on
 * reads; borrowed for the call on writes. */
typedef struct duro_schedule_record {
    const char *id;
    const char *spec;             /* the spec (JSON text of the client) */
    int64_t spec_version;         /* 1 at create; an update raises it */
    int64_t row_version;          /* raised by every write: the key of the
                                     compare-and-set (read only) */
    int64_t next_ms;              /* the first fire not yet decided; 0: no
                                     more */
    int64_t due_ms;               /* when due_schedules returns it (its next
                                     fire's jittered time, or a buffered
                                     fire's); 0: never */
    int64_t buffered_ms;          /* a buffered fire's time; 0: none */
    const char *last_instance_id; /* the instance of the last fire started;
                                     NULL: none (read only) */
    int last_status;              /* its status (DURO_STATUS_NOT_FOUND when
                                     none or gone; read only) */
    int paused;                   /* 1: due_schedules skips it */
    const char *note;             /* why it was paused (or NULL) */
    int64_t fires;                /* instances it started (read only) */
    int64_t skips;                /* fires it skipped (read only) */
    int64_t created_ms;           /* read only */
    int64_t updated_ms;           /* read only */
} duro_schedule_record;

/* Schedules in one arena: free with duro_schedule_list_free(). */
typedef struct duro_schedule_list {
    duro_arena *arena;
    duro_schedule_record *items;
    size_t count;
    int64_t next_due_ms; /* due_schedules: the earliest due_ms after now of
                            the schedules not paused, 0: none */
} duro_schedule_list;

/** Frees a list and everything in it; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_schedule_list_free(duro_schedule_list *list);

/* What a fire did, in the fires log and in apply_schedule's actions. The
 * values are the planner's (DURO__FIRE_*) and are stored: append only. */
typedef enum duro_schedule_action_kind {
    DURO_SCHEDULE_START = 1,    /* started instance_id */
    DURO_SCHEDULE_SKIP = 2,     /* skipped `count` fires, the first at
                                   time_ms, for `why` */
    DURO_SCHEDULE_BUFFER = 3,   /* kept the fire for when the last ends */
    DURO_SCHEDULE_STOP_LAST = 4 /* cancelled or terminated instance_id */
} duro_schedule_action_kind;

/* One action of apply_schedule, and one fires-log entry. */
typedef struct duro_schedule_action {
    int kind;                 /* duro_schedule_action_kind */
    int64_t time_ms;          /* the fire's time */
    int64_t count;            /* SKIP: fires skipped (>= 1; -1: more than
                                 counted); 1 otherwise */
    const char *why;          /* SKIP: why (static text); START: NULL or
                                 "trigger" */
    const char *instance_id;  /* START: the instance to create; STOP_LAST:
                                 the instance to stop */
    const char *name;         /* START: orchestration name */
    const char *version;      /* START: its version (NULL: default) */
    const char *input;        /* START: input (NULL: none) */
    int terminate;            /* STOP_LAST: 1 terminates, 0 cancels */
    const char *reason;       /* STOP_LAST: the request's reason */
    const char *requested_by; /* STOP_LAST: who asks */
    int64_t recorded_ms;      /* read: when the entry was written */
    int instance_status;      /* read: the instance's status now
                                 (DURO_STATUS_NOT_FOUND: none or gone) */
    int64_t deadline_ms;      /* START: the instance's deadline (wall ms; 0:
                                 none), as a START message's fire_at_ms */
} duro_schedule_action;

/* Fires-log entries in one arena, newest first: free with
 * duro_schedule_fire_list_free(). */
typedef struct duro_schedule_fire_list {
    duro_arena *arena;
    duro_schedule_action *items;
    size_t count;
} duro_schedule_fire_list;

/** Frees a list and everything in it; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_schedule_fire_list_free(duro_schedule_fire_list *list);

#define DURO_PROVIDER_VERSION 13

typedef struct duro_provider duro_provider;

struct duro_provider {
    int version;      /* DURO_PROVIDER_VERSION this provider implements */
    const char *name; /* "sqlite", "postgres", ... */

    /* Releases everything. No other method may be running or called after.
     * NULL-safe through duro_provider_close(). */
    void (*close)(duro_provider *p);

    /* --- orchestrator queue ------------------------------------------- */

    /* One transaction: picks the instance whose oldest visible message is
     * oldest among instances that are not locked (or whose lock expired),
     * locks it for lock_timeout_ms with a fresh token, raises the fetch
     * count of every visible message of that instance, and returns them all
     * (oldest first) with the instance metadata and the current execution's
     * history (minus what `cache` says the caller holds; cache may be NULL).
     * Messages whose visibility lies in the future stay invisible and are
     * not returned. The instance lock is exclusive across threads and
     * processes until ack, abandon or expiry. Messages that arrive while the
     * instance is locked are not part of the item and stay queued.
     * *out = NULL (and DURO_OK) when nothing is visible. */
    int (*fetch_orchestration_item)(duro_provider *p, int64_t lock_timeout_ms,
                                    const duro_history_cache *cache,
                                    duro_orch_item **out, duro_error *err);

    /* One transaction, all or nothing:
     *  1. verifies that lock_token still holds the instance lock (unexpired);
     *     otherwise fails DURO_LOCK_LOST (not retryable) and changes nothing;
     *  2. appends history_delta to ack->execution_id (creating the execution
     *     when it is new and making it current); a duplicate event id fails
     *     the whole ack with DURO_ALREADY_EXISTS (not retryable); an
     *     execution may hold exactly the configured cap of events, one more
     *     fails the whole ack with DURO_HISTORY_LIMIT (not retryable);
     *  3. inserts worker_items;
     *  4. deletes the worker rows of cancelled_activities, set-based on the
     *     indexed (instance_id, execution_id, activity_id) columns, after the
     *     inserts, so an activity scheduled and cancelled in one turn is never
     *     fetchable; rows already gone are not an error;
     *  5. enqueues orchestrator_items with their delays. A START item creates
     *     its instance row (status Pending, with the item's parent link,
     *     which delete_instance follows); when that instance already
     *     exists the START is dropped and, if the item names a parent and is
     *     not detached, a CHILD_FAILED (DURO_ALREADY_EXISTS, configuration)
     *     goes to that parent instead;
     *  6. writes meta to the instance and execution rows (NULL: untouched);
     *  7. keeps only live work queued: when meta ends the instance
     *     (Completed, Failed, Cancelled) it deletes every message still
     *     queued for the instance (timers not yet due, a delayed START not
     *     yet visible, messages that arrived during the turn, and any this
     *     ack enqueued for the instance itself), which a finished instance
     *     would only drop; when meta is ContinuedAsNew it deletes the
     *     messages addressed to the ended execution (ACTIVITY_COMPLETED,
     *     ACTIVITY_FAILED, TIMER_FIRED, CHILD_COMPLETED and CHILD_FAILED whose
     *     execution_id is ack->execution_id), keeping the CONTINUE_AS_NEW
     *     message, carried events and everything else for the instance;
     *  8. deletes the messages this item fetched and releases the lock (the
     *     instance stays ready for what remains queued, by its visibility).
     * A message for an instance that has no instance row can be consumed by
     * an ack with no delta and NULL meta; that creates nothing. */
    int (*ack_orchestration_item)(duro_provider *p, const char *lock_token,
                                  const duro_orch_ack *ack, duro_error *err);

    /* Releases the lock without consuming the messages; the instance becomes
     * fetchable again after delay_ms: messages enqueued meanwhile do not
     * make it so sooner, except a CANCEL_INSTANCE or TERMINATE_INSTANCE
     * (enqueued, or requested through cancel_instances or
     * control_instances), which makes it fetchable at once - an instance
     * whose code no runtime has waits out growing delays, and it can always
     * be stopped promptly. Fetch counts stay raised. Fails DURO_LOCK_LOST
     * when the token no longer holds the lock. */
    int (*abandon_orchestration_item)(duro_provider *p, const char *lock_token,
                                      int64_t delay_ms, duro_error *err);

    /* Extends the lock to now + extend_ms. Fails DURO_LOCK_LOST (not
     * retryable) when the token is unknown or the lock already expired. */
    int (*renew_orchestration_item_lock)(duro_provider *p,
                                         const char *lock_token,
                                         int64_t extend_ms, duro_error *err);

    /* For clients and tools: one transaction that enqueues item, visible
     * after delay_ms. A START creates the instance row (status Pending) in
     * the same transaction and fails DURO_ALREADY_EXISTS when the instance
     * exists, unless the item carries DURO_START_IDEMPOTENT and the
     * instance's orchestration name equals item->name (then DURO_OK,
     * nothing changed; version, payload and status are not compared). An
     * idempotent START of another name fails DURO_ALREADY_EXISTS (not
     * retryable, nothing changed) with a message naming both names. Other
     * kinds are enqueued as they are. (Version 4:
     * a CANCEL_INSTANCE also records the request on its instance; see
     * "Cancellation requests" below. Version 8: an EXTERNAL_EVENT with an
     * event_id already recorded for its instance is DURO_OK and enqueues
     * nothing; see duro_work_item.event_id.) */
    int (*enqueue_for_orchestrator)(duro_provider *p,
                                    const duro_work_item *item,
                                    int64_t delay_ms, duro_error *err);

    /* --- worker queue -------------------------------------------------- */

    /* One transaction: locks the oldest visible, unlocked (or lock-expired)
     * activity row for lock_timeout_ms with a fresh token and raises its
     * fetch count. Concurrent fetches never return the same row while its
     * lock holds. *out = NULL when nothing is visible. */
    int (*fetch_work_item)(duro_provider *p, int64_t lock_timeout_ms,
                           duro_worker_item **out, duro_error *err);

    /* Extends the row's lock to now + extend_ms while lock_token still holds
     * the row: a work item's lock ends when another fetch takes the row (or
     * it is acked, abandoned or deleted), not when its expiry passes; expiry
     * only makes the row fetchable. So a renewal that comes after the expiry,
     * before any other fetch, extends the lock like a timely one. Fails, not
     * retryable:
     *  - DURO_NOT_FOUND when the row is gone: a turn cancelled the activity
     *    (see read_activity_cancel_reason for why), it was acked (possibly by
     *    another worker that took it after expiry), or its instance was
     *    deleted;
     *  - DURO_LOCK_LOST when the row is there but the token no longer holds
     *    it (taken by another fetch after expiry, or released). A provider
     *    whose row ids can be reused after a delete may report a deleted row
     *    this way once a new row has its id; callers treat both codes as "the
     *    activity lost its row" and look up a cancellation either way.
     * Busy storage fails retryably; callers must not treat that as either. */
    int (*renew_work_item_lock)(duro_provider *p, const char *lock_token,
                                int64_t extend_ms, duro_error *err);

    /* One transaction: deletes the row held by lock_token and, when
     * completion is not NULL, enqueues it on the orchestrator queue. An
     * expired lock that no other fetch took still holds the row. When no
     * row was deleted (gone, or taken by another fetch after expiry) it
     * fails DURO_LOCK_LOST, not retryable, and enqueues nothing. */
    int (*ack_work_item)(duro_provider *p, const char *lock_token,
                         const duro_work_item *completion, duro_error *err);

    /* Releases the row's lock; visible again after delay_ms. The fetch count
     * stays raised. Like renew and ack, needs only the token to still hold
     * the row (an expired lock that no other fetch took still holds it).
     * Fails DURO_LOCK_LOST when the token no longer holds it or the row is
     * gone. */
    int (*abandon_work_item)(duro_provider *p, const char *lock_token,
                             int64_t delay_ms, duro_error *err);

    /* --- reads and management ------------------------------------------ */

    /* History of one execution (execution_id 0: the current one), oldest
     * first. DURO_NOT_FOUND when the instance or execution does not exist. */
    int (*read_history)(duro_provider *p, const char *instance_id,
                        uint64_t execution_id, duro_history **out,
                        duro_error *err);

    /* Current execution id; DURO_NOT_FOUND when the instance does not
     * exist. 0 for a Pending instance that has not run yet. */
    int (*latest_execution_id)(duro_provider *p, const char *instance_id,
                               uint64_t *out, duro_error *err);

    /* The instance as a list of one. DURO_NOT_FOUND when there is no such
     * instance. */
    int (*get_instance)(duro_provider *p, const char *instance_id,
                        duro_instance_list **out, duro_error *err);

    /* Instances matching filter, ordered by instance id (query_instances,
     * version 10, has more filters, orders and opaque cursors). */
    int (*list_instances)(duro_provider *p, const duro_instance_filter *filter,
                          duro_instance_list **out, duro_error *err);

    /* Number of messages queued on `queue` (visible or not, locked or not),
     * for one instance or, with instance_id NULL, for all. */
    int (*count_messages)(duro_provider *p, duro_queue queue,
                          const char *instance_id, uint64_t *out,
                          duro_error *err);

    /* One transaction: deletes the instance, its executions, history, queued
     * messages and worker rows, then the same for every instance whose parent
     * it is, recursively. A non-terminal instance (or child) is deleted only
     * with force; otherwise DURO_INVALID_STATE and nothing changes.
     * *deleted (may be NULL) receives how many instances went. */
    int (*delete_instance)(duro_provider *p, const char *instance_id, int force,
                           size_t *deleted, duro_error *err);

    /* One transaction: deletes the history and rows of finished executions
     * of instance_id, keeping the current one and the keep_last - 1 before it
     * (keep_last 0 behaves as 1). *pruned (may be NULL) receives how many
     * executions went. */
    int (*prune_executions)(duro_provider *p, const char *instance_id,
                            uint64_t keep_last, size_t *pruned,
                            duro_error *err);

    /* --- wake-up --------------------------------------------------------- */

    /* Blocks until work may be visible on `queue` or max_wait_ms passes:
     * returns early when this process enqueues onto that queue, when the
     * earliest delayed message on it becomes due, or when wake() is called.
     * A commit of n items may end as few as n waits (not every waiter's),
     * provided a caller whose last fetch began before the commit is among
     * those woken or returns at once; a caller that fetched an item must
     * fetch again before it waits.
     * Work from other processes is noticed by polling at most every
     * max_wait_ms (the caller's fallback interval). Spurious returns are
     * allowed. Returns DURO_OK in every case but failure of the store. */
    int (*wait_for_work)(duro_provider *p, duro_queue queue,
                         int64_t max_wait_ms, duro_error *err);

    /* Makes every current and next wait_for_work of this provider return at
     * once until wake(p, 0) resets it; wake(p, 1) is used at shutdown.
     * Never blocks. */
    void (*wake)(duro_provider *p, int sticky);

    /* --- version 2 ------------------------------------------------------
     * A dispatcher that acks one item usually fetches the next at once;
     * doing both in one transaction halves the commits on the hot path.
     * Callers fall back to the two separate calls when a provider's version
     * is 1 or the pointer is NULL. */

    /* ack_orchestration_item, then fetch_orchestration_item, as ONE
     * transaction: when the ack fails nothing is fetched and nothing
     * changes (the error is the ack's); otherwise *next is the next locked
     * item (possibly the same instance, when messages arrived for it) or
     * NULL. */
    int (*ack_and_fetch_orchestration_item)(
        duro_provider *p, const char *lock_token, const duro_orch_ack *ack,
        int64_t lock_timeout_ms, const duro_history_cache *cache,
        duro_orch_item **next, duro_error *err);

    /* ack_work_item, then fetch_work_item, as ONE transaction, with the same
     * all-or-nothing rule: a failed ack (DURO_LOCK_LOST when the row is
     * gone) enqueues and fetches nothing. */
    int (*ack_and_fetch_work_item)(duro_provider *p, const char *lock_token,
                                   const duro_work_item *completion,
                                   int64_t lock_timeout_ms,
                                   duro_worker_item **next, duro_error *err);

    /* --- version 3 ------------------------------------------------------
     * A worker in another process than the turn that cancelled its activity
     * learns of it when renew_work_item_lock finds the row gone; this tells
     * it why. Callers fall back to reporting a lost lock when a provider's
     * version is below 3 or the pointer is NULL. */

    /* Copies the reason of the ActivityCancelRequested event whose
     * source_event_id is activity_id, in execution execution_id (the
     * execution the work item names; 0 fails DURO_INVALID) of instance_id,
     * into reason[reason_size], NUL-terminated and cut to reason_size - 1
     * bytes (reason NULL or reason_size 0 fails DURO_INVALID). Fails
     * DURO_NOT_FOUND, not retryable, when there is no such event: the
     * activity was not cancelled, or the instance or execution does not
     * exist. A pure read, at the cost of one index lookup (never a scan of
     * the execution's history); the event is committed in the same
     * transaction that deletes the activity's row, so a caller that found
     * the row gone also finds the event when a turn cancelled it. */
    int (*read_activity_cancel_reason)(duro_provider *p,
                                       const char *instance_id,
                                       uint64_t execution_id,
                                       uint64_t activity_id, char *reason,
                                       size_t reason_size, duro_error *err);

    /* --- version 4 ------------------------------------------------------
     * Operating on many instances at once, why an instance is stuck, and
     * the store's gauges.
     * Callers report DURO_UNSUPPORTED (or fall back, where a version-3 way
     * exists) when a provider's version is below 4 or the pointer is NULL.
     * Version 4 also appended fields to duro_instance_info and
     * duro_orch_item, which a version-4 provider fills; callers read them
     * only from a provider whose version is 4 or more (one built against
     * an older header allocates neither them nor the larger array stride
     * of a list). It adds these rules to the methods above:
     *
     * Cancellation requests. Whenever a CANCEL_INSTANCE is enqueued
     * (enqueue_for_orchestrator, step 5 of an ack, cancel_instances,
     * cancel_matching) for an instance that is Pending or Running and has
     * no cancellation requested yet, the same transaction records the
     * request on the instance: cancel_requested_ms (now), cancel_reason and
     * cancelled_by (the item's reason and requested_by). A later request
     * changes nothing recorded: the first one stays, and stays after the
     * instance ends (also when a turn already running completed or failed
     * it, so the request had no effect). The fetched item carries the
     * record (cancel_requested_ms, cancel_reason, cancelled_by), and a
     * runtime writes that request, not the message's, into
     * OrchestrationCancelRequested: history and status name the same
     * reason and requester.
     *
     * Finish time. The ack whose meta makes an instance Completed, Failed
     * or Cancelled (version 5: or Terminated) sets its finished_ms (now);
     * continue-as-new does not.
     *
     * Problems. last_problem, last_problem_ms and next_attempt_ms change
     * only through set_instance_problem and an ack with meta (see
     * duro_instance_meta.problem; checked like an error payload:
     * DURO_TOO_LARGE over the payload maximum fails the whole ack). */

    /* Records (problem not NULL) or clears (problem NULL) why a runtime
     * cannot make progress with instance_id: last_problem = problem,
     * last_problem_ms = now, next_attempt_ms as given (0: no retry
     * planned); clearing sets the three to NULL / 0 / 0. One transaction
     * that writes that instance row only: status, updated_ms, history and
     * queues are untouched. Fails, changing nothing: DURO_NOT_FOUND (not
     * retryable) when the instance does not exist; DURO_INVALID for a
     * negative next_attempt_ms; DURO_TOO_LARGE for a problem longer than
     * the payload maximum. On an instance that has ended (neither Pending
     * nor Running) it succeeds and changes nothing: the problem an instance
     * ended with is kept, and a runtime's late report (an activity of an
     * instance cancelled meanwhile, a turn whose ack failed while another
     * thread finished the instance) cannot stick to it or clear it.
     * Runtimes call it on failure paths and to clear a problem they saw,
     * never on a healthy turn. */
    int (*set_instance_problem)(duro_provider *p, const char *instance_id,
                                const char *problem, int64_t next_attempt_ms,
                                duro_error *err);

    /* One transaction, all or nothing: for each of the count instances
     * (at most DURO_BULK_BATCH_MAX, more fails DURO_TOO_LARGE; 0 is DURO_OK
     * and changes nothing) decides an outcome from the state the
     * transaction sees and fills results[i] for instance_ids[i] (see
     * duro_cancel_outcome): a Pending or Running instance with no
     * cancellation requested gets a CANCEL_INSTANCE carrying reason and
     * requested_by (each may be NULL), visible at once, and the request is
     * recorded on it (DURO_CANCEL_REQUESTED); nothing else changes; from
     * version 9 one that has not begun is cancelled in this transaction
     * instead (DURO_CANCEL_CANCELLED; see version 9). An id
     * given more than once is handled at its first occurrence; the later
     * ones get DURO_CANCEL_DUPLICATE and the first one's status. A NULL
     * instance_ids or results with count > 0, or a NULL or empty id, fails
     * DURO_INVALID; on any failure results are left zero. */
    int (*cancel_instances)(duro_provider *p, const char *const *instance_ids,
                            size_t count, const char *reason,
                            const char *requested_by,
                            duro_cancel_result *results, duro_error *err);

    /* Requests cancellation, as cancel_instances does, of every instance
     * that filter selects and that is Pending or Running with no
     * cancellation requested yet. filter->status_mask may hold only
     * Pending and Running (and from version 5 Suspended; 0: Pending and
     * Running) and finished_before_ms must be 0, else DURO_INVALID; a NULL
     * filter or out fails DURO_INVALID. From version 9 the instances of a
     * batch that have not begun are cancelled in the batch's transaction
     * (see version 9), and *out's applied counts them.
     *
     * The set is fixed when the call starts: an instance created (or that
     * begins to match) after that moment is not cancelled, however long
     * the call runs; one of the set that stopped being cancellable by the
     * time its turn comes (finished, cancelled by another caller, deleted)
     * is skipped. Instances are handled in id order, in transactions of at
     * most DURO_BULK_BATCH_MAX, each all or nothing; a failure ends the
     * call, and the transactions committed before it stay (repeating the
     * call cancels the rest; what it already cancelled is skipped then).
     * With dry_run nothing is written: the result is exactly the set a
     * real run starting at that moment would cancel.
     *
     * *out (free with duro_bulk_result_free) holds how many instances were
     * (dry run: would be) cancelled and the first max_ids of their ids, in
     * id order. A call that fails leaves *out NULL. Reads and writes in
     * bounded batches: memory does not grow with the number of matches
     * beyond max_ids. */
    int (*cancel_matching)(duro_provider *p, const duro_bulk_filter *filter,
                           const char *reason, const char *requested_by,
                           int dry_run, size_t max_ids, duro_bulk_result **out,
                           duro_error *err);

    /* Deletes finished instances, for retention: every instance that
     * filter selects, where filter->status_mask may hold only Completed,
     * Failed and Cancelled (version 5: and Terminated; 0: all of them) and
     * filter->finished_before_ms (exclusive) is required; any other status
     * bit, a missing finished_before_ms, or a NULL filter or out fails
     * DURO_INVALID and changes nothing: Pending and Running instances are
     * never purged.
     *
     * As delete_instance does, an instance goes with all its descendants
     * (through parent links, whatever their name or age: its executions,
     * history, queued messages and worker rows too), and only when it and
     * every descendant are Completed, Failed or Cancelled; otherwise it is
     * kept whole. A selected instance that has a selected ancestor is
     * handled with that ancestor (purged with it, or kept with it).
     *
     * The fixed set, id order, batching (at most DURO_BULK_BATCH_MAX
     * selected instances per transaction, with their descendants), failure,
     * dry_run and memory as cancel_matching. *out: how many instances were
     * (would be) deleted, descendants included, and the first max_ids of
     * their ids, batch by batch, each batch in id order. */
    int (*purge_instances)(duro_provider *p, const duro_bulk_filter *filter,
                           int dry_run, size_t max_ids, duro_bulk_result **out,
                           duro_error *err);

    /* Store gauges (see duro_store_stats for what each count means), for
     * monitoring that scrapes every few seconds: *out is ONE allocation
     * (the struct, its arrays and their names), which the caller frees
     * with duro_free(). A pure read in one read transaction: every field
     * comes from the same snapshot, now_ms included, and it takes no lock
     * a writer waits for. Its cost grows with the number of distinct
     * (name, status) pairs, of queued messages and worker rows that are
     * ready or locked, and of instances with work queued - never with
     * history. store_size_bytes is what the provider can tell cheaply
     * about its storage on disk (-1: unknown; see the provider's notes).
     * A NULL out fails DURO_INVALID; a failure leaves *out NULL. */
    int (*read_store_stats)(duro_provider *p, duro_store_stats **out,
                            duro_error *err);

    /* Which of count work-item locks still hold their rows: held[i] = 1
     * when the row lock_tokens[i] was fetched with still exists and that
     * token still holds it (an expired lock that no other fetch took still
     * holds it, as for renew), else 0 - the row is gone (acked, or deleted
     * by a turn that cancelled the activity) or another fetch took it. A
     * pure read at the cost of one keyed lookup per token:
     * it writes nothing and extends no lock, so a runtime may call it at
     * its poll interval to learn of a cancellation decided in another
     * process long before its next renewal (which stays the fallback, and
     * what keeps the lock). A token that is not a work-item token of this
     * store is 0. count 0 is DURO_OK; NULL lock_tokens or held with
     * count > 0, or a NULL or empty token, fails DURO_INVALID; busy storage
     * fails retryably. On failure held[] is unspecified. */
    int (*check_work_item_locks)(duro_provider *p,
                                 const char *const *lock_tokens, size_t count,
                                 unsigned char *held, duro_error *err);

    /* Blocks until an ack in any process sharing the store has cancelled
     * work items (deleted their rows: an ack_orchestration_item with
     * cancelled_activities, a bulk or single cancel that ended an instance
     * with running activities), or max_wait_ms passes, or wake() is called.
     * Spurious returns are allowed; DURO_OK in every case but failure of
     * the store. A runtime waits here to run check_work_item_locks at once
     * instead of at its poll interval, so a cancellation decided in another
     * process reaches a running activity in milliseconds. A provider
     * without a cross-process notification leaves it NULL (callers then
     * check at their poll interval). */
    int (*wait_for_cancellations)(duro_provider *p, int64_t max_wait_ms,
                                  duro_error *err);

    /* --- version 5 ------------------------------------------------------
     * Terminate, suspend and resume. Version 5 adds to every method above:
     * the statuses Suspended (live: whatever holds for Running holds for
     * it - set_instance_problem changes it, cancel_instances and
     * cancel_matching cancel it and record the request, purge and
     * delete_instance without force keep it) and Terminated (ended: as
     * Cancelled - finished_ms, purge, delete); the work kinds
     * DURO_WORK_TERMINATE_INSTANCE, DURO_WORK_SUSPEND_INSTANCE and
     * DURO_WORK_RESUME_INSTANCE on the orchestrator queue (reason and
     * requested_by checked like a cancel's; enqueue_for_orchestrator takes
     * them and records nothing on the instance); and the event kinds
     * OrchestrationTerminated (terminal), ExecutionSuspended and
     * ExecutionResumed. The provider keeps no suspension state of its
     * own: a suspended instance's messages are delivered as any others,
     * and the runtime records them in history without running code.
     * Callers report DURO_UNSUPPORTED when a provider's version is below 5
     * or the pointer is NULL. */

    /* One transaction, all or nothing: for each of the count instances
     * (at most DURO_BULK_BATCH_MAX, more fails DURO_TOO_LARGE; 0 is DURO_OK
     * and changes nothing) decides an outcome from the state the
     * transaction sees and fills results[i] for instance_ids[i] (see
     * duro_control_outcome): a live instance (Pending, Running or
     * Suspended) gets the message of `control` (a duro_control) carrying
     * reason and requested_by (each may be NULL), visible at once
     * (DURO_CONTROL_OUTCOME_REQUESTED); nothing else changes; from version
     * 9 one that has not begun is terminated, or suspended, in this
     * transaction instead (DURO_CONTROL_OUTCOME_APPLIED; see version 9).
     * An id given
     * more than once is handled at its first occurrence; the later ones
     * get DURO_CONTROL_OUTCOME_DUPLICATE and the first one's status. An
     * unknown control, a NULL instance_ids or results with count > 0, or
     * a NULL or empty id, fails DURO_INVALID; on any failure results are
     * left zero. */
    int (*control_instances)(duro_provider *p, int control,
                             const char *const *instance_ids, size_t count,
                             const char *reason, const char *requested_by,
                             duro_control_result *results, duro_error *err);

    /* Sends the message of `control` (a duro_control), as
     * control_instances does, to every instance that filter selects.
     * filter->status_mask may hold: for DURO_CONTROL_TERMINATE, Pending,
     * Running and Suspended (0: the three); for DURO_CONTROL_SUSPEND,
     * Pending and Running (0: both); for DURO_CONTROL_RESUME, Suspended
     * only (0: it). Any other bit, a finished_before_ms other than 0, an
     * unknown control, or a NULL filter or out fails DURO_INVALID.
     * The fixed set, id order, batching, failure, dry_run, memory and *out
     * as cancel_matching. */
    int (*control_matching)(duro_provider *p, int control,
                            const duro_bulk_filter *filter, const char *reason,
                            const char *requested_by, int dry_run,
                            size_t max_ids, duro_bulk_result **out,
                            duro_error *err);

    /* --- version 6 ------------------------------------------------------
     * Activity run times; no new method. Version 6 appended started_ms and
     * finished_ms to duro_work_item and duro_event. A version-6 provider
     * keeps them from the ACTIVITY_COMPLETED / ACTIVITY_FAILED completion
     * that ack_work_item or ack_and_fetch_work_item enqueues (as it keeps
     * fire_at_ms: carried as they are, never checked or changed) to the
     * message fetch_orchestration_item returns, and from the events an
     * ack appends to what read_history and a fetch's history return; of
     * other kinds of items and events it stores what it is given (the
     * runtime gives 0). Rows a store held before it learnt them read 0.
     * The two structs are elements of returned arrays, so a provider must
     * be rebuilt against this header (while the major version is 0 the ABI
     * may change); one rebuilt from version-5 source builds its items in
     * zeroed arena memory and returns 0, which every caller already reads
     * as "unknown": no caller needs a version check to use them. The
     * runtime never compares them in replay: they are inputs, not
     * commands. */

    /* --- version 7 ------------------------------------------------------
     * Many turns, one transaction: a turn thread that fetched several
     * instances commits their turns together and fetches the next ones in
     * the same transaction, so one commit (one WAL flush, one BEGIN and
     * COMMIT) serves them all. Callers fall back to the one-item calls when
     * the pointer is NULL. */

    /* The acks of n items (lock_tokens[i] with acks[i], each as
     * ack_orchestration_item does it), then up to max_next fetches (as
     * fetch_orchestration_item does them), as ONE transaction; n or
     * max_next may be 0, neither more than 1024. All or nothing: when any
     * ack fails nothing changes and nothing is fetched, and the error is
     * that ack's (a token given twice fails as DURO_LOCK_LOST: the first
     * ack released its lock); a caller that must know which ack failed
     * retries them one by one with ack_orchestration_item. On success
     * next[0 .. *next_count) are locked items of distinct instances,
     * *next_count <= max_next (an instance acked here may be among them,
     * when messages arrived for it). An error once COMMIT was sent leaves
     * the outcome unknown as for ack_orchestration_item: *next_count is 0,
     * and acking the items again one by one is safe (each either commits
     * or finds its lock gone). next_count must not be NULL; next may be
     * NULL when max_next is 0. */
    int (*ack_and_fetch_orchestration_items)(
        duro_provider *p, size_t n, const char *const *lock_tokens,
        const duro_orch_ack *acks, int64_t lock_timeout_ms,
        const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
        size_t *next_count, duro_error *err);

    /* --- version 9 ------------------------------------------------------
     * Decided at once: no new method. cancel_instances, cancel_matching,
     * and control_instances and control_matching with
     * DURO_CONTROL_TERMINATE or DURO_CONTROL_SUSPEND decide an instance
     * that has not begun in the request's own transaction, instead of
     * queueing a message for a turn that may never come: a Pending
     * instance with no execution yet (no history), whose orchestration
     * lock no runtime holds (none, or one whose locked_until has passed:
     * that runtime's ack then fails DURO_LOCK_LOST), with no cancel,
     * terminate, suspend or resume queued (a turn must record those
     * first; a cancel's request counts). The transaction writes what that
     * instance's first turn would have written:
     * - cancel: execution 1 with OrchestrationStarted (name, the version
     *   the start asked for - NULL for the highest, as no runtime resolved
     *   it -, the START's input, parent link and DURO_START_DETACHED),
     *   an EventRaised for each external event queued, in arrival order,
     *   OrchestrationCancelRequested{reason, requested_by, flags 0} and
     *   OrchestrationCancelled{reason ("" when NULL)}; the instance and
     *   execution Cancelled (error the reason, category cancelled,
     *   finished_ms), the request recorded on the instance as for a
     *   queued cancel, the last problem cleared; everything queued for it
     *   deleted; an attached parent sent CHILD_FAILED {"child 'ID' was
     *   cancelled: REASON", category cancelled} to the scheduling event,
     *   as a turn's end sends it. Outcome DURO_CANCEL_CANCELLED.
     * - terminate: the same with OrchestrationTerminated{reason
     *   ("terminated" when NULL), requested_by}, status Terminated, no
     *   request recorded on the instance ("was terminated" to the
     *   parent). Outcome DURO_CONTROL_OUTCOME_APPLIED.
     * - suspend: execution 1 with OrchestrationStarted and
     *   ExecutionSuspended{reason, requested_by, DURO_SUSPEND_BEFORE_START};
     *   the instance and execution Suspended; only the START is deleted
     *   (its content is in history): what else is queued stays for the
     *   turns that record it while suspended. The runtime starts the code
     *   at the resume (a delayed start's delay ends with the suspension).
     *   Outcome DURO_CONTROL_OUTCOME_APPLIED.
     * A resume is never decided at once. *_matching count such instances
     * in duro_bulk_result.applied (a dry run: those that have not begun
     * when it reads the set). */

    /* --- version 10 -----------------------------------------------------
     * Queries for operators' views (a console's lists): instances by
     * filters in three orders, and the control requests across instances.
     * Both are pure reads in one read transaction (a page and its total
     * come from one snapshot) on the provider's readers: they take no
     * lock a writer waits for and change nothing. Callers report
     * DURO_UNSUPPORTED when the version is below 10 or the pointer is NULL
     * (duro_client_query() falls back to list_instances for a query it can
     * express).
     *
     * Paging is by key, never by offset: a cursor holds the sort key and
     * id of its page's last row, and the next page is the rows after it
     * in the order, as the store holds them when that page is read. So no
     * row is on two pages, and a row that exists throughout and keeps its
     * sort key is on exactly one, whatever is created, changed or deleted
     * between pages. A row whose sort key changes between pages (an
     * instance's updated_ms in DURO_ORDER_UPDATED_DESC) moves: to the
     * front, before the cursor, so the pages after show it neither again
     * nor, when it had not been shown, at all. New rows sort where their
     * key puts them: in DURO_ORDER_ID after the cursor when their id
     * does; in the newest-first orders and for control events before it
     * (a new first page shows them). A cursor is checked, never trusted:
     * a malformed one, or one of another order or method, fails
     * DURO_INVALID. */

    /* The instances q selects (see duro_instance_query), in q->order, at
     * most q->limit of them: *out (free with duro_instance_page_free())
     * holds them, next_cursor to read the next page, and with count_total
     * every match counted.
     *
     * Cost. The page is read through an index in its order, so a first
     * page and any later one read about a page of index entries however
     * many instances the store holds, when the query filters by nothing
     * else than: status (one or several statuses: one index range each,
     * merged; newest first with no status, the ranges of all seven, so up
     * to seven pages of entries), exact name, or name and status; the
     * created bounds narrow those ranges in DURO_ORDER_CREATED_DESC and
     * are checked row by row in the other orders. name_contains is
     * checked row by row (a substring has no index): a page reads
     * instances until it has its matches, all of them when there are few.
     * Otherwise, in this order of precedence, the page reads every child
     * of parent_instance, every instance with a problem (with_problem),
     * or the index range of the names that begin with name_prefix, and
     * sorts them: a cost that grows with those instances, not with the
     * store. count_total counts every match, which may read all of
     * them; with count_max (query version 2) it counts up to count_max + 1
     * of them and stops - total is then count_max and total_capped 1 when
     * the last one was found. With no filter but statuses, a name and
     * created bounds, which an index of status, name and creation time
     * checks, that is at most count_max + 1 index entries and no
     * instance row, whatever the store holds; a filter checked row by
     * row (name_contains, a prefix, a parent, with_problem) reads until
     * count_max + 1 match, every candidate when fewer do.
     *
     * Errors (not retryable; *out NULL): DURO_INVALID for a NULL q or out,
     * q->version < 1, an unknown order, a limit over
     * DURO_QUERY_LIMIT_MAX (a negative one converted to size_t is), a
     * status_mask bit outside 1..8, with_problem or count_total other than
     * 0 or 1, a negative created bound or count_max, an empty name or
     * parent_instance, or a malformed cursor (not a next_cursor of this
     * method, or of another order); DURO_TOO_LARGE for a name, name_prefix,
     * name_contains, parent_instance or (query version 3, provider version
     * 12) orchestration_version over 1024 bytes; busy storage retryably.
     * A text filter that is not UTF-8 fails DURO_INVALID in a store of
     * UTF-8 only. */
    int (*query_instances)(duro_provider *p, const duro_instance_query *q,
                           duro_instance_page **out, duro_error *err);

    /* The control requests history records, across every instance, newest
     * first: the OrchestrationCancelRequested, OrchestrationTerminated,
     * ExecutionSuspended and ExecutionResumed events (q->kind_mask picks
     * among them; 0: all four), each with its instance, execution, event
     * id, the instance's orchestration name, timestamp_ms, reason,
     * requested_by and flags. Ordered by timestamp_ms descending, then
     * instance id, execution id and event id descending; paged by key as
     * query_instances. since_ms is inclusive, until_ms exclusive; q->limit
     * as query_instances'.
     *
     * What is there is what history records: a request appears when the
     * turn that takes it records it (timestamp_ms is that turn's time, not
     * the request's: the instance's cancel_requested_ms keeps when the
     * first cancel was asked), or at once when the request decided an
     * instance that had not begun (version 9; the event's time is the
     * request's). So a request still queued, and one that changed nothing
     * (its instance had ended, a second suspend), are not there; requests
     * the runtime makes are (requested_by "duro" for a cleanup deadline's
     * terminate, "parent:<id>" for a parent's). History goes with its
     * execution and instance: requests of executions pruned
     * (prune_executions, keep_executions) and of instances deleted or
     * purged are gone.
     *
     * Cost: a partial index of history holds these four kinds only (other
     * events never pay for it), in the order of the list: a page reads
     * about a page of its entries; requested_by and a kind_mask of some of
     * the four are checked entry by entry.
     *
     * Errors (not retryable; *out NULL): DURO_INVALID for a NULL q or out,
     * q->version < 1, a kind_mask bit outside DURO_CONTROL_EVENT_KINDS, a
     * negative since_ms or until_ms, a limit over DURO_QUERY_LIMIT_MAX, a
     * malformed cursor; DURO_TOO_LARGE for a requested_by over 1024
     * bytes; busy storage retryably. */
    int (*list_control_events)(duro_provider *p,
                               const duro_control_event_query *q,
                               duro_control_event_list **out, duro_error *err);

    /* --- version 11 -----------------------------------------------------
     * How many turns a runtime's thread should fetch and commit together
     * (ack_and_fetch_orchestration_items) when its caller leaves
     * orchestration_batch to the store (0, the default): what this store
     * runs best with. 1 .. 1024; 0 or a version below 11: the runtime's
     * own default, 16. A store of set-based statements over the network
     * gains from more turns a statement (PostgreSQL's: 64); SQLite's group
     * commit from more turns a commit (64 as well). */
    int turn_batch;

    /* --- version 12 -----------------------------------------------------
     * The earliest time, on the store's clock (ms since the epoch, the
     * clock visibility and lock expiry are compared with), at which a fetch
     * on either queue could find an item: a delayed message (a timer, a
     * delayed start, a retry's abandon delay) or a worker row becoming
     * visible, or a lock expiring. *any is 0 (and *due_ms 0) when both
     * queues are empty. A time at or before now: something is fetchable
     * now, or a transaction in flight holds it. What a test environment's
     * virtual clock skips to when nothing else can run. Read-only; reads
     * each queue's earliest time from an index (no rows scanned); takes no
     * lock. Any thread; does not block beyond its reads.
     * Errors: DURO_INVALID for a NULL due_ms or any; busy storage
     * retryably (*any 0). */
    int (*next_due)(duro_provider *p, int64_t *due_ms, int *any,
                    duro_error *err);

    /* Also version 12: the live runtimes (see duro_runtime_info), and an
     * abandon that does not count the delivery. Callers do without them (report
     * DURO_UNSUPPORTED, or behave as before) when the version is below 12
     * or a pointer is NULL.
     *
     * register_runtime: writes info's row (inserted, or replaced whole when
     * a row of its runtime_id exists) with heartbeat_ms the store's time
     * now, and deletes the rows that are no longer live at that time, in
     * one write transaction. A runtime calls it at start and then every
     * heartbeat_every_ms: a heartbeat that finds its row removed (it
     * missed too many) writes it again. Any thread; blocks for a write
     * transaction. Errors (not retryable; nothing written): DURO_INVALID
     * for a NULL info, an empty runtime_id, a NULL or empty orchestration
     * or activity name, a NULL array with a count, a negative pid or
     * started_ms, a heartbeat_every_ms outside 1 ..
     * DURO_RUNTIME_HEARTBEAT_MAX_MS, text that is not UTF-8 in a store of
     * UTF-8 only; DURO_TOO_LARGE for a text over 1024 bytes, or a
     * registration whose names take more than the store's max_payload;
     * busy storage retryably. */
    int (*register_runtime)(duro_provider *p, const duro_runtime_info *info,
                            duro_error *err);
    /* The live runtimes (a row's heartbeat_ms + DURO_RUNTIME_MISSED_HEARTBEATS
     * x heartbeat_every_ms >= now), oldest start first (then by
     * runtime_id), each with what it registers in the order it was
     * registered: *out (free with duro_runtime_list_free()). A pure read on
     * a reader; rows no longer live are skipped, not deleted. Any thread.
     * Errors (*out NULL): DURO_INVALID for a NULL out; busy storage
     * retryably. */
    int (*list_runtimes)(duro_provider *p, duro_runtime_list **out,
                         duro_error *err);
    /* Deletes the row of runtime_id (a runtime's clean stop), and the rows
     * no longer live, in one write transaction. DURO_NOT_FOUND when it has
     * no row (never registered, or removed as gone: the others are deleted
     * all the same); DURO_INVALID for a NULL or empty runtime_id,
     * DURO_TOO_LARGE for one over 1024 bytes; busy storage retryably. */
    int (*remove_runtime)(duro_provider *p, const char *runtime_id,
                          duro_error *err);
    /* abandon_orchestration_item, except that the fetch it abandons is not
     * counted: the fetch count of the messages it locked goes back to what
     * it was before that fetch (duro_orch_item.attempt). For a runtime that
     * cannot run an instance that another live runtime can (its
     * orchestration version is not registered here): passing it on many
     * times never makes it poison for the runtime that runs it. The same
     * transaction contract and errors as abandon_orchestration_item. */
    int (*pass_orchestration_item)(duro_provider *p, const char *lock_token,
                                   int64_t delay_ms, duro_error *err);

    /* Also version 12: instance deadlines; no new method. An instance has at
     * most one deadline, set once. A version-12 provider:
     *  - accepts DURO_WORK_DEADLINE on the orchestrator queue (from
     *    enqueue_for_orchestrator and from an ack's orchestrator_items)
     *    with fire_at_ms > 0: when the instance exists and has no
     *    deadline, it sets the instance row's deadline to fire_at_ms
     *    (duro_instance_info's deadline_ms) and enqueues the message, in
     *    one transaction; otherwise it enqueues nothing and succeeds (a
     *    turn may send the registration's deadline without knowing
     *    whether the start gave one);
     *  - for a START whose fire_at_ms > 0 that creates its instance,
     *    writes that deadline on the new row and enqueues, in the same
     *    transaction, a DEADLINE message for it (execution 0, visible at
     *    fire_at_ms, or at once when that has passed); a START that
     *    creates nothing (idempotent, or a child that exists) enqueues
     *    none. A negative fire_at_ms on either kind, or a DEADLINE without
     *    one, fails DURO_INVALID;
     *  - returns deadline_ms in every duro_instance_info (0: none).
     * A DEADLINE is not a control request: it does not keep a cancel,
     * terminate or suspend from deciding an unbegun instance at once
     * (version 9), and it goes with the rest of the queue when the
     * instance ends; continue-as-new keeps it (execution 0). Callers send
     * DEADLINE messages and deadlines on START items only to a provider
     * whose version is 12 or more. */

    /* --- version 13 -----------------------------------------------------
     * Reset and rewind: an ended instance continues in a new execution
     * from a turn boundary of its current one. Version 13 adds the event
     * kind DURO_EVENT_EXECUTION_RESET. Callers report DURO_UNSUPPORTED
     * when the version is below 13 or the pointer is NULL. */

    /* One transaction, all or nothing: execution n+1 of r->instance_id
     * (n its current execution, which r->execution_id, when not 0, must
     * be), whose history is n's events 1 .. P (P = r->to_event_id, or the
     * last good point when 0; each event copied as stored, its times
     * too) and then ExecutionReset{reason, requested_by, ref_execution n,
     * ref_event_id P, flags DURO_RESET_REWIND for a rewind} at P + 1,
     * stamped now. The instance's current execution becomes n+1, its
     * status Running; its output, error, finish time, last problem and
     * recorded cancel request are cleared; n's row and history stay
     * (read_history with n). What events 1 .. P leave pending is made
     * live in the same transaction: each ActivityScheduled with no
     * completion, failure or cancel request among them gets a worker row
     * (execution n+1, its event id, name, input, attempt); each
     * TimerCreated with no TimerFired a DURO_WORK_TIMER_FIRED message,
     * visible at its fire time (at once when that has passed); event
     * subscriptions need nothing. Messages already queued for the
     * instance stay (a turn of n+1 drops those naming n), and a
     * DURO_WORK_RESUME_INSTANCE {reason, requested_by} is enqueued, visible
     * at once, so that a turn of n+1 runs now (a resume of an execution
     * that is not suspended records nothing). An attached
     * sub-orchestration scheduled without a result there (nor a cancel
     * request) must have ended: with a rewind, a Failed child is rewound
     * too, in the same transaction and by the same rules, its parent
     * link (its OrchestrationStarted's ref_execution and its row's
     * parent_execution) moved to n+1 so that its result reaches the new
     * execution; otherwise its ending is sent to n+1 as the child's
     * ending would send it (DURO_WORK_CHILD_COMPLETED with its output,
     * DURO_WORK_CHILD_FAILED with its error, or "child 'ID' was
     * cancelled: REASON" / "was terminated"). A child that is live (its
     * result would go to execution n), missing, or more than 16 levels
     * of rewound children deep is refused (DURO_INVALID).
     *
     * P must be a turn boundary: 1 <= P, P before the execution's
     * ending (its terminal event and the cancel requests with the
     * ending's reason just before it), and event P + 1 an input (a
     * completion, failure, fired timer, raised event, child result,
     * cancel request, suspension, resume, ExecutionReset, or a
     * terminate's events, decided without code):
     * inputs reach the code one at a time, and the decisions after one
     * are the code's answer to it, kept or dropped whole. A point inside
     * a turn (P + 1 a decision of the code) fails DURO_INVALID naming the
     * nearest boundaries before and after it.
     * Refused too (DURO_INVALID, changing nothing): events 1 .. P that
     * end inside a suspension, and the children above.
     *
     * Errors (not retryable unless storage's; out zero): DURO_INVALID for
     * a NULL r or out, r->version < 1, a NULL or empty instance id, a
     * rewind with a to_event_id, the refusals above; DURO_TOO_LARGE for
     * an id, reason or requested_by over 1024 bytes; DURO_NOT_FOUND for
     * an unknown instance or a to_event_id past the execution's history;
     * DURO_INVALID_STATE for an instance that is live (Pending, Running,
     * Suspended), not Failed for a rewind, or whose current execution is
     * not r->execution_id (another reset came first). With r->dry_run
     * the same checks and *out, nothing written (the reads still run in
     * a write transaction, rolled back: a dry run of a store opened
     * read-only fails). Any thread; blocks on storage I/O. */
    int (*reset_instance)(duro_provider *p, const duro_reset_request *r,
                          duro_reset_result *out, duro_error *err);

    /* --- version 13 -----------------------------------------------------
     * Schedules (see duro_schedule_record). Every method checks its input
     * and fails, not retryably and changing nothing: DURO_INVALID for a
     * NULL record, id, spec or out, an empty id, a negative time or count,
     * spec_version < 1, paused other than 0 or 1, a limit of 0; DURO_TOO_LARGE
     * for an id over DURO_SCHEDULE_ID_MAX bytes, a spec or note over the
     * store's payload limit. Busy storage fails retryably. Any thread. */

    /* Inserts r (its id, spec, spec_version, next_ms, due_ms, buffered_ms,
     * paused, note) with row_version 1 and no fires, in one transaction.
     * DURO_ALREADY_EXISTS when the id is taken. */
    int (*create_schedule)(duro_provider *p, const duro_schedule_record *r,
                           duro_error *err);

    /* Writes r's spec, spec_version, next_ms, due_ms, buffered_ms, paused
     * and note when the row's row_version is expected_row_version, raising
     * it (*row_version, when not NULL, gets the new one). DURO_CONFLICT
     * when the version differs, DURO_NOT_FOUND without the row; nothing
     * changes then. */
    int (*update_schedule)(duro_provider *p, const duro_schedule_record *r,
                           int64_t expected_row_version, int64_t *row_version,
                           duro_error *err);

    /* Deletes the schedule and its fires log in one transaction; the
     * instances it started are not touched. DURO_NOT_FOUND without it. */
    int (*delete_schedule)(duro_provider *p, const char *id, duro_error *err);

    /* The schedule `id`, with its last instance's status: *out holds one
     * record (free with duro_schedule_list_free()). DURO_NOT_FOUND without
     * it. Read-only, one snapshot. */
    int (*get_schedule)(duro_provider *p, const char *id,
                        duro_schedule_list **out, duro_error *err);

    /* Up to `limit` schedules in id order, those after after_id (NULL or
     * "": from the first), with their last instances' status. Read-only. */
    int (*list_schedules)(duro_provider *p, const char *after_id, size_t limit,
                          duro_schedule_list **out, duro_error *err);

    /* Up to `limit` schedules not paused whose due_ms is at or before now_ms
     * (due_ms 0 is never), earliest first, with their last instances'
     * status (a live one makes the planner skip, buffer or stop); and in
     * (*out)->next_due_ms the earliest due_ms after now_ms of the others
     * (0: none), so a firing thread knows how long to sleep. Read-only, one
     * snapshot; reads an index of due_ms of the schedules not paused. */
    int (*due_schedules)(duro_provider *p, int64_t now_ms, size_t limit,
                         duro_schedule_list **out, duro_error *err);

    /* One transaction: when the schedule's row_version is
     * expected_row_version, writes after->next_ms, due_ms and buffered_ms,
     * raises row_version (*row_version gets it when not NULL), and applies
     * the n actions in order: START creates the instance and its start
     * message as enqueue_for_orchestrator does with DURO_START_IDEMPOTENT
     * (an instance of that id and name already there is left as it is: a
     * fire applied twice starts one instance; of another name, the fire
     * is logged SKIP "instance id taken") and makes it the schedule's
     * last instance, counted in fires; SKIP adds count (or 1 for -1) to
     * skips; STOP_LAST requests a cancel or terminate of instance_id as
     * cancel_instances and control_instances do (nothing when it has
     * ended). Every action is appended to the fires log, which keeps the
     * newest DURO_SCHEDULE_FIRES_KEPT. DURO_CONFLICT when the version
     * differs (another runtime applied its plan: read again), DURO_NOT_FOUND
     * without the row; nothing changes then. DURO_INVALID also for an
     * unknown kind, a START without instance_id or name, a STOP_LAST
     * without instance_id, n > 0 with NULL actions. */
    int (*apply_schedule)(duro_provider *p, const char *id,
                          int64_t expected_row_version,
                          const duro_schedule_action *actions, size_t n,
                          const duro_schedule_record *after,
                          int64_t *row_version, duro_error *err);

    /* The newest `limit` entries of the schedule's fires log, newest first,
     * each with its instance's status now. An unknown schedule has none
     * (DURO_OK, count 0). Read-only. */
    int (*list_schedule_fires)(duro_provider *p, const char *id, size_t limit,
                               duro_schedule_fire_list **out, duro_error *err);
};

/** Opens a provider for a database URL: "sqlite:path", "sqlite::memory:",
 * "sqlite:path?synchronous=full&busy_timeout_ms=5000&max_history=100000"
 * (see README). On failure *out is NULL and err and duro_errmsg() say why
 * (DURO_BAD_URL for a NULL or malformed URL, DURO_INVALID for a NULL
 * @p out). @p err may be NULL.
 * @note Any thread; the provider may then be used from any thread. */
DURO_API int duro_provider_open(const char *url, duro_provider **out,
                                duro_error *err);

/** Copies @p url into out[size] (always terminated, cut to fit) with every
 * secret it may hold replaced by "***", as duro names a URL in every
 * message: the userinfo's password (scheme://user:***\@host/..., whole
 * even when it holds unescaped '@', '/' or '?'), and the value of every
 * query parameter but those known to hold no secret - duro's own and
 * libpq's (host, port, sslmode, application_name, ...) - the name
 * percent-decoded and compared case-sensitively, as libpq reads it: so
 * password=***, pass%77ord=***, PASSWORD=***, sslpassword=***,
 * no_such=***. A parameter that is not name=value, or whose decoded name
 * is not a plain word (password%3Dx=y), is "***" whole. For a program or
 * tool that shows the URL it was given. Returns the length written; NULL
 * @p url writes "", NULL @p out writes nothing (0).
 * @note Any thread. */
DURO_API size_t duro_url_mask(const char *url, char *out, size_t size);

/** Closes a provider; NULL is a no-op. @note One thread, nothing running. */
DURO_API void duro_provider_close(duro_provider *p);

#ifdef __cplusplus
}
#endif
#endif
