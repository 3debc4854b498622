/* test_metrics.c - the runtime's Prometheus metrics (issue 8): exact
 * counter values per name, outcome and reason after real orchestrations and
 * activities (completed, failed, cancelled by a select loss and by an
 * instance cancel, also when the cancel commits before the completion's
 * ack, abandoned past the grace period and at shutdown, unregistered
 * names); a strict line-by-line checker of the text exposition format
 * 0.0.4, written here and shown to reject bad inputs; the buffer variant's
 * truncation; scrapes while the runtime runs; and promtool's verdict when
 * promtool is available. Waits are deadline-based. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"
#include "runtime/runtime.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------
 * the exposition checker
 *
 * Strict: it accepts what the Prometheus text format 0.0.4 allows and duro
 * writes, and rejects, besides every format error, what duro never writes
 * (blank lines, comments other than HELP and TYPE, timestamps, a family
 * without HELP) and what promtool's lint rejects (a counter not named
 * *_total, a non-counter named *_total). */

#define MAX_LABELS 8

typedef struct hist_series {
    char *key; /* the labels other than le */
    double last_le;
    uint64_t last_cumulative;
    int buckets, inf_seen, sum_seen, count_seen;
    double inf_value, count_value;
} hist_series;

typedef struct checker {
    char why[1024];
    int line;
    char family[256]; /* current family; "" before the first */
    char type[16];
    int has_type;
    char **done; /* families already finished */
    size_t done_count;
    char **series; /* every series key, to find duplicates */
    size_t series_count, series_cap;
    hist_series *hist; /* the current histogram family's series */
    size_t hist_count;
} checker;

/* Records why the text is bad (line number first); returns 0. */
static int bad_text(checker *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int bad_text(checker *c, const char *fmt, ...)
{
    int n = snprintf(c->why, sizeof(c->why), "line %d: ", c->line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + n, sizeof(c->why) - (size_t)n, fmt, ap);
    va_end(ap);
    return 0;
}

#define BAD(c, ...) return bad_text((c), __VA_ARGS__)

static int name_start(int ch, int colon)
{
    return isalpha(ch) || ch == '_' || (colon && ch == ':');
}

static int name_char(int ch, int colon)
{
    return isalnum(ch) || ch == '_' || (colon && ch == ':');
}

/* Length of the metric name (colon) or label name at p, 0 if none. */
static size_t name_len(const char *p, int colon)
{
    if (!name_start((unsigned char)p[0], colon))
        return 0;
    size_t n = 1;
    while (name_char((unsigned char)p[n], colon))
        n++;
    return n;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A sample value: a decimal float, NaN, +Inf or -Inf. */
static int parse_value(const char *p, double *out)
{
    if (strcmp(p, "NaN") == 0) {
        *out = NAN;
        return 1;
    }
    if (strcmp(p, "+Inf") == 0 || strcmp(p, "-Inf") == 0) {
        *out = p[0] == '+' ? INFINITY : -INFINITY;
        return 1;
    }
    const char *q = p;
    if (*q == '-')
        q++;
    if (!isdigit((unsigned char)*q))
        return 0;
    while (isdigit((unsigned char)*q))
        q++;
    if (*q == '.') {
        q++;
        if (!isdigit((unsigned char)*q))
            return 0;
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!isdigit((unsigned char)*q))
            return 0;
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (*q != '\0')
        return 0;
    *out = strtod(p, NULL);
    return 1;
}

static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 2, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 3, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 4, min = 0x10000;
        } else {
            return 0;
        }
        if (i + k > n)
            return 0;
        cp = c & (0x7fu >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k;
    }
    return 1;
}

