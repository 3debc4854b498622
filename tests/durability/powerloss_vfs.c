/* powerloss_vfs.c - the power-loss VFS of powerloss_vfs.h. Every file
 * handle forwards to the default VFS's file; handles of database and WAL
 * files also share a `tracked` record per path (a connection pool opens the
 * same file many times) holding the durable image and the pending
 * operations. Writes still reach the real file at once, so SQLite reads
 * back what it wrote; only at the cut are the files replaced by what a power
 * failure could have left. xSync makes the pending operations durable
 * without a real fsync (nothing here survives a real power cut anyway).
 * One mutex guards all state; the cutting thread holds it until _exit. */
#include "powerloss_vfs.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECTOR 512

typedef struct pending_op {
    int truncate; /* 0: a write of data[0..n) at off; 1: to size off */
    sqlite3_int64 off;
    int n;
    unsigned char *data;
    struct pending_op *next;
} pending_op;

typedef struct tracked {
    char *path;
    unsigned char *durable; /* the image as of the last xSync */
    size_t len, cap;
    pending_op *head, *tail; /* since then, in order */
    int deleted;             /* xDelete'd: no longer a file */
    struct tracked *next;
} tracked;

typedef struct pl_file {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's file, right after this struct */
    tracked *t;         /* NULL: not a database or WAL file */
} pl_file;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sqlite3_vfs *real_vfs;
static sqlite3_vfs pl_vfs;
static sqlite3_io_methods pl_methods;
static powerloss_config config;
static tracked *files;
static uint64_t calls;
static int cut; /* the power is off: every call fails */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void die(const char *what)
{
    fprintf(stderr, "powerloss_vfs: %s\n", what);
    _exit(1);
}

/* ---- images -------------------------------------------------------------- */

static void image_reserve(unsigned char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 65536;
    while (c < need)
        c *= 2;
    unsigned char *nb = realloc(*buf, c);
    if (nb == NULL)
        die("out of memory");
    *buf = nb;
    *cap = c;
}

/* Writes bytes [from, to) of the write `op` into the image. */
static void image_write(unsigned char **buf, size_t *len, size_t *cap,
                        const pending_op *op, sqlite3_int64 from,
                        sqlite3_int64 to)
{
    size_t end = (size_t)to;
    image_reserve(buf, cap, end);
    if (*len < (size_t)from)
        memset(*buf + *len, 0, (size_t)from - *len); /* a hole reads zeros */
    memcpy(*buf + from, op->data + (from - op->off), (size_t)(to - from));
    if (end > *len)
        *len = end;
}

static void image_truncate(unsigned char **buf, size_t *len, size_t *cap,
                           sqlite3_int64 size)
{
    image_reserve(buf, cap, (size_t)size);
    if ((size_t)size > *len)
        memset(*buf + *len, 0, (size_t)size - *len);
    *len = (size_t)size;
}

static void apply(unsigned char **buf, size_t *len, size_t *cap,
                  const pending_op *op)
{
    if (op->truncate)
        image_truncate(buf, len, cap, op->off);
    else
        image_write(buf, len, cap, op, op->off, op->off + op->n);
}

static void free_ops(tracked *t)
{
    for (pending_op *op = t->head, *next; op != NULL; op = next) {
        next = op->next;
        free(op->data);
        free(op);
    }
    t->head = t->tail = NULL;
}

static void add_op(tracked *t, int truncate, sqlite3_int64 off, const void *b,
                   int n)
{
    pending_op *op = calloc(1, sizeof(*op));
    if (op == NULL || (n > 0 && (op->data = malloc((size_t)n)) == NULL))
        die("out of memory");
    op->truncate = truncate;
    op->off = off;
    op->n = n;
    if (n > 0)
        memcpy(op->data, b, (size_t)n);
    if (t->tail != NULL)
        t->tail->next = op;
    else
        t->head = op;
    t->tail = op;
}

