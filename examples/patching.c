/* patching.c - changing an orchestration while instances are in flight,
 * and the replay test that says whether a change is safe.
 * 1. Version 1 of "Order" reserves stock, ships, then waits for the
 *    "delivered" event. order-1 is started and left waiting.
 * 2. Its history is exported (duro_client_export_history(), as
 *    `duro history --export order-1 > order-1.json` does) into a folder,
 *    and the folder is replayed with no store (duro_replay_file()) against
 *    two candidate versions 2, which charge the card before shipping:
 *    one that just adds the call (the replay reports the divergence: event
 *    id, what history holds, what the code asked) and one that puts it
 *    behind duro_patched(o, "charge-before-ship") (replays cleanly).
 *    replay_folder() is what a team runs in CI over histories kept from
 *    production, with its own registry.
 * 3. The patched version is deployed: order-1 finishes on the old path (no
 *    charge), a new order-2 takes the new one and its history holds a
 *    PatchMarker.
 * Run: ./patching [sqlite:path.db] */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

/* ---- activities: each says what it did ----------------------------------- */

static int step(duro_activity *a, const char *input, duro_result *out)
{
    char done[256];
    snprintf(done, sizeof(done), "%s(%s)", duro_activity_name(a), input);
    return duro_ok(out, done); /* copied */
}

/* ---- three versions of "Order" ------------------------------------------- */

static int finish(duro_orch *o, const char *done, duro_result *out)
{
    duro_task *delivered = duro_wait_event(o, "delivered");
    duro_await(o, delivered);
    return duro_ok(out, duro_sprintf(o, "%s, delivered", done));
}

/* Version 1: reserve, ship, wait for delivery. */
static int order_v1(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Reserve", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    t = duro_call_activity(o, "Ship", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return finish(o, duro_task_output(t), out);
}

/* Version 2 as first written: the charge added in place. Instances that
 * already shipped under version 1 would meet Charge where their history
 * has Ship: not safe. */
static int order_v2_unsafe(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Reserve", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    t = duro_call_activity(o, "Charge", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    t = duro_call_activity(o, "Ship", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return finish(o, duro_task_output(t), out);
}

/* Version 2 done safely: the new step behind a patch marker. Instances
 * that passed this point under version 1 get 0 and keep their path. */
static int order_v2(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Reserve", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    const char *charged = "not charged";
    if (duro_patched(o, "charge-before-ship")) {
        t = duro_call_activity(o, "Charge", input);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        charged = duro_task_output(t);
    }
    t = duro_call_activity(o, "Ship", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return finish(o, duro_sprintf(o, "%s, %s", charged, duro_task_output(t)),
                  out);
}

static duro_registry *registry_of(duro_orchestration_fn order)
{
    duro_registry *r = NULL;
    if (duro_registry_create(&r) != DURO_OK ||
        duro_registry_add_orchestration(r, "Order", NULL, order, NULL) !=
            DURO_OK ||
        duro_registry_add_activity(r, "Reserve", step, NULL) != DURO_OK ||
        duro_registry_add_activity(r, "Charge", step, NULL) != DURO_OK ||
        duro_registry_add_activity(r, "Ship", step, NULL) != DURO_OK) {
        fprintf(stderr, "patching: registry: %s\n", duro_errmsg());
        duro_registry_destroy(r);
        return NULL;
    }
    return r;
}

/* ---- the replay test a team runs in CI ----------------------------------- */

/* Replays every *.json file of `dir` (exported histories) against `reg`
 * and prints one line per file. Returns how many did not replay. */
static int replay_folder(const duro_registry *reg, const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return 1;
    }
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        duro_replay_divergence where;
        int rc = duro_replay_file(reg, path, NULL, &where);
        if (rc == DURO_OK) {
            printf("    %s: replays cleanly\n", e->d_name);
            continue;
        }
        failed++;
        printf("    %s: %s at execution %llu, event %llu\n      %s\n",
               e->d_name, duro_errname(rc),
               (unsigned long long)where.execution_id,
               (unsigned long long)where.event_id, duro_errmsg());
    }
    closedir(d);
    return failed;
}

/* ---- main's helpers ------------------------------------------------------ */

/* Waits (10 s at most) until the instance waits for "delivered". */
static int wait_until_waiting(duro_client *c, const char *id)
{
    for (int64_t end = duro_now_ms() + 10000; duro_now_ms() < end;) {
        duro_history *h = NULL;
        int waiting = 0;
        if (duro_client_read_history(c, id, 0, &h) == DURO_OK)
            for (size_t i = 0; i < h->count; i++)
                waiting |= h->events[i].kind == DURO_EVENT_EVENT_SUBSCRIBED;
        duro_history_free(h);
        if (waiting)
            return DURO_OK;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL); /* the poll's interval, not a guess */
    }
    fprintf(stderr, "patching: %s never waited for delivery\n", id);
    return DURO_TIMEOUT;
}

