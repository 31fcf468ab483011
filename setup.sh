#!/usr/bin/env bash
# Set up innet on a fresh machine: the Debian packages the network parts need, the P4 toolchain
# (BMv2 simple_switch_grpc + simple_switch_CLI, p4c-bm2-ss) when it is missing, then a virtual
# environment in .venv with innet and its test tools. Safe to run again: a second run installs
# nothing. See `./setup.sh --help` and README.md, "Setting up".
set -euo pipefail
# a relative INNET_P4_BUNDLE means relative to where the user stands, not to this folder
if [ -n "${INNET_P4_BUNDLE:-}" ] && [ "${INNET_P4_BUNDLE#/}" = "$INNET_P4_BUNDLE" ]; then
  INNET_P4_BUNDLE="$PWD/$INNET_P4_BUNDLE"
fi
cd "$(dirname "$0")"

usage() {
  cat <<'EOF'
usage: ./setup.sh [--no-p4] [--build-p4] [--help]

Sets up innet in .venv. As root it also installs Debian's Mininet and network tools and,
when simple_switch_grpc or p4c-bm2-ss is not on PATH, the P4 toolchain, the first way that
applies:
  1. INNET_P4_BUNDLE=PATH    a prebuilt bundle (.tar.xz laid out under usr/local, such as
                             ../shared/p4-toolchain/innet-p4-toolchain-debian12-amd64.tar.xz);
                             its Debian runtime packages come with apt-get
  2. the P4 project's apt packages (p4lang-p4c, p4lang-bmv2, p4lang-pi) on Ubuntu 20.04,
     22.04, 24.04 and Debian 11, when this machine reaches their repository
  3. --build-p4              explains how to build the pinned versions from source
  4. otherwise               finishes the Python set-up and says what is missing
Then it checks simple_switch_grpc --version, p4c-bm2-ss --version and that simple_switch_CLI
can import its thrift modules. `innet doctor` says the same at any time.

  --no-p4     leave the P4 toolchain alone (Python set-up only)
  --build-p4  when no bundle or package applies, say how to build from source
  PYTHON=...  the interpreter for .venv (default: python3)
EOF
}

WANT_P4=1
BUILD_P4=0
for arg in "$@"; do
  case "$arg" in
    --no-p4) WANT_P4=0 ;;
    --build-p4) BUILD_P4=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup: unknown option '$arg' (see ./setup.sh --help)" >&2; exit 2 ;;
  esac
done

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

# --- Debian packages: Mininet (mnexec), namespaces and veths (iproute2), offload switches
# (ethtool), captures, and what the venv and the bundle need to unpack.
DEBIAN_PACKAGES=(mininet bridge-utils iputils-ping iproute2 ethtool tcpdump psmisc procps
                 xz-utils)
if command -v dpkg-query >/dev/null 2>&1; then
  if is_root; then
    apt_install "${DEBIAN_PACKAGES[@]}"
  else
    say "not root: not installing Debian packages (${DEBIAN_PACKAGES[*]}); Mininet tests will skip"
  fi
fi

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
  [ -f "$bundle" ] || { echo "setup: INNET_P4_BUNDLE=$bundle: no such file" >&2; exit 1; }
  apt_install xz-utils
  local list=usr/local/share/innet-p4-toolchain/runtime-packages
  local pkgs
  if ! pkgs=$(tar -xJOf "$bundle" "$list" 2>/dev/null); then
    echo "setup: INNET_P4_BUNDLE=$bundle is not a toolchain bundle (no $list inside)" >&2
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
  [ -r /etc/os-release ] || return 1
  local id version repo
  id=$(. /etc/os-release && echo "$ID")
  version=$(. /etc/os-release && echo "$VERSION_ID")
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
setup:   - Debian 12 amd64: INNET_P4_BUNDLE=PATH/innet-p4-toolchain-debian12-amd64.tar.xz ./setup.sh
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

P4_NOTE=""
if [ "$WANT_P4" -eq 1 ]; then
  if p4_present; then
    p4_check || P4_NOTE="the P4 toolchain is on PATH but a check failed (see above; innet doctor)"
  elif ! is_root; then
    P4_NOTE="the P4 toolchain is missing; run ./setup.sh as root to install it"
  elif [ -n "${INNET_P4_BUNDLE:-}" ]; then
    install_bundle "$INNET_P4_BUNDLE"
    p4_check || { echo "setup: the bundle installed but a check failed (above)" >&2; exit 1; }
  elif install_p4lang_apt && p4_present; then
    p4_check || { echo "setup: the p4lang packages installed but a check failed" >&2; exit 1; }
  elif [ "$BUILD_P4" -eq 1 ]; then
    explain_build_p4
    P4_NOTE="the P4 toolchain is missing (see --build-p4 above)"
  else
    explain_missing_p4
    P4_NOTE="the P4 toolchain is missing (see above)"
  fi
fi

# --- Python: a venv with innet and its test tools
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if is_root && [ "$PYTHON" = python3 ] && command -v apt-get >/dev/null 2>&1; then
    apt_install python3-venv
  else
    echo "setup: $PYTHON has no venv/ensurepip module; install python3-venv" >&2
    exit 1
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c 'import innet, pytest, p4runtime_sh, mininet' >/dev/null 2>&1 \
    || [ pyproject.toml -nt .venv/.innet-installed ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
  touch .venv/.innet-installed
fi
[ -n "$P4_NOTE" ] && say "note: $P4_NOTE"
say "ready (.venv/bin/innet; \`.venv/bin/innet doctor\` checks this machine)"
