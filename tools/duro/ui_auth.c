/* ui_auth.c - who may use duro ui and how they sign in: the operators
 * (--tokens-file, and the one who ran duro ui), the one-time login codes
 * of the printed URLs, the sessions the page holds (a random id the server
 * maps to an operator, never the token, never a cookie), and the backoff
 * after failed sign-ins. The operators are read-only after start; codes,
 * sessions and the failure count are under one lock, taken by MHD's pool
 * threads and the main thread (SIGUSR1); nothing slow is done under it.
 *
 * Failed sign-ins are counted for the whole server (on loopback every
 * client has one address): after FAIL_FREE failures, token checks wait
 * 1 s, 2 s, ... up to FAIL_WAIT_MAX_MS after each new failure, and a token
 * that comes while they wait is refused unchecked (429), whether right or
 * wrong (checking it would let a guesser go on at full speed: a fast 200
 * would tell). Only a new wrong secret counts: the last WRONG_MAX wrong
 * ones are remembered (as keyed hashes) and answered 401 at once, since
 * repeating a known-wrong guess teaches nothing; so a misconfigured
 * script that sends one wrong token every few seconds never holds up the
 * others. Codes and sessions are 128 and 256 random bits: they are checked
 * even while tokens wait, so someone hammering the token check can delay
 * token sign-ins but never stops the printed login URL (or SIGUSR1's next
 * one) or a page already signed in. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "ui.h"

#define CODES_MAX 16      /* live login codes; a new one ends the oldest */
#define SESSIONS_MAX 1024 /* live sessions; a new one ends the oldest */
#define CODE_BYTES 16     /* 128 bits: 32 hex characters */
#define SESSION_BYTES 32  /* 256 bits: 64 hex characters */
#define FAIL_FREE 3       /* failures before token checks wait */
#define FAIL_WAIT_MAX_MS 30000
#define FAIL_FORGET_MS (15 * 60 * 1000) /* a pause that resets the count */
#define WRONG_MAX 64                    /* wrong secrets remembered */

typedef struct login_code {
    char code[2 * CODE_BYTES + 1]; /* "" when unused */
    size_t op;
    int64_t expires_ms, expires_wall_ms;
} login_code;

typedef struct session {
    char id[2 * SESSION_BYTES + 1]; /* "" when unused */
    size_t op;
    int64_t expires_ms;
} session;

struct ui_auth {
    ui_operator *ops; /* read-only after create */
    size_t op_count, launcher;
    int64_t session_ttl_ms, code_ttl_ms;
    pthread_mutex_t lock; /* guards what follows */
    login_code codes[CODES_MAX];
    session sessions[SESSIONS_MAX];
    unsigned failures;         /* failed sign-ins, forgotten after a pause */
    int64_t last_failure_ms;   /* CLOCK_MONOTONIC */
    int64_t tokens_wait_until; /* token checks refused unchecked before */
    uint64_t key;              /* of the hashes below, random */
    uint64_t wrong[WRONG_MAX]; /* hashes of recent wrong secrets; 0: none */
    size_t wrong_next;
};

/* ---- names, tokens and --tokens-file ------------------------------------- */

int ui_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > UI_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

int ui_token_ok(const char *t, size_t len)
{
    if (len < 16 || len > 256)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (t[i] <= ' ' || t[i] > '~' || t[i] == ';' || t[i] == ',')
            return 0;
    return 1;
}

/* Compares in time that depends on @p want's length only. */
static int same_secret(const char *want, size_t want_len, const char *given)
{
    size_t len = strlen(given);
    unsigned char diff = len != want_len;
    for (size_t i = 0; i < want_len; i++)
        diff |= (unsigned char)(want[i] ^ (i < len ? given[i] : 0));
    return diff == 0;
}

