#!/usr/bin/env bash
# Make sure Debian's Chromium is at /usr/bin/chromium for the console's browser tests
# (tests/console; docs/testing-browser.md): nothing when it is there, else `apt-get install -y
# chromium` (needs root and apt). Playwright drives that binary; it never downloads a browser.
# There is no silent skip here: without root or apt this fails and says why.
set -euo pipefail
browser=/usr/bin/chromium
say() { echo "ensure-chromium: $*" >&2; }
die() { say "$*"; exit 1; }
[ -x "$browser" ] && exit 0
command -v apt-get >/dev/null || die "$browser is missing and there is no apt-get to install it"
[ "$(id -u)" = 0 ] || die "$browser is missing; install it as root: apt-get install -y chromium"
# Two checkouts at once must not run apt-get over each other: the first installs, the other
# waits and finds it installed.
exec 9> /tmp/quipu-chromium-install.lock
flock -w 900 9 || die "another run has been installing Chromium for 15 minutes"
[ -x "$browser" ] && exit 0
say "installing Debian's chromium package for the console's browser tests"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || die "apt-get update failed (is the network up?)"
apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >&2 || die "apt-get install chromium failed"
[ -x "$browser" ] || die "the chromium package did not install $browser"
say "$("$browser" --version 2>/dev/null || echo chromium) installed"