/* The file as the power failure leaves it: the durable image, then each
 * pending operation in order, kept, dropped, or (writes) torn: each 512-byte
 * sector it touches left as it was (half of them), written, or written with
 * garbage (the bytes a write was putting down when the power failed; SQLite
 * assumes power-safe overwrite, so bytes outside the write stay intact).
 * `loss` is the percentage of operations dropped, and again of those torn. */
static void crash_image(tracked *t, unsigned loss, unsigned char **out,
                        size_t *out_len)
{
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    image_reserve(&buf, &cap, t->len + 1);
    memcpy(buf, t->durable, t->len);
    len = t->len;
    for (pending_op *op = t->head; op != NULL; op = op->next) {
        if (config.keep_pending) {
            apply(&buf, &len, &cap, op);
            continue;
        }
        uint64_t x = rng_next() % 100;
        int drop = x < loss, torn = !drop && x < 2 * loss && !op->truncate;
        if (!drop && !torn) {
            apply(&buf, &len, &cap, op);
        } else if (torn) {
            sqlite3_int64 end = op->off + op->n;
            for (sqlite3_int64 s = op->off - op->off % SECTOR; s < end;
                 s += SECTOR) {
                sqlite3_int64 from = s > op->off ? s : op->off;
                sqlite3_int64 to = s + SECTOR < end ? s + SECTOR : end;
                uint64_t part = rng_next() % 4;
                if (part >= 2) /* written */
                    image_write(&buf, &len, &cap, op, from, to);
                if (part == 3) /* written, then garbled as power failed */
                    for (sqlite3_int64 b = from; b < to; b++)
                        buf[b] = (unsigned char)rng_next();
            }
        }
    }
    *out = buf;
    *out_len = len;
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die("cannot rewrite a file at the cut");
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n <= 0)
            die("cannot rewrite a file at the cut");
        done += (size_t)n;
    }
    close(fd);
}

/* Cuts the power (lock held): rewrites every file, deletes the -shm files
 * of the databases, and ends the process. */
static void cut_power(void)
{
    cut = 1;
    rng_state = config.seed;
    /* How much of what was pending is lost varies from cut to cut: a
     * little (most of it had been written back), a tenth, or a third. */
    static const unsigned losses[] = {2, 10, 33};
    unsigned loss = losses[rng_next() % 3];
    for (tracked *t = files; t != NULL; t = t->next) {
        if (t->deleted)
            continue;
        unsigned char *buf;
        size_t len;
        crash_image(t, loss, &buf, &len);
        write_file(t->path, buf, len);
        free(buf);
        size_t n = strlen(t->path);
        if (n < 4 || strcmp(t->path + n - 4, "-wal") != 0) {
            char shm[4096];
            snprintf(shm, sizeof(shm), "%s-shm", t->path);
            unlink(shm);
        }
    }
    if (config.on_cut != NULL)
        config.on_cut(config.arg, calls);
    _exit(POWERLOSS_CUT_EXIT);
}

/* Counts a write, sync or truncate (lock held); the cut happens here. */
static void count_call(void)
{
    calls++;
    if (config.cut_at != 0 && calls == config.cut_at)
        cut_power();
}

static tracked *find_or_track(const char *path, sqlite3_file *real)
{
    for (tracked *t = files; t != NULL; t = t->next)
        if (!t->deleted && strcmp(t->path, path) == 0)
            return t;
    tracked *t = calloc(1, sizeof(*t));
    if (t == NULL || (t->path = strdup(path)) == NULL)
        die("out of memory");
    /* What the file holds when first opened counts as durable. */
    sqlite3_int64 size = 0;
    if (real->pMethods->xFileSize(real, &size) != SQLITE_OK)
        die("cannot size a file");
    image_reserve(&t->durable, &t->cap, (size_t)size + 1);
    for (sqlite3_int64 off = 0; off < size;) {
        int n = size - off > 65536 ? 65536 : (int)(size - off);
        if (real->pMethods->xRead(real, t->durable + off, n, off) != SQLITE_OK)
            die("cannot read a file");
        off += n;
    }
    t->len = (size_t)size;
    t->next = files;
    files = t;
    return t;
}

