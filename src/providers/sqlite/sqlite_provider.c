/* sqlite_provider.c - opens (the rest of sql/methods.c's duro__sql_open:
 * writer and reader connections, schema, the in-process notifier's key)
 * and closes the SQLite provider, and the test hooks. Threading
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

/* ---- open and close ----------------------------------------------------- */

static void sqlite_close(duro_provider *base)
{
    duro__sqlite_provider *p = (duro__sqlite_provider *)base;
    if (p == NULL)
        return;
    for (int i = 0; i < p->reader_count; i++)
        duro__sqlite_conn_close(&p->readers[i]);
    duro__free(p->readers);
    if (p->has_checkpointer)
        duro__sqlite_conn_close(&p->checkpointer);
    /* The writer closes last: as the last connection it checkpoints the WAL
     * into the database file. */
    duro__sqlite_conn_close(&p->writer);
    pthread_mutex_destroy(&p->write_lock);
    pthread_mutex_destroy(&p->group_lock);
    pthread_mutex_destroy(&p->urgent_lock);
    pthread_cond_destroy(&p->urgent_cond);
    pthread_mutex_destroy(&p->checkpoint_lock);
    duro__sqlite_config_free(&p->cfg);
    duro__sql_store_free(&p->sql);
}

/* The in-process wake-up (sql/notify.c) of this database file: one per file
 * per process, keyed by device and inode; every :memory: database its own.
 */
static int attach_notifier(duro__sqlite_provider *p)
{
    char key[64] = "";
    const char *file = sqlite3_db_filename(p->writer.db, "main");
    struct stat st;
    if (file != NULL && file[0] != '\0' && stat(file, &st) == 0)
        snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    return duro__sql_notify_attach(&p->sql, key, NULL, NULL);
}

static int open_readers(duro__sqlite_provider *p, duro_error *err)
{
    int n = p->cfg.pool;
    if (n == 0)
        return DURO_OK;
    p->readers = duro__calloc((size_t)n, sizeof(*p->readers));
    if (p->readers == NULL ||
        duro__sql_pool_reserve(&p->sql.pool, n) != DURO_OK)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        int rc = duro__sqlite_conn_open(p, &p->readers[i], 1, err);
        if (rc != DURO_OK)
            return rc;
        p->reader_count++;
        duro__sql_pool_give(&p->sql.pool, &p->readers[i]);
    }
    return DURO_OK;
}

/* duro__sql_open's open: the locks, the files' checks, the writer, the
 * schema, the readers, the notifier, the checkpointer. */
static int open_store(duro__sql_store *st, int concurrency, duro_error *err)
{
    duro__sqlite_provider *p = (duro__sqlite_provider *)st;
    (void)concurrency; /* one writer; readers as the URL's pool= says */
    pthread_mutex_init(&p->write_lock, NULL);
    pthread_mutex_init(&p->group_lock, NULL);
    pthread_mutex_init(&p->urgent_lock, NULL);
    pthread_cond_init(&p->urgent_cond, NULL);
    pthread_mutex_init(&p->checkpoint_lock, NULL);

    int rc = duro__sqlite_check_is_database(p, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_check_wal_files(p, 0, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_conn_open(p, &p->writer, p->cfg.read_only, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_migrate(p, err);
    if (rc == DURO_OK)
        rc = open_readers(p, err);
    if (rc == DURO_OK && attach_notifier(p) != DURO_OK)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK && !p->cfg.memory && !p->cfg.read_only) {
        rc = duro__sqlite_conn_open(p, &p->checkpointer, 0, err);
        if (rc == DURO_OK) {
            p->has_checkpointer = 1;
            rc = duro__sqlite_checkpoint_setup(p, err);
        }
    }
    return rc;
}

int duro__sqlite_open(const char *spec, duro_provider **out, duro_error *err)
{
    return duro__sql_open(&duro__sqlite_dialect, spec, 0, open_store,
                          sqlite_close, out, err);
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
