/* engine_internal.h - what the three files of the replay engine share:
 * engine.c (replay and turn machinery, tasks), retry.c (retry-policy
 * composites) and orch_api.c (the public orchestration-context API). Not
 * for use outside src/core; everything here runs on the thread that drives
 * the engine (and, for code, on its fiber). */
#ifndef DURO_ENGINE_INTERNAL_H
#define DURO_ENGINE_INTERNAL_H

#include <stdarg.h>
#include <string.h>

#include "core/core.h"
#include "core/fiber.h"

enum {
    TASK_ACTIVITY = 1,
    TASK_TIMER = 2,
    TASK_EVENT = 3,
    TASK_CHILD = 4,
    TASK_RETRY = 5,
    TASK_STATIC = 6 /* the static failed tasks (misuse, foreign); never
                       written */
};

enum {
    TASK_PENDING = 0,
    TASK_SUCCEEDED = 1,
    TASK_FAILED = 2,
    TASK_CANCELLED = 3
};
_Static_assert((int)TASK_PENDING == (int)DURO_TASK_PENDING &&
                   (int)TASK_SUCCEEDED == (int)DURO_TASK_SUCCEEDED &&
                   (int)TASK_FAILED == (int)DURO_TASK_FAILED &&
                   (int)TASK_CANCELLED == (int)DURO_TASK_CANCELLED,
               "duro_task_state() returns the task's state as it is");

typedef struct retry_state {
    duro_retry_policy policy;
    const char *input;
    uint32_t attempt;           /* attempts started so far */
    struct duro_task *activity; /* the running attempt */
    struct duro_task *timeout;  /* its timeout timer, if any */
    struct duro_task *backoff;  /* the delay before the next attempt */
    int64_t deadline;           /* total timeout, 0 = none */
} retry_state;

struct duro_task {
    uint8_t kind;
    uint8_t state;
    int rc;            /* duro_await code once done */
    uint64_t event_id; /* scheduling event */
    uint64_t done_seq; /* order of completion, 0 = at creation */
    const char *name;  /* activity, child or event name */
    const char *output;
    const char *error;
    int category;
    const char *child_instance;
    struct duro_task *parent; /* retry composite owning this attempt */
    retry_state *retry;
    struct duro_task *next_wait; /* event waits, in order */
};

/* Task storage. Every task of an engine lives in one of its chunks (in the
 * engine's arena), so whether a duro_task pointer is one of this engine's
 * is decided by comparing addresses with the engine's own chunks, without
 * reading what the pointer points at: a task of another engine, live or
 * freed, is never dereferenced. Chunks double from 16 to 4096 tasks, so a
 * lookup walks O(log n + n / 4096) chunks, newest first. */
typedef struct task_chunk {
    struct task_chunk *next; /* older chunk */
    size_t used, cap;        /* tasks handed out, room */
    struct duro_task tasks[];
} task_chunk;

/* An input recorded while the instance was suspended, handed to the code
 * (in order) when it is resumed. Strings in the engine's arena. */
typedef struct held_input {
    duro_event ev;
    int cls; /* DURO__MSG_* when it was recorded */
    struct held_input *next;
} held_input;

/* What duro_patched() answered for one change id in this execution: every
 * later ask of the same id gets the same answer (engine arena). */
typedef struct patch_answer {
    const char *id;
    int patched;
    struct patch_answer *next;
} patch_answer;

typedef struct raised_event {
    const char *name;
    const char *payload;
    int consumed;
    struct raised_event *next;
} raised_event;

struct duro_orch {
    duro__engine_config cfg;
    duro_arena *arena; /* lives as long as the engine */
    char *instance_id;
    uint64_t execution_id;
    const char *name;
    const char *version;
    const char *input;
    const char *parent_instance;
    uint64_t parent_execution;
    uint64_t parent_event_id;
    uint32_t start_flags;
    duro__fiber *fiber;
    duro__tracker tracker;
    task_chunk *tasks; /* every task of this engine, newest chunk first */

    /* the turn in progress */
    duro__turn *turn;
    const duro_event *replay;
    size_t replay_count;
    size_t replay_pos;
    int64_t turn_now;

    int64_t now;  /* deterministic time */
    uint64_t seq; /* completion order */
    uint64_t guid_counter;

    int code_started;
    int start_deferred; /* suspended before its code began (history's
                           second event is an ExecutionSuspended with
                           DURO_SUSPEND_BEFORE_START): the code starts at
                           the resume, never at OrchestrationStarted */
    int replay_segment; /* the code is re-running what a recorded input (or
                           a recorded start) made it run before */
    int code_done;
    duro_result result;
    int nondet;
    int oom;
    int terminal;

