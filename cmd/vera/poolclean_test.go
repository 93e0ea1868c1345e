package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/vera-run/vera/sandboxd"
)

// removeLeftoverPools removes, when the test ends, the warm-pool
// containers its daemons left: a daemon killed with SIGKILL cannot remove
// its pool (its next start would), and a test's daemons never start
// again. They are told by their spool dir, under the test's temporary
// root; other tests' pools are not touched.
func removeLeftoverPools(t *testing.T, root string) {
	t.Cleanup(func() {
		docker, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer docker.Close()
		ctx := context.Background()
		list, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandboxd.LabelPoolSpool))})
		if err != nil {
			return // no Docker here: no pool either
		}
		for _, c := range list {
			if strings.HasPrefix(c.Labels[sandboxd.LabelPoolSpool], root+string(filepath.Separator)) {
				_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
}
