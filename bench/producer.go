package bench

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/rsharvest/rsharvest/fixity"
)

// The producers GenOptions.Producer names.
const (
	ProducerRsharvest = "rsharvest"
	ProducerPython1   = "python-1"
	ProducerPython6   = "python-6"
	ProducerJava      = "java"
)

// Producers lists the producers, the generator's own first.
func Producers() []string {
	return []string{ProducerRsharvest, ProducerPython1, ProducerPython6, ProducerJava}
}

//go:embed repack.py
var repackScript string

//go:embed pyjob.py
var pythonJob string

// PythonJob returns bench/pyjob.py: the job of rsharvest's baseline
// written plainly in Python, one process per package (download, inflate,
// check the length and the strongest digest, or every digest, against the
// manifest, write each file). Run as python3 -c SCRIPT VERIFY BASE_URL
// OUT_DIR PACKAGE_NAME..., VERIFY "strongest" or "all"; it prints the
// number of entries written.
func PythonJob() string { return pythonJob }

//go:embed oaijob.py
var pythonOAIJob string

// PythonOAIJob returns bench/oaijob.py: an OAI-PMH harvest written plainly
// in Python (ListRecords, oai_dc, through its resumption tokens, one list
// at a time, each record's metadata written to a file of its own). Run as
// python3 -c SCRIPT BASE_URL OUT_DIR; it prints the number of records
// written.
func PythonOAIJob() string { return pythonOAIJob }

// repack rewrites the package at path as producer writes it (see
// GenOptions.Producer) and returns its new length and digests; the
// rsharvest producer leaves it as it is (ok false).
func repack(ctx context.Context, producer, path string) (info pkgInfo, ok bool, err error) {
	if producer == "" || producer == ProducerRsharvest {
		return pkgInfo{}, false, nil
	}
	tmp := path + ".repack"
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, "python3", "-c", repackScript, producer, path, tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return pkgInfo{}, false, fmt.Errorf("bench: producer %s (python3 bench/repack.py): %w: %s", producer, err, stderr.Bytes())
	}
	f, err := os.Open(tmp)
	if err != nil {
		return pkgInfo{}, false, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	m, s := md5.New(), sha256.New()
	n, err := io.Copy(io.MultiWriter(m, s), f)
	if err != nil {
		return pkgInfo{}, false, fmt.Errorf("bench: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return pkgInfo{}, false, fmt.Errorf("bench: %w", err)
	}
	return pkgInfo{length: n, hashes: fixity.Hashes{MD5: m.Sum(nil), SHA256: s.Sum(nil)}}, true, nil
}
