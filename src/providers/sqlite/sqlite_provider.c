/* sqlite_provider.c - opens and closes the SQLite provider (URL, writer and
 * reader connections, schema), fills its methods table, and implements the
 * in-process wake-up (wait_for_work / wake) and the test hooks. Threading
 * model: one writer connection used under write_lock for every write
 * transaction, a pool of read-only connections for pure reads (WAL lets them
 * run beside the writer); any method may be called from any thread. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/providers.h"
#include "providers/sqlite/sqlite_internal.h"
#include "providers/sqlite/sqlite_provider.h"

/* ---- the shared notifier --------------------------------------------------
 * One per database file per process (keyed by device and inode; every
 * :memory: database has its own), reference-counted by the providers that
 * use it, found through a process-wide list. */

typedef struct duro__sqlite_notifier {
    char key[64];    /* "dev:ino", or "" for a private one */
    int refs;        /* under registry_lock */
    uint64_t serial; /* unique, for the thread-local wait state */
    pthread_mutex_t lock;
    pthread_cond_t cond[2];         /* per duro_queue */
    _Atomic uint64_t generation[2]; /* raised after each commit that adds or
                                       releases work, and by wake() */
    struct duro__sqlite_notifier *next;
} notifier;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static notifier *registry;
static _Atomic uint64_t next_serial = 1;

static notifier *notifier_new(const char *key)
{
    notifier *n = duro__calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    snprintf(n->key, sizeof(n->key), "%s", key);
    n->refs = 1;
    n->serial = atomic_fetch_add(&next_serial, 1);
    pthread_mutex_init(&n->lock, NULL);
    duro__cond_init_monotonic(&n->cond[0]);
    duro__cond_init_monotonic(&n->cond[1]);
    return n;
}

/* The notifier for this provider's database file. */
static notifier *notifier_attach(duro__sqlite_provider *p)
{
    char key[64] = "";
    const char *file = sqlite3_db_filename(p->writer.db, "main");
    struct stat st;
    if (file != NULL && file[0] != '\0' && stat(file, &st) == 0)
        snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    if (key[0] == '\0')
        return notifier_new("");
    pthread_mutex_lock(&registry_lock);
    notifier *n = registry;
    while (n != NULL && strcmp(n->key, key) != 0)
        n = n->next;
    if (n != NULL) {
        n->refs++;
    } else if ((n = notifier_new(key)) != NULL) {
        n->next = registry;
        registry = n;
    }
    pthread_mutex_unlock(&registry_lock);
    return n;
}

static void notifier_detach(notifier *n)
{
    if (n == NULL)
        return;
    pthread_mutex_lock(&registry_lock);
    int last = --n->refs == 0;
    if (last && n->key[0] != '\0') {
        notifier **pp = &registry;
        while (*pp != NULL && *pp != n)
            pp = &(*pp)->next;
        if (*pp == n)
            *pp = n->next;
    }
    pthread_mutex_unlock(&registry_lock);
    if (!last)
        return;
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cond[0]);
    pthread_cond_destroy(&n->cond[1]);
    duro__free(n);
}

/* The wake generation each thread saw at its last fetch per queue, so a wait
 * after an empty fetch returns at once when work was committed in between.
 */
static _Thread_local struct {
    uint64_t serial; /* notifier the values belong to */
    uint64_t generation[2];
    int valid[2];
} fetch_seen;

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

void duro__sqlite_note_fetch(duro__sqlite_provider *p, duro_queue queue)
{
    notifier *n = p->notifier;
    if (n == NULL)
        return;
    if (fetch_seen.serial != n->serial) {
        fetch_seen.serial = n->serial;
        fetch_seen.valid[0] = fetch_seen.valid[1] = 0;
    }
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    fetch_seen.valid[queue] = 1;
}

void duro__sqlite_signal(duro__sqlite_provider *p, duro_queue queue,
                         size_t items)
{
    notifier *n = p->notifier;
    if (n == NULL || items == 0)
        return;
    pthread_mutex_lock(&n->lock);
    atomic_fetch_add(&n->generation[queue], 1);
    if (items == 1)
        pthread_cond_signal(&n->cond[queue]);
    else
        pthread_cond_broadcast(&n->cond[queue]);
    pthread_mutex_unlock(&n->lock);
}

