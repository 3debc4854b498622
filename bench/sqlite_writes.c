/* sqlite_writes.c - counts what a process writes through SQLite: an
 * LD_PRELOAD library (libsqlite_writes.so) that wraps sqlite3_step and, at
 * exit, prints to stderr one JSON object per kind of write transaction:
 * how many committed, the pages they wrote to the WAL
 * (SQLITE_DBSTATUS_CACHE_WRITE, as floor_bench counts them) and the
 * statements they ran, by text. A transaction's kind is the first statement
 * it ran after BEGIN (or its only one, outside BEGIN ... COMMIT).
 *
 *   LD_PRELOAD=build/bench/libsqlite_writes.so orch_bench --workload chain
 *   SQLITE_WRITES_STATEMENTS=1 ...: the statements of each kind as well
 *
 * For measurement only (bench/RESULTS.md, issue 25): it takes a mutex at
 * every step, which costs a little time but changes no write. Needs the
 * program to link SQLite dynamically. Any thread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DBS 256
#define MAX_KINDS 64
#define MAX_STMTS 64
#define TEXT_MAX 72

typedef struct {
    char text[TEXT_MAX];
    uint64_t count;
} stmt_count;

typedef struct {
    char first[TEXT_MAX]; /* the kind: first statement after BEGIN */
    uint64_t commits, pages, statements;
    stmt_count stmts[MAX_STMTS];
    int nstmts;
} kind;

typedef struct {
    sqlite3 *db;
    int in_txn;     /* between BEGIN and COMMIT/ROLLBACK */
    int pages_seen; /* CACHE_WRITE at the last commit */
    char first[TEXT_MAX];
    uint64_t statements; /* in the current transaction */
    /* the statements of the current transaction, by text */
    stmt_count stmts[MAX_STMTS];
    int nstmts;
} conn;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static conn conns[MAX_DBS];
static int nconns;
static kind kinds[MAX_KINDS];
static int nkinds;
static uint64_t empty_commits; /* committed, wrote no page */
static int (*real_step)(sqlite3_stmt *);
static long trace = -1;

static conn *conn_of(sqlite3 *db)
{
    for (int i = 0; i < nconns; i++)
        if (conns[i].db == db)
            return &conns[i];
    if (nconns == MAX_DBS)
        return NULL;
    conn *c = &conns[nconns++];
    memset(c, 0, sizeof(*c));
    c->db = db;
    return c;
}

static void copy_text(char *out, const char *sql)
{
    size_t i = 0;
    for (; sql != NULL && sql[i] != '\0' && i < TEXT_MAX - 1; i++)
        out[i] = sql[i] == '"' || sql[i] == '\\' ? '\'' : sql[i];
    out[i] = '\0';
}

static void note_stmt(stmt_count *list, int *n, const char *sql, uint64_t add)
{
    char text[TEXT_MAX];
    copy_text(text, sql);
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i].text, text) == 0) {
            list[i].count += add;
            return;
        }
    if (*n == MAX_STMTS)
        return;
    copy_text(list[*n].text, text);
    list[*n].count = add;
    (*n)++;
}

/* The transaction of c ended; with `committed`, it counts. */
static void txn_end(conn *c, int committed)
{
    int cur = 0, hi = 0;
    sqlite3_db_status(c->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 0);
    int pages = cur - c->pages_seen;
    c->pages_seen = cur;
    if (committed && (pages > 0 || c->statements > 0)) {
        kind *k = NULL;
        for (int i = 0; i < nkinds; i++)
            if (strcmp(kinds[i].first, c->first) == 0)
                k = &kinds[i];
        if (k == NULL && nkinds < MAX_KINDS) {
            k = &kinds[nkinds++];
            memset(k, 0, sizeof(*k));
            copy_text(k->first, c->first);
        }
        if (pages == 0)
            empty_commits++;
        if (k != NULL && pages > 0) {
            k->commits++;
            k->pages += (uint64_t)pages;
            k->statements += c->statements;
            for (int i = 0; i < c->nstmts; i++)
                note_stmt(k->stmts, &k->nstmts, c->stmts[i].text,
                          c->stmts[i].count);
        }
    }
    c->in_txn = 0;
    c->statements = 0;
    c->nstmts = 0;
    c->first[0] = '\0';
}

