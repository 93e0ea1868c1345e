package sandboxd

import (
	"slices"
	"testing"
)

func TestBoxConfigSafeByDefault(t *testing.T) {
	cfg, host := boxConfig(boxSpec{run: "r", role: roleAgent, image: "img", work: "/w", input: "/in", state: "/spool/r/vera-r.state", network: "bridge", user: "1000:1000", memory: 1 << 30, pids: 100, cpus: 1.5})
	// The container's own process is root with KILL only (for sandboxd's
	// killer); commands run as the user by their exec.
	if cfg.User != "0:0" || host.Privileged || !slices.Equal(host.CapDrop, []string{"ALL"}) || !slices.Equal(host.CapAdd, []string{"KILL"}) ||
		!slices.Contains(host.SecurityOpt, "no-new-privileges:true") {
		t.Fatalf("not safe by default: user %s privileged %v capdrop %v capadd %v secopt %v cmd %v", cfg.User, host.Privileged, host.CapDrop, host.CapAdd, host.SecurityOpt, cfg.Cmd)
	}
	if _, root := boxConfig(boxSpec{run: "r", role: roleAgent, work: "/w", user: "0:0", pids: 1}); len(root.CapAdd) != len(keptCapabilities) {
		t.Fatalf("an explicit root user keeps %v, want %v", root.CapAdd, keptCapabilities)
	}
	if *host.PidsLimit != 100 || host.Memory != 1<<30 || host.MemorySwap != 1<<30 || host.NanoCPUs != 1.5e9 || !*host.Init {
		t.Fatalf("limits: %+v", host.Resources)
	}
	if len(host.Mounts) != 3 || host.Mounts[0].ReadOnly || !host.Mounts[1].ReadOnly || host.Mounts[1].Target != "/input" ||
		host.Mounts[2].Target != StateMount || host.Mounts[2].Source != "/spool/r/vera-r.state" || !host.Mounts[2].ReadOnly {
		t.Fatalf("mounts: %+v", host.Mounts)
	}
	_, aud := boxConfig(boxSpec{run: "r", role: roleAuditor, work: "/w", user: "1:1", pids: 1})
	if !aud.Mounts[0].ReadOnly {
		t.Fatal("the auditor's /work must be read-only")
	}
}

func TestBoxConfigLabMode(t *testing.T) {
	cfg, host := boxConfig(boxSpec{run: "r", role: roleAgent, work: "/w", user: "1000:1000", lab: true, pids: 1})
	if cfg.User != "0:0" || !host.Privileged || len(host.CapDrop) != 0 || len(host.SecurityOpt) != 0 {
		t.Fatalf("lab mode: user %s privileged %v capdrop %v", cfg.User, host.Privileged, host.CapDrop)
	}
}
