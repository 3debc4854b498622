/* strbuf.c - a growing string for literals bound as one statement
 * parameter (JSON arrays, PostgreSQL array literals). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static void reserve(duro__strbuf *b, size_t more)
{
    if (b->oom || b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return;
        }
        cap *= 2;
    }
    char *s = duro__realloc(b->s, cap);
    if (s == NULL) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
}

void duro__strbuf_add(duro__strbuf *b, const char *v, size_t n)
{
    reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->s + b->len, v, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void duro__strbuf_json(duro__strbuf *b, const char *v)
{
    duro__strbuf_add(b, "\"", 1);
    for (const unsigned char *u = (const unsigned char *)v; *u; u++) {
        char esc[8];
        if (*u == '"' || *u == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*u;
            duro__strbuf_add(b, esc, 2);
        } else if (*u < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", *u);
            duro__strbuf_add(b, esc, 6);
        } else {
            duro__strbuf_add(b, (const char *)u, 1);
        }
    }
    duro__strbuf_add(b, "\"", 1);
}

void duro__strbuf_quoted(duro__strbuf *b, const char *v)
{
    duro__strbuf_add(b, "\"", 1);
    for (const char *u = v; *u; u++) {
        if (*u == '"' || *u == '\\')
            duro__strbuf_add(b, "\\", 1);
        duro__strbuf_add(b, u, 1);
    }
    duro__strbuf_add(b, "\"", 1);
}

void duro__strbuf_open(duro__strbuf *b, char bracket)
{
    b->len = 0;
    duro__strbuf_add(b, &bracket, 1);
}

void duro__strbuf_sep(duro__strbuf *b)
{
    if (b->len > 1)
        duro__strbuf_add(b, ",", 1);
}
