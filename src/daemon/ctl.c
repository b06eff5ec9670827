/*
 * ctl.c: the control socket's transport.  A connection reads one request
 * at a time (llhttp), has it answered by the handlers in ctl_*.c, and
 * when the answer is a change, holds it until every worker runs with the
 * new snapshot: an orchestrator that gets 200 may rely on it at once.
 */
#include "autoconf.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>
#include <llhttp.h>

#include "util/log.h"
#include "util/metrics.h"
#include "conf/config.h"
#include "keys/idkeys.h"
#include "audit/audit.h"
#include "loop/state.h"
#include "daemon/ctl.h"
#include "daemon/ctl_int.h"
#include "daemon/daemon.h"
#include "daemon/upgrade.h"

#define CTL_MAX_CONNS	64
#define CTL_IDLE_S	30
#define CTL_URL_MAX	2048
#define CTL_LINGER_S	2		/* after a closing answer, see drained_cb */
#define CTL_LINGER_MAX	(16u << 20)

struct ctl_conn {
	TAILQ_ENTRY(ctl_conn) link;
	struct ctl	*ctl;
	struct bufferevent *bev;
	int		 metrics_only;	/* the listen.metrics listener */
	int		 jwks_only;	/* the listen.jwks listener */
	uid_t		 uid;
	llhttp_t	 parser;
	char		 url[CTL_URL_MAX + 1];
	size_t		 urllen;
	size_t		 headbytes;
	char		*body;
	size_t		 bodylen, bodycap;
	int		 too_big;
	int		 keep_alive;
	int		 waiting;	/* resp waits for its generation */
	int		 closing;	/* the last answer is being flushed */
	int		 lingering;	/* it is out; the peer's rest is dropped */
	size_t		 discarded;
	int		 refused;	/* the peer may not use the API */
	struct ctl_resp	 resp;
};

TAILQ_HEAD(ctl_conns, ctl_conn);

struct ctl {
	struct daemon	*d;
	char		*path;		/* the socket we bound, unlinked at exit */
	int		 fd, mfd, jfd;	/* control, metrics, jwks (-1: none) */
	gid_t		 gid;		/* control_group, or (gid_t)-1 */
	struct evconnlistener *lev, *mlev, *jlev;
	struct ctl_conns conns;
	size_t		 nconns;	/* on the control socket */
	size_t		 npub;		/* on listen.metrics and listen.jwks */
	unsigned long long by_status[600];
};

static void client_read_cb(struct bufferevent *, void *);
static void client_event_cb(struct bufferevent *, short, void *);
static void client_refuse(struct ctl_conn *, int, const char *);

/* ---- answers -------------------------------------------------------- */

void
ctl_reply_json(struct ctl_resp *r, int status, json_t *j)
{
	free(r->body);
	r->body = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (r->body == NULL) {
		r->status = 500;
		r->body = strdup("{\"error\":\"out of memory\"}");
	} else
		r->status = status;
	r->len = r->body != NULL ? strlen(r->body) : 0;
	r->ctype = "application/json";
}

void
ctl_reply_error(struct ctl_resp *r, int status, const struct errlist *errs,
    const char *fmt, ...)
{
	char msg[512];
	json_t *j, *arr;
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s}", "error", msg);
	if (j != NULL && errs != NULL && errs->n > 0 &&
	    (arr = json_array()) != NULL) {
		for (i = 0; i < errs->n; i++)
			json_array_append_new(arr, json_string(errs->msgs[i]));
		json_object_set_new(j, "errors", arr);
	}
	ctl_reply_json(r, status, j);
}

void
ctl_reply_method(struct ctl_resp *r, const char *allow)
{
	ctl_reply_error(r, 405, NULL, "method not allowed here (allowed: %s)",
	    allow);
	r->allow = allow;
}

