package harvest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/state"
)

// exampleSource generates a small ResourceSync source of 20 resources in
// dir and serves it on 127.0.0.1.
func exampleSource(ctx context.Context, dir string) (*bench.Server, error) {
	if _, err := bench.Generate(ctx, bench.GenOptions{Dir: dir, Resources: 20, Packages: 2, Seed: 1, MeanSize: 512}); err != nil {
		return nil, err
	}
	return bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{})
}

// Harvesting a source into a directory, as a library: a state store, a
// Harvester on it, and a job.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "rsharvest-example-")
	defer os.RemoveAll(dir)
	src, err := exampleSource(ctx, filepath.Join(dir, "source"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()

	st, err := state.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	h := &harvest.Harvester{Store: st}
	job := harvest.DefaultJob()
	job.Source, job.Sinks = src.URL, []string{"fs:" + filepath.Join(dir, "mirror")}
	rep, err := h.Run(ctx, harvest.Sync, job)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Mode, rep.Status, rep.Resources.Written, "written")
	// Output: baseline ok 20 written
}
