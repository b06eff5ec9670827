/* cmd_daemon.c: sluicectl secret ls | put | rm, reload, daemon upgrade, stats. */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "util/yamltree.h"
#include "sluicectl/api.h"
#include "sluicectl/out.h"
#include "sluicectl/prom.h"
#include "sluicectl/sluicectl.h"

#define TARGET_MAX	512
#define SECRET_MAX	(1u << 20)	/* the API's bound on a body */
#define TOP_REASONS	5

/* ---- secrets ------------------------------------------------------------ */

/* "USED/LIMIT/min USED/LIMIT/day" of a budget object, "-" for none. */
static void
budget_cell(struct table *t, const json_t *b)
{
	const json_t *m = json_object_get(b, "requests_per_minute");
	const json_t *d = json_object_get(b, "requests_per_day");
	char buf[96] = "", *p = buf;

	if (json_is_object(m))
		p += snprintf(p, sizeof(buf), "%lld/%lld/min",
		    (long long)json_integer_value(json_object_get(m, "used")),
		    (long long)json_integer_value(json_object_get(m, "limit")));
	if (json_is_object(d))
		snprintf(p, sizeof(buf) - (size_t)(p - buf), "%s%lld/%lld/day",
		    p > buf ? " " : "",
		    (long long)json_integer_value(json_object_get(d, "used")),
		    (long long)json_integer_value(json_object_get(d, "limit")));
	table_add(t, buf[0] != '\0' ? buf : "-");
}

int
cmd_secret_ls(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	const json_t *list, *s, *fp;
	json_t *ans = NULL;
	struct table t;
	size_t i;
	int rc;

	if ((rc = api_view(ctl, c, argc, argv, "/v1/secrets", &ans)) !=
	    CMD_GO)
		return rc;
	table_init(&t, 7);
	t.right = 1u << 2;
	table_add(&t, "NAME");
	table_add(&t, "KIND");
	table_add(&t, "VERSION");
	table_add(&t, "FINGERPRINT");
	table_add(&t, "HOSTS");
	table_add(&t, "LOADED");
	table_add(&t, "BUDGET");
	list = json_object_get(ans, "secrets");
	json_array_foreach(list, i, s) {
		fp = json_object_get(s, "hosts");
		table_addj(&t, json_object_get(s, "name"), ",");
		table_addj(&t, json_object_get(s, "kind"), ",");
		table_addj(&t, json_object_get(s, "version"), ",");
		table_addj(&t, json_object_get(s, "fingerprint"), ",");
		if (json_array_size(fp) > 0)
			table_addj(&t, fp, ",");
		else
			table_add(&t, "(any)");
		table_addj(&t, json_object_get(s, "loaded"), ",");
		budget_cell(&t, json_object_get(s, "budget"));
	}
	rc = table_show(&t, c);
	json_decref(ans);
	return rc;
}

/* The minted tokens the gateway holds (GET /v1/tokens), all or a sandbox's. */
int
cmd_token_ls(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	const json_t *list, *e, *v;
	char target[TARGET_MAX];
	json_t *ans = NULL;
	struct table t;
	size_t i;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 1, &first)) != CMD_GO)
		return rc;
	if (first < argc) {
		if (api_target(target, sizeof(target), "/v1/tokens?sandbox=",
		    argv[first], "") != 0)
			return cmd_usage_err(c, "the sandbox id is too long");
	} else
		snprintf(target, sizeof(target), "/v1/tokens");
	if ((rc = api_json(ctl, c, "GET", target, NULL, &ans)) != EXIT_OK ||
	    json_answered(ctl, ans, &rc))
		return rc;
	table_init(&t, 7);
	table_add(&t, "SANDBOX");
	table_add(&t, "POLICY");
	table_add(&t, "SOURCE");
	table_add(&t, "STATE");
	table_add(&t, "FINGERPRINT");
	table_add(&t, "EXPIRES");
	table_add(&t, "REASON");
	list = json_object_get(ans, "tokens");
	json_array_foreach(list, i, e) {
		v = json_object_get(e, "sandbox");
		if (json_is_string(v))
			table_addj(&t, v, ",");
		else
			table_add(&t, "-");
		table_addj(&t, json_object_get(e, "policy"), ",");
		table_addj(&t, json_object_get(e, "source"), ",");
		table_addj(&t, json_object_get(e, "state"), ",");
		v = json_object_get(e, "fingerprint");
		table_add(&t, json_is_string(v) ? json_string_value(v) : "-");
		v = json_object_get(e, "expires_at");
		table_add(&t, json_is_string(v) ? json_string_value(v) : "-");
		v = json_object_get(e, "reason");
		table_add(&t, json_is_string(v) ? json_string_value(v) : "-");
	}
	rc = table_show(&t, c);
	json_decref(ans);
	return rc;
}

