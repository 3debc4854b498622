/* decide_worker.c - the child process of test_decide_kill, on the public
 * API only (duro.h):
 *
 *   decide_worker DB VERB PREFIX COUNT
 *     A client on DB sends VERB (cancel, terminate or suspend) to the
 *     instances PREFIX-0 .. PREFIX-(COUNT-1), 50 ids per call, in an order
 *     that interleaves the store's (so each call's ids are scattered over
 *     the table), writes "started" before the first call and "done" after
 *     the last, then exits 0. The parent SIGKILLs it somewhere in between.
 *
 * Exit codes: 0 done, 1 an API call failed (stderr says which), 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"

#define PER_CALL 50

static void say(const char *line)
{
    size_t n = strlen(line);
    if (write(STDOUT_FILENO, line, n) != (ssize_t)n)
        _exit(1); /* the parent is gone */
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: decide_worker DB VERB PREFIX COUNT\n");
        return 2;
    }
    const char *db = argv[1], *verb = argv[2], *prefix = argv[3];
    int count = atoi(argv[4]);
    int control = strcmp(verb, "cancel") == 0      ? 0
                  : strcmp(verb, "terminate") == 0 ? DURO_CONTROL_TERMINATE
                  : strcmp(verb, "suspend") == 0   ? DURO_CONTROL_SUSPEND
                                                   : -1;
    if (control < 0 || count <= 0) {
        fprintf(stderr, "decide_worker: bad verb or count\n");
        return 2;
    }
    duro_client *c = NULL;
    int rc = duro_client_create(db, &c);
    if (rc != DURO_OK) {
        fprintf(stderr, "decide_worker: client: %s\n", duro_errmsg());
        return 1;
    }
    char(*names)[64] = calloc((size_t)count, sizeof(*names));
    const char *ids[PER_CALL];
    duro_cancel_result cr[PER_CALL];
    duro_control_result tr[PER_CALL];
    if (names == NULL)
        return 1;
    say("started\n");
    for (int first = 0; first < count && rc == DURO_OK; first += PER_CALL) {
        int n = 0;
        for (int k = first; k < count && n < PER_CALL; k++, n++) {
            /* k-th of the walk: every 7th id, wrapping */
            int id = (int)(((long)k * 7) % count);
            snprintf(names[k], sizeof(names[k]), "%s-%d", prefix, id);
            ids[n] = names[k];
        }
        rc = control == 0 ? duro_client_cancel_many(c, ids, (size_t)n,
                                                    "killed?", "worker", cr)
                          : duro_client_control_many(c, control, ids, (size_t)n,
                                                     "killed?", "worker", tr);
    }
    if (rc != DURO_OK) {
        fprintf(stderr, "decide_worker: %s: %s (%s)\n", verb, duro_errname(rc),
                duro_errmsg());
        return 1;
    }
    say("done\n");
    duro_client_destroy(c);
    free(names);
    return 0;
}
