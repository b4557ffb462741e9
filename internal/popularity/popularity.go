// Package popularity draws which of n requests a load generator sends,
// uniformly or with Zipf popularity: the XDP generator (bench/gen), the
// verifying DNS client (internal/dnsload) and dnsperf query files alike.
package popularity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Popularity is how often each of n requests is sent: Uniform, or Zipf with
// exponent S (request k, counting from 1, in proportion to 1/k^S).
type Popularity struct {
	Zipf bool
	S    float64
}

// Uniform sends every request equally often.
var Uniform = Popularity{}

// Parse reads "uniform" or "zipf:S" (for example "zipf:0.99").
func Parse(s string) (Popularity, error) {
	if s == "uniform" {
		return Uniform, nil
	}
	v, ok := strings.CutPrefix(s, "zipf:")
	if !ok {
		return Popularity{}, fmt.Errorf("popularity %q: want uniform or zipf:S", s)
	}
	exp, err := strconv.ParseFloat(v, 64)
	if err != nil || !(exp >= 0) || math.IsInf(exp, 0) { // NaN compares false
		return Popularity{}, fmt.Errorf("popularity %q: S must be a number ≥ 0", s)
	}
	return Popularity{Zipf: true, S: exp}, nil
}

func (p Popularity) String() string {
	if !p.Zipf {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(p.S, 'g', -1, 64)
}

// Sequence draws length request indices in [0, n) from p with a fixed
// seed, so that runs are repeatable. Any S ≥ 0 works, 1 included (the
// standard library's Zipf needs S > 1): it samples the inverse of the
// cumulative distribution by binary search.
func (p Popularity) Sequence(n, length int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, seed^0x5a17a))
	seq := make([]uint32, length)
	if !p.Zipf {
		for i := range seq {
			seq[i] = uint32(rng.IntN(n))
		}
		return seq
	}
	cdf := make([]float64, n)
	total := 0.0
	for k := range cdf {
		total += math.Pow(float64(k+1), -p.S)
		cdf[k] = total
	}
	for i := range seq {
		u := rng.Float64() * total
		k, _ := slices.BinarySearch(cdf, u)
		seq[i] = uint32(min(k, n-1))
	}
	return seq
}
