/* duro.h - the public API of duro, a durable execution runtime: a registry of
 * orchestrations and activities, the runtime that runs them, the contexts
 * their code receives, and the client that starts, signals, cancels and
 * watches instances. Every function documents who owns what it returns and
 * from which thread it may be called.
 *
 * NULL arguments never crash: the doc of each function, or of its section,
 * says what a NULL pointer argument means (a no-op, a default, DURO_INVALID
 * or DURO_MISUSE). tests/api/test_api_nulls.c calls every function with
 * each pointer argument NULL and holds it to its word.
 *
 * fork(): fork before the process makes its first runtime or client, or
 * have the child call exec() at once. A child forked while a runtime runs
 * may find locks taken that only the parent's threads would release
 * (SQLite's own among them: a client created there hung), so it must not
 * use, shut down or destroy what the parent made, nor make its own. */
#ifndef DURO_H
#define DURO_H

#include <stdio.h>

#include "duro/common.h"
#include "duro/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================
 * Version
 * ======================================================================== */

/* The version of this header. The one source of truth is project(VERSION)
 * in CMakeLists.txt; the version_header test fails when these lines
 * disagree with it, so a release bumps both. The installed pkg-config file,
 * the CMake package version and the shared library's file name all come
 * from CMakeLists.txt.
 *
 * While the major version is 0, every minor release may change the API and
 * the ABI: a program runs with a library of the same MAJOR.MINOR as the
 * header it was compiled against (the shared library's soname is
 * libduro.so.0.MINOR, and find_package(duro 0.MINOR) accepts only 0.MINOR.*).
 * From 1.0 on, the same MAJOR (libduro.so.MAJOR, SameMajorVersion). */
#define DURO_VERSION_MAJOR 0
#define DURO_VERSION_MINOR 1
#define DURO_VERSION_PATCH 0
#define DURO_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is 100), for #if. */
#define DURO_VERSION_NUMBER                                                    \
    (DURO_VERSION_MAJOR * 10000 + DURO_VERSION_MINOR * 100 + DURO_VERSION_PATCH)

/** The version of the library the program runs with ("0.1.0"), which may
 * differ from the DURO_VERSION_STRING it was compiled against when the
 * shared library was replaced. A static string: never NULL, never freed.
 * @note Any thread. */
DURO_API const char *duro_version(void);

/** DURO_VERSION_NUMBER of the library the program runs with. A program can
 * check at start-up that it runs with the library it was built for:
 * `duro_version_number() / 100 == DURO_VERSION_NUMBER / 100` (same
 * MAJOR.MINOR) while the major version is 0.
 * @note Any thread. */
DURO_API int duro_version_number(void);

/* ========================================================================
 * Results
 * ======================================================================== */

/* What an orchestration or activity function produced. Filled through
 * duro_ok() / duro_fail*() / duro_continue_as_new(); opaque otherwise.
 *
 * Text is UTF-8 (README, "Text is UTF-8"): every string duro stores - ids,
 * names, versions, inputs, outputs, payloads, failure messages, custom
 * statuses, reasons - must be valid UTF-8 (no overlong forms, surrogates
 * or code points past U+10FFFF; a NUL ends a string). What is not is
 * refused where it enters duro, naming the field and the offset of the
 * first bad byte ("output is not valid UTF-8 at byte 3 (0xE9)"), the same
 * with every store; encode binary data (base64) first. */
typedef struct duro_result duro_result;

/** Success with @p output (copied; NULL means no output).
 * @return DURO_OK, so a function may `return duro_ok(out, s);`;
 * DURO_INVALID for a NULL @p out, and for an @p output that is not valid
 * UTF-8: the result is then a failure of category configuration, "output
 * is not valid UTF-8 at byte N (0xXX)" - an activity fails once, in
 * history, as "activity 'NAME' output is ..." (a retry policy does not
 * retry it), an orchestration fails as "orchestration 'NAME' output is
 * ..." - unless a later call sets the result again.
 * @note Only inside the callback that received @p out. */
DURO_API int duro_ok(duro_result *out, const char *output);

/** Failure of category application with @p message (copied; NULL:
 * "failed"). @return DURO_FAILED; DURO_INVALID for a NULL @p out, and for
 * a @p message that is not valid UTF-8 (the failure is then of category
 * configuration, "failure message is not valid UTF-8 at byte N (0xXX)",
 * as duro_ok() says for an output).
 * @note Only inside the callback. */
DURO_API int duro_fail(duro_result *out, const char *message);

/** Failure with an explicit duro_category (@p message NULL: "failed").
 * @return DURO_FAILED; DURO_INVALID for a NULL @p out or a @p message that
 * is not valid UTF-8 (as duro_fail()).
 * @note Only inside the callback that received @p out. */
DURO_API int duro_fail_with(duro_result *out, int category,
                            const char *message);

/** printf-style duro_fail() (@p fmt NULL: "failed"). @return DURO_FAILED;
 * DURO_INVALID for a NULL @p out or a message that is not valid UTF-8 (as
 * duro_fail()).
 * @note Only inside the callback that received @p out. */
DURO_API int duro_failf(duro_result *out, const char *fmt, ...)
    DURO_PRINTF(2, 3);

/* A function that returns without calling any of these succeeds with no
 * output when it returns DURO_OK and fails (application, duro_strerror of
 * its return value) otherwise. One that called them ends as the last call
 * said, whatever it returns. A category outside duro_category is stored as
 * application. */

/* ========================================================================
 * Registry
 * ======================================================================== */

typedef struct duro_registry duro_registry;
typedef struct duro_orch duro_orch;         /* orchestration context */
typedef struct duro_task duro_task;         /* a durable task */
typedef struct duro_activity duro_activity; /* activity context */

/** An orchestration: deterministic code that coordinates tasks. It runs on a
 * fiber; every await may suspend it and it may be replayed from history, so
 * it must make the same calls in the same order given the same results, and
 * must not hold locks or heap memory across an await.
 * @param input borrowed; valid until the function returns. */
typedef int (*duro_orchestration_fn)(duro_orch *o, const char *input,
                                     duro_result *out);

/** An activity: ordinary code that does the work, on a worker thread. It runs
 * at least once per scheduling; make it idempotent.
 * @param input borrowed; valid until the function returns. */
typedef int (*duro_activity_fn)(duro_activity *a, const char *input,
                                duro_result *out);

/** A new empty registry; free with duro_registry_destroy(). DURO_INVALID
 * for a NULL @p out.
 * @note Any thread; a registry is used by one thread at a time. */
DURO_API int duro_registry_create(duro_registry **out);
/** @note One thread at a time per registry. */
DURO_API void duro_registry_destroy(duro_registry *r); /* NULL ok */

/** Registers orchestration @p name at @p version (NULL or "" = the default
 * version "") with a user pointer reachable through duro_orch_user().
 * Starting without a version (NULL) picks the highest version registered
 * (strverscmp order, in which "" is the lowest); starting with "" runs the
 * version "". DURO_ALREADY_EXISTS for a duplicate (name, version),
 * DURO_INVALID for an empty or NULL name, a NULL @p r or @p fn,
 * DURO_TOO_LARGE for a name or version over 1024 bytes. Strings are
 * copied; @p user may be NULL.
 * @note One thread at a time per registry. */
DURO_API int duro_registry_add_orchestration(duro_registry *r, const char *name,
                                             const char *version,
                                             duro_orchestration_fn fn,
                                             void *user);

/* How an orchestration takes part in its own cancellation. */
typedef struct duro_orchestration_options {
    int version;
    int observe_cancel;         /* 1: a cancel is delivered to the code:
                                   its pending awaits report
                                   DURO_CANCELLED (outstanding activities
                                   and children are cancelled durably),
                                   duro_cancel_requested() turns 1, and the
                                   code may schedule and await cleanup work
                                   before it returns; the instance then
                                   ends Cancelled. 0 (default): a cancel
                                   ends the instance at once without
                                   running its code */
    int64_t cleanup_timeout_ms; /* observe_cancel: how long the cleanup may
                                   take (from the cancel's turn) before the
                                   instance is terminated; 0: the runtime's
                                   cleanup_timeout_ms */
    /* Read when version >= 2 (duro_orchestration_options_init sets 2): */
    int64_t timeout_ms; /* the deadline of an instance started without
                           one (duro_start_options.deadline_ms,
                           timeout_ms): this long after its first turn
                           the instance ends Failed with category
                           DURO_CATEGORY_TIMEOUT (docs/lifecycle.md,
                           "Deadlines"); 0 (default): none. Needs a
                           store of provider contract version 12 (the
                           built-in ones); ignored on an older one */
} duro_orchestration_options;

/** Sets version and every default. NULL is a no-op. @note Any thread. */
DURO_API void duro_orchestration_options_init(duro_orchestration_options *o);

/** duro_registry_add_orchestration() with options (@p opts NULL:
 * defaults). DURO_INVALID also for an unset opts->version or a negative
 * cleanup_timeout_ms or timeout_ms. @note One thread at a time per
 * registry. */
DURO_API int
duro_registry_add_orchestration_ex(duro_registry *r, const char *name,
                                   const char *version,
                                   duro_orchestration_fn fn, void *user,
                                   const duro_orchestration_options *opts);

/** Registers activity @p name. DURO_ALREADY_EXISTS for a duplicate name;
 * DURO_INVALID for an empty or NULL name, a NULL @p r or @p fn;
 * DURO_TOO_LARGE for a name over 1024 bytes; @p user may be NULL. @note One
 * thread at a time per registry. */
DURO_API int duro_registry_add_activity(duro_registry *r, const char *name,
                                        duro_activity_fn fn, void *user);

/* ========================================================================
 * Orchestration context. Every function here is "only inside the
 * orchestration function, on its fiber": called from any other thread or
 * after the function returned, or with a NULL context, it does nothing
 * harmful and reports DURO_MISUSE: functions that return a code return it,
 * task functions return a task that failed with DURO_MISUSE, the others
 * return 0 or NULL (or do nothing); all of them set duro_errmsg() to a
 * message that names the function.
 * For an orchestration run by a driver (see "Drivers" below), "on its
 * fiber" reads "inside the driver's start or step callback for this
 * context, on the thread that called it": every function here works there
 * as it does on a fiber, except the four that wait (duro_await,
 * duro_select_n, duro_wait_any_n, duro_join_n), which return DURO_MISUSE
 * at once there.
 * Strings returned are borrowed from the context: valid until the
 * orchestration function returns (for a driven orchestration: until the
 * driver's destroy callback is called).
 *
 * Strings given must be valid UTF-8 (see duro_result above): a task given
 * a name, version, id or input that is not fails at once with
 * DURO_INVALID, category configuration, its error naming the field and
 * the byte ("activity 'Charge' input is not valid UTF-8 at byte 6
 * (0xE9)"), and nothing is recorded in history; the code goes on. (A
 * command an earlier duro recorded with such text, in a SQLite store,
 * replays as it was recorded.)
 *
 * A task belongs to the context that created it. Every function that takes
 * a task checks, by its address alone and without reading it, that it is
 * one of the calling context's tasks; a task of another instance, or of an
 * engine that no longer exists (a finished execution, a replaced engine),
 * is refused with DURO_MISUSE and duro_errmsg() names the problem. (A stale
 * pointer whose memory has since been reused for one of the caller's own
 * tasks is that task: the check is exact for what the pointer is now.)
 * ======================================================================== */

/** Schedules activity @p name with @p input (copied; NULL allowed). A NULL
 * or empty @p name, or a name or input that is not valid UTF-8, gives a
 * task failed with DURO_INVALID (configuration).
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_call_activity(duro_orch *o, const char *name,
                                       const char *input);

enum duro_backoff {
    DURO_BACKOFF_EXPONENTIAL = 0, /* delay = initial * coefficient^(n-1) */
    DURO_BACKOFF_LINEAR = 1,      /* delay = initial * n */
    DURO_BACKOFF_FIXED = 2        /* delay = initial */
};

typedef struct duro_retry_policy {
    int version;
    uint32_t max_attempts;      /* attempts in all, first included; >= 1 */
    int backoff;                /* enum duro_backoff */
    int64_t initial_delay_ms;   /* delay before the second attempt */
    double coefficient;         /* exponential growth factor */
    int64_t max_delay_ms;       /* cap on one delay; 0 = no cap */
    int64_t attempt_timeout_ms; /* 0 = none; a timed-out attempt is
                                   cancelled and counts as failed */
    int64_t total_timeout_ms;   /* 0 = none; no attempt starts past it */
} duro_retry_policy;

/** Defaults: 3 attempts, exponential from 1 s by 2.0 up to 60 s, no
 * timeouts. Delays and timeouts too large to add to the current time
 * (INT64_MAX) mean "practically never": they saturate, never overflow.
 * NULL is a no-op. @note Any thread. */
DURO_API void duro_retry_policy_init(duro_retry_policy *p);

