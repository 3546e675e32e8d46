package health

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// flavorOf tells MariaDB from MySQL by the version string a server sends.
func flavorOf(version string) Flavor {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return FlavorMariaDB
	}
	return FlavorMySQL
}

// Status is what one successful probe read from a backend, with the
// prober's verdict on its replication lag and its load. A Status is
// immutable once published (Backend.Status); read it from any goroutine.
type Status struct {
	// Time is when the probe finished.
	Time    time.Time
	Version string
	Flavor  Flavor
	// ReadOnly is @@global.read_only.
	ReadOnly bool

	// ReplicationError is the server's refusal of the replication status
	// query (a missing privilege), or "" when it answered; the replication
	// fields below are then unknown.
	ReplicationError string
	// Replicating: the server has replication configured (SHOW ALL SLAVES
	// STATUS or SHOW REPLICA STATUS returned a row). With several
	// replication sources the fields below combine them: a thread runs
	// when it runs for every source, the lag is the largest.
	Replicating bool
	IORunning   bool
	SQLRunning  bool
	// SecondsBehind is Seconds_Behind_Master; -1 when the server says NULL
	// (a replication thread is not running) or does not replicate.
	SecondsBehind int64
	// MasterHost and MasterPort are where the server replicates from.
	MasterHost string
	MasterPort int
	// ExecutedGTID is the server's GTID position: @@gtid_current_pos on
	// MariaDB, @@gtid_executed on MySQL.
	ExecutedGTID string
	// AppliedGTID is what the replication SQL thread applied:
	// @@gtid_slave_pos on MariaDB, @@gtid_executed on MySQL.
	AppliedGTID string
	// ReceivedGTID is what the IO thread received: Gtid_IO_Pos on MariaDB,
	// Retrieved_Gtid_Set on MySQL.
	ReceivedGTID string
	// ThreadsRunning is Threads_running without the probe's own thread.
	ThreadsRunning int
	// SQLMode is @@global.sql_mode, what a new connection's session starts
	// with; SQLModeKnown reports that the probe read it.
	SQLMode      string
	SQLModeKnown bool
	// Functions are a master's stored functions and what each declares it
	// does with data; nil on replicas and when the server would not say.
	// It is shared between Statuses and must not be modified.
	Functions Functions
	// Schemas are the schemas a master's service account sees, sorted;
	// nil on replicas and when the server would not say. Shared between
	// Statuses: must not be modified.
	Schemas Schemas
	// Objects are a master's views and stored routines with their
	// definitions (readObjects); nil on replicas and when the server
	// would not say. The same pointer is shared by the Statuses of
	// successive probes while the catalog is unchanged, so a reader may
	// cache what it derives from it by the pointer. Must not be modified.
	Objects *Objects
	// ObjectsAt is when the query that settled Objects was sent (its
	// digest, or the full read): every view or routine created before it
	// is in Objects. Zero when Objects was not read by this probe.
	ObjectsAt time.Time

	// Lag is the replication lag the prober estimates; -1 when unknown
	// (not replicating). See LagNote for how it was found.
	Lag time.Duration
	// Lagging: Lag is over the cluster's max_replication_lag, or the
	// replica does not replicate. Never set for a master.
	Lagging bool
	// LagNote says how Lag was found, for logs and the admin port.
	LagNote string

	// Load is the least-load balancer's signal: the 1-minute load average
	// per CPU from the host's sluice-agent (LoadSource "agent"), else
	// ThreadsRunning ("threads_running").
	Load       float64
	LoadSource string
	// Load1, Load5, Load15 and CPUs are the agent's report when LoadSource
	// is "agent".
	Load1, Load5, Load15 float64
	CPUs                 int
}

// FunctionKey names a stored function: its schema as the server stores it
// and its name in lower case (function names are not case-sensitive).
type FunctionKey struct {
	Schema, Name string
}

// Functions maps stored functions to their SQL_DATA_ACCESS characteristic
// ("NO SQL", "READS SQL DATA", "CONTAINS SQL", "MODIFIES SQL DATA").
type Functions map[FunctionKey]string

// Has reports whether the function exists.
func (f Functions) Has(k FunctionKey) bool {
	_, ok := f[k]
	return ok
}

// ReadOnly reports whether the function is known and declared not to
// change data (NO SQL or READS SQL DATA).
func (f Functions) ReadOnly(k FunctionKey) bool {
	switch f[k] {
	case "NO SQL", "READS SQL DATA":
		return true
	}
	return false
}

