// Package xmlcaptest holds the differential check of xmlcap's Decoder
// against encoding/xml, for the fuzz targets of every parser that reads
// through one: each runs it over its own corpus.
package xmlcaptest

import (
	"bytes"
	"encoding/xml"
	"math"
	"reflect"
	"testing"

	"github.com/rsharvest/rsharvest/internal/xmlcap"
)

// Agree fails t unless a strict xmlcap.Decoder reading data, under limits
// data cannot reach, returns the tokens encoding/xml's strict Decoder
// returns (with xmlcap.CharsetReader), in the same order, each ending at
// the same offset and line, and then the same error, word for word, or
// io.EOF at the same token.
func Agree(t testing.TB, data []byte) {
	t.Helper()
	ref := xml.NewDecoder(bytes.NewReader(data))
	ref.Strict = true
	ref.CharsetReader = xmlcap.CharsetReader
	got := xmlcap.NewDecoder(bytes.NewReader(data), math.MaxInt32, math.MaxInt32)
	for i := 0; ; i++ {
		rt, rerr := ref.Token()
		gt, gerr := got.Token()
		if rerr != nil || gerr != nil {
			if rerr == nil || gerr == nil || rerr.Error() != gerr.Error() {
				t.Fatalf("token %d: encoding/xml %v, %v; xmlcap %v, %v\ninput %q", i, rt, rerr, gt, gerr, data)
			}
			return
		}
		rt, gt = xml.CopyToken(rt), xml.CopyToken(gt)
		if !reflect.DeepEqual(rt, gt) {
			t.Fatalf("token %d: encoding/xml %#v; xmlcap %#v\ninput %q", i, rt, gt, data)
		}
		if ro, gro := ref.InputOffset(), got.InputOffset(); ro != gro {
			t.Fatalf("token %d (%#v): encoding/xml at offset %d, xmlcap %d\ninput %q", i, rt, ro, gro, data)
		}
		if rl, _ := ref.InputPos(); true {
			if gl, _ := got.InputPos(); rl != gl {
				t.Fatalf("token %d (%#v): encoding/xml at line %d, xmlcap %d\ninput %q", i, rt, rl, gl, data)
			}
		}
	}
}
