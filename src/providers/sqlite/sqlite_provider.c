/* sqlite_provider.c - opens and closes the SQLite provider (URL, writer and
 * reader connections, schema, the notifier of sqlite_wake.c), fills its
 * methods table, and the test hooks. Threading
 * model: one writer connection used under write_lock for every write
 * transaction, a pool of read-only connections for pure reads (WAL lets them
 * run beside the writer); any method may be called from any thread. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/providers.h"
#include "providers/sqlite/sqlite_internal.h"
#include "providers/sqlite/sqlite_provider.h"

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

/* ---- open and close ----------------------------------------------------- */

static void sqlite_close(duro_provider *base)
{
    duro__sqlite_provider *p = sqlite_of(base);
    if (p == NULL)
        return;
    for (int i = 0; i < p->reader_count; i++)
        duro__sqlite_conn_close(&p->readers[i]);
    duro__free(p->readers);
    duro__free(p->free_readers);
    if (p->has_checkpointer)
        duro__sqlite_conn_close(&p->checkpointer);
    /* The writer closes last: as the last connection it checkpoints the WAL
     * into the database file. */
    duro__sqlite_conn_close(&p->writer);
    pthread_mutex_destroy(&p->write_lock);
    pthread_mutex_destroy(&p->group_lock);
    pthread_mutex_destroy(&p->urgent_lock);
    pthread_cond_destroy(&p->urgent_cond);
    pthread_mutex_destroy(&p->pool_lock);
    pthread_cond_destroy(&p->pool_cond);
    duro__sqlite_notifier_detach(p);
    pthread_mutex_destroy(&p->checkpoint_lock);
    duro__sqlite_config_free(&p->cfg);
    duro__free(p);
}

static void fill_methods(duro_provider *m)
{
    duro__sql_fill_methods(m);
    m->name = "sqlite";
    m->close = sqlite_close;
    m->wait_for_work = duro__sqlite_wait_for_work;
    m->wake = duro__sqlite_wake;
}

static int open_readers(duro__sqlite_provider *p, duro_error *err)
{
    int n = p->cfg.pool;
    if (n == 0)
        return DURO_OK;
    p->readers = duro__calloc((size_t)n, sizeof(*p->readers));
    p->free_readers = duro__calloc((size_t)n, sizeof(*p->free_readers));
    if (p->readers == NULL || p->free_readers == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        int rc = duro__sqlite_conn_open(p, &p->readers[i], 1, err);
        if (rc != DURO_OK)
            return rc;
        p->reader_count++;
        p->free_readers[p->free_count++] = &p->readers[i];
    }
    return DURO_OK;
}

