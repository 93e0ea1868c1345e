package jaegertest

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill Jaeger when the test process dies
// before its cleanup could stop it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
