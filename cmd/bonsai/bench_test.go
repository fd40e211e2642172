package main

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestMeanStdDev(t *testing.T) {
	tests := []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{5}, 5, 0},
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3)}, // sample deviation, as llama-bench
		{[]float64{10, 10, 10}, 10, 0},
	}
	for _, tt := range tests {
		m, s := meanStdDev(tt.xs)
		if math.Abs(m-tt.mean) > 1e-12 || math.Abs(s-tt.std) > 1e-12 {
			t.Errorf("meanStdDev(%v) = %v, %v; want %v, %v", tt.xs, m, s, tt.mean, tt.std)
		}
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-p", "-1"},
		{"-r", "0"},
		{"-p", "0", "-n", "0"},
		{"--format", "xml"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if err := runBench(args, &out, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("bench %v: err = %v, want a usage error", args, err)
		}
	}
}
