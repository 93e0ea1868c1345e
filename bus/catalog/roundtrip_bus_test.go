package catalog_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestEveryTypeRoundTripsThroughTheBus publishes the example of every
// catalogue type to a real JetStream server, reads the run back and decodes
// each event into a value equal to the one published.
func TestEveryTypeRoundTripsThroughTheBus(t *testing.T) {
	_, b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entries := catalog.Entries()
	for _, e := range entries {
		ev, err := b.Events.New("roundtrip", e.Example)
		if err != nil {
			t.Fatalf("%s: build: %v", e.Type, err)
		}
		if ev.Type != e.Type {
			t.Fatalf("%s: event type %s", e.Type, ev.Type)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatalf("%s: publish: %v", e.Type, err)
		}
	}
	got, err := b.ReadRun(ctx, "roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("read %d events, published %d", len(got), len(entries))
	}
	for i, ev := range got {
		want := entries[i]
		if ev.Type != want.Type {
			t.Fatalf("event %d is %s, want %s", i, ev.Type, want.Type)
		}
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			t.Fatalf("%s: decode: %v", ev.Type, err)
		}
		if !reflect.DeepEqual(reflect.ValueOf(p).Elem().Interface(), want.Example) {
			t.Errorf("%s: round trip changed the data:\n got %#v\nwant %#v", ev.Type, p, want.Example)
		}
	}
}
