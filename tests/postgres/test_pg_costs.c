/* test_pg_costs.c - what `duro list`'s first page and `duro metrics` read
 * among 220,000 instances and 101,010 queued messages, counted by the
 * server: EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of the statements the
 * provider runs, with its values and its settings. The first page reads a
 * page of index entries; the count that goes with it stops at its cap in
 * an index (index-only scans, no row read); the gauges read index entries,
 * never a queue's rows or an instance's. Rows and buffers, never time: a
 * check fails when a statement reads what grows with the store. The data
 * is loaded with generate_series straight into the tables of a fresh
 * schema (payloads as wide as real ones, so a heap is several times its
 * indexes), vacuumed as autovacuum would, and dropped at the end. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"
#include "pg_util.h"
#include "providers/postgres/pg_provider.h"
#include "providers/providers.h"
#include "test.h"

#define INSTANCES 220000
#define PENDING 100000 /* each with a visible START: ready */
#define TIMERS 1000    /* running, each with a timer due in 2096: delayed */
#define LOCKED 10      /* running, each with a visible event, locked */
#define WORK 2000      /* ready activity rows */
#define FUTURE "4000000000000"
#define CAP 10000 /* duro list's count cap (cmd_read.c, LIST_COUNT_CAP) */

static char schema[64];
static duro_provider *provider;
static PGconn *admin;

/* ---- the store ------------------------------------------------------------
 */

static const char *const load[] = {
    "INSERT INTO instances(instance_id, name, status, execution_id, "
    "created_ms, updated_ms, output, error, finished_ms) "
    "SELECT 'i-' || lpad(g::text, 7, '0'), "
    "(ARRAY['Pay', 'Ship', 'User'])[1 + g % 3], "
    "CASE WHEN g <= 100000 THEN 1 WHEN g <= 101010 THEN 2 "
    "WHEN g % 50 = 0 THEN 4 ELSE 3 END, "
    "CASE WHEN g <= 100000 THEN 0 ELSE 1 END, "
    "1700000000000 + g * 10, 1700000000000 + g * 10, "
    "CASE WHEN g > 101010 AND g % 50 <> 0 "
    "THEN '{\"receipt\":\"' || repeat(md5(g::text), 6) || '\"}' END, "
    "CASE WHEN g > 101010 AND g % 50 = 0 THEN 'card declined' END, "
    "CASE WHEN g > 101010 THEN 1700000000000 + g * 10 + 5 END "
    "FROM generate_series(1, 220000) AS g",
    /* the pending instances' STARTs, the running ones' timers and events */
    "INSERT INTO orchestrator_queue(instance_id, kind, name, payload, "
    "enqueued_ms, visible_at) "
    "SELECT 'i-' || lpad(g::text, 7, '0'), "
    "CASE WHEN g <= 100000 THEN 1 WHEN g <= 101000 THEN 4 ELSE 5 END, "
    "(ARRAY['Pay', 'Ship', 'User'])[1 + g % 3], "
    "'{\"order\":' || g || ',\"lines\":\"' || repeat(md5(g::text), 8) || "
    "'\"}', 1700000000000 + g * 10, "
    "CASE WHEN g > 100000 AND g <= 101000 THEN " FUTURE
    " ELSE 1700000000000 + g * 10 END "
    "FROM generate_series(1, 101010) AS g",
    "INSERT INTO orchestrator_ready(instance_id, ready_at, lock_token, "
    "locked_until) "
    "SELECT 'i-' || lpad(g::text, 7, '0'), "
    "CASE WHEN g <= 100000 THEN 1700000000000 + g * 10 ELSE " FUTURE " END, "
    "CASE WHEN g > 101000 THEN 'o' || g || '.t' END, "
    "CASE WHEN g > 101000 THEN " FUTURE " END "
    "FROM generate_series(1, 101010) AS g",
    "INSERT INTO worker_queue(instance_id, execution_id, activity_id, name, "
    "payload, enqueued_ms, available_at) "
    "SELECT 'i-' || lpad((100000 + g)::text, 7, '0'), 1, g, 'Charge', "
    "repeat(md5(g::text), 8), 1700000000000, 1700000000000 "
    "FROM generate_series(1, 2000) AS g",
    /* what autovacuum does to a table this size: statistics, and the
     * visibility map that lets an index-only scan skip the heap */
    "VACUUM (ANALYZE) instances, orchestrator_queue, orchestrator_ready, "
    "worker_queue"};

