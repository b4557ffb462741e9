package mcagent

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"syscall"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/batch"
)

// install offloads what a window learned: newcomers are added on every UDP
// service, within the byte budget; offloaded keys read again have their
// rules replaced (in a transaction per service); offloaded keys memcached
// no longer has, or whose reply no longer fits a rule, are deleted.
// Called without a.mu.
func (a *agent) install(l learned) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range l.failed {
		a.skip(f.form, f.err)
		if f.k != nil && a.keys[f.k.form] == f.k {
			switch r := skipReason(f.err); r {
			case skipMiss, skipTooLarge, skipChanged, skipMalformed:
				a.deleteKeys([]*key{f.k}, r)
			}
		}
	}
	if a.sd == nil || a.leader == nil || a.leader != l.leader || len(l.keys) == 0 {
		return // the domain ended meanwhile: its generations are dead
	}
	// The budget's bytes in use, counted only with a budget: the watch
	// installs 20 times a second, and at 100,000 keys counting them each
	// time took 4 % of the server core.
	used := 0
	if a.cfg.MaxBytes > 0 {
		for _, k := range a.keys {
			used += k.size()
		}
	}
	slices.SortFunc(l.keys, func(x, y learnedKey) int { return cmp.Or(cmp.Compare(y.rate, x.rate), cmp.Compare(x.form, y.form)) })
	var added, replaced []*key
	confirmed := 0
	for _, lk := range l.keys {
		k := &key{form: lk.form, mkey: lk.mkey, reply: lk.reply, rate: lk.rate, learned: lk.read, deadline: lk.deadline, gen: lk.gen,
			checked: lk.checked, rebuilds: lk.rebuilds}
		old := a.keys[lk.form]
		switch {
		case lk.old != nil && old != lk.old:
			continue // deleted meanwhile
		case old != nil && old.sameRule(k):
			// Read again (max_age) and found as its rule has it: a
			// replace would change nothing but cost santad an index
			// update (at 100,000 keys a 30-s max_age is 3,300 a second).
			old.learned, old.checked, old.rebuilds, old.killedAt = k.learned, k.checked, k.rebuilds, time.Time{}
			confirmed++
		case old != nil:
			used += k.size() - old.size()
			old.reply, old.learned, old.deadline, old.gen, old.checked, old.rebuilds = k.reply, k.learned, k.deadline, k.gen, k.checked, k.rebuilds
			old.killedAt = time.Time{}
			replaced = append(replaced, old)
		case a.cfg.MaxBytes > 0 && used+k.size() > a.cfg.MaxBytes:
			continue
		default:
			used += k.size()
			a.added++
			k.seq = a.added
			a.keys[k.form] = k
			a.watched = append(a.watched, k)
			added = append(added, k)
		}
	}
	udp := a.udpServices()
	for _, sv := range udp {
		a.addKeys(a.sd, sv, added)
		if a.sd == nil {
			return
		}
		a.replaceKeys(sv, replaced)
		if a.sd == nil {
			return
		}
	}
	a.stats.installed += a.kept(added)
	a.stats.refreshed += a.kept(replaced)
	a.stats.confirmed += uint64(confirmed)
}

// kept is how many of keys are still offloaded: santad's refusals delete
// theirs. Called with a.mu held.
func (a *agent) kept(keys []*key) uint64 {
	n := uint64(0)
	for _, k := range keys {
		if a.keys[k.form] == k {
			n++
		}
	}
	return n
}

// sameRule is whether k, read again, makes the rule o was installed with:
// the same generation (no write since: the guard is the same), reply and
// deadline.
func (o *key) sameRule(k *key) bool {
	return o.gen == k.gen && o.deadline.Equal(k.deadline) && bytes.Equal(o.reply, k.reply)
}

// size is what a key costs in the budget: its pattern and reply bytes.
func (k *key) size() int { return len(k.form) + len(k.reply) }

