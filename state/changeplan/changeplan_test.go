package changeplan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"

	"github.com/rsharvest/rsharvest/source"
)

// TestPlanPages reads deletes, puts and failures out of a plan whatever
// the page size, in the order their keys give, each row once, even where
// Failures share a package and position.
func TestPlanPages(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	// Package 0 creates r0..r6; package 1 (later) deletes r1, r3, r5 and
	// updates r6, so r0, r2, r4 win in package 0, r6 in package 1.
	pkgs := []*source.Package{
		{URL: "http://example.org/p0.zip", From: at},
		{URL: "http://example.org/p1.zip", From: at.Add(time.Hour)},
	}
	var p0, p1 []*source.Record
	for i := range 7 {
		p0 = append(p0, &source.Record{URI: fmt.Sprintf("http://example.org/r%d", i), Change: source.Created, ChangeTime: at, Seq: int64(i)})
	}
	for i, u := range []int{5, 3, 1, 6} {
		c := source.Deleted
		if u == 6 {
			c = source.Updated
		}
		p1 = append(p1, &source.Record{URI: fmt.Sprintf("http://example.org/r%d", u), Change: c, ChangeTime: at.Add(time.Hour), Seq: int64(i)})
	}
	fails := []struct {
		pkg int
		seq int64
		uri string
	}{{1, 2, "f3"}, {0, -1, "f0"}, {1, 2, "f4"}, {0, 4, "f1"}, {1, -1, "f2"}}
	for _, size := range []int{1, 2, 3, 1000} {
		t.Run(fmt.Sprint("page size ", size), func(t *testing.T) {
			p, err := New(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.PageSize = size
			for i, recs := range [][]*source.Record{p0, p1} {
				if err := p.Add(ctx, pkgs[i], i, recs); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range fails {
				if err := p.Fail(ctx, f.pkg, f.seq, source.Failure{URI: f.uri, Err: errclass.NewPermanent(errors.New("x"))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Decide(ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			collect := func(pl Planned) error {
				got = append(got, fmt.Sprintf("%d:%s", pl.Pkg, pl.Rec.URI[len("http://example.org/"):]))
				return nil
			}
			if err := p.Deletes(ctx, collect); err != nil {
				t.Fatal(err)
			}
			for _, pkg := range []int{0, 1} {
				if err := p.PutsIn(ctx, pkg, collect); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Failures(ctx, func(f source.Failure) error {
				if !errclass.IsPermanent(f.Err) {
					t.Errorf("%s: class lost: %v", f.URI, f.Err)
				}
				got = append(got, f.URI)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := []string{"1:r1", "1:r3", "1:r5", "0:r0", "0:r2", "0:r4", "1:r6", "f0", "f1", "f2", "f3", "f4"}
			if !slices.Equal(got, want) {
				t.Errorf("read %v, want %v", got, want)
			}
		})
	}
}

// BenchmarkPlanDeletes reads 200,000 winning deletes out of a plan.
func BenchmarkPlanDeletes(b *testing.B) {
	ctx := context.Background()
	p, err := New(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]*source.Record, 200_000)
	for i := range recs {
		recs[i] = &source.Record{URI: fmt.Sprintf("http://example.org/r%07d", i), Change: source.Deleted, ChangeTime: at, Seq: int64(i)}
	}
	if err := p.Add(ctx, &source.Package{URL: "http://example.org/p.zip", From: at}, 0, recs); err != nil {
		b.Fatal(err)
	}
	if err := p.Decide(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		n := 0
		if err := p.Deletes(ctx, func(Planned) error { n++; return nil }); err != nil || n != len(recs) {
			b.Fatal(n, err)
		}
	}
}
