/* test_state.c: snapshots edited by the control plane, and what carries over. */
#include "autoconf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "conf/config.h"
#include "conf/policy.h"
#include "loop/state.h"

struct fixture {
	char		 dir[64];
	struct config	*cfg;
	struct state	*st;
};

static void
write_file(const char *dir, const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct errlist errs = ERRLIST_INIT;
	char cfg[512];

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/sl-test-state.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	write_file(fx->dir, "agent.yaml",
	    "name: agent\negress:\n  allow:\n    - domain: a.test\n");
	write_file(fx->dir, "ai.yaml",
	    "name: ai\negress:\n  allow:\n    - domain: ai.test\n");
	snprintf(cfg, sizeof(cfg), "listen: {transparent: [\"127.0.0.1:1\"]}\n"
	    "resolvers: [\"127.0.0.1\"]\npolicy_dir: %s\nsandboxes:\n"
	    "  - {id: static1, sources: [\"198.18.9.1\"], policy: agent}\n",
	    fx->dir);
	assert_int_equal(config_parse("t.yaml", cfg, strlen(cfg), &fx->cfg,
	    &errs), 0);
	assert_int_equal(state_build(fx->cfg, NULL, 1, &fx->st, &errs), 0);
	errlist_free(&errs);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];

	state_unref(fx->st);
	config_free(fx->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

static struct sl_addr
A(const char *s)
{
	struct sl_addr a;

	assert_int_equal(addr_parse(s, &a), 0);
	return a;
}

/* Registers id with the sources given (one /32 or /128 each) and a policy name. */
static struct state *
with_sandbox(const struct state *prev, const char *id, const char *src,
    const char *policy, struct policy *inl)
{
	struct errlist errs = ERRLIST_INIT;
	struct sl_addr a = A(src);
	unsigned plen = a.family == AF_INET ? 32 : 128;
	struct sandbox_spec spec = { id, "team", NULL, &a, &plen, 1, policy,
	    inl, 0 };
	struct state *st;

	assert_int_equal(state_clone(prev, prev->generation + 1, &st), 0);
	assert_int_equal(state_put_sandbox(st, &spec, NULL), 0);
	assert_int_equal(state_seal(st, prev, &errs), 0);
	errlist_free(&errs);
	return st;
}

static void
t_add_lookup_remove(void **state)
{
	struct fixture *fx = *state;
	struct errlist errs = ERRLIST_INIT;
	struct sl_addr a = A("198.18.0.2"), b = A("198.18.9.1");
	struct state *s2, *s3;
	const struct sandbox *sb;

	s2 = with_sandbox(fx->st, "sb1", "198.18.0.2", "ai", NULL);
	/* the old snapshot is untouched */
	assert_ptr_equal(state_sandbox_for(fx->st, &a), &fx->st->unknown);
	sb = state_sandbox_for(s2, &a);
	assert_string_equal(sb->id, "sb1");
	assert_string_equal(sb->policy->name, "ai");
	assert_ptr_equal(state_sandbox(s2, "sb1"), sb);
	/* the static sandbox and its counter carry over */
	assert_string_equal(state_sandbox_for(s2, &b)->id, "static1");
	assert_ptr_equal(state_sandbox_for(s2, &b)->counter,
	    state_sandbox_for(fx->st, &b)->counter);
	assert_true(state_sandbox_for(s2, &b)->from_config);
	/* policies are shared, not copied */
	assert_ptr_equal(state_policy(s2, "agent"), state_policy(fx->st, "agent"));

	assert_int_equal(state_clone(s2, 3, &s3), 0);
	assert_int_equal(state_remove_sandbox(s3, "sb1"), 0);
	assert_int_equal(state_remove_sandbox(s3, "sb1"), SL_ERR_NOT_FOUND);
	assert_int_equal(state_seal(s3, s2, &errs), 0);
	assert_ptr_equal(state_sandbox_for(s3, &a), &s3->unknown);
	assert_null(state_sandbox(s3, "sb1"));
	assert_string_equal(s3->unknown.policy->name, "default");
	state_unref(s2);
	state_unref(s3);
	errlist_free(&errs);
}

static void
t_replace_keeps_counter(void **state)
{
	struct fixture *fx = *state;
	struct state *s2, *s3;
	const struct sandbox *a, *b;

	s2 = with_sandbox(fx->st, "sb1", "198.18.0.2", "agent", NULL);
	s3 = with_sandbox(s2, "sb1", "198.18.0.2", "ai", NULL);
	a = state_sandbox(s2, "sb1");
	b = state_sandbox(s3, "sb1");
	assert_ptr_equal(a->counter, b->counter);
	assert_int_equal(a->created, b->created);
	assert_string_equal(b->policy->name, "ai");
	assert_int_equal(s3->nsandboxes, 2);
	state_unref(s2);
	state_unref(s3);
}

static void
t_unknown_policy_refused(void **state)
{
	struct fixture *fx = *state;
	struct errlist errs = ERRLIST_INIT;
	struct sl_addr a = A("198.18.0.2");
	unsigned plen = 32;
	struct sandbox_spec spec = { "sb1", NULL, NULL, &a, &plen, 1, "nope",
	    NULL, 0 };
	struct state *st;

	assert_int_equal(state_clone(fx->st, 2, &st), 0);
	assert_int_equal(state_put_sandbox(st, &spec, NULL), 0);
	assert_int_equal(state_seal(st, fx->st, &errs), SL_ERR_INVALID);
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msgs[0], "no policy named 'nope'"));
	state_unref(st);
	errlist_free(&errs);
}

