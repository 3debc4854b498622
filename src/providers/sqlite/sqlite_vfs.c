/* sqlite_vfs.c - a thin VFS over SQLite's default one that coalesces the
 * writes a commit makes to the WAL file. SQLite writes every WAL frame as two
 * calls, a 24-byte header and the page, so a commit of eight pages costs
 * sixteen system calls; here contiguous writes to a WAL file collect in a
 * buffer that goes out in one write when the commit frame's page arrives.
 *
 * Durability is unchanged: the commit frame is written (to the OS) before
 * xWrite returns to SQLite, so before SQLite publishes the commit in the
 * WAL-index and before COMMIT returns. Frames of a transaction that has not
 * committed yet (a cache spill) may wait in the buffer; SQLite never relies
 * on them being in the file before the commit. Every other access to the
 * WAL file (read, sync, truncate, size, file control, close) first writes
 * out what is buffered. Database files and journals pass straight through.
 *
 * A WAL file handle belongs to one connection, used by one thread at a time,
 * so the buffer needs no lock. */
#include <string.h>

#include "providers/sqlite/sqlite_internal.h"

#define WAL_FRAME_HEADER 24    /* SQLite's WAL_FRAME_HDRSIZE */
#define FLUSH_AT (1024 * 1024) /* write out past this many buffered bytes */

typedef struct vfs_file {
    sqlite3_file base;  /* methods: pass_methods or wal_methods */
    sqlite3_file *real; /* the default VFS's file, right after this struct */
    unsigned char *buf; /* WAL files: pending contiguous bytes */
    size_t len, cap;
    sqlite3_int64 off; /* file offset of buf[0] */
    int commit_frame;  /* the last header written was a commit frame's */
} vfs_file;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs duro_vfs;
static sqlite3_io_methods pass_methods, wal_methods;

static sqlite3_file *real_of(sqlite3_file *f)
{
    return ((vfs_file *)f)->real;
}

/* The default VFS writes at most 128 KiB - 1 per call (it never expects
 * more than a page), so the buffer goes out in chunks of 64 KiB. */
#define WRITE_CHUNK (64 * 1024)

static int flush(vfs_file *f)
{
    int rc = SQLITE_OK;
    for (size_t done = 0; done < f->len && rc == SQLITE_OK;) {
        size_t n = DURO__MIN(f->len - done, (size_t)WRITE_CHUNK);
        rc = f->real->pMethods->xWrite(f->real, f->buf + done, (int)n,
                                       f->off + (sqlite3_int64)done);
        done += n;
    }
    f->len = 0;
    return rc;
}

/* ---- pass-through methods --------------------------------------------- */

static int p_close(sqlite3_file *f)
{
    vfs_file *v = (vfs_file *)f;
    int rc = flush(v);
    int rc2 = v->real->pMethods->xClose(v->real);
    sqlite3_free(v->buf);
    v->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int p_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    return real_of(f)->pMethods->xRead(real_of(f), b, n, off);
}

static int p_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
    return real_of(f)->pMethods->xWrite(real_of(f), b, n, off);
}

static int p_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return real_of(f)->pMethods->xTruncate(real_of(f), size);
}

static int p_sync(sqlite3_file *f, int flags)
{
    return real_of(f)->pMethods->xSync(real_of(f), flags);
}

static int p_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return real_of(f)->pMethods->xFileSize(real_of(f), size);
}

static int p_lock(sqlite3_file *f, int level)
{
    return real_of(f)->pMethods->xLock(real_of(f), level);
}

static int p_unlock(sqlite3_file *f, int level)
{
    return real_of(f)->pMethods->xUnlock(real_of(f), level);
}

static int p_check_reserved(sqlite3_file *f, int *out)
{
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}

static int p_file_control(sqlite3_file *f, int op, void *arg)
{
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

static int p_sector_size(sqlite3_file *f)
{
    return real_of(f)->pMethods->xSectorSize(real_of(f));
}

static int p_device_characteristics(sqlite3_file *f)
{
    return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}

/* The methods below exist from io-methods version 2 (shared memory) and 3
 * (memory mapping). Our tables are version 3 and never change after
 * registration; a real file with an older table answers as SQLite's own
 * code does when those methods are missing. */
static int real_version(sqlite3_file *f)
{
    return real_of(f)->pMethods->iVersion;
}

static int p_shm_map(sqlite3_file *f, int page, int size, int extend,
                     void volatile **out)
{
    if (real_version(f) < 2)
        return SQLITE_IOERR_SHMMAP;
    return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, out);
}

static int p_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    if (real_version(f) < 2)
        return SQLITE_IOERR_SHMLOCK;
    return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}

static void p_shm_barrier(sqlite3_file *f)
{
    if (real_version(f) >= 2)
        real_of(f)->pMethods->xShmBarrier(real_of(f));
}

static int p_shm_unmap(sqlite3_file *f, int delete_flag)
{
    if (real_version(f) < 2)
        return SQLITE_OK;
    return real_of(f)->pMethods->xShmUnmap(real_of(f), delete_flag);
}

static int p_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out)
{
    if (real_version(f) < 3) {
        *out = NULL; /* no mapping: SQLite reads instead */
        return SQLITE_OK;
    }
    return real_of(f)->pMethods->xFetch(real_of(f), off, n, out);
}

static int p_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    if (real_version(f) < 3)
        return SQLITE_OK;
    return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

