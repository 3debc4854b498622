/* test.h - duro's small test harness: a table of named tests per binary, a
 * name filter (argv[1], substring), asserts that print both values and
 * duro_errname(), deadline-based waits, and per-run temporary directories.
 * A failed CHECK on the main thread ends that test and moves to the next;
 * on another thread it records the failure and returns. */
#ifndef DURO_TEST_H
#define DURO_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "duro.h"

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

int test_run(int argc, char **argv, const test_case *tests, size_t count);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int test_failed(void); /* 1 when the current test has failed so far */

/* A directory unique to this process, removed at exit unless
 * DURO_TEST_KEEP is set. */
const char *test_tmpdir(void);
/* "<tmpdir>/<name>" in a static rotating buffer. */
const char *test_path(const char *name);
/* "sqlite:<tmpdir>/<name>" in a static rotating buffer. */
const char *test_sqlite_url(const char *name);
int64_t test_now_ms(void);
void test_sleep_ms(int64_t ms);
/* Copies the first max_lines lines of the file at path to stderr under a
 * "--- title ---" line, indented (a child process's log after a failure);
 * nothing when it cannot be opened. */
void test_print_file(const char *path, const char *title, int max_lines);

#define TEST(name) static void name(void)
#define T(name)                                                                \
    {                                                                          \
#name, name                                                            \
    }
#define TEST_MAIN(...)                                                         \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        static const test_case tests_[] = {__VA_ARGS__};                       \
        return test_run(argc, argv, tests_,                                    \
                        sizeof(tests_) / sizeof(tests_[0]));                   \
    }

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond))                                                           \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                        \
    } while (0)

#define CHECK_INT(a, op, b)                                                    \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (!(a_ op b_))                                                       \
            test_fail(__FILE__, __LINE__, "CHECK(%s %s %s): %lld vs %lld", #a, \
                      #op, #b, a_, b_);                                        \
    } while (0)

#define CHECK_EQ(a, b) CHECK_INT(a, ==, b)

#define CHECK_RC(expr, expected)                                               \
    do {                                                                       \
        int rc_ = (expr), exp_ = (expected);                                   \
        if (rc_ != exp_)                                                       \
            test_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)",  \
                      #expr, duro_errname(rc_), duro_errname(exp_),            \
                      duro_errmsg());                                          \
    } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, DURO_OK)

/* For provider calls that fill a duro_error. */
#define CHECK_PRC(expr, expected, errp)                                        \
    do {                                                                       \
        int rc_ = (expr), exp_ = (expected);                                   \
        if (rc_ != exp_)                                                       \
            test_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)",  \
                      #expr, duro_errname(rc_), duro_errname(exp_),            \
                      (errp)->message);                                        \
    } while (0)

#define CHECK_STR(a, b)                                                        \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if ((a_ == NULL) != (b_ == NULL) ||                                    \
            (a_ != NULL && strcmp(a_, b_) != 0))                               \
            test_fail(__FILE__, __LINE__,                                      \
                      "CHECK_STR(%s, %s): \"%s\" vs \"%s\"", #a, #b,           \
                      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                 \
    } while (0)

/* Polls `cond` every millisecond until it holds or timeout_ms passes; a
 * timeout fails the test. Never a sleep that must be long enough. */
#define WAIT_UNTIL(cond, timeout_ms)                                           \
    do {                                                                       \
        int64_t deadline_ = test_now_ms() + (timeout_ms);                      \
        while (!(cond)) {                                                      \
            if (test_now_ms() > deadline_) {                                   \
                test_fail(__FILE__, __LINE__,                                  \
                          "timed out after %lld ms waiting for %s",            \
                          (long long)(timeout_ms), #cond);                     \
                break;                                                         \
            }                                                                  \
            test_sleep_ms(1);                                                  \
        }                                                                      \
    } while (0)

#endif
