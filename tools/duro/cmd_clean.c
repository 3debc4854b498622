/* cmd_clean.c - the verbs that remove stored data: delete (instances by id,
 * with their children), purge (finished instances by age) and prune (old
 * executions of one instance). None creates a database. Single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char delete_help[] =
    "usage: duro delete ID... [--force] [--json]\n"
    "\n"
    "Deletes instances with their sub-orchestrations, executions, history\n"
    "and queued messages. A live one (pending, running or suspended) only\n"
    "with --force.\n"
    "Exit status: one id: 3 not found, 4 not finished (no --force);\n"
    "several ids: 1 when any was not deleted.\n";

int cmd_delete(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"force", no_argument, NULL, 'f'}, {0}};
    int force = 0;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, delete_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'f')
            force = 1;
    }
    int count = argc - optind;
    if (count < 1)
        return cli_usage(c, "expected instance ids");
    for (int i = optind; i < argc; i++)
        if (argv[i][0] == '\0')
            return cli_usage(c, "an instance id must not be empty");
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    json_t *results = c->json ? json_array() : NULL;
    int failures = 0, last_rc = DURO_OK;
    for (int i = optind; i < argc; i++) {
        size_t deleted = 0;
        int rc = duro_client_delete(client, argv[i], force, &deleted);
        const char *outcome = rc == DURO_OK              ? "deleted"
                              : rc == DURO_NOT_FOUND     ? "not_found"
                              : rc == DURO_INVALID_STATE ? "not_finished"
                                                         : "failed";
        if (rc != DURO_OK) {
            failures++;
            last_rc = rc;
            fflush(stdout); /* keep the lines in id order */
            /* The library's message for a live instance names its own
             * call and "force"; say it with this command's flag. */
            const char *why =
                rc == DURO_NOT_FOUND ? "no such instance"
                : rc == DURO_INVALID_STATE
                    ? "it or one of its sub-orchestrations has not "
                      "finished; cancel or terminate it first, or delete it "
                      "with --force"
                    : duro_errmsg();
            char quoted[TEXT_QUOTE_SIZE], reason[1024];
            fprintf(stderr, "duro delete: %s: %s\n",
                    text_quote(argv[i], quoted, sizeof(quoted)),
                    text_short(*why ? why : duro_strerror(rc), 300, reason,
                               sizeof(reason)));
        } else if (!c->json) {
            char shown[TEXT_ESCAPE_SIZE];
            printf("deleted %s (%zu instance%s)\n",
                   text_escape(argv[i], shown, sizeof(shown)), deleted,
                   deleted == 1 ? "" : "s");
        }
        if (results != NULL) {
            json_t *r = json_object();
            jset(r, "id", jstr(argv[i]));
            jset(r, "outcome", jstr(outcome));
            jset(r, "deleted", jint((int64_t)deleted));
            json_array_append_new(results, r);
        }
    }
    duro_client_destroy(client);
    if (results != NULL) {
        json_t *doc = json_object();
        jset(doc, "results", results);
        json_print(doc);
    }
    if (failures == 0)
        return EXIT_OK;
    if (count > 1)
        return EXIT_FAILED;
    return last_rc == DURO_NOT_FOUND       ? EXIT_NOT_FOUND
           : last_rc == DURO_INVALID_STATE ? EXIT_INVALID_STATE
                                           : EXIT_FAILED;
}

static const char purge_help[] =
    "usage: duro purge --before T\n"
    "                  [--status completed,failed,cancelled,terminated]\n"
    "                  [--name N] [--dry-run] [--yes] [--json]\n"
    "\n"
    "Deletes finished instances (with their sub-orchestrations, when all\n"
    "of them are finished too) that finished before T. On a terminal it\n"
    "shows the count and asks \"Purge N instances? [y/N]\" first.\n"
    "  --before T   required: 2026-05-01T00:00:00Z, 2026-05-01, 30d, '7d ago'\n"
    "  --status S   among completed, failed, cancelled, terminated\n"
    "               (default: all four)\n"
    "  --name N     only instances of orchestration N\n"
    "  --dry-run    change nothing; show what would be deleted\n"
    "  -y, --yes    do not ask (without a terminal, or with --dry-run, it\n"
    "               never asks)\n";

