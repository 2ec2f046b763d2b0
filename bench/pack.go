package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
)

// hashRecordLen is the size of one resource's record in the side file of
// digests used for the Resource List: md5 then sha-256.
const hashRecordLen = md5.Size + sha256.Size

// PackageFormat is the version of the ZIP layout the generator writes. It
// is part of the bench harness's cache key, so that a dump written in an
// older layout is never reused: raise it whenever the bytes of a package
// change for the same GenOptions.
//
//	1: deflated entries with a data descriptor (sizes after the data)
//	2: every entry with its sizes and CRC-32 in the local header, as
//	   Python's zipfile writes to a seekable file (bodies up to
//	   maxRawDeflate; larger deflated bodies keep the data descriptor)
const PackageFormat = 2

// maxRawDeflate bounds the bodies that are deflated into a buffer first, to
// write their sizes in the local header; larger ones are streamed with a
// data descriptor, so a packer's memory stays bounded.
const maxRawDeflate = 16 << 20

// pkgInfo is what the Resource Dump says about one package.
type pkgInfo struct {
	length  int64
	hashes  fixity.Hashes
	payload int64
}

// counter counts bytes written to it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// packer writes packages. It holds the per-worker buffers and hashers; one
// packer must not be used by two goroutines at once.
type packer struct {
	p      *plan
	side   *os.File // digests for the Resource List, or nil
	body   *bodyReader
	md5    hash.Hash
	sha256 hash.Hash
	crc    hash.Hash32
	copy   []byte
	// deflated holds the current body deflated (bodies up to
	// maxRawDeflate); fw deflates into it.
	deflated bytes.Buffer
	fw       *flate.Writer
}

func newPacker(p *plan, side *os.File) *packer {
	return &packer{
		p: p, side: side, body: newBodyReader(p.words),
		md5: md5.New(), sha256: sha256.New(), crc: crc32.NewIEEE(),
		copy: make([]byte, 64<<10),
	}
}

// pkgItem is one entry of a package: a resource (with the body its seed,
// index, size and kind give) and, in a Change Dump package, the change.
type pkgItem struct {
	r      resource
	change manifest.Change // "" in a Resource Dump package
}

// pkgSpec describes a package to write.
type pkgSpec struct {
	dir     string          // directory under Dir ("packages")
	name    string          // file name without extension ("part-00001")
	header  manifest.Header // of the manifest
	manMod  time.Time       // modification time of manifest.xml in the ZIP
	record  bool            // write bodies under resources/ and digests to the side file
	n       int             // number of entries
	item    func(j int) pkgItem
	logName string
}

// resourceDumpSpec describes Resource Dump package k (0-based).
func (p *plan) resourceDumpSpec(k int) pkgSpec {
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = manifest.ResourceDumpManifest, p.o.At, p.o.At
	lo, hi := p.packageRange(k)
	name := p.partName(k)
	return pkgSpec{
		dir: "packages", name: name, logName: name,
		header: manifest.Header{Root: manifest.URLSet, Metadata: md,
			Links: []manifest.Link{manifest.NewLink("up", p.url("capabilitylist.xml"))}},
		manMod: p.o.At,
		record: true,
		n:      hi - lo,
		item:   func(j int) pkgItem { return pkgItem{r: p.resource(lo + j)} },
	}
}

// writePackage writes a package in two streaming passes. The first
// generates every body to hash it (and, with WriteResources, to write it as
// a file) and writes the manifest copy; the second writes the ZIP: the
// manifest first, then every body again, hashing the ZIP as it goes.
func (pk *packer) writePackage(ctx context.Context, spec pkgSpec) (pkgInfo, error) {
	if err := ctx.Err(); err != nil {
		return pkgInfo{}, err
	}
	dir := filepath.Join(pk.p.o.Dir, spec.dir)
	manPath := filepath.Join(dir, spec.name+".manifest.xml")
	m, err := pk.writeManifest(ctx, spec, manPath)
	if err != nil {
		return pkgInfo{}, err
	}
	zipPath := filepath.Join(dir, spec.name+".zip")
	info, err := pk.writeZip(ctx, spec, zipPath, manPath, m)
	if err != nil {
		return pkgInfo{}, err
	}
	if re, ok, err := repack(ctx, pk.p.o.Producer, zipPath); err != nil {
		return pkgInfo{}, err
	} else if ok {
		info = re
	}
	info.payload = m.payload
	pk.p.o.Logger.DebugContext(ctx, "bench: package written", "package", spec.logName, "bytes", info.length, "payload", m.payload)
	return info, nil
}

// pass1 is what the first pass learns for the second.
type pass1 struct {
	manCRC  uint32   // CRC-32 of the manifest
	manLen  int64    // length of the manifest
	payload int64    // sum of the bodies' lengths
	crcs    []uint32 // CRC-32 of the stored bodies, by index in the package
}