/* ---- io methods ---------------------------------------------------------- */

static sqlite3_file *real_of(sqlite3_file *f)
{
    return ((pl_file *)f)->real;
}

static int is_cut(void)
{
    pthread_mutex_lock(&lock);
    int c = cut;
    pthread_mutex_unlock(&lock);
    return c;
}

static int pl_close(sqlite3_file *f)
{
    return real_of(f)->pMethods->xClose(real_of(f));
}

static int pl_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
    if (is_cut())
        return SQLITE_IOERR_READ;
    return real_of(f)->pMethods->xRead(real_of(f), b, n, off);
}

static int pl_write(sqlite3_file *file, const void *b, int n, sqlite3_int64 off)
{
    pl_file *f = (pl_file *)file;
    pthread_mutex_lock(&lock);
    int rc = SQLITE_IOERR_WRITE;
    if (!cut) {
        if (f->t != NULL) {
            count_call();
            add_op(f->t, 0, off, b, n);
        }
        rc = f->real->pMethods->xWrite(f->real, b, n, off);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int pl_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    pl_file *f = (pl_file *)file;
    pthread_mutex_lock(&lock);
    int rc = SQLITE_IOERR_TRUNCATE;
    if (!cut) {
        if (f->t != NULL) {
            count_call();
            add_op(f->t, 1, size, NULL, 0);
        }
        rc = f->real->pMethods->xTruncate(f->real, size);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int pl_sync(sqlite3_file *file, int flags)
{
    pl_file *f = (pl_file *)file;
    pthread_mutex_lock(&lock);
    int rc = SQLITE_IOERR_FSYNC;
    if (!cut) {
        rc = SQLITE_OK;
        if (f->t != NULL) {
            count_call();
            for (pending_op *op = f->t->head; op != NULL; op = op->next)
                apply(&f->t->durable, &f->t->len, &f->t->cap, op);
            free_ops(f->t);
        } else {
            rc = f->real->pMethods->xSync(f->real, flags);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int pl_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    if (is_cut())
        return SQLITE_IOERR_FSTAT;
    return real_of(f)->pMethods->xFileSize(real_of(f), size);
}

static int pl_lock(sqlite3_file *f, int level)
{
    if (is_cut())
        return SQLITE_IOERR_LOCK;
    return real_of(f)->pMethods->xLock(real_of(f), level);
}

static int pl_unlock(sqlite3_file *f, int level)
{
    return real_of(f)->pMethods->xUnlock(real_of(f), level);
}

static int pl_check_reserved(sqlite3_file *f, int *out)
{
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}

static int pl_file_control(sqlite3_file *f, int op, void *arg)
{
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

static int pl_sector_size(sqlite3_file *f)
{
    return real_of(f)->pMethods->xSectorSize(real_of(f));
}

static int pl_device_characteristics(sqlite3_file *f)
{
    return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}

static int pl_shm_map(sqlite3_file *f, int page, int size, int extend,
                      void volatile **out)
{
    if (is_cut())
        return SQLITE_IOERR_SHMMAP;
    return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, out);
}

static int pl_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}

static void pl_shm_barrier(sqlite3_file *f)
{
    real_of(f)->pMethods->xShmBarrier(real_of(f));
}

static int pl_shm_unmap(sqlite3_file *f, int delete_flag)
{
    return real_of(f)->pMethods->xShmUnmap(real_of(f), delete_flag);
}

/* ---- the VFS ------------------------------------------------------------- */

static int pl_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
                   int flags, int *out_flags)
{
    (void)vfs;
    pl_file *f = (pl_file *)file;
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)(f + 1);
    if (is_cut())
        return SQLITE_IOERR;
    int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK || f->real->pMethods == NULL) {
        file->pMethods = NULL;
        return rc;
    }
    if (f->real->pMethods->iVersion < 2) {
        f->real->pMethods->xClose(f->real);
        file->pMethods = NULL;
        return SQLITE_CANTOPEN; /* the wrapper needs shared memory */
    }
    if (name != NULL && (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL))) {
        pthread_mutex_lock(&lock);
        f->t = find_or_track(name, f->real);
        pthread_mutex_unlock(&lock);
    }
    file->pMethods = &pl_methods;
    return SQLITE_OK;
}

