/* cmd_policy.c: sluicectl policy ls | put | check, and policy arguments. */
#include "autoconf.h"

#include <sys/stat.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "util/yamltree.h"
#include "conf/policy.h"
#include "sluicectl/api.h"
#include "sluicectl/out.h"
#include "sluicectl/sluicectl.h"
#include "sluicectl/yaml2json.h"

#define TARGET_MAX	512

static void
print_errs(const struct errlist *el)
{
	size_t i;

	for (i = 0; i < el->n; i++) {
		fput_safe(el->msgs[i], stderr);
		fputc('\n', stderr);
	}
}

/*
 * Reads the policy file at path: its bytes (*buf, *len, NUL-terminated),
 * its content as a JSON object (*doc) and whether it is JSON (*is_json).
 * Reports problems; returns EXIT_OK or EXIT_FAIL.
 */
static int
read_policy(const struct cmd *c, const char *path, char **buf, size_t *len,
    json_t **doc, int *is_json)
{
	struct errlist el = ERRLIST_INIT;
	json_t *v = NULL;
	char *b = NULL;
	size_t n;
	int r, rc = EXIT_FAIL;

	if ((r = ydoc_read_file(path, POLICY_MAX_BYTES, &b, &n, &el)) != 0) {
		if (el.n > 0)
			cmd_err(c, "%s", el.msgs[0]);
		else
			cmd_err(c, "%s: %s", path, err_str(r));
		goto out;
	}
	if ((r = doc2json(path, b, n, &v, is_json, &el)) != 0) {
		cmd_err(c, "%s: %s", path, r == SL_ERR_INVALID ?
		    "neither JSON nor valid YAML" : err_str(r));
		print_errs(&el);
		goto out;
	}
	if (!json_is_object(v)) {
		cmd_err(c, "%s: a policy is a mapping of keys (name, egress, "
		    "intercept)", path);
		goto out;
	}
	*buf = b;
	b = NULL;	/* transferred */
	*len = n;
	*doc = v;
	v = NULL;	/* transferred */
	rc = EXIT_OK;
 out:
	json_decref(v);
	free(b);
	errlist_free(&el);
	return rc;
}

int
policy_arg(const struct cmd *c, const char *arg, json_t **out)
{
	struct stat st;
	json_t *doc = NULL;
	char *buf = NULL;
	size_t len;
	int is_json, rc;

	/* A name never holds a '/'; a file is any existing non-directory. */
	if (strchr(arg, '/') == NULL &&
	    (stat(arg, &st) != 0 || S_ISDIR(st.st_mode))) {
		if ((*out = json_string(arg)) == NULL) {
			cmd_err(c, "policy name '%s' is not valid UTF-8", arg);
			return EXIT_FAIL;
		}
		return EXIT_OK;
	}
	if ((rc = read_policy(c, arg, &buf, &len, &doc, &is_json)) !=
	    EXIT_OK)
		return rc;
	free(buf);
	*out = doc;
	return EXIT_OK;
}

/* The number of items of an array, else the value itself. */
static void
add_count(struct table *t, const json_t *v)
{
	if (json_is_array(v))
		table_addf(t, "%zu", json_array_size(v));
	else
		table_addj(t, v, ",");
}

int
cmd_policy_ls(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	const json_t *list, *p;
	json_t *ans = NULL;
	struct table t;
	size_t i;
	int rc;

	if ((rc = api_view(ctl, c, argc, argv, "/v1/policies", &ans)) !=
	    CMD_GO)
		return rc;
	table_init(&t, 5);
	t.right = 1u << 1 | 1u << 2 | 1u << 3;
	table_add(&t, "NAME");
	table_add(&t, "REV");
	table_add(&t, "SANDBOXES");
	table_add(&t, "INTERCEPTS");
	table_add(&t, "FILE");
	list = json_object_get(ans, "policies");
	json_array_foreach(list, i, p) {
		table_addj(&t, json_object_get(p, "name"), ",");
		table_addj(&t, json_object_get(p, "revision"), ",");
		add_count(&t, json_object_get(p, "sandboxes"));
		add_count(&t, json_object_get(p, "intercepts"));
		table_addj(&t, json_object_get(p, "file"), ",");
	}
	rc = table_show(&t, c);
	json_decref(ans);
	return rc;
}

