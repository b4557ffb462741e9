package protocol

// PathStats (version 2, added after its other messages) asks for the
// host's path counters: for every program exit, how many packets left by
// it (model.PathStats). Every client may read them, as STATUS.
type PathStats struct{ empty }

func (*PathStats) Type() Type { return TypePathStats }

// PathStatsReply holds the path counters by name, in the order of their
// names.
type PathStatsReply struct {
	Paths []PathCount
}

// PathCount is one path counter, summed over CPUs.
type PathCount struct {
	Name  string
	Count uint64
}

// MaxPathName bounds a path counter's name.
const MaxPathName = 64

const minPathCountSize = 2 + 8 // empty name, count

func (*PathStatsReply) Type() Type { return TypePathStats | ReplyBit }

func (r *PathStatsReply) fields(c codec) {
	list(c, "paths", 2, 0, minPathCountSize, &r.Paths, func(c codec, p *PathCount) {
		c.string16("name", &p.Name, MaxPathName)
		c.u64("count", &p.Count)
	})
}