json_t *
ctl_body_object(const struct ctl_req *q, struct ctl_resp *r,
    const char *const *keys)
{
	json_error_t e;
	const char *k;
	json_t *j, *v;
	size_t i;

	if (q->bodylen == 0) {
		ctl_reply_error(r, 400, NULL, "a JSON object body is required");
		return NULL;
	}
	j = json_loadb(q->body, q->bodylen, JSON_REJECT_DUPLICATES, &e);
	if (j == NULL) {
		ctl_reply_error(r, 400, NULL, "body is not JSON: %s (line %d, "
		    "column %d)", e.text, e.line, e.column);
		return NULL;
	}
	if (!json_is_object(j)) {
		ctl_reply_error(r, 400, NULL, "body must be a JSON object");
		json_decref(j);
		return NULL;
	}
	json_object_foreach(j, k, v) {
		for (i = 0; keys[i] != NULL && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL) {
			ctl_reply_error(r, 400, NULL, "unknown field '%.64s'", k);
			json_decref(j);
			return NULL;
		}
	}
	return j;
}

static const char *
status_text(int s)
{
	switch (s) {
	case 200: return "OK";
	case 201: return "Created";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	default: return "Unknown";
	}
}

void
ctl_audit(struct daemon *d, const char *type, uid_t uid, json_t *rec)
{
	if (rec == NULL)
		return;
	json_object_set_new(rec, "uid", json_integer((json_int_t)uid));
	audit_write(d->audit, type, rec);
}

/* ---- connections ---------------------------------------------------- */

static void
client_free(struct ctl_conn *cc)
{
	struct ctl *ctl = cc->ctl;

	TAILQ_REMOVE(&ctl->conns, cc, link);
	if (cc->metrics_only || cc->jwks_only)
		ctl->npub--;
	else
		ctl->nconns--;
	bufferevent_free(cc->bev);	/* closes the fd */
	free(cc->body);
	free(cc->resp.body);
	free(cc);
}

/*
 * The last answer is out: say so (our end of the stream), then read and
 * drop what the peer still sends until it closes, for a bounded time and
 * size.  Closing with unread bytes would reset the connection, and a
 * peer still sending a body we refused (413) would lose our answer.
 */
static void
drained_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *cc = arg;
	struct timeval linger = { CTL_LINGER_S, 0 };

	if (cc->lingering)
		return;
	cc->lingering = 1;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	bufferevent_set_timeouts(bev, &linger, NULL);
}

static void
linger_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *cc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	cc->discarded += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (cc->discarded > CTL_LINGER_MAX)
		client_free(cc);
}

/* Sends cc->resp; then reads the next request, or closes. */
static void
client_send(struct ctl_conn *cc)
{
	struct evbuffer *out = bufferevent_get_output(cc->bev);
	struct ctl_resp *r = &cc->resp;

	if (r->status >= 100 && r->status < 600)
		cc->ctl->by_status[r->status]++;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\n", r->status,
	    status_text(r->status), r->ctype ? r->ctype : "application/json",
	    r->len);
	if (r->allow != NULL)
		evbuffer_add_printf(out, "Allow: %s\r\n", r->allow);
	if (!cc->keep_alive)
		evbuffer_add_printf(out, "Connection: close\r\n");
	evbuffer_add(out, "\r\n", 2);
	if (r->len > 0)
		evbuffer_add(out, r->body, r->len);
	free(r->body);
	memset(r, 0, sizeof(*r));
	cc->waiting = 0;
	cc->bodylen = 0;
	cc->urllen = 0;
	cc->headbytes = 0;
	if (!cc->keep_alive) {
		cc->closing = 1;
		bufferevent_setcb(cc->bev, linger_read_cb, drained_cb,
		    client_event_cb, cc);
		bufferevent_enable(cc->bev, EV_READ);
		return;
	}
	llhttp_resume(&cc->parser);
	bufferevent_enable(cc->bev, EV_READ);
}