static int file_error(char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int file_error(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

int ui_tokens_file(const char *path, ui_operator **ops, size_t *count,
                   char *err, size_t err_size)
{
    *ops = NULL;
    *count = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return file_error(err, err_size, "cannot read %s: %s", path,
                          strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0)
        fprintf(stderr,
                "duro ui: warning: --tokens-file %s can be read by other "
                "users (chmod 600 it)\n",
                path);
    char *line = NULL;
    size_t cap = 0, have = 0;
    ssize_t got;
    unsigned number = 0;
    int rc = 0;
    unsigned *lines = NULL; /* the line of each operator, for messages */
    while ((got = getline(&line, &cap, f)) >= 0) {
        number++;
        if (memchr(line, '\0', (size_t)got) != NULL) {
            rc = file_error(err, err_size, "line %u: a NUL byte", number);
            break;
        }
        char *fields[3] = {NULL, NULL, NULL};
        size_t n = 0;
        char *save = NULL;
        for (char *word = strtok_r(line, " \t\r\n", &save);
             word != NULL && n < 3; word = strtok_r(NULL, " \t\r\n", &save))
            fields[n++] = word;
        if (n == 0 || fields[0][0] == '#')
            continue;
        if (n != 2) {
            rc = file_error(err, err_size,
                            "line %u: expected NAME TOKEN (two words)", number);
            break;
        }
        if (!ui_name_ok(fields[0])) {
            char quoted[TEXT_QUOTE_SIZE];
            rc = file_error(err, err_size,
                            "line %u: '%s' is not a name ([A-Za-z0-9._-], "
                            "1 to 64 characters)",
                            number,
                            text_quote(fields[0], quoted, sizeof(quoted)));
            break;
        }
        size_t tlen = strlen(fields[1]);
        if (!ui_token_ok(fields[1], tlen)) {
            rc = file_error(err, err_size,
                            "line %u: the token of '%s' must be 16 to 256 "
                            "printable characters without spaces, ';' or ','",
                            number, fields[0]);
            break;
        }
        for (size_t i = 0; i < have && rc == 0; i++) {
            if (strcmp((*ops)[i].name, fields[0]) == 0)
                rc = file_error(err, err_size,
                                "line %u: '%s' is named twice (line %u)",
                                number, fields[0], lines[i]);
            else if (strcmp((*ops)[i].token, fields[1]) == 0)
                rc = file_error(err, err_size,
                                "line %u: the token of '%s' is the token of "
                                "'%s' (line %u): each needs their own",
                                number, fields[0], (*ops)[i].name, lines[i]);
        }
        if (rc != 0)
            break;
        ui_operator *more = realloc(*ops, (have + 1) * sizeof(**ops));
        unsigned *more_lines = realloc(lines, (have + 1) * sizeof(*lines));
        if (more != NULL)
            *ops = more;
        if (more_lines != NULL)
            lines = more_lines;
        if (more == NULL || more_lines == NULL) {
            rc = file_error(err, err_size, "out of memory");
            break;
        }
        ui_operator *op = &(*ops)[have];
        memset(op, 0, sizeof(*op));
        snprintf(op->name, sizeof(op->name), "%s", fields[0]);
        snprintf(op->requester, sizeof(op->requester), "ui:%s", fields[0]);
        memcpy(op->token, fields[1], tlen + 1);
        op->token_len = tlen;
        lines[have++] = number;
    }
    if (rc == 0 && ferror(f))
        rc = file_error(err, err_size, "cannot read %s: %s", path,
                        strerror(errno));
    if (rc == 0 && have == 0)
        rc = file_error(err, err_size,
                        "no operator in it (lines are NAME "
                        "TOKEN)");
    explicit_bzero(line, cap);
    free(line);
    free(lines);
    fclose(f);
    if (rc != 0) {
        if (*ops != NULL)
            explicit_bzero(*ops, have * sizeof(**ops));
        free(*ops);
        *ops = NULL;
        return -1;
    }
    *count = have;
    return 0;
}

/* ---- state --------------------------------------------------------------- */

ui_auth *ui_auth_create(const ui_operator *ops, size_t count, size_t launcher,
                        int64_t session_ttl_ms, int64_t code_ttl_ms)
{
    ui_auth *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->ops = malloc(count * sizeof(*ops));
    if (a->ops == NULL) {
        free(a);
        return NULL;
    }
    memcpy(a->ops, ops, count * sizeof(*ops));
    a->op_count = count;
    a->launcher = launcher;
    a->session_ttl_ms = session_ttl_ms;
    a->code_ttl_ms = code_ttl_ms;
    if (getrandom(&a->key, sizeof(a->key), 0) != (ssize_t)sizeof(a->key))
        a->key = (uint64_t)ui_wall_ms() * 0x9e3779b97f4a7c15u;
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

void ui_auth_destroy(ui_auth *a)
{
    if (a == NULL)
        return;
    pthread_mutex_destroy(&a->lock);
    explicit_bzero(a->ops, a->op_count * sizeof(*a->ops));
    free(a->ops);
    explicit_bzero(a, sizeof(*a));
    free(a);
}

const ui_operator *ui_auth_launcher(const ui_auth *a)
{
    return &a->ops[a->launcher];
}

/* @p bytes random bytes as hex into @p out (2 * bytes + 1): 0, or -1. */
static int random_hex(char *out, size_t bytes)
{
    unsigned char raw[64];
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof(raw));
    return 0;
}

int ui_auth_new_code(ui_auth *a, const ui_operator *who, char *code,
                     int64_t *expires_ms)
{
    char fresh[2 * CODE_BYTES + 1];
    if (random_hex(fresh, CODE_BYTES) != 0)
        return -1;
    int64_t now = ui_now_ms(), wall = ui_wall_ms();
    pthread_mutex_lock(&a->lock);
    login_code *slot = &a->codes[0];
    for (size_t i = 0; i < CODES_MAX; i++) {
        login_code *c = &a->codes[i];
        if (c->code[0] == '\0' || c->expires_ms <= now) {
            slot = c;
            break;
        }
        if (c->expires_ms < slot->expires_ms)
            slot = c;
    }
    memcpy(slot->code, fresh, sizeof(fresh));
    slot->op = (size_t)(who - a->ops);
    slot->expires_ms = now + a->code_ttl_ms;
    slot->expires_wall_ms = wall + a->code_ttl_ms;
    pthread_mutex_unlock(&a->lock);
    memcpy(code, fresh, sizeof(fresh));
    *expires_ms = wall + a->code_ttl_ms;
    return 0;
}

const ui_operator *ui_auth_session(ui_auth *a, const char *id)
{
    const ui_operator *who = NULL;
    int64_t now = ui_now_ms();
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < SESSIONS_MAX; i++) {
        session *s = &a->sessions[i];
        if (s->id[0] != '\0' && same_secret(s->id, 2 * SESSION_BYTES, id) &&
            s->expires_ms > now)
            who = &a->ops[s->op];
    }
    pthread_mutex_unlock(&a->lock);
    return who;
}

/* A new session of @p op into @p id; its end (CLOCK_REALTIME) in
 * *@p expires_wall_ms. 0, or -1. */
static int new_session(ui_auth *a, size_t op, char *id,
                       int64_t *expires_wall_ms)
{
    if (random_hex(id, SESSION_BYTES) != 0)
        return -1;
    int64_t now = ui_now_ms();
    pthread_mutex_lock(&a->lock);
    session *slot = &a->sessions[0];
    for (size_t i = 0; i < SESSIONS_MAX; i++) {
        session *s = &a->sessions[i];
        if (s->id[0] == '\0' || s->expires_ms <= now) {
            slot = s;
            break;
        }
        if (s->expires_ms < slot->expires_ms)
            slot = s;
    }
    memcpy(slot->id, id, 2 * SESSION_BYTES + 1);
    slot->op = op;
    slot->expires_ms = now + a->session_ttl_ms;
    pthread_mutex_unlock(&a->lock);
    *expires_wall_ms = ui_wall_ms() + a->session_ttl_ms;
    return 0;
}

/* ---- failed sign-ins ----------------------------------------------------- */

/* How long token checks wait after the @p failures-th failure. */
static int64_t wait_after(unsigned failures)
{
    if (failures <= FAIL_FREE)
        return 0;
    unsigned doubling = failures - FAIL_FREE - 1;
    if (doubling >= 5)
        return FAIL_WAIT_MAX_MS;
    int64_t ms = (int64_t)1000 << doubling;
    return ms < FAIL_WAIT_MAX_MS ? ms : FAIL_WAIT_MAX_MS;
}

/* A keyed FNV-1a of @p kind and @p secret (never 0): the wrong secrets
 * are remembered as this, not as themselves. */
static uint64_t secret_hash(const ui_auth *a, char kind, const char *secret)
{
    uint64_t h = 0xcbf29ce484222325u ^ a->key;
    h = (h ^ (unsigned char)kind) * 0x100000001b3u;
    for (const unsigned char *p = (const unsigned char *)secret; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    h ^= h >> 29;
    return h != 0 ? h : 1;
}

/* 1 when @p hash is a wrong secret seen lately (under the lock). */
static int known_wrong(const ui_auth *a, uint64_t hash)
{
    int seen = 0;
    for (size_t i = 0; i < WRONG_MAX; i++)
        seen |= a->wrong[i] == hash;
    return seen;
}

/* Counts a new wrong secret (under the lock); the wait it starts in
 * *@p wait_ms. */
static unsigned note_failure(ui_auth *a, uint64_t hash, int64_t now,
                             int64_t *wait_ms)
{
    a->wrong[a->wrong_next] = hash;
    a->wrong_next = (a->wrong_next + 1) % WRONG_MAX;
    if (a->failures > 0 && now - a->last_failure_ms > FAIL_FORGET_MS)
        a->failures = 0;
    if (a->failures < 1000000)
        a->failures++;
    a->last_failure_ms = now;
    *wait_ms = wait_after(a->failures);
    if (now + *wait_ms > a->tokens_wait_until)
        a->tokens_wait_until = now + *wait_ms;
    return a->failures;
}

static unsigned seconds_up(int64_t ms)
{
    return ms <= 0 ? 0 : (unsigned)((ms + 999) / 1000);
}

static ui_ratelog log_failed, log_unchecked;

/* The log line of a failure (never the secret) and its answer: 401 when
 * the next token is checked at once, else 429 with Retry-After. */
static int failed(ui_request *r, const char *what, const char *via,
                  unsigned failures, int64_t wait_ms)
{
    unsigned wait_s = seconds_up(wait_ms);
    if (failures == 0) /* a wrong secret seen lately: not counted again */
        return ui_send_error(r, 401, "unauthorized",
                             "%s (the same as before): sign in with the "
                             "URL duro ui printed, or a token",
                             what);
    char waits[64] = "";
    if (wait_s > 0)
        snprintf(waits, sizeof(waits), "; token sign-ins wait %u s", wait_s);
    ui_log_limited(&log_failed, 1000,
                   "failed sign-in from %s (%s): %s; %u failure%s%s", r->peer,
                   via, what, failures, failures == 1 ? "" : "s", waits);
    if (wait_s == 0)
        return ui_send_refusal(r, 401, "unauthorized", failures, 0,
                               "%s: sign in with the URL duro ui printed, "
                               "or a token",
                               what);
    return ui_send_refusal(r, 429, "too_many_failures", failures, wait_s,
                           "%s; after %u failed sign-ins, a token is "
                           "checked again in %u s (a login code and a "
                           "page already signed in are not affected)",
                           what, failures, wait_s);
}

/* A token: 0 with *@p op set, 1 wrong (counted when new), 2 refused
 * unchecked; *@p failures and *@p wait_ms for the answer (0 for a wrong
 * token seen lately: repeating it teaches nothing). */
static int check_token(ui_auth *a, const char *token, size_t *op,
                       unsigned *failures, int64_t *wait_ms)
{
    int64_t now = ui_now_ms();
    uint64_t hash = secret_hash(a, 't', token);
    *failures = 0;
    *wait_ms = 0;
    pthread_mutex_lock(&a->lock);
    if (known_wrong(a, hash)) {
        pthread_mutex_unlock(&a->lock);
        return 1;
    }
    if (now < a->tokens_wait_until) {
        *failures = a->failures;
        *wait_ms = a->tokens_wait_until - now;
        pthread_mutex_unlock(&a->lock);
        return 2;
    }
    int found = 0;
    for (size_t i = 0; i < a->op_count; i++)
        if (same_secret(a->ops[i].token, a->ops[i].token_len, token)) {
            *op = i;
            found = 1;
        }
    if (!found)
        *failures = note_failure(a, hash, now, wait_ms);
    pthread_mutex_unlock(&a->lock);
    return found ? 0 : 1;
}

static int unchecked(ui_request *r, unsigned failures, int64_t wait_ms)
{
    unsigned wait_s = seconds_up(wait_ms);
    ui_log_limited(&log_unchecked, 10000,
                   "a token from %s was refused unchecked: token sign-ins "
                   "wait %u s after %u failures",
                   r->peer, wait_s, failures);
    return ui_send_refusal(r, 429, "too_many_failures", failures, wait_s,
                           "not checked: after %u failed sign-ins, a token "
                           "is checked again in %u s (a login code and a "
                           "page already signed in are not affected)",
                           failures, wait_s);
}

int ui_auth_bearer(ui_request *r, const char *token, const ui_operator **who,
                   int *rc)
{
    ui_auth *a = r->srv->auth;
    size_t op = 0;
    unsigned failures = 0;
    int64_t wait_ms = 0;
    int verdict = check_token(a, token, &op, &failures, &wait_ms);
    if (verdict == 0) {
        *who = &a->ops[op];
        return 0;
    }
    *rc = verdict == 2 ? unchecked(r, failures, wait_ms)
                       : failed(r, "wrong token", "Authorization: Bearer",
                                failures, wait_ms);
    return -1;
}

/* ---- the routes ---------------------------------------------------------- */

/* A body key other than those of @p allowed (NULL-ended): 400. */
static int unknown_key(ui_request *r, json_t *body, const char *const *allowed,
                       int *rc)
{
    const char *key;
    json_t *value;
    json_object_foreach(body, key, value)
    {
        (void)value;
        size_t i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i] == NULL) {
            char quoted[TEXT_QUOTE_SIZE];
            *rc = ui_send_error(r, 400, "bad_argument", "unknown key '%s'",
                                text_quote(key, quoted, sizeof(quoted)));
            return 1;
        }
    }
    return 0;
}