typedef struct label {
    char name[128];
    char value[4096]; /* as written (escaped) */
} label;

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const label *)a)->name, ((const label *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Checks and ends the current histogram family. */
static int finish_histograms(checker *c)
{
    for (size_t i = 0; i < c->hist_count; i++) {
        hist_series *h = &c->hist[i];
        const char *k = h->key;
        if (!h->inf_seen)
            BAD(c, "histogram %s{%s} has no le=\"+Inf\" bucket", c->family, k);
        if (!h->sum_seen)
            BAD(c, "histogram %s{%s} has no _sum", c->family, k);
        if (!h->count_seen)
            BAD(c, "histogram %s{%s} has no _count", c->family, k);
        if (h->inf_value != h->count_value)
            BAD(c, "histogram %s{%s}: +Inf bucket %g != _count %g", c->family,
                k, h->inf_value, h->count_value);
    }
    return 1;
}

static void free_histograms(checker *c)
{
    for (size_t i = 0; i < c->hist_count; i++)
        free(c->hist[i].key);
    free(c->hist);
    c->hist = NULL;
    c->hist_count = 0;
}

static hist_series *hist_for(checker *c, const char *key)
{
    for (size_t i = 0; i < c->hist_count; i++)
        if (strcmp(c->hist[i].key, key) == 0)
            return &c->hist[i];
    c->hist = realloc(c->hist, (c->hist_count + 1) * sizeof(*c->hist));
    hist_series *h = &c->hist[c->hist_count++];
    memset(h, 0, sizeof(*h));
    h->key = strdup(key);
    h->last_le = -INFINITY;
    return h;
}

/* A "# HELP" line starts a family; "# TYPE" must follow it. */
static int comment_line(checker *c, const char *line)
{
    int help = strncmp(line, "# HELP ", 7) == 0;
    int type = strncmp(line, "# TYPE ", 7) == 0;
    if (!help && !type)
        BAD(c, "a comment other than HELP or TYPE: '%s'", line);
    const char *p = line + 7;
    size_t n = name_len(p, 1);
    if (n == 0 || n >= sizeof(c->family))
        BAD(c, "invalid metric name in '%s'", line);
    char name[256];
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    if (*p != ' ')
        BAD(c, "no space after the name in '%s'", line);
    p++;
    if (help) {
        if (strcmp(name, c->family) == 0)
            BAD(c, "a second HELP for %s", name);
        for (size_t i = 0; i < c->done_count; i++)
            if (strcmp(c->done[i], name) == 0)
                BAD(c, "family %s appears again: families must be contiguous",
                    name);
        if (c->family[0] != '\0') {
            if (!c->has_type)
                BAD(c, "family %s has no TYPE", c->family);
            if (!finish_histograms(c))
                return 0;
            free_histograms(c);
            c->done = realloc(c->done, (c->done_count + 1) * sizeof(char *));
            c->done[c->done_count++] = strdup(c->family);
        }
        for (const char *q = p; *q != '\0'; q++) {
            if (*q == '\\') {
                if (q[1] != '\\' && q[1] != 'n')
                    BAD(c, "invalid escape \\%c in HELP", q[1]);
                q++;
            }
        }
        snprintf(c->family, sizeof(c->family), "%s", name);
        c->has_type = 0;
        return 1;
    }
    if (strcmp(name, c->family) != 0)
        BAD(c,
            "TYPE for %s outside its family (current: '%s'; HELP must "
            "come first)",
            name, c->family);
    if (c->has_type)
        BAD(c, "a second TYPE for %s", name);
    if (strcmp(p, "counter") != 0 && strcmp(p, "gauge") != 0 &&
        strcmp(p, "histogram") != 0 && strcmp(p, "summary") != 0 &&
        strcmp(p, "untyped") != 0)
        BAD(c, "unknown type '%s'", p);
    snprintf(c->type, sizeof(c->type), "%s", p);
    c->has_type = 1;
    if (strcmp(p, "counter") == 0 && !ends_with(name, "_total"))
        BAD(c, "counter %s is not named *_total", name);
    if (strcmp(p, "counter") != 0 && ends_with(name, "_total"))
        BAD(c, "%s %s is named *_total", p, name);
    return 1;
}

static int sample_line(checker *c, const char *line)
{
    size_t n = name_len(line, 1);
    if (n == 0 || n >= 256)
        BAD(c, "invalid metric name at the start of '%s'", line);
    char name[256];
    memcpy(name, line, n);
    name[n] = '\0';
    const char *p = line + n;
    if (c->family[0] == '\0' || !c->has_type)
        BAD(c, "sample %s before its family's HELP and TYPE", name);
    /* which part of the family it is */
    int histogram = strcmp(c->type, "histogram") == 0;
    const char *suffix = NULL;
    if (strcmp(name, c->family) == 0 && !histogram) {
        suffix = "";
    } else if (histogram || strcmp(c->type, "summary") == 0) {
        size_t f = strlen(c->family);
        if (strncmp(name, c->family, f) == 0 &&
            (strcmp(name + f, "_sum") == 0 || strcmp(name + f, "_count") == 0 ||
             (histogram && strcmp(name + f, "_bucket") == 0)))
            suffix = name + f;
    }
    if (suffix == NULL)
        BAD(c, "sample %s does not belong to family %s (%s)", name, c->family,
            c->type);

    label labels[MAX_LABELS];
    size_t count = 0;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (count == MAX_LABELS)
                BAD(c, "more than %d labels", MAX_LABELS);
            label *l = &labels[count++];
            size_t k = name_len(p, 0);
            if (k == 0 || k >= sizeof(l->name))
                BAD(c, "invalid label name at '%s'", p);
            memcpy(l->name, p, k);
            l->name[k] = '\0';
            if (strncmp(l->name, "__", 2) == 0)
                BAD(c, "reserved label name %s", l->name);
            for (size_t i = 0; i + 1 < count; i++)
                if (strcmp(labels[i].name, l->name) == 0)
                    BAD(c, "label %s twice", l->name);
            p += k;
            if (p[0] != '=' || p[1] != '"')
                BAD(c, "label %s: expected =\" at '%s'", l->name, p);
            p += 2;
            size_t v = 0;
            while (*p != '"') {
                if (*p == '\0')
                    BAD(c, "unterminated value of label %s", l->name);
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        BAD(c, "invalid escape \\%c in label %s", p[1],
                            l->name);
                    if (v + 2 >= sizeof(l->value))
                        BAD(c, "label value too long");
                    l->value[v++] = *p++;
                }
                if (v + 1 >= sizeof(l->value))
                    BAD(c, "label value too long");
                l->value[v++] = *p++;
            }
            l->value[v] = '\0';
            p++; /* the closing quote */
            if (*p == ',')
                p++;
            else if (*p != '}')
                BAD(c, "expected , or } after label %s at '%s'", l->name, p);
        }
        p++;
    }
    if (*p != ' ')
        BAD(c, "expected one space before the value in '%s'", line);
    p++;
    if (strchr(p, ' ') != NULL)
        BAD(c, "a timestamp or trailing text after the value: '%s'", p);
    double value;
    if (!parse_value(p, &value))
        BAD(c, "invalid value '%s'", p);

    /* le only on buckets, and there always */
    const char *le = NULL;
    for (size_t i = 0; i < count; i++)
        if (strcmp(labels[i].name, "le") == 0)
            le = labels[i].value;
    int bucket = histogram && strcmp(suffix, "_bucket") == 0;
    if (bucket && le == NULL)
        BAD(c, "bucket of %s without le", c->family);
    if (!bucket && le != NULL)
        BAD(c, "le on %s, which is not a histogram bucket", name);
    if ((strcmp(c->type, "counter") == 0 || histogram) &&
        (isnan(value) || value < 0))
        BAD(c, "%s value %s of %s is not a count", c->type, p, name);

    /* the series key: the name and the labels sorted by name */
    qsort(labels, count, sizeof(label), cmp_label);
    char key[8192];
    size_t kn = (size_t)snprintf(key, sizeof(key), "%s{", name);
    char rest[8192]; /* without le */
    size_t rn = 0;
    rest[0] = '\0';
    for (size_t i = 0; i < count && kn < sizeof(key); i++) {
        kn += (size_t)snprintf(key + kn, sizeof(key) - kn, "%s=\"%s\",",
                               labels[i].name, labels[i].value);
        if (strcmp(labels[i].name, "le") != 0 && rn < sizeof(rest))
            rn += (size_t)snprintf(rest + rn, sizeof(rest) - rn, "%s=\"%s\",",
                                   labels[i].name, labels[i].value);
    }
    if (c->series_count == c->series_cap) {
        c->series_cap = c->series_cap ? 2 * c->series_cap : 256;
        c->series = realloc(c->series, c->series_cap * sizeof(char *));
    }
    c->series[c->series_count++] = strdup(key);

    if (histogram) {
        hist_series *h = hist_for(c, rest);
        if (bucket) {
            double bound;
            if (!parse_value(le, &bound) || isnan(bound))
                BAD(c, "invalid le \"%s\"", le);
            if (h->inf_seen)
                BAD(c, "bucket le=\"%s\" after le=\"+Inf\"", le);
            if (!(bound > h->last_le))
                BAD(c, "bucket le=\"%s\" not above the one before", le);
            if (value < (double)h->last_cumulative)
                BAD(c, "bucket le=\"%s\" count %g below the one before", le,
                    value);
            h->last_le = bound;
            h->last_cumulative = (uint64_t)value;
            h->buckets++;
            if (isinf(bound)) {
                h->inf_seen = 1;
                h->inf_value = value;
            }
        } else if (strcmp(suffix, "_sum") == 0) {
            if (h->sum_seen)
                BAD(c, "a second _sum");
            h->sum_seen = 1;
        } else {
            if (h->count_seen)
                BAD(c, "a second _count");
            h->count_seen = 1;
            h->count_value = value;
        }
    }
    return 1;
}

