/* result.c - duro_result: what an orchestration or activity function
 * produced. Strings are heap copies so a result outlives the function; text
 * that is not UTF-8 turns the result into a failure naming it. Used only by
 * the thread running the function. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

void duro__result_init(duro_result *r)
{
    memset(r, 0, sizeof(*r));
}

void duro__result_clear(duro_result *r)
{
    duro__free(r->output);
    duro__free(r->error);
    duro__result_init(r);
}

static int set_result(duro_result *r, int kind, const char *output,
                      const char *error, int category)
{
    if (r == NULL)
        return duro__fail(DURO_INVALID, "duro_result is NULL");
    duro__free(r->output);
    duro__free(r->error);
    r->output = NULL;
    r->error = NULL;
    r->kind = kind;
    r->category = category;
    r->oom = 0;
    r->invalid = 0;
    /* duro's text rule: what is not UTF-8 never reaches a store (which
     * may refuse it on every ack, or keep it for every reader to trip
     * on). The result becomes a failure that names the field; it is not
     * retried (configuration): the same code returns the same bytes. */
    const char *text = kind == DURO__RESULT_FAILED ? error : output;
    size_t n = text != NULL ? strlen(text) : 0;
    size_t at = text != NULL ? duro__utf8_check(text, n) : 0;
    if (at < n) {
        char why[96], problem[64];
        snprintf(why, sizeof(why), "%s %s",
                 kind == DURO__RESULT_FAILED ? "failure message"
                 : kind == DURO__RESULT_CONTINUE_AS_NEW
                     ? "continue-as-new input"
                     : "output",
                 duro__utf8_problem(text, at, problem, sizeof(problem)));
        r->kind = DURO__RESULT_FAILED;
        r->category = DURO_CATEGORY_CONFIGURATION;
        r->invalid = 1;
        if ((r->error = duro__strdup(why)) == NULL)
            r->oom = 1;
        return duro__fail(DURO_INVALID, "%s", why);
    }
    if (output != NULL && (r->output = duro__strdup(output)) == NULL)
        r->oom = 1;
    if (error != NULL && (r->error = duro__strdup(error)) == NULL)
        r->oom = 1;
    return kind == DURO__RESULT_FAILED ? DURO_FAILED : DURO_OK;
}

int duro_ok(duro_result *out, const char *output)
{
    return set_result(out, DURO__RESULT_OK, output, NULL, DURO_CATEGORY_NONE);
}

int duro_fail(duro_result *out, const char *message)
{
    return set_result(out, DURO__RESULT_FAILED, NULL,
                      message ? message : "failed", DURO_CATEGORY_APPLICATION);
}

int duro_fail_with(duro_result *out, int category, const char *message)
{
    if (category <= DURO_CATEGORY_NONE || category > DURO_CATEGORY_CANCELLED)
        category = DURO_CATEGORY_APPLICATION;
    return set_result(out, DURO__RESULT_FAILED, NULL,
                      message ? message : "failed", category);
}

int duro_failf(duro_result *out, const char *fmt, ...)
{
    if (fmt == NULL)
        return duro_fail(out, NULL);
    va_list ap;
    va_start(ap, fmt);
    char *msg = duro__vsprintf(fmt, ap);
    va_end(ap);
    int rc = set_result(out, DURO__RESULT_FAILED, NULL, msg ? msg : "failed",
                        DURO_CATEGORY_APPLICATION);
    if (msg == NULL && out != NULL)
        out->oom = 1;
    duro__free(msg);
    return rc;
}

int duro__result_set_continue(duro_result *out, const char *input);
int duro__result_set_continue(duro_result *out, const char *input)
{
    return set_result(out, DURO__RESULT_CONTINUE_AS_NEW, input, NULL,
                      DURO_CATEGORY_NONE);
}

void duro__result_finish(duro_result *r, int rc)
{
    if (r->kind != DURO__RESULT_UNSET)
        return;
    if (rc == DURO_OK)
        set_result(r, DURO__RESULT_OK, NULL, NULL, DURO_CATEGORY_NONE);
    else
        set_result(r, DURO__RESULT_FAILED, NULL, duro_strerror(rc),
                   DURO_CATEGORY_APPLICATION);
}
