/* pg_release.c - releases: the locks this process may hold under tokens
 * no caller will use again (a claim whose answer was lost, an abandon that
 * failed, an activity ack a server crash lost), kept here and released by
 * the next fetch. Owns p->releases, p->acked and p->suspects under
 * p->release_lock. Any thread. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- releases -------------------------------------------------------------
 * What this process may hold locked under a token that no caller will use
 * again, released by its next fetch rather than left until the lock
 * expires (orchestration_lock_timeout_ms, worker_lock_timeout_ms; 30 s by
 * default). Three ways it happens, all when the server goes away (a
 * restart, a failover, a network cut) or does not answer in time:
 * - a claim whose answer was lost: its COMMIT (or the one statement that
 *   is its own transaction) may have committed, locking items under a
 *   token only the lost answer carried. The token's random part is made
 *   here before the claim is sent ('O', 'W': its hex), so the rows whose
 *   tokens end with it can be found and released;
 * - an abandon that failed retryably ('o', 'w': its token): the runtime
 *   abandons a turn whose ack failed, or an activity it could not ack, and
 *   lets the token go whatever the abandon returns. After a restart the ack
 *   failed (connection lost), its retry and the abandon failed too (the
 *   server was still down), and the instance stayed locked: 5 to 11 of
 *   2,000 instances took 30 s more after four restarts;
 * - an activity ack committed without waiting for the flush
 *   (WQ_ACK_COMPLETE*) and lost in a server crash: its row comes back
 *   locked by the token the worker had, which it let go when the ack
 *   succeeded. The latest such acks are kept (a ring of
 *   DURO__PG_ACKED_MAX); when a connection that broke is opened again, those
 *   committed up to ACK_LOSS_MS before it broke become suspects, released
 *   in one statement (a row whose ack stood is gone: nothing to release).
 * Kept in a fixed table (the oldest dropped when full: its lock expires as
 * before), released at the start of the next fetch of either queue (one
 * atomic load when there is nothing), one thread at a time; a release that
 * fails retryably (the store still away) stays for the next fetch. */

/* Keeps a lock to release (kind and text as duro__pg_release's). */
void duro__pg_keep_release(duro__pg_provider *p, char kind, const char *text,
                           int64_t delay_ms)
{
    if (strlen(text) >= sizeof(p->releases[0].text))
        return; /* not a token of this provider */
    pthread_mutex_lock(&p->release_lock);
    int known = 0;
    for (int i = 0; i < p->releases_kept && !known; i++)
        known = p->releases[i].kind == kind &&
                strcmp(p->releases[i].text, text) == 0;
    if (!known) {
        if (p->releases_kept == DURO__PG_RELEASES_MAX) {
            memmove(p->releases, p->releases + 1,
                    sizeof(p->releases[0]) * (DURO__PG_RELEASES_MAX - 1));
            p->releases_kept--;
        }
        duro__pg_release *r = &p->releases[p->releases_kept++];
        r->kind = kind;
        r->delay_ms = delay_ms;
        snprintf(r->text, sizeof(r->text), "%s", text);
        atomic_store(&p->releases_count,
                     p->releases_kept + (int)p->suspect_count);
    }
    pthread_mutex_unlock(&p->release_lock);
}

/* A claim (token hex `hex`, of kind 'O' or 'W') failed with rc: when its
 * connection was lost (DURO_STORAGE, retryable) it may have committed, so
 * what it locked is released by the next fetch. A failure that changed
 * nothing for sure (DURO_BUSY: a lock it waited for, a deadlock) keeps
 * nothing. */
void duro__pg_keep_unknown_claim(duro__pg_provider *p, char kind,
                                 const char *hex, int rc, const duro_error *err)
{
    if (rc == DURO_STORAGE && err->retryable)
        duro__pg_keep_release(p, kind, hex, 0);
}

