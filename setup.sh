#!/usr/bin/env bash
# Set up innet on a fresh machine: the Debian packages the network parts need, the P4 toolchain
# (BMv2 simple_switch_grpc + simple_switch_CLI, p4c-bm2-ss) when it is missing, then a virtual
# environment in .venv with innet and its test tools. Safe to run again: a second run installs
# nothing. What it cannot do here (not root, no toolchain) it skips, and says so at the end in
# plain words; the Python set-up always finishes. See `./setup.sh --help` and README.md.
#
# Sourced (`source setup.sh`), it only defines its functions: tests/repository/test_setup.py checks how it
# finds the bundle and picks Python that way, with a PATH of its own.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: ./setup.sh [--no-p4] [--build-p4] [--help]

Sets up innet in .venv (Python 3.11 or newer). As root it also installs Debian's Mininet,
tmux and network tools and, when simple_switch_grpc or p4c-bm2-ss is not on PATH, the P4
toolchain, the first way that applies:
  1. a prebuilt bundle (.tar.xz laid out under usr/local): INNET_P4_BUNDLE=PATH, or, found
     by itself beside the clone, ../shared/p4-toolchain/innet-p4-toolchain-SYSTEM.tar.xz or
     ../p4-toolchain/innet-p4-toolchain-SYSTEM.tar.xz, where SYSTEM is this machine's
     (debian12-amd64 for the shared bundle); its Debian runtime packages come with apt-get
  2. the P4 project's apt packages (p4lang-p4c, p4lang-bmv2, p4lang-pi) on Ubuntu 20.04,
     22.04, 24.04 and Debian 11, when this machine reaches their repository
  3. --build-p4              explains how to build the pinned versions from source
  4. otherwise               finishes the Python set-up and says what is missing
Then it checks simple_switch_grpc --version, p4c-bm2-ss --version and that simple_switch_CLI
can import its thrift modules. `innet doctor` says the same at any time.

  --no-p4     leave the P4 toolchain alone (Python set-up only)
  --build-p4  when no bundle or package applies, say how to build from source
  PYTHON=...  the interpreter for .venv (default: python3 when it is 3.11 or newer, else the
              newest of python3.13, python3.12, python3.11 on PATH)
EOF
}

