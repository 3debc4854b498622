/* cmd_control.c - the verbs that ask instances to change course: cancel,
 * terminate, suspend and resume. One implementation, parameterised by a
 * row of the verb table: by ids (duro_client_cancel_many or
 * duro_client_control_many, one outcome per id) or by query (an
 * orchestration name, statuses, a creation time: *_matching), each with a
 * dry run that changes nothing; cancel and terminate can then wait until
 * each instance has ended (--wait). Single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define BIT(status) (1u << (status))

/* --wait without a duration: long enough for a runtime's next turn, short
 * enough that a script with no runtime serving the store ends. */
#define CONTROL_WAIT_DEFAULT_MS 60000

/* What differs between the verbs. */
typedef struct control_verb {
    const char *name;  /* "terminate" */
    int control;       /* 0: cancel; else a duro_control */
    uint32_t statuses; /* what --status may select */
    uint32_t defaults; /* what --name selects without --status: never
                          Suspended for a cancel or a terminate (an
                          operator paused it on purpose) */
    const char *done;  /* "terminated": what a requested id will be, and
                          the library's default reason */
    const char *doing; /* "terminating", for a failed call */
    const char *about; /* the help's description */
    const char *ok;    /* the help: exit 0 when every id ... */
    const char *again; /* the text for a request that changes nothing and
                          is not an error */
    int ends_as;       /* --wait: the status that means it worked
                          (DURO_STATUS_CANCELLED, _TERMINATED); 0: the
                          verb does not wait */
    const char *ask;   /* "Cancel": by query on a terminal, the question
                          asked first (--yes skips it); NULL: the verb
                          destroys nothing and never asks */
} control_verb;

static const control_verb cancel_verb = {
    "cancel",
    0,
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING) |
        BIT(DURO_STATUS_SUSPENDED),
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING),
    "cancelled",
    "cancelling",
    "Requests cancellation of instances: the ids given, or every pending or\n"
    "running instance of orchestration N (created before T) that has no\n"
    "cancellation requested yet (suspended ones only with --status\n"
    "suspended: a cancel ends them at once, without cleanup). An\n"
    "orchestration registered with observe_cancel is told and may clean up\n"
    "first (it stays running, cancelling, until its code returns); any\n"
    "other ends cancelled at its next turn without running its code.\n",
    "was cancelled or already was",
    "already cancelled",
    DURO_STATUS_CANCELLED,
    "Cancel",
};

static const control_verb terminate_verb = {
    "terminate",
    DURO_CONTROL_TERMINATE,
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING) |
        BIT(DURO_STATUS_SUSPENDED),
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING),
    "terminated",
    "terminating",
    "Ends instances at once (at their next turn) without running their\n"
    "code: the ids given, or every pending or running instance of\n"
    "orchestration N (created before T; suspended ones only with --status\n"
    "suspended). Their activities are cancelled (reason\n"
    "instance_terminated) and their children terminated. It also ends an\n"
    "instance that is cleaning up after a cancel.\n",
    "was live (pending, running or suspended)\nor terminated",
    "already terminated",
    DURO_STATUS_TERMINATED,
    "Terminate",
};

static const control_verb suspend_verb = {
    "suspend",
    DURO_CONTROL_SUSPEND,
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING),
    BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING),
    "suspended",
    "suspending",
    "Suspends instances: the ids given, or every pending or running\n"
    "instance of orchestration N (created before T). From its next turn a\n"
    "suspended instance takes no decisions and runs no code; messages that\n"
    "arrive are recorded in its history and handed to the code in order\n"
    "when it is resumed; running activities keep running. Suspending a\n"
    "suspended instance changes nothing.\n",
    "was live (a suspended one stays suspended)",
    "already suspended",
    0,
    NULL,
};

static const control_verb resume_verb = {
    "resume",
    DURO_CONTROL_RESUME,
    BIT(DURO_STATUS_SUSPENDED),
    BIT(DURO_STATUS_SUSPENDED),
    "resumed",
    "resuming",
    "Resumes suspended instances: the ids given, or every suspended\n"
    "instance of orchestration N (created before T). The code then gets the\n"
    "messages that arrived meanwhile, in order. Resuming a live instance\n"
    "that is not suspended changes nothing.\n",
    "was live (one not suspended is left as it is)",
    "not suspended; nothing to resume",
    0,
    NULL,
};