/* Abandons every instance lock whose token ends with claim hex `hex`. */
static int release_orch_claim(duro__pg_provider *p, const char *hex,
                              const char *op, duro_error *err)
{
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_READY_CLAIMED_BY, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    char **tokens = NULL;
    size_t n = 0, cap = 0;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, hex);
        int step = duro__pg_step(p, c, s);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            if (n == cap) {
                size_t more = cap != 0 ? cap * 2 : 16;
                char **grown = duro__realloc(tokens, more * sizeof(*tokens));
                if (grown == NULL) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
                tokens = grown;
                cap = more;
            }
            tokens[n] = duro__strdup(duro__pg_column_text_raw(s, 0));
            if (tokens[n++] == NULL)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        int64_t ready_id;
        if (tokens[i] == NULL ||
            duro__sql_parse_token(tokens[i], 'o', &ready_id) != 0)
            continue;
        duro_error one;
        int r =
            duro__sql_abandon_orch(&p->sql, ready_id, tokens[i], 0, op, &one);
        if (r != DURO_OK && one.retryable) {
            *err = one;
            rc = r;
        }
    }
    for (size_t i = 0; i < n; i++)
        duro__free(tokens[i]);
    duro__free(tokens);
    return rc;
}

/* Releases every work item lock whose token ends with claim hex `hex`. */
static int release_work_claim(duro__pg_provider *p, const char *hex,
                              const char *op, duro_error *err)
{
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_WQ_RELEASE_CLAIMED, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    int released = 0;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, hex);
        duro__pg_bind_i64(c, s, 2, duro__wall_ms());
        rc = duro__pg_run(p, c, s, op, err);
        released = rc == DURO_OK ? duro__pg_changes(c) : 0;
    }
    duro__pg_reader_release(p, c);
    if (released > 0)
        duro__pg_signal(p, DURO_QUEUE_WORKER, (size_t)released);
    return rc;
}

static int release_one(duro__pg_provider *p, const duro__pg_release *r,
                       duro_error *err)
{
    int64_t id;
    duro_error_clear(err);
    switch (r->kind) {
    case 'o':
        if (duro__sql_parse_token(r->text, 'o', &id) != 0)
            return DURO_OK;
        return duro__sql_abandon_orch(&p->sql, id, r->text, r->delay_ms,
                                      "abandon_orchestration_item, again", err);
    case 'w':
        if (duro__sql_parse_token(r->text, 'w', &id) != 0)
            return DURO_OK;
        if (duro__sql_update_work_row(
                &p->sql, DURO__SQL_WQ_ABANDON, id, r->text, r->delay_ms, 0,
                "abandon_work_item, again", err) != DURO_OK)
            return err->code;
        duro__pg_signal(p, DURO_QUEUE_WORKER, 1);
        return DURO_OK;
    case 'O':
        return release_orch_claim(p, r->text, "release of a lost claim", err);
    default:
        return release_work_claim(p, r->text, "release of a lost claim", err);
    }
}

/* How long before a connection broke an activity ack committed without
 * waiting for the flush may have been lost with the server: PostgreSQL
 * flushes such commits within 3 x wal_writer_delay (600 ms by default),
 * and a connection idle in the pool is found broken only when taken. */
#define ACK_LOSS_MS 3000

/* Remembers the tokens of n activity acks that committed without waiting
 * for the flush (the oldest forgotten beyond DURO__PG_ACKED_MAX). */
void duro__pg_note_async_acks(duro__pg_provider *p, const char *const *tokens,
                              size_t n)
{
    int64_t now = duro__mono_ms();
    pthread_mutex_lock(&p->release_lock);
    if (p->acked == NULL) {
        p->acked = duro__calloc(DURO__PG_ACKED_MAX, sizeof(*p->acked));
        p->suspects = duro__calloc(DURO__PG_ACKED_MAX, sizeof(*p->suspects));
    }
    for (size_t i = 0; p->acked != NULL && p->suspects != NULL && i < n; i++) {
        if (strlen(tokens[i]) >= DURO__PG_TOKEN_MAX)
            continue;
        duro__pg_acked *a = &p->acked[p->acked_next];
        a->at_ms = now;
        snprintf(a->token, sizeof(a->token), "%s", tokens[i]);
        p->acked_next = (p->acked_next + 1) % DURO__PG_ACKED_MAX;
        if (p->acked_count < DURO__PG_ACKED_MAX)
            p->acked_count++;
    }
    pthread_mutex_unlock(&p->release_lock);
}

void duro__pg_reconnected(duro__pg_provider *p, int64_t broken_ms)
{
    pthread_mutex_lock(&p->release_lock);
    for (size_t i = 0; p->acked != NULL && i < p->acked_count; i++) {
        duro__pg_acked *a = &p->acked[i];
        if (a->token[0] == '\0' || a->at_ms < broken_ms - ACK_LOSS_MS ||
            p->suspect_count == DURO__PG_ACKED_MAX)
            continue;
        memcpy(p->suspects[p->suspect_count++], a->token, sizeof(a->token));
        a->token[0] = '\0';
    }
    atomic_store(&p->releases_count, p->releases_kept + (int)p->suspect_count);
    pthread_mutex_unlock(&p->release_lock);
}

