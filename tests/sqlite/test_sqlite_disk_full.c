/* test_sqlite_disk_full.c - a SQLite store whose disk fills up under a
 * running runtime: on an 8 MiB tmpfs mounted for the test, mostly taken by
 * filler files, a runtime runs instances until the disk is full. Nothing
 * crashes, the error says the disk is full, every instance reported
 * complete is still complete when the store is opened again, and once a
 * filler is deleted the store works again: what was in flight finishes and
 * new work runs. Needs root (mount); exits 77 (skipped) without it or when
 * the mount fails. The mount lives in a mount namespace of this process
 * when one can be made, so it goes with the process even if it is killed;
 * it is unmounted at exit either way. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "rt_util.h"

#define DISK_BYTES (8 * 1024 * 1024)
#define CHECKPOINT_PAGES 256
/* The WAL's bound at CHECKPOINT_PAGES (its journal_size_limit: 2 x 256
 * frames of 2 KiB pages and their headers, docs/sqlite-provider.md). */
#define WAL_LIMIT (32 + 2 * CHECKPOINT_PAGES * (24 + 2048))
/* What the test frees to recover: twice the WAL's bound, the headroom
 * docs/sqlite-provider.md asks for (the checkpoint that was refused copies
 * at most the WAL into the database, then the WAL is written over). */
#define FREED_BYTES (2 * WAL_LIMIT)
#define STORE_ROOM (2 * 1024 * 1024) /* left for the store at the start */
#define MAX_INSTANCES 5000           /* the disk is full long before */
/* Instances started once space is freed: ~0.3 MB of database, well within
 * what is freed; without the WAL's bound (a checkpoint only every 10,000
 * frames) their WAL alone would fill the freed space again. */
#define NEW_AFTER 60
#define WAIT_MS 30000

static char mount_dir[512];
static int mounted;

/* ------------------------------------------------------------------------
 * workload: two activities with 2 KB outputs, so history fills the disk
 * in a few hundred instances */

static int act_pad(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    char buf[2100];
    memset(buf, 'p', 2048);
    snprintf(buf + 2048, sizeof(buf) - 2048, "|%s", in ? in : "");
    return duro_ok(out, buf);
}

static int orch_pad(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Pad", in);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    duro_task *u = duro_call_activity(o, "Pad", in);
    if (duro_await(o, u) != DURO_OK)
        return duro_fail(out, duro_task_error(u));
    return duro_ok(out, duro_sprintf(o, "done %s", in));
}

/* Always has work in flight, so the runtime writes while the disk is
 * full whatever the timing: a 10 ms timer, then a Pad, until "stop". */
static int orch_ticker(duro_orch *o, const char *in, duro_result *out)
{
    for (;;) {
        duro_task *stop = duro_wait_event(o, "stop");
        if (duro_select(o, duro_timer(o, 10), stop) == stop)
            return duro_ok(out, "stopped");
        duro_task *t = duro_call_activity(o, "Pad", in);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
    }
}

static const char *in_dir(const char *name)
{
    static char bufs[4][600];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 600, "%s/%s", mount_dir, name);
    return b;
}

/* Writes a file of `bytes` bytes (tmpfs allocates as it is written); 0 on
 * success. */
static int write_file(const char *path, int64_t bytes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    char block[65536];
    memset(block, 'f', sizeof(block));
    while (bytes > 0) {
        ssize_t n =
            write(fd, block, bytes < 65536 ? (size_t)bytes : sizeof(block));
        if (n <= 0) {
            close(fd);
            return -1;
        }
        bytes -= n;
    }
    return close(fd);
}

static void init_fixture(rt_fixture *f)
{
    rt_init(f, "unused.db");
    static char url[700];
    snprintf(url, sizeof(url), "sqlite:%s?checkpoint_pages=%d",
             in_dir("store.db"), CHECKPOINT_PAGES);
    f->url = url;
    f->opts.log_fn = rt_log_sink;
    f->opts.log_level = DURO_LOG_WARN;
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Pad", NULL, orch_pad, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Ticker", NULL,
                                             orch_ticker, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Pad", act_pad, NULL));
}

