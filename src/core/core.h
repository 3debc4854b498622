/* core.h - the pure core of duro: results, the tracker of what an execution
 * has scheduled and what is still outstanding, and the replay engine that
 * runs one orchestration turn. No threads, no I/O: given history and new
 * messages it returns the events to append, the work to enqueue and the
 * activities to cancel. The engine runs user code on a fiber; a suspended
 * engine can be kept and resumed by a later turn. */
#ifndef DURO_CORE_H
#define DURO_CORE_H

#include "base/base.h"
#include "duro.h"

/* ---- results -------------------------------------------------------------
 * Filled by duro_ok()/duro_fail*()/duro_continue_as_new(). Heap strings
 * (duro__malloc) so an activity's result outlives its thread's stack. */

enum {
    DURO__RESULT_UNSET = 0,
    DURO__RESULT_OK = 1,
    DURO__RESULT_FAILED = 2,
    DURO__RESULT_CONTINUE_AS_NEW = 3
};

struct duro_result {
    int kind;     /* DURO__RESULT_* */
    char *output; /* ok: output; continue-as-new: next input */
    char *error;  /* failed */
    int category; /* failed */
    int oom;      /* a copy failed: the result is unusable */
    int invalid;  /* the text given was not UTF-8: failed, configuration,
                     error "<field> is not valid UTF-8 at byte N (0xXX)",
                     which the runtime prefixes with whose it was */
};

void duro__result_init(duro_result *r);
void duro__result_clear(duro_result *r); /* frees and re-inits */
/* Applies the rule for functions that set nothing: rc DURO_OK → ok with no
 * output; otherwise failed (application, duro_strerror(rc)). */
void duro__result_finish(duro_result *r, int rc);

/* ---- tracker -------------------------------------------------------------
 * What each scheduling event of one execution is and whether it is still
 * outstanding. Slots are indexed by event id (dense, 1-based). */

enum {
    DURO__SLOT_NONE = 0, /* not a scheduling event */
    DURO__SLOT_ACTIVITY = 1,
    DURO__SLOT_TIMER = 2,
    DURO__SLOT_CHILD = 3,
    DURO__SLOT_DETACHED = 4, /* fire-and-forget orchestration */
    DURO__SLOT_EVENT_WAIT = 5
};

enum {
    DURO__SLOT_PENDING = 1,
    DURO__SLOT_DONE = 2,             /* completion recorded */
    DURO__SLOT_CANCEL_REQUESTED = 3, /* cancel recorded, no completion */
    DURO__SLOT_LATE = 4              /* completion after a cancel request */
};

struct duro_task;

typedef struct duro__slot {
    uint8_t kind;
    uint8_t state;
    const char *child_instance; /* children: their instance id */
    struct duro_task *task;     /* the engine's task, NULL without code */
} duro__slot;

typedef struct duro__tracker {
    duro__slot *slots; /* slots[event_id], slots[0] unused */
    size_t cap;
    uint64_t count; /* events applied = last event id */
    int terminal;   /* a terminal event was applied */
} duro__tracker;

/* How a completion message relates to what the tracker knows. */
enum {
    DURO__MSG_APPLY = 1,     /* completes a pending task */
    DURO__MSG_LATE = 2,      /* arrives after a cancel request: recorded,
                                changes nothing */
    DURO__MSG_DUPLICATE = 3, /* already completed: dropped */
    DURO__MSG_UNKNOWN = 4    /* no such scheduling event: dropped */
};

void duro__tracker_init(duro__tracker *t);
void duro__tracker_free(duro__tracker *t);
/* Applies one event, which must have event_id == count + 1. Strings the
 * tracker keeps are copied into `arena`. DURO_OK, DURO_NOMEM, or
 * DURO_INVALID for an out-of-order event id. */
int duro__tracker_apply(duro__tracker *t, const duro_event *e,
                        duro_arena *arena);
