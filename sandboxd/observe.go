package sandboxd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// maxLogLine caps one container.log line.
const maxLogLine = 16 << 10

// publishFact publishes an event that mirrors a Docker fact, with an id
// derived from the fact so that observing it twice stores it once. It
// retries for the bus's publish budget; an error means the fact is not
// stored, and the caller reads it from Docker again later.
func (d *Daemon) publishFact(ctx context.Context, runID string, t time.Time, key string, p bus.Payload) error {
	ev, err := d.bus.Events.New(runID, p, bus.WithID(bus.KeyedID(t, key)), bus.WithTime(t))
	if err == nil {
		_, err = d.bus.Publish(ctx, ev)
	}
	if err != nil && ctx.Err() == nil {
		d.log.Warn("publish container fact; it will be read from Docker again", "run", runID, "type", p.EventType(), "err", err)
	}
	return err
}

// eventCursor is the position of the last Docker event recorded on the
// bus, kept in the spool directory, so that a restarted daemon (or a
// reconnected watcher) resumes after it: events that happen while sandboxd
// is down are recorded when it comes back.
type eventCursor struct {
	path string
	nano int64  // time of the last recorded event, in ns since the epoch
	key  string // its fact key (events in the same nanosecond are told apart)
}

const cursorFile = "docker-events.cursor"

// loadCursor reads the cursor, or starts it at now when there is none (a
// first start records nothing from before it).
func loadCursor(dir string, now time.Time) *eventCursor {
	c := &eventCursor{path: filepath.Join(dir, cursorFile), nano: now.UnixNano()}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return c
	}
	nano, key, ok := strings.Cut(strings.TrimSpace(string(data)), " ")
	if n, err := strconv.ParseInt(nano, 10, 64); ok && err == nil && n > 0 {
		c.nano, c.key = n, key
	}
	return c
}

// since is the cursor in the Docker API's "since" form (seconds with
// nanoseconds: the event at the cursor itself comes again and is skipped).
func (c *eventCursor) since() string {
	return fmt.Sprintf("%d.%09d", c.nano/1e9, c.nano%1e9)
}

// seen reports whether the event is at or before the cursor.
func (c *eventCursor) seen(nano int64, key string) bool {
	return nano < c.nano || (nano == c.nano && key == c.key)
}

// advance moves the cursor past a recorded event and saves it (write and
// rename: a crash leaves the old cursor or the new one, and the events
// between are stored again under their derived ids, once).
func (c *eventCursor) advance(nano int64, key string) error {
	c.nano, c.key = nano, key
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(nano, 10)+" "+key+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path)
}

