/* cmd_write.c - the verbs that add work: start (which creates the database
 * file when it is missing) and raise (which never does). Single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char start_help[] =
    "usage: duro start NAME ID [--input TEXT|@FILE] [--version V]\n"
    "                  [--delay DURATION] [--deadline WHEN] [--json]\n"
    "\n"
    "Starts instance ID of orchestration NAME (pending until a runtime\n"
    "runs its first turn). Creates the database when it does not exist.\n"
    "  --input TEXT   the input; @FILE reads it from FILE (@- : stdin)\n"
    "  --version V    run version V (default: the highest registered)\n"
    "  --delay D      start after D (30s, 5m, 2h)\n"
    "  --deadline W   end the instance (failed, timeout) if it has not\n"
    "                 finished by W: an RFC 3339 time (2026-05-01T12:00:00Z)\n"
    "                 or a duration after its start (30m, 2h, 7d; after\n"
    "                 the --delay); its activities and children are\n"
    "                 cancelled with reason 'deadline'\n";

int cmd_start(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"input", required_argument, NULL, 'i'},
        {"version", required_argument, NULL, 'v'},
        {"delay", required_argument, NULL, 'd'},
        {"deadline", required_argument, NULL, 'D'},
        {0}};
    duro_start_options so;
    duro_start_options_init(&so);
    const char *input_arg = NULL;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, start_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'i')
            input_arg = optarg;
        else if (ch == 'v')
            so.orchestration_version = optarg;
        else if (ch == 'd' &&
                 args_duration(c, "--delay", optarg, &so.delay_ms) != 0)
            return EXIT_USAGE;
        else if (ch == 'D' &&
                 args_deadline(c, "--deadline", optarg, &so.deadline_ms,
                               &so.timeout_ms) != 0)
            return EXIT_USAGE;
    }
    if (argc - optind != 2)
        return cli_usage(c, "expected an orchestration name and an id");
    const char *name = argv[optind], *id = argv[optind + 1];
    if (*name == '\0' || *id == '\0')
        return cli_usage(c, "the name and the id must not be empty");
    char *input = NULL;
    if (input_arg != NULL && args_payload(c, "--input", input_arg, &input))
        return EXIT_USAGE;
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_CREATE, &client)) != EXIT_OK) {
        free(input);
        return status;
    }
    int rc = duro_client_start(client, id, name, input, &so);
    free(input);
    int64_t deadline = so.deadline_ms;
    if (rc == DURO_OK && so.timeout_ms > 0) {
        duro_instance_info *info = NULL;
        if (duro_client_get_status(client, id, &info) == DURO_OK)
            deadline = info->deadline_ms;
        duro_free(info);
    }
    duro_client_destroy(client);
    char shown[TEXT_ESCAPE_SIZE], name_shown[TEXT_ESCAPE_SIZE];
    if (rc == DURO_ALREADY_EXISTS)
        /* the library's message names its own call */
        return cli_error(c, EXIT_FAILED, "already_exists",
                         "%s: an instance with this id already exists (duro "
                         "status %s shows it; an id is used once until the "
                         "instance is deleted)",
                         text_quote(id, shown, sizeof(shown)), shown);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        jset(doc, "name", jstr(name));
        /* "" for the default, as status, list, wait and history say */
        jset(doc, "version",
             jstr(so.orchestration_version ? so.orchestration_version : ""));
        jset(doc, "delay_ms", jint(so.delay_ms));
        /* what the store keeps: a duration's deadline as the library
         * reckoned it, read back */
        jset_time(doc, "deadline", deadline);
        jset(doc, "status", jstr("pending"));
        json_print(doc);
    } else {
        printf("started %s (%s)", text_escape(id, shown, sizeof(shown)),
               text_escape(name, name_shown, sizeof(name_shown)));
        if (so.delay_ms > 0) {
            char d[32];
            printf(", first turn in %s", text_duration(so.delay_ms, d, 32));
        }
        if (deadline != 0) {
            char t[64], age[32];
            printf(", deadline %s (%s)", text_local_time(deadline, t, 64),
                   text_age(c->now_ms, deadline, age, 32));
        }
        fputc('\n', stdout);
    }
    return EXIT_OK;
}

static const char raise_help[] =
    "usage: duro raise ID EVENT [PAYLOAD|@FILE] [--event-id K] [--json]\n"
    "\n"
    "Raises external event EVENT on a live instance (pending, running or\n"
    "suspended: a suspended one records it and gets it when resumed), with\n"
    "an optional payload (@FILE reads it from FILE, @- from stdin).\n"
    "  --event-id K  deliver it once per K on the instance: a repeat with\n"
    "                the same K (a retry after a failure) changes nothing\n";

int cmd_raise(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"event-id", required_argument, NULL, 'k'}, {0}};
    const char *event_id = NULL;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, raise_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'k') {
            if (*optarg == '\0')
                return cli_usage(c, "--event-id must not be empty");
            event_id = optarg;
        }
    }
    int n = argc - optind;
    if (n < 2 || n > 3)
        return cli_usage(c, "expected an instance id, an event name and "
                            "optionally a payload");
    const char *id = argv[optind], *event = argv[optind + 1];
    if (*id == '\0' || *event == '\0')
        return cli_usage(c, "the id and the event name must not be empty");
    char *payload = NULL;
    if (n == 3 && args_payload(c, "PAYLOAD", argv[optind + 2], &payload))
        return EXIT_USAGE;
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK) {
        free(payload);
        return status;
    }
    int rc = duro_client_raise_event_once(client, id, event, payload, event_id);
    free(payload);
    char shown[TEXT_ESCAPE_SIZE], event_shown[TEXT_ESCAPE_SIZE];
    duro_instance_info *info = NULL;
    if (rc == DURO_INVALID_STATE &&
        duro_client_get_status(client, id, &info) == DURO_OK &&
        duro_status_is_terminal(info->status)) {
        /* the library's message says "is Completed" */
        status = cli_error(c, EXIT_INVALID_STATE, "invalid_state",
                           "%s: it has finished (%s); it takes no more "
                           "events",
                           text_quote(id, shown, sizeof(shown)),
                           status_word(info->status));
        duro_free(info);
        duro_client_destroy(client);
        return status;
    }
    duro_free(info);
    duro_client_destroy(client);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        jset(doc, "event", jstr(event));
        jset(doc, "raised", jstr(event)); /* as duro ui's raise-event */
        if (event_id != NULL)
            jset(doc, "event_id", jstr(event_id));
        json_print(doc);
    } else if (event_id != NULL) {
        /* the store does not say whether this id was new */
        char id_shown[TEXT_ESCAPE_SIZE];
        printf("raised %s on %s with event id %s (delivered once, however "
               "often it is raised with that id)\n",
               text_escape(event, event_shown, sizeof(event_shown)),
               text_escape(id, shown, sizeof(shown)),
               text_escape(event_id, id_shown, sizeof(id_shown)));
    } else {
        printf("raised %s on %s\n",
               text_escape(event, event_shown, sizeof(event_shown)),
               text_escape(id, shown, sizeof(shown)));
    }
    return EXIT_OK;
}