/** Schedules an activity retried under @p policy (copied). Only application
 * and timeout failures are retried. The task fails with the last attempt's
 * error, or with category timeout when a timeout ends it. A NULL or empty
 * @p name or a NULL or invalid @p policy (version not set, max_attempts 0,
 * a backoff not in enum duro_backoff, a negative delay, max_delay_ms or
 * timeout, an exponential coefficient below 1), or a name or input that
 * is not valid UTF-8, gives a task failed with DURO_INVALID
 * (configuration) whose error names the field; @p input may be NULL.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *
duro_call_activity_with_retry(duro_orch *o, const char *name, const char *input,
                              const duro_retry_policy *policy);

/** A durable timer firing @p delay_ms after duro_now(o) (< 0: at once).
 * A delay too large to add to the time (INT64_MAX) saturates: the timer
 * practically never fires.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_timer(duro_orch *o, int64_t delay_ms);

/** Waits for external event @p name. Events raised before anyone waits are
 * kept in order and matched to waits in order: the n-th wait for a name
 * receives the n-th event of that name not yet consumed. The output is the
 * event's payload. A NULL or empty @p name, or one that is not valid
 * UTF-8, gives a task failed with DURO_INVALID.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_wait_event(duro_orch *o, const char *name);

/** Starts child orchestration @p name (@p version NULL = the highest
 * registered, "" = the version "", as duro_start_options) with id
 * @p instance_id (NULL: "<parent id>:<execution id>:<event id>",
 * deterministic and unique across continue-as-new) and returns a task that
 * completes with the child. Cancelling the parent cancels it. @p input may
 * be NULL; a NULL or empty @p name, or a name, version, id or input that
 * is not valid UTF-8, gives a task failed with DURO_INVALID; a name,
 * version or id over 1024 bytes, or an input over max_payload, one failed
 * with DURO_TOO_LARGE.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_call_sub_orchestration(duro_orch *o, const char *name,
                                                const char *version,
                                                const char *instance_id,
                                                const char *input);

/** Starts an independent orchestration, fire-and-forget: nothing comes back
 * and it is not cancelled with this one. @p version, @p instance_id and
 * @p input may be NULL, as for duro_call_sub_orchestration(). When an
 * instance @p instance_id already exists (in any status, of any name), the
 * start is dropped in the transaction that commits this turn and the
 * existing instance is left alone; as for any detached start nothing comes
 * back to the caller, and nothing is logged (the store drops it without
 * telling the runtime). History still records the SubOrchestrationScheduled.
 * duro_call_sub_orchestration() reports the same case as a failed task
 * (DURO_ALREADY_EXISTS).
 * @return DURO_OK, DURO_MISUSE, DURO_INVALID for a NULL or empty name or
 * text that is not valid UTF-8, or DURO_TOO_LARGE as
 * duro_call_sub_orchestration().
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_start_orchestration(duro_orch *o, const char *name,
                                      const char *version,
                                      const char *instance_id,
                                      const char *input);

/** Suspends until @p t is done. @return DURO_OK when it succeeded,
 * DURO_FAILED when it failed, DURO_CANCELLED when it was cancelled;
 * DURO_INVALID for a NULL @p t; DURO_MISUSE off the fiber, for a task that
 * failed with DURO_MISUSE, and at once for a task of another context. A
 * task refused when it was created returns that code at once:
 * DURO_INVALID (an empty name, an invalid retry policy) or DURO_TOO_LARGE
 * (a name, version or id over 1024 bytes, an activity or child input over
 * the runtime's max_payload). Every code but DURO_OK sets duro_errmsg():
 * for a task that failed, was cancelled or was refused, to its error
 * (duro_task_error(), "activity name is empty"), on the thread the code
 * runs on when duro_await() returns.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_await(duro_orch *o, duro_task *t);

/** Suspends until the first of @p tasks is done, returns it, and cancels
 * every other one (activities and children durably; timers and event waits
 * are dropped). The winner is decided by the order of history, never by
 * wall-clock or polling order. NULL entries are skipped. NULL when n is 0,
 * when every entry is NULL, or when @p tasks is NULL (DURO_INVALID in
 * duro_errmsg()). When an entry is a task of another context, returns at
 * once, without waiting or cancelling, a task failed with DURO_MISUSE.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_select_n(duro_orch *o, duro_task *const *tasks,
                                  size_t n);

/** Like duro_select_n() (including its NULL and misuse rules) but leaves
 * the other tasks running.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API duro_task *duro_wait_any_n(duro_orch *o, duro_task *const *tasks,
                                    size_t n);

/** Suspends until every task is done. @return DURO_OK when all succeeded
 * (and when n is 0), otherwise the duro_await() code of the first (in
 * argument order) that did not, with its error in duro_errmsg() as
 * duro_await() sets it; DURO_INVALID for a NULL entry (after the
 * others are done) and, at once, for a NULL @p tasks with n > 0;
 * DURO_MISUSE at once, waiting for nothing, when an entry is a task of
 * another context. Results are read per task, in order.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_join_n(duro_orch *o, duro_task *const *tasks, size_t n);

#ifndef __cplusplus
#define DURO__TASKS(...) ((duro_task *const[]){__VA_ARGS__})
#define DURO__NTASKS(...)                                                      \
    (sizeof(DURO__TASKS(__VA_ARGS__)) / sizeof(duro_task *))
/** duro_select(o, a, b, ...) */
#define duro_select(o, ...)                                                    \
    duro_select_n((o), DURO__TASKS(__VA_ARGS__), DURO__NTASKS(__VA_ARGS__))
/** duro_wait_any(o, a, b, ...) */
#define duro_wait_any(o, ...)                                                  \
    duro_wait_any_n((o), DURO__TASKS(__VA_ARGS__), DURO__NTASKS(__VA_ARGS__))
/** duro_join(o, a, b, ...) */
#define duro_join(o, ...)                                                      \
    duro_join_n((o), DURO__TASKS(__VA_ARGS__), DURO__NTASKS(__VA_ARGS__))
#else
/* C++ has no compound literals. The same macros pass a braced list to a
 * reference to an array, whose length is deduced; the temporary array lives
 * until the end of the full expression, as the C compound literal lives
 * until the end of its block. (C++11 and later.) */
extern "C++" {
namespace duro_detail
{
template <size_t N>
inline duro_task *select(duro_orch *o, duro_task *const (&tasks)[N])
{
    return duro_select_n(o, tasks, N);
}
template <size_t N>
inline duro_task *wait_any(duro_orch *o, duro_task *const (&tasks)[N])
{
    return duro_wait_any_n(o, tasks, N);
}
template <size_t N> inline int join(duro_orch *o, duro_task *const (&tasks)[N])
{
    return duro_join_n(o, tasks, N);
}
} /* namespace duro_detail */
}
/** duro_select(o, a, b, ...) */
#define duro_select(o, ...) duro_detail::select((o), {__VA_ARGS__})
/** duro_wait_any(o, a, b, ...) */
#define duro_wait_any(o, ...) duro_detail::wait_any((o), {__VA_ARGS__})
/** duro_join(o, a, b, ...) */
#define duro_join(o, ...) duro_detail::join((o), {__VA_ARGS__})
#endif

/** Abandons @p t: an activity or child still outstanding is cancelled
 * durably (reason "task_cancelled"); a timer or event wait is dropped. The
 * task then reports DURO_CANCELLED. Done tasks are left as they are. NULL
 * is a no-op; a task of another context is left alone (DURO_MISUSE in
 * duro_errmsg()).
 * @note Only inside the orchestration function, on its fiber. */
DURO_API void duro_cancel_task(duro_orch *o, duro_task *t);

/* Task accessors. A NULL task reads as not done, not failed, no output, no
 * error, DURO_CATEGORY_NONE. A task of another context, or any task read
 * outside orchestration code, reads without being dereferenced as a task
 * that failed with DURO_MISUSE (done, failed, an error naming the problem,
 * category configuration), and duro_errmsg() says so. */

/** 1 when the task is done (succeeded, failed or cancelled).
 * @note Only inside the orchestration function that created the task. */
DURO_API int duro_task_done(const duro_task *t);
/** 1 when the task failed or was cancelled.
 * @note Only inside the orchestration function that created the task. */
DURO_API int duro_task_failed(const duro_task *t);
/** Output of a succeeded task; NULL otherwise. Borrowed from the context.
 * @note Only inside the orchestration function that created the task. */
DURO_API const char *duro_task_output(const duro_task *t);
/** Error text of a failed task; NULL otherwise. Borrowed from the context.
 * @note Only inside the orchestration function that created the task. */
DURO_API const char *duro_task_error(const duro_task *t);
/** duro_category of a failed task, DURO_CATEGORY_NONE otherwise.
 * @note Only inside the orchestration function that created the task. */
DURO_API int duro_task_category(const duro_task *t);

/** Ends this execution and starts the next one with @p input (copied) and a
 * fresh history; outstanding activities of this execution are cancelled and
 * external events it received but did not consume are carried over.
 * @p input may be NULL.
 * @return DURO_OK; use as `return duro_continue_as_new(o, out, next);`
 * DURO_INVALID for a NULL @p out, and for an @p input that is not valid
 * UTF-8: the instance then fails (configuration, "orchestration 'NAME'
 * continue-as-new input is not valid UTF-8 at byte N (0xXX)").
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_continue_as_new(duro_orch *o, duro_result *out,
                                  const char *input);

/** Deterministic time: when the turn that recorded the latest history event
 * consumed so far began (ms since the epoch). Same value on replay.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int64_t duro_now(duro_orch *o);

/** A deterministic GUID ("8-4-4-4-12" hex), the same on replay. Borrowed.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_new_guid(duro_orch *o);

/** Sets the custom status (copied; NULL clears it), stored when the turn
 * commits and shown by duro_client_get_status(). One over max_payload is
 * stored as "(custom status over the payload limit)". One that is not
 * valid UTF-8 is not stored: the instance fails at the end of the turn
 * (configuration, "orchestration 'NAME' custom status is not valid UTF-8
 * at byte N (0xXX)"; duro_errmsg() says so at once), and from the call on
 * the code's further calls are not recorded.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API void duro_set_custom_status(duro_orch *o, const char *status);

/** Logs through the runtime's sink, but never while replaying. A NULL
 * @p fmt logs nothing (DURO_INVALID in duro_errmsg()).
 * @note Only inside the orchestration function, on its fiber. */
DURO_API void duro_log(duro_orch *o, int level, const char *fmt, ...)
    DURO_PRINTF(3, 4);

/** @p size bytes of zeroed memory from the context's arena, for data that
 * must live across awaits (an array of tasks for a fan-out). Borrowed: valid
 * until the orchestration function returns; never free it. NULL when out of
 * memory (the turn then fails and is retried), when misused, and when
 * @p size is more than any allocation can hold (above PTRDIFF_MAX / 2:
 * the same NULL on every replay, duro_errmsg() says why).
 * @note Only inside the orchestration function, on its fiber. */
DURO_API void *duro_orch_alloc(duro_orch *o, size_t size);

/** printf into the context's arena; borrowed. NULL when out of memory or
 * misused, and for a NULL @p fmt (DURO_INVALID in duro_errmsg()).
 * @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_sprintf(duro_orch *o, const char *fmt, ...)
    DURO_PRINTF(2, 3);

/** @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_instance_id(duro_orch *o);
/** @note Only inside the orchestration function, on its fiber. */
DURO_API uint64_t duro_execution_id(duro_orch *o);
/** @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_input(duro_orch *o);
/* The longest change id duro_patched() takes, in bytes. */
#define DURO_PATCH_ID_MAX 255

/** Asks whether this execution takes the new path of the change
 * @p change_id: how code changes under instances already in flight (see
 * docs/changing-code.md). Reached live - the code runs this point for the
 * first time - it records a PatchMarker event with the id in history and
 * returns 1: the new code runs. Replaying history recorded by code without
 * the change (no PatchMarker of this id next in history at this point) it
 * returns 0 and records nothing: the instance keeps the old path it
 * started on. Replaying a history that holds the marker here, it returns 1.
 * Asked again for the same id in the same execution, it returns its first
 * answer and records nothing more, so one change may be asked at several
 * places. A marker in history that the code does not ask for at that point
 * (removed, moved, or another id) is nondeterminism: the instance fails
 * with a message naming the event id and both sides. @p change_id is
 * NUL-terminated UTF-8, 1..DURO_PATCH_ID_MAX bytes; another is the code's
 * mistake: the call returns 0, duro_errmsg() says why (DURO_INVALID), and
 * the execution fails with that message at the end of the turn. Works the
 * same in a driver's step. Example:
 * @code
 *     if (duro_patched(o, "charge-before-ship"))
 *         rc = duro_await(o, duro_call_activity(o, "Charge", order));
 *     rc = duro_await(o, duro_call_activity(o, "Ship", order));
 * @endcode
 * @note Only inside the orchestration function, on its fiber (or in a
 * driver's start or step). */
DURO_API int duro_patched(duro_orch *o, const char *change_id);

/** The form of duro_patched() for when no instance started before the
 * change remains, and the old path is deleted: records nothing, and accepts
 * a history with or without a PatchMarker of @p change_id at this point
 * (consuming it when there is one), so histories recorded before and after
 * the change both replay. Once no instance that could hold the marker
 * remains either, the call can be removed. Same checks of @p change_id as
 * duro_patched(). @note Only inside the orchestration function, on its
 * fiber (or in a driver's start or step). */
DURO_API void duro_patch_deprecated(duro_orch *o, const char *change_id);