/* NAME of .../NAME.sealed in buf; a usage error for any other file name. */
static int
secret_name(const struct cmd *c, const char *path, char *buf, size_t len)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base != NULL ? base + 1 : path;
	n = strlen(base);
	if (n <= strlen(".sealed") ||
	    strcmp(base + n - strlen(".sealed"), ".sealed") != 0)
		return cmd_usage_err(c, "'%s' is not NAME.sealed", path);
	n -= strlen(".sealed");
	if (n >= len)
		return cmd_usage_err(c, "the name of '%s' is too long", path);
	memcpy(buf, base, n);
	buf[n] = '\0';
	return CMD_GO;
}

int
cmd_secret_put(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char name[256], target[TARGET_MAX];
	struct http_req req = { "PUT", target, "application/octet-stream",
	    NULL, 0 };
	struct errlist el = ERRLIST_INIT;
	struct http_resp *resp = NULL;
	json_t *ans = NULL;
	char *buf = NULL;
	size_t len;
	int r, rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 1, 1, &first)) != CMD_GO ||
	    (rc = secret_name(c, argv[first], name, sizeof(name))) != CMD_GO)
		return rc;
	rc = EXIT_FAIL;
	if (api_target(target, sizeof(target), "/v1/secrets/", name,
	    "") != 0) {
		cmd_err(c, "%s: the name is too long", argv[first]);
		goto out;
	}
	if ((r = ydoc_read_file(argv[first], SECRET_MAX, &buf, &len,
	    &el)) != 0) {
		cmd_err(c, "%s", el.n > 0 ? el.msgs[0] : err_str(r));
		goto out;
	}
	req.body = buf;
	req.body_len = len;
	if ((rc = api_call(ctl, c, &req, &resp)) != EXIT_OK)
		goto out;
	ans = json_loadb(resp->body, resp->body_len, 0, NULL);
	if (ctl->json && ans != NULL)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else if (!ctl->json) {
		fputs("stored secret ", stdout);
		fput_safe(name, stdout);
		if (json_object_get(ans, "version") != NULL)
			printf(", version %lld", jnum(ans, "version"));
		fputc('\n', stdout);
	} else {
		cmd_err(c, "the daemon's answer is not JSON");
		rc = EXIT_FAIL;
	}
 out:
	json_decref(ans);
	http_resp_free(resp);
	free(buf);
	errlist_free(&el);
	return rc;
}

int
cmd_secret_rm(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char target[TARGET_MAX];
	struct http_req req = { "DELETE", target, NULL, NULL, 0 };
	struct http_resp *resp = NULL;
	json_t *ans = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 1, 1, &first)) != CMD_GO)
		return rc;
	if (*argv[first] == '\0')
		return cmd_usage_err(c, "the secret's name is empty");
	if (api_target(target, sizeof(target), "/v1/secrets/", argv[first],
	    "") != 0)
		return cmd_usage_err(c, "the secret's name is too long");
	if ((rc = api_call(ctl, c, &req, &resp)) != EXIT_OK)
		return rc;
	ans = json_loadb(resp->body, resp->body_len, 0, NULL);
	if (ctl->json && ans != NULL)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else if (!ctl->json) {
		fputs("deleted secret ", stdout);
		fput_safe(argv[first], stdout);
		fputc('\n', stdout);
	} else {
		cmd_err(c, "the daemon's answer is not JSON");
		rc = EXIT_FAIL;
	}
	json_decref(ans);
	http_resp_free(resp);
	return rc;
}

/* ---- reload ------------------------------------------------------------- */

int
cmd_reload(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	json_t *ans = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 0, &first)) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "POST", "/v1/reload", NULL, &ans)) !=
	    EXIT_OK)
		return rc;
	if (ctl->json)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else
		printf("reloaded: generation %lld, %lld policies\n",
		    jnum(ans, "generation"), jnum(ans, "policies"));
	json_decref(ans);
	return rc;
}

int
cmd_audit_rotate(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	json_t *ans = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 0, &first)) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "POST", "/v1/audit/rotate", NULL, &ans)) !=
	    EXIT_OK)
		return rc;
	if (ctl->json)
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
	else {
		fputs("rotating ", stdout);
		fput_safe(json_string_value(json_object_get(ans, "rotating")),
		    stdout);
		fputc('\n', stdout);
	}
	json_decref(ans);
	return rc;
}

