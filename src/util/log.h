/* log.h: the one logging API, tagged by component. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stddef.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/*
 * How a line looks: text ("TIME prog[comp] level: message"), journal
 * (a "<N>" priority prefix for journald, no time: it adds its own) or
 * JSON (one object a line: ts, prog, comp, level, msg).
 */
enum log_format { LOG_FMT_TEXT, LOG_FMT_JOURNAL, LOG_FMT_JSON };

/*
 * Set once in main before any thread starts.  The format starts as
 * journal when stderr is the journal ($JOURNAL_STREAM names it), else
 * text; log_set_format changes it (also before threads start).
 */
void log_init(const char *prog, enum log_level level);
void log_set_format(enum log_format f);
enum log_format log_format(void);
enum log_level log_level(void);

void log_warnx(const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_info(const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_debug(const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_errx(const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Routes libevent's and OpenSSL's error queues through this API. */
void log_hook_libraries(void);
/* Drains OpenSSL's error queue into one warning line. */
void log_openssl(const char *comp, const char *what);

/*
 * Escapes a sandbox-controlled string for a log line: printable ASCII stays,
 * everything else becomes \xHH; the result is cut at out_len - 1 bytes with
 * "..." marking the cut.  Returns out.
 */
char *log_escape(const char *in, size_t in_len, char *out, size_t out_len);

#endif
