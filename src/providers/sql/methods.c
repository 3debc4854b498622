/* methods.c - the provider methods a SQL store takes from the shared layer,
 * set in one place (each dialect's provider file sets the rest:
 * PostgreSQL's wait_for_cancellations), the start and end of a dialect's
 * open and the end of its close, and the test hooks' check
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
    m->wait_for_work = duro__sql_wait_for_work;
    m->wake = duro__sql_wake;
    m->next_due = duro__sql_next_due_any;
    m->register_runtime = duro__sql_register_runtime;
    m->list_runtimes = duro__sql_list_runtimes;
    m->remove_runtime = duro__sql_remove_runtime;
    m->pass_orchestration_item = duro__sql_pass_orchestration_item;
    m->reset_instance = duro__sql_reset_instance;
    m->create_schedule = duro__sql_create_schedule;
    m->update_schedule = duro__sql_update_schedule;
    m->delete_schedule = duro__sql_delete_schedule;
    m->get_schedule = duro__sql_get_schedule;
    m->list_schedules = duro__sql_list_schedules;
    m->due_schedules = duro__sql_due_schedules;
    m->apply_schedule = duro__sql_apply_schedule;
    m->list_schedule_fires = duro__sql_list_schedule_fires;
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

/* open's start: NULL with err set when it fails (nothing stays). */
static duro__sql_store *open_start(const duro__sql_dialect *d,
                                   void (*close)(duro_provider *base),
                                   const char *url, duro_provider **out,
                                   duro_error *err)
{
    if (out == NULL) {
        duro_error_set(err, DURO_INVALID, 0, "out is NULL");
        return NULL;
    }
    *out = NULL;
    duro__sql_store *st = duro__calloc(1, d->provider_size);
    if (st == NULL) {
        duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        return NULL;
    }
    if (d->configure(st, url, err) != DURO_OK) {
        duro__free(st);
        return NULL;
    }
    duro__sql_fill_methods(&st->base);
    st->base.name = d->name;
    st->base.turn_batch = d->turn_batch;
    st->base.close = close;
    st->dialect = d;
    duro__sql_pool_init(&st->pool);
    return st;
}

void duro__sql_store_free(duro__sql_store *st)
{
    duro__sql_notify_detach(st);
    duro__sql_pool_destroy(&st->pool);
    duro__free(st);
}

int duro__sql_open(const duro__sql_dialect *d, const char *url, int concurrency,
                   int (*open)(duro__sql_store *st, int concurrency,
                               duro_error *err),
                   void (*close)(duro_provider *base), duro_provider **out,
                   duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = open_start(d, close, url, out, err);
    if (st == NULL)
        return err->code;
    int rc = open(st, concurrency, err);
    if (rc != DURO_OK) {
        close(&st->base);
        return rc;
    }
    *out = &st->base;
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