static void
answer_status(struct daemon *d, struct ctl_resp *r)
{
	static const char *const upgrade_names[] = {
		[UPGRADE_NONE] = "none", [UPGRADE_STARTING] = "starting",
		[UPGRADE_HANDED] = "draining",
	};
	struct audit_stats as;
	char started[32];
	json_t *procs;

	audit_get_stats(d->audit, &as);
	ctl_fmt_time(d->started, started, sizeof(started));
	/* Who does what, so an operator can tell the processes apart. */
	procs = json_pack("[{s:s, s:I}, {s:s, s:I, s:I}, {s:s, s:I}]",
	    "role", "monitor", "pid", (json_int_t)d->mainpid,
	    "role", "worker", "pid", (json_int_t)getpid(),
	    "restarts", (json_int_t)d->restarts,
	    "role", "keys", "pid", (json_int_t)d->keys.pid);
	ctl_reply_json(r, 200, json_pack("{s:s, s:I, s:s, s:b, s:I, s:I, s:I,"
	    " s:I, s:I, s:I, s:I, s:o, s:s, s:s?, s:{s:s?, s:I, s:s, s:I, s:I, s:I,"
	    " s:I, s:I, s:I, s:I, s:b}, s:o}",
	    "version", PACKAGE_VERSION,
	    "pid", (json_int_t)d->mainpid,
	    "started", started,
	    "state_dir", d->state_ok,
	    "generation", (json_int_t)d->state->generation,
	    "workers", (json_int_t)d->nworkers,
	    "sandboxes", (json_int_t)d->state->nsandboxes,
	    "policies", (json_int_t)d->state->npolicies,
	    "connections", (json_int_t)ctl_open_conns(d->state),
	    "uptime_s", (json_int_t)(time(NULL) - d->started),
	    "observing", (json_int_t)state_observing(d->state),
	    "upgraded_from", upgrade_from(d) != 0 ?
	    json_integer((json_int_t)upgrade_from(d)) : json_null(),
	    "upgrade", upgrade_names[upgrade_stage(d)],
	    "audit_path", as.path,
	    "audit", "path", as.path, "seq", (json_int_t)as.seq,
	    "head", as.head[0] ? as.head : "",
	    "queued", (json_int_t)as.queued,
	    "written", (json_int_t)as.written,
	    "checkpoints", (json_int_t)as.checkpoints,
	    "last_checkpoint_seq", (json_int_t)as.last_checkpoint_seq,
	    "rotations", (json_int_t)as.rotations,
	    "refused", (json_int_t)as.refused,
	    "dropped", (json_int_t)as.dropped, "failed", as.broken,
	    "processes", procs != NULL ? procs : json_array()));
}

/* POST /v1/audit/rotate: the writer starts a new file. */
static void
answer_rotate(struct daemon *d, const struct ctl_req *q, struct ctl_resp *r)
{
	struct audit_stats as;

	audit_get_stats(d->audit, &as);
	if (as.path == NULL) {
		ctl_reply_error(r, 409, NULL, "no audit file is configured");
		return;
	}
	audit_rotate(d->audit);
	ctl_audit(d, "audit_rotate", q->uid, json_object());
	ctl_reply_json(r, 202, json_pack("{s:s, s:I}", "rotating", as.path,
	    "rotations", (json_int_t)as.rotations));
}

static void
answer_metrics(struct daemon *d, struct ctl_resp *r)
{
	struct evbuffer *b = evbuffer_new();
	size_t len;

	if (b == NULL || ctl_metrics_render(d, b) != 0 ||
	    (len = evbuffer_get_length(b)) == 0 ||
	    (r->body = malloc(len)) == NULL) {
		evbuffer_free(b);
		ctl_reply_error(r, 500, NULL, "out of memory");
		return;
	}
	evbuffer_remove(b, r->body, len);
	evbuffer_free(b);
	r->len = len;
	r->status = 200;
	r->ctype = "text/plain; version=0.0.4; charset=utf-8";
}

/*
 * The JWKS (which 0) or the OpenID discovery document (1) of the keys in
 * force: old and new during a rotation.
 */
static void
answer_doc(struct daemon *d, int which, struct ctl_resp *r)
{
	const struct idkeys *k = d->state->idkeys;
	const char *doc;
	size_t len;

	if (k == NULL) {
		ctl_reply_error(r, 404, NULL, "no signing_key is configured: "
		    "no identity tokens");
		return;
	}
	doc = which == 0 ? k->jwks : k->discovery;
	len = which == 0 ? k->jwks_len : k->discovery_len;
	if ((r->body = malloc(len)) == NULL) {
		ctl_reply_error(r, 500, NULL, "out of memory");
		return;
	}
	memcpy(r->body, doc, len);
	r->len = len;
	r->status = 200;
	r->ctype = which == 0 ? "application/jwk-set+json" : "application/json";
}

