/* test_sqlite.c - what is specific to the SQLite provider: URL forms and
 * errors, schema versioning, pragmas, query plans, statement reuse, busy
 * mapping, size caps, fault-injected rollback, wake-ups, and a smoke test of
 * every method. Behaviour common to all providers lives in
 * tests/provider_validation. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "duro/provider.h"
#include "providers/sqlite/sqlite_internal.h"
#include "providers/sqlite/sqlite_provider.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------ */

static duro_provider *open_url(const char *url)
{
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url, &p, &e);
    CHECK_MSG(rc == DURO_OK, "open %s: %s (%s)", url, duro_errname(rc),
              e.message);
    return p;
}

static const char *url_with(const char *name, const char *query)
{
    static char buf[4][600];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, 600, "%s%s", test_sqlite_url(name), query);
    return b;
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    return db;
}

static int64_t raw_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    int64_t v = -1;
    CHECK_MSG(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s",
              sql, sqlite3_errmsg(db));
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static void start(duro_provider *p, const char *id, const char *name)
{
    duro_error e;
    duro_work_item it = {.kind = DURO_WORK_START,
                         .instance_id = id,
                         .name = name,
                         .payload = "input"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);
}

static duro_orch_item *fetch_orch(duro_provider *p)
{
    duro_error e;
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 30000, NULL, &item, &e), DURO_OK,
              &e);
    return item;
}

static uint64_t count(duro_provider *p, duro_queue q, const char *id)
{
    duro_error e;
    uint64_t n = 0;
    CHECK_PRC(p->count_messages(p, q, id, &n, &e), DURO_OK, &e);
    return n;
}

static duro_event event(uint64_t id, duro_event_kind kind, const char *name)
{
    duro_event ev = {
        .event_id = id, .kind = kind, .name = name, .timestamp_ms = 1};
    return ev;
}

/* Runs the first turn of `id`: Started + n ActivityScheduled, n worker items
 * (activity ids 2..n+1). */
static void first_turn(duro_provider *p, const char *id, size_t n)
{
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, id);
    duro_event *events = calloc(n + 1, sizeof(*events));
    duro_work_item *work = calloc(n + 1, sizeof(*work));
    events[0] = event(1, DURO_EVENT_ORCHESTRATION_STARTED, "orch");
    for (size_t i = 0; i < n; i++) {
        events[i + 1] = event(i + 2, DURO_EVENT_ACTIVITY_SCHEDULED, "act");
        work[i] = (duro_work_item){.kind = DURO_WORK_ACTIVITY_EXECUTE,
                                   .instance_id = id,
                                   .execution_id = 1,
                                   .source_id = i + 2,
                                   .name = "act",
                                   .payload = "in"};
    }
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = events,
                         .history_delta_count = n + 1,
                         .worker_items = work,
                         .worker_item_count = n,
                         .meta = &meta};
    duro_error e;
    int rc = p->ack_orchestration_item(p, item->lock_token, &ack, &e);
    free(events);
    free(work);
    duro_orch_item_free(item);
    CHECK_PRC(rc, DURO_OK, &e);
}

/* ---- URL ------------------------------------------------------------------
 */

TEST(url_forms_open)
{
    duro_error e;
    duro_provider *p = open_url("sqlite::memory:");
    start(p, "a", "orch");
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, NULL), 1);
    duro_provider_close(p);

    p = open_url(test_sqlite_url("plain.db"));
    duro_provider_close(p);
    CHECK(file_exists(test_path("plain.db")));
    /* a '&' that does not start a known parameter is part of the name */
    p = open_url(test_sqlite_url("R&D&poolside=1.db"));
    duro_provider_close(p);
    CHECK(file_exists(test_path("R&D&poolside=1.db")));

    char url[600];
    snprintf(url, sizeof(url), "sqlite://%s", test_path("triple.db"));
    CHECK_EQ(strncmp(url, "sqlite:///", 10), 0);
    p = open_url(url);
    duro_provider_close(p);
    CHECK(file_exists(test_path("triple.db")));

    char cwd[512];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    CHECK_EQ(chdir(test_tmpdir()), 0);
    duro_provider *rel = NULL;
    int rc = duro_provider_open("sqlite:relative.db?pool=1", &rel, &e);
    int made = file_exists("relative.db");
    duro_provider_close(rel);
    CHECK_EQ(chdir(cwd), 0);
    CHECK_PRC(rc, DURO_OK, &e);
    CHECK(made);
    CHECK(file_exists(test_path("relative.db")));
}

TEST(url_parameters_are_applied)
{
    int64_t v = -1;
    duro_provider *p = open_url(test_sqlite_url("defaults.db"));
    CHECK_EQ(duro__sqlite_pragma_int(p, "synchronous", &v), 0);
    CHECK_EQ(v, 1); /* normal */
    CHECK_EQ(duro__sqlite_pragma_int(p, "busy_timeout", &v), 0);
    CHECK_EQ(v, 5000);
    /* the WAL file is cut back to two checkpoint intervals (4000 frames of
     * 2 KiB pages by default) when it starts over */
    CHECK_EQ(duro__sqlite_pragma_int(p, "journal_size_limit", &v), 0);
    CHECK_EQ(v, 32 + 2 * 4000 * (24 + 2048));
    duro_provider_close(p);
    p = open_url(url_with("interval.db", "?checkpoint_pages=100"));
    CHECK_EQ(duro__sqlite_pragma_int(p, "journal_size_limit", &v), 0);
    CHECK_EQ(v, 32 + 2 * 100 * (24 + 2048));
    duro_provider_close(p);

    static const char *const levels[] = {"off", "normal", "FULL", "extra"};
    for (int i = 0; i < 4; i++) {
        char q[64];
        snprintf(q, sizeof(q), "?synchronous=%s&busy_timeout_ms=%d", levels[i],
                 100 + i);
        p = open_url(url_with("sync.db", q));
        CHECK_EQ(duro__sqlite_pragma_int(p, "synchronous", &v), 0);
        CHECK_EQ(v, i);
        CHECK_EQ(duro__sqlite_pragma_int(p, "busy_timeout", &v), 0);
        CHECK_EQ(v, 100 + i);
        duro_provider_close(p);
    }

    /* max_payload, max_history and pool take effect (their behaviour is
     * tested below); pool=0 sends reads through the writer. */
    p = open_url(url_with("all.db", "?max_history=7&max_payload=100&pool=0&"
                                    "synchronous=full&busy_timeout_ms=0"));
    start(p, "x", "orch");
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "x"), 1);
    duro_provider_close(p);
}

TEST(url_malformed_is_bad_url)
{
    static const struct {
        const char *query;  /* appended to sqlite:<path> */
        const char *expect; /* in the message */
    } cases[] = {
        {"?foo=1", "unknown sqlite URL parameter 'foo'"},
        {"?pool", "has no value"},
        {"?pool=", "bad value '' for sqlite URL parameter pool"},
        {"?pool=abc", "parameter pool"},
        {"?pool=65", "parameter pool"},
        {"?pool=-1", "parameter pool"},
        {"?busy_timeout_ms=99999999999", "busy_timeout_ms"},
        {"?busy_timeout_ms=1.5", "busy_timeout_ms"},
        {"?max_history=0", "max_history"},
        {"?max_history=99999999999999999999999", "max_history"},
        {"?max_payload=0", "max_payload"},
        {"?max_payload=2000000000", "max_payload"},
        {"?synchronous=sometimes", "synchronous"},
        {"?synchronous=", "synchronous"},
        {"?pool=1&pool=2", "'pool' given twice"},
        {"?synchronous=off&synchronous=off", "given twice"},
        {"?pool=1&", "empty parameter"},
        {"?&pool=1", "empty parameter"},
        {"?", "empty parameter"},
        {"?pool=1?x=2", "parameter pool"},
        {"?Pool=1", "unknown sqlite URL parameter 'Pool'"},
        {"?create=2", "parameter create (expected 0 or 1)"},
        {"?create=yes", "parameter create"},
        {"?create=", "parameter create"},
        {"?create=0&create=1", "'create' given twice"},
        {"?mode=RO", "parameter mode (expected ro or rw)"},
        {"?mode=", "parameter mode"},
        {"?mode=readonly", "parameter mode"},
        {"?mode=ro&mode=rw", "'mode' given twice"},
        {"?mode=ro&create=1", "mode=ro and create=1 contradict"},
        {"?create=1&mode=ro", "mode=ro and create=1 contradict"},
        {"&mode=ro", "parameter 'mode' after a '&'"},
        /* a parameter after '&' with no '?' is not part of the file name */
        {"&pool=1", "holds parameter 'pool' after a '&'"},
        {"&x=1&synchronous=off", "parameter 'synchronous' after a '&'"},
        {"&create=0?pool=1", "parameter 'create' after a '&'"},
        {"?checkpoint_pages=0", "parameter checkpoint_pages (expected a "
                                "number of WAL pages, 1 to 1000000)"},
        {"?checkpoint_pages=1000001", "parameter checkpoint_pages"},
        {"?checkpoint_pages=many", "parameter checkpoint_pages"},
        {"?checkpoint_pages=1&checkpoint_pages=2",
         "'checkpoint_pages' given twice"},
    };
    duro_error e;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "bad%zu.db", i);
        duro_provider *p = (duro_provider *)&e;
        int rc = duro_provider_open(url_with(name, cases[i].query), &p, &e);
        CHECK_MSG(rc == DURO_BAD_URL, "%s: got %s", cases[i].query,
                  duro_errname(rc));
        CHECK(p == NULL);
        CHECK_MSG(strstr(e.message, cases[i].expect) != NULL,
                  "%s: message '%s' lacks '%s'", cases[i].query, e.message,
                  cases[i].expect);
        CHECK_EQ(e.retryable, 0);
        CHECK_MSG(!file_exists(test_path(name)), "%s created a file",
                  cases[i].query);
        char literal[96]; /* the file a '&' in the path would have named */
        snprintf(literal, sizeof(literal), "%s%s", name, cases[i].query);
        CHECK_MSG(!file_exists(test_path(literal)), "%s created '%s'",
                  cases[i].query, literal);
    }
    static const char *const empty[] = {"sqlite:", "sqlite:?pool=1",
                                        "sqlite://", "sqlite://?pool=2"};
    for (size_t i = 0; i < 4; i++) {
        duro_provider *p = NULL;
        CHECK_PRC(duro_provider_open(empty[i], &p, &e), DURO_BAD_URL, &e);
        CHECK(strstr(e.message, "empty path") != NULL);
    }
    {
        duro_provider *p = (duro_provider *)&e;
        CHECK_PRC(duro_provider_open("sqlite::memory:?mode=ro", &p, &e),
                  DURO_BAD_URL, &e);
        CHECK(p == NULL && strstr(e.message, ":memory:") != NULL);
    }
    /* a non-empty authority is a host, which a file does not have */
    static const char *const hosts[] = {"sqlite://host/x.db",
                                        "sqlite://localhost/tmp/x.db",
                                        "sqlite://host", "sqlite://h?pool=1"};
    for (size_t i = 0; i < 4; i++) {
        duro_provider *p = (duro_provider *)&e;
        CHECK_PRC(duro_provider_open(hosts[i], &p, &e), DURO_BAD_URL, &e);
        CHECK(p == NULL);
        CHECK_MSG(strstr(e.message, "host") != NULL, "%s: %s", hosts[i],
                  e.message);
        CHECK(!file_exists("host/x.db") && !file_exists("host"));
    }
}

/* create=0: a missing file is DURO_NOT_FOUND naming the path, and nothing
 * is created; an existing file opens as usual. */
TEST(url_create_0_never_creates)
{
    const char *path = test_path("absent.db");
    duro_error e;
    duro_provider *p = (duro_provider *)&e;
    CHECK_PRC(duro_provider_open(url_with("absent.db", "?create=0"), &p, &e),
              DURO_NOT_FOUND, &e);
    CHECK(p == NULL);
    CHECK_EQ(e.retryable, 0);
    CHECK_MSG(strstr(e.message, path) != NULL, "message '%s' lacks %s",
              e.message, path);
    CHECK(!file_exists(path));
    char side[600];
    snprintf(side, sizeof(side), "%s-wal", path);
    CHECK(!file_exists(side));
    snprintf(side, sizeof(side), "%s-journal", path);
    CHECK(!file_exists(side));

    /* a directory that does not exist either */
    char deep[600];
    snprintf(deep, sizeof(deep), "sqlite:%s/no/such/dir.db?create=0",
             test_tmpdir());
    CHECK_PRC(duro_provider_open(deep, &p, &e), DURO_NOT_FOUND, &e);

    /* create=1 is the default behaviour; afterwards create=0 opens it */
    p = open_url(url_with("absent.db", "?create=1"));
    start(p, "kept", "orch");
    duro_provider_close(p);
    p = open_url(url_with("absent.db", "?create=0&pool=1"));
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "kept"), 1);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, "kept", &list, &e), DURO_OK, &e);
    duro_instance_list_free(list);
    duro_provider_close(p);

    /* an existing file that cannot be opened is a storage error, not
     * "not found" */
    const char *dir = test_path("a_directory.db");
    CHECK_EQ(mkdir(dir, 0700), 0);
    CHECK_PRC(
        duro_provider_open(url_with("a_directory.db", "?create=0"), &p, &e),
        DURO_STORAGE, &e);

    /* :memory: has no file to find */
    p = open_url("sqlite::memory:?create=0");
    duro_provider_close(p);
}

/* ---- schema and pragmas ---------------------------------------------------
 */

