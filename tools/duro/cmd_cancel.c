/* cmd_cancel.c - duro cancel: by ids (duro_client_cancel_many, one outcome
 * per id) or by query (duro_client_cancel_matching: an orchestration name,
 * statuses, a creation time), each with a dry run that changes nothing.
 * Single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char cancel_help[] =
    "usage: duro cancel ID... [--reason R] [--by WHO] [--dry-run] [--json]\n"
    "       duro cancel --name N [--status pending,running] [--before T]\n"
    "                   [--reason R] [--by WHO] [--dry-run] [--json]\n"
    "\n"
    "Requests cancellation of instances: the ids given, or every pending or\n"
    "running instance of orchestration N (created before T) that has no\n"
    "cancellation requested yet. Ids and --name together are refused.\n"
    "  --reason R   why (default: cancelled)\n"
    "  --by WHO     who asks (default: user:$LOGNAME from the password file)\n"
    "  --dry-run    change nothing; show what would be cancelled\n"
    "Exit status: 0 when every id was cancelled or already was; one id:\n"
    "3 not found, 4 already finished; several ids: 1 when any was not.\n";

/* What cancel_many would decide for one instance, read without writing. */
static int dry_outcome(duro_client *client, const char *id,
                       duro_cancel_result *r)
{
    duro_instance_info *info = NULL;
    int rc = duro_client_get_status(client, id, &info);
    if (rc != DURO_OK)
        return rc;
    r->status = info->status;
    if (info->status == DURO_STATUS_NOT_FOUND)
        r->outcome = DURO_CANCEL_NOT_FOUND;
    else if (info->status == DURO_STATUS_CANCELLED ||
             (!duro_status_is_terminal(info->status) &&
              info->cancel_requested_ms != 0))
        r->outcome = DURO_CANCEL_ALREADY_CANCELLED;
    else if (duro_status_is_terminal(info->status))
        r->outcome = DURO_CANCEL_NOT_CANCELLABLE;
    else
        r->outcome = DURO_CANCEL_CANCELLED;
    duro_free(info);
    return DURO_OK;
}

static int ok_outcome(int outcome)
{
    return outcome == DURO_CANCEL_CANCELLED ||
           outcome == DURO_CANCEL_ALREADY_CANCELLED ||
           outcome == DURO_CANCEL_DUPLICATE;
}

static int cancel_ids(cli *c, duro_client *client, char **ids, size_t count,
                      const char *reason, const char *by, int dry_run)
{
    duro_cancel_result *results = calloc(count, sizeof(*results));
    if (results == NULL)
        return cli_error(c, EXIT_FAILED, "nomem", "out of memory");
    int rc = DURO_OK;
    if (dry_run) {
        for (size_t i = 0; i < count && rc == DURO_OK; i++) {
            /* A repeated id is handled once, as cancel_many does. */
            size_t first = 0;
            while (strcmp(ids[first], ids[i]) != 0)
                first++;
            if (first < i) {
                results[i].outcome = DURO_CANCEL_DUPLICATE;
                results[i].status = results[first].status;
            } else {
                rc = dry_outcome(client, ids[i], &results[i]);
            }
        }
    } else {
        rc = duro_client_cancel_many(client, (const char *const *)ids, count,
                                     reason, by, results);
    }
    if (rc != DURO_OK) {
        free(results);
        return cli_error_rc(c, rc, "cancelling");
    }
    size_t failed = 0;
    for (size_t i = 0; i < count; i++)
        failed += !ok_outcome(results[i].outcome);
    if (c->json) {
        json_t *list = json_array();
        for (size_t i = 0; i < count; i++) {
            json_t *r = json_object();
            jset(r, "id", jstr(ids[i]));
            jset(r, "outcome",
                 jstr(duro_cancel_outcome_name(results[i].outcome)));
            jset(r, "status", jstr(status_word(results[i].status)));
            json_array_append_new(list, r);
        }
        json_t *doc = json_object();
        jset(doc, "dry_run", json_boolean(dry_run));
        jset(doc, "results", list);
        json_print(doc);
    }
    for (size_t i = 0; i < count; i++) {
        const duro_cancel_result *r = &results[i];
        const char *word = status_word(r->status);
        if (!ok_outcome(r->outcome)) {
            fflush(stdout); /* keep the lines in id order */
            if (r->outcome == DURO_CANCEL_NOT_FOUND)
                fprintf(stderr, "duro cancel: %s: no such instance\n", ids[i]);
            else
                fprintf(stderr, "duro cancel: %s: not cancellable: it is %s\n",
                        ids[i], word);
        } else if (!c->json) {
            if (r->outcome == DURO_CANCEL_CANCELLED)
                printf("%s: %s (was %s)\n", ids[i],
                       dry_run ? "would be cancelled" : "cancel requested",
                       word);
            else if (r->outcome == DURO_CANCEL_ALREADY_CANCELLED)
                printf("%s: already cancelled (%s)\n", ids[i], word);
        }
    }
    int status = EXIT_OK;
    if (failed > 0 && count == 1)
        status = results[0].outcome == DURO_CANCEL_NOT_FOUND
                     ? EXIT_NOT_FOUND
                     : EXIT_INVALID_STATE;
    else if (failed > 0)
        status = EXIT_FAILED;
    free(results);
    return status;
}

