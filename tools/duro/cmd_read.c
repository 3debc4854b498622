/* cmd_read.c - the verbs that only look: list, status, history, wait,
 * runtimes and version. They open the store with create=0, so a missing
 * database file is an error and is never created. Single-threaded. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define LIST_PAGE 1000 /* DURO_QUERY_LIMIT_MAX */
/* `duro list` counts the matches up to this many (or --limit, when
 * larger): "showing 100 of more than 10000". */
#define LIST_COUNT_CAP 10000

/* Keyset paging for `duro list` and the console's lister (cli.h). */
int cli_list_page(duro_client *client, duro_instance_filter *filter,
                  size_t limit, char **after, duro_instance_list **page)
{
    filter->limit = limit;
    filter->after_instance = *after;
    int rc = duro_client_list(client, filter, page);
    filter->after_instance = NULL;
    if (rc != DURO_OK)
        return rc;
    size_t n = (*page)->count;
    free(*after);
    *after = n > 0 ? strdup((*page)->items[n - 1].instance_id) : NULL;
    return DURO_OK;
}

/* ---- list ---------------------------------------------------------------- */

static const char list_help[] =
    "usage: duro list [--status S[,S...]] [--name N] [--version V]\n"
    "                 [--since T] [--until T] [--limit K] [--json]\n"
    "\n"
    "Lists instances in id order, with their status and times.\n"
    "  --status S,...  only these statuses (pending, running, suspended,\n"
    "                  completed, failed, cancelled, terminated; an\n"
    "                  instance that continues as new stays running)\n"
    "  --name N        only instances of orchestration N\n"
    "  --version V     only instances of orchestration version V (as\n"
    "                  started, then as run; '' the default version):\n"
    "                  with --status pending, those that wait for a\n"
    "                  runtime of V (duro runtimes: who has what)\n"
    "  --since T       created at or after T (2026-05-01T12:00:00Z,\n"
    "                  2026-05-01, 2h, '30m ago')\n"
    "  --until T       created before T\n"
    "  --limit K       show at most K (default 100; 0: all). The matches\n"
    "                  are counted up to 10000 (or K, when larger): past\n"
    "                  that, \"showing 100 of more than 10000\"\n";

