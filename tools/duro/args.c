/* args.c - parses what operators type: times (RFC 3339, ISO dates, relative
 * "2h" / "30m ago"), durations ("500ms", "1h30m"), status lists, counts,
 * payloads ("@FILE"), and the default requester. Reports bad input as a
 * usage error. Single-threaded. */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Parses "1h30m", "500ms", "2d", "45" (seconds) from text[0..len). */
static int parse_duration(const char *text, size_t len, int64_t *ms)
{
    if (len == 0)
        return -1;
    int64_t total = 0;
    size_t i = 0;
    int units = 0;
    while (i < len) {
        if (!isdigit((unsigned char)text[i]))
            return -1;
        int64_t n = 0;
        while (i < len && isdigit((unsigned char)text[i])) {
            if (n > (INT64_MAX - 9) / 10)
                return -1;
            n = n * 10 + (text[i++] - '0');
        }
        size_t u = i;
        while (i < len && isalpha((unsigned char)text[i]))
            i++;
        size_t ulen = i - u;
        int64_t scale;
        if (ulen == 0 && i == len && units == 0)
            scale = 1000; /* a bare number: seconds */
        else if (ulen == 2 && strncmp(text + u, "ms", 2) == 0)
            scale = 1;
        else if (ulen == 1 && text[u] == 's')
            scale = 1000;
        else if (ulen == 1 && text[u] == 'm')
            scale = 60 * 1000;
        else if (ulen == 1 && text[u] == 'h')
            scale = 3600 * 1000;
        else if (ulen == 1 && text[u] == 'd')
            scale = 86400 * 1000;
        else if (ulen == 1 && text[u] == 'w')
            scale = 7 * 86400 * 1000;
        else
            return -1;
        if (n > (INT64_MAX - total) / scale)
            return -1;
        total += n * scale;
        units++;
    }
    *ms = total;
    return 0;
}

int args_duration(cli *c, const char *option, const char *text, int64_t *ms)
{
    if (parse_duration(text, strlen(text), ms) != 0) {
        char quoted[TEXT_QUOTE_SIZE];
        cli_usage(c,
                  "%s: bad duration '%s' (expected e.g. 500ms, 30s, 5m, 2h, "
                  "1d, 1h30m; a bare number is seconds)",
                  option, text_quote(text, quoted, sizeof(quoted)));
        return -1;
    }
    return 0;
}

int args_deadline(cli *c, const char *option, const char *text,
                  int64_t *deadline_ms, int64_t *timeout_ms)
{
    *deadline_ms = 0;
    *timeout_ms = 0;
    if (args_parse_iso(text, deadline_ms) == 0 && *deadline_ms > 0)
        return 0;
    *deadline_ms = 0;
    if (parse_duration(text, strlen(text), timeout_ms) == 0 && *timeout_ms > 0)
        return 0;
    *timeout_ms = 0;
    char quoted[TEXT_QUOTE_SIZE];
    cli_usage(c,
              "%s: bad deadline '%s' (expected a valid RFC 3339 time like "
              "2026-05-01T12:00:00Z or with an offset like +02:00, a date "
              "like 2026-05-01 (local), or a duration after the start like "
              "30m, 2h, 7d)",
              option, text_quote(text, quoted, sizeof(quoted)));
    return -1;
}

/* Reads exactly n digits at *p. */
static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

/* Days in month @p mon (1-12) of @p year (Gregorian). */
static int month_days(int year, int mon)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return days[mon - 1] + (mon == 2 && leap);
}

/* RFC 3339 / ISO 8601: "2026-05-01", "2026-05-01T12:03", "...:04",
 * "...:04.123", then "Z", "+02:00", "+0200", "+02" or nothing (local
 * time). 'T' may be a space. A date that does not exist (2026-02-31) is
 * refused, not normalised by mktime. */
int args_parse_iso(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int year, mon, day, hour = 0, min = 0, sec = 0, msec = 0;
    const char *p = s;
    if (digits(&p, 4, &year) || *p++ != '-' || digits(&p, 2, &mon) ||
        *p++ != '-' || digits(&p, 2, &day))
        return -1;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (digits(&p, 2, &hour) || *p++ != ':' || digits(&p, 2, &min))
            return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &sec))
                return -1;
            if (*p == '.' || *p == ',') {
                p++;
                int scale = 100, n = 0;
                if (!isdigit((unsigned char)*p))
                    return -1;
                for (; isdigit((unsigned char)*p); p++, scale /= 10)
                    n += (*p - '0') * scale;
                msec = n;
            }
        }
    }
    if (mon < 1 || mon > 12 || day < 1 || day > month_days(year, mon) ||
        hour > 23 || min > 59 || sec > 60)
        return -1;
    tm.tm_year = year - 1900;
    tm.tm_mon = mon - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = min;
    tm.tm_sec = sec;
    time_t t;
    if (*p == '\0') {
        tm.tm_isdst = -1;
        t = mktime(&tm);
    } else {
        int offset = 0;
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
            if (digits(&p, 2, &oh))
                return -1;
            /* "+02:00", "+0200" or "+02"; a ':' needs its minutes */
            if (*p == ':') {
                p++;
                if (digits(&p, 2, &om))
                    return -1;
            } else if (*p != '\0' && digits(&p, 2, &om)) {
                return -1;
            }
            if (oh > 23 || om > 59)
                return -1;
            offset = sign * (oh * 60 + om) * 60;
        } else {
            return -1;
        }
        if (*p != '\0')
            return -1;
        t = timegm(&tm) - offset;
    }
    if (t == (time_t)-1)
        return -1;
    *ms = (int64_t)t * 1000 + msec;
    return 0;
}

