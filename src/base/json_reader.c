/* json_reader.c - a small JSON reader for the documents duro reads itself (an
 * exported history, docs/history-json.md): RFC 8259 text into a tree of
 * values in one arena, with errors that say where (line and column) and
 * what was expected. Strings come out decoded and NUL-terminated; numbers
 * keep their literal text for the caller to read as it needs. Owns nothing
 * past the arena it is given; pure, one thread at a time per document. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/json_reader.h"

/* Nesting deeper than this is refused: the parser recurses once per
 * level, and no document duro reads needs more than a handful. */
#define MAX_DEPTH 64

typedef struct parser {
    const char *s;
    size_t len, at;
    duro_arena *arena;
    char *err;
    size_t err_size;
    int failed;
} parser;

/* Records the first error, with the line and column of p->at. */
static int fail(parser *p, const char *what)
{
    if (p->failed)
        return DURO_INVALID;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(p->err, p->err_size, "line %zu, column %zu: %s", line, col, what);
    p->failed = 1;
    return DURO_INVALID;
}

static void skip_space(parser *p)
{
    while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\t' ||
                              p->s[p->at] == '\n' || p->s[p->at] == '\r'))
        p->at++;
}

static duro__json *new_value(parser *p, int kind)
{
    duro__json *v = duro_arena_alloc(p->arena, sizeof(*v));
    if (v == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    memset(v, 0, sizeof(*v));
    v->kind = kind;
    return v;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->len - p->at < 4)
        return fail(p, "a \\u escape needs four hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->at++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(p, "a \\u escape needs four hex digits");
    }
    *out = v;
    return DURO_OK;
}

static void put_utf8(duro__strbuf *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    duro__strbuf_add(b, u, n);
}

/* A string at p->at (its opening quote), decoded into the arena. */
static int parse_string(parser *p, const char **out)
{
    p->at++; /* the quote */
    duro__strbuf b = {0};
    duro__strbuf_add(&b, "", 0); /* "" is a string too */
    int rc = DURO_OK;
    for (;;) {
        if (p->at >= p->len) {
            rc = fail(p, "the string does not end (no closing quote)");
            break;
        }
        unsigned char c = (unsigned char)p->s[p->at];
        if (c == '"') {
            p->at++;
            break;
        }
        if (c < 0x20) {
            rc = fail(p, "a control character in a string (escape it)");
            break;
        }
        if (c != '\\') {
            size_t n = duro__utf8_len((const unsigned char *)p->s + p->at);
            if (n == 0 || n > p->len - p->at) {
                rc = fail(p, "a string is not valid UTF-8");
                break;
            }
            duro__strbuf_add(&b, p->s + p->at, n);
            p->at += n;
            continue;
        }
        p->at++;
        if (p->at >= p->len) {
            rc = fail(p, "the string does not end (no closing quote)");
            break;
        }
        char e = p->s[p->at++];
        const char *plain = NULL;
        switch (e) {
        case '"':
            plain = "\"";
            break;
        case '\\':
            plain = "\\";
            break;
        case '/':
            plain = "/";
            break;
        case 'b':
            plain = "\b";
            break;
        case 'f':
            plain = "\f";
            break;
        case 'n':
            plain = "\n";
            break;
        case 'r':
            plain = "\r";
            break;
        case 't':
            plain = "\t";
            break;
        case 'u':
            break;
        default:
            p->at--;
            rc = fail(p, "an unknown escape in a string");
            break;
        }
        if (rc != DURO_OK)
            break;
        if (plain != NULL) {
            duro__strbuf_add(&b, plain, 1);
            continue;
        }
        unsigned cp;
        if ((rc = hex4(p, &cp)) != DURO_OK)
            break;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low;
            if (p->len - p->at < 2 || p->s[p->at] != '\\' ||
                p->s[p->at + 1] != 'u') {
                rc = fail(p, "a \\u escape of a high surrogate without its "
                             "low surrogate");
                break;
            }
            p->at += 2;
            if ((rc = hex4(p, &low)) != DURO_OK)
                break;
            if (low < 0xDC00 || low > 0xDFFF) {
                rc = fail(p, "a \\u escape of a high surrogate without its "
                             "low surrogate");
                break;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            rc = fail(p, "a \\u escape of a lone low surrogate");
            break;
        } else if (cp == 0) {
            rc = fail(p, "a string holds \\u0000, which duro's text (C "
                         "strings) cannot");
            break;
        }
        put_utf8(&b, cp);
    }
    if (rc == DURO_OK && b.oom)
        rc = fail(p, "out of memory");
    if (rc == DURO_OK) {
        *out = duro_arena_strdup(p->arena, b.s);
        if (*out == NULL)
            rc = fail(p, "out of memory");
    }
    duro__free(b.s);
    return rc;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A number's literal, checked against the JSON grammar. */
static int parse_number(parser *p, duro__json *v)
{
    size_t start = p->at;
    if (p->at < p->len && p->s[p->at] == '-')
        p->at++;
    if (p->at >= p->len || !is_digit(p->s[p->at]))
        return fail(p, "a number needs a digit");
    if (p->s[p->at] == '0')
        p->at++;
    else
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    if (p->at < p->len && p->s[p->at] == '.') {
        p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, "a number needs a digit after its '.'");
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    }
    if (p->at < p->len && (p->s[p->at] == 'e' || p->s[p->at] == 'E')) {
        p->at++;
        if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-'))
            p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, "a number needs a digit in its exponent");
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    }
    size_t n = p->at - start;
    char *text = duro_arena_alloc(p->arena, n + 1);
    if (text == NULL)
        return fail(p, "out of memory");
    memcpy(text, p->s + start, n);
    text[n] = '\0';
    v->text = text;
    return DURO_OK;
}

