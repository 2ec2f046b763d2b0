package pipeline

import (
	"slices"
	"testing"

	"github.com/rsharvest/rsharvest/source"
)

// TestProgressOrder: a mark is ready only once every unit emitted before
// it has committed, whatever order units commit in, and each mark is
// ready once, in the order marks were emitted; a temporary failure of a
// unit emitted before a mark drops it, one after it does not.
func TestProgressOrder(t *testing.T) {
	type step struct {
		op   string // "unit" (emit one, named by its index), "mark", "commit" (units by index), "fail" (a unit by index, or none)
		arg  []int
		want []string // the keys of the marks ready after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a mark after committed units", []step{{"unit", nil, nil}, {"unit", nil, nil}, {"commit", []int{0, 1}, nil}, {"mark", nil, []string{"m0"}}}},
		{"a mark waits for its units", []step{{"unit", nil, nil}, {"mark", nil, nil}, {"commit", []int{0}, []string{"m0"}}}},
		{"a later unit does not hold an earlier mark", []step{{"unit", nil, nil}, {"mark", nil, nil}, {"unit", nil, nil}, {"commit", []int{0}, []string{"m0"}}}},
		{"an earlier unit holds a later mark", []step{{"unit", nil, nil}, {"mark", nil, nil}, {"unit", nil, nil}, {"mark", nil, nil}, {"commit", []int{1}, nil}, {"commit", []int{0}, []string{"m0", "m1"}}}},
		{"no units", []step{{"mark", nil, []string{"m0"}}, {"mark", nil, []string{"m1"}}}},
		{"nothing twice", []step{{"mark", nil, []string{"m0"}}, {"unit", nil, nil}, {"commit", []int{0}, nil}}},
		{"a failure before a mark drops it", []step{{"unit", nil, nil}, {"fail", []int{0}, nil}, {"mark", nil, nil}, {"commit", []int{0}, nil}, {"mark", nil, nil}}},
		{"a failure after a mark does not", []step{{"unit", nil, nil}, {"mark", nil, nil}, {"unit", nil, nil}, {"fail", []int{1}, nil}, {"commit", []int{1, 0}, []string{"m0"}}, {"mark", nil, nil}}},
		{"a failure of no known unit drops every later mark", []step{{"mark", nil, []string{"m0"}}, {"fail", nil, nil}, {"mark", nil, nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p progress
			var eps []*epoch
			marks := 0
			for i, s := range tt.steps {
				switch s.op {
				case "unit":
					eps = append(eps, p.enter())
				case "mark":
					p.mark(source.Mark{Key: "m" + string(rune('0'+marks))})
					marks++
				case "fail":
					var e *epoch
					if len(s.arg) > 0 {
						e = eps[s.arg[0]]
					}
					p.fail(e, "")
				case "commit":
					var es []*epoch
					for _, j := range s.arg {
						es = append(es, eps[j])
					}
					p.leave(es)
				}
				var got []string
				for _, m := range p.ready() {
					got = append(got, m.Key)
				}
				if !slices.Equal(got, s.want) {
					t.Errorf("step %d (%s): ready %v, want %v", i, s.op, got, s.want)
				}
			}
		})
	}
}
