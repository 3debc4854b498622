/* cmd_metrics.c - duro metrics: the store's gauges (instances by
 * orchestration and status, stuck instances, queue depths and the age of the
 * oldest ready item, the store's size) in the Prometheus text exposition
 * format 0.0.4, or as one JSON document with --json. One read snapshot
 * (duro_client_store_stats). A one-shot process has no counters worth
 * exporting: the runtime's own counters come from
 * duro_runtime_metrics_write() in the process that runs it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char metrics_help[] =
    "usage: duro metrics [--output FILE] [--json]\n"
    "\n"
    "Prints the store's gauges in the Prometheus text format 0.0.4:\n"
    "  duro_instances{orchestration,status}        instances by status\n"
    "                                              (pending, running,\n"
    "                                              suspended, completed,\n"
    "                                              failed, cancelled,\n"
    "                                              terminated)\n"
    "  duro_instances_stuck{orchestration}         live (pending, running,\n"
    "                                              suspended) instances\n"
    "                                              with a problem\n"
    "  duro_queue_messages{queue,state}            queue depths\n"
    "  duro_queue_oldest_ready_age_seconds{queue}  how long the oldest\n"
    "                                              ready item has waited\n"
    "  duro_store_size_bytes                       database and WAL files\n"
    "  duro_schedules{state}                       schedules active, paused\n"
    "  duro_schedule_overdue_seconds               how long the most overdue\n"
    "                                              active schedule's fire has\n"
    "                                              waited (0: none; no\n"
    "                                              runtime firing them?)\n"
    "  --output FILE   write FILE atomically (a temporary file, then\n"
    "                  rename), e.g. for node_exporter's textfile collector;\n"
    "                  it keeps the mode of the FILE it replaces (new: 0666\n"
    "                  less the umask)\n";

/* The statuses an instance row holds, in label order. */
static const int instance_statuses[] = {
    DURO_STATUS_PENDING,   DURO_STATUS_RUNNING, DURO_STATUS_SUSPENDED,
    DURO_STATUS_COMPLETED, DURO_STATUS_FAILED,  DURO_STATUS_CANCELLED,
    DURO_STATUS_TERMINATED};

/* A label value: \\, \" and \n escaped; invalid UTF-8 as U+FFFD. */
static void put_label_value(FILE *f, const char *v)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "");
    while (*s) {
        if (*s == '\\' || *s == '"') {
            fputc('\\', f);
            fputc(*s++, f);
        } else if (*s == '\n') {
            fputs("\\n", f);
            s++;
        } else {
            size_t n = utf8_sequence(s);
            if (n == 0) {
                fputs("\xEF\xBF\xBD", f);
                s++;
            } else {
                fwrite(s, 1, n, f);
                s += n;
            }
        }
    }
}

