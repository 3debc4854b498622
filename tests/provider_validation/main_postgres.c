/* main_postgres.c - runs the provider validation suite on the PostgreSQL
 * provider: every test on a fresh schema (pv_<pid>_<n>) of the test server
 * (pg_test_url(): DURO_TEST_PG_URL, else the CTest fixture's throwaway
 * cluster), faults injected at statements through the provider's test hook.
 * Adds the checks that depend on PostgreSQL URLs and on concurrent schema
 * creation. Without a server it says why and exits 77 (skipped). Main
 * thread. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_util.h"
#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"
#include "providers/providers.h"
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
    CHECK_EQ(query_int(c, sql), 9); /* migrations 1 to 9, once each */
    PQfinish(c);
}

/* Takes a version-9 schema (search_path set to it) back to version 8:
 * migration 9's schedules go. */
#define UNDO_PG_MIGRATION_9                                                    \
    "DROP TABLE schedule_fires; DROP TABLE schedules; "                        \
    "DELETE FROM duro_schema WHERE version = 9; "

/* ... and back to version 7: migration 8's deadline column goes. */
#define UNDO_PG_MIGRATION_8                                                    \
    UNDO_PG_MIGRATION_9                                                        \
    "ALTER TABLE instances DROP COLUMN deadline_ms; "                          \
    "DELETE FROM duro_schema WHERE version = 8; "

/* ... and back to version 6: migration 7's table of live runtimes goes. */
#define UNDO_PG_MIGRATION_7                                                    \
    UNDO_PG_MIGRATION_8                                                        \
    "DROP TABLE runtimes; "                                                    \
    "DELETE FROM duro_schema WHERE version = 7; "

/* ... and back to version 5: orchestrator_queue's fillfactor as version 5
 * made it. */
#define UNDO_PG_MIGRATION_6                                                    \
    UNDO_PG_MIGRATION_7                                                        \
    "ALTER TABLE orchestrator_queue RESET (fillfactor); "                      \
    "DELETE FROM duro_schema WHERE version = 6; "

/* ... and back to version 4: migration 5's indexes go. */
#define UNDO_PG_MIGRATION_5                                                    \
    UNDO_PG_MIGRATION_6                                                        \
    "DROP INDEX instances_status_created; "                                    \
    "DROP INDEX instances_status_updated; "                                    \
    "DROP INDEX instances_name_status_created; "                               \
    "DROP INDEX instances_name_status_updated; "                               \
    "DROP INDEX history_control; "                                             \
    "DELETE FROM duro_schema WHERE version = 5; "

static int admin_exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok;
}

/* 1 when schema `name` exists on the server. */
static int schema_exists(PGconn *c, const char *name)
{
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_namespace WHERE nspname = '%.63s'", name);
    return query_int(c, sql) == 1;
}

/* Makes the test's store (a current schema, its name in schema[64]) and
 * returns an administrator's connection; NULL (the test failed) when there
 * is none. */
static PGconn *current_store_and_admin(char *schema)
{
    duro_provider *owner = pv_open();
    snprintf(schema, 64, "%s", duro__pg_schema(owner));
    pv_close(owner);
    PGconn *c = admin();
    CHECK(c != NULL);
    return c;
}

/* Creates login role `role` (dropped first if it exists) with USAGE on
 * schema and `grant` on all its tables, then `setting` ("" or SET ...) as
 * the role's default. */
static void make_role(PGconn *c, const char *role, const char *schema,
                      const char *grant, const char *setting)
{
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN; "
             "GRANT USAGE ON SCHEMA \"%s\" TO %s; "
             "GRANT %s ON ALL TABLES IN SCHEMA \"%s\" TO %s; %s%s%s%s",
             role, role, schema, role, grant, schema, role,
             setting[0] ? "ALTER ROLE " : "", setting[0] ? role : "",
             setting[0] ? " " : "", setting);
    CHECK(admin_exec(c, sql));
}

/* A role that may use an existing store but create nothing: LOGIN, USAGE
 * on the schema, the DML rights on its tables; no CREATE on the database
 * or the schema. Opening a current store runs no DDL, so it opens, reads
 * and writes; the open used to fail on CREATE SCHEMA IF NOT EXISTS
 * ("permission denied for database", 42501). */
PV_TEST(a_role_with_data_rights_only_opens_a_current_store)
{
    char schema[64];
    PGconn *c = current_store_and_admin(schema);
    if (c == NULL)
        return;
    char role[64], sql[1024];
    snprintf(role, sizeof(role), "pv_data_%ld", (long)getpid());
    make_role(c, role, schema, "SELECT, INSERT, UPDATE, DELETE", "");
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_roles WHERE rolname = '%s' AND NOT "
             "rolsuper AND NOT has_database_privilege('%s', "
             "current_database(), 'CREATE') AND NOT has_schema_privilege("
             "'%s', '%s', 'CREATE')",
             role, role, role, schema);
    CHECK_EQ(query_int(c, sql), 1);

    char params[256], url[2048];
    snprintf(params, sizeof(params), "schema=%s&user=%s", schema, role);
    url_with(url, sizeof(url), params);
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
    if (p != NULL) {
        /* a write: a start queued, claimed and acked */
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = "d1", .name = "orch"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
        duro_orch_item *item = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e),
                  DURO_OK, &e);
        CHECK(item != NULL);
        if (item != NULL) {
            duro_event ev = {.event_id = 1,
                             .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                             .name = "orch",
                             .timestamp_ms = 1};
            duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                          .name = "orch"};
            duro_orch_ack ack = {.execution_id = 1,
                                 .history_delta = &ev,
                                 .history_delta_count = 1,
                                 .meta = &running};
            CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
                      DURO_OK, &e);
            duro_orch_item_free(item);
        }
        /* a read */
        duro_instance_list *l = NULL;
        CHECK_PRC(p->get_instance(p, "d1", &l, &e), DURO_OK, &e);
        CHECK(l != NULL && l->count == 1);
        if (l != NULL && l->count == 1)
            CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
        duro_instance_list_free(l);
        duro_provider_close(p);
    }
    /* the same role cannot create a store: the error says why */
    snprintf(params, sizeof(params), "schema=%s_new&user=%s", schema, role);
    url_with(url, sizeof(url), params);
    p = NULL;
    CHECK_PFAIL(duro_provider_open(url, &p, &e), DURO_STORAGE, 0, &e);
    CHECK_MSG(strstr(e.message, "42501") != NULL &&
                  strstr(e.message, "see the grants in "
                                    "docs/postgres-provider.md") != NULL,
              "'%s'", e.message);
    duro_provider_close(p);
    snprintf(sql, sizeof(sql), "%s_new", schema);
    CHECK(!schema_exists(c, sql));

    snprintf(sql, sizeof(sql), "DROP OWNED BY %s; DROP ROLE %s", role, role);
    CHECK(admin_exec(c, sql));
    PQfinish(c);
}

static int noop_orchestration(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    (void)out;
    return DURO_OK;
}

/* A runtime on a store its role cannot write fails at create, naming the
 * role and why (it used to start and retry every fetch for ever); a
 * client of the same role still opens and reads. Roles: SELECT only;
 * the data rights but read-only transactions by default; the data rights
 * (opens). */
PV_TEST(a_runtime_refuses_a_store_its_role_cannot_write)
{
    char schema[64];
    PGconn *c = current_store_and_admin(schema);
    if (c == NULL)
        return;
    static const struct {
        const char *grant;   /* on all tables of the schema */
        const char *setting; /* ALTER ROLE ... SET, or "" */
        const char *expect;  /* in the message, or NULL: the runtime opens */
    } cases[] = {
        {"SELECT", "", "lacks INSERT, UPDATE or DELETE"},
        {"SELECT, INSERT, UPDATE, DELETE",
         "SET default_transaction_read_only = on", "read-only transactions"},
        {"SELECT, INSERT, UPDATE, DELETE", "", NULL},
    };
    duro_registry *reg = NULL;
    CHECK_RC(duro_registry_create(&reg), DURO_OK);
    CHECK_RC(duro_registry_add_orchestration(reg, "noop", NULL,
                                             noop_orchestration, NULL),
             DURO_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char role[64], sql[1024];
        snprintf(role, sizeof(role), "pv_write_%zu_%ld", i, (long)getpid());
        make_role(c, role, schema, cases[i].grant, cases[i].setting);
        char params[256], url[2048];
        snprintf(params, sizeof(params), "schema=%s&user=%s&pool=2", schema,
                 role);
        url_with(url, sizeof(url), params);
        duro_runtime *rt = NULL;
        int rc = duro_runtime_create(url, reg, NULL, &rt);
        if (cases[i].expect == NULL) {
            CHECK_MSG(rc == DURO_OK, "%s: %s", duro_errname(rc), duro_errmsg());
        } else {
            CHECK_MSG(rc == DURO_STORAGE, "%s: got %s", role, duro_errname(rc));
            CHECK(rt == NULL);
            CHECK_MSG(strstr(duro_errmsg(), cases[i].expect) != NULL &&
                          strstr(duro_errmsg(), role) != NULL,
                      "'%s'", duro_errmsg());
        }
        duro_runtime_destroy(rt);
        duro_client *client = NULL;
        CHECK_RC(duro_client_create(url, &client), DURO_OK);
        duro_instance_info *info = NULL;
        int64_t status = -1;
        if (client != NULL)
            CHECK_RC(duro_client_get_status(client, "none", &info), DURO_OK);
        if (info != NULL)
            status = info->status;
        CHECK_EQ(status, DURO_STATUS_NOT_FOUND);
        duro_free(info);
        duro_client_destroy(client);
        snprintf(sql, sizeof(sql), "DROP OWNED BY %s; DROP ROLE %s", role,
                 role);
        CHECK(admin_exec(c, sql));
    }
    duro_registry_destroy(reg);
    PQfinish(c);
}

/* A current store opens without the migration lock: another session
 * holding it (as a migrating process would) does not hold up the open,
 * which under lock_timeout would otherwise fail 55P03. */
PV_TEST(a_current_store_opens_without_the_migration_lock)
{
    char schema[64];
    PGconn *c = current_store_and_admin(schema);
    if (c == NULL)
        return;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM (SELECT pg_advisory_lock(hashtextextended("
             "'duro.migrate.' || '%s', 0))) l",
             schema);
    CHECK_EQ(query_int(c, sql), 1);
    duro_provider *p =
        open_schema(schema, "&options=-c%20lock_timeout%3D1000&pool=1");
    CHECK(p != NULL);
    duro_provider_close(p);
    PQfinish(c); /* ends the session and its lock */
}

/* create=0: a schema that does not exist fails DURO_NOT_FOUND, naming it
 * and the URL masked, and nothing is created; one that exists opens, and
 * one that is behind is still migrated. A schema that exists but holds no
 * duro store (no duro_schema: empty, or another application's tables) is
 * not found either, and nothing is created in it; create=1 makes the
 * store in an empty one. */
PV_TEST(create_0_never_creates_a_schema_but_migrates_one)
{
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    PGconn *c = admin();
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char params[256], url[2048];
    snprintf(params, sizeof(params), "schema=%s&password=s3cr3t&create=0",
             schema);
    url_with(url, sizeof(url), params);
    duro_provider *p = (duro_provider *)&params; /* must be reset */
    duro_error e;
    CHECK_PFAIL(duro_provider_open(url, &p, &e), DURO_NOT_FOUND, 0, &e);
    CHECK(p == NULL);
    CHECK_MSG(strstr(e.message, schema) != NULL, "'%s'", e.message);
    CHECK_MSG(strstr(e.message, "nothing was created") != NULL, "'%s'",
              e.message);
    CHECK_MSG(strstr(e.message, "password=***") != NULL, "'%s'", e.message);
    CHECK_MSG(strstr(e.message, "s3cr3t") == NULL, "'%s'", e.message);
    CHECK(!schema_exists(c, schema));

    p = open_schema(schema, "&create=1"); /* creates it */
    CHECK(p != NULL);
    duro_provider_close(p);
    p = open_schema(schema, "&create=0"); /* current: opens */
    CHECK(p != NULL);
    duro_provider_close(p);

    /* behind (migrations 5 and 4 undone, as a version-3 store):
     * migrated */
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; " UNDO_PG_MIGRATION_5
             "DROP TABLE event_ids; "
             "DELETE FROM duro_schema WHERE version = 4",
             schema);
    CHECK(admin_exec(c, sql));
    p = open_schema(schema, "&create=0");
    CHECK(p != NULL);
    duro_provider_close(p);
    snprintf(sql, sizeof(sql), "SELECT MAX(version) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 9);

    /* a schema without duro_schema, empty or another application's, is
     * no store: create=0 creates nothing in it */
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof(sql),
                 "DROP SCHEMA \"%s\" CASCADE; CREATE SCHEMA \"%s\"; %s%s%s",
                 schema, schema, i ? "CREATE TABLE \"" : "", i ? schema : "",
                 i ? "\".stuff(x int)" : "");
        CHECK(admin_exec(c, sql));
        snprintf(params, sizeof(params), "schema=%s&password=s3cr3t&create=0",
                 schema);
        url_with(url, sizeof(url), params);
        p = (duro_provider *)&params;
        CHECK_PFAIL(duro_provider_open(url, &p, &e), DURO_NOT_FOUND, 0, &e);
        CHECK(p == NULL);
        CHECK_MSG(strstr(e.message, "holds no duro store") != NULL, "'%s'",
                  e.message);
        CHECK_MSG(strstr(e.message, schema) != NULL, "'%s'", e.message);
        CHECK_MSG(strstr(e.message, "s3cr3t") == NULL, "'%s'", e.message);
        snprintf(sql, sizeof(sql),
                 "SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON "
                 "n.oid = c.relnamespace WHERE n.nspname = '%s'",
                 schema);
        CHECK_EQ(query_int(c, sql), (int64_t)i);
    }
    /* an empty schema a DBA made for the store: create=1 makes it one */
    snprintf(sql, sizeof(sql),
             "DROP SCHEMA \"%s\" CASCADE; CREATE SCHEMA \"%s\"", schema,
             schema);
    CHECK(admin_exec(c, sql));
    p = open_schema(schema, "&create=1");
    CHECK(p != NULL);
    duro_provider_close(p);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 9);
    PQfinish(c);
}

/* The schema name is used quoted: schema=PvCase_<pid> and pvcase_<pid> are
 * two stores, and a keyword is a name like any other. */
PV_TEST(schema_names_are_case_sensitive_and_may_be_keywords)
{
    char upper[64], lower[64];
    snprintf(upper, sizeof(upper), "PvCase_%ld", (long)getpid());
    snprintf(lower, sizeof(lower), "pvcase_%ld", (long)getpid());
    const char *names[] = {upper, lower, "select"};
    duro_provider *p[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (schema_count < SCHEMAS_MAX)
            schemas[schema_count++] = strdup(names[i]);
        p[i] = open_schema(names[i], "&pool=1");
        CHECK(p[i] != NULL);
    }
    if (p[0] != NULL && p[1] != NULL && p[2] != NULL) {
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = "c1", .name = "orch"};
        duro_error e;
        CHECK_PRC(p[0]->enqueue_for_orchestrator(p[0], &st, 0, &e), DURO_OK,
                  &e);
        CHECK_PRC(p[2]->enqueue_for_orchestrator(p[2], &st, 0, &e), DURO_OK,
                  &e);
        uint64_t n[3];
        for (int i = 0; i < 3; i++)
            CHECK_PRC(p[i]->count_messages(p[i], DURO_QUEUE_ORCHESTRATOR, NULL,
                                           &n[i], &e),
                      DURO_OK, &e);
        CHECK_EQ(n[0], 1);
        CHECK_EQ(n[1], 0);
        CHECK_EQ(n[2], 1);
    }
    for (int i = 0; i < 3; i++)
        duro_provider_close(p[i]);
}

/* 1 when schema %s's orchestrator_queue has migration 6's fillfactor. */
#define QUEUE_FILLFACTOR_50                                                    \
    "SELECT COUNT(*) FROM pg_class AS c JOIN pg_namespace AS n "               \
    "ON n.oid = c.relnamespace WHERE n.nspname = '%s' "                        \
    "AND c.relname = 'orchestrator_queue' "                                    \
    "AND 'fillfactor=50' = ANY(c.reloptions)"

/* Migration 6 upgrades a version-5 store in place while a runtime works on
 * it: an instance locked by a claim made before stays locked by it (its
 * ack goes through after the upgrade), a message queued before is claimed
 * after, and orchestrator_queue's new pages keep room for a claim's row
 * versions (fillfactor 50). */