/* Takes a version-4 database back to version 3: migration 4's columns
 * go. */
/* Back to version 9: migration 10's schedules go. */
#define DOWNGRADE_TO_9                                                         \
    "DROP TABLE schedule_fires;"                                               \
    "DROP TABLE schedules;"                                                    \
    "DELETE FROM duro_schema WHERE version = 10;"

/* Back to version 8: migration 9's deadline column goes. */
#define DOWNGRADE_TO_8                                                         \
    DOWNGRADE_TO_9                                                             \
    "ALTER TABLE instances DROP COLUMN deadline_ms;"                           \
    "DELETE FROM duro_schema WHERE version = 9;"

/* Back to version 7: migration 8's table of live runtimes goes. */
#define DOWNGRADE_TO_7                                                         \
    DOWNGRADE_TO_8                                                             \
    "DROP TABLE runtimes;"                                                     \
    "DELETE FROM duro_schema WHERE version = 8;"
/* Back to version 6: migration 7's indexes go. */
#define DOWNGRADE_TO_6                                                         \
    DOWNGRADE_TO_7                                                             \
    "DROP INDEX instances_status_created;"                                     \
    "DROP INDEX instances_status_updated;"                                     \
    "DROP INDEX instances_name_status_created;"                                \
    "DROP INDEX instances_name_status_updated;"                                \
    "DROP INDEX history_control;"                                              \
    "DELETE FROM duro_schema WHERE version = 7;"
/* Back to version 5: migration 6's table goes. */
#define DOWNGRADE_TO_5                                                         \
    DOWNGRADE_TO_6                                                             \
    "DROP TABLE event_ids;"                                                    \
    "DELETE FROM duro_schema WHERE version = 6;"
/* Back to version 4: migration 5's index as version 3 made it. */
#define DOWNGRADE_TO_4                                                         \
    DOWNGRADE_TO_5                                                             \
    "DROP INDEX instances_name_status;"                                        \
    "CREATE INDEX instances_name_status ON instances(name, status);"           \
    "DELETE FROM duro_schema WHERE version = 5;"
#define DOWNGRADE_TO_3                                                         \
    DOWNGRADE_TO_4                                                             \
    "ALTER TABLE orchestrator_queue DROP COLUMN started_ms;"                   \
    "ALTER TABLE orchestrator_queue DROP COLUMN finished_ms;"                  \
    "ALTER TABLE history DROP COLUMN started_ms;"                              \
    "ALTER TABLE history DROP COLUMN finished_ms;"                             \
    "DELETE FROM duro_schema WHERE version = 4;"
static const char downgrade_to_3[] = DOWNGRADE_TO_3;

/* ... and back to version 2: migration 3's indexes and columns go. */
static const char downgrade_to_2[] =
    DOWNGRADE_TO_3 "DROP INDEX instances_finished;"
                   "DROP INDEX instances_name_status;"
                   "DROP INDEX instances_problem;"
                   "ALTER TABLE instances DROP COLUMN cancel_requested_ms;"
                   "ALTER TABLE instances DROP COLUMN cancel_reason;"
                   "ALTER TABLE instances DROP COLUMN cancelled_by;"
                   "ALTER TABLE instances DROP COLUMN finished_ms;"
                   "ALTER TABLE instances DROP COLUMN last_problem;"
                   "ALTER TABLE instances DROP COLUMN last_problem_ms;"
                   "ALTER TABLE instances DROP COLUMN next_attempt_ms;"
                   "DELETE FROM duro_schema WHERE version = 3;";

/* ---- files that are not duro stores, and mode=ro ---------------------- */

static int64_t raw_count(const char *path, const char *sql);

/* The whole file, to compare byte for byte (malloc'd, *size bytes). */
static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f == NULL)
        return NULL;
    char *buf = malloc(1 << 20);
    *size = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static const char *journal_mode(const char *path)
{
    static char mode[32];
    sqlite3 *db = raw_open(path);
    sqlite3_stmt *s = NULL;
    snprintf(mode, sizeof(mode), "?");
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        snprintf(mode, sizeof(mode), "%s", sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return mode;
}

static int side_files(const char *path)
{
    static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
    int n = 0;
    for (size_t i = 0; i < 3; i++) {
        char side[700];
        snprintf(side, sizeof(side), "%s%s", path, suffixes[i]);
        n += file_exists(side);
    }
    return n;
}

/* create=0 and mode=ro open a duro store only: another application's
 * database, or an empty file, fails DURO_NOT_FOUND naming the path, and
 * the file is left byte for byte as it was (its journal mode too, and no
 * -wal, -shm or -journal beside it). create=1 makes an empty file a store
 * but refuses another application's database (DURO_SCHEMA), unchanged.
 * (create=0 used to create duro's tables in it and switch it to WAL.) */
/* A file that is not empty and not a SQLite database - shorter than
 * SQLite's header, which SQLite itself would take for an empty database
 * and write over, or longer - is refused with any parameters, and not a
 * byte of it changes. */
TEST(a_file_that_is_no_sqlite_database_is_refused_unchanged)
{
    static const char *const contents[] = {"x", "hello, world\n",
                                           "SQLite format 2\n and more text "
                                           "that is not a database at all"};
    static const char *const queries[] = {"", "?create=1", "?create=0",
                                          "?mode=ro"};
    for (size_t i = 0; i < 3; i++) {
        for (size_t q = 0; q < 4; q++) {
            char name[32], path[600];
            snprintf(name, sizeof(name), "notdb-%zu-%zu.db", i, q);
            snprintf(path, sizeof(path), "%s", test_path(name));
            FILE *f = fopen(path, "w");
            CHECK(f != NULL);
            if (f == NULL)
                continue;
            fputs(contents[i], f);
            fclose(f);
            duro_provider *p = (duro_provider *)&f;
            duro_error e;
            int rc = duro_provider_open(url_with(name, queries[q]), &p, &e);
            CHECK_MSG(rc == DURO_SCHEMA, "%s%s: got %s (%s)", contents[i],
                      queries[q], duro_errname(rc), e.message);
            CHECK(p == NULL);
            CHECK_MSG(strstr(e.message, "not a SQLite database") != NULL,
                      "message: %s", e.message);
            size_t size = 0;
            char *now = slurp(path, &size);
            CHECK(now != NULL && size == strlen(contents[i]) &&
                  memcmp(now, contents[i], size) == 0);
            free(now);
            char side[700];
            snprintf(side, sizeof(side), "%s-wal", path);
            CHECK(!file_exists(side));
        }
    }
}

TEST(a_file_that_is_no_duro_store_is_never_changed)
{
    char other[600], empty[600]; /* test_path's buffers rotate */
    snprintf(other, sizeof(other), "%s", test_path("other.db"));
    snprintf(empty, sizeof(empty), "%s", test_path("empty.db"));
    sqlite3 *db = raw_open(other);
    CHECK_EQ(sqlite3_exec(db,
                          "CREATE TABLE users(id INTEGER); "
                          "INSERT INTO users VALUES(1);",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);
    FILE *f = fopen(empty, "w");
    CHECK(f != NULL);
    if (f != NULL)
        fclose(f);
    static const char *const queries[] = {"?create=0", "?mode=ro",
                                          "?create=0&mode=ro", "?create=1"};
    for (size_t i = 0; i < 4; i++) {
        const char *files[] = {"other.db", "empty.db"};
        for (size_t j = 0; j < 2; j++) {
            const char *path = j == 0 ? other : empty;
            if (i == 3 && j == 1)
                continue; /* create=1 on an empty file: below */
            size_t before_size = 0, after_size = 0;
            char *before = slurp(path, &before_size);
            duro_error e;
            duro_provider *p = (duro_provider *)&e;
            int rc = duro_provider_open(url_with(files[j], queries[i]), &p, &e);
            int expected = i == 3 ? DURO_SCHEMA : DURO_NOT_FOUND;
            CHECK_MSG(rc == expected, "%s%s: got %s (%s)", files[j], queries[i],
                      duro_errname(rc), e.message);
            CHECK(p == NULL);
            CHECK_MSG(strstr(e.message, path) != NULL &&
                          strstr(e.message, i == 3
                                                ? "another application"
                                                : "not a duro store") != NULL,
                      "'%s'", e.message);
            /* other.db holds one table: the count agrees with its noun */
            if (i == 3)
                CHECK_MSG(strstr(e.message, "holds 1 other schema object (") !=
                              NULL,
                          "'%s'", e.message);
            char *after = slurp(path, &after_size);
            CHECK_MSG(before_size == after_size &&
                          memcmp(before, after, before_size) == 0,
                      "%s%s changed the file", files[j], queries[i]);
            free(before);
            free(after);
            CHECK_EQ(side_files(path), 0);
        }
    }
    CHECK_STR(journal_mode(other), "delete");
    CHECK_EQ(raw_count(other, "SELECT COUNT(*) FROM sqlite_master"), 1);

    /* two objects (a table and its index): the plural */
    db = raw_open(test_path("other2.db"));
    CHECK_EQ(sqlite3_exec(db,
                          "CREATE TABLE users(id INTEGER); "
                          "CREATE INDEX users_id ON users(id);",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);
    duro_error e2;
    duro_provider *p2 = NULL;
    CHECK_EQ(duro_provider_open(url_with("other2.db", ""), &p2, &e2),
             DURO_SCHEMA);
    CHECK_MSG(strstr(e2.message, "holds 2 other schema objects (") != NULL,
              "'%s'", e2.message);

    /* an empty file is where a new store may start */
    duro_provider *p = open_url(url_with("empty.db", "?create=1"));
    start(p, "kept", "orch");
    duro_provider_close(p);
    CHECK_EQ(raw_count(empty, "SELECT COUNT(*) FROM instances"), 1);
}

/* mode=ro: every connection read-only, no PRAGMA that writes, no
 * migration. A current store reads; every write fails DURO_STORAGE naming
 * mode=ro; a missing file is DURO_NOT_FOUND; a store behind this code's
 * schema fails DURO_SCHEMA saying mode=ro does not migrate, and stays as
 * it was. */
TEST(mode_ro_reads_and_never_writes)
{
    char path[600];
    snprintf(path, sizeof(path), "%s", test_path("ro.db"));
    duro_provider *p = open_url(url_with("ro.db", ""));
    start(p, "kept", "orch");
    duro_provider_close(p);

    p = open_url(url_with("ro.db", "?mode=ro"));
    duro_error e;
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, "kept", &list, &e), DURO_OK, &e);
    CHECK(list != NULL && list->count == 1);
    duro_instance_list_free(list);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "kept"), 1);
    duro_work_item it = {
        .kind = DURO_WORK_START, .instance_id = "no", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_STORAGE, &e);
    CHECK_EQ(e.retryable, 0);
    CHECK_MSG(strstr(e.message, "mode=ro") != NULL &&
                  strstr(e.message, path) != NULL,
              "'%s'", e.message);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 1000, NULL, &item, &e),
              DURO_STORAGE, &e);
    duro_provider_close(p);
    CHECK_EQ(raw_count(path, "SELECT COUNT(*) FROM instances"), 1);

    p = (duro_provider *)&e;
    CHECK_PRC(duro_provider_open(url_with("ro-absent.db", "?mode=ro"), &p, &e),
              DURO_NOT_FOUND, &e);
    CHECK(!file_exists(test_path("ro-absent.db")));

    /* behind: not migrated */
    sqlite3 *db = raw_open(path);
    CHECK_EQ(sqlite3_exec(db, DOWNGRADE_TO_4, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    p = (duro_provider *)&e;
    CHECK_PRC(duro_provider_open(url_with("ro.db", "?mode=ro"), &p, &e),
              DURO_SCHEMA, &e);
    CHECK(p == NULL);
    CHECK_MSG(strstr(e.message, "mode=ro does not migrate") != NULL &&
                  strstr(e.message, path) != NULL,
              "'%s'", e.message);
    CHECK_EQ(raw_count(path, "SELECT MAX(version) FROM duro_schema"), 4);
    /* create=0 without mode=ro still migrates */
    p = open_url(url_with("ro.db", "?create=0"));
    duro_provider_close(p);
    CHECK_EQ(raw_count(path, "SELECT MAX(version) FROM duro_schema"), 10);
}

TEST(schema_version_recorded_and_newer_refused)
{
    const char *path = test_path("schema.db");
    duro_provider *p = open_url(test_sqlite_url("schema.db"));
    duro_provider_close(p);
    sqlite3 *db = raw_open(path);
    CHECK_EQ(raw_int(db, "SELECT MAX(version) FROM duro_schema"), 10);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM duro_schema"), 10);
    /* Back to version 1 (without migrations 2 and 3): reopening migrates. */
    CHECK_EQ(sqlite3_exec(db, downgrade_to_2, NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db,
                          "DROP INDEX history_activity_cancel;"
                          "DELETE FROM duro_schema WHERE version = 2",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);

    /* Reopening migrates 1 -> 8; reopening an up-to-date one changes
     * nothing. */
    p = open_url(test_sqlite_url("schema.db"));
    start(p, "kept", "orch");
    duro_provider_close(p);
    p = open_url(test_sqlite_url("schema.db"));
    duro_provider_close(p);
    db = raw_open(path);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM duro_schema"), 10);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name IN "
                         "('history_activity_cancel', 'instances_finished', "
                         "'instances_name_status', 'instances_problem', "
                         "'event_ids', 'runtimes')"),
             6);
    /* migration 5: the name and status index pages in id order */
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM "
                         "pragma_index_info('instances_name_status')"),
             3);
    CHECK_EQ(sqlite3_exec(db,
                          "PRAGMA journal_mode = DELETE;"
                          "INSERT INTO duro_schema VALUES(99, 0);"
                          "CREATE TABLE from_the_future(x)",
                          NULL, NULL, NULL),
             SQLITE_OK);
    int64_t tables = raw_int(db, "SELECT COUNT(*) FROM sqlite_master");
    sqlite3_close(db);

    duro_error e;
    p = (duro_provider *)&e;
    CHECK_PRC(duro_provider_open(test_sqlite_url("schema.db"), &p, &e),
              DURO_SCHEMA, &e);
    CHECK(p == NULL);
    CHECK(strstr(e.message, "99") != NULL);
    db = raw_open(path);
    CHECK_EQ(raw_int(db, "SELECT MAX(version) FROM duro_schema"), 99);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master"), tables);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM instances"), 1);
    sqlite3_stmt *s = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(s, 0), "delete");
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* Migration 3 fills its columns from what a version-2 store holds: the
 * finish time of ended instances (their last metadata change), the first
 * queued cancellation of a live one (in the order a turn takes them), the
 * cancellation a cancelled one's history records. */
