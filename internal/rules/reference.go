package rules

import "github.com/santa-offload/santa/rule"

// RefRule is a rule with its stable id, as the reference matchers see it.
type RefRule struct {
	ID   uint32
	Rule rule.Rule
}

// Match is the reference matcher, the oracle the data plane is tested
// against: it tries every rule and does not use the index. A rule answers a
// payload if its condition matches (its bytes, and its length range) and
// the payload holds every byte its reply copies; among those the most
// specific wins: longest pattern, then lowest ID. A length range makes no
// rule more specific: two rules one request could match with the same
// pattern at the same offset never sit in one service (CheckDuplicates). Only the bytes the compiled reply copies count, not those of
// copies that later processors overwrite entirely, because that is all the
// data plane knows of the rule. Invalid rules never answer.
func Match(rules []RefRule, payload []byte) (RefRule, bool) {
	var best RefRule
	found := false
	for _, rr := range rules {
		if (!found || moreSpecific(rr, best)) && answers(rr.Rule, payload) {
			best, found = rr, true
		}
	}
	return best, found
}

// MatchIndexed finds the answer the way the data plane does, through the
// index BuildIndex made from regions and the rules in bySlot. For each region
// the request is long enough for, it hashes the region, looks up the root
// and walks down while the next node's end lies inside the payload,
// continuing the hash; in each node the first slot that answers is the
// node's best, and the deepest node's best is the region's. The regions'
// bests then compete by specificity, as in Match.
func MatchIndexed(regions []Region, index map[IndexKey]IndexNode, bySlot map[uint32]RefRule, payload []byte) (RefRule, bool) {
	var best RefRule
	found := false
	for ri, r := range regions {
		end := int(r.Off) + int(r.Len)
		if end > len(payload) {
			continue
		}
		key := IndexKey{Region: uint8(ri), End: uint16(end), Hash: FNV1a(FNVOffset, payload[r.Off:end])}
		var regionBest RefRule
		regionFound := false
		for range MaxDepth + 1 {
			node, ok := index[key]
			if !ok {
				break
			}
			if rr, ok := nodeBest(node, bySlot, payload); ok {
				regionBest, regionFound = rr, true
			}
			if node.NextEnd == 0 || int(node.NextEnd) > len(payload) {
				break
			}
			key.Hash = FNV1a(key.Hash, payload[key.End:node.NextEnd])
			key.End = node.NextEnd
		}
		if regionFound && (!found || moreSpecific(regionBest, best)) {
			best, found = regionBest, true
		}
	}
	return best, found
}

// nodeBest is the first of a node's slots whose rule answers the payload;
// slots are ordered most specific first.
func nodeBest(node IndexNode, bySlot map[uint32]RefRule, payload []byte) (RefRule, bool) {
	for _, s := range node.Slots {
		if rr, ok := bySlot[s]; ok && answers(rr.Rule, payload) {
			return rr, true
		}
	}
	return RefRule{}, false
}

// answers reports whether r matches payload and can build its reply from it.
func answers(r rule.Rule, payload []byte) bool {
	if !r.Condition.Matches(payload) {
		return false
	}
	c, err := rule.Compile(r)
	return err == nil && c.SourceEnd() <= len(payload)
}

// moreSpecific orders answers: longer pattern first, then lower ID.
func moreSpecific(a, b RefRule) bool {
	la, lb := len(a.Rule.Condition.Pattern), len(b.Rule.Condition.Pattern)
	return la > lb || la == lb && a.ID < b.ID
}