PV_TEST(migration_6_upgrades_a_version_5_store_in_place)
{
    duro_provider *p = pv_open();
    duro_error e;
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", duro__pg_schema(p));
    const char *ids[2] = {"v5-a", "v5-b"};
    for (int i = 0; i < 2; i++) {
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = ids[i], .name = "orch"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    }
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    PGconn *c = admin();
    CHECK(c != NULL);
    if (item == NULL || c == NULL) {
        duro_orch_item_free(item);
        PQfinish(c);
        return;
    }
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; " UNDO_PG_MIGRATION_6, schema);
    CHECK(admin_exec(c, sql));
    snprintf(sql, sizeof(sql), QUEUE_FILLFACTOR_50, schema);
    CHECK_EQ(query_int(c, sql), 0);
    snprintf(sql, sizeof(sql), "SELECT MAX(version) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 5);

    duro_provider *q = pv_open_same(); /* migrates */
    CHECK(q != NULL);
    CHECK_EQ(query_int(c, sql), 9);
    snprintf(sql, sizeof(sql), QUEUE_FILLFACTOR_50, schema);
    CHECK_EQ(query_int(c, sql), 1);
    PQfinish(c);
    if (q == NULL) {
        duro_orch_item_free(item);
        return;
    }
    /* the claim made before the upgrade still holds its lock */
    duro_event ev = {.event_id = 1,
                     .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                     .name = "orch",
                     .timestamp_ms = 1};
    duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                  .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = &ev,
                         .history_delta_count = 1,
                         .meta = &running};
    CHECK_PRC(q->ack_orchestration_item(q, item->lock_token, &ack, &e), DURO_OK,
              &e);
    const char *other =
        strcmp(item->instance_id, ids[0]) == 0 ? ids[1] : ids[0];
    duro_orch_item_free(item);
    /* the other start, queued before, is claimed after */
    item = NULL;
    CHECK_PRC(q->fetch_orchestration_item(q, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item != NULL)
        CHECK_STR(item->instance_id, other);
    duro_orch_item_free(item);
    pv_close(q);
}

/* Migration 7 adds the table of live runtimes to a version-6 store in
 * place: what it held stays, and runtimes register in it at once. */
PV_TEST(migration_7_adds_the_live_runtimes)
{
    duro_provider *p = pv_open();
    duro_error e;
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", duro__pg_schema(p));
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "v6", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    pv_close(p);
    PGconn *c = admin();
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; " UNDO_PG_MIGRATION_7, schema);
    CHECK(admin_exec(c, sql));
    snprintf(sql, sizeof(sql), "SELECT MAX(version) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 6);

    p = pv_open_same(); /* migrates */
    CHECK(p != NULL);
    CHECK_EQ(query_int(c, sql), 9);
    PQfinish(c);
    if (p == NULL)
        return;
    duro_instance_list *l = NULL;
    CHECK_PRC(p->get_instance(p, "v6", &l, &e), DURO_OK, &e);
    duro_instance_list_free(l);
    duro_runtime_orchestration o = {"orch", "2"};
    duro_runtime_info r = {.runtime_id = "rt",
                           .host = "h",
                           .pid = 7,
                           .heartbeat_every_ms = 1000,
                           .orchestrations = &o,
                           .orchestration_count = 1};
    CHECK_PRC(p->register_runtime(p, &r, &e), DURO_OK, &e);
    duro_runtime_list *rl = NULL;
    CHECK_PRC(p->list_runtimes(p, &rl, &e), DURO_OK, &e);
    CHECK_EQ(rl->count, 1);
    CHECK_STR(rl->items[0].orchestrations[0].version, "2");
    duro_runtime_list_free(rl);
    pv_close(p);
}

/* Migration 2 adds the activity run times to a version-1 schema in place:
 * its history and queued completions read 0 ("unknown"), and what is
 * written after it keeps its times. */
PV_TEST(migration_2_adds_activity_run_times)
{
    duro_provider *p = pv_open();
    duro_error e;
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", duro__pg_schema(p));
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "old", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    duro_event ev[2] = {{.event_id = 1,
                         .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                         .name = "orch",
                         .timestamp_ms = 1},
                        {.event_id = 2,
                         .kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                         .name = "act",
                         .timestamp_ms = 1}};
    duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                  .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = 2,
                         .meta = &running};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    pv_close(p);

    /* back to version 1 (migration 3's index as version 1 made it too),
     * with a completion queued the way it left them */
    PGconn *c = admin();
    CHECK(c != NULL);
    if (c == NULL)
        return;
    char sql[2048];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\";" UNDO_PG_MIGRATION_5
             "DROP TABLE event_ids;"
             "DELETE FROM duro_schema WHERE version = 4;"
             "DROP INDEX instances_name_status;"
             "CREATE INDEX instances_name_status ON instances(name, status);"
             "DELETE FROM duro_schema WHERE version = 3;"
             "ALTER TABLE orchestrator_queue DROP COLUMN started_ms,"
             " DROP COLUMN finished_ms;"
             "ALTER TABLE history DROP COLUMN started_ms,"
             " DROP COLUMN finished_ms;"
             "DELETE FROM duro_schema WHERE version = 2;"
             "INSERT INTO orchestrator_queue(instance_id, kind, execution_id,"
             " source_id, payload, enqueued_ms, visible_at)"
             " VALUES('old', 2, 1, 2, '\"r\"', 1000, 1000);"
             "INSERT INTO orchestrator_ready(instance_id, ready_at)"
             " VALUES('old', 1000)",
             schema);
    CHECK(admin_exec(c, sql));

    p = pv_open_same();
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM information_schema.columns "
             "WHERE table_schema = '%s' AND table_name IN ('history', "
             "'orchestrator_queue') AND column_name IN ('started_ms', "
             "'finished_ms')",
             schema);
    CHECK_EQ(query_int(c, sql), 4);
    snprintf(sql, sizeof(sql), "SELECT MAX(version) FROM \"%s\".duro_schema",
             schema);
    CHECK_EQ(query_int(c, sql), 9);
    /* migration 6: room in orchestrator_queue's pages */
    snprintf(sql, sizeof(sql), QUEUE_FILLFACTOR_50, schema);
    CHECK_EQ(query_int(c, sql), 1);
    /* migration 4: the table of event ids */
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM information_schema.tables WHERE "
             "table_schema = '%s' AND table_name = 'event_ids'",
             schema);
    CHECK_EQ(query_int(c, sql), 1);
    /* migration 3: the name and status index pages in id order */
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = '%s' AND "
             "indexname = 'instances_name_status' AND indexdef LIKE "
             "'%%(name, status, instance_id)'",
             schema);
    CHECK_EQ(query_int(c, sql), 1);
    PQfinish(c);
    item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_ACTIVITY_COMPLETED);
    CHECK_EQ(item->messages[0].started_ms, 0);
    CHECK_EQ(item->messages[0].finished_ms, 0);
    CHECK_EQ(item->history_count, 2);
    CHECK_EQ(item->history[1].started_ms, 0);
    duro_event done = {.event_id = 3,
                       .kind = DURO_EVENT_ACTIVITY_COMPLETED,
                       .source_event_id = 2,
                       .timestamp_ms = 2,
                       .started_ms = 5000,
                       .finished_ms = 5250};
    ack = (duro_orch_ack){
        .execution_id = 1, .history_delta = &done, .history_delta_count = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "old", 0, &h, &e), DURO_OK, &e);
    CHECK(h != NULL && h->count == 3);
    if (h != NULL && h->count == 3) {
        CHECK_EQ(h->events[1].started_ms, 0);
        CHECK_EQ(h->events[1].finished_ms, 0);
        CHECK_EQ(h->events[2].started_ms, 5000);
        CHECK_EQ(h->events[2].finished_ms, 5250);
    }
    duro_history_free(h);
}

/* The pids (comma-separated) of the backends named `app`: the pool's and
 * the listener's; "" when none. */
static void backends_of(PGconn *c, const char *app, char *pids, size_t size)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(pid::text, ',') FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             app);
    PGresult *r = PQexec(c, sql);
    pids[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(pids, size, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

/* Terminates the backends `pids` names and waits until they are gone. */
static void terminate(PGconn *c, const char *pids)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE pid IN (%s)",
             pids);
    CHECK(query_int(c, sql) >= 1);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE pid IN (%s)", pids);
    WAIT_UNTIL(query_int(c, sql) == 0, 5000);
    CHECK_EQ(query_int(c, sql), 0);
}

/* After a lost connection the same call works, and only once; the store
 * holds "a" and "b". */
static void check_reopened(duro_provider *p, duro_work_item *st)
{
    duro_error e;
    CHECK_PRC(p->enqueue_for_orchestrator(p, st, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->enqueue_for_orchestrator(p, st, 0, &e), DURO_ALREADY_EXISTS,
              &e);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->list_instances(p, NULL, &list, &e), DURO_OK, &e);
    CHECK(list != NULL && list->count == 2);
    duro_instance_list_free(list);
}

/* A connection the server dropped while it sat in the pool (here:
 * pg_terminate_backend; a restart or idle_session_timeout alike) is found
 * when taken and reconnected before the call uses it: the call succeeds.
 * (It used to fail, retryably, "server closed the connection
 * unexpectedly".) */
PV_TEST(a_connection_dropped_while_idle_is_reopened_before_use)
{
    char extra[96], app[64], pids[256];
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
    backends_of(c, app, pids, sizeof(pids));
    CHECK(pids[0] != '\0');
    terminate(c, pids);
    st.instance_id = "b";
    check_reopened(p, &st);
    PQfinish(c);
    duro_provider_close(p);
}

/* Two admin connections, *c and *locker; -1 (both closed, and p with
 * them, a check failed) when either could not open. */
static int admin_pair(PGconn **c, PGconn **locker, duro_provider *p)
{
    *c = admin();
    *locker = admin();
    CHECK(*c != NULL && *locker != NULL);
    if (*c != NULL && *locker != NULL)
        return 0;
    PQfinish(*c);
    PQfinish(*locker);
    duro_provider_close(p);
    return -1;
}

/* Waits until one session named `app` waits for a lock. */
static void wait_for_one_lock_waiter(PGconn *c, const char *app)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name "
             "= '%s' AND wait_event_type = 'Lock'",
             app);
    WAIT_UNTIL(query_int(c, sql) == 1, 10000);
    CHECK_EQ(query_int(c, sql), 1);
}

typedef struct {
    duro_provider *p;
    duro_work_item *st;
    int rc;
    int retryable;
    char message[512];
} blocked_call;

static void *enqueue_in_thread(void *arg)
{
    blocked_call *b = arg;
    duro_error e;
    b->rc = b->p->enqueue_for_orchestrator(b->p, b->st, 0, &e);
    b->retryable = b->rc != DURO_OK ? e.retryable : 0;
    snprintf(b->message, sizeof(b->message), "%s",
             b->rc != DURO_OK ? e.message : "");
    return NULL;
}

/* A connection the server drops during a call (here: terminated while the
 * call waits for a table lock the test holds) fails that call, retryably
 * and changing nothing, and is reconnected for the next one. */
PV_TEST(a_connection_lost_during_a_call_fails_retryably_and_is_reopened)
{
    char extra[96], app[64], pids[256], sql[512];
    snprintf(app, sizeof(app), "duro_pv_lost_%ld", (long)getpid());
    snprintf(extra, sizeof(extra), "&pool=1&application_name=%s", app);
    const char *schema = new_schema(pv_test_name);
    char schema_name[64];
    snprintf(schema_name, sizeof(schema_name), "%s", schema);
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "a", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    PGconn *c, *locker;
    if (admin_pair(&c, &locker, p) != 0)
        return;
    snprintf(sql, sizeof(sql),
             "BEGIN; LOCK TABLE \"%s\".orchestrator_queue, \"%s\".instances "
             "IN ACCESS EXCLUSIVE MODE",
             schema_name, schema_name);
    CHECK(admin_exec(locker, sql));
    st.instance_id = "b";
    blocked_call b = {.p = p, .st = &st, .rc = -1};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, enqueue_in_thread, &b), 0);
    /* the pool's one connection, waiting for the lock */
    wait_for_one_lock_waiter(c, app);
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE "
             "application_name = '%s' AND wait_event_type = 'Lock'",
             app);
    PGresult *r = PQexec(c, sql);
    pids[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(pids, sizeof(pids), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    CHECK(pids[0] != '\0');
    if (pids[0] != '\0')
        terminate(c, pids);
    CHECK(admin_exec(locker, "ROLLBACK"));
    pthread_join(th, NULL);
    CHECK_MSG(b.rc == DURO_STORAGE && b.retryable == 1,
              "after the connection was dropped: %s, retryable %d (%s)",
              duro_errname(b.rc), b.retryable, b.message);
    check_reopened(p, &st);
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

typedef struct {
    duro_provider *p;
    int rc;
    uint64_t count;
    char message[512];
} sweep_call;

static void *cancel_matching_in_thread(void *arg)
{
    sweep_call *w = arg;
    duro_bulk_filter all = {0};
    duro_bulk_result *out = NULL;
    duro_error e;
    w->rc = w->p->cancel_matching(w->p, &all, "sweep", "test", 0, 0, &out, &e);
    w->count = out != NULL ? out->count : 0;
    snprintf(w->message, sizeof(w->message), "%s",
             w->rc != DURO_OK ? e.message : "");
    duro_bulk_result_free(out);
    return NULL;
}

/* A sweep keeps no transaction open while its batches run: its set is a
 * holdable cursor, committed before the first batch. Under a role's
 * idle_in_transaction_session_timeout (here 100 ms, through the URL), a
 * batch that waits for a lock far longer than that does not end the sweep.
 * (The set used to be read on a snapshot held open for the whole call, and
 * the server ended that session, failing the sweep.) */
PV_TEST(a_sweep_holds_no_transaction_open_while_its_batches_wait)
{
    enum { N = 2 * DURO_BULK_BATCH_MAX + 10 };
    char extra[160], app[64], sql[512], schema[64];
    snprintf(app, sizeof(app), "duro_pv_sweep_%ld", (long)getpid());
    snprintf(extra, sizeof(extra),
             "&pool=1&application_name=%s&options=-c%%20"
             "idle_in_transaction_session_timeout%%3D100",
             app);
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof(id), "i%04d", i);
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    }
    PGconn *c, *locker;
    if (admin_pair(&c, &locker, p) != 0)
        return;
    /* an instance of the second batch, locked */
    CHECK(admin_exec(locker, "BEGIN"));
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM (SELECT 1 FROM \"%s\".instances "
             "WHERE instance_id = 'i%04d' FOR UPDATE) AS l",
             schema, DURO_BULK_BATCH_MAX + 5);
    CHECK_EQ(query_int(locker, sql), 1);
    sweep_call w = {.p = p, .rc = -1};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, cancel_matching_in_thread, &w), 0);
    wait_for_one_lock_waiter(c, app);
    /* the first batch is done; the set's session is not in a transaction */
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM \"%s\".instances "
             "WHERE cancel_requested_ms IS NOT NULL",
             schema);
    CHECK_EQ(query_int(c, sql), DURO_BULK_BATCH_MAX);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name "
             "= '%s' AND state LIKE 'idle in transaction%%'",
             app);
    CHECK_EQ(query_int(c, sql), 0);
    /* far past the timeout: a session idle in a transaction would be ended */
    usleep(500 * 1000);
    CHECK(admin_exec(locker, "ROLLBACK"));
    pthread_join(th, NULL);
    CHECK_MSG(w.rc == DURO_OK, "cancel_matching: %s (%s)", duro_errname(w.rc),
              w.message);
    CHECK_EQ(w.count, (uint64_t)N);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM \"%s\".instances "
             "WHERE cancel_requested_ms IS NOT NULL",
             schema);
    CHECK_EQ(query_int(c, sql), N);
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

/* ---- the cycle ------------------------------------------------------------
 * What the tests below run per instance: a first turn that schedules one
 * activity, the activity, and a second turn that completes the instance
 * with the activity's output. */

#define CYCLE_OUTPUT "42"

typedef struct cycle_turn {
    duro_event events[2];
    duro_work_item activity;
    duro_instance_meta meta;
    duro_orch_ack ack;
} cycle_turn;

/* The ack of item's turn, built in *t (which must stay put while the ack is
 * used): the first turn when the instance has no history yet, else the
 * second. */
static const duro_orch_ack *cycle_ack(const duro_orch_item *item, cycle_turn *t)
{
    memset(t, 0, sizeof(*t));
    if (item->history_total == 0) {
        t->events[0] = (duro_event){.event_id = 1,
                                    .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                                    .name = "orch"};
        t->events[1] = (duro_event){.event_id = 2,
                                    .kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                                    .name = "act"};
        t->activity = (duro_work_item){.kind = DURO_WORK_ACTIVITY_EXECUTE,
                                       .instance_id = item->instance_id,
                                       .execution_id = 1,
                                       .source_id = 2,
                                       .name = "act"};
        t->meta =
            (duro_instance_meta){.status = DURO_STATUS_RUNNING, .name = "orch"};
        t->ack.worker_items = &t->activity;
        t->ack.worker_item_count = 1;
    } else {
        t->events[0] = (duro_event){.event_id = 3,
                                    .kind = DURO_EVENT_ACTIVITY_COMPLETED,
                                    .source_event_id = 2,
                                    .payload = CYCLE_OUTPUT};
        t->events[1] = (duro_event){.event_id = 4,
                                    .kind = DURO_EVENT_ORCHESTRATION_COMPLETED,
                                    .payload = CYCLE_OUTPUT};
        t->meta = (duro_instance_meta){.status = DURO_STATUS_COMPLETED,
                                       .output = CYCLE_OUTPUT};
    }
    t->ack.execution_id = 1;
    t->ack.history_delta = t->events;
    t->ack.history_delta_count = 2;
    t->ack.meta = &t->meta;
    return &t->ack;
}

/* The completion an ack of the cycle's activity enqueues. */
static duro_work_item cycle_completion(const char *instance_id)
{
    return (duro_work_item){.kind = DURO_WORK_ACTIVITY_COMPLETED,
                            .instance_id = instance_id,
                            .execution_id = 1,
                            .source_id = 2,
                            .payload = CYCLE_OUTPUT};
}

static void cycle_start(duro_provider *p, const char *id)
{
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
}

/* Fails the test unless instance `id` completed with the cycle's output and
 * its four events, each exactly once. */
static void check_cycle_done(duro_provider *p, const char *id)
{
    static const duro_event_kind kinds[] = {
        DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_ACTIVITY_SCHEDULED,
        DURO_EVENT_ACTIVITY_COMPLETED, DURO_EVENT_ORCHESTRATION_COMPLETED};
    duro_error e;
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, id, &list, &e), DURO_OK, &e);
    CHECK(list != NULL && list->count == 1);
    CHECK_MSG(list->items[0].status == DURO_STATUS_COMPLETED,
              "instance %s is %s", id, duro_status_name(list->items[0].status));
    CHECK_STR(list->items[0].output, CYCLE_OUTPUT);
    duro_instance_list_free(list);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, id, 0, &h, &e), DURO_OK, &e);
    CHECK_MSG(h != NULL && h->count == 4, "instance %s has %zu events", id,
              h != NULL ? h->count : 0);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(h->events[i].event_id, i + 1);
        CHECK_MSG(h->events[i].kind == kinds[i], "%s: event %zu is %s", id,
                  i + 1, duro_event_kind_name(h->events[i].kind));
    }
    duro_history_free(h);
}

