package catalog

import "time"

// Container types.
const (
	TypeContainerLog   = "vera.container.log"
	TypeContainerEvent = "vera.container.event"
)

// ContainerLog is one line of the sandbox container's own stdout/stderr
// (container.log). Output of requested commands is in vera.tool.finished.
type ContainerLog struct {
	Container   string     `json:"container" jsonschema_description:"Name of the sandbox container."`
	ContainerID string     `json:"container_id" jsonschema_description:"Docker id of the container."`
	Stream      StreamName `json:"stream" jsonschema_description:"Which stream the line came from."`
	Line        string     `json:"line" jsonschema_description:"The line, without its newline; invalid UTF-8 is replaced by U+FFFD."`
	Truncated   bool       `json:"truncated,omitempty" jsonschema_description:"True when the line was longer than the cap and was cut."`
	Time        time.Time  `json:"time" jsonschema_description:"Docker's timestamp of the line (RFC 3339)."`
}

// EventType implements Payload.
func (ContainerLog) EventType() string { return TypeContainerLog }

// ContainerEvent is one Docker event of the sandbox container
// (container_events.log).
type ContainerEvent struct {
	Container   string            `json:"container" jsonschema_description:"Name of the sandbox container."`
	ContainerID string            `json:"container_id" jsonschema_description:"Docker id of the container."`
	Action      string            `json:"action" jsonschema:"minLength=1" jsonschema_description:"Docker event action: create, start, exec_create, exec_start, exec_die, die, oom, kill, stop, destroy..."`
	Attributes  map[string]string `json:"attributes,omitempty" jsonschema_description:"Docker's actor attributes (image, name, exitCode, execID...)."`
	Time        time.Time         `json:"time" jsonschema_description:"Docker's time of the event (RFC 3339)."`
}

// EventType implements Payload.
func (ContainerEvent) EventType() string { return TypeContainerEvent }
