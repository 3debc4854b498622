/* main_postgres.c - runs the provider validation suite on the PostgreSQL
 * provider: every test on a fresh schema (pv_<pid>_<n>) of the test server
 * (pg_test_url(): DURO_TEST_PG_URL, else the CTest fixture's throwaway
 * cluster), faults injected at statements through the provider's test hook.
 * Adds the checks that depend on PostgreSQL URLs and on concurrent schema
 * creation. Without a server it says why and exits 77 (skipped). Main
 * thread. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg_util.h"
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
    char extra[96], app[64], sql[512];
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
    /* the pool's connection and the listener's */
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(pid::text, ',') FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    PGresult *r = PQexec(c, sql);
    char pids[256] = "";
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(pids, sizeof(pids), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    CHECK(pids[0] != '\0');
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE pid IN (%s)",
             pids);
    CHECK(query_int(c, sql) >= 1);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE pid IN (%s)", pids);
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

/* One turn, one activity and the final turn of instance `id`. */
static void run_cycle(duro_provider *p, const char *id)
{
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    duro_event ev[2] = {
        {.event_id = 1,
         .kind = DURO_EVENT_ORCHESTRATION_STARTED,
         .name = "orch"},
        {.event_id = 2, .kind = DURO_EVENT_ACTIVITY_SCHEDULED, .name = "act"}};
    duro_work_item act = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                          .instance_id = id,
                          .execution_id = 1,
                          .source_id = 2,
                          .name = "act"};
    duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                  .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = 2,
                         .worker_items = &act,
                         .worker_item_count = 1,
                         .meta = &running};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 60000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    if (w == NULL)
        return;
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 60000, &e), DURO_OK,
              &e);
    duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                           .instance_id = id,
                           .execution_id = 1,
                           .source_id = 2,
                           .payload = "42"};
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
    duro_worker_item_free(w);
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    duro_event fin[2] = {{.event_id = 3,
                          .kind = DURO_EVENT_ACTIVITY_COMPLETED,
                          .source_event_id = 2,
                          .payload = "42"},
                         {.event_id = 4,
                          .kind = DURO_EVENT_ORCHESTRATION_COMPLETED,
                          .payload = "42"}};
    duro_instance_meta completed = {.status = DURO_STATUS_COMPLETED,
                                    .output = "42"};
    duro_orch_ack last = {.execution_id = 1,
                          .history_delta = fin,
                          .history_delta_count = 2,
                          .meta = &completed};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &last, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, id, 0, &h, &e), DURO_OK, &e);
    CHECK(h != NULL && h->count == 4);
    duro_history_free(h);
}

/* A turn's events go in one statement as array literals: text that looks
 * like the literal's syntax (quotes, backslashes, braces, commas, the word
 * NULL, an empty string, newlines, non-ASCII) comes back byte for byte,
 * NULL stays NULL, and every integer column keeps its value. */
PV_TEST(many_events_of_a_turn_round_trip_exactly)
{
    duro_provider *p = pv_open(); /* closed by the suite */
    CHECK(p != NULL);
    if (p == NULL)
        return;
    static const char *const texts[] = {"\"quoted\"",
                                        "back\\slash\\",
                                        "{braces}",
                                        "a,b",
                                        "NULL",
                                        "",
                                        "line\nbreak\ttab",
                                        "caf\xc3\xa9 \xe2\x82\xac",
                                        "} \" , {\\"};
    enum { N = sizeof(texts) / sizeof(texts[0]) };
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "arr", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    duro_event ev[N + 1];
    memset(ev, 0, sizeof(ev));
    ev[0] = (duro_event){.event_id = 1,
                         .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                         .name = "orch",
                         .timestamp_ms = 1234567890123};
    for (int i = 0; i < N; i++)
        ev[i + 1] = (duro_event){.event_id = (uint64_t)i + 2,
                                 .kind = DURO_EVENT_EVENT_RAISED,
                                 .name = texts[i],
                                 .payload = texts[(i + 1) % N],
                                 .error = i % 2 ? NULL : texts[(i + 2) % N],
                                 .reason = texts[(i + 3) % N],
                                 .source_event_id = (uint64_t)i * 7,
                                 .timestamp_ms = 1000 + i,
                                 .category = i % 3,
                                 .fire_at_ms = -1 - i,
                                 .attempt = (uint32_t)i,
                                 .flags = (uint32_t)i * 3};
    duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                  .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = N + 1,
                         .meta = &running};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "arr", 0, &h, &e), DURO_OK, &e);
    CHECK(h != NULL && h->count == N + 1);
    for (size_t i = 0; h != NULL && i < h->count && i < N + 1; i++) {
        const duro_event *a = &h->events[i], *b = &ev[i];
        CHECK_EQ(a->event_id, b->event_id);
        CHECK_EQ(a->kind, b->kind);
        CHECK_EQ(a->source_event_id, b->source_event_id);
        CHECK_EQ(a->timestamp_ms, b->timestamp_ms);
        CHECK_EQ(a->category, b->category);
        CHECK_EQ(a->fire_at_ms, b->fire_at_ms);
        CHECK_EQ(a->attempt, b->attempt);
        CHECK_EQ(a->flags, b->flags);
        CHECK_STR(a->name, b->name);
        CHECK(a->payload == NULL
                  ? b->payload == NULL
                  : b->payload && !strcmp(a->payload, b->payload));
        CHECK(a->error == NULL ? b->error == NULL
                               : b->error && !strcmp(a->error, b->error));
        CHECK(a->reason == NULL ? b->reason == NULL
                                : b->reason && !strcmp(a->reason, b->reason));
        CHECK(a->version == NULL && a->requested_by == NULL);
    }
    duro_history_free(h);
}

