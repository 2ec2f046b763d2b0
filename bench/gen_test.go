package bench

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	stdzip "archive/zip"

	"github.com/klauspost/compress/flate"

	"github.com/rsharvest/rsharvest/fixity"
)

// xDoc is a test-only view of a ResourceSync document, parsed with
// encoding/xml independently of the manifest package.
type xDoc struct {
	XMLName  xml.Name
	MD       xMD     `xml:"http://www.openarchives.org/rs/terms/ md"`
	Links    []xLink `xml:"http://www.openarchives.org/rs/terms/ ln"`
	URLs     []xURL  `xml:"url"`
	Sitemaps []xURL  `xml:"sitemap"`
}

type xURL struct {
	Loc     string  `xml:"loc"`
	Lastmod string  `xml:"lastmod"`
	MD      xMD     `xml:"http://www.openarchives.org/rs/terms/ md"`
	Links   []xLink `xml:"http://www.openarchives.org/rs/terms/ ln"`
}

type xMD struct {
	Capability string `xml:"capability,attr"`
	At         string `xml:"at,attr"`
	Completed  string `xml:"completed,attr"`
	From       string `xml:"from,attr"`
	Until      string `xml:"until,attr"`
	Datetime   string `xml:"datetime,attr"`
	Change     string `xml:"change,attr"`
	Hash       string `xml:"hash,attr"`
	Length     string `xml:"length,attr"`
	Path       string `xml:"path,attr"`
	Type       string `xml:"type,attr"`
}

type xLink struct {
	Rel  string `xml:"rel,attr"`
	Href string `xml:"href,attr"`
	Type string `xml:"type,attr"`
}

func (u xURL) link(rel string) string {
	for _, l := range u.Links {
		if l.Rel == rel {
			return l.Href
		}
	}
	return ""
}

func (d xDoc) link(rel string) string { return xURL{Links: d.Links}.link(rel) }

func parseDoc(t *testing.T, data []byte) xDoc {
	t.Helper()
	var d xDoc
	if err := xml.Unmarshal(data, &d); err != nil {
		t.Fatalf("parse: %v\n%s", err, data)
	}
	return d
}

// local maps a URL of the generated Source to its file under dir.
func local(t *testing.T, dir, url string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(url, Placeholder)
	if !ok {
		t.Fatalf("URL %q does not start with %s", url, Placeholder)
	}
	return filepath.Join(dir, filepath.FromSlash(rel))
}

func readDoc(t *testing.T, dir, url string) xDoc {
	t.Helper()
	data, err := os.ReadFile(local(t, dir, url))
	if err != nil {
		t.Fatal(err)
	}
	return parseDoc(t, data)
}

func sums(b []byte) fixity.Hashes {
	m, s := md5.Sum(b), sha256.Sum256(b)
	return fixity.Hashes{MD5: m[:], SHA256: s[:]}
}

func checkFixity(t *testing.T, what string, md xMD, data []byte) {
	t.Helper()
	want, err := fixity.ParseList(md.Hash)
	if err != nil || want.MD5 == nil || want.SHA256 == nil {
		t.Errorf("%s: hash %q: md5 and sha-256 wanted (%v)", what, md.Hash, err)
		return
	}
	if !want.Equal(sums(data)) {
		t.Errorf("%s: hash %s, data has %s", what, want, sums(data))
	}
	if md.Length != strconv.Itoa(len(data)) {
		t.Errorf("%s: length %q, data has %d", what, md.Length, len(data))
	}
}

// hashTree returns the sha-256 of every file under dir, by relative path.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func small(dir string) GenOptions {
	return GenOptions{Dir: dir, Resources: 40, Packages: 3, Seed: 7, MeanSize: 3000, WriteResources: true}
}

