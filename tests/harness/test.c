/* test.c - runner behind test.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static jmp_buf test_jump;
static pthread_t main_thread;
static _Atomic int current_failed;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static char tmpdir[256];

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int test_failed(void)
{
    return atomic_load(&current_failed);
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&print_lock);
    fprintf(stderr, "  FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&print_lock);
    va_end(ap);
    atomic_store(&current_failed, 1);
    if (pthread_equal(pthread_self(), main_thread))
        longjmp(test_jump, 1);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[1024];
            snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(child);
            else
                unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

static void cleanup_tmpdir(void)
{
    if (tmpdir[0] != '\0' && getenv("DURO_TEST_KEEP") == NULL)
        remove_tree(tmpdir);
}

const char *test_tmpdir(void)
{
    if (tmpdir[0] == '\0') {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/duro-test-XXXXXX",
                 base ? base : "/tmp");
        if (mkdtemp(tmpdir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(cleanup_tmpdir);
    }
    return tmpdir;
}

static char *rotating(void)
{
    static char bufs[8][512];
    static _Atomic unsigned next;
    return bufs[atomic_fetch_add(&next, 1) % 8];
}

void test_print_file(const char *path, const char *title, int max_lines)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[1024];
    int n = 0;
    fprintf(stderr, "  --- %s ---\n", title);
    while (fgets(line, sizeof(line), f) != NULL && n++ < max_lines)
        fprintf(stderr, "  | %s", line);
    fclose(f);
}

const char *test_path(const char *name)
{
    char *b = rotating();
    snprintf(b, 512, "%s/%s", test_tmpdir(), name);
    return b;
}

const char *test_sqlite_url(const char *name)
{
    char *b = rotating();
    snprintf(b, 512, "sqlite:%s/%s", test_tmpdir(), name);
    return b;
}

int test_run(int argc, char **argv, const test_case *tests, size_t count)
{
    main_thread = pthread_self();
    const char *filter = argc > 1 ? argv[1] : getenv("DURO_TEST_FILTER");
    if (filter != NULL && strcmp(filter, "--list") == 0) {
        for (size_t i = 0; i < count; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    size_t ran = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        if (filter != NULL && strstr(tests[i].name, filter) == NULL)
            continue;
        ran++;
        atomic_store(&current_failed, 0);
        int64_t start = test_now_ms();
        fprintf(stderr, "[ RUN  ] %s\n", tests[i].name);
        if (setjmp(test_jump) == 0)
            tests[i].fn();
        int64_t ms = test_now_ms() - start;
        if (atomic_load(&current_failed)) {
            failed++;
            fprintf(stderr, "[ FAIL ] %s (%lld ms)\n", tests[i].name,
                    (long long)ms);
        } else {
            fprintf(stderr, "[  OK  ] %s (%lld ms)\n", tests[i].name,
                    (long long)ms);
        }
    }
    fprintf(stderr, "%zu tests, %zu failed\n", ran, failed);
    if (ran == 0) {
        fprintf(stderr, "no test matched filter '%s'\n", filter ? filter : "");
        return 1;
    }
    return failed == 0 ? 0 : 1;
}
