package harness

import "testing"

// TestStageOf names the stage of typical stacks (leaf first): a kernel
// wins over what called it, the loopback server's work is its own.
func TestStageOf(t *testing.T) {
	for _, tc := range []struct {
		stack []string
		want  string
	}{
		{[]string{"github.com/klauspost/compress/flate.(*decompressor).huffmanBlock", "github.com/rsharvest/rsharvest/unzip.(*File).Open", "github.com/rsharvest/rsharvest/sink/fs.(*FS).Put"}, StageInflate},
		{[]string{"crypto/internal/fips140/sha256.blockAVX2", "crypto/sha256.(*Digest).Write", "github.com/rsharvest/rsharvest/fixity.(*Reader).Read"}, StageHash},
		{[]string{"crypto/md5.block", "github.com/rsharvest/rsharvest/fixity.(*Reader).Read"}, StageHash},
		{[]string{"encoding/xml.(*Decoder).Token", "github.com/rsharvest/rsharvest/manifest.(*Reader).Next"}, StageManifest},
		{[]string{"modernc.org/sqlite/lib.Xsqlite3VdbeExec", "github.com/rsharvest/rsharvest/state.(*Store).Commit"}, StageState},
		{[]string{"syscall.Syscall", "os.(*File).Write", "github.com/rsharvest/rsharvest/sink/fs.(*FS).Put"}, StageWrite},
		{[]string{"syscall.Syscall", "internal/poll.(*FD).Read", "net.(*conn).Read", "net/http.(*persistConn).Read"}, StageReceive},
		{[]string{"syscall.Syscall", "os.(*File).Write", "io.Copy", "github.com/rsharvest/rsharvest/fetch.(*Client).Download"}, StageSpool},
		{[]string{"syscall.Syscall", "os.(*File).ReadAt", "github.com/rsharvest/rsharvest/unzip.(*fastReader).Read", "io.CopyBuffer", "github.com/rsharvest/rsharvest/sink/fs.(*FS).Put"}, StageSpool},
		{[]string{"syscall.Syscall", "os.(*File).ReadAt", "net/http.(*conn).serve"}, StageServer},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, StageGC},
		{[]string{"runtime.mapassign", "github.com/rsharvest/rsharvest/pipeline.(*run).add"}, StageOther},
	} {
		if got := stageOf(tc.stack); got != tc.want {
			t.Errorf("stageOf(%q) = %q, want %q", tc.stack[0], got, tc.want)
		}
	}
}