static struct policy *
parse(const char *text)
{
	struct errlist errs = ERRLIST_INIT;
	struct policy *p = NULL;

	assert_int_equal(policy_parse("t", text, strlen(text), &p, &errs), 0);
	errlist_free(&errs);
	return p;
}

static void
t_revisions(void **state)
{
	struct fixture *fx = *state;
	struct errlist errs = ERRLIST_INIT;
	struct policy *p;
	struct state *s2, *s3, *s4, *s5;

	/* a named policy put with new content gets the next revision */
	assert_int_equal(state_policy(fx->st, "agent")->revision, 1);
	assert_int_equal(state_clone(fx->st, 2, &s2), 0);
	assert_int_equal(state_put_policy(s2, parse("name: agent\negress:\n"
	    "  allow:\n    - domain: b.test\n"), fx->st), 0);
	assert_int_equal(state_seal(s2, fx->st, &errs), 0);
	assert_int_equal(state_policy(s2, "agent")->revision, 2);
	/* the static sandbox follows the name */
	assert_ptr_equal(state_sandbox(s2, "static1")->policy,
	    state_policy(s2, "agent"));
	/* the same content again keeps it */
	assert_int_equal(state_clone(s2, 3, &s3), 0);
	assert_int_equal(state_put_policy(s3, parse("name: agent\negress:\n"
	    "  allow:\n    - domain: b.test\n"), s2), 0);
	assert_int_equal(state_seal(s3, s2, &errs), 0);
	assert_int_equal(state_policy(s3, "agent")->revision, 2);

	/* inline policies: revision 1, then bumped by a change */
	p = parse("name: own\negress:\n  default: allow\n");
	s4 = with_sandbox(s3, "sb1", "198.18.0.2", NULL, p);
	policy_free(p);
	assert_int_equal(state_sandbox(s4, "sb1")->policy->revision, 1);
	assert_null(state_policy(s4, "own"));	/* not a named policy */
	p = parse("name: own\negress:\n  default: deny\n");
	s5 = with_sandbox(s4, "sb1", "198.18.0.2", NULL, p);
	policy_free(p);
	assert_int_equal(state_sandbox(s5, "sb1")->policy->revision, 2);
	state_unref(s2);
	state_unref(s3);
	state_unref(s4);
	state_unref(s5);
	errlist_free(&errs);
}

static void
t_reload_keeps_api_sandboxes(void **state)
{
	struct fixture *fx = *state;
	struct errlist errs = ERRLIST_INIT;
	struct state *s2, *s3;

	s2 = with_sandbox(fx->st, "sb1", "198.18.0.2", "ai", NULL);
	/* unchanged files: the very policy objects carry over */
	assert_int_equal(state_build(fx->cfg, s2, 3, &s3, &errs), 0);
	assert_non_null(state_sandbox(s3, "sb1"));
	assert_ptr_equal(state_sandbox(s3, "sb1")->counter,
	    state_sandbox(s2, "sb1")->counter);
	assert_ptr_equal(state_policy(s3, "ai"), state_policy(s2, "ai"));
	state_unref(s3);
	/* a reload that drops a policy a sandbox uses fails whole */
	write_file(fx->dir, "ai.yaml",
	    "name: renamed\negress:\n  default: deny\n");
	s3 = NULL;
	assert_int_equal(state_build(fx->cfg, s2, 3, &s3, &errs),
	    SL_ERR_INVALID);
	assert_null(s3);
	assert_non_null(strstr(errs.msgs[errs.n - 1], "sandbox 'sb1'"));
	state_unref(s2);
	errlist_free(&errs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_add_lookup_remove, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_replace_keeps_counter, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_unknown_policy_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_revisions, setup, teardown),
		cmocka_unit_test_setup_teardown(t_reload_keeps_api_sandboxes,
		    setup, teardown),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