int cmd_list(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"status", required_argument, NULL, 's'},
        {"name", required_argument, NULL, 'n'},
        {"since", required_argument, NULL, 'S'},
        {"until", required_argument, NULL, 'U'},
        {"limit", required_argument, NULL, 'l'},
        {"version", required_argument, NULL, 'v'},
        {0}};
    duro_instance_filter filter = {0};
    const char *version = NULL;
    uint64_t limit = 100;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, list_help, &status)) != -1) {
        int bad = 0;
        switch (ch) {
        case -2:
            return status;
        case 's':
            bad = args_status_mask(c, "--status", optarg, &filter.status_mask);
            break;
        case 'n':
            filter.name = optarg;
            break;
        case 'v':
            version = optarg;
            break;
        case 'S':
            bad = args_time(c, "--since", optarg, &filter.created_after_ms);
            break;
        case 'U':
            bad = args_time(c, "--until", optarg, &filter.created_before_ms);
            break;
        case 'l':
            bad = args_uint(c, "--limit", optarg, 1000000000, &limit);
            break;
        }
        if (bad)
            return EXIT_USAGE;
    }
    if (optind < argc) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c, "unexpected argument '%s'",
                         text_quote(argv[optind], quoted, sizeof(quoted)));
    }

    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    /* Pages of up to LIST_PAGE by id (duro_client_query), until --limit
     * rows are shown. --json prints each page's rows as it comes (memory
     * holds one page, however many are listed); for people, the pages are
     * kept (the columns' widths come first). Nothing past the last row
     * shown is read: the first page counts the matches up to count_max
     * (LIST_COUNT_CAP, or the limit when larger), from its snapshot, so
     * the first page costs the same among 100 or a million instances. */
    duro_instance_query q;
    duro_instance_query_init(&q);
    q.order = DURO_ORDER_ID;
    q.status_mask = filter.status_mask;
    q.name = filter.name;
    q.orchestration_version = version;
    q.created_after_ms = filter.created_after_ms;
    q.created_before_ms = filter.created_before_ms;
    q.count_max = limit > LIST_COUNT_CAP ? (int64_t)limit : LIST_COUNT_CAP;
    duro_instance_page **kept = NULL;
    size_t kept_count = 0, shown = 0;
    uint64_t total = 0;
    int capped = 0, more = 0;
    char *cursor = NULL;
    int rc = DURO_OK, out_failed = 0;
    if (c->json)
        out_failed |= fputs("{\n  \"instances\": [", stdout) == EOF;
    for (int first = 1;; first = 0) {
        q.limit = limit == 0 || limit - shown > LIST_PAGE
                      ? LIST_PAGE
                      : (size_t)(limit - shown);
        q.cursor = cursor;
        q.count_total = first && limit != 0;
        duro_instance_page *page = NULL;
        rc = duro_client_query(client, &q, &page);
        if (rc != DURO_OK)
            break;
        if (q.count_total) {
            total = page->total > 0 ? (uint64_t)page->total : 0;
            capped = page->total_capped;
        }
        free(cursor);
        cursor = NULL;
        if (page->next_cursor != NULL &&
            (cursor = strdup(page->next_cursor)) == NULL) {
            duro_instance_page_free(page);
            rc = DURO_NOMEM;
            break;
        }
        size_t n = page->count;
        duro_instance_page **grown = NULL;
        if (c->json) {
            for (size_t i = 0; i < n; i++) {
                out_failed |=
                    fputs(shown + i > 0 ? ",\n" : "\n", stdout) == EOF;
                out_failed |=
                    json_print_nested(json_instance(&page->items[i]), 2) != 0;
            }
            shown += n;
            duro_instance_page_free(page);
        } else if (n > 0 &&
                   (grown = realloc(kept, (kept_count + 1) * sizeof(*kept))) !=
                       NULL) {
            kept = grown;
            kept[kept_count++] = page;
            shown += n;
        } else {
            duro_instance_page_free(page);
            if (n > 0) {
                rc = DURO_NOMEM;
                break;
            }
        }
        if (cursor == NULL)
            break; /* every match is shown */
        if (limit != 0 && shown >= limit) {
            more = 1; /* matches after the last row shown */
            break;
        }
    }
    free(cursor);
    if (rc != DURO_OK) {
        for (size_t i = 0; i < kept_count; i++)
            duro_instance_page_free(kept[i]);
        free(kept);
        duro_client_destroy(client);
        if (c->json) /* what was printed is not a document: end the line */
            fputc('\n', stdout);
        return cli_error_rc(c, rc, "listing instances");
    }
    /* All shown: the count is what was shown. Otherwise the first page's
     * count, which rows created or deleted since may have overtaken. */
    if (!more) {
        total = shown;
        capped = 0;
    } else if (!capped && total <= shown) {
        total = shown + 1;
    }

    if (c->json) {
        out_failed |=
            printf("%s],\n  \"total\": %llu,\n  \"total_capped\": %s,\n"
                   "  \"truncated\": %s\n}\n",
                   shown > 0 ? "\n  " : "", (unsigned long long)total,
                   capped ? "true" : "false", more ? "true" : "false") < 0 ||
            fflush(stdout) == EOF;
        if (out_failed)
            fputs("duro: writing the listing failed\n", stderr);
    } else if (shown == 0) {
        fputs("no instances match\n", stderr);
    } else {
        /* Column widths first, then the rows. */
        size_t w_id = 2, w_name = 4, w_status = 6, w_created = 7;
        char created[96], t[64], age[32];
        char id[TEXT_ESCAPE_SIZE], name[TEXT_ESCAPE_SIZE];
        size_t left = shown;
        for (size_t p = 0; p < kept_count; p++)
            for (size_t i = 0; i < kept[p]->count && left > 0; i++, left--) {
                const duro_instance_info *in = &kept[p]->items[i];
                size_t w =
                    text_width(text_escape(in->instance_id, id, sizeof(id)));
                w_id = w > w_id ? w : w_id;
                w = text_width(text_escape(in->name, name, sizeof(name)));
                w_name = w > w_name ? w : w_name;
                w = strlen(status_word(in->status));
                w_status = w > w_status ? w : w_status;
                snprintf(created, sizeof(created), "%s (%s)",
                         text_local_time(in->created_ms, t, sizeof(t)),
                         text_age(c->now_ms, in->created_ms, age, sizeof(age)));
                w = text_width(created);
                w_created = w > w_created ? w : w_created;
            }
        text_pad("ID", w_id + 2);
        text_pad("NAME", w_name + 2);
        text_pad("STATUS", w_status + 2);
        text_pad("CREATED", w_created + 2);
        fputs("UPDATED\n", stdout);
        left = shown;
        for (size_t p = 0; p < kept_count; p++)
            for (size_t i = 0; i < kept[p]->count && left > 0; i++, left--) {
                const duro_instance_info *in = &kept[p]->items[i];
                text_pad(text_escape(in->instance_id, id, sizeof(id)),
                         w_id + 2);
                text_pad(text_escape(in->name, name, sizeof(name)), w_name + 2);
                fputs(text_status_color(c, in->status), stdout);
                text_pad(status_word(in->status), w_status);
                fputs(text_reset(c), stdout);
                fputs("  ", stdout);
                snprintf(created, sizeof(created), "%s (%s)",
                         text_local_time(in->created_ms, t, sizeof(t)),
                         text_age(c->now_ms, in->created_ms, age, sizeof(age)));
                text_pad(created, w_created + 2);
                puts(text_age(c->now_ms, in->updated_ms, age, sizeof(age)));
            }
        if (more)
            fprintf(stderr, "showing %zu of %s%llu; use --limit K (0: all)\n",
                    shown, capped ? "more than " : "",
                    (unsigned long long)total);
    }
    if (total == 0 && filter.name != NULL)
        cli_note_unknown_name(c, client, filter.name);
    for (size_t i = 0; i < kept_count; i++)
        duro_instance_page_free(kept[i]);
    free(kept);
    duro_client_destroy(client);
    return out_failed ? EXIT_FAILED : EXIT_OK;
}

/* ---- status -------------------------------------------------------------- */

static const char status_help[] =
    "usage: duro status ID [--json]\n"
    "\n"
    "Shows one instance: status, times, output or error, who cancelled it\n"
    "and why, and why it is stuck (last problem, next attempt). A live\n"
    "instance with a cancellation requested shows \"(cancelling)\": one\n"
    "registered with observe_cancel stays running while its code cleans\n"
    "up. A cancellation that arrived while the turn that completed (or\n"
    "failed) the instance was running did not apply: cancel_requested says\n"
    "so, and cancelled_by is empty (JSON: cancel_outcome \"too_late\").\n";

/* Opens the store and reads one instance; exit status 3 when it does not
 * exist. */
