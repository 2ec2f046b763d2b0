package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/rsharvest/rsharvest/errclass"
)

// ErrIndivisible is wrapped by the error of a Parter's Parts when the
// task does not divide: it is planned whole instead, and the parts already
// handed over are dropped.
var ErrIndivisible = errors.New("the task does not divide")

// maxPlanWindow bounds the memory a plan's decoder may take (its window),
// far above what a plan this program writes asks for.
const maxPlanWindow = 1 << 30

// PlanBuffer gathers the units of a part's plan (see Parter): packages,
// records and documents, each as it was planned (a package's Index is
// not kept: the planner that reads the plan sets it again). Its zero
// value is ready to use; Close releases it. It is not safe for
// concurrent use.
type PlanBuffer struct {
	raw   bytes.Buffer
	units int
	enc   *zstd.Encoder
}

// planUnit is how a unit is written in a plan: one field set.
type planUnit struct {
	P *Package  `json:",omitempty"`
	R *Record   `json:",omitempty"`
	D *Document `json:",omitempty"`
}

// Add adds u to the plan. Only packages, records without a body of their
// own (Record.Open) and documents can be added: anything else is a fatal
// error.
func (b *PlanBuffer) Add(u Unit) error {
	var pu planUnit
	switch {
	case u.Package != nil:
		pu.P = u.Package
	case u.Record != nil && u.Record.Open == nil:
		pu.R = u.Record
	case u.Document != nil:
		pu.D = u.Document
	default:
		return errclass.Fatalf("plan: a unit that cannot be planned apart: %+v", u)
	}
	js, err := json.Marshal(pu)
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	b.raw.Write(js)
	b.raw.WriteByte('\n')
	b.units++
	return nil
}

// Len returns how many units were added since the last Take.
func (b *PlanBuffer) Len() int { return b.units }

// Take returns the plan of the units added since the last Take,
// compressed, for ReadPlan, and empties the buffer.
func (b *PlanBuffer) Take() ([]byte, error) {
	if b.enc == nil {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, errclass.Fatalf("plan: %w", err)
		}
		b.enc = enc
	}
	plan := b.enc.EncodeAll(b.raw.Bytes(), nil)
	b.raw.Reset()
	b.units = 0
	return plan, nil
}

// Close releases the buffer's encoder.
func (b *PlanBuffer) Close() {
	if b.enc != nil {
		b.enc.Close()
		b.enc = nil
	}
}

// ReadPlan emits, in order, the units of plan (a PlanBuffer's Take):
// each decoded as it is reached, so a plan is never held whole. A plan
// that cannot be read is a fatal error: it was written by this program.
func ReadPlan(ctx context.Context, plan []byte, emit func(context.Context, Unit) error) error {
	dec, err := zstd.NewReader(bytes.NewReader(plan), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxPlanWindow))
	if err != nil {
		return errclass.Fatalf("plan: %w", err)
	}
	defer dec.Close()
	jd := json.NewDecoder(dec)
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var pu planUnit
		err := jd.Decode(&pu)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errclass.Fatalf("plan: unit %d: %w", n, err)
		}
		var u Unit
		switch {
		case pu.P != nil && pu.R == nil && pu.D == nil:
			u.Package = pu.P
		case pu.R != nil && pu.P == nil && pu.D == nil:
			u.Record = pu.R
		case pu.D != nil && pu.P == nil && pu.R == nil:
			u.Document = pu.D
		default:
			return errclass.Fatalf("plan: unit %d: not one package, record or document", n)
		}
		if err := emit(ctx, u); err != nil {
			return err
		}
	}
}
