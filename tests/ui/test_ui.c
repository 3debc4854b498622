/* test_ui.c - duro ui over raw TCP (a browser's fetch, and curl, rewrite
 * Host: the DNS-rebinding and smuggling checks need raw sockets). Seeds a
 * SQLite store with hostile ids (quotes, '<', a newline, invalid UTF-8 as
 * an earlier duro stored it),
 * starts `duro ui --listen 127.0.0.1:0 --token-file F`, reads its first
 * stdout line and checks every safety rule of the gate, the API's shapes,
 * an audited cancel, --read-only and a clean SIGTERM. Every wait has a
 * deadline; the children are killed on every failure path.
 *   test_ui DURO */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"
#include "duro/provider.h"

static const char *duro_bin;
static char dir[] = "/tmp/duro-test-ui-XXXXXX";
static char url[512];
static const char token[] = "test-token-0123456789abcdef";
#define SLOTS 10
static pid_t children[SLOTS];
static int outputs[SLOTS];     /* the stdout of each duro ui */
static char codes[SLOTS][128]; /* the login code of its first line */
static int failures, checks;

static const char hostile[] = "a\"<img src=x onerror=alert(1)>\nb";
static const char bad_utf8[] = "bad-\xff\xfe-id";

/* duro refuses ids and inputs that are not UTF-8 where they enter (README,
 * "Text is UTF-8"), but a SQLite store written by an earlier duro may
 * hold them, and the console must show such a store: this starts an
 * instance through the provider itself, as those versions did (SQLite
 * stores the bytes as given; a runtime then runs it like any other).
 * DURO_OK or the provider's code. */
static int start_raw(const char *id, const char *name, const char *input,
                     int64_t delay_ms)
{
    char db[600];
    snprintf(db, sizeof(db), "sqlite:%s/s.db", dir);
    duro_provider *p = NULL;
    duro_error err;
    int rc = duro_provider_open(db, &p, &err);
    duro_work_item item = {.kind = DURO_WORK_START,
                           .instance_id = id,
                           .name = name,
                           .payload = input};
    if (rc == DURO_OK)
        rc = p->enqueue_for_orchestrator(p, &item, delay_ms, &err);
    if (rc != DURO_OK)
        fprintf(stderr, "test_ui: start %s: %s\n", name, err.message);
    duro_provider_close(p);
    return rc;
}

static void kill_children(void)
{
    for (size_t i = 0; i < SLOTS; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("test_ui: FATAL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    kill_children();
    exit(1);
}

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "test_ui:%d: FAILED: %s: ", __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next stdout line of the duro ui in @p slot (without its newline),
 * read a byte at a time so nothing after it is consumed, within 10 s: 0,
 * or -1. */
static int next_line(int slot, char *line, size_t size)
{
    size_t len = 0;
    int64_t deadline = now_ms() + 10000;
    for (;;) {
        int left = (int)(deadline - now_ms());
        struct pollfd p = {outputs[slot], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        char ch;
        if (read(outputs[slot], &ch, 1) != 1)
            return -1;
        if (ch == '\n')
            break;
        if (len + 1 < size)
            line[len++] = ch;
    }
    line[len] = '\0';
    return 0;
}

/* Starts duro ui with @p extra (NULL-ended); its port in *port. */
static pid_t start_ui(int slot, const char *const *extra, unsigned *port)
{
    int out[2];
    if (pipe(out) != 0)
        die("pipe: %s", strerror(errno));
    char db[600], tokfile[600], errfile[600];
    snprintf(db, sizeof(db), "sqlite:%s/s.db", dir);
    snprintf(tokfile, sizeof(tokfile), "%s/token", dir);
    snprintf(errfile, sizeof(errfile), "%s/ui%d.err", dir, slot);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        const char *argv[32] = {duro_bin,       "--db",     db,
                                "ui",           "--listen", "127.0.0.1:0",
                                "--token-file", tokfile};
        size_t n = 8;
        for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        dup2(out[1], 1);
        FILE *err = fopen(errfile, "w");
        if (err != NULL)
            dup2(fileno(err), 2);
        close(out[0]);
        close(out[1]);
        execv(duro_bin, (char *const *)argv);
        _exit(127);
    }
    children[slot] = pid;
    close(out[1]);
    if (outputs[slot] > 0)
        close(outputs[slot]);
    outputs[slot] = out[0];
    char line[512];
    if (next_line(slot, line, sizeof(line)) != 0)
        die("duro ui printed no first line within 10 s (see %s)", errfile);
    /* "duro ui: http://127.0.0.1:PORT/#login=CODE": never the token */
    int at = 0;
    if (sscanf(line, "duro ui: http://127.0.0.1:%u/#login=%n", port, &at) !=
            1 ||
        at == 0 || strspn(line + at, "0123456789abcdef") != 32 ||
        line[at + 32] != '\0' || strstr(line, token) != NULL)
        die("unexpected first line: %s", line);
    snprintf(codes[slot], sizeof(codes[slot]), "%s", line + at);
    snprintf(url, sizeof(url), "%s", line);
    return pid;
}

/* Reads from @p fd into @p buf (from @p len) until @p until appears, or
 * the peer closes (@p until NULL), within @p ms; the new length. */
static size_t read_until_within(int fd, char *buf, size_t len, size_t size,
                                const char *until, int ms)
{
    int64_t deadline = now_ms() + ms;
    buf[len] = '\0';
    while (until == NULL || strstr(buf, until) == NULL) {
        int left = (int)(deadline - now_ms());
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return len;
}

/* read_until_within 10 s. */
static size_t read_until(int fd, char *buf, size_t len, size_t size,
                         const char *until)
{
    return read_until_within(fd, buf, len, size, until, 10000);
}

/* Sends @p raw to 127.0.0.1:@p port and reads the whole answer (the
 * request says Connection: close) into @p buf, within @p ms. The status,
 * or 0 when there was no HTTP answer. */
static int http_within(unsigned port, const char *raw, size_t raw_len,
                       char *buf, size_t size, int ms)
{
    buf[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect: %s", strerror(errno));
    size_t sent = 0;
    while (sent < raw_len) {
        ssize_t n = send(fd, raw + sent, raw_len - sent, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may answer (413) and close early */
        sent += (size_t)n;
    }
    read_until_within(fd, buf, 0, size, NULL, ms);
    close(fd);
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

/* http_within 10 s. */
static int http(unsigned port, const char *raw, size_t raw_len, char *buf,
                size_t size)
{
    return http_within(port, raw, raw_len, buf, size, 10000);
}

/* A request: METHOD PATH, our Host unless @p headers has one, then
 * @p headers (CRLF-ended lines) and @p body. */
static int req(unsigned port, const char *method, const char *path,
               const char *headers, const char *body, char *buf, size_t size)
{
    size_t blen = body ? strlen(body) : 0;
    char *raw = malloc(blen + 4096);
    if (raw == NULL)
        die("out of memory");
    int n = snprintf(raw, 4096, "%s %s HTTP/1.1\r\n", method, path);
    if (headers == NULL || strstr(headers, "Host:") == NULL)
        n +=
            snprintf(raw + n, 4096 - (size_t)n, "Host: 127.0.0.1:%u\r\n", port);
    n += snprintf(raw + n, 4096 - (size_t)n, "%sConnection: close\r\n",
                  headers ? headers : "");
    if (body != NULL)
        n += snprintf(raw + n, 4096 - (size_t)n, "Content-Length: %zu\r\n",
                      blen);
    n += snprintf(raw + n, 4096 - (size_t)n, "\r\n");
    if (body != NULL)
        memcpy(raw + n, body, blen);
    int status = http(port, raw, (size_t)n + blen, buf, size);
    free(raw);
    return status;
}

static const char *body_of(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    return b ? b + 4 : "";
}

/* base64url of @p s (no padding). */
static void ref_of(const char *s, char *out)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        acc = acc << 8 | u[i];
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

static int wait_exit(pid_t pid, int slot, int *status)
{
    int64_t deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid) {
            children[slot] = 0;
            return 0;
        }
        struct pollfd none;
        poll(&none, 0, 10);
    }
    return -1;
}

/* Big: returns its input, so that its output and both ends of its history
 * are as large as the input. */
static int echo_input(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    return duro_ok(out, input);
}

/* Waiter: returns the payload of the event "go" as it was stored. */
static int echo_event(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *t = duro_wait_event(o, "go");
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

/* Parent: its custom status is its input; it calls Big as child-1 and
 * returns its input. */
static int parent_of(duro_orch *o, const char *input, duro_result *out)
{
    duro_set_custom_status(o, input);
    duro_task *t =
        duro_call_sub_orchestration(o, "Big", NULL, "child-1", "\"c\"");
    duro_await(o, t);
    return duro_ok(out, input);
}

static int fail_now(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    return duro_fail(out, "failed on purpose");
}

/* Fixable's activity: fails until the test "fixes" it (sets fixed), so
 * that a rewind of a failed Fixable instance then completes it. Runs on a
 * worker thread. */
static _Atomic int fixed;
static int flip(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    if (!fixed)
        return duro_fail(out, "not fixed yet");
    return duro_ok(out, input);
}

/* Fixable: calls Flip once, fails with its error. */
static int fixable(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Flip", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* A runtime in this process for Big, Waiter, Parent, Fail and Fixable
 * (other instances fail as unregistered: started last). */
static duro_registry *registry;
static duro_runtime *runtime;

static void start_runtime(const char *db)
{
    if (duro_registry_create(&registry) != DURO_OK ||
        duro_registry_add_orchestration(registry, "Big", NULL, echo_input,
                                        NULL) != DURO_OK ||
        duro_registry_add_orchestration(registry, "Waiter", NULL, echo_event,
                                        NULL) != DURO_OK ||
        duro_registry_add_orchestration(registry, "Parent", NULL, parent_of,
                                        NULL) != DURO_OK ||
        duro_registry_add_orchestration(registry, "Fail", NULL, fail_now,
                                        NULL) != DURO_OK ||
        duro_registry_add_orchestration(registry, "Fixable", NULL, fixable,
                                        NULL) != DURO_OK ||
        duro_registry_add_activity(registry, "Flip", flip, NULL) != DURO_OK ||
        duro_runtime_create(db, registry, NULL, &runtime) != DURO_OK ||
        duro_runtime_start(runtime) != DURO_OK)
        die("runtime: %s", duro_errmsg());
}

static void stop_runtime(void)
{
    duro_runtime_shutdown(runtime, 10000);
    duro_runtime_destroy(runtime);
    duro_registry_destroy(registry);
    runtime = NULL;
    registry = NULL;
}

/* Waits up to 30 s for @p id to have @p status: 0, else -1. */
static int wait_status(duro_client *c, const char *id, int status)
{
    int64_t deadline = now_ms() + 30000;
    while (now_ms() < deadline) {
        duro_instance_info *info = NULL;
        int done = duro_client_get_status(c, id, &info) == DURO_OK &&
                   info->status == status;
        duro_free(info);
        if (done)
            return 0;
        struct pollfd none;
        poll(&none, 0, 10);
    }
    return -1;
}

/* Waits up to 30 s for @p id to be completed: 0, else -1. */
static int wait_completed(duro_client *c, const char *id)
{
    int64_t deadline = now_ms() + 30000;
    while (now_ms() < deadline) {
        duro_instance_info *info = NULL;
        int done = duro_client_get_status(c, id, &info) == DURO_OK &&
                   info->status == DURO_STATUS_COMPLETED;
        duro_free(info);
        if (done)
            return 0;
        struct pollfd none;
        poll(&none, 0, 10);
    }
    return -1;
}

#define BIG_BYTES (1024 * 1024)
#define SMALL_BOUND                                                            \
    (64 * 1024) /* a list or history answer with a 1 MB                        \
                   output: far below it */

/* big-1, completed with an output of BIG_BYTES (a JSON string), by the
 * runtime; the output in *@p big (caller frees). 0, or -1 when it did not
 * complete within 30 s. */
static int make_big(duro_client *c, char **big)
{
    *big = malloc(BIG_BYTES + 1);
    if (*big == NULL)
        die("out of memory");
    memset(*big, 'x', BIG_BYTES);
    (*big)[0] = '"';
    (*big)[BIG_BYTES - 1] = '"';
    (*big)[BIG_BYTES] = '\0';
    if (duro_client_start(c, "big-1", "Big", *big, NULL) != DURO_OK)
        die("start big-1: %s", duro_errmsg());
    return wait_completed(c, "big-1");
}

/* Waits up to 10 s for file @p path to hold @p text: 0, else -1. */
static int wait_file_holds(const char *path, const char *text)
{
    int64_t deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        char held[8192];
        FILE *f = fopen(path, "r");
        size_t n = f != NULL ? fread(held, 1, sizeof(held) - 1, f) : 0;
        if (f != NULL)
            fclose(f);
        held[n] = '\0';
        if (strstr(held, text) != NULL)
            return 0;
        struct pollfd none;
        poll(&none, 0, 10);
    }
    return -1;
}

/* The ids (as refs) of a GET instances answer in @p resp, comma-separated
 * in id order, into @p out; the X-Duro-Rows-Read header's value, or -1. */
static long listed_refs(const char *resp, char *out, size_t size)
{
    out[0] = '\0';
    json_error_t jerr;
    json_t *doc = json_loads(body_of(resp), 0, &jerr);
    size_t i, o = 0;
    json_t *it;
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        o += (size_t)snprintf(out + o, size - o, "%s%s", i ? "," : "",
                              json_string_value(json_object_get(it, "ref")));
        if (o >= size)
            break;
    }
    json_decref(doc);
    const char *h = strstr(resp, "X-Duro-Rows-Read: ");
    return h != NULL ? strtol(h + strlen("X-Duro-Rows-Read: "), NULL, 10) : -1;
}

static duro_instance_info *status_of(duro_client *c, const char *id)
{
    duro_instance_info *info = NULL;
    if (duro_client_get_status(c, id, &info) != DURO_OK)
        die("get_status");
    return info;
}

/* The JSON body of @p resp (caller decrefs), or NULL. */
static json_t *json_of(const char *resp)
{
    json_error_t jerr;
    return json_loads(body_of(resp), 0, &jerr);
}

/* 1 when the GET instances answer @p resp lists the instance @p id. */
static int lists(const char *resp, const char *id)
{
    json_t *doc = json_of(resp);
    size_t i;
    json_t *it;
    int found = 0;
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        const char *shown = json_string_value(json_object_get(it, "id"));
        found |= shown != NULL && strcmp(shown, id) == 0;
    }
    json_decref(doc);
    return found;
}

/* The views of the page over a store with no runtime: a pending instance
 * that never ran has an empty history, not an error; its input is not
 * known yet; attention=1 lists live instances with a recorded problem
 * (and failed ones), in pages. */
static void test_views_pending(unsigned port, const char *auth, const char *db,
                               duro_client *client)
{
    static char buf[1 << 16];
    char path[512], ref[64];
    duro_start_options later;
    duro_start_options_init(&later);
    later.delay_ms = 3600 * 1000;
    const char *att[] = {"att-1", "att-2", "att-3", "att-4"};
    for (size_t k = 0; k < 4; k++)
        if (duro_client_start(client, att[k], "Idle", NULL, &later) != DURO_OK)
            die("start %s: %s", att[k], duro_errmsg());

    ref_of("att-1", ref);
    snprintf(path, sizeof(path), "/api/v1/history?ref=%s", ref);
    int s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    json_t *doc = json_of(buf);
    CHECK(s == 200 && doc != NULL &&
              json_integer_value(json_object_get(doc, "execution_id")) == 0 &&
              json_array_size(json_object_get(doc, "events")) == 0 &&
              json_is_null(json_object_get(doc, "next_after")),
          "history of a pending instance that never ran: %d %s", s,
          body_of(buf));
    json_decref(doc);
    snprintf(path, sizeof(path), "/api/v1/history?ref=%s&execution=1", ref);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    CHECK(s == 404, "its execution 1: %d %s", s, body_of(buf));
    char none[64];
    ref_of("no-such-instance", none);
    snprintf(path, sizeof(path), "/api/v1/history?ref=%s", none);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    CHECK(s == 404, "history of no instance: %d %s", s, body_of(buf));
    snprintf(path, sizeof(path), "/api/v1/payload?ref=%s&field=input", ref);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    CHECK(s == 404 && strstr(buf, "not started") != NULL,
          "input of a pending instance: %d %s", s, body_of(buf));
    snprintf(path, sizeof(path), "/api/v1/instance?ref=%s", ref);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"parent_ref\":null") != NULL,
          "no parent, parent_ref null: %s", body_of(buf));

    /* attention=1: att-1 and att-3 have a problem; att-2 and att-4 not */
    duro_provider *store = NULL;
    duro_error perr;
    if (duro_provider_open(db, &store, &perr) != DURO_OK ||
        store->set_instance_problem(store, "att-1", "stuck on purpose", 0,
                                    &perr) != DURO_OK ||
        store->set_instance_problem(store, "att-3", "stuck \xe2\x80\xae too", 0,
                                    &perr) != DURO_OK)
        die("set_instance_problem: %s", perr.message);
    duro_provider_close(store);
    s = req(port, "GET", "/api/v1/instances?attention=1&id_prefix=att-", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200 && lists(buf, "att-1") && lists(buf, "att-3") &&
              !lists(buf, "att-2") && !lists(buf, "att-4") &&
              strstr(buf, "\"last_problem\":\"stuck on purpose\"") != NULL,
          "attention: %d %s", s, body_of(buf));
    s = req(port, "GET", "/api/v1/instances?id_prefix=att-", auth, NULL, buf,
            sizeof(buf));
    CHECK(s == 200 && lists(buf, "att-2"), "without attention: %s",
          body_of(buf));
    /* paged: one a page, the cursor after the last one taken */
    s = req(port, "GET", "/api/v1/instances?attention=1&id_prefix=att-&limit=1",
            auth, NULL, buf, sizeof(buf));
    doc = json_of(buf);
    const char *cursor = json_string_value(json_object_get(doc, "next_cursor"));
    CHECK(s == 200 && lists(buf, "att-1") && cursor != NULL,
          "attention page 1: %s", body_of(buf));
    snprintf(path, sizeof(path),
             "/api/v1/instances?attention=1&id_prefix=att-&limit=1&cursor=%s",
             cursor != NULL ? cursor : "");
    json_decref(doc);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    CHECK(s == 200 && lists(buf, "att-3") && !lists(buf, "att-1") &&
              strstr(buf, "\"next_cursor\":null") != NULL,
          "attention page 2: %s", body_of(buf));
    s = req(port, "GET", "/api/v1/instances?attention=1&status=completed", auth,
            NULL, buf, sizeof(buf));
    doc = json_of(buf);
    CHECK(s == 200 && doc != NULL &&
              json_array_size(json_object_get(doc, "instances")) == 0,
          "attention among completed instances: %d %s", s, body_of(buf));
    json_decref(doc);
    s = req(port, "GET",
            "/api/v1/instances?attention=1&status=pending&id_prefix=att-", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200 && lists(buf, "att-1") && !lists(buf, "att-2"),
          "attention among pending: %d %s", s, body_of(buf));
    s = req(port, "GET", "/api/v1/instances?attention=yes", auth, NULL, buf,
            sizeof(buf));
    CHECK(s == 400 && strstr(buf, "bad_argument") != NULL,
          "attention=yes: %d %s", s, body_of(buf));
}

/* GET @p path into @p buf (of @p size), bearer @p auth; the status. */
static int get_path(unsigned port, const char *auth, const char *path,
                    char *buf, size_t size)
{
    return req(port, "GET", path, auth, NULL, buf, size);
}

/* With the runtime: a child's parent_ref is its parent's exact ref (the
 * parent's id is not UTF-8); an instance's whole input, output, custom
 * status and error are GET payload?field= away from their previews;
 * attention=1 lists failed instances. */
static void test_views_runtime(unsigned port, const char *auth,
                               duro_client *client)
{
    static char buf[1 << 16];
    enum { LONG_BYTES = 6000 };
    char input[LONG_BYTES + 1], path[512], pref[64], cref[64], fref[64];
    memset(input, 'y', LONG_BYTES);
    input[0] = input[LONG_BYTES - 1] = '"';
    input[LONG_BYTES] = '\0';
    const char *parent = "par\xff-1";
    if (start_raw(parent, "Parent", input, 0) != DURO_OK ||
        duro_client_start(client, "fail-1", "Fail", NULL, NULL) != DURO_OK)
        die("start Parent, Fail: %s", duro_errmsg());
    CHECK(wait_completed(client, parent) == 0, "the parent did not complete");
    CHECK(wait_status(client, "fail-1", DURO_STATUS_FAILED) == 0,
          "fail-1 did not fail");
    ref_of(parent, pref);
    ref_of("child-1", cref);
    ref_of("fail-1", fref);

    snprintf(path, sizeof(path), "/api/v1/instance?ref=%s", cref);
    int s = get_path(port, auth, path, buf, sizeof(buf));
    json_t *doc = json_of(buf);
    const char *got = json_string_value(json_object_get(doc, "parent_ref"));
    CHECK(s == 200 && got != NULL && strcmp(got, pref) == 0,
          "child-1's parent_ref: %s, not %s", got ? got : "(none)", pref);
    got = json_string_value(json_object_get(doc, "parent_instance"));
    CHECK(got != NULL && strcmp(got, "par\xEF\xBF\xBD-1") == 0,
          "parent_instance for display: %s", got ? got : "(none)");
    json_decref(doc);

    snprintf(path, sizeof(path), "/api/v1/instance?ref=%s", pref);
    s = get_path(port, auth, path, buf, sizeof(buf));
    doc = json_of(buf);
    CHECK(s == 200 &&
              json_is_true(json_object_get(doc, "custom_status_truncated")) &&
              json_integer_value(json_object_get(doc, "custom_status_bytes")) ==
                  LONG_BYTES &&
              json_is_true(json_object_get(doc, "output_truncated")),
          "previews of the parent: %d %s", s, body_of(buf));
    json_decref(doc);
    const char *whole[] = {"input", "output", "custom_status"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "/api/v1/payload?ref=%s&field=%s", pref,
                 whole[k]);
        s = get_path(port, auth, path, buf, sizeof(buf));
        CHECK(s == 200 && strcmp(body_of(buf), input) == 0 &&
                  strstr(buf, "Content-Disposition: attachment") != NULL &&
                  strstr(buf, "Content-Type: text/plain") != NULL,
              "the whole %s: %d, %zu bytes", whole[k], s, strlen(body_of(buf)));
    }
    snprintf(path, sizeof(path), "/api/v1/payload?ref=%s&field=error", pref);
    s = get_path(port, auth, path, buf, sizeof(buf));
    CHECK(s == 404, "the error of a completed instance: %d", s);
    snprintf(path, sizeof(path), "/api/v1/payload?ref=%s&field=error", fref);
    s = get_path(port, auth, path, buf, sizeof(buf));
    CHECK(s == 200 && strstr(body_of(buf), "failed on purpose") != NULL,
          "the error of fail-1: %d %s", s, body_of(buf));
    const char *refused[] = {"field=bogus", "field=input&event=1",
                             "field=output&execution=1", "execution=1"};
    for (size_t k = 0; k < 4; k++) {
        snprintf(path, sizeof(path), "/api/v1/payload?ref=%s&%s", pref,
                 refused[k]);
        s = get_path(port, auth, path, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, "bad_argument") != NULL, "%s: %d %.200s",
              refused[k], s, body_of(buf));
    }
    s = get_path(port, auth, "/api/v1/instances?attention=1&id_prefix=fail-",
                 buf, sizeof(buf));
    CHECK(s == 200 && lists(buf, "fail-1"), "attention lists fail-1: %s",
          body_of(buf));
    /* children: GET instances?parent=REF (the parent's exact bytes) */
    snprintf(path, sizeof(path), "/api/v1/instances?parent=%s&count=1", pref);
    s = get_path(port, auth, path, buf, sizeof(buf));
    doc = json_of(buf);
    CHECK(s == 200 && lists(buf, "child-1") &&
              json_array_size(json_object_get(doc, "instances")) == 1 &&
              json_integer_value(json_object_get(doc, "total")) == 1,
          "children of the parent: %d %.300s", s, body_of(buf));
    json_decref(doc);
    snprintf(path, sizeof(path), "/api/v1/instances?parent=%s&count=1", cref);
    s = get_path(port, auth, path, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"total\":0") != NULL,
          "children of child-1: %d %.300s", s, body_of(buf));
    s = get_path(port, auth, "/api/v1/instances?attention=1&id_prefix=child-",
                 buf, sizeof(buf));
    CHECK(s == 200 && !lists(buf, "child-1"), "attention lists child-1: %s",
          body_of(buf));
}