static int export_to(duro_client *c, const char *id, const char *dir)
{
    char *doc = NULL, path[4096];
    int rc = duro_client_export_history(c, id, &doc);
    if (rc != DURO_OK) {
        fprintf(stderr, "patching: export %s: %s\n", id, duro_errmsg());
        return rc;
    }
    snprintf(path, sizeof(path), "%s/%s.json", dir, id);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(doc, f) < 0) {
        perror(path);
        rc = DURO_FAILED;
    }
    if (f != NULL && fclose(f) != 0)
        rc = DURO_FAILED;
    duro_free(doc);
    return rc;
}

static int finish_order(duro_client *c, const char *id, const char *expected)
{
    duro_instance_info *info = NULL;
    int rc = duro_client_raise_event(c, id, "delivered", "yes");
    if (rc == DURO_OK)
        rc = duro_client_wait(c, id, 10000, &info);
    if (rc == DURO_OK) {
        printf("  %s: %s: %s\n", id, duro_status_name(info->status),
               info->output ? info->output : info->error);
        if (info->output == NULL || strcmp(info->output, expected) != 0) {
            fprintf(stderr, "patching: %s: expected \"%s\"\n", id, expected);
            rc = DURO_FAILED;
        }
    } else {
        fprintf(stderr, "patching: %s: %s\n", id, duro_errmsg());
    }
    duro_free(info);
    return rc;
}

/* A runtime of `order` on url, started. */
static int deploy(const char *url, duro_orchestration_fn order,
                  duro_registry **reg, duro_runtime **rt)
{
    *reg = registry_of(order);
    int rc =
        *reg == NULL ? DURO_FAILED : duro_runtime_create(url, *reg, NULL, rt);
    if (rc == DURO_OK)
        rc = duro_runtime_start(*rt);
    if (rc != DURO_OK && *reg != NULL)
        fprintf(stderr, "patching: runtime: %s\n", duro_errmsg());
    return rc;
}

static void undeploy(duro_registry **reg, duro_runtime **rt)
{
    duro_runtime_destroy(*rt);
    duro_registry_destroy(*reg);
    *rt = NULL;
    *reg = NULL;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:patching.db";
    char dir[] = "/tmp/duro-patching-XXXXXX"; /* the exported histories */
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    int rc = DURO_OK, dir_made = mkdtemp(dir) != NULL;

    if (!dir_made || (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "patching: setup failed: %s\n",
                dir_made ? duro_errmsg() : "mkdtemp");
        rc = DURO_FAILED;
        goto done;
    }
    /* Start over if an earlier run of this example left the instances. */
    duro_client_delete(client, "order-1", 1, NULL);
    duro_client_delete(client, "order-2", 1, NULL);

    printf("1. version 1 runs; order-1 ships and waits for delivery\n");
    if ((rc = deploy(url, order_v1, &reg, &rt)) != DURO_OK ||
        (rc = duro_client_start(client, "order-1", "Order", "book", NULL)) !=
            DURO_OK ||
        (rc = wait_until_waiting(client, "order-1")) != DURO_OK ||
        (rc = export_to(client, "order-1", dir)) != DURO_OK)
        goto done;
    undeploy(&reg, &rt); /* the process stops for the deploy */

    printf("2. the exported histories against the candidates\n");
    printf("  version 2, the charge added in place:\n");
    duro_registry *candidate = registry_of(order_v2_unsafe);
    int unsafe = candidate != NULL ? replay_folder(candidate, dir) : -1;
    duro_registry_destroy(candidate);
    printf("  version 2, the charge behind duro_patched():\n");
    candidate = registry_of(order_v2);
    int safe = candidate != NULL ? replay_folder(candidate, dir) : -1;
    duro_registry_destroy(candidate);
    if (unsafe != 1 || safe != 0) {
        fprintf(stderr, "patching: expected the unsafe change to diverge "
                        "and the patched one to replay\n");
        rc = DURO_FAILED;
        goto done;
    }

    printf("3. the patched version 2 is deployed\n");
    if ((rc = deploy(url, order_v2, &reg, &rt)) != DURO_OK ||
        (rc = finish_order(client, "order-1",
                           "not charged, Ship(book), delivered")) != DURO_OK ||
        (rc = duro_client_start(client, "order-2", "Order", "lamp", NULL)) !=
            DURO_OK ||
        (rc = wait_until_waiting(client, "order-2")) != DURO_OK ||
        (rc = finish_order(client, "order-2",
                           "Charge(lamp), Ship(lamp), delivered")) != DURO_OK)
        goto done;
    duro_history *h = NULL;
    if ((rc = duro_client_read_history(client, "order-2", 0, &h)) == DURO_OK) {
        printf("  order-2's history:\n");
        for (size_t i = 0; i < h->count; i++)
            printf("    #%llu %s %s\n",
                   (unsigned long long)h->events[i].event_id,
                   duro_event_kind_name(h->events[i].kind),
                   h->events[i].name ? h->events[i].name : "");
    }
    duro_history_free(h);

done:
    undeploy(&reg, &rt);
    duro_client_destroy(client);
    if (dir_made) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/order-1.json", dir);
        remove(path);
        rmdir(dir);
    }
    return rc == DURO_OK ? 0 : 1;
}
