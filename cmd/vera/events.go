package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/eventfmt"
)

func newEventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Watch, export, import and describe the events on the bus",
		Long: `Every VERA event is a CloudEvents 1.0 JSON envelope on the JetStream stream
VERA, subject vera.run.<run_id>.<area>.<event> (type vera.tool.requested on run
R is vera.run.R.tool.requested). Types vera.ext.* are free for your own tools.
The catalogue of types is in docs/events.md; 'vera events schema' prints the
JSON Schema of each.`,
	}
	cmd.AddCommand(newTailCmd(g), newExportCmd(g), newImportCmd(g), newSchemaCmd(g), newTypesCmd(g), newDeadLettersCmd(g), newEventsOtelCmd(g))
	return cmd
}

func newTailCmd(g *globals) *cobra.Command {
	var run string
	var types []string
	var fromStart, asJSON, noFollow bool
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print events live, as they are stored",
		Long: `Print events as they are stored on the stream, one line each: time, run, type,
source and the data's main fields. With --json each line is the envelope
exactly as stored (one JSON object per line), for piping into jq or another
program. Messages on vera.run.> that are not valid envelopes are shown as
MALFORMED (on stderr with --json) rather than hidden.`,
		Example: `  vera events tail
  vera events tail --run r42 --from-start
  vera events tail --type 'vera.tool.*' --type vera.agent.step --json | jq .data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if noFollow && !fromStart {
				fromStart = true
			}
			for _, t := range types {
				if _, err := bus.FilterSubject(run, t); err != nil {
					return usageError{fmt.Errorf("--type: %w", err)}
				}
			}
			if run != "" {
				if err := bus.ValidateRunID(run); err != nil {
					return usageError{fmt.Errorf("--run: %w", err)}
				}
			}
			b, _, err := g.openBus(cmd, catalog.ComponentCLI, true)
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()
			if !asJSON && !noFollow {
				scope := "all runs"
				if run != "" {
					scope = "run " + run
				}
				fmt.Fprintf(g.stderr, "tailing %s on %s (Ctrl-C to stop)\n", scope, g.natsURL)
			}
			opts := bus.ReadOptions{RunID: run, Types: types, Follow: !noFollow, OnlyNew: !fromStart}
			for rec, err := range b.Read(ctx, opts) {
				if err != nil {
					return err
				}
				if rec.Err != nil {
					line := eventfmt.Malformed(rec.Sequence, rec.Subject, rec.Raw, rec.Err, 0)
					if asJSON {
						fmt.Fprintln(g.stderr, line)
					} else {
						fmt.Fprintln(g.stdout, line)
					}
					continue
				}
				if asJSON {
					if err := writeRecord(g.stdout, &rec); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintln(g.stdout, eventfmt.Line(rec.Event, 200))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "only this run")
	f.StringArrayVar(&types, "type", nil, "only these types; NATS wildcards on the type's parts: vera.tool.*, vera.ext.> (repeatable)")
	f.BoolVar(&fromStart, "from-start", false, "print the stored history first, then follow")
	f.BoolVar(&noFollow, "no-follow", false, "print the stored history and exit (implies --from-start)")
	f.BoolVar(&asJSON, "json", false, "print each envelope as stored, one JSON object per line")
	return cmd
}

func newExportCmd(g *globals) *cobra.Command {
	var run, out string
	cmd := &cobra.Command{
		Use:   "export --run ID [-o FILE]",
		Short: "Write a run as JSON Lines, blobs included, so the file stands alone",
		Long: `Write every message stored for a run as JSON Lines in stream order. Each
event is one CloudEvents envelope per line, exactly as stored. Big payloads the
events reference (model I/O, tool output in the object store) are included as
lines of type vera.bus.blob just before the first event that needs them, so the
file can be imported into any other VERA bus. Exporting the same run twice, or
after an import elsewhere, gives byte-identical files.

Nothing stored is left out. A message that is not a valid event (not JSON, not
a complete envelope, or an envelope whose run or type is not its subject's) is
written inside a line of type vera.bus.raw, marked: its data holds
"subject_tail" (the subject after vera.run.<run>.), "raw_base64" (the bytes
exactly as stored) and "malformed" (why). An outside tool's CloudEvent without
VERA's runid attribute is an event of the run its subject names; as its bytes
alone do not name the run, it is carried the same way, without "malformed".
'vera events import' stores both back verbatim on their subjects.

The file is written atomically: a failed export leaves no partial file. A run
with no stored message at all is an error.`,
		Example: `  vera events export --run r42 -o r42.jsonl
  vera events export --run r42 | gzip > r42.jsonl.gz
  jq -c 'select(.type == "vera.bus.raw") | .data | {subject_tail, malformed, raw: (.raw_base64 | @base64d)}' r42.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return usageError{errors.New("--run is required")}
			}
			if err := bus.ValidateRunID(run); err != nil {
				return usageError{fmt.Errorf("--run: %w", err)}
			}
			b, log, err := g.openBus(cmd, catalog.ComponentCLI, true)
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()

			w, commit, abort, err := openOutput(out, g.stdout)
			if err != nil {
				return err
			}
			prog := newProgress(g.stderr)
			st, err := b.Export(ctx, w, bus.ExportOptions{
				RunID: run,
				Progress: func(s bus.ExportStats) {
					prog.update("exported %d events, %d malformed, %d blobs", s.Events, s.Malformed, s.Blobs)
				},
				Warn: func(m string) { log.Warn(m) },
			})
			prog.done()
			if err != nil {
				abort()
				return err
			}
			if st.Events == 0 && st.Malformed == 0 {
				abort()
				return fmt.Errorf("run %s has no stored messages on %s", run, g.natsURL)
			}
			if err := commit(); err != nil {
				return err
			}
			dest := out
			if out == "" || out == "-" {
				dest = "stdout"
			}
			fmt.Fprintf(g.stderr, "exported run %s: %d events, %d blobs (%s) to %s", run, st.Events, st.Blobs, humanBytes(st.BlobBytes), dest)
			if st.Malformed > 0 {
				fmt.Fprintf(g.stderr, "; %d malformed messages included verbatim, marked as %s lines", st.Malformed, bus.RawType)
			}
			fmt.Fprintln(g.stderr)
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "the run to export (required)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write; default or - is stdout")
	return cmd
}