/* ---- upgrade ------------------------------------------------------------ */

/*
 * The daemon starts its binary anew and answers once the new process
 * serves; the status then comes from the new process, or the upgrade
 * did not take.
 */
int
cmd_daemon_upgrade(struct ctl *ctl, const struct cmd *c, int argc,
    char **argv)
{
	json_t *ans = NULL, *st = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 0, &first)) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "POST", "/v1/upgrade", NULL, &ans)) !=
	    EXIT_OK)
		return rc;
	if ((rc = api_json(ctl, c, "GET", "/v1/status", NULL, &st)) !=
	    EXIT_OK) {
		json_decref(ans);
		return rc;
	}
	if (jnum(st, "pid") != jnum(ans, "pid")) {
		cmd_err(c, "pid %lld answers, not the new pid %lld",
		    jnum(st, "pid"), jnum(ans, "pid"));
		rc = EXIT_FAIL;
	} else if (ctl->json)
		rc = print_json(st) == 0 ? EXIT_OK : EXIT_FAIL;
	else {
		printf("upgraded: pid %lld serves (sluiced ", jnum(st, "pid"));
		fput_safe(json_string_value(json_object_get(st, "version")),
		    stdout);
		printf(", started ");
		fput_safe(json_string_value(json_object_get(st, "started")),
		    stdout);
		printf("); pid %lld drains and exits\n",
		    jnum(ans, "previous_pid"));
	}
	json_decref(ans);
	json_decref(st);
	return rc;
}

/* ---- stats -------------------------------------------------------------- */

/* What stats shows of the metrics. */
struct figures {
	struct prom_sums	conns;		/* connections by action */
	struct prom_sums	reasons;	/* denials by reason */
	struct prom_sums	dns;		/* DNS queries by verdict */
	struct prom_sums	requests;	/* requests by action */
};

static int
read_figures(const struct cmd *c, const char *text, size_t len,
    struct figures *f)
{
	static const char *const actions[] = { "pass", "intercept", "deny",
	    NULL };
	static const char *const verdicts[] = { "answered", "nxdomain",
	    "refused", "ratelimited", "dropped", "servfail", NULL };
	unsigned line = 0;
	int r;

	if ((r = prom_sums_ensure(&f->conns, actions)) != 0 ||
	    (r = prom_sums_ensure(&f->dns, verdicts)) != 0 ||
	    (r = prom_sum_by(text, len, "sluice_connections_total", "action",
	    NULL, NULL, &f->conns, &line)) != 0 ||
	    (r = prom_sum_by(text, len, "sluice_connections_total", "reason",
	    "action", "deny", &f->reasons, &line)) != 0 ||
	    (r = prom_sum_by(text, len, "sluice_dns_queries_total", "verdict",
	    NULL, NULL, &f->dns, &line)) != 0 ||
	    (r = prom_sum_by(text, len, "sluice_requests_total", "action",
	    NULL, NULL, &f->requests, &line)) != 0) {
		if (r == SL_ERR_INVALID)
			cmd_err(c, "/metrics: line %u is not in the Prometheus "
			    "text format", line);
		else
			cmd_err(c, "%s", err_str(r));
		return EXIT_FAIL;
	}
	prom_sums_sort(&f->reasons);
	prom_sums_sort(&f->requests);
	return EXIT_OK;
}

static void
figures_free(struct figures *f)
{
	prom_sums_free(&f->conns);
	prom_sums_free(&f->reasons);
	prom_sums_free(&f->dns);
	prom_sums_free(&f->requests);
}

/* Whether v prints as an integer (no libm: floor() would need -lm). */
static int
is_whole(double v)
{
	return v > -1e15 && v < 1e15 && v == (double)(long long)v;
}

