#!/usr/bin/env bash
# session.sh replays a new user's first session in tmux and writes
# screenshots/session-*.png for docs/terminal-sessions.md: a fresh clone,
# the README's two commands (the chat on the embedded model; ./test.sh only
# started and interrupted, the full suite is not run here), a ten-turn chat
# with --ctx 256, the /model picker, /copy inside tmux, ?, F4, and -c.
#
# Usage: tools/screenshots/session.sh [REPO]   (REPO: what to clone; default
#   this checkout). Plain-text captures go to $TEXT_DIR when it is set.
# Needs what shoot.sh needs (tmux, rsvg-convert, fonts-jetbrains-mono, Go).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
repo=${1:-$root}
out="$root/screenshots"
work=$(mktemp -d)
socket="bonsai-session-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
tmux_() { tmux -L "$socket" "$@"; }
. "$root/tools/screenshots/lib.sh"

GOBIN="$work/bin" go install github.com/charmbracelet/freeze@v0.2.2
freeze="$work/bin/freeze"

# A new user's machine: empty XDG directories, a shell with a short prompt
# (the environment is otherwise this one's, so that tmux's TMUX reaches bonsai),
# tmux passing OSC 52 on to the terminal's clipboard (set-clipboard on).
home="$work/home"
mkdir -p "$home"
cat >"$home/.bashrc" <<'RC'
PS1='$ '
RC
tmux_ -f /dev/null new-session -d -s s -x 100 -y 32 \
	env HOME="$home" TERM=xterm-256color COLORTERM=truecolor GOCACHE="$(go env GOCACHE)" \
	GOMODCACHE="$(go env GOMODCACHE)" XDG_DATA_HOME="$home/.local/share" \
	XDG_CONFIG_HOME="$home/.config" XDG_STATE_HOME="$home/.local/state" bash --rcfile "$home/.bashrc" -i
tmux_ set-option -g set-clipboard on
wait_for s '^\$ ?$'

text() { [[ -n "${TEXT_DIR:-}" ]] && tmux_ capture-pane -p -t s >"$TEXT_DIR/$1.txt" || true; }
snap() { text "$1"; shot s "$1"; }
sh_() { keys s -l "$1"; keys s Enter; }

# 1. A fresh clone and the README's first command.
sh_ "cd ~ && git clone -q $repo bonsai && cd bonsai && git log --oneline -1"
wait_for s '^\$ ?$' 600
sh_ "go run ./cmd/bonsai"
wait_for s "✓ ready" 1800
ask s "Hello! Who are you?" 3
snap session-1-first-chat
keys s C-c
keys s C-c
wait_for s '^\$ ?$'

# 2. The README's second command, started and interrupted after a few seconds.
keys s C-l
sh_ "./test.sh"
for _ in $(seq 120); do # until its first checks run, a minute at most
	tmux_ capture-pane -p -t s | grep -q "== go vet" && break
	sleep 0.5
done
sleep 3
snap session-2-test-start
keys s C-c
wait_for s '^\$ ?$' 300
keys s C-l

# 3. Ten turns in a 256-token context: the oldest turns are left out, said so.
sh_ "go run ./cmd/bonsai --ctx 256"
wait_for s "✓ ready" 600
for p in "Who are you?" "Give me a verse about light." "And one about the sea." "What is love?" \
	"Tell me of David." "Who was Moses?" "A saying of the Buddha, please." "What is wisdom?" \
	"Sing of the morning." "Bless me before I go."; do
	ask s "$p" 4
done
snap session-3-ctx256

# 4. /model: the picker (a synthetic model dropped into the models directory
# gives it something to load).
mkdir -p "$home/.local/share/bonsai/models"
go run "$root/cmd/bonsai" synth --shape tiny --type q1_0 --vocab 8000 -o "$home/.local/share/bonsai/models/synth-tiny.gguf" >/dev/null
keys s -l "/model"
keys s Enter
wait_for s "enter load"
snap session-4-model-picker
keys s Escape

# 5. /copy inside tmux: the status line says where it went; tmux's buffer
# holds it (set-clipboard on makes tmux take OSC 52 into its buffers).
keys s -l "/copy"
keys s Enter
sleep 0.3
snap session-5-copy
tmux_ show-buffer >"$work/buffer.txt" 2>/dev/null || echo "(no tmux buffer)" >"$work/buffer.txt"
[[ -n "${TEXT_DIR:-}" ]] && cp "$work/buffer.txt" "$TEXT_DIR/session-5-tmux-buffer.txt"

# 6. ? on the empty input: help. 7. F4: the saved chats.
keys s -l "?"
wait_for s "Keys"
snap session-6-help
keys s Escape
keys s F4
wait_for s "Saved chats"
snap session-7-sessions
keys s Escape

# 8. Quit, and resume with -c.
keys s C-c
keys s C-c
wait_for s '^\$ ?$'
keys s C-l
sh_ "go run ./cmd/bonsai -c"
wait_for s "✓ ready" 600
snap session-8-resume
keys s C-c
keys s C-c