static int sqlite_wait_for_work(duro_provider *base, duro_queue queue,
                                int64_t max_wait_ms, duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown queue %d",
                              (int)queue);
    duro__sqlite_provider *p = sqlite_of(base);
    notifier *n = p->notifier;

    /* Baseline: what this thread's last fetch saw, else the current
     * generation. Any commit after it ends the wait. */
    pthread_mutex_lock(&n->lock);
    uint64_t now_generation = atomic_load(&n->generation[queue]);
    uint64_t seen = now_generation;
    if (fetch_seen.serial == n->serial && fetch_seen.valid[queue])
        seen = fetch_seen.generation[queue];
    int done = atomic_load(&p->wake_sticky) || seen != now_generation ||
               max_wait_ms <= 0;
    pthread_mutex_unlock(&n->lock);

    int64_t wait_ms = max_wait_ms;
    if (!done) {
        /* Wait no longer than until the earliest delayed item (or expiring
         * lock) on the queue becomes due. */
        int64_t due;
        int rc = duro__sqlite_next_due(p, queue, &due, err);
        if (rc != DURO_OK)
            return rc;
        if (due != INT64_MAX) {
            int64_t until_due = due - duro__wall_ms();
            if (until_due <= 0)
                done = 1;
            else if (until_due < wait_ms)
                wait_ms = until_due;
        }
    }

    pthread_mutex_lock(&n->lock);
    if (!done) {
        struct timespec deadline;
        duro__deadline_ts(&deadline, wait_ms);
        while (!atomic_load(&p->wake_sticky) &&
               atomic_load(&n->generation[queue]) == seen) {
            if (pthread_cond_timedwait(&n->cond[queue], &n->lock, &deadline) ==
                ETIMEDOUT)
                break;
        }
    }
    /* The next wait needs a newer commit than the ones seen now. */
    fetch_seen.serial = n->serial;
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    fetch_seen.valid[queue] = 1;
    pthread_mutex_unlock(&n->lock);
    return DURO_OK;
}

static void sqlite_wake(duro_provider *base, int sticky)
{
    duro__sqlite_provider *p = sqlite_of(base);
    notifier *n = p->notifier;
    atomic_store(&p->wake_sticky, sticky != 0);
    /* Other providers on the same file see a spurious return, which the
     * contract allows. */
    pthread_mutex_lock(&n->lock);
    for (int q = 0; q < 2; q++) {
        atomic_fetch_add(&n->generation[q], 1);
        pthread_cond_broadcast(&n->cond[q]);
    }
    pthread_mutex_unlock(&n->lock);
}

/* ---- who may create the -wal and -shm files ------------------------------
 * In WAL mode SQLite keeps two files beside the database, PATH-wal and
 * PATH-shm. A connection that finds them missing creates them (os_unix.c:
 * with the database file's permission bits, owned by the calling process;
 * only a process running as root gives them to the database's owner), even
 * a connection that only reads, and a read-only connection cannot remove
 * them at its close. So another user's process that merely reads a store
 * while its application is stopped leaves files its owner cannot write,
 * and the application then fails "attempt to write a readonly database"
 * until someone deletes them. That is refused here, before SQLite creates
 * anything. */

/* Reads up to `size` bytes from the start of the file at path into
 * header (zero-filled past what it holds); 0 when it cannot be read. Read
 * through SQLite's VFS, not open(2) and close(2): closing any descriptor
 * of a file drops every POSIX lock this process holds on it, those of
 * other connections to it included; SQLite's own close defers that. */
static int read_header(const char *path, unsigned char *header, int size)
{
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    if (vfs == NULL)
        return 0;
    /* xOpen takes a name from xFullPathname, followed by two NULs (where
     * SQLite keeps URI parameters) */
    size_t name_size = (size_t)vfs->mxPathname + 2;
    char *name = duro__calloc(1, name_size);
    sqlite3_file *f = duro__calloc(1, (size_t)vfs->szOsFile);
    int out = 0, ok = 0;
    if (name != NULL && f != NULL &&
        vfs->xFullPathname(vfs, path, vfs->mxPathname, name) == SQLITE_OK &&
        vfs->xOpen(vfs, name, f, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY,
                   &out) == SQLITE_OK) {
        int rc = f->pMethods->xRead(f, header, size, 0);
        ok = rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ;
    }
    if (f != NULL && f->pMethods != NULL)
        f->pMethods->xClose(f);
    duro__free(f);
    duro__free(name);
    return ok;
}

/* Whether the file's header says WAL (read and write versions 2). */
static int file_is_wal(const char *path)
{
    unsigned char header[20];
    return read_header(path, header, (int)sizeof(header)) && header[18] == 2 &&
           header[19] == 2;
}