TEST(migration_3_fills_in_cancellations_and_finish_times)
{
    const char *path = test_path("migrate3.db");
    duro_provider *p = open_url(test_sqlite_url("migrate3.db"));
    duro_error e;
    start(p, "done", "orch");
    start(p, "waiting", "orch");
    start(p, "gone", "orch");
    start(p, "plain", "orch");
    for (int i = 0; i < 4; i++) {
        duro_orch_item *item = fetch_orch(p);
        CHECK(item != NULL);
        const char *id = item->instance_id;
        duro_event ev[3] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED, "orch"),
                            event(2, DURO_EVENT_ORCHESTRATION_COMPLETED, NULL),
                            event(3, DURO_EVENT_ORCHESTRATION_CANCELLED, NULL)};
        duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                                   .name = "orch"};
        size_t n = 1;
        if (strcmp(id, "done") == 0) {
            meta.status = DURO_STATUS_COMPLETED;
            n = 2;
        } else if (strcmp(id, "gone") == 0) {
            ev[1] = event(2, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, NULL);
            ev[1].reason = "old";
            ev[1].requested_by = "alice";
            ev[1].timestamp_ms = 4242;
            meta.status = DURO_STATUS_CANCELLED;
            meta.error = "old";
            meta.category = DURO_CATEGORY_CANCELLED;
            n = 3;
        }
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = ev,
                             .history_delta_count = n,
                             .meta = &meta};
        CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
    }
    duro_provider_close(p);
    sqlite3 *db = raw_open(path);
    CHECK_EQ(sqlite3_exec(db, downgrade_to_2, NULL, NULL, NULL), SQLITE_OK);
    /* Two cancellations queued for "waiting" the way version 2 left them:
     * the second inserted is due first, so a turn takes it first. */
    CHECK_EQ(sqlite3_exec(db,
                          "INSERT INTO orchestrator_queue(instance_id, kind, "
                          "reason, requested_by, enqueued_ms, visible_at) "
                          "VALUES('waiting', 8, 'later', 'bob', 2000, 2000);"
                          "INSERT INTO orchestrator_queue(instance_id, kind, "
                          "reason, requested_by, enqueued_ms, visible_at) "
                          "VALUES('waiting', 8, 'first', 'carol', 1000, 1000);"
                          "INSERT INTO orchestrator_ready(instance_id, "
                          "ready_at) VALUES('waiting', 1000);",
                          NULL, NULL, NULL),
             SQLITE_OK);
    int64_t done_updated =
        raw_int(db, "SELECT updated_ms FROM instances WHERE instance_id = "
                    "'done'");
    sqlite3_close(db);

    p = open_url(test_sqlite_url("migrate3.db"));
    duro_instance_list *l = NULL;
    CHECK_PRC(p->get_instance(p, "done", &l, &e), DURO_OK, &e);
    CHECK_EQ(l->items[0].finished_ms, done_updated);
    CHECK_EQ(l->items[0].cancel_requested_ms, 0);
    duro_instance_list_free(l);
    CHECK_PRC(p->get_instance(p, "waiting", &l, &e), DURO_OK, &e);
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    CHECK_EQ(l->items[0].finished_ms, 0);
    CHECK_EQ(l->items[0].cancel_requested_ms, 1000);
    CHECK_STR(l->items[0].cancel_reason, "first");
    CHECK_STR(l->items[0].cancelled_by, "carol");
    duro_instance_list_free(l);
    CHECK_PRC(p->get_instance(p, "gone", &l, &e), DURO_OK, &e);
    CHECK_EQ(l->items[0].cancel_requested_ms, 4242);
    CHECK_STR(l->items[0].cancel_reason, "old");
    CHECK_STR(l->items[0].cancelled_by, "alice");
    CHECK(l->items[0].finished_ms > 0);
    duro_instance_list_free(l);
    CHECK_PRC(p->get_instance(p, "plain", &l, &e), DURO_OK, &e);
    CHECK_EQ(l->items[0].cancel_requested_ms, 0);
    CHECK(l->items[0].cancel_reason == NULL);
    CHECK(l->items[0].last_problem == NULL);
    CHECK_EQ(l->items[0].finished_ms, 0);
    duro_instance_list_free(l);
    /* The turn takes the first one, and the item carries it. */
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "waiting");
    CHECK_EQ(item->message_count, 2);
    CHECK_STR(item->messages[0].reason, "first");
    CHECK_STR(item->cancel_reason, "first");
    CHECK_STR(item->cancelled_by, "carol");
    CHECK_EQ(item->cancel_requested_ms, 1000);
    duro_orch_item_free(item);
    duro_provider_close(p);
}

/* Migrations 8, 9 and 10 add the table of live runtimes, the deadline
 * column and the schedules to a version-7 store in place: what it held
 * stays, and runtimes register in it at once. */
TEST(migration_8_adds_the_live_runtimes)
{
    const char *path = test_path("migrate8.db");
    duro_provider *p = open_url(test_sqlite_url("migrate8.db"));
    start(p, "kept", "orch");
    duro_provider_close(p);
    sqlite3 *db = raw_open(path);
    CHECK_EQ(sqlite3_exec(db, DOWNGRADE_TO_7, NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
                         "'runtimes'"),
             0);
    sqlite3_close(db);

    p = open_url(test_sqlite_url("migrate8.db"));
    db = raw_open(path);
    CHECK_EQ(raw_int(db, "SELECT MAX(version) FROM duro_schema"), 10);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM instances"), 1);
    /* and migration 9's deadline column, read 0 ("none") by the row
     * written before it, and migration 10's schedules, empty */
    CHECK_EQ(raw_int(db, "SELECT deadline_ms FROM instances"), 0);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM schedules"), 0);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM schedule_fires"), 0);
    sqlite3_close(db);
    duro_runtime_orchestration o = {"orch", "2"};
    duro_runtime_info r = {.runtime_id = "rt",
                           .host = "h",
                           .pid = 7,
                           .heartbeat_every_ms = 1000,
                           .orchestrations = &o,
                           .orchestration_count = 1};
    duro_error e;
    CHECK_PRC(p->register_runtime(p, &r, &e), DURO_OK, &e);
    duro_runtime_list *l = NULL;
    CHECK_PRC(p->list_runtimes(p, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].orchestrations[0].version, "2");
    duro_runtime_list_free(l);
    duro_provider_close(p);
}

/* Migration 4 adds the activity run times to a version-3 store in place:
 * its history and queued completions read 0 ("unknown"), and what is
 * written after it keeps its times. */
TEST(migration_4_adds_activity_run_times)
{
    const char *path = test_path("migrate4.db");
    duro_provider *p = open_url(test_sqlite_url("migrate4.db"));
    duro_error e;
    start(p, "old", "orch");
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    duro_event ev[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED, "orch"),
                        event(2, DURO_EVENT_ACTIVITY_SCHEDULED, "act")};
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = ev,
                         .history_delta_count = 2,
                         .meta = &meta};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_provider_close(p);
    sqlite3 *db = raw_open(path);
    CHECK_EQ(sqlite3_exec(db, downgrade_to_3, NULL, NULL, NULL), SQLITE_OK);
    /* a completion queued by a version-3 worker */
    CHECK_EQ(sqlite3_exec(db,
                          "INSERT INTO orchestrator_queue(instance_id, kind, "
                          "execution_id, source_id, payload, enqueued_ms, "
                          "visible_at) VALUES('old', 2, 1, 2, '\"r\"', 1000, "
                          "1000);"
                          "INSERT INTO orchestrator_ready(instance_id, "
                          "ready_at) VALUES('old', 1000);",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);

    p = open_url(test_sqlite_url("migrate4.db"));
    db = raw_open(path);
    CHECK_EQ(raw_int(db, "SELECT MAX(version) FROM duro_schema"), 10);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM pragma_table_info('history') "
                         "WHERE name IN ('started_ms', 'finished_ms')"),
             2);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM "
                         "pragma_table_info('orchestrator_queue') "
                         "WHERE name IN ('started_ms', 'finished_ms')"),
             2);
    sqlite3_close(db);
    item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_ACTIVITY_COMPLETED);
    CHECK_EQ(item->messages[0].started_ms, 0);
    CHECK_EQ(item->messages[0].finished_ms, 0);
    CHECK_EQ(item->history_count, 2);
    CHECK_EQ(item->history[1].started_ms, 0);
    duro_event done = event(3, DURO_EVENT_ACTIVITY_COMPLETED, NULL);
    done.source_event_id = 2;
    done.started_ms = 5000;
    done.finished_ms = 5250;
    ack = (duro_orch_ack){
        .execution_id = 1, .history_delta = &done, .history_delta_count = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "old", 0, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 3);
    CHECK_EQ(h->events[1].started_ms, 0);
    CHECK_EQ(h->events[1].finished_ms, 0);
    CHECK_EQ(h->events[2].started_ms, 5000);
    CHECK_EQ(h->events[2].finished_ms, 5250);
    duro_history_free(h);
    duro_provider_close(p);
}

TEST(wal_mode_applied)
{
    duro_provider *p = open_url(test_sqlite_url("wal.db"));
    sqlite3 *db = raw_open(test_path("wal.db"));
    sqlite3_stmt *s = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_close(db);
    duro_provider_close(p);
}

/* Statements whose plan may scan: the whole-queue counts, and the store
 * stats' walks of their own indexes (checked below: a covering scan of
 * instances_name_status, and instances_problem, which holds only the
 * instances with a problem). */
static int plan_may_scan(const char *name)
{
    static const char *const exempt[] = {"OQ_COUNT", "WQ_COUNT",
                                         "STATS_INSTANCES", "STATS_PROBLEMS",
                                         "STATS_ORCH_QUEUED"};
    for (size_t i = 0; i < sizeof(exempt) / sizeof(exempt[0]); i++)
        if (strcmp(name, exempt[i]) == 0)
            return 1;
    return 0;
}

