package infer_test

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

func TestParseKVType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want infer.KVType
		err  bool
	}{
		{"f16", infer.KVF16, false},
		{"F16", infer.KVF16, false},
		{"q8_0", infer.KVQ8_0, false},
		{" Q8_0 ", infer.KVQ8_0, false},
		{"q4_0", 0, true},
		{"", 0, true},
		{"f32", 0, true},
	} {
		got, err := infer.ParseKVType(tc.in)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("ParseKVType(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, infer.ErrKVType) {
			t.Errorf("ParseKVType(%q): %v does not wrap ErrKVType", tc.in, err)
		}
		if err == nil && got.String() != infer.KVTypeNames[got] {
			t.Errorf("%v prints as %q", got, got.String())
		}
	}
}

func TestKVSpecBytes(t *testing.T) {
	base := infer.KVSpec{Layers: 28, Context: 4096, KVHeads: 8, HeadDim: 128}
	for _, tc := range []struct {
		types  infer.KVTypes
		perPos int64 // bytes of one position over the layers
	}{
		{infer.KVTypes{}, 28 * 8 * (256 + 256)},
		{infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}, 28 * 8 * (136 + 136)},
		{infer.KVTypes{K: infer.KVQ8_0}, 28 * 8 * (136 + 256)},
		{infer.KVTypes{V: infer.KVQ8_0}, 28 * 8 * (256 + 136)},
	} {
		s := base
		s.KVTypes = tc.types
		if got := s.BytesPerPosition(); got != tc.perPos {
			t.Errorf("%v: %d bytes per position, want %d", tc.types, got, tc.perPos)
		}
		if got := s.Bytes(); got != tc.perPos*4096 {
			t.Errorf("%v: %d bytes, want %d", tc.types, got, tc.perPos*4096)
		}
	}
}

func TestKVSpecCheck(t *testing.T) {
	for _, tc := range []struct {
		spec infer.KVSpec
		want error
	}{
		{infer.KVSpec{Layers: 2, Context: 16, KVHeads: 1, HeadDim: 128, KVTypes: infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}}, nil},
		{infer.KVSpec{Layers: 2, Context: 16, KVHeads: 1, HeadDim: 48}, nil},
		{infer.KVSpec{Layers: 2, Context: 16, KVHeads: 1, HeadDim: 48, KVTypes: infer.KVTypes{V: infer.KVQ8_0}}, infer.ErrUnsupportedType},
		{infer.KVSpec{Layers: 2, Context: 16, KVHeads: 1, HeadDim: 128, KVTypes: infer.KVTypes{K: 7}}, infer.ErrKVType},
		{infer.KVSpec{Layers: 0, Context: 16, KVHeads: 1, HeadDim: 128}, infer.ErrBadShape},
	} {
		err := tc.spec.Check()
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%+v: Check() = %v, want %v", tc.spec, err, tc.want)
		}
	}
}
