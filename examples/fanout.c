/* fanout.c - fan-out/fan-in: one orchestration splits a text into 20 chunks,
 * schedules one CountWords activity per chunk so they run in parallel on the
 * worker slots, waits for all of them with duro_join_n() and adds up the
 * counts. Run: ./fanout [sqlite:path.db] */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro.h"

#define MAX_CHUNKS 64

/* The input: one chunk per line. */
static const char text[] =
    "An orchestration is a plain C function\n"
    "that coordinates activities with blocking-style awaits.\n"
    "Every decision it makes is recorded in a durable history\n"
    "so that a crash or a restart loses nothing.\n"
    "After a restart the function is replayed from the start\n"
    "and every call is matched against the recorded events.\n"
    "Activities are ordinary functions on worker threads\n"
    "that may read files, call services or sleep.\n"
    "They run at least once, so they should be idempotent.\n"
    "An activity scheduled without an await runs in parallel\n"
    "with the other activities scheduled in the same turn.\n"
    "This example schedules twenty of them at once\n"
    "and waits for all of them with duro_join_n.\n"
    "Each one counts the words of a single line\n"
    "and returns the count as its output.\n"
    "The orchestration adds the counts together\n"
    "only when every activity has completed.\n"
    "If one of them failed, the join reports it\n"
    "and the orchestration could retry or give up.\n"
    "Here every chunk is counted and the total printed.\n";

/* Activity: the number of whitespace-separated words in its input. */
static int count_words(duro_activity *a, const char *chunk, duro_result *out)
{
    (void)a;
    int words = 0, in_word = 0;
    for (const char *p = chunk ? chunk : ""; *p; p++) {
        if (isspace((unsigned char)*p)) {
            in_word = 0;
        } else if (!in_word) {
            in_word = 1;
            words++;
        }
    }
    char count[16];
    snprintf(count, sizeof(count), "%d", words);
    return duro_ok(out, count);
}

/* Orchestration: fan out one activity per line, then fan in. Splitting the
 * input is pure computation, so it is deterministic and safe on replay. */
static int word_count(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *tasks[MAX_CHUNKS] = {0};
    size_t n = 0;
    for (const char *line = input; *line && n < MAX_CHUNKS;) {
        size_t len = strcspn(line, "\n");
        /* duro_sprintf copies the line into the context's arena. */
        const char *chunk = duro_sprintf(o, "%.*s", (int)len, line);
        tasks[n++] = duro_call_activity(o, "CountWords", chunk);
        line += len + (line[len] == '\n');
    }

    /* All n activities are scheduled in one turn; this waits for them all. */
    if (duro_join_n(o, tasks, n) != DURO_OK) {
        for (size_t i = 0; i < n; i++)
            if (duro_task_failed(tasks[i]))
                return duro_failf(out, "chunk %zu failed: %s", i + 1,
                                  duro_task_error(tasks[i]));
        return duro_fail(out, "a chunk failed");
    }

    long total = 0;
    for (size_t i = 0; i < n; i++)
        total += atol(duro_task_output(tasks[i]));
    return duro_ok(out, duro_sprintf(o, "%zu chunks, %ld words", n, total));
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:fanout.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(reg, "WordCount", NULL,
                                              word_count, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "CountWords", count_words,
                                         NULL)) != DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "fanout: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1; /* a second run reuses the finished instance */
    rc = duro_client_start(client, "wordcount-1", "WordCount", text, &so);
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "wordcount-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "fanout: wordcount-1: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("wordcount-1: %s\n", duro_status_name(info->status));
    if (info->status == DURO_STATUS_COMPLETED) {
        printf("  %s\n", info->output);
        printf("  history: %llu events (20 scheduled, 20 completed, ...)\n",
               (unsigned long long)info->history_count);
        if (info->output == NULL ||
            strcmp(info->output, "20 chunks, 164 words") != 0 ||
            info->history_count != 42) {
            fprintf(stderr, "fanout: expected \"20 chunks, 164 words\" in "
                            "42 events\n");
            rc = DURO_FAILED;
        }
    } else {
        printf("  error: %s\n", info->error ? info->error : "(none)");
        rc = DURO_FAILED;
    }

done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