/* Statements are prepared once per connection and reused: a second cycle
 * of the same calls prepares nothing. */
PV_TEST(statements_are_prepared_once_per_connection)
{
    duro_provider *p = open_schema(new_schema(pv_test_name), "&pool=1");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    run_cycle(p, "a");
    uint64_t after_first = duro__pg_statements_prepared(p);
    CHECK(after_first > 0);
    run_cycle(p, "b");
    CHECK_EQ(duro__pg_statements_prepared(p), after_first);
    duro_provider_close(p);
}

/* The claims and every lookup by token or key go through an index: with
 * sequential scans off, the generic plan of each statement (prepared as
 * the provider prepares it, every parameter text) has no Seq Scan. */
PV_TEST(claims_and_lookups_use_indexes)
{
    static const struct {
        const char *name;
        const char *args;
    } cases[] = {
        {"READY_CLAIM", "('0', 'x', '0')"},
        {"READY_HOLDER_CURRENT", "('1', 't')"},
        {"READY_ACK_SETTLE", "('i', 't', '1')"},
        {"READY_RENEW", "('1', 't', '0', '0')"},
        {"READY_SET", "('1', '0', '0')"},
        {"OQ_MIN_VISIBLE", "('i')"},
        {"OQ_DELETE_EXECUTION", "('i', '1')"},
        {"WQ_FETCH", "('x', '0', '0')"},
        {"WQ_ACK", "('1', 't')"},
        {"WQ_ACK_COMPLETE",
         "('1', 'i', '0', '0', 'n', 'v', 'p', 'e', '0', 'r', 'b', 'pi', '0', "
         "'0', '0', '0', '0', '0', '0', '1', 't')"},
        {"WQ_ACK_COMPLETE_FETCH",
         "('1', 'i', '0', '0', 'n', 'v', 'p', 'e', '0', 'r', 'b', 'pi', '0', "
         "'0', '0', '0', '0', '0', '0', '1', 't', 'x', '0')"},
        {"WQ_RENEW", "('1', 't', '0')"},
        {"WQ_CANCEL", "('i', '1', '{1,2}')"},
        {"HISTORY_CANCEL_REASON", "('i', '1', '2')"},
        {"HISTORY_READ", "('i', '1', '0')"},
        {"EXEC_EVENT_COUNT", "('i', '1')"},
        {"INSTANCE_FETCH_META", "('i')"},
        {"STATS_WORKER_READY", "('0')"},
        {"STATS_ORCH_READY", "('0')"},
    };
    duro_provider *p = pv_open();
    PGconn *c = admin();
    CHECK(c != NULL && p != NULL);
    if (c == NULL || p == NULL) {
        PQfinish(c);
        return;
    }
    char sql[8192];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; SET enable_seqscan = off; "
             "SET plan_cache_mode = force_generic_plan",
             duro__pg_schema(p));
    PQclear(PQexec(c, sql));
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *text = NULL;
        for (size_t i = 0; i < duro__pg_statement_count(); i++)
            if (strcmp(duro__pg_statement_name(i), cases[k].name) == 0)
                text = duro__pg_statement_sql(i);
        CHECK_MSG(text != NULL, "no statement %s", cases[k].name);
        if (text == NULL)
            continue;
        int params = 0;
        for (const char *q = strchr(text, '$'); q != NULL;
             q = strchr(q + 1, '$')) {
            int n = atoi(q + 1);
            params = n > params ? n : params;
        }
        int len = snprintf(sql, sizeof(sql), "PREPARE q(");
        for (int i = 0; i < params; i++)
            len += snprintf(sql + len, sizeof(sql) - (size_t)len, "%stext",
                            i > 0 ? ", " : "");
        snprintf(sql + len, sizeof(sql) - (size_t)len, ") AS %s", text);
        PGresult *r = PQexec(c, sql);
        CHECK_MSG(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s",
                  cases[k].name, PQresultErrorMessage(r));
        PQclear(r);
        snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE q%s", cases[k].args);
        r = PQexec(c, sql);
        CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", cases[k].name,
                  PQresultErrorMessage(r));
        for (int row = 0;
             PQresultStatus(r) == PGRES_TUPLES_OK && row < PQntuples(r); row++)
            CHECK_MSG(strstr(PQgetvalue(r, row, 0), "Seq Scan") == NULL,
                      "%s scans a table: %s", cases[k].name,
                      PQgetvalue(r, row, 0));
        PQclear(r);
        PQclear(PQexec(c, "DEALLOCATE q"));
    }
    PQfinish(c);
}

