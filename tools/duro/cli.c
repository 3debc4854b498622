/* cli.c - what every verb shares: the shared option parsing (getopt_long,
 * reset per verb), help and usage, error reporting (text or --json),
 * confirmations, opening the store, and the note on an unknown name. Below
 * main.c and the cmd_*.c and ui_*.c files; calls none of them.
 * Single-threaded. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

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
void cli_scan_json(cli *c, int argc, char **argv, const char *shortopts,
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
        cli_scan_json(c, argc, argv, shortopts, opts);
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

/* Levenshtein distance between @p a and @p b, by bytes (names are at
 * most 1024 bytes); SIZE_MAX when out of memory. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = malloc((lb + 1) * sizeof(*row));
    if (row == NULL)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

void cli_note_unknown_name(cli *c, duro_client *client, const char *name)
{
    duro_store_stats *st = NULL;
    if (name == NULL || duro_client_store_stats(client, &st) != DURO_OK) {
        duro_free(st); /* an older provider: no note */
        return;
    }
    const char *closest = NULL;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < st->instance_count; i++) {
        const char *known = st->instances[i].name;
        if (strcmp(known, name) == 0) {
            duro_free(st);
            return;
        }
        if (closest != NULL && strcmp(known, closest) == 0)
            continue; /* the same name, another status */
        size_t d = edit_distance(name, known);
        if (d < best) {
            best = d;
            closest = known;
        }
    }
    char shown[TEXT_QUOTE_SIZE], near[TEXT_QUOTE_SIZE];
    fflush(stdout);
    fprintf(stderr,
            "duro %s: no instance in the store has the orchestration name "
            "'%s'; %s%s%s\n",
            c->verb, text_quote(name, shown, sizeof(shown)),
            closest != NULL ? "the closest name there is '"
                            : "the store has no instances",
            closest != NULL ? text_quote(closest, near, sizeof(near)) : "",
            closest != NULL ? "'" : "");
    duro_free(st);
}
