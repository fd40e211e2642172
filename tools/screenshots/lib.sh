# lib.sh: the helpers shoot.sh and session.sh share. The caller sets
# tmux_ (tmux on its own socket), work (a scratch directory), freeze (the
# freeze binary) and out (where PNGs go).

# wait_for NAME REGEX [TENTHS] waits until the pane shows REGEX (20 s, or
# TENTHS tenths of a second, at most).
wait_for() {
	for _ in $(seq "${3:-200}"); do
		if tmux_ capture-pane -p -t "$1" | grep -qE -- "$2"; then return 0; fi
		sleep 0.1
	done
	echo "shoot.sh: $1 never showed \"$2\"; the pane shows:" >&2
	tmux_ capture-pane -p -t "$1" >&2
	exit 1
}

keys() { tmux_ send-keys -t "$@"; }

# ask NAME PROMPT [SECONDS] sends a prompt and, if the reply is still
# streaming after SECONDS, stops it with Esc (a random synthetic model never
# ends its replies; the default model usually does, well before).
ask() {
	keys "$1" -l "$2"
	keys "$1" Enter
	sleep "${3:-1.5}"
	if ! tmux_ capture-pane -p -t "$1" | grep -q "✓ ready"; then
		keys "$1" Escape
	fi
	wait_for "$1" "✓ ready"
}

# shot NAME FILE [BACKGROUND] captures the pane into screenshots/FILE.png.
shot() {
	local bg=${3:-#171717}
	sleep 0.5
	# tmux writes a style once for a line that wrapped onto the next (a
	# line as wide as the pane), and freeze starts each line unstyled: so
	# every line is given the styles in force where the one before ended.
	tmux_ capture-pane -e -p -t "$1" | perl -pe 'BEGIN { $s = "" } my $p = $s;
		for my $q (/\e\[[0-9;:]*m/g) { if ($q eq "\e[0m" || $q eq "\e[m") { $s = "" } else { $s .= $q } }
		$_ = $p . $_;' >"$work/$2.ansi"
	[[ -n "${TEXT_DIR:-}" ]] && cp "$work/$2.ansi" "$TEXT_DIR/"
	# Without escape sequences (NO_COLOR) freeze would guess a language.
	local lang=()
	grep -q $'\e' "$work/$2.ansi" || lang=(--language text)
	"$freeze" --window --padding 20,20 --margin 0 --background "$bg" --font.family "JetBrains Mono" \
		"${lang[@]}" -o "$work/$2.svg" <"$work/$2.ansi" >/dev/null
	rsvg-convert -o "$out/$2.png" "$work/$2.svg"
	echo "wrote screenshots/$2.png"
}