static int read_instance(cli *c, const char *id, duro_client **client,
                         duro_instance_info **info)
{
    *info = NULL;
    int status = cli_open(c, CLI_OPEN_READ, client);
    if (status != EXIT_OK)
        return status;
    char quoted[TEXT_QUOTE_SIZE];
    int rc = duro_client_get_status(*client, id, info);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, text_quote(id, quoted, sizeof(quoted)));
    if ((*info)->status == DURO_STATUS_NOT_FOUND)
        return cli_error(c, EXIT_NOT_FOUND, "not_found",
                         "instance '%s' does not exist",
                         text_quote(id, quoted, sizeof(quoted)));
    return EXIT_OK;
}

static void card_line(const char *key, const char *value)
{
    printf("%-18s %s\n", key, value != NULL && *value ? value : "-");
}

/* A line of user-chosen text (an id, a name): escaped. */
static void card_text(const char *key, const char *value)
{
    char buf[TEXT_ESCAPE_SIZE];
    card_line(key, value != NULL ? text_escape(value, buf, sizeof(buf)) : NULL);
}

static void card_time(const cli *c, const char *key, int64_t ms)
{
    char t[64], age[32], line[128];
    if (ms == 0) {
        card_line(key, "-");
        return;
    }
    snprintf(line, sizeof(line), "%s (%s)", text_local_time(ms, t, sizeof(t)),
             text_age(c->now_ms, ms, age, sizeof(age)));
    card_line(key, line);
}

static void print_card(const cli *c, const duro_instance_info *in)
{
    char buf[512], line[1024];
    card_text("id:", in->instance_id);
    card_text("name:", in->name);
    card_text("version:", in->version);
    snprintf(line, sizeof(line), "%s%s%s%s", text_status_color(c, in->status),
             status_word(in->status), text_reset(c),
             instance_cancelling(in) ? " (cancelling)" : "");
    card_line("status:", line);
    snprintf(line, sizeof(line), "%llu", (unsigned long long)in->execution_id);
    card_line("execution:", line);
    card_time(c, "created:", in->created_ms);
    card_time(c, "updated:", in->updated_ms);
    card_time(c, "finished:", in->finished_ms);
    card_time(c, "deadline:", in->deadline_ms);
    card_line("output:", in->output
                             ? text_short(in->output, 120, buf, sizeof(buf))
                             : NULL);
    if (in->error != NULL) {
        snprintf(line, sizeof(line), "%s%s%s%s",
                 text_short(in->error, 120, buf, sizeof(buf)),
                 in->category ? " (" : "",
                 in->category ? duro_category_name(in->category) : "",
                 in->category ? ")" : "");
        card_line("error:", line);
    } else {
        card_line("error:", NULL);
    }
    card_line("custom_status:",
              in->custom_status
                  ? text_short(in->custom_status, 120, buf, sizeof(buf))
                  : NULL);
    card_text("parent:", in->parent_instance);
    snprintf(line, sizeof(line), "%llu", (unsigned long long)in->history_count);
    card_line("history_events:", line);
    /* A request that did not end the instance is never shown as if it
     * had: it says what happened instead, and cancelled_by stays empty. */
    const char *outcome = cancel_outcome(in);
    int applied = outcome != NULL && (strcmp(outcome, "cancelled") == 0 ||
                                      strcmp(outcome, "pending") == 0);
    if (outcome != NULL && !applied) {
        char t[64], age[32], by[TEXT_QUOTE_SIZE];
        snprintf(line, sizeof(line), "%s (%s) by %s, %s",
                 text_local_time(in->cancel_requested_ms, t, sizeof(t)),
                 text_age(c->now_ms, in->cancel_requested_ms, age, sizeof(age)),
                 in->cancelled_by != NULL
                     ? text_quote(in->cancelled_by, by, sizeof(by))
                     : "-",
                 strcmp(outcome, "terminated") == 0
                     ? "then terminated before the cancel took effect: not "
                       "applied"
                 : in->status == DURO_STATUS_FAILED
                     ? "arrived after the instance failed: not applied"
                     : "arrived after the instance completed: not applied");
        card_line("cancel_requested:", line);
    } else {
        card_time(c, "cancel_requested:", in->cancel_requested_ms);
    }
    card_line("cancel_reason:",
              in->cancel_reason
                  ? text_short(in->cancel_reason, 120, buf, sizeof(buf))
                  : NULL);
    card_text("cancelled_by:", applied ? in->cancelled_by : NULL);
    /* whole (a problem is at most DURO_ERROR_MESSAGE_MAX bytes): a
     * version's wait ends with the live runtimes and what they have */
    char problem[TEXT_ESCAPE_SIZE];
    card_line("last_problem:",
              in->last_problem
                  ? text_short(in->last_problem, DURO_ERROR_MESSAGE_MAX,
                               problem, sizeof(problem))
                  : NULL);
    card_time(c, "last_problem_at:", in->last_problem_ms);
    card_time(c, "next_attempt:", in->next_attempt_ms);
}

int cmd_status(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {0}};
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, status_help, &status)) != -1)
        if (ch == -2)
            return status;
    if (argc - optind != 1)
        return cli_usage(c, "expected one instance id");
    if (argv[optind][0] == '\0')
        return cli_usage(c, "the instance id must not be empty");
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    status = read_instance(c, argv[optind], &client, &info);
    if (status == EXIT_OK) {
        if (c->json)
            json_print(json_instance(info));
        else
            print_card(c, info);
    }
    duro_free(info);
    duro_client_destroy(client);
    return status;
}

/* ---- history ------------------------------------------------------------- */

