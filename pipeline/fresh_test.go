package pipeline

import (
	"fmt"
	"testing"
)

// TestFreshFilter: every URI added is reported; of URIs never added, few
// are (the filter's false positives, which cost a lookup, nothing else).
func TestFreshFilter(t *testing.T) {
	for _, n := range []int{1, 1000, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFreshFilter()
			for i := range n {
				f.add(fmt.Sprintf("http://example.org/r/%d", i))
			}
			for i := range n {
				if u := fmt.Sprintf("http://example.org/r/%d", i); !f.mayHold(u) {
					t.Fatalf("%s added but not reported", u)
				}
			}
			wrong := 0
			for i := range 100_000 {
				if f.mayHold(fmt.Sprintf("http://example.org/other/%d", i)) {
					wrong++
				}
			}
			if wrong > 100 { // well above the expected rate at 100,000 URIs (about 3 in 100,000)
				t.Errorf("%d of 100,000 URIs never added reported", wrong)
			}
		})
	}
}
