package manifest

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/fixity"
)

// sharedPath returns the path of rel under the shared folder beside the
// repository. Without it the test is skipped, or fails when CI is set.
func sharedPath(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shared test data missing under CI: %v", err)
		}
		t.Skipf("shared test data absent: %v", err)
	}
	return p
}

func readFile(t testing.TB, path string) result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readAll(t, f, Options{})
}

func specFiles(t testing.TB) []string {
	t.Helper()
	dir := sharedPath(t, "spec-examples")
	files, err := filepath.Glob(filepath.Join(dir, "v1_*", "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no spec examples in %s: %v", dir, err)
	}
	return files
}

func TestSpecExamplesParse(t *testing.T) {
	for _, f := range specFiles(t) {
		name := filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			res := readFile(t, f)
			mustOK(t, res)
			if res.header.Metadata.Capability == "" {
				t.Error("no capability")
			}
			for i, e := range res.entries {
				if e.Loc == "" {
					t.Errorf("entry %d without loc", i)
				}
			}
		})
	}
}

func TestSpecExamplesValues(t *testing.T) {
	dir := sharedPath(t, "spec-examples")
	md5of := func(s string) []byte { return unhex(s) }
	tests := []struct {
		file  string
		check func(t *testing.T, r result)
	}{
		{"v1_0/resourcesync_ex_12.xml", func(t *testing.T, r result) { // Source Description
			want(t, r.header.Root == URLSet && r.header.Metadata.Capability == Description, "header %+v", r.header)
			l, ok := r.header.Link("describedby")
			want(t, ok && l.Href == "http://example.com/info_about_source.xml" && l.Pri == DefaultPri && l.Length == -1, "link %+v", l)
			want(t, len(r.entries) == 3, "%d entries", len(r.entries))
			e := r.entries[2]
			want(t, e.Loc == "http://example.com/capabilitylist3.xml" && e.Metadata.Capability == CapabilityList, "entry %+v", e)
			l, ok = e.Link("describedby")
			want(t, ok && l.Href == "http://example.com/info_about_set3_of_resources.xml", "entry link %+v", l)
		}},
		{"v1_0/resourcesync_ex_13.xml", func(t *testing.T, r result) { // Capability List
			want(t, r.header.Metadata.Capability == CapabilityList && len(r.header.Links) == 2, "header %+v", r.header)
			up, _ := r.header.Link("up")
			want(t, up.Href == "http://example.com/resourcesync_description.xml", "up %+v", up)
			var caps []Capability
			for _, e := range r.entries {
				caps = append(caps, e.Metadata.Capability)
			}
			want(t, len(caps) == 4 && caps[0] == ResourceList && caps[1] == ResourceDump && caps[2] == ChangeList && caps[3] == ChangeDump, "capabilities %v", caps)
		}},
		{"v1_0/resourcesync_ex_14.xml", func(t *testing.T, r result) { // Resource List: md5, sha-256, length
			m := r.header.Metadata
			want(t, m.Capability == ResourceList && m.At.Equal(ts("2013-01-03T09:00:00Z")) && m.Completed.Equal(ts("2013-01-03T09:01:00Z")), "header %+v", m)
			e := r.entries[0]
			want(t, e.Lastmod.Equal(ts("2013-01-02T13:00:00Z")) && e.Metadata.Length == 8876 && e.Metadata.Type == "text/html" &&
				bytes.Equal(e.Metadata.Hashes.MD5, md5of("1584abdf8ebdc9802ac0c6a7402c03b6")), "entry 0 %+v", e)
			e = r.entries[1]
			want(t, e.Metadata.Length == 14599 && bytes.Equal(e.Metadata.Hashes.SHA256, unhex("854f61290e2e197a11bc91063afce22e43f8ccc655237050ace766adc68dc784")) &&
				bytes.Equal(e.Metadata.Hashes.MD5, md5of("1e0d5cb8ef6ba40c99b14c0237be735e")), "entry 1 %+v", e)
			want(t, strings.Contains(r.warn, "extra whitespace"), "no warning about the multi-line hash list")
		}},
		{"v1_0/resourcesync_ex_21.xml", func(t *testing.T, r result) { // Change List with from/until
			m := r.header.Metadata
			want(t, m.Capability == ChangeList && m.From.Equal(ts("2013-01-02T00:00:00Z")) && m.Until.Equal(ts("2013-01-03T00:00:00Z")), "header %+v", m)
			idx, _ := r.header.Link("index")
			want(t, idx.Href == "http://example.com/dataset1/changelist.xml", "index link %+v", idx)
			var changes []Change
			for _, e := range r.entries {
				changes = append(changes, e.Metadata.Change)
			}
			want(t, len(changes) == 4 && changes[0] == Created && changes[2] == Deleted && changes[3] == Updated, "changes %v", changes)
			want(t, r.entries[3].Loc == "http://example.com/res7.html" && r.entries[3].ChangeTime().Equal(ts("2013-01-02T20:00:00Z")), "entry 3 %+v", r.entries[3])
		}},
		{"v1_0/resourcesync_ex_17.xml", func(t *testing.T, r result) { // Resource Dump
			want(t, r.header.Metadata.Capability == ResourceDump && r.header.Metadata.Completed.Equal(ts("2013-01-03T09:04:00Z")), "header %+v", r.header)
			e := r.entries[1]
			want(t, e.Loc == "http://example.com/resourcedump-part2.zip" && e.Metadata.Type == "application/zip" && e.Metadata.Length == 9875 &&
				e.Metadata.At.Equal(ts("2013-01-03T09:01:00Z")) && e.Metadata.Completed.Equal(ts("2013-01-03T09:03:00Z")), "entry %+v", e)
			l, ok := e.Link("contents")
			want(t, ok && l.Href == "http://example.com/resourcedump_manifest-part2.xml" && l.Type == "application/xml", "contents %+v", l)
		}},
		{"v1_0/resourcesync_ex_18.xml", func(t *testing.T, r result) { // Resource Dump Manifest
			want(t, r.header.Metadata.Capability == ResourceDumpManifest, "header %+v", r.header)
			want(t, r.entries[0].Metadata.Path == "/resources/res1" && r.entries[1].Metadata.Path == "/resources/res2", "paths %q %q", r.entries[0].Metadata.Path, r.entries[1].Metadata.Path)
		}},
		{"v1_0/resourcesync_ex_23.xml", func(t *testing.T, r result) { // Change Dump Manifest
			want(t, r.header.Metadata.Capability == ChangeDumpManifest && r.header.Metadata.Until.Equal(ts("2013-01-03T00:00:00Z")), "header %+v", r.header)
			d := r.entries[2]
			want(t, d.Metadata.Change == Deleted && d.Metadata.Path == "" && d.Metadata.Length == -1 && d.Metadata.Hashes.IsZero(), "deleted entry %+v", d)
			u := r.entries[3]
			want(t, u.Metadata.Change == Updated && u.Metadata.Path == "/changes/res7-v2.html" && u.Metadata.Length == 5426 &&
				bytes.Equal(u.Metadata.Hashes.MD5, md5of("0988647082c8bc51778894a48ec3b576")), "updated entry %+v", u)
		}},
		{"v1_1/resourcesync_ex_19.xml", func(t *testing.T, r result) { // 1.1 datetime
			e := r.entries[0]
			want(t, e.Lastmod.Equal(ts("2000-01-01T01:01:00Z")) && e.Metadata.Datetime.Equal(ts("2013-01-03T11:00:00Z")) &&
				e.ChangeTime().Equal(ts("2013-01-03T11:00:00Z")), "entry 0 %+v", e)
			want(t, r.entries[2].Lastmod.IsZero() && r.entries[2].ChangeTime().Equal(ts("2013-01-03T18:00:00Z")), "entry 2 %+v", r.entries[2])
			want(t, r.entries[3].ChangeTime().IsZero(), "entry 3 %+v", r.entries[3])
		}},
		{"v1_0/resourcesync_ex_15.xml", func(t *testing.T, r result) { // Resource List Index
			want(t, r.header.IsIndex() && r.header.Metadata.Capability == ResourceList, "header %+v", r.header)
			want(t, len(r.entries) == 3 && r.entries[2].Loc == "http://example.com/resourcelist3.xml" && r.entries[2].Metadata.At.Equal(ts("2013-01-03T09:07:00Z")), "entries %+v", r.entries)
		}},
		{"v1_0/resourcesync_ex_24.xml", func(t *testing.T, r result) { // mirrors with pri
			ls := r.entries[0].Links
			want(t, len(ls) == 3, "links %+v", ls)
			for i, l := range ls {
				want(t, l.Rel == "duplicate" && l.Pri == i+1 && l.Modified.Equal(ts("2013-01-03T18:00:00Z")), "link %d %+v", i, l)
			}
			want(t, ls[2].Href == "gsiftp://gridftp.example.com/res1", "link 2 %+v", ls[2])
		}},
		{"v1_0/resourcesync_ex_27.xml", func(t *testing.T, r result) { // patch links; a made-up digest
			e := r.entries[1]
			want(t, e.Metadata.Length == 9788456778 && len(e.Metadata.Hashes.SHA256) == 32, "entry %+v", e)
			want(t, e.Links[0].Rel == "http://www.openarchives.org/rs/terms/patch" && e.Links[0].Hashes.Unknown != nil, "link %+v", e.Links[0])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res := readFile(t, filepath.Join(dir, filepath.FromSlash(tt.file)))
			mustOK(t, res)
			tt.check(t, res)
		})
	}
}

