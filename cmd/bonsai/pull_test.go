package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
)

func TestPullAndModels(t *testing.T) {
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen3")
	if err := w.AddTensor("blk.0.attn_q.weight", gguf.Q1_0, []int64{256, 4}, make([]byte, 18*8)); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := w.WriteTo(&file); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "x.gguf", time.Time{}, bytes.NewReader(file.Bytes()))
	}))
	defer srv.Close()
	dir := t.TempDir()

	var stdout, stderr bytes.Buffer
	if err := runPull([]string{"--dir", dir, srv.URL + "/tiny.gguf"}, &stdout, &stderr); err != nil {
		t.Fatalf("pull: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "tiny.gguf"))
	if err != nil || !bytes.Equal(got, file.Bytes()) {
		t.Fatalf("pulled file: %v", err)
	}
	if !strings.Contains(stdout.String(), "sha256 ") || !strings.Contains(stderr.String(), "100.0%") {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "not verified by hash") {
		t.Errorf("stderr %q: want a note that no hash verified the file", stderr.String())
	}
	// With --sha256, the hash vouches for it: no note.
	stderr.Reset()
	sum := sha256.Sum256(file.Bytes())
	if err := runPull([]string{"--dir", t.TempDir(), "--sha256", hex.EncodeToString(sum[:]), srv.URL + "/tiny.gguf"}, &stdout, &stderr); err != nil ||
		strings.Contains(stderr.String(), "not verified") {
		t.Errorf("pull --sha256: %v, stderr %q", err, stderr.String())
	}

	stdout.Reset()
	if err := runModels([]string{"--dir", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{"tiny.gguf", "q1_0×1", "Qwen3", "bonsai-8b", "available to pull"} {
		if !strings.Contains(out, want) {
			t.Errorf("models output lacks %q:\n%s", want, out)
		}
	}

	if err := runPull([]string{"--dir", dir, "no-such-model"}, &stdout, &stderr); err == nil {
		t.Error("unknown model pulled")
	}
	if err := runPull([]string{"--sha256", "xyz", "bonsai-8b"}, &stdout, &stderr); err == nil {
		t.Error("bad --sha256 accepted")
	}
}
