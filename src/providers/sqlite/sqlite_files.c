/* sqlite_files.c - the checks of a SQLite store's files before SQLite
 * opens or changes them: that the file is a SQLite database at all, and
 * that the -wal and -shm files SQLite would create can be created and
 * written by the file's owner. Touch nothing; any thread. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "providers/sqlite/sqlite_internal.h"

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
void duro__sqlite_user_name(uid_t uid, char *out, size_t size)
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
        duro__sqlite_user_name(me, me_name, sizeof(me_name));
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
    duro__sqlite_user_name(me, me_name, sizeof(me_name));
    duro__sqlite_user_name(db.st_uid, owner_name, sizeof(owner_name));
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