/* At exit, whatever the tests did or filtered: the schema goes. */
static void drop_schema(void)
{
    duro_provider_close(provider);
    provider = NULL;
    PQfinish(admin);
    admin = NULL;
    PGconn *c = PQconnectdb(pg_test_url());
    char sql[128];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fprintf(stderr, "test_pg_costs: could not drop schema %s: %s\n", schema,
                PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

static int setup(void)
{
    if (provider != NULL)
        return 1;
    if (schema[0] != '\0')
        return 0; /* set up once; it failed */
    snprintf(schema, sizeof(schema), "pgcost_%ld", (long)getpid());
    atexit(drop_schema);
    const char *base = pg_test_url();
    char url[4300];
    snprintf(url, sizeof(url), "%s%cschema=%s", base,
             strchr(base, '?') ? '&' : '?', schema);
    duro_error e;
    CHECK_PRC(duro_provider_open(url, &provider, &e), DURO_OK, &e);
    admin = pg_test_connect();
    if (provider == NULL || admin == NULL)
        return 0;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; "
             "SET plan_cache_mode = force_custom_plan",
             schema);
    if (!PG_COMMAND(admin, sql))
        return 0;
    for (size_t i = 0; i < sizeof(load) / sizeof(load[0]); i++)
        if (!PG_COMMAND(admin, load[i]))
            return 0;
    return 1;
}

/* Pages of relation `name` in the schema. */
static long relation_pages(const char *name)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT pg_relation_size('\"%s\".%s') / "
             "current_setting('block_size')::int",
             schema, name);
    PGresult *r = PG_EXEC(admin, sql, PGRES_TUPLES_OK);
    long n = r != NULL ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return n;
}

/* ---- EXPLAIN, summed ------------------------------------------------------
 */

/* What the scan nodes of a plan read. */
typedef struct reads {
    long buffers;      /* shared blocks hit and read, the whole plan */
    long rows;         /* rows the scan nodes read: returned and removed */
    long heap_fetches; /* of index-only scans */
    int index_only;    /* Index Only Scan nodes */
    int heap_scans;    /* Seq Scan, Index Scan, Bitmap Heap Scan nodes */
    char heap_of[512]; /* which relations those read */
    char plan[8192];   /* the plan, for a message */
} reads;

static long number(json_t *node, const char *key)
{
    json_t *v = json_object_get(node, key);
    return json_is_number(v) ? (long)json_number_value(v) : 0;
}

static void walk(json_t *node, reads *r, int depth)
{
    const char *type = json_string_value(json_object_get(node, "Node Type"));
    const char *rel = json_string_value(json_object_get(node, "Relation Name"));
    const char *index = json_string_value(json_object_get(node, "Index Name"));
    long loops = number(node, "Actual Loops");
    size_t len = strlen(r->plan);
    snprintf(r->plan + len, sizeof(r->plan) - len,
             "\n    %*s%s%s%s%s%s rows=%ld loops=%ld", depth * 2, "",
             type ? type : "?", rel ? " on " : "", rel ? rel : "",
             index ? " using " : "", index ? index : "",
             number(node, "Actual Rows"), loops);
    if (type != NULL && strstr(type, "Scan") != NULL &&
        strcmp(type, "Bitmap Index Scan") != 0 && rel != NULL) {
        r->rows += (number(node, "Actual Rows") +
                    number(node, "Rows Removed by Filter") +
                    number(node, "Rows Removed by Index Recheck")) *
                   (loops > 0 ? loops : 1);
        if (strcmp(type, "Index Only Scan") == 0) {
            r->index_only++;
            r->heap_fetches += number(node, "Heap Fetches");
        } else {
            r->heap_scans++;
            len = strlen(r->heap_of);
            snprintf(r->heap_of + len, sizeof(r->heap_of) - len, "%s%s (%s)",
                     len ? ", " : "", rel, type);
        }
    }
    json_t *children = json_object_get(node, "Plans");
    size_t i;
    json_t *child;
    json_array_foreach(children, i, child) walk(child, r, depth + 1);
}

