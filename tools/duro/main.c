/* main.c - the duro command: global options, the verb dispatch table, the
 * shared option parsing (getopt_long, reset per verb), error reporting and
 * opening the store. Single-threaded. */
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
    {"delete", cmd_delete, "delete instances and their children"},
    {"purge", cmd_purge, "delete finished instances older than a time"},
    {"prune", cmd_prune, "delete all but the last N executions"},
    {"metrics", cmd_metrics, "the store's gauges in Prometheus text"},
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

void cli_print_help(const char *help)
{
    fputs(help, stdout);
}

static int report(cli *c, int status, const char *code, const char *text)
{
    /* One line, whatever the library (libpq) put in its message: line
     * breaks and tabs become one space; then escaped as every text output
     * is (text_escape): the callers escape what they quote, this catches
     * what a library message quotes raw. */
    char flat[2048], message[2048];
    size_t n = 0;
    for (const char *t = text; *t != '\0' && n + 1 < sizeof(flat); t++) {
        char ch = *t == '\n' || *t == '\t' || *t == '\r' ? ' ' : *t;
        if (ch == ' ' && (n == 0 || flat[n - 1] == ' '))
            continue;
        flat[n++] = ch;
    }
    while (n > 0 && flat[n - 1] == ' ')
        n--;
    flat[n] = '\0';
    text_escape(flat, message, sizeof(message));
    fprintf(stderr, "duro%s%s: %s\n", c->verb ? " " : "",
            c->verb ? c->verb : "", message);
    if (c->json) {
        json_t *err = json_object();
        jset(err, "code", jstr(code));
        jset(err, "message", jstr(message));
        json_t *doc = json_object();
        jset(doc, "error", err);
        json_print(doc);
    }
    return status;
}

int cli_interactive(void)
{
    return isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
}

int cli_confirm(const char *action, uint64_t count, const char *name)
{
    if (count == 0 || !cli_interactive())
        return 1;
    char n[32], shown[TEXT_QUOTE_SIZE];
    fflush(stdout);
    fprintf(stderr, "%s %s instance%s%s%s? [y/N] ", action,
            text_count(count, n, sizeof(n)), count == 1 ? "" : "s",
            name != NULL ? " of " : "",
            name != NULL ? text_quote(name, shown, sizeof(shown)) : "");
    fflush(stderr);
    char answer[64];
    if (fgets(answer, sizeof(answer), stdin) == NULL) {
        fputc('\n', stderr); /* end of input (Ctrl-D): no */
        return 0;
    }
    answer[strcspn(answer, "\r\n")] = '\0';
    return strcasecmp(answer, "y") == 0 || strcasecmp(answer, "yes") == 0;
}

int cli_error(cli *c, int status, const char *code, const char *fmt, ...)
{
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    return report(c, status, code, message);
}

int cli_usage(cli *c, const char *fmt, ...)
{
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(message))
        snprintf(message + n, sizeof(message) - (size_t)n,
                 " (see duro %s%s--help)", c->verb ? c->verb : "",
                 c->verb ? " " : "");
    return report(c, EXIT_USAGE, "usage", message);
}

/* "not_found" for DURO_NOT_FOUND, ... */
static const char *code_name(int rc, char *buf, size_t size)
{
    const char *name = duro_errname(rc);
    if (strncmp(name, "DURO_", 5) == 0)
        name += 5;
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++)
        buf[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a'
                                                         : name[i]);
    buf[i] = '\0';
    return buf;
}

/* cli_error_rc with the library's message `detail` given. */
static int error_rc_detail(cli *c, int rc, const char *what, const char *detail)
{
    if (detail == NULL || *detail == '\0')
        detail = duro_strerror(rc);
    int status = rc == DURO_NOT_FOUND       ? EXIT_NOT_FOUND
                 : rc == DURO_INVALID_STATE ? EXIT_INVALID_STATE
                                            : EXIT_FAILED;
    char code[64];
    if (what != NULL)
        return cli_error(c, status, code_name(rc, code, sizeof(code)), "%s: %s",
                         what, detail);
    return cli_error(c, status, code_name(rc, code, sizeof(code)), "%s",
                     detail);
}

int cli_error_rc(cli *c, int rc, const char *what)
{
    return error_rc_detail(c, rc, what, duro_errmsg());
}

/* msg in out[size] with every copy of what cli_open added to the URL
 * (`added`: "?create=0", "&mode=ro", "&pool=1", ...) taken out: the
 * library's messages quote the URL they were given, and the user typed it
 * without. */
static const char *without_added(const char *msg, const char *added, char *out,
                                 size_t size)
{
    size_t n = 0, len = strlen(added);
    while (*msg != '\0' && n + 1 < size) {
        if (strncmp(msg, added, len) == 0)
            msg += len;
        else
            out[n++] = *msg++;
    }
    out[n] = '\0';
    return out;
}

