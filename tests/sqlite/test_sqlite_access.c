/* test_sqlite_access.c - a SQLite store opened by users other than its
 * owner, with real files and real users: a reader never leaves -wal and
 * -shm files its owner cannot write, a directory it cannot write is named
 * as the reason, mode=ro reads while the owner has the store open, a
 * shared group works, and a runtime on a store it cannot write fails at
 * create. Each user's part runs in a child process that switched user;
 * needs root and the users nobody and daemon, and exits 77 (skipped)
 * without them. */
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "duro/provider.h"
#include "test.h"

typedef struct user {
    const char *name;
    uid_t uid;
    gid_t gid;
} user;

static user owner = {"daemon", 0, 0};
static user reader = {"nobody", 0, 0};
static char dir[512]; /* this test's directory */
static char db[600];  /* dir/app.db */

/* In a child: report and return 1 unless cond. */
#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "  FAIL %s:%d (as %s): ", __FILE__, __LINE__,      \
                    getpwuid(geteuid())->pw_name);                             \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* Runs fn(arg) in a child process as user u; its exit status (0: passed). */
static int as_user(const user *u, int (*fn)(const char *), const char *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (initgroups(u->name, u->gid) != 0 || setgid(u->gid) != 0 ||
            setuid(u->uid) != 0) {
            perror("switching user");
            _exit(2);
        }
        _exit(fn(arg));
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define AS(u, fn, arg) CHECK_EQ(as_user(&(u), fn, arg), 0)

static int exists(const char *suffix)
{
    char path[700];
    snprintf(path, sizeof(path), "%s%s", db, suffix);
    return access(path, F_OK) == 0;
}

static uid_t owner_of(const char *suffix)
{
    char path[700];
    struct stat st;
    snprintf(path, sizeof(path), "%s%s", db, suffix);
    return stat(path, &st) == 0 ? st.st_uid : (uid_t)-1;
}

/* A fresh directory with mode `mode`, owned by the store's owner. */
static void new_dir(const char *name, mode_t mode, gid_t group)
{
    snprintf(dir, sizeof(dir), "%s/%s", test_tmpdir(), name);
    snprintf(db, sizeof(db), "%s/app.db", dir);
    CHECK_EQ(mkdir(dir, 0700), 0);
    CHECK_EQ(chown(dir, owner.uid, group), 0);
    CHECK_EQ(chmod(dir, mode), 0);
}

static const char *url(const char *query)
{
    static char buf[2][sizeof("sqlite:") + sizeof(db) + 200];
    static int next;
    char *b = buf[next++ % 2];
    snprintf(b, sizeof(buf[0]), "sqlite:%s%s", db, query);
    return b;
}

/* Opens url(query) and starts instance `id` (a write). */
static int write_one(const char *id)
{
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url(""), &p, &e);
    EXPECT(rc == DURO_OK, "open: %s (%s)", duro_errname(rc), e.message);
    duro_work_item it = {
        .kind = DURO_WORK_START, .instance_id = id, .name = "orch"};
    rc = p->enqueue_for_orchestrator(p, &it, 0, &e);
    duro_provider_close(p);
    EXPECT(rc == DURO_OK, "write %s: %s (%s)", id, duro_errname(rc), e.message);
    return 0;
}

/* Splits spec "QUERY|REST": QUERY into query[size]; returns REST. */
static const char *split_spec(const char *spec, char *query, size_t size)
{
    const char *bar = strchr(spec, '|');
    snprintf(query, size, "%.*s", (int)(bar - spec), spec);
    return bar + 1;
}

/* Opens url(query) and expects DURO_STORAGE with `expect` in the message
 * (query and expect separated by '|'). */
static int open_refused(const char *spec)
{
    char query[200];
    const char *expect = split_spec(spec, query, sizeof(query));
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url(query), &p, &e);
    EXPECT(rc == DURO_STORAGE, "%s: got %s (%s)", query, duro_errname(rc),
           e.message);
    EXPECT(strstr(e.message, expect) != NULL, "'%s' lacks '%s'", e.message,
           expect);
    EXPECT(strstr(e.message, db) != NULL, "'%s' lacks the path", e.message);
    EXPECT(strstr(e.message, "attempt to write a readonly database (") == NULL,
           "SQLite's message: '%s'", e.message);
    return 0;
}

/* Reads instance `id` through url(query), and finds a write refused when
 * the query says mode=ro. */