// watchDockerEvents turns Docker events of sandbox containers into
// vera.container.event, from the last event recorded before (see
// eventCursor), reconnecting when Docker goes away or an event cannot be
// stored.
func (d *Daemon) watchDockerEvents(ctx context.Context) {
	cur := loadCursor(d.cfg.SpoolDir, d.cfg.Clock.Now())
	wait, failing := time.Second, false
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		msgs, errs := d.docker.Events(wctx, events.ListOptions{
			Since:   cur.since(),
			Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("label", LabelManaged+"=true")),
		})
	loop:
		for {
			select {
			case <-ctx.Done():
				cancel()
				return
			case err := <-errs:
				if ctx.Err() == nil && !failing {
					d.log.Warn("Docker event stream ended; reconnecting with backoff (logged again when it recovers)", "err", err)
				}
				failing = true
				break loop
			case m := <-msgs:
				if failing {
					d.log.Info("Docker event stream restored")
					failing, wait = false, time.Second
				}
				key := fmt.Sprintf("docker|%s|%s|%d", m.Actor.ID, m.Action, m.TimeNano)
				if cur.seen(m.TimeNano, key) {
					continue
				}
				t := time.Unix(0, m.TimeNano).UTC()
				runID := runOfContainer(m.Actor.Attributes, m.Actor.Attributes["name"])
				if runID != "" && d.ourRun(ctx, runID) && !(m.Action == "exec_die" && d.isSessionExec(runID, m.Actor.Attributes["execID"])) {
					action, _, _ := strings.Cut(string(m.Action), ":")
					attrs := map[string]string{}
					for k, v := range m.Actor.Attributes {
						if !strings.HasPrefix(k, "vera.") {
							attrs[k] = v
						}
					}
					if err := d.publishFact(ctx, runID, t, key, catalog.ContainerEvent{
						Container: m.Actor.Attributes["name"], ContainerID: m.Actor.ID, Action: action, Attributes: attrs, Time: t,
					}); err != nil {
						failing = true // read it again from the cursor
						break loop
					}
				}
				if err := cur.advance(m.TimeNano, key); err != nil {
					d.log.Warn("save the Docker event cursor", "path", cur.path, "err", err)
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// followLogs streams the container's own stdout/stderr into
// vera.container.log, once per container, from after the last line already
// on the stream. A line that cannot be stored stops the stream; it is
// followed again after a pause from the last stored line, so that a bus
// outage delays the lines and loses none (Docker keeps them).
func (d *Daemon) followLogs(b *box, runID string) {
	d.mu.Lock()
	if d.following[b.id] || d.bgCtx == nil {
		d.mu.Unlock()
		return
	}
	d.following[b.id] = true
	d.mu.Unlock()
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer func() { d.mu.Lock(); delete(d.following, b.id); d.mu.Unlock() }()
		ctx := d.bgCtx
		wait := time.Second
		for d.followLogsOnce(ctx, b, runID) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
		}
	}()
}

// followLogsOnce follows the container's logs until they end, and
// reports whether it stopped because a line could not be stored.
func (d *Daemon) followLogsOnce(ctx context.Context, b *box, runID string) (retry bool) {
	var after time.Time
	last, err := d.lastLogTime(ctx, runID, b.id)
	switch {
	case err == nil:
		after = last
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		// Without the resume point every line would be sent again (stored
		// once within the dedup window, twice after it): wait instead.
		if ctx.Err() == nil {
			d.log.Warn("read the last container log line; retrying", "container", b.name, "err", err)
		}
		return true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
	if !after.IsZero() {
		opts.Since = strconv.FormatInt(after.Unix(), 10)
	}
	rc, err := d.docker.ContainerLogs(ctx, b.id, opts)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("follow container logs", "container", b.name, "err", err)
		}
		return false
	}
	defer rc.Close()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan struct{}, 2)
	var failed atomic.Bool
	lines := func(r io.Reader, stream catalog.StreamName) {
		defer func() { done <- struct{}{} }()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() && !failed.Load() {
			ts, text, ok := strings.Cut(sc.Text(), " ")
			t, err := time.Parse(time.RFC3339Nano, ts)
			if !ok || err != nil {
				t, text = d.cfg.Clock.Now(), sc.Text()
			}
			if !t.After(after) {
				continue
			}
			truncated := false
			if len(text) > maxLogLine {
				text, truncated = text[:maxLogLine], true
			}
			text = strings.ToValidUTF8(text, string(utf8.RuneError))
			if err := d.publishFact(ctx, runID, t, fmt.Sprintf("log|%s|%s|%s|%s", b.id, stream, ts, text), catalog.ContainerLog{
				Container: b.name, ContainerID: b.id, Stream: stream, Line: text, Truncated: truncated, Time: t.UTC(),
			}); err != nil {
				failed.Store(true)
				cancel() // ends the log stream; followed again from the last stored line
			}
		}
		io.Copy(io.Discard, r)
	}
	go lines(outR, catalog.StreamStdout)
	go lines(errR, catalog.StreamStderr)
	_, err = stdcopy.StdCopy(outW, errW, rc)
	outW.Close()
	errW.Close()
	<-done
	<-done
	if err != nil && ctx.Err() == nil {
		d.log.Debug("container log stream ended", "container", b.name, "err", err)
	}
	return failed.Load()
}