// guarded is k's rule with its guard as of now: the deadline is the
// item's earliest expiry less ExpiryMargin, the time santad may take to
// apply it (the deadline counts from then). nil if that has passed.
func (a *agent) guarded(k *key, now time.Time) *client.GuardedRule {
	var expiresIn time.Duration
	if !k.deadline.IsZero() {
		if expiresIn = k.deadline.Sub(now) - time.Duration(a.cfg.ExpiryMargin); expiresIn <= 0 {
			return nil
		}
	}
	return &client.GuardedRule{Rule: getRule([]byte(k.form), k.reply), Guard: k.gen.Guard(k.mkey, expiresIn)}
}

// addKeys adds keys' rules to a UDP service, in batches that fit a
// message. A key santad refuses is dropped (and not tried again for
// SkipRetry); one whose deadline is too near, or whose batch took santad
// longer than ExpiryMargin to apply, is deleted. Called with a.mu held.
func (a *agent) addKeys(sd Santad, sv *service, keys []*key) {
	for len(keys) > 0 {
		start := a.now()
		var batchKeys []*key
		var rules []client.GuardedRule
		for _, k := range keys {
			if a.keys[k.form] != k {
				continue // deleted meanwhile
			}
			if r := a.guarded(k, start); r != nil {
				batchKeys, rules = append(batchKeys, k), append(rules, *r)
			} else {
				a.deleteKeys([]*key{k}, skipExpiring)
			}
		}
		n := batch.Fitting(rules, func(r client.GuardedRule) int { return batch.AddSize(r.Rule, r.Guard) })
		ids, err := sd.AddGuardedRules(sv.id, rules[:n])
		var refusal *client.Error
		switch {
		case err == nil:
			for i, k := range batchKeys[:n] {
				sv.note(k, ids[i])
			}
			a.checkSlow(sv, batchKeys[:n], start)
			keys = batchKeys[n:]
		case errors.As(err, &refusal) && refusal.Code == syscall.EDQUOT && refusal.Index != client.NoIndex && int(refusal.Index) < n:
			// Over the quota from this key on: only those before it are
			// sent again, and the rest are not offloaded for SkipRetry.
			// Refused one by one, they took a round trip each, under a.mu.
			i := int(refusal.Index)
			over := batchKeys[i:]
			a.log.Warn("santad refuses rules over the quota", "service", sv.id, "refused", len(over), "err", err)
			for _, k := range over {
				a.skip(k.form, skipf(skipRefused, "%v", err))
			}
			a.deleteKeys(over, skipRefused)
			keys = batchKeys[:i]
		case errors.As(err, &refusal) && refusal.Index != client.NoIndex && int(refusal.Index) < n:
			bad := batchKeys[refusal.Index]
			a.log.Warn("santad refuses a rule", "service", sv.id, "key", bad, "err", err)
			a.skip(bad.form, skipf(skipRefused, "%v", err))
			a.deleteKeys([]*key{bad}, skipRefused)
			keys = slices.Delete(batchKeys, int(refusal.Index), int(refusal.Index)+1)
		default:
			a.failed("adding rules", err)
			a.dropRefused(batchKeys)
			return
		}
	}
}

// dropRefused deletes keys santad refused to take as a whole (the host's
// rule capacity, say) if the connection stayed: they have no rule, or
// one of a reply or generation the agent no longer has, and learned anew
// they get one. Kept, they would look offloaded, be read again and
// confirmed, and have none. Called with a.mu held.
func (a *agent) dropRefused(keys []*key) {
	if a.sd != nil {
		a.deleteKeys(keys, skipRefused)
	}
}

