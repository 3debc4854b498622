/* ui_reply.c - what every part of duro ui answers with: responses that
 * carry the CSP and the other security headers (ui_response, and the
 * door's raw ui_raw_error), JSON documents and error bodies, the clocks,
 * and the rate-limited log. Below ui_safety.c (the gate), ui_api.c,
 * ui_auth.c, ui_assets.c, ui_door.c and ui_server.c; calls none of them. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui.h"

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src "
    "'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

/* The headers of every response, MHD's (ui_response) and the door's
 * (ui_raw_error). */
static const char *const security_headers[][2] = {
    {"Content-Security-Policy", csp},
    {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
    {"X-Frame-Options", "DENY"},
    {"Connection", "close"},
};
#define SECURITY_HEADERS                                                       \
    (sizeof(security_headers) / sizeof(security_headers[0]))

struct MHD_Response *ui_response(const void *data, size_t len, const char *mime,
                                 int api)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return NULL;
    MHD_add_response_header(resp, "Content-Type", mime);
    for (size_t i = 0; i < SECURITY_HEADERS; i++)
        MHD_add_response_header(resp, security_headers[i][0],
                                security_headers[i][1]);
    if (api)
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    return resp;
}

/* {"error":{"code","message"}} as compact JSON text with a newline;
 * caller frees (NULL when out of memory). */
static char *error_text(const char *code, const char *message,
                        unsigned failures, unsigned retry_after_s, size_t *len)
{
    json_t *err = json_object();
    jset(err, "code", jstr(code));
    jset(err, "message", jstr(message));
    if (failures > 0) {
        jset(err, "failures", jint(failures));
        jset(err, "retry_after_s", jint(retry_after_s));
    }
    json_t *doc = json_object();
    jset(doc, "error", err);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (text == NULL)
        return NULL;
    *len = strlen(text);
    char *with_nl = realloc(text, *len + 2);
    if (with_nl == NULL) {
        free(text);
        return NULL;
    }
    with_nl[(*len)++] = '\n';
    with_nl[*len] = '\0';
    return with_nl;
}

size_t ui_raw_error(unsigned status, const char *code, const char *message,
                    char *out, size_t size)
{
    size_t body_len = 0;
    char *body = error_text(code, message, 0, 0, &body_len);
    if (body == NULL)
        return 0;
    const char *reason = MHD_get_reason_phrase_for(status);
    int n = snprintf(out, size,
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\n",
                     status, reason != NULL && *reason ? reason : "Error");
    for (size_t i = 0; i < SECURITY_HEADERS && n > 0 && (size_t)n < size; i++)
        n += snprintf(out + n, size - (size_t)n, "%s: %s\r\n",
                      security_headers[i][0], security_headers[i][1]);
    if (n > 0 && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n,
                      "Content-Length: %zu\r\n\r\n%s", body_len, body);
    free(body);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

int64_t ui_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ui_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ui_queue(ui_request *r, unsigned status, struct MHD_Response *resp)
{
    r->done = 1;
    if (resp == NULL)
        return MHD_NO; /* out of memory: MHD closes the connection */
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

int ui_send_json(ui_request *r, unsigned status, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (text == NULL)
        return ui_queue(r, status, NULL);
    size_t len = strlen(text);
    text[len] = '\n';
    struct MHD_Response *resp =
        ui_response(text, len + 1, "application/json", 1);
    free(text);
    return ui_queue(r, status, resp);
}

int ui_send_error(ui_request *r, unsigned status, const char *code,
                  const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    json_t *err = json_object();
    jset(err, "code", jstr(code));
    jset(err, "message", jstr(message));
    json_t *doc = json_object();
    jset(doc, "error", err);
    return ui_send_json(r, status, doc);
}

int ui_send_refusal(ui_request *r, unsigned status, const char *code,
                    unsigned failures, unsigned retry_after_s, const char *fmt,
                    ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    size_t len = 0;
    char *text = error_text(code, message, failures, retry_after_s, &len);
    struct MHD_Response *resp =
        text != NULL ? ui_response(text, len, "application/json", 1) : NULL;
    free(text);
    if (resp != NULL && retry_after_s > 0) {
        char seconds[16];
        snprintf(seconds, sizeof(seconds), "%u", retry_after_s);
        MHD_add_response_header(resp, "Retry-After", seconds);
    }
    return ui_queue(r, status, resp);
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void ui_log_limited(ui_ratelog *limiter, int64_t every_ms, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    int64_t now = ui_now_ms();
    pthread_mutex_lock(&log_lock);
    if (now < limiter->next_ms) {
        limiter->held++;
        pthread_mutex_unlock(&log_lock);
        return;
    }
    unsigned long held = limiter->held;
    limiter->held = 0;
    limiter->next_ms = now + every_ms;
    if (held > 0)
        fprintf(stderr,
                "duro ui: %s (and %lu more like it in the last %lld s)\n", line,
                held, (long long)((every_ms + 999) / 1000));
    else
        fprintf(stderr, "duro ui: %s\n", line);
    pthread_mutex_unlock(&log_lock);
}
