package main

import (
	"log/slog"
	"sync"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
)

// modelClients hands a component one model client per model configuration,
// its calls recorded on the bus, and closes them all at the end (a client
// per call would leave its idle connections open).
type modelClients struct {
	rec *llmbus.BusRecorder
	log *slog.Logger

	mu      sync.Mutex
	clients map[catalog.ModelConfig]*llm.Client
}

func newModelClients(rec *llmbus.BusRecorder, log *slog.Logger) *modelClients {
	return &modelClients{rec: rec, log: log, clients: map[catalog.ModelConfig]*llm.Client{}}
}

// get returns the client of mc, made on first use (a component.Models:
// the run does not matter, the client records each call with its run).
func (m *modelClients) get(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[mc]; ok {
		return c, nil
	}
	cfg := llmbus.Config(mc)
	cfg.Recorder, cfg.Logger = m.rec, m.log
	c, err := llm.New(cfg)
	if err != nil {
		return nil, err
	}
	m.clients[mc] = c
	return c, nil
}

// close closes every client.
func (m *modelClients) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.clients {
		c.Close()
	}
}
