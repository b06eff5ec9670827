/* log.c: the one logging API, tagged by component, to stderr. */
#include "autoconf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/err.h>

#include "util/log.h"

/* Written once by log_init before threads start; read-only after. */
static const char	*log_prog = "sluice";
static enum log_level	 log_lvl = LOG_LVL_INFO;

void
log_init(const char *prog, enum log_level level)
{
	log_prog = prog;
	log_lvl = level;
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

	if (lvl > log_lvl)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	/* One write per line, so lines from threads do not interleave. */
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
