/* json_reader.h - the small JSON reader of json_reader.c: text into a tree of
 * values in an arena, for the documents duro reads itself (an exported
 * history). Not a general JSON library: no writer (duro__strbuf_json writes
 * strings), numbers kept as their literal. One thread at a time per document.
 */
#ifndef DURO_BASE_JSON_READER_H
#define DURO_BASE_JSON_READER_H

#include <stddef.h>
#include <stdint.h>

#include "duro/provider.h"

enum {
    DURO__JSON_NULL = 1,
    DURO__JSON_FALSE,
    DURO__JSON_TRUE,
    DURO__JSON_NUMBER,
    DURO__JSON_STRING,
    DURO__JSON_ARRAY,
    DURO__JSON_OBJECT
};

/* One value. Members of an array or object are a list from first, in
 * document order; an object's member has its name in key. */
typedef struct duro__json {
    int kind;                 /* DURO__JSON_* */
    const char *text;         /* STRING: decoded, valid UTF-8, no NUL;
                                 NUMBER: its literal */
    const char *key;          /* a member of an object: its name */
    size_t count;             /* ARRAY, OBJECT: members */
    struct duro__json *first; /* ARRAY, OBJECT: first member */
    struct duro__json *next;  /* the next member of its parent */
} duro__json;

/* Parses text[0..len) (one JSON value, whitespace around it) into a tree
 * in `arena`. DURO_OK with *out, or DURO_INVALID with err set to "line L,
 * column C: <what was expected>" (also for out of memory, and for a
 * string with \u0000, which no C string holds). */
int duro__json_parse(const char *text, size_t len, duro_arena *arena,
                     const duro__json **out, char *err, size_t err_size);
/* The member `key` of an object; NULL when absent or not an object (the
 * first, when a name repeats). */
const duro__json *duro__json_get(const duro__json *object, const char *key);
/* A number that is a non-negative integer into *out (DURO_OK), or
 * DURO_INVALID (absent, not a number, a fraction, out of range). */
int duro__json_uint(const duro__json *v, uint64_t *out);
/* The same for a signed integer. */
int duro__json_int(const duro__json *v, int64_t *out);

#endif
