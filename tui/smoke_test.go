package tui

import (
	"fmt"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

func TestSmoke(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{Think: true}, 80, 24)
	fmt.Println(plain(m.View()))
	loaded(t, m, fe)
	typeText(m, "Hello there, *markdown*")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	fmt.Println(plain(m.View()))
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
	fmt.Println(plain(m.View()))
	m.Update(tea.WindowSizeMsg{Width: 130, Height: 30})
	fmt.Println(plain(m.View()))
	m.Update(tea.KeyMsg{Type: tea.KeyF1})
	fmt.Println(plain(m.View()))
}
