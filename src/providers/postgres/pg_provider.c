/* pg_provider.c - opens (the rest of sql/methods.c's duro__sql_open: the
 * connection pool, schema migration, the notifier of pg_wake.c) and closes
 * the PostgreSQL provider, and the test hooks of what it owns. Any method
 * may be called from any thread: each takes a connection from the pool for
 * the length of its transaction. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/providers.h"
#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"

/* ---- open and close ----------------------------------------------------- */

static void pg_close(duro_provider *base)
{
    duro__pg_provider *p = (duro__pg_provider *)base;
    if (p == NULL)
        return;
    duro__pg_notifier_flush(p);
    for (int i = 0; i < p->conn_count; i++)
        duro__pg_conn_close(&p->conns[i]);
    duro__free(p->conns);
    pthread_mutex_destroy(&p->combine_lock);
    pthread_cond_destroy(&p->combine_cond);
    pthread_mutex_destroy(&p->release_lock);
    duro__free(p->acked);
    duro__free(p->suspects);
    duro__pg_config_free(&p->cfg);
    duro__sql_store_free(&p->sql);
}

static int open_pool(duro__pg_provider *p, duro_error *err)
{
    int n = p->cfg.pool;
    p->conns = duro__calloc((size_t)n, sizeof(*p->conns));
    if (p->conns == NULL || duro__sql_pool_reserve(&p->sql.pool, n) != DURO_OK)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        /* the first one checks that sessions are not pooled by
         * transaction, then creates or migrates the schema */
        int rc = i == 0 ? duro__pg_conn_open_checked(p, &p->conns[i], err)
                        : duro__pg_conn_open(p, &p->conns[i], err);
        if (rc != DURO_OK)
            return rc;
        p->conn_count++;
        if (i == 0 && (rc = duro__pg_migrate(p, &p->conns[0], err)) != DURO_OK)
            return rc;
        duro__sql_pool_give(&p->sql.pool, &p->conns[i]);
    }
    return DURO_OK;
}

/* duro__sql_open's open: the pool (its first connection creates or
 * migrates the schema), the notifier and its listener. */
static int open_store(duro__sql_store *st, int concurrency, duro_error *err)
{
    duro__pg_provider *p = (duro__pg_provider *)st;
    /* One connection per thread that may use the store at once, so none
     * waits for another's; the URL's pool= overrides. */
    if (!p->cfg.pool_given && concurrency > 0)
        p->cfg.pool = DURO__MIN(concurrency, DURO__PG_POOL_MAX);
    p->sql.base.wait_for_cancellations = duro__sql_wait_for_cancellations;
    p->reconnected = duro__pg_reconnected;
    pthread_mutex_init(&p->combine_lock, NULL);
    duro__cond_init_monotonic(&p->combine_cond);
    pthread_mutex_init(&p->release_lock, NULL);
    int rc = open_pool(p, err);
    if (rc == DURO_OK && duro__pg_notifier_attach(p) != DURO_OK)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    return rc;
}

int duro__pg_open(const char *url, int concurrency, duro_provider **out,
                  duro_error *err)
{
    return duro__sql_open(&duro__pg_dialect, url, concurrency, open_store,
                          pg_close, out, err);
}

/* ---- test hooks ------------------------------------------------------------
 */

static duro__pg_provider *hook_target(duro_provider *p)
{
    return (duro__pg_provider *)duro__sql_store_of(p, "postgres");
}

uint64_t duro__pg_statements_prepared(duro_provider *base)
{
    return duro__sql_statements_prepared(base, "postgres");
}

void duro__pg_inject_fault(duro_provider *base, uint64_t nth_step,
                           int retryable)
{
    duro__sql_inject_fault(base, "postgres", nth_step, retryable);
}

void duro__pg_inject_commit_loss(duro_provider *base, uint64_t nth_commit,
                                 int committed)
{
    duro__pg_provider *p = hook_target(base);
    if (p == NULL)
        return;
    atomic_store(&p->commit_loss_committed, committed != 0);
    atomic_store(&p->commit_loss_at,
                 nth_commit == 0 ? 0 : atomic_load(&p->commits) + nth_commit);
}

uint64_t duro__pg_commit_losses(duro_provider *base)
{
    duro__pg_provider *p = hook_target(base);
    return p != NULL ? atomic_load(&p->commit_losses) : 0;
}

void duro__pg_hook_turn_ack_locked(duro_provider *base, void (*fn)(void *arg),
                                   void *arg)
{
    duro__pg_provider *p = hook_target(base);
    if (p == NULL)
        return;
    p->turn_ack_locked = fn;
    p->turn_ack_locked_arg = arg;
}

const char *duro__pg_schema(duro_provider *base)
{
    duro__pg_provider *p = hook_target(base);
    return p != NULL ? p->cfg.schema : NULL;
}

uint64_t duro__pg_combined_acks_max(duro_provider *base)
{
    return atomic_load(&((duro__pg_provider *)base)->combine_max);
}

/* ---- can this role write the store? ---------------------------------------
 * Asked once by a runtime when it is created: a runtime on a store it
 * cannot write would start and then retry every fetch for ever. One query,
 * reads only. A client that only reads is never asked. */

int duro__pg_check_writable(duro_provider *base, duro_error *err)
{
    duro__pg_provider *p = hook_target(base);
    if (p == NULL)
        return DURO_OK;
    char sql[768];
    /* the schema was validated as an identifier: no quote to escape */
    snprintf(sql, sizeof(sql),
             "SELECT pg_is_in_recovery(), "
             "current_setting('transaction_read_only') = 'on', current_user, "
             "COALESCE((SELECT bool_and(has_table_privilege(c.oid, 'INSERT') "
             "AND has_table_privilege(c.oid, 'UPDATE') AND "
             "has_table_privilege(c.oid, 'DELETE')) FROM pg_class c JOIN "
             "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
             "'%s' AND c.relkind = 'r'), true)",
             p->cfg.schema);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    PGresult *res = PQexec(c->pg, sql);
    int rc = DURO_OK;
    if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK &&
        PQntuples(res) == 1) {
        const char *role = PQgetvalue(res, 0, 2);
        if (PQgetvalue(res, 0, 0)[0] == 't')
            rc = duro_error_set(err, DURO_STORAGE, 0,
                                "postgres %s: the server is a standby (in "
                                "recovery) and cannot be written; a runtime "
                                "needs to write its store (connect it to "
                                "the primary)",
                                p->cfg.display);
        else if (PQgetvalue(res, 0, 1)[0] == 't')
            rc = duro_error_set(err, DURO_STORAGE, 0,
                                "postgres %s: role \"%s\" opens read-only "
                                "transactions (default_transaction_read_only "
                                "is on); a runtime needs to write its store",
                                p->cfg.display, role);
        else if (PQgetvalue(res, 0, 3)[0] != 't')
            rc = duro_error_set(err, DURO_STORAGE, 0,
                                "postgres %s: role \"%s\" lacks INSERT, "
                                "UPDATE or DELETE on the tables of schema "
                                "\"%s\"; a runtime needs to write its store "
                                "(see the GRANTs in docs/postgres-provider.md)",
                                p->cfg.display, role, p->cfg.schema);
    }
    /* A failed query says nothing about rights: the runtime's own
     * statements will report what is wrong. */
    PQclear(res);
    duro__pg_reader_release(p, c);
    return rc;
}
