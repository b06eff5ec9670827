/*
 * fuzz_trail.c: what sluicectl policy suggest and policy replay make of
 * audit records they did not expect.  Records carry names and paths that
 * came from sandboxes, so each line of the input is taken as a record:
 * replayed against a fixed candidate (a result is either skipped or has
 * a kind, a subject and both verdicts) and fed to a draft, which must
 * then load as a policy whatever the records said.
 */
#include "autoconf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/err.h"
#include "conf/policy.h"
#include "conf/replay.h"
#include "sluicectl/suggest.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static const char cand_yaml[] =
	"name: cand\n"
	"egress:\n"
	"  default: deny\n"
	"  allow:\n"
	"    - domain: \"*.example\"\n"
	"    - cidr: 198.51.100.0/24\n"
	"  deny:\n"
	"    - domain: bad.example\n"
	"intercept:\n"
	"  - name: api\n"
	"    match: {host: api.example, path: \"/v1/*.json\", query: {a: \"*\"}}\n"
	"    action: pass\n";

static struct policy *cand;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct errlist el = ERRLIST_INIT;

	(void)argc;
	(void)argv;
	if (policy_parse("cand", cand_yaml, sizeof(cand_yaml) - 1, &cand,
	    &el) != 0)
		abort();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct errlist el = ERRLIST_INIT;
	struct suggest *s = suggest_new();
	struct replay_tally *t = replay_tally_new();
	struct policy *p = NULL;
	struct rp_result r;
	const uint8_t *line = d, *end = d + n, *nl;
	json_t *rec, *sum;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (s == NULL || t == NULL)
		abort();
	for (; line < end; line = nl + 1) {
		if ((nl = memchr(line, '\n', (size_t)(end - line))) == NULL)
			nl = end;
		rec = json_loadb((const char *)line, (size_t)(nl - line), 0,
		    NULL);
		if (rec == NULL || !json_is_object(rec)) {
			json_decref(rec);
			continue;
		}
		replay_record(cand, rec, &r);
		if (r.change != RP_SKIPPED && (r.kind == NULL ||
		    r.what[0] == '\0' || r.now.verdict == NULL ||
		    r.cand.verdict == NULL || r.now.reason == NULL ||
		    r.cand.reason == NULL))
			abort();
		if (replay_tally_add(t, &r) != 0)
			abort();
		suggest_take(s, rec);
		json_decref(rec);
	}
	if ((sum = replay_tally_json(t, "fuzz")) == NULL)
		abort();
	json_decref(sum);
	if ((f = open_memstream(&buf, &len)) == NULL)
		abort();
	suggest_render(f, s, "drafted", "fuzz", "fuzz");
	if (fclose(f) != 0)
		abort();
	/* Whatever the records said, the draft loads. */
	if (policy_parse("draft", buf, len, &p, &el) != 0) {
		size_t i;

		fprintf(stderr, "%s\n", buf);
		for (i = 0; i < el.n; i++)
			fprintf(stderr, "%s\n", el.msgs[i]);
		abort();
	}
	policy_free(p);
	errlist_free(&el);
	free(buf);
	suggest_free(s);
	replay_tally_free(t);
	return 0;
}