/* ---- sign-in, the front door, the backoff, operators -------------------- */

/* The value of header @p name in the response @p resp (its first), into
 * @p out; 0, or -1 when absent. */
static int header_of(const char *resp, const char *name, char *out, size_t size)
{
    const char *end = strstr(resp, "\r\n\r\n");
    size_t nlen = strlen(name);
    for (const char *p = resp; p != NULL && (end == NULL || p < end);) {
        const char *line = p;
        p = strstr(p, "\r\n");
        if (p != NULL)
            p += 2;
        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            snprintf(out, size, "%.*s", (int)strcspn(v, "\r\n"), v);
            return 0;
        }
    }
    return -1;
}

/* How many lines of @p resp start a response ("HTTP/1.x NNN"). */
static int status_lines(const char *resp)
{
    int n = 0;
    for (const char *p = resp; p != NULL && *p;) {
        n += strncmp(p, "HTTP/1.", 7) == 0;
        p = strstr(p, "\r\n");
        if (p != NULL)
            p += 2;
    }
    return n;
}

/* 1 when @p resp carries duro's headers: the CSP and nosniff, once. */
static int has_duro_headers(const char *resp)
{
    const char *csp = "Content-Security-Policy: default-src 'none'";
    const char *first = strstr(resp, csp);
    return first != NULL && strstr(first + 1, csp) == NULL &&
           strstr(resp, "X-Content-Type-Options: nosniff") != NULL &&
           strstr(resp, "X-Frame-Options: DENY") != NULL;
}

/* POST /api/v1/session {"KIND":"SECRET"} as the page does; the status,
 * and the session id into @p id ("" when none). */
static int sign_in(unsigned port, const char *kind, const char *secret,
                   char *id, size_t id_size, char *buf, size_t size)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"%s\":\"%s\"}", kind, secret);
    int s = req(port, "POST", "/api/v1/session",
                "Content-Type: application/json\r\nSec-Fetch-Site: "
                "same-origin\r\n",
                body, buf, size);
    id[0] = '\0';
    json_t *doc = json_loads(body_of(buf), 0, NULL);
    const char *v = json_string_value(json_object_get(doc, "session"));
    if (v != NULL)
        snprintf(id, id_size, "%s", v);
    json_decref(doc);
    return s;
}

/* The string @p key of the JSON body of @p resp into @p out ("" when
 * absent). */
static void json_field(const char *resp, const char *key, char *out,
                       size_t size)
{
    json_t *doc = json_loads(body_of(resp), 0, NULL);
    const char *v = json_string_value(json_object_get(doc, key));
    snprintf(out, size, "%s", v != NULL ? v : "");
    json_decref(doc);
}

/* Item 1 of issue 22: no ambient credential. The session is a random id
 * (not the token), sent as a header; no cookie is set or taken. */
static void test_sessions(unsigned port)
{
    static char buf[65536];
    char id[128], hdr[512], who[128];
    int s = sign_in(port, "token", token, id, sizeof(id), buf, sizeof(buf));
    CHECK(s == 200, "session: %d %s", s, buf);
    CHECK(strstr(buf, "Set-Cookie") == NULL, "a cookie was set: %s", buf);
    CHECK(strstr(buf, token) == NULL, "the token came back: %s", buf);
    CHECK(strlen(id) == 64 && strspn(id, "0123456789abcdef") == 64,
          "session id '%s'", id);
    json_field(buf, "requested_by", who, sizeof(who));
    CHECK(strncmp(who, "ui:", 3) == 0, "requested_by '%s'", who);
    snprintf(hdr, sizeof(hdr), "X-Duro-Session: %s\r\n", id);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 200, "summary with the session: %d", s);
    /* the page's POSTs carry it too (and Sec-Fetch-Site) */
    snprintf(hdr, sizeof(hdr),
             "X-Duro-Session: %s\r\nContent-Type: application/json\r\n"
             "Sec-Fetch-Site: same-origin\r\n",
             id);
    s = req(port, "POST", "/api/v1/cancel", hdr, "{\"ref\":\"bm9uZQ\"}", buf,
            sizeof(buf));
    CHECK(s == 404, "a POST with the session reaches the route: %d", s);
    /* the cookie of old is no credential, even holding the token */
    snprintf(hdr, sizeof(hdr), "Cookie: duro_ui_%u=%s\r\n", port, token);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 401, "the token as a cookie signed in: %d", s);
    CHECK(has_duro_headers(buf) && strstr(buf, "Set-Cookie") == NULL, "401: %s",
          buf);
    /* an unknown session is 401, and the page's own request never sends
     * its session as a cookie */
    s = req(port, "GET", "/api/v1/summary",
            "X-Duro-Session: "
            "00000000000000000000000000000000000000000000000000000000000000"
            "00\r\n",
            NULL, buf, sizeof(buf));
    CHECK(s == 401, "an unknown session: %d", s);
    /* a wrong token in the sign-in form: 401, no session */
    s = sign_in(port, "token", "nope-nope-nope-nope", id, sizeof(id), buf,
                sizeof(buf));
    CHECK(s == 401 && id[0] == '\0' && strstr(buf, "Set-Cookie") == NULL,
          "bad session: %d %s", s, buf);
    /* logout ends the session */
    s = sign_in(port, "token", token, id, sizeof(id), buf, sizeof(buf));
    snprintf(hdr, sizeof(hdr),
             "X-Duro-Session: %s\r\nContent-Type: application/json\r\n"
             "Sec-Fetch-Site: same-origin\r\n",
             id);
    s = req(port, "POST", "/api/v1/logout", hdr, "{}", buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"ended\":true") != NULL, "logout: %d %s", s,
          buf);
    snprintf(hdr, sizeof(hdr), "X-Duro-Session: %s\r\n", id);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 401, "a session after logout: %d", s);
}

/* Item 4: what MHD 0.9.75 would refuse with its own pages (no CSP, and a
 * 400 whose status line and headers went out twice) is refused by the
 * front door with duro's headers, once. */