// replaceKeys replaces keys' rules on a UDP service with their new reply
// and guard, in one transaction. Called with a.mu held.
func (a *agent) replaceKeys(sv *service, keys []*key) {
	if len(keys) == 0 {
		return
	}
	start := a.now()
	var entries []client.RuleEntry
	var done []*key
	for _, k := range keys {
		id, ok := sv.rules[k]
		if !ok {
			continue
		}
		r := a.guarded(k, start)
		if r == nil {
			a.deleteKeys([]*key{k}, skipExpiring)
			continue
		}
		entries = append(entries, client.RuleEntry{RuleID: id, Rule: r.Rule, Guard: r.Guard})
		done = append(done, k)
	}
	if len(entries) == 0 {
		return
	}
	txn, err := a.sd.Begin(sv.id)
	if err != nil {
		a.failed("beginning a transaction", err)
		a.dropRefused(done)
		return
	}
	for len(entries) > 0 {
		n := batch.Fitting(entries, batch.ReplaceSize)
		if err := txn.ReplaceRules(entries[:n]); err != nil {
			txn.Abort()
			a.failed("replacing rules", err)
			a.dropRefused(done)
			return
		}
		entries = entries[n:]
	}
	if _, err := txn.Commit(); err != nil {
		a.failed("committing replaced rules", err)
		a.dropRefused(done)
		return
	}
	a.checkSlow(sv, done, start)
}

// checkSlow deletes the rules with a deadline of keys santad took longer
// than ExpiryMargin to apply (since start, before their guards were made):
// their deadline may then be past their item's. Called with a.mu held.
func (a *agent) checkSlow(sv *service, keys []*key, start time.Time) {
	if a.now().Sub(start) <= time.Duration(a.cfg.ExpiryMargin) {
		return
	}
	var slow []*key
	for _, k := range keys {
		if !k.deadline.IsZero() {
			slow = append(slow, k)
		}
	}
	a.log.Warn("santad applied rules later than expiry_margin: deleting those with a deadline", "service", sv.id,
		"took", a.now().Sub(start), "expiry_margin", a.cfg.ExpiryMargin, "rules", len(slow))
	a.deleteKeys(slow, skipSlow)
}

// note records k's rule id on the service.
func (sv *service) note(k *key, id uint32) {
	sv.rules[k] = id
	sv.byRule[id] = k
	sv.hits[id] = 0
}

// deleteKeys deletes keys' rules from every UDP service and forgets them,
// counting them under cause. Called with a.mu held.
func (a *agent) deleteKeys(keys []*key, cause string) {
	if len(keys) == 0 {
		return
	}
	byService := map[*service][]uint32{}
	for _, k := range keys {
		if a.keys[k.form] != k {
			continue // deleted already
		}
		for _, sv := range a.services {
			if id, ok := sv.rules[k]; ok {
				delete(sv.rules, k)
				delete(sv.byRule, id)
				delete(sv.hits, id)
				byService[sv] = append(byService[sv], id)
			}
		}
		delete(a.keys, k.form)
		a.stats.deleted[cause]++
	}
	for sv, ids := range byService {
		if a.sd == nil {
			return // the next connection takes the services up afresh
		}
		a.deleteRules(sv, ids)
	}
}

// deleteRules deletes rules of a service (batch.Delete: one santad does not
// have, its service's socket closed meanwhile, is left out). Called with
// a.mu held.
func (a *agent) deleteRules(sv *service, ids []uint32) {
	if err := deleteIDs(a.sd, sv.id, ids); err != nil {
		a.failed("deleting rules", err)
	}
}

// deleteIDs deletes rules of a service through sd, in batches.
func deleteIDs(sd Santad, service uint32, ids []uint32) error {
	return batch.Delete(ids, func(b []uint32) error { return sd.DeleteRules(service, b) }, nil)
}

// sortedKeys is every offloaded key, hottest first (ties: oldest first).
// It sorts values, not pointers: at 100,000 keys, following each pointer
// in the comparisons made this sort a tenth of the server core. Called
// with a.mu held.
func (a *agent) sortedKeys() []*key {
	type ranked struct {
		rate float64
		seq  uint64
		k    *key
	}
	rs := make([]ranked, 0, len(a.keys))
	for _, k := range a.keys {
		rs = append(rs, ranked{k.rate, k.seq, k})
	}
	slices.SortFunc(rs, func(x, y ranked) int { return cmp.Or(cmp.Compare(y.rate, x.rate), cmp.Compare(x.seq, y.seq)) })
	keys := make([]*key, len(rs))
	for i, r := range rs {
		keys[i] = r.k
	}
	return keys
}
