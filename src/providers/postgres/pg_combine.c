/* pg_combine.c - activity acks that only queue a completion, in one
 * statement run alone as its own transaction: each on its own, or with
 * its next claim combined with the acks other threads make at the same
 * time. Owns the combine queue (p->combine_*, p->contended) under
 * p->combine_lock. Any thread. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- activity acks of many threads, one statement ------------------------
 * Worker slots ack their activities and claim their next ones from many
 * threads at once; on a server each statement costs an executor start, a
 * round trip and a commit. A slot queues its ack (a duro__pg_wq_req on its
 * stack); whoever finds no combined statement running takes every queued
 * ack with its lock timeout (up to COMBINE_MAX) and runs them as one
 * WQ_ACK_COMPLETE_FETCH_MANY, then marks them done; the others wait on
 * combine_cond. Acks that arrive while a statement runs go together in
 * the next. No thread waits for a statement that does not carry its ack
 * unless one is already running, so one ack alone costs what it did
 * before (WQ_ACK_COMPLETE_FETCH). Each ack gets its own outcome: acked,
 * or DURO_LOCK_LOST when its row was gone; the claimed items go one to
 * each acked caller.
 * A statement may wait for a readiness row another session holds (a
 * runtime stopped in the middle of its ack), up to lock_timeout; it must
 * hold up no ack but its own: a combined statement that fails DURO_BUSY
 * (nothing changed) has each of its acks run again alone on its own
 * thread; an ack that gave up waiting runs alone until it goes through
 * (p->contended); and an ack queued behind a statement that runs longer
 * than COMBINE_WAIT_MS runs alone instead of waiting on. */

#define COMBINE_MAX 64

typedef struct duro__pg_wq_req {
    int64_t id;
    const char *token;
    const duro_work_item *completion;
    int64_t lock_timeout_ms;
    int done;  /* under combine_lock */
    int taken; /* in a leader's batch, under combine_lock */
    int alone; /* the combined statement failed, changing nothing: the
                  caller runs its ack alone */
    int rc;
    duro_error err;
    duro_worker_item *next;
    struct duro__pg_wq_req *link;
} wq_req;

static const char gone_msg[] = "the work item is gone (cancelled or acked) or "
                               "its lock was taken by another fetch";

/* Makes the next statement run alone on c - a combined ack - planned
 * generically: its plan does not depend on its values (arrays of row ids,
 * tokens and completions), and PostgreSQL planned it again at every bind
 * (~55 us). The setting rides in the statement's round trip and lasts its
 * implicit transaction (set_config's is_local); plan_cache_mode is
 * PostgreSQL 12's, and an older server plans as before. Not for an ack
 * alone: PostgreSQL already reuses a generic plan for the one-row
 * statement once its custom plans are no better (1.6 us of planning an ack
 * in `long`), and the setting's own message cost more (~8 us, and the
 * pipeline's latency on the one activity in flight). */
static void plan_generic(duro__pg_conn *c)
{
    if (PQserverVersion(c->pg) >= 120000)
        c->begin_then = "SELECT set_config('plan_cache_mode', "
                        "'force_generic_plan', true)";
}

/* ack_work_item, and with `next` the fetch of the next item in the same
 * transaction (ack_and_fetch_work_item). */
/* ack_work for the common case, a completion that only queues a message:
 * one statement (WQ_ACK_COMPLETE, or WQ_ACK_COMPLETE_FETCH with `next`),
 * run alone as its own transaction. */
