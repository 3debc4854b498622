/* main.c - the duro command: global options and the verb dispatch table.
 * Above every cmd_*.c (nothing calls back into it). Single-threaded. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

typedef struct verb {
    const char *name;
    int (*run)(cli *c, int argc, char **argv);
    const char *summary;
} verb;

static const verb verbs[] = {
    {"list", cmd_list, "list instances (filter by status, name, time)"},
    {"status", cmd_status, "one instance: status, result, why it is stuck"},
    {"history", cmd_history, "one execution's events as a timeline"},
    {"start", cmd_start, "start an instance of an orchestration"},
    {"raise", cmd_raise, "raise an external event on an instance"},
    {"wait", cmd_wait, "wait until an instance ends"},
    {"cancel", cmd_cancel, "cancel instances by id or by name"},
    {"terminate", cmd_terminate, "end instances at once, running no code"},
    {"suspend", cmd_suspend, "pause instances until they are resumed"},
    {"resume", cmd_resume, "continue suspended instances"},
    {"reset", cmd_reset, "continue an ended instance from an earlier event"},
    {"rewind", cmd_rewind, "retry a failed instance from its last good point"},
    {"delete", cmd_delete, "delete instances and their children"},
    {"purge", cmd_purge, "delete finished instances older than a time"},
    {"prune", cmd_prune, "delete all but the last N executions"},
    {"schedule", cmd_schedule, "create, change and inspect schedules"},
    {"metrics", cmd_metrics, "the store's gauges in Prometheus text"},
    {"runtimes", cmd_runtimes, "the live runtimes and the versions they run"},
    {"version", cmd_version, "print the versions of duro and libduro"},
#ifdef DURO_HAVE_UI
    {"ui", cmd_ui, "serve the web console on 127.0.0.1"},
#else
    {"ui", cmd_ui, "the web console (not built: no libmicrohttpd)"},
#endif
};

static const char main_help[] =
    "usage: duro [--db URL] [--json] VERB [ARGS...]\n"
    "\n"
    "Inspects and operates a duro store.\n"
    "\n"
    "Options (before or after the verb):\n"
    "  --db URL   the store (default: $DURO_DB, else sqlite:duro.db)\n"
    "  --json     print one JSON document on stdout (see duro(1))\n"
    "  -h, --help this text; duro VERB --help: the verb's\n"
    "\n"
    "Verbs:\n";

static void print_main_help(FILE *out)
{
    fputs(main_help, out);
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(out, "  %-9s %s\n", verbs[i].name, verbs[i].summary);
    fputs("\nExit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 invalid "
          "state,\n7 timed out (wait, cancel and terminate --wait);\nwait: 8 "
          "ended failed, 9 cancelled, 10 terminated.\n",
          out);
}

int main(int argc, char **argv)
{
    cli c = {0};
    const char *env = getenv("DURO_DB");
    c.db = env != NULL && *env != '\0' ? env : "sqlite:duro.db";
    c.now_ms = duro_now_ms();

    static const struct option global[] = {
        CLI_COMMON_OPTIONS, {"version", no_argument, NULL, 'V'}, {0}};
    opterr = 0;
    cli_scan_json(&c, argc, argv, "+:h", global);
    int status = EXIT_OK;
    /* "+": stop at the verb; the verb parses the rest. */
    for (;;) {
        int index = -1;
        int ch = getopt_long(argc, argv, "+:h", global, &index);
        if (ch == -1)
            break;
        if (ch == OPT_DB) {
            c.db = optarg;
        } else if (ch == OPT_JSON) {
            c.json = 1;
        } else if (ch == OPT_HELP || ch == 'h') {
            print_main_help(stdout);
            return EXIT_OK;
        } else if (ch == 'V') {
            char *args[] = {(char *)"version", NULL};
            c.verb = "version";
            optind = 0;
            return cmd_version(&c, 1, args);
        } else if (ch == ':') {
            return cli_usage(&c, "option '%s' needs a value", argv[optind - 1]);
        } else {
            if (optopt != 0)
                return cli_usage(&c, "unknown option '-%c'", optopt);
            return cli_usage(&c, "unknown option '%s'", argv[optind - 1]);
        }
        if (index >= 0) {
            const char *given = optarg != NULL && optarg == argv[optind - 1]
                                    ? argv[optind - 2]
                                    : argv[optind - 1];
            size_t len = strlen(global[index].name);
            if (strncmp(given + 2, global[index].name, len) != 0 ||
                (given[2 + len] != '\0' && given[2 + len] != '='))
                return cli_usage(&c, "option '%.*s' is abbreviated; write --%s",
                                 (int)strcspn(given, "="), given,
                                 global[index].name);
        }
    }
    if (optind >= argc) {
        if (c.json)
            return cli_usage(&c, "expected a verb");
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[optind];
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        if (strcmp(verbs[i].name, name) == 0) {
            c.verb = verbs[i].name;
            c.color = !c.json && text_use_color();
            int verb_argc = argc - optind;
            char **verb_argv = argv + optind;
            optind = 0; /* glibc: rescan from verb_argv[1], fully reset */
            status = verbs[i].run(&c, verb_argc, verb_argv);
            return status;
        }
    }
    /* An unknown verb has no options to take a value: --json among its
     * arguments (before "--") asks for a JSON error. */
    for (int i = optind + 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            c.json = 1;
    char quoted[TEXT_QUOTE_SIZE];
    return cli_usage(&c, "unknown verb '%s'",
                     text_quote(name, quoted, sizeof(quoted)));
}