/* PREPAREs the provider's statement `name` as q (every parameter text, as
 * the provider sends them), EXPLAINs its EXECUTE with `args` and sums the
 * plan into *r. 0 (and a failed check) when that failed. */
static int explain(const char *name, const char *args, reads *r)
{
    memset(r, 0, sizeof(*r));
    const char *text = NULL;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__pg_dialect); i++)
        if (strcmp(duro__sql_statement_name(&duro__pg_dialect, i), name) == 0)
            text = duro__sql_statement_sql(&duro__pg_dialect, i);
    CHECK_MSG(text != NULL, "no statement %s", name);
    if (text == NULL)
        return 0;
    int params = 0;
    for (const char *q = strchr(text, '$'); q != NULL; q = strchr(q + 1, '$'))
        params = atoi(q + 1) > params ? atoi(q + 1) : params;
    char sql[16384];
    int len = snprintf(sql, sizeof(sql), "PREPARE q%s", params ? "(" : "");
    for (int i = 0; i < params; i++)
        len += snprintf(sql + len, sizeof(sql) - (size_t)len, "%stext",
                        i > 0 ? ", " : "");
    snprintf(sql + len, sizeof(sql) - (size_t)len, "%s AS %s",
             params ? ")" : "", text);
    if (!PG_COMMAND(admin, sql))
        return 0;
    snprintf(sql, sizeof(sql),
             "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "
             "EXECUTE q%s",
             args);
    PGresult *res = PG_EXEC(admin, sql, PGRES_TUPLES_OK);
    PG_COMMAND(admin, "DEALLOCATE q");
    if (res == NULL)
        return 0;
    json_error_t je;
    json_t *doc = json_loads(PQgetvalue(res, 0, 0), 0, &je);
    PQclear(res);
    json_t *plan = json_object_get(json_array_get(doc, 0), "Plan");
    CHECK_MSG(plan != NULL, "%s: EXPLAIN gave no plan", name);
    if (plan == NULL) {
        json_decref(doc);
        return 0;
    }
    r->buffers =
        number(plan, "Shared Hit Blocks") + number(plan, "Shared Read Blocks");
    walk(plan, r, 0);
    json_decref(doc);
    return 1;
}

/* ---- duro list ------------------------------------------------------------
 */

/* EXECUTE's arguments for a plan's statement ($1 .. $20 as sql/manage.c's
 * bind_plan binds them; a statement's PREPARE takes the first n). */