func TestGenerateDeterministic(t *testing.T) {
	tests := []struct {
		name string
		opts func(dir string) GenOptions
	}{
		{"default kinds", small},
		{"index and list index", func(dir string) GenOptions {
			o := small(dir)
			o.IndexThreshold, o.ListThreshold = 2, 15
			return o
		}},
		{"uniform, stored share", func(dir string) GenOptions {
			o := small(dir)
			o.SizeDist, o.StoredShare, o.CompressibleShare = Uniform, 0.3, 0.8
			return o
		}},
		{"no odd names, no files", func(dir string) GenOptions {
			o := small(dir)
			o.NoOddNames, o.WriteResources = true, false
			return o
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
			ra, err := Generate(ctx, tt.opts(a))
			if err != nil {
				t.Fatal(err)
			}
			rb, err := Generate(ctx, tt.opts(b))
			if err != nil {
				t.Fatal(err)
			}
			if ra != rb {
				t.Errorf("results differ: %+v vs %+v", ra, rb)
			}
			ha, hb := hashTree(t, a), hashTree(t, b)
			if len(ha) != len(hb) {
				t.Errorf("%d files vs %d", len(ha), len(hb))
			}
			for p, s := range ha {
				if hb[p] != s {
					t.Errorf("%s differs between two generations", p)
				}
			}
			other := tt.opts(c)
			other.Seed++
			if _, err := Generate(ctx, other); err != nil {
				t.Fatal(err)
			}
			hc := hashTree(t, c)
			p := filepath.Join("packages", "part-00001.zip")
			if hc[p] == ha[p] {
				t.Errorf("%s is the same with another seed", p)
			}
		})
	}
}