static int parse_value(parser *p, duro__json **out, int depth);

/* Array or object members, after the opening bracket. */
static int parse_members(parser *p, duro__json *v, int object, int depth)
{
    char close = object ? '}' : ']';
    duro__json **tail = &v->first;
    skip_space(p);
    if (p->at < p->len && p->s[p->at] == close) {
        p->at++;
        return DURO_OK;
    }
    for (;;) {
        const char *key = NULL;
        skip_space(p);
        if (object) {
            if (p->at >= p->len || p->s[p->at] != '"')
                return fail(p, "expected a member name in quotes");
            if (parse_string(p, &key) != DURO_OK)
                return DURO_INVALID;
            skip_space(p);
            if (p->at >= p->len || p->s[p->at] != ':')
                return fail(p, "expected ':' after a member name");
            p->at++;
        }
        duro__json *item;
        if (parse_value(p, &item, depth + 1) != DURO_OK)
            return DURO_INVALID;
        item->key = key;
        *tail = item;
        tail = &item->next;
        v->count++;
        skip_space(p);
        if (p->at < p->len && p->s[p->at] == ',') {
            p->at++;
            continue;
        }
        if (p->at < p->len && p->s[p->at] == close) {
            p->at++;
            return DURO_OK;
        }
        return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int literal(parser *p, const char *word, duro__json **out, int kind)
{
    size_t n = strlen(word);
    if (p->len - p->at < n || memcmp(p->s + p->at, word, n) != 0)
        return fail(p, "expected a value");
    p->at += n;
    *out = new_value(p, kind);
    return *out != NULL ? DURO_OK : DURO_INVALID;
}

static int parse_value(parser *p, duro__json **out, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(p, "nested deeper than 64 levels");
    skip_space(p);
    if (p->at >= p->len)
        return fail(p, "expected a value, found the end of the text");
    char c = p->s[p->at];
    switch (c) {
    case '{':
    case '[': {
        p->at++;
        duro__json *v =
            new_value(p, c == '{' ? DURO__JSON_OBJECT : DURO__JSON_ARRAY);
        if (v == NULL)
            return DURO_INVALID;
        *out = v;
        return parse_members(p, v, c == '{', depth);
    }
    case '"': {
        duro__json *v = new_value(p, DURO__JSON_STRING);
        if (v == NULL)
            return DURO_INVALID;
        *out = v;
        return parse_string(p, &v->text);
    }
    case 't':
        return literal(p, "true", out, DURO__JSON_TRUE);
    case 'f':
        return literal(p, "false", out, DURO__JSON_FALSE);
    case 'n':
        return literal(p, "null", out, DURO__JSON_NULL);
    default: {
        if (c != '-' && !is_digit(c))
            return fail(p, "expected a value");
        duro__json *v = new_value(p, DURO__JSON_NUMBER);
        if (v == NULL)
            return DURO_INVALID;
        *out = v;
        return parse_number(p, v);
    }
    }
}

int duro__json_parse(const char *text, size_t len, duro_arena *arena,
                     const duro__json **out, char *err, size_t err_size)
{
    parser p = {.s = text,
                .len = len,
                .arena = arena,
                .err = err,
                .err_size = err_size};
    err[0] = '\0';
    *out = NULL;
    duro__json *root = NULL;
    if (parse_value(&p, &root, 0) != DURO_OK)
        return DURO_INVALID;
    skip_space(&p);
    if (p.at != p.len)
        return fail(&p, "text after the document's end");
    *out = root;
    return DURO_OK;
}

const duro__json *duro__json_get(const duro__json *object, const char *key)
{
    if (object == NULL || object->kind != DURO__JSON_OBJECT)
        return NULL;
    for (const duro__json *m = object->first; m != NULL; m = m->next)
        if (strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

int duro__json_uint(const duro__json *v, uint64_t *out)
{
    if (v == NULL || v->kind != DURO__JSON_NUMBER || v->text[0] == '-' ||
        strpbrk(v->text, ".eE") != NULL)
        return DURO_INVALID;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v->text, &end, 10);
    if (errno != 0 || *end != '\0')
        return DURO_INVALID;
    *out = (uint64_t)n;
    return DURO_OK;
}

int duro__json_int(const duro__json *v, int64_t *out)
{
    if (v == NULL || v->kind != DURO__JSON_NUMBER ||
        strpbrk(v->text, ".eE") != NULL)
        return DURO_INVALID;
    char *end;
    errno = 0;
    long long n = strtoll(v->text, &end, 10);
    if (errno != 0 || *end != '\0')
        return DURO_INVALID;
    *out = (int64_t)n;
    return DURO_OK;
}