/** 1 while the code is re-executing history recorded by an earlier turn.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_is_replaying(duro_orch *o);
/** The user pointer given at registration. It is shared by every instance
 * and thread (and, briefly, by two engines of one instance when a lock is
 * lost): treat what it points to as read-only configuration, never as a
 * place to keep an instance's state.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API void *duro_orch_user(duro_orch *o);

/** 1 once a cancellation of this instance has been delivered to the code
 * (orchestrations registered with observe_cancel; the others never run
 * after a cancel). From then on the tasks that were pending report
 * DURO_CANCELLED, new tasks run normally (cleanup), and when the function
 * returns - whatever it returns - the instance ends Cancelled. Same value
 * on replay. @note Only inside the orchestration function, on its fiber. */
DURO_API int duro_cancel_requested(duro_orch *o);
/** The cancel's reason, NULL before a cancel (or when none was given).
 * Borrowed. @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_cancel_reason(duro_orch *o);
/** Who asked for the cancel ("parent:<id>" for a parent's), NULL before a
 * cancel or when not given. Borrowed.
 * @note Only inside the orchestration function, on its fiber. */
DURO_API const char *duro_cancel_requester(duro_orch *o);

/** Registers @p fn(@p arg) to run once when this context is discarded:
 * after the execution ended (the turn that ended it was decided), or when
 * its suspended code is dropped without returning - evicted from the
 * runtime's cache, its lock lost, the runtime shut down or destroyed, a
 * turn that could not run. For orchestration code that holds memory or
 * other resources across an await (which a dropped fiber never unwinds):
 * the hook releases them. Hooks run in reverse order of registration, each
 * exactly once, on whichever thread discards the context (a turn thread,
 * or the thread that shuts the runtime down), with no duro lock held; they
 * must not call the orchestration context (DURO_MISUSE). Every replay runs
 * the code on a new context, which registers its own hooks again.
 * @return DURO_OK; DURO_INVALID for a NULL @p fn (@p arg may be NULL);
 * DURO_NOMEM; DURO_MISUSE outside the orchestration's code.
 * @note Only inside the orchestration function, on its fiber, or inside a
 * driver's step. */
DURO_API int duro_orch_on_destroy(duro_orch *o, void (*fn)(void *arg),
                                  void *arg);

/* ========================================================================
 * Drivers: orchestration code of another language, run step by step.
 *
 * A C orchestration runs on a fiber and waits with blocking calls. Code
 * whose language has its own coroutines (Python's async def, JavaScript's
 * generators) cannot run on a fiber: its interpreter keeps per-thread
 * state that a switch of stacks would corrupt. Such code is run by a
 * driver: three callbacks that the engine calls on the turn thread's own
 * stack, exactly where it would resume a fiber.
 *
 *   start   once per context, when the code begins: makes the driver's
 *           state for this execution (a coroutine object, say); the engine
 *           then calls step at once.
 *   step    resumes the code until it has nothing to do before another
 *           input arrives, and says so: DURO_STEP_WAITING, or
 *           DURO_STEP_DONE with the result set on @p out through
 *           duro_ok(), duro_fail*() or duro_continue_as_new() (a step
 *           that sets nothing and returns DURO_STEP_DONE succeeds with no
 *           output). Steps come where a C orchestration's await would
 *           return: after each input the execution consumes (a completion,
 *           a timer, an event, an observed cancel), one step per input.
 *           The code issues commands through the context functions above
 *           - duro_call_activity(), duro_timer(), duro_wait_event(),
 *           duro_call_sub_orchestration(), duro_continue_as_new(),
 *           duro_set_custom_status(), duro_now(), duro_new_guid(), ... -
 *           which are matched against history as the call is made, as
 *           for C code. Instead of waiting it asks, without blocking:
 *           duro_task_state() for one task, duro_first_done() for the
 *           first of several done in history order, duro_select_done()
 *           for that plus the losers' cancellation of duro_select_n(),
 *           duro_all_done() for all of them; when the answer is "not yet"
 *           it returns DURO_STEP_WAITING and is asked again after the next
 *           input. A driver that checks what its code awaits at every
 *           step, this way, makes the same decisions at the same points of
 *           history as the same code in C: the histories are identical.
 *   destroy releases the state, exactly once for every state start made,
 *           when the context is discarded (as duro_orch_on_destroy(): the
 *           execution ended, eviction from the cache, a lost lock, a turn
 *           that could not run, shutdown, or the end of a
 *           duro_replay_history()), after the context's own hooks.
 *
 * The cache of suspended orchestrations (duro_runtime_options
 * fiber_cache_size and fiber_cache_bytes) keeps a driven context with its
 * state between turns, so a warm turn resumes the code with one step per
 * new input and replays nothing. A context that is not kept (evicted, or
 * the cache is off) is rebuilt by the next turn from history: start, then
 * the steps that replay the recorded inputs, then the new ones. Everything
 * else - nondeterminism (a command that differs from history fails the
 * instance with both sides named), select losers, observe_cancel and its
 * cleanup deadline, suspend and resume, terminate, continue-as-new (a new
 * context and state for the next execution), retry policies, poison and
 * history caps - is the engine's, the same for C and driven code.
 *
 * Threads: start and step run on a turn thread of the runtime (or on the
 * thread that calls duro_replay_history()), on that thread's own stack,
 * one at a time per context, and a context's successive steps may run on
 * different turn threads; steps of different instances run concurrently
 * on different turn threads, as orchestration_concurrency allows. Like
 * orchestration code, they must not block: a step that takes longer than
 * orchestration_lock_timeout_ms loses the turn. destroy runs on any
 * thread - a turn thread, or the thread calling duro_runtime_shutdown(),
 * duro_runtime_destroy() or duro_replay_history() - never during a step
 * of the same context, with no duro lock held; it must not call the
 * context (DURO_MISUSE) nor shut down or destroy the runtime.
 *
 * Lifetimes: @p o, the tasks it returns and the strings it hands out stay
 * valid from start until destroy is called, so a state may keep task
 * pointers across steps; but they may only be used inside start or step.
 * The input given to start is borrowed the same way.
 *
 * Errors: start returns DURO_OK, or a duro error code when it cannot make
 * the state; step returns DURO_STEP_WAITING, DURO_STEP_DONE, or a duro
 * error code (positive) when the step itself could not run - not when the
 * code failed, which is duro_fail() on @p out and DURO_STEP_DONE. A failed
 * start or step ends the turn without committing anything: the context is
 * discarded (destroy is called when start had made a state), the turn is
 * tried again later like any turn that could not run, and after
 * max_attempts deliveries the instance fails as poison. The instance's
 * last problem (duro_client_get_status()) names the callback that failed
 * and the code it returned.
 * ======================================================================== */

/* What a driver's step returns (error codes are positive). */
enum duro_step {
    DURO_STEP_WAITING = 0, /* the code waits: step again after the next
                              input */
    DURO_STEP_DONE = -1    /* the code returned: its result is on out */
};

/* The version of duro_driver this header describes. */
#define DURO_DRIVER_VERSION 1

typedef struct duro_driver {
    int version; /* DURO_DRIVER_VERSION (>= 1); callbacks of later
                    versions are appended and called only when version
                    says they are there */
    /** Makes the state for a new context (@p input borrowed as
     * duro_input(o)) into *@p state (may be NULL). @p user: the pointer
     * given at registration. Context functions may be called here as in a
     * step. @return DURO_OK, or a duro error code (no state was made:
     * destroy is not called). */
    int (*start)(duro_orch *o, const char *input, void *user, void **state);
    /** Resumes the code. @return DURO_STEP_WAITING, DURO_STEP_DONE with
     * the result on @p out, or a duro error code. */
    int (*step)(duro_orch *o, void *state, duro_result *out);
    /** Releases @p state; NULL when there is nothing to release. */
    void (*destroy)(void *state, void *user);
} duro_driver;

/** Registers orchestration @p name at @p version, run by @p driver
 * (copied; the struct may go after the call) with @p user handed to its
 * callbacks and returned by duro_orch_user(); @p opts as
 * duro_registry_add_orchestration_ex() (NULL: defaults). Names, versions
 * and their errors are those of duro_registry_add_orchestration_ex(): a
 * driven and a C orchestration share one namespace. DURO_INVALID for a
 * NULL @p driver, a driver version below 1, a NULL start or step.
 * @note One thread at a time per registry. */
DURO_API int
duro_registry_add_driven_orchestration(duro_registry *r, const char *name,
                                       const char *version,
                                       const duro_driver *driver, void *user,
                                       const duro_orchestration_options *opts);

/* What duro_task_state() reports. */
enum duro_task_state {
    DURO_TASK_PENDING = 0,   /* not done yet */
    DURO_TASK_SUCCEEDED = 1, /* duro_task_output() holds its output */
    DURO_TASK_FAILED = 2,    /* duro_task_error(), duro_task_category() */
    DURO_TASK_CANCELLED = 3  /* cancelled (a select loser, an observed
                                cancel, duro_cancel_task()) */
};

/** The state of @p t, without waiting: what duro_await() would return
 * once it is done, as an enum duro_task_state. A task refused when it was
 * created (an empty name, an invalid policy, a misuse) is
 * DURO_TASK_FAILED; a NULL task reads as DURO_TASK_PENDING, a task of
 * another context as DURO_TASK_FAILED (DURO_MISUSE in duro_errmsg()), as
 * the other task accessors read them.
 * @note Only inside the orchestration function that created the task, or
 * inside a step of the driver whose context created it. */
DURO_API int duro_task_state(const duro_task *t);

/** duro_wait_any_n() without waiting: the task of @p tasks that completed
 * first in history order, or NULL when none is done yet. NULL entries are
 * skipped; NULL when n is 0 or every entry is NULL (and, with DURO_INVALID
 * in duro_errmsg(), when @p tasks is NULL with n > 0). When an entry is a
 * task of another context, or when called outside the code, a task failed
 * with DURO_MISUSE.
 * @note Only inside the orchestration function, on its fiber, or inside a
 * driver's step. */
DURO_API duro_task *duro_first_done(duro_orch *o, duro_task *const *tasks,
                                    size_t n);

/** duro_select_n() without waiting: duro_first_done(), and when it finds
 * a winner, every other task of @p tasks is cancelled exactly as
 * duro_select_n() cancels its losers (activities and children durably,
 * reason "select_loser"; timers and event waits dropped). When none is
 * done yet, nothing is cancelled and NULL is returned: call it again at
 * the next step. NULL and misuse as duro_first_done().
 * @note Only inside the orchestration function, on its fiber, or inside a
 * driver's step. */
DURO_API duro_task *duro_select_done(duro_orch *o, duro_task *const *tasks,
                                     size_t n);

/** duro_join_n() without waiting. @return 1 when every task of @p tasks is
 * done (and when n is 0; NULL entries count as done), 0 when one is
 * pending; DURO_INVALID for a NULL @p tasks with n > 0, DURO_MISUSE
 * outside the code or when an entry is a task of another context (both
 * neither 0 nor 1; duro_errmsg() says why). Results are then read per task
 * (duro_task_state(), ...), and duro_join_n()'s code is that of the first
 * task, in argument order, that did not succeed.
 * @note Only inside the orchestration function, on its fiber, or inside a
 * driver's step. */
DURO_API int duro_all_done(duro_orch *o, duro_task *const *tasks, size_t n);

/* ========================================================================
 * Replaying a recorded history, without a store or a runtime
 * ======================================================================== */

typedef struct duro_replay_options {
    int version;
    size_t max_payload;      /* as duro_runtime_options.max_payload (the
                                runtime's whose history it is); default
                                1 MiB */
    size_t fiber_stack_size; /* C orchestrations' fiber; default 256 KiB */
} duro_replay_options;

/** Sets version and every default. NULL is a no-op. @note Any thread. */
DURO_API void duro_replay_options_init(duro_replay_options *o);

/** Replays the recorded history @p h of one execution (as
 * duro_client_read_history() returns it: events 1..n, the first an
 * OrchestrationStarted; instance_id and execution_id set) through the
 * orchestration of @p reg that it names (its name and recorded version;
 * no version recorded: the highest registered), C or driven, on the
 * calling thread, with no store: a test that today's code still replays
 * the histories of instances started by yesterday's. The code is run as a
 * runtime would replay it after a restart: every command must equal the
 * recorded one, every recorded input is fed in order. An execution that
 * ended Completed or ContinuedAsNew, or Failed with category application
 * (endings only the code makes), must end the same way at the same point,
 * with the same output, next input or error, and the same cancellations
 * before it; one that ended otherwise (Cancelled, Terminated, failed by
 * the runtime: endings decided without the code) is checked up to where
 * it ended; one still running is checked up to its last event, and
 * commands the code adds after it are allowed (a runtime would append
 * them). Activities and children are not run: their results come from
 * history. A driver's start, steps and destroy run on the calling thread.
 * @return DURO_OK when the code matches; DURO_NONDETERMINISM when it does
 * not, with duro_errmsg() naming the event id and both sides (the message
 * an instance fails with); DURO_NOT_FOUND when @p reg has no orchestration
 * of the recorded name and version; DURO_INVALID for a NULL @p reg or
 * @p h, an empty history, one that does not begin with
 * OrchestrationStarted, event ids that are not 1..n, a NULL instance_id,
 * or @p opts whose version is not set; DURO_ERROR when the driver's start
 * or step failed; DURO_NOMEM; DURO_MISUSE from orchestration code.
 * DURO_INVALID too when the code, replaying a history that has not ended,
 * fails the execution itself (a bad change id to duro_patched()).
 * @p opts NULL: defaults.
 * @note Any thread; @p reg and @p h are only read (several threads may
 * replay at once with one registry that no thread changes). */
