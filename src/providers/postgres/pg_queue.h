/* pg_queue.h - what the queue files of the PostgreSQL provider share (the
 * queues' common part is sql/queue.c's), from the bottom up (each file
 * calls only the ones above it in this list): pg_arrays.c (array literals
 * of many rows), pg_rows.c (rows read into items), pg_release.c (locks
 * kept by tokens nobody will use again), pg_ack.c (PostgreSQL's part of a
 * turn's ack, and the writes a batch of turns gathers), pg_batch.c (the
 * set-based acks and claims of many turns), pg_queue.c (the orchestrator
 * queue), pg_combine.c (activity acks of many threads in one statement),
 * pg_work.c (the worker queue). Thread rules: each file's. */
#ifndef DURO_PG_QUEUE_H
#define DURO_PG_QUEUE_H

#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"
#include "providers/providers.h"

static inline duro__pg_provider *duro__pg_of(duro_provider *p)
{
    return (duro__pg_provider *)p;
}

/* ---- pg_arrays.c: array literals --------------------------------------- */

void duro__pg_cols_open(duro__strbuf *b, size_t n);
int duro__pg_cols_close(duro__strbuf *b, size_t n);
void duro__pg_cols_free(duro__strbuf *b, size_t n);
void duro__pg_col_num(duro__strbuf *b, int64_t v);
void duro__pg_col_text(duro__strbuf *b, const char *v);
int duro__pg_run_cols(duro__pg_provider *p, duro__pg_conn *c,
                      duro__pg_statement *s, duro__strbuf *b, size_t n);
void duro__pg_append_event_columns(duro__strbuf *col, const duro_event *ev);

/* ---- pg_rows.c: rows read into items ----------------------------------- */

int duro__pg_append_event(duro__pg_provider *p, duro_arena *a,
                          duro__pg_statement *s, duro_event **events,
                          size_t *count, size_t *cap);
int duro__pg_read_claimed_meta(duro_orch_item *item, duro__pg_statement *s);
int duro__pg_load_claimed_history(duro__pg_provider *p, duro__pg_conn *c,
                                  duro_orch_item *item,
                                  const duro_history_cache *cache,
                                  const char *op, duro_error *err);
int duro__pg_append_claimed_message(duro__pg_provider *p, duro_orch_item *item,
                                    duro__pg_statement *s, size_t *cap);
int duro__pg_read_claimed_messages(duro__pg_provider *p, duro__pg_conn *c,
                                   duro__pg_statement *s, duro_orch_item *item,
                                   const char *op, duro_error *err);
void duro__pg_bind_claim(duro__pg_conn *c, duro__pg_statement *s,
                         const char *token_hex, int64_t now, int64_t until);
int duro__pg_claimed_nothing(duro__pg_provider *p, duro__pg_statement *s);

/* ---- pg_release.c: releases -------------------------------------------- */

void duro__pg_keep_release(duro__pg_provider *p, char kind, const char *text,
                           int64_t delay_ms);
void duro__pg_keep_unknown_claim(duro__pg_provider *p, char kind,
                                 const char *hex, int rc,
                                 const duro_error *err);
void duro__pg_note_async_acks(duro__pg_provider *p, const char *const *tokens,
                              size_t n);
void duro__pg_release_kept(duro__pg_provider *p);

/* ---- pg_ack.c: an ack's writes, at once or gathered ------------------ */

/* ---- the statements a batch of turns shares
 * ack_and_fetch_orchestration_items writes the executions, events and work
 * items, and metadata of all its turns in one statement each
 * (EXEC_CREATE_MANY, HISTORY_INSERT_BATCH, META_WRITE_MANY) and releases all
 * their locks in one (READY_ACK_SETTLE_MANY): each column a PostgreSQL array
 * literal bound as one parameter.
 *
 * The batch must change what one-by-one acks in its order would. Within a
 * turn's own rows the order of its writes does not matter; across turns
 * the only write that reads another instance's metadata is a message to it
 * (enqueue_outbound: a start meets an existing instance, a cancel request
 * records itself on a live one), so the metadata gathered so far is
 * written before each such message. */

enum {
    DURO__PG_BATCH_EVENT_COLUMNS = 21,
    DURO__PG_BATCH_WORK_COLUMNS = 7,
    DURO__PG_BATCH_SETTLE_COLUMNS = 3,
    DURO__PG_BATCH_EXEC_COLUMNS = 5,
    DURO__PG_BATCH_META_COLUMNS = 19
};

typedef struct duro__pg_batch_cols {
    duro__strbuf ev[DURO__PG_BATCH_EVENT_COLUMNS]; /* instance, execution,
                                       then as HISTORY_INSERT_MANY's arrays */
    duro__strbuf wq[DURO__PG_BATCH_WORK_COLUMNS];
    duro__strbuf st[DURO__PG_BATCH_SETTLE_COLUMNS]; /* instance, token,
                                                       ready id */
    duro__strbuf ex[DURO__PG_BATCH_EXEC_COLUMNS];   /* as EXEC_CREATE_MANY's
                                                       arrays */
    duro__strbuf mt[DURO__PG_BATCH_META_COLUMNS];   /* as META_WRITE_MANY's
                                                       arrays */
    size_t events, works, execs, metas;
} duro__pg_batch_cols;

void duro__pg_batch_open(duro__pg_batch_cols *b);
void duro__pg_batch_free(duro__pg_batch_cols *b);
int duro__pg_flush_batch_metas(duro__pg_provider *p, duro__pg_conn *c,
                               duro__pg_batch_cols *b, int64_t now,
                               const char *op, duro_error *err);
int duro__pg_flush_batch_rows(duro__pg_provider *p, duro__pg_conn *c,
                              duro__pg_batch_cols *b, int64_t now,
                              const char *op, duro_error *err);
/* A turn's events in one statement (one event: HISTORY_INSERT): the
 * dialect's insert_events. */
int duro__pg_insert_events(duro__pg_provider *p, duro__pg_conn *c,
                           const char *instance_id, uint64_t execution_id,
                           const duro_event *events, size_t count,
                           const char *op, duro_error *err);
/* A turn's writes gathered into a batch's statements: its checks, history
 * and work items (first), then its cancellations, outbound messages and
 * metadata (other). */
int duro__pg_ack_first_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__sql_lock_holder *h,
                              const duro_orch_ack *ack, duro__pg_batch_cols *b,
                              const char *op, duro_error *err);
int duro__pg_ack_other_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__sql_lock_holder *h,
                              const duro_orch_ack *ack, int64_t now,
                              duro__pg_batch_cols *b, const char *op,
                              duro_error *err);

/* ---- pg_batch.c: the set-based acks and claims of many turns ----------- */

int duro__pg_ack_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     size_t n, const char *const *tokens,
                                     const duro_orch_ack *acks, int64_t now,
                                     size_t *queued, const char *op,
                                     duro_error *err);
int duro__pg_fetch_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                       duro__pg_stmt_id claim, const char *hex,
                                       int64_t lock_timeout_ms,
                                       const duro_history_cache *cache,
                                       int64_t now, size_t max,
                                       duro_orch_item **next, size_t *got,
                                       const char *op, duro_error *err);

/* ---- pg_combine.c: activity acks of many threads ----------------------- */

/* ack_work_item's one-statement path (a completion that only queues a
 * message): alone without `next`, combined with other threads' acks with
 * it. */
int duro__pg_ack_work_at_once(duro__pg_provider *p, int64_t id,
                              const char *lock_token,
                              const duro_work_item *completion,
                              int64_t lock_timeout_ms, duro_worker_item **next,
                              const char *op, duro_error *err);

#endif
