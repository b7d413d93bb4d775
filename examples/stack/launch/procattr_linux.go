package launch

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server when the launcher (or the
// test binary) dies without stopping it, so no stray servers keep the ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
