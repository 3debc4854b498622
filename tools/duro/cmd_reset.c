/* cmd_reset.c - the verbs that send an ended instance back in time: reset
 * (to an event, or to the last good point) and rewind (a Failed instance,
 * its failed work retried), by id (duro_client_reset, duro_client_rewind)
 * or by query (duro_client_reset_matching: each instance to its last good
 * point), each with a dry run that says where each would go.
 * Single-threaded. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define BIT(status) (1u << (status))
#define ENDED                                                                  \
    (BIT(DURO_STATUS_COMPLETED) | BIT(DURO_STATUS_FAILED) |                    \
     BIT(DURO_STATUS_CANCELLED) | BIT(DURO_STATUS_TERMINATED))

/* The deadline options of both verbs. */
#define DEADLINE_HELP                                                          \
    "  --deadline W   the new execution's deadline: a time (RFC 3339, or\n"    \
    "                 a date) or a duration from now (30m, 2h, 7d); without\n" \
    "                 it the instance keeps its own, and one that has\n"       \
    "                 passed is refused (it would end again at once)\n"        \
    "  --no-deadline  the new execution runs without a deadline\n"

static const char reset_help[] =
    "usage: duro reset ID (--to EVENT | --last-good) [--execution N]\n"
    "                  [--deadline WHEN | --no-deadline] [--reason R]\n"
    "                  [--by WHO] [--dry-run] [--json]\n"
    "       duro reset --name N [--status S] [--since T] [--before T]\n"
    "                  [--max K] [--deadline WHEN | --no-deadline]\n"
    "                  [--reason R] [--by WHO] [--dry-run] [--yes] [--json]\n"
    "\n"
    "Resets an ended instance (completed, failed, cancelled or terminated):\n"
    "a new execution keeps its current execution's events up to EVENT and\n"
    "continues from there with the code registered now; the old execution\n"
    "stays readable (duro history ID --execution N). What the kept events\n"
    "leave pending runs again: activities without a result, timers not\n"
    "fired; a child without a result gets its ending again. EVENT must end\n"
    "a turn (the event after it is an input: a completion, a fired timer,\n"
    "a raised event, a child's result, a request); a point inside a turn\n"
    "is refused, naming the nearest valid points. --last-good: the latest\n"
    "such point before the first failure. By --name, each instance goes to\n"
    "its last good point.\n"
    "  --to EVENT     the last event kept (an event id of duro history)\n"
    "  --last-good    the last turn boundary before the first failure\n"
    "  --execution N  EVENT is in execution N, which must still be the\n"
    "                 current one (another reset came first "
    "otherwise)\n" DEADLINE_HELP
    "  --reason R     why (recorded on the ExecutionReset event)\n"
    "  --by WHO       who asks (default: user:NAME, your login name)\n"
    "  --dry-run      change nothing; show where each would be reset to\n"
    "  --name N       select by orchestration name\n"
    "  --status S     with --name: among completed,failed,cancelled,\n"
    "                 terminated (default: failed)\n"
    "  --since T      with --name: only instances created at or after T\n"
    "  --before T     with --name: only instances created before T\n"
    "  --max K        with --name: at most K instances (default and most: "
    "500)\n"
    "  -y, --yes      do not ask: by --name on a terminal it shows the count\n"
    "                 and asks \"Reset N instances of NAME? [y/N]\" first\n"
    "Exit status: 0 when every instance was (would be) reset; one id: 3 not\n"
    "found (the instance or the event), 4 live, overtaken by another\n"
    "reset or past its deadline, 1 refused (the message says why); by\n"
    "--name: 1 when any was refused.\n";

