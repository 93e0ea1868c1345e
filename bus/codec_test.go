package bus

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

// refDecode is the reference for decodeEnvelope, built on encoding/json:
// members in order, exact (case-sensitive) names, last one wins.
func refDecode(data []byte) (Event, error) {
	var e Event
	if !json.Valid(data) {
		return e, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return e, errors.New("not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return e, err
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return e, err
		}
		isNull := string(raw) == "null"
		str := func(dst *string) error {
			if isNull {
				*dst = ""
				return nil
			}
			return json.Unmarshal(raw, dst)
		}
		switch key {
		case "specversion":
			err = str(&e.SpecVersion)
		case "id":
			err = str(&e.ID)
		case "source":
			err = str(&e.Source)
		case "type":
			err = str(&e.Type)
		case "subject":
			err = str(&e.Subject)
		case "datacontenttype":
			err = str(&e.DataContentType)
		case "runid":
			err = str(&e.RunID)
		case "causationid":
			err = str(&e.CausationID)
		case "dataschema":
			err = str(&e.DataSchema)
		case "traceparent":
			err = str(&e.Traceparent)
		case "tracestate":
			err = str(&e.Tracestate)
		case "time":
			var s string
			if err = str(&s); err == nil && !isNull {
				e.Time, err = time.Parse(time.RFC3339Nano, s)
			} else if isNull {
				e.Time = time.Time{}
			}
		case "data":
			e.Data = nil
			if !isNull {
				e.Data = raw
			}
		case "data_base64":
			var s string
			if err = str(&s); err == nil {
				e.DataBase64 = nil
				if !isNull {
					e.DataBase64, err = base64.StdEncoding.DecodeString(s)
				}
			}
		}
		if err != nil {
			return e, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return e, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return e, errors.New("trailing data")
	}
	return e, nil
}

func sameEvent(a, b Event) bool {
	a.checked, b.checked = nil, nil
	if len(a.DataBase64) == 0 {
		a.DataBase64 = nil
	}
	if len(b.DataBase64) == 0 {
		b.DataBase64 = nil
	}
	return a.Time.Equal(b.Time) && reflect.DeepEqual(withoutTime(a), withoutTime(b))
}

func withoutTime(e Event) Event { e.Time = time.Time{}; return e }

func FuzzEnvelopeCodec(f *testing.F) {
	ev, _ := fixedFactory().New("run-1", demo{Text: "hé <b> \"quoted\" \n\u2028 tab\t"})
	good, _ := ev.Marshal()
	f.Add(good)
	f.Add([]byte(`{"specversion":"1.0","id":"x","data":{"a":[1,2.5e3,-0,true,null,"\u00e9\ud83d\ude00"]},"extra":{"k":[]}}`))
	f.Add([]byte(`{"data_base64":"aGVsbG8=","time":"2026-01-02T03:04:05.123456789+02:00"}`))
	f.Add([]byte(`{"id":"a","id":"b"} `))
	f.Add([]byte(`{"ID":"upper","runid":null}`))
	f.Add([]byte(`{"data": 01}`))
	f.Add([]byte(`{"id":"\x01"}`))
	f.Add([]byte("{\"id\":\"\xff\xfe\"}"))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"dataschema":"https://vera.dev/schemas/vera.x.y.json","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"congo=t61rcWkgMzE","traceparent":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Event
		gerr := decodeEnvelope(data, &got)
		want, werr := refDecode(data)
		if gerr == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("decode %q: got err %v, reference err %v", data, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !sameEvent(got, want) {
			t.Fatalf("decode %q:\n got %+v\nwant %+v", data, got, want)
		}
		// Our encoding is valid JSON that decodes back to the same event,
		// through us and through encoding/json.
		if got.Time.Year() < 0 || got.Time.Year() > 9999 {
			return
		}
		enc, err := got.MarshalJSON()
		if err != nil {
			t.Fatalf("encode %+v: %v", got, err)
		}
		if !json.Valid(enc) || bytes.ContainsAny(enc, "\n\r") {
			t.Fatalf("encoding is not one line of valid JSON: %q", enc)
		}
		var back Event
		if err := decodeEnvelope(enc, &back); err != nil || !sameEvent(back, got) {
			t.Fatalf("round trip of %q via %q: %v\n got %+v\nwant %+v", data, enc, err, back, got)
		}
		ref, err := refDecode(enc)
		if err != nil || !sameEvent(ref, got) {
			t.Fatalf("encoding/json reads %q differently: %v %+v", enc, err, ref)
		}
	})
}

func TestMarshalMatchesEncodingJSONStrings(t *testing.T) {
	for _, s := range []string{"plain", "<&>", "é", "\u2028\u2029", "\x00\x1f", "bad \xff utf8", `"\`} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	}
}
