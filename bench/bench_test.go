package bench

import (
	"io"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkGenerate generates a Source of about 64 MB of payload (mean
// body 50 KiB, lognormal, half text) and reports payload MB/s: with the
// default packaging (one package) and with one package per CPU.
func BenchmarkGenerate(b *testing.B) {
	const payload = 64 << 20
	for _, packages := range []int{1, runtime.GOMAXPROCS(0) * 2} {
		b.Run("packages="+strconv.Itoa(packages), func(b *testing.B) {
			opts := GenOptions{Resources: payload / DefaultMeanSize, Packages: packages, Seed: 1}
			var res GenResult
			for b.Loop() {
				opts.Dir = b.TempDir()
				var err error
				if res, err = Generate(b.Context(), opts); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(res.PayloadBytes)
			b.ReportMetric(float64(res.PackageBytes)/float64(res.PayloadBytes), "package/payload")
		})
	}
}

// BenchmarkBody measures body generation alone.
func BenchmarkBody(b *testing.B) {
	for _, text := range []bool{true, false} {
		name := "random"
		if text {
			name = "text"
		}
		b.Run(name, func(b *testing.B) {
			br := newBodyReader(newWordTable())
			const size = 16 << 20
			b.SetBytes(size)
			i := 0
			for b.Loop() {
				br.reset(1, i, size, text)
				if _, err := br.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
