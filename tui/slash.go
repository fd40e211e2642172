package tui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// slashCommand is one /command: its name, the arguments it completes, and
// what the help overlay says about it.
type slashCommand struct {
	name    string
	args    []string // completable arguments, if any
	usage   string
	summary string
}

var slashCommands = []slashCommand{
	{name: "new", summary: "start a new chat"},
	{name: "clear", summary: "new session, same system prompt"},
	{name: "sessions", summary: "saved chats: open, rename, delete"},
	{name: "system", usage: "[text|none]", summary: "show, set or remove the prompt"},
	{name: "think", args: []string{"on", "off"}, usage: "on|off", summary: "reasoning before answers"},
	{name: "backend", args: []string{"cpu", "gpu", "auto"}, usage: "[cpu|gpu|auto]", summary: "where it runs and why; reload"},
	{name: "model", usage: "[NAME|FILE]", summary: "pick from a list, or load one"},
	{name: "export", usage: "[file.md|.json]", summary: "write this chat to a file"},
	{name: "file", usage: "PATH|none", summary: "attach a text file (or type @PATH)"},
	{name: "copy", usage: "[N]", summary: "copy the last reply or code block N"},
	{name: "regen", summary: "regenerate the last reply"},
	{name: "edit", summary: "edit the last prompt"},
	{name: "profile", summary: "show or hide the profiling panel"},
	{name: "panel", args: []string{"backend", "profile"}, usage: "backend|profile", summary: "show or hide a panel"},
	{name: "set", args: settingNames(), usage: "NAME VALUE", summary: "sampling, max_tokens for this chat"},
	{name: "show", summary: "settings in force, from where"},
	{name: "help", summary: "keys and commands"},
	{name: "quit", summary: "leave bonsai"},
}

func findSlash(name string) (slashCommand, bool) {
	for _, c := range slashCommands {
		if c.name == name {
			return c, true
		}
	}
	return slashCommand{}, false
}

// parseSlash splits "/name rest" into name and the trimmed rest. ok is false
// when the text is not a command (no leading slash, or "//" to send a
// message that starts with a slash).
func parseSlash(text string) (name, arg string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") || strings.HasPrefix(text, "//") {
		return "", "", false
	}
	name, arg, _ = strings.Cut(text[1:], " ")
	return strings.ToLower(name), strings.TrimSpace(arg), true
}

// completions returns what the text being typed can complete to: command
// names while the first word is typed, then the command's arguments.
func completions(text string) []string {
	if !strings.HasPrefix(text, "/") || strings.ContainsAny(text, "\n") || strings.HasPrefix(text, "//") {
		return nil
	}
	name, arg, hasArg := strings.Cut(text[1:], " ")
	var out []string
	if !hasArg {
		for _, c := range slashCommands {
			if strings.HasPrefix(c.name, strings.ToLower(name)) {
				out = append(out, "/"+c.name)
			}
		}
		return out
	}
	c, ok := findSlash(strings.ToLower(name))
	if !ok || strings.Contains(arg, " ") {
		return nil
	}
	for _, a := range c.args {
		if strings.HasPrefix(a, strings.ToLower(arg)) {
			out = append(out, "/"+c.name+" "+a)
		}
	}
	return out
}

// complete extends text to the longest common prefix of its completions,
// adding a space when exactly one command matches and takes arguments.
func complete(text string) string {
	cands := completions(text)
	if len(cands) == 0 {
		return text
	}
	sort.Strings(cands)
	prefix := cands[0]
	for _, c := range cands[1:] {
		for !strings.HasPrefix(c, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if len(cands) == 1 && !strings.Contains(prefix, " ") {
		if c, ok := findSlash(prefix[1:]); ok && (len(c.args) > 0 || c.usage != "") {
			prefix += " "
		}
	}
	if len(prefix) < len(text) {
		return text
	}
	return prefix
}

// completionHint is the line shown under the input while a command is typed.
func completionHint(text string) string {
	cands := completions(text)
	if len(cands) == 0 {
		return ""
	}
	if len(cands) == 1 || strings.Contains(text, " ") {
		name, _, _ := strings.Cut(strings.TrimPrefix(cands[0], "/"), " ")
		if c, ok := findSlash(name); ok {
			return strings.TrimSpace("/"+c.name+" "+c.usage) + " — " + c.summary
		}
	}
	return strings.Join(cands, "  ")
}

// slashPopup lists the commands the text being typed can become, one line
// each with its arguments and summary, for the bottom of the main area:
// typing "/" shows them all, each letter narrows them, and tab completes.
// It is empty once the command's name is done (a space typed).
func slashPopup(st *Styles, text string, width, rows int) []string {
	if strings.Contains(text, " ") || rows < 2 {
		return nil
	}
	cands := completions(text)
	if len(cands) == 0 {
		return nil
	}
	cmds := make([]slashCommand, 0, len(cands))
	col := 0
	for _, c := range cands {
		sc, _ := findSlash(strings.TrimPrefix(c, "/"))
		cmds = append(cmds, sc)
		col = max(col, len(strings.TrimSpace("/"+sc.name+" "+sc.usage)))
	}
	more := 0
	if len(cmds) > rows-1 {
		more = len(cmds) - (rows - 2)
		cmds = cmds[:rows-2]
	}
	lines := []string{st.Dim.Render("commands · tab completes · // sends a message starting with /")}
	for _, c := range cmds {
		name := strings.TrimSpace("/" + c.name + " " + c.usage)
		lines = append(lines, "  "+st.HelpKey.Render(name)+strings.Repeat(" ", col-len(name)+2)+st.HelpDesc.Render(c.summary))
	}
	if more > 0 {
		lines = append(lines, st.Dim.Render(fmt.Sprintf("  … %d more: type on to narrow", more)))
	}
	for i, l := range lines {
		l = truncate(l, width)
		lines[i] = l + strings.Repeat(" ", max(width-lipgloss.Width(l), 0))
	}
	return lines
}

// maxPopupRows bounds the command popup, so that it never hides the whole
// conversation.
const maxPopupRows = 12

// overlayBottom replaces the last lines of block (which has at least that
// many) with lines.
func overlayBottom(block string, lines []string) string {
	if len(lines) == 0 {
		return block
	}
	rows := strings.Split(block, "\n")
	n := min(len(lines), len(rows))
	for i := range n {
		rows[len(rows)-n+i] = sgrReset + lines[len(lines)-n+i]
	}
	return strings.Join(rows, "\n")
}
