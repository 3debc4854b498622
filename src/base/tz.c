/* tz.c - the tz database reader and the civil calendar of tz.h: a zone's
 * transitions from its TZif file (RFC 8536; the 64-bit data of version 2+
 * files, the 32-bit data of version 1 ones), its footer's POSIX TZ rule for
 * instants after the last transition, and local wall-clock time mapped to
 * instants. Reads a file at load; everything else is pure. Any thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/tz.h"

#define TZ_FILE_MAX (1024 * 1024)
#define TZ_TYPES_MAX 256
#define TZ_OFFSET_MAX (25 * 3600 + 59 * 60 + 59) /* |UTC offset| */

typedef struct tz_type {
    int32_t utoff;
} tz_type;

/* A POSIX TZ rule's date: Jn (1..365, February 29 never counted), n
 * (0..365, counted) or Mm.w.d (weekday d of week w of month m, w 5 the
 * last), and the local time of day it takes effect at (seconds, may be
 * negative or past a day: RFC 8536 allows -167..167 hours). */
typedef struct rule_date {
    char kind; /* 'J', 'n' or 'M' */
    int a, b, c;
    int32_t time;
} rule_date;

/* The footer: a fixed offset, or standard and daylight time with the dates
 * they begin. */
typedef struct posix_rule {
    int present;
    int has_dst;
    int32_t std_off, dst_off; /* UTC offsets, east positive */
    rule_date start, end;     /* daylight time begins (in standard local
                                 time), ends (in daylight local time) */
} posix_rule;

struct duro__tz {
    char name[DURO__TZ_NAME_MAX + 1];
    size_t count;   /* transitions */
    int64_t *at;    /* their instants, ascending */
    uint8_t *index; /* the type in effect from each */
    tz_type types[TZ_TYPES_MAX];
    size_t type_count;
    posix_rule footer;
    int32_t offsets[TZ_TYPES_MAX + 2]; /* every distinct offset */
    size_t offset_count;
};

/* ---- the civil calendar -------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date: eras of 400 years
 * (146097 days) from March 1, so February's length falls at a year's end. */