int duro__sqlite_open(const char *spec, duro_provider **out, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sqlite_config cfg;
    int rc = duro__sqlite_parse_url(spec, &cfg, err);
    if (rc != DURO_OK) {
        duro__sqlite_config_free(&cfg);
        return rc;
    }
    duro__sqlite_provider *p = duro__calloc(1, sizeof(*p));
    if (p == NULL) {
        duro__sqlite_config_free(&cfg);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    p->cfg = cfg;
    fill_methods(&p->sql.base);
    p->sql.dialect = &duro__sqlite_dialect;
    p->sql.max_payload = cfg.max_payload;
    pthread_mutex_init(&p->write_lock, NULL);
    pthread_mutex_init(&p->group_lock, NULL);
    pthread_mutex_init(&p->urgent_lock, NULL);
    pthread_cond_init(&p->urgent_cond, NULL);
    pthread_mutex_init(&p->checkpoint_lock, NULL);
    pthread_mutex_init(&p->pool_lock, NULL);
    pthread_cond_init(&p->pool_cond, NULL);

    rc = duro__sqlite_check_is_database(p, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_check_wal_files(p, 0, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_conn_open(p, &p->writer, p->cfg.read_only, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_migrate(p, err);
    if (rc == DURO_OK)
        rc = open_readers(p, err);
    if (rc == DURO_OK && duro__sqlite_notifier_attach(p) != DURO_OK)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK && !p->cfg.memory && !p->cfg.read_only) {
        rc = duro__sqlite_conn_open(p, &p->checkpointer, 0, err);
        if (rc == DURO_OK) {
            p->has_checkpointer = 1;
            rc = duro__sqlite_checkpoint_setup(p, err);
        }
    }
    return duro__sql_open_done(&p->sql.base, rc, out);
}

/* ---- test hooks ------------------------------------------------------------
 */

static duro__sqlite_provider *hook_target(duro_provider *p)
{
    return (duro__sqlite_provider *)duro__sql_store_of(p, "sqlite");
}

uint64_t duro__sqlite_checkpoints(duro_provider *base)
{
    duro__sqlite_provider *p = hook_target(base);
    return p != NULL ? atomic_load(&p->checkpoints) : 0;
}

void duro__sqlite_set_checkpoint_frames(duro_provider *base, int frames)
{
    duro__sqlite_provider *p = hook_target(base);
    if (p != NULL && frames > 0)
        p->checkpoint_frames = frames;
}

uint64_t duro__sqlite_statements_prepared(duro_provider *base)
{
    return duro__sql_statements_prepared(base, "sqlite");
}

/* One connection's VM steps, over the statements it has prepared. */
static uint64_t conn_vm_steps(duro__sqlite_conn *c)
{
    uint64_t n = 0;
    for (size_t i = 0; c->db != NULL && i < DURO__SQL_COUNT; i++)
        if (c->stmts[i] != NULL)
            n += (uint64_t)sqlite3_stmt_status(c->stmts[i],
                                               SQLITE_STMTSTATUS_VM_STEP, 0);
    return n;
}

uint64_t duro__sqlite_vm_steps(duro_provider *base)
{
    duro__sqlite_provider *p = hook_target(base);
    if (p == NULL)
        return 0;
    uint64_t n = conn_vm_steps(&p->writer);
    for (int i = 0; i < p->reader_count; i++)
        n += conn_vm_steps(&p->readers[i]);
    return n;
}

void duro__sqlite_inject_fault(duro_provider *base, uint64_t nth_step,
                               int retryable)
{
    duro__sql_inject_fault(base, "sqlite", nth_step, retryable);
}

int duro__sqlite_pragma_int(duro_provider *base, const char *name, int64_t *out)
{
    duro__sqlite_provider *p = hook_target(base);
    if (p == NULL || name == NULL || out == NULL)
        return -1;
    char sql[128];
    snprintf(sql, sizeof(sql), "PRAGMA %s", name);
    pthread_mutex_lock(&p->write_lock);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(p->writer.db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    else
        rc = SQLITE_ERROR;
    sqlite3_finalize(s);
    pthread_mutex_unlock(&p->write_lock);
    return rc == SQLITE_OK ? 0 : -1;
}

/* ---- can this process write the store? -----------------------------------
 * Asked once by a runtime when it is created: a runtime on a store it
 * cannot write would start and then retry every fetch for ever. A client
 * that only reads is never asked. */

int duro__sqlite_check_writable(duro_provider *base, duro_error *err)
{
    duro__sqlite_provider *p = hook_target(base);
    if (p == NULL || p->cfg.memory)
        return DURO_OK;
    const char *path = p->cfg.path;
    if (p->cfg.read_only)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s was opened read-only (mode=ro); a "
                              "runtime writes to its store",
                              path);
    /* SQLite opens a file it may not write read-only without a word;
     * BEGIN IMMEDIATE also needs the -wal and -shm writable. It takes
     * the write lock: another process writing (BUSY) proves nothing
     * either way, so only a read-only answer fails. */
    pthread_mutex_lock(&p->write_lock);
    int rc = SQLITE_READONLY;
    if (sqlite3_db_readonly(p->writer.db, "main") != 1) {
        rc = sqlite3_exec(p->writer.db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            sqlite3_exec(p->writer.db, "ROLLBACK", NULL, NULL, NULL);
    }
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", sqlite3_errmsg(p->writer.db));
    pthread_mutex_unlock(&p->write_lock);
    if ((rc & 0xff) != SQLITE_READONLY)
        return DURO_OK;

    char me[160], owner[160], file[1100];
    duro__sqlite_user_name(geteuid(), me, sizeof(me));
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < DURO__ARRAY_LEN(suffixes); i++) {
        struct stat st;
        snprintf(file, sizeof(file), "%s%s", path, suffixes[i]);
        if (stat(file, &st) != 0 ||
            faccessat(AT_FDCWD, file, W_OK, AT_EACCESS) == 0)
            continue;
        duro__sqlite_user_name(st.st_uid, owner, sizeof(owner));
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s: a runtime needs to write its "
                              "store, and %s (owned by %s, mode %04o) is "
                              "not writable by %s",
                              path, file, owner, (unsigned)(st.st_mode & 0777),
                              me);
    }
    return duro_error_set(err, DURO_STORAGE, 0,
                          "sqlite %s: a runtime needs to write its store, "
                          "and %s cannot: %s",
                          path, me, detail);
}