static int read_one(const char *spec)
{
    char query[200];
    const char *id = split_spec(spec, query, sizeof(query));
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url(query), &p, &e);
    EXPECT(rc == DURO_OK, "open %s: %s (%s)", query, duro_errname(rc),
           e.message);
    duro_instance_list *l = NULL;
    rc = p->get_instance(p, id, &l, &e);
    int found = rc == DURO_OK && l != NULL && l->count == 1;
    duro_instance_list_free(l);
    if (strstr(query, "mode=ro") != NULL) {
        duro_work_item it = {
            .kind = DURO_WORK_START, .instance_id = "no", .name = "orch"};
        rc = p->enqueue_for_orchestrator(p, &it, 0, &e);
        EXPECT(rc == DURO_STORAGE && strstr(e.message, "mode=ro") != NULL,
               "write under mode=ro: %s (%s)", duro_errname(rc), e.message);
    }
    duro_provider_close(p);
    EXPECT(found, "instance %s not read", id);
    return 0;
}

/* The owner's store, its application stopped: the last close removed -wal
 * and -shm. */
static void owners_store(void)
{
    AS(owner, write_one, "a");
    CHECK(exists("") && !exists("-wal") && !exists("-shm"));
}

/* Another user reading while -wal and -shm are missing would create them
 * as its own, mode 0644, and the owner could no longer write: refused
 * before SQLite creates anything, read-only or not; the owner writes
 * afterwards. (It used to open, leave the files, and the owner's next
 * write failed "attempt to write a readonly database".) */
TEST(another_user_is_refused_before_sqlite_creates_files)
{
    new_dir("refused", 0777, owner.gid);
    owners_store();
    AS(reader, open_refused, "?mode=ro|refused: the file belongs to daemon");
    AS(reader, open_refused, "?create=0|would create -wal and -shm");
    AS(reader, open_refused, "|Run this as daemon");
    CHECK(!exists("-wal") && !exists("-shm"));
    AS(owner, write_one, "b");
}

/* A directory the reader cannot write, -shm missing: the message says so,
 * not SQLite's "attempt to write a readonly database" (code 1544). */
TEST(a_directory_the_reader_cannot_write_is_named)
{
    new_dir("ro-dir", 0755, owner.gid);
    owners_store();
    AS(reader, open_refused, "?mode=ro|directory is not writable by nobody");
    CHECK(!exists("-wal") && !exists("-shm"));
    AS(owner, write_one, "b");
}

/* While the owner has the store open, -wal and -shm exist: another user
 * reads with mode=ro (even in a directory it cannot write) and creates
 * nothing; the owner goes on writing. */
static int hold_open_and_write(const char *fifo_dir)
{
    char ready[700], done[700];
    snprintf(ready, sizeof(ready), "%s/ready", fifo_dir);
    snprintf(done, sizeof(done), "%s/done", fifo_dir);
    duro_provider *p = NULL;
    duro_error e;
    int rc = duro_provider_open(url(""), &p, &e);
    EXPECT(rc == DURO_OK, "open: %s (%s)", duro_errname(rc), e.message);
    duro_instance_list *l = NULL;
    rc = p->get_instance(p, "a", &l, &e); /* -wal and -shm now exist */
    duro_instance_list_free(l);
    EXPECT(rc == DURO_OK, "read: %s", e.message);
    FILE *f = fopen(ready, "w");
    EXPECT(f != NULL, "fopen %s", ready);
    fclose(f);
    for (int i = 0; i < 3000 && access(done, F_OK) != 0; i++)
        usleep(10000);
    duro_work_item it = {
        .kind = DURO_WORK_START, .instance_id = "c", .name = "orch"};
    rc = p->enqueue_for_orchestrator(p, &it, 0, &e);
    duro_provider_close(p);
    EXPECT(rc == DURO_OK, "write after the reader: %s", e.message);
    return 0;
}

