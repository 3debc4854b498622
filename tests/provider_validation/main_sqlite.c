/* main_sqlite.c - runs the provider validation suite on the SQLite provider:
 * every test on a fresh database file, faults injected at SQLite steps
 * through the provider's test hook. Adds the checks that depend on SQLite
 * URLs. Main thread. */
#include <stdlib.h>

#include "providers/sqlite/sqlite_provider.h"
#include "validation.h"

static duro_provider *open_url(const char *test_name, const char *params)
{
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s.db%s", test_path(test_name), params);
    duro_provider *p = NULL;
    duro_error e;
    if (duro_provider_open(url, &p, &e) != DURO_OK) {
        fprintf(stderr, "  cannot open %s: %s (%s)\n", url,
                duro_errname(e.code), e.message);
        return NULL;
    }
    return p;
}

static duro_provider *sqlite_open(void *ctx, const char *test_name)
{
    (void)ctx;
    return open_url(test_name, "");
}

static duro_provider *sqlite_open_with_max_history(void *ctx,
                                                   const char *test_name,
                                                   uint64_t max_history)
{
    (void)ctx;
    char params[64];
    snprintf(params, sizeof(params), "?max_history=%llu",
             (unsigned long long)max_history);
    return open_url(test_name, params);
}

/* The same file again: a second handle, as another process would have. */
static duro_provider *sqlite_open_same(void *ctx, const char *test_name)
{
    (void)ctx;
    return open_url(test_name, "");
}

static void sqlite_close(void *ctx, duro_provider *p)
{
    (void)ctx;
    duro_provider_close(p);
}

static void sqlite_inject_fault(void *ctx, duro_provider *p, uint64_t nth_step,
                                int retryable)
{
    (void)ctx;
    duro__sqlite_inject_fault(p, nth_step, retryable);
}

/* URLs are provider-specific, so this one lives here. */
PV_TEST(malformed_sqlite_urls_fail_bad_url)
{
    const char *bad[] = {
        "sqlite:",
        "sqlite:x.db?",
        "sqlite:x.db?max_history",
        "sqlite:x.db?max_history=ten",
        "sqlite:x.db?max_history=0",
        "sqlite:x.db?no_such_param=1",
        "sqlite:x.db?synchronous=sometimes",
        "sqlite:x.db?max_history=5&max_history=6",
        "sqlite:x.db?busy_timeout_ms=-1",
        "sqlite:x.db?max_payload=",
        "sqlite:x.db?&",
        "sqlitex:x.db",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        duro_provider *p = (duro_provider *)&bad; /* must be reset */
        duro_error e;
        int rc = duro_provider_open(bad[i], &p, &e);
        CHECK_MSG(rc == DURO_BAD_URL,
                  "'%s' opened with %s, expected "
                  "DURO_BAD_URL (%s)",
                  bad[i], duro_errname(rc), e.message);
        CHECK_EQ(e.code, DURO_BAD_URL);
        CHECK_EQ(e.retryable, 0);
        CHECK(p == NULL);
    }
    /* The same path with good parameters opens. */
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s?max_history=5&synchronous=full",
             test_path("good.db"));
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
    CHECK(p != NULL);
    duro_provider_close(p);
}

int main(int argc, char **argv)
{
    static const pv_factory factory = {
        .name = "sqlite",
        .open = sqlite_open,
        .open_with_max_history = sqlite_open_with_max_history,
        .open_same = sqlite_open_same,
        .close = sqlite_close,
        .inject_fault = sqlite_inject_fault,
        .max_payload = 0, /* the default, 1 MiB */
        .ctx = NULL,
    };
    static const test_case extra[] = {T(malformed_sqlite_urls_fail_bad_url)};
    return pv_main(argc, argv, &factory, extra,
                   sizeof(extra) / sizeof(extra[0]));
}
