/* cli.h - what the modules of the duro command share: the per-run context
 * (store URL, output mode, colour), exit codes, argument parsers (args.c),
 * JSON helpers (json.c), human-output helpers (text.c) and the verbs.
 * Single-threaded: the command runs one verb and exits. */
#ifndef DURO_CLI_H
#define DURO_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "duro.h"
#include "duro/provider.h"

/* Exit statuses (duro(1), EXIT STATUS). 0-4 are the contract of every
 * verb; 7 is a deadline's (wait, cancel and terminate --wait); 8-10 are
 * wait's own, one per way of ending but completed. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,          /* the operation failed; the message says why */
    EXIT_USAGE = 2,           /* bad command line or input */
    EXIT_NOT_FOUND = 3,       /* no such instance */
    EXIT_INVALID_STATE = 4,   /* e.g. cancel or terminate of a finished
                                 instance; --wait: it ended otherwise */
    EXIT_TIMEOUT = 7,         /* still live at the deadline */
    EXIT_WAIT_FAILED = 8,     /* wait: ended Failed */
    EXIT_WAIT_CANCELLED = 9,  /* wait: ended Cancelled */
    EXIT_WAIT_TERMINATED = 10 /* wait: ended Terminated */
};

typedef struct cli {
    const char *verb; /* "list", ... (NULL before dispatch) */
    const char *db;   /* --db, else $DURO_DB, else "sqlite:duro.db" */
    int json;         /* --json: one JSON document on stdout */
    int color;        /* ANSI colour on stdout */
    int64_t now_ms;   /* the command's clock, read once */
} cli;

/* ---- main.c -------------------------------------------------------------- */

/* Prints "duro VERB: message" on stderr and, with --json, the error document
 * {"error":{"code","message"}} on stdout; returns @p status. @p code is the
 * JSON code ("usage", "not_found", ...). */
