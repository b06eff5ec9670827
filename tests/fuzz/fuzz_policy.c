/* fuzz_policy.c: libFuzzer target for the policy parser (and yamltree). */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/addr.h"
#include "util/err.h"
#include "conf/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Every placeholder of a template that loaded is one the walker reads
 * within the template, and every token it names is declared.
 */
static void
check_templates(const struct policy *p)
{
	const struct intercept_rule *r;
	struct tmpl_ref ref;
	const char *t, *v, *end;
	size_t i, j;

	for (i = 0; i < p->nintercepts; i++) {
		r = &p->intercepts[i];
		for (j = 0; j < r->ninject_set; j++) {
			v = r->inject_set[j].value;
			end = v + strlen(v);
			for (t = v; t != NULL &&
			    (t = policy_template_next(t, &ref)) != NULL;) {
				if (t > end || ref.name + ref.len > end ||
				    ref.len == 0)
					abort();
				if (ref.token && token_find(&p->tokens, ref.name,
				    ref.len) == NULL)
					abort();
			}
		}
	}
	for (i = 0; i < p->tokens.n; i++)
		if (p->tokens.v[i].port == 0 || p->tokens.v[i].host[0] == '\0' ||
		    mint_kind_name(p->tokens.v[i].kind) == NULL)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	struct errlist el = ERRLIST_INIT;
	struct policy *p = NULL;
	struct decision d;
	struct sl_addr a;

	if (!inited) {
		if (sodium_init() < 0)
			return 0;
		inited = 1;
	}
	if (policy_parse("fuzz", (const char *)data, size, &p, &el) == 0) {
		/* A policy that parsed must also answer. */
		memset(&a, 0, sizeof(a));
		a.family = AF_INET;
		a.bytes[0] = 203;
		a.bytes[1] = 0;
		a.bytes[2] = 113;
		a.bytes[3] = 7;
		policy_check_name(p, "api.example.com", &a, 443, &d);
		policy_check_opaque(p, &a, 443, &d);
		(void)policy_name_allowed(p, "x.example.com");
		check_templates(p);
		policy_free(p);
	}
	errlist_free(&el);
	return 0;
}