static const char rewind_help[] =
    "usage: duro rewind ID [--deadline WHEN | --no-deadline] [--reason R]\n"
    "                   [--by WHO] [--dry-run] [--json]\n"
    "       duro rewind --name N [--since T] [--before T] [--max K]\n"
    "                   [--deadline WHEN | --no-deadline] [--reason R]\n"
    "                   [--by WHO] [--dry-run] [--yes] [--json]\n"
    "\n"
    "Rewinds a failed instance: a reset to its last good point, the latest\n"
    "turn boundary before its first failure, so that the activities (or\n"
    "the child, rewound with it) that failed run again and the\n"
    "orchestration continues from there; the history before the failure\n"
    "is kept. Only a failed instance can be rewound.\n" DEADLINE_HELP
    "  --reason R     why (recorded on the ExecutionReset event)\n"
    "  --by WHO       who asks (default: user:NAME, your login name)\n"
    "  --dry-run      change nothing; show where each would be rewound to\n"
    "  --name N       every failed instance of orchestration N\n"
    "  --since T      with --name: only instances created at or after T\n"
    "  --before T     with --name: only instances created before T\n"
    "  --max K        with --name: at most K instances (default and most: "
    "500)\n"
    "  -y, --yes      do not ask: by --name on a terminal it shows the count\n"
    "                 and asks \"Rewind N instances of NAME? [y/N]\" first\n"
    "Exit status: 0 when every instance was (would be) rewound; one id: 3\n"
    "not found, 4 not failed (or overtaken by another reset, or past its\n"
    "deadline), 1 refused; by --name: 1 when any was refused.\n";

/* "reset" or "rewind" and their forms. */
typedef struct reset_verb {
    const char *name; /* "rewind" */
    const char *done; /* "rewound" */
    const char *ask;  /* "Rewind" */
    int rewind;       /* duro_client_rewind */
    const char *help;
} reset_verb;

static const reset_verb reset_v = {"reset", "reset", "Reset", 0, reset_help};
static const reset_verb rewind_v = {"rewind", "rewound", "Rewind", 1,
                                    rewind_help};

/* " (2 activities, 1 timer and 1 child again)" or "". */
static const char *again_text(const duro_reset_result *r, char *buf,
                              size_t size)
{
    char parts[3][48];
    int n = 0;
    if (r->activities > 0)
        snprintf(parts[n++], sizeof(parts[0]), "%u activit%s", r->activities,
                 r->activities == 1 ? "y" : "ies");
    if (r->timers > 0)
        snprintf(parts[n++], sizeof(parts[0]), "%u timer%s", r->timers,
                 r->timers == 1 ? "" : "s");
    if (r->children > 0)
        snprintf(parts[n++], sizeof(parts[0]), "%u child%s", r->children,
                 r->children == 1 ? "" : "ren");
    if (n == 0)
        snprintf(buf, size, "%s", "");
    else if (n == 1)
        snprintf(buf, size, " (%s again)", parts[0]);
    else if (n == 2)
        snprintf(buf, size, " (%s and %s again)", parts[0], parts[1]);
    else
        snprintf(buf, size, " (%s, %s and %s again)", parts[0], parts[1],
                 parts[2]);
    return buf;
}

/* One line for people: "ID: reset to event 4 of execution 1 (was failed);
 * execution 2 goes on from there (1 activity again)". */
static void print_done(const reset_verb *v, const char *id,
                       const duro_reset_result *r, int dry_run)
{
    char shown[TEXT_ESCAPE_SIZE], again[160];
    printf("%s: %s%s to event %" PRIu64 " of execution %" PRIu64
           " (was %s); execution %" PRIu64 " %s from there%s\n",
           text_escape(id, shown, sizeof(shown)), dry_run ? "would be " : "",
           v->done, r->to_event_id, r->from_execution, status_word(r->status),
           r->execution_id, dry_run ? "would go on" : "goes on",
           again_text(r, again, sizeof(again)));
}

static json_t *json_result(const char *id, const duro_reset_result *r, int rc,
                           const char *message)
{
    json_t *o = json_object();
    jset(o, "id", jstr(id));
    jset(o, "ok", json_boolean(rc == DURO_OK));
    if (rc != DURO_OK) {
        jset(o, "error", jstr(duro_errname(rc)));
        jset(o, "message", jstr(message));
        return o;
    }
    jset(o, "status", jstr(status_word(r->status)));
    jset(o, "from_execution", jint((int64_t)r->from_execution));
    jset(o, "execution", jint((int64_t)r->execution_id));
    jset(o, "to_event", jint((int64_t)r->to_event_id));
    jset(o, "activities", jint(r->activities));
    jset(o, "timers", jint(r->timers));
    jset(o, "children", jint(r->children));
    return o;
}