/* The policy's name from its document, in buf; reports its absence. */
static int
policy_name(const struct cmd *c, const char *path, const json_t *doc,
    char *buf, size_t len)
{
	const json_t *n = json_object_get(doc, "name");

	if (json_is_string(n) && json_string_length(n) > 0 &&
	    strlen(json_string_value(n)) == json_string_length(n))
		snprintf(buf, len, "%s", json_string_value(n));
	else if (json_is_integer(n))	/* name: 42 reads as a number */
		snprintf(buf, len, "%lld", (long long)json_integer_value(n));
	else {
		cmd_err(c, "%s: %s", path, n == NULL ? "no 'name' key: the "
		    "daemon names the policy by it" : "'name' is not a string");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int
cmd_policy_put(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	char name[256], target[TARGET_MAX];
	struct http_req req = { "PUT", target, NULL, NULL, 0 };
	json_t *doc = NULL, *ans = NULL;
	struct http_resp *resp = NULL;
	const char *path;
	char *buf = NULL;
	size_t len;
	int rc, first, is_json;

	if ((rc = cmd_args(ctl, c, argc, argv, 1, 1, &first)) != CMD_GO)
		return rc;
	path = argv[first];
	if ((rc = read_policy(c, path, &buf, &len, &doc, &is_json)) !=
	    EXIT_OK)
		goto out;
	if ((rc = policy_name(c, path, doc, name, sizeof(name))) != EXIT_OK)
		goto out;
	rc = EXIT_FAIL;
	if (api_target(target, sizeof(target), "/v1/policies/", name,
	    "") != 0) {
		cmd_err(c, "%s: the name is too long", path);
		goto out;
	}
	req.content_type = is_json ? "application/json" : "application/yaml";
	req.body = buf;
	req.body_len = len;
	if ((rc = api_call(ctl, c, &req, &resp)) != EXIT_OK)
		goto out;
	rc = EXIT_FAIL;
	if ((ans = json_loadb(resp->body, resp->body_len, 0, NULL)) == NULL ||
	    !json_is_object(ans)) {
		cmd_err(c, "the daemon's answer is not a JSON object");
		goto out;
	}
	if (ctl->json) {
		rc = print_json(ans) == 0 ? EXIT_OK : EXIT_FAIL;
		goto out;
	}
	printf("%s policy ", resp->status == 201 ? "created" : "replaced");
	fput_safe(name, stdout);
	printf(", revision %lld", jnum(ans, "revision"));
	if (json_is_string(json_object_get(ans, "file"))) {
		fputs(" (", stdout);
		fput_safe(json_string_value(json_object_get(ans, "file")),
		    stdout);
		fputc(')', stdout);
	}
	fputc('\n', stdout);
	rc = EXIT_OK;
 out:
	json_decref(ans);
	http_resp_free(resp);
	json_decref(doc);
	free(buf);
	return rc;
}

static json_t *
check_json(const char *file, const struct policy *p,
    const struct errlist *el, int r)
{
	json_t *o, *errs;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	json_object_set_new(o, "file", json_string(file));
	json_object_set_new(o, "ok", json_boolean(r == 0));
	if (r == 0) {
		json_object_set_new(o, "name", json_string(p->name));
		json_object_set_new(o, "allow", json_integer((json_int_t)p->nallow));
		json_object_set_new(o, "deny", json_integer((json_int_t)p->ndeny));
		json_object_set_new(o, "intercept",
		    json_integer((json_int_t)p->nintercepts));
		return o;
	}
	errs = json_array();
	for (i = 0; errs != NULL && i < el->n; i++)
		json_array_append_new(errs, json_string(el->msgs[i]));
	if (errs != NULL && el->n == 0)
		json_array_append_new(errs, json_string(err_str(r)));
	json_object_set_new(o, "errors", errs);
	return o;
}

/* Loads each file with the daemon's own parser; prints every problem. */
int
cmd_policy_check(struct ctl *ctl, const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	json_t *arr = NULL, *o;
	int ch, i, r, rc = EXIT_OK;
	size_t k;

	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (ch) {
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
	if (ctl->json && (arr = json_array()) == NULL) {
		cmd_err(c, "%s", err_str(SL_ERR_NOMEM));
		return EXIT_FAIL;
	}
	for (i = optind; i < argc; i++) {
		r = policy_load(argv[i], &p, &el);
		if (r != 0)
			rc = EXIT_FAIL;
		if (arr != NULL) {
			if ((o = check_json(argv[i], p, &el, r)) != NULL)
				json_array_append_new(arr, o);
		} else if (r == 0) {
			printf("%s: ok (name %s, %zu allow, %zu deny, %zu "
			    "intercept rules)\n", argv[i], p->name, p->nallow,
			    p->ndeny, p->nintercepts);
		} else {
			for (k = 0; k < el.n; k++)
				fprintf(stderr, "%s\n", el.msgs[k]);
			if (el.n == 0)
				fprintf(stderr, "%s: %s\n", argv[i], err_str(r));
		}
		policy_free(p);
		p = NULL;
		errlist_free(&el);
	}
	if (arr != NULL) {
		if (print_json(arr) != 0)
			rc = EXIT_FAIL;
		json_decref(arr);
	}
	return rc;
}
