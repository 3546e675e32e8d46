package main

import (
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// notifySystemd sends state lines to the service manager that started
// sluice run (systemd with Type=notify; see deploy/systemd/sluice.service).
// Without NOTIFY_SOCKET in the environment it does nothing, so a sluice
// started by hand or by another supervisor behaves as before. A failed send
// is logged and otherwise ignored: the proxy serves either way, and systemd
// reports a missing READY=1 itself when its start timeout passes.
func notifySystemd(log *zap.Logger, lines ...string) {
	state := strings.Join(lines, "\n")
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify failed", zap.String("state", state), zap.Error(err))
	}
}

// notifyReloading is the RELOADING=1 message systemd expects before a
// reload. systemd 253 and later also want the CLOCK_MONOTONIC time of the
// request in MONOTONIC_USEC so they can tell this reload from an older
// one; older versions ignore the extra line.
func notifyReloading() []string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return []string{daemon.SdNotifyReloading}
	}
	usec := ts.Sec*1_000_000 + ts.Nsec/1_000
	return []string{daemon.SdNotifyReloading, fmt.Sprintf("MONOTONIC_USEC=%d", usec)}
}
