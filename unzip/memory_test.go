package unzip

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zip"
)

// writeManyEntries writes, to a file in dir, an archive of count tiny stored
// entries named like "resources/r0000123.dat" (the last one is
// manifest.xml), and returns the open file and its size.
func writeManyEntries(tb testing.TB, dir string, count int) (*os.File, int64) {
	tb.Helper()
	path := filepath.Join(dir, "many.zip")
	fh, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(fh, 1<<20)
	w := zip.NewWriter(bw)
	for i := range count {
		name, body := entryName(i), []byte("x")
		if i == count-1 {
			name, body = ManifestName, manifestBody
		}
		fw, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := fw.Write(body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	st, err := fh.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fh.Close() })
	return fh, st.Size()
}

func entryName(i int) string { return fmt.Sprintf("resources/r%07d.dat", i) }

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestOpenMemoryPerEntry checks that an open Archive holds a few dozen bytes
// per entry, whatever the names: the central directory is streamed, not
// kept.
func TestOpenMemoryPerEntry(t *testing.T) {
	const count = 200_000
	const maxPerEntry = 64 // bytes
	fh, size := writeManyEntries(t, t.TempDir(), count)

	before := heapAfterGC()
	a, err := Open(fh, size, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	after := heapAfterGC()
	runtime.KeepAlive(a)
	if a.Len() != count {
		t.Fatalf("Len = %d, want %d", a.Len(), count)
	}
	per := float64(int64(after)-int64(before)) / count
	t.Logf("%d entries, %d-byte archive: %.1f bytes of heap per entry after Open", count, size, per)
	if per > maxPerEntry {
		t.Fatalf("%.1f bytes of heap per entry, want at most %d", per, maxPerEntry)
	}

	// The archive still works: a lookup from the middle, and the
	// inventory.
	f, err := a.Lookup("/" + entryName(count/2))
	wantErr(t, err, nil)
	got, err := readAll(t, f)
	wantErr(t, err, nil)
	if string(got) != "x" {
		t.Fatalf("got %q", got)
	}
	if u := a.Unreferenced(); len(u) != count-2 {
		t.Fatalf("Unreferenced: %d names, want %d", len(u), count-2)
	}
}

// BenchmarkOpen opens an archive of 100,000 tiny entries from a file (in
// the page cache).
func BenchmarkOpen(b *testing.B) {
	const count = 100_000
	fh, size := writeManyEntries(b, b.TempDir(), count)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, err := Open(fh, size, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if a.Len() != count {
			b.Fatalf("Len = %d", a.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/count, "ns/entry")
}

// BenchmarkLookup looks up entries of an archive of 100,000 tiny entries
// (from a file, in the page cache), in archive order.
func BenchmarkLookup(b *testing.B) {
	const count = 100_000
	fh, size := writeManyEntries(b, b.TempDir(), count)
	a, err := Open(fh, size, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	paths := make([]string, count-1)
	for i := range paths {
		paths[i] = "/" + entryName(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, err := a.Lookup(paths[i]); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % len(paths)
	}
}