/* Classifies a completion event (ActivityCompleted, TimerFired, ...)
 * against the slot of its source event. */
int duro__tracker_classify(const duro__tracker *t, const duro_event *e);
/* 1 for events produced by code or decisions (scheduling, cancel requests,
 * patch markers, terminal events, OrchestrationStarted); 0 for inputs consumed
 * while the code waits (completions, EventRaised, OrchestrationCancelRequested,
 * ExecutionSuspended, ExecutionResumed). */
int duro__event_is_command(int kind);
/* 1 for terminal events (completed, failed, continued-as-new, cancelled,
 * terminated). */
int duro__event_is_terminal(int kind);

/* ---- turns ---------------------------------------------------------------
 * What one turn decided, ready for ack_orchestration_item. Arrays are heap
 * (freed by duro__turn_reset); strings point into the turn arena or into the
 * engine's arena, so the engine must outlive the ack. */

typedef struct duro__turn {
    duro_arena *arena;
    duro_event *delta;
    size_t delta_count, delta_cap;
    duro_work_item *worker_items;
    size_t worker_count, worker_cap;
    duro_outbound *outbound;
    size_t outbound_count, outbound_cap;
    duro_activity_ref *cancelled;
    size_t cancelled_count, cancelled_cap;
    const char **cancel_reasons; /* parallel to cancelled */
    size_t reasons_count, reasons_cap;
    duro_instance_meta meta;
    int status;         /* DURO_STATUS_* of the execution after the turn */
    int meta_changed;   /* 1 when `meta` must be written: the execution
                           began or ended, or the custom status changed;
                           0: the rows stay as they are (ack meta NULL) */
    int nondeterminism; /* 1 when the turn failed the instance for it */
    int ran_code;       /* 1 when user code executed in this turn */
    int replayed;       /* 1 when history was replayed through the code */
} duro__turn;

int duro__turn_init(duro__turn *t);   /* DURO_OK or DURO_NOMEM */
void duro__turn_reset(duro__turn *t); /* empties it for the next turn */
void duro__turn_free(duro__turn *t);

/* ---- what a fetched batch means -------------------------------------------
 * Decided before any code runs, from the instance status and messages. */

enum {
    DURO__PLAN_DROP = 1,     /* consume every message, change nothing */
    DURO__PLAN_RUN = 2,      /* run the current execution */
    DURO__PLAN_START = 3,    /* begin execution 1 from a START message */
    DURO__PLAN_CONTINUE = 4, /* begin execution n+1 from CONTINUE_AS_NEW */
    DURO__PLAN_WAIT = 5      /* Pending instance whose delayed START is not
                                visible yet: abandon and retry later */
};

typedef struct duro__plan {
    int action;                  /* DURO__PLAN_* */
    uint64_t execution_id;       /* the execution the turn runs */
    const duro_work_item *start; /* START / CONTINUE_AS_NEW message */
    const char *why;             /* DROP / WAIT: for the log */
} duro__plan;

/* Decides the plan for a fetched item. Pure. */
void duro__plan_turn(const duro_orch_item *item, duro__plan *plan);

/* ---- the engine ---------------------------------------------------------- */

typedef struct duro__engine_config {
    duro_orchestration_fn fn; /* C code, run on a fiber */
    duro_driver driver;       /* or driven code: step set (then fn is
                                 NULL), run on the caller's stack; both
                                 unset: never run code (a turn decided
                                 without code) */
    void *user;
    size_t stack_size;          /* fiber stack; 0 = default */
    size_t max_payload;         /* bytes; 0 = unlimited */
    const duro__logger *logger; /* replay-safe duro_log goes here */
    int observe_cancel;         /* a cancel is delivered to the code */
    int64_t cleanup_timeout_ms; /* observe_cancel: the cleanup deadline */
    int64_t timeout_ms;         /* the registration's deadline, from the
                                   first turn of an instance started
                                   without one; 0: none (the runtime sets
                                   it only for a version-12 provider) */
    const char *version;        /* the registration's version, taken for an
                                   execution whose OrchestrationStarted
                                   names none (begun by a store, not a
                                   runtime: provider version 9); NULL:
                                   none */
} duro__engine_config;

