/* base.h - internal helpers shared by every layer: the one allocator (with an
 * out-of-memory injection hook for tests), thread-local error detail, clocks,
 * logging and small string utilities. Everything here is thread-safe. */
#ifndef DURO_BASE_H
#define DURO_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "duro/common.h"
#include "duro/provider.h"

/* Allocation. Every allocation of the library goes through these, so tests
 * can make the n-th one fail. Sizes are overflow-checked: a request whose
 * size arithmetic would wrap returns NULL. */
void *duro__malloc(size_t size);
void *duro__calloc(size_t count, size_t size);
void *duro__realloc(void *p, size_t size);
void duro__free(void *p);
char *duro__strdup(const char *s); /* NULL in, NULL out */
char *duro__strndup(const char *s, size_t n);
char *duro__sprintf(const char *fmt, ...) DURO_PRINTF(1, 2);
char *duro__vsprintf(const char *fmt, va_list ap) DURO_PRINTF(1, 0);
/* Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid
 * (overlong, a surrogate, past U+10FFFF, cut short). */
size_t duro__utf8_len(const unsigned char *s);
/* Drops, in place, every byte of s that is not part of a valid UTF-8
 * sequence, and returns the new length. For text duro composes from parts
 * cut to a byte count ("%.200s" may split a character) before it is stored:
 * PostgreSQL refuses invalid UTF-8 (22021), and an ack that always fails so
 * never commits. */
size_t duro__utf8_scrub(char *s);
/* The longest prefix of s of at most max bytes that ends on a character
 * boundary, for "%.*s" (a plain "%.Ns" may split a character). */
size_t duro__utf8_cut(const char *s, size_t max);
/* duro's one rule for text: every string it stores (ids, names, inputs,
 * outputs, payloads, errors, custom statuses, reasons) is valid UTF-8.
 * Returns the offset of the first byte of s[0..n) that does not begin a
 * valid UTF-8 sequence - a stray continuation byte, an overlong form, a
 * surrogate (U+D800..U+DFFF), a code point past U+10FFFF, a sequence cut
 * short by n, or a NUL byte (duro's strings end at their NUL, and
 * PostgreSQL's text cannot hold one) - or n when all of it is valid.
 * Pure; any thread. */
size_t duro__utf8_check(const char *s, size_t n);
/* For the API: DURO_OK when s (NUL-terminated) is NULL or valid UTF-8;
 * otherwise DURO_INVALID with duro_errmsg() set to "<what> is not valid
 * UTF-8 at byte N (0xXX)". */
int duro__check_utf8(const char *what, const char *s);
/* The same into err (for providers); DURO_OK or DURO_INVALID. */
int duro__check_utf8_err(const char *what, const char *s, duro_error *err);
/* "is not valid UTF-8 at byte N (0xXX)" for s, whose first invalid byte is
 * at offset `at`, into buf[size]; returns buf. */
const char *duro__utf8_problem(const char *s, size_t at, char *buf,
                               size_t size);
/* Bytes an arena holds (its blocks, headers included); 0 for NULL. */
size_t duro__arena_bytes(const duro_arena *a);

/* Growable arrays: appends one zeroed element of elem_size to *data (count,
 * cap updated); returns it, or NULL when out of memory (nothing changed). */
/* A growing string for literals bound as one statement parameter. Starts
 * zeroed; free `s` with duro__free. After a failed allocation `oom` is set
 * and appends do nothing. */
typedef struct duro__strbuf {
    char *s;
    size_t len, cap;
    int oom;
} duro__strbuf;

void duro__strbuf_add(duro__strbuf *b, const char *v, size_t n);
/* A JSON string: quotes, backslashes and control characters escaped; other
 * bytes, UTF-8 or not, as they are. */
void duro__strbuf_json(duro__strbuf *b, const char *v);
/* An element of a PostgreSQL array literal, always quoted ("..." with
 * quotes and backslashes escaped), so NULL, spaces, braces and commas in
 * it are data. */
void duro__strbuf_quoted(duro__strbuf *b, const char *v);
/* Empties the buffer and opens a literal with `bracket` ('[' or '{'). */
void duro__strbuf_open(duro__strbuf *b, char bracket);
/* A comma, unless the buffer holds only its opening bracket. */
void duro__strbuf_sep(duro__strbuf *b);

void *duro__vec_push(void **data, size_t *count, size_t *cap, size_t elem_size);

/* The largest block any duro allocator hands out (half the address space).
 * Larger requests can never succeed; they return NULL at once, before any
 * size arithmetic that could wrap. */