static void instance_id(char *buf, size_t size, int i)
{
    snprintf(buf, size, "pad-%04d", i);
}

/* The instance's status, or -1 when it cannot be read. */
static int status_of(duro_client *c, int i, char **output)
{
    char id[32];
    instance_id(id, sizeof(id), i);
    duro_instance_info *info = NULL;
    if (duro_client_get_status(c, id, &info) != DURO_OK)
        return -1;
    int s = info->status;
    if (output != NULL)
        *output = info->output ? strdup(info->output) : NULL;
    duro_free(info);
    return s;
}

static int output_is_right(const char *output, int i)
{
    char want[32];
    snprintf(want, sizeof(want), "done %d", i);
    return output != NULL && strcmp(output, want) == 0;
}

TEST(a_full_disk_loses_nothing_and_the_store_recovers)
{
    rt_log_reset();
    /* most of the disk taken: the part the test frees later, and the
     * rest, which stays */
    struct statvfs vfs;
    CHECK_EQ(write_file(in_dir("filler-freed"), FREED_BYTES), 0);
    CHECK_EQ(statvfs(mount_dir, &vfs), 0);
    int64_t left = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
    CHECK_INT(left, >, STORE_ROOM);
    CHECK_EQ(write_file(in_dir("filler-kept"), left - STORE_ROOM), 0);

    rt_fixture f;
    init_fixture(&f);
    rt_start(&f);
    CHECK_OK(duro_client_start(f.client, "ticker", "Ticker", "t", NULL));

    /* Start instances in rounds of 10 and wait for each round: once the
     * disk is full a start fails, or a round stops completing (its turns
     * cannot commit) and the next start fails. */
    static char completed[MAX_INSTANCES];
    memset(completed, 0, sizeof(completed));
    int started = 0, done = 0, full_rc = DURO_OK;
    char full_message[DURO_ERROR_MESSAGE_MAX] = "";
    while (started < MAX_INSTANCES && full_rc == DURO_OK) {
        int round_end = started + 10;
        for (; started < round_end; started++) {
            char id[32], input[16];
            instance_id(id, sizeof(id), started);
            snprintf(input, sizeof(input), "%d", started);
            int rc = duro_client_start(f.client, id, "Pad", input, NULL);
            if (rc != DURO_OK) {
                full_rc = rc;
                snprintf(full_message, sizeof(full_message), "%s",
                         duro_errmsg());
                break;
            }
        }
        /* the round completes, or makes no progress for 2 s */
        int64_t quiet_since = test_now_ms();
        while (test_now_ms() - quiet_since < 2000) {
            int pending = 0;
            for (int i = done; i < started; i++) {
                if (completed[i])
                    continue;
                char *out = NULL;
                if (status_of(f.client, i, &out) == DURO_STATUS_COMPLETED) {
                    CHECK_MSG(output_is_right(out, i), "%d: %s", i,
                              out ? out : "(null)");
                    completed[i] = 1;
                    quiet_since = test_now_ms();
                } else {
                    pending++;
                }
                free(out);
            }
            if (pending == 0)
                break;
            test_sleep_ms(5);
        }
        while (done < started && completed[done])
            done++;
    }
    int reported = 0;
    for (int i = 0; i < started; i++)
        reported += completed[i];
    fprintf(stderr,
            "  disk full after %d starts, %d reported complete: %s (%s)\n",
            started, reported, duro_errname(full_rc), full_message);
    CHECK_MSG(full_rc == DURO_STORAGE, "starts went on until %d: %s (%s)",
              started, duro_errname(full_rc), full_message);
    CHECK_MSG(strstr(full_message, "database or disk is full") != NULL &&
                  strstr(full_message, "has no room left") != NULL &&
                  strstr(full_message, in_dir("store.db")) != NULL,
              "message: %s", full_message);
    CHECK_INT(reported, >=, 10);

    /* The runtime met the full disk too (its fetches and acks of the
     * instances in flight, the ticker's at least) and says so, and keeps
     * running. */
    WAIT_UNTIL(rt_log_hits("disk is full") > 0, WAIT_MS);
    CHECK_RC(duro_client_start(f.client, "one-more", "Pad", "0", NULL),
             DURO_STORAGE);

    /* Everything stops (the last close's checkpoint cannot grow the
     * database either) and the store is opened again on the full disk:
     * every instance reported complete still is. */
    rt_done(&f);
    init_fixture(&f);
    CHECK_OK(duro_client_create(f.url, &f.client));
    for (int i = 0; i < started; i++) {
        if (!completed[i])
            continue;
        char *out = NULL;
        CHECK_EQ(status_of(f.client, i, &out), DURO_STATUS_COMPLETED);
        CHECK(output_is_right(out, i));
        free(out);
    }

    /* A runtime started on the full disk fails to fetch and waits; room
     * again: without a restart, what was in flight finishes and new work
     * runs. */
    rt_log_reset();
    rt_start(&f);
    WAIT_UNTIL(rt_log_hits("disk is full") > 0, WAIT_MS);
    CHECK_EQ(unlink(in_dir("filler-freed")), 0);
    for (int i = started; i < started + NEW_AFTER; i++) {
        char id[32], input[16];
        instance_id(id, sizeof(id), i);
        snprintf(input, sizeof(input), "%d", i);
        CHECK_OK(duro_client_start(f.client, id, "Pad", input, NULL));
    }
    /* (the start that failed on the full disk left no instance; its id
     * is the first of the new ones) */
    for (int i = 0; i < started + NEW_AFTER; i++) {
        char id[32];
        instance_id(id, sizeof(id), i);
        duro_instance_info *info = rt_wait(&f, id, WAIT_MS);
        if (info == NULL)
            continue;
        CHECK_MSG(info->status == DURO_STATUS_COMPLETED &&
                      output_is_right(info->output, i),
                  "%s: %s, output %s, error %s", id,
                  duro_status_name(info->status),
                  info->output ? info->output : "(null)",
                  info->error ? info->error : "(null)");
        duro_free(info);
    }
    CHECK_OK(duro_client_raise_event(f.client, "ticker", "stop", NULL));
    duro_instance_info *ticker = rt_wait(&f, "ticker", WAIT_MS);
    CHECK(ticker != NULL && ticker->status == DURO_STATUS_COMPLETED);
    CHECK_STR(ticker ? ticker->output : NULL, "stopped");
    duro_free(ticker);
    /* A fetch whose failure was announced is followed by the line that
     * says the store answers again. (Whether a fetch fails at all is
     * timing: one may fit in WAL space already allocated, and only acks
     * meet the full disk; seen under load.) */
    if (rt_log_hits("fetch of orchestration work failed") +
            rt_log_hits("fetch of activity work failed") >
        0)
        CHECK_INT(rt_log_hits_at(DURO_LOG_WARN, "the store answers again"), >=,
                  1);
    rt_done(&f);
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(in_dir("store.db"), &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
}

static void unmount_dir(void)
{
    if (mounted && umount2(mount_dir, MNT_DETACH) != 0)
        fprintf(stderr, "umount %s: %s\n", mount_dir, strerror(errno));
    mounted = 0;
}

int main(int argc, char **argv)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: needs root to mount a small tmpfs\n");
        return 77;
    }
    snprintf(mount_dir, sizeof(mount_dir), "%s", test_path("disk"));
    if (mkdir(mount_dir, 0700) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", mount_dir, strerror(errno));
        return 1;
    }
    /* A mount namespace of our own (before any thread exists): the mount
     * disappears with this process whatever ends it. Without one, the
     * mount is shared and only the exit handler removes it. */
    if (unshare(CLONE_NEWNS) == 0)
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    char options[64];
    snprintf(options, sizeof(options), "size=%d", DISK_BYTES);
    if (mount("tmpfs", mount_dir, "tmpfs", 0, options) != 0) {
        fprintf(stderr, "skipped: cannot mount a tmpfs on %s: %s\n", mount_dir,
                strerror(errno));
        return 77;
    }
    mounted = 1;
    atexit(unmount_dir); /* runs before the test directory is removed */
    static const test_case tests[] = {
        T(a_full_disk_loses_nothing_and_the_store_recovers),
    };
    return test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
