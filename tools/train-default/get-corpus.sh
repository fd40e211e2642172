#!/bin/sh
# Fetches the public-domain source texts of the default model's corpus from
# Debian packages (King James Bible; John Richards' 1993 Dhammapada, placed in
# the public domain) and dumps them as plain text into $1 (default
# /tmp/bonsai-corpus). Needs apt-get (no root: packages are only downloaded
# and unpacked, never installed).
set -eu
dest=${1:-/tmp/bonsai-corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
cd "$work"
apt-get download bible-kjv bible-kjv-text display-dhammapada >/dev/null
for deb in ./*.deb; do dpkg-deb -x "$deb" root; done
# One verse per line: "Book C" headings, then "  V text".
root/usr/bin/bible -l100000 -p root/usr/lib "gen1:1-rev22:21" >"$dest/kjv.txt"
cp root/usr/share/display-dhammapada/dhammapada-english-transl.txt "$dest/dhammapada.txt"
wc -l "$dest/kjv.txt" "$dest/dhammapada.txt"