int cmd_purge(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"before", required_argument, NULL, 'B'},
        {"status", required_argument, NULL, 's'},
        {"name", required_argument, NULL, 'N'},
        {"dry-run", no_argument, NULL, 'n'},
        {"yes", no_argument, NULL, 'y'},
        {0}};
    duro_bulk_filter filter = {0};
    int dry_run = 0, yes = 0;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, purge_help, &status)) != -1) {
        int bad = 0;
        switch (ch) {
        case -2:
            return status;
        case 'B':
            bad = args_time(c, "--before", optarg, &filter.finished_before_ms);
            break;
        case 's':
            bad = args_status_mask(c, "--status", optarg, &filter.status_mask);
            if (!bad &&
                (filter.status_mask &
                 ~((1u << DURO_STATUS_COMPLETED) | (1u << DURO_STATUS_FAILED) |
                   (1u << DURO_STATUS_CANCELLED) |
                   (1u << DURO_STATUS_TERMINATED))) != 0) {
                cli_usage(c, "--status: only completed, failed, cancelled and "
                             "terminated instances are purged");
                bad = 1;
            }
            break;
        case 'N':
            filter.name = optarg;
            break;
        case 'n':
            dry_run = 1;
            break;
        case 'y':
            yes = 1;
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
    if (filter.finished_before_ms == 0)
        return cli_usage(c, "--before T is required");
    if (filter.name != NULL && *filter.name == '\0')
        return cli_usage(c, "--name must not be empty");
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    duro_bulk_options bo;
    duro_bulk_options_init(&bo);
    duro_bulk_result *r = NULL;
    int rc = DURO_OK;
    if (!dry_run && !yes && cli_interactive()) {
        /* the count a real run would take now, for the question */
        bo.dry_run = 1;
        rc = duro_client_purge(client, &filter, &bo, &r);
        int go = rc == DURO_OK && cli_confirm("Purge", r->count, filter.name);
        duro_bulk_result_free(r);
        r = NULL;
        if (rc == DURO_OK && !go) {
            duro_client_destroy(client);
            return cli_error(c, EXIT_FAILED, "not_confirmed",
                             "not confirmed; nothing was changed");
        }
    }
    bo.dry_run = dry_run;
    bo.max_ids = SIZE_MAX;
    if (rc == DURO_OK)
        rc = duro_client_purge(client, &filter, &bo, &r);
    if (rc != DURO_OK) {
        duro_client_destroy(client);
        return cli_error_rc(c, rc, "purging");
    }
    if (c->json) {
        json_print(json_bulk(r, dry_run));
    } else {
        printf("%s %llu instance%s\n", dry_run ? "would purge" : "purged",
               (unsigned long long)r->count, r->count == 1 ? "" : "s");
        text_bulk_ids(r);
    }
    if (r->count == 0 && filter.name != NULL)
        cli_note_unknown_name(c, client, filter.name);
    duro_client_destroy(client);
    duro_bulk_result_free(r);
    return EXIT_OK;
}

static const char prune_help[] =
    "usage: duro prune ID --keep N [--json]\n"
    "\n"
    "Deletes the history of all but the last N executions of an instance\n"
    "(continue-as-new chains); the current execution is always kept. Says\n"
    "how many executions went and how many are kept: N, or fewer when\n"
    "fewer exist.\n"
    "  --keep N   executions to keep, at least 1 (required)\n";

/* 1 when execution @p e of @p id still has its history, 0 when it was
 * pruned; -1 with the library's code in *rc on a failure. */
static int execution_exists(duro_client *client, const char *id, uint64_t e,
                            int *rc)
{
    duro_history *h = NULL;
    *rc = duro_client_read_history(client, id, e, &h);
    duro_history_free(h);
    if (*rc == DURO_OK)
        return 1;
    if (*rc == DURO_NOT_FOUND) {
        *rc = DURO_OK;
        return 0;
    }
    return -1;
}

/* How many executions of @p id are kept after a prune to the last @p keep
 * that removed @p pruned, @p current being the current execution (0: none
 * ran yet). What is left is always the last ones, current included: all
 * of the last @p keep when this prune removed any, else those that
 * existed, fewer when the chain is shorter or earlier prunes (duro prune,
 * a runtime's keep_executions) took more; the oldest that exists is found
 * by bisection, reading O(log keep) executions. */
static int executions_kept(duro_client *client, const char *id,
                           uint64_t current, uint64_t keep, size_t pruned,
                           uint64_t *kept)
{
    *kept = 0;
    if (current == 0)
        return DURO_OK;
    uint64_t lo = current >= keep ? current - keep + 1 : 1, hi = current;
    if (pruned > 0) {
        *kept = current - lo + 1;
        return DURO_OK;
    }
    /* the oldest execution that exists lies in [lo, hi]: hi does */
    int rc = DURO_OK;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int exists = execution_exists(client, id, mid, &rc);
        if (exists < 0)
            return rc;
        if (exists)
            hi = mid;
        else
            lo = mid + 1;
    }
    *kept = current - lo + 1;
    return DURO_OK;
}

int cmd_prune(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS, {"keep", required_argument, NULL, 'k'}, {0}};
    uint64_t keep = 0;
    int have_keep = 0;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, prune_help, &status)) != -1) {
        if (ch == -2)
            return status;
        if (ch == 'k') {
            if (args_uint_range(c, "--keep", optarg, 1, UINT64_MAX, &keep) != 0)
                return EXIT_USAGE;
            have_keep = 1;
        }
    }
    if (argc - optind != 1)
        return cli_usage(c, "expected one instance id");
    if (!have_keep || keep == 0)
        return cli_usage(c, "--keep N (at least 1) is required");
    const char *id = argv[optind];
    if (*id == '\0')
        return cli_usage(c, "the instance id must not be empty");
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    size_t pruned = 0;
    uint64_t kept = 0;
    duro_instance_info *info = NULL;
    int rc = duro_client_prune(client, id, keep, &pruned);
    if (rc == DURO_OK)
        rc = duro_client_get_status(client, id, &info);
    if (rc == DURO_OK && info->status == DURO_STATUS_NOT_FOUND)
        rc = DURO_NOT_FOUND; /* deleted meanwhile */
    if (rc == DURO_OK)
        rc = executions_kept(client, id, info->execution_id, keep, pruned,
                             &kept);
    duro_free(info);
    duro_client_destroy(client);
    char shown[TEXT_ESCAPE_SIZE];
    if (rc == DURO_NOT_FOUND)
        return cli_error(c, EXIT_NOT_FOUND, "not_found",
                         "instance '%s' does not exist",
                         text_quote(id, shown, sizeof(shown)));
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, text_quote(id, shown, sizeof(shown)));
    if (c->json) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        jset(doc, "kept", jint((int64_t)kept));
        jset(doc, "pruned", jint((int64_t)pruned));
        json_print(doc);
    } else {
        printf("pruned %zu execution%s of %s; %llu kept\n", pruned,
               pruned == 1 ? "" : "s", text_escape(id, shown, sizeof(shown)),
               (unsigned long long)kept);
    }
    return EXIT_OK;
}