TEST(another_user_reads_while_the_owner_has_it_open)
{
    new_dir("shared-open", 0755, owner.gid);
    owners_store();
    char signals[600], path[700];
    snprintf(signals, sizeof(signals), "%s/signals", test_tmpdir());
    CHECK_EQ(mkdir(signals, 0777), 0);
    CHECK_EQ(chmod(signals, 0777), 0);
    fflush(NULL);
    pid_t holder = fork();
    if (holder == 0) {
        if (initgroups(owner.name, owner.gid) != 0 || setgid(owner.gid) != 0 ||
            setuid(owner.uid) != 0)
            _exit(2);
        _exit(hold_open_and_write(signals));
    }
    snprintf(path, sizeof(path), "%s/ready", signals);
    WAIT_UNTIL(access(path, F_OK) == 0, 30000);
    CHECK(exists("-wal") && exists("-shm"));
    AS(reader, read_one, "?mode=ro|a");
    AS(reader, read_one, "?create=0|a"); /* a client that only reads */
    CHECK_EQ(owner_of("-wal"), owner.uid);
    CHECK_EQ(owner_of("-shm"), owner.uid);
    snprintf(path, sizeof(path), "%s/done", signals);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL)
        fclose(f);
    int status = 0;
    CHECK_EQ(waitpid(holder, &status, 0), holder);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Both users write through a group: the file is group-writable and the
 * directory set-group-ID to the owner's group, so the files the reader
 * creates belong to that group with the file's mode, and the owner can
 * write them. Allowed; the owner writes afterwards. */
TEST(a_shared_group_may_create_the_files)
{
    new_dir("group", 02777, owner.gid);
    owners_store();
    CHECK_EQ(chmod(db, 0664), 0);
    AS(reader, read_one, "?mode=ro|a");
    CHECK_EQ(owner_of("-shm"), reader.uid); /* left by a read-only close */
    AS(owner, write_one, "b");
}

/* A runtime on a store this user cannot write fails at create, naming the
 * file (it used to start and retry every fetch for ever); a client still
 * reads it. */
static int orch(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    (void)out;
    return DURO_OK;
}

static int runtime_refused(const char *expect)
{
    duro_registry *reg = NULL;
    EXPECT(duro_registry_create(&reg) == DURO_OK, "registry");
    duro_registry_add_orchestration(reg, "orch", NULL, orch, NULL);
    duro_runtime *rt = NULL;
    int rc = duro_runtime_create(
        url(strstr(expect, "mode=ro") ? "?mode=ro" : ""), reg, NULL, &rt);
    duro_registry_destroy(reg);
    duro_runtime_destroy(rt);
    EXPECT(rc == DURO_STORAGE, "runtime: got %s", duro_errname(rc));
    EXPECT(strstr(duro_errmsg(), expect) != NULL, "'%s' lacks '%s'",
           duro_errmsg(), expect);
    duro_client *client = NULL;
    rc = duro_client_create(url(""), &client);
    EXPECT(rc == DURO_OK, "client: %s (%s)", duro_errname(rc), duro_errmsg());
    duro_instance_info *info = NULL;
    rc = duro_client_get_status(client, "a", &info);
    int status = info != NULL ? (int)info->status : -1;
    duro_free(info);
    duro_client_destroy(client);
    EXPECT(rc == DURO_OK && status == DURO_STATUS_PENDING, "status %d", status);
    return 0;
}

TEST(a_runtime_on_a_store_it_cannot_write_fails_at_create)
{
    new_dir("runtime", 0777, owner.gid);
    owners_store();
    CHECK_EQ(chmod(db, 0444), 0); /* the owner's own file, read-only */
    AS(owner, runtime_refused,
       "app.db (owned by daemon, mode 0444) is not "
       "writable by daemon");
    AS(owner, runtime_refused, "opened read-only (mode=ro)");
    /* as root, whom permissions do not stop, mode=ro still does */
    CHECK_EQ(runtime_refused("opened read-only (mode=ro)"), 0);
}

static int look_up(user *u)
{
    struct passwd *pw = getpwnam(u->name);
    if (pw == NULL)
        return -1;
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    return 0;
}

int main(int argc, char **argv)
{
    if (geteuid() != 0 || look_up(&owner) != 0 || look_up(&reader) != 0) {
        fprintf(stderr, "skipped: needs root and the users daemon and "
                        "nobody\n");
        return 77;
    }
    /* the users traverse the per-run directory */
    CHECK_EQ(chmod(test_tmpdir(), 0755), 0);
    static const test_case tests[] = {
        T(another_user_is_refused_before_sqlite_creates_files),
        T(a_directory_the_reader_cannot_write_is_named),
        T(another_user_reads_while_the_owner_has_it_open),
        T(a_shared_group_may_create_the_files),
        T(a_runtime_on_a_store_it_cannot_write_fails_at_create),
    };
    return test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
