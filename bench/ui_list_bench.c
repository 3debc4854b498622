/* ui_list_bench.c - how fast duro ui pages through a store of many
 * instances: GET /api/v1/instances in each shape the page asks for, and
 * GET /api/v1/summary, over real HTTP to a real `duro ui` child process on
 * a SQLite file. Prints one JSON object per line. Not a timed test: CTest
 * runs it once with a tiny N as a smoke test.
 *
 * ui_list_bench --duro PATH [--n N] [--db FILE] [--requests R]
 *
 * The store (--db FILE, kept; seeded only when FILE does not exist, so
 * runs can share one; default: a temporary file, removed) holds N
 * instances (default 100,000), all made through the public client and a
 * real runtime: ids "order-NNNNNNN" (60 %), "pay-NNNNNNN" (30 %),
 * "user-NNNNNNN" (10 %) with the orchestration names Order, Pay and User;
 * 90 % completed, 5 % failed, 1 % running (waiting for an event that
 * never comes), 4 % pending (started with a one-day delay). Seeding prints
 * {"bench":"ui_list_seed",...} with its wall time.
 *
 * Then, per shape, R requests (default 50) one after the other, each on a
 * new connection, timed from connect() to the end of the response
 * (CLOCK_MONOTONIC); the line has p50, p95 and max in ms and the rows of
 * the last response. Shapes (limit 50 unless said):
 *   first        no filter, the first page
 *   next         no filter, the second page (the first page's next_cursor)
 *   deep         the cursor after half of the ids (paged to, 1000 at a
 *                time)
 *   status_rare  status=running (1 %)
 *   status_many  status=completed (90 %)
 *   name         name=Pay
 *   name_status  name=User&status=running
 *   prefix       id_prefix=user-00500 (a handful)
 *   created      a created_after/created_before window holding ~1 % of
 *                the instances (from the created times of two ids)
 *   created_rare that window and status=failed
 *   name_status_none  name=Order&status=suspended: no row matches, so
 *                every Order row is read (the worst name+status case)
 *   created_none a window in 2100: no row matches, every row is read (the
 *                worst time-window case: created_ms has no index)
 *   newest       order=created: the newest first (store query API)
 *   newest_next  its second page
 *   updated      order=updated: the most recently changed first
 *   first_count  the first page with count=1 (every match counted)
 *   name_contains  name_contains=ser (User, 10 %)
 *   counts_prefix  GET counts?name_prefix=Pa (the page's counts under a
 *                name filter: one count per status)
 *   attention    attention=1: failed, or live with a recorded problem (the
 *                failed 5 %); skipped by a duro that does not know it
 *   summary      GET /api/v1/summary (counts by status and name)
 *   instance     GET /api/v1/instance of a completed instance (the
 *                instance page's card, polled every 2 s)
 *   history      GET /api/v1/history?limit=100 of it (the page's events)
 * A shape a duro answers with 400 or 404 (a parameter or route it does
 * not know) is skipped, and said on stderr, so that one program measures
 * two builds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

#define MUST(what, call)                                                       \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != DURO_OK) {                                                  \
            fprintf(stderr, "ui_list_bench: %s: %s (%s)\n", what,              \
                    duro_errname(rc_), duro_errmsg());                         \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static const char TOKEN[] = "ui-list-bench-token-0123456789";
#define PAGE_ROWS 1000 /* the API's largest page */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the store ----------------------------------------------------------- */

static int finish(duro_orch *o, const char *input, duro_result *out)
{
    if (strcmp(input, "fail") == 0)
        return duro_fail(out, "failed on purpose");
    if (strcmp(input, "wait") == 0) {
        duro_task *t = duro_wait_event(o, "never");
        duro_await(o, t);
    }
    return duro_ok(out, NULL);
}

/* Instance i: its id, name and fate (the input). */
static void instance(long i, char *id, size_t size, const char **name,
                     const char **fate)
{
    static const char *const prefixes[] = {"order", "pay", "user"};
    static const char *const names[] = {"Order", "Pay", "User"};
    int k = i % 10 < 6 ? 0 : i % 10 < 9 ? 1 : 2;
    snprintf(id, size, "%s-%07ld", prefixes[k], i);
    *name = names[k];
    long f = (long)(((uint64_t)i * 2654435761u >> 7) % 100); /* spread */
    *fate = f < 90 ? "done" : f < 95 ? "fail" : f < 96 ? "wait" : "later";
}