/* listen.jwks: the JWKS and a discovery document, and nothing else. */
static void
answer_wellknown(struct daemon *d, const struct ctl_req *q,
    struct ctl_resp *r)
{
	int which;

	if (strcmp(q->path, "/.well-known/jwks.json") == 0)
		which = 0;
	else if (strcmp(q->path, "/.well-known/openid-configuration") == 0)
		which = 1;
	else {
		ctl_reply_error(r, 404, NULL, "only /.well-known/jwks.json and "
		    "/.well-known/openid-configuration are served here");
		return;
	}
	if (strcmp(q->method, "GET") != 0) {
		ctl_reply_method(r, "GET");
		return;
	}
	answer_doc(d, which, r);
}

/* POST /v1/upgrade: answered once the new process serves, or failed. */
static void
answer_upgrade(struct daemon *d, struct ctl_resp *r)
{
	char why[256];

	if (upgrade_begin(d, why, sizeof(why)) != 0) {
		ctl_reply_error(r, 409, NULL, "no upgrade: %s", why);
		return;
	}
	r->wait_upgrade = 1;
}

static void
route(struct ctl_conn *cc, const struct ctl_req *q, struct ctl_resp *r)
{
	struct daemon *d = cc->ctl->d;

	if (strcmp(q->path, "/metrics") == 0) {
		if (strcmp(q->method, "GET") == 0)
			answer_metrics(d, r);
		else
			ctl_reply_method(r, "GET");
		return;
	}
	if (cc->metrics_only) {
		ctl_reply_error(r, 404, NULL, "only /metrics is served here");
		return;
	}
	if (cc->jwks_only) {
		answer_wellknown(d, q, r);
		return;
	}
	if (strcmp(q->path, "/v1/status") == 0) {
		if (strcmp(q->method, "GET") == 0)
			answer_status(d, r);
		else
			ctl_reply_method(r, "GET");
		return;
	}
	if (strcmp(q->path, "/v1/audit/rotate") == 0) {
		if (strcmp(q->method, "POST") == 0)
			answer_rotate(d, q, r);
		else
			ctl_reply_method(r, "POST");
		return;
	}
	if (strcmp(q->path, "/v1/upgrade") == 0) {
		if (strcmp(q->method, "POST") == 0)
			answer_upgrade(d, r);
		else
			ctl_reply_method(r, "POST");
		return;
	}
	if (upgrade_stage(d) != UPGRADE_NONE && strcmp(q->method, "GET") != 0) {
		/* The new process read state_dir already: a change would be lost. */
		ctl_reply_error(r, 503, NULL, "an upgrade is under way: changes "
		    "go to the new process (pid %ld); try again in a moment",
		    upgrade_child(d));
		return;
	}
	if (ctl_sandboxes(d, q, r) || ctl_policies(d, q, r) ||
	    ctl_secrets(d, q, r) || ctl_tokens(d, q, r) || ctl_test(d, q, r))
		return;
	if (strcmp(q->path, "/v1/jwks") == 0) {
		if (strcmp(q->method, "GET") == 0)
			answer_doc(d, 0, r);
		else
			ctl_reply_method(r, "GET");
		return;
	}
	ctl_reply_error(r, 404, NULL, "no such path: %.128s", q->path);
}

