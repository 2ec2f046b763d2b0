package harvestlist

import (
	"context"
	"encoding/xml"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/internal/xmlcap"
	"github.com/rsharvest/rsharvest/source"
)

// Name is the protocol's name in the registry.
const Name = "harvest-list"

// Protocol returns the harvest list as a protocol of the registry; with
// --protocol auto, a source is a harvest list when its URL may be one
// (MayBeList) and the document there begins with a harvestList element in
// Namespace.
func Protocol() source.Protocol {
	return source.Protocol{
		Name: Name,
		Help: "a Metacat-style harvest list (harvestList.xsd): each document at its highest revision",
		New: func(_ source.Settings, env source.Services) (source.Planner, error) {
			return &Planner{OpenDocument: env.OpenDocument, ScratchDir: env.ScratchDir, Log: env.Log}, nil
		},
		Probe: func(ctx context.Context, c *fetch.Client, url string) (bool, error) {
			if !MayBeList(url) {
				return false, nil
			}
			b, err := c.Open(ctx, url)
			if err != nil {
				return false, err
			}
			defer b.Close()
			return IsList(io.LimitReader(b, 1<<20)), nil
		},
		CompareVersions: CompareRevisions,
		NoDigests:       true,
		WholeListing:    true,
	}
}

// MayBeList reports whether src may be a harvest list's URL, to be asked
// for it: not a site's root, nor a ResourceSync document by its name.
func MayBeList(src string) bool {
	u, err := url.Parse(src)
	if err != nil || u.Path == "" || u.Path == "/" {
		return false
	}
	p := strings.ToLower(u.Path)
	for _, rs := range []string{"/.well-known/", "resourcesync", "capabilitylist", "sourcedescription", "resourcelist", "resourcedump", "changelist", "changedump"} {
		if strings.Contains(p, rs) {
			return false
		}
	}
	return true
}

// IsList reports whether r begins as a harvest list: its first element
// is harvestList in Namespace.
func IsList(r io.Reader) bool {
	dec := xmlcap.NewDecoder(r, MaxTokenSize, MaxDepth)
	dec.Strict = false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local == "harvestList" && se.Name.Space == Namespace
		}
	}
}

// CompareRevisions orders two revisions as numbers (a revision that is
// not one is older than any that is).
func CompareRevisions(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA != nil && errB != nil:
		return 0
	case errA != nil:
		return -1
	case errB != nil:
		return 1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
