package tui

import (
	"sync"

	tea "github.com/charmbracelet/bubbletea"
)

// background runs the chat's storage work (database writes, the state
// file) one job at a time and in order, off the UI goroutine, so Update
// never waits on a disk. Jobs return a message for the UI, or nil.
type background struct {
	mu      sync.Mutex
	queue   []func() tea.Msg
	closing bool

	wake     chan struct{}
	out      chan tea.Msg
	stopping chan struct{} // closed by Close: results are no longer read
	done     chan struct{}
}

func newBackground() *background {
	b := &background{
		wake:     make(chan struct{}, 1),
		out:      make(chan tea.Msg, 64),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.loop()
	return b
}

// Do queues a job. It never blocks; jobs queued after Close are dropped.
func (b *background) Do(job func() tea.Msg) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return
	}
	b.queue = append(b.queue, job)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *background) loop() {
	defer close(b.done)
	for {
		b.mu.Lock()
		jobs := b.queue
		b.queue = nil
		closing := b.closing
		b.mu.Unlock()
		for _, job := range jobs {
			if msg := job(); msg != nil {
				select {
				case b.out <- msg:
				case <-b.stopping:
				}
			}
		}
		if len(jobs) > 0 {
			continue
		}
		if closing {
			return
		}
		<-b.wake
	}
}

// Close runs the jobs already queued, then stops. Their results are dropped:
// the UI has gone.
func (b *background) Close() {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		<-b.done
		return
	}
	b.closing = true
	b.mu.Unlock()
	close(b.stopping)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.done
}

// waitForBackground delivers the next job result to the UI.
func waitForBackground(out <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg { return <-out }
}