static void plan_of(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    char eqp[4096];
    snprintf(eqp, sizeof(eqp), "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *s = NULL;
    out[0] = '\0';
    CHECK_MSG(sqlite3_prepare_v2(db, eqp, -1, &s, NULL) == SQLITE_OK, "%s: %s",
              sql, sqlite3_errmsg(db));
    size_t used = 0;
    while (sqlite3_step(s) == SQLITE_ROW && used < cap) {
        const char *d = (const char *)sqlite3_column_text(s, 3);
        used += (size_t)snprintf(out + used, cap - used, "%s; ", d);
    }
    sqlite3_finalize(s);
}

/* The rows of EXPLAIN QUERY PLAN sql: id, parent and detail each. */
typedef struct plan_row {
    int id, parent;
    char detail[256];
} plan_row;

static size_t plan_rows(sqlite3 *db, const char *sql, plan_row *rows,
                        size_t cap)
{
    char eqp[8192];
    snprintf(eqp, sizeof(eqp), "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *s = NULL;
    CHECK_MSG(sqlite3_prepare_v2(db, eqp, -1, &s, NULL) == SQLITE_OK, "%s: %s",
              sql, sqlite3_errmsg(db));
    size_t n = 0;
    while (sqlite3_step(s) == SQLITE_ROW && n < cap) {
        rows[n].id = sqlite3_column_int(s, 0);
        rows[n].parent = sqlite3_column_int(s, 1);
        snprintf(rows[n].detail, sizeof(rows[n].detail), "%s",
                 (const char *)sqlite3_column_text(s, 3));
        n++;
    }
    sqlite3_finalize(s);
    return n;
}

/* 1 when row r lies inside a CO-ROUTINE (a subquery that chooses rows). */
static int in_coroutine(const plan_row *rows, size_t n, size_t r)
{
    for (int parent = rows[r].parent; parent != 0;) {
        size_t k = 0;
        while (k < n && rows[k].id != parent)
            k++;
        if (k == n)
            return 0;
        if (strncmp(rows[k].detail, "CO-ROUTINE", 10) == 0)
            return 1;
        parent = rows[k].parent;
    }
    return 0;
}

/* The operators' queries (provider contract version 10): every page
 * statement reads its index by a seek - the cursor's key is the range's
 * bound - and never scans a table. The ordered paths read their ranges in
 * the page's order, so nothing they read is sorted: no TEMP B-TREE inside
 * the rows they choose (one range per status, `ranges` times), only the
 * final sort of the at most 7 pages of ids they chose, when they join them
 * with their instances. The sorted paths (a name prefix's range, a
 * parent's children, the instances with a problem) sort what their index
 * selects. */
static void check_query_plans(sqlite3 *db)
{
    static const struct {
        const char *name, *index;
        int ranges; /* times `index` is read */
        int sorts;  /* 1: sorts what it chose */
    } cases[] = {
        {"QUERY_ALL_ID", "sqlite_autoindex_instances_1 (instance_id>?)", 1, 0},
        {"QUERY_NAME_ID", "INDEX instances_name (name=? AND instance_id>?)", 1,
         0},
        {"QUERY_STATUS_ID",
         "INDEX instances_status (status=? AND "
         "instance_id>?)",
         7, 0},
        {"QUERY_STATUS_CREATED",
         "instances_status_created (status=? AND created_ms>? AND "
         "(created_ms,instance_id)<(?,?))",
         7, 0},
        {"QUERY_STATUS_UPDATED",
         "instances_status_updated (status=? AND "
         "(updated_ms,instance_id)<(?,?))",
         7, 0},
        {"QUERY_NAME_STATUS_ID",
         "instances_name_status (name=? AND status=? AND instance_id>?)", 7, 0},
        {"QUERY_NAME_STATUS_CREATED",
         "instances_name_status_created (name=? AND status=? AND "
         "created_ms>? AND (created_ms,instance_id)<(?,?))",
         7, 0},
        {"QUERY_NAME_STATUS_UPDATED",
         "instances_name_status_updated (name=? AND status=? AND "
         "(updated_ms,instance_id)<(?,?))",
         7, 0},
        {"QUERY_PREFIX_ID", "INDEX instances_name (name>? AND name<?)", 1, 1},
        {"QUERY_PREFIX_CREATED", "INDEX instances_name (name>? AND name<?)", 1,
         1},
        {"QUERY_PREFIX_UPDATED", "INDEX instances_name (name>? AND name<?)", 1,
         1},
        {"QUERY_PARENT_ID", "instances_parent (parent_instance=?)", 1, 1},
        {"QUERY_PARENT_CREATED", "instances_parent (parent_instance=?)", 1, 1},
        {"QUERY_PARENT_UPDATED", "instances_parent (parent_instance=?)", 1, 1},
        {"QUERY_PROBLEM_ID", "USING INDEX instances_problem", 1, 1},
        {"QUERY_PROBLEM_CREATED", "USING INDEX instances_problem", 1, 1},
        {"QUERY_PROBLEM_UPDATED", "USING INDEX instances_problem", 1, 1},
        {"QUERY_COUNT_NAME", "(name=?)", 1, 0},
        {"QUERY_COUNT_STATUS", "(status=?)", 1, 0},
        {"QUERY_COUNT_NAME_STATUS", "(name=? AND status=?)", 1, 0},
        {"QUERY_COUNT_PREFIX", "instances_name (name>? AND name<?)", 1, 0},
        {"QUERY_COUNT_PARENT", "instances_parent (parent_instance=?)", 1, 0},
        {"QUERY_COUNT_PROBLEM", "USING INDEX instances_problem", 1, 0},
        {"CONTROL_EVENTS",
         "history_control (timestamp_ms>? AND "
         "(timestamp_ms,instance_id,execution_id,event_id)<(?,?,?,?))",
         1, 0},
    };
    size_t checked = 0;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__sqlite_dialect);
         i++) {
        const char *name = duro__sql_statement_name(&duro__sqlite_dialect, i);
        if (strncmp(name, "QUERY_", 6) != 0 && strcmp(name, "CONTROL_EVENTS"))
            continue;
        size_t k = 0;
        while (k < sizeof(cases) / sizeof(cases[0]) &&
               strcmp(cases[k].name, name) != 0)
            k++;
        if (k == sizeof(cases) / sizeof(cases[0])) {
            /* the count of every instance reads them all: it may */
            CHECK_MSG(strcmp(name, "QUERY_COUNT_ALL") == 0,
                      "%s has no expected plan", name);
            continue;
        }
        checked++;
        plan_row rows[128];
        size_t n = plan_rows(
            db, duro__sql_statement_sql(&duro__sqlite_dialect, i), rows, 128);
        int ranges = 0, sorts_chosen = 0, sorts = 0;
        char all[4096] = "";
        for (size_t r = 0; r < n; r++) {
            const char *d = rows[r].detail;
            size_t len = strlen(all);
            snprintf(all + len, sizeof(all) - len, "%s; ", d);
            ranges += strstr(d, cases[k].index) != NULL;
            if (strstr(d, "TEMP B-TREE") != NULL) {
                sorts++;
                sorts_chosen += in_coroutine(rows, n, r);
            }
            /* a table read whole: "SCAN i", "SCAN h" (the page's own
             * subquery, SCAN pg, is its chosen ids) */
            int whole =
                (strncmp(d, "SCAN i", 6) == 0 || strncmp(d, "SCAN h", 6) == 0 ||
                 strncmp(d, "SCAN instances", 14) == 0 ||
                 strncmp(d, "SCAN history", 12) == 0) &&
                strstr(d, " USING ") == NULL;
            CHECK_MSG(!whole, "%s scans a table: %s", name, all);
        }
        CHECK_MSG(ranges == cases[k].ranges, "%s reads %s %d times, not %d: %s",
                  name, cases[k].index, ranges, cases[k].ranges, all);
        CHECK_MSG(sorts_chosen == cases[k].sorts,
                  "%s sorts what it chose %d times, expected %d: %s", name,
                  sorts_chosen, cases[k].sorts, all);
        /* only a joined page sorts again, its final ids */
        int joined = strncmp(name, "QUERY_COUNT", 11) != 0 &&
                     strcmp(name, "QUERY_ALL_ID") != 0 &&
                     strcmp(name, "QUERY_NAME_ID") != 0 &&
                     strcmp(name, "CONTROL_EVENTS") != 0;
        CHECK_MSG(sorts - sorts_chosen == joined,
                  "%s: %d sorts of its page (expected %d): %s", name,
                  sorts - sorts_chosen, joined, all);
    }
    CHECK_EQ(checked, sizeof(cases) / sizeof(cases[0]));
}

TEST(query_plans_use_indexes)
{
    duro_provider *p = open_url(test_sqlite_url("plans.db"));
    sqlite3 *db = raw_open(test_path("plans.db"));
    /* No statement scans a table (json_each and the recursive CTE's own
     * rows aside). */
    static const char *const scans[] = {"SCAN orchestrator_queue",
                                        "SCAN worker_queue",
                                        "SCAN orchestrator_ready",
                                        "SCAN history",
                                        "SCAN executions",
                                        "SCAN instances",
                                        "SCAN c"};
    char plan[4096];
    for (size_t i = 0; i < duro__sql_statement_count(&duro__sqlite_dialect);
         i++) {
        const char *name = duro__sql_statement_name(&duro__sqlite_dialect, i);
        const char *sql = duro__sql_statement_sql(&duro__sqlite_dialect, i);
        if (strncmp(sql, "BEGIN", 5) == 0 || strcmp(sql, "COMMIT") == 0 ||
            strcmp(sql, "ROLLBACK") == 0 || plan_may_scan(name))
            continue;
        plan_of(db, sql, plan, sizeof(plan));
        for (size_t k = 0; k < sizeof(scans) / sizeof(scans[0]); k++)
            CHECK_MSG(strstr(plan, scans[k]) == NULL, "%s scans: %s", name,
                      plan);
    }
    /* The fetch paths use their indexes and need no sort. */
    static const struct {
        const char *name, *index;
    } expect[] = {
        {"READY_NEXT", "orchestrator_ready_at"},
        {"READY_MIN", "orchestrator_ready_at"},
        {"OQ_FETCHED", "orchestrator_queue_instance"},
        {"OQ_TAG", "orchestrator_queue_instance"},
        {"OQ_MIN_VISIBLE", "orchestrator_queue_instance"},
        {"OQ_DELETE_TAGGED", "orchestrator_queue_instance"},
        {"WQ_NEXT", "worker_queue_available"},
        {"WQ_CLAIM", "INTEGER PRIMARY KEY"},
        {"WQ_MIN", "worker_queue_available"},
        {"WQ_CANCEL", "worker_queue_activity"},
        {"WQ_ACK", "INTEGER PRIMARY KEY"},
        {"WQ_RENEW", "INTEGER PRIMARY KEY"},
        {"HISTORY_CANCEL_REASON", "history_activity_cancel"},
        {"LIST_NAME", "instances_name"},
        {"LIST_STATUS", "instances_status"},
        {"LIST_NAME_STATUS", "instances_name_status (name=? AND status=? AND "
                             "instance_id>?)"},
        {"DELETE_INSTANCES", "instances_parent"},
        {"SWEEP_REQUEST_NAME", "instances_name"},
        {"SWEEP_PURGE_NAME", "instances_name"},
        {"REQUEST_IDS_ENQUEUE", "sqlite_autoindex_instances_1"},
        {"REQUEST_IDS_READY", "sqlite_autoindex_instances_1"},
        {"CANCEL_IDS_MARK", "sqlite_autoindex_instances_1"},
        {"PURGE_HISTORY", "PRIMARY KEY"},
        {"PURGE_MESSAGES", "orchestrator_queue_instance"},
        {"PURGE_WORK", "worker_queue_activity"},
        {"INSTANCE_SET_PROBLEM", "sqlite_autoindex_instances_1"},
        {"INSTANCE_CANCEL_REQUEST", "sqlite_autoindex_instances_1"},
        /* store stats: no history, no table scan, no sort */
        {"STATS_INSTANCES", "SCAN instances USING COVERING INDEX "
                            "instances_name_status"},
        {"STATS_PROBLEMS", "USING INDEX instances_problem"},
        {"STATS_ORCH_QUEUED", "SCAN orchestrator_queue USING COVERING "
                              "INDEX orchestrator_queue_instance"},
        {"STATS_ORCH_WAITING", "orchestrator_ready_at (ready_at>?)"},
        {"STATS_ORCH_WAITING", "COVERING INDEX orchestrator_queue_instance"},
        {"STATS_ORCH_OLDEST", "orchestrator_ready_at (ready_at<?)"},
        {"STATS_ORCH_OLDEST", "COVERING INDEX orchestrator_queue_instance"},
        {"STATS_WORKER_READY", "COVERING INDEX worker_queue_available"},
        {"STATS_WORKER_LOCKED", "worker_queue_available (available_at>?)"},
    };
    for (size_t k = 0; k < sizeof(expect) / sizeof(expect[0]); k++) {
        size_t i = 0;
        while (i < duro__sql_statement_count(&duro__sqlite_dialect) &&
               strcmp(duro__sql_statement_name(&duro__sqlite_dialect, i),
                      expect[k].name) != 0)
            i++;
        CHECK(i < duro__sql_statement_count(&duro__sqlite_dialect));
        plan_of(db, duro__sql_statement_sql(&duro__sqlite_dialect, i), plan,
                sizeof(plan));
        CHECK_MSG(strstr(plan, expect[k].index) != NULL, "%s: %s",
                  expect[k].name, plan);
        CHECK_MSG(strstr(plan, "TEMP B-TREE") == NULL, "%s sorts: %s",
                  expect[k].name, plan);
    }
    /* Sweeps over a status sort what they select (the set, once per
     * sweep); they still search their index. */
    static const struct {
        const char *name, *index;
    } sorted[] = {
        {"SWEEP_REQUEST_ALL", "instances_status"},
        {"SWEEP_PURGE_ALL", "instances_finished"},
    };
    for (size_t k = 0; k < sizeof(sorted) / sizeof(sorted[0]); k++) {
        size_t i = 0;
        while (i < duro__sql_statement_count(&duro__sqlite_dialect) &&
               strcmp(duro__sql_statement_name(&duro__sqlite_dialect, i),
                      sorted[k].name) != 0)
            i++;
        CHECK(i < duro__sql_statement_count(&duro__sqlite_dialect));
        plan_of(db, duro__sql_statement_sql(&duro__sqlite_dialect, i), plan,
                sizeof(plan));
        CHECK_MSG(strstr(plan, sorted[k].index) != NULL, "%s: %s",
                  sorted[k].name, plan);
    }
    /* A batch looks each of its instances up by primary key: a status
     * index would range over every instance of a status for each id. */
    static const char *const by_key[] = {
        "REQUEST_IDS_READ", "REQUEST_IDS_ENQUEUE",   "REQUEST_IDS_READY",
        "CANCEL_IDS_MARK",  "SWEEP_REQUEST_RECHECK", "PURGE_BATCH",
        "PURGE_INSTANCES"};
    for (size_t k = 0; k < sizeof(by_key) / sizeof(by_key[0]); k++) {
        size_t i = 0;
        while (i < duro__sql_statement_count(&duro__sqlite_dialect) &&
               strcmp(duro__sql_statement_name(&duro__sqlite_dialect, i),
                      by_key[k]) != 0)
            i++;
        CHECK(i < duro__sql_statement_count(&duro__sqlite_dialect));
        plan_of(db, duro__sql_statement_sql(&duro__sqlite_dialect, i), plan,
                sizeof(plan));
        CHECK_MSG(strstr(plan, "instances_status") == NULL &&
                      strstr(plan, "instances_finished") == NULL &&
                      strstr(plan, "instances_name") == NULL,
                  "%s ranges over an index instead of probing the key: %s",
                  by_key[k], plan);
        CHECK_MSG(strstr(plan, "sqlite_autoindex_instances_1") != NULL,
                  "%s: %s", by_key[k], plan);
    }
    check_query_plans(db);
    sqlite3_close(db);
    duro_provider_close(p);
}