static const char history_help[] =
    "usage: duro history ID [--execution N] [--json]\n"
    "       duro history --export ID\n"
    "\n"
    "Prints one execution's history (default: the current one), one line\n"
    "per event: #id +offset Kind name details. Completions cite their\n"
    "scheduling event and the time taken; cancellations, terminations,\n"
    "suspensions and resumptions show reason and who asked; a cancel\n"
    "delivered to the code says \"observed\", the timer that bounds its\n"
    "cleanup \"cleanup deadline\".\n"
    "A patch marker shows its change id (change=ID).\n"
    "  --execution N   execution N (1 is the first)\n"
    "  --export        every execution the store holds, as the stable JSON\n"
    "                  document replay tests read (duro_replay_json;\n"
    "                  docs/history-json.md): duro history --export ID >\n"
    "                  ID.json\n";

/* Who decided an activity or child cancellation with this reason:
 * @p requester asked for the instance's cancellation, @p terminator for
 * its termination. */
static const char *cancel_decider(const char *reason, const char *requester,
                                  const char *terminator)
{
    if (reason == NULL)
        return "-";
    if (strcmp(reason, DURO_REASON_INSTANCE_CANCELLED) == 0)
        return requester != NULL ? requester : "-";
    if (strcmp(reason, DURO_REASON_INSTANCE_TERMINATED) == 0)
        return terminator != NULL ? terminator : "runtime";
    if (strcmp(reason, DURO_REASON_SELECT_LOSER) == 0 ||
        strcmp(reason, DURO_REASON_TASK_CANCELLED) == 0)
        return "orchestration";
    return "runtime";
}

void history_deciders(const duro_history *h, const char *cancelled_by,
                      const char **requester, const char **terminator)
{
    *requester = cancelled_by;
    *terminator = NULL;
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        if (e->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
            e->requested_by)
            *requester = e->requested_by;
        if (e->kind == DURO_EVENT_ORCHESTRATION_TERMINATED && e->requested_by)
            *terminator = e->requested_by;
    }
}

/* Who decided @p e when it does not say (the text's by=), or NULL. */
static const char *event_decider(const duro_event *e, const char *requester,
                                 const char *terminator)
{
    const char *by = NULL;
    if (e->kind == DURO_EVENT_ORCHESTRATION_CANCELLED)
        by = requester;
    else if (e->kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED ||
             e->kind == DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED)
        by = cancel_decider(e->reason, requester, terminator);
    return by != NULL && strcmp(by, "-") != 0 ? by : NULL;
}

json_t *json_event(const duro_event *e, int64_t start_ms, const char *requester,
                   const char *terminator)
{
    const char *by;
    json_t *o = json_object();
    jset(o, "event_id", jint((int64_t)e->event_id));
    jset(o, "kind", jstr(duro_event_kind_name(e->kind)));
    jset_time(o, "timestamp", e->timestamp_ms);
    jset(o, "offset_ms", jint(e->timestamp_ms - start_ms));
    if (e->source_event_id)
        jset(o, "source_event_id", jint((int64_t)e->source_event_id));
    if (e->name)
        jset(o, "name", jstr(e->name));
    if (e->version)
        jset(o, "version", jstr(e->version));
    if (e->payload)
        jset(o, "payload", jpayload(e->payload));
    if (e->error)
        jset(o, "error", jstr(e->error));
    if (e->category)
        jset(o, "category", jstr(duro_category_name(e->category)));
    if (e->reason)
        jset(o, "reason", jstr(e->reason));
    if (e->requested_by)
        jset(o, "requested_by", jstr(e->requested_by));
    else if ((by = event_decider(e, requester, terminator)) != NULL)
        jset(o, "requested_by", jstr(by));
    if (e->ref_instance)
        jset(o, "ref_instance", jstr(e->ref_instance));
    if (e->ref_execution)
        jset(o, "ref_execution", jint((int64_t)e->ref_execution));
    if (e->ref_event_id)
        jset(o, "ref_event_id", jint((int64_t)e->ref_event_id));
    if (e->fire_at_ms)
        jset_time(o, "fire_at", e->fire_at_ms);
    if (e->started_ms) /* when the worker ran an activity; absent: unknown */
        jset_time(o, "started", e->started_ms);
    if (e->finished_ms)
        jset_time(o, "finished", e->finished_ms);
    if (e->attempt)
        jset(o, "attempt", jint(e->attempt));
    if (e->flags)
        jset(o, "flags", jint(e->flags));
    if (e->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
        (e->flags & DURO_CANCEL_OBSERVED))
        jset(o, "observed", json_true());
    if (e->kind == DURO_EVENT_TIMER_CREATED &&
        (e->flags & DURO_TIMER_CLEANUP_DEADLINE))
        jset(o, "cleanup_deadline", json_true());
    return o;
}

/* The details column of one event; @p requester and @p terminator as
 * cancel_decider's. */
