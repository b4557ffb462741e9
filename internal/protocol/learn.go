package protocol

// The messages of protocol version 2 that learn what a service passes:
// LEARN turns counting on or off, HOT reads what was counted.

// Learn sets what the data plane counts of a UDP service's passed
// requests: each by its key, payload[KeyOff:].
type Learn struct {
	ServiceID uint32
	KeyOff    uint16
	ProbePort uint16 // UDP source port (host order) never answered nor counted; 0: none
	Enable    bool   // flags bit 0
	// Counts is the most passed requests a CPU counts a window while the
	// service learns (version 6; 0: the daemon's default, and in earlier
	// versions).
	Counts uint32
}

func (*Learn) Type() Type { return TypeLearn }

func (l *Learn) fields(c codec) {
	c.u32("service_id", &l.ServiceID)
	c.u16("key_off", &l.KeyOff)
	c.u16("probe_port", &l.ProbePort)
	c.flag("flags", &l.Enable)
	if c.version() >= Version6 {
		c.u32("counts", &l.Counts)
	} else if l.Counts != 0 {
		c.refuse("counts", "counts needs protocol version %d; this connection speaks version %d", Version6, c.version())
	}
}

// LearnReply is the empty reply to LEARN.
type LearnReply struct{ empty }

func (*LearnReply) Type() Type { return TypeLearn | ReplyBit }

// Hot asks for a service's most passed request forms of the last complete
// window, at most Max (0: as many as fit one reply), from the one at index
// From on (version 5; 0 in earlier versions): a hot set larger than one
// reply is read in pages.
type Hot struct {
	ServiceID uint32
	Max       uint32
	From      uint32
}

func (*Hot) Type() Type { return TypeHot }

func (h *Hot) fields(c codec) {
	c.u32("service_id", &h.ServiceID)
	c.u32("max", &h.Max)
	if c.version() >= Version5 {
		c.u32("from", &h.From)
	}
}

// HotRequest is one request form: how many times it passed, and its key
// (the payload from the service's key offset on).
type HotRequest struct {
	Passes uint32
	Key    []byte
}

func hotRequestFields(c codec, r *HotRequest) {
	c.u32("passes", &r.Passes)
	c.bytes16("key", &r.Key)
}

// minHotRequestSize is a HotRequest with an empty key.
const minHotRequestSize = 6

// HotReply holds the forms most passed first, over a window of WindowMS.
// In version 5 it also tells which window that was (Window, counted by
// santad from its start; it changes when a new window's set replaces the
// last) and how many forms the whole set holds (Total), so that a reader
// of pages knows where the set ends and whether it changed between them.
//
// Passes are scaled up to every passed request: in version 6 CountedPPM
// tells what share of them the data plane counted in the window, in
// millionths, so that a reader can tell how many counts a figure rests
// on (its passes times CountedPPM / 10^6).
type HotReply struct {
	WindowMS   uint32
	Window     uint32 // version 5
	Total      uint32 // version 5
	CountedPPM uint32 // version 6
	Requests   []HotRequest
}

func (*HotReply) Type() Type { return TypeHot | ReplyBit }

func (h *HotReply) fields(c codec) {
	c.u32("window_ms", &h.WindowMS)
	if c.version() >= Version5 {
		c.u32("window", &h.Window)
		c.u32("total", &h.Total)
	}
	if c.version() >= Version6 {
		c.u32("counted_ppm", &h.CountedPPM)
	}
	list(c, "requests", 4, 0, minHotRequestSize, &h.Requests, hotRequestFields)
}

// HotRequestSize is what r takes in a HOT reply.
func HotRequestSize(r *HotRequest) int {
	var s sizer
	hotRequestFields(&s, r)
	return s.n
}

// HotOverhead is what a HOT reply of version v takes besides its
// requests: the header, window_ms, window and total (version 5),
// counted_ppm (version 6) and the count.
func HotOverhead(v uint16) int {
	n := HeaderLen + 4 + 4 // window_ms and the count
	if v >= Version5 {
		n += 4 + 4
	}
	if v >= Version6 {
		n += 4
	}
	return n
}