static void
client_handle(struct ctl_conn *cc)
{
	struct ctl_req q;
	char *qm;

	if (cc->refused) {
		client_refuse(cc, 403, "not allowed: the peer must be root or a "
		    "member of control_group");
		return;
	}
	memset(&q, 0, sizeof(q));
	cc->url[cc->urllen] = '\0';
	if ((qm = strchr(cc->url, '?')) != NULL) {
		*qm = '\0';
		q.query = qm + 1;
	}
	q.method = llhttp_method_name(llhttp_get_method(&cc->parser));
	q.path = cc->url;
	q.body = cc->body != NULL ? cc->body : "";
	q.bodylen = cc->bodylen;
	q.uid = cc->uid;
	cc->keep_alive = llhttp_should_keep_alive(&cc->parser);
	route(cc, &q, &cc->resp);
	log_debug("ctl", "uid %u: %s %s: %d", (unsigned)cc->uid, q.method,
	    q.path, cc->resp.status);
	if (cc->resp.wait_upgrade ||
	    cc->resp.wait_gen > cc->ctl->d->applied) {
		cc->waiting = 1;	/* ctl_applied sends it */
		return;
	}
	client_send(cc);
}

/* An answer that ends the connection (bad framing, too large). */
static void
client_refuse(struct ctl_conn *cc, int status, const char *msg)
{
	cc->keep_alive = 0;
	ctl_reply_error(&cc->resp, status, NULL, "%s", msg);
	client_send(cc);
}

static int
on_url(llhttp_t *p, const char *at, size_t len)
{
	struct ctl_conn *cc = p->data;

	if ((cc->headbytes += len) > CTL_HEAD_MAX ||
	    cc->urllen + len > CTL_URL_MAX) {
		cc->too_big = 1;
		return HPE_USER;
	}
	memcpy(cc->url + cc->urllen, at, len);
	cc->urllen += len;
	return 0;
}

static int
on_head_bytes(llhttp_t *p, const char *at, size_t len)
{
	struct ctl_conn *cc = p->data;

	if ((cc->headbytes += len) > CTL_HEAD_MAX) {
		cc->too_big = 1;
		return HPE_USER;
	}
	return 0;
}

static int
on_body(llhttp_t *p, const char *at, size_t len)
{
	struct ctl_conn *cc = p->data;
	size_t want;
	char *n;

	if (cc->refused)
		return 0;	/* answered 403 whatever it says */
	if (len > CTL_BODY_MAX - cc->bodylen) {
		cc->too_big = 1;
		return HPE_USER;
	}
	if (cc->bodylen + len + 1 > cc->bodycap) {
		want = cc->bodycap ? cc->bodycap : 4096;
		while (want < cc->bodylen + len + 1)
			want *= 2;
		if ((n = realloc(cc->body, want)) == NULL)
			return HPE_USER;
		cc->body = n;
		cc->bodycap = want;
	}
	memcpy(cc->body + cc->bodylen, at, len);
	cc->bodylen += len;
	cc->body[cc->bodylen] = '\0';
	return 0;
}

static int
on_headers_complete(llhttp_t *p)
{
	struct ctl_conn *cc = p->data;

	/* Refuse a declared length over the bound before reading it. */
	if (p->content_length > CTL_BODY_MAX && (p->flags & F_CONTENT_LENGTH)) {
		cc->too_big = 1;
		return -1;
	}
	return 0;
}

static int
on_message_complete(llhttp_t *p)
{
	return HPE_PAUSED;	/* one request at a time */
}

static const llhttp_settings_t ctl_settings = {
	.on_url = on_url,
	.on_header_field = on_head_bytes,
	.on_header_value = on_head_bytes,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static void
client_read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *cc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	llhttp_errno_t e;
	size_t len, used;
	const char *data;

	/* Pipelined requests are answered in turn, without recursion. */
	while (!cc->waiting && !cc->closing &&
	    (len = evbuffer_get_contiguous_space(in)) > 0) {
		data = (const char *)evbuffer_pullup(in, (ssize_t)len);
		e = llhttp_execute(&cc->parser, data, len);
		if (e == HPE_OK) {
			evbuffer_drain(in, len);
			continue;
		}
		if (e == HPE_PAUSED) {
			used = (size_t)(llhttp_get_error_pos(&cc->parser) - data);
			evbuffer_drain(in, used);
			bufferevent_disable(bev, EV_READ);
			client_handle(cc);	/* answers, or waits */
			continue;
		}
		evbuffer_drain(in, evbuffer_get_length(in));
		if (cc->too_big)
			client_refuse(cc, 413, "request head or body too large");
		else
			client_refuse(cc, 400, "malformed HTTP request");
		return;
	}
}