/* One round of every frequent operation. */
static void workload_round(duro_provider *p, int i)
{
    duro_error e;
    char id[32];
    snprintf(id, sizeof(id), "reuse-%d", i);
    start(p, id, "orch");
    first_turn(p, id, 2);
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 30000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 30000, &e), DURO_OK,
              &e);
    duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                           .instance_id = id,
                           .execution_id = 1,
                           .source_id = w->item.source_id,
                           .payload = "out"};
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
    duro_worker_item_free(w);
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_PRC(p->renew_orchestration_item_lock(p, item->lock_token, 30000, &e),
              DURO_OK, &e);
    duro_event ev = event(4, DURO_EVENT_ACTIVITY_COMPLETED, NULL);
    duro_activity_ref cancel = {id, 1, 3};
    duro_instance_meta meta = {.status = DURO_STATUS_COMPLETED,
                               .output = "done"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = &ev,
                         .history_delta_count = 1,
                         .cancelled_activities = &cancel,
                         .cancelled_activity_count = 1,
                         .meta = &meta};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, id, 0, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 4);
    duro_history_free(h);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, id, &list, &e), DURO_OK, &e);
    duro_instance_list_free(list);
    duro_instance_filter f = {.name = "orch", .limit = 5};
    CHECK_PRC(p->list_instances(p, &f, &list, &e), DURO_OK, &e);
    duro_instance_list_free(list);
    uint64_t exec = 0;
    CHECK_PRC(p->latest_execution_id(p, id, &exec, &e), DURO_OK, &e);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, id), 0);
    CHECK_PRC(p->delete_instance(p, id, 0, NULL, &e), DURO_OK, &e);
}

/* ---- the operators' queries on a large store ---------------------------- */

#define BIG 100000

/* Fills the store at `path` (open in the provider, schema current) with
 * BIG instances - ids "i000000" .., names "orch-0" .. "orch-9" by id, the
 * seven statuses in turn, three created per millisecond (ties), last
 * changes scattered - and, every fifth instance, a control request in
 * history after its OrchestrationStarted. */
static void fill_big_store(const char *path)
{
    sqlite3 *db = raw_open(path);
    CHECK_EQ(sqlite3_exec(
                 db,
                 "BEGIN;"
                 "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                 "FROM n WHERE i < 99999) "
                 "INSERT INTO instances(instance_id, name, status, "
                 "execution_id, created_ms, updated_ms) "
                 "SELECT printf('i%06d', i), 'orch-' || (i % 10), "
                 "CASE i % 7 WHEN 0 THEN 1 WHEN 1 THEN 2 WHEN 2 THEN 3 "
                 "WHEN 3 THEN 4 WHEN 4 THEN 5 WHEN 5 THEN 7 ELSE 8 END, 1, "
                 "1000000 + i / 3, 1000000 + (i * 7919) % 100000 FROM n;"
                 "INSERT INTO history(instance_id, execution_id, event_id, "
                 "kind, timestamp_ms) SELECT instance_id, 1, 1, 1, created_ms "
                 "FROM instances;"
                 "INSERT INTO history(instance_id, execution_id, event_id, "
                 "kind, timestamp_ms, reason, requested_by) "
                 "SELECT instance_id, 1, 2, "
                 "CASE (created_ms / 5) % 4 WHEN 0 THEN 5 WHEN 1 THEN 19 "
                 "WHEN 2 THEN 20 ELSE 21 END, updated_ms, 'why', "
                 "'ops:' || (updated_ms % 3) "
                 "FROM instances WHERE CAST(substr(instance_id, 2) AS "
                 "INTEGER) % 5 = 0;"
                 "COMMIT",
                 NULL, NULL, NULL),
             SQLITE_OK);
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM instances"), BIG);
    sqlite3_close(db);
}

/* The VM steps of one query_instances call (and its page, for the next
 * one: caller frees). */
static uint64_t query_steps(duro_provider *p, const duro_instance_query *q,
                            duro_instance_page **page)
{
    duro_error e;
    uint64_t before = duro__sqlite_vm_steps(p);
    CHECK_PRC(p->query_instances(p, q, page, &e), DURO_OK, &e);
    return duro__sqlite_vm_steps(p) - before;
}

/* Among BIG instances, the first page and the next of every ordered path
 * - nothing, a status, several statuses, a name, a name and a status, a
 * creation bound newest first - in each order, and of the control
 * requests, cost about what a page holds: fewer virtual-machine steps
 * than a thousand per row of the page, seven ranges merged included
 * (reading the store takes tens of millions; counting every instance,
 * which this checks for scale, does). */
TEST(query_pages_read_a_page_of_100000_instances)
{
    duro_provider *p = open_url(url_with("big.db", "?pool=1"));
    fill_big_store(test_path("big.db"));
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
    const uint64_t bound = 1000 * (limit + 1);
    duro_instance_query q;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        for (int order = 0; order <= DURO_ORDER_UPDATED_DESC; order++) {
            /* a creation bound is the range's own in that order only (in
             * the others it is checked row by row) */
            if (cases[k].before != 0 && order != DURO_ORDER_CREATED_DESC)
                continue;
            memset(&q, 0, sizeof(q));
            q.version = 1;
            q.order = order;
            q.limit = limit;
            q.status_mask = k == 2 ? live : cases[k].mask;
            q.name = cases[k].name;
            q.created_before_ms = cases[k].before;
            duro_instance_page *first = NULL, *next = NULL;
            uint64_t s1 = query_steps(p, &q, &first);
            CHECK_EQ(first->count, limit);
            CHECK(first->next_cursor != NULL);
            q.cursor = first->next_cursor;
            uint64_t s2 = query_steps(p, &q, &next);
            CHECK_EQ(next->count, limit);
            fprintf(stderr, "  %s, order %d: %llu and %llu steps\n",
                    cases[k].what, order, (unsigned long long)s1,
                    (unsigned long long)s2);
            CHECK_MSG(s1 < bound && s2 < bound,
                      "%s, order %d: pages took %llu and %llu steps (bound "
                      "%llu)",
                      cases[k].what, order, (unsigned long long)s1,
                      (unsigned long long)s2, (unsigned long long)bound);
            if (order != DURO_ORDER_ID && cases[k].before == 0) {
                /* the next page goes on where the first stopped */
                const duro_instance_info *a = &first->items[limit - 1],
                                         *b = &next->items[0];
                int64_t ka = order == DURO_ORDER_CREATED_DESC ? a->created_ms
                                                              : a->updated_ms;
                int64_t kb = order == DURO_ORDER_CREATED_DESC ? b->created_ms
                                                              : b->updated_ms;
                CHECK(ka > kb ||
                      (ka == kb && strcmp(a->instance_id, b->instance_id) > 0));
            }
            duro_instance_page_free(next);
            duro_instance_page_free(first);
        }
    }
    /* reading every instance, for scale: what a page must not cost */
    memset(&q, 0, sizeof(q));
    q.version = 1;
    q.limit = 1;
    q.count_total = 1;
    duro_instance_page *all = NULL;
    uint64_t counted = query_steps(p, &q, &all);
    CHECK_EQ(all->total, BIG);
    duro_instance_page_free(all);
    fprintf(stderr, "  counting all: %llu steps\n",
            (unsigned long long)counted);
    CHECK_INT(counted, >, 5 * bound);

    /* control requests: 20,000 of them among 120,000 events */
    duro_control_event_query eq;
    memset(&eq, 0, sizeof(eq));
    eq.version = 1;
    eq.limit = limit;
    for (int k = 0; k < 2; k++) {
        eq.kind_mask = k == 0 ? 0 : 1u << DURO_EVENT_ORCHESTRATION_TERMINATED;
        eq.cursor = NULL;
        duro_error e;
        duro_control_event_list *l1 = NULL, *l2 = NULL;
        uint64_t before = duro__sqlite_vm_steps(p);
        CHECK_PRC(p->list_control_events(p, &eq, &l1, &e), DURO_OK, &e);
        uint64_t s1 = duro__sqlite_vm_steps(p) - before;
        CHECK_EQ(l1->count, limit);
        eq.cursor = l1->next_cursor;
        before = duro__sqlite_vm_steps(p);
        CHECK_PRC(p->list_control_events(p, &eq, &l2, &e), DURO_OK, &e);
        uint64_t s2 = duro__sqlite_vm_steps(p) - before;
        CHECK_EQ(l2->count, limit);
        CHECK_INT(l1->items[limit - 1].timestamp_ms, >=,
                  l2->items[0].timestamp_ms);
        fprintf(stderr, "  control requests (%s): %llu and %llu steps\n",
                k == 0 ? "all" : "terminations", (unsigned long long)s1,
                (unsigned long long)s2);
        CHECK(s1 < bound && s2 < bound);
        duro_control_event_list_free(l2);
        duro_control_event_list_free(l1);
    }
    duro_provider_close(p);
}

/* The statements of every turn and every activity (the fetches, acks,
 * renewals and what they run) build no ephemeral table: SQLite codes a
 * constant IN list of more than two values, and a partial index's such
 * predicate, as one it fills again at every run (a page allocated and
 * zeroed each time). WQ_CANCEL's json_each ids are the one that needs one
 * (a fetch reads, then claims: no UPDATE ... RETURNING, whose rows SQLite
 * keeps in one). And the comparisons that stand for the
 * IN lists agree with the status sets they spell, for every status. */
TEST(turn_statements_build_no_ephemeral_tables)
{
    duro_provider *p = open_url(test_sqlite_url("ephemeral.db"));
    sqlite3 *db = raw_open(test_path("ephemeral.db"));
    static const char *const hot[] = {"INSTANCE_CREATE",
                                      "INSTANCE_CURRENT",
                                      "INSTANCE_NAME",
                                      "INSTANCE_SET_CURRENT",
                                      "INSTANCE_WRITE_META",
                                      "INSTANCE_FETCH_META",
                                      "INSTANCE_CANCEL_REQUEST",
                                      "INSTANCE_SET_PROBLEM",
                                      "EXEC_EVENT_COUNT",
                                      "EXEC_CREATE",
                                      "EXEC_WRITE_META",
                                      "HISTORY_INSERT",
                                      "HISTORY_READ",
                                      "HISTORY_CANCEL_REASON",
                                      "OQ_INSERT",
                                      "EVENT_ID_RECORD",
                                      "OQ_TAG",
                                      "OQ_FETCHED",
                                      "OQ_DELETE_TAGGED",
                                      "OQ_UNTAG",
                                      "OQ_DELETE_INSTANCE",
                                      "OQ_DELETE_EXECUTION",
                                      "OQ_MIN_VISIBLE",
                                      "READY_ENQUEUE",
                                      "READY_NEXT",
                                      "READY_LOCK",
                                      "READY_HOLDER_CURRENT",
                                      "READY_RENEW",
                                      "READY_SET",
                                      "READY_DELETE",
                                      "READY_MIN",
                                      "WQ_INSERT",
                                      "WQ_NEXT",
                                      "WQ_CLAIM",
                                      "WQ_ACK",
                                      "WQ_HELD",
                                      "WQ_RENEW",
                                      "WQ_ABANDON",
                                      "WQ_EXISTS",
                                      "WQ_MIN"};
    for (size_t k = 0; k < sizeof(hot) / sizeof(hot[0]); k++) {
        size_t i = 0;
        while (i < duro__sql_statement_count(&duro__sqlite_dialect) &&
               strcmp(duro__sql_statement_name(&duro__sqlite_dialect, i),
                      hot[k]) != 0)
            i++;
        CHECK_MSG(i < duro__sql_statement_count(&duro__sqlite_dialect),
                  "no statement %s", hot[k]);
        char sql[8192];
        snprintf(sql, sizeof(sql), "EXPLAIN %s",
                 duro__sql_statement_sql(&duro__sqlite_dialect, i));
        sqlite3_stmt *s = NULL;
        CHECK_MSG(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK,
                  "%s: %s", hot[k], sqlite3_errmsg(db));
        int ephemeral = 0;
        while (sqlite3_step(s) == SQLITE_ROW)
            ephemeral += strcmp((const char *)sqlite3_column_text(s, 1),
                                "OpenEphemeral") == 0;
        sqlite3_finalize(s);
        CHECK_MSG(ephemeral == 0, "%s opens %d ephemeral table(s)", hot[k],
                  ephemeral);
    }
    /* A history insert evaluates history_control's predicate. */
    CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
                         "'history_control' AND sql LIKE '%kind = 5 OR%'"),
             1);
    static const struct {
        const char *sql;
        unsigned set;
    } sets[] = {
        {"SELECT " DURO__SQLITE_LIVE_STATUS " FROM (SELECT ?1 AS status)",
         DURO__LIVE_STATUSES},
        {"SELECT " DURO__SQLITE_ENDED_P2, DURO__ENDED_STATUSES},
    };
    for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
        for (int status = 0; status < 16; status++) {
            sqlite3_stmt *s = NULL;
            CHECK_EQ(sqlite3_prepare_v2(db, sets[k].sql, -1, &s, NULL),
                     SQLITE_OK);
            for (int j = 1; j <= sqlite3_bind_parameter_count(s); j++)
                sqlite3_bind_int(s, j, status);
            CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
            CHECK_MSG(sqlite3_column_int(s, 0) ==
                          (int)((sets[k].set >> status) & 1),
                      "%s: status %d", sets[k].sql, status);
            sqlite3_finalize(s);
        }
    }
    sqlite3_close(db);
    duro_provider_close(p);
}