int sqlite3_step(sqlite3_stmt *s)
{
    if (real_step == NULL)
        real_step = (int (*)(sqlite3_stmt *))dlsym(RTLD_NEXT, "sqlite3_step");
    if (trace < 0) {
        const char *t = getenv("SQLITE_WRITES_TRACE");
        trace = t != NULL ? atol(t) : 0;
    }
    int rc = real_step(s);
    const char *sql = sqlite3_sql(s);
    if (sql == NULL || sqlite3_stmt_readonly(s) && strncmp(sql, "COMMIT", 6) &&
                           strncmp(sql, "BEGIN", 5) &&
                           strncmp(sql, "ROLLBACK", 8))
        goto read_only; /* still counted inside a transaction */
    pthread_mutex_lock(&lock);
    conn *c = conn_of(sqlite3_db_handle(s));
    if (c == NULL) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    if (strncmp(sql, "BEGIN", 5) == 0) {
        c->in_txn = 1;
        c->statements = 0;
        c->nstmts = 0;
        c->first[0] = '\0';
    } else if (strncmp(sql, "COMMIT", 6) == 0) {
        txn_end(c, rc == SQLITE_DONE);
    } else if (strncmp(sql, "ROLLBACK", 8) == 0) {
        txn_end(c, 0);
    } else if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        if (c->first[0] == '\0')
            copy_text(c->first, sql);
        c->statements++;
        note_stmt(c->stmts, &c->nstmts, sql, 1);
        if (trace > 0) {
            trace--;
            fprintf(stderr, "trace %p %.60s\n", (void *)c->db, sql);
        }
        if (!c->in_txn && sqlite3_get_autocommit(c->db) && rc == SQLITE_DONE)
            txn_end(c, 1); /* one statement, its own transaction */
    }
    pthread_mutex_unlock(&lock);
    return rc;
read_only:
    if (sql != NULL && (rc == SQLITE_ROW || rc == SQLITE_DONE)) {
        pthread_mutex_lock(&lock);
        conn *c = conn_of(sqlite3_db_handle(s));
        if (c != NULL && c->in_txn) {
            if (c->first[0] == '\0')
                copy_text(c->first, sql);
            c->statements++;
            note_stmt(c->stmts, &c->nstmts, sql, 1);
            if (trace > 0) {
                trace--;
                fprintf(stderr, "trace %p %.60s\n", (void *)c->db, sql);
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

__attribute__((destructor)) static void report(void)
{
    int detail = getenv("SQLITE_WRITES_STATEMENTS") != NULL;
    uint64_t commits = 0, pages = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nkinds; i++) {
        kind *k = &kinds[i];
        commits += k->commits;
        pages += k->pages;
        fprintf(stderr,
                "{\"sqlite_writes\":\"kind\",\"first\":\"%s\",\"commits\":%llu,"
                "\"pages\":%llu,\"pages_per_commit\":%.2f,"
                "\"statements_per_commit\":%.2f}\n",
                k->first, (unsigned long long)k->commits,
                (unsigned long long)k->pages,
                k->commits ? (double)k->pages / (double)k->commits : 0.0,
                k->commits ? (double)k->statements / (double)k->commits : 0.0);
        for (int j = 0; detail && j < k->nstmts; j++)
            fprintf(stderr, "  {\"statement\":\"%s\",\"per_commit\":%.2f}\n",
                    k->stmts[j].text,
                    k->commits ? (double)k->stmts[j].count / (double)k->commits
                               : 0.0);
    }
    fprintf(stderr,
            "{\"sqlite_writes\":\"total\",\"commits\":%llu,\"pages\":%llu,"
            "\"empty_commits\":%llu}\n",
            (unsigned long long)commits, (unsigned long long)pages,
            (unsigned long long)empty_commits);
    pthread_mutex_unlock(&lock);
}