static void checker_free(checker *c)
{
    for (size_t i = 0; i < c->done_count; i++)
        free(c->done[i]);
    free(c->done);
    for (size_t i = 0; i < c->series_count; i++)
        free(c->series[i]);
    free(c->series);
    free_histograms(c);
}

/* 1 when `text` is a valid exposition; 0 with the reason in why. */
static int check_exposition(const char *text, char *why, size_t why_size)
{
    checker *c = calloc(1, sizeof(*c));
    size_t len = strlen(text);
    int ok = 1;
    if (len == 0) {
        snprintf(c->why, sizeof(c->why), "empty text");
        ok = 0;
    } else if (text[len - 1] != '\n') {
        snprintf(c->why, sizeof(c->why), "the text does not end with \\n");
        ok = 0;
    } else if (!utf8_valid((const unsigned char *)text, len)) {
        snprintf(c->why, sizeof(c->why), "the text is not valid UTF-8");
        ok = 0;
    }
    const char *p = text;
    while (ok && *p != '\0') {
        const char *end = strchr(p, '\n');
        size_t n = (size_t)(end - p);
        char *line = malloc(n + 1);
        memcpy(line, p, n);
        line[n] = '\0';
        c->line++;
        if (n == 0)
            ok = bad_text(c, "a blank line");
        else if (strchr(line, '\r') != NULL)
            ok = bad_text(c, "a \\r in the line");
        else if (line[0] == '#')
            ok = comment_line(c, line);
        else
            ok = sample_line(c, line);
        free(line);
        p = end + 1;
    }
    if (ok && c->family[0] != '\0' && !c->has_type) {
        snprintf(c->why, sizeof(c->why), "family %s has no TYPE", c->family);
        ok = 0;
    }
    if (ok)
        ok = finish_histograms(c);
    if (ok) {
        qsort(c->series, c->series_count, sizeof(char *), cmp_str);
        for (size_t i = 1; i < c->series_count; i++) {
            if (strcmp(c->series[i - 1], c->series[i]) == 0) {
                snprintf(c->why, sizeof(c->why), "duplicate series %s",
                         c->series[i]);
                ok = 0;
                break;
            }
        }
    }
    snprintf(why, why_size, "%s", ok ? "" : c->why);
    checker_free(c);
    free(c);
    return ok;
}

#define CHECK_EXPOSITION(text)                                                 \
    do {                                                                       \
        char why_[1024];                                                       \
        CHECK_MSG(check_exposition((text), why_, sizeof(why_)),                \
                  "invalid exposition: %s", why_);                             \
    } while (0)

/* ------------------------------------------------------------------------
 * the checker has teeth */

static const char good[] = "# HELP a_total A counter.\n"
                           "# TYPE a_total counter\n"
                           "a_total{name=\"x\\\"y\\\\z\\n\"} 3\n"
                           "a_total{name=\"w\"} 0\n"
                           "# HELP h_seconds A histogram.\n"
                           "# TYPE h_seconds histogram\n"
                           "h_seconds_bucket{k=\"1\",le=\"0.5\"} 1\n"
                           "h_seconds_bucket{k=\"1\",le=\"1\"} 2\n"
                           "h_seconds_bucket{k=\"1\",le=\"+Inf\"} 3\n"
                           "h_seconds_sum{k=\"1\"} 2.25\n"
                           "h_seconds_count{k=\"1\"} 3\n"
                           "# HELP g A gauge.\n"
                           "# TYPE g gauge\n"
                           "g -1.5e3\n";

TEST(checker_accepts_a_valid_text)
{
    CHECK_EXPOSITION(good);
}

/* Each bad text, and a word the checker's reason must contain. */
static const struct {
    const char *text, *reason;
} bad[] = {
    {"# HELP g G.\n# TYPE g gauge\ng 1", "end with"},
    {"# HELP g G.\n# TYPE g gauge\n\ng 1\n", "blank"},
    {"# HELP g G.\n# TYPE g gauge\ng 1\r\n", "\\r"},
    {"# HELP g G.\n# TYPE g gauge\n# TYPE g gauge\ng 1\n", "second TYPE"},
    {"# HELP g G.\ng 1\n# TYPE g gauge\n", "before its family"},
    {"g 1\n", "before its family"},
    {"# TYPE g gauge\ng 1\n", "HELP must come first"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 1\n"
     "# HELP f F.\n# TYPE f gauge\nf 1\n"
     "# HELP g G.\n# TYPE g gauge\ng{a=\"2\"} 1\n",
     "contiguous"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 1\nf 2\n", "does not belong"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n",
     "duplicate series"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"1\",b=\"2\"} 1\n"
     "g{b=\"2\",a=\"1\"} 2\n",
     "duplicate series"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"x\\ty\"} 1\n", "invalid escape"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"x\"y\"} 1\n", "expected , or }"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"x} 1\n", "unterminated"},
    {"# HELP 1g G.\n# TYPE 1g gauge\n1g 1\n", "invalid metric name"},
    {"# HELP g G.\n# TYPE g gauge\ng{a-b=\"1\"} 1\n", "expected =\""},
    {"# HELP g G.\n# TYPE g gauge\ng{__a=\"1\"} 1\n", "reserved"},
    {"# HELP g G.\n# TYPE g gauge\ng{a=\"1\",a=\"2\"} 1\n", "twice"},
    {"# HELP g G.\n# TYPE g gauge\ng 1 1700000000000\n", "timestamp"},
    {"# HELP g G.\n# TYPE g gauge\ng one\n", "invalid value"},
    {"# HELP g G.\n# TYPE g gauge\ng\xff 1\n", "UTF-8"},
    {"# HELP c C.\n# TYPE c counter\nc 1\n", "*_total"},
    {"# HELP g_total G.\n# TYPE g_total gauge\ng_total 1\n", "*_total"},
    {"# HELP c_total C.\n# TYPE c_total counter\nc_total -1\n", "not a count"},
    {"# HELP g G.\n# TYPE g gauge\ng{le=\"1\"} 1\n", "not a histogram"},
    {"# HELP g G.\n# TYPE g gauge\n# a remark\ng 1\n", "other than HELP"},
    {"# HELP g G.\n# TYPE g gauge\n# HELP g G.\ng 1\n", "second HELP"},
    {"# HELP g G \\t.\n# TYPE g gauge\ng 1\n", "invalid escape"},
    {"# HELP g G.\n# TYPE g gaug\ng 1\n", "unknown type"},
    /* histograms */
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
     "h_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
     "not above"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
     "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
     "below"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
     "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
     "!= _count"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
     "h_bucket{le=\"+Inf\"} 1\nh_count 1\n",
     "no _sum"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
     "h_sum 1\nh_count 1\n",
     "+Inf"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
     "h_bucket{le=\"+Inf\"} 1\nh_sum 1\n",
     "no _count"},
    {"# HELP h H.\n# TYPE h histogram\nh_bucket 1\n", "without le"},
    {"# HELP h H.\n# TYPE h histogram\nh 1\n", "does not belong"},
};