TEST(statements_are_reused)
{
    duro_provider *p = open_url(test_sqlite_url("reuse.db"));
    for (int i = 0; i < 5; i++)
        workload_round(p, i);
    uint64_t prepared = duro__sqlite_statements_prepared(p);
    CHECK(prepared > 10);
    /* 100 rounds of 15 operations: 1500 operations. */
    for (int i = 5; i < 105; i++)
        workload_round(p, i);
    CHECK_EQ(duro__sqlite_statements_prepared(p), prepared);
    duro_provider_close(p);
}

/* The writer's checkpoints run after its commits, off the write lock: with
 * enough commits the WAL is copied into the database file while the
 * provider is open, and the WAL stays bounded (one writer here; a runtime's
 * many: tests/sqlite/test_sqlite_wal.c). */
TEST(wal_is_checkpointed_while_open)
{
    const char *url = test_sqlite_url("checkpoint.db");
    duro_provider *p = open_url(url);
    duro_error e;
    struct stat before, wal;
    CHECK_EQ(stat(test_path("checkpoint.db"), &before), 0);
    char id[32];
    int n = 0;
    int64_t largest = 0;
    while (duro__sqlite_checkpoints(p) < 2 && n < 200000) {
        snprintf(id, sizeof(id), "cp-%d", n++);
        duro_work_item w = {.kind = DURO_WORK_START,
                            .instance_id = id,
                            .name = "orch",
                            .payload = "some input to make rows bigger"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
        if (stat(test_path("checkpoint.db-wal"), &wal) == 0)
            largest = DURO__MAX(largest, (int64_t)wal.st_size);
    }
    CHECK_INT(duro__sqlite_checkpoints(p), >=, 2);
    struct stat after;
    CHECK_EQ(stat(test_path("checkpoint.db"), &after), 0);
    CHECK_INT(after.st_size, >, before.st_size * 10);
    /* bounded: twice the checkpoint interval (4000 frames of 2 KiB pages by
     * default) and the one transaction that crossed it (a few frames) */
    CHECK_INT(largest, <=, 32 + (2 * 4000 + 16) * (2048 + 24));
    uint64_t queued = 0;
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, NULL, &queued, &e),
              DURO_OK, &e);
    CHECK_EQ(queued, (uint64_t)n);
    duro_provider_close(p);
}

/* A RESTART checkpoint holds every new writer back while it waits for
 * readers of older snapshots; a reader it cannot outwait - here a read
 * transaction of another connection held across the whole run, as a bulk
 * sweep of another process holds its snapshot - must not make other
 * writers wait out their busy timeout. Provider `a` writes until it has
 * run 30 checkpoints (the interval lowered to 50 frames; past twice that,
 * a writer of `a` tries a RESTART, at most once a second); provider `b`,
 * as another process, writes meanwhile with a busy timeout (1 s) far below
 * a's (5 s, which a checkpoint waited out before) and must never get
 * DURO_BUSY. */
typedef struct restart_writer {
    duro_provider *p;
    _Atomic int stop;
    _Atomic int ok;
    _Atomic int busy;
    char why[DURO_ERROR_MESSAGE_MAX];
} restart_writer;

static void *restart_writer_main(void *arg)
{
    restart_writer *w = arg;
    for (int i = 0; !atomic_load(&w->stop); i++) {
        char id[32];
        snprintf(id, sizeof(id), "b-%d", i);
        duro_work_item it = {
            .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
        duro_error e;
        int rc = w->p->enqueue_for_orchestrator(w->p, &it, 0, &e);
        if (rc == DURO_OK) {
            atomic_fetch_add(&w->ok, 1);
        } else {
            if (atomic_fetch_add(&w->busy, 1) == 0)
                snprintf(w->why, sizeof(w->why), "%s", e.message);
        }
        /* a pause between writes, as a process that does other work: in a
         * loop without one, b would take SQLite's write lock back at once
         * after every commit and starve a (its busy handler polls) */
        usleep(1000);
    }
    return NULL;
}

TEST(a_checkpoint_never_holds_writers_for_a_reader_it_cannot_outwait)
{
    duro_provider *a =
        open_url(url_with("restart.db", "?busy_timeout_ms=5000"));
    duro__sqlite_set_checkpoint_frames(a, 50);
    duro_provider *b =
        open_url(url_with("restart.db", "?busy_timeout_ms=1000"));
    start(a, "first", "orch");
    sqlite3 *reader = raw_open(test_path("restart.db"));
    CHECK_EQ(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ(raw_int(reader, "SELECT count(*) FROM instances"), 1);

    restart_writer w;
    memset(&w, 0, sizeof(w));
    w.p = b;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, restart_writer_main, &w) == 0);
    /* The reader keeps the first frames from being copied, so once 50
     * frames are past them every commit of a tries a checkpoint (a commit
     * is ~10 frames): 30 of them take the WAL well past the cap of 100
     * frames, where a's writer tries a RESTART. */
    duro_error e;
    int n = 0;
    while (duro__sqlite_checkpoints(a) < 30 && n < 100000) {
        char id[32];
        snprintf(id, sizeof(id), "a-%d", n++);
        duro_work_item it = {.kind = DURO_WORK_START,
                             .instance_id = id,
                             .name = "orch",
                             .payload = "some input to make rows bigger"};
        CHECK_PRC(a->enqueue_for_orchestrator(a, &it, 0, &e), DURO_OK, &e);
    }
    /* b keeps writing until it has written after the last checkpoint */
    int ok_then = atomic_load(&w.ok);
    WAIT_UNTIL(atomic_load(&w.ok) > ok_then + 10 || atomic_load(&w.busy) > 0,
               60000);
    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    CHECK_INT(duro__sqlite_checkpoints(a), >=, 30);
    struct stat wal; /* a RESTART was tried: past 100 frames of 2 KiB */
    CHECK_EQ(stat(test_path("restart.db-wal"), &wal), 0);
    CHECK_INT(wal.st_size, >, 200 * (2048 + 24));
    CHECK_MSG(atomic_load(&w.busy) == 0,
              "another writer failed %d times beside the checkpoints: %s",
              atomic_load(&w.busy), w.why);
    CHECK_EQ(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(reader);
    CHECK_EQ(count(a, DURO_QUEUE_ORCHESTRATOR, NULL),
             (uint64_t)(1 + n + atomic_load(&w.ok)));
    duro_provider_close(b);
    duro_provider_close(a);
}

/* A commit is in the WAL file, visible to an independent connection on
 * SQLite's default VFS, the moment the provider call returns, in normal and
 * full modes, and a transaction of 1.4 MB too. */
static int64_t raw_count(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW)
            n = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return n;
}

static void check_commits_visible(const char *name, const char *query)
{
    duro_provider *p = open_url(url_with(name, query));
    const char *path = test_path(name);
    duro_error e;
    char id[32];
    for (int i = 0; i < 200; i++) {
        snprintf(id, sizeof(id), "v-%d", i);
        duro_work_item w = {
            .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
        CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
        CHECK_EQ(raw_count(path, "SELECT count(*) FROM instances"), i + 1);
    }
    /* one transaction of ~1.4 MB of history */
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    static duro_event ev[700];
    static char payload[2000];
    memset(payload, 'p', sizeof(payload) - 1);
    for (int i = 0; i < 700; i++) {
        memset(&ev[i], 0, sizeof(ev[i]));
        ev[i].event_id = (uint64_t)i + 1;
        ev[i].kind =
            i == 0 ? DURO_EVENT_ORCHESTRATION_STARTED : DURO_EVENT_EVENT_RAISED;
        ev[i].name = "big";
        ev[i].payload = payload;
    }
    duro_instance_meta m = {.status = DURO_STATUS_RUNNING, .name = "orch"};
    duro_orch_ack a = {.execution_id = 1,
                       .history_delta = ev,
                       .history_delta_count = 700,
                       .meta = &m};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &a, &e), DURO_OK,
              &e);
    CHECK_EQ(raw_count(path, "SELECT count(*) FROM history"), 700);
    CHECK_EQ(raw_count(path, "SELECT sum(length(payload)) FROM history"),
             700 * 1999);
    duro_orch_item_free(item);
    duro_provider_close(p);
}

TEST(commits_are_visible_to_other_connections_at_once)
{
    check_commits_visible("visible-normal.db", "");
    check_commits_visible("visible-full.db", "?synchronous=full");
}

TEST(busy_from_another_connection_is_retryable)
{
    duro_provider *p = open_url(url_with("busy.db", "?busy_timeout_ms=50"));
    start(p, "before", "orch");
    sqlite3 *db = raw_open(test_path("busy.db"));
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    duro_error e;
    duro_work_item it = {
        .kind = DURO_WORK_START, .instance_id = "during", .name = "orch"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_BUSY, &e);
    CHECK_EQ(e.retryable, 1);
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 1000, &w, &e), DURO_BUSY, &e);
    CHECK_EQ(e.retryable, 1);
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 1000, NULL, &item, &e), DURO_BUSY,
              &e);
    CHECK_EQ(e.retryable, 1);
    /* WAL: reads go on beside the other writer. */
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, NULL), 1);
    CHECK_EQ(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, NULL), 2);
    sqlite3_close(db);
    duro_provider_close(p);
}

/* ---- caps and input rules -------------------------------------------------
 */

TEST(payload_cap_and_input_rules)
{
    duro_provider *p = open_url("sqlite::memory:?max_payload=16");
    duro_error e;
    char big_name[1100];
    memset(big_name, 'n', sizeof(big_name) - 1);
    big_name[sizeof(big_name) - 1] = '\0';
    duro_work_item it = {.kind = DURO_WORK_START,
                         .instance_id = "cap",
                         .name = "orch",
                         .payload = "12345678901234567"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_TOO_LARGE, &e);
    CHECK_EQ(e.retryable, 0);
    it.payload = "1234567890123456";
    it.error = "12345678901234567";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_TOO_LARGE, &e);
    it.error = NULL;
    it.name = big_name;
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_TOO_LARGE, &e);
    it.name = "";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_INVALID, &e);
    it.name = "orch";
    it.instance_id = "";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_INVALID, &e);
    it.instance_id = NULL;
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_INVALID, &e);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, NULL), 0);
    it.instance_id = "cap";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);

    /* An oversized custom status fails the ack and leaves the lock held. */
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                               .custom_status = "12345678901234567",
                               .custom_status_set = 1};
    duro_orch_ack ack = {.execution_id = 1, .meta = &meta};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
              DURO_TOO_LARGE, &e);
    CHECK_PRC(p->ack_orchestration_item(p, "", &ack, &e), DURO_INVALID, &e);
    CHECK_PRC(p->ack_orchestration_item(p, NULL, &ack, &e), DURO_INVALID, &e);
    meta.custom_status = "fits";
    CHECK_PRC(p->ack_orchestration_item(p, "made-up", &ack, &e), DURO_LOCK_LOST,
              &e);
    CHECK_PRC(p->ack_orchestration_item(
                  p, "o1.0123456789abcdef0123456789abcdef", &ack, &e),
              DURO_LOCK_LOST, &e);
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, "cap", &list, &e), DURO_OK, &e);
    CHECK_STR(list->items[0].custom_status, "fits");
    duro_instance_list_free(list);

    CHECK_PRC(p->renew_work_item_lock(p, "w5.nothex", 10, &e), DURO_LOCK_LOST,
              &e);
    CHECK_PRC(p->ack_work_item(p, "", NULL, &e), DURO_INVALID, &e);
    duro_provider_close(p);
}

TEST(history_cap)
{
    duro_provider *p = open_url("sqlite::memory:?max_history=4");
    duro_error e;
    start(p, "h", "orch");
    first_turn(p, "h", 1); /* 2 events */
    duro_work_item ev_item = {
        .kind = DURO_WORK_EXTERNAL_EVENT, .instance_id = "h", .name = "go"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &ev_item, 0, &e), DURO_OK, &e);
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_EQ(item->history_total, 2);
    duro_event three[3] = {event(3, DURO_EVENT_EVENT_RAISED, "go"),
                           event(4, DURO_EVENT_TIMER_CREATED, NULL),
                           event(5, DURO_EVENT_TIMER_CREATED, NULL)};
    duro_work_item more = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                           .instance_id = "h",
                           .source_id = 9,
                           .name = "x"};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = three,
                         .history_delta_count = 3,
                         .worker_items = &more,
                         .worker_item_count = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
              DURO_HISTORY_LIMIT, &e);
    CHECK_EQ(e.retryable, 0);
    CHECK(strstr(e.message, "max_history") != NULL);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, "h"), 1); /* only the first turn's */
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "h"), 1);
    /* A duplicate event id fails the whole ack. */
    duro_event dup[2] = {event(3, DURO_EVENT_EVENT_RAISED, "go"),
                         event(3, DURO_EVENT_EVENT_RAISED, "go")};
    ack.history_delta = dup;
    ack.history_delta_count = 2;
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
              DURO_ALREADY_EXISTS, &e);
    ack.history_delta_count = 1;
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "h", 1, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 3);
    duro_history_free(h);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, "h"), 2);
    duro_provider_close(p);
}

/* ---- fault injection ------------------------------------------------------
 */

/* A digest of everything stored, to prove a failed operation changed
 * nothing. */