int cli_error(cli *c, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* cli_error for a failed duro call: the exit status and JSON code follow
 * @p rc (DURO_NOT_FOUND: 3, DURO_INVALID_STATE: 4, else 1), the message is
 * duro_errmsg() (or duro_strerror(rc)). */
int cli_error_rc(cli *c, int rc, const char *what);
/* Before a destructive command by query: on a terminal (stdin and stderr
 * both are one) asks "ACTION 1,201 instances of NAME? [y/N]" on stderr
 * (NAME may be NULL) and reads the answer; 1 for y or yes (any case), 0
 * otherwise (end of input too). Without a terminal, or for 0 instances,
 * asks nothing and returns 1. */
int cli_confirm(const char *action, uint64_t count, const char *name);
/* 1 when stdin and stderr are both a terminal: a person may be asked. */
int cli_interactive(void);
/* Usage error: exit 2, with "(see duro VERB --help)". */
int cli_usage(cli *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* How a verb opens the store. */
enum {
    CLI_OPEN_EXISTING = 0, /* adds create=0 (when the URL does not say
                              create=): a missing store is an error and
                              nothing is created */
    CLI_OPEN_CREATE = 1,   /* as the URL says (start) */
    CLI_OPEN_READ = 2      /* as EXISTING, and mode=ro for a sqlite URL
                              that says neither create= nor mode=: the
                              verbs that only read never write the file */
};

/* Opens the client as @p how says (CLI_OPEN_*). On failure reports (exit
 * 1) and returns the exit status. */
int cli_open(cli *c, int how, duro_client **out);

/* One page of keyset paging by instance id: up to `limit` instances of
 * `filter` after *after (NULL: from the first), then *after becomes the
 * page's last id (NULL when the page is empty or that copy failed). The
 * caller frees *page and, at the end, *after. duro_client_list's code. */
int cli_list_page(duro_client *client, duro_instance_filter *filter,
                  size_t limit, char **after, duro_instance_list **page);

/* After a query by orchestration name @p name matched nothing: when no
 * instance in the store has that name at all (duro_client_store_stats),
 * says so on stderr with the closest name there (edit distance), so that
 * a typo is not taken for "nothing to do". Nothing when the name exists
 * or the store cannot say. */
void cli_note_unknown_name(cli *c, duro_client *client, const char *name);

/* Options every verb takes besides its own: --db, --json, --help. */
enum { OPT_DB = 0x100, OPT_JSON, OPT_HELP };
#define CLI_COMMON_OPTIONS                                                     \
    {"db", required_argument, NULL, OPT_DB},                                   \
        {"json", no_argument, NULL, OPT_JSON},                                 \
    {                                                                          \
        "help", no_argument, NULL, OPT_HELP                                    \
    }

/* A first pass over the arguments that only looks for --json (main's global
 * options and cli_getopt's), so that a usage error met before it is a JSON
 * document too. Leaves optind reset. */
void cli_scan_json(cli *c, int argc, char **argv, const char *shortopts,
                   const struct option *opts);

/* getopt_long over a verb's options (with CLI_COMMON_OPTIONS), from
 * argv[1]. Returns the option, -1 at the end, or -2 after reporting a usage
 * error in *status (unknown option, missing argument, an abbreviated long
 * option) or --help printed (*status 0). Handles the common options. */
int cli_getopt(cli *c, int argc, char **argv, const struct option *opts,
               const char *help, int *status);

/* Prints the usage text of a verb. */
void cli_print_help(const char *help);

/* ---- args.c -------------------------------------------------------------- */

/* Each returns 0 on success; -1 after reporting a usage error (exit 2). */
int args_time(cli *c, const char *option, const char *text, int64_t *ms);
/* An RFC 3339 / ISO 8601 date or time (args_time's forms but "now" and
 * durations) into ms since the epoch: 0, or -1 when malformed or when
 * the date does not exist. */
int args_parse_iso(const char *s, int64_t *ms);
int args_duration(cli *c, const char *option, const char *text, int64_t *ms);
/* A deadline: an RFC 3339 time or date (*deadline_ms), or a duration after
 * the start, more than 0 (*timeout_ms); the other is 0. -1 after a usage
 * error. */
int args_deadline(cli *c, const char *option, const char *text,
                  int64_t *deadline_ms, int64_t *timeout_ms);
int args_status_mask(cli *c, const char *option, const char *text,
                     uint32_t *mask);
int args_uint(cli *c, const char *option, const char *text, uint64_t max,
              uint64_t *out);
int args_uint_range(cli *c, const char *option, const char *text, uint64_t min,
                    uint64_t max, uint64_t *out);
/* TEXT, or the contents of FILE for "@FILE" (caller frees with free()). */
int args_payload(cli *c, const char *option, const char *text, char **out);
/* "pending", "running", "completed", "failed", "cancelled",
 * "continued_as_new", "suspended", "terminated"; "unknown" otherwise. A
 * status mask never takes continued_as_new: an instance that continues as
 * new stays running, so it would match nothing. */
const char *status_word(int status);
/* 1 when a cancellation was requested of a live instance that has not
 * ended yet: one registered with observe_cancel cleaning up (it stays
 * Running), or any before its next turn. */
int instance_cancelling(const duro_instance_info *info);
/* What became of the cancellation requested of an instance: NULL when
 * none was (and it is not Cancelled); "pending" while it is live (the
 * next turn decides, or an observe_cancel cleanup runs); "cancelled";
 * "too_late" when it ended Completed or Failed all the same (the request
 * arrived while the turn that finished it ran); "terminated" when a
 * termination ended it before the cancel did. */
const char *cancel_outcome(const duro_instance_info *info);
/* The default requester: "user:NAME" (getpwuid, else $USER). */
const char *args_default_requester(char *buf, size_t size);

/* ---- json.c -------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1-4: no overlong form, no
 * surrogate, nothing past U+10FFFF), or 0 when invalid. */
size_t utf8_sequence(const unsigned char *s);
/* A JSON string of @p s with invalid UTF-8 replaced by U+FFFD; null for
 * NULL. Never NULL (aborts on out of memory). */
json_t *jstr(const char *s);
/* A payload: the JSON it holds when it parses as JSON, otherwise jstr. */
json_t *jpayload(const char *s);
json_t *jint(int64_t v);
/* Sets "KEY" (RFC 3339 UTC with ms) and "KEY_ms" on @p obj; both null for
 * 0. */
void jset_time(json_t *obj, const char *key, int64_t ms);
void jset(json_t *obj, const char *key, json_t *value); /* steals value */
/* An instance's JSON object. */
json_t *json_instance(const duro_instance_info *info);
/* A bulk result (cancel by query, purge): {"dry_run","count","ids"}. */
json_t *json_bulk(const duro_bulk_result *r, int dry_run);
/* Who asked for the cancellation (@p requester) and the termination
 * (@p terminator) of the instance whose history @p h is, from its events,
 * else the instance's @p cancelled_by; NULL when unknown. Borrowed. */
void history_deciders(const duro_history *h, const char *cancelled_by,
                      const char **requester, const char **terminator);
/* One history event's JSON object (`duro history --json`); offset_ms is
 * from @p start_ms; @p requester and @p terminator as history_deciders'
 * give requested_by to the events whose text shows who decided them. */
json_t *json_event(const duro_event *e, int64_t start_ms, const char *requester,
                   const char *terminator);
/* A schedule's overlap policy as a word ("skip", "buffer-one", "allow-all",
 * "cancel-other", "terminate-other"; "unknown"), and back (-1: none). */
const char *schedule_overlap_word(int overlap);
int schedule_overlap_parse(const char *word);
/* A fire's action: "started", "skipped", "buffered", "stopped". */
const char *schedule_action_word(int action);
/* A schedule's spec, a listed schedule and one of its fires as `duro
 * schedule ... --json` shows them. */
json_t *json_schedule_spec(const duro_schedule_spec *s);
json_t *json_schedule_info(const duro_schedule_info *s);
json_t *json_schedule_fire(const duro_schedule_fire *f);
/* Prints @p doc (indented, a newline after) on stdout and frees it. 0, or
 * -1 when it could not be written. */
int json_print(json_t *doc);
/* Prints value v (and drops it) as json_print would inside a document, at
 * nesting depth `depth` (its lines indented 2 * depth spaces, the first
 * one too), without a newline at its end. 0, or -1 when stdout failed. */
int json_print_nested(json_t *v, int depth);

/* ---- text.c -------------------------------------------------------------- */

/* "2026-05-01 12:03:04 +0200" (local time) into buf; "-" for 0. */
const char *text_local_time(int64_t ms, char *buf, size_t size);
/* @p ms as the wall clock of time zone @p zone (a tz database name; NULL
 * or "": UTC) reads it, "2026-03-29 03:00 +02:00" (seconds only when not
 * 0), into buf; "" when the zone cannot be read. */
const char *text_zone_time(const char *zone, int64_t ms, char *buf,
                           size_t size);
/* "3m ago", "in 2h", "just now"; "-" for 0. */
const char *text_age(int64_t now_ms, int64_t ms, char *buf, size_t size);
/* "1.206s", "45ms", "3m12s". */
const char *text_duration(int64_t ms, char *buf, size_t size);
/* A one-line rendering of @p s at most @p max characters (code points),
 * safe on a terminal: control characters escaped (\n, \t, \r, \x1b, \x7f;
 * C1 controls U+0080..U+009F, the bidirectional controls U+061C, U+200E,
 * U+200F, U+202A..U+202E, U+2066..U+2069 and the separators U+2028,
 * U+2029 as \u202e; a byte of invalid UTF-8 as \xff), cut with "…". "-"
 * for NULL. The one function every text output of ids, names, reasons,
 * requesters, payloads and messages goes through. */
const char *text_short(const char *s, size_t max, char *buf, size_t size);
/* Room for a whole escaped id, name, reason or requester (the library
 * refuses them over 1024 bytes; an escape is at most 6 bytes a byte). */
#define TEXT_ESCAPE_SIZE (1024 * 6 + 16)
/* @p s whole, escaped as text_short: what the text output prints of ids,
 * names, reasons and requesters (cut with "…" only past @p size). */
const char *text_escape(const char *s, char *buf, size_t size);
/* User input quoted in an error: escaped and cut after TEXT_QUOTE_CHARS
 * characters, so that the reason after it always shows. */
#define TEXT_QUOTE_CHARS 64
#define TEXT_QUOTE_SIZE (TEXT_QUOTE_CHARS * 6 + 16)
const char *text_quote(const char *s, char *buf, size_t size);
/* The ids of a bulk result, one per line, the first 50 (with a note on
 * the rest). */
void text_bulk_ids(const duro_bulk_result *r);
/* @p n with thousands separated by commas: "1,201". */
const char *text_count(uint64_t n, char *buf, size_t size);
/* Display width (code points) of UTF-8 @p s. */
size_t text_width(const char *s);
/* Prints @p s padded to @p width columns. */
void text_pad(const char *s, size_t width);
/* ANSI colour for a status, or "" without colour; text_reset ends it. */
const char *text_status_color(const cli *c, int status);
const char *text_reset(const cli *c);
const char *text_dim(const cli *c);
/* Whether stdout may get colour: a terminal, NO_COLOR empty, TERM not
 * dumb. */
int text_use_color(void);

/* ---- verbs --------------------------------------------------------------- */

int cmd_list(cli *c, int argc, char **argv);
int cmd_status(cli *c, int argc, char **argv);
int cmd_history(cli *c, int argc, char **argv);
int cmd_wait(cli *c, int argc, char **argv);
int cmd_start(cli *c, int argc, char **argv);
int cmd_raise(cli *c, int argc, char **argv);
int cmd_cancel(cli *c, int argc, char **argv);
int cmd_terminate(cli *c, int argc, char **argv);
int cmd_suspend(cli *c, int argc, char **argv);
int cmd_resume(cli *c, int argc, char **argv);
int cmd_reset(cli *c, int argc, char **argv);  /* cmd_reset.c */
int cmd_rewind(cli *c, int argc, char **argv); /* cmd_reset.c */
int cmd_delete(cli *c, int argc, char **argv);
int cmd_purge(cli *c, int argc, char **argv);
int cmd_prune(cli *c, int argc, char **argv);
int cmd_metrics(cli *c, int argc, char **argv);
int cmd_schedule(cli *c, int argc, char **argv); /* cmd_schedule.c */
int cmd_version(cli *c, int argc, char **argv);
int cmd_runtimes(cli *c, int argc, char **argv);
int cmd_ui(cli *c, int argc, char **argv); /* ui_server.c, or ui_none.c */

/* ---- cmd_metrics.c ------------------------------------------------------- */

/* The store's gauges in the Prometheus text format 0.0.4 (duro metrics). */
void metrics_write_text(FILE *f, const duro_store_stats *st);
/* The same as one JSON document (duro metrics --json). */
json_t *metrics_json(const duro_store_stats *st);

#endif
