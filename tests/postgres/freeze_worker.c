/* freeze_worker.c - the runtime test_pg_frozen stops: turn threads only (one;
 * no activity slots) on a PostgreSQL store, that stops its own process
 * (SIGSTOP) inside the first turn ack it makes once ARM_FILE exists - with
 * the instances' readiness rows locked by the ack's open transaction, as a
 * host frozen or cut off in the middle of an ack holds them. Runs until
 * SIGTERM, then shuts its runtime down and exits 0.
 *
 * freeze_worker URL ARM_FILE
 *
 * Exit codes: 0 stopped by SIGTERM, 1 setup failure, 2 usage. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "frozen_workload.h"
#include "providers/postgres/pg_provider.h"

static const char *arm_file;
static atomic_int frozen;

/* The provider's hook: inside the ack, its locks taken. */
static void freeze_in_ack(void *arg)
{
    (void)arg;
    if (atomic_load(&frozen) || access(arm_file, F_OK) != 0)
        return;
    atomic_store(&frozen, 1);
    raise(SIGSTOP); /* the whole process, every thread */
}

static int never_run(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: freeze_worker URL ARM_FILE\n");
        return 2;
    }
    arm_file = argv[2];
    /* SIGTERM is taken by sigwait below: blocked before any thread starts,
     * so every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    duro_provider *p = NULL;
    duro_error err;
    if (duro_provider_open(argv[1], &p, &err) != DURO_OK) {
        fprintf(stderr, "freeze_worker: open: %s\n", err.message);
        return 1;
    }
    duro__pg_hook_turn_ack_locked(p, freeze_in_ack, NULL);
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.orchestration_concurrency = 1;
    o.worker_concurrency = 0;
    o.poll_interval_ms = 50;
    if (duro_registry_create(&reg) != DURO_OK ||
        duro_registry_add_orchestration(reg, "Fan", NULL, frozen_fan, NULL) ||
        duro_registry_add_orchestration(reg, "Plain", NULL, frozen_plain,
                                        NULL) ||
        duro_registry_add_activity(reg, "Quick", never_run, NULL) ||
        duro_registry_add_activity(reg, "Slow", never_run, NULL) ||
        duro_registry_add_activity(reg, "Step", never_run, NULL) ||
        duro_runtime_create_with_provider(p, reg, &o, &rt) != DURO_OK ||
        duro_runtime_start(rt) != DURO_OK) {
        fprintf(stderr, "freeze_worker: setup: %s\n", duro_errmsg());
        return 1;
    }
    int sig = 0;
    while (sigwait(&set, &sig) != 0 || sig != SIGTERM)
        ;
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    duro_provider_close(p);
    return 0;
}