TEST(checker_rejects_bad_texts)
{
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        char why[1024];
        int ok = check_exposition(bad[i].text, why, sizeof(why));
        CHECK_MSG(!ok, "bad text %zu was accepted:\n%s", i, bad[i].text);
        CHECK_MSG(strstr(why, bad[i].reason) != NULL,
                  "bad text %zu rejected for '%s', expected '%s'", i, why,
                  bad[i].reason);
    }
}

/* ------------------------------------------------------------------------
 * reading the text */

/* The text of the runtime's metrics (caller frees), through the buffer
 * variant, growing the buffer while it is too small. */
static char *scrape(duro_runtime *rt)
{
    size_t size = 1024;
    for (;;) {
        char *buf = malloc(size);
        size_t needed = 0;
        int rc = duro_runtime_metrics_format(rt, buf, size, &needed);
        if (rc == DURO_OK)
            return buf;
        free(buf);
        if (rc != DURO_TOO_LARGE) {
            test_fail(__FILE__, __LINE__, "metrics_format: %s",
                      duro_errname(rc));
            return NULL;
        }
        size = needed + 4096;
    }
}

/* The value of the series written exactly as `series` ("name{labels}"),
 * or -1 when the text does not have it. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return -1;
}

#define CHECK_SERIES(text, expected, ...)                                      \
    do {                                                                       \
        char s_[2048];                                                         \
        snprintf(s_, sizeof(s_), __VA_ARGS__);                                 \
        double v_ = value_of((text), s_);                                      \
        CHECK_MSG(v_ == (double)(expected), "%s is %g, expected %g", s_, v_,   \
                  (double)(expected));                                         \
    } while (0)

/* promtool: $DURO_PROMTOOL, else promtool on PATH, else the copy
 * .ci/fetch-promtool extracts into ${XDG_CACHE_HOME:-~/.cache}/duro. */
static const char *find_promtool(void)
{
    static char path[1024];
    const char *env = getenv("DURO_PROMTOOL");
    if (env != NULL && env[0] != '\0')
        return access(env, X_OK) == 0 ? env : NULL;
    const char *dirs = getenv("PATH");
    while (dirs != NULL && *dirs != '\0') {
        size_t n = strcspn(dirs, ":");
        snprintf(path, sizeof(path), "%.*s/promtool", (int)n, dirs);
        if (n > 0 && access(path, X_OK) == 0)
            return path;
        dirs += n + (dirs[n] == ':');
    }
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache != NULL && cache[0] != '\0')
        snprintf(path, sizeof(path), "%s/duro/prometheus/usr/bin/promtool",
                 cache);
    else if (home != NULL)
        snprintf(path, sizeof(path),
                 "%s/.cache/duro/prometheus/usr/bin/promtool", home);
    else
        return NULL;
    return access(path, X_OK) == 0 ? path : NULL;
}

/* Runs `promtool check metrics` on text; its exit status (-1 when it
 * could not run), its output in out. */
static int promtool_run(const char *tool, const char *text, char *out,
                        size_t size)
{
    const char *file = test_path("metrics.prom");
    FILE *f = fopen(file, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    fclose(f);
    char cmd[2300];
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' 2>&1", tool, file);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
}

/* promtool check metrics on the text, when promtool is here; says plainly
 * when it is not. Exit 0 only: lint problems (exit 3) fail too. A text
 * promtool must refuse is checked first, so a passing run means it
 * looked. */
static void promtool_check(const char *text)
{
    const char *tool = find_promtool();
    if (tool == NULL) {
        printf("promtool: SKIPPED (not found: set DURO_PROMTOOL, put it on "
               "PATH, or run .ci/fetch-promtool)\n");
        fflush(stdout);
        return;
    }
    char out[4096];
    int status = promtool_run(tool, "# HELP c C.\n# TYPE c counter\nc 1\n", out,
                              sizeof(out));
    CHECK_MSG(status > 0,
              "promtool accepted a counter not named *_total (status %d):\n%s",
              status, out);
    status = promtool_run(tool, text, out, sizeof(out));
    CHECK_MSG(status == 0, "promtool check metrics failed (status %d):\n%s",
              status, out);
    printf("promtool: %s check metrics: ok\n", tool);
    fflush(stdout);
}

/* ------------------------------------------------------------------------
 * activities and orchestrations */

#define ODD_NAME "Odd\"name\\with\nnewline"
#define ODD_LABEL "Odd\\\"name\\\\with\\nnewline"

static _Atomic int block_started, block_returned, ignore_started;
static _Atomic int release_ignore;

static int act_quick(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_fail(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_fail(out, "failed on purpose");
}

/* Cooperative: waits for its token, then fails. */
static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&block_started, 1);
    int cancelled = duro_activity_wait_cancelled(a, 60000);
    atomic_fetch_add(&block_returned, 1);
    return cancelled ? duro_fail(out, "cancelled") : duro_ok(out, "done");
}

/* Ignores its token until the test releases it. */
static int act_ignore(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&ignore_started, 1);
    while (!atomic_load(&release_ignore))
        usleep(1000);
    return duro_ok(out, "ignored");
}

/* input: an activity name; fails when the activity failed. */
static int orch_call_one(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "x");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* Block against the event "go": the event wins, Block is the loser. */
static int orch_select(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Block", "x");
    duro_task *go = duro_wait_event(o, "go");
    duro_task *w = duro_select(o, t, go);
    return duro_ok(out, w == go ? "event won" : "activity won");
}

/* execution 1 continues as new at once; execution 2 completes */
static int orch_twice(duro_orch *o, const char *in, duro_result *out)
{
    if (in != NULL && strcmp(in, "second") == 0)
        return duro_ok(out, "second");
    return duro_continue_as_new(o, out, "second");
}

static void reset_counts(void)
{
    atomic_store(&block_started, 0);
    atomic_store(&block_returned, 0);
    atomic_store(&ignore_started, 0);
    atomic_store(&release_ignore, 0);
}

