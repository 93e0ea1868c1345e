//go:build !linux

package jaegertest

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}