static void event_details(const cli *c, const duro_history *h,
                          const duro_event *e, const char *requester,
                          const char *terminator, char *out, size_t size)
{
    char a[256], b[256], r[256], d[32];
    const duro_event *src =
        e->source_event_id >= 1 && e->source_event_id <= h->count
            ? &h->events[e->source_event_id - 1]
            : NULL;
    char cite[64] = "";
    if (src != NULL)
        snprintf(
            cite, sizeof(cite), "(#%llu, %s)",
            (unsigned long long)e->source_event_id,
            text_duration(e->timestamp_ms - src->timestamp_ms, d, sizeof(d)));
    else if (e->source_event_id)
        snprintf(cite, sizeof(cite), "(#%llu)",
                 (unsigned long long)e->source_event_id);
    /* When the worker ran an activity (known from provider version 6), as
     * offsets from the execution's start like the offset column. */
    char ran[128] = "";
    if (e->started_ms != 0 && e->finished_ms != 0 && h->count > 0) {
        char s1[32], s2[32];
        int64_t start = h->events[0].timestamp_ms;
        snprintf(ran, sizeof(ran), " ran %s (+%s -> +%s)",
                 text_duration(e->finished_ms - e->started_ms, d, sizeof(d)),
                 text_duration(e->started_ms - start, s1, sizeof(s1)),
                 text_duration(e->finished_ms - start, s2, sizeof(s2)));
    }
    const char *cat = e->category ? duro_category_name(e->category) : NULL;
    switch (e->kind) {
    case DURO_EVENT_ORCHESTRATION_STARTED:
        snprintf(out, size, "input=%s%s%s%s%s",
                 text_short(e->payload, 60, a, sizeof(a)),
                 e->version && *e->version ? " version=" : "",
                 e->version && *e->version
                     ? text_short(e->version, 60, b, sizeof(b))
                     : "",
                 e->ref_instance ? " parent=" : "",
                 e->ref_instance ? text_short(e->ref_instance, 80, r, sizeof(r))
                                 : "");
        break;
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
        snprintf(out, size, "output=%s",
                 text_short(e->payload, 60, a, sizeof(a)));
        break;
    case DURO_EVENT_CONTINUED_AS_NEW:
        snprintf(out, size, "input=%s",
                 text_short(e->payload, 60, a, sizeof(a)));
        break;
    case DURO_EVENT_ORCHESTRATION_FAILED:
    case DURO_EVENT_ACTIVITY_FAILED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
        snprintf(out, size, "%s%serror=\"%s\"%s%s%s%s", cite, *cite ? " " : "",
                 text_short(e->error, 80, a, sizeof(a)), cat ? " (" : "",
                 cat ? cat : "", cat ? ")" : "", ran);
        break;
    case DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED:
    case DURO_EVENT_ORCHESTRATION_TERMINATED:
    case DURO_EVENT_EXECUTION_SUSPENDED:
    case DURO_EVENT_EXECUTION_RESUMED:
        snprintf(out, size, "reason=\"%s\" by=%s%s",
                 text_short(e->reason, 80, a, sizeof(a)),
                 e->requested_by ? text_short(e->requested_by, 60, b, sizeof(b))
                                 : "-",
                 e->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
                         (e->flags & DURO_CANCEL_OBSERVED)
                     ? " observed"
                     : "");
        break;
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
        snprintf(out, size, "reason=\"%s\" by=%s",
                 text_short(e->reason, 80, a, sizeof(a)),
                 requester ? text_short(requester, 60, b, sizeof(b)) : "-");
        break;
    case DURO_EVENT_ACTIVITY_SCHEDULED:
        if (e->attempt > 1)
            snprintf(out, size, "input=%s attempt=%u",
                     text_short(e->payload, 60, a, sizeof(a)), e->attempt);
        else
            snprintf(out, size, "input=%s",
                     text_short(e->payload, 60, a, sizeof(a)));
        break;
    case DURO_EVENT_ACTIVITY_COMPLETED:
    case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
        snprintf(out, size, "%s output=%s%s", cite,
                 text_short(e->payload, 60, a, sizeof(a)), ran);
        break;
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        snprintf(out, size, "%s reason=\"%s\" by=%s", cite,
                 text_short(e->reason, 80, a, sizeof(a)),
                 text_short(cancel_decider(e->reason, requester, terminator),
                            60, b, sizeof(b)));
        break;
    case DURO_EVENT_TIMER_CREATED:
        snprintf(out, size, "fires %s (+%s)%s",
                 text_local_time(e->fire_at_ms, a, sizeof(a)),
                 text_duration(e->fire_at_ms - e->timestamp_ms, d, sizeof(d)),
                 e->flags & DURO_TIMER_CLEANUP_DEADLINE ? " cleanup deadline"
                                                        : "");
        break;
    case DURO_EVENT_TIMER_FIRED:
        snprintf(out, size, "%s", cite);
        break;
    case DURO_EVENT_EVENT_RAISED:
        snprintf(out, size, "payload=%s",
                 text_short(e->payload, 60, a, sizeof(a)));
        break;
    case DURO_EVENT_EXECUTION_RESET:
        snprintf(out, size,
                 "%s of execution %" PRIu64 " after event %" PRIu64
                 " reason=\"%s\" by=%s",
                 e->flags & DURO_RESET_REWIND ? "rewind" : "reset",
                 e->ref_execution, e->ref_event_id,
                 text_short(e->reason, 80, a, sizeof(a)),
                 e->requested_by ? text_short(e->requested_by, 60, b, sizeof(b))
                                 : "-");
        break;
    case DURO_EVENT_PATCH_MARKER:
        /* the change id is the name column; said again so that a reader
         * of the details alone sees which change the code took */
        snprintf(out, size, "change=%s", text_short(e->name, 80, a, sizeof(a)));
        break;
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
        snprintf(out, size, "child=%s input=%s%s",
                 text_short(e->ref_instance, 80, r, sizeof(r)),
                 text_short(e->payload, 60, a, sizeof(a)),
                 e->flags & DURO_START_DETACHED ? " detached" : "");
        break;
    default:
        out[0] = '\0';
        break;
    }
    (void)c;
}