/* Releases the rows of the suspects[0 .. n) whose tokens still hold them,
 * in one statement. */
static int release_suspects(duro__pg_provider *p,
                            char (*suspects)[DURO__PG_TOKEN_MAX], size_t n,
                            duro_error *err)
{
    static const char op[] = "release of activity acks a crash may have lost";
    duro__strbuf col[2];
    memset(col, 0, sizeof(col));
    duro__pg_cols_open(col, 2);
    for (size_t i = 0; i < n; i++) {
        int64_t id;
        if (duro__sql_parse_token(suspects[i], 'w', &id) != 0)
            continue;
        duro__pg_col_num(&col[0], id);
        duro__pg_col_text(&col[1], suspects[i]);
    }
    int rc = DURO_OK;
    int released = 0;
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = NULL;
    if (duro__pg_cols_close(col, 2))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_WQ_RELEASE_ACKED, op, err)) ==
             NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 3, duro__wall_ms());
        int step = duro__pg_run_cols(p, c, s, col, 2);
        if (step != DURO__PG_DONE && step != DURO__PG_ROW)
            rc = duro__pg_error(c, step, op, err);
        else
            released = duro__pg_changes(c);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    duro__pg_cols_free(col, 2);
    if (released > 0)
        duro__pg_signal(p, DURO_QUEUE_WORKER, (size_t)released);
    return rc;
}

/* Releases what duro__pg_keep_release kept and the suspects, at the start of a
 * fetch; nothing (one atomic load) when there is nothing, or while another
 * thread does it. */
void duro__pg_release_kept(duro__pg_provider *p)
{
    if (atomic_load_explicit(&p->releases_count, memory_order_relaxed) == 0)
        return;
    duro__pg_release todo[DURO__PG_RELEASES_MAX];
    char(*suspects)[DURO__PG_TOKEN_MAX] = NULL;
    size_t nsuspects = 0;
    pthread_mutex_lock(&p->release_lock);
    int n = p->releasing ? 0 : p->releases_kept;
    if (!p->releasing && p->suspect_count > 0) {
        suspects = duro__malloc(p->suspect_count * sizeof(*suspects));
        if (suspects != NULL) {
            nsuspects = p->suspect_count;
            memcpy(suspects, p->suspects, nsuspects * sizeof(*suspects));
            p->suspect_count = 0;
        }
    }
    if (n > 0 || nsuspects > 0) {
        memcpy(todo, p->releases, sizeof(todo[0]) * (size_t)n);
        p->releases_kept = 0;
        atomic_store(&p->releases_count, (int)p->suspect_count);
        p->releasing = 1;
    }
    pthread_mutex_unlock(&p->release_lock);
    if (n == 0 && nsuspects == 0)
        return;
    duro_error err;
    if (nsuspects > 0 &&
        release_suspects(p, suspects, nsuspects, &err) != DURO_OK &&
        err.retryable) {
        /* the store is still away: again at the next fetch */
        pthread_mutex_lock(&p->release_lock);
        for (size_t i = 0;
             i < nsuspects && p->suspect_count < DURO__PG_ACKED_MAX; i++)
            memcpy(p->suspects[p->suspect_count++], suspects[i],
                   sizeof(suspects[i]));
        atomic_store(&p->releases_count,
                     p->releases_kept + (int)p->suspect_count);
        pthread_mutex_unlock(&p->release_lock);
    }
    duro__free(suspects);
    int done = 0;
    for (; done < n; done++) {
        /* a lock gone meanwhile (expired and taken, or the claim did not
         * commit) is nothing to release; a store still away keeps the rest
         * for the next fetch */
        if (release_one(p, &todo[done], &err) != DURO_OK && err.retryable)
            break;
    }
    pthread_mutex_lock(&p->release_lock);
    p->releasing = 0;
    pthread_mutex_unlock(&p->release_lock);
    for (int i = done; i < n; i++)
        duro__pg_keep_release(p, todo[i].kind, todo[i].text, todo[i].delay_ms);
}
