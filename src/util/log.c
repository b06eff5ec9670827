/* log.c: the one logging API, tagged by component, to stderr. */
#include "autoconf.h"

#include <sys/stat.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/err.h>

#include "util/log.h"
#include "util/utf8.h"

/* Written once by log_init before threads start; read-only after. */
static const char	*log_prog = "sluice";
static enum log_level	 log_lvl = LOG_LVL_INFO;
static enum log_format	 log_fmt = LOG_FMT_TEXT;

/* Whether stderr is the journal's stream ($JOURNAL_STREAM is "dev:ino"). */
static int
stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat sb;

	return js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &sb) == 0 &&
	    (unsigned long long)sb.st_dev == dev &&
	    (unsigned long long)sb.st_ino == ino;
}

void
log_init(const char *prog, enum log_level level)
{
	log_prog = prog;
	log_lvl = level;
	log_fmt = stderr_is_journal() ? LOG_FMT_JOURNAL : LOG_FMT_TEXT;
}

void
log_set_format(enum log_format f)
{
	log_fmt = f;
}

enum log_format
log_format(void)
{
	return log_fmt;
}

/* s as the inside of a JSON string into out (cap bytes), cut if need be. */
static void
json_text(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s), i = 0, at, o = 0;
	int32_t cp;

	while (i < len && o + 7 < cap) {
		at = i;
		cp = utf8_next(u, len, &i);
		if (cp == '"' || cp == '\\') {
			out[o++] = '\\';
			out[o++] = (char)cp;
		} else if (cp >= 0 && cp < 0x20) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[cp >> 4];
			out[o + 5] = hex[cp & 15];
			o += 6;
		} else if (cp < 0) {
			memcpy(out + o, "\\ufffd", 6);	/* not UTF-8 */
			o += 6;
		} else {
			if (o + (i - at) + 1 > cap)
				break;
			memcpy(out + o, u + at, i - at);
			o += i - at;
		}
	}
	out[o] = '\0';
}

enum log_level
log_level(void)
{
	return log_lvl;
}

static void log_vwrite(enum log_level, const char *, const char *, va_list)
    __attribute__((format(printf, 3, 0)));

static void
log_vwrite(enum log_level lvl, const char *comp, const char *fmt, va_list ap)
{
	static const char *names[] = { "error", "warning", "info", "debug" };
	char msg[1024];
	struct timespec ts;
	struct tm tm;

	static const int prio[] = { 3, 4, 6, 7 };	/* sd-daemon(3) */
	char jmsg[6 * sizeof(msg) + 1], jcomp[128];

	if (lvl > log_lvl)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One write per line, so lines from threads do not interleave. */
	if (log_fmt == LOG_FMT_JOURNAL) {
		fprintf(stderr, "<%d>%s[%s] %s: %s\n", prio[lvl], log_prog, comp,
		    names[lvl], msg);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (log_fmt == LOG_FMT_JSON) {
		json_text(msg, jmsg, sizeof(jmsg));
		json_text(comp, jcomp, sizeof(jcomp));
		fprintf(stderr, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
		    "\"prog\":\"%s\",\"comp\":\"%s\",\"level\":\"%s\","
		    "\"msg\":\"%s\"}\n", tm.tm_year + 1900, tm.tm_mon + 1,
		    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		    ts.tv_nsec / 1000000, log_prog, jcomp, names[lvl], jmsg);
		return;
	}
	fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%s] %s: %s\n",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	    tm.tm_sec, ts.tv_nsec / 1000000, log_prog, comp, names[lvl], msg);
}

#define LOG_FN(fn, lvl)						\
void								\
fn(const char *comp, const char *fmt, ...)			\
{								\
	va_list ap;						\
	va_start(ap, fmt);					\
	log_vwrite(lvl, comp, fmt, ap);				\
	va_end(ap);						\
}
LOG_FN(log_errx, LOG_LVL_ERR)
LOG_FN(log_warnx, LOG_LVL_WARN)
LOG_FN(log_info, LOG_LVL_INFO)
LOG_FN(log_debug, LOG_LVL_DEBUG)

static void
log_libevent(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent", "%s", msg);
	else
		log_debug("libevent", "%s", msg);
}

void
log_hook_libraries(void)
{
	event_set_log_callback(log_libevent);
}

void
log_openssl(const char *comp, const char *what)
{
	char buf[256];
	unsigned long e;

	if ((e = ERR_get_error()) == 0) {
		log_warnx(comp, "%s", what);
		return;
	}
	ERR_error_string_n(e, buf, sizeof(buf));
	log_warnx(comp, "%s: %s", what, buf);
	ERR_clear_error();
}

char *
log_escape(const char *in, size_t in_len, char *out, size_t out_len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	if (out_len == 0)
		return out;
	for (i = 0; i < in_len; i++) {
		unsigned char ch = (unsigned char)in[i];
		size_t need = (ch >= 0x20 && ch < 0x7f && ch != '\\') ? 1 : 4;

		if (o + need + 4 > out_len) {	/* room for "..." and NUL */
			if (out_len >= 4) {
				memcpy(out + (o < out_len - 4 ? o : out_len - 4), "...", 3);
				o = (o < out_len - 4 ? o : out_len - 4) + 3;
			}
			break;
		}
		if (need == 1)
			out[o++] = (char)ch;
		else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o < out_len ? o : out_len - 1] = '\0';
	return out;
}