int cmd_history(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"execution", required_argument, NULL, 'e'},
        {"export", no_argument, NULL, 'x'},
        {0}};
    uint64_t execution = 0;
    int ch, status = EXIT_OK, export = 0;
    while ((ch = cli_getopt(c, argc, argv, opts, history_help, &status)) !=
           -1) {
        if (ch == -2)
            return status;
        if (ch == 'x')
            export = 1;
        /* executions count from 1 */
        if (ch == 'e' && args_uint_range(c, "--execution", optarg, 1,
                                         UINT64_MAX, &execution) != 0)
            return EXIT_USAGE;
    }
    if (argc - optind != 1)
        return cli_usage(c, "expected one instance id");
    const char *id = argv[optind];
    if (*id == '\0')
        return cli_usage(c, "the instance id must not be empty");
    if (export && execution != 0)
        return cli_usage(c, "--export writes every execution: it takes no "
                            "--execution");
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    status = read_instance(c, id, &client, &info);
    if (export && status == EXIT_OK) {
        /* The library writes the form (one writer, beside its reader). */
        char *doc = NULL, quoted[TEXT_QUOTE_SIZE];
        int rc = duro_client_export_history(client, id, &doc);
        if (rc != DURO_OK)
            status =
                cli_error_rc(c, rc, text_quote(id, quoted, sizeof(quoted)));
        else
            fputs(doc, stdout);
        duro_free(doc);
    }
    if (export) {
        duro_free(info);
        duro_client_destroy(client);
        return status;
    }
    duro_history *h = NULL;
    duro_history none = {0};
    if (status == EXIT_OK && execution == 0 && info->execution_id == 0) {
        /* Pending, its first turn not run: no execution, no events yet. */
        none.instance_id = id;
        h = &none;
    } else if (status == EXIT_OK) {
        char quoted[TEXT_QUOTE_SIZE];
        int rc = duro_client_read_history(client, id, execution, &h);
        if (rc == DURO_NOT_FOUND && execution != 0)
            status = cli_error(c, EXIT_NOT_FOUND, "not_found",
                               "instance '%s' has no execution %llu (the "
                               "current one is %llu%s)",
                               text_quote(id, quoted, sizeof(quoted)),
                               (unsigned long long)execution,
                               (unsigned long long)info->execution_id,
                               execution < info->execution_id
                                   ? "; earlier executions are pruned as a "
                                     "chain goes on (keep_executions) or by "
                                     "duro prune"
                                   : "");
        else if (rc != DURO_OK)
            status =
                cli_error_rc(c, rc, text_quote(id, quoted, sizeof(quoted)));
    }
    if (status != EXIT_OK) {
        duro_free(info);
        duro_client_destroy(client);
        return status;
    }
    int64_t start = h->count > 0 ? h->events[0].timestamp_ms : 0;
    const char *requester, *terminator;
    history_deciders(h, info->cancelled_by, &requester, &terminator);
    if (c->json) {
        json_t *events = json_array();
        for (size_t i = 0; i < h->count; i++)
            json_array_append_new(events, json_event(&h->events[i], start,
                                                     requester, terminator));
        json_t *doc = json_object();
        jset(doc, "instance_id", jstr(id));
        jset(doc, "execution_id", jint((int64_t)h->execution_id));
        jset(doc, "events", events);
        json_print(doc);
    } else {
        char t[64], age[32], shown[TEXT_ESCAPE_SIZE], name_shown[256];
        printf("%s  %s  execution %llu of %llu  %s%s%s  started %s (%s)\n",
               text_escape(id, shown, sizeof(shown)),
               text_short(info->name, 80, name_shown, sizeof(name_shown)),
               (unsigned long long)h->execution_id,
               (unsigned long long)info->execution_id,
               text_status_color(c, info->status), status_word(info->status),
               text_reset(c), text_local_time(start, t, sizeof(t)),
               text_age(c->now_ms, start, age, sizeof(age)));
        /* Column widths: id, offset, kind, name. */
        size_t w_id = 2, w_off = 2, w_kind = 4, w_name = 1;
        char off[40], d[32], idbuf[32], details[1024], ename[TEXT_ESCAPE_SIZE];
        for (size_t i = 0; i < h->count; i++) {
            const duro_event *e = &h->events[i];
            size_t w = (size_t)snprintf(idbuf, sizeof(idbuf), "#%llu",
                                        (unsigned long long)e->event_id);
            w_id = w > w_id ? w : w_id;
            w = (size_t)snprintf(
                off, sizeof(off), "+%s",
                text_duration(e->timestamp_ms - start, d, sizeof(d)));
            w_off = w > w_off ? w : w_off;
            w = strlen(duro_event_kind_name(e->kind));
            w_kind = w > w_kind ? w : w_kind;
        }
        for (size_t i = 0; i < h->count; i++) {
            const duro_event *e = &h->events[i];
            const char *name = e->name;
            if (name == NULL && e->source_event_id >= 1 &&
                e->source_event_id <= h->count)
                name = h->events[e->source_event_id - 1].name;
            size_t w = text_width(text_escape(name, ename, sizeof(ename)));
            w_name = w > w_name ? w : w_name;
        }
        for (size_t i = 0; i < h->count; i++) {
            const duro_event *e = &h->events[i];
            const char *name = e->name;
            if (name == NULL && e->source_event_id >= 1 &&
                e->source_event_id <= h->count)
                name = h->events[e->source_event_id - 1].name;
            snprintf(idbuf, sizeof(idbuf), "#%llu",
                     (unsigned long long)e->event_id);
            snprintf(off, sizeof(off), "+%s",
                     text_duration(e->timestamp_ms - start, d, sizeof(d)));
            event_details(c, h, e, requester, terminator, details,
                          sizeof(details));
            text_pad(idbuf, w_id + 2);
            fputs(text_dim(c), stdout);
            text_pad(off, w_off);
            fputs(text_reset(c), stdout);
            fputs("  ", stdout);
            text_pad(duro_event_kind_name(e->kind), w_kind + 2);
            text_pad(text_escape(name, ename, sizeof(ename)), w_name + 2);
            fputs(details, stdout);
            fputc('\n', stdout);
        }
    }
    if (h != &none)
        duro_history_free(h);
    duro_free(info);
    duro_client_destroy(client);
    return EXIT_OK;
}