static void family(FILE *f, const char *name, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

void metrics_write_text(FILE *f, const duro_store_stats *st)
{
    family(f, "duro_instances", "Instances by orchestration name and status.");
    for (size_t i = 0; i < st->instance_count;) {
        /* Every status of a name that has instances, 0 where it has none;
         * the rows of one name are adjacent, in any status order. */
        const char *name = st->instances[i].name;
        size_t end = i;
        while (end < st->instance_count &&
               strcmp(st->instances[end].name, name) == 0)
            end++;
        for (size_t k = 0; k < sizeof(instance_statuses) / sizeof(int); k++) {
            uint64_t n = 0;
            for (size_t j = i; j < end; j++)
                if (st->instances[j].status == instance_statuses[k])
                    n += st->instances[j].count;
            fputs("duro_instances{orchestration=\"", f);
            put_label_value(f, name);
            fprintf(f, "\",status=\"%s\"} %llu\n",
                    status_word(instance_statuses[k]), (unsigned long long)n);
        }
        i = end;
    }
    family(f, "duro_instances_stuck",
           "Live (pending, running or suspended) instances with a recorded "
           "problem (duro status ID says which).");
    for (size_t i = 0; i < st->problem_count; i++) {
        fputs("duro_instances_stuck{orchestration=\"", f);
        put_label_value(f, st->problems[i].name);
        fprintf(f, "\"} %llu\n", (unsigned long long)st->problems[i].count);
    }
    family(f, "duro_queue_messages",
           "Queued messages: ready to fetch, locked by a runtime, or "
           "delayed (not visible yet).");
    fprintf(f,
            "duro_queue_messages{queue=\"orchestrator\",state=\"ready\"} "
            "%llu\n"
            "duro_queue_messages{queue=\"orchestrator\",state=\"locked\"} "
            "%llu\n"
            "duro_queue_messages{queue=\"orchestrator\",state=\"delayed\"} "
            "%llu\n"
            "duro_queue_messages{queue=\"worker\",state=\"ready\"} %llu\n"
            "duro_queue_messages{queue=\"worker\",state=\"locked\"} %llu\n",
            (unsigned long long)st->orchestrator_ready,
            (unsigned long long)st->orchestrator_locked,
            (unsigned long long)st->orchestrator_delayed,
            (unsigned long long)st->worker_ready,
            (unsigned long long)st->worker_locked);
    family(f, "duro_queue_oldest_ready_age_seconds",
           "How long the oldest ready message has been waiting to be "
           "fetched (0 when none is ready).");
    const struct {
        const char *queue;
        int64_t since;
    } ages[] = {{"orchestrator", st->orchestrator_oldest_ready_ms},
                {"worker", st->worker_oldest_ready_ms}};
    for (size_t i = 0; i < 2; i++) {
        int64_t age = ages[i].since > 0 && st->now_ms > ages[i].since
                          ? st->now_ms - ages[i].since
                          : 0;
        fprintf(f,
                "duro_queue_oldest_ready_age_seconds{queue=\"%s\"} "
                "%lld.%03lld\n",
                ages[i].queue, (long long)(age / 1000),
                (long long)(age % 1000));
    }
    if (st->store_size_bytes >= 0) {
        family(f, "duro_store_size_bytes",
               "Size of the store on disk (SQLite: the database file and "
               "its WAL; PostgreSQL: the schema's tables and indexes).");
        fprintf(f, "duro_store_size_bytes %lld\n",
                (long long)st->store_size_bytes);
    }
}

static json_t *json_counts(const duro_store_count *v, size_t n, int status)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        jset(o, "orchestration", jstr(v[i].name));
        if (status)
            jset(o, "status", jstr(status_word(v[i].status)));
        jset(o, "count", jint((int64_t)v[i].count));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *metrics_json(const duro_store_stats *st)
{
    json_t *doc = json_object();
    jset_time(doc, "at", st->now_ms);
    jset(doc, "instances", json_counts(st->instances, st->instance_count, 1));
    jset(doc, "stuck", json_counts(st->problems, st->problem_count, 0));
    json_t *o = json_object();
    jset(o, "ready", jint((int64_t)st->orchestrator_ready));
    jset(o, "locked", jint((int64_t)st->orchestrator_locked));
    jset(o, "delayed", jint((int64_t)st->orchestrator_delayed));
    jset_time(o, "oldest_ready", st->orchestrator_oldest_ready_ms);
    json_t *w = json_object();
    jset(w, "ready", jint((int64_t)st->worker_ready));
    jset(w, "locked", jint((int64_t)st->worker_locked));
    jset_time(w, "oldest_ready", st->worker_oldest_ready_ms);
    json_t *q = json_object();
    jset(q, "orchestrator", o);
    jset(q, "worker", w);
    jset(doc, "queues", q);
    jset(doc, "store_size_bytes",
         st->store_size_bytes >= 0 ? jint(st->store_size_bytes) : json_null());
    return doc;
}

/* The schedules' gauges: how many are active and paused, and how long the
 * most overdue fire of an active one has waited (a fire not made while it
 * is due: no runtime fires the store's schedules). */
typedef struct schedule_gauges {
    int known; /* 0: the store has no schedules (an older provider) */
    int64_t active, paused, overdue_ms;
} schedule_gauges;

static int read_schedule_gauges(duro_client *client, int64_t now,
                                schedule_gauges *g)
{
    memset(g, 0, sizeof(*g));
    duro_schedule_description *d = NULL;
    int rc = duro_client_schedule_list(client, &d);
    if (rc == DURO_UNSUPPORTED)
        return DURO_OK;
    if (rc != DURO_OK)
        return rc;
    g->known = 1;
    for (size_t i = 0; i < d->count; i++) {
        const duro_schedule_info *s = &d->schedules[i];
        if (s->spec.paused) {
            g->paused++;
            continue;
        }
        g->active++;
        int64_t due = s->buffered_ms != 0 ? 0 : s->next_ms;
        if (due != 0 && now - due > g->overdue_ms)
            g->overdue_ms = now - due;
    }
    duro_schedule_description_free(d);
    return DURO_OK;
}

static void write_schedule_gauges(FILE *f, const schedule_gauges *g)
{
    if (!g->known)
        return;
    family(f, "duro_schedules", "Schedules, active or paused.");
    fprintf(f, "duro_schedules{state=\"active\"} %lld\n", (long long)g->active);
    fprintf(f, "duro_schedules{state=\"paused\"} %lld\n", (long long)g->paused);
    family(f, "duro_schedule_overdue_seconds",
           "How long the most overdue fire of an active schedule has "
           "waited (0: none is late; a long wait: no runtime fires them).");
    fprintf(f, "duro_schedule_overdue_seconds %lld.%03lld\n",
            (long long)(g->overdue_ms / 1000),
            (long long)(g->overdue_ms % 1000));
}

/* Writes the text to `path` through a temporary file in its directory and a
 * rename, so a reader never sees half of it. The file gets the mode of the
 * one it replaces, else 0666 less the umask, as a plain write would: not
 * mkstemp's 0600, which the collector (often another user) cannot read. */
static int write_file(cli *c, const char *path, const duro_store_stats *st,
                      const schedule_gauges *g)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (tmp == NULL)
        return cli_error(c, EXIT_FAILED, "nomem", "out of memory");
    snprintf(tmp, n, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return cli_error(c, EXIT_FAILED, "io",
                         "cannot create a file next to %s: %s", path,
                         strerror(e));
    }
    struct stat old;
    mode_t mode;
    if (stat(path, &old) == 0) {
        mode = old.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    FILE *f = fchmod(fd, mode) == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return cli_error(c, EXIT_FAILED, "io", "cannot write %s", path);
    }
    metrics_write_text(f, st);
    write_schedule_gauges(f, g);
    int bad = ferror(f) | fflush(f) | fsync(fileno(f));
    bad |= fclose(f);
    if (bad != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return cli_error(c, EXIT_FAILED, "io", "cannot write %s: %s", path,
                         strerror(e));
    }
    free(tmp);
    return EXIT_OK;
}

