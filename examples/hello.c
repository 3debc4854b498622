/* hello.c - the smallest duro program: one orchestration that calls one
 * activity, started and awaited through the client, on an embedded SQLite
 * file. Run: ./hello [sqlite:path.db] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro.h"

/* An activity: ordinary code that does the work. */
static int say_hello(duro_activity *a, const char *name, duro_result *out)
{
    (void)a;
    char greeting[256];
    snprintf(greeting, sizeof(greeting), "Hello, %s!", name ? name : "world");
    return duro_ok(out, greeting);
}

/* An orchestration: deterministic code that coordinates activities. */
static int hello(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "SayHello", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:hello.db";
    duro_registry *reg;
    duro_runtime *rt;
    duro_client *client;
    duro_instance_info *info = NULL;

    if (duro_registry_create(&reg) != DURO_OK ||
        duro_registry_add_orchestration(reg, "Hello", NULL, hello, NULL) !=
            DURO_OK ||
        duro_registry_add_activity(reg, "SayHello", say_hello, NULL) !=
            DURO_OK) {
        fprintf(stderr, "registry: %s\n", duro_errmsg());
        return 1;
    }
    if (duro_runtime_create(url, reg, NULL, &rt) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK) {
        fprintf(stderr, "runtime: %s\n", duro_errmsg());
        return 1;
    }
    if (duro_client_create(url, &client) != DURO_OK) {
        fprintf(stderr, "client: %s\n", duro_errmsg());
        return 1;
    }
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1; /* running the example twice reuses the instance */
    int rc = duro_client_start(client, "hello-1", "Hello", "duro", &so);
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "hello-1", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "hello-1: %s (%s)\n", duro_errname(rc), duro_errmsg());
    } else {
        printf("instance hello-1: %s, output: %s\n",
               duro_status_name(info->status),
               info->output ? info->output : "(none)");
        /* The example checks itself, so CTest notices when it breaks. */
        if (info->status != DURO_STATUS_COMPLETED || info->output == NULL ||
            strcmp(info->output, "Hello, duro!") != 0) {
            fprintf(stderr, "hello-1: expected Completed with \"Hello, "
                            "duro!\"\n");
            rc = DURO_FAILED;
        }
    }
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