/*
 * A peer that shut its side after a request still gets the answer; an
 * error or the idle timeout ends the connection at once.
 */
static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_conn *cc = arg;

	if ((what & BEV_EVENT_EOF) && !(what & (BEV_EVENT_ERROR |
	    BEV_EVENT_TIMEOUT))) {
		cc->keep_alive = 0;
		if (cc->waiting)
			return;		/* client_send flushes, then frees */
		if (cc->closing && evbuffer_get_length(
		    bufferevent_get_output(bev)) > 0)
			return;		/* drained_cb frees */
	}
	client_free(cc);
}

/* Root, ourselves and control_group members may talk to us. */
static int
peer_allowed(struct ctl *ctl, int fd, uid_t *uid)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	gid_t groups[256];
	size_t i, n;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return 0;
	*uid = uc.uid;
	if (uc.uid == 0 || uc.uid == geteuid())
		return 1;
	if (ctl->gid == (gid_t)-1)
		return 0;
	if (uc.gid == ctl->gid)
		return 1;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return 0;
	for (i = 0, n = len / sizeof(gid_t); i < n; i++)
		if (groups[i] == ctl->gid)
			return 1;
	return 0;
}

static void
accept_any(struct ctl *ctl, int fd, int metrics_only, int jwks_only)
{
	struct ctl_conn *cc;
	struct timeval idle = { CTL_IDLE_S, 0 };
	uid_t uid = (uid_t)-1;
	int allowed = metrics_only || jwks_only || peer_allowed(ctl, fd, &uid);

	/* The public listeners have their own share: they cannot lock
	 * operators out of the control socket. */
	if ((metrics_only || jwks_only ? ctl->npub : ctl->nconns) >=
	    CTL_MAX_CONNS || (cc = calloc(1, sizeof(*cc))) ==
	    NULL) {
		close(fd);
		return;
	}
	cc->ctl = ctl;
	cc->uid = uid;
	cc->metrics_only = metrics_only;
	cc->jwks_only = jwks_only;
	cc->bev = bufferevent_socket_new(ctl->d->base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (cc->bev == NULL) {
		close(fd);
		free(cc);
		return;
	}
	TAILQ_INSERT_TAIL(&ctl->conns, cc, link);
	if (metrics_only || jwks_only)
		ctl->npub++;
	else
		ctl->nconns++;
	llhttp_init(&cc->parser, HTTP_REQUEST, &ctl_settings);
	cc->parser.data = cc;
	bufferevent_setcb(cc->bev, client_read_cb, NULL, client_event_cb, cc);
	bufferevent_set_timeouts(cc->bev, &idle, &idle);
	bufferevent_setwatermark(cc->bev, EV_READ, 0, 64 << 10);
	if (!allowed) {
		log_warnx("ctl", "refused a control connection from uid %d: "
		    "not root, not us, not in control_group", (int)uid);
		/*
		 * Answered after its request is read: closing with the request
		 * unread would reset the connection before the answer is seen.
		 */
		cc->refused = 1;
	}
	bufferevent_enable(cc->bev, EV_READ);
}

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	accept_any(arg, fd, 0, 0);
}

static void
accept_metrics_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	accept_any(arg, fd, 1, 0);
}

static void
accept_jwks_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	accept_any(arg, fd, 0, 1);
}

void
ctl_applied(struct ctl *ctl, uint64_t gen)
{
	struct ctl_conn *cc, *next;

	for (cc = TAILQ_FIRST(&ctl->conns); cc != NULL; cc = next) {
		next = TAILQ_NEXT(cc, link);
		if (cc->waiting && !cc->resp.wait_upgrade &&
		    cc->resp.wait_gen <= gen) {
			client_send(cc);
			if (!cc->closing)	/* requests that came meanwhile */
				client_read_cb(cc->bev, cc);
		}
	}
}

unsigned long long
ctl_requests_by_status(const struct ctl *ctl, int status)
{
	return status >= 0 && status < 600 ? ctl->by_status[status] : 0;
}

