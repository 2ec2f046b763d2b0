package status_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/status"
)

// TestRunPageBoundsFailures: a run's page lists its first failures, not
// all of them (a run may fail as many resources as it has), and says how
// many more there are and where they are all listed.
func TestRunPageBoundsFailures(t *testing.T) {
	ctx := t.Context()
	st := fixture(t)
	for _, tc := range []struct {
		failures, rows, more int
	}{
		{3, 3, 0},
		{1000, 1000, 0},
		{1205, 1000, 205},
	} {
		t.Run(strconv.Itoa(tc.failures), func(t *testing.T) {
			id, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://many.example/", Site: "many", Started: time.Now().Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			fs := make([]state.Failure, tc.failures)
			for i := range fs {
				fs[i] = state.Failure{RunID: id, URI: fmt.Sprintf("http://many.example/r%05d", i), Stage: "download", Error: "HTTP 500"}
			}
			if err := st.AddFailures(ctx, fs); err != nil {
				t.Fatal(err)
			}
			h, err := status.Handler(status.Options{Store: st, Operator: status.Credentials{Token: "t"}})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/run/%d", id), nil)
			req.Header.Set("Authorization", "Bearer t")
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /run/%d: %d", id, rec.Code)
			}
			if n := strings.Count(body, "http://many.example/r"); n != tc.rows {
				t.Errorf("%d failures listed, want %d", n, tc.rows)
			}
			more := fmt.Sprintf("… and %d more: <code>rsharvest log --site many</code>", tc.more)
			if got := strings.Contains(body, more); got != (tc.more > 0) || (tc.more == 0 && strings.Contains(body, "more-failures")) {
				t.Errorf("page says %q: %v, want %v", more, got, tc.more > 0)
			}
		})
	}
}
