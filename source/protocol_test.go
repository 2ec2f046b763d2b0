package source_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/protocols"
)

// TestRegistry checks how a protocol is chosen: by name, or with auto by
// the first probe that says yes, else the fallback (the protocol without a
// probe); a failing probe only means "not this one".
func TestRegistry(t *testing.T) {
	probe := func(ok bool, err error) func(context.Context, *fetch.Client, string) (bool, error) {
		return func(context.Context, *fetch.Client, string) (bool, error) { return ok, err }
	}
	newer := func(source.Settings, source.Services) (source.Planner, error) { return nil, nil }
	reg := func(probes ...func(context.Context, *fetch.Client, string) (bool, error)) source.Registry {
		r := source.Registry{{Name: "fallback", Help: "f", New: newer}}
		for i, p := range probes {
			r = append(r, source.Protocol{Name: string(rune('a' + i)), Help: "p", New: newer, Probe: p})
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		reg    source.Registry
		ask    string
		want   string
		errHas string
	}{
		{"by name", reg(probe(true, nil)), "fallback", "fallback", ""},
		{"unknown name", reg(), "gopher", "", `no such protocol "gopher"`},
		{"auto, first probe that answers", reg(probe(false, nil), probe(true, nil), probe(true, nil)), "auto", "b", ""},
		{"auto, a failing probe is not an answer", reg(probe(true, errors.New("refused")), probe(true, nil)), "auto", "b", ""},
		{"auto, no probe answers: the fallback", reg(probe(false, nil)), "auto", "fallback", ""},
		{"auto, no fallback", source.Registry{{Name: "a", New: newer, Probe: probe(false, nil)}}, "auto", "", "no protocol answers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.reg.Choose(context.Background(), tc.ask, nil, "http://127.0.0.1:1/")
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one saying %q", err, tc.errHas)
				}
				return
			}
			if err != nil || p.Name != tc.want {
				t.Fatalf("Choose = %q, %v; want %q", p.Name, err, tc.want)
			}
		})
	}
	t.Run("a cancelled probe ends the choice", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := reg(probe(false, context.Canceled)).Choose(ctx, "auto", nil, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

// TestProtocols checks the registry rsharvest ships: every protocol has a
// name, help and planner, names are unique, and ResourceSync is the
// fallback of auto.
func TestProtocols(t *testing.T) {
	reg := protocols.All()
	names := reg.Names()
	// ResourceSync first, then each protocol with a probe; no name twice.
	if len(names) < 3 || names[0] != "resourcesync" || !slices.Contains(names, "oai-pmh") || !slices.Contains(names, "harvest-list") {
		t.Fatalf("names %v", names)
	}
	if sorted := slices.Compact(slices.Sorted(slices.Values(names))); len(sorted) != len(names) {
		t.Fatalf("a name twice: %v", names)
	}
	for _, p := range reg[1:] {
		if p.Probe == nil {
			t.Errorf("%s has no probe: only the fallback may lack one", p.Name)
		}
	}
	for _, p := range reg {
		if p.Name == "" || p.Help == "" || p.New == nil {
			t.Errorf("protocol %+v lacks a name, help or planner", p)
		}
		if _, err := p.New(source.Settings{}, source.Services{}); err != nil {
			t.Errorf("%s: New with default settings: %v", p.Name, err)
		}
	}
	if p, _ := reg.Lookup("resourcesync"); p.Probe != nil {
		t.Error("resourcesync has a probe: auto would have no fallback")
	}
	if !strings.Contains(reg.Help(), "oai-pmh (") || !strings.Contains(reg.Help(), "harvest-list (") {
		t.Errorf("help %q", reg.Help())
	}
	if p, _ := reg.Lookup("resourcesync"); p.New != nil {
		if _, err := p.New(source.Settings{Sets: []string{"a", "b"}}, source.Services{}); err == nil {
			t.Error("resourcesync took two sets")
		}
	}
}