/* One turn, one activity and the final turn of instance `id`. */
static void run_cycle(duro_provider *p, const char *id)
{
    duro_error e;
    cycle_start(p, id);
    for (int turn = 0; turn < 2; turn++) {
        duro_orch_item *item = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e),
                  DURO_OK, &e);
        CHECK(item != NULL);
        if (item == NULL)
            return;
        cycle_turn t;
        CHECK_PRC(p->ack_orchestration_item(p, item->lock_token,
                                            cycle_ack(item, &t), &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        if (turn == 1)
            break;
        duro_worker_item *w = NULL;
        CHECK_PRC(p->fetch_work_item(p, 60000, &w, &e), DURO_OK, &e);
        CHECK(w != NULL);
        if (w == NULL)
            return;
        CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 60000, &e), DURO_OK,
                  &e);
        duro_work_item done = cycle_completion(id);
        CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
        duro_worker_item_free(w);
    }
    check_cycle_done(p, id);
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
                                 .flags = (uint32_t)i * 3,
                                 .started_ms = i % 4 ? 1700000000000 + i : 0,
                                 .finished_ms = 1700000000500 + 2 * i};
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
        CHECK_EQ(a->started_ms, b->started_ms);
        CHECK_EQ(a->finished_ms, b->finished_ms);
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

/* Arguments of WQ_ACK_COMPLETE and WQ_ACK_COMPLETE_FETCH for EXECUTE. */
#define WQ_ACK_ARGS                                                            \
    "('1', 'i', '0', '0', 'n', 'v', 'p', 'e', '0', 'r', 'b', 'pi', '0', '0', " \
    "'0', '0', '0', '0', '0', '1', 't', 'x', '0', '0', '0')"

/* A fresh provider (*p) and an admin connection with its schema first on
 * the search path and `settings` ("SET ...; SET ...") applied; NULL (and a
 * failed check) when either could not open. */
static PGconn *admin_in_schema(duro_provider **p, const char *settings)
{
    *p = pv_open();
    PGconn *c = admin();
    CHECK(c != NULL && *p != NULL);
    if (c == NULL || *p == NULL) {
        PQfinish(c);
        return NULL;
    }
    char sql[512];
    snprintf(sql, sizeof(sql), "SET search_path TO \"%s\"; %s",
             duro__pg_schema(*p), settings);
    PQclear(PQexec(c, sql));
    return c;
}

/* PREPAREs the provider's statement `name` as "q" on c, every parameter
 * text; 0 (and a failed check) when there is no such statement or the
 * server refused it. */
static int prepare_as_q(PGconn *c, const char *name)
{
    const char *text = NULL;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__pg_dialect); i++)
        if (strcmp(duro__sql_statement_name(&duro__pg_dialect, i), name) == 0)
            text = duro__sql_statement_sql(&duro__pg_dialect, i);
    CHECK_MSG(text != NULL, "no statement %s", name);
    if (text == NULL)
        return 0;
    int params = 0;
    for (const char *q = strchr(text, '$'); q != NULL; q = strchr(q + 1, '$')) {
        int n = atoi(q + 1);
        params = n > params ? n : params;
    }
    char sql[8192];
    int len = snprintf(sql, sizeof(sql), "PREPARE q(");
    for (int i = 0; i < params; i++)
        len += snprintf(sql + len, sizeof(sql) - (size_t)len, "%stext",
                        i > 0 ? ", " : "");
    snprintf(sql + len, sizeof(sql) - (size_t)len, ") AS %s", text);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    CHECK_MSG(ok, "%s: %s", name, PQresultErrorMessage(r));
    PQclear(r);
    return ok;
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
        {"READY_CLAIM_ASYNC", "('0', 'x', '0')"},
        {"READY_HOLDER_CURRENT", "('1', 't')"},
        {"READY_ACK_SETTLE", "('i', 't', '1')"},
        {"READY_CLAIM_MANY", "('0', 'x', '0', '16')"},
        {"READY_CLAIM_MANY_ASYNC", "('0', 'x', '0', '16')"},
        {"READY_HOLDER_MANY", "('{1,2}', '{t,u}')"},
        {"READY_ACK_SETTLE_MANY", "('{i,j}', '{t,u}', '{1,2}')"},
        {"READY_RENEW", "('1', 't', '0', '0')"},
        {"READY_SET", "('1', '0', '0')"},
        {"OQ_MIN_VISIBLE", "('i')"},
        {"OQ_DELETE_EXECUTION", "('i', '1')"},
        {"WQ_FETCH", "('x', '0', '0')"},
        {"WQ_FETCH_ASYNC", "('x', '0', '0')"},
        {"WQ_ACK", "('1', 't')"},
        {"WQ_ACK_COMPLETE", WQ_ACK_ARGS},
        {"WQ_ACK_COMPLETE_FETCH", WQ_ACK_ARGS},
        {"WQ_RENEW", "('1', 't', '0')"},
        {"WQ_CANCEL", "('i', '1', '{1,2}')"},
        {"HISTORY_CANCEL_REASON", "('i', '1', '2')"},
        {"HISTORY_READ", "('i', '1', '0')"},
        {"EXEC_EVENT_COUNT", "('i', '1')"},
        {"STATS_WORKER_READY", "('0')"},
        {"STATS_ORCH_QUEUED", "('0')"},
        {"STATS_ORCH_WAITING", "('0')"},
        {"STATS_ORCH_OLDEST", "('0')"},
    };
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "SET enable_seqscan = off; "
                                    "SET plan_cache_mode = force_generic_plan");
    if (c == NULL)
        return;
    char sql[8192];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        if (!prepare_as_q(c, cases[k].name))
            continue;
        snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE q%s", cases[k].args);
        PGresult *r = PQexec(c, sql);
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

/* Every statement that locks several readiness rows locks them in
 * instance id order, so two of them (a batch's check of its locks, a
 * combined activity ack upserting its instances' rows, in two processes)
 * never wait for each other in a cycle: each plan sorts by instance id
 * below its locking step. (Batch order, READY_HOLDER_MANY's `ord`, made
 * about one deadlock per 3,000 fan-out instances on three processes.) */
static void check_sorted_by_instance(PGconn *c, const char *name,
                                     const char *args)
{
    if (!prepare_as_q(c, name))
        return;
    char sql[8192];
    snprintf(sql, sizeof(sql), "EXPLAIN (VERBOSE) EXECUTE q%s", args);
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", name,
              PQresultErrorMessage(r));
    int found = 0;
    for (int row = 0;
         PQresultStatus(r) == PGRES_TUPLES_OK && row < PQntuples(r); row++) {
        const char *line = PQgetvalue(r, row, 0);
        /* the first sort key, whatever the alias: "x.instance_id" */
        const char *k = strstr(line, "Sort Key: ");
        size_t n = k != NULL ? strcspn(k + 10, ", ") : 0;
        if (n >= 12 && strncmp(k + 10 + n - 12, ".instance_id", 12) == 0)
            found = 1;
    }
    for (int row = 0;
         !found && PQresultStatus(r) == PGRES_TUPLES_OK && row < PQntuples(r);
         row++)
        fprintf(stderr, "  %s\n", PQgetvalue(r, row, 0));
    CHECK_MSG(found, "%s: its plan (above) does not sort by instance id", name);
    PQclear(r);
    PQclear(PQexec(c, "DEALLOCATE q"));
}

PV_TEST(readiness_rows_are_locked_in_instance_order)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "SET plan_cache_mode = force_generic_plan");
    if (c == NULL)
        return;
    check_sorted_by_instance(c, "READY_HOLDER_MANY", "('{1,2}', '{t,u}')");
    char args[512];
    int len = snprintf(args, sizeof(args), "(");
    for (int i = 0; i < 21; i++)
        len += snprintf(args + len, sizeof(args) - (size_t)len, "'{}', ");
    snprintf(args + len, sizeof(args) - (size_t)len, "'0', 'x', '0')");
    check_sorted_by_instance(c, "WQ_ACK_COMPLETE_FETCH_MANY", args);
    PQfinish(c);
}

/* With 1,000 ready instances and the provider's session settings
 * (sequential scans allowed), the batch claim probes indexes: no table is
 * scanned whole to claim 16 of them (a scan was 2.5 times slower). */
PV_TEST(a_batch_claim_probes_indexes_among_many_instances)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "SET random_page_cost TO 1.1; "
                                    "SET plan_cache_mode = force_generic_plan");
    if (c == NULL)
        return;
    CHECK(admin_exec(c, "INSERT INTO instances(instance_id, name, status, "
                        "created_ms, updated_ms) SELECT 'i' || g, 'orch', 0, "
                        "0, 0 FROM generate_series(1, 1000) AS g"));
    CHECK(admin_exec(c, "INSERT INTO orchestrator_queue(kind, instance_id, "
                        "enqueued_ms, visible_at) SELECT 1, 'i' || g, 0, 0 "
                        "FROM generate_series(1, 1000) AS g"));
    CHECK(admin_exec(c, "INSERT INTO orchestrator_ready(instance_id, "
                        "ready_at) SELECT 'i' || g, 0 "
                        "FROM generate_series(1, 1000) AS g"));
    CHECK(admin_exec(c, "ANALYZE instances, orchestrator_queue, "
                        "orchestrator_ready"));
    if (!prepare_as_q(c, "READY_CLAIM_MANY")) {
        PQfinish(c);
        return;
    }
    PGresult *r = PQexec(c, "EXPLAIN EXECUTE q('1', 'x', '9', '16')");
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    char scan[256] = "";
    for (int row = 0; ok && row < PQntuples(r); row++)
        if (strstr(PQgetvalue(r, row, 0), "Seq Scan") != NULL && !scan[0])
            snprintf(scan, sizeof(scan), "%s", PQgetvalue(r, row, 0));
    char why[256];
    snprintf(why, sizeof(why), "%s", ok ? "" : PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    CHECK_MSG(ok, "EXPLAIN: %s", why);
    CHECK_MSG(scan[0] == '\0', "the batch claim scans a table: %s", scan);
}

/* ---- the operators' queries among 100,000 instances ------------------- */

#define BIG 100000

/* The highest $n statement `name` names: how many arguments EXECUTE
 * takes. */
static int statement_params(const char *name)
{
    int params = 0;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__pg_dialect); i++) {
        if (strcmp(duro__sql_statement_name(&duro__pg_dialect, i), name) != 0)
            continue;
        const char *text = duro__sql_statement_sql(&duro__pg_dialect, i);
        for (const char *q = strchr(text, '$'); q != NULL;
             q = strchr(q + 1, '$')) {
            int n = atoi(q + 1);
            params = n > params ? n : params;
        }
    }
    return params;
}

/* Every statement takes at most DURO__PG_PARAM_MAX parameters: a value
 * bound beyond them is dropped (the parameter goes as SQL NULL) and the
 * parameters' types are read past their end. HISTORY_INSERT_BATCH takes
 * 29 since it carries the work items too. */
PV_TEST(every_statement_fits_the_parameter_slots)
{
    int most = 0;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__pg_dialect); i++) {
        const char *name = duro__sql_statement_name(&duro__pg_dialect, i);
        if (duro__sql_statement_sql(&duro__pg_dialect, i) == NULL)
            continue;
        int n = statement_params(name);
        CHECK_MSG(n <= DURO__PG_PARAM_MAX, "%s takes %d parameters, %d fit",
                  name, n, DURO__PG_PARAM_MAX);
        most = n > most ? n : most;
    }
    CHECK_EQ(most, DURO__PG_PARAM_MAX);
}

/* The first n arguments a plan binds ($1 .. $21, as sql/manage.c binds
 * them), as EXECUTE's list. */
static void plan_args(PGconn *c, const duro__instance_plan *pl, int n,
                      char *out, size_t size)
{
    char v[21][1100];
    const char *texts[] = {pl->name, pl->prefix, pl->prefix_end, pl->contains,
                           pl->parent};
    for (int i = 0; i < 5; i++) {
        char *lit = texts[i] != NULL
                        ? PQescapeLiteral(c, texts[i], strlen(texts[i]))
                        : NULL;
        snprintf(v[i], sizeof(v[i]), "%s", lit != NULL ? lit : "NULL");
        PQfreemem(lit);
    }
    snprintf(v[5], sizeof(v[5]), "'%d'", pl->with_problem);
    snprintf(v[6], sizeof(v[6]), "'%lld'", (long long)pl->created_from);
    snprintf(v[7], sizeof(v[7]), "'%lld'", (long long)pl->created_until);
    snprintf(v[8], sizeof(v[8]), "'%u'", (unsigned)pl->mask);
    snprintf(v[9], sizeof(v[9]), "'%lld'", (long long)pl->after_key);
    char *id = PQescapeLiteral(c, pl->after_id, strlen(pl->after_id));
    snprintf(v[10], sizeof(v[10]), "%s", id);
    PQfreemem(id);
    snprintf(v[11], sizeof(v[11]), "'%zu'", pl->limit + 1);
    for (int k = 0; k < DURO__QUERY_ARMS; k++)
        snprintf(v[12 + k], sizeof(v[12 + k]), "'%d'", pl->arms[k]);
    if (pl->count_rows < 0) /* bind_limit: NULL is no limit */
        snprintf(v[19], sizeof(v[19]), "NULL");
    else
        snprintf(v[19], sizeof(v[19]), "'%lld'", (long long)pl->count_rows);
    char *version = pl->version != NULL
                        ? PQescapeLiteral(c, pl->version, strlen(pl->version))
                        : NULL;
    snprintf(v[20], sizeof(v[20]), "%s", version != NULL ? version : "NULL");
    PQfreemem(version);
    size_t len = (size_t)snprintf(out, size, "(");
    for (int i = 0; i < n && i < 21; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? ", " : "",
                                v[i]);
    snprintf(out + len, size - len, ")");
}

/* The name of the page statement of a plan (sql/manage.c's table). */
static const char *page_statement(const duro__instance_plan *pl)
{
    static const char *const paths[] = {
        "ALL", "NAME", "STATUS", "NAME_STATUS", "PREFIX", "PARENT", "PROBLEM"};
    static const char *const orders[] = {"ID", "CREATED", "UPDATED"};
    static char name[64];
    snprintf(name, sizeof(name), "QUERY_%s_%s", paths[pl->path],
             orders[pl->order]);
    return name;
}

/* Runs EXPLAIN ANALYZE of prepared statement q with `args`: no node scans
 * a table, and no index node reads (returns and filters out) more than
 * `most` rows per loop. */
static void check_reads(PGconn *c, const char *what, const char *args,
                        long most)
{
    char sql[4096];
    snprintf(sql, sizeof(sql), "EXPLAIN (ANALYZE, TIMING OFF) EXECUTE q%s",
             args);
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", what,
              PQresultErrorMessage(r));
    int bad = 0;
    long read = 0;
    for (int row = 0;
         PQresultStatus(r) == PGRES_TUPLES_OK && row < PQntuples(r) + 1;
         row++) {
        const char *line = row < PQntuples(r) ? PQgetvalue(r, row, 0) : "->";
        if (strstr(line, "Seq Scan") != NULL)
            bad = 1;
        /* a node ends where the next begins */
        if (strstr(line, "->") != NULL || row == 0) {
            if (read > most)
                bad = 1;
            read = 0;
            const char *rows = strstr(line, "rows=");
            const char *actual = strstr(line, "actual");
            if (strstr(line, "Index") != NULL && actual != NULL &&
                (rows = strstr(actual, "rows=")) != NULL)
                read = strtol(rows + 5, NULL, 10);
        } else if (read > 0 && strstr(line, "Rows Removed by Filter: ")) {
            read += strtol(strstr(line, "Filter: ") + 8, NULL, 10);
        }
    }
    if (bad)
        for (int row = 0; row < PQntuples(r); row++)
            fprintf(stderr, "    %s\n", PQgetvalue(r, row, 0));
    CHECK_MSG(!bad, "%s: a table scan, or more than %ld rows read (above)",
              what, most);
    PQclear(r);
}

/* Among BIG instances, with the statistics autovacuum would gather and
 * planned with their values as the provider plans them (per call, never a
 * generic plan: see statement_per_call in pg_db.c), the first page and the
 * next of every ordered path - nothing, a status, several statuses, a
 * name, a name and a status, a creation bound newest first - in each
 * order, and of the control requests, read about a page from each index
 * they use (at most 10 pages' rows per index node and loop), never a
 * table. */
