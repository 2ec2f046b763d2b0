package solrtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// call sends a request and decodes the JSON answer.
func call(t *testing.T, method, u, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("answer is not JSON: %v: %s", err, data)
		}
	}
	return resp.StatusCode, m
}

func update(t *testing.T, s *Server, query, body string) (int, map[string]any) {
	t.Helper()
	return call(t, http.MethodPost, s.URL()+"/update?"+query, "application/json", body)
}

func errMsg(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	msg, _ := e["msg"].(string)
	return msg
}

func TestUpdateShapes(t *testing.T) {
	s := New(t, Options{})
	tests := []struct {
		name, query, ctype, body string
		status                   int
		msg                      string
	}{
		{"array of docs", "wt=json", "application/json", `[{"id":"a","length":1},{"id":"b"}]`, 200, ""},
		{"commands in order", "", "application/json", `{"add":{"doc":{"id":"c"}},"delete":{"id":"c"},"add":{"doc":{"id":"d"},"commitWithin":5}}`, 200, ""},
		{"delete forms", "", "text/json; charset=utf-8", `{"delete":"x","delete":["y","z"]}`, 200, ""},
		{"commit command", "", "application/json", `{"commit":{}}`, 200, ""},
		{"empty body with commit", "commit=true&wt=json", "", "", 200, ""},
		{"unknown field", "", "application/json", `[{"id":"e","title":"x"}]`, 400, "ERROR: [doc=e] unknown field 'title'"},
		{"missing id", "", "application/json", `[{"md5":"x"}]`, 400, "missing mandatory uniqueKey field: id"},
		{"two values, single-valued", "", "application/json", `[{"id":"f","md5":["a","b"]}]`, 400, "multiple values encountered for non multiValued field md5"},
		{"multi-valued", "", "application/json", `[{"id":"g","links":["a","b"]}]`, 200, ""},
		{"bad long", "", "application/json", `[{"id":"h","length":"x"}]`, 400, "For input string"},
		{"bad date", "", "application/json", `[{"id":"h","lastmod":"2013-01-02"}]`, 400, "Invalid Date String"},
		{"local date", "", "application/json", `[{"id":"h","lastmod":"2013-01-02T10:00:00+01:00"}]`, 400, "Invalid Date String"},
		{"bad base64", "", "application/json", `[{"id":"h","body":"!!"}]`, 400, "invalid base64"},
		{"immense term", "", "application/json", `[{"id":"` + strings.Repeat("i", MaxTermBytes+1) + `"}]`, 400, "immense term"},
		{"wrong content type", "", "application/x-www-form-urlencoded", `[{"id":"h"}]`, 400, "Unsupported ContentType"},
		{"unknown command", "", "application/json", `{"upsert":{}}`, 400, "Unknown command 'upsert'"},
		{"unknown parameter", "commitwithin=5", "application/json", `[]`, 400, "unknown /update parameter"},
		{"bad commitWithin", "commitWithin=soon", "application/json", `[]`, 400, "For input string"},
		{"xml writer", "wt=xml", "application/json", `[]`, 400, "unsupported wt"},
		{"not JSON", "", "application/json", `<add/>`, 400, "Cannot parse"},
		{"delete by query", "", "application/json", `{"delete":{"query":"md5:x"}}`, 400, "only *:*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := call(t, http.MethodPost, s.URL()+"/update?"+tt.query, tt.ctype, tt.body)
			if status != tt.status || !strings.Contains(errMsg(m), tt.msg) {
				t.Fatalf("status %d, msg %q; want %d, %q", status, errMsg(m), tt.status, tt.msg)
			}
			hdr, _ := m["responseHeader"].(map[string]any)
			if hdr == nil || hdr["status"] != float64(map[bool]int{true: 0, false: tt.status}[tt.status == 200]) {
				t.Errorf("responseHeader = %v", m["responseHeader"])
			}
			if tt.status != 200 && m["error"].(map[string]any)["code"] != float64(tt.status) {
				t.Errorf("error.code = %v", m["error"])
			}
		})
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "d": true, "g": true, "x": false} {
		if _, ok := s.Live(id); ok != want {
			t.Errorf("%s in the index = %t, want %t", id, ok, want)
		}
	}
	if status, _ := call(t, http.MethodGet, s.URL()+"/update", "", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /update: status %d, want 405", status)
	}
}

func TestPartialApplication(t *testing.T) {
	s := New(t, Options{})
	s.Reject("b", "no")
	status, m := update(t, s, "", `[{"id":"a"},{"id":"b"},{"id":"c"}]`)
	if status != 400 || !strings.Contains(errMsg(m), "[doc=b]") {
		t.Fatalf("status %d, %q", status, errMsg(m))
	}
	_, a := s.Live("a")
	_, c := s.Live("c")
	if !a || c {
		t.Errorf("a applied %t, c applied %t; want the commands before the bad one applied, as Solr does", a, c)
	}
}