static void snapshot(duro_provider *p, char *out, size_t cap)
{
    duro_error e;
    duro_instance_list *list = NULL;
    CHECK_PRC(p->list_instances(p, NULL, &list, &e), DURO_OK, &e);
    size_t used = (size_t)snprintf(
        out, cap, "oq=%llu wq=%llu n=%zu",
        (unsigned long long)count(p, DURO_QUEUE_ORCHESTRATOR, NULL),
        (unsigned long long)count(p, DURO_QUEUE_WORKER, NULL), list->count);
    for (size_t i = 0; i < list->count && used < cap; i++) {
        const duro_instance_info *in = &list->items[i];
        used += (size_t)snprintf(
            out + used, cap - used, " [%s %d e%llu h%llu %s %s]",
            in->instance_id, in->status, (unsigned long long)in->execution_id,
            (unsigned long long)in->history_count,
            in->output ? in->output : "-",
            in->custom_status ? in->custom_status : "-");
    }
    duro_instance_list_free(list);
}

TEST(fault_at_every_step_rolls_back)
{
    duro_provider *p = open_url(test_sqlite_url("faults.db"));
    duro_error e;
    start(p, "f", "orch");
    first_turn(p, "f", 3);
    duro_work_item ev_item = {
        .kind = DURO_WORK_EXTERNAL_EVENT, .instance_id = "f", .name = "go"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &ev_item, 0, &e), DURO_OK, &e);
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);

    duro_event delta[3] = {
        event(5, DURO_EVENT_EVENT_RAISED, "go"),
        event(6, DURO_EVENT_ACTIVITY_SCHEDULED, "b"),
        event(7, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, NULL)};
    duro_work_item work = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                           .instance_id = "f",
                           .execution_id = 1,
                           .source_id = 6,
                           .name = "b"};
    duro_outbound out[2] = {{.item = {.kind = DURO_WORK_START,
                                      .instance_id = "f-child",
                                      .name = "child",
                                      .parent_instance = "f",
                                      .parent_execution = 1,
                                      .parent_event_id = 6}},
                            {.item = {.kind = DURO_WORK_TIMER_FIRED,
                                      .instance_id = "f",
                                      .execution_id = 1,
                                      .source_id = 8},
                             .delay_ms = 60000}};
    duro_activity_ref cancel[2] = {{"f", 1, 2}, {"f", 1, 3}};
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                               .custom_status = "turn2",
                               .custom_status_set = 1};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = delta,
                         .history_delta_count = 3,
                         .worker_items = &work,
                         .worker_item_count = 1,
                         .orchestrator_items = out,
                         .orchestrator_item_count = 2,
                         .meta = &meta,
                         .cancelled_activities = cancel,
                         .cancelled_activity_count = 2};
    char before[2048], after[2048];
    snapshot(p, before, sizeof(before));
    int rc = DURO_OK;
    uint64_t k;
    for (k = 1; k < 200; k++) {
        int retryable = (int)(k % 2);
        duro__sqlite_inject_fault(p, k, retryable);
        rc = p->ack_orchestration_item(p, item->lock_token, &ack, &e);
        duro__sqlite_inject_fault(p, 0, 0);
        if (rc == DURO_OK)
            break;
        CHECK_MSG(rc == (retryable ? DURO_BUSY : DURO_STORAGE),
                  "step %llu: %s (%s)", (unsigned long long)k, duro_errname(rc),
                  e.message);
        CHECK_EQ(e.retryable, retryable);
        snapshot(p, after, sizeof(after));
        CHECK_MSG(strcmp(before, after) == 0, "step %llu changed:\n%s\n%s",
                  (unsigned long long)k, before, after);
    }
    CHECK_PRC(rc, DURO_OK, &e);
    CHECK(k > 15); /* the ack runs many statements */
    duro_orch_item_free(item);
    snapshot(p, after, sizeof(after));
    CHECK(strcmp(before, after) != 0);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, "f"), 2); /* 4 of the first turn */
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "f-child"), 1);

    /* The same for a work-item ack with a completion. */
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 30000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                           .instance_id = "f",
                           .execution_id = 1,
                           .source_id = w->item.source_id,
                           .payload = "r"};
    snapshot(p, before, sizeof(before));
    for (k = 1; k < 50; k++) {
        duro__sqlite_inject_fault(p, k, 1);
        rc = p->ack_work_item(p, w->lock_token, &done, &e);
        duro__sqlite_inject_fault(p, 0, 0);
        if (rc == DURO_OK)
            break;
        CHECK_PRC(rc, DURO_BUSY, &e);
        snapshot(p, after, sizeof(after));
        CHECK_STR(before, after);
    }
    CHECK_PRC(rc, DURO_OK, &e);
    duro_worker_item_free(w);
    duro_provider_close(p);
}

/* ---- wake-up --------------------------------------------------------------
 */

typedef struct waiter {
    duro_provider *p;
    duro_queue queue;
    int64_t max_wait_ms;
    int64_t took_ms;
    _Atomic int done;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    duro_error e;
    int64_t t0 = test_now_ms();
    w->p->wait_for_work(w->p, w->queue, w->max_wait_ms, &e);
    w->took_ms = test_now_ms() - t0;
    atomic_store(&w->done, 1);
    return NULL;
}

TEST(wait_for_work_wakes)
{
    duro_provider *p = open_url(test_sqlite_url("wake.db"));
    duro_error e;

    /* An enqueue by this process wakes a waiter on that queue. */
    waiter w = {.p = p, .queue = DURO_QUEUE_ORCHESTRATOR, .max_wait_ms = 60000};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    test_sleep_ms(20);
    start(p, "w1", "orch");
    WAIT_UNTIL(atomic_load(&w.done), 10000);
    pthread_join(t, NULL);

    /* Work committed between an empty fetch and the wait is not missed. */
    first_turn(p, "w1", 0);
    duro_worker_item *wi = NULL;
    CHECK_PRC(p->fetch_work_item(p, 1000, &wi, &e), DURO_OK, &e);
    CHECK(wi == NULL);
    duro_work_item act = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                          .instance_id = "w1",
                          .source_id = 5,
                          .name = "a"};
    duro_work_item go = {
        .kind = DURO_WORK_EXTERNAL_EVENT, .instance_id = "w1", .name = "go"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &go, 0, &e), DURO_OK, &e);
    duro_orch_item *item = fetch_orch(p);
    duro_orch_ack ack = {
        .execution_id = 1, .worker_items = &act, .worker_item_count = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    int64_t t0 = test_now_ms();
    CHECK_PRC(p->wait_for_work(p, DURO_QUEUE_WORKER, 60000, &e), DURO_OK, &e);
    CHECK(test_now_ms() - t0 < 10000);

    /* A delayed item ends the wait when it becomes due. */
    duro_work_item timer = {.kind = DURO_WORK_TIMER_FIRED,
                            .instance_id = "w1",
                            .execution_id = 1,
                            .source_id = 7};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &timer, 150, &e), DURO_OK, &e);
    CHECK_PRC(p->fetch_orchestration_item(p, 1000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item == NULL);
    t0 = test_now_ms();
    while (item == NULL && test_now_ms() - t0 < 10000) {
        CHECK_PRC(p->wait_for_work(p, DURO_QUEUE_ORCHESTRATOR, 60000, &e),
                  DURO_OK, &e);
        CHECK_PRC(p->fetch_orchestration_item(p, 1000, NULL, &item, &e),
                  DURO_OK, &e);
    }
    CHECK(item != NULL);
    CHECK(test_now_ms() - t0 < 10000);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_TIMER_FIRED);
    duro_orch_item_free(item);

    /* wake(p, 1) is sticky until wake(p, 0). */
    p->wake(p, 1);
    for (int i = 0; i < 3; i++) {
        t0 = test_now_ms();
        CHECK_PRC(p->wait_for_work(p, DURO_QUEUE_WORKER, 60000, &e), DURO_OK,
                  &e);
        CHECK(test_now_ms() - t0 < 10000);
    }
    waiter blocked = {.p = p, .queue = DURO_QUEUE_WORKER, .max_wait_ms = 60000};
    p->wake(p, 0);
    pthread_create(&t, NULL, wait_thread, &blocked);
    test_sleep_ms(20);
    p->wake(p, 1); /* ends a wait already in progress */
    WAIT_UNTIL(atomic_load(&blocked.done), 10000);
    pthread_join(t, NULL);
    p->wake(p, 0);
    duro_provider_close(p);
}

/* ---- smoke test of every method -------------------------------------------
 */

static uint64_t cached_two(void *user, const char *instance_id,
                           uint64_t execution_id)
{
    (void)instance_id;
    (void)execution_id;
    *(int *)user += 1;
    return 2;
}

