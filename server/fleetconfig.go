package server

import (
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
)

// The fleet's configuration (sluice config push) reaches an instance
// through fleet.Fleet's watch of <prefix>/config, which calls
// applyFleetConfig from its own goroutine, one revision at a time. The
// instance's effective configuration is the pushed file with the local
// file's instance-local keys (conf.InstanceLocalKeys); it is applied as a
// reload is (reload.go): built and checked whole, then swapped in, pools
// whose settings changed drained, restart-only keys reported and kept.

// effectiveConfig is pushed with local's instance-local keys, validated.
func effectiveConfig(pushed, local *conf.Config) (*conf.Config, error) {
	eff := conf.WithLocal(pushed, local)
	if err := eff.Validate(); err != nil {
		return nil, fmt.Errorf("with this instance's local keys: %w", err)
	}
	return eff, nil
}

// applyFleetConfig applies revision rev of the fleet configuration, whose
// TOML is text. An error leaves the running configuration as it was; the
// caller (the Fleet) logs it and keeps the revision as refused. Safe to
// call concurrently with Reload (both hold reload.mu).
func (srv *Server) applyFleetConfig(text []byte, rev int64) error {
	srv.reload.mu.Lock()
	defer srv.reload.mu.Unlock()
	local := srv.reload.local
	if local == nil {
		local = srv.cfg
	}
	pushed, err := conf.ParsePushed(text, local.Path)
	if err != nil {
		return srv.refuseFleetConfig(rev, err)
	}
	eff, err := effectiveConfig(pushed, local)
	if err != nil {
		return srv.refuseFleetConfig(rev, err)
	}
	changes, err := srv.applyLocked(srv.config(), eff, "fleet-config")
	if err != nil {
		return srv.refuseFleetConfig(rev, err)
	}
	srv.reload.pushed, srv.reload.pushedRev = pushed, rev
	srv.event("fleet-config", "", "", fmt.Sprintf("revision %d applied", rev))
	var restart []string
	for _, c := range changes {
		if strings.HasPrefix(c, "needs restart: ") {
			restart = append(restart, c)
		}
	}
	if len(restart) > 0 {
		srv.log.Warn("fleet: configuration revision applied; some of its keys wait for a restart",
			zap.Int64("config_revision", rev), zap.Strings("needs_restart", restart))
	}
	return nil
}

// refuseFleetConfig records a refused revision as an event (SHOW EVENTS)
// and returns the error, one line, naming the revision.
func (srv *Server) refuseFleetConfig(rev int64, err error) error {
	msg := fmt.Sprintf("revision %d refused, running configuration unchanged: %s", rev, oneLine(err))
	srv.event("fleet-config", "", "", msg)
	return protocol.ERUnknownError.New("sluice: fleet configuration %s", msg)
}
