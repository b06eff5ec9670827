/* proctitle.c: process titles (proctitle.h). */
#include "autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/prctl.h>

#include "util/proctitle.h"

extern char **environ;

static char	*area;		/* where argv's strings were */
static size_t	 area_len;	/* up to the end of the environment's */
static char	**moved;	/* every string moved: unsetenv drops them from environ */

void
proctitle_init(int argc, char **argv)
{
	char *start, *end, **env;
	size_t i, n;
	int k;

	if (argc < 1 || argv[0] == NULL)
		return;
	start = argv[0];
	end = argv[0] + strlen(argv[0]) + 1;
	for (k = 1; k < argc && argv[k] == end; k++)
		end = argv[k] + strlen(argv[k]) + 1;
	for (n = 0; environ[n] != NULL; n++)
		;
	if ((env = calloc(n + 1, sizeof(*env))) == NULL)
		return;
	/* The environment follows argv: copied away, its memory is ours too. */
	for (i = 0; i < n; i++) {
		if (environ[i] == end)
			end = environ[i] + strlen(environ[i]) + 1;
		if ((env[i] = strdup(environ[i])) == NULL) {
			while (i-- > 0)
				free(env[i]);
			free(env);
			return;
		}
	}
	for (k = 0; k < argc; k++)
		if ((argv[k] = strdup(argv[k])) == NULL)
			return;		/* no title, the process goes on */
	if ((moved = calloc(n + 1, sizeof(*moved))) == NULL)
		return;
	memcpy(moved, env, n * sizeof(*env));
	environ = env;
	area = start;
	area_len = (size_t)(end - start);
}

void
proctitle_set(const char *title)
{
	char comm[16];
	size_t i, o = 8;

	/* comm has no room to spare: "worker 0" is sluiced-worker0. */
	memcpy(comm, "sluiced-", o);
	for (i = 0; title[i] != '\0' && o < sizeof(comm) - 1; i++)
		if (title[i] != ' ')
			comm[o++] = title[i];
	comm[o] = '\0';
	prctl(PR_SET_NAME, comm, 0, 0, 0);
	if (area == NULL || area_len < 2)
		return;
	memset(area, '\0', area_len);
	snprintf(area, area_len - 1, "sluiced: %s", title);
}
