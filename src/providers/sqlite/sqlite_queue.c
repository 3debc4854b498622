/* sqlite_queue.c - what is SQLite's own on its two queues: the claim of an
 * instance (instance locks live in orchestrator_ready) and the dialect's
 * ack_turns, ack_work and fetch_work; what both stores do alike is
 * sql/queue.c's. Every write is one BEGIN IMMEDIATE transaction on the
 * writer connection, rolled back whole on any failure. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sqlite/sqlite_internal.h"

#define TOKEN_MAX 64 /* "o<rowid>.<32 hex>" */

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

/* ---- shared pieces ------------------------------------------------------
 * Lock tokens, input checks and the writes both stores make alike are
 * sql/queue.c's. */

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* Fills the locked instance's messages, metadata and history into item. */
static int load_orch_item(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          duro_orch_item *item, int64_t now,
                          const duro_history_cache *cache, const char *op,
                          duro_error *err)
{
    duro_arena *a = item->arena;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_FETCHED, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    duro__sqlite_bind_i64(c, s, 2, now);
    duro__sqlite_bind_text(c, s, 3, item->lock_token);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (item->message_count == cap) {
            item->messages =
                duro__sql_arena_grow(a, item->messages, item->message_count,
                                     &cap, sizeof(duro_work_item));
            if (item->messages == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        /* OQ_FETCHED's columns: DURO__SQLITE_QUEUE_COLUMNS, the run times
         * 17 and 18 */
        if (duro__sql_read_message(&p->sql, a, (duro__sql_stmt *)s, 17,
                                   &item->messages[item->message_count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        uint32_t fetches = (uint32_t)sqlite3_column_int64(s, 19);
        item->attempt = DURO__MAX(item->attempt, fetches);
        item->message_count++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);

    item->status = DURO_STATUS_NOT_FOUND;
    s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_FETCH_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_ROW) {
        item->status = sqlite3_column_int(s, 0);
        item->execution_id = (uint64_t)sqlite3_column_int64(s, 1);
        item->parent_execution = (uint64_t)sqlite3_column_int64(s, 5);
        item->parent_event_id = (uint64_t)sqlite3_column_int64(s, 6);
        item->cancel_requested_ms = sqlite3_column_int64(s, 8);
        if (item->execution_id > 0) /* the execution's events: 0 with no
                                       executions row */
            item->history_total = (uint64_t)sqlite3_column_int64(s, 12);
        if (duro__sqlite_column_text(a, s, 2, &item->name) ||
            duro__sqlite_column_text(a, s, 3, &item->version) ||
            duro__sqlite_column_text(a, s, 4, &item->parent_instance) ||
            duro__sqlite_column_text(a, s, 7, &item->custom_status) ||
            duro__sqlite_column_text(a, s, 9, &item->cancel_reason) ||
            duro__sqlite_column_text(a, s, 10, &item->cancelled_by) ||
            duro__sqlite_column_text(a, s, 11, &item->last_problem))
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    } else if (rc != SQLITE_DONE) {
        return duro__sqlite_error(c, rc, op, err);
    }
    sqlite3_reset(s);

    item->history_offset = duro__history_offset(
        cache, item->instance_id, item->execution_id, item->history_total);
    if (item->history_total == item->history_offset)
        return DURO_OK;
    return duro__sql_read_events(
        &p->sql, (duro__sql_conn *)c, a, item->instance_id, item->execution_id,
        item->history_offset, &item->history, &item->history_count, op, err);
}

/* duro__sql_fetch_turn's claim: the next ready instance (READY_NEXT), its
 * visible messages tagged with a fresh token (OQ_TAG) and its ready row
 * locked (READY_LOCK), then its metadata and history. */
static int claim_turn(duro__sql_store *st, duro__sql_conn *sc, void *arg,
                      duro_orch_item *item, int64_t now, int64_t until,
                      const duro_history_cache *cache, int *got, int *repair,
                      int64_t *ready_id, const char *op, duro_error *err)
{
    (void)arg;
    duro__sqlite_provider *p = (duro__sqlite_provider *)st;
    duro__sqlite_conn *c = (duro__sqlite_conn *)sc;
    duro_arena *a = item->arena;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_READY_NEXT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_i64(c, s, 1, now);
    int step = duro__sqlite_step(p, c, s);
    if (step == SQLITE_DONE)
        return DURO_OK;
    if (step != SQLITE_ROW)
        return duro__sqlite_error(c, step, op, err);
    int64_t rowid = sqlite3_column_int64(s, 0);
    if (duro__sqlite_column_text(a, s, 1, &item->instance_id) != 0)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    sqlite3_reset(s);

    char token_hex[33], token[TOKEN_MAX];
    duro__random_token(token_hex);
    snprintf(token, sizeof(token), "o%lld.%s", (long long)rowid, token_hex);
    item->lock_token = duro_arena_strdup(a, token);
    if (item->lock_token == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_TAG, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    duro__sqlite_bind_text(c, s, 2, item->lock_token);
    duro__sqlite_bind_i64(c, s, 3, now);
    int rc = duro__sqlite_run(p, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (sqlite3_changes(c->db) == 0) {
        *repair = 1; /* ready, but nothing visible */
        *ready_id = rowid;
        return DURO_OK;
    }
    s = duro__sqlite_stmt(p, c, DURO__SQL_READY_LOCK, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_i64(c, s, 1, rowid);
    duro__sqlite_bind_text(c, s, 2, item->lock_token);
    duro__sqlite_bind_i64(c, s, 3, until);
    if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
        return rc;
    rc = load_orch_item(p, c, item, now, cache, op, err);
    *got = rc == DURO_OK;
    return rc;
}

static int fetch_orch_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
                                     int64_t lock_timeout_ms,
                                     const duro_history_cache *cache,
                                     int64_t now, duro_orch_item **out,
                                     const char *op, duro_error *err)
{
    return duro__sql_fetch_turn(&p->sql, (duro__sql_conn *)c, claim_turn, NULL,
                                lock_timeout_ms, cache, now, out, op, err);
}

/* ---- orchestrator queue: ack ----------------------------------------------
 */

/* The acks of n turns, then up to max_next fetches, as a grouped write: it
 * shares its transaction with the writes other threads make at the same
 * time (group commit, duro__sqlite_write_grouped). */
typedef struct turns_ack {
    duro__sqlite_grouped g;   /* first member */
    const duro__sql_turns *t; /* the caller's (it waits for the outcome) */
    int64_t now;              /* the caller's, read before it queued */
    size_t got;               /* fetched into t->next */
    size_t workers, outbound; /* what the commit makes fetchable */
} turns_ack;

static int turns_ack_run(duro__sqlite_provider *p, duro__sqlite_conn *c,
                         duro__sqlite_grouped *g, int *clean, duro_error *err)
{
    turns_ack *a = (turns_ack *)g;
    const duro__sql_turns *t = a->t;
    a->got = a->workers = a->outbound = 0;
    int rc = DURO_OK;
    for (size_t i = 0; i < t->n && rc == DURO_OK; i++) {
        int queued = 0;
        int64_t rowid;
        duro__sql_parse_token(t->lock_tokens[i], 'o', &rowid);
        rc = duro__sql_ack_turn(&p->sql, (duro__sql_conn *)c, rowid,
                                t->lock_tokens[i], &t->acks[i], a->now, &queued,
                                t->op, err);
        /* a lost lock is found before the ack writes anything */
        *clean = rc == DURO_LOCK_LOST && i == 0;
        a->workers += t->acks[i].worker_item_count;
        a->outbound += t->acks[i].orchestrator_item_count + (queued ? 1 : 0);
    }
    while (rc == DURO_OK && a->got < t->max_next) {
        duro_orch_item *item = NULL;
        rc = fetch_orch_in_transaction(p, c, t->lock_timeout_ms, t->cache,
                                       a->now, &item, t->op, err);
        if (item == NULL)
            break;
        t->next[a->got++] = item;
    }
    return rc;
}

static void turns_ack_undo(duro__sqlite_grouped *g)
{
    turns_ack *a = (turns_ack *)g;
    for (size_t i = 0; i < a->got; i++) {
        duro_orch_item_free(a->t->next[i]);
        a->t->next[i] = NULL;
    }
    a->got = 0;
}

/* The dialect's ack_turns (sql/queue.c checked the tokens and acks): the
 * acks one by one, then up to max_next fetches, in one transaction, shared
 * with other threads' writes. */
int duro__sqlite_ack_turns(duro_provider *base, const duro__sql_turns *t,
                           duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    turns_ack a = {
        .g = {.run = turns_ack_run, .undo = turns_ack_undo, .err = err},
        .t = t,
        .now = duro__wall_ms()};
    for (size_t i = 0; i < t->n && !a.g.urgent; i++)
        a.g.urgent = t->acks[i].cancelled_activity_count > 0;
    int rc = duro__sqlite_write_grouped(p, t->op, &a.g);
    if (rc != DURO_OK)
        return rc;
    duro__sql_notify_signal(&p->sql, DURO_QUEUE_WORKER, a.workers);
    duro__sql_notify_signal(&p->sql, DURO_QUEUE_ORCHESTRATOR, a.outbound);
    *t->next_count = a.got;
    return DURO_OK;
}

/* ---- orchestrator queue: abandon, renew, enqueue ---------------------------
 */

/* ---- worker queue ----------------------------------------------------------
 */

/* The row WQ_NEXT returned, into a worker item: the claim (WQ_CLAIM)
 * adds one to fetch_count and sets the token. */
static int read_next_work(duro_arena *a, sqlite3_stmt *s, const char *token,
                          duro_worker_item *w)
{
    duro_work_item *it = &w->item;
    it->kind = DURO_WORK_ACTIVITY_EXECUTE;
    it->execution_id = (uint64_t)sqlite3_column_int64(s, 1);
    it->source_id = (uint64_t)sqlite3_column_int64(s, 2);
    it->attempt = (uint32_t)sqlite3_column_int64(s, 6);
    w->attempt = (uint32_t)sqlite3_column_int64(s, 7) + 1;
    if (duro__sqlite_column_text(a, s, 0, &it->instance_id) ||
        duro__sqlite_column_text(a, s, 3, &it->name) ||
        duro__sqlite_column_text(a, s, 4, &it->version) ||
        duro__sqlite_column_text(a, s, 5, &it->payload) ||
        (w->lock_token = duro_arena_strdup(a, token)) == NULL)
        return -1;
    return 0;
}

/* The claim of the next work item inside an open write transaction: the
 * row visible at `now` (WQ_NEXT), then its lock by primary key (WQ_CLAIM).
 * Two statements, not one UPDATE ... RETURNING: SQLite runs that through
 * an ephemeral table it builds at every run (13 us per fetch against 2). */
static int fetch_work_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
                                     int64_t lock_timeout_ms, int64_t now,
                                     duro_worker_item **out, const char *op,
                                     duro_error *err)
{
    *out = NULL;
    duro_arena *a = NULL;
    duro_worker_item *w = NULL;
    int64_t id = 0;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_NEXT, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        /* visible by the caller's `now` (read before it waited for the
         * write lock) */
        duro__sqlite_bind_i64(c, s, 1, now);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW) {
            char token_hex[33], token[64];
            duro__random_token(token_hex);
            id = sqlite3_column_int64(s, 8);
            snprintf(token, sizeof(token), "w%lld.%s", (long long)id,
                     token_hex);
            a = duro_arena_create();
            w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
            if (w == NULL ||
                (w->arena = a, read_next_work(a, s, token, w) != 0))
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        } else if (step != SQLITE_DONE) {
            rc = duro__sqlite_error(c, step, op, err);
        }
        sqlite3_reset(s);
    }
    if (rc == DURO_OK && w != NULL) {
        /* locked from this moment: a wait never shortens the lock (a lock
         * born expired was taken by the next fetch) */
        s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_CLAIM, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__sqlite_bind_i64(c, s, 1, id);
            duro__sqlite_bind_text(c, s, 2, w->lock_token);
            duro__sqlite_bind_i64(
                c, s, 3, duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms));
            rc = duro__sqlite_run(p, c, s, op, err);
        }
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

/* The dialect's fetch_work: the claim in a write transaction. */
int duro__sqlite_fetch_work(duro_provider *base, int64_t lock_timeout_ms,
                            duro_worker_item **out, const char *op,
                            duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sql_note_fetch(&p->sql, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_worker_item *w = NULL;
    rc = fetch_work_in_transaction(p, c, lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

/* An activity's ack, and with `fetch` the claim of the next item, as a
 * grouped write: it shares its transaction with the acks other worker slots
 * make at the same time (group commit, duro__sqlite_write_grouped). */
typedef struct work_ack {
    duro__sqlite_grouped g; /* first member */
    int64_t id;             /* the row, from the token */
    const char *token;
    const duro_work_item *completion; /* NULL: none */
    int64_t lock_timeout_ms;
    int64_t now; /* the caller's, read before it queued */
    int fetch;
    const char *op;
    duro_worker_item *next; /* claimed */
    int skip;               /* the completion was not enqueued */
} work_ack;

static int work_ack_run(duro__sqlite_provider *p, duro__sqlite_conn *c,
                        duro__sqlite_grouped *g, int *clean, duro_error *err)
{
    work_ack *a = (work_ack *)g;
    a->next = NULL;
    int rc = duro__sql_delete_acked_work(&p->sql, (duro__sql_conn *)c, a->id,
                                         a->token, a->completion, a->now,
                                         &a->skip, a->op, err);
    /* a lost lock is found by the delete, before anything is written */
    *clean = rc == DURO_LOCK_LOST;
    if (rc == DURO_OK && a->fetch)
        rc = fetch_work_in_transaction(p, c, a->lock_timeout_ms, a->now,
                                       &a->next, a->op, err);
    return rc;
}

static void work_ack_undo(duro__sqlite_grouped *g)
{
    work_ack *a = (work_ack *)g;
    duro_worker_item_free(a->next);
    a->next = NULL;
}

/* The dialect's ack_work (sql/queue.c checked the token and completion):
 * the row's delete, the completion's enqueue and with `next` the next
 * claim, in one transaction shared with other slots' acks. */
int duro__sqlite_ack_work(duro_provider *base, int64_t id,
                          const char *lock_token,
                          const duro_work_item *completion,
                          int64_t lock_timeout_ms, duro_worker_item **next,
                          const char *op, duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    if (next != NULL)
        duro__sql_note_fetch(&p->sql, DURO_QUEUE_WORKER);
    work_ack a = {.g = {.run = work_ack_run, .undo = work_ack_undo, .err = err},
                  .id = id,
                  .token = lock_token,
                  .completion = completion,
                  .lock_timeout_ms = lock_timeout_ms,
                  .now = duro__wall_ms(),
                  .fetch = next != NULL,
                  .op = op};
    int rc = duro__sqlite_write_grouped(p, op, &a.g);
    if (rc != DURO_OK)
        return rc;
    if (completion != NULL && !a.skip)
        duro__sql_notify_signal(&p->sql, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = a.next;
    return DURO_OK;
}