static void plan_args(const duro__instance_plan *pl, const char *name,
                      char *out, size_t size)
{
    int n = 0;
    for (size_t i = 0; i < duro__sql_statement_count(&duro__pg_dialect); i++)
        if (strcmp(duro__sql_statement_name(&duro__pg_dialect, i), name) == 0)
            for (const char *q =
                     strchr(duro__sql_statement_sql(&duro__pg_dialect, i), '$');
                 q != NULL; q = strchr(q + 1, '$'))
                n = atoi(q + 1) > n ? atoi(q + 1) : n;
    char v[21][1100];
    const char *texts[] = {pl->name, pl->prefix, pl->prefix_end, pl->contains,
                           pl->parent};
    for (int i = 0; i < 5; i++) {
        char *lit = texts[i] != NULL
                        ? PQescapeLiteral(admin, texts[i], strlen(texts[i]))
                        : NULL;
        snprintf(v[i], sizeof(v[i]), "%s", lit != NULL ? lit : "NULL");
        PQfreemem(lit);
    }
    snprintf(v[5], sizeof(v[5]), "'%d'", pl->with_problem);
    snprintf(v[6], sizeof(v[6]), "'%lld'", (long long)pl->created_from);
    snprintf(v[7], sizeof(v[7]), "'%lld'", (long long)pl->created_until);
    snprintf(v[8], sizeof(v[8]), "'%u'", (unsigned)pl->mask);
    snprintf(v[9], sizeof(v[9]), "'%lld'", (long long)pl->after_key);
    char *id = PQescapeLiteral(admin, pl->after_id, strlen(pl->after_id));
    snprintf(v[10], sizeof(v[10]), "%s", id);
    PQfreemem(id);
    snprintf(v[11], sizeof(v[11]), "'%zu'", pl->limit + 1);
    for (int k = 0; k < DURO__QUERY_ARMS; k++)
        snprintf(v[12 + k], sizeof(v[12 + k]), "'%d'", pl->arms[k]);
    if (pl->count_rows >= 0)
        snprintf(v[19], sizeof(v[19]), "'%lld'", (long long)pl->count_rows);
    else
        snprintf(v[19], sizeof(v[19]), "NULL");
    char *version = pl->version != NULL ? PQescapeLiteral(admin, pl->version,
                                                          strlen(pl->version))
                                        : NULL;
    snprintf(v[20], sizeof(v[20]), "%s", version != NULL ? version : "NULL");
    PQfreemem(version);
    size_t len = (size_t)snprintf(out, size, "(");
    for (int i = 0; i < n && i < 21; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? ", " : "",
                                v[i]);
    snprintf(out + len, size - len, ")");
}

static const char *const path_names[] = {
    "ALL", "NAME", "STATUS", "NAME_STATUS", "PREFIX", "PARENT", "PROBLEM"};

/* `duro list`'s first page as cmd_read.c asks for it: by id, 100 rows,
 * counted up to CAP. */
static void list_query(duro_instance_query *q, uint32_t mask, const char *name,
                       int64_t count_max)
{
    duro_instance_query_init(q);
    q->status_mask = mask;
    q->name = name;
    q->limit = 100;
    q->count_total = 1;
    q->count_max = count_max;
}

#define BIT(s) (1u << (s))

/* Among 220,000 instances, the first page of `duro list` with each filter
 * it takes (none, a status, a rare status, a name, a name and statuses)
 * reads about a page of index entries, and its count stops after CAP + 1
 * matches (or at the matches, when fewer) in an index: index-only scans,
 * no heap fetch, a few hundred buffers however many instances the store
 * holds. The same count unbounded reads every match: the store is big
 * enough for the bound to show. */