static uint64_t count_of(duro_client *c, int status)
{
    duro_store_stats *st = NULL;
    MUST("store_stats", duro_client_store_stats(c, &st));
    uint64_t n = 0;
    for (size_t i = 0; i < st->instance_count; i++)
        if (st->instances[i].status == status)
            n += st->instances[i].count;
    duro_free(st);
    return n;
}

static void seed(const char *url, long n)
{
    double t0 = now_ms();
    duro_client *c = NULL;
    MUST("client", duro_client_create(url, &c));
    duro_start_options later;
    duro_start_options_init(&later);
    later.delay_ms = 86400000;
    long settled = 0; /* completed + failed + running expected */
    for (long i = 0; i < n; i++) {
        char id[32];
        const char *name, *fate;
        instance(i, id, sizeof(id), &name, &fate);
        int is_later = strcmp(fate, "later") == 0;
        settled += !is_later;
        MUST("start", duro_client_start(c, id, name, is_later ? "\"x\"" : fate,
                                        is_later ? &later : NULL));
    }
    double started = now_ms();
    duro_registry *reg = NULL;
    MUST("registry", duro_registry_create(&reg));
    const char *names[] = {"Order", "Pay", "User"};
    for (int k = 0; k < 3; k++)
        MUST("register", duro_registry_add_orchestration(reg, names[k], NULL,
                                                         finish, NULL));
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    duro_runtime *rt = NULL;
    MUST("runtime", duro_runtime_create(url, reg, &o, &rt));
    MUST("runtime_start", duro_runtime_start(rt));
    for (;;) {
        uint64_t done = count_of(c, DURO_STATUS_COMPLETED) +
                        count_of(c, DURO_STATUS_FAILED) +
                        count_of(c, DURO_STATUS_RUNNING);
        if ((long)done >= settled)
            break;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    duro_client_destroy(c);
    printf("{\"bench\":\"ui_list_seed\",\"n\":%ld,\"start_ms\":%.0f,"
           "\"run_ms\":%.0f}\n",
           n, started - t0, now_ms() - started);
    fflush(stdout);
}

/* ---- HTTP ---------------------------------------------------------------- */

static pid_t ui_pid;

/* The duro ui child goes with the program, on every exit (a failed shape
 * exits at once). */
static void stop_ui(void)
{
    if (ui_pid > 0) {
        kill(ui_pid, SIGTERM);
        waitpid(ui_pid, NULL, 0);
        ui_pid = 0;
    }
}

/* Starts duro ui on @p url; returns its port. */
static unsigned start_ui(const char *duro, const char *url, const char *dir)
{
    char tokfile[600];
    snprintf(tokfile, sizeof(tokfile), "%s/token", dir);
    FILE *f = fopen(tokfile, "w");
    if (f == NULL || fprintf(f, "%s\n", TOKEN) < 0 || fclose(f) != 0) {
        perror("ui_list_bench: token file");
        exit(1);
    }
    int out[2];
    if (pipe(out) != 0) {
        perror("pipe");
        exit(1);
    }
    ui_pid = fork();
    if (ui_pid > 0)
        atexit(stop_ui);
    if (ui_pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(duro, duro, "--db", url, "ui", "--listen", "127.0.0.1:0",
              "--token-file", tokfile, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *in = fdopen(out[0], "r");
    char line[512];
    unsigned port = 0;
    if (in == NULL || fgets(line, sizeof(line), in) == NULL ||
        sscanf(line, "duro ui: http://127.0.0.1:%u/", &port) != 1) {
        fprintf(stderr, "ui_list_bench: duro ui did not start\n");
        exit(1);
    }
    return port; /* the pipe stays open: duro ui may print more */
}

static char buf[4 << 20]; /* the last answer */

/* GET @p path; returns the HTTP status; *rows: the "ref" count seen. */
static int get(unsigned port, const char *path, int *rows)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("ui_list_bench: connect");
        exit(1);
    }
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAuthorization: "
                     "Bearer %s\r\nConnection: close\r\n\r\n",
                     path, port, TOKEN);
    if (write(fd, req, (size_t)n) != n) {
        perror("ui_list_bench: write");
        exit(1);
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof(buf) &&
           (r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    *rows = 0;
    for (const char *p = buf; (p = strstr(p, "\"ref\":")) != NULL; p++)
        (*rows)++;
    return status;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(unsigned port, const char *shape, const char *path,
                    int requests, long n)
{
    double *t = calloc((size_t)requests, sizeof(*t));
    int rows = 0;
    for (int i = 0; i < requests; i++) {
        double t0 = now_ms();
        int status = get(port, path, &rows);
        t[i] = now_ms() - t0;
        if ((status == 400 || status == 404) && i == 0) {
            fprintf(stderr,
                    "ui_list_bench: %s: skipped (HTTP %d: this duro does "
                    "not know it)\n",
                    shape, status);
            free(t);
            return;
        }
        if (status != 200) {
            fprintf(stderr, "ui_list_bench: %s: HTTP %d\n", path, status);
            exit(1);
        }
    }
    qsort(t, (size_t)requests, sizeof(*t), cmp_double);
    printf("{\"bench\":\"ui_list\",\"shape\":\"%s\",\"n\":%ld,"
           "\"requests\":%d,\"rows\":%d,\"p50_ms\":%.2f,\"p95_ms\":%.2f,"
           "\"max_ms\":%.2f}\n",
           shape, n, requests, rows, t[requests / 2],
           t[(requests * 95) / 100 < requests ? (requests * 95) / 100
                                              : requests - 1],
           t[requests - 1]);
    fflush(stdout);
    free(t);
}

/* base64url of @p s, as the API's refs and cursors. */
static void ref_of(const char *s, char *out)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        acc = acc << 8 | *u;
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = b64[(acc << (6 - bits)) & 63];
    out[o] = '\0';
}

static int64_t created_of(const char *url, long i)
{
    char id[32];
    const char *name, *fate;
    instance(i, id, sizeof(id), &name, &fate);
    duro_client *c = NULL;
    MUST("client", duro_client_create(url, &c));
    duro_instance_info *info = NULL;
    MUST("get_status", duro_client_get_status(c, id, &info));
    int64_t ms = info->created_ms;
    duro_free(info);
    duro_client_destroy(c);
    return ms;
}

int main(int argc, char **argv)
{
    const char *duro = NULL, *db = NULL;
    long n = 100000;
    int requests = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--duro") == 0)
            duro = argv[i + 1];
        else if (strcmp(argv[i], "--n") == 0)
            n = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--db") == 0)
            db = argv[i + 1];
        else if (strcmp(argv[i], "--requests") == 0)
            requests = atoi(argv[i + 1]);
    }
    if (duro == NULL || n < 100 || requests < 1) {
        fputs("usage: ui_list_bench --duro PATH [--n N>=100] [--db FILE] "
              "[--requests R]\n",
              stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char dir[] = "/tmp/duro-ui-list-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char path[600], url[700];
    snprintf(path, sizeof(path), "%s/s.db", dir);
    snprintf(url, sizeof(url), "sqlite:%s", db ? db : path);
    if (db == NULL || access(db, F_OK) != 0)
        seed(url, n);

    int64_t from = created_of(url, n * 495 / 1000);
    int64_t to = created_of(url, n * 505 / 1000);
    unsigned port = start_ui(duro, url, dir);

    char q[512], cursor[128];
    const char *name, *fate;
    measure(port, "first", "/api/v1/instances?limit=50", requests, n);
    /* the second page: the first page's next_cursor */
    char next[128] = "";
    int rows = 0;
    const char *nc = get(port, "/api/v1/instances?limit=50", &rows) == 200
                         ? strstr(buf, "\"next_cursor\":\"")
                         : NULL;
    if (nc == NULL || sscanf(nc, "\"next_cursor\":\"%127[^\"]", next) != 1) {
        fprintf(stderr, "ui_list_bench: no next_cursor on the first page\n");
        return 1;
    }
    snprintf(q, sizeof(q), "/api/v1/instances?limit=50&cursor=%s", next);
    measure(port, "next", q, requests, n);
    /* the cursor after the first half of the ids, by paging there (a
     * cursor is the API's to make: opaque since the store query API) */
    cursor[0] = '\0';
    for (long seen = 0; seen < n / 2;) {
        long step = n / 2 - seen < PAGE_ROWS ? n / 2 - seen : PAGE_ROWS;
        snprintf(q, sizeof(q), "/api/v1/instances?limit=%ld%s%s", step,
                 cursor[0] ? "&cursor=" : "", cursor);
        const char *c = get(port, q, &rows) == 200
                            ? strstr(buf, "\"next_cursor\":\"")
                            : NULL;
        if (c == NULL ||
            sscanf(c, "\"next_cursor\":\"%127[^\"]", cursor) != 1) {
            fprintf(stderr, "ui_list_bench: no cursor after %ld rows\n", seen);
            return 1;
        }
        seen += step;
    }
    snprintf(q, sizeof(q), "/api/v1/instances?limit=50&cursor=%s", cursor);
    measure(port, "deep", q, requests, n);
    measure(port, "status_rare", "/api/v1/instances?limit=50&status=running",
            requests, n);
    measure(port, "status_many", "/api/v1/instances?limit=50&status=completed",
            requests, n);
    measure(port, "name", "/api/v1/instances?limit=50&name=Pay", requests, n);
    measure(port, "name_status",
            "/api/v1/instances?limit=50&name=User&status=running", requests, n);
    measure(port, "prefix", "/api/v1/instances?limit=50&id_prefix=user-00500",
            requests, n);
    snprintf(
        q, sizeof(q),
        "/api/v1/instances?limit=50&created_after=%lld&created_before=%lld",
        (long long)from, (long long)to);
    measure(port, "created", q, requests, n);
    snprintf(q, sizeof(q),
             "/api/v1/instances?limit=50&created_after=%lld&created_before=%lld"
             "&status=failed",
             (long long)from, (long long)to);
    measure(port, "created_rare", q, requests, n);
    /* worst cases: nothing matches, so the page reads every candidate */
    measure(port, "name_status_none",
            "/api/v1/instances?limit=50&name=Order&status=suspended", requests,
            n);
    measure(port, "created_none",
            "/api/v1/instances?limit=50&created_after=4102444800000", requests,
            n);
    measure(port, "newest", "/api/v1/instances?limit=50&order=created",
            requests, n);
    const char *nc2 =
        get(port, "/api/v1/instances?limit=50&order=created", &rows) == 200
            ? strstr(buf, "\"next_cursor\":\"")
            : NULL;
    if (nc2 != NULL && sscanf(nc2, "\"next_cursor\":\"%127[^\"]", next) == 1) {
        snprintf(q, sizeof(q),
                 "/api/v1/instances?limit=50&order=created&cursor=%s", next);
        measure(port, "newest_next", q, requests, n);
    }
    measure(port, "updated", "/api/v1/instances?limit=50&order=updated",
            requests, n);
    measure(port, "first_count", "/api/v1/instances?limit=50&count=1", requests,
            n);
    measure(port, "name_contains",
            "/api/v1/instances?limit=50&name_contains=ser", requests, n);
    measure(port, "counts_prefix", "/api/v1/counts?name_prefix=Pa", requests,
            n);
    measure(port, "attention", "/api/v1/instances?limit=50&attention=1",
            requests, n);
    measure(port, "summary", "/api/v1/summary", requests, n);
    /* the instance page of a completed instance: its card and events */
    char one[32], one_ref[64];
    long k = 0;
    do
        instance(k++, one, sizeof(one), &name, &fate);
    while (strcmp(fate, "done") != 0);
    ref_of(one, one_ref);
    snprintf(q, sizeof(q), "/api/v1/instance?ref=%s", one_ref);
    measure(port, "instance", q, requests, n);
    snprintf(q, sizeof(q), "/api/v1/history?ref=%s&after=0&limit=100", one_ref);
    measure(port, "history", q, requests, n);

    stop_ui();
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "ui_list_bench: could not remove %s\n", dir);
    return 0;
}