/* Work committed by another process wakes wait_for_work through
 * LISTEN/NOTIFY, long before the caller's poll interval. "Another process"
 * is a provider with a different connection string here (a different
 * application_name), so the two share no in-process notifier. */
typedef struct far_waiter {
    duro_provider *p;
    _Atomic int fetched;
    _Atomic int done;
    int64_t waited_ms;
} far_waiter;

static void *far_waiter_main(void *arg)
{
    far_waiter *w = arg;
    duro_error e;
    duro_orch_item *item = NULL;
    /* an empty fetch first: the wait then ends at any later commit */
    w->p->fetch_orchestration_item(w->p, 60000, NULL, &item, &e);
    duro_orch_item_free(item);
    atomic_store(&w->fetched, 1);
    int64_t start = test_now_ms();
    w->p->wait_for_work(w->p, DURO_QUEUE_ORCHESTRATOR, 30000, &e);
    w->waited_ms = test_now_ms() - start;
    atomic_store(&w->done, 1);
    return NULL;
}

PV_TEST(work_from_another_process_wakes_a_wait_through_notify)
{
    const char *schema = new_schema(pv_test_name);
    char name[64];
    snprintf(name, sizeof(name), "%s", schema);
    duro_provider *a = open_schema(name, "&application_name=duro_pv_a");
    duro_provider *b = open_schema(name, "&application_name=duro_pv_b");
    CHECK(a != NULL && b != NULL);
    if (a == NULL || b == NULL) {
        duro_provider_close(a);
        duro_provider_close(b);
        return;
    }
    WAIT_UNTIL(duro__pg_listening(a) && duro__pg_listening(b), 5000);
    far_waiter w = {.p = a};
    atomic_init(&w.fetched, 0);
    atomic_init(&w.done, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, far_waiter_main, &w), 0);
    WAIT_UNTIL(atomic_load(&w.fetched), 5000);
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "x", .name = "orch"};
    CHECK_PRC(b->enqueue_for_orchestrator(b, &st, 0, &e), DURO_OK, &e);
    /* far below the 30 s the wait would otherwise take */
    WAIT_UNTIL(atomic_load(&w.done), 10000);
    if (!atomic_load(&w.done))
        a->wake(a, 1);
    pthread_join(t, NULL);
    CHECK_MSG(w.waited_ms < 10000, "the wait took %lld ms",
              (long long)w.waited_ms);
    CHECK(duro__pg_notifications_received(a) > 0);
    duro_provider_close(a);
    duro_provider_close(b);
}

int main(int argc, char **argv)
{
    int listing = argc > 1 && strcmp(argv[1], "--list") == 0;
    /* DURO_TEST_PG_URL, else the URL the CTest fixture's cluster wrote;
     * without either it exits 77 (skipped) */
    base_url = listing ? "" : pg_test_url();
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
        T(a_lost_connection_fails_retryably_and_is_reopened),
        T(many_events_of_a_turn_round_trip_exactly),
        T(statements_are_prepared_once_per_connection),
        T(claims_and_lookups_use_indexes),
        T(work_from_another_process_wakes_a_wait_through_notify)};
    int rc =
        pv_main(argc, argv, &factory, extra, sizeof(extra) / sizeof(extra[0]));
    drop_schemas();
    return rc;
}