static void setup(rt_fixture *f, const char *db)
{
    reset_counts();
    rt_init(f, db);
    duro_registry *r = f->reg;
    CHECK_OK(duro_registry_add_activity(r, "Quick", act_quick, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Fail", act_fail, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Block", act_block, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Ignore", act_ignore, NULL));
    CHECK_OK(duro_registry_add_activity(r, ODD_NAME, act_quick, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "CallOne", NULL, orch_call_one,
                                             NULL));
    /* two versions of one name: one series */
    CHECK_OK(duro_registry_add_orchestration(r, "CallOne", "2", orch_call_one,
                                             NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Select", NULL, orch_select, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Twice", NULL, orch_twice, NULL));
    /* unknown names give up after 3 deliveries, 20 + 40 ms apart */
    f->opts.max_attempts = 3;
    f->opts.cancel_grace_ms = 60000;
}

/* ------------------------------------------------------------------------
 * exact values after real work */

TEST(counts_by_name_outcome_and_reason)
{
    rt_fixture f;
    setup(&f, "m_counts.db");
    /* No kept fibers: every turn after an execution's first replays, so
     * the replay counts are exact too. */
    f.opts.fiber_cache_size = 0;
    rt_start(&f);

    /* nothing ran yet: every series known in advance is there, at 0 */
    char *text = scrape(f.rt);
    CHECK_EXPOSITION(text);
    CHECK_SERIES(text, 0,
                 "duro_activity_executions_total{activity=\"Quick\","
                 "outcome=\"completed\"}");
    CHECK_SERIES(text, 0,
                 "duro_activity_cancellations_total{activity=\"Block\","
                 "reason=\"other\"}");
    CHECK_SERIES(text, 0,
                 "duro_orchestration_completions_total{orchestration="
                 "\"(unregistered)\",status=\"failed\"}");
    free(text);

    const char *done[] = {"q1",   "q2",    "q3",     "odd",
                          "fail", "noact", "noorch", "twice"};
    rt_start_instance(&f, "q1", "CallOne", "Quick");
    rt_start_instance(&f, "q2", "CallOne", "Quick");
    rt_start_instance(&f, "q3", "CallOne", "Quick");
    rt_start_instance(&f, "odd", "CallOne", ODD_NAME);
    rt_start_instance(&f, "fail", "CallOne", "Fail");
    rt_start_instance(&f, "noact", "CallOne", "NoSuchActivity");
    rt_start_instance(&f, "noorch", "NoSuchOrchestration", NULL);
    rt_start_instance(&f, "twice", "Twice", NULL);
    int expect[] = {DURO_STATUS_COMPLETED, DURO_STATUS_COMPLETED,
                    DURO_STATUS_COMPLETED, DURO_STATUS_COMPLETED,
                    DURO_STATUS_FAILED,    DURO_STATUS_FAILED,
                    DURO_STATUS_FAILED,    DURO_STATUS_COMPLETED};
    for (size_t i = 0; i < ARRAY_LEN(done); i++) {
        duro_instance_info *info = rt_wait(&f, done[i], 30000);
        CHECK_MSG(info->status == expect[i], "%s is %s, expected %s", done[i],
                  duro_status_name(info->status), duro_status_name(expect[i]));
        duro_free(info);
    }

    /* a select lost by a running activity */
    rt_start_instance(&f, "sel", "Select", NULL);
    WAIT_UNTIL(atomic_load(&block_started) == 1, 30000);
    CHECK_OK(duro_client_raise_event(f.client, "sel", "go", NULL));
    duro_instance_info *info = rt_wait(&f, "sel", 30000);
    CHECK_STR(info->output, "event won");
    duro_free(info);
    WAIT_UNTIL(atomic_load(&block_returned) == 1, 30000);

    /* an instance cancelled while its activity runs */
    rt_start_instance(&f, "can", "CallOne", "Block");
    WAIT_UNTIL(atomic_load(&block_started) == 2, 30000);
    CHECK_OK(duro_client_cancel(f.client, "can", "not needed", "test"));
    info = rt_wait(&f, "can", 30000);
    CHECK_EQ(info->status, DURO_STATUS_CANCELLED);
    duro_free(info);

    /* an instance terminated while its activity runs */
    rt_start_instance(&f, "term", "CallOne", "Block");
    WAIT_UNTIL(atomic_load(&block_started) == 3, 30000);
    CHECK_OK(duro_client_terminate(f.client, "term", "runaway", "test"));
    info = rt_wait(&f, "term", 30000);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    duro_free(info);

    /* Final values: the runtime's threads count just after the commits a
     * client sees, so stop it first (its metrics stay readable). */
    CHECK_OK(duro_runtime_shutdown(f.rt, 30000));
    CHECK_EQ(atomic_load(&block_returned), 3);
    text = scrape(f.rt);
    CHECK_EXPOSITION(text);

#define ORCH(metric, name)                                                     \
    "duro_orchestration_" metric "{orchestration=\"" name "\"}"
#define END(name, status)                                                      \
    "duro_orchestration_completions_total{orchestration=\"" name               \
    "\",status=\"" status "\"}"
#define EXEC(name, outcome)                                                    \
    "duro_activity_executions_total{activity=\"" name "\",outcome=\"" outcome  \
    "\"}"
#define CANCEL(name, reason)                                                   \
    "duro_activity_cancellations_total{activity=\"" name "\",reason=\"" reason \
    "\"}"

    /* CallOne: q1-3, odd, fail, noact, can, term: two turns each */
    CHECK_SERIES(text, 16, ORCH("turns_total", "CallOne"));
    CHECK_SERIES(text, 6, ORCH("replays_total", "CallOne")); /* not `can` */
    CHECK_SERIES(text, 4, END("CallOne", "completed"));
    CHECK_SERIES(text, 2, END("CallOne", "failed"));
    CHECK_SERIES(text, 1, END("CallOne", "cancelled"));
    CHECK_SERIES(text, 1, END("CallOne", "terminated"));
    CHECK_SERIES(text, 0, END("CallOne", "continued_as_new"));
    CHECK_SERIES(text, 2, ORCH("turns_total", "Select"));
    CHECK_SERIES(text, 1, ORCH("replays_total", "Select"));
    CHECK_SERIES(text, 1, END("Select", "completed"));
    /* Twice: execution 1 continues as new, execution 2 completes; each
     * execution's only turn replays nothing */
    CHECK_SERIES(text, 2, ORCH("turns_total", "Twice"));
    CHECK_SERIES(text, 0, ORCH("replays_total", "Twice"));
    CHECK_SERIES(text, 1, END("Twice", "continued_as_new"));
    CHECK_SERIES(text, 1, END("Twice", "completed"));
    /* the unregistered orchestration: one turn, failing it */
    CHECK_SERIES(text, 1, ORCH("turns_total", "(unregistered)"));
    CHECK_SERIES(text, 1, END("(unregistered)", "failed"));
    CHECK_SERIES(text, 0, END("(unregistered)", "completed"));
    CHECK(strstr(text, "NoSuchOrchestration") == NULL);
    CHECK(strstr(text, "NoSuchActivity") == NULL);
    CHECK(strstr(text, "\"q1\"") == NULL); /* never an instance id */

    CHECK_SERIES(text, 3, EXEC("Quick", "completed"));
    CHECK_SERIES(text, 0, EXEC("Quick", "failed"));
    CHECK_SERIES(text, 1, EXEC(ODD_LABEL, "completed"));
    CHECK_SERIES(text, 1, EXEC("Fail", "failed"));
    CHECK_SERIES(text, 0, EXEC("Fail", "completed"));
    CHECK_SERIES(text, 1, EXEC("(unregistered)", "failed"));
    CHECK_SERIES(text, 3, EXEC("Block", "cancelled"));
    CHECK_SERIES(text, 0, EXEC("Block", "abandoned"));
    CHECK_SERIES(text, 0, EXEC("Block", "completed"));
    CHECK_SERIES(text, 1, CANCEL("Block", "select_loser"));
    CHECK_SERIES(text, 1, CANCEL("Block", "instance_cancelled"));
    CHECK_SERIES(text, 1, CANCEL("Block", "instance_terminated"));
    CHECK_SERIES(text, 0, CANCEL("Block", "lock_lost"));
    CHECK_SERIES(text, 0, CANCEL("Block", "other"));
    CHECK_SERIES(
        text, 1,
        "duro_activity_cancel_requests_total{reason=\"select_loser\"}");
    CHECK_SERIES(
        text, 1,
        "duro_activity_cancel_requests_total{reason=\"instance_cancelled\"}");
    CHECK_SERIES(
        text, 1,
        "duro_activity_cancel_requests_total{reason=\"instance_terminated\"}");
    /* durations: every function that ran, once */
    CHECK_SERIES(text, 3,
                 "duro_activity_duration_seconds_count{activity=\"Quick\"}");
    CHECK_SERIES(text, 3,
                 "duro_activity_duration_seconds_count{activity=\"Block\"}");
    CHECK_SERIES(text, 1,
                 "duro_activity_duration_seconds_count{activity=\"" ODD_LABEL
                 "\"}");
    CHECK_SERIES(
        text, 0,
        "duro_activity_duration_seconds_count{activity=\"(unregistered)\"}");
    CHECK_SERIES(text, 21, "duro_orchestration_turn_duration_seconds_count");
    CHECK_SERIES(text, 0, "duro_fiber_cache_hits_total");
    CHECK_SERIES(text, 0, "duro_activity_slots_busy");
    CHECK_SERIES(text, f.opts.worker_concurrency, "duro_activity_slots_max");
    CHECK_SERIES(text, 0, "duro_poison_messages_total");
    CHECK_SERIES(text, 0, "duro_nondeterminism_errors_total");
    CHECK(strstr(text, "duro_build_info{version=\"" DURO_VERSION_STRING
                       "\",provider=\"sqlite\"} 1\n") != NULL);

    /* the struct reads the same counters */
    duro_metrics m;
    duro_runtime_metrics(f.rt, &m);
    CHECK_EQ(m.turns, 21);
    CHECK_EQ(m.replays, 7);
    CHECK_EQ(m.orchestrations_completed, 6);
    CHECK_EQ(m.orchestrations_failed, 3);
    CHECK_EQ(m.orchestrations_cancelled, 1);
    CHECK_EQ(m.orchestrations_terminated, 1);
    CHECK_EQ(m.activities_completed, 4);
    CHECK_EQ(m.activities_failed, 2);
    CHECK_EQ(m.activities_cancelled, 3);
    CHECK_EQ(m.activities_abandoned, 0);
    CHECK_EQ(m.activities_cancel_requested, 3);
    CHECK_EQ(m.fiber_cache_hits, 0);

    promtool_check(text);
    free(text);
    rt_done(&f);
}

/* Past the grace period, and at a shutdown deadline, a running activity
 * that ignores its token is abandoned: counted by name with its reason. */
TEST(abandoned_by_grace_and_by_shutdown)
{
    rt_fixture f;
    setup(&f, "m_abandon.db");
    f.opts.cancel_grace_ms = 0;
    rt_start(&f);
    rt_start_instance(&f, "ign", "CallOne", "Ignore");
    WAIT_UNTIL(atomic_load(&ignore_started) == 1, 30000);
    CHECK_OK(duro_client_cancel(f.client, "ign", NULL, NULL));
    duro_metrics m;
    WAIT_UNTIL((duro_runtime_metrics(f.rt, &m), m.activities_abandoned == 1),
               30000);
    char *text = scrape(f.rt);
    CHECK_EXPOSITION(text);
    CHECK_SERIES(text, 1, EXEC("Ignore", "abandoned"));
    CHECK_SERIES(text, 1, CANCEL("Ignore", "instance_cancelled"));
    CHECK_SERIES(text, 0, "duro_activity_slots_busy");
    free(text);

    rt_start_instance(&f, "ign2", "CallOne", "Ignore");
    WAIT_UNTIL(atomic_load(&ignore_started) == 2, 30000);
    text = scrape(f.rt);
    CHECK_SERIES(text, 1, "duro_activity_slots_busy");
    free(text);
    CHECK_RC(duro_runtime_shutdown(f.rt, 0), DURO_TIMEOUT);
    text = scrape(f.rt);
    CHECK_EXPOSITION(text);
    CHECK_SERIES(text, 2, EXEC("Ignore", "abandoned"));
    CHECK_SERIES(text, 1, CANCEL("Ignore", "shutdown"));
    CHECK_SERIES(text, 0, EXEC("Ignore", "cancelled"));
    CHECK_SERIES(text, 0,
                 "duro_activity_duration_seconds_count{activity="
                 "\"Ignore\"}");
    CHECK_SERIES(text, 0, "duro_activity_slots_busy");
    free(text);
    /* the abandoned threads return and touch nothing of the runtime */
    atomic_store(&release_ignore, 1);
    rt_done(&f);
}

/* A cancellation that commits after the activity returned and before its
 * completion's ack: the ack finds the row gone, no token is fired any more,
 * and the run still counts with the reason the turn decided, not as a lost
 * lock. The wrapper holds the ack until the cancelling turn committed. */
static struct {
    _Atomic int on, gate_started, release_gate, ack_waiting, committed, acked,
        ack_rc;
} order;

static int act_gate(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_store(&order.gate_started, 1);
    int64_t end = test_now_ms() + 30000;
    while (!atomic_load(&order.release_gate) && test_now_ms() < end)
        usleep(1000);
    return duro_ok(out, "gate done");
}

static void hold_ack_until_cancelled(void *arg, const faulty_call *call)
{
    (void)arg;
    if (!atomic_load(&order.on) || call->completion == NULL)
        return;
    if (call->after) {
        atomic_store(&order.ack_rc, call->rc);
        atomic_store(&order.acked, 1);
        return;
    }
    atomic_store(&order.ack_waiting, 1);
    int64_t end = test_now_ms() + 30000;
    while (!atomic_load(&order.committed) && test_now_ms() < end)
        usleep(1000);
}

static void note_cancel_commit(void *arg, const faulty_call *call)
{
    (void)arg;
    if (call->after && call->rc == DURO_OK && call->ack != NULL &&
        call->ack->cancelled_activity_count > 0)
        atomic_store(&order.committed, 1);
}

TEST(cancel_committed_before_the_ack_counts_its_reason)
{
    rt_fixture f;
    setup(&f, "m_order.db");
    memset(&order, 0, sizeof(order));
    CHECK_OK(duro_registry_add_activity(f.reg, "Gate", act_gate, NULL));
    duro_provider *inner = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f.url, &inner, &err), DURO_OK, &err);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK(w != NULL);
    faulty_provider_set_hook(w, FAULTY_ACK_WORK_ITEM, hold_ack_until_cancelled,
                             NULL);
    faulty_provider_set_hook(w, FAULTY_ACK_ORCHESTRATION_ITEM,
                             note_cancel_commit, NULL);
    atomic_store(&order.on, 1);
    CHECK_OK(duro_runtime_create_with_provider(w, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));

    rt_start_instance(&f, "o", "CallOne", "Gate");
    WAIT_UNTIL(atomic_load(&order.gate_started), 30000);
    atomic_store(&order.release_gate, 1);
    WAIT_UNTIL(atomic_load(&order.ack_waiting), 30000);
    CHECK_OK(duro_client_cancel(f.client, "o", NULL, NULL));
    duro_instance_info *info = rt_wait(&f, "o", 30000);
    CHECK_EQ(info->status, DURO_STATUS_CANCELLED);
    duro_free(info);
    WAIT_UNTIL(atomic_load(&order.acked), 30000);
    CHECK_EQ(atomic_load(&order.ack_rc), DURO_LOCK_LOST); /* the order held */
    CHECK_OK(duro_runtime_shutdown(f.rt, 30000));
    char *text = scrape(f.rt);
    CHECK_SERIES(text, 1, EXEC("Gate", "cancelled"));
    CHECK_SERIES(text, 0, EXEC("Gate", "completed"));
    CHECK_SERIES(text, 1, CANCEL("Gate", "instance_cancelled"));
    CHECK_SERIES(text, 0, CANCEL("Gate", "lock_lost"));
    CHECK_SERIES(text, 1,
                 "duro_activity_duration_seconds_count{activity="
                 "\"Gate\"}");
    free(text);
    atomic_store(&order.on, 0);
    rt_done(&f);
    duro_provider_close(w);
}

