/* cmd_schedule.c - duro schedule: create, update, pause, resume, trigger,
 * delete, list and describe the store's schedules (duro_client_schedule_*),
 * with --json, and --dry-run on the verbs that change something.
 * Single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define FIRE_ID_SIZE (DURO_SCHEDULE_ID_MAX + 64)
#define NEXT_SHOWN 5

static const char schedule_help[] =
    "usage: duro schedule VERB ...\n"
    "  create ID --orchestration NAME (--cron EXPR | --every DURATION)\n"
    "         [--offset DURATION] [--zone TZ] [--input TEXT|@FILE]\n"
    "         [--version V] [--overlap POLICY] [--catchup DURATION]\n"
    "         [--jitter DURATION] [--timeout DURATION] [--paused [--note "
    "TEXT]]\n"
    "         [--start TIME] [--end TIME] [--dry-run]\n"
    "  update ID (the options of create: the spec is replaced) [--dry-run]\n"
    "  pause ID [--note TEXT] [--dry-run]\n"
    "  resume ID [--dry-run]\n"
    "  trigger ID [--dry-run]     start one instance now (overlap applies)\n"
    "  delete ID [--dry-run]\n"
    "  list\n"
    "  describe ID [--next N] [--fires N]\n"
    "\n"
    "Every fire starts one instance, ID@<fire time in UTC>, whatever the\n"
    "number of runtimes on the store. POLICY: skip (default), buffer-one,\n"
    "allow-all, cancel-other, terminate-other. --catchup: fires due longer\n"
    "ago than this after a downtime are skipped (default 365d). --timeout:\n"
    "each instance it starts has a deadline this long after its start\n"
    "(failed, timeout, when it passes; duro start --deadline). Deleting or\n"
    "pausing a schedule never touches the instances it started.\n"
    "All verbs take --json and --db URL.\n";

/* RFC 3339 UTC with ms of ms, into buf. */
static const char *utc(int64_t ms, char *buf, size_t size)
{
    json_t *o = json_object();
    jset_time(o, "t", ms);
    const char *s = json_string_value(json_object_get(o, "t"));
    snprintf(buf, size, "%s", s != NULL ? s : "-");
    json_decref(o);
    return buf;
}

/* ---- the spec from the options ------------------------------------------ */

typedef struct spec_args {
    duro_schedule_spec spec;
    char *input;
    int dry_run;
    int next, fires; /* describe */
    const char *note;
    int note_set;
} spec_args;

enum {
    OPT_CRON = 0x200,
    OPT_EVERY,
    OPT_OFFSET,
    OPT_ZONE,
    OPT_INPUT,
    OPT_VERSION,
    OPT_OVERLAP,
    OPT_CATCHUP,
    OPT_JITTER,
    OPT_TIMEOUT,
    OPT_PAUSED,
    OPT_NOTE,
    OPT_START,
    OPT_END,
    OPT_DRY_RUN,
    OPT_NEXT,
    OPT_FIRES,
    OPT_ORCH
};

static const struct option all_opts[] = {
    CLI_COMMON_OPTIONS,
    {"orchestration", required_argument, NULL, OPT_ORCH},
    {"cron", required_argument, NULL, OPT_CRON},
    {"every", required_argument, NULL, OPT_EVERY},
    {"offset", required_argument, NULL, OPT_OFFSET},
    {"zone", required_argument, NULL, OPT_ZONE},
    {"input", required_argument, NULL, OPT_INPUT},
    {"version", required_argument, NULL, OPT_VERSION},
    {"overlap", required_argument, NULL, OPT_OVERLAP},
    {"catchup", required_argument, NULL, OPT_CATCHUP},
    {"jitter", required_argument, NULL, OPT_JITTER},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"paused", no_argument, NULL, OPT_PAUSED},
    {"note", required_argument, NULL, OPT_NOTE},
    {"start", required_argument, NULL, OPT_START},
    {"end", required_argument, NULL, OPT_END},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"next", required_argument, NULL, OPT_NEXT},
    {"fires", required_argument, NULL, OPT_FIRES},
    {0}};