static int pl_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    pthread_mutex_lock(&lock);
    int rc = SQLITE_IOERR_DELETE;
    if (!cut) {
        /* A deletion is durable at once (a simplification: SQLite deletes
         * only a WAL that a checkpoint has copied and synced). */
        for (tracked *t = files; t != NULL; t = t->next)
            if (!t->deleted && strcmp(t->path, name) == 0) {
                t->deleted = 1;
                free_ops(t);
            }
        rc = real_vfs->xDelete(real_vfs, name, sync_dir);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int pl_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int pl_full_pathname(sqlite3_vfs *vfs, const char *name, int n,
                            char *out)
{
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static void *pl_dlopen(sqlite3_vfs *vfs, const char *name)
{
    (void)vfs;
    return real_vfs->xDlOpen(real_vfs, name);
}

static void pl_dlerror(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    real_vfs->xDlError(real_vfs, n, out);
}

static void (*pl_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return real_vfs->xDlSym(real_vfs, h, sym);
}

static void pl_dlclose(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    real_vfs->xDlClose(real_vfs, h);
}

static int pl_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, n, out);
}

static int pl_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return real_vfs->xSleep(real_vfs, us);
}

static int pl_current_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int pl_get_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, n, out)
                                   : 0;
}

static int pl_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

int powerloss_vfs_install(const powerloss_config *cfg)
{
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return rc;
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL || real_vfs->iVersion < 2)
        return SQLITE_ERROR;
    config = *cfg;
    /* iVersion 2: no xFetch, so SQLite never maps the file and every read
     * comes through xRead. */
    sqlite3_io_methods m = {
        .iVersion = 2,
        .xClose = pl_close,
        .xRead = pl_read,
        .xWrite = pl_write,
        .xTruncate = pl_truncate,
        .xSync = pl_sync,
        .xFileSize = pl_file_size,
        .xLock = pl_lock,
        .xUnlock = pl_unlock,
        .xCheckReservedLock = pl_check_reserved,
        .xFileControl = pl_file_control,
        .xSectorSize = pl_sector_size,
        .xDeviceCharacteristics = pl_device_characteristics,
        .xShmMap = pl_shm_map,
        .xShmLock = pl_shm_lock,
        .xShmBarrier = pl_shm_barrier,
        .xShmUnmap = pl_shm_unmap,
    };
    pl_methods = m;
    memset(&pl_vfs, 0, sizeof(pl_vfs));
    pl_vfs.iVersion = 2;
    pl_vfs.szOsFile = (int)sizeof(pl_file) + real_vfs->szOsFile;
    pl_vfs.mxPathname = real_vfs->mxPathname;
    pl_vfs.zName = "powerloss";
    pl_vfs.xOpen = pl_open;
    pl_vfs.xDelete = pl_delete;
    pl_vfs.xAccess = pl_access;
    pl_vfs.xFullPathname = pl_full_pathname;
    pl_vfs.xDlOpen = pl_dlopen;
    pl_vfs.xDlError = pl_dlerror;
    pl_vfs.xDlSym = pl_dlsym;
    pl_vfs.xDlClose = pl_dlclose;
    pl_vfs.xRandomness = pl_randomness;
    pl_vfs.xSleep = pl_sleep;
    pl_vfs.xCurrentTime = pl_current_time;
    pl_vfs.xGetLastError = pl_get_last_error;
    pl_vfs.xCurrentTimeInt64 = pl_current_time64;
    return sqlite3_vfs_register(&pl_vfs, 1);
}

uint64_t powerloss_vfs_calls(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = calls;
    pthread_mutex_unlock(&lock);
    return n;
}