void
ctl_upgraded(struct ctl *ctl, long pid, const char *error)
{
	struct ctl_conn *cc, *next;

	for (cc = TAILQ_FIRST(&ctl->conns); cc != NULL; cc = next) {
		next = TAILQ_NEXT(cc, link);
		if (!cc->waiting || !cc->resp.wait_upgrade)
			continue;
		cc->resp.wait_upgrade = 0;
		if (error != NULL)
			ctl_reply_error(&cc->resp, 500, NULL, "the upgrade "
			    "failed: the new process %s", error);
		else
			ctl_reply_json(&cc->resp, 200, json_pack("{s:I, s:I}",
			    "pid", (json_int_t)pid, "previous_pid",
			    (json_int_t)ctl->d->mainpid));
		client_send(cc);
		if (!cc->closing)
			client_read_cb(cc->bev, cc);
	}
}

int
ctl_answering(const struct ctl *ctl)
{
	const struct ctl_conn *cc;

	TAILQ_FOREACH(cc, &ctl->conns, link)
		if (evbuffer_get_length(bufferevent_get_output(cc->bev)) > 0)
			return 1;
	return 0;
}

size_t
ctl_listen_fds(const struct ctl *ctl, int *fds, size_t max)
{
	struct evconnlistener *const levs[3] = { ctl->lev, ctl->mlev,
	    ctl->jlev };
	const int raw[3] = { ctl->fd, ctl->mfd, ctl->jfd };
	size_t n = 0, i;

	for (i = 0; i < 3 && n < max; i++)
		if (levs[i] != NULL)
			fds[n++] = evconnlistener_get_fd(levs[i]);
		else if (raw[i] != -1)
			fds[n++] = raw[i];	/* not listened on: the monitor's */
	return n;
}

void
ctl_disown(struct ctl *ctl)
{
	free(ctl->path);
	ctl->path = NULL;
}

void
ctl_handed_over(struct ctl *ctl)
{
	if (ctl->lev != NULL)
		evconnlistener_free(ctl->lev);	/* the successor has its own */
	if (ctl->mlev != NULL)
		evconnlistener_free(ctl->mlev);
	if (ctl->jlev != NULL)
		evconnlistener_free(ctl->jlev);
	ctl->lev = ctl->mlev = ctl->jlev = NULL;
	ctl_disown(ctl);	/* the file is the successor's now */
}

/* ---- the sockets ---------------------------------------------------- */

/* A socket file left by a daemon that is gone may be replaced; a live one not. */
static int
clear_stale(const char *path)
{
	struct sockaddr_un sun;
	struct stat sb;
	int fd, r;

	if (lstat(path, &sb) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(sb.st_mode)) {
		errno = EEXIST;
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	r = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	if (r == 0) {
		errno = EADDRINUSE;
		return -1;
	}
	return unlink(path);
}

static int
open_control(struct ctl *ctl, const char *path)
{
	struct sockaddr_un sun;
	char dir[sizeof(sun.sun_path)], *slash;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_errx("ctl", "control socket path too long: %s", path);
		return SL_ERR_INVALID;
	}
	if ((ctl->fd = upgrade_take_unix(ctl->d, path)) != -1)
		return (ctl->path = strdup(path)) != NULL ? 0 : SL_ERR_NOMEM;
	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
			log_errx("ctl", "cannot create %s: %s", dir, strerror(errno));
			return SL_ERR_IO;
		}
	}
	if (clear_stale(path) != 0) {
		log_errx("ctl", "control socket %s: %s", path, strerror(errno));
		return SL_ERR_IO;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	if ((ctl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) < 0 ||
	    bind(ctl->fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		log_errx("ctl", "cannot bind the control socket %s: %s", path, strerror(errno));
		return SL_ERR_IO;
	}
	if ((ctl->path = strdup(path)) == NULL)
		return SL_ERR_NOMEM;
	if (chmod(path, 0660) != 0 ||
	    (ctl->gid != (gid_t)-1 && chown(path, (uid_t)-1, ctl->gid) != 0)) {
		log_errx("ctl", "cannot set the mode or group of %s: %s", path, strerror(errno));
		return SL_ERR_IO;
	}
	if (listen(ctl->fd, 64) != 0) {
		log_errx("ctl", "cannot listen on %s: %s", path, strerror(errno));
		return SL_ERR_IO;
	}
	return 0;
}

/* A TCP listener of ep (listen.metrics, listen.jwks) into *fd. */
static int
open_tcp(struct ctl *ctl, const struct endpoint *ep, const char *what,
    int *fd)
{
	int one = 1;

	if ((*fd = upgrade_take_inet(ctl->d, ep, SOCK_STREAM)) != -1)
		return 0;
	if ((*fd = socket(ep->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) < 0 ||
	    setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)) != 0 ||
	    bind(*fd, (const struct sockaddr *)&ep->ss, ep->len) != 0 ||
	    listen(*fd, 64) != 0) {
		log_errx("ctl", "cannot listen for %s on %s: %s", what,
		    ep->text, strerror(errno));
		return SL_ERR_IO;
	}
	return 0;
}

