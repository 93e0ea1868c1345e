// Package dockertest gives tests a real Docker Engine: it connects with API
// version negotiation and skips the test with a clear message when no
// engine answers, unless VERA_REQUIRE_DOCKER=1 (as in CI), which makes the
// absence a failure. It also creates throwaway networks and containers
// that are removed at cleanup. Imported by tests only.
package dockertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Client returns a Docker client, or skips (fails under
// VERA_REQUIRE_DOCKER=1) when the engine is unreachable.
func Client(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
	}
	if err != nil {
		msg := fmt.Sprintf("Docker Engine not reachable (%v): this test needs a running Docker Engine", err)
		if os.Getenv("VERA_REQUIRE_DOCKER") == "1" {
			tb.Fatal(msg + " (VERA_REQUIRE_DOCKER=1)")
		}
		tb.Skip(msg + "; set VERA_REQUIRE_DOCKER=1 to make this a failure")
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// Name returns a Docker-safe unique name for the test.
func Name(tb testing.TB, suffix string) string {
	n := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, tb.Name())
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("veratest-%s-%s-%d", n, suffix, time.Now().UnixNano()%1e6)
}

// Network creates a bridge network of the test's own, removed at cleanup.
func Network(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	name := Name(tb, "net")
	ctx := context.Background()
	if _, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{"vera.test": "true"}}); err != nil {
		tb.Fatalf("create network: %v", err)
	}
	tb.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), name) })
	return name
}

// Run starts a container of the test's own (image, command, on a network
// under an alias), removed at cleanup, and returns its id.
func Run(tb testing.TB, cli *client.Client, image string, cmd []string, networkName, alias string) string {
	tb.Helper()
	ctx := context.Background()
	var netCfg *network.NetworkingConfig
	if networkName != "" {
		netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{networkName: {Aliases: []string{alias}}}}
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Cmd: cmd, Labels: map[string]string{"vera.test": "true"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(networkName)}, netCfg, nil, Name(tb, alias))
	if err != nil {
		tb.Fatalf("create container: %v", err)
	}
	tb.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		tb.Fatalf("start container: %v", err)
	}
	return created.ID
}