// openOutput returns a writer for path ("" or "-" is stdout). For a file it
// writes a temporary file beside it and renames it on commit.
func openOutput(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" || path == "-" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	commit = func() error {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := tmp.Close(); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	abort = func() { tmp.Close(); os.Remove(tmp.Name()) }
	return tmp, commit, abort, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func newImportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Append an exported run to the stream (idempotent)",
		Long: `Append the messages of an export file (JSON Lines, see 'vera events export') to
the stream in file order, with their recorded bytes, and put the blobs it
carries into the object store. Events whose id the run already holds are
skipped, so importing a file twice, even days later, leaves one copy.

A vera.bus.raw line's message (a malformed one, or an outside event without
runid) is stored back verbatim on vera.run.<run>.<subject_tail>, its run being
the line's; the summary counts the malformed ones, which the stream's
consumers will dead-letter as they did on the original bus. A message the run
already holds on the same subject with the same bytes is skipped.

Lines that cannot be used (not JSON, not a valid envelope, a blob whose bytes
changed, a vera.bus.raw line whose subject_tail is not a subject) are reported
by line number and skipped; everything else is imported, and the command then
exits with status 1. FILE - reads standard input.`,
		Example: `  vera events import r42.jsonl
  vera events import --nats-url nats://other:4222 r42.jsonl
  gunzip -c r42.jsonl.gz | vera events import -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("import takes exactly one FILE (or - for stdin)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			// A recorded run carries every component's events: only admin
			// may publish them all.
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			b, err := g.connectAs(cmd.Context(), auth.Admin, catalog.ComponentCLI, false, log)
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()
			prog := newProgress(g.stderr)
			st, err := b.Import(ctx, r, bus.ImportOptions{Progress: func(s bus.ImportStats) {
				prog.update("line %d: %d imported, %d malformed stored, %d already present", s.Lines, s.Imported, s.Malformed, s.Existing)
			}})
			prog.done()
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "imported %d events (%d already present), %d blobs, from %d lines of %s",
				st.Imported, st.Existing, st.Blobs, st.Lines, args[0])
			if st.Malformed > 0 {
				fmt.Fprintf(g.stderr, "; %d malformed messages (%s lines) stored back verbatim on their subjects", st.Malformed, bus.RawType)
			}
			fmt.Fprintln(g.stderr)
			if len(st.Bad) > 0 {
				for _, le := range st.Bad {
					fmt.Fprintf(g.stderr, "  skipped %s\n", le)
				}
				return fmt.Errorf("%d bad lines in %s were skipped", len(st.Bad), args[0])
			}
			return nil
		},
	}
	return cmd
}

func newSchemaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema [TYPE]",
		Short: "Print the JSON Schema of an event type's data (all types without TYPE)",
		Long: `Print the JSON Schema (draft 2020-12) of the data member of an event type,
generated from VERA's Go types. Without TYPE, print one JSON object mapping
every catalogued type to its schema. 'vera events types' lists the types.`,
		Example: `  vera events schema vera.tool.requested
  vera events schema > vera-schemas.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				s, err := catalog.Schema(args[0])
				if err != nil {
					if errors.Is(err, catalog.ErrUnknownType) {
						return usageError{fmt.Errorf("%w: %q (see 'vera events types')", err, args[0])}
					}
					return err
				}
				_, err = g.stdout.Write(append(s, '\n'))
				return err
			}
			all, err := catalog.AllSchemas()
			if err != nil {
				return err
			}
			out := make(map[string]json.RawMessage, len(all))
			for k, v := range all {
				out[k] = v
			}
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
}

func newTypesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "types",
		Short: "List the catalogued event types",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, e := range catalog.Entries() {
				fmt.Fprintf(g.stdout, "%-32s %s\n", e.Type, e.Summary)
			}
			fmt.Fprintf(g.stdout, "%-32s %s\n", "vera.ext.*", "reserved for outside tools: carried, exported and imported like any other")
			return nil
		},
	}
}

func newDeadLettersCmd(g *globals) *cobra.Command {
	var consumer string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List messages consumers rejected, with the reason",
		Long: `A consumer that cannot use a message (not a valid envelope, a permanent
handler error, or too many failed attempts) stores it on the stream VERA_DLQ,
subject vera.dlq.<consumer>.<run_id>, with the reason, and moves on. This
lists them, oldest first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, _, err := g.openBus(cmd, catalog.ComponentCLI, true)
			if err != nil {
				return err
			}
			defer b.Close()
			return listDeadLetters(cmd.Context(), b, consumer, asJSON, g.stdout)
		},
	}
	cmd.Flags().StringVar(&consumer, "consumer", "", "only this consumer's")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON record per line")
	return cmd
}

func listDeadLetters(ctx context.Context, b *bus.Bus, consumer string, asJSON bool, w io.Writer) error {
	filter := bus.DeadLetterSubject + ".>"
	if consumer != "" {
		filter = bus.DeadLetterSubject + "." + consumer + ".>"
	}
	cons, err := b.JetStream().OrderedConsumer(ctx, bus.DeadLetterStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return fmt.Errorf("read %s: %w", bus.DeadLetterStream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	n := info.NumPending
	for i := uint64(0); i < n; i++ {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			return fmt.Errorf("read %s: %w", bus.DeadLetterStream, err)
		}
		if asJSON {
			fmt.Fprintln(w, strings.TrimSpace(string(m.Data())))
			continue
		}
		var dl bus.DeadLetter
		if err := json.Unmarshal(m.Data(), &dl); err != nil {
			fmt.Fprintf(w, "(unreadable dead letter: %v)\n", err)
			continue
		}
		fmt.Fprintf(w, "%s %s seq=%d %s %s: %s\n", dl.Time.Local().Format(time.DateTime), dl.Consumer, dl.Sequence, dl.Subject, dl.EventID, dl.Reason)
	}
	if n == 0 && !asJSON {
		fmt.Fprintln(w, "no dead letters")
	}
	return nil
}

// writeRecord writes a stored event's envelope on a line (a binary-mode
// CloudEvent as its structured form, see bus.Record.Envelope).
func writeRecord(w io.Writer, rec *bus.Record) error {
	raw, err := rec.Envelope()
	if err != nil {
		return err
	}
	return writeEnvelope(w, raw)
}

// writeEnvelope writes a stored envelope as one line: compacted when it is
// JSON, as stored otherwise.
func writeEnvelope(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
