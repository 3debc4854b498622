/* main_postgres.c - runs the provider validation suite on the PostgreSQL
 * provider: every test on a fresh schema (pv_<pid>_<n>) of the server that
 * DURO_TEST_PG_URL names, faults injected at statements through the
 * provider's test hook. Adds the checks that depend on PostgreSQL URLs and
 * on concurrent schema creation. Without DURO_TEST_PG_URL it prints why and
 * exits 0 without running anything. Main thread. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/postgres/pg_provider.h"
#include "validation.h"

#define SCHEMAS_MAX 4096

static const char *base_url;
static char *schemas[SCHEMAS_MAX]; /* created by this run, dropped at exit */
static size_t schema_count;
static char last_test[256];
static char last_schema[64];

/* base_url with extra parameters appended ("schema=x&max_history=5"). */
static void url_with(char *out, size_t size, const char *params)
{
    snprintf(out, size, "%s%s%s", base_url,
             strchr(base_url, '?') != NULL ? "&" : "?", params);
}

static duro_provider *open_schema(const char *schema, const char *extra)
{
    char params[256], url[2048];
    snprintf(params, sizeof(params), "schema=%s%s", schema, extra);
    url_with(url, sizeof(url), params);
    duro_provider *p = NULL;
    duro_error e;
    if (duro_provider_open(url, &p, &e) != DURO_OK) {
        fprintf(stderr, "  cannot open schema %s: %s (%s)\n", schema,
                duro_errname(e.code), e.message);
        return NULL;
    }
    return p;
}

static const char *new_schema(const char *test_name)
{
    static _Atomic unsigned counter;
    snprintf(last_schema, sizeof(last_schema), "pv_%ld_%u", (long)getpid(),
             atomic_fetch_add(&counter, 1));
    snprintf(last_test, sizeof(last_test), "%s", test_name);
    if (schema_count < SCHEMAS_MAX)
        schemas[schema_count++] = strdup(last_schema);
    return last_schema;
}

static duro_provider *pg_open(void *ctx, const char *test_name)
{
    (void)ctx;
    return open_schema(new_schema(test_name), "");
}

static duro_provider *pg_open_with_max_history(void *ctx, const char *test_name,
                                               uint64_t max_history)
{
    (void)ctx;
    char extra[64];
    snprintf(extra, sizeof(extra), "&max_history=%llu",
             (unsigned long long)max_history);
    return open_schema(new_schema(test_name), extra);
}

/* The schema open() last gave for test_name: a second handle, as another
 * process would have. */
static duro_provider *pg_open_same(void *ctx, const char *test_name)
{
    (void)ctx;
    if (strcmp(test_name, last_test) != 0)
        return NULL;
    return open_schema(last_schema, "");
}

static void pg_close(void *ctx, duro_provider *p)
{
    (void)ctx;
    duro_provider_close(p);
}

static void pg_inject_fault(void *ctx, duro_provider *p, uint64_t nth_step,
                            int retryable)
{
    (void)ctx;
    duro__pg_inject_fault(p, nth_step, retryable);
}

/* A libpq connection to the test server (base_url without duro's
 * parameters: the test URL carries none). */
static PGconn *admin(void)
{
    PGconn *c = PQconnectdb(base_url);
    if (PQstatus(c) == CONNECTION_OK)
        PQclear(PQexec(c, "SET client_min_messages TO warning"));
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "  cannot connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

static int64_t query_int(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int64_t v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else
        fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return v;
}

static void drop_schemas(void)
{
    if (getenv("DURO_TEST_KEEP") != NULL || schema_count == 0)
        return;
    PGconn *c = admin();
    for (size_t i = 0; c != NULL && i < schema_count; i++) {
        char sql[128];
        snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
                 schemas[i]);
        PQclear(PQexec(c, sql));
    }
    PQfinish(c);
    for (size_t i = 0; i < schema_count; i++)
        free(schemas[i]);
    schema_count = 0;
}

/* URLs are provider-specific, so these live here. */
PV_TEST(malformed_postgres_urls_fail_bad_url)
{
    const char *bad[] = {
        "postgres://h/db?schema=",
        "postgres://h/db?schema=1abc",
        "postgres://h/db?schema=a-b",
        "postgres://h/db?schema=a%22b",
        "postgres://h/db?schema=a&schema=b",
        "postgres://h/db?pool=0",
        "postgres://h/db?pool=65",
        "postgres://h/db?pool=x",
        "postgres://h/db?max_history=0",
        "postgres://h/db?max_payload=",
        "postgres://h/db?&",
        "postgres://h/db?schema",
        "postgres://h/db?no_such_libpq_option=1",
        "postgresx://h/db",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        duro_provider *p = (duro_provider *)&bad; /* must be reset */
        duro_error e;
        int rc = duro_provider_open(bad[i], &p, &e);
        CHECK_MSG(rc == DURO_BAD_URL,
                  "'%s' opened with %s, expected DURO_BAD_URL (%s)", bad[i],
                  duro_errname(rc), e.message);
        CHECK_EQ(e.retryable, 0);
        CHECK(p == NULL);
    }
}

