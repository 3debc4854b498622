/* result.c - duro_result: what an orchestration or activity function
 * produced. Strings are heap copies so a result outlives the function. Used
 * only by the thread running the function. */
#include <stdarg.h>
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