// TestGenerateLayout checks every document, package and manifest of
// generated Sources against each other and against Truth.
func TestGenerateLayout(t *testing.T) {
	tests := []struct {
		name      string
		packages  int
		threshold int
		resources int
		files     bool
		wantIndex bool
	}{
		{"one dump", 3, 3, 40, true, false},
		{"dump index", 5, 2, 50, false, true},
		{"one resource", 0, 0, 1, true, false},
		{"empty", 0, 0, 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := GenOptions{Dir: dir, Resources: tt.resources, Packages: tt.packages, IndexThreshold: tt.threshold,
				Seed: 3, MeanSize: 2000, WriteResources: tt.files}
			res, err := Generate(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.SourceDescription != Placeholder+".well-known/resourcesync" {
				t.Errorf("SourceDescription %q", res.SourceDescription)
			}
			sd := readDoc(t, dir, res.SourceDescription)
			if sd.MD.Capability != "description" || len(sd.URLs) != 1 || sd.URLs[0].MD.Capability != "capabilitylist" {
				t.Fatalf("source description: %+v", sd)
			}
			cl := readDoc(t, dir, sd.URLs[0].Loc)
			if cl.MD.Capability != "capabilitylist" || cl.link("up") != res.SourceDescription {
				t.Errorf("capability list header: %+v", cl)
			}
			caps := map[string]string{}
			for _, u := range cl.URLs {
				caps[u.MD.Capability] = u.Loc
			}
			if _, ok := caps["resourcelist"]; ok != tt.files {
				t.Errorf("capability list has resourcelist: %v, want %v", ok, tt.files)
			}

			// Walk the dump (through its index when there is one).
			rd := readDoc(t, dir, caps["resourcedump"])
			if rd.MD.Capability != "resourcedump" || rd.MD.At == "" || rd.link("up") != sd.URLs[0].Loc {
				t.Errorf("resource dump header: %+v", rd)
			}
			if got := rd.XMLName.Local == "sitemapindex"; got != tt.wantIndex {
				t.Fatalf("index: %v, want %v", got, tt.wantIndex)
			}
			var pkgs []xURL
			if tt.wantIndex {
				for _, sm := range rd.Sitemaps {
					d := readDoc(t, dir, sm.Loc)
					if d.XMLName.Local != "urlset" || d.MD.Capability != "resourcedump" || d.link("index") != caps["resourcedump"] {
						t.Errorf("%s: %+v", sm.Loc, d)
					}
					if len(d.URLs) > tt.threshold {
						t.Errorf("%s has %d packages, threshold %d", sm.Loc, len(d.URLs), tt.threshold)
					}
					pkgs = append(pkgs, d.URLs...)
				}
			} else {
				pkgs = rd.URLs
			}
			if len(pkgs) != res.Packages {
				t.Fatalf("%d packages listed, result says %d", len(pkgs), res.Packages)
			}

			fromManifests := map[string][]byte{} // uri -> md5
			var order []string
			var packageBytes int64
			for _, pu := range pkgs {
				zipData, err := os.ReadFile(local(t, dir, pu.Loc))
				if err != nil {
					t.Fatal(err)
				}
				packageBytes += int64(len(zipData))
				checkFixity(t, pu.Loc, pu.MD, zipData)
				if pu.MD.Type != "application/zip" || pu.MD.At == "" || pu.MD.Completed == "" {
					t.Errorf("%s: rs:md %+v", pu.Loc, pu.MD)
				}
				manCopy, err := os.ReadFile(local(t, dir, pu.link("contents")))
				if err != nil {
					t.Fatal(err)
				}
				zr, err := stdzip.NewReader(bytes.NewReader(zipData), int64(len(zipData)))
				if err != nil {
					t.Fatal(err)
				}
				if len(zr.File) == 0 || zr.File[0].Name != "manifest.xml" {
					t.Fatalf("%s: first entry is not manifest.xml", pu.Loc)
				}
				if zr.File[0].Flags&0x8 != 0 {
					t.Errorf("%s: manifest.xml has a data descriptor", pu.Loc)
				}
				entries := map[string]*stdzip.File{}
				for _, f := range zr.File[1:] {
					entries[f.Name] = f
				}
				inZip := readZipFile(t, zr.File[0])
				if !bytes.Equal(inZip, manCopy) {
					t.Errorf("%s: manifest copy differs from manifest.xml", pu.Loc)
				}
				man := parseDoc(t, inZip)
				if man.MD.Capability != "resourcedump-manifest" || man.MD.At == "" || man.link("up") != sd.URLs[0].Loc {
					t.Errorf("%s: manifest header %+v", pu.Loc, man)
				}
				if len(man.URLs) != len(entries) {
					t.Errorf("%s: %d manifest entries, %d bitstreams", pu.Loc, len(man.URLs), len(entries))
				}
				for _, u := range man.URLs {
					name, ok := strings.CutPrefix(u.MD.Path, "/res/")
					f := entries["res/"+name]
					if !ok || f == nil {
						t.Errorf("%s: path %q not in the package", u.Loc, u.MD.Path)
						continue
					}
					if f.Method == stdzip.Store && f.Flags&0x8 != 0 {
						t.Errorf("%s: stored entry with a data descriptor", u.Loc)
					}
					body := readZipFile(t, f)
					checkFixity(t, u.Loc, u.MD, body)
					if u.Lastmod == "" || u.MD.Type == "" {
						t.Errorf("%s: lastmod %q type %q", u.Loc, u.Lastmod, u.MD.Type)
					}
					if _, dup := fromManifests[u.Loc]; dup {
						t.Errorf("%s listed twice", u.Loc)
					}
					m := md5.Sum(body)
					fromManifests[u.Loc] = m[:]
					order = append(order, u.Loc)
				}
			}
			if packageBytes != res.PackageBytes {
				t.Errorf("PackageBytes %d, files total %d", res.PackageBytes, packageBytes)
			}
			if len(fromManifests) != tt.resources {
				t.Errorf("%d resources in manifests, want %d", len(fromManifests), tt.resources)
			}

			// Truth yields exactly the manifests' resources, in order.
			var n int
			var payload int64
			err = Truth(t.Context(), opts, func(uri string, body io.Reader) error {
				h := md5.New()
				k, err := io.Copy(h, body)
				payload += k
				if n >= len(order) || order[n] != uri {
					t.Errorf("truth #%d is %s, manifests have it elsewhere", n, uri)
				} else if !bytes.Equal(h.Sum(nil), fromManifests[uri]) {
					t.Errorf("truth body of %s differs from the package's", uri)
				}
				n++
				return err
			})
			if err != nil || n != len(order) || payload != res.PayloadBytes {
				t.Errorf("truth: %v, %d resources of %d, %d bytes of %d", err, n, len(order), payload, res.PayloadBytes)
			}

			if tt.files {
				checkResourceList(t, dir, caps["resourcelist"], res, fromManifests)
			}
		})
	}
}

