/* providers.h - constructors of the built-in providers, behind
 * duro_provider_open()'s URL dispatch. */
#ifndef DURO_PROVIDERS_H
#define DURO_PROVIDERS_H

#include "base/base.h"
#include "duro/provider.h"

/* `spec` is what follows "sqlite:" in the URL: a path or ":memory:",
 * optionally followed by "?key=value&...". */
int duro__sqlite_open(const char *spec, duro_provider **out, duro_error *err);
/* DURO_STORAGE, naming the file and the user, when this process cannot
 * write the SQLite store p (opened read-only, mode=ro, or a file, -wal or
 * -shm it may not write); DURO_OK for any other provider. */
int duro__sqlite_check_writable(duro_provider *p, duro_error *err);

/* Where a fetch's history starts for a caller whose cache holds events of
 * instance_id's execution: what the cache says it holds, or 0 when that is
 * more than the store's `total` (a stale cache: the instance was deleted
 * and recreated), so everything is sent. */
uint64_t duro__history_offset(const duro_history_cache *cache,
                              const char *instance_id, uint64_t execution_id,
                              uint64_t total);

/* The argument checks of ack_and_fetch_orchestration_items that both
 * built-in providers make before anything else: DURO_OK, or DURO_INVALID
 * in err (*next_count is 0 whenever next_count is not NULL). */
#define DURO__BATCH_MAX 1024
int duro__check_batch_args(size_t n, const char *const *lock_tokens,
                           const duro_orch_ack *acks, size_t max_next,
                           duro_orch_item **next, size_t *next_count,
                           duro_error *err);

/* The kinds of message that stop an instance (DURO_WORK_CANCEL_INSTANCE,
 * DURO_WORK_TERMINATE_INSTANCE), as an SQL list: no abandon delay holds
 * them back (an instance whose code is not registered anywhere waits out
 * growing delays; a cancel or terminate must not). */
#define DURO__STOP_KINDS "(8, 11)"
_Static_assert(DURO_WORK_CANCEL_INSTANCE == 8 &&
                   DURO_WORK_TERMINATE_INSTANCE == 11,
               "DURO__STOP_KINDS names the kinds by number");
#define DURO__STOPS_INSTANCE(kind)                                             \
    ((kind) == DURO_WORK_CANCEL_INSTANCE ||                                    \
     (kind) == DURO_WORK_TERMINATE_INSTANCE)

/* A reset's plan (reset_plan.c): the point P kept up to and what events 1 .. P
 * leave pending, as indexes into the history read. */
typedef struct duro__reset_plan {
    uint64_t point;
    size_t *activities; /* ActivityScheduled with no completion */
    size_t activity_count;
    size_t *timers; /* TimerCreated with no TimerFired */
    size_t timer_count;
    size_t *children; /* attached SubOrchestrationScheduled with no
                         result and no cancel request */
    size_t child_count;
} duro__reset_plan;

/* Decides the plan for a reset of ev[0..n) (instance `id`, execution
 * `execution`, dense event ids from 1) to `to` (0: the last good point;
 * provider.h, reset_instance): DURO_OK, or DURO_INVALID / DURO_NOT_FOUND /
 * DURO_NOMEM in err, with a message naming the nearest valid points.
 * Free the plan with duro__reset_plan_free(). Pure; any thread. */
int duro__reset_decide(const duro_event *ev, size_t n, const char *id,
                       uint64_t execution, uint64_t to, duro__reset_plan *plan,
                       duro_error *err);
void duro__reset_plan_free(duro__reset_plan *plan);

/* Copies url into out[size] (always terminated, cut to fit) with every
 * secret it may hold replaced by "***": the userinfo's password
 * (scheme://user:***@host/..., whole when it holds unescaped '@', '/' or
 * '?'), and the value of every query parameter but those known to hold
 * none (duro's, libpq's but its secrets; the name percent-decoded and
 * compared case-sensitively, as libpq does): pass%77ord=***, PASSWORD=***,
 * sslpassword=***, no_such=***. A parameter that is not name=value, or
 * whose name is not a plain word once decoded (password%3Dx=y), is "***"
 * whole. Returns the length written. Any thread. */
size_t duro__mask_url(const char *url, char *out, size_t size);

/* Copies text into out[size] (always terminated, cut to fit) with every
 * secret of url (what duro__mask_url hides) replaced by "***", in each
 * form text may quote it: as written in url and percent-decoded, and of a
 * parameter masked whole also its name and its value. For libpq's
 * messages, which quote a URI, a decoded parameter name or a value that
 * does not decode. The secrets are matched in text before it is cut, so a
 * cut never leaves part of one. Out of memory: a fixed sentence instead
 * of text. Returns the length written. Any thread. */
