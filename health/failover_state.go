package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// maxHistory is how many failovers a state file keeps.
const maxHistory = 20

// FailoverState is what sluice remembers of a cluster's failovers across restarts: the master
// it promoted (or followed), the old masters it fenced, and the recent failovers. One file per
// cluster under [proxy] state_dir. It is a plain value; the caller serialises updates (one
// writer per cluster) and writes it with WriteFailoverState.
type FailoverState struct {
	Cluster string `json:"cluster"`
	// Epoch is the epoch of the last failover.
	Epoch uint64 `json:"epoch"`
	// Master is the cluster's master since the last failover; a restart uses it instead of
	// the configured master.
	Master string `json:"master"`
	// Fenced are old masters that get no traffic until a DBA puts them back.
	Fenced []string `json:"fenced,omitempty"`
	// LastFailover is when the last failover finished; failover_block counts from it.
	LastFailover time.Time `json:"last_failover"`
	// History holds the most recent failovers, oldest first (at most 20).
	History []Result `json:"history"`
	// Pending is a failover that has started changing servers and is not recorded yet (its
	// NewMaster is the candidate, Steps and Repointed say how far it got); nil when none. A
	// sluice that dies part way leaves it for the next one to finish.
	Pending *Result `json:"pending,omitempty"`
}

// Record adds a successful Run's result: the new master and epoch, the old master to the
// fenced list, and the result to the history.
func (s *FailoverState) Record(r *Result) {
	s.Cluster = r.Cluster
	s.Pending = nil
	s.Epoch, s.Master, s.LastFailover = r.Epoch, r.NewMaster, r.Finished
	if r.OldMaster != "" && r.OldMaster != r.NewMaster && !slices.Contains(s.Fenced, r.OldMaster) {
		s.Fenced = append(s.Fenced, r.OldMaster)
	}
	s.Fenced = slices.DeleteFunc(s.Fenced, func(a string) bool { return a == r.NewMaster })
	s.History = append(s.History, *r)
	if n := len(s.History); n > maxHistory {
		s.History = slices.Clone(s.History[n-maxHistory:])
	}
}

// RecordFence notes what FenceOldMaster found: the errant transactions go to the newest
// failover that replaced that server.
func (s *FailoverState) RecordFence(fr FenceResult) {
	if !slices.Contains(s.Fenced, fr.Addr) {
		s.Fenced = append(s.Fenced, fr.Addr)
	}
	for i := len(s.History) - 1; i >= 0; i-- {
		if s.History[i].OldMaster == fr.Addr {
			s.History[i].Errant = fr.Errant
			return
		}
	}
}

// Unfence removes addr from the fenced list (a DBA put it back).
func (s *FailoverState) Unfence(addr string) {
	s.Fenced = slices.DeleteFunc(s.Fenced, func(a string) bool { return a == addr })
}

// FailoverStatePath is the file of cluster's state under dir: "failover-<cluster>.json",
// with characters other than letters, digits, '-', '_' and '.' in the name replaced by '_'.
func FailoverStatePath(dir, cluster string) string {
	name := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, cluster)
	return filepath.Join(dir, "failover-"+name+".json")
}

// WriteFailoverState writes s to its file under dir atomically: a temporary file in dir,
// synced, renamed over the old one, and the directory synced, so a crash leaves either the
// old or the new state. dir must exist.
func WriteFailoverState(dir string, s FailoverState) (err error) {
	if s.Cluster == "" {
		return errors.New("health: failover state without a cluster name")
	}
	path := FailoverStatePath(dir, s.Cluster)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("health: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("health: writing failover state: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("health: %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("health: %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("health: %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("health: %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ReadFailoverState reads cluster's state from dir. ok is false, with no error, when there is
// no file (the cluster never failed over); a file that does not parse, or belongs to another
// cluster, is an error naming it.
func ReadFailoverState(dir, cluster string) (s FailoverState, ok bool, err error) {
	path := FailoverStatePath(dir, cluster)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return FailoverState{}, false, nil
	}
	if err != nil {
		return FailoverState{}, false, fmt.Errorf("health: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return FailoverState{}, false, fmt.Errorf("health: %s: %w", path, err)
	}
	if s.Cluster != cluster {
		return FailoverState{}, false, fmt.Errorf("health: %s holds the state of cluster %q, not %q", path, s.Cluster, cluster)
	}
	return s, true, nil
}

// StepPromoting is the step a failover records just before its candidate's read_only goes off.
const StepPromoting = "promoting"

// PromotionStarted reports whether the failover r records (a pending one) may have made its
// candidate writable: from then on only that candidate may become the master.
func (r *Result) PromotionStarted() bool {
	return r.PromotedAt != "" || slices.ContainsFunc(r.Steps, func(s Step) bool { return s.Name == StepPromoting })
}
