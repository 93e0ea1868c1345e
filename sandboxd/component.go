package sandboxd

import (
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
)

var _ component.Component = (*Daemon)(nil)

// Name is catalog.ComponentSandboxd.
func (d *Daemon) Name() string { return catalog.ComponentSandboxd }

// Consumes lists the types the catalogue says sandboxd consumes.
func (d *Daemon) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentSandboxd) }

// Produces lists the types the catalogue says sandboxd produces.
func (d *Daemon) Produces() []string { return catalog.ProducedBy(catalog.ComponentSandboxd) }