    raised_event *raised_head, *raised_tail;
    /* external-event messages of the batch that were not delivered because
     * the code returned first; carried to the next execution on
     * continue-as-new */
    const duro_work_item **leftover;
    size_t leftover_count, leftover_cap;
    struct duro_task *waits_head, *waits_tail;
    const char *custom_status;
    int custom_status_dirty;
    patch_answer *patches; /* duro_patched's answers, newest first */
    /* the change id duro_patched() last answered 0 in replay, and the
     * history position it was asked at: named when the code's next move
     * there meets a recorded marker of another id */
    const char *patch_declined;
    size_t patch_declined_pos;
    /* the code gave text that is not UTF-8 where no task can fail with it
     * (a custom status): why the execution fails at the end of the turn;
     * from then on the code neither issues commands nor resumes */
    const char *bad_text;

    /* an observed cancellation (cfg.observe_cancel) */
    int cancel_delivered;
    const char *cancel_reason, *cancel_by;
    int64_t cancel_at;          /* deterministic time of the cancel */
    struct duro_task *deadline; /* the cleanup deadline timer */
    int deadline_passed;
    /* suspension */
    int suspended;
    int status_dirty; /* suspended or resumed in this turn */
    held_input *held_head, *held_tail;
    int codeless;       /* this turn was decided without the code: never kept */
    const char *end_by; /* requested_by of OrchestrationTerminated */
    const char *end_reason; /* the ending's cancellations' reason when not
                               the status's (DURO_REASON_DEADLINE) */

    /* driven code (cfg.driver.step set) */
    void *driver_state;  /* what the driver's start made */
    int driver_live;     /* start succeeded: destroy is owed */
    int in_step;         /* inside the driver's start or step right now */
    int driver_error;    /* what start or step returned when it failed
                            (never 0): the turn is unusable */
    const char *failure; /* why, for the log (engine arena) */
    /* duro_orch_on_destroy hooks, newest first (engine arena) */
    struct destroy_hook *hooks;
};

typedef struct destroy_hook {
    void (*fn)(void *arg);
    void *arg;
    struct destroy_hook *next;
} destroy_hook;

/* The shared failed tasks returned for misuse; never written. Code receives
 * duro__misuse_task from a context function called off its fiber, and
 * duro__foreign_task when it passes a task that is not its engine's. */
extern struct duro_task duro__misuse_task;
extern struct duro_task duro__foreign_task;

/* 1 for the two static tasks above (compared by address only). */
static inline int duro__task_is_static(const struct duro_task *t)
{
    return t == &duro__misuse_task || t == &duro__foreign_task;
}

int duro__result_set_continue(duro_result *out, const char *input);

static inline const char *str_or(const char *s, const char *fallback)
{
    return s != NULL ? s : fallback;
}

static inline int str_eq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

/* ---- engine.c: strings, commands, tasks ---------------------------------
 * Copies and printf into the engine's arena (lives as long as the engine) or
 * the turn's arena; NULL (and e->oom set) when out of memory. */
const char *duro__engine_strdup(duro_orch *e, const char *s);
const char *duro__engine_turn_strdup(duro_orch *e, const char *s);
const char *duro__engine_vsprintf(duro_orch *e, const char *fmt, va_list ap)
    DURO_PRINTF(2, 0);
const char *duro__engine_sprintf(duro_orch *e, const char *fmt, ...)
    DURO_PRINTF(2, 3);

/* Issues task t's scheduling command and binds the task to its event.
 * Returns 1 when the command was appended live, so the caller enqueues its
 * side effects; 0 when it was replayed from history or the engine stopped
 * (nondeterminism, out of memory). */
int duro__engine_issue_task(duro_orch *e, struct duro_task *t,
                            const duro_event *ev);
/* The next orchestrator-queue item of the turn; NULL (e->oom) on OOM. */
duro_outbound *duro__engine_push_outbound(duro_orch *e);
/* 1 when s is longer than the configured payload limit. */
int duro__engine_over_limit(duro_orch *e, const char *s);
/* NULL when s is NULL or valid UTF-8; otherwise, in e's arena, "<what>
 * '<name>' <field> is not valid UTF-8 at byte N (0xXX)" ("<what> <field>
 * ..." when name is NULL): "activity 'Pay' input ...", "event name ...".
 * duro's text rule (base.h): what the code gives that is not UTF-8 fails
 * where it is given, never in a store. */
const char *duro__engine_bad_text(duro_orch *e, const char *what,
                                  const char *name, const char *field,
                                  const char *s);
