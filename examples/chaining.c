/* chaining.c - function chaining: an orchestration calls three activities in
 * sequence, each consuming the previous one's output ("fetch order" ->
 * "reserve stock" -> "ship"). If the process dies between two steps, the
 * next run replays the recorded results and continues where it stopped.
 * Run: ./chaining [sqlite:path.db] */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "duro.h"

/* ---- activities: ordinary code; here they only build strings ------------ */

/* "42" -> "order=42 item=widget qty=3" (a real one would query a database). */
static int fetch_order(duro_activity *a, const char *order_id, duro_result *out)
{
    (void)a;
    char order[128];
    snprintf(order, sizeof(order), "order=%s item=widget qty=3", order_id);
    return duro_ok(out, order);
}

/* Appends a reservation number to the order it is given. */
static int reserve_stock(duro_activity *a, const char *order, duro_result *out)
{
    (void)a;
    int id = 0, qty = 0;
    char item[32];
    if (sscanf(order, "order=%d item=%31s qty=%d", &id, item, &qty) != 3)
        return duro_failf(out, "cannot parse order '%s'", order);
    char reserved[160];
    snprintf(reserved, sizeof(reserved), "%s reservation=RSV-%d", order, id);
    return duro_ok(out, reserved);
}

/* Ships a reserved order and returns a human-readable receipt. */
static int ship(duro_activity *a, const char *reserved, duro_result *out)
{
    (void)a;
    int id = 0, qty = 0;
    char item[32], reservation[32];
    if (sscanf(reserved, "order=%d item=%31s qty=%d reservation=%31s", &id,
               item, &qty, reservation) != 4)
        return duro_failf(out, "cannot parse reservation '%s'", reserved);
    char receipt[200];
    snprintf(receipt, sizeof(receipt),
             "order %d: %d x %s shipped (%s, tracking TRK-%05d)", id, qty, item,
             reservation, id * 7);
    return duro_ok(out, receipt);
}

/* ---- the orchestration: each step's output is the next step's input ----- */

static int process_order(duro_orch *o, const char *order_id, duro_result *out)
{
    duro_task *order = duro_call_activity(o, "FetchOrder", order_id);
    if (duro_await(o, order) != DURO_OK)
        return duro_failf(out, "fetch: %s", duro_task_error(order));

    duro_task *reserved =
        duro_call_activity(o, "ReserveStock", duro_task_output(order));
    if (duro_await(o, reserved) != DURO_OK)
        return duro_failf(out, "reserve: %s", duro_task_error(reserved));

    duro_task *shipped =
        duro_call_activity(o, "Ship", duro_task_output(reserved));
    if (duro_await(o, shipped) != DURO_OK)
        return duro_failf(out, "ship: %s", duro_task_error(shipped));

    return duro_ok(out, duro_task_output(shipped));
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:chaining.db";
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *client = NULL;
    duro_instance_info *info = NULL;
    int rc;

    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(
             reg, "ProcessOrder", NULL, process_order, NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "FetchOrder", fetch_order,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "ReserveStock", reserve_stock,
                                         NULL)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Ship", ship, NULL)) != DURO_OK ||
        (rc = duro_runtime_create(url, reg, NULL, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fprintf(stderr, "chaining: setup failed: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }

    /* idempotent: running the example again on the same file reuses the
     * finished instance instead of failing with DURO_ALREADY_EXISTS. */
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1;
    rc = duro_client_start(client, "order-42", "ProcessOrder", "42", &so);
    if (rc == DURO_OK)
        rc = duro_client_wait(client, "order-42", 10000, &info);
    if (rc != DURO_OK) {
        fprintf(stderr, "chaining: order-42: %s (%s)\n", duro_errname(rc),
                duro_errmsg());
        goto done;
    }
    printf("order-42: %s\n", duro_status_name(info->status));
    if (info->status == DURO_STATUS_COMPLETED) {
        printf("  %s\n", info->output);
        if (info->output == NULL ||
            strcmp(info->output, "order 42: 3 x widget shipped (RSV-42, "
                                 "tracking TRK-00294)") != 0) {
            fprintf(stderr, "chaining: unexpected output\n");
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