PV_TEST(query_pages_read_a_page_of_100000_instances)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "SET plan_cache_mode = force_custom_plan");
    if (c == NULL)
        return;
    CHECK(admin_exec(
        c, "INSERT INTO instances(instance_id, name, status, execution_id, "
           "created_ms, updated_ms) SELECT 'i' || lpad(g::text, 6, '0'), "
           "'orch-' || (g % 10), (ARRAY[1, 2, 3, 4, 5, 7, 8])[g % 7 + 1], 1, "
           "1000000 + g / 3, 1000000 + (g * 7919) % 100000 "
           "FROM generate_series(0, 99999) AS g"));
    CHECK(admin_exec(c, "INSERT INTO history(instance_id, execution_id, "
                        "event_id, kind, timestamp_ms) SELECT instance_id, 1, "
                        "1, 1, created_ms FROM instances"));
    CHECK(admin_exec(
        c, "INSERT INTO history(instance_id, execution_id, event_id, kind, "
           "timestamp_ms, reason, requested_by) SELECT instance_id, 1, 2, "
           "(ARRAY[5, 19, 20, 21])[(created_ms / 5) % 4 + 1], updated_ms, "
           "'why', 'ops:' || (updated_ms % 3) FROM instances "
           "WHERE substr(instance_id, 2)::int % 5 = 0"));
    CHECK(admin_exec(c, "ANALYZE instances, history"));
    const uint32_t live = (1u << DURO_STATUS_PENDING) |
                          (1u << DURO_STATUS_RUNNING) |
                          (1u << DURO_STATUS_SUSPENDED);
    static const struct {
        const char *what;
        uint32_t mask;
        const char *name;
        int64_t before;
    } cases[] = {
        {"everything", 0, NULL, 0},
        {"Failed", 1u << DURO_STATUS_FAILED, NULL, 0},
        {"live", 0 /* below */, NULL, 0},
        {"name", 0, "orch-3", 0},
        {"name and status", 1u << DURO_STATUS_COMPLETED, "orch-3", 0},
        {"created before the middle", 0, NULL, 1000000 + BIG / 6},
    };
    const size_t limit = 100;
    const long most = 10 * (long)(limit + 1);
    char args[4096], what[128];
    /* the provider prepares none of them: each is planned with its values,
     * as the EXPLAINs below are (force_custom_plan) */
    uint64_t prepared = duro__pg_statements_prepared(p);
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        for (int order = 0; order <= DURO_ORDER_UPDATED_DESC; order++) {
            if (cases[k].before != 0 && order != DURO_ORDER_CREATED_DESC)
                continue;
            duro_instance_query q;
            memset(&q, 0, sizeof(q));
            q.version = 1;
            q.order = order;
            q.limit = limit;
            q.status_mask = k == 2 ? live : cases[k].mask;
            q.name = cases[k].name;
            q.created_before_ms = cases[k].before;
            duro_error e;
            duro_instance_page *first = NULL;
            CHECK_PRC(p->query_instances(p, &q, &first, &e), DURO_OK, &e);
            CHECK_EQ(first->count, limit);
            for (int page = 0; page < 2; page++) {
                q.cursor = page == 0 ? NULL : first->next_cursor;
                duro__instance_plan pl;
                CHECK_PRC(duro__query_plan("postgres", &q, 1, &pl, &e), DURO_OK,
                          &e);
                if (!prepare_as_q(c, page_statement(&pl))) {
                    duro__query_plan_free(&pl);
                    continue;
                }
                plan_args(c, &pl, statement_params(page_statement(&pl)), args,
                          sizeof(args));
                snprintf(what, sizeof(what), "%s, order %d, page %d (%s)",
                         cases[k].what, order, page + 1, page_statement(&pl));
                check_reads(c, what, args, most);
                PQclear(PQexec(c, "DEALLOCATE q"));
                duro__query_plan_free(&pl);
            }
            duro_instance_page *next = NULL;
            CHECK_PRC(p->query_instances(p, &q, &next, &e), DURO_OK, &e);
            CHECK_EQ(next->count, limit);
            duro_instance_page_free(next);
            duro_instance_page_free(first);
        }
    }
    /* the control requests: 20,000 among 120,000 events */
    duro_control_event_query eq;
    memset(&eq, 0, sizeof(eq));
    eq.version = 1;
    eq.limit = limit;
    duro_error e;
    duro_control_event_list *l = NULL;
    CHECK_PRC(p->list_control_events(p, &eq, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, limit);
    for (int page = 0; page < 2; page++) {
        eq.cursor = page == 0 ? NULL : l->next_cursor;
        duro__event_plan pl;
        CHECK_PRC(duro__events_plan("postgres", &eq, 1, &pl, &e), DURO_OK, &e);
        if (prepare_as_q(c, "CONTROL_EVENTS")) {
            char *id = PQescapeLiteral(c, pl.before_id, strlen(pl.before_id));
            snprintf(args, sizeof(args),
                     "('%u', NULL, '%lld', '%lld', %s, '%lld', '%lld', '%zu')",
                     (unsigned)pl.mask, (long long)pl.since,
                     (long long)pl.before_ts, id,
                     (long long)pl.before_execution, (long long)pl.before_event,
                     pl.limit + 1);
            PQfreemem(id);
            snprintf(what, sizeof(what), "control requests, page %d", page + 1);
            check_reads(c, what, args, most);
            PQclear(PQexec(c, "DEALLOCATE q"));
        }
        duro__events_plan_free(&pl);
    }
    duro_control_event_list_free(l);
    CHECK_EQ(duro__pg_statements_prepared(p), prepared);
    PQfinish(c);
}

/* Text a PostgreSQL store cannot hold is refused as input: a name filter
 * that is not UTF-8 (SQLite stores any bytes and would find nothing). */
PV_TEST(query_text_that_is_not_utf8_is_refused)
{
    duro_provider *p = pv_open();
    duro_instance_query q;
    memset(&q, 0, sizeof(q));
    q.version = 1;
    duro_error e;
    duro_instance_page *page = NULL;
    const char **fields[] = {&q.name, &q.name_prefix, &q.name_contains,
                             &q.parent_instance};
    static const char *const names[] = {"name", "name_prefix", "name_contains",
                                        "parent_instance"};
    for (int f = 0; f < 4; f++) {
        *fields[f] = "a\xff";
        CHECK_PFAIL(p->query_instances(p, &q, &page, &e), DURO_INVALID, 0, &e);
        CHECK(page == NULL);
        CHECK_MSG(strstr(e.message, names[f]) != NULL &&
                      strstr(e.message, "UTF-8") != NULL,
                  "'%s'", e.message);
        *fields[f] = NULL;
    }
    duro_control_event_query eq;
    memset(&eq, 0, sizeof(eq));
    eq.version = 1;
    eq.requested_by = "\xc3";
    duro_control_event_list *l = NULL;
    CHECK_PFAIL(p->list_control_events(p, &eq, &l, &e), DURO_INVALID, 0, &e);
    CHECK(l == NULL);
}

/* Text the server cannot hold is refused before any statement, with
 * DURO_INVALID naming the field and the byte (not retryable), instead of
 * the server's 22021 as a storage failure: an id, a name, a payload of a
 * message, a lookup by an id. Nothing is stored. (The runtime and the
 * client refuse such text where it enters duro; this is the provider's
 * own guard, for callers of the provider itself.) */
PV_TEST(stored_text_that_is_not_utf8_is_refused_before_the_server)
{
    duro_provider *p = pv_open();
    duro_error e;
    duro_work_item start = {.kind = DURO_WORK_START,
                            .instance_id = "u-1",
                            .name = "Orch",
                            .payload = "caf\xe9"};
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &start, 0, &e), DURO_INVALID, 0,
                &e);
    CHECK_MSG(strstr(e.message,
                     "payload is not valid UTF-8 at byte 3 (0xE9)") != NULL,
              "'%s'", e.message);
    start.payload = NULL;
    start.instance_id = "u-\xff";
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &start, 0, &e), DURO_INVALID, 0,
                &e);
    CHECK_MSG(strstr(e.message, "instance id is not valid UTF-8") != NULL,
              "'%s'", e.message);
    start.instance_id = "u-1";
    start.name = "Or\xc0\xaf"
                 "ch";
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &start, 0, &e), DURO_INVALID, 0,
                &e);
    duro_instance_list *list = NULL;
    CHECK_PFAIL(p->get_instance(p, "u-\xed\xa0\x80", &list, &e), DURO_INVALID,
                0, &e);
    CHECK(list == NULL);
    /* nothing was stored; valid text still is */
    CHECK_PRC(p->get_instance(p, "u-1", &list, &e), DURO_NOT_FOUND, &e);
    duro_instance_list_free(list);
    list = NULL;
    start.name = "Orch";
    start.payload = "caf\xc3\xa9";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &start, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->get_instance(p, "u-1", &list, &e), DURO_OK, &e);
    duro_instance_list_free(list);
    pv_close(p);
}

/* Slot threads that ack activities at the same moment share statements
 * (WQ_ACK_COMPLETE_FETCH_MANY): 8 threads ack and claim 400 activities of
 * one instance; every completion is queued exactly once with its own
 * payload, no activity is handed out twice, nothing is left, and at least
 * one statement carried several acks. */
#define SHARE_ACTS 400
#define SHARE_THREADS 8

typedef struct share_ctx {
    duro_provider *p;
    _Atomic int seen[SHARE_ACTS + 2]; /* handed out, by activity id */
    _Atomic int failures;
} share_ctx;

static void *share_main(void *arg)
{
    share_ctx *x = arg;
    duro_error e;
    duro_worker_item *w = NULL;
    if (x->p->fetch_work_item(x->p, 60000, &w, &e) != DURO_OK) {
        atomic_fetch_add(&x->failures, 1);
        return NULL;
    }
    while (w != NULL) {
        uint64_t id = w->item.source_id;
        if (id < 2 || id > SHARE_ACTS + 1) {
            atomic_fetch_add(&x->failures, 1);
            break;
        }
        atomic_fetch_add(&x->seen[id], 1);
        char out[32];
        snprintf(out, sizeof(out), "\"done-%llu\"", (unsigned long long)id);
        duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                               .instance_id = w->item.instance_id,
                               .execution_id = 1,
                               .source_id = id,
                               .payload = out};
        duro_worker_item *next = NULL;
        int rc = x->p->ack_and_fetch_work_item(x->p, w->lock_token, &done,
                                               60000, &next, &e);
        duro_worker_item_free(w);
        w = next;
        if (rc != DURO_OK) {
            atomic_fetch_add(&x->failures, 1);
            break;
        }
    }
    duro_worker_item_free(w);
    return NULL;
}

/* One round on instance `id`: the checks above but the sharing. */
static void share_round(duro_provider *p, const char *instance)
{
    share_ctx *x = calloc(1, sizeof(*x));
    CHECK(x != NULL);
    x->p = p;
    duro_error e;
    cycle_start(p, instance);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    duro_work_item *acts = calloc(SHARE_ACTS, sizeof(*acts));
    CHECK(acts != NULL);
    for (int i = 0; i < SHARE_ACTS; i++)
        acts[i] = (duro_work_item){.kind = DURO_WORK_ACTIVITY_EXECUTE,
                                   .instance_id = instance,
                                   .execution_id = 1,
                                   .source_id = (uint64_t)i + 2,
                                   .name = "act"};
    duro_event started = {.event_id = 1,
                          .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                          .name = "orch"};
    duro_instance_meta m = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack a = {.execution_id = 1,
                       .history_delta = &started,
                       .history_delta_count = 1,
                       .worker_items = acts,
                       .worker_item_count = SHARE_ACTS,
                       .meta = &m};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &a, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    free(acts);
    pthread_t t[SHARE_THREADS];
    for (int i = 0; i < SHARE_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, share_main, x) == 0);
    for (int i = 0; i < SHARE_THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(atomic_load(&x->failures), 0);
    for (int id = 2; id <= SHARE_ACTS + 1; id++)
        CHECK_MSG(atomic_load(&x->seen[id]) == 1,
                  "activity %d handed out %d times", id,
                  atomic_load(&x->seen[id]));
    uint64_t left = 1;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, NULL, &left, &e), DURO_OK,
              &e);
    CHECK_EQ(left, 0);
    /* one completion per activity, each with its own payload */
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    CHECK_EQ(item->message_count, SHARE_ACTS);
    int *got = calloc(SHARE_ACTS + 2, sizeof(*got));
    CHECK(got != NULL);
    for (size_t i = 0; i < item->message_count; i++) {
        const duro_work_item *c = &item->messages[i];
        char want[32];
        snprintf(want, sizeof(want), "\"done-%llu\"",
                 (unsigned long long)c->source_id);
        CHECK(c->kind == DURO_WORK_ACTIVITY_COMPLETED);
        CHECK(c->source_id >= 2 && c->source_id <= SHARE_ACTS + 1);
        CHECK_STR(c->payload, want);
        got[c->source_id]++;
    }
    for (int id = 2; id <= SHARE_ACTS + 1; id++)
        CHECK_MSG(got[id] == 1, "completion of %d queued %d times", id,
                  got[id]);
    free(got);
    duro_orch_item_free(item);
    free(x);
}

/* Whether acks share a statement depends on their timing: on a loaded
 * machine the threads may take turns for a whole round, so rounds go on
 * (each checked in full) until one statement carried several acks, or a
 * deadline. */
PV_TEST(activity_acks_of_many_threads_share_statements)
{
    duro_provider *p = pv_open();
    int64_t deadline = test_now_ms() + 60000;
    int round = 0;
    do {
        char id[32];
        snprintf(id, sizeof(id), "fan-%d", round++);
        share_round(p, id);
    } while (duro__pg_combined_acks_max(p) < 2 && test_now_ms() < deadline);
    CHECK_MSG(duro__pg_combined_acks_max(p) >= 2,
              "in %d rounds no statement carried two acks", round);
    fprintf(stderr, "  at most %llu acks in one statement (%d rounds)\n",
            (unsigned long long)duro__pg_combined_acks_max(p), round);
}

/* A batch claim (READY_CLAIM_MANY) that takes an instance whose ready row
 * says ready while nothing of it is visible (the row is stale) repairs the
 * row - ready at its earliest message, unlocked - returns the others, and
 * leaves the stale instance's messages untagged. */
/* The text of a one-row, one-column query ("" when NULL), into out. */
static void query_text(PGconn *c, const char *sql, char *out, size_t size)
{
    PGresult *r = PQexec(c, sql);
    out[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(out, size, "%s", PQgetvalue(r, 0, 0));
    else
        snprintf(out, size, "(query failed: %s)", PQresultErrorMessage(r));
    PQclear(r);
}

/* The first turn of instance `id` in one of three shapes (its last
 * character, '0'..'2'), built in t: 0 stays Running with metadata naming
 * neither orchestration nor version, a custom status and a problem; 1
 * fails with a new name, version, error and parent; 2 continues as new
 * with an output. */
static const duro_orch_ack *shaped_turn(const char *id, cycle_turn *t)
{
    memset(t, 0, sizeof(*t));
    int shape = id[strlen(id) - 1] - '0';
    t->events[0] = (duro_event){.event_id = 1,
                                .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                                .name = "orch"};
    t->ack.history_delta_count = 1;
    if (shape == 0) {
        t->meta = (duro_instance_meta){.status = DURO_STATUS_RUNNING,
                                       .custom_status_set = 1,
                                       .custom_status = "\"cs\"",
                                       .problem = "stuck on something"};
    } else if (shape == 1) {
        t->events[1] = (duro_event){.event_id = 2,
                                    .kind = DURO_EVENT_ORCHESTRATION_FAILED,
                                    .error = "boom"};
        t->ack.history_delta_count = 2;
        t->meta = (duro_instance_meta){.status = DURO_STATUS_FAILED,
                                       .name = "orch2",
                                       .version = "2.0",
                                       .error = "boom",
                                       .category = DURO_CATEGORY_APPLICATION,
                                       .parent_instance = "parent-x",
                                       .parent_execution = 3,
                                       .parent_event_id = 7};
    } else {
        t->events[1] = (duro_event){.event_id = 2,
                                    .kind = DURO_EVENT_CONTINUED_AS_NEW,
                                    .payload = "\"next\""};
        t->ack.history_delta_count = 2;
        t->meta = (duro_instance_meta){.status = DURO_STATUS_CONTINUED_AS_NEW,
                                       .output = "\"o\""};
    }
    t->ack.execution_id = 1;
    t->ack.history_delta = t->events;
    t->ack.meta = &t->meta;
    return &t->ack;
}

/* Starts <prefix>0..2, each with a message due in a minute for the
 * instance and one for its execution 1 (a timer). */
static void shaped_start(duro_provider *p, char prefix)
{
    duro_error e;
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof(id), "%c%d", prefix, i);
        cycle_start(p, id);
        duro_work_item ev = {.kind = DURO_WORK_EXTERNAL_EVENT,
                             .instance_id = id,
                             .name = "later",
                             .payload = "1"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &ev, 60000, &e), DURO_OK, &e);
        duro_work_item timer = {.kind = DURO_WORK_TIMER_FIRED,
                                .instance_id = id,
                                .execution_id = 1,
                                .source_id = 9};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &timer, 60000, &e), DURO_OK,
                  &e);
    }
}

/* What the rows of instances and executions and the queued messages of
 * instance `id` hold, but for times and ids (times: only whether set), as
 * row literals (a NULL is an empty field). */
