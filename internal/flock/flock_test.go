//go:build unix

package flock

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTryLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	a, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, err := TryLock(a); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := TryLock(b); ok || err != nil {
		t.Fatalf("second open of the file locked it too: %v %v", ok, err)
	}
	a.Close() // releases the lock
	if ok, err := TryLock(b); !ok || err != nil {
		t.Fatalf("after the holder closed: %v %v", ok, err)
	}
}