static int cancel_query(cli *c, duro_client *client,
                        const duro_bulk_filter *filter, const char *reason,
                        const char *by, int dry_run)
{
    duro_bulk_options bo;
    duro_bulk_options_init(&bo);
    bo.dry_run = dry_run;
    bo.max_ids = SIZE_MAX;
    duro_bulk_result *r = NULL;
    int rc = duro_client_cancel_matching(client, filter, reason, by, &bo, &r);
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, "cancelling");
    if (c->json) {
        json_print(json_bulk(r, dry_run));
    } else {
        printf("%s %llu instance%s of %s\n",
               dry_run ? "would cancel" : "cancel requested for",
               (unsigned long long)r->count, r->count == 1 ? "" : "s",
               filter->name);
        text_bulk_ids(r);
    }
    duro_bulk_result_free(r);
    return EXIT_OK;
}

int cmd_cancel(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"reason", required_argument, NULL, 'r'},
        {"by", required_argument, NULL, 'b'},
        {"dry-run", no_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"status", required_argument, NULL, 's'},
        {"before", required_argument, NULL, 'B'},
        {0}};
    duro_bulk_filter filter = {0};
    const char *reason = NULL, *by = NULL;
    int dry_run = 0, query_options = 0;
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, cancel_help, &status)) != -1) {
        int bad = 0;
        switch (ch) {
        case -2:
            return status;
        case 'r':
            reason = optarg;
            break;
        case 'b':
            by = optarg;
            break;
        case 'n':
            dry_run = 1;
            break;
        case 'N':
            filter.name = optarg;
            break;
        case 's':
            query_options = 1;
            bad = args_status_mask(c, "--status", optarg, &filter.status_mask);
            if (!bad &&
                (filter.status_mask & ~((1u << DURO_STATUS_PENDING) |
                                        (1u << DURO_STATUS_RUNNING))) != 0) {
                cli_usage(c, "--status: only pending and running instances "
                             "can be cancelled");
                bad = 1;
            }
            break;
        case 'B':
            query_options = 1;
            bad = args_time(c, "--before", optarg, &filter.created_before_ms);
            break;
        }
        if (bad)
            return EXIT_USAGE;
    }
    size_t count = (size_t)(argc - optind);
    if (filter.name != NULL && count > 0)
        return cli_usage(c, "give instance ids or --name, not both");
    if (filter.name == NULL && query_options)
        return cli_usage(c, "--status and --before select by query; they "
                            "need --name");
    if (filter.name == NULL && count == 0)
        return cli_usage(c, "expected instance ids or --name");
    if (filter.name != NULL && *filter.name == '\0')
        return cli_usage(c, "--name must not be empty");
    for (size_t i = 0; i < count; i++)
        if (argv[optind + (int)i][0] == '\0')
            return cli_usage(c, "an instance id must not be empty");
    char user[300];
    if (by == NULL)
        by = args_default_requester(user, sizeof(user));
    duro_client *client;
    if ((status = cli_open(c, 0, &client)) != EXIT_OK)
        return status;
    if (filter.name != NULL)
        status = cancel_query(c, client, &filter, reason, by, dry_run);
    else
        status =
            cancel_ids(c, client, argv + optind, count, reason, by, dry_run);
    duro_client_destroy(client);
    return status;
}
