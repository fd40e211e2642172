package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// SSE writes server-sent events: each value a "data:" line of JSON,
// flushed at once so that a client sees every token as it comes.
type SSE struct {
	w http.ResponseWriter
	f http.Flusher
}

// NewSSE sets the event-stream headers on w.
func NewSSE(w http.ResponseWriter) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &SSE{w: w, f: f}
}

// Send writes one event holding v as JSON.
func (s *SSE) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(b)
}

// Done writes the closing "data: [DONE]".
func (s *SSE) Done() error { return s.raw([]byte("[DONE]")) }

func (s *SSE) raw(b []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(b) + 8)
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	if _, err := s.w.Write(buf.Bytes()); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}

// EventReader reads the data of server-sent events. Comment lines (": ping",
// which llama-server sends to keep a connection alive), event names and ids
// are skipped; the data lines of one event are joined with newlines.
type EventReader struct {
	r *bufio.Reader
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ErrEventTooLong is an event line beyond the reader's limit.
var ErrEventTooLong = fmt.Errorf("openai: event line over %d bytes", maxEventLine)

const maxEventLine = 8 << 20

// Next returns the next event's data; io.EOF at the end of the stream. A
// last event the stream ends without its blank line is still returned.
func (e *EventReader) Next() (string, error) {
	var data []string
	for {
		line, err := e.line()
		if err != nil {
			if err == io.EOF && len(data) > 0 {
				return strings.Join(data, "\n"), nil
			}
			return "", err
		}
		switch {
		case line == "":
			if len(data) > 0 {
				return strings.Join(data, "\n"), nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

func (e *EventReader) line() (string, error) {
	var b []byte
	for {
		part, isPrefix, err := e.r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, part...)
		if len(b) > maxEventLine {
			return "", ErrEventTooLong
		}
		if !isPrefix {
			return string(b), nil
		}
	}
}