static int ack_work_one(duro__pg_provider *p, int64_t id,
                        const char *lock_token,
                        const duro_work_item *completion,
                        int64_t lock_timeout_ms, duro_worker_item **next,
                        const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c,
                      next != NULL ? DURO__SQL_WQ_ACK_COMPLETE_FETCH
                                   : DURO__SQL_WQ_ACK_COMPLETE,
                      op, err);
    if (s == NULL) {
        duro__pg_reader_release(p, c);
        return err->code;
    }
    duro__sql_bind_message(&p->sql, (duro__sql_conn *)c, (duro__sql_stmt *)s,
                           completion, now, now);
    duro__pg_bind_i64(c, s, 20, id);
    duro__pg_bind_text(c, s, 21, lock_token);
    char token_hex[33];
    duro__random_token(token_hex);
    if (next != NULL) {
        duro__pg_bind_text(c, s, 22, token_hex);
        duro__pg_bind_i64(c, s, 23,
                          duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms));
    }
    int rc = DURO_OK;
    duro_worker_item *w = NULL;
    int step = duro__pg_step(p, c, s);
    if (step != DURO__PG_ROW) {
        rc = duro__pg_error(c, step, op, err);
    } else if (duro__pg_column_int64(s, next != NULL ? 9 : 0) == 0) {
        /* Nothing deleted, so nothing queued and nothing claimed. */
        rc = duro__sql_lock_lost(
            &p->sql, op,
            "the work item is gone (cancelled or acked) or its "
            "lock was taken by another fetch",
            err);
    } else if (next != NULL && duro__pg_column_null(s, 0)) {
        duro__pg_note_due(p, DURO_QUEUE_WORKER,
                          duro__pg_column_null(s, 10)
                              ? INT64_MAX
                              : duro__pg_column_int64(s, 10));
    } else if (next != NULL) {
        duro_arena *a = duro_arena_create();
        w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
        if (w == NULL ||
            (w->arena = a, duro__sql_read_work_row(
                               &p->sql, a, (duro__sql_stmt *)s, w) != 0)) {
            /* committed: the claimed item is released by the next fetch */
            duro_arena_destroy(a);
            w = NULL;
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            duro__pg_keep_release(p, 'W', token_hex, 0);
        }
    }
    duro__pg_reader_release(p, c);
    if (rc != DURO_OK && next != NULL)
        duro__pg_keep_unknown_claim(p, 'W', token_hex, rc, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_note_async_acks(p, &lock_token,
                             1); /* committed without the flush */
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

/* Runs n >= 2 queued acks as one statement; fills each one's outcome. */
static void run_combined(duro__pg_provider *p, wq_req **all, size_t count,
                         const char *op)
{
    enum { K_COLUMNS = 21 };
    /* A row acked twice at once with one token (used by two threads): the
     * second finds it gone, as it would after the first. With two tokens -
     * the current holder's, and an old one whose claim a server crash lost
     * (its ack retried after the restart, while the row was claimed again)
     * - the second runs alone after this statement: in it, both would be
     * joined to the one row deleted and queue two completions, and dropping
     * it instead (as before) dropped the holder's completion, the row left
     * locked by a token no one held until it expired. */
    wq_req *batch[COMBINE_MAX];
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const wq_req *same = NULL;
        for (size_t j = 0; j < n && same == NULL; j++)
            if (batch[j]->id == all[i]->id)
                same = batch[j];
        if (same != NULL && strcmp(same->token, all[i]->token) == 0)
            all[i]->rc =
                duro__sql_lock_lost(&p->sql, op, gone_msg, &all[i]->err);
        else if (same != NULL)
            all[i]->alone = 1;
        else
            batch[n++] = all[i];
    }
    duro__strbuf col[K_COLUMNS];
    memset(col, 0, sizeof(col));
    duro__pg_cols_open(col, K_COLUMNS);
    for (size_t i = 0; i < n; i++) {
        const duro_work_item *it = batch[i]->completion;
        duro__pg_col_num(&col[0], batch[i]->id);
        duro__pg_col_text(&col[1], batch[i]->token);
        duro__pg_col_num(&col[2], (int64_t)it->kind);
        duro__pg_col_text(&col[3], it->instance_id);
        duro__pg_col_num(&col[4], (int64_t)it->execution_id);
        duro__pg_col_num(&col[5], (int64_t)it->source_id);
        duro__pg_col_text(&col[6], it->name);
        duro__pg_col_text(&col[7], it->version);
        duro__pg_col_text(&col[8], it->payload);
        duro__pg_col_text(&col[9], it->error);
        duro__pg_col_num(&col[10], it->category);
        duro__pg_col_text(&col[11], it->reason);
        duro__pg_col_text(&col[12], it->requested_by);
        duro__pg_col_text(&col[13], duro__sql_nonempty(it->parent_instance));
        duro__pg_col_num(&col[14], (int64_t)it->parent_execution);
        duro__pg_col_num(&col[15], (int64_t)it->parent_event_id);
        duro__pg_col_num(&col[16], it->fire_at_ms);
        duro__pg_col_num(&col[17], (int64_t)it->attempt);
        duro__pg_col_num(&col[18], (int64_t)it->flags);
        duro__pg_col_num(&col[19], it->started_ms);
        duro__pg_col_num(&col[20], it->finished_ms);
        batch[i]->rc = DURO_LOCK_LOST; /* until its row is reported acked */
    }
    duro_error err;
    int rc = DURO_OK;
    int64_t now = duro__wall_ms();
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = NULL;
    duro_worker_item *claimed[COMBINE_MAX];
    size_t claims = 0, acked = 0;
    int64_t due = INT64_MAX;
    int due_known = 0;
    char token_hex[33];
    duro__random_token(token_hex);
    if (duro__pg_cols_close(col, K_COLUMNS))
        rc = duro_error_set(&err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_WQ_ACK_COMPLETE_FETCH_MANY, op,
                                &err)) == NULL)
        rc = err.code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 22, now);
        duro__pg_bind_text(c, s, 23, token_hex);
        duro__pg_bind_i64(
            c, s, 24,
            duro__sql_after_ms(duro__wall_ms(), batch[0]->lock_timeout_ms));
        plan_generic(c);
        int step = duro__pg_run_cols(p, c, s, col, K_COLUMNS);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            int part = duro__pg_column_int(s, 9);
            if (part == 0 && !duro__pg_column_null(s, 10)) {
                int64_t id = duro__pg_column_int64(s, 10);
                for (size_t i = 0; i < n; i++)
                    if (batch[i]->id == id && batch[i]->rc != DURO_OK) {
                        batch[i]->rc = DURO_OK;
                        acked++;
                        break;
                    }
            } else if (part == 1 && claims < COMBINE_MAX) {
                duro_arena *a = duro_arena_create();
                duro_worker_item *w =
                    a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
                if (w == NULL ||
                    (w->arena = a,
                     duro__sql_read_work_row(&p->sql, a, (duro__sql_stmt *)s,
                                             w) != 0)) {
                    /* committed: the claimed items are released by the
                     * next fetch */
                    duro_arena_destroy(a);
                    rc = duro_error_set(&err, DURO_NOMEM, 0, "out of memory");
                    duro__pg_keep_release(p, 'W', token_hex, 0);
                    break;
                }
                claimed[claims++] = w;
            } else if (part == 2) {
                due_known = 1;
                due = duro__pg_column_null(s, 10)
                          ? INT64_MAX
                          : duro__pg_column_int64(s, 10);
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, &err);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    duro__pg_cols_free(col, K_COLUMNS);
    if (rc != DURO_OK) {
        for (size_t i = 0; i < claims; i++)
            duro_worker_item_free(claimed[i]);
        if (rc == DURO_BUSY) {
            /* It changed nothing (a lock it waited for too long, a
             * deadlock): one ack's row held by another session must not
             * fail the others, so each runs alone, on its own thread. */
            for (size_t i = 0; i < n; i++)
                batch[i]->alone = 1;
            return;
        }
        /* the statement failed as a whole: every ack gets its error (one
         * whose connection was lost may have committed: provider.h) */
        for (size_t i = 0; i < n; i++) {
            batch[i]->rc = rc;
            batch[i]->err = err;
        }
        duro__pg_keep_unknown_claim(p, 'W', token_hex, rc, &err);
        return;
    }
    size_t given = 0, k = 0;
    const char *acked_tokens[COMBINE_MAX];
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->rc != DURO_OK) {
            duro__sql_lock_lost(&p->sql, op, gone_msg, &batch[i]->err);
            continue;
        }
        acked_tokens[k++] = batch[i]->token;
        batch[i]->next = given < claims ? claimed[given++] : NULL;
    }
    duro__pg_note_async_acks(p, acked_tokens,
                             k);    /* committed without the flush */
    for (; given < claims; given++) /* cannot happen: one claim per ack */
        duro_worker_item_free(claimed[given]);
    if (due_known)
        duro__pg_note_due(p, DURO_QUEUE_WORKER, due);
    if (acked > 0)
        duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, acked);
    uint64_t seen = atomic_load(&p->combine_max);
    while (n > seen &&
           !atomic_compare_exchange_weak(&p->combine_max, &seen, (uint64_t)n))
        ;
    atomic_fetch_add(&p->combine_statements, 1);
}

