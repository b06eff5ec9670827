/*
 * cmd_audit.c: sluicectl audit verify (offline: chain, hashes and signed
 * checkpoints of audit files) and audit tail (the last records of the
 * audit file, readable and filtered, and those that follow).
 */
#include "autoconf.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/err.h"
#include "util/utf8.h"
#include "keys/signkey.h"
#include "audit/auditfmt.h"
#include "sluicectl/api.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"

#define PUBS_MAX	16
#define TAIL_LINES	20
#define TAIL_MAX	1000000		/* -n: offsets kept, 16 bytes each */
#define POLL_NS		200000000L	/* -f: 200 ms */
#define TYPE_COL	10
#define SANDBOX_COL	10

/* Prints "sluicectl: audit VERB: a: b" with both made safe to show. */
static void
err_safe(const struct cmd *c, const char *a, const char *b)
{
	cmd_prefix(c, stderr);
	fput_safe(a, stderr);
	if (b != NULL) {
		fputs(": ", stderr);
		fput_safe(b, stderr);
	}
	fputc('\n', stderr);
}

/* ---- audit verify ------------------------------------------------------- */

struct verify_opts {
	const char	*pubs[PUBS_MAX];
	size_t		 npubs;
	int		 open;
};

static int
verify_args(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
    struct verify_opts *o, int *first)
{
	static const struct option opts[] = {
		{ "pub", required_argument, NULL, 'p' },
		{ "open", no_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (o->npubs == PUBS_MAX)
				return cmd_usage_err(c, "at most %d --pub",
				    PUBS_MAX);
			o->pubs[o->npubs++] = optarg;
			break;
		case 'o':
			o->open = 1;
			break;
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_err(c, "missing FILE");
	*first = optind;
	return CMD_GO;
}

static int
load_pubs(const struct cmd *c, const struct verify_opts *o,
    struct signpub **pubs)
{
	const char *why;
	size_t i;
	int r;

	for (i = 0; i < o->npubs; i++) {
		why = NULL;
		if ((r = signpub_load(o->pubs[i], &pubs[i], &why)) != 0) {
			err_safe(c, o->pubs[i], why != NULL ? why : err_str(r));
			return -1;
		}
	}
	return 0;
}

static const char *
plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void
verify_text(const struct audit_verify_stats *st, const char *last_file)
{
	printf("ok: %llu %s in %llu %s, ", (unsigned long long)st->records,
	    plural(st->records, "record", "records"),
	    (unsigned long long)st->files, plural(st->files, "file", "files"));
	if (st->checkpoints == 0)
		printf("no checkpoint");
	else {
		printf("%llu %s, last checkpoint at seq %llu (key ",
		    (unsigned long long)st->checkpoints,
		    plural(st->checkpoints, "checkpoint", "checkpoints"),
		    (unsigned long long)st->last_checkpoint_seq);
		fput_safe(st->last_kid, stdout);
		putchar(')');
	}
	if (st->records > 0)
		printf("; chain head %s", st->last_hash);
	putchar('\n');
	if (st->mid_chain)
		printf("note: the trail starts mid-chain at seq %llu "
		    "(prev %s): what came before is not checked\n",
		    (unsigned long long)st->first_seq, st->first_prev);
	if (st->unsigned_tail > 0 && st->checkpoints > 0)
		printf("open: %llu unsigned %s after the last checkpoint, "
		    "up to seq %llu\n", (unsigned long long)st->unsigned_tail,
		    plural(st->unsigned_tail, "record", "records"),
		    (unsigned long long)st->last_seq);
	else if (st->unsigned_tail > 0)
		printf("open: %llu unsigned %s, up to seq %llu (no checkpoint "
		    "yet)\n", (unsigned long long)st->unsigned_tail,
		    plural(st->unsigned_tail, "record", "records"),
		    (unsigned long long)st->last_seq);
	if (st->outages > 0)
		printf("note: the writer could not write for %llu ms in %llu "
		    "%s; %llu %s refused meanwhile\n",
		    (unsigned long long)st->outage_ms,
		    (unsigned long long)st->outages,
		    plural(st->outages, "interval", "intervals"),
		    (unsigned long long)st->outage_refused,
		    plural(st->outage_refused, "request", "requests"));
	if (st->torn) {
		printf("open: a torn last line (%zu bytes, no newline) in ",
		    st->torn_bytes);
		fput_safe(last_file, stdout);
		printf(", not checked\n");
	}
}

/* Returns 0 or SL_ERR_NOMEM. */
static int
verify_json(const struct audit_verify_stats *st, const char *error)
{
	json_t *o;
	int r;

	o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:s?, s:s?, s:s?,"
	    " s:b, s:s?, s:I, s:b, s:I, s:I, s:I, s:I, s:s?}", "ok",
	    error == NULL,
	    "records", (json_int_t)st->records,
	    "files", (json_int_t)st->files,
	    "checkpoints", (json_int_t)st->checkpoints,
	    "first_seq", (json_int_t)st->first_seq,
	    "last_seq", (json_int_t)st->last_seq,
	    "last_checkpoint_seq", (json_int_t)st->last_checkpoint_seq,
	    "last_checkpoint_ts", st->checkpoints ? st->last_checkpoint_ts :
	    NULL,
	    "key_id", st->checkpoints ? st->last_kid : NULL,
	    "chain_head", st->records ? st->last_hash : NULL,
	    "mid_chain", st->mid_chain,
	    "first_prev", st->records ? st->first_prev : NULL,
	    "unsigned_tail", (json_int_t)st->unsigned_tail,
	    "torn", st->torn, "torn_bytes", (json_int_t)st->torn_bytes,
	    "outages", (json_int_t)st->outages,
	    "outage_ms", (json_int_t)st->outage_ms,
	    "outage_refused", (json_int_t)st->outage_refused,
	    "error", error);
	if (o == NULL)
		return SL_ERR_NOMEM;
	r = print_json(o) == 0 ? 0 : SL_ERR_IO;
	json_decref(o);
	return r;
}

/* Runs the verifier over argv[first..argc); 0 or the first error. */
static int
verify_files(struct audit_verifier *v, int argc, char **argv, int first,
    char *why, size_t why_len)
{
	int i, r;

	for (i = first; i < argc; i++)
		if ((r = audit_verifier_file(v, argv[i], why, why_len)) != 0)
			return r;
	return audit_verifier_finish(v, why, why_len);
}

int
cmd_audit_verify(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	struct signpub *pubs[PUBS_MAX] = { NULL };
	struct verify_opts o = { { NULL }, 0, 0 };
	struct audit_verify_stats st;
	struct audit_verifier *v = NULL;
	char why[1024];
	size_t i;
	int rc, r, first;

	if ((rc = verify_args(ctl, c, argc, argv, &o, &first)) != CMD_GO)
		return rc;
	rc = EXIT_FAIL;
	if (load_pubs(c, &o, pubs) != 0)
		goto out;
	if ((v = audit_verifier_new(pubs, o.npubs, o.open ?
	    AUDIT_VERIFY_OPEN : 0)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	r = verify_files(v, argc, argv, first, why, sizeof(why));
	audit_verifier_stats(v, &st);
	if (ctl->json && verify_json(&st, r == 0 ? NULL : why) != 0)
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
	else if (!ctl->json && r == 0)
		verify_text(&st, argv[argc - 1]);
	if (r == 0) {
		rc = EXIT_OK;
		goto out;
	}
	err_safe(c, why, NULL);
	if (r == SL_ERR_NOT_FOUND && o.npubs == 0)
		cmd_err(c, "the trail has signed checkpoints: give the "
		    "gateway's signing.pub with --pub to check them");
 out:
	audit_verifier_free(v);
	for (i = 0; i < o.npubs; i++)
		signpub_free(pubs[i]);
	return rc;
}

/* ---- audit tail: options ------------------------------------------------ */

struct tail_opts {
	const char	*file;
	const char	*sandbox, *secret, *rule, *action, *type;
	unsigned long	 n;
	int		 follow;
};

/* N of -n: a whole number up to TAIL_MAX; 0 or -1. */
static int
parse_count(const char *s, unsigned long *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > TAIL_MAX)
		return -1;
	*out = (unsigned long)v;
	return 0;
}

static int
tail_args(struct ctl *ctl, const struct cmd *c, int argc, char **argv,
    struct tail_opts *o)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "lines", required_argument, NULL, 'n' },
		{ "file", required_argument, NULL, 'F' },
		{ "sandbox", required_argument, NULL, 'S' },
		{ "secret", required_argument, NULL, 'K' },
		{ "rule", required_argument, NULL, 'R' },
		{ "action", required_argument, NULL, 'A' },
		{ "type", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":fn:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			o->follow = 1;
			break;
		case 'n':
			if (parse_count(optarg, &o->n) != 0)
				return cmd_usage_err(c, "-n wants a whole "
				    "number up to %d", TAIL_MAX);
			break;
		case 'F':
			o->file = optarg;
			break;
		case 'S':
			o->sandbox = optarg;
			break;
		case 'K':
			o->secret = optarg;
			break;
		case 'R':
			o->rule = optarg;
			break;
		case 'A':
			o->action = optarg;
			break;
		case 'T':
			o->type = optarg;
			break;
		case 'j':
			ctl->json = 1;
			break;
		case 'h':
			cmd_usage(c, stdout);
			return EXIT_OK;
		default:
			return cmd_badopt(c, ch, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_err(c, "unexpected argument '%s'",
		    argv[optind]);
	return CMD_GO;
}

/* The daemon's audit file from GET /v1/status: *path (malloc'd). */
static int
daemon_audit_path(const struct ctl *ctl, const struct cmd *c, char **path)
{
	const json_t *p;
	json_t *ans = NULL;
	int rc;

	if (api_json(ctl, c, "GET", "/v1/status", NULL, &ans) != EXIT_OK) {
		cmd_err(c, "cannot ask the daemon where its audit file is; "
		    "give the file with --file PATH");
		return EXIT_FAIL;
	}
	p = json_object_get(ans, "audit_path");
	rc = EXIT_FAIL;
	if (!json_is_string(p) || json_string_length(p) == 0)
		cmd_err(c, "the daemon names no audit file (no audit_path in "
		    "its status); give one with --file PATH");
	else if ((*path = strdup(json_string_value(p))) == NULL)
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
	else
		rc = EXIT_OK;
	json_decref(ans);
	return rc;
}

/* ---- audit tail: matching ------------------------------------------------ */

static int
str_is(const json_t *v, const char *s)
{
	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	    memcmp(json_string_value(v), s, strlen(s)) == 0;
}

/* Whether rec names the secret: "secret", or in "secrets" by name. */
static int
names_secret(const json_t *rec, const char *name)
{
	const json_t *item;
	size_t i;

	if (str_is(json_object_get(rec, "secret"), name))
		return 1;
	json_array_foreach(json_object_get(rec, "secrets"), i, item)
		if (str_is(item, name) ||
		    str_is(json_object_get(item, "name"), name))
			return 1;
	return 0;
}

static int
matches(const struct tail_opts *o, const json_t *rec)
{
	if (o->type != NULL && !str_is(json_object_get(rec, "type"), o->type))
		return 0;
	if (o->sandbox != NULL &&
	    !str_is(json_object_get(rec, "sandbox"), o->sandbox))
		return 0;
	if (o->rule != NULL && !str_is(json_object_get(rec, "rule"), o->rule))
		return 0;
	/* A DNS record's action is its verdict. */
	if (o->action != NULL &&
	    !str_is(json_object_get(rec, "action"), o->action) &&
	    !str_is(json_object_get(rec, "verdict"), o->action))
		return 0;
	if (o->secret != NULL && !names_secret(rec, o->secret))
		return 0;
	return 1;
}

/* line[0..n) as a record when it is one and matches: 1 and *rec; 0 when
 * it is a record that does not match; -1 when it is not a record. */
static int
parse_match(const struct tail_opts *o, const char *line, size_t n,
    json_t **rec)
{
	json_t *v;

	if ((v = json_loadb(line, n, JSON_ALLOW_NUL, NULL)) == NULL ||
	    !json_is_object(v)) {
		json_decref(v);
		return -1;
	}
	if (!matches(o, v)) {
		json_decref(v);
		return 0;
	}
	*rec = v;
	return 1;
}

/* ---- audit tail: showing ------------------------------------------------- */

/*
 * Characters a terminal must not get from a file: C1 controls (some
 * terminals obey them in UTF-8), and the marks that reorder or hide text.
 */
static int
bad_char(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	    cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
	    (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

/*
 * Writes s[0..len) for a terminal: control characters, C1 controls,
 * bidirectional marks and broken UTF-8 as '?'.  Returns the columns it
 * took, one a character.
 */
static size_t
put_esc(const char *s, size_t len, FILE *f)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, at, cols = 0;
	int32_t cp;

	while (i < len) {
		at = i;
		cp = utf8_next(p, len, &i);
		if (cp < 0x20 || cp == 0x7f || bad_char((uint32_t)cp))
			fputc('?', f);		/* broken UTF-8 too (-1) */
		else
			fwrite(p + at, 1, i - at, f);
		cols++;
	}
	return cols;
}

static void
put_value(const json_t *v, FILE *f)
{
	const json_t *item;
	char *s;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_STRING:
		put_esc(json_string_value(v), json_string_length(v), f);
		break;
	case JSON_INTEGER:
		fprintf(f, "%lld", (long long)json_integer_value(v));
		break;
	case JSON_ARRAY:
		json_array_foreach(v, i, item) {
			if (i > 0)
				fputc(',', f);
			put_value(item, f);
		}
		break;
	default:
		if ((s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) != NULL)
			put_esc(s, strlen(s), f);
		free(s);
	}
}

/* A column of width characters at least. */
static void
put_col(const json_t *v, size_t width, FILE *f)
{
	size_t cols = 1;

	if (json_is_string(v) && json_string_length(v) > 0)
		cols = put_esc(json_string_value(v), json_string_length(v), f);
	else
		fputc('-', f);
	for (; cols < width; cols++)
		fputc(' ', f);
}

enum fkind {
	F_BARE,		/* the value */
	F_KV,		/* label=value (label NULL: the key) */
	F_ADDR,		/* [label ]addr:port, the port from key_port */
	F_AT,		/* value@label's value: name@version */
	F_TARGET,	/* host and path, or the target as it came */
	F_SECRETS,	/* secrets=name@version,... */
	F_MS,		/* value "ms" */
	F_FLAG,		/* label when true */
};

struct field {
	enum fkind	 kind;
	const char	*key;
	const char	*label;
};

struct shape {
	const char		*type;
	const struct field	*fields;
};

static const struct field conn_fields[] = {
	{ F_BARE, "action", NULL }, { F_ADDR, "src", NULL },
	{ F_ADDR, "dst", "->" }, { F_BARE, "proto", NULL },
	{ F_KV, "sni", NULL }, { F_KV, "host", NULL },
	{ F_KV, "upstream", NULL }, { F_KV, "rule", NULL },
	{ F_KV, "reason", NULL }, { F_KV, "close", NULL },
	{ F_KV, "bytes_up", "up" }, { F_KV, "bytes_down", "down" },
	{ F_MS, "duration_ms", NULL }, { F_FLAG, "ech", "ech" },
	{ F_KV, NULL, NULL },
};
static const struct field request_fields[] = {
	{ F_BARE, "action", NULL }, { F_BARE, "method", NULL },
	{ F_TARGET, "host", NULL }, { F_KV, "rule", NULL },
	{ F_KV, "reason", NULL }, { F_SECRETS, "secrets", NULL },
	{ F_KV, "status", NULL }, { F_KV, "bytes_up", "up" },
	{ F_KV, "bytes_down", "down" }, { F_MS, "duration_ms", NULL },
	{ F_KV, "rid", NULL }, { F_KV, NULL, NULL },
};
static const struct field response_fields[] = {
	{ F_BARE, "action", NULL }, { F_KV, "status", NULL },
	{ F_KV, "rule", NULL }, { F_KV, "reason", NULL },
	{ F_KV, "redacted", NULL }, { F_KV, "bytes_up", "up" },
	{ F_KV, "bytes_down", "down" }, { F_MS, "duration_ms", NULL },
	{ F_KV, "rid", NULL }, { F_KV, NULL, NULL },
};
static const struct field dns_fields[] = {
	{ F_BARE, "verdict", NULL }, { F_BARE, "name", NULL },
	{ F_BARE, "qtype", NULL }, { F_KV, "reason", NULL },
	{ F_KV, "answers", NULL }, { F_KV, "removed", NULL },
	{ F_KV, "cname_cut", NULL }, { F_KV, "ech_stripped", NULL },
	{ F_FLAG, "truncated", "truncated" },
	{ F_KV, "refused_since_last", "refused" }, { F_KV, NULL, NULL },
};
static const struct field checkpoint_fields[] = {
	{ F_KV, "records", NULL }, { F_KV, "key_id", "key" },
	{ F_KV, NULL, NULL },
};
static const struct field secret_fields[] = {
	{ F_AT, "secret", "version" }, { F_KV, "fingerprint", "fp" },
	{ F_KV, "previous_version", "was" }, { F_KV, "hosts", NULL },
	{ F_KV, "cause", NULL }, { F_KV, "error", NULL },
	{ F_KV, "uid", NULL }, { F_KV, NULL, NULL },
};
static const struct field reflected_fields[] = {
	{ F_BARE, "host", NULL }, { F_SECRETS, "secrets", NULL },
	{ F_KV, "in_head", NULL }, { F_KV, "in_body", NULL },
	{ F_KV, "rule", NULL }, { F_KV, "rid", NULL }, { F_KV, NULL, NULL },
};
static const struct field sandbox_fields[] = {
	{ F_AT, "policy", "revision" }, { F_KV, "sources", NULL },
	{ F_KV, "team", NULL }, { F_KV, "project", NULL },
	{ F_KV, "generation", "gen" }, { F_KV, "uid", NULL },
	{ F_KV, NULL, NULL },
};
static const struct field policy_fields[] = {
	{ F_AT, "policy", "revision" }, { F_KV, "previous", NULL },
	{ F_KV, "previous_revision", "was" }, { F_KV, "cause", NULL },
	{ F_KV, "file", NULL }, { F_FLAG, "inline", "inline" },
	{ F_KV, "generation", "gen" }, { F_KV, "uid", NULL },
	{ F_KV, NULL, NULL },
};

static const struct shape shapes[] = {
	{ "conn", conn_fields },
	{ "request", request_fields },
	{ "response", response_fields },
	{ "dns", dns_fields },
	{ "checkpoint", checkpoint_fields },
	{ "secret_rotate", secret_fields },
	{ "secret_delete", secret_fields },
	{ "secret_refused", secret_fields },
	{ "secret_reflected", reflected_fields },
	{ "sandbox_add", sandbox_fields },
	{ "sandbox_delete", sandbox_fields },
	{ "policy_change", policy_fields },
};

static int
present(const json_t *v)
{
	return v != NULL && !json_is_null(v) &&
	    !(json_is_string(v) && json_string_length(v) == 0) &&
	    !(json_is_array(v) && json_array_size(v) == 0);
}

/* host and path, or a request target that is not a path. */
static void
put_target(const json_t *rec, FILE *f)
{
	const json_t *host = json_object_get(rec, "host");
	const json_t *path = json_object_get(rec, "path");
	const json_t *target = json_object_get(rec, "target");

	if (!present(path) && present(target) &&
	    json_string_value(target)[0] != '/') {
		put_value(target, f);
		return;
	}
	if (present(host))
		put_value(host, f);
	if (present(path))
		put_value(path, f);
	else if (present(target))
		put_value(target, f);
}

static void
put_secrets(const json_t *list, FILE *f)
{
	const json_t *s;
	size_t i;

	fputs("secrets=", f);
	json_array_foreach(list, i, s) {
		if (i > 0)
			fputc(',', f);
		if (!json_is_object(s)) {
			put_value(s, f);
			continue;
		}
		put_value(json_object_get(s, "name"), f);
		if (present(json_object_get(s, "version"))) {
			fputc('@', f);
			put_value(json_object_get(s, "version"), f);
		}
	}
}

/* One field of rec, after a space; nothing when it is absent. */
static void
put_field(const json_t *rec, const struct field *fd, FILE *f)
{
	const json_t *v = json_object_get(rec, fd->key);
	const json_t *port;

	if (fd->kind == F_TARGET ? !present(v) &&
	    !present(json_object_get(rec, "target")) : !present(v))
		return;
	if (fd->kind == F_FLAG && !json_is_true(v))
		return;
	fputc(' ', f);
	switch (fd->kind) {
	case F_BARE:
		put_value(v, f);
		break;
	case F_KV:
		fprintf(f, "%s=", fd->label != NULL ? fd->label : fd->key);
		put_value(v, f);
		break;
	case F_ADDR:
		if (fd->label != NULL)
			fprintf(f, "%s ", fd->label);
		if (json_is_string(v) && strchr(json_string_value(v), ':'))
			fputc('[', f);
		put_value(v, f);
		if (json_is_string(v) && strchr(json_string_value(v), ':'))
			fputc(']', f);
		if (json_is_integer(port = json_object_get(rec,
		    strcmp(fd->key, "src") == 0 ? "src_port" : "dst_port")))
			fprintf(f, ":%lld",
			    (long long)json_integer_value(port));
		break;
	case F_AT:
		put_value(v, f);
		if (present(json_object_get(rec, fd->label))) {
			fputc('@', f);
			put_value(json_object_get(rec, fd->label), f);
		}
		break;
	case F_TARGET:
		put_target(rec, f);
		break;
	case F_SECRETS:
		put_secrets(v, f);
		break;
	case F_MS:
		put_value(v, f);
		fputs("ms", f);
		break;
	case F_FLAG:
		fputs(fd->label, f);
		break;
	}
}

/* The members every record has, shown in the columns or not at all. */
static int
common_key(const char *k)
{
	static const char *const keys[] = { "ts", "seq", "type", "sandbox",
	    "prev", "hash", "sig", NULL };
	size_t i;

	for (i = 0; keys[i] != NULL; i++)
		if (strcmp(k, keys[i]) == 0)
			return 1;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A record of a type we do not know: all its members, sorted. */
static void
put_unknown(const json_t *rec, FILE *f)
{
	const char **keys;
	const char *k;
	json_t *v;
	size_t n = 0, i;

	if ((keys = calloc(json_object_size(rec) + 1, sizeof(*keys))) == NULL)
		return;
	json_object_foreach((json_t *)(uintptr_t)rec, k, v)
		if (!common_key(k))
			keys[n++] = k;
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (i = 0; i < n; i++) {
		fputc(' ', f);
		put_esc(keys[i], strlen(keys[i]), f);
		fputc('=', f);
		put_value(json_object_get(rec, keys[i]), f);
	}
	free(keys);
}

static const struct shape *
shape_of(const json_t *rec)
{
	size_t i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (str_is(json_object_get(rec, "type"), shapes[i].type))
			return &shapes[i];
	return NULL;
}

/* One readable line: ts #seq type sandbox, then what the type has. */
static void
put_record(const json_t *rec, FILE *f)
{
	const struct shape *sh = shape_of(rec);
	const json_t *ts = json_object_get(rec, "ts");
	const struct field *fd;

	put_col(ts, 24, f);
	if (json_is_integer(json_object_get(rec, "seq")))
		fprintf(f, " #%-6lld ", (long long)json_integer_value(
		    json_object_get(rec, "seq")));
	else
		fputs(" #?      ", f);
	put_col(json_object_get(rec, "type"), TYPE_COL, f);
	fputc(' ', f);
	put_col(json_object_get(rec, "sandbox"), SANDBOX_COL, f);
	if (sh == NULL)
		put_unknown(rec, f);
	else
		for (fd = sh->fields; fd->key != NULL; fd++)
			put_field(rec, fd, f);
	fputc('\n', f);
}

/* A record as it is in the file, or made plain ASCII when it is not. */
static void
put_json(const json_t *rec, const char *line, size_t n, FILE *f)
{
	char *s;
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20 ||
		    (unsigned char)line[i] >= 0x7f)
			break;
	if (i == n) {
		fwrite(line, 1, n, f);
		fputc('\n', f);
		return;
	}
	if ((s = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENSURE_ASCII)) == NULL)
		return;
	/* DEL can only be in a string, where \u007f means the same. */
	for (i = 0; s[i] != '\0'; i++)
		if (s[i] == 0x7f)
			fputs("\\u007f", f);
		else
			fputc(s[i], f);
	fputc('\n', f);
	free(s);
}

/* ---- audit tail: reading ------------------------------------------------- */

/* A file read line by line, as it grows, and again when it is replaced. */
struct reader {
	const char	*path;
	int		 fd;
	dev_t		 dev;
	ino_t		 ino;
	off_t		 pos;		/* the file offset of buf[0] */
	char		*buf;		/* AUDIT_LINE_MAX bytes */
	size_t		 start, len;	/* not yet returned: buf[start..len) */
	uint64_t	 lineno;
	int		 skipping;	/* in a line over AUDIT_LINE_MAX */
};

#define LINE_TOO_LONG	2

/* (Re)opens rd->path from its start.  0, or -1 with errno. */
static int
reader_open(struct reader *rd)
{
	struct stat sb;
	int fd;

	if ((fd = open(rd->path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &sb) == -1) {
		close(fd);
		return -1;
	}
	if (rd->fd != -1)
		close(rd->fd);
	rd->fd = fd;
	rd->dev = sb.st_dev;
	rd->ino = sb.st_ino;
	rd->pos = 0;
	rd->start = rd->len = 0;
	rd->lineno = 0;
	rd->skipping = 0;
	return 0;
}

/* Drops what is buffered and reads the same file again from its start. */
static void
reader_rewind(struct reader *rd)
{
	if (lseek(rd->fd, 0, SEEK_SET) == -1)
		return;
	rd->pos = 0;
	rd->start = rd->len = 0;
	rd->lineno = 0;
	rd->skipping = 0;
}

/*
 * The next whole line, without its "\n", at *line (valid until the next
 * call) and *n, from file offset *at: 1; LINE_TOO_LONG for a line over
 * AUDIT_LINE_MAX, skipped; 0 when there is no whole line yet; -1 when
 * reading fails (errno).
 */
static int
reader_next(struct reader *rd, const char **line, size_t *n, off_t *at)
{
	size_t s;
	ssize_t got;
	char *nl;

	for (;;) {
		nl = memchr(rd->buf + rd->start, '\n', rd->len - rd->start);
		if (nl != NULL) {
			s = rd->start;
			rd->start = (size_t)(nl - rd->buf) + 1;
			rd->lineno++;
			if (rd->skipping) {
				rd->skipping = 0;
				return LINE_TOO_LONG;
			}
			*line = rd->buf + s;
			*n = (size_t)(nl - (rd->buf + s));
			*at = rd->pos + (off_t)s;
			return 1;
		}
		memmove(rd->buf, rd->buf + rd->start, rd->len - rd->start);
		rd->pos += (off_t)rd->start;
		rd->len -= rd->start;
		rd->start = 0;
		if (rd->len == AUDIT_LINE_MAX) {
			rd->pos += (off_t)rd->len;
			rd->len = 0;
			rd->skipping = 1;
		}
		got = read(rd->fd, rd->buf + rd->len, AUDIT_LINE_MAX - rd->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got == 0 ? 0 : -1;
		rd->len += (size_t)got;
	}
}

/* ---- audit tail: the command --------------------------------------------- */

/* Where the last N matching records are, oldest first from head. */
struct ring {
	struct {
		off_t	 at;
		size_t	 len;
	}		*v;
	size_t		 cap, head, n;
};

static void
ring_push(struct ring *r, off_t at, size_t len)
{
	size_t i;

	if (r->cap == 0)
		return;
	i = (r->head + r->n) % r->cap;
	if (r->n == r->cap)
		r->head = (r->head + 1) % r->cap;
	else
		r->n++;
	r->v[i].at = at;
	r->v[i].len = len;
}

struct tail {
	const struct tail_opts	*o;
	const struct ctl	*ctl;
	const struct cmd	*c;
	struct reader		 rd;
	uint64_t		 bad;	/* lines that are not records */
};

static void
show(struct tail *t, const json_t *rec, const char *line, size_t n)
{
	if (t->ctl->json)
		put_json(rec, line, n, stdout);
	else
		put_record(rec, stdout);
}

/* Says a line was skipped (while following: as it happens). */
static void
skipped(struct tail *t, const char *what)
{
	char where[64];

	snprintf(where, sizeof(where), "line %llu",
	    (unsigned long long)t->rd.lineno);
	cmd_prefix(t->c, stderr);
	fput_safe(t->rd.path, stderr);
	fprintf(stderr, ": %s: %s, skipped\n", where, what);
}

/* Prints the records that ring locates (read again with pread). */
static int
show_ring(struct tail *t, const struct ring *r)
{
	json_t *rec = NULL;
	char *buf;
	size_t i, k;

	if ((buf = malloc(AUDIT_LINE_MAX)) == NULL)
		return SL_ERR_NOMEM;
	for (k = 0; k < r->n; k++) {
		i = (r->head + k) % r->cap;
		/* Replaced in place meanwhile: the line is gone. */
		if (pread(t->rd.fd, buf, r->v[i].len, r->v[i].at) !=
		    (ssize_t)r->v[i].len ||
		    parse_match(t->o, buf, r->v[i].len, &rec) != 1)
			continue;
		show(t, rec, buf, r->v[i].len);
		json_decref(rec);
	}
	free(buf);
	return 0;
}

/* Reads the file to its end, then shows the last N records matching. */
static int
tail_initial(struct tail *t)
{
	struct ring r = { NULL, t->o->n, 0, 0 };
	const char *line;
	json_t *rec;
	size_t n;
	off_t at;
	int got, m;

	if (r.cap > 0 && (r.v = calloc(r.cap, sizeof(*r.v))) == NULL)
		return SL_ERR_NOMEM;
	while ((got = reader_next(&t->rd, &line, &n, &at)) > 0) {
		if (got == LINE_TOO_LONG) {
			t->bad++;
			continue;
		}
		if ((m = parse_match(t->o, line, n, &rec)) < 0)
			t->bad++;
		else if (m == 1) {
			ring_push(&r, at, n);
			json_decref(rec);
		}
	}
	if (got == 0)
		got = show_ring(t, &r);
	else
		got = SL_ERR_IO;
	free(r.v);
	return got;
}

/* Shows each new whole line that matches, until there is none. */
static int
tail_new(struct tail *t)
{
	const char *line;
	json_t *rec;
	size_t n;
	off_t at;
	int got, m;

	while ((got = reader_next(&t->rd, &line, &n, &at)) > 0) {
		if (got == LINE_TOO_LONG) {
			skipped(t, "longer than the longest record");
			continue;
		}
		if ((m = parse_match(t->o, line, n, &rec)) < 0)
			skipped(t, "not a JSON record");
		else if (m == 1) {
			show(t, rec, line, n);
			json_decref(rec);
		}
	}
	return got == 0 ? 0 : SL_ERR_IO;
}

/*
 * After a pause: a file that was rotated (another inode at the path) is
 * read to its end, then the new one from its start; one truncated in
 * place is read again from its start.
 */
static int
tail_check_replaced(struct tail *t)
{
	struct stat sb, fsb;
	int r;

	if (stat(t->rd.path, &sb) == -1)
		return 0;	/* between rename and create: wait */
	if (sb.st_ino != t->rd.ino || sb.st_dev != t->rd.dev) {
		if ((r = tail_new(t)) != 0)
			return r;
		if (reader_open(&t->rd) == -1)
			return 0;	/* try again at the next turn */
		return 0;
	}
	if (fstat(t->rd.fd, &fsb) == 0 &&
	    fsb.st_size < t->rd.pos + (off_t)t->rd.len)
		reader_rewind(&t->rd);
	return 0;
}

static int
tail_follow(struct tail *t)
{
	const struct timespec pause = { 0, POLL_NS };
	int r;

	for (;;) {
		if ((r = tail_new(t)) != 0)
			return r;
		/* Nobody reads any more: main says why. */
		if (fflush(stdout) != 0 || ferror(stdout))
			return 0;
		nanosleep(&pause, NULL);
		if ((r = tail_check_replaced(t)) != 0)
			return r;
	}
}

int
cmd_audit_tail(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	struct tail_opts o = { NULL, NULL, NULL, NULL, NULL, NULL,
	    TAIL_LINES, 0 };
	struct tail t;
	char *path = NULL;
	int rc, r;

	if ((rc = tail_args(ctl, c, argc, argv, &o)) != CMD_GO)
		return rc;
	memset(&t, 0, sizeof(t));
	t.o = &o;
	t.ctl = ctl;
	t.c = c;
	t.rd.fd = -1;
	rc = EXIT_FAIL;
	if (o.file == NULL &&
	    daemon_audit_path(ctl, c, &path) != EXIT_OK)
		goto out;
	t.rd.path = o.file != NULL ? o.file : path;
	if ((t.rd.buf = malloc(AUDIT_LINE_MAX)) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		goto out;
	}
	if (reader_open(&t.rd) == -1) {
		err_safe(c, t.rd.path, strerror(errno));
		goto out;
	}
	/* errno is kept from a failed read to the message. */
	if ((r = tail_initial(&t)) == 0 && t.bad > 0) {
		cmd_prefix(c, stderr);
		fput_safe(t.rd.path, stderr);
		fprintf(stderr, ": %llu %s not audit records, skipped (see "
		    "sluicectl audit verify)\n", (unsigned long long)t.bad,
		    plural(t.bad, "line is", "lines are"));
	}
	if (r == 0 && o.follow)
		r = tail_follow(&t);
	if (r != 0) {
		err_safe(c, t.rd.path, r == SL_ERR_IO ? strerror(errno) :
		    err_str(r));
		goto out;
	}
	rc = EXIT_OK;
 out:
	if (t.rd.fd != -1)
		close(t.rd.fd);
	free(t.rd.buf);
	free(path);
	return rc;
}
