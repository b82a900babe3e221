// Command pause is the process that holds a pod's namespaces on the real node of sky-kueue's
// local cluster (sky_kueue/realcluster/node.py): containerd's sandbox image runs it as the
// pod's first process. No registry is reachable there, so the image is built locally from this
// file (sky_kueue/realcluster/build.py) instead of pulled.
//
// It waits for SIGINT or SIGTERM and exits 0, and reaps any child that ends up with it as its
// parent (a pod sharing one process namespace makes it PID 1 of every container).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
