package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The JSON form of messages that testdata/protocol/vectors.json uses: body
// fields by their document names, byte strings in hex, counts implied by
// list lengths. It is one more codec, so it follows the same field lists as
// the wire.

// object is a JSON object that keeps its keys in the order they were set,
// which is the order of docs/protocol.md.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kv, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kv...), ':'), v...)
	}
	return append(b, '}'), nil
}

// jsonEncoder builds the JSON form of a body.
type jsonEncoder struct {
	v     uint16 // the body's protocol version
	obj   object
	lists []string // lists counted, which are [] if no item sets them
}

func (e *jsonEncoder) version() uint16               { return e.v }
func (e *jsonEncoder) refuse(string, string, ...any) {} // Encode refuses first

func (e *jsonEncoder) u8(name string, v *uint8)   { e.obj.set(name, *v) }
func (e *jsonEncoder) u16(name string, v *uint16) { e.obj.set(name, *v) }
func (e *jsonEncoder) u32(name string, v *uint32) { e.obj.set(name, *v) }
func (e *jsonEncoder) u64(name string, v *uint64) { e.obj.set(name, *v) }
func (e *jsonEncoder) zero(name string)           { e.obj.set(name, 0) }
func (e *jsonEncoder) bytes16(name string, v *[]byte) {
	e.obj.set(name, hex.EncodeToString(*v))
}
func (e *jsonEncoder) string16(name string, v *string, _ int) { e.obj.set(name, *v) }
func (e *jsonEncoder) addr(name string, v *[16]byte)          { e.obj.set(name, hex.EncodeToString(v[:])) }

func (e *jsonEncoder) flag(name string, v *bool) {
	n := 0
	if *v {
		n = 1
	}
	e.obj.set(name, n)
}

func (e *jsonEncoder) count(name string, _, _, _, n int) int {
	e.lists = append(e.lists, name)
	return n
}

func (e *jsonEncoder) elem(list string, _ int, f func(codec)) {
	items, _ := e.obj.vals[list].([]any)
	e.obj.set(list, append(items, encodeJSON(e.v, f)))
}

func (e *jsonEncoder) object(name string, f func(codec)) { e.obj.set(name, encodeJSON(e.v, f)) }

func (e *jsonEncoder) variant(kinds []string, kind *uint8, f func(codec)) {
	e.object(kinds[*kind], f)
}

// encodeJSON is the JSON value of what f visits: an object, or the value
// of the one field without a name.
func encodeJSON(v uint16, f func(codec)) any {
	e := jsonEncoder{v: v}
	f(&e)
	for _, l := range e.lists {
		if _, ok := e.obj.vals[l]; !ok {
			e.obj.set(l, []any{})
		}
	}
	if len(e.obj.keys) == 1 && e.obj.keys[0] == "" {
		return e.obj.vals[""]
	}
	return &e.obj
}

// jsonDecoder fills a body from its JSON form.
type jsonDecoder struct {
	v     uint16 // the body's protocol version
	raw   json.RawMessage
	obj   map[string]json.RawMessage // raw as an object, once needed
	lists map[string][]json.RawMessage
	err   error
}

