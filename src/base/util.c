/* util.c - clocks (the wall clock with the virtual clock's offset),
 * sleeping, logging to a sink, random tokens, and UTF-8: the one validator
 * of duro's text rule, cuts and scrubs. Pure helpers; any thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

/* The virtual clock's offset: one relaxed load on every reading of the
 * wall clock, 0 outside test environments. */
static _Atomic int64_t clock_offset_ms;

int64_t duro__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 +
           atomic_load_explicit(&clock_offset_ms, memory_order_relaxed);
}

int64_t duro__clock_offset(void)
{
    return atomic_load_explicit(&clock_offset_ms, memory_order_relaxed);
}

void duro__clock_set_offset(int64_t ms)
{
    atomic_store_explicit(&clock_offset_ms, ms, memory_order_relaxed);
}

int64_t duro_now_ms(void)
{
    return duro__wall_ms();
}

int64_t duro__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t duro__mono_ms(void)
{
    return duro__mono_ns() / 1000000;
}

void duro__sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void duro__deadline_ts(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    if (ms < 0)
        ms = 0;
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

int duro__cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

static const char *level_name(int level)
{
    static const char *const names[] = {"trace", "debug", "info",
                                        "warn",  "error", "off"};
    if (level < 0 || level > DURO_LOG_OFF)
        return "?";
    return names[level];
}

void duro__log_stderr(void *user, int level, const char *message)
{
    (void)user;
    fprintf(stderr, "duro %s: %s\n", level_name(level), message);
}

/* 1 when code point @p cp is escaped in a log line (see
 * duro__log_escape). */
static int log_escaped(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c ||
           cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

size_t duro__log_escape(const char *in, char *out, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    if (size == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    /* room for the longest escape (6 bytes), then "..." and the NUL */
    while (*p != '\0' && o + 10 < size) {
        size_t n = duro__utf8_len(p);
        uint32_t cp = p[0];
        if (n > 1) {
            cp = p[0] & (0x7fu >> n);
            for (size_t i = 1; i < n; i++)
                cp = (cp << 6) | (p[i] & 0x3fu);
        }
        if (n == 0 || log_escaped(cp)) {
            out[o++] = '\\';
            if (n != 0 && cp == '\n') {
                out[o++] = 'n';
            } else if (n != 0 && cp == '\r') {
                out[o++] = 'r';
            } else if (n != 0 && cp == '\t') {
                out[o++] = 't';
            } else if (n <= 1) {
                /* a C0 control, DEL, or a byte of invalid UTF-8 */
                out[o++] = 'x';
                out[o++] = hex[p[0] >> 4];
                out[o++] = hex[p[0] & 15];
            } else {
                out[o++] = 'u';
                for (int shift = 12; shift >= 0; shift -= 4)
                    out[o++] = hex[(cp >> shift) & 15];
            }
            p += n == 0 ? 1 : n;
        } else {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        }
    }
    if (*p != '\0' && o + 4 <= size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return o;
}

void duro__vlog(const duro__logger *lg, int level, const char *fmt, va_list ap)
{
    if (lg == NULL || level < lg->level || level >= DURO_LOG_OFF)
        return;
    /* Escaped here, once, for every sink: a log line quotes instance ids,
     * names and messages that anyone who can start an instance chose, and
     * a newline in one must not forge a second line, nor a bidirectional
     * control reorder the line on a terminal. */
    char buf[1024], line[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    duro__log_escape(buf, line, sizeof(line));
    if (lg->fn != NULL)
        lg->fn(lg->user, level, line);
    else
        duro__log_stderr(NULL, level, line);
}

void duro__log(const duro__logger *lg, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    duro__vlog(lg, level, fmt, ap);
    va_end(ap);
}

/* xoshiro256** seeded per thread from getrandom(). */
static _Thread_local uint64_t rng_state[4];
static _Thread_local int rng_seeded;

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t duro__random_u64(void)
{
    if (!rng_seeded) {
        if (getrandom(rng_state, sizeof(rng_state), 0) !=
            (ssize_t)sizeof(rng_state)) {
            uint64_t seed = (uint64_t)duro__mono_ns() ^
                            ((uint64_t)getpid() << 32) ^
                            (uint64_t)(uintptr_t)&rng_state;
            for (int i = 0; i < 4; i++) {
                seed += 0x9E3779B97F4A7C15ull;
                uint64_t z = seed;
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                rng_state[i] = z ^ (z >> 31);
            }
        }
        rng_seeded = 1;
    }
    uint64_t *s = rng_state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void duro__random_token(char buf[33])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t a = duro__random_u64(), b = duro__random_u64();
    for (int i = 0; i < 16; i++) {
        buf[i] = hex[(a >> (i * 4)) & 15];
        buf[16 + i] = hex[(b >> (i * 4)) & 15];
    }
    buf[32] = '\0';
}

size_t duro__utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

size_t duro__utf8_scrub(char *s)
{
    unsigned char *in = (unsigned char *)s, *out = in;
    while (*in != '\0') {
        size_t k = duro__utf8_len(in);
        if (k == 0) {
            in++;
            continue;
        }
        memmove(out, in, k);
        out += k;
        in += k;
    }
    *out = '\0';
    return (size_t)(out - (unsigned char *)s);
}

size_t duro__utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    if (n < max)
        return n; /* all of it */
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

size_t duro__utf8_check(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c >= 0x01 && c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned min;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            min = 0x10000;
        } else {
            return i; /* NUL, a continuation byte, 0xc0, 0xc1, 0xf5.. */
        }
        if (n - i < len)
            return i; /* cut short */
        unsigned cp = c & (0x7fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (p[i + k] & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += len;
    }
    return n;
}

const char *duro__utf8_problem(const char *s, size_t at, char *buf, size_t size)
{
    snprintf(buf, size, "is not valid UTF-8 at byte %zu (0x%02X)", at,
             (unsigned)(unsigned char)s[at]);
    return buf;
}

int duro__check_utf8(const char *what, const char *s)
{
    if (s == NULL)
        return DURO_OK;
    size_t n = strlen(s), at = duro__utf8_check(s, n);
    if (at == n)
        return DURO_OK;
    char why[64];
    return duro__fail(DURO_INVALID, "%s %s", what,
                      duro__utf8_problem(s, at, why, sizeof(why)));
}

int duro__check_utf8_err(const char *what, const char *s, duro_error *err)
{
    if (s == NULL)
        return DURO_OK;
    size_t n = strlen(s), at = duro__utf8_check(s, n);
    if (at == n)
        return DURO_OK;
    char why[64];
    return duro_error_set(err, DURO_INVALID, 0, "%s %s", what,
                          duro__utf8_problem(s, at, why, sizeof(why)));
}

void duro__wake_wait(_Atomic int *word, int value)
{
    if (atomic_load_explicit(word, memory_order_acquire) != value)
        return;
    /* EAGAIN: the word changed before the kernel looked; EINTR: a signal;
     * either way the caller looks at the word again */
    (void)syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL,
                  0);
}

void duro__wake_one(_Atomic int *word)
{
    (void)syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