int
ctl_open(struct daemon *d, struct ctl **out)
{
	const struct config *cfg = d->cfg;
	struct group *gr;
	struct ctl *ctl;
	int r;

	if ((ctl = calloc(1, sizeof(*ctl))) == NULL)
		return SL_ERR_NOMEM;
	ctl->d = d;
	ctl->fd = ctl->mfd = ctl->jfd = -1;
	ctl->gid = (gid_t)-1;
	TAILQ_INIT(&ctl->conns);
	if (cfg->control_group != NULL) {
		if ((gr = getgrnam(cfg->control_group)) == NULL) {
			log_errx("ctl", "control_group '%s': no such group",
			    cfg->control_group);
			ctl_free(ctl);
			return SL_ERR_INVALID;
		}
		ctl->gid = gr->gr_gid;
	}
	if ((r = open_control(ctl, cfg->control)) != 0 ||
	    (cfg->metrics != NULL && (r = open_tcp(ctl, cfg->metrics, "metrics",
	    &ctl->mfd)) != 0) || (cfg->jwks != NULL && (r = open_tcp(ctl, cfg->jwks,
	    "the JWKS", &ctl->jfd)) != 0)) {
		ctl_free(ctl);
		return r;
	}
	*out = ctl;
	return 0;
}

int
ctl_start(struct ctl *ctl)
{
	ctl->lev = evconnlistener_new(ctl->d->base, accept_cb, ctl,
	    LEV_OPT_CLOSE_ON_FREE, -1, ctl->fd);
	if (ctl->lev == NULL)
		return SL_ERR_NOMEM;
	ctl->fd = -1;	/* the listener owns it */
	if (ctl->mfd != -1) {
		ctl->mlev = evconnlistener_new(ctl->d->base, accept_metrics_cb,
		    ctl, LEV_OPT_CLOSE_ON_FREE, -1, ctl->mfd);
		if (ctl->mlev == NULL)
			return SL_ERR_NOMEM;
		ctl->mfd = -1;
	}
	if (ctl->jfd != -1) {
		ctl->jlev = evconnlistener_new(ctl->d->base, accept_jwks_cb,
		    ctl, LEV_OPT_CLOSE_ON_FREE, -1, ctl->jfd);
		if (ctl->jlev == NULL)
			return SL_ERR_NOMEM;
		ctl->jfd = -1;
	}
	return 0;
}

void
ctl_free(struct ctl *ctl)
{
	struct ctl_conn *cc;

	if (ctl == NULL)
		return;
	while ((cc = TAILQ_FIRST(&ctl->conns)) != NULL)
		client_free(cc);
	if (ctl->lev != NULL)
		evconnlistener_free(ctl->lev);
	if (ctl->mlev != NULL)
		evconnlistener_free(ctl->mlev);
	if (ctl->jlev != NULL)
		evconnlistener_free(ctl->jlev);
	if (ctl->jfd != -1)
		close(ctl->jfd);
	if (ctl->fd != -1)
		close(ctl->fd);
	if (ctl->mfd != -1)
		close(ctl->mfd);
	if (ctl->path != NULL)
		unlink(ctl->path);
	free(ctl->path);
	free(ctl);
}