int64_t duro__days_from_civil(int64_t year, int month, int day)
{
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t year_of_era = year - era * 400;
    int64_t day_of_year =
        (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    int64_t day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

void duro__civil_from_days(int64_t days, int64_t *year, int *month, int *day)
{
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t day_of_era = days - era * 146097;
    int64_t year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 -
                           day_of_era / 146096) /
                          365;
    int64_t day_of_year =
        day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    int64_t month_from_march = (5 * day_of_year + 2) / 153;
    *day = (int)(day_of_year - (153 * month_from_march + 2) / 5 + 1);
    *month = (int)(month_from_march < 10 ? month_from_march + 3
                                         : month_from_march - 9);
    *year = year_of_era + era * 400 + (*month <= 2);
}

int duro__weekday(int64_t days)
{
    return (int)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
}

static int is_leap(int64_t year)
{
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int duro__days_in_month(int64_t year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30,
                                 31, 31, 30, 31, 30, 31};
    return month == 2 && is_leap(year) ? 29 : days[month - 1];
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

void duro__format_utc(char *b, size_t size, int64_t ms)
{
    int64_t secs = floor_div(ms, 1000);
    int64_t days = floor_div(secs, 86400);
    int rem = (int)(secs - days * 86400);
    int64_t year;
    int month, day;
    duro__civil_from_days(days, &year, &month, &day);
    snprintf(b, size, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)year,
             month, day, rem / 3600, rem / 60 % 60, rem % 60,
             (int)(ms - secs * 1000));
}

/* ---- the footer's rule ---------------------------------------------- */

/* Day of the year (0 = January 1) that d names in `year`. */
static int64_t rule_day(const rule_date *d, int64_t year)
{
    if (d->kind == 'J')
        return d->a - 1 + (is_leap(year) && d->a >= 60);
    if (d->kind == 'n')
        return d->a;
    int64_t first = duro__days_from_civil(year, d->a, 1);
    int dom = 1 + (d->c - duro__weekday(first) + 7) % 7 + (d->b - 1) * 7;
    while (dom > duro__days_in_month(year, d->a))
        dom -= 7;
    return first + dom - 1 - duro__days_from_civil(year, 1, 1);
}

/* The instant d takes effect in `year` when local time runs at `off`. */
static int64_t rule_instant(const rule_date *d, int64_t year, int32_t off)
{
    int64_t days = duro__days_from_civil(year, 1, 1) + rule_day(d, year);
    return days * 86400 + d->time - off;
}

static int32_t rule_offset(const posix_rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    int64_t year;
    int month, day;
    duro__civil_from_days(floor_div(t + r->std_off, 86400), &year, &month,
                          &day);
    int64_t start = rule_instant(&r->start, year, r->std_off);
    int64_t end = rule_instant(&r->end, year, r->dst_off);
    int dst = start < end ? (t >= start && t < end) : !(t >= end && t < start);
    return dst ? r->dst_off : r->std_off;
}

/* A number of at most `digits` digits at *p, in [lo, hi]. */
static int parse_number(const char **p, int digits, int lo, int hi, int *out)
{
    int v = 0, n = 0;
    while (n < digits && **p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    if (n == 0 || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* [+-]hh[:mm[:ss]] with hh up to max_hours: seconds, signed as written. */
static int parse_hms(const char **p, int max_hours, int32_t *out)
{
    int sign = 1, h = 0, m = 0, s = 0;
    if (**p == '+' || **p == '-')
        sign = *(*p)++ == '-' ? -1 : 1;
    if (parse_number(p, 3, 0, max_hours, &h) != 0)
        return -1;
    if (**p == ':') {
        (*p)++;
        if (parse_number(p, 2, 0, 59, &m) != 0)
            return -1;
        if (**p == ':') {
            (*p)++;
            if (parse_number(p, 2, 0, 59, &s) != 0)
                return -1;
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return 0;
}

/* A zone abbreviation: three or more letters, or <...> of letters,
 * digits, '+' and '-'. */
static int parse_abbreviation(const char **p)
{
    const char *s = *p;
    size_t n = 0;
    if (*s == '<') {
        s++;
        while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') ||
               (s[n] >= '0' && s[n] <= '9') || s[n] == '+' || s[n] == '-')
            n++;
        if (n < 3 || s[n] != '>')
            return -1;
        *p = s + n + 1;
        return 0;
    }
    while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z'))
        n++;
    if (n < 3)
        return -1;
    *p = s + n;
    return 0;
}

static int parse_rule_date(const char **p, rule_date *d)
{
    d->time = 7200; /* 02:00 when not given */
    if (**p == 'J') {
        (*p)++;
        d->kind = 'J';
        if (parse_number(p, 3, 1, 365, &d->a) != 0)
            return -1;
    } else if (**p == 'M') {
        (*p)++;
        d->kind = 'M';
        if (parse_number(p, 2, 1, 12, &d->a) != 0 || *(*p)++ != '.' ||
            parse_number(p, 1, 1, 5, &d->b) != 0 || *(*p)++ != '.' ||
            parse_number(p, 1, 0, 6, &d->c) != 0)
            return -1;
    } else {
        d->kind = 'n';
        if (parse_number(p, 3, 0, 365, &d->a) != 0)
            return -1;
    }
    if (**p == '/') {
        (*p)++;
        if (parse_hms(p, 167, &d->time) != 0)
            return -1;
    }
    return 0;
}

/* A POSIX TZ string as a TZif footer holds it ("CET-1CEST,M3.5.0,M10.5.0/3",
 * "<+0330>-3:30", "" for none). */
static int parse_posix(const char *s, posix_rule *r)
{
    memset(r, 0, sizeof(*r));
    if (*s == '\0')
        return 0;
    const char *p = s;
    int32_t off;
    if (parse_abbreviation(&p) != 0 || parse_hms(&p, 24, &off) != 0)
        return -1;
    r->present = 1;
    r->std_off = -off;
    if (*p == '\0')
        return 0;
    if (parse_abbreviation(&p) != 0)
        return -1;
    r->has_dst = 1;
    r->dst_off = r->std_off + 3600;
    if (*p != ',' && *p != '\0') {
        if (parse_hms(&p, 24, &off) != 0)
            return -1;
        r->dst_off = -off;
    }
    if (*p == '\0') { /* no dates: POSIX leaves them to the system; the US
                         rules, as glibc assumes */
        r->start = (rule_date){'M', 3, 2, 0, 7200};
        r->end = (rule_date){'M', 11, 1, 0, 7200};
        return 0;
    }
    if (*p++ != ',' || parse_rule_date(&p, &r->start) != 0 || *p++ != ',' ||
        parse_rule_date(&p, &r->end) != 0 || *p != '\0')
        return -1;
    return 0;
}

/* ---- the TZif file --------------------------------------------------- */

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
           b[3];
}

static int64_t be64(const unsigned char *b)
{
    return (int64_t)((uint64_t)be32(b) << 32 | be32(b + 4));
}

typedef struct tzif_counts {
    uint32_t isut, isstd, leap, time, type, chars;
} tzif_counts;

static int read_header(const unsigned char *b, size_t len, char *version,
                       tzif_counts *c)
{
    if (len < 44 || memcmp(b, "TZif", 4) != 0)
        return -1;
    *version = (char)b[4];
    c->isut = be32(b + 20);
    c->isstd = be32(b + 24);
    c->leap = be32(b + 28);
    c->time = be32(b + 32);
    c->type = be32(b + 36);
    c->chars = be32(b + 40);
    return 0;
}

/* Bytes of a data block with times of `width` bytes; 0 when too large. */
static size_t block_size(const tzif_counts *c, size_t width)
{
    if (c->time > 1000000 || c->type > 1000000 || c->chars > 1000000 ||
        c->leap > 1000000 || c->isstd > 1000000 || c->isut > 1000000)
        return 0;
    return (size_t)c->time * (width + 1) + (size_t)c->type * 6 + c->chars +
           (size_t)c->leap * (width + 4) + c->isstd + c->isut;
}

static int bad_file(duro__tz *z, const char *what, duro_error *err)
{
    return duro_error_set(err, DURO_INVALID, 0,
                          "time zone '%s': not a TZif file duro reads: %s",
                          z->name, what);
}

static void add_offset(duro__tz *z, int32_t off)
{
    for (size_t i = 0; i < z->offset_count; i++)
        if (z->offsets[i] == off)
            return;
    z->offsets[z->offset_count++] = off;
}

static int parse_tzif(duro__tz *z, const unsigned char *b, size_t len,
                      duro_error *err)
{
    char version;
    tzif_counts c;
    if (read_header(b, len, &version, &c) != 0)
        return bad_file(z, "no TZif header", err);
    size_t width = 4, at = 44;
    if (version != 0) { /* skip the 32-bit data for the 64-bit */
        size_t v1 = block_size(&c, 4);
        if (v1 == 0 && (c.time | c.type | c.chars | c.leap) != 0)
            return bad_file(z, "counts out of range", err);
        if (v1 > len - at)
            return bad_file(z, "truncated", err);
        at += v1;
        if (read_header(b + at, len - at, &version, &c) != 0)
            return bad_file(z, "no second header", err);
        at += 44;
        width = 8;
    }
    size_t size = block_size(&c, width);
    if (size == 0 || size > len - at)
        return bad_file(z, "truncated or counts out of range", err);
    if (c.leap != 0)
        return bad_file(z, "it has leap seconds (a \"right/\" zone)", err);
    if (c.type == 0 || c.type > TZ_TYPES_MAX || c.chars == 0 ||
        (c.isstd != 0 && c.isstd != c.type) ||
        (c.isut != 0 && c.isut != c.type))
        return bad_file(z, "counts out of range", err);
    const unsigned char *times = b + at;
    const unsigned char *indexes = times + (size_t)c.time * width;
    const unsigned char *types = indexes + c.time;
    z->count = c.time;
    if (c.time > 0) {
        z->at = duro__calloc(c.time, sizeof(*z->at));
        z->index = duro__calloc(c.time, 1);
        if (z->at == NULL || z->index == NULL)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    for (size_t i = 0; i < c.time; i++) {
        z->at[i] =
            width == 8 ? be64(times + i * 8) : (int32_t)be32(times + i * 4);
        z->index[i] = indexes[i];
        if (indexes[i] >= c.type)
            return bad_file(z, "a transition's type out of range", err);
        if (i > 0 && z->at[i] <= z->at[i - 1])
            return bad_file(z, "transitions out of order", err);
    }
    z->type_count = c.type;
    for (size_t i = 0; i < c.type; i++) {
        int32_t off = (int32_t)be32(types + i * 6);
        if (off < -TZ_OFFSET_MAX || off > TZ_OFFSET_MAX ||
            types[i * 6 + 5] >= c.chars)
            return bad_file(z, "a type out of range", err);
        z->types[i].utoff = off;
        add_offset(z, off);
    }
    at += size;
    if (width == 8) { /* the footer: "\n" TZ string "\n" */
        if (at >= len || b[at] != '\n')
            return bad_file(z, "no footer", err);
        const unsigned char *end = memchr(b + at + 1, '\n', len - at - 1);
        if (end == NULL || (size_t)(end - (b + at + 1)) > 200)
            return bad_file(z, "footer not terminated", err);
        char rule[201];
        size_t n = (size_t)(end - (b + at + 1));
        memcpy(rule, b + at + 1, n);
        rule[n] = '\0';
        if (parse_posix(rule, &z->footer) != 0)
            return bad_file(z, "a footer rule it cannot parse", err);
        if (z->footer.present) {
            if (z->footer.std_off < -TZ_OFFSET_MAX ||
                z->footer.std_off > TZ_OFFSET_MAX ||
                z->footer.dst_off < -TZ_OFFSET_MAX ||
                z->footer.dst_off > TZ_OFFSET_MAX)
                return bad_file(z, "a footer offset out of range", err);
            add_offset(z, z->footer.std_off);
            if (z->footer.has_dst)
                add_offset(z, z->footer.dst_off);
        }
    }
    return DURO_OK;
}

/* ---- loading ------------------------------------------------------- */

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > DURO__TZ_NAME_MAX || name[0] == '/')
        return 0;
    const char *component = name;
    for (size_t i = 0; i <= n; i++) {
        char ch = name[i];
        if (ch == '/' || ch == '\0') {
            size_t len = (size_t)(name + i - component);
            if (len == 0 || (len == 1 && component[0] == '.') ||
                (len == 2 && component[0] == '.' && component[1] == '.'))
                return 0;
            component = name + i + 1;
            continue;
        }
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '+' || ch == '-' ||
              ch == '.'))
            return 0;
    }
    return 1;
}

static int is_utc_name(const char *name)
{
    return strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0;
}

/* Reads the file at path into a buffer (free with duro__free). */
static int read_file(duro__tz *z, const char *path, unsigned char **out,
                     size_t *len, duro_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT || errno == ENOTDIR
                   ? duro_error_set(err, DURO_NOT_FOUND, 0,
                                    "time zone '%s' not found (no file %s)",
                                    z->name, path)
                   : duro_error_set(err, DURO_INVALID, 0,
                                    "time zone '%s': cannot read %s: %s",
                                    z->name, path, strerror(errno));
    unsigned char *buf = duro__malloc(TZ_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    size_t n = fread(buf, 1, TZ_FILE_MAX + 1, f);
    int failed = ferror(f);
    fclose(f);
    if (failed || n > TZ_FILE_MAX) {
        duro__free(buf);
        return failed ? duro_error_set(err, DURO_INVALID, 0,
                                       "time zone '%s': cannot read %s",
                                       z->name, path)
                      : bad_file(z, "over 1 MiB", err);
    }
    *out = buf;
    *len = n;
    return DURO_OK;
}

int duro__tz_load(const char *name, duro__tz **out, duro_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || name == NULL || name[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "a time zone name is NULL or empty");
    if (!valid_name(name))
        return duro_error_set(
            err, DURO_INVALID, 0,
            "time zone name '%.*s' is not a zone of the tz database (a "
            "relative path of [A-Za-z0-9/_+.-], at most %d bytes)",
            (int)duro__utf8_cut(name, 100), name, DURO__TZ_NAME_MAX);
    duro__tz *z = duro__calloc(1, sizeof(*z));
    if (z == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    snprintf(z->name, sizeof(z->name), "%s", name);
    const char *dir = getenv("TZDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/usr/share/zoneinfo";
    char *path = duro__sprintf("%s/%s", dir, name);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = path == NULL ? duro_error_set(err, DURO_NOMEM, 0, "out of memory")
                          : read_file(z, path, &buf, &len, err);
    duro__free(path);
    if (rc == DURO_NOT_FOUND && is_utc_name(name)) {
        z->type_count = 1; /* UTC needs no file */
        z->offset_count = 1;
        rc = DURO_OK;
    } else if (rc == DURO_OK) {
        rc = parse_tzif(z, buf, len, err);
    }
    duro__free(buf);
    if (rc != DURO_OK) {
        duro__tz_free(z);
        return rc;
    }
    *out = z;
    return DURO_OK;
}

void duro__tz_free(duro__tz *z)
{
    if (z == NULL)
        return;
    duro__free(z->at);
    duro__free(z->index);
    duro__free(z);
}

const char *duro__tz_name(const duro__tz *z)
{
    return z->name;
}

/* ---- offsets and local time ---------------------------------------- */

int32_t duro__tz_offset(const duro__tz *z, int64_t t)
{
    if (z->count == 0)
        return z->footer.present ? rule_offset(&z->footer, t)
                                 : z->types[0].utoff;
    if (t < z->at[0])
        return z->types[0].utoff; /* RFC 8536: type 0 before the first */
    if (t >= z->at[z->count - 1] && z->footer.present)
        return rule_offset(&z->footer, t);
    size_t lo = 0, hi = z->count; /* the last transition at or before t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (z->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return z->types[z->index[lo]].utoff;
}

int duro__tz_local_instants(const duro__tz *z, int64_t local, int64_t at[2],
                            int64_t *gap_end)
{
    /* t names `local` when t + offset(t) == local: every offset the zone
     * ever has is a candidate. */
    int found = 0;
    int32_t min = z->offsets[0], max = z->offsets[0];
    for (size_t i = 0; i < z->offset_count; i++) {
        int32_t off = z->offsets[i];
        min = off < min ? off : min;
        max = off > max ? off : max;
        int64_t t = local - off;
        if (duro__tz_offset(z, t) != off)
            continue;
        if (found == 0 || (found == 1 && t != at[0])) {
            at[found++] = t;
        } else if (found == 2 && t != at[0] && t != at[1]) {
            /* a third (never seen in the database): keep the earliest two */
            if (t < at[1])
                at[1] = t;
        }
        if (found == 2 && at[1] < at[0]) {
            int64_t swap = at[0];
            at[0] = at[1];
            at[1] = swap;
        }
    }
    if (found > 0)
        return found;
    /* A gap: local time jumps over `local` at a transition between lo
     * (local time before it) and hi (after). */
    int64_t lo = local - max, hi = local - min;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mid + duro__tz_offset(z, mid) < local)
            lo = mid;
        else
            hi = mid;
    }
    *gap_end = hi;
    return 0;
}
