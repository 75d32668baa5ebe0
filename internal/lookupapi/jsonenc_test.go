package lookupapi

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendFloat checks that appendFloat writes what encoding/json
// writes, on scores of a few decimals (its short path) and on any float.
func TestAppendFloat(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, 0.1, 0.00001, 0.000001, 1e-7, 7.5, 9.8, 10, 0.97, 0.00043,
		123456.78901, 999999999.99999, 1e9, 1e21, 1e20, -1, -0.5, 1.0000000000000002, 0.1 + 0.2, math.MaxFloat64,
		math.SmallestNonzeroFloat64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, float64(rng.IntN(100001))/1e5, float64(rng.IntN(101))/10, rng.Float64(),
			float64(rng.Int64N(1e14))/1e5, math.Float64frombits(rng.Uint64()))
	}
	for _, f := range vals {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Fatalf("appendFloat(%b) = %s, want %s", f, got, want)
		}
	}
}

// TestAppendTime checks appendTime against encoding/json's RFC 3339 in
// UTC, over the whole range of its short path and beyond it.
func TestAppendTime(t *testing.T) {
	times := []time.Time{time.Unix(0, 0), time.Unix(maxUnixDate-1, 0), time.Unix(maxUnixDate, 0), time.Unix(-1, 0),
		time.Date(2000, 2, 29, 23, 59, 59, 999, time.UTC), time.Date(2100, 3, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		times = append(times, time.Unix(rng.Int64N(maxUnixDate), rng.Int64N(1e9)))
	}
	for _, tm := range times {
		want := `"` + tm.UTC().Format(time.RFC3339) + `"`
		if got := appendTime(nil, tm); string(got) != want {
			t.Fatalf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}
