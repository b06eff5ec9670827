/* confine.c: capabilities and seccomp filters (confine.h). */
#include "autoconf.h"

#include <sys/ioctl.h>
#include <termios.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/landlock.h>
#include <seccomp.h>

#include "util/log.h"
#include "daemon/confine.h"

/* What every process of sluiced does once it runs: memory, time, I/O on its fds. */
static const char *const common[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close",
	"lseek", "fstat", "newfstatat", "statx", "fcntl", "dup", "dup3",
	"mmap", "munmap", "mprotect", "madvise", "mremap", "brk", "mlock",
	"munlock", "mlock2",
	"futex", "set_robust_list", "get_robust_list", "rseq",
	"clock_gettime", "clock_getres", "gettimeofday", "time",
	"clock_nanosleep", "nanosleep", "sched_yield", "sched_getaffinity",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid",
	"getegid", "getresuid", "getresgid", "getrandom",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"tgkill", "tkill", "kill", "restart_syscall", "exit", "exit_group",
	"poll", "ppoll", "sendmsg", "recvmsg", "sendto", "recvfrom",
	"prlimit64", "getrusage", "sysinfo", "uname", "getcwd",
	NULL,
};

/* The worker's data path: sockets to upstreams, the loop, splicing. */
static const char *const worker_calls[] = {
	"connect", "accept", "accept4", "shutdown", "setsockopt",
	"getsockopt", "getsockname", "getpeername", "socketpair",
	"sendmmsg", "recvmmsg", "splice", "pipe2",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "eventfd2", "timerfd_create", "timerfd_settime",
	"timerfd_gettime", "wait4",
	/* No open: files are the monitor's (fsvc.h); links are resolved. */
	"readlink", "readlinkat",
	NULL,
};

/* The keys process: its channels, the trail, sealed CAs in state_dir. */
static const char *const keys_calls[] = {
	"openat", "getdents64", "rename", "renameat", "renameat2", "unlink",
	"unlinkat", "fsync", "fdatasync", "ftruncate", "connect", "shutdown",
	NULL,
};

#ifdef SLUICE_SANITIZERS
/* LeakSanitizer stops the world with a traced clone; the symbolizer forks. */
static const char *const sanitizer_calls[] = {
	"clone", "ptrace", "wait4", "open", "openat", "getdents", "getdents64",
	"readlink", "readlinkat", "prctl", "sched_yield", "setsid", "stat",
	"lstat", "access", "fork", "vfork",
	NULL,
};
#endif

static int
allow_all(scmp_filter_ctx ctx, const char *const *names, char *why,
    size_t why_len)
{
	int nr, r;

	for (; *names != NULL; names++) {
		if ((nr = seccomp_syscall_resolve_name(*names)) == __NR_SCMP_ERROR)
			continue;	/* not on this architecture */
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0) {
			snprintf(why, why_len, "seccomp: %s: %s", *names,
			    strerror(-r));
			return -1;
		}
	}
	return 0;
}

/* Rules with arguments, for both: threads only, named threads, FIONREAD. */
static int
common_rules(scmp_filter_ctx ctx)
{
	int r = 0;

	/* pthread_create: clone3's flags are out of reach, so it says ENOSYS. */
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
#ifndef SLUICE_SANITIZERS
	r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
	    SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME, 0));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
	    SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME, 0));
#endif
	r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_EQ, FIONREAD, 0));
	r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_EQ, FIONBIO, 0));
	/* isatty(): "not a terminal". */
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_EQ, TCGETS, 0));
	return r;
}

/*
 * The worker opens no file, but libraries look: glibc reads
 * /proc/sys/vm/overcommit_memory the first time it shrinks a thread's
 * heap, which a burst of memory a sandbox causes can bring about.  So
 * open fails (EACCES; Landlock refuses any path anyway) instead of
 * killing the worker, and every connection with it.
 */
static int
open_refused(scmp_filter_ctx ctx)
{
	int r = 0;

#ifndef SLUICE_SANITIZERS	/* there LeakSanitizer opens what it reads */
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
	r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0);
#endif
	return r;
}

static int
load(scmp_filter_ctx ctx, const char *const *extra, int worker, char *why,
    size_t why_len)
{
	int r;

	/* Every thread, the ones running already too. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) != 0) {
		snprintf(why, why_len, "seccomp: thread sync: %s", strerror(-r));
		return -1;
	}
	/* A tree of the calls, not a list: every system call pays for it. */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (allow_all(ctx, common, why, why_len) != 0 ||
	    allow_all(ctx, extra, why, why_len) != 0)
		return -1;
#ifdef SLUICE_SANITIZERS
	if (allow_all(ctx, sanitizer_calls, why, why_len) != 0)
		return -1;
#endif
	r = common_rules(ctx);
	if (worker) {
		/* Upstreams and the resolver: IP sockets only. */
		r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, AF_INET, 0));
		r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, AF_INET6, 0));
		/*
		 * getifaddrs(), for the host's own addresses at each reload:
		 * a route netlink socket, bound to a sockaddr_nl, which is
		 * too short a length for any IP address.
		 */
		r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
		    SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
		    SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE, 0));
		r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bind), 1,
		    SCMP_A2(SCMP_CMP_EQ, sizeof(struct sockaddr_nl), 0));
		r |= open_refused(ctx);
	} else {
		/* syslog(3), for audit.syslog: a local datagram socket. */
		r |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
	}
	if (r != 0) {
		snprintf(why, why_len, "seccomp: a rule was refused");
		return -1;
	}
	if ((r = seccomp_load(ctx)) != 0) {
		snprintf(why, why_len, "seccomp: cannot load the filter: %s",
		    strerror(-r));
		return -1;
	}
	return 0;
}