static void shaped_rows(PGconn *c, const char *id, char *out, size_t size)
{
    char sql[1024], part[3][512];
    snprintf(sql, sizeof(sql),
             "SELECT ROW(status, name, version, output, error, category, "
             "custom_status, parent_instance, parent_execution, "
             "parent_event_id, last_problem, last_problem_ms IS NULL, "
             "finished_ms IS NULL, next_attempt_ms IS NULL, execution_id) "
             "FROM instances WHERE instance_id = '%s'",
             id);
    query_text(c, sql, part[0], sizeof(part[0]));
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(ROW(execution_id, status, name, version, "
             "output, error, category, completed_ms IS NULL)::text, ';' "
             "ORDER BY execution_id) FROM executions WHERE instance_id = '%s'",
             id);
    query_text(c, sql, part[1], sizeof(part[1]));
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(ROW(kind, execution_id, name)::text, ';' "
             "ORDER BY id) FROM orchestrator_queue WHERE instance_id = '%s'",
             id);
    query_text(c, sql, part[2], sizeof(part[2]));
    snprintf(out, size, "%s / %s / %s", part[0], part[1], part[2]);
}

/* A batch's set-based writes (EXEC_CREATE_MANY, META_WRITE_MANY) leave
 * the rows one ack at a time leaves, field by field: three first turns of
 * every shape (shaped_turn) acked one by one on o0..o2, then in one batch
 * on b0..b2. */
PV_TEST(a_batch_writes_the_rows_one_ack_at_a_time_writes)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "");
    if (c == NULL)
        return;
    duro_error e;
    cycle_turn turns[3];
    shaped_start(p, 'o');
    for (int i = 0; i < 3; i++) {
        duro_orch_item *item = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e),
                  DURO_OK, &e);
        CHECK(item != NULL && item->instance_id[0] == 'o');
        CHECK_PRC(p->ack_orchestration_item(
                      p, item->lock_token,
                      shaped_turn(item->instance_id, &turns[0]), &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
    }
    shaped_start(p, 'b');
    duro_orch_item *items[3] = {NULL};
    size_t n = 0;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(p, 0, NULL, NULL, 60000,
                                                   NULL, 3, items, &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 3);
    const char *tokens[3];
    duro_orch_ack acks[3];
    for (size_t i = 0; i < n; i++) {
        CHECK(items[i]->instance_id[0] == 'b');
        tokens[i] = items[i]->lock_token;
        acks[i] = *shaped_turn(items[i]->instance_id, &turns[i]);
        acks[i].history_delta = turns[i].events;
        acks[i].meta = &turns[i].meta;
    }
    duro_orch_item *none[1] = {NULL};
    size_t got = 99;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(p, n, tokens, acks, 60000,
                                                   NULL, 0, none, &got, &e),
              DURO_OK, &e);
    CHECK_EQ(got, 0);
    for (size_t i = 0; i < n; i++)
        duro_orch_item_free(items[i]);
    char one[1600], batch[1600];
    for (int i = 0; i < 3; i++) {
        char o[4], b[4];
        snprintf(o, sizeof(o), "o%d", i);
        snprintf(b, sizeof(b), "b%d", i);
        shaped_rows(c, o, one, sizeof(one));
        shaped_rows(c, b, batch, sizeof(batch));
        CHECK(strstr(one, "query failed") == NULL);
        CHECK_STR(batch, one);
    }
    /* the shapes were written at all: the execution's name came from the
     * instance, the failed instance's queue is empty, the continued one
     * keeps its event and loses its timer */
    shaped_rows(c, "b0", batch, sizeof(batch));
    CHECK_MSG(strstr(batch, "/ (1,2,orch,,,,0,t) /") != NULL &&
                  strstr(batch, "stuck on something") != NULL,
              "b0: %s", batch);
    shaped_rows(c, "b1", batch, sizeof(batch));
    CHECK_MSG(strstr(batch, "(4,orch2,2.0,,boom,1,,parent-x,3,7,") != NULL,
              "b1: %s", batch);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM orchestrator_queue "
                          "WHERE instance_id = 'b1'"),
             0);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM orchestrator_queue "
                          "WHERE instance_id = 'b2' AND kind = 5"),
             1);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM orchestrator_queue "
                          "WHERE instance_id = 'b2' AND kind = 4"),
             0);
    PQfinish(c);
}

/* A batch's first turns write each instance row once: the new execution
 * goes with the status in META_WRITE_MANY, not in an update of its own
 * (every update of an instance row writes an entry in each of its 11
 * indexes). Counted by a row trigger the test adds. */
PV_TEST(a_batch_first_turn_updates_its_instance_row_once)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "");
    if (c == NULL)
        return;
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE updates(instance_id text);"
             "CREATE FUNCTION count_update() RETURNS trigger LANGUAGE plpgsql"
             " AS $f$BEGIN INSERT INTO \"%s\".updates"
             " VALUES(NEW.instance_id); RETURN NULL; END$f$;"
             "CREATE TRIGGER count_update AFTER UPDATE ON instances"
             " FOR EACH ROW EXECUTE FUNCTION count_update()",
             duro__pg_schema(p));
    CHECK(admin_exec(c, sql));
    cycle_start(p, "a");
    cycle_start(p, "b");
    duro_error e;
    duro_orch_item *got[2] = {NULL};
    size_t n = 99;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(p, 0, NULL, NULL, 60000,
                                                   NULL, 2, got, &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 2);
    if (n == 2) {
        duro_event ev[2] = {{.event_id = 1,
                             .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                             .name = "orch",
                             .timestamp_ms = 1},
                            {.event_id = 2,
                             .kind = DURO_EVENT_ACTIVITY_SCHEDULED,
                             .name = "act",
                             .timestamp_ms = 1}};
        duro_instance_meta running = {.status = DURO_STATUS_RUNNING,
                                      .name = "orch"};
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = ev,
                             .history_delta_count = 2,
                             .meta = &running};
        const char *tokens[2] = {got[0]->lock_token, got[1]->lock_token};
        duro_orch_ack acks[2] = {ack, ack};
        duro_orch_item *next[2] = {NULL};
        size_t m = 99;
        CHECK_PRC(p->ack_and_fetch_orchestration_items(
                      p, 2, tokens, acks, 60000, NULL, 2, next, &m, &e),
                  DURO_OK, &e);
        CHECK_EQ(m, 0);
    }
    for (size_t i = 0; i < n && i < 2; i++)
        duro_orch_item_free(got[i]);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM updates WHERE instance_id = "
                          "'a'"),
             1);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM updates WHERE instance_id = "
                          "'b'"),
             1);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM instances WHERE "
                          "execution_id = 1 AND status = 2"),
             2);
    CHECK_EQ(query_int(c, "SELECT COUNT(*) FROM executions WHERE "
                          "execution_id = 1 AND status = 2"),
             2);
    PQfinish(c);
}

PV_TEST(a_batch_claim_repairs_an_instance_with_nothing_visible)
{
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "");
    if (c == NULL)
        return;
    cycle_start(p, "a");
    cycle_start(p, "b");
    cycle_start(p, "c");
    CHECK(admin_exec(c, "UPDATE orchestrator_queue SET visible_at = "
                        "9000000000000 WHERE instance_id = 'b'"));
    duro_orch_item *items[4] = {NULL};
    size_t n = 99;
    duro_error e;
    int rc = p->ack_and_fetch_orchestration_items(p, 0, NULL, NULL, 60000, NULL,
                                                  4, items, &n, &e);
    int64_t ready_at = query_int(c, "SELECT ready_at FROM orchestrator_ready "
                                    "WHERE instance_id = 'b' "
                                    "AND lock_token IS NULL");
    int64_t tagged = query_int(c, "SELECT COUNT(*) FROM orchestrator_queue "
                                  "WHERE instance_id = 'b' "
                                  "AND lock_token IS NOT NULL");
    PQfinish(c);
    CHECK_PRC(rc, DURO_OK, &e);
    CHECK_EQ(n, 2);
    CHECK_STR(items[0]->instance_id, "a");
    CHECK_STR(items[1]->instance_id, "c");
    CHECK_EQ(ready_at, 9000000000000LL);
    CHECK_EQ(tagged, 0);
    for (size_t i = 0; i < n; i++)
        duro_orch_item_free(items[i]);
}

/* A claim that is its transaction's only write (fetch_work_item's one
 * statement, fetch_orchestration_item's transaction) and the ack of an
 * activity with its completion (with or without the next claim) commit
 * without waiting for the WAL flush: synchronous_commit is off inside
 * their transaction, and on again after it, so what follows on the same
 * connection stays synchronous. The claims inside a turn's ack, the turn's
 * release and an ack without a completion never turn it off. Each
 * statement runs for real (on empty queues). */
PV_TEST(pg_claims_and_activity_acks_commit_without_waiting_for_the_flush)
{
    static const struct {
        const char *name;
        const char *args;
        const char *inside; /* synchronous_commit after it, in its xact */
    } cases[] = {
        {"WQ_FETCH_ASYNC", "('x', '0', '0')", "off"},
        {"READY_CLAIM_ASYNC", "('0', 'x', '0')", "off"},
        {"WQ_FETCH", "('x', '0', '0')", "on"},
        {"READY_CLAIM", "('0', 'x', '0')", "on"},
        {"READY_CLAIM_MANY_ASYNC", "('0', 'x', '0', '16')", "off"},
        {"READY_CLAIM_MANY", "('0', 'x', '0', '16')", "on"},
        {"READY_ACK_SETTLE_MANY", "('{i}', '{t}', '{1}')", "on"},
        {"WQ_ACK_COMPLETE", WQ_ACK_ARGS, "off"},
        {"WQ_ACK_COMPLETE_FETCH", WQ_ACK_ARGS, "off"},
        {"WQ_ACK", "('0', 'x')", "on"},
        {"READY_ACK_SETTLE", "('i', 't', '1')", "on"},
    };
    duro_provider *p;
    PGconn *c = admin_in_schema(&p, "SET synchronous_commit = on");
    if (c == NULL)
        return;
    char sql[256];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        if (!prepare_as_q(c, cases[k].name))
            continue;
        for (int explicit_xact = 0; explicit_xact < 2; explicit_xact++) {
            /* in a transaction block: SHOW sees the statement's setting;
             * alone (an implicit transaction): nothing may outlive it */
            if (explicit_xact)
                PQclear(PQexec(c, "BEGIN"));
            snprintf(sql, sizeof(sql), "EXECUTE q%s", cases[k].args);
            PGresult *r = PQexec(c, sql);
            CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK ||
                          PQresultStatus(r) == PGRES_COMMAND_OK,
                      "%s: %s", cases[k].name, PQresultErrorMessage(r));
            PQclear(r);
            if (explicit_xact) {
                /* read, end the transaction, then check (a failed check
                 * ends the test, and must not leave it open) */
                char inside[64];
                r = PQexec(c, "SHOW synchronous_commit");
                snprintf(inside, sizeof(inside), "%s",
                         PQresultStatus(r) == PGRES_TUPLES_OK
                             ? PQgetvalue(r, 0, 0)
                             : PQresultErrorMessage(r));
                PQclear(r);
                PQclear(PQexec(c, "COMMIT"));
                CHECK_MSG(strcmp(inside, cases[k].inside) == 0,
                          "%s: synchronous_commit %s in its transaction, "
                          "expected %s",
                          cases[k].name, inside, cases[k].inside);
            }
            r = PQexec(c, "SHOW synchronous_commit");
            CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK &&
                          strcmp(PQgetvalue(r, 0, 0), "on") == 0,
                      "%s: synchronous_commit is %s after its transaction",
                      cases[k].name,
                      PQresultStatus(r) == PGRES_TUPLES_OK
                          ? PQgetvalue(r, 0, 0)
                          : PQresultErrorMessage(r));
            PQclear(r);
        }
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

/* Two providers on one fresh schema with different connection strings (so
 * no in-process notifier is shared), both listening; 0 when either could
 * not open (the test failed). */
static int open_far_pair(duro_provider **a, duro_provider **b)
{
    const char *schema = new_schema(pv_test_name);
    char name[64];
    snprintf(name, sizeof(name), "%s", schema);
    *a = open_schema(name, "&application_name=duro_pv_a");
    *b = open_schema(name, "&application_name=duro_pv_b");
    CHECK(*a != NULL && *b != NULL);
    if (*a == NULL || *b == NULL) {
        duro_provider_close(*a);
        duro_provider_close(*b);
        return 0;
    }
    WAIT_UNTIL(duro__pg_listening(*a) && duro__pg_listening(*b), 5000);
    return 1;
}

/* A waiter on `a` (an empty fetch, then a 30 s wait) must return soon
 * after act(b) commits work. */
static void far_wait_ends_after(duro_provider *a, duro_provider *b,
                                void (*act)(duro_provider *b))
{
    far_waiter w = {.p = a};
    atomic_init(&w.fetched, 0);
    atomic_init(&w.done, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, far_waiter_main, &w), 0);
    WAIT_UNTIL(atomic_load(&w.fetched), 5000);
    act(b);
    /* far below the 30 s the wait would otherwise take */
    WAIT_UNTIL(atomic_load(&w.done), 10000);
    if (!atomic_load(&w.done))
        a->wake(a, 1);
    pthread_join(t, NULL);
    CHECK_MSG(w.waited_ms < 10000, "the wait took %lld ms",
              (long long)w.waited_ms);
}

static void enqueue_start_x(duro_provider *b)
{
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "x", .name = "orch"};
    CHECK_PRC(b->enqueue_for_orchestrator(b, &st, 0, &e), DURO_OK, &e);
}

PV_TEST(work_from_another_process_wakes_a_wait_through_notify)
{
    duro_provider *a, *b;
    if (!open_far_pair(&a, &b))
        return;
    far_wait_ends_after(a, b, enqueue_start_x);
    CHECK(duro__pg_notifications_received(a) > 0);
    duro_provider_close(a);
    duro_provider_close(b);
}

/* A notification counts the items it announces ("o3w12"), and a waiter
 * in another process is woken once per item, not all waiters per
 * notification: the sum of the counts another process hears equals the
 * items committed, however the commits were coalesced. */
PV_TEST(notifications_count_the_items_they_announce)
{
    char buf[64];
    size_t items = 0;
    duro__pg_notice_format(buf, sizeof(buf), 3, 12, 0);
    CHECK_STR(buf, "o3w12");
    duro__pg_notice_format(buf, sizeof(buf), 0, 1, 2);
    CHECK_STR(buf, "w1c");
    duro__pg_notice_format(buf, sizeof(buf), 0, 0, 0);
    CHECK_STR(buf, "");
    CHECK(duro__pg_notice_count("o3w12", 'o', &items) && items == 3);
    CHECK(duro__pg_notice_count("o3w12", 'w', &items) && items == 12);
    CHECK(!duro__pg_notice_count("o3w12", 'c', &items));
    CHECK(duro__pg_notice_count("w1c", 'c', &items));
    /* an older version's payload, without counts, wakes every waiter */
    CHECK(duro__pg_notice_count("ow", 'w', &items) && items == SIZE_MAX);
    CHECK(duro__pg_notice_count("o0", 'o', &items) && items == SIZE_MAX);

    duro_provider *a, *b;
    if (!open_far_pair(&a, &b))
        return;
    duro_error e;
    const char *ids[] = {"n1", "n2", "n3", "n4", "n5"};
    for (int i = 0; i < 5; i++) {
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = ids[i], .name = "orch"};
        CHECK_PRC(b->enqueue_for_orchestrator(b, &st, 0, &e), DURO_OK, &e);
    }
    WAIT_UNTIL(duro__pg_notified_items(a, DURO_QUEUE_ORCHESTRATOR) >= 5, 10000);
    CHECK_EQ(duro__pg_notified_items(a, DURO_QUEUE_ORCHESTRATOR), 5);
    CHECK_EQ(duro__pg_notified_items(a, DURO_QUEUE_WORKER), 0);
    duro_provider_close(a);
    duro_provider_close(b);
}

/* A process that closes its store right after committing work (a `duro
 * cancel`) still announces it: the commits after the first come within
 * the listener's gap between notifications, and the close sends what the
 * listener still held. */
PV_TEST(work_committed_just_before_a_close_is_announced)
{
    duro_provider *a, *b;
    if (!open_far_pair(&a, &b))
        return;
    duro_error e;
    const char *ids[] = {"z1", "z2", "z3"};
    for (int i = 0; i < 3; i++) {
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = ids[i], .name = "orch"};
        CHECK_PRC(b->enqueue_for_orchestrator(b, &st, 0, &e), DURO_OK, &e);
    }
    duro_provider_close(b);
    WAIT_UNTIL(duro__pg_notified_items(a, DURO_QUEUE_ORCHESTRATOR) >= 3, 10000);
    CHECK_EQ(duro__pg_notified_items(a, DURO_QUEUE_ORCHESTRATOR), 3);
    duro_provider_close(a);
}

/* A commit whose items idle waiters of this process take is not announced
 * to the others: they would only run empty claims (and an instance's next
 * turn stays with the process that holds its engine). Items beyond the
 * idle waiters are. */
PV_TEST(work_an_idle_local_waiter_takes_is_not_announced)
{
    duro_provider *a, *b;
    if (!open_far_pair(&a, &b))
        return;
    duro_error e;
    /* Two waiters: the listener's wake-up at connect may have left one
     * token owed to the next wait, which counts against them. */
    far_waiter w[2] = {{.p = a}, {.p = a}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        atomic_init(&w[i].fetched, 0);
        atomic_init(&w[i].done, 0);
        CHECK_EQ(pthread_create(&t[i], NULL, far_waiter_main, &w[i]), 0);
    }
    WAIT_UNTIL(duro__pg_idle_waiters(a, DURO_QUEUE_ORCHESTRATOR) >= 1, 10000);
    CHECK(duro__pg_idle_waiters(a, DURO_QUEUE_ORCHESTRATOR) >= 1);
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "l1", .name = "orch"};
    CHECK_PRC(a->enqueue_for_orchestrator(a, &st, 0, &e), DURO_OK, &e);
    CHECK_EQ(duro__pg_announced_items(a, DURO_QUEUE_ORCHESTRATOR), 0);
    /* a waiter here is woken at once */
    WAIT_UNTIL(atomic_load(&w[0].done) || atomic_load(&w[1].done), 10000);
    CHECK(atomic_load(&w[0].done) || atomic_load(&w[1].done));
    a->wake(a, 1); /* ends the other */
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    /* nobody waits here now: the next item is the other processes' too */
    st.instance_id = "l2";
    CHECK_PRC(a->enqueue_for_orchestrator(a, &st, 0, &e), DURO_OK, &e);
    CHECK_EQ(duro__pg_announced_items(a, DURO_QUEUE_ORCHESTRATOR), 1);
    WAIT_UNTIL(duro__pg_notified_items(b, DURO_QUEUE_ORCHESTRATOR) >= 1, 10000);
    CHECK_EQ(duro__pg_notified_items(b, DURO_QUEUE_ORCHESTRATOR), 1);
    duro_provider_close(a);
    duro_provider_close(b);
}

/* Consumes what is queued for "x" (an ack without history or meta; with
 * `begin`, its first turn: then it is Running, and a request goes on its
 * queue instead of deciding it at once). */