func want(t *testing.T, ok bool, format string, a ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, a...)
	}
}

func TestInterop(t *testing.T) {
	dir := sharedPath(t, "interop/resync-2.0.1")
	tests := []struct {
		file  string
		cap   Capability
		n     int
		warns []string
	}{
		{".well-known/resourcesync", Description, 1, []string{"single quotes"}},
		{"capabilitylist.xml", CapabilityList, 2, nil},
		{"resourcelist.xml", ResourceList, 202, nil},
		{"resourcedump.xml", ResourceDump, 1, nil},
		{"dump00000.xml", ResourceDumpManifest, 202, []string{"path without a leading slash"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res := readFile(t, filepath.Join(dir, filepath.FromSlash(tt.file)))
			checkInterop(t, res, tt.cap, tt.n, tt.warns)
			if tt.file == "resourcedump.xml" {
				up, _ := res.header.Link("up")
				want(t, up.Href == "http://127.0.0.1:PORTX/capabilitylist.xml" && res.header.Metadata.At.Equal(ts("2026-01-01T00:00:00Z")), "header %+v", res.header)
				want(t, res.entries[0].Metadata.Length == 572383, "entry %+v", res.entries[0])
			}
			if tt.file == "resourcelist.xml" {
				want(t, res.header.Metadata.At.Equal(ts("2026-11-22T14:03:54.570503Z")), "at %v", res.header.Metadata.At)
			}
		})
	}
	t.Run("dump00000.zip/manifest.xml", func(t *testing.T) {
		zr, err := zip.OpenReader(filepath.Join(dir, "dump00000.zip"))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		if zr.File[0].Name != "manifest.xml" {
			t.Fatalf("first entry %q", zr.File[0].Name)
		}
		rc, err := zr.File[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		res := readAll(t, rc, Options{})
		checkInterop(t, res, ResourceDumpManifest, 202, []string{"single quotes", "lower-case", "path without a leading slash"})
		files := map[string]bool{}
		for _, f := range zr.File {
			files[f.Name] = true
		}
		for _, e := range res.entries {
			m := e.Metadata
			want(t, files[m.Path] && m.Length >= 0 && len(m.Hashes.MD5) == 16 && len(m.Hashes.SHA256) == 32 && !e.Lastmod.IsZero(), "entry %+v", e)
		}
		var odd *Entry
		for _, e := range res.entries {
			if strings.Contains(e.Loc, "café") {
				odd = e
			}
		}
		want(t, odd != nil && odd.Loc == "http://127.0.0.1:PORTX/resources/sub dir/café über.txt" && odd.Metadata.Path == "sub dir/café über.txt", "non-ASCII entry %+v", odd)
	})
}

func checkInterop(t *testing.T, res result, c Capability, n int, warns []string) {
	t.Helper()
	mustOK(t, res)
	want(t, res.header.Metadata.Capability == c, "capability %q, want %q", res.header.Metadata.Capability, c)
	want(t, len(res.entries) == n, "%d entries, want %d", len(res.entries), n)
	for _, w := range warns {
		want(t, strings.Count(res.warn, w) == 1, "warning %q not logged once:\n%s", w, res.warn)
	}
	for _, e := range res.entries {
		if !e.Metadata.Hashes.IsZero() {
			want(t, e.Metadata.Hashes.Equal(fixity.Hashes{MD5: e.Metadata.Hashes.MD5, SHA256: e.Metadata.Hashes.SHA256}), "hashes %+v", e.Metadata.Hashes)
		}
	}
}

// specSeeds returns the spec example documents, for fuzz seeds; none when
// the shared folder is absent (outside CI).
func specSeeds(f *testing.F) [][]byte {
	p := filepath.Join("..", "..", "shared", "spec-examples")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			f.Fatalf("shared test data missing under CI: %v", err)
		}
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(p, "v1_*", "*.xml"))
	var out [][]byte
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			f.Fatal(err)
		}
		b, err := io.ReadAll(fh)
		fh.Close()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