/* Where row `id` is in p->contended, or -1; under combine_lock. */
static int contended_at(duro__pg_provider *p, int64_t id)
{
    for (int i = 0; i < p->contended_count; i++)
        if (p->contended[i] == id)
            return i;
    return -1;
}

/* Remembers whether row id's ack gave up waiting for a lock (rc
 * DURO_BUSY): then its next attempt runs alone (the oldest such row is
 * forgotten when DURO__PG_CONTENDED_MAX are); any other outcome forgets
 * it. */
static void note_contended(duro__pg_provider *p, int64_t id, int rc)
{
    pthread_mutex_lock(&p->combine_lock);
    int at = contended_at(p, id);
    if (rc == DURO_BUSY && at < 0) {
        if (p->contended_count == DURO__PG_CONTENDED_MAX) {
            memmove(p->contended, p->contended + 1,
                    sizeof(p->contended[0]) * (DURO__PG_CONTENDED_MAX - 1));
            p->contended_count--;
        }
        p->contended[p->contended_count++] = id;
    } else if (rc != DURO_BUSY && at >= 0) {
        memmove(p->contended + at, p->contended + at + 1,
                sizeof(p->contended[0]) *
                    (size_t)(p->contended_count - at - 1));
        p->contended_count--;
    }
    pthread_mutex_unlock(&p->combine_lock);
}