int duro__sqlite_check_is_database(duro__sqlite_provider *p, duro_error *err)
{
    struct stat st;
    if (p->cfg.memory || stat(p->cfg.path, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size == 0)
        return DURO_OK; /* missing or empty: a new store */
    static const char magic[16] = "SQLite format 3";
    unsigned char header[16];
    if (read_header(p->cfg.path, header, (int)sizeof(header)) &&
        memcmp(header, magic, sizeof(magic)) == 0)
        return DURO_OK;
    /* SQLite itself would take a file shorter than its header for an
     * empty database and write over it. */
    return duro_error_set(err, DURO_SCHEMA, 0,
                          "database file %s is not a SQLite database (it does "
                          "not begin with \"SQLite format 3\"); nothing in "
                          "it was changed",
                          p->cfg.path);
}

/* Whether user `uid` is a member of group `gid`. */
static int user_in_group(uid_t uid, gid_t gid)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) != 0 || found == NULL)
        return 0;
    if (pw.pw_gid == gid)
        return 1;
    gid_t groups[256];
    int n = (int)DURO__ARRAY_LEN(groups);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
        return 0; /* more groups than we look at: assume not */
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

/* A user's name, or "uid N" without one, for messages. */
static void user_name(uid_t uid, char *out, size_t size)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != NULL)
        snprintf(out, size, "%s", pw.pw_name);
    else
        snprintf(out, size, "uid %u", (unsigned)uid);
}

int duro__sqlite_check_wal_files(duro__sqlite_provider *p, int opened,
                                 duro_error *err)
{
    const char *path = p->cfg.path;
    struct stat db, dir;
    if (p->cfg.memory || stat(path, &db) != 0 || !S_ISREG(db.st_mode))
        return DURO_OK; /* a missing file is created by us, or not found */
    /* Reading a file in rollback mode creates no -wal or -shm, so a file
     * in WAL mode is checked before the open, and one in rollback mode
     * (new, empty) only before the writer switches it to WAL. */
    if (file_is_wal(path) == opened)
        return DURO_OK;
    char *wal = duro__sprintf("%s-wal", path);
    char *shm = duro__sprintf("%s-shm", path);
    char *dir_path = duro__strdup(path);
    int rc = DURO_OK;
    if (wal == NULL || shm == NULL || dir_path == NULL) {
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        goto done;
    }
    const char *missing = access(shm, F_OK) != 0   ? "-shm"
                          : access(wal, F_OK) != 0 ? "-wal"
                                                   : NULL;
    if (missing == NULL)
        goto done; /* opened as they are: nothing is created */
    char *slash = strrchr(dir_path, '/');
    if (slash == NULL)
        snprintf(dir_path, strlen(dir_path) + 1, ".");
    else if (slash == dir_path)
        dir_path[1] = '\0';
    else
        *slash = '\0';
    uid_t me = geteuid();
    char me_name[160], owner_name[160];
    if (faccessat(AT_FDCWD, dir_path, W_OK, AT_EACCESS) != 0) {
        user_name(me, me_name, sizeof(me_name));
        /* Messages hold 512 bytes: the path once, the rest short. */
        rc = duro_error_set(
            err, DURO_STORAGE, 0,
            "sqlite open %s: its %s file does not exist and its directory is "
            "not writable by %s, so SQLite cannot create the -wal and -shm "
            "files a WAL database needs, even to read it (open it while its "
            "application has it open, or as a user who can write the "
            "directory)",
            path, missing, me_name);
        goto done;
    }
    if (me == 0 || me == db.st_uid || db.st_uid == 0)
        goto done; /* ours, given to the owner (we are root), or the
                      owner is root, who writes whatever it owns */
    /* The new files get the database's mode, this process's user and its
     * group (the directory's, if the directory is set-group-ID). */
    gid_t group = getegid();
    if (stat(dir_path, &dir) == 0 && (dir.st_mode & S_ISGID))
        group = dir.st_gid;
    if ((db.st_mode & S_IWOTH) ||
        ((db.st_mode & S_IWGRP) && user_in_group(db.st_uid, group)))
        goto done; /* the owner can write them: a shared group */
    /* Names only for the messages: a lookup may be slow (NSS). */
    user_name(me, me_name, sizeof(me_name));
    user_name(db.st_uid, owner_name, sizeof(owner_name));
    rc = duro_error_set(
        err, DURO_STORAGE, 0,
        "sqlite open %s: refused: the file belongs to %s and its %s file "
        "does not exist, so opening it as %s would create -wal and -shm "
        "files owned by %s (mode %04o) that %s cannot write, and its "
        "application would then fail \"attempt to write a readonly "
        "database\". Run this as %s, or while the application has the store "
        "open, or give both users a group with write access to the file "
        "and its directory",
        path, owner_name, missing, me_name, me_name,
        (unsigned)(db.st_mode & 0777), owner_name, owner_name);
done:
    duro__free(wal);
    duro__free(shm);
    duro__free(dir_path);
    return rc;
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
    pthread_mutex_destroy(&p->urgent_lock);
    pthread_cond_destroy(&p->urgent_cond);
    pthread_mutex_destroy(&p->pool_lock);
    pthread_cond_destroy(&p->pool_cond);
    notifier_detach(p->notifier);
    pthread_mutex_destroy(&p->checkpoint_lock);
    duro__sqlite_config_free(&p->cfg);
    duro__free(p);
}

