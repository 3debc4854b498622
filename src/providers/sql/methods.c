/* methods.c - the provider methods a SQL store takes from the shared layer,
 * set in one place (each dialect's provider file sets the rest: its
 * wake-up, its close), and the test hooks' check
 * that a provider is a SQL store of a given dialect. Above the rest of
 * sql/ (it names their functions); called by the dialects' provider files
 * only. Any thread. */
#include <stdatomic.h>
#include <string.h>

#include "providers/sql/sql.h"

void duro__sql_fill_methods(duro_provider *m)
{
    m->version = DURO_PROVIDER_VERSION;
    m->fetch_orchestration_item = duro__sql_fetch_orchestration_item;
    m->ack_orchestration_item = duro__sql_ack_orchestration_item;
    m->abandon_orchestration_item = duro__sql_abandon_orchestration_item;
    m->renew_orchestration_item_lock = duro__sql_renew_orchestration_item_lock;
    m->enqueue_for_orchestrator = duro__sql_enqueue_for_orchestrator;
    m->fetch_work_item = duro__sql_fetch_work_item;
    m->renew_work_item_lock = duro__sql_renew_work_item_lock;
    m->ack_work_item = duro__sql_ack_work_item;
    m->ack_and_fetch_orchestration_item =
        duro__sql_ack_and_fetch_orchestration_item;
    m->ack_and_fetch_orchestration_items =
        duro__sql_ack_and_fetch_orchestration_items;
    m->ack_and_fetch_work_item = duro__sql_ack_and_fetch_work_item;
    m->abandon_work_item = duro__sql_abandon_work_item;
    m->check_work_item_locks = duro__sql_check_work_item_locks;
    m->read_activity_cancel_reason = duro__sql_read_activity_cancel_reason;
    m->read_history = duro__sql_read_history;
    m->latest_execution_id = duro__sql_latest_execution_id;
    m->get_instance = duro__sql_get_instance;
    m->list_instances = duro__sql_list_instances;
    m->count_messages = duro__sql_count_messages;
    m->delete_instance = duro__sql_delete_instance;
    m->prune_executions = duro__sql_prune_executions;
    m->set_instance_problem = duro__sql_set_instance_problem;
    m->read_store_stats = duro__sql_read_store_stats;
    m->query_instances = duro__sql_query_instances;
    m->list_control_events = duro__sql_list_control_events;
    m->cancel_instances = duro__sql_cancel_instances;
    m->cancel_matching = duro__sql_cancel_matching;
    m->purge_instances = duro__sql_purge_instances;
    m->control_instances = duro__sql_control_instances;
    m->control_matching = duro__sql_control_matching;
}

duro__sql_store *duro__sql_store_of(duro_provider *p, const char *dialect)
{
    /* name and version are version 1's; read_store_stats exists from 4 */
    if (p == NULL || p->name == NULL || strcmp(p->name, dialect) != 0 ||
        p->version < 4 || p->read_store_stats != duro__sql_read_store_stats)
        return NULL;
    duro__sql_store *st = (duro__sql_store *)p;
    return strcmp(st->dialect->name, dialect) == 0 ? st : NULL;
}

int duro__sql_open_done(duro_provider *base, int rc, duro_provider **out)
{
    if (rc != DURO_OK) {
        base->close(base);
        return rc;
    }
    *out = base;
    return DURO_OK;
}

void duro__sql_inject_fault(duro_provider *p, const char *dialect,
                            uint64_t nth_step, int retryable)
{
    duro__sql_store *st = duro__sql_store_of(p, dialect);
    if (st == NULL)
        return;
    atomic_store(&st->fault_retryable, retryable != 0);
    atomic_store(&st->fault_at,
                 nth_step == 0 ? 0 : atomic_load(&st->steps) + nth_step);
}

uint64_t duro__sql_statements_prepared(duro_provider *p, const char *dialect)
{
    duro__sql_store *st = duro__sql_store_of(p, dialect);
    return st != NULL ? atomic_load(&st->statements_prepared) : 0;
}