/* An ack that may wait for a row another session holds (its last attempt
 * did, or the combined statement it was in did): alone, so that it holds
 * up no other ack while it waits. (Its claim of the next item runs after
 * its readiness upsert, DURO__PG_AFTER_R: it holds no item meanwhile.) */
static int ack_apart(duro__pg_provider *p, int64_t id, const char *lock_token,
                     const duro_work_item *completion, int64_t lock_timeout_ms,
                     duro_worker_item **next, const char *op, duro_error *err)
{
    int rc = ack_work_one(p, id, lock_token, completion, lock_timeout_ms, next,
                          op, err);
    note_contended(p, id, rc);
    return rc;
}

/* Removes r from the combine queue; under combine_lock. */
static void unqueue(duro__pg_provider *p, wq_req *r)
{
    wq_req *prev = NULL;
    for (wq_req *x = p->combine_head; x != NULL; prev = x, x = x->link) {
        if (x != r)
            continue;
        if (prev != NULL)
            prev->link = r->link;
        else
            p->combine_head = r->link;
        if (p->combine_tail == r)
            p->combine_tail = prev;
        return;
    }
}

/* How long a queued ack waits for the statement running before it runs
 * its own, alone: a combined statement takes milliseconds, unless it waits
 * for a row another session holds (up to lock_timeout), and the acks
 * queued behind it are not held up by that. */
#define COMBINE_WAIT_MS 1000

/* How long a new leader gives the slots behind it to queue their acks. */
#define COMBINE_GATHER_NS 150000

/* A new leader whose last statement took `company` acks (more than one:
 * slots are acking side by side) gives them the time to queue as many, up
 * to COMBINE_GATHER_NS, before it takes the queue: the slots a moment
 * behind (back from a short activity with the item the last statement
 * claimed for them) then share its statement instead of each group paying
 * a statement of its own right after. Each statement costs the server
 * about 100 us of CPU besides its rows (an executor start, a bind, a round
 * trip, a commit record), and with 8 slots the queue otherwise settles at
 * two groups of about 4, one running and one queued behind it (1,158
 * statements for 5,000 acks in a `chain` run, 683 with this wait:
 * bench/RESULTS.md). It yields the CPU meanwhile, which the server and
 * those slots may be waiting for. An ack of a slot alone (the last
 * statement took one) never waits: the same rule as the SQLite provider's
 * group commit (sqlite_db.c). */
static void gather(duro__pg_provider *p, int company)
{
    duro__sql_linger(&p->combine_queued, NULL, company, COMBINE_GATHER_NS);
}

/* ack_work_one for an ack with its completion and the next claim, run
 * together with the acks other threads make at the same time. */