DURO_API int duro_replay_history(const duro_registry *reg,
                                 const duro_history *h,
                                 const duro_replay_options *opts);

/* Where an exported history first stopped replaying (duro_replay_json). */
typedef struct duro_replay_divergence {
    uint64_t execution_id; /* the execution that did not replay; 0: none
                              did not (or the document is not one) */
    uint64_t event_id;     /* its first event that differs; 0: not one
                              event (an unregistered orchestration, a
                              driver that failed) */
} duro_replay_divergence;

/** Replays every execution of an exported history - the JSON document
 * duro_client_export_history() and `duro history --export` write
 * (docs/history-json.md), @p len bytes at @p json - through @p reg with
 * duro_replay_history(), oldest execution first, and stops at the first
 * that does not replay: the store-less test a team runs in CI over
 * histories recorded in production, before deploying changed code (see
 * docs/changing-code.md). Executions pruned before the export are not in
 * the document; one with no events yet is skipped.
 * @return DURO_OK when every execution replays cleanly; otherwise
 * duro_replay_history()'s code for the first that does not, with
 * duro_errmsg() "execution N of '<id>': <its message>" - for
 * DURO_NONDETERMINISM the event id, what history holds and what the code
 * asked - and @p out (may be NULL) set to the execution and event;
 * DURO_INVALID for a NULL @p reg or @p json, text that is not JSON (the
 * message says at which line and column) or JSON that is not such a
 * document (which execution, which event, which field), a format_version
 * this duro does not read; DURO_NOMEM.
 * @note Any thread; the code runs on the calling thread, as for
 * duro_replay_history(). */
DURO_API int duro_replay_json(const duro_registry *reg, const char *json,
                              size_t len, const duro_replay_options *opts,
                              duro_replay_divergence *out);

/** duro_replay_json() over the file at @p path; duro_errmsg() begins with
 * the path. DURO_NOT_FOUND when there is no such file, DURO_TOO_LARGE for
 * one over 1 GiB, DURO_INVALID when it cannot be read.
 * @note Any thread, as duro_replay_json(). */
DURO_API int duro_replay_file(const duro_registry *reg, const char *path,
                              const duro_replay_options *opts,
                              duro_replay_divergence *out);

/* ========================================================================
 * Activity context. Accessors: only inside the activity function (any
 * thread it hands the context to, while the function runs). Strings are
 * borrowed until the function returns. A NULL context reads as nothing: 0,
 * NULL, not cancelled (duro_activity_wait_cancelled() returns 0 at once),
 * and -1 with DURO_INVALID in duro_errmsg() from duro_activity_cancel_fd().
 * ======================================================================== */

DURO_API const char *duro_activity_instance_id(duro_activity *a);
/** @note Inside the activity function, or a thread it started, while it runs.
 */
DURO_API uint64_t duro_activity_execution_id(duro_activity *a);
/** @note Inside the activity function, or a thread it started, while it runs.
 */
DURO_API const char *duro_activity_name(duro_activity *a);
/** The event id of the ActivityScheduled this run belongs to.
 * @note Inside the activity function, or a thread it started, while it runs. */
DURO_API uint64_t duro_activity_id(duro_activity *a);
/** Retry-policy attempt, 1 for the first (and for calls without policy).
 * @note Inside the activity function, or a thread it started, while it runs. */
DURO_API uint32_t duro_activity_attempt(duro_activity *a);
/** How many times this scheduling was delivered to a worker, 1 normally;
 * more after a crash or an expired lock (at-least-once).
 * @note Inside the activity function, or a thread it started, while it runs. */
DURO_API uint32_t duro_activity_delivery(duro_activity *a);
/** @note Inside the activity function, or a thread it started, while it runs.
 */
DURO_API const char *duro_activity_input(duro_activity *a);
/** @note Inside the activity function, or a thread it started, while it runs.
 */
DURO_API void *duro_activity_user(duro_activity *a);

/* Cancellation of a running activity. duro cancels an activity when nobody
 * will wait for its result (its instance was cancelled, failed, completed or
 * continued as new, or it lost a select or its retry attempt timed out).
 * The activity learns it through these calls, then has a grace period
 * (duro_runtime_options.cancel_grace_ms) to return; whatever it returns is
 * discarded. See docs/cancellable-activities.md. */

/** A reference-counted cancellation token that outlives the activity call,
 * for threads the activity starts. */
typedef struct duro_cancel_token duro_cancel_token;

/** 1 once cancellation was requested. Non-blocking.
 * @note Any thread, while the activity function runs: @p a is freed when it
 * returns. A thread that may outlive it takes duro_activity_cancel_token()
 * first and uses the token's functions. */
DURO_API int duro_activity_cancelled(duro_activity *a);

/** Blocks until cancellation or @p timeout_ms (< 0: forever).
 * @return 1 when cancelled, 0 on timeout.
 * @note Any thread, called while the activity function runs. A wait under
 * way when it returns keeps the token alive and ends when the token fires
 * or @p timeout_ms passes (the token of an activity that returned may
 * never fire: wait with a timeout). */
DURO_API int duro_activity_wait_cancelled(duro_activity *a, int64_t timeout_ms);

/** A file descriptor that becomes readable (POLLIN) on cancellation, for
 * code that waits in poll/epoll. Owned by duro: do not read or close it.
 * It is closed when the activity returns (unless a token reference keeps
 * it: duro_cancel_token_fd()).
 * -1 with duro_errmsg() set when no descriptor can be made.
 * @note Any thread, while the activity function runs. */
DURO_API int duro_activity_cancel_fd(duro_activity *a);

/** Why it was cancelled ("instance_cancelled", "select_loser", "lock_lost",
 * "shutdown", ...); NULL while not cancelled or when unknown. Borrowed.
 * @note Any thread, while the activity function runs. */
DURO_API const char *duro_activity_cancel_reason(duro_activity *a);

/** A new reference to the activity's token (NULL for a NULL @p a).
 * @note Any thread. */
DURO_API duro_cancel_token *duro_activity_cancel_token(duro_activity *a);
/** Like duro_activity_cancelled(); 0 for a NULL token. @note Any thread. */
DURO_API int duro_cancel_token_cancelled(duro_cancel_token *t);
/** Like duro_activity_wait_cancelled(); 0 at once for a NULL token.
 * @note Any thread. */
DURO_API int duro_cancel_token_wait(duro_cancel_token *t, int64_t timeout_ms);
/** Like duro_activity_cancel_fd(); -1 (DURO_INVALID in duro_errmsg()) for
 * a NULL token. @note Any thread. */
DURO_API int duro_cancel_token_fd(duro_cancel_token *t);
/** Drops a reference; NULL is a no-op. @note Any thread. */
DURO_API void duro_cancel_token_release(duro_cancel_token *t);

/* ========================================================================
 * Runtime
 * ======================================================================== */

typedef struct duro_runtime duro_runtime;

typedef struct duro_runtime_options {
    int version;
    int orchestration_concurrency;         /* turn threads; default 2; 0: this
                                              runtime runs activities only */
    int worker_concurrency;                /* activity slots; default 24; 0:
                                              this runtime runs orchestrations
                                              only */
    int64_t orchestration_lock_timeout_ms; /* default 30000; a turn's ack
                                              is retried through an outage
                                              until its lock's deadline */
    int64_t worker_lock_timeout_ms;        /* default 30000; >= 10; an
                                              activity's ack likewise */
    int64_t lock_renewal_ms;       /* renew in-flight activity locks this
                                      often; default 2000;
                                      1 .. worker_lock_timeout_ms / 2 (the
                                      other half is the margin for a late
                                      renewal), else DURO_INVALID */
    int64_t poll_interval_ms;      /* fallback poll across processes,
                                      and how often in-flight activities'
                                      rows are checked (a read), so a
                                      cancellation decided in another
                                      process is noticed within it (within
                                      lock_renewal_ms with a provider that
                                      cannot check); default 200 */
    uint32_t max_attempts;         /* deliveries before a message is
                                      poison; default 10 */
    uint64_t max_history_events;   /* events per execution before the
                                      instance fails (the turn that would
                                      pass it fails instead, adding the
                                      failure's events: one cancel per
                                      activity or child still running,
                                      and OrchestrationFailed); 0: only
                                      the store's cap; default 50000 */
    size_t fiber_stack_size;       /* bytes of stack for orchestration
                                      code; default 256 KiB; 16 KiB ..
                                      256 MiB. Code that needs more (deep
                                      recursion, big local arrays) hits
                                      a guard page and the process dies
                                      of SIGSEGV, as on a thread's
                                      stack: keep big data off the
                                      stack or raise this */
    size_t fiber_cache_size;       /* suspended orchestrations kept;
                                      default 1024 */
    int64_t cancel_grace_ms;       /* default 10000 */
    int64_t unknown_name_retry_ms; /* first backoff for unregistered names;
                                      doubles per attempt up to 60 s;
                                      default 1000 (duro_client_start()
                                      says how long that takes) */
    size_t max_payload;            /* bytes of an input, output or error;
                                      keep <= the store's; default 1 MiB */
    int log_level;                 /* default DURO_LOG_WARN */
    duro_log_fn log_fn;            /* default: stderr */
    void *log_user;
    /* version 2 */
    int64_t cleanup_timeout_ms; /* how long an orchestration registered
                                   with observe_cancel (and no timeout of
                                   its own) may clean up after a cancel
                                   before it is terminated; default
                                   300000 (5 minutes); > 0 */
    /* version 3 */
    int orchestration_batch; /* instances a turn thread fetches at once and
                                whose turns it commits in one transaction
                                (with a provider that can; one at a time
                                otherwise); 1 .. 1024, 1 turns one instance
                                per transaction; default 0: the store's
                                choice (its provider's turn_batch: 64 on
                                SQLite and on PostgreSQL; else 16) */
    /* version 4 */
    uint32_t keep_executions; /* executions of a continue-as-new chain kept
                                 per instance: when a turn ends execution n
                                 with continue-as-new and n is a multiple
                                 of it, all but the last keep_executions
                                 (their history and rows) are deleted
                                 (duro_client_prune()) after the turn
                                 commits, so an instance that continues as
                                 new for ever keeps at most
                                 2 x keep_executions + 1; default 10; 0 keeps
                                 every execution */
    size_t fiber_cache_bytes; /* bytes the suspended orchestrations of
                                 fiber_cache_size may hold: what replay
                                 built for each (about 200 bytes per
                                 history event), least recently used
                                 evicted first (their next turn replays);
                                 default 256 MiB; 0: no bound but
                                 fiber_cache_size */
    /* version 5 */
    int schedules; /* 1 (default): a thread of this runtime fires the
                      store's schedules when they are due (with any number
                      of runtimes each fire starts one instance; see
                      docs/schedules.md); 0: it does not. A runtime with
                      orchestration_concurrency 0 never fires them. */
} duro_runtime_options;

/** Sets version and every default of the first @p size bytes of @p o (the
 * caller's sizeof(duro_runtime_options)): a program built against an older
 * duro.h, whose struct ends before the fields of later versions, gets its
 * version and nothing written past its end. NULL is a no-op. Durations in
 * these options have no upper bound: a huge one (INT64_MAX) means
 * "practically never" (deadlines saturate, never overflow).
 * @note Any thread. */
DURO_API void duro_runtime_options_init_size(duro_runtime_options *o,
                                             size_t size);
/** duro_runtime_options_init_size() with version 3's size: what programs
 * built against version 3's duro.h call. Programs built against this one
 * call the macro below; bindings that call through a pointer (cgo, ctypes)
 * call duro_runtime_options_init_size() with their struct's size. */
DURO_API void duro_runtime_options_init(duro_runtime_options *o);
#define duro_runtime_options_init(o)                                           \
    duro_runtime_options_init_size((o), sizeof(duro_runtime_options))

/** Opens the store at @p url and prepares a runtime for the orchestrations
 * and activities of @p reg (copied; the registry may be destroyed after).
 * @p opts NULL = defaults. Nothing runs until duro_runtime_start().
 * DURO_BAD_URL for a NULL or malformed @p url; DURO_INVALID for a NULL
 * @p reg or @p out (*out is NULL on every failure). A server store that
 * cannot be reached (down, restarting: "the database system is shutting
 * down") fails DURO_STORAGE at once, retryable (duro_errmsg() says why):
 * a process that starts while its server restarts tries again itself.
 * @note Any thread; the runtime is then used by one thread at a time. */
DURO_API int duro_runtime_create(const char *url, const duro_registry *reg,
                                 const duro_runtime_options *opts,
                                 duro_runtime **out);

/** Like duro_runtime_create() on an open provider, which stays the caller's
 * and must outlive the runtime. DURO_INVALID for a NULL @p p, @p reg or
 * @p out; @p opts NULL = defaults.
 * @note One thread at a time per runtime. */
DURO_API int duro_runtime_create_with_provider(duro_provider *p,
                                               const duro_registry *reg,
                                               const duro_runtime_options *opts,
                                               duro_runtime **out);

