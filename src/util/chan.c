/* chan.c: messages between sluiced's processes (chan.h). */
#include "autoconf.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include "util/chan.h"
#include "util/err.h"

/* Room for the largest message, queued both ways. */
#define CHAN_SOCKBUF	(4 * (CHAN_MSG_MAX + sizeof(struct chan_hdr)))

int
chan_pair(int sv[2])
{
	int sz = (int)CHAN_SOCKBUF, i;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return SL_ERR_IO;
	for (i = 0; i < 2; i++) {
		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	return 0;
}

/* Waits for ev on fd up to timeout_ms; 0, or SL_ERR_IO (errno). */
static int
wait_for(int fd, short ev, int timeout_ms)
{
	struct pollfd p = { fd, ev, 0 };
	int n;

	do
		n = poll(&p, 1, timeout_ms);
	while (n == -1 && errno == EINTR);
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : SL_ERR_IO;
}

int
chan_send(int fd, uint32_t type, uint64_t id, const void *p, size_t len,
    int passfd)
{
	union {
		struct cmsghdr	 h;
		char		 b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct chan_hdr h = { type, (uint32_t)len, id };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)p, len } };
	struct msghdr m;
	struct cmsghdr *c;
	ssize_t n;

	if (len > CHAN_MSG_MAX)
		return SL_ERR_TOO_BIG;
	memset(&m, 0, sizeof(m));
	m.msg_iov = iov;
	m.msg_iovlen = len > 0 ? 2 : 1;
	if (passfd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &passfd, sizeof(int));
	}
	for (;;) {
		n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || wait_for(fd, POLLOUT, -1) != 0)
			return SL_ERR_IO;
	}
	if ((size_t)n != sizeof(h) + len) {
		errno = EMSGSIZE;
		return SL_ERR_IO;
	}
	return 0;
}

/* The fds a message carried: the first to *passfd when wanted, the rest closed. */
static int
take_fds(struct msghdr *m, int *passfd)
{
	struct cmsghdr *c;
	int fd, bad = 0;
	size_t i, n;

	for (c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (passfd != NULL && *passfd == -1)
				*passfd = fd;
			else {
				close(fd);
				bad = 1;
			}
		}
	}
	return bad;
}

int
chan_recv(int fd, struct chan_hdr *h, void *buf, size_t cap, int *passfd,
    int timeout_ms)
{
	union {
		struct cmsghdr	 h;
		char		 b[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov[2] = { { h, sizeof(*h) }, { buf, cap } };
	struct msghdr m;
	ssize_t n;

	if (passfd != NULL)
		*passfd = -1;
	for (;;) {
		memset(&m, 0, sizeof(m));
		m.msg_iov = iov;
		m.msg_iovlen = 2;
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || wait_for(fd, POLLIN, timeout_ms) != 0)
			return SL_ERR_IO;
	}
	if (n == 0) {
		/* An empty record is not the end: only a hang-up is. */
		struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };

		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP)))
			return 0;
		return SL_ERR_INVALID;
	}
	if (take_fds(&m, passfd) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n < sizeof(*h) || h->len != (size_t)n - sizeof(*h) ||
	    h->len > CHAN_MSG_MAX)
		goto bad;
	return 1;
 bad:
	if (passfd != NULL && *passfd != -1) {
		close(*passfd);
		*passfd = -1;
	}
	return SL_ERR_INVALID;
}