/* A password never reaches a message, whether the URL is malformed, the
 * server refuses it, or nothing listens. */
PV_TEST(passwords_never_appear_in_messages)
{
    const char *urls[] = {
        "postgres://alice:s3cr3t@127.0.0.1:1/db?schema=bad-name",
        "postgres://alice:s3cr3t@127.0.0.1:1/db?connect_timeout=2",
        "postgresql://alice@127.0.0.1:1/db?password=s3cr3t&connect_timeout=2",
    };
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        duro_provider *p = NULL;
        duro_error e;
        int rc = duro_provider_open(urls[i], &p, &e);
        CHECK(rc != DURO_OK);
        CHECK_MSG(strstr(e.message, "s3cr3t") == NULL,
                  "the password is in '%s'", e.message);
        CHECK_MSG(strstr(e.message, "***") != NULL,
                  "the masked URL is not named in '%s'", e.message);
        duro_provider_close(p);
    }
}

/* Several processes (threads here, each with its own provider and
 * connections) opening a fresh schema at once: every open succeeds and the
 * schema is migrated once. */
#define OPENERS 8

typedef struct opener {
    const char *schema;
    _Atomic int *go;
    duro_provider *p;
} opener;

static void *opener_main(void *arg)
{
    opener *o = arg;
    while (!atomic_load(o->go))
        ;
    o->p = open_schema(o->schema, "&pool=1");
    return NULL;
}

PV_TEST(concurrent_opens_of_a_fresh_schema_migrate_once)
{
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    _Atomic int go;
    atomic_init(&go, 0);
    opener o[OPENERS];
    pthread_t t[OPENERS];
    for (int i = 0; i < OPENERS; i++) {
        o[i] = (opener){.schema = schema, .go = &go, .p = NULL};
        CHECK_EQ(pthread_create(&t[i], NULL, opener_main, &o[i]), 0);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < OPENERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < OPENERS; i++) {
        CHECK_MSG(o[i].p != NULL, "opener %d failed", i);
        duro_provider_close(o[i].p);
    }
    PGconn *c = admin();
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 1);
    PQfinish(c);
}

/* A connection the server dropped (here: pg_terminate_backend) fails the
 * call that finds it, retryably and changing nothing, and is reconnected
 * for the next one. */
PV_TEST(a_lost_connection_fails_retryably_and_is_reopened)
{
    char extra[96], app[64], sql[256];
    snprintf(app, sizeof(app), "duro_pv_kill_%ld", (long)getpid());
    snprintf(extra, sizeof(extra), "&pool=1&application_name=%s", app);
    duro_provider *p = open_schema(new_schema(pv_test_name), extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "a", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    PGconn *c = admin();
    CHECK(c != NULL);
    if (c == NULL) {
        duro_provider_close(p);
        return;
    }
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    CHECK_EQ(query_int(c, sql), 1);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    WAIT_UNTIL(query_int(c, sql) == 0, 5000);
    st.instance_id = "b";
    int rc = p->enqueue_for_orchestrator(p, &st, 0, &e);
    CHECK_MSG(rc == DURO_STORAGE && e.retryable == 1,
              "after the connection was dropped: %s, retryable %d (%s)",
              duro_errname(rc), e.retryable, e.message);
    /* reconnected: the same call works now, and only once */
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_ALREADY_EXISTS,
              &e);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->list_instances(p, NULL, &list, &e), DURO_OK, &e);
    CHECK(list != NULL && list->count == 2);
    duro_instance_list_free(list);
    PQfinish(c);
    duro_provider_close(p);
}

int main(int argc, char **argv)
{
    base_url = getenv("DURO_TEST_PG_URL");
    int listing = argc > 1 && strcmp(argv[1], "--list") == 0;
    if ((base_url == NULL || base_url[0] == '\0') && !listing) {
        printf("test_provider_postgres: DURO_TEST_PG_URL is not set; nothing "
               "run (set it to a libpq URI of a throwaway server)\n");
        return 0;
    }
    static const pv_factory factory = {
        .name = "postgres",
        .open = pg_open,
        .open_with_max_history = pg_open_with_max_history,
        .open_same = pg_open_same,
        .close = pg_close,
        .inject_fault = pg_inject_fault,
        .max_payload = 0, /* the default, 1 MiB */
        .ctx = NULL,
    };
    static const test_case extra[] = {
        T(malformed_postgres_urls_fail_bad_url),
        T(passwords_never_appear_in_messages),
        T(concurrent_opens_of_a_fresh_schema_migrate_once),
        T(a_lost_connection_fails_retryably_and_is_reopened)};
    int rc =
        pv_main(argc, argv, &factory, extra, sizeof(extra) / sizeof(extra[0]));
    drop_schemas();
    return rc;
}