size_t duro__url_scrub(const char *url, const char *text, char *out,
                       size_t size);

/* Parses a URL parameter's decimal number of [min, max] from
 * value[0..len) (digits only, no sign): 0 and *out set, or -1. Any thread. */
int duro__parse_decimal(const char *value, size_t len, uint64_t min,
                        uint64_t max, uint64_t *out);

/* 1 when the userinfo of url (user:password@) holds an unescaped '@', '/'
 * or '?': a typo that splits the URL where its writer did not mean (libpq
 * would take part of the password for a host, port or database name and
 * quote it in its errors). Any thread. */
int duro__url_userinfo_ambiguous(const char *url);

/* `url` is the whole postgres:// or postgresql:// URL (libpq's connection
 * URI plus duro's own parameters: schema, pool, max_history,
 * max_payload). `concurrency` > 0: how many threads of the caller may use
 * the store at once, which sizes the connection pool unless the URL says
 * pool=; 0: the default pool. */
int duro__pg_open(const char *url, int concurrency, duro_provider **out,
                  duro_error *err);
/* DURO_STORAGE when the role cannot write the PostgreSQL store p (a
 * standby, read-only transactions by default, or no INSERT, UPDATE or
 * DELETE on its tables); DURO_OK for any other provider. */
int duro__pg_check_writable(duro_provider *p, duro_error *err);

/* duro_provider_open() for a caller with `concurrency` threads that may use
 * the store at once (a runtime): a provider with a connection pool sizes
 * it from that unless its URL sizes it. */
int duro__provider_open_for(const char *url, int concurrency,
                            duro_provider **out, duro_error *err);

/* Whether this process can write the store of a built-in provider (one
 * query or write lock, once, when a runtime is created): DURO_STORAGE
 * with the reason when it cannot; DURO_OK for any other provider. */
int duro__provider_check_writable(duro_provider *p, duro_error *err);

/* ---- what both built-in providers share about statuses and bulk calls
 * (bulk.c) ---------------------------------------------------------------- */

/* Live statuses (Pending, Running, Suspended: an instance that may still
 * run) and ended ones (Completed, Failed, Cancelled, Terminated), as masks
 * of (1u << status) and as SQL lists. ContinuedAsNew is neither: it names
 * a finished execution, never an instance. Every statement that means
 * "live" or "ended" uses these lists. */
#define DURO__LIVE_STATUSES                                                    \
    ((1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_RUNNING) |               \
     (1u << DURO_STATUS_SUSPENDED))
#define DURO__ENDED_STATUSES                                                   \
    ((1u << DURO_STATUS_COMPLETED) | (1u << DURO_STATUS_FAILED) |              \
     (1u << DURO_STATUS_CANCELLED) | (1u << DURO_STATUS_TERMINATED))
#define DURO__LIVE_SQL "1, 2, 7"
#define DURO__ENDED_SQL "3, 4, 5, 8"

/* What cancel_matching takes when the filter names no status: Pending and
 * Running. A Suspended instance was paused on purpose, by someone; a sweep
 * takes it only when asked (status_mask with Suspended). */
#define DURO__CANCEL_DEFAULT_STATUSES                                          \
    ((1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_RUNNING))

/* 1 when `status` is in `mask` (out-of-range statuses never are). */
int duro__status_in(uint32_t mask, int status);

/* A request sent to instances by cancel_instances / cancel_matching or by
 * control_instances / control_matching: the message it enqueues on each
 * live instance and what it takes. */
typedef struct duro__bulk_request {
    int kind;                  /* duro_work_kind of the message; 0: the
                                  control is unknown (refused by the
                                  checks below) */
    int control;               /* duro_control; 0 for a cancel */
    int cancel;                /* 1: CANCEL_INSTANCE, which goes only to an
                                  instance with no cancellation requested
                                  and records the request on it */
    uint32_t statuses;         /* what a *_matching status_mask may hold */
    uint32_t default_statuses; /* what status_mask 0 selects (0: all of
                                  `statuses`) */
    const char *op_instances;  /* the methods' names, for messages */
    const char *op_matching;
} duro__bulk_request;

/* The request of cancel_instances and cancel_matching. */
extern const duro__bulk_request duro__bulk_cancel;

/* The request of control `control` (a duro_control); an unknown one gets
 * kind 0, which the checks below refuse (DURO_INVALID). */
duro__bulk_request duro__bulk_control(int control);