/* ------------------------------------------------------------------------
 * the measuring points' fixed label sets, without a runtime */

static int act_noop(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int orch_noop(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

static char *expose(duro__metrics *m)
{
    size_t len = 0;
    duro__metrics_expose(m, NULL, NULL, 0, &len);
    char *buf = malloc(len + 1);
    size_t again = 0;
    duro__metrics_expose(m, NULL, buf, len + 1, &again);
    CHECK_EQ(again, len);
    return buf;
}

TEST(reasons_and_names_map_to_fixed_series)
{
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_activity(r, "A", act_noop, NULL));
    /* invalid UTF-8 becomes U+FFFD: these two give one label value */
    CHECK_OK(duro_registry_add_activity(r, "bad\xff", act_noop, NULL));
    CHECK_OK(duro_registry_add_activity(r, "bad\xfe", act_noop, NULL));
    /* a registered name equal to the fixed value shares its series */
    CHECK_OK(duro_registry_add_activity(r, "(unregistered)", act_noop, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "O", "1", orch_noop, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "O", "2", orch_noop, NULL));
    duro__metrics m;
    CHECK_OK(duro__metrics_init(&m, r, "test", 4));
    CHECK_EQ(m.act_count, 3); /* A, bad\uFFFD, (unregistered) */
    CHECK_EQ(m.orch_count, 2);

    const duro__activity_entry *a = duro__registry_find_activity(r, "A");
    const char *reasons[] = {"lock_lost",
                             "shutdown",
                             "bogus",
                             NULL,
                             DURO_REASON_TASK_CANCELLED,
                             "instance_deleted"};
    for (size_t i = 0; i < ARRAY_LEN(reasons); i++)
        duro__metrics_activity_cancelled(&m, a, reasons[i]);
    duro__metrics_activity_abandoned(&m, "bad\xfe", "instance_failed");
    duro__metrics_activity_abandoned(&m, "never registered", "shutdown");
    duro__metrics_activity_outcome(&m, NULL, DURO__ACT_FAILED);
    duro__metrics_cancel_requests(&m, reasons, ARRAY_LEN(reasons));
    duro__metrics_cancel_requests(&m, NULL, 2);
    duro__turn t;
    memset(&t, 0, sizeof(t));
    t.status = DURO_STATUS_CONTINUED_AS_NEW;
    duro__metrics_turn(&m, duro__registry_find_orch(r, "O", "1"), &t, 1,
                       duro__metrics_turn_begin());
    duro__metrics_turn(&m, duro__registry_find_orch(r, "O", "2"), &t, 0,
                       duro__metrics_turn_begin());
    duro__metrics_turn(&m, NULL, &t, 0, duro__metrics_turn_begin());

    char *text = expose(&m);
    CHECK_EXPOSITION(text);
    CHECK_SERIES(text, 1, CANCEL("A", "lock_lost"));
    CHECK_SERIES(text, 1, CANCEL("A", "shutdown"));
    CHECK_SERIES(text, 2, CANCEL("A", "other")); /* "bogus" and NULL */
    CHECK_SERIES(text, 1, CANCEL("A", "task_cancelled"));
    CHECK_SERIES(text, 1, CANCEL("A", "instance_deleted"));
    CHECK_SERIES(text, 6, EXEC("A", "cancelled"));
    CHECK_SERIES(text, 1, EXEC("bad\xef\xbf\xbd", "abandoned"));
    CHECK_SERIES(text, 1, CANCEL("bad\xef\xbf\xbd", "instance_failed"));
    CHECK_SERIES(text, 1, EXEC("(unregistered)", "abandoned"));
    CHECK_SERIES(text, 1, EXEC("(unregistered)", "failed"));
    /* decided reasons only: lock_lost, shutdown and instance_deleted count
     * as other */
    CHECK_SERIES(text, 7,
                 "duro_activity_cancel_requests_total{reason=\"other\"}");
    CHECK_SERIES(
        text, 1,
        "duro_activity_cancel_requests_total{reason=\"task_cancelled\"}");
    CHECK_SERIES(text, -1,
                 "duro_activity_cancel_requests_total{reason=\"lock_lost\"}");
    CHECK_SERIES(
        text, -1,
        "duro_activity_cancel_requests_total{reason=\"instance_deleted\"}");
    CHECK_SERIES(text, 2, END("O", "continued_as_new"));
    CHECK_SERIES(text, 1, END("(unregistered)", "continued_as_new"));
    CHECK_SERIES(text, 1, "duro_fiber_cache_hits_total");
    CHECK_SERIES(text, 3, "duro_orchestration_turn_duration_seconds_count");
    CHECK_SERIES(text, 4, "duro_activity_slots_max");
    free(text);

    duro_metrics totals;
    memset(&totals, 0, sizeof(totals));
    duro__metrics_totals(&m, &totals);
    CHECK_EQ(totals.activities_cancelled, 6);
    CHECK_EQ(totals.activities_abandoned, 2);
    CHECK_EQ(totals.activities_failed, 1);
    CHECK_EQ(totals.activities_cancel_requested, 8);
    CHECK_EQ(totals.turns, 3);
    duro__metrics_free(&m);
    duro_registry_destroy(r);
}

/* ------------------------------------------------------------------------
 * the two writers */

TEST(buffer_variant_truncates_to_nothing_and_reports_the_length)
{
    rt_fixture f;
    setup(&f, "m_buffer.db");
    CHECK_OK(duro_runtime_create(f.url, f.reg, &f.opts, &f.rt));

    /* the stream variant, as the reference text (nothing runs: it stays) */
    char *ref = NULL;
    size_t ref_len = 0;
    FILE *mem = open_memstream(&ref, &ref_len);
    CHECK_OK(duro_runtime_metrics_write(f.rt, mem));
    fclose(mem);
    CHECK_EXPOSITION(ref);

    size_t needed = 0;
    CHECK_RC(duro_runtime_metrics_format(f.rt, NULL, 0, &needed),
             DURO_TOO_LARGE);
    CHECK_EQ(needed, ref_len);

    char *buf = malloc(ref_len + 2);
    /* one byte short (no room for the NUL): nothing, not a prefix */
    memset(buf, 'x', ref_len + 2);
    needed = 0;
    CHECK_RC(duro_runtime_metrics_format(f.rt, buf, ref_len, &needed),
             DURO_TOO_LARGE);
    CHECK_EQ(needed, ref_len);
    CHECK_STR(buf, "");
    CHECK(buf[ref_len] == 'x'); /* nothing written past size */
    memset(buf, 'x', ref_len + 2);
    CHECK_RC(duro_runtime_metrics_format(f.rt, buf, 1, &needed),
             DURO_TOO_LARGE);
    CHECK_STR(buf, "");
    CHECK(buf[1] == 'x');
    /* exactly enough */
    memset(buf, 'x', ref_len + 2);
    CHECK_OK(duro_runtime_metrics_format(f.rt, buf, ref_len + 1, &needed));
    CHECK_EQ(needed, ref_len);
    CHECK_STR(buf, ref);
    CHECK(buf[ref_len + 1] == 'x');
    CHECK_OK(duro_runtime_metrics_format(f.rt, buf, ref_len + 2, NULL));
    CHECK_STR(buf, ref);
    free(buf);
    free(ref);

    /* a stream that cannot take the text */
    FILE *full = fopen("/dev/full", "w");
    if (full != NULL) {
        CHECK_RC(duro_runtime_metrics_write(f.rt, full), DURO_ERROR);
        fclose(full);
    } else {
        printf("/dev/full: SKIPPED (not available)\n");
    }
    rt_done(&f);
}

/* Scrapes while work runs (under TSan: without a race), each one valid,
 * the counters never going back. */
typedef struct scraper {
    duro_runtime *rt;
    _Atomic int stop;
    _Atomic int scrapes;
    int bad;
    char why[1024];
} scraper;

static void *scrape_loop(void *arg)
{
    scraper *s = arg;
    double last_turns = 0;
    while (!atomic_load(&s->stop) && s->bad == 0) {
        char *text = scrape(s->rt);
        if (text == NULL) {
            s->bad = 1;
            break;
        }
        if (!check_exposition(text, s->why, sizeof(s->why)))
            s->bad = 1;
        double turns = value_of(text, ORCH("turns_total", "CallOne"));
        if (turns < last_turns) {
            snprintf(s->why, sizeof(s->why), "turns went from %g to %g",
                     last_turns, turns);
            s->bad = 1;
        }
        last_turns = turns;
        atomic_fetch_add(&s->scrapes, 1);
        free(text);
    }
    return NULL;
}

TEST(scrapes_while_running_are_valid)
{
    rt_fixture f;
    setup(&f, "m_scrape.db");
    rt_start(&f);
    scraper s = {.rt = f.rt};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, scrape_loop, &s) == 0);
    char id[32];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof(id), "s%d", i);
        rt_start_instance(&f, id, "CallOne", i % 4 == 0 ? "Fail" : "Quick");
    }
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof(id), "s%d", i);
        duro_free(rt_wait(&f, id, 60000));
    }
    WAIT_UNTIL(atomic_load(&s.scrapes) > 0, 30000);
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    CHECK_MSG(s.bad == 0, "a scrape was invalid: %s", s.why);
    CHECK_OK(duro_runtime_shutdown(f.rt, 30000));
    char *text = scrape(f.rt);
    CHECK_SERIES(text, 30, EXEC("Quick", "completed"));
    CHECK_SERIES(text, 10, EXEC("Fail", "failed"));
    CHECK_SERIES(text, 30, END("CallOne", "completed"));
    CHECK_SERIES(text, 10, END("CallOne", "failed"));
    free(text);
    rt_done(&f);
}

TEST_MAIN(T(checker_accepts_a_valid_text), T(checker_rejects_bad_texts),
          T(counts_by_name_outcome_and_reason),
          T(abandoned_by_grace_and_by_shutdown),
          T(cancel_committed_before_the_ack_counts_its_reason),
          T(reasons_and_names_map_to_fixed_series),
          T(buffer_variant_truncates_to_nothing_and_reports_the_length),
          T(scrapes_while_running_are_valid))
