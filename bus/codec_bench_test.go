package bus

import "testing"

// benchEnvelope is a typical stored event: a tool request with VERA's
// extension attributes, its dataschema and traceparent.
const benchEnvelope = `{"specversion":"1.0","id":"01JDQ3W7Q5X6B1S0V8E2K4M9TZ","source":"agent","type":"vera.tool.requested","subject":"r42","time":"2026-11-21T18:00:00.123456789Z","datacontenttype":"application/json","dataschema":"https://vera.dev/schemas/vera.tool.requested.json","runid":"r42","causationid":"01JDQ3W7Q5X6B1S0V8E2K4M9TY","traceparent":"00-01a1ffe72670b266cd7cf67402e21893-513c900fb141603f-01","data":{"request_id":"req-s0007","requester":"agent","tool":"shell","command":"curl -s https://example.org","timeout_ms":0,"step":7}}`

// BenchmarkParseStored reads one stored envelope, as every consumer and
// reader does per message.
func BenchmarkParseStored(b *testing.B) {
	raw := []byte(benchEnvelope)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStored("vera.run.r42.tool.requested", raw); err != nil {
			b.Fatal(err)
		}
	}
}