/** Starts the dispatcher threads. A runtime runs once: DURO_INVALID_STATE
 * when already started, and when it was started and then shut down
 * (duro_runtime_shutdown(), or a start that failed part way, which shuts
 * down what it started): create a new runtime on the same store instead. A
 * duro_runtime_shutdown() before any start changes nothing, so the runtime
 * still starts. DURO_INVALID for a NULL @p rt, DURO_MISUSE from
 * orchestration code.
 * @note One thread at a time per runtime. */
DURO_API int duro_runtime_start(duro_runtime *rt);

/** Stops taking work and waits up to @p timeout_ms for in-flight work:
 * turns finish; activities that do not return in time get their tokens
 * fired (reason "shutdown") and their rows are abandoned back to the queue
 * so nothing is lost. A completion the store keeps refusing (an outage) is
 * retried until the deadline, not past it: the activity's row stays locked
 * until its lock expires (worker_lock_timeout_ms) and the activity then
 * runs again. @return DURO_OK, or DURO_TIMEOUT when activities had to be
 * abandoned or their completions could not be recorded in time;
 * DURO_INVALID for a NULL @p rt. On a runtime never started, and on one
 * already shut down, returns DURO_OK and does nothing (a never-started
 * runtime can still be started; a shut-down one cannot, see
 * duro_runtime_start()).
 * @note One thread at a time per runtime; never from an activity or
 * orchestration of that runtime (DURO_MISUSE). */
DURO_API int duro_runtime_shutdown(duro_runtime *rt, int64_t timeout_ms);

/** Shuts down (if needed, with the grace period as deadline) and frees.
 * NULL is a no-op.
 * @note One thread at a time per runtime; never from an activity or
 * orchestration of that runtime (DURO_MISUSE). */
DURO_API void duro_runtime_destroy(duro_runtime *rt);

typedef struct duro_metrics {
    uint64_t turns;            /* committed orchestration turns */
    uint64_t replays;          /* turns that replayed from history */
    uint64_t fiber_cache_hits; /* turns that resumed a kept fiber */
    uint64_t orchestrations_completed;
    uint64_t orchestrations_failed;
    uint64_t orchestrations_cancelled;
    uint64_t activities_completed; /* acked with a completion */
    uint64_t activities_failed;
    uint64_t activities_cancelled; /* observed cancelled by this runtime */
    /* rows deleted by our turns; counted after this runtime's own tokens
     * for them are set */
    uint64_t activities_cancel_requested;
    uint64_t activities_abandoned;  /* ignored cancellation past grace */
    uint64_t poison_messages;       /* batches and activities failed as
                                       poison, once the failure commits */
    uint64_t lock_renewal_failures; /* non-retryable */
    uint64_t storage_retries;       /* retryable storage errors */
    uint64_t nondeterminism_errors;
    uint64_t orchestrations_terminated;
    /* acks given up because the store kept failing until the item's lock
     * could have expired (or a shutdown's deadline passed): the activity,
     * or the turn, runs again */
    uint64_t activity_acks_given_up;
    uint64_t turn_acks_given_up;
    uint64_t schedule_fires;      /* instances started for schedules */
    uint64_t schedule_skips;      /* schedule fires skipped */
    uint64_t schedule_lag_max_ms; /* the latest a fire started after its
                                     due time */
} duro_metrics;

/** Copies the counters: all zero for a NULL @p rt; a NULL @p out is a
 * no-op. @note Any thread. */
DURO_API void duro_runtime_metrics(duro_runtime *rt, duro_metrics *out);

/** Writes the runtime's metrics to @p out in the Prometheus text
 * exposition format 0.0.4 (serve it as `text/plain; version=0.0.4`), then
 * flushes @p out. Every family has its HELP and TYPE lines and is written
 * whole, in a fixed order; label values come only from registered names
 * and fixed sets (never instance ids) and are escaped; every series known
 * in advance is written, at 0 until it counts; the text ends with a
 * newline. A turn or activity whose name is not registered counts under
 * the label value "(unregistered)". The families are listed in README.md,
 * "Metrics". The counters behind duro_runtime_metrics() are the same.
 * @return DURO_OK; DURO_INVALID for a NULL @p rt or @p out; DURO_ERROR when
 * writing or flushing @p out failed (it may then hold part of the text).
 * @note Any thread, also while the runtime runs; counters are read one by
 * one, not as one snapshot (a histogram's buckets and _count always agree).
 * The runtime must not be destroyed during the call. */
DURO_API int duro_runtime_metrics_write(duro_runtime *rt, FILE *out);

/** The text of duro_runtime_metrics_write() in a caller-owned buffer,
 * snprintf-style. When the text and its terminating NUL fit in @p size
 * bytes, it is copied to @p buf and DURO_OK is returned; otherwise
 * DURO_TOO_LARGE, and @p buf (when @p size > 0) holds "": never a part of
 * the text. Either way *@p needed (when @p needed is not NULL) is set to the
 * text's length without the NUL: that is the one output a failed call
 * sets, so a caller can size a buffer. @p buf may be NULL when @p size is 0.
 * The counters move between calls, so a text measured by one call may not
 * fit the next: allocate needed + 1 plus headroom (a few KiB), and call
 * again while DURO_TOO_LARGE.
 * @return DURO_OK; DURO_TOO_LARGE; DURO_INVALID for a NULL @p rt, or a NULL
 * @p buf with @p size > 0 (*@p needed is then 0).
 * @note Any thread, as duro_runtime_metrics_write(). */
DURO_API int duro_runtime_metrics_format(duro_runtime *rt, char *buf,
                                         size_t size, size_t *needed);

/* ========================================================================
 * Client: usable from this process or another on the same database.
 * A client may be used from any thread, concurrently. Every call below
 * fails DURO_INVALID for a NULL client, a NULL or empty instance id or
 * name, or a NULL out-parameter (which is set to NULL first when it can
 * be); each says which other arguments may be NULL. Every text a call
 * would store - a new instance's id, a name, version, input, event
 * payload or event id, a reason, a requester - that is not valid UTF-8
 * fails DURO_INVALID naming the field and the byte ("input is not valid
 * UTF-8 at byte 6 (0xE9)") and changes nothing. An id that names an
 * existing instance (status, wait, history, cancel, delete, ...) is a
 * key, not refused: a SQLite store written by an earlier duro may hold
 * ids that are not UTF-8.
 * ======================================================================== */

typedef struct duro_client duro_client;

/** A client on the store at @p url. DURO_BAD_URL for a NULL or malformed
 * @p url, DURO_INVALID for a NULL @p out. @note Any thread. */
DURO_API int duro_client_create(const char *url, duro_client **out);
/** On an open provider, which stays the caller's and must outlive it.
 * DURO_INVALID for a NULL @p p or @p out. @note Any thread. */
DURO_API int duro_client_create_with_provider(duro_provider *p,
                                              duro_client **out);
/** @note One thread, with no other call on the client running. */
DURO_API void duro_client_destroy(duro_client *c); /* NULL ok */

typedef struct duro_start_options {
    int version;
    const char *orchestration_version; /* NULL: highest registered; "":
                                          exactly the version "" */
    int idempotent;   /* 1: an existing instance of the same orchestration
                         name is not an error (DURO_OK, nothing changes:
                         version, input and status are not compared); one
                         of another name still is DURO_ALREADY_EXISTS */
    int64_t delay_ms; /* start later */
    /* Read when version >= 2 (duro_start_options_init sets 2). At most
     * one of the two; neither (0, the default): no deadline of the
     * start's own (the orchestration's registered timeout_ms, if any,
     * applies). When the deadline passes the instance ends Failed with
     * category DURO_CATEGORY_TIMEOUT, its outstanding activities and
     * children cancelled with reason DURO_REASON_DEADLINE; it spans
     * continue-as-new (docs/lifecycle.md, "Deadlines"). */
    int64_t deadline_ms; /* absolute: wall-clock ms since the epoch; one
                            already passed ends the instance at its first
                            turn, without running its code */
    int64_t timeout_ms;  /* relative: ms after the start is due (now +
                            delay_ms) */
} duro_start_options;

/** Sets version and every default. NULL is a no-op. @note Any thread. */
DURO_API void duro_start_options_init(duro_start_options *o);

/** Creates instance @p instance_id of @p orchestration (Pending until its
 * first turn). DURO_ALREADY_EXISTS when the id exists; with
 * opts->idempotent, DURO_OK and nothing changed when the existing instance
 * runs the same orchestration name (its version, input and status are not
 * compared: the first start's stay), and still DURO_ALREADY_EXISTS, with
 * both names in duro_errmsg(), when it runs another one (an id reused for
 * other code is a conflict, not a success: the caller's code would never
 * run).
 * DURO_INVALID for an empty id or name, for @p opts whose version is not
 * set (< 1: call duro_start_options_init() first), and for an id, name,
 * opts->orchestration_version or input that is not valid UTF-8 (no
 * instance is created), for a negative opts->deadline_ms or timeout_ms, for
 * both deadline_ms and timeout_ms given, and for a deadline past the year 9999;
 * DURO_UNSUPPORTED for a deadline on a store older than provider contract
 * version 12; DURO_TOO_LARGE for oversized input or an id, name or
 * opts->orchestration_version over 1024 bytes. The deadline is stored with the
 * instance (duro_instance_info's deadline_ms) and kept by the store as a
 * message due then, in the start's transaction: it holds across restarts.
 * Unknown orchestration names are noticed by the runtime, which retries
 * before it fails the instance (configuration error): during a rolling
 * deploy another process sharing the store may have the orchestration
 * registered and take the instance. After delivery n (n < max_attempts)
 * it waits unknown_name_retry_ms * 2^(n-1), at most 60 s; delivery
 * max_attempts fails it. At the defaults (1000 ms, 10) that is
 * 1+2+4+8+16+32+60+60+60 s: the instance stays Pending about 4 minutes.
 * Meanwhile its last_problem (duro_client_get_status()) says why
 * ("orchestration 'X' is not registered in this runtime (attempt 3 of 10,
 * then the instance fails)") and next_attempt_ms when it tries again.
 * @p input and @p opts may be NULL.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_start(duro_client *c, const char *instance_id,
                               const char *orchestration, const char *input,
                               const duro_start_options *opts);

/** Raises external event @p name on a Pending or Running instance (events
 * raised before the orchestration waits are kept, see duro_wait_event()).
 * DURO_NOT_FOUND for an unknown instance, DURO_INVALID_STATE when finished,
 * DURO_INVALID for a name or payload that is not valid UTF-8 (nothing is
 * raised). @p payload may be NULL.
 * Delivery is at least once when a call is retried: a DURO_STORAGE failure
 * of a server store (PostgreSQL: the connection lost while COMMIT was on its
 * way) may come after the event was stored, and raising it again then
 * delivers it twice (found by a chaos trial: 5 of 14 such failures had
 * committed). To retry safely, raise with an id:
 * duro_client_raise_event_once(). An embedded SQLite store never reports
 * a failure after its commit.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_raise_event(duro_client *c, const char *instance_id,
                                     const char *name, const char *payload);

/** duro_client_raise_event() with an id: the event is delivered at most
 * once per (@p instance_id, @p event_id), however often it is raised with
 * that id, by any client, as long as the instance exists (deleting it, or
 * purging it, forgets its ids): a repeat is DURO_OK and changes nothing.
 * So a raise that failed (DURO_STORAGE, however it was marked) can simply
 * be repeated with the same id until it returns DURO_OK. @p event_id:
 * 1 to 1024 bytes, chosen by the caller (an order number, a message id);
 * NULL behaves as duro_client_raise_event(). A repeat is not compared
 * with the first raise: its name and payload are not checked. The
 * instance must still be Pending or Running, as for any raise: a repeat
 * after the instance finished is DURO_INVALID_STATE. DURO_INVALID with a
 * store older than provider contract version 8.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_raise_event_once(duro_client *c,
                                          const char *instance_id,
                                          const char *name, const char *payload,
                                          const char *event_id);

/** Requests cancellation with a reason and who asked (both may be NULL;
 * reason NULL: "cancelled"). Cancelling a cancelled instance (or one with a
 * cancel pending) is DURO_OK and the first reason is kept; a completed or
 * failed one is DURO_INVALID_STATE and nothing changes; an unknown one
 * DURO_NOT_FOUND. The request shows in the status at once
 * (cancel_requested_ms, cancel_reason, cancelled_by); the instance becomes
 * Cancelled at its next turn - or, when it has not begun (Pending, no
 * runtime has taken its first turn or holds it now), when this call
 * returns: the call writes its history and ends it itself (provider
 * version 9; duro_client_cancel_many() tells the two apart). A turn that
 * was already running when the request came may still finish the
 * instance otherwise (Completed or Failed, the request kept on it: see
 * duro_instance_info). With a provider of version 4 the check and the
 * request are one transaction.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_cancel(duro_client *c, const char *instance_id,
                                const char *reason, const char *requested_by);

/** Requests cancellation of @p count instances with one reason and
 * requester (both may be NULL; reason NULL: "cancelled") and reports one
 * outcome per id in @p results (caller-provided, @p count entries):
 * results[i] is for instance_ids[i] (see duro_cancel_outcome: requested,
 * cancelled - decided in this call, the instance had not begun -, already
 * cancelled - a cancel pending counts -, not found, not cancellable with
 * the status it has). An id that appears more than once is cancelled
 * once, at its first occurrence; every later occurrence gets
 * DURO_CANCEL_DUPLICATE and the first one's status. Runs in transactions of
 * up to DURO_BULK_BATCH_MAX distinct ids, each deciding and recording its
 * outcomes at once; never one round trip per id. @p count 0 is DURO_OK.
 * @return DURO_OK; DURO_INVALID for a NULL client, or a NULL
 * @p instance_ids or @p results with @p count > 0, or a NULL or empty id
 * (nothing is done then); DURO_TOO_LARGE for an id, reason or requester
 * over 1024 bytes; DURO_UNSUPPORTED when the store's provider is older
 * than version 4; a storage error otherwise. After a storage error the
 * transactions that committed before it stand, and their ids' results are
 * filled; the others are zero (DURO_CANCEL_NONE). Repeating the call is
 * safe: what was requested or cancelled then reports "already
 * cancelled".
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_cancel_many(duro_client *c,
                                     const char *const *instance_ids,
                                     size_t count, const char *reason,
                                     const char *requested_by,
                                     duro_cancel_result *results);

typedef struct duro_bulk_options {
    int version;
    int dry_run;    /* 1: change nothing; report what a real run starting
                       now would do */
    size_t max_ids; /* ids to return in the result (0: only the count) */
} duro_bulk_options;