static int reset_id(cli *c, const reset_verb *v, duro_client *client,
                    const char *id, const duro_reset_options *o)
{
    duro_reset_result r;
    int rc = v->rewind ? duro_client_rewind(client, id, o, &r)
                       : duro_client_reset(client, id, o, &r);
    if (rc != DURO_OK) {
        char what[TEXT_QUOTE_SIZE + 32], shown[TEXT_QUOTE_SIZE];
        snprintf(what, sizeof(what), "%s %s", v->name,
                 text_quote(id, shown, sizeof(shown)));
        return cli_error_rc(c, rc, what);
    }
    if (c->json) {
        json_t *list = json_array();
        json_array_append_new(list, json_result(id, &r, DURO_OK, NULL));
        json_t *doc = json_object();
        jset(doc, "dry_run", json_boolean(o->dry_run));
        jset(doc, "results", list);
        json_print(doc);
    } else {
        print_done(v, id, &r, o->dry_run);
    }
    return EXIT_OK;
}

static int reset_query(cli *c, const reset_verb *v, duro_client *client,
                       const duro_bulk_filter *filter,
                       const duro_reset_options *o, size_t max, int yes)
{
    duro_reset_list *l = NULL;
    if (!o->dry_run && !yes && cli_interactive()) {
        duro_reset_options dry = *o;
        dry.dry_run = 1;
        int rc = duro_client_reset_matching(client, filter, v->rewind, &dry,
                                            max, &l);
        if (rc != DURO_OK)
            return cli_error_rc(c, rc, "counting");
        uint64_t count = l->reset;
        duro_reset_list_free(l);
        l = NULL;
        if (!cli_confirm(v->ask, count, filter->name))
            return cli_error(c, EXIT_FAILED, "not_confirmed",
                             "not confirmed; nothing was changed");
    }
    int rc = duro_client_reset_matching(client, filter, v->rewind, o, max, &l);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, v->name);
    size_t refused = l->count - l->reset;
    if (c->json) {
        json_t *list = json_array();
        for (size_t i = 0; i < l->count; i++)
            json_array_append_new(
                list, json_result(l->items[i].instance_id, &l->items[i].result,
                                  l->items[i].rc, l->items[i].message));
        json_t *doc = json_object();
        jset(doc, "dry_run", json_boolean(o->dry_run));
        jset(doc, "count", jint((int64_t)l->reset));
        jset(doc, "refused", jint((int64_t)refused));
        jset(doc, "results", list);
        json_print(doc);
    } else {
        char name[TEXT_ESCAPE_SIZE];
        printf("%s %zu instance%s of %s\n",
               o->dry_run ? (v->rewind ? "would rewind" : "would reset")
                          : v->done,
               l->reset, l->reset == 1 ? "" : "s",
               text_escape(filter->name, name, sizeof(name)));
        for (size_t i = 0; i < l->count; i++)
            if (l->items[i].rc == DURO_OK)
                print_done(v, l->items[i].instance_id, &l->items[i].result,
                           o->dry_run);
    }
    for (size_t i = 0; i < l->count; i++) {
        if (l->items[i].rc == DURO_OK)
            continue;
        char shown[TEXT_QUOTE_SIZE];
        fflush(stdout);
        fprintf(stderr, "duro %s: %s: %s\n", v->name,
                text_quote(l->items[i].instance_id, shown, sizeof(shown)),
                l->items[i].message ? l->items[i].message : "refused");
    }
    if (l->count == 0)
        cli_note_unknown_name(c, client, filter->name);
    duro_reset_list_free(l);
    return refused > 0 ? EXIT_FAILED : EXIT_OK;
}