/* ---- wait ---------------------------------------------------------------- */

static const char wait_help[] =
    "usage: duro wait ID [--timeout DURATION] [--json]\n"
    "\n"
    "Waits until the instance is completed, failed, cancelled or\n"
    "terminated, then prints its status and output or error (a suspended\n"
    "instance is waited for like a running one).\n"
    "  --timeout D   give up after D (500ms, 30s, 5m, 1h; default: never)\n"
    "Exit status: 0 completed, 8 failed, 9 cancelled, 10 terminated, 7\n"
    "timed out, 3 no such instance.\n";

int cmd_wait(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"timeout", required_argument, NULL, 't'}, {0}};
    int64_t timeout = -1;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, wait_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 't' && args_duration(c, "--timeout", optarg, &timeout) != 0)
            return EXIT_USAGE;
    }
    if (argc - optind != 1)
        return cli_usage(c, "expected one instance id");
    const char *id = argv[optind];
    if (*id == '\0')
        return cli_usage(c, "the instance id must not be empty");
    duro_client *client = NULL;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    duro_instance_info *info = NULL;
    int rc;
    int64_t deadline = duro_now_ms() + (timeout > 0 ? timeout : 0);
    for (;;) {
        /* No timeout: wait in one-minute slices, forever. */
        int64_t slice = timeout < 0 ? 60000 : deadline - duro_now_ms();
        rc = duro_client_wait(client, id, slice > 0 ? slice : 0, &info);
        if (rc != DURO_TIMEOUT || timeout >= 0)
            break;
        duro_free(info);
        info = NULL;
    }
    if (rc != DURO_OK && rc != DURO_TIMEOUT) {
        duro_free(info);
        duro_client_destroy(client);
        char quoted[TEXT_QUOTE_SIZE];
        if (rc == DURO_NOT_FOUND)
            return cli_error(c, EXIT_NOT_FOUND, "not_found",
                             "instance '%s' does not exist",
                             text_quote(id, quoted, sizeof(quoted)));
        return cli_error_rc(c, rc, text_quote(id, quoted, sizeof(quoted)));
    }
    int timed_out = rc == DURO_TIMEOUT;
    status = timed_out                                ? EXIT_TIMEOUT
             : info->status == DURO_STATUS_COMPLETED  ? EXIT_OK
             : info->status == DURO_STATUS_CANCELLED  ? EXIT_WAIT_CANCELLED
             : info->status == DURO_STATUS_TERMINATED ? EXIT_WAIT_TERMINATED
                                                      : EXIT_WAIT_FAILED;
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "timed_out", json_boolean(timed_out));
        jset(doc, "instance", json_instance(info));
        json_print(doc);
    } else {
        char buf[512], shown[TEXT_ESCAPE_SIZE];
        printf("%s %s%s%s", text_escape(id, shown, sizeof(shown)),
               text_status_color(c, info->status), status_word(info->status),
               text_reset(c));
        if (info->status == DURO_STATUS_COMPLETED && info->output)
            printf(" output=%s",
                   text_short(info->output, 120, buf, sizeof(buf)));
        else if (info->error && !timed_out)
            printf(" error=\"%s\"",
                   text_short(info->error, 120, buf, sizeof(buf)));
        fputc('\n', stdout);
    }
    if (timed_out) {
        char quoted[TEXT_QUOTE_SIZE];
        fprintf(stderr, "duro wait: instance '%s' still %s at the timeout\n",
                text_quote(id, quoted, sizeof(quoted)),
                status_word(info->status));
    }
    duro_free(info);
    duro_client_destroy(client);
    return status;
}

/* ---- runtimes ------------------------------------------------------------ */

static const char runtimes_help[] =
    "usage: duro runtimes [--name N] [--json]\n"
    "\n"
    "Lists the live runtimes - those whose last heartbeat is recent (a\n"
    "runtime writes one every 10 s and counts as gone after 3 missed) -\n"
    "oldest first, with the orchestration versions each runs: which\n"
    "runtimes can run the instances `duro list --version V` shows.\n"
    "  --name N   only orchestration N's versions (and the runtimes that\n"
    "             have none of it, as \"none\")\n";

/* The versions of orchestration `name` (NULL: every one, "name@version")
 * that r registers, joined with ", ", into out[size]; "none" when it has
 * none. */
static const char *runtime_versions(const duro_runtime_info *r,
                                    const char *name, char *out, size_t size)
{
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < r->orchestration_count && used + 1 < size; i++) {
        const duro_runtime_orchestration *o = &r->orchestrations[i];
        if (name != NULL && strcmp(o->name, name) != 0)
            continue;
        const char *v = o->version[0] != '\0' ? o->version : "(default)";
        int n = name != NULL ? snprintf(out + used, size - used, "%s%s",
                                        used > 0 ? ", " : "", v)
                             : snprintf(out + used, size - used, "%s%s@%s",
                                        used > 0 ? ", " : "", o->name, v);
        if (n < 0)
            break;
        used += (size_t)n < size - used ? (size_t)n : size - used - 1;
    }
    if (used == 0)
        snprintf(out, size, "none");
    return out;
}

