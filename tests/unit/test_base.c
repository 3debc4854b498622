/* test_base.c - the base layer: error tables, arena, allocator fault
 * injection, thread-local error detail, random tokens. */
#include <stdarg.h>
#include <stdlib.h>

#include "base/base.h"
#include "test.h"

TEST(error_names_cover_every_code)
{
#define X(name, value, text)                                                   \
    CHECK_STR(duro_errname(value), #name);                                     \
    CHECK_STR(duro_strerror(value), text);
    DURO_ERROR_TABLE(X)
#undef X
    CHECK_STR(duro_errname(9999), "DURO_UNKNOWN_CODE");
    CHECK_STR(duro_strerror(-5), "unknown error code");
}

TEST(status_names_round_trip)
{
    for (int s = DURO_STATUS_NOT_FOUND; s <= DURO_STATUS_TERMINATED; s++)
        CHECK_EQ(duro_status_parse(duro_status_name(s)), s);
    CHECK_STR(duro_status_name(DURO_STATUS_SUSPENDED), "Suspended");
    CHECK_STR(duro_status_name(DURO_STATUS_TERMINATED + 1), "Unknown");
    CHECK(duro_status_is_terminal(DURO_STATUS_TERMINATED));
    CHECK(!duro_status_is_terminal(DURO_STATUS_SUSPENDED));
    CHECK_EQ(duro_status_parse("running"), DURO_STATUS_RUNNING);
    CHECK_EQ(duro_status_parse("nonsense"), -1);
    CHECK_EQ(duro_status_parse(NULL), -1);
    CHECK(duro_status_is_terminal(DURO_STATUS_CANCELLED));
    CHECK(!duro_status_is_terminal(DURO_STATUS_CONTINUED_AS_NEW));
}

TEST(event_kind_names)
{
    CHECK_STR(duro_event_kind_name(DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
              "ActivityCancelRequested");
    CHECK_STR(
        duro_event_kind_name(DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED),
        "SubOrchestrationCancelRequested");
    CHECK_STR(duro_event_kind_name(DURO_EVENT_ORCHESTRATION_TERMINATED),
              "OrchestrationTerminated");
    CHECK_STR(duro_event_kind_name(DURO_EVENT_EXECUTION_SUSPENDED),
              "ExecutionSuspended");
    CHECK_STR(duro_event_kind_name(DURO_EVENT_EXECUTION_RESUMED),
              "ExecutionResumed");
    CHECK_STR(duro_event_kind_name(DURO_EVENT_KIND_MAX), "ExecutionReset");
    CHECK_STR(duro_event_kind_name(DURO_EVENT_KIND_MAX + 1), "Unknown");
}

TEST(arena_allocates_aligned_zeroed_memory)
{
    duro_arena *a = duro_arena_create();
    CHECK(a != NULL);
    for (int i = 0; i < 1000; i++) {
        unsigned char *p = duro_arena_alloc(a, (size_t)(i % 37) + 1);
        CHECK(p != NULL);
        CHECK_EQ((uintptr_t)p % 16, 0);
        CHECK_EQ(p[0], 0);
    }
    char *big = duro_arena_alloc(a, 100000);
    CHECK(big != NULL);
    CHECK_EQ(big[99999], 0);
    CHECK_STR(duro_arena_strdup(a, "hello"), "hello");
    CHECK(duro_arena_strdup(a, NULL) == NULL);
    duro_arena_destroy(a);
    duro_arena_destroy(NULL);
}

/* Sizes whose rounding or header arithmetic would wrap around must be
 * refused, never turned into a small block. */
TEST(arena_and_helpers_refuse_sizes_that_overflow)
{
    static const size_t ks[] = {0,  1,  2,  7,  15, 16,   17,   31,
                                32, 40, 41, 48, 64, 4095, 4096, 4097};
    duro_arena *a = duro_arena_create();
    CHECK(a != NULL);
    for (size_t i = 0; i < DURO__ARRAY_LEN(ks); i++) {
        CHECK_MSG(duro_arena_alloc(a, SIZE_MAX - ks[i]) == NULL,
                  "duro_arena_alloc(SIZE_MAX - %zu) returned a block", ks[i]);
        CHECK_MSG(duro__malloc(SIZE_MAX - ks[i]) == NULL,
                  "duro__malloc(SIZE_MAX - %zu) returned a block", ks[i]);
        CHECK_MSG(duro__realloc(NULL, SIZE_MAX - ks[i]) == NULL,
                  "duro__realloc(SIZE_MAX - %zu) returned a block", ks[i]);
    }
    CHECK(duro_arena_alloc(a, (size_t)PTRDIFF_MAX) == NULL);
    CHECK(duro_arena_alloc(a, DURO__ALLOC_MAX + 1) == NULL);
    CHECK(duro_arena_alloc(NULL, 16) == NULL);
    CHECK(duro_arena_strdup(NULL, "x") == NULL);
    CHECK(duro__calloc(SIZE_MAX / 2, 4) == NULL);
    CHECK(duro__calloc(2, SIZE_MAX - 1) == NULL);
    /* a string "longer" than memory */
    CHECK(duro__strndup("abc", SIZE_MAX) == NULL);
    CHECK(duro__strndup("abc", SIZE_MAX - 1) == NULL);
    char *s = duro__strndup("abcdef", 3);
    CHECK_STR(s, "abc");
    duro__free(s);
    /* the arena still works after refusing */
    char *p = duro_arena_alloc(a, 100);
    CHECK(p != NULL);
    CHECK_EQ(p[99], 0);
    duro_arena_destroy(a);
}

/* A growable array whose doubled capacity would wrap in elements or bytes
 * is left as it is. */
TEST(vec_push_refuses_growth_that_overflows)
{
    static const size_t elems[] = {1, 2, 8, 24, 4096};
    for (size_t i = 0; i < DURO__ARRAY_LEN(elems); i++) {
        size_t e = elems[i];
        size_t starts[] = {SIZE_MAX / e, SIZE_MAX / e / 2 + 1,
                           DURO__ALLOC_MAX / e / 2 + 1, SIZE_MAX};
        for (size_t j = 0; j < DURO__ARRAY_LEN(starts); j++) {
            void *data = NULL;
            size_t count = starts[j], cap = starts[j];
            CHECK_MSG(duro__vec_push(&data, &count, &cap, e) == NULL,
                      "elem %zu, count %zu: grew", e, starts[j]);
            CHECK(data == NULL);
            CHECK(count == starts[j]);
            CHECK(cap == starts[j]);
        }
    }
    void *data = NULL;
    size_t count = 0, cap = 0;
    CHECK(duro__vec_push(&data, &count, &cap, 0) == NULL);
    CHECK(duro__vec_push(&data, &count, &cap, SIZE_MAX / 4) == NULL);
    CHECK(data == NULL);
    for (int k = 0; k < 100; k++)
        CHECK(duro__vec_push(&data, &count, &cap, sizeof(int)) != NULL);
    CHECK_EQ(count, 100);
    duro__free(data);
}

static char *vsprintf_of(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = duro__vsprintf(fmt, ap);
    va_end(ap);
    return s;
}

TEST(sprintf_refuses_a_null_format)
{
    CHECK(vsprintf_of(NULL, 1) == NULL);
    char *s = vsprintf_of("%d", 5);
    CHECK_STR(s, "5");
    duro__free(s);
}

TEST(allocation_failure_injection)
{
    duro__alloc_fail_after(1, 0);
    void *p = duro__malloc(10);
    CHECK(p == NULL);
    p = duro__malloc(10);
    CHECK(p != NULL);
    duro__free(p);
    duro__alloc_fail_after(2, 1);
    p = duro__malloc(10);
    CHECK(p != NULL);
    CHECK(duro__malloc(10) == NULL);
    CHECK(duro__strdup("x") == NULL);
    duro__alloc_fail_after(0, 0);
    duro__free(p);
    char *s = duro__sprintf("%d-%s", 42, "x");
    CHECK_STR(s, "42-x");
    duro__free(s);
}

TEST(error_set_and_thread_local_detail)
{
    duro_error e;
    duro_error_clear(&e);
    CHECK_EQ(e.code, DURO_OK);
    CHECK_EQ(duro_error_set(&e, DURO_BUSY, 1, "db %s", "busy"), DURO_BUSY);
    CHECK_EQ(e.retryable, 1);
    CHECK_STR(e.message, "db busy");
    CHECK_EQ(duro__fail_from(&e), DURO_BUSY);
    CHECK_STR(duro_errmsg(), "db busy");
    CHECK_EQ(duro__fail(DURO_INVALID, "bad %d", 7), DURO_INVALID);
    CHECK_STR(duro_errmsg(), "bad 7");
    duro__errmsg_clear();
    CHECK_STR(duro_errmsg(), "");
}

TEST(add_ms_saturates_instead_of_overflowing)
{
    CHECK_EQ(duro__add_ms(1000, 500), 1500);
    CHECK_EQ(duro__add_ms(1000, -500), 500);
    CHECK_EQ(duro__add_ms(1795757390553, INT64_MAX), INT64_MAX);
    CHECK_EQ(duro__add_ms(INT64_MAX, INT64_MAX), INT64_MAX);
    CHECK_EQ(duro__add_ms(INT64_MAX - 1, 1), INT64_MAX);
    CHECK_EQ(duro__add_ms(-5, INT64_MIN), INT64_MIN);
    CHECK_EQ(duro__add_ms(INT64_MIN, -1), INT64_MIN);
    CHECK_EQ(duro__add_ms(INT64_MIN, INT64_MAX), -1);
}

TEST(random_tokens_differ)
{
    char a[33], b[33];
    duro__random_token(a);
    duro__random_token(b);
    CHECK_EQ(strlen(a), 32);
    CHECK(strcmp(a, b) != 0);
}

/* Scrubbing keeps valid UTF-8 as it is and drops each byte that is not
 * part of a valid sequence: a character cut in two (by "%.Ns"), a stray
 * continuation byte, an overlong form, a surrogate, past U+10FFFF. */
TEST(utf8_scrub_drops_what_is_not_utf8)
{
    static const char *const cases[][2] = {
        {"plain ascii", "plain ascii"},
        {"\xce\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "\xce\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"cut \xce' here", "cut ' here"},       /* Omega's first byte */
        {"cut \xe2\x82", "cut "},               /* at the end */
        {"\x80stray", "stray"},                 /* continuation alone */
        {"over\xc0\xaflong", "overlong"},       /* overlong '/' */
        {"sur\xed\xa0\x80rogate", "surrogate"}, /* U+D800 */
        {"big\xf4\x90\x80\x80", "big"},         /* U+110000 */
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", cases[i][0]);
        size_t n = duro__utf8_scrub(buf);
        CHECK_STR(buf, cases[i][1]);
        CHECK_EQ(n, strlen(cases[i][1]));
    }
}

/* The validator of duro's text rule: the offset of the first byte that
 * does not begin a valid UTF-8 sequence, or the length when all is valid.
 * Every way UTF-8 can be wrong is caught at the right byte: a stray
 * continuation byte, the lead bytes that can never begin a shortest form
 * (0xC0, 0xC1, 0xF5..0xFF), overlong forms of each length, surrogates,
 * code points past U+10FFFF, sequences cut short by the end of the text
 * or by a byte that is not a continuation, and a NUL byte inside the
 * length (duro's strings end at their NUL: a NUL is never part of one). */
TEST(utf8_check_finds_the_first_invalid_byte)
{
    static const struct {
        const char *s;
        size_t n;  /* bytes checked */
        size_t at; /* expected: n when valid */
    } cases[] = {
        {"", 0, 0},
        {"plain ascii", 11, 11},
        /* the boundaries of each length, valid */
        {"\x7f", 1, 1},
        {"\xc2\x80", 2, 2},         /* U+0080 */
        {"\xdf\xbf", 2, 2},         /* U+07FF */
        {"\xe0\xa0\x80", 3, 3},     /* U+0800 */
        {"\xed\x9f\xbf", 3, 3},     /* U+D7FF */
        {"\xee\x80\x80", 3, 3},     /* U+E000 */
        {"\xef\xbf\xbf", 3, 3},     /* U+FFFF */
        {"\xf0\x90\x80\x80", 4, 4}, /* U+10000 */
        {"\xf4\x8f\xbf\xbf", 4, 4}, /* U+10FFFF */
        {"\xce\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 11, 11},
        /* stray continuation bytes */
        {"\x80", 1, 0},
        {"ab\xbf", 3, 2},
        /* lead bytes that begin no shortest form */
        {"\xc0\x80", 2, 0}, /* overlong NUL */
        {"x\xc1\xbf", 3, 1},
        {"\xf5\x80\x80\x80", 4, 0},
        {"\xff", 1, 0},
        {"\xfe\xff", 2, 0},
        /* overlong three- and four-byte forms */
        {"\xe0\x80\xaf", 3, 0},     /* '/' in three bytes */
        {"\xe0\x9f\xbf", 3, 0},     /* U+07FF in three bytes */
        {"\xf0\x80\x80\xaf", 4, 0}, /* '/' in four bytes */
        {"\xf0\x8f\xbf\xbf", 4, 0}, /* U+FFFF in four bytes */
        /* surrogates, alone and as a CESU-8 pair */
        {"sur\xed\xa0\x80", 6, 3},          /* U+D800 */
        {"\xed\xbf\xbf", 3, 0},             /* U+DFFF */
        {"\xed\xa0\xbd\xed\xb8\x80", 6, 0}, /* U+1F600 as CESU-8 */
        /* past U+10FFFF */
        {"big\xf4\x90\x80\x80", 7, 3}, /* U+110000 */
        {"\xf7\xbf\xbf\xbf", 4, 0},
        /* cut short: by the end, by the length, by a byte that is not a
         * continuation */
        {"cut \xe2\x82", 6, 4},
        {"\xf0\x9f\x98", 3, 0},
        {"\xce\xa9", 1, 0}, /* the length ends inside it */
        {"\xe2\x82\xac", 2, 0},
        {"\xe2(\xac", 3, 0},
        {"\xf0\x9f\x98x", 4, 0},
        /* a NUL within the length is not text */
        {"a\0b", 3, 1},
        {"\0", 1, 0},
        /* the first of several problems */
        {"ok \xce\xa9 then \xff and \x80", 17, 11},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(duro__utf8_check(cases[i].s, cases[i].n) == cases[i].at,
                  "case %zu: %zu, expected %zu", i,
                  duro__utf8_check(cases[i].s, cases[i].n), cases[i].at);
    /* every code point from U+0001 to U+10FFFF, encoded by hand, is valid
     * exactly when it is not a surrogate */
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp++) {
        unsigned char b[4];
        size_t n;
        if (cp < 0x80) {
            b[0] = (unsigned char)cp;
            n = 1;
        } else if (cp < 0x800) {
            b[0] = (unsigned char)(0xC0 | (cp >> 6));
            b[1] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            b[0] = (unsigned char)(0xE0 | (cp >> 12));
            b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            b[2] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            b[0] = (unsigned char)(0xF0 | (cp >> 18));
            b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            b[3] = (unsigned char)(0x80 | (cp & 0x3F));
            n = 4;
        }
        size_t want = cp >= 0xD800 && cp <= 0xDFFF ? 0 : n;
        if (duro__utf8_check((const char *)b, n) != want) {
            CHECK_MSG(0, "U+%04X: %zu, expected %zu", (unsigned)cp,
                      duro__utf8_check((const char *)b, n), want);
            break;
        }
        /* and it agrees with duro__utf8_len, the scrub's and the cut's */
        unsigned char z[5] = {0};
        memcpy(z, b, n);
        if (duro__utf8_len(z) != want) {
            CHECK_MSG(0, "U+%04X: duro__utf8_len %zu", (unsigned)cp,
                      duro__utf8_len(z));
            break;
        }
    }
}

/* The API's form: NULL and valid text pass; anything else is DURO_INVALID
 * naming the field, the byte's offset and its value. */
TEST(utf8_api_check_names_the_field_and_the_byte)
{
    CHECK_RC(duro__check_utf8("input", NULL), DURO_OK);
    CHECK_RC(duro__check_utf8("input", ""), DURO_OK);
    CHECK_RC(duro__check_utf8("input", "caf\xc3\xa9"), DURO_OK);
    CHECK_RC(duro__check_utf8("activity 'A' output", "caf\xe9!"), DURO_INVALID);
    CHECK_STR(duro_errmsg(),
              "activity 'A' output is not valid UTF-8 at byte 3 (0xE9)");
    duro_error e;
    duro_error_clear(&e);
    CHECK_EQ(duro__check_utf8_err("payload", "ok", &e), DURO_OK);
    CHECK_EQ(duro__check_utf8_err("payload", "\xc0\xaf", &e), DURO_INVALID);
    CHECK_EQ(e.code, DURO_INVALID);
    CHECK_EQ(e.retryable, 0);
    CHECK_STR(e.message, "payload is not valid UTF-8 at byte 0 (0xC0)");
}

/* A cut never splits a character: it ends before the one that would not
 * fit; a string shorter than the cut is whole. */
TEST(utf8_cut_ends_on_a_character_boundary)
{
    const char *s = "ab\xce\xa9"
                    "cd\xe2\x82\xac"; /* "ab", Omega, "cd", Euro */
    CHECK_EQ(duro__utf8_cut(s, 0), 0);
    CHECK_EQ(duro__utf8_cut(s, 2), 2);
    CHECK_EQ(duro__utf8_cut(s, 3), 2); /* not half the Omega */
    CHECK_EQ(duro__utf8_cut(s, 4), 4);
    CHECK_EQ(duro__utf8_cut(s, 7), 6); /* not two thirds of the Euro */
    CHECK_EQ(duro__utf8_cut(s, 8), 6);
    CHECK_EQ(duro__utf8_cut(s, 9), 9);
    CHECK_EQ(duro__utf8_cut(s, 100), 9);
}

/* What a log sink received: the logger's escaping is seen from outside. */
static char logged[4096];
static int logged_level;

static void capture_log(void *user, int level, const char *message)
{
    (void)user;
    logged_level = level;
    snprintf(logged, sizeof(logged), "%s", message);
}

/* Every sink gets one safe line: a newline in an instance id cannot forge
 * a second log line, nor a bidirectional control reorder it on a
 * terminal; other text (UTF-8 letters, a backslash) is kept as it is. */
TEST(log_lines_escape_control_characters)
{
    duro__logger lg = {DURO_LOG_INFO, capture_log, NULL};
    duro__log(&lg, DURO_LOG_WARN, "instance '%s' failed: %s",
              "evil\nduro error: forged\r\x1b[31m",
              "\xe2\x80\xae"
              "txt.exe \xe2\x81\xa6x\xe2\x81\xa9 \xd8\x9c\xe2\x80\x8e"
              "\xe2\x80\x8f\xe2\x80\xaa\xc2\x9b\x7f\x01\t\xff "
              "\xce\xa9 back\\slash \xe2\x80\xa8");
    CHECK_EQ(logged_level, DURO_LOG_WARN);
    CHECK_STR(logged, "instance 'evil\\nduro error: forged\\r\\x1b[31m' "
                      "failed: \\u202etxt.exe \\u2066x\\u2069 "
                      "\\u061c\\u200e\\u200f\\u202a\\u009b\\x7f\\x01\\t\\xff "
                      "\xce\xa9 back\\slash \\u2028");
    CHECK(strchr(logged, '\n') == NULL);
    /* below the level: nothing */
    logged[0] = '\0';
    duro__log(&lg, DURO_LOG_DEBUG, "%s", "x\ny");
    CHECK_STR(logged, "");
    /* a message whose escaped form is longer than a line holds is cut on a
     * character boundary, with "..." */
    char big[1000];
    memset(big, '\x01', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    duro__log(&lg, DURO_LOG_ERROR, "%s", big);
    size_t len = strlen(logged);
    CHECK(len > 1000 && len < 2048);
    CHECK_STR(logged + len - 7, "\\x01...");
    char out[16];
    CHECK_EQ(duro__log_escape("\xe2\x80\xae\xe2\x80\xae\xe2\x80\xae", out,
                              sizeof(out)),
             9);
    CHECK_STR(out, "\\u202e...");
}

TEST(provider_open_rejects_bad_urls)
{
    duro_provider *p = (duro_provider *)1;
    duro_error e;
    CHECK_PRC(duro_provider_open("", &p, &e), DURO_BAD_URL, &e);
    CHECK(p == NULL);
    CHECK_PRC(duro_provider_open(NULL, &p, &e), DURO_BAD_URL, &e);
    CHECK_PRC(duro_provider_open("mysql://x", &p, &e), DURO_BAD_URL, &e);
    CHECK(strstr(e.message, "mysql://x") != NULL);
    /* the reason reaches duro_errmsg() too, also without err */
    CHECK_STR(duro_errmsg(), e.message);
    duro__errmsg_clear();
    CHECK_RC(duro_provider_open("mysql://y", &p, NULL), DURO_BAD_URL);
    CHECK(strstr(duro_errmsg(), "mysql://y") != NULL);
    CHECK(p == NULL);
    duro__errmsg_clear();
    CHECK_RC(duro_provider_open("sqlite:x", NULL, NULL), DURO_INVALID);
    CHECK(duro_errmsg()[0] != '\0');
    duro_provider_close(NULL);
}

TEST_MAIN(T(utf8_scrub_drops_what_is_not_utf8),
          T(utf8_check_finds_the_first_invalid_byte),
          T(utf8_api_check_names_the_field_and_the_byte),
          T(utf8_cut_ends_on_a_character_boundary),
          T(error_names_cover_every_code), T(status_names_round_trip),
          T(event_kind_names), T(arena_allocates_aligned_zeroed_memory),
          T(allocation_failure_injection), T(error_set_and_thread_local_detail),
          T(random_tokens_differ), T(provider_open_rejects_bad_urls),
          T(log_lines_escape_control_characters),
          T(arena_and_helpers_refuse_sizes_that_overflow),
          T(vec_push_refuses_growth_that_overflows),
          T(sprintf_refuses_a_null_format),
          T(add_ms_saturates_instead_of_overflowing))
