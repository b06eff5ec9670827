/* main.c: sluiced's command line. */
#include "autoconf.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "util/err.h"
#include "util/jsonmem.h"
#include "util/log.h"
#include "util/proctitle.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "keys/inject.h"
#include "keys/secrets.h"
#include "loop/state.h"
#include "daemon/daemon.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: sluiced -c FILE [--check] [-d]\n"
	    "\n"
	    "The sluice egress gateway daemon.\n"
	    "\n"
	    "  -c, --config FILE  the configuration (sluiced.yaml)\n"
	    "      --check        validate the configuration and every policy, then exit\n"
	    "  -d, --debug        log at debug level\n"
	    "  -h, --help         this text\n"
	    "  -V, --version      print the version\n"
	    "\n"
	    "Signals: SIGHUP re-reads policy_dir, SIGTERM drains and exits.\n");
}

/*
 * Every inject rule's templates against the secrets in force: a secret
 * the store does not have, or one bound to other hosts than the rule's,
 * would refuse every request the rule matches (reported in warns).  For a rule whose host is
 * a pattern the binding is checked against the pattern's apex.
 */
/* A secret a rule presents or signs with that the store does not have. */
static void
missing_secret(const struct policy *p, const struct intercept_rule *r,
    const char *name, const struct secret_set *set, struct errlist *errs)
{
	if (name != NULL && secret_set_find(set, name, strlen(name)) == NULL)
		errlist_add(errs, p->file, r->line, 0, "%s: the secret '%s' is "
		    "not in secret_dir: every request this rule matches would "
		    "be refused", r->label, name);
}

/* A CA file a rule or token source names that cannot be read. */
static void
unreadable_ca(const struct policy *p, unsigned line, const char *ca,
    struct errlist *errs)
{
	if (ca != NULL && access(ca, R_OK) != 0)
		errlist_add(errs, p->file, line, 0, "upstream_ca %s cannot be "
		    "read (%s): every connection verified by it will fail", ca,
		    strerror(errno));
}

static void
check_injections(const struct state *st, const struct secret_set *set,
    struct errlist *errs)
{
	const struct intercept_rule *r;
	const struct mint_source *t;
	const struct policy *p;
	struct inject_src src = { NULL, NULL, NULL, 0 };
	struct inject inj;
	size_t i, k, used = 0;
	char *buf;

	if ((buf = sodium_malloc(INJECT_BUF)) == NULL)
		return;
	for (i = 0; i < st->npolicies; i++) {
		p = st->policies[i];
		for (k = 0; k < p->tokens.n; k++) {
			t = &p->tokens.v[k];
			if (secret_set_find(set, t->secret,
			    strlen(t->secret)) == NULL)
				errlist_add(errs, p->file, t->line, 0, "token "
				    "'%s': the secret '%s' is not in secret_dir: "
				    "no token can be minted", t->name, t->secret);
			unreadable_ca(p, t->line, t->upstream_ca, errs);
		}
		for (k = 0; k < p->nintercepts; k++) {
			r = &p->intercepts[k];
			unreadable_ca(p, r->line, r->upstream_ca, errs);
			missing_secret(p, r, r->client_cert, set, errs);
			missing_secret(p, r, r->sigv4_secret, set, errs);
			if (r->action != ICPT_INJECT)
				continue;
			memset(&inj, 0, sizeof(inj));
			src.set = set;
			src.host = strncmp(r->host, "*.", 2) == 0 ? r->host + 2 :
			    r->host;
			switch (inject_render(r, &src, buf, INJECT_BUF, &used,
			    &inj)) {
			case INJECT_OK:
			case INJECT_TOO_BIG:
			case INJECT_NO_TOKEN:	/* minted when a request comes */
				break;
			case INJECT_UNAVAILABLE:
				errlist_add(errs, p->file, r->line, 0, "%s: the "
				    "secret '%s' is not in secret_dir: every "
				    "request this rule matches would be refused",
				    r->label, inj.secret);
				break;
			case INJECT_UNBOUND:
				errlist_add(errs, p->file, r->line, 0, "%s: the "
				    "secret '%s' is bound to other hosts than %s",
				    r->label, inj.secret, r->host);
				break;
			case INJECT_WRONG_KIND:
				break;	/* an error of state_seal's */
			}
			sodium_memzero(buf, used);
			inject_release(&inj);
		}
	}
	sodium_free(buf);
}

