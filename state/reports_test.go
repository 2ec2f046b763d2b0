package state

import (
	"context"
	"testing"
)

// TestReportClaims: a report is claimed once; a released claim can be
// taken again, a sent one never.
func TestReportClaims(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	steps := []struct {
		do   func() (bool, error)
		want bool
	}{
		{func() (bool, error) { return s.ClaimReport(ctx, "a") }, true},
		{func() (bool, error) { return s.ClaimReport(ctx, "a") }, false},
		{func() (bool, error) { return true, s.ReleaseReport(ctx, "a") }, true},
		{func() (bool, error) { return s.ClaimReport(ctx, "a") }, true},
		{func() (bool, error) { return true, s.ReportSent(ctx, "a") }, true},
		{func() (bool, error) { return true, s.ReleaseReport(ctx, "a") }, true},
		{func() (bool, error) { return s.ClaimReport(ctx, "a") }, false},
		{func() (bool, error) { return s.ClaimReport(ctx, "b") }, true},
	}
	for i, st := range steps {
		got, err := st.do()
		if err != nil || got != st.want {
			t.Errorf("step %d: %v, %v; want %v", i, got, err, st.want)
		}
	}
}