/** Sets version and every default (a real run, no ids). NULL is a no-op.
 * @note Any thread. */
DURO_API void duro_bulk_options_init(duro_bulk_options *o);

/** Requests cancellation of every instance @p filter selects (name,
 * version, created range; status_mask within Pending, Running and
 * Suspended, 0: Pending and Running - a suspended instance only when
 * asked) that has no cancellation requested yet, with one reason and
 * requester
 * (both may be NULL; reason NULL: "cancelled"). The set is what matched
 * when the call started: instances created meanwhile are not cancelled.
 * Runs in transactions of up to DURO_BULK_BATCH_MAX instances. With
 * opts->dry_run nothing changes and the result is exactly the set a real
 * run would cancel now. @p opts NULL: defaults (a real run).
 * *out (caller-owned, free with duro_bulk_result_free()) holds how many
 * were (would be) cancelled and the first opts->max_ids of their ids, in id
 * order; of those, applied is how many had not begun and were cancelled by
 * the call itself (a dry run: would be).
 * @return DURO_OK; DURO_INVALID for a NULL client, @p filter or @p out, a
 * status outside Pending and Running, or a finished_before_ms;
 * DURO_TOO_LARGE for a name, version, reason or requester over 1024 bytes;
 * DURO_UNSUPPORTED for a provider older than version 4; a storage error
 * otherwise (*out NULL; transactions that committed before it stand, and
 * repeating the call cancels the rest).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_cancel_matching(duro_client *c,
                                         const duro_bulk_filter *filter,
                                         const char *reason,
                                         const char *requested_by,
                                         const duro_bulk_options *opts,
                                         duro_bulk_result **out);

/** Terminates an instance: ends it at once without running its code (it
 * works on instances whose code is broken, unregistered or
 * nondeterministic, on a suspended instance and during a cleanup after a
 * cancel), cancels its outstanding activities (reason
 * "instance_terminated") and terminates its children. The instance
 * becomes Terminated at its next turn, with OrchestrationTerminated
 * {reason, requested_by} in history; one that has not begun (see
 * duro_client_cancel()) is Terminated when this call returns.
 * @p reason (NULL: "terminated") and
 * @p requested_by may be NULL. DURO_NOT_FOUND for an unknown instance,
 * DURO_INVALID_STATE for one that ended otherwise (nothing changes);
 * terminating a terminated instance, or one with a terminate pending, is
 * DURO_OK (the first request wins). DURO_UNSUPPORTED with a
 * provider older than version 5. The check and the request are one
 * transaction.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_terminate(duro_client *c, const char *instance_id,
                                   const char *reason,
                                   const char *requested_by);

/** Suspends an instance: from its next turn it takes no decisions and runs
 * no code; messages that arrive (completions, timers, events) are recorded
 * in history in the order they arrive and handed to the code, in that
 * order, when it is resumed. Running activities keep running. Status
 * Suspended; history records ExecutionSuspended {reason, requested_by}.
 * An instance that has not begun (see duro_client_cancel()) is Suspended
 * when this call returns, before any of its code ran: its code starts
 * when it is resumed (a delayed start's delay ends with the suspension).
 * Suspending a suspended instance is DURO_OK and changes nothing.
 * Cancel and terminate work on a suspended instance (a cancel ends it at
 * once, without cleanup: its code does not run while suspended).
 * DURO_NOT_FOUND for an unknown instance, DURO_INVALID_STATE for a
 * finished one; DURO_UNSUPPORTED with a provider older than version 5.
 * @p reason and @p requested_by may be NULL.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_suspend(duro_client *c, const char *instance_id,
                                 const char *reason, const char *requested_by);

/** Resumes a suspended instance: history records ExecutionResumed
 * {reason, requested_by} and the code then consumes the messages kept
 * while it was suspended, in the order they arrived. Resuming an instance
 * that is not suspended is DURO_OK and changes nothing. DURO_NOT_FOUND,
 * DURO_INVALID_STATE and DURO_UNSUPPORTED as duro_client_suspend().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_resume(duro_client *c, const char *instance_id,
                                const char *reason, const char *requested_by);

/** duro_client_terminate(), duro_client_suspend() or duro_client_resume()
 * (@p control, a duro_control) for @p count instances, with one outcome
 * per id in @p results (see duro_control_outcome), in transactions of up
 * to DURO_BULK_BATCH_MAX distinct ids. Ids, duplicates, results after a
 * failure and errors as duro_client_cancel_many(); DURO_INVALID for an
 * unknown @p control; DURO_UNSUPPORTED with a provider older than
 * version 5.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_control_many(duro_client *c, int control,
                                      const char *const *instance_ids,
                                      size_t count, const char *reason,
                                      const char *requested_by,
                                      duro_control_result *results);

/** @p control (a duro_control) for every instance @p filter selects:
 * terminate takes status_mask within Pending, Running and Suspended (0:
 * the three), suspend within Pending and Running (0: both), resume only
 * Suspended (0: it). Fixed set, batches, dry run, *out and errors as
 * duro_client_cancel_matching(); DURO_INVALID for an unknown @p control;
 * DURO_UNSUPPORTED with a provider older than version 5.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_control_matching(duro_client *c, int control,
                                          const duro_bulk_filter *filter,
                                          const char *reason,
                                          const char *requested_by,
                                          const duro_bulk_options *opts,
                                          duro_bulk_result **out);

/* Where a reset or rewind goes and who asks (duro_client_reset(),
 * duro_client_rewind(), duro_client_reset_matching()). */
typedef struct duro_reset_options {
    int version;
    uint64_t to_event_id;     /* the last event kept; 0: the last good point
                                 (the latest turn boundary before the first
                                 failure, or before the ending when nothing
                                 failed). A rewind takes only 0 */
    uint64_t execution_id;    /* the execution to_event_id is in, which must
                                 still be the current one (a reset that
                                 another overtook fails); 0: the current */
    const char *reason;       /* recorded on ExecutionReset; may be NULL */
    const char *requested_by; /* likewise */
    int dry_run;              /* 1: check and report, change nothing */
    /* version 2 */
    int64_t deadline_ms; /* the deadline the new execution runs under: 0
                            keeps the instance's own (re-armed; refused
                            when it has passed: give a new one or none);
                            a wall-clock ms time after now: a new one;
                            DURO_DEADLINE_NONE: none. Children rewound with
                            the instance take the same choice */
} duro_reset_options;

/* duro_reset_options.deadline_ms: the reset instance runs without one. */
#define DURO_DEADLINE_NONE (-1)

/** Sets version and every default (the last good point of the current
 * execution, the instance's own deadline, a real run). NULL is a no-op.
 * @note Any thread. */
DURO_API void duro_reset_options_init(duro_reset_options *o);

/** Resets an ended instance (Completed, Failed, Cancelled or Terminated):
 * a new execution n+1 whose history is its current execution n's events 1
 * .. opts->to_event_id (as they were), then ExecutionReset {reason,
 * requested_by, ref_execution n, ref_event_id}; the code then continues
 * from there with the code registered now. The instance is Running again
 * (output, error and finish time cleared); execution n stays readable
 * (duro_client_read_history() with n). What the kept events leave pending
 * is live again in the same transaction: activities scheduled without a
 * result run again (same name, input and attempt), timers not fired fire
 * (at once when their time has passed), event waits wait. The point must
 * be a turn boundary - the event after it an input (a completion, a fired
 * timer, a raised event, a child's result, a control request) -, because
 * the decisions a turn takes after an input are one set: a point inside
 * a turn is refused, naming the nearest valid points. Refused too: a
 * point that leaves a sub-orchestration without its result (the child
 * would report to execution n; reset to before it was scheduled or after
 * its result), a point inside a suspension, and a live instance (Pending,
 * Running, Suspended: terminate it first). One transaction, with a
 * compare-and-set on the execution: two resets of the same execution
 * never both succeed. The new execution runs under the instance's
 * deadline (its DEADLINE re-armed) unless opts->deadline_ms gives another
 * or none. @p opts NULL: defaults. @p out (may be NULL)
 * receives what was (with opts->dry_run: would be) done.
 * @return DURO_OK; DURO_INVALID for a NULL client, a NULL or empty id, a
 * point that is refused (the message says why and where one may go);
 * DURO_TOO_LARGE for an id, reason or requester over 1024 bytes;
 * DURO_NOT_FOUND for an unknown instance or event id; DURO_INVALID_STATE
 * for a live instance, one whose current execution is not
 * opts->execution_id, or one whose deadline has passed while
 * opts->deadline_ms keeps it (it would end again at once: give a new
 * deadline or DURO_DEADLINE_NONE); DURO_INVALID for a deadline_ms that is
 * negative (but DURO_DEADLINE_NONE) or already passed; DURO_UNSUPPORTED for a
 * provider older than version 13; a storage error otherwise (nothing changed).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_reset(duro_client *c, const char *instance_id,
                               const duro_reset_options *opts,
                               duro_reset_result *out);

/** Rewinds a Failed instance: a reset to the last good point (the latest
 * turn boundary before its current execution's first failure), so the
 * activities (or child) that failed run again and the orchestration
 * continues from there, the history before the failure kept; the
 * ExecutionReset carries DURO_RESET_REWIND. opts->to_event_id must be 0.
 * Errors as duro_client_reset(); DURO_INVALID_STATE for an instance that
 * is not Failed.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_rewind(duro_client *c, const char *instance_id,
                                const duro_reset_options *opts,
                                duro_reset_result *out);

/* One instance of a reset or rewind by filter. */
typedef struct duro_reset_item {
    const char *instance_id;
    int rc;                   /* DURO_OK, or why it was refused */
    const char *message;      /* the refusal's message; NULL with DURO_OK */
    duro_reset_result result; /* with DURO_OK: what was (would be) done */
} duro_reset_item;

/* What duro_client_reset_matching() did, in one arena. */
typedef struct duro_reset_list {
    duro_arena *arena;
    duro_reset_item *items; /* in id order */
    size_t count;
    size_t reset; /* of count, how many were (would be) reset */
} duro_reset_list;

/** Frees a reset list; NULL is a no-op.
 * @note One thread, after the last use of the list. */
DURO_API void duro_reset_list_free(duro_reset_list *l);