// get unmarshals field name (the whole value if name is empty) into v.
func (d *jsonDecoder) get(name string, v any) {
	if d.err != nil {
		return
	}
	raw := d.raw
	if name != "" {
		if d.obj == nil {
			if err := json.Unmarshal(d.raw, &d.obj); err != nil {
				d.err = err
				return
			}
		}
		var ok bool
		if raw, ok = d.obj[name]; !ok {
			d.err = fmt.Errorf("%s is missing", name)
			return
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		d.err = fmt.Errorf("%s: %w", name, err)
	}
}

func (d *jsonDecoder) version() uint16 { return d.v }

func (d *jsonDecoder) refuse(name, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

func (d *jsonDecoder) u8(name string, v *uint8)               { d.get(name, v) }
func (d *jsonDecoder) u16(name string, v *uint16)             { d.get(name, v) }
func (d *jsonDecoder) u32(name string, v *uint32)             { d.get(name, v) }
func (d *jsonDecoder) u64(name string, v *uint64)             { d.get(name, v) }
func (d *jsonDecoder) string16(name string, v *string, _ int) { d.get(name, v) }

func (d *jsonDecoder) flag(name string, v *bool) {
	var n uint8
	d.get(name, &n)
	*v = n == 1
	if n > 1 && d.err == nil {
		d.err = fmt.Errorf("%s is %d, not 0 or 1", name, n)
	}
}

func (d *jsonDecoder) zero(name string) {
	var n uint8
	d.get(name, &n)
	if n != 0 && d.err == nil {
		d.err = fmt.Errorf("%s is %d, not 0", name, n)
	}
}

func (d *jsonDecoder) hex(name string) []byte {
	var s string
	d.get(name, &s)
	b, err := hex.DecodeString(s)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("%s: %w", name, err)
	}
	return b
}

func (d *jsonDecoder) bytes16(name string, v *[]byte) { *v = d.hex(name) }

func (d *jsonDecoder) addr(name string, v *[16]byte) {
	if b := d.hex(name); len(b) == len(v) {
		copy(v[:], b)
	} else if d.err == nil {
		d.err = fmt.Errorf("%s is %d bytes, not %d", name, len(b), len(v))
	}
}

func (d *jsonDecoder) count(name string, _, _, _, _ int) int {
	var items []json.RawMessage
	d.get(name, &items)
	if d.lists == nil {
		d.lists = map[string][]json.RawMessage{}
	}
	d.lists[name] = items
	return len(items)
}

func (d *jsonDecoder) elem(list string, i int, f func(codec)) { d.sub(d.lists[list][i], f) }

func (d *jsonDecoder) object(name string, f func(codec)) {
	var raw json.RawMessage
	d.get(name, &raw)
	d.sub(raw, f)
}

func (d *jsonDecoder) sub(raw json.RawMessage, f func(codec)) {
	if d.err != nil {
		return
	}
	s := jsonDecoder{v: d.v, raw: raw}
	f(&s)
	d.err = s.err
}

func (d *jsonDecoder) variant(kinds []string, kind *uint8, f func(codec)) {
	var obj map[string]json.RawMessage
	d.get("", &obj)
	for k, name := range kinds {
		if raw, ok := obj[name]; ok && name != "" && len(obj) == 1 {
			*kind = uint8(k)
			d.sub(raw, f)
			return
		}
	}
	if d.err == nil {
		d.err = fmt.Errorf("%s names no single kind of %q", d.raw, kinds)
	}
}

// jsonMessage is a message in the JSON form of the vectors.
type jsonMessage struct {
	Version uint16          `json:"version"`
	Type    string          `json:"type"`
	Reply   bool            `json:"reply"`
	Seq     uint32          `json:"seq"`
	Body    json.RawMessage `json:"body"`
}

func toJSON(h Header, b Body) (jsonMessage, error) {
	body, err := json.Marshal(encodeJSON(h.Version, b.fields))
	return jsonMessage{Version: h.Version, Type: b.Type().Name(), Reply: b.Type().IsReply(), Seq: h.Seq, Body: body}, err
}

func fromJSON(m jsonMessage) (Body, error) {
	t, ok := typeNamed(m.Type, m.Reply)
	if !ok {
		return nil, fmt.Errorf("no message type %q (reply %v)", m.Type, m.Reply)
	}
	body := newBody(t)
	d := jsonDecoder{v: m.Version, raw: m.Body}
	body.fields(&d)
	return body, d.err
}

func typeNamed(name string, reply bool) (Type, bool) {
	if name == "ERROR" {
		return TypeError, reply
	}
	for t, n := range typeNames {
		if n == name && n != "" {
			if reply {
				return Type(t).Reply(), true
			}
			return Type(t), true
		}
	}
	return 0, false
}

// sameJSON compares two JSON texts as values, whatever their layout.
func sameJSON(a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
