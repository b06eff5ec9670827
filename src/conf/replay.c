/* replay.c: an audit record judged again under a candidate (replay.h). */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/addr.h"
#include "util/names.h"
#include "conf/policy.h"
#include "conf/replay.h"

static const char *
str(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

static int
in(const char *s, const char *const *set)
{
	for (; s != NULL && *set != NULL; set++)
		if (strcmp(s, *set) == 0)
			return 1;
	return 0;
}

static void
set_verdict(struct rp_verdict *v, const char *verdict, const char *reason,
    const char *rule)
{
	v->verdict = verdict;
	v->reason = reason != NULL ? reason : "";
	snprintf(v->rule, sizeof(v->rule), "%s", rule != NULL ? rule : "");
}

static int
allows(const struct rp_verdict *v)
{
	return strcmp(v->verdict, "deny") != 0 &&
	    strcmp(v->verdict, "nxdomain") != 0;
}

/* Reasons of the connection decisions a policy makes (policy.h). */
static const char *const conn_pass[] = { "allow-name", "allow-cidr",
	"default-allow", "intercept", "observe", NULL };
static const char *const conn_deny[] = { "forbidden-address", "deny-cidr",
	"deny-name", "private-address", "not-allowed", "no-cidr-rule",
	"no-sni", "invalid-name", NULL };

static const char *
verdict_name(enum verdict v)
{
	return v == VERDICT_INTERCEPT ? "intercept" : v == VERDICT_PASS ?
	    "pass" : "deny";
}

static int
conn_now(const json_t *rec, struct rp_verdict *now)
{
	const char *action = str(rec, "action"), *reason = str(rec, "reason");
	const char *wd = str(rec, "would_deny");

	if (wd != NULL) {	/* observe mode: enforcing, it was refused */
		set_verdict(now, "deny", wd, NULL);
		return 0;
	}
	if (action != NULL && (strcmp(action, "pass") == 0 ||
	    strcmp(action, "intercept") == 0) && in(reason, conn_pass)) {
		set_verdict(now, strcmp(action, "pass") == 0 ? "pass" :
		    "intercept", reason, str(rec, "rule"));
		return 0;
	}
	if (action != NULL && strcmp(action, "deny") == 0 &&
	    in(reason, conn_deny)) {
		set_verdict(now, "deny", reason, str(rec, "rule"));
		return 0;
	}
	return -1;
}

static void
judge_conn(const struct policy *cand, const json_t *rec, struct rp_result *r)
{
	const char *dst = str(rec, "dst"), *name = str(rec, "sni");
	const char *proto = str(rec, "proto");
	json_int_t port = json_integer_value(json_object_get(rec, "dst_port"));
	char norm[NAME_BUFSZ];
	struct sl_addr a;
	struct decision d;

	if (name == NULL)
		name = str(rec, "host");
	if (name == NULL && (name = str(rec, "authority")) != NULL &&
	    addr_parse(name, &a) == 0)
		name = NULL;	/* an address in CONNECT: judged as one */
	if (dst == NULL || addr_parse(dst, &a) != 0 || port < 0 ||
	    port > 65535 || conn_now(rec, &r->now) != 0 ||
	    (name != NULL && name_normalize(name, strlen(name), norm) != 0))
		return;
	if (name != NULL)
		snprintf(r->what, sizeof(r->what), "%s:%lld", norm,
		    (long long)port);
	else
		snprintf(r->what, sizeof(r->what), a.family == AF_INET6 ?
		    "[%s]:%lld" : "%s:%lld", dst, (long long)port);
	policy_check_dest(cand, &a, (uint16_t)port, &d);
	if (d.verdict == VERDICT_CONTINUE) {
		if (name != NULL)
			policy_check_name(cand, norm, &a, (uint16_t)port, &d);
		else {
			policy_check_opaque(cand, &a, (uint16_t)port, &d);
			if (d.verdict == VERDICT_DENY && proto != NULL &&
			    strcmp(proto, "tls") == 0 &&
			    strcmp(d.reason, "no-cidr-rule") == 0)
				d.reason = "no-sni";
		}
	}
	set_verdict(&r->cand, verdict_name(d.verdict), d.reason, d.rule);
	r->kind = "conn";
	r->change = RP_SAME;
}

static void
judge_dns(const struct policy *cand, const json_t *rec, struct rp_result *r)
{
	const char *name = str(rec, "name"), *verdict = str(rec, "verdict");
	const char *why;

	if (name == NULL || verdict == NULL || strcmp(verdict, "refused") == 0)
		return;		/* a rate limit decides nothing about the name */
	if (str(rec, "would_deny") != NULL)
		set_verdict(&r->now, "nxdomain", str(rec, "would_deny"), NULL);
	else if (strcmp(verdict, "nxdomain") == 0)
		set_verdict(&r->now, "nxdomain", str(rec, "reason"), NULL);
	else
		set_verdict(&r->now, "answer", "allow-name", NULL);
	why = policy_name_refusal(cand, name);
	set_verdict(&r->cand, why != NULL ? "nxdomain" : "answer",
	    why != NULL ? why : "allow-name", NULL);
	snprintf(r->what, sizeof(r->what), "%s", name);
	r->kind = "dns";
	r->change = RP_SAME;
}

/* Whether any rule for host looks at what a record does not keep. */
static int
host_rules_look_further(const struct policy *p, const char *host)
{
	size_t i;

	for (i = 0; i < p->nintercepts; i++)
		if (policy_pattern_match(p->intercepts[i].host, host) &&
		    (p->intercepts[i].nquery > 0 ||
		    p->intercepts[i].nheaders > 0))
			return 1;
	return 0;
}

static void
judge_request(const struct policy *cand, const json_t *rec,
    struct rp_result *r)
{
	static const char *const allowed[] = { "pass", "inject", "forward",
		NULL };
	static const char *const denials[] = { "no-matching-rule", "deny-rule",
		NULL };
	const char *host = str(rec, "host"), *path = str(rec, "path");
	const char *method = str(rec, "method"), *action = str(rec, "action");
	const char *reason = str(rec, "reason"), *wd = str(rec, "would_deny");
	const struct intercept_rule *rule;
	struct http_request_view rq;
	char norm[NAME_BUFSZ];
	struct decision d;

	if (!json_is_true(json_object_get(rec, "intercepted")) ||
	    host == NULL || path == NULL || method == NULL ||
	    name_normalize(host, strlen(host), norm) != 0)
		return;		/* plain HTTP: its connection says */
	if (wd != NULL)
		set_verdict(&r->now, "deny", wd, NULL);
	else if (in(action, allowed) && reason != NULL &&
	    strcmp(reason, "intercept-rule") == 0)
		set_verdict(&r->now, action, reason, str(rec, "rule"));
	else if (in(reason, denials))
		set_verdict(&r->now, "deny", reason, str(rec, "rule"));
	else
		return;
	snprintf(r->what, sizeof(r->what), "%s %s%s", method, norm, path);
	r->kind = "request";
	r->change = RP_SAME;
	/* Its connection first: refused, or passed through unjudged. */
	policy_check_name_alone(cand, norm, 443, &d);
	if (d.verdict == VERDICT_DENY) {
		set_verdict(&r->cand, "deny", d.reason, d.rule);
		return;
	}
	if (!policy_intercepts(cand, norm)) {
		set_verdict(&r->cand, "not-intercepted", "not-intercepted",
		    NULL);
		return;
	}
	memset(&rq, 0, sizeof(rq));
	rq.method = method;
	rq.host = norm;
	rq.path = path;
	r->approximate = host_rules_look_further(cand, norm);
	if ((rule = policy_match_request(cand, &rq)) == NULL)
		set_verdict(&r->cand, "deny", "no-matching-rule", NULL);
	else if (rule->action == ICPT_DENY)
		set_verdict(&r->cand, "deny", "deny-rule", rule->label);
	else
		set_verdict(&r->cand, rule->action == ICPT_INJECT ? "inject" :
		    rule->action == ICPT_FORWARD ? "forward" : "pass",
		    "intercept-rule", rule->label);
}

void
replay_record(const struct policy *cand, const json_t *rec,
    struct rp_result *r)
{
	const char *type = str(rec, "type");
	int a, b;

	memset(r, 0, sizeof(*r));
	r->change = RP_SKIPPED;
	if (type == NULL)
		return;
	if (strcmp(type, "conn") == 0)
		judge_conn(cand, rec, r);
	else if (strcmp(type, "dns") == 0)
		judge_dns(cand, rec, r);
	else if (strcmp(type, "request") == 0)
		judge_request(cand, rec, r);
	if (r->change == RP_SKIPPED)
		return;
	/* A request its candidate no longer intercepts: its connection says. */
	if (strcmp(r->cand.verdict, "not-intercepted") == 0) {
		r->change = RP_CHANGED;
		return;
	}
	a = allows(&r->now);
	b = allows(&r->cand);
	if (a && !b)
		r->change = RP_NEWLY_DENIED;
	else if (!a && b)
		r->change = RP_NEWLY_ALLOWED;
	else if (a && (strcmp(r->now.verdict, r->cand.verdict) != 0 ||
	    strcmp(r->now.rule, r->cand.rule) != 0))
		r->change = RP_CHANGED;
}

const char *
rp_change_name(enum rp_change c)
{
	switch (c) {
	case RP_NEWLY_DENIED:	return "newly-denied";
	case RP_NEWLY_ALLOWED:	return "newly-allowed";
	case RP_CHANGED:	return "changed";
	case RP_SAME:		return "same";
	case RP_SKIPPED:	break;
	}
	return "skipped";
}