/** duro_client_reset(), or duro_client_rewind() when @p rewind is 1, for
 * every instance @p filter selects (name, created range; status_mask
 * within Completed, Failed, Cancelled and Terminated, 0: Failed; version
 * and finished_before_ms must be unset), each in its own transaction, at
 * most @p max of them (1 .. DURO_BULK_BATCH_MAX; 0: that). The set is
 * read once when the call starts. Each instance gets an item: reset, or
 * refused with its code and message (a refusal of one does not stop the
 * others). With opts->dry_run nothing changes and each item says where
 * the instance would be reset to. opts->to_event_id and
 * opts->execution_id must be 0 (the last good point of each). *out
 * (caller-owned, free with duro_reset_list_free()).
 * @return DURO_OK (whatever the items say); DURO_INVALID for a NULL
 * client, @p filter or @p out, a live status, a version, a
 * finished_before_ms, a to_event_id or execution_id, @p max over
 * DURO_BULK_BATCH_MAX; DURO_TOO_LARGE as duro_client_reset();
 * DURO_UNSUPPORTED for a provider older than version 13; a storage error
 * of the query (*out NULL, nothing changed). A storage error of one
 * instance's reset is its item's rc, and the others go on.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_reset_matching(duro_client *c,
                                        const duro_bulk_filter *filter,
                                        int rewind,
                                        const duro_reset_options *opts,
                                        size_t max, duro_reset_list **out);

/** Deletes finished instances for retention: every instance @p filter
 * selects, where filter->finished_before_ms is required and
 * filter->status_mask may hold only the finished statuses Completed,
 * Failed, Cancelled and Terminated (0: all four). Pending, Running and
 * Suspended instances are never purged: asking for them is DURO_INVALID
 * and changes nothing. Like duro_client_delete(), an
 * instance goes with its sub-orchestrations (whatever their name or age),
 * and only when all of them are finished too; otherwise it is kept whole.
 * Runs in transactions of up to DURO_BULK_BATCH_MAX selected instances, so
 * writers are never held up for long; the set is fixed when the call
 * starts; opts->dry_run changes nothing and reports exactly what a real run
 * would delete now. *out (caller-owned, free with duro_bulk_result_free())
 * holds how many instances were (would be) deleted, sub-orchestrations
 * included, and the first opts->max_ids of their ids. @p opts NULL:
 * defaults.
 * @return DURO_OK; DURO_INVALID for a NULL client, @p filter or @p out, a
 * missing finished_before_ms or a live status; DURO_TOO_LARGE for a name or
 * version over 1024 bytes; DURO_UNSUPPORTED for a provider older than
 * version 4; a storage error otherwise (*out NULL; transactions that
 * committed before it stand, and repeating the call purges the rest).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_purge(duro_client *c, const duro_bulk_filter *filter,
                               const duro_bulk_options *opts,
                               duro_bulk_result **out);

/** Status of @p instance_id; status DURO_STATUS_NOT_FOUND (and DURO_OK) when
 * it does not exist. Continue-as-new chains report the latest execution.
 * Besides status and result it tells who cancelled it and why
 * (cancelled_by, cancel_reason, cancel_requested_ms: set as soon as the
 * request is made, before the instance is Cancelled), when it finished
 * (finished_ms), and why it is stuck: last_problem, last_problem_ms and
 * next_attempt_ms are the last problem a runtime met with it (an
 * unregistered orchestration or activity, a batch or activity delivered
 * again and again, nondeterminism) and when it tries again (0: it does
 * not). A runtime clears the problem once it makes progress; a problem
 * that ended the instance (nondeterminism, poison, an orchestration never
 * registered) stays. These fields are zero / NULL with a provider older
 * than version 4. Caller-owned: free with duro_free().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_get_status(duro_client *c, const char *instance_id,
                                    duro_instance_info **out);

/** Waits until the instance has finished - Completed, Failed, Cancelled or
 * Terminated - or @p timeout_ms passes (DURO_TIMEOUT; *out then holds the
 * latest status). @p timeout_ms < 0 waits without a deadline, as
 * duro_activity_wait_cancelled(); 0 looks once; INT64_MAX is practically
 * forever too. DURO_NOT_FOUND for an unknown instance (*out then holds
 * status DURO_STATUS_NOT_FOUND). A retryable failure of the store (a
 * restart, a lost connection) does not end the wait: it goes on until the
 * deadline, and a store still failing then returns that failure (*out
 * NULL). Caller-owned *out: free with duro_free().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_wait(duro_client *c, const char *instance_id,
                              int64_t timeout_ms, duro_instance_info **out);

/** History of an execution (0: the current one). Free with
 * duro_history_free().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_read_history(duro_client *c, const char *instance_id,
                                      uint64_t execution_id,
                                      duro_history **out);

/** Every execution of an instance's history that the store holds, as one
 * JSON document in the stable form of docs/history-json.md ("format":
 * "duro-history", "format_version": 1), which duro_replay_json() reads:
 * the input of replay tests. Every field of every event is kept as stored
 * (payloads as strings, times as integer milliseconds), so a replay of the
 * document is a replay of the store's history. Caller-owned *out (NUL-
 * terminated): free with duro_free(). DURO_NOT_FOUND for an unknown
 * instance; DURO_INVALID when an event holds text that is not valid UTF-8
 * (an older duro may have stored it; JSON cannot carry it unchanged), the
 * message naming the event; the store's failures as
 * duro_client_read_history().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_export_history(duro_client *c, const char *instance_id,
                                        char **out);

/** Instances matching @p filter (NULL: all). Free with
 * duro_instance_list_free().
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_list(duro_client *c,
                              const duro_instance_filter *filter,
                              duro_instance_list **out);

/** Sets version (DURO_INSTANCE_QUERY_VERSION) and every default of @p q:
 * every instance, in DURO_ORDER_ID, DURO_QUERY_LIMIT_DEFAULT a page, the
 * first page, no total (and, when counted, no cap). NULL is a no-op.
 * @note Any thread. */
DURO_API void duro_instance_query_init(duro_instance_query *q);

/** One page of the instances @p q selects, in its order (see
 * duro_instance_query and duro_instance_order in duro/provider.h): every
 * filter given holds (status, exact name, name prefix or substring,
 * parent, with a problem, a created range, an orchestration version). To
 * page, call again with q->cursor set to the page's next_cursor (NULL on
 * the last page): paging
 * is by key, so a page never repeats an instance of an earlier one, and
 * one that exists throughout and keeps its sort key is on exactly one
 * page, whatever changes between calls; in DURO_ORDER_UPDATED_DESC an
 * instance that changes moves to the front, ahead of the cursor. With
 * q->count_total, page->total counts every match (from the same snapshot
 * as the page; it may read every match); q->count_max > 0 bounds that
 * count and its cost: it stops after count_max + 1 matches, and when
 * more than count_max match, page->total is count_max and
 * page->total_capped 1 ("more than 10,000"), reading at most
 * count_max + 1 index entries when the query filters by no more than
 * statuses, a name and a created range. Reads take no lock a writer
 * waits for. @p q NULL: the defaults of duro_instance_query_init().
 * Caller-owned *out: free with duro_instance_page_free().
 * A store older than provider contract version 10 answers a query that
 * list_instances can express (DURO_ORDER_ID, at most status, exact name
 * and a created range, no total) through it, with the same cursors; any
 * other query is DURO_UNSUPPORTED there.
 * @return DURO_OK; DURO_INVALID for a NULL client or @p out, q->version
 * not set (< 1: call duro_instance_query_init() first), an unknown
 * order, a limit over DURO_QUERY_LIMIT_MAX (a negative one converted to
 * size_t is), a status_mask bit outside 1..8, with_problem or
 * count_total other than 0 or 1, a negative created bound or count_max,
 * an empty name or parent_instance, or a malformed cursor (not a next_cursor of
 * this call, or from a query of another order); DURO_TOO_LARGE for a name,
 * name_prefix, name_contains, parent_instance or orchestration_version
 * over 1024 bytes; DURO_UNSUPPORTED as above, and for
 * q->orchestration_version (query version 3) with a store older than
 * provider contract version 12; a storage error otherwise (*out NULL).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_query(duro_client *c, const duro_instance_query *q,
                               duro_instance_page **out);

/** Sets version and every default of @p q: the four kinds, any
 * requester, any time, DURO_QUERY_LIMIT_DEFAULT a page, the first page.
 * NULL is a no-op. @note Any thread. */
DURO_API void duro_control_event_query_init(duro_control_event_query *q);

/** The operators' requests across every instance, newest first - who
 * cancelled, terminated, suspended or resumed what, when and why - as
 * history recorded them (duro_control_event; list_control_events in
 * duro/provider.h says exactly which are there: a request appears once a
 * turn records it, or at once when it decided an instance that had not
 * begun; requests of pruned executions and of deleted or purged
 * instances are gone with their history). Filter by kind (q->kind_mask),
 * requester and a time range; page with q->cursor as duro_client_query().
 * @p q NULL: the defaults of duro_control_event_query_init().
 * Caller-owned *out: free with duro_control_event_list_free().
 * @return DURO_OK; DURO_INVALID for a NULL client or @p out, q->version
 * not set, a kind_mask bit outside DURO_CONTROL_EVENT_KINDS, a negative
 * since_ms or until_ms, a limit over DURO_QUERY_LIMIT_MAX, a malformed
 * cursor; DURO_TOO_LARGE for a requested_by over 1024 bytes;
 * DURO_UNSUPPORTED with a store older than provider contract version 10;
 * a storage error otherwise (*out NULL).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_control_events(duro_client *c,
                                        const duro_control_event_query *q,
                                        duro_control_event_list **out);

/** The live runtimes (`duro runtimes`): every runtime that wrote its
 * heartbeat within the last DURO_RUNTIME_MISSED_HEARTBEATS of its periods
 * (duro_runtime_info in duro/provider.h: its host and pid, when it
 * started, its last heartbeat, and the orchestrations - with their
 * versions - and activities it registers), oldest start first. A runtime
 * is listed from its duro_runtime_start() until its shutdown, and counts
 * as gone 30 s after its last heartbeat when it stops without one (a
 * crash). This is how to see which runtimes can run an orchestration
 * version (docs/changing-code.md). Caller-owned *out: free with
 * duro_runtime_list_free().
 * @return DURO_OK; DURO_INVALID for a NULL client or @p out;
 * DURO_UNSUPPORTED with a store older than provider contract version 12;
 * a storage error otherwise (*out NULL).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_runtimes(duro_client *c, duro_runtime_list **out);

/* ---- schedules --------------------------------------------------------
 * A schedule starts an instance of an orchestration at each of its fire
 * times - a cron expression in a time zone, or a fixed interval - with a
 * deterministic instance id, exactly once across every runtime on the
 * store (docs/schedules.md). Runtimes fire them (duro_runtime_options
 * .schedules); the client creates and manages them. */

/** What a fire does while the instance of the last one still runs. Values
 * are stored: append-only. */
typedef enum duro_overlap {
    DURO_OVERLAP_SKIP = 0,           /* skip the fire (the default) */
    DURO_OVERLAP_BUFFER_ONE = 1,     /* start it when the last ends; one at
                                        most waits, later ones are skipped */
    DURO_OVERLAP_ALLOW_ALL = 2,      /* start it anyway */
    DURO_OVERLAP_CANCEL_OTHER = 3,   /* cancel the last, start it */
    DURO_OVERLAP_TERMINATE_OTHER = 4 /* terminate the last, start it */
} duro_overlap;

#define DURO_SCHEDULE_CATCHUP_DEFAULT_MS (365LL * 24 * 3600 * 1000)

/** A schedule's spec. Strings are borrowed for the call. */
typedef struct duro_schedule_spec {
    int version;               /* set by duro_schedule_spec_init() */
    const char *cron;          /* 5 or 6 fields, or a macro (@daily); NULL or
                                  "": every interval_ms */
    int64_t interval_ms;       /* without cron: > 0; fires at offset_ms +
                                  k * interval_ms since the epoch */
    int64_t offset_ms;         /* 0 .. interval_ms - 1 */
    const char *time_zone;     /* the cron expression's zone by tz database
                                  name ("Europe/Berlin"); NULL or "": UTC */
    const char *orchestration; /* name to start (required) */
    const char *orchestration_version; /* NULL: the default */
    const char *input;                 /* each instance's input; NULL: none */
    int overlap;                       /* duro_overlap; default SKIP */
    int64_t catchup_window_ms;         /* a fire due longer ago than this (a
                                          downtime) is skipped, not made; >= 1000;
                                          default 365 days */
    int64_t jitter_ms; /* each fire is due up to this much after its
                          time (the same in every runtime); >= 0 */
    int paused;        /* 1: created paused */
    const char *note;  /* with paused: why */
    int64_t start_ms;  /* no fire before it; 0: none */
    int64_t end_ms;    /* no fire at or after it; 0: none */
    /* version 2 */
    int64_t timeout_ms; /* each instance a fire (or a trigger) starts gets
                           a deadline this long after it is started (as
                           duro_start_options.timeout_ms); 0: none of the
                           schedule's (the orchestration's registration
                           may still give one) */
} duro_schedule_spec;

/** Sets version and every default. NULL is a no-op. @note Any thread. */
DURO_API void duro_schedule_spec_init(duro_schedule_spec *s);

/** Creates schedule @p id with @p spec; its first fire is the first fire
 * time after now. The instance of the fire at time T is
 * "<id>@<T as 2026-11-29T02:00:00Z>" (with .mmm when T is not whole
 * seconds); of a trigger "<id>@trigger-<now, the same form>".
 * @return DURO_OK; DURO_INVALID for a NULL client or spec, spec->version
 * not set, an empty id or one holding '@', neither cron nor a positive
 * interval_ms (or both), a cron expression that does not parse (the
 * message says which field and why), an offset outside 0 .. interval_ms-1,
 * an unknown overlap, a catch-up window under 1000 ms, a negative jitter,
 * start or end time, end before start, an empty orchestration name;
 * DURO_NOT_FOUND for a time zone the tz database does not hold (named);
 * DURO_TOO_LARGE for an id over DURO_SCHEDULE_ID_MAX bytes;
 * DURO_ALREADY_EXISTS when the id is taken; DURO_UNSUPPORTED with a store
 * older than provider contract version 13.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_create(duro_client *c, const char *id,
                                         const duro_schedule_spec *spec);

/** Replaces the spec of schedule @p id; its next fire is recomputed from
 * now (fires already decided stand). The errors of create;
 * DURO_NOT_FOUND for an unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_update(duro_client *c, const char *id,
                                         const duro_schedule_spec *spec);

/** Pauses schedule @p id (with @p note, may be NULL): it fires no more
 * until resumed. Instances it started are not touched.
 * DURO_NOT_FOUND for an unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_pause(duro_client *c, const char *id,
                                        const char *note);

/** Resumes schedule @p id: its next fire is the first fire time after now
 * (the fire times of the pause are not made). DURO_NOT_FOUND for an
 * unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_resume(duro_client *c, const char *id);

/** Fires schedule @p id now, paused or not, under its overlap policy: an
 * instance "<id>@trigger-<now>" starts unless the policy skips it (the
 * last instance runs and overlap is SKIP, or BUFFER_ONE with a fire
 * buffered) or buffers it. @p instance_id (may be NULL) gets the started
 * instance's id, "" when none started; it holds @p size bytes.
 * DURO_NOT_FOUND for an unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_trigger(duro_client *c, const char *id,
                                          char *instance_id, size_t size);

/** Deletes schedule @p id and its fires log. Instances it started are not
 * touched. DURO_NOT_FOUND for an unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_delete(duro_client *c, const char *id);

/** One schedule as described. Text is borrowed from the description. */
typedef struct duro_schedule_info {
    const char *id;
    duro_schedule_spec spec;      /* as stored */
    int64_t next_ms;              /* the next fire time not yet decided; 0: none
                                     (past end_ms) */
    int64_t buffered_ms;          /* a buffered fire's time; 0: none */
    const char *last_instance_id; /* NULL: none yet */
    int last_status;              /* its status; DURO_STATUS_NOT_FOUND: none */
    int64_t fires;                /* instances started */
    int64_t skips;                /* fires skipped */
    int64_t created_ms, updated_ms;
} duro_schedule_info;