/* The value of parameter `name` (with its '=') in the query part of url,
 * or NULL; its length in *len. */
static const char *url_param(const char *url, const char *name, size_t *len)
{
    size_t n = strlen(name);
    const char *q = strchr(url, '?');
    for (const char *p = q; p != NULL; p = strchr(p + 1, '&'))
        if (strncmp(p + 1, name, n) == 0) {
            *len = strcspn(p + 1 + n, "&");
            return p + 1 + n;
        }
    return NULL;
}

static int is_postgres(const char *url)
{
    return strncmp(url, "postgres://", 11) == 0 ||
           strncmp(url, "postgresql://", 13) == 0;
}

int cli_open(cli *c, int how, duro_client **out)
{
    *out = NULL;
    char *url = NULL;
    const char *use = c->db;
    char added[32] = "";
    size_t n = 0;
    int sqlite = strncmp(c->db, "sqlite:", 7) == 0;
    /* Every verb but start opens with create=0, so that a mistyped path
     * or schema is an error, never a new empty store; the verbs that
     * only read open a sqlite file with mode=ro as well, so they never
     * write it. A one-shot verb makes one call after another: on
     * PostgreSQL it opens one pooled connection (pool=1), not a client's
     * default five; duro ui serves requests at once and keeps the
     * default. A create=, mode= or pool= in the URL is the user's choice. */
    int add_create = how != CLI_OPEN_CREATE && (sqlite || is_postgres(c->db)) &&
                     url_param(c->db, "create=", &n) == NULL;
    int add_mode = how == CLI_OPEN_READ && sqlite && add_create &&
                   url_param(c->db, "mode=", &n) == NULL;
    int add_pool = is_postgres(c->db) &&
                   (c->verb == NULL || strcmp(c->verb, "ui") != 0) &&
                   url_param(c->db, "pool=", &n) == NULL;
    if (add_create || add_pool) {
        size_t len = strlen(c->db) + sizeof(added);
        url = malloc(len);
        if (url == NULL)
            return cli_error(c, EXIT_FAILED, "nomem", "out of memory");
        snprintf(added, sizeof(added), "%c%s%s%s",
                 strchr(c->db, '?') ? '&' : '?', add_create ? "create=0" : "",
                 add_mode ? "&mode=ro" : "",
                 add_pool ? (add_create ? "&pool=1" : "pool=1") : "");
        snprintf(url, len, "%s%s", c->db, added);
        use = url;
    }
    int rc = duro_client_create(use, out);
    free(url);
    if (rc == DURO_OK)
        return EXIT_OK;
    char message[2048];
    const char *detail = duro_errmsg();
    if (*added != '\0')
        detail = without_added(detail, added, message, sizeof(message));
    /* The path alone, as the user gave it, for the messages below. */
    const char *path = c->db + 7;
    int path_len = (int)strcspn(path, "?");
    if (rc == DURO_NOT_FOUND && add_create && is_postgres(c->db)) {
        /* create=0 is ours: name the schema and the URL as given, its
         * password masked */
        char shown[1024];
        duro_url_mask(c->db, shown, sizeof(shown));
        const char *schema = url_param(c->db, "schema=", &n);
        if (schema == NULL) {
            schema = "duro";
            n = 4;
        }
        if (strstr(detail, "holds no duro store") != NULL)
            return cli_error(c, EXIT_FAILED, "no_database",
                             "schema \"%.*s\" in %s holds no duro store (it "
                             "has no duro_schema table); nothing was created "
                             "in it (check --db or DURO_DB)",
                             (int)n, schema, shown);
        return cli_error(c, EXIT_FAILED, "no_database",
                         "schema \"%.*s\" does not exist in %s; nothing was "
                         "created (check --db or DURO_DB; duro start creates "
                         "a store)",
                         (int)n, schema, shown);
    }
    if (rc == DURO_NOT_FOUND && add_create &&
        strstr(detail, "not a duro store") != NULL)
        /* create=0 and mode=ro are ours, not the user's */
        return cli_error(c, EXIT_FAILED, "no_database",
                         "database file %.*s is not a duro store (it has no "
                         "duro_schema table); nothing in it was changed "
                         "(check --db or DURO_DB)",
                         path_len, path);
    if (rc == DURO_NOT_FOUND && add_create)
        /* create=0 is ours, not the user's: name the path alone. */
        return cli_error(c, EXIT_FAILED, "no_database",
                         "database file %.*s does not exist; nothing was "
                         "created (check --db or DURO_DB)",
                         path_len, path);
    if (rc == DURO_SCHEMA && add_mode &&
        strstr(detail, "mode=ro does not migrate") != NULL)
        return cli_error(c, EXIT_FAILED, "schema",
                         "database file %.*s has an older schema version "
                         "than this duro's; the verbs that only read open "
                         "it read-only and do not migrate it: open it once "
                         "as a user who can write it (its application does, "
                         "or duro --db 'sqlite:%.*s?mode=rw' list)",
                         path_len, path, path_len, path);
    if (rc == DURO_NOT_FOUND && strstr(detail, "nothing was created") != NULL)
        return cli_error(c, EXIT_FAILED, "no_database",
                         "%s (check --db or DURO_DB)", detail);
    if (rc == DURO_NOT_FOUND)
        return cli_error(c, EXIT_FAILED, "no_database",
                         "%s; nothing was created (check --db or DURO_DB)",
                         detail);
    if (rc == DURO_BAD_URL)
        /* the library's message names the URL with its password masked;
         * c->db itself may hold one */
        return cli_error(c, EXIT_USAGE, "bad_url", "--db: %s", detail);
    if (strncmp(c->db, "sqlite:", 7) == 0) {
        /* SQLite's message ("file is not a database") names no file: name
         * the URL as given */
        char masked[1024], quoted[TEXT_QUOTE_SIZE], what[TEXT_QUOTE_SIZE + 32];
        duro_url_mask(c->db, masked, sizeof(masked));
        snprintf(what, sizeof(what), "opening the store %s",
                 text_quote(masked, quoted, sizeof(quoted)));
        return error_rc_detail(c, rc, what, detail);
    }
    return error_rc_detail(c, rc, "opening the store", detail);
}