int ui_auth_post_session(ui_request *r, json_t *body)
{
    static const char *const keys[] = {"token", "code", NULL};
    ui_auth *a = r->srv->auth;
    int rc = MHD_YES;
    if (unknown_key(r, body, keys, &rc))
        return rc;
    json_t *token = json_object_get(body, "token");
    json_t *code = json_object_get(body, "code");
    if ((token == NULL) == (code == NULL) ||
        !json_is_string(token != NULL ? token : code) ||
        strlen(json_string_value(token != NULL ? token : code)) !=
            json_string_length(token != NULL ? token : code))
        return ui_send_error(r, 400, "bad_argument",
                             "give one of \"token\" or \"code\", a string");
    size_t op = 0;
    unsigned failures = 0;
    int64_t wait_ms = 0;
    if (token != NULL) {
        int verdict =
            check_token(a, json_string_value(token), &op, &failures, &wait_ms);
        if (verdict == 2)
            return unchecked(r, failures, wait_ms);
        if (verdict == 1)
            return failed(r, "wrong token", "the sign-in form", failures,
                          wait_ms);
    } else {
        /* codes are checked even while token checks wait (see the top) */
        const char *given = json_string_value(code);
        int64_t now = ui_now_ms();
        uint64_t hash = secret_hash(a, 'c', given);
        int found = 0, expired = 0;
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; i < CODES_MAX; i++) {
            login_code *c = &a->codes[i];
            if (c->code[0] == '\0' ||
                !same_secret(c->code, 2 * CODE_BYTES, given))
                continue;
            if (c->expires_ms > now) {
                found = 1;
                op = c->op;
            } else {
                expired = 1;
            }
            memset(c, 0, sizeof(*c)); /* one use, even a late one */
        }
        if (!found && !known_wrong(a, hash))
            failures = note_failure(a, hash, now, &wait_ms);
        pthread_mutex_unlock(&a->lock);
        if (!found)
            return failed(r,
                          expired ? "expired login code"
                                  : "unknown or used login code",
                          "a login URL", failures, wait_ms);
    }
    char id[2 * SESSION_BYTES + 1];
    int64_t expires = 0;
    if (new_session(a, op, id, &expires) != 0)
        return ui_send_error(r, 500, "io", "getrandom: %s", strerror(errno));
    json_t *doc = json_object();
    jset(doc, "ok", json_true());
    jset(doc, "session", jstr(id));
    jset_time(doc, "expires_at", expires);
    jset(doc, "operator", jstr(a->ops[op].name));
    jset(doc, "requested_by", jstr(a->ops[op].requester));
    jset(doc, "read_only", json_boolean(r->srv->read_only));
    explicit_bzero(id, sizeof(id));
    return ui_send_json(r, 200, doc);
}

