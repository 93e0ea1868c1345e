package sandboxd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// maxLogLine caps one container.log line.
const maxLogLine = 16 << 10

// publishFact publishes an event that mirrors a Docker fact, with an id
// derived from the fact so that observing it twice stores it once.
func (d *Daemon) publishFact(ctx context.Context, runID string, t time.Time, key string, p bus.Payload) {
	ev, err := d.bus.Events.New(runID, p, bus.WithID(bus.KeyedID(t, key)), bus.WithTime(t))
	if err == nil {
		_, err = d.bus.Publish(ctx, ev)
	}
	if err != nil && ctx.Err() == nil {
		d.log.Warn("publish container fact", "run", runID, "type", p.EventType(), "err", err)
	}
}

// watchDockerEvents turns Docker events of sandbox containers into
// vera.container.event, reconnecting when Docker goes away.
func (d *Daemon) watchDockerEvents(ctx context.Context) {
	since := d.cfg.Clock.Now()
	wait, failing := time.Second, false
	for ctx.Err() == nil {
		msgs, errs := d.docker.Events(ctx, events.ListOptions{
			Since:   strconv.FormatInt(since.Unix(), 10),
			Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("label", LabelManaged+"=true")),
		})
	loop:
		for {
			select {
			case <-ctx.Done():
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
				t := time.Unix(0, m.TimeNano).UTC()
				since = t
				runID := m.Actor.Attributes[LabelRun]
				if runID == "" || !d.knownRun(runID) {
					continue // another daemon's (another bus's) container
				}
				action, _, _ := strings.Cut(string(m.Action), ":")
				attrs := map[string]string{}
				for k, v := range m.Actor.Attributes {
					if !strings.HasPrefix(k, "vera.") {
						attrs[k] = v
					}
				}
				d.publishFact(ctx, runID, t, fmt.Sprintf("docker|%s|%s|%d", m.Actor.ID, m.Action, m.TimeNano), catalog.ContainerEvent{
					Container: m.Actor.Attributes["name"], ContainerID: m.Actor.ID, Action: action, Attributes: attrs, Time: t,
				})
			}
		}
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
// on the stream.
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
		var after time.Time
		if evs, err := d.lastLogTime(ctx, runID, b.id); err == nil {
			after = evs
		}
		opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
		if !after.IsZero() {
			opts.Since = strconv.FormatInt(after.Unix(), 10)
		}
		rc, err := d.docker.ContainerLogs(ctx, b.id, opts)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("follow container logs", "container", b.name, "err", err)
			}
			return
		}
		defer rc.Close()
		outR, outW := io.Pipe()
		errR, errW := io.Pipe()
		done := make(chan struct{}, 2)
		lines := func(r io.Reader, stream catalog.StreamName) {
			defer func() { done <- struct{}{} }()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			n := 0
			for sc.Scan() {
				n++
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
				d.publishFact(ctx, runID, t, fmt.Sprintf("log|%s|%s|%s|%s", b.id, stream, ts, text), catalog.ContainerLog{
					Container: b.name, ContainerID: b.id, Stream: stream, Line: text, Truncated: truncated, Time: t.UTC(),
				})
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
	}()
}

// lastLogTime is the time of the last container.log line of the container
// already on the stream.
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
	ev, err := bus.ParseEvent(msg.Data)
	if err != nil {
		return last, err
	}
	var l catalog.ContainerLog
	if err := ev.DecodeData(&l); err != nil || l.ContainerID != containerID {
		return last, err
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
		runID := c.Labels[LabelRun]
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
		rs := d.run(runID) // a live run: its container is reused, its events watched
		d.recoverRun(ctx, rs)
	}
}

// knownRun reports whether the run is one of this daemon's.
func (d *Daemon) knownRun(runID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[runID] != nil
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