/* A provider's input check of a name or id (required: NULL or empty fails
 * DURO_INVALID; too long fails DURO_TOO_LARGE); `arg` is the check_arg
 * the checks below were given (the store). */
typedef int (*duro__check_name_fn)(const void *arg, const char *what,
                                   const char *s, int required,
                                   duro_error *err);

/* The input checks of cancel_instances and control_instances, in this
 * order: NULL arrays with count > 0 (DURO_INVALID); then results (count
 * entries of duro__bulk_decision's layout) are zeroed; the control, more
 * than DURO_BULK_BATCH_MAX ids (DURO_TOO_LARGE), reason and requester,
 * each id. DURO_OK with count 0 means nothing to do. `provider` starts
 * messages. */
int duro__bulk_check_instances(const duro__bulk_request *r,
                               const char *provider,
                               const char *const *instance_ids, size_t count,
                               const char *reason, const char *requested_by,
                               void *results, duro__check_name_fn check,
                               const void *check_arg, duro_error *err);

/* Statuses a sweep binds: at most this many. */
#define DURO__BULK_STATUSES_MAX 4

/* The input checks of cancel_matching and control_matching (out NULL or
 * *out set to NULL first): the control, a NULL filter or out, the
 * filter's name and version, reason and requester, a finish bound, the
 * status mask against r->statuses. On success statuses[] holds the mask's
 * statuses, the first repeated to fill. */
int duro__bulk_check_matching(const duro__bulk_request *r, const char *provider,
                              const duro_bulk_filter *filter,
                              const char *reason, const char *requested_by,
                              duro_bulk_result **out,
                              int statuses[DURO__BULK_STATUSES_MAX],
                              duro__check_name_fn check, const void *check_arg,
                              duro_error *err);

/* The same for purge_instances: the mask within the ended statuses, a
 * positive finished_before_ms. */
int duro__bulk_check_purge(const char *provider, const duro_bulk_filter *filter,
                           duro_bulk_result **out,
                           int statuses[DURO__BULK_STATUSES_MAX],
                           duro__check_name_fn check, const void *check_arg,
                           duro_error *err);

/* One id's decision: one array of these is copied out as either
 * duro_cancel_result or duro_control_result (bulk.c checks the layouts). */
typedef struct duro__bulk_decision {
    int outcome;
    int status;
} duro__bulk_decision;

/* What a request does to one instance (duro__bulk_decide). */
enum {
    DURO__BULK_SKIP = 0,  /* nothing: not found, finished, repeated... */
    DURO__BULK_SEND = 1,  /* the message goes on its queue; its turn
                             decides */
    DURO__BULK_DECIDE = 2 /* decided in the request's transaction (provider
                             version 9): the instance has not begun */
};

/* Decides request r for an instance in `status` (DURO_STATUS_NOT_FOUND:
 * none) with `pending` a cancellation requested, at the id's first
 * occurrence in the call (`first`) or a later one, into *d (a
 * duro_cancel_outcome for a cancel, else a duro_control_outcome).
 * `unbegun`: the instance has not begun and no runtime holds it (the
 * provider's DURO__*_UNBEGUN condition), so a cancel, terminate or suspend
 * is decided at once. Returns a DURO__BULK_* action. */
int duro__bulk_decide(const duro__bulk_request *r, duro__bulk_decision *d,
                      int status, int pending, int first, int unbegun);

/* The ids a request sends its message to and those it decides at once, as
 * two arrays in the provider's literal syntax: a JSON array (SQLite's
 * json_each) or a text[] literal (PostgreSQL). */
typedef struct duro__bulk_split {
    duro__strbuf send, decide;
    size_t n_send, n_decide;
    int json; /* 1: JSON arrays; 0: text[] literals */
} duro__bulk_split;

void duro__bulk_split_open(duro__bulk_split *s, int json);
/* Adds id to the array of `action` (DURO__BULK_DECIDE, else send). */
void duro__bulk_split_add(duro__bulk_split *s, const char *id, int action);
/* Closes both arrays: DURO_NOMEM when either ran out of memory. */
int duro__bulk_split_close(duro__bulk_split *s);
void duro__bulk_split_free(duro__bulk_split *s);

/* 1 when request r is decided at once for an instance that has not begun:
 * cancel, terminate and suspend; never resume (a resume needs a
 * Suspended instance, which has begun). */
int duro__bulk_decides_unbegun(const duro__bulk_request *r);

/* ---- query_instances and list_control_events (query.c) ------------------
 * What both built-in providers share: input checks, the index path of a
 * query, the bounds their statements bind, and the cursors. The client's
 * fallback to list_instances uses the same checks and cursors. */