static int ack_work_combined(duro__pg_provider *p, int64_t id,
                             const char *lock_token,
                             const duro_work_item *completion,
                             int64_t lock_timeout_ms, duro_worker_item **next,
                             const char *op, duro_error *err)
{
    wq_req me = {.id = id,
                 .token = lock_token,
                 .completion = completion,
                 .lock_timeout_ms = lock_timeout_ms};
    pthread_mutex_lock(&p->combine_lock);
    if (contended_at(p, id) >= 0) {
        /* it waited for a row lock last time: alone, holding up no other
         * ack while it may wait again */
        pthread_mutex_unlock(&p->combine_lock);
        return ack_apart(p, id, lock_token, completion, lock_timeout_ms, next,
                         op, err);
    }
    if (p->combine_tail != NULL)
        p->combine_tail->link = &me;
    else
        p->combine_head = &me;
    p->combine_tail = &me;
    atomic_fetch_add(&p->combine_queued, 1);
    struct timespec give_up;
    duro__deadline_ts(&give_up, COMBINE_WAIT_MS);
    while (!me.done) {
        if (p->combine_busy) {
            if (me.taken) {
                pthread_cond_wait(&p->combine_cond, &p->combine_lock);
            } else if (pthread_cond_timedwait(&p->combine_cond,
                                              &p->combine_lock,
                                              &give_up) == ETIMEDOUT &&
                       !me.taken && !me.done) {
                /* the running statement is held up: not behind it */
                unqueue(p, &me);
                atomic_fetch_sub(&p->combine_queued, 1);
                pthread_mutex_unlock(&p->combine_lock);
                return ack_apart(p, id, lock_token, completion, lock_timeout_ms,
                                 next, op, err);
            }
            continue;
        }
        /* lead: take the queued acks that share the first one's lock
         * timeout (the claim sets one for all) */
        p->combine_busy = 1;
        int company = p->combine_last;
        pthread_mutex_unlock(&p->combine_lock);
        gather(p, company);
        pthread_mutex_lock(&p->combine_lock);
        wq_req *batch[COMBINE_MAX];
        size_t n = 0;
        int64_t timeout = p->combine_head->lock_timeout_ms;
        wq_req **at = &p->combine_head;
        p->combine_tail = NULL;
        while (*at != NULL) {
            wq_req *r = *at;
            if (n < COMBINE_MAX && r->lock_timeout_ms == timeout) {
                r->taken = 1;
                batch[n++] = r;
                *at = r->link;
            } else {
                p->combine_tail = r;
                at = &r->link;
            }
        }
        atomic_fetch_sub(&p->combine_queued, (int)n);
        p->combine_last = (int)n;
        pthread_mutex_unlock(&p->combine_lock);
        if (n == 1)
            batch[0]->rc = ack_apart(
                p, batch[0]->id, batch[0]->token, batch[0]->completion,
                batch[0]->lock_timeout_ms, &batch[0]->next, op, &batch[0]->err);
        else
            run_combined(p, batch, n, op);
        pthread_mutex_lock(&p->combine_lock);
        for (size_t i = 0; i < n; i++)
            batch[i]->done = 1;
        p->combine_busy = 0;
        pthread_cond_broadcast(&p->combine_cond);
    }
    pthread_mutex_unlock(&p->combine_lock);
    if (me.alone)
        return ack_apart(p, id, lock_token, completion, lock_timeout_ms, next,
                         op, err);
    if (me.rc != DURO_OK) {
        *err = me.err;
        return me.rc;
    }
    *next = me.next;
    return DURO_OK;
}

int duro__pg_combine_queued(duro_provider *base)
{
    duro__pg_provider *p = duro__pg_of(base);
    pthread_mutex_lock(&p->combine_lock);
    int n = 0;
    for (const wq_req *r = p->combine_head; r != NULL; r = r->link)
        n++;
    pthread_mutex_unlock(&p->combine_lock);
    return n;
}

int duro__pg_ack_work_at_once(duro__pg_provider *p, int64_t id,
                              const char *lock_token,
                              const duro_work_item *completion,
                              int64_t lock_timeout_ms, duro_worker_item **next,
                              const char *op, duro_error *err)
{
    if (next == NULL)
        return ack_work_one(p, id, lock_token, completion, lock_timeout_ms,
                            NULL, op, err);
    return ack_work_combined(p, id, lock_token, completion, lock_timeout_ms,
                             next, op, err);
}