/* Which options a sub-verb takes. */
#define SPEC_OPTS (1u << 0)
#define NOTE_OPT (1u << 1)
#define DRY_OPT (1u << 2)
#define DESCRIBE_OPTS (1u << 3)

static int is_spec_opt(int ch)
{
    return ch >= OPT_CRON && ch <= OPT_END && ch != OPT_NOTE;
}

/* Parses the sub-verb's options into *a; EXIT_OK or the exit status. */
static int parse(cli *c, int argc, char **argv, unsigned takes, spec_args *a)
{
    memset(a, 0, sizeof(*a));
    duro_schedule_spec_init(&a->spec);
    a->next = NEXT_SHOWN;
    a->fires = 10;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, all_opts, schedule_help, &status)) !=
           -1) {
        if (ch == -2)
            return status;
        if ((is_spec_opt(ch) || ch == OPT_ORCH) && !(takes & SPEC_OPTS))
            return cli_usage(c, "%s takes no spec options", argv[0]);
        if (ch == OPT_NOTE && !(takes & NOTE_OPT))
            return cli_usage(c, "%s takes no --note", argv[0]);
        if (ch == OPT_DRY_RUN && !(takes & DRY_OPT))
            return cli_usage(c, "%s takes no --dry-run", argv[0]);
        if ((ch == OPT_NEXT || ch == OPT_FIRES) && !(takes & DESCRIBE_OPTS))
            return cli_usage(c, "only describe takes --next and --fires");
        duro_schedule_spec *s = &a->spec;
        uint64_t n;
        switch (ch) {
        case OPT_ORCH:
            s->orchestration = optarg;
            break;
        case OPT_CRON:
            s->cron = optarg;
            break;
        case OPT_EVERY:
            if (args_duration(c, "--every", optarg, &s->interval_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_OFFSET:
            if (args_duration(c, "--offset", optarg, &s->offset_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_ZONE:
            s->time_zone = optarg;
            break;
        case OPT_INPUT:
            free(a->input);
            a->input = NULL;
            if (args_payload(c, "--input", optarg, &a->input) != 0)
                return EXIT_USAGE;
            s->input = a->input;
            break;
        case OPT_VERSION:
            s->orchestration_version = optarg;
            break;
        case OPT_OVERLAP: {
            int found = schedule_overlap_parse(optarg);
            if (found < 0)
                return cli_usage(c,
                                 "--overlap: '%s' is none of skip, "
                                 "buffer-one, allow-all, cancel-other, "
                                 "terminate-other",
                                 optarg);
            s->overlap = found;
            break;
        }
        case OPT_CATCHUP:
            if (args_duration(c, "--catchup", optarg, &s->catchup_window_ms))
                return EXIT_USAGE;
            break;
        case OPT_JITTER:
            if (args_duration(c, "--jitter", optarg, &s->jitter_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_TIMEOUT:
            if (args_duration(c, "--timeout", optarg, &s->timeout_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_PAUSED:
            s->paused = 1;
            break;
        case OPT_NOTE:
            a->note = optarg;
            a->note_set = 1;
            s->note = optarg;
            break;
        case OPT_START:
            if (args_time(c, "--start", optarg, &s->start_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_END:
            if (args_time(c, "--end", optarg, &s->end_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_DRY_RUN:
            a->dry_run = 1;
            break;
        case OPT_NEXT:
            if (args_uint(c, "--next", optarg, 100, &n) != 0)
                return EXIT_USAGE;
            a->next = (int)n;
            break;
        case OPT_FIRES:
            if (args_uint(c, "--fires", optarg, DURO_SCHEDULE_FIRES_KEPT, &n) !=
                0)
                return EXIT_USAGE;
            a->fires = (int)n;
            break;
        default:
            break;
        }
    }
    return EXIT_OK;
}

/* The one ID operand of a sub-verb. */
static int one_id(cli *c, int argc, char **argv, const char **id)
{
    if (argc - optind != 1)
        return cli_usage(c, "%s expects one schedule id", argv[0]);
    *id = argv[optind];
    return EXIT_OK;
}

static json_t *json_times(const int64_t *t, size_t n)
{
    json_t *arr = json_array();
    char buf[64];
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, jstr(utc(t[i], buf, sizeof(buf))));
    return arr;
}

/* Fire times as the schedule's zone reads them (a Berlin 02:00 cron
 * fires at "02:00 +01:00"), and in UTC. */
static void print_times(const int64_t *t, size_t n,
                        const duro_schedule_spec *spec)
{
    const char *zone = spec->time_zone != NULL && *spec->time_zone != '\0'
                           ? spec->time_zone
                           : "UTC";
    char buf[64], local[96];
    for (size_t i = 0; i < n; i++)
        printf("  %s %s  (%s)\n",
               text_zone_time(zone, t[i], local, sizeof(local)), zone,
               utc(t[i], buf, sizeof(buf)));
    if (n == 0)
        printf("  none\n");
}

/* ---- create and update -------------------------------------------------- */

static int create_or_update(cli *c, int argc, char **argv, int update)
{
    spec_args a;
    int status = parse(c, argc, argv, SPEC_OPTS | NOTE_OPT | DRY_OPT, &a);
    const char *id = NULL;
    if (status == EXIT_OK)
        status = one_id(c, argc, argv, &id);
    if (status == EXIT_OK && a.note_set && !a.spec.paused)
        status = cli_usage(c, "--note goes with --paused");
    if (status != EXIT_OK) {
        free(a.input);
        return status;
    }
    int64_t next[NEXT_SHOWN];
    size_t n = 0;
    int rc =
        duro_schedule_spec_next_times(&a.spec, c->now_ms, next, NEXT_SHOWN, &n);
    char shown[TEXT_ESCAPE_SIZE];
    if (rc != DURO_OK) {
        free(a.input);
        return cli_error(c, rc == DURO_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_USAGE,
                         rc == DURO_NOT_FOUND ? "not_found" : "usage", "%s",
                         duro_errmsg());
    }
    if (!a.dry_run) {
        duro_client *client;
        if ((status = cli_open(c, update ? CLI_OPEN_EXISTING : CLI_OPEN_CREATE,
                               &client)) != EXIT_OK) {
            free(a.input);
            return status;
        }
        rc = update ? duro_client_schedule_update(client, id, &a.spec)
                    : duro_client_schedule_create(client, id, &a.spec);
        duro_client_destroy(client);
        if (rc == DURO_ALREADY_EXISTS) {
            free(a.input);
            return cli_error(c, EXIT_FAILED, "already_exists",
                             "schedule %s already exists (duro schedule "
                             "update changes it)",
                             text_quote(id, shown, sizeof(shown)));
        }
        if (rc != DURO_OK) {
            free(a.input);
            return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
        }
    }
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        jset(doc, "dry_run", json_boolean(a.dry_run));
        jset(doc, update ? "updated" : "created", json_boolean(!a.dry_run));
        jset(doc, "spec", json_schedule_spec(&a.spec));
        jset(doc, "next_fires", json_times(next, a.spec.paused ? 0 : n));
        json_print(doc);
    } else {
        printf("%s schedule %s (%s)\n",
               a.dry_run ? (update ? "would update" : "would create")
                         : (update ? "updated" : "created"),
               text_escape(id, shown, sizeof(shown)),
               a.spec.cron != NULL ? a.spec.cron : "interval");
        if (a.spec.paused)
            printf("paused: it fires once resumed\n");
        else {
            printf("next fires:\n");
            print_times(next, n, &a.spec);
        }
    }
    free(a.input);
    return EXIT_OK;
}

/* ---- pause, resume, trigger, delete -------------------------------------
 * With --dry-run they read the schedule and say what would change. */

typedef enum { PAUSE, RESUME, TRIGGER, DELETE } change_kind;

static const char *const change_words[][2] = {{"paused", "would pause"},
                                              {"resumed", "would resume"},
                                              {"triggered", "would trigger"},
                                              {"deleted", "would delete"}};

static int change(cli *c, int argc, char **argv, change_kind kind)
{
    spec_args a;
    int status =
        parse(c, argc, argv, DRY_OPT | (kind == PAUSE ? NOTE_OPT : 0), &a);
    const char *id = NULL;
    if (status == EXIT_OK)
        status = one_id(c, argc, argv, &id);
    if (status != EXIT_OK)
        return status;
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    char shown[TEXT_ESCAPE_SIZE];
    char fire[FIRE_ID_SIZE] = "";
    duro_schedule_description *d = NULL;
    /* A dry run reads it: an unknown id fails as the real run would. */
    int rc = duro_client_schedule_describe(client, id, 0, 0, &d);
    if (rc == DURO_OK && !a.dry_run) {
        switch (kind) {
        case PAUSE:
            rc = duro_client_schedule_pause(client, id, a.note);
            break;
        case RESUME:
            rc = duro_client_schedule_resume(client, id);
            break;
        case TRIGGER:
            rc = duro_client_schedule_trigger(client, id, fire, sizeof(fire));
            break;
        case DELETE:
            rc = duro_client_schedule_delete(client, id);
            break;
        }
    }
    duro_client_destroy(client);
    if (rc != DURO_OK) {
        duro_schedule_description_free(d);
        return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
    }
    const char *untouched = kind == PAUSE || kind == DELETE
                                ? "instances it already started are not touched"
                                : NULL;
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        jset(doc, "dry_run", json_boolean(a.dry_run));
        jset(doc, "action", jstr(change_words[kind][0]));
        jset(doc, "was_paused", json_boolean(d->schedules[0].spec.paused));
        if (kind == TRIGGER)
            jset(doc, "instance",
                 a.dry_run ? json_null()
                           : (fire[0] != '\0' ? jstr(fire) : json_null()));
        if (untouched != NULL)
            jset(doc, "note", jstr(untouched));
        json_print(doc);
    } else {
        printf("%s schedule %s", change_words[kind][a.dry_run],
               text_escape(id, shown, sizeof(shown)));
        if (kind == TRIGGER && !a.dry_run)
            printf(fire[0] != '\0' ? ": started %s"
                                   : ": its overlap policy started none%s",
                   fire);
        printf("\n");
        if (untouched != NULL)
            printf("%s\n", untouched);
    }
    duro_schedule_description_free(d);
    return EXIT_OK;
}

/* ---- list and describe -------------------------------------------------- */

static int list(cli *c, int argc, char **argv)
{
    spec_args a;
    int status = parse(c, argc, argv, 0, &a);
    if (status != EXIT_OK)
        return status;
    if (argc - optind != 0)
        return cli_usage(c, "list takes no operands");
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    duro_schedule_description *d = NULL;
    int rc = duro_client_schedule_list(client, &d);
    duro_client_destroy(client);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, "list");
    if (c->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < d->count; i++)
            json_array_append_new(arr, json_schedule_info(&d->schedules[i]));
        json_t *doc = json_object();
        jset(doc, "schedules", arr);
        json_print(doc);
    } else {
        char shown[TEXT_ESCAPE_SIZE], t[64];
        if (d->count == 0)
            printf("no schedules\n");
        for (size_t i = 0; i < d->count; i++) {
            const duro_schedule_info *s = &d->schedules[i];
            printf("%-24s %-16s %-12s next %s  fires %lld skips %lld\n",
                   text_escape(s->id, shown, sizeof(shown)),
                   s->spec.cron != NULL ? s->spec.cron : "interval",
                   s->spec.paused ? "paused" : "active",
                   s->spec.paused || s->next_ms == 0
                       ? "-"
                       : utc(s->next_ms, t, sizeof(t)),
                   (long long)s->fires, (long long)s->skips);
        }
    }
    duro_schedule_description_free(d);
    return EXIT_OK;
}

static int describe(cli *c, int argc, char **argv)
{
    spec_args a;
    int status = parse(c, argc, argv, DESCRIBE_OPTS, &a);
    const char *id = NULL;
    if (status == EXIT_OK)
        status = one_id(c, argc, argv, &id);
    if (status != EXIT_OK)
        return status;
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_READ, &client)) != EXIT_OK)
        return status;
    duro_schedule_description *d = NULL;
    int rc = duro_client_schedule_describe(client, id, (size_t)a.next,
                                           (size_t)a.fires, &d);
    duro_client_destroy(client);
    char shown[TEXT_ESCAPE_SIZE];
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
    const duro_schedule_info *s = &d->schedules[0];
    if (c->json) {
        json_t *doc = json_schedule_info(s);
        jset(doc, "next_fires", json_times(d->next_times, d->next_count));
        json_t *fires = json_array();
        for (size_t i = 0; i < d->fire_count; i++)
            json_array_append_new(fires, json_schedule_fire(&d->fires[i]));
        jset(doc, "recent_fires", fires);
        json_print(doc);
    } else {
        char t[64];
        const duro_schedule_spec *p = &s->spec;
        printf("schedule      %s\n", text_escape(s->id, shown, sizeof(shown)));
        if (p->cron != NULL)
            printf("cron          %s in %s\n", p->cron,
                   p->time_zone != NULL ? p->time_zone : "UTC");
        else
            printf("every         %s\n",
                   text_duration(p->interval_ms, t, sizeof(t)));
        printf("orchestration %s\n",
               text_escape(p->orchestration, shown, sizeof(shown)));
        printf("overlap       %s\n", schedule_overlap_word(p->overlap));
        if (p->timeout_ms > 0)
            printf("timeout       %s (each instance's deadline after its "
                   "start)\n",
                   text_duration(p->timeout_ms, t, sizeof(t)));
        printf("state         %s%s%s\n", p->paused ? "paused" : "active",
               p->paused && p->note != NULL ? ": " : "",
               p->paused && p->note != NULL ? p->note : "");
        printf("fires         %lld started, %lld skipped\n",
               (long long)s->fires, (long long)s->skips);
        if (s->last_instance_id != NULL)
            printf("last          %s (%s)\n",
                   text_escape(s->last_instance_id, shown, sizeof(shown)),
                   status_word(s->last_status));
        printf("next fires:\n");
        print_times(d->next_times, d->next_count, p);
        printf("recent fires:\n");
        for (size_t i = 0; i < d->fire_count; i++) {
            const duro_schedule_fire *f = &d->fires[i];
            printf("  %s  %-8s %s%s%s\n", utc(f->time_ms, t, sizeof(t)),
                   schedule_action_word(f->action),
                   f->instance_id != NULL
                       ? text_escape(f->instance_id, shown, sizeof(shown))
                       : "",
                   f->instance_id != NULL
                       ? (f->instance_status == 0 ? " (gone)" : " ")
                       : "",
                   f->why != NULL ? f->why
                   : f->instance_id != NULL && f->instance_status != 0
                       ? status_word(f->instance_status)
                       : "");
        }
        if (d->fire_count == 0)
            printf("  none\n");
    }
    duro_schedule_description_free(d);
    return EXIT_OK;
}

int cmd_schedule(cli *c, int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
            cli_print_help(schedule_help);
            return EXIT_OK;
        }
        return cli_usage(c, "expected a verb: create, update, pause, resume, "
                            "trigger, delete, list or describe");
    }
    const char *sub = argv[1];
    argc--;
    argv++;
    if (strcmp(sub, "create") == 0)
        return create_or_update(c, argc, argv, 0);
    if (strcmp(sub, "update") == 0)
        return create_or_update(c, argc, argv, 1);
    if (strcmp(sub, "pause") == 0)
        return change(c, argc, argv, PAUSE);
    if (strcmp(sub, "resume") == 0)
        return change(c, argc, argv, RESUME);
    if (strcmp(sub, "trigger") == 0)
        return change(c, argc, argv, TRIGGER);
    if (strcmp(sub, "delete") == 0)
        return change(c, argc, argv, DELETE);
    if (strcmp(sub, "list") == 0)
        return list(c, argc, argv);
    if (strcmp(sub, "describe") == 0)
        return describe(c, argc, argv);
    return cli_usage(c,
                     "unknown verb '%s': create, update, pause, resume, "
                     "trigger, delete, list or describe",
                     sub);
}