static void test_early_refusals(unsigned port, const char *auth)
{
    static char buf[65536];
    size_t big = 100 * 1024;
    char *raw = malloc(big + 4096);
    if (raw == NULL)
        die("out of memory");
    struct {
        const char *what;
        int status;
    } cases[] = {
        {"a 100 KB request line", 414},
        {"a 20 KB header", 431},
        {"a header line without a colon", 400},
        {"a folded header line", 400},
        {"HTTP/2.0", 505},
        {"a request line without a version", 400},
        {"not HTTP (a TLS hello)", 400},
        {"a chunked body", 411},
        {"Content-Length: 12abc", 400},
        {"200 cookies", 431},
        {"no Host", 400},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = 0;
        switch (i) {
        case 0:
            n = snprintf(raw, 64, "GET /");
            memset(raw + n, 'a', big);
            n += (int)big;
            n += snprintf(raw + n, 4096,
                          " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                          "Connection: close\r\n\r\n",
                          port);
            break;
        case 1:
            n = snprintf(raw, 4096,
                         "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                         "X-Big: ",
                         port);
            memset(raw + n, 'b', 20 * 1024);
            n += 20 * 1024;
            n += snprintf(raw + n, 64, "\r\n\r\n");
            break;
        case 2:
            n = snprintf(raw, 4096,
                         "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nfoo\r\n\r\n",
                         port);
            break;
        case 3:
            n = snprintf(raw, 4096,
                         "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nX-A: b\r\n"
                         " folded\r\n\r\n",
                         port);
            break;
        case 4:
            n = snprintf(raw, 4096,
                         "GET / HTTP/2.0\r\nHost: 127.0.0.1:%u\r\n\r\n", port);
            break;
        case 5:
            n = snprintf(raw, 4096, "GET /\r\n\r\n");
            break;
        case 6:
            memcpy(raw, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
            n = 11;
            break;
        case 7:
            n = snprintf(
                raw, 4096,
                "POST /api/v1/cancel HTTP/1.1\r\nHost: "
                "127.0.0.1:%u\r\n%sContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                port, auth);
            break;
        case 8:
            n = snprintf(raw, 4096,
                         "POST /api/v1/cancel HTTP/1.1\r\nHost: "
                         "127.0.0.1:%u\r\n%sContent-Type: application/json\r\n"
                         "Content-Length: 12abc\r\n\r\n{}",
                         port, auth);
            break;
        case 9:
            n = snprintf(
                raw, 4096,
                "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nCookie: ", port);
            for (int k = 0; k < 200; k++)
                n += snprintf(raw + n, 16, "c%d=1; ", k);
            n += snprintf(raw + n, 16, "\r\n\r\n");
            break;
        default:
            n = snprintf(raw, 4096, "GET / HTTP/1.1\r\n\r\n");
            break;
        }
        int s = http(port, raw, (size_t)n, buf, sizeof(buf));
        CHECK(s == cases[i].status, "%s: %d, not %d: %.200s", cases[i].what, s,
              cases[i].status, buf);
        CHECK(has_duro_headers(buf), "%s: without duro's headers: %.600s",
              cases[i].what, buf);
        CHECK(status_lines(buf) == 1, "%s: %d status lines: %.600s",
              cases[i].what, status_lines(buf), buf);
        CHECK(strstr(body_of(buf), "{\"error\":{\"code\":") == body_of(buf),
              "%s: body %s", cases[i].what, body_of(buf));
    }
    free(raw);
    /* the limits leave room: a 6 KB path and 60 header lines are served */
    raw = malloc(16384);
    if (raw == NULL)
        die("out of memory");
    int n = snprintf(raw, 64, "GET /static/");
    memset(raw + n, 'p', 6000);
    n += 6000;
    n += snprintf(raw + n, 4096, " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n", port);
    for (int k = 0; k < 60; k++)
        n += snprintf(raw + n, 64, "X-Line-%d: %d\r\n", k, k);
    n += snprintf(raw + n, 64, "\r\n");
    int s = http(port, raw, (size_t)n, buf, sizeof(buf));
    CHECK(s == 404 && has_duro_headers(buf), "a long path: %d %.300s", s, buf);
    free(raw);
}

/* Item 6: the 421 names each Host it answers once, [::1] included. */
static void test_421_names(unsigned port, const char *auth)
{
    static char buf[65536];
    char hdr[512], want[64];
    snprintf(hdr, sizeof(hdr), "Host: evil.example:%u\r\n%s", port, auth);
    int s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 421, "bad Host: %d", s);
    const char *names[] = {"127.0.0.1", "localhost", "[::1]"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(want, sizeof(want), "%s:%u", names[i], port);
        const char *at = strstr(body_of(buf), want);
        CHECK(at != NULL && strstr(at + 1, want) == NULL,
              "421 names %s other than once: %s", want, body_of(buf));
    }
}

/* Runs `duro ui` with @p extra until it exits (it must, within 10 s); its
 * exit status, and its stderr into @p err. */
static int ui_exit_status(const char *const *extra, char *err, size_t size)
{
    char db[600], errfile[600];
    snprintf(db, sizeof(db), "sqlite:%s/s.db", dir);
    snprintf(errfile, sizeof(errfile), "%s/exit.err", dir);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        const char *argv[32] = {duro_bin, "--db",     db,
                                "ui",     "--listen", "127.0.0.1:0"};
        size_t n = 6;
        for (size_t i = 0; extra[i] != NULL; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        FILE *e = fopen(errfile, "w");
        if (e != NULL)
            dup2(fileno(e), 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(duro_bin, (char *const *)argv);
        _exit(127);
    }
    children[SLOTS - 1] = pid;
    int st = 0;
    if (wait_exit(pid, SLOTS - 1, &st) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        children[SLOTS - 1] = 0;
        return -1;
    }
    FILE *e = fopen(errfile, "r");
    size_t got = e != NULL ? fread(err, 1, size - 1, e) : 0;
    err[got] = '\0';
    if (e != NULL)
        fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        die("cannot write %s", path);
    chmod(path, 0600);
}

/* Item 7: --tokens-file: bad lines are refused at start, by number. */
static void test_tokens_file_errors(void)
{
    char path[700], err[8192];
    snprintf(path, sizeof(path), "%s/bad-tokens", dir);
    struct {
        const char *text, *said;
    } cases[] = {
        {"# ops\nalice alice-token-0123456789\nbob\n", "line 3: expected NAME"},
        {"alice alice-token-0123456789\n\nbad/name bob-token-0123456789\n",
         "line 3: 'bad/name' is not a name"},
        {"alice short\n", "line 1: the token of 'alice' must be 16"},
        {"alice alice-token-0123456789\nalice other-token-0123456789\n",
         "line 2: 'alice' is named twice (line 1)"},
        {"alice alice-token-0123456789\nbob alice-token-0123456789\n",
         "line 2: the token of 'bob' is the token of 'alice'"},
        {"alice alice-token-0123456789 # a comment after\n",
         "line 1: expected NAME TOKEN"},
        {"# nobody\n", "no operator"},
    };
    const char *args[] = {"--tokens-file", path, NULL};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(path, cases[i].text);
        int st = ui_exit_status(args, err, sizeof(err));
        CHECK(st == 2 && strstr(err, cases[i].said) != NULL &&
                  strstr(err, "alice-token") == NULL,
              "tokens file %zu: exit %d, said %s", i, st, err);
    }
    const char *bad_operator[] = {"--operator", "no way", NULL};
    int st = ui_exit_status(bad_operator, err, sizeof(err));
    CHECK(st == 2 && strstr(err, "--operator") != NULL,
          "--operator 'no way': exit %d, said %s", st, err);
}

/* Sleeps @p ms (to let a lifetime pass, never to wait for an event). */
static void pause_ms(int ms)
{
    struct pollfd none;
    poll(&none, 0, ms);
}

/* Item 2 (and 7): the printed login code signs in once, as the operator
 * who ran duro ui; SIGUSR1 prints a fresh one; POST /api/v1/login-code
 * makes one for a bearer of a token, never for a session; each operator of
 * --tokens-file signs in with their token and is audited as ui:NAME, in
 * the instance, its history and the log. */
static void test_operators(duro_client *client, const char *db)
{
    static char buf[1 << 16];
    char path[700], hdr[1024], id[128], line[512], code[128], body[512];
    char alice_auth[128], carol_auth[128], alice_session[128];
    snprintf(path, sizeof(path), "%s/tokens", dir);
    write_file(path, "# the team\nalice alice-token-0123456789\n\n"
                     "  carol\tcarol-token-0123456789  \n");
    snprintf(alice_auth, sizeof(alice_auth),
             "Authorization: Bearer alice-token-0123456789\r\n");
    snprintf(carol_auth, sizeof(carol_auth),
             "Authorization: Bearer carol-token-0123456789\r\n");
    const char *extra[] = {"--tokens-file", path, "--operator", "bob", NULL};
    unsigned port = 0;
    pid_t pid = start_ui(4, extra, &port);

    int s = sign_in(port, "code", codes[4], id, sizeof(id), buf, sizeof(buf));
    CHECK(s == 200 && id[0] &&
              strstr(buf, "\"requested_by\":\"ui:bob\"") != NULL,
          "the printed code: %d %s", s, buf);
    s = sign_in(port, "code", codes[4], id, sizeof(id), buf, sizeof(buf));
    CHECK(s == 401 && id[0] == '\0', "a code used twice: %d %s", s, buf);

    kill(pid, SIGUSR1);
    int at = 0;
    CHECK(next_line(4, line, sizeof(line)) == 0 &&
              sscanf(line, "duro ui: http://127.0.0.1:%*u/#login=%n", &at) ==
                  0 &&
              at > 0,
          "SIGUSR1: no new login line (%s)", line);
    snprintf(code, sizeof(code), "%s", at > 0 ? line + at : "");
    CHECK(strcmp(code, codes[4]) != 0, "SIGUSR1: the same code %s", code);
    s = sign_in(port, "code", code, id, sizeof(id), buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"requested_by\":\"ui:bob\"") != NULL,
          "SIGUSR1's code: %d %s", s, buf);

    /* bob's token is --token-file's; alice's and carol's their lines' */
    char auth[128];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
    const char *bearers[] = {auth, alice_auth, carol_auth};
    const char *names[] = {"ui:bob", "ui:alice", "ui:carol"};
    for (size_t i = 0; i < 3; i++) {
        s = req(port, "GET", "/api/v1/summary", bearers[i], NULL, buf,
                sizeof(buf));
        char who[128];
        json_field(buf, "requested_by", who, sizeof(who));
        CHECK(s == 200 && strcmp(who, names[i]) == 0, "%s: %d %s", names[i], s,
              who);
    }
    s = sign_in(port, "token", "alice-token-0123456789", alice_session,
                sizeof(alice_session), buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"operator\":\"alice\"") != NULL,
          "alice's sign-in: %d %s", s, buf);

    /* a login code for a bearer of a token, as that operator */
    snprintf(hdr, sizeof(hdr), "%sContent-Type: application/json\r\n",
             alice_auth);
    s = req(port, "POST", "/api/v1/login-code", hdr, "{}", buf, sizeof(buf));
    char url_made[512];
    json_field(buf, "url", url_made, sizeof(url_made));
    const char *made = strstr(url_made, "/#login=");
    CHECK(s == 200 && made != NULL, "login-code: %d %s", s, buf);
    s = sign_in(port, "code", made != NULL ? made + 8 : "x", id, sizeof(id),
                buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"requested_by\":\"ui:alice\"") != NULL,
          "alice's login code: %d %s", s, buf);
    snprintf(hdr, sizeof(hdr),
             "X-Duro-Session: %s\r\nContent-Type: application/json\r\n"
             "Sec-Fetch-Site: same-origin\r\n",
             alice_session);
    s = req(port, "POST", "/api/v1/login-code", hdr, "{}", buf, sizeof(buf));
    CHECK(s == 403 && strstr(buf, "bearer_required") != NULL,
          "login-code for a session: %d %s", s, buf);

    /* alice cancels a running instance from the page (her session): the
     * store, its history and the log say ui:alice */
    start_runtime(db);
    if (duro_client_start(client, "alice-wait", "Waiter", NULL, NULL) !=
        DURO_OK)
        die("start alice-wait: %s", duro_errmsg());
    int64_t deadline = now_ms() + 30000;
    int running = 0;
    while (!running && now_ms() < deadline) {
        duro_instance_info *info = status_of(client, "alice-wait");
        running = info->status == DURO_STATUS_RUNNING;
        duro_free(info);
        if (!running)
            pause_ms(20);
    }
    CHECK(running, "alice-wait did not run");
    char wait_ref[64];
    ref_of("alice-wait", wait_ref);
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"reason\":\"by alice\"}",
             wait_ref);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"requested_by\":\"ui:alice\"") != NULL,
          "alice's cancel: %d %s", s, buf);
    int cancelled = 0;
    deadline = now_ms() + 30000;
    while (!cancelled && now_ms() < deadline) {
        duro_instance_info *info = status_of(client, "alice-wait");
        cancelled = info->status == DURO_STATUS_CANCELLED;
        if (cancelled)
            CHECK(info->cancelled_by != NULL &&
                      strcmp(info->cancelled_by, "ui:alice") == 0,
                  "cancelled_by %s",
                  info->cancelled_by ? info->cancelled_by : "(none)");
        duro_free(info);
        if (!cancelled)
            pause_ms(20);
    }
    CHECK(cancelled, "alice-wait was not cancelled");
    stop_runtime();
    snprintf(path, sizeof(path), "/api/v1/history?ref=%s", wait_ref);
    s = req(port, "GET", path, carol_auth, NULL, buf, sizeof(buf));
    CHECK(
        s == 200 &&
            strstr(body_of(buf), "\"kind\":\"OrchestrationCancelRequested\"") &&
            strstr(body_of(buf), "\"requested_by\":\"ui:alice\"") != NULL,
        "alice in the history: %d %s", s, body_of(buf));

    /* carol, as a script (bearer) */
    if (duro_client_start(client, "carol-1", "Idle", NULL, NULL) != DURO_OK)
        die("start carol-1: %s", duro_errmsg());
    char carol_ref[64];
    ref_of("carol-1", carol_ref);
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", carol_ref);
    snprintf(hdr, sizeof(hdr), "%sContent-Type: application/json\r\n",
             carol_auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    duro_instance_info *info = status_of(client, "carol-1");
    CHECK(s == 200 && info->cancelled_by != NULL &&
              strcmp(info->cancelled_by, "ui:carol") == 0,
          "carol's cancel: %d by %s", s,
          info->cancelled_by ? info->cancelled_by : "(none)");
    duro_free(info);

    char errfile[600];
    snprintf(errfile, sizeof(errfile), "%s/ui4.err", dir);
    CHECK(wait_file_holds(errfile, "alice-wait by ui:alice") == 0 &&
              wait_file_holds(errfile, "carol-1 by ui:carol") == 0,
          "the action log lacks ui:alice or ui:carol");
    CHECK(wait_file_holds(errfile, "token-0123456789") != 0,
          "a token in the log");
    kill(pid, SIGTERM);
    int st = 0;
    CHECK(wait_exit(pid, 4, &st) == 0, "ui 4 did not stop");
}

/* Item 2: a login code and a session end with their lifetimes
 * (--login-code-ttl, --session-ttl); a session is this server's only. */
static void test_lifetimes(unsigned main_port)
{
    static char buf[65536];
    char id[128], hdr[256];
    const char *extra[] = {"--login-code-ttl", "1s", "--session-ttl", "2s",
                           NULL};
    unsigned port = 0;
    pid_t pid = start_ui(5, extra, &port);
    int64_t printed = now_ms(); /* the code was made before it was printed */
    int s = sign_in(port, "token", token, id, sizeof(id), buf, sizeof(buf));
    int64_t signed_in = now_ms();
    CHECK(s == 200 && id[0], "sign-in: %d", s);
    snprintf(hdr, sizeof(hdr), "X-Duro-Session: %s\r\n", id);
    s = req(main_port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 401, "another server's session: %d", s);
    pause_ms(
        (int)(printed + 1500 - now_ms() > 0 ? printed + 1500 - now_ms() : 0));
    char none[128];
    s = sign_in(port, "code", codes[5], none, sizeof(none), buf, sizeof(buf));
    CHECK(s == 401 && none[0] == '\0' && strstr(buf, "expired") != NULL,
          "an expired code: %d %s", s, buf);
    pause_ms((int)(signed_in + 2500 - now_ms() > 0 ? signed_in + 2500 - now_ms()
                                                   : 0));
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 401, "an expired session: %d", s);
    kill(pid, SIGTERM);
    int st = 0;
    CHECK(wait_exit(pid, 5, &st) == 0, "ui 5 did not stop");
}

/* Item 5: failed sign-ins are logged (count, address, never the secret)
 * and slowed: past three, each new failure makes token checks wait, said
 * with 429 and Retry-After; N correct tokens are answered with no wait.
 * A login code still signs in while tokens wait. */