int cmd_metrics(cli *c, int argc, char **argv)
{
    enum { OPT_OUTPUT = 'o' };
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"output", required_argument, NULL, OPT_OUTPUT},
        {0}};
    const char *output = NULL;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, metrics_help, &status)) !=
           -1) {
        if (ch == -2)
            return status;
        if (ch == OPT_OUTPUT)
            output = optarg;
    }
    if (argc - optind != 0)
        return cli_usage(c, "metrics takes no arguments");
    if (output != NULL && c->json)
        return cli_usage(c, "--output writes the Prometheus text; it does "
                            "not go with --json");
    duro_client *client = NULL;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    duro_store_stats *st = NULL;
    schedule_gauges g;
    int rc = duro_client_store_stats(client, &st);
    if (rc == DURO_OK)
        rc = read_schedule_gauges(client, st->now_ms, &g);
    if (rc != DURO_OK) {
        status = cli_error_rc(c, rc, "reading the store's statistics");
    } else if (c->json) {
        json_t *doc = metrics_json(st);
        if (g.known) {
            json_t *s = json_object();
            jset(s, "active", jint(g.active));
            jset(s, "paused", jint(g.paused));
            jset(s, "overdue_ms", jint(g.overdue_ms));
            jset(doc, "schedules", s);
        }
        json_print(doc);
    } else if (output != NULL) {
        status = write_file(c, output, st, &g);
    } else {
        metrics_write_text(stdout, st);
        write_schedule_gauges(stdout, &g);
        if (fflush(stdout) != 0)
            status = cli_error(c, EXIT_FAILED, "io", "cannot write stdout");
    }
    duro_free(st);
    duro_client_destroy(client);
    return status;
}