/* 1 when the code replays and the next recorded event is exactly the
 * command `want`. Text that is refused live (not UTF-8) is accepted in
 * such a command: an earlier duro recorded it (a SQLite store may hold
 * it), and a command refused live is never recorded, so only such an
 * event can match: replay stays deterministic, nothing new is stored. */
int duro__engine_recorded(const duro_orch *e, const duro_event *want);
/* A patch marker for change `id` (checked: non-empty, bounded, UTF-8) at
 * this point of the code: duro_patched() (deprecated 0) and
 * duro_patch_deprecated() (1). Replaying, a recorded PatchMarker of that id
 * next in history is consumed and the answer is 1; anything else there
 * means the history was recorded before the change: 0, nothing consumed.
 * Live, duro_patched() records the marker and answers 1;
 * duro_patch_deprecated() records nothing. An id asked before in this
 * execution gets its first answer again, with nothing consumed or
 * recorded. 0 when the engine stopped (nondeterminism, out of memory). */
int duro__engine_patch(duro_orch *e, const char *id, int deprecated);
/* While replaying: the code made a mistake (`why`) that it cannot have
 * made when the history was recorded - a bad change id is refused live and
 * so never recorded - so the code changed: nondeterminism at the next
 * recorded event, with `why`. Nothing when not replaying. */
void duro__engine_bad_replay(duro_orch *e, const char *why);
/* A task that failed at once with DURO_INVALID (category configuration)
 * and error `why`, from duro__engine_bad_text; duro_errmsg() says why. */
struct duro_task *duro__engine_refuse_text(duro_orch *e, const char *why);
/* The code gave text that is not UTF-8 where nothing can fail with it (a
 * custom status), or a change id that is not valid: the execution fails at the
 * end of the turn with `why`; the code issues nothing more and is not resumed.
 */
void duro__engine_fail_text(duro_orch *e, const char *why);

/* A new pending task of `kind` (TASK_*); &duro__misuse_task on OOM. */
struct duro_task *duro__task_new(duro_orch *e, int kind);
/* A task that failed at once with rc, category and error (borrowed). */
struct duro_task *duro__task_new_failed(duro_orch *e, int rc, int category,
                                        const char *error);
/* Completes a pending task (state TASK_*) and advances its retry composite. */
void duro__task_finish(duro_orch *e, struct duro_task *t, int state,
                       const char *output, const char *error, int category);
/* Cancels a pending task: activities and children durably (an event in
 * history plus the row deletion or cancel message), timers and event waits
 * by dropping them. */
void duro__task_cancel(duro_orch *e, struct duro_task *t, const char *reason);

/* The primitive tasks, used by the API and by retry composites. */
struct duro_task *duro__engine_schedule_activity(duro_orch *e, const char *name,
                                                 const char *input,
                                                 uint32_t attempt);
struct duro_task *duro__engine_schedule_timer(duro_orch *e, int64_t delay_ms);

/* 1 when called correctly on the engine's fiber while its code runs, or
 * inside its driver's start or step on the thread that called it. */
int duro__engine_on_fiber(duro_orch *o);
/* 1 when o is driven code inside its driver's start or step: the calls
 * that would wait refuse (the caller checked duro__engine_on_fiber). */
int duro__engine_in_step(const duro_orch *o);
/* The engine whose code is running on the calling thread's current fiber,
 * NULL outside orchestration code. */
duro_orch *duro__engine_current(void);
/* 1 when t is one of e's tasks: t lies in one of e's task chunks, on a task
 * boundary, among the tasks handed out. Reads only e's memory. */
int duro__engine_owns_task(const duro_orch *e, const struct duro_task *t);
/* Suspends the code until the engine has consumed another input. */
void duro__engine_wait(duro_orch *o);

/* "ActivityScheduled 'Name' (input ..., attempt 1)" and the like, for
 * nondeterminism messages. */
void duro__engine_describe(char *buf, size_t size, const duro_event *ev);
/* 1 when a command the code issued (w) equals the recorded one (h), as
 * replay compares them (kind, names, inputs, attempt, timer time, ids). */
int duro__engine_same_command(const duro_event *h, const duro_event *w);
/* The reason of the cancellations an execution ending with `status`
 * (DURO_STATUS_*) records for what is still outstanding. */
const char *duro__engine_end_reason(int status);

/* ---- retry.c --------------------------------------------------------------
 */

/* Starts the next attempt of retry composite rt. */
void duro__retry_start_attempt(duro_orch *e, struct duro_task *rt);
/* Advances rt after one of its subtasks (attempt, timeout, backoff) ended. */
void duro__retry_on_subtask(duro_orch *e, struct duro_task *rt,
                            struct duro_task *sub);

#endif