/* ---- WAL methods: buffer contiguous writes, flush before anything else -- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

static int w_write(sqlite3_file *file, const void *b, int n, sqlite3_int64 off)
{
    vfs_file *f = (vfs_file *)file;
    int rc;
    if (f->len > 0 && off != f->off + (sqlite3_int64)f->len &&
        (rc = flush(f)) != SQLITE_OK)
        return rc;
    if (f->len == 0)
        f->off = off;
    if (f->len + (size_t)n > f->cap) {
        size_t cap = f->cap ? f->cap : 64 * 1024;
        while (cap < f->len + (size_t)n)
            cap *= 2;
        unsigned char *nb = sqlite3_realloc64(f->buf, cap);
        if (nb == NULL) {
            /* Cannot buffer: write what we have and this one directly. */
            if ((rc = flush(f)) != SQLITE_OK)
                return rc;
            return f->real->pMethods->xWrite(f->real, b, n, off);
        }
        f->buf = nb;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, b, (size_t)n);
    f->len += (size_t)n;
    if (n == WAL_FRAME_HEADER) {
        /* A frame header: bytes 4..7 are the database size after commit,
         * non-zero only in a transaction's commit frame. */
        f->commit_frame = be32((const unsigned char *)b + 4) != 0;
        return SQLITE_OK;
    }
    if (f->commit_frame || f->len >= FLUSH_AT) {
        /* The commit frame is complete: out before SQLite publishes it. */
        f->commit_frame = 0;
        return flush(f);
    }
    return SQLITE_OK;
}

static int w_read(sqlite3_file *file, void *b, int n, sqlite3_int64 off)
{
    vfs_file *f = (vfs_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : p_read(file, b, n, off);
}

static int w_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    vfs_file *f = (vfs_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : p_truncate(file, size);
}

static int w_sync(sqlite3_file *file, int flags)
{
    vfs_file *f = (vfs_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : p_sync(file, flags);
}

static int w_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    vfs_file *f = (vfs_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : p_file_size(file, size);
}

static int w_file_control(sqlite3_file *file, int op, void *arg)
{
    vfs_file *f = (vfs_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : p_file_control(file, op, arg);
}

/* ---- the VFS ------------------------------------------------------------ */

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
                  int flags, int *out_flags)
{
    (void)vfs;
    vfs_file *f = (vfs_file *)file;
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)(f + 1);
    int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK || f->real->pMethods == NULL) {
        file->pMethods = NULL;
        return rc;
    }
    file->pMethods = (flags & SQLITE_OPEN_WAL) ? &wal_methods : &pass_methods;
    return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static void *v_dlopen(sqlite3_vfs *vfs, const char *name)
{
    (void)vfs;
    return real_vfs->xDlOpen(real_vfs, name);
}

static void v_dlerror(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    real_vfs->xDlError(real_vfs, n, out);
}

static void (*v_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return real_vfs->xDlSym(real_vfs, h, sym);
}

static void v_dlclose(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    real_vfs->xDlClose(real_vfs, h);
}

static int v_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return real_vfs->xSleep(real_vfs, us);
}

static int v_current_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int v_get_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, n, out)
                                   : 0;
}

static int v_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int register_rc = SQLITE_ERROR;

static void register_vfs(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL || real_vfs->iVersion < 2)
        return;
    sqlite3_io_methods base = {
        .iVersion = 3,
        .xClose = p_close,
        .xRead = p_read,
        .xWrite = p_write,
        .xTruncate = p_truncate,
        .xSync = p_sync,
        .xFileSize = p_file_size,
        .xLock = p_lock,
        .xUnlock = p_unlock,
        .xCheckReservedLock = p_check_reserved,
        .xFileControl = p_file_control,
        .xSectorSize = p_sector_size,
        .xDeviceCharacteristics = p_device_characteristics,
        .xShmMap = p_shm_map,
        .xShmLock = p_shm_lock,
        .xShmBarrier = p_shm_barrier,
        .xShmUnmap = p_shm_unmap,
        .xFetch = p_fetch,
        .xUnfetch = p_unfetch,
    };
    pass_methods = base;
    wal_methods = base;
    wal_methods.xWrite = w_write;
    wal_methods.xRead = w_read;
    wal_methods.xTruncate = w_truncate;
    wal_methods.xSync = w_sync;
    wal_methods.xFileSize = w_file_size;
    wal_methods.xFileControl = w_file_control;
    memset(&duro_vfs, 0, sizeof(duro_vfs));
    duro_vfs.iVersion = 2;
    duro_vfs.szOsFile = (int)sizeof(vfs_file) + real_vfs->szOsFile;
    duro_vfs.mxPathname = real_vfs->mxPathname;
    duro_vfs.zName = DURO__SQLITE_VFS;
    duro_vfs.xOpen = v_open;
    duro_vfs.xDelete = v_delete;
    duro_vfs.xAccess = v_access;
    duro_vfs.xFullPathname = v_full_pathname;
    duro_vfs.xDlOpen = v_dlopen;
    duro_vfs.xDlError = v_dlerror;
    duro_vfs.xDlSym = v_dlsym;
    duro_vfs.xDlClose = v_dlclose;
    duro_vfs.xRandomness = v_randomness;
    duro_vfs.xSleep = v_sleep;
    duro_vfs.xCurrentTime = v_current_time;
    duro_vfs.xGetLastError = v_get_last_error;
    duro_vfs.xCurrentTimeInt64 = v_current_time64;
    register_rc = sqlite3_vfs_register(&duro_vfs, 0);
}

const char *duro__sqlite_vfs(void)
{
    pthread_once(&once, register_vfs);
    return register_rc == SQLITE_OK ? DURO__SQLITE_VFS : NULL;
}
