// Preloaded into MagicBlock's ER validator by tests/support/real_er.rs. The validator refuses to start unless
// it can raise RLIMIT_NOFILE to 1 000 000; a container's hard limit (often 20 000, and raising it needs
// CAP_SYS_RESOURCE) is far above what one test ledger opens. A raise beyond the hard limit is clamped to it,
// and reads of the limit then report the value asked for; every other resource passes through unchanged.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/types.h>

static rlim_t asked;

int prlimit64(pid_t pid, enum __rlimit_resource r, const struct rlimit64 *n, struct rlimit64 *o) {
  static int (*real)(pid_t, enum __rlimit_resource, const struct rlimit64 *, struct rlimit64 *);
  if (!real) real = dlsym(RTLD_NEXT, "prlimit64");
  struct rlimit64 fixed;
  if (r == RLIMIT_NOFILE && n) {
    struct rlimit64 cur;
    if (real(pid, r, 0, &cur) != 0) return real(pid, r, n, o);
    fixed = *n;
    if (n->rlim_cur > cur.rlim_max || n->rlim_max > cur.rlim_max) {
      asked = n->rlim_cur;
      fixed.rlim_cur = n->rlim_cur > cur.rlim_max ? cur.rlim_max : n->rlim_cur;
      fixed.rlim_max = cur.rlim_max;
    }
    n = &fixed;
  }
  int rc = real(pid, r, n, o);
  if (r == RLIMIT_NOFILE && o && asked) {
    o->rlim_cur = asked;
    if (o->rlim_max < asked) o->rlim_max = asked;
  }
  return rc;
}

int prlimit(pid_t pid, enum __rlimit_resource r, const struct rlimit *n, struct rlimit *o) {
  return prlimit64(pid, r, (const struct rlimit64 *)n, (struct rlimit64 *)o);
}
int setrlimit(enum __rlimit_resource r, const struct rlimit *l) { return prlimit64(0, r, (const struct rlimit64 *)l, 0); }
int setrlimit64(enum __rlimit_resource r, const struct rlimit64 *l) { return prlimit64(0, r, l, 0); }
int getrlimit(enum __rlimit_resource r, struct rlimit *l) { return prlimit64(0, r, 0, (struct rlimit64 *)l); }
int getrlimit64(enum __rlimit_resource r, struct rlimit64 *l) { return prlimit64(0, r, 0, l); }