#define DURO__ALLOC_MAX ((size_t)PTRDIFF_MAX / 2)

/* Makes the allocation `n` calls from now fail (n >= 1), and every one after
 * it when `sticky`; n == 0 turns injection off. For tests. */
void duro__alloc_fail_after(uint64_t n, int sticky);

/* Thread-local detail of the last failure, read by duro_errmsg(). Returns rc
 * so a failing call can `return duro__fail(rc, "...")`. */
int duro__fail(int rc, const char *fmt, ...) DURO_PRINTF(2, 3);
/* Copies a provider error into the thread-local detail; returns err->code. */
int duro__fail_from(const duro_error *err);
void duro__errmsg_clear(void);

/* a + b for times and durations in ms, clamped to INT64_MAX (INT64_MIN)
 * instead of overflowing: a caller's "forever" duration (INT64_MAX) added
 * to a clock becomes a deadline that never comes, not a negative one that
 * is already past. */
static inline int64_t duro__add_ms(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

/* Clocks. */
/* CLOCK_REALTIME, ms since the epoch, plus the virtual clock's offset: the
 * one clock the stores compare visibility and lock expiry with, and turns
 * stamp their time from. */
int64_t duro__wall_ms(void);
/* The virtual clock (a test environment's, src/runtime/test_env.c): an
 * offset added to duro__wall_ms() in the whole process, 0 unless a test
 * environment moved it. Only ever grows while one is open; it goes back to
 * 0 when that closes. Monotonic clocks stay real: they time waits, grace
 * periods and lock renewals, which a test waits through for real. */
int64_t duro__clock_offset(void);
void duro__clock_set_offset(int64_t ms);
int64_t duro__mono_ms(void); /* CLOCK_MONOTONIC, ms */
int64_t duro__mono_ns(void);
void duro__sleep_ms(int64_t ms);
/* An absolute CLOCK_MONOTONIC timespec `ms` from now, for
 * pthread_cond_timedwait on condition variables created with
 * duro__cond_init_monotonic(). */
struct timespec;
void duro__deadline_ts(struct timespec *ts, int64_t ms);
#include <pthread.h>
int duro__cond_init_monotonic(pthread_cond_t *c);

/* One waiting thread on a word of its own (Linux futex): wake_wait sleeps
 * while *word holds `value` (returning at once when it does not, and
 * possibly spuriously: loop on the word); wake_one wakes the thread
 * sleeping on word, if any. The word is the whole protocol: its writer
 * publishes with a release store before wake_one, its waiter reads with an
 * acquire load. No lock is involved, so a waiter woken does not go back to
 * sleep on a mutex its waker still holds (a condition variable's wait
 * re-takes one), and wake_one may run after the waiter saw the word change
 * and returned: waking an address nobody sleeps on is harmless. */
void duro__wake_wait(_Atomic int *word, int value);
void duro__wake_one(_Atomic int *word);

/* Logging: one process-wide default sink (stderr) unless a runtime sets its
 * own. A duro__logger is embedded in the handles that log. */
typedef struct duro__logger {
    int level;
    duro_log_fn fn;
    void *user;
} duro__logger;

void duro__log(const duro__logger *lg, int level, const char *fmt, ...)
    DURO_PRINTF(3, 4);
void duro__vlog(const duro__logger *lg, int level, const char *fmt, va_list ap)
    DURO_PRINTF(3, 0);
void duro__log_stderr(void *user, int level, const char *message);
/* @p in as one safe line in out[size] (size > 0): C0 controls and DEL as
 * \n, \r, \t or \x1b, a byte of invalid UTF-8 as \xff, the C1 controls
 * U+0080..U+009F, the bidirectional controls U+061C, U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069 and the separators U+2028, U+2029 as
 * \u202e; what does not fit is cut on a character boundary and ends in
 * "...". Returns the length written. duro__vlog passes every message
 * through it before any sink sees it. */
size_t duro__log_escape(const char *in, char *out, size_t size);

/* 64-bit random numbers from a thread-local generator seeded from the OS. */
uint64_t duro__random_u64(void);
/* A fresh random token of 32 hex characters (+ NUL) in buf[33]. */
void duro__random_token(char buf[33]);

/* Bytes of a name, id or version: what every provider stores (the input
 * rules of duro/provider.h), so longer ones are refused up front. */
#define DURO__NAME_MAX 1024

#define DURO__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define DURO__MIN(a, b) ((a) < (b) ? (a) : (b))
#define DURO__MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