int args_time(cli *c, const char *option, const char *text, int64_t *ms)
{
    size_t len = strlen(text);
    int64_t d;
    if (strcmp(text, "now") == 0) {
        *ms = c->now_ms;
        return 0;
    }
    if (args_parse_iso(text, ms) == 0)
        return 0;
    /* "2h", "2h ago", "30m ago": that long before now. */
    if (len > 4 && strcmp(text + len - 4, " ago") == 0)
        len -= 4;
    if (parse_duration(text, len, &d) == 0 && d <= c->now_ms) {
        *ms = c->now_ms - d;
        return 0;
    }
    char quoted[TEXT_QUOTE_SIZE];
    cli_usage(c,
              "%s: bad time '%s' (expected a valid RFC 3339 time like "
              "2026-05-01T12:00:00Z or with an offset like +02:00, a date "
              "like 2026-05-01 (local), or an age like 2h, '30m ago', 1d)",
              option, text_quote(text, quoted, sizeof(quoted)));
    return -1;
}

int args_status_mask(cli *c, const char *option, const char *text,
                     uint32_t *mask)
{
    *mask = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int s = 1; s <= DURO_STATUS_TERMINATED; s++)
            if (strlen(status_word(s)) == len &&
                strncasecmp(p, status_word(s), len) == 0)
                found = s;
        if (found < 0 && len == 8 && strncasecmp(p, "canceled", 8) == 0)
            found = DURO_STATUS_CANCELLED;
        if (found == DURO_STATUS_CONTINUED_AS_NEW) {
            /* a status of executions: the instance of a chain stays
             * running, so no instance ever matches it */
            cli_usage(c,
                      "%s: no instance has the status continued_as_new (an "
                      "instance that continues as new stays running; duro "
                      "history --execution N shows its ended executions)",
                      option);
            return -1;
        }
        if (found < 0) {
            char quoted[TEXT_QUOTE_SIZE];
            char *word = strndup(p, len);
            cli_usage(c,
                      "%s: unknown status '%s' (expected pending, running, "
                      "suspended, completed, failed, cancelled, terminated, "
                      "separated by commas)",
                      option,
                      text_quote(word ? word : "", quoted, sizeof(quoted)));
            free(word);
            return -1;
        }
        *mask |= 1u << found;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

int args_uint_range(cli *c, const char *option, const char *text, uint64_t min,
                    uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 ||
        v < min || v > max) {
        char quoted[TEXT_QUOTE_SIZE];
        cli_usage(c, "%s: bad number '%s' (expected %llu to %llu)", option,
                  text_quote(text, quoted, sizeof(quoted)),
                  (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int args_uint(cli *c, const char *option, const char *text, uint64_t max,
              uint64_t *out)
{
    return args_uint_range(c, option, text, 0, max, out);
}

int args_payload(cli *c, const char *option, const char *text, char **out)
{
    *out = NULL;
    if (text[0] != '@') {
        *out = strdup(text);
        return *out != NULL ? 0 : -1;
    }
    const char *path = text + 1;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        cli_usage(c, "%s: cannot read '%s': %s", option, path, strerror(errno));
        return -1;
    }
    size_t size = 0, cap = 4096;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t n = fread(buf + size, 1, cap - size - 1, f);
        size += n;
        if (n == 0)
            break;
        if (cap - size - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int failed = buf == NULL || ferror(f);
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(buf);
        cli_usage(c, "%s: cannot read '%s'", option, path);
        return -1;
    }
    buf[size] = '\0';
    if (strlen(buf) != size) {
        free(buf);
        cli_usage(c, "%s: '%s' contains a NUL byte", option, path);
        return -1;
    }
    *out = buf;
    return 0;
}

const char *args_default_requester(char *buf, size_t size)
{
    struct passwd *pw = getpwuid(geteuid());
    const char *name = pw != NULL && pw->pw_name != NULL ? pw->pw_name : NULL;
    if (name == NULL) {
        name = getenv("USER");
        if (name == NULL || *name == '\0')
            name = "unknown";
    }
    snprintf(buf, size, "user:%s", name);
    return buf;
}