// writeManifest is the first pass: it generates and hashes every body of
// the package and writes the manifest copy to path. It keeps one CRC-32 per
// entry (the ZIP writer keeps far more per entry anyway).
func (pk *packer) writeManifest(ctx context.Context, spec pkgSpec, path string) (m pass1, err error) {
	f, err := os.Create(path)
	if err != nil {
		return pass1{}, fmt.Errorf("bench: manifest: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: manifest: %w", cerr)
		}
	}()
	mcrc, n := crc32.NewIEEE(), &counter{}
	mw, err := manifest.NewWriter(io.MultiWriter(f, mcrc, n), spec.header)
	if err != nil {
		return pass1{}, fmt.Errorf("bench: manifest %s: %w", path, err)
	}
	m.crcs = make([]uint32, spec.n)
	for j := range spec.n {
		if err := ctx.Err(); err != nil {
			return pass1{}, err
		}
		it := spec.item(j)
		r := &it.r
		md := manifest.NewMetadata()
		if it.change != "" {
			md.Change, md.Datetime = it.change, r.lastmod
		}
		if it.change != manifest.Deleted {
			h, err := pk.hashBody(r, spec.record)
			if err != nil {
				return pass1{}, err
			}
			m.crcs[j] = pk.crc.Sum32()
			m.payload += r.size
			md.Hashes, md.Length, md.Type, md.Path = h, r.size, r.typ, "/"+r.zipPath
		}
		if err := mw.Write(&manifest.Entry{Loc: r.uri, Lastmod: r.lastmod, Metadata: md}); err != nil {
			return pass1{}, fmt.Errorf("bench: manifest %s: %w", path, err)
		}
	}
	if err := mw.Close(); err != nil {
		return pass1{}, fmt.Errorf("bench: manifest %s: %w", path, err)
	}
	m.manCRC, m.manLen = mcrc.Sum32(), n.n
	return m, nil
}

// hashBody generates r's body once, returning its md5 and sha-256 and
// leaving its CRC-32 in pk.crc when the entry is stored. With record (and
// WriteResources) it also writes the body to its file (when it has one) and
// records the digests in the side file.
func (pk *packer) hashBody(r *resource, record bool) (fixity.Hashes, error) {
	pk.md5.Reset()
	pk.sha256.Reset()
	pk.crc.Reset()
	pk.body.reset(r.seed, r.index, r.size, r.text)
	var dst io.Writer = io.MultiWriter(pk.md5, pk.sha256)
	if r.stored {
		dst = io.MultiWriter(pk.md5, pk.sha256, pk.crc)
	}
	side := pk.side
	if !record {
		side = nil
	}
	var f *os.File
	if side != nil && r.rel != "" {
		path := filepath.Join(pk.p.o.Dir, "resources", filepath.FromSlash(r.rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fixity.Hashes{}, fmt.Errorf("bench: resource file: %w", err)
		}
		var err error
		if f, err = os.Create(path); err != nil {
			return fixity.Hashes{}, fmt.Errorf("bench: resource file: %w", err)
		}
		dst = io.MultiWriter(dst, f)
	}
	_, err := pk.body.WriteTo(dst)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fixity.Hashes{}, fmt.Errorf("bench: body of %s: %w", r.uri, err)
	}
	h := fixity.Hashes{MD5: pk.md5.Sum(nil), SHA256: pk.sha256.Sum(nil)}
	if side != nil {
		var rec [hashRecordLen]byte
		copy(rec[:], h.MD5)
		copy(rec[md5.Size:], h.SHA256)
		if _, err := side.WriteAt(rec[:], int64(r.index)*hashRecordLen); err != nil {
			return fixity.Hashes{}, fmt.Errorf("bench: digest record: %w", err)
		}
	}
	return h, nil
}

// writeZip is the second pass: it writes the package to path, the manifest
// (stored, sizes in the local header) first, and returns the package's
// length and digests.
func (pk *packer) writeZip(ctx context.Context, spec pkgSpec, path, manPath string, m pass1) (info pkgInfo, err error) {
	f, err := os.Create(path)
	if err != nil {
		return pkgInfo{}, fmt.Errorf("bench: package: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: package %s: %w", path, cerr)
		}
	}()
	zmd5, zsha, n := md5.New(), sha256.New(), &counter{}
	bw := bufio.NewWriterSize(io.MultiWriter(f, zmd5, zsha, n), 256<<10)
	zw := zip.NewWriter(bw)
	var fw *flate.Writer
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		// Entries are written one after the other: one flate writer serves
		// them all.
		if fw == nil {
			var err error
			fw, err = flate.NewWriter(w, flate.BestSpeed)
			return fw, err
		}
		fw.Reset(w)
		return fw, nil
	})

	if err := pk.copyManifest(zw, manPath, spec.manMod, m.manCRC, m.manLen); err != nil {
		return pkgInfo{}, fmt.Errorf("bench: package %s: %w", path, err)
	}
	for j := range spec.n {
		if err := ctx.Err(); err != nil {
			return pkgInfo{}, err
		}
		it := spec.item(j)
		if it.change == manifest.Deleted {
			continue
		}
		r := &it.r
		if err := pk.writeEntry(zw, r, m.crcs[j]); err != nil {
			return pkgInfo{}, fmt.Errorf("bench: package %s: entry %s: %w", path, r.zipPath, err)
		}
	}
	if err := zw.Close(); err != nil {
		return pkgInfo{}, fmt.Errorf("bench: package %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return pkgInfo{}, fmt.Errorf("bench: package %s: %w", path, err)
	}
	return pkgInfo{length: n.n, hashes: fixity.Hashes{MD5: zmd5.Sum(nil), SHA256: zsha.Sum(nil)}}, nil
}