typedef struct duro__turn_input {
    int64_t now_ms;            /* wall time when the turn began */
    const duro_event *history; /* events after duro__engine_events(e) */
    size_t history_count;
    const duro_work_item *start;    /* START / CONTINUE_AS_NEW that begins
                                       this execution, NULL otherwise */
    const duro_work_item *messages; /* the rest of the batch, in order */
    size_t message_count;
    /* Set by the runtime to end the execution without running code
     * (poison message, unregistered orchestration, history cap):
     * DURO_STATUS_FAILED with error and category. 0 otherwise. */
    int terminate_status;
    const char *terminate_error;
    int terminate_category;
    /* The instance was Suspended when fetched: without a RESUME in the
     * batch, an engine whose code has not started records the batch from
     * history alone and runs no code (and is not kept). */
    int suspended;
} duro__turn_input;

/* A new engine for one execution. Strings are copied. */
int duro__engine_create(const duro__engine_config *cfg, const char *instance_id,
                        uint64_t execution_id, duro_orch **out);
/* Destroys the engine and its fiber (suspended code is discarded without
 * unwinding): first the code's duro_orch_on_destroy hooks (newest first),
 * then the driver's destroy for its state, each once. Calls user code:
 * never with a lock held. NULL is a no-op. */
void duro__engine_destroy(duro_orch *e);

/* Runs one turn: replays history it does not know yet, then applies the
 * messages, resuming the code whenever it waits. Fills `out` (which must be
 * reset). DURO_OK: `out` is ready to ack (including when the turn failed the
 * instance for nondeterminism). DURO_NOMEM: the turn is unusable and the
 * engine must be destroyed. DURO_INVALID: history does not fit this engine
 * (wrong event ids); destroy the engine and replay from scratch.
 * DURO_ERROR: the driver's start or step failed (duro__engine_failure says
 * how); the turn is unusable and the engine must be destroyed. */
int duro__engine_turn(duro_orch *e, const duro__turn_input *in,
                      duro__turn *out);

/* Why the last duro__engine_turn returned DURO_ERROR (a driver's failed
 * start or step), NULL otherwise. Borrowed from the engine. */
const char *duro__engine_failure(const duro_orch *e);

/* 1 when the calling thread is running orchestration code: on a fiber, or
 * inside a driver's start or step. Calls that would block a turn thread or
 * wait for the runtime (the client, shutdown) refuse to run there. */
int duro__engine_in_code(void);

/* ---- the store-less replayer (replay.c) ---------------------------------
 * Replays the recorded execution `h` through the code of `cfg` (fn or
 * driver) as duro_replay_history() says; DURO_OK, DURO_NONDETERMINISM with
 * the message in msg, or DURO_INVALID / DURO_NOMEM / DURO_ERROR with the
 * reason in msg. */
int duro__engine_replay(const duro__engine_config *cfg, const duro_history *h,
                        char *msg, size_t msg_size);

uint64_t duro__engine_events(const duro_orch *e); /* events known */
int duro__engine_terminal(const duro_orch *e);    /* execution ended */
/* 0 when the engine must not be kept for a later turn: the execution
 * ended, or the turn was decided without running its code. */
int duro__engine_reusable(const duro_orch *e);
uint64_t duro__engine_execution(const duro_orch *e);
const char *duro__engine_instance(const duro_orch *e);
/* Heap bytes the engine holds: what replay built (its arena: tasks,
 * outputs, strings), its tracker and its struct. Not its fiber's stack
 * pages (a few KiB each, committed as touched). */
size_t duro__engine_bytes(const duro_orch *e);

#endif