static void consume_x(duro_provider *p, int begin)
{
    duro_error e;
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    CHECK_STR(item->instance_id, "x");
    duro_orch_ack ack = {0};
    duro_event started = {.event_id = 1,
                          .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                          .name = "orch"};
    duro_instance_meta m = {.status = DURO_STATUS_RUNNING};
    if (begin) {
        ack.execution_id = 1;
        ack.history_delta = &started;
        ack.history_delta_count = 1;
        ack.meta = &m;
    }
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
}

static void terminate_x(duro_provider *b)
{
    duro_error e;
    const char *id = "x";
    duro_control_result r;
    CHECK_PRC(b->control_instances(b, DURO_CONTROL_TERMINATE, &id, 1, "stop",
                                   NULL, &r, &e),
              DURO_OK, &e);
    CHECK_EQ(r.outcome, DURO_CONTROL_OUTCOME_REQUESTED);
}

static void suspend_all(duro_provider *b)
{
    duro_error e;
    duro_bulk_filter f = {0};
    duro_bulk_result *r = NULL;
    CHECK_PRC(b->control_matching(b, DURO_CONTROL_SUSPEND, &f, "pause", NULL, 0,
                                  10, &r, &e),
              DURO_OK, &e);
    CHECK(r != NULL && r->count == 1);
    duro_bulk_result_free(r);
}

/* control_instances and control_matching announce what they enqueue as an
 * enqueue does: a wait in another process ends at once. */
PV_TEST(controls_from_another_process_wake_a_wait_through_notify)
{
    duro_provider *a, *b;
    if (!open_far_pair(&a, &b))
        return;
    enqueue_start_x(b);
    WAIT_UNTIL(duro__pg_notifications_received(a) > 0, 5000);
    consume_x(a, 1); /* x Running, nothing queued */
    uint64_t heard = duro__pg_notifications_received(a);
    far_wait_ends_after(a, b, terminate_x);
    CHECK(duro__pg_notifications_received(a) > heard);
    consume_x(a, 0);
    heard = duro__pg_notifications_received(a);
    far_wait_ends_after(a, b, suspend_all);
    CHECK(duro__pg_notifications_received(a) > heard);
    consume_x(a, 0);
    duro_provider_close(a);
    duro_provider_close(b);
}

/* ---- processes competing for the queues ----------------------------------
 * Two processes, each with its own provider on one schema, take turns and
 * activities of RACE_INSTANCES instances until every instance completed;
 * one acks with the plain calls, one with the ack-and-fetch calls, one
 * fetches and acks up to RACE_BATCH turns per call (the runtime's
 * ack_and_fetch_orchestration_items). Locks last far longer than the race, so
 * nothing is handed out again legitimately: each turn and each activity must
 * reach exactly one process. Each child writes a line per item it was handed to
 * its own file; the parent checks them after both exited. */

#define RACE_CHILDREN 3
#define RACE_BATCH 4 /* the batching child's most instances per call */
#ifdef DURO_SANITIZE_BUILD
#define RACE_INSTANCES 1000
#else
#define RACE_INSTANCES 2000
#endif
#define RACE_LOCK_MS 120000
#define RACE_DEADLINE_MS 240000

static int race_all_done(duro_provider *p)
{
    duro_store_stats *st = NULL;
    duro_error e;
    if (p->read_store_stats(p, &st, &e) != DURO_OK)
        return 0;
    uint64_t completed = 0;
    for (size_t i = 0; i < st->instance_count; i++)
        if (st->instances[i].status == DURO_STATUS_COMPLETED)
            completed += st->instances[i].count;
    duro_free(st);
    return completed >= RACE_INSTANCES;
}

/* "o <instance> <token> <history_total>" or "w <instance> <token>". */
static void race_note_orch(FILE *log, const duro_orch_item *item)
{
    if (item != NULL)
        fprintf(log, "o %s %s %llu\n", item->instance_id, item->lock_token,
                (unsigned long long)item->history_total);
}

static void race_note_work(FILE *log, const duro_worker_item *w)
{
    if (w != NULL)
        fprintf(log, "w %s %s\n", w->item.instance_id, w->lock_token);
}

/* A child's work until every instance completed; 0, or 1 after writing
 * "error ..." to the log. A retryable failure (a serialization failure)
 * repeats the same call. */
/* The orchestration side of the batching child: up to RACE_BATCH items
 * held in items[0 .. *count), acked together with the fetch of the next. */
static int race_batch_turns(duro_provider *p, FILE *log, duro_orch_item **items,
                            size_t *count, duro_error *e)
{
    int rc = DURO_OK;
    if (*count == 0) {
        rc = p->ack_and_fetch_orchestration_items(
            p, 0, NULL, NULL, RACE_LOCK_MS, NULL, RACE_BATCH, items, count, e);
        for (size_t i = 0; i < *count; i++)
            race_note_orch(log, items[i]);
    }
    if (rc != DURO_OK || *count == 0)
        return rc;
    cycle_turn t[RACE_BATCH];
    const char *tokens[RACE_BATCH];
    duro_orch_ack acks[RACE_BATCH];
    for (size_t i = 0; i < *count; i++) {
        acks[i] = *cycle_ack(items[i], &t[i]);
        tokens[i] = items[i]->lock_token;
    }
    duro_orch_item *next[RACE_BATCH] = {NULL};
    size_t got = 0;
    rc = p->ack_and_fetch_orchestration_items(
        p, *count, tokens, acks, RACE_LOCK_MS, NULL, RACE_BATCH, next, &got, e);
    if (rc != DURO_OK)
        return rc;
    for (size_t i = 0; i < *count; i++)
        duro_orch_item_free(items[i]);
    for (size_t i = 0; i < got; i++) {
        items[i] = next[i];
        race_note_orch(log, items[i]);
    }
    *count = got;
    return DURO_OK;
}

/* mode 0: separate calls; 1: ack-and-fetch; 2: batches of turns. */
static int race_loop(duro_provider *p, FILE *log, int mode)
{
    duro_error e;
    duro_orch_item *item = NULL;
    duro_orch_item *batch[RACE_BATCH] = {NULL};
    size_t held = 0;
    duro_worker_item *w = NULL;
    int combined = mode >= 1;
    int64_t deadline = test_now_ms() + RACE_DEADLINE_MS;
    int retries = 0, rc = DURO_OK;
    while (test_now_ms() < deadline) {
        int worked = item != NULL || w != NULL || held > 0;
        rc = DURO_OK;
        if (mode == 2) {
            rc = race_batch_turns(p, log, batch, &held, &e);
            worked |= held > 0;
        } else if (item == NULL) {
            rc = p->fetch_orchestration_item(p, RACE_LOCK_MS, NULL, &item, &e);
            race_note_orch(log, item);
        }
        if (rc == DURO_OK && item != NULL) {
            worked = 1;
            cycle_turn t;
            const duro_orch_ack *a = cycle_ack(item, &t);
            duro_orch_item *next = NULL;
            rc = combined
                     ? p->ack_and_fetch_orchestration_item(p, item->lock_token,
                                                           a, RACE_LOCK_MS,
                                                           NULL, &next, &e)
                     : p->ack_orchestration_item(p, item->lock_token, a, &e);
            if (rc == DURO_OK) {
                duro_orch_item_free(item);
                item = next;
                race_note_orch(log, item);
            }
        }
        if (rc == DURO_OK && w == NULL) {
            rc = p->fetch_work_item(p, RACE_LOCK_MS, &w, &e);
            race_note_work(log, w);
        }
        if (rc == DURO_OK && w != NULL) {
            worked = 1;
            duro_work_item done = cycle_completion(w->item.instance_id);
            duro_worker_item *next = NULL;
            rc = combined ? p->ack_and_fetch_work_item(p, w->lock_token, &done,
                                                       RACE_LOCK_MS, &next, &e)
                          : p->ack_work_item(p, w->lock_token, &done, &e);
            if (rc == DURO_OK) {
                duro_worker_item_free(w);
                w = next;
                race_note_work(log, w);
            }
        }
        if (rc != DURO_OK && (!e.retryable || ++retries > 1000))
            break;
        if (rc != DURO_OK)
            continue;
        if (!worked && race_all_done(p))
            break;
        if (!worked)
            p->wait_for_work(p, DURO_QUEUE_ORCHESTRATOR, 10, &e);
    }
    duro_orch_item_free(item);
    for (size_t i = 0; i < held; i++)
        duro_orch_item_free(batch[i]);
    duro_worker_item_free(w);
    if (rc != DURO_OK)
        fprintf(log, "error %s %s\n", duro_errname(rc), e.message);
    else if (!race_all_done(p))
        fprintf(log, "error timed out after %d ms\n", RACE_DEADLINE_MS);
    else
        fprintf(log, "retries %d\n", retries);
    return rc != DURO_OK || !race_all_done(p);
}

/* A racing child: waits until the parent closes `go`, opens its own
 * provider, races, and exits without returning into the harness. */
static void race_child(const char *schema, int go, const char *log_path,
                       int mode)
{
    alarm(RACE_DEADLINE_MS / 1000 + 60); /* never outlives a failed parent */
    char c;
    while (read(go, &c, 1) < 0 && errno == EINTR)
        ;
    close(go);
    FILE *log = fopen(log_path, "w");
    duro_provider *p = log != NULL ? open_schema(schema, "") : NULL;
    int rc = p != NULL ? race_loop(p, log, mode) : 1;
    duro_provider_close(p);
    if (log != NULL)
        fclose(log);
    _exit(rc);
}

/* Waits for every child (exits[i]: its exit status, 128 + signal when
 * killed); once one fails, the others are stopped: without it they would
 * wait for the failed one's locks to expire. */
static void race_wait(const pid_t *pids, int *exits)
{
    int running = 0;
    for (int i = 0; i < RACE_CHILDREN; i++) {
        exits[i] = -1;
        running += pids[i] > 0;
    }
    while (running > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break;
        for (int i = 0; i < RACE_CHILDREN; i++) {
            if (pids[i] != pid)
                continue;
            exits[i] = WIFEXITED(status) ? WEXITSTATUS(status)
                                         : 128 + WTERMSIG(status);
            running--;
        }
        int failed = 0;
        for (int i = 0; i < RACE_CHILDREN; i++)
            failed |= exits[i] > 0;
        for (int i = 0; failed && i < RACE_CHILDREN; i++)
            if (exits[i] < 0 && pids[i] > 0)
                kill(pids[i], SIGTERM);
    }
}

typedef struct race_tally {
    uint8_t first[RACE_INSTANCES];  /* turns handed out with no history */
    uint8_t second[RACE_INSTANCES]; /* ... with the first turn's two events */
    uint8_t work[RACE_INSTANCES];   /* activities handed out */
    char **tokens;
    size_t token_count;
    size_t turns[RACE_CHILDREN], activities[RACE_CHILDREN];
    int retries[RACE_CHILDREN];
} race_tally;

static int compare_tokens(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads child n's log into t; fails the test on a malformed line or a
 * child's error. */
static void race_read_log(race_tally *t, int n, const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "child %d left no log", n);
    if (f == NULL)
        return;
    char line[512], kind, id[64], token[128];
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long total = 0;
        int idx = -1;
        if (sscanf(line, "retries %d", &t->retries[n]) == 1)
            continue;
        CHECK_MSG(strncmp(line, "error", 5) != 0, "child %d: %s", n, line);
        CHECK_MSG(
            sscanf(line, "%c %63s %127s %llu", &kind, id, token, &total) >= 3 &&
                (kind == 'o' || kind == 'w') && sscanf(id, "r%d", &idx) == 1 &&
                idx >= 0 && idx < RACE_INSTANCES,
            "child %d: %s", n, line);
        CHECK_MSG(t->token_count < 3 * RACE_INSTANCES,
                  "more than %d items handed out", 3 * RACE_INSTANCES);
        t->tokens[t->token_count++] = strdup(token);
        if (kind == 'w') {
            t->work[idx]++;
            t->activities[n]++;
            continue;
        }
        CHECK_MSG(total == 0 || total == 2, "child %d: %s", n, line);
        t->turns[n]++;
        if (total == 0)
            t->first[idx]++;
        else
            t->second[idx]++;
    }
    fclose(f);
}

PV_TEST(processes_competing_for_the_queues_never_get_the_same_item)
{
    /* The schema is named before anything is opened: the children are
     * forked first, as a provider's threads could leave a lock held in a
     * child forked beside them. */
    char schema[64], logs[RACE_CHILDREN][512];
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    for (int i = 0; i < RACE_CHILDREN; i++) {
        char name[32];
        snprintf(name, sizeof(name), "race_%d.log", i);
        snprintf(logs[i], sizeof(logs[i]), "%s", test_path(name));
    }
    int go[2];
    CHECK(pipe(go) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pids[RACE_CHILDREN];
    for (int i = 0; i < RACE_CHILDREN; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            race_child(schema, go[0], logs[i], i % 3);
        }
    }
    close(go[0]);
    /* The parent fills the queue, then lets the children go at once (an
     * open here cannot fail the test before the pipe is closed). */
    duro_provider *p = pv_open_same();
    for (int i = 0; p != NULL && i < RACE_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "r%05d", i);
        duro_work_item st = {
            .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
        duro_error e;
        if (p->enqueue_for_orchestrator(p, &st, 0, &e) != DURO_OK) {
            fprintf(stderr, "  enqueue %s: %s\n", id, e.message);
            break;
        }
    }
    int64_t t0 = test_now_ms();
    close(go[1]);
    int exits[RACE_CHILDREN];
    race_wait(pids, exits);
    int64_t elapsed = test_now_ms() - t0;
    CHECK(p != NULL);
    race_tally *t = calloc(1, sizeof(*t));
    CHECK(t != NULL);
    t->tokens = calloc(3 * RACE_INSTANCES, sizeof(char *));
    CHECK(t->tokens != NULL);
    for (int i = 0; i < RACE_CHILDREN; i++)
        race_read_log(t, i, logs[i]);
    for (int i = 0; i < RACE_CHILDREN; i++)
        CHECK_MSG(exits[i] == 0, "child %d exited %d", i, exits[i]);
    size_t items = 0;
    for (int i = 0; i < RACE_CHILDREN; i++) {
        fprintf(stderr,
                "  child %d (%s): %zu turns, %zu activities, %d retries\n", i,
                i % 3 == 2   ? "batches of turns"
                : i % 3 == 1 ? "ack-and-fetch"
                             : "ack, then fetch",
                t->turns[i], t->activities[i], t->retries[i]);
        items += t->turns[i] + t->activities[i];
    }
    fprintf(stderr, "  %zu items of %d instances in %lld ms (%.0f items/s)\n",
            items, RACE_INSTANCES, (long long)elapsed,
            elapsed > 0 ? (double)items * 1000.0 / (double)elapsed : 0.0);
    /* every turn and activity handed out exactly once, to one process */
    CHECK_EQ(items, 3 * RACE_INSTANCES);
    for (int i = 0; i < RACE_INSTANCES; i++)
        CHECK_MSG(t->first[i] == 1 && t->second[i] == 1 && t->work[i] == 1,
                  "instance r%05d: first turn %d times, second %d, activity "
                  "%d",
                  i, t->first[i], t->second[i], t->work[i]);
    qsort(t->tokens, t->token_count, sizeof(char *), compare_tokens);
    for (size_t i = 1; i < t->token_count; i++)
        CHECK_MSG(strcmp(t->tokens[i - 1], t->tokens[i]) != 0,
                  "token %s handed out twice", t->tokens[i]);
    /* both competed: each took at least a fifth of what its share would be */
    for (int i = 0; i < RACE_CHILDREN; i++)
        CHECK_MSG((t->turns[i] + t->activities[i]) * RACE_CHILDREN * 5 >= items,
                  "child %d took only %zu of %zu items", i,
                  t->turns[i] + t->activities[i], items);
    for (int i = 0; i < RACE_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "r%05d", i);
        check_cycle_done(p, id);
    }
    duro_error e;
    uint64_t left = 1;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, NULL, &left, &e),
              DURO_OK, &e);
    CHECK_EQ(left, 0);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, NULL, &left, &e), DURO_OK,
              &e);
    CHECK_EQ(left, 0);
    for (size_t i = 0; i < t->token_count; i++)
        free(t->tokens[i]);
    free(t->tokens);
    free(t);
    pv_close(p);
}

/* ---- a connection lost around COMMIT ----------------------------------------
 * duro__pg_inject_commit_loss drops the connection of one COMMIT, after it
 * committed or before it was sent; the caller gets the same retryable
 * failure either way. Retrying the token call with the same token either
 * commits (nothing had) or fails DURO_LOCK_LOST and changes nothing (it had
 * committed); history then holds each event once, and an item the lost
 * commit locked as the next one comes back when its lock expires. */

enum {
    LOSS_ACK_ORCH,
    LOSS_ACK_AND_FETCH_ORCH,
    LOSS_ACK_WORK,
    LOSS_ACK_AND_FETCH_WORK,
    LOSS_METHODS
};

/* The lock of the next item of an ack-and-fetch: short, it may be lost.
 * Every other lock never expires here. */
#define LOSS_NEXT_LOCK_MS 1000
#define LOSS_HOLD_MS 120000
#define LOSS_WAIT_MS 30000

static const char *const loss_method_names[LOSS_METHODS] = {
    "ack_orchestration_item", "ack_and_fetch_orchestration_item",
    "ack_work_item", "ack_and_fetch_work_item"};

/* The call under test and what it acks: instance a's first turn, or a's
 * activity; its ack-and-fetch form finds b's turn or activity as next. */
typedef struct loss_case {
    int method;
    duro_provider *p;
    duro_orch_item *item;   /* a's turn (orchestration methods) */
    cycle_turn turn;        /* its ack */
    duro_worker_item *work; /* a's activity (work methods) */
    duro_work_item done;    /* its completion */
    duro_orch_item *next_orch;
    duro_worker_item *next_work;
} loss_case;

static int loss_orchestration(const loss_case *c)
{
    return c->method == LOSS_ACK_ORCH || c->method == LOSS_ACK_AND_FETCH_ORCH;
}

