/* consumer.c - a program built against an installed duro, not the source
 * tree (tests/install/test_install.sh builds it through pkg-config and
 * through find_package(duro), shared and static). It checks that the
 * library it runs with is the version its header says, then runs one
 * orchestration that calls one activity on the SQLite file argv[1] and
 * checks the output. Prints "ok: ..." and exits 0, or says what failed and
 * exits 1. One thread of its own; the runtime's threads do the work. */
#include <stdio.h>
#include <string.h>

#include <duro.h>

static int greet(duro_activity *a, const char *name, duro_result *out)
{
    (void)a;
    char text[128];
    snprintf(text, sizeof(text), "hello, %s", name ? name : "nobody");
    return duro_ok(out, text);
}

static int hello(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Greet", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static int failed(const char *call, int rc)
{
    fprintf(stderr, "consumer: %s: %s: %s\n", call, duro_errname(rc),
            duro_errmsg());
    return 1;
}

/* Runs "Hello" with input "installed" on url; 0 when it completed with the
 * expected output. */
static int run(const char *url)
{
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int result = 1;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK) {
        failed("duro_registry_create", rc);
        goto done;
    }
    if ((rc = duro_registry_add_orchestration(reg, "Hello", NULL, hello,
                                              NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Greet", greet, NULL)) !=
            DURO_OK) {
        failed("duro_registry_add_*", rc);
        goto done;
    }
    if ((rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK) {
        failed("duro_runtime_create", rc);
        goto done;
    }
    if ((rc = duro_runtime_start(rt)) != DURO_OK) {
        failed("duro_runtime_start", rc);
        goto done;
    }
    if ((rc = duro_client_create(url, &client)) != DURO_OK) {
        failed("duro_client_create", rc);
        goto done;
    }
    if ((rc = duro_client_start(client, "hello-1", "Hello", "installed",
                                NULL)) != DURO_OK) {
        failed("duro_client_start", rc);
        goto done;
    }
    /* A deadline for a loaded machine, not an expected duration. */
    if ((rc = duro_client_wait(client, "hello-1", 120000, &info)) != DURO_OK) {
        failed("duro_client_wait", rc);
        goto done;
    }
    if (info->status != DURO_STATUS_COMPLETED || !info->output ||
        strcmp(info->output, "hello, installed") != 0) {
        fprintf(stderr,
                "consumer: instance hello-1 is %s with output '%s' and "
                "error '%s'; expected Completed with 'hello, installed'\n",
                duro_status_name(info->status),
                info->output ? info->output : "(null)",
                info->error ? info->error : "(null)");
        goto done;
    }
    result = 0;
done:
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return result;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer DATABASE-FILE\n");
        return 2;
    }
    if (!duro_version() || strcmp(duro_version(), DURO_VERSION_STRING) != 0 ||
        duro_version_number() != DURO_VERSION_NUMBER) {
        fprintf(stderr,
                "consumer: compiled against duro %s (%d), runs with %s (%d)\n",
                DURO_VERSION_STRING, DURO_VERSION_NUMBER,
                duro_version() ? duro_version() : "(null)",
                duro_version_number());
        return 1;
    }
    char url[4096];
    if (snprintf(url, sizeof(url), "sqlite:%s", argv[1]) >= (int)sizeof(url)) {
        fprintf(stderr, "consumer: path too long\n");
        return 2;
    }
    if (run(url) != 0)
        return 1;
    printf("ok: duro %s, hello-1 completed with 'hello, installed'\n",
           duro_version());
    return 0;
}
