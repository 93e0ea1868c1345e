package dockertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// webServer serves PAGES (a JSON object "host path" → HTML) on port 80,
// choosing the page by the request's Host header, so that one container
// answers for several domains.
const webServer = `
import http.server, json, sys
P = json.loads(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        host = self.headers.get("Host", "").split(":")[0]
        body = P.get(host + " " + self.path.split("?")[0])
        data = (body or "not found").encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("", 80), H).serve_forever()
`

// Page is one page of a test web server.
type Page struct {
	Host, Path, Body string
}

// WebServer starts a web server container (image must have python3: the
// sandbox image does) on the test's network netName, reachable there under
// every host name of pages (Docker network aliases), serving each page by
// Host header and path (404 otherwise). It returns once the server listens;
// the container is removed at cleanup.
func WebServer(tb testing.TB, cli *client.Client, image, netName string, pages []Page) {
	tb.Helper()
	ctx := context.Background()
	byKey := map[string]string{}
	var aliases []string
	seen := map[string]bool{}
	for _, p := range pages {
		byKey[p.Host+" "+p.Path] = p.Body
		if !seen[p.Host] {
			seen[p.Host] = true
			aliases = append(aliases, p.Host)
		}
	}
	arg, err := json.Marshal(byKey)
	if err != nil {
		tb.Fatal(err)
	}
	created, err := cli.ContainerCreate(ctx,
		&container.Config{Image: image, User: "0:0", Cmd: []string{"python3", "-u", "-c", webServer, string(arg)}, Labels: map[string]string{"vera.test": "true"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName)},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {Aliases: aliases}}},
		nil, Name(tb, "web"))
	if err != nil {
		tb.Fatalf("create web container: %v", err)
	}
	tb.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		tb.Fatalf("start web container: %v", err)
	}
	probe := []string{"python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 80), 1)"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err = probeOnce(ctx, cli, created.ID, probe); err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("web server not listening after 60s (last error %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeOnce runs cmd in the container and reports whether it exited 0.
func probeOnce(ctx context.Context, cli *client.Client, id string, cmd []string) error {
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd})
	if err != nil {
		return err
	}
	if err := cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{}); err != nil {
		return err
	}
	for range 100 {
		ins, err := cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return err
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return errProbe
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errProbe
}

var errProbe = errors.New("probe failed")