int ui_auth_post_logout(ui_request *r, json_t *body)
{
    static const char *const keys[] = {NULL};
    ui_auth *a = r->srv->auth;
    int rc = MHD_YES;
    if (unknown_key(r, body, keys, &rc))
        return rc;
    const char *id =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Duro-Session");
    int ended = 0;
    if (id != NULL && !r->by_bearer) {
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; i < SESSIONS_MAX; i++) {
            session *s = &a->sessions[i];
            if (s->id[0] != '\0' && same_secret(s->id, 2 * SESSION_BYTES, id)) {
                memset(s, 0, sizeof(*s));
                ended = 1;
            }
        }
        pthread_mutex_unlock(&a->lock);
    }
    json_t *doc = json_object();
    jset(doc, "ok", json_true());
    jset(doc, "ended", json_boolean(ended));
    return ui_send_json(r, 200, doc);
}

void ui_login_url(const ui_server *srv, const char *code, char *out,
                  size_t size)
{
    snprintf(out, size, "http://%s:%u/#login=%s", srv->url_host, srv->port,
             code);
}

int ui_auth_post_login_code(ui_request *r, json_t *body)
{
    static const char *const keys[] = {NULL};
    int rc = MHD_YES;
    if (unknown_key(r, body, keys, &rc))
        return rc;
    char code[2 * CODE_BYTES + 1], url[1024];
    int64_t expires = 0;
    if (ui_auth_new_code(r->srv->auth, r->who, code, &expires) != 0)
        return ui_send_error(r, 500, "io", "getrandom: %s", strerror(errno));
    ui_login_url(r->srv, code, url, sizeof(url));
    fprintf(stderr, "duro ui: a login code for %s was made (from %s)\n",
            r->who->requester, r->peer);
    json_t *doc = json_object();
    jset(doc, "url", jstr(url));
    jset(doc, "operator", jstr(r->who->name));
    jset(doc, "requested_by", jstr(r->who->requester));
    jset_time(doc, "expires_at", expires);
    return ui_send_json(r, 200, doc);
}