/* A first pass of getopt over the arguments that only looks for --json,
 * so that a usage error the real pass meets before it is a JSON document
 * too. What getopt takes as an option's value ("--input --json") or as an
 * operand (after "--") is not --json. On a copy: getopt permutes what it
 * scans, and a pass stopped by an error would leave an order the real
 * pass reads differently. Leaves optind reset. */
static void scan_json(cli *c, int argc, char **argv, const char *shortopts,
                      const struct option *opts)
{
    char **copy = malloc(((size_t)argc + 1) * sizeof(*copy));
    if (copy == NULL)
        return;
    memcpy(copy, argv, ((size_t)argc + 1) * sizeof(*copy));
    int ch;
    optind = 0;
    while ((ch = getopt_long(argc, copy, shortopts, opts, NULL)) != -1)
        if (ch == OPT_JSON)
            c->json = 1;
    if (c->json)
        c->color = 0;
    optind = 0;
    free(copy);
}

int cli_getopt(cli *c, int argc, char **argv, const struct option *opts,
               const char *help, int *status)
{
    /* -h everywhere; -y where the verb has --yes (returned as 'y') */
    const char *shortopts = ":h";
    for (size_t i = 0; opts[i].name != NULL; i++)
        if (strcmp(opts[i].name, "yes") == 0 && opts[i].val == 'y')
            shortopts = ":hy";
    if (optind == 0) /* the first call for this verb */
        scan_json(c, argc, argv, shortopts, opts);
    for (;;) {
        int index = -1;
        int ch = getopt_long(argc, argv, shortopts, opts, &index);
        if (ch == -1)
            return -1;
        if (ch == '?') {
            if (optopt != 0)
                *status = cli_usage(c, "unknown option '-%c'", optopt);
            else
                *status = cli_usage(c, "unknown option '%s'", argv[optind - 1]);
            return -2;
        }
        if (ch == ':') {
            *status =
                cli_usage(c, "option '%s' needs a value", argv[optind - 1]);
            return -2;
        }
        if (index >= 0) {
            /* getopt_long accepts unique prefixes (--stat for --status);
             * refused, so that a new option never changes what an old
             * command line means. */
            const char *given =
                optarg != NULL && optind >= 2 && optarg == argv[optind - 1]
                    ? argv[optind - 2]
                    : argv[optind - 1];
            size_t len = strlen(opts[index].name);
            if (strncmp(given, "--", 2) != 0 ||
                strncmp(given + 2, opts[index].name, len) != 0 ||
                (given[2 + len] != '\0' && given[2 + len] != '=')) {
                *status = cli_usage(c,
                                    "option '%.*s' is abbreviated; write "
                                    "--%s",
                                    (int)strcspn(given, "="), given,
                                    opts[index].name);
                return -2;
            }
        }
        switch (ch) {
        case OPT_DB:
            c->db = optarg;
            continue;
        case OPT_JSON:
            c->json = 1;
            continue;
        case OPT_HELP:
        case 'h':
            cli_print_help(help);
            *status = EXIT_OK;
            return -2;
        default:
            return ch;
        }
    }
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
    scan_json(&c, argc, argv, "+:h", global);
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