func TestVisibility(t *testing.T) {
	s := New(t, Options{})
	update(t, s, "commitWithin=1000", `[{"id":"a"}]`)
	if _, ok := s.Visible("a"); ok {
		t.Fatal("visible before commitWithin")
	}
	s.Advance(999 * time.Millisecond)
	if _, ok := s.Visible("a"); ok {
		t.Fatal("visible 1 ms before commitWithin")
	}
	s.Advance(time.Millisecond)
	if _, ok := s.Visible("a"); !ok {
		t.Fatal("not visible once commitWithin passed")
	}
	update(t, s, "", `[{"id":"b"}]`)
	s.Advance(time.Hour)
	if _, ok := s.Visible("b"); ok {
		t.Fatal("an update without commitWithin became visible without a commit")
	}
	update(t, s, "softCommit=true", "")
	if _, ok := s.Visible("b"); !ok {
		t.Fatal("not visible after a soft commit")
	}
	update(t, s, "", `{"delete":"b"}`)
	if _, ok := s.Visible("b"); !ok {
		t.Fatal("a delete became visible without a commit")
	}
	update(t, s, "commit=true", "")
	if _, ok := s.Visible("b"); ok || s.Commits() != 2 {
		t.Fatalf("after commit: b visible %t, %d commits", ok, s.Commits())
	}
}

func TestSelect(t *testing.T) {
	s := New(t, Options{})
	var docs []string
	for i := range 25 {
		docs = append(docs, fmt.Sprintf(`{"id":"doc%02d","length":%d,"md5":"m%d"}`, i, i, i%2))
	}
	update(t, s, "commit=true", "["+strings.Join(docs, ",")+"]")

	form := url.Values{"q": {"{!term f=id v=$x}"}, "x": {"doc07"}, "fl": {"id,length"}, "wt": {"json"}}
	status, m := call(t, http.MethodPost, s.URL()+"/select", "application/x-www-form-urlencoded", form.Encode())
	resp, _ := m["response"].(map[string]any)
	if status != 200 || resp["numFound"] != float64(1) || fmt.Sprint(resp["docs"]) != "[map[id:doc07 length:7]]" {
		t.Fatalf("term query: %d %v", status, m)
	}

	// Cursor paging returns every id once, then the same mark.
	var seen []string
	cursor := "*"
	for range 10 {
		q := url.Values{"q": {"*:*"}, "fl": {"id"}, "sort": {"id asc"}, "rows": {"10"}, "cursorMark": {cursor}, "fq": {"{!term f=md5}m1"}}
		status, m := call(t, http.MethodGet, s.URL()+"/select?"+q.Encode(), "", "")
		if status != 200 {
			t.Fatalf("cursor page: %d %v", status, m)
		}
		for _, d := range m["response"].(map[string]any)["docs"].([]any) {
			seen = append(seen, d.(map[string]any)["id"].(string))
		}
		next := m["nextCursorMark"].(string)
		if next == cursor {
			break
		}
		cursor = next
	}
	if len(seen) != 12 || seen[0] != "doc01" || seen[11] != "doc23" {
		t.Errorf("cursor walk of the odd documents = %v", seen)
	}

	for _, q := range []url.Values{
		{"q": {"*:*"}, "cursorMark": {"*"}, "sort": {"length asc"}},
		{"q": {"*:*"}, "cursorMark": {"*"}, "sort": {"id asc"}, "start": {"5"}},
		{"q": {"*:*"}, "cursorMark": {"bogus"}, "sort": {"id asc"}},
		{"q": {"title:x"}},
		{},
	} {
		if status, _ := call(t, http.MethodGet, s.URL()+"/select?"+q.Encode(), "", ""); status != 400 {
			t.Errorf("select %v: status %d, want 400", q, status)
		}
	}
}

func TestRoutingAndInjection(t *testing.T) {
	s := New(t, Options{Core: "c1"})
	status, m := call(t, http.MethodGet, s.URL()+"/admin/ping?wt=json", "", "")
	if status != 200 || m["status"] != "OK" {
		t.Fatalf("ping: %d %v", status, m)
	}
	if status, _ := call(t, http.MethodGet, strings.Replace(s.URL(), "/c1", "/c2", 1)+"/admin/ping", "", ""); status != 404 {
		t.Errorf("ping of another core: %d, want 404", status)
	}
	s.Fail(Ping, http.StatusServiceUnavailable, 2)
	for i, want := range []int{503, 503, 200} {
		if status, _ := call(t, http.MethodGet, s.URL()+"/admin/ping", "", ""); status != want {
			t.Errorf("ping %d: %d, want %d", i, status, want)
		}
	}
	s.RequireHeader("Authorization", "Basic x")
	if status, _ := call(t, http.MethodGet, s.URL()+"/admin/ping", "", ""); status != 401 {
		t.Errorf("ping without credentials: %d, want 401", status)
	}
	if got := s.Count(Ping); got != 5 { // the other core's 404 is not a ping
		t.Errorf("Count(Ping) = %d, want 5", got)
	}
}