static int loss_combined(const loss_case *c)
{
    return c->method == LOSS_ACK_AND_FETCH_ORCH ||
           c->method == LOSS_ACK_AND_FETCH_WORK;
}

static int loss_call(loss_case *c, duro_error *e)
{
    duro_provider *p = c->p;
    switch (c->method) {
    case LOSS_ACK_ORCH:
        return p->ack_orchestration_item(p, c->item->lock_token, &c->turn.ack,
                                         e);
    case LOSS_ACK_AND_FETCH_ORCH:
        return p->ack_and_fetch_orchestration_item(
            p, c->item->lock_token, &c->turn.ack, LOSS_NEXT_LOCK_MS, NULL,
            &c->next_orch, e);
    case LOSS_ACK_WORK:
        return p->ack_work_item(p, c->work->lock_token, &c->done, e);
    default:
        return p->ack_and_fetch_work_item(p, c->work->lock_token, &c->done,
                                          LOSS_NEXT_LOCK_MS, &c->next_work, e);
    }
}

/* Acks an orchestration or worker item (either may be NULL) the cycle's
 * way and frees it. */
static void cycle_ack_items(duro_provider *p, duro_orch_item *item,
                            duro_worker_item *w)
{
    duro_error e;
    if (item != NULL) {
        cycle_turn t;
        CHECK_PRC(p->ack_orchestration_item(p, item->lock_token,
                                            cycle_ack(item, &t), &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
    }
    if (w != NULL) {
        duro_work_item done = cycle_completion(w->item.instance_id);
        CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
        duro_worker_item_free(w);
    }
}

/* The next turn (into *item) or, with item NULL, the next activity (into
 * *w) within LOSS_WAIT_MS, locked for LOSS_HOLD_MS: it must be instance
 * id's. */
static void loss_take(duro_provider *p, const char *id, duro_orch_item **item,
                      duro_worker_item **w)
{
    duro_error e;
    int rc = DURO_OK;
    const char *got = NULL;
    int64_t deadline = test_now_ms() + LOSS_WAIT_MS;
    while (rc == DURO_OK && got == NULL && test_now_ms() < deadline) {
        if (item != NULL) {
            rc = p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, item, &e);
            got = *item != NULL ? (*item)->instance_id : NULL;
        } else {
            rc = p->fetch_work_item(p, LOSS_HOLD_MS, w, &e);
            got = *w != NULL ? (*w)->item.instance_id : NULL;
        }
        if (got == NULL)
            test_sleep_ms(5);
    }
    CHECK_PRC(rc, DURO_OK, &e);
    CHECK_MSG(got != NULL && strcmp(got, id) == 0,
              "expected the %s of %s, got %s",
              item != NULL ? "turn" : "activity", id, got ? got : "nothing");
}

/* Runs whatever is queued the cycle's way until nothing is left, within
 * LOSS_WAIT_MS. */
static void cycle_drain(duro_provider *p)
{
    int64_t deadline = test_now_ms() + LOSS_WAIT_MS;
    duro_error e;
    uint64_t queued = 1;
    while (queued > 0 && test_now_ms() < deadline && !test_failed()) {
        duro_orch_item *item = NULL;
        duro_worker_item *w = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, &item, &e),
                  DURO_OK, &e);
        CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_OK, &e);
        cycle_ack_items(p, item, w);
        uint64_t o = 0, k = 0;
        CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, NULL, &o, &e),
                  DURO_OK, &e);
        CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, NULL, &k, &e),
                  DURO_OK, &e);
        queued = o + k;
    }
    CHECK_MSG(queued == 0, "%llu items still queued after %d ms",
              (unsigned long long)queued, LOSS_WAIT_MS);
}

/* One method, one kind of loss; *message gets the failure's text. */
static void lost_commit_case(int method, int committed, char *message,
                             size_t size)
{
    duro_provider *p = pv_open();
    CHECK(p != NULL);
    if (p == NULL)
        return;
    loss_case c = {.method = method, .p = p};
    int orch = loss_orchestration(&c);
    duro_error e;
    cycle_start(p, "a");
    cycle_start(p, "b");
    if (orch) {
        loss_take(p, "a", &c.item, NULL);
        if (c.item == NULL)
            return;
        cycle_ack(c.item, &c.turn);
    } else {
        /* both first turns, then a's activity (b's is the next) */
        for (int i = 0; i < 2; i++) {
            duro_orch_item *item = NULL;
            loss_take(p, i == 0 ? "a" : "b", &item, NULL);
            cycle_ack_items(p, item, NULL);
        }
        loss_take(p, "a", NULL, &c.work);
        if (c.work == NULL)
            return;
        c.done = cycle_completion("a");
    }
    duro__pg_inject_commit_loss(p, 1, committed);
    CHECK_PFAIL(loss_call(&c, &e), DURO_STORAGE, 1, &e);
    CHECK_EQ(duro__pg_commit_losses(p), 1);
    CHECK_MSG(strstr(e.message, "connection lost") != NULL, "%s: %s",
              loss_method_names[method], e.message);
    CHECK(c.next_orch == NULL && c.next_work == NULL);
    snprintf(message, size, "%s", e.message);

    duro_orch_item *held = NULL;
    duro_worker_item *held_work = NULL;
    if (committed && loss_combined(&c)) {
        /* b's item, locked as the next one by the lost commit, comes back
         * when that lock expires, its fetch count raised */
        loss_take(p, "b", orch ? &held : NULL, &held_work);
        if (held == NULL && held_work == NULL)
            return;
        CHECK_EQ(held != NULL ? held->attempt : held_work->attempt, 2);
    }
    pv_snapshot before = {0};
    if (committed)
        pv_snapshot_take(p, &before);
    int rc = loss_call(&c, &e);
    if (committed) {
        CHECK_PFAIL(rc, DURO_LOCK_LOST, 0, &e);
        CHECK(c.next_orch == NULL && c.next_work == NULL);
        PV_EXPECT_UNCHANGED(p, &before);
        pv_snapshot_free(&before);
    } else {
        CHECK_PRC(rc, DURO_OK, &e);
        if (loss_combined(&c)) {
            const char *got =
                orch ? (c.next_orch ? c.next_orch->instance_id : NULL)
                     : (c.next_work ? c.next_work->item.instance_id : NULL);
            CHECK_STR(got, "b");
            CHECK_EQ(orch ? c.next_orch->attempt : c.next_work->attempt, 1);
        }
        held = c.next_orch;
        held_work = c.next_work;
    }
    /* what a's ack wrote, once: two events, and one activity row or one
     * completion message */
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "a", 0, &h, &e), DURO_OK, &e);
    CHECK_EQ(h != NULL ? h->count : 0, 2);
    duro_history_free(h);
    uint64_t n = 0;
    CHECK_PRC(
        p->count_messages(p, orch ? DURO_QUEUE_WORKER : DURO_QUEUE_ORCHESTRATOR,
                          "a", &n, &e),
        DURO_OK, &e);
    CHECK_EQ(n, 1);
    /* nothing lost: both instances run to the end, each event once */
    cycle_ack_items(p, held, held_work);
    duro_orch_item_free(c.item);
    duro_worker_item_free(c.work);
    cycle_drain(p);
    check_cycle_done(p, "a");
    check_cycle_done(p, "b");
    pv_close(p);
}

/* ---- session timeouts ------------------------------------------------------
 * duro's sessions give up waiting for a row lock after lock_timeout, never
 * wait for one to renew a lock, and are ended by the server when they sit
 * idle in a transaction for idle_in_transaction_session_timeout (a host
 * stopped in the middle of one). */

/* Locks `table`'s row WHERE `where` in an open transaction of locker;
 * 1 when it did. */
static int hold_row(PGconn *locker, const char *schema, const char *table,
                    const char *where)
{
    char sql[512];
    if (!admin_exec(locker, "BEGIN"))
        return 0;
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM (SELECT 1 FROM \"%s\".%s WHERE %s "
             "FOR UPDATE) AS l",
             schema, table, where);
    return query_int(locker, sql) == 1;
}

/* A statement that needs a row another session holds fails after
 * lock_timeout (here 300 ms, a URL parameter), DURO_BUSY and retryable,
 * changing nothing - also on a connection opened again after the server
 * ended the first (the setting is the session's) - and goes through once
 * the row is free. */
PV_TEST(a_statement_waiting_for_a_held_row_gives_up_after_lock_timeout)
{
    char extra[128], app[64], pids[256], schema[64];
    snprintf(app, sizeof(app), "duro_pv_lockto_%ld", (long)getpid());
    snprintf(extra, sizeof(extra),
             "&pool=1&application_name=%s&lock_timeout=300", app);
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    duro_work_item st = {
        .kind = DURO_WORK_START, .instance_id = "a", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
    PGconn *c, *locker;
    if (admin_pair(&c, &locker, p) != 0)
        return;
    CHECK(hold_row(locker, schema, "orchestrator_ready", "instance_id = 'a'"));
    duro_work_item ev = {.kind = DURO_WORK_EXTERNAL_EVENT,
                         .instance_id = "a",
                         .name = "go",
                         .payload = "1"};
    for (int round = 0; round < 2; round++) {
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &ev, 0, &e), DURO_BUSY, 1,
                    &e);
        CHECK_MSG(strstr(e.message, "lock_timeout") != NULL &&
                      strstr(e.message, "55P03") != NULL,
                  "round %d: %s", round, e.message);
        if (round == 0) {
            /* a new session: the timeout is set on it too */
            backends_of(c, app, pids, sizeof(pids));
            CHECK(pids[0] != '\0');
            terminate(c, pids);
        }
    }
    uint64_t n = 0;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "a", &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 1);
    CHECK(admin_exec(locker, "ROLLBACK"));
    CHECK_PRC(p->enqueue_for_orchestrator(p, &ev, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "a", &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 2);
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

/* A renewal whose row another session holds fails at once, DURO_BUSY and
 * retryable (NOWAIT: "could not obtain lock"), however long lock_timeout
 * is (here 20 s): the runtime tries again soon, and a renewal no longer
 * holds up those after it. It succeeds once the row is free. */
PV_TEST(renewals_never_wait_for_a_held_row)
{
    char schema[64];
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, "&lock_timeout=20000");
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    cycle_start(p, "a");
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    PGconn *c, *locker;
    if (item == NULL || admin_pair(&c, &locker, p) != 0) {
        duro_orch_item_free(item);
        return;
    }
    CHECK(hold_row(locker, schema, "orchestrator_ready", "instance_id = 'a'"));
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, item->lock_token, 60000, &e),
        DURO_BUSY, 1, &e);
    CHECK_MSG(strstr(e.message, "could not obtain lock") != NULL, "%s",
              e.message);
    CHECK(admin_exec(locker, "ROLLBACK"));
    CHECK_PRC(p->renew_orchestration_item_lock(p, item->lock_token, 60000, &e),
              DURO_OK, &e);
    cycle_ack_items(p, item, NULL);

    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 60000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    if (w != NULL) {
        CHECK(hold_row(locker, schema, "worker_queue", "instance_id = 'a'"));
        CHECK_PFAIL(p->renew_work_item_lock(p, w->lock_token, 60000, &e),
                    DURO_BUSY, 1, &e);
        CHECK_MSG(strstr(e.message, "could not obtain lock") != NULL, "%s",
                  e.message);
        CHECK(admin_exec(locker, "ROLLBACK"));
        CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 60000, &e), DURO_OK,
                  &e);
        cycle_ack_items(p, NULL, w);
    }
    cycle_drain(p);
    check_cycle_done(p, "a");
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

typedef struct {
    PGconn *c;
    char sql[256];
    int calls; /* the hook's */
    int ended; /* the server ended the session meanwhile */
} idle_wait;

/* The ack hook: on its first call, waits (up to 30 s) until no session of
 * the provider sits idle in a transaction - until the server ended the
 * ack's. Runs on the provider's thread: no check here (a failed one would
 * jump out of the provider). */
static void wait_for_the_session_to_end(void *arg)
{
    idle_wait *x = arg;
    if (x->calls++ > 0)
        return;
    int64_t deadline = test_now_ms() + 30000;
    while (!x->ended && test_now_ms() < deadline) {
        x->ended = query_int(x->c, x->sql) == 0;
        if (!x->ended)
            test_sleep_ms(5);
    }
}

/* A session idle in a transaction for idle_in_transaction_session_timeout
 * (here 200 ms, a URL parameter) is ended by the server, rolling the
 * transaction back; the call that owned it then fails as a lost
 * connection does (DURO_STORAGE, retryable: the server's 25P03), and the
 * same call, run again, goes through on a new connection. The ack stops
 * between its statements through the provider's hook, as a frozen host
 * does. */