/* --check runs exactly what start-up runs, without binding anything. */
static int
check_config(struct config *cfg)
{
	struct errlist errs = ERRLIST_INIT, warns = ERRLIST_INIT;
	struct secret_store *ss = NULL;
	struct secret_set *set = NULL;
	struct state *st = NULL;
	size_t i;
	int r;

	r = state_build(cfg, NULL, 1, &st, &errs);
	if (config_check_system(cfg, &errs, &warns) != 0)
		r = SL_ERR_INVALID;
	/* The secrets too: the keys open, and every sealed file with them. */
	if (secret_store_new(cfg, &ss, &errs) != 0)
		r = SL_ERR_INVALID;
	else if (ss != NULL && (secret_store_load(ss, NULL, &set, NULL, NULL,
	    &errs) != 0 || errs.n > 0))
		r = SL_ERR_INVALID;
	else if (st != NULL && state_check_secrets(st, set, &errs) != 0)
		r = SL_ERR_INVALID;
	/*
	 * Warnings, not errors: secrets come and go live (secret_dir,
	 * PUT /v1/secrets), so a policy may name one before it arrives.
	 */
	if (st != NULL && ss != NULL)
		check_injections(st, set, &warns);
	for (i = 0; i < warns.n; i++)
		fprintf(stderr, "warning: %s\n", warns.msgs[i]);
	for (i = 0; i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	errlist_free(&warns);
	if (r == 0)
		printf("%s: ok (%zu policies, %zu sandboxes, %zu secrets)\n",
		    cfg->path, st->npolicies, st->nsandboxes,
		    set != NULL ? set->n : 0);
	errlist_free(&errs);
	secret_set_unref(set);
	secret_store_free(ss);
	state_unref(st);
	return r == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'C' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct errlist errs = ERRLIST_INIT;
	struct config *cfg = NULL;
	const char *path = NULL;
	int ch, check = 0, debug = 0, status;
	size_t i;

	proctitle_init(argc, argv);
	while ((ch = getopt_long(argc, argv, "c:dhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': path = optarg; break;
		case 'C': check = 1; break;
		case 'd': debug = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("sluiced %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (path == NULL || optind != argc) {
		fprintf(stderr, "sluiced: %s\n", path == NULL ?
		    "-c FILE is required" : "unexpected argument");
		usage(stderr);
		return 2;
	}
	log_init("sluiced", debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	log_hook_libraries();
	if (sodium_init() < 0) {
		fprintf(stderr, "sluiced: libsodium cannot start\n");
		return 1;
	}
	jsonmem_wipe_on_free();	/* before any JSON: answers hold tokens */
	/*
	 * TLS buffers are taken and given back with every request (an idle
	 * connection holds none): keep the freed memory in the heap rather
	 * than trim it (or map it) and fault it in again each time.
	 */
	mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
	mallopt(M_MMAP_THRESHOLD, 1024 * 1024);	/* fixed by the line above */
	if (evthread_use_pthreads() != 0) {
		fprintf(stderr, "sluiced: libevent has no thread support\n");
		return 1;
	}
	if (config_load(path, &cfg, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		errlist_free(&errs);
		return 1;
	}
	if (cfg->log_format >= 0)
		log_set_format((enum log_format)cfg->log_format);
	if (check)
		status = check_config(cfg);
	else
		status = daemon_run(cfg, argv);
	config_free(cfg);
	return status;
}