/* The index path a query_instances page takes, from its filters (in this
 * precedence: parent, problem, name with or without statuses, statuses,
 * name prefix, none); each provider has one statement per path and
 * order, and one count per path. */
typedef enum duro__query_path {
    DURO__QUERY_ALL = 0,     /* by id: the primary key (newest first: a
                                STATUS path of every status) */
    DURO__QUERY_NAME,        /* by id: (name, id) (newest first: a
                                NAME_STATUS path of every status) */
    DURO__QUERY_STATUS,      /* a range of (status, key, id) per status,
                                merged */
    DURO__QUERY_NAME_STATUS, /* the same with the name */
    DURO__QUERY_PREFIX,      /* the range of the names, sorted */
    DURO__QUERY_PARENT,      /* the parent's children, sorted */
    DURO__QUERY_PROBLEM,     /* the instances with a problem, sorted */
    DURO__QUERY_PATHS
} duro__query_path;

/* Statuses an instance row can hold (1..8 but 6): a STATUS path's ranges. */
#define DURO__QUERY_ARMS 7

/* What a query_instances statement binds. */
typedef struct duro__instance_plan {
    int path; /* duro__query_path */
    int order;
    size_t limit;         /* the page's rows; the statement reads one more
                             to know whether another page follows */
    const char *name;     /* exact name; NULL: any */
    const char *prefix;   /* NULL: none ("" is none) */
    char *prefix_end;     /* with prefix: the least string above every name
                             that begins with it (owned) */
    const char *contains; /* NULL: none ("" is none) */
    const char *parent;   /* NULL: any */
    const char *version;  /* exact orchestration version (query version
                             3); NULL: any */
    int with_problem;
    uint32_t mask;              /* statuses checked row by row; 0: any (the
                                   STATUS paths select by arms instead) */
    int arms[DURO__QUERY_ARMS]; /* the STATUS paths' statuses; 0 (no
                                   instance has it) for the unused */
    int64_t created_from;       /* inclusive; INT64_MIN: none */
    int64_t created_until;      /* exclusive; INT64_MAX: none */
    int64_t after_key;          /* the page is the rows after (after_key,
                                   after_id) in the order (ID order: after
                                   after_id; the key is 0) */
    char *after_id;             /* owned; "" on a first page */
    int count_total;
    int64_t count_max;  /* 0: count every match */
    int count_path;     /* duro__query_path of the count: a
                           bounded count of ALL or NAME is the
                           STATUS or NAME_STATUS count of every
                           status (arms), whose index holds the
                           created bounds */
    int64_t count_rows; /* what the count statement binds: the
                           matches it reads (count_max + 1), -1
                           for every match */
} duro__instance_plan;

/* Checks q (every error provider.h names for query_instances, messages
 * starting with `provider`), decodes its cursor, and fills *plan (free
 * with duro__query_plan_free, also after a failure). utf8: the store
 * holds UTF-8 text only (PostgreSQL): text filters must be valid UTF-8,
 * and the prefix's end is computed by code point. */
int duro__query_plan(const char *provider, const duro_instance_query *q,
                     int utf8, duro__instance_plan *plan, duro_error *err);
void duro__query_plan_free(duro__instance_plan *plan);
/* Sets page->total and total_capped from what the count statement of
 * plan counted (at most plan->count_rows; ignored without count_total). */
void duro__query_count_finish(duro_instance_page *page,
                              const duro__instance_plan *plan, int64_t counted);
/* For a page whose statement read up to plan->limit + 1 rows into
 * page->items (page->arena set): keeps plan->limit of them and, when there
 * were more, sets next_cursor (in the arena) to the last one kept. */
int duro__query_page_finish(duro_instance_page *page,
                            const duro__instance_plan *plan, duro_error *err);

/* What a list_control_events statement binds. */
typedef struct duro__event_plan {
    uint32_t mask;            /* kinds checked row by row; 0: all four */
    const char *requested_by; /* NULL: any */
    int64_t since;            /* inclusive; INT64_MIN: none */
    size_t limit;             /* as duro__instance_plan's */
    /* the page is the events below (before_ts, before_id,
       before_execution, before_event) in (timestamp, instance id,
       execution, event) order */
    int64_t before_ts;
    char *before_id; /* owned; "" on a first page */
    int64_t before_execution, before_event;
} duro__event_plan;

int duro__events_plan(const char *provider, const duro_control_event_query *q,
                      int utf8, duro__event_plan *plan, duro_error *err);
void duro__events_plan_free(duro__event_plan *plan);
int duro__events_finish(duro_control_event_list *list,
                        const duro__event_plan *plan, duro_error *err);

#endif