PV_TEST(a_session_idle_in_a_transaction_is_ended_and_its_call_retried)
{
    char extra[160], app[64];
    snprintf(app, sizeof(app), "duro_pv_idle_%ld", (long)getpid());
    snprintf(extra, sizeof(extra),
             "&pool=1&application_name=%s&"
             "idle_in_transaction_session_timeout=200",
             app);
    duro_provider *p = open_schema(new_schema(pv_test_name), extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    cycle_start(p, "a");
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    idle_wait x = {.c = admin()};
    CHECK(x.c != NULL);
    if (item == NULL || x.c == NULL) {
        duro_orch_item_free(item);
        PQfinish(x.c);
        return;
    }
    snprintf(x.sql, sizeof(x.sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND state LIKE 'idle in transaction%%'",
             app);
    duro__pg_hook_turn_ack_locked(p, wait_for_the_session_to_end, &x);
    cycle_turn t;
    CHECK_PFAIL(
        p->ack_orchestration_item(p, item->lock_token, cycle_ack(item, &t), &e),
        DURO_STORAGE, 1, &e);
    CHECK_MSG(strstr(e.message, "connection lost") != NULL, "%s", e.message);
    CHECK_MSG(x.ended, "the server did not end the session idle in its "
                       "transaction");
    duro__pg_hook_turn_ack_locked(p, NULL, NULL);
    CHECK_PRC(
        p->ack_orchestration_item(p, item->lock_token, cycle_ack(item, &t), &e),
        DURO_OK, &e);
    duro_orch_item_free(item);
    cycle_drain(p);
    check_cycle_done(p, "a");
    PQfinish(x.c);
    duro_provider_close(p);
}

#define HELD_ACKS 4

typedef struct {
    duro_provider *p;
    duro_worker_item *w;
    _Atomic int done;
    int rc;
    char message[512];
} held_ack;

static void *held_ack_main(void *arg)
{
    held_ack *h = arg;
    duro_error e;
    duro_work_item done = cycle_completion(h->w->item.instance_id);
    duro_worker_item *next = NULL;
    h->rc = h->p->ack_and_fetch_work_item(h->p, h->w->lock_token, &done, 60000,
                                          &next, &e);
    snprintf(h->message, sizeof(h->message), "%s",
             h->rc != DURO_OK ? e.message : "");
    duro_worker_item_free(next);
    atomic_store(&h->done, 1);
    return NULL;
}

/* Activity acks queue behind the statement that runs to share the next
 * one; when that statement waits for a row another session holds (here
 * with no lock_timeout at all), the acks queued behind it run alone after
 * a second instead of waiting with it: they go through while the held one
 * still waits. And the waiting ack has not claimed its next item first: a
 * fetch meanwhile gets it (it used to stay claimed by the waiting
 * statement). */
PV_TEST(acks_queued_behind_a_held_ack_do_not_wait_for_it)
{
    char extra[160], app[64], schema[64];
    snprintf(app, sizeof(app), "duro_pv_held_%ld", (long)getpid());
    snprintf(extra, sizeof(extra), "&application_name=%s&lock_timeout=0", app);
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    held_ack h[HELD_ACKS];
    memset(h, 0, sizeof(h));
    for (int i = 0; i <= HELD_ACKS; i++) {
        char id[8];
        snprintf(id, sizeof(id), "a%d", i);
        cycle_start(p, id);
        duro_orch_item *item = NULL;
        loss_take(p, id, &item, NULL);
        cycle_ack_items(p, item, NULL);
    }
    /* a0 keeps a ready row (an event due in an hour) for the test to hold */
    duro_work_item later = {
        .kind = DURO_WORK_EXTERNAL_EVENT, .instance_id = "a0", .name = "later"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &later, 3600000, &e), DURO_OK, &e);
    for (int i = 0; i < HELD_ACKS; i++) {
        duro_worker_item *w = NULL;
        CHECK_PRC(p->fetch_work_item(p, 60000, &w, &e), DURO_OK, &e);
        CHECK(w != NULL);
        if (w == NULL)
            return;
        int k = w->item.instance_id[1] - '0';
        CHECK(k >= 0 && k < HELD_ACKS && h[k].w == NULL);
        h[k].p = p;
        h[k].w = w;
    }
    /* a4's activity is left queued: the next item of a0's ack */
    PGconn *c, *locker;
    if (admin_pair(&c, &locker, p) != 0)
        return;
    CHECK(hold_row(locker, schema, "orchestrator_ready", "instance_id = 'a0'"));
    pthread_t t[HELD_ACKS];
    CHECK_EQ(pthread_create(&t[0], NULL, held_ack_main, &h[0]), 0);
    wait_for_one_lock_waiter(c, app); /* a0's ack, running, waits */
    duro_worker_item *spare = NULL;
    CHECK_PRC(p->fetch_work_item(p, 60000, &spare, &e), DURO_OK, &e);
    CHECK_MSG(spare != NULL && strcmp(spare->item.instance_id, "a4") == 0,
              "a4's activity was not fetchable while a0's ack waited");
    for (int i = 1; i < HELD_ACKS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, held_ack_main, &h[i]), 0);
    int64_t deadline = test_now_ms() + 30000;
    int others = 0;
    while (test_now_ms() < deadline) {
        others = 0;
        for (int i = 1; i < HELD_ACKS; i++)
            others += atomic_load(&h[i].done);
        if (others == HELD_ACKS - 1)
            break;
        test_sleep_ms(5);
    }
    int held_done = atomic_load(&h[0].done);
    /* released either way, so that every thread ends */
    CHECK(admin_exec(locker, "ROLLBACK"));
    for (int i = 0; i < HELD_ACKS; i++)
        pthread_join(t[i], NULL);
    CHECK_MSG(others == HELD_ACKS - 1,
              "%d of %d acks queued behind the held one went through while "
              "it waited",
              others, HELD_ACKS - 1);
    CHECK_MSG(!held_done, "the held ack finished while its row was held");
    for (int i = 0; i < HELD_ACKS; i++) {
        CHECK_MSG(h[i].rc == DURO_OK, "ack of a%d: %s (%s)", i,
                  duro_errname(h[i].rc), h[i].message);
        duro_worker_item_free(h[i].w);
    }
    cycle_ack_items(p, NULL, spare);
    cycle_drain(p);
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

typedef struct {
    duro_provider *p;
    const char *token;
    const char *instance;
    int rc;
    char message[512];
} token_ack;

static void *token_ack_main(void *arg)
{
    token_ack *a = arg;
    duro_error e;
    duro_work_item done = cycle_completion(a->instance);
    duro_worker_item *next = NULL;
    a->rc =
        a->p->ack_and_fetch_work_item(a->p, a->token, &done, 60000, &next, &e);
    snprintf(a->message, sizeof(a->message), "%s",
             a->rc != DURO_OK ? e.message : "");
    duro_worker_item_free(next);
    return NULL;
}

/* After a server crash lost a claim, the worker that held it retries its
 * ack with the lost claim's token while another slot of the same process
 * has claimed the row again and acks it with the new one: two acks of one
 * row with two tokens. Queued together for one combined statement, the
 * current one used to be dropped as a duplicate (DURO_LOCK_LOST: its
 * completion lost, the row left locked until its lock expired); now the
 * old token fails DURO_LOCK_LOST and the current one goes through, its
 * completion queued once. (The statement running before them waits for a
 * row the test holds, so that both queue behind it.) */
PV_TEST(an_old_token_acked_beside_the_current_one_does_not_drop_it)
{
    char extra[160], app[64], schema[64], sql[512];
    snprintf(app, sizeof(app), "duro_pv_tokens_%ld", (long)getpid());
    snprintf(extra, sizeof(extra), "&application_name=%s&lock_timeout=0", app);
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    const char *ids[2] = {"x", "a"};
    for (int i = 0; i < 2; i++) {
        cycle_start(p, ids[i]);
        duro_orch_item *item = NULL;
        loss_take(p, ids[i], &item, NULL);
        cycle_ack_items(p, item, NULL);
    }
    duro_work_item later = {
        .kind = DURO_WORK_EXTERNAL_EVENT, .instance_id = "x", .name = "later"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &later, 3600000, &e), DURO_OK, &e);
    duro_worker_item *wx = NULL, *old = NULL, *cur = NULL;
    loss_take(p, "x", NULL, &wx);
    loss_take(p, "a", NULL, &old);
    PGconn *c, *locker;
    if (wx == NULL || old == NULL || admin_pair(&c, &locker, p) != 0)
        return;
    /* the claim a crash lost: the row as it was before it */
    snprintf(sql, sizeof(sql),
             "UPDATE \"%s\".worker_queue SET lock_token = NULL, "
             "locked_until = NULL, available_at = 0 WHERE lock_token = '%s'",
             schema, old->lock_token);
    CHECK(admin_exec(c, sql));
    loss_take(p, "a", NULL, &cur);
    CHECK(cur != NULL && strcmp(cur->lock_token, old->lock_token) != 0);
    CHECK(hold_row(locker, schema, "orchestrator_ready", "instance_id = 'x'"));
    token_ack acks[3] = {{p, wx->lock_token, "x", -1, ""},
                         {p, old->lock_token, "a", -1, ""},
                         {p, cur != NULL ? cur->lock_token : "", "a", -1, ""}};
    pthread_t t[3];
    CHECK_EQ(pthread_create(&t[0], NULL, token_ack_main, &acks[0]), 0);
    wait_for_one_lock_waiter(c, app); /* x's ack runs, and waits */
    /* the old token first, as the retry came first after the restart */
    for (int i = 1; i < 3; i++) {
        CHECK_EQ(pthread_create(&t[i], NULL, token_ack_main, &acks[i]), 0);
        WAIT_UNTIL(duro__pg_combine_queued(p) == i, 10000);
    }
    CHECK(admin_exec(locker, "ROLLBACK"));
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_MSG(acks[0].rc == DURO_OK, "x: %s (%s)", duro_errname(acks[0].rc),
              acks[0].message);
    CHECK_MSG(acks[1].rc == DURO_LOCK_LOST, "a, old token: %s (%s)",
              duro_errname(acks[1].rc), acks[1].message);
    CHECK_MSG(acks[2].rc == DURO_OK, "a, current token: %s (%s)",
              duro_errname(acks[2].rc), acks[2].message);
    uint64_t n = 0;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "a", &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 1);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, "a", &n, &e), DURO_OK,
              &e);
    CHECK_EQ(n, 0);
    duro_worker_item_free(wx);
    duro_worker_item_free(old);
    duro_worker_item_free(cur);
    PQfinish(locker);
    PQfinish(c);
    duro_provider_close(p);
}

/* A claim whose commit stood but whose answer was lost (the connection
 * dropped right after it: a server restart, a network cut) locked items
 * under a token nobody holds; the provider made that token, knows the call
 * failed, and releases them at its next fetch instead of leaving them
 * locked until the lock expires (here 120 s). Each claim: the turn alone,
 * the activity (a statement run alone), a batch of turns. */
PV_TEST(a_claim_whose_answer_was_lost_is_released_at_the_next_fetch)
{
    duro_provider *p = pv_open();
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    cycle_start(p, "a");
    duro_orch_item *item = NULL;
    duro__pg_inject_commit_loss(p, 1, 1);
    CHECK_PFAIL(p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, &item, &e),
                DURO_STORAGE, 1, &e);
    CHECK_EQ(duro__pg_commit_losses(p), 1);
    CHECK(item == NULL);
    CHECK_PRC(p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, &item, &e),
              DURO_OK, &e);
    CHECK_MSG(item != NULL, "the turn whose claim's answer was lost is still "
                            "locked");
    if (item == NULL)
        return;
    CHECK_STR(item->instance_id, "a");
    CHECK_EQ(item->attempt, 2); /* the lost claim counted */
    cycle_ack_items(p, item, NULL);

    duro_worker_item *w = NULL;
    duro__pg_inject_commit_loss(p, 1, 1);
    CHECK_PFAIL(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_STORAGE, 1,
                &e);
    CHECK_EQ(duro__pg_commit_losses(p), 2);
    CHECK(w == NULL);
    CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_OK, &e);
    CHECK_MSG(w != NULL, "the activity whose claim's answer was lost is "
                         "still locked");
    if (w == NULL)
        return;
    CHECK_STR(w->item.instance_id, "a");
    CHECK_EQ(w->attempt, 2);
    cycle_ack_items(p, NULL, w);

    duro_orch_item *batch[4] = {0};
    size_t got = 0;
    duro__pg_inject_commit_loss(p, 1, 1);
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 0, NULL, NULL, LOSS_HOLD_MS, NULL, 4, batch, &got, &e),
                DURO_STORAGE, 1, &e);
    CHECK_EQ(got, 0);
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 0, NULL, NULL, LOSS_HOLD_MS, NULL, 4, batch, &got, &e),
              DURO_OK, &e);
    CHECK_MSG(got == 1,
              "the batch claim whose answer was lost: %zu of 1 "
              "item back",
              got);
    if (got != 1)
        return;
    CHECK_STR(batch[0]->instance_id, "a");
    cycle_ack_items(p, batch[0], NULL);
    check_cycle_done(p, "a");
    pv_close(p);
}

/* An abandon that failed retryably (the server unreachable, a lock it
 * waited for too long) leaves its item locked by a token only the caller
 * held; the provider keeps it and abandons it again at its next fetch, so
 * the item comes back then rather than when its lock expires (120 s). */
PV_TEST(an_abandon_that_failed_is_retried_at_the_next_fetch)
{
    duro_provider *p = pv_open();
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    cycle_start(p, "a");
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, &item, &e),
              DURO_OK, &e);
    CHECK(item != NULL);
    if (item == NULL)
        return;
    duro__pg_inject_fault(p, 1, 1);
    CHECK_PFAIL(p->abandon_orchestration_item(p, item->lock_token, 0, &e),
                DURO_BUSY, 1, &e);
    duro_orch_item_free(item);
    item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, LOSS_HOLD_MS, NULL, &item, &e),
              DURO_OK, &e);
    CHECK_MSG(item != NULL, "the turn whose abandon failed is still locked");
    if (item == NULL)
        return;
    CHECK_STR(item->instance_id, "a");
    cycle_ack_items(p, item, NULL);

    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    if (w == NULL)
        return;
    duro__pg_inject_fault(p, 1, 1);
    CHECK_PFAIL(p->abandon_work_item(p, w->lock_token, 0, &e), DURO_BUSY, 1,
                &e);
    duro_worker_item_free(w);
    w = NULL;
    CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_OK, &e);
    CHECK_MSG(w != NULL, "the activity whose abandon failed is still locked");
    if (w == NULL)
        return;
    CHECK_STR(w->item.instance_id, "a");
    cycle_ack_items(p, NULL, w);
    cycle_drain(p);
    check_cycle_done(p, "a");
    pv_close(p);
}

/* An activity ack commits without waiting for the WAL flush, so a server
 * crash can lose it: the row comes back locked by the worker's token,
 * which the worker let go when its ack succeeded. The provider keeps the
 * tokens of its latest such acks; when a connection that broke is opened
 * again, the rows those still hold are released at the next fetch, rather
 * than when their locks expire (here 120 s). The crash's loss is made
 * here by hand: the row put back as it was, the completion taken away,
 * the provider's sessions ended. */
PV_TEST(an_activity_ack_a_crash_lost_is_released_after_the_reconnect)
{
    char extra[96], app[64], pids[256], schema[64], sql[1024];
    snprintf(app, sizeof(app), "duro_pv_crash_%ld", (long)getpid());
    snprintf(extra, sizeof(extra), "&pool=1&application_name=%s", app);
    snprintf(schema, sizeof(schema), "%s", new_schema(pv_test_name));
    duro_provider *p = open_schema(schema, extra);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    duro_error e;
    cycle_start(p, "a");
    duro_orch_item *item = NULL;
    loss_take(p, "a", &item, NULL);
    cycle_ack_items(p, item, NULL);
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    PGconn *c = admin();
    CHECK(c != NULL);
    if (w == NULL || c == NULL) {
        duro_worker_item_free(w);
        PQfinish(c);
        return;
    }
    /* the row as the claim left it, to put back */
    snprintf(sql, sizeof(sql),
             "CREATE TEMP TABLE lost AS SELECT * FROM \"%s\".worker_queue",
             schema);
    CHECK(admin_exec(c, sql));
    duro_work_item done = cycle_completion("a");
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
    /* the crash lost the ack */
    snprintf(sql, sizeof(sql),
             "INSERT INTO \"%s\".worker_queue OVERRIDING SYSTEM VALUE "
             "SELECT * FROM lost; DELETE FROM \"%s\".orchestrator_queue; "
             "DELETE FROM \"%s\".orchestrator_ready",
             schema, schema, schema);
    CHECK(admin_exec(c, sql));
    backends_of(c, app, pids, sizeof(pids));
    CHECK(pids[0] != '\0');
    terminate(c, pids);
    /* the first fetch reopens the connection (and finds the row locked),
     * the next releases it and takes it */
    duro_worker_item *again = NULL;
    for (int i = 0; i < 2 && again == NULL; i++)
        CHECK_PRC(p->fetch_work_item(p, LOSS_HOLD_MS, &again, &e), DURO_OK, &e);
    CHECK_MSG(again != NULL, "the row of the lost ack is still locked");
    if (again != NULL) {
        CHECK_EQ(again->item.source_id, w->item.source_id);
        CHECK_EQ(again->attempt, 2);
        cycle_ack_items(p, NULL, again);
    }
    duro_worker_item_free(w);
    cycle_drain(p);
    check_cycle_done(p, "a");
    PQfinish(c);
    duro_provider_close(p);
}

/* A raise with an event id whose COMMIT's answer was lost (committed or
 * not: the caller cannot tell) is retried with the same id until it
 * succeeds, and the event is on the queue exactly once. Without an id the
 * same retry after a committed loss enqueues it twice (the case the chaos
 * trial found). */
PV_TEST(an_event_raised_with_an_id_is_safe_to_retry_after_a_lost_commit)
{
    for (int with_id = 0; with_id <= 1; with_id++) {
        for (int committed = 0; committed <= 1; committed++) {
            duro_provider *p = open_schema(new_schema(pv_test_name), "&pool=1");
            CHECK(p != NULL);
            if (p == NULL)
                return;
            duro_error e;
            duro_work_item st = {
                .kind = DURO_WORK_START, .instance_id = "i", .name = "orch"};
            CHECK_PRC(p->enqueue_for_orchestrator(p, &st, 0, &e), DURO_OK, &e);
            duro_work_item ev = {.kind = DURO_WORK_EXTERNAL_EVENT,
                                 .instance_id = "i",
                                 .name = "go",
                                 .payload = "1",
                                 .event_id = with_id ? "order-7" : NULL};
            duro__pg_inject_commit_loss(p, 1, committed);
            CHECK_PFAIL(p->enqueue_for_orchestrator(p, &ev, 0, &e),
                        DURO_STORAGE, 1, &e);
            CHECK_EQ(duro__pg_commit_losses(p), 1);
            /* the caller retries, as the error invites */
            CHECK_PRC(p->enqueue_for_orchestrator(p, &ev, 0, &e), DURO_OK, &e);
            uint64_t n = 0;
            CHECK_PRC(
                p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "i", &n, &e),
                DURO_OK, &e);
            /* the START, then the event once - twice only without an id
             * after a loss that had committed */
            CHECK_MSG(n == (uint64_t)(with_id || !committed ? 2 : 3),
                      "with id %d, committed %d: %llu messages", with_id,
                      committed, (unsigned long long)n);
            duro_provider_close(p);
        }
    }
}

PV_TEST(a_commit_whose_connection_was_lost_is_safe_to_retry)
{
    for (int method = 0; method < LOSS_METHODS; method++) {
        char message[2][DURO_ERROR_MESSAGE_MAX];
        for (int committed = 0; committed <= 1; committed++) {
            fprintf(stderr, "  %s, %s\n", loss_method_names[method],
                    committed ? "committed" : "not committed");
            lost_commit_case(method, committed, message[committed],
                             sizeof(message[committed]));
        }
        /* the caller cannot tell the two apart */
        CHECK_STR(message[0], message[1]);
    }
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
        T(a_role_with_data_rights_only_opens_a_current_store),
        T(a_current_store_opens_without_the_migration_lock),
        T(create_0_never_creates_a_schema_but_migrates_one),
        T(a_runtime_refuses_a_store_its_role_cannot_write),
        T(schema_names_are_case_sensitive_and_may_be_keywords),
        T(migration_2_adds_activity_run_times),
        T(migration_6_upgrades_a_version_5_store_in_place),
        T(migration_7_adds_the_live_runtimes),
        T(a_connection_dropped_while_idle_is_reopened_before_use),
        T(a_connection_lost_during_a_call_fails_retryably_and_is_reopened),
        T(a_sweep_holds_no_transaction_open_while_its_batches_wait),
        T(a_statement_waiting_for_a_held_row_gives_up_after_lock_timeout),
        T(renewals_never_wait_for_a_held_row),
        T(a_session_idle_in_a_transaction_is_ended_and_its_call_retried),
        T(acks_queued_behind_a_held_ack_do_not_wait_for_it),
        T(an_old_token_acked_beside_the_current_one_does_not_drop_it),
        T(many_events_of_a_turn_round_trip_exactly),
        T(statements_are_prepared_once_per_connection),
        T(claims_and_lookups_use_indexes),
        T(pg_claims_and_activity_acks_commit_without_waiting_for_the_flush),
        T(a_batch_first_turn_updates_its_instance_row_once),
        T(every_statement_fits_the_parameter_slots),
        T(a_batch_claim_repairs_an_instance_with_nothing_visible),
        T(a_batch_writes_the_rows_one_ack_at_a_time_writes),
        T(activity_acks_of_many_threads_share_statements),
        T(readiness_rows_are_locked_in_instance_order),
        T(a_batch_claim_probes_indexes_among_many_instances),
        T(query_pages_read_a_page_of_100000_instances),
        T(query_text_that_is_not_utf8_is_refused),
        T(stored_text_that_is_not_utf8_is_refused_before_the_server),
        T(work_from_another_process_wakes_a_wait_through_notify),
        T(work_committed_just_before_a_close_is_announced),
        T(notifications_count_the_items_they_announce),
        T(work_an_idle_local_waiter_takes_is_not_announced),
        T(controls_from_another_process_wake_a_wait_through_notify),
        T(processes_competing_for_the_queues_never_get_the_same_item),
        T(a_commit_whose_connection_was_lost_is_safe_to_retry),
        T(a_claim_whose_answer_was_lost_is_released_at_the_next_fetch),
        T(an_abandon_that_failed_is_retried_at_the_next_fetch),
        T(an_activity_ack_a_crash_lost_is_released_after_the_reconnect),
        T(an_event_raised_with_an_id_is_safe_to_retry_after_a_lost_commit)};
    int rc =
        pv_main(argc, argv, &factory, extra, sizeof(extra) / sizeof(extra[0]));
    drop_schemas();
    return rc;
}