static void test_backoff(void)
{
    static char buf[65536];
    char hdr[256], value[64], id[128];
    char auth[128];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
    unsigned port = 0;
    pid_t pid = start_ui(6, NULL, &port);
    enum { N = 8 };
    for (int i = 0; i < N; i++) {
        int s =
            req(port, "GET", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
        CHECK(s == 200 &&
                  header_of(buf, "Retry-After", value, sizeof(value)) != 0,
              "correct token %d: %d", i, s);
    }
    long waits_s = 0;
    int slowed = 0;
    for (int i = 0; i < N; i++) {
        snprintf(hdr, sizeof(hdr),
                 "Authorization: Bearer wrong-token-%02d-0123456789\r\n", i);
        int s =
            req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
        int said = header_of(buf, "Retry-After", value, sizeof(value)) == 0;
        CHECK(i < 3 ? s == 401 && !said : s == 429 && said,
              "wrong token %d: %d, Retry-After %s", i, s, said ? value : "-");
        if (s == 429) {
            slowed++;
            waits_s += strtol(value, NULL, 10);
            CHECK(strstr(buf, "\"code\":\"too_many_failures\"") != NULL &&
                      strstr(buf, "\"failures\":") != NULL,
                  "429: %s", body_of(buf));
        }
    }
    CHECK(slowed == N - 3 && waits_s >= N - 3,
          "%d wrong tokens: %d slowed, %ld s of waits reported", N, slowed,
          waits_s);
    /* a wrong token already seen: 401 at once, not counted again */
    int s = req(port, "GET", "/api/v1/summary",
                "Authorization: Bearer wrong-token-00-0123456789\r\n", NULL,
                buf, sizeof(buf));
    CHECK(s == 401, "a repeated wrong token: %d", s);
    /* the printed login code is never held up */
    s = sign_in(port, "code", codes[6], id, sizeof(id), buf, sizeof(buf));
    CHECK(s == 200 && id[0], "the login code while tokens wait: %d %s", s, buf);
    /* the wait ends: the right token is taken again */
    int64_t deadline = now_ms() + 60000;
    do {
        s = req(port, "GET", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
        if (s == 429)
            pause_ms(200);
    } while (s == 429 && now_ms() < deadline);
    CHECK(s == 200, "the right token after the wait: %d", s);
    char errfile[600];
    snprintf(errfile, sizeof(errfile), "%s/ui6.err", dir);
    CHECK(wait_file_holds(errfile, "failed sign-in from 127.0.0.1:") == 0,
          "no log line of a failed sign-in");
    CHECK(wait_file_holds(errfile, "wrong-token") != 0 &&
              wait_file_holds(errfile, token) != 0,
          "a secret in the log");
    kill(pid, SIGTERM);
    int st = 0;
    CHECK(wait_exit(pid, 6, &st) == 0, "ui 6 did not stop");
}

static int connect_to(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect: %s", strerror(errno));
    return fd;
}

/* 1 while the server has neither answered nor closed @p fd. */
static int still_open(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    return poll(&p, 1, 0) == 0;
}

/* How many lines of file @p path hold @p text. */
static int lines_holding(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, text) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

/* Item 3: 200 idle and 32 trickling connections (as many as took the
 * console down before) do not keep a request out; past the waiting
 * limit the oldest is closed, said in one line; a request whose headers
 * do not come within the deadline is answered 408. */
static void test_lockout(void)
{
    static char buf[65536];
    char auth[128], raw[512], errfile[600];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2048) {
        rl.rlim_cur = rl.rlim_max < 2048 ? rl.rlim_max : 2048;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned port = 0;
    pid_t pid = start_ui(7, NULL, &port);
    snprintf(errfile, sizeof(errfile), "%s/ui7.err", dir);
    enum { IDLE = 200, TRICKLING = 32, MORE = 400 };
    static int idle[IDLE], trickling[TRICKLING], more[MORE];
    for (int i = 0; i < IDLE; i++)
        idle[i] = connect_to(port);
    for (int i = 0; i < TRICKLING; i++) {
        trickling[i] = connect_to(port);
        if (send(trickling[i], "GET /api/v1/summ", 16, MSG_NOSIGNAL) != 16)
            die("send: %s", strerror(errno));
    }
    int n = snprintf(raw, sizeof(raw),
                     "GET /api/v1/summary HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                     "%sConnection: close\r\n\r\n",
                     port, auth);
    /* The issue asks for an answer within a second; the deadline here is
     * 5 s, generous for a loaded machine and still half the 10 s the door
     * gives each hostile connection: they are checked below to be all
     * still open after the answer, so it did not get in by their closing. */
    int s = http_within(port, raw, (size_t)n, buf, sizeof(buf), 5000);
    CHECK(s == 200,
          "a request among %d idle and %d trickling connections: "
          "%d %.200s",
          IDLE, TRICKLING, s, buf);
    int open = 0;
    for (int i = 0; i < IDLE; i++)
        open += still_open(idle[i]);
    for (int i = 0; i < TRICKLING; i++)
        open += still_open(trickling[i]);
    CHECK(open == IDLE + TRICKLING,
          "%d of the %d hostile connections were closed before the answer",
          IDLE + TRICKLING - open, IDLE + TRICKLING);
    /* past UI_WAITING_MAX (512) the oldest is closed, and it is said once */
    for (int i = 0; i < MORE; i++)
        more[i] = connect_to(port);
    s = http_within(port, raw, (size_t)n, buf, sizeof(buf), 5000);
    CHECK(s == 200, "a request among %d waiting connections: %d",
          IDLE + TRICKLING + MORE, s);
    int64_t deadline = now_ms() + 10000;
    while (still_open(idle[0]) && now_ms() < deadline)
        pause_ms(20);
    CHECK(!still_open(idle[0]), "the oldest waiting connection is open");
    CHECK(wait_file_holds(errfile, "were waiting for their request") == 0,
          "the closing of the oldest was not said");
    int said = lines_holding(errfile, "were waiting for their request");
    CHECK(said >= 1 && said <= 2, "said %d times", said);
    CHECK(lines_holding(errfile, "connection limit") == 0,
          "MHD's connection-limit lines");
    for (int i = 0; i < IDLE; i++)
        close(idle[i]);
    for (int i = 0; i < MORE; i++)
        close(more[i]);
    /* In the HTTP server, one that has not signed in cannot hold a place:
     * 300 sign-ins whose body never comes (more than UI_SERVING_MAX, 256)
     * do not keep a request out, the oldest is closed to make room, and
     * the others when they have taken 10 s. */
    enum { SLOW = 300 };
    static int slow[SLOW];
    char slow_raw[512];
    int slow_n = snprintf(slow_raw, sizeof(slow_raw),
                          "POST /api/v1/session HTTP/1.1\r\nHost: "
                          "127.0.0.1:%u\r\nContent-Type: application/json\r\n"
                          "Sec-Fetch-Site: same-origin\r\nContent-Length: "
                          "100\r\n\r\n{",
                          port);
    int64_t newest_at = 0; /* when the newest was connected */
    for (int i = 0; i < SLOW; i++) {
        newest_at = now_ms();
        slow[i] = connect_to(port);
        if (send(slow[i], slow_raw, (size_t)slow_n, MSG_NOSIGNAL) != slow_n)
            die("send: %s", strerror(errno));
    }
    /* as above: 5 s, generous, and half what the slow ones may take. A
     * 503 ("try again") is the door's answer while the HTTP server has not
     * yet reaped the connections it was told to close (twice
     * UI_SERVING_MAX held): on a loaded machine it can lag; the request
     * must get through within the 5 s all the same. */
    int64_t until = now_ms() + 5000;
    do {
        int64_t left = until - now_ms();
        s = http_within(port, raw, (size_t)n, buf, sizeof(buf),
                        left > 0 ? (int)left : 1);
        if (s == 503)
            pause_ms(50);
    } while (s == 503 && now_ms() < until);
    CHECK(s == 200, "a request among %d slow sign-ins: %d", SLOW, s);
    deadline = now_ms() + 10000;
    while (still_open(slow[0]) && now_ms() < deadline)
        pause_ms(20);
    CHECK(!still_open(slow[0]), "the oldest slow sign-in is open");
    /* closed before its own 10 s (counted from its connect, which the
     * server's clock can only follow): closed to make room, wrongly; on a
     * loaded machine the wait above may take long enough for the newest to
     * reach its 10 s, which is no failure */
    /* (or answered 503 by the door, said so, when the HTTP server lagged
     * as above: never closed to make room) */
    CHECK(still_open(slow[SLOW - 1]) || now_ms() - newest_at >= 10000 ||
              lines_holding(errfile, "a new one was answered 503") > 0,
          "the newest slow sign-in was closed at once");
    CHECK(wait_file_holds(errfile, "the oldest that had not signed in") == 0,
          "making room was not said");
    /* a trickler gets 408, with duro's headers, at the deadline */
    read_until_within(trickling[TRICKLING - 1], buf, 0, sizeof(buf), NULL,
                      30000);
    CHECK(strncmp(buf, "HTTP/1.1 408 ", 13) == 0 && has_duro_headers(buf),
          "a trickler's end: %.300s", buf);
    for (int i = 0; i < TRICKLING; i++)
        close(trickling[i]);
    deadline = now_ms() + 30000;
    int slow_open = SLOW;
    while (slow_open > 0 && now_ms() < deadline) {
        slow_open = 0;
        for (int i = 0; i < SLOW; i++)
            slow_open += still_open(slow[i]);
        if (slow_open > 0)
            pause_ms(50);
    }
    CHECK(slow_open == 0, "%d slow sign-ins still open after 30 s", slow_open);
    for (int i = 0; i < SLOW; i++)
        close(slow[i]);
    kill(pid, SIGTERM);
    int st = 0;
    CHECK(wait_exit(pid, 7, &st) == 0, "ui 7 did not stop");
}

/* The ids listed by the GET instances answer in @p resp, comma-separated,
 * into @p out; *@p next the next_cursor (or "" when null), *@p total
 * the total (or -1). */
static void listed_ids(const char *resp, char *out, size_t size, char *next,
                       size_t next_size, long long *total)
{
    json_t *doc = json_of(resp);
    size_t i, o = 0;
    json_t *it;
    out[0] = '\0';
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        o += (size_t)snprintf(out + o, size - o, "%s%s", i ? "," : "",
                              json_string_value(json_object_get(it, "id")));
        if (o >= size)
            break;
    }
    const char *n = json_string_value(json_object_get(doc, "next_cursor"));
    snprintf(next, next_size, "%s", n != NULL ? n : "");
    json_t *t = json_object_get(doc, "total");
    *total = json_is_integer(t) ? (long long)json_integer_value(t) : -1;
    json_decref(doc);
}

/* Pages through GET instances?@p query with limit @p limit from the start
 * to the end; the ids of every page in @p out (comma-separated); the
 * number of pages, or -1 on an error answer. */
static int page_through(unsigned port, const char *auth, const char *query,
                        int limit, char *out, size_t size)
{
    static char buf[1 << 20];
    char path[1024], next[256] = "", ids[8192];
    long long total;
    size_t o = 0;
    int pages = 0;
    out[0] = '\0';
    do {
        snprintf(path, sizeof(path), "/api/v1/instances?%s&limit=%d%s%s", query,
                 limit, next[0] ? "&cursor=" : "", next);
        if (req(port, "GET", path, auth, NULL, buf, sizeof(buf)) != 200)
            return -1;
        listed_ids(buf, ids, sizeof(ids), next, sizeof(next), &total);
        if (ids[0] != '\0')
            o += (size_t)snprintf(out + o, size - o, "%s%s", o ? "," : "", ids);
        pages++;
    } while (next[0] != '\0' && pages < 1000 && o < size);
    return pages;
}

/* The store query API through GET instances (order, count, several
 * statuses, name prefix and substring, attention over the query in
 * pages), GET counts and GET control-events, over a store no runtime
 * changes any more. */
static void test_views_query(unsigned port, const char *auth,
                             duro_client *client)
{
    static char buf[1 << 20];
    char one[16384], all[16384], next[256];
    long long total = 0;

    /* newest first: created_ms descending; updated likewise */
    const char *orders[][2] = {{"created", "created_at_ms"},
                               {"updated", "updated_at_ms"}};
    for (size_t k = 0; k < 2; k++) {
        char path[128];
        snprintf(path, sizeof(path),
                 "/api/v1/instances?order=%s&limit=1000&count=1", orders[k][0]);
        int s = get_path(port, auth, path, buf, sizeof(buf));
        json_t *doc = json_of(buf);
        json_t *items = json_object_get(doc, "instances");
        int sorted = json_array_size(items) > 10;
        for (size_t i = 1; i < json_array_size(items); i++)
            sorted &=
                json_integer_value(json_object_get(json_array_get(items, i - 1),
                                                   orders[k][1])) >=
                json_integer_value(
                    json_object_get(json_array_get(items, i), orders[k][1]));
        CHECK(s == 200 && sorted &&
                  json_integer_value(json_object_get(doc, "total")) ==
                      (json_int_t)json_array_size(items),
              "order=%s: %d, %zu rows", orders[k][0], s,
              json_array_size(items));
        json_decref(doc);
    }
    /* paging newest first: every instance once, the same as one page */
    int pages = page_through(port, auth, "order=created", 7, one, sizeof(one));
    page_through(port, auth, "order=created", 1000, all, sizeof(all));
    CHECK(pages > 2 && strcmp(one, all) == 0,
          "order=created in pages of 7 (%d pages) differs from one page",
          pages);
    /* attention over the query, in pages of 1 and 2: the same rows as
     * in one page, each once */
    page_through(port, auth, "attention=1", 1000, all, sizeof(all));
    CHECK(strstr(all, "fail-1") != NULL && strstr(all, "att-1") != NULL &&
              strstr(all, "att-2") == NULL && strstr(all, "child-1") == NULL,
          "attention=1: %s", all);
    for (int limit = 1; limit <= 2; limit++) {
        pages =
            page_through(port, auth, "attention=1", limit, one, sizeof(one));
        CHECK(pages > 1 && strcmp(one, all) == 0,
              "attention=1 in pages of %d: %s, not %s", limit, one, all);
        pages = page_through(port, auth, "attention=1&order=created", limit,
                             one, sizeof(one));
        char newest[16384];
        page_through(port, auth, "attention=1&order=created", 1000, newest,
                     sizeof(newest));
        CHECK(pages > 1 && strcmp(one, newest) == 0,
              "attention=1, newest first, in pages of %d: %s, not %s", limit,
              one, newest);
    }
    int s =
        get_path(port, auth, "/api/v1/instances?attention=1&count=1&limit=1",
                 buf, sizeof(buf));
    listed_ids(buf, one, sizeof(one), next, sizeof(next), &total);
    {
        size_t n = all[0] ? 1 : 0;
        for (const char *c = all; *c; c++)
            n += *c == ',';
        CHECK(s == 200 && total == (long long)n,
              "attention total %lld, listed %zu", total, n);
    }
    /* several statuses, and their count */
    s = get_path(port, auth,
                 "/api/v1/instances?status=completed,failed&limit=1000&count=1",
                 buf, sizeof(buf));
    json_t *doc = json_of(buf);
    size_t i;
    json_t *it;
    int only = 1;
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        const char *st = json_string_value(json_object_get(it, "status"));
        only &= strcmp(st, "completed") == 0 || strcmp(st, "failed") == 0;
    }
    CHECK(
        s == 200 && only &&
            json_integer_value(json_object_get(doc, "total")) ==
                (json_int_t)json_array_size(json_object_get(doc, "instances")),
        "status=completed,failed: %d", s);
    json_decref(doc);
    /* names by prefix and by substring */
    s = get_path(port, auth, "/api/v1/instances?name_prefix=Wai&limit=1000",
                 buf, sizeof(buf));
    CHECK(s == 200 && lists(buf, "wait-0") && !lists(buf, "plain-2"),
          "name_prefix=Wai: %d", s);
    s = get_path(port, auth,
                 "/api/v1/instances?name_contains=are&limit=1000&count=1", buf,
                 sizeof(buf));
    listed_ids(buf, one, sizeof(one), next, sizeof(next), &total);
    CHECK(s == 200 && strstr(one, "par") != NULL && total == 1,
          "name_contains=are (Parent): %d %s %lld", s, one, total);
    /* by orchestration version (query version 3): "" is the default
     * version, which every instance that ran here has; nothing has
     * "nope" */
    s = get_path(port, auth, "/api/v1/instances?limit=1000", buf, sizeof(buf));
    doc = json_of(buf);
    long long by_default = 0;
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        const char *v = json_string_value(json_object_get(it, "version"));
        by_default += v != NULL && v[0] == '\0';
    }
    json_decref(doc);
    s = get_path(port, auth, "/api/v1/instances?version=&limit=1000&count=1",
                 buf, sizeof(buf));
    listed_ids(buf, one, sizeof(one), next, sizeof(next), &total);
    CHECK(s == 200 && by_default > 0 && total == by_default,
          "version= (the default version): %d, %lld of %lld", s, total,
          by_default);
    s = get_path(port, auth, "/api/v1/instances?version=nope&count=1", buf,
                 sizeof(buf));
    listed_ids(buf, one, sizeof(one), next, sizeof(next), &total);
    CHECK(s == 200 && total == 0 && one[0] == '\0', "version=nope: %d %s", s,
          body_of(buf));
    s = get_path(port, auth, "/api/v1/counts?version=nope", buf, sizeof(buf));
    doc = json_of(buf);
    CHECK(s == 200 && json_integer_value(json_object_get(doc, "total")) == 0,
          "counts?version=nope: %d %s", s, body_of(buf));
    json_decref(doc);
    /* GET counts follows the filter */
    s = get_path(port, auth, "/api/v1/counts?name_prefix=Wai", buf,
                 sizeof(buf));
    doc = json_of(buf);
    json_t *counts = json_object_get(doc, "counts");
    CHECK(s == 200 &&
              json_integer_value(json_object_get(counts, "completed")) == 4 &&
              json_integer_value(json_object_get(counts, "pending")) == 0,
          "counts?name_prefix=Wai: %d %s", s, body_of(buf));
    json_decref(doc);
    s = get_path(port, auth, "/api/v1/counts?attention=1", buf, sizeof(buf));
    doc = json_of(buf);
    {
        size_t n = 1;
        for (const char *c = all; *c; c++)
            n += *c == ',';
        CHECK(s == 200 &&
                  json_integer_value(json_object_get(doc, "total")) ==
                      (json_int_t)n &&
                  json_integer_value(json_object_get(
                      json_object_get(doc, "counts"), "completed")) == 0,
              "counts?attention=1: %s", body_of(buf));
    }
    json_decref(doc);
    s = get_path(port, auth, "/api/v1/counts?id_prefix=att-", buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"pending\":4") != NULL,
          "counts?id_prefix=att-: %s", body_of(buf));
    /* refused: a bad order, a prefix in another order, status in counts */
    const char *refused[] = {"/api/v1/instances?order=oldest",
                             "/api/v1/instances?order=created&id_prefix=a",
                             "/api/v1/instances?count=yes",
                             "/api/v1/instances?parent=!!",
                             "/api/v1/instances?id_prefix=a&name_contains=b",
                             "/api/v1/instances?id_prefix=a&version=1",
                             "/api/v1/instances?order=created&cursor=nonsense",
                             "/api/v1/counts?status=running",
                             "/api/v1/control-events?action=purge",
                             "/api/v1/control-events?kind=cancel"};
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        s = get_path(port, auth, refused[k], buf, sizeof(buf));
        CHECK(s == 400, "%s: %d %.200s", refused[k], s, body_of(buf));
    }
    /* control events: plain-1's cancel by ui:NAME ("test"), newest first */
    s = get_path(port, auth, "/api/v1/control-events?action=cancel&limit=1000",
                 buf, sizeof(buf));
    doc = json_of(buf);
    json_t *plain = NULL;
    int newest_first = 1;
    int64_t prev = INT64_MAX;
    json_array_foreach(json_object_get(doc, "events"), i, it)
    {
        int64_t at = json_integer_value(json_object_get(it, "at_ms"));
        newest_first &= at <= prev;
        prev = at;
        newest_first &= strcmp(json_string_value(json_object_get(it, "action")),
                               "cancel") == 0;
        if (strcmp(json_string_value(json_object_get(it, "id")), "plain-1") ==
            0)
            plain = it;
    }
    const char *by =
        plain ? json_string_value(json_object_get(plain, "requested_by")) : "";
    CHECK(s == 200 && newest_first && plain != NULL &&
              strcmp(json_string_value(json_object_get(plain, "reason")),
                     "test") == 0 &&
              strncmp(by, "ui:", 3) == 0 &&
              json_object_get(plain, "ref") != NULL,
          "control-events: %d %.300s", s, body_of(buf));
    char q[256];
    snprintf(q, sizeof(q),
             "/api/v1/control-events?requested_by=%s&action=terminate,cancel",
             by != NULL ? by : "");
    json_decref(doc);
    s = get_path(port, auth, q, buf, sizeof(buf));
    doc = json_of(buf);
    int mine = json_array_size(json_object_get(doc, "events")) > 0;
    json_array_foreach(json_object_get(doc, "events"), i, it) mine &=
        strncmp(json_string_value(json_object_get(it, "requested_by")),
                "ui:", 3) == 0;
    CHECK(s == 200 && mine, "control-events by requester: %d %.300s", s,
          body_of(buf));
    json_decref(doc);
    /* paged by one: newest first, each once */
    s = get_path(port, auth, "/api/v1/control-events?limit=1", buf,
                 sizeof(buf));
    doc = json_of(buf);
    const char *c1 = json_string_value(json_object_get(doc, "next_cursor"));
    char path[512];
    snprintf(path, sizeof(path), "/api/v1/control-events?limit=1&cursor=%s",
             c1 != NULL ? c1 : "");
    char first_id[64];
    snprintf(
        first_id, sizeof(first_id), "%s:%lld",
        json_string_value(json_object_get(
            json_array_get(json_object_get(doc, "events"), 0), "id")),
        (long long)json_integer_value(json_object_get(
            json_array_get(json_object_get(doc, "events"), 0), "event_id")));
    json_decref(doc);
    s = get_path(port, auth, path, buf, sizeof(buf));
    doc = json_of(buf);
    json_t *second = json_array_get(json_object_get(doc, "events"), 0);
    char second_id[64];
    snprintf(second_id, sizeof(second_id), "%s:%lld",
             second ? json_string_value(json_object_get(second, "id")) : "",
             second ? (long long)json_integer_value(
                          json_object_get(second, "event_id"))
                    : 0LL);
    CHECK(c1 != NULL && s == 200 && second != NULL &&
              strcmp(first_id, second_id) != 0,
          "control-events page 2: %s then %s", first_id, second_id);
    json_decref(doc);
    (void)client;
}