func checkResourceList(t *testing.T, dir, url string, res GenResult, fromManifests map[string][]byte) {
	t.Helper()
	rl := readDoc(t, dir, url)
	if rl.MD.Capability != "resourcelist" || rl.MD.At == "" || rl.XMLName.Local != "urlset" {
		t.Errorf("resource list header: %+v", rl)
	}
	if len(rl.URLs) != res.Listed {
		t.Errorf("%d listed, result says %d", len(rl.URLs), res.Listed)
	}
	for _, u := range rl.URLs {
		rel := strings.TrimPrefix(u.Loc, Placeholder)
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v", u.Loc, err)
			continue
		}
		checkFixity(t, u.Loc, u.MD, data)
		if m := md5.Sum(data); !bytes.Equal(m[:], fromManifests[u.Loc]) {
			t.Errorf("%s: file differs from the dump's bitstream", u.Loc)
		}
	}
}

func readZipFile(t *testing.T, f *stdzip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return data
}

func TestGenerateOddNames(t *testing.T) {
	dir := t.TempDir()
	opts := GenOptions{Dir: dir, Resources: 20, MeanSize: 500, WriteResources: true}
	res, err := Generate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	if err := Truth(t.Context(), opts, func(uri string, _ io.Reader) error {
		uris = append(uris, uri)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(uris, "\n")
	for _, want := range []string{"?id=42&lang=en", "sub dir/café über.txt", "/nest/a\n", "/nest/a/b", strings.Repeat("l", 300), "odd/Case.txt", "odd/case.txt"} {
		if !strings.Contains(all+"\n", want) {
			t.Errorf("no URI with %q", want)
		}
	}
	if res.Listed != 20-3 {
		t.Errorf("Listed %d, want 17 (query, …/a and the long segment left out)", res.Listed)
	}
	if _, err := os.Stat(filepath.Join(dir, "resources", "odd", "sub dir", "café über.txt")); err != nil {
		t.Error(err)
	}
	rl, err := os.ReadFile(filepath.Join(dir, "resourcelist.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rl, []byte("search?")) || bytes.Contains(rl, []byte("nest/a<")) {
		t.Error("resource list lists a URI that has no file")
	}
}

func TestBodyReaderChunking(t *testing.T) {
	words := newWordTable()
	full := func(text bool, size int64) []byte {
		br := newBodyReader(words)
		br.reset(9, 4, size, text)
		var buf bytes.Buffer
		if _, err := br.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"plain", func(r io.Reader) io.Reader { return struct{ io.Reader }{r} }},
	}
	for _, text := range []bool{true, false} {
		for _, size := range []int64{0, 1, 7, blockSize - 1, blockSize, 3*blockSize + 5} {
			want := full(text, size)
			if int64(len(want)) != size {
				t.Fatalf("text=%v size %d: got %d bytes", text, size, len(want))
			}
			for _, rd := range readers {
				br := newBodyReader(words)
				br.reset(9, 4, size, text)
				got, err := io.ReadAll(rd.wrap(br))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("text=%v size %d %s: differs (%v)", text, size, rd.name, err)
				}
			}
		}
	}
}

func TestTextCompresses(t *testing.T) {
	br := newBodyReader(newWordTable())
	br.reset(1, 1, 1<<20, true)
	var raw, packed bytes.Buffer
	fw, _ := flate.NewWriter(&packed, flate.BestSpeed)
	if _, err := br.WriteTo(io.MultiWriter(&raw, fw)); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	ratio := float64(raw.Len()) / float64(packed.Len())
	if ratio < 2.5 || ratio > 5 {
		t.Errorf("text deflates %.2f×, want about 3×", ratio)
	}
	br.reset(1, 1, 1<<20, false)
	packed.Reset()
	fw.Reset(&packed)
	io.Copy(fw, br)
	fw.Close()
	if packed.Len() < 1<<20 {
		t.Errorf("random bytes deflate to %d of %d", packed.Len(), 1<<20)
	}
}

func TestSizeDistributions(t *testing.T) {
	const n, mean = 4000, 10000
	tests := []struct {
		dist     string
		maxSize  int
		check    func(size int64) bool
		meanTol  float64
		wantMean float64
	}{
		{Fixed, 0, func(s int64) bool { return s == mean }, 0, mean},
		{Uniform, 0, func(s int64) bool { return s >= 0 && s <= 2*mean }, 0.05, mean},
		{LogNormal, 0, func(s int64) bool { return s >= 0 && s <= 64*mean }, 0.1, mean},
		{LogNormal, 2 * mean, func(s int64) bool { return s <= 2*mean }, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.dist+"/"+strconv.Itoa(tt.maxSize), func(t *testing.T) {
			p, err := newPlan(GenOptions{Resources: n, MeanSize: mean, SizeDist: tt.dist, MaxSize: tt.maxSize})
			if err != nil {
				t.Fatal(err)
			}
			var total float64
			texts := 0
			for i := range n {
				r := p.resource(i)
				if !tt.check(r.size) {
					t.Fatalf("resource %d: size %d out of range", i, r.size)
				}
				if r.stored == r.text {
					t.Fatalf("resource %d: default storage is by kind", i)
				}
				if r.text {
					texts++
				}
				total += float64(r.size)
			}
			if got := total / n; tt.meanTol >= 0 && math.Abs(got-tt.wantMean) > tt.meanTol*tt.wantMean+1 {
				t.Errorf("mean size %.0f, want %.0f", got, tt.wantMean)
			}
			if texts < n*45/100 || texts > n*55/100 {
				t.Errorf("%d of %d compressible, want about half", texts, n)
			}
		})
	}
}

func TestGenerateOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts GenOptions
	}{
		{"no dir", GenOptions{Resources: 1}},
		{"negative resources", GenOptions{Dir: "x", Resources: -1}},
		{"negative packages", GenOptions{Dir: "x", Resources: 1, Packages: -2}},
		{"unknown distribution", GenOptions{Dir: "x", Resources: 1, SizeDist: "pareto"}},
		{"share over 1", GenOptions{Dir: "x", Resources: 1, CompressibleShare: 1.5}},
		{"negative threshold", GenOptions{Dir: "x", Resources: 1, IndexThreshold: -1}},
		{"huge max size", GenOptions{Dir: "x", Resources: 1, MaxSize: 1 << 33}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Generate(t.Context(), tt.opts); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestGenerateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	_, err := Generate(ctx, GenOptions{Dir: dir, Resources: 100, MeanSize: 100})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".well-known", "resourcesync")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("source description written by a cancelled generation (%v)", err)
	}
	err = Truth(ctx, GenOptions{Resources: 10}, func(string, io.Reader) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("truth err = %v, want context.Canceled", err)
	}
}