// lastLogTime is the time of the last container.log line of the container
// already on the stream (zero when the last line is another container's
// or unreadable; jetstream.ErrMsgNotFound when there is none).
func (d *Daemon) lastLogTime(ctx context.Context, runID, containerID string) (time.Time, error) {
	var last time.Time
	subj, err := bus.Subject(runID, catalog.TypeContainerLog)
	if err != nil {
		return last, err
	}
	stream, err := d.bus.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return last, err
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return last, err
	}
	ev, err := bus.ParseStoredMsg(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		return last, nil // unreadable: start from the beginning
	}
	var l catalog.ContainerLog
	if err := ev.DecodeData(&l); err != nil || l.ContainerID != containerID {
		return last, nil
	}
	return l.Time, nil
}

// reapOrphans removes containers left by a crashed daemon whose run has
// ended; containers of live runs are kept for reuse.
func (d *Daemon) reapOrphans(ctx context.Context) {
	list, err := d.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))})
	if err != nil {
		d.log.Warn("list sandbox containers", "err", err)
		return
	}
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		runID := runOfContainer(c.Labels, name)
		if bus.ValidateRunID(runID) != nil {
			continue
		}
		subj, _ := bus.FilterSubject(runID, "")
		if seq, err := d.bus.LastSequence(ctx, subj); err != nil || seq == 0 {
			continue // not a run of this bus: another daemon's container
		}
		ended, err := d.runEnded(ctx, runID)
		if err != nil {
			d.log.Warn("check run of container", "container", c.Names, "err", err)
			continue
		}
		if ended && !d.cfg.KeepContainers {
			if err := d.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
				d.log.Warn("reap orphan", "container", c.Names, "err", err)
				continue
			}
			d.removeStateDirs(runID)
			d.log.Info("reaped container of an ended run", "container", c.Names, "run", runID)
			continue
		}
		if !d.ownsContainer(c.Labels, runID) {
			// This daemon made it, but the run is another daemon's now
			// (it moved while this one was down): what runs there goes.
			if err := d.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
				d.log.Warn("remove the container of a run that moved", "container", c.Names, "err", err)
			} else {
				d.log.Info("removed the container of a run another daemon took over", "container", c.Names, "run", runID)
			}
			continue
		}
		if d.placer != nil && !d.placer.Mine(runID) {
			continue // another daemon's run, on a shared engine
		}
		rs := d.run(runID) // a live run: its container is reused, its events watched
		d.recoverRun(ctx, rs)
	}
}

// ourRun reports whether the run is one of this bus's: one this daemon
// handles now, or one with events on the stream (a run whose container
// changed while the daemon was down). Containers of other buses' runs
// (another VERA on the same Docker host) are not.
func (d *Daemon) ourRun(ctx context.Context, runID string) bool {
	d.mu.Lock()
	known, cached := d.runs[runID] != nil, d.runOnBus[runID]
	d.mu.Unlock()
	if known {
		return true
	}
	if cached != nil {
		return *cached
	}
	subj, err := bus.FilterSubject(runID, "")
	if err != nil {
		return false
	}
	seq, err := d.bus.LastSequence(ctx, subj)
	if err != nil {
		return true // cannot tell: record it (the id is derived, so at most once)
	}
	ours := seq > 0
	d.mu.Lock()
	if len(d.runOnBus) > 10000 {
		clear(d.runOnBus)
	}
	d.runOnBus[runID] = &ours
	d.mu.Unlock()
	return ours
}

func (d *Daemon) runEnded(ctx context.Context, runID string) (bool, error) {
	for _, typ := range []string{catalog.TypeRunFinished, catalog.TypeRunCancelled} {
		subj, _ := bus.Subject(runID, typ)
		seq, err := d.bus.LastSequence(ctx, subj)
		if err != nil {
			return false, err
		}
		if seq > 0 {
			return true, nil
		}
	}
	return false, nil
}

// emitLabMode records on the run that its sandbox runs in lab mode.
func (d *Daemon) emitLabMode(ctx context.Context, runID, name string) {
	t := d.cfg.Clock.Now()
	d.publishFact(ctx, runID, t, "lab|"+name+"|"+t.String(), catalog.ContainerEvent{
		Container: name, Action: "vera_lab_mode", Time: t,
		Attributes: map[string]string{"privileged": "true", "user": "root", "warning": "LAB MODE: the sandbox runs privileged as root; isolation guardrails are off"},
	})
}