static int reset_verb_run(cli *c, const reset_verb *v, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"to", required_argument, NULL, 't'},
        {"last-good", no_argument, NULL, 'g'},
        {"execution", required_argument, NULL, 'e'},
        {"reason", required_argument, NULL, 'r'},
        {"by", required_argument, NULL, 'b'},
        {"dry-run", no_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"status", required_argument, NULL, 's'},
        {"since", required_argument, NULL, 'S'},
        {"before", required_argument, NULL, 'B'},
        {"max", required_argument, NULL, 'm'},
        {"yes", no_argument, NULL, 'y'},
        {"deadline", required_argument, NULL, 'D'},
        {"no-deadline", no_argument, NULL, 'X'},
        {0}};
    duro_bulk_filter filter = {0};
    duro_reset_options o;
    duro_reset_options_init(&o);
    int last_good = 0, has_to = 0, query_options = 0, yes = 0;
    int has_deadline = 0; /* 1 --deadline, 2 --no-deadline */
    uint64_t max = 0;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, v->help, &status)) != -1) {
        int bad = 0;
        switch (ch) {
        case -2:
            return status;
        case 't':
        case 'e':
            if (v->rewind) {
                cli_usage(c, "%s: a rewind goes to the last good point",
                          ch == 't' ? "--to" : "--execution");
                return EXIT_USAGE;
            }
            if (ch == 't')
                has_to = 1;
            bad = args_uint_range(c, ch == 't' ? "--to" : "--execution", optarg,
                                  1, INT64_MAX,
                                  ch == 't' ? &o.to_event_id : &o.execution_id);
            break;
        case 'g':
            if (v->rewind) {
                cli_usage(c, "--last-good: a rewind always goes there");
                return EXIT_USAGE;
            }
            last_good = 1;
            break;
        case 'r':
            o.reason = optarg;
            break;
        case 'b':
            o.requested_by = optarg;
            break;
        case 'n':
            o.dry_run = 1;
            break;
        case 'N':
            filter.name = optarg;
            break;
        case 's':
            query_options = 1;
            if (v->rewind) {
                cli_usage(c, "--status: a rewind takes failed instances only");
                return EXIT_USAGE;
            }
            bad = args_status_mask(c, "--status", optarg, &filter.status_mask);
            if (!bad && (filter.status_mask & ~ENDED) != 0) {
                cli_usage(c, "--status: only completed, failed, cancelled and "
                             "terminated instances can be reset");
                bad = 1;
            }
            break;
        case 'S':
            query_options = 1;
            bad = args_time(c, "--since", optarg, &filter.created_after_ms);
            break;
        case 'B':
            query_options = 1;
            bad = args_time(c, "--before", optarg, &filter.created_before_ms);
            break;
        case 'm':
            query_options = 1;
            bad = args_uint_range(c, "--max", optarg, 1, DURO_BULK_BATCH_MAX,
                                  &max);
            break;
        case 'y':
            yes = 1;
            break;
        case 'D': {
            int64_t after = 0;
            bad =
                args_deadline(c, "--deadline", optarg, &o.deadline_ms, &after);
            if (!bad && after > 0)
                o.deadline_ms = c->now_ms + after;
            has_deadline |= 1;
            break;
        }
        case 'X':
            o.deadline_ms = DURO_DEADLINE_NONE;
            has_deadline |= 2;
            break;
        }
        if (bad)
            return EXIT_USAGE;
    }
    if (has_deadline == 3)
        return cli_usage(c, "--deadline or --no-deadline, not both");
    size_t count = (size_t)(argc - optind);
    if (filter.name != NULL && count > 0)
        return cli_usage(c, "give an instance id or --name, not both");
    if (filter.name == NULL && query_options)
        return cli_usage(c, "--status, --since, --before and --max select by "
                            "query; they need --name");
    if (filter.name == NULL && count == 0)
        return cli_usage(c, "expected an instance id or --name");
    if (count > 1)
        return cli_usage(c, "one instance id at a time (or --name)");
    if (filter.name != NULL && *filter.name == '\0')
        return cli_usage(c, "--name must not be empty");
    if (filter.name != NULL && (has_to || o.execution_id != 0))
        return cli_usage(c, "by --name each instance goes to its last good "
                            "point: no --to or --execution");
    if (filter.name == NULL && !v->rewind && has_to == last_good)
        return cli_usage(c, has_to ? "--to or --last-good, not both"
                                   : "say where: --to EVENT or --last-good");
    if (count == 1 && argv[optind][0] == '\0')
        return cli_usage(c, "an instance id must not be empty");
    char user[300];
    if (o.requested_by == NULL)
        o.requested_by = args_default_requester(user, sizeof(user));
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    if (filter.name != NULL)
        status = reset_query(c, v, client, &filter, &o, (size_t)max, yes);
    else
        status = reset_id(c, v, client, argv[optind], &o);
    duro_client_destroy(client);
    return status;
}

int cmd_reset(cli *c, int argc, char **argv)
{
    return reset_verb_run(c, &reset_v, argc, argv);
}

int cmd_rewind(cli *c, int argc, char **argv)
{
    return reset_verb_run(c, &rewind_v, argc, argv);
}