/* POST @p path with @p body (JSON) on @p port; the status, the response in
 * @p buf. */
static int post_json(unsigned port, const char *auth, const char *path,
                     const char *body, char *buf, size_t size)
{
    char hdr[512];
    snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s", auth);
    return req(port, "POST", path, hdr, body, buf, size);
}

/* The schedules' routes: create (a dry run stores nothing), list,
 * describe (times in the schedule's zone, fires with their instances'
 * refs), update, pause with a note, resume, trigger, delete; a bad spec is
 * 400 with the library's message, a taken id 409, an unknown one 404,
 * unknown keys 400, and --read-only refuses every change. */
static void test_schedules_api(unsigned port, unsigned ro_port,
                               const char *auth, duro_client *client)
{
    static char buf[1 << 16];
    char body[2048], ref[64], iref[256], path[512];
    json_error_t jerr;
    int s;
    const char *spec = "{\"cron\":\"30 2 * * *\",\"time_zone\":"
                       "\"Europe/Berlin\",\"orchestration\":\"Hello\","
                       "\"input\":{\"a\":1},\"overlap\":\"allow-all\","
                       "\"timeout_ms\":7200000}";
    ref_of("nightly", ref);

    /* a dry run: the next fire times, 02:30 on Berlin's clock, nothing
     * stored */
    snprintf(body, sizeof(body),
             "{\"id\":\"nightly\",\"spec\":%s,\"dry_run\":true}", spec);
    s = post_json(port, auth, "/api/v1/schedule/create", body, buf,
                  sizeof(buf));
    json_t *doc = json_loads(body_of(buf), 0, &jerr);
    json_t *first = json_array_get(json_object_get(doc, "next_fire_times"), 0);
    const char *local = json_string_value(json_object_get(first, "time_local"));
    CHECK(s == 200 && json_is_true(json_object_get(doc, "dry_run")) &&
              json_is_false(json_object_get(doc, "created")) &&
              json_array_size(json_object_get(doc, "next_fire_times")) == 5 &&
              local != NULL && strstr(local, " 02:30 +0") != NULL &&
              json_integer_value(json_object_get(first, "time_ms")) > 0,
          "create dry run: %d %s", s, body_of(buf));
    json_decref(doc);
    duro_schedule_description *d = NULL;
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
              DURO_NOT_FOUND,
          "a dry run created the schedule");
    duro_schedule_description_free(d);

    /* bad specs: 400 with the library's message; bad bodies name the key */
    const char *bad[][2] = {
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"61 2 * * *\",\"orchestration\":"
         "\"Hello\"}}",
         "61 is out of range"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"time_zone\":"
         "\"Mars/Base\",\"orchestration\":\"Hello\"}}",
         "Mars/Base"},
        {"{\"id\":\"b\",\"spec\":{\"interval_ms\":60000,\"offset_ms\":60000,"
         "\"orchestration\":\"Hello\"}}",
         "offset"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"overlap\":"
         "\"sometimes\",\"orchestration\":\"Hello\"}}",
         "'sometimes' is none of"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":"
         "\"Hello\",\"crom\":\"x\"}}",
         "unknown key 'crom' in the spec"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":"
         "\"Hello\"},\"dryrun\":true}",
         "unknown key 'dryrun' in the body"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":"
         "\"Hello\",\"interval_ms\":\"1h\"}}",
         "spec.interval_ms must be an integer"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":"
         "\"Hello\",\"note\":\"why\"}}",
         "spec.note goes with spec.paused"},
        {"{\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":\"Hello\"}}",
         "id is required"},
        {"{\"id\":\"b\",\"spec\":{\"cron\":\"1 2 * * *\",\"orchestration\":"
         "\"Hello\",\"timeout_ms\":-1}}",
         "timeout_ms -1 is negative"},
        {"{\"id\":\"b\"}", "spec is required"},
        {"{\"id\":\"b\",\"spec\":\"30 2 * * *\"}", "spec must be an object"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        s = post_json(port, auth, "/api/v1/schedule/create", bad[k][0], buf,
                      sizeof(buf));
        CHECK(s == 400 && strstr(buf, bad[k][1]) != NULL, "create %s: %d %s",
              bad[k][0], s, body_of(buf));
    }
    CHECK(duro_client_schedule_describe(client, "b", 0, 0, &d) ==
              DURO_NOT_FOUND,
          "a refused create stored schedule b");
    duro_schedule_description_free(d);

    /* create, then the same id again: 409 (a dry run says so too) */
    snprintf(body, sizeof(body), "{\"id\":\"nightly\",\"spec\":%s}", spec);
    s = post_json(port, auth, "/api/v1/schedule/create", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"created\":true") != NULL &&
              strstr(buf, "\"requested_by\":\"ui:") != NULL,
          "create: %d %s", s, body_of(buf));
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
                  DURO_OK &&
              d->schedules[0].spec.timeout_ms == 7200000,
          "the spec's timeout_ms was not stored");
    duro_schedule_description_free(d);
    s = post_json(port, auth, "/api/v1/schedule/create", body, buf,
                  sizeof(buf));
    CHECK(s == 409 && strstr(buf, "already_exists") != NULL &&
              strstr(buf, "nightly") != NULL,
          "create again: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body),
             "{\"id\":\"nightly\",\"spec\":%s,\"dry_run\":true}", spec);
    s = post_json(port, auth, "/api/v1/schedule/create", body, buf,
                  sizeof(buf));
    CHECK(s == 409 && strstr(buf, "already_exists") != NULL,
          "create dry run of a taken id: %d %s", s, body_of(buf));

    /* list and describe */
    s = req(port, "GET", "/api/v1/schedules", auth, NULL, buf, sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    json_t *item = json_array_get(json_object_get(doc, "schedules"), 0);
    CHECK(s == 200 && item != NULL &&
              strcmp(json_string_value(json_object_get(item, "ref")), ref) ==
                  0 &&
              strcmp(json_string_value(json_object_get(
                         json_object_get(item, "spec"), "overlap")),
                     "allow-all") == 0 &&
              json_integer_value(json_object_get(item, "next_ms")) > 0 &&
              strstr(json_string_value(json_object_get(item, "next_local")),
                     " 02:30 +0") != NULL,
          "list: %d %s", s, body_of(buf));
    json_decref(doc);
    snprintf(path, sizeof(path), "/api/v1/schedule?ref=%s&next=3", ref);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(s == 200 &&
              json_array_size(json_object_get(doc, "next_fire_times")) == 3 &&
              json_array_size(json_object_get(doc, "recent_fires")) == 0 &&
              strcmp(json_string_value(json_object_get(doc, "input_text")),
                     "{\"a\":1}") == 0,
          "describe: %d %s", s, body_of(buf));
    json_decref(doc);
    const char *refused[] = {"/api/v1/schedule?ref=bm9uZQ",
                             "/api/v1/schedule?ref=*",
                             "/api/v1/schedule",
                             "/api/v1/schedule?ref=bmlnaHRseQ&nxt=3",
                             "/api/v1/schedule?ref=bmlnaHRseQ&next=101",
                             "/api/v1/schedules?all=1"};
    const int refused_status[] = {404, 400, 400, 400, 400, 400};
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        s = req(port, "GET", refused[k], auth, NULL, buf, sizeof(buf));
        CHECK(s == refused_status[k], "GET %s: %d %s", refused[k], s,
              body_of(buf));
    }

    /* update: a dry run changes nothing; the real one replaces the spec; an
     * unknown schedule is 404 */
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"spec\":{\"interval_ms\":3600000,"
             "\"orchestration\":\"Hello\"},\"dry_run\":true}",
             ref);
    s = post_json(port, auth, "/api/v1/schedule/update", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"updated\":false") != NULL,
          "update dry run: %d %s", s, body_of(buf));
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
                  DURO_OK &&
              d->schedules[0].spec.cron != NULL,
          "an update's dry run changed the spec");
    duro_schedule_description_free(d);
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"spec\":{\"interval_ms\":3600000,"
             "\"orchestration\":\"Hello\",\"overlap\":\"allow-all\"}}",
             ref);
    s = post_json(port, auth, "/api/v1/schedule/update", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"updated\":true") != NULL, "update: %d %s",
          s, body_of(buf));
    d = NULL;
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
                  DURO_OK &&
              d->schedules[0].spec.cron == NULL &&
              d->schedules[0].spec.interval_ms == 3600000,
          "the update did not replace the spec");
    duro_schedule_description_free(d);
    s = post_json(port, auth, "/api/v1/schedule/update",
                  "{\"ref\":\"bm9uZQ\",\"spec\":{\"interval_ms\":1000,"
                  "\"orchestration\":\"Hello\"}}",
                  buf, sizeof(buf));
    CHECK(s == 404 && strstr(buf, "not_found") != NULL,
          "update of no such schedule: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"spec\":{\"cron\":\"* * 31 2 * * *\","
             "\"orchestration\":\"Hello\"}}",
             ref);
    s = post_json(port, auth, "/api/v1/schedule/update", body, buf,
                  sizeof(buf));
    CHECK(s == 400 && strstr(buf, "bad_spec") != NULL &&
              strstr(buf, "cron expression") != NULL,
          "update with a bad cron: %d %s", s, body_of(buf));

    /* pause with a note, resume, trigger; unknown keys and ids refused */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"note\":\"data migration\"}",
             ref);
    s = post_json(port, auth, "/api/v1/schedule/pause", body, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"action\":\"paused\"") != NULL &&
              strstr(buf, "not touched") != NULL,
          "pause: %d %s", s, body_of(buf));
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
                  DURO_OK &&
              d->schedules[0].spec.paused &&
              strcmp(d->schedules[0].spec.note, "data migration") == 0,
          "pause did not pause with the note");
    duro_schedule_description_free(d);
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"dry_run\":true}", ref);
    s = post_json(port, auth, "/api/v1/schedule/resume", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"was_paused\":true") != NULL,
          "resume dry run: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", ref);
    s = post_json(port, auth, "/api/v1/schedule/resume", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"action\":\"resumed\"") != NULL,
          "resume: %d %s", s, body_of(buf));
    s = post_json(port, auth, "/api/v1/schedule/trigger", body, buf,
                  sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    const char *fire = json_string_value(json_object_get(doc, "instance"));
    CHECK(s == 200 && fire != NULL &&
              strncmp(fire, "nightly@trigger-", 16) == 0,
          "trigger: %d %s", s, body_of(buf));
    if (fire != NULL)
        ref_of(fire, iref);
    else
        iref[0] = '\0';
    CHECK(doc != NULL &&
              strcmp(json_string_value(json_object_get(doc, "instance_ref")),
                     iref) == 0,
          "trigger's instance_ref: %s", body_of(buf));
    duro_instance_info *info = fire != NULL ? status_of(client, fire) : NULL;
    CHECK(info != NULL, "the trigger's instance does not exist");
    duro_free(info);
    json_decref(doc);
    snprintf(path, sizeof(path), "/api/v1/schedule?ref=%s", ref);
    s = req(port, "GET", path, auth, NULL, buf, sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    json_t *f0 = json_array_get(json_object_get(doc, "recent_fires"), 0);
    CHECK(s == 200 && f0 != NULL &&
              strcmp(json_string_value(json_object_get(f0, "action")),
                     "started") == 0 &&
              strcmp(json_string_value(json_object_get(f0, "instance_ref")),
                     iref) == 0 &&
              json_string_value(json_object_get(f0, "instance_status")) != NULL,
          "the trigger's fire: %d %s", s, body_of(buf));
    json_decref(doc);
    const char *bad_change[][3] = {
        {"/api/v1/schedule/pause", "{\"ref\":\"%s\",\"reason\":\"x\"}",
         "unknown key 'reason'"},
        {"/api/v1/schedule/resume", "{\"ref\":\"%s\",\"note\":\"x\"}",
         "unknown key 'note'"},
        {"/api/v1/schedule/trigger", "{\"ref\":\"%s\",\"dry_run\":1}",
         "dry_run must be true or false"},
        {"/api/v1/schedule/pause", "{\"ref\":\"%s\",\"note\":\"\"}",
         "note is empty"},
        {"/api/v1/schedule/delete", "{}", "ref is required"},
        {"/api/v1/schedule/delete", "{\"ref\":\"*\"}",
         "not base64url of a schedule id"},
    };
    for (size_t k = 0; k < sizeof(bad_change) / sizeof(bad_change[0]); k++) {
        const char *at = strstr(bad_change[k][1], "%s");
        if (at != NULL)
            snprintf(body, sizeof(body), "%.*s%s%s",
                     (int)(at - bad_change[k][1]), bad_change[k][1], ref,
                     at + 2);
        else
            snprintf(body, sizeof(body), "%s", bad_change[k][1]);
        s = post_json(port, auth, bad_change[k][0], body, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, bad_change[k][2]) != NULL, "%s %s: %d %s",
              bad_change[k][0], body, s, body_of(buf));
    }
    const char *verbs[] = {"pause", "resume", "trigger", "delete"};
    for (size_t k = 0; k < 4; k++) {
        snprintf(path, sizeof(path), "/api/v1/schedule/%s", verbs[k]);
        s = post_json(port, auth, path, "{\"ref\":\"bm9uZQ\"}", buf,
                      sizeof(buf));
        CHECK(s == 404 && strstr(buf, "not_found") != NULL,
              "%s of no such schedule: %d %s", verbs[k], s, body_of(buf));
        /* --read-only refuses every change */
        snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", ref);
        s = post_json(ro_port, auth, path, body, buf, sizeof(buf));
        CHECK(s == 403 && strstr(buf, "read_only") != NULL,
              "read-only %s: %d %s", verbs[k], s, body_of(buf));
    }
    snprintf(body, sizeof(body), "{\"id\":\"ro\",\"spec\":%s}", spec);
    s = post_json(ro_port, auth, "/api/v1/schedule/create", body, buf,
                  sizeof(buf));
    CHECK(s == 403 && strstr(buf, "read_only") != NULL,
          "read-only create: %d %s", s, body_of(buf));
    s = req(ro_port, "GET", "/api/v1/schedules", auth, NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"read_only\":true") != NULL,
          "read-only list: %d %s", s, body_of(buf));

    /* delete: the dry run keeps it; the delete leaves its instance */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"dry_run\":true}", ref);
    s = post_json(port, auth, "/api/v1/schedule/delete", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "not touched") != NULL,
          "delete dry run: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", ref);
    s = post_json(port, auth, "/api/v1/schedule/delete", body, buf,
                  sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"action\":\"deleted\"") != NULL,
          "delete: %d %s", s, body_of(buf));
    CHECK(duro_client_schedule_describe(client, "nightly", 0, 0, &d) ==
              DURO_NOT_FOUND,
          "delete left the schedule");
    duro_schedule_description_free(d);
    s = req(port, "GET", "/api/v1/instances?id_prefix=nightly%40trigger-", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "nightly@trigger-") != NULL,
          "the triggered instance went with its schedule: %d %s", s,
          body_of(buf));
}