say() { echo "setup: $*"; }
is_root() { [ "$(id -u)" -eq 0 ]; }
export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_install() {  # apt_install PKG... : install those not installed yet; quiet
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  if [ "$APT_UPDATED" -eq 0 ]; then apt-get update -qq; APT_UPDATED=1; fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian packages: Mininet (mnexec), namespaces and veths (iproute2), offload switches
# (ethtool), captures, tmux (tests drive an interactive CLI in it), and what the venv and the
# bundle need to unpack.
DEBIAN_PACKAGES=(mininet bridge-utils iputils-ping iproute2 ethtool tcpdump psmisc procps
                 xz-utils tmux g++ nlohmann-json3-dev)
# g++ and nlohmann-json3-dev: innet compiles the ns-3 engine's program (ns3-sim/) with them
# The browser test of `net up`'s live view (selenium drives Chromium); Debian's names (Ubuntu
# ships Chromium as a snap: there the test skips, or fails under INNET_REQUIRE_P4=1)
BROWSER_PACKAGES=(chromium chromium-driver)

# --- Finding the toolchain bundle

this_system() {  # prints this machine's bundle suffix, e.g. debian12-amd64
  local release=${OS_RELEASE:-/etc/os-release} id="" version="" arch
  if [ -r "$release" ]; then
    id=$(. "$release" && echo "${ID:-}")
    version=$(. "$release" && echo "${VERSION_ID:-}")
  fi
  arch=$(uname -m)
  case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  echo "$id${version%%.*}-$arch"
}

find_bundle() {  # find_bundle CLONE: prints the bundle to install, or nothing
  # INNET_P4_BUNDLE when set; else the bundle for this system in the shared toolchain folder
  # beside the clone (../shared/p4-toolchain/) or in ../p4-toolchain/
  if [ -n "${INNET_P4_BUNDLE:-}" ]; then
    echo "$INNET_P4_BUNDLE"
    return 0
  fi
  local clone=$1 name dir
  name=innet-p4-toolchain-$(this_system).tar.xz
  for dir in "$clone/../shared/p4-toolchain" "$clone/../p4-toolchain"; do
    if [ -f "$dir/$name" ]; then
      echo "$(cd "$dir" && pwd)/$name"
      return 0
    fi
  done
  return 0
}

other_bundles() {  # other_bundles CLONE: bundles beside the clone built for other systems
  local clone=$1 f
  for f in "$clone"/../shared/p4-toolchain/innet-p4-toolchain-*.tar.xz \
           "$clone"/../p4-toolchain/innet-p4-toolchain-*.tar.xz; do
    if [ -f "$f" ]; then echo "$f"; fi
  done
  return 0
}

# --- Picking Python

python_ok() {  # python_ok PY: PY runs and is Python 3.11 or newer
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

pick_python() {  # prints the interpreter for .venv; returns 1 when none qualifies
  # PYTHON when set (it must qualify); else python3 when it is 3.11 or newer (the system's
  # own, which the toolchain and CI run with); else the newest python3.1x on PATH
  if [ -n "${PYTHON:-}" ]; then
    python_ok "$PYTHON" || return 1
    echo "$PYTHON"
    return 0
  fi
  local p
  for p in python3 python3.13 python3.12 python3.11; do
    if command -v "$p" >/dev/null 2>&1 && python_ok "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

explain_python() {
  local py=${PYTHON:-python3} found
  found=$("$py" --version 2>&1 | head -n1) || found="not installed"
  cat >&2 <<EOF
setup: innet needs Python 3.11 or newer; $py here: ${found:-not installed}.
setup: ways to get it, then run ./setup.sh again (PYTHON=python3.11 ./setup.sh picks one):
setup:   - Debian 12, Ubuntu 23.04 or newer: apt-get install python3 python3-venv
setup:   - Ubuntu 20.04, 22.04: add-apt-repository ppa:deadsnakes/ppa, then
setup:     apt-get install python3.11 python3.11-venv
setup:   - any system: pyenv install 3.11 (github.com/pyenv/pyenv), or uv python install 3.11
setup:   - or the Vagrantfile's VM, which has everything: vagrant up
EOF
}

# --- The P4 toolchain

p4_present() {
  command -v simple_switch_grpc >/dev/null 2>&1 && command -v p4c-bm2-ss >/dev/null 2>&1 \
    && command -v simple_switch_CLI >/dev/null 2>&1
}

p4_check() {  # prints one line per tool; returns non-zero when any check fails
  local ok=0 v
  if v=$(simple_switch_grpc --version 2>&1); then say "simple_switch_grpc $v"
  else say "simple_switch_grpc --version failed: $v"; ok=1; fi
  if v=$(p4c-bm2-ss --version 2>&1 | grep -m1 -i version); then say "p4c-bm2-ss: $v"
  else say "p4c-bm2-ss --version failed"; ok=1; fi
  # simple_switch_CLI is a Python script; it needs thrift and BMv2's own modules
  local cli_python
  cli_python=$(head -n1 "$(command -v simple_switch_CLI)" | sed 's/^#! *//; s/^\/usr\/bin\/env //')
  if v=$($cli_python -c 'import thrift, runtime_CLI, sswitch_CLI' 2>&1); then
    say "simple_switch_CLI: $cli_python imports its thrift modules"
  else say "simple_switch_CLI cannot import its modules with $cli_python: ${v##*$'\n'}"; ok=1; fi
  return $ok
}

install_bundle() {  # install_bundle PATH: runtime packages, files under /usr/local, ldconfig
  local bundle=$1
  apt_install xz-utils
  local list=usr/local/share/innet-p4-toolchain/runtime-packages
  local pkgs
  if ! pkgs=$(tar -xJOf "$bundle" "$list" 2>/dev/null); then
    echo "setup: $bundle is not a toolchain bundle (no $list inside)" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  apt_install $pkgs
  say "installing the P4 toolchain from $bundle into /usr/local"
  tar -xJf "$bundle" -C / --no-same-owner
  ldconfig
}

P4LANG_SYSTEMS="ubuntu:20.04 ubuntu:22.04 ubuntu:24.04 debian:11"
install_p4lang_apt() {  # the P4 project's packages; returns non-zero when not applicable
  local release=${OS_RELEASE:-/etc/os-release} id version repo
  [ -r "$release" ] || return 1
  id=$(. "$release" && echo "$ID")
  version=$(. "$release" && echo "$VERSION_ID")
  case " $P4LANG_SYSTEMS " in *" $id:$version "*) ;; *) return 1 ;; esac
  if [ "$id" = ubuntu ]; then repo="xUbuntu_$version"; else repo="Debian_$version"; fi
  repo="https://download.opensuse.org/repositories/home:/p4lang/$repo"
  apt_install ca-certificates curl gnupg
  say "trying the P4 project's apt packages for $id $version"
  install -d -m 0755 /etc/apt/keyrings
  if ! curl -fsSL --max-time 30 "$repo/Release.key" \
      | gpg --dearmor --yes -o /etc/apt/keyrings/home_p4lang.gpg 2>/dev/null; then
    say "the P4 project's repository is not reachable from here"
    rm -f /etc/apt/keyrings/home_p4lang.gpg
    return 1
  fi
  echo "deb [signed-by=/etc/apt/keyrings/home_p4lang.gpg] $repo/ /" \
    > /etc/apt/sources.list.d/home_p4lang.list
  APT_UPDATED=0
  apt_install p4lang-p4c p4lang-bmv2 p4lang-pi
}

explain_missing_p4() {
  cat <<EOF
setup: the P4 toolchain (simple_switch_grpc, simple_switch_CLI, p4c-bm2-ss) is not installed.
setup: innet works without it, but the BMv2 tests skip and \`innet demo\` skips the experiments.
setup: ways to get it, then run ./setup.sh again:
setup:   - Debian 12 amd64: the prebuilt bundle, found by itself at
setup:     ../shared/p4-toolchain/innet-p4-toolchain-debian12-amd64.tar.xz (beside the clone),
setup:     or named: INNET_P4_BUNDLE=PATH/innet-p4-toolchain-debian12-amd64.tar.xz ./setup.sh
setup:   - Ubuntu 20.04/22.04/24.04, Debian 11: ./setup.sh as root with the P4 project's apt repository reachable
setup:   - any machine with Vagrant: \`vagrant up\` (an Ubuntu 22.04 VM with everything)
setup:   - build the pinned versions from source: ./setup.sh --build-p4 says how
setup: \`innet doctor\` lists what is missing and the command that fixes each part.
EOF
}

explain_build_p4() {
  cat <<'EOF'
setup: --build-p4: innet ships no build of the P4 toolchain's sources; build these pinned
setup: versions with each project's own instructions (30 to 50 minutes on two cores), install
setup: them under /usr/local, then run ./setup.sh again:
setup:   p4lang/PI               f96af95e   configure --with-proto --without-internal-rpc --without-cli --without-bmv2
setup:   p4lang/behavioral-model 9674187f   configure --with-pi --with-thrift --without-nanomsg PYTHON=/usr/bin/python3
setup:   p4lang/p4c              v1.2.4.8   cmake -DENABLE_BMV2=ON -DP4C_USE_PREINSTALLED_PROTOBUF=ON (other back ends off)
setup: On Debian 12, p4c releases after v1.2.4.8 need a newer abseil and protobuf than Debian has.
EOF
}

main() {
  local want_p4=1 build_p4=0 arg
  for arg in "$@"; do
    case "$arg" in
      --no-p4) want_p4=0 ;;
      --build-p4) build_p4=1 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "setup: unknown option '$arg' (see ./setup.sh --help)" >&2; exit 2 ;;
    esac
  done
  # a relative INNET_P4_BUNDLE means relative to where the user stands, not to the clone
  if [ -n "${INNET_P4_BUNDLE:-}" ] && [ "${INNET_P4_BUNDLE#/}" = "$INNET_P4_BUNDLE" ]; then
    INNET_P4_BUNDLE="$PWD/$INNET_P4_BUNDLE"
  fi
  cd "$(dirname "$0")"
  local clone skipped=()
  clone=$(pwd)

  # Python first: without 3.11 nothing else is worth installing
  local python
  if ! python=$(pick_python); then
    explain_python
    exit 1
  fi
  say "Python: $python ($("$python" --version 2>&1))"

  # Debian packages
  if command -v dpkg-query >/dev/null 2>&1; then
    if is_root; then
      apt_install "${DEBIAN_PACKAGES[@]}"
      apt_install "${BROWSER_PACKAGES[@]}" \
        || skipped+=("Chromium (${BROWSER_PACKAGES[*]}): apt-get could not install it; the live view's browser test skips without it")
    else
      skipped+=("the Debian packages (${DEBIAN_PACKAGES[*]}): not root, so nothing was installed with apt-get; the Mininet tests skip without them")
    fi
  fi

  # The P4 toolchain
  if [ "$want_p4" -eq 0 ]; then
    skipped+=("the P4 toolchain: --no-p4")
  elif p4_present; then
    p4_check || skipped+=("a working P4 toolchain: it is on PATH but a check failed (above; innet doctor)")
  else
    local bundle others
    bundle=$(find_bundle "$clone")
    if [ -n "$bundle" ] && [ ! -f "$bundle" ]; then
      say "INNET_P4_BUNDLE=$bundle: no such file"
      skipped+=("the P4 toolchain: INNET_P4_BUNDLE names $bundle, which does not exist")
    elif ! is_root; then
      skipped+=("the P4 toolchain: it is not on PATH, and installing it needs root (sudo ./setup.sh)${bundle:+; the bundle is at $bundle}")
    elif [ -n "$bundle" ]; then
      install_bundle "$bundle"
      p4_check || { echo "setup: the bundle installed but a check failed (above)" >&2; exit 1; }
    elif install_p4lang_apt && p4_present; then
      p4_check || { echo "setup: the p4lang packages installed but a check failed" >&2; exit 1; }
    else
      others=$(other_bundles "$clone" | tr '\n' ' ')
      if [ "$build_p4" -eq 1 ]; then explain_build_p4; else explain_missing_p4; fi
      skipped+=("the P4 toolchain: no bundle for $(this_system) beside the clone (../shared/p4-toolchain/)${others:+, only $others}, and no p4lang apt packages for this system (see above)")
    fi
  fi

  # Python: a venv with innet, its emulation extra and its test tools
  if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if is_root && command -v apt-get >/dev/null 2>&1 && [ "$(command -v "$python")" = "/usr/bin/$python" ]; then
      apt_install "$python-venv"
    else
      echo "setup: $python has no venv/ensurepip module; install ${python}-venv (Debian, Ubuntu)" >&2
      exit 1
    fi
  fi
  if [ -x .venv/bin/python ] && ! python_ok .venv/bin/python; then
    say ".venv has $(.venv/bin/python --version 2>&1), older than 3.11: making it again with $python"
    rm -rf .venv
  fi
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  if ! .venv/bin/python -c 'import innet, pytest, p4runtime_sh, mininet, scapy' >/dev/null 2>&1 \
      || [ pyproject.toml -nt .venv/.innet-installed ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,emulation]'
    touch .venv/.innet-installed
  fi
  # ns-3 for `cassini ... --engine ns3`: the wheel's metadata asks for cppyy (no wheel, a long
  # build) for bindings innet does not use, so it goes in without its dependencies
  if ! .venv/bin/python -m pip show -q ns3 >/dev/null 2>&1; then
    if ! .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps ns3==3.44.post0; then
      skipped+=("ns-3 (pip install --no-deps ns3==3.44.post0 failed): --engine ns3 and its tests skip")
    fi
  fi

  local part
  for part in "${skipped[@]}"; do say "skipped: $part"; done
  if [ "${#skipped[@]}" -gt 0 ]; then
    say "innet's models, planners and their tests work without these; \`.venv/bin/innet doctor\` says what each part needs"
  fi
  say "ready (.venv/bin/innet; \`.venv/bin/innet doctor\` checks this machine)"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
