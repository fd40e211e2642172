#!/usr/bin/env bash
# shoot.sh drives the real bonsai chat in tmux and turns what the terminal
# shows into screenshots/*.png: tmux capture-pane -e keeps the colours,
# freeze renders the ANSI text to SVG, rsvg-convert rasterises it (freeze's
# own PNG output crashes under Go 1.26).
#
# Usage: tools/screenshots/shoot.sh [MODEL.gguf]
#   MODEL defaults to $BONSAI_MODEL, else a tiny synthetic model written by
#   'bonsai synth' (random weights: the text is noise, the layout is real).
#   Its vocabulary is cut to Qwen's first 8000 tokens, which are Latin
#   script: the SVG renderer has no terminal cell grid, so CJK or emoji in
#   random output would shift every column after them.
#   BONSAI_BIN=path uses that bonsai binary instead of building one.
# Needs: tmux, rsvg-convert and the JetBrains Mono font (apt: tmux
# librsvg2-bin fonts-jetbrains-mono; rsvg ignores the font freeze embeds, and
# a proportional fallback font misaligns every column), and Go (for bonsai
# and freeze). Conversations and settings go to a temporary XDG tree, never
# to the user's own.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/screenshots"
work=$(mktemp -d)
socket="bonsai-shots-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$out"

for tool in tmux rsvg-convert go fc-list; do
	command -v "$tool" >/dev/null || { echo "shoot.sh: $tool is missing (apt-get install tmux librsvg2-bin fontconfig)" >&2; exit 1; }
done
[[ $(fc-list : family) == *"JetBrains Mono"* ]] || { echo "shoot.sh: install fonts-jetbrains-mono" >&2; exit 1; }

echo "building bonsai and freeze…"
if [[ -n "${BONSAI_BIN:-}" ]]; then # a bonsai binary already built
	cp "$BONSAI_BIN" "$work/bonsai"
else
	(cd "$root" && go build -o "$work/bonsai" ./cmd/bonsai)
fi
GOBIN="$work/bin" go install github.com/charmbracelet/freeze@v0.2.2
freeze="$work/bin/freeze"

model=${1:-${BONSAI_MODEL:-}}
if [[ -z "$model" ]]; then
	model="$work/tiny.gguf"
	"$work/bonsai" synth --shape tiny --type q1_0 --vocab 8000 -o "$model" >/dev/null
fi

# One conversation database for every shot (the session list shows them);
# UI state (open panels) per shot, so each starts as a first run does.
export XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config"
tmux_() { tmux -L "$socket" "$@"; }

# start NAME WIDTH HEIGHT [ENV=VALUE...] opens bonsai in a fresh tmux session.
start() {
	local name=$1 w=$2 h=$3
	shift 3
	tmux_ kill-session -t "$name" 2>/dev/null || true
	tmux_ new-session -d -s "$name" -x "$w" -y "$h" \
		env TERM=xterm-256color COLORTERM=truecolor XDG_STATE_HOME="$work/state-$name" "$@" \
		"$work/bonsai" --model "$model" --backend cpu --ctx 4096
	wait_for "$name" "ready"
}

# wait_for, keys, ask and shot.
. "$root/tools/screenshots/lib.sh"

# A chat: two turns, the second stopped mid-reply.
start chat 100 30
ask chat "Hello! Who are you?" 2
ask chat "Give me a verse about light." 2
ask chat "Read me a passage from the Psalms." 0.15
shot chat chat

# Both panels beside the conversation, with live profile numbers.
keys chat F2
keys chat F3
ask chat "Another verse, please." 2
tmux_ resize-window -t chat -x 140 -y 36 2>/dev/null || true
shot chat panels

# Help overlay.
keys chat F1
shot chat help
keys chat Escape

# Switch backend live (falls back with an error where there is no GPU).
keys chat -l "/backend gpu"
keys chat Enter
sleep 4
shot chat backend-switch

# Saved chats: start two more, then open the list.
keys chat C-n
ask chat "What is the first verse of Genesis?" 2
keys chat C-n
ask chat "Tell me a saying of the Buddha." 2
keys chat F4
wait_for chat "Saved chats"
shot chat sessions
keys chat Escape
tmux_ kill-session -t chat

# 60 columns, profiling panel stacked under the conversation.
start narrow 60 24
keys narrow F3
ask narrow "Give me a verse about the sea." 2
shot narrow narrow

# Light background, and NO_COLOR.
start light 100 26 BONSAI_THEME=light
ask light "Who are you?" 2
shot light light "#FAFAFA"
start nocolor 100 26 NO_COLOR=1
ask nocolor "Give me a proverb." 2
shot nocolor no-color