// writeEntry adds r's body to the package: stored with crc (from the
// first pass) and its sizes in the local header; deflated into pk.deflated
// first, to put its sizes and CRC-32 in the local header too, unless the
// body is over maxRawDeflate (then with a data descriptor).
func (pk *packer) writeEntry(zw *zip.Writer, r *resource, crc uint32) error {
	pk.body.reset(r.seed, r.index, r.size, r.text)
	if r.stored {
		w, err := zw.CreateRaw(rawHeader(r.zipPath, zip.Store, r.lastmod, crc, r.size, r.size))
		if err != nil {
			return err
		}
		_, err = pk.body.WriteTo(w)
		return err
	}
	if r.size > maxRawDeflate {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: r.zipPath, Method: zip.Deflate, Modified: r.lastmod})
		if err != nil {
			return err
		}
		_, err = pk.body.WriteTo(w)
		return err
	}
	pk.deflated.Reset()
	if pk.fw == nil {
		fw, err := flate.NewWriter(&pk.deflated, flate.BestSpeed)
		if err != nil {
			return err
		}
		pk.fw = fw
	} else {
		pk.fw.Reset(&pk.deflated)
	}
	pk.crc.Reset()
	if _, err := pk.body.WriteTo(io.MultiWriter(pk.crc, pk.fw)); err != nil {
		return err
	}
	if err := pk.fw.Close(); err != nil {
		return err
	}
	w, err := zw.CreateRaw(rawHeader(r.zipPath, zip.Deflate, r.lastmod, pk.crc.Sum32(), int64(pk.deflated.Len()), r.size))
	if err != nil {
		return err
	}
	_, err = w.Write(pk.deflated.Bytes())
	return err
}

// copyManifest adds the manifest copy at manPath as the stored entry
// manifest.xml.
func (pk *packer) copyManifest(zw *zip.Writer, manPath string, mod time.Time, crc uint32, length int64) error {
	w, err := zw.CreateRaw(rawHeader("manifest.xml", zip.Store, mod, crc, length, length))
	if err != nil {
		return err
	}
	mf, err := os.Open(manPath)
	if err != nil {
		return err
	}
	defer mf.Close()
	n, err := io.CopyBuffer(w, mf, pk.copy)
	if err != nil {
		return err
	}
	if n != length {
		return fmt.Errorf("manifest copy changed: %d bytes, wrote %d", n, length)
	}
	return nil
}

// rawHeader returns the header of an entry whose CRC-32 and sizes are
// known, so that they go in the local header and no data descriptor
// follows: a reader that reads the archive as it arrives can find where
// each entry ends. It carries the same times as the headers that
// zip.Writer.CreateHeader writes.
func rawHeader(name string, method uint16, mod time.Time, crc uint32, csize, size int64) *zip.FileHeader {
	const zipVersion20 = 20
	mod = mod.UTC()
	fh := &zip.FileHeader{
		Name:               name,
		Method:             method,
		CRC32:              crc,
		CompressedSize64:   uint64(csize),
		UncompressedSize64: uint64(size),
		CreatorVersion:     zipVersion20,
		ReaderVersion:      zipVersion20,
		Modified:           mod,
	}
	//lint:ignore SA1019 CreateRaw does not derive the MS-DOS time from Modified.
	fh.ModifiedDate = uint16(mod.Day() + int(mod.Month())<<5 + (mod.Year()-1980)<<9)
	//lint:ignore SA1019 CreateRaw does not derive the MS-DOS time from Modified.
	fh.ModifiedTime = uint16(mod.Second()/2 + mod.Minute()<<5 + mod.Hour()<<11)
	// Extended timestamp extra field (0x5455), modification time only.
	var extra [9]byte
	binary.LittleEndian.PutUint16(extra[0:], 0x5455)
	binary.LittleEndian.PutUint16(extra[2:], 5)
	extra[4] = 1
	binary.LittleEndian.PutUint32(extra[5:], uint32(mod.Unix()))
	fh.Extra = extra[:]
	return fh
}