// TestProducers: the packages of each producer are laid out as that
// producer writes them — every entry deflated; the manifest first, or last
// for Java; sizes in the local headers, or data descriptors for Java — and
// the Resource Dump gives each rewritten package's own length and md5.
func TestProducers(t *testing.T) {
	for _, producer := range []string{ProducerPython1, ProducerPython6, ProducerJava} {
		t.Run(producer, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Generate(t.Context(), GenOptions{Dir: dir, Resources: 30, Packages: 2, Seed: 4, MeanSize: 3000, Producer: producer}); err != nil {
				t.Fatal(err)
			}
			doc := readDoc(t, dir, Placeholder+"resourcedump.xml")
			if len(doc.URLs) != 2 {
				t.Fatalf("%d packages in the Resource Dump", len(doc.URLs))
			}
			for _, u := range doc.URLs {
				b, err := os.ReadFile(local(t, dir, u.Loc))
				if err != nil {
					t.Fatal(err)
				}
				checkFixity(t, u.Loc, u.MD, b)
				if u.MD.Length != strconv.Itoa(len(b)) {
					t.Errorf("%s: Resource Dump says length %s, the file has %d bytes", u.Loc, u.MD.Length, len(b))
				}
				z, err := stdzip.NewReader(bytes.NewReader(b), int64(len(b)))
				if err != nil {
					t.Fatal(err)
				}
				manifestAt := slices.IndexFunc(z.File, func(f *stdzip.File) bool { return f.Name == "manifest.xml" })
				if want := map[bool]int{true: len(z.File) - 1, false: 0}[producer == ProducerJava]; manifestAt != want {
					t.Errorf("%s: manifest.xml is entry %d of %d, want %d", u.Loc, manifestAt, len(z.File), want)
				}
				for _, f := range z.File {
					if f.Method != stdzip.Deflate || (f.Flags&0x8 != 0) != (producer == ProducerJava) {
						t.Errorf("%s: %s: method %d, flags %#x", u.Loc, f.Name, f.Method, f.Flags)
					}
				}
			}
		})
	}
}
