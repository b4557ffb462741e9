package rules

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/rule"
)

func conds(specs ...any) []rule.Condition {
	var cs []rule.Condition
	for i := 0; i < len(specs); i += 2 {
		cs = append(cs, rule.Condition{Offset: uint16(specs[i].(int)), Pattern: []byte(specs[i+1].(string))})
	}
	return cs
}

func TestRegions(t *testing.T) {
	tests := []struct {
		name  string
		conds []rule.Condition
		want  []Region
	}{
		{"paper figure 3", conds(0, "COMSYS", 0, "COM", 3, "SYS"), []Region{{0, 3}, {3, 3}}},
		{"cut at the next offset", conds(0, "abcdef", 2, "cdefgh"), []Region{{0, 2}, {2, 6}}},
		{"unsorted input", conds(9, "zz", 1, "a", 4, "bbbbbbbbbbb"), []Region{{1, 1}, {4, 5}, {9, 2}}},
		{"at most MaxRegionLen", conds(0, strings.Repeat("x", 100)), []Region{{0, MaxRegionLen}}},
		{"none", nil, []Region{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Regions(tt.conds, rule.MaxRegions)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Regions = %v; want %v", got, tt.want)
			}
			for _, c := range tt.conds {
				i := RegionOf(got, c)
				if i < 0 || got[i].Off != c.Offset || int(got[i].Len) > len(c.Pattern) {
					t.Errorf("RegionOf(%d %q) = %d", c.Offset, c.Pattern, i)
				}
			}
		})
	}
}

func TestRegionsErrors(t *testing.T) {
	var cs []rule.Condition
	for i := range 9 {
		cs = append(cs, rule.Condition{Offset: uint16(10 * i), Pattern: []byte("x")})
	}
	_, err := Regions(cs, 8)
	var le *rule.LimitError
	if !errors.As(err, &le) || le.Value != 9 || le.Limit != 8 {
		t.Fatalf("Regions = %v; want 9 offsets over the limit of 8", err)
	}
	if want := "number of distinct condition offsets is 9; the limit is 8"; err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
	if _, err := Regions(conds(0, "a", 3, ""), 8); err == nil {
		t.Error("Regions accepted an empty pattern")
	}
}

func TestRegionOfMissing(t *testing.T) {
	regions := []Region{{0, 3}, {3, 3}}
	if i := RegionOf(regions, rule.Condition{Offset: 2, Pattern: []byte("x")}); i != -1 {
		t.Fatalf("RegionOf(offset 2) = %d; want -1", i)
	}
}
