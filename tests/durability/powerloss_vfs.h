/* powerloss_vfs.h - a test-only SQLite VFS that simulates power loss, after
 * SQLite's own crash-test VFS (src/test6.c): it wraps the default VFS,
 * passes every call through, and remembers per database and WAL file the
 * image that is durable (as of the file's last xSync) and the writes and
 * truncates made since. At a chosen call it "cuts the power": each file is
 * rewritten as its durable image plus a random subset of its pending writes
 * (each kept whole, dropped, or torn at 512-byte sector granularity, a torn
 * sector left old, written or garbled; 2, 10 or 33% of them dropped and as
 * many torn, chosen per cut), the -shm file is deleted, and the process
 * _exits. Never linked into libduro.
 * Process-wide; the state sits behind one mutex. */
#ifndef DURO_POWERLOSS_VFS_H
#define DURO_POWERLOSS_VFS_H

#include <stdint.h>

/* The exit status of a process whose power was cut. */
#define POWERLOSS_CUT_EXIT 42

typedef struct powerloss_config {
    /* The cut comes at this write, sync or truncate call on a database or
     * WAL file (1-based, counted across files and threads); 0: never. */
    uint64_t cut_at;
    uint64_t seed; /* fates of the pending writes */
    /* 1: a process crash instead of power loss: every pending write is
     * kept (the OS has them), only what the process held is gone. */
    int keep_pending;
    /* Called at the cut, after the files are rewritten and before _exit;
     * may be NULL. */
    void (*on_cut)(void *arg, uint64_t call);
    void *arg;
} powerloss_config;

/** Registers the VFS as the process default, over the current default.
 * Call once, before any connection opens. @return SQLITE_OK or an error. */
int powerloss_vfs_install(const powerloss_config *cfg);

/** Write, sync and truncate calls counted so far. */
uint64_t powerloss_vfs_calls(void);

#endif
