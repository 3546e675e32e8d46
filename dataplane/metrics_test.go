package dataplane

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/internal/promtest"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/shard"
)

// TestFinishCommand drives the per-command hook with what a statement
// recorded and checks the counters, the latency histogram and the
// slow-query log line it leads to.
func TestFinishCommand(t *testing.T) {
	const query = "SELECT c FROM sbtest1 WHERE id = 4242"
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		logSQL    bool
		took      time.Duration
		errCode   uint16
		wantLog   bool
	}{
		{name: "fast", threshold: time.Second, took: 0},
		{name: "slow", threshold: time.Second, took: 2 * time.Second, wantLog: true},
		{name: "slow with sql", threshold: time.Second, logSQL: true, took: 2 * time.Second, wantLog: true},
		{name: "slow failing", threshold: time.Second, took: 3 * time.Second, errCode: 1146, wantLog: true},
		{name: "slow log off", threshold: 0, took: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := offlineServer(t, "", 1)
			core, logs := observer.New(zapcore.InfoLevel)
			srv.log = zap.New(core)
			srv.metrics.SetSlowLog(tc.threshold, tc.logSQL)
			s := newSession(srv, 7, &benchConn{})
			s.user = "alice"
			replica := srv.topo.Current().Clusters[0].Replicas[0]
			p := append([]byte{protocol.ComQuery}, query...)
			s.rec.plan = srv.router.ClassifyBytes(p[1:])
			s.rec.note(replica, &protocol.RelayResult{Columns: true, Bytes: 100})
			s.client.SentErr = tc.errCode

			s.finishCommand(p, mono.Now()-tc.took)

			if s.rec != (commandRecord{}) || s.client.SentErr != 0 {
				t.Fatalf("the record was not cleared: %+v, SentErr %d", s.rec, s.client.SentErr)
			}
			if m := promtest.Sample(t, srv.metrics.Reg, "sluice_statements_total", map[string]string{"route": "replica", "type": "read"}); m.GetCounter().GetValue() != 1 {
				t.Fatalf("statements_total{replica,read} = %v, want 1", m.GetCounter().GetValue())
			}
			h := promtest.Sample(t, srv.metrics.Reg, "sluice_statement_duration_seconds", map[string]string{"route": "replica"}).GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() < tc.took.Seconds() {
				t.Fatalf("latency histogram: %d samples, sum %v; want 1 sample of >= %v", h.GetSampleCount(), h.GetSampleSum(), tc.took)
			}
			if m := promtest.Sample(t, srv.metrics.Reg, "sluice_relayed_bytes_total", map[string]string{"direction": "to_client"}); m.GetCounter().GetValue() != 100 {
				t.Fatalf("to_client bytes = %v, want 100", m.GetCounter().GetValue())
			}
			if m := promtest.Sample(t, srv.metrics.Reg, "sluice_relayed_bytes_total", map[string]string{"direction": "to_backend"}); m.GetCounter().GetValue() != float64(len(p)) {
				t.Fatalf("to_backend bytes = %v, want %d", m.GetCounter().GetValue(), len(p))
			}
			errs := promtest.Sample(t, srv.metrics.Reg, "sluice_client_errors_total", map[string]string{"code": "1146"})
			if got := errs.GetCounter().GetValue(); (tc.errCode != 0) != (got == 1) {
				t.Fatalf("client_errors_total{code=1146} = %v with error code %d", got, tc.errCode)
			}

			slow := logs.FilterMessage("slow query").All()
			if !tc.wantLog {
				if len(slow) != 0 {
					t.Fatalf("logged %d slow-query lines, want none", len(slow))
				}
				return
			}
			if len(slow) != 1 {
				t.Fatalf("logged %d slow-query lines, want 1", len(slow))
			}
			e := slow[0]
			f := e.ContextMap()
			if e.Level != zapcore.WarnLevel || f["conn_id"] != uint32(7) || f["user"] != "alice" || f["route"] != "replica" ||
				f["backend"] != replica.Address || f["type"] != "read" || f["result_set"] != true {
				t.Fatalf("slow-query line %v %v", e.Level, f)
			}
			if d, _ := f["duration"].(time.Duration); d < tc.took {
				t.Fatalf("duration %v, want >= %v", f["duration"], tc.took)
			}
			if digest, _ := f["digest"].(string); digest == "" || strings.Contains(digest, "4242") {
				t.Fatalf("digest %q: want the normalized text without the literal", digest)
			}
			if sql, ok := f["sql"]; ok != tc.logSQL || (ok && sql != query) {
				t.Fatalf("sql field %q (present %v) with log_sql %v", sql, ok, tc.logSQL)
			}
			if code, ok := f["error_code"]; (tc.errCode != 0) != ok || (ok && code != tc.errCode) {
				t.Fatalf("error_code field %v (present %v), want %d", code, ok, tc.errCode)
			}
		})
	}
}

// TestFinishCommandNotAStatement: a command without a plan (COM_PING, a
// prepare) is neither counted nor timed, but an ERR it sent is.
func TestFinishCommandNotAStatement(t *testing.T) {
	srv := offlineServer(t, "", 1)
	s := newSession(srv, 1, &benchConn{})
	s.client.SentErr = protocol.ERUnknownStmtHandler.Code
	s.finishCommand([]byte{protocol.ComStmtClose, 1, 0, 0, 0}, mono.Now())
	for _, m := range promtest.Gathered(t, srv.metrics.Reg, "sluice_statements_total") {
		if m.GetCounter().GetValue() != 0 {
			t.Fatalf("a command without a plan was counted: %v", m)
		}
	}
	if m := promtest.Sample(t, srv.metrics.Reg, "sluice_client_errors_total", map[string]string{"code": "1243"}); m.GetCounter().GetValue() != 1 {
		t.Fatalf("client_errors_total{code=1243} = %v, want 1", m.GetCounter().GetValue())
	}
}

// BenchmarkFinishCommand is the per-statement cost of the metrics hook: the
// clock read at the start, the counters, the histogram and the clear.
func BenchmarkFinishCommand(b *testing.B) {
	srv := benchServer(b)
	s := newSession(srv, 1, &benchConn{})
	replica := srv.topo.Current().Clusters[0].Replicas[0]
	p := append([]byte{protocol.ComQuery}, benchPointSelect...)
	plan := srv.router.ClassifyBytes(p[1:])
	res := protocol.RelayResult{Columns: true, Bytes: 120}
	b.ReportAllocs()
	for b.Loop() {
		start := mono.Now()
		s.rec.plan = plan
		s.rec.note(replica, &res)
		s.finishCommand(p, start)
	}
}

// TestNoteShardRoute: the route label a sharded statement gets from its
// shard.Route.
func TestNoteShardRoute(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route shard.Route
		want  observe.Route
	}{
		{"unsharded table", shard.Route{Parts: []shard.Part{{Cluster: 0}}}, observe.RouteNone},
		{"one shard", shard.Route{Parts: []shard.Part{{Cluster: 1, Shards: []int{3}}}}, observe.RouteShard},
		{"broadcast read", shard.Route{AnyOne: true, Parts: []shard.Part{{Cluster: 0}, {Cluster: 1}}}, observe.RouteNone},
		{"several shards", shard.Route{Parts: []shard.Part{{Cluster: 0, Shards: []int{0}}, {Cluster: 1, Shards: []int{1}}}}, observe.RouteScatter},
	} {
		s := &Session{}
		s.noteShardRoute(&tc.route)
		if s.rec.route != tc.want {
			t.Errorf("%s: route %q, want %q", tc.name, s.rec.route, tc.want)
		}
	}
}