/* POST reset and rewind, with a runtime running: a dry run changes
 * nothing; a rewind of a failed instance runs its failed activity again
 * (fixed now: it completes) in execution 2; a reset to an explicit point
 * makes execution 3; refusals carry the library's message (409: inside a
 * turn, an execution another reset overtook, a live instance, an
 * instance that is not failed; 404: no such instance or event; 400: an
 * unknown key or a bad number); --read-only refuses (403). */
static void test_reset(unsigned port, unsigned ro_port, const char *auth,
                       duro_client *client)
{
    char hdr[256];
    snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s", auth);
    static char buf[1 << 16];
    char body[1024], fref[64], wref[64];
    json_error_t jerr;
    int s;
    fixed = 0;
    if (duro_client_start(client, "fix-1", "Fixable", "\"x\"", NULL) !=
            DURO_OK ||
        duro_client_start(client, "live-1", "Waiter", NULL, NULL) != DURO_OK)
        die("start fix-1, live-1: %s", duro_errmsg());
    CHECK(wait_status(client, "fix-1", DURO_STATUS_FAILED) == 0,
          "fix-1 did not fail");
    CHECK(wait_status(client, "live-1", DURO_STATUS_RUNNING) == 0,
          "live-1 did not run");
    ref_of("fix-1", fref);
    ref_of("live-1", wref);

    /* a dry run says where it would go and changes nothing */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"dry_run\":true}", fref);
    s = req(port, "POST", "/api/v1/rewind", hdr, body, buf, sizeof(buf));
    json_t *doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(s == 200 && doc != NULL &&
              json_is_true(json_object_get(doc, "dry_run")) &&
              json_integer_value(json_object_get(doc, "from_execution")) == 1 &&
              json_integer_value(json_object_get(doc, "execution_id")) == 2 &&
              json_integer_value(json_object_get(doc, "to_event_id")) > 0 &&
              json_integer_value(json_object_get(doc, "activities")) == 1 &&
              strcmp(json_string_value(json_object_get(doc, "was")),
                     "failed") == 0,
          "rewind dry run: %d %s", s, body_of(buf));
    json_int_t point =
        doc ? json_integer_value(json_object_get(doc, "to_event_id")) : 0;
    json_decref(doc);
    duro_instance_info *info = status_of(client, "fix-1");
    CHECK(info->status == DURO_STATUS_FAILED && info->execution_id == 1,
          "a dry run changed fix-1: status %d execution %llu", info->status,
          (unsigned long long)info->execution_id);
    duro_free(info);

    /* bad bodies: 400 naming the key, nothing changed */
    const char *bad[][2] = {
        {"/api/v1/rewind", "{\"ref\":\"%s\",\"to_event_id\":1}"},
        {"/api/v1/rewind", "{\"ref\":\"%s\",\"resaon\":\"x\"}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"to_event_id\":-1}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"to_event_id\":\"2\"}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"execution_id\":1.5}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"dry_run\":1}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"reason\":\"\"}"},
        {"/api/v1/rewind", "{\"ref\":\"%s\",\"deadline_ms\":-2}"},
        {"/api/v1/reset", "{\"ref\":\"%s\",\"deadline_ms\":\"1h\"}"},
    };
    const char *named[] = {"'to_event_id'", "'resaon'",     "to_event_id",
                           "to_event_id",   "execution_id", "dry_run",
                           "reason",        "deadline_ms",  "deadline_ms"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char *at = strstr(bad[k][1], "%s");
        snprintf(body, sizeof(body), "%.*s%s%s", (int)(at - bad[k][1]),
                 bad[k][1], fref, at + 2);
        s = req(port, "POST", bad[k][0], hdr, body, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, "bad_argument") != NULL &&
                  strstr(buf, named[k]) != NULL,
              "%s %s: %d %s", bad[k][0], body, s, body_of(buf));
    }
    s = req(port, "POST", "/api/v1/rewind", hdr, "{\"ref\":\"bm9uZQ\"}", buf,
            sizeof(buf));
    CHECK(s == 404 && strstr(buf, "not_found") != NULL,
          "rewind of no such instance: %d %s", s, body_of(buf));
    s = req(port, "POST", "/api/v1/rewind", hdr, "{}", buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "ref is required") != NULL,
          "rewind without ref: %d %s", s, body_of(buf));
    /* the execution the caller looked at must still be the current one */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"execution_id\":2}", fref);
    s = req(port, "POST", "/api/v1/rewind", hdr, body, buf, sizeof(buf));
    CHECK(s == 409 && strstr(buf, "invalid_state") != NULL,
          "rewind of an execution that is not the current one: %d %s", s,
          body_of(buf));
    /* a live instance: terminate it first */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", wref);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 409 && strstr(buf, "invalid_state") != NULL,
          "reset of a running instance: %d %s", s, body_of(buf));
    /* --read-only */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", fref);
    s = req(ro_port, "POST", "/api/v1/rewind", hdr, body, buf, sizeof(buf));
    CHECK(s == 403 && strstr(buf, "read_only") != NULL,
          "read-only rewind: %d %s", s, body_of(buf));
    s = req(ro_port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 403 && strstr(buf, "read_only") != NULL,
          "read-only reset: %d %s", s, body_of(buf));
    info = status_of(client, "fix-1");
    CHECK(info->status == DURO_STATUS_FAILED && info->execution_id == 1,
          "a refusal changed fix-1: status %d execution %llu", info->status,
          (unsigned long long)info->execution_id);
    duro_free(info);

    /* the rewind: the activity, fixed, runs again and the instance
     * completes in execution 2, which records who and why */
    fixed = 1;
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"reason\":\"fixed\",\"execution_id\":1}", fref);
    s = req(port, "POST", "/api/v1/rewind", hdr, body, buf, sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(s == 200 && doc != NULL &&
              json_is_false(json_object_get(doc, "dry_run")) &&
              json_integer_value(json_object_get(doc, "execution_id")) == 2 &&
              json_integer_value(json_object_get(doc, "to_event_id")) ==
                  point &&
              strncmp(json_string_value(json_object_get(doc, "requested_by")),
                      "ui:", 3) == 0 &&
              strcmp(json_string_value(json_object_get(doc, "reason")),
                     "fixed") == 0,
          "rewind: %d %s", s, body_of(buf));
    json_decref(doc);
    CHECK(wait_completed(client, "fix-1") == 0,
          "fix-1 did not complete after its rewind");
    info = status_of(client, "fix-1");
    CHECK(info->execution_id == 2, "fix-1 is in execution %llu, not 2",
          (unsigned long long)info->execution_id);
    duro_free(info);
    /* a completed instance is not failed: no rewind */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", fref);
    s = req(port, "POST", "/api/v1/rewind", hdr, body, buf, sizeof(buf));
    CHECK(s == 409 && strstr(buf, "invalid_state") != NULL,
          "rewind of a completed instance: %d %s", s, body_of(buf));

    /* reset: event 1 is inside the first turn, refused with the
     * library's message whole (409); an event past the end is 404; an
     * execution that is no longer the current one is 409 */
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"to_event_id\":1,\"execution_id\":2}", fref);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 409 && strstr(buf, "\"invalid\"") != NULL &&
              strstr(buf, "inside a turn") != NULL &&
              strstr(buf, "fix-1") != NULL,
          "reset inside a turn: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"to_event_id\":9999}", fref);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 404 && strstr(buf, "9999") != NULL, "reset past the end: %d %s",
          s, body_of(buf));
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"to_event_id\":%lld,\"execution_id\":1}", fref,
             (long long)point);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 409 && strstr(buf, "invalid_state") != NULL,
          "reset of an overtaken execution: %d %s", s, body_of(buf));
    /* to the same point of execution 2, explicitly: execution 3 */
    snprintf(body, sizeof(body),
             "{\"ref\":\"%s\",\"to_event_id\":%lld,\"execution_id\":2,"
             "\"dry_run\":true}",
             fref, (long long)point);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"execution_id\":3") != NULL &&
              strstr(buf, "\"was\":\"completed\"") != NULL,
          "reset dry run: %d %s", s, body_of(buf));
    /* with a new deadline, which status then shows */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t until = (int64_t)wall.tv_sec * 1000 + 3600000;
    body[strlen(body) - strlen(",\"dry_run\":true}")] = '\0';
    snprintf(body + strlen(body), sizeof(body) - strlen(body),
             ",\"deadline_ms\":%lld}", (long long)until);
    s = req(port, "POST", "/api/v1/reset", hdr, body, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"execution_id\":3") != NULL &&
              strstr(buf, "reset from duro ui") != NULL,
          "reset: %d %s", s, body_of(buf));
    info = status_of(client, "fix-1");
    CHECK(info->deadline_ms == until, "fix-1's deadline is %lld, not %lld",
          (long long)info->deadline_ms, (long long)until);
    duro_free(info);
    int64_t deadline = now_ms() + 30000;
    int done = 0;
    while (!done && now_ms() < deadline) {
        info = status_of(client, "fix-1");
        done = info->execution_id == 3 && info->status == DURO_STATUS_COMPLETED;
        duro_free(info);
        if (!done) {
            struct pollfd none;
            poll(&none, 0, 10);
        }
    }
    CHECK(done, "fix-1 did not complete execution 3");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: test_ui DURO\n", stderr);
        return 2;
    }
    duro_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    if (mkdtemp(dir) == NULL)
        die("mkdtemp: %s", strerror(errno));
    char path[600];
    snprintf(path, sizeof(path), "%s/token", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        die("token file");
    fprintf(f, "%s\n", token);
    fclose(f);

    char db[600];
    snprintf(db, sizeof(db), "sqlite:%s/s.db", dir);
    duro_client *client = NULL;
    if (duro_client_create(db, &client) != DURO_OK)
        die("client: %s", duro_errmsg());
    const char *ids[] = {hostile, bad_utf8, "plain-1", "plain-2"};
    for (size_t i = 0; i < 4; i++)
        if (start_raw(ids[i], "Hello", "{}", 0) != DURO_OK)
            die("start %zu", i);

    unsigned port = 0;
    pid_t ui = start_ui(0, NULL, &port);
    static char buf[1 << 20];
    char auth[128], hdr[1024], body[1024];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
    int s;

    /* auth */
    s = req(port, "GET", "/api/v1/summary", NULL, NULL, buf, sizeof(buf));
    CHECK(s == 401, "no token: %d", s);
    CHECK(strstr(body_of(buf), "\"error\":{\"code\":\"unauthorized\"") != NULL,
          "error shape: %s", body_of(buf));
    snprintf(hdr, sizeof(hdr), "/api/v1/summary?token=%s", token);
    s = req(port, "GET", hdr, NULL, NULL, buf, sizeof(buf));
    CHECK(s >= 400 && s < 500, "?token= accepted: %d", s);
    s = req(port, "GET", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
    CHECK(s == 200, "bearer: %d", s);
    CHECK(strstr(buf, "\"pending\":4") != NULL, "summary counts: %s",
          body_of(buf));
    snprintf(hdr, sizeof(hdr), "Authorization: Bearer %sx\r\n", token);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 401, "wrong bearer: %d", s);

    test_sessions(port);
    test_early_refusals(port, auth);

    test_421_names(port, auth);

    /* Host (DNS rebinding), on every path */
    const char *paths[] = {"/api/v1/summary", "/metrics", "/"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(hdr, sizeof(hdr), "Host: evil.example:%u\r\n%s", port, auth);
        s = req(port, "GET", paths[i], hdr, NULL, buf, sizeof(buf));
        CHECK(s == 421, "bad Host on %s: %d", paths[i], s);
    }
    snprintf(hdr, sizeof(hdr), "Host: 127.0.0.1:%u\r\n%s", port + 1, auth);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 421, "Host with another port: %d", s);
    snprintf(hdr, sizeof(hdr), "Host: LOCALHOST.:%u\r\n%s", port, auth);
    s = req(port, "GET", "/api/v1/summary", hdr, NULL, buf, sizeof(buf));
    CHECK(s == 200, "Host normalised: %d", s);
    snprintf(hdr, sizeof(hdr), "Host: 127.0.0.1:%u\r\nHost: evil.example\r\n%s",
             port, auth);
    s = req(port, "GET", "/metrics", hdr, NULL, buf, sizeof(buf));
    CHECK(s >= 400 && s < 500, "duplicate Host: %d", s);

    /* smuggling shapes */
    char raw[1024];
    int n = snprintf(raw, sizeof(raw),
                     "POST /api/v1/cancel HTTP/1.1\r\nHost: "
                     "127.0.0.1:%u\r\n%sContent-Type: "
                     "application/json\r\nContent-Length: 2\r\nContent-Length: "
                     "5\r\nConnection: close\r\n\r\n{}",
                     port, auth);
    s = http(port, raw, (size_t)n, buf, sizeof(buf));
    CHECK(s == 400, "duplicate Content-Length: %d", s);
    n = snprintf(raw, sizeof(raw),
                 "POST /api/v1/cancel HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%s"
                 "Content-Type: application/json\r\nContent-Length: "
                 "2\r\nTransfer-Encoding: chunked\r\nConnection: "
                 "close\r\n\r\n0\r\n\r\n",
                 port, auth);
    s = http(port, raw, (size_t)n, buf, sizeof(buf));
    CHECK(s >= 400 && s < 500, "Content-Length with Transfer-Encoding: %d", s);
    s = req(port, "GET", "/api/v1/instance?ref=cGxhaW4tMQ%00x", auth, NULL, buf,
            sizeof(buf));
    CHECK(s == 400, "NUL in an argument: %d", s);
    /* MHD cuts the decoded path at a NUL: app.js%00.css would be app.js */
    const char *bad_paths[] = {"/static/app.js%00.css", "/static/app.js%0a",
                               "/api/v1/summary%1b", "/%7f"};
    for (size_t k = 0; k < 4; k++) {
        s = req(port, "GET", bad_paths[k], auth, NULL, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, "bad_request") != NULL,
              "control character in the path %s: %d", bad_paths[k], s);
    }
    s = req(port, "GET", "/static/app.js?x=%0a", NULL, NULL, buf, sizeof(buf));
    CHECK(s == 200, "a newline in an argument is not in the path: %d", s);

    /* CSRF */
    char plain1[64], plain2[64];
    ref_of("plain-1", plain1);
    ref_of("plain-2", plain2);
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", plain1);
    snprintf(hdr, sizeof(hdr),
             "Content-Type: application/json\r\nOrigin: "
             "http://127.0.0.1:%u\r\nSec-Fetch-Site: same-site\r\n%s",
             port + 1, auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 403, "cross-port POST: %d", s);
    snprintf(hdr, sizeof(hdr),
             "Content-Type: application/json\r\nOrigin: "
             "http://127.0.0.1:%u\r\n%s",
             port + 1, auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 403, "cross-port Origin POST: %d", s);
    s = req(port, "POST", "/api/v1/cancel",
            "Content-Type: application/json\r\n", body, buf, sizeof(buf));
    CHECK(s == 403, "POST without Origin or bearer: %d", s);
    snprintf(hdr, sizeof(hdr), "Content-Type: text/plain\r\n%s", auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 415, "text/plain body: %d", s);
    snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s", auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, "{\"ref\":", buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "bad_json") != NULL, "bad JSON: %d", s);
    s = req(port, "POST", "/api/v1/cancel", hdr, "[1]", buf, sizeof(buf));
    CHECK(s == 400, "not an object: %d", s);
    char *big = malloc(UINT32_C(1) << 21);
    if (big == NULL)
        die("out of memory");
    memset(big, ' ', (1u << 21) - 1);
    big[0] = '{';
    big[(1u << 21) - 2] = '}';
    big[(1u << 21) - 1] = '\0';
    {
        size_t blen = strlen(big);
        char *r = malloc(blen + 1024);
        if (r == NULL)
            die("out of memory");
        int h = snprintf(r, 1024,
                         "POST /api/v1/cancel HTTP/1.1\r\nHost: "
                         "127.0.0.1:%u\r\n%sContent-Type: "
                         "application/json\r\nContent-Length: "
                         "%zu\r\nConnection: close\r\n\r\n",
                         port, auth, blen);
        memcpy(r + h, big, blen);
        s = http(port, r, (size_t)h + blen, buf, sizeof(buf));
        CHECK(s == 413, "oversized body: %d", s);
        free(r);
    }
    free(big);

    /* routes */
    s = req(port, "GET", "/api/v1/nope", auth, NULL, buf, sizeof(buf));
    CHECK(s == 404, "unknown route: %d", s);
    s = req(port, "DELETE", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
    CHECK(s == 405, "wrong method: %d", s);
    s = req(port, "GET", "/api/v1/cancel", auth, NULL, buf, sizeof(buf));
    CHECK(s == 405, "GET on an action: %d", s);

    /* headers, and the page */
    s = req(port, "GET", "/", NULL, NULL, buf, sizeof(buf));
    CHECK(s == 200, "page: %d", s);
    CHECK(strstr(buf, "Content-Security-Policy: default-src 'none'; "
                      "script-src 'self';") != NULL,
          "CSP: %s", buf);
    CHECK(strstr(buf, "X-Content-Type-Options: nosniff") != NULL, "nosniff");
    CHECK(strstr(buf, "Referrer-Policy: no-referrer") != NULL, "referrer");
    s = req(port, "GET", "/static/app.js", NULL, NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "Content-Type: text/javascript") != NULL,
          "app.js: %d", s);
    s = req(port, "GET", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
    CHECK(strstr(buf, "Cache-Control: no-store") != NULL, "no-store");
    CHECK(strstr(buf, "Content-Security-Policy:") != NULL, "CSP on /api");
    s = req(port, "GET", "/metrics", auth, NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "duro_instances{orchestration=\"Hello\","
                                  "status=\"pending\"} 4") != NULL,
          "metrics: %d %s", s, body_of(buf));

    /* hostile ids come back as valid JSON with exact refs */
    s = req(port, "GET", "/api/v1/instances?limit=1000", auth, NULL, buf,
            sizeof(buf));
    CHECK(s == 200, "instances: %d", s);
    json_error_t jerr;
    json_t *doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(doc != NULL, "instances JSON: %s", jerr.text);
    char ref_hostile[128], ref_bad[64];
    ref_of(hostile, ref_hostile);
    ref_of(bad_utf8, ref_bad);
    int saw_hostile = 0, saw_bad = 0;
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(doc, "instances"), i, it)
    {
        const char *id = json_string_value(json_object_get(it, "id"));
        const char *ref = json_string_value(json_object_get(it, "ref"));
        if (id && ref && strcmp(id, hostile) == 0)
            saw_hostile = strcmp(ref, ref_hostile) == 0;
        if (id && ref && strcmp(id, "bad-\xEF\xBF\xBD\xEF\xBF\xBD-id") == 0)
            saw_bad = strcmp(ref, ref_bad) == 0;
    }
    CHECK(saw_hostile, "hostile id and ref: %s", body_of(buf));
    CHECK(saw_bad, "invalid UTF-8 id repaired, exact ref: %s", body_of(buf));
    json_decref(doc);
    snprintf(hdr, sizeof(hdr), "/api/v1/instance?ref=%s", ref_hostile);
    s = req(port, "GET", hdr, auth, NULL, buf, sizeof(buf));
    CHECK(s == 200, "instance by ref: %d", s);
    /* a misspelt filter is refused, not ignored (it would list all) */
    s = req(port, "GET", "/api/v1/instances?nmae=Hello", auth, NULL, buf,
            sizeof(buf));
    CHECK(s == 400 && strstr(buf, "bad_argument") != NULL &&
              strstr(buf, "'nmae'") != NULL,
          "unknown list parameter: %d %s", s, body_of(buf));
    /* a date that does not exist, a time without its zone and a status no
     * instance has are refused, not normalised or matched against nothing;
     * a real UTC time is taken */
    const char *refused[] = {
        "/api/v1/instances?created_after=2026-02-31T00:00:00Z",
        "/api/v1/instances?created_after=2026-05-01T12:00:00",
        "/api/v1/instances?status=continued_as_new"};
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        s = req(port, "GET", refused[k], auth, NULL, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, "bad_argument") != NULL, "%s: %d %.200s",
              refused[k], s, body_of(buf));
    }
    s = req(port, "GET",
            "/api/v1/instances?created_after=2024-02-29T12:00:00.5Z", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200, "a leap day: %d %s", s, body_of(buf));
    /* errors of a duro call: too_large is 400 (docs/ui-api.md) */
    {
        char *q = malloc(2100);
        if (q == NULL)
            die("out of memory");
        int o = snprintf(q, 2100, "/api/v1/instances?name=");
        memset(q + o, 'n', 1100);
        q[o + 1100] = '\0';
        s = req(port, "GET", q, auth, NULL, buf, sizeof(buf));
        CHECK(s == 400 && strstr(buf, "\"too_large\"") != NULL,
              "over-long name: %d %s", s, body_of(buf));
        free(q);
    }
    s = req(port, "GET", "/api/v1/instances?limit=1&id_prefix=plain-", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"id\":\"plain-1\"") != NULL &&
              strstr(buf, "\"next_cursor\":\"") != NULL,
          "id_prefix page 1: %s", body_of(buf));
    s = req(port, "GET", "/api/v1/instances?limit=2&id_prefix=plain-", auth,
            NULL, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"id\":\"plain-2\"") != NULL &&
              strstr(buf, "\"next_cursor\":null") != NULL,
          "id_prefix: a page that ends with the prefix has no next: %s",
          body_of(buf));
    /* id_prefix lists from the first matching id (a keyset just below the
     * prefix), not from the table's start: 300 ids before "c" are not read;
     * ids that share a prefix's first bytes but not the prefix are not
     * listed, a prefix ending in a 0xFF byte or a multibyte character
     * included */
    {
        duro_start_options later;
        duro_start_options_init(&later);
        later.delay_ms = 3600 * 1000; /* stay pending */
        const char *const range_ids[] = {"c",
                                         "c1",
                                         "c2",
                                         "b\xff\xff",
                                         "cz",
                                         "z\xff",
                                         "z\xff"
                                         "a",
                                         "z\xfe\xff\xff",
                                         "z\xfe",
                                         "{x",
                                         "\xc3\xa9"
                                         "1",
                                         "\xc3\xa8"
                                         "9",
                                         "\xc3\xaa",
                                         "\xc3\xa9"};
        for (size_t k = 0; k < sizeof(range_ids) / sizeof(range_ids[0]); k++)
            if (start_raw(range_ids[k], "Idle", NULL, later.delay_ms) !=
                DURO_OK)
                die("start %zu", k);
        for (int k = 0; k < 300; k++) {
            char fill[16];
            snprintf(fill, sizeof(fill), "aa-%03d", k);
            if (duro_client_start(client, fill, "Idle", NULL, &later) !=
                DURO_OK)
                die("start %s: %s", fill, duro_errmsg());
        }
        const struct {
            const char *query;
            const char *ids[4]; /* expected, in id order */
            long rows_max;      /* rows the store may return */
        } cases[] = {
            /* b\xff\xff sorts above the keyset (made of U+10FFFF, as the
             * prefix is UTF-8) and is read, not listed */
            {"id_prefix=c&limit=1", {"c"}, 4},
            {"id_prefix=c&limit=3", {"c", "c1", "c2"}, 8},
            {"id_prefix=z%FF&limit=2",
             {"z\xff", "z\xff"
                       "a"},
             3},
            {"id_prefix=z%FE&limit=2", {"z\xfe", "z\xfe\xff\xff"}, 3},
            {"id_prefix=%C3%A9&limit=2",
             {"\xc3\xa9", "\xc3\xa9"
                          "1"},
             3},
            {"id_prefix=aa-29&limit=20",
             {"aa-290", "aa-291", "aa-292", "aa-293"},
             21},
        };
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            char expect[512] = "", got[2048], one[64];
            size_t o = 0;
            for (size_t e = 0; e < 4 && cases[k].ids[e] != NULL; e++) {
                ref_of(cases[k].ids[e], one);
                o += (size_t)snprintf(expect + o, sizeof(expect) - o, "%s%s",
                                      e ? "," : "", one);
            }
            snprintf(hdr, sizeof(hdr), "/api/v1/instances?%s", cases[k].query);
            s = req(port, "GET", hdr, auth, NULL, buf, sizeof(buf));
            long rows = listed_refs(buf, got, sizeof(got));
            if (k == sizeof(cases) / sizeof(cases[0]) - 1)
                got[strlen(expect)] = '\0'; /* aa-29: the first four */
            CHECK(s == 200 && strcmp(got, expect) == 0, "%s: %s, not %s",
                  cases[k].query, got, expect);
            CHECK(rows >= 0 && rows <= cases[k].rows_max,
                  "%s read %ld rows (at most %ld)", cases[k].query, rows,
                  cases[k].rows_max);
        }
    }

    test_views_pending(port, auth, db, client);

    /* nothing above changed anything */
    duro_instance_info *info = status_of(client, "plain-1");
    CHECK(info->cancel_requested_ms == 0, "plain-1 touched by a refusal");
    duro_free(info);

    /* a misspelt key of a one-instance action is refused, not ignored
     * (the reason would silently be the default) */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"resaon\":\"x\"}", plain1);
    snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s", auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'resaon'") != NULL, "cancel resaon: %d %s",
          s, body_of(buf));
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"name\":\"e\",\"paylod\":1}",
             plain1);
    s = req(port, "POST", "/api/v1/raise-event", hdr, body, buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'paylod'") != NULL, "raise paylod: %d %s", s,
          body_of(buf));
    info = status_of(client, "plain-1");
    CHECK(info->cancel_requested_ms == 0, "plain-1 touched by a refusal");
    duro_free(info);

    /* an audited cancel, by the page's way (Sec-Fetch-Site) and a script's
     * (bearer) */
    snprintf(body, sizeof(body), "{\"ref\":\"%s\",\"reason\":\"test\"}",
             plain1);
    snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s", auth);
    s = req(port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 200, "cancel: %d %s", s, body_of(buf));
    info = status_of(client, "plain-1");
    CHECK(info->cancelled_by != NULL &&
              strncmp(info->cancelled_by, "ui:", 3) == 0,
          "requested_by: %s", info->cancelled_by ? info->cancelled_by : "-");
    CHECK(info->cancel_reason && strcmp(info->cancel_reason, "test") == 0,
          "reason");
    duro_free(info);

    /* bulk: selected refs in one call; one bad ref refuses them all */
    const char *more[] = {"bulk-1", "bulk-2", "bulk-3", "bulkx-1"};
    for (size_t k = 0; k < 4; k++)
        if (duro_client_start(client, more[k], "Hello", "{}", NULL) != DURO_OK)
            die("start %s: %s", more[k], duro_errmsg());
    char b1[64];
    ref_of("bulk-1", b1);
    snprintf(body, sizeof(body),
             "{\"action\":\"cancel\",\"refs\":[\"%s\",\"!!\"]}", b1);
    s = req(port, "POST", "/api/v1/bulk/control", hdr, body, buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "refs[1]") != NULL, "bad ref in bulk: %d %s",
          s, body_of(buf));
    info = status_of(client, "bulk-1");
    CHECK(info->cancel_requested_ms == 0, "a refused bulk changed bulk-1");
    duro_free(info);
    snprintf(body, sizeof(body), "{\"action\":\"explode\",\"refs\":[\"%s\"]}",
             b1);
    s = req(port, "POST", "/api/v1/bulk/control", hdr, body, buf, sizeof(buf));
    CHECK(s == 400, "unknown bulk action: %d", s);
    {
        size_t cap = 16 + 501 * 16;
        char *many = malloc(cap);
        if (many == NULL)
            die("out of memory");
        size_t o =
            (size_t)snprintf(many, cap, "{\"action\":\"cancel\",\"refs\":[");
        for (int k = 0; k < 501; k++)
            o += (size_t)snprintf(many + o, cap - o, "%s\"%s\"", k ? "," : "",
                                  b1);
        snprintf(many + o, cap - o, "]}");
        s = req(port, "POST", "/api/v1/bulk/control", hdr, many, buf,
                sizeof(buf));
        CHECK(s == 400, "501 refs: %d", s);
        free(many);
    }
    snprintf(body, sizeof(body),
             "{\"action\":\"cancel\",\"reason\":\"sel\",\"refs\":[\"%s\","
             "\"%s\",\"%s\"]}",
             b1, b1, ref_hostile);
    s = req(port, "POST", "/api/v1/bulk/control", hdr, body, buf, sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(s == 200 && doc != NULL &&
              json_integer_value(json_object_get(doc, "changed")) == 2,
          "bulk cancel of the selected: %d %s", s, body_of(buf));
    json_t *res1 = json_array_get(json_object_get(doc, "results"), 1);
    CHECK(res1 != NULL &&
              strcmp(json_string_value(json_object_get(res1, "outcome")),
                     "duplicate") == 0,
          "a repeated ref: %s", body_of(buf));
    json_decref(doc);
    info = status_of(client, "bulk-1");
    CHECK(info->cancel_reason && strcmp(info->cancel_reason, "sel") == 0 &&
              info->cancelled_by && strncmp(info->cancelled_by, "ui:", 3) == 0,
          "bulk-1 after the bulk cancel");
    duro_free(info);

    /* bulk by query with an id prefix: the apply touches what the preview
     * matched, not what was started after it */
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"id_prefix\":\"bulk-\"},\"dry_run\":true}", buf,
            sizeof(buf));
    doc = json_loads(body_of(buf), 0, &jerr);
    CHECK(s == 200 && doc != NULL &&
              json_integer_value(json_object_get(doc, "matched")) == 2 &&
              json_array_size(json_object_get(doc, "sample")) == 2,
          "prefix preview (bulk-2, bulk-3): %d %s", s, body_of(buf));
    int64_t as_of = json_integer_value(json_object_get(doc, "as_of_ms"));
    json_decref(doc);
    int64_t wait_until = now_ms() + 10000;
    while (now_ms() <= as_of + 1 && now_ms() < wait_until) {
        struct pollfd none;
        poll(&none, 0, 2);
    }
    if (duro_client_start(client, "bulk-4", "Hello", "{}", NULL) != DURO_OK)
        die("start bulk-4: %s", duro_errmsg());
    snprintf(body, sizeof(body),
             "{\"filter\":{\"id_prefix\":\"bulk-\"},\"reason\":\"q\","
             "\"as_of_ms\":%lld}",
             (long long)as_of);
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"cancelled\":2") != NULL,
          "prefix apply: %d %s", s, body_of(buf));
    info = status_of(client, "bulk-4");
    CHECK(info->cancel_requested_ms == 0,
          "started after the preview, cancelled");
    duro_free(info);
    info = status_of(client, "bulkx-1");
    CHECK(info->cancel_requested_ms == 0, "outside the prefix, cancelled");
    duro_free(info);
    info = status_of(client, "bulk-3");
    CHECK(info->cancel_reason && strcmp(info->cancel_reason, "q") == 0,
          "bulk-3 not cancelled by the apply");
    duro_free(info);
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"id_prefix\":\"bulk-\"}}", buf, sizeof(buf));
    CHECK(s == 400, "apply without as_of_ms: %d", s);
    /* an unknown key, in filter or in the body, is refused by name: a
     * typo must not become "cancel everything" */
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"bogus\":1},\"dry_run\":true}", buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'bogus' in the filter") != NULL,
          "unknown filter key: %d %s", s, body_of(buf));
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"nmae\":\"Hello\"},\"as_of_ms\":1}", buf,
            sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'nmae'") != NULL,
          "misspelt filter key on apply: %d %s", s, body_of(buf));
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{},\"dryrun\":true}", buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'dryrun' in the body") != NULL,
          "unknown body key: %d %s", s, body_of(buf));
    snprintf(body, sizeof(body),
             "{\"action\":\"cancel\",\"refs\":[\"%s\"],\"resaon\":\"x\"}", b1);
    s = req(port, "POST", "/api/v1/bulk/control", hdr, body, buf, sizeof(buf));
    CHECK(s == 400 && strstr(buf, "'resaon'") != NULL,
          "unknown bulk/control key: %d %s", s, body_of(buf));
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"id_prefix\":7},\"dry_run\":true}", buf,
            sizeof(buf));
    CHECK(s == 400, "id_prefix not a string: %d", s);
    /* without a prefix: the provider's cancel_matching; pending with no
     * cancellation yet: bad_utf8, plain-2, bulk-4, bulkx-1 */
    s = req(port, "POST", "/api/v1/bulk/cancel", hdr,
            "{\"filter\":{\"name\":\"Hello\",\"status\":[\"pending\"]},"
            "\"dry_run\":true}",
            buf, sizeof(buf));
    CHECK(s == 200 && strstr(buf, "\"matched\":4") != NULL,
          "name preview: %d %s", s, body_of(buf));
    /* a filter field of the wrong type or empty is refused by name, on a
     * preview and on an apply, and changes nothing: it used to select
     * every pending and running instance */
    {
        const char *bad_filters[] = {"{\"name\":[\"Bulk\"]}",
                                     "{\"name\":123}",
                                     "{\"name\":\"\"}",
                                     "{\"name\":null}",
                                     "{\"status\":[]}",
                                     "{\"status\":null}",
                                     "{\"id_prefix\":\"\"}",
                                     "{\"id_prefix\":null}",
                                     "{\"created_after_ms\":null}",
                                     "{\"created_before_ms\":\"1\"}"};
        for (size_t k = 0; k < sizeof(bad_filters) / sizeof(bad_filters[0]);
             k++) {
            char field[32];
            sscanf(bad_filters[k], "{\"%31[a-z_]\"", field);
            snprintf(body, sizeof(body), "{\"filter\":%s,\"dry_run\":true}",
                     bad_filters[k]);
            s = req(port, "POST", "/api/v1/bulk/cancel", hdr, body, buf,
                    sizeof(buf));
            CHECK(s == 400 && strstr(buf, "bad_argument") != NULL &&
                      strstr(buf, field) != NULL &&
                      strstr(buf, "matched") == NULL,
                  "preview with %s: %d %s", bad_filters[k], s, body_of(buf));
            snprintf(body, sizeof(body), "{\"filter\":%s,\"as_of_ms\":%lld}",
                     bad_filters[k], (long long)as_of + 3600 * 1000);
            s = req(port, "POST", "/api/v1/bulk/cancel", hdr, body, buf,
                    sizeof(buf));
            CHECK(s == 400 && strstr(buf, field) != NULL &&
                      strstr(buf, "cancelled") == NULL,
                  "apply with %s: %d %s", bad_filters[k], s, body_of(buf));
        }
        const char *bad_bodies[] = {
            "{\"filter\":{},\"dry_run\":\"yes\"}",
            "{\"filter\":{},\"dry_run\":true,\"reason\":\"\"}",
            "{\"filter\":null,\"dry_run\":true}"};
        for (size_t k = 0; k < sizeof(bad_bodies) / sizeof(bad_bodies[0]);
             k++) {
            s = req(port, "POST", "/api/v1/bulk/cancel", hdr, bad_bodies[k],
                    buf, sizeof(buf));
            CHECK(s == 400 && strstr(buf, "matched") == NULL, "%s: %d %s",
                  bad_bodies[k], s, body_of(buf));
        }
        /* one-instance actions and bulk/control: an empty or non-string
         * reason, ref or action is refused, not replaced by the default */
        char plain2_ref[64];
        ref_of("plain-2", plain2_ref);
        const char *control_bodies[][2] = {
            {"/api/v1/cancel", "{\"ref\":\"%s\",\"reason\":\"\"}"},
            {"/api/v1/cancel", "{\"ref\":\"%s\",\"reason\":null}"},
            {"/api/v1/terminate", "{\"ref\":\"%s\",\"reason\":7}"},
            {"/api/v1/suspend", "{\"ref\":[\"%s\"]}"},
            {"/api/v1/raise-event", "{\"ref\":\"%s\",\"name\":\"\"}"},
            {"/api/v1/raise-event", "{\"ref\":\"%s\",\"name\":[\"go\"]}"},
            {"/api/v1/bulk/control", "{\"action\":\"cancel\",\"refs\":[\"%s\"],"
                                     "\"reason\":\"\"}"},
            {"/api/v1/bulk/control",
             "{\"action\":[\"cancel\"],\"refs\":[\"%s\"]}"},
        };
        for (size_t k = 0;
             k < sizeof(control_bodies) / sizeof(control_bodies[0]); k++) {
            /* the body with its %s replaced by the ref */
            const char *at = strstr(control_bodies[k][1], "%s");
            snprintf(body, sizeof(body), "%.*s%s%s",
                     (int)(at - control_bodies[k][1]), control_bodies[k][1],
                     plain2_ref, at + 2);
            s = req(port, "POST", control_bodies[k][0], hdr, body, buf,
                    sizeof(buf));
            CHECK(s == 400 && strstr(buf, "bad_argument") != NULL,
                  "%s %s: %d %s", control_bodies[k][0], body, s, body_of(buf));
        }
        const char *untouched[] = {"plain-2", bad_utf8, "bulk-4", "bulkx-1"};
        for (size_t k = 0; k < 4; k++) {
            info = status_of(client, untouched[k]);
            CHECK(info->cancel_requested_ms == 0 &&
                      info->status == DURO_STATUS_PENDING,
                  "%s changed by a refused body", untouched[k]);
            duro_free(info);
        }
    }

    /* --read-only refuses and changes nothing */
    unsigned ro_port = 0;
    const char *ro[] = {"--read-only", NULL};
    pid_t ro_ui = start_ui(1, ro, &ro_port);
    snprintf(body, sizeof(body), "{\"ref\":\"%s\"}", plain2);
    s = req(ro_port, "POST", "/api/v1/cancel", hdr, body, buf, sizeof(buf));
    CHECK(s == 403 && strstr(buf, "read_only") != NULL, "read-only: %d", s);
    info = status_of(client, "plain-2");
    CHECK(info->cancel_requested_ms == 0 && info->status == DURO_STATUS_PENDING,
          "read-only changed plain-2");
    duro_free(info);
    s = req(ro_port, "GET", "/api/v1/summary", auth, NULL, buf, sizeof(buf));
    CHECK(s == 200, "read-only GET: %d", s);

    /* an output of 1 MB: the list, the instance and its history stay small
     * (payloads cut to 4 KB previews with their size), the whole payload
     * is still one GET away */
    {
        start_runtime(db);
        char *output = NULL;
        CHECK(make_big(client, &output) == 0, "big-1 did not complete");
        test_views_runtime(port, auth, client);
        test_reset(port, ro_port, auth, client);
        char big_ref[64];
        ref_of("big-1", big_ref);
        s = req(port, "GET", "/api/v1/instances?id_prefix=big-", auth, NULL,
                buf, sizeof(buf));
        doc = json_loads(body_of(buf), 0, &jerr);
        json_t *item = NULL;
        json_array_foreach(json_object_get(doc, "instances"), i, it)
        {
            if (strcmp(json_string_value(json_object_get(it, "id")), "big-1") ==
                0)
                item = it;
        }
        CHECK(s == 200 && strlen(buf) < SMALL_BOUND && item != NULL &&
                  json_object_get(item, "output") == NULL &&
                  json_integer_value(json_object_get(item, "output_bytes")) ==
                      BIG_BYTES &&
                  json_object_get(item, "ref") != NULL &&
                  json_object_get(item, "updated_at") != NULL,
              "list with a 1 MB output: %d, %zu bytes", s, strlen(buf));
        json_decref(doc);
        snprintf(hdr, sizeof(hdr), "/api/v1/instance?ref=%s", big_ref);
        s = req(port, "GET", hdr, auth, NULL, buf, sizeof(buf));
        doc = json_loads(body_of(buf), 0, &jerr);
        CHECK(s == 200 && strlen(buf) < SMALL_BOUND && doc != NULL &&
                  json_is_true(json_object_get(doc, "output_truncated")) &&
                  json_integer_value(json_object_get(doc, "output_bytes")) ==
                      BIG_BYTES &&
                  json_string_length(json_object_get(doc, "output")) == 4096,
              "instance with a 1 MB output: %d, %zu bytes", s, strlen(buf));
        json_decref(doc);
        snprintf(hdr, sizeof(hdr), "/api/v1/history?ref=%s", big_ref);
        s = req(port, "GET", hdr, auth, NULL, buf, sizeof(buf));
        doc = json_loads(body_of(buf), 0, &jerr);
        CHECK(s == 200 && strlen(buf) < SMALL_BOUND && doc != NULL,
              "history with 1 MB payloads: %d, %zu bytes", s, strlen(buf));
        size_t cut = 0;
        static char whole[BIG_BYTES + 65536];
        json_array_foreach(json_object_get(doc, "events"), i, it)
        {
            if (!json_is_true(json_object_get(it, "payload_truncated")))
                continue;
            cut++;
            CHECK(
                json_integer_value(json_object_get(it, "payload_bytes")) ==
                        BIG_BYTES &&
                    strncmp(json_string_value(json_object_get(it, "payload")),
                            output, 4096) == 0,
                "payload preview of event %lld",
                (long long)json_integer_value(json_object_get(it, "event_id")));
            snprintf(
                hdr, sizeof(hdr), "/api/v1/payload?ref=%s&event=%lld", big_ref,
                (long long)json_integer_value(json_object_get(it, "event_id")));
            s = req(port, "GET", hdr, auth, NULL, whole, sizeof(whole));
            CHECK(s == 200 && strcmp(body_of(whole), output) == 0,
                  "the whole payload of event %s: %d, %zu bytes", hdr, s,
                  strlen(body_of(whole)));
        }
        CHECK(cut == 2, "input and output previews: %zu", cut);
        json_decref(doc);
        free(output);

        /* raise-event: a JSON string is stored as its text, exactly (the
         * page sends the JSON typed as a string: "hello" typed is stored
         * with its quotes; a payload need not be JSON), another JSON
         * value as its compact JSON */
        const char *raised[][2] = {
            {"\"\\\"hello\\\"\"", "\"hello\""},
            {"\"{\\\"a\\\": [1, 2.50, \\\"\\\\u00e9\\\"]}\"",
             "{\"a\": [1, 2.50, \"\\u00e9\"]}"},
            {"\"plain text\"", "plain text"},
            {"{\"a\": [1, 2.50]}", "{\"a\":[1,2.5]}"},
        };
        snprintf(hdr, sizeof(hdr), "Content-Type: application/json\r\n%s",
                 auth);
        for (size_t k = 0; k < sizeof(raised) / sizeof(raised[0]); k++) {
            char wid[32], wref[64];
            snprintf(wid, sizeof(wid), "wait-%zu", k);
            ref_of(wid, wref);
            if (duro_client_start(client, wid, "Waiter", NULL, NULL) != DURO_OK)
                die("start %s: %s", wid, duro_errmsg());
            snprintf(body, sizeof(body),
                     "{\"ref\":\"%s\",\"name\":\"go\",\"payload\": %s }", wref,
                     raised[k][0]);
            s = req(port, "POST", "/api/v1/raise-event", hdr, body, buf,
                    sizeof(buf));
            CHECK(s == 200, "raise %s: %d %s", raised[k][0], s, body_of(buf));
            CHECK(wait_completed(client, wid) == 0, "%s did not complete", wid);
            info = status_of(client, wid);
            CHECK(info->output != NULL &&
                      strcmp(info->output, raised[k][1]) == 0,
                  "raised %s, stored %s", raised[k][0],
                  info->output ? info->output : "(none)");
            duro_free(info);
        }
        stop_runtime();
        test_views_query(port, auth, client);

        /* raise-event with event_id: once per id on the instance (a
         * retried POST delivers nothing more); an empty or non-string id
         * is 400. No runtime runs: the events stay queued, counted. */
        if (duro_client_start(client, "evid-1", "Waiter", NULL, NULL) !=
            DURO_OK)
            die("start evid-1: %s", duro_errmsg());
        char evref[64];
        ref_of("evid-1", evref);
        const char *posts[][2] = {
            {"\"order-7\"", "200"}, {"\"order-7\"", "200"},
            {"\"order-8\"", "200"}, {"\"\"", "400"},
            {"7", "400"},
        };
        for (size_t k = 0; k < sizeof(posts) / sizeof(posts[0]); k++) {
            snprintf(body, sizeof(body),
                     "{\"ref\":\"%s\",\"name\":\"go\",\"payload\":\"p\","
                     "\"event_id\":%s}",
                     evref, posts[k][0]);
            s = req(port, "POST", "/api/v1/raise-event", hdr, body, buf,
                    sizeof(buf));
            CHECK(s == atoi(posts[k][1]), "raise with event_id %s: %d %s",
                  posts[k][0], s, body_of(buf));
        }
        duro_provider *store = NULL;
        duro_error perr;
        uint64_t queued = 0;
        if (duro_provider_open(db, &store, &perr) != DURO_OK ||
            store->count_messages(store, DURO_QUEUE_ORCHESTRATOR, "evid-1",
                                  &queued, &perr) != DURO_OK)
            die("count evid-1: %s", perr.message);
        duro_provider_close(store);
        /* the START, order-7 once, order-8 */
        CHECK(queued == 3, "evid-1 has %llu queued messages, expected 3",
              (unsigned long long)queued);
    }

    /* on 0.0.0.0 the URL printed is one a browser can open (loopback's),
     * and stderr says which Host names are answered */
    {
        unsigned any_port = 0;
        const char *any[] = {"--listen", "0.0.0.0:0", NULL};
        pid_t any_ui = start_ui(2, any, &any_port);
        s = req(any_port, "GET", "/api/v1/summary", auth, NULL, buf,
                sizeof(buf));
        CHECK(s == 200, "the printed URL's Host on 0.0.0.0: %d", s);
        char errfile[600], said[4096] = "", expect[128];
        snprintf(errfile, sizeof(errfile), "%s/ui2.err", dir);
        FILE *ef = fopen(errfile, "r");
        size_t got = ef != NULL ? fread(said, 1, sizeof(said) - 1, ef) : 0;
        said[got] = '\0';
        if (ef != NULL)
            fclose(ef);
        snprintf(expect, sizeof(expect),
                 "answers only to Host 127.0.0.1:%u, localhost:%u, [::1]:%u",
                 any_port, any_port, any_port);
        CHECK(strstr(said, expect) != NULL && strstr(said, "--listen") != NULL,
              "allowed Host names not said: %s", said);
        CHECK(strstr(said, "has a token can cancel instances") != NULL,
              "no warning that anyone may cancel: %s", said);
        kill(any_ui, SIGTERM);
        int any_st = 0;
        CHECK(wait_exit(any_ui, 2, &any_st) == 0, "0.0.0.0 ui did not stop");

        /* read-only, the warning says what is exposed: reading, not
         * cancelling */
        const char *any_ro[] = {"--listen", "0.0.0.0:0", "--read-only", NULL};
        pid_t ro_any = start_ui(3, any_ro, &any_port);
        snprintf(errfile, sizeof(errfile), "%s/ui3.err", dir);
        ef = fopen(errfile, "r");
        got = ef != NULL ? fread(said, 1, sizeof(said) - 1, ef) : 0;
        said[got] = '\0';
        if (ef != NULL)
            fclose(ef);
        CHECK(strstr(said, "has a token can read every instance") != NULL &&
                  strstr(said, "can cancel") == NULL,
              "read-only warning: %s", said);
        kill(ro_any, SIGTERM);
        CHECK(wait_exit(ro_any, 3, &any_st) == 0,
              "0.0.0.0 read-only ui did not stop");
    }

    test_schedules_api(port, ro_port, auth, client);
    test_operators(client, db);
    test_lifetimes(port);
    test_backoff();
    test_lockout();
    test_tokens_file_errors();

    /* SIGTERM lets a request in flight finish: a cancel whose body is
     * still coming when the signal is taken (after the server said 100
     * Continue, before the body) is answered and applied, then it exits */
    {
        duro_start_options later;
        duro_start_options_init(&later);
        later.delay_ms = 3600 * 1000;
        if (duro_client_start(client, "flight-1", "Idle", NULL, &later) !=
            DURO_OK)
            die("start flight-1: %s", duro_errmsg());
        char flight_ref[64];
        ref_of("flight-1", flight_ref);
        snprintf(body, sizeof(body),
                 "{\"ref\":\"%s\",\"reason\":\"in flight\"}", flight_ref);
        n = snprintf(raw, sizeof(raw),
                     "POST /api/v1/cancel HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%s"
                     "Content-Type: application/json\r\nExpect: "
                     "100-continue\r\nContent-Length: %zu\r\nConnection: "
                     "close\r\n\r\n",
                     port, auth, strlen(body));
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
            send(fd, raw, (size_t)n, MSG_NOSIGNAL) != n)
            die("in-flight request: %s", strerror(errno));
        size_t len = read_until(fd, buf, 0, sizeof(buf), "100 Continue");
        CHECK(strstr(buf, "100 Continue") != NULL, "no 100 Continue: %s", buf);
        kill(ui, SIGTERM);
        char errfile[600];
        snprintf(errfile, sizeof(errfile), "%s/ui0.err", dir);
        CHECK(wait_file_holds(errfile, "stopping (SIGTERM)") == 0,
              "SIGTERM not taken");
        send(fd, body, strlen(body), MSG_NOSIGNAL);
        len = read_until(fd, buf, len, sizeof(buf), NULL);
        close(fd);
        const char *final = strstr(buf, "\r\n\r\nHTTP/1.1 ");
        int fs = 0;
        if (final == NULL || sscanf(final + 4, "HTTP/1.%*d %d", &fs) != 1)
            fs = 0;
        CHECK(fs == 200, "the request in flight at SIGTERM: %d %s", fs, buf);
        info = status_of(client, "flight-1");
        CHECK(info->cancel_reason != NULL &&
                  strcmp(info->cancel_reason, "in flight") == 0,
              "in-flight cancel: reason %s",
              info->cancel_reason ? info->cancel_reason : "(none)");
        duro_free(info);
    }

    /* SIGTERM and SIGINT stop them cleanly */
    int st = 0;
    CHECK(wait_exit(ui, 0, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "SIGTERM: status %d", st);
    kill(ro_ui, SIGINT);
    CHECK(wait_exit(ro_ui, 1, &st) == 0 && WIFEXITED(st) &&
              WEXITSTATUS(st) == 0,
          "SIGINT: status %d", st);
    kill_children();
    duro_client_destroy(client);
    if (failures == 0) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "test_ui: could not remove %s\n", dir);
    }
    printf("test_ui: %d checks, %d failed%s%s\n", checks, failures,
           failures ? "; files kept in " : "", failures ? dir : "");
    return failures != 0;
}
