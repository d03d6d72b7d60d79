# Sourced by scripts/setup: the HAProxy and nginx the suite is tested against besides the
# system's (Debian 12's, in /usr/sbin): Debian 13's, from a minimal Debian 13 root that
# scripts/setup builds once with debootstrap into a cache directory outside the checkout, and
# runs in place through wrappers in DEBIAN13_DIR/bin. test/helpers/haproxy.js finds them there
# ($POOL_DEBIAN13_DIR elsewhere).
# shellcheck shell=bash
DEBIAN13_SUITE=trixie
# nginx: trixie's core package (its nginx-light is only a transitional package that adds a module).
DEBIAN13_PACKAGES=haproxy,nginx
DEBIAN13_DIR=${POOL_DEBIAN13_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pool-supervisor/debian13}

# Writes the wrapper $1/bin/$2 that runs ROOT/usr/sbin/$2, ROOT being the root beside it. The
# root's own loader and libraries run it (the host's are older than it was built for), and
# --argv0 names the wrapper as the program, because HAProxy's master re-executes argv[0] on a
# reload (SIGUSR2): its own path would start it on the host's loader, which fails.
write_platform_wrapper() {
  local dir=$1 program=$2
  mkdir -p "$dir/bin"
  cat >"$dir/bin/$program" <<'EOF'
#!/bin/sh
# Debian 13's PROGRAM, run in place from the root beside this file (written by scripts/setup).
self=$(readlink -f "$0")
root=${self%/bin/*}/root
for lib in "$root"/usr/lib/*-linux-gnu; do
  [ -e "$lib/libc.so.6" ] && break
done
for loader in "$lib"/ld-linux*.so.*; do
  break
done
exec "$loader" --argv0 "$self" --inhibit-cache --library-path "$lib" "$root/usr/sbin/PROGRAM" "$@"
EOF
  sed -i "s/PROGRAM/$program/g" "$dir/bin/$program"
  chmod 755 "$dir/bin/$program"
}