static void fill_methods(duro_provider *m)
{
    m->version = DURO_PROVIDER_VERSION;
    m->name = "sqlite";
    m->close = sqlite_close;
    m->fetch_orchestration_item = duro__sql_fetch_orchestration_item;
    m->ack_orchestration_item = duro__sql_ack_orchestration_item;
    m->abandon_orchestration_item = duro__sql_abandon_orchestration_item;
    m->renew_orchestration_item_lock = duro__sql_renew_orchestration_item_lock;
    m->enqueue_for_orchestrator = duro__sql_enqueue_for_orchestrator;
    m->fetch_work_item = duro__sql_fetch_work_item;
    m->renew_work_item_lock = duro__sql_renew_work_item_lock;
    m->ack_work_item = duro__sql_ack_work_item;
    m->ack_and_fetch_orchestration_item =
        duro__sql_ack_and_fetch_orchestration_item;
    m->ack_and_fetch_orchestration_items =
        duro__sql_ack_and_fetch_orchestration_items;
    m->ack_and_fetch_work_item = duro__sql_ack_and_fetch_work_item;
    m->read_activity_cancel_reason = duro__sqlite_read_activity_cancel_reason;
    m->abandon_work_item = duro__sql_abandon_work_item;
    m->read_history = duro__sqlite_read_history;
    m->latest_execution_id = duro__sqlite_latest_execution_id;
    m->get_instance = duro__sqlite_get_instance;
    m->list_instances = duro__sqlite_list_instances;
    m->count_messages = duro__sqlite_count_messages;
    m->delete_instance = duro__sqlite_delete_instance;
    m->prune_executions = duro__sqlite_prune_executions;
    m->wait_for_work = sqlite_wait_for_work;
    m->wake = sqlite_wake;
    m->set_instance_problem = duro__sqlite_set_instance_problem;
    m->cancel_instances = duro__sqlite_cancel_instances;
    m->cancel_matching = duro__sqlite_cancel_matching;
    m->purge_instances = duro__sqlite_purge_instances;
    m->read_store_stats = duro__sql_read_store_stats;
    m->check_work_item_locks = duro__sql_check_work_item_locks;
    m->control_instances = duro__sqlite_control_instances;
    m->control_matching = duro__sqlite_control_matching;
    m->query_instances = duro__sqlite_query_instances;
    m->list_control_events = duro__sqlite_list_control_events;
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
    DURO__SQLITE_ERR_INIT(err, local);
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
    if (rc == DURO_OK && (p->notifier = notifier_attach(p)) == NULL)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK && !p->cfg.memory && !p->cfg.read_only) {
        rc = duro__sqlite_conn_open(p, &p->checkpointer, 0, err);
        if (rc == DURO_OK) {
            p->has_checkpointer = 1;
            rc = duro__sqlite_checkpoint_setup(p, err);
        }
    }
    if (rc != DURO_OK) {
        sqlite_close(&p->sql.base);
        return rc;
    }
    *out = &p->sql.base;
    return DURO_OK;
}

/* ---- test hooks ------------------------------------------------------------
 */

static duro__sqlite_provider *hook_target(duro_provider *p)
{
    if (p == NULL || p->name == NULL || strcmp(p->name, "sqlite") != 0 ||
        p->close != sqlite_close)
        return NULL;
    return sqlite_of(p);
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
    duro__sqlite_provider *p = hook_target(base);
    return p != NULL ? atomic_load(&p->statements_prepared) : 0;
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
    duro__sqlite_provider *p = hook_target(base);
    if (p == NULL)
        return;
    atomic_store(&p->fault_retryable, retryable != 0);
    atomic_store(&p->fault_at,
                 nth_step == 0 ? 0 : atomic_load(&p->steps) + nth_step);
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
    user_name(geteuid(), me, sizeof(me));
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < DURO__ARRAY_LEN(suffixes); i++) {
        struct stat st;
        snprintf(file, sizeof(file), "%s%s", path, suffixes[i]);
        if (stat(file, &st) != 0 ||
            faccessat(AT_FDCWD, file, W_OK, AT_EACCESS) == 0)
            continue;
        user_name(st.st_uid, owner, sizeof(owner));
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
