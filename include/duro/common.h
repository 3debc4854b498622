/* duro/common.h - the vocabulary shared by the public API (duro.h) and the
 * provider interface (duro/provider.h): error codes, failure categories,
 * instance statuses, log levels and the library allocator. Everything here is
 * usable from any thread. */
#ifndef DURO_COMMON_H
#define DURO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DURO_BUILDING) && defined(__GNUC__)
#define DURO_API __attribute__((visibility("default")))
#else
#define DURO_API
#endif

#if defined(__GNUC__)
#define DURO_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DURO_PRINTF(fmt, args)
#endif

/* Every error code, once. Codes are append-only and never renumbered.
 * X(name, value, text) */
#define DURO_ERROR_TABLE(X)                                                    \
    X(DURO_OK, 0, "success")                                                   \
    X(DURO_ERROR, 1, "unspecified error")                                      \
    X(DURO_NOMEM, 2, "out of memory")                                          \
    X(DURO_INVALID, 3, "invalid argument")                                     \
    X(DURO_NOT_FOUND, 4, "not found")                                          \
    X(DURO_ALREADY_EXISTS, 5, "already exists")                                \
    X(DURO_STORAGE, 6, "storage failure")                                      \
    X(DURO_BUSY, 7, "storage busy, retry")                                     \
    X(DURO_LOCK_LOST, 8, "lock lost, expired or unknown token")                \
    X(DURO_TOO_LARGE, 9, "payload too large")                                  \
    X(DURO_HISTORY_LIMIT, 10, "history size limit reached")                    \
    X(DURO_TIMEOUT, 11, "timed out")                                           \
    X(DURO_BAD_URL, 12, "malformed database URL")                              \
    X(DURO_UNKNOWN_NAME, 13, "name not registered")                            \
    X(DURO_NONDETERMINISM, 14, "orchestration is not deterministic")           \
    X(DURO_CANCELLED, 15, "cancelled")                                         \
    X(DURO_INVALID_STATE, 16, "invalid in the current state")                  \
    X(DURO_MISUSE, 17, "API misuse")                                           \
    X(DURO_SHUTDOWN, 18, "shutting down")                                      \
    X(DURO_UNSUPPORTED, 19, "not supported")                                   \
    X(DURO_SCHEMA, 20, "unsupported schema version")                           \
    X(DURO_POISON, 21, "poison message")                                       \
    X(DURO_FAILED, 22, "failed")                                               \
    X(DURO_CONFLICT, 23, "changed meanwhile, read it again")

enum duro_error_code {
#define DURO__X(name, value, text) name = value,
    DURO_ERROR_TABLE(DURO__X)
#undef DURO__X
};

/** Static text for an error code ("not found"); never NULL.
 * @note Any thread. */
DURO_API const char *duro_strerror(int rc);

/** The code's name ("DURO_NOT_FOUND"), for logs and tests; never NULL.
 * @note Any thread. */
DURO_API const char *duro_errname(int rc);

/** Detail of the last failed duro call on the calling thread ("" when none).
 * Borrowed: valid until the next duro call on this thread.
 * @note Any thread; each thread sees its own. */
DURO_API const char *duro_errmsg(void);

/* What kind of failure an activity, orchestration or task ended with. Stored
 * in history; values are append-only. */
typedef enum duro_category {
    DURO_CATEGORY_NONE = 0,
    DURO_CATEGORY_APPLICATION = 1,    /* user code returned a failure */
    DURO_CATEGORY_CONFIGURATION = 2,  /* unknown name, nondeterminism, bad
                                         input: retrying will not help */
    DURO_CATEGORY_INFRASTRUCTURE = 3, /* poison message, storage, limits */
    DURO_CATEGORY_TIMEOUT = 4,        /* a retry policy's timeout expired */
    DURO_CATEGORY_CANCELLED = 5       /* the work was cancelled */
} duro_category;

/** "application", "configuration", ...; never NULL. @note Any thread. */
DURO_API const char *duro_category_name(int category);

/* Status of an instance (its current execution). Values are append-only. */
typedef enum duro_status {
    DURO_STATUS_NOT_FOUND = 0, /* client only: no such instance */
    DURO_STATUS_PENDING = 1,   /* created, first turn not run yet */
    DURO_STATUS_RUNNING = 2,
    DURO_STATUS_COMPLETED = 3,
    DURO_STATUS_FAILED = 4,
    DURO_STATUS_CANCELLED = 5,
    DURO_STATUS_CONTINUED_AS_NEW = 6, /* a finished execution of a chain */
    DURO_STATUS_SUSPENDED = 7,        /* live, but takes no decisions until
                                         resumed (duro_client_suspend) */
    DURO_STATUS_TERMINATED = 8        /* ended without running its code
                                         (duro_client_terminate, or a
                                         cleanup past its deadline) */
} duro_status;

/** "Pending", "Running", ...; never NULL. @note Any thread. */
DURO_API const char *duro_status_name(int status);

/** Parses a status name (case-insensitive); returns -1 when unknown or
 * NULL.
 * @note Any thread. */
DURO_API int duro_status_parse(const char *name);

/** 1 when @p status is final (completed, failed, cancelled, terminated).
 * @note Any thread. */
DURO_API int duro_status_is_terminal(int status);

typedef enum duro_log_level {
    DURO_LOG_TRACE = 0,
    DURO_LOG_DEBUG = 1,
    DURO_LOG_INFO = 2,
    DURO_LOG_WARN = 3,
    DURO_LOG_ERROR = 4,
    DURO_LOG_OFF = 5
} duro_log_level;

/** Receives one formatted log line (no trailing newline), always one line
 * safe to print: control characters in it (a newline in an instance id)
 * come escaped as \n, \r, \t or \x1b, invalid UTF-8 bytes as \xff, C1
 * and bidirectional controls (U+202E, ...) as \u202e. Called from any
 * duro thread; must be thread-safe and must not call back into duro. */
typedef void (*duro_log_fn)(void *user, int level, const char *message);

/** Frees memory duro documented as caller-owned. NULL is a no-op.
 * @note Any thread. */
DURO_API void duro_free(void *p);

/** Milliseconds since the Unix epoch from the wall clock, as the stores
 * read it: while a test environment is open (duro_test_env_create()) its
 * virtual clock, the real time moved forward by what the environment
 * skipped or advanced. @note Any thread. */
DURO_API int64_t duro_now_ms(void);

#ifdef __cplusplus
}
#endif
#endif
