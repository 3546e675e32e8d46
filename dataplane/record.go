package dataplane

import (
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// commandRecord is what the client command being served recorded for the
// statement metrics and the slow-query log; Session.finishCommand reads it
// once the command is answered and clears it. It belongs to its Session.
type commandRecord struct {
	// plan is the statement's plan (COM_QUERY, COM_STMT_EXECUTE); nil for
	// a command that is no statement, which is not timed or counted.
	plan *router.Plan
	// sql is the prepared statement's text of a COM_STMT_EXECUTE (a
	// COM_QUERY's is its packet).
	sql string
	// route is set by the sharding path (shard, scatter); otherwise the
	// role of backend, the last backend the command ran on, says it.
	route   observe.Route
	backend *health.Backend
	// errCode is the code of an ERR a backend answered that reached the
	// client some other way than WriteErr or Relay (COM_STMT_PREPARE's).
	errCode uint16
	// affected is the final OK's affected rows, when there was no result
	// set (resultSet).
	affected  uint64
	resultSet bool
	// toClient counts the answer bytes relayed to the client.
	toClient int64
}

// note records one exchange of the command with backend b and its result.
func (r *commandRecord) note(b *health.Backend, res *protocol.RelayResult) {
	r.backend = b
	r.toClient += res.Bytes
	r.resultSet = res.Columns
	r.affected = res.OK.AffectedRows
	if res.Err != nil {
		r.errCode = res.Err.Code
	}
}

// noteShardRoute records the route of a statement on sharded tables: one
// shard, or several (scatter). A statement on unsharded or broadcast tables
// only keeps the route its backend's role gives.
func (s *Session) noteShardRoute(rt *shard.Route) {
	if len(rt.Parts) > 1 && !rt.AnyOne {
		s.rec.route = observe.RouteScatter
		return
	}
	for i := range rt.Parts {
		if rt.Parts[i].Shards != nil {
			s.rec.route = observe.RouteShard
			return
		}
	}
}

// finishCommand accounts for the client command p, read at start (monoNow), once it
// is answered: the ERR it sent to the client by code, the bytes relayed,
// and for a statement that reached a backend its count by route and type,
// its latency, and a slow-query log line when it took slow_query_threshold
// or longer. It allocates nothing unless it logs (or meets an error code
// for the first time).
func (s *Session) finishCommand(p []byte, start time.Duration) {
	r := &s.rec
	code := s.client.SentErr
	if code == 0 {
		code = r.errCode
	}
	route := r.route
	if route == observe.RouteNone && r.backend != nil {
		route = observe.RouteReplica
		if r.backend.Role == health.RoleMaster {
			route = observe.RouteMaster
		}
	}
	var d time.Duration
	if r.plan != nil || s.info.stmtActive {
		// One clock read times the statement for the metrics, the slow
		// log and the digest store.
		d = mono.Now() - start
	}
	s.endStatement(d)
	var kind router.Kind
	if r.plan != nil {
		kind = r.plan.Kind
	}
	if s.env.metrics.Command(code, route, int64(len(p)), r.toClient, r.plan != nil, kind, d) {
		s.logSlow(p, route, code, d)
	}
	*r = commandRecord{}
	s.client.SentErr = 0
}

// logSlow writes the slow-query log line of the statement p that took d.
func (s *Session) logSlow(p []byte, route observe.Route, code uint16, d time.Duration) {
	r := &s.rec
	backend := ""
	if r.backend != nil {
		backend = r.backend.Address
	}
	fields := make([]zap.Field, 0, 9)
	fields = append(fields, zap.String("digest", r.plan.Digest), zap.String("type", r.plan.Kind.String()),
		zap.String("route", route.String()), zap.String("backend", backend), zap.Duration("duration", d))
	if r.resultSet {
		fields = append(fields, zap.Bool("result_set", true))
	} else {
		fields = append(fields, zap.Uint64("affected_rows", r.affected))
	}
	if code != 0 {
		fields = append(fields, zap.Uint16("error_code", code))
	}
	if s.env.metrics.LogSQL() {
		switch {
		case r.sql != "":
			fields = append(fields, zap.String("sql", r.sql))
		case len(p) > 0 && p[0] == protocol.ComQuery:
			fields = append(fields, zap.ByteString("sql", p[1:]))
		}
	}
	s.log().Warn("slow query", fields...)
}