// judgeLag sets st's Lag, Lagging and LagNote for a replica, given the
// master's last Status (nil when unknown) and maxLag. behindSince is the
// prober's memory of when it first saw the replica's applied position
// behind without a lag figure from the server; judgeLag updates it.
func judgeLag(st, master *Status, maxLag time.Duration, behindSince *time.Time, now time.Time) {
	if st.ReplicationError != "" {
		*behindSince = time.Time{}
		st.Lag, st.Lagging = -1, true
		st.LagNote = "cannot read the replication status (the service account needs SLAVE MONITOR on MariaDB 10.5 " +
			"and later, REPLICATION CLIENT on MySQL and older MariaDB): " + st.ReplicationError
		return
	}
	if !st.Replicating {
		*behindSince = time.Time{}
		st.Lag, st.Lagging, st.LagNote = -1, true, "replication is not configured"
		return
	}
	if st.SecondsBehind >= 0 {
		*behindSince = time.Time{}
		st.Lag = time.Duration(st.SecondsBehind) * time.Second
		st.Lagging = st.Lag > maxLag
		st.LagNote = "Seconds_Behind_Master"
		return
	}
	// The server gives no lag (NULL): a replication thread is stopped or
	// reconnecting. Decide from GTID positions instead: the replica is
	// behind when its IO thread received transactions the SQL thread has
	// not applied, or, with the IO thread stopped, when the master has
	// executed transactions the replica has not applied. How far behind in
	// time is unknown; the time since the prober first saw it behind is a
	// lower bound (the first missing transaction is at least that old),
	// and that is what is compared with max_replication_lag.
	behind, how := gtidBehind(st, master)
	if !behind {
		*behindSince = time.Time{}
		st.Lag, st.Lagging = 0, false
		st.LagNote = "replication threads not both running; applied everything known (" + how + ")"
		return
	}
	if behindSince.IsZero() {
		*behindSince = now
	}
	st.Lag = now.Sub(*behindSince)
	st.Lagging = st.Lag > maxLag
	st.LagNote = fmt.Sprintf("replication threads not both running; behind since %s (%s)", behindSince.Format(time.RFC3339), how)
}

// gtidBehind reports whether st's applied GTID position lacks transactions
// that st received or, when its IO thread is stopped, that master executed;
// the string says what was compared.
func gtidBehind(st, master *Status) (bool, string) {
	ahead := func(a, b string) bool { return gtidAhead(st.Flavor, a, b) }
	if ahead(st.ReceivedGTID, st.AppliedGTID) {
		return true, "received " + oneLine(st.ReceivedGTID) + ", applied " + oneLine(st.AppliedGTID)
	}
	if !st.IORunning && master != nil && master.Flavor == st.Flavor && ahead(master.ExecutedGTID, st.AppliedGTID) {
		return true, "master executed " + oneLine(master.ExecutedGTID) + ", applied " + oneLine(st.AppliedGTID)
	}
	return false, "applied " + oneLine(st.AppliedGTID)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "") }

// gtidAhead reports whether GTID position or set a holds transactions b
// lacks. Positions the probe read but cannot parse count as not ahead: the
// lag is then judged by Seconds_Behind_Master alone.
func gtidAhead(f Flavor, a, b string) bool {
	ga, err := ParseGTID(f, a)
	if err != nil {
		return false
	}
	gb, err := ParseGTID(f, b)
	if err != nil {
		return false
	}
	return !gb.Contains(ga)
}

// Schemas is a sorted list of schema names.
type Schemas []string

// Has reports whether the list holds name, compared as the server compares
// schema names with lower_case_table_names = 0 (exactly).
func (l Schemas) Has(name string) bool {
	_, ok := slices.BinarySearch(l, name)
	return ok
}

// FencedSource returns the fenced old master of c that a replica whose probe read st
// replicates from, "" when it replicates from none of them. Such a replica serves no reads
// and is repointed to the master: a fenced server gets no writes, so it falls behind for good.
func FencedSource(st *Status, c *Cluster) string {
	if st == nil || c == nil || !st.Replicating || st.MasterHost == "" {
		return ""
	}
	src := net.JoinHostPort(st.MasterHost, strconv.Itoa(st.MasterPort))
	for _, b := range c.Fenced {
		if sameServer(b.Address, src) {
			return b.Address
		}
	}
	return ""
}