TEST(every_method_smoke)
{
    duro_provider *p = open_url(url_with("smoke.db", "?pool=2"));
    duro_error e;
    CHECK_EQ(p->version, DURO_PROVIDER_VERSION);
    CHECK_STR(p->name, "sqlite");

    /* enqueue: START creates a Pending instance; duplicates refused unless
     * idempotent. */
    duro_work_item it = {.kind = DURO_WORK_START,
                         .instance_id = "s",
                         .name = "orch",
                         .version = "1.0",
                         .payload = "in"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_ALREADY_EXISTS,
              &e);
    it.flags = DURO_START_IDEMPOTENT;
    CHECK_PRC(p->enqueue_for_orchestrator(p, &it, 0, &e), DURO_OK, &e);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "s"), 1);
    uint64_t exec = 99;
    CHECK_PRC(p->latest_execution_id(p, "s", &exec, &e), DURO_OK, &e);
    CHECK_EQ(exec, 0);
    CHECK_PRC(p->latest_execution_id(p, "nope", &exec, &e), DURO_NOT_FOUND, &e);
    duro_instance_list *list = NULL;
    CHECK_PRC(p->get_instance(p, "s", &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 1);
    CHECK_EQ(list->items[0].status, DURO_STATUS_PENDING);
    CHECK_STR(list->items[0].version, "1.0");
    duro_instance_list_free(list);
    CHECK_PRC(p->get_instance(p, "nope", &list, &e), DURO_NOT_FOUND, &e);

    /* fetch + abandon + fetch again: attempt counts fetches. */
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_EQ(item->attempt, 1);
    CHECK_EQ(item->status, DURO_STATUS_PENDING);
    CHECK_EQ(item->message_count, 1);
    CHECK_STR(item->messages[0].payload, "in");
    CHECK_STR(item->messages[0].version, "1.0");
    CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 0, &e),
              DURO_OK, &e);
    CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 0, &e),
              DURO_LOCK_LOST, &e);
    duro_orch_item_free(item);
    item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_EQ(item->attempt, 2);
    CHECK_PRC(p->renew_orchestration_item_lock(p, item->lock_token, 30000, &e),
              DURO_OK, &e);
    /* Locked: nothing else to fetch; a message arriving now waits. */
    duro_work_item raise = {.kind = DURO_WORK_EXTERNAL_EVENT,
                            .instance_id = "s",
                            .name = "sig",
                            .payload = "p"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &raise, 0, &e), DURO_OK, &e);
    duro_orch_item *none = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 1000, NULL, &none, &e), DURO_OK,
              &e);
    CHECK(none == NULL);

    /* ack: history, work, child start, meta. */
    duro_event delta[3] = {
        event(1, DURO_EVENT_ORCHESTRATION_STARTED, "orch"),
        event(2, DURO_EVENT_ACTIVITY_SCHEDULED, "act"),
        event(3, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, "child")};
    delta[1].payload = "a-in";
    delta[1].attempt = 1;
    delta[2].ref_instance = "s-child";
    duro_work_item work = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                           .instance_id = "s",
                           .source_id = 2,
                           .name = "act",
                           .payload = "a-in",
                           .attempt = 1};
    duro_outbound child = {.item = {.kind = DURO_WORK_START,
                                    .instance_id = "s-child",
                                    .name = "child",
                                    .parent_instance = "s",
                                    .parent_execution = 1,
                                    .parent_event_id = 3}};
    duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                               .name = "orch",
                               .custom_status = "working",
                               .custom_status_set = 1};
    duro_orch_ack ack = {.execution_id = 1,
                         .history_delta = delta,
                         .history_delta_count = 3,
                         .worker_items = &work,
                         .worker_item_count = 1,
                         .orchestrator_items = &child,
                         .orchestrator_item_count = 1,
                         .meta = &meta};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e),
              DURO_LOCK_LOST, &e);
    CHECK_EQ(e.retryable, 0);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "s"), 1); /* the raise */
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, NULL), 1);

    /* A second START of the same child from the parent turns into a
     * CHILD_FAILED to the parent. */
    item = fetch_orch(p);
    CHECK(item != NULL);
    if (strcmp(item->instance_id, "s-child") == 0) {
        CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 60000, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        item = fetch_orch(p);
        CHECK(item != NULL);
    }
    CHECK_STR(item->instance_id, "s");
    CHECK_EQ(item->history_total, 3);
    CHECK_EQ(item->history_count, 3);
    CHECK_STR(item->custom_status, "working");
    CHECK_EQ(item->messages[0].kind, DURO_WORK_EXTERNAL_EVENT);
    CHECK_STR(item->history[1].payload, "a-in");
    CHECK_STR(item->history[2].ref_instance, "s-child");
    duro_event raised = event(4, DURO_EVENT_EVENT_RAISED, "sig");
    child.item.parent_event_id = 5;
    duro_orch_ack ack2 = {.execution_id = 1,
                          .history_delta = &raised,
                          .history_delta_count = 1,
                          .orchestrator_items = &child,
                          .orchestrator_item_count = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack2, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);

    /* With a history cache holding 2 events, only the rest comes back. */
    int calls = 0;
    duro_history_cache cache = {cached_two, &calls};
    item = NULL;
    for (int i = 0; i < 2; i++) {
        CHECK_PRC(p->fetch_orchestration_item(p, 30000, &cache, &item, &e),
                  DURO_OK, &e);
        CHECK(item != NULL);
        if (strcmp(item->instance_id, "s") == 0)
            break;
        CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 60000, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        item = NULL;
    }
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "s");
    CHECK(calls >= 1);
    CHECK_EQ(item->history_offset, 2);
    CHECK_EQ(item->history_total, 4);
    CHECK_EQ(item->history_count, 2);
    CHECK_EQ(item->history[0].event_id, 3);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_CHILD_FAILED);
    CHECK_EQ(item->messages[0].source_id, 5);
    CHECK_EQ(item->messages[0].category, DURO_CATEGORY_CONFIGURATION);
    CHECK(strstr(item->messages[0].error, "s-child") != NULL);
    duro_orch_ack consume = {.execution_id = 1};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &consume, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);

    /* worker queue: fetch, renew, abandon, fetch, ack with completion. */
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, 30000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    CHECK_EQ(w->attempt, 1);
    CHECK_EQ(w->item.kind, DURO_WORK_ACTIVITY_EXECUTE);
    CHECK_EQ(w->item.execution_id, 1);
    CHECK_EQ(w->item.source_id, 2);
    CHECK_EQ(w->item.attempt, 1);
    CHECK_STR(w->item.payload, "a-in");
    duro_worker_item *w2 = NULL;
    CHECK_PRC(p->fetch_work_item(p, 30000, &w2, &e), DURO_OK, &e);
    CHECK(w2 == NULL);
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 30000, &e), DURO_OK,
              &e);
    CHECK_PRC(p->abandon_work_item(p, w->lock_token, 0, &e), DURO_OK, &e);
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, 30000, &e),
              DURO_LOCK_LOST, &e);
    CHECK_EQ(e.retryable, 0);
    duro_worker_item_free(w);
    CHECK_PRC(p->fetch_work_item(p, 30000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    CHECK_EQ(w->attempt, 2);
    duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                           .instance_id = "s",
                           .execution_id = 1,
                           .source_id = 2,
                           .payload = "a-out"};
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_LOCK_LOST,
              &e);
    CHECK_EQ(e.retryable, 0);
    duro_worker_item_free(w);

    /* The completion; the turn completes the instance. */
    item = fetch_orch(p);
    if (item != NULL && strcmp(item->instance_id, "s") != 0) {
        CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 60000, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        item = fetch_orch(p);
    }
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "s");
    CHECK_EQ(item->messages[0].kind, DURO_WORK_ACTIVITY_COMPLETED);
    CHECK_STR(item->messages[0].payload, "a-out");
    duro_event fin[2] = {event(5, DURO_EVENT_ACTIVITY_COMPLETED, NULL),
                         event(6, DURO_EVENT_ORCHESTRATION_COMPLETED, NULL)};
    fin[0].source_event_id = 2;
    duro_instance_meta meta_done = {.status = DURO_STATUS_COMPLETED,
                                    .output = "result"};
    duro_orch_ack ack3 = {.execution_id = 1,
                          .history_delta = fin,
                          .history_delta_count = 2,
                          .meta = &meta_done};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack3, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);

    /* read_history, get_instance, list_instances. */
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, "s", 0, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 6);
    CHECK_EQ(h->execution_id, 1);
    CHECK_EQ(h->events[4].source_event_id, 2);
    CHECK_EQ(h->events[5].kind, DURO_EVENT_ORCHESTRATION_COMPLETED);
    duro_history_free(h);
    CHECK_PRC(p->read_history(p, "s", 2, &h, &e), DURO_NOT_FOUND, &e);
    CHECK_PRC(p->read_history(p, "nope", 0, &h, &e), DURO_NOT_FOUND, &e);
    CHECK_PRC(p->get_instance(p, "s", &list, &e), DURO_OK, &e);
    CHECK_EQ(list->items[0].status, DURO_STATUS_COMPLETED);
    CHECK_STR(list->items[0].output, "result");
    CHECK_STR(list->items[0].custom_status, "working");
    CHECK_EQ(list->items[0].history_count, 6);
    duro_instance_list_free(list);
    CHECK_PRC(p->get_instance(p, "s-child", &list, &e), DURO_OK, &e);
    CHECK_STR(list->items[0].parent_instance, "s");
    duro_instance_list_free(list);

    duro_instance_filter f = {0};
    CHECK_PRC(p->list_instances(p, &f, &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 2);
    CHECK_STR(list->items[0].instance_id, "s");
    CHECK_STR(list->items[1].instance_id, "s-child");
    duro_instance_list_free(list);
    f.status_mask = 1u << DURO_STATUS_COMPLETED;
    CHECK_PRC(p->list_instances(p, &f, &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 1);
    duro_instance_list_free(list);
    f.status_mask |= 1u << DURO_STATUS_PENDING;
    f.limit = 1;
    f.after_instance = "s";
    CHECK_PRC(p->list_instances(p, &f, &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 1);
    CHECK_STR(list->items[0].instance_id, "s-child");
    duro_instance_list_free(list);
    duro_instance_filter by_name = {
        .name = "child", .created_after_ms = 1, .created_before_ms = INT64_MAX};
    CHECK_PRC(p->list_instances(p, &by_name, &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 1);
    duro_instance_list_free(list);
    by_name.created_after_ms = INT64_MAX - 1;
    CHECK_PRC(p->list_instances(p, &by_name, &list, &e), DURO_OK, &e);
    CHECK_EQ(list->count, 0);
    duro_instance_list_free(list);

    /* delete: the Pending child makes it refuse without force. */
    size_t deleted = 99;
    CHECK_PRC(p->delete_instance(p, "s", 0, &deleted, &e), DURO_INVALID_STATE,
              &e);
    CHECK_EQ(deleted, 0);
    CHECK_PRC(p->get_instance(p, "s", &list, &e), DURO_OK, &e);
    duro_instance_list_free(list);
    CHECK_PRC(p->delete_instance(p, "s", 1, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 2);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, NULL), 0);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, NULL), 0);
    CHECK_PRC(p->delete_instance(p, "s", 1, &deleted, &e), DURO_NOT_FOUND, &e);

    /* prune: three executions by continue-as-new, keep the last two. */
    start(p, "c", "chain");
    for (uint64_t x = 1; x <= 3; x++) {
        item = fetch_orch(p);
        CHECK(item != NULL);
        duro_event evs[2] = {
            event(1, DURO_EVENT_ORCHESTRATION_STARTED, "chain"),
            event(2, DURO_EVENT_CONTINUED_AS_NEW, NULL)};
        duro_outbound next = {.item = {.kind = DURO_WORK_CONTINUE_AS_NEW,
                                       .instance_id = "c",
                                       .execution_id = x + 1,
                                       .name = "chain"}};
        duro_instance_meta m = {.status = DURO_STATUS_CONTINUED_AS_NEW};
        duro_orch_ack a = {.execution_id = x,
                           .history_delta = evs,
                           .history_delta_count = 2,
                           .orchestrator_items = &next,
                           .orchestrator_item_count = 1,
                           .meta = &m};
        CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &a, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        CHECK_PRC(p->get_instance(p, "c", &list, &e), DURO_OK, &e);
        CHECK_EQ(list->items[0].status, DURO_STATUS_RUNNING);
        CHECK_EQ(list->items[0].execution_id, x);
        duro_instance_list_free(list);
    }
    CHECK_PRC(p->latest_execution_id(p, "c", &exec, &e), DURO_OK, &e);
    CHECK_EQ(exec, 3);
    size_t pruned = 0;
    CHECK_PRC(p->prune_executions(p, "c", 2, &pruned, &e), DURO_OK, &e);
    CHECK_EQ(pruned, 1);
    CHECK_PRC(p->read_history(p, "c", 1, &h, &e), DURO_NOT_FOUND, &e);
    CHECK_PRC(p->read_history(p, "c", 2, &h, &e), DURO_OK, &e);
    CHECK_EQ(h->count, 2);
    duro_history_free(h);
    CHECK_PRC(p->prune_executions(p, "c", 0, &pruned, &e), DURO_OK, &e);
    CHECK_EQ(pruned, 1);

    /* An ack that only consumes messages of an instance that never existed
     * creates nothing. */
    duro_work_item stray = {.kind = DURO_WORK_CANCEL_INSTANCE,
                            .instance_id = "ghost",
                            .reason = "r"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &stray, 0, &e), DURO_OK, &e);
    item = fetch_orch(p);
    while (item != NULL && strcmp(item->instance_id, "ghost") != 0) {
        CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, 60000, &e),
                  DURO_OK, &e);
        duro_orch_item_free(item);
        item = fetch_orch(p);
    }
    CHECK(item != NULL);
    CHECK_EQ(item->status, DURO_STATUS_NOT_FOUND);
    CHECK_EQ(item->execution_id, 0);
    duro_orch_ack nothing = {0};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &nothing, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "ghost"), 0);
    CHECK_PRC(p->get_instance(p, "ghost", &list, &e), DURO_NOT_FOUND, &e);
    duro_provider_close(p);
}

TEST(mass_cancellation)
{
    duro_provider *p = open_url(test_sqlite_url("mass.db"));
    duro_error e;
    start(p, "m", "orch");
    start(p, "other", "orch");
    first_turn(p, "m", 1000);
    first_turn(p, "other", 10);
    duro_work_item cancel_msg = {.kind = DURO_WORK_CANCEL_INSTANCE,
                                 .instance_id = "m",
                                 .reason = "stop"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &cancel_msg, 0, &e), DURO_OK, &e);
    duro_orch_item *item = fetch_orch(p);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "m");
    duro_activity_ref *refs = calloc(1000, sizeof(*refs));
    for (size_t i = 0; i < 1000; i++)
        refs[i] = (duro_activity_ref){"m", i % 2 ? 1 : 0, i + 2};
    duro_instance_meta meta = {.status = DURO_STATUS_CANCELLED,
                               .error = "stop",
                               .category = DURO_CATEGORY_CANCELLED};
    duro_orch_ack ack = {.execution_id = 1,
                         .meta = &meta,
                         .cancelled_activities = refs,
                         .cancelled_activity_count = 1000};
    CHECK_PRC(p->ack_orchestration_item(p, item->lock_token, &ack, &e), DURO_OK,
              &e);
    free(refs);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, "m"), 0);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, "other"), 10);
    duro_provider_close(p);
}

/* Several processes opening one new file at the same instant (a runtime and
 * a client started together, workers forked at once) all succeed: creating
 * the schema and switching the new file to WAL wait for one another instead
 * of failing with "database is locked". */
TEST(concurrent_opens_of_a_new_file)
{
    enum { PROCS = 8, ROUNDS = 12 };
    for (int round = 0; round < ROUNDS; round++) {
        char name[32];
        snprintf(name, sizeof(name), "race-%d.db", round);
        const char *url = test_sqlite_url(name);
        int go[2];
        CHECK_EQ(pipe(go), 0);
        pid_t pids[PROCS];
        for (int i = 0; i < PROCS; i++) {
            pids[i] = fork();
            CHECK(pids[i] >= 0);
            if (pids[i] == 0) {
                close(go[1]);
                char b;
                /* all children block here until the pipe closes */
                if (read(go[0], &b, 1) < 0)
                    _exit(3);
                duro_provider *p = NULL;
                duro_error e;
                int rc = duro_provider_open(url, &p, &e);
                if (rc != DURO_OK) {
                    fprintf(stderr, "child %d: %s (%s)\n", i, duro_errname(rc),
                            e.message);
                    _exit(1);
                }
                duro_provider_close(p);
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]);
        for (int i = 0; i < PROCS; i++) {
            int status = 0;
            CHECK_EQ(waitpid(pids[i], &status, 0), pids[i]);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "round %d child %d: status %d", round, i, status);
        }
        duro_provider *p = open_url(url);
        duro_provider_close(p);
        sqlite3 *db = raw_open(test_path(name));
        CHECK_EQ(raw_int(db, "SELECT COUNT(*) FROM duro_schema"), 10);
        sqlite3_close(db);
    }
}

TEST_MAIN(T(url_forms_open), T(turn_statements_build_no_ephemeral_tables),
          T(concurrent_opens_of_a_new_file), T(wal_is_checkpointed_while_open),
          T(a_checkpoint_never_holds_writers_for_a_reader_it_cannot_outwait),
          T(commits_are_visible_to_other_connections_at_once),
          T(url_parameters_are_applied), T(url_malformed_is_bad_url),
          T(url_create_0_never_creates),
          T(a_file_that_is_no_sqlite_database_is_refused_unchanged),
          T(a_file_that_is_no_duro_store_is_never_changed),
          T(mode_ro_reads_and_never_writes),
          T(schema_version_recorded_and_newer_refused),
          T(migration_3_fills_in_cancellations_and_finish_times),
          T(migration_4_adds_activity_run_times),
          T(migration_8_adds_the_live_runtimes), T(wal_mode_applied),
          T(query_plans_use_indexes),
          T(query_pages_read_a_page_of_100000_instances),
          T(statements_are_reused),
          T(busy_from_another_connection_is_retryable),
          T(payload_cap_and_input_rules), T(history_cap),
          T(fault_at_every_step_rolls_back), T(wait_for_work_wakes),
          T(every_method_smoke), T(mass_cancellation))