void
confine_drop_bounding(void)
{
	int cap;

	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL)
			break;	/* past the last one this kernel knows */
}

int
confine_drop_caps(void)
{
	struct __user_cap_header_struct h;
	struct __user_cap_data_struct c[2];

	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(&h, 0, sizeof(h));
	memset(c, 0, sizeof(c));
	h.version = _LINUX_CAPABILITY_VERSION_3;
	h.pid = 0;
	return (int)syscall(SYS_capset, &h, c);
}

/*
 * Landlock (from Linux 5.13): every file access right the kernel knows is
 * handled and none granted, so no path opens, whatever the filter lets
 * through; from ABI 6, no signal leaves the worker either.  The attr is
 * the newest layout; the kernel is given the part its ABI reads.
 */
struct ll_attr {
	uint64_t	fs;
	uint64_t	net;
	uint64_t	scoped;
};

#define LL_RULE_PATH_BENEATH	1
#define LL_FS_READ_FILE		(1ULL << 2)
#define LL_FS_READ_DIR		(1ULL << 3)
#define LL_SCOPE_SIGNAL		(1ULL << 1)

static int
landlock(const char **how, char *why, size_t why_len)
{
	struct ll_attr a;
	size_t size = sizeof(a.fs);
	int abi, fd;

	abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1) {
		*how = "no Landlock in this kernel";
		return 0;
	}
	memset(&a, 0, sizeof(a));
	/* ABI 1: 13 rights; 2: refer; 3: truncate; 5: ioctl on devices. */
	a.fs = (1ULL << 13) - 1;
	if (abi >= 2)
		a.fs |= 1ULL << 13;
	if (abi >= 3)
		a.fs |= 1ULL << 14;
	if (abi >= 5)
		a.fs |= 1ULL << 15;
	if (abi >= 4)
		size = offsetof(struct ll_attr, scoped);
	if (abi >= 6) {
		a.scoped = LL_SCOPE_SIGNAL;
		size = sizeof(a);
	}
	if ((fd = (int)syscall(SYS_landlock_create_ruleset, &a, size, 0)) < 0) {
		snprintf(why, why_len, "landlock: %s", strerror(errno));
		return -1;
	}
#ifdef SLUICE_SANITIZERS
	{
		/* Reports and leak checks read /proc/self. */
		struct {
			uint64_t allowed;
			int32_t parent;
		} __attribute__((packed)) pb;

		pb.allowed = LL_FS_READ_FILE | LL_FS_READ_DIR;
		if ((pb.parent = open("/proc", O_PATH | O_CLOEXEC)) >= 0) {
			syscall(SYS_landlock_add_rule, fd, LL_RULE_PATH_BENEATH,
			    &pb, 0);
			close(pb.parent);
		}
	}
#endif
	if (syscall(SYS_landlock_restrict_self, fd, 0) != 0) {
		snprintf(why, why_len, "landlock: %s", strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	*how = abi >= 6 ? "Landlock: no file, no signal out" :
	    "Landlock: no file";
	return 0;
}

int
confine_worker(char *why, size_t why_len)
{
	scmp_filter_ctx ctx;
	const char *how = NULL;
	int r;

	if (confine_drop_caps() != 0) {
		snprintf(why, why_len, "cannot drop capabilities: %s",
		    strerror(errno));
		return -1;
	}
	/* no_new_privs first: Landlock needs it without CAP_SYS_ADMIN. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(why, why_len, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	if (landlock(&how, why, why_len) != 0)
		return -1;
	if ((ctx = seccomp_init(SCMP_ACT_KILL_PROCESS)) == NULL) {
		snprintf(why, why_len, "seccomp: out of memory");
		return -1;
	}
	r = load(ctx, worker_calls, 1, why, why_len);
	seccomp_release(ctx);
	if (r == 0)
		log_info("daemon", "worker confined: seccomp filter, no "
		    "capability, %s", how);
	return r;
}

int
confine_keys(char *why, size_t why_len)
{
	scmp_filter_ctx ctx;
	int r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(why, why_len, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	if ((ctx = seccomp_init(SCMP_ACT_KILL_PROCESS)) == NULL) {
		snprintf(why, why_len, "seccomp: out of memory");
		return -1;
	}
	r = load(ctx, keys_calls, 0, why, why_len);
	seccomp_release(ctx);
	return r;
}

#ifdef SLUICE_TEST_HOOKS
void
confine_test_forbidden(void)
{
	char *const argv[] = { "true", NULL };

	log_warnx("test", "running /bin/true, as a worker taken over would");
	execve("/bin/true", argv, argv + 1);
	log_errx("test", "execve: %s (the filter let it through)",
	    strerror(errno));
}
#endif
