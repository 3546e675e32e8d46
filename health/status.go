package health

import (
	"fmt"
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
	ahead := lagSeqAhead
	if st.Flavor == FlavorMySQL {
		ahead = func(a, b string) bool { return !lagSetCovers(b, a) }
	}
	if ahead(st.ReceivedGTID, st.AppliedGTID) {
		return true, "received " + oneLine(st.ReceivedGTID) + ", applied " + oneLine(st.AppliedGTID)
	}
	if !st.IORunning && master != nil && master.Flavor == st.Flavor && ahead(master.ExecutedGTID, st.AppliedGTID) {
		return true, "master executed " + oneLine(master.ExecutedGTID) + ", applied " + oneLine(st.AppliedGTID)
	}
	return false, "applied " + oneLine(st.AppliedGTID)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "") }

// lagSeqAhead compares two MariaDB GTID positions ("0-1-42,1-2-7": one
// domain-server-sequence per domain): it reports whether a holds a domain
// whose sequence number is higher than b's for that domain (a missing
// domain counts as 0). Sequence numbers grow within a domain whatever
// server wrote them, so this says a has transactions b lacks.
func lagSeqAhead(a, b string) bool {
	have := lagDomainSeqs(b)
	for d, seq := range lagDomainSeqs(a) {
		if seq > have[d] {
			return true
		}
	}
	return false
}

// lagDomainSeqs maps each domain of a MariaDB GTID position to its highest
// sequence number; malformed entries are ignored.
func lagDomainSeqs(pos string) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, g := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			continue
		}
		d, err1 := strconv.ParseUint(parts[0], 10, 32)
		seq, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out[d] = max(out[d], seq)
	}
	return out
}

// lagInterval is an inclusive range of MySQL GTID transaction numbers.
type lagInterval struct{ lo, hi uint64 }

// lagSetCovers reports whether the MySQL GTID set have contains every
// transaction of want. Sets are "uuid:1-5:7,uuid2:1-3" (MySQL 8.3 tags as
// "uuid:tag:1-5"), with optional whitespace and newlines.
func lagSetCovers(have, want string) bool {
	h := lagParseSet(have)
	for src, ivs := range lagParseSet(want) {
		got := h[src]
		for _, iv := range ivs {
			if !lagCovered(got, iv) {
				return false
			}
		}
	}
	return true
}

// lagCovered reports whether iv lies in the union of the sorted, merged
// intervals ivs.
func lagCovered(ivs []lagInterval, iv lagInterval) bool {
	next := iv.lo
	for _, r := range ivs {
		if r.lo > next {
			break
		}
		if r.hi >= next {
			if r.hi >= iv.hi {
				return true
			}
			next = r.hi + 1
		}
	}
	return false
}

// lagParseSet parses a MySQL GTID set into sorted, merged intervals per
// source (uuid, or uuid:tag); malformed parts are ignored.
func lagParseSet(set string) map[string][]lagInterval {
	out := map[string][]lagInterval{}
	set = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, set)
	for _, part := range strings.Split(set, ",") {
		f := strings.Split(part, ":")
		if len(f) < 2 || f[0] == "" {
			continue
		}
		src := strings.ToLower(f[0])
		for _, tok := range f[1:] {
			lo, hi, ok := lagParseInterval(tok)
			if !ok {
				// A tag: the intervals after it belong to uuid:tag.
				src = strings.ToLower(f[0]) + ":" + tok
				continue
			}
			out[src] = append(out[src], lagInterval{lo, hi})
		}
	}
	for src, ivs := range out {
		slices.SortFunc(ivs, func(a, b lagInterval) int {
			switch {
			case a.lo < b.lo:
				return -1
			case a.lo > b.lo:
				return 1
			}
			return 0
		})
		merged := ivs[:0]
		for _, iv := range ivs {
			if n := len(merged); n > 0 && iv.lo <= merged[n-1].hi+1 {
				merged[n-1].hi = max(merged[n-1].hi, iv.hi)
				continue
			}
			merged = append(merged, iv)
		}
		out[src] = merged
	}
	return out
}

// lagParseInterval parses "5" or "1-5".
func lagParseInterval(tok string) (lo, hi uint64, ok bool) {
	a, b, isRange := strings.Cut(tok, "-")
	lo, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	hi, err = strconv.ParseUint(b, 10, 64)
	if err != nil || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}
