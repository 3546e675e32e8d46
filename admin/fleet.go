package admin

import (
	"context"
	"runtime/debug"
	"strconv"
	"time"
)

// FleetRow is one instance of the fleet as SHOW FLEET lists it.
type FleetRow struct {
	Instance, Address, AdminAddress, Version string
	ConfigRevision                           int64
	Started                                  time.Time
	// LeaseTTL is what the member's lease has left ("7s"), "self" for the
	// instance answering, or why it is not known.
	LeaseTTL string
}

// fleetTimeout bounds SHOW FLEET's questions to etcd (the leases' TTLs).
const fleetTimeout = 5 * time.Second

// ShowFleet builds SHOW FLEET: every member of the fleet, by instance name.
// Its error is the SQL error of an instance without [fleet].
func ShowFleet(ctx context.Context, ctl Control) (*Table, error) {
	ctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	defer cancel()
	rows, err := ctl.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	t := &Table{Columns: []string{"instance", "address", "admin_address", "version", "config_revision", "started", "lease_ttl"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Instance, r.Address, r.AdminAddress, r.Version,
			strconv.FormatInt(r.ConfigRevision, 10), r.Started.UTC().Format(time.RFC3339), r.LeaseTTL})
	}
	return t, nil
}

// BuildVersion is the sluice version SHOW VERSION and the fleet's records
// name: Version as the build set it, else the module version Go recorded.
func BuildVersion() string {
	v := Version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return v
}