/** One entry of a schedule's recent fires. */
typedef struct duro_schedule_fire {
    int action;              /* 1 started, 2 skipped, 3 buffered, 4 stopped
                                the last (duro/provider.h's
                                duro_schedule_action_kind) */
    int64_t time_ms;         /* the fire's time */
    int64_t count;           /* skipped: how many (-1: more than counted) */
    const char *instance_id; /* started or stopped; else NULL */
    int instance_status;     /* its status now */
    const char *why;         /* skipped: why */
    int64_t recorded_ms;
} duro_schedule_fire;

/** Schedules (duro_client_schedule_list) or one with its detail
 * (duro_client_schedule_describe). Free with duro_schedule_description_free().
 */
typedef struct duro_schedule_description {
    duro_schedule_info *schedules;
    size_t count;
    int64_t *next_times; /* describe: the next fire times, planned */
    size_t next_count;
    duro_schedule_fire *fires; /* describe: recent fires, newest first */
    size_t fire_count;
    void *internal_; /* the library's */
} duro_schedule_description;

/** Every schedule, in id order. Caller-owned *out: free with
 * duro_schedule_description_free(). DURO_INVALID for a NULL client or out.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_list(duro_client *c,
                                       duro_schedule_description **out);

/** Schedule @p id (count 1) with its next @p next_count fire times (at
 * most 100) and its @p fire_count most recent fires with their
 * instances' status (at most DURO_SCHEDULE_FIRES_KEPT). Caller-owned
 * *out: free with duro_schedule_description_free(). DURO_NOT_FOUND for an
 * unknown schedule.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_schedule_describe(duro_client *c, const char *id,
                                           size_t next_count, size_t fire_count,
                                           duro_schedule_description **out);

/** Frees a description; NULL is a no-op. @note Any thread. */
DURO_API void duro_schedule_description_free(duro_schedule_description *d);

/** The fire times of @p spec after @p after_ms, up to @p max into @p out
 * (*count of them): what create or update would make, without a store
 * (`duro schedule create --dry-run`). The errors of create's checks.
 * @note Any thread. */
DURO_API int duro_schedule_spec_next_times(const duro_schedule_spec *spec,
                                           int64_t after_ms, int64_t *out,
                                           size_t max, size_t *count);

/** The UTC offset, in seconds east of UTC (*@p offset_s), of the time zone
 * named @p time_zone (a tz database name as a schedule's; NULL or "" is
 * UTC) at the instant @p at_ms: how a schedule's fire times read on its
 * zone's wall clock (`duro ui` shows them so).
 * @return DURO_OK; DURO_INVALID for a NULL offset_s or a name that is not
 * one (*offset_s 0); DURO_NOT_FOUND for a zone the tz database does not
 * hold (named).
 * @note Any thread. */
DURO_API int duro_time_zone_offset(const char *time_zone, int64_t at_ms,
                                   int32_t *offset_s);

/** The store's gauges, for monitoring (`duro metrics`): instances by
 * orchestration name and status, Pending and Running instances with a
 * problem by name, the two queues' ready, delayed and locked counts with
 * the time since when the oldest ready item has waited, and the store's
 * size; every field from one consistent snapshot. duro_store_stats in
 * duro/provider.h defines each field. Cheap enough to call every few
 * seconds: both built-in stores count index entries, never an instance's
 * or a message's row, so the cost grows with the instances and the queued
 * work, never with history or payloads. Caller-owned *out, ONE allocation (the
 * arrays and names inside it): free with duro_free().
 * @return DURO_OK; DURO_INVALID for a NULL client or @p out;
 * DURO_UNSUPPORTED for a provider older than version 4 or one without the
 * method; a storage error otherwise (*out NULL).
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_store_stats(duro_client *c, duro_store_stats **out);

/** Writes this client's counters to @p out in the Prometheus text
 * exposition format 0.0.4, then flushes it: one family,
 * duro_cancel_requests_total{outcome}, the cancellation requests made
 * through this client since it was created, by outcome - requested (the
 * instance's next turn decides), cancelled (decided by the request: the
 * instance had not begun), already_cancelled (cancelled, or a request
 * pending), not_found, invalid_status (Completed or Failed) - each written
 * from the start, at 0. duro_client_cancel() counts one;
 * duro_client_cancel_many() one per distinct id it decided;
 * duro_client_cancel_matching() (not a dry run) counts the instances it
 * reached, as requested or cancelled. A process that runs a runtime and a
 * client serves both texts one after the other: their families differ.
 * @return DURO_OK; DURO_INVALID for a NULL @p c or @p out; DURO_ERROR when
 * writing or flushing failed.
 * @note Any thread, concurrently; the client must not be destroyed during
 * the call. */
DURO_API int duro_client_metrics_write(duro_client *c, FILE *out);

/** The text of duro_client_metrics_write() in a caller-owned buffer,
 * snprintf-style, as duro_runtime_metrics_format(): DURO_OK when the text
 * and its NUL fit in @p size bytes; otherwise DURO_TOO_LARGE and @p buf
 * (when @p size > 0) holds "". *@p needed (may be NULL) gets the text's
 * length without the NUL.
 * @return DURO_OK; DURO_TOO_LARGE; DURO_INVALID for a NULL @p c, or a NULL
 * @p buf with @p size > 0 (*@p needed is then 0).
 * @note Any thread, as duro_client_metrics_write(). */
DURO_API int duro_client_metrics_format(duro_client *c, char *buf, size_t size,
                                        size_t *needed);

/** Deletes an instance and its children (a running one only with force).
 * @p deleted (how many instances went) may be NULL.
 * @warning Deleting a running sub-orchestration with force does not tell
 * its parent: the parent's await for it never completes and the parent
 * stays Running until it is cancelled or terminated. Delete the parent
 * (which takes its children with it) or cancel the child instead.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_delete(duro_client *c, const char *instance_id,
                                int force, size_t *deleted);

/** Deletes all but the last @p keep_last executions of an instance. The
 * current execution is always kept: @p keep_last 0 acts as 1.
 * @p pruned (how many executions went) may be NULL.
 * @note Any thread, concurrently; not from orchestration code (DURO_MISUSE). */
DURO_API int duro_client_prune(duro_client *c, const char *instance_id,
                               uint64_t keep_last, size_t *pruned);

/* ========================================================================
 * Test environment: a store, a runtime and a client on a virtual clock, for
 * tests of orchestrations whose timers, delayed starts, retry backoffs,
 * attempt timeouts and cleanup deadlines span hours or days. While
 * duro_test_env_wait() waits, whenever nothing can run - no turn or
 * activity in progress in the environment's runtime and nothing due now on
 * either queue - the clock jumps to the next time something in the store
 * becomes due, so a 30-day timer fires in milliseconds. Time moves only
 * there (as Temporal's test environment skips time only while a test waits
 * on a result) and by hand (duro_test_env_advance()), never while an
 * activity runs: its code sees real time pass.
 *
 * The virtual clock is the process's wall clock as duro reads it
 * (duro_now_ms(), every store's visibility and lock times, turn times): the
 * real time plus what the environment skipped or advanced. So one
 * environment at a time per process, and nothing else in the process should
 * use duro while one is open; the clock goes back to real time when it is
 * destroyed. Monotonic waits stay real (lock renewals, the cancellation
 * grace period, real timeouts such as duro_test_env_wait()'s).
 * ======================================================================== */

typedef struct duro_test_env duro_test_env;

typedef struct duro_test_env_options {
    int version;
    const char *url; /* NULL (default): a SQLite store in a new temporary
                        directory ($TMPDIR, else /tmp), removed with every
                        file in it by duro_test_env_destroy(); else any
                        store URL, kept */
    const duro_runtime_options *runtime; /* NULL (default): the runtime's
                                            defaults, except both lock
                                            timeouts, ten years of virtual
                                            time so that no skip or advance
                                            expires a lock; copied */
} duro_test_env_options;

/** Sets version and every default. NULL is a no-op. @note Any thread. */
DURO_API void duro_test_env_options_init(duro_test_env_options *o);

/** Opens the store, a client and a runtime (not started) for the
 * orchestrations and activities of @p reg (copied), and takes the virtual
 * clock (starting at the real time). @p opts NULL = defaults.
 * @return DURO_OK; DURO_INVALID for a NULL @p reg or @p out, @p opts whose
 * version is not set, or invalid runtime options; DURO_INVALID_STATE when
 * another environment is open in the process; DURO_UNSUPPORTED for a store
 * older than provider version 12 (it cannot tell when work is next due);
 * DURO_ERROR when the temporary directory cannot be made; DURO_BAD_URL or
 * DURO_STORAGE as the store's opening fails. *out is NULL on every
 * failure.
 * @note Any thread; the environment is then used by one thread at a time. */
DURO_API int duro_test_env_create(const duro_registry *reg,
                                  const duro_test_env_options *opts,
                                  duro_test_env **out);

/** Runs @p fn (with @p user) instead of the activity registered as @p name,
 * or registers it when none is. Before duro_test_env_start() only.
 * @return DURO_OK; DURO_INVALID for a NULL @p env or @p fn, an empty or
 * NULL @p name; DURO_TOO_LARGE for a name over 1024 bytes;
 * DURO_INVALID_STATE once the environment started.
 * @note One thread at a time per environment. */
DURO_API int duro_test_env_mock_activity(duro_test_env *env, const char *name,
                                         duro_activity_fn fn, void *user);

/** Starts the runtime (mocks apply from here on). Instances may be started
 * through the client before or after.
 * @return DURO_OK; DURO_INVALID for a NULL @p env; DURO_INVALID_STATE when
 * already started; duro_runtime_start()'s failures.
 * @note One thread at a time per environment. */
DURO_API int duro_test_env_start(duro_test_env *env);

/** The environment's client, borrowed: valid until duro_test_env_destroy().
 * NULL for a NULL @p env.
 * @note Any thread, as a client is. */
DURO_API duro_client *duro_test_env_client(duro_test_env *env);

/** Moves the virtual clock @p ms forward and wakes the runtime, so what
 * became due runs (a timer, a delayed start, a retry). An activity running
 * meanwhile keeps running: it sees its attempt timeout fire, not its lock
 * expire (see the options' lock timeouts).
 * @return DURO_OK; DURO_INVALID for a NULL @p env or a negative @p ms.
 * @note One thread at a time per environment. */
DURO_API int duro_test_env_advance(duro_test_env *env, int64_t ms);

/** How far the virtual clock is ahead of real time: every skip and advance
 * so far, in ms. 0 for a NULL @p env. @note Any thread. */
DURO_API int64_t duro_test_env_skipped_ms(duro_test_env *env);

/** duro_client_wait() that skips time: waits until @p instance_id has
 * finished (Completed, Failed, Cancelled or Terminated) or @p timeout_ms
 * of real time passes (DURO_TIMEOUT, *out holding the latest status;
 * < 0: no deadline), and whenever nothing in the runtime can run, moves
 * the clock to the next due time in the store and wakes the runtime.
 * Caller-owned *out: free with duro_free().
 * @return DURO_OK; DURO_TIMEOUT; DURO_NOT_FOUND for an unknown instance
 * (*out holds status DURO_STATUS_NOT_FOUND); DURO_INVALID for a NULL
 * @p env, @p instance_id or @p out; DURO_INVALID_STATE before
 * duro_test_env_start(); a failure of the store ends the wait with its
 * code (*out NULL).
 * @note One thread at a time per environment; not from orchestration or
 * activity code (DURO_MISUSE). */
DURO_API int duro_test_env_wait(duro_test_env *env, const char *instance_id,
                                int64_t timeout_ms, duro_instance_info **out);

/** Shuts the runtime down (waiting up to its cancel grace period), closes
 * the client and the store, removes a temporary store, and gives the
 * process its real clock back. NULL is a no-op.
 * @note One thread at a time per environment; not from orchestration or
 * activity code. */
DURO_API void duro_test_env_destroy(duro_test_env *env);

#ifdef __cplusplus
}
#endif
#endif
