/* fuzz_policy.c: libFuzzer target for the policy parser (and yamltree). */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <sodium.h>

#include "util/addr.h"
#include "util/err.h"
#include "conf/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
		policy_free(p);
	}
	errlist_free(&el);
	return 0;
}