/* The statuses of @p mask in status order: "pending,running" (@p sep ",",
 * @p last ",") or "pending, running and suspended". */
static const char *status_names(uint32_t mask, const char *sep,
                                const char *last, char *buf, size_t size)
{
    size_t n = 0, left = 0;
    buf[0] = '\0';
    for (int s = 1; s <= DURO_STATUS_TERMINATED; s++)
        left += (mask & BIT(s)) != 0;
    for (int s = 1; s <= DURO_STATUS_TERMINATED && n < size; s++) {
        if ((mask & BIT(s)) == 0)
            continue;
        left--;
        int w = snprintf(buf + n, size - n, "%s%s", status_word(s),
                         left > 1    ? sep
                         : left == 1 ? last
                                     : "");
        n += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* The verb's usage text into @p buf. */
static const char *help_text(const control_verb *v, char *buf, size_t size)
{
    char list[96], defaults[96], choice[256], waits[1024] = "";
    status_names(v->statuses, ",", ",", list, sizeof(list));
    status_names(v->defaults, ",", ",", defaults, sizeof(defaults));
    if (strchr(list, ',') == NULL)
        snprintf(choice, sizeof(choice), "%s (the only choice)", list);
    else if (v->defaults == v->statuses)
        snprintf(choice, sizeof(choice), "among %s (default: all)", list);
    else
        snprintf(choice, sizeof(choice),
                 "among %s\n               (default: %s)", list, defaults);
    int indent = (int)(strlen("       duro  ") + strlen(v->name));
    char usage[512];
    if (v->ends_as != 0) {
        snprintf(usage, sizeof(usage),
                 "usage: duro %s ID... [--reason R] [--by WHO] [--dry-run] "
                 "[--wait[=D]]\n"
                 "%*s[--json]\n"
                 "       duro %s --name N [--status %s]\n"
                 "%*s[--before T] [--reason R] [--by WHO] [--dry-run]\n"
                 "%*s[--wait[=D]] [--yes] [--json]\n",
                 v->name, indent, "", v->name, list, indent, "", indent, "");
        snprintf(waits, sizeof(waits),
                 "  --wait[=D]   then wait until each instance has ended, at "
                 "most D (default\n"
                 "               %ds; the '=' is needed: in --wait 5m, 5m "
                 "is an id)\n"
                 "  -y, --yes    do not ask: by --name on a terminal it "
                 "shows the count\n"
                 "               and asks \"%s N instances of NAME? [y/N]\" "
                 "first\n"
                 "               (without a terminal, or with --dry-run, it "
                 "never asks)\n",
                 CONTROL_WAIT_DEFAULT_MS / 1000, v->ask);
    } else {
        snprintf(usage, sizeof(usage),
                 "usage: duro %s ID... [--reason R] [--by WHO] [--dry-run] "
                 "[--json]\n"
                 "       duro %s --name N [--status %s]\n"
                 "%*s[--before T] [--reason R] [--by WHO] [--dry-run] "
                 "[--json]\n",
                 v->name, v->name, list, indent, "");
    }
    snprintf(buf, size,
             "%s"
             "\n"
             "%s"
             "Ids and --name together are refused.\n"
             "  --reason R   why (default: %s)\n"
             "  --by WHO     who asks (default: user:NAME, NAME your login "
             "name from\n"
             "               the password database, else $USER)\n"
             "  --dry-run    change nothing; show what would be %s\n"
             "%s"
             "  --name N     select by orchestration name\n"
             "  --status S   with --name: %s\n"
             "  --before T   with --name: only instances created before T\n"
             "Exit status: 0 when every id %s;\n"
             "one id: 3 not found, 4 already finished; several ids: 1 when "
             "any\nwas not.%s\n",
             usage, v->about, v->done, v->done, waits, choice, v->ok,
             v->ends_as == DURO_STATUS_CANCELLED
                 ? "\nWith --wait, when the request itself worked: 0 when "
                   "every instance\nended cancelled, 4 when one ended "
                   "otherwise first (it completed or\nfailed while its "
                   "cancel was on its way), 7 when the deadline passed."
             : v->ends_as == DURO_STATUS_TERMINATED
                 ? "\nWith --wait, when the request itself worked: 0 when "
                   "every instance\nended terminated, 4 when one ended "
                   "otherwise first (it completed,\nfailed or was "
                   "cancelled), 7 when the deadline passed."
                 : "");
    return buf;
}

/* What the verb decided for one id: duro_cancel_result or
 * duro_control_result. */
typedef struct verdict {
    int outcome, status;
} verdict;

/* How an outcome is reported. */
enum { DONE, AGAIN, NOT_FOUND, FINISHED, DUPLICATE };

static int outcome_class(const control_verb *v, const verdict *r)
{
    if (v->control == 0) {
        switch (r->outcome) {
        case DURO_CANCEL_REQUESTED:
        case DURO_CANCEL_CANCELLED:
            return DONE;
        case DURO_CANCEL_ALREADY_CANCELLED:
            return AGAIN;
        case DURO_CANCEL_NOT_FOUND:
            return NOT_FOUND;
        case DURO_CANCEL_DUPLICATE:
            return DUPLICATE;
        default:
            return FINISHED;
        }
    }
    switch (r->outcome) {
    case DURO_CONTROL_OUTCOME_APPLIED:
        return DONE;
    case DURO_CONTROL_OUTCOME_REQUESTED:
        /* a live instance: whether it changes anything is its status */
        if ((v->control == DURO_CONTROL_SUSPEND &&
             r->status == DURO_STATUS_SUSPENDED) ||
            (v->control == DURO_CONTROL_RESUME &&
             r->status != DURO_STATUS_SUSPENDED))
            return AGAIN;
        return DONE;
    case DURO_CONTROL_OUTCOME_FINISHED:
        /* terminating a terminated instance is not an error, as
         * duro_client_terminate says (and as a cancel of a cancelled one) */
        return v->control == DURO_CONTROL_TERMINATE &&
                       r->status == DURO_STATUS_TERMINATED
                   ? AGAIN
                   : FINISHED;
    case DURO_CONTROL_OUTCOME_NOT_FOUND:
        return NOT_FOUND;
    case DURO_CONTROL_OUTCOME_DUPLICATE:
        return DUPLICATE;
    default:
        return FINISHED;
    }
}

static const char *outcome_name(const control_verb *v, int outcome)
{
    return v->control == 0 ? duro_cancel_outcome_name(outcome)
                           : duro_control_outcome_name(outcome);
}

/* What the real run would decide for one instance, read without writing:
 * the status alone (a cancel also looks at a cancellation requested). */
static int dry_outcome(const control_verb *v, duro_client *client,
                       const char *id, verdict *r)
{
    duro_instance_info *info = NULL;
    int rc = duro_client_get_status(client, id, &info);
    if (rc != DURO_OK)
        return rc;
    int status = info->status,
        cancelled = v->control == 0 && (status == DURO_STATUS_CANCELLED ||
                                        instance_cancelling(info));
    duro_free(info);
    r->status = status;
    if (status == DURO_STATUS_NOT_FOUND)
        r->outcome =
            v->control ? DURO_CONTROL_OUTCOME_NOT_FOUND : DURO_CANCEL_NOT_FOUND;
    else if (cancelled)
        r->outcome = DURO_CANCEL_ALREADY_CANCELLED;
    else if (duro_status_is_terminal(status))
        r->outcome = v->control ? DURO_CONTROL_OUTCOME_FINISHED
                                : DURO_CANCEL_NOT_CANCELLABLE;
    else
        r->outcome =
            v->control ? DURO_CONTROL_OUTCOME_REQUESTED : DURO_CANCEL_REQUESTED;
    return DURO_OK;
}

/* The dry run by ids: a repeated id is handled once, as the real run
 * does. */
static int dry_run_ids(const control_verb *v, duro_client *client, char **ids,
                       size_t count, verdict *results)
{
    int rc = DURO_OK;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        size_t first = 0;
        while (strcmp(ids[first], ids[i]) != 0)
            first++;
        if (first < i) {
            results[i].outcome = v->control ? DURO_CONTROL_OUTCOME_DUPLICATE
                                            : DURO_CANCEL_DUPLICATE;
            results[i].status = results[first].status;
        } else {
            rc = dry_outcome(v, client, ids[i], &results[i]);
        }
    }
    return rc;
}

/* The real run by ids: the library's code, or -1 when out of memory. */
static int run_ids(const control_verb *v, duro_client *client, char **ids,
                   size_t count, const char *reason, const char *by,
                   verdict *results)
{
    const char *const *list = (const char *const *)ids;
    duro_cancel_result *cancels =
        v->control == 0 ? calloc(count, sizeof(*cancels)) : NULL;
    duro_control_result *controls =
        v->control != 0 ? calloc(count, sizeof(*controls)) : NULL;
    if (cancels == NULL && controls == NULL)
        return -1;
    int rc =
        cancels != NULL
            ? duro_client_cancel_many(client, list, count, reason, by, cancels)
            : duro_client_control_many(client, v->control, list, count, reason,
                                       by, controls);
    for (size_t i = 0; i < count; i++)
        results[i] = cancels != NULL
                         ? (verdict){cancels[i].outcome, cancels[i].status}
                         : (verdict){controls[i].outcome, controls[i].status};
    free(cancels);
    free(controls);
    return rc;
}

/* What became of one instance that --wait waited for. */
typedef struct waited {
    int status;    /* its status when the wait ended: a finished one, or
                      the live one at the deadline; DURO_STATUS_NOT_FOUND
                      when it was deleted meanwhile; -1: not waited for */
    int timed_out; /* the deadline passed first */
} waited;

/* Waits until each of @p ids whose @p wait[i].status is not -1 has ended
 * or @p deadline (duro_now_ms) passes, filling @p wait. DURO_OK, or the
 * code of a store that kept failing. */
static int wait_all(duro_client *client, const char *const *ids, size_t count,
                    int64_t deadline, waited *wait)
{
    for (size_t i = 0; i < count; i++) {
        if (wait[i].status == -1)
            continue;
        int64_t left = deadline - duro_now_ms();
        duro_instance_info *info = NULL;
        int rc = duro_client_wait(client, ids[i], left > 0 ? left : 0, &info);
        if (rc != DURO_OK && rc != DURO_TIMEOUT && rc != DURO_NOT_FOUND) {
            duro_free(info);
            return rc;
        }
        wait[i].status =
            info != NULL ? info->status : (int)DURO_STATUS_NOT_FOUND;
        wait[i].timed_out = rc == DURO_TIMEOUT;
        duro_free(info);
    }
    return DURO_OK;
}

/* The exit status of a wait: 4 when any instance ended otherwise than
 * the verb asks (or was deleted), else 7 when any was still live at the
 * deadline, else 0. */
static int wait_exit(const control_verb *v, const waited *wait, size_t count)
{
    int otherwise = 0, late = 0;
    for (size_t i = 0; i < count; i++) {
        if (wait[i].status == -1)
            continue;
        if (wait[i].timed_out)
            late = 1;
        else if (wait[i].status != v->ends_as)
            otherwise = 1;
    }
    return otherwise ? EXIT_INVALID_STATE : late ? EXIT_TIMEOUT : EXIT_OK;
}

/* What the wait found for one instance, for people: "ID: ended cancelled"
 * on stdout (only without --json), what went otherwise on stderr. */
static void print_waited(cli *c, const control_verb *v, const char *id,
                         const waited *w, int64_t wait_ms)
{
    char shown[TEXT_ESCAPE_SIZE], d[32];
    if (w->status == -1)
        return;
    if (w->timed_out) {
        fflush(stdout);
        fprintf(stderr,
                "duro %s: %s: still %s at the deadline (--wait=%s); it has "
                "not ended yet\n",
                v->name, text_quote(id, shown, sizeof(shown)),
                status_word(w->status), text_duration(wait_ms, d, sizeof(d)));
    } else if (w->status == DURO_STATUS_NOT_FOUND) {
        fflush(stdout);
        fprintf(stderr, "duro %s: %s: deleted before it ended\n", v->name,
                text_quote(id, shown, sizeof(shown)));
    } else if (w->status != v->ends_as) {
        fflush(stdout);
        fprintf(stderr,
                "duro %s: %s: it ended %s before the %s took effect; it was "
                "not %s\n",
                v->name, text_quote(id, shown, sizeof(shown)),
                status_word(w->status), v->name, v->done);
    } else if (!c->json) {
        printf("%s: ended %s\n", text_escape(id, shown, sizeof(shown)),
               status_word(w->status));
    }
}

/* The JSON of a wait's result: sets "final_status" (null when not waited
 * for) and "timed_out" on @p obj. */
static void jset_waited(json_t *obj, const waited *w)
{
    jset(obj, "final_status",
         w->status == -1 ? json_null() : jstr(status_word(w->status)));
    jset(obj, "timed_out", json_boolean(w->timed_out));
}

/* The per-id lines: with --json the document (its results with what the
 * wait found when @p wait is not NULL), and for every failure a stderr
 * line; without, one stdout line per id. */
static void print_results(cli *c, const control_verb *v, char **ids,
                          size_t count, const verdict *results, int dry_run,
                          const waited *wait)
{
    if (c->json) {
        json_t *list = json_array();
        for (size_t i = 0; i < count; i++) {
            json_t *r = json_object();
            jset(r, "id", jstr(ids[i]));
            jset(r, "outcome", jstr(outcome_name(v, results[i].outcome)));
            jset(r, "status", jstr(status_word(results[i].status)));
            if (wait != NULL)
                jset_waited(r, &wait[i]);
            json_array_append_new(list, r);
        }
        json_t *doc = json_object();
        jset(doc, "dry_run", json_boolean(dry_run));
        jset(doc, "results", list);
        json_print(doc);
    }
    for (size_t i = 0; i < count; i++) {
        const char *word = status_word(results[i].status);
        int how = outcome_class(v, &results[i]);
        int at_once = results[i].outcome ==
                      (v->control == 0 ? DURO_CANCEL_CANCELLED
                                       : DURO_CONTROL_OUTCOME_APPLIED);
        char id[TEXT_ESCAPE_SIZE];
        if (how == NOT_FOUND || how == FINISHED)
            fflush(stdout); /* keep the lines in id order */
        if (how == NOT_FOUND)
            fprintf(stderr, "duro %s: %s: no such instance\n", v->name,
                    text_quote(ids[i], id, sizeof(id)));
        else if (how == FINISHED)
            fprintf(stderr,
                    "duro %s: %s: it has finished (%s); nothing to %s\n",
                    v->name, text_quote(ids[i], id, sizeof(id)), word, v->name);
        else if (c->json || how == DUPLICATE)
            continue;
        else if (how == AGAIN)
            printf("%s: %s (%s)\n", text_escape(ids[i], id, sizeof(id)),
                   v->again, word);
        else if (dry_run)
            printf("%s: would be %s (was %s)\n",
                   text_escape(ids[i], id, sizeof(id)), v->done, word);
        else if (at_once) /* decided in the request's own transaction */
            printf("%s: %s (was %s)\n", text_escape(ids[i], id, sizeof(id)),
                   v->done, word);
        else
            printf("%s: %s requested (was %s)\n",
                   text_escape(ids[i], id, sizeof(id)), v->name, word);
    }
}

static int control_ids(cli *c, const control_verb *v, duro_client *client,
                       char **ids, size_t count, const char *reason,
                       const char *by, int dry_run, int64_t wait_ms)
{
    verdict *results = calloc(count, sizeof(*results));
    waited *wait = wait_ms >= 0 ? calloc(count, sizeof(*wait)) : NULL;
    int rc = -1;
    if (results != NULL && (wait_ms < 0 || wait != NULL))
        rc = dry_run ? dry_run_ids(v, client, ids, count, results)
                     : run_ids(v, client, ids, count, reason, by, results);
    if (rc == -1) {
        free(results);
        free(wait);
        return cli_error(c, EXIT_FAILED, "nomem", "out of memory");
    }
    if (rc != DURO_OK) {
        free(results);
        free(wait);
        return cli_error_rc(c, rc, v->doing);
    }
    if (wait != NULL) {
        /* for people, what was sent shows before the wait; the JSON
         * document comes whole after it */
        if (!c->json)
            print_results(c, v, ids, count, results, dry_run, NULL);
        fflush(stdout);
        for (size_t i = 0; i < count; i++) {
            int how = outcome_class(v, &results[i]);
            wait[i].status = how == DONE || how == AGAIN ? 0 : -1;
        }
        rc = wait_all(client, (const char *const *)ids, count,
                      duro_now_ms() + wait_ms, wait);
        if (rc != DURO_OK) {
            free(results);
            free(wait);
            return cli_error_rc(c, rc, "waiting");
        }
        if (c->json)
            print_results(c, v, ids, count, results, dry_run, wait);
        for (size_t i = 0; i < count; i++)
            print_waited(c, v, ids[i], &wait[i], wait_ms);
    } else {
        print_results(c, v, ids, count, results, dry_run, NULL);
    }
    size_t failed = 0;
    for (size_t i = 0; i < count; i++) {
        int how = outcome_class(v, &results[i]);
        failed += how == NOT_FOUND || how == FINISHED;
    }
    int status = EXIT_OK;
    if (failed > 0 && count == 1)
        status = outcome_class(v, &results[0]) == NOT_FOUND
                     ? EXIT_NOT_FOUND
                     : EXIT_INVALID_STATE;
    else if (failed > 0)
        status = EXIT_FAILED;
    else if (wait != NULL)
        status = wait_exit(v, wait, count);
    free(results);
    free(wait);
    return status;
}

/* The summary line of a run by query: "cancel requested for 3 instances
 * of N", "cancelled 2 instances of N", "cancel requested for 3 instances
 * of N; 1 of them cancelled at once", "would cancel 3 instances of N". */
static void print_query_summary(const control_verb *v,
                                const duro_bulk_filter *filter,
                                const duro_bulk_result *r, int dry_run)
{
    char name[TEXT_ESCAPE_SIZE];
    const char *s = r->count == 1 ? "" : "s";
    text_escape(filter->name, name, sizeof(name));
    if (dry_run)
        printf("would %s %llu instance%s of %s\n", v->name,
               (unsigned long long)r->count, s, name);
    else if (r->applied > 0 && r->applied == r->count)
        printf("%s %llu instance%s of %s\n", v->done,
               (unsigned long long)r->count, s, name);
    else if (r->applied > 0)
        printf("%s requested for %llu instance%s of %s; %llu of them %s at "
               "once\n",
               v->name, (unsigned long long)r->count, s, name,
               (unsigned long long)r->applied, v->done);
    else
        printf("%s requested for %llu instance%s of %s\n", v->name,
               (unsigned long long)r->count, s, name);
}

/* The count a real run by query would take now (a dry run without ids),
 * for the question; DURO_OK or the library's code. */
static int query_count(const control_verb *v, duro_client *client,
                       const duro_bulk_filter *filter, uint64_t *count)
{
    duro_bulk_options bo;
    duro_bulk_options_init(&bo);
    bo.dry_run = 1;
    bo.max_ids = 0;
    duro_bulk_result *r = NULL;
    int rc =
        v->control == 0
            ? duro_client_cancel_matching(client, filter, NULL, NULL, &bo, &r)
            : duro_client_control_matching(client, v->control, filter, NULL,
                                           NULL, &bo, &r);
    *count = rc == DURO_OK ? r->count : 0;
    duro_bulk_result_free(r);
    return rc;
}

static int control_query(cli *c, const control_verb *v, duro_client *client,
                         const duro_bulk_filter *filter, const char *reason,
                         const char *by, int dry_run, int64_t wait_ms, int yes)
{
    if (!dry_run && !yes && v->ask != NULL && cli_interactive()) {
        uint64_t count = 0;
        int rc = query_count(v, client, filter, &count);
        if (rc != DURO_OK)
            return cli_error_rc(c, rc, "counting");
        if (!cli_confirm(v->ask, count, filter->name))
            return cli_error(c, EXIT_FAILED, "not_confirmed",
                             "not confirmed; nothing was changed");
    }
    duro_bulk_options bo;
    duro_bulk_options_init(&bo);
    bo.dry_run = dry_run;
    bo.max_ids = SIZE_MAX;
    duro_bulk_result *r = NULL;
    int rc =
        v->control == 0
            ? duro_client_cancel_matching(client, filter, reason, by, &bo, &r)
            : duro_client_control_matching(client, v->control, filter, reason,
                                           by, &bo, &r);
    if ((rc == DURO_STORAGE || rc == DURO_BUSY) && !dry_run) {
        /* a sweep commits batch by batch: say what stands */
        char what[256];
        snprintf(what, sizeof(what),
                 "%s (the batches done before this failure stand; once its "
                 "cause is gone, the same command does the rest)",
                 v->doing);
        return cli_error_rc(c, rc, what);
    }
    if (rc != DURO_OK)
        return cli_error_rc(c, rc, v->doing);
    waited *wait = NULL;
    if (wait_ms >= 0 && r->id_count > 0 &&
        (wait = calloc(r->id_count, sizeof(*wait))) == NULL) {
        duro_bulk_result_free(r);
        return cli_error(c, EXIT_FAILED, "nomem", "out of memory");
    }
    if (!c->json) {
        print_query_summary(v, filter, r, dry_run);
        text_bulk_ids(r);
    }
    int status = EXIT_OK;
    if (wait != NULL) {
        fflush(stdout);
        rc = wait_all(client, r->ids, r->id_count, duro_now_ms() + wait_ms,
                      wait);
        if (rc != DURO_OK) {
            free(wait);
            duro_bulk_result_free(r);
            return cli_error_rc(c, rc, "waiting");
        }
        status = wait_exit(v, wait, r->id_count);
    }
    if (c->json) {
        json_t *doc = json_bulk(r, dry_run);
        jset(doc, "applied", jint((int64_t)r->applied));
        if (wait_ms >= 0) {
            json_t *list = json_array();
            for (size_t i = 0; i < r->id_count; i++) {
                json_t *o = json_object();
                jset(o, "id", jstr(r->ids[i]));
                jset_waited(o, &wait[i]);
                json_array_append_new(list, o);
            }
            jset(doc, "results", list);
        }
        json_print(doc);
    }
    for (size_t i = 0; wait != NULL && i < r->id_count; i++)
        print_waited(c, v, r->ids[i], &wait[i], wait_ms);
    if (r->count == 0)
        cli_note_unknown_name(c, client, filter->name);
    free(wait);
    duro_bulk_result_free(r);
    return status;
}

static int control_verb_run(cli *c, const control_verb *v, int argc,
                            char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"reason", required_argument, NULL, 'r'},
        {"by", required_argument, NULL, 'b'},
        {"dry-run", no_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"status", required_argument, NULL, 's'},
        {"before", required_argument, NULL, 'B'},
        {"wait", optional_argument, NULL, 'w'},
        {"yes", no_argument, NULL, 'y'},
        {0}};
    duro_bulk_filter filter = {0};
    const char *reason = NULL, *by = NULL;
    int dry_run = 0, query_options = 0, yes = 0;
    int64_t wait_ms = -1; /* -1: no --wait */
    char help[4096];
    help_text(v, help, sizeof(help));
    int ch, status = EXIT_OK;
    while ((ch = cli_getopt(c, argc, argv, opts, help, &status)) != -1) {
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
            if (!bad && (filter.status_mask & ~v->statuses) != 0) {
                char words[96];
                cli_usage(c, "--status: only %s instances can be %s",
                          status_names(v->statuses, ", ", " and ", words,
                                       sizeof(words)),
                          v->done);
                bad = 1;
            }
            break;
        case 'B':
            query_options = 1;
            bad = args_time(c, "--before", optarg, &filter.created_before_ms);
            break;
        case 'y':
            if (v->ask == NULL) {
                cli_usage(c, "--yes is for cancel and terminate: %s never asks",
                          v->name);
                bad = 1;
            }
            yes = 1;
            break;
        case 'w':
            if (v->ends_as == 0) {
                cli_usage(c, "--wait is for cancel and terminate");
                bad = 1;
            } else if (optarg == NULL) {
                wait_ms = CONTROL_WAIT_DEFAULT_MS;
            } else {
                bad = args_duration(c, "--wait", optarg, &wait_ms);
            }
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
    if (dry_run && wait_ms >= 0)
        return cli_usage(c, "--wait waits for what a real run sent; not "
                            "with --dry-run");
    /* Said here, not left to the library's default for 0: a suspended
     * instance is taken only when asked for. */
    if (filter.status_mask == 0)
        filter.status_mask = v->defaults;
    for (size_t i = 0; i < count; i++)
        if (argv[optind + (int)i][0] == '\0')
            return cli_usage(c, "an instance id must not be empty");
    char user[300];
    if (by == NULL)
        by = args_default_requester(user, sizeof(user));
    duro_client *client;
    if ((status = cli_open(c, CLI_OPEN_EXISTING, &client)) != EXIT_OK)
        return status;
    if (filter.name != NULL)
        status = control_query(c, v, client, &filter, reason, by, dry_run,
                               wait_ms, yes);
    else
        status = control_ids(c, v, client, argv + optind, count, reason, by,
                             dry_run, wait_ms);
    duro_client_destroy(client);
    return status;
}

int cmd_cancel(cli *c, int argc, char **argv)
{
    return control_verb_run(c, &cancel_verb, argc, argv);
}

int cmd_terminate(cli *c, int argc, char **argv)
{
    return control_verb_run(c, &terminate_verb, argc, argv);
}

int cmd_suspend(cli *c, int argc, char **argv)
{
    return control_verb_run(c, &suspend_verb, argc, argv);
}

int cmd_resume(cli *c, int argc, char **argv)
{
    return control_verb_run(c, &resume_verb, argc, argv);
}
