/* validation.h - the provider validation suite: every clause of
 * duro/provider.h as a named test, run against any provider through a
 * factory that opens a fresh empty store per test. Tests run on the main
 * thread of the harness; the racing tests start their own threads. */
#ifndef DURO_PROVIDER_VALIDATION_H
#define DURO_PROVIDER_VALIDATION_H

#include <stddef.h>
#include <stdint.h>

#include "duro/provider.h"
#include "test.h"

/* How the suite gets stores. Every open returns a fresh, empty store (the
 * suite checks); the suite closes each store it opens with close(). */
typedef struct pv_factory {
    const char *name; /* "sqlite", "postgres", "faulty(sqlite)" */
    /* A fresh empty store for the test named test_name; NULL on failure. */
    duro_provider *(*open)(void *ctx, const char *test_name);
    /* Optional (NULL: the history-cap tests are skipped, and say so): the
     * same, with a history cap of max_history events per execution. */
    duro_provider *(*open_with_max_history)(void *ctx, const char *test_name,
                                            uint64_t max_history);
    /* Optional (NULL: the cross-handle tests are skipped, and say so):
     * another handle on the store open() last gave for test_name, as a
     * second process would open it. Closed with close(), before or after
     * the first handle. */
    duro_provider *(*open_same)(void *ctx, const char *test_name);
    void (*close)(void *ctx, duro_provider *p);
    /* Optional (NULL: the fault-sweep tests are skipped, and say so): makes
     * the provider's nth_step-th storage step from now fail, with DURO_BUSY
     * (retryable) or DURO_STORAGE (not); nth_step 0 disarms. */
    void (*inject_fault)(void *ctx, duro_provider *p, uint64_t nth_step,
                         int retryable);
    size_t max_payload; /* the provider's payload maximum; 0: 1 MiB */
    void *ctx;
} pv_factory;

/** Runs every validation test, then @p extra, against @p factory with the
 * harness's conventions (argv[1] is a name filter, "--list" lists).
 * @return the process exit code. @note Main thread only. */
int pv_main(int argc, char **argv, const pv_factory *factory,
            const test_case *extra, size_t extra_count);

/* ---- helpers for tests written outside validation.c ----------------- */

/* The running test's name; set by PV_TEST. */
extern const char *pv_test_name;

/* Start and end of a PV_TEST: both close the stores still open (those of a
 * test that failed, or that the test did not close itself). */
void pv_begin(const char *test_name);
void pv_end(void);

/* A test that knows its name (for the factory) and runs through the
 * harness. Use instead of TEST() for tests that call pv_open(). */
#define PV_TEST(name)                                                          \
    static void name##_body(void);                                             \
    static void name(void)                                                     \
    {                                                                          \
        pv_begin(#name);                                                       \
        name##_body();                                                         \
        pv_end();                                                              \
    }                                                                          \
    static void name##_body(void)

/** A fresh empty store from the factory for the running test; fails the
 * test when the factory cannot open one or it is not empty. Stores left open
 * by a failed test are closed by the next pv_open() and at exit. */
duro_provider *pv_open(void);
duro_provider *pv_open_with_max_history(uint64_t max_history);
/* Another handle on the running test's store (factory->open_same). */
duro_provider *pv_open_same(void);
void pv_close(duro_provider *p);
const pv_factory *pv_factory_get(void);

/* A snapshot of everything a store holds, built only through provider
 * methods: instances (every info field), every execution's history (every
 * event field), latest execution ids, message counts per instance and in
 * total on both queues, and the contents of every visible message and
 * worker row (fetched and abandoned at once, which raises their fetch
 * counts by one per snapshot). Lock tokens are left out. */
typedef struct pv_snapshot {
    char *text; /* canonical dump, one fact per line */
    size_t len, cap;
    uint32_t *attempts; /* fetch counts, in dump order */
    size_t attempt_count, attempt_cap;
} pv_snapshot;

void pv_snapshot_take(duro_provider *p, pv_snapshot *s);
void pv_snapshot_free(pv_snapshot *s);
/* Takes a new snapshot and fails the test unless it equals *s (fetch counts
 * one higher, from the snapshot's own fetches); *s becomes the new one. */
void pv_expect_unchanged_at(duro_provider *p, pv_snapshot *s, const char *file,
                            int line);
#define PV_EXPECT_UNCHANGED(p, s)                                              \
    pv_expect_unchanged_at(p, s, __FILE__, __LINE__)

/* Fails unless rc, err->code and err->retryable are as expected. */
#define CHECK_PFAIL(expr, expected, retry, errp)                               \
    do {                                                                       \
        int prc_ = (expr), pexp_ = (expected), pretry_ = (retry);              \
        if (prc_ != pexp_)                                                     \
            test_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)",  \
                      #expr, duro_errname(prc_), duro_errname(pexp_),          \
                      (errp)->message);                                        \
        else if ((errp)->code != prc_ || (errp)->retryable != pretry_)         \
            test_fail(__FILE__, __LINE__,                                      \
                      "%s: err is {%s, retryable %d}, expected {%s, "          \
                      "retryable %d} (%s)",                                    \
                      #expr, duro_errname((errp)->code), (errp)->retryable,    \
                      duro_errname(prc_), pretry_, (errp)->message);           \
    } while (0)

#endif