static json_t *json_runtime(const duro_runtime_info *r, const char *name)
{
    json_t *o = json_object();
    jset(o, "runtime_id", jstr(r->runtime_id));
    jset(o, "host", jstr(r->host));
    jset(o, "pid", jint(r->pid));
    jset_time(o, "started", r->started_ms);
    jset_time(o, "heartbeat", r->heartbeat_ms);
    jset(o, "heartbeat_every_ms", jint(r->heartbeat_every_ms));
    json_t *orchs = json_array();
    for (size_t i = 0; i < r->orchestration_count; i++) {
        const duro_runtime_orchestration *e = &r->orchestrations[i];
        if (name != NULL && strcmp(e->name, name) != 0)
            continue;
        json_t *x = json_object();
        jset(x, "name", jstr(e->name));
        jset(x, "version", jstr(e->version));
        json_array_append_new(orchs, x);
    }
    jset(o, "orchestrations", orchs);
    json_t *acts = json_array();
    for (size_t i = 0; i < r->activity_count; i++)
        json_array_append_new(acts, jstr(r->activities[i]));
    jset(o, "activities", acts);
    return o;
}

int cmd_runtimes(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"name", required_argument, NULL, 'n'}, {0}};
    const char *name = NULL;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, runtimes_help, &status)) !=
           -1) {
        if (ch == -2)
            return status;
        if (ch == 'n')
            name = optarg;
    }
    if (optind < argc) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c, "unexpected argument '%s'",
                         text_quote(argv[optind], quoted, sizeof(quoted)));
    }
    if (name != NULL && name[0] == '\0')
        return cli_usage(c, "--name must not be empty");
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    duro_runtime_list *list = NULL;
    int rc = duro_client_runtimes(client, &list);
    if (rc != DURO_OK) {
        duro_client_destroy(client);
        return cli_error_rc(c, rc, "listing the live runtimes");
    }
    int out_failed = 0;
    if (c->json) {
        json_t *doc = json_object();
        json_t *arr = json_array();
        for (size_t i = 0; i < list->count; i++)
            json_array_append_new(arr, json_runtime(&list->items[i], name));
        jset(doc, "runtimes", arr);
        jset_time(doc, "read", list->read_ms);
        out_failed = json_print(doc) != 0;
    } else if (list->count == 0) {
        fputs("no live runtimes\n", stderr);
    } else {
        size_t w_rt = 7, w_started = 7, w_beat = 9;
        char label[TEXT_ESCAPE_SIZE + 32], host[TEXT_ESCAPE_SIZE];
        char started[96], t[64], age[32], beat[32];
        for (size_t i = 0; i < list->count; i++) {
            const duro_runtime_info *r = &list->items[i];
            snprintf(
                label, sizeof(label), "%s:%lld",
                text_escape(r->host[0] ? r->host : "?", host, sizeof(host)),
                (long long)r->pid);
            size_t w = text_width(label);
            w_rt = w > w_rt ? w : w_rt;
            snprintf(started, sizeof(started), "%s (%s)",
                     text_local_time(r->started_ms, t, sizeof(t)),
                     text_age(c->now_ms, r->started_ms, age, sizeof(age)));
            w = text_width(started);
            w_started = w > w_started ? w : w_started;
        }
        text_pad("RUNTIME", w_rt + 2);
        text_pad("STARTED", w_started + 2);
        text_pad("HEARTBEAT", w_beat + 2);
        fputs(name != NULL ? "VERSIONS\n" : "ORCHESTRATIONS\n", stdout);
        for (size_t i = 0; i < list->count; i++) {
            const duro_runtime_info *r = &list->items[i];
            snprintf(
                label, sizeof(label), "%s:%lld",
                text_escape(r->host[0] ? r->host : "?", host, sizeof(host)),
                (long long)r->pid);
            text_pad(label, w_rt + 2);
            snprintf(started, sizeof(started), "%s (%s)",
                     text_local_time(r->started_ms, t, sizeof(t)),
                     text_age(c->now_ms, r->started_ms, age, sizeof(age)));
            text_pad(started, w_started + 2);
            text_pad(
                text_age(list->read_ms, r->heartbeat_ms, beat, sizeof(beat)),
                w_beat + 2);
            char versions[2048], shown[TEXT_ESCAPE_SIZE];
            puts(text_escape(
                runtime_versions(r, name, versions, sizeof(versions)), shown,
                sizeof(shown)));
        }
    }
    duro_runtime_list_free(list);
    duro_client_destroy(client);
    return out_failed ? EXIT_FAILED : EXIT_OK;
}

/* ---- version ------------------------------------------------------------- */

static const char version_help[] = "usage: duro version [--json]\n"
                                   "\n"
                                   "Prints the versions of duro and of the "
                                   "libduro it runs with.\n";

int cmd_version(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {0}};
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, version_help, &status)) != -1)
        if (ch == -2)
            return status;
    if (optind < argc) {
        char quoted[TEXT_QUOTE_SIZE];
        return cli_usage(c, "unexpected argument '%s'",
                         text_quote(argv[optind], quoted, sizeof(quoted)));
    }
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "version", jstr(DURO_VERSION_STRING));
        jset(doc, "library_version", jstr(duro_version()));
        json_print(doc);
    } else {
        printf("duro %s (libduro %s)\n", DURO_VERSION_STRING, duro_version());
    }
    return EXIT_OK;
}