TEST(list_first_page_and_count_read_a_bounded_index_range)
{
    if (!setup())
        return;
    long heap = relation_pages("instances");
    static const struct {
        const char *what;
        uint32_t mask;
        const char *name;
        int64_t matches;
    } cases[] = {
        {"no filter", 0, NULL, INSTANCES},
        {"pending", BIT(DURO_STATUS_PENDING), NULL, PENDING},
        {"failed (2,380 match)", BIT(DURO_STATUS_FAILED), NULL, 2380},
        {"name", 0, "Ship", INSTANCES / 3},
        {"name, completed or failed",
         BIT(DURO_STATUS_COMPLETED) | BIT(DURO_STATUS_FAILED), "Pay", 39663},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        duro_instance_query q;
        list_query(&q, cases[k].mask, cases[k].name, CAP);
        duro_error e;
        duro_instance_page *page = NULL;
        CHECK_PRC(provider->query_instances(provider, &q, &page, &e), DURO_OK,
                  &e);
        if (page == NULL)
            continue;
        int64_t want = cases[k].matches > CAP ? CAP : cases[k].matches;
        CHECK_MSG(page->count == 100 && page->total == want &&
                      page->total_capped == (cases[k].matches > CAP),
                  "%s: %zu rows, total %lld, capped %d (want %lld)",
                  cases[k].what, page->count, (long long)page->total,
                  page->total_capped, (long long)want);
        duro_instance_page_free(page);

        duro__instance_plan pl;
        CHECK_PRC(duro__query_plan("postgres", &q, 1, &pl, &e), DURO_OK, &e);
        char name[64], args[16384];
        reads r;
        /* the page: at most seven ranges (one per status) of 101 */
        snprintf(name, sizeof(name), "QUERY_%s_ID", path_names[pl.path]);
        plan_args(&pl, name, args, sizeof(args));
        if (explain(name, args, &r)) {
            printf("  %s, page (%s): %ld rows, %ld buffers\n", cases[k].what,
                   name, r.rows, r.buffers);
            CHECK_MSG(r.rows <= 8 * 101 && r.buffers <= 10 * 101 &&
                          strstr(r.heap_of, "Seq Scan") == NULL,
                      "%s: the page (%s) reads %ld rows, %ld buffers:%s",
                      cases[k].what, name, r.rows, r.buffers, r.plan);
        }
        /* the count: index entries only, at most CAP + 1 of them */
        snprintf(name, sizeof(name), "QUERY_COUNT_%s",
                 path_names[pl.count_path]);
        plan_args(&pl, name, args, sizeof(args));
        if (explain(name, args, &r)) {
            printf("  %s, count (%s): %ld rows, %ld buffers, %ld heap "
                   "fetches\n",
                   cases[k].what, name, r.rows, r.buffers, r.heap_fetches);
            CHECK_MSG(r.heap_scans == 0 && r.index_only > 0 &&
                          r.heap_fetches == 0 && r.rows <= CAP + 1 &&
                          r.buffers <= 300,
                      "%s: the count (%s) reads %ld rows, %ld buffers, "
                      "%ld heap fetches, the rows of %s:%s",
                      cases[k].what, name, r.rows, r.buffers, r.heap_fetches,
                      r.heap_of[0] ? r.heap_of : "-", r.plan);
        }
        /* the witness: unbounded, the same count reads every match */
        if (k == 0) {
            pl.count_rows = -1;
            plan_args(&pl, name, args, sizeof(args));
            if (explain(name, args, &r))
                CHECK_MSG(r.rows >= INSTANCES,
                          "unbounded, the count reads %ld rows:%s", r.rows,
                          r.plan);
        }
        duro__query_plan_free(&pl);
    }
    CHECK_MSG(heap > 5000,
              "the instances' heap is %ld pages: too small to "
              "tell a bounded read from a scan",
              heap);
}

/* ---- duro metrics ----------------------------------------------------------
 */

/* Among 101,010 queued messages (100,000 ready, 1,000 delayed, 10 locked)
 * and 2,000 activity rows: the gauges are right, and with the snapshot's
 * settings (STATS_PLAN) every statement reads index entries, never a
 * queue's rows - the orchestrator queue's counts fewer buffers than its
 * index has pages, far fewer than its heap's - and the oldest ready item
 * is the first entry of an index. */
