package unpack

import (
	"context"
	"fmt"
	"io"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// Range re-sync: reading only what changed from a package.
//
// When the destination already holds resources (a re-sync) and the server
// honours Range for a package, the package is not downloaded: it is opened
// in place through a fetch.RangeReader. Its central directory and
// manifest.xml come from the end of the file (a few requests); deliver then
// reads, by Range, only the entries whose state record does not match the
// manifest — unchanged entries are skipped before anything of theirs is
// read (Archive.Lookup consults the central directory only). So a re-sync
// in which 1 % of the resources changed downloads about 1 % of the bytes,
// plus the manifest and the central directory.
//
// What is given up: the package-level length and hashes of the Resource
// Dump cannot be checked without the whole file. Every entry written is
// still verified against the manifest's length and hashes (and the ZIP's
// CRC-32), and the package's size must equal the dump's rs:md length when
// it gives one. The reads are guarded by the package's strong ETag or
// Last-Modified date (If-Range), so bytes of two versions are never mixed.
//
// The package is downloaded whole as before when range re-sync is disabled
// (Reader.NoRange), when the state store holds no resource yet
// (a first sync: one stream is cheaper and the package hash is checked),
// when the server does not answer "Range: bytes=0-0" with a 206 or gives no
// validator, or when opening the package by Range fails (its central
// directory, or its manifest.xml, cannot be read: the server ignores Range
// after all, the package changed, a transport failure outlasted the
// retries). A failure while reading an entry's bytes by Range fails that
// entry only (retryable: it is recorded and holds the checkpoint), as a
// corrupt entry of a downloaded package would.
//
// Whether the state holds "resources of this package" is approximated by
// "the state held any live resource when the run began": a state store
// serves one destination, and a destination with nothing yet gains nothing
// from Range. (Deciding per package would turn a first sync to Range as soon
// as its first outcomes are committed; for the same reason a unit of a
// spread task is a first sync when its task's source held nothing when the
// task was divided, whatever the other units commit meanwhile.)

// manifestPrereadMax bounds the compressed size of a manifest.xml that
// readByRange reads through before handing the package over: small enough
// that the RangeReader's spans still hold it when unpackPackage reads it
// again, so the check costs no second download.
const manifestPrereadMax = 4 << 20

// readByRange opens package j in place by Range (see above; Read
// decides when). It returns ok false (and no error) when the package must
// be downloaded instead; an error only when it is fatal or ctx ended. An
// incremental run reads a change package again this way after it removed
// the copy it downloaded to plan (see Spool).
func (rd *Reader) readByRange(ctx context.Context, j source.Package) (*spooled, bool, error) {
	log := rd.Log.With("package", j.URL)
	size, validator, ranges, err := rd.Client.Probe(ctx, j.URL)
	switch {
	case ctx.Err() != nil:
		return &spooled{stage: "download"}, false, ctx.Err()
	case err != nil:
		// The download will meet (and record) the same failure, or not.
		log.Debug("range probe failed; downloading the package", "error", err)
		return nil, false, nil
	case !ranges || validator == "" || size <= 0:
		log.Debug("server does not honour Range with a validator; downloading the package", "ranges", ranges, "validator", validator)
		return nil, false, nil
	case j.Expect.Length >= 0 && size != j.Expect.Length:
		// Let the download report the mismatch as it always does.
		return nil, false, nil
	}
	ra := rd.Client.ReaderAt(ctx, j.URL, size, validator)
	sp := &spooled{release: func() { rd.Received.Add(ra.Bytes()) }}
	fallback := func(stage string, err error) (*spooled, bool, error) {
		sp.Close()
		if ctx.Err() != nil {
			return &spooled{stage: stage}, false, ctx.Err()
		}
		if errclass.IsFatal(err) {
			return &spooled{stage: stage}, false, err
		}
		log.Info("reading the package by Range failed; downloading it", "stage", stage, "error", err)
		return nil, false, nil
	}
	arch, err := unzip.Open(ra, size, rd.Limits)
	if err != nil {
		return fallback("unzip", err)
	}
	if mf := arch.ManifestFile(); mf.CompressedSize <= manifestPrereadMax {
		// Read manifest.xml through now (size and CRC-32 checked), while a
		// failure can still fall back to a download.
		rc, err := arch.Manifest()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		if err != nil {
			return fallback("manifest", fmt.Errorf("manifest.xml: %w", err))
		}
	}
	sp.arch = arch
	log.Debug("package opened by Range", "size", size, "entries", arch.Len(), "bytes", ra.Bytes())
	return sp, true, nil
}