static json_t *
sums_json(const struct prom_sums *s, size_t max)
{
	json_t *o;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	for (i = 0; i < s->n && i < max; i++)
		if (json_object_set_new(o, s->v[i].key,
		    is_whole(s->v[i].value) ?
		    json_integer((json_int_t)s->v[i].value) :
		    json_real(s->v[i].value)) != 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

/* Returns 0 or SL_ERR_NOMEM; a failed write shows on stdout's error flag. */
static int
stats_json(const json_t *status, const struct figures *f)
{
	json_t *o;

	o = json_pack("{s:O, s:{s:o*, s:o*, s:o*, s:o*}}", "status", status,
	    "metrics",
	    "connections_by_action", sums_json(&f->conns, SIZE_MAX),
	    "deny_reasons", sums_json(&f->reasons, SIZE_MAX),
	    "dns_queries_by_verdict", sums_json(&f->dns, SIZE_MAX),
	    "requests_by_action", sums_json(&f->requests, SIZE_MAX));
	if (o == NULL)
		return SL_ERR_NOMEM;
	print_json(o);
	json_decref(o);
	return 0;
}

static void
add_value(struct table *t, double v)
{
	if (is_whole(v))
		table_addf(t, "%.0f", v);
	else
		table_addf(t, "%g", v);
}

static void
add_uptime(struct table *t, long long s)
{
	if (s >= 86400)
		table_addf(t, "%lldd %lldh %lldm %llds", s / 86400,
		    s / 3600 % 24, s / 60 % 60, s % 60);
	else if (s >= 3600)
		table_addf(t, "%lldh %lldm %llds", s / 3600, s / 60 % 60,
		    s % 60);
	else if (s >= 60)
		table_addf(t, "%lldm %llds", s / 60, s % 60);
	else
		table_addf(t, "%llds", s);
}

/* "title:" and one indented line per sum, at most max of them. */
static int
print_sums(const char *title, const struct prom_sums *s, size_t max)
{
	struct table t;
	size_t i;
	int r;

	printf("%s:\n", title);
	if (s->n == 0) {
		printf("  (none)\n");
		return 0;
	}
	table_init(&t, 2);
	t.indent = 2;
	t.right = 1u << 1;
	for (i = 0; i < s->n && i < max; i++) {
		table_add(&t, s->v[i].key[0] != '\0' ? s->v[i].key :
		    "(unlabelled)");
		add_value(&t, s->v[i].value);
	}
	r = table_print(&t, stdout);
	table_free(&t);
	if (r == 0 && s->n > max)
		printf("  (%zu more)\n", s->n - max);
	return r;
}

/* Returns 0 or SL_ERR_NOMEM. */
static int
stats_text(const json_t *st, const struct figures *f)
{
	struct table t;
	int r;

	table_init(&t, 2);
	table_add(&t, "version:");
	table_addj(&t, json_object_get(st, "version"), ",");
	table_add(&t, "generation:");
	table_addj(&t, json_object_get(st, "generation"), ",");
	table_add(&t, "workers:");
	table_addj(&t, json_object_get(st, "workers"), ",");
	table_add(&t, "sandboxes:");
	table_addj(&t, json_object_get(st, "sandboxes"), ",");
	table_add(&t, "policies:");
	table_addj(&t, json_object_get(st, "policies"), ",");
	table_add(&t, "open connections:");
	table_addj(&t, json_object_get(st, "connections"), ",");
	table_add(&t, "uptime:");
	if (json_is_number(json_object_get(st, "uptime_s")))
		add_uptime(&t, jnum(st, "uptime_s"));
	else
		table_add(&t, NULL);
	r = table_print(&t, stdout);
	table_free(&t);
	if (r != 0)
		return r;
	putchar('\n');
	if ((r = print_sums("connections by action", &f->conns,
	    SIZE_MAX)) != 0 ||
	    (r = print_sums("top deny reasons", &f->reasons,
	    TOP_REASONS)) != 0 ||
	    (r = print_sums("DNS queries by verdict", &f->dns,
	    SIZE_MAX)) != 0 ||
	    (r = print_sums("requests by action", &f->requests,
	    SIZE_MAX)) != 0)
		return r;
	return 0;
}

int
cmd_stats(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	struct http_req req = { "GET", "/metrics", NULL, NULL, 0 };
	struct figures f = { PROM_SUMS_INIT, PROM_SUMS_INIT, PROM_SUMS_INIT,
	    PROM_SUMS_INIT };
	struct http_resp *resp = NULL;
	json_t *status = NULL;
	int rc, first;

	if ((rc = cmd_args(ctl, c, argc, argv, 0, 0, &first)) != CMD_GO)
		return rc;
	if ((rc = api_json(ctl, c, "GET", "/v1/status", NULL, &status)) !=
	    EXIT_OK ||
	    (rc = api_call(ctl, c, &req, &resp)) != EXIT_OK ||
	    (rc = read_figures(c, resp->body, resp->body_len, &f)) != EXIT_OK)
		goto out;
	if ((ctl->json ? stats_json(status, &f) : stats_text(status, &f)) !=
	    0) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		rc = EXIT_FAIL;
	}
 out:
	figures_free(&f);
	http_resp_free(resp);
	json_decref(status);
	return rc;
}