TEST(metrics_read_index_entries_not_queue_rows)
{
    if (!setup())
        return;
    duro_error e;
    duro_store_stats *st = NULL;
    CHECK_PRC(provider->read_store_stats(provider, &st, &e), DURO_OK, &e);
    if (st != NULL) {
        CHECK_EQ(st->orchestrator_ready, PENDING);
        CHECK_EQ(st->orchestrator_locked, LOCKED);
        CHECK_EQ(st->orchestrator_delayed, TIMERS);
        CHECK_EQ(st->orchestrator_oldest_ready_ms, 1700000000010LL);
        CHECK_EQ(st->worker_ready, WORK);
        CHECK_EQ(st->worker_locked, 0);
        uint64_t sum = 0;
        for (size_t i = 0; i < st->instance_count; i++)
            sum += st->instances[i].count;
        CHECK_EQ(sum, INSTANCES);
    }
    duro_free(st);

    long queue_heap = relation_pages("orchestrator_queue");
    long queue_index = relation_pages("orchestrator_queue_instance");
    long instances_heap = relation_pages("instances");
    printf("  pages: orchestrator_queue %ld, orchestrator_queue_instance %ld, "
           "instances %ld\n",
           queue_heap, queue_index, instances_heap);
    char now[32];
    snprintf(now, sizeof(now), "('%lld')", (long long)duro__wall_ms());
    /* orchestrator_ready's rows (narrow, one per instance with messages)
     * are read for the instances not fetchable and for the oldest
     * fetchable one, and worker_queue's for the rows locked or held,
     * each through the index range of its time column; no other rows */
    static const struct {
        const char *name;
        int with_now;
        long most_rows;      /* read by the scan nodes */
        const char *rows_of; /* the one table whose rows it may read */
    } stats[] = {
        {"STATS_INSTANCES", 0, INSTANCES, NULL},
        {"STATS_PROBLEMS", 0, 0, NULL},
        {"STATS_ORCH_QUEUED", 1, PENDING + TIMERS + LOCKED, NULL},
        /* the instances not fetchable, and the locked ones' visible
         * messages: the timers' delayed instances probe nothing */
        {"STATS_ORCH_WAITING", 1, TIMERS + 2 * LOCKED,
         "orchestrator_ready (Index Scan)"},
        {"STATS_ORCH_OLDEST", 1, 2, "orchestrator_ready (Index Scan)"},
        {"STATS_WORKER_READY", 1, WORK, NULL},
        {"STATS_WORKER_LOCKED", 1, 0, "worker_queue (Index Scan)"},
    };
    PG_COMMAND(admin, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    reads r;
    if (explain("STATS_PLAN", "", &r)) {
        for (size_t k = 0; k < sizeof(stats) / sizeof(stats[0]); k++) {
            if (!explain(stats[k].name, stats[k].with_now ? now : "", &r))
                continue;
            printf("  %s: %ld rows, %ld buffers, %d index-only scans, "
                   "%ld heap fetches\n",
                   stats[k].name, r.rows, r.buffers, r.index_only,
                   r.heap_fetches);
            CHECK_MSG((r.heap_scans == 0 ||
                       (r.heap_scans == 1 && stats[k].rows_of != NULL &&
                        strcmp(r.heap_of, stats[k].rows_of) == 0)) &&
                          r.heap_fetches == 0 && r.rows <= stats[k].most_rows,
                      "%s reads %ld rows, %ld heap fetches, the rows of %s:%s",
                      stats[k].name, r.rows, r.heap_fetches,
                      r.heap_of[0] ? r.heap_of : "-", r.plan);
            if (strcmp(stats[k].name, "STATS_ORCH_QUEUED") == 0)
                CHECK_MSG(r.buffers <= queue_index + 10 &&
                              r.buffers * 3 < queue_heap,
                          "the queue's count reads %ld buffers; its index "
                          "has %ld pages, its heap %ld",
                          r.buffers, queue_index, queue_heap);
            if (strcmp(stats[k].name, "STATS_INSTANCES") == 0)
                CHECK_MSG(r.buffers * 2 < instances_heap,
                          "the instances' counts read %ld buffers; their "
                          "heap has %ld pages",
                          r.buffers, instances_heap);
            if (strcmp(stats[k].name, "STATS_ORCH_OLDEST") == 0)
                CHECK_INT(r.buffers, <=, 20);
        }
    }
    PG_COMMAND(admin, "COMMIT");
}

TEST_MAIN(T(list_first_page_and_count_read_a_bounded_index_range),
          T(metrics_read_index_entries_not_queue_rows))
